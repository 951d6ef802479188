"""Log writer (rtl/ftl/logwriter.py) with the page allocator and the NAND
controller against four NAND models (small profile, 2 channels x 2 ways) in
Verilator: pages land where the allocator says, carry the data from SoC
memory and an OOB record recovery accepts, and the flash recovers to the map
the requests describe."""

from pathlib import Path

import pytest

from rtl.ftl.logwriter import PAGE_DONE, PAGE_WRITE
from sim.harness import runner
from sim.harness.nand_channel import generate_top, harness_run_args, model_plusargs

from .top import LogWriterTop

HERE = Path(__file__).resolve().parent
CHANNELS, WAYS, SLOTS = 2, 2, 4


def build():
    top = LogWriterTop("small", CHANNELS, WAYS, SLOTS)
    name = "logwriter_small_c2w2"
    verilog = runner.amaranth_verilog(top, name, key=dict(profile="small", channels=CHANNELS, ways=WAYS, slots=SLOTS),
                                      sources=[HERE / "top.py"])
    extra = (
        ("in", 1, "req__valid"), ("out", 1, "req__ready"), ("in", PAGE_WRITE.size, "req__payload"),
        ("out", 1, "done__valid"), ("in", 1, "done__ready"), ("out", PAGE_DONE.size, "done__payload"),
        ("in", 1, "free__valid"), ("out", 1, "free__ready"), ("in", top.free.payload.shape().size, "free__payload"),
        ("in", 1, "seq_load__valid"), ("out", 1, "seq_load__ready"), ("in", 64, "seq_load__payload"),
        ("in", top.pages_per_block.shape().width, "pages_per_block"), ("out", 1, "starved"), ("in", 1, "no_blocks"),
    )
    sv = runner.write_if_changed(runner.BUILD / "rtl" / f"tb_{name}.sv",
                                 generate_top(CHANNELS, WAYS, module=name, buffers=False, extra=extra))
    return harness_run_args(name, verilog, sv, HERE), top.slot_words


@pytest.mark.long
def test_logwriter(tmp_path):
    args, slot_words = build()
    runner.run(test_module="cocotb_logwriter", plusargs=model_plusargs(tmp_path, "small", CHANNELS * WAYS),
               extra_env={"NANDTB_SLOT_WORDS": str(slot_words)}, **args)
