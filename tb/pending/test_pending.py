"""rtl/ftl/pending.py in amaranth.sim against a reference model: a TB class plays three users at once,
each sending random RESERVE / STAGE / SCAN / WALK / CAS requests (after idle gaps) and taking the
answers under backpressure; the table serves them one at a time (lowest user first), and every answer
is checked against the model in the order the table took the requests.  The free count follows; a full
table answers RESERVE with no hit; the room left for staging follows the firmware's budget."""

import random
from collections import deque

import pytest
from amaranth.sim import Simulator

from atomflash.spec import PPA_UNMAPPED
from rtl.ftl.pending import PendingOp, PendingTable, pending_request

ENTRIES, OWNERS, USERS = 16, 4, 3


class PendingModel:
    """The table as the module docstring states it: entry index -> [owner, lba, ppa], and its free
    entries in the order they are handed out (a FIFO: every entry in index order from reset, then each
    walked entry in the order walked), so a RESERVE's entry is known when the table takes it."""

    def __init__(self, size: int):
        self.size = size
        self.entries = {}
        self.free = deque(range(size))

    def reserve(self, owner, lba):
        """The entry a RESERVE taken now gets (None: the table is full)."""
        if not self.free:
            return None
        index = self.free.popleft()
        assert index not in self.entries, f"entry {index} handed out twice"
        self.entries[index] = [owner, lba, PPA_UNMAPPED]
        return index

    def stage(self, index, ppa):
        """The previous ppa, or None when the entry was walked meanwhile (the table still answers its
        old ppa: staging a freed entry is a caller's bug)."""
        if index not in self.entries:
            return None
        old, self.entries[index][2] = self.entries[index][2], ppa
        return old

    def scan(self, owner, lba, nlb):
        return sorted((i, e[1] - lba, e[2]) for i, e in self.entries.items()
                      if e[0] == owner and lba <= e[1] < lba + nlb)

    def walk(self, owner):
        out = sorted((i, e[1], e[2]) for i, e in self.entries.items() if e[0] == owner)
        for i, _, _ in out:
            del self.entries[i]
            self.free.append(i)
        return out

    def cas(self, ppa, new):
        holders = sorted(i for i, e in self.entries.items() if e[2] == ppa)
        if holders:
            self.entries[holders[0]][2] = new
        return holders


class PendingTB:
    """Owns the table, its clock, one driver per user (requests after idle gaps, answers taken under
    backpressure, both from a seeded generator) and the reference model."""

    def __init__(self, seed: int, *, requests: int = 150, idle: float = 0.7, backpressure: float = 0.3,
                 max_gap: int = 3):
        self.dut = PendingTable(entries=ENTRIES, owners=OWNERS, users=USERS)
        self.model = PendingModel(ENTRIES)
        self.rng = random.Random(seed)                  # the requests
        self.timing = random.Random(seed + 1000)        # the idle gaps and the stalls
        self.requests, self.idle, self.backpressure, self.max_gap = requests, idle, backpressure, max_gap
        self.checked = {"ops": 0, "full": 0, "walked": 0, "cas_hit": 0, "scan_hits": 0}
        self.gaps = 0                                   # requests sent after an idle gap
        self.stalls = {op: 0 for op in PendingOp}       # answers the table held while ready was low
        self.done = []
        self.sim = Simulator(self.dut)
        self.sim.add_clock(1e-8)
        for u in range(USERS):
            async def user(ctx, u=u):
                await self.user(ctx, u)
            self.sim.add_testbench(user)
        self.sim.add_testbench(self.quiet)

    # -- the drivers -------------------------------------------------------------------------------
    async def request(self, ctx, port, accepted, **fields):
        """Send one request; ``accepted()`` runs when the table takes it (requests are served one at a
        time, in the order taken, so that is when its expectation is fixed); returns (expectation,
        answers up to the last)."""
        if self.timing.random() < self.idle:
            self.gaps += 1
            await ctx.tick().repeat(self.timing.randint(1, self.max_gap))
        fields = {name: 0 for name, _ in pending_request(ENTRIES, OWNERS)} | fields
        ctx.set(port.req.payload, fields)
        ctx.set(port.req.valid, 1)
        await ctx.tick().until(port.req.ready)
        ctx.set(port.req.valid, 0)
        expectation = accepted()
        answers = []
        while True:
            ready = self.timing.random() >= self.backpressure
            ctx.set(port.resp.ready, ready)
            _, _, valid, a = await ctx.tick().sample(port.resp.valid, port.resp.payload)
            if valid and not ready:
                self.stalls[fields["op"]] += 1
            if valid and ready:
                answers.append(dict(last=a.last, hit=a.hit, entry=a.entry, idx=a.idx, lba=a.lba, ppa=a.ppa))
                if a.last:
                    break
        ctx.set(port.resp.ready, 0)
        return expectation, answers

    # -- the scenarios: one request each, checked against the model ----------------------------------
    async def reserve(self, ctx, port, owner):
        # the model takes the entry when the table takes the request: a later request of another user
        # may be served before this answer arrives, and sees the entry reserved
        md, lba = self.model, self.rng.randrange(8)
        entry, ans = await self.request(ctx, port, lambda: md.reserve(owner, lba), op=PendingOp.RESERVE,
                                        owner=owner, lba=lba)
        if entry is None:
            assert not ans[0]["hit"], "RESERVE of a full table hit"
            self.checked["full"] += 1
        else:
            assert ans[0]["hit"] and ans[0]["entry"] == entry, (ans, entry)

    async def stage(self, ctx, port, owner):
        md = self.model
        if not md.entries:
            return False
        index = self.rng.choice(sorted(md.entries))
        ppa = self.rng.randrange(1 << 20)
        old, ans = await self.request(ctx, port, lambda: md.stage(index, ppa), op=PendingOp.STAGE, entry=index,
                                      ppa=ppa)
        assert len(ans) == 1 and ans[0]["last"]
        if old is None:          # staged a freed entry: not counted
            return False
        assert ans[0]["ppa"] == old, (ans, old)

    async def scan(self, ctx, port, owner):
        lba, nlb = self.rng.randrange(8), self.rng.randrange(1, 5)
        expected, ans = await self.request(ctx, port, lambda: self.model.scan(owner, lba, nlb), op=PendingOp.SCAN,
                                           owner=owner, lba=lba, nlb=nlb)
        assert ans[-1]["last"] and not ans[-1]["hit"]
        got = [(a["entry"], a["idx"], a["ppa"]) for a in ans[:-1]]
        assert got == expected, (got, expected)
        self.checked["scan_hits"] += len(got)

    async def walk(self, ctx, port, owner):
        expected, ans = await self.request(ctx, port, lambda: self.model.walk(owner), op=PendingOp.WALK, owner=owner)
        got = [(a["entry"], a["lba"], a["ppa"]) for a in ans[:-1]]
        assert got == expected, (got, expected)
        self.checked["walked"] += len(got)

    async def cas(self, ctx, port, owner):
        md, rng = self.model, self.rng
        staged = [i for i, e in md.entries.items() if e[2] != PPA_UNMAPPED]
        ppa = md.entries[rng.choice(staged)][2] if staged and rng.random() < 0.7 else \
            (1 << 21) + rng.randrange(100)                        # no entry holds it
        new = (1 << 22) + rng.randrange(1 << 20)
        holders, ans = await self.request(ctx, port, lambda: md.cas(ppa, new), op=PendingOp.CAS, ppa=ppa, new=new)
        assert len(ans) == 1 and ans[0]["last"]
        assert ans[0]["hit"] == bool(holders)
        if holders:
            assert ans[0]["entry"] == holders[0]
            self.checked["cas_hit"] += 1

    async def user(self, ctx, u):
        port = self.dut.users[u]
        ops = [self.reserve] * 3 + [self.stage] * 2 + [self.scan, self.walk, self.cas]
        await ctx.tick().until(self.dut.ready)
        for _ in range(self.requests):
            op = self.rng.choice(ops)
            if await op(ctx, port, self.rng.randrange(OWNERS)) is not False:
                self.checked["ops"] += 1
        self.done.append(u)

    async def quiet(self, ctx):
        """When every user is done: the free count and the room the budget leaves follow the model."""
        d, md = self.dut, self.model
        while len(self.done) < USERS:
            await ctx.tick()
        await ctx.tick().repeat(3)
        assert ctx.get(d.free) == ENTRIES - len(md.entries)
        # the room a new TX_WRITE or APPEND has: the free entries, no more than the budget leaves
        free, used = ENTRIES - len(md.entries), len(md.entries)
        assert used > 1, "the run should leave entries in use"
        for budget, room in ((0, free), (used, 0), (used - 1, 0), (used + 2, min(2, free)), (ENTRIES, free)):
            ctx.set(d.budget, budget)
            await ctx.tick()                  # room is registered
            assert ctx.get(d.room) == room, (budget, used)


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_pending_table(seed):
    tb = PendingTB(seed)
    tb.sim.run()
    checked = tb.checked
    assert checked["ops"] > 300 and checked["walked"] and checked["cas_hit"] and checked["scan_hits"], checked
    # the run proves it exercised the stalls: requests after idle gaps, answers held under backpressure,
    # inside the table's scans too (the read port waits)
    assert tb.gaps > 50, tb.gaps
    assert all(tb.stalls[op] > 0 for op in (PendingOp.RESERVE, PendingOp.SCAN, PendingOp.WALK)), tb.stalls
