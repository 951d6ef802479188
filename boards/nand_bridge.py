"""The NAND controller on the SoC bus: :class:`rtl.nand.controller.NandController`
behind a Wishbone window, for board builds.

On a board built with ``--core nand`` (the NAND controller alone, without
the FTL core of ``soc/ftl_bridge.py``), this is how the CPU reaches the NAND
channels: it writes a descriptor (``spec.NAND_DESC``) into ``DESC``, pushes
it, polls or takes an interrupt for the completion (``spec.NAND_CPL``) in
``CPL``, and moves page data through each channel's page-buffer window.  It
is also what makes the synthesis and timing figures honest: every input of
the controller is driven by a register, so nothing is optimised away.

Port contract (see :mod:`soc.controller`): ``clk``/``rst`` (Amaranth ``sync``
= LiteX ``sys``), ``wbs_*`` (Wishbone B4 classic slave, word address), ``irq``
(a completion is waiting and ``IRQ_EN`` is set), ``nand`` (per channel the
ONFI pins of :class:`rtl.nand.phy.OnfiBusSignature`, split DQ), and the LED
drives ``led_activity`` (a channel is busy, stretched so a human sees it) and
``led_fault`` (sticky: a completion reported FAIL, UNCORRECTABLE or a
descriptor error; cleared through ``CTRL``).

The register window is :class:`rtl.nand.window.NandWindow` (its docstring
has the register map; here every slot is the firmware's and the buffer ports
are always granted).
"""

from __future__ import annotations

from amaranth.hdl import Module, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from atomflash import spec
from rtl.lib import wishbone
from rtl.nand.channel import ChannelParams
from rtl.nand.controller import NandController
from rtl.nand.phy import OnfiBusSignature
from rtl.nand.timing import TIMING_BITS, TIMING_NAMES
from rtl.nand.window import BLOCK_ID, BLOCK_VERSION, CPL_WORDS, CTRL, DESC_WORDS, REGS, STATUS, NandWindow

__all__ = ["NandBridge", "REGS", "STATUS", "CTRL", "BLOCK_ID", "BLOCK_VERSION", "CPL_WORDS", "DESC_WORDS"]


LED_STRETCH = 1 << 22  # the activity LED's hold: ~70 ms at 60 MHz


class NandBridge(wiring.Component):
    """``NandController(params, channels)`` with a Wishbone register window.

    ``clk_hz`` sets the timing registers' reset value (ONFI mode 0 at that
    clock); ``sample`` is ``tSAMPLE``, the board's DQ input latency in cycles
    beyond tREA (the bridge registers ``dq_i`` once, so at least 1).
    ``led_stretch`` is the activity LED's hold time in cycles (a power of two).
    """

    def __init__(self, params: ChannelParams, channels: int, *, clk_hz: int = spec.NAND_CLK_HZ,
                 sample: int = 1, led_stretch: int | None = None):
        self.p, self.channels, self.clk_hz, self.sample = params, channels, clk_hz, sample
        self.led_stretch = LED_STRETCH if led_stretch is None else led_stretch
        self.ctrl = NandController(params, channels=channels)
        self.window = NandWindow(channels=channels, ways=params.ways, slots=params.slots, ecc=params.ecc,
                                 slot_bytes=4 * self.ctrl.slot_words, fw_slot=params.slots - 1,
                                 clk_hz=clk_hz, sample=sample)
        self.slot_bytes = self.window.slot_bytes
        self.buf_stride, self.buf_base = self.window.buf_stride, self.window.buf_base
        self.window_bytes = self.window.window_bytes
        self.addr_width = self.window.addr_width
        wb_sig = wishbone.Signature(addr_width=self.addr_width)
        # flat wbs_* ports, the names soc.controller.AmaranthCore instantiates (a target: directions flipped)
        wbs = {f"wbs_{n}": (In if m.flow == Out else Out)(m.shape) for n, m in wb_sig.members.items()}
        super().__init__({
            **wbs,
            "irq": Out(1),
            "nand": Out(OnfiBusSignature(params.ways, nvddr2=False)).array(channels),
            "led_activity": Out(1),
            "led_fault": Out(1),
        })

    @property
    def wbs(self):
        """The flat ``wbs_*`` ports as one object (``wbs.adr`` ...)."""
        return type("WishboneTarget", (), {n[4:]: getattr(self, n) for n in dir(self) if n.startswith("wbs_")})

    @property
    def regs(self) -> dict[str, int]:
        return self.window.regs

    @property
    def geometry(self) -> int:
        return self.window.geometry

    def elaborate(self, platform):
        m = Module()
        m.submodules.ctrl = ctrl = self.ctrl
        m.submodules.window = window = self.window
        C = self.channels

        # -- pins: DQ inputs registered once (tSAMPLE counts it), the rest straight through
        for c in range(C):
            connect_pins(m, self.nand[c], ctrl.bus[c])

        wiring.connect(m, window.desc, ctrl.desc)
        wiring.connect(m, ctrl.cpl, window.cpl)
        m.d.comb += [ctrl.timing.eq(window.timing), window.busy.eq(ctrl.busy), self.irq.eq(window.irq),
                     self.led_fault.eq(window.fault)]
        for c in range(C):  # the firmware owns the buffers: always granted
            user, port = window.buf[c], ctrl.buf[c]
            m.d.comb += [user.grant.eq(user.request), port.addr.eq(user.port.addr), port.w_en.eq(user.port.w_en),
                         port.w_data.eq(user.port.w_data), user.port.r_data.eq(port.r_data)]
        wb = self.wbs
        m.d.comb += [window.wb.adr.eq(wb.adr), window.wb.dat_w.eq(wb.dat_w), window.wb.sel.eq(wb.sel),
                     window.wb.cyc.eq(wb.cyc), window.wb.stb.eq(wb.stb), window.wb.we.eq(wb.we),
                     wb.dat_r.eq(window.wb.dat_r), wb.ack.eq(window.wb.ack), wb.err.eq(window.wb.err)]

        activity_led(m, ctrl.busy.any(), self.led_activity, self.led_stretch)
        return m


def activity_led(m: Module, busy, led, stretch: int) -> None:
    """``led`` on while ``busy`` and for ``stretch`` cycles after, so a human
    sees a NAND operation of a few microseconds."""
    hold = Signal(range(stretch))
    with m.If(busy):
        m.d.sync += hold.eq(stretch - 1)
    with m.Elif(hold != 0):
        m.d.sync += hold.eq(hold - 1)
    m.d.comb += led.eq(busy | (hold != 0))


def connect_pins(m: Module, pins, bus) -> None:
    """Pins to a channel's ONFI bus: DQ inputs registered once (``tSAMPLE``
    counts that cycle), everything else straight through."""
    m.d.comb += [pins.ce_n.eq(bus.ce_n), pins.cle.eq(bus.cle), pins.ale.eq(bus.ale),
                 pins.we_n.eq(bus.we_n), pins.re_n.eq(bus.re_n), pins.wp_n.eq(bus.wp_n),
                 pins.dq_o.eq(bus.dq_o), pins.dq_oe.eq(bus.dq_oe), bus.rb_n.eq(pins.rb_n)]
    m.d.sync += bus.dq_i.eq(pins.dq_i)


def timing_offsets() -> dict[str, int]:
    """Byte offset of each timing parameter in the window (for the firmware)."""
    return {name: REGS["TIMING"] + i for i, name in enumerate(TIMING_NAMES)}


assert TIMING_BITS == 8
