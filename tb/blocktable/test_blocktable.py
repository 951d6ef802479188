"""Block table valid counts (rtl/ftl/blocktable.py) under cocotb on Verilator."""

from pathlib import Path

from rtl.ftl.blocktable import BlockTable
from sim.harness import runner

HERE = Path(__file__).parent


def test_blocktable():
    verilog = runner.amaranth_verilog(BlockTable(channels=2, ways=2), "blocktable")
    runner.run(toplevel="blocktable", sources=[verilog], test_module="cocotb_blocktable",
               build_name="blocktable", test_dir=HERE)
