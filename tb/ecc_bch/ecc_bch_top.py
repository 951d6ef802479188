"""Simulation top for the BCH tests and benchmark: one Verilator build holding
the default code (t=8 per 512 bytes, GF(2^13)) and a small one (t=4 per 64
bytes, GF(2^11), a parity byte with 4 pad bits), encoder and decoder each; the
default code's decoder has its clock gated while idle, as in the simulated SoC."""

from __future__ import annotations

from amaranth.hdl import Module
from amaranth.lib import stream, wiring
from amaranth.lib.wiring import In, Out

from rtl.ecc.bch import BchCode, BchDecoder, BchEncoder, byte_layout, default_code, err_layout, res_layout

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
