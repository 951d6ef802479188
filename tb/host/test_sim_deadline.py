"""SimDeadline: console and boot timeouts count the simulator's CPU time, so a
loaded machine (a nice'd campaign beside make test) does not fail a healthy run,
while a hung firmware (a spinning simulator) still times out."""

import subprocess
import sys
import time

from atomflash.simctl import SimDeadline, cpu_seconds


def _run(code: str) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-c", code])


def test_a_spinning_process_reaches_the_limit_in_its_cpu_time():
    p = _run("while True: pass")
    try:
        d = SimDeadline(0.5, p.pid)
        t0 = time.monotonic()
        while not d.expired():
            time.sleep(0.05)
            assert time.monotonic() - t0 < 30, "a spinning process never used 0.5 s of CPU"
        assert d.used() >= 0.5
    finally:
        p.kill()
        p.wait()


def test_a_sleeping_process_does_not_use_the_limit_until_the_wall_backstop():
    p = _run("import time; time.sleep(60)")
    try:
        d = SimDeadline(0.4, p.pid, wall_factor=5)  # backstop: 2 s of wall time
        time.sleep(1.0)
        assert not d.expired(), f"a sleeping process used {d.used():.2f} s of a 0.4 s limit"
        assert d.used() < 0.4
        t0 = time.monotonic()
        while not d.expired():
            time.sleep(0.05)
            assert time.monotonic() - t0 < 10
        assert d.used() < 0.4   # the backstop ended it, not CPU time
    finally:
        p.kill()
        p.wait()


def test_without_a_process_the_wall_clock_counts():
    d = SimDeadline(0.3, None)
    assert cpu_seconds(None) is None
    assert not d.expired()
    time.sleep(0.35)
    assert d.expired()
    pending = {"pid": None}
    d = SimDeadline(0.3, lambda: pending["pid"])   # the simulator starts later
    time.sleep(0.1)
    p = _run("import time; time.sleep(60)")
    try:
        pending["pid"] = p.pid
        u = d.used()
        assert 0.1 <= u < 0.3    # the wall time before it started still counts
        time.sleep(0.4)
        assert not d.expired()   # but then only its CPU time does
    finally:
        p.kill()
        p.wait()
