"""rtl/ftl/floorscan.py in amaranth.sim: a TB class stands in for the executor's first-vseq memory
(a synchronous read port) and its held slots, changes both at random, waits two passes as the
firmware does, and checks the floor against the smallest held first vseq."""

import random

import pytest
from amaranth.sim import Simulator

from rtl.ftl.floorscan import NONE, FloorScanner


class FloorScannerTB:
    def __init__(self, slots: int, seed: int, rounds: int = 40):
        self.dut = FloorScanner(slots)
        self.slots, self.rng, self.rounds = slots, random.Random(seed), rounds
        self.first = [0] * slots
        self.hold = 0
        self.checked = {"none": 0, "some": 0}
        self.sim = Simulator(self.dut)
        self.sim.add_clock(1e-8)
        self.sim.add_process(self.memory)
        self.sim.add_testbench(self.run)

    async def memory(self, ctx):
        """The read port: ``data`` is the word at the address of the cycle before."""
        async for _, _, addr in ctx.tick().sample(self.dut.addr):
            ctx.set(self.dut.data, self.first[addr])

    async def run(self, ctx):
        d, rng = self.dut, self.rng
        assert ctx.get(d.floor) == NONE
        for _ in range(self.rounds):
            for h in range(self.slots):
                if rng.random() < 0.5:
                    self.first[h] = rng.randrange(1 << 64) if rng.random() < 0.3 else rng.randrange(1000)
            self.hold = 0 if rng.random() < 0.2 else rng.randrange(1 << self.slots)
            ctx.set(d.hold, self.hold)
            start = ctx.get(d.passes)
            while ctx.get(d.passes) < start + 2:
                await ctx.tick()
            held = [self.first[h] for h in range(self.slots) if self.hold >> h & 1]
            assert ctx.get(d.floor) == (min(held) if held else NONE), (self.first, bin(self.hold))
            self.checked["some" if held else "none"] += 1


@pytest.mark.parametrize("slots", [1, 3, 8])
def test_the_floor_is_the_oldest_held_first_vseq_after_two_passes(slots):
    tb = FloorScannerTB(slots, seed=slots)
    tb.sim.run()
    assert tb.checked["some"] >= 10 and tb.checked["none"] >= 1, tb.checked
