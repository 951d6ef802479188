"""cocotb tests for the host queue front-end.

``HostQueuesTB`` owns the DUT, its clock and the parts around it: the host (register writes through a
:class:`~sim.harness.wishbone.WishboneInitiator`, queue memory, doorbells, the phase-tag protocol), the
memory the DMA port reaches (:class:`~sim.harness.wishbone.WishboneMemory`: random wait states,
injectable bus errors), and a stand-in FTL core that takes commands through a
:class:`~sim.harness.streams.SettledStreamSink` (seeded backpressure) and answers them, out of order,
through a :class:`~sim.harness.streams.StreamSource` (seeded idle gaps).  The reference is what the
host wrote (every command, per queue, in order); the scoreboard: commands arrive byte-exact and in
order, completions land in the host's CQ as the core gave them.  The core's streams go through
``command_layout``/``completion_layout``, queue entries through the spec's CMD and CPL records.
"""

import os
import random

import cocotb
from cocotb.clock import Clock
from cocotb.result import SimTimeoutError
from cocotb.triggers import ClockCycles, with_timeout

from atomflash import spec
from rtl.host.queues import command_layout, completion_layout
from sim.harness.layouts import pack, unpack
from sim.harness.streams import SettledStreamSink, StreamSource
from sim.harness.wishbone import WishboneInitiator, WishboneMemory

REGS = spec.HOST_REGS
SQ_BASE = 0x1000_0000
CQ_BASE = 0x2000_0000
QUEUE_STRIDE = 0x1_0000
NQ = int(os.environ.get("AF_QUEUE_PAIRS", "4"))  # queue pairs the DUT was elaborated with
CMD_LAYOUT, CPL_LAYOUT = command_layout(NQ), completion_layout(NQ)


class HostQueuesTB:
    def __init__(self, dut, seed, *, idle=0.3, backpressure=0.3):
        self.dut, self.clk = dut, dut.clk
        self.rng = random.Random(seed)
        self.memory = WishboneMemory(dut, "dma", dut.clk, max_wait=2, seed=seed)
        self.mem = self.memory.words      # word address -> 32-bit word
        self.bus_error_at = self.memory.error_at
        self.regs = WishboneInitiator(dut, "bus", dut.clk)
        self.cmd = self.cpl = None
        self.idle, self.backpressure, self.seed = idle, backpressure, seed
        self.host_tail, self.host_head, self.host_phase, self.sizes = {}, {}, {}, {}
        cocotb.start_soon(Clock(dut.clk, 10, "ns").start())

    # -- plumbing ------------------------------------------------------------
    async def reset(self):
        d = self.dut
        d.rst.value = 1
        d.hold.value = 0
        await ClockCycles(d.clk, 3)
        d.rst.value = 0
        self.memory.start()
        self.cmd = SettledStreamSink(d, "cmd", self.clk, backpressure=self.backpressure, seed=self.seed + 1)
        self.cpl = StreamSource(d, "cpl", self.clk, idle=self.idle, seed=self.seed + 2)

    @property
    def commands(self):
        """(sqid, CMD record) of every command the core took, in order."""
        out = []
        for v in self.cmd.items:
            f = unpack(CMD_LAYOUT, v, raw=("cmd",))
            out.append((f["sqid"], spec.CMD.unpack(f["cmd"].to_bytes(spec.CMD.size, "little"))))
        return out

    async def reg_write(self, name, value, index=0):
        await self.regs.write(REGS[name].address(index), value)

    async def reg_read(self, name, index=0):
        return await self.regs.read(REGS[name].address(index))

    # -- host side -----------------------------------------------------------
    async def setup_queue(self, q, size):
        await self.reg_write("sq_base", SQ_BASE + q * QUEUE_STRIDE, q)
        await self.reg_write("cq_base", CQ_BASE + q * QUEUE_STRIDE, q)
        await self.reg_write("size", size, q)
        self.host_tail[q], self.host_head[q], self.host_phase[q], self.sizes[q] = 0, 0, 1, size

    def put_command(self, q, fields):
        raw = spec.CMD.pack(fields)
        base = (SQ_BASE + q * QUEUE_STRIDE + self.host_tail[q] * spec.CMD.size) // 4
        for i in range(spec.CMD.size // 4):
            self.mem[base + i] = int.from_bytes(raw[4 * i:4 * i + 4], "little")
        self.host_tail[q] = (self.host_tail[q] + 1) % self.sizes[q]

    async def ring(self, q):
        await self.reg_write("sq_tail", self.host_tail[q], q)

    def cq_entry(self, q, slot):
        base = (CQ_BASE + q * QUEUE_STRIDE + slot * spec.CPL.size) // 4
        raw = b"".join(self.mem.get(base + i, 0).to_bytes(4, "little") for i in range(4))
        return spec.CPL.unpack(raw)

    def poll_completions(self, q):
        """Consume every new completion of queue q (phase-tag protocol)."""
        got = []
        while True:
            cpl = self.cq_entry(q, self.host_head[q])
            if spec.CPL.decompose("sf", cpl.sf).phase != self.host_phase[q]:
                return got
            got.append(cpl)
            self.host_head[q] = (self.host_head[q] + 1) % self.sizes[q]
            if self.host_head[q] == 0:
                self.host_phase[q] ^= 1

    # -- core side -----------------------------------------------------------
    async def complete(self, sqid, cid, status, result):
        await self.cpl.send(pack(CPL_LAYOUT, sqid=sqid, cid=cid, status=int(status), result=result))

    async def wait_commands(self, count, limit=20000):
        try:
            await with_timeout(self.cmd.wait_for(count), 10 * limit, "ns")
        except SimTimeoutError:
            raise AssertionError(f"only {len(self.cmd.items)} of {count} commands arrived") from None


def random_command(rng, cid):
    fields = {f.name: rng.getrandbits(f.width) for f in spec.CMD.fields}
    fields["cid"] = cid
    return fields


@cocotb.test()
async def registers_identify_and_reject_bad_writes(dut):
    tb = HostQueuesTB(dut, seed=1)
    await tb.reset()
    assert await tb.reg_read("id") == spec.HOST_REGS_ID
    assert await tb.reg_read("version") == spec.SPEC_VERSION
    assert await tb.reg_read("queues") == NQ
    assert await tb.reg_read("max_entries") == 32
    await tb.setup_queue(0, 8)
    assert await tb.reg_read("size", 0) == 8
    for bad in (3, 64, 1):
        await tb.reg_write("size", bad, 0)
        assert await tb.reg_read("size", 0) == 8, f"size {bad} must be ignored"
    await tb.reg_write("sq_base", SQ_BASE + 4, 0)
    assert await tb.reg_read("sq_base", 0) == SQ_BASE
    status = await tb.reg_read("status")
    assert status & REGS["status"].bits[3].mask  # config_error
    await tb.reg_write("sq_tail", 8, 0)
    assert await tb.reg_read("sq_tail", 0) == 0
    assert await tb.reg_read("status") & REGS["status"].bits[2].mask  # doorbell_error
    assert await tb.reg_read("int_status") == 0b10
    await tb.reg_write("int_status", 0b10)
    assert await tb.reg_read("int_status") == 0
    await tb.reg_write("ctrl", 0)
    assert await tb.reg_read("status") == 0  # disabling clears sticky errors


@cocotb.test()
async def commands_fetched_in_order_and_completions_posted(dut):
    tb = HostQueuesTB(dut, seed=2)
    await tb.reset()
    await tb.setup_queue(0, 4)  # small: wraps several times
    await tb.reg_write("int_enable", 0b01)
    await tb.reg_write("ctrl", 1)
    sent, done = [], []
    for batch in range(5):
        for _ in range(3):
            cmd = random_command(tb.rng, cid=len(sent))
            sent.append(cmd)
            tb.put_command(0, cmd)
        await tb.ring(0)
        await tb.wait_commands(len(sent))
        got = tb.commands[len(sent) - 3:]
        assert [c for _, c in got] == sent[-3:], "commands must arrive byte-exact and in order"
        order = list(got)
        tb.rng.shuffle(order)  # the core finishes out of order
        for sqid, cmd in order:
            await tb.complete(sqid, cmd.cid, spec.Status.INVALID_TOKEN if cmd.cid % 2 else 0, cmd.token)
        await ClockCycles(dut.clk, 20)
        assert dut.irq.value == 1
        cpls = tb.poll_completions(0)
        assert len(cpls) == 3
        for cpl, (_, cmd) in zip(cpls, order):
            sf = spec.CPL.decompose("sf", cpl.sf)
            assert cpl.cid == cmd.cid and cpl.result == cmd.token and cpl.sqid == 0
            assert sf.status == (spec.Status.INVALID_TOKEN if cmd.cid % 2 else 0)
        done += cpls
        await tb.reg_write("cq_head", tb.host_head[0], 0)
        await tb.reg_write("int_status", 0b01)
        assert dut.irq.value == 0
    assert await tb.reg_read("sq_head", 0) == len(sent) % 4
    assert len(done) == len(sent)
    # the run exercised them: commands held by the core, completions after idle gaps
    assert tb.cmd.stalls and tb.cpl.gaps, (tb.cmd.stalls, tb.cpl.gaps)


@cocotb.test()
async def queues_are_served_round_robin(dut):
    tb = HostQueuesTB(dut, seed=3)
    await tb.reset()
    for q in range(NQ):
        await tb.setup_queue(q, 16)
    sent = {q: [] for q in range(NQ)}
    for q in range(NQ):
        for i in range(5):
            cmd = random_command(tb.rng, cid=q * 100 + i)
            sent[q].append(cmd)
            tb.put_command(q, cmd)
        await tb.ring(q)
    await tb.reg_write("ctrl", 1)
    await tb.wait_commands(5 * NQ)
    order = [sqid for sqid, _ in tb.commands]
    assert order == list(range(NQ)) * 5, f"not round-robin: {order}"
    for q in range(NQ):
        assert [c for s, c in tb.commands if s == q] == sent[q]
    for sqid, cmd in tb.commands:
        await tb.complete(sqid, cmd.cid, 0, 0)
    await ClockCycles(dut.clk, 30)
    for q in range(NQ):
        cpls = tb.poll_completions(q)
        assert [c.cid for c in cpls] == [c["cid"] for c in sent[q]]
        assert all(c.sqid == q for c in cpls)
    assert tb.cmd.stalls and tb.cpl.gaps, (tb.cmd.stalls, tb.cpl.gaps)


@cocotb.test()
async def hold_fetches_from_the_last_pair_only(dut):
    """With ``hold`` up (the firmware's GC holding the host) only the last pair (the firmware's) is
    fetched; the others' commands wait in their SQs and come, in order, once it drops."""
    tb = HostQueuesTB(dut, seed=7)
    await tb.reset()
    dut.hold.value = 1
    for q in range(NQ):
        await tb.setup_queue(q, 16)
    sent = {q: [random_command(tb.rng, cid=q * 100 + i) for i in range(3)] for q in range(NQ)}
    for q in range(NQ):
        for cmd in sent[q]:
            tb.put_command(q, cmd)
        await tb.ring(q)
    await tb.reg_write("ctrl", 1)
    await tb.wait_commands(3)
    await ClockCycles(dut.clk, 200)
    assert tb.commands == [(NQ - 1, c) for c in sent[NQ - 1]], f"fetched while held: {tb.commands}"
    for q in range(NQ - 1):
        assert await tb.reg_read("sq_head", q) == 0
    dut.hold.value = 0
    await tb.wait_commands(3 * NQ)
    for q in range(NQ):
        assert [c for s, c in tb.commands if s == q] == sent[q]


@cocotb.test()
async def full_completion_queue_holds_back_completions(dut):
    tb = HostQueuesTB(dut, seed=4)
    await tb.reset()
    await tb.setup_queue(1, 4)  # a CQ of 4 entries holds 3 completions
    await tb.reg_write("ctrl", 1)
    for i in range(3):
        tb.put_command(1, random_command(tb.rng, cid=i))
    await tb.ring(1)
    await tb.wait_commands(3)
    for sqid, cmd in tb.commands[:3]:
        await tb.complete(sqid, cmd.cid, 0, 0)
    tb.put_command(1, random_command(tb.rng, cid=3))
    await tb.ring(1)
    await tb.wait_commands(4)
    fourth = cocotb.start_soon(tb.complete(1, 3, 0, 0))
    await ClockCycles(dut.clk, 50)
    assert not fourth.done(), "a completion was posted into a full CQ"
    assert [c.cid for c in tb.poll_completions(1)] == [0, 1, 2]
    await tb.reg_write("cq_head", tb.host_head[1], 1)
    await ClockCycles(dut.clk, 20)
    assert fourth.done()
    assert [c.cid for c in tb.poll_completions(1)] == [3]


@cocotb.test()
async def bus_error_halts_fetching(dut):
    tb = HostQueuesTB(dut, seed=5)
    await tb.reset()
    await tb.setup_queue(0, 8)
    await tb.reg_write("int_enable", 0b10)
    await tb.reg_write("ctrl", 1)
    tb.put_command(0, random_command(tb.rng, cid=1))
    tb.put_command(0, random_command(tb.rng, cid=2))
    tb.bus_error_at.add((SQ_BASE + spec.CMD.size) // 4 + 5)  # inside the second entry
    await tb.ring(0)
    await ClockCycles(dut.clk, 200)
    assert [c.cid for _, c in tb.commands] == [1]
    status = await tb.reg_read("status")
    assert status & REGS["status"].bits[1].mask and not status & 1
    assert dut.irq.value == 1
    tb.bus_error_at.clear()
    await tb.reg_write("ctrl", 0)
    await tb.reg_write("ctrl", 1)
    await tb.wait_commands(2)
    assert [c.cid for _, c in tb.commands] == [1, 2]
