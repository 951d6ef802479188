"""The whole NVMe drive in Verilator under cocotbext-pcie: the cocotb tests of
``cocotb_nvme_drive.py`` (one Verilator build; the top written by ``sim.nvme.gen``)."""

from pathlib import Path

import pytest

from sim.harness import runner
from sim.nvme.gen import build, plusargs

HERE = Path(__file__).resolve().parent


def test_nvme_drive(tmp_path):
    runner.run(test_module="cocotb_nvme_drive", plusargs=plusargs(tmp_path), **build(test_dir=HERE))


@pytest.mark.long
def test_device_over_nvme(tmp_path):
    """atomflash.Device over NVMe over PCIe against the gateware, the real core and NAND models."""
    runner.run(test_module="cocotb_nvme_host", plusargs=plusargs(tmp_path), **build(test_dir=HERE))
