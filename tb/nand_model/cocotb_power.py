"""Power cuts: torn pages, half-erased blocks, MLC paired-page damage, a dead
bus afterwards, and restarts on the same image (in-process and across
simulator processes)."""

import math
import os

import cocotb
from cocotb.triggers import Timer

from atomflash import spec
from atomflash.nandsim import NandCutWhen, oob_kind_column, paired_lower, read_stats
from atomflash.spec import Kind, OnfiCmd
from nand_tb import NandTB, pattern
from onfi_host import NandTimeout, failed


def zero_bits(data: bytes) -> int:
    return sum(8 - bin(b).count("1") for b in data)


async def start_program(h, row: int, data: bytes) -> None:
    """PAGE PROGRAM up to the confirm, without waiting for the end."""
    await h.select()
    await h.cmd(OnfiCmd.PROGRAM_1)
    await h.addr(0, 0, *h.row_cycles(row))
    await h.data_in(data)
    await h.cmd(OnfiCmd.PROGRAM_2)


async def expect_dead(tb) -> None:
    """After a cut: R/B# stays low, nothing drives DQ, the model says power_lost."""
    h = tb.host
    try:
        await h.wait_ready(timeout_ns=3 * tb.cfg[0]["t_bers_ns"])
    except NandTimeout:
        pass
    else:
        raise AssertionError("R/B# rose after a power cut")
    assert tb.power_lost()
    await h.cmd(OnfiCmd.READ_STATUS)
    assert int(h.dut.dq_oe.value) == 0
    assert await h.data_out(1) == b"\x00", "a dead target drives nothing"
    await h.deselect()
    assert (await tb.stats())["power_lost"] is True


@cocotb.test()
async def cut_mid_program_tears_only_that_page(dut):
    tb = await NandTB.create(dut, "cut_prog")
    h = tb.host
    done, torn = pattern(256, 1), pattern(256, 2)
    assert not failed(await h.program(tb.row(2, 0), 0, done))
    await tb.schedule_cut(NandCutWhen.PROGRAM, 1, progress=0.5)
    await start_program(h, tb.row(2, 1), torn)
    await expect_dead(tb)
    with tb.image() as img:
        assert img.page_state(0, 2, 0).intact and img.data(0, 2, 0)[:256] == done
        st = img.page_state(0, 2, 1)
        assert st.torn and st.programmed and not st.intact
        got = img.data(0, 2, 1)[:256]
        # Half way: about half of the bits the program was to clear are cleared.
        want0 = zero_bits(torn)
        cleared = sum(bin(~g & ~t & 0xFF).count("1") for g, t in zip(got, torn))
        sd = math.sqrt(want0 * 0.25)
        assert want0 / 2 - 5 * sd <= cleared <= want0 / 2 + 5 * sd, (cleared, want0)
        stray = sum(bin(~g & t & 0xFF).count("1") for g, t in zip(got, torn))
        assert stray <= 10, f"{stray} bits cleared that the program never touched"
        assert img.power_cuts == 1
    # Power back: the completed page is intact, the torn one is neither old nor new.
    await tb.power_cycle()
    assert await h.read(tb.row(2, 0), 0, 256) == done
    back = await h.read(tb.row(2, 1), 0, 256)
    assert back != torn and back != b"\xff" * 256
    await tb.expect_clean()


@cocotb.test()
async def cut_mid_erase_leaves_block_half_erased(dut):
    tb = await NandTB.create(dut, "cut_erase")
    h = tb.host
    pages = {p: pattern(64, 10 + p) for p in range(3)}
    for p, d in pages.items():
        assert not failed(await h.program(tb.row(3, p), 0, d))
    assert not failed(await h.program(tb.row(4, 0), 0, pages[0]))
    await tb.schedule_cut(NandCutWhen.ERASE, 1, progress=0.5)
    await h.select()
    await h.cmd(OnfiCmd.ERASE_1)
    await h.addr(*h.row_cycles(tb.row(3, 0)))
    await h.cmd(OnfiCmd.ERASE_2)
    await expect_dead(tb)
    with tb.image() as img:
        assert img.block(0, 3).erase_interrupted
        for p, d in pages.items():
            got = img.data(0, 3, p)[:64]
            assert got != d, f"page {p} still intact"
            assert got != b"\xff" * 64, f"page {p} fully erased"
            assert img.page_state(0, 3, p).erase_disturbed
        assert img.page_state(0, 4, 0).intact and img.data(0, 4, 0)[:64] == pages[0]
    await tb.power_cycle()
    assert await h.read(tb.row(4, 0), 0, 64) == pages[0]
    assert not failed(await h.erase(tb.row(3, 0))), "a new erase repairs the block"
    assert await h.read(tb.row(3, 1), 0, 64) == b"\xff" * 64


@cocotb.test()
async def cut_from_the_config_file(dut):
    """The fault plan works without cocotb: power_cut_program / power_cut_ns in the config."""
    tb = await NandTB.create(dut, "cut_cfg", power_cut_program=2, power_cut_progress=0.0)
    h = tb.host
    assert not failed(await h.program(tb.row(1, 0), 0, b"\x00" * 8))
    await start_program(h, tb.row(1, 1), b"\x00" * 8)
    await expect_dead(tb)
    with tb.image() as img:
        st = img.page_state(0, 1, 1)
        assert st.torn, st
        assert zero_bits(img.data(0, 1, 1)[:8]) < 8, "cut at the very start: almost nothing programmed"
    tb = await NandTB.create(dut, "cut_time", power_cut_ns=30_000)
    assert not tb.power_lost()
    await Timer(31, "us")
    assert tb.power_lost()
    with tb.image() as img:
        assert not any(img.page_state(*a).torn for a in img.pages())


@cocotb.test()
async def mlc_paired_page_damage(dut):
    for mlc in (1, 0):
        tb = await NandTB.create(dut, f"mlc{mlc}", mlc_paired=mlc)
        h = tb.host
        ppb = tb.cfg[0]["pages_per_block"]
        upper = 4
        lower = paired_lower(upper, ppb)
        assert lower == 1
        data = {p: pattern(32, 20 + p) for p in range(upper)}
        for p, d in data.items():
            assert not failed(await h.program(tb.row(6, p), 0, d))
        await tb.schedule_cut(NandCutWhen.PROGRAM, 1, progress=0.5)
        await start_program(h, tb.row(6, upper), pattern(32, 99))
        await expect_dead(tb)
        with tb.image() as img:
            for p, d in data.items():
                st = img.page_state(0, 6, p)
                full = d + b"\xff" * (img.geometry.page_bytes - 32)
                if mlc and p == lower:
                    assert st.paired_damage and not st.intact
                    diff = sum(bin(a ^ b).count("1") for a, b in zip(img.page(0, 6, p), full))
                    assert diff > 100, f"paired lower page {p}: only {diff} bits damaged"
                else:
                    assert st.intact and img.page(0, 6, p) == full, f"page {p} (mlc={mlc}) must be untouched"
            assert img.header.bits_per_cell == (2 if mlc else 1)


def record_page(kind: Kind, seq: int, page_data: int) -> dict[int, bytes]:
    """Column -> bytes of a page as the NAND channel writes it (spec.nand_page_layout):
    some data, then the bad-block marker and the OOB record right after the page
    data, then (stand-in) BCH parity at the parity column -- three data-input
    chunks, the record's kind in the second one."""
    lay = spec.nand_page_layout(spec.NAND_PROFILES["small"])
    assert lay.oob_col == page_data
    rec = spec.pack_oob(kind=int(kind), seq=seq, vseq=seq, lba=seq if kind == Kind.DATA else 0, group_len=1)
    return {0: pattern(32, seq), lay.oob_col: b"\xff" * spec.NAND_BBM_BYTES + rec,
            lay.parity_col: pattern(lay.parity_bytes, 100 + seq)}


async def program_chunks(h, row: int, chunks: dict[int, bytes], *, wait: bool = True) -> int:
    (col0, first), *rest = chunks.items()
    if wait:
        return await h.program(row, col0, first, extra=dict(rest))
    await h.select()
    await h.cmd(OnfiCmd.PROGRAM_1)
    await h.addr(*h.col_cycles(col0), *h.row_cycles(row))
    await h.data_in(first)
    for col, chunk in rest:
        await h.cmd(OnfiCmd.CHANGE_WRITE_COL)
        await h.addr(*h.col_cycles(col))
        await h.data_in(chunk, first_gap_ns=200)  # tCCS
    await h.cmd(OnfiCmd.PROGRAM_2)
    return 0


def page_bytes_of(chunks: dict[int, bytes], page_bytes: int) -> bytes:
    page = bytearray(b"\xff" * page_bytes)
    for col, chunk in chunks.items():
        page[col:col + len(chunk)] = chunk
    return bytes(page)


@cocotb.test()
async def cut_during_the_kth_program_of_a_kind(dut):
    """power_cut_kind / power_cut_kind_nth: the 2nd program of a COMMIT record page is
    torn; DATA and REMAP pages and the 1st COMMIT page are not; programs_by_kind counts."""
    tb = await NandTB.create(dut, "cut_kind", power_cut_kind=int(Kind.COMMIT), power_cut_kind_nth=2)
    h = tb.host
    pd, pb = tb.cfg[0]["page_data"], tb.cfg[0].geometry.page_bytes
    # Page 0: only the spare written, one data input starting at the record's column.
    spare0 = b"\xff" * spec.NAND_BBM_BYTES + spec.pack_oob(kind=int(Kind.DATA), seq=1, lba=5, group_len=1)
    plan = [({pd: spare0}, Kind.DATA), (record_page(Kind.COMMIT, 2, pd), Kind.COMMIT),
            (record_page(Kind.REMAP, 3, pd), Kind.REMAP), (record_page(Kind.CHECKPOINT, 4, pd), Kind.CHECKPOINT)]
    for page, (chunks, _) in enumerate(plan):
        assert not failed(await program_chunks(h, tb.row(8, page), chunks)), page
    assert await tb.stat("PROGRAMS_KIND", int(Kind.COMMIT)) == 1
    assert not tb.power_lost()
    cut = record_page(Kind.COMMIT, 5, pd)
    await program_chunks(h, tb.row(8, len(plan)), cut, wait=False)
    await expect_dead(tb)
    with tb.image() as img:
        for page, (chunks, kind) in enumerate(plan):
            assert img.page_state(0, 8, page).intact, page
            assert img.page(0, 8, page) == page_bytes_of(chunks, pb), page
            assert img.oob(0, 8, page)[0] == kind
        st = img.page_state(0, 8, len(plan))
        assert st.torn and not st.intact
        got = img.page(0, 8, len(plan))
        assert got != page_bytes_of(cut, pb) and got != b"\xff" * pb
        assert img.power_cuts == 1
    s = read_stats(tb.cfg[0].stats_path())
    assert s["programs"] == 5
    assert s["programs_by_kind"] == {"DATA": 1, "COMMIT": 2, "REMAP": 1, "CHECKPOINT": 1}, s["programs_by_kind"]
    # Other kinds never cut; a kind that never comes never cuts.
    tb = await NandTB.create(dut, "cut_kind_none", power_cut_kind=int(Kind.TRIM))
    h = tb.host
    for page, (chunks, _) in enumerate(plan):
        assert not failed(await program_chunks(h, tb.row(8, page), chunks)), page
    assert not tb.power_lost()
    s = await tb.expect_clean()
    assert sum(s["programs_by_kind"].values()) == s["programs"] == 4


@cocotb.test()
async def cut_by_kind_from_the_control_port_in_a_copyback(dut):
    """SCHEDULE_CUT PROGRAM_KIND: a COPYBACK PROGRAM whose patch makes the page a GC_COPY
    is cut; a copyback keeping kind DATA is not; programs without a record count as ERASED."""
    tb = await NandTB.create(dut, "cut_kind_cb")
    h = tb.host
    pd, pb = tb.cfg[0]["page_data"], tb.cfg[0].geometry.page_bytes
    col = pd + spec.NAND_BBM_BYTES
    assert col + spec.OOB["kind"].offset == oob_kind_column(pd)
    assert not failed(await h.program(tb.row(9, 0), 0, pattern(16, 7)))  # no record: kind byte FFh
    src = record_page(Kind.DATA, 9, pd)
    assert not failed(await program_chunks(h, tb.row(9, 1), src))
    await tb.schedule_cut(NandCutWhen.PROGRAM_KIND, 1 | int(Kind.GC_COPY) << 32, progress=0.5)
    await h.read(tb.row(9, 1), 0, 0, copyback=True)
    assert not failed(await h.copyback_program(tb.row(9, 2)))  # still DATA: no cut
    assert not tb.power_lost()
    assert await tb.stat("PROGRAMS_KIND", int(Kind.DATA)) == 2
    assert await tb.stat("PROGRAMS_KIND", int(Kind.ERASED)) == 1
    moved = spec.pack_oob(kind=int(Kind.GC_COPY), seq=10, vseq=9, lba=9, group_len=1)
    await h.read(tb.row(9, 1), 0, 0, copyback=True)
    await h.select()
    await h.cmd(OnfiCmd.CHANGE_WRITE_COL)
    await h.addr(*h.col_cycles(col), *h.row_cycles(tb.row(9, 3)))
    await h.data_in(moved)
    await h.cmd(OnfiCmd.PROGRAM_2)
    await expect_dead(tb)
    with tb.image() as img:
        assert img.page(0, 9, 2) == page_bytes_of(src, pb) and img.page_state(0, 9, 2).intact
        assert img.page_state(0, 9, 3).torn
    s = read_stats(tb.cfg[0].stats_path())
    assert s["programs_by_kind"] == {"DATA": 2, "GC_COPY": 1, "ERASED": 1}, s["programs_by_kind"]


@cocotb.test()
async def reset_aborts_a_program(dut):
    tb = await NandTB.create(dut, "reset_abort")
    h = tb.host
    await start_program(h, tb.row(7, 0), b"\x00" * 16)
    await h.wait(h.t["tWB"] + tb.cfg[0]["t_prog_ns"] / 2)
    await h.cmd(OnfiCmd.RESET)
    await h.wait_ready()
    await h.deselect()
    with tb.image() as img:
        assert img.page_state(0, 7, 0).torn
    assert not tb.power_lost()


# -- across simulator processes (selected by the pytest entry) -----------------

PERSIST = dict(fresh=False)


@cocotb.test()
async def persist_1_write_and_cut(dut):
    if "nandtb_persist" not in cocotb.plusargs:
        return
    tb = await NandTB.create(dut, "persist", **PERSIST)
    h = tb.host
    for p in range(3):
        assert not failed(await h.program(tb.row(5, p), 0, pattern(40, p)))
    assert not failed(await h.erase(tb.row(9, 0)))
    await tb.schedule_cut(NandCutWhen.PROGRAM, 1)
    await start_program(h, tb.row(5, 3), pattern(40, 3))
    await expect_dead(tb)


@cocotb.test()
async def persist_2_kill_mid_program(dut):
    """Restart after the cut, start a program and kill the simulator while it runs."""
    if "nandtb_persist" not in cocotb.plusargs:
        return
    tb = await NandTB.create(dut, "persist", **PERSIST)
    h = tb.host
    await start_program(h, tb.row(5, 4), pattern(40, 4))
    await h.wait(h.t["tWB"] + 1000)
    os._exit(0)  # no clean shutdown: only what the mmap'd image already holds survives


@cocotb.test()
async def persist_3_check(dut):
    if "nandtb_persist" not in cocotb.plusargs:
        return
    tb = await NandTB.create(dut, "persist", **PERSIST)
    h = tb.host
    with tb.image() as img:
        assert img.power_ons == 3 and img.power_cuts == 1, (img.power_ons, img.power_cuts)
        assert img.erase_count(0, 9) == 1
        assert img.page_state(0, 5, 3).torn
        assert img.page_state(0, 5, 4).torn, "killed mid-program: torn at the next power-on"
    for p in range(3):
        assert await h.read(tb.row(5, p), 0, 40) == pattern(40, p)
    await tb.expect_clean()
