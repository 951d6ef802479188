"""Valid-page counts: the block table the firmware's GC reads.

Every time the FTL moves an LBA's binding from one page to another, the new
page's block gains a valid page and the old page's block loses one.  The
counts live in SoC memory as one 32-bit word per block (the firmware picks GC
victims from them), indexed die-major::

    index = die << block_shift | block,   die = (lun * ways + way) * channels + channel

with ``block_shift`` = ceil(log2(blocks per LUN)), set by the firmware from the
parameter page.  This block applies one rebind at a time as two
read-modify-write cycles on the bus; map traffic is one rebind per page, so
that is plenty.
"""

from amaranth import Cat, Module, Mux, Signal
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out
from amaranth.utils import exact_log2

from atomflash import spec
from rtl import spec as layouts
from rtl.lib import wishbone

REBIND = data.StructLayout({"old": layouts.PPA, "new": layouts.PPA})


class BlockTable(wiring.Component):
    """Keeps per-block valid-page counts in SoC memory.

    Ports
    -----
    rebind : In(stream.Signature(REBIND))
        A binding moved from ``old`` to ``new``; either may be
        ``spec.PPA_UNMAPPED`` (a first write, a trim).
    table_base : In(32)
        Byte address of the table.
    block_shift : In(5)
        log2 of the per-die stride in entries.
    dma : Out(wishbone.Signature(addr_width=30))
    errors : Out(16)
        Bus errors seen (the count is then wrong; the firmware rebuilds it).
    """

    def __init__(self, *, channels: int, ways: int, luns: int = 1):
        for v in (channels, ways, luns):
            exact_log2(v)
        self.channels, self.ways, self.luns = channels, ways, luns
        super().__init__({
            "rebind": In(stream.Signature(REBIND)),
            "table_base": In(32),
            "block_shift": In(5),
            "dma": Out(wishbone.Signature(addr_width=30, data_width=32)),
            "errors": Out(16),
        })

    def index_of(self, ppa):
        """Table index of PPA view ``ppa`` (the ``spec.PPA`` layout)."""
        f = ppa.ppa
        ch_bits, way_bits = exact_log2(self.channels), exact_log2(self.ways)
        die = Cat(f.channel[:ch_bits], f.way[:way_bits], f.lun[:exact_log2(self.luns)])
        return (die << self.block_shift) | f.block

    def elaborate(self, platform):
        m = Module()
        held = Signal(REBIND)
        second = Signal()        # 0: adding to new, 1: taking from old
        word = Signal(32)
        index = Signal(32)

        target = Signal.like(held.new)
        m.d.comb += [
            target.eq(Mux(second, held.old, held.new)),
            index.eq(self.index_of(target)),
        ]
        counter = (self.table_base >> 2) + index

        def unmapped(p):
            return p.as_value() == spec.PPA_UNMAPPED

        with m.FSM():
            with m.State("IDLE"):
                m.d.comb += self.rebind.ready.eq(1)
                with m.If(self.rebind.valid):
                    m.d.sync += [held.eq(self.rebind.payload), second.eq(0)]
                    m.next = "NEXT"
            with m.State("NEXT"):
                with m.If(~second & (unmapped(held.new) | (held.new.as_value() == held.old.as_value()))):
                    m.d.sync += second.eq(1)  # nothing to add (or nothing changes at all)
                    with m.If(held.new.as_value() == held.old.as_value()):
                        m.next = "IDLE"
                with m.Elif(second & unmapped(held.old)):
                    m.next = "IDLE"
                with m.Else():
                    m.next = "READ"
            with m.State("READ"):
                wishbone.word_access(m, self.dma, counter)
                with m.If(self.dma.err):
                    m.d.sync += self.errors.eq(self.errors + 1)
                    m.next = "STEP"
                with m.Elif(self.dma.ack):
                    m.d.sync += word.eq(Mux(second, self.dma.dat_r - 1, self.dma.dat_r + 1))
                    m.next = "WRITE"
            with m.State("WRITE"):
                wishbone.word_access(m, self.dma, counter, word)
                with m.If(self.dma.err):
                    m.d.sync += self.errors.eq(self.errors + 1)
                    m.next = "STEP"
                with m.Elif(self.dma.ack):
                    m.next = "STEP"
            with m.State("STEP"):
                with m.If(second):
                    m.next = "IDLE"
                with m.Else():
                    m.d.sync += second.eq(1)
                    m.next = "NEXT"
        return m

