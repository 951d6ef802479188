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
DEFAULT_HOST_QUEUES = 2      # host queue pairs of the FTL core (the firmware's own comes on top)


def add_nand_bridge(soc, *, profile: str, channels: int, ways: int, slots: int, ecc: bool,
                    clk_hz: int, sample: int, out_dir: Path, led_stretch: int | None = None):
    """Add a :class:`NandBridge` to ``soc`` as ``soc.afnand``; returns (bridge, core).

    ``core.params`` is the migen ``Instance``'s port dictionary: the caller
    adds the ``nand__<c>__<pin>`` ports (and ``led_*``) before finalisation."""
    from boards.nand_bridge import NandBridge
    from rtl.nand.channel import ChannelParams
    from soc.controller import AmaranthCore

    params = ChannelParams(profile, ways=ways, slots=slots, ecc=ecc)
    kw = {} if led_stretch is None else dict(led_stretch=led_stretch)
    bridge = NandBridge(params, channels, clk_hz=int(clk_hz), sample=sample, **kw)
    core = AmaranthCore(soc.platform, bridge, name="af_nand_bridge", out_dir=out_dir,
                        window_bytes=bridge.window_bytes,
                        key=dict(profile=profile, channels=channels, ways=ways, slots=slots, ecc=ecc,
                                 clk_hz=int(clk_hz), sample=sample, led_stretch=led_stretch))
    soc.afnand = core
    soc.bus.add_slave(name="afnand", slave=core.bus,
                      region=SoCRegion(origin=AFNAND_ORIGIN, size=bridge.window_bytes, cached=False))
    soc.irq.add("afnand", use_loc_if_exists=True)

    export_nand_constants(soc, bridge.window, profile=profile, channels=channels, ways=ways, slots=slots,
                          clk_hz=clk_hz, sample=sample)
    soc.nand_bridge = bridge
    return bridge, core


def export_nand_constants(soc, window, *, profile: str, channels: int, ways: int, slots: int, clk_hz: int,
                          sample: int):
    """The NAND window's register map and the build's shape into ``soc.h``
    (see the module docstring)."""
    from rtl.nand.channel import ChannelParams
    from rtl.nand.timing import TIMING_NAMES, timing_const
    from rtl.nand.window import BLOCK_ID, BLOCK_VERSION, CTRL, STATUS

    for k, v in window.regs.items():
        soc.add_constant(f"AFNAND_REG_{k}", v)
    for group, items in (("STATUS", STATUS), ("CTRL", CTRL)):
        for k, v in items.items():
            soc.add_constant(f"AFNAND_{group}_{k}", v)
    soc.add_constant("AFNAND_BLOCK_ID", BLOCK_ID)
    soc.add_constant("AFNAND_BLOCK_VERSION", BLOCK_VERSION)
    soc.add_constant("AFNAND_QUEUE", ChannelParams(profile, ways=ways, slots=slots).queue)

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


def add_ftl_bridge(soc, *, profile: str, channels: int, ways: int, slots: int, clk_hz: int, sample: int,
                   out_dir: Path, cache_pages: int = 0, sim_gate_ecc: bool = False,
                   host_queues: int = DEFAULT_HOST_QUEUES, led_stretch: int | None = None,
                   nvme_queues: int = 0, nvme_contexts: int = 8, ring_oscillator: bool = True):
    """Add the FTL core (:class:`soc.ftl_bridge.FtlBridge`) as the SoC's
    controller at ``AFCTRL_BASE``; returns (bridge, core).

    ``soc.h`` gets ``AFCTRL_FTL`` (this build carries the FTL core),
    ``AFCTRL_FTL_OFFSET`` (its FTL registers, ``AF_FTL_*`` in the spec header;
    the host queue registers are at offset 0), ``AFCTRL_NAND_OFFSET`` (the
    NAND window inside the controller window; the firmware's ``AFNAND_BASE``)
    and every NAND constant above.  ``cache_pages``: the core's volatile
    write cache (0: none); the firmware finds it in ``ftl.cache_pages``.
    ``sim_gate_ecc``: gate the idle BCH decoders' clocks (simulation only).
    ``ring_oscillator``: the append tokens' key comes from ring oscillators (a board); False: from the
    TRNG's seeded stand-in, which has no entropy (Verilator cannot run the rings; docs/security.md).
    ``host_queues``: queue pairs for hosts (0 .. host_queues - 1); the core
    gets one more, the last, which is the firmware's own (console ``io``,
    ``selftest``).  The firmware reads the count from ``ftl.geometry`` and
    takes the last pair; a host finds it in ``hostq.queues``.
    ``led_stretch``: give the core a board's LED ports (see :class:`FtlBridge`).
    ``nvme_queues``: the NVMe controller in front of the core (``nvme_contexts`` commands in flight);
    ``soc.h`` then also gets ``AFCTRL_NVME``, ``AFCTRL_NVME_OFFSET`` (its firmware window),
    ``AFCTRL_NVME_QUEUES`` and ``AFCTRL_NVME_STAGING_BYTES``; :mod:`soc.nvme` joins its PCIe side."""
    from soc.controller import add_controller
    from soc.ftl_bridge import FTL_OFFSET, HOST_OFFSET, FtlBridge

    # the hosts' queue pairs (0 .. host_queues - 1), then the firmware's own (the last: console `io`, selftest)
    if not 1 <= host_queues < spec.HOST_REGS["size"].count:
        raise ValueError(f"host_queues: 1..{spec.HOST_REGS['size'].count - 1} (the firmware takes one more pair "
                         f"of the register map's {spec.HOST_REGS['size'].count}), not {host_queues}")
    nvme = dict(nvme_queues=nvme_queues, nvme_contexts=nvme_contexts) if nvme_queues else {}
    bridge = FtlBridge(clk_hz=int(clk_hz), sample=sample, profile=profile, channels=channels, ways=ways,
                       nand_slots=slots, queue_pairs=host_queues + 1, cache_pages=cache_pages,
                       sim_gate_ecc=sim_gate_ecc, led_stretch=led_stretch, ring_oscillator=ring_oscillator, **nvme)
    core = add_controller(soc, bridge, regs={}, caps={}, window_bytes=bridge.window_bytes, out_dir=out_dir,
                          module_name="af_ftl_bridge",
                          key=dict(clk_hz=int(clk_hz), sample=sample, profile=profile, channels=channels, ways=ways,
                                   nand_slots=slots, queue_pairs=host_queues + 1, cache_pages=cache_pages,
                                   sim_gate_ecc=sim_gate_ecc, led_stretch=led_stretch,
                                   ring_oscillator=ring_oscillator, **nvme))
    soc.add_constant("AFCTRL_FTL")
    soc.add_constant("AFCTRL_HOSTQ_OFFSET", HOST_OFFSET)
    soc.add_constant("AFCTRL_FTL_OFFSET", FTL_OFFSET)
    soc.add_constant("AFCTRL_NAND_OFFSET", bridge.nand_offset)  # fw.h: AFNAND_BASE = AFCTRL_BASE + this
    if nvme_queues:
        from soc.ftl_bridge import NVME_OFFSET

        soc.add_constant("AFCTRL_NVME")
        soc.add_constant("AFCTRL_NVME_OFFSET", NVME_OFFSET)
        soc.add_constant("AFCTRL_NVME_QUEUES", nvme_queues)
        soc.add_constant("AFCTRL_NVME_STAGING_BYTES", bridge.staging_bytes)
    export_nand_constants(soc, bridge.window, profile=profile, channels=channels, ways=ways, slots=slots,
                          clk_hz=clk_hz, sample=sample)
    soc.ftl_bridge = bridge
    return bridge, core
