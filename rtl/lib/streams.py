"""Small stream plumbing shared by the FTL blocks."""

from amaranth import Module, Signal
from amaranth.lib import stream, wiring
from amaranth.lib.wiring import In, Out

from .roundrobin import round_robin

__all__ = ["StreamMerge", "RequestArbiter", "RegisterSlice"]


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


class RequestArbiter(wiring.Component):
    """``n`` clients share one server that answers each request with one response, a request at a time.

    A client holds the server from its request's acceptance until its response is taken; between
    requests the lowest-numbered client offering one wins (a request offered and not yet taken keeps
    its turn, so its payload never changes while it waits).

    Ports
    -----
    clients : array of {request: In(stream request_shape), response: Out(stream response_shape)}
    request : Out(stream request_shape), response : In(stream response_shape)
        The server's side.
    """

    def __init__(self, request_shape, response_shape, n: int):
        if n < 1:
            raise ValueError("an arbiter needs a client")
        self.n = n
        client = wiring.Signature({"request": In(stream.Signature(request_shape)),
                                   "response": Out(stream.Signature(response_shape))})
        super().__init__({"clients": Out(client).array(n),
                          "request": Out(stream.Signature(request_shape)),
                          "response": In(stream.Signature(response_shape))})

    def elaborate(self, platform):
        m = Module()
        granted, offering = Signal(), Signal()
        holder = Signal(range(max(2, self.n)))
        pick = Signal.like(holder)
        for i in reversed(range(self.n)):
            with m.If(self.clients[i].request.valid):
                m.d.comb += pick.eq(i)
        turn = Signal.like(holder)
        m.d.comb += turn.eq(holder)
        with m.If(~granted & ~offering):
            m.d.comb += turn.eq(pick)
        for i, c in enumerate(self.clients):
            m.d.comb += c.response.payload.eq(self.response.payload)
            with m.If(granted & (holder == i)):
                m.d.comb += [c.response.valid.eq(self.response.valid), self.response.ready.eq(c.response.ready)]
            with m.If(~granted & (turn == i)):
                m.d.comb += [self.request.valid.eq(c.request.valid), self.request.payload.eq(c.request.payload),
                             c.request.ready.eq(self.request.ready)]
        with m.If(~granted):
            m.d.sync += [holder.eq(turn), offering.eq(self.request.valid & ~self.request.ready)]
            with m.If(self.request.valid & self.request.ready):
                m.d.sync += [granted.eq(1), offering.eq(0)]
        with m.Elif(self.response.valid & self.response.ready):
            m.d.sync += granted.eq(0)
        return m


class RegisterSlice(wiring.Component):
    """A stream through registers, at full rate: a timing cut between two blocks.

    ``output``'s valid and payload and ``input``'s ready all come from flip-flops, so no
    combinational path crosses the slice in either direction.  A skid register takes the one
    transfer accepted in the cycle the output stalls.  Latency one cycle; an offered output stays
    unchanged until taken.  The skid register's payload loads every cycle it is empty, so only its
    valid flag waits on the two sides' handshakes, not the payload's wide enable.

    Ports
    -----
    input : In(stream.Signature(shape))
    output : Out(stream.Signature(shape))
    """

    def __init__(self, shape):
        super().__init__({
            "input": In(stream.Signature(shape)),
            "output": Out(stream.Signature(shape)),
        })

    def elaborate(self, platform):
        m = Module()
        i, o = self.input, self.output
        skid = Signal.like(i.payload)
        skid_valid = Signal()
        m.d.comb += i.ready.eq(~skid_valid)
        with m.If(~o.valid | o.ready):
            with m.If(skid_valid):
                m.d.sync += [o.payload.eq(skid), o.valid.eq(1), skid_valid.eq(0)]
            with m.Else():
                m.d.sync += [o.payload.eq(i.payload), o.valid.eq(i.valid)]
        with m.Elif(i.valid & ~skid_valid):
            m.d.sync += skid_valid.eq(1)
        with m.If(~skid_valid):
            m.d.sync += skid.eq(i.payload)
        return m
