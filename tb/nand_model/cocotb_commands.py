"""Every command on both profiles: ID, parameter page, status, features, read,
program, columns, erase, copyback, multi-LUN, two targets, protocol errors."""

import struct
from pathlib import Path

import cocotb
from cocotb.triggers import Timer
from cocotb.utils import get_sim_time

from atomflash import nandsim
from atomflash.spec import NAND_PROFILES, OnfiCmd, OnfiStatus
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
