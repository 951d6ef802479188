"""ONFI asynchronous (SDR) bus master.

How the ONFI asynchronous interface works, and how this PHY drives it
=====================================================================

A NAND target listens on eight DQ lines, two latch-enable strobes and two
edge strobes.  With CE# low, a rising WE# edge latches DQ as a *command* when
CLE is high, as an *address* byte when ALE is high, and as a *data* byte when
both are low.  Falling RE# asks the target to drive the next data byte; it
appears on DQ at most tREA after the fall and stays there a little after the
rise (EDO).  R/B# goes low at most tWB after a command that starts an array
operation (READ's 30h, PROGRAM's 10h, ERASE's D0h, RESET) and high again when
the array is done.  Every one of these edges has a minimum distance to the
others -- the ONFI timing parameters -- and a bus master is correct exactly
when it never brings two edges closer than that.

This PHY does it with two "since" counters and one latch at a time:

* A **write latch** (command, address or data byte) drops WE# and, on the
  same edge, sets CLE/ALE/DQ; WE# stays low ``L`` cycles and high ``H``
  cycles.  ``L`` covers every setup time that ends at WE#'s rising edge
  (tWP, tCLS, tALS, tDS, and tCS after a chip-enable change), ``H`` every hold
  time that starts there (tWH, tCLH, tALH, tDH, tCH), and ``L + H >= tWC``.
  Data latches of a burst change neither CLE, ALE nor CE#, so they use the
  shorter ``L = max(tWP, tDS)``: a burst runs at exactly one byte per tWC.
* A **read strobe** holds RE# low ``P = tRP`` cycles and high ``Q`` cycles
  with ``P + Q >= tRC``; DQ is sampled ``S = tREA + tSAMPLE`` cycles after the
  fall.  That may be after RE# has risen again, or even after the next fall
  (EDO: the target keeps a byte on DQ for tRLOH after the next fall, and
  ``tSAMPLE`` covers the I/O registers' round trip), so samples are
  *pipelined*: a shift register of ``SAMPLE_DEPTH`` bits carries one mark per
  RE# fall to the cycle its byte is sampled, and reads run at one byte per
  tRC whatever the round-trip latency.  ``S`` is clamped to ``SAMPLE_DEPTH``.
* Gaps between kinds of cycle are checked before an edge, against how long
  ago WE# or RE# last rose: tWHR (and tAR, tCLR) before the first RE# fall
  after a command/address, tRHW before a WE# fall after reading, tADL before
  the first data byte after an address, tWB before anyone may look at R/B#
  or status after a busy-starting command, tRR from ready to the first RE#.
  tCCS after CHANGE READ/WRITE COLUMN before the first data strobe.  A
  counter saturates, so a long-idle bus never waits.

Every parameter is a runtime register (``timing``, see
:mod:`rtl.nand.timing`), so the same gateware runs modes 0-5 and any clock.

The sequencer talks to the PHY in *bus operations* (``op`` stream): one
command byte, one address byte, a burst of ``count`` data bytes in (taken
from ``wdata``) or out (delivered to ``rdata``), "wait tWB" and "wait until
the target is ready".  Each carries the target whose CE# must be low.
``rdata`` is a small FIFO: the PHY never starts an RE# cycle whose byte it
has no room for, so back-pressure only stretches RE# high time.
"""

from __future__ import annotations

from amaranth.hdl import Cat, Const, Module, Mux, Signal
from amaranth.lib import cdc, data, enum, fifo, stream, wiring
from amaranth.lib.wiring import In, Out

from .timing import TIMING, TIMING_BITS

__all__ = ["PhyKind", "phy_op_layout", "OnfiBusSignature", "OnfiPhy", "SAMPLE_DEPTH"]

#: Longest RE#-fall-to-sample distance (tREA + tSAMPLE) the read pipeline holds, in cycles.
SAMPLE_DEPTH = 16


class PhyKind(enum.Enum, shape=3):
    CMD = 0          # one command latch: byte
    ADDR = 1         # one address latch: byte
    WRITE = 2        # count data latches, bytes from wdata
    READ = 3         # count RE# cycles, bytes to rdata
    WAIT_BUSY = 4    # wait tWB after the last WE# rise (R/B#/status not valid before)
    WAIT_READY = 5   # wait until R/B# of target is high, then tRR


def phy_op_layout(targets: int) -> data.StructLayout:
    return data.StructLayout({
        "kind": PhyKind,
        "target": range(max(targets, 2)),
        "byte": 8,
        "count": 16,
        "ccs": 1,        # READ/WRITE after CHANGE COLUMN: first strobe waits tCCS too
    })


class OnfiBusSignature(wiring.Signature):
    """The ONFI asynchronous pins, seen from the bus master (split DQ).

    ``ce_n`` and ``rb_n`` have one bit per target; the other pins are shared
    by every target of the channel.
    """

    def __init__(self, targets: int):
        self.targets = targets
        super().__init__({
            "ce_n": Out(targets, init=(1 << targets) - 1),
            "cle": Out(1),
            "ale": Out(1),
            "we_n": Out(1, init=1),
            "re_n": Out(1, init=1),
            "wp_n": Out(1, init=1),
            "dq_o": Out(8),
            "dq_oe": Out(1),
            "dq_i": In(8),
            "rb_n": In(targets),
        })


def _max(*values):
    """Largest of unsigned values (a small comparator tree)."""
    values = list(values)
    while len(values) > 1:
        a, b = values.pop(0), values.pop(0)
        values.append(Mux(a > b, a, b))
    return values[0]


def _sub(a, b):
    """a - b, floored at 0."""
    return Mux(a > b, a - b, 0)


class OnfiPhy(wiring.Component):
    """ONFI asynchronous bus master for ``targets`` chip enables.

    Ports
    -----
    op : In(stream of :func:`phy_op_layout`)
        Bus operations, executed in order.
    wdata : In(stream of 8 bits)
        Bytes of WRITE operations.
    rdata : Out(stream of 8 bits)
        Bytes of READ operations.
    timing : In(:data:`rtl.nand.timing.TIMING`)
        Every interface timing in controller cycles.
    ready : Out(targets)
        R/B# of each target, synchronised (1 = ready).  Not valid until tWB
        after a busy-starting command (the sequencer issues WAIT_BUSY).
    idle : Out(1)
        No operation queued or running and every read byte delivered.
    bus : Out(:class:`OnfiBusSignature`)
        The pins.
    """

    def __init__(self, targets: int = 4, rdata_depth: int = 4):
        self.targets = targets
        self.rdata_depth = rdata_depth
        super().__init__({
            "op": In(stream.Signature(phy_op_layout(targets))),
            "wdata": In(stream.Signature(8)),
            "rdata": Out(stream.Signature(8)),
            "timing": In(TIMING),
            "ready": Out(targets),
            "idle": Out(1),
            "bus": Out(OnfiBusSignature(targets)),
        })

    def elaborate(self, platform):
        m = Module()
        t = self.timing
        bus = self.bus
        sat = (1 << TIMING_BITS) - 1

        # R/B# is asynchronous to us on a board.
        rb = Signal(self.targets)
        m.submodules.rb_sync = cdc.FFSynchronizer(bus.rb_n, rb, init=(1 << self.targets) - 1)
        m.d.comb += self.ready.eq(rb)

        m.submodules.rfifo = rfifo = fifo.SyncFIFO(width=8, depth=self.rdata_depth)
        m.d.comb += [
            self.rdata.valid.eq(rfifo.r_rdy),
            self.rdata.payload.eq(rfifo.r_data),
            rfifo.r_en.eq(self.rdata.ready),
        ]

        # -- derived timings (registered: a timing change takes effect a cycle later)
        one = Const(1, TIMING_BITS)
        l_ctl = Signal(TIMING_BITS)     # WE# low, command/address latch
        h_ctl = Signal(TIMING_BITS)     # WE# high after a command/address latch
        l_dat = Signal(TIMING_BITS)     # WE# low, data latch
        h_dat = Signal(TIMING_BITS)     # WE# high after a data latch
        re_lo = Signal(TIMING_BITS)     # RE# low
        re_hi = Signal(TIMING_BITS)     # RE# high
        sample = Signal(range(SAMPLE_DEPTH + 1))  # RE# fall to DQ sample
        we_to_re = Signal(TIMING_BITS)  # WE# rise to RE# fall
        sample_full = Signal(TIMING_BITS + 1)
        m.d.comb += [
            sample_full.eq(_max(t.tREA, one) + t.tSAMPLE),
            sample.eq(Mux(sample_full > SAMPLE_DEPTH, SAMPLE_DEPTH, sample_full)),
        ]
        m.d.sync += [
            l_ctl.eq(_max(t.tWP, t.tCLS, t.tALS, t.tDS, t.tCS, one)),
            h_ctl.eq(_max(t.tWH, t.tCLH, t.tALH, t.tDH, t.tCH, _sub(t.tWC, l_ctl), one)),
            l_dat.eq(_max(t.tWP, t.tDS, one)),
            h_dat.eq(_max(t.tWH, t.tDH, _sub(t.tWC, l_dat), one)),
            re_lo.eq(_max(t.tRP, one)),
            re_hi.eq(_max(t.tREH, _sub(t.tRC, re_lo), one)),
            we_to_re.eq(_max(t.tWHR, t.tAR, t.tCLR)),
        ]

        # -- how long ago WE# / RE# last rose (saturating)
        since_we = Signal(TIMING_BITS, init=sat)
        since_re = Signal(TIMING_BITS, init=sat)
        with m.If(since_we != sat):
            m.d.sync += since_we.eq(since_we + 1)
        with m.If(since_re != sat):
            m.d.sync += since_re.eq(since_re + 1)

        def elapsed(since, need):
            # an edge on the coming clock edge is since+1 cycles after the rise
            return (since + 1) >= need

        # -- current operation
        cur = Signal(phy_op_layout(self.targets))
        cur_valid = Signal()
        remaining = Signal(16)
        last_addr = Signal()            # the last write latch was an address byte
        m.d.comb += self.op.ready.eq(~cur_valid)
        with m.If(self.op.valid & self.op.ready):
            m.d.sync += [cur.eq(self.op.payload), cur_valid.eq(1), remaining.eq(self.op.payload.count)]

        # -- strobe phases
        phase = Signal(range(6))
        FREE, WE_LOW, WE_HIGH, RE_LOW, RE_HIGH, HOLD = range(6)
        cnt = Signal(TIMING_BITS)
        hold_after = Signal(TIMING_BITS)  # WE# high time once the low phase ends
        with m.If(cnt > 1):
            m.d.sync += cnt.eq(cnt - 1)
        with m.Switch(phase):
            with m.Case(WE_LOW):
                with m.If(cnt <= 1):
                    m.d.sync += [bus.we_n.eq(1), since_we.eq(0), phase.eq(WE_HIGH), cnt.eq(hold_after)]
            with m.Case(RE_LOW):
                with m.If(cnt <= 1):
                    m.d.sync += [bus.re_n.eq(1), since_re.eq(0), phase.eq(RE_HIGH), cnt.eq(re_hi)]
            with m.Case(WE_HIGH, RE_HIGH, HOLD):
                with m.If(cnt <= 1):
                    m.d.sync += phase.eq(FREE)
        # The bus is free for a new edge on the coming clock edge.
        free = (phase == FREE) | (((phase == WE_HIGH) | (phase == RE_HIGH) | (phase == HOLD)) & (cnt <= 1))

        # -- read sampling, pipelined: bit i of `marks` = a byte to sample i+1 edges from now
        marks = Signal(SAMPLE_DEPTH)
        mark = Signal(SAMPLE_DEPTH)       # set by an RE# fall on this edge: bit S-1
        in_flight = Signal(range(SAMPLE_DEPTH + 1))
        sampled = Signal()
        m.d.comb += sampled.eq(marks[0])
        with m.If(sampled):
            m.d.comb += [rfifo.w_en.eq(1), rfifo.w_data.eq(bus.dq_i)]
        m.d.sync += [marks.eq((marks >> 1) | mark), in_flight.eq(in_flight + mark.any() - sampled)]
        # an RE# fall reserves its FIFO entry: never more bytes in flight than room
        room = (rfifo.w_level + in_flight) < self.rdata_depth

        m.d.comb += self.idle.eq(~cur_valid & (phase == FREE) & (in_flight == 0) & ~rfifo.r_rdy)

        # -- dispatch: start the next edge when the bus is free and every gap is met
        sel = Signal(range(max(self.targets, 2)))
        ce_on = Signal()
        kind = cur.kind
        need_ce = (kind == PhyKind.CMD) | (kind == PhyKind.ADDR) | (kind == PhyKind.WRITE) | \
                  (kind == PhyKind.READ)

        def we_latch(cle, ale, byte, low, high):
            m.d.sync += [
                bus.we_n.eq(0), bus.cle.eq(cle), bus.ale.eq(ale), bus.dq_o.eq(byte), bus.dq_oe.eq(1),
                phase.eq(WE_LOW), cnt.eq(low), hold_after.eq(high), last_addr.eq(ale),
            ]

        with m.If(free & cur_valid):
            with m.If(need_ce & (~ce_on | (sel != cur.target))):
                # switch chip enable once the old target's holds are met
                with m.If(elapsed(since_we, t.tCH) & elapsed(since_re, t.tCH)):
                    m.d.sync += [
                        bus.ce_n.eq(~(Const(1, self.targets) << cur.target)),
                        sel.eq(cur.target), ce_on.eq(1),
                        bus.cle.eq(0), bus.ale.eq(0),
                    ]
            with m.Elif((kind == PhyKind.CMD) | (kind == PhyKind.ADDR)):
                with m.If(elapsed(since_re, t.tRHW)):
                    we_latch(kind == PhyKind.CMD, kind == PhyKind.ADDR, cur.byte, l_ctl, h_ctl)
                    m.d.sync += cur_valid.eq(0)
            with m.Elif(kind == PhyKind.WRITE):
                with m.If(elapsed(since_re, t.tRHW) & (~last_addr | elapsed(since_we, t.tADL)) &
                          (~last_addr | ~cur.ccs | elapsed(since_we, t.tCCS)) & self.wdata.valid):
                    m.d.comb += self.wdata.ready.eq(1)
                    # the first byte after an address also sets ALE up: full control setup
                    we_latch(0, 0, self.wdata.payload, Mux(last_addr, l_ctl, l_dat), h_dat)
                    m.d.sync += remaining.eq(remaining - 1)
                    with m.If(remaining <= 1):
                        m.d.sync += cur_valid.eq(0)
            with m.Elif(kind == PhyKind.READ):
                with m.If(elapsed(since_we, we_to_re) & (~cur.ccs | elapsed(since_we, t.tCCS)) & room):
                    m.d.sync += [
                        bus.re_n.eq(0), bus.dq_oe.eq(0), bus.cle.eq(0), bus.ale.eq(0),
                        phase.eq(RE_LOW), cnt.eq(re_lo),
                        remaining.eq(remaining - 1),
                    ]
                    m.d.comb += mark.eq(Const(1, SAMPLE_DEPTH) << (sample - 1).as_unsigned())
                    with m.If(remaining <= 1):
                        m.d.sync += cur_valid.eq(0)
            with m.Elif(kind == PhyKind.WAIT_BUSY):
                # + the synchroniser's latency, so `ready` already shows the busy target
                with m.If(elapsed(since_we, t.tWB + 2)):
                    m.d.sync += cur_valid.eq(0)
            with m.Elif(kind == PhyKind.WAIT_READY):
                with m.If(elapsed(since_we, t.tWB) & rb.bit_select(cur.target, 1)):
                    m.d.sync += [cur_valid.eq(0), phase.eq(HOLD), cnt.eq(_max(t.tRR, one))]
            with m.Else():
                m.d.sync += cur_valid.eq(0)

        # DQ is ours only while WE# strobes; release it once the hold has passed.
        with m.If((phase == FREE) & ~cur_valid & elapsed(since_we, 2)):
            m.d.sync += bus.dq_oe.eq(0)
        return m
