"""rtl/nvme/queues.py in amaranth.sim, against a host that runs its queues by NVMe's rules.

``NvmeQueueEngineTB`` owns the engine and everything around it: host memory behind the DMA port
(:class:`sim.harness.hostdma.HostDmaModel`: seeded timing, the HostDmaSignature rules checked),
a doorbell driver (the register block's stream), a config driver (the firmware), a command sink with
random backpressure that answers each command with a completion after a random delay, out of order
across queues, and an interrupt and doorbell-error sink.  The host writes SQEs into its SQs and rings
tail doorbells (only into slots the SQHD of a completion has given back), reads its CQs by phase
tag, rings head doorbells, and now and then writes an invalid doorbell.

The reference: every SQE is fetched once, in order per queue, with the host's bytes; each CQE equals
the one built from ``spec.NVME_CQE`` for the completion the engine took (SQHD: the entries fetched
from that SQ when it was taken), in the slot after the previous one, with the phase of its pass; no
CQE is written to a slot the host has not released (a full CQ holds); an irq per CQE with the CQ's
vector; no SQ with entries waits more than a round of fetches; each invalid doorbell is reported
once, in order, with its kind; after DELETE_SQ the entries left are fetched and marked abort, after
RESET nothing more is fetched from the queues.
"""

import random
from collections import deque

import pytest
from amaranth import Module
from amaranth.lib import wiring
from amaranth.sim import Simulator

from atomflash import spec
from atomflash.hostmem import HostMemory
from rtl.nvme.queues import (CQE_BYTES, DOORBELL_INVALID_REGISTER, DOORBELL_INVALID_VALUE, SQE_BYTES,
                             NvmeQueueEngine, QueueOp)
from rtl.nvme.regs import NvmeRegisters
from sim.harness.hostdma import HostDmaModel

CQE_REC, SQE_REC = spec.NVME_CQE, spec.NVME_SQE


class NvmeQueueEngineTB:
    """The engine, its host and its neighbours; see the module docstring.

    ``queues`` I/O pairs, ``sizes`` per queue id (drawn from ``seed`` when omitted), ``shared``: even
    I/O SQs post on the CQ below them, and the last CQ has no SQ; ``commands`` submitted in bursts of
    up to ``burst``; ``refuse`` ("sq" or "cq"): run the refused-memory scenario instead.
    """

    def __init__(self, *, seed=0, queues=4, commands=240, sizes=None, shared=True, burst=6, refuse=None):
        # a generator per process: pysim's order of processes within a cycle must not change the draws
        self.rng = random.Random(seed)
        self.doorbell_rng, self.sink_rng, self.event_rng = (random.Random(seed * 10 + k) for k in range(1, 4))
        self.n = queues + 1
        self.dut = NvmeQueueEngine(queues=queues)
        self.memory = HostMemory()
        self.commands, self.burst = commands, burst
        r = self.rng
        if sizes is None:
            sizes = [r.choice([2, 3, 4, 8, 16, 32]) for _ in range(self.n)]
            sizes[1] = r.choice([2, 3])         # the shared CQ, read slowly ...
            sizes[-2] = 8                       # ... and SQ 1 on it holds enough to fill it
        # the admin pair; each I/O SQ on its own CQ, or (shared) even SQs on the CQ below them
        self.sqs, self.cqs = {}, {}
        self.idle_cq = None                  # a CQ no SQ posts on: any head it is rung to is invalid
        for q in range(self.n):
            if q == 0 or not shared or q % 2:
                self.cqs[q] = dict(size=sizes[q], ien=q != 3, iv=(q * 5 + 1) % self.n if q else 0)
        if shared and self.n > 2 and self.n % 2:
            self.idle_cq = self.n - 1
            self.cqs[self.idle_cq] = dict(size=sizes[self.idle_cq], ien=1, iv=0)
        for q in range(self.n):
            self.sqs[q] = dict(size=sizes[-1 - q] if q else sizes[0], cq=q if q == 0 or not shared or q % 2 else q - 1)
        for q, cq in self.cqs.items():
            cq.update(base=self.memory.alloc(cq["size"] * CQE_BYTES), head=0, phase=1, expected=deque(),
                      writes=0, released=0, rung=0, pending_ring=0, poll=r.choice([0.01, 0.05, 0.3, 1.0]), en=False)
        self.cqs[1]["poll"] = 0.01              # a slow reader: its CQ fills
        for q, sq in self.sqs.items():
            sq.update(base=self.memory.alloc(sq["size"] * SQE_BYTES), tail=0, known_head=0, rung=0,
                      submitted=deque(), taken=0, reads=0, skipped=0, en=False, cid=0)
        self.doorbells = deque()             # (queue, cq, value) for the driver
        self.expected_errors = deque()       # (queue, cq, kind)
        self.expected_irqs = deque()
        self.pending = []                    # completions to give: [due, sqid, cid, sct, sc, dnr, result]
        self.hold_sink = False
        self.now = 0
        self.seen = dict(full=0, sink_stalls=0, invalid=0, irqs=0, wraps=0, out_of_order=0, completions=0, aborted=0)
        self.dma = HostDmaModel(self.dut.dma, self.memory, seed=seed + 1)
        self.logged = 0                      # requests of dma.log already checked
        self.sim = Simulator(self.dut)
        self.sim.add_clock(1e-8)
        self.sim.add_process(self.dma.process)
        self.sim.add_process(self.doorbell_driver)
        self.sim.add_process(self.downstream)
        self.sim.add_process(self.events)
        self.refuse = refuse
        self.sim.add_testbench(self.run if refuse is None else self.run_refused)

    # -- what the host memory sees ---------------------------------------------------------------
    def queue_of(self, addr, queues, entry):
        for q, s in queues.items():
            if s["base"] <= addr < s["base"] + s["size"] * entry:
                return q, (addr - s["base"]) // entry
        return None, None

    def check_requests(self):
        """The queue rules for each request the host memory took since the last cycle."""
        while self.logged < len(self.dma.log):
            request = self.dma.log[self.logged]
            self.logged += 1
            self.check_request(request.write, request.addr, request.bytes)

    def check_request(self, write, addr, nbytes):
        if write:
            q, slot = self.queue_of(addr, self.cqs, CQE_BYTES)
            assert q is not None and nbytes == CQE_BYTES, f"CQE write at {addr:#x}"
            cq = self.cqs[q]
            assert slot == cq["writes"] % cq["size"], f"CQ {q}: slot {slot}, expected {cq['writes'] % cq['size']}"
            assert cq["writes"] - cq["released"] <= cq["size"] - 2, f"CQ {q} written while full"
            cq["writes"] += 1
            return
        q, slot = self.queue_of(addr, self.sqs, SQE_BYTES)
        assert q is not None and nbytes == SQE_BYTES, f"SQE read at {addr:#x}"
        sq = self.sqs[q]
        assert sq["en"], f"SQ {q} fetched while deleted"
        assert slot == sq["reads"] % sq["size"], f"SQ {q}: slot {slot}, expected {sq['reads'] % sq['size']}"
        assert sq["reads"] < sq["rung"], f"SQ {q}: fetch beyond the tail rung"
        sq["reads"] += 1
        # round robin: an SQ with entries waits at most one fetch from each other queue
        for o, other in self.sqs.items():
            if o == q or not other["en"] or other["reads"] == other["rung"]:
                other["skipped"] = 0
            else:
                other["skipped"] += 1
                assert other["skipped"] <= self.n, f"SQ {o} starved"
        sq["skipped"] = 0

    # -- the register block's doorbell stream ----------------------------------------------------------
    async def doorbell_driver(self, ctx):
        db = self.dut.doorbell
        async for _, _, valid, ready in ctx.tick().sample(db.valid, db.ready):
            if valid and ready:
                queue, is_cq, value, valid_write = self.doorbells.popleft()
                if valid_write:
                    if is_cq:
                        cq = self.cqs[queue]
                        cq["released"] += (value - cq["rung"]) % cq["size"]
                        cq["rung"] = value
                    else:
                        self.sqs[queue]["rung"] += valid_write
                ctx.set(db.valid, 0)
                continue
            if valid or not self.doorbells or self.doorbell_rng.random() < 0.3:
                continue
            queue, is_cq, value, _ = self.doorbells[0]
            ctx.set(db.payload, {"queue": queue, "cq": is_cq, "value": value})
            ctx.set(db.valid, 1)

    # -- downstream: the command sink and the completion driver ----------------------------------------
    async def downstream(self, ctx):
        d = self.dut
        cmd, cpl = d.command, d.completion
        self.offered = offered = None
        async for _, _, cv, cr, csq, sqe, abort, pv, pr in ctx.tick().sample(
                cmd.valid, cmd.ready, cmd.payload.sqid, cmd.payload.sqe.as_value(), cmd.payload.abort,
                cpl.valid, cpl.ready):
            self.now += 1
            self.check_requests()
            if pv and pr:
                due, sqid, cid, sct, sc, dnr, result = offered
                sq = self.sqs[sqid]
                buffered = int(cv and csq == sqid)
                sqhd = (sq["taken"] + buffered) % sq["size"]
                cq_id = sq["cq"]
                cq = self.cqs[cq_id]
                cqe = CQE_REC.pack(result=result, sqhd=sqhd, sqid=sqid, cid=cid,
                                   sf=CQE_REC.compose("sf", p=0, sc=sc, sct=sct, dnr=dnr))
                cq["expected"].append(cqe)
                if cq["ien"]:
                    self.expected_irqs.append(cq["iv"])
                self.seen["completions"] += 1
                self.offered = offered = None
                ctx.set(cpl.valid, 0)
            elif pv:
                sq = self.sqs[offered[1]]
                cq = self.cqs[sq["cq"]]
                self.seen["full"] += cq["writes"] - cq["released"] == cq["size"] - 1
            if cv and cr:
                sq = self.sqs[csq]
                want = sq["submitted"].popleft()
                got = sqe.to_bytes(SQE_BYTES, "little")
                assert got == want, f"SQ {csq}: entry {sq['taken']} differs"
                index = sq["taken"]
                if index < sq.get("live_until", 1 << 62):
                    assert not abort, f"SQ {csq}: entry {index}, fetched before DELETE_SQ, handed on as aborted"
                if index >= sq.get("aborted_from", 1 << 62):
                    assert abort, f"SQ {csq}: entry {index}, fetched after DELETE_SQ, not marked abort"
                self.seen["aborted"] += abort
                sq["taken"] += 1
                cid = SQE_REC.decompose("cdw0", SQE_REC.unpack(got).cdw0).cid
                r = self.sink_rng
                self.pending.append([self.now + r.randrange(60), csq, cid, r.randrange(8), r.randrange(256),
                                     r.getrandbits(1), r.getrandbits(64)])
            self.seen["sink_stalls"] += cv and not cr
            ctx.set(cmd.ready, not self.hold_sink and self.sink_rng.random() < 0.6)
            if offered is None and self.pending and self.sink_rng.random() < 0.5:
                ready = [p for p in self.pending if p[0] <= self.now]
                if ready:
                    self.offered = offered = self.sink_rng.choice(ready)
                    self.seen["out_of_order"] += offered is not self.pending[0]
                    self.pending.remove(offered)
                    _, sqid, cid, sct, sc, dnr, result = offered
                    ctx.set(cpl.payload, {"sqid": sqid, "cid": cid, "sct": sct, "sc": sc, "dnr": dnr,
                                          "result": result})
                    ctx.set(cpl.valid, 1)

    # -- irq and doorbell errors ------------------------------------------------------------------------
    async def events(self, ctx):
        d = self.dut
        async for _, _, iv, ir, vec, ev, er, eq, ecq, kind in ctx.tick().sample(
                d.irq.valid, d.irq.ready, d.irq.payload.vector, d.doorbell_error.valid, d.doorbell_error.ready,
                d.doorbell_error.payload.queue, d.doorbell_error.payload.cq, d.doorbell_error.payload.kind):
            if iv and ir:
                assert self.expected_irqs, f"irq {vec} with none expected"
                assert vec == self.expected_irqs.popleft(), f"irq vector {vec}"
                self.seen["irqs"] += 1
            if ev and er:
                assert self.expected_errors, f"doorbell error {(eq, ecq, kind)} with none expected"
                want = self.expected_errors.popleft()
                assert (eq, ecq, kind) == want, f"doorbell error {(eq, ecq, kind)}, expected {want}"
            ctx.set(d.irq.ready, self.event_rng.random() < 0.7)
            ctx.set(d.doorbell_error.ready, self.event_rng.random() < 0.7)

    # -- the firmware's config ----------------------------------------------------------------------
    async def configure(self, ctx, op, qid=0, *, base=0, size=0, cqid=0, ien=0, iv=0):
        c = self.dut.config
        ctx.set(c.payload, {"op": op, "qid": qid, "base": base, "size": size, "cqid": cqid, "ien": ien, "iv": iv})
        ctx.set(c.valid, 1)
        await ctx.tick().until(c.ready)
        ctx.set(c.valid, 0)
        ctx.set(self.dut.config_done.ready, 1)
        await ctx.tick().until(self.dut.config_done.valid)
        ctx.set(self.dut.config_done.ready, 0)

    # -- the host ------------------------------------------------------------------------------------
    def ring(self, queue, is_cq, value, *, valid_write=1, kind=None):
        if kind is not None:
            self.expected_errors.append((queue, is_cq, kind))
            self.seen["invalid"] += 1
            valid_write = 0
        self.doorbells.append((queue, is_cq, value, valid_write))

    def submit(self, q, count):
        sq = self.sqs[q]
        for _ in range(count):
            if (sq["tail"] + 1) % sq["size"] == sq["known_head"]:
                break
            raw = bytearray(self.rng.randbytes(SQE_BYTES))
            raw[2:4] = sq["cid"].to_bytes(2, "little")
            sq["cid"] = (sq["cid"] + 1) & 0xFFFF
            self.memory.write(sq["base"] + sq["tail"] * SQE_BYTES, bytes(raw))
            sq["submitted"].append(bytes(raw))
            sq["tail"] = (sq["tail"] + 1) % sq["size"]
            self.submitted += 1
            self.ring(q, 0, sq["tail"])          # one doorbell each keeps the driver's count exact

    def poll(self, q):
        cq = self.cqs[q]
        got = self.memory.read(cq["base"] + cq["head"] * CQE_BYTES, CQE_BYTES)
        entry = CQE_REC.unpack(got)
        if CQE_REC.decompose("sf", entry.sf).p != cq["phase"]:
            return False
        assert cq["expected"], f"CQ {q}: an entry in slot {cq['head']} with none expected"
        want = bytearray(cq["expected"].popleft())
        want[14] |= cq["phase"]                  # sf bit 0 is the phase tag
        assert got == bytes(want), f"CQ {q} slot {cq['head']}: {got.hex()} != {bytes(want).hex()}"
        self.sqs[entry.sqid]["known_head"] = entry.sqhd
        cq["head"] += 1
        if cq["head"] == cq["size"]:
            cq["head"], cq["phase"] = 0, cq["phase"] ^ 1
            self.seen["wraps"] += 1
        cq["pending_ring"] += 1
        self.completed += 1
        return True

    def invalid_doorbell(self):
        r, n = self.rng, self.n
        choice = r.randrange(4)
        live = [q for q in range(n) if self.sqs[q]["en"]]
        if choice == 0:                           # a queue id the engine has, not created (or deleted)
            absent = [(q, 1) for q in range(n) if q not in self.cqs] + [(q, 0) for q in range(n) if q not in live]
            if absent:
                q, is_cq = r.choice(absent)
                self.ring(q, is_cq, 0, kind=DOORBELL_INVALID_REGISTER)
        elif choice == 1:                         # an SQ tail beyond the queue
            q = r.choice(live)
            self.ring(q, 0, self.sqs[q]["size"] + r.randrange(4), kind=DOORBELL_INVALID_VALUE)
        elif choice == 2:                         # a CQ head beyond the queue
            q = r.choice(list(self.cqs))
            self.ring(q, 1, self.cqs[q]["size"] + r.randrange(4), kind=DOORBELL_INVALID_VALUE)
        elif self.idle_cq is not None:            # a CQ head releasing entries never posted
            cq = self.cqs[self.idle_cq]
            self.ring(self.idle_cq, 1, r.randrange(1, cq["size"]), kind=DOORBELL_INVALID_VALUE)

    async def settle(self, ctx, cycles=20000, what="the queues to drain"):
        for _ in range(cycles):
            if not (self.doorbells or self.expected_errors or self.pending or self.offered or self.expected_irqs
                    or any(cq["expected"] for cq in self.cqs.values())
                    or any(sq["submitted"] for sq in self.sqs.values())):
                return
            for q in self.cqs:
                while self.poll(q):
                    pass
                self.ring_head(q, force=True)
            await ctx.tick()
        raise AssertionError(f"stuck waiting for {what}: {self.status()}")

    def status(self):
        return {"cq": {q: (len(c["expected"]), c["head"], c["writes"], c["released"]) for q, c in self.cqs.items()},
                "sq": {q: (len(s["submitted"]), s["taken"], s["reads"], s["rung"]) for q, s in self.sqs.items()},
                "pending": len(self.pending), "irqs": len(self.expected_irqs), "errors": len(self.expected_errors)}

    def ring_head(self, q, force=False):
        cq = self.cqs[q]
        if cq["pending_ring"] and (force or self.rng.random() < 0.3):
            self.ring(q, 1, cq["head"])
            cq["pending_ring"] = 0

    async def create_all(self, ctx):
        for q, cq in self.cqs.items():
            await self.configure(ctx, QueueOp.CREATE_CQ, q, base=cq["base"], size=cq["size"] - 1, ien=cq["ien"],
                                 iv=cq["iv"])
            cq["en"] = True
        for q, sq in self.sqs.items():
            await self.configure(ctx, QueueOp.CREATE_SQ, q, base=sq["base"], size=sq["size"] - 1, cqid=sq["cq"])
            sq["en"] = True

    async def traffic(self, ctx, commands):
        r = self.rng
        limit = self.submitted + commands
        for _ in range(60 * commands):
            if self.submitted < limit and r.random() < 0.15:
                q = r.choice([q for q in range(self.n) if self.sqs[q]["en"]])
                self.submit(q, min(r.randrange(1, self.burst + 1), limit - self.submitted))
            if r.random() < 0.003:
                self.invalid_doorbell()
            for q, cq in self.cqs.items():
                if r.random() < cq["poll"]:
                    while self.poll(q) and r.random() < 0.8:
                        pass
                self.ring_head(q)
            await ctx.tick()
            if self.submitted >= limit:
                break
        await self.settle(ctx)

    async def run(self, ctx):
        self.submitted = self.completed = 0
        await self.create_all(ctx)
        await self.traffic(ctx, self.commands)
        assert self.completed == self.submitted

        # DELETE_SQ with entries waiting: those fetched before the op run, the rest are fetched and handed
        # on as aborted; the SQ drains, then is gone
        r = self.rng
        victim = r.choice([q for q in range(1, self.n) if self.sqs[q]["size"] > 2])  # more than the buffered one
        self.hold_sink = True
        self.submit(victim, self.sqs[victim]["size"] - 1)
        for _ in range(r.randrange(50, 150)):
            await ctx.tick()
        sq = self.sqs[victim]
        sq["live_until"] = sq["reads"]
        await self.configure(ctx, QueueOp.DELETE_SQ, victim)
        sq["aborted_from"] = sq["reads"]
        assert len(sq["submitted"]) + sq["taken"] > sq["aborted_from"], \
            "DELETE_SQ came after every entry was fetched: nothing checked"
        assert ctx.get(self.dut.draining) >> victim & 1, "a deleted SQ with entries left is not draining"
        self.hold_sink = False
        await self.settle(ctx, what="the commands of the deleted SQ, aborted or not")
        assert not ctx.get(self.dut.draining), "the deleted SQ still drains"
        assert not sq["submitted"], f"SQ {victim}: entries never handed on"
        sq["en"] = False
        assert self.seen["aborted"] > 0
        self.ring(victim, 0, 1, kind=DOORBELL_INVALID_REGISTER)
        await self.traffic(ctx, 30)
        await self.settle(ctx)

        # RESET: every doorbell is an invalid register, nothing more is fetched or posted
        await self.configure(ctx, QueueOp.RESET)
        requests = self.dma.requests
        for q in self.sqs:
            self.sqs[q]["en"] = False
            self.ring(q, 0, 1, kind=DOORBELL_INVALID_REGISTER)
        for q in self.cqs:
            self.ring(q, 1, 1, kind=DOORBELL_INVALID_REGISTER)
        await self.settle(ctx, what="the doorbell errors after RESET")
        for _ in range(100):
            await ctx.tick()
        assert self.dma.requests == requests


    async def run_refused(self, ctx):
        """The host refuses the SQ (``refuse`` "sq") or CQ ("cq") page: fatal, nothing more until RESET."""
        queue = self.refuse
        self.submitted = self.completed = 0
        await self.create_all(ctx)
        sq = self.sqs[1]
        self.submit(1, 1)
        self.memory.refuse(sq["base"] if queue == "sq" else self.cqs[sq["cq"]]["base"])
        for _ in range(500):
            if ctx.get(self.dut.fatal):
                break
            await ctx.tick()
        assert ctx.get(self.dut.fatal), "a refused DMA did not raise fatal"
        requests = self.dma.requests
        other = next(q for q in self.sqs if self.sqs[q]["cq"] != sq["cq"])
        self.submit(other, 2)
        for _ in range(300):
            await ctx.tick()
        assert self.dma.requests == requests, "DMA after fatal"
        assert sq["taken"] == (queue == "cq"), "a refused entry was handed on"
        await self.configure(ctx, QueueOp.RESET)
        assert not ctx.get(self.dut.fatal)


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_queues_against_the_host(seed):
    tb = NvmeQueueEngineTB(seed=seed)
    tb.sim.run()
    s = tb.seen
    assert s["full"] and s["sink_stalls"] and s["invalid"] and s["irqs"] and s["wraps"] and s["out_of_order"], s


def test_every_queue_of_the_default_build():
    """spec.NVME.IO_QUEUES I/O queues, each on its own CQ, all small (CQ 1 holds one entry, SQ 1 seven)."""
    tb = NvmeQueueEngineTB(seed=8, queues=spec.NVME.IO_QUEUES, shared=False, sizes=[2, 2, 4, 2, 3, 4, 5, 8, 3],
                           commands=200)
    tb.sim.run()
    assert tb.seen["full"] and tb.seen["wraps"], tb.seen


@pytest.mark.parametrize("queue", ["sq", "cq"])
def test_refused_queue_memory_is_fatal(queue):
    tb = NvmeQueueEngineTB(seed=11, refuse=queue)
    tb.sim.run()


def test_doorbells_connect_to_the_register_block():
    regs, engine = NvmeRegisters(queues=3), NvmeQueueEngine(queues=3)
    m = Module()
    m.submodules.regs, m.submodules.engine = regs, engine
    wiring.connect(m, regs.doorbell, engine.doorbell)
    Simulator(m)                             # elaborates both
