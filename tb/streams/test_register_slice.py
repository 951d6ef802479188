"""rtl/lib/streams.py's RegisterSlice in amaranth.sim: a TB class sends random words with random idle
cycles into a sink with random backpressure and checks that every word comes out once, in order;
that an offered word does not change until taken; that the slice adds one cycle and no more
(a sink always ready sees a word the cycle after it went in); and that nothing combinational crosses
it (the input's ready does not follow the output's ready within a cycle)."""

import random

import pytest
from amaranth.sim import Simulator

from rtl.lib.streams import RegisterSlice


class RegisterSliceTB:
    def __init__(self, seed: int, idle: float, backpressure: float, words: int = 300):
        self.dut = RegisterSlice(16)
        self.rng, self.idle, self.backpressure, self.words = random.Random(seed), idle, backpressure, words
        self.sent, self.got, self.cycles = [], [], 0
        self.sim = Simulator(self.dut)
        self.sim.add_clock(1e-8)
        self.sim.add_testbench(self.source)
        self.sim.add_testbench(self.sink)

    async def source(self, ctx):
        i = self.dut.input
        for n in range(self.words):
            while self.rng.random() < self.idle:
                ctx.set(i.valid, 0)
                await ctx.tick()
            word = self.rng.randrange(1 << 16)
            ctx.set(i.payload, word)
            ctx.set(i.valid, 1)
            await ctx.tick().until(i.ready)
            self.sent.append(word)
        ctx.set(i.valid, 0)

    async def sink(self, ctx):
        o = self.dut.output
        offered = None
        while len(self.got) < self.words:
            ready = self.rng.random() >= self.backpressure
            ctx.set(o.ready, ready)
            ready_in_before = ctx.get(self.dut.input.ready)
            ctx.set(o.ready, not ready)
            assert ctx.get(self.dut.input.ready) == ready_in_before, "input ready follows output ready"
            ctx.set(o.ready, ready)
            if ctx.get(o.valid):
                word = ctx.get(o.payload)
                if offered is not None:
                    assert word == offered, "an offered word changed before it was taken"
                offered = word
                if ready:
                    self.got.append(word)
                    offered = None
            await ctx.tick()
            self.cycles += 1
            assert self.cycles < 50 * self.words, "the slice stalled"

    def run(self):
        self.sim.run()
        assert self.got == self.sent


@pytest.mark.parametrize("seed", range(3))
@pytest.mark.parametrize("idle,backpressure", [(0.0, 0.0), (0.3, 0.0), (0.0, 0.5), (0.4, 0.6)])
def test_every_word_once_in_order_under_idle_and_backpressure(seed, idle, backpressure):
    RegisterSliceTB(seed, idle, backpressure).run()


def test_full_rate_with_one_cycle_of_latency():
    """Words offered every cycle to a sink always ready: one word per cycle, each a cycle late."""
    dut = RegisterSlice(8)
    seen = []

    async def bench(ctx):
        ctx.set(dut.output.ready, 1)
        for n in range(20):
            ctx.set(dut.input.payload, n)
            ctx.set(dut.input.valid, 1)
            assert ctx.get(dut.input.ready)
            await ctx.tick()
            assert ctx.get(dut.output.valid)
            seen.append(ctx.get(dut.output.payload))

    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_testbench(bench)
    sim.run()
    assert seen == list(range(20))
