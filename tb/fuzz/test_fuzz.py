"""`make fuzz`'s cheap run: Hypothesis programs of random and broken NVMe I/O commands on the simulated
drive, each command's status, data and the drive's blocks afterwards judged by the reference controller
(sim/fuzz.py; the long campaign is `make fuzz`).  Derandomized, so every run sends the same commands."""

from __future__ import annotations

import pytest

pytestmark = [pytest.mark.soc, pytest.mark.xdist_group("fuzz")]   # the module's booted SoC

from atomflash import simctl
from sim import fuzz

EXAMPLES = 16              # over a hundred commands: about two minutes on a loaded machine
MIN_COMMANDS, MAX_COMMANDS = 6, 10


@pytest.fixture(scope="module")
def fuzzer(tmp_path_factory):
    run = tmp_path_factory.mktemp("fuzz") / "run"
    simctl.build(fuzz.SIM_CONFIG)          # the build tb/host/test_nvme_sim.py boots
    simctl.start(run, fuzz.SIM_CONFIG, fresh=True)
    f = fuzz.Fuzzer(run, known={})
    yield f
    f.close()
    simctl.stop(run, power_cut=True)


def test_random_and_broken_commands_answer_as_the_reference_model(fuzzer):
    fuzz.check_programs(fuzzer, examples=EXAMPLES, min_commands=MIN_COMMANDS, max_commands=MAX_COMMANDS,
                        derandomize=True)
    s = fuzzer.stats
    assert s.commands >= MIN_COMMANDS * EXAMPLES and s.divergences == 0 and s.hangs == 0
    assert len(s.per_opcode) >= 10, s.per_opcode           # most opcodes, and ones outside the command set
    assert len({st for _, st in s.statuses}) >= 8, s.statuses
    fuzzer.sweep()                                          # every LBA as the programs left it
