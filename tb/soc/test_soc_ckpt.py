"""System test: a checkpoint whose payload does not check loses to the older one.

The boot takes the payload CRC of a checkpoint from the NAND completions
(the channel's CRC of each page read, chained with ``af_crc32_extend``), not
from a pass over the data, and reads two payload pages at a time.  Two
checkpoints are taken on fresh images with writes before and between them;
then the newest one's first map page is

* changed in one byte with its ECC parity recomputed (the read succeeds, only
  the payload CRC can tell), or
* made uncorrectable (the read fails while the next page is in flight),

and after each the boot must load the older checkpoint (``1 newer ones not
intact``), scan what was written since its floor, and every write must read
back.  The untouched images load the newest one.
"""

from __future__ import annotations

import random
import re
import shutil
from pathlib import Path

import pytest

from atomflash import nandsim, spec

from . import flashimg
from .simboot import CLK_HZ, ROOT, TARGETS, boot, build, model_configs
from .simboot import DEFAULT_WAYS as WAYS

pytestmark = pytest.mark.xdist_group("soc_ckpt")   # its own: the soc_sim group is the long pole

BLOCKS_PER_LUN = 4   # 450 LBAs: 4 map pages and a wear page
PROFILE = spec.NAND_PROFILES["small"]
LAYOUT = spec.nand_page_layout(PROFILE)
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
    for lba, seed in sorted(expected().items()):
        out = con.command(f"io check {seed} {lba}")
        assert "pass" in out, f"lba {lba} (expected seed {seed}): {out}"


def first_map_page(run_dir, cfgs):
    """(target, lun, block, page) of the newest checkpoint's first map page, and its number."""
    images = [nandsim.Image(c["image"]) for c in cfgs]
    try:
        ck = flashimg.read_checkpoint(flashimg.read_log(images, LAYOUT, WAYS), PROFILE.pages_per_block,
                                      PROFILE.page_data)
    finally:
        for img in images:
            img.close()
    assert ck is not None and ck.header.map_pages >= 2
    f = spec.PPA.decompose("ppa", ck.areas[ck.header.area][0])
    return (f.channel * WAYS + f.way, f.lun, f.block, 1), ck.header.number


def flip_map_byte(cfgs, t, lun, block, page):
    """One byte of a checkpoint map page changed (LBA 0's ppa), its ECC parity recomputed: the read
    succeeds and only the payload CRC can tell."""
    with nandsim.Image(cfgs[t]["image"], writable=True) as img:
        data, oob = flashimg.decode_page(LAYOUT, img.page(lun, block, page))
        bad = bytearray(data)
        bad[8] ^= 0x01
        img.program(lun, block, page, flashimg.encode_page(LAYOUT, flashimg.user_bytes(LAYOUT, bytes(bad), oob)))


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
    (t, lun, block, page), newest = first_map_page(run_dir, cfgs)
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
    finally:
        con.stop()

    # one byte of an entry changed, ECC parity recomputed: only the payload CRC sees it
    restore()
    flip_map_byte(cfgs, t, lun, block, page)
    con = boot(run_dir, cfgs, log=log.with_name("test_ckpt_console3.log"), timeout=120)
    try:
        check_boot(con, newest - 1, 1)
    finally:
        con.stop()

    # the first data codeword far beyond what ECC corrects: the read fails, the next one is in flight
    restore()
    with nandsim.Image(cfgs[t]["image"], writable=True) as img:
        raw = bytearray(img.page(lun, block, page))
        rng = random.Random(7)
        for col in range(LAYOUT.ecc.codeword):
            raw[col] ^= rng.randrange(1, 256)
        img.program(lun, block, page, bytes(raw))
    con = boot(run_dir, cfgs, log=log.with_name("test_ckpt_console4.log"), timeout=120)
    try:
        check_boot(con, newest - 1, 1)
    finally:
        con.stop()


AREAS_RE = re.compile(r"^area (\d+): blocks ([\d ]+)$", re.M)


def areas(con) -> dict[int, list[int]]:
    return {int(a): [int(g) for g in gs.split()] for a, gs in AREAS_RE.findall(con.command("ckpt", timeout=60))}


@pytest.mark.xdist_group("soc_ckpt_rotate")     # beside the other one, not after it
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

    # the old block is reused for data (here: a copy of a data page programmed offline), then the newest
    # checkpoint is lost (one byte of its first map page, ECC parity recomputed)
    images = [nandsim.Image(c["image"], writable=True) for c in cfgs]
    try:
        data_page = next(p for p in flashimg.read_log(images, LAYOUT, WAYS)
                         if (r := spec.unpack_oob(p.oob)) is not None and r.kind == spec.Kind.DATA)
        f = spec.PPA.decompose("ppa", data_page.addr)
        raw = images[f.channel * WAYS + f.way].page(f.lun, f.block, f.page)
        images[old // BLOCKS_PER_LUN].program(0, old % BLOCKS_PER_LUN, 0, raw)
    finally:
        for img in images:
            img.close()
    (t, lun, block, page), newest = first_map_page(run_dir, cfgs)
    flip_map_byte(cfgs, t, lun, block, page)

    con = boot(run_dir, cfgs, log=log.with_name("test_ckpt_rotate2.log"), timeout=120)
    try:
        m = re.search(r"checkpoint: (\d+) \(floor seq [^\n]*", con.boot_text)
        assert m and int(m.group(1)) == newest - 1 and "1 newer ones not intact" in m.group(0), con.boot_text
        assert "checkpoint: 1 blocks its header names for the other area hold no checkpoint now" in con.boot_text
        assert "automatic gc off" in con.command("gc off", timeout=300)     # GC would erase the copy
        for lba, seed in written.items():
            assert "pass" in con.command(f"io check {seed} {lba} 8", timeout=60), (lba, seed)
        for _ in range(2):                                                  # both areas written again
            assert "taken" in con.command("ckpt now", timeout=120)
        now = areas(con)
        assert old not in now[0] + now[1], now
        con.send("exit\r")
        con.expect("simulation finished", timeout=30)
    finally:
        con.stop()
    with nandsim.Image(cfgs[old // BLOCKS_PER_LUN]["image"]) as img:
        assert img.page(0, old % BLOCKS_PER_LUN, 0) == raw, "a checkpoint erased the reused block"
