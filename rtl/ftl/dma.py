"""Buffer DMA: copies words between SoC memory and a channel page buffer.

Host data reaches flash in two hops: this engine copies it from the host's
buffer in SoC memory (Wishbone) into a page-buffer slot (``rtl.nand.pagebuf``),
then the channel streams the slot onto the NAND bus; reads go the other way.
One request moves ``words`` 32-bit words in one direction and answers once on
``done`` (with ``error`` when the bus answered ``err``; words already copied
stay copied, the caller treats the whole transfer as failed).

The copy is one incrementing Wishbone burst (``rtl.lib.wishbone``): a word a
cycle from a target that bursts, a word every two from one that does not.
The page buffer keeps up either way: toward memory its next word is read
in the cycle a word is taken, so it is there for the next access.
"""

from amaranth import Module, Mux, Signal
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

from rtl.lib import wishbone
from rtl.nand.pagebuf import BufferPortSignature


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
        buf_addr = Signal(self.buf_addr_width)
        left = Signal(16)
        last = Signal()    # the access on the bus is the copy's last: registered, so the tag comes from
                           # a flip-flop (a bus stage may gate its answer with it)
        error = Signal()

        taken = Signal()   # a word's access answered this cycle: toward memory the buffer reads the next one
        # the next word's address is kept ready in a register, so an answer only chooses between two
        # addresses on its way to the block RAM, and adds nothing
        buf_next = Signal(self.buf_addr_width)
        with m.If(taken):
            m.d.sync += buf_next.eq(buf_next + 1)
        with m.Else():
            m.d.sync += buf_next.eq(buf_addr + 1)   # right from the cycle after buf_addr is
        m.d.comb += [
            self.buf.addr.eq(Mux(taken & (direction == Direction.TO_MEMORY), buf_next, buf_addr)),
            self.buf.w_data.eq(self.bus.dat_r),
            self.done.payload.error.eq(error),
            self.bus.cti.eq(Mux(last, wishbone.CTI_END, wishbone.CTI_INCREMENTING)),
        ]

        with m.FSM():
            with m.State("IDLE"):
                m.d.comb += self.req.ready.eq(1)
                with m.If(self.req.valid):
                    p = self.req.payload
                    m.d.sync += [
                        direction.eq(p.direction),
                        mem_word.eq(p.mem_addr[2:]),
                        buf_addr.eq(p.buf_addr),
                        left.eq(p.words),
                        last.eq(p.words == 1),
                        error.eq(0),
                    ]
                    with m.If(p.words == 0):
                        m.next = "DONE"
                    with m.Elif(p.direction == Direction.TO_BUFFER):
                        m.next = "READ_MEMORY"
                    with m.Else():
                        m.next = "READ_BUFFER"

            with m.State("READ_MEMORY"):
                wishbone.word_access(m, self.bus, mem_word)
                with m.If(self.bus.err):
                    m.d.sync += error.eq(1)
                    m.next = "DONE"
                with m.Elif(self.bus.ack):
                    m.d.comb += self.buf.w_en.eq(0xF)
                    m.d.sync += [mem_word.eq(mem_word + 1), buf_addr.eq(buf_addr + 1), left.eq(left - 1),
                                 last.eq(left == 2)]
                    with m.If(left == 1):
                        m.next = "DONE"

            with m.State("READ_BUFFER"):
                m.next = "WRITE_MEMORY"  # the first word arrives one cycle after its address
            with m.State("WRITE_MEMORY"):
                wishbone.word_access(m, self.bus, mem_word, self.buf.r_data)
                with m.If(self.bus.err):
                    m.d.sync += error.eq(1)
                    m.next = "DONE"
                with m.Elif(self.bus.ack):
                    m.d.comb += taken.eq(1)
                    m.d.sync += [mem_word.eq(mem_word + 1), buf_addr.eq(buf_addr + 1), left.eq(left - 1),
                                 last.eq(left == 2)]
                    with m.If(left == 1):
                        m.next = "DONE"

            with m.State("DONE"):
                m.d.comb += self.done.valid.eq(1)
                with m.If(self.done.ready):
                    m.next = "IDLE"
        return m
