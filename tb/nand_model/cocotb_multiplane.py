"""Multi-plane PROGRAM, READ and ERASE (two planes per LUN, the plane the low
block address bit): contents against a reference, one array time for all
planes, ONFI's address rules, per-plane status, what the parameter page
claims, and power cuts tearing every plane's page."""

import random
import struct

import cocotb
from cocotb.utils import get_sim_time

from atomflash.nandsim import NandCtl, NandCutWhen, paired_lower
from atomflash.spec import (NAND_PROFILES, ONFI_MULTI_PLANE, ONFI_PARAM, OnfiCmd, OnfiMultiPlaneAttr, OnfiOptCommand,
                            OnfiParamFeature, OnfiStatus)
from cocotb_power import expect_dead
from nand_tb import NandTB, pattern
from onfi_host import failed, ready

PROFILES = ("small", "realistic")
SEED = 20240


def page_of(chunks: dict[int, bytes], page_bytes: int) -> bytes:
    page = bytearray(b"\xff" * page_bytes)
    for col, data in chunks.items():
        page[col:col + len(data)] = data
    return bytes(page)


async def busy_after(h, confirm: int) -> int:
    """Issue ``confirm``; ns from its WE# rise until R/B# is back high (tWB and tRR included)."""
    await h.cmd(confirm)
    t0 = get_sim_time("ns")
    await h.wait(h.t["tWB"])
    assert h.rb == 0, f"{confirm:02X}h: R/B# high after tWB"
    await h.wait_ready()
    return get_sim_time("ns") - t0


async def fail_bits(h, *rows: int) -> list[int]:
    """SR[0] of READ STATUS ENHANCED for each row (its LUN and plane)."""
    return [await h.read_status_enhanced(r) & 1 << OnfiStatus.FAIL for r in rows]


@cocotb.test()
async def program_two_planes_then_read_each_page(dut):
    """Random pairs of blocks, random columns and data, planes in random order:
    every page reads back (single-plane READ) as the reference says, beside
    single-plane programs on both planes."""
    rng = random.Random(SEED)
    for profile in PROFILES:
        tb = await NandTB.create(dut, f"mp_prog_{profile}", profile=profile)
        h = tb.host
        g = tb.cfg[0].geometry
        ref: dict[tuple[int, int], dict[int, bytes]] = {}
        next_page: dict[int, int] = {}
        pairs = rng.sample(range(1, g.blocks_per_lun // 2), 3)
        multi = 0
        for _ in range(6):
            pair = rng.choice(pairs)
            page = next_page.get(pair, 0)
            next_page[pair] = page + 1
            blocks = rng.sample([2 * pair, 2 * pair + 1], 2)
            if rng.random() < 0.25:
                blocks = blocks[:1]  # a single-plane program on either plane, same block pair
            planes = []
            for block in blocks:
                col = rng.randrange(g.page_bytes - 40)
                data = rng.randbytes(rng.randint(1, 40))
                planes.append((tb.row(block, page), col, data))
                ref[block, page] = {col: data}
            if len(planes) == 1:
                st = await h.program(*planes[0])
            else:
                st = await h.program_planes(planes)
                multi += 1
            assert not failed(st) and ready(st), f"{profile} {blocks} page {page}: status {st:02x}"
        for (block, page), chunks in ref.items():
            (col, data), = chunks.items()
            assert await h.read(tb.row(block, page), col, len(data)) == data, (profile, block, page)
        with tb.image() as img:
            for (block, page), chunks in ref.items():
                assert img.page_state(0, block, page).intact, (block, page)
                assert img.page(0, block, page) == page_of(chunks, g.page_bytes), (block, page)
            programmed = set((b, p) for _, b, p in img.pages())
            assert programmed == set(ref), "a page programmed that no plane named"
        s = await tb.expect_clean()
        assert s["programs"] == len(ref), "one program per plane"
        assert s["multi_plane_ops"] == multi and multi >= 3
        assert s["reads"] == len(ref)


@cocotb.test()
async def read_two_planes_through_change_read_column_enhanced(dut):
    """00h-32h, 00h-30h loads both planes' registers in one tR; 06h-E0h picks a plane
    and column, 05h-E0h then moves within that plane."""
    rng = random.Random(SEED + 1)
    tb = await NandTB.create(dut, "mp_read")
    h = tb.host
    g = tb.cfg[0].geometry
    cfg = tb.cfg[0]
    ref = {}
    for block in (8, 9):
        for page in range(2):
            chunks = {0: pattern(24, block * 8 + page), g.page_data: pattern(8, 100 + block * 8 + page)}
            assert not failed(await h.program(tb.row(block, page), 0, chunks[0], extra={g.page_data: chunks[g.page_data]}))
            ref[block, page] = page_of(chunks, g.page_bytes)
    reads = await tb.stat("READS")
    for page in range(2):
        order = rng.sample([8, 9], 2)
        rows = [tb.row(b, page) for b in order]
        # The first plane: 32h, busy tDBSY only.
        await h.select()
        await h.cmd(OnfiCmd.READ_1)
        await h.addr(0, 0, *h.row_cycles(rows[0]))
        dbsy = await busy_after(h, OnfiCmd.READ_MULTI_PLANE)
        assert ONFI_MULTI_PLANE.T_DBSY_NS <= dbsy <= ONFI_MULTI_PLANE.T_DBSY_NS + 1000, dbsy
        col = rng.randrange(24)
        await h.cmd(OnfiCmd.READ_1)
        await h.addr(*h.col_cycles(col), *h.row_cycles(rows[1]))
        t_r = await busy_after(h, OnfiCmd.READ_2)
        assert cfg["t_r_ns"] <= t_r <= cfg["t_r_ns"] + 1000, f"one tR for both planes, busy {t_r} ns"
        # Data output starts in the last plane addressed, at its column.
        assert await h.data_out(4, first_gap_ns=0) == ref[order[1], page][col:col + 4]
        await h.deselect()
        for block in rng.sample(order, 2) + [rng.choice(order)]:  # each plane at least once
            col = rng.choice([rng.randrange(24), g.page_data + rng.randrange(8)])
            n = rng.randint(1, 6)
            assert await h.change_read_column_enhanced(tb.row(block, page), col, n) == ref[block, page][col:col + n]
            col2 = rng.randrange(g.page_data + 8 - n)
            assert await h.change_read_column(col2, n) == ref[block, page][col2:col2 + n], "05h stays in the plane 06h chose"
    assert await tb.stat("READS") - reads == 4, "a multi-plane read counts one read per plane"
    s = await tb.expect_clean()
    assert s["multi_plane_ops"] == 2


@cocotb.test()
async def erase_two_planes(dut):
    """60h-D1h, 60h-D0h erases both blocks in one tBERS (the page bits do not matter);
    a third block keeps its data."""
    tb = await NandTB.create(dut, "mp_erase")
    h = tb.host
    cfg = tb.cfg[0]
    for block in (6, 7, 8):
        for page in range(2):
            assert not failed(await h.program(tb.row(block, page), 0, pattern(16, block + page)))
    await h.select()
    await h.cmd(OnfiCmd.ERASE_1)
    await h.addr(*h.row_cycles(tb.row(7, 0)))
    dbsy = await busy_after(h, OnfiCmd.ERASE_MULTI_PLANE)
    assert ONFI_MULTI_PLANE.T_DBSY_NS <= dbsy <= ONFI_MULTI_PLANE.T_DBSY_NS + 1000, dbsy
    await h.cmd(OnfiCmd.ERASE_1)
    await h.addr(*h.row_cycles(tb.row(6, 5)))
    t_bers = await busy_after(h, OnfiCmd.ERASE_2)
    assert cfg["t_bers_ns"] <= t_bers <= cfg["t_bers_ns"] + 1000, f"one tBERS for both blocks, busy {t_bers} ns"
    assert not failed(await h._status_and_deselect())
    for block in (6, 7):
        assert await h.read(tb.row(block, 1), 0, 16) == b"\xff" * 16
    assert await h.read(tb.row(8, 1), 0, 16) == pattern(16, 9)
    with tb.image() as img:
        assert [img.erase_count(0, b) for b in (6, 7, 8)] == [1, 1, 0]
        assert not any(img.page_state(0, b, p).programmed for b in (6, 7) for p in range(2))
    # The helper's form, then programs again in both planes.
    assert not failed(await h.erase_planes([tb.row(6, 0), tb.row(7, 0)]))
    assert not failed(await h.program_planes([(tb.row(6, 0), 0, b"six"), (tb.row(7, 0), 0, b"seven")]))
    assert await h.read(tb.row(7, 0), 0, 5) == b"seven"
    s = await tb.expect_clean()
    assert s["erases"] == 4 and s["multi_plane_ops"] == 3


@cocotb.test()
async def one_tprog_for_both_planes(dut):
    """11h: busy tDBSY; the final 10h: busy one tPROG for both pages (not two), the
    LUN's busy time says the same; a second plane sent during tDBSY is refused."""
    tb = await NandTB.create(dut, "mp_tprog")
    h = tb.host
    cfg = tb.cfg[0]
    busy0 = await tb.stat("BUSY_NS")
    await h.select()
    await h.cmd(OnfiCmd.PROGRAM_1)
    await h.addr(0, 0, *h.row_cycles(tb.row(2, 0)))
    await h.data_in(b"plane0")
    dbsy = await busy_after(h, OnfiCmd.PROGRAM_MULTI_PLANE)
    assert ONFI_MULTI_PLANE.T_DBSY_NS <= dbsy <= ONFI_MULTI_PLANE.T_DBSY_NS + 1000, dbsy
    with tb.image() as img:
        assert not img.page_state(0, 2, 0).programmed, "nothing programmed before the last plane"
    await h.cmd(OnfiCmd.PROGRAM_1)
    await h.addr(0, 0, *h.row_cycles(tb.row(3, 0)))
    await h.data_in(b"plane1")
    t_prog = await busy_after(h, OnfiCmd.PROGRAM_2)
    assert cfg["t_prog_ns"] <= t_prog <= cfg["t_prog_ns"] + 1000, f"busy {t_prog} ns for two planes"
    assert not failed(await h._status_and_deselect())
    busy = await tb.stat("BUSY_NS") - busy0
    assert cfg["t_prog_ns"] + ONFI_MULTI_PLANE.T_DBSY_NS <= busy < cfg["t_prog_ns"] + 2 * ONFI_MULTI_PLANE.T_DBSY_NS, busy
    assert await h.read(tb.row(2, 0), 0, 6) == b"plane0" and await h.read(tb.row(3, 0), 0, 6) == b"plane1"
    await tb.expect_clean()

    # The host must wait out tDBSY: the next plane's confirm while the LUN is still
    # busy is an error (timing mode 5, so that the address cycles fit in tDBSY).
    await h.set_timing_mode(5)
    await h.select()
    await h.cmd(OnfiCmd.READ_1)
    await h.addr(0, 0, *h.row_cycles(tb.row(2, 0)))
    await h.cmd(OnfiCmd.READ_MULTI_PLANE)
    await h.cmd(OnfiCmd.READ_1)
    await h.addr(0, 0, *h.row_cycles(tb.row(3, 0)))
    await h.cmd(OnfiCmd.READ_2)
    await h.wait_ready()
    await h.deselect()
    s = await tb.stats()
    assert s["protocol_errors"] == 1 and "READ to a busy LUN" in s["error_log"][0], s["error_log"]
    assert await h.read(tb.row(3, 0), 0, 6) == b"plane1", "a single-plane READ works after it"


@cocotb.test()
async def address_rules(dut):
    """Each broken rule is a protocol error naming it; a program or erase then does
    nothing and reports FAIL, a read loads nothing; the part works on afterwards."""
    tb = await NandTB.create(dut, "mp_rules", luns=2)
    h = tb.host
    g = tb.cfg[0].geometry

    async def broken(fragment: str, script) -> int:
        await h.reset()
        await tb.ctl(NandCtl.CLEAR_STATS)
        status = await script()
        s = await tb.stats()
        assert s["protocol_errors"] >= 1, f"not reported: {fragment}"
        assert any(fragment in e for e in s["error_log"]), (fragment, s["error_log"])
        assert s["violations_total"] == 0, s["violation_log"]
        return status

    def program(*addresses):
        async def script():
            return await h.program_planes([(g.row(lun, block, page), 0, b"x%d" % block)
                                           for lun, block, page in addresses])
        return script

    cases = {
        "plane 0 addressed twice": [(0, 12, 0), (0, 12, 0)],
        "page 1 where the first plane has page 0": [(0, 12, 0), (0, 13, 1)],
        "block 15 and block 12 differ above the plane bits": [(0, 12, 0), (0, 15, 0)],
        "a plane on LUN 1, the others on LUN 0": [(0, 12, 0), (1, 13, 0)],
    }
    for fragment, addresses in cases.items():
        status = await broken(fragment, program(*addresses))
        assert failed(status), f"{fragment}: status {status:02x}"
        with tb.image() as img:
            assert not any(img.page_state(lun, block, page).programmed for lun, block, page in addresses), fragment
    # Planes in either order, after all those: fine.
    assert not failed(await h.program_planes([(g.row(0, 13, 0), 0, b"B"), (g.row(0, 12, 0), 0, b"A")]))
    assert await h.read(g.row(0, 12, 0), 0, 1) == b"A" and await h.read(g.row(0, 13, 0), 0, 1) == b"B"

    # Erase: the blocks keep their data and their erase counts.
    async def erase_same_plane():
        return await h.erase_planes([g.row(0, 12, 0), g.row(0, 14, 0)])
    assert failed(await broken("plane 0 addressed twice", erase_same_plane))
    with tb.image() as img:
        assert img.page_state(0, 12, 0).programmed and img.erase_count(0, 12) == 0 and img.erase_count(0, 14) == 0

    # Read: nothing loaded, so neither plane has data to give.
    async def read_other_page():
        await h.read_planes([g.row(0, 12, 0), g.row(0, 13, 1)])
        await h.select()
        await h.cmd(OnfiCmd.CHANGE_READ_COL_ENH)
        await h.addr(0, 0, *h.row_cycles(g.row(0, 12, 0)))
        await h.cmd(OnfiCmd.CHANGE_READ_COL_2)
        await h.deselect()
        return 0
    await broken("page 1 where the first plane has page 0", read_other_page)
    s = await tb.stats()
    assert any("holds no page data" in e for e in s["error_log"]), s["error_log"]

    # A single-plane operation while planes wait drops them: only the erase happens.
    async def erase_between():
        await h.select()
        await h.cmd(OnfiCmd.PROGRAM_1)
        await h.addr(0, 0, *h.row_cycles(g.row(0, 20, 0)))
        await h.data_in(b"dropped")
        await h.cmd(OnfiCmd.PROGRAM_MULTI_PLANE)
        await h.wait_ready()
        await h.deselect()
        return await h.erase(g.row(0, 12, 0))
    assert not failed(await broken("single-plane erase while a multi-plane program waits", erase_between))
    with tb.image() as img:
        assert not img.page_state(0, 20, 0).programmed and img.erase_count(0, 12) == 1

    # Not ONFI: 81h as the later planes' opcode; multi-plane copyback is not modelled.
    async def opcode_81h():
        await h.select()
        await h.cmd(0x81)
        await h.deselect()
        return 0
    await broken("unsupported command 81h", opcode_81h)

    async def copyback_read_in_sequence():
        await h.select()
        await h.cmd(OnfiCmd.READ_1)
        await h.addr(0, 0, *h.row_cycles(g.row(0, 12, 0)))
        await h.cmd(OnfiCmd.READ_MULTI_PLANE)
        await h.wait_ready()
        await h.cmd(OnfiCmd.READ_1)
        await h.addr(0, 0, *h.row_cycles(g.row(0, 13, 0)))
        await h.cmd(OnfiCmd.COPYBACK_READ_2)
        await h.deselect()
        return 0
    await broken("COPYBACK READ inside a multi-plane sequence", copyback_read_in_sequence)
    await h.reset()


@cocotb.test()
async def status_per_plane(dut):
    """READ STATUS says a plane failed, READ STATUS ENHANCED says which; the other
    plane's page is programmed (or its block erased) all the same."""
    tb = await NandTB.create(dut, "mp_status")
    h = tb.host
    g = tb.cfg[0].geometry
    ppb = g.pages_per_block
    await tb.ctl(NandCtl.FAIL_PROGRAM, 11 * ppb + 0)  # block 11 (plane 1), page 0
    rows = [tb.row(10, 0), tb.row(11, 0)]
    st = await h.program_planes([(rows[0], 0, b"good"), (rows[1], 0, b"bad")])
    assert failed(st), f"{st:02x}"
    assert await fail_bits(h, *rows) == [0, 1]
    with tb.image() as img:
        assert img.page_state(0, 10, 0).intact and img.data(0, 10, 0)[:4] == b"good"
        assert img.page_state(0, 11, 0).program_failed
    await tb.ctl(NandCtl.FAIL_ERASE, 10)
    assert failed(await h.erase_planes(rows))
    assert await fail_bits(h, *rows) == [1, 0]
    with tb.image() as img:
        assert img.block(0, 10).erase_failed and not img.page_state(0, 11, 0).programmed
    # A good operation clears both.
    assert not failed(await h.erase_planes([tb.row(12, 0), tb.row(13, 0)]))
    assert await fail_bits(h, *rows) == [0, 0]
    s = await tb.expect_clean()
    assert s["program_fails"] == 1 and s["erase_fails"] == 1


def _bits(value: int, enum) -> set:
    return {m for m in enum if value >> m & 1}


@cocotb.test()
async def parameter_page_claims_what_the_planes_do(dut):
    """Plane address bits, the multi-plane features, CHANGE READ COLUMN ENHANCED and
    every multi-plane attribute bit against the model's behaviour."""
    for profile in PROFILES:
        tb = await NandTB.create(dut, f"mp_param_{profile}", profile=profile)
        h = tb.host
        cfg = tb.cfg[0]
        await h.reset()
        p = await h.read_param_page(256)
        field = lambda off: struct.unpack_from("<H", p, off)[0]  # noqa: E731
        planes = NAND_PROFILES[profile].planes
        assert planes == 2 and p[ONFI_PARAM.PLANE_ADDR_BITS] == NAND_PROFILES[profile].plane_bits == 1
        claimed = _bits(field(ONFI_PARAM.FEATURES), OnfiParamFeature)
        assert {OnfiParamFeature.MULTI_PLANE_PROGRAM_ERASE, OnfiParamFeature.MULTI_PLANE_READ} <= claimed
        assert OnfiOptCommand.CHANGE_READ_COLUMN_ENHANCED in _bits(field(ONFI_PARAM.OPT_COMMANDS), OnfiOptCommand)

        async def refused(probe) -> bool:
            await h.reset()
            await tb.ctl(NandCtl.CLEAR_STATS)
            await probe()
            await h.reset()
            s = await tb.stats()
            assert s["violations_total"] == 0, s["violation_log"]
            return s["protocol_errors"] > 0

        async def overlapped():
            """Overlapped planes start at their own 11h: the page programs before the last plane."""
            await h.select()
            await h.cmd(OnfiCmd.PROGRAM_1)
            await h.addr(0, 0, *h.row_cycles(tb.row(2, 0)))
            await h.data_in(b"o")
            busy = await busy_after(h, OnfiCmd.PROGRAM_MULTI_PLANE)
            with tb.image() as img:
                started = img.page_state(0, 2, 0).programmed or img.page_state(0, 2, 0).in_progress
            if busy < cfg["t_prog_ns"] and not started:
                await h.cmd(OnfiCmd.READ_2)  # not overlapped: a lone 30h marks it refused
            await h.deselect()

        async def other_block_bits():
            await h.program_planes([(tb.row(4, 0), 0, b"a"), (tb.row(7, 0), 0, b"b")])

        async def cache_program():
            await h.select()
            await h.cmd(OnfiCmd.PROGRAM_1)
            await h.addr(0, 0, *h.row_cycles(tb.row(8, 0)))
            await h.data_in(b"c")
            await h.cmd(OnfiCmd.PROGRAM_MULTI_PLANE)
            await h.wait_ready()
            await h.cmd(OnfiCmd.PROGRAM_1)
            await h.addr(0, 0, *h.row_cycles(tb.row(9, 0)))
            await h.data_in(b"c")
            await h.cmd(0x15)
            await h.deselect()

        async def cache_read():
            await h.select()
            await h.cmd(OnfiCmd.READ_1)
            await h.addr(0, 0, *h.row_cycles(tb.row(8, 0)))
            await h.cmd(OnfiCmd.READ_MULTI_PLANE)
            await h.wait_ready()
            await h.cmd(OnfiCmd.READ_1)
            await h.addr(0, 0, *h.row_cycles(tb.row(9, 0)))
            await h.cmd(0x31)
            await h.deselect()

        # None: no way to try it (cache address restrictions need a cache operation;
        # ONFI gives the XNOR restriction no further definition).
        attr = {
            OnfiMultiPlaneAttr.OVERLAPPED: overlapped,
            OnfiMultiPlaneAttr.NO_BLOCK_ADDRESS_RESTRICTIONS: other_block_bits,
            OnfiMultiPlaneAttr.PROGRAM_CACHE: cache_program,
            OnfiMultiPlaneAttr.CACHE_ADDRESS_RESTRICTIONS: None,
            OnfiMultiPlaneAttr.READ_CACHE: cache_read,
            OnfiMultiPlaneAttr.LOWER_BIT_XNOR: None,
        }
        assert set(attr) == set(OnfiMultiPlaneAttr)
        value = p[ONFI_PARAM.MULTI_PLANE_ATTR]
        assert value >> (max(OnfiMultiPlaneAttr) + 1) == 0, "reserved attribute bits set"
        for bit, probe in attr.items():
            does = probe is not None and not await refused(probe)
            assert does == bool(value >> bit & 1), f"{bit.name}: claimed {bool(value >> bit & 1)}, does {does}"
        await h.reset()


@cocotb.test()
async def power_cut_tears_every_plane(dut):
    """A cut in a multi-plane program tears both pages (the cut is the 2nd program:
    programs count per plane); in MLC mode both planes' paired lower pages are damaged."""
    tb = await NandTB.create(dut, "mp_cut")
    h = tb.host
    g = tb.cfg[0].geometry
    done = {b: pattern(64, b) for b in (2, 3)}
    assert not failed(await h.program(tb.row(4, 0), 0, pattern(64, 4)))
    await tb.schedule_cut(NandCutWhen.PROGRAM, 2, progress=0.5)
    await h.program_planes([(tb.row(b, 0), 0, done[b]) for b in (2, 3)], wait=False)
    await expect_dead(tb)
    with tb.image() as img:
        for b in (2, 3):
            st = img.page_state(0, b, 0)
            assert st.torn and not st.intact, (b, st)
            got = img.data(0, b, 0)[:64]
            assert got != done[b] and got != b"\xff" * 64, b
        assert img.page_state(0, 4, 0).intact
    await tb.power_cycle()
    assert await h.read(tb.row(4, 0), 0, 64) == pattern(64, 4)

    tb = await NandTB.create(dut, "mp_cut_mlc", mlc_paired=1)
    h = tb.host
    ppb = g.pages_per_block
    upper = 4
    lower = paired_lower(upper, ppb)
    data = {(b, p): pattern(32, 8 * b + p) for b in (6, 7) for p in range(upper)}
    for p in range(upper):
        assert not failed(await h.program_planes([(tb.row(b, p), 0, data[b, p]) for b in (6, 7)]))
    await tb.schedule_cut(NandCutWhen.PROGRAM, 1, progress=0.5)
    await h.program_planes([(tb.row(b, upper), 0, pattern(32, 99 + b)) for b in (6, 7)], wait=False)
    await expect_dead(tb)
    with tb.image() as img:
        for b in (6, 7):
            assert img.page_state(0, b, upper).torn, b
            for p in range(upper):
                st = img.page_state(0, b, p)
                full = data[b, p] + b"\xff" * (g.page_bytes - 32)
                if p == lower:
                    assert st.paired_damage and img.page(0, b, p) != full, (b, p)
                else:
                    assert st.intact and img.page(0, b, p) == full, (b, p)
