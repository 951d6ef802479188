"""System tests: the drive keeps taking writes while it holds far less data than its capacity.

1. A page a REMAP bound keeps its APPEND's OOB record, which names no LBA.
   GC used to find such a page only through its OOB, so it could never move
   it: the block stayed (``gc: block N still holds 1 bound pages after
   relocation: kept``), GC chose it again and again, copying every dead page
   of it each time, and a workload that remaps many appends pinned block after
   block until GC was stuck.  Now GC finds the page's LBA in the map, moves
   it (the copy's OOB names the LBA) and frees the block; the data survives
   a power cycle.

2. An open transaction or a live append used to hold every checkpoint's
   floor at its first page, so GC could erase nothing written after it and
   the drive ran out of space with almost nothing stored (GC_STUCK).
   Checkpoints now record them (format 6); the floor is the log's next seq,
   and GC collects every block, theirs included.
"""

from __future__ import annotations

import re

import pytest

from sim.simboot import CLK_HZ, DEFAULT_WAYS, ROOT, TARGETS, boot, build, model_configs

pytestmark = pytest.mark.soc

BLOCKS_PER_LUN = 8
BLOCKS = TARGETS * BLOCKS_PER_LUN
HOT = 40               # the plain writes' LBAs: GC finds garbage at once
SEED = 5
WRITES = 1000          # half the device's pages: the first blocks are full, GC runs


def ok(con, line, want="", timeout=60):
    out = con.command(line, timeout=timeout)
    assert want in out and "error" not in out, f"{line}: {out}"
    return out


def counter(text: str, pattern: str) -> int:
    m = re.search(pattern, text)
    assert m, f"no {pattern!r} in:\n{text}"
    return int(m.group(1))


def block_of(con, lba: int) -> int:
    """The global block (firmware numbering: target, LUN, block) the core's map names for ``lba``."""
    out = ok(con, f"map {lba}")
    m = re.search(r"now: ppa 0x[0-9a-f]+ \(ch (\d+) way (\d+) lun (\d+) block (\d+)", out)
    assert m, out
    ch, way, lun, block = map(int, m.groups())
    return ((ch * DEFAULT_WAYS + way) + lun) * BLOCKS_PER_LUN + block     # one LUN per target


def collect_every_block(con) -> int:
    """``gc block`` on every block (those that are not full data blocks refuse); how many were collected."""
    done = 0
    for g in range(BLOCKS):
        out = con.command(f"gc block {g}", timeout=120)
        assert "still holds" not in out, out
        done += "collected" in out
    return done


def test_gc_moves_a_remapped_append_page_and_frees_its_block(tmp_path):
    build()
    run_dir = tmp_path / "run"
    cfgs = model_configs(run_dir, profile="small", targets=TARGETS, clk_hz=CLK_HZ,
                         overrides=dict(blocks_per_lun=BLOCKS_PER_LUN))
    log = ROOT / "build" / "soc" / "test_liveness_remap.log"
    con = boot(run_dir, cfgs, log=log, timeout=120)
    try:
        out = ok(con, "io append 11 200 1", "appended 1 blocks")
        token = re.search(r"token (0x[0-9a-f]+)", out).group(1)
        ok(con, f"io remap 200 {token} 1", "remapped 1 appends")
        ok(con, f"io random {SEED} {WRITES} {HOT}", f"random: {WRITES} writes over", timeout=1500)
        g = block_of(con, 200)
        out = ok(con, f"gc block {g}", f"gc: block {g} collected")
        assert block_of(con, 200) != g
        gc = con.command("gc")
        assert counter(gc, r"\((\d+) found through the map\)") == 1, gc
        assert counter(gc, r"failed (\d+)") == 0, gc
        ok(con, "io check 11 200 1", "pass")
        # the copy names its LBA: moved again, it is found by its OOB
        ok(con, f"io random {SEED + 1} 600 {HOT}", "random: 600 writes over", timeout=900)
        g = block_of(con, 200)
        ok(con, f"gc block {g}", f"gc: block {g} collected")
        assert counter(con.command("gc"), r"\((\d+) found through the map\)") == 1
        ok(con, "io check 11 200 1", "pass")
        assert "still holds" not in con.transcript
        con.send("exit\r")
        con.expect("simulation finished", timeout=30)
    finally:
        con.stop()

    # recovery binds the copies as the map did
    con = boot(run_dir, cfgs, log=log.with_name("test_liveness_remap_restart.log"), timeout=300)
    try:
        ok(con, "io check 11 200 1", "pass")
        ok(con, f"io verify {SEED + 1} 600 {HOT}", "0 wrong: pass", timeout=300)
    finally:
        con.stop()


def test_an_open_transaction_and_a_live_append_do_not_stop_the_drive(tmp_path):
    """A transaction and an append left open while the host writes on: every checkpoint records them
    instead of holding its floor below their first pages, so GC collects every block -- theirs too,
    moving their staged pages -- and no write is refused.  Committed and remapped after all that, both
    survive a power cycle; a transaction still open at the cut leaves nothing, and nothing is left
    open after the boot."""
    build()
    run_dir = tmp_path / "run"
    cfgs = model_configs(run_dir, profile="small", targets=TARGETS, clk_hz=CLK_HZ,
                         overrides=dict(blocks_per_lun=BLOCKS_PER_LUN))
    log = ROOT / "build" / "soc" / "test_liveness_open.log"
    con = boot(run_dir, cfgs, log=log, timeout=120)
    try:
        ok(con, "io tx write 4 9 300 2", "staged 2 blocks")
        out = ok(con, "io append 11 400 2", "appended 2 blocks")
        token = re.search(r"token (0x[0-9a-f]+)", out).group(1)
        ok(con, f"io random {SEED} {WRITES} {HOT}", f"random: {WRITES} writes over", timeout=1500)
        assert collect_every_block(con) >= BLOCKS // 2
        gc = con.command("gc")
        assert counter(gc, r"copies (\d+)") >= 4, gc     # the staged pages moved with their bindings
        assert counter(gc, r"failed (\d+)") == 0, gc
        ok(con, f"io random {SEED + 1} {WRITES} {HOT}", f"random: {WRITES} writes over", timeout=1500)
        assert re.search(r"^no_space\s+NONE", con.command("stats"), re.M)
        tx = con.command("tx")
        assert "recorded 1 open transactions and 1 live appends" in tx, tx
        ok(con, "io tx check 4 9 300 2")
        ok(con, "io tx commit 4", "committed")
        ok(con, f"io remap 400 {token} 2", "remapped 1 appends")
        ok(con, "io tx write 6 3 500 1", "staged 1 blocks")     # open at the power cut
        con.send("exit\r")
        con.expect("simulation finished", timeout=30)
    finally:
        con.stop()

    con = boot(run_dir, cfgs, log=log.with_name("test_liveness_open_restart.log"), timeout=300)
    try:
        ok(con, "io check 9 300 2", "pass")
        ok(con, "io check 11 400 2", "pass")
        ok(con, "io check 0 500 1", "pass")                     # the open transaction: nothing
        ok(con, f"io verify {SEED + 1} {WRITES} {HOT}", "0 wrong: pass", timeout=300)
        assert "0 open of" in con.command("tx")
    finally:
        con.stop()


def _mix(x: int) -> int:
    x ^= x >> 16
    x = (x * 0x7feb352d) & 0xFFFFFFFF
    x ^= x >> 15
    x = (x * 0x846ca68b) & 0xFFFFFFFF
    return x ^ (x >> 16)


def io_data(seed: int, lba: int, size: int) -> bytes:
    """The block `io write <seed> <lba>` writes (firmware/cmds_io.c stream_of/fill), so `io check` judges it."""
    start = _mix((seed * 0x9e3779b9 ^ lba * 0x85ebca6b) & 0xFFFFFFFF)
    step = _mix(start ^ 0x6a09e667) | 1
    return b"".join(((start + w * step) & 0xFFFFFFFF).to_bytes(4, "little") for w in range(size // 4))


def test_gc_frees_a_drive_left_with_one_erased_block(tmp_path):
    """A drive whose every data block is full and whose only erased block is the one the core writes
    into -- what a power cut during heavy GC at 90 % left the soak -- holds a block with one live page.
    GC used to keep a whole block of pages for commands in the core and so had no page to copy that one
    into: GC_STUCK, across every power cycle, with 1,099 of 1,239 LBAs stored.  The boot now collects
    before it lets the host in (nothing is in the core then), and the drive takes writes."""
    from atomflash import spec
    from atomflash.model import Flash, Limits, LogFTL

    from sim import flashimg
    from sim.simboot import DEFAULT_CHANNELS, ftl_capacity

    profile = spec.NAND_PROFILES["small"]
    ppb, capacity = profile.pages_per_block, ftl_capacity(BLOCKS_PER_LUN)
    anchor = {(0, b) for b in range(spec.ANCHOR.BLOCKS)}   # the anchor's blocks: target 0's first
    data_blocks = BLOCKS - len(anchor) - spec.CKPT.AREAS - 1   # the boot finds one erased block for the core
    log = LogFTL(Limits(capacity=capacity, lba_size=profile.page_data), Flash(data_blocks, ppb))
    live, rng = 1099, __import__("random").Random(SEED)
    last = {}
    for lba in range(live):                                # log block 0: LBAs 0..63
        log.write(lba, io_data(1, lba, profile.page_data))
        last[lba] = 1
    rewrites = list(range(1, ppb)) + rng.sample(range(ppb, live), data_blocks * ppb - live - (ppb - 1))
    for lba in rewrites:                                   # log block 0 keeps LBA 0 alone
        log.write(lba, io_data(2, lba, profile.page_data))
        last[lba] = 2
    assert log.wp == ppb and not log.free                  # every data block full
    cfgs = model_configs(tmp_path, profile="small", targets=TARGETS, clk_hz=CLK_HZ,
                         overrides=dict(blocks_per_lun=BLOCKS_PER_LUN))
    place = flashimg.LogPlacement(DEFAULT_CHANNELS, DEFAULT_WAYS, BLOCKS_PER_LUN, ppb, bad=anchor)
    images = flashimg.create_images(tmp_path, cfgs)
    flashimg.program_images(images, spec.nand_page_layout(profile), place, log.cut(window=0).pages)
    for img in images:
        img.close()

    build()
    con = boot(tmp_path, cfgs, log=ROOT / "build" / "soc" / "test_liveness_one_erased.log", timeout=600)
    try:
        assert "GC found nothing to collect" not in con.boot_text, con.boot_text
        ok(con, "io write 3 1100 8", "wrote")
        assert re.search(r"^no_space\s+NONE", con.command("stats"), re.M)
        ok(con, "io check 1 0 1", "pass")                 # the one live page of the first block moved
        ok(con, "io check 3 1100 8", "pass")
        for seed, lba in ((last[64], 64), (last[700], 700), (last[1098], 1098)):
            ok(con, f"io check {seed} {lba} 1", "pass")
    finally:
        con.stop()
