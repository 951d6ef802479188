"""The data mover: a command's data between the host's pages and a staging area in SoC memory.

An NVMe read or write names its data in host memory by PRP1 and PRP2; the controller stages it in
SoC memory, contiguous, where the FTL and the firmware see it.  The data mover copies one transfer
at a time between the two.  A job ``{to_host, prp1, prp2, bytes, local}`` is ``bytes`` at the PRPs
and as many at the SoC byte address ``local``: ``to_host = 0`` brings a write's data in (host pages
to SoC memory), ``to_host = 1`` sends a read's data out.

How it goes.  The job's PRPs go to a :class:`~rtl.nvme.prp.PrpWalker`, which turns them into
segments, each a dword-aligned piece of one host page, at most 4 KiB: a legal host DMA request as it
stands.  The mover makes one data request per segment, in order, and the words of the transfer run
through a small FIFO between the host side and the Wishbone side, which walks the staging area word
by word from ``local`` regardless of where the segments fall (segment k starts at ``local`` plus the
bytes before it):

* host to SoC: a read request per segment; its words go into the FIFO (``rdata.ready`` is the FIFO's
  room: holding the host back is how a slower SoC memory paces it) and the Wishbone side writes them
  out as they come.  The next segment's request may go while the last words of this one are still
  being written.
* SoC to host: the Wishbone side reads ahead of the host, up to the FIFO's depth and never past the
  transfer's end, so words wait for the host rather than the host for them, also across segments.
  A write request per segment then takes its words from the FIFO, ``last`` on the segment's final one.

The Wishbone side starts its next access on the cycle after each ``ack`` and tags every access but
the transfer's last as an incrementing burst (``rtl.lib.wishbone``): a target that bursts answers
it in that same cycle, a word a cycle; one that does not, a word every two cycles.  An access, once
started, is held until its answer; when the FIFO has no word (or no room) for the next one, ``stb``
drops after an ``ack`` and the burst ends there.

The walker's list reads and the data requests share ``dma``, which takes one request at a time: the
port is granted per request, from its ``req`` to its ``done``, to the walker first when both ask (a
list read feeds the segments that data requests wait for).  A request once offered keeps the grant
until taken, so its payload never changes under the host.

Errors (``done``, the atomflash ``Status``).  The walker's MISALIGNED_BUFFER and DATA_TRANSFER_ERROR
(a misaligned PRP entry, a refused list read) come after the segments before the fault, which are
moved.  The host refusing a data request (``done.error``, or a read word's ``error``) is a
DATA_TRANSFER_ERROR; a Wishbone ``err`` is an INTERNAL_ERROR (SoC memory the controller itself
chose failed).  Once the mover has an error of its own, it takes the walker's remaining segments
without moving them; its error, being about an earlier part of the transfer, wins over whatever the
walker ends with.  A request under way when the Wishbone side fails is still completed, as the host
DMA requires: a read's words are taken and dropped, a write is padded with zeros after the words
read before the failure.  A refused read's words may already sit in the staging area; the status
says not to use them.  ``done`` comes only once the walker has answered, no request is outstanding
and no Wishbone access is under way, so the mover takes its next job right after.

``bytes`` must be a multiple of 4 (the walker's segments are then whole words); a job breaking that
is answered INTERNAL_ERROR at once, without a request, since the controller built it.  Zero bytes
are SUCCESS at once, with none.
"""

from amaranth import Module, Mux, ResetInserter, Signal
from amaranth.lib import data, stream, wiring
from amaranth.lib.fifo import SyncFIFOBuffered
from amaranth.lib.wiring import In, Out

from atomflash.spec import Status
from rtl.lib import wishbone

from .hostdma import REQUEST, WORD, HostDmaSignature
from .prp import LENGTH_BITS, PrpWalker

__all__ = ["DataMover", "JOB", "DONE"]

JOB = data.StructLayout({"to_host": 1, "prp1": 64, "prp2": 64, "bytes": LENGTH_BITS, "local": 32})
DONE = data.StructLayout({"status": 15})


class DataMover(wiring.Component):
    """Moves one transfer between the host's PRP-named pages and SoC memory; see the module docstring.

    Parameters
    ----------
    batch : int
        PRP list entries per list read (the walker's ``batch``).
    depth : int
        Words of the FIFO between the host side and the Wishbone side (how far reads run ahead).

    Ports
    -----
    job : In(stream {to_host: 1, prp1: 64, prp2: 64, bytes: 24, local: 32})
        A transfer: ``bytes`` (a multiple of 4) at PRP1/PRP2 in host memory and at the dword-aligned
        SoC byte address ``local``; ``to_host`` 1 from SoC memory to the host, 0 the other way.
    done : Out(stream {status: 15})
        The job's ``Status``, once nothing of it is outstanding.
    dma : Out(HostDmaSignature)
        Host memory: the walker's PRP list reads and the data requests, one at a time.
    mem : Out(wishbone.Signature(addr_width=30, data_width=32, burst=True))
        SoC memory, whole words in incrementing bursts.
    """

    def __init__(self, *, batch: int = 32, depth: int = 16):
        self.batch, self.depth = batch, depth
        super().__init__({
            "job": In(stream.Signature(JOB)),
            "done": Out(stream.Signature(DONE)),
            "dma": Out(HostDmaSignature()),
            "mem": Out(wishbone.Signature(addr_width=30, data_width=32, burst=True)),
        })

    def elaborate(self, platform):
        m = Module()
        m.submodules.walker = walker = PrpWalker(batch=self.batch)
        flush = Signal()                   # the job is answered: drop what the FIFO still holds
        m.submodules.fifo = fifo = ResetInserter(flush)(SyncFIFOBuffered(width=32, depth=self.depth))

        to_host = Signal()
        address = Signal(30)               # the staging area's next word for the Wishbone side
        unread = Signal(LENGTH_BITS - 2)   # words the Wishbone side has still to read (to the host) or write
        walker_status = Signal(15)
        error = Signal(15)                 # the mover's own first error (SUCCESS: none yet)
        bus_failed = Signal()              # a Wishbone err: the Wishbone side stops
        finishing = Signal()               # the walker answered: no more read-ahead

        def fail(code):
            with m.If(error == Status.SUCCESS):
                m.d.sync += error.eq(code)

        # -- the host DMA port, granted per request, to the walker first ---------------------------
        dma, wd = self.dma, walker.dma
        data_req = stream.Signature(REQUEST).create()
        granted = Signal()                 # a request holds the port, from its req to its done
        offering = Signal()                # a request is offered and not yet taken: it keeps its turn
        holder_is_walker = Signal()
        walker_turn = Signal()
        m.d.comb += walker_turn.eq(Mux(granted | offering, holder_is_walker, wd.req.valid))
        with m.If(~granted):
            m.d.comb += [dma.req.valid.eq(Mux(walker_turn, wd.req.valid, data_req.valid)),
                         dma.req.payload.eq(Mux(walker_turn, wd.req.payload, data_req.payload)),
                         wd.req.ready.eq(walker_turn & dma.req.ready),
                         data_req.ready.eq(~walker_turn & dma.req.ready)]
            m.d.sync += [holder_is_walker.eq(walker_turn), offering.eq(dma.req.valid & ~dma.req.ready)]
            with m.If(dma.req.valid & dma.req.ready):
                m.d.sync += granted.eq(1)
        with m.Elif(dma.done.valid & dma.done.ready):
            m.d.sync += granted.eq(0)

        # the rest of the port goes to its holder; the data side's halves:
        data_rdata_ready = Signal()
        data_wdata = stream.Signature(WORD).create()
        data_done_ready = Signal()
        m.d.comb += [wd.rdata.payload.eq(dma.rdata.payload), wd.done.payload.eq(dma.done.payload),
                     dma.wdata.payload.eq(data_wdata.payload)]
        with m.If(walker_turn):
            m.d.comb += [wd.rdata.valid.eq(dma.rdata.valid), dma.rdata.ready.eq(wd.rdata.ready),
                         wd.done.valid.eq(dma.done.valid), dma.done.ready.eq(wd.done.ready)]
        with m.Else():
            m.d.comb += [dma.rdata.ready.eq(data_rdata_ready), dma.done.ready.eq(data_done_ready),
                         dma.wdata.valid.eq(data_wdata.valid), data_wdata.ready.eq(dma.wdata.ready)]

        # -- the Wishbone side: the staging area word by word, one classic access at a time --------
        bus = self.mem
        in_access = Signal()               # an access started and not yet answered: it is held
        may_start = Signal()
        with m.If(to_host):
            m.d.comb += may_start.eq((unread != 0) & fifo.w_rdy & ~bus_failed & ~finishing)
        with m.Else():
            m.d.comb += may_start.eq(fifo.r_rdy & ~bus_failed)
        m.d.comb += [bus.cyc.eq(in_access | may_start), bus.stb.eq(in_access | may_start), bus.adr.eq(address),
                     bus.we.eq(~to_host), bus.dat_w.eq(fifo.r_data), bus.sel.eq(0xF),
                     bus.cti.eq(Mux(unread > 1, wishbone.CTI_INCREMENTING, wishbone.CTI_END))]
        m.d.sync += in_access.eq(bus.stb & ~bus.ack & ~bus.err)
        with m.If(bus.stb & bus.ack):
            m.d.sync += [address.eq(address + 1), unread.eq(unread - 1)]
            with m.If(to_host):
                m.d.comb += [fifo.w_data.eq(bus.dat_r), fifo.w_en.eq(1)]
        with m.If(bus.stb & bus.err):
            m.d.sync += bus_failed.eq(1)
            fail(Status.INTERNAL_ERROR)
        with m.If(~to_host):
            # a word leaves the FIFO when written, or unwritten once the bus has failed
            m.d.comb += fifo.r_en.eq((bus.stb & bus.ack) | (bus_failed & fifo.r_rdy))

        # -- the job, its segments and their data requests ------------------------------------------
        seg = walker.segments
        seg_addr = Signal(64)
        seg_words = Signal(11)             # words in the segment: 1 .. 1024
        sent = Signal(11)                  # to the host: the segment's words sent
        refused = Signal()                 # from the host: a word of this read came with error

        m.d.comb += [walker.job.payload.prp1.eq(self.job.payload.prp1),
                     walker.job.payload.prp2.eq(self.job.payload.prp2),
                     walker.job.payload.bytes.eq(self.job.payload.bytes)]

        with m.FSM(name="mover"):
            with m.State("WAIT_FOR_A_JOB"):
                odd = self.job.payload.bytes[:2] != 0
                m.d.comb += [walker.job.valid.eq(self.job.valid & ~odd),
                             self.job.ready.eq(odd | walker.job.ready)]
                with m.If(self.job.valid & self.job.ready):
                    p = self.job.payload
                    m.d.sync += [to_host.eq(p.to_host), address.eq(p.local[2:]), unread.eq(p.bytes[2:]),
                                 error.eq(Status.SUCCESS), bus_failed.eq(0), finishing.eq(0)]
                    with m.If(odd):                 # the walker would cut words: refuse it whole
                        m.d.sync += [walker_status.eq(Status.INTERNAL_ERROR), finishing.eq(1)]
                        m.next = "WAIT_FOR_QUIET"
                    with m.Else():
                        m.next = "WAIT_FOR_A_SEGMENT"
            with m.State("WAIT_FOR_A_SEGMENT"):
                m.d.comb += seg.ready.eq(1)
                with m.If(seg.valid):
                    with m.If(error == Status.SUCCESS):     # after an error the segments are only drained
                        m.d.sync += [seg_addr.eq(seg.payload.addr), seg_words.eq(seg.payload.bytes[2:]),
                                     sent.eq(0), refused.eq(0)]
                        m.next = "REQUEST"
                with m.Elif(walker.done.valid):
                    m.d.comb += walker.done.ready.eq(1)
                    m.d.sync += [walker_status.eq(walker.done.payload.status), finishing.eq(1)]
                    m.next = "WAIT_FOR_QUIET"
            with m.State("REQUEST"):
                m.d.comb += [data_req.valid.eq(1), data_req.payload.write.eq(to_host),
                             data_req.payload.addr.eq(seg_addr), data_req.payload.bytes.eq(seg_words << 2)]
                with m.If(data_req.ready):
                    m.next = "MOVE"
            with m.State("MOVE"):
                with m.If(to_host):
                    # words from the FIFO; after a Wishbone err, zeros once the words read before it are sent
                    final = sent == seg_words - 1
                    m.d.comb += [data_wdata.valid.eq(fifo.r_rdy | (bus_failed & (fifo.level == 0))),
                                 data_wdata.payload.data.eq(Mux(fifo.r_rdy, fifo.r_data, 0)),
                                 data_wdata.payload.last.eq(final)]
                    with m.If(data_wdata.valid & data_wdata.ready):
                        m.d.comb += fifo.r_en.eq(fifo.r_rdy)
                        m.d.sync += sent.eq(sent + 1)
                        with m.If(final):
                            m.next = "WAIT_FOR_DONE"
                with m.Else():
                    m.d.comb += [data_rdata_ready.eq(fifo.w_rdy), fifo.w_data.eq(dma.rdata.payload.data),
                                 fifo.w_en.eq(dma.rdata.valid & fifo.w_rdy)]
                    with m.If(dma.rdata.valid & fifo.w_rdy):
                        m.d.sync += refused.eq(refused | dma.rdata.payload.error)
                        with m.If(dma.rdata.payload.last):
                            m.next = "WAIT_FOR_DONE"
            with m.State("WAIT_FOR_DONE"):
                m.d.comb += data_done_ready.eq(1)
                with m.If(dma.done.valid):
                    with m.If(dma.done.payload.error | refused):
                        fail(Status.DATA_TRANSFER_ERROR)
                    m.next = "WAIT_FOR_A_SEGMENT"
            with m.State("WAIT_FOR_QUIET"):
                # to SoC memory the FIFO's last words still go out; to the host the read-ahead has stopped
                with m.If(~in_access & ~may_start & ((fifo.level == 0) | to_host)):
                    m.next = "ANSWER"
            with m.State("ANSWER"):
                m.d.comb += [self.done.valid.eq(1),
                             self.done.payload.status.eq(Mux(error != Status.SUCCESS, error, walker_status))]
                with m.If(self.done.ready):
                    m.d.comb += flush.eq(1)
                    m.next = "WAIT_FOR_A_JOB"
        return m
