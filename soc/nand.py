"""The NAND controller on the SoC bus, shared by the simulated SoC and the
board targets: :class:`boards.nand_bridge.NandBridge` (the RTL
:class:`rtl.nand.controller.NandController` behind a Wishbone window) at
``AFNAND_BASE`` with its register map in the generated ``soc.h``.

What reaches the firmware (``soc.h``), all computed here from the Python
sources, none restated by hand:

* ``AFNAND_REG_*``, ``AFNAND_STATUS_*``, ``AFNAND_CTRL_*``, ``AFNAND_BLOCK_ID``,
  ``AFNAND_BLOCK_VERSION`` (the bridge's register map);
* ``AFNAND_TIMING_BYTES`` (bytes of the timing register block),
  ``AFNAND_TIMING_MODES`` (bit n: ONFI mode n's cycle counts fit the
  registers at this clock) and ``AFNAND_TIMING_M<n>_W<i>``: word ``i`` of the
  timing registers for ONFI mode ``n`` at this build's clock and DQ sample
  latency (0 for a mode not offered)
  (:func:`rtl.nand.timing.timing_cycles`), which the firmware writes after SET
  FEATURES switched the targets to mode ``n``;
* ``AFNAND_QUEUE`` (descriptors a target queues besides the one executing);
* ``CONFIG_AF_CHANNELS``, ``CONFIG_AF_WAYS``, ``CONFIG_AF_SLOTS`` and
  ``AF_NAND_PROFILE_<NAME>``: the build's shape.  The firmware takes the
  channel/way/slot counts from the bridge's ``GEOMETRY`` register and the
  flash geometry from each target's parameter page, never from these.

The pins are the target's business: boards route them to pads
(:mod:`boards.common`), the simulation to one NAND model per target
(:func:`soc.nand_sim.wire_core`).
"""

from __future__ import annotations

from pathlib import Path

from litex.soc.integration.soc import SoCRegion

from atomflash import spec

AFNAND_ORIGIN = 0x9100_0000  # after the afctrl window (soc.controller.AFCTRL_ORIGIN), uncached IO


def add_nand_bridge(soc, *, profile: str, channels: int, ways: int, slots: int, ecc: bool,
                    clk_hz: int, sample: int, out_dir: Path, led_stretch: int | None = None):
    """Add a :class:`NandBridge` to ``soc`` as ``soc.afnand``; returns (bridge, core).

    ``core.params`` is the migen ``Instance``'s port dictionary: the caller
    adds the ``nand__<c>__<pin>`` ports (and ``led_*``) before finalisation."""
    from boards.nand_bridge import BLOCK_ID, BLOCK_VERSION, CTRL, REGS, STATUS, NandBridge
    from rtl.nand.channel import ChannelParams
    from rtl.nand.timing import TIMING_NAMES, timing_const
    from soc.controller import AmaranthCore

    params = ChannelParams(profile, ways=ways, slots=slots, ecc=ecc)
    kw = {} if led_stretch is None else dict(led_stretch=led_stretch)
    bridge = NandBridge(params, channels, clk_hz=int(clk_hz), sample=sample, **kw)
    core = AmaranthCore(soc.platform, bridge, name="af_nand_bridge", out_dir=out_dir,
                        window_bytes=bridge.window_bytes)
    soc.afnand = core
    soc.bus.add_slave(name="afnand", slave=core.bus,
                      region=SoCRegion(origin=AFNAND_ORIGIN, size=bridge.window_bytes, cached=False))
    soc.irq.add("afnand", use_loc_if_exists=True)
    for k, v in bridge.regs.items():
        soc.add_constant(f"AFNAND_REG_{k}", v)
    for group, items in (("STATUS", STATUS), ("CTRL", CTRL)):
        for k, v in items.items():
            soc.add_constant(f"AFNAND_{group}_{k}", v)
    soc.add_constant("AFNAND_BLOCK_ID", BLOCK_ID)
    soc.add_constant("AFNAND_BLOCK_VERSION", BLOCK_VERSION)
    soc.add_constant("AFNAND_QUEUE", params.queue)

    # Timing register values per ONFI mode at this clock (modes whose values fit the registers).
    nbytes = len(TIMING_NAMES)
    soc.add_constant("AFNAND_TIMING_BYTES", nbytes)
    modes = 0
    for mode in spec.ONFI_MODES:
        try:
            value = timing_const(mode, int(clk_hz), sample).as_value().value
            modes |= 1 << mode
        except ValueError:
            value = 0  # a parameter does not fit 8 bits at this clock: the mode is not offered
        for w in range(-(-nbytes // 4)):
            soc.add_constant(f"AFNAND_TIMING_M{mode}_W{w}", (value >> (32 * w)) & 0xFFFF_FFFF)
    soc.add_constant("AFNAND_TIMING_MODES", modes)

    soc.add_constant("AF_NAND_PROFILE_" + profile.upper())
    soc.add_config("AF_CHANNELS", channels)
    soc.add_config("AF_WAYS", ways)
    soc.add_config("AF_SLOTS", slots)
    soc.nand_bridge = bridge
    return bridge, core
