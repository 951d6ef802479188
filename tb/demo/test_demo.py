"""`sim/demo_log.py` (the log-only demo, before the FTL) runs end to end and passes its own oracle check."""

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.slow      # ~2-4 min: make test-slow: tb/logwriter tests the log writer in make test
def test_demo_passes():
    out = subprocess.run([sys.executable, str(ROOT / "sim" / "demo_log.py")], capture_output=True, text=True,
                         timeout=1200)
    assert out.returncode == 0, out.stdout[-4000:] + out.stderr[-4000:]
    assert "demo passed" in out.stdout
    assert "violations seen by the" in out.stdout
