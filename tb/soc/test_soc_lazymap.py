"""System test: the map loaded lazily after a power cycle.

A format-3 boot does not read the checkpoint's map pages: recovery loads the
segments its commit points touch, the host interface comes on, and the rest
load in the idle loop -- or, for a request that misses in the map cache on a
segment not in memory yet, at once (the map cache holds the request: the
gate in rtl/ftl/mapcache.py, ``ftl.map_fault``).  Here the background loader
is paused right after boot (``map load pause``), so requests to the far end
of the device find their segments missing and must wait for the firmware to
load them; every write must still read back, the counters must say so, and a
checkpoint taken then (it loads the rest first) must carry the whole map to
the next boot.
"""

from __future__ import annotations

import re

import pytest

from sim.simboot import CLK_HZ, ROOT, TARGETS, boot, build, check_runs, model_configs

pytestmark = pytest.mark.soc

BLOCKS_PER_LUN = 16   # ~3,100 LBAs: 25 segments of 128
BEFORE = [(21, lba) for lba in (1000, 2000, 2900, 3000)]   # (seed, lba) of 8-block writes before the checkpoint,
RANDOM = (9, 300, 256)   # then `io random`: 300 writes over LBAs 0..255, so those blocks are full and closed
AFTER = [(22, 1500), (23, 600)]                            # ... and after it (recovery needs their segments)
STATUS_RE = re.compile(r"map: (\d+) of (\d+) segments of (\d+) LBAs loaded[^:]*: (\d+) for recovery at boot, "
                       r"(\d+) for waiting requests")


def status(con, arg: str = "") -> tuple[int, int, int, str, int, int]:
    """`map load [arg]`: segments loaded, segments, LBAs each, the whole line, loaded at boot, for requests."""
    out = con.command(f"map load {arg}".strip(), timeout=120)
    m = STATUS_RE.search(out)
    assert m, out
    loaded, nseg, per, at_boot, on_demand = map(int, m.groups())
    return loaded, nseg, per, out, at_boot, on_demand


def expected() -> dict[int, int]:
    want = {}
    for seed, lba in BEFORE + AFTER:
        want.update({lba + k: seed for k in range(8)})
    return want


@pytest.mark.slow      # ~4.5 min: make test-slow: test_soc_ckpt's boots load lazily in make test
def test_requests_wait_for_segments_the_boot_did_not_load(tmp_path):
    build()
    run_dir = tmp_path / "run"
    cfgs = model_configs(run_dir, profile="small", targets=TARGETS, clk_hz=CLK_HZ,
                         overrides=dict(blocks_per_lun=BLOCKS_PER_LUN))
    log = ROOT / "build" / "soc" / "test_lazymap.log"
    con = boot(run_dir, cfgs, log=log, timeout=120)
    try:
        assert "automatic checkpoints off" in con.command("ckpt every 0")
        assert "map: loaded whole at boot (no checkpoint)" in con.command("map load")
        for seed, lba in BEFORE:
            assert "wrote 8 blocks" in con.command(f"io write {seed} {lba} 8", timeout=60)
        out = con.command("io random {} {} {}".format(*RANDOM), timeout=900)
        assert "stopped" not in out and "error" not in out, out
        assert "taken" in con.command("ckpt now", timeout=120)
        for seed, lba in AFTER:
            assert "wrote 8 blocks" in con.command(f"io write {seed} {lba} 8", timeout=60)
        con.send("exit\r")
        con.expect("simulation finished", timeout=30)
    finally:
        con.stop()

    con = boot(run_dir, cfgs, log=log.with_name("test_lazymap2.log"), timeout=120)
    try:
        m = re.search(r"map: loaded lazily: (\d+) of (\d+) segments \((\d+) LBAs each\)", con.boot_text)
        assert m, con.boot_text
        at_boot, nseg, per = map(int, m.groups())
        # recovery touched the segments of what it scanned: the writes since the checkpoint and the blocks
        # open then (the random writes' last ones: LBAs 0..255), not the far ones the full blocks hold
        assert 2 <= at_boot <= len({lba // per for _, lba in AFTER} | set(range(RANDOM[2] // per))), con.boot_text
        assert nseg == -(-int(re.search(r"LBAs bound of (\d+)", con.boot_text).group(1)) // per)
        loaded, nseg2, _, note, _, _ = status(con, "pause")
        assert nseg2 == nseg and "(paused)" in note and loaded < nseg - 2, (loaded, nseg, note)
        far = 3000 // per
        # a request whose segment is not in memory waits for it, then reads what the checkpoint said
        out = con.command("io check 21 3000 8", timeout=120)
        assert "pass" in out, out
        loaded2, _, _, note, _, on_demand = status(con)
        assert on_demand >= 1 and loaded2 <= loaded + 1 + 2, (loaded, loaded2, on_demand)
        waited = int(re.search(r"(\d+) host or firmware requests waited", con.command("map load")).group(1))
        assert waited >= 1
        assert "map page" not in con.command(f"map {far * per}")
        for seed, lba, n in check_runs(expected()):
            assert "pass" in con.command(f"io check {seed} {lba} {n}", timeout=60), (lba, n, seed)
        out = con.command("io verify {} {} {}".format(*RANDOM), timeout=600)
        assert re.search(r"verify: \d+ LBAs checked, 0 wrong: pass", out), out
        # a checkpoint loads the rest first; the next boot sees the whole map through it
        assert "taken" in con.command("ckpt now", timeout=300)
        loaded3, nseg3, _, note, _, _ = status(con)
        assert loaded3 == nseg3 and "(done)" in note, note
        con.send("exit\r")
        con.expect("simulation finished", timeout=30)
    finally:
        con.stop()

    con = boot(run_dir, cfgs, log=log.with_name("test_lazymap3.log"), timeout=120)
    try:
        assert re.search(r"map: loaded lazily: \d+ of \d+ segments", con.boot_text), con.boot_text
        for seed, lba, n in check_runs(expected()):
            assert "pass" in con.command(f"io check {seed} {lba} {n}", timeout=60), (lba, n, seed)
        out = con.command("io verify {} {} {}".format(*RANDOM), timeout=600)
        assert re.search(r"verify: \d+ LBAs checked, 0 wrong: pass", out), out
    finally:
        con.stop()
