"""The atomflash LiteX SoC: VexRiscv, ROM (the firmware), SRAM, main RAM, UART
console, timer with uptime, and the controller at ``AFCTRL_BASE``: the FTL
core (:mod:`soc.ftl_bridge`: host queues, the FTL fast path and the NAND
controller, one window with the firmware's registers and NAND port), or, in
builds without NAND, the Amaranth placeholder
:class:`soc.placeholder.IdentifyBlock` that serves IDENTIFY.

The firmware is *the* boot ROM: no LiteX BIOS.  :meth:`AtomflashSoC.init_mems`
is LiteX's hook between "software libraries built" and "gateware written": it
compiles ``firmware/`` against this SoC's generated ``csr.h``/``soc.h``/``mem.h``
and the spec header, and loads ``firmware.bin`` into the ROM.  The ROM size is
fixed (not fitted to the image), so the generated Verilog does not change when
only the firmware does: the simulator reads the ROM from ``sim_rom.init`` at
start-up and a firmware change needs no Verilator rebuild.

``pcie=``: a PCIe function beside it on a simulated link (:meth:`AtomflashSoC.add_sim_pcie`, the
endpoint of :mod:`soc.pcie` with a user block of :data:`PCIE_USERS` on BAR0), whose root complex is
the host library (``atomflash.pcie_link``) over TCP.

Board targets (``boards/``, docs/results/boards.md) subclass or reuse :func:`add_atomflash` with their
own platform, CRG and (SDRAM) main RAM.
"""

from __future__ import annotations

import dataclasses
import os
import subprocess
import sys
from pathlib import Path

from litex.build.generic_platform import Pins, Subsignal
from litex.build.io import CRG
from litex.build.sim import SimPlatform
from litex.soc.integration.common import get_mem_data
from litex.soc.integration.soc_core import SoCCore

from atomflash import spec
from rtl.build_cache import write_if_changed

from . import placeholder
from .controller import add_controller

ROOT = Path(__file__).resolve().parents[1]
FIRMWARE_SRC = ROOT / "firmware"

DEFAULT_SYS_CLK_FREQ = spec.NAND_CLK_HZ  # nominal system clock (= the controller clock the ONFI tables assume)
ROM_BYTES = 0x2_0000                # 128 KiB: firmware code + rodata (+ .data image)
NVME_ROM_BYTES = 0x4_0000           # 256 KiB: the firmware with the NVMe controller's admin path
SDRAM_ROM_BYTES = 0x2_8000          # 160 KiB: the firmware with liblitedram's sdram_init (--sdram, the boards)
NVME_QUEUES = spec.NVME.IO_QUEUES   # I/O queue pairs of the simulated NVMe drive
NVME_CONTEXTS = 8                   # NVMe commands in the FTL core at once (each with a staging area)
SRAM_BYTES = 0x8000                 # 32 KiB: firmware .data/.bss/stack
DEFAULT_SLOTS = spec.NAND_DEFAULTS.SLOTS  # page-buffer slots per NAND channel
FTL_SLOTS = 16                      # FtlCore publisher slots (map-changing commands in flight)
HOSTMEM_ORIGIN = 0xA000_0000        # the simulated host's memory (queues, data buffers): not the CPU's
# LiteX's L2 cache in front of an SDRAM main RAM (--sdram, the boards): none.  Its hit answers the
# bus from its tag compare, a path into every bus master (the CPU's caches, the FTL core, UARTBone)
# that was the SoC's longest on an ECP5; the CPU's own caches keep the firmware off the SDRAM enough.
SDRAM_L2_BYTES = 0


def hostmem_bytes(profile: str = "small", host_queues: int = 1) -> int:
    """The simulated host memory: for each host queue pair its rings and room
    for the largest command's buffers (a ``MAX_TRANSFER`` read or write, or a
    full atomic group with its list), rounded up to 4 KiB; the total rounded
    up to a power of two (256 KiB for one queue on the small profile, 512 KiB
    for two).  ``atomflash.Device`` gives each host queue an equal slice."""
    p = spec.NAND_PROFILES[profile]
    lim = spec.LIMITS
    rings = lim.QUEUE_DEPTH * (spec.CMD.size + spec.CPL.size)
    buffers = max(lim.MAX_TRANSFER, lim.MAX_ATOMIC_PAGES) * p.page_data + lim.MAX_ATOMIC_PAGES * spec.ATOMIC_ENTRY.size
    per_queue = -(-(rings + buffers) // 4096) * 4096
    size = 4096
    while size < host_queues * per_queue:
        size *= 2
    return size


def nvme_staging_bytes(profile: str = "small") -> int:
    """SoC memory the NVMe controller's staging areas take (``NVME_CONTEXTS`` of them, and a page for
    the firmware's admin data)."""
    from rtl.nvme.translate import NvmeCommandTranslator

    t = NvmeCommandTranslator(queues=NVME_QUEUES, core_queue_ids=NVME_QUEUES + 1, contexts=NVME_CONTEXTS,
                              block_bytes=spec.NAND_PROFILES[profile].page_data)
    return t.staging_bytes + 4096


def main_ram_bytes(profile: str = "small", channels: int = 1, ways: int = 1, cache_pages: int = 0,
                   nvme_staging: int = 0) -> int:
    """Main RAM for the firmware's tables and buffers, rounded up to a power of
    two (at least 256 KiB), sized for a full device (every page written):

    * the map: 24 bytes per LBA (L2P address 4, version 8, recovery's
      commit-seq scratch 8, the checkpointer's shadow address 4), one LBA per
      flash page at most;
    * recovery's scan table: 48 bytes per page it may scan (``af_rec_page_t``
      + two index words; docs/recovery.md), i.e. every page with no checkpoint;
    * block table: 64 bytes per erase block (``af_block_t``, one 32-byte cache
      line: state, erase count, valid count, last seq; page 0's record, 24; the
      valid-count scratch, 4; rounding);
    * page-valid bitmap: 1 bit per page;
    * data buffers: 4 pages (data + spare) per target (double-buffered reads and
      writes), plus the host queues;
    * the FTL core's: its block table (one word per block, dies x a power of
      two), one scratch page per publisher slot, the relocator's page, the
      IDENTIFY and log records;
    * the core's volatile write cache: ``cache_pages`` pages of data;
    * the pending bindings a checkpoint records (firmware/pending.h): the core's
      snapshot page, its CKPT_PEND records, and at boot recovery's lists of them;
    * 8 KiB at the top that ``selftest`` uses as scratch;
    * the NVMe controller's staging areas, ``nvme_staging`` (:func:`nvme_staging_bytes`).

    The firmware sizes its tables from the geometry it reads from the NAND
    parameter pages and checks them against ``MAIN_RAM_SIZE``.
    """
    p = spec.NAND_PROFILES[profile]
    targets = channels * ways * p.luns
    blocks = p.blocks_per_lun * targets
    pages = blocks * p.pages_per_block
    queues = spec.LIMITS.QUEUE_DEPTH * (spec.CMD.size + spec.CPL.size)
    ftl = 4 * targets * (1 << (p.blocks_per_lun - 1).bit_length()) + (FTL_SLOTS + 1) * p.page_data + 1024
    lim = spec.LIMITS
    tables = lim.MAX_OPEN_TX + lim.MAX_APPENDS + lim.MAX_PENDING
    pending = (spec.SNAP_HDR.size + spec.SNAP_ENTRY.size * tables + spec.CKPT_PEND.size * tables
               + (24 + 24 + 16 + 4) * tables)
    need = ((24 + 48) * pages + 64 * blocks + pages // 8 + 4 * targets * p.page_bytes + queues + ftl
            + cache_pages * p.page_data + pending + 8192 + nvme_staging)
    size = 256 * 1024
    while size < need:
        size *= 2
    return size


# Simulation platform ---------------------------------------------------------

def _sim_serial(index: int, name: str = "serial"):
    """A simulated byte stream (litex_sim's serial2console / serial2tcp pads; LiteEth's PHY model's
    with ``name="eth"``, a frame a run of valid bytes)."""
    return (name, index,
            *(Subsignal(f"{side}_{sig}", Pins(8 if sig == "data" else 1))
              for side in ("source", "sink") for sig in ("valid", "ready", "data")))


_sim_io = [
    ("sys_clk", 0, Pins(1)),
    ("sys_rst", 0, Pins(1)),
    _sim_serial(0),  # the firmware console
    # The host port: a second byte stream, LiteX's UARTBone (Wishbone master)
    # behind it; soc/sim.py puts it on a TCP socket (litex_sim's serial2tcp,
    # which binds pads named "serial": hence index 1).
    _sim_serial(1),
]


class SimPlatformAF(SimPlatform):
    def __init__(self):
        SimPlatform.__init__(self, "SIM", list(_sim_io))


# An uncached address no region decodes: `selftest` reads it to check the bus
# timeout (soc/bus_timeout.py) ends the access instead of hanging the CPU.
UNMAPPED_PROBE = 0xB000_0000

# SoC -------------------------------------------------------------------------

#: what serves BAR0's user region of the simulated PCIe function (``AtomflashSoC(pcie=...)``,
#: ``soc/sim.py --pcie``): a ``PcieEndpoint`` ``user`` (``None``: its bring-up block)
PCIE_USERS = {
    "exerciser": None,
}
#: every ``pcie=``: a user block above, or ``nvme``: the NVMe drive (the FTL bridge built with the NVMe
#: controller, whose PCIe side soc/nvme.py joins to the endpoint; needs ``nand``)
PCIE_FUNCTIONS = (*PCIE_USERS, "nvme")


def add_atomflash(soc, *, out_dir: Path, nand_hook=None):
    """Add the controller core (today the placeholder) to ``soc``."""
    return add_controller(
        soc, placeholder.IdentifyBlock(),
        regs=placeholder.REGS, caps=placeholder.CAPS,
        extra_constants={"DMA": placeholder.DMA,
                         "BLOCK": {"ID": placeholder.BLOCK_ID, "VERSION": placeholder.BLOCK_VERSION}},
        window_bytes=placeholder.WINDOW_BYTES, out_dir=out_dir,
        module_name="af_identify_block", nand_hook=nand_hook)


class AtomflashSoC(SoCCore):
    """The simulated SoC (``soc/sim.py``).

    ``nand``: the controller is the FTL core (:func:`soc.nand.add_ftl_bridge`:
    host queues, FTL, NAND controller with ``channels`` x ``ways`` targets,
    ``slots`` page-buffer slots per channel, BCH ECC) at ``AFCTRL_BASE``; its
    pins are wired to NAND models by ``soc/sim.py``
    (:func:`soc.nand_sim.wire_core`).  Without ``nand`` it is the identify
    placeholder (:mod:`soc.placeholder`), for quick console tests.

    ``etherbone``: the Ethernet boards' host link beside the debug port
    (:func:`soc.etherbone.add_etherbone_host` on LiteEth's PHY model; ``soc/sim.py``
    puts the UDP gateway ``soc/eth2udp.c`` on its pads)."""

    def __init__(self, *, sys_clk_freq: int = DEFAULT_SYS_CLK_FREQ, profile: str = "small",
                 channels: int = 1, ways: int = 1, nand: bool = False, slots: int = DEFAULT_SLOTS,
                 cache_pages: int = 0, host_queues: int | None = None, sdram: bool = False,
                 trace_from_reset: bool = True, rtl_dir: Path, firmware_dir: Path | None = None,
                 pcie: str | None = None, etherbone: bool = False, **kwargs):
        platform = SimPlatformAF()
        self.crg = CRG(platform.request("sys_clk"))
        self.profile, self.channels, self.ways = profile, channels, ways
        self.firmware_dir = firmware_dir

        nvme = pcie == "nvme"
        if nvme and not nand:
            raise ValueError("the NVMe drive needs the FTL core (nand=True)")
        ram = main_ram_bytes(profile, channels, ways, cache_pages if nand else 0,
                             nvme_staging=nvme_staging_bytes(profile) if nvme else 0)
        SoCCore.__init__(
            self, platform, clk_freq=sys_clk_freq,
            ident="atomflash SoC (simulation)", ident_version=False,
            cpu_type="vexriscv", cpu_variant="standard",
            integrated_rom_size=NVME_ROM_BYTES if nvme else SDRAM_ROM_BYTES if sdram else ROM_BYTES,
            integrated_sram_size=SRAM_BYTES,
            integrated_main_ram_size=0,     # main RAM is added below, bursting
            uart_name="sim",
            timer_uptime=True,
            # A crossbar, not one shared bus: the CPU's access to a page buffer
            # waits for the core's buffer port, which the core's DMA holds
            # while it waits for SoC memory.  On a shared bus those two waits
            # deadlock (until LiteX's bus timeout answers the CPU with garbage).
            bus_interconnect="crossbar",
            **kwargs)
        # The firmware is the ROM: tell LiteX's Builder not to build its BIOS
        # (it still builds libc/libbase/compiler-rt, which the firmware links).
        self.integrated_rom_initialized = True

        # Simulation control: $finish and trace on/off from firmware (sim_finish, sim_trace CSRs).
        platform.add_debug(self, reset=1 if trace_from_reset else 0)
        self.sdram_main = sdram
        if sdram:
            self.add_sim_sdram()
        else:
            self.add_bursting_main_ram(ram)

        self.nand_core = None
        if nand:
            from .nand import DEFAULT_HOST_QUEUES, add_ftl_bridge
            from .nand_sim import SAMPLE_CYCLES

            self.host_queues = DEFAULT_HOST_QUEUES if host_queues is None else host_queues
            _, self.nand_core = add_ftl_bridge(self, profile=profile, channels=channels, ways=ways, slots=slots,
                                               clk_hz=int(sys_clk_freq), sample=SAMPLE_CYCLES, out_dir=rtl_dir,
                                               cache_pages=cache_pages, host_queues=self.host_queues,
                                               sim_gate_ecc=True,  # Verilator only: idle decoders cost nothing
                                               ring_oscillator=False,  # Verilator cannot run the rings
                                               **(dict(nvme_queues=NVME_QUEUES, nvme_contexts=NVME_CONTEXTS)
                                                  if nvme else {}))
            self.add_host_port(hostmem_bytes(profile, self.host_queues), in_sdram=sdram)
            if etherbone:
                from liteeth.phy.model import LiteEthPHYModel

                from .etherbone import add_etherbone_host

                self.platform.add_extension([_sim_serial(0, "eth")])
                self.ethphy = LiteEthPHYModel(self.platform.request("eth", 0))
                add_etherbone_host(self, self.ethphy)
        else:
            add_atomflash(self, out_dir=rtl_dir)
            self.add_constant("AF_NAND_PROFILE_" + profile.upper())
            self.add_config("AF_CHANNELS", channels)
            self.add_config("AF_WAYS", ways)
        if nvme:
            from .nvme import NvmeBar, nvme_pcie_config

            self.add_sim_pcie(lambda ep: NvmeBar(ep, self.nand_core.params, NVME_QUEUES),
                              config=nvme_pcie_config(NVME_QUEUES))
        elif pcie is not None:
            self.add_sim_pcie(PCIE_USERS[pcie])

    def add_sim_pcie(self, user=None, config=None):
        """A PCIe function on the simulated link (``soc/pcie_sim_phy.py``; ``soc/sim.py`` puts the
        litex_sim module ``pcie2tcp`` on its pads): :class:`soc.pcie.PcieEndpoint` on the 64-bit
        simulation PHY, ``user`` serving BAR0's user region (``PcieEndpoint``'s ``user``: ``None``
        for the bring-up block ``PcieExerciser``, or a callable ``user(endpoint)``).  The endpoint
        is not on the SoC bus: the host reaches it over the link only."""
        from .pcie import PcieConfig, PcieEndpoint
        from .pcie_sim_phy import DATA_WIDTH, SimPciePHY, sim_pads

        self.platform.add_extension([sim_pads()])
        config = dataclasses.replace(config or PcieConfig(), data_width=DATA_WIDTH)
        # the PHY becomes the endpoint's submodule (``self.pcie.endpoint.phy``), nobody else's
        phy = SimPciePHY(self.platform.request("pcie_sim"), config)
        self.pcie = PcieEndpoint(phy, config, user=user)

    def add_bursting_main_ram(self, size: int) -> None:
        """Main RAM as SoCCore's integrated RAM, but answering incrementing bursts a word a cycle
        (``rtl.lib.wishbone``): the FTL core's page copies and the NVMe staging moves burst, so a page
        crosses it in about half the cycles.  Only this RAM: the rest of the bus stays classic."""
        from litex.soc.integration.soc import SoCRegion
        from litex.soc.interconnect import wishbone

        self.main_ram = wishbone.SRAM(size, bus=wishbone.Interface(data_width=32, address_width=32,
                                                                  addressing="word", bursting=True))
        self.bus.add_slave("main_ram", self.main_ram.bus, SoCRegion(origin=self.mem_map["main_ram"], size=size))

    def add_sim_sdram(self):
        """Main RAM in a simulated SDR SDRAM instead of an SRAM: LiteDRAM's
        ``SDRAMPHYModel`` of the ULX3S's 16-bit MT48LC16M16 (32 MiB) behind
        LiteX's controller (and an L2 cache of ``SDRAM_L2_BYTES``), as on a board.  The firmware then
        runs liblitedram's ``sdram_init`` (with a short memtest here) before
        its tables move in, and host memory takes the SDRAM's top
        (:func:`add_sdram_hostmem`)."""
        from litedram import modules as litedram_modules
        from litedram.phy.model import SDRAMPHYModel

        module = litedram_modules.MT48LC16M16(self.sys_clk_freq, "1:1")
        self.sdrphy = SDRAMPHYModel(module=module, data_width=16, clk_freq=self.sys_clk_freq)
        self.add_sdram("sdram", phy=self.sdrphy, module=module, l2_cache_size=SDRAM_L2_BYTES)
        self.add_constant("MEMTEST_DATA_SIZE", 8 * 1024)  # the boot's memtest: short in simulation
        self.add_constant("MEMTEST_ADDR_SIZE", 8 * 1024)

    def add_host_port(self, hostmem_size: int, *, in_sdram: bool = False):
        """What a host attaches to in simulation (``atomflash.transport``):

        * ``hostbone``: LiteX's UARTBone, a Wishbone master driven by bytes on
          the second ``serial`` pads (``soc/sim.py`` puts them on a TCP port), so the
          host reads and writes the controller's registers (the host queue
          doorbells) and its own memory -- the role PCIe BAR accesses play on
          a board;
        * ``hostmem``: an SRAM of ``hostmem_size`` bytes (:func:`hostmem_bytes`)
          standing in for host memory, where the host keeps its queues and
          data buffers (one slice per host queue pair) and the controller's
          DMA reads and writes them.  The CPU never touches it (IO region,
          uncached).

        Both appear in ``csr.csv``/``csr.json`` (``memory_region``), which is
        how the host library finds them."""
        from litex.soc.cores.uart import RS232PHYModel, UARTBone
        from litex.soc.integration.soc import SoCRegion
        from litex.soc.interconnect import wishbone

        self.hostbone_phy = RS232PHYModel(self.platform.request("serial", 1))
        self.hostbone = UARTBone(phy=self.hostbone_phy, clk_freq=self.sys_clk_freq,
                                 address_width=self.bus.address_width)
        self.bus.add_master(name="hostbone", master=self.hostbone.wishbone)
        if in_sdram:
            add_sdram_hostmem(self, hostmem_size)
            return
        self.hostmem = wishbone.SRAM(hostmem_size, bus=wishbone.Interface(data_width=32, address_width=32,
                                                                         addressing="word"))
        self.bus.add_slave(name="hostmem", slave=self.hostmem.bus,
                           region=SoCRegion(origin=HOSTMEM_ORIGIN, size=hostmem_size, cached=False))

    def finalize(self):
        if not self.finalized:
            add_bus_timeouts(self)
        super().finalize()

    # Called by LiteX's Builder after the software libraries are built.
    def init_mems(self, **kwargs):
        fw_bin = build_firmware(Path(self.platform.output_dir), self.firmware_dir)
        words = get_mem_data(str(fw_bin), data_width=32, endianness=self.cpu.endianness)
        self.init_ram("rom", contents=words, auto_size=False)
        self.firmware_bin = fw_bin


def add_sdram_hostmem(soc, size: int) -> None:
    """Host memory (``hostmem``: the queues and data buffers the FTL core's
    DMA reads and writes, :func:`soc.atomflash_soc.hostmem_bytes`) at
    ``HOSTMEM_ORIGIN``, as in the simulated SoC, but stored in the top
    ``size`` bytes of the SDRAM through a LiteDRAM port of its own
    (no L2 cache: the CPU never reads it, the host and the DMA do).  Main
    RAM shrinks by ``size``: ``MAIN_RAM_SIZE`` in ``mem.h``, which the
    firmware allocates its tables below, no longer covers it.  (Main RAM's
    address decoder still spans the whole SDRAM; only the firmware's view
    ends below host memory.)"""
    import math

    from litedram.frontend.wishbone import LiteDRAMWishbone2Native
    from litex.soc.integration.soc import SoCRegion
    from litex.soc.interconnect import wishbone

    if not hasattr(soc, "sdram"):
        raise SystemExit("the FTL core on a board keeps host memory in SDRAM: this target has none")
    main = soc.bus.regions["main_ram"]
    if size > main.size // 2:
        raise SystemExit(f"host memory ({size} B) would take more than half of the SDRAM ({main.size} B)")
    main.size -= size
    port = soc.sdram.crossbar.get_port()
    port.data_width = 2 ** int(math.log2(port.data_width))
    wb_port = wishbone.Interface(data_width=port.data_width, address_width=32, addressing="word")
    # Wishbone2Native subtracts base_address: HOSTMEM_ORIGIN lands at SDRAM byte offset main.size
    soc.submodules.hostmem_port = LiteDRAMWishbone2Native(wishbone=wb_port, port=port,
                                                          base_address=HOSTMEM_ORIGIN - main.size)
    wb_bus = wishbone.Interface(data_width=32, address_width=32, addressing="word")
    if port.data_width != 32:
        soc.submodules.hostmem_converter = wishbone.Converter(wb_bus, wb_port)
    else:
        wb_bus = wb_port
    soc.bus.add_slave(name="hostmem", slave=wb_bus,
                      region=SoCRegion(origin=HOSTMEM_ORIGIN, size=size, cached=False))
    soc.hostmem_size = size


def add_bus_timeouts(soc) -> None:
    """LiteX's crossbar has no bus timeout: give each master of ``soc`` its own
    (:mod:`soc.bus_timeout`; the controller's DMA is answered with ``err``),
    and check the selftest's unmapped probe address really is unmapped.  Call
    it from the SoC's ``finalize``, after the last master was added (the
    simulated SoC and the board targets)."""
    from .bus_timeout import add_master_timeouts

    add_master_timeouts(soc, err_masters=("afctrl_dma",))
    probe = UNMAPPED_PROBE
    hit = [n for n, r in soc.bus.regions.items() if r.origin <= probe < r.origin + r.size]
    assert not hit, f"the selftest's unmapped probe 0x{probe:08x} lies in {hit}"
    soc.add_constant("BUS_UNMAPPED_PROBE", probe)


def build_firmware(soc_out: Path, fw_out: Path | None = None) -> Path:
    """Compile firmware/ for the SoC whose LiteX build output is ``soc_out``
    (its ``software/include/generated`` must exist).  Returns firmware.bin."""
    from atomflash import gen_c

    gen_dir = ROOT / "build" / "gen"
    write_if_changed(gen_dir / "atomflash_spec.h", gen_c.generate())
    fw_out = Path(fw_out or soc_out / "software" / "firmware")
    fw_out.mkdir(parents=True, exist_ok=True)
    subprocess.check_call([
        "make", f"-j{os.cpu_count() or 2}", "-s", "-C", str(fw_out), "-f", str(FIRMWARE_SRC / "Makefile"),
        f"BUILD_DIR={soc_out}", f"AF_GEN={gen_dir}", f"PYTHON={sys.executable}",
    ])
    return fw_out / "firmware.bin"
