"""OOB packer: Amaranth -> Verilog -> Verilator -> cocotb, checked against the
Python packer of atomflash.spec on random records."""

from pathlib import Path

from rtl.ftl.oob import OOBPacker
from sim.harness import runner

HERE = Path(__file__).parent


def test_oob():
    verilog = runner.amaranth_verilog(OOBPacker(), "oob_packer")
    runner.run(toplevel="oob_packer", sources=[verilog], test_module="cocotb_oob",
               build_name="oob_packer", test_dir=HERE)
