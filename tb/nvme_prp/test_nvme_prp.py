"""The PRP walker (``rtl/nvme/prp.py``) against NVMe 2.0's PRP rules, written again here.

``PrpWalkerTB`` owns the walker and everything around it: host memory behind its DMA port
(``sim/harness/hostdma.py``: seeded latency and gaps, refusable pages), a job driver with random idle
cycles, a segment sink and a status taker with random backpressure.  Each job's segments and status
must equal :func:`reference_walk`'s, which follows the standard's wording (PRP1 to its page's end,
PRP2 the second page or a list pointer, a list page's last entry chaining when more entries remain),
and no segment may come after the status.  The list reads are checked too: inside the list, never
past what the transfer needs, and in as few requests as the batch allows.
"""

import random

import pytest
from amaranth import Cat, ClockDomain, Module
from amaranth.sim import Simulator

from atomflash import spec
from atomflash.hostmem import PAGE, HostMemory
from atomflash.nvme import NvmeHost
from atomflash.spec import NvmeGenericStatus, NvmeSct, Status
from rtl.nvme.hostdma import HostDmaSignature
from rtl.nvme.prp import MAX_BYTES, SEGMENT, PrpWalker
from sim.harness.hostdma import HostDmaModel, HostDmaViolation
from sim.harness.prp_reference import SLOT, reference_walk

MIB = 1 << 20


def minimal_reads(slots, batch):
    """How many list reads the slots need: each list page's run of slots in reads of ``batch``."""
    runs = {}
    for s in slots:
        runs[s // PAGE] = runs.get(s // PAGE, 0) + 1
    return sum(-(-n // batch) for n in runs.values())


class Lists:
    """PRP lists written into host memory at random pages (anywhere in the 64-bit space)."""

    def __init__(self, memory: HostMemory, rng: random.Random):
        self.memory, self.rng, self.used = memory, rng, set()

    def page(self) -> int:
        while True:
            p = self.rng.choice([self.rng.randrange(1 << 20), self.rng.randrange(1 << 52)]) * PAGE
            if p not in self.used:
                self.used.add(p)
                return p

    def build(self, entries: list[int], start: int) -> tuple[int, list[int], list[int]]:
        """The list of ``entries`` from ``start`` (8-byte aligned): (PRP2, every slot written in reading
        order, the list pages)."""
        slot, slots, pages, left = start, [], [start // PAGE * PAGE], list(entries)
        while left:
            if slot % PAGE == PAGE - SLOT and len(left) > 1:
                nxt = self.page()
                self.memory.write(slot, nxt.to_bytes(8, "little"))
                slots.append(slot)
                pages.append(nxt)
                slot = nxt
                continue
            self.memory.write(slot, left.pop(0).to_bytes(8, "little"))
            slots.append(slot)
            slot += SLOT
        return start, slots, pages


class PrpWalkerTB:
    def __init__(self, *, batch=32, seed=0, idle=0.3, backpressure=0.3, host=None):
        self.dut = PrpWalker(batch=batch)
        self.batch = batch
        self.rng = random.Random(seed)
        self.memory = HostMemory()
        self.host = HostDmaModel(self.dut.dma, self.memory, seed=seed + 1000, **(host or {}))
        self.lists = Lists(self.memory, self.rng)
        self.idle, self.backpressure = idle, backpressure
        self.segments: list[tuple[int, int, int]] = []
        self.seen = {"jobs": 0, "segments": 0, "sink_stalls": 0, "job_gaps": 0, "chains": 0} | {
            s.name: 0 for s in Status}
        self.sim = Simulator(self.dut)
        self.sim.add_clock(1e-8)
        self.sim.add_process(self.host.process)
        self.sim.add_process(self.sink)

    def run(self, body):
        """Simulate ``body(tb, ctx)`` (a coroutine function), then check nothing came after."""
        async def bench(ctx):
            await body(self, ctx)
            taken = len(self.segments)
            await ctx.tick().repeat(40)
            assert len(self.segments) == taken, f"segments after the last status: {self.segments[taken:]}"
            assert not self.host.busy
        self.sim.add_testbench(bench)
        self.sim.run()

    async def sink(self, ctx):
        s = self.dut.segments
        ready = 0
        async for _, _, handshake, payload in ctx.tick().sample(Cat(s.valid, s.ready), s.payload.as_value()):
            if handshake == 3:
                self.segments.append(tuple((payload >> f.offset) & ((1 << f.width) - 1)
                                           for f in (SEGMENT["addr"], SEGMENT["bytes"], SEGMENT["last"])))
            self.seen["sink_stalls"] += handshake == 1
            if ready != (ready := int(self.rng.random() >= self.backpressure)):
                ctx.set(s.ready, ready)

    @staticmethod
    async def within(ctx, signal, cycles, what):
        """Until an edge sees ``signal`` high; fails after ``cycles`` (a hung walker fails, not the run)."""
        for _ in range(cycles):
            _, _, high = await ctx.tick().sample(signal)
            if high:
                return
        raise AssertionError(f"{what} within {cycles} cycles")

    async def walk(self, ctx, prp1, prp2, nbytes):
        """One job: (segments, status, the DMA requests it made)."""
        d, r = self.dut, self.rng
        first_segment, first_request = len(self.segments), len(self.host.log)
        if r.random() < self.idle:
            self.seen["job_gaps"] += 1
            await ctx.tick().repeat(r.randint(1, 4))
        ctx.set(d.job.payload, {"prp1": prp1, "prp2": prp2, "bytes": nbytes})
        ctx.set(d.job.valid, 1)
        await self.within(ctx, d.job.ready, 100, "the job was not taken")
        ctx.set(d.job.valid, 0)
        await self.within(ctx, d.done.valid, 1000 + 40 * (nbytes // PAGE),
                          f"no status for {nbytes} bytes at {prp1:#x}/{prp2:#x}")
        if r.random() < self.backpressure:          # the status is taken with backpressure too
            await ctx.tick().repeat(r.randint(1, 4))
        status = ctx.get(d.done.payload.status)
        ctx.set(d.done.ready, 1)
        await ctx.tick()
        ctx.set(d.done.ready, 0)
        assert not self.host.busy, "status given while a list read is outstanding"
        self.seen["jobs"] += 1
        self.seen[Status(status).name] += 1
        got = self.segments[first_segment:]
        self.seen["segments"] += len(got)
        return got, Status(status), self.host.log[first_request:]

    async def check(self, ctx, prp1, prp2, nbytes, *, all_slots=None, exact_reads=None, what=""):
        """Walk and compare with the reference; ``all_slots``: the slots of the whole list as written (reads
        must stay inside them); ``exact_reads``: check the reads are the reference's slots in the fewest
        requests (default: on success).  Returns (segments, status, requests)."""
        want_segments, want_status, want_slots = reference_walk(self.memory, prp1, prp2, nbytes)
        self.seen["chains"] += max(0, len({s // PAGE for s in want_slots}) - 1)
        got, status, requests = await self.walk(ctx, prp1, prp2, nbytes)
        label = f"{what} prp1={prp1:#x} prp2={prp2:#x} bytes={nbytes}"
        assert status == want_status, f"{label}: status {status.name}, expected {want_status.name}"
        assert len(got) == len(want_segments), (f"{label}: {len(got)} segments, expected {len(want_segments)}; "
                                               f"first difference {first_difference(got, want_segments)}")
        assert got == want_segments, f"{label}: segment {first_difference(got, want_segments)}"
        read = []
        for q in requests:
            assert not q.write, f"{label}: the walker wrote host memory ({q})"
            assert q.bytes % SLOT == 0 and q.addr % SLOT == 0, f"{label}: a list read of part of an entry ({q})"
            read += range(q.addr, q.addr + q.bytes, SLOT)
        assert len(read) == len(set(read)), f"{label}: a list entry read twice"
        if all_slots is not None:
            outside = set(read) - set(all_slots)
            assert not outside, f"{label}: read outside the list: {sorted(outside)[:4]}"
        if any(q.refused for q in requests):
            assert requests[-1].refused, f"{label}: a list read after the refused one"
        if exact_reads if exact_reads is not None else status == Status.SUCCESS:
            assert read == want_slots, f"{label}: read {len(read)} list entries, the transfer needs {len(want_slots)}"
            assert len(requests) == minimal_reads(want_slots, self.batch), (
                f"{label}: {len(requests)} list reads, {minimal_reads(want_slots, self.batch)} would do")
        return got, status, requests

    # -- transfers -------------------------------------------------------------------------------
    def data_pages(self, n):
        return [self.rng.randrange(1 << 52) * PAGE for _ in range(n)]

    def prp1(self):
        return self.rng.randrange(1 << 52) * PAGE + 4 * self.rng.randrange(PAGE // 4)

    def transfer(self, nbytes, prp1=None, list_offset=None):
        """PRP1/PRP2 for ``nbytes`` (random data pages; the list, if any, from ``list_offset`` in its page):
        (prp1, prp2, data pages after PRP1's, list slots)."""
        prp1 = self.prp1() if prp1 is None else prp1
        pages = -(-(nbytes - min(nbytes, PAGE - prp1 % PAGE)) // PAGE)
        data = self.data_pages(pages)
        if pages <= 1:
            return prp1, data[0] if data else 0, data, []
        if list_offset is None:
            list_offset = self.rng.choice([0, SLOT * self.rng.randrange(ENTRIES), PAGE - SLOT * self.rng.randint(1, 4)])
        prp2, slots, _ = self.lists.build(data, self.lists.page() + list_offset)
        return prp1, prp2, data, slots

    def length(self):
        kind = self.rng.random()
        if kind < 0.35:
            return self.rng.randint(4, 3 * PAGE)
        if kind < 0.8:
            return self.rng.randint(3 * PAGE, (1 << spec.NVME.MDTS) * PAGE)
        return self.rng.randint(1 * MIB, 5 * MIB)


ENTRIES = PAGE // SLOT


def data_slots(slots, before=None):
    """The slots holding data pages (the others chain), of the first ``before``: a slot on a page's last
    entry chains unless it is the list's last."""
    return [s for i, s in enumerate(slots[:before]) if s % PAGE != PAGE - SLOT or i == len(slots) - 1]


def first_difference(a, b):
    for i, (x, y) in enumerate(zip(a, b)):
        if x != y:
            return f"#{i}: got {fmt(x)}, expected {fmt(y)}"
    return f"#{min(len(a), len(b))}: got {fmt(a[len(b)]) if len(a) > len(b) else 'none'}, " \
           f"expected {fmt(b[len(a)]) if len(b) > len(a) else 'none'}"


def fmt(seg):
    return f"({seg[0]:#x}, {seg[1]}, last={seg[2]})"


# -- tests ---------------------------------------------------------------------------------------
@pytest.mark.parametrize("batch, seed", [(32, 1), (4, 2)])
def test_random_transfers_follow_the_prp_rules(batch, seed):
    """Lengths from 4 bytes to several MiB (chained lists), PRP1 anywhere dword aligned, the list
    anywhere qword aligned in its page; reads exactly the entries needed, in the fewest requests."""
    tb = PrpWalkerTB(batch=batch, seed=seed)

    async def body(tb, ctx):
        for _ in range(40):
            nbytes = tb.length()
            prp1, prp2, _, slots = tb.transfer(nbytes)
            await tb.check(ctx, prp1, prp2, nbytes, all_slots=slots)
    tb.run(body)
    assert tb.seen["SUCCESS"] == 40 and tb.seen["sink_stalls"] and tb.seen["job_gaps"], tb.seen
    assert tb.seen["chains"] >= 3, tb.seen


@pytest.mark.parametrize("batch", [32, 2])
def test_edge_lengths_and_list_positions(batch):
    """Each boundary: PRP1's page exactly, a byte into PRP2, exactly two pages, a byte into a list; a
    list that ends on its page's last entry, one that chains at once (PRP2 on its page's last entry),
    one a page of entries long and one entry longer; the largest job (batch 32); zero bytes."""
    tb = PrpWalkerTB(batch=batch, seed=3, host={"max_latency": 4})
    cases = []
    for off in (0, 4, PAGE - 4):
        base = tb.rng.randrange(1 << 40) * PAGE
        head = PAGE - off
        for nbytes in (1, 4, head - 1, head, head + 1, head + PAGE - 1, head + PAGE, head + PAGE + 1,
                       head + 2 * PAGE, head + 2 * PAGE + 3):
            if nbytes > 0:
                cases.append((nbytes, base + off, None))
    for entries in (2, 3, 40, ENTRIES - 1, ENTRIES, ENTRIES + 1):
        offsets = {0, SLOT, PAGE - SLOT, PAGE - 2 * SLOT, PAGE - SLOT * min(entries, ENTRIES)}
        for list_offset in sorted(offsets):
            cases.append((PAGE * (entries + 1), tb.rng.randrange(1 << 40) * PAGE, list_offset))
    if batch == 32:
        cases.append((MAX_BYTES, PAGE - 4, PAGE - 3 * SLOT))

    async def body(tb, ctx):
        for nbytes, prp1, list_offset in cases:
            p1, p2, _, slots = tb.transfer(nbytes, prp1, list_offset)
            await tb.check(ctx, p1, p2, nbytes, all_slots=slots, what=f"list at +{list_offset}")
        got, status, requests = await tb.check(ctx, tb.prp1(), tb.rng.randrange(1 << 64), 0)
        assert got == [] and status == Status.SUCCESS and requests == []
    tb.run(body)
    assert tb.seen["SUCCESS"] == len(cases) + 1


@pytest.mark.parametrize("nbytes, offset", [(512, 0), (PAGE, 0), (PAGE, 8), (2 * PAGE, 0), (3 * PAGE, 100),
                                            (64 * PAGE, 0), (64 * PAGE, PAGE - 4), (512 * PAGE, 0),
                                            (513 * PAGE, 0), (3 * MIB + 12, 64)])
def test_the_drivers_prps_give_back_the_buffer(nbytes, offset):
    """PRPs built by the host driver (``NvmeHost.prps``): the segments tile its buffer, page by page."""
    tb = PrpWalkerTB(seed=4)

    async def body(tb, ctx):
        for _ in range(2):
            base = tb.memory.alloc(offset + nbytes)
            addr = base + offset
            prp1, prp2 = NvmeHost(None, tb.memory).prps(addr, nbytes, [])
            got, status, _ = await tb.check(ctx, prp1, prp2, nbytes)
            assert status == Status.SUCCESS
            assert [a for a, _, _ in got] == [addr] + list(range(base + PAGE, addr + nbytes, PAGE))
            at = addr
            for a, n, _ in got:
                assert a == at and (a % PAGE + n == PAGE or at + n == addr + nbytes), (a, n)
                at += n
            assert at == addr + nbytes
    tb.run(body)


def test_errors_stop_the_transfer_with_their_status():
    """PRP1 not dword aligned, PRP2 not page aligned (second page) or qword aligned (list), a list's data
    entry or chain not page aligned, a list page the host refuses: the status the standard gives, no
    segment past the error, no list read past a refused one, and the next job walks normally."""
    tb = PrpWalkerTB(batch=8, seed=5)
    r = tb.rng

    async def body(tb, ctx):
        for _ in range(6):
            # PRP1 not dword aligned, whatever the length
            nbytes = tb.length()
            prp1, prp2, _, slots = tb.transfer(nbytes)
            got, status, _ = await tb.check(ctx, prp1 + r.randint(1, 3), prp2, nbytes, all_slots=slots)
            assert status == Status.MISALIGNED_BUFFER and got == [] and spec.nvme_status_of(status) == (
                NvmeSct.GENERIC, NvmeGenericStatus.PRP_OFFSET_INVALID)
            # PRP2 off its page as the second page, off a qword as a list pointer
            nbytes = PAGE + r.randint(1, PAGE)
            prp1, prp2, _, _ = tb.transfer(nbytes, prp1=r.randrange(1 << 40) * PAGE)
            got, status, _ = await tb.check(ctx, prp1, prp2 + 4 * r.randint(1, ENTRIES - 1), nbytes)
            assert status == Status.MISALIGNED_BUFFER and got == []
            nbytes = r.randint(3 * PAGE, 2 * MIB)
            prp1, prp2, _, slots = tb.transfer(nbytes)
            got, status, requests = await tb.check(ctx, prp1, prp2 + r.randint(1, 7), nbytes, all_slots=slots)
            assert status == Status.MISALIGNED_BUFFER and got == [] and requests == []
            # a data entry off its page: every page before it, none after
            nbytes = r.randint(3 * PAGE, 3 * MIB)
            prp1, prp2, data, slots = tb.transfer(nbytes)
            bad = r.randrange(len(data))
            entry = data_slots(slots)[bad]
            tb.memory.write(entry, (data[bad] + r.randrange(1, PAGE)).to_bytes(8, "little"))
            got, status, _ = await tb.check(ctx, prp1, prp2, nbytes, all_slots=slots)
            assert status == Status.MISALIGNED_BUFFER and len(got) == 1 + bad
            # a chain pointer off its page: the pages of the list before it, none after
            nbytes = r.randint(ENTRIES * PAGE + 1, 5 * MIB)
            prp1, prp2, data, slots = tb.transfer(nbytes)
            chain = r.choice(sorted(set(slots) - set(data_slots(slots))))
            pointer = int.from_bytes(tb.memory.read(chain, 8), "little")
            tb.memory.write(chain, (pointer + SLOT * r.randrange(1, ENTRIES)).to_bytes(8, "little"))
            got, status, _ = await tb.check(ctx, prp1, prp2, nbytes, all_slots=slots)
            assert status == Status.MISALIGNED_BUFFER
            assert len(got) == 1 + len(data_slots(slots, slots.index(chain)))
            # a list page the host refuses: the first, or one reached by a chain
            nbytes = r.randint(3 * PAGE, 5 * MIB)
            prp1, prp2, data, slots = tb.transfer(nbytes)
            page = r.choice(sorted({s // PAGE for s in slots}))
            tb.memory.refuse(page * PAGE)
            got, status, requests = await tb.check(ctx, prp1, prp2, nbytes, all_slots=slots)
            tb.memory.refused.discard(page)
            assert status == Status.DATA_TRANSFER_ERROR and requests and requests[-1].refused
            first_on_page = min(i for i, s in enumerate(slots) if s // PAGE == page)
            assert len(got) == 1 + len(data_slots(slots, first_on_page))
            # and the walker is ready for the next job
            nbytes = tb.length()
            prp1, prp2, _, slots = tb.transfer(nbytes)
            _, status, _ = await tb.check(ctx, prp1, prp2, nbytes, all_slots=slots)
            assert status == Status.SUCCESS
    tb.run(body)
    assert tb.seen["MISALIGNED_BUFFER"] == 6 * 5 and tb.seen["DATA_TRANSFER_ERROR"] == 6, tb.seen
    assert tb.host.refused == 6


def test_a_largest_transfer_costs_a_list_read_per_batch():
    """The largest transfer NVMe allows here (MDTS: 64 pages, 63 list entries) takes two list reads of up
    to 32 entries (three when its list chains), not one per page."""
    tb = PrpWalkerTB(batch=32, seed=6, backpressure=0.0)
    pages = 1 << spec.NVME.MDTS

    async def body(tb, ctx):
        for list_offset in (0, PAGE - 40 * SLOT):
            prp1, prp2, _, slots = tb.transfer(pages * PAGE, prp1=tb.rng.randrange(1 << 40) * PAGE,
                                               list_offset=list_offset)
            _, status, requests = await tb.check(ctx, prp1, prp2, pages * PAGE, all_slots=slots)
            assert status == Status.SUCCESS and len(requests) <= 3, [str(q) for q in requests]
    tb.run(body)


# -- the host-memory model itself (sim/harness/hostdma.py), driven by hand -----------------------------------
def run_initiator(body, memory=None, **model):
    """``body(ctx, port, host)`` as the initiator of a bare HostDmaSignature port the model answers."""
    port = HostDmaSignature().create()
    m = Module()
    m.domains.sync = ClockDomain()
    host = HostDmaModel(port, memory or HostMemory(), **model)
    sim = Simulator(m)
    sim.add_clock(1e-8)
    sim.add_process(host.process)

    async def initiator(ctx):
        await body(ctx, port, host)
    sim.add_testbench(initiator)
    sim.run()
    return host


async def handshake(ctx, valid_or_ready, *also):
    """Until the edge that sees ``valid_or_ready`` high; returns ``also`` as sampled there (plain ticks:
    a run the model stops leaves no generator half-closed)."""
    while True:
        _, _, high, *values = await ctx.tick().sample(valid_or_ready, *also)
        if high:
            return values


async def request(ctx, port, write, addr, nbytes):
    ctx.set(port.req.payload, {"write": write, "addr": addr, "bytes": nbytes})
    ctx.set(port.req.valid, 1)
    await handshake(ctx, port.req.ready)
    ctx.set(port.req.valid, 0)


async def write_words(ctx, port, words, lasts=None):
    lasts = lasts or [i == len(words) - 1 for i in range(len(words))]
    for word, last in zip(words, lasts):
        ctx.set(port.wdata.payload, {"data": word, "last": last, "error": 0})
        ctx.set(port.wdata.valid, 1)
        await handshake(ctx, port.wdata.ready)
    ctx.set(port.wdata.valid, 0)


async def take_done(ctx, port):
    ctx.set(port.done.ready, 1)
    (error,) = await handshake(ctx, port.done.valid, port.done.payload.error)
    ctx.set(port.done.ready, 0)
    return error


async def read_words(ctx, port, n):
    """(words, error flags, last flags) of a read's ``n`` words, taken with some backpressure."""
    words, errors, lasts, cycle = [], [], [], 0
    while len(words) < n:
        cycle += 1
        ctx.set(port.rdata.ready, cycle % 3 != 1)
        _, _, valid, ready, word = await ctx.tick().sample(port.rdata.valid, port.rdata.ready, port.rdata.payload)
        if valid and ready:
            words.append(word.data)
            errors.append(word.error)
            lasts.append(word.last)
    ctx.set(port.rdata.ready, 0)
    return words, errors, lasts


def test_the_host_memory_model_moves_words_and_refuses_pages():
    memory = HostMemory()
    base = memory.alloc(3 * PAGE)
    memory.refuse(base + 2 * PAGE)
    seen = {}

    async def body(ctx, port, host):
        await request(ctx, port, 1, base + PAGE - 16, 16)
        await write_words(ctx, port, [0x11111111, 0x22222222, 0x33333333, 0x44444444])
        seen["write"] = await take_done(ctx, port)
        await request(ctx, port, 0, base + PAGE - 12, 8)
        seen["read"] = await read_words(ctx, port, 2), await take_done(ctx, port)
        await request(ctx, port, 0, base + 2 * PAGE + 64, 12)
        seen["refused_read"] = await read_words(ctx, port, 3), await take_done(ctx, port)
        await request(ctx, port, 1, base + 2 * PAGE, 4)
        await write_words(ctx, port, [0x55555555])
        seen["refused_write"] = await take_done(ctx, port)

    host = run_initiator(body, memory, seed=7)
    assert seen["write"] == 0 and memory.read(base + PAGE - 16, 16) == bytes.fromhex("11111111222222223333333344444444")
    assert seen["read"] == (([0x22222222, 0x33333333], [0, 0], [0, 1]), 0)
    (words, errors, lasts), done_error = seen["refused_read"]
    assert errors == [0, 0, 1] and lasts == [0, 0, 1] and done_error == 1
    assert seen["refused_write"] == 1 and memory.read(base + 2 * PAGE - 4, 4) == bytes(4)
    assert (host.requests, host.reads, host.writes, host.refused) == (4, 2, 2, 2)
    assert (host.bytes_read, host.bytes_written) == (8, 16) and not host.busy
    assert [(q.write, q.addr, q.bytes, q.refused) for q in host.log][-1] == (True, base + 2 * PAGE, 4, True)


@pytest.mark.parametrize("write, addr, nbytes, lasts, message", [
    (0, 0x1002, 4, None, "address not dword aligned"),
    (0, 0x1000, 0, None, "bytes not a multiple of 4"),
    (0, 0x1000, 6, None, "bytes not a multiple of 4"),
    (0, 0x1000, 4100, None, "bytes not a multiple of 4"),
    (1, 0x1FF8, 16, None, "crosses a 4 KiB boundary"),
    (1, 0x1000, 12, [0, 1, 1], "last on write word 2 of 3"),
    (1, 0x1000, 12, [0, 0, 0], "write word 3 of 3 without last"),
])
def test_the_host_memory_model_fails_a_broken_initiator(write, addr, nbytes, lasts, message):
    async def body(ctx, port, host):
        await request(ctx, port, write, addr, nbytes)
        if write:
            await write_words(ctx, port, [0] * (nbytes // 4), lasts)
        await ctx.tick().repeat(4)

    with pytest.raises(HostDmaViolation, match=message):
        run_initiator(body, max_latency=2)
