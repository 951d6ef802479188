"""Host memory as a PCIe device sees it: byte addresses, pages handed out by the host.

The NVMe host driver (:mod:`atomflash.nvme`) allocates its queues, PRP lists and data buffers here;
a controller (the reference one, :mod:`atomflash.model.nvme`, or a simulated device's DMA) reads and
writes it.  Memory is sparse (untouched bytes read as zero) and may be made to fail at chosen pages,
as a host's IOMMU would refuse them: the controller then sees :class:`HostMemoryError`.
"""

from __future__ import annotations

__all__ = ["HostMemory", "HostMemoryError", "PAGE"]

PAGE = 4096


class HostMemoryError(Exception):
    """A DMA touched a page the host refuses (``HostMemory.refuse``)."""


class HostMemory:
    """Sparse byte-addressed memory with a page allocator.

    Parameters
    ----------
    base : int
        The first address handed out (page aligned; addresses below it are never allocated).
    size : int
        Bytes the allocator may hand out from ``base``.
    """

    def __init__(self, base: int = 0x1_0000_0000, size: int = 1 << 30):
        if base % PAGE:
            raise ValueError("host memory must start on a page")
        self.base, self.size = base, size
        self._pages: dict[int, bytearray] = {}
        self._next = base
        self._free: list[tuple[int, int]] = []
        self.refused: set[int] = set()      # page numbers whose access fails
        self.reads = self.writes = 0        # bytes moved by DMA

    # -- allocation ------------------------------------------------------------------------------
    def alloc(self, nbytes: int, align: int = PAGE) -> int:
        """``nbytes`` of zeroed memory aligned to ``align`` (a power of two, at most a page)."""
        if nbytes <= 0 or align & (align - 1) or align > PAGE:
            raise ValueError(f"cannot allocate {nbytes} bytes aligned to {align}")
        pages = -(-nbytes // PAGE)
        for i, (addr, n) in enumerate(self._free):
            if n >= pages:
                self._free[i:i + 1] = [(addr + pages * PAGE, n - pages)] if n > pages else []
                break
        else:
            addr = self._next
            if addr + pages * PAGE > self.base + self.size:
                raise MemoryError("host memory exhausted")
            self._next += pages * PAGE
        for p in range(pages):
            self._pages.pop(addr // PAGE + p, None)
        return addr

    def free(self, addr: int, nbytes: int) -> None:
        self._free.append((addr, -(-nbytes // PAGE)))

    def refuse(self, addr: int) -> None:
        """Make every access to ``addr``'s page fail from now on."""
        self.refused.add(addr // PAGE)

    # -- access ----------------------------------------------------------------------------------
    def _check(self, addr: int, n: int) -> None:
        if addr < 0 or n < 0 or addr + n > 1 << 64:
            raise HostMemoryError(f"address {addr:#x}+{n} outside the 64-bit space")
        for p in range(addr // PAGE, (addr + max(n, 1) - 1) // PAGE + 1):
            if p in self.refused:
                raise HostMemoryError(f"page {p * PAGE:#x} refused")

    def read(self, addr: int, n: int) -> bytes:
        self._check(addr, n)
        out = bytearray()
        while n:
            page, off = divmod(addr, PAGE)
            take = min(n, PAGE - off)
            data = self._pages.get(page)
            out += data[off:off + take] if data is not None else bytes(take)
            addr, n = addr + take, n - take
        self.reads += len(out)
        return bytes(out)

    def write(self, addr: int, data: bytes) -> None:
        self._check(addr, len(data))
        self.writes += len(data)
        view = memoryview(bytes(data))
        while view:
            page, off = divmod(addr, PAGE)
            take = min(len(view), PAGE - off)
            self._pages.setdefault(page, bytearray(PAGE))[off:off + take] = view[:take]
            addr, view = addr + take, view[take:]
