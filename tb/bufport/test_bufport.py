"""rtl/ftl/bufport.py in amaranth.sim: a TB class plays three users that write and read back bursts
through one page buffer (the real rtl.nand.pagebuf.PageBuffer, reads pipelined at its
HOST_READ_LATENCY), with idle gaps before their requests and idle cycles inside their bursts, and junk
on their ports while they wait; a shadow of the buffer checks every word read back, and a monitor
checks each cycle that one user at most holds the grant, keeps it while it requests, gets it in
round-robin order, and that only its port reaches the memory.  Each burst ends with a write in its
last requesting cycle, and the next owner reads that word first thing in its granted cycle: the
handover is safe with the buffer's register stage.  Bursts are never interleaved, data is intact, and
everyone gets the port."""

import random

from amaranth import Module
from amaranth.lib import wiring
from amaranth.sim import Simulator

from rtl.ftl.bufport import BufferPortArbiter
from rtl.nand.pagebuf import HOST_READ_LATENCY, PageBuffer

N, BURSTS, WORDS = 3, 6, 4


class Top(wiring.Component):
    def __init__(self):
        self.pb = PageBuffer(slots=4, slot_bytes=64)
        self.arb = BufferPortArbiter(N, self.pb.host.addr.shape().width)
        super().__init__({})

    def elaborate(self, platform):
        m = Module()
        m.submodules.pb, m.submodules.arb = self.pb, self.arb
        wiring.connect(m, self.arb.buf, self.pb.host)
        return m


def area(user: int, burst: int) -> int:
    """The first word of the user's own area for that burst (two areas each, used in turn)."""
    return (user * 2 + burst % 2) * WORDS


class BufPortTB:
    """Owns the buffer and the arbiter, their clock, one driver per user, the shadow of the buffer (the
    reference) and the monitor of the arbiter (round-robin model, port routing)."""

    def __init__(self, seed: int = 0, *, idle: float = 0.6, hold: float = 0.3, junk: float = 0.5, max_gap: int = 3):
        self.top = Top()
        self.rng = random.Random(seed)
        self.idle, self.hold, self.junk, self.max_gap = idle, hold, junk, max_gap
        self.memory = {}                       # word address -> what the owner of the port wrote last
        self.log = []                          # (user, burst) of every granted write, in time order
        self.results = {i: [] for i in range(N)}
        self.tail = None                       # (address, word) of the last burst's last write
        self.handovers = []                    # (read by the next owner, the previous owner's last write)
        self.seen = {"gaps": 0, "holds": 0, "junk": 0, "contended": 0}
        self.grants = []                       # the owners in the order they got the port
        self.done = []
        self.sim = Simulator(self.top)
        self.sim.add_clock(1e-8)
        for i in range(N):
            async def user(ctx, i=i):
                await self.user(ctx, i)
            self.sim.add_testbench(user)
        self.sim.add_testbench(self.monitor)

    async def user(self, ctx, i):
        u, rng = self.top.arb.users[i], self.rng
        for b in range(BURSTS):
            if rng.random() < self.idle:                     # idle before the request
                self.seen["gaps"] += 1
                await ctx.tick().repeat(rng.randint(1, self.max_gap))
            ctx.set(u.request, 1)
            while True:
                if rng.random() < self.junk:                 # junk on the port while waiting: must not land
                    other = rng.choice([v for v in range(N) if v != i])
                    ctx.set(u.port.addr, area(other, rng.randrange(2)) + rng.randrange(WORDS))
                    ctx.set(u.port.w_data, rng.getrandbits(32))
                    ctx.set(u.port.w_en, 0xF)
                    self.seen["junk"] += 1
                await ctx.tick()
                ctx.set(u.port.w_en, 0)
                if ctx.get(u.grant):
                    break
            if self.tail is not None:                        # the previous owner's last write, at once
                addr, want = self.tail
                self.handovers.append(((await self.read(ctx, u, [addr]))[0], want))
            base = area(i, b)
            words = [rng.getrandbits(32) for _ in range(WORDS)]
            for k, w in enumerate(words):
                if rng.random() < self.hold:                 # idle cycles inside the burst: the port stays ours
                    self.seen["holds"] += 1
                    ctx.set(u.port.w_en, 0)
                    await ctx.tick().repeat(rng.randint(1, self.max_gap))
                ctx.set(u.port.addr, base + k)
                ctx.set(u.port.w_data, w)
                ctx.set(u.port.w_en, 0xF)
                await ctx.tick()
                self.memory[base + k] = w
                self.log.append((i, b))
            ctx.set(u.port.w_en, 0)
            got = await self.read(ctx, u, [base + k for k in range(WORDS)])
            self.results[i].append((got, [self.memory[base + k] for k in range(WORDS)], words))
            # a last write in the last cycle the port is ours: the next owner reads it back
            tail = (base + rng.randrange(WORDS), rng.getrandbits(32))
            ctx.set(u.port.addr, tail[0])
            ctx.set(u.port.w_data, tail[1])
            ctx.set(u.port.w_en, 0xF)
            await ctx.tick()
            self.memory[tail[0]] = tail[1]
            self.tail = tail
            self.log.append((i, b))
            ctx.set(u.port.w_en, 0)
            ctx.set(u.request, 0)
            await ctx.tick()
        self.done.append(i)

    async def read(self, ctx, u, addrs):
        """Read ``addrs`` through user ``u``'s port, an address a cycle: each word comes
        HOST_READ_LATENCY cycles after its address."""
        got = []
        for k in range(len(addrs) + HOST_READ_LATENCY - 1):
            if k < len(addrs):
                ctx.set(u.port.addr, addrs[k])
            await ctx.tick()
            if k >= HOST_READ_LATENCY - 1:
                got.append(ctx.get(u.port.r_data))
        return got

    async def monitor(self, ctx):
        """Each cycle: one grant at most, kept while its owner requests, handed round-robin; the memory
        sees the owner's port and nobody else's; every user sees the memory's read data."""
        arb = self.top.arb
        users = arb.users
        owner, last = None, 0                  # the arbiter starts as if user 0 had the port last
        requests = [0] * N
        while len(self.done) < N:
            _, _, *values = await ctx.tick().sample(
                *(u.request for u in users), *(u.grant for u in users), arb.buf.addr, arb.buf.w_en,
                arb.buf.w_data, *(u.port.addr for u in users), *(u.port.w_en for u in users),
                *(u.port.w_data for u in users))
            was_requesting = requests
            requests, grants = values[:N], values[N:2 * N]
            addr, w_en, w_data = values[2 * N:2 * N + 3]
            uaddr, uw_en, uw_data = values[2 * N + 3:3 * N + 3], values[3 * N + 3:4 * N + 3], values[4 * N + 3:]
            held = [i for i in range(N) if grants[i]]
            assert len(held) <= 1, f"grants {grants}"
            if owner is not None and was_requesting[owner]:
                assert held == [owner], f"user {owner} lost the port while requesting"
            if held and held[0] != owner:
                assert owner is None, f"the port went from {owner} to {held[0]} without a free cycle"
                # a new owner: the first requester after the last owner, cyclically (last itself last)
                want = next((last + k) % N for k in range(1, N + 1) if was_requesting[(last + k) % N])
                assert held[0] == want, (held, last, was_requesting)
                self.seen["contended"] += sum(was_requesting) > 1
                last = held[0]
                self.grants.append(last)
            owner = held[0] if held else None
            if owner is not None:
                assert (addr, w_en, w_data) == (uaddr[owner], uw_en[owner], uw_data[owner])
            else:
                assert w_en == 0, "a write reached the memory with nobody holding the port"
            for u in users:
                assert ctx.get(u.port.r_data) == ctx.get(arb.buf.r_data)


def test_bursts_are_whole_and_data_intact():
    tb = BufPortTB(seed=0)
    tb.sim.run()
    for i in range(N):
        assert len(tb.results[i]) == BURSTS
        assert all(got == shadow == words for got, shadow, words in tb.results[i]), (i, tb.results[i])
    # each burst's writes (its words and its last write) are consecutive: no other user slipped in
    runs = [tb.log[k:k + WORDS + 1] for k in range(0, len(tb.log), WORDS + 1)]
    assert all(len(set(r)) == 1 for r in runs), tb.log
    assert len({u for u, _ in tb.log[:(WORDS + 1) * N]}) > 1, "round robin: the first bursts come from several users"
    # every owner after the first read the previous owner's last write in its first cycle
    assert len(tb.handovers) == N * BURSTS - 1 and all(got == want for got, want in tb.handovers), tb.handovers
    assert len(tb.grants) == N * BURSTS and sorted(tb.grants) == sorted(list(range(N)) * BURSTS), tb.grants
    # the run proves it exercised them: idle gaps, idle cycles inside bursts, junk while waiting, contention
    assert all(tb.seen[k] >= 5 for k in ("gaps", "holds", "junk", "contended")), tb.seen
