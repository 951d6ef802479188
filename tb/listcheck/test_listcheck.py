"""rtl/ftl/listcheck.py in amaranth.sim: a TB class stands in for the executor's list memory (a
synchronous read port), checks random lists of ranges -- single blocks as ATOMIC_WRITE's, ranges as
REMAP's, some near 2^32 -- against a reference, and counts the cycles the module docstring states."""

import random

import pytest
from amaranth.sim import Simulator

from rtl.ftl.listcheck import RangeOverlapChecker


def overlapping(ranges) -> bool:
    """Two ranges [lba, lba + nlb) share a block (the model's DUPLICATE_LBA rule)."""
    return any(a < c + d and c < a + b for i, (a, b) in enumerate(ranges) for c, d in ranges[:i])


class ListCheckTB:
    def __init__(self, entries: int, seed: int, lists: int = 60, fixed=()):
        self.dut = RangeOverlapChecker(entries)
        self.fixed = list(fixed)            # lists checked first
        self.entries, self.rng, self.lists = entries, random.Random(seed), lists
        self.ranges = [(0, 1)] * entries
        self.seen = {True: 0, False: 0}
        self.sim = Simulator(self.dut)
        self.sim.add_clock(1e-8)
        self.sim.add_process(self.memory)
        self.sim.add_testbench(self.run)

    async def memory(self, ctx):
        async for _, _, addr in ctx.tick().sample(self.dut.addr):
            lba, nlb = self.ranges[addr] if addr < self.entries else (0, 0)   # past the list: never used
            ctx.set(self.dut.lba, lba)
            ctx.set(self.dut.nlb, nlb)

    def draw(self):
        rng = self.rng
        n = rng.randrange(1, self.entries + 1)
        base = rng.choice([0, 1000, 2**32 - 40])
        if rng.random() < 0.5:          # ATOMIC_WRITE: blocks
            pool = rng.sample(range(base, base + 3 * n), n) if rng.random() < 0.5 else \
                [base + rng.randrange(2 * n) for _ in range(n)]
            return [(x % 2**32, 1) for x in pool]
        out, at = [], base
        for _ in range(n):              # REMAP: ranges, mostly apart, some touching or overlapping
            nlb = rng.randrange(1, 8)
            at += rng.choice([0, nlb, nlb + 3, -1]) if out else 0
            out.append((at % 2**32, nlb))
        rng.shuffle(out)
        return out

    async def run(self, ctx):
        d = self.dut
        for k in range(self.lists):
            ranges = self.fixed[k] if k < len(self.fixed) else self.draw()
            self.ranges[:len(ranges)] = ranges
            ctx.set(d.count, len(ranges))
            ctx.set(d.start, 1)
            await ctx.tick()
            ctx.set(d.start, 0)
            cycles = 0
            while not ctx.get(d.done):
                await ctx.tick()
                cycles += 1
            cycles += 1
            expected = overlapping(ranges)
            assert ctx.get(d.overlap) == expected, ranges
            if not expected:
                n = len(ranges)
                assert cycles == n * (n - 1) // 2 + 3 * n - 2, (n, cycles)
            self.seen[expected] += 1
            await ctx.tick()
            assert not ctx.get(d.done)


@pytest.mark.parametrize("entries", [1, 2, 9, 64])
def test_the_checker_finds_exactly_the_overlapping_lists(entries):
    tb = ListCheckTB(entries, seed=entries)
    tb.sim.run()
    assert tb.seen[False] > 0 and (entries == 1 or tb.seen[True] > 0), tb.seen


def test_a_range_that_runs_past_2_32_overlaps_only_what_it_covers():
    fixed = [[(2**32 - 2, 4), (2**32 - 1, 1)], [(2**32 - 2, 2), (0, 1)], [(0, 1), (2**32 - 1, 2)]]
    assert [overlapping(r) for r in fixed] == [True, False, False]
    tb = ListCheckTB(2, seed=0, lists=len(fixed), fixed=fixed)
    tb.sim.run()
    assert tb.seen == {True: 1, False: 2}
