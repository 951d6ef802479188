"""cocotb tests for the page allocator: striping, seqs, block turnover, starvation."""

import os

import cocotb
from cocotb.clock import Clock
from cocotb.triggers import ClockCycles, ReadOnly, RisingEdge

from atomflash import spec

CHANNELS, WAYS, LUNS = (int(os.environ[k]) for k in ("CHANNELS", "WAYS", "LUNS"))
DIES = CHANNELS * WAYS * LUNS
DIE_BITS = max(1, (DIES - 1).bit_length())


class AllocatorTB:
    def __init__(self, dut):
        self.dut = dut
        self.closed = []
        cocotb.start_soon(Clock(dut.clk, 10, "ns").start())

    async def reset(self, pages_per_block):
        d = self.dut
        d.rst.value = 1
        d.free__valid.value = 0
        d.alloc__ready.value = 0
        d.seq_load__valid.value = 0
        d.closed__ready.value = 1
        d.force.value = 0
        d.pages_per_block.value = pages_per_block
        await ClockCycles(d.clk, 3)
        d.rst.value = 0
        cocotb.start_soon(self._collect_closed())

    async def _collect_closed(self):
        d = self.dut
        while True:
            await ReadOnly()
            if d.closed__valid.value and d.closed__ready.value:
                v = int(d.closed__payload.value)
                self.closed.append((v & ((1 << DIE_BITS) - 1), v >> DIE_BITS))
            await RisingEdge(d.clk)

    async def give(self, die, block):
        d = self.dut
        d.free__payload.value = die | (block << DIE_BITS)
        d.free__valid.value = 1
        await RisingEdge(d.clk)
        while not d.free__ready.value:
            await RisingEdge(d.clk)
        d.free__valid.value = 0

    async def load_seq(self, seq):
        self.dut.seq_load__payload.value = seq
        self.dut.seq_load__valid.value = 1
        await RisingEdge(self.dut.clk)
        self.dut.seq_load__valid.value = 0

    async def take(self, limit=50):
        """Allocate one page: (channel, way, lun, block, page, seq)."""
        d = self.dut
        d.alloc__ready.value = 1
        for _ in range(limit):
            await ReadOnly()
            if d.alloc__valid.value:
                v = int(d.alloc__payload.value)
                await RisingEdge(d.clk)
                d.alloc__ready.value = 0
                f = spec.PPA.decompose("ppa", v & 0xFFFFFFFF)
                return (f.channel, f.way, f.lun, f.block, f.page, v >> 32)
            await RisingEdge(d.clk)
        d.alloc__ready.value = 0
        return None


def die_of(channel, way, lun):
    return (lun * WAYS + way) * CHANNELS + channel


@cocotb.test()
async def pages_stripe_across_channels_then_ways(dut):
    tb = AllocatorTB(dut)
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


@cocotb.test()
async def full_blocks_close_and_the_next_block_opens(dut):
    tb = AllocatorTB(dut)
    await tb.reset(pages_per_block=2)
    await tb.give(3, 7)
    await tb.give(3, 8)
    pages = [await tb.take() for _ in range(4)]
    assert [(p[3], p[4]) for p in pages] == [(7, 0), (7, 1), (8, 0), (8, 1)]
    await ClockCycles(dut.clk, 3)
    assert tb.closed == [(3, 7), (3, 8)]
    assert await tb.take(limit=20) is None, "no block left: allocation must wait"
    assert dut.starved.value == 1
    await tb.give(5, 9)
    await ReadOnly()
    assert dut.starved.value == 0, "a block taken: not starved, before the FIFO shows it"
    await RisingEdge(dut.clk)
    p = await tb.take()
    assert die_of(*p[:3]) == 5 and p[3] == 9


@cocotb.test()
async def free_fifo_applies_backpressure_and_reports_level(dut):
    tb = AllocatorTB(dut)
    await tb.reset(pages_per_block=8)
    for b in range(5):  # one opens, four queue
        await tb.give(0, b)
    await ClockCycles(dut.clk, 2)
    level = int(dut.free_level.value) & 0x7
    assert level == 4
    dut.free__payload.value = 0 | (99 << DIE_BITS)
    dut.free__valid.value = 1
    await ReadOnly()
    assert dut.free__ready.value == 0, "a full free FIFO must refuse"
    await RisingEdge(dut.clk)
    dut.free__valid.value = 0


@cocotb.test()
async def a_forced_die_gets_the_next_page(dut):
    """force/force_die (a PAD page for an exposed MLC lower page): the page comes from that die,
    the round robin goes on after it, and a forced die without an open block offers nothing."""
    tb = AllocatorTB(dut)
    await tb.reset(pages_per_block=8)
    for die in range(DIES - 1):  # the last die has no block
        await tb.give(die, 40 + die)
    await ClockCycles(dut.clk, 2)
    first = await tb.take()
    assert die_of(*first[:3]) == 0
    dut.force.value = 1
    dut.force_die.value = 2
    forced = [await tb.take() for _ in range(3)]
    assert [die_of(*p[:3]) for p in forced] == [2, 2, 2] and [p[4] for p in forced] == [0, 1, 2]
    assert [p[5] for p in forced] == [first[5] + 1, first[5] + 2, first[5] + 3], "seqs stay consecutive"
    dut.force_die.value = DIES - 1
    assert await tb.take(limit=10) is None, "a forced die without an open block must offer nothing"
    assert dut.starved.value == 0, "other dies still have blocks"
    dut.force.value = 0
    nxt = await tb.take()
    assert die_of(*nxt[:3]) == 3 % (DIES - 1) and nxt[4] == 0, "the round robin resumes after the forced die"
