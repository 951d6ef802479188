"""rtl/ftl/txtable.py in amaranth.sim: a TB class plays the executor (open, pages, first page, close)
and the publisher (free, doom) at random, and checks every output against a reference model of the
table after each operation.  Transactions are found by (owner queue, tid): two queues' same tid are
two transactions, and one queue never finds another's."""

import random

import pytest
from amaranth.sim import Simulator

from rtl.ftl.txtable import NONE, TransactionTable, TxState


class TxModel:
    def __init__(self, slots: int):
        self.state = [TxState.FREE] * slots
        self.tid = [0] * slots
        self.owner = [0] * slots
        self.first = [0] * slots
        self.npages = [0] * slots
        self.started = [0] * slots
        self.doomed = [0] * slots
        self.no_page = [0] * slots

    def find(self, tid, owner):
        for t, (s, x, o) in enumerate(zip(self.state, self.tid, self.owner)):
            if s == TxState.OPEN and x == tid and o == owner:
                return t
        return None

    @property
    def floor(self):
        live = [f for s, f, st in zip(self.state, self.first, self.started) if s != TxState.FREE and st]
        return min(live, default=NONE)


OWNERS = 3          # queue pairs: tids 0..5 of each


class TxTableTB:
    """Plays the executor and the publisher; checks every output (the floor after two scanner passes)."""
    def __init__(self, slots: int, seed: int, operations: int = 400, scan_length: int | None = None):
        self.dut = TransactionTable(slots, owner_bits=2, scan_length=scan_length)
        self.model = TxModel(slots)
        self.slots, self.rng, self.operations = slots, random.Random(seed), operations
        self.seen = {"opened": 0, "full": 0, "closing": 0, "doomed": 0, "no_page": 0, "freed": 0, "started": 0,
                     "shared_tid": 0}
        self.sim = Simulator(self.dut)
        self.sim.add_clock(1e-8)
        self.sim.add_testbench(self.run)

    async def check(self, ctx):
        d, md = self.dut, self.model
        # the floor is a scanner's: as of a pass that began after the change (the firmware's two passes)
        start = ctx.get(d.floor_passes)
        while ctx.get(d.floor_passes) < start + 2:
            await ctx.tick()
        assert ctx.get(d.floor) == md.floor
        assert ctx.get(d.open_count) == md.state.count(TxState.OPEN)
        assert ctx.get(d.doomed) == sum(b << t for t, b in enumerate(md.doomed))
        assert ctx.get(d.has_free) == (TxState.FREE in md.state)
        if TxState.FREE in md.state:
            assert ctx.get(d.free_slot) == md.state.index(TxState.FREE)
        assert ctx.get(d.closing) == (TxState.CLOSING in md.state)
        for tid in range(6):
            for owner in range(OWNERS):
                ctx.set(d.tid, tid)
                ctx.set(d.owner, owner)
                await ctx.tick()                  # the match is registered
                t = md.find(tid, owner)
                assert ctx.get(d.found) == (t is not None)
                if t is not None:
                    assert ctx.get(d.found_slot) == t and ctx.get(d.found_npages) == md.npages[t]
        for t in range(self.slots):
            ctx.set(d.slot, t)
            ctx.set(d.view.slot, self.slots - 1 - t)
            ctx.set(d.peek, t)
            v = self.slots - 1 - t
            assert (ctx.get(d.npages), ctx.get(d.first), ctx.get(d.started), ctx.get(d.doomed_no_page)) == \
                (md.npages[t], md.first[t], md.started[t], md.no_page[t])
            assert (ctx.get(d.view.state), ctx.get(d.view.tid), ctx.get(d.view.owner), ctx.get(d.view.npages),
                    ctx.get(d.view.first), ctx.get(d.view.started), ctx.get(d.view.doomed)) == \
                (md.state[v], md.tid[v], md.owner[v], md.npages[v], md.first[v], md.started[v], md.doomed[v])
            assert ctx.get(d.peek_first) == md.first[t]

    async def pulse(self, ctx, **values):
        for name, v in values.items():
            ctx.set(getattr(self.dut, name), v)
        await ctx.tick()
        for name in values:
            if name in ("open", "add_pages", "close", "start", "free", "doom"):
                ctx.set(getattr(self.dut, name), 0)

    async def run(self, ctx):
        d, md, rng = self.dut, self.model, self.rng
        vseq = 100
        await self.check(ctx)
        for _ in range(self.operations):
            op = rng.choice(["open", "open", "pages", "pages", "start", "start", "close", "publish", "publish", "doom"])
            opened = [t for t in range(self.slots) if md.state[t] == TxState.OPEN]
            closing = [t for t in range(self.slots) if md.state[t] == TxState.CLOSING]
            if op == "open":
                owner = rng.randrange(OWNERS)
                tid = rng.choice([x for x in range(6) if md.find(x, owner) is None])
                if TxState.FREE not in md.state:
                    self.seen["full"] += 1
                    continue
                t = md.state.index(TxState.FREE)
                self.seen["shared_tid"] += any(md.find(tid, o) is not None for o in range(OWNERS))
                await self.pulse(ctx, open=1, slot=t, tid=tid, owner=owner)
                md.state[t], md.tid[t], md.owner[t], md.npages[t], md.started[t], md.doomed[t], md.no_page[t] = \
                    TxState.OPEN, tid, owner, 0, 0, 0, 0
                self.seen["opened"] += 1
            elif op == "pages" and opened:
                t, n = rng.choice(opened), rng.randrange(1, 9)
                await self.pulse(ctx, add_pages=1, slot=t, pages=n)
                md.npages[t] += n
            elif op == "start" and opened:
                t = rng.choice([t for t in opened if not md.started[t]] or opened)
                vseq += rng.randrange(1, 50)
                await self.pulse(ctx, start=1, slot=t, first_vseq=vseq)
                md.first[t], md.started[t] = vseq, 1
                self.seen["started"] += 1
            elif op == "close" and opened:
                t = rng.choice(opened)
                await self.pulse(ctx, close=1, slot=t)
                md.state[t] = TxState.CLOSING
                self.seen["closing"] += 1
            elif op == "publish" and closing:
                t = rng.choice(closing)
                await self.pulse(ctx, free=1, free_which=t)
                md.state[t] = TxState.FREE
                self.seen["freed"] += 1
            elif op == "doom" and (opened or closing):
                t, no_page = rng.choice(opened + closing), rng.randrange(2)
                await self.pulse(ctx, doom=1, doom_which=t, doom_no_page=no_page)
                md.doomed[t] = 1
                md.no_page[t] |= no_page
                self.seen["doomed"] += 1
                self.seen["no_page"] += no_page
            await self.check(ctx)


@pytest.mark.parametrize("slots,scan_length", [(1, None), (4, None), (5, None), (5, 8)])
def test_the_table_follows_the_model_under_random_opens_closes_and_publications(slots, scan_length):
    tb = TxTableTB(slots, seed=slots, scan_length=scan_length)
    tb.sim.run()
    assert all(tb.seen[k] > 0 for k in ("opened", "full", "closing", "doomed", "no_page", "freed", "started")), tb.seen
    assert slots == 1 or tb.seen["shared_tid"] > 0, tb.seen       # one tid open on two queues at once


def test_a_freeing_publication_and_an_open_of_the_same_cycle_leave_the_open():
    """The executor's change wins over a publication's in the same cycle (it acts on what it saw)."""
    dut = TransactionTable(2)

    async def run(ctx):
        ctx.set(dut.tid, 7)
        ctx.set(dut.open, 1)
        ctx.set(dut.free, 1)
        await ctx.tick()
        ctx.set(dut.open, 0)
        ctx.set(dut.free, 0)
        ctx.set(dut.view.slot, 0)
        assert ctx.get(dut.view.state) == TxState.OPEN and ctx.get(dut.view.tid) == 7

    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_testbench(run)
    sim.run()


def test_a_match_from_the_cycle_before_holds_only_while_the_slot_is_open():
    """``found`` is registered: a slot that stops being OPEN in the cycle of the match is not found."""
    dut = TransactionTable(2)

    async def run(ctx):
        ctx.set(dut.tid, 7)
        ctx.set(dut.open, 1)
        await ctx.tick()
        ctx.set(dut.open, 0)
        await ctx.tick()
        assert ctx.get(dut.found) and ctx.get(dut.found_slot) == 0
        ctx.set(dut.close, 1)          # matched in this cycle, CLOSING after it
        await ctx.tick()
        ctx.set(dut.close, 0)
        assert not ctx.get(dut.found)

    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_testbench(run)
    sim.run()
