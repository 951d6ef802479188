"""System test: wear levelling on the full SoC, judged by the NAND models'
own erase counters.

Cold data fills four blocks' worth of LBAs once; then one-block writes hammer
a hot range that fits in one block, so GC erases the same few blocks over
and over while the cold blocks, holding nothing but valid pages, would never
be erased.  With static levelling at a spread of 1 the firmware must move the
cold data out (every block that held it gets erased), keep every data block's
count within reach of the most worn, count every erase exactly as the models
do, save the counts with its checkpoints and load them after a power cycle;
the checkpoint areas rotate through the least-worn blocks when they get
ahead (test_soc_ckpt.py shows a rotation), so the bound holds over every
block; all data must read back.
"""

from __future__ import annotations

import re

import pytest

from atomflash import nandsim, spec

from sim import flashimg
from sim.simboot import CLK_HZ, DEFAULT_WAYS, ROOT, TARGETS, boot, build, model_configs

# ~8 minutes of simulation: `make test-slow` (not `make test`)
pytestmark = [pytest.mark.soc, pytest.mark.slow]

PROFILE = spec.NAND_PROFILES["small"]
BLOCKS_PER_LUN = 4
NBLOCKS = TARGETS * BLOCKS_PER_LUN
HOT = 64                        # hot LBAs 0..63 (one block's worth)
COLD = range(64, 64 + 256, 8)   # cold LBAs 64..319, written once, 8 per command
HOT_SEED, HOT_WRITES = 5, 900     # hot blocks reach 2 erases: cold ones would stay at 0
SPREAD = 1
BLOCK_RE = re.compile(r"^block (\d+) \(.*?\): (.*), (\d+) erases$", re.M)


def firmware_counts(con, anchors: set[int] | None = None) -> dict[int, int]:
    """Every block's erase count as `block` prints it; the anchor blocks' numbers go into anchors."""
    out = {}
    for g in range(NBLOCKS):
        m = BLOCK_RE.search(con.command(f"block {g}"))
        assert m and int(m.group(1)) == g, f"block {g}: no erase count"
        out[g] = int(m.group(3))
        if anchors is not None and m.group(2).startswith("anchor ("):
            anchors.add(g)
    return out


def model_counts(run_dir) -> dict[int, int]:
    out = {}
    for t in range(TARGETS):
        with nandsim.Image(run_dir / f"nand{t}.img") as img:
            for b in range(BLOCKS_PER_LUN):
                out[t * BLOCKS_PER_LUN + b] = img.erase_count(0, b)   # firmware numbering: target-major
    return out


def test_static_wear_levelling_moves_cold_data_and_counts_survive(tmp_path):
    build()
    run_dir = tmp_path / "run"
    cfgs = model_configs(run_dir, profile="small", targets=TARGETS, clk_hz=CLK_HZ,
                         overrides=dict(blocks_per_lun=BLOCKS_PER_LUN))
    log = ROOT / "build" / "soc" / "test_wear.log"
    con = boot(run_dir, cfgs, log=log, timeout=120)
    try:
        for lba in COLD:
            assert "wrote 8 blocks" in con.command(f"io write {lba} {lba} 8", timeout=60)
        assert f"more than {SPREAD} erases" in con.command(f"wear spread {SPREAD}")
        out = con.command(f"io random {HOT_SEED} {HOT_WRITES} {HOT}", timeout=1500)
        assert f"random: {HOT_WRITES} writes" in out and "error" not in out, out
        wear = con.command("wear")
        moves = int(re.search(r"(\d+) cold blocks moved", wear).group(1))
        assert moves >= 1 and ", 0 failed" in wear, wear
        areas = {int(g) for g in re.findall(r"checkpoint area \d+: block (\d+)", wear)}
        assert len(areas) == spec.CKPT.AREAS, wear
        # nothing erases from here on (background GC, static moves, automatic checkpoints), so the
        # firmware's counts and the models' can be read one after the other
        assert "automatic gc off" in con.command("gc off", timeout=300)
        assert "off" in con.command("ckpt every 0")
        for lba in COLD:
            assert "pass" in con.command(f"io check {lba} {lba} 8", timeout=120), f"cold lba {lba}"
        assert "0 wrong: pass" in con.command(f"io verify {HOT_SEED} {HOT_WRITES} {HOT}", timeout=300)
        assert "taken" in con.command("ckpt now", timeout=120)
        anchors: set[int] = set()
        counts = firmware_counts(con, anchors)
        con.send("exit\r")
        con.expect("simulation finished", timeout=30)
    finally:
        con.stop()

    # the firmware counted every erase the models did
    truth = model_counts(run_dir)
    assert counts == truth, f"firmware vs model erase counts: {counts} vs {truth}"
    # every block was erased (without static levelling the cold ones never are), and the spread is bounded,
    # the checkpoint areas' blocks included (they rotate); the two anchor blocks hold boot records only (an
    # erase per 64 records: docs/firmware.md, *The anchor*) and take no part in levelling
    assert len(anchors) == 2, f"anchor blocks: {anchors}"
    worn = [n for g, n in truth.items() if g not in anchors]
    assert min(worn) >= 1, f"a block was never erased: {truth}"
    assert max(worn) - min(worn) <= SPREAD + 1, f"erase-count spread {max(worn) - min(worn)}: {truth}"
    assert max(worn) >= SPREAD + 1, f"too few erases for the test to mean anything: {truth}"

    # the counts are in the newest checkpoint and come back after a power cycle
    layout = spec.nand_page_layout(PROFILE)
    images = [nandsim.Image(run_dir / f"nand{t}.img") for t in range(TARGETS)]
    try:
        ckpt = flashimg.read_checkpoint(flashimg.read_log(images, layout, DEFAULT_WAYS),
                                        PROFILE.pages_per_block, PROFILE.page_data)
    finally:
        for img in images:
            img.close()
    assert ckpt is not None and ckpt.header.nblocks == NBLOCKS
    saved = dict(enumerate(ckpt.erases))
    assert saved == truth, "`ckpt now` just before the exit: the checkpoint holds every count"
    con = boot(run_dir, cfgs, log=log.with_name("test_wear_restart.log"), timeout=300)
    try:
        assert "automatic gc off" in con.command("gc off", timeout=300)
        assert "off" in con.command("ckpt every 0")
        # the counts came back, plus the erases since the boot (blocks erased before use, a checkpoint)
        assert firmware_counts(con) == model_counts(run_dir)
        assert "erase counts of" in con.command("wear")
        for lba in COLD[:4]:
            assert "pass" in con.command(f"io check {lba} {lba} 8", timeout=120)
    finally:
        con.stop()
