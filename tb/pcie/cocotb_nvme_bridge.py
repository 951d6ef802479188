"""The blocking host side (``sim.pcie.nvme_host_bridge``) against the simulated endpoint.

There is no NVMe controller on BAR0 yet, so the bridge is shown on the bring-up exerciser: BAR0
reads and writes from a worker thread agree with the coroutine side's; the exerciser's DMA moves a
buffer the thread wrote into :class:`RootComplexMemory` and back into another that the thread then
reads; the thread waits for that by polling host memory as ``NvmeHost`` polls a completion queue,
with simulated time passing between polls; refused pages and MSI-X messages; exceptions in the
thread reach the test."""

from __future__ import annotations

import random

import cocotb
from cocotb.utils import get_sim_time

from atomflash.hostmem import PAGE, HostMemoryError
from atomflash.nvme import NvmeHost
from pcie_tb import PcieTB, REGS
from sim.pcie.nvme_host_bridge import PcieNvmeLink, RootComplexMemory, in_thread
from soc.pcie import EXERCISER_BUFFER_OFFSET, EXERCISER_ID

HIGH_MEMORY = 0x2_0000_0000      # a RootComplexMemory above 4 GiB, clear of PcieTB's regions


# Thread side: the exerciser's DMA as blocking calls ----------------------------------------------

def start_dma(link, ctrl: int, addr: int, nbytes: int) -> None:
    link.mmio_write(REGS["DMA_ADDR_LO"], addr & 0xFFFFFFFF)
    link.mmio_write(REGS["DMA_ADDR_HI"], addr >> 32)
    link.mmio_write(REGS["DMA_LEN"], nbytes)
    link.mmio_write(REGS["DMA_CTRL"], ctrl)


def run_dma(link, ctrl: int, addr: int, nbytes: int, polls: int = 400) -> int:
    """One exerciser transfer, polled through DMA_STATUS until its done count moves; the status."""
    before = link.mmio_read(REGS["DMA_STATUS"])
    start_dma(link, ctrl, addr, nbytes)
    for _ in range(polls):
        status = link.mmio_read(REGS["DMA_STATUS"])
        if status >> 16 != before >> 16 and not status & 1:
            return status
    raise AssertionError(f"DMA (ctrl {ctrl}) at {addr:#x} not done after {polls} status reads")


class Boom(Exception):
    pass


@cocotb.test()
async def link_registers(dut):
    """BAR0 through PcieNvmeLink from a thread: ID, VERSION, the scratch register and a buffer
    dword read what PcieTB.read32 reads, writes either side are seen by the other, BAR reads take
    simulated time; an exception the thread raises, and one raised in a coroutine it waited on,
    reach the test; calling the link from a coroutine is refused; the link works after all that."""
    tb = PcieTB(dut)
    await tb.start()
    link = PcieNvmeLink(tb.pdev)
    rng = random.Random(11)
    values = [0xFFFFFFFF, 0, 0xA5A5A5A5, 0x5A5A5A5A] + [rng.getrandbits(32) for _ in range(4)]
    unmapped = 0x3800

    def driver():
        seen = {name: link.mmio_read(REGS[name]) for name in ("ID", "VERSION", "MPS", "MRRS")}
        scratch = []
        for v in values:
            link.mmio_write(REGS["SCRATCH"], v)
            scratch.append(link.mmio_read(REGS["SCRATCH"]))
        link.mmio_write(EXERCISER_BUFFER_OFFSET + 0x40, 0x600DF00D)
        seen["unmapped"] = link.mmio_read(unmapped)
        return seen, scratch

    t0 = get_sim_time("ns")
    seen, scratch = await in_thread(driver)
    elapsed = get_sim_time("ns") - t0
    assert seen["ID"] == EXERCISER_ID
    for name in ("ID", "VERSION", "MPS", "MRRS"):
        assert seen[name] == await tb.read32(REGS[name]), f"{name}: the thread read {seen[name]:#x}"
    assert seen["unmapped"] == await tb.read32(unmapped) == 0
    assert scratch == values, f"scratch read back {[hex(v) for v in scratch]}"
    assert await tb.read32(REGS["SCRATCH"]) == values[-1]
    assert await tb.read32(EXERCISER_BUFFER_OFFSET + 0x40) == 0x600DF00D
    assert elapsed > 0, "BAR reads from the thread took no simulated time"
    tb.log.info("thread: %d BAR reads, %d writes in %.0f ns simulated", 5 + len(values), len(values) + 1, elapsed)

    await tb.write32(REGS["SCRATCH"], 0x13579BDF)
    assert await in_thread(link.mmio_read, REGS["SCRATCH"]) == 0x13579BDF

    def fails():
        link.mmio_write(REGS["SCRATCH"], 0xDEAD0001)
        raise Boom("raised in the thread")

    try:
        await in_thread(fails)
    except Boom as e:
        assert "raised in the thread" in str(e)
    else:
        raise AssertionError("the thread's exception did not reach the test")
    assert await tb.read32(REGS["SCRATCH"]) == 0xDEAD0001, "the thread's write before it raised was lost"

    try:                                  # past the BAR: the root complex's ValueError, via the thread
        await in_thread(link.mmio_read, tb.config.bar0_size)
    except ValueError:
        pass
    else:
        raise AssertionError("a read past BAR0 did not fail")

    try:
        link.mmio_read(REGS["ID"])
    except RuntimeError as e:
        assert "in_thread" in str(e)
    else:
        raise AssertionError("the link blocked the scheduler's own thread")

    assert await in_thread(link.mmio_read, REGS["ID"]) == EXERCISER_ID


@cocotb.test()
async def memory_dma_both_ways(dut):
    """RootComplexMemory above 4 GiB: the thread writes a buffer into host memory; the exerciser
    reads it into its buffer (the thread polls DMA_STATUS) and writes it back to another host
    buffer, which the thread waits for with NvmeHost's own wait loop polling host memory.  While the
    thread only reads host memory the simulator is stopped (the data cannot arrive); between polls
    the link lets simulated time pass and it does.  The bytes the device moved are counted."""
    tb = PcieTB(dut)
    await tb.start()
    link = PcieNvmeLink(tb.pdev)
    memory = RootComplexMemory(tb.rc, size=1 << 20, base=HIGH_MEMORY)
    n = 2048
    data = random.Random(12).randbytes(n)

    def driver():
        src, dst = memory.alloc(n), memory.alloc(3 * PAGE)
        dst += PAGE - 256                     # across a page boundary
        memory.write(src, data)
        status = run_dma(link, 2, src, n)
        assert not status & 2, f"DMA_STATUS {status:#x}: read from host memory failed"

        start_dma(link, 1, dst, n)
        frozen = all(memory.read(dst, n) == bytes(n) for _ in range(200))
        host = NvmeHost(link, memory, timeout=5)
        host._wait("write its buffer back", lambda: memory.read(dst, n) == data)
        return src, dst, frozen

    t0 = get_sim_time("ns")
    src, dst, frozen = await in_thread(driver)
    elapsed = get_sim_time("ns") - t0
    assert frozen, "host memory changed while the thread ran without yielding"
    assert memory.read(dst, n) == data
    assert bytes(memory.mem[src - memory.base:src - memory.base + n]) == data
    assert await tb.read_buffer(64) == data[:64]
    assert link.advances > 0, "the wait found the data without letting time pass"
    assert elapsed >= link.advances * link.poll_ns
    assert memory.reads == n and memory.writes == n, f"DMA moved {memory.reads} in, {memory.writes} out"
    assert {a for a, _ in tb.host_reads} <= set(range(src, src + n))
    assert sum(b for _, b in tb.host_reads) == n
    assert sum(b for a, b in tb.host_writes if dst <= a < dst + n) == n
    tb.log.info("write-back waited %d polls of %d ns (%.0f ns simulated in all)",
                link.advances, link.poll_ns, elapsed)


@cocotb.test()
async def refused_pages_and_interrupts(dut):
    """A refused page: the host's own access raises HostMemoryError, the device's read of it gets an
    Unsupported Request (the exerciser flags a DMA error), its write to it is dropped; the page
    next to it still works.  MSI-X: the thread enables the vectors, raises some through the
    exerciser and waits for each; the link counts them per vector."""
    tb = PcieTB(dut)
    await tb.start()
    link = PcieNvmeLink(tb.pdev)
    memory = RootComplexMemory(tb.rc, size=1 << 16)
    good, bad = memory.alloc(PAGE), memory.alloc(PAGE)
    pattern = random.Random(13).randbytes(PAGE)
    memory.write(good, pattern)
    memory.write(bad, pattern)
    memory.refuse(bad)

    def driver():
        out = {}
        try:
            memory.read(bad, 4)
            out["host read"] = "allowed"
        except HostMemoryError:
            out["host read"] = "refused"
        out["read status"] = run_dma(link, 2, bad, 64)
        link.mmio_write(REGS["DMA_CTRL"], 4)
        start_dma(link, 1, bad + 0x100, 64)
        NvmeHost(link, memory, timeout=5)._wait("see the write refused",
                                                 lambda: any(k == "write" for k, _, _ in memory.refusals))
        out["good status"] = run_dma(link, 2, good, 64)

        out["vectors"] = link.enable_interrupts(tb.config.msix_vectors)
        link.mmio_write(REGS["IRQ"], 1 << 3 | 1 << 9)
        out["waits"] = [link.wait_interrupt(3), link.wait_interrupt(9), link.wait_interrupt(3, timeout_us=2)]
        link.mmio_write(REGS["IRQ"], 1 << 3)
        out["waits"].append(link.wait_interrupt(3))
        return out

    out = await in_thread(driver)
    assert out["host read"] == "refused"
    assert out["read status"] & 2, f"DMA_STATUS {out['read status']:#x}: a refused read was not flagged"
    assert not out["good status"] & 2, f"DMA_STATUS {out['good status']:#x}: the next page failed"
    assert await tb.read_buffer(64) == pattern[:64]
    assert ("read", bad, 64) in memory.refusals and ("write", bad + 0x100, 64) in memory.refusals
    assert all(k in ("read", "write") and a // PAGE == bad // PAGE for k, a, _ in memory.refusals)
    assert bytes(memory.mem[bad - memory.base:bad - memory.base + PAGE]) == pattern, "a refused write landed"

    assert out["vectors"] == tb.config.msix_vectors
    assert out["waits"] == [True, True, False, True], f"waits {out['waits']}"
    assert link.interrupts == {3: 2, 9: 1}, f"interrupts {dict(link.interrupts)}"
