"""FrontEndJoin (``rtl/ftl/frontends.py``): both front ends' commands reach the core once each with the
core's ids, the stream's never while ``hold`` is up, and every completion goes back to its front end with
its own id; random valid, ready and hold."""

import random

import pytest
from amaranth.sim import Simulator

from rtl.ftl.frontends import FrontEndJoin

S, Q = 3, 2


def bound(process, *args):
    async def run(ctx):
        await process(ctx, *args)
    return run


@pytest.mark.parametrize("seed", [1, 2])
def test_commands_and_completions_find_their_front_end(seed):
    rng = random.Random(seed)
    dut = FrontEndJoin(stream_queues=S, queue_pairs=Q)
    n = 150
    queue_cmds = [(rng.randrange(Q), i) for i in range(n)]           # (sqid, cid)
    stream_cmds = [(rng.randrange(S), 1000 + i) for i in range(n)]
    arrived, to_queues, to_stream = [], [], []
    cpls = [(rng.randrange(S + Q), 5000 + i) for i in range(2 * n)]

    async def source(ctx, port, items):
        for sqid, cid in items:
            while rng.random() < 0.3:
                await ctx.tick()
            ctx.set(port.payload.sqid, sqid)
            ctx.set(port.payload.cmd.cid if hasattr(port.payload, "cmd") else port.payload.cid, cid)
            ctx.set(port.valid, 1)
            await ctx.tick().until(port.ready)
            ctx.set(port.valid, 0)

    async def core(ctx):
        async for _, _, valid, ready, sqid, cid, hold in ctx.tick().sample(
                dut.cmd.valid, dut.cmd.ready, dut.cmd.payload.sqid, dut.cmd.payload.cmd.cid, dut.hold):
            if valid and ready:
                assert not (hold and cid >= 1000), "a stream command while held"
                arrived.append((sqid, cid))
            ctx.set(dut.cmd.ready, int(rng.random() < 0.7))
            ctx.set(dut.hold, int(rng.random() < 0.2))

    async def sink(ctx, port, out):
        async for _, _, valid, ready, sqid, cid in ctx.tick().sample(
                port.valid, port.ready, port.payload.sqid, port.payload.cid):
            if valid and ready:
                out.append((sqid, cid))
            ctx.set(port.ready, int(rng.random() < 0.6))

    async def bench(ctx):
        await source(ctx, dut.cpl, cpls)
        while len(arrived) < 2 * n:
            await ctx.tick()
        await ctx.tick().repeat(4)

    sim = Simulator(dut)
    sim.add_clock(1e-8)
    for process in (bound(source, dut.queues_cmd, queue_cmds), bound(source, dut.stream_cmd, stream_cmds), core,
                    bound(sink, dut.queues_cpl, to_queues), bound(sink, dut.stream_cpl, to_stream)):
        sim.add_process(process)
    sim.add_testbench(bench)
    sim.run()
    assert [c for c in arrived if c[1] < 1000] == [(q + S, cid) for q, cid in queue_cmds]
    assert [c for c in arrived if c[1] >= 1000] == stream_cmds
    assert to_stream == [c for c in cpls if c[0] < S]
    assert to_queues == [(q - S, cid) for q, cid in cpls if q >= S]
