"""The Amaranth placeholder controller block in amaranth.sim (no Verilator):
its Wishbone slave serves the registers and the spec's IDENTIFY record, and its
DMA master copies the record into a memory that acks with random delays."""

from __future__ import annotations

import random
import sys
from pathlib import Path

from amaranth.sim import Simulator

from atomflash import spec

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from soc import placeholder as ph  # noqa: E402
from soc.atomflash_soc import main_ram_bytes  # noqa: E402


def run(body, dut=None, extra=()):
    dut = dut or ph.IdentifyBlock()
    sim = Simulator(dut)
    sim.add_clock(1e-8)
    async def testbench(ctx):
        await body(ctx, dut)
    sim.add_testbench(testbench)
    for p in extra:
        sim.add_process(p(dut))
    sim.run()


async def wb_read(ctx, dut, off):
    ctx.set(dut.wbs_adr, off // 4)
    ctx.set(dut.wbs_we, 0)
    ctx.set(dut.wbs_cyc, 1)
    ctx.set(dut.wbs_stb, 1)
    await ctx.tick().until(dut.wbs_ack)
    value = ctx.get(dut.wbs_dat_r)
    ctx.set(dut.wbs_cyc, 0)
    ctx.set(dut.wbs_stb, 0)
    await ctx.tick()
    return value


async def wb_write(ctx, dut, off, value, sel=0b1111):
    ctx.set(dut.wbs_adr, off // 4)
    ctx.set(dut.wbs_dat_w, value)
    ctx.set(dut.wbs_sel, sel)
    ctx.set(dut.wbs_we, 1)
    ctx.set(dut.wbs_cyc, 1)
    ctx.set(dut.wbs_stb, 1)
    await ctx.tick().until(dut.wbs_ack)
    ctx.set(dut.wbs_cyc, 0)
    ctx.set(dut.wbs_stb, 0)
    ctx.set(dut.wbs_we, 0)
    await ctx.tick()


def test_identify_words_are_the_spec_record():
    fields = ph.identify_fields()
    words = ph.identify_words(fields)
    assert b"".join(w.to_bytes(4, "little") for w in words) == spec.IDENTIFY.pack(fields)
    rec = spec.IDENTIFY.unpack(spec.IDENTIFY.pack(fields))
    assert rec.magic == spec.IDENTIFY_MAGIC and rec.spec_version == spec.SPEC_VERSION
    assert rec.max_atomic_pages == spec.LIMITS.MAX_ATOMIC_PAGES and rec.channels == 0


def test_registers_and_identify_window():
    async def body(ctx, dut):
        assert await wb_read(ctx, dut, ph.REGS["ID"]) == ph.BLOCK_ID
        assert await wb_read(ctx, dut, ph.REGS["VERSION"]) == ph.BLOCK_VERSION
        caps = await wb_read(ctx, dut, ph.REGS["CAPS"])
        assert caps == (1 << ph.CAPS["IDENTIFY"]) | (1 << ph.CAPS["DMA"])  # no NAND
        assert await wb_read(ctx, dut, ph.REGS["SCRATCH"]) == 0
        await wb_write(ctx, dut, ph.REGS["SCRATCH"], 0x12345678)
        await wb_write(ctx, dut, ph.REGS["SCRATCH"], 0xAABBCCDD, sel=0b0101)
        assert await wb_read(ctx, dut, ph.REGS["SCRATCH"]) == 0x12BB56DD
        words = ph.identify_words(ph.identify_fields())
        got = [await wb_read(ctx, dut, ph.REGS["IDENTIFY"] + 4 * i) for i in range(len(words))]
        assert got == words
        await wb_write(ctx, dut, ph.REGS["IDENTIFY"], 0)  # read-only: ignored
        assert await wb_read(ctx, dut, ph.REGS["IDENTIFY"]) == words[0]
    run(body)


def test_dma_copies_identify_under_random_ack_delays():
    mem = {}
    rng = random.Random(7)

    def memory(dut):
        async def proc(ctx):
            async for clk_edge, rst, cyc, stb, we, adr, dat in ctx.tick().sample(
                    dut.wbm_cyc, dut.wbm_stb, dut.wbm_we, dut.wbm_adr, dut.wbm_dat_w):
                ctx.set(dut.wbm_ack, 0)
                if cyc and stb and rng.random() < 0.4:
                    assert we
                    mem[adr] = dat
                    ctx.set(dut.wbm_ack, 1)
        return proc

    async def body(ctx, dut):
        dst = 0x4000_1000
        for _ in range(2):
            mem.clear()
            await wb_write(ctx, dut, ph.REGS["DMA_ADDR"], dst)
            await wb_write(ctx, dut, ph.REGS["DMA_CTRL"], 1 << ph.DMA["START"])
            for _ in range(5000):
                s = await wb_read(ctx, dut, ph.REGS["DMA_CTRL"])
                if not (s >> ph.DMA["BUSY"]) & 1:
                    break
            assert (s >> ph.DMA["DONE"]) & 1 and not (s >> ph.DMA["ERROR"]) & 1
            words = ph.identify_words(ph.identify_fields())
            assert mem == {dst // 4 + i: w for i, w in enumerate(words)}
        assert await wb_read(ctx, dut, ph.REGS["DMA_COUNT"]) == 2
    run(body, extra=[memory])


def test_main_ram_sizing():
    """Room for the map (24 B per LBA, one LBA per page) and recovery's scan table
    (48 B per page) of a full device, block table, buffers and the 8 KiB scratch."""
    for profile, c, w in (("small", 1, 1), ("small", 2, 2), ("realistic", 1, 1)):
        p = spec.NAND_PROFILES[profile]
        pages = c * w * p.luns * p.blocks_per_lun * p.pages_per_block
        size = main_ram_bytes(profile, c, w)
        assert size >= (24 + 48) * pages + 8192 and size & (size - 1) == 0
        assert size < 2 * ((24 + 48) * pages + 16 * pages // p.pages_per_block + 4 * c * w * p.page_bytes + 65536)
    assert main_ram_bytes("small", 2, 2) == 2 * 1024 * 1024  # the default simulated SoC
