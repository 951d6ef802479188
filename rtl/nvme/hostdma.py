"""The NVMe controller's way into host memory: one request at a time, 32-bit words.

Every block of the controller that reads or writes host memory (submission entries, PRP lists, data
pages, completion entries) is an initiator of :class:`HostDmaSignature`.  In the SoC it is carried to
the PCIe endpoint's DMA (``soc/pcie.py``: ``HostDMA``, which splits a request into TLPs by the
negotiated payload and read-request sizes); in a unit bench a Python model answers it.

A request is ``(write, addr, bytes)``: ``addr`` dword aligned, ``bytes`` a multiple of 4 from 4 to
4096 that does not cross a 4 KiB boundary (the PRP rules already split transfers at page
boundaries).  A write then takes ``bytes / 4`` words on ``wdata`` (``last`` on the final one); a read
returns them on ``rdata`` (``last`` on the final one, and ``error`` on it when the host refused the
read: the words before it are not to be trusted).  Every request ends with one ``done`` (``error``:
the host refused it, e.g. an IOMMU fault or a completion timeout), after its last word.  Words are
little-endian: the byte at ``addr`` is bits 7:0 of the first word.

One request is outstanding at a time: the next ``req`` is taken only after the previous ``done``.
An initiator takes ``rdata`` as it comes (holding it back holds the link); ``wdata.error`` carries
nothing (0).  A refused read's words are not to be trusted, so an initiator acts on what it read
only after a ``done`` without ``error``.
"""

from amaranth import Module, Mux, Signal
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

__all__ = ["HostDmaSignature", "HostDmaArbiter", "REQUEST", "WORD", "DONE"]

REQUEST = data.StructLayout({"write": 1, "addr": 64, "bytes": 13})
WORD = data.StructLayout({"data": 32, "last": 1, "error": 1})
DONE = data.StructLayout({"error": 1})


class HostDmaSignature(wiring.Signature):
    """Host-memory DMA, from the initiator's side: ``req`` and ``wdata`` out, ``rdata`` and ``done`` in."""

    def __init__(self):
        super().__init__({
            "req": Out(stream.Signature(REQUEST)),
            "wdata": Out(stream.Signature(WORD)),
            "rdata": In(stream.Signature(WORD)),
            "done": In(stream.Signature(DONE)),
        })


class HostDmaArbiter(wiring.Component):
    """``n`` initiators share one host DMA port, a request at a time.

    The port is granted from a request's acceptance to its ``done``'s: its words and its ``done`` go to
    the initiator that made it.  Between requests the lowest-numbered initiator with a request offered
    wins, unless one's request was offered and not yet taken (it keeps its turn: a stream's payload must
    not change while it waits), so give the lowest number to the initiator others wait on.

    Ports
    -----
    initiators : In(HostDmaSignature()).array(n)
    dma : Out(HostDmaSignature())
    """

    def __init__(self, n: int):
        if n < 1:
            raise ValueError("an arbiter needs an initiator")
        self.n = n
        super().__init__({"initiators": In(HostDmaSignature()).array(n), "dma": Out(HostDmaSignature())})

    def elaborate(self, platform):
        m = Module()
        dma, ins = self.dma, self.initiators
        granted = Signal()                 # a request holds the port until its done is taken
        offering = Signal()                # the holder's request is offered and not yet taken
        holder = Signal(range(max(2, self.n)))
        pick = Signal.like(holder)
        for i in reversed(range(self.n)):
            with m.If(ins[i].req.valid):
                m.d.comb += pick.eq(i)
        turn = Mux(granted | offering, holder, pick)
        for i, port in enumerate(ins):
            # words and done only flow while granted, to the holder (registered: no path from a
            # response back to the choice of the next request)
            m.d.comb += [port.rdata.payload.eq(dma.rdata.payload), port.done.payload.eq(dma.done.payload)]
            with m.If(granted & (holder == i)):
                m.d.comb += [port.rdata.valid.eq(dma.rdata.valid), dma.rdata.ready.eq(port.rdata.ready),
                             port.done.valid.eq(dma.done.valid), dma.done.ready.eq(port.done.ready),
                             dma.wdata.valid.eq(port.wdata.valid), dma.wdata.payload.eq(port.wdata.payload),
                             port.wdata.ready.eq(dma.wdata.ready)]
            with m.If(~granted & (turn == i)):
                m.d.comb += [dma.req.valid.eq(port.req.valid), dma.req.payload.eq(port.req.payload),
                             port.req.ready.eq(dma.req.ready)]
        with m.If(~granted):
            m.d.sync += [holder.eq(turn), offering.eq(dma.req.valid & ~dma.req.ready)]
            with m.If(dma.req.valid & dma.req.ready):
                m.d.sync += granted.eq(1)
        with m.Elif(dma.done.valid & dma.done.ready):
            m.d.sync += granted.eq(0)
        return m
