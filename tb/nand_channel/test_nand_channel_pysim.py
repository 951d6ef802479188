"""The channel's sequencer and data paths in amaranth.sim against FakeTarget
(pure Python, a tiny geometry): every operation, multi-way interleaving,
descriptor errors, with every ONFI timing checked.  The Verilator suite
(test_nand_channel.py) repeats this against the real NAND model."""

from __future__ import annotations

import random
import zlib

import pytest
from amaranth.sim import Simulator

from atomflash import spec
from atomflash.spec import NandOp, NandResult
from rtl.nand.channel import ChannelParams, NandChannel
from rtl.nand.pagebuf import HOST_READ_LATENCY
from rtl.nand.timing import timing_cycles
from tb.nand_phy.onfi_checker import FakeTarget, OnfiPinChecker

TINY = spec.NandProfile("tiny", 512, 96, 8, 4, 1, 0, 0, 0, "test geometry")


class ChannelSimTB:
    def __init__(self, ways=2, mode=5, ecc=False, busy=60):
        self.params = ChannelParams(TINY, ways=ways, slots=4, ecc=ecc)
        self.dut = NandChannel(self.params)
        self.timing = timing_cycles(mode)
        self.devices = [FakeTarget(TINY.page_bytes, TINY.pages_per_block, self.params.page_bits, busy)
                        for _ in range(ways)]
        self.checker = OnfiPinChecker(self.dut.bus, self.timing, ways, devices=self.devices)
        self.sim = Simulator(self.dut)
        self.sim.add_clock(1e-8)
        self.sim.add_process(self.checker.run)
        self.cpls: list = []
        self.slot_words = self.dut.slot_words

    async def collect(self, ctx):
        ctx.set(self.dut.cpl.ready, 1)
        async for _, _, valid, payload in ctx.tick().sample(self.dut.cpl.valid, self.dut.cpl.payload):
            if valid:
                self.cpls.append(spec.NAND_CPL.unpack(payload.as_bits().to_bytes(16, "little")))

    async def write_slot(self, ctx, slot, offset, data: bytes):
        assert offset % 4 == 0
        data = data + bytes(-len(data) % 4)
        for i in range(0, len(data), 4):
            ctx.set(self.dut.buf.addr, slot * self.slot_words + (offset + i) // 4)
            ctx.set(self.dut.buf.w_data, int.from_bytes(data[i:i + 4], "little"))
            ctx.set(self.dut.buf.w_en, 0xF)
            await ctx.tick()
        ctx.set(self.dut.buf.w_en, 0)

    async def read_slot(self, ctx, slot, offset, length) -> bytes:
        """A word a cycle, each word's data HOST_READ_LATENCY cycles after its address."""
        out = bytearray()
        first, last = offset // 4, (offset + length + 3) // 4
        for i in range(last - first + HOST_READ_LATENCY - 1):
            if i < last - first:
                ctx.set(self.dut.buf.addr, slot * self.slot_words + first + i)
            await ctx.tick()
            if i >= HOST_READ_LATENCY - 1:
                out += ctx.get(self.dut.buf.r_data).to_bytes(4, "little")
        return bytes(out[offset - 4 * first:][:length])

    async def submit(self, ctx, **fields):
        raw = spec.NAND_DESC.pack(fields)
        ctx.set(self.dut.desc.payload.as_value(), int.from_bytes(raw, "little"))
        ctx.set(self.dut.desc.valid, 1)
        await ctx.tick().until(self.dut.desc.ready)
        ctx.set(self.dut.desc.valid, 0)

    async def wait_cpls(self, ctx, n, limit=200_000):
        for _ in range(limit):
            if len(self.cpls) >= n:
                return
            await ctx.tick()
        raise TimeoutError(f"{len(self.cpls)} of {n} completions")

    def run(self, bench):
        async def top(ctx):
            ctx.set(self.dut.timing, self.timing)
            await ctx.tick()
            await bench(ctx)
        self.sim.add_process(self.collect)
        self.sim.add_testbench(top)
        self.sim.run()
        assert self.checker.violations == [], self.checker.violations[:5]


def test_program_read_erase_raw_two_ways():
    tb = ChannelSimTB(ways=2)
    rng = random.Random(1)
    pages = {t: bytes(rng.getrandbits(8) for _ in range(TINY.page_bytes)) for t in range(2)}

    async def bench(ctx):
        for t in range(2):
            await tb.write_slot(ctx, t, 0, pages[t])
        for t in range(2):
            await tb.submit(ctx, opcode=NandOp.PROGRAM, flags=1, target=t, block=1, page=t, column=0,
                            length=TINY.page_bytes, slot=t, tag=10 + t)
        await tb.wait_cpls(ctx, 2)
        for t in range(2):
            await tb.submit(ctx, opcode=NandOp.READ, flags=1, target=t, block=1, page=t, column=0,
                            length=TINY.page_bytes, slot=2 + t, tag=20 + t)
        await tb.wait_cpls(ctx, 4)
        for t in range(2):
            tb.got = getattr(tb, "got", {})
            tb.got[t] = await tb.read_slot(ctx, 2 + t, 0, TINY.page_bytes)
        await tb.submit(ctx, opcode=NandOp.ERASE, target=1, block=1, tag=30)
        await tb.submit(ctx, opcode=NandOp.READ, flags=1, target=1, block=1, page=1, column=100, length=16,
                        slot=3, tag=31)
        await tb.wait_cpls(ctx, 6)
        tb.erased = await tb.read_slot(ctx, 3, 100, 16)

    tb.run(bench)
    by_tag = {c.tag: c for c in tb.cpls}
    for t in range(2):
        assert by_tag[10 + t].result == NandResult.OK and by_tag[10 + t].nand_status == 0xE0
        assert by_tag[10 + t].crc == zlib.crc32(pages[t])
        assert by_tag[20 + t].result == NandResult.OK
        assert by_tag[20 + t].crc == zlib.crc32(pages[t])
        assert tb.got[t] == pages[t]
    assert tb.devices[0].pages[tb.params.row_address(0, 1, 0)] == pages[0]
    assert by_tag[30].result == NandResult.OK
    assert tb.erased == b"\xff" * 16


def test_ways_overlap_busy_periods():
    """Two programs on two targets: the second's bus phase runs during the first's busy time."""
    tb = ChannelSimTB(ways=2, busy=3000)

    async def bench(ctx):
        for t in range(2):
            await tb.submit(ctx, opcode=NandOp.PROGRAM, flags=1, target=t, block=0, page=0, column=0,
                            length=64, slot=0, tag=t)
        await tb.wait_cpls(ctx, 2)
        tb.done_at = tb.checker.now

    tb.run(bench)
    # sequential would be 2 * (busy + transfer); overlapped is about one busy + two transfers
    assert tb.done_at < 3000 + 2 * 1000, tb.done_at


def test_id_param_status_reset_features_copyback_and_fail():
    tb = ChannelSimTB(ways=2)

    async def bench(ctx):
        await tb.submit(ctx, opcode=NandOp.RESET, target=0, tag=1)
        await tb.submit(ctx, opcode=NandOp.READ_ID, target=0, column=0, length=5, slot=0, tag=2)
        await tb.submit(ctx, opcode=NandOp.READ_PARAM, target=1, length=32, slot=1, tag=3)
        await tb.submit(ctx, opcode=NandOp.READ_STATUS, target=1, tag=4)
        await tb.write_slot(ctx, 2, 0, bytes([5, 0, 0, 0]))
        await tb.submit(ctx, opcode=NandOp.SET_FEATURES, target=1, column=1, length=4, slot=2, tag=5)
        await tb.wait_cpls(ctx, 5)
        tb.id = await tb.read_slot(ctx, 0, 0, 5)
        tb.param = await tb.read_slot(ctx, 1, 0, 32)
        await tb.write_slot(ctx, 3, 0, bytes(range(64)))
        await tb.submit(ctx, opcode=NandOp.PROGRAM, flags=1, target=0, block=2, page=0, column=0, length=64,
                        slot=3, tag=6)
        await tb.submit(ctx, opcode=NandOp.COPYBACK, target=0, block=2, page=0, dst_block=3, dst_page=0, tag=7)
        await tb.wait_cpls(ctx, 7)
        tb.devices[0].fail_next = True
        await tb.submit(ctx, opcode=NandOp.ERASE, target=0, block=2, tag=8)
        await tb.wait_cpls(ctx, 8)

    tb.run(bench)
    c = {c.tag: c for c in tb.cpls}
    assert all(c[i].result == NandResult.OK for i in range(1, 8)), [(i, c[i].result) for i in c]
    assert tb.id == bytes([0xAF, 0x5A, 0x00, 0x15, 0x00])
    assert tb.param == bytes((i * 3) & 0xFF for i in range(32))
    assert c[4].nand_status == 0xE0
    assert tb.devices[1].features == [5, 0, 0, 0]
    dst = tb.devices[0].pages[tb.params.row_address(0, 3, 0)]
    assert dst[:64] == bytes(range(64))
    assert c[8].result == NandResult.FAIL and c[8].nand_status & 1


BAD = [
    (dict(opcode=9), NandResult.BAD_OPCODE),
    (dict(opcode=NandOp.READ, channel=1, length=4), NandResult.BAD_CHANNEL),
    (dict(opcode=NandOp.READ, target=2, length=4), NandResult.BAD_TARGET),
    (dict(opcode=NandOp.ERASE, lun=1), NandResult.BAD_LUN),
    (dict(opcode=NandOp.ERASE, block=4), NandResult.BAD_BLOCK),
    (dict(opcode=NandOp.COPYBACK, dst_block=4), NandResult.BAD_BLOCK),
    (dict(opcode=NandOp.READ, page=8, length=4), NandResult.BAD_PAGE),
    (dict(opcode=NandOp.READ, slot=4, length=4), NandResult.BAD_SLOT),
    (dict(opcode=NandOp.READ, flags=1, column=608, length=1), NandResult.BAD_COLUMN),
    (dict(opcode=NandOp.READ, flags=1, column=600, length=9), NandResult.BAD_LENGTH),
    (dict(opcode=NandOp.PROGRAM, flags=1, length=0), NandResult.BAD_LENGTH),
    (dict(opcode=NandOp.SET_FEATURES, column=1, length=3), NandResult.BAD_LENGTH),
]


def test_bad_descriptors_complete_with_errors_and_no_bus_cycle():
    tb = ChannelSimTB(ways=2)

    async def bench(ctx):
        for i, (fields, _) in enumerate(BAD):
            await tb.submit(ctx, tag=i, **fields)
        await tb.wait_cpls(ctx, len(BAD))
        for _ in range(50):
            await ctx.tick()

    tb.run(bench)
    assert [(c.tag, c.result) for c in tb.cpls] == [(i, r) for i, (_, r) in enumerate(BAD)]
    assert tb.checker.latches == []


def test_ecc_program_parity_correction_uncorrectable_and_erased():
    from rtl.ecc.bch import default_code
    code = default_code()
    tb = ChannelSimTB(ways=1, ecc=True)
    lay = tb.params.layout
    rng = random.Random(5)
    user = bytes(rng.getrandbits(8) for _ in range(lay.user_bytes))
    row = tb.params.row_address(0, 0, 0)
    flips = {3: 0x81, 100: 0x10, 511: 0x01, 512 + 5: 0x40, lay.parity_col + 2: 0x08}  # cw 0: 4 + 1 parity; OOB: 1

    async def bench(ctx):
        await tb.write_slot(ctx, 0, 0, user)
        await tb.submit(ctx, opcode=NandOp.PROGRAM, target=0, block=0, page=0, column=0,
                        length=lay.user_bytes, slot=0, tag=1)
        await tb.wait_cpls(ctx, 1)
        page = tb.devices[0].pages[row]
        tb.stored = bytes(page)
        for off, mask in flips.items():
            page[off] ^= mask
        await tb.submit(ctx, opcode=NandOp.READ, target=0, block=0, page=0, column=0,
                        length=lay.user_bytes, slot=1, tag=2)
        await tb.submit(ctx, opcode=NandOp.READ, target=0, block=0, page=0, column=lay.oob_col,
                        length=lay.oob_bytes, slot=2, tag=3)
        await tb.wait_cpls(ctx, 3)
        tb.back = await tb.read_slot(ctx, 1, 0, lay.user_bytes)
        tb.oob = await tb.read_slot(ctx, 2, lay.oob_col, lay.oob_bytes)
        for i in range(code.t):                       # now t + 1 errors in codeword 0
            page[200 + i] ^= 0x02
        await tb.submit(ctx, opcode=NandOp.READ, target=0, block=0, page=0, column=0, length=512, slot=1, tag=4)
        await tb.submit(ctx, opcode=NandOp.READ, target=0, block=1, page=0, column=0, length=512, slot=3, tag=5)
        await tb.wait_cpls(ctx, 5)

    tb.run(bench)
    c = {c.tag: c for c in tb.cpls}
    data_par = code.encode(user[:512])
    oob_par = code.encode(user[512:])
    assert tb.stored[:lay.user_bytes] == user
    assert tb.stored[lay.parity_col:lay.parity_col + lay.parity_bytes] == data_par + oob_par
    assert c[1].result == NandResult.OK and c[1].crc == zlib.crc32(user)
    assert c[2].result == NandResult.OK, c[2]
    assert tb.back == user
    assert c[2].ecc_corrected == 6 and c[2].ecc_max == 5, c[2]
    assert c[2].crc == zlib.crc32(user)
    assert c[3].result == NandResult.OK and tb.oob == user[512:] and c[3].ecc_corrected == 1
    assert c[4].result == NandResult.UNCORRECTABLE and c[4].flags & 1
    assert c[5].result == NandResult.ERASED and c[5].flags & 2
