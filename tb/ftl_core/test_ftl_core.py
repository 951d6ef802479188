"""The FTL core against four NAND models in Verilator (cocotb_ftl_core.py).

``test_ftl_core`` is in ``make test``; ``test_ftl_core_long`` (``make
test-slow``) runs the scoreboarded random workload for thousands of commands
and more power cuts."""

import pytest

from tb.common import runner
from tb.nand_channel.harness import model_plusargs

from .harness import build

CHANNELS, WAYS, SLOTS = 2, 2, 8


def _run(tmp_path, testcase=None, **env):
    args = build("small", CHANNELS, WAYS, SLOTS)
    slot_words = args.pop("slot_words")
    runner.run(test_module="cocotb_ftl_core", plusargs=model_plusargs(tmp_path, "small", CHANNELS * WAYS),
               extra_env={"NANDTB_SLOT_WORDS": str(slot_words), "FTL_SLOTS": str(SLOTS), **env},
               testcase=testcase, **args)


def test_ftl_core(tmp_path):
    _run(tmp_path)


@pytest.mark.slow
@pytest.mark.parametrize("seed", [2, 3])
def test_ftl_core_long(tmp_path, seed):
    # ~1,500 commands (and as many reads) per seed, then three more power cuts
    _run(tmp_path, testcase=["random_scoreboard", "power_cut_0", "power_cut_1", "power_cut_2"],
         FTL_SEED=str(seed), FTL_BATCHES="300", FTL_BLOCKS="63")
