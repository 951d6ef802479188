"""The NAND controller top: ``channels`` independent channels behind one
descriptor stream and one completion stream.

Channels share nothing but the timing registers (every target of a board
runs the same ONFI mode), so they scale linearly: a descriptor is routed by
its ``channel`` field; a descriptor naming a channel that does not exist is
completed here with ``BAD_CHANNEL``.  Completions of all channels are merged
round-robin.  Each channel keeps its own page buffer port (``buf[c]``), so
the FTL/DMA side can fill one channel's slots while another transfers.
"""

from __future__ import annotations

from amaranth.hdl import Cat, Module, Signal
from amaranth.lib import stream, wiring
from amaranth.lib.wiring import In, Out

from atomflash import spec
from atomflash.spec import NandResult
from rtl import spec as layouts
from rtl.lib.roundrobin import round_robin

from .channel import ChannelParams, NandChannel
from .pagebuf import BufferPortSignature
from .phy import OnfiBusSignature
from .timing import TIMING

__all__ = ["NandController"]


class NandController(wiring.Component):
    """``channels`` x :class:`NandChannel`.

    Ports
    -----
    desc : In(stream of ``rtl.spec.NAND_DESC``)
        Descriptors for every channel (routed by ``desc.channel``).
    cpl : Out(stream of ``rtl.spec.NAND_CPL``)
        Completions of every channel.
    buf : In(BufferPortSignature).array(channels)
        Page buffer port of each channel (see :class:`NandChannel`).
    timing : In(TIMING)
        ONFI timing in cycles, shared by all channels.
    bus : Out(OnfiBusSignature(ways)).array(channels)
        ONFI pins of each channel.
    busy : Out(channels)
        Channel ``c`` has descriptors queued or executing.
    """

    def __init__(self, params: ChannelParams | None = None, channels: int = spec.NAND_DEFAULTS.CHANNELS):
        self.p = params or ChannelParams()
        self.channels = channels
        self._chans = [NandChannel(self.p, channel_index=c) for c in range(channels)]
        buf_sig = self._chans[0].buf.signature
        self.slot_words = self._chans[0].slot_words
        super().__init__({
            "desc": In(stream.Signature(layouts.NAND_DESC)),
            "cpl": Out(stream.Signature(layouts.NAND_CPL)),
            "buf": In(BufferPortSignature(buf_sig.addr_width, 32)).array(self.channels),
            "timing": In(TIMING),
            "bus": Out(OnfiBusSignature(self.p.ways)).array(self.channels),
            "busy": Out(channels),
        })

    def elaborate(self, platform):
        m = Module()
        C = self.channels
        for c, ch in enumerate(self._chans):
            m.submodules[f"channel{c}"] = ch
            wiring.connect(m, wiring.flipped(self.buf[c]), ch.buf)
            wiring.connect(m, wiring.flipped(self.bus[c]), ch.bus)
            m.d.comb += [ch.timing.eq(self.timing), self.busy[c].eq(ch.busy)]

        # route descriptors; a nonexistent channel completes here
        d = self.desc.payload
        bad_cpl = Signal(layouts.NAND_CPL)
        m.d.comb += [bad_cpl.tag.eq(d.tag), bad_cpl.result.eq(NandResult.BAD_CHANNEL),
                     bad_cpl.channel.eq(d.channel), bad_cpl.target.eq(d.target)]
        # one register more than strictly needed, so that it takes as long as a
        # channel's (registered) check: completions keep their issue order
        bad_stage = Signal()
        bad_staged = Signal(layouts.NAND_CPL)
        bad_pending = Signal()
        bad_held = Signal(layouts.NAND_CPL)
        for c, ch in enumerate(self._chans):
            m.d.comb += ch.desc.payload.eq(d)
            with m.If(d.channel == c):
                m.d.comb += [ch.desc.valid.eq(self.desc.valid), self.desc.ready.eq(ch.desc.ready)]
        with m.If(bad_stage & ~bad_pending):
            m.d.sync += [bad_pending.eq(1), bad_held.eq(bad_staged), bad_stage.eq(0)]
        with m.If(d.channel >= C):
            m.d.comb += self.desc.ready.eq(~bad_stage)
            with m.If(self.desc.valid & ~bad_stage):
                m.d.sync += [bad_stage.eq(1), bad_staged.eq(bad_cpl)]

        # merge completions round-robin (the error path is one more source)
        sources = [(ch.cpl.valid, ch.cpl.payload, ch.cpl.ready) for ch in self._chans]
        sources.append((bad_pending, bad_held, None))
        n = len(sources)
        last = Signal(range(n))
        valids = Cat(v for v, _, _ in sources)
        grant, any_ = round_robin(m, valids, last, n)
        m.d.comb += self.cpl.valid.eq(any_)
        for idx, (valid, payload, ready) in enumerate(sources):
            with m.If(grant == idx):
                m.d.comb += self.cpl.payload.eq(payload)
                if ready is not None:
                    m.d.comb += ready.eq(self.cpl.ready)
            with m.If(any_ & self.cpl.ready & (grant == idx)):
                m.d.sync += last.eq(idx)
                if ready is None:
                    m.d.sync += bad_pending.eq(0)
        return m
