"""cocotb tests for the memory copier: SoC memory -> SoC memory in chunk-sized bursts.

``MemoryCopierTB`` owns the copier, its clock, the request source (:class:`~sim.harness.streams.
StreamSource`, seeded idle gaps), the done sink (:class:`~sim.harness.streams.SettledStreamSink`,
seeded backpressure), the SoC memory (:class:`~sim.harness.wishbone.WishboneMemory`: random wait
states, bursts as LiteX's bursting SRAM answers them or none, address ranges answering ``err``), a
monitor of every answered access on the bus (address, direction, cycle type tag, which bus cycle) and
the reference: a Python copy of the memory run through the copier's algorithm (chunks of
``min(CHUNK, left)`` words, each read whole, then written; the first refused access ends the copy).
Each copy is checked for its error, the whole memory after it, and the exact accesses it made: their
addresses, their tags (``CTI_INCREMENTING`` but ``CTI_END`` on a burst's last) and a bus cycle per
chunk."""

import os
import random

import cocotb
import cocotb.utils
from cocotb.clock import Clock
from cocotb.triggers import ClockCycles, ReadOnly, RisingEdge, with_timeout

from rtl.lib.memcopy import CopyError, MemoryCopier, copy_request_layout
from rtl.lib.wishbone import CTI_END, CTI_INCREMENTING
from sim.harness.layouts import pack, unpack
from sim.harness.streams import SettledStreamSink, StreamSource
from sim.harness.wishbone import WishboneMemory

CHUNK = int(os.environ["CHUNK"])
DONE = MemoryCopier(CHUNK).done.payload.shape()
BASE = 0x4000_0000          # the copies' window of SoC memory, filled with random words
WINDOW = 0x8000             # bytes: two pages' worth of copies overlap now and then
PAGE = 1024                 # words in a 4 KiB page
LENGTHS = [0, 1, CHUNK - 1, CHUNK, CHUNK + 1, 2 * CHUNK, 2 * CHUNK + 1, PAGE]


class BusMonitor:
    """Every access the memory answers (``stb`` with ``ack`` or ``err``), as (word, we, cti, bus cycle)."""

    def __init__(self, dut, clk):
        self.dut, self.clk = dut, clk
        self.accesses = []
        self.cycles = 0             # bus cycles begun (rises of cyc)

    async def run(self):
        d, was_cyc = self.dut, 0
        while True:
            await RisingEdge(self.clk)
            await ReadOnly()
            cyc = int(d.bus__cyc.value)
            if cyc and not was_cyc:
                self.cycles += 1
            was_cyc = cyc
            if cyc and int(d.bus__stb.value) and (int(d.bus__ack.value) or int(d.bus__err.value)):
                self.accesses.append((int(d.bus__adr.value), int(d.bus__we.value), int(d.bus__cti.value),
                                      self.cycles))


class MemoryCopierTB:
    def __init__(self, dut, seed, *, idle=0.5, backpressure=0.5, max_wait=2, burst=1.0):
        self.dut, self.clk = dut, dut.clk
        self.rng = random.Random(seed)
        self.memory = WishboneMemory(dut, "bus", dut.clk, max_wait=max_wait, seed=seed, burst=burst)
        self.req = StreamSource(dut, "req", dut.clk, idle=idle, seed=seed + 1)
        self.monitor = BusMonitor(dut, dut.clk)
        self.done = None
        self.requests = 0
        self.backpressure, self.seed = backpressure, seed
        cocotb.start_soon(Clock(dut.clk, 10, "ns").start())

    async def reset(self):
        d = self.dut
        d.rst.value = 1
        await ClockCycles(d.clk, 3)
        d.rst.value = 0
        self.memory_task = self.memory.start()
        self.monitor_task = cocotb.start_soon(self.monitor.run())
        self.done = SettledStreamSink(d, "done", self.clk, backpressure=self.backpressure, seed=self.seed + 2)
        self.memory.write_bytes(BASE, self.rng.randbytes(WINDOW))

    def reference(self, src, dst, words):
        """The copy in Python: (its error, the accesses it makes as (word, we, cti, chunk), the memory after)."""
        memory, refused = dict(self.memory.words), self.memory.error_at
        s, d, left, chunk, accesses = src // 4, dst // 4, words, 0, []
        while left:
            n = min(CHUNK, left)
            tags = [CTI_INCREMENTING] * (n - 1) + [CTI_END]
            got = []
            for i in range(n):
                accesses.append((s + i, 0, tags[i], chunk))
                if s + i in refused:
                    return CopyError.READ, accesses, memory
                got.append(memory.get(s + i, 0))
            for i in range(n):
                accesses.append((d + i, 1, tags[i], chunk))
                if d + i in refused:
                    return CopyError.WRITE, accesses, memory
                memory[d + i] = got[i]
            s, d, left, chunk = s + n, d + n, left - n, chunk + 1
        return CopyError.NONE, accesses, memory

    async def copy(self, src, dst, words):
        """One request; returns its error, after checking it, the memory and the bus accesses against the
        reference."""
        want_error, want_accesses, want_memory = self.reference(src, dst, words)
        first, self.requests = len(self.monitor.accesses), self.requests + 1
        await self.req.send(pack(copy_request_layout, src=src, dst=dst, words=words))
        await with_timeout(self.done.wait_for(self.requests), 200 * words + 1000, "ns")
        error = CopyError(unpack(DONE, self.done.items[self.requests - 1])["error"])
        where = f"copy of {words} words {src:#x} -> {dst:#x}"
        assert error == want_error, f"{where}: {error}, the reference says {want_error}"
        got = self.monitor.accesses[first:]
        assert [a[:3] for a in got] == [a[:3] for a in want_accesses], \
            f"{where}: the accesses (word, we, cti) differ from the reference's"
        # a chunk is one bus cycle of its own
        cycle_of = {chunk: cycle for (*_, chunk), (*_, cycle) in zip(want_accesses, got)}
        assert [cycle_of[chunk] for *_, chunk in want_accesses] == [cycle for *_, cycle in got], \
            f"{where}: a chunk's accesses span bus cycles"
        assert len(set(cycle_of.values())) == len(cycle_of), f"{where}: chunks share a bus cycle"
        assert self.memory.words == want_memory, f"{where}: the memory differs from the reference"
        return error

    def random_address(self, words):
        return BASE + 4 * self.rng.randrange(WINDOW // 4 - words + 1)

    async def finish(self):
        """No more answers than requests: a done per copy."""
        await ClockCycles(self.clk, 20)
        assert len(self.done.items) == self.requests, (len(self.done.items), self.requests)
        assert self.req.gaps and self.done.stalls, (self.req.gaps, self.done.stalls)


async def random_copies(dut, seed, **target):
    tb = MemoryCopierTB(dut, seed, **target)
    await tb.reset()
    lengths = LENGTHS + [tb.rng.randint(0, 4 * CHUNK) for _ in range(16)] + [tb.rng.randint(0, 300)
                                                                            for _ in range(4)]
    tb.rng.shuffle(lengths)
    for words in lengths:
        assert await tb.copy(tb.random_address(words), tb.random_address(words), words) == CopyError.NONE
    await tb.finish()
    return tb


@cocotb.test()
async def copies_from_a_bursting_target(dut):
    """LiteX's SRAM with bursting: every incrementing access's next word answered in the cycle after."""
    tb = await random_copies(dut, seed=1, burst=1.0, max_wait=2)
    assert tb.memory.bursts > PAGE, tb.memory.bursts


@cocotb.test()
async def copies_from_a_classic_target(dut):
    """A target that answers every access singly, after random waits."""
    tb = await random_copies(dut, seed=2, burst=0.0, max_wait=3)
    assert tb.memory.bursts == 0


@cocotb.test()
async def copies_from_a_target_that_bursts_now_and_then(dut):
    """Bursts that the target cuts short at random (the next access then answered classically)."""
    tb = await random_copies(dut, seed=3, burst=0.5, max_wait=2)
    assert tb.memory.bursts > 0


async def refused_copies(dut, seed, side):
    """Copies into whose ``side`` (READ: the words it reads, WRITE: those it writes) an address range
    answering err reaches: at the first word, a chunk's last or first, a middle word; each followed by
    the same copy once the range answers again.  Source and destination lie in the window's two halves,
    apart, so the range reaches one side only."""
    tb = MemoryCopierTB(dut, seed, burst=0.5, max_wait=2)
    await tb.reset()
    half = WINDOW // 2
    for words in (1, CHUNK, 4 * CHUNK, 100):
        for offset in (0, CHUNK - 1, CHUNK, CHUNK + 1, 3 * CHUNK - 1, 5):
            if offset >= words:
                continue
            src = BASE + 4 * tb.rng.randrange(half // 4 - words - 3)
            dst = BASE + half + 4 * tb.rng.randrange(half // 4 - words - 3)
            hit = (src if side == CopyError.READ else dst) // 4 + offset
            tb.memory.error_at.update(range(hit, hit + tb.rng.randint(1, 3)))
            assert await tb.copy(src, dst, words) == side
            tb.memory.error_at.clear()
            assert await tb.copy(src, dst, words) == CopyError.NONE
    await tb.finish()


@cocotb.test()
async def a_refused_read_ends_the_copy(dut):
    await refused_copies(dut, seed=4, side=CopyError.READ)


@cocotb.test()
async def a_refused_write_ends_the_copy(dut):
    await refused_copies(dut, seed=5, side=CopyError.WRITE)


@cocotb.test()
async def a_page_moves_at_close_to_a_word_a_cycle_each_way(dut):
    """A 4 KiB page from a target that bursts and never waits: under 2.5 cycles a word (every word crosses
    the bus twice, so 2 is the floor; a read then a write per word takes about 6).  From a target that
    does not burst, every access takes two cycles: at least 4 a word."""
    tb = MemoryCopierTB(dut, seed=6, idle=0.0, backpressure=0.0, max_wait=0)
    await tb.reset()
    for burst, src, dst in ((1.0, BASE, BASE + 4 * PAGE), (0.0, BASE + 4 * PAGE, BASE + 8 * PAGE)):
        tb.memory.burst, tb.memory.bursts = burst, 0
        start = cocotb.utils.get_sim_time("ns")
        assert await tb.copy(src, dst, PAGE) == CopyError.NONE
        cycles = (cocotb.utils.get_sim_time("ns") - start) / 10
        dut._log.info(f"{'bursting' if burst else 'classic'} target: {PAGE} words in {cycles:.0f} cycles, "
                      f"{cycles / PAGE:.3f} a word")
        if burst:
            assert cycles < 2.5 * PAGE, cycles
            assert tb.memory.bursts == 2 * (PAGE - PAGE // CHUNK), tb.memory.bursts
        else:
            assert cycles >= 4 * PAGE, cycles
            assert tb.memory.bursts == 0, tb.memory.bursts
        assert tb.memory.read_bytes(dst, 4 * PAGE) == tb.memory.read_bytes(src, 4 * PAGE)
