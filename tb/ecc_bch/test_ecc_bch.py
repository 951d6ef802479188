"""BCH ECC: pure-Python checks of the algorithm model and the GF helpers, then
the RTL (one Verilator build holding two codes) against bchlib in cocotb."""

from __future__ import annotations

import random
from pathlib import Path

import bchlib
import pytest
from amaranth.hdl import Module, Signal
from amaranth.sim import Simulator

from atomflash import spec
from rtl.ecc.bch import default_code
from rtl.ecc.bch_model import BchCode
from rtl.ecc.gf import GF, gf_mul, lin
from sim.harness import ecc_bch

HERE = Path(__file__).resolve().parent
SEED = 0xB0C4


def test_spec_matches_code():
    code = default_code()
    ref = bchlib.BCH(spec.ECC.t, m=spec.ECC.m)
    assert ref.prim_poly == spec.ECC.prim_poly          # bchlib's default polynomial for m
    assert code.ecc_bits == ref.ecc_bits == spec.ECC.m * spec.ECC.t
    assert code.parity_bytes == ref.ecc_bytes == spec.ECC.parity_bytes == 13
    assert code.max_bytes == 525 and code.pad == 0


@pytest.mark.parametrize("params", [(13, 8, 512, 0x201B), (11, 4, 64, 0x805), (13, 4, 100, 0x201B),
                                    (14, 16, 1024, 0x402B)], ids=lambda p: f"m{p[0]}t{p[1]}k{p[2]}")
def test_model_matches_bchlib(params):
    """The hardware algorithm (padded syndromes, SiBM, reverse Chien) in Python
    agrees with bchlib on parity and on every correction / failure."""
    m, t, k, poly = params
    code = BchCode(m, t, k, poly)
    ref = bchlib.BCH(t, prim_poly=poly)
    assert ref.ecc_bits == code.ecc_bits
    rng = random.Random(SEED + m * 100 + t)
    for _ in range(25):
        n = rng.choice([k, rng.randint(1, k)])
        d = bytes(rng.getrandbits(8) for _ in range(n))
        par = code.encode(d)
        assert par == ref.encode(d)
        nerr = rng.randint(0, t + 3)
        cw = bytearray(d + par)
        for loc in rng.sample(range(8 * len(cw) - code.pad), nerr):
            cw[loc // 8] ^= 0x80 >> (loc % 8)
        got = code.decode(cw[:n], cw[n:])
        want = ref.decode(bytes(cw[:n]), bytes(cw[n:]))
        if want < 0:
            assert not got.ok
        else:
            assert got.ok and got.nerr == want
            assert got.fixes == BchCode.fixes_from_errloc(ref.errloc[:want], n)
        assert got.ok == (nerr <= t)


def test_gf_helpers_in_amaranth_sim():
    """gf_mul and lin (constant multiply) against the Python field, m = 5 exhaustively."""
    gf = GF(5, 0x25)
    a, b = Signal(5), Signal(5)
    prod, cmul = Signal(5), Signal(5)
    mod = Module()
    mod.d.comb += [prod.eq(gf_mul(gf, a, b)), cmul.eq(lin(gf.mul_cols(gf.alpha(7)), a, 5))]

    async def bench(ctx):
        for x in range(32):
            for y in range(32):
                ctx.set(a, x)
                ctx.set(b, y)
                assert ctx.get(prod) == gf.mul(x, y)
            assert ctx.get(cmul) == gf.mul(x, gf.alpha(7))

    sim = Simulator(mod)
    sim.add_testbench(bench)
    sim.run()


def test_gf_rejects_bad_parameters():
    with pytest.raises(ValueError, match="not primitive"):
        GF(4, 0x1F)                       # x^4+x^3+x^2+x+1 has order 5
    with pytest.raises(ValueError, match="do not fit"):
        BchCode(13, 8, 1024, 0x201B)      # 8*(1024+13) bits > 8191


def test_ecc_bch_rtl():
    ecc_bch.run("cocotb_ecc_bch", HERE)
