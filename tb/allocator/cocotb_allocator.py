"""cocotb tests for the page allocator: striping, seqs, block turnover, starvation.

``AllocatorTB`` owns the allocator, its clock, the drivers (free blocks and seq loads from
:class:`~sim.harness.streams.StreamSource` with seeded idle gaps; pages taken by a credit
:class:`~sim.harness.streams.FullRateStreamSink` under backpressure, one per :meth:`AllocatorTB.take`,
as fast as they are offered when taken in a row, with ``demand`` up while a take waits; closed blocks by a :class:`~sim.harness.streams.SettledStreamSink`
under backpressure), the reference (:class:`AllocatorModel`, the rule in plain Python) and the scoreboard:
every page taken and every block closed is the model's.  Payloads go through the allocator's port
layouts (``free``/``closed``: die and block; ``alloc``: ``spec.PPA`` and seq)."""

import os
from collections import deque

import cocotb
from cocotb.clock import Clock
from cocotb.result import SimTimeoutError
from cocotb.triggers import ClockCycles, FallingEdge, ReadOnly, RisingEdge, with_timeout
from cocotb.utils import get_sim_steps

from rtl.ftl.allocator import PageAllocator
from sim.harness.layouts import pack, unpack
from sim.harness.streams import FullRateStreamSink, SettledStreamSink, StreamSource

CHANNELS, WAYS, LUNS = (int(os.environ[k]) for k in ("CHANNELS", "WAYS", "LUNS"))
DIES = CHANNELS * WAYS * LUNS
_PORTS = PageAllocator(channels=CHANNELS, ways=WAYS, luns=LUNS)
BLOCK = _PORTS.free.payload.shape()           # free and closed: {die, block}
ALLOC = _PORTS.alloc.payload.shape()          # {ppa: spec.PPA, seq}
LEVEL_BITS, FREE_DEPTH = _PORTS.level_bits, _PORTS.free_depth
PERIOD_NS = 10


def die_of(channel, way, lun):
    return (lun * WAYS + way) * CHANNELS + channel


def place_of(die):
    """(channel, way, lun) of a die."""
    return die % CHANNELS, (die // CHANNELS) % WAYS, die // (CHANNELS * WAYS)


class AllocatorModel:
    """The allocation rule: per die an open block (and its next page) and a FIFO of erased blocks; a page
    comes from the forced die while ``force`` is set, else from the first die with an open block at or
    after the one after the last die served (channels first); seqs are consecutive from the last load; a
    block whose last page goes out is closed and the die opens its next block.  (The RTL opens it a cycle
    later, which changes the order only if another die is served in that cycle: these tests close blocks
    on one die only.)"""

    def __init__(self, pages_per_block):
        self.ppb = pages_per_block
        self.open = {}                              # die -> [block, next page]
        self.queued = {d: deque() for d in range(DIES)}
        self.next_die = 0
        self.seq = 0
        self.forced = None                          # the forced die, or None
        self.closed = []                            # (die, block), in closing order

    def give(self, die, block):
        self.queued[die].append(block)
        self._open(die)

    def _open(self, die):
        if die not in self.open and self.queued[die]:
            self.open[die] = [self.queued[die].popleft(), 0]

    def pick(self):
        """The die the next page comes from, or None (no page offered)."""
        if self.forced is not None:
            return self.forced if self.forced in self.open else None
        return next((d for d in ((self.next_die + k) % DIES for k in range(DIES)) if d in self.open), None)

    def take(self):
        """The next page as the allocator hands it out: (channel, way, lun, block, page, seq), or None."""
        die = self.pick()
        if die is None:
            return None
        block, page = self.open[die]
        got = (*place_of(die), block, page, self.seq)
        self.seq += 1
        self.next_die = (die + 1) % DIES
        if page == self.ppb - 1:
            del self.open[die]
            self.closed.append((die, block))
            self._open(die)
        else:
            self.open[die][1] += 1
        return got


class AllocatorTB:
    def __init__(self, dut, seed=1, *, idle=0.3, backpressure=0.3):
        self.dut, self.clk = dut, dut.clk
        self.idle, self.backpressure, self.seed = idle, backpressure, seed
        self.model = None
        self.free = self.seq_load = self.alloc = self.closed = None
        self.asked = 0              # pages take() asked for (the sink's credit covers the ones not taken yet)
        cocotb.start_soon(Clock(dut.clk, PERIOD_NS, "ns").start())
        cocotb.start_soon(self._demand())

    async def _demand(self):
        """``demand`` up while a take waits for its page (the sink has credit); set on falling edges, so it
        is down by the clock edge after the transfer, as the log writer's request is."""
        while True:
            await FallingEdge(self.clk)
            self.dut.demand.value = int(self.alloc is not None and self.alloc.credit > 0)

    async def reset(self, pages_per_block):
        d = self.dut
        d.rst.value = 1
        d.free__valid.value = 0
        d.alloc__ready.value = 0
        d.seq_load__valid.value = 0
        d.closed__ready.value = 0
        d.force.value = 0
        d.demand.value = 0
        d.force_die.value = 0
        d.pages_per_block.value = pages_per_block
        await ClockCycles(d.clk, 3)
        d.rst.value = 0
        s = self.seed
        self.model = AllocatorModel(pages_per_block)
        self.free = StreamSource(d, "free", self.clk, idle=self.idle, max_gap=3, seed=s)
        self.seq_load = StreamSource(d, "seq_load", self.clk, idle=self.idle, max_gap=3, seed=s + 1)
        self.alloc = FullRateStreamSink(d, "alloc", self.clk, credit=0, backpressure=self.backpressure, max_gap=3,
                                        seed=s + 2)
        # a closed block may wait long (the firmware collects it): the allocator must hold pages meanwhile; settled:
        # a plain StreamSink records a payload even when valid fell before its ready (a report withdrawn)
        self.closed = SettledStreamSink(d, "closed", self.clk, backpressure=self.backpressure, max_gap=8, seed=s + 3)

    # -- the drivers -------------------------------------------------------------------------------------
    async def give(self, die, block):
        self.model.give(die, block)
        await self.free.send(pack(BLOCK, die=die, block=block))

    async def load_seq(self, seq):
        self.model.seq = seq
        await self.seq_load.send(seq)

    def force(self, die):
        """``force``/``force_die``: the next pages from ``die`` only (None: the round robin)."""
        self.model.forced = die
        self.dut.force.value = int(die is not None)
        if die is not None:
            self.dut.force_die.value = die

    async def take(self, limit=50):
        """Allocate one page: (channel, way, lun, block, page, seq), the model's; None when none comes in
        ``limit`` cycles (the request stays: the next take gets the page that comes)."""
        self.asked += 1
        if len(self.alloc.items) + max(self.alloc.credit, 0) < self.asked:
            self.alloc.grant(1)
        try:
            await with_timeout(self.alloc.wait_for(self.asked), limit * PERIOD_NS, "ns")
        except SimTimeoutError:
            self.asked -= 1
            assert self.model.pick() is None, f"no page in {limit} cycles, the model has one on die {self.model.pick()}"
            return None
        v = unpack(ALLOC, self.alloc.items[self.asked - 1])
        f = v["ppa"]["ppa"]
        got = (f["channel"], f["way"], f["lun"], f["block"], f["page"], v["seq"])
        want = self.model.take()
        assert got == want, f"page #{self.asked}: RTL {got} != model {want}"
        return got

    # -- the scoreboard ------------------------------------------------------------------------------------
    async def closed_blocks(self, limit=50):
        """The blocks closed so far, (die, block) in order: the model's, and no more come."""
        n = len(self.model.closed)
        await with_timeout(self.closed.wait_for(n), limit * PERIOD_NS, "ns")
        await ClockCycles(self.clk, 10)
        got = [(b["die"], b["block"]) for b in (unpack(BLOCK, v) for v in self.closed.items)]
        assert got == self.model.closed, f"closed: RTL {got} != model {self.model.closed}"
        return got

    def level(self, die):
        return (int(self.dut.free_level.value) >> (die * LEVEL_BITS)) & ((1 << LEVEL_BITS) - 1)


@cocotb.test()
async def pages_stripe_across_channels_then_ways(dut):
    tb = AllocatorTB(dut, seed=1)
    await tb.reset(pages_per_block=4)
    for die in range(DIES):
        await tb.give(die, 100 + die)
    await tb.load_seq(1000)
    await ClockCycles(dut.clk, 2)
    got = [await tb.take() for _ in range(2 * DIES)]
    dies = [die_of(c, w, l) for c, w, l, *_ in got]
    assert dies == list(range(DIES)) * 2, f"not striped: {dies}"
    assert [g[0] for g in got[:CHANNELS]] == list(range(CHANNELS)), "channels must alternate first"
    assert all(g[3] == 100 + die_of(*g[:3]) for g in got), "page not in its die's open block"
    assert [g[4] for g in got] == [0] * DIES + [1] * DIES
    assert [g[5] for g in got] == list(range(1000, 1000 + 2 * DIES)), "seqs must be consecutive"
    # the run exercised them: blocks offered after idle gaps, pages taken after stalls
    assert tb.free.gaps and tb.alloc.stalls, (tb.free.gaps, tb.alloc.stalls)
    times = tb.alloc.times
    # the demand is seen an edge after it is raised, a page chosen the edge after and offered from then
    # on, and a demand seen with a transfer is forgotten: pages asked for in a row go out every third
    # edge at best, and this run reached that
    gaps = [b - a for a, b in zip(times, times[1:])]
    assert min(gaps) == 3 * get_sim_steps(PERIOD_NS, "ns"), gaps


@cocotb.test()
async def full_blocks_close_and_the_next_block_opens(dut):
    tb = AllocatorTB(dut, seed=5)
    await tb.reset(pages_per_block=2)
    await tb.give(3, 7)
    await tb.give(3, 8)
    pages = [await tb.take() for _ in range(4)]
    assert [(p[3], p[4]) for p in pages] == [(7, 0), (7, 1), (8, 0), (8, 1)]
    assert await tb.closed_blocks() == [(3, 7), (3, 8)]
    assert await tb.take(limit=20) is None, "no block left: allocation must wait"
    assert dut.starved.value == 1
    await tb.give(5, 9)
    await ReadOnly()
    assert dut.starved.value == 0, "a block taken: not starved, before the FIFO shows it"
    await RisingEdge(dut.clk)
    p = await tb.take()
    assert die_of(*p[:3]) == 5 and p[3] == 9
    assert tb.closed.stalls and tb.alloc.stalls, (tb.closed.stalls, tb.alloc.stalls)
    # block 7's report was held back for cycles, and no page went out before it was taken
    period = get_sim_steps(PERIOD_NS, "ns")
    assert tb.alloc.times[1] + 3 * period < tb.closed.times[0] <= tb.alloc.times[2], (tb.alloc.times, tb.closed.times)


@cocotb.test()
async def free_fifo_applies_backpressure_and_reports_level(dut):
    tb = AllocatorTB(dut, seed=3)
    await tb.reset(pages_per_block=8)
    for b in range(FREE_DEPTH + 1):  # one opens, four queue
        await tb.give(0, b)
    await ClockCycles(dut.clk, 2)
    assert tb.level(0) == FREE_DEPTH
    sending = cocotb.start_soon(tb.give(0, 99))
    await ClockCycles(dut.clk, 2 + tb.free.max_gap)
    await ReadOnly()
    assert dut.free__valid.value == 1 and dut.free__ready.value == 0, "a full free FIFO must refuse"
    await RisingEdge(dut.clk)
    assert not sending.done() and tb.level(0) == FREE_DEPTH
    # the open block fills and closes, the die opens the next queued one: the refused block goes in
    for _ in range(8):
        await tb.take()
    assert await tb.closed_blocks() == [(0, 0)]
    await with_timeout(sending, 20 * PERIOD_NS, "ns")
    await ClockCycles(dut.clk, 2)
    assert tb.level(0) == FREE_DEPTH
    assert list(tb.model.queued[0]) == [2, 3, 4, 99] and (await tb.take())[3:5] == (1, 0)


@cocotb.test()
async def a_forced_die_gets_the_next_page(dut):
    """force/force_die (a PAD page for an exposed MLC lower page): the page comes from that die,
    the round robin goes on after it, and a forced die without an open block offers nothing."""
    tb = AllocatorTB(dut, seed=4)
    await tb.reset(pages_per_block=8)
    for die in range(DIES - 1):  # the last die has no block
        await tb.give(die, 40 + die)
    await ClockCycles(dut.clk, 2)
    first = await tb.take()
    assert die_of(*first[:3]) == 0
    tb.force(2)
    forced = [await tb.take() for _ in range(3)]
    assert [die_of(*p[:3]) for p in forced] == [2, 2, 2] and [p[4] for p in forced] == [0, 1, 2]
    assert [p[5] for p in forced] == [first[5] + 1, first[5] + 2, first[5] + 3], "seqs stay consecutive"
    tb.force(DIES - 1)
    assert await tb.take(limit=10) is None, "a forced die without an open block must offer nothing"
    assert dut.starved.value == 0, "other dies still have blocks"
    tb.force(None)
    nxt = await tb.take()
    assert die_of(*nxt[:3]) == 3 % (DIES - 1) and nxt[4] == 0, "the round robin resumes after the forced die"
    assert tb.free.gaps and tb.alloc.stalls, (tb.free.gaps, tb.alloc.stalls)
