"""Simulation top for the BCH tests and benchmark: one Verilator build holding
the default code (t=8 per 512 bytes, GF(2^13)) and a small one (t=4 per 64
bytes, GF(2^11), a parity byte with 4 pad bits), encoder and decoder each; the
default code's decoder has its clock gated while idle, as in the simulated SoC.

:func:`run` builds it (once) and runs a cocotb module against it: the tests'
``tb/ecc_bch/cocotb_ecc_bch.py``, the benchmark's ``sim/cocotb_ecc_bench.py``
(:mod:`sim.harness.ecc_tb` drives it for both)."""

from __future__ import annotations

from pathlib import Path

from amaranth.hdl import Module
from amaranth.lib import stream, wiring
from amaranth.lib.wiring import In, Out

from rtl.ecc.bch import BchCode, BchDecoder, BchEncoder, byte_layout, default_code, err_layout, res_layout

from . import runner

# cocotb's runner makes every signal public (--public-flat-rw); the BCH XOR trees are thousands of wires,
# so only the top ports are public
PORTS_VLT = runner.ROOT / "sim" / "verilator" / "ecc_bch_ports.vlt"

SMALL = dict(m=11, t=4, data_bytes=64, prim_poly=0x805)


def configs() -> dict[str, BchCode]:
    return {"d": default_code(), "s": BchCode(**SMALL)}


class EccBchTop(wiring.Component):
    """Ports ``<cfg>_enc_{i,o,parity}`` and ``<cfg>_dec_{i,err,res}`` for cfg in d, s."""

    def __init__(self):
        self.codes = configs()
        members = {}
        for p, code in self.codes.items():
            members[f"{p}_enc_i"] = In(stream.Signature(byte_layout()))
            members[f"{p}_enc_o"] = Out(stream.Signature(byte_layout()))
            members[f"{p}_enc_parity"] = Out(stream.Signature(byte_layout()))
            members[f"{p}_dec_i"] = In(stream.Signature(byte_layout()))
            members[f"{p}_dec_err"] = Out(stream.Signature(err_layout(code)))
            members[f"{p}_dec_res"] = Out(stream.Signature(res_layout(code)))
        super().__init__(members)

    def elaborate(self, platform):
        m = Module()
        for p, code in self.codes.items():
            enc = m.submodules[f"{p}_enc"] = BchEncoder(code)
            # the default code as the simulated SoC builds it (clock gated while idle), the small one plain
            dec = m.submodules[f"{p}_dec"] = BchDecoder(code, sim_gate_idle=p == "d")
            wiring.connect(m, wiring.flipped(getattr(self, f"{p}_enc_i")), enc.i)
            wiring.connect(m, wiring.flipped(getattr(self, f"{p}_enc_o")), enc.o)
            wiring.connect(m, wiring.flipped(getattr(self, f"{p}_enc_parity")), enc.parity)
            wiring.connect(m, wiring.flipped(getattr(self, f"{p}_dec_i")), dec.i)
            wiring.connect(m, wiring.flipped(getattr(self, f"{p}_dec_err")), dec.err)
            wiring.connect(m, wiring.flipped(getattr(self, f"{p}_dec_res")), dec.res)
        return m


def build() -> Path:
    """The top's Verilog (converted only when it or the BCH sources changed)."""
    return runner.amaranth_verilog(EccBchTop(), "ecc_bch_top", key={}, sources=[Path(__file__)])


def run(test_module: str, test_dir: Path, testcase=None, extra_env=None) -> Path:
    """Build (once: one Verilator build for the tests and the benchmark) and run cocotb ``test_module``
    from ``test_dir``; returns the results file (:func:`sim.harness.runner.run`)."""
    return runner.run(toplevel="ecc_bch_top", sources=[build()], test_module=test_module,
                      build_name="ecc_bch", test_dir=test_dir, testcase=testcase, extra_env=extra_env,
                      build_args=["--no-public-flat-rw", str(PORTS_VLT)])
