"""Page buffer: BRAM slots shared by the FTL/DMA side and the NAND bus side.

Four ``amaranth.lib.memory.Memory`` byte lanes (together 32-bit words) hold
``slots`` page images of ``slot_bytes`` (a whole page, spare included), slot
``s`` at byte ``s * slot_bytes``.  Each side has one address and a read and a
write port on it -- a true dual-port BRAM (ECP5 DP16KD, iCE40 needs two):

* ``host``: 32-bit words with byte enables, for the FTL/DMA/CPU;
* ``chan``: bytes, for the channel's data movers (lane picked from the byte
  address; reads and writes are never in the same cycle).

Both sides' addresses, enables and data reach the block RAMs from registers
next to them: the FTL's users and the channel's ECC corrector sit across the
die, and an address fans out to every block RAM of the buffer.  So a read's
data comes :data:`HOST_READ_LATENCY` / :data:`CHAN_READ_LATENCY` (two) cycles
after its address, and a write lands a cycle after it was driven; reads and
writes keep their order, so a read after a write through the same port sees
it.  There is no arbitration between the sides: the FTL owns a slot until it
issues a descriptor naming it and gets it back with the completion.
"""

from __future__ import annotations

from amaranth.hdl import Module, Signal
from amaranth.lib import memory, wiring
from amaranth.lib.wiring import In, Out

__all__ = ["ArbitratedBufferSignature", "BufferPortSignature", "CHAN_READ_LATENCY", "HOST_READ_LATENCY", "PageBuffer"]

HOST_READ_LATENCY = 2   # cycles from a host address to its r_data: the register stage, then the BRAM's
CHAN_READ_LATENCY = 2   # the same for the channel's byte port


class BufferPortSignature(wiring.Signature):
    """A synchronous RAM port seen from its user: ``r_data`` is the word at
    the ``addr`` of a fixed number of cycles before (the page buffer's
    ``host`` port: :data:`HOST_READ_LATENCY`; its ``chan`` port:
    :data:`CHAN_READ_LATENCY`);
    ``w_en`` has one bit per ``granularity`` lane."""

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
        Word ``w`` of slot ``s`` is at ``s * slot_words + w``; read data
        :data:`HOST_READ_LATENCY` cycles after the address.
    chan : In(BufferPortSignature(byte address, 8))
        Byte ``b`` of slot ``s`` is at ``s * slot_bytes + b``; read data
        :data:`CHAN_READ_LATENCY` cycles after the address.
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
        # both sides through registers: their users' logic is far away, the address fans out wide
        def staged(port, latency, side):
            addr, w_en, w_data = port.addr, port.w_en, port.w_data
            for stage in range(latency - 1):
                addr_q = Signal.like(addr, name=f"{side}_addr_q{stage}")
                w_en_q = Signal.like(w_en, name=f"{side}_w_en_q{stage}")
                w_data_q = Signal.like(w_data, name=f"{side}_w_data_q{stage}")
                m.d.sync += [addr_q.eq(addr), w_en_q.eq(w_en), w_data_q.eq(w_data)]
                addr, w_en, w_data = addr_q, w_en_q, w_data_q
            return addr, w_en, w_data
        host_addr, host_w_en, host_w_data = staged(self.host, HOST_READ_LATENCY, "host")
        chan_addr, chan_w_en, chan_w_data = staged(self.chan, CHAN_READ_LATENCY, "chan")

        # One 8-bit memory per byte lane: each is a plain true dual-port RAM
        # (one address per side), which every FPGA BRAM maps; a single 32-bit
        # memory with byte enables on both ports does not fit ECP5's DP16KD.
        word = chan_addr[2:]
        lane = chan_addr[:2]
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
                host_r.addr.eq(host_addr), host_w.addr.eq(host_addr),
                host_w.en.eq(host_w_en[i]), host_w.data.eq(host_w_data[8 * i:8 * i + 8]),
                self.host.r_data[8 * i:8 * i + 8].eq(host_r.data),
                chan_r.addr.eq(word), chan_w.addr.eq(word),
                chan_w.en.eq(chan_w_en & (lane == i)), chan_w.data.eq(chan_w_data),
            ]
            chan_bytes.append(chan_r.data)
        with m.Switch(lane_q):
            for i in range(4):
                with m.Case(i):
                    m.d.comb += self.chan.r_data.eq(chan_bytes[i])
        return m
