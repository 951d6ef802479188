"""The NVMe controller's firmware window (``rtl/nvme/fwwindow.py``) register by register: every register
of ``spec.NVME_FW_REGS`` reached at its offset, each action doing what the map says and no more."""

import random

from amaranth.sim import Simulator

from atomflash import spec
from rtl.nvme.fwwindow import NvmeFirmwareWindow
from rtl.nvme.queues import QueueOp
from tb.common.simbus import wb_access

REGS = spec.NVME_FW_REGS


def reg(name, i=0):
    return REGS[name].offset + i * REGS[name].stride


def bits(name, **fields):
    return REGS[name].compose(**fields)


def test_every_register_and_action():
    dut = NvmeFirmwareWindow(queues=2)
    rng = random.Random(3)
    sqe = rng.getrandbits(512)

    async def bench(ctx):
        async def rd(name, i=0):
            return await wb_access(ctx, dut.bus, reg(name, i))

        async def wr(name, value):
            await wb_access(ctx, dut.bus, reg(name), value)

        assert await rd("id") == spec.NVME_FW_REGS_ID
        # CC: a host write is news until acknowledged; CC/AQA/ASQ/ACQ read through
        ctx.set(dut.cc.as_value(), 0x0046_0001)
        ctx.set(dut.aqa.as_value(), 0x001F_001F)
        ctx.set(dut.asq, 0x1_2345_6000)
        ctx.set(dut.acq, 0x9_8765_4000)
        ctx.set(dut.cc_written, 1)
        await ctx.tick()
        ctx.set(dut.cc_written, 0)
        st = REGS["status"].decompose(await rd("status"))
        assert st.cc_changed and ctx.get(dut.irq)
        assert [await rd(n) for n in ("cc", "aqa", "asq_lo", "asq_hi", "acq_lo", "acq_hi")] == \
            [0x0046_0001, 0x001F_001F, 0x2345_6000, 1, 0x8765_4000, 9]
        await wr("ctrl", bits("ctrl", ack_cc=1))
        assert not REGS["status"].decompose(await rd("status")).cc_changed and not ctx.get(dut.irq)
        # CSTS: RDY and SHST as written; CFS also from fatal
        await wr("csts", bits("csts", rdy=1, shst=2))
        assert (ctx.get(dut.rdy), ctx.get(dut.shst), ctx.get(dut.cfs)) == (1, 2, 0)
        ctx.set(dut.fatal, 1)
        await ctx.tick()
        assert ctx.get(dut.cfs) and REGS["status"].decompose(await rd("status")).fatal
        ctx.set(dut.fatal, 0)
        # an admin command waits in admin_sqe until popped; nothing more is taken meanwhile
        ctx.set(dut.admin.payload.sqe.as_value(), sqe)
        ctx.set(dut.admin.valid, 1)
        await ctx.tick()
        ctx.set(dut.admin.valid, 0)
        assert not ctx.get(dut.admin.ready)
        assert [await rd("admin_sqe", i) for i in range(16)] == [sqe >> 32 * i & 0xFFFF_FFFF for i in range(16)]
        await wr("ctrl", bits("ctrl", pop_admin=1))
        assert ctx.get(dut.admin.ready)
        # a completion: posted once, as written
        await wr("cpl_result_lo", 0xAABB_CCDD)
        await wr("cpl_result_hi", 0x1122_3344)
        await wr("cpl_status", bits("cpl_status", cid=0x1234, sc=0x81, sct=1, dnr=1))
        assert not ctx.get(dut.admin_completion.valid)
        await wr("ctrl", bits("ctrl", post=1))
        assert ctx.get(dut.admin_completion.valid)
        p = dut.admin_completion.payload
        assert (ctx.get(p.sqid), ctx.get(p.cid), ctx.get(p.sc), ctx.get(p.sct), ctx.get(p.dnr), ctx.get(p.result)) == \
            (0, 0x1234, 0x81, 1, 1, 0x1122_3344_AABB_CCDD)
        assert REGS["status"].decompose(await rd("status")).post_busy
        ctx.set(dut.admin_completion.ready, 1)
        await ctx.tick()
        ctx.set(dut.admin_completion.ready, 0)
        assert not ctx.get(dut.admin_completion.valid)
        # a queue operation: offered once, busy until done
        await wr("queue_op", bits("queue_op", op=QueueOp.CREATE_CQ, ien=1, qid=2, cqid=0, iv=2))
        await wr("queue_base_lo", 0x5000)
        await wr("queue_base_hi", 7)
        await wr("queue_size", 63)
        await wr("ctrl", bits("ctrl", config=1))
        c = dut.config.payload
        assert ctx.get(dut.config.valid)
        assert (ctx.get(c.op), ctx.get(c.qid), ctx.get(c.ien), ctx.get(c.iv), ctx.get(c.base), ctx.get(c.size)) == \
            (QueueOp.CREATE_CQ, 2, 1, 2, 0x7_0000_5000, 63)
        ctx.set(dut.config.ready, 1)
        await ctx.tick()
        ctx.set(dut.config.ready, 0)
        assert not ctx.get(dut.config.valid) and REGS["status"].decompose(await rd("status")).config_busy
        ctx.set(dut.config_done.valid, 1)
        await ctx.tick()
        ctx.set(dut.config_done.valid, 0)
        assert not REGS["status"].decompose(await rd("status")).config_busy
        # a transfer: offered once, busy until the mover answers, its status kept
        for name, value in (("move_prp1_lo", 0x1004), ("move_prp1_hi", 2), ("move_prp2_lo", 0x3000),
                            ("move_prp2_hi", 4), ("move_bytes", bits("move_bytes", bytes=8192, to_host=1)),
                            ("move_local", 0x4000_0000)):
            await wr(name, value)
        await wr("ctrl", bits("ctrl", move=1))
        j = dut.move.payload
        assert ctx.get(dut.move.valid)
        assert (ctx.get(j.prp1), ctx.get(j.prp2), ctx.get(j.bytes), ctx.get(j.to_host), ctx.get(j.local)) == \
            (0x2_0000_1004, 0x4_0000_3000, 8192, 1, 0x4000_0000)
        ctx.set(dut.move.ready, 1)
        await ctx.tick()
        ctx.set(dut.move.ready, 0)
        ctx.set(dut.moved.payload.status, spec.Status.DATA_TRANSFER_ERROR)
        ctx.set(dut.moved.valid, 1)
        await ctx.tick()
        ctx.set(dut.moved.valid, 0)
        assert not REGS["status"].decompose(await rd("status")).move_busy
        assert await rd("move_status") == spec.Status.DATA_TRANSFER_ERROR
        # events: read while waiting, dropped by their pop
        f = dut.failed.payload
        for name, value in (("sqid", 2), ("cid", 77), ("sct", 2), ("sc", 0x81), ("lba", 0x1_0000_0005), ("nsid", 1)):
            ctx.set(getattr(f, name), value)
        ctx.set(dut.failed.valid, 1)
        assert REGS["status"].decompose(await rd("status")).failed_valid
        assert REGS["failed_command"].decompose(await rd("failed_command")) == {"sqid": 2, "cid": 77}
        assert REGS["failed_status"].decompose(await rd("failed_status")) == {"sc": 0x81, "sct": 2}
        assert (await rd("failed_lba_lo"), await rd("failed_lba_hi"), await rd("failed_nsid")) == (5, 1, 1)
        ctx.set(dut.doorbell_error.payload.queue, 1)
        ctx.set(dut.doorbell_error.payload.cq, 1)
        ctx.set(dut.doorbell_error.payload.kind, 1)
        ctx.set(dut.doorbell_error.valid, 1)
        assert REGS["doorbell_error"].decompose(await rd("doorbell_error")) == {"queue": 1, "cq": 1, "kind": 1}
        # settings and counters
        await wr("staging_base", 0x4010_0000)
        await wr("features", bits("features", write_cache=1))
        assert (ctx.get(dut.staging_base), ctx.get(dut.write_cache)) == (0x4010_0000, 1)
        for name, value in (("read_commands", 11), ("write_commands", 22), ("blocks_read", 0x1_0000_0033),
                            ("blocks_written", 0x2_0000_0044), ("failed_lost", 5), ("busy_queues", 0b101)):
            ctx.set(getattr(dut, name), value)
        await ctx.tick()
        assert [await rd(n) for n in ("read_commands", "write_commands", "blocks_read_lo", "blocks_read_hi",
                                      "blocks_written_lo", "blocks_written_hi", "failed_lost", "busy_queues")] == \
            [11, 22, 0x33, 1, 0x44, 2, 5, 0b101]

    async def pops(ctx):
        """ctrl.pop_failed / pop_doorbell_error are one-cycle readies."""
        async for _, _, fr, dr in ctx.tick().sample(dut.failed.ready, dut.doorbell_error.ready):
            assert not (fr and dr)

    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_testbench(bench)
    sim.add_process(pops)
    sim.run()


def test_pops_drop_one_event_each():
    dut = NvmeFirmwareWindow(queues=2)
    readies = []

    async def bench(ctx):
        ctx.set(dut.failed.valid, 1)
        ctx.set(dut.doorbell_error.valid, 1)
        await wb_access(ctx, dut.bus, reg("ctrl"), bits("ctrl", pop_failed=1))
        await wb_access(ctx, dut.bus, reg("ctrl"), bits("ctrl", pop_doorbell_error=1))
        await ctx.tick().repeat(3)

    async def watch(ctx):
        async for _, _, fr, dr in ctx.tick().sample(dut.failed.ready, dut.doorbell_error.ready):
            if fr or dr:
                readies.append((fr, dr))

    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_testbench(bench)
    sim.add_process(watch)
    sim.run()
    assert readies == [(1, 0), (0, 1)]
