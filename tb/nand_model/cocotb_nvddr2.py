"""NV-DDR2: the interface switch and the way back, every operation at every
mode on both profiles with nothing reported, and each new rule provoked.

Runs with a 1.25 ns sampling clock (``+clk_period_ps=1250``): NV-DDR2 mode 7
moves a byte every 2.5 ns, and the host keeps DQ and DQS two samples apart.
"""

import cocotb

from atomflash.nandsim import NandCtl
from atomflash.spec import (ONFI_NVDDR2_MODES, ONFI_NVDDR2_TIMING_PS, ONFI_PARAM, OnfiCmd, OnfiFeature,
                            OnfiInterface, OnfiParamFeature)
from nand_tb import NandTB, pattern
from onfi_host import failed, ready

PROFILES = ("small", "realistic")


async def _fresh(tb):
    """RESET in SDR mode 0 (the part is in SDR after it whatever it was in) and clear the statistics."""
    tb.host.set_mode(0)
    await tb.host.reset()
    await tb.ctl(NandCtl.CLEAR_STATS)


@cocotb.test()
async def switch_and_fall_back(dut):
    tb = await NandTB.create(dut, "switch")
    h = tb.host
    await h.reset()
    p = await h.read_param_page(256)
    assert p[ONFI_PARAM.NVDDR2_MODES] == 0xFF
    assert int.from_bytes(p[ONFI_PARAM.FEATURES:ONFI_PARAM.FEATURES + 2], "little") >> OnfiParamFeature.NV_DDR2 & 1
    await h.enter_nvddr2(4)
    s = await tb.stats()
    assert (s["interface"], s["timing_mode"]) == ("NV-DDR2", 4)
    # GET FEATURES answers in NV-DDR2 (each byte on two edges) with P1[5:4] = NV-DDR2.
    assert (await h.get_features())[0] == OnfiInterface.NV_DDR2 << 4 | 4
    # Another NV-DDR2 mode through SET FEATURES, sent in NV-DDR2.
    await h.enter_nvddr2(6)
    assert (await h.get_features())[0] == OnfiInterface.NV_DDR2 << 4 | 6
    # RESET in SDR mode 0 returns the part to SDR mode 0.
    await h.leave_nvddr2()
    s = await tb.stats()
    assert (s["interface"], s["timing_mode"]) == ("SDR", 0)
    assert (await h.get_features())[0] == 0
    assert await h.read_id(0x20, 4) == b"ONFI"
    await tb.expect_clean()


@cocotb.test()
async def every_operation_every_mode(dut):
    for profile in PROFILES:
        tb = await NandTB.create(dut, f"ops_{profile}", profile=profile)
        h = tb.host
        g = tb.cfg[0].geometry
        await h.reset()
        for mode in ONFI_NVDDR2_MODES:
            await h.enter_nvddr2(mode)
            row, dst = tb.row(2 * mode + 1, 0), tb.row(2 * mode + 2, 0)
            data = pattern(24, mode)
            assert not failed(await h.program(row, 6, data, extra={g.page_data: b"\x5a\xa5"}))
            assert await h.read(row, 6, 24) == data
            assert await h.change_read_column(g.page_data, 2) == b"\x5a\xa5"
            assert await h.read(row, 6, 4, copyback=True) == data[:4]
            assert not failed(await h.copyback_program(dst, patch={8: b"\x00\x11\x22"}))
            want = bytearray(data)
            want[2:5] = b"\x00\x11\x22"
            assert await h.read(dst, 6, 24) == bytes(want)
            assert ready(await h.read_status_enhanced(dst))
            assert await h.read_id(0x00, 5) == bytes(int(x, 16) for x in tb.cfg[0]["id_bytes"].split(","))
            pp = await h.read_param_page(ONFI_PARAM.MODEL + 4)
            assert pp[:4] == b"ONFI"
            for r in (row, dst):
                assert not failed(await h.erase(r))
            assert await h.read(row, 6, 4) == b"\xff" * 4
            s = await tb.expect_clean()
            assert (s["interface"], s["timing_mode"]) == ("NV-DDR2", mode)
            await h.leave_nvddr2()


@cocotb.test()
async def dqs_delay_within_the_window(dut):
    """Whatever tDQSRE the part takes (2 to 25 ns), a host that captures at DQS reads the page."""
    for ns in (2, 10, 25):
        tb = await NandTB.create(dut, f"dqsre{ns}", t_dqsre_ps=ns * 1000)
        h = tb.host
        await h.reset()
        await h.enter_nvddr2(4)
        data = pattern(32, ns)
        assert not failed(await h.program(tb.row(1, 0), 0, data))
        assert await h.read(tb.row(1, 0), 0, 32) == data
        await tb.expect_clean()


async def _violation(tb, name: str):
    s = await tb.stats()
    got = {v["param"] for v in s["violation_log"]}
    assert name in got, (name, s["violation_log"])
    return s


@cocotb.test()
async def dqs_skew_within_and_beyond(dut):
    """DQS moved off the middle of the DQ eye: within tDS/tDH nothing, beyond it the parameter it broke."""
    tb = await NandTB.create(dut, "skew")
    h = tb.host
    await h.reset()
    await h.enter_nvddr2(0)
    ui = h.ui_periods()            # mode 0: 15 ns a byte, 12 periods
    need = {n: h.cycles(ONFI_NVDDR2_TIMING_PS[n][0] / 1000) for n in ("tDS", "tDH")}
    for skew in (-(ui // 2 - need["tDS"]), ui // 2 - need["tDH"]):
        h.dqs_skew = skew
        assert not failed(await h.program(tb.row(3, 0), 0, pattern(8, 1)))
        assert await h.read(tb.row(3, 0), 0, 8) == pattern(8, 1)
        assert not failed(await h.erase(tb.row(3, 0)))
        await tb.expect_clean()
    for skew, name in ((-(ui // 2 - need["tDS"]) - 1, "tDS"), (ui // 2 - need["tDH"] + 1, "tDH")):
        await tb.ctl(NandCtl.CLEAR_STATS)
        h.dqs_skew = skew
        await h.program(tb.row(4, 0), 0, pattern(8, 2))
        s = await _violation(tb, name)
        assert {v["param"] for v in s["violation_log"]} == {name}, s["violation_log"]
        await h.erase(tb.row(4, 0))
    h.dqs_skew = 0


@cocotb.test()
async def nvddr2_rules_are_enforced(dut):
    tb = await NandTB.create(dut, "rules")
    h = tb.host
    await h.reset()
    d0 = {n: v[0] / 1000 for n, v in ONFI_NVDDR2_TIMING_PS.items()}

    async def errors(fragment):
        s = await tb.stats()
        assert any(fragment in e for e in s["error_log"]), (fragment, s["error_log"])

    # DQS toggled while the part is in SDR.
    await _fresh(tb)
    await h.select()
    await h.cmd(OnfiCmd.PROGRAM_1)
    await h.addr(0, 0, *h.row_cycles(tb.row(1, 0)))
    await h.step(h.t["tADL"], dqs_i_oe=1, dqs_i=0)
    await h.step(20, dqs_i=1)
    await h.step(20, dqs_i_oe=0, dqs_i=0)
    await h.deselect()
    await errors("DQS toggles while the interface is SDR")

    # A WE# data cycle while the part is in NV-DDR2.
    await _fresh(tb)
    await h.enter_nvddr2(2)
    await h.select()
    await h.cmd(OnfiCmd.PROGRAM_1)
    await h.addr(0, 0, *h.row_cycles(tb.row(1, 0)))
    h.ddr = False                  # the host forgets the switch
    await h.data_in(b"\x12", first_gap_ns=d0["tADL"])
    h.ddr = True
    await h.deselect()
    await errors("WE# data cycle (DQ 12h) while the interface is NV-DDR2")

    # SET FEATURES back to SDR is refused: RESET is the way.
    await h.leave_nvddr2()
    await _fresh(tb)
    await h.enter_nvddr2(2)
    await h.select()
    await h.cmd(OnfiCmd.SET_FEATURES)
    await h.addr(OnfiFeature.TIMING_MODE)
    await h.data_in(bytes([0x05, 0, 0, 0]), repeated=True)
    await h.deselect()
    await errors("cannot leave NV-DDR2 for SDR")

    # Two differing copies of a SET FEATURES byte.
    await _fresh(tb)
    await h.enter_nvddr2(2)
    await h.select()
    await h.cmd(OnfiCmd.SET_FEATURES)
    await h.addr(OnfiFeature.TIMING_MODE)
    await h.data_in(bytes([0x22, 0x23, 0, 0, 0, 0, 0, 0]))
    await h.deselect()
    await errors("the two copies of parameter byte 1 differ")
    await h.leave_nvddr2()

    # A command sooner than tITC after the switch.
    await _fresh(tb)
    await h.select()
    await h.cmd(OnfiCmd.SET_FEATURES)
    await h.addr(OnfiFeature.TIMING_MODE)
    await h.data_in(bytes([0x23, 0, 0, 0]), repeated=True)
    await h.wait_ready()
    h.use_nvddr2(3)
    await h.cmd(OnfiCmd.READ_STATUS)
    await h.deselect()
    await _violation(tb, "tITC")
    await h.wait(d0["tITC"])

    # A short write preamble, and a short read preamble.
    for name, gap in (("tWPRE", "tWPRE"), ("tRPRE", "tRPRE")):
        await _fresh(tb)
        await h.enter_nvddr2(3)
        saved = ONFI_NVDDR2_TIMING_PS[gap][3]
        h.d[gap] = 2 * h.period_ps / 1000
        try:
            if name == "tWPRE":
                await h.program(tb.row(5, 0), 0, b"\x01\x02")
            else:
                await h.read(tb.row(5, 0), 0, 2)
        finally:
            h.d[gap] = saved / 1000
        await _violation(tb, name)
        await h.leave_nvddr2()
    assert not failed(await h.erase(tb.row(5, 0)))
