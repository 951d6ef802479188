"""cocotb: valid-page counts follow random rebinds exactly.

``BlockTableTB`` owns the block table, its clock, the rebind source
(:class:`~sim.harness.streams.StreamSource`, seeded idle gaps, some longer than a rebind), the SoC
memory the table lives in (:class:`~sim.harness.wishbone.WishboneMemory`, random wait states), the
reference (where each LBA is bound and the valid count of every block, in plain Python) and the
scoreboard: the memory holds the reference's counts and nothing else.  Rebinds go through the block table's ``REBIND`` layout, PPAs
through ``spec.pack_ppa``."""

import random

import cocotb
from cocotb.clock import Clock
from cocotb.triggers import ClockCycles, RisingEdge

from atomflash import spec
from rtl.ftl.blocktable import REBIND
from sim.harness.layouts import pack
from sim.harness.streams import StreamSource
from sim.harness.wishbone import WishboneMemory

BASE = 0x4800_0000
CHANNELS, WAYS, BLOCK_SHIFT = 2, 2, 4  # 16 blocks per die in the table


def index_of(channel, way, block):
    """The table index of a block: die-major, die = way * channels + channel (one LUN)."""
    return ((way * CHANNELS + channel) << BLOCK_SHIFT) | block


class BlockTableTB:
    def __init__(self, dut, seed, *, idle=0.3):
        self.dut, self.clk = dut, dut.clk
        self.rng = random.Random(seed)
        self.memory = WishboneMemory(dut, "dma", dut.clk, max_wait=1, seed=seed)
        # a rebind keeps the table busy ~10 cycles: gaps up to 16 leave it idle now and then
        self.rebinds = StreamSource(dut, "rebind", dut.clk, idle=idle, max_gap=16, seed=seed + 1)
        self.where = {}         # the reference: lba -> (ppa, table index)
        self.counts = {}        # table index -> valid pages
        cocotb.start_soon(Clock(dut.clk, 10, "ns").start())

    async def reset(self):
        d = self.dut
        d.rst.value = 1
        d.table_base.value = BASE
        d.block_shift.value = BLOCK_SHIFT
        await ClockCycles(d.clk, 3)
        d.rst.value = 0
        self.memory.start()

    # -- the driver ---------------------------------------------------------------------------------------
    async def rebind(self, old, new):
        """One rebind from PPA ``old`` to ``new`` (either may be spec.PPA_UNMAPPED)."""
        await self.rebinds.send(pack(REBIND, old=old, new=new))

    async def bind(self, lba, new):
        """Bind ``lba`` to ``new`` ((ppa, index) or None: a trim), as the FTL would, and in the reference."""
        old = self.where.get(lba)
        await self.rebind(old[0] if old else spec.PPA_UNMAPPED, new[0] if new else spec.PPA_UNMAPPED)
        if old:
            self.counts[old[1]] -= 1
        if new:
            self.counts[new[1]] = self.counts.get(new[1], 0) + 1
            self.where[lba] = new
        else:
            self.where.pop(lba, None)

    async def idle(self, limit=100):
        """Until the table takes rebinds again (the last one applied)."""
        for _ in range(limit):
            await RisingEdge(self.clk)
            if self.dut.rebind__ready.value:
                return
        raise AssertionError(f"the block table still busy after {limit} cycles")

    # -- the scoreboard ------------------------------------------------------------------------------------
    def count(self, index):
        return self.memory.words.get(BASE // 4 + index, 0)

    def check_table(self):
        """Every block's count in memory is the reference's, and nothing else in memory changed."""
        for index, want in self.counts.items():
            assert self.count(index) == want, f"block index {index}: {self.count(index)} != {want}"
        stray = {hex(4 * a): v for a, v in self.memory.words.items() if v and a - BASE // 4 not in self.counts}
        assert not stray, f"words written outside the reference's blocks: {stray}"
        assert sum(self.counts.values()) == len(self.where)
        assert int(self.dut.errors.value) == 0


def random_ppa(rng):
    c, w, b, p = rng.randrange(CHANNELS), rng.randrange(WAYS), rng.randrange(16), rng.randrange(64)
    return spec.pack_ppa(channel=c, way=w, lun=0, block=b, page=p), index_of(c, w, b)


@cocotb.test()
async def counts_follow_rebinds(dut):
    tb = BlockTableTB(dut, seed=21)
    await tb.reset()
    for _ in range(300):
        lba = tb.rng.randrange(40)
        trim = lba in tb.where and tb.rng.random() < 0.15
        await tb.bind(lba, None if trim else random_ppa(tb.rng))
    await tb.idle()
    tb.check_table()
    assert tb.rebinds.gaps > 20, f"rebinds after idle gaps: {tb.rebinds.gaps}"


@cocotb.test()
async def same_page_and_unmapped_rebinds_touch_nothing(dut):
    tb = BlockTableTB(dut, seed=22)
    await tb.reset()
    ppa, index = random_ppa(tb.rng)
    await tb.rebind(ppa, ppa)
    await tb.rebind(spec.PPA_UNMAPPED, spec.PPA_UNMAPPED)
    await tb.idle()
    assert tb.memory.reads == 0 and tb.memory.writes == 0
    await tb.bind(0, (ppa, index))          # unmapped -> ppa
    await tb.idle()
    assert tb.count(index) == 1 and tb.memory.writes == 1
    tb.check_table()
