"""`make fuzz`'s cheap run: Hypothesis programs of random and broken NVMe I/O commands on the simulated
drive, each command's status, data and the drive's blocks afterwards judged by the reference controller
(sim/fuzz.py; the long campaign is `make fuzz`).  Derandomized, so every run sends the same commands.
And the fuzzer itself: a bug planted in a reference controller standing in for the drive is found and
shrunk."""

from __future__ import annotations

import pytest

from atomflash import simctl
from sim import fuzz

EXAMPLES = 12              # about a hundred commands: two minutes or so on a loaded machine
MIN_COMMANDS, MAX_COMMANDS = 10, 16


@pytest.fixture(scope="module")
def fuzzer(tmp_path_factory):
    run = tmp_path_factory.mktemp("fuzz") / "run"
    simctl.build(fuzz.SIM_CONFIG)          # the build tb/host/test_nvme_sim.py boots
    simctl.start(run, fuzz.SIM_CONFIG, fresh=True)
    f = fuzz.Fuzzer(run, known={})
    yield f
    f.close()
    simctl.stop(run, power_cut=True)


@pytest.mark.soc
@pytest.mark.xdist_group("fuzz")
def test_random_and_broken_commands_answer_as_the_reference_model(fuzzer):
    fuzz.check_programs(fuzzer, examples=EXAMPLES, min_commands=MIN_COMMANDS, max_commands=MAX_COMMANDS,
                        derandomize=True)
    s = fuzzer.stats
    assert s.commands >= MIN_COMMANDS // 2 * EXAMPLES and s.divergences == 0 and s.hangs == 0
    assert len(s.per_opcode) >= 10, s.per_opcode           # most opcodes, and ones outside the command set
    assert len({st for _, st in s.statuses}) >= 8, s.statuses
    fuzzer.sweep()                                          # every LBA as the programs left it


# -- the fuzzer itself, on a reference controller with a planted bug standing in for the drive (no SoC) --------
class _ReferenceLink:
    """What the fuzzer uses of a SimPcieLink, over a reference controller that runs at once."""

    def __init__(self, controller):
        import threading

        self.controller, self._lock, self.device_tlps = controller, threading.Lock(), []

    def mmio_read(self, offset):
        return self.controller.mmio_read(offset)

    def mmio_write(self, offset, value):
        self.controller.mmio_write(offset, value)

    def wait_interrupt(self, vector, timeout=0.0):
        return True

    def status(self):
        return {"cycle": 0}


def _planted_fuzzer():
    """The fuzzer against a reference controller whose TX_COMMIT of three or more staged blocks answers
    PENDING_FULL (no simulation)."""
    from atomflash.hostmem import HostMemory
    from atomflash.model import Limits
    from atomflash.model.nvme import NvmeController
    from atomflash.model.semantics import Completion
    from atomflash.nvme import NvmeHost
    from atomflash.spec import Status

    limits = Limits(capacity=200, lba_size=512, max_transfer=16, max_atomic_pages=8, max_open_tx=4, max_pending=64,
                    max_remap_triples=4, max_appends=4)
    memory = HostMemory()
    drive = NvmeController(memory, limits=limits, io_queues=2)
    commit = drive.model.tx_commit

    def buggy_commit(tid, *, queue=0):
        staged = drive.model.tx.get((queue, tid))
        return Completion(Status.PENDING_FULL) if staged and len(staged) >= 3 else commit(tid, queue=queue)

    drive.model.tx_commit = buggy_commit
    link = _ReferenceLink(drive)
    host = NvmeHost(link, memory, io_queues=2).initialize()

    class Dev:
        def identify(self):
            return {k: getattr(limits, k) for k in limits.__dataclass_fields__}

        def close(self):
            pass

    class Fuzzer(fuzz.Fuzzer):
        def _attach(self):
            self.dev, self.host, self.link = Dev(), host, link
            self.limits, self.block, self._cycle0 = limits, limits.lba_size, 0

    return Fuzzer("no simulation", known={})


def test_a_planted_bug_is_found_and_shrunk_to_its_commands():
    """A "drive" whose TX_COMMIT of three or more staged blocks answers PENDING_FULL: the fuzzer finds it
    and Hypothesis shrinks the program to a transaction of three blocks and its commit."""
    from atomflash.spec import NvmeIoOpcode as Io

    f = _planted_fuzzer()
    with pytest.raises(fuzz.Divergence, match="TX_COMMIT.*PENDING_FULL"):
        fuzz.check_programs(f, examples=2000, seed=5, min_commands=2, max_commands=12)
    tx = [c for c in f.failing if c.op in (Io.TX_WRITE, Io.TX_COMMIT)]
    assert tx[-1].op == Io.TX_COMMIT and len(f.failing) <= 5, f.failing


def test_side_by_side_campaigns_add_up():
    """``make fuzz``'s workers: counts add, the slowest command of an opcode is the slowest of any, the wall
    time is the longest (they ran at once), and the merged figure survives its JSON."""
    a, b = fuzz.Stats(commands=10, programs=2, cycles=1000, wall_s=5.0), fuzz.Stats(commands=7, programs=1,
                                                                                   cycles=500, wall_s=9.0)
    a.per_opcode.update({"READ": 6, "WRITE": 4})
    b.per_opcode.update({"READ": 7})
    a.statuses[("READ", "0/0x00 SUCCESS")] = 6
    b.statuses[("READ", "0/0x00 SUCCESS")] = 5
    b.statuses[("READ", "0/0x80 LBA_OUT_OF_RANGE")] = 2
    a.slowest, b.slowest = {"READ": 40, "WRITE": 90}, {"READ": 70}
    b.findings.append("divergence: ...")
    m = fuzz.Stats.merged([a, b])
    assert (m.commands, m.programs, m.cycles, m.wall_s) == (17, 3, 1500, 9.0)
    assert m.per_opcode == {"READ": 13, "WRITE": 4}
    assert m.statuses[("READ", "0/0x00 SUCCESS")] == 11 and m.statuses[("READ", "0/0x80 LBA_OUT_OF_RANGE")] == 2
    assert m.slowest == {"READ": 70, "WRITE": 90} and m.findings == ["divergence: ..."]
    assert fuzz.Stats.from_json(m.as_json()).as_json() == m.as_json()


def test_a_stopped_worker_runs_no_more_programs():
    """Once ``make fuzz``'s parent says the workers together reached the target, a Hypothesis run in
    progress skips its programs: the planted bug above is not even reached."""
    f = _planted_fuzzer()
    fuzz.STOP.set()
    try:
        fuzz.check_programs(f, examples=200, seed=5, min_commands=2, max_commands=12)
    finally:
        fuzz.STOP.clear()
    assert f.stats.commands == 0
