"""PcieTB: the simulated PCIe endpoint (``sim/pcie``) under cocotbext-pcie's root complex.

The Verilator top's ports are the UltraScale+ hard block's side of LitePCIe's
adapters; :class:`PcieTB` hands them to ``UltraScalePlusPcieDevice``
configured as :class:`soc.pcie.PcieConfig` says the hard block is (IDs, class
code, BAR0, the MSI-X capability), connects it to a ``RootComplex`` and
records what the device sends the host:

* ``host_writes`` / ``host_reads``: ``(address, bytes)`` of every memory write
  / read request TLP the device issued, in arrival order (the handlers wrap
  the root complex's own, which still serve them);
* a :class:`RecordingRegion` at :data:`RECORDER_BASE` for MSI-X messages sent
  to an address the test chose;
* host memory above 4 GiB, ``high`` at :data:`HIGH_BASE`.

Port handles: cocotb caches one handle per signal, and a handle first made
while discovering the hierarchy (``dir(dut)``, which cocotb-bus runs for a
bus's optional signals) does not drive a Verilator 5.006 top-level input --
writes through it are silently lost.  :class:`PcieTB` therefore looks every
port up by name before the buses are built.

The model owns the clock (``user_clk``, 250 MHz) and reset (``user_reset``,
pulsed when the device model starts).  :meth:`start` resets the DUT on a
clock of its own first (see :meth:`_quiet_reset`), builds the root complex and
the model, waits for the model's reset, enumerates, and enables memory
decoding and, unless told otherwise, bus mastering.  BAR0 is reached through ``read32``/``write32`` (offsets from BAR0;
:data:`soc.pcie.EXERCISER_REGS` names the registers), DMA through
:meth:`dma_to_host` / :meth:`dma_from_host` (the exerciser's registers); the
top's ``HostDmaPort`` (``hdp_*`` ports) through ``hostdma_driver.HostDmaPortDriver``.
"""

from __future__ import annotations

import logging
import struct

import cocotb
from cocotb.clock import Clock
from cocotb.triggers import FallingEdge, First, RisingEdge, Timer

from cocotbext.axi import AxiStreamBus
from cocotbext.axi.address_space import MemoryRegion, Region
from cocotbext.pcie.core import RootComplex
from cocotbext.pcie.core.tlp import TlpType
from cocotbext.pcie.xilinx.us import UltraScalePlusPcieDevice

from sim.pcie.gen import HOST_DMA_PORT_NAMES
from sim.pcie.support import hard_block_ports
from soc.pcie import EXERCISER_BUFFER_OFFSET, EXERCISER_REGS, PcieConfig

REGS = EXERCISER_REGS
RECORDER_BASE = 0x8001_0000     # outside the root complex's memory pool and its MSI region
RECORDER_SIZE = 0x1000
HIGH_BASE = 0x1_2345_0000       # host memory above 4 GiB (64-bit addressing)
HIGH_SIZE = 0x2000
MPS_CODE = {128: 0, 256: 1, 512: 2, 1024: 3, 2048: 4, 4096: 5}


def _quiet_bus_scan(record) -> bool:
    """Enumeration probes every device number; the misses are not news."""
    return "Failed to route config type 0" not in record.getMessage()


class RecordingRegion(Region):
    """Host memory that keeps every write it receives: ``(offset, data)``."""

    def __init__(self, size):
        super().__init__(size=size)
        self.writes = []

    async def read(self, addr, length, **kwargs):
        return bytes(length)

    async def write(self, addr, data, **kwargs):
        self.writes.append((addr, bytes(data)))


def tlp_split(addr: int, length: int, size: int) -> list[tuple[int, int]]:
    """The TLPs a transfer must become: cut at every multiple of ``size`` (the max payload
    size for writes, the max read request size for reads)."""
    out = []
    while length:
        n = min(length, size - addr % size)
        out.append((addr, n))
        addr += n
        length -= n
    return out


class PcieTB:
    #: the top's ports besides the hard block's (looked up by name at once) and the inputs among
    #: them a reset holds idle: ``sim.pcie.gen``'s top brings out a HostDmaPort; another top
    #: (``sim.nvme``) names its own
    user_ports: tuple[str, ...] = tuple(HOST_DMA_PORT_NAMES)
    user_idle_inputs: tuple[str, ...] = ("hdp_req_valid", "hdp_wdata_valid", "hdp_rdata_ready", "hdp_done_ready")

    def __init__(self, dut, config: PcieConfig = PcieConfig(), root_mps: int = 256):
        self.dut = dut
        self.config = config
        for name in [n for n, _, _ in hard_block_ports(config.data_width)] + list(self.user_ports):
            getattr(dut, name)       # by name, before any discovery (see the module docstring)
        self.root_mps = root_mps
        self.log = logging.getLogger("cocotb.tb")
        self.log.setLevel(logging.INFO)
        self.rc = self.dev = None
        self.host_writes: list[tuple[int, int]] = []
        self.host_reads: list[tuple[int, int]] = []
        self.pdev = None          # the root complex's view of the function, after start()

    def _build(self):
        """The root complex and the device model on the DUT's ports (the model starts clocking
        and resetting the DUT at once)."""
        config, dut, root_mps = self.config, self.dut, self.root_mps
        self.rc = RootComplex()
        self.rc.max_payload_size = MPS_CODE[root_mps]     # the root port's: the device gets min(this, its own)

        self.dev = UltraScalePlusPcieDevice(
            pcie_generation=int(config.speed[-1]),
            pcie_link_width=config.nlanes,
            user_clk_frequency=config.user_clk_hz,
            alignment="dword",
            pf_count=1,
            max_payload_size=config.max_payload_supported,
            enable_client_tag=True,           # LitePCIe picks its own tags
            enable_extended_tag=False,
            pf0_msi_enable=False,
            pf0_msix_enable=True,
            pf0_msix_table_size=config.msix_vectors - 1,
            pf0_msix_table_bir=0,
            pf0_msix_table_offset=config.msix_table_offset,
            pf0_msix_pba_bir=0,
            pf0_msix_pba_offset=config.msix_pba_offset,

            user_clk=dut.user_clk,
            user_reset=dut.user_reset,
            user_lnk_up=dut.user_lnk_up,
            rq_bus=AxiStreamBus.from_prefix(dut, "s_axis_rq"),
            rc_bus=AxiStreamBus.from_prefix(dut, "m_axis_rc"),
            cq_bus=AxiStreamBus.from_prefix(dut, "m_axis_cq"),
            cc_bus=AxiStreamBus.from_prefix(dut, "s_axis_cc"),
            pcie_cq_np_req=dut.pcie_cq_np_req,
            pcie_cq_np_req_count=dut.pcie_cq_np_req_count,
            cfg_phy_link_down=dut.cfg_phy_link_down,
            cfg_phy_link_status=dut.cfg_phy_link_status,
            cfg_negotiated_width=dut.cfg_negotiated_width,
            cfg_current_speed=dut.cfg_current_speed,
            cfg_max_payload=dut.cfg_max_payload,
            cfg_max_read_req=dut.cfg_max_read_req,
            cfg_function_status=dut.cfg_function_status,
            cfg_ltssm_state=dut.cfg_ltssm_state,
            cfg_interrupt_msi_enable=dut.cfg_interrupt_msi_enable,
            cfg_interrupt_msix_enable=dut.cfg_interrupt_msix_enable,
            cfg_interrupt_msix_mask=dut.cfg_interrupt_msix_mask,
        )
        for name in ("cocotb.pcie", "cocotb.atomflash_pcie_sim"):
            logging.getLogger(name).setLevel(logging.WARNING)
        self.dev.log.setLevel(logging.WARNING)
        self.rc.log.setLevel(logging.WARNING)
        self.rc.log.addFilter(_quiet_bus_scan)

        f = self.dev.functions[0]
        f.vendor_id = config.vendor_id
        f.device_id = config.device_id
        f.subsystem_vendor_id = config.subsystem_vendor_id
        f.subsystem_id = config.subsystem_id
        f.revision_id = config.revision_id
        f.class_code = config.class_code
        f.configure_bar(0, config.bar0_size)       # 32-bit, non-prefetchable memory

        self.rc.make_port().connect(self.dev)

        # what the device sends the host
        for fmt in (TlpType.MEM_WRITE, TlpType.MEM_WRITE_64):
            self._record(fmt, self.host_writes)
        for fmt in (TlpType.MEM_READ, TlpType.MEM_READ_64):
            self._record(fmt, self.host_reads)
        self.recorder = RecordingRegion(RECORDER_SIZE)
        self.rc.mem_address_space.register_region(self.recorder, RECORDER_BASE)
        self.high = MemoryRegion(HIGH_SIZE)
        self.rc.mem_address_space.register_region(self.high, HIGH_BASE)

    def _record(self, fmt, log):
        serve = self.rc.rx_tlp_handler[fmt]

        async def handler(tlp):
            log.append((tlp.address, tlp.length * 4))
            await serve(tlp)

        self.rc.register_rx_tlp_handler(fmt, handler)

    # Bring-up ---------------------------------------------------------------------------------

    async def _quiet_reset(self, cycles: int = 16):
        """Reset the DUT with no model attached.  The model clocks the DUT for two cycles before it
        resets it; whatever an earlier test left in flight (say, a BAR read completion its dead
        model never took) would otherwise reach this test's root complex and answer one of its
        requests."""
        dut = self.dut
        for name in ("m_axis_cq_tvalid", "m_axis_rc_tvalid", "s_axis_rq_tready", "s_axis_cc_tready",
                     *self.user_idle_inputs):
            getattr(dut, name).value = 0
        dut.user_reset.value = 1
        clock = cocotb.start_soon(Clock(dut.user_clk, round(1e9 / self.config.user_clk_hz, 3), "ns").start())
        for _ in range(cycles):
            await RisingEdge(dut.user_clk)
        clock.kill()
        await Timer(1, "ns")

    async def start(self, master: bool = True):
        """Reset, attach the root complex and device model, enumerate, enable."""
        await self._quiet_reset()
        self._build()
        await FallingEdge(self.dut.user_reset)
        await Timer(100, "ns")
        await self.rc.enumerate()
        self.pdev = self.rc.find_device(self.dev.functions[0].pcie_id)
        await self.pdev.enable_device()
        if master:
            await self.pdev.set_master()

    async def cycles(self, n: int):
        await Timer(n * 1e9 / self.config.user_clk_hz, "ns")

    # BAR0 -------------------------------------------------------------------------------------

    async def read32(self, offset: int) -> int:
        # posted writes queued before it (a 4 KiB buffer fill: ~22 us) complete first
        return await self.pdev.bar_window[0].read_dword(offset, timeout=100, timeout_unit="us")

    async def write32(self, offset: int, value: int):
        await self.pdev.bar_window[0].write_dword(offset, value)

    async def write_buffer(self, data: bytes, offset: int = 0):
        """Dwords of ``data`` into the exerciser's buffer, from byte ``offset``."""
        for i in range(0, len(data), 4):
            await self.write32(EXERCISER_BUFFER_OFFSET + offset + i, struct.unpack_from("<I", data, i)[0])

    async def read_buffer(self, length: int, offset: int = 0) -> bytes:
        out = bytearray()
        for i in range(0, length, 4):
            out += struct.pack("<I", await self.read32(EXERCISER_BUFFER_OFFSET + offset + i))
        return bytes(out)

    # DMA through the exerciser ------------------------------------------------------------------

    async def _dma(self, ctrl: int, host_addr: int, length: int, timeout_us: float):
        before = await self.read32(REGS["DMA_STATUS"])
        await self.write32(REGS["DMA_ADDR_LO"], host_addr & 0xFFFFFFFF)
        await self.write32(REGS["DMA_ADDR_HI"], host_addr >> 32)
        await self.write32(REGS["DMA_LEN"], length)
        await self.write32(REGS["DMA_CTRL"], ctrl)
        for _ in range(int(timeout_us * 4)):
            status = await self.read32(REGS["DMA_STATUS"])
            if (status >> 16) != (before >> 16) and not status & 1:
                assert (status >> 16) == ((before >> 16) + 1) & 0xFFFF, f"DMA_STATUS {status:#x} after {before:#x}"
                return status
            await Timer(250, "ns")
        raise AssertionError(f"DMA (ctrl {ctrl}) to/from {host_addr:#x} not done in {timeout_us} us")

    async def dma_to_host(self, host_addr: int, length: int, timeout_us: float = 50) -> int:
        """The buffer's first ``length`` bytes to host memory; returns DMA_STATUS once done.
        (Done means the write TLPs have left the device; see :meth:`wait_host_writes`.)"""
        return await self._dma(1, host_addr, length, timeout_us)

    async def dma_from_host(self, host_addr: int, length: int, timeout_us: float = 50) -> int:
        """Host memory into the buffer's first ``length`` bytes; returns DMA_STATUS once the data is in."""
        return await self._dma(2, host_addr, length, timeout_us)

    async def wait_host_writes(self, nbytes: int, since: int = 0, timeout_us: float = 20):
        """Until the device's write TLPs recorded from index ``since`` carry ``nbytes``."""
        for _ in range(int(timeout_us * 10)):
            if sum(n for _, n in self.host_writes[since:]) >= nbytes:
                return
            await Timer(100, "ns")
        raise AssertionError(f"host saw {self.host_writes[since:]} , expected {nbytes} bytes")

    async def wait_event(self, event, timeout_ns: float) -> bool:
        """Whether ``event`` fires within ``timeout_ns``."""
        if event.is_set():
            return True
        await First(event.wait(), Timer(timeout_ns, "ns"))
        return event.is_set()
