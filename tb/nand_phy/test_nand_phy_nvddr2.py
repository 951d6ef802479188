"""NV-DDR2 bursts of the ONFI PHY in amaranth.sim, at half-cycle resolution:
data input with its preamble, DQ half a cycle either side of each DQS edge,
one byte per tUI, each byte twice for ``dup``; data output captured at DQS
whatever the RE#-to-DQS delay, at one RE# edge per tUI, the pairs of a ``dup``
burst reduced to one byte.  (The NAND model checks the same against ONFI in
tb/nand_channel; these run in a second.)"""

from __future__ import annotations

import pytest
from amaranth.sim import Simulator

from atomflash.spec import OnfiCmd
from rtl.nand.phy import OnfiPhy, PhyKind
from rtl.nand.timing import nvddr2_timing_cycles


class DdrTB:
    """An OnfiPhy and a target that answers RE# edges ``delay`` half cycles later on DQS."""

    def __init__(self, mode: int, delay: int = 3):
        self.dut = OnfiPhy(targets=2)
        self.t = nvddr2_timing_cycles(mode)
        self.delay = delay
        self.sim = Simulator(self.dut)
        self.sim.add_clock(1e-8)
        self.halves: list[tuple[int, int, int, int]] = []   # (dqs_oe, dqs, dq_oe, dq) per half cycle
        self.re_halves: list[int] = []
        self.out_bytes: list[int] = []                      # what the target sends, one per RE# edge
        self.read: list[int] = []

    async def op(self, ctx, kind, byte=0, count=0, dup=0):
        ctx.set(self.dut.op.payload, {"kind": kind, "target": 0, "byte": byte, "count": count, "dup": dup})
        ctx.set(self.dut.op.valid, 1)
        await ctx.tick().until(self.dut.op.ready)
        ctx.set(self.dut.op.valid, 0)

    async def pins(self, ctx):
        """Record the pins per half cycle and play the target's DQS/DQ back into the PHY's DDR inputs."""
        bus = self.dut.bus
        edges: list[int] = []          # half cycles of RE# edges after the preamble fall
        preamble = None
        prev_re = 1
        dqs_lvl, dq = 0, 0
        pending: list[tuple[int, int, int]] = []   # (half, level, byte)
        h = 0
        async for _, _, re_n, dqs_o, dqs_oe, dq_o, dq_oe in ctx.tick().sample(
                bus.re_n, bus.dqs_o, bus.dqs_oe, bus.dq_o, bus.dq_oe):
            # values of the cycle that just began: halves h, h + 1
            self.halves += [(dqs_oe, dqs_o & 1, dq_oe, dq_o), (dqs_oe, dqs_o >> 1, dq_oe, dq_o)]
            self.re_halves += [re_n, re_n]
            if re_n != prev_re:
                if preamble is None and not re_n:
                    preamble = h
                elif preamble is not None:
                    i = len(edges)
                    edges.append(h)
                    byte = self.out_bytes[i] if i < len(self.out_bytes) else 0xEE
                    pending.append((h + self.delay, 1 - (i & 1), byte))
            prev_re = re_n
            samples = []
            for half in (h, h + 1):
                while pending and pending[0][0] <= half:
                    _, dqs_lvl, dq = pending.pop(0)
                samples.append((dqs_lvl, dq))
            ctx.set(bus.dqs_i, samples[0][0] | samples[1][0] << 1)
            ctx.set(bus.dq_i_fall, samples[0][1])
            ctx.set(bus.dq_i, samples[1][1])
            h += 2
            self.re_edges = edges

    async def collect(self, ctx):
        ctx.set(self.dut.rdata.ready, 1)
        async for _, _, valid, payload in ctx.tick().sample(self.dut.rdata.valid, self.dut.rdata.payload):
            if valid:
                self.read.append(payload)

    def run(self, bench):
        self.sim.add_process(self.pins)
        self.sim.add_process(self.collect)
        self.sim.add_testbench(bench)
        self.sim.run()

    def dqs_bursts(self):
        """[(first driven half, [(edge half, byte latched)...], released half)] from the recorded halves."""
        bursts, cur = [], None
        for h, (oe, dqs, _, dq) in enumerate(self.halves):
            if h % 2 and dq != self.halves[h - 1][3]:
                raise AssertionError(f"DQ changed in the middle of a cycle (half {h})")
            if oe and cur is None:
                cur = [h, [], None]
            elif oe and dqs != self.halves[h - 1][1]:
                cur[1].append((h, h))
            elif not oe and cur is not None:
                cur[2] = h
                bursts.append(cur)
                cur = None
        return bursts


async def _settle(tb, ctx):
    ctx.set(tb.dut.timing, tb.t)
    for _ in range(10):
        await ctx.tick()


@pytest.mark.parametrize("mode,dup", [(0, 0), (2, 0), (7, 0), (4, 1)])
def test_data_input_burst(mode, dup):
    tb = DdrTB(mode)
    data = bytes((i * 29 + 3) & 0xFF for i in range(10))

    async def bench(ctx):
        await _settle(tb, ctx)
        await tb.op(ctx, PhyKind.CMD, OnfiCmd.PROGRAM_1)
        await tb.op(ctx, PhyKind.ADDR, 0)
        await tb.op(ctx, PhyKind.WRITE, count=len(data), dup=dup)
        for byte in data:
            ctx.set(tb.dut.wdata.payload, byte)
            ctx.set(tb.dut.wdata.valid, 1)
            await ctx.tick().until(tb.dut.wdata.ready)
        ctx.set(tb.dut.wdata.valid, 0)
        await ctx.tick().until(tb.dut.idle)
        for _ in range(4):
            await ctx.tick()

    tb.run(bench)
    t = tb.t
    [(start, edges, end)] = tb.dqs_bursts()
    assert len(edges) == len(data) * (2 if dup else 1)
    first = edges[0][0]
    assert tb.halves[first][1] == 1                       # the first edge rises
    assert first - start >= 2 * t["tPRE"]                 # preamble: DQS low tPRE cycles before it
    latched = []
    for h, _ in edges:
        # DQ moves on rising clock edges only (checked in dqs_bursts), DQS in the middle of a cycle,
        # DQ unchanged in the half before the edge: setup and hold of half a cycle each
        assert h % 2 == 1 and tb.halves[h - 1][3] == tb.halves[h][3]
        latched.append(tb.halves[h - 1][3])
    assert latched == [b for b in data for _ in range(2 if dup else 1)]
    assert {b[0] - a[0] for a, b in zip(edges, edges[1:])} == {2 * t["tUI"]}   # one byte per tUI
    assert end - edges[-1][0] >= 2 * t["tPST"]            # postamble before the release


@pytest.mark.parametrize("delay", [1, 2, 3, 5, 6])
@pytest.mark.parametrize("mode,dup", [(0, 0), (7, 0), (7, 1)])
def test_data_output_captured_at_dqs(mode, dup, delay):
    tb = DdrTB(mode, delay=delay)
    page = bytes((i * 53 + 7) & 0xFF for i in range(11))
    tb.out_bytes = [b for b in page for _ in range(2 if dup else 1)]

    async def bench(ctx):
        await _settle(tb, ctx)
        await tb.op(ctx, PhyKind.CMD, OnfiCmd.READ_ID)
        await tb.op(ctx, PhyKind.ADDR, 0)
        await tb.op(ctx, PhyKind.READ, count=len(page), dup=dup)
        await ctx.tick().until(tb.dut.idle)
        for _ in range(4):
            await ctx.tick()

    tb.run(bench)
    assert bytes(tb.read) == page
    t = tb.t
    edges = tb.re_edges
    # RE# edges tUI apart; an odd number of edges ends high, an even one takes a postamble rise
    n = len(page) * (2 if dup else 1)
    assert len(edges) == n + (n % 2 == 0)
    assert {b - a for a, b in zip(edges, edges[1:])} == {2 * t["tUI"]}
    assert tb.re_halves[-1] == 1
