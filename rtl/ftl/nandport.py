"""Sharing the NAND controller's descriptor port.

The log writer, the read path and the firmware all issue NAND operations
(programs; reads; resets, erases and recovery's OOB scans).  ``NandPortMux``
gives each its own descriptor/completion stream pair: descriptors are taken
round-robin, one per handshake; the requester's index travels in the top bits
of the tag and routes the completion back, with the requester's own tag
restored.  A requester may therefore use tags below ``2 ** (16 - k)``
(``k = ceil(log2(n))``); larger tags are a requester bug, and the mux drops
their top bits (``tag_error`` counts it).
"""

from amaranth import Cat, Const, Module, Signal
from amaranth.lib import stream, wiring
from amaranth.lib.wiring import In, Out
from amaranth.utils import ceil_log2

from atomflash.spec import NandOp
from rtl import spec as layouts
from rtl.lib.roundrobin import round_robin

__all__ = ["NandPortMux", "page_desc"]


def page_desc(desc, opcode, ppa, *, length, slot, tag=0) -> list:
    """Statements filling NAND descriptor ``desc`` for a whole-page operation
    on ``ppa`` (a ``spec.PPA`` field view) from column 0."""
    return [desc.opcode.eq(opcode), desc.channel.eq(ppa.channel), desc.target.eq(ppa.way),
            desc.lun.eq(ppa.lun), desc.block.eq(ppa.block), desc.page.eq(ppa.page), desc.column.eq(0),
            desc.length.eq(length), desc.slot.eq(slot), desc.tag.eq(tag)]

TAG_BITS = 16


class NandPortMux(wiring.Component):
    """``n`` descriptor/completion stream pairs onto one NandController.

    Ports
    -----
    desc_in : In(stream of NAND_DESC).array(n) / cpl_out : Out(stream of NAND_CPL).array(n)
        The requesters' ports.
    desc : Out(stream of NAND_DESC) / cpl : In(stream of NAND_CPL)
        To and from the controller.
    tag_error : Out(16)
        Descriptors whose tag did not fit ``TAG_BITS - k`` bits.
    reads, programs, erases : Out(32)
        Page reads, page programs and block erases sent to the controller since reset, whoever asked.
    """

    def __init__(self, n: int):
        if n < 1:
            raise ValueError("need at least one requester")
        self.n = n
        self.k = max(1, ceil_log2(n))
        super().__init__({
            "desc_in": In(stream.Signature(layouts.NAND_DESC)).array(n),
            "cpl_out": Out(stream.Signature(layouts.NAND_CPL)).array(n),
            "desc": Out(stream.Signature(layouts.NAND_DESC)),
            "cpl": In(stream.Signature(layouts.NAND_CPL)),
            "tag_error": Out(16),
            "reads": Out(32),
            "programs": Out(32),
            "erases": Out(32),
        })

    def elaborate(self, platform):
        m = Module()
        n, k = self.n, self.k
        low = TAG_BITS - k

        # descriptors: round-robin among valid requesters; the grant moves after a handshake
        last = Signal(range(max(n, 2)))
        grant, any_valid = round_robin(m, [src.valid for src in self.desc_in], last, n)
        for i, src in enumerate(self.desc_in):
            with m.If(grant == i):
                m.d.comb += [self.desc.payload.eq(src.payload),
                             self.desc.payload.tag.eq(Cat(src.payload.tag[:low], Const(i, k))),
                             src.ready.eq(self.desc.ready)]
                with m.If(src.valid & self.desc.ready & (src.payload.tag[low:] != 0)):
                    m.d.sync += self.tag_error.eq(self.tag_error + 1)
        m.d.comb += self.desc.valid.eq(any_valid)
        with m.If(any_valid & self.desc.ready):
            m.d.sync += last.eq(grant)
            with m.Switch(self.desc.payload.opcode):
                with m.Case(NandOp.READ):
                    m.d.sync += self.reads.eq(self.reads + 1)
                with m.Case(NandOp.PROGRAM):
                    m.d.sync += self.programs.eq(self.programs + 1)
                with m.Case(NandOp.ERASE):
                    m.d.sync += self.erases.eq(self.erases + 1)

        # completions: back to the requester named by the tag's top bits, tag restored
        owner = self.cpl.payload.tag[low:]
        for i, dst in enumerate(self.cpl_out):
            m.d.comb += [dst.payload.eq(self.cpl.payload), dst.payload.tag.eq(self.cpl.payload.tag[:low])]
            with m.If(owner == i):
                m.d.comb += [dst.valid.eq(self.cpl.valid), self.cpl.ready.eq(dst.ready)]
        return m
