"""Memory copier: words from one SoC-memory buffer to another over one bursting Wishbone initiator.

A write into the write cache copies a host page from the host's buffer into a cache page, both in
SoC memory.  Copied a word at a time, a classic read then a classic write, each word costs two bus
accesses with their turnarounds, about six cycles, and a 4 KiB page about six thousand.  On one
bus every word still crosses twice (once in, once out), so two cycles a word is the floor; this
block comes close to it by moving words in bursts.

A copy goes in chunks of up to ``chunk`` words.  For each, an incrementing burst (``rtl.lib.wishbone``)
reads the words from the source into a small buffer (LUT RAM), then an incrementing burst writes them
from the buffer to the destination.  A target that bursts (LiteX's ``wishbone.SRAM`` on a bus with
``bursting``) answers a burst's accesses a cycle apart after the first, so a chunk costs about
``2 * chunk + 2`` cycles, plus one cycle between chunks; a target that does not burst answers every
access classically, a word every two cycles each way, and the copy still works.  Every beat but a
burst's last is tagged ``CTI_INCREMENTING`` and the last ``CTI_END``; the tag comes from a register,
as in ``rtl.ftl.dma``, because a bus stage (``RegisteredInitiator``) gates its answer to a posted
write with it.

A chunk (its read burst and its write burst) is one bus cycle: ``cyc`` drops for a cycle between
chunks, so an arbiter in front (``wishbone.Arbiter`` grants a whole cycle) can let another initiator
in.  ``chunk`` thus sets both the buffer's size and how long the copier holds the bus at a time;
bigger chunks spread the two first-access turnarounds over more words.

The buffer is written straight from the bus's answer and read asynchronously by the write burst's
beat counter, so a word read in one cycle can be written out in the next (a one-word chunk too), and
everything the copier drives on the bus comes from registers or the buffer's read.

A bus ``err`` ends the copy at once and ``done`` tells which side refused (``CopyError.READ`` or
``WRITE``).  The words written before it stay written; nothing is written past it, and a read error
leaves the chunk it hit unwritten.  The caller treats the whole copy as failed.
"""

from amaranth import Module, Mux, Signal
from amaranth.lib import data, enum, memory, stream, wiring
from amaranth.lib.wiring import In, Out

from rtl.lib import wishbone
from rtl.lib.lutram import read_async

__all__ = ["CopyError", "MemoryCopier", "copy_request_layout"]


class CopyError(enum.Enum, shape=2):
    NONE = 0
    READ = 1     # the source answered err
    WRITE = 2    # the destination answered err


copy_request_layout = data.StructLayout({
    "src": 32,       # byte address, 4-byte aligned
    "dst": 32,       # byte address, 4-byte aligned
    "words": 16,     # 0..65535 (0: done at once, no bus access)
})


class MemoryCopier(wiring.Component):
    """Copies ``words`` 32-bit words from ``src`` to ``dst``; see the module docstring.

    Parameters
    ----------
    chunk : int
        Words per burst (a power of two): the buffer's depth, and the words moved per bus cycle.

    Ports
    -----
    req : In(stream.Signature(copy_request_layout))
        A copy; taken only while the copier is idle.
    done : Out(stream.Signature(data.StructLayout({"error": CopyError})))
        One per request, after its last word is written (or the bus refused an access).
    bus : Out(wishbone.Signature(addr_width=30, data_width=32, burst=True))
        SoC memory; word addresses, every lane.  Overlapping ranges copy right only when ``dst`` is
        at or below ``src`` (every word is then read before a write reaches it).
    """

    def __init__(self, chunk: int = 16):
        if chunk < 1 or chunk & (chunk - 1):
            raise ValueError(f"chunk {chunk} is not a power of two")
        self.chunk = chunk
        super().__init__({
            "req": In(stream.Signature(copy_request_layout)),
            "done": Out(stream.Signature(data.StructLayout({"error": CopyError}))),
            "bus": Out(wishbone.Signature(addr_width=30, data_width=32, burst=True)),
        })

    def elaborate(self, platform):
        m = Module()
        chunk, bus = self.chunk, self.bus
        src = Signal(30)                    # word addresses of the next access on each side
        dst = Signal(30)
        left = Signal(16)                   # words not yet written
        size = Signal(range(chunk + 1))     # words in the current chunk: min(chunk, left)
        beat = Signal(range(chunk))         # the access's place in its burst (and in the buffer)
        last = Signal()    # the access on the bus is its burst's last: registered, so the tag comes from
                           # a flip-flop (a bus stage may gate its answer with it)
        error = Signal(CopyError)

        m.submodules.buffer = buffer = memory.Memory(shape=32, depth=chunk, init=[])
        wr = buffer.write_port()
        word_out = read_async(m, buffer, beat)
        m.d.comb += [wr.addr.eq(beat), wr.data.eq(bus.dat_r)]

        m.d.comb += [
            bus.cti.eq(Mux(last, wishbone.CTI_END, wishbone.CTI_INCREMENTING)),
            bus.bte.eq(0),
            self.done.payload.error.eq(error),
        ]

        def start_chunk(words_left):
            # the next chunk's size and its first beat's tag, worked out ahead from registers
            n = Mux(words_left < chunk, words_left, chunk)
            m.d.sync += [size.eq(n), beat.eq(0), last.eq(n == 1)]

        with m.FSM():
            with m.State("IDLE"):
                m.d.comb += self.req.ready.eq(1)
                with m.If(self.req.valid):
                    p = self.req.payload
                    m.d.sync += [src.eq(p.src[2:]), dst.eq(p.dst[2:]), left.eq(p.words),
                                 error.eq(CopyError.NONE)]
                    start_chunk(p.words)
                    with m.If(p.words == 0):
                        m.next = "DONE"
                    with m.Else():
                        m.next = "READ"

            with m.State("READ"):
                wishbone.word_access(m, bus, src)
                with m.If(bus.err):
                    m.d.sync += error.eq(CopyError.READ)
                    m.next = "DONE"
                with m.Elif(bus.ack):
                    m.d.comb += wr.en.eq(1)
                    m.d.sync += src.eq(src + 1)
                    with m.If(last):
                        # the write burst follows in the same bus cycle, from the buffer's first word
                        m.d.sync += [beat.eq(0), last.eq(size == 1)]
                        m.next = "WRITE"
                    with m.Else():
                        m.d.sync += [beat.eq(beat + 1), last.eq(beat + 2 == size)]

            with m.State("WRITE"):
                wishbone.word_access(m, bus, dst, word_out)
                with m.If(bus.err):
                    m.d.sync += error.eq(CopyError.WRITE)
                    m.next = "DONE"
                with m.Elif(bus.ack):
                    m.d.sync += [dst.eq(dst + 1), left.eq(left - 1)]
                    with m.If(last):
                        start_chunk(left - 1)
                        with m.If(left == 1):
                            m.next = "DONE"
                        with m.Else():
                            m.next = "BETWEEN_CHUNKS"
                    with m.Else():
                        m.d.sync += [beat.eq(beat + 1), last.eq(beat + 2 == size)]

            with m.State("BETWEEN_CHUNKS"):
                # cyc low for a cycle: an arbiter may grant another initiator before the next chunk
                m.next = "READ"

            with m.State("DONE"):
                m.d.comb += self.done.valid.eq(1)
                with m.If(self.done.ready):
                    m.next = "IDLE"
        return m
