"""The NVMe queue engine: submission entries in from host memory, completion entries out to it.

An NVMe host talks to the controller through queue pairs in its own memory.  It writes 64-byte
submission entries (``spec.NVME_SQE``) into a submission queue (SQ) and publishes its new tail through
a doorbell; the controller fetches the entries, runs the commands and writes a 16-byte completion
entry (``spec.NVME_CQE``) for each into the completion queue (CQ) the SQ names, with a phase tag that
flips on every pass over the queue, so the host tells new entries from old ones without reading a
register.  The host publishes how far it has read through the CQ's head doorbell.  This engine is
that machinery for the admin pair (queue 0) and the I/O pairs, in gateware, because the I/O path
must not wait on the firmware (docs/nvme.md, "Gateware and firmware").

What the engine keeps, per queue id, in arrays indexed by the id rather than in a block per queue:
for an SQ its base, size, head (the next entry to fetch), tail (the host's doorbell), CQ and whether
it exists; for a CQ its base, size, head (the host's doorbell), tail (the next slot to write), phase,
interrupt enable and vector, and whether it exists.  Sizes are kept 0-based (QSIZE, as the admin
commands and AQA give them), so a queue index wraps to 0 after ``size``.

How the pieces fit:

* ``config`` is how the firmware creates, deletes and resets queues, after it has validated the
  admin command (the engine trusts the values; CREATE of queue 0 is how it sets up the admin pair
  from AQA/ASQ/ACQ).  A CREATE starts the queue empty (CQ phase 1).  DELETE_SQ of a queue with
  entries the host submitted and the engine has not fetched keeps fetching them, each handed on with
  ``abort`` (NVMe completes them as aborted by the deletion), and the queue is gone after the last;
  meanwhile it is ``draining`` and its doorbell is an invalid register, as for a queue that does not
  exist.  DELETE_CQ and RESET only mark queues gone (an entry already in the ``command`` buffer is
  still handed on; a completion whose CQ is gone is taken and dropped).  Each op is applied while no
  DMA is under way and answered on ``config_done``.
* ``doorbell`` (from :class:`rtl.nvme.regs.NvmeRegisters`) is judged as NVMe asks: a doorbell of a
  queue that does not exist is an invalid register; a value beyond the queue, or a CQ head that
  releases entries not yet posted, an invalid value.  Such a write changes nothing and goes out on
  ``doorbell_error`` with the asynchronous event information number of its kind, for the firmware's
  Asynchronous Event Request.
* One sequencer owns ``dma``, since the host DMA takes one request at a time.  Between requests it
  picks, in this order: a ``config`` op; a ``completion`` whose CQ has room (and no ``irq`` waiting);
  an SQE fetch, when the ``command`` buffer is empty, from the next SQ after the last one served that
  has entries (round robin).  A fetch reads one 64-byte entry (a queue is page aligned, so an entry
  never crosses 4 KiB), loads it into the ``command`` buffer and advances the SQ head.  A post takes
  the completion, builds the CQE (SQHD: the SQ's head when the completion is taken; the CQ's current
  phase), asks to write it at the CQ tail and advances the tail at once (phase flips on wrap: the host
  may see the entry and ring its head before the write's ``done`` comes back), then, once ``done``
  comes, raises ``irq`` when the CQ has interrupts enabled (the interrupt follows the entry).
* A CQ is full when its tail is one behind its head (n entries hold n - 1).  A completion for a full
  CQ stays on ``completion`` (ready low) until a head doorbell makes room; completions behind it on the stream
  wait with it, fetching goes on.
* A DMA the host refuses (``done.error`` or a word's ``error``) cannot be reported in any CQE: the
  engine raises ``fatal`` (the controller's CSTS.CFS) and does nothing more until RESET.
"""

from amaranth import Array, Cat, Module, Mux, Signal
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

from atomflash import spec
from rtl import spec as layouts

from .hostdma import HostDmaSignature
from .regs import doorbell_layout

__all__ = ["NvmeQueueEngine", "QueueOp", "command_layout", "DOORBELL_INVALID_REGISTER", "DOORBELL_INVALID_VALUE",
           "SQE", "CQE"]

DOORBELL_INVALID_REGISTER = spec.NvmeAsyncErrorInfo.INVALID_DOORBELL_REGISTER
DOORBELL_INVALID_VALUE = spec.NvmeAsyncErrorInfo.INVALID_DOORBELL_VALUE

SQE = layouts.layout_of(spec.NVME_SQE)
CQE = layouts.layout_of(spec.NVME_CQE)
SQE_BYTES, CQE_BYTES = spec.NVME_SQE.size, spec.NVME_CQE.size
#: queues start on a memory page (CAP.CQR, and ASQ/ACQ's reserved low bits): only the page number is kept
PAGE_SHIFT = spec.NVME.PAGE_SHIFT
SQE_WORDS, CQE_WORDS = SQE_BYTES // 4, CQE_BYTES // 4
assert 1 << spec.NVME.SQES == SQE_BYTES and 1 << spec.NVME.CQES == CQE_BYTES


#: what ``config`` applies (the firmware names it in ``NVME_FW_REGS.queue_op``)
QueueOp = spec.NvmeQueueOp


def command_layout(queues: int) -> data.StructLayout:
    """A fetched entry: its SQ, the entry, and ``abort`` when its SQ is being deleted."""
    return data.StructLayout({"sqid": range(queues + 1), "sqe": SQE, "abort": 1})


def _wrap(index, last):
    """The queue index after ``index`` in a queue of ``last`` + 1 entries."""
    return Mux(index == last, 0, index + 1)


class NvmeQueueEngine(wiring.Component):
    """Fetches SQEs and posts CQEs for the admin and I/O queue pairs; see the module docstring.

    Parameters
    ----------
    queues : int
        I/O queue pairs: queue ids 1..``queues``; 0 is the admin pair.

    Ports
    -----
    doorbell : In(stream {queue, cq, value: 16})
        The host's doorbell writes, from :class:`~rtl.nvme.regs.NvmeRegisters` (``cq`` 0: SQ tail,
        1: CQ head).
    doorbell_error : Out(stream {queue, cq, kind})
        A doorbell write ignored; ``kind``: DOORBELL_INVALID_REGISTER or DOORBELL_INVALID_VALUE.
    config : In(stream {op: QueueOp, qid, base: 64, size: 16, cqid, ien, iv})
        The firmware's queue operations; ``base`` page aligned (its low bits are ignored), ``size``
        0-based; CREATE_SQ uses ``cqid``, CREATE_CQ ``ien`` and ``iv``; RESET deletes every queue and
        clears ``fatal``.
    config_done : Out(stream)
        One transfer per op, once applied.
    dma : Out(HostDmaSignature())
        Host memory: SQE reads, CQE writes.
    command : Out(stream {sqid, sqe: SQE, abort})
        Each fetched entry, in SQ order per queue, round robin across queues; ``abort``: its SQ is
        being deleted, so the command is to be completed as aborted (SQ_DELETION_ABORT), not run.
    completion : In(stream {sqid, cid, sct: 3, sc: 8, dnr: 1, result: 64})
        A command's outcome, posted on the CQ of SQ ``sqid``; held while that CQ is full.
    irq : Out(stream {vector})
        One per CQE posted on a CQ with interrupts enabled.
    fatal : Out(1)
        The host refused a DMA; the engine has stopped until RESET.
    draining : Out(queues + 1)
        Bit y: SQ y is being deleted and still has entries to hand on as aborted.
    """

    def __init__(self, *, queues: int = spec.NVME.IO_QUEUES):
        if queues < 0:
            raise ValueError("queues must be 0 or more")
        self.queues = queues
        qid = range(queues + 1)
        super().__init__({
            "doorbell": In(stream.Signature(doorbell_layout(queues))),
            "doorbell_error": Out(stream.Signature(data.StructLayout({"queue": qid, "cq": 1, "kind": 1}))),
            "config": In(stream.Signature(data.StructLayout({
                "op": QueueOp, "qid": qid, "base": 64, "size": 16, "cqid": qid, "ien": 1, "iv": qid}))),
            "config_done": Out(stream.Signature(0)),
            "dma": Out(HostDmaSignature()),
            "command": Out(stream.Signature(command_layout(queues))),
            "completion": In(stream.Signature(data.StructLayout({
                "sqid": qid, "cid": 16, "sct": 3, "sc": 8, "dnr": 1, "result": 64}))),
            "irq": Out(stream.Signature(data.StructLayout({"vector": qid}))),
            "fatal": Out(1),
            "draining": Out(queues + 1),
        })

    def elaborate(self, platform):
        m = Module()
        n = self.queues + 1
        dma, db, cfg = self.dma, self.doorbell, self.config

        def array(name, width):
            return Array(Signal(width, name=f"{name}{i}") for i in range(n))

        sq_en, sq_base, sq_last = array("sq_en", 1), array("sq_base", 64 - PAGE_SHIFT), array("sq_last", 16)
        sq_head, sq_tail, sq_cq = array("sq_head", 16), array("sq_tail", 16), array("sq_cq", range(n))
        sq_dying = Signal(n)        # DELETE_SQ with entries left: they are fetched and handed on as aborted
        cq_en, cq_base, cq_last = array("cq_en", 1), array("cq_base", 64 - PAGE_SHIFT), array("cq_last", 16)
        cq_head, cq_tail, cq_phase = array("cq_head", 16), array("cq_tail", 16), array("cq_phase", 1)
        cq_ien, cq_iv = array("cq_ien", 1), array("cq_iv", range(n))

        # -- doorbells: judged a cycle each, beside the sequencer (they touch other fields) -----------
        applying = Signal()                      # a config op changes the queues this cycle
        m.d.comb += db.ready.eq(~self.doorbell_error.valid & ~applying)
        with m.If(self.doorbell_error.ready):
            m.d.sync += self.doorbell_error.valid.eq(0)
        q, value = db.payload.queue, db.payload.value
        en = Mux(db.payload.cq, cq_en[q], sq_en[q] & ~sq_dying.bit_select(q, 1))
        last = Mux(db.payload.cq, cq_last[q], sq_last[q])
        # a CQ head may release at most the entries posted: (value - head) mod size <= (tail - head) mod size
        released, posted = Signal(17), Signal(17)
        m.d.comb += [
            released.eq(Mux(value >= cq_head[q], value - cq_head[q], value + cq_last[q] + 1 - cq_head[q])),
            posted.eq(Mux(cq_tail[q] >= cq_head[q], cq_tail[q] - cq_head[q], cq_tail[q] + cq_last[q] + 1 - cq_head[q])),
        ]
        with m.If(db.valid & db.ready):
            with m.If(~en):
                m.d.sync += [self.doorbell_error.valid.eq(1),
                             self.doorbell_error.payload.kind.eq(DOORBELL_INVALID_REGISTER)]
            with m.Elif((value > last) | (db.payload.cq & (released > posted))):
                m.d.sync += [self.doorbell_error.valid.eq(1),
                             self.doorbell_error.payload.kind.eq(DOORBELL_INVALID_VALUE)]
            with m.Elif(db.payload.cq):
                m.d.sync += cq_head[q].eq(value)
            with m.Else():
                m.d.sync += sq_tail[q].eq(value)
            m.d.sync += [self.doorbell_error.payload.queue.eq(q), self.doorbell_error.payload.cq.eq(db.payload.cq)]

        # -- round robin: the first SQ with entries after the last served, else the first of all -------
        waiting = Cat(sq_en[i] & (sq_head[i] != sq_tail[i]) for i in range(n))
        served = Signal(range(n))
        pick, later, any_later = Signal(range(n)), Signal(range(n)), Signal()
        for i in reversed(range(n)):
            with m.If(waiting[i]):
                m.d.comb += pick.eq(i)
            with m.If(waiting[i] & (i > served)):
                m.d.comb += [later.eq(i), any_later.eq(1)]
        chosen = Mux(any_later, later, pick)

        # -- the completion on offer: its CQ and whether it has room ----------------------------------
        cpl = self.completion.payload
        cpl_cq = sq_cq[cpl.sqid]
        cq_room = _wrap(cq_tail[cpl_cq], cq_last[cpl_cq]) != cq_head[cpl_cq]

        # -- the sequencer -----------------------------------------------------------------------------
        with m.If(self.config_done.ready):
            m.d.sync += self.config_done.valid.eq(0)
        with m.If(self.irq.ready):
            m.d.sync += self.irq.valid.eq(0)
        with m.If(self.command.ready):
            m.d.sync += self.command.valid.eq(0)

        qsel = Signal(range(n))                 # the SQ (fetch) or CQ (post) of the DMA under way
        sqe = Signal(SQE_BYTES * 8)
        cqe = Signal(CQE)
        word = Signal(range(SQE_WORDS))
        refused = Signal()
        cqe_words = Array(cqe.as_value()[32 * i:32 * i + 32] for i in range(CQE_WORDS))

        m.d.comb += [self.command.payload.sqe.eq(sqe), self.draining.eq(sq_dying)]

        with m.FSM():
            with m.State("IDLE"):
                with m.If(cfg.valid & ~self.config_done.valid):
                    m.d.comb += [cfg.ready.eq(1), applying.eq(1)]
                    m.d.sync += self.config_done.valid.eq(1)
                    c = cfg.payload
                    with m.Switch(c.op):
                        with m.Case(QueueOp.CREATE_CQ):
                            m.d.sync += [cq_en[c.qid].eq(1), cq_base[c.qid].eq(c.base[PAGE_SHIFT:]),
                                         cq_last[c.qid].eq(c.size),
                                         cq_head[c.qid].eq(0), cq_tail[c.qid].eq(0), cq_phase[c.qid].eq(1),
                                         cq_ien[c.qid].eq(c.ien), cq_iv[c.qid].eq(c.iv)]
                        with m.Case(QueueOp.CREATE_SQ):
                            m.d.sync += [sq_en[c.qid].eq(1), sq_base[c.qid].eq(c.base[PAGE_SHIFT:]),
                                         sq_last[c.qid].eq(c.size),
                                         sq_head[c.qid].eq(0), sq_tail[c.qid].eq(0), sq_cq[c.qid].eq(c.cqid)]
                        with m.Case(QueueOp.DELETE_SQ):
                            with m.If(sq_head[c.qid] == sq_tail[c.qid]):
                                m.d.sync += sq_en[c.qid].eq(0)
                            with m.Else():
                                m.d.sync += sq_dying.bit_select(c.qid, 1).eq(1)
                        with m.Case(QueueOp.DELETE_CQ):
                            m.d.sync += cq_en[c.qid].eq(0)
                        with m.Case(QueueOp.RESET):
                            m.d.sync += [s.eq(0) for s in (*sq_en, *cq_en, sq_dying)]
                            m.d.sync += self.fatal.eq(0)
                with m.Elif(self.fatal):
                    pass
                with m.Elif(self.completion.valid & ~cq_en[cpl_cq]):
                    m.d.comb += self.completion.ready.eq(1)          # its CQ is gone: nowhere to post it
                with m.Elif(self.completion.valid & cq_room & ~self.irq.valid):
                    m.d.comb += self.completion.ready.eq(1)
                    m.d.sync += [
                        qsel.eq(cpl_cq), word.eq(0), refused.eq(0),
                        cqe.result.eq(cpl.result), cqe.sqhd.eq(sq_head[cpl.sqid]), cqe.sqid.eq(cpl.sqid),
                        cqe.cid.eq(cpl.cid),
                        cqe.sf.eq(0), cqe.sf.p.eq(cq_phase[cpl_cq]), cqe.sf.sc.eq(cpl.sc),
                        cqe.sf.sct.eq(cpl.sct), cqe.sf.dnr.eq(cpl.dnr),
                    ]
                    m.next = "POST_REQ"
                with m.Elif(waiting.any() & ~self.command.valid):
                    m.d.sync += [qsel.eq(chosen), served.eq(chosen), word.eq(0), refused.eq(0)]
                    m.next = "FETCH_REQ"

            with m.State("FETCH_REQ"):
                m.d.comb += [dma.req.valid.eq(1), dma.req.payload.write.eq(0), dma.req.payload.bytes.eq(SQE_BYTES),
                             dma.req.payload.addr.eq((sq_base[qsel] << PAGE_SHIFT) + (sq_head[qsel] << spec.NVME.SQES))]
                with m.If(dma.req.ready):
                    m.next = "FETCH_DATA"
            with m.State("FETCH_DATA"):
                m.d.comb += dma.rdata.ready.eq(1)
                with m.If(dma.rdata.valid):
                    m.d.sync += [sqe.eq(Cat(sqe[32:], dma.rdata.payload.data)), word.eq(word + 1),
                                 refused.eq(refused | dma.rdata.payload.error)]
                    with m.If(dma.rdata.payload.last):
                        m.next = "FETCH_DONE"
            with m.State("FETCH_DONE"):
                m.d.comb += dma.done.ready.eq(1)
                with m.If(dma.done.valid):
                    # an entry of the wrong length is as untrustworthy as a refused one
                    with m.If(refused | dma.done.payload.error | (word != 0)):
                        m.d.sync += self.fatal.eq(1)
                    with m.Else():
                        next_head = _wrap(sq_head[qsel], sq_last[qsel])
                        m.d.sync += [self.command.valid.eq(1), self.command.payload.sqid.eq(qsel),
                                     self.command.payload.abort.eq(sq_dying.bit_select(qsel, 1)),
                                     sq_head[qsel].eq(next_head)]
                        with m.If(sq_dying.bit_select(qsel, 1) & (next_head == sq_tail[qsel])):
                            m.d.sync += [sq_en[qsel].eq(0), sq_dying.bit_select(qsel, 1).eq(0)]
                    m.next = "IDLE"

            with m.State("POST_REQ"):
                m.d.comb += [dma.req.valid.eq(1), dma.req.payload.write.eq(1), dma.req.payload.bytes.eq(CQE_BYTES),
                             dma.req.payload.addr.eq((cq_base[qsel] << PAGE_SHIFT) + (cq_tail[qsel] << spec.NVME.CQES))]
                with m.If(dma.req.ready):
                    # posted from here: the host may read the entry and ring its head before our done
                    m.d.sync += cq_tail[qsel].eq(_wrap(cq_tail[qsel], cq_last[qsel]))
                    with m.If(cq_tail[qsel] == cq_last[qsel]):
                        m.d.sync += cq_phase[qsel].eq(~cq_phase[qsel])
                    m.next = "POST_DATA"
            with m.State("POST_DATA"):
                m.d.comb += [dma.wdata.valid.eq(1), dma.wdata.payload.data.eq(cqe_words[word[:2]]),
                             dma.wdata.payload.last.eq(word == CQE_WORDS - 1)]
                with m.If(dma.wdata.ready):
                    m.d.sync += word.eq(word + 1)
                    with m.If(word == CQE_WORDS - 1):
                        m.next = "POST_DONE"
            with m.State("POST_DONE"):
                m.d.comb += dma.done.ready.eq(1)
                with m.If(dma.done.valid):
                    with m.If(dma.done.payload.error):
                        m.d.sync += self.fatal.eq(1)
                    with m.Elif(cq_ien[qsel]):
                        m.d.sync += [self.irq.valid.eq(1), self.irq.payload.vector.eq(cq_iv[qsel])]
                    m.next = "IDLE"
        return m
