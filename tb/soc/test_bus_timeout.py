"""soc/bus_timeout.py's MasterTimeout in Migen's simulator: an access no
slave answers ends once, after the timeout, with the answer its master
takes; answered accesses pass untouched; the next access gets a fresh
timeout.  (The whole path -- the CPU reading an unmapped address in the
SoC, ``bus_errors`` counting it -- is ``test_soc_console``'s selftest.)"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from migen import Module
from migen.sim import run_simulation

from litex.soc.interconnect import wishbone

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from soc.bus_timeout import MasterTimeout  # noqa: E402

CYCLES = 16


class Dut(Module):
    def __init__(self, use_err):
        self.master = wishbone.Interface()
        self.submodules.timeout = MasterTimeout(self.master, CYCLES, use_err=use_err)
        self.slave = self.timeout.bus


def trace(dut, *, answer_after=None, hold=1, next_access=False, cycles=3 * CYCLES):
    """Drive one read (held ``hold`` cycles past its answer, as a registered
    master does), optionally a second straight after; the slave answers after
    ``answer_after`` cycles of seeing it (None: never).  Returns per cycle:
    (master ack, err, dat_r, slave cyc, error)."""
    log = []

    def master():
        yield dut.master.adr.eq(0x1234)
        yield dut.master.cyc.eq(1)
        yield dut.master.stb.eq(1)
        answered, since = 0, None
        for t in range(cycles):
            ack, err = (yield dut.master.ack), (yield dut.master.err)
            log.append((ack, err, (yield dut.master.dat_r), (yield dut.slave.cyc), (yield dut.timeout.error)))
            if (ack or err) and since is None:
                since = t
            if since is not None and t == since + hold and not next_access:
                yield dut.master.cyc.eq(0)
                yield dut.master.stb.eq(0)
            yield

    def slave():
        seen = 0
        for _ in range(cycles):
            busy = (yield dut.slave.cyc) & (yield dut.slave.stb)
            seen = seen + 1 if busy else 0
            answer = answer_after is not None and seen == answer_after
            yield dut.slave.ack.eq(answer)
            yield dut.slave.dat_r.eq(0xCAFE if answer else 0)
            yield

    run_simulation(dut, [master(), slave()])
    return log


@pytest.mark.parametrize("use_err", [False, True])
def test_unanswered_access_ends_once(use_err):
    log = trace(Dut(use_err), answer_after=None, hold=1)
    ends = [t for t, (ack, err, *_) in enumerate(log) if ack or err]
    assert len(ends) == 1, ends
    t = ends[0]
    ack, err, dat_r, slave_cyc, error = log[t]
    assert t >= CYCLES
    assert (ack, err) == ((0, 1) if use_err else (1, 0))
    assert dat_r == 0xFFFFFFFF and error == 1 and slave_cyc == 0
    assert sum(e for *_, e in log) == 1          # counted once
    assert log[t + 1][3] == 0                    # the cycle after: still not on the slaves' side


def test_answered_access_passes_through():
    log = trace(Dut(False), answer_after=3, hold=1)
    ends = [t for t, (ack, err, *_) in enumerate(log) if ack or err]
    assert len(ends) == 1 and log[ends[0]][2] == 0xCAFE and ends[0] < CYCLES
    assert sum(e for *_, e in log) == 0


def test_next_access_gets_a_fresh_timeout():
    """A master that keeps cyc/stb up after the answer is making its next access: it waits a whole timeout again."""
    log = trace(Dut(False), answer_after=None, next_access=True, cycles=4 * CYCLES)
    ends = [t for t, (ack, err, *_) in enumerate(log) if ack or err]
    assert len(ends) >= 2 and ends[1] - ends[0] > CYCLES, ends
    assert sum(e for *_, e in log) == len(ends)
