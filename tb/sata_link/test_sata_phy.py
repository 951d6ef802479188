"""SataDevicePhy alone in Amaranth's simulator: the OOB answer step by step,
ALIGNs on transmit (two at the start of every 256 dwords, whatever the link
sends), ALIGNs never reaching the link on receive, and the link going down
on a new COMRESET and on a quiet line.  (The back-to-back tests cannot see
the last two: the link layer ignores stray ALIGNs.)"""

import random

from amaranth.sim import Simulator

from atomflash.spec import SATA_LINK, SATA_PRIMITIVE_CHARISK, SataPrimitive
from rtl.sata.phy import SataDevicePhy

ALIGN = int(SataPrimitive.ALIGN)
SYNC = int(SataPrimitive.SYNC)


class PhyTB:
    def __init__(self, quiet_cycles=64):
        self.dut = SataDevicePhy(oob_timeout=500, quiet_cycles=quiet_cycles)
        self.sim = Simulator(self.dut)
        self.sim.add_clock(1e-8)

    def run(self, bench):
        self.sim.add_testbench(bench)
        self.sim.run()


async def oob(ctx, dut):
    """Play the host's side of OOB up to link up."""
    trx = dut.trx
    ctx.set(trx.ready, 1)
    ctx.set(trx.rx_idle, 1)
    await ctx.tick().repeat(3)
    assert ctx.get(trx.tx_idle)
    ctx.set(trx.rx_cominit_stb, 1)          # COMRESET
    await ctx.tick().repeat(10)
    assert not ctx.get(trx.tx_cominit_stb), "COMINIT before the COMRESET ended"
    ctx.set(trx.rx_cominit_stb, 0)
    await ctx.tick().until(trx.tx_cominit_stb)
    ctx.set(trx.tx_cominit_ack, 1)
    await ctx.tick()
    ctx.set(trx.tx_cominit_ack, 0)
    ctx.set(trx.rx_comwake_stb, 1)          # COMWAKE
    await ctx.tick().repeat(10)
    assert not ctx.get(trx.tx_comwake_stb)
    ctx.set(trx.rx_comwake_stb, 0)
    await ctx.tick().until(trx.tx_comwake_stb)
    ctx.set(trx.tx_comwake_ack, 1)
    await ctx.tick()
    ctx.set(trx.tx_comwake_ack, 0)
    await ctx.tick()
    assert not ctx.get(trx.tx_idle)
    assert (ctx.get(trx.tx_data), ctx.get(trx.tx_charisk)) == (ALIGN, SATA_PRIMITIVE_CHARISK)
    ctx.set(trx.rx_idle, 0)
    ctx.set(trx.rx_data, 0x4A4A4A4A)        # D10.2 first: not yet aligned
    await ctx.tick().repeat(5)
    assert not ctx.get(dut.link_up)
    ctx.set(trx.rx_data, ALIGN)
    ctx.set(trx.rx_charisk, SATA_PRIMITIVE_CHARISK)
    await ctx.tick().until(dut.link_up)


def test_oob_then_aligns_in_and_out():
    tb = PhyTB()
    dut = tb.dut
    rnd = random.Random(1)

    async def bench(ctx):
        await oob(ctx, dut)
        ctx.set(dut.tx.valid, 1)
        sent, line = [], []
        align_runs = []
        for cycle in range(3 * SATA_LINK.ALIGN_PERIOD + 10):
            word = rnd.getrandbits(32)
            ctx.set(dut.tx.payload.data, word)
            ctx.set(dut.tx.payload.charisk, 0)
            # receive: ALIGNs at random among data and other primitives
            kind = rnd.random()
            rx = (ALIGN, 1) if kind < 0.3 else (SYNC, 1) if kind < 0.4 else (rnd.getrandbits(32) & ~0xFF | 0x11, 0)
            ctx.set(dut.trx.rx_data, rx[0])
            ctx.set(dut.trx.rx_charisk, rx[1])
            if ctx.get(dut.tx.ready):
                sent.append(word)
            line.append(ctx.get(dut.trx.tx_data) if ctx.get(dut.trx.tx_charisk) == 0 else
                        ("A" if ctx.get(dut.trx.tx_data) == ALIGN else "?"))
            assert ctx.get(dut.rx.valid) == (rx != (ALIGN, 1)), (cycle, rx)
            if ctx.get(dut.rx.valid):
                assert (ctx.get(dut.rx.payload.data), ctx.get(dut.rx.payload.charisk)) == rx
            await ctx.tick()
        assert "?" not in line
        # two ALIGNs open every ALIGN_PERIOD dwords; everything else is the link's, in order
        first = next(i for i in range(len(line) - 1) if line[i] == line[i + 1] == "A")
        assert first < SATA_LINK.ALIGN_PERIOD
        for start in range(first, len(line) - SATA_LINK.ALIGN_PERIOD, SATA_LINK.ALIGN_PERIOD):
            period = line[start:start + SATA_LINK.ALIGN_PERIOD]
            assert period[:SATA_LINK.ALIGNS_PER_PERIOD] == ["A"] * SATA_LINK.ALIGNS_PER_PERIOD
            assert "A" not in period[SATA_LINK.ALIGNS_PER_PERIOD:]
        assert [w for w in line if w != "A"] == sent
        assert ctx.get(dut.link_up)

    tb.run(bench)


def test_link_down_on_comreset_and_on_a_quiet_line():
    tb = PhyTB(quiet_cycles=64)
    dut = tb.dut

    async def bench(ctx):
        await oob(ctx, dut)
        ctx.set(dut.trx.rx_cominit_stb, 1)     # a new COMRESET: down, answered with COMINIT
        await ctx.tick().repeat(2)
        assert not ctx.get(dut.link_up)
        ctx.set(dut.trx.rx_cominit_stb, 0)
        await ctx.tick().until(dut.trx.tx_cominit_stb)
        ctx.set(dut.trx.tx_cominit_ack, 1)
        await ctx.tick()
        ctx.set(dut.trx.tx_cominit_ack, 0)
        ctx.set(dut.trx.rx_cominit_stb, 1)     # the host starts over
        await ctx.tick().repeat(5)
        ctx.set(dut.trx.rx_cominit_stb, 0)
        await ctx.tick()
        await oob_after_comreset(ctx, dut)
        # idle line: up for a while (a short silence is not a dead line), then down
        ctx.set(dut.trx.rx_idle, 1)
        await ctx.tick().repeat(50)
        assert ctx.get(dut.link_up)
        await ctx.tick().repeat(20)
        assert not ctx.get(dut.link_up)
        assert ctx.get(dut.trx.tx_idle)

    tb.run(bench)


async def oob_after_comreset(ctx, dut):
    trx = dut.trx
    ctx.set(trx.rx_idle, 1)
    await ctx.tick().until(trx.tx_cominit_stb)
    ctx.set(trx.tx_cominit_ack, 1)
    await ctx.tick()
    ctx.set(trx.tx_cominit_ack, 0)
    ctx.set(trx.rx_comwake_stb, 1)
    await ctx.tick().repeat(4)
    ctx.set(trx.rx_comwake_stb, 0)
    await ctx.tick().until(trx.tx_comwake_stb)
    ctx.set(trx.tx_comwake_ack, 1)
    await ctx.tick()
    ctx.set(trx.tx_comwake_ack, 0)
    ctx.set(trx.rx_idle, 0)
    ctx.set(trx.rx_data, ALIGN)
    ctx.set(trx.rx_charisk, SATA_PRIMITIVE_CHARISK)
    await ctx.tick().until(dut.link_up)
