"""ONFI bus master: asynchronous SDR, and NV-DDR2 data bursts.

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
For timing closure nothing in the strobe logic starts from an adder:
the derived times (``L``, ``H``, ...) are comparator trees with registers
in between, the gap checks are flags registered a cycle ahead, and a change
of ``timing`` holds every new edge for a few cycles until all of them have
followed.  Write bytes enter through a three-entry FIFO.

The sequencer talks to the PHY in *bus operations* (``op`` stream): one
command byte, one address byte, a burst of ``count`` data bytes in (taken
from ``wdata``) or out (delivered to ``rdata``), "wait tWB" and "wait until
the target is ready".  Each carries the target whose CE# must be low.
``rdata`` is a small FIFO: the PHY never starts an RE# cycle whose byte it
has no room for, so back-pressure only stretches RE# high time.

NV-DDR2
-------

ONFI's NV-DDR2 interface moves data on both edges of a strobe: DQS, driven
by the host for data input and by the target for data output, which the
target makes follow RE# (tDQSRE later, the byte edge-aligned on DQ).
Command and address cycles stay WE# latches, with NV-DDR2's own values
(tCALS/tCALH, tCAS/tCAH, ...), which :func:`rtl.nand.timing.nvddr2_timing_cycles`
loads into the SDR fields of ``timing``, so they take the path above.
``timing.tUI != 0`` selects NV-DDR2 for the data bursts:

* **WRITE**: DQS driven low ``tPRE`` cycles (tWPRE), then a byte every
  ``tUI`` cycles: DQ changes on a rising clock edge and DQS half a cycle
  later (``dqs_o`` is a DDR output pair), so tDS and tDH are half a cycle
  each.  DQS holds ``tPST`` cycles (tWPST), then DQ and DQS are released
  and the WE# counter restarts: SET FEATURES goes busy at its last byte, and
  WAIT_BUSY must wait tWB from there.
* **READ**: RE# falls (the preamble, after the SDR first-read gaps), holds
  ``tPRE`` cycles (tRPRE), then toggles every ``tUI`` cycles, one byte an
  edge; a burst ending with RE# low takes one more rise.  Each edge reserves
  a place in the read FIFO (depth ``DDR_READ_DEPTH``), so RE# pauses rather
  than overflow.  Capture is by DQS, not by a delay: DQS and DQ are sampled
  at both clock edges (``dqs_i``, ``dq_i_fall``/``dq_i``), and the byte is the
  DQ sample in which DQS first shows the level of its next edge.  Whatever
  tDQSRE the part takes, the byte is sampled within half a cycle after its
  DQS edge, inside the eye (the part holds it until the next edge, a whole
  ``tUI`` later).
* ``dup`` bursts (ID, parameter page, features) put each byte on two edges
  (sent twice; the first of each received pair kept).
"""

from __future__ import annotations

from amaranth.hdl import Cat, Const, Module, Mux, Signal
from amaranth.lib import cdc, data, enum, fifo, stream, wiring
from amaranth.lib.wiring import In, Out

from .timing import TIMING, TIMING_BITS, TIMING_NAMES

__all__ = ["PhyKind", "phy_op_layout", "OnfiBusSignature", "OnfiPhy", "SAMPLE_DEPTH"]

#: Longest RE#-fall-to-sample distance (tREA + tSAMPLE) the read pipeline holds, in cycles.
SAMPLE_DEPTH = 16
#: NV-DDR2 read bytes in flight (RE# edge to DQS edge, up to tDQSRE = 25 ns) plus the FIFO's slack.
DDR_READ_DEPTH = 8


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
        "dup": 1,        # NV-DDR2: each byte on two DQS/RE# edges (ID, parameter page, features)
    })


class OnfiBusSignature(wiring.Signature):
    """The ONFI asynchronous pins, seen from the bus master (split DQ).

    ``ce_n`` and ``rb_n`` have one bit per target; the other pins are shared
    by every target of the channel.

    NV-DDR2 adds DQS and a second DQ sample per cycle, both through DDR
    buffers at the pins (``amaranth.lib.io.DDRBuffer``: ODDRX1F/IDDRX1F on
    ECP5).  ``dqs_o[0]`` is DQS for the first half of the next cycle and
    ``dqs_o[1]`` for the second half; ``dqs_i[0]``/``dq_i_fall`` are DQS and DQ
    sampled at the falling clock edge half a cycle before the rising edge
    that samples ``dqs_i[1]``/``dq_i``.  ``nvddr2=False`` leaves those four
    out: the pins of an SDR-only board (the bridges connect the SDR pins by
    name; the core's NV-DDR2 inputs then rest at 0).
    """

    def __init__(self, targets: int, nvddr2: bool = True):
        self.targets = targets
        ddr = {"dqs_o": Out(2), "dqs_oe": Out(1), "dqs_i": In(2), "dq_i_fall": In(8)} if nvddr2 else {}
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
            **ddr,
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

        rfifo_depth = max(self.rdata_depth, DDR_READ_DEPTH)
        m.submodules.rfifo = rfifo = fifo.SyncFIFO(width=8, depth=rfifo_depth)
        # write bytes enter through a small FIFO with registered flags, so the
        # source's valid/ready logic and the strobe dispatch do not form one
        # combinational path (timing closure)
        m.submodules.wq = wq = fifo.SyncFIFOBuffered(width=8, depth=3)
        m.d.comb += [
            wq.w_en.eq(self.wdata.valid), wq.w_data.eq(self.wdata.payload), self.wdata.ready.eq(wq.w_rdy),
        ]
        m.d.comb += [
            self.rdata.valid.eq(rfifo.r_rdy),
            self.rdata.payload.eq(rfifo.r_data),
            rfifo.r_en.eq(self.rdata.ready),
        ]

        # -- derived timings, pipelined (timing closure): a comparator tree per value with a
        # register every two levels.  They settle SETTLE cycles after a change
        # of ``timing``; until then no edge starts (``settled``), so a timing
        # change never mixes old and new values.
        one = Const(1, TIMING_BITS)

        def reg(value, name):
            r = Signal(TIMING_BITS, name=name)
            m.d.sync += r.eq(value)
            return r

        def max_pipe(values, name):
            """max of ``values``, registered every two comparator levels."""
            values, level, stage = list(values), 0, 0
            while len(values) > 1:
                values = [Mux(a > b, a, b) for a, b in zip(values[::2], values[1::2])] + \
                         ([values[-1]] if len(values) % 2 else [])
                level += 1
                if level % 2 == 0 and len(values) > 1:
                    values = [reg(v, f"{name}_p{stage}_{i}") for i, v in enumerate(values)]
                    stage += 1
            return reg(values[0], name)

        l_ctl = max_pipe([t.tWP, t.tCLS, t.tALS, t.tDS, t.tCS, one], "l_ctl")   # WE# low, command/address (2)
        h_ctl = max_pipe([max_pipe([t.tWH, t.tCLH, t.tALH, t.tDH, t.tCH, one], "h_ctl_own"),
                          reg(_sub(t.tWC, l_ctl), "h_ctl_wc")], "h_ctl")        # WE# high after it (4)
        l_dat = max_pipe([t.tWP, t.tDS, one], "l_dat")                           # WE# low, data latch (1)
        h_dat = max_pipe([max_pipe([t.tWH, t.tDH, one], "h_dat_own"),
                          reg(_sub(t.tWC, l_dat), "h_dat_wc")], "h_dat")        # WE# high after it (3)
        re_lo = max_pipe([t.tRP, one], "re_lo")                                  # RE# low (1)
        re_hi = max_pipe([reg(_max(t.tREH, one), "re_hi_own"),
                          reg(_sub(t.tRC, re_lo), "re_hi_rc")], "re_hi")        # RE# high (3)
        we_to_re = max_pipe([t.tWHR, t.tAR, t.tCLR], "we_to_re")                 # WE# rise to RE# fall (1, +1 flag)
        t_rr = max_pipe([t.tRR, one], "t_rr")                                    # ready to RE# (1)
        sample_full = Signal(TIMING_BITS + 1)
        sample = Signal(range(SAMPLE_DEPTH + 1))  # RE# fall to DQ sample (2)
        mark_at = Signal(SAMPLE_DEPTH)  # its bit in the sampling pipeline (3)
        m.d.sync += [
            sample_full.eq(_max(t.tREA, one) + t.tSAMPLE),
            sample.eq(Mux(sample_full > SAMPLE_DEPTH, SAMPLE_DEPTH, sample_full)),
            mark_at.eq(Const(1, SAMPLE_DEPTH) << (sample - 1).as_unsigned()),
        ]
        # a change is seen a cycle late (per-field compares, registered): no
        # edge starts from then until every derived value has followed, so
        # edges use values at most one cycle old, as before the pipelining
        SETTLE = 6                      # >= the longest latency above (4), with margin
        t_prev = Signal(TIMING)
        diff = Signal(len(TIMING_NAMES))
        settle = Signal(range(SETTLE + 1), init=SETTLE)
        settled = Signal()
        m.d.sync += [
            t_prev.eq(t),
            diff.eq(Cat(t[name] != t_prev[name] for name in TIMING_NAMES)),
            settle.eq(Mux(diff.any(), SETTLE, Mux(settle != 0, settle - 1, 0))),
            settled.eq(~diff.any() & (settle <= 1)),
        ]

        # -- how long ago WE# / RE# last rose (saturating)
        since_we = Signal(TIMING_BITS, init=sat)
        since_re = Signal(TIMING_BITS, init=sat)
        with m.If(since_we != sat):
            m.d.sync += since_we.eq(since_we + 1)
        with m.If(since_re != sat):
            m.d.sync += since_re.eq(since_re + 1)

        # The gap checks are registered (timing closure): each flag is computed a cycle
        # ahead from the counter's next value, so the dispatch below starts
        # from flip-flops instead of adders and comparators.  A timing
        # register change reaches them a cycle later, like the derived timings.
        we_rise = Signal()              # since_we restarts at 0 on this edge
        re_rise = Signal()

        def gap_flag(since, need, name):
            # an edge on the coming clock edge is since+1 cycles after the rise;
            # the flag holds that for the counter's next value: 0 after a rise,
            # else since+1 (saturating).  The three cases are compared in
            # parallel and picked last, so the strobe logic meets a LUT, not a
            # carry chain.
            flag = Signal(name=f"ok_{name}", init=1)
            rise = we_rise if since is since_we else re_rise
            m.d.sync += flag.eq(Mux(rise, need <= 1, Mux(since == sat, need <= sat + 1, (since + 2) >= need)))
            return flag

        ok = {
            "we_ch": gap_flag(since_we, t.tCH, "we_ch"), "re_ch": gap_flag(since_re, t.tCH, "re_ch"),
            "rhw": gap_flag(since_re, t.tRHW, "rhw"), "adl": gap_flag(since_we, t.tADL, "adl"),
            "ccs": gap_flag(since_we, t.tCCS, "ccs"), "whr": gap_flag(since_we, we_to_re, "whr"),
            "wb2": gap_flag(since_we, t.tWB + 2, "wb2"), "wb": gap_flag(since_we, t.tWB, "wb"),
            "dqh": gap_flag(since_we, 2, "dqh"),
        }

        # -- current operation
        cur = Signal(phy_op_layout(self.targets))
        cur_valid = Signal()
        remaining = Signal(16)
        last_addr = Signal()            # the last write latch was an address byte
        m.d.comb += self.op.ready.eq(~cur_valid)
        with m.If(self.op.valid & self.op.ready):
            m.d.sync += [cur.eq(self.op.payload), cur_valid.eq(1), remaining.eq(self.op.payload.count)]

        # -- strobe phases
        phase = Signal(range(9))
        FREE, WE_LOW, WE_HIGH, RE_LOW, RE_HIGH, HOLD, DDR_W, DDR_POST, DDR_R = range(9)
        cnt = Signal(TIMING_BITS)
        cnt_le1 = Signal(init=1)          # cnt <= 1, kept with cnt (timing closure)
        hold_after = Signal(TIMING_BITS)  # WE# high time once the low phase ends

        def set_cnt(value):
            m.d.sync += [cnt.eq(value), cnt_le1.eq(value <= 1)]

        with m.If(~cnt_le1):
            m.d.sync += [cnt.eq(cnt - 1), cnt_le1.eq(cnt <= 2)]
        ddr_re_rise = Signal()            # NV-DDR2: an RE# rise on this edge
        ddr_w_end = Signal()              # NV-DDR2: a data input burst ends (counts as a WE# rise)
        m.d.comb += [we_rise.eq(((phase == WE_LOW) & cnt_le1) | ddr_w_end),
                     re_rise.eq(((phase == RE_LOW) & cnt_le1) | ddr_re_rise)]

        # -- NV-DDR2 state: DQS level driven, RE# edges to go, bytes in flight
        ddr = Signal()                    # tUI != 0: the interface is NV-DDR2
        m.d.sync += ddr.eq(t.tUI != 0)
        dqs_lvl = Signal()
        copy = Signal()                   # dup: the first copy of this byte went out / came in
        edges = Signal(17)                # RE# edges left in this read burst
        ddr_edge = Signal()               # an RE# edge that will bring a byte, on this edge
        ddr_discard = Signal()            # a captured byte that is the second copy (dup)
        ddr_dup = Signal()                # dup of the read burst in flight
        expect = Signal(range(2 * DDR_READ_DEPTH + 1))   # DQS edges still to come
        want = Signal()                   # the level the next DQS edge goes to
        reserved = Signal(range(rfifo_depth + 1))   # read bytes in flight + bytes in the FIFO
        m.d.sync += bus.dqs_o.eq(Cat(dqs_lvl, dqs_lvl))   # DQS holds unless a byte moves it

        with m.Switch(phase):
            with m.Case(WE_LOW):
                with m.If(cnt_le1):
                    m.d.sync += [bus.we_n.eq(1), since_we.eq(0), phase.eq(WE_HIGH)]
                    set_cnt(hold_after)
            with m.Case(RE_LOW):
                with m.If(cnt_le1):
                    m.d.sync += [bus.re_n.eq(1), since_re.eq(0), phase.eq(RE_HIGH)]
                    set_cnt(re_hi)
            with m.Case(WE_HIGH, RE_HIGH, HOLD):
                with m.If(cnt_le1):
                    m.d.sync += phase.eq(FREE)
            with m.Case(DDR_W):
                # a byte every tUI cycles: DQ on the rising clock edge, DQS moves half a cycle later
                with m.If(cnt_le1):
                    with m.If(remaining == 0):
                        m.d.sync += phase.eq(DDR_POST)
                        set_cnt(t.tPST)
                    with m.Elif(wq.r_rdy):
                        m.d.sync += [bus.dq_o.eq(wq.r_data), bus.dqs_o.eq(Cat(dqs_lvl, ~dqs_lvl)),
                                     dqs_lvl.eq(~dqs_lvl)]
                        set_cnt(t.tUI)
                        with m.If(cur.dup & ~copy):
                            m.d.sync += copy.eq(1)
                        with m.Else():
                            m.d.comb += wq.r_en.eq(1)
                            m.d.sync += [copy.eq(0), remaining.eq(remaining - 1)]
            with m.Case(DDR_POST):
                # tWPST held: let DQS and DQ go.  The burst's end restarts the WE# counter: a
                # busy period it starts (SET FEATURES) is waited from here (tWB)
                with m.If(cnt_le1):
                    m.d.sync += [bus.dqs_oe.eq(0), bus.dq_oe.eq(0), dqs_lvl.eq(0), phase.eq(FREE),
                                 cur_valid.eq(0), since_we.eq(0)]
                    m.d.comb += ddr_w_end.eq(1)
            with m.Case(DDR_R):
                # RE# toggles every tUI cycles; each edge brings a byte on a DQS edge tDQSRE later
                with m.If(cnt_le1):
                    with m.If(edges != 0):
                        with m.If(reserved < rfifo_depth):
                            m.d.sync += [bus.re_n.eq(~bus.re_n), edges.eq(edges - 1)]
                            m.d.comb += ddr_edge.eq(1)
                            set_cnt(t.tUI)
                            with m.If(~bus.re_n):
                                m.d.sync += since_re.eq(0)
                                m.d.comb += ddr_re_rise.eq(1)
                    with m.Else():
                        m.d.sync += cur_valid.eq(0)
                        with m.If(~bus.re_n):
                            # RE# ends high: one more edge, whose byte nobody waits for
                            m.d.sync += [bus.re_n.eq(1), since_re.eq(0), phase.eq(HOLD)]
                            m.d.comb += ddr_re_rise.eq(1)
                            set_cnt(t.tUI)
                        with m.Else():
                            m.d.sync += phase.eq(FREE)
        # The bus is free for a new edge on the coming clock edge.
        free = (phase == FREE) | (((phase == WE_HIGH) | (phase == RE_HIGH) | (phase == HOLD)) & cnt_le1)

        # -- read sampling, pipelined: bit i of `marks` = a byte to sample i+1 edges from now
        marks = Signal(SAMPLE_DEPTH)
        mark = Signal(SAMPLE_DEPTH)       # set by an RE# fall on this edge: bit S-1
        re_fall = Signal()                # an RE# fall on this edge
        m.d.comb += mark.eq(Mux(re_fall, mark_at, 0))
        sampled = Signal()
        m.d.comb += sampled.eq(marks[0])
        with m.If(sampled):
            m.d.comb += [rfifo.w_en.eq(1), rfifo.w_data.eq(bus.dq_i)]
        # NV-DDR2 capture: the byte that came with a DQS edge, seen in the falling-edge
        # sample or in the rising-edge one (DQ is edge-aligned to DQS, and DQS edges
        # are at least a cycle apart, so at most one per cycle)
        dqs_prev = Signal()
        m.d.sync += dqs_prev.eq(bus.dqs_i[1])
        hit_fall = (expect != 0) & (bus.dqs_i[0] == want) & (dqs_prev != want)
        hit_rise = (expect != 0) & ~hit_fall & (bus.dqs_i[1] == want) & (bus.dqs_i[0] != want)
        with m.If(hit_fall | hit_rise):
            m.d.sync += [want.eq(~want), copy.eq(ddr_dup & ~copy)]
            with m.If(ddr_dup & copy):
                m.d.comb += ddr_discard.eq(1)
            with m.Else():
                m.d.comb += [rfifo.w_en.eq(1), rfifo.w_data.eq(Mux(hit_fall, bus.dq_i_fall, bus.dq_i))]
        m.d.sync += expect.eq(expect + ddr_edge - (hit_fall | hit_rise))
        # an RE# fall reserves its FIFO entry: never more bytes in flight than room
        # (counted in one register instead of adding the FIFO level, for timing closure)
        m.d.sync += [marks.eq((marks >> 1) | mark),
                     reserved.eq(reserved + re_fall + ddr_edge - (rfifo.r_en & rfifo.r_rdy) - ddr_discard)]
        room = reserved < self.rdata_depth

        m.d.comb += self.idle.eq(~cur_valid & (phase == FREE) & (reserved == 0) & ~wq.r_rdy)

        # -- dispatch: start the next edge when the bus is free and every gap is met
        sel = Signal(range(max(self.targets, 2)))
        ce_on = Signal()
        kind = cur.kind
        need_ce = (kind == PhyKind.CMD) | (kind == PhyKind.ADDR) | (kind == PhyKind.WRITE) | \
                  (kind == PhyKind.READ)

        def we_latch(cle, ale, byte, low, high):
            m.d.sync += [
                bus.we_n.eq(0), bus.cle.eq(cle), bus.ale.eq(ale), bus.dq_o.eq(byte), bus.dq_oe.eq(1),
                phase.eq(WE_LOW), hold_after.eq(high), last_addr.eq(ale),
            ]
            set_cnt(low)

        with m.If(free & cur_valid & settled & ~diff.any()):
            with m.If(need_ce & (~ce_on | (sel != cur.target))):
                # switch chip enable once the old target's holds are met
                with m.If(ok["we_ch"] & ok["re_ch"]):
                    m.d.sync += [
                        bus.ce_n.eq(~(Const(1, self.targets) << cur.target)),
                        sel.eq(cur.target), ce_on.eq(1),
                        bus.cle.eq(0), bus.ale.eq(0),
                    ]
            with m.Elif((kind == PhyKind.CMD) | (kind == PhyKind.ADDR)):
                with m.If(ok["rhw"]):
                    we_latch(kind == PhyKind.CMD, kind == PhyKind.ADDR, cur.byte, l_ctl, h_ctl)
                    m.d.sync += cur_valid.eq(0)
            with m.Elif((kind == PhyKind.WRITE) & ddr):
                # NV-DDR2 data input: DQS driven low for the preamble, then the burst (DDR_W)
                with m.If(ok["rhw"] & (~last_addr | ok["adl"]) & (~last_addr | ~cur.ccs | ok["ccs"])):
                    m.d.sync += [bus.dqs_oe.eq(1), dqs_lvl.eq(0), bus.dq_oe.eq(1), bus.cle.eq(0), bus.ale.eq(0),
                                 last_addr.eq(0), copy.eq(0), phase.eq(DDR_W)]
                    set_cnt(t.tPRE)
            with m.Elif((kind == PhyKind.READ) & ddr):
                # NV-DDR2 data output: RE# falls for the preamble, then the burst (DDR_R)
                with m.If(ok["whr"] & (~cur.ccs | ok["ccs"]) & (expect == 0)):
                    m.d.sync += [bus.re_n.eq(0), bus.dq_oe.eq(0), bus.cle.eq(0), bus.ale.eq(0),
                                 edges.eq(Mux(cur.dup, cur.count << 1, cur.count)), ddr_dup.eq(cur.dup),
                                 copy.eq(0), want.eq(1), phase.eq(DDR_R)]
                    set_cnt(t.tPRE)
            with m.Elif(kind == PhyKind.WRITE):
                with m.If(ok["rhw"] & (~last_addr | ok["adl"]) &
                          (~last_addr | ~cur.ccs | ok["ccs"]) & wq.r_rdy):
                    m.d.comb += wq.r_en.eq(1)
                    # the first byte after an address also sets ALE up: full control setup
                    we_latch(0, 0, wq.r_data, Mux(last_addr, l_ctl, l_dat), h_dat)
                    m.d.sync += remaining.eq(remaining - 1)
                    with m.If(remaining <= 1):
                        m.d.sync += cur_valid.eq(0)
            with m.Elif(kind == PhyKind.READ):
                with m.If(ok["whr"] & (~cur.ccs | ok["ccs"]) & room):
                    m.d.sync += [
                        bus.re_n.eq(0), bus.dq_oe.eq(0), bus.cle.eq(0), bus.ale.eq(0),
                        phase.eq(RE_LOW),
                        remaining.eq(remaining - 1),
                    ]
                    set_cnt(re_lo)
                    m.d.comb += re_fall.eq(1)
                    with m.If(remaining <= 1):
                        m.d.sync += cur_valid.eq(0)
            with m.Elif(kind == PhyKind.WAIT_BUSY):
                # + the synchroniser's latency, so `ready` already shows the busy target
                with m.If(ok["wb2"]):
                    m.d.sync += cur_valid.eq(0)
            with m.Elif(kind == PhyKind.WAIT_READY):
                with m.If(ok["wb"] & rb.bit_select(cur.target, 1)):
                    m.d.sync += [cur_valid.eq(0), phase.eq(HOLD)]
                    set_cnt(t_rr)
            with m.Else():
                m.d.sync += cur_valid.eq(0)

        # DQ is ours only while WE# strobes; release it once the hold has passed.
        with m.If((phase == FREE) & ~cur_valid & ok["dqh"]):
            m.d.sync += bus.dq_oe.eq(0)
        return m
