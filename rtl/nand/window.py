"""The NAND controller's firmware window: descriptors, completions, timing and
page buffers behind one Wishbone target.

The CPU drives NAND operations the way the FTL's blocks do, through a
descriptor/completion stream pair, but one register access at a time: it
writes a descriptor (``spec.NAND_DESC``) into ``DESC``, pushes it with
``CTRL.PUSH``, polls ``STATUS.CPL_VALID`` (or takes the interrupt), reads the
completion (``spec.NAND_CPL``) from ``CPL`` and pops it, and moves page data
through each channel's page-buffer window.  Two components carry this window:

* :class:`boards.nand_bridge.NandBridge`: the bare NAND controller on a board
  (the firmware owns every slot);
* :class:`soc.ftl_bridge.FtlBridge`: the FTL core, whose NAND port mux gives the
  firmware its own descriptor port and whose buffer arbiters give it a turn
  at each channel's page buffer.  There, while the core runs, the firmware
  uses only slot ``FW_SLOT``; the others belong to the log writer, the
  relocator and the read path.

The buffer ports are arbitrated (``request``/``grant``, ``rtl.ftl.bufport``):
a buffer access raises ``request`` and drives the port in the cycle ``grant``
is high; a write acknowledges in the next cycle, a read when its data is there
(:data:`rtl.nand.pagebuf.HOST_READ_LATENCY` cycles after the granted one).  On
a port that is always granted (``grant`` tied to ``request``) a write costs the
same two cycles as a register, a read one more.

Register map (byte offsets; defined once here and exported to the firmware as
``AFNAND_REG_*``, ``AFNAND_STATUS_*``, ``AFNAND_CTRL_*`` in ``soc.h``):

==========  ====  ===========================================================
``ID``      RO    ``"AFNB"`` (:data:`BLOCK_ID`)
``VERSION`` RO    major << 16 | minor
``GEOMETRY`` RO   channels [7:0], ways [15:8], slots [23:16], ECC [24]
``SLOT``    RO    bytes per page-buffer slot (page + spare)
``STATUS``  RO    see :data:`STATUS`; channel ``c`` busy at bit ``CHAN_BUSY + c``
``CTRL``    W     see :data:`CTRL` (write-1 strobes)
``IRQ_EN``  RW    bit 0: completion interrupt
``BUF_STRIDE`` RO bytes between two channels' buffer windows
``FW_SLOT`` RO    the slot the firmware's synchronous operations use
``DESC``    RW    the descriptor to push, ``spec.NAND_DESC.size`` bytes
``CPL``     RO    the completion at the head, ``spec.NAND_CPL.size`` bytes
``TIMING``  RW    :data:`rtl.nand.timing.TIMING`, one byte per parameter in
                  ``TIMING_NAMES`` order; reset = ONFI mode 0 at the build's
                  clock (``tSAMPLE`` = the board's input latency)
``BUF``     RW    channel ``c``'s page buffer at ``BUF + c * BUF_STRIDE``;
                  slot ``s`` at ``s * SLOT`` inside it (32-bit words)
==========  ====  ===========================================================
"""

from __future__ import annotations

from amaranth.hdl import Cat, Const, Module, Mux, Signal
from amaranth.lib import stream, wiring
from amaranth.lib.wiring import In, Out

from atomflash.spec import NandResult
from rtl import spec as layouts
from rtl.lib import wishbone
from rtl.nand.pagebuf import HOST_READ_LATENCY, ArbitratedBufferSignature
from rtl.nand.timing import TIMING, TIMING_NAMES, timing_const

__all__ = ["NandWindow", "REGS", "STATUS", "CTRL", "BLOCK_ID", "BLOCK_VERSION", "DESC_WORDS", "CPL_WORDS",
           "window_geometry"]

BLOCK_ID = int.from_bytes(b"AFNB", "little")
BLOCK_VERSION = 0x0001_0001  # 1.1: FW_SLOT, arbitrated buffers

DESC_WORDS = -(-layouts.NAND_DESC.size // 32)
CPL_WORDS = -(-layouts.NAND_CPL.size // 32)
TIMING_WORDS = -(-len(TIMING_NAMES) // 4)

REGS = {
    "ID": 0x000,
    "VERSION": 0x004,
    "GEOMETRY": 0x008,
    "SLOT": 0x00C,
    "STATUS": 0x010,
    "CTRL": 0x014,
    "IRQ_EN": 0x018,
    "BUF_STRIDE": 0x01C,
    "FW_SLOT": 0x020,
    "DESC": 0x040,
    "CPL": 0x080,
    "TIMING": 0x0C0,
}
REGS_BYTES = 0x100
assert REGS["DESC"] + 4 * DESC_WORDS <= REGS["CPL"]
assert REGS["CPL"] + 4 * CPL_WORDS <= REGS["TIMING"]
assert REGS["TIMING"] + 4 * TIMING_WORDS <= REGS_BYTES

STATUS = {
    "DESC_PENDING": 0,  # a pushed descriptor has not been taken by the controller yet
    "CPL_VALID": 1,     # CPL holds a completion (pop it with CTRL.POP)
    "FAULT": 2,         # sticky fault (see the fault output)
    "CHAN_BUSY": 8,     # + channel index
}
CTRL = {
    "PUSH": 0,          # hand DESC to the controller (ignored while DESC_PENDING)
    "POP": 1,           # drop the completion in CPL
    "CLEAR_FAULT": 2,
}
FAULT_RESULTS = tuple(r for r in NandResult if r not in (NandResult.OK, NandResult.ERASED))


def _pow2(n: int) -> int:
    return 1 << max(n - 1, 0).bit_length()


def window_geometry(slot_bytes: int, slots: int, channels: int) -> tuple[int, int, int]:
    """(buf_stride, buf_base, window_bytes) of a window with these page buffers."""
    buf_stride = _pow2(slot_bytes * slots)
    buf_base = max(REGS_BYTES, buf_stride)
    return buf_stride, buf_base, _pow2(buf_base + channels * buf_stride)


class NandWindow(wiring.Component):
    """The register window above for a NAND controller with ``channels`` channels.

    Parameters
    ----------
    channels, ways, slots, ecc : the controller's shape (reported in ``GEOMETRY``).
    slot_bytes : bytes per page-buffer slot; ``slot_words`` of them per slot on the buffer ports.
    fw_slot : reported in ``FW_SLOT``.
    clk_hz, sample : the timing registers' reset value (ONFI mode 0 at ``clk_hz``, ``tSAMPLE``).

    Ports
    -----
    wb : In(wishbone.Signature)
        The window (word addresses; ``window_bytes`` long).
    desc : Out(stream of NAND_DESC) / cpl : In(stream of NAND_CPL)
        To and from the controller (or a port of the FTL core's NAND port mux).
    timing : Out(TIMING) / busy : In(channels)
    buf : Out(ArbitratedBufferSignature).array(channels)
        Each channel's page buffer, word addressed (``slot * slot_words + word``).
    irq : Out(1)
        A completion waits and ``IRQ_EN`` is set.
    fault : Out(1)
        Sticky: a completion reported FAIL, UNCORRECTABLE or a descriptor error.
    """

    def __init__(self, *, channels: int, ways: int, slots: int, ecc: bool, slot_bytes: int, fw_slot: int,
                 clk_hz: int, sample: int):
        assert slot_bytes % 4 == 0
        self.channels, self.ways, self.slots, self.ecc = channels, ways, slots, ecc
        self.slot_bytes, self.fw_slot = slot_bytes, fw_slot
        self.clk_hz, self.sample = clk_hz, sample
        self.buf_stride, self.buf_base, self.window_bytes = window_geometry(slot_bytes, slots, channels)
        self.addr_width = (self.window_bytes // 4 - 1).bit_length()
        self.buf_addr_width = (slots * slot_bytes // 4 - 1).bit_length()
        super().__init__({
            "wb": In(wishbone.Signature(addr_width=self.addr_width)),
            "desc": Out(stream.Signature(layouts.NAND_DESC)),
            "cpl": In(stream.Signature(layouts.NAND_CPL)),
            "timing": Out(TIMING),
            "busy": In(channels),
            "buf": Out(ArbitratedBufferSignature(self.buf_addr_width)).array(channels),
            "irq": Out(1),
            "fault": Out(1),
        })

    @property
    def regs(self) -> dict[str, int]:
        return dict(REGS, BUF=self.buf_base)

    @property
    def geometry(self) -> int:
        return self.channels | self.ways << 8 | self.slots << 16 | int(self.ecc) << 24

    def elaborate(self, platform):
        m = Module()
        C = self.channels
        wb = self.wb

        desc = Signal(32 * DESC_WORDS)
        desc_pending = Signal()
        cpl = Signal(32 * CPL_WORDS)
        cpl_valid = Signal()
        timing = Signal(32 * TIMING_WORDS, init=timing_const(0, self.clk_hz, self.sample).as_value().value)
        irq_en = Signal()
        fault = Signal()
        m.d.comb += [
            self.desc.payload.eq(desc[:layouts.NAND_DESC.size]),
            self.desc.valid.eq(desc_pending),
            self.timing.eq(timing[:TIMING.size]),
            self.cpl.ready.eq(~cpl_valid),
            self.irq.eq(cpl_valid & irq_en),
            self.fault.eq(fault),
        ]
        with m.If(self.desc.valid & self.desc.ready):
            m.d.sync += desc_pending.eq(0)
        with m.If(self.cpl.valid & ~cpl_valid):
            m.d.sync += [cpl.eq(self.cpl.payload), cpl_valid.eq(1)]
            result = self.cpl.payload.result
            with m.If(Cat(result == r for r in FAULT_RESULTS).any()):
                m.d.sync += fault.eq(1)

        # -- Wishbone: registers ack one cycle after the request, buffer writes one cycle after the
        # grant, buffer reads when their data comes
        ack = Signal()
        rdata = Signal(32)
        buf_sel = Signal(range(C + 1))  # which source dat_r takes in the ack cycle (C = registers)
        read_wait = Signal(range(HOST_READ_LATENCY))    # cycles until a granted buffer read's ack
        m.d.comb += [wb.ack.eq(ack), wb.err.eq(0)]
        req = wb.cyc & wb.stb & ~ack & (read_wait == 0)
        m.d.sync += ack.eq(0)
        with m.If(read_wait != 0):
            m.d.sync += read_wait.eq(read_wait - 1)
            with m.If(read_wait == 1):
                m.d.sync += ack.eq(1)

        word = wb.adr
        reg_word = word[:(REGS_BYTES // 4 - 1).bit_length()]
        in_regs = word < self.buf_base // 4
        status = Signal(32)
        m.d.comb += status.eq(desc_pending << STATUS["DESC_PENDING"] | cpl_valid << STATUS["CPL_VALID"]
                              | fault << STATUS["FAULT"] | self.busy << STATUS["CHAN_BUSY"])

        def word_of(vec, i):
            return vec[32 * i:32 * i + 32]

        ro = {REGS["ID"] // 4: Const(BLOCK_ID, 32), REGS["VERSION"] // 4: Const(BLOCK_VERSION, 32),
              REGS["GEOMETRY"] // 4: Const(self.geometry, 32), REGS["SLOT"] // 4: Const(self.slot_bytes, 32),
              REGS["STATUS"] // 4: status, REGS["IRQ_EN"] // 4: irq_en,
              REGS["BUF_STRIDE"] // 4: Const(self.buf_stride, 32), REGS["FW_SLOT"] // 4: Const(self.fw_slot, 32)}
        for i in range(DESC_WORDS):
            ro[REGS["DESC"] // 4 + i] = word_of(desc, i)
        for i in range(CPL_WORDS):
            ro[REGS["CPL"] // 4 + i] = word_of(cpl, i)
        for i in range(TIMING_WORDS):
            ro[REGS["TIMING"] // 4 + i] = word_of(timing, i)

        with m.If(req & in_regs):
            m.d.sync += [buf_sel.eq(C), ack.eq(1)]
            with m.Switch(reg_word):
                for w, v in ro.items():
                    with m.Case(w):
                        m.d.sync += rdata.eq(v)
                with m.Default():
                    m.d.sync += rdata.eq(0)

        def write_word(target):
            for b in range(4):
                with m.If(wb.sel[b]):
                    m.d.sync += target[8 * b:8 * b + 8].eq(wb.dat_w[8 * b:8 * b + 8])

        with m.If(req & in_regs & wb.we):
            with m.Switch(reg_word):
                for i in range(DESC_WORDS):
                    with m.Case(REGS["DESC"] // 4 + i):
                        write_word(word_of(desc, i))
                for i in range(TIMING_WORDS):
                    with m.Case(REGS["TIMING"] // 4 + i):
                        write_word(word_of(timing, i))
                with m.Case(REGS["IRQ_EN"] // 4):
                    m.d.sync += irq_en.eq(wb.dat_w[0])
                with m.Case(REGS["CTRL"] // 4):
                    with m.If(wb.dat_w[CTRL["PUSH"]] & ~desc_pending):
                        m.d.sync += desc_pending.eq(1)
                    with m.If(wb.dat_w[CTRL["POP"]]):
                        m.d.sync += cpl_valid.eq(0)
                    with m.If(wb.dat_w[CTRL["CLEAR_FAULT"]]):
                        m.d.sync += fault.eq(0)

        # page buffers: request, drive the port in the granted cycle, data back in the ack cycle
        # (a read's ack waits for its data: read_wait)
        stride_words = self.buf_stride // 4
        base_words = self.buf_base // 4
        for c in range(C):
            user = self.buf[c]
            hit = (word >= base_words + c * stride_words) & (word < base_words + (c + 1) * stride_words)
            m.d.comb += [user.port.addr.eq(word[:self.buf_addr_width]), user.port.w_data.eq(wb.dat_w)]
            with m.If(req & hit):
                m.d.comb += user.request.eq(1)
                with m.If(user.grant):
                    m.d.sync += buf_sel.eq(c)
                    with m.If(wb.we):
                        m.d.comb += user.port.w_en.eq(wb.sel)
                    with m.If(wb.we | (HOST_READ_LATENCY == 1)):
                        m.d.sync += ack.eq(1)
                    with m.Else():
                        m.d.sync += read_wait.eq(HOST_READ_LATENCY - 1)
        # an address in no channel's window: answer at once (reads 0)
        with m.If(req & ~in_regs):
            hits = [(word >= base_words + c * stride_words) & (word < base_words + (c + 1) * stride_words)
                    for c in range(C)]
            with m.If(~Cat(*hits).any()):
                m.d.sync += [buf_sel.eq(C), ack.eq(1), rdata.eq(0)]
        dat_r = rdata
        for c in range(C):
            dat_r = Mux(buf_sel == c, self.buf[c].port.r_data, dat_r)
        m.d.comb += wb.dat_r.eq(dat_r)
        return m
