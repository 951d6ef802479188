"""The power-fault campaign's runner (`python -m sim.campaign`, sim/campaign/) end to end on the
full simulated system: a base image, trials over several cut sites (a torn
program, an erase, COMMIT/REMAP/TRIM records, a checkpoint page, a GC copy, a
second cut during recovery, a kill at a random instant), restart, the
oracle's verdict on every LBA of the workload, new work -- with no failure.

* ``--quick --port nvme`` (in `make test`): eight trials on a fresh device, one
  simulator at a time, the host's workload over NVMe, each cut at its site and
  then three times more in the boots that recover (``--boot-cuts 3``): 24 cuts
  or more, about eleven minutes; over the debug port (``--quick`` alone, in
  `make test-slow`), about four and a half.
* ``--quick --faults mlc`` (in `make test-slow`): the same eight with MLC paired-page
  damage on (DESIGN.md trap 4): the core's PAD pages and recovery's rule for
  lower pages of incomplete word lines at work, about three minutes.
* ``--smoke`` (in `make test-slow`): six trials on the seasoned base (filled,
  GC and checkpoints on flash, GC at boot), its calibration included.
* ``--exhaustive`` (in `make test-slow`): a two-command workload on a fresh
  device cut at every program and every erase of every target, each ladder
  until the first k with nothing to cut.

The long campaign is `make campaign-long`."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.soc


def run_campaign(tmp_path, *args) -> tuple[list[dict], str]:
    r = subprocess.run([sys.executable, "-m", "sim.campaign", *args,
                        "--dir", str(tmp_path / "c"), "--report", str(tmp_path / "report.md")],
                       capture_output=True, text=True, timeout=3000, stdin=subprocess.DEVNULL, cwd=ROOT)
    assert r.returncode == 0, r.stdout[-5000:] + r.stderr[-3000:]
    results = [json.loads(line) for line in (tmp_path / "c" / "results.jsonl").read_text().splitlines()]
    return results, (tmp_path / "report.md").read_text()


def check_quick(results, report):
    """What a quick campaign must show, over either port."""
    assert len(results) == 8
    assert all(x["outcome"] in ("pass", "no-cut") for x in results), results
    assert sum(x["cut_seen"] for x in results) >= 5, results   # most trials really lost power
    assert sum(x["commands"] for x in results) >= 40, results  # and the host had work under way
    # and most of the boots recovering from a cut lost power again (--boot-cuts 3): a few dozen cuts in all
    again = sum(c == "during boot" for x in results for c in x.get("boot_cuts", ()))
    assert again >= 16 and sum(len(x["boot_cuts"]) for x in results) == 24, results
    cuts = int(report.split(" power cuts judged")[0].rsplit("\n", 1)[-1])
    assert cuts >= 24, report
    assert "| program | 1 |" in report and "fresh base image" in report and "Failures: 0." in report
    # the images after most cuts let the boot take the anchor's path, and it missed no block (a violation)
    assert sum(x.get("anchor") == "fast" for x in results) >= 4, results
    assert "The anchor (firmware/anchor.h)" in report


@pytest.mark.long
def test_quick_campaign_over_nvme_on_a_fresh_device_passes(tmp_path):
    """The host's workload over NVMe (the drive's front door), the cuts armed through the debug port."""
    check_quick(*run_campaign(tmp_path, "--quick", "--jobs", "1", "--port", "nvme"))


@pytest.mark.slow      # ~4.5 min: make test-slow (make test runs the quick campaign over NVMe)
def test_quick_campaign_over_the_debug_port_on_a_fresh_device_passes(tmp_path):
    check_quick(*run_campaign(tmp_path, "--quick", "--jobs", "1"))


@pytest.mark.slow      # ~4.5 min: make test-slow (tb/ftl_core's mlc_paired_pages covers the rule in make test)
def test_quick_campaign_with_mlc_paired_page_damage_passes(tmp_path):
    results, report = run_campaign(tmp_path, "--quick", "--faults", "mlc", "--jobs", "1")
    assert len(results) == 8
    assert all(x["outcome"] in ("pass", "no-cut") for x in results), results
    assert sum(x["cut_seen"] for x in results) >= 5, results
    assert sum(x.get("programs_by_kind", {}).get("PAD", 0) for x in results) > 0, results  # pairing was on
    # a cut in an upper page left a lower page recovery must not trust (the program site's trial)
    assert any("not trusted" in line for x in results for line in x.get("recovery", [])), results
    assert "faults mlc" in report and "Failures: 0." in report


@pytest.mark.slow
def test_smoke_campaign_on_the_seasoned_base_passes(tmp_path):
    results, report = run_campaign(tmp_path, "--smoke", "--jobs", "2")
    assert len(results) == 6
    assert all(x["outcome"] in ("pass", "no-cut") for x in results), results
    assert sum(x["cut_seen"] for x in results) >= 3, results
    assert "| program | 1 |" in report and "seasoned base image" in report and "Failures: 0." in report


@pytest.mark.slow
def test_exhaustive_cuts_every_program_and_erase_of_every_target(tmp_path):
    results, report = run_campaign(tmp_path, "--fresh", "--exhaustive", "--commands", "2", "--jobs", "2")
    assert all(x["outcome"] in ("pass", "no-cut") for x in results), results
    ladders: dict[tuple[int, int], list[dict]] = {}
    for x in results:
        ladders.setdefault((x["id"] // 10_000, x["id"] % 10_000 // 1000), []).append(x)
    assert sorted(ladders) == [(op, t) for op in (1, 2) for t in range(4)]   # programs and erases, 4 targets
    for (op, t), steps in ladders.items():
        steps.sort(key=lambda x: x["id"])
        ks = [x["id"] % 1000 for x in steps]
        assert ks == list(range(1, len(ks) + 1)), (op, t, ks)           # no step skipped
        # cut at every k up to the end, which is the first k that found nothing to cut
        assert [x["outcome"] for x in steps] == ["pass"] * (len(ks) - 1) + ["no-cut"], (op, t, steps)
        assert len(ks) >= 2, (op, t)                                     # every target programs and erases
    assert "Ladders (every program and erase of each target" in report and "Failures: 0." in report
