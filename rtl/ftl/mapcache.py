"""Mapping-table cache: a set-associative, write-back cache of the L2P table.

The full logical-to-physical table lives in SoC memory (one 32-bit
``spec.PPA`` per LBA, ``spec.PPA_UNMAPPED`` when unbound), where the firmware
can checkpoint and rebuild it.  The FTL's fast path must not pay a bus round
trip per lookup, so this cache keeps recently used lines of the table in
block RAM:

* ``sets`` x ``ways`` lines of ``line`` entries each; a line is the unit of
  fill and write-back (``line`` consecutive LBAs, so sequential workloads hit);
* write-back: an update only dirties the line; dirty lines are written to SoC
  memory when evicted (round-robin victim per set) or on ``FLUSH``;
* every request returns the entry's previous value, so the caller can fix
  per-block valid-page counts without a second lookup;
* ``CAS`` (compare-and-swap) updates only when the entry still holds
  ``expected`` — the GC relocation hook uses it so that a host write that
  rebound the LBA meanwhile wins;
* ``FLUSH`` writes every dirty line back (before the firmware reads the table
  for a checkpoint); ``INVALIDATE`` drops every line without writing (after the
  firmware rebuilt the table in memory at recovery).

One request is served at a time: a hit takes 5 cycles (a CAS 6), a miss adds ``line``
bus reads (plus ``line`` writes when the victim is dirty).  Map traffic is one
request per flash page, far below this rate.

**Lazy loading (the segment gate).**  A boot need not read the whole table
from the checkpoint before the host may use it: the firmware loads the
table a *segment* at a time (``2**seg_shift`` consecutive LBAs; one
checkpoint map page or more), the ones recovery touches first and the rest
in the background, and tells the cache which segments are in memory
(``seg_set``: one bit per segment in block RAM).  While ``lazy`` is set, a
miss looks its segment up before filling: a segment not loaded yet holds the
request (``fault`` up, ``fault_seg`` naming it) until the firmware has
written it to memory and set its bit.  Hits need no check: a line is only
ever filled from a loaded segment, and the firmware invalidates the cache
before it enables the gate.  Segments at or above ``segments`` are never
held (the firmware chooses ``seg_shift`` so the table fits).
"""

from amaranth import Array, Cat, Const, Module, Signal, unsigned
from amaranth.lib import data, memory, stream, wiring
from amaranth.lib.wiring import In, Out
from amaranth.utils import exact_log2

from atomflash import spec
from rtl import spec as layouts
from rtl.lib import wishbone


MapOp = layouts.hw_enum(spec.MapFwOp, 3)  # the firmware issues them through ftl.map_op


def request_layout(lba_bits: int) -> data.StructLayout:
    return data.StructLayout({"op": MapOp, "lba": lba_bits, "value": 32, "expected": 32})


def seg_set_layout(seg_bits: int) -> data.StructLayout:
    return data.StructLayout({"index": max(1, seg_bits), "loaded": 1})


RESPONSE = data.StructLayout({
    "old": 32,       # the entry before this request (READ: the entry)
    "updated": 1,    # WRITE always; CAS when old == expected
    "hit": 1,        # the line was in the cache
    "error": 1,      # a bus error; the entry is unknown and unchanged
})


class MapCache(wiring.Component):
    """Set-associative write-back cache of the L2P table.

    Parameters
    ----------
    lba_bits : int
        Width of an LBA.
    sets, ways, line : int
        Geometry (powers of two); ``sets * ways * line`` entries of block RAM.
    segments : int
        Segments the lazy-load gate tracks (a power of two; one bit of block RAM each).

    Ports
    -----
    req : In(stream.Signature(request_layout(lba_bits)))
    resp : Out(stream.Signature(RESPONSE))
        One response per request, in order (FLUSH/INVALIDATE answer when done).
    table_base : In(32)
        Byte address of entry 0 of the L2P table in SoC memory (4-byte aligned).
    dma : Out(wishbone.Signature(addr_width=30))
        Fills and write-backs.
    hits, misses, writebacks : Out(32)
        Free-running counters (lookups that hit, lookups that missed, lines written back).
    lazy : In(1)
        The segment gate is on (the table is being loaded).
    seg_shift : In(5)
        log2 of the LBAs per segment.
    seg_set : In(stream.Signature(SEG_SET))
        Mark a segment loaded (``loaded`` 1) or not (0); always ready.
    fault : Out(1)
        A miss waits for segment ``fault_seg`` to be loaded.
    fault_seg : Out(32)
    faults : Out(32)
        Free-running count of requests that had to wait.
    """

    def __init__(self, *, lba_bits: int = 32, sets: int = 64, ways: int = 4, line: int = 8,
                 segments: int = 4096):
        self.set_bits = exact_log2(sets)
        self.way_bits = exact_log2(ways)
        self.line_bits = exact_log2(line)
        self.tag_bits = lba_bits - self.set_bits - self.line_bits
        if self.tag_bits <= 0:
            raise ValueError("the cache covers the whole LBA space; make it smaller")
        self.lba_bits, self.sets, self.ways, self.line = lba_bits, sets, ways, line
        self.segments = segments
        self.seg_bits = exact_log2(segments)
        super().__init__({
            "req": In(stream.Signature(request_layout(lba_bits))),
            "resp": Out(stream.Signature(RESPONSE)),
            "table_base": In(32),
            "dma": Out(wishbone.Signature(addr_width=30, data_width=32)),
            "hits": Out(32),
            "misses": Out(32),
            "writebacks": Out(32),
            "lazy": In(1),
            "seg_shift": In(5),
            "seg_set": In(stream.Signature(seg_set_layout(self.seg_bits))),
            "fault": Out(1),
            "fault_seg": Out(32),
            "faults": Out(32),
        })

    def elaborate(self, platform):
        m = Module()
        ways, line = self.ways, self.line
        way_layout = data.StructLayout({"valid": 1, "dirty": 1, "tag": self.tag_bits})
        set_layout = data.StructLayout({
            "way": data.ArrayLayout(way_layout, ways),
            "victim": max(1, self.way_bits),
        })

        m.submodules.tags = tags = memory.Memory(shape=set_layout, depth=self.sets, init=[])
        m.submodules.lines = lines = memory.Memory(shape=unsigned(32), depth=self.sets * ways * line, init=[])
        tag_rd = tags.read_port()
        tag_wr = tags.write_port()
        line_rd = lines.read_port()
        line_wr = lines.write_port()
        # the lazy-load gate: one bit per segment, set by the firmware once the segment is in memory
        m.submodules.seg_loaded = seg_loaded = memory.Memory(shape=unsigned(1), depth=self.segments, init=[])
        seg_rd = seg_loaded.read_port()
        seg_wr = seg_loaded.write_port()
        m.d.comb += [
            self.seg_set.ready.eq(1),
            seg_wr.addr.eq(self.seg_set.payload.index),
            seg_wr.data.eq(self.seg_set.payload.loaded),
            seg_wr.en.eq(self.seg_set.valid),
        ]

        # The request being served.
        op = Signal(MapOp)
        lba = Signal(self.lba_bits)
        value = Signal(32)
        expected = Signal(32)
        set_index = Signal(self.set_bits)
        offset = Signal(self.line_bits)
        tag = Signal(self.tag_bits)
        m.d.comb += Cat(offset, set_index, tag).eq(lba)
        # the request's segment; its bit is read while TAGS looks at the tags
        segment = Signal(32)
        m.d.comb += [segment.eq(lba >> self.seg_shift), seg_rd.addr.eq(segment), self.fault_seg.eq(segment)]
        seg_ready = Signal()
        m.d.comb += seg_ready.eq(~self.lazy | (segment >= self.segments) | seg_rd.data)
        waited = Signal()   # this request has counted in `faults`

        tagword = Signal(set_layout)   # the set's tags, as read (and then edited)
        way = Signal(max(1, self.way_bits))  # the way being served / evicted
        hit = Signal()
        word = Signal(self.line_bits + 1)
        sweeping = Signal()            # FLUSH walks every set and way
        error = Signal()
        old = Signal(32)

        def line_addr(w, i):
            return Cat(i[:self.line_bits], w, set_index)

        def table_word(t, s, i):
            """Word address in SoC memory of entry i of the line (t, s)."""
            return (self.table_base >> 2) + Cat(i[:self.line_bits], s, t)

        # Tag reads are synchronous: while idle, address the incoming request's
        # set so its tags are ready in TAGS.
        req_set = self.req.payload.lba[self.line_bits:self.line_bits + self.set_bits]
        m.d.comb += [
            tag_rd.addr.eq(set_index),
            tag_wr.addr.eq(set_index),
            tag_wr.data.eq(tagword),
        ]

        # Hit detection on the freshly read tags, registered (``way_hits``) before the lookup decides: the
        # tag memory's read, the tag compares and everything a hit or a miss sets were one long path.
        way_hits = Signal(ways)
        fresh_hits = Cat(*((tag_rd.data.way[w].valid & (tag_rd.data.way[w].tag == tag)) for w in range(ways)))
        hit_way = Signal.like(way)
        any_hit = Signal()
        for w in reversed(range(ways)):
            with m.If(way_hits[w]):
                m.d.comb += [any_hit.eq(1), hit_way.eq(w)]

        m.d.comb += [
            self.resp.payload.old.eq(old),
            self.resp.payload.hit.eq(hit),
            self.resp.payload.error.eq(error),
        ]

        victim = tagword.way[way]
        cas_equal = Signal()         # the entry read for a CAS equals ``expected``

        def write_entry():
            m.d.comb += [line_wr.addr.eq(line_addr(way, offset)), line_wr.data.eq(value), line_wr.en.eq(1)]
            m.d.sync += [self.resp.payload.updated.eq(1), victim.dirty.eq(1)]
            m.next = "MARK_DIRTY"

        with m.FSM():
            with m.State("IDLE"):
                m.d.comb += [self.req.ready.eq(1), tag_rd.addr.eq(req_set)]
                with m.If(self.req.valid):
                    m.d.sync += [
                        op.eq(self.req.payload.op),
                        lba.eq(self.req.payload.lba),
                        value.eq(self.req.payload.value),
                        expected.eq(self.req.payload.expected),
                        error.eq(0),
                        self.resp.payload.updated.eq(0),
                    ]
                    with m.Switch(self.req.payload.op):
                        with m.Case(MapOp.FLUSH, MapOp.INVALIDATE):
                            m.d.sync += [lba.eq(0), way.eq(0), sweeping.eq(1)]
                            m.next = "SWEEP_TAGS"
                        with m.Default():
                            m.d.sync += sweeping.eq(0)
                            m.next = "TAGS"

            # -- lookups ----------------------------------------------------------
            with m.State("TAGS"):
                m.d.sync += [tagword.eq(tag_rd.data), way_hits.eq(fresh_hits), word.eq(0)]
                m.next = "LOOKUP"
            with m.State("LOOKUP"):
                m.d.sync += hit.eq(any_hit)
                with m.If(any_hit):
                    m.d.sync += [way.eq(hit_way), self.hits.eq(self.hits + 1)]
                    m.next = "READ_ENTRY"
                with m.Else():
                    m.d.sync += [way.eq(tagword.victim), self.misses.eq(self.misses + 1), waited.eq(0)]
                    m.next = "GATE"

            with m.State("GATE"):
                # a miss: its segment must be in memory before a line of it is filled
                with m.If(seg_ready):
                    with m.If(victim.valid & victim.dirty):
                        m.next = "WRITEBACK_READ"
                    with m.Else():
                        m.next = "FILL"
                with m.Else():
                    m.d.comb += self.fault.eq(1)
                    with m.If(~waited):
                        m.d.sync += [waited.eq(1), self.faults.eq(self.faults + 1)]

            with m.State("FILL"):
                wishbone.word_access(m, self.dma, table_word(tag, set_index, word))
                m.d.comb += [line_wr.addr.eq(line_addr(way, word)), line_wr.data.eq(self.dma.dat_r)]
                with m.If(self.dma.err):
                    m.d.sync += error.eq(1)
                    m.next = "RESPOND"
                with m.Elif(self.dma.ack):
                    m.d.comb += line_wr.en.eq(1)
                    m.d.sync += word.eq(word + 1)
                    with m.If(word == line - 1):
                        m.d.sync += [
                            victim.valid.eq(1), victim.dirty.eq(0), victim.tag.eq(tag),
                            tagword.victim.eq(tagword.victim + 1),
                        ]
                        m.next = "FILLED"
            with m.State("FILLED"):
                m.d.comb += tag_wr.en.eq(1)
                m.next = "READ_ENTRY"

            with m.State("READ_ENTRY"):
                m.d.comb += [line_rd.addr.eq(line_addr(way, offset))]
                m.next = "UPDATE"
            with m.State("UPDATE"):
                current = line_rd.data
                m.d.sync += [old.eq(current), cas_equal.eq(current == expected)]
                with m.If(op == MapOp.WRITE):
                    write_entry()
                with m.Elif(op == MapOp.CAS):
                    # the compare is registered before the decision: the line's read, a 32-bit compare
                    # and the write, dirty and state logic behind it were one path
                    m.next = "DECIDE_THE_CAS"
                with m.Else():
                    m.next = "RESPOND"
            with m.State("DECIDE_THE_CAS"):
                with m.If(cas_equal):
                    write_entry()
                with m.Else():
                    m.next = "RESPOND"
            with m.State("MARK_DIRTY"):
                m.d.comb += tag_wr.en.eq(1)
                m.next = "RESPOND"

            # -- write-back of `way` in `set_index` (eviction or flush) -----------
            with m.State("WRITEBACK_READ"):
                m.d.comb += line_rd.addr.eq(line_addr(way, word))
                m.next = "WRITEBACK_WRITE"
            with m.State("WRITEBACK_WRITE"):
                m.d.comb += line_rd.addr.eq(line_addr(way, word))  # hold the read data
                wishbone.word_access(m, self.dma, table_word(victim.tag, set_index, word), line_rd.data)
                with m.If(self.dma.err):
                    m.d.sync += error.eq(1)
                    m.next = "RESPOND"
                with m.Elif(self.dma.ack):
                    m.d.sync += word.eq(word + 1)
                    m.next = "WRITEBACK_READ"
                    with m.If(word == line - 1):
                        m.d.sync += [self.writebacks.eq(self.writebacks + 1), word.eq(0), victim.dirty.eq(0)]
                        with m.If(sweeping):
                            m.next = "SWEEP_STORE"
                        with m.Else():
                            m.next = "FILL"

            # -- FLUSH / INVALIDATE: every set, every way --------------------------
            with m.State("SWEEP_TAGS"):
                m.next = "SWEEP_LOAD"  # tag_rd.addr follows set_index; data next cycle
            with m.State("SWEEP_LOAD"):
                m.d.sync += [tagword.eq(tag_rd.data), way.eq(0), word.eq(0)]
                with m.If(op == MapOp.INVALIDATE):
                    m.d.sync += tagword.eq(0)
                    m.next = "SWEEP_STORE_ALL"
                with m.Else():
                    m.next = "SWEEP_WAY"
            with m.State("SWEEP_WAY"):
                with m.If(victim.valid & victim.dirty):
                    m.next = "WRITEBACK_READ"
                with m.Else():
                    m.next = "SWEEP_STORE"
            with m.State("SWEEP_STORE"):
                with m.If(way == ways - 1):
                    m.next = "SWEEP_STORE_ALL"
                with m.Else():
                    m.d.sync += way.eq(way + 1)
                    m.next = "SWEEP_WAY"
            with m.State("SWEEP_STORE_ALL"):
                m.d.comb += tag_wr.en.eq(1)
                next_lba = lba + (1 << self.line_bits)
                m.d.sync += lba.eq(next_lba)
                with m.If(set_index == self.sets - 1):
                    m.next = "RESPOND"
                with m.Else():
                    m.next = "SWEEP_TAGS"

            with m.State("RESPOND"):
                m.d.comb += self.resp.valid.eq(1)
                with m.If(self.resp.ready):
                    m.next = "IDLE"
        return m
