"""cocotb tests of rtl.ecc.bch (BchEncoder, BchDecoder) against bchlib, on the
top of :mod:`sim.harness.ecc_bch` driven by :class:`sim.harness.ecc_tb.TB`
(which also measures the benchmark's figures: the ``bench`` test runs that
measurement for its streaming checks)."""

from __future__ import annotations

import cocotb

from rtl.ecc.bch_model import BchCode
from sim.harness.ecc_tb import SEED, TB, inject, measure, rand_bytes


@cocotb.test()
async def encoder_parity_matches_bchlib(dut):
    """Random full and shortened codewords, with random input gaps and
    back-pressure on both outputs: parity == bchlib, data passes unchanged."""
    tb = TB(dut)
    await tb.reset()
    rng = tb.rng
    for p, code in tb.codes.items():
        k = code.data_bytes
        lens = [k, k, 1, 40, rng.randint(2, k - 1), k, rng.randint(2, k - 1), k]
        words = [rand_bytes(rng, n) for n in lens] + [b"\xff" * k, b"\x00" * k]
        tb.src[f"{p}_enc_i"].gap = 0.2
        tb.snk[f"{p}_enc_o"].stall = 0.2
        tb.snk[f"{p}_enc_parity"].stall = 0.5
        tb.encode(p, words)
    for p, code in tb.codes.items():
        total = 10
        await tb.wait_until(lambda: sum(v >> 8 for _, v in tb.snk[f"{p}_enc_parity"].items) == total)
    for p, code in tb.codes.items():
        got = tb.split_parity(p)
        lens_words = []
        passed = bytes(v & 0xFF for _, v in tb.snk[f"{p}_enc_o"].items)
        ends = [i for i, (_, v) in enumerate(tb.snk[f"{p}_enc_o"].items) if v >> 8]
        start = 0
        for e in ends:
            lens_words.append(passed[start:e + 1])
            start = e + 1
        assert len(lens_words) == len(got) == 10
        for n, (w, par) in enumerate(zip(lens_words, got)):
            want = tb.ref[p].encode(w)
            assert par == want, f"{p} word {n} ({len(w)} B): RTL {par.hex()} != bchlib {bytes(want).hex()}"
            assert par == code.encode(w)
        dut._log.info("%s: %d codewords, parity identical to bchlib", p, len(got))


async def _decode_and_check(tb, p, words_in, clean_words, expect_ok=None):
    """Decode words_in (data||parity) and compare each with bchlib."""
    code, ref = tb.codes[p], tb.ref[p]
    tb.clear()
    tb.decode(p, words_in)
    await tb.wait_until(lambda: len(tb.snk[f"{p}_dec_res"].items) == len(words_in))
    res = tb.results(p)
    for n, (cw, clean, r) in enumerate(zip(words_in, clean_words, res)):
        fixes, corrected, unc, _erased, _ = r
        ld = len(cw) - code.parity_bytes
        data, par = bytearray(cw[:ld]), bytearray(cw[ld:])
        nerr = ref.decode(bytes(data), bytes(par))
        if nerr < 0:
            assert unc == 1 and fixes == () and corrected == 0, f"{p} word {n}: bchlib fails, RTL {r}"
        else:
            want = BchCode.fixes_from_errloc(ref.errloc[:nerr], ld)
            assert unc == 0, f"{p} word {n}: bchlib corrects {nerr}, RTL flags uncorrectable"
            assert corrected == nerr and fixes == want, f"{p} word {n}: RTL {fixes} != bchlib {want}"
            fixed = bytearray(cw)
            for off, mask in fixes:
                fixed[off] ^= mask
            fixed[-1] &= 0xFF ^ ((1 << code.pad) - 1)     # pad bits are not part of the code
            assert bytes(fixed) == clean, f"{p} word {n}: miscorrection"
        if expect_ok is not None:
            assert (unc == 0) == expect_ok[n], f"{p} word {n}: expected ok={expect_ok[n]}, got {r}"
    return res


@cocotb.test()
async def decoder_corrects_up_to_t_and_flags_more(dut):
    """0..t errors (any, data only, parity only, clustered in bytes) corrected
    exactly as bchlib does; t+1..t+4 flagged; random gaps and back-pressure."""
    tb = TB(dut, seed=SEED + 1)
    await tb.reset()
    rng = tb.rng
    for p, code in tb.codes.items():
        tb.src[f"{p}_dec_i"].gap = 0.1
        tb.snk[f"{p}_dec_err"].stall = 0.3
        tb.snk[f"{p}_dec_res"].stall = 0.3
        words, clean, ok = [], [], []
        for nerr in range(code.t + 5):
            for where in ("any", "data", "parity", "byte"):
                if nerr > code.t and where != "any" and rng.random() < 0.5:
                    continue
                n = code.data_bytes if rng.random() < 0.7 else rng.randint(1, code.data_bytes)
                if where == "parity":
                    nerr_eff = min(nerr, code.ecc_bits)
                else:
                    nerr_eff = nerr
                d = rand_bytes(rng, n)
                cw = d + code.encode(d)
                bad = inject(rng, code, cw, nerr_eff, where)
                nflip = sum(bin(a ^ b).count("1") for a, b in zip(cw, bad))
                if code.pad and rng.random() < 0.5:           # flash returns anything in pad bits
                    bad = bad[:-1] + bytes([bad[-1] | rng.getrandbits(code.pad)])
                words.append(bad)
                clean.append(cw)
                ok.append(nflip <= code.t)
        res = await _decode_and_check(tb, p, words, clean, expect_ok=ok)
        ncorr = sum(r[1] for r in res)
        nunc = sum(r[2] for r in res)
        dut._log.info("%s: %d codewords, %d bits corrected, %d flagged uncorrectable",
                      p, len(words), ncorr, nunc)
        assert nunc == ok.count(False) and nunc > 0 and ncorr > 0


@cocotb.test()
async def decoder_erased_and_extremes(dut):
    """All-FF codewords (erased pages) with <= t and t+1 zero bits; all-zero
    codewords; many errors; a 1-byte codeword; back-to-back at full rate."""
    tb = TB(dut, seed=SEED + 2)
    await tb.reset()
    rng = tb.rng
    for p, code in tb.codes.items():
        n = code.max_bytes
        words, clean, erased_want = [], [], []
        for zeros in (0, 1, code.t, code.t + 1, 3 * code.t):
            w = bytearray(b"\xff" * n)
            for loc in rng.sample(range(8 * n - code.pad), zeros):
                w[loc // 8] ^= 0x80 >> (loc % 8)
            words.append(bytes(w))
            clean.append(None)
            erased_want.append(zeros <= code.t)
        z = b"\x00" * code.data_bytes
        zc = z + code.encode(z)
        words += [zc, inject(rng, code, zc, code.t, "any"), inject(rng, code, zc, 5 * code.t, "any")]
        clean += [zc, zc, zc]
        erased_want += [False, False, False]
        one = b"\x5a"
        oc = one + code.encode(one)
        words += [oc, inject(rng, code, oc, 2, "any")]
        clean += [oc, oc]
        erased_want += [False, False]
        tb.clear()
        tb.decode(p, words)
        await tb.wait_until(lambda: len(tb.snk[f"{p}_dec_res"].items) == len(words))
        res = tb.results(p)
        for i, (w, c, r, ew) in enumerate(zip(words, clean, res, erased_want)):
            fixes, corrected, unc, erased, _ = r
            assert erased == ew, f"{p} word {i}: erased={erased}, want {ew}"
            ld = len(w) - code.parity_bytes
            nerr = tb.ref[p].decode(w[:ld], w[ld:])
            if nerr < 0:
                assert unc, f"{p} word {i}: bchlib fails, RTL {r}"
            else:
                assert not unc and corrected == nerr
                assert fixes == BchCode.fixes_from_errloc(tb.ref[p].errloc[:nerr], ld)
                if c is not None:
                    fixed = bytearray(w)
                    for off, mask in fixes:
                        fixed[off] ^= mask
                    assert bytes(fixed) == c
        dut._log.info("%s: erased/extreme patterns ok", p)


@cocotb.test()
async def bench(dut):
    """The benchmark's measurement (sim/bench_ecc.py) for its checks: the pipeline keeps streaming."""
    await measure(dut)
