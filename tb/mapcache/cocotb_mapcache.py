"""cocotb tests for the mapping-table cache, scoreboarded against a dict.

``MapCacheTB`` owns the cache, its clock, the request source and the segment-gate source
(:class:`~sim.harness.streams.StreamSource`, seeded idle gaps), the response sink
(:class:`~sim.harness.streams.SettledStreamSink`, seeded backpressure), the SoC memory holding the table
(:class:`~sim.harness.wishbone.WishboneMemory`: random wait states, injectable bus errors), the
reference (``model``: every LBA's entry as the cache must answer it) and the scoreboard (each response's
old entry and updated flag, the table in memory after a FLUSH).  Requests, responses and segment marks
go through the cache's port layouts (``request_layout``, ``RESPONSE``, ``seg_set_layout``)."""

import os
import random

import cocotb
from cocotb.clock import Clock
from cocotb.triggers import ClockCycles, ReadOnly, RisingEdge, with_timeout

from atomflash import spec
from rtl.ftl.mapcache import MapCache, MapOp
from sim.harness.layouts import pack, unpack
from sim.harness.streams import SettledStreamSink, StreamSource
from sim.harness.wishbone import WishboneMemory

TABLE_BASE = 0x4000_0000
LBA_BITS = int(os.environ["LBA_BITS"])
CACHED = int(os.environ["SETS"]) * int(os.environ["WAYS"]) * int(os.environ["LINE"])
SEGMENTS = int(os.environ["SEGMENTS"])
_PORTS = MapCache(**{k: int(os.environ[k.upper()]) for k in ("lba_bits", "sets", "ways", "line", "segments")})
REQUEST, RESPONSE, SEG_SET = (p.payload.shape() for p in (_PORTS.req, _PORTS.resp, _PORTS.seg_set))


class MapCacheTB:
    def __init__(self, dut, seed, lbas=256, *, idle=0.3, backpressure=0.3):
        self.dut, self.clk = dut, dut.clk
        self.rng = random.Random(seed)
        self.memory = WishboneMemory(dut, "dma", dut.clk, max_wait=1, seed=seed)
        self.lbas = lbas
        self.model = {lba: spec.PPA_UNMAPPED for lba in range(lbas)}
        self.memory.write_bytes(TABLE_BASE, b"\xff" * 4 * lbas)  # firmware's "all unmapped"
        self.req = StreamSource(dut, "req", dut.clk, idle=idle, seed=seed + 1)
        self.seg_set = StreamSource(dut, "seg_set", dut.clk, idle=idle, seed=seed + 2)
        self.resp = None
        self.backpressure, self.seed = backpressure, seed
        self.sent = 0               # requests sent (response n answers request n)
        cocotb.start_soon(Clock(dut.clk, 10, "ns").start())

    async def reset(self):
        d = self.dut
        d.rst.value = 1
        d.table_base.value = TABLE_BASE
        d.lazy.value = 0
        d.seg_shift.value = 0
        await ClockCycles(d.clk, 3)
        d.rst.value = 0
        self.memory.start()
        self.resp = SettledStreamSink(d, "resp", self.clk, backpressure=self.backpressure, seed=self.seed + 3)

    # -- the drivers -------------------------------------------------------------------------------------
    async def send(self, op, lba=0, value=0, expected=0) -> int:
        """Send one request; returns its number (from 1), for :meth:`response`."""
        self.sent += 1
        n = self.sent
        await self.req.send(pack(REQUEST, op=op.value, lba=lba, value=value, expected=expected))
        return n

    async def response(self, n) -> dict:
        """The response to request ``n``."""
        await with_timeout(self.resp.wait_for(n), 200, "us")
        return unpack(RESPONSE, self.resp.items[n - 1])

    async def request(self, op, lba=0, value=0, expected=0) -> dict:
        return await self.response(await self.send(op, lba, value, expected))

    async def mark_segment(self, index, loaded=1):
        """The firmware's write of ftl.map_seg: one seg_set transfer."""
        await self.seg_set.send(pack(SEG_SET, index=index, loaded=loaded))

    # -- the reference and the scoreboard --------------------------------------------------------------------
    def expect(self, op, lba, value=0, expected=0) -> dict:
        """What the cache must answer (old, updated) and, in the reference, the request's effect."""
        old = self.model[lba]
        updated = op == MapOp.WRITE or (op == MapOp.CAS and expected == old)
        if updated:
            self.model[lba] = value
        return dict(old=old, updated=int(updated), error=0)

    def check(self, r: dict, want: dict, what=""):
        got = {k: r[k] for k in want}
        assert got == want, f"{what}: RTL {got} != reference {want}"

    async def access(self, op, lba, value=0, expected=0) -> dict:
        """One request, checked against the reference."""
        want = self.expect(op, lba, value, expected)
        r = await self.request(op, lba, value, expected)
        self.check(r, want, f"{op.name} lba {lba}")
        return r

    def table_in_memory(self):
        raw = self.memory.read_bytes(TABLE_BASE, 4 * self.lbas)
        return {lba: int.from_bytes(raw[4 * lba:4 * lba + 4], "little") for lba in range(self.lbas)}


@cocotb.test()
async def random_operations_match_a_dict(dut):
    """600 random requests, sent back to back while responses wait under backpressure."""
    tb = MapCacheTB(dut, seed=11)
    await tb.reset()
    wants = []
    for n in range(600):
        lba = tb.rng.randrange(tb.lbas) if n % 3 else tb.rng.randrange(16)  # some locality
        kind = tb.rng.choice([MapOp.READ, MapOp.WRITE, MapOp.WRITE, MapOp.CAS])
        value = tb.rng.getrandbits(32)
        expected = tb.model[lba] if tb.rng.random() < 0.5 else tb.rng.getrandbits(32)
        wants.append((kind, lba, tb.expect(kind, lba, value, expected)))
        await tb.send(kind, lba, value, expected)
    hits = 0
    for n, (kind, lba, want) in enumerate(wants):
        r = await tb.response(n + 1)
        tb.check(r, want, f"#{n} {kind.name} lba {lba}")
        hits += r["hit"]
    assert int(dut.hits.value) == hits
    assert int(dut.hits.value) + int(dut.misses.value) == 600
    assert int(dut.writebacks.value) > 0, "the working set should have forced write-backs"
    assert tb.req.gaps > 50 and tb.resp.stalls > 50, (tb.req.gaps, tb.resp.stalls)
    # FLUSH makes SoC memory hold exactly the table.
    await tb.request(MapOp.FLUSH)
    assert tb.table_in_memory() == tb.model
    # Flushed lines stay cached and clean: re-flushing writes nothing.
    writes = tb.memory.writes
    await tb.request(MapOp.FLUSH)
    assert tb.memory.writes == writes


@cocotb.test()
async def invalidate_rereads_the_table_from_memory(dut):
    tb = MapCacheTB(dut, seed=12)
    await tb.reset()
    for lba in range(8):
        await tb.request(MapOp.WRITE, lba, 0x100 + lba)
    await tb.request(MapOp.FLUSH)
    # The firmware rebuilds part of the table in memory (as recovery does) ...
    tb.memory.write_bytes(TABLE_BASE + 4 * 3, (0xABCD).to_bytes(4, "little"))
    r = await tb.request(MapOp.READ, 3)
    assert r["old"] == 0x103 and r["hit"], "still cached before INVALIDATE"
    await tb.request(MapOp.INVALIDATE)
    r = await tb.request(MapOp.READ, 3)
    assert r["old"] == 0xABCD and not r["hit"]
    # ... and INVALIDATE drops dirty lines without writing them.
    await tb.request(MapOp.WRITE, 5, 0x55)
    await tb.request(MapOp.INVALIDATE)
    assert (await tb.request(MapOp.READ, 5))["old"] == 0x105


@cocotb.test()
async def cas_loses_to_a_racing_write(dut):
    """GC relocation rebinds only if the map still points at the old page."""
    tb = MapCacheTB(dut, seed=13)
    await tb.reset()
    old_page, gc_copy, host_page = 0x1000, 0x2000, 0x3000
    await tb.access(MapOp.WRITE, 42, old_page)
    await tb.access(MapOp.WRITE, 42, host_page)  # host rewrote LBA 42 meanwhile
    r = await tb.access(MapOp.CAS, 42, gc_copy, expected=old_page)
    assert r["old"] == host_page and not r["updated"]
    assert (await tb.access(MapOp.READ, 42))["old"] == host_page
    r = await tb.access(MapOp.CAS, 42, gc_copy, expected=host_page)
    assert r["updated"]
    assert (await tb.access(MapOp.READ, 42))["old"] == gc_copy


@cocotb.test()
async def bus_error_changes_nothing(dut):
    tb = MapCacheTB(dut, seed=14)
    await tb.reset()
    await tb.request(MapOp.WRITE, 1, 0x11)
    bad_lba = 200
    tb.memory.error_at.add((TABLE_BASE + 4 * bad_lba) // 4)
    r = await tb.request(MapOp.WRITE, bad_lba, 0x22)
    assert r["error"] and not r["updated"]
    tb.memory.error_at.clear()
    assert (await tb.request(MapOp.READ, bad_lba))["old"] == spec.PPA_UNMAPPED
    assert (await tb.request(MapOp.READ, 1))["old"] == 0x11


@cocotb.test()
async def a_miss_waits_for_its_segment_while_the_table_loads(dut):
    """The lazy boot: segments of 8 LBAs, only segment 0 in memory at first.  A miss in a segment
    not loaded holds its request (fault, fault_seg) and reads nothing of the table until the
    firmware has written the segment and set its bit; hits and ungated cases never wait."""
    tb = MapCacheTB(dut, seed=15)
    await tb.reset()
    await tb.request(MapOp.INVALIDATE)   # as the firmware's start does: block RAM survives a reset
    shift = 3
    dut.seg_shift.value = shift
    for s in range(SEGMENTS):
        await tb.mark_segment(s, 0)
    await tb.mark_segment(0)
    dut.lazy.value = 1
    # the firmware left garbage where segment 2 will go: the cache must not read it
    tb.memory.write_bytes(TABLE_BASE + 4 * 16, b"\xee" * 32)
    r = await tb.request(MapOp.READ, 2)
    assert r["old"] == spec.PPA_UNMAPPED and not r["hit"] and int(dut.faults.value) == 0

    waiting = cocotb.start_soon(tb.request(MapOp.READ, 20))    # segment 2
    reads = tb.memory.reads
    await ClockCycles(dut.clk, 40)
    await ReadOnly()
    assert not waiting.done() and dut.fault.value == 1 and int(dut.fault_seg.value) == 20 >> shift
    assert int(dut.faults.value) == 1 and tb.memory.reads == reads, "read the table of a segment not loaded"
    await RisingEdge(dut.clk)
    # the firmware loads segment 2 (the checkpoint binds LBA 20), then sets its bit
    tb.memory.write_bytes(TABLE_BASE + 4 * 16, b"".join((0x7000 + lba).to_bytes(4, "little") for lba in range(16, 24)))
    tb.model.update({lba: 0x7000 + lba for lba in range(16, 24)})
    await tb.mark_segment(2)
    r = await waiting
    assert r["old"] == 0x7000 + 20 and not r["hit"]
    await ReadOnly()
    assert dut.fault.value == 0 and int(dut.faults.value) == 1
    await RisingEdge(dut.clk)

    # a hit in a loaded segment never looks at the gate; a WRITE that misses waits like a READ
    assert (await tb.request(MapOp.READ, 21))["hit"]
    writing = cocotb.start_soon(tb.request(MapOp.WRITE, 33, 0x1234))   # segment 4
    await ClockCycles(dut.clk, 20)
    assert not writing.done() and int(dut.faults.value) == 2
    await tb.mark_segment(4)
    r = await writing
    assert r["updated"] and r["old"] == spec.PPA_UNMAPPED
    tb.model[33] = 0x1234
    # past the segments the gate tracks (16 x 8 LBAs): never held
    assert (await tb.request(MapOp.READ, 200))["old"] == spec.PPA_UNMAPPED
    # gate off (the whole table is in memory): segment 9 was never marked, and nothing waits
    dut.lazy.value = 0
    assert (await tb.request(MapOp.READ, 75))["old"] == spec.PPA_UNMAPPED
    assert int(dut.faults.value) == 2
    await tb.request(MapOp.FLUSH)
    table = tb.table_in_memory()
    assert all(table[lba] == v for lba, v in tb.model.items() if lba < 24 or lba == 33)
