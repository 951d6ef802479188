"""Classic Wishbone B4 (non-pipelined), as LiteX's SoC buses speak it.

amaranth-soc is not installable here, so atomflash carries this one signature.
Addresses are word addresses (``adr`` counts ``data_width``-bit words), ``sel``
has one bit per ``granularity``-bit lane, and a cycle ends on ``ack`` or
``err``.  ``Signature`` is seen from the initiator: an initiator port is
``Out(Signature(...))``, a target port ``In(Signature(...))``.

Incrementing bursts.  ``Signature(burst=True)`` adds the registered-feedback
cycle type tags ``cti`` and ``bte`` (Wishbone B4 section 4).  A classic
access answers its ``ack`` the cycle after it is seen, so the next access
starts a cycle later and a word moves every two cycles.  An initiator that
tags an access ``CTI_INCREMENTING`` says the next access will be at the next
address: a target that bursts (LiteX's ``wishbone.SRAM`` on a bus with
``bursting``) then has that word's answer ready in the cycle right after, and
a word moves every cycle.  The tag is a promise only about the address: an
initiator may still drop ``stb`` after any ``ack`` (the target's early answer
in that cycle is then ignored, as every ``ack`` without ``stb`` is), and
tags its last access ``CTI_END``.  Untagged (``CTI_CLASSIC``) accesses, and
every access to a target that does not burst, stay classic, so a bursting
initiator works everywhere.
"""

from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

# cycle type identifiers (cti)
CTI_CLASSIC = 0b000
CTI_INCREMENTING = 0b010
CTI_END = 0b111


class Signature(wiring.Signature):
    """Wishbone initiator signature.

    Members: ``adr``, ``dat_w``, ``dat_r``, ``sel``, ``cyc``, ``stb``, ``we``,
    ``ack``, ``err``; with ``burst``, also ``cti`` and ``bte`` (always linear
    bursts here: ``bte`` 0).
    """

    def __init__(self, *, addr_width: int, data_width: int = 32, granularity: int = 8, burst: bool = False):
        if data_width % granularity:
            raise ValueError(f"data width {data_width} is not a multiple of granularity {granularity}")
        self.addr_width = addr_width
        self.data_width = data_width
        self.granularity = granularity
        self.burst = burst
        super().__init__({
            **({"cti": Out(3), "bte": Out(2)} if burst else {}),
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
                and self.data_width == other.data_width and self.granularity == other.granularity
                and self.burst == other.burst)

    def __repr__(self):
        return (f"wishbone.Signature(addr_width={self.addr_width}, data_width={self.data_width}, "
                f"granularity={self.granularity}, burst={self.burst})")


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

    With ``burst``, initiators and bus carry ``cti``/``bte`` (bursts pass
    through whole: a grant lasts the cycle); :func:`connect` joins a classic
    initiator to a bursting port.
    """

    def __init__(self, n: int, *, addr_width: int, data_width: int = 32, granularity: int = 8, burst: bool = False):
        if n < 1:
            raise ValueError("an arbiter needs at least one initiator")
        self.n = n
        self.burst = burst
        sig = Signature(addr_width=addr_width, data_width=data_width, granularity=granularity, burst=burst)
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
                if self.burst:
                    m.d.comb += [self.bus.cti.eq(ini.cti), self.bus.bte.eq(ini.bte)]
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


def connect(m, initiator, target):
    """Join an initiator port to a target port whose signatures differ only in ``burst``: the common
    members are connected; a classic initiator's accesses reach a bursting target as ``CTI_CLASSIC``,
    and a bursting initiator's tags are dropped before a classic target (which then answers every
    access classically: the initiator still works, a word every two cycles)."""
    for name in ("adr", "dat_w", "sel", "cyc", "stb", "we"):
        m.d.comb += getattr(target, name).eq(getattr(initiator, name))
    for name in ("dat_r", "ack", "err"):
        m.d.comb += getattr(initiator, name).eq(getattr(target, name))
    if hasattr(initiator, "cti") and hasattr(target, "cti"):
        m.d.comb += [target.cti.eq(initiator.cti), target.bte.eq(initiator.bte)]


class RegisteredTarget(wiring.Component):
    """A classic Wishbone target behind registers: the request an initiator makes on ``bus`` reaches
    ``target`` from flip-flops a cycle later, and the target's answer reaches ``bus`` from flip-flops a
    cycle after it came, so no combinational path runs between the two sides (an SoC's interconnect
    on one, a wide block on the other).  An access takes two cycles more.

    An initiator that gives up a cycle (``cyc`` low) while the target is answering leaves the target's
    access to finish; its answer is dropped.

    Ports
    -----
    bus : In(Signature(...))
        The initiators' side.
    target : Out(Signature(...))
        The target's side.
    """

    def __init__(self, *, addr_width: int, data_width: int = 32, granularity: int = 8):
        sig = Signature(addr_width=addr_width, data_width=data_width, granularity=granularity)
        super().__init__({"bus": In(sig), "target": Out(sig)})

    def elaborate(self, platform):
        from amaranth.hdl import Module

        m = Module()
        bus, tgt = self.bus, self.target
        with m.FSM():
            with m.State("IDLE"):
                with m.If(bus.cyc & bus.stb):
                    m.d.sync += [tgt.adr.eq(bus.adr), tgt.dat_w.eq(bus.dat_w), tgt.sel.eq(bus.sel),
                                 tgt.we.eq(bus.we), tgt.cyc.eq(1), tgt.stb.eq(1)]
                    m.next = "ACCESS"
            with m.State("ACCESS"):
                with m.If(tgt.ack | tgt.err):
                    m.d.sync += [tgt.cyc.eq(0), tgt.stb.eq(0), bus.dat_r.eq(tgt.dat_r),
                                 bus.ack.eq(tgt.ack & bus.cyc), bus.err.eq(tgt.err & bus.cyc)]
                    m.next = "ANSWER"
            with m.State("ANSWER"):
                # the initiator sees the answer in this cycle; its next request comes in the next
                m.d.sync += [bus.ack.eq(0), bus.err.eq(0)]
                m.next = "IDLE"
        return m
