"""Reads of a memory without a clock.

A read port in the ``comb`` domain gives the word at its address in the same cycle, as a register
would, and on ECP5 maps to LUT RAM (TRELLIS_DPR16X4), one copy per port: for small tables read at a
few addresses this is far smaller than registers with a select per reader.
"""

__all__ = ["read_async"]


def read_async(m, mem, addr):
    """A new read port of ``mem`` in the ``comb`` domain, addressed by ``addr``; returns its data."""
    port = mem.read_port(domain="comb")
    m.d.comb += port.addr.eq(addr)
    return port.data
