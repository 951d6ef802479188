"""Classic Wishbone B4 (non-pipelined), as LiteX's SoC buses speak it.

amaranth-soc is not installable here, so atomflash carries this one signature.
Addresses are word addresses (``adr`` counts ``data_width``-bit words), ``sel``
has one bit per ``granularity``-bit lane, and a cycle ends on ``ack`` or
``err``.  ``Signature`` is seen from the initiator: an initiator port is
``Out(Signature(...))``, a target port ``In(Signature(...))``.
"""

from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out


class Signature(wiring.Signature):
    """Wishbone initiator signature.

    Members: ``adr``, ``dat_w``, ``dat_r``, ``sel``, ``cyc``, ``stb``, ``we``,
    ``ack``, ``err``.
    """

    def __init__(self, *, addr_width: int, data_width: int = 32, granularity: int = 8):
        if data_width % granularity:
            raise ValueError(f"data width {data_width} is not a multiple of granularity {granularity}")
        self.addr_width = addr_width
        self.data_width = data_width
        self.granularity = granularity
        super().__init__({
            "adr": Out(addr_width),
            "dat_w": Out(data_width),
            "dat_r": In(data_width),
            "sel": Out(data_width // granularity),
            "cyc": Out(1),
            "stb": Out(1),
            "we": Out(1),
            "ack": In(1),
            "err": In(1),
        })

    def __eq__(self, other):
        return (isinstance(other, Signature) and self.addr_width == other.addr_width
                and self.data_width == other.data_width and self.granularity == other.granularity)

    def __repr__(self):
        return f"wishbone.Signature(addr_width={self.addr_width}, data_width={self.data_width}, granularity={self.granularity})"
