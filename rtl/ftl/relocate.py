"""GC relocation hook: "relocate page P" for the firmware's garbage collector.

The firmware picks a victim block and, for each page it believes valid, asks
for a relocation.  This block reads the page (ECC-corrected) into its own
page-buffer slot, copies the data to a scratch page in SoC memory
(``gc_buf``), takes the page's OOB record from the slot, and has the log
writer program a copy: kind ``GC_COPY``, every other field kept -- lba,
flags, group fields, tid and above all ``vseq`` (``keep_vseq``) -- with a new
seq.  Then, holding the map port, it rebinds with a compare-and-swap: the
LBA moves to the copy only if the map still points at P.  A host write that
bound the LBA meanwhile therefore wins (``RACED``; the copy is garbage), and
one published later simply supersedes the copy, which recovery also agrees
with because the copy keeps its old vseq.

Results on ``done``: ``MOVED`` (bound to ``new_ppa``), ``RACED``,
``READ_FAILED`` (the page could not be read: nothing programmed),
``PROGRAM_FAILED`` (the copy's program failed: the map is untouched; the
firmware retries).  The OOB record is trusted as ECC returns it; the
firmware only relocates data pages the map points at -- or, for a
transaction's or an append's page (``OOB.flags.tx`` / ``append``), one a pending binding may name: when
the map CAS misses, a ``CAS`` in the pending-bindings table (still holding
the map port, so a commit walk cannot move the binding between the two)
moves the staged binding to the copy.  Such a page is *probed* first (a
pending ``CAS`` onto itself): one no entry names is garbage (an aborted or
released page, a superseded staged write) and answers ``RACED`` without a
copy, so a victim full of dead transaction pages costs no programs.

A page a REMAP bound keeps the OOB of its APPEND (no LBA), so only the map
knows its LBA: the firmware finds it (a pass over the L2P table) and names it
in the request (``by_lba``).  The map CAS then uses that LBA, and the copy's
OOB carries it, so the next relocation of the copy needs no search;
recovery finds a version by vseq, and an append's copy may name its LBA.
"""

from amaranth import Array, Module, Mux, Signal
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

from atomflash import spec
from atomflash.spec import Kind, NandOp, NandResult
from rtl import spec as layouts
from rtl.lib import wishbone
from rtl.nand.channel import ChannelParams
from rtl.nand.pagebuf import HOST_READ_LATENCY

from .blocktable import REBIND
from .bufport import ArbitratedBufferSignature, held_grant
from .dma import BufferDMA, Direction
from .logwriter import PAGE_DONE, PAGE_WRITE
from .mapcache import MapOp
from .mapport import MapPortSignature
from .nandport import page_desc
from .pending import PendingOp, PendingUserSignature

__all__ = ["Relocator", "RelocResult"]


RelocResult = layouts.hw_enum(spec.RelocResult, 2)  # firmware reads it in ftl.reloc_done


class Relocator(wiring.Component):
    """Relocates one page at a time; see the module docstring.

    Ports
    -----
    req : In(stream of :meth:`req_layout`)
        ``ppa``, ``tag``; ``by_lba``: rebind ``lba`` (not the OOB's) and stamp it in the copy.
    done : Out(stream {tag, result: RelocResult, new_ppa})
    gc_buf : In(32)
        Scratch page in SoC memory (page_data bytes).
    map : Out(MapPortSignature)
    rebind : Out(stream of REBIND)
    desc : Out(stream of NAND_DESC) / ncpl : In(stream of NAND_CPL)
    buf : Out(ArbitratedBufferSignature).array(channels)
    bus : Out(wishbone.Signature)
    page : Out(stream of PAGE_WRITE) / page_done : In(stream of PAGE_DONE)
        The log writer, through :class:`~rtl.ftl.logport.LogPortArbiter` (which tags the pages as the
        relocator's).
    pending : Out(PendingUserSignature)
        CAS of a transaction's staged page.
    """

    def __init__(self, params: ChannelParams, channels: int, slot_words: int, *, slot: int, lba_bits: int = 32,
                 pending_entries: int = spec.LIMITS.MAX_PENDING, owners: int = spec.LIMITS.MAX_OPEN_TX):
        self.p, self.channels, self.slot_words, self.slot = params, channels, slot_words, slot
        self.layout = spec.nand_page_layout(params.profile)
        self.buf_addr_width = (params.slots * slot_words - 1).bit_length()
        super().__init__({
            "req": In(stream.Signature(self.req_layout())),
            "done": Out(stream.Signature(self.done_layout())),
            "gc_buf": In(32),
            "map": Out(MapPortSignature(lba_bits)),
            "rebind": Out(stream.Signature(REBIND)),
            "desc": Out(stream.Signature(layouts.NAND_DESC)),
            "ncpl": In(stream.Signature(layouts.NAND_CPL)),
            "buf": Out(ArbitratedBufferSignature(self.buf_addr_width)).array(channels),
            "bus": Out(wishbone.Signature(addr_width=30, data_width=32, burst=True)),
            "page": Out(stream.Signature(PAGE_WRITE)),
            "page_done": In(stream.Signature(PAGE_DONE)),
            "pending": Out(PendingUserSignature(pending_entries, owners)),
        })

    @staticmethod
    def req_layout():
        return data.StructLayout({"ppa": 32, "tag": 16, "lba": 32, "by_lba": 1})

    @staticmethod
    def done_layout():
        return data.StructLayout({"tag": 16, "result": RelocResult, "new_ppa": 32})

    def elaborate(self, platform):
        m = Module()
        lay = self.layout
        page_words = self.p.profile.page_data // 4
        m.submodules.dma = dma = BufferDMA(self.buf_addr_width)
        wiring.connect(m, wiring.flipped(self.bus), dma.bus)

        tag = Signal(16)
        by_lba = Signal()
        given_lba = Signal(32)
        old = Signal(layouts.PPA)
        new = Signal(32)
        result = Signal(RelocResult)
        oob = Signal(layouts.OOB)
        f = old.ppa
        slot_base = self.slot * self.slot_words
        holding = Signal()
        rd_addr = Signal(self.buf_addr_width)
        use_dma = Signal()
        for c in range(self.channels):
            port = self.buf[c]
            m.d.comb += port.request.eq(holding & (f.channel == c))
            with m.If(f.channel == c):
                m.d.comb += dma.buf.r_data.eq(port.port.r_data)
                with m.If(use_dma):
                    m.d.comb += [port.port.addr.eq(dma.buf.addr), port.port.w_en.eq(dma.buf.w_en),
                                 port.port.w_data.eq(dma.buf.w_data)]
                with m.Else():
                    m.d.comb += port.port.addr.eq(rd_addr)
        granted = held_grant(m, self.buf, f.channel, holding)
        r_data = Array(b.port.r_data for b in self.buf)[f.channel]

        # the OOB record sits at a byte column; read the words that cover it
        rec_first = lay.oob_record_col
        first_word = rec_first // 4
        shift = 8 * (rec_first % 4)
        n_words = (rec_first % 4 + spec.OOB.size + 3) // 4
        raw = Signal(32 * n_words)
        word = Signal(range(max(n_words, page_words) + 2))
        oob_wait = Signal(range(HOST_READ_LATENCY))     # cycles until the OOB word read is on r_data

        with m.FSM():
            with m.State("IDLE"):
                m.d.comb += self.req.ready.eq(1)
                with m.If(self.req.valid):
                    m.d.sync += [old.eq(self.req.payload.ppa), tag.eq(self.req.payload.tag),
                                 by_lba.eq(self.req.payload.by_lba), given_lba.eq(self.req.payload.lba)]
                    m.next = "READ"
            with m.State("READ"):
                d = self.desc.payload
                m.d.comb += [*page_desc(d, NandOp.READ, f, length=lay.user_bytes, slot=self.slot),
                             self.desc.valid.eq(1)]
                with m.If(self.desc.ready):
                    m.next = "READ_WAIT"
            with m.State("READ_WAIT"):
                m.d.comb += self.ncpl.ready.eq(1)
                with m.If(self.ncpl.valid):
                    with m.If(self.ncpl.payload.result == NandResult.OK):
                        m.next = "GRANT"
                    with m.Else():
                        m.d.sync += result.eq(RelocResult.READ_FAILED)
                        m.next = "DONE"
            with m.State("GRANT"):
                m.d.comb += holding.eq(1)
                with m.If(granted):
                    m.d.sync += word.eq(0)
                    m.next = "OOB_ADDR"
            # the OOB words: address, then data HOST_READ_LATENCY cycles later
            with m.State("OOB_ADDR"):
                m.d.comb += [holding.eq(1), rd_addr.eq(slot_base + first_word + word)]
                m.d.sync += oob_wait.eq(HOST_READ_LATENCY - 1)
                m.next = "OOB_DATA"
            with m.State("OOB_DATA"):
                m.d.comb += [holding.eq(1), rd_addr.eq(slot_base + first_word + word)]
                with m.If(oob_wait != 0):
                    m.d.sync += oob_wait.eq(oob_wait - 1)
                with m.Else():
                    m.d.sync += [raw.word_select(word, 32).eq(r_data), word.eq(word + 1)]
                    with m.If(word == n_words - 1):
                        m.next = "COPY"
                    with m.Else():
                        m.next = "OOB_ADDR"
            with m.State("COPY"):
                m.d.sync += oob.eq(raw[shift:shift + spec.OOB.size * 8])
                m.d.comb += [holding.eq(1), use_dma.eq(1), dma.req.valid.eq(1),
                             dma.req.payload.direction.eq(Direction.TO_MEMORY),
                             dma.req.payload.mem_addr.eq(self.gc_buf),
                             dma.req.payload.buf_addr.eq(slot_base), dma.req.payload.words.eq(page_words)]
                with m.If(dma.req.ready):
                    m.next = "COPY_WAIT"
            with m.State("COPY_WAIT"):
                m.d.comb += [holding.eq(1), use_dma.eq(1), dma.done.ready.eq(1)]
                with m.If(dma.done.valid):
                    with m.If(dma.done.payload.error):
                        m.d.sync += result.eq(RelocResult.READ_FAILED)
                        m.next = "DONE"
                    with m.Elif((oob.flags.tx | oob.flags.append) & ~by_lba):
                        m.next = "PROBE"
                    with m.Else():
                        m.next = "PROGRAM"
            # a staged page no pending entry names is garbage: no copy (the map CAS below decides the rest)
            with m.State("PROBE"):
                p = self.pending.req
                m.d.comb += [p.valid.eq(1), p.payload.op.eq(PendingOp.CAS), p.payload.ppa.eq(old.as_value()),
                             p.payload.new.eq(old.as_value())]
                with m.If(p.ready):
                    m.next = "PROBE_RESP"
            with m.State("PROBE_RESP"):
                m.d.comb += self.pending.resp.ready.eq(1)
                with m.If(self.pending.resp.valid):
                    with m.If(self.pending.resp.payload.hit):
                        m.next = "PROGRAM"
                    with m.Else():
                        m.next = "PROBE_LOCK"
            # ... unless the map names it (a committed transaction's page)
            with m.State("PROBE_LOCK"):
                m.d.comb += self.map.lock.eq(1)
                with m.If(self.map.grant):
                    m.next = "PROBE_MAP"
            with m.State("PROBE_MAP"):
                r = self.map.req.payload
                m.d.comb += [self.map.lock.eq(1), r.op.eq(MapOp.READ), r.lba.eq(oob.lba), self.map.req.valid.eq(1)]
                with m.If(self.map.req.ready):
                    m.next = "PROBE_MAP_RESP"
            with m.State("PROBE_MAP_RESP"):
                m.d.comb += [self.map.lock.eq(1), self.map.resp.ready.eq(1)]
                with m.If(self.map.resp.valid):
                    with m.If(~self.map.resp.payload.error & (self.map.resp.payload.old == old.as_value())):
                        m.next = "PROGRAM"
                    with m.Else():
                        m.d.sync += [result.eq(RelocResult.RACED), new.eq(spec.PPA_UNMAPPED)]
                        m.next = "DONE"
            with m.State("PROGRAM"):
                pw = self.page.payload
                m.d.comb += [pw.mem_addr.eq(self.gc_buf), pw.keep_vseq.eq(1),
                             pw.oob.eq(oob), pw.oob.kind.eq(Kind.GC_COPY), self.page.valid.eq(1)]
                with m.If(by_lba):
                    m.d.comb += pw.oob.lba.eq(given_lba)
                with m.If(self.page.ready):
                    m.next = "PROGRAM_WAIT"
            with m.State("PROGRAM_WAIT"):
                m.d.comb += self.page_done.ready.eq(1)
                with m.If(self.page_done.valid):
                    m.d.sync += new.eq(self.page_done.payload.ppa)
                    with m.If(self.page_done.payload.result == NandResult.OK):
                        m.next = "LOCK"
                    with m.Else():
                        m.d.sync += result.eq(RelocResult.PROGRAM_FAILED)
                        m.next = "DONE"
            with m.State("LOCK"):
                m.d.comb += self.map.lock.eq(1)
                with m.If(self.map.grant):
                    m.next = "CAS"
            with m.State("CAS"):
                r = self.map.req.payload
                m.d.comb += [self.map.lock.eq(1), r.op.eq(MapOp.CAS), r.lba.eq(Mux(by_lba, given_lba, oob.lba)), r.value.eq(new),
                             r.expected.eq(old.as_value()), self.map.req.valid.eq(1)]
                with m.If(self.map.req.ready):
                    m.next = "CAS_RESP"
            with m.State("CAS_RESP"):
                m.d.comb += [self.map.lock.eq(1), self.map.resp.ready.eq(1)]
                with m.If(self.map.resp.valid):
                    with m.If(self.map.resp.payload.updated & ~self.map.resp.payload.error):
                        m.d.sync += result.eq(RelocResult.MOVED)
                        m.next = "REBIND"
                    with m.Elif((oob.flags.tx | oob.flags.append) & ~by_lba & ~self.map.resp.payload.error):
                        m.next = "PENDING_CAS"
                    with m.Else():
                        m.d.sync += result.eq(RelocResult.RACED)
                        m.next = "DONE"
            with m.State("PENDING_CAS"):
                p = self.pending.req
                m.d.comb += [self.map.lock.eq(1), p.valid.eq(1), p.payload.op.eq(PendingOp.CAS),
                             p.payload.ppa.eq(old.as_value()), p.payload.new.eq(new)]
                with m.If(p.ready):
                    m.next = "PENDING_RESP"
            with m.State("PENDING_RESP"):
                m.d.comb += [self.map.lock.eq(1), self.pending.resp.ready.eq(1)]
                with m.If(self.pending.resp.valid):
                    with m.If(self.pending.resp.payload.hit):
                        m.d.sync += result.eq(RelocResult.MOVED)
                        m.next = "REBIND"
                    with m.Else():
                        m.d.sync += result.eq(RelocResult.RACED)
                        m.next = "DONE"
            with m.State("REBIND"):
                m.d.comb += [self.map.lock.eq(1), self.rebind.payload.old.eq(old), self.rebind.payload.new.eq(new),
                             self.rebind.valid.eq(1)]
                with m.If(self.rebind.ready):
                    m.next = "DONE"
            with m.State("DONE"):
                m.d.comb += [self.done.valid.eq(1), self.done.payload.tag.eq(tag),
                             self.done.payload.result.eq(result), self.done.payload.new_ppa.eq(new)]
                with m.If(self.done.ready):
                    m.next = "IDLE"
        return m
