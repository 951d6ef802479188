"""cocotb: valid-page counts follow random rebinds exactly."""

import random

import cocotb
from cocotb.clock import Clock
from cocotb.triggers import ClockCycles, RisingEdge

from atomflash import spec
from sim.harness.wishbone import WishboneMemory

BASE = 0x4800_0000
CHANNELS, WAYS, BLOCK_SHIFT = 2, 2, 4  # 16 blocks per die in the table


def index_of(channel, way, block):
    return ((way * CHANNELS + channel) << BLOCK_SHIFT) | block


class BlockTableTB:
    def __init__(self, dut, seed):
        self.dut = dut
        self.rng = random.Random(seed)
        self.memory = WishboneMemory(dut, "dma", dut.clk, max_wait=1, seed=seed)
        cocotb.start_soon(Clock(dut.clk, 10, "ns").start())

    async def reset(self):
        d = self.dut
        d.rst.value = 1
        d.rebind__valid.value = 0
        d.table_base.value = BASE
        d.block_shift.value = BLOCK_SHIFT
        await ClockCycles(d.clk, 3)
        d.rst.value = 0
        self.memory.start()

    async def rebind(self, old, new):
        d = self.dut
        d.rebind__payload.value = old | (new << 32)
        d.rebind__valid.value = 1
        await RisingEdge(d.clk)
        while not d.rebind__ready.value:
            await RisingEdge(d.clk)
        d.rebind__valid.value = 0

    async def idle(self):
        for _ in range(100):
            await RisingEdge(self.dut.clk)
            if self.dut.rebind__ready.value:
                return

    def count(self, index):
        return self.memory.words.get(BASE // 4 + index, 0)


def random_ppa(rng):
    c, w, b, p = rng.randrange(CHANNELS), rng.randrange(WAYS), rng.randrange(16), rng.randrange(64)
    return spec.pack_ppa(channel=c, way=w, lun=0, block=b, page=p), index_of(c, w, b)


@cocotb.test()
async def counts_follow_rebinds(dut):
    tb = BlockTableTB(dut, seed=21)
    await tb.reset()
    where = {}           # lba -> (ppa, table index)
    counts = {}
    for _ in range(300):
        lba = tb.rng.randrange(40)
        old = where.get(lba)
        if old and tb.rng.random() < 0.15:   # trim
            new = None
        else:
            new = random_ppa(tb.rng)
        await tb.rebind(old[0] if old else spec.PPA_UNMAPPED, new[0] if new else spec.PPA_UNMAPPED)
        if old:
            counts[old[1]] -= 1
        if new:
            counts[new[1]] = counts.get(new[1], 0) + 1
            where[lba] = new
        else:
            where.pop(lba, None)
    await tb.idle()
    for index, want in counts.items():
        assert tb.count(index) == want, f"block index {index}: {tb.count(index)} != {want}"
    assert sum(counts.values()) == len(where)
    assert int(dut.errors.value) == 0


@cocotb.test()
async def same_page_and_unmapped_rebinds_touch_nothing(dut):
    tb = BlockTableTB(dut, seed=22)
    await tb.reset()
    ppa, index = random_ppa(tb.rng)
    await tb.rebind(ppa, ppa)
    await tb.rebind(spec.PPA_UNMAPPED, spec.PPA_UNMAPPED)
    await tb.idle()
    assert tb.memory.reads == 0 and tb.memory.writes == 0
    await tb.rebind(spec.PPA_UNMAPPED, ppa)
    await tb.idle()
    assert tb.count(index) == 1 and tb.memory.writes == 1
