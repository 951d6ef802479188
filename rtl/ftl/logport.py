"""The log writer's request port, shared: whose page goes next, and whose completion is whose.

Three requesters write log pages:

* the **executor** (host data and record pages).  It issues a group's members back to back and
  raises ``host_lock`` meanwhile: nobody else's page may come between them (an atomic group's vseqs
  are consecutive because its pages take consecutive seqs);
* the **relocator** (GC copies);
* **PAD** pages (:mod:`rtl.ftl.pairing`): filler for an MLC lower page left exposed, only when
  neither of the others wanted the writer as the port chose.  A PAD page names its die (``force``),
  carries no data and only an OOB record of kind PAD.

When the executor and the relocator both want the writer and the executor holds no lock, they take
turns page by page, so neither starves the other.

A requester is known by its completion's tag: the executor's tags stay below :data:`PAD_TAG`
(``HOST_TAG_BITS`` bits); the arbiter sets :data:`RELOC_TAG` on the relocator's pages and stamps PAD
pages with :data:`PAD_TAG`.  Completions go back by those bits: the executor's and the relocator's to
them, PAD pages' nowhere (:class:`~rtl.ftl.pairing.PairedPages`, between the writer and this port,
has already taken what it needed from them).

A program that failed (not a bus error on the page's data, not a page never found) is also the
firmware's business: its page goes out on ``failed`` (the block is to be retired; the requester
re-issues the data itself).  The counters count pages the writer found a page for (``allocated``
while it takes the request).

The request leaves from registers, one at a time: the port takes a page only while it holds none,
and the writer takes it from there.  Whose page goes is chosen a cycle ahead, from the requesters'
``valid`` and the lock, into registers, so a requester's ``ready`` never depends on another's
``valid`` (the chain ran through the executor, the relocator and the port twice in one clock).  A
lock raised with a group's first page therefore may still see a page chosen before it go first;
between the group's pages nothing else is chosen.  Deciding whose page goes (the PAD offer, the
executor's lock) and taking a page (the allocator's pick, the writer's handshake) made one path across the core,
and an executor that reads the allocator's next seq when the port takes its page still reads the
seq that page gets: nothing can take a seq between the two.
"""

from amaranth import Module, Mux, Signal
from amaranth.lib import data, fifo, stream, wiring
from amaranth.lib.wiring import In, Out

from atomflash import spec
from atomflash.spec import NandResult

from .logwriter import PAGE_DONE, PAGE_WRITE

__all__ = ["LogPortArbiter", "HOST_TAG_BITS", "PAD_TAG", "RELOC_TAG"]

HOST_TAG_BITS = 14       # the executor's tags: 0 .. 2**14 - 1
PAD_TAG = 1 << 14        # PAD pages
RELOC_TAG = 1 << 15      # the relocator's GC copies
FAILED_DEPTH = 8         # failed programs buffered for the firmware


class LogPortArbiter(wiring.Component):
    """The executor, the relocator and PAD pages onto one log writer; see the module docstring.

    Parameters
    ----------
    die_bits : int
        Bits of a die's number (:class:`~rtl.ftl.allocator.PageAllocator`'s).

    Ports
    -----
    host : In(stream of PAGE_WRITE) / host_lock : In(1) / host_done : Out(stream of PAGE_DONE)
        The executor: its pages (tags below ``PAD_TAG``), the lock it holds while it issues a group,
        its completions.
    reloc : In(stream of PAGE_WRITE) / reloc_done : Out(stream of PAGE_DONE)
        The relocator (its tag's ``RELOC_TAG`` bit is set here).
    pad : In(stream of {die}) / idle : Out(1)
        A PAD page wanted on a die; ``idle``: neither the executor nor the relocator wants the writer
        (nor has a page waiting in the request register).
    req : Out(stream of PAGE_WRITE) / force : Out(1) / force_die : Out(die_bits)
        The log writer's request port, from registers; ``force``: the page must come from ``force_die``
        (a PAD page).
    allocated : In(1)
        The writer found a page for the request it takes now (its allocation is valid).
    pad_now : Out(1)
        The request on ``req`` is a PAD page.
    done : In(stream of PAGE_DONE)
        Completions from the writer (through :class:`~rtl.ftl.pairing.PairedPages`).
    failed : Out(stream of 32) / failed_lost : Out(1)
        The PPAs of failed programs, for the firmware (``FAILED_DEPTH`` of them buffered); ``failed_lost``:
        one found the buffer full (sticky).
    host_write_pages, record_pages, pad_pages : Out(32)
        The executor's data pages and record pages, and PAD pages, that got a page since reset.
    """

    def __init__(self, *, die_bits: int):
        self.die_bits = die_bits
        super().__init__({
            "host": In(stream.Signature(PAGE_WRITE)),
            "host_lock": In(1),
            "host_done": Out(stream.Signature(PAGE_DONE)),
            "reloc": In(stream.Signature(PAGE_WRITE)),
            "reloc_done": Out(stream.Signature(PAGE_DONE)),
            "pad": In(stream.Signature(data.StructLayout({"die": die_bits}))),
            "idle": Out(1),
            "req": Out(stream.Signature(PAGE_WRITE)),
            "force": Out(1),
            "force_die": Out(die_bits),
            "allocated": In(1),
            "pad_now": Out(1),
            "done": In(stream.Signature(PAGE_DONE)),
            "failed": Out(stream.Signature(32)),
            "failed_lost": Out(1),
            "host_write_pages": Out(32),
            "record_pages": Out(32),
            "pad_pages": Out(32),
        })

    def elaborate(self, platform):
        m = Module()
        host, reloc = self.host, self.reloc
        req = self.req

        # who goes: the relocator when the executor holds no lock and does not want the writer, or
        # it is the relocator's turn; PAD pages when neither wants it.  The choice is made a cycle ahead
        # into a register, so each requester's ``ready`` comes from registers (the port's empty request
        # register and the choice) and never from another requester's ``valid``; a page is taken while
        # the request register is empty and the chosen requester still offers it.
        prefer_reloc = Signal()
        choose_reloc, choose_pad = Signal(), Signal()
        chose_host, chose_reloc, chose_pad = Signal(), Signal(), Signal()
        accept = Signal()
        offer = Signal(PAGE_WRITE)
        req_reloc = Signal()          # the request held is the relocator's
        m.d.comb += [accept.eq(~req.valid),
                     choose_reloc.eq(reloc.valid & ~self.host_lock & (~host.valid | prefer_reloc)),
                     choose_pad.eq(self.pad.valid & ~reloc.valid & ~host.valid & ~self.host_lock),
                     self.idle.eq(~reloc.valid & ~host.valid & ~(req.valid & ~self.pad_now)),
                     self.force.eq(req.valid & self.pad_now)]
        m.d.sync += [chose_reloc.eq(choose_reloc), chose_pad.eq(choose_pad),
                     chose_host.eq(host.valid & ~choose_reloc)]
        with m.If(chose_pad):
            m.d.comb += [offer.tag.eq(PAD_TAG), offer.no_data.eq(1), offer.oob.kind.eq(spec.Kind.PAD),
                         self.pad.ready.eq(accept)]
        with m.Elif(chose_reloc):
            m.d.comb += [offer.eq(reloc.payload), offer.tag.eq(reloc.payload.tag | RELOC_TAG),
                         reloc.ready.eq(accept)]
        with m.Elif(chose_host):
            m.d.comb += [offer.eq(host.payload), host.ready.eq(accept)]
        offered = (chose_pad & self.pad.valid) | (chose_reloc & reloc.valid) | (chose_host & host.valid)
        with m.If(req.valid & req.ready):
            m.d.sync += req.valid.eq(0)
        with m.If(accept & offered):
            m.d.sync += [req.valid.eq(1), req.payload.eq(offer), self.pad_now.eq(chose_pad), req_reloc.eq(chose_reloc),
                         self.force_die.eq(self.pad.payload.die),
                         prefer_reloc.eq(~chose_reloc)]

        # the counters, a cycle later: whether the writer found a page is known late in the cycle
        went_pad, went_record, went_host = Signal(), Signal(), Signal()
        taken = req.valid & req.ready & self.allocated     # not allocated: the writer gave up
        from_host = taken & ~self.pad_now & ~req_reloc
        m.d.sync += [went_pad.eq(taken & self.pad_now), went_record.eq(from_host & req.payload.record),
                     went_host.eq(from_host & ~req.payload.record)]
        with m.If(went_pad):
            m.d.sync += self.pad_pages.eq(self.pad_pages + 1)
        with m.If(went_record):
            m.d.sync += self.record_pages.eq(self.record_pages + 1)
        with m.If(went_host):
            m.d.sync += self.host_write_pages.eq(self.host_write_pages + 1)

        # completions, by the tag's requester bits
        done = self.done
        reloc_done = (done.payload.tag & RELOC_TAG) != 0
        pad_done = (done.payload.tag & PAD_TAG) != 0
        m.d.comb += [self.host_done.payload.eq(done.payload),
                     self.reloc_done.payload.eq(done.payload),
                     self.host_done.valid.eq(done.valid & ~reloc_done & ~pad_done),
                     self.reloc_done.valid.eq(done.valid & reloc_done),
                     done.ready.eq(Mux(pad_done, 1, Mux(reloc_done, self.reloc_done.ready, self.host_done.ready)))]

        # failed programs, for the firmware
        m.submodules.failed = failed = fifo.SyncFIFOBuffered(width=32, depth=FAILED_DEPTH)
        prog_failed = (done.valid & done.ready & (done.payload.result != NandResult.OK) & ~done.payload.dma_error
                       & ~done.payload.no_page)
        m.d.comb += [failed.w_data.eq(done.payload.ppa.as_value()), failed.w_en.eq(prog_failed),
                     self.failed.valid.eq(failed.r_rdy), self.failed.payload.eq(failed.r_data),
                     failed.r_en.eq(self.failed.ready)]
        with m.If(prog_failed & ~failed.w_rdy):
            m.d.sync += self.failed_lost.eq(1)
        return m
