"""Memory copier (rtl/lib/memcopy.py) against a Wishbone memory model, under cocotb."""

from pathlib import Path

from rtl.lib.memcopy import MemoryCopier
from sim.harness import runner

HERE = Path(__file__).parent
CHUNK = 16


def test_memcopy():
    verilog = runner.amaranth_verilog(MemoryCopier(CHUNK), "memory_copier")
    runner.run(toplevel="memory_copier", sources=[verilog], test_module="cocotb_memcopy",
               build_name="memory_copier", test_dir=HERE, extra_env={"CHUNK": str(CHUNK)})
