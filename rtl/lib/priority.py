"""The lowest set bit of a vector, as a balanced tree.

``for i in reversed(range(n)): with m.If(bits[i]): ...`` states the same thing, but Yosys keeps the
statements' order as a chain of ``n`` multiplexers; over a table of 64 slots that chain alone was
most of a clock period on an ECP5.  A tree is ``log2(n)`` levels deep.
"""

from amaranth.hdl import Cat, Const, Mux, Signal
from amaranth.utils import ceil_log2

__all__ = ["lowest_set"]


def lowest_set(m, bits) -> tuple[Signal, Signal]:
    """``(any, index)``: whether any bit of ``bits`` (a value or a list of 1-bit values) is set, and
    the index of the lowest one (0 when none is).  Combinational."""
    level = [(b, Const(0, 1)) for b in (bits if isinstance(bits, (list, tuple)) else list(bits))]
    n = len(level)
    width = max(1, ceil_log2(n))
    depth = 0
    while len(level) > 1:
        nxt = []
        for k in range(0, len(level), 2):
            if k + 1 == len(level):
                any_, idx = level[k]
                nxt.append((any_, Cat(idx, Const(0, 1))[:depth + 1]))
                continue
            (any_l, idx_l), (any_r, idx_r) = level[k], level[k + 1]
            # the left half's index, else the right half's with this level's bit set
            nxt.append((any_l | any_r, Mux(any_l, Cat(idx_l[:depth], Const(0, 1)), Cat(idx_r[:depth], Const(1, 1)))))
        level, depth = nxt, depth + 1
    any_sig, index = Signal(), Signal(width)
    m.d.comb += [any_sig.eq(level[0][0]), index.eq(level[0][1])]
    return any_sig, index
