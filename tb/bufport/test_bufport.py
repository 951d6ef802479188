"""rtl/ftl/bufport.py in amaranth.sim: three users write and read back bursts
through one page buffer (the real rtl.nand.pagebuf.PageBuffer); bursts are
never interleaved, data is intact, and everyone gets the port."""

import random

from amaranth import Module
from amaranth.lib import wiring
from amaranth.sim import Simulator

from rtl.ftl.bufport import BufferPortArbiter
from rtl.nand.pagebuf import PageBuffer

N, BURSTS, WORDS = 3, 6, 8


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


def test_bursts_are_whole_and_data_intact():
    top = Top()
    log = []                               # (user, burst) of every granted write, in time order
    results = {i: [] for i in range(N)}

    def user(i):
        async def run(ctx):
            u = top.arb.users[i]
            rng = random.Random(i)
            for b in range(BURSTS):
                for _ in range(rng.randrange(3)):
                    await ctx.tick()
                ctx.set(u.request, 1)
                await ctx.tick().until(u.grant)
                base = (i * 2 + b % 2) * 4        # words of this user's own area
                words = [rng.getrandbits(32) for _ in range(4)]
                for k, w in enumerate(words):
                    ctx.set(u.port.addr, base + k)
                    ctx.set(u.port.w_data, w)
                    ctx.set(u.port.w_en, 0xF)
                    await ctx.tick()
                    log.append((i, b))
                ctx.set(u.port.w_en, 0)
                got = []
                for k in range(4):
                    ctx.set(u.port.addr, base + k)
                    await ctx.tick()
                    got.append(ctx.get(u.port.r_data))
                results[i].append((got, words))
                ctx.set(u.request, 0)
                await ctx.tick()
        return run

    sim = Simulator(top)
    sim.add_clock(1e-8)
    for i in range(N):
        sim.add_testbench(user(i))
    sim.run()
    for i in range(N):
        assert len(results[i]) == BURSTS
        assert all(got == want for got, want in results[i]), (i, results[i])
    # each burst's four writes are consecutive: no other user slipped in
    runs = [log[k:k + 4] for k in range(0, len(log), 4)]
    assert all(len(set(r)) == 1 for r in runs), log
    assert len({u for u, _ in log[:4 * N]}) > 1, "round robin: the first bursts come from several users"
