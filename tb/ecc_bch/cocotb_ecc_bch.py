"""cocotb tests of rtl.ecc.bch (BchEncoder, BchDecoder) against bchlib, on the top of
:mod:`sim.harness.ecc_bch` (the default code and a small one, side by side).

``EccBchTB`` owns the top, its clock, a :class:`~sim.harness.streams.StreamSource` per input (seeded
idle gaps) and a :class:`~sim.harness.streams.StreamSink` per output (seeded backpressure), the
references (bchlib and the Python model of the algorithm) and the scoreboard; every payload goes
through the top's stream layouts.  The ``bench`` test runs the benchmark's measurement
(:func:`sim.harness.ecc_tb.measure`, its own pump-driven TB) for its streaming checks."""

from __future__ import annotations

import random
from collections import deque

import bchlib
import cocotb
from cocotb.clock import Clock
from cocotb.triggers import ClockCycles, with_timeout

from rtl.ecc.bch import byte_layout, err_layout, res_layout
from rtl.ecc.bch_model import BchCode
from sim.harness.ecc_bch import configs
from sim.harness.ecc_tb import SEED, inject, measure, rand_bytes
from sim.harness.layouts import pack, unpack
from sim.harness.streams import SettledStreamSink, StreamSink, StreamSource

BYTE = byte_layout()
INPUTS, OUTPUTS = ("enc_i", "dec_i"), ("enc_o", "enc_parity", "dec_err", "dec_res")


class EccBchTB:
    def __init__(self, dut, seed: int = SEED):
        self.dut = dut
        self.rng = random.Random(seed)          # the scenarios
        self.seed = seed
        self.codes = configs()
        self.ref = {p: bchlib.BCH(c.t, prim_poly=c.prim_poly) for p, c in self.codes.items()}
        for p, c in self.codes.items():
            assert self.ref[p].ecc_bytes == c.parity_bytes and self.ref[p].m == c.m
        self.src: dict[str, StreamSource] = {}
        self.snk: dict[str, StreamSink] = {}
        cocotb.start_soon(Clock(dut.clk, 10, "ns").start())

    async def reset(self, idle: dict | None = None, backpressure: dict | None = None, max_gap: int = 2):
        """Reset, then put a source on every input and a sink on every output (``<cfg>_<stream>``), with the
        named streams' shares of idle gaps / backpressure."""
        idle, backpressure = idle or {}, backpressure or {}
        self.dut.rst.value = 1
        for p in self.codes:
            for n in INPUTS:
                getattr(self.dut, f"{p}_{n}__valid").value = 0
            for n in OUTPUTS:
                getattr(self.dut, f"{p}_{n}__ready").value = 0
        await ClockCycles(self.dut.clk, 3)
        self.dut.rst.value = 0
        k = 0
        for p in self.codes:
            for n in INPUTS:
                name, k = f"{p}_{n}", k + 1
                self.src[name] = StreamSource(self.dut, name, self.dut.clk, idle=idle.get(name, 0.0), max_gap=max_gap,
                                              seed=self.seed + k)
            for n in OUTPUTS:
                name, k = f"{p}_{n}", k + 1
                # the encoder's data output follows its input combinationally
                sink = SettledStreamSink if n == "enc_o" else StreamSink
                self.snk[name] = sink(self.dut, name, self.dut.clk, backpressure=backpressure.get(name, 0.0),
                                      max_gap=max_gap, seed=self.seed + k)

    # -- the drivers ---------------------------------------------------------------------------------
    async def _feed(self, name: str, words: list[bytes]):
        src = self.src[name]
        for w in words:
            for i, b in enumerate(w):
                await src.send(pack(BYTE, data=b, last=i == len(w) - 1))

    def encode(self, p: str, words: list[bytes]):
        cocotb.start_soon(self._feed(f"{p}_enc_i", words))

    def decode(self, p: str, words: list[bytes]):
        cocotb.start_soon(self._feed(f"{p}_dec_i", words))

    async def wait_for(self, name: str, n: int, last: bool = False):
        """Until sink ``name`` has ``n`` items (``last``: ``n`` items ending a codeword)."""
        snk = self.snk[name]

        async def until():
            while (sum(unpack(BYTE, v)["last"] for v in snk.items) if last else len(snk.items)) < n:
                await snk.wait_for(len(snk.items) + 1)
        await with_timeout(until(), 5, "ms")

    # -- the scoreboard -------------------------------------------------------------------------------
    def words(self, name: str) -> list[bytes]:
        """A byte stream's items cut at ``last``."""
        out, cur = [], bytearray()
        for v in self.snk[name].items:
            byte = unpack(BYTE, v)
            cur.append(byte["data"])
            if byte["last"]:
                out.append(bytes(cur))
                cur = bytearray()
        assert not cur, f"{name} ended without last"
        return out

    def results(self, p: str):
        """Per codeword: (fixes tuple ascending, corrected, uncorrectable, erased); a codeword's ``err``
        entries are those taken before its result."""
        code = self.codes[p]
        err, res = self.snk[f"{p}_dec_err"], self.snk[f"{p}_dec_res"]
        errs = deque(zip(err.times, err.items))
        out = []
        for when, v in zip(res.times, res.items):
            fixes = []
            while errs and errs[0][0] < when:
                e = unpack(err_layout(code), errs.popleft()[1])
                fixes.append((e["offset"], e["mask"]))
            r = unpack(res_layout(code), v)
            out.append((tuple(sorted(fixes)), r["corrected"], r["uncorrectable"], r["erased"]))
        assert not errs, "err entries after the last result"
        return out

    def check_parity(self, p: str, sent: list[bytes]):
        """The data passes unchanged; each codeword's parity is bchlib's and the model's."""
        code = self.codes[p]
        passed, got = self.words(f"{p}_enc_o"), self.words(f"{p}_enc_parity")
        assert len(passed) == len(got) == len(sent)
        assert passed == sent, f"{p}: the encoder changed the data it passed"
        for n, (w, par) in enumerate(zip(passed, got)):
            want = self.ref[p].encode(w)
            assert par == want, f"{p} word {n} ({len(w)} B): RTL {par.hex()} != bchlib {bytes(want).hex()}"
            assert par == code.encode(w)
        return got

    def check_decoded(self, p: str, words_in, clean_words, expect_ok=None, expect_erased=None, pad_any=False):
        """Each codeword's result as bchlib decides it: the same fixes, which restore the clean codeword
        (when known; ``pad_any``: but for the pad bits, which the input may have set), or uncorrectable
        where bchlib fails."""
        code, ref = self.codes[p], self.ref[p]
        res = self.results(p)
        assert len(res) == len(words_in)
        for n, (cw, clean, r) in enumerate(zip(words_in, clean_words, res)):
            fixes, corrected, unc, erased = r
            if expect_erased is not None:
                assert erased == expect_erased[n], f"{p} word {n}: erased={erased}, want {expect_erased[n]}"
            ld = len(cw) - code.parity_bytes
            nerr = ref.decode(bytes(cw[:ld]), bytes(cw[ld:]))
            if nerr < 0:
                assert unc == 1 and fixes == () and corrected == 0, f"{p} word {n}: bchlib fails, RTL {r}"
            else:
                want = BchCode.fixes_from_errloc(ref.errloc[:nerr], ld)
                assert unc == 0, f"{p} word {n}: bchlib corrects {nerr}, RTL flags uncorrectable"
                assert corrected == nerr and fixes == want, f"{p} word {n}: RTL {fixes} != bchlib {want}"
                if clean is not None:
                    fixed = bytearray(cw)
                    for off, mask in fixes:
                        fixed[off] ^= mask
                    if pad_any:
                        fixed[-1] &= 0xFF ^ ((1 << code.pad) - 1)     # pad bits are not part of the code
                    assert bytes(fixed) == clean, f"{p} word {n}: miscorrection"
            if expect_ok is not None:
                assert (unc == 0) == expect_ok[n], f"{p} word {n}: expected ok={expect_ok[n]}, got {r}"
        return res


@cocotb.test()
async def encoder_parity_matches_bchlib(dut):
    """Random full and shortened codewords, with random input gaps and back-pressure on both outputs:
    parity == bchlib, data passes unchanged."""
    tb = EccBchTB(dut)
    await tb.reset(idle={f"{p}_enc_i": 0.2 for p in tb.codes},
                   backpressure={f"{p}_{n}": share for p in tb.codes
                                 for n, share in (("enc_o", 0.2), ("enc_parity", 0.5))})
    rng, sent = tb.rng, {}
    for p, code in tb.codes.items():
        k = code.data_bytes
        lens = [k, k, 1, 40, rng.randint(2, k - 1), k, rng.randint(2, k - 1), k]
        sent[p] = [rand_bytes(rng, n) for n in lens] + [b"\xff" * k, b"\x00" * k]
        tb.encode(p, sent[p])
    for p in tb.codes:
        await tb.wait_for(f"{p}_enc_parity", 10, last=True)
        await tb.wait_for(f"{p}_enc_o", sum(map(len, sent[p])))
    for p in tb.codes:
        got = tb.check_parity(p, sent[p])
        assert len(got) == 10
        assert tb.src[f"{p}_enc_i"].gaps and tb.snk[f"{p}_enc_o"].stalls and tb.snk[f"{p}_enc_parity"].stalls, \
            "the gaps and stalls did not happen"
        dut._log.info("%s: %d codewords, parity identical to bchlib", p, len(got))


@cocotb.test()
async def decoder_corrects_up_to_t_and_flags_more(dut):
    """0..t errors (any, data only, parity only, clustered in bytes) corrected exactly as bchlib does;
    t+1..t+4 flagged; random gaps and back-pressure."""
    tb = EccBchTB(dut, seed=SEED + 1)
    await tb.reset(idle={f"{p}_dec_i": 0.1 for p in tb.codes},
                   backpressure={f"{p}_{n}": 0.3 for p in tb.codes for n in ("dec_err", "dec_res")})
    rng = tb.rng
    for p, code in tb.codes.items():
        words, clean, ok = [], [], []
        for nerr in range(code.t + 5):
            for where in ("any", "data", "parity", "byte"):
                if nerr > code.t and where != "any" and rng.random() < 0.5:
                    continue
                n = code.data_bytes if rng.random() < 0.7 else rng.randint(1, code.data_bytes)
                nerr_eff = min(nerr, code.ecc_bits) if where == "parity" else nerr
                d = rand_bytes(rng, n)
                cw = d + code.encode(d)
                bad = inject(rng, code, cw, nerr_eff, where)
                nflip = sum(bin(a ^ b).count("1") for a, b in zip(cw, bad))
                if code.pad and rng.random() < 0.5:           # flash returns anything in pad bits
                    bad = bad[:-1] + bytes([bad[-1] | rng.getrandbits(code.pad)])
                words.append(bad)
                clean.append(cw)
                ok.append(nflip <= code.t)
        tb.decode(p, words)
        await tb.wait_for(f"{p}_dec_res", len(words))
        res = tb.check_decoded(p, words, clean, expect_ok=ok, pad_any=True)
        ncorr = sum(r[1] for r in res)
        nunc = sum(r[2] for r in res)
        dut._log.info("%s: %d codewords, %d bits corrected, %d flagged uncorrectable", p, len(words), ncorr, nunc)
        assert nunc == ok.count(False) and nunc > 0 and ncorr > 0
        assert tb.src[f"{p}_dec_i"].gaps and tb.snk[f"{p}_dec_err"].stalls and tb.snk[f"{p}_dec_res"].stalls, \
            "the gaps and stalls did not happen"


@cocotb.test()
async def decoder_erased_and_extremes(dut):
    """All-FF codewords (erased pages) with <= t and t+1 zero bits; all-zero codewords; many errors; a
    1-byte codeword; back-to-back at full rate (no gaps, no backpressure)."""
    tb = EccBchTB(dut, seed=SEED + 2)
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
        tb.decode(p, words)
        await tb.wait_for(f"{p}_dec_res", len(words))
        tb.check_decoded(p, words, clean, expect_erased=erased_want)
        assert not tb.src[f"{p}_dec_i"].gaps and not tb.snk[f"{p}_dec_res"].stalls
        dut._log.info("%s: erased/extreme patterns ok", p)


@cocotb.test()
async def bench(dut):
    """The benchmark's measurement (sim/bench_ecc.py) for its checks: the pipeline keeps streaming."""
    await measure(dut)
