"""cocotb tests for rtl.ftl.oob.OOBPacker.

``OOBPackerTB`` owns the packer, its clock, the record source
(:class:`~sim.harness.streams.StreamSource`, seeded idle gaps), the byte sink (a
:class:`~sim.harness.streams.FullRateStreamSink` granted one record's bytes at a time, under seeded
backpressure or at full rate), the reference (``spec.pack_oob``, the Python packer) and the
scoreboard (a record's bytes, ``last`` on its final byte only).  Records go through the spec's OOB
layout (:mod:`rtl.spec`), bytes through the packer's ``BYTE_STREAM`` layout."""

import random

import cocotb
from cocotb.clock import Clock
from cocotb.triggers import ClockCycles, ReadOnly, RisingEdge, with_timeout
from cocotb.utils import get_sim_steps

from atomflash import spec
from rtl import spec as layouts
from rtl.ftl.oob import BYTE_STREAM
from sim.harness.layouts import pack, unpack
from sim.harness.streams import FullRateStreamSink, StreamSource

PERIOD_NS = 10


def random_oob_fields(rng: random.Random) -> dict:
    fields = {}
    for f in spec.OOB.fields:
        if f.name != "crc":
            fields[f.name] = rng.getrandbits(f.width)
    return fields


class OOBPackerTB:
    def __init__(self, dut, seed=1, *, idle=0.3, backpressure=0.3):
        self.dut, self.clk = dut, dut.clk
        self.rng = random.Random(seed)
        self.records = StreamSource(dut, "record", dut.clk, idle=idle, seed=seed + 1)
        # takes only the bytes a receive() grants, so a test decides when the packer may drain
        self.bytes = FullRateStreamSink(dut, "bytes", dut.clk, credit=0, backpressure=backpressure, seed=seed + 2)
        self.received = 0           # bytes consumed by receive()
        cocotb.start_soon(Clock(dut.clk, PERIOD_NS, "ns").start())

    async def reset(self):
        self.dut.rst.value = 1
        await ClockCycles(self.clk, 3)
        self.dut.rst.value = 0

    async def send(self, fields: dict, crc: int = 0):
        """One record into the packer, through the OOB layout (its ``crc`` field is ignored)."""
        await self.records.send(pack(layouts.OOB, fields, crc=crc))

    async def receive(self, backpressure: float | None = None) -> bytes:
        """One record's bytes out of the packer (``backpressure``: the share for these bytes); checks that
        ``last`` marks the final byte only."""
        if backpressure is not None:
            self.bytes.backpressure = backpressure
        size, first = spec.OOB.size, self.received
        self.received += size
        self.bytes.grant(size)
        await with_timeout(self.bytes.wait_for(self.received), 50 * size * PERIOD_NS, "ns")
        got = [unpack(BYTE_STREAM, v) for v in self.bytes.items[first:self.received]]
        assert [b["last"] for b in got] == [0] * (size - 1) + [1], "last must mark the record's final byte"
        return bytes(b["data"] for b in got)

    def back_to_back(self, first: int, n: int) -> bool:
        """Bytes ``first``..``first + n - 1`` were taken on consecutive clock edges."""
        t = self.bytes.times[first:first + n]
        return all(b - a == get_sim_steps(PERIOD_NS, "ns") for a, b in zip(t, t[1:]))


@cocotb.test()
async def random_records_match_python_packer(dut):
    tb = OOBPackerTB(dut, seed=2)
    await tb.reset()
    for n in range(60):
        fields = random_oob_fields(tb.rng)
        sender = cocotb.start_soon(tb.send(fields, crc=tb.rng.getrandbits(32)))  # crc input is ignored
        first = tb.received
        # every other record at full rate: its bytes on consecutive edges (the CRC fed every cycle)
        got = await tb.receive(backpressure=0.3 if n % 2 else 0.0)
        await sender
        want = spec.pack_oob(**fields)
        assert got == want, f"record {n}: RTL {got.hex()} != Python {want.hex()}"
        assert spec.unpack_oob(got) is not None
        if n % 2 == 0:
            assert tb.back_to_back(first, spec.OOB.size), f"record {n} not at full rate"
    assert tb.records.gaps and tb.bytes.stalls > 30, (tb.records.gaps, tb.bytes.stalls)


@cocotb.test()
async def packer_holds_record_until_drained(dut):
    """A second record is refused while the first is still leaving."""
    tb = OOBPackerTB(dut, seed=3)
    await tb.reset()
    first = dict(kind=spec.Kind.DATA, lba=7, seq=1)
    second = dict(kind=spec.Kind.DATA, lba=8, seq=2)
    await tb.send(first)
    sending = cocotb.start_soon(tb.send(second))
    for _ in range(5):
        await RisingEdge(dut.clk)
        assert dut.record__ready.value == 0
        assert dut.bytes__valid.value == 1
    await ClockCycles(dut.clk, tb.records.max_gap)
    await ReadOnly()
    assert dut.record__valid.value == 1 and dut.record__ready.value == 0 and not sending.done()
    got = await tb.receive(backpressure=0.0)
    assert got == spec.pack_oob(kind=spec.Kind.DATA, lba=7, seq=1, format=0)
    await with_timeout(sending, 10 * PERIOD_NS, "ns")
    assert await tb.receive() == spec.pack_oob(**second, format=0)
