"""The PCIe endpoint in Verilator under cocotbext-pcie: the cocotb tests of
``cocotb_pcie.py`` and ``cocotb_nvme_bridge.py`` (one Verilator build, ``build/sim/pcie``; the top written
by ``sim.pcie.gen``)."""

from pathlib import Path

from sim.harness import runner
from sim.pcie.gen import TOPLEVEL, generate

HERE = Path(__file__).resolve().parent


def test_pcie():
    runner.run(toplevel=TOPLEVEL, sources=generate(), test_module="cocotb_pcie",
               build_name="pcie", test_dir=HERE)


def test_nvme_host_bridge():
    runner.run(toplevel=TOPLEVEL, sources=generate(), test_module="cocotb_nvme_bridge",
               build_name="pcie", test_dir=HERE)
