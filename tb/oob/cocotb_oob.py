"""cocotb tests for rtl.ftl.oob.OOBPacker."""

import random

import cocotb
from cocotb.clock import Clock
from cocotb.triggers import ReadOnly, RisingEdge

from atomflash import spec


def random_oob_fields(rng: random.Random) -> dict:
    fields = {}
    for f in spec.OOB.fields:
        if f.name != "crc":
            fields[f.name] = rng.getrandbits(f.width)
    return fields


class OOBPackerTB:
    """Drives records in, collects bytes out with random back-pressure."""

    def __init__(self, dut, seed=1):
        self.dut = dut
        self.rng = random.Random(seed)
        cocotb.start_soon(Clock(dut.clk, 10, "ns").start())

    async def reset(self):
        self.dut.rst.value = 1
        self.dut.record__valid.value = 0
        self.dut.bytes__ready.value = 0
        for _ in range(3):
            await RisingEdge(self.dut.clk)
        self.dut.rst.value = 0

    async def send(self, raw: bytes):
        self.dut.record__payload.value = int.from_bytes(raw, "little")
        self.dut.record__valid.value = 1
        while True:
            await RisingEdge(self.dut.clk)
            if self.dut.record__ready.value:
                break
        self.dut.record__valid.value = 0

    async def receive(self, backpressure: float) -> bytes:
        out = bytearray()
        while True:
            self.dut.bytes__ready.value = int(self.rng.random() >= backpressure)
            await ReadOnly()
            fire = self.dut.bytes__valid.value and self.dut.bytes__ready.value
            if fire:
                payload = int(self.dut.bytes__payload.value)
                out.append(payload & 0xFF)
                last = payload >> 8
            await RisingEdge(self.dut.clk)
            if fire and last:
                self.dut.bytes__ready.value = 0
                return bytes(out)


@cocotb.test()
async def random_records_match_python_packer(dut):
    tb = OOBPackerTB(dut, seed=2)
    await tb.reset()
    for n in range(60):
        fields = random_oob_fields(tb.rng)
        raw_in = spec.OOB.pack(fields, crc=tb.rng.getrandbits(32))  # crc input is ignored
        sender = cocotb.start_soon(tb.send(raw_in))
        got = await tb.receive(backpressure=0.3 if n % 2 else 0.0)
        await sender
        want = spec.pack_oob(**fields)
        assert got == want, f"record {n}: RTL {got.hex()} != Python {want.hex()}"
        assert spec.unpack_oob(got) is not None


@cocotb.test()
async def packer_holds_record_until_drained(dut):
    """A second record is refused while the first is still leaving."""
    tb = OOBPackerTB(dut, seed=3)
    await tb.reset()
    await tb.send(spec.OOB.pack(kind=spec.Kind.DATA, lba=7, seq=1))
    for _ in range(5):
        await RisingEdge(dut.clk)
        assert dut.record__ready.value == 0
        assert dut.bytes__valid.value == 1
    got = await tb.receive(backpressure=0.0)
    assert got == spec.pack_oob(kind=spec.Kind.DATA, lba=7, seq=1, format=0)
