"""Integration point: an Amaranth controller component inside the LiteX SoC.

:class:`AmaranthCore` takes any Amaranth ``wiring.Component`` that follows the
controller port contract, writes it to Verilog at build time
(``amaranth.back.verilog.convert``), adds the file to the platform and
instantiates it with a migen ``Instance``:

==============  =====  ===========================================================
port            dir    meaning
==============  =====  ===========================================================
``clk, rst``    in     Amaranth's default ``sync`` domain = the SoC's ``sys``
``wbs_*``       slave  Wishbone B4 classic, 32-bit, word address (``wbs_adr`` is
                       the offset inside the window): CSRs, queues, IDENTIFY
``wbm_*``       master Wishbone B4 classic, 32-bit, 30-bit word address into the
                       SoC bus (main RAM): data buffers, map traffic; with
                       ``wbm_cti``/``wbm_bte``, incrementing bursts too
``irq``         out    level interrupt -> CPU interrupt ``AFCTRL_INTERRUPT`` (soc.h)
``nand_*``      any    NAND pins (future): routed by the target — to board pads,
                       or to one ``nand_model`` instance per target in simulation
                       (see ``nand_hook``)
==============  =====  ===========================================================

The window sits at ``AFCTRL_BASE`` (``mem.h``), uncached (>= 0x80000000 as
VexRiscv requires).  Register offsets come from the component's Python module
and reach the firmware as ``AFCTRL_REG_<NAME>`` / ``AFCTRL_CAP_<NAME>`` /
``AFCTRL_DMA_<NAME>`` constants in the generated ``soc.h``: defined once.

The real controller replaces :class:`soc.placeholder.IdentifyBlock` by passing
its own component, ``regs``/``caps`` dictionaries and (for simulation) a
``nand_hook`` that adds the NAND model sources and wires the ``nand_*`` ports.
"""

from __future__ import annotations

from pathlib import Path

from migen import ClockSignal, Instance, Module, ResetSignal, Signal

from litex.soc.interconnect import wishbone
from litex.soc.integration.soc import SoCRegion

from rtl.build_cache import write_verilog

ROOT = Path(__file__).resolve().parents[1]

AFCTRL_ORIGIN = 0x9000_0000  # uncached IO space of VexRiscv (>= 0x80000000)


class AmaranthCore(Module):
    """Wrap an Amaranth component (port contract above) as a LiteX SoC peripheral."""

    def __init__(self, platform, component, *, name: str, out_dir: Path,
                 window_bytes: int, key=None):
        # key: the component's constructor arguments; given, an unchanged design is not converted again
        self.verilog = write_verilog(component, name, out_dir, key=key)
        platform.add_source(str(self.verilog))

        ports = set(component.signature.members.keys())
        self.port_names = ports
        adr_width = len(getattr(component, "wbs_adr"))
        assert window_bytes == 4 << adr_width or window_bytes <= 4 << adr_width

        self.bus = wishbone.Interface(data_width=32, address_width=32, addressing="word")
        self.dma = wishbone.Interface(data_width=32, address_width=32, addressing="word")
        self.irq = Signal()

        params = dict(
            i_clk=ClockSignal("sys"), i_rst=ResetSignal("sys"),
            i_wbs_adr=self.bus.adr[:adr_width], i_wbs_dat_w=self.bus.dat_w,
            o_wbs_dat_r=self.bus.dat_r, i_wbs_sel=self.bus.sel, i_wbs_cyc=self.bus.cyc,
            i_wbs_stb=self.bus.stb, i_wbs_we=self.bus.we, o_wbs_ack=self.bus.ack,
            o_wbs_err=self.bus.err,
        )
        if "wbm_adr" in ports:
            params.update(
                o_wbm_adr=self.dma.adr, o_wbm_dat_w=self.dma.dat_w, i_wbm_dat_r=self.dma.dat_r,
                o_wbm_sel=self.dma.sel, o_wbm_cyc=self.dma.cyc, o_wbm_stb=self.dma.stb,
                o_wbm_we=self.dma.we, i_wbm_ack=self.dma.ack, i_wbm_err=self.dma.err,
            )
        if "wbm_cti" in ports:
            params.update(o_wbm_cti=self.dma.cti, o_wbm_bte=self.dma.bte)
        if "irq" in ports:
            params["o_irq"] = self.irq
        self.has_irq = "irq" in ports
        # LiteX wires soc.irq entries to cpu.interrupt[n] from `<module>.ev.irq`.
        self.ev = type("IRQLine", (), {"irq": self.irq})()
        self.has_master = "wbm_adr" in ports
        self.params = params  # targets add nand_* pins here before finalize

    def do_finalize(self):
        self.specials += Instance(self.verilog.stem, **self.params)


def add_controller(soc, component, *, regs: dict[str, int], caps: dict[str, int],
                   extra_constants: dict[str, dict[str, int]] | None = None,
                   window_bytes: int, out_dir: Path, name: str = "afctrl",
                   module_name: str = "af_controller", nand_hook=None, key=None):
    """Add ``component`` to ``soc`` as ``soc.<name>``: slave window at
    AFCTRL_ORIGIN, optional DMA master, register map exported to ``soc.h``.

    ``nand_hook(soc, core)`` (optional) is called last: it wires ``nand_*``
    ports (``core.params``) and adds model sources for the target.
    ``key``: the component's constructor arguments (:func:`rtl.build_cache.write_verilog`).
    """
    core = AmaranthCore(soc.platform, component, name=module_name, out_dir=out_dir,
                        window_bytes=window_bytes, key=key)
    setattr(soc, name, core)
    soc.bus.add_slave(name=name, slave=core.bus,
                      region=SoCRegion(origin=AFCTRL_ORIGIN, size=window_bytes, cached=False))
    if core.has_master:
        soc.bus.add_master(name=f"{name}_dma", master=core.dma)
    if core.has_irq:
        soc.irq.add(name, use_loc_if_exists=True)  # -> AFCTRL_INTERRUPT in soc.h
    up = name.upper()
    for reg, off in regs.items():
        soc.add_constant(f"{up}_REG_{reg}", off)
    for cap, bit in caps.items():
        soc.add_constant(f"{up}_CAP_{cap}", bit)
    for group, items in (extra_constants or {}).items():
        for k, v in items.items():
            soc.add_constant(f"{up}_{group}_{k}", v)
    if nand_hook is not None:
        nand_hook(soc, core)
    return core
