"""GF(2^m) arithmetic for the BCH engine: Python tables and Amaranth helpers.

Field elements are integers whose bit ``i`` is the coefficient of ``alpha^i``
in the polynomial basis defined by the primitive polynomial (bit ``m`` set).
Everything here runs at elaboration time; the helpers at the bottom turn
GF(2)-linear maps into XOR trees over Amaranth values.
"""

from __future__ import annotations

from amaranth.hdl import Cat, Const, Value

__all__ = ["GF", "bch_generator", "lin", "gf_mul"]


class GF:
    """GF(2^m) built from primitive polynomial ``prim_poly`` (bit m set)."""

    def __init__(self, m: int, prim_poly: int):
        if prim_poly >> m != 1:
            raise ValueError(f"prim_poly {prim_poly:#x} is not of degree {m}")
        self.m = m
        self.n = (1 << m) - 1
        self.prim_poly = prim_poly
        self.exp = [0] * (2 * self.n)
        self.log = [-1] * (1 << m)
        x = 1
        for i in range(self.n):
            if self.log[x] != -1:
                raise ValueError(f"{prim_poly:#x} is not primitive")
            self.exp[i] = self.exp[i + self.n] = x
            self.log[x] = i
            x <<= 1
            if x >> m:
                x ^= prim_poly

    def alpha(self, i: int) -> int:
        """alpha^i for any integer i (negative allowed)."""
        return self.exp[i % self.n]

    def mul(self, a: int, b: int) -> int:
        if a == 0 or b == 0:
            return 0
        return self.exp[self.log[a] + self.log[b]]

    def inv(self, a: int) -> int:
        if a == 0:
            raise ZeroDivisionError("GF inverse of 0")
        return self.exp[(self.n - self.log[a]) % self.n]

    def pow(self, a: int, e: int) -> int:
        if a == 0:
            return 0 if e else 1
        return self.exp[(self.log[a] * e) % self.n]

    def mul_cols(self, c: int) -> list[int]:
        """Columns of the m x m GF(2) matrix of ``x -> c*x``: column j is c*alpha^j."""
        return [self.mul(c, self.alpha(j)) for j in range(self.m)]

    def sq_cols(self) -> list[int]:
        """Columns of the (linear) squaring map ``x -> x^2``."""
        return [self.pow(self.alpha(j), 2) for j in range(self.m)]

    def minimal_poly(self, i: int) -> int:
        """Minimal polynomial of alpha^i over GF(2), as a bit mask (bit k = x^k)."""
        coset = []
        j = i % self.n
        while j not in coset:
            coset.append(j)
            j = (2 * j) % self.n
        # product of (x - alpha^j) with GF(2^m) coefficients, list low degree first
        poly = [1]
        for j in coset:
            root = self.alpha(j)
            new = [0] * (len(poly) + 1)
            for k, c in enumerate(poly):
                new[k + 1] ^= c
                new[k] ^= self.mul(c, root)
            poly = new
        assert all(c in (0, 1) for c in poly)
        return sum(c << k for k, c in enumerate(poly))


def _pmul2(a: int, b: int) -> int:
    """Product of two GF(2)[x] polynomials given as bit masks."""
    r = 0
    while b:
        if b & 1:
            r ^= a
        a <<= 1
        b >>= 1
    return r


def bch_generator(gf: GF, t: int) -> int:
    """Generator polynomial of the narrow-sense binary BCH code correcting t bits:
    the LCM of the minimal polynomials of alpha^1, alpha^3, ..., alpha^(2t-1)."""
    g, seen = 1, set()
    for i in range(1, 2 * t, 2):
        mp = gf.minimal_poly(i)
        if mp not in seen:
            seen.add(mp)
            g = _pmul2(g, mp)
    return g


# -----------------------------------------------------------------------------
# Amaranth helpers
# -----------------------------------------------------------------------------


def lin(cols: list[int], x: Value, width: int) -> Value:
    """y = M x over GF(2): ``cols[j]`` is the column for input bit j (an int mask
    of output bits).  Returns a ``width``-bit value; each output bit is one
    reduce-XOR of ``x`` under a constant mask (compact Verilog, and Yosys
    builds the XOR tree itself)."""
    assert len(cols) <= len(x)
    x = Value.cast(x)
    bits = []
    for o in range(width):
        mask = sum(1 << j for j, c in enumerate(cols) if (c >> o) & 1)
        bits.append((x & Const(mask, len(x))).xor() if mask else Const(0, 1))
    return Cat(*bits)


def gf_mul(gf: GF, a: Value, b: Value) -> Value:
    """Full GF(2^m) multiplier: XOR over j of b_j * (a*alpha^j), each a*alpha^j
    a constant linear map of the m-bit ``a`` (kept m bits wide: narrow
    expressions simulate fast in Verilator; Yosys/ABC balance the XORs)."""
    m = gf.m
    out = Const(0, m)
    for j in range(m):
        out = out ^ (lin(gf.mul_cols(gf.alpha(j)), a, m) & b[j].replicate(m))
    return out
