"""The ONFI pins of one channel through the FPGA's I/O buffers, NV-DDR2 included.

The PHY (:class:`rtl.nand.phy.OnfiPhy`) hands its pins over as plain signals
(:class:`rtl.nand.phy.OnfiBusSignature`); NV-DDR2's DQS is a pair, one value
per half cycle, and DQ and DQS come back as a pair of samples, one per clock
edge.  :class:`OnfiPads` puts them on the pads with ``amaranth.lib.io.DDRBuffer``
(ODDRX1F / IDDRX1F on ECP5, chosen by the platform).  Every output, the SDR
ones too, goes through a DDR buffer (both halves equal where the pin is
single rate), so all of them take the buffer's latency and keep the edge
order the PHY made; R/B# is asynchronous and only buffered (the PHY
synchronises it).  The input pair is re-ordered to the PHY's convention:
``dqs_i[0]``/``dq_i_fall`` the falling-edge sample half a cycle before the
rising-edge sample ``dqs_i[1]``/``dq_i``.

Amaranth cannot simulate DDR buffers; the NV-DDR2 Verilator harness
(:mod:`sim.harness.nand_channel`) models the same pair behaviour at the
core's boundary.
"""

from __future__ import annotations

from amaranth.hdl import Cat, Module, Signal
from amaranth.lib import io, wiring
from amaranth.lib.wiring import In

from .phy import OnfiBusSignature

__all__ = ["OnfiPads", "PAD_NAMES"]

#: The pad names ``OnfiPads`` takes (``ports``): outputs, then DQ and DQS (both ways), then R/B#.
PAD_NAMES = ("ce_n", "cle", "ale", "we_n", "re_n", "wp_n", "dq", "dqs", "rb_n")


class OnfiPads(wiring.Component):
    """One channel's pads.  ``ports``: :data:`PAD_NAMES` to ``io`` ports (``dq`` 8 wide, ``ce_n``
    and ``rb_n`` one per target).  ``bus`` connects to the PHY's (or the controller's) ``bus``."""

    def __init__(self, targets: int, ports: dict):
        missing = set(PAD_NAMES) - set(ports)
        if missing:
            self._MustUse__silence = True   # never elaborated: no "unused" warning on top of the error
            raise ValueError(f"OnfiPads needs ports {sorted(missing)}")
        self.targets = targets
        self.ports = ports
        super().__init__({"bus": In(OnfiBusSignature(targets))})

    def elaborate(self, platform):
        m = Module()
        bus, p = self.bus, self.ports
        for name in ("ce_n", "cle", "ale", "we_n", "re_n", "wp_n"):
            buf = m.submodules[f"{name}_buf"] = io.DDRBuffer("o", p[name])
            pin = getattr(bus, name)
            m.d.comb += [buf.o[0].eq(pin), buf.o[1].eq(pin)]

        m.submodules.dq_buf = dq = io.DDRBuffer("io", p["dq"])
        m.d.comb += [dq.o[0].eq(bus.dq_o), dq.o[1].eq(bus.dq_o), dq.oe.eq(bus.dq_oe)]
        m.submodules.dqs_buf = dqs = io.DDRBuffer("io", p["dqs"])
        m.d.comb += [dqs.o[0].eq(bus.dqs_o[0]), dqs.o[1].eq(bus.dqs_o[1]), dqs.oe.eq(bus.dqs_oe)]

        # i[0] is the rising-edge sample, i[1] the falling edge after it: the PHY pairs each rising
        # sample with the falling one before it
        dq_fall, dqs_fall = Signal(8), Signal()
        m.d.sync += [dq_fall.eq(dq.i[1]), dqs_fall.eq(dqs.i[1])]
        m.d.comb += [bus.dq_i.eq(dq.i[0]), bus.dq_i_fall.eq(dq_fall), bus.dqs_i.eq(Cat(dqs_fall, dqs.i[0]))]

        m.submodules.rb_buf = rb = io.Buffer("i", p["rb_n"])
        m.d.comb += bus.rb_n.eq(rb.i)
        return m
