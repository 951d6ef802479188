"""pytest entry for the NAND behavioural model (sim/nand_model).

One Verilator build (``nand_model``: the model + a two-target channel
harness) serves every cocotb module; each module runs in its own simulator
process so pytest-xdist spreads them over the cores.  Python-only checks of
atomflash.nandsim sit at the bottom.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from atomflash import nandsim
from tb.common import runner

HERE = Path(__file__).resolve().parent
MODEL = runner.ROOT / "sim" / "nand_model"
BUILD_NAME = "nand_model"


def build_args() -> list[str]:
    gen = nandsim.write_header(runner.GEN)
    return ["--timing", str(MODEL / "nand_model.cpp"),
            "-CFLAGS", f"-I{gen.parent} -I{MODEL} -O2"]


def run_cocotb(module: str, workdir: Path, *, testcase=None, plusargs=(), configs=None) -> Path:
    """Run cocotb ``module`` against the shared build with configs in ``workdir``."""
    workdir.mkdir(parents=True, exist_ok=True)
    for target in (0, 1):
        cfg = (configs or {}).get(target) or nandsim.NandConfig(image=workdir / f"boot.t{target}.img")
        cfg.write(workdir / f"nand{target}.cfg")
    return runner.run(
        toplevel="tb_nand_model",
        sources=[MODEL / "nand_model.sv", HERE / "tb_nand_model.sv"],
        test_module=module,
        build_name=BUILD_NAME,
        test_dir=HERE,
        build_args=build_args(),
        testcase=testcase,
        plusargs=[f"+nandtb_dir={workdir}", f"+nand0_config={workdir / 'nand0.cfg'}",
                  f"+nand1_config={workdir / 'nand1.cfg'}", *plusargs],
    )


@pytest.mark.parametrize("module", ["cocotb_commands", "cocotb_timing", "cocotb_media", "cocotb_power"])
def test_nand_model(module, tmp_path):
    run_cocotb(module, tmp_path)


def test_strict_mode_is_fatal(tmp_path, capfd):
    # $fatal aborts the simulator: cocotb's runner reports that as SystemExit.
    with pytest.raises((AssertionError, SystemExit)):
        run_cocotb("cocotb_timing", tmp_path, testcase="strict_mode_stops_on_violation",
                   plusargs=["+nandtb_strict=1"])
    out = capfd.readouterr().out
    assert "tWP measured 30.000 ns < required 50.000 ns" in out
    assert "strict mode" in out


def test_restart_on_the_same_image_across_processes(tmp_path):
    """Cut, restart; kill the simulator mid-program, restart: completed work survives, the rest is torn."""
    persist = ["+nandtb_persist=1"]
    run_cocotb("cocotb_power", tmp_path, testcase="persist_1_write_and_cut", plusargs=persist)
    with pytest.raises((AssertionError, SystemExit)):  # the simulator is killed: no results
        run_cocotb("cocotb_power", tmp_path, testcase="persist_2_kill_mid_program", plusargs=persist)
    run_cocotb("cocotb_power", tmp_path, testcase="persist_3_check", plusargs=persist)
