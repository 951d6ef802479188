"""System test: damaged checkpoints.

A format-3 boot reads a checkpoint's header and the pages after its map
(erase counts, valid counts, the map pages' CRCs), whose CRC it takes from
the NAND completions (the channel's CRC of each page read, chained with
``af_crc32_extend``) two pages at a time; the map pages it loads lazily, each
checked against its recorded CRC.  Two checkpoints are taken on fresh images
with writes before and between them; then the newest one's

* first page after the map is made uncorrectable (the read fails while the
  next page is in flight), or its last page changed in one byte with its ECC
  parity recomputed (only the payload CRC can tell): the boot must load the
  older checkpoint (``1 newer ones not intact``), scan what was written since
  its floor, and every write must read back;
* first map page changed in one byte (ECC parity recomputed) or made
  uncorrectable: the boot takes the newest checkpoint (it does not read map
  pages), and loading that page finds it: the LBAs it maps are lost and said
  so, every other write reads back.

The untouched images load the newest one, and its valid-count pages become
the block table's counts.
"""

from __future__ import annotations

import random
import re
import shutil
from pathlib import Path

import pytest

from atomflash import nandsim, spec

from sim import flashimg
from sim.simboot import CLK_HZ, ROOT, TARGETS, boot, build, check_runs, model_configs
from sim.simboot import DEFAULT_WAYS as WAYS

pytestmark = pytest.mark.soc

BLOCKS_PER_LUN = 4   # 450 LBAs: 4 map pages and a wear page
PROFILE = spec.NAND_PROFILES["small"]
LAYOUT = spec.nand_page_layout(PROFILE)
REUSED_LBA = 300  # written only offline, into the block a fallback checkpoint names for its area
BEFORE = [(11, lba) for lba in (0, 8, 16, 24, 32, 200)]   # (seed, lba) of 8-block writes before checkpoint 1
BETWEEN = [(12, lba) for lba in (32, 40, 300)]            # ... and between checkpoints 1 and 2


def expected() -> dict[int, int]:
    want = {}
    for seed, lba in BEFORE + BETWEEN:
        want.update({lba + k: seed for k in range(8)})
    return want


def check_boot(con, number: int, newer_not_intact: int):
    text = con.boot_text
    m = re.search(r"checkpoint: (\d+) \(floor seq [^\n]*", text)
    assert m and int(m.group(1)) == number, text
    if newer_not_intact:
        assert f"; {newer_not_intact} newer ones not intact" in m.group(0), text
    else:
        assert "not intact" not in m.group(0), text
    assert "ftl: host interface on" in text
    for seed, lba, n in check_runs(expected()):
        out = con.command(f"io check {seed} {lba} {n}")
        assert "pass" in out, f"lba {lba} (+{n}, expected seed {seed}): {out}"


def newest_checkpoint(cfgs):
    ck = flashimg.newest_checkpoint_of(cfgs, PROFILE, WAYS)
    assert ck is not None and ck.header.map_pages >= 2
    return ck


def checkpoint_page(ck, index: int):
    """(target, lun, block, page) of page `index` of checkpoint `ck`."""
    ppb = PROFILE.pages_per_block
    f = spec.PPA.decompose("ppa", ck.areas[ck.header.area][index // ppb])
    return f.channel * WAYS + f.way, f.lun, f.block, index % ppb


def first_map_page(run_dir, cfgs):
    """(target, lun, block, page) of the newest checkpoint's first map page, and the checkpoint."""
    ck = newest_checkpoint(cfgs)
    return checkpoint_page(ck, 1), ck


def checkpoint_pages(ck) -> int:
    h = ck.header
    return 1 + h.map_pages + 2 * h.wear_pages + -(-h.map_pages * 4 // PROFILE.page_data)


def global_block(ppa: int) -> int:
    """The firmware's global block number (target-major, then LUN, then block)."""
    f = spec.PPA.decompose("ppa", ppa)
    return ((f.channel * WAYS + f.way) * PROFILE.luns + f.lun) * BLOCKS_PER_LUN + f.block


def check_valid_counts(con, ck):
    """Format 3: the checkpoint's valid-count pages are its map's, and the boot that loaded it took them
    as its block table's counts: nothing was written since, so its bound LBAs are the checkpoint's, and
    the block table's counts sum to them (background GC, which may have run by now, moves pages, never
    changes the sum, and is off while the counts are read); block by block when no GC ran."""
    assert ck.header.format == spec.CKPT.FORMAT and ck.valid is not None
    want = [0] * ck.header.nblocks
    for _vseq, ppa in ck.entries.values():
        want[global_block(ppa)] += 1
    assert ck.valid == want and ck.header.bound == len(ck.entries) == sum(want)
    assert f"recovery: {ck.header.bound} LBAs bound of " in con.boot_text
    assert re.search(r"LBAs bound of \d+, 0 lost", con.boot_text)
    # GC collects whole blocks between console commands: off while the counts are read one block at a
    # time, or a page moved from a block not yet read into one already read is counted in neither
    assert "automatic gc off" in con.command("gc off")
    gc_ran = not re.search(r"victims 0 ", con.command("gc"))
    got = []
    for g in range(ck.header.nblocks):
        out = con.command(f"block {g}")
        if ": anchor (boot records" in out:   # its pages are records: nothing bound
            got.append(0)
            continue
        m = re.search(r"(\d+) valid", out)
        assert m, out
        got.append(int(m.group(1)))
    assert sum(got) == sum(want)
    assert gc_ran or got == want, (got, want)


def flip_map_byte(cfgs, t, lun, block, page):
    """One byte of a checkpoint page changed (of a map page: LBA 0's ppa), its ECC parity recomputed:
    the read succeeds and only a CRC can tell."""
    with nandsim.Image(cfgs[t]["image"], writable=True) as img:
        data, oob = flashimg.decode_page(LAYOUT, img.page(lun, block, page))
        bad = bytearray(data)
        bad[8] ^= 0x01
        img.program(lun, block, page, flashimg.encode_page(LAYOUT, flashimg.user_bytes(LAYOUT, bytes(bad), oob)))


@pytest.mark.long
def test_a_checkpoint_that_does_not_check_loses_to_the_older_one(tmp_path):
    build()
    run_dir = tmp_path / "run"
    cfgs = model_configs(run_dir, profile="small", targets=TARGETS, clk_hz=CLK_HZ,
                         overrides=dict(blocks_per_lun=BLOCKS_PER_LUN))
    log = ROOT / "build" / "soc" / "test_ckpt_console.log"
    con = boot(run_dir, cfgs, log=log, timeout=120)
    try:
        assert "automatic checkpoints off" in con.command("ckpt every 0")
        for writes in (BEFORE, BETWEEN):
            for seed, lba in writes:
                out = con.command(f"io write {seed} {lba} 8", timeout=60)
                assert "wrote 8 blocks" in out, out
            out = con.command("ckpt now", timeout=120)
            assert "taken" in out, out
        con.send("exit\r")
        con.expect("simulation finished", timeout=30)
    finally:
        con.stop()
    (t, lun, block, page), ck = first_map_page(run_dir, cfgs)
    newest = ck.header.number
    pristine = tmp_path / "pristine"
    pristine.mkdir()
    for c in cfgs:
        shutil.copy(c["image"], pristine)

    def restore():
        for c in cfgs:
            shutil.copy(pristine / Path(c["image"]).name, c["image"])

    con = boot(run_dir, cfgs, log=log.with_name("test_ckpt_console2.log"), timeout=120)
    try:
        check_boot(con, newest, 0)
        check_valid_counts(con, ck)
    finally:
        con.stop()

    # the pages after the map are read at boot: damage there loses the checkpoint to the older one
    # (the first one's first codeword far beyond what ECC corrects: the read fails, the next is in flight;
    # the last one's byte changed, ECC parity recomputed: only the payload CRC sees it)
    restore()
    uncorrectable(cfgs, *checkpoint_page(ck, 1 + ck.header.map_pages))
    con = boot(run_dir, cfgs, log=log.with_name("test_ckpt_console3.log"), timeout=120)
    try:
        check_boot(con, newest - 1, 1)
    finally:
        con.stop()
    restore()
    flip_map_byte(cfgs, *checkpoint_page(ck, checkpoint_pages(ck) - 1))
    con = boot(run_dir, cfgs, log=log.with_name("test_ckpt_console4.log"), timeout=120)
    try:
        check_boot(con, newest - 1, 1)
    finally:
        con.stop()

    # map pages load lazily: a damaged one is found when its segment loads (in the background, or for
    # the first request that needs it), and the LBAs it maps (0..127: the writes at 0..39) are lost;
    # everything else reads back
    per_page = PROFILE.page_data // spec.CKPT_ENTRY.size
    for damage, says in ((flip_map_byte, "check"), (uncorrectable, "read")):
        restore()
        damage(cfgs, t, lun, block, page)
        lazy_log = log.with_name(f"test_ckpt_console_lazy_{says}.log")
        con = boot(run_dir, cfgs, log=lazy_log, timeout=120)
        try:
            assert f"checkpoint: {newest} (" in con.boot_text and "not intact" not in con.boot_text
            assert "map: loaded lazily" in con.boot_text
            out = con.command("map load all")
            assert re.search(r"map: (\d+) of \1 segments of \d+ LBAs loaded \(done\).* 1 map pages did not "
                             r"read or check", out), out
            for seed, lba, n in check_runs(expected()):
                out = con.command(f"io check {seed} {lba} {n}")
                assert ("pass" in out) == (lba >= per_page), f"lba {lba} (+{n}): {out}"
        finally:
            con.stop()
        assert (f"error: ckpt: map page 1 of checkpoint {newest} does not {says}: LBAs 0..{per_page - 1} lost"
                in lazy_log.read_text(errors="replace"))


def uncorrectable(cfgs, t, lun, block, page):
    """A page's first data codeword far beyond what ECC corrects: its read fails."""
    with nandsim.Image(cfgs[t]["image"], writable=True) as img:
        raw = bytearray(img.page(lun, block, page))
        rng = random.Random(7)
        for col in range(LAYOUT.ecc.codeword):
            raw[col] ^= rng.randrange(1, 256)
        img.program(lun, block, page, bytes(raw))


AREAS_RE = re.compile(r"^area (\d+): blocks ([\d ]+)$", re.M)


def areas(con) -> dict[int, list[int]]:
    return {int(a): [int(g) for g in gs.split()] for a, gs in AREAS_RE.findall(con.command("ckpt", timeout=60))}


def test_checkpoint_areas_rotate_and_a_fallback_never_takes_a_reused_block(tmp_path):
    """Checkpoint areas wear-level: a checkpoint about to erase an area block `spread` erases past the
    least-worn erased one takes that block instead, and the old one goes back to the pool.  The previous
    checkpoint's header still names the old block, so if the newest checkpoint is lost the boot falls
    back to a header naming a block that may hold data by now: it must drop that block from the area
    (never erase it for a checkpoint) and take a fresh one."""
    build()
    run_dir = tmp_path / "run"
    cfgs = model_configs(run_dir, profile="small", targets=TARGETS, clk_hz=CLK_HZ,
                         overrides=dict(blocks_per_lun=BLOCKS_PER_LUN))
    log = ROOT / "build" / "soc" / "test_ckpt_rotate.log"
    con = boot(run_dir, cfgs, log=log, timeout=120)
    written = {lba: seed for seed, lba in BEFORE}
    try:
        assert "automatic checkpoints off" in con.command("ckpt every 0")
        assert "more than 1 erases" in con.command("wear spread 1")
        for seed, lba in BEFORE:
            assert "wrote 8 blocks" in con.command(f"io write {seed} {lba} 8", timeout=60)
        rotated = None
        before = {}
        for i in range(8):
            lba = 100 + 8 * i
            assert "wrote 8 blocks" in con.command(f"io write 13 {lba} 8", timeout=60)
            written[lba] = 13
            assert "taken" in con.command("ckpt now", timeout=120)
            now = areas(con)
            for a in before:
                if now[a] != before[a]:
                    rotated = (before[a][0], now[a][0])
            if rotated:
                break
            before = now
        assert rotated, "no checkpoint-area block rotated"
        old, new = rotated
        assert int(re.search(r"checkpoint-area blocks rotated (\d+)", con.command("wear")).group(1)) >= 1
        con.send("exit\r")
        con.expect("simulation finished", timeout=30)
    finally:
        con.stop()

    # the old block is reused for data: a write after the lost checkpoint (here programmed offline: the
    # newest data page's contents stored for an unwritten LBA, its seq past every other page's, so recovery
    # keeps it), then the newest checkpoint is lost (one byte of its last page, ECC parity recomputed: the
    # payload CRC fails)
    images = [nandsim.Image(c["image"], writable=True) for c in cfgs]
    try:
        data = [(p, r) for p in flashimg.read_log(images, LAYOUT, WAYS)
                if (r := spec.unpack_oob(p.oob)) is not None and r.kind == spec.Kind.DATA]
        page, rec = max(data, key=lambda pr: pr[1]["seq"])
        top = max(o["seq"] for p in flashimg.read_log(images, LAYOUT, WAYS)
                  if (o := spec.unpack_oob(p.oob)) is not None)
        fields = {k: v for k, v in rec.items() if k != "crc"}
        fields.update(lba=REUSED_LBA, seq=top + 1, vseq=top + 1)
        raw = flashimg.encode_page(LAYOUT, flashimg.user_bytes(LAYOUT, page.data, spec.pack_oob(**fields)))
        images[old // BLOCKS_PER_LUN].program(0, old % BLOCKS_PER_LUN, 0, raw)
        old_ppa = spec.pack_ppa(old // BLOCKS_PER_LUN // WAYS, old // BLOCKS_PER_LUN % WAYS, 0, old % BLOCKS_PER_LUN, 0)
    finally:
        for img in images:
            img.close()
    ck = newest_checkpoint(cfgs)
    newest = ck.header.number
    flip_map_byte(cfgs, *checkpoint_page(ck, checkpoint_pages(ck) - 1))

    con = boot(run_dir, cfgs, log=log.with_name("test_ckpt_rotate2.log"), timeout=120)
    try:
        m = re.search(r"checkpoint: (\d+) \(floor seq [^\n]*", con.boot_text)
        assert m and int(m.group(1)) == newest - 1 and "1 newer ones not intact" in m.group(0), con.boot_text
        assert "checkpoint: 1 blocks its header names for the other area hold no checkpoint now" in con.boot_text
        m = re.search(r"^lba \d+: vseq \d+, commit seq \d+, ppa 0x([0-9a-f]{8}) ", con.command(f"map {REUSED_LBA}"),
                      re.M)
        assert m and int(m[1], 16) == old_ppa, "recovery did not find the write in the reused block"
        for lba, seed in written.items():
            assert "pass" in con.command(f"io check {seed} {lba} 8", timeout=60), (lba, seed)
        for _ in range(2):                                                  # both areas written again
            assert "taken" in con.command("ckpt now", timeout=120)
        now = areas(con)
        # the area took a fresh block; the old one only after GC moved the write away and erased it (on this
        # small device the boot's foreground GC picks it: one valid page)
        gc_copies = int(re.search(r"copies (\d+)", con.command("gc"))[1])
        assert old not in now[0] + now[1] or gc_copies, now
        m = re.search(r"^  now: ppa 0x([0-9a-f]{8}) ", con.command(f"map {REUSED_LBA}"), re.M)
        assert m, "the reused block's write is lost"
        now_ppa = int(m[1], 16)
        con.send("exit\r")
        con.expect("simulation finished", timeout=30)
    finally:
        con.stop()
    f = spec.PPA.decompose("ppa", now_ppa)
    with nandsim.Image(cfgs[f.channel * WAYS + f.way]["image"]) as img:
        data, oob = flashimg.decode_page(LAYOUT, img.page(f.lun, f.block, f.page))
    assert data == page.data and spec.unpack_oob(oob)["lba"] == REUSED_LBA, "the reused block's write is lost"
