"""Page allocator (rtl/ftl/allocator.py) under cocotb on Verilator."""

from pathlib import Path

from rtl.ftl.allocator import PageAllocator
from sim.harness import runner

HERE = Path(__file__).parent
CHANNELS, WAYS, LUNS = 2, 4, 1


def test_allocator():
    verilog = runner.amaranth_verilog(PageAllocator(channels=CHANNELS, ways=WAYS, luns=LUNS), "allocator")
    runner.run(toplevel="allocator", sources=[verilog], test_module="cocotb_allocator",
               build_name="allocator", test_dir=HERE,
               extra_env={"CHANNELS": str(CHANNELS), "WAYS": str(WAYS), "LUNS": str(LUNS)})
