"""The command translator (``rtl/nvme/translate.py``) with the data mover, against the reference controller.

``TranslatorTB`` builds the translator, a :class:`~rtl.nvme.datamover.DataMover` and a Wishbone arbiter
for the two over one SoC memory (``sim/harness/wbmem.py``, random wait states), host memory behind the
mover (``sim/harness/hostdma.py``), and a stand-in for the FTL core (``sim/harness/core_stand_in.py``: the
reference model behind the core's stream front end, completing out of order).

The oracle is the reference NVMe controller (:mod:`atomflash.model.nvme`): every command is also run by
its I/O handlers, on their own model and a copy of host memory as it was before the command; status,
DW0-DW1, the data a read returned and, at the end, both models' contents must agree.  Concurrent
commands (several contexts in the core at once) are checked for their data and statuses.
"""

import copy
import random
from collections import Counter

import pytest
from amaranth import Module
from amaranth.lib import wiring
from amaranth.sim import Simulator

from atomflash import command, spec
from atomflash.hostmem import PAGE, HostMemory
from atomflash.model.nvme import NvmeController, _SQ
from atomflash.model.semantics import Limits, Model
from atomflash.nvme import NvmeHost
from atomflash.spec import NvmeField, NvmeGenericStatus, NvmeIoOpcode as Io, NvmeSct
from rtl.lib import wishbone
from rtl.nvme.datamover import DataMover
from rtl.nvme.translate import NvmeCommandTranslator
from sim.harness.core_stand_in import FtlCoreStandIn
from sim.harness.hostdma import HostDmaModel
from sim.harness.wbmem import WishboneMemoryModel

STAGING = 0x4000_0000
QUEUES = 2
CORE_IDS = QUEUES + 1          # the stream's ids and one host-queue pair, as the SoC's core has


class TranslatorTB:
    def __init__(self, seed, *, contexts=4, block=512, capacity=256, write_cache=False, wait=0.25):
        self.rng = random.Random(seed)
        self.block, self.capacity, self.contexts = block, capacity, contexts
        self.static = command.StaticLimits()
        self.limits = Limits(capacity=capacity, lba_size=block)
        m = Module()
        m.submodules.translator = self.t = t = NvmeCommandTranslator(
            queues=QUEUES, core_queue_ids=CORE_IDS, contexts=contexts, block_bytes=block, limits=self.static)
        m.submodules.mover = self.mover = mover = DataMover(batch=8)
        m.submodules.arbiter = arb = wishbone.Arbiter(2, addr_width=30, burst=True)
        wiring.connect(m, t.move, mover.job)
        wiring.connect(m, mover.done, t.moved)
        wishbone.connect(m, t.mem, arb.initiators[0])
        wiring.connect(m, mover.mem, arb.initiators[1])
        self.m = m
        self.memory = HostMemory()
        self.host = HostDmaModel(mover.dma, self.memory, seed=seed, backpressure=0.1, gap=0.1)
        self.soc = WishboneMemoryModel(arb.bus, t.staging_bytes, seed=seed, wait=wait, base=STAGING)
        self.core_model = Model(self.limits, cache=write_cache)
        self.core = FtlCoreStandIn(t.core_cmd, t.core_cpl, self.core_model, self.soc, ids=contexts, seed=seed)
        self.ref = NvmeController(self.memory, model=Model(self.limits, cache=write_cache),
                                  volatile_cache=write_cache)
        self.write_cache = write_cache
        self.driver = NvmeHost(None, self.memory)
        self.completions = {}           # cid -> (sct, sc, result)
        self.failures = []
        self.seen = Counter()
        self.next_cid = 0

    async def take_completions(self, ctx):
        t = self.t
        async for _, _, valid, ready, payload in ctx.tick().sample(
                t.completion.valid, t.completion.ready, t.completion.payload):
            if valid and ready:
                cid = payload.cid
                assert cid not in self.completions, f"command {cid} completed twice"
                self.completions[cid] = (payload.sqid, payload.sct, payload.sc, payload.result)
            ctx.set(t.completion.ready, int(self.rng.random() > 0.2))

    async def take_failures(self, ctx):
        t = self.t
        ctx.set(t.failed.ready, 1)
        async for _, _, valid, ready, payload in ctx.tick().sample(t.failed.valid, t.failed.ready, t.failed.payload):
            if valid and ready:
                self.failures.append((payload.sqid, payload.cid, payload.sct, payload.sc, payload.lba, payload.nsid))

    # -- commands --------------------------------------------------------------------------------------
    async def submit(self, ctx, sqid, sqe_fields, *, abort=False):
        t = self.t
        cid = self.next_cid
        self.next_cid = (cid + 1) & 0xFFFF
        cdw0 = sqe_fields.pop("cdw0", 0)
        raw = spec.NVME_SQE.pack(cdw0=cdw0 | spec.NVME_SQE.compose("cdw0", cid=cid), **sqe_fields)
        ctx.set(t.command.payload.sqid, sqid)
        ctx.set(t.command.payload.sqe.as_value(), int.from_bytes(raw, "little"))
        ctx.set(t.command.payload.abort, abort)
        ctx.set(t.command.valid, 1)
        for _ in range(20000):
            _, _, ready = await ctx.tick().sample(t.command.ready)
            if ready:
                break
        else:
            raise AssertionError("the command was not taken")
        ctx.set(t.command.valid, 0)
        return cid, raw

    async def wait_for(self, ctx, cid, cycles=200_000):
        for _ in range(cycles):
            if cid in self.completions:
                return self.completions.pop(cid)
            await ctx.tick()
        raise AssertionError(f"command {cid} never completed")

    def reference(self, sqid, raw, memory):
        self.ref.memory = memory
        cmd = spec.NVME_SQE.unpack(raw)
        outcome = self.ref._execute(_SQ(qid=sqid, base=0, size=2, cqid=sqid), cmd)
        return outcome

    def simulator(self, bench):
        sim = Simulator(self.m)
        sim.add_clock(1e-8)
        sim.add_process(self.host.process)
        sim.add_process(self.soc.process)
        sim.add_process(self.core.process)
        sim.add_process(self.take_completions)
        sim.add_process(self.take_failures)

        async def setup_and_run(ctx):
            ctx.set(self.t.staging_base, STAGING)
            ctx.set(self.t.capacity, self.capacity)
            ctx.set(self.t.write_cache, int(self.write_cache))
            await ctx.tick()
            await bench(ctx)
        sim.add_testbench(setup_and_run)
        return sim

    # -- random commands -----------------------------------------------------------------------------
    def buffer(self, data: bytes = b"", nbytes: int = 0, *, misalign=False, refuse=False):
        """A host buffer holding ``data`` (or ``nbytes`` zeroed) at a random dword offset: (prp1, prp2, addr)."""
        n = len(data) or nbytes
        offset = 4 * self.rng.randrange(PAGE // 4) if self.rng.random() < 0.7 else 0
        base = self.memory.alloc(offset + n + 4)
        addr = base + offset
        if data:
            self.memory.write(addr, data)
        prp1, prp2 = self.driver.prps(addr, n, [])
        if misalign:
            prp1 += 2
        if refuse:
            self.memory.refuse(addr + n - 1)
        return prp1, prp2, addr

    def blocks(self):
        r = self.rng.random()
        if r < 0.85:
            return self.rng.randint(1, 6)
        if r < 0.92:
            return self.rng.choice([self.static.max_transfer, self.static.max_transfer - 1])
        return self.static.max_transfer + self.rng.randint(1, 3)

    def lba(self, n):
        if self.rng.random() < 0.1:
            return self.capacity - self.rng.randint(0, n)       # may run off the end
        return self.rng.randrange(max(1, self.capacity - n))

    def random_command(self, tokens, ops=None):
        """(sqid, SQE fields, landing (addr, bytes) of a read or None); ``ops``: the opcodes to pick from."""
        r = self.rng
        sqid = r.randint(1, QUEUES)
        op = r.choice(ops or list(Io) * 3 + [0x03, 0x7F, 0xFF, 0x84])
        f = {"nsid": spec.NVME.NSID}
        if r.random() < 0.04:
            f["nsid"] = r.choice([0, 2, NvmeField.NSID_ALL])
        cdw0 = spec.NVME_SQE.compose("cdw0", opc=op)
        if r.random() < 0.03:
            cdw0 |= spec.NVME_SQE.compose("cdw0", fuse=1) if r.random() < 0.5 else spec.NVME_SQE.compose("cdw0", psdt=1)
        f["cdw0"] = cdw0
        bad_prp, refuse = r.random() < 0.04, r.random() < 0.04
        landing = None
        B = self.block
        n = self.blocks()
        if op in (Io.WRITE, Io.TX_WRITE, Io.APPEND):
            data = r.randbytes(n * B) if n <= self.static.max_transfer else b""
            if data:
                f["prp1"], f["prp2"], _ = self.buffer(data, misalign=bad_prp, refuse=refuse)
            f["slba"] = self.lba(n) if op != Io.APPEND else 0
            f["cdw12"] = spec.NVME_SQE.compose("cdw12", nlb=n - 1, fua=r.random() < 0.3,
                                               tx_final=op == Io.TX_WRITE and r.random() < 0.3,
                                               tx_new=op == Io.TX_WRITE and r.random() < 0.5)
            f["cdw13"] = r.choice([0, 1, 2, 3]) if op == Io.TX_WRITE else 0
        elif op in (Io.READ, Io.TX_READ):
            if n <= self.static.max_transfer:
                f["prp1"], f["prp2"], addr = self.buffer(nbytes=n * B, misalign=bad_prp, refuse=refuse)
                landing = (addr, n * B)
            f["slba"] = self.lba(n)
            f["cdw12"] = spec.NVME_SQE.compose("cdw12", nlb=n - 1)
            f["cdw13"] = r.choice([0, 1, 2, 3]) if op == Io.TX_READ else 0
        elif op == Io.WRITE_ZEROES:
            f["slba"] = self.lba(n)
            f["cdw12"] = spec.NVME_SQE.compose("cdw12", nlb=n - 1, fua=r.random() < 0.3)
        elif op == Io.DATASET_MANAGEMENT:
            count = r.randint(1, 5)
            ranges = b"".join(spec.NVME_DSM_RANGE.pack(attributes=r.randrange(1 << 32), nlb=r.choice([0, 1, 3, 8]),
                                                       slba=self.lba(8)) for _ in range(count))
            f["prp1"], f["prp2"], _ = self.buffer(ranges, misalign=bad_prp, refuse=refuse)
            f["slba"] = NvmeField.NR.put(count - 1) | NvmeField.AD.put(int(r.random() < 0.8)) << 32
        elif op == Io.ATOMIC_WRITE:
            n = min(n, self.static.max_atomic_pages + 1)
            if n <= self.static.max_atomic_pages:
                f["prp1"], f["prp2"], _ = self.buffer(r.randbytes(n * B), misalign=bad_prp, refuse=refuse)
                lbas = [self.lba(1) for _ in range(n)]
                if r.random() < 0.1 and n > 1:
                    lbas[-1] = lbas[0]                          # a duplicate LBA
                raw = b"".join(x.to_bytes(8, "little") for x in lbas)
                at = self.memory.alloc(PAGE * 2) + r.choice([0, 8 * r.randrange(PAGE // 8), PAGE - 8])
                self.memory.write(at, raw)
                f["mptr"] = at + (2 if r.random() < 0.04 else 0)
            f["cdw12"] = spec.NVME_SQE.compose("cdw12", nlb=n - 1)
        elif op in (Io.TX_COMMIT, Io.TX_ABORT):
            f["cdw13"] = r.choice([0, 1, 2, 3])
        elif op == Io.REMAP:
            k = r.choice([1, 1, 2, self.static.max_remap_triples + 1])
            if k <= self.static.max_remap_triples:
                triples = []
                for _ in range(k):
                    token, nlb = r.choice(tokens) if tokens and r.random() < 0.8 else (r.randrange(1 << 64), 1)
                    triples.append(spec.NVME_REMAP_ENTRY.pack(lba=self.lba(nlb), token=token, nlb=nlb, rsvd=0))
                f["prp1"], f["prp2"], _ = self.buffer(b"".join(triples), misalign=bad_prp, refuse=refuse)
            f["cdw12"] = spec.NVME_SQE.compose("cdw12", nlb=k - 1)
        elif op == Io.RELEASE:
            f["cdw14_15"] = r.choice(tokens)[0] if tokens and r.random() < 0.7 else r.randrange(1 << 64)
        elif op == Io.HINT:
            f["cdw13"] = r.choice([0, 1, 2, 7])
        return sqid, f, landing


def outcome_of(got):
    sqid, sct, sc, result = got
    return (sct, sc), result


LISTS = [Io.DATASET_MANAGEMENT, Io.ATOMIC_WRITE, Io.WRITE_ZEROES, Io.APPEND, Io.REMAP, Io.READ]


@pytest.mark.parametrize("seed,write_cache,count,ops", [
    (1, False, 50, None), (2, True, 50, None), (5, False, 40, LISTS),
    pytest.param(3, False, 400, None, marks=pytest.mark.slow),
    pytest.param(4, True, 400, None, marks=pytest.mark.slow)])
def test_each_command_as_the_reference_controller_answers_it(seed, write_cache, count, ops):
    """Random commands one at a time (``ops``: only those opcodes, for the list-carrying ones)."""
    tb = TranslatorTB(seed, write_cache=write_cache, capacity=48 if ops else 256)
    tokens = []

    async def bench(ctx):
        for i in range(count):
            sqid, fields, landing = tb.random_command(tokens, ops)
            before = copy.deepcopy(tb.memory)
            cid, raw = await tb.submit(ctx, sqid, dict(fields))
            got_sqid, sct, sc, result = await tb.wait_for(ctx, cid)
            want = tb.reference(sqid, raw, before)
            op = spec.NVME_SQE.decompose("cdw0", fields["cdw0"]).opc
            label = f"command {i} opcode {op:#x} {fields}"
            assert got_sqid == sqid, label
            assert (sct, sc) == tuple(want.status), f"{label}: status {(sct, sc)}, expected {want.status}"
            assert result == want.result, f"{label}: result {result:#x}, expected {want.result:#x}"
            if landing and (sct, sc) == (0, 0):
                assert tb.memory.read(*landing) == before.read(*landing), f"{label}: the data read differs"
            if op == Io.APPEND and (sct, sc) == (0, 0):
                tokens.append((result, spec.NVME_SQE.decompose("cdw12", fields["cdw12"]).nlb + 1))
            tb.seen["success" if (sct, sc) == (0, 0) else f"{NvmeSct(sct).name} {sc:#x}"] += 1
            assert tb.core_model.contents() == tb.ref.model.contents(), f"{label}: the models differ"
            if (sct, sc) != (0, 0):
                await ctx.tick().repeat(4)                      # the error log's copy comes through a FIFO
                assert tb.failures and tb.failures[-1][:4] == (sqid, cid, sct, sc), f"{label}: not on `failed`"
        assert tb.core_model.contents() == tb.ref.model.contents(), "the models differ after the run"
        assert ctx.get(tb.t.idle)

    tb.simulator(bench).run()
    print(dict(tb.seen))
    assert tb.seen["success"] > count // 4
    kinds = set(tb.core.seen)
    assert len(kinds) >= (len(ops) - 1 if ops else 10), f"too few core commands exercised: {kinds}"
    if ops:
        assert tb.seen[f"{NvmeSct.GENERIC.name} {NvmeGenericStatus.LBA_OUT_OF_RANGE:#x}"], "no range beyond the end"


def test_commands_in_flight_together_complete_with_their_data():
    """Writes and reads of disjoint blocks from both queues, every context busy, the core finishing them
    out of order: each read returns what its block's write left."""
    tb = TranslatorTB(7, contexts=4, wait=0.1)
    B = tb.block

    async def bench(ctx):
        written, reads_done = {}, 0
        for round_ in range(2):
            cids = {}
            for i in range(12):
                lba = round_ * 24 + i * 2
                data = tb.rng.randbytes(2 * B)
                prp1, prp2, _ = tb.buffer(data)
                cid, _ = await tb.submit(ctx, 1 + i % QUEUES, {
                    "cdw0": spec.NVME_SQE.compose("cdw0", opc=Io.WRITE), "nsid": 1, "prp1": prp1, "prp2": prp2,
                    "slba": lba, "cdw12": spec.NVME_SQE.compose("cdw12", nlb=1)})
                cids[cid] = None
                written[lba], written[lba + 1] = data[:B], data[B:]
            for cid in cids:
                assert (await tb.wait_for(ctx, cid))[1:3] == (0, 0)
            reads = {}
            for lba in written:
                prp1, prp2, addr = tb.buffer(nbytes=B)
                cid, _ = await tb.submit(ctx, 2, {"cdw0": spec.NVME_SQE.compose("cdw0", opc=Io.READ), "nsid": 1,
                                                  "prp1": prp1, "prp2": prp2, "slba": lba})
                reads[cid] = (addr, lba)
            for cid, (addr, lba) in reads.items():
                assert (await tb.wait_for(ctx, cid))[1:3] == (0, 0)
                assert tb.memory.read(addr, B) == written[lba], f"LBA {lba} read back wrong"
            reads_done += len(reads)
        assert ctx.get(tb.t.read_commands) == reads_done == ctx.get(tb.t.blocks_read)
        assert ctx.get(tb.t.write_commands) == 24
        assert ctx.get(tb.t.blocks_written) == 48

    tb.simulator(bench).run()
    assert tb.core.seen["WRITE"] == 24


def test_a_range_beyond_the_end_fails_dataset_management_before_any_range_is_deallocated():
    tb = TranslatorTB(11, capacity=64)
    B = tb.block

    async def command(ctx, opc, **fields):
        before = copy.deepcopy(tb.memory)
        cid, raw = await tb.submit(ctx, 1, {"cdw0": spec.NVME_SQE.compose("cdw0", opc=opc), "nsid": 1, **fields})
        _, sct, sc, _ = await tb.wait_for(ctx, cid)
        assert (sct, sc) == tuple(tb.reference(1, raw, before).status)
        return sct, sc

    async def bench(ctx):
        prp1, prp2, _ = tb.buffer(tb.rng.randbytes(4 * B))
        assert await command(ctx, Io.WRITE, prp1=prp1, prp2=prp2, slba=0, cdw12=3) == (0, 0)
        for ranges, status in ((((0, 4), (62, 3)), (NvmeSct.GENERIC, NvmeGenericStatus.LBA_OUT_OF_RANGE)),
                               (((0, 0), (2, 2)), (0, 0))):
            body = b"".join(spec.NVME_DSM_RANGE.pack(attributes=0, slba=s, nlb=n) for s, n in ranges)
            prp1, prp2, _ = tb.buffer(body)
            dsm = NvmeField.NR.put(len(ranges) - 1) | NvmeField.AD.put(1) << 32
            assert await command(ctx, Io.DATASET_MANAGEMENT, prp1=prp1, prp2=prp2, slba=dsm) == status
            assert tb.core_model.contents() == tb.ref.model.contents()
        assert sorted(tb.core_model.contents()) == [0, 1], "the second DSM deallocates blocks 2 and 3 only"

    tb.simulator(bench).run()


def test_a_command_of_a_queue_being_deleted_is_aborted_unrun():
    tb = TranslatorTB(12)

    async def bench(ctx):
        prp1, prp2, _ = tb.buffer(bytes(tb.block))
        cid, _ = await tb.submit(ctx, 2, {"cdw0": spec.NVME_SQE.compose("cdw0", opc=Io.WRITE), "nsid": 1,
                                          "prp1": prp1, "prp2": prp2, "slba": 3}, abort=True)
        assert (await tb.wait_for(ctx, cid))[:3] == (2, NvmeSct.GENERIC, NvmeGenericStatus.SQ_DELETION_ABORT)
        await ctx.tick().repeat(4)
        assert tb.failures[-1][:4] == (2, cid, NvmeSct.GENERIC, NvmeGenericStatus.SQ_DELETION_ABORT)
        assert not tb.host.requests and not tb.core_model.contents(), "an aborted command ran"

    tb.simulator(bench).run()
