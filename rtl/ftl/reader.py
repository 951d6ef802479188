"""Read path: READ commands from the map to the host's buffer.

One command at a time: with the map port held (``MapPortArbiter``) it looks
up every LBA of the command, so the read sees each atomic group whole or not
at all; then, page by page, an unmapped LBA reads as zeros (written straight
into the host buffer) and a mapped one is read from flash into the channel's
read slot (the last slot; the relocator has the one before, the log writer the rest), ECC-corrected by
the channel, and copied to the host buffer by a :class:`~rtl.ftl.dma.BufferDMA`
holding the channel's buffer port.  A page the channel cannot return
(``UNCORRECTABLE``, or ``ERASED`` where the map points) ends the command with
``MEDIA_ERROR``, a bus error on the host buffer with ``DATA_TRANSFER_ERROR``:
never wrong data with success.

**TX_READ** (``tx`` set in the command) reads what its transaction sees:
before handing it over, the executor claims the *override* table
(``overrides.claim``) and writes the pages the transaction staged for the range
(``overrides.we``, by index in the command); a lookup whose index has an override
uses that page instead of the map's.  The table is released
(``overrides.busy`` falls) when the command completes.

**The write cache** (``cache``): the executor holds LBAs whose newest data
is still in a SoC-memory cache page.  The reader takes the cache lock
(``cache_lookup.req`` / ``.grant``) before the map port and looks every LBA up in
the cache too (``.lba`` -> ``.hit``, ``.addr``) while it holds the
map port: a cache entry is freed only after its destage group is published,
so a miss means the map already has the data.  A hit is copied word by word
from the cache page (priority: a TX_READ override, then the cache, then the
map); the lock is kept to the end of a command that hit, so a page freed
meanwhile is not refilled under the copy, and dropped after the lookups
otherwise.

Pages are read one after another; the program path is what the throughput
goal measures, and a pipelined read path (one slot per die in flight) is the
next step when reads are benchmarked.
"""

from amaranth import Module, Mux, Signal
from amaranth.lib import data, memory, stream, wiring
from amaranth.lib.wiring import In, Out

from atomflash import spec
from atomflash.spec import NandOp, NandResult, Status
from rtl import spec as layouts
from rtl.host.queues import completion_layout
from rtl.lib import wishbone
from rtl.nand.channel import ChannelParams

from .bufport import ArbitratedBufferSignature, held_grant
from .dma import BufferDMA, Direction
from .mapcache import MapOp
from .mapport import MapPortSignature
from .nandport import page_desc
from .writecache import CacheLookupSignature

__all__ = ["OverrideSignature", "Reader", "read_layout"]


def read_layout(queue_pairs: int, max_transfer: int) -> data.StructLayout:
    q = completion_layout(queue_pairs)
    return data.StructLayout({"sqid": q["sqid"].shape, "cid": 16, "lba": 32,
                              "nlb": range(max_transfer + 1), "buf": 32, "tx": 1})


class OverrideSignature(wiring.Signature):
    """The reader's TX_READ override table, from the side that fills it.

    Members
    -------
    claim : Out(1) / busy : In(1)
        Claim the table for the next TX_READ (a pulse); busy until that command completes.
    we : Out(1), idx : Out(range(max_transfer)), ppa : Out(32)
        Index ``idx`` of that TX_READ reads page ``ppa`` instead of the map's.
    """

    def __init__(self, max_transfer: int):
        super().__init__({"claim": Out(1), "busy": In(1), "we": Out(1), "idx": Out(range(max_transfer)),
                          "ppa": Out(32)})


class Reader(wiring.Component):
    """Serves READ commands; see the module docstring.

    Ports
    -----
    cmd : In(stream of read_layout)
    cpl : Out(stream of completion_layout)
    map : Out(MapPortSignature)
    desc : Out(stream of NAND_DESC) / ncpl : In(stream of NAND_CPL)
    buf : Out(ArbitratedBufferSignature).array(channels)
    bus : Out(wishbone.Signature)
    overrides : In(OverrideSignature)
        The TX_READ override table (the executor fills it).
    cache_lookup : Out(CacheLookupSignature)
        The write cache's lookups and lock (``cache``).
    pages : Out(32)
        Pages returned to a host buffer since reset.
    """

    def __init__(self, params: ChannelParams, channels: int, slot_words: int, *, queue_pairs: int,
                 max_transfer: int = spec.LIMITS.MAX_TRANSFER, lba_bits: int = 32, cache: bool = False):
        self.p, self.channels, self.slot_words = params, channels, slot_words
        self.cache = cache
        self.max_transfer = max_transfer
        self.read_slot = params.slots - 1
        self.buf_addr_width = (params.slots * slot_words - 1).bit_length()
        super().__init__({
            "cmd": In(stream.Signature(read_layout(queue_pairs, max_transfer))),
            "cpl": Out(stream.Signature(completion_layout(queue_pairs))),
            "map": Out(MapPortSignature(lba_bits)),
            "desc": Out(stream.Signature(layouts.NAND_DESC)),
            "ncpl": In(stream.Signature(layouts.NAND_CPL)),
            "buf": Out(ArbitratedBufferSignature(self.buf_addr_width)).array(channels),
            "bus": Out(wishbone.Signature(addr_width=30, data_width=32, burst=True)),
            "overrides": In(OverrideSignature(max_transfer)),
            "cache_lookup": Out(CacheLookupSignature(lba_bits)),
            "pages": Out(32),
        })

    def elaborate(self, platform):
        m = Module()
        page_data = self.p.profile.page_data
        page_words = page_data // 4
        m.submodules.dma = dma = BufferDMA(self.buf_addr_width)

        m.submodules.ppas = ppas = memory.Memory(shape=32, depth=self.max_transfer, init=[])
        ppa_w, ppa_r = ppas.write_port(), ppas.read_port()

        # TX_READ overrides: the transaction's staged pages by index
        m.submodules.ovr = ovr = memory.Memory(shape=32, depth=self.max_transfer, init=[])
        ovr_w, ovr_r = ovr.write_port(), ovr.read_port(domain="comb")
        ovr_mask = Signal(self.max_transfer)
        # an override is written a cycle after it comes (the executor's decision to write it ends a long
        # path already); the TX_READ it is for comes later still, after the pending table's last answer
        ovr_we, ovr_idx, ovr_ppa = Signal(), Signal.like(self.overrides.idx), Signal(32)
        m.d.sync += [ovr_we.eq(self.overrides.we), ovr_idx.eq(self.overrides.idx), ovr_ppa.eq(self.overrides.ppa)]
        m.d.comb += [ovr_w.addr.eq(ovr_idx), ovr_w.data.eq(ovr_ppa), ovr_w.en.eq(ovr_we)]
        ovr_done = Signal()
        with m.If(self.overrides.claim):
            m.d.sync += [self.overrides.busy.eq(1), ovr_mask.eq(0)]
        with m.If(ovr_we):
            m.d.sync += ovr_mask.bit_select(ovr_idx, 1).eq(1)
        with m.If(ovr_done):
            m.d.sync += self.overrides.busy.eq(0)

        # cache hits: the cache page's address by index
        m.submodules.caddrs = caddrs = memory.Memory(shape=32, depth=self.max_transfer, init=[])
        caddr_w, caddr_r = caddrs.write_port(), caddrs.read_port(domain="comb")
        hits = Signal(self.max_transfer)
        cache_held = Signal()
        copying = Signal()
        copy_word = Signal(32)
        if self.cache:
            m.d.comb += self.cache_lookup.req.eq(cache_held)

        cmd = Signal.like(self.cmd.payload)
        idx = Signal(range(self.max_transfer + 1))
        status = Signal(15)
        ppa = Signal(layouts.PPA)
        word = Signal(range(page_words + 1))
        zeroing = Signal()
        holding = Signal()
        f = ppa.ppa
        m.d.comb += [ppa.eq(ppa_r.data), ppa_r.addr.eq(idx)]
        mem_addr = Signal(32)
        m.d.comb += mem_addr.eq(cmd.buf + idx * page_data)

        # the host bus: the DMA, the zero filler or the cache copier
        m.d.comb += caddr_r.addr.eq(idx)
        with m.If(zeroing):
            wishbone.word_access(m, self.bus, (mem_addr >> 2) + word, 0)
        with m.Elif(copying):
            pass        # driven by the CACHE states
        with m.Else():
            wiring.connect(m, wiring.flipped(self.bus), dma.bus)

        # the channel's buffer port, held from grant to the end of the copy.  The channel is taken
        # into a register in DECIDE: selected straight from the PPA table's read, it put the table's
        # block RAM in front of the page buffer's data on its way to the host bus (boards/depth.py).
        chan = Signal(range(max(self.channels, 2)))
        for c in range(self.channels):
            port = self.buf[c]
            m.d.comb += port.request.eq(holding & (chan == c))
            with m.If(chan == c):
                m.d.comb += [port.port.addr.eq(dma.buf.addr), port.port.w_en.eq(dma.buf.w_en),
                             port.port.w_data.eq(dma.buf.w_data), dma.buf.r_data.eq(port.port.r_data)]
        granted = held_grant(m, self.buf, chan, holding)

        with m.FSM():
            with m.State("IDLE"):
                m.d.comb += self.cmd.ready.eq(1)
                with m.If(self.cmd.valid):
                    m.d.sync += [cmd.eq(self.cmd.payload), idx.eq(0), status.eq(Status.SUCCESS), hits.eq(0)]
                    if self.cache:
                        m.d.sync += cache_held.eq(1)
                        m.next = "CACHE_LOCK"
                    else:
                        m.next = "LOCK"
            with m.State("CACHE_LOCK"):
                with m.If(self.cache_lookup.grant):
                    m.next = "LOCK"
            with m.State("LOCK"):
                m.d.comb += self.map.lock.eq(1)
                with m.If(self.map.grant):
                    m.next = "LOOKUP"
            with m.State("LOOKUP"):
                r = self.map.req.payload
                m.d.comb += [self.map.lock.eq(1), r.op.eq(MapOp.READ), r.lba.eq(cmd.lba + idx),
                             self.map.req.valid.eq(1)]
                with m.If(self.map.req.ready):
                    m.next = "LOOKUP_RESP"
            with m.State("LOOKUP_RESP"):
                m.d.comb += [self.map.lock.eq(1), self.map.resp.ready.eq(1)]
                m.d.comb += ovr_r.addr.eq(idx)
                with m.If(self.map.resp.valid):
                    use_ovr = cmd.tx & ovr_mask.bit_select(idx, 1)
                    m.d.comb += [ppa_w.addr.eq(idx), ppa_w.data.eq(Mux(use_ovr, ovr_r.data, self.map.resp.payload.old)),
                                 ppa_w.en.eq(1)]
                    last = (idx + 1 == cmd.nlb) | self.map.resp.payload.error
                    if self.cache:
                        hit = self.cache_lookup.hit & ~use_ovr
                        m.d.comb += [self.cache_lookup.lba.eq(cmd.lba + idx), caddr_w.addr.eq(idx),
                                     caddr_w.data.eq(self.cache_lookup.addr), caddr_w.en.eq(hit)]
                        with m.If(hit):
                            m.d.sync += hits.bit_select(idx, 1).eq(1)
                        with m.If(last & ~hit & (hits == 0)):
                            m.d.sync += cache_held.eq(0)   # no page of the cache to protect
                    with m.If(self.map.resp.payload.error):
                        m.d.sync += status.eq(Status.INTERNAL_ERROR)
                    with m.If(last):
                        m.d.sync += idx.eq(0)
                        m.next = "PAGE"
                    with m.Else():
                        m.d.sync += idx.eq(idx + 1)
                        m.next = "LOOKUP"
            with m.State("PAGE"):
                # the map port is free again; ppa_r shows entry idx from the next cycle
                with m.If(status != Status.SUCCESS):
                    m.next = "DONE"
                with m.Else():
                    m.next = "DECIDE"
            with m.State("DECIDE"):
                m.d.sync += [word.eq(0), chan.eq(f.channel)]
                with m.If(hits.bit_select(idx, 1)):
                    m.next = "CACHE_RD"
                with m.Elif(ppa.as_value() == spec.PPA_UNMAPPED):
                    m.next = "ZERO"
                with m.Else():
                    m.next = "NAND"
            with m.State("ZERO"):
                m.d.comb += zeroing.eq(1)
                with m.If(self.bus.err):
                    m.d.sync += status.eq(Status.DATA_TRANSFER_ERROR)
                    m.next = "DONE"
                with m.Elif(self.bus.ack):
                    m.d.sync += word.eq(word + 1)
                    with m.If(word == page_words - 1):
                        m.next = "NEXT"
            # a cache hit: word by word from the cache page to the host buffer
            with m.State("CACHE_RD"):
                m.d.comb += copying.eq(1)
                wishbone.word_access(m, self.bus, (caddr_r.data >> 2) + word)
                with m.If(self.bus.err):
                    m.d.sync += status.eq(Status.INTERNAL_ERROR)
                    m.next = "DONE"
                with m.Elif(self.bus.ack):
                    m.d.sync += copy_word.eq(self.bus.dat_r)
                    m.next = "CACHE_WR"
            with m.State("CACHE_WR"):
                m.d.comb += copying.eq(1)
                wishbone.word_access(m, self.bus, (mem_addr >> 2) + word, copy_word)
                with m.If(self.bus.err):
                    m.d.sync += status.eq(Status.DATA_TRANSFER_ERROR)
                    m.next = "DONE"
                with m.Elif(self.bus.ack):
                    m.d.sync += word.eq(word + 1)
                    with m.If(word == page_words - 1):
                        m.next = "NEXT"
                    with m.Else():
                        m.next = "CACHE_RD"
            with m.State("NAND"):
                d = self.desc.payload
                m.d.comb += [*page_desc(d, NandOp.READ, f, length=page_data, slot=self.read_slot),
                             self.desc.valid.eq(1)]
                with m.If(self.desc.ready):
                    m.next = "NAND_WAIT"
            with m.State("NAND_WAIT"):
                m.d.comb += self.ncpl.ready.eq(1)
                with m.If(self.ncpl.valid):
                    with m.If(self.ncpl.payload.result == NandResult.OK):
                        m.next = "GRANT"
                    with m.Else():
                        m.d.sync += status.eq(Status.MEDIA_ERROR)
                        m.next = "DONE"
            with m.State("GRANT"):
                m.d.comb += holding.eq(1)
                with m.If(granted):
                    m.next = "COPY"
            with m.State("COPY"):
                m.d.comb += [holding.eq(1), dma.req.valid.eq(1),
                             dma.req.payload.direction.eq(Direction.TO_MEMORY),
                             dma.req.payload.mem_addr.eq(mem_addr),
                             dma.req.payload.buf_addr.eq(self.read_slot * self.slot_words),
                             dma.req.payload.words.eq(page_words)]
                with m.If(dma.req.ready):
                    m.next = "COPY_WAIT"
            with m.State("COPY_WAIT"):
                m.d.comb += [holding.eq(1), dma.done.ready.eq(1)]
                with m.If(dma.done.valid):
                    with m.If(dma.done.payload.error):
                        m.d.sync += status.eq(Status.DATA_TRANSFER_ERROR)
                        m.next = "DONE"
                    with m.Else():
                        m.next = "NEXT"
            with m.State("NEXT"):
                m.d.sync += [idx.eq(idx + 1), self.pages.eq(self.pages + 1)]
                with m.If(idx + 1 == cmd.nlb):
                    m.next = "DONE"
                with m.Else():
                    m.next = "PAGE"
            with m.State("DONE"):
                c = self.cpl.payload
                m.d.comb += [c.sqid.eq(cmd.sqid), c.cid.eq(cmd.cid), c.status.eq(status), c.result.eq(0),
                             self.cpl.valid.eq(1)]
                with m.If(self.cpl.ready):
                    m.d.comb += ovr_done.eq(cmd.tx)
                    m.d.sync += cache_held.eq(0)
                    m.next = "IDLE"
        return m
