"""cocotb tests for the buffer DMA: memory -> page buffer -> memory.

``BufferDMATB`` owns the top (the DMA wired to a real page buffer), its clock, the request source
(:class:`~sim.harness.streams.StreamSource`, seeded idle gaps), the done sink
(:class:`~sim.harness.streams.SettledStreamSink`, seeded backpressure), the SoC memory
(:class:`~sim.harness.wishbone.WishboneMemory`: random wait states, injectable bus errors), the
reference (a shadow of the page buffer and of the memory: a transfer copies its words in order and
stops at the first bus error, words copied before it stay copied) and the scoreboard (each transfer's
error flag, the whole memory after it, the buffer as the channel port reads it).  Requests go through
the DMA's ``request_layout``, completions through its ``done`` layout."""

import os
import random

import cocotb
import cocotb.utils
from cocotb.clock import Clock
from cocotb.triggers import ClockCycles, FallingEdge, RisingEdge, with_timeout

from rtl.ftl.dma import BufferDMA, Direction
from rtl.nand.pagebuf import CHAN_READ_LATENCY
from rtl.nand.pagebuf import PageBuffer
from sim.harness.layouts import pack, unpack
from sim.harness.streams import SettledStreamSink, StreamSource
from sim.harness.wishbone import WishboneMemory

SLOTS, SLOT_BYTES = int(os.environ["SLOTS"]), int(os.environ["SLOT_BYTES"])
SLOT_WORDS = SLOT_BYTES // 4
_DMA = BufferDMA(PageBuffer(SLOTS, SLOT_BYTES).host.addr.shape().width)
REQUEST, DONE = _DMA.req.payload.shape(), _DMA.done.payload.shape()
SRC, DST = 0x4000_0000, 0x4010_0000


class BufferDMATB:
    def __init__(self, dut, seed, *, idle=0.5, backpressure=0.5, max_wait=2, burst=0.7):
        self.dut, self.clk = dut, dut.clk
        self.rng = random.Random(seed)
        self.memory = WishboneMemory(dut, "bus", dut.clk, max_wait=max_wait, seed=seed, burst=burst)
        self.req = StreamSource(dut, "req", dut.clk, idle=idle, seed=seed + 1)
        self.done = None
        self.backpressure, self.seed = backpressure, seed
        self.buffer = {}        # the reference: page-buffer word address -> word (the words written so far)
        cocotb.start_soon(Clock(dut.clk, 10, "ns").start())

    async def reset(self):
        d = self.dut
        d.rst.value = 1
        d.chan__w_en.value = 0
        await ClockCycles(d.clk, 3)
        d.rst.value = 0
        self.memory_task = self.memory.start()
        # settled: a plain StreamSink records a payload even when valid fell before its ready (a dropped completion)
        self.done = SettledStreamSink(d, "done", self.clk, backpressure=self.backpressure, seed=self.seed + 2)

    async def transfer(self, direction, mem_addr, buf_word, words):
        """One request; returns its error flag, after checking it, and the memory, against the reference."""
        mem_word = mem_addr // 4
        stop = next((i for i in range(words) if mem_word + i in self.memory.error_at), None)
        copied = words if stop is None else stop
        want_memory, unknown = dict(self.memory.words), set()
        for i in range(copied):
            if direction == Direction.TO_BUFFER:
                self.buffer[buf_word + i] = self.memory.words.get(mem_word + i, 0)
            elif buf_word + i in self.buffer:
                want_memory[mem_word + i] = self.buffer[buf_word + i]
            else:
                unknown.add(mem_word + i)                   # a buffer word the bench never wrote: not checked
        n = len(self.done.items) + 1
        await self.req.send(pack(REQUEST, direction=direction, mem_addr=mem_addr, buf_addr=buf_word, words=words))
        await with_timeout(self.done.wait_for(n), 100 * (words + 10), "ns")
        error = unpack(DONE, self.done.items[n - 1])["error"]
        assert error == (stop is not None), f"error {error}, the reference stops at word {stop}"
        known = lambda words: {a: v for a, v in words.items() if a not in unknown}  # noqa: E731
        assert known(self.memory.words) == known(want_memory), "the memory differs from the reference"
        return error

    async def read_buffer_bytes(self, byte_addr, length):
        """Read the page buffer through its byte-wide channel port (``CHAN_READ_LATENCY`` cycles)."""
        d = self.dut
        out = bytearray()
        await FallingEdge(d.clk)
        for i in range(length):
            d.chan__addr.value = byte_addr + i
            for _ in range(CHAN_READ_LATENCY):
                await RisingEdge(d.clk)
            await FallingEdge(d.clk)
            out.append(int(d.chan__r_data.value))
        return bytes(out)

    async def check_buffer(self, byte_addr, length):
        """The buffer bytes the channel reads are the reference's."""
        got = await self.read_buffer_bytes(byte_addr, length)
        words = range(byte_addr // 4, (byte_addr + length + 3) // 4)
        want = b"".join(self.buffer[w].to_bytes(4, "little") for w in words)
        assert got == want[byte_addr % 4:][:length], "the page buffer differs from the reference"
        return got


@cocotb.test()
async def page_round_trip(dut):
    tb = BufferDMATB(dut, seed=6)
    await tb.reset()
    page = tb.rng.randbytes(4 * SLOT_WORDS)
    tb.memory.write_bytes(SRC, page)
    assert await tb.transfer(Direction.TO_BUFFER, SRC, SLOT_WORDS, SLOT_WORDS) == 0  # into slot 1
    # The channel side sees exactly the host bytes in slot 1.
    assert await tb.check_buffer(4 * SLOT_WORDS + 100, 64) == page[100:164]
    assert await tb.transfer(Direction.TO_MEMORY, DST, SLOT_WORDS, SLOT_WORDS) == 0
    assert tb.memory.read_bytes(DST, len(page)) == page
    assert tb.req.gaps and tb.done.stalls, (tb.req.gaps, tb.done.stalls)


@cocotb.test()
async def partial_transfers_touch_only_their_words(dut):
    tb = BufferDMATB(dut, seed=2)
    await tb.reset()
    tb.memory.write_bytes(SRC, bytes(range(256)) * 4)
    await tb.transfer(Direction.TO_BUFFER, SRC, 0, 256)
    tb.memory.write_bytes(SRC, b"\xAA" * 40)
    await tb.transfer(Direction.TO_BUFFER, SRC, 10, 10)          # words 10..19 only
    await tb.transfer(Direction.TO_MEMORY, DST, 0, 256)
    got = tb.memory.read_bytes(DST, 1024)
    want = bytearray(bytes(range(256)) * 4)
    want[40:80] = b"\xAA" * 40
    assert got == bytes(want)
    await tb.check_buffer(32, 64)                               # words 8..23: the partial write and its edges
    assert tb.req.gaps and tb.done.stalls, (tb.req.gaps, tb.done.stalls)


@cocotb.test()
async def bus_error_is_reported(dut):
    tb = BufferDMATB(dut, seed=5)
    await tb.reset()
    tb.memory.write_bytes(SRC, tb.rng.randbytes(64))
    tb.memory.error_at.add(SRC // 4 + 7)
    assert await tb.transfer(Direction.TO_BUFFER, SRC, 0, 16) == 1    # words 0..6 copied
    await tb.check_buffer(0, 28)
    tb.memory.error_at.clear()
    assert await tb.transfer(Direction.TO_BUFFER, SRC, 0, 16) == 0
    tb.memory.error_at.add(DST // 4 + 3)
    assert await tb.transfer(Direction.TO_MEMORY, DST, 0, 16) == 1   # words 0..2 written
    assert tb.memory.read_bytes(DST, 12) == tb.memory.read_bytes(SRC, 12)
    tb.memory.error_at.clear()
    # the error left buffer reads on their way: none of them may reach the next transfer's words
    assert await tb.transfer(Direction.TO_MEMORY, DST, 0, 16) == 0
    assert tb.memory.read_bytes(DST, 64) == tb.memory.read_bytes(SRC, 64)
    assert tb.req.gaps and tb.done.stalls, (tb.req.gaps, tb.done.stalls)


@cocotb.test()
async def a_burst_moves_a_word_a_cycle(dut):
    """With a memory that bursts and never waits, a whole slot moves in about one cycle a word each way;
    with one that does not burst, in two (the same DMA, classic cycles)."""
    for burst, per_word in ((1.0, 1), (0.0, 2)):
        tb = BufferDMATB(dut, seed=9, idle=0.0, backpressure=0.0, max_wait=0, burst=burst)
        await tb.reset()
        tb.memory.write_bytes(SRC, tb.rng.randbytes(4 * SLOT_WORDS))
        for direction, addr in ((Direction.TO_BUFFER, SRC), (Direction.TO_MEMORY, DST)):
            start = cocotb.utils.get_sim_time("ns")
            assert await tb.transfer(direction, addr, 0, SLOT_WORDS) == 0
            cycles = (cocotb.utils.get_sim_time("ns") - start) // 10
            assert per_word * SLOT_WORDS <= cycles <= per_word * SLOT_WORDS + 12, (burst, direction, cycles)
        assert tb.memory.read_bytes(DST, 4 * SLOT_WORDS) == tb.memory.read_bytes(SRC, 4 * SLOT_WORDS)
        assert tb.memory.bursts >= (2 * SLOT_WORDS - 4 if burst else 0)
        tb.memory_task.kill()           # the next memory answers the port alone
