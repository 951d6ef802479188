"""`sim/campaign.py --quick`: the power-fault campaign's runner end to end on
the full simulated system -- a seasoned base image, the boot calibration, six
trials over six cut sites (a torn program, a COMMIT record, a second cut
during recovery, a GC copy, an erase, a kill at a random instant), restart,
the oracle's verdict, new work -- with no failure.  Several minutes of
simulation (8 minutes on 2 busy cores), so it is in `make test-slow`; the long campaign is
`make campaign`."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

pytestmark = [pytest.mark.xdist_group("campaign"), pytest.mark.slow]


def test_quick_campaign_passes(tmp_path):
    r = subprocess.run([sys.executable, str(ROOT / "sim" / "campaign.py"), "--quick", "--jobs", "2",
                        "--dir", str(tmp_path / "c"), "--report", str(tmp_path / "report.md")],
                       capture_output=True, text=True, timeout=3000, stdin=subprocess.DEVNULL)
    assert r.returncode == 0, r.stdout[-5000:] + r.stderr[-3000:]
    results = [json.loads(line) for line in (tmp_path / "c" / "results.jsonl").read_text().splitlines()]
    assert len(results) == 6
    assert all(x["outcome"] in ("pass", "no-cut") for x in results)
    assert sum(x["cut_seen"] for x in results) >= 3, results   # most trials really lost power
    report = (tmp_path / "report.md").read_text()
    assert "| program | 1 |" in report and "Failures: 0." in report
