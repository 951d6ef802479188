"""The PRP walker: a command's data pointers (PRP1, PRP2) as the contiguous pieces of host memory they name.

NVMe 2.0's PRP rules with 4 KiB memory pages (``spec.NVME.PAGE_SHIFT``): the data starts at PRP1, which
may lie anywhere dword aligned in its page, and runs to the end of that page or the transfer's end.
A transfer that needs exactly one more page has it in PRP2; one that needs more has in PRP2 a pointer
to a PRP list (anywhere 8-byte aligned in its page), whose 64-bit entries name the following pages,
each page aligned.  The last entry of a list page points to the next list page when more entries
remain than the page has left; otherwise it is a data page like the others.

The walker emits the transfer as ``segments``, each inside one memory page, in order: PRP1 to the end
of its page (or the whole length), then a page per entry, the last one cut to the length.  List
entries are read through ``dma`` ``batch`` at a time into a ring of ``2 * batch`` entries, so the next
batch arrives while the consumer drains the previous; a read never runs past the end of its list
page nor past the entries the transfer needs.  The entries of a read are kept only once its
``done`` says the host answered it (a refused read's words are not to be trusted).

Statuses (``done``, the atomflash ``Status``; ``spec.nvme_status_of`` gives the NVMe one):

* SUCCESS, after the last segment was taken (a zero-length job: at once, with no segment);
* MISALIGNED_BUFFER (NVMe PRP_OFFSET_INVALID): PRP1 not dword aligned, PRP2 not page aligned as the
  second page or not 8-byte aligned as a list pointer (these before any segment), or a list entry
  (data page or next list page) not page aligned: the segments before that entry are emitted, none
  after it;
* DATA_TRANSFER_ERROR: the host refused a list read: the segments of the entries before that read
  are emitted, none after.

``done`` comes only once no list read is outstanding, so the walker is then ready for the next job.
"""

from amaranth import Cat, Module, Mux, Signal
from amaranth.lib import data, stream, wiring
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out

from atomflash import spec
from atomflash.spec import Status

from .hostdma import HostDmaSignature

__all__ = ["PrpWalker", "JOB", "SEGMENT", "DONE", "MAX_BYTES"]

PAGE_SHIFT = spec.NVME.PAGE_SHIFT
PAGE = 1 << PAGE_SHIFT
ENTRIES_PER_PAGE = PAGE // 8
LENGTH_BITS = 24
MAX_BYTES = (1 << LENGTH_BITS) - 1      # 16 MiB - 1: far above MDTS, and room for chained lists

JOB = data.StructLayout({"prp1": 64, "prp2": 64, "bytes": LENGTH_BITS})
SEGMENT = data.StructLayout({"addr": 64, "bytes": PAGE_SHIFT + 1, "last": 1})
DONE = data.StructLayout({"status": 15})


class PrpWalker(wiring.Component):
    """Walks one job's PRPs into segments; see the module docstring.

    Parameters
    ----------
    batch : int
        List entries per DMA read (a power of two, 1 .. 512); the ring holds two batches.

    Ports
    -----
    job : In(stream {prp1: 64, prp2: 64, bytes: 24})
        A transfer of ``bytes`` (0 .. ``MAX_BYTES``) at PRP1/PRP2.
    segments : Out(stream {addr: 64, bytes: 13, last: 1})
        The transfer's pieces in order: ``bytes`` 1 .. 4096 at ``addr``, inside one memory page;
        ``last`` on the transfer's final piece (never after an error).
    done : Out(stream {status: 15})
        The job's ``Status``, after its last segment was taken.
    dma : Out(HostDmaSignature)
        Host memory, for the PRP lists (reads only).
    """

    def __init__(self, *, batch: int = 32):
        if batch & (batch - 1) or not 1 <= batch <= ENTRIES_PER_PAGE:
            raise ValueError(f"batch {batch} is not a power of two from 1 to {ENTRIES_PER_PAGE}")
        self.batch = batch
        super().__init__({
            "job": In(stream.Signature(JOB)),
            "segments": Out(stream.Signature(SEGMENT)),
            "done": Out(stream.Signature(DONE)),
            "dma": Out(HostDmaSignature()),
        })

    def elaborate(self, platform):
        m = Module()
        B = self.batch
        depth = 2 * B
        ring_bits = (depth - 1).bit_length()
        dma = self.dma

        # the ring of fetched entries: written at `staged`, visible to the emitter up to `committed`
        m.submodules.ring = ring = Memory(shape=64, depth=depth, init=[])
        ring_w = ring.write_port()
        ring_r = ring.read_port(domain="comb")
        staged = Signal(ring_bits + 1)
        committed = Signal(ring_bits + 1)
        taken = Signal(ring_bits + 1)
        m.d.comb += ring_r.addr.eq(taken[:ring_bits])
        free = Signal(ring_bits + 1)
        m.d.comb += free.eq(depth - (staged - taken)[:ring_bits + 1])

        # between the emitter and the fetcher
        start = Signal()                   # emitter: fetch `list_pages` entries from the list at PRP2
        abort = Signal()                   # emitter: stop fetching (once no read is outstanding)
        clear = Signal()                   # emitter: the job is over, back to idle
        fetch_failed = Signal()
        fetch_status = Signal(15)
        quiet = Signal()                   # fetcher: no read outstanding, none to come

        # -- the emitter: segments in order --------------------------------------------------------
        job = Signal(JOB)
        first = Signal(PAGE_SHIFT + 1)     # bytes in PRP1's page
        rest = Signal(LENGTH_BITS)         # bytes after the segments emitted
        list_pages = Signal(LENGTH_BITS - PAGE_SHIFT + 1)   # pages after PRP1's
        status = Signal(15)
        seg = self.segments

        page_room = Signal(PAGE_SHIFT + 1)
        after_first = Signal(LENGTH_BITS)
        m.d.comb += [page_room.eq(PAGE - job.prp1[:PAGE_SHIFT]),
                     after_first.eq(Mux(job.bytes > page_room, job.bytes - page_room, 0))]
        pages_after_first = (after_first + PAGE - 1)[PAGE_SHIFT:]

        def answer(code):
            m.d.sync += status.eq(code)
            m.next = "STOP"

        with m.FSM(name="emitter"):
            with m.State("WAIT_FOR_A_JOB"):
                m.d.comb += self.job.ready.eq(1)
                with m.If(self.job.valid):
                    m.d.sync += job.eq(self.job.payload)
                    m.next = "CHECK_THE_POINTERS"
            with m.State("CHECK_THE_POINTERS"):
                m.d.sync += [first.eq(Mux(job.bytes > page_room, page_room, job.bytes)), rest.eq(after_first),
                             list_pages.eq(pages_after_first)]
                prp2_misaligned = Mux(pages_after_first == 1, job.prp2[:PAGE_SHIFT] != 0, job.prp2[:3] != 0)
                with m.If(job.bytes == 0):
                    answer(Status.SUCCESS)
                with m.Elif((job.prp1[:2] != 0) | ((pages_after_first != 0) & prp2_misaligned)):
                    answer(Status.MISALIGNED_BUFFER)
                with m.Else():
                    m.d.comb += start.eq(pages_after_first > 1)     # the list comes while PRP1's page goes
                    m.next = "EMIT_PRP1"
            with m.State("EMIT_PRP1"):
                m.d.comb += [seg.valid.eq(1), seg.payload.addr.eq(job.prp1), seg.payload.bytes.eq(first),
                             seg.payload.last.eq(rest == 0)]
                with m.If(seg.ready):
                    with m.If(rest == 0):
                        answer(Status.SUCCESS)
                    with m.Elif(list_pages == 1):
                        m.next = "EMIT_PRP2"
                    with m.Else():
                        m.next = "EMIT_THE_LISTS_PAGES"
            with m.State("EMIT_PRP2"):
                m.d.comb += [seg.valid.eq(1), seg.payload.addr.eq(job.prp2), seg.payload.bytes.eq(rest),
                             seg.payload.last.eq(1)]
                with m.If(seg.ready):
                    answer(Status.SUCCESS)
            with m.State("EMIT_THE_LISTS_PAGES"):
                entry = ring_r.data
                final = rest <= PAGE
                with m.If(committed != taken):
                    with m.If(entry[:PAGE_SHIFT] != 0):
                        answer(Status.MISALIGNED_BUFFER)
                    with m.Else():
                        m.d.comb += [seg.valid.eq(1), seg.payload.addr.eq(entry),
                                     seg.payload.bytes.eq(Mux(final, rest, PAGE)), seg.payload.last.eq(final)]
                        with m.If(seg.ready):
                            m.d.sync += [taken.eq(taken + 1), rest.eq(Mux(final, 0, rest - PAGE))]
                            with m.If(final):
                                answer(Status.SUCCESS)
                with m.Elif(fetch_failed):
                    answer(fetch_status)
            with m.State("STOP"):
                m.d.comb += abort.eq(1)
                with m.If(quiet):
                    m.next = "ANSWER"
            with m.State("ANSWER"):
                m.d.comb += [self.done.valid.eq(1), self.done.payload.status.eq(status)]
                with m.If(self.done.ready):
                    m.d.comb += clear.eq(1)
                    m.d.sync += [staged.eq(0), committed.eq(0), taken.eq(0)]
                    m.next = "WAIT_FOR_A_JOB"

        # -- the fetcher: list entries into the ring -----------------------------------------------
        list_ptr = Signal(64)              # the next entry to read
        needed = Signal(LENGTH_BITS - PAGE_SHIFT + 1)   # data entries not yet received
        page_left = Signal(range(ENTRIES_PER_PAGE + 1))  # entries to read from this list page
        chained = Signal()                 # this list page ends with a pointer to the next
        count = Signal(range(B + 1))       # entries in the read outstanding
        received = Signal(range(B))
        high_word = Signal()
        low = Signal(32)
        refused = Signal()
        next_list = Signal(64)

        room = Signal(range(ENTRIES_PER_PAGE + 1))       # entries from list_ptr to its page's end
        m.d.comb += room.eq(ENTRIES_PER_PAGE - list_ptr[3:PAGE_SHIFT])
        batch_size = Mux(page_left > B, B, page_left)

        def fail(code):
            m.d.sync += [fetch_failed.eq(1), fetch_status.eq(code)]
            m.next = "FINISHED"

        with m.FSM(name="fetcher"):
            with m.State("IDLE"):
                m.d.comb += quiet.eq(1)
                with m.If(start):
                    m.d.sync += [list_ptr.eq(job.prp2), needed.eq(pages_after_first)]
                    m.next = "PLAN_THE_LIST_PAGE"
            with m.State("PLAN_THE_LIST_PAGE"):
                more = needed > room
                m.d.sync += [chained.eq(more), page_left.eq(Mux(more, room, needed))]
                m.next = "WAIT_FOR_ROOM"
            with m.State("WAIT_FOR_ROOM"):
                with m.If(abort):
                    m.next = "FINISHED"
                with m.Elif(free >= batch_size):
                    m.d.sync += count.eq(batch_size)
                    m.next = "REQUEST"
            with m.State("REQUEST"):
                m.d.comb += [dma.req.valid.eq(1), dma.req.payload.write.eq(0), dma.req.payload.addr.eq(list_ptr),
                             dma.req.payload.bytes.eq(count << 3)]
                with m.If(dma.req.ready):
                    m.d.sync += [list_ptr.eq(list_ptr + (count << 3)), page_left.eq(page_left - count),
                                 received.eq(0), high_word.eq(0), refused.eq(0)]
                    m.next = "RECEIVE"
            with m.State("RECEIVE"):
                m.d.comb += dma.rdata.ready.eq(1)
                word = dma.rdata.payload
                is_final = received == count - 1
                is_chain = chained & (page_left == 0) & is_final
                with m.If(dma.rdata.valid):
                    m.d.sync += [high_word.eq(~high_word), refused.eq(refused | word.error)]
                    with m.If(~high_word):
                        m.d.sync += low.eq(word.data)
                    with m.Else():
                        m.d.sync += received.eq(received + 1)
                        with m.If(is_chain):
                            m.d.sync += next_list.eq(Cat(low, word.data))
                        with m.Else():
                            m.d.comb += [ring_w.addr.eq(staged[:ring_bits]), ring_w.data.eq(Cat(low, word.data)),
                                         ring_w.en.eq(1)]
                            m.d.sync += [staged.eq(staged + 1), needed.eq(needed - 1)]
                        with m.If(is_final):
                            m.next = "WAIT_FOR_DONE"
            with m.State("WAIT_FOR_DONE"):
                m.d.comb += dma.done.ready.eq(1)
                with m.If(dma.done.valid):
                    with m.If(refused | dma.done.payload.error):
                        m.d.sync += staged.eq(committed)
                        fail(Status.DATA_TRANSFER_ERROR)
                    with m.Else():
                        m.d.sync += committed.eq(staged)
                        with m.If(abort):
                            m.next = "FINISHED"
                        with m.Elif(page_left != 0):
                            m.next = "WAIT_FOR_ROOM"
                        with m.Elif(chained):
                            with m.If(next_list[:PAGE_SHIFT] != 0):
                                fail(Status.MISALIGNED_BUFFER)
                            with m.Else():
                                m.d.sync += list_ptr.eq(next_list)
                                m.next = "PLAN_THE_LIST_PAGE"
                        with m.Else():
                            m.next = "FINISHED"
            with m.State("FINISHED"):
                m.d.comb += quiet.eq(1)
                with m.If(clear):
                    m.d.sync += fetch_failed.eq(0)
                    m.next = "IDLE"
        return m
