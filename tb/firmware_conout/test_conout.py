"""The firmware's console-output rule (firmware/conout.c), on the host.

A board's crossover console has no reader until someone runs ``litex_term
crossover``; the firmware must neither stop its boot waiting for one nor
lose output a slow reader would have taken.  ``af_conout_admit`` is compiled
into a shared library and driven through ctypes with a fake transmit FIFO
and a fake cycle counter: a character waits for room up to the limit, a
wait that times out starts dropping without waiting, and room again ends
the dropping.
"""

from __future__ import annotations

import ctypes
import subprocess
from pathlib import Path

import pytest

FW = Path(__file__).resolve().parents[2] / "firmware"
pytestmark = pytest.mark.xdist_group("conout")   # one build of the library for the module
FULL = ctypes.CFUNCTYPE(ctypes.c_int)
NOW = ctypes.CFUNCTYPE(ctypes.c_uint64)
LIMIT = 1000


class State(ctypes.Structure):
    _fields_ = [("dropping", ctypes.c_int), ("dropped", ctypes.c_uint32)]


@pytest.fixture(scope="module")
def lib(tmp_path_factory):
    so = tmp_path_factory.mktemp("conout") / "libconout.so"
    subprocess.run(["gcc", "-std=c11", "-Wall", "-Wextra", "-Werror", "-O2", "-shared", "-fPIC",
                    f"-I{FW}", str(FW / "conout.c"), "-o", str(so)], check=True)
    lib = ctypes.CDLL(str(so))
    lib.af_conout_admit.argtypes = [ctypes.POINTER(State), FULL, NOW, ctypes.c_uint64]
    return lib


class Fifo:
    """Full for the next ``busy`` polls (forever if None); each clock read advances 10 cycles."""

    def __init__(self):
        self.busy: int | None = 0
        self.t = 0
        self.clock_reads = 0
        self.full = FULL(self._full)
        self.now = NOW(self._now)

    def _full(self):
        if self.busy is None:
            return 1
        if self.busy > 0:
            self.busy -= 1
            return 1
        return 0

    def _now(self):
        self.clock_reads += 1
        self.t += 10
        return self.t


def admit(lib, st, fifo) -> int:
    return lib.af_conout_admit(ctypes.byref(st), fifo.full, fifo.now, LIMIT)


def test_room_writes_at_once(lib):
    st, fifo = State(), Fifo()
    assert admit(lib, st, fifo) == 1 and fifo.clock_reads == 0 and st.dropped == 0


def test_a_slow_reader_delays_output_but_loses_none(lib):
    st, fifo = State(), Fifo()
    fifo.busy = 50                      # room after 50 polls: 500 cycles < LIMIT
    assert admit(lib, st, fifo) == 1
    assert st.dropped == 0 and not st.dropping and fifo.busy == 0


def test_no_reader_drops_after_the_limit_then_without_waiting(lib):
    st, fifo = State(), Fifo()
    fifo.busy = None                    # nobody ever reads
    assert admit(lib, st, fifo) == 0
    assert st.dropping and st.dropped == 1
    assert LIMIT <= fifo.t <= LIMIT + 20   # waited the limit, not longer
    reads = fifo.clock_reads
    for _ in range(100):                # the rest of the boot report: dropped at once
        assert admit(lib, st, fifo) == 0
    assert st.dropped == 101 and fifo.clock_reads == reads


def test_room_again_ends_dropping_and_waits_resume(lib):
    st, fifo = State(), Fifo()
    fifo.busy = None
    assert admit(lib, st, fifo) == 0 and st.dropping
    fifo.busy = 0                       # a reader drained the FIFO
    assert admit(lib, st, fifo) == 1 and not st.dropping
    fifo.busy = 30                      # full again briefly: waited for, not dropped
    assert admit(lib, st, fifo) == 1 and st.dropped == 1
