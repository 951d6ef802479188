"""Small stream plumbing shared by the FTL blocks."""

from amaranth import Module, Signal
from amaranth.lib import stream, wiring
from amaranth.lib.wiring import In, Out

from .roundrobin import round_robin

__all__ = ["StreamMerge"]


class StreamMerge(wiring.Component):
    """``n`` streams of one payload shape into one, round-robin, one
    transfer per handshake (e.g. completions from several engines).

    Ports
    -----
    inputs : In(stream.Signature(shape)).array(n)
    output : Out(stream.Signature(shape))
    """

    def __init__(self, shape, n: int):
        if n < 1:
            raise ValueError("need at least one input")
        self.n = n
        super().__init__({
            "inputs": In(stream.Signature(shape)).array(n),
            "output": Out(stream.Signature(shape)),
        })

    def elaborate(self, platform):
        m = Module()
        last = Signal(range(max(self.n, 2)))
        following, any_ = round_robin(m, [i.valid for i in self.inputs], last, self.n)
        # once offered, a transfer stays offered until taken (consumers may look at the
        # payload for several cycles before they assert ready)
        held = Signal()
        held_grant = Signal.like(following)
        grant = Signal.like(following)
        m.d.comb += grant.eq(following)
        with m.If(held):
            m.d.comb += grant.eq(held_grant)
        for k, src in enumerate(self.inputs):
            with m.If(grant == k):
                m.d.comb += [self.output.payload.eq(src.payload), self.output.valid.eq(src.valid),
                             src.ready.eq(self.output.ready)]
        with m.If(self.output.valid & self.output.ready):
            m.d.sync += [last.eq(grant), held.eq(0)]
        with m.Elif(self.output.valid):
            m.d.sync += [held.eq(1), held_grant.eq(grant)]
        return m
