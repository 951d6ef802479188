"""cocotb driver of the BCH top (:mod:`sim.harness.ecc_bch`), for its tests
(``tb/ecc_bch/cocotb_ecc_bch.py``) and its benchmark (``sim/cocotb_ecc_bench.py``).

One clocked "pump" coroutine moves every stream of the top (sources from
queues, sinks into lists, optional random valid gaps / back-pressure) with one
RisingEdge + one ReadOnly per cycle, and stamps each transfer with its cycle,
so the same driver serves the correctness tests and the benchmark
(:func:`measure`).
"""

from __future__ import annotations

import random
from collections import deque

import bchlib
import cocotb
from cocotb.clock import Clock
from cocotb.triggers import ReadOnly, RisingEdge

from rtl.ecc.bch_model import BchCode

from .ecc_bch import configs

SEED = 0xECC8


class Source:
    def __init__(self, dut, name):
        self.payload = getattr(dut, f"{name}__payload")
        self.valid = getattr(dut, f"{name}__valid")
        self.ready = getattr(dut, f"{name}__ready")
        self.queue: deque[int] = deque()
        self.sent: list[int] = []           # cycle of each transfer
        self.gap = 0.0                      # probability of a bubble per cycle
        self.driving = False


class Sink:
    def __init__(self, dut, name):
        self.payload = getattr(dut, f"{name}__payload")
        self.valid = getattr(dut, f"{name}__valid")
        self.ready = getattr(dut, f"{name}__ready")
        self.items: list[tuple[int, int]] = []   # (cycle, payload)
        self.stall = 0.0                    # probability of ready low per cycle


class TB:
    def __init__(self, dut, seed=SEED):
        self.dut = dut
        self.rng = random.Random(seed)
        self.codes = configs()
        self.ref = {p: bchlib.BCH(c.t, prim_poly=c.prim_poly) for p, c in self.codes.items()}
        for p, c in self.codes.items():
            assert self.ref[p].ecc_bytes == c.parity_bytes and self.ref[p].m == c.m
        self.src = {}
        self.snk = {}
        for p in self.codes:
            for n in ("enc_i", "dec_i"):
                self.src[f"{p}_{n}"] = Source(dut, f"{p}_{n}")
            for n in ("enc_o", "enc_parity", "dec_err", "dec_res"):
                self.snk[f"{p}_{n}"] = Sink(dut, f"{p}_{n}")
        self.cycle = 0
        cocotb.start_soon(Clock(dut.clk, 10, "ns").start())

    async def reset(self):
        self.dut.rst.value = 1
        for s in self.src.values():
            s.valid.value = 0
        for k in self.snk.values():
            k.ready.value = 0
        for _ in range(3):
            await RisingEdge(self.dut.clk)
        self.dut.rst.value = 0
        cocotb.start_soon(self._pump())

    async def _pump(self):
        rng = self.rng
        while True:
            for s in self.src.values():
                go = bool(s.queue) and (s.gap == 0 or rng.random() >= s.gap)
                s.driving = go
                s.valid.value = int(go)
                if go:
                    s.payload.value = s.queue[0]
            for k in self.snk.values():
                k.ready.value = int(k.stall == 0 or rng.random() >= k.stall)
            await ReadOnly()
            for s in self.src.values():
                if s.driving and s.ready.value:
                    s.queue.popleft()
                    s.sent.append(self.cycle)
            for k in self.snk.values():
                if k.valid.value and k.ready.value:
                    k.items.append((self.cycle, int(k.payload.value)))
            await RisingEdge(self.dut.clk)
            self.cycle += 1

    async def wait_until(self, cond, limit=200_000):
        start = self.cycle
        while not cond():
            assert self.cycle - start < limit, "timeout"
            await RisingEdge(self.dut.clk)

    # -- framing helpers -------------------------------------------------------
    @staticmethod
    def frame(data: bytes) -> list[int]:
        return [b | (int(i == len(data) - 1) << 8) for i, b in enumerate(data)]

    def encode(self, p: str, words: list[bytes]):
        for w in words:
            self.src[f"{p}_enc_i"].queue.extend(self.frame(w))

    def decode(self, p: str, words: list[bytes]):
        for w in words:
            self.src[f"{p}_dec_i"].queue.extend(self.frame(w))

    def split_parity(self, p: str) -> list[bytes]:
        out, cur = [], bytearray()
        for _, v in self.snk[f"{p}_enc_parity"].items:
            cur.append(v & 0xFF)
            if v >> 8:
                out.append(bytes(cur))
                cur = bytearray()
        assert not cur, "parity stream ended without last"
        return out

    def results(self, p: str):
        """Per codeword: (fixes tuple ascending, corrected, uncorrectable, erased, cycle)."""
        code = self.codes[p]
        offw = (code.max_bytes - 1).bit_length()
        errs = deque(self.snk[f"{p}_dec_err"].items)
        out = []
        for cyc, v in self.snk[f"{p}_dec_res"].items:
            fixes = []
            while errs and errs[0][0] < cyc:
                _, e = errs.popleft()
                fixes.append((e & ((1 << offw) - 1), e >> offw))
            nb = (code.t).bit_length()
            corrected = v & ((1 << nb) - 1)
            out.append((tuple(sorted(fixes)), corrected, (v >> nb) & 1, (v >> (nb + 1)) & 1, cyc))
        assert not errs, "err entries after the last result"
        return out

    def clear(self):
        for k in self.snk.values():
            k.items.clear()
        for s in self.src.values():
            s.sent.clear()


def rand_bytes(rng, n):
    return bytes(rng.getrandbits(8) for _ in range(n))


def inject(rng, code: BchCode, cw: bytes, nerr: int, where: str) -> bytes:
    """Flip nerr distinct bits (never pad bits) of data||parity: where in
    {"any", "data", "parity", "byte"} ("byte": all in as few bytes as possible)."""
    ld = len(cw) - code.parity_bytes
    nbits = 8 * len(cw) - code.pad           # MSB-first bit index; pad bits are the tail
    if where == "data":
        pool = range(0, 8 * ld)
    elif where == "parity":
        pool = range(8 * ld, nbits)
    elif where == "byte":
        start = 8 * rng.randrange(ld)
        pool = range(start, min(start + 8 * (1 + nerr // 8), nbits))
    else:
        pool = range(nbits)
    nerr = min(nerr, len(pool))
    out = bytearray(cw)
    for loc in rng.sample(pool, nerr):
        out[loc // 8] ^= 0x80 >> (loc % 8)
    return bytes(out)


async def measure(dut) -> dict:
    """Latency and throughput in cycles per code (the figures of docs/results/ecc_bench.md); asserts the
    pipeline keeps streaming (the encoder never stalls, the decoder takes clean data back to back)."""
    tb = TB(dut, seed=SEED + 3)
    await tb.reset()
    rng = tb.rng
    figures = {}
    for p, code in tb.codes.items():
        K, N = code.max_bytes, 8
        fig = figures[p] = {"m": code.m, "t": code.t, "data_bytes": code.data_bytes,
                            "parity_bytes": code.parity_bytes, "codeword_bytes": K}
        # encoder: N back-to-back codewords, sinks always ready
        tb.clear()
        words = [rand_bytes(rng, code.data_bytes) for _ in range(N)]
        tb.encode(p, words)
        await tb.wait_until(lambda: sum(v >> 8 for _, v in tb.snk[f"{p}_enc_parity"].items) == N)
        sent = tb.src[f"{p}_enc_i"].sent
        fig["enc_cycles_per_codeword"] = (sent[-1] - sent[0] + 1) / N
        par = tb.snk[f"{p}_enc_parity"].items
        fig["enc_parity_latency"] = par[-1][0] - sent[-1]   # last data byte -> last parity byte
        assert tb.split_parity(p) == [code.encode(w) for w in words]
        assert fig["enc_cycles_per_codeword"] == code.data_bytes, "encoder stalled"

        for label, nerr in (("clean", 0), ("t_errors", code.t), ("t+1_errors", code.t + 1)):
            tb.clear()
            cws = []
            for _ in range(N):
                d = rand_bytes(rng, code.data_bytes)
                cws.append(inject(rng, code, d + code.encode(d), nerr, "any"))
            tb.decode(p, cws)
            await tb.wait_until(lambda: len(tb.snk[f"{p}_dec_res"].items) == N)
            sent = tb.src[f"{p}_dec_i"].sent
            res = tb.results(p)
            ends = [sent[(i + 1) * K - 1] for i in range(N)]
            assert [r[2] for r in res] == [int(nerr > code.t)] * N
            assert all(r[1] == (nerr if nerr <= code.t else 0) for r in res)
            lat = [r[4] - e for r, e in zip(res, ends)]
            fig[f"dec_{label}_latency"] = lat[0]            # pipeline empty
            fig[f"dec_{label}_latency_max"] = max(lat)      # back-to-back, queued behind earlier words
            fig[f"dec_{label}_cycles_per_codeword"] = (res[-1][4] - res[0][4]) / (N - 1)
            fig[f"dec_{label}_input_cycles_per_codeword"] = (sent[-1] - sent[0] + 1) / N
        dut._log.info("%s: %s", p, fig)
        assert fig["dec_clean_input_cycles_per_codeword"] == K, "decoder stalled on clean data"
    return figures
