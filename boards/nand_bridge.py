"""The NAND controller on the SoC bus: :class:`rtl.nand.controller.NandController`
behind a Wishbone window, for board builds (issue #10).

Until the controller core with its FTL (``rtl/``, issues #5/#6) exists, this
is how the CPU reaches the NAND channels of a board: it writes a descriptor
(``spec.NAND_DESC``) into ``DESC``, pushes it, polls or takes an interrupt for
the completion (``spec.NAND_CPL``) in ``CPL``, and moves page data through
each channel's page-buffer window.  It is also what makes the synthesis and
timing figures honest: every input of the controller is driven by a register,
so nothing is optimised away.

Port contract (see :mod:`soc.controller`): ``clk``/``rst`` (Amaranth ``sync``
= LiteX ``sys``), ``wbs_*`` (Wishbone B4 classic slave, word address), ``irq``
(a completion is waiting and ``IRQ_EN`` is set), ``nand`` (per channel the
ONFI pins of :class:`rtl.nand.phy.OnfiBusSignature`, split DQ), and the LED
drives ``led_activity`` (a channel is busy, stretched so a human sees it) and
``led_fault`` (sticky: a completion reported FAIL, UNCORRECTABLE or a
descriptor error; cleared through ``CTRL``).

Register map (byte offsets in the window; defined once in :data:`REGS` /
:data:`STATUS` / :data:`CTRL` and exported to the firmware as
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
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from atomflash import spec
from atomflash.spec import NandResult
from rtl import spec as layouts
from rtl.lib import wishbone
from rtl.nand.channel import ChannelParams
from rtl.nand.controller import NandController
from rtl.nand.phy import OnfiBusSignature
from rtl.nand.timing import TIMING, TIMING_BITS, TIMING_NAMES, timing_const

__all__ = ["NandBridge", "REGS", "STATUS", "CTRL", "BLOCK_ID", "BLOCK_VERSION"]

BLOCK_ID = int.from_bytes(b"AFNB", "little")
BLOCK_VERSION = 0x0001_0000

DESC_WORDS = -(-spec.NAND_DESC.size // 4)
CPL_WORDS = -(-spec.NAND_CPL.size // 4)
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
    "DESC": 0x040,
    "CPL": 0x080,
    "TIMING": 0x0C0,
}
assert REGS["DESC"] + 4 * DESC_WORDS <= REGS["CPL"]
assert REGS["CPL"] + 4 * CPL_WORDS <= REGS["TIMING"]
assert REGS["TIMING"] + 4 * TIMING_WORDS <= 0x100

STATUS = {
    "DESC_PENDING": 0,  # a pushed descriptor has not been taken by the controller yet
    "CPL_VALID": 1,     # CPL holds a completion (pop it with CTRL.POP)
    "FAULT": 2,         # sticky fault (see led_fault)
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


class NandBridge(wiring.Component):
    """``NandController(params, channels)`` with a Wishbone register window.

    ``clk_hz`` sets the timing registers' reset value (ONFI mode 0 at that
    clock); ``sample`` is ``tSAMPLE``, the board's DQ input latency in cycles
    beyond tREA (the bridge registers ``dq_i`` once, so at least 1).
    ``led_stretch`` is the activity LED's hold time in cycles (a power of two).
    """

    def __init__(self, params: ChannelParams, channels: int, *, clk_hz: int = spec.NAND_CLK_HZ,
                 sample: int = 1, led_stretch: int = 1 << 22):
        self.p, self.channels, self.clk_hz, self.sample = params, channels, clk_hz, sample
        self.led_stretch = led_stretch
        self.ctrl = NandController(params, channels=channels)
        self.slot_bytes = 4 * self.ctrl.slot_words
        self.buf_stride = _pow2(self.slot_bytes * params.slots)
        self.regs_bytes = 0x100
        base = max(self.regs_bytes, self.buf_stride)
        self.buf_base = base
        self.window_bytes = _pow2(base + channels * self.buf_stride)
        self.addr_width = (self.window_bytes // 4 - 1).bit_length()
        wb_sig = wishbone.Signature(addr_width=self.addr_width)
        # flat wbs_* ports, the names soc.controller.AmaranthCore instantiates (a target: directions flipped)
        wbs = {f"wbs_{n}": (In if m.flow == Out else Out)(m.shape) for n, m in wb_sig.members.items()}
        super().__init__({
            **wbs,
            "irq": Out(1),
            "nand": Out(OnfiBusSignature(params.ways)).array(channels),
            "led_activity": Out(1),
            "led_fault": Out(1),
        })

    @property
    def wbs(self):
        """The flat ``wbs_*`` ports as one object (``wbs.adr`` ...)."""
        return type("WishboneTarget", (), {n[4:]: getattr(self, n) for n in dir(self) if n.startswith("wbs_")})

    @property
    def regs(self) -> dict[str, int]:
        return dict(REGS, BUF=self.buf_base)

    @property
    def geometry(self) -> int:
        return self.channels | self.p.ways << 8 | self.p.slots << 16 | int(self.p.ecc) << 24

    def elaborate(self, platform):
        m = Module()
        m.submodules.ctrl = ctrl = self.ctrl
        C = self.channels
        wb = self.wbs

        # -- pins: DQ inputs registered once (tSAMPLE counts it), the rest straight through
        for c in range(C):
            pins, bus = self.nand[c], ctrl.bus[c]
            m.d.comb += [pins.ce_n.eq(bus.ce_n), pins.cle.eq(bus.cle), pins.ale.eq(bus.ale),
                         pins.we_n.eq(bus.we_n), pins.re_n.eq(bus.re_n), pins.wp_n.eq(bus.wp_n),
                         pins.dq_o.eq(bus.dq_o), pins.dq_oe.eq(bus.dq_oe), bus.rb_n.eq(pins.rb_n)]
            m.d.sync += bus.dq_i.eq(pins.dq_i)

        # -- registers
        desc = Signal(8 * 4 * DESC_WORDS)
        desc_pending = Signal()
        cpl = Signal(8 * 4 * CPL_WORDS)
        cpl_valid = Signal()
        timing = Signal(8 * 4 * TIMING_WORDS,
                        init=timing_const(0, self.clk_hz, self.sample).as_value().value)
        irq_en = Signal()
        fault = Signal()
        m.d.comb += [
            ctrl.desc.payload.eq(desc[:layouts.NAND_DESC.size]),
            ctrl.desc.valid.eq(desc_pending),
            ctrl.timing.eq(timing[:TIMING.size]),
            ctrl.cpl.ready.eq(~cpl_valid),
            self.irq.eq(cpl_valid & irq_en),
            self.led_fault.eq(fault),
        ]
        with m.If(ctrl.desc.valid & ctrl.desc.ready):
            m.d.sync += desc_pending.eq(0)
        with m.If(ctrl.cpl.valid & ~cpl_valid):
            m.d.sync += [cpl.eq(ctrl.cpl.payload), cpl_valid.eq(1)]
            result = ctrl.cpl.payload.result
            with m.If(Cat(result == r for r in FAULT_RESULTS).any()):
                m.d.sync += fault.eq(1)

        # activity LED: any channel busy, held for led_stretch cycles
        stretch = Signal(range(self.led_stretch))
        with m.If(ctrl.busy.any()):
            m.d.sync += stretch.eq(self.led_stretch - 1)
        with m.Elif(stretch != 0):
            m.d.sync += stretch.eq(stretch - 1)
        m.d.comb += self.led_activity.eq(ctrl.busy.any() | (stretch != 0))

        # -- Wishbone: one access per two cycles, ack registered
        ack = Signal()
        rdata = Signal(32)
        buf_sel = Signal(range(C + 1))  # which source dat_r takes in the ack cycle (C = registers)
        m.d.comb += [wb.ack.eq(ack), wb.err.eq(0)]
        req = wb.cyc & wb.stb & ~ack
        m.d.sync += ack.eq(req)

        word = wb.adr
        reg_word = word[:(self.regs_bytes // 4 - 1).bit_length()]
        in_regs = word < self.buf_base // 4
        status = Signal(32)
        m.d.comb += status.eq(desc_pending << STATUS["DESC_PENDING"] | cpl_valid << STATUS["CPL_VALID"]
                              | fault << STATUS["FAULT"] | ctrl.busy << STATUS["CHAN_BUSY"])

        def word_of(vec, i):
            return vec[32 * i:32 * i + 32]

        ro = {REGS["ID"] // 4: Const(BLOCK_ID, 32), REGS["VERSION"] // 4: Const(BLOCK_VERSION, 32),
              REGS["GEOMETRY"] // 4: Const(self.geometry, 32), REGS["SLOT"] // 4: Const(self.slot_bytes, 32),
              REGS["STATUS"] // 4: status, REGS["IRQ_EN"] // 4: irq_en,
              REGS["BUF_STRIDE"] // 4: Const(self.buf_stride, 32)}
        for i in range(DESC_WORDS):
            ro[REGS["DESC"] // 4 + i] = word_of(desc, i)
        for i in range(CPL_WORDS):
            ro[REGS["CPL"] // 4 + i] = word_of(cpl, i)
        for i in range(TIMING_WORDS):
            ro[REGS["TIMING"] // 4 + i] = word_of(timing, i)

        with m.If(req & in_regs):
            m.d.sync += buf_sel.eq(C)
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

        # page buffers: the address goes straight to the BRAM, data comes back in the ack cycle
        stride_words = self.buf_stride // 4
        stride_bits = (stride_words - 1).bit_length()
        base_words = self.buf_base // 4
        for c in range(C):
            port = ctrl.buf[c]
            hit = (word >= base_words + c * stride_words) & (word < base_words + (c + 1) * stride_words)
            m.d.comb += [port.addr.eq(word[:stride_bits]), port.w_data.eq(wb.dat_w)]
            with m.If(req & hit):
                m.d.sync += buf_sel.eq(c)
                with m.If(wb.we):
                    m.d.comb += port.w_en.eq(wb.sel)
        dat_r = rdata
        for c in range(C):
            dat_r = Mux(buf_sel == c, ctrl.buf[c].r_data, dat_r)
        m.d.comb += wb.dat_r.eq(dat_r)
        return m


def timing_offsets() -> dict[str, int]:
    """Byte offset of each timing parameter in the window (for the firmware)."""
    return {name: REGS["TIMING"] + i for i, name in enumerate(TIMING_NAMES)}


assert TIMING_BITS == 8
