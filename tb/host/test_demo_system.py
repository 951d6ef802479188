"""`make demo` (sim/demo.py) end to end, shortened: a power cut mid-program
during a mixed workload, recovery, and the oracle's verdict.  In `make
test-slow` (about 4 minutes): `make test` covers the same path piecewise
(tb/host/test_cli_sim.py drives the simulated SSD, tb/soc/test_soc_powercut.py
cuts power on it, tb/host/test_workload_verify.py proves the verdict can fail)."""

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

pytestmark = [pytest.mark.soc, pytest.mark.slow]


def test_demo_survives_its_power_cut(tmp_path):
    r = subprocess.run([sys.executable, str(ROOT / "sim" / "demo.py"), "--dir", str(tmp_path / "run"),
                        "--commands", "80", "--seed", "7"], capture_output=True, text=True, timeout=1500)
    assert r.returncode == 0, r.stdout[-4000:] + r.stderr[-3000:]
    assert "demo passed" in r.stdout and "power cut" in r.stdout
    assert "violations seen by the oracle" in r.stdout
