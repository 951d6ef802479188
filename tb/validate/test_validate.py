"""Static command validation: RTL vs atomflash.command.static_status (the bench: cocotb_validate.py)."""

from pathlib import Path

from rtl.ftl.validate import CommandValidator
from sim.harness import runner

HERE = Path(__file__).parent
QUEUE_PAIRS = 4


def test_validate_rtl_matches_python():
    verilog = runner.amaranth_verilog(CommandValidator(queue_pairs=QUEUE_PAIRS), "validate")
    runner.run(toplevel="validate", sources=[verilog], test_module="cocotb_validate",
               build_name="validate", test_dir=HERE, extra_env={"VALIDATE_QUEUE_PAIRS": str(QUEUE_PAIRS)})
