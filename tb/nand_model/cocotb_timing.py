"""Interface timing: a legal run at every ONFI mode reports nothing; each
parameter, provoked alone at mode 0, is reported once by name with the
measured and the required time."""

import cocotb
from cocotb.triggers import Edge

from atomflash.nandsim import NandCtl
from atomflash.spec import ONFI_TIMING
from nand_tb import NandTB, pattern
from onfi_host import failed

CMD, ADDR, DATA = (1, 0), (0, 1), (0, 0)


@cocotb.test()
async def legal_timing_every_mode_reports_nothing(dut):
    tb = await NandTB.create(dut, "legal")
    h = tb.host
    await h.reset()
    for mode in range(6):
        await h.set_timing_mode(mode)
        row = tb.row(mode + 1, 0)
        data = pattern(20, mode)
        assert not failed(await h.program(row, 4, data, extra={100: b"\x01\x02"}))
        assert await h.read(row, 4, 20) == data
        assert await h.change_read_column(100, 2) == b"\x01\x02"
        assert await h.read_id(0x20, 4) == b"ONFI"
        assert not failed(await h.erase(row))
        s = await tb.expect_clean()
        assert s["timing_mode"] == mode


async def w(h, kind, value, low=50, high=50, pre=0):
    """One WE# cycle: set CLE/ALE/DQ, wait `pre`, WE# low for `low`, high for `high` (ns)."""
    cle, ale = kind
    await h.step(pre, cle=cle, ale=ale, dq_i=value)
    await h.step(low, we_n=0)
    await h.step(high, we_n=1)


async def r(h, low=60, high=50):
    await h.step(low, re_n=0)
    await h.step(high, re_n=1)


async def cs(h, ns=70):
    await h.align()
    await h.step(ns, ce_n=h.ce_mask(True))


async def uncs(h, ns=200):
    await h.step(ns, cle=0, ale=0)
    await h.step(200, ce_n=0b11)


async def status_tail(h):
    """After a 70h latched with a 50 ns high phase: a legal status read and deselect."""
    await h.step(150, cle=0)
    await r(h)
    await uncs(h)


# Each scenario breaks exactly one parameter at mode 0 (10 ns clock) and is
# otherwise legal.  value: (parameter, measured ns, coroutine).
async def s_twp(h):
    await cs(h)
    await w(h, CMD, 0x70, pre=20, low=30)
    await status_tail(h)


async def s_twh(h):
    await cs(h)
    await w(h, CMD, 0x90, low=80, high=20)
    await w(h, ADDR, 0x00, low=80, high=50)
    await h.step(150, ale=0)
    await r(h)
    await uncs(h)


async def s_twc(h):
    await cs(h)
    await w(h, CMD, 0x90, low=50, high=40)
    await w(h, ADDR, 0x00)
    await h.step(150, ale=0)
    await r(h)
    await uncs(h)


async def s_tcls(h):
    await cs(h)
    await h.step(0, dq_i=0x70)
    await h.step(30, we_n=0)
    await h.step(20, cle=1)
    await h.step(50, we_n=1)
    await status_tail(h)


async def s_tclh(h):
    await cs(h)
    await w(h, CMD, 0x70, high=10)
    await h.step(140, cle=0)
    await r(h)
    await uncs(h)


async def s_tals(h):
    await cs(h)
    await w(h, CMD, 0x90)
    await h.step(0, cle=0, dq_i=0x00)
    await h.step(30, we_n=0)
    await h.step(20, ale=1)
    await h.step(50, we_n=1)
    await h.step(150, ale=0)
    await r(h)
    await uncs(h)


async def s_talh(h):
    await cs(h)
    await w(h, CMD, 0x90)
    await w(h, ADDR, 0x00, high=10)
    await h.step(140, ale=0)
    await r(h)
    await uncs(h)


async def s_tds(h):
    await cs(h)
    await h.step(0, cle=1, dq_i=0xFF)
    await h.step(30, we_n=0)
    await h.step(20, dq_i=0x70)
    await h.step(50, we_n=1)
    await status_tail(h)


async def s_tdh(h):
    await cs(h)
    await w(h, CMD, 0x70, high=10)
    await h.step(40, dq_i=0x00)
    await status_tail(h)


async def s_tcs(h):
    await cs(h, 0)
    await w(h, CMD, 0x70)
    await status_tail(h)


async def s_tch(h):
    await cs(h)
    await w(h, CMD, 0x70, high=10)
    await h.step(200, ce_n=0b11)
    await h.step(100, cle=0)


async def s_twb(h):
    await cs(h)
    await w(h, CMD, 0xFF, high=50)
    await h.step(0, cle=0)
    await w(h, CMD, 0x70)  # WE# falls 50 ns after the RESET latch: tWB is 200
    await status_tail(h)
    await h.wait_ready()


async def s_twhr(h):
    await cs(h)
    await w(h, CMD, 0x70, high=20)
    await h.step(60, cle=0)
    await r(h)
    await uncs(h)


async def s_tadl(h):
    await cs(h)
    await w(h, CMD, 0x80)
    for a in (0, 0, 0x80, 0, 0):  # block 2 page 0
        await w(h, ADDR, a)
    await w(h, DATA, 0x12)  # first data 100 ns after the last address: tADL is 400
    await w(h, CMD, 0x10)
    await h.step(0, cle=0)
    await h.wait_ready()
    await uncs(h)


async def s_trr(h):
    await cs(h)
    await w(h, CMD, 0x00)
    for a in (0, 0, 0x40, 0, 0):
        await w(h, ADDR, a)
    await w(h, CMD, 0x30)
    await h.step(200, cle=0)
    while not h.rb:
        await Edge(h.dut.rb_n)
    await h.align()
    await r(h)  # RE# one clock after R/B# rose: tRR is 40
    await uncs(h)


async def s_trp(h):
    await cs(h)
    await w(h, CMD, 0x70)
    await h.step(150, cle=0)
    await r(h, low=30, high=70)
    await uncs(h)


async def s_treh(h):
    await cs(h)
    await w(h, CMD, 0x70)
    await h.step(150, cle=0)
    await r(h, low=80, high=20)
    await r(h)
    await uncs(h)


async def s_trc(h):
    await cs(h)
    await w(h, CMD, 0x70)
    await h.step(150, cle=0)
    await r(h, low=50, high=40)
    await r(h)
    await uncs(h)


async def s_trea(h):
    await cs(h)
    await w(h, CMD, 0x70)
    await h.step(150, cle=0)
    await h.step(30, re_n=0)
    await h.step(30, ce_n=0b11)  # the read cycle ends 30 ns after RE# fell: data needs tREA = 40
    await h.step(100, re_n=1)


async def s_tcea(h):
    await cs(h)
    await w(h, CMD, 0x70)
    await h.step(150, cle=0)
    await h.step(200, ce_n=0b11)
    await h.step(20, ce_n=h.ce_mask(True))
    await h.step(60, re_n=0)  # CE# rises 80 ns after it fell: data needs tCEA = 100
    await h.step(50, ce_n=0b11)
    await h.step(100, re_n=1)


async def s_trhw(h):
    await cs(h)
    await w(h, CMD, 0x70)
    await h.step(150, cle=0)
    await r(h, low=60, high=50)  # next WE# falls 50 ns after RE# rose: tRHW is 200
    await w(h, CMD, 0x70)
    await status_tail(h)


async def s_tar(h):
    await cs(h)
    await w(h, CMD, 0x90)
    await w(h, ADDR, 0x00, high=120)
    await h.step(10, ale=0)
    await r(h)
    await uncs(h)


async def s_tclr(h):
    await cs(h)
    await w(h, CMD, 0x70, high=120)
    await h.step(10, cle=0)
    await r(h)
    await uncs(h)


async def s_tccs(h):
    await cs(h)
    await w(h, CMD, 0x00)
    for a in (0, 0, 0x40, 0, 0):
        await w(h, ADDR, a)
    await w(h, CMD, 0x30)
    await h.step(0, cle=0)
    await h.wait_ready()
    await w(h, CMD, 0x05)
    for a in (4, 0):
        await w(h, ADDR, a)
    await w(h, CMD, 0xE0, high=20)
    await h.step(110, cle=0)  # RE# 130 ns after E0h: tCCS is 200
    await r(h)
    await uncs(h)


SCENARIOS = [
    ("tWP", 30, s_twp), ("tWH", 20, s_twh), ("tWC", 90, s_twc), ("tCLS", 20, s_tcls), ("tCLH", 10, s_tclh),
    ("tALS", 20, s_tals), ("tALH", 10, s_talh), ("tDS", 20, s_tds), ("tDH", 10, s_tdh), ("tCS", 50, s_tcs),
    ("tCH", 10, s_tch), ("tWB", 50, s_twb), ("tWHR", 80, s_twhr), ("tADL", 100, s_tadl), ("tRR", 10, s_trr),
    ("tRP", 30, s_trp), ("tREH", 20, s_treh), ("tRC", 90, s_trc), ("tREA", 30, s_trea), ("tCEA", 80, s_tcea),
    ("tRHW", 50, s_trhw), ("tAR", 10, s_tar), ("tCLR", 10, s_tclr), ("tCCS", 130, s_tccs),
]


@cocotb.test()
async def each_violation_is_detected_alone(dut):
    tb = await NandTB.create(dut, "violations")
    h = tb.host
    await h.reset()
    assert not failed(await h.program(tb.row(1, 0), 0, b"\x12"))
    for param, measured, scenario in SCENARIOS:
        await tb.ctl(NandCtl.CLEAR_STATS)
        await scenario(h)
        s = await tb.stats()
        assert s["violations"] == {param: 1}, f"{param}: got {s['violations']} {s['violation_log']}"
        v = s["violation_log"][0]
        required = 200 if param == "tCCS" else ONFI_TIMING[param][0]
        assert v["param"] == param and v["required_ns"] == required, v
        assert v["measured_ns"] == measured, f"{param}: measured {v['measured_ns']} ns, scripted {measured} ns"
        assert s["protocol_errors"] == 0, (param, s["error_log"])
        dut._log.info("%s: measured %s ns < required %s ns: reported", param, v["measured_ns"], v["required_ns"])


@cocotb.test()
async def early_sample_reads_garbage(dut):
    """A host sampling DQ before tREA sees a wrong byte (the model drives valid data only after tREA)."""
    tb = await NandTB.create(dut, "early")
    h = tb.host
    await cs(h)
    await w(h, CMD, 0x70)
    await h.step(150, cle=0)
    await h.step(20, re_n=0)
    early = int(dut.dq.value)
    await h.step(40, re_n=0)
    late = int(dut.dq.value)
    await h.step(50, re_n=1)
    await uncs(h)
    assert late == 0xE0, hex(late)  # ready, not protected
    assert early != late


@cocotb.test()
async def strict_mode_stops_on_violation(dut):
    """Only run by the pytest entry that expects this simulation to fail."""
    if "nandtb_strict" not in cocotb.plusargs:
        return
    tb = await NandTB.create(dut, "strict", strict=1)
    await s_twp(tb.host)
    await tb.host.wait(1000)
    raise AssertionError("strict mode did not stop the simulation")

