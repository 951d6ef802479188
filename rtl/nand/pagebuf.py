"""Page buffer: BRAM slots shared by the FTL/DMA side and the NAND bus side.

Four ``amaranth.lib.memory.Memory`` byte lanes (together 32-bit words) hold
``slots`` page images of ``slot_bytes`` (a whole page, spare included), slot
``s`` at byte ``s * slot_bytes``.  Each side has one address and a read and a
write port on it -- a true dual-port BRAM (ECP5 DP16KD, iCE40 needs two):

* ``host``: 32-bit words with byte enables, for the FTL/DMA/CPU;
* ``chan``: bytes, for the channel's data movers (lane picked from the byte
  address; reads and writes are never in the same cycle).

Both sides read with one cycle of latency.  There is no arbitration between
the sides: the FTL owns a slot until it issues a descriptor naming it and gets
it back with the completion.
"""

from __future__ import annotations

from amaranth.hdl import Module, Signal
from amaranth.lib import memory, wiring
from amaranth.lib.wiring import In, Out

__all__ = ["ArbitratedBufferSignature", "BufferPortSignature", "PageBuffer"]


class BufferPortSignature(wiring.Signature):
    """A synchronous RAM port seen from its user: ``r_data`` is the word at
    last cycle's ``addr``; ``w_en`` has one bit per ``granularity`` lane."""

    def __init__(self, addr_width: int, data_width: int, granularity: int = 8):
        self.addr_width, self.data_width, self.granularity = addr_width, data_width, granularity
        super().__init__({
            "addr": Out(addr_width),
            "w_en": Out(data_width // granularity),
            "w_data": Out(data_width),
            "r_data": In(data_width),
        })


class ArbitratedBufferSignature(wiring.Signature):
    """A shared buffer port seen from one user: the port plus ``request`` /
    ``grant`` (``rtl.ftl.bufport.BufferPortArbiter``).  The user drives the
    port while ``grant`` is high and holds ``request`` until it is done."""

    def __init__(self, addr_width: int):
        super().__init__({
            "request": Out(1),
            "grant": In(1),
            "port": Out(BufferPortSignature(addr_width, 32)),
        })


class PageBuffer(wiring.Component):
    """``slots`` page slots of ``slot_bytes`` each (a multiple of 4).

    Ports
    -----
    host : In(BufferPortSignature(word address, 32))
        Word ``w`` of slot ``s`` is at ``s * slot_words + w``.
    chan : In(BufferPortSignature(byte address, 8))
        Byte ``b`` of slot ``s`` is at ``s * slot_bytes + b``.
    """

    def __init__(self, slots: int, slot_bytes: int):
        if slot_bytes % 4:
            raise ValueError("slot_bytes must be a multiple of 4")
        self.slots, self.slot_bytes = slots, slot_bytes
        self.slot_words = slot_bytes // 4
        self.depth = slots * self.slot_words
        super().__init__({
            "host": In(BufferPortSignature((self.depth - 1).bit_length(), 32)),
            "chan": In(BufferPortSignature((4 * self.depth - 1).bit_length(), 8)),
        })

    def elaborate(self, platform):
        m = Module()
        # One 8-bit memory per byte lane: each is a plain true dual-port RAM
        # (one address per side), which every FPGA BRAM maps; a single 32-bit
        # memory with byte enables on both ports does not fit ECP5's DP16KD.
        word = self.chan.addr[2:]
        lane = self.chan.addr[:2]
        lane_q = Signal(2)
        m.d.sync += lane_q.eq(lane)
        chan_bytes = []
        for i in range(4):
            mem = memory.Memory(shape=8, depth=self.depth, init=[])
            m.submodules[f"lane{i}"] = mem
            host_r = mem.read_port()
            host_w = mem.write_port()
            chan_r = mem.read_port()
            chan_w = mem.write_port()
            m.d.comb += [
                host_r.addr.eq(self.host.addr), host_w.addr.eq(self.host.addr),
                host_w.en.eq(self.host.w_en[i]), host_w.data.eq(self.host.w_data[8 * i:8 * i + 8]),
                self.host.r_data[8 * i:8 * i + 8].eq(host_r.data),
                chan_r.addr.eq(word), chan_w.addr.eq(word),
                chan_w.en.eq(self.chan.w_en & (lane == i)), chan_w.data.eq(self.chan.w_data),
            ]
            chan_bytes.append(chan_r.data)
        with m.Switch(lane_q):
            for i in range(4):
                with m.Case(i):
                    m.d.comb += self.chan.r_data.eq(chan_bytes[i])
        return m
