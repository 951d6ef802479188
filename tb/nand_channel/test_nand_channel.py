"""NAND controller top (2 channels x 2 ways, small profile, ECC on) against
the NAND model in Verilator: every operation at every timing mode, descriptor
errors, a randomized multi-target mix with injected failures, ECC against the
model's raw bit errors; multi-plane operations (cocotb_nand_channel_multiplane.py).
One Verilator build; each cocotb test runs in its own simulator process so
pytest-xdist spreads them."""

from __future__ import annotations

from pathlib import Path

import pytest

from atomflash import spec
from sim.harness import runner
from sim.harness.nand_channel import DDR_MODEL_CLK_DIV, build, model_plusargs

HERE = Path(__file__).resolve().parent

CHANNELS, WAYS, SLOTS = 2, 2, 4


def run_channel_tests(tmp_path: Path, testcase: str, *, profile="small", channels=CHANNELS, ways=WAYS,
                      env=None, module="cocotb_nand_channel", ddr=False, dqs_skew_ps=0):
    args = build(profile, channels, ways, SLOTS, test_dir=HERE, ddr=ddr)
    slot_words = args.pop("slot_words")
    n = channels * ways
    plusargs = model_plusargs(tmp_path, profile, n)
    if ddr:
        plusargs += [f"+nand_model_clk_div={DDR_MODEL_CLK_DIV}", f"+dqs_skew_ps={dqs_skew_ps}"]
    runner.run(test_module=module, testcase=testcase, plusargs=plusargs,
               extra_env={"NANDTB_CHANNELS": str(channels), "NANDTB_WAYS": str(ways), "NANDTB_PROFILE": profile,
                          "NANDTB_SLOT_WORDS": str(slot_words), **(env or {})}, **args)


@pytest.mark.parametrize("testcase", ["every_operation_every_mode", "descriptor_errors_issue_no_bus_cycle",
                                      "random_mix_all_targets_with_failures", "ecc_corrects_model_bit_errors"])
def test_nand_channel_small(testcase, tmp_path):
    run_channel_tests(tmp_path, testcase)


@pytest.mark.parametrize("testcase", ["multiplane_refusals", "multiplane_random_against_reference",
                                      "multiplane_erased_and_half_written", "multiplane_failure_names_the_plane",
                                      "multiplane_one_array_time"])
def test_nand_channel_multiplane(testcase, tmp_path):
    """Multi-plane READ / PROGRAM / ERASE descriptors (cocotb_nand_channel_multiplane.py)."""
    run_channel_tests(tmp_path, testcase, module="cocotb_nand_channel_multiplane")


@pytest.mark.parametrize("testcase", ["nvddr2_negotiate_switch_and_fall_back", "nvddr2_program_read_erase_modes",
                                      "nvddr2_dqs_delay_within_the_window"])
def test_nand_channel_nvddr2(testcase, tmp_path):
    """The NV-DDR2 data path (cocotb_nand_channel_nvddr2.py), 1 channel x 2 ways on the NV-DDR2 harness."""
    run_channel_tests(tmp_path, testcase, channels=1, ways=2, module="cocotb_nand_channel_nvddr2", ddr=True)


@pytest.mark.parametrize("skew_ns,flagged", [(2, False), (-2, False), (6, True), (-6, True)])
def test_nand_channel_nvddr2_dqs_skew(skew_ns, flagged, tmp_path):
    """DQS late (+) or early (-) against DQ on the board, at mode 7: within half a cycle minus
    tDS/tDH every byte lands; beyond it the model reports tDS or tDH."""
    run_channel_tests(tmp_path, "nvddr2_dqs_skew", channels=1, ways=2, module="cocotb_nand_channel_nvddr2",
                      ddr=True, dqs_skew_ps=skew_ns * 1000, env={"NANDTB_SKEW_FLAGGED": str(int(flagged))})


@pytest.mark.slow
@pytest.mark.parametrize("profile", ["small", "realistic"])
def test_nand_channel_nvddr2_every_mode(profile, tmp_path):
    """Program, read and erase at every NV-DDR2 mode 0-7 on both profiles (its own build per profile)."""
    run_channel_tests(tmp_path, "nvddr2_program_read_erase_modes", profile=profile, channels=1, ways=2,
                      module="cocotb_nand_channel_nvddr2", ddr=True,
                      env={"NANDTB_NVDDR2_MODES": ",".join(str(m) for m in spec.ONFI_NVDDR2_MODES)})


@pytest.mark.long
def test_nand_channel_realistic(tmp_path):
    """The realistic profile (4096+224 pages, 2048 blocks) at every mode on the benchmark build."""
    run_channel_tests(tmp_path, "every_operation_every_mode", profile="realistic", channels=2, ways=4)
