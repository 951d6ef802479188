"""Media rules and injected faults: NOP, page order, bad blocks, WP#,
endurance, program/erase failures, raw bit errors at a configured rate."""

import math

import cocotb

from atomflash.nandsim import NandCtl
from atomflash.spec import OnfiStatus
from nand_tb import NandTB, pattern
from onfi_host import failed


@cocotb.test()
async def nop_limit(dut):
    tb = await NandTB.create(dut, "nop")
    h = tb.host
    row = tb.row(4, 0)
    assert not failed(await h.program(row, 0, b"\xf0\xff"))
    assert not failed(await h.program(row, 0, b"\xff\x0f"))  # a second program: breaks NOP 1
    s = await tb.stats()
    assert s["nop_violations"] == 1 and s["media_violations"] == 1, s
    assert "programmed 2 times since erase (NOP 1)" in s["error_log"][0]
    assert await h.read(row, 0, 2) == b"\xf0\x0f", "programs only clear bits"
    # NOP 2 allows it.
    tb = await NandTB.create(dut, "nop2", nop=2)
    assert not failed(await h.program(row, 0, b"\xf0\xff"))
    assert not failed(await h.program(row, 0, b"\xff\x0f"))
    assert (await tb.stats())["media_violations"] == 0
    with tb.image() as img:
        assert img.page_state(0, 4, 0).programs == 2


@cocotb.test()
async def page_order(dut):
    tb = await NandTB.create(dut, "order")
    h = tb.host
    for page in (0, 1, 5):  # skipping forward is allowed
        assert not failed(await h.program(tb.row(6, page), 0, b"\x00"))
    assert (await tb.stats())["order_violations"] == 0
    assert not failed(await h.program(tb.row(6, 3), 0, b"\x00"))  # backwards
    s = await tb.stats()
    assert s["order_violations"] == 1 and "page order" in s["error_log"][0], s
    tb = await NandTB.create(dut, "order_off", sequential_pages=0)
    assert not failed(await h.program(tb.row(6, 5), 0, b"\x00"))
    assert not failed(await h.program(tb.row(6, 3), 0, b"\x00"))
    assert (await tb.stats())["media_violations"] == 0


@cocotb.test()
async def factory_bad_blocks(dut):
    tb = await NandTB.create(dut, "bad", bad_blocks=[(0, 3), (0, 17)], bad_block_rate=0.05, seed=7)
    h = tb.host
    g = tb.cfg[0].geometry
    with tb.image() as img:
        bad = img.bad_blocks()
        assert (0, 3) in bad and (0, 17) in bad
        assert len(bad) > 2, "the seeded rate added some"
        assert all(img.block(l, b).factory_bad for l, b in bad)
    # A controller's scan: first spare byte of page 0.
    scanned = [b for b in range(g.blocks_per_lun) if (await h.read(tb.row(b, 0), g.page_data, 1)) != b"\xff"]
    assert scanned == sorted(b for _, b in bad)
    st = await h.program(tb.row(3, 1), 0, b"\x00")
    assert failed(st), "program of a bad block must FAIL"
    assert failed(await h.erase(tb.row(17, 0))), "erase of a bad block must FAIL"
    assert await h.read(tb.row(17, 0), g.page_data, 1) == b"\x00", "the marker survives"
    assert not failed(await h.program(tb.row(4, 0), 0, b"\x00"))  # the status clears
    # Same seed, same bad blocks.
    tb2 = await NandTB.create(dut, "bad_again", bad_blocks=[(0, 3), (0, 17)], bad_block_rate=0.05, seed=7)
    with tb2.image() as img:
        assert img.bad_blocks() == bad


@cocotb.test()
async def write_protect(dut):
    tb = await NandTB.create(dut, "wp")
    h = tb.host
    row = tb.row(2, 0)
    assert not failed(await h.program(row, 0, b"\x55"))
    h.set(wp_n=0)
    await h.wait(100)
    st = await h.program(tb.row(2, 1), 0, b"\x00")
    assert failed(st) and not st >> OnfiStatus.WP_N & 1, hex(st)
    assert failed(await h.erase(row))
    h.set(wp_n=1)
    await h.wait(100)
    assert await h.read(row, 0, 1) == b"\x55"
    assert await h.read(tb.row(2, 1), 0, 1) == b"\xff"


@cocotb.test()
async def endurance_limit(dut):
    tb = await NandTB.create(dut, "endurance", endurance=3)
    h = tb.host
    row = tb.row(9, 0)
    for _ in range(3):
        assert not failed(await h.erase(row))
        assert not failed(await h.program(row, 0, b"\x00"))
    assert failed(await h.erase(row)), "erase past the endurance limit"
    assert failed(await h.program(tb.row(9, 1), 0, b"\x00")), "program past the endurance limit"
    with tb.image() as img:
        assert img.erase_count(0, 9) == 4, "the refused erase was still attempted"
        assert img.block(0, 9).erase_failed


@cocotb.test()
async def injected_program_and_erase_failures(dut):
    tb = await NandTB.create(dut, "fails", fail_program=[(0, 5, 2)], fail_program_nth=[4], fail_erase=[(0, 8)],
                             fail_erase_nth=[2])
    h = tb.host
    results = [failed(await h.program(tb.row(5, p), 0, pattern(8, p))) for p in range(5)]
    assert results == [False, False, True, True, False], results  # page 2 by address, the 4th program by count
    with tb.image() as img:
        assert img.page_state(0, 5, 2).program_failed and img.page_state(0, 5, 3).program_failed
        assert img.page_state(0, 5, 4).intact
    assert failed(await h.erase(tb.row(8, 0)))          # by address (also the 1st erase)
    assert failed(await h.erase(tb.row(10, 0)))         # the 2nd erase
    assert not failed(await h.erase(tb.row(8, 0)))      # each injection fires once
    # Through the control port: the next program / erase.
    await tb.ctl(NandCtl.FAIL_PROGRAM, -1)
    assert failed(await h.program(tb.row(11, 0), 0, b"\x00"))
    assert not failed(await h.program(tb.row(11, 1), 0, b"\x00"))
    await tb.ctl(NandCtl.FAIL_ERASE, -1)
    assert failed(await h.erase(tb.row(11, 0)))
    s = await tb.stats()
    assert s["program_fails"] == 3 and s["erase_fails"] == 3, s


def bounds(n: int, p: float, sigmas: float = 5.0) -> tuple[float, float]:
    mean, sd = n * p, math.sqrt(n * p * (1 - p))
    return mean - sigmas * sd, mean + sigmas * sd


@cocotb.test()
async def raw_bit_errors_at_the_configured_rate(dut):
    rate, reads, sample = 1e-3, 40, 64
    tb = await NandTB.create(dut, "ber", bit_error_rate=rate, seed=11)
    h = tb.host
    g = tb.cfg[0].geometry
    row = tb.row(12, 0)
    data = pattern(sample, 5)
    assert not failed(await h.program(row, 0, data))
    flipped = 0
    for _ in range(reads):
        got = await h.read(row, 0, sample)
        flipped += sum(bin(a ^ b).count("1") for a, b in zip(got, data))
    injected = await tb.stat("BIT_ERRORS")
    lo, hi = bounds(reads * g.page_bytes * 8, rate)
    assert lo <= injected <= hi, f"{injected} bit errors over {reads} page reads, expected {lo:.0f}..{hi:.0f}"
    lo, hi = bounds(reads * sample * 8, rate)
    assert max(lo, 1) <= flipped <= hi, f"{flipped} flipped bits seen in the data, expected {lo:.0f}..{hi:.0f}"
    # Deterministic for a seed.
    tb = await NandTB.create(dut, "ber", bit_error_rate=rate, seed=11)
    assert not failed(await h.program(row, 0, data))
    for _ in range(reads):
        await h.read(row, 0, 0)
    assert await tb.stat("BIT_ERRORS") == injected
    # Zero rate: none.
    tb = await NandTB.create(dut, "ber0")
    assert not failed(await h.program(row, 0, data))
    assert await h.read(row, 0, sample) == data
    assert await tb.stat("BIT_ERRORS") == 0


@cocotb.test()
async def bit_errors_grow_with_wear(dut):
    growth, cycles, reads = 2e-4, 10, 10
    tb = await NandTB.create(dut, "wear", bit_error_growth=growth, seed=3)
    h = tb.host
    g = tb.cfg[0].geometry
    fresh, worn = tb.row(20, 0), tb.row(21, 0)
    for _ in range(cycles):
        assert not failed(await h.erase(worn))
    for _ in range(reads):
        await h.read(fresh, 0, 0)
    assert await tb.stat("BIT_ERRORS") == 0, "an unworn block reads clean at zero base rate"
    for _ in range(reads):
        await h.read(worn, 0, 0)
    lo, hi = bounds(reads * g.page_bytes * 8, growth * cycles)
    n = await tb.stat("BIT_ERRORS")
    assert lo <= n <= hi, (n, lo, hi)

