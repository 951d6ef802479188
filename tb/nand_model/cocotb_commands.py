"""Every command on both profiles: ID, parameter page, status, features, read,
program, columns, erase, copyback, multi-LUN, two targets, protocol errors."""

import struct
from pathlib import Path

import cocotb
from cocotb.triggers import Timer
from cocotb.utils import get_sim_time

from atomflash import nandsim
from atomflash.spec import (NAND_PROFILES, ONFI_NVDDR2_TIMING_PS, ONFI_PARAM, OnfiCmd, OnfiFeature, OnfiOptCommand, OnfiParamFeature,
                            OnfiRevision, OnfiStatus)
from nand_tb import NandTB, pattern
from onfi_host import failed, ready

PROFILES = ("small", "realistic")


def onfi_crc16(data: bytes) -> int:
    crc = 0x4F4E
    for b in data:
        crc ^= b << 8
        for _ in range(8):
            crc = ((crc << 1) ^ 0x8005) & 0xFFFF if crc & 0x8000 else (crc << 1) & 0xFFFF
    return crc


@cocotb.test()
async def id_and_parameter_page(dut):
    for profile in PROFILES:
        tb = await NandTB.create(dut, f"id_{profile}", profile=profile)
        h = tb.host
        await h.reset()
        cfg = tb.cfg[0]
        want_id = bytes(int(x, 16) for x in cfg["id_bytes"].split(","))
        assert await h.read_id(0x00, len(want_id)) == want_id
        assert await h.read_id(0x20, 4) == b"ONFI"
        pp = await h.read_param_page(3 * 256)
        copies = [pp[i * 256:(i + 1) * 256] for i in range(3)]
        assert copies[0] == copies[1] == copies[2], "redundant copies differ"
        # ONFI: CHANGE READ COLUMN after READ PARAMETER PAGE moves within it (to a redundant copy)
        assert await h.change_read_column(256 + 32, 12) == pp[32:44]
        p = copies[0]
        assert p[:4] == b"ONFI"
        assert struct.unpack_from("<H", p, 254)[0] == onfi_crc16(p[:254]), "parameter page CRC"
        prof = NAND_PROFILES[profile]
        assert struct.unpack_from("<I", p, 80)[0] == prof.page_data
        assert struct.unpack_from("<H", p, 84)[0] == prof.page_spare
        assert struct.unpack_from("<I", p, 92)[0] == prof.pages_per_block
        assert struct.unpack_from("<I", p, 96)[0] == prof.blocks_per_lun
        assert p[100] == prof.luns
        assert p[101] == 0x23, "2 column + 3 row address cycles"
        assert p[110] == 1, "NOP"
        assert struct.unpack_from("<H", p, 129)[0] == 0x3F, "timing modes 0-5"
        assert struct.unpack_from("<H", p, 133)[0] == -(-prof.t_prog_ns // 1000)
        assert struct.unpack_from("<H", p, 135)[0] == -(-prof.t_bers_ns // 1000)
        assert struct.unpack_from("<H", p, 137)[0] == -(-prof.t_r_ns // 1000)
        assert p[32:44].decode().strip() == "ATOMFLASH"
        await tb.expect_clean()


def _bits(value: int, enum) -> set:
    return {m for m in enum if value >> m & 1}


@cocotb.test()
async def parameter_page_tells_the_truth(dut):
    """Every revision, feature and optional-command bit against what the model does:
    what it claims works, what it does not claim is refused."""
    for luns, nvddr2_modes in ((1, 0xFF), (2, 0)):
        tb = await NandTB.create(dut, f"truth_{luns}", luns=luns, nvddr2_modes=nvddr2_modes)
        h = tb.host
        g = tb.cfg[0].geometry
        await h.reset()
        p = await h.read_param_page(256)
        field = lambda off: struct.unpack_from("<H", p, off)[0]  # noqa: E731
        assert _bits(field(ONFI_PARAM.REVISION), OnfiRevision) == {OnfiRevision.ONFI_4_0}, \
            "the model enforces ONFI 4.0's tables and claims that revision alone"
        assert field(ONFI_PARAM.REVISION) >> (max(OnfiRevision) + 1) == 0
        assert field(ONFI_PARAM.EXT_PARAM_PAGE_LEN) == 0, "no extended parameter page"
        assert p[ONFI_PARAM.PARAM_PAGES] == ONFI_PARAM.COPIES

        async def refused(probe) -> bool:
            """True if ``probe`` drew a protocol error or broke a media rule."""
            await h.reset()
            await tb.ctl(nandsim.NandCtl.CLEAR_STATS)
            await probe()
            await h.reset()
            s = await tb.stats()
            assert s["violations_total"] == 0, s["violation_log"]
            return s["protocol_errors"] + s["order_violations"] + s["nop_violations"] > 0

        def sequence(*ops, addr=(), data=b""):
            """``ops[0]``, its address and data cycles, then the rest of ``ops``."""
            async def probe():
                await h.select()
                await h.cmd(ops[0])
                if addr:
                    await h.addr(*addr)
                if data:
                    await h.data_in(data)
                for op in ops[1:]:
                    await h.cmd(op)
                await h.deselect()
            return probe

        row = lambda block, page, lun=0: g.row(lun, block, page)  # noqa: E731
        program_address = (0, 0, *h.row_cycles(row(9, 0)))

        async def features():
            await h.set_timing_mode(1)
            assert (await h.get_features())[0] == 1
            await h.set_timing_mode(0)

        async def status_enhanced():
            await h.select()
            assert ready(await _status_enh(h, row(1, 0)))
            await h.deselect()

        async def copyback_odd_to_even():
            for block in (2, 3):
                assert not failed(await h.erase(row(block, 0)))
            assert not failed(await h.program(row(2, 1), 0, b"odd"))
            assert await h.read(row(2, 1), 0, 3, copyback=True) == b"odd"
            assert not failed(await h.copyback_program(row(3, 0)))
            assert await h.read(row(3, 0), 0, 3) == b"odd"

        async def change_row_address():
            # 80h to block 4, then 85h with a full address: block 5 gets the
            # register with both chunks, block 4 nothing.
            await h.select()
            await h.cmd(OnfiCmd.PROGRAM_1)
            await h.addr(0, 0, *h.row_cycles(row(4, 0)))
            await h.data_in(b"ab")
            await h.cmd(OnfiCmd.CHANGE_WRITE_COL)
            await h.addr(*h.col_cycles(2), *h.row_cycles(row(5, 0)))
            await h.data_in(b"cd")
            await h.cmd(OnfiCmd.PROGRAM_2)
            await h.wait_ready()
            await h.deselect()
            assert await h.read(row(5, 0), 0, 4) == b"abcd"
            assert await h.read(row(4, 0), 0, 2) == b"\xff\xff"

        async def change_read_column_enhanced():
            assert not failed(await h.erase(row(10, 0)))
            assert not failed(await h.program(row(10, 0), 0, b"enh"))
            await h.read(row(10, 0), 0, 0)
            assert await h.change_read_column_enhanced(row(10, 0), 1, 2) == b"nh"

        async def small_data_move():
            """A second chunk of the same page after 11h (rather than another plane)."""
            await h.select()
            for confirm, col in ((OnfiCmd.PROGRAM_MULTI_PLANE, 0), (OnfiCmd.PROGRAM_2, 1)):
                await h.cmd(OnfiCmd.PROGRAM_1)
                await h.addr(*h.col_cycles(col), *h.row_cycles(row(9, 0)))
                await h.data_in(b"s")
                await h.cmd(confirm)
                await h.wait_ready()
            await h.deselect()

        async def multi_plane_program_erase():
            assert not failed(await h.erase_planes([row(10, 0), row(11, 0)]))
            assert not failed(await h.program_planes([(row(10, 0), 0, b"p0"), (row(11, 0), 0, b"p1")]))
            assert await h.read(row(10, 0), 0, 2) == b"p0" and await h.read(row(11, 0), 0, 2) == b"p1"
            assert not failed(await h.erase_planes([row(11, 0), row(10, 0)]))
            assert await h.read(row(11, 0), 0, 2) == b"\xff\xff"

        async def multi_plane_read():
            assert not failed(await h.erase_planes([row(12, 0), row(13, 0)]))
            for block in (12, 13):
                assert not failed(await h.program(row(block, 0), 0, b"r%d" % block))
            assert await h.read_planes([row(12, 0), row(13, 0)], 0, 3) == b"r13"
            assert await h.change_read_column_enhanced(row(12, 0), 0, 3) == b"r12"

        async def non_sequential():
            assert not failed(await h.program(row(6, 3), 0, b"3"))
            assert not failed(await h.program(row(6, 1), 0, b"1"))

        async def lun_overlap():
            await h.select()
            await h.cmd(OnfiCmd.ERASE_1)
            await h.addr(*h.row_cycles(row(7, 0, 0)))
            await h.cmd(OnfiCmd.ERASE_2)
            await h.wait(h.t["tWB"])
            assert not ready(await _status_enh(h, row(7, 0, 0)))
            await h.cmd(OnfiCmd.PROGRAM_1)
            await h.addr(0, 0, *h.row_cycles(row(7, 0, 1)))
            await h.data_in(b"L1")
            await h.cmd(OnfiCmd.PROGRAM_2)
            await h.wait_ready()
            await h.deselect()
            assert await h.read(row(7, 0, 1), 0, 2) == b"L1"

        def data_interface(p1: int):
            """SET FEATURES 01h with P1[5:4] naming a data interface other than SDR; RESET returns to SDR."""
            async def probe():
                await sequence(OnfiCmd.SET_FEATURES, addr=(OnfiFeature.TIMING_MODE,), data=bytes([p1, 0, 0, 0]))()
                await h.wait_ready()
                s = await tb.stats()
                assert s["interface"] in ("SDR", "NV-DDR2")
                if s["protocol_errors"] == 0:
                    assert s["interface"] == "NV-DDR2" and s["timing_mode"] == p1 & 0x0F
                await h.wait(ONFI_NVDDR2_TIMING_PS["tITC"][0] / 1000)  # before the RESET that returns to SDR
            return probe

        # How a host would use each capability; None where this harness gives
        # it no way to try (an x8 bus, no Vpp pin, no EZ NAND controller).
        opt = {
            OnfiOptCommand.PAGE_CACHE_PROGRAM: sequence(OnfiCmd.PROGRAM_1, 0x15, addr=program_address, data=b"x"),
            OnfiOptCommand.READ_CACHE: sequence(0x31),
            OnfiOptCommand.GET_SET_FEATURES: features,
            OnfiOptCommand.READ_STATUS_ENHANCED: status_enhanced,
            OnfiOptCommand.COPYBACK: copyback_odd_to_even,
            OnfiOptCommand.READ_UNIQUE_ID: sequence(0xED, addr=(0,)),
            OnfiOptCommand.CHANGE_READ_COLUMN_ENHANCED: change_read_column_enhanced,
            OnfiOptCommand.CHANGE_ROW_ADDRESS: change_row_address,
            OnfiOptCommand.SMALL_DATA_MOVE: small_data_move,
            OnfiOptCommand.RESET_LUN: sequence(0xFA, addr=h.row_cycles(row(0, 0))),
            OnfiOptCommand.VOLUME_SELECT: sequence(0xE1, addr=(0,)),
            OnfiOptCommand.ODT_CONFIGURE: sequence(0xE2, addr=(0,)),
            OnfiOptCommand.LUN_GET_SET_FEATURES: sequence(0xD4, addr=(0, OnfiFeature.TIMING_MODE)),
            OnfiOptCommand.ZQ_CALIBRATION: sequence(0xF9),
        }
        feat = {
            OnfiParamFeature.BUS_16: None,
            OnfiParamFeature.MULTI_LUN: lun_overlap if luns > 1 else None,
            OnfiParamFeature.NON_SEQUENTIAL_PROGRAM: non_sequential,
            OnfiParamFeature.MULTI_PLANE_PROGRAM_ERASE: multi_plane_program_erase,
            OnfiParamFeature.ODD_TO_EVEN_COPYBACK: copyback_odd_to_even,
            OnfiParamFeature.NV_DDR: data_interface(0x10),
            OnfiParamFeature.MULTI_PLANE_READ: multi_plane_read,
            OnfiParamFeature.EXTENDED_PARAM_PAGE: None,
            OnfiParamFeature.PROGRAM_REGISTER_CLEAR: None,
            OnfiParamFeature.EZ_NAND: None,
            OnfiParamFeature.NV_DDR2: data_interface(0x20),
            OnfiParamFeature.VOLUME_ADDRESSING: sequence(0xE1, addr=(0,)),
            OnfiParamFeature.EXTERNAL_VPP: None,
        }
        assert set(opt) == set(OnfiOptCommand) and set(feat) == set(OnfiParamFeature)
        for name, offset, table in (("optional command", ONFI_PARAM.OPT_COMMANDS, opt),
                                    ("feature", ONFI_PARAM.FEATURES, feat)):
            claimed = _bits(field(offset), type(next(iter(table))))
            assert field(offset) >> (max(table) + 1) == 0, f"reserved {name} bits set"
            for bit, probe in table.items():
                does = probe is not None and not await refused(probe)
                assert does == (bit in claimed), f"{name} {bit.name}: claimed {bit in claimed}, does {does}"
        await h.reset()


@cocotb.test()
async def program_read_columns_erase(dut):
    for profile in PROFILES:
        tb = await NandTB.create(dut, f"prog_{profile}", profile=profile)
        h = tb.host
        g = tb.cfg[0].geometry
        row = tb.row(3, 0)
        data, spare = pattern(24, 1), pattern(12, 2)
        st = await h.program(row, 8, data, extra={g.page_data: spare})
        assert not failed(st) and ready(st) and st >> OnfiStatus.WP_N & 1, hex(st)
        assert await h.read(row, 0, 40) == b"\xff" * 8 + data + b"\xff" * 8
        assert await h.change_read_column(g.page_data, 12) == spare
        assert await h.change_read_column(g.page_data + 12, 4) == b"\xff" * 4
        with tb.image() as img:
            assert img.read(0, 3, 0, 8, 24) == data
            assert img.spare(0, 3, 0)[:12] == spare
            assert img.page_state(0, 3, 0).intact
            assert img.erase_count(0, 3) == 0
        st = await h.erase(row)
        assert not failed(st)
        assert await h.read(row, 8, 24) == b"\xff" * 24
        with tb.image() as img:
            assert img.erase_count(0, 3) == 1
            assert not img.page_state(0, 3, 0).programmed
        s = await tb.expect_clean()
        assert s["programs"] == 1 and s["erases"] == 1 and s["reads"] == 2
        assert s["bytes_in"] == 36


@cocotb.test()
async def busy_status_and_array_times(dut):
    trace = Path(cocotb.plusargs["nandtb_dir"]) / "busy.trace"
    tb = await NandTB.create(dut, "busy", trace=trace)
    h = tb.host
    cfg = tb.cfg[0]
    row = tb.row(1, 0)
    for op, t_ns in (("program", cfg["t_prog_ns"]), ("read", cfg["t_r_ns"]), ("erase", cfg["t_bers_ns"])):
        await h.select()
        if op == "program":
            await h.cmd(OnfiCmd.PROGRAM_1)
            await h.addr(0, 0, *h.row_cycles(row))
            await h.data_in(b"\x00")
            await h.cmd(OnfiCmd.PROGRAM_2)
        elif op == "read":
            await h.cmd(OnfiCmd.READ_1)
            await h.addr(0, 0, *h.row_cycles(row))
            await h.cmd(OnfiCmd.READ_2)
        else:
            await h.cmd(OnfiCmd.ERASE_1)
            await h.addr(*h.row_cycles(row))
            await h.cmd(OnfiCmd.ERASE_2)
        t0 = get_sim_time("ns")
        await h.wait(h.t["tWB"])
        assert h.rb == 0, f"{op}: R/B# high after tWB"
        await h.cmd(OnfiCmd.READ_STATUS)
        s = (await h.data_out(1))[0]
        assert not ready(s) and not s >> OnfiStatus.ARDY & 1, f"{op}: status {s:02x} while busy"
        await h.wait_ready()
        busy = get_sim_time("ns") - t0
        assert t_ns <= busy <= t_ns + 1000, f"{op}: busy {busy} ns, array time {t_ns} ns"
        await h.cmd(OnfiCmd.READ_STATUS)
        s = (await h.data_out(1))[0]
        assert ready(s) and not failed(s), f"{op}: status {s:02x}"
        if op == "read":
            await h.cmd(OnfiCmd.READ_1)  # back to data output after status
            assert await h.data_out(1) == b"\x00"
        await h.deselect()
    await tb.expect_clean()
    assert await tb.stat("BUSY_NS") >= cfg["t_prog_ns"] + cfg["t_r_ns"] + cfg["t_bers_ns"]
    await tb.ctl(nandsim.NandCtl.RELOAD)  # closes (flushes) the trace
    ops = [line.split()[2] for line in trace.read_text().splitlines()]
    assert ops == ["PROGRAM", "READ", "ERASE"], ops


@cocotb.test()
async def features_and_reset(dut):
    tb = await NandTB.create(dut, "features")
    h = tb.host
    assert (await h.get_features())[0] == 0
    await h.set_timing_mode(4)
    assert (await h.get_features())[0] == 4
    await h.reset()  # RESET keeps the timing mode; power-on restores the configured one
    assert (await h.get_features())[0] == 4
    assert (await tb.stats())["timing_mode"] == 4
    await tb.expect_clean()


@cocotb.test()
async def copyback(dut):
    for profile in PROFILES:
        tb = await NandTB.create(dut, f"copyback_{profile}", profile=profile)
        h = tb.host
        g = tb.cfg[0].geometry
        src, dst = tb.row(2, 0), tb.row(5, 0)
        data = pattern(32, 3)
        assert not failed(await h.program(src, 0, data, extra={g.page_data: b"\x5a" * 4}))
        assert await h.read(src, 0, 4, copyback=True) == data[:4]
        st = await h.copyback_program(dst, patch={16: b"\x00\x01", g.page_data + 2: b"\x33"})
        assert not failed(st)
        want = bytearray(data)
        want[16:18] = b"\x00\x01"
        assert await h.read(dst, 0, 32) == bytes(want)
        assert await h.change_read_column(g.page_data, 4) == b"\x5a\x5a\x33\x5a"
        await tb.expect_clean()


@cocotb.test()
async def multi_lun_overlap(dut):
    tb = await NandTB.create(dut, "luns", luns=2)
    h = tb.host
    g = tb.cfg[0].geometry
    r0, r1 = g.row(0, 1, 0), g.row(1, 1, 0)
    assert not failed(await h.program(r1, 0, b"\x11\x22"))
    # Erase on LUN 0, and while it runs program on LUN 1.
    await h.select()
    await h.cmd(OnfiCmd.ERASE_1)
    await h.addr(*h.row_cycles(r0))
    await h.cmd(OnfiCmd.ERASE_2)
    await h.wait(h.t["tWB"])
    assert not ready(await _status_enh(h, r0)), "LUN 0 erasing"
    assert ready(await _status_enh(h, r1)), "LUN 1 idle"
    await h.cmd(OnfiCmd.PROGRAM_1)
    await h.addr(0, 0, *h.row_cycles(g.row(1, 1, 1)))
    await h.data_in(b"\x44")
    await h.cmd(OnfiCmd.PROGRAM_2)
    await h.wait_ready()
    await h.deselect()
    assert await h.read(g.row(1, 1, 1), 0, 1) == b"\x44"
    assert await h.read(r1, 0, 2) == b"\x11\x22"
    await tb.expect_clean()


async def _status_enh(h, row):
    await h.cmd(OnfiCmd.READ_STATUS_ENH)
    await h.addr(*h.row_cycles(row))
    return (await h.data_out(1))[0]


@cocotb.test()
async def two_targets_share_a_channel(dut):
    tb = await NandTB.create(dut, "two", target1=dict(profile="realistic"))
    h = tb.host
    await h.select(1)
    await h.deselect()
    assert not failed(await h.program(tb.row(7, 3, target=1), 0, b"target1"))
    h.target = 0
    assert not failed(await h.program(tb.row(7, 3), 0, b"target0"))
    h.target = 1
    assert await h.read(tb.row(7, 3, target=1), 0, 7) == b"target1"
    pp = await h.read_param_page(84)
    assert struct.unpack_from("<I", pp, 80)[0] == 4096
    h.target = 0
    assert await h.read(tb.row(7, 3), 0, 7) == b"target0"
    await tb.expect_clean(0)
    await tb.expect_clean(1)


@cocotb.test()
async def protocol_errors_are_reported(dut):
    tb = await NandTB.create(dut, "protocol")
    h = tb.host
    row = tb.row(1, 0)

    async def expect(fragment: str, script):
        await h.reset()
        await tb.ctl(nandsim.NandCtl.CLEAR_STATS)
        await h.select()
        await script()
        await h.deselect()
        await h.reset()
        s = await tb.stats()
        assert s["protocol_errors"] >= 1, f"not reported: {fragment}"
        assert any(fragment in e for e in s["error_log"]), (fragment, s["error_log"])
        assert s["violations_total"] == 0, s["violation_log"]

    async def unsupported():
        await h.cmd(0x11)

    async def short_address():
        await h.cmd(OnfiCmd.READ_1)
        await h.addr(0, 0, 0, 0)
        await h.cmd(OnfiCmd.READ_2)

    async def confirm_alone():
        await h.cmd(OnfiCmd.PROGRAM_2)

    async def data_without_command():
        await h.cmd(OnfiCmd.READ_STATUS)
        await h.data_out(1)
        await h.data_in(b"\x00", first_gap_ns=0)

    async def read_nothing():
        await h.cmd(OnfiCmd.ERASE_1)
        await h.data_out(1, first_gap_ns=200)

    async def change_column_outside_program():
        await h.cmd(OnfiCmd.CHANGE_WRITE_COL)
        await h.addr(0, 0)
        await h.data_in(b"\x00", first_gap_ns=200)

    async def busy_read():
        await h.cmd(OnfiCmd.READ_1)
        await h.addr(0, 0, *h.row_cycles(row))
        await h.cmd(OnfiCmd.READ_2)
        await h.wait(h.t["tWB"] + h.t["tWHR"])
        await h.data_out(1, first_gap_ns=0)

    await expect("unsupported command 11h", unsupported)
    await expect("READ: expected 5 address cycles", short_address)
    await expect("unsupported command 10h", confirm_alone)
    await expect("data cycle 00h outside", data_without_command)
    await expect("RE# read cycle with no data", read_nothing)
    await expect("CHANGE WRITE COLUMN outside", change_column_outside_program)
    await expect("while LUN 0 is busy", busy_read)
    await Timer(1, "us")
