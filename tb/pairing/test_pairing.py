"""MLC paired pages (rtl/ftl/pairing.py) under cocotb on Verilator: the completion
gate against a Python reference model of the rule, and the PAD requests."""

from pathlib import Path

from rtl.ftl.logport import PAD_TAG
from rtl.ftl.pairing import PairedPages
from sim.harness import runner

HERE = Path(__file__).parent
CHANNELS, WAYS, PAD_IDLE = 2, 2, 8


def test_pairing():
    dut = PairedPages(channels=CHANNELS, ways=WAYS, pad_tag=PAD_TAG, pad_idle=PAD_IDLE)
    verilog = runner.amaranth_verilog(dut, "pairing")
    runner.run(toplevel="pairing", sources=[verilog], test_module="cocotb_pairing", build_name="pairing",
               test_dir=HERE, extra_env={"CHANNELS": str(CHANNELS), "WAYS": str(WAYS), "PAD_IDLE": str(PAD_IDLE)})
