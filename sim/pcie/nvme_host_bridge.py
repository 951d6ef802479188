"""The synchronous NVMe host driver on the simulated PCIe device.

:class:`atomflash.nvme.NvmeHost` is plain blocking Python: it reads and writes BAR0 through a
*link* and keeps its queues, PRP lists and data buffers in a
:class:`~atomflash.hostmem.HostMemory`.  Under cocotb the device is a Verilator model clocked by
cocotb's scheduler and reached through cocotbext-pcie's ``RootComplex``, whose operations are
coroutines.  Rewriting the driver as coroutines would give two drivers (the reference controller's
tests, the command-line tools and ``atomflash.Device`` use the blocking one), so the driver runs in a
worker thread instead:

* a test starts it with :func:`in_thread` (cocotb 1.9's ``cocotb.external``: the function runs in a
  thread, the test awaits its result or its exception);
* :class:`PcieNvmeLink` turns each BAR0 access into the root complex's memory read or write, run by
  the scheduler while the thread blocks (``cocotb.function``);
* :class:`RootComplexMemory` is a ``HostMemory`` whose bytes are a region of the root complex's
  memory space: what the driver writes is what the device's DMA reads, and the other way round.
  The driver touches it directly, without TLPs, as a host's CPU touches its own memory.

Simulated time.  cocotb runs an external thread in lock step with the simulator: while the thread
executes Python the simulator is stopped, and time passes only inside a coroutine the thread hands
to the scheduler.  A BAR0 read is one (a TLP round trip), so polling a register lets the device
run; polling host memory -- a completion queue's phase tag -- does not, and would spin on a frozen
device.  ``NvmeHost._wait`` calls ``link.advance()`` between polls; here that lets
:attr:`PcieNvmeLink.poll_ns` of simulated time pass.  The driver's timeouts stay in wall-clock
seconds.

Interrupts: :class:`PcieNvmeLink` counts the MSI/MSI-X messages that reach the root complex's
vectors (``interrupts``, by vector index) and lets the thread wait for one
(:meth:`PcieNvmeLink.wait_interrupt`); the driver itself polls phase tags and needs neither.
"""

from __future__ import annotations

import struct
import threading
from collections import Counter

import cocotb
from cocotb.triggers import First, Timer
from cocotb.utils import get_sim_time

from cocotbext.axi.address_space import MemoryRegion
from cocotbext.pcie.core.tlp import PcieId, Tlp, TlpType

from atomflash.hostmem import PAGE, HostMemory, HostMemoryError

__all__ = ["RootComplexMemory", "PcieNvmeLink", "in_thread"]


async def in_thread(func, *args, **kwargs):
    """Run blocking ``func`` in a worker thread that may use :class:`PcieNvmeLink`; its result, or
    its exception raised here."""
    return await cocotb.external(func)(*args, **kwargs)


def _blocking(awaitable):
    """Await ``awaitable`` in the scheduler from a thread :func:`in_thread` started, blocking that
    thread until it is done (its result, or its exception raised in the thread)."""
    if threading.current_thread() is threading.main_thread():
        getattr(awaitable, "close", lambda: None)()
        raise RuntimeError("PcieNvmeLink blocks: call it from a thread in_thread started, "
                           "not from a coroutine (which awaits the root complex itself)")

    async def run():
        return await awaitable
    return cocotb.function(run)()


class _DmaRegion(MemoryRegion):
    """The root complex's side of a :class:`RootComplexMemory`: an mmap the device's TLPs reach,
    counting the bytes they move."""

    def __init__(self, size: int, owner: "RootComplexMemory"):
        super().__init__(size)
        self.owner = owner

    async def _read(self, address, length, **kwargs):
        self.owner.reads += length
        return await super()._read(address, length, **kwargs)

    async def _write(self, address, data, **kwargs):
        self.owner.writes += len(data)
        await super()._write(address, data, **kwargs)


class RootComplexMemory(HostMemory):
    """Host memory shared between the driver and the root complex's memory space.

    Parameters
    ----------
    rc : cocotbext.pcie.core.RootComplex
        The root complex whose memory space the device's DMA reaches.
    size : int
        Bytes of memory (an anonymous mmap: pages the driver never touches cost nothing).
    base : int or None
        Where it sits in the root complex's memory space; ``None`` takes it from the root complex's
        pool (below 2 GiB, as ``rc.alloc_region`` does), otherwise a free range the caller picks
        (above 4 GiB for 64-bit addressing).

    ``alloc``/``free`` hand out pages inside it; ``read``/``write`` are the host's own accesses
    (no TLPs, no simulated time).  ``reads``/``writes`` count the bytes the device's DMA moved.
    ``refuse(addr)`` makes the page fail both ways: the host's accesses raise
    :class:`HostMemoryError` (as in ``HostMemory``), and the device's read requests touching it get
    an Unsupported Request completion and its write requests are dropped, as a host's IOMMU
    answers; each refused request is recorded in ``refusals`` as ``(kind, address, bytes)``.
    """

    def __init__(self, rc, size: int = 1 << 24, base: int | None = None):
        self.rc = rc
        self.region = _DmaRegion(size, self)
        if base is None:
            rc.mem_pool.alloc_region(size, region_type=lambda _: self.region)
            base = self.region.get_absolute_address(0)
        else:
            rc.mem_address_space.register_region(self.region, base)
        super().__init__(base, size)
        self.mem = self.region.mem
        self.refusals: list[tuple[str, int, int]] = []
        for fmt in (TlpType.MEM_READ, TlpType.MEM_READ_64, TlpType.MEM_WRITE, TlpType.MEM_WRITE_64):
            self._guard(fmt)

    def _guard(self, fmt) -> None:
        """Put a check for refused pages in front of the root complex's handler of ``fmt``."""
        rc, serve = self.rc, self.rc.rx_tlp_handler[fmt]
        is_read = fmt in (TlpType.MEM_READ, TlpType.MEM_READ_64)

        async def handler(tlp):
            first, last = tlp.address // PAGE, (tlp.address + max(tlp.length * 4, 1) - 1) // PAGE
            if not any(p in self.refused for p in range(first, last + 1)):
                await serve(tlp)
                return
            self.refusals.append(("read" if is_read else "write", tlp.address, tlp.length * 4))
            if is_read:
                await rc.send(Tlp.create_ur_completion_for_tlp(tlp, PcieId(0, 0, 0)))

        rc.register_rx_tlp_handler(fmt, handler)

    def _offset(self, addr: int, n: int) -> int:
        self._check(addr, n)
        if not self.base <= addr <= addr + n <= self.base + self.size:
            raise HostMemoryError(f"{addr:#x}+{n} is outside the root complex memory at "
                                  f"{self.base:#x}+{self.size:#x}")
        return addr - self.base

    def alloc(self, nbytes: int, align: int = PAGE) -> int:
        addr = super().alloc(nbytes, align)
        off, n = addr - self.base, -(-nbytes // PAGE) * PAGE
        self.mem[off:off + n] = bytes(n)
        return addr

    def read(self, addr: int, n: int) -> bytes:
        off = self._offset(addr, n)
        return bytes(self.mem[off:off + n])

    def write(self, addr: int, data: bytes) -> None:
        off = self._offset(addr, len(data))
        self.mem[off:off + len(data)] = bytes(data)


class PcieNvmeLink:
    """An :class:`atomflash.nvme.NvmeLink` over a simulated PCIe function's BAR, for a thread
    :func:`in_thread` started (called from a coroutine, cocotb raises ``RuntimeError``).

    Parameters
    ----------
    pdev : cocotbext.pcie.core.pci.PciDevice
        The function as the root complex enumerated it (``PcieTB.pdev``), memory decoding enabled.
    bar : int
        The BAR the registers are in.
    poll_ns : float
        Simulated time :meth:`advance` lets pass.
    timeout_us : float
        Simulated time a BAR read may wait for its completion (posted writes before it go first).
    """

    def __init__(self, pdev, bar: int = 0, *, poll_ns: float = 500, timeout_us: float = 100):
        self.pdev, self.rc = pdev, pdev.rc
        self.window = pdev.bar_window[bar]
        self.poll_ns, self.timeout_us = poll_ns, timeout_us
        self.interrupts: Counter[int] = Counter()    # messages received, by vector index
        self._taken: Counter[int] = Counter()        # of those, what wait_interrupt returned
        self.advances = 0
        self._count_messages()

    # -- BAR ------------------------------------------------------------------------------------
    def mmio_read(self, offset: int) -> int:
        return _blocking(self.window.read_dword(offset, timeout=self.timeout_us, timeout_unit="us"))

    def mmio_write(self, offset: int, value: int) -> None:
        _blocking(self.window.write_dword(offset, value))

    # -- time -----------------------------------------------------------------------------------
    def idle(self, ns: float) -> None:
        """Let ``ns`` of simulated time pass."""
        _blocking(Timer(ns, "ns"))

    def advance(self) -> None:
        """What ``NvmeHost`` calls between polls: :attr:`poll_ns` of simulated time."""
        self.advances += 1
        self.idle(self.poll_ns)

    # -- interrupts -----------------------------------------------------------------------------
    def enable_interrupts(self, vectors: int) -> int:
        """Program ``vectors`` MSI-X (or MSI) vectors as a host's kernel does; how many it got."""
        return _blocking(self.pdev.alloc_irq_vectors(1, vectors))

    def _count_messages(self) -> None:
        """Count each message written to the root complex's MSI region before it sets the vector's
        event, so a woken waiter sees the count."""
        region = self.rc.msi_region
        serve = region.write

        async def write(addr, data, **kwargs):
            number = struct.unpack_from("<L", data)[0] if len(data) >= 4 else None
            for k, vector in enumerate(self.pdev.msi_vectors):
                if vector.data == number:
                    self.interrupts[k] += 1
            await serve(addr, data, **kwargs)

        region.write = write

    def wait_interrupt(self, vector: int, timeout_us: float = 10) -> bool:
        """Until ``vector`` has sent a message this method has not yet returned for; False if none
        comes within ``timeout_us`` of simulated time."""
        return _blocking(self._wait_interrupt(vector, timeout_us))

    async def _wait_interrupt(self, vector: int, timeout_us: float) -> bool:
        event = self.pdev.msi_vectors[vector].event
        deadline = get_sim_time("ns") + timeout_us * 1000
        while self.interrupts[vector] <= self._taken[vector]:
            left = deadline - get_sim_time("ns")
            if left <= 0:
                return False
            event.clear()
            await First(event.wait(), Timer(left, "ns", round_mode="round"))
        self._taken[vector] += 1
        return True
