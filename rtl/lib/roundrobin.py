"""Round-robin choice, shared by every arbiter in the gateware."""

from amaranth.hdl import Signal

__all__ = ["round_robin"]


def round_robin(m, requests, last, n: int):
    """``(grant, any)``: the first of the ``n`` ``requests`` after index
    ``last``, cyclically (``last`` itself comes last), and whether any
    request is up.  Combinational; the caller updates ``last``."""
    grant = Signal(range(max(n, 2)))
    any_ = Signal()
    for base in range(n):
        with m.If(last == base):
            for off in reversed(range(1, n + 1)):
                idx = (base + off) % n
                with m.If(requests[idx]):
                    m.d.comb += [grant.eq(idx), any_.eq(1)]
    return grant, any_
