"""rtl/ftl/nandport.py in amaranth.sim: three requesters share a fake
controller that completes out of order; each gets exactly its own
completions back with its own tags, nobody starves, and the mux counts the
reads, programs and erases it sent."""

import random

from amaranth.sim import Simulator

from atomflash import spec
from rtl.ftl.nandport import NandPortMux

N, M = 3, 20


class PortTB:
    def __init__(self, seed=1):
        self.dut = NandPortMux(N)
        self.rng = random.Random(seed)
        self.sent = {i: [] for i in range(N)}     # (tag, block)
        self.got = {i: [] for i in range(N)}      # (tag, result)
        self.seen_tags = []                       # tags as the controller saw them
        self.ops = {op: 0 for op in (spec.NandOp.READ, spec.NandOp.PROGRAM, spec.NandOp.ERASE)}
        self.counted = {}
        self.sim = Simulator(self.dut)
        self.sim.add_clock(1e-8)
        self.sim.add_testbench(self.controller, background=True)
        self.sim.add_testbench(self.counters, background=True)
        for i in range(N):
            self.sim.add_testbench(self.requester(i))
            self.sim.add_testbench(self.receiver(i), background=True)

    async def controller(self, ctx):
        d, c = self.dut.desc, self.dut.cpl
        pending = []
        while True:
            ctx.set(d.ready, self.rng.random() < 0.6)
            if pending and not ctx.get(c.valid) and self.rng.random() < 0.5:
                tag, block = pending.pop(self.rng.randrange(len(pending)))   # out of order
                ctx.set(c.payload, {"tag": tag, "result": block & 0x7F})
                ctx.set(c.valid, 1)
            # values as they were at the clock edge (other testbenches may change them after it)
            _, _, dv, dr, p, cv, cr = await ctx.tick().sample(d.valid, d.ready, d.payload, c.valid, c.ready)
            if dv and dr:
                pending.append((p.tag, p.block))
                self.seen_tags.append(p.tag)
            if cv and cr:
                ctx.set(c.valid, 0)

    def requester(self, i):
        async def run(ctx):
            src = self.dut.desc_in[i]
            rng = random.Random(100 + i)
            for _ in range(M):
                tag, block = rng.randrange(1 << 14), rng.randrange(1 << 20)
                self.sent[i].append((tag, block))
                op = rng.choice([spec.NandOp.READ, spec.NandOp.PROGRAM, spec.NandOp.ERASE])
                self.ops[op] += 1
                ctx.set(src.payload, {"opcode": op, "tag": tag, "block": block})
                ctx.set(src.valid, 1)
                await ctx.tick().until(src.ready)
                ctx.set(src.valid, 0)
        return run

    async def counters(self, ctx):
        while True:
            await ctx.tick()
            self.counted = {spec.NandOp.READ: ctx.get(self.dut.reads), spec.NandOp.PROGRAM: ctx.get(self.dut.programs),
                            spec.NandOp.ERASE: ctx.get(self.dut.erases)}

    def receiver(self, i):
        async def run(ctx):
            dst = self.dut.cpl_out[i]
            ctx.set(dst.ready, 1)
            while True:
                _, _, valid, p = await ctx.tick().sample(dst.valid, dst.payload)
                if valid:
                    self.got[i].append((p.tag, p.result))
        return run


def test_each_requester_gets_its_own_completions():
    tb = PortTB()
    tb.sim.run_until(1e-8 * 5000)
    for i in range(N):
        want = sorted((tag, block & 0x7F) for tag, block in tb.sent[i])
        assert sorted(tb.got[i]) == want, f"requester {i}"
    assert len(tb.seen_tags) == N * M
    assert {t >> 14 for t in tb.seen_tags} == set(range(N))   # the requester rides in the tag's top bits
    assert tb.counted == tb.ops and min(tb.ops.values()) > 0    # reads, programs, erases sent, whoever sent them
