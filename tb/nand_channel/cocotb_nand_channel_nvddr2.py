"""cocotb tests: the NAND controller's NV-DDR2 data path against the NAND model.

Run through test_nand_channel.py on the NV-DDR2 harness
(``sim.harness.nand_channel.build(..., ddr=True)``: DQS wired, DDR pins, the
models sampling every half cycle).  Bring-up negotiates the mode from the
parameter page (``ChannelTB.bring_up_nvddr2``); every test ends with zero
model violations and zero protocol errors.
"""

from __future__ import annotations

import os
import random
import zlib

import cocotb

from atomflash import spec
from atomflash.nandsim import PROFILE_EXTRAS
from atomflash.spec import NandOp, NandResult, OnfiFeature, OnfiInterface
from sim.harness.channel_tb import ChannelTB, random_bytes

CHANNELS = int(os.environ.get("NANDTB_CHANNELS", "1"))
WAYS = int(os.environ.get("NANDTB_WAYS", "2"))
PROFILE = os.environ.get("NANDTB_PROFILE", "small")
SLOT_WORDS = int(os.environ["NANDTB_SLOT_WORDS"])
MODES = [int(m) for m in os.environ.get("NANDTB_NVDDR2_MODES", "0,2,7").split(",")]


async def make(dut, name, **kw):
    return await ChannelTB.create(dut, channels=CHANNELS, ways=WAYS, profile=PROFILE, slot_words=SLOT_WORDS,
                                  name=name, **kw)


def ok(cpl, what=""):
    assert cpl.result == NandResult.OK, (what, cpl)
    return cpl


async def interface(tb, index):
    s = await tb.stats(index)
    return s["interface"], s["timing_mode"]


async def program_read_erase(tb, rng, c, t, block):
    """ECC page and raw page programmed, read back and compared, the block erased."""
    lay, prof = tb.layout, tb.profile
    ok(await tb.do(opcode=NandOp.ERASE, channel=c, target=t, block=block))
    user = bytearray(random_bytes(rng, lay.user_bytes))
    user[lay.oob_col:lay.oob_col + lay.bbm_bytes] = b"\xff" * lay.bbm_bytes
    await tb.write_slot(c, 2, 0, user)
    cpl = ok(await tb.do(opcode=NandOp.PROGRAM, channel=c, target=t, block=block, page=0, column=0,
                         length=lay.user_bytes, slot=2), "program")
    assert cpl.crc == zlib.crc32(user)
    cpl = ok(await tb.do(opcode=NandOp.READ, channel=c, target=t, block=block, page=0, column=0,
                         length=lay.user_bytes, slot=3), "read")
    assert await tb.read_slot(c, 3, 0, lay.user_bytes) == user
    assert cpl.crc == zlib.crc32(user) and cpl.ecc_corrected == 0
    raw = random_bytes(rng, prof.page_bytes)
    await tb.write_slot(c, 2, 0, raw)
    ok(await tb.do(opcode=NandOp.PROGRAM, flags=1, channel=c, target=t, block=block, page=1, column=0,
                   length=prof.page_bytes, slot=2), "raw program")
    # an odd column, an even length: the burst ends with RE# low and takes its postamble edge (short of
    # the page's end: the model counts that rise as a byte, past the end there)
    cpl = ok(await tb.do(opcode=NandOp.READ, flags=1, channel=c, target=t, block=block, page=1, column=3,
                         length=prof.page_bytes - 6, slot=3), "raw read")
    assert await tb.read_slot(c, 3, 3, prof.page_bytes - 6) == raw[3:-3]
    ok(await tb.do(opcode=NandOp.ERASE, channel=c, target=t, block=block))
    cpl = ok(await tb.do(opcode=NandOp.READ, flags=1, channel=c, target=t, block=block, page=0, column=0,
                         length=16, slot=3))
    assert await tb.read_slot(c, 3, 0, 16) == b"\xff" * 16


@cocotb.test()
async def nvddr2_negotiate_switch_and_fall_back(dut):
    """Bring-up picks the fastest mode both sides support; RESET returns the part to SDR mode 0."""
    tb = await make(dut, "negotiate")
    # the part lists modes 0-5 only, the controller allows up to 4: mode 4
    await tb.configure(0, nvddr2_modes=0x3F)
    assert await tb.bring_up_nvddr2(0, 0, controller_max=4) == 4
    assert await interface(tb, 0) == ("NV-DDR2", 4)
    # ID bytes and status in NV-DDR2 (each ID byte on two edges)
    ok(await tb.do(opcode=NandOp.READ_ID, channel=0, target=0, column=0, length=5, slot=1))
    want_id = bytes(int(x, 16) for x in PROFILE_EXTRAS[PROFILE]["id_bytes"].split(","))
    assert await tb.read_slot(0, 1, 0, 5) == want_id
    cpl = ok(await tb.do(opcode=NandOp.READ_STATUS, channel=0, target=0))
    assert cpl.nand_status & (1 << spec.OnfiStatus.RDY)
    # another NV-DDR2 mode through SET FEATURES sent in NV-DDR2 (each parameter byte twice)
    await tb.write_slot(0, 0, 0, bytes([OnfiInterface.NV_DDR2 << 4 | 2, 0, 0, 0]))
    ok(await tb.do(opcode=NandOp.SET_FEATURES, channel=0, target=0, column=OnfiFeature.TIMING_MODE, length=4,
                   slot=0))
    await tb.wait_ns(spec.ONFI_NVDDR2_TIMING_PS["tITC"][2] // 1000)
    tb.set_nvddr2_mode(2)
    assert await interface(tb, 0) == ("NV-DDR2", 2)
    await program_read_erase(tb, random.Random(3), 0, 0, 1)
    # RESET: SDR mode 0 on both sides, and the SDR path works again
    await tb.reset_to_sdr(0, 0)
    assert await interface(tb, 0) == ("SDR", 0)
    await program_read_erase(tb, random.Random(4), 0, 0, 1)
    # a part without NV-DDR2 stays SDR
    await tb.configure(1, nvddr2_modes=0)
    assert await tb.bring_up_nvddr2(0, 1) is None
    assert await interface(tb, 1) == ("SDR", 0)
    await tb.expect_clean()


@cocotb.test()
async def nvddr2_program_read_erase_modes(dut):
    """Program, read and erase at each NV-DDR2 mode of NANDTB_NVDDR2_MODES, the other way idle."""
    rng = random.Random(11)
    for mode in MODES:
        tb = await make(dut, f"m{mode}")
        t = mode % WAYS
        assert await tb.bring_up_nvddr2(0, t, controller_max=mode) == mode
        assert await interface(tb, t) == ("NV-DDR2", mode)
        await program_read_erase(tb, rng, 0, t, 2 + mode)
        await tb.expect_clean()


@cocotb.test()
async def nvddr2_dqs_delay_within_the_window(dut):
    """Whatever tDQSRE the part takes (2 to 25 ns), capture at DQS reads the page."""
    for ns in (2, 25):
        tb = await make(dut, f"dqsre{ns}", t_dqsre_ps=ns * 1000)
        assert await tb.bring_up_nvddr2(0, 0) == 7
        await program_read_erase(tb, random.Random(ns), 0, 0, 1)
        await tb.expect_clean()


@cocotb.test()
async def nvddr2_dqs_skew(dut):
    """Run with +dqs_skew_ps (test_nand_channel_nvddr2_dqs_skew): a page programmed at mode 7 either
    reads back with nothing reported or, beyond the window, the model names tDS or tDH."""
    flagged = os.environ.get("NANDTB_SKEW_FLAGGED") == "1"
    tb = await make(dut, "skew")
    assert await tb.bring_up_nvddr2(0, 0) == 7
    data = random_bytes(random.Random(5), 64)
    ok(await tb.do(opcode=NandOp.ERASE, channel=0, target=0, block=1))
    await tb.write_slot(0, 2, 0, data)
    ok(await tb.do(opcode=NandOp.PROGRAM, flags=1, channel=0, target=0, block=1, page=0, column=0, length=64,
                   slot=2))
    ok(await tb.do(opcode=NandOp.READ, flags=1, channel=0, target=0, block=1, page=0, column=0, length=64,
                   slot=3))
    got = await tb.read_slot(0, 3, 0, 64)
    s = await tb.stats(0)
    params = {v["param"] for v in s["violation_log"]}
    if flagged:
        # the byte a DQS edge latches may still be right; the part's timing is not
        assert params and params <= {"tDS", "tDH"}, s["violation_log"]
    else:
        assert got == data
        await tb.expect_clean()


@cocotb.test(skip="NANDBENCH_OUT" not in os.environ)
async def nvddr2_bench_efficiency(dut):
    """sim/bench_channel.py: the bus time of a raw full-page READ and PROGRAM at every NV-DDR2 mode
    the controller runs at this clock, one target, completion to completion."""
    import json

    from rtl.nand.timing import nvddr2_modes_fitting, nvddr2_timing_cycles

    clk_hz = 10**12 // int(cocotb.plusargs.get("clk_period_ps", 10**12 // spec.NAND_CLK_HZ))
    fitting = nvddr2_modes_fitting(clk_hz)
    for mode in spec.ONFI_NVDDR2_MODES:
        if not fitting >> mode & 1:
            continue
        tb = await make(dut, f"bench{mode}")
        assert await tb.bring_up_nvddr2(0, 0, controller_max=mode) == mode
        prof = tb.profile
        n = prof.page_bytes
        t_r = -(-prof.t_r_ns * clk_hz // 10**9)
        t_prog = -(-prof.t_prog_ns * clk_hz // 10**9)
        ok(await tb.do(opcode=NandOp.ERASE, channel=0, target=0, block=0))
        await tb.write_slot(0, 0, 0, random_bytes(random.Random(mode), n))
        c0 = int(dut.cycle.value)
        ok(await tb.do(opcode=NandOp.PROGRAM, flags=1, channel=0, target=0, block=0, page=0, column=0, length=n,
                       slot=0))
        prog_total = int(dut.cycle.value) - c0
        # the read stops a byte short of the page's end: an even burst ends with a postamble RE# rise,
        # which the model counts as a byte and reports past the end of the page
        c0 = int(dut.cycle.value)
        ok(await tb.do(opcode=NandOp.READ, flags=1, channel=0, target=0, block=0, page=0, column=0, length=n - 1,
                       slot=1))
        read_total = int(dut.cycle.value) - c0
        assert await tb.read_slot(0, 1, 0, n - 1) == await tb.read_slot(0, 0, 0, n - 1)
        with open(os.environ["NANDBENCH_OUT"], "a") as f:
            f.write(json.dumps(dict(kind="nvddr2_efficiency", mode=mode, page_bytes=n, read_bytes=n - 1, clk_hz=clk_hz,
                                    tUI=nvddr2_timing_cycles(mode, clk_hz)["tUI"],
                                    tRC_ps=spec.ONFI_NVDDR2_TIMING_PS["tRC"][mode], t_r=t_r, t_prog=t_prog,
                                    read_total=read_total, prog_total=prog_total)) + "\n")
        await tb.expect_clean()
