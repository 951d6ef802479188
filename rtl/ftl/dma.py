"""Buffer DMA: copies words between SoC memory and a channel page buffer.

Host data reaches flash in two hops: this engine copies it from the host's
buffer in SoC memory (Wishbone) into a page-buffer slot (``rtl.nand.pagebuf``),
then the channel streams the slot onto the NAND bus; reads go the other way.
One request moves ``words`` 32-bit words in one direction and answers once on
``done`` (with ``error`` when the bus answered ``err``; words already copied
stay copied, the caller treats the whole transfer as failed).

The copy is one incrementing Wishbone burst (``rtl.lib.wishbone``): a word a
cycle from a target that bursts, a word every two from one that does not.
The page buffer keeps up either way, and a bus answer (which may come from
across the die) never drives the block RAM: toward memory, words are read
ahead (each on its way ``HOST_READ_LATENCY`` cycles) into a small FIFO the
burst takes them from; toward the buffer, a word is written from registers
the cycle after it came.
"""

from amaranth import Array, Cat, Module, Mux, Signal
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out
from amaranth.utils import ceil_log2

from rtl.lib import wishbone
from rtl.nand.pagebuf import HOST_READ_LATENCY, BufferPortSignature


# words read ahead toward memory (a power of two: the FIFO's pointers wrap).  At a word a cycle the room
# check counts the words in flight, the one the bus takes this cycle (the level drops only in the next) and
# the one it issues.
AHEAD_DEPTH = 1 << ceil_log2(HOST_READ_LATENCY + 2)


class Direction:
    TO_BUFFER = 0    # SoC memory -> page buffer (writes, appends)
    TO_MEMORY = 1    # page buffer -> SoC memory (reads)


def request_layout(buf_addr_width: int) -> data.StructLayout:
    return data.StructLayout({
        "direction": 1,
        "mem_addr": 32,              # byte address, 4-byte aligned
        "buf_addr": buf_addr_width,  # word address in the page buffer
        "words": 16,                 # 1..65535
    })


class BufferDMA(wiring.Component):
    """Word copier between a Wishbone initiator and a page-buffer port.

    Ports
    -----
    req : In(stream.Signature(request_layout(buf_addr_width)))
    done : Out(stream.Signature(data.StructLayout({"error": 1})))
    bus : Out(wishbone.Signature(addr_width=30, burst=True))
    buf : Out(BufferPortSignature(buf_addr_width, 32))
    """

    def __init__(self, buf_addr_width: int):
        self.buf_addr_width = buf_addr_width
        super().__init__({
            "req": In(stream.Signature(request_layout(buf_addr_width))),
            "done": Out(stream.Signature(data.StructLayout({"error": 1}))),
            "bus": Out(wishbone.Signature(addr_width=30, data_width=32, burst=True)),
            "buf": Out(BufferPortSignature(buf_addr_width, 32)),
        })

    def elaborate(self, platform):
        m = Module()
        direction = Signal()
        mem_word = Signal(30)
        left = Signal(16)
        last = Signal()    # the access on the bus is the copy's last: registered, so the tag comes from
                           # a flip-flop (a bus stage may gate its answer with it)
        error = Signal()

        # Toward the buffer, a word the bus answered is written a cycle later from registers; toward
        # memory, words are read ahead into a small FIFO the bus takes them from.  A bus answer (which
        # comes from across the SoC) then never reaches the block RAM's address or enables.
        w_pending = Signal()
        w_addr = Signal(self.buf_addr_width)
        w_data = Signal(32)
        r_addr = Signal(self.buf_addr_width)
        r_left = Signal(16)         # words still to read ahead
        # reads on their way, one bit per cycle since the issue: the last bit's word is on r_data now
        r_inflight = Signal(HOST_READ_LATENCY)
        ahead = Array(Signal(32, name=f"ahead{i}") for i in range(AHEAD_DEPTH))
        ahead_rd = Signal(range(AHEAD_DEPTH))
        ahead_wr = Signal(range(AHEAD_DEPTH))
        ahead_level = Signal(range(AHEAD_DEPTH + 1))
        issue = Signal()
        pop = Signal()

        m.d.sync += w_pending.eq(0)
        with m.If(w_pending):
            m.d.sync += w_addr.eq(w_addr + 1)
        m.d.comb += [
            self.buf.addr.eq(Mux(direction == Direction.TO_MEMORY, r_addr, w_addr)),
            self.buf.w_en.eq(Mux(w_pending, 0xF, 0)),
            self.buf.w_data.eq(w_data),
            self.done.payload.error.eq(error),
            self.bus.cti.eq(Mux(last, wishbone.CTI_END, wishbone.CTI_INCREMENTING)),
        ]

        # the read-ahead: room for a word is counted from registers only (the FIFO's level and the
        # words in flight), so a read issued now always finds its place when its word comes
        with m.If(issue):
            m.d.sync += [r_addr.eq(r_addr + 1), r_left.eq(r_left - 1)]
        m.d.sync += r_inflight.eq(Cat(issue, r_inflight[:-1]))
        arriving = r_inflight[-1]
        with m.If(arriving):
            m.d.sync += [ahead[ahead_wr].eq(self.buf.r_data), ahead_wr.eq(ahead_wr + 1)]
        with m.If(pop):
            m.d.sync += ahead_rd.eq(ahead_rd + 1)
        m.d.sync += ahead_level.eq(ahead_level + arriving - pop)
        in_flight = sum(r_inflight)

        with m.FSM():
            with m.State("IDLE"):
                m.d.comb += self.req.ready.eq(1)
                with m.If(self.req.valid):
                    p = self.req.payload
                    m.d.sync += [
                        direction.eq(p.direction),
                        mem_word.eq(p.mem_addr[2:]),
                        w_addr.eq(p.buf_addr),
                        r_addr.eq(p.buf_addr),
                        r_left.eq(Mux(p.direction == Direction.TO_MEMORY, p.words, 0)),
                        ahead_rd.eq(0), ahead_wr.eq(0), ahead_level.eq(0),
                        r_inflight.eq(0),    # a transfer a bus error ended may leave reads on their way
                        left.eq(p.words),
                        last.eq(p.words == 1),
                        error.eq(0),
                    ]
                    with m.If(p.words == 0):
                        m.next = "DONE"
                    with m.Elif(p.direction == Direction.TO_BUFFER):
                        m.next = "READ_MEMORY"
                    with m.Else():
                        m.next = "WRITE_MEMORY"

            with m.State("READ_MEMORY"):
                wishbone.word_access(m, self.bus, mem_word)
                with m.If(self.bus.err):
                    m.d.sync += error.eq(1)
                    m.next = "DONE"
                with m.Elif(self.bus.ack):
                    m.d.sync += [w_pending.eq(1), w_data.eq(self.bus.dat_r)]
                    m.d.sync += [mem_word.eq(mem_word + 1), left.eq(left - 1), last.eq(left == 2)]
                    with m.If(left == 1):
                        m.next = "DONE"

            with m.State("WRITE_MEMORY"):
                m.d.comb += issue.eq((r_left != 0) & (ahead_level + in_flight < AHEAD_DEPTH))
                # the read-ahead keeps up once started, so the burst has a word for every beat
                with m.If(ahead_level != 0):
                    wishbone.word_access(m, self.bus, mem_word, ahead[ahead_rd])
                    with m.If(self.bus.err):
                        m.d.sync += error.eq(1)
                        m.next = "DONE"
                    with m.Elif(self.bus.ack):
                        m.d.comb += pop.eq(1)
                        m.d.sync += [mem_word.eq(mem_word + 1), left.eq(left - 1), last.eq(left == 2)]
                        with m.If(left == 1):
                            m.next = "DONE"

            with m.State("DONE"):
                # a word answered last is written to the buffer first
                m.d.comb += self.done.valid.eq(~w_pending)
                with m.If(self.done.ready & ~w_pending):
                    m.next = "IDLE"
        return m
