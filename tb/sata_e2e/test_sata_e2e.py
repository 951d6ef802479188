"""LiteSATA's whole host core (PHY controller and datapath, link, transport, command, crossbar, the
IDENTIFY and BIST frontends) against atomflash's device stack, through the cable model, under cocotb
on Verilator (top.py, cocotb_sata_e2e.py)."""

from pathlib import Path

import pytest

from sim.harness import runner

HERE = Path(__file__).parent


def _build():
    from tb.sata_e2e.litesata_host_core import host_core_verilog
    from tb.sata_e2e.top import SataEndToEnd

    host_v, ports = host_core_verilog(runner.BUILD / "rtl")
    top_v = runner.amaranth_verilog(SataEndToEnd("litesata_host_core", ports), "sata_e2e")
    return [host_v, top_v]


def _run(testcase):
    runner.run(toplevel="sata_e2e", sources=_build(), test_module="cocotb_sata_e2e", build_name="sata_e2e",
               test_dir=HERE, testcase=testcase)


def test_identify_through_litesata():
    _run("identify")


@pytest.mark.slow
def test_bist_write_then_check():
    _run("bist_write_then_check")


def test_bit_flip_in_a_data_frame():
    _run("bit_flip_in_a_data_frame")
