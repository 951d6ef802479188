"""Static command validation: RTL vs atomflash.command.static_status."""

from pathlib import Path

from rtl.ftl.validate import CommandValidator
from sim.harness import runner

HERE = Path(__file__).parent


def test_validate_rtl_matches_python():
    verilog = runner.amaranth_verilog(CommandValidator(queue_pairs=4), "validate")
    runner.run(toplevel="validate", sources=[verilog], test_module="cocotb_validate",
               build_name="validate", test_dir=HERE)
