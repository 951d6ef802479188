"""`make demo` (sim/demo.py) end to end, shortened: a power cut mid-program during a mixed workload,
recovery, and the oracle's verdict -- over NVMe (the demo's default: the host library as the root
complex of the simulated PCIe link) in `make test`, and over the debug port in `make test-slow`
(tb/host/test_cli_sim.py and tb/soc/test_soc_powercut.py cover that path piecewise in `make test`)."""

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

pytestmark = [pytest.mark.soc]


def run_demo(tmp_path, *args):
    r = subprocess.run([sys.executable, str(ROOT / "sim" / "demo.py"), "--dir", str(tmp_path / "run"),
                        "--commands", "80", "--seed", "7", *args], capture_output=True, text=True, timeout=1500)
    assert r.returncode == 0, r.stdout[-4000:] + r.stderr[-3000:]
    assert "demo passed" in r.stdout and "power cut" in r.stdout
    assert "violations seen by the oracle" in r.stdout
    return r.stdout


@pytest.mark.long
def test_demo_over_nvme_survives_its_power_cut(tmp_path):
    assert "over NVMe" in run_demo(tmp_path)


@pytest.mark.slow
def test_demo_over_the_debug_port_survives_its_power_cut(tmp_path):
    assert "over the debug port" in run_demo(tmp_path, "--port", "debug")
