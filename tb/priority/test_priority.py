"""rtl.lib.priority.lowest_set in amaranth.sim: random vectors of several widths (powers of two and
not) against Python's lowest set bit."""

import random

import pytest
from amaranth import Module, Signal
from amaranth.sim import Simulator

from rtl.lib.priority import lowest_set


@pytest.mark.parametrize("n", [1, 2, 3, 5, 8, 13, 64])
def test_the_lowest_set_bit(n):
    m = Module()
    bits = Signal(n)
    any_, index = lowest_set(m, [bits[i] for i in range(n)])
    sim = Simulator(m)

    async def bench(ctx):
        rng = random.Random(n)
        for v in [0, 1 << (n - 1), (1 << n) - 1] + [rng.getrandbits(n) & rng.getrandbits(n) for _ in range(300)]:
            ctx.set(bits, v)
            assert ctx.get(any_) == (v != 0)
            if v:
                assert ctx.get(index) == (v & -v).bit_length() - 1, (n, bin(v))

    sim.add_testbench(bench)
    sim.run()
