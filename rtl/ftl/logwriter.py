"""Log writer: one host page in, one programmed log page out.

Every page the FTL writes goes through here, whatever it is (a plain write, an
atomic-group member, a transaction page, a GC copy, a record page).  The
requester says *what* the page is (its OOB record: kind, flags, lba, group
information, tid) and *where its data is* (a byte address in SoC memory); the
log writer decides *where it goes* and stamps *when* (seq):

1. take the next page and seq from the :class:`~rtl.ftl.allocator.PageAllocator`
   (``alloc``; consecutive requests get consecutive seqs, which an atomic
   group's vseq = first + idx relies on);
2. take a free page-buffer slot on that page's channel;
3. copy the data from SoC memory into the slot (:class:`~rtl.ftl.dma.BufferDMA`);
4. write the bad-block-marker bytes (FFh) and the OOB record, with its seq,
   vseq (= seq unless the requester keeps a GC copy's) and CRC
   (:class:`~rtl.ftl.oob.OOBPacker`), into the slot's spare area;
5. issue the PROGRAM descriptor (ECC on) and go on with the next request at
   once: programs on different dies overlap, the slot stays reserved until its
   completion.

Each completion leaves on ``done`` with the request's tag, the page and seq,
and the channel's result (``NandResult.OK`` or ``FAIL``; the requester retries
a failed member on a fresh page).  A DMA bus error completes the request with
``NandResult.FAIL`` too and programs nothing (``dma_error`` set).

**No page will come** (``give_up``: the allocator is starved and the firmware
has no erased block left to hand over, ``ftl.host_enable.no_blocks``): a
request that finds no page completes at once with ``NandResult.FAIL`` and
``no_page`` set, programs nothing and takes no seq.  The requester must not
retry it (the executor completes the command NO_SPACE): waiting would hold a
command that can never finish, and with it every command behind it.

**PAD pages** (``no_data``, :mod:`rtl.ftl.pairing`) skip step 3: only their
OOB record means anything.

**Record pages** (``record`` set: COMMIT, REMAP and TRIM records) carry a
``spec.REC_HDR`` at byte 0 whose ``seq`` is the page's own seq, known only
here.  The requester leaves the header's 24 bytes free in its buffer and puts
``rec_count`` entries after it; after the DMA the log writer CRCs the header
and the entries (read back from the slot, one word per three cycles) and writes
the header over the first six words, so the record binds to its OOB record
exactly as ``spec.unpack_record_page`` checks.

Descriptor tags are ``channel * slots + slot``: the completion finds its
request in a small table indexed the same way.

The log writer uses the first ``write_slots`` slots of each channel (the rest
belong to the read path) and holds a channel's page-buffer port only while it
fills a slot: ``buf[c]`` is a request/grant port
(:class:`~rtl.ftl.bufport.ArbitratedBufferSignature`) for a
:class:`~rtl.ftl.bufport.BufferPortArbiter`.
"""

from amaranth import Cat, Const, Module, Mux, Signal
from amaranth.lib import data, memory, stream, wiring
from amaranth.lib.wiring import In, Out
from amaranth.utils import ceil_log2

from atomflash import spec
from atomflash.spec import Kind, NandOp, NandResult
from rtl import spec as layouts
from rtl.lib import wishbone
from rtl.nand.channel import ChannelParams
from rtl.nand.pagebuf import HOST_READ_LATENCY

from .bufport import ArbitratedBufferSignature, held_grant
from .dma import BufferDMA, Direction, request_layout
from .nandport import page_desc
from .oob import OOBPacker

__all__ = ["LogWriter", "PAGE_WRITE", "PAGE_DONE"]

PAGE_WRITE = data.StructLayout({
    "tag": 16,               # echoed on done
    "mem_addr": 32,          # page data in SoC memory (4-byte aligned)
    "keep_vseq": 1,          # GC copy: stamp oob.vseq as given; else vseq = seq
    "record": 1,             # a record page: write REC_HDR (this page's seq, CRC) over its first 24 bytes
    "rec_count": 16,         # REC_HDR.count: entries in this page (after the header)
    "rec_total": 32,         # REC_HDR.total: entries in the whole record
    "no_data": 1,            # a PAD page: no DMA, the slot's bytes go as they are (only the OOB record matters)
    "oob": layouts.OOB,      # seq and crc are filled in here
})

PAGE_DONE = data.StructLayout({
    "tag": 16,
    "result": 8,             # NandResult
    "dma_error": 1,
    "ppa": layouts.PPA,
    "seq": 64,
    "vseq": 64,              # the version the page was stamped with (a retry keeps it)
    "no_page": 1,            # nothing programmed: no page will come (give_up); ppa and seq mean nothing
})


class LogWriter(wiring.Component):
    """Allocate, fill, stamp and program log pages; see the module docstring.

    Parameters
    ----------
    params : ChannelParams
        The channels' parameters (profile, slots) as given to the NandController.
    channels : int

    Ports
    -----
    req : In(stream of PAGE_WRITE)
    done : Out(stream of PAGE_DONE)
        One per request, in completion order.
    alloc : In(stream of {ppa, seq})
        From ``PageAllocator.alloc``.
    desc : Out(stream of ``NAND_DESC``) / cpl : In(stream of ``NAND_CPL``)
        To and from the NandController (tags: channel * slots + slot).
    buf : Out(ArbitratedBufferSignature).array(channels)
        The channels' page-buffer ports, held from slot fill to PROGRAM issue.
    bus : Out(wishbone.Signature)
        Data reads from SoC memory.
    give_up : In(1)
        No page will come (allocator starved, no block left): a request waiting for one completes
        with ``no_page`` instead.
    """

    def __init__(self, params: ChannelParams, channels: int, slot_words: int, write_slots: int | None = None):
        self.p, self.channels, self.slot_words = params, channels, slot_words
        self.write_slots = params.slots if write_slots is None else write_slots
        if not 1 <= self.write_slots <= params.slots:
            raise ValueError(f"write_slots must be 1..{params.slots}")
        self.layout = spec.nand_page_layout(params.profile)
        self.buf_addr_width = (params.slots * slot_words - 1).bit_length()
        super().__init__({
            "req": In(stream.Signature(PAGE_WRITE)),
            "done": Out(stream.Signature(PAGE_DONE)),
            "alloc": In(stream.Signature(data.StructLayout({"ppa": layouts.PPA, "seq": 64}))),
            "desc": Out(stream.Signature(layouts.NAND_DESC)),
            "cpl": In(stream.Signature(layouts.NAND_CPL)),
            "buf": Out(ArbitratedBufferSignature(self.buf_addr_width)).array(channels),
            "bus": Out(wishbone.Signature(addr_width=30, data_width=32, burst=True)),
            "give_up": In(1),
        })

    def elaborate(self, platform):
        m = Module()
        p, lay, C, S = self.p, self.layout, self.channels, self.p.slots
        m.submodules.dma = dma = BufferDMA(self.buf_addr_width)
        m.submodules.packer = packer = OOBPacker()
        wiring.connect(m, wiring.flipped(self.bus), dma.bus)

        # -- requests in flight: one entry per (channel, slot)
        n = C * S
        busy = Signal(n)
        # what each request in flight reports on completion: a LUT RAM written when the program
        # is issued and read by the completion's tag (as registers, a 176-bit mux over every entry)
        entry_layout = data.StructLayout({"tag": 16, "ppa": 32, "seq": 64, "vseq": 64})
        m.submodules.entries = entries = memory.Memory(shape=entry_layout, depth=max(n, 2), init=[])
        entry_w = entries.write_port()
        entry_r = entries.read_port(domain="comb")

        cur = Signal(PAGE_WRITE)
        cur_ppa_rec = Signal(layouts.PPA)
        cur_ppa = cur_ppa_rec.ppa
        cur_seq = Signal(64)
        slot = Signal(range(max(S, 2)))
        index = Signal(range(max(n, 2)))
        m.d.comb += index.eq(cur_ppa.channel * S + slot)
        cur_vseq = Signal(64)
        m.d.comb += cur_vseq.eq(Mux(cur.keep_vseq, cur.oob.vseq, cur_seq))

        # lowest free slot on the current page's channel
        free_slot = Signal(range(max(S, 2)))
        have_slot = Signal()
        for c in range(C):
            with m.If(cur_ppa.channel == c):
                for s in reversed(range(self.write_slots)):
                    with m.If(~busy[c * S + s]):
                        m.d.comb += [free_slot.eq(s), have_slot.eq(1)]

        # -- page-buffer port of the current channel: DMA, then OOB bytes
        use_dma = Signal()
        holding = Signal()          # the current channel's buffer port is requested/held
        granted = held_grant(m, self.buf, cur_ppa.channel, holding)
        oob_addr = Signal(self.buf_addr_width)
        oob_en = Signal(4)
        oob_data = Signal(32)
        for c in range(C):
            port = self.buf[c].port
            m.d.comb += self.buf[c].request.eq(holding & (cur_ppa.channel == c))
            with m.If(cur_ppa.channel == c):
                with m.If(use_dma):
                    m.d.comb += [port.addr.eq(dma.buf.addr), port.w_en.eq(dma.buf.w_en),
                                 port.w_data.eq(dma.buf.w_data), dma.buf.r_data.eq(port.r_data)]
                with m.Else():
                    m.d.comb += [port.addr.eq(oob_addr), port.w_en.eq(oob_en), port.w_data.eq(oob_data)]

        slot_base = Signal(self.buf_addr_width)
        m.d.comb += slot_base.eq(slot * self.slot_words)
        col = Signal(range(lay.user_bytes + 1))
        dma_error = Signal()
        reporting_failure = Signal()     # DMA_FAILED owns `done` this cycle
        bbm_first = lay.oob_col
        record_first = lay.oob_record_col

        def write_byte(column, value):
            byte = Const(value, 8) if isinstance(value, int) else value
            m.d.comb += [oob_addr.eq(slot_base + (column >> 2)), oob_en.eq(1 << column[:2]),
                         oob_data.eq(Cat(byte, byte, byte, byte))]

        # -- record pages: REC_HDR with this page's seq and the CRC over header and entries
        hdr = Signal(layouts.REC_HDR)
        m.d.comb += [hdr.magic.eq(spec.LOG.REC_MAGIC), hdr.kind.eq(cur.oob.kind), hdr.format.eq(spec.LOG.REC_FORMAT),
                     hdr.count.eq(cur.rec_count), hdr.seq.eq(cur_seq), hdr.total.eq(cur.rec_total)]
        m.submodules.rec_crc = rec_crc = layouts.OOB_CRC(data_width=32).create()
        hdr_words = spec.REC_HDR.size // 4
        crc_words = spec.REC_HDR["crc"].offset // 4
        entry_words = Signal(range(0x10000 * 6 + 1))
        m.d.comb += entry_words.eq(Mux(cur.oob.kind == Kind.REMAP, cur.rec_count * (spec.REMAP_REC_ENTRY.size // 4),
                                       cur.rec_count * (spec.TRIM_REC_ENTRY.size // 4)))
        assert spec.TRIM_REC_ENTRY.size == spec.COMMIT_BODY.size
        rec_word = Signal(range(0x10000 * 6 + hdr_words + 1))
        rec_wait = Signal(range(HOST_READ_LATENCY))     # cycles until the entry word read is on r_data
        # the word after the last entry, through a register: ``cur`` has settled before the header's
        # words are fed, and the multiply and add would otherwise end in the FSM's next state
        rec_end = Signal.like(rec_word)
        m.d.sync += rec_end.eq(hdr_words + entry_words)
        for c in range(C):
            with m.If(cur_ppa.channel == c):
                m.d.comb += rec_crc.data.eq(Mux(rec_word < crc_words, hdr.as_value().word_select(rec_word[:3], 32),
                                                self.buf[c].port.r_data))

        with m.FSM():
            with m.State("IDLE"):
                m.d.comb += [self.req.ready.eq(self.alloc.valid | self.give_up), self.alloc.ready.eq(self.req.valid)]
                with m.If(self.req.valid & self.alloc.valid):
                    m.d.sync += [cur.eq(self.req.payload), cur_ppa_rec.eq(self.alloc.payload.ppa),
                                 cur_seq.eq(self.alloc.payload.seq), dma_error.eq(0)]
                    m.next = "SLOT"
                with m.Elif(self.req.valid & self.give_up):
                    m.d.sync += [cur.eq(self.req.payload), cur_ppa_rec.eq(spec.PPA_UNMAPPED), cur_seq.eq(0)]
                    m.next = "NO_PAGE"
            with m.State("SLOT"):
                with m.If(have_slot):
                    m.d.sync += slot.eq(free_slot)
                    m.next = "GRANT"
            with m.State("GRANT"):
                m.d.comb += holding.eq(1)
                with m.If(granted & cur.no_data):
                    m.d.sync += col.eq(bbm_first)
                    m.next = "BBM"
                with m.Elif(granted):
                    m.next = "DMA"
            with m.State("DMA"):
                m.d.comb += holding.eq(1)
                m.d.comb += [
                    dma.req.valid.eq(1),
                    dma.req.payload.direction.eq(Direction.TO_BUFFER),
                    dma.req.payload.mem_addr.eq(cur.mem_addr),
                    dma.req.payload.buf_addr.eq(slot_base),
                    dma.req.payload.words.eq(p.profile.page_data // 4),
                ]
                with m.If(dma.req.ready):
                    m.next = "DMA_WAIT"
            with m.State("DMA_WAIT"):
                m.d.comb += [holding.eq(1), use_dma.eq(1), dma.done.ready.eq(1)]
                with m.If(dma.done.valid):
                    m.d.sync += [dma_error.eq(dma.done.payload.error), col.eq(bbm_first), rec_word.eq(0)]
                    with m.If(cur.record):
                        m.next = "REC_START"
                    with m.Else():
                        m.next = "BBM"
            with m.State("REC_START"):
                m.d.comb += [holding.eq(1), rec_crc.start.eq(1)]
                m.next = "REC_HDR"
            with m.State("REC_HDR"):
                # header words before the crc field
                m.d.comb += [holding.eq(1), rec_crc.valid.eq(1)]
                m.d.sync += rec_word.eq(rec_word + 1)
                with m.If(rec_word == crc_words - 1):
                    m.d.sync += rec_word.eq(hdr_words)
                    m.next = "REC_ADDR"
            with m.State("REC_ADDR"):
                # entries: read back from the slot, each word HOST_READ_LATENCY cycles after its address
                m.d.comb += [holding.eq(1), oob_addr.eq(slot_base + rec_word)]
                with m.If(rec_word == rec_end):
                    m.d.sync += rec_word.eq(0)
                    m.next = "REC_WRITE"
                with m.Else():
                    m.d.sync += rec_wait.eq(HOST_READ_LATENCY - 1)
                    m.next = "REC_FEED"
            with m.State("REC_FEED"):
                m.d.comb += [holding.eq(1), oob_addr.eq(slot_base + rec_word)]
                with m.If(rec_wait != 0):
                    m.d.sync += rec_wait.eq(rec_wait - 1)
                with m.Else():
                    m.d.comb += rec_crc.valid.eq(1)
                    m.d.sync += rec_word.eq(rec_word + 1)
                    m.next = "REC_ADDR"
            with m.State("REC_WRITE"):
                m.d.comb += [holding.eq(1), oob_addr.eq(slot_base + rec_word), oob_en.eq(0xF),
                             oob_data.eq(Mux(rec_word == crc_words, rec_crc.crc,
                                             hdr.as_value().word_select(rec_word[:3], 32)))]
                m.d.sync += rec_word.eq(rec_word + 1)
                with m.If(rec_word == hdr_words - 1):
                    m.next = "BBM"
            with m.State("BBM"):
                # bad-block-marker bytes stay erased (FFh) on every programmed page
                m.d.comb += holding.eq(1)
                write_byte(col, 0xFF)
                m.d.sync += col.eq(col + 1)
                with m.If(col == bbm_first + lay.bbm_bytes - 1):
                    m.d.sync += col.eq(record_first)
                    m.next = "PACK"
            with m.State("PACK"):
                m.d.comb += holding.eq(1)
                rec = packer.record.payload
                m.d.comb += [rec.eq(cur.oob), rec.seq.eq(cur_seq),
                             rec.vseq.eq(cur_vseq),
                             rec.format.eq(spec.OOB_FORMAT), packer.record.valid.eq(1)]
                with m.If(packer.record.ready):
                    m.next = "RECORD"
            with m.State("RECORD"):
                m.d.comb += [holding.eq(1), packer.bytes.ready.eq(1)]
                with m.If(packer.bytes.valid):
                    write_byte(col, packer.bytes.payload.data)
                    m.d.sync += col.eq(col + 1)
                    with m.If(packer.bytes.payload.last):
                        m.next = "ISSUE"
            with m.State("ISSUE"):
                d = self.desc.payload
                m.d.comb += [
                    *page_desc(d, NandOp.PROGRAM, cur_ppa, length=lay.user_bytes, slot=slot, tag=index),
                    self.desc.valid.eq(~dma_error),
                ]
                with m.If(dma_error | self.desc.ready):
                    m.d.comb += [entry_w.en.eq(1), entry_w.addr.eq(index),
                                 entry_w.data.tag.eq(cur.tag), entry_w.data.ppa.eq(cur_ppa.as_value()),
                                 entry_w.data.seq.eq(cur_seq), entry_w.data.vseq.eq(cur_vseq)]
                    with m.If(dma_error):
                        m.next = "DMA_FAILED"
                    with m.Else():
                        m.d.sync += busy.bit_select(index, 1).eq(1)
                        m.next = "IDLE"
            with m.State("DMA_FAILED"):
                m.d.comb += [reporting_failure.eq(1), self.done.valid.eq(1), self.done.payload.tag.eq(cur.tag),
                             self.done.payload.result.eq(NandResult.FAIL), self.done.payload.dma_error.eq(1),
                             self.done.payload.ppa.eq(cur_ppa_rec), self.done.payload.seq.eq(cur_seq),
                             self.done.payload.vseq.eq(cur_vseq)]
                with m.If(self.done.ready):
                    m.next = "IDLE"
            with m.State("NO_PAGE"):
                m.d.comb += [reporting_failure.eq(1), self.done.valid.eq(1), self.done.payload.tag.eq(cur.tag),
                             self.done.payload.result.eq(NandResult.FAIL), self.done.payload.no_page.eq(1),
                             self.done.payload.ppa.eq(cur_ppa_rec), self.done.payload.vseq.eq(cur_vseq)]
                with m.If(self.done.ready):
                    m.next = "IDLE"

        # -- completions: free the slot, report (the DMA-failure path has priority)
        ci = self.cpl.payload.tag[:ceil_log2(max(n, 2))]
        m.d.comb += entry_r.addr.eq(ci)
        with m.If(~reporting_failure):
            m.d.comb += [
                self.done.valid.eq(self.cpl.valid),
                self.cpl.ready.eq(self.done.ready),
                self.done.payload.tag.eq(entry_r.data.tag),
                self.done.payload.result.eq(self.cpl.payload.result),
                self.done.payload.ppa.eq(entry_r.data.ppa),
                self.done.payload.seq.eq(entry_r.data.seq),
                self.done.payload.vseq.eq(entry_r.data.vseq),
            ]
            with m.If(self.cpl.valid & self.done.ready):
                m.d.sync += busy.bit_select(ci, 1).eq(0)
        return m
