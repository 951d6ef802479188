"""rtl.lib.wishbone.RegisteredTarget in amaranth.sim: a TB class plays an initiator (random reads and
writes, back to back or after idle cycles, sometimes giving a cycle up before its answer) against a
memory target with random wait states behind the stage.  Every access the initiator completes reaches
the target exactly once with its address, data and lanes, every read returns the memory's word, no
path is combinational (the target's request does not follow the initiator's in the same cycle, nor
the initiator's answer the target's), and an abandoned access is finished by the target and dropped."""

import random

import pytest
from amaranth.sim import Simulator

from rtl.lib.wishbone import RegisteredTarget


class RegisteredTargetTB:
    def __init__(self, seed: int, accesses: int = 200, give_up: float = 0.0):
        self.dut = RegisteredTarget(addr_width=8)
        self.rng, self.accesses, self.give_up = random.Random(seed), accesses, give_up
        self.mem = {}
        self.target_log = []           # (we, adr, dat_w, sel) as the target saw them
        self.done = []                 # (we, adr, dat_w, sel) the initiator saw acked
        self.abandoned = 0
        self.sim = Simulator(self.dut)
        self.sim.add_clock(1e-8)
        self.sim.add_testbench(self.memory, background=True)
        self.sim.add_testbench(self.initiator)

    async def memory(self, ctx):
        t = self.dut.target
        while True:
            await ctx.tick()
            if ctx.get(t.cyc) and ctx.get(t.stb) and not ctx.get(t.ack):
                for _ in range(self.rng.randrange(3)):
                    await ctx.tick()
                adr, we, sel = ctx.get(t.adr), ctx.get(t.we), ctx.get(t.sel)
                if we:
                    self.mem[adr] = ctx.get(t.dat_w)
                ctx.set(t.dat_r, self.mem.get(adr, 0))
                ctx.set(t.ack, 1)
                self.target_log.append((we, adr, ctx.get(t.dat_w) if we else None, sel))
                await ctx.tick()
                ctx.set(t.ack, 0)

    async def initiator(self, ctx):
        bus, t, rng = self.dut.bus, self.dut.target, self.rng
        shadow = {}
        for _ in range(self.accesses):
            for _ in range(rng.choice([0, 0, 1, 3])):
                await ctx.tick()
            we, adr, value, sel = rng.randrange(2), rng.randrange(16), rng.getrandbits(32), rng.randrange(1, 16)
            for name, v in (("cyc", 1), ("stb", 1), ("we", we), ("adr", adr), ("dat_w", value), ("sel", sel)):
                ctx.set(getattr(bus, name), v)
            if self.give_up and rng.random() < self.give_up:
                await ctx.tick()
                ctx.set(bus.cyc, 0)
                ctx.set(bus.stb, 0)
                self.abandoned += 1
                # the target finishes it (a write lands); nothing is answered to a cycle no longer there
                for _ in range(8):
                    assert not ctx.get(bus.ack)
                    await ctx.tick()
                if we:
                    shadow[adr] = value
                continue
            cycles = 0
            while not ctx.get(bus.ack):
                before = (ctx.get(t.cyc), ctx.get(t.adr))
                ctx.set(bus.adr, adr ^ 1)                 # the target's request comes from registers
                assert (ctx.get(t.cyc), ctx.get(t.adr)) == before
                ctx.set(bus.adr, adr)
                await ctx.tick()
                cycles += 1
                assert cycles < 20, "no answer"
            assert cycles >= 2, "answered through a combinational path"
            if not we:
                assert ctx.get(bus.dat_r) == shadow.get(adr, 0)
            else:
                shadow[adr] = value
            self.done.append((we, adr, value if we else None, sel))
            await ctx.tick()
            ctx.set(bus.stb, 0)
            ctx.set(bus.cyc, 0)

    def run(self):
        self.sim.run()
        if not self.give_up:
            assert self.target_log == self.done
        else:
            assert len(self.target_log) == len(self.done) + self.abandoned
            assert self.abandoned


@pytest.mark.parametrize("seed", range(4))
def test_every_access_reaches_the_target_once_through_registers(seed):
    RegisteredTargetTB(seed).run()


@pytest.mark.parametrize("seed", range(2))
def test_an_abandoned_access_finishes_at_the_target_and_is_not_answered(seed):
    RegisteredTargetTB(seed, give_up=0.2).run()
