"""cocotb tests: LiteSATA's host frontends against the device stack (top.py).  Python only starts a
frontend, waits for its ``done`` and reads its results; every cycle of the protocol is HDL."""

import cocotb
from cocotb.clock import Clock
from cocotb.triggers import ClockCycles, FallingEdge, ReadOnly, Timer

from atomflash import spec
from tb.sata_e2e.top import BLOCK_BYTES, CAPACITY_BLOCKS, SECTOR_BYTES

PERIOD_NS = 10
SECTORS = CAPACITY_BLOCKS * BLOCK_BYTES // SECTOR_BYTES
MAX_SECTORS = 253       # AtaCommandLayer.max_sectors with the default max_transfer (docs/sata_command.md)


async def start(dut):
    cocotb.start_soon(Clock(dut.clk, PERIOD_NS, units="ns").start())
    for name in ("rst", "cut", "host_rst", "flip_down", "flip_up", "flip_bit", "host_identify_start",
                 "host_identify_ready", "host_gen_start", "host_gen_sector", "host_gen_count", "host_gen_random",
                 "host_chk_start", "host_chk_sector", "host_chk_count", "host_chk_random"):
        getattr(dut, name).value = 0
    dut.rst.value = 1
    await ClockCycles(dut.clk, 5)
    dut.rst.value = 0
    for _ in range(40):
        await Timer(1000 * PERIOD_NS, "ns")
        if dut.dev_link_up.value and dut.host_phy_ready.value:
            return
    raise AssertionError("link not up after 40000 cycles")


async def pulse_and_wait(dut, unit, limit_cycles=2_000_000, **fields):
    """Start a LiteSATA frontend (``identify``, ``gen``, ``chk``) with ``fields`` and wait for its done."""
    for name, value in fields.items():
        getattr(dut, f"host_{unit}_{name}").value = value
    await FallingEdge(dut.clk)
    getattr(dut, f"host_{unit}_start").value = 1
    await FallingEdge(dut.clk)
    getattr(dut, f"host_{unit}_start").value = 0
    done = getattr(dut, f"host_{unit}_done")
    for _ in range(limit_cycles // 500):
        await Timer(500 * PERIOD_NS, "ns")     # a timer, not ClockCycles: no Python on every clock
        if done.value:
            return
    raise AssertionError(f"{unit} not done after {limit_cycles} cycles")


async def identify_words(dut):
    await pulse_and_wait(dut, "identify", limit_cycles=100_000)
    await FallingEdge(dut.clk)
    dut.host_identify_ready.value = 1
    words = []
    for _ in range(300):
        await ReadOnly()                 # what is offered now moves at the coming edge
        if dut.host_identify_valid.value:
            words.append(int(dut.host_identify_data.value))
        elif words:
            break
        await FallingEdge(dut.clk)
    await FallingEdge(dut.clk)
    dut.host_identify_ready.value = 0
    return b"".join(w.to_bytes(4, "little") for w in words)


async def bist(dut, unit, sector, count, random=1, limit_cycles=2_000_000):
    await pulse_and_wait(dut, unit, limit_cycles, sector=sector, count=count, random=random)
    return int(getattr(dut, f"host_{unit}_aborted").value), int(getattr(dut, f"host_{unit}_errors").value)


@cocotb.test()
async def identify(dut):
    await start(dut)
    raw = await identify_words(dut)
    assert len(raw) == spec.ATA_IDENTIFY.size, f"{len(raw)} bytes of IDENTIFY"
    want = spec.ata_identify(capacity=SECTORS, block_bytes=BLOCK_BYTES, sector_bytes=SECTOR_BYTES,
                             volatile_cache=True, write_cache=True)
    got, ref = spec.ATA_IDENTIFY.unpack(raw), spec.ATA_IDENTIFY.unpack(want)
    assert got.sectors48 == SECTORS and got.sectors28 == SECTORS
    assert [getattr(got, f"mn{i}") for i in range(20)] == [getattr(ref, f"mn{i}") for i in range(20)]
    assert raw == want


# a few hundred sectors in BIST commands of at most MAX_SECTORS; the last starts and ends inside blocks
# (a read-modify-write of its first and last block on the device)
BIST_RANGES = [(0, MAX_SECTORS), (MAX_SECTORS, 147), (401, 98)]


@cocotb.test()
async def bist_write_then_check(dut):
    await start(dut)
    for sector, count in BIST_RANGES:
        assert await bist(dut, "gen", sector, count) == (0, 0), f"write of {count} at {sector} aborted"
    for sector, count in BIST_RANGES:
        assert await bist(dut, "chk", sector, count) == (0, 0), f"check of {count} at {sector}"
    # the checker sees wrong data: the counter pattern where the scrambler's was written
    aborted, errors = await bist(dut, "chk", 0, 8, random=0)
    assert aborted == 0 and errors > 0
    assert int(dut.crc_errors.value) == 0 and int(dut.malformed.value) == 0


async def arm_flip_after_command(dut):
    await FallingEdge(dut.ata_idle)
    await FallingEdge(dut.clk)
    dut.flip_down.value = 1
    await FallingEdge(dut.clk)
    dut.flip_down.value = 0


@cocotb.test()
async def bit_flip_in_a_data_frame(dut):
    """A bit flipped in a Data FIS of a write: the device answers R_ERR and fails the command with
    ICRC|ABRT (docs/sata_command.md), before the core sees it; the old data stays, bit for bit."""
    await start(dut)
    sector, count = 64, 16      # one Data FIS (8 KiB): see docs/sata.md, "End to end", for a longer write
    assert await bist(dut, "gen", sector, count) == (0, 0)
    dut.flip_bit.value = 13
    # arm the flip once the device has taken the command FIS: the next frame down is the Data FIS
    # (LiteSATA does not send a Register H2D FIS again after R_ERR: a flip there hangs its command)
    armer = cocotb.start_soon(arm_flip_after_command(dut))
    aborted, _ = await bist(dut, "gen", sector, count, random=0, limit_cycles=300_000)
    await armer
    assert int(dut.flipped_down.value) == 1
    assert aborted == 1, "a write whose Data FIS had a bad CRC was not failed"
    assert int(dut.crc_errors.value) == 1
    assert await bist(dut, "chk", sector, count) == (0, 0), "the failed write changed the data"
    # and the link still works: the same write again goes through whole
    assert await bist(dut, "gen", sector, count, random=0) == (0, 0)
    assert await bist(dut, "chk", sector, count, random=0) == (0, 0)
