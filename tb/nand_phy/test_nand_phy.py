"""ONFI PHY waveforms in amaranth.sim: every ONFI timing at every mode, the
bytes latched and read, and burst rates of exactly one byte per tWC / tRC."""

from __future__ import annotations

import pytest
from amaranth.sim import Simulator

from atomflash.spec import ONFI_MODES, OnfiCmd
from rtl.nand.phy import OnfiPhy, PhyKind
from rtl.nand.timing import timing_cycles

from .onfi_checker import OnfiPinChecker

TARGETS = 2


class PhyTB:
    """Feeds bus operations to an OnfiPhy and collects read bytes."""

    def __init__(self, mode: int, sample: int = 0):
        self.dut = OnfiPhy(targets=TARGETS)
        self.timing = timing_cycles(mode, sample=sample)
        self.checker = OnfiPinChecker(self.dut.bus, self.timing, TARGETS)
        self.sim = Simulator(self.dut)
        self.sim.add_clock(1e-8)
        self.sim.add_process(self.checker.run)
        self.read: list[int] = []

    async def op(self, ctx, kind, target=0, byte=0, count=0):
        ctx.set(self.dut.op.payload, {"kind": kind, "target": target, "byte": byte, "count": count})
        ctx.set(self.dut.op.valid, 1)
        await ctx.tick().until(self.dut.op.ready)
        ctx.set(self.dut.op.valid, 0)

    async def write(self, ctx, data: bytes):
        for byte in data:
            ctx.set(self.dut.wdata.payload, byte)
            ctx.set(self.dut.wdata.valid, 1)
            await ctx.tick().until(self.dut.wdata.ready)
        ctx.set(self.dut.wdata.valid, 0)

    async def collect(self, ctx):
        ctx.set(self.dut.rdata.ready, 1)
        async for _, _, valid, payload in ctx.tick().sample(self.dut.rdata.valid, self.dut.rdata.payload):
            if valid:
                self.read.append(payload)

    async def wait_idle(self, ctx):
        await ctx.tick()
        await ctx.tick().until(self.dut.idle)

    def run(self, testbench):
        self.sim.add_process(self.collect)
        self.sim.add_testbench(testbench)
        self.sim.run()


@pytest.mark.parametrize("mode", ONFI_MODES)
def test_read_program_sequence_meets_every_timing(mode):
    tb = PhyTB(mode)
    page = bytes(range(7, 7 + 24))
    prog = bytes((i * 37) & 0xFF for i in range(24))
    tb.checker.read_bytes.extend(page)
    tb.checker.read_bytes.append(0xE0)  # status byte

    async def bench(ctx):
        ctx.set(tb.dut.timing, tb.timing)
        await ctx.tick()
        await ctx.tick()
        # READ PAGE on target 0
        await tb.op(ctx, PhyKind.CMD, 0, OnfiCmd.READ_1)
        for a in (0, 0, 3, 0, 0):
            await tb.op(ctx, PhyKind.ADDR, 0, a)
        await tb.op(ctx, PhyKind.CMD, 0, OnfiCmd.READ_2)
        await tb.op(ctx, PhyKind.WAIT_BUSY, 0)
        await tb.op(ctx, PhyKind.WAIT_READY, 0)
        await tb.op(ctx, PhyKind.READ, 0, count=len(page))
        # PROGRAM PAGE on target 1
        await tb.op(ctx, PhyKind.CMD, 1, OnfiCmd.PROGRAM_1)
        for a in (0, 0, 5, 0, 0):
            await tb.op(ctx, PhyKind.ADDR, 1, a)
        writer = ctx  # noqa: F841
        await tb.op(ctx, PhyKind.WRITE, 1, count=len(prog))
        await tb.write(ctx, prog)
        await tb.op(ctx, PhyKind.CMD, 1, OnfiCmd.PROGRAM_2)
        await tb.op(ctx, PhyKind.WAIT_BUSY, 1)
        await tb.op(ctx, PhyKind.WAIT_READY, 1)
        await tb.op(ctx, PhyKind.CMD, 1, OnfiCmd.READ_STATUS)
        await tb.op(ctx, PhyKind.READ, 1, count=1)
        await tb.wait_idle(ctx)
        for _ in range(4):
            await ctx.tick()

    tb.run(bench)
    assert tb.checker.violations == []
    assert bytes(tb.read) == page + bytes([0xE0])
    latches = tb.checker.latches
    assert latches[:7] == [(0, "cmd", 0x00)] + [(0, "addr", a) for a in (0, 0, 3, 0, 0)] + [(0, "cmd", 0x30)]
    assert [b for t, k, b in latches if k == "data"] == list(prog)
    assert all(t == 1 for t, _, _ in latches[7:])
    assert latches[-2:] == [(1, "cmd", 0x10), (1, "cmd", 0x70)]
    # a read burst runs at one byte per tRC (samples are pipelined)
    falls = tb.checker.read_falls[: len(page)]
    period = {b - a for a, b in zip(falls, falls[1:])}
    t = tb.timing
    want = max(t["tRC"], max(t["tRP"], 1) + max(t["tREH"], 1))
    assert period == {want}, period


@pytest.mark.parametrize("mode", [0, 5])
def test_write_burst_runs_at_twc(mode):
    tb = PhyTB(mode)
    data = bytes(range(64))
    rises = []

    async def bench(ctx):
        ctx.set(tb.dut.timing, tb.timing)
        await ctx.tick()
        await tb.op(ctx, PhyKind.CMD, 0, OnfiCmd.PROGRAM_1)
        await tb.op(ctx, PhyKind.ADDR, 0, 0)
        await tb.op(ctx, PhyKind.WRITE, 0, count=len(data))
        ctx.set(tb.dut.wdata.payload, data[0])
        ctx.set(tb.dut.wdata.valid, 1)
        n = 0
        cycle = 0
        prev_we = 1
        # WE# rising edges on the pins (wdata is taken ahead through the PHY's
        # input FIFO, so the handshakes do not show the bus rate)
        async for _, _, ready, we_n, idle in ctx.tick().sample(tb.dut.wdata.ready, tb.dut.bus.we_n,
                                                                tb.dut.idle):
            cycle += 1
            if we_n and not prev_we:
                rises.append(cycle)
            prev_we = we_n
            if ready and n < len(data):
                n += 1
            ctx.set(tb.dut.wdata.payload, data[n] if n < len(data) else 0)
            ctx.set(tb.dut.wdata.valid, n < len(data))
            if n == len(data) and idle:
                break

    tb.run(bench)
    assert tb.checker.violations == []
    assert [b for _, k, b in tb.checker.latches if k == "data"] == list(data)
    t = tb.timing
    data_rises = rises[-len(data):]
    period = {b - a for a, b in zip(data_rises[1:], data_rises[2:])}
    assert period == {max(t["tWC"], max(t["tWP"], t["tDS"]) + max(t["tWH"], t["tDH"]))}


def test_sample_delay_register_shifts_sampling():
    """tSAMPLE = 2 with DQ reaching the PHY 2 cycles late (I/O registers) reads right at full rate."""
    tb = PhyTB(5, sample=2)
    tb.checker.io_delay = 2
    data = bytes([0x11, 0x22, 0x33, 0x44, 0x55])
    tb.checker.read_bytes.extend(data)

    async def bench(ctx):
        ctx.set(tb.dut.timing, tb.timing)
        await ctx.tick()
        await tb.op(ctx, PhyKind.CMD, 0, OnfiCmd.READ_ID)
        await tb.op(ctx, PhyKind.ADDR, 0, 0)
        await tb.op(ctx, PhyKind.READ, 0, count=len(data))
        await tb.wait_idle(ctx)

    tb.run(bench)
    assert bytes(tb.read) == data
    assert tb.checker.violations == []
    # pipelined sampling: the late DQ does not slow the strobes down
    falls = tb.checker.read_falls
    t = tb.timing
    assert {b - a for a, b in zip(falls, falls[1:])} == {max(t["tRC"], t["tRP"] + t["tREH"])}
