"""cocotb: the RTL validator decides as atomflash.command.static_status does."""

import random

import cocotb
from cocotb.clock import Clock
from cocotb.triggers import ClockCycles, ReadOnly, RisingEdge

from atomflash import spec
from atomflash.command import StaticLimits, static_status
from atomflash.spec import Hint, Opcode, Status

CAPACITY = 5000


def interesting_command(rng: random.Random) -> dict:
    """A random entry biased towards every rule's boundary."""
    lim = StaticLimits()
    c = {f.name: 0 for f in spec.CMD.fields}
    c["opcode"] = rng.choice([int(o) for o in Opcode] * 3 + [0x7F, 0xFF, 0x03])
    c["cid"] = rng.getrandbits(16)
    c["nsid"] = 1 if rng.random() < 0.9 else rng.choice([0, 2, 0xFFFFFFFF])
    c["rsvd"] = 0 if rng.random() < 0.95 else rng.getrandbits(32)
    c["log_page"] = 0 if rng.random() < 0.8 else rng.choice([int(p) for p in spec.LogPage] + [0x7F, 0xFFFFFFFF])
    c["flags"] = rng.choice([0, 0, 0, 1, 2, 3, 4, 6, 8, 0x80])
    c["tid"] = rng.choice([0, 1, 7, 0xFFFFFFFF])
    c["hint"] = rng.choice([int(h) for h in Hint] + [3, 0xFFFFFFFF])
    c["lba"] = rng.choice([0, 1, CAPACITY - 1, CAPACITY, CAPACITY - lim.max_transfer, rng.getrandbits(64),
                           rng.randrange(CAPACITY)])
    c["nlb"] = rng.choice([0, 1, 2, lim.max_transfer, lim.max_transfer + 1, rng.getrandbits(32),
                           rng.randrange(1, 80)])
    c["nlist"] = rng.choice([0, 1, lim.max_atomic_pages, lim.max_atomic_pages + 1, lim.max_remap_triples,
                             lim.max_remap_triples + 1, rng.getrandbits(32)])
    c["buf"] = rng.choice([0x1000, 0x1001, 0x1002, 0x1004, (1 << 32) - 4, 1 << 32, rng.getrandbits(64)])
    c["list"] = rng.choice([0x2000, 0x2004, 0x2008, (1 << 32) - 8, 1 << 32, rng.getrandbits(64)])
    c["token"] = rng.getrandbits(64)
    return c


@cocotb.test()
async def random_entries_match_python(dut):
    rng = random.Random(7)
    cocotb.start_soon(Clock(dut.clk, 10, "ns").start())
    dut.rst.value = 1
    dut.cmd__valid.value = 0
    dut.capacity.value = CAPACITY
    dut.accepted__ready.value = 1
    dut.rejected__ready.value = 1
    await ClockCycles(dut.clk, 2)
    dut.rst.value = 0
    seen = {}
    for n in range(1500):
        c = interesting_command(rng)
        sqid = rng.randrange(4)
        want = static_status(c, CAPACITY)
        seen[want] = seen.get(want, 0) + 1
        dut.cmd__payload.value = sqid | (int.from_bytes(spec.CMD.pack(c), "little") << 2)
        dut.cmd__valid.value = 1
        await RisingEdge(dut.clk)
        dut.cmd__valid.value = 0
        await ReadOnly()
        if want == Status.SUCCESS:
            assert dut.accepted__valid.value == 1 and dut.rejected__valid.value == 0, f"#{n} {c} should pass"
            assert int(dut.accepted__payload.value) >> 2 == int.from_bytes(spec.CMD.pack(c), "little")
        else:
            assert dut.rejected__valid.value == 1 and dut.accepted__valid.value == 0, f"#{n} {c} should fail"
            payload = int(dut.rejected__payload.value)
            got_status = payload >> 18 & 0x7FFF
            assert got_status == want, f"#{n} {c}: RTL {Status(got_status).name} != {want.name}"
            assert payload & 3 == sqid and payload >> 2 & 0xFFFF == c["cid"]
        await RisingEdge(dut.clk)
    assert len(seen) >= 10, f"the random entries exercised too few rules: {seen}"


@cocotb.test()
async def backpressure_holds_the_verdict(dut):
    cocotb.start_soon(Clock(dut.clk, 10, "ns").start())
    dut.rst.value = 1
    dut.capacity.value = CAPACITY
    await ClockCycles(dut.clk, 2)
    dut.rst.value = 0
    dut.accepted__ready.value = 0
    dut.rejected__ready.value = 0
    good = {f.name: 0 for f in spec.CMD.fields} | dict(opcode=Opcode.FLUSH, nsid=1, cid=1)
    bad = dict(good, opcode=0x7F, cid=2)
    for entry in (good, bad):
        dut.cmd__payload.value = int.from_bytes(spec.CMD.pack(entry), "little") << 2
        dut.cmd__valid.value = 1
        await RisingEdge(dut.clk)
    await ReadOnly()
    assert dut.cmd__ready.value == 0, "a second entry must wait while the first is held"
    assert dut.accepted__valid.value == 1
    await RisingEdge(dut.clk)
    dut.accepted__ready.value = 1
    await RisingEdge(dut.clk)
    dut.cmd__valid.value = 0
    dut.accepted__ready.value = 0
    await ReadOnly()
    assert dut.rejected__valid.value == 1
    assert int(dut.rejected__payload.value) >> 2 & 0xFFFF == 2
