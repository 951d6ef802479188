"""Test top for the log writer: PageAllocator -> LogWriter -> NandController,
with a pattern memory standing in for SoC memory and a direct descriptor port
(through :class:`rtl.ftl.nandport.NandPortMux`) for what the firmware does
itself (RESET, ERASE, READ).

The pattern memory answers every Wishbone read with ``pattern_word(address)``
after one wait state, so page contents are known to the test without Python
touching the bus.
"""

from amaranth import Module, Signal
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

from rtl import spec as layouts
from rtl.ftl.allocator import PAGE_BITS, PageAllocator
from rtl.ftl.logwriter import PAGE_DONE, PAGE_WRITE, LogWriter
from rtl.ftl.nandport import NandPortMux
from rtl.nand.channel import ChannelParams
from rtl.nand.controller import NandController
from rtl.nand.phy import OnfiBusSignature
from rtl.nand.timing import TIMING

def pattern_word(word_address: int) -> int:
    """The pattern memory's word at ``word_address`` (byte address / 4)."""
    return (word_address * 0x9E3779B1 + (word_address >> 11)) & 0xFFFF_FFFF


def pattern_bytes(byte_address: int, length: int) -> bytes:
    words = range(byte_address // 4, (byte_address + length) // 4)
    return b"".join(pattern_word(w).to_bytes(4, "little") for w in words)


class LogWriterTop(wiring.Component):
    def __init__(self, profile="small", channels=2, ways=2, slots=4):
        self.params = ChannelParams(profile, ways=ways, slots=slots)
        self.channels = channels
        self.ctrl = NandController(self.params, channels=channels)
        self.slot_words = self.ctrl.slot_words
        self.alloc = PageAllocator(channels=channels, ways=ways)
        super().__init__({
            "desc": In(stream.Signature(layouts.NAND_DESC)),
            "cpl": Out(stream.Signature(layouts.NAND_CPL)),
            "timing": In(TIMING),
            "busy": Out(channels),
            "bus": Out(OnfiBusSignature(ways)).array(channels),
            "req": In(stream.Signature(PAGE_WRITE)),
            "done": Out(stream.Signature(PAGE_DONE)),
            "free": In(stream.Signature(self.alloc.free.payload.shape())),
            "seq_load": In(stream.Signature(64)),
            "pages_per_block": In(PAGE_BITS + 1),
            "starved": Out(1),
            "no_blocks": In(1),
        })

    def elaborate(self, platform):
        m = Module()
        m.submodules.ctrl = ctrl = self.ctrl
        m.submodules.alloc = alloc = self.alloc
        m.submodules.writer = writer = LogWriter(self.params, self.channels, self.slot_words)
        wiring.connect(m, alloc.alloc, writer.alloc)
        wiring.connect(m, wiring.flipped(self.req), writer.req)
        wiring.connect(m, wiring.flipped(self.done), writer.done)
        wiring.connect(m, wiring.flipped(self.free), alloc.free)
        wiring.connect(m, wiring.flipped(self.seq_load), alloc.seq_load)
        m.d.comb += [writer.give_up.eq(self.no_blocks & alloc.starved),      # as rtl/ftl/core.py wires it
                     alloc.demand.eq(writer.req.valid),
                     alloc.pages_per_block.eq(self.pages_per_block), self.starved.eq(alloc.starved),
                     ctrl.timing.eq(self.timing), self.busy.eq(ctrl.busy)]
        for c in range(self.channels):
            wiring.connect(m, wiring.flipped(self.bus[c]), ctrl.bus[c])
            wiring.connect(m, writer.buf[c].port, ctrl.buf[c])
            m.d.comb += writer.buf[c].grant.eq(writer.buf[c].request)   # sole user

        # descriptors: the log writer and the direct port share the controller
        m.submodules.port = port = NandPortMux(2)
        wiring.connect(m, writer.desc, port.desc_in[0])
        wiring.connect(m, port.cpl_out[0], writer.cpl)
        wiring.connect(m, wiring.flipped(self.desc), port.desc_in[1])
        wiring.connect(m, port.cpl_out[1], wiring.flipped(self.cpl))
        wiring.connect(m, port.desc, ctrl.desc)
        wiring.connect(m, ctrl.cpl, port.cpl)

        # pattern memory: one wait state, then ack with the pattern word
        bus = writer.bus
        ack = Signal()
        m.d.sync += ack.eq(bus.cyc & bus.stb & ~ack)
        m.d.comb += [bus.ack.eq(ack),
                     bus.dat_r.eq(bus.adr * 0x9E3779B1 + (bus.adr >> 11))]
        return m
