"""System tests: the anchor (firmware/anchor.h) bounds what a boot reads by what was written since the
checkpoint, not by the device.

1. *Flat in device size* (``make test-slow``): on 16 and on 64 blocks per LUN (4 targets), the same workload -- writes, a
   checkpoint, more writes -- then a power cycle.  The first boot found no record and read page 0 of
   every block; the second takes the anchor's path and reads page 0 of the same number of blocks on both
   devices, a small part of the smaller one; every write reads back.
2. *Under churn*: random writes over a hot range with automatic checkpoints, so GC collects, the areas
   alternate and the plan is topped up again and again; then power goes without a checkpoint.  Judged on
   the images first, decoded independently of the firmware: the newest anchor record belongs to the
   newest checkpoint, and with its open list covers every block written since its floor
   (``flashimg.anchor_uncovered``: a block it missed would be erased as free by the next boot).  Then the
   boot takes the anchor's path and every acknowledged write reads back.
3. *A damaged record*: the newest record's page made uncorrectable.  The boot takes the record before
   it, which no longer belongs to the checkpoint, and so reads page 0 of every block; nothing is lost.
"""

from __future__ import annotations

import dataclasses
import re

import pytest

from atomflash import nandsim, spec

from sim import flashimg
from sim.simboot import CLK_HZ, ROOT, TARGETS, boot, build, model_configs
from sim.simboot import DEFAULT_WAYS as WAYS

pytestmark = pytest.mark.soc

PROFILE = spec.NAND_PROFILES["small"]
LAYOUT = spec.nand_page_layout(PROFILE)
FAST_RE = re.compile(r"^anchor: blocks \d+ \d+, record \d+ \(base checkpoint (\d+), plan (\d+) blocks\): "
                     r"page 0 of (\d+) blocks read$", re.M)
FULL_RE = re.compile(r"^anchor: [^\n]*: page 0 of every block read \(([^)]*)\)$", re.M)


def start(run_dir, bpl: int, name: str, **overrides):
    cfgs = model_configs(run_dir, profile="small", targets=TARGETS, clk_hz=CLK_HZ,
                         overrides=dict(blocks_per_lun=bpl, **overrides))
    return cfgs, boot(run_dir, cfgs, log=ROOT / "build" / "soc" / f"test_anchor_{name}.log", timeout=600)


def power_cycle(con, run_dir, cfgs, name: str):
    con.send("exit\r")
    con.expect("simulation finished", timeout=60)
    con.stop()
    return boot(run_dir, cfgs, log=ROOT / "build" / "soc" / f"test_anchor_{name}.log", timeout=600)


def pages_of(cfgs):
    images = [nandsim.Image(c["image"]) for c in cfgs]
    try:
        return flashimg.read_log(images, LAYOUT, WAYS)
    finally:
        for img in images:
            img.close()


def random_writes(con, seed: int, writes: int, lbas: int):
    out = con.command(f"io random {seed} {writes} {lbas}", timeout=1500)
    assert f"random: {writes} writes over {lbas} LBAs" in out, out[-2000:]


@pytest.mark.slow      # ~4 min (a 64-block-per-LUN device): make test-slow; make bench-soc measures it too
def test_a_boot_reads_page_0_of_the_same_blocks_on_a_device_four_times_larger(tmp_path):
    build()
    reads = {}
    for bpl in (16, 64):
        run_dir = tmp_path / f"size{bpl}"
        cfgs, con = start(run_dir, bpl, f"size{bpl}")
        try:
            m = FULL_RE.search(con.boot_text)
            assert m and m.group(1) == "no anchor record", con.boot_text
            assert "error" not in con.command("ckpt every 0")
            random_writes(con, 1, 64, 64)
            assert "error" not in con.command("ckpt now", timeout=600)
            random_writes(con, 2, 256, 256)
            con = power_cycle(con, run_dir, cfgs, f"size{bpl}_restart")
            m = FAST_RE.search(con.boot_text)
            assert m, con.boot_text
            reads[bpl] = int(m.group(3))
            assert "0 wrong: pass" in con.command("io verify 2 256 256", timeout=300)
        finally:
            con.stop()
    # per die, the checkpoint's open blocks (the core's open one and its free FIFO's) and the plan's
    # top-up, whatever the size; and the areas' first blocks
    assert reads[64] == reads[16] <= TARGETS * 8 + 2, reads


CHURN_HOT, CHURN_WRITES, CHURN_SEED = 300, 400, 7
CHURN_EVERY = 64     # pages between automatic checkpoints: six or so in the churn
TAIL = range(CHURN_HOT, CHURN_HOT + 320, 8)   # then 8-block writes of seed 9 after the hot range


@pytest.mark.slow      # ~6 min: make test-slow: the quick campaign judges the anchor's path in make test
def test_under_churn_the_plan_covers_every_block_written_since_the_checkpoint(tmp_path):
    build()
    run_dir = tmp_path / "run"
    cfgs, con = start(run_dir, 8, "churn")
    try:
        assert "error" not in con.command(f"ckpt every {CHURN_EVERY}")
        random_writes(con, CHURN_SEED, CHURN_WRITES, CHURN_HOT)
        ck_text = con.command("ckpt")
        m = re.search(r"taken (\d+)", ck_text)
        assert m and int(m.group(1)) >= 3, ck_text
        assert re.search(r"records written \d+ \([1-9]\d* plan extensions\)", ck_text), ck_text
        # more than a block a die with no checkpoint after them: blocks opened since the floor, for sure
        assert "error" not in con.command("ckpt every 0")
        for lba in TAIL:
            assert f"wrote 8 blocks at lba {lba}" in con.command(f"io write 9 {lba} 8")
        con.send("exit\r")
        con.expect("simulation finished", timeout=60)
    finally:
        con.stop()

    pages = pages_of(cfgs)
    ck = flashimg.read_checkpoint(pages, PROFILE.pages_per_block, PROFILE.page_data)
    rec = flashimg.read_anchor(pages, PROFILE.page_data)
    assert ck is not None and rec is not None
    assert flashimg.anchor_belongs(rec, ck), (rec.header, ck.header)
    assert flashimg.anchor_uncovered(pages, ck, rec, WAYS, 8) == []
    # the check can fail: without the plan and the open list, the blocks written since the floor are uncovered
    bare = flashimg.AnchorRecord(rec.ppa, rec.header, rec.areas, [], [])
    assert flashimg.anchor_uncovered(pages, dataclasses.replace(ck, open_blocks=[]), bare, WAYS, 8)
    # a free block holding a failed checkpoint's pages (campaign trials 3514, 3605: the area block was
    # rotated back into the pool) loses nothing when the boot erases it; a data page there would
    named = {flashimg.block_of(q) for q in ck.open_blocks + rec.plan + rec.bad} | {
        flashimg.block_of(q) for a in ck.areas + rec.areas for q in a if q != spec.PPA_UNMAPPED}
    spare = next(b for b in ((c, w, 0, k) for c in range(TARGETS // WAYS) for w in range(WAYS) for k in range(8))
                 if b not in named)   # free, or anyway not read by the boot: what it holds is older
    ck_page = next(p for p in pages if (r := spec.unpack_oob(p.oob)) is not None
                   and r.kind == spec.Kind.CHECKPOINT and r.seq >= ck.header.seq)
    stale = dataclasses.replace(ck_page, addr=spec.pack_ppa(*spare, 0))
    assert flashimg.anchor_uncovered(pages + [stale], ck, rec, WAYS, 8) == []
    data_page = next(p for p in pages if (r := spec.unpack_oob(p.oob)) is not None and r.kind == spec.Kind.DATA
                     and r.seq >= ck.header.seq)
    moved = dataclasses.replace(data_page, addr=spec.pack_ppa(*spare, 0))
    assert flashimg.anchor_uncovered(pages + [moved], ck, rec, WAYS, 8) == [spec.pack_ppa(*spare, 0)]

    con = boot(run_dir, cfgs, log=ROOT / "build" / "soc" / "test_anchor_churn_restart.log", timeout=600)
    try:
        m = FAST_RE.search(con.boot_text)
        assert m and int(m.group(1)) == ck.header.number, con.boot_text
        assert "0 wrong: pass" in con.command(f"io verify {CHURN_SEED} {CHURN_WRITES} {CHURN_HOT}", timeout=300)
        for lba in [*TAIL[::4], TAIL[-1]]:      # every fourth write and the last (each die's newest block)
            assert "pass" in con.command(f"io check 9 {lba} 8")
        # and it goes on: more writes, a checkpoint, all read back
        random_writes(con, 8, 50, 100)
        assert "error" not in con.command("ckpt now", timeout=300)
        assert "0 wrong: pass" in con.command("io verify 8 50 100", timeout=300)
    finally:
        con.stop()

    # 3. the newest record's data unreadable (its OOB and the block's marker left alone)
    rec = flashimg.read_anchor(pages_of(cfgs), PROFILE.page_data)
    f = spec.PPA.decompose("ppa", rec.ppa)
    with nandsim.Image(cfgs[f.channel * WAYS + f.way]["image"], writable=True) as img:
        raw = bytearray(img.page(f.lun, f.block, f.page))
        for i in range(0, PROFILE.page_data, 7):
            raw[i] ^= 0x5A
        img.program(f.lun, f.block, f.page, bytes(raw))
    pages = pages_of(cfgs)
    older = flashimg.read_anchor(pages, PROFILE.page_data)
    assert older is not None and older.header.seq < rec.header.seq
    ck = flashimg.read_checkpoint(pages, PROFILE.pages_per_block, PROFILE.page_data)
    con = boot(run_dir, cfgs, log=ROOT / "build" / "soc" / "test_anchor_damaged.log", timeout=600)
    try:
        text = con.boot_text
        if flashimg.anchor_belongs(older, ck):
            assert FAST_RE.search(text), text       # the older record still names this checkpoint
        else:
            assert FULL_RE.search(text), text
        assert "0 wrong: pass" in con.command("io verify 8 50 100", timeout=300)
    finally:
        con.stop()
