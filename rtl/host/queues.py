"""Host queue front-end: NVMe-shaped submission/completion queues in SoC memory.

How a host talks to atomflash
=============================

The host (a program on the SoC's CPU, or a remote host through a bridge) keeps
up to ``queue_pairs`` pairs of rings in memory the controller can reach over
its Wishbone initiator:

* a *submission queue* (SQ) of 64-byte ``spec.CMD`` entries, and
* a *completion queue* (CQ) of 16-byte ``spec.CPL`` entries,

both ``size`` entries long.  It programs each pair's base addresses and size
through the register window ``spec.HOST_REGS`` (writing ``size`` resets the
pair's indices), sets ``ctrl.enable``, writes commands into the SQ and rings
the ``sq_tail`` doorbell.  The front-end fetches entries (sixteen 32-bit reads)
in order, round-robin across pairs, and hands each to the FTL core on the
``cmd`` stream, tagged with its queue.  The core answers on ``cpl`` in any
order; the front-end writes the completion entry into the pair's CQ — the
word carrying the phase tag last, so a host polling the phase never sees a
half-written entry — advances ``cq_tail``, flips the phase on wrap and raises
``int_status.cq``.  The host consumes completions and writes ``cq_head``.

A completion is held back while its CQ is full (``cq_tail + 1 == cq_head``),
exactly as NVMe does.  Completions take priority over fetches so the core can
always drain.  Bad register writes (doorbell index >= size, misaligned base,
size not a power of two) are ignored and reported in ``status``; a bus error
on queue memory halts fetching until ``ctrl.enable`` is cleared.
"""

from amaranth import Array, Cat, Const, Module, Mux, Signal
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out
from amaranth.utils import ceil_log2, exact_log2

from atomflash import spec
from rtl import spec as layouts
from rtl.lib import wishbone

REGS = spec.HOST_REGS


def command_layout(queue_pairs: int) -> data.StructLayout:
    """Payload of the ``cmd`` stream: the fetched entry and its queue."""
    return data.StructLayout({"sqid": max(1, ceil_log2(queue_pairs)), "cmd": layouts.CMD})


def completion_layout(queue_pairs: int) -> data.StructLayout:
    """Payload of the ``cpl`` stream: what the core says about one command."""
    return data.StructLayout({
        "sqid": max(1, ceil_log2(queue_pairs)),
        "cid": 16,
        "status": 15,
        "result": 64,
    })


class HostQueues(wiring.Component):
    """NVMe-shaped queue engine between host memory and the FTL core.

    Parameters
    ----------
    queue_pairs : int
        SQ/CQ pairs (``spec.HOST_QUEUE_PAIRS`` by default; any count the
        register map has room for, not only powers of two).
    max_entries : int
        Largest queue size (a power of two), reported in ``max_entries``.

    Ports
    -----
    bus : In(wishbone.Signature(addr_width=6))
        The register window ``spec.HOST_REGS`` (word addressed).
    dma : Out(wishbone.Signature(addr_width=30))
        Initiator into queue memory (byte address = ``adr * 4``).
    cmd : Out(stream.Signature(command_layout(queue_pairs)))
        Fetched commands, in SQ order per queue.
    cpl : In(stream.Signature(completion_layout(queue_pairs)))
        Completions from the core, any order.
    irq : Out(1)
        ``int_status & int_enable`` is non-zero.
    hold : In(1)
        Fetch from the last pair only (in the SoC the firmware's own: its
        GC holds the host's pairs while it needs every erased page, and
        still reads, erases and checkpoints through its pair).  A command
        already fetched still goes to the core.
    """

    def __init__(self, *, queue_pairs: int = spec.HOST_QUEUE_PAIRS,
                 max_entries: int = spec.LIMITS.QUEUE_DEPTH):
        if queue_pairs > REGS["size"].count:
            raise ValueError(f"the register map has room for {REGS['size'].count} queue pairs, not {queue_pairs}")
        if queue_pairs < 1:
            raise ValueError(f"queue_pairs must be at least 1, not {queue_pairs}")
        exact_log2(max_entries)  # a power of two (queue_pairs need not be)
        self.queue_pairs = queue_pairs
        self.max_entries = max_entries
        super().__init__({
            "bus": In(wishbone.Signature(addr_width=exact_log2(REGS.size // 4), data_width=32)),
            "dma": Out(wishbone.Signature(addr_width=30, data_width=32)),
            "cmd": Out(stream.Signature(command_layout(queue_pairs))),
            "cpl": In(stream.Signature(completion_layout(queue_pairs))),
            "irq": Out(1),
            "hold": In(1),
        })

    def elaborate(self, platform):
        m = Module()
        n = self.queue_pairs
        idx_bits = ceil_log2(self.max_entries)
        size_bits = idx_bits + 1

        # -- state -------------------------------------------------------------
        enable = Signal()
        bus_error = Signal()
        doorbell_error = Signal()
        config_error = Signal()
        int_status = Signal(2)
        int_enable = Signal(2)

        sq_base = Array(Signal(32, name=f"sq_base{i}") for i in range(n))
        cq_base = Array(Signal(32, name=f"cq_base{i}") for i in range(n))
        size = Array(Signal(size_bits, name=f"size{i}") for i in range(n))
        sq_tail = Array(Signal(idx_bits, name=f"sq_tail{i}") for i in range(n))
        sq_head = Array(Signal(idx_bits, name=f"sq_head{i}") for i in range(n))
        cq_head = Array(Signal(idx_bits, name=f"cq_head{i}") for i in range(n))
        cq_tail = Array(Signal(idx_bits, name=f"cq_tail{i}") for i in range(n))
        phase = Array(Signal(init=1, name=f"phase{i}") for i in range(n))

        def wrap(q, value):
            return (value & (size[q] - 1))[:idx_bits]

        halted = bus_error
        m.d.comb += self.irq.eq((int_status & int_enable).any())

        # -- register window -----------------------------------------------------
        reg_ack = Signal()
        m.d.comb += self.bus.ack.eq(reg_ack)
        m.d.sync += reg_ack.eq(self.bus.cyc & self.bus.stb & ~reg_ack)
        access = self.bus.cyc & self.bus.stb & ~reg_ack
        write = access & self.bus.we
        wdata = self.bus.dat_w
        rdata = Signal(32)
        m.d.sync += self.bus.dat_r.eq(rdata)

        def reg_addr(name, i=0):
            return REGS[name].address(i) // 4

        def error(sig):
            m.d.sync += [sig.eq(1), int_status[1].eq(1)]

        status_word = Cat(enable & ~halted, bus_error, doorbell_error, config_error)
        with m.Switch(self.bus.adr):
            with m.Case(reg_addr("id")):
                m.d.comb += rdata.eq(spec.HOST_REGS_ID)
            with m.Case(reg_addr("version")):
                m.d.comb += rdata.eq(spec.SPEC_VERSION)
            with m.Case(reg_addr("ctrl")):
                m.d.comb += rdata.eq(enable)
                with m.If(write):
                    m.d.sync += enable.eq(wdata[0])
                    with m.If(~wdata[0]):  # disabling clears sticky errors
                        m.d.sync += [bus_error.eq(0), doorbell_error.eq(0), config_error.eq(0)]
            with m.Case(reg_addr("status")):
                m.d.comb += rdata.eq(status_word)
            with m.Case(reg_addr("int_status")):
                m.d.comb += rdata.eq(int_status)
            with m.Case(reg_addr("int_enable")):
                m.d.comb += rdata.eq(int_enable)
                with m.If(write):
                    m.d.sync += int_enable.eq(wdata[:2])
            with m.Case(reg_addr("queues")):
                m.d.comb += rdata.eq(n)
            with m.Case(reg_addr("max_entries")):
                m.d.comb += rdata.eq(self.max_entries)
            for q in range(n):
                with m.Case(reg_addr("sq_base", q)):
                    m.d.comb += rdata.eq(sq_base[q])
                    with m.If(write):
                        with m.If(wdata[:6] != 0):
                            error(config_error)
                        with m.Else():
                            m.d.sync += sq_base[q].eq(wdata)
                with m.Case(reg_addr("cq_base", q)):
                    m.d.comb += rdata.eq(cq_base[q])
                    with m.If(write):
                        with m.If(wdata[:4] != 0):
                            error(config_error)
                        with m.Else():
                            m.d.sync += cq_base[q].eq(wdata)
                with m.Case(reg_addr("size", q)):
                    m.d.comb += rdata.eq(size[q])
                    with m.If(write):
                        legal = Signal(name=f"size_legal{q}")
                        m.d.comb += legal.eq((wdata == 0) | ((wdata >= 2) & (wdata <= self.max_entries)
                                                            & ((wdata & (wdata - 1)) == 0)))
                        with m.If(legal):
                            m.d.sync += [size[q].eq(wdata), sq_tail[q].eq(0), sq_head[q].eq(0),
                                         cq_head[q].eq(0), cq_tail[q].eq(0), phase[q].eq(1)]
                        with m.Else():
                            error(config_error)
                for name, reg in (("sq_tail", sq_tail), ("cq_head", cq_head)):
                    with m.Case(reg_addr(name, q)):
                        m.d.comb += rdata.eq(reg[q])
                        with m.If(write):
                            with m.If(wdata >= size[q]):
                                error(doorbell_error)
                            with m.Else():
                                m.d.sync += reg[q].eq(wdata)
                with m.Case(reg_addr("sq_head", q)):
                    m.d.comb += rdata.eq(sq_head[q])
                with m.Case(reg_addr("cq_tail", q)):
                    m.d.comb += rdata.eq(cq_tail[q])
        # int_status is write-1-to-clear; a cause raised in the same cycle wins.
        with m.If(write & (self.bus.adr == reg_addr("int_status"))):
            m.d.sync += int_status.eq(int_status & ~wdata[:2])

        # -- queue engine --------------------------------------------------------
        qbits = max(1, ceil_log2(n))
        word = Signal(4)            # word index within an entry
        fetch_q = Signal(qbits)     # queue being fetched
        rr_next = Signal(qbits)     # round-robin start
        cmd_words = Array(Signal(32, name=f"cmd_w{i}") for i in range(spec.CMD.size // 4))
        cmd_full = Signal()

        m.d.comb += [
            self.cmd.valid.eq(cmd_full),
            self.cmd.payload.sqid.eq(fetch_q),
            self.cmd.payload.cmd.eq(Cat(*cmd_words)),
        ]
        with m.If(self.cmd.valid & self.cmd.ready):
            m.d.sync += cmd_full.eq(0)

        # Which queue has a command waiting (and is allowed to fetch)?
        pending = Signal(n)
        for q in range(n):
            held = self.hold if q < n - 1 else Const(0, 1)
            m.d.comb += pending[q].eq((size[q] != 0) & (sq_head[q] != sq_tail[q]) & ~held)
        pick = Signal(qbits)
        pick_valid = Signal()
        pow2 = n & (n - 1) == 0

        def modulo_n(value):  # value in [0, 2n - 2] -> value mod n
            return value[:qbits] if pow2 else Mux(value >= n, value - n, value)[:qbits]

        for k in reversed(range(n)):  # lowest offset from rr_next wins
            q = modulo_n(rr_next + k) if n > 1 else Const(0, 1)
            with m.If(pending.bit_select(q, 1)):
                m.d.comb += [pick.eq(q), pick_valid.eq(1)]

        cpl_q = self.cpl.payload.sqid
        cq_full = Signal()
        m.d.comb += cq_full.eq(wrap(cpl_q, cq_tail[cpl_q] + 1) == cq_head[cpl_q])
        cpl_words = Array([
            self.cpl.payload.result[:32],
            self.cpl.payload.result[32:],
            Cat(sq_head[cpl_q], Const(0, 16 - idx_bits), cpl_q, Const(0, 16 - qbits)),
            Cat(self.cpl.payload.cid, phase[cpl_q], self.cpl.payload.status),
        ])

        with m.FSM():
            with m.State("IDLE"):
                with m.If(self.cpl.valid & (size[cpl_q] == 0)):
                    m.d.comb += self.cpl.ready.eq(1)  # its queue was reset: nobody to tell
                with m.Elif(enable & ~halted & self.cpl.valid & ~cq_full):
                    m.d.sync += word.eq(0)
                    m.next = "POST"
                with m.Elif(enable & ~halted & pick_valid & ~cmd_full):
                    m.d.sync += [word.eq(0), fetch_q.eq(pick)]
                    m.next = "FETCH"
            with m.State("FETCH"):
                base = sq_base[fetch_q] + (sq_head[fetch_q] << 6)
                wishbone.word_access(m, self.dma, (base >> 2) + word)
                with m.If(self.dma.err):
                    error(bus_error)
                    m.next = "IDLE"
                with m.Elif(self.dma.ack):
                    m.d.sync += [cmd_words[word].eq(self.dma.dat_r), word.eq(word + 1)]
                    with m.If(word == spec.CMD.size // 4 - 1):
                        m.d.sync += [
                            cmd_full.eq(1),
                            sq_head[fetch_q].eq(wrap(fetch_q, sq_head[fetch_q] + 1)),
                            rr_next.eq(modulo_n(fetch_q + 1) if n > 1 else 0),
                        ]
                        m.next = "IDLE"
            with m.State("POST"):
                # Words 0..3, phase-bearing word 3 last.
                base = cq_base[cpl_q] + (cq_tail[cpl_q] << 4)
                wishbone.word_access(m, self.dma, (base >> 2) + word[:2], cpl_words[word[:2]])
                with m.If(self.dma.err):
                    error(bus_error)
                    m.next = "IDLE"
                with m.Elif(self.dma.ack):
                    m.d.sync += word.eq(word + 1)
                    with m.If(word == 3):
                        nxt = wrap(cpl_q, cq_tail[cpl_q] + 1)
                        m.d.sync += [cq_tail[cpl_q].eq(nxt), int_status[0].eq(1)]
                        with m.If(nxt == 0):
                            m.d.sync += phase[cpl_q].eq(~phase[cpl_q])
                        m.next = "POSTED"
            # the completion is taken a cycle after its last word's ack: ``cpl.ready`` from the state alone,
            # not from the SoC bus's answer (which would reach back into the completion's source)
            with m.State("POSTED"):
                m.d.comb += self.cpl.ready.eq(1)
                m.next = "IDLE"
        return m
