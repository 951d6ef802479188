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


class Arbiter(wiring.Component):
    """Round-robin arbiter: ``n`` classic Wishbone initiators share one bus.

    A grant lasts for a whole bus cycle (``cyc`` high), so an initiator's
    multi-access cycle (e.g. a read-modify-write holding ``cyc``) is never
    split; when the granted initiator drops ``cyc``, the next one in turn
    that requests gets the bus on the following clock.  No initiator waits
    for more than ``n - 1`` other cycles.

    Ports
    -----
    initiators : In(Signature(...)).array(n)
        The initiators' buses (connect each initiator's ``Out`` port here).
    bus : Out(Signature(...))
        The shared bus.
    """

    def __init__(self, n: int, *, addr_width: int, data_width: int = 32, granularity: int = 8):
        if n < 1:
            raise ValueError("an arbiter needs at least one initiator")
        self.n = n
        sig = Signature(addr_width=addr_width, data_width=data_width, granularity=granularity)
        super().__init__({"initiators": In(sig).array(n), "bus": Out(sig)})

    def elaborate(self, platform):
        from amaranth.hdl import Module, Signal

        from .roundrobin import round_robin

        m = Module()
        n = self.n
        grant = Signal(range(max(n, 2)))
        busy = Signal()          # the granted initiator is in a cycle
        for i, ini in enumerate(self.initiators):
            with m.If(grant == i):
                m.d.comb += [
                    self.bus.adr.eq(ini.adr), self.bus.dat_w.eq(ini.dat_w), self.bus.sel.eq(ini.sel),
                    self.bus.cyc.eq(ini.cyc), self.bus.stb.eq(ini.stb), self.bus.we.eq(ini.we),
                    ini.ack.eq(self.bus.ack), ini.err.eq(self.bus.err),
                ]
            m.d.comb += ini.dat_r.eq(self.bus.dat_r)
        m.d.comb += busy.eq(self.bus.cyc)
        # re-arbitrate only between cycles: the next requester after the current grant
        following, any_ = round_robin(m, [ini.cyc for ini in self.initiators], grant, n)
        with m.If(~busy & any_):
            m.d.sync += grant.eq(following)
        return m


def word_access(m, bus, adr, dat_w=None):
    """One classic-Wishbone word access on the initiator ``bus``: every lane, ``adr`` a word address; a
    write of ``dat_w`` when it is given, else a read.  Driven combinationally, so call it in each FSM
    state (or branch) that holds the access: the cycle lasts while the state does, and ends when the
    state moves on at ``bus.ack`` (``bus.dat_r`` then holds a read's word) or ``bus.err``."""
    m.d.comb += [bus.adr.eq(adr), bus.sel.eq((1 << len(bus.sel)) - 1), bus.cyc.eq(1), bus.stb.eq(1)]
    if dat_w is not None:
        m.d.comb += [bus.we.eq(1), bus.dat_w.eq(dat_w)]
