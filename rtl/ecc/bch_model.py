"""Bit-exact Python model of the BCH engine's algorithm (see rtl/ecc/bch.py).

``bchlib`` (the Linux kernel BCH library) is the *reference* the tests compare
against; this model exists because bchlib cannot show the hardware's internal
steps: it mirrors the gateware's conventions exactly (padded-degree syndromes,
the simplified inversion-free Berlekamp-Massey, the reverse byte-wise Chien
scan), so the algorithm can be checked against bchlib over thousands of random
patterns in pure Python in seconds, and the RTL can be debugged stage by stage.
It also computes the elaboration-time constants the RTL uses.
"""

from __future__ import annotations

from dataclasses import dataclass

from .gf import GF, bch_generator

__all__ = ["BchCode", "DecodeResult"]


@dataclass(frozen=True)
class DecodeResult:
    ok: bool                 # False: uncorrectable (more than t errors detected)
    nerr: int                # corrected bit errors (0 when not ok)
    fixes: tuple             # ((byte offset in data||parity, xor mask), ...) ascending offset


class BchCode:
    """Binary narrow-sense BCH code over GF(2^m) correcting ``t`` bits, with up to
    ``data_bytes`` data bytes per codeword and bchlib's byte/bit conventions."""

    def __init__(self, m: int, t: int, data_bytes: int, prim_poly: int):
        self.gf = GF(m, prim_poly)
        self.m, self.t, self.data_bytes, self.prim_poly = m, t, data_bytes, prim_poly
        self.gen = bch_generator(self.gf, t)
        self.ecc_bits = self.gen.bit_length() - 1
        self.parity_bytes = -(-self.ecc_bits // 8)
        self.pad = 8 * self.parity_bytes - self.ecc_bits   # unused low bits of the last parity byte
        self.max_bytes = data_bytes + self.parity_bytes
        if 8 * self.max_bytes > self.gf.n:
            raise ValueError(f"{data_bytes}+{self.parity_bytes} bytes do not fit GF(2^{m}) "
                             f"(at most {self.gf.n} bits per codeword)")

    # -- encoder ---------------------------------------------------------------
    def encode(self, data: bytes) -> bytes:
        """Parity bytes of ``data`` (identical to bchlib's ``encode``)."""
        nb, g = self.ecc_bits, self.gen ^ (1 << self.ecc_bits)
        r = 0
        for byte in data:
            for k in range(7, -1, -1):
                fb = ((byte >> k) & 1) ^ (r >> (nb - 1))
                r = (r << 1) & ((1 << nb) - 1)
                if fb:
                    r ^= g
        return (r << self.pad).to_bytes(self.parity_bytes, "big")

    # -- decoder ---------------------------------------------------------------
    def syndromes(self, cw: bytes) -> list[int]:
        """S_1..S_2t of ``cw`` = data||parity, the last byte's pad bits ignored.

        Bit b (value 1<<b) of byte B of a K-byte codeword is the coefficient of
        x^(8*(K-1-B)+b): the pad bits become the lowest degrees and the code
        stays cyclic-shifted valid (c(x)*x^pad is still a codeword)."""
        gf = self.gf
        S = [0] * (2 * self.t)
        last = len(cw) - 1
        for B, byte in enumerate(cw):
            if B == last:
                byte &= 0xFF & ~((1 << self.pad) - 1)
            for j in range(1, 2 * self.t + 1):
                s = gf.mul(S[j - 1], gf.alpha(8 * j))
                for b in range(8):
                    if (byte >> b) & 1:
                        s ^= gf.alpha(j * b)
                S[j - 1] = s
        return S

    def sibm(self, S: list[int]) -> list[int]:
        """Simplified inversion-free Berlekamp-Massey for binary BCH: t iterations
        (the odd-step discrepancies of a binary code are zero, so every second
        iBM step folds into an extra shift of b(x)).  Returns Lambda_0..Lambda_t."""
        gf, t = self.gf, self.t
        lam = [1] + [0] * t
        bb = [1] + [0] * t
        gamma, k = 1, 0
        for r in range(t):
            delta = 0
            for i in range(t + 1):
                j = 2 * r + 1 - i          # 1-based syndrome index
                if j >= 1:
                    delta ^= gf.mul(lam[i], S[j - 1])
            new = [gf.mul(gamma, lam[i]) ^ (gf.mul(delta, bb[i - 1]) if i else 0) for i in range(t + 1)]
            if delta != 0 and k >= 0:
                bb = [0] + lam[:t]
                gamma, k = delta, -k
            else:
                bb = [0, 0] + bb[:t - 1]
                k += 2
            lam = new
        return lam

    def chien(self, lam: list[int], nbytes: int):
        """Scan bytes from the last (degree 0) to the first; returns (fixes, roots)."""
        gf = self.gf
        fixes, roots = [], 0
        for s in range(nbytes):
            mask = 0
            for b in range(8):
                if s == 0 and b < self.pad:
                    continue
                deg = 8 * s + b
                v = 0
                for i, l in enumerate(lam):
                    v ^= gf.mul(l, gf.alpha(-i * deg))
                if v == 0:
                    mask |= 1 << b
            if mask:
                fixes.append((nbytes - 1 - s, mask))
                roots += bin(mask).count("1")
        return fixes, roots

    def decode(self, data: bytes, parity: bytes) -> DecodeResult:
        cw = bytes(data) + bytes(parity)
        assert len(parity) == self.parity_bytes and 0 < len(data) <= self.data_bytes
        S = self.syndromes(cw)
        if not any(S):
            return DecodeResult(True, 0, ())
        lam = self.sibm(S)
        deg = max(i for i, l in enumerate(lam) if l)
        fixes, roots = self.chien(lam, len(cw))
        if roots != deg or deg == 0:
            return DecodeResult(False, 0, ())
        return DecodeResult(True, roots, tuple(sorted(fixes)))

    @staticmethod
    def fixes_from_errloc(errloc, data_len: int):
        """bchlib's ``errloc`` (bit numbers over data||ecc, bit 1<<(loc%8) of
        byte loc//8) as ((byte offset, mask), ...) in ascending offset."""
        out: dict[int, int] = {}
        for loc in errloc:
            out[loc // 8] = out.get(loc // 8, 0) ^ (1 << (loc % 8))
        return tuple(sorted(out.items()))
