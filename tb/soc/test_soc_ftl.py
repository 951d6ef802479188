"""System test: host data through the FTL core survives a power cycle.

Boot the SoC on fresh images, write a random workload through the firmware's
queue pair (``io``: plain writes of 1-8 blocks over overlapping LBAs, atomic
groups, trims, flushes), remembering what every LBA must hold; end the
simulation; boot again on the same images (a power cycle: the firmware
recovers the map from the pages' OOB records and hands the device back to
the core); every LBA written or trimmed must read back as expected, and the
boot report must count exactly the pages and LBAs the workload left.
"""

from __future__ import annotations

import random
import re

import pytest

from atomflash import spec

from sim.simboot import CLK_HZ, ROOT, TARGETS, boot, build, check_runs, ftl_capacity, model_configs

pytestmark = pytest.mark.soc

BLOCKS_PER_LUN = 4
PROFILE = spec.NAND_PROFILES["small"]
LBAS = 48          # the workload's LBA range (overwrites and groups overlap)
COMMANDS = 40


def workload(seed: int):
    """(console line, {lba: seed or 0}) pairs, and the final expected contents."""
    rnd = random.Random(seed)
    want: dict[int, int] = {}
    steps = []
    for i in range(COMMANDS):
        tag = 100 + i
        r = rnd.random()
        if r < 0.55:
            lba, n = rnd.randrange(LBAS), rnd.randint(1, 8)
            n = min(n, LBAS - lba)
            steps.append((f"io write {tag} {lba} {n}", {lba + k: tag for k in range(n)}))
        elif r < 0.8:
            lbas = rnd.sample(range(LBAS), rnd.randint(2, 6))
            steps.append((f"io atomic {tag} " + " ".join(map(str, lbas)), {lba: tag for lba in lbas}))
        elif r < 0.92:
            lba, n = rnd.randrange(LBAS), rnd.randint(1, 4)
            n = min(n, LBAS - lba)
            steps.append((f"io trim {lba} {n}", {lba + k: 0 for k in range(n)}))
        else:
            steps.append(("io flush", {}))
    for _, change in steps:
        want.update(change)
    return steps, want


def check_all(con, want: dict[int, int]):
    for tag, lba, n in check_runs(want):
        out = con.command(f"io check {tag} {lba} {n}")
        assert "pass" in out, f"lba {lba} (+{n}, expected seed {tag}): {out}"


def test_host_writes_survive_a_power_cycle(tmp_path):
    build()
    run_dir = tmp_path / "run"
    cfgs = model_configs(run_dir, profile="small", targets=TARGETS, clk_hz=CLK_HZ,
                         overrides=dict(blocks_per_lun=BLOCKS_PER_LUN))
    steps, want = workload(seed=5)
    log = ROOT / "build" / "soc" / "test_ftl_console.log"

    con = boot(run_dir, cfgs, log=log, timeout=120)
    try:
        assert "ftl: host interface on" in con.boot_text
        for line, _ in steps:
            out = con.command(line, timeout=60)
            assert "error" not in out, f"{line}: {out}"
        check_all(con, want)
        con.send("exit\r")
        con.expect("simulation finished", timeout=30)
        assert con.proc.wait(timeout=30) == 0
    finally:
        con.stop()

    con = boot(run_dir, cfgs, log=log.with_name("test_ftl_console2.log"), timeout=120)
    try:
        text = con.boot_text
        bound = sum(1 for tag in want.values() if tag)
        m = re.search(r"recovery: (\d+) LBAs bound of \d+, (\d+) lost", text)
        assert m and (int(m.group(1)), int(m.group(2))) == (bound, 0), text
        assert "ftl: host interface on" in text
        check_all(con, want)
        # the device takes new work after the power cycle
        assert "wrote 2 blocks" in con.command("io write 999 0 2")
        assert "pass" in con.command("io check 999 0 2")
    finally:
        con.stop()


GC_BLOCKS_PER_LUN = 4
GC_RANGE = 64       # hot LBAs: victims are mostly garbage, so GC runs often and cheaply
GC_WRITES = 340     # GC (thresholds 10/12) collects from ~260 writes on


@pytest.mark.slow      # ~3.5 min: make test-slow: GC runs in make test under the bad-block, no-space and campaign tests
def test_gc_and_checkpoints_under_sustained_random_writes(tmp_path):
    """Random one-block writes over a hot range: GC must collect (taking
    checkpoints so it may erase), the data must read back, and after a power
    cycle the boot loads the newest checkpoint and scans only the blocks
    written since, with every LBA still right and the device taking new work."""
    build()
    run_dir = tmp_path / "run"
    cfgs = model_configs(run_dir, profile="small", targets=TARGETS, clk_hz=CLK_HZ,
                         overrides=dict(blocks_per_lun=GC_BLOCKS_PER_LUN))
    cap = ftl_capacity(GC_BLOCKS_PER_LUN)
    log = ROOT / "build" / "soc" / "test_gc_console.log"
    con = boot(run_dir, cfgs, log=log, timeout=120)
    try:
        assert f"capacity {cap} LBAs" in con.boot_text
        # collect from 10 erased blocks down (of 14 the log may use; 12 of them start in the core's queues)
        assert "foreground below 10" in con.command("gc thresholds 10 12")
        out = con.command(f"io random 7 {GC_WRITES} {GC_RANGE}", timeout=900)
        assert f"random: {GC_WRITES} writes over {GC_RANGE} LBAs" in out, out
        assert "warning" not in out and "error" not in out, out
        gc = con.command("gc")
        victims = int(re.search(r"victims (\d+)", gc).group(1))
        copies = int(re.search(r"copies (\d+)", gc).group(1))
        assert victims > 0 and "failed 0" in gc, gc
        # write amplification (host pages + GC copies) / host pages stays bounded
        assert 1.0 < (GC_WRITES + copies) / GC_WRITES < 3, gc
        # the core's counters agree: every host page and GC copy programmed, every victim erased
        st = dict((k, int(v)) for k, v in re.findall(r"^(host_write_pages|nand_programs|nand_erases|gc_copies)"
                                                     r"\s+(\d+)", con.command("stats"), re.M))
        assert st["host_write_pages"] == GC_WRITES and st["gc_copies"] == copies, st
        assert st["nand_programs"] >= GC_WRITES + copies and st["nand_erases"] >= victims, st
        ck = con.command("ckpt")
        m = re.search(r"newest checkpoint (\d+): floor seq (\d+)", ck)
        assert m and "failed 0" in ck, ck
        number = int(m.group(1))
        out = con.command(f"io verify 7 {GC_WRITES} {GC_RANGE}", timeout=300)
        assert f"verify: {GC_RANGE} LBAs checked, 0 wrong: pass" in out, out
        con.send("exit\r")
        con.expect("simulation finished", timeout=30)
    finally:
        con.stop()

    con = boot(run_dir, cfgs, log=log.with_name("test_gc_console2.log"), timeout=300)
    try:
        text = con.boot_text
        m = re.search(r"checkpoint: (\d+) \(floor seq", text)
        assert m and int(m.group(1)) >= number, text
        m = re.search(r"recovery: (\d+) of (\d+) good blocks scanned", text)
        assert m and int(m.group(1)) < int(m.group(2)), text   # bounded by what was written since
        out = con.command(f"io verify 7 {GC_WRITES} {GC_RANGE}", timeout=300)
        assert "0 wrong: pass" in out, out
        assert "wrote 1 blocks" in con.command(f"io write 3 {cap - 1}")   # takes new work
        assert "pass" in con.command(f"io check 3 {cap - 1}")
    finally:
        con.stop()
