"""The PCIe endpoint (soc/pcie.py on the simulated UltraScale+ PHY) under
cocotbext-pcie's root complex: enumeration, BAR0, DMA both ways, MSI-X.

Each test builds its own :class:`PcieTB` (a fresh root complex and device
model, which pulses the endpoint's reset) and brings the link up itself."""

from __future__ import annotations

import random
import struct

import cocotb
from cocotb.triggers import Timer

from cocotbext.pcie.core.caps import PciCapId

from pcie_tb import HIGH_BASE, PcieTB, RECORDER_BASE, REGS, tlp_split
from soc.pcie import EXERCISER_BUFFER_OFFSET, EXERCISER_ID

CAP_PM, CAP_MSI, CAP_PCIE, CAP_MSIX = 0x01, 0x05, 0x10, 0x11


async def capability_ids(pdev) -> list[tuple[int, int]]:
    """(id, offset) of the capability list, walked from the pointer at 0x34."""
    status = await pdev.config_read_word(0x06)
    assert status & (1 << 4), "status: no capability list"
    caps, ptr = [], (await pdev.config_read_byte(0x34)) & 0xFC
    while ptr:
        assert len(caps) < 48 and ptr >= 0x40, f"capability list loops or points into the header: {caps} -> {ptr:#x}"
        header = await pdev.config_read_word(ptr)
        caps.append((header & 0xFF, ptr))
        ptr = (header >> 8) & 0xFC
    return caps


@cocotb.test()
async def enumeration(dut):
    """IDs, class code, BAR0 sizing and assignment, capability list, MSI-X
    capability, bus mastering and the link parameters as the device sees them."""
    tb = PcieTB(dut)
    cfg = tb.config
    await tb.start(master=False)
    pdev = tb.pdev

    assert await pdev.config_read_dword(0x00) == cfg.device_id << 16 | cfg.vendor_id
    class_rev = await pdev.config_read_dword(0x08)
    assert class_rev >> 8 == 0x010802, f"class code {class_rev >> 8:06x}: not NVM Express"
    assert class_rev & 0xFF == cfg.revision_id
    assert await pdev.config_read_dword(0x2C) == cfg.subsystem_id << 16 | cfg.subsystem_vendor_id
    assert (await pdev.config_read_byte(0x0E)) & 0x7F == 0, "not a type 0 header"

    # BAR0: a 32-bit non-prefetchable memory BAR of bar0_size, assigned inside the root's window
    assert pdev.bar_size[0] == cfg.bar0_size
    bar0 = await pdev.config_read_dword(0x10)
    assert bar0 & 0xF == 0, f"BAR0 flags {bar0 & 0xF:#x}: want 32-bit, non-prefetchable memory"
    assert bar0 & ~0xF == pdev.bar_addr[0] and pdev.bar_addr[0] % cfg.bar0_size == 0
    assert tb.rc.mem_base <= pdev.bar_addr[0] < tb.rc.mem_limit
    await pdev.config_write_dword(0x10, 0xFFFFFFFF)
    sized = await pdev.config_read_dword(0x10)
    await pdev.config_write_dword(0x10, bar0)
    assert sized == (0x1_0000_0000 - cfg.bar0_size) & 0xFFFFFFFF, f"BAR0 sizing reads {sized:#x}"
    for bar in range(1, 6):
        assert await pdev.config_read_dword(0x10 + 4 * bar) == 0, f"BAR{bar} implemented"
    # the assigned address reaches the endpoint's BAR0
    assert await tb.read32(REGS["ID"]) == EXERCISER_ID

    # capabilities: power management, PCI Express, MSI-X; no MSI
    caps = await capability_ids(pdev)
    ids = [c for c, _ in caps]
    assert {CAP_PM, CAP_PCIE, CAP_MSIX} <= set(ids), f"capabilities {ids}"
    assert CAP_MSI not in ids
    msix = dict((c, o) for c, o in caps)[CAP_MSIX]
    msg_ctrl = await pdev.config_read_word(msix + 2)
    assert msg_ctrl & 0x7FF == cfg.msix_vectors - 1
    assert await pdev.config_read_dword(msix + 4) == cfg.msix_table_offset | 0     # BIR 0
    assert await pdev.config_read_dword(msix + 8) == cfg.msix_pba_offset | 0

    # bus mastering: off after enable_device, on after set_master -- in config space and as the
    # endpoint's PHY sees it (cfg_function_status)
    link = await tb.read32(REGS["LINK"])
    assert link & 1, f"LINK {link:#x}: link down"
    assert not (await pdev.config_read_word(0x04)) & (1 << 2)
    assert not link & 2, f"LINK {link:#x}: bus master enabled before set_master"
    await pdev.set_master()
    assert (await pdev.config_read_word(0x04)) & (1 << 2)
    await tb.cycles(8)
    link = await tb.read32(REGS["LINK"])
    assert link & 2, f"LINK {link:#x}: bus master enable did not reach the endpoint"

    # link parameters: what the root programmed in Device Control is what LitePCIe splits by
    devctl = await pdev.capability_read_word(PciCapId.EXP, 0x8)
    mps, mrrs = 128 << ((devctl >> 5) & 7), 128 << ((devctl >> 12) & 7)
    assert (mps, mrrs) == (256, 512), f"Device Control {devctl:#x}"
    assert await tb.read32(REGS["MPS"]) == mps
    assert await tb.read32(REGS["MRRS"]) == mrrs
    await pdev.set_readrq(1)                    # 256: the endpoint must follow
    await tb.cycles(8)
    assert await tb.read32(REGS["MRRS"]) == 256
    # the modelled link (the model trains its port, not the Link Status register)
    port = tb.dev.upstream_port
    assert (port.cur_link_speed, port.cur_link_width) == (3, cfg.nlanes)


@cocotb.test()
async def bar0_registers(dut):
    """32-bit BAR0 reads and writes: the read-only ID, a scratch register that holds what is
    written (and only that), the buffer's dwords, and zero from unmapped offsets."""
    tb = PcieTB(dut)
    await tb.start()
    rng = random.Random(2)

    assert await tb.read32(REGS["ID"]) == EXERCISER_ID
    assert await tb.read32(REGS["VERSION"]) == 1
    await tb.write32(REGS["ID"], 0x12345678)
    assert await tb.read32(REGS["ID"]) == EXERCISER_ID, "ID is writable"

    for value in [0xFFFFFFFF, 0x00000000, 0xA5A5A5A5, 0x5A5A5A5A] + [rng.getrandbits(32) for _ in range(4)]:
        await tb.write32(REGS["SCRATCH"], value)
        assert await tb.read32(REGS["SCRATCH"]) == value
    # a write elsewhere leaves it alone; it is not what the other registers read
    await tb.write32(REGS["SCRATCH"], 0xC0FFEE01)
    await tb.write32(REGS["DMA_ADDR_LO"], 0x0BADF00C)
    assert await tb.read32(REGS["SCRATCH"]) == 0xC0FFEE01
    assert await tb.read32(REGS["DMA_ADDR_LO"]) == 0x0BADF00C
    assert await tb.read32(REGS["ID"]) == EXERCISER_ID

    # buffer dwords: word boundaries and both ends, distinct values
    offsets = [0x000, 0x004, 0x018, 0x01C, 0x020, 0x024, 0x7E0, 0xFFC]
    values = {o: rng.getrandbits(32) for o in offsets}
    for o, v in values.items():
        await tb.write32(EXERCISER_BUFFER_OFFSET + o, v)
    for o, v in values.items():
        got = await tb.read32(EXERCISER_BUFFER_OFFSET + o)
        assert got == v, f"buffer +{o:#x}: {got:#x}, wrote {v:#x}"

    # unmapped BAR0 offsets read zero and complete
    for offset in (0x0F00, 0x2000 + 16 * tb.config.msix_vectors, 0x3800, tb.config.bar0_size - 4):
        assert await tb.read32(offset) == 0, f"BAR0 +{offset:#x}"
    assert await tb.read32(REGS["SCRATCH"]) == 0xC0FFEE01


def check_split(tlps, addr, length, size, what):
    """``tlps`` are exactly the transfer cut at multiples of ``size``; none over ``size`` or across 4 KiB."""
    for a, n in tlps:
        assert 0 < n <= size, f"{what} TLP {a:#x}+{n} over {size} bytes"
        assert a // 4096 == (a + n - 1) // 4096, f"{what} TLP {a:#x}+{n} crosses a 4 KiB boundary"
    expect = tlp_split(addr, length, size)
    assert tlps == expect, f"{what} TLPs {[(hex(a), n) for a, n in tlps]}, expected {[(hex(a), n) for a, n in expect]}"


@cocotb.test()
async def dma_to_host(dut):
    """The device writes its buffer into host memory: 4 KiB from 32 bytes below a 4 KiB
    boundary (split at every 256-byte max-payload boundary, so at the 4 KiB one), then a
    16-byte write at an address 16 bytes past a 32-byte boundary (a completion entry's shape),
    and 512 bytes above 4 GiB; the data lands where it belongs and nothing around it changes.  A transfer the engine
    cannot place (two TLPs from an address off the data-path word) is refused and flagged."""
    tb = PcieTB(dut)
    await tb.start()
    rng = random.Random(3)
    mps = await tb.read32(REGS["MPS"])
    assert mps == 256

    host, mem = tb.rc.alloc_region(4 * 4096)
    assert host % 4096 == 0
    background = rng.randbytes(len(mem))
    mem[:] = background
    data = rng.randbytes(4096)
    await tb.write_buffer(data)

    start = 0x1000 - 32
    status = await tb.dma_to_host(host + start, 4096)
    assert not status & 2, f"DMA_STATUS {status:#x}: error"
    await tb.wait_host_writes(4096)
    check_split([(a - host, n) for a, n in tb.host_writes], start, 4096, mps, "write")
    got = bytes(mem[start:start + 4096])
    assert got == data, f"host memory differs from the buffer at byte {next(i for i in range(4096) if got[i] != data[i])}"
    assert bytes(mem[:start]) == background[:start], "bytes below the transfer changed"
    assert bytes(mem[start + 4096:]) == background[start + 4096:], "bytes above the transfer changed"

    # a single 16-byte TLP at a 16-byte (not 32-byte) aligned address
    mark = len(tb.host_writes)
    entry = 0x3010
    status = await tb.dma_to_host(host + entry, 16)
    assert not status & 2, f"DMA_STATUS {status:#x}: error"
    await tb.wait_host_writes(16, since=mark)
    assert tb.host_writes[mark:] == [(host + entry, 16)]
    assert bytes(mem[entry:entry + 16]) == data[:16]
    assert bytes(mem[entry - 16:entry]) == background[entry - 16:entry]
    assert bytes(mem[entry + 16:entry + 64]) == background[entry + 16:entry + 64]

    # above 4 GiB: 64-bit addresses reach the host as they are
    mark = len(tb.host_writes)
    high = HIGH_BASE + 0x0F00
    tb.high.mem[:] = background[:len(tb.high.mem)]
    status = await tb.dma_to_host(high, 512)
    assert not status & 2, f"DMA_STATUS {status:#x}: error"
    await tb.wait_host_writes(512, since=mark)
    assert tb.host_writes[mark:] == [(high, 256), (high + 256, 256)]
    assert bytes(tb.high.mem[0xF00:0x1100]) == data[:512]
    assert bytes(tb.high.mem[:0xF00]) == background[:0xF00]
    assert bytes(tb.high.mem[0x1100:]) == background[0x1100:len(tb.high.mem)]

    # a transfer needing two TLPs from an address off the 32-byte data-path word cannot be placed:
    # refused -- nothing written -- and flagged (sticky until cleared)
    mark = len(tb.host_writes)
    status = await tb.dma_to_host(host + 0x30F0, 32)        # 16 bytes each side of a 256-byte boundary
    assert status & 2, f"DMA_STATUS {status:#x}: misaligned multi-TLP transfer not flagged"
    await tb.cycles(200)
    assert tb.host_writes[mark:] == [], f"a refused transfer wrote {tb.host_writes[mark:]}"
    assert bytes(mem[0x30F0:0x3110]) == background[0x30F0:0x3110]
    await tb.write32(REGS["DMA_CTRL"], 4)
    assert not (await tb.read32(REGS["DMA_STATUS"])) & 2, "error not cleared"


@cocotb.test()
async def dma_from_host(dut):
    """The device reads host memory into its buffer: 4 KiB from 32 bytes below a 4 KiB boundary
    (read requests cut at every 512-byte max-read-request boundary), checked dword by dword
    through BAR0; 128 bytes across a 4 KiB boundary above 4 GiB; then 8 bytes from an address
    8 bytes past a 32-byte boundary (a PRP entry)."""
    tb = PcieTB(dut)
    await tb.start()
    rng = random.Random(4)
    mrrs = await tb.read32(REGS["MRRS"])
    assert mrrs == 512

    host, mem = tb.rc.alloc_region(4 * 4096)
    mem[:] = rng.randbytes(len(mem))
    await tb.write_buffer(bytes(4096))          # a zeroed buffer: stale data cannot pass

    start = 0x1000 - 32
    status = await tb.dma_from_host(host + start, 4096)
    assert not status & 2, f"DMA_STATUS {status:#x}: error"
    check_split([(a - host, n) for a, n in tb.host_reads], start, 4096, mrrs, "read")
    got = await tb.read_buffer(4096)
    want = bytes(mem[start:start + 4096])
    assert got == want, f"buffer differs from host memory at byte {next(i for i in range(4096) if got[i] != want[i])}"

    # above 4 GiB
    mark = len(tb.host_reads)
    high = HIGH_BASE + 0x0FC0
    tb.high.mem[:] = rng.randbytes(len(tb.high.mem))
    status = await tb.dma_from_host(high, 128)
    assert not status & 2, f"DMA_STATUS {status:#x}: error"
    assert tb.host_reads[mark:] == [(high, 64), (high + 64, 64)]
    assert await tb.read_buffer(128) == bytes(tb.high.mem[0xFC0:0x1040])

    mark = len(tb.host_reads)
    entry = 0x3008
    await tb.write32(EXERCISER_BUFFER_OFFSET, 0)
    await tb.write32(EXERCISER_BUFFER_OFFSET + 4, 0)
    status = await tb.dma_from_host(host + entry, 8)
    assert not status & 2, f"DMA_STATUS {status:#x}: error"
    assert tb.host_reads[mark:] == [(host + entry, 8)]
    assert await tb.read_buffer(8) == bytes(mem[entry:entry + 8])


@cocotb.test()
async def msix(dut):
    """MSI-X: the root complex programs the table through BAR0 (as a driver does) and enables
    MSI-X; a raised vector arrives as exactly that vector's message; a vector sent to an
    address the test chose arrives there with its data; a masked vector, or any vector while
    the function is masked, stays pending in the PBA and is sent once unmasked."""
    tb = PcieTB(dut)
    await tb.start()
    cfg, pdev = tb.config, tb.pdev
    table, pba = cfg.msix_table_offset, cfg.msix_pba_offset

    assert await pdev.alloc_irq_vectors(cfg.msix_vectors, cfg.msix_vectors) == cfg.msix_vectors
    vectors = pdev.msi_vectors
    await tb.cycles(8)
    link = await tb.read32(REGS["LINK"])
    assert link & 4 and not link & 8, f"LINK {link:#x}: MSI-X not enabled, or masked, as the endpoint sees it"
    for k in (0, 3, cfg.msix_vectors - 1):
        entry = [await tb.read32(table + 16 * k + 4 * d) for d in range(4)]
        assert entry == [vectors[k].addr & 0xFFFFFFFF, vectors[k].addr >> 32, vectors[k].data, 0], \
            f"table entry {k}: {[hex(x) for x in entry]}"
    assert await tb.read32(pba) == 0

    def fired():
        return {k for k, v in enumerate(vectors) if v.event.is_set()}

    def clear():
        for v in vectors:
            v.event.clear()

    async def raise_irqs(mask):
        await tb.write32(REGS["IRQ"], mask)

    # one vector, then three at once: exactly those messages
    for ks in ([3], [1, 9, cfg.msix_vectors - 1]):
        clear()
        await raise_irqs(sum(1 << k for k in ks))
        for k in ks:
            assert await tb.wait_event(vectors[k].event, 2000), f"vector {k} did not arrive"
        await tb.cycles(200)
        assert fired() == set(ks), f"raised {ks}, the root complex saw {sorted(fired())}"

    # a message address and data the test picks
    k, offset, data = 7, 0x70, 0xC0DE0007
    await tb.write32(table + 16 * k + 0, RECORDER_BASE + offset)
    await tb.write32(table + 16 * k + 4, 0)
    await tb.write32(table + 16 * k + 8, data)
    clear()
    tb.recorder.writes.clear()
    await raise_irqs(1 << k)
    for _ in range(40):
        if tb.recorder.writes:
            break
        await Timer(50, "ns")
    await tb.cycles(200)
    assert tb.recorder.writes == [(offset, struct.pack("<I", data))], f"recorder saw {tb.recorder.writes}"
    assert fired() == set()

    # a masked vector is held pending, and sent when unmasked
    k = 5
    await tb.write32(table + 16 * k + 12, 1)
    assert await tb.read32(table + 16 * k + 12) == 1
    clear()
    await raise_irqs(1 << k)
    await tb.cycles(500)
    assert fired() == set(), "a masked vector was sent"
    assert await tb.read32(pba) == 1 << k, "a masked vector is not pending in the PBA"
    await tb.write32(table + 16 * k + 12, 0)
    assert await tb.wait_event(vectors[k].event, 2000), "unmasking did not send the pending vector"
    await tb.cycles(100)
    assert fired() == {k}
    assert await tb.read32(pba) == 0

    # the function mask (MSI-X Message Control bit 14) holds every vector
    k = 2
    ctrl = await pdev.capability_read_word(PciCapId.MSIX, 2)
    await pdev.capability_write_word(PciCapId.MSIX, 2, ctrl | 0x4000)
    await tb.cycles(8)
    assert (await tb.read32(REGS["LINK"])) & 8, "the function mask did not reach the endpoint"
    clear()
    await raise_irqs(1 << k)
    await tb.cycles(500)
    assert fired() == set(), "a vector was sent while the function was masked"
    assert await tb.read32(pba) == 1 << k
    await pdev.capability_write_word(PciCapId.MSIX, 2, ctrl & ~0x4000)
    assert await tb.wait_event(vectors[k].event, 2000), "clearing the function mask did not send the pending vector"
    await tb.cycles(100)
    assert fired() == {k}
    assert await tb.read32(pba) == 0


# HostDmaPort: the NVMe controller's protocol on HostDMA ----------------------------------------------

def port_tlps_ok(tlps, addr, nbytes, what):
    """The TLPs of one port request: a head up to the next 32-byte boundary when ``addr`` is
    not on one, then contiguous TLPs to the end, none across 4 KiB."""
    assert tlps, f"{what} {addr:#x}+{nbytes}: no TLPs"
    head = min(nbytes, (32 - addr % 32) % 32)
    if head:
        assert tlps[0] == (addr, head), f"{what} {addr:#x}+{nbytes}: first TLP {tlps[0]}, want the head ({addr:#x}, {head})"
    at = addr
    for a, n in tlps:
        assert a == at and n > 0 and a // 4096 == (a + n - 1) // 4096, f"{what} {addr:#x}+{nbytes}: TLPs {tlps}"
        at += n
    assert at == addr + nbytes, f"{what} {addr:#x}+{nbytes}: TLPs {tlps}"


@cocotb.test()
async def host_dma_port(dut):
    """HostDmaPort, driven as the NVMe controller drives it: a 4 KiB write and read, words back
    to back (cycles measured); then at every dword offset within 32 bytes a write of a random
    length up to the end of its 4 KiB page followed by a read of the same bytes, with gaps
    between write words and rdata.ready low at random on alternate requests: the read returns
    what was written (requests stay in order), host memory holds it and nothing around it
    changed, and the TLPs are a head up to the 32-byte boundary then the aligned rest."""
    from hostdma_driver import HostDmaPortDriver

    tb = PcieTB(dut)
    await tb.start()
    port = HostDmaPortDriver(dut, seed=5)
    port.idle()
    rng = random.Random(5)
    host, mem = tb.rc.alloc_region(4 * 4096)
    mem[:] = rng.randbytes(len(mem))
    expect = bytearray(mem)

    # throughput: 4 KiB each way, nothing stalling
    data = rng.randbytes(4096)
    mark = len(tb.host_writes)
    w = await port.write(host, data)
    assert not w.error
    await tb.wait_host_writes(4096, since=mark)
    expect[0:4096] = data
    assert bytes(mem) == bytes(expect), "4 KiB write: host memory differs"
    r = await port.read(host + 0x1000, 4096)
    assert not r.error and r.data == bytes(mem[0x1000:0x2000]), "4 KiB read: data differs"
    tb.log.info("HostDmaPort, 4 KiB: write %d cycles, read %d cycles (request to done)", w.cycles, r.cycles)
    assert w.cycles < 1024 + 128 + 64, f"4 KiB write took {w.cycles} cycles"   # words in, then 128 out
    assert r.cycles < 1024 + 400, f"4 KiB read took {r.cycles} cycles"

    # every dword offset within 32 bytes, random lengths; a few edges of the head/rest split
    cases = []
    for lane in range(8):
        base = rng.randrange(0, 4096 - 32, 32) if lane % 2 else rng.randrange(0, 1024, 32)
        start = base + 4 * lane
        cases.append((start, 4 * rng.randint(1, (4096 - start) // 4)))
    cases += [(0x1C, 4), (0x18, 8), (0x04, 28), (0x04, 32), (0x0C, 4096 - 0x0C), (0xFE0, 32), (0xFFC, 4)]
    for i, (offset, nbytes) in enumerate(cases):
        page = 2 + i % 2
        addr = host + page * 4096 + offset
        data = rng.randbytes(nbytes)
        gaps = 0.3 if i % 2 else 0.0
        mark_w, mark_r = len(tb.host_writes), len(tb.host_reads)
        w = await port.write(addr, data, wgap=gaps)
        assert not w.error, f"write {offset:#x}+{nbytes}: error"
        r = await port.read(addr, nbytes, rstall=0.3 - gaps)
        assert not r.error, f"read {offset:#x}+{nbytes}: error"
        at = page * 4096 + offset
        expect[at:at + nbytes] = data
        if r.data != data:
            bad = next(k for k in range(nbytes) if r.data[k] != data[k])
            raise AssertionError(f"{offset:#x}+{nbytes}: read back differs from the write at byte {bad}")
        if bytes(mem) != bytes(expect):
            bad = next(k for k in range(len(mem)) if mem[k] != expect[k])
            raise AssertionError(f"{offset:#x}+{nbytes}: host memory wrong at {bad:#x} (written {at:#x}..{at + nbytes:#x})")
        port_tlps_ok(tb.host_writes[mark_w:], addr, nbytes, "write")
        port_tlps_ok(tb.host_reads[mark_r:], addr, nbytes, "read")


@cocotb.test()
async def host_dma_port_errors(dut):
    """HostDmaPort when the host refuses: a read of memory the root complex does not map
    (unsupported-request completions, for the head and every TLP of the rest) returns all its
    words and ends with error on the last word and on done; the next read is served whole.
    With bus mastering off a write and a read end with done.error and no TLP."""
    from hostdma_driver import HostDmaPortDriver

    tb = PcieTB(dut)
    await tb.start()
    port = HostDmaPortDriver(dut, seed=6)
    port.idle()
    rng = random.Random(6)
    host, mem = tb.rc.alloc_region(4096)
    mem[:] = rng.randbytes(4096)

    unmapped = 0x9000_0000
    for addr, nbytes in ((unmapped + 0x104, 1000), (unmapped + 0x20, 4), (unmapped + 0x1C, 4)):
        r = await port.read(addr, nbytes, rstall=0.2)
        assert r.error, f"read of unmapped {addr:#x}+{nbytes}: no error"
        assert len(r.data) == nbytes
        r = await port.read(host + 0x44, 512)
        assert not r.error and r.data == bytes(mem[0x44:0x244]), "the read after a refused one is wrong"

    await tb.pdev.clear_master()
    await tb.cycles(16)
    before = bytes(mem)
    mark_w, mark_r = len(tb.host_writes), len(tb.host_reads)
    w = await port.write(host + 0x100, rng.randbytes(256), wgap=0.2)
    assert w.error, "write with bus mastering off: no error"
    r = await port.read(host + 0x100, 64)
    assert r.error and len(r.data) == 64, "read with bus mastering off: no error"
    await tb.cycles(200)
    assert tb.host_writes[mark_w:] == [] and tb.host_reads[mark_r:] == [], "TLPs sent with bus mastering off"
    assert bytes(mem) == before

    await tb.pdev.set_master()
    await tb.cycles(16)
    r = await port.read(host + 0x100, 64)
    assert not r.error and r.data == bytes(mem[0x100:0x140]), "bus mastering back on: read wrong"
