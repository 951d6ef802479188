"""The FTL core against four NAND models in Verilator (cocotb_ftl_core.py)."""

from tb.common import runner
from tb.nand_channel.harness import model_plusargs

from .harness import build

CHANNELS, WAYS, SLOTS = 2, 2, 8


def test_ftl_core(tmp_path):
    args = build("small", CHANNELS, WAYS, SLOTS)
    slot_words = args.pop("slot_words")
    runner.run(test_module="cocotb_ftl_core", plusargs=model_plusargs(tmp_path, "small", CHANNELS * WAYS),
               extra_env={"NANDTB_SLOT_WORDS": str(slot_words), "FTL_SLOTS": str(SLOTS)}, **args)
