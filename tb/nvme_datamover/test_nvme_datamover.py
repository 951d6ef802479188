"""The data mover (``rtl/nvme/datamover.py``) against the PRP rules and a byte-for-byte copy.

``DataMoverTB`` owns the mover and everything around it: host memory behind its DMA port
(``sim/harness/hostdma.py``: seeded latency and gaps, refusable pages), SoC memory behind its
Wishbone port (``sim/harness/wbmem.py``: seeded wait states, erring words), and a job driver with
random idle cycles and random backpressure on ``done``.  Host pages and SoC memory start full of
random bytes.  Each job is checked against :func:`~sim.harness.prp_reference.reference_walk`: the
data requests are its segments, in order; every byte of the transfer arrives where its segment puts
it (segment k at ``local`` plus the bytes before it); no other byte changes on either side; the
status is the reference's or the error's the test provoked.  After each error the next job must
work.
"""

import random

import pytest
from amaranth.sim import Simulator

from atomflash.hostmem import PAGE, HostMemory
from atomflash.spec import Status
from rtl.nvme.datamover import DataMover
from sim.harness.hostdma import HostDmaModel
from sim.harness.prp_reference import SLOT, reference_walk
from sim.harness.wbmem import WishboneMemoryModel

SOC_BASE = 0x4000_0000
MAX_PAGES = 64                               # MDTS: the largest transfer a command makes
SOC_SIZE = (MAX_PAGES + 2) * PAGE
LONG = 6                                     # pages of the longest random transfer
ENTRIES = PAGE // SLOT


class DataMoverTB:
    def __init__(self, *, batch=32, seed=0, idle=0.3, backpressure=0.3, host=None, wait=0.25, burst=0.7):
        self.dut = DataMover(batch=batch)
        self.rng = random.Random(seed)
        self.memory = HostMemory()
        self.host = HostDmaModel(self.dut.dma, self.memory, seed=seed + 1000, **(host or {}))
        self.soc = WishboneMemoryModel(self.dut.mem, self.rng.randbytes(SOC_SIZE), seed=seed + 2000, wait=wait,
                                       base=SOC_BASE, burst=burst)
        self.idle, self.backpressure = idle, backpressure
        self.used: set[int] = set()           # host pages handed out (data and lists)
        self.list_pages: set[int] = set()
        self.seen = {"jobs": 0, "job_gaps": 0, "done_stalls": 0, "chains": 0, "cycles": 0} | {
            s.name: 0 for s in Status}
        self.sim = Simulator(self.dut)
        self.sim.add_clock(1e-8)
        self.sim.add_process(self.host.process)
        self.sim.add_process(self.soc.process)

    def run(self, body):
        """Simulate ``body(tb, ctx)`` (a coroutine function), then check nothing moved after."""
        async def bench(ctx):
            await body(self, ctx)
            requests, accesses = len(self.host.log), self.soc.reads + self.soc.writes
            await ctx.tick().repeat(40)
            assert len(self.host.log) == requests, f"a request after the last status: {self.host.log[requests]}"
            assert self.soc.reads + self.soc.writes == accesses, "a Wishbone access after the last status"
        self.sim.add_testbench(bench)
        self.sim.run()

    # -- host memory: pages full of random bytes, PRP lists --------------------------------------------
    def page(self) -> int:
        while True:
            p = self.rng.randrange(1 << 40) * PAGE
            if p not in self.used:
                self.used.add(p)
                return p

    def data_page(self) -> int:
        p = self.page()
        self.memory.write(p, self.rng.randbytes(PAGE))
        return p

    def build_list(self, entries: list[int], start: int) -> list[int]:
        """The PRP list of ``entries`` from ``start`` (8-byte aligned); every slot written, in reading order."""
        slot, slots, left = start, [], list(entries)
        self.list_pages.add(start // PAGE)
        while left:
            if slot % PAGE == PAGE - SLOT and len(left) > 1:      # the page's last slot chains
                nxt = self.page()
                self.list_pages.add(nxt // PAGE)
                self.memory.write(slot, nxt.to_bytes(8, "little"))
                slots.append(slot)
                slot = nxt
                continue
            self.memory.write(slot, left.pop(0).to_bytes(8, "little"))
            slots.append(slot)
            slot += SLOT
        return slots

    def transfer(self, nbytes, *, prp1=None, list_offset=None):
        """PRP1/PRP2 for ``nbytes`` over fresh random pages (a list from ``list_offset`` in its page when
        more than one page follows PRP1's): (prp1, prp2, data pages after PRP1's, list slots)."""
        r = self.rng
        prp1 = self.data_page() + 4 * r.randrange(PAGE // 4) if prp1 is None else prp1
        pages = -(-(nbytes - min(nbytes, PAGE - prp1 % PAGE)) // PAGE)
        data = [self.data_page() for _ in range(pages)]
        if pages <= 1:
            return prp1, data[0] if data else 0, data, []
        if list_offset is None:
            list_offset = r.choice([0, SLOT * r.randrange(ENTRIES), PAGE - SLOT * r.randint(1, min(pages, 3))])
        slots = self.build_list(data, self.page() + list_offset)
        self.seen["chains"] += len({s // PAGE for s in slots}) - 1
        return prp1, slots[0], data, slots

    def length(self, pages=LONG):
        """Mostly under a page or two (pysim moves about a page a second), sometimes up to ``pages``."""
        kind = self.rng.random()
        if kind < 0.5:
            return 4 * self.rng.randint(1, PAGE // 8)
        if kind < 0.85:
            return 4 * self.rng.randint(PAGE // 8, 2 * PAGE // 4)
        return 4 * self.rng.randint(2 * PAGE // 4, pages * PAGE // 4)

    def local(self, nbytes):
        return SOC_BASE + 4 * self.rng.randrange((SOC_SIZE - nbytes) // 4 + 1)

    # -- one job ---------------------------------------------------------------------------------------
    @staticmethod
    async def within(ctx, signal, cycles, what):
        """Until an edge sees ``signal`` high, counting the cycles; fails after ``cycles``."""
        for n in range(1, cycles + 1):
            _, _, high = await ctx.tick().sample(signal)
            if high:
                return n
        raise AssertionError(f"{what} within {cycles} cycles")

    async def move(self, ctx, to_host, prp1, prp2, nbytes, local):
        """One job: (status, the data requests it made as (write, addr, bytes), cycles from taken to done)."""
        d, r = self.dut, self.rng
        first_request = len(self.host.log)
        if r.random() < self.idle:
            self.seen["job_gaps"] += 1
            await ctx.tick().repeat(r.randint(1, 4))
        ctx.set(d.job.payload, {"to_host": to_host, "prp1": prp1, "prp2": prp2, "bytes": nbytes, "local": local})
        ctx.set(d.job.valid, 1)
        await self.within(ctx, d.job.ready, 100, "the job was not taken")
        ctx.set(d.job.valid, 0)
        cycles = await self.within(ctx, d.done.valid, 2000 + 8 * nbytes,
                                   f"no status for {nbytes} bytes at {prp1:#x}/{prp2:#x}")
        if r.random() < self.backpressure:
            self.seen["done_stalls"] += 1
            await ctx.tick().repeat(r.randint(1, 4))
        status = Status(ctx.get(d.done.payload.status))
        ctx.set(d.done.ready, 1)
        await ctx.tick()
        ctx.set(d.done.ready, 0)
        assert not self.host.busy, "status given while a request is outstanding"
        assert not ctx.get(d.mem.cyc), "status given while a Wishbone cycle is under way"
        self.seen["jobs"] += 1
        self.seen["cycles"] += cycles
        self.seen[status.name] += 1
        data = [(int(q.write), q.addr, q.bytes) for q in self.host.log[first_request:]
                if q.addr // PAGE not in self.list_pages]
        return status, data, cycles

    async def check(self, ctx, to_host, prp1, prp2, nbytes, local=None, *, status=None, moved=None,
                    requests=None, upto=None, soc_skip=None, what=""):
        """Move and compare with the reference.  By default every reference segment moves and the status
        is the reference's; an error test gives the ``status`` it provokes, the reference segments
        ``moved`` whole, the data ``requests`` made (a count, or a check of the count), or the transfer
        offset ``upto`` which the bytes moved (to SoC memory: nothing from there on; to the host: zeros
        from there to the end of the requests made), and a ``soc_skip`` range of transfer offsets whose
        SoC bytes are not to be trusted.
        Returns (status, data requests)."""
        local = self.local(nbytes) if local is None else local
        segments, want_status, _ = reference_walk(self.memory, prp1, prp2, nbytes)
        status = want_status if status is None else status
        moved = len(segments) if moved is None else moved
        requests = moved if requests is None else requests
        pages = sorted({a // PAGE * PAGE for a, _, _ in segments})
        host_before = {p: self.read_host(p) for p in pages}
        soc_before = bytes(self.soc.data)
        soc_accesses = self.soc.reads, self.soc.writes

        got, data, _ = await self.move(ctx, to_host, prp1, prp2, nbytes, local)
        label = (f"{what} {'to host' if to_host else 'to SoC'} prp1={prp1:#x} prp2={prp2:#x} bytes={nbytes} "
                 f"local={local:#x}")
        assert got == status, f"{label}: status {got.name}, expected {status.name}"
        wanted = [(to_host, a, n) for a, n, _ in segments]
        assert data == wanted[:len(data)], f"{label}: data requests {fmt(data)} are not the segments' {fmt(wanted)}"
        if callable(requests):
            requests(len(data), label)
        else:
            assert len(data) == requests, f"{label}: {len(data)} data requests, expected {requests}"

        # the bytes: what the moved segments carry, nothing else
        host_after = {p: bytearray(host_before[p]) for p in pages}
        soc_after = bytearray(soc_before)
        offset = 0
        for i, (a, n, _) in enumerate(segments):
            at, page, off = local - SOC_BASE + offset, a // PAGE * PAGE, a % PAGE
            keep = (n if i < moved else 0) if upto is None else max(0, min(n, upto - offset))
            if to_host and i < len(data) and (i < moved or upto is not None):
                host_after[page][off:off + n] = soc_before[at:at + keep] + bytes(n - keep)
            elif not to_host:
                soc_after[at:at + keep] = host_before[page][off:off + keep]
            offset += n
        if soc_skip is not None:
            start, stop = local - SOC_BASE + soc_skip.start, local - SOC_BASE + soc_skip.stop
            soc_after[start:stop] = self.soc.data[start:stop]
        for p in pages:
            got_page = self.read_host(p)
            assert got_page == host_after[p], f"{label}: host page {p:#x}: {diff(got_page, host_after[p], p)}"
        assert self.soc.data == soc_after, f"{label}: SoC memory: {diff(self.soc.data, soc_after, SOC_BASE)}"
        if status == Status.SUCCESS:
            reads, writes = self.soc.reads - soc_accesses[0], self.soc.writes - soc_accesses[1]
            assert (reads, writes) == ((nbytes // 4, 0) if to_host else (0, nbytes // 4)), (
                f"{label}: {reads} Wishbone reads and {writes} writes for {nbytes // 4} words")
        return got, data

    def read_host(self, page):
        refused = page // PAGE in self.memory.refused
        self.memory.refused.discard(page // PAGE)
        raw = self.memory.read(page, PAGE)
        if refused:
            self.memory.refused.add(page // PAGE)
        return raw


def fmt(requests):
    shown = ", ".join(f"({w}, {a:#x}, {n})" for w, a, n in requests[:6])
    return f"[{shown}{', ...' if len(requests) > 6 else ''}] ({len(requests)})"


def diff(got, want, base=0):
    for i, (x, y) in enumerate(zip(got, want)):
        if x != y:
            return f"first difference at {base + i:#x}: {x:#04x}, expected {y:#04x}"
    return "lengths differ"


def between(low, high):
    """A ``requests`` check: at least ``low`` and at most ``high`` data requests."""
    def check(n, label):
        assert low <= n <= high, f"{label}: {n} data requests, expected {low} .. {high}"
    return check


# -- tests ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize("batch, seed", [(32, 1), (2, 2), (32, 3)])
def test_random_transfers_move_every_byte(batch, seed):
    """Both directions, 4 bytes to ``LONG`` pages, PRP1 anywhere dword aligned, PRP2 a page or a list
    (from anywhere in its page, often near its end, so lists chain), the staging area anywhere dword
    aligned."""
    tb = DataMoverTB(batch=batch, seed=seed, idle=0.5, backpressure=0.5)
    jobs = 6

    async def body(tb, ctx):
        for _ in range(jobs):
            nbytes = tb.length()
            prp1, prp2, _, _ = tb.transfer(nbytes)
            await tb.check(ctx, tb.rng.getrandbits(1), prp1, prp2, nbytes)
    tb.run(body)
    assert tb.seen["SUCCESS"] == jobs and tb.seen["job_gaps"] and tb.seen["done_stalls"], tb.seen
    assert tb.soc.waits and tb.host.reads and tb.host.writes, tb.seen


def test_edges_chains_and_zero_bytes():
    """PRP1's page exactly, a word into PRP2, a list of two entries, a list that chains at once (PRP2 on
    its page's last slot), a word before and after a page boundary, the staging
    area at either end of SoC memory, each both ways; then a job of zero bytes: SUCCESS, nothing moved."""
    tb = DataMoverTB(seed=4, host={"max_latency": 4})
    r = tb.rng
    cases = []
    for off in (0, PAGE - 4):
        head = PAGE - off
        for nbytes in (4, head, head + 4, head + PAGE + 8):
            cases.append((nbytes, off, None))
    cases.append((2 * PAGE + 8, PAGE - 4, PAGE - SLOT))          # three entries, the first slot chains

    async def body(tb, ctx):
        for i, (nbytes, off, list_offset) in enumerate(cases):
            for to_host in (0, 1) if nbytes <= PAGE else (i % 2,):
                prp1, prp2, _, _ = tb.transfer(nbytes, prp1=tb.data_page() + off, list_offset=list_offset)
                local = SOC_BASE if i % 3 == 0 else SOC_BASE + SOC_SIZE - nbytes if i % 3 == 1 else None
                await tb.check(ctx, to_host, prp1, prp2, nbytes, local, what=f"list at +{list_offset}")
        for to_host in (0, 1):
            accesses = tb.soc.reads + tb.soc.writes
            status, data = await tb.check(ctx, to_host, tb.data_page(), r.getrandbits(64), 0)
            assert status == Status.SUCCESS and data == [] and tb.soc.reads + tb.soc.writes == accesses
    tb.run(body)
    assert tb.seen["chains"] == 1 and tb.seen["SUCCESS"] == tb.seen["jobs"], tb.seen


def test_prp_errors_stop_after_the_pages_before_them():
    """PRP1 off a dword, a list entry or chain pointer off its page (MISALIGNED_BUFFER), a list page the
    host refuses (DATA_TRANSFER_ERROR): the segments before the fault move, nothing after it; each time
    the next job works."""
    tb = DataMoverTB(batch=8, seed=5)
    r = tb.rng

    async def body(tb, ctx):
        for to_host in (0, 1):
            nbytes = tb.length()
            prp1, prp2, _, _ = tb.transfer(nbytes)
            status, data = await tb.check(ctx, to_host, prp1 + r.randint(1, 3), prp2, nbytes)
            assert status == Status.MISALIGNED_BUFFER and data == []
            # a data entry off its page
            nbytes = 4 * r.randint(2 * PAGE // 4 + 2, 4 * PAGE // 4)
            prp1, prp2, pages, slots = tb.transfer(nbytes, prp1=tb.data_page() + PAGE - 4)
            bad = r.randrange(len(pages))
            entry = [s for s in slots if int.from_bytes(tb.memory.read(s, SLOT), "little") == pages[bad]][0]
            tb.memory.write(entry, (pages[bad] + 4 * r.randrange(1, PAGE // 4)).to_bytes(8, "little"))
            status, data = await tb.check(ctx, to_host, prp1, prp2, nbytes)
            assert status == Status.MISALIGNED_BUFFER and len(data) == 1 + bad
            # a chain pointer off its page
            nbytes = 4 * r.randint(2 * PAGE // 4 + 2, 4 * PAGE // 4)
            prp1, prp2, pages, slots = tb.transfer(nbytes, prp1=tb.data_page() + PAGE - 4,
                                                   list_offset=PAGE - SLOT * r.randint(1, 2))
            chain = next(s for i, s in enumerate(slots) if s % PAGE == PAGE - SLOT and i < len(slots) - 1)
            pointer = int.from_bytes(tb.memory.read(chain, SLOT), "little")
            tb.memory.write(chain, (pointer + SLOT * r.randrange(1, ENTRIES)).to_bytes(8, "little"))
            status, data = await tb.check(ctx, to_host, prp1, prp2, nbytes)
            assert status == Status.MISALIGNED_BUFFER and len(data) == 1 + slots.index(chain)
            # a list page refused
            nbytes = 4 * r.randint(2 * PAGE // 4 + 2, 4 * PAGE // 4)
            prp1, prp2, pages, slots = tb.transfer(nbytes, prp1=tb.data_page() + PAGE - 4,
                                                   list_offset=PAGE - SLOT * r.randint(1, 2))
            page = r.choice(sorted({s // PAGE for s in slots}))
            tb.memory.refuse(page * PAGE)
            status, _ = await tb.check(ctx, to_host, prp1, prp2, nbytes)
            tb.memory.refused.discard(page)
            assert status == Status.DATA_TRANSFER_ERROR
            nbytes = tb.length(pages=2)
            prp1, prp2, _, _ = tb.transfer(nbytes)
            status, _ = await tb.check(ctx, to_host, prp1, prp2, nbytes)
            assert status == Status.SUCCESS
    tb.run(body)
    assert tb.seen["MISALIGNED_BUFFER"] == 6 and tb.seen["DATA_TRANSFER_ERROR"] == 2, tb.seen


@pytest.mark.parametrize("to_host", [0, 1])
def test_a_refused_data_page_is_a_data_transfer_error(to_host):
    """The host refuses one data page: the segments before it move, its request is the last; a refused
    read's words may sit in the staging area (the status says so), a refused write stored nothing; the
    status stays DATA_TRANSFER_ERROR when the walker meets a misaligned entry later; and the next job
    works."""
    tb = DataMoverTB(seed=6 + to_host)
    r = tb.rng

    async def body(tb, ctx):
        for round in range(3):
            nbytes = 4 * r.randint(PAGE // 4, 3 * PAGE // 4)
            prp1, prp2, pages, slots = tb.transfer(nbytes)
            bad = r.randrange(1 + len(pages))
            if round == 0:      # PRP1's page refused and the list's last entry off its page: the first error wins
                nbytes = 2 * PAGE + 8
                prp1, prp2, pages, slots = tb.transfer(nbytes, prp1=tb.data_page() + PAGE - 4)
                bad = 0
                tb.memory.write(slots[-1], (pages[-1] + PAGE // 2).to_bytes(8, "little"))
            refused = ([prp1 // PAGE * PAGE] + pages)[bad]
            tb.memory.refuse(refused)
            head = min(nbytes, PAGE - prp1 % PAGE)
            start = 0 if bad == 0 else head + (bad - 1) * PAGE
            stop = min(nbytes, head + bad * PAGE)
            status, data = await tb.check(ctx, to_host, prp1, prp2, nbytes, status=Status.DATA_TRANSFER_ERROR,
                                          moved=bad, requests=bad + 1,
                                          soc_skip=None if to_host else range(start, stop))
            tb.memory.refused.discard(refused // PAGE)
            nbytes = tb.length(pages=2)
            prp1, prp2, _, _ = tb.transfer(nbytes)
            status, _ = await tb.check(ctx, to_host, prp1, prp2, nbytes)
            assert status == Status.SUCCESS
    tb.run(body)
    assert tb.seen["DATA_TRANSFER_ERROR"] == 3 and tb.host.refused == 3, tb.seen


@pytest.mark.parametrize("to_host", [0, 1])
def test_a_wishbone_error_is_an_internal_error(to_host):
    """A word of the staging area ends its access with err: INTERNAL_ERROR.  To SoC memory, the words
    before it are written and none from it on; to the host, the words before it are sent, the request
    under way is finished with zeros and no other follows.  The next job works."""
    tb = DataMoverTB(seed=8 + to_host)
    r = tb.rng

    async def body(tb, ctx):
        for _ in range(3):
            nbytes = 4 * r.randint(PAGE // 4, 3 * PAGE // 4)
            prp1, prp2, _, _ = tb.transfer(nbytes)
            local = tb.local(nbytes)
            bad = 4 * r.randrange(nbytes // 4)
            tb.soc.error_at(range(local + bad, local + bad + 4))
            segments, _, _ = reference_walk(tb.memory, prp1, prp2, nbytes)
            ends = [sum(n for _, n, _ in segments[:i + 1]) for i in range(len(segments))]
            holding = next(i for i, end in enumerate(ends) if end > bad)   # the segment with the bad word
            # to the host, the read-ahead may meet the error while the segment before is still being sent;
            # to SoC memory, the host side may be a request or more ahead of the writes
            requests = between(holding, holding + 1) if to_host else between(holding + 1, len(segments))
            await tb.check(ctx, to_host, prp1, prp2, nbytes, local, status=Status.INTERNAL_ERROR, moved=0,
                           requests=requests, upto=bad)
            tb.soc.clear_errors()
            nbytes = tb.length(pages=2)
            prp1, prp2, _, _ = tb.transfer(nbytes)
            status, _ = await tb.check(ctx, to_host, prp1, prp2, nbytes)
            assert status == Status.SUCCESS
    tb.run(body)
    assert tb.seen["INTERNAL_ERROR"] == 3 and tb.soc.errors == 3, tb.seen


def test_a_length_not_in_words_is_refused_whole():
    """The controller never builds such a job: INTERNAL_ERROR at once, no request, no access."""
    tb = DataMoverTB(seed=10)

    async def body(tb, ctx):
        for to_host in (0, 1):
            prp1, prp2, _, _ = tb.transfer(PAGE + 64, prp1=tb.data_page() + PAGE - 32)
            accesses = tb.soc.reads + tb.soc.writes
            status, data = await tb.check(ctx, to_host, prp1, prp2, PAGE + 62, status=Status.INTERNAL_ERROR,
                                          moved=0)
            assert data == [] and tb.soc.reads + tb.soc.writes == accesses
            await tb.check(ctx, to_host, prp1, prp2, PAGE + 64)
    tb.run(body)


@pytest.mark.parametrize("burst, least", [(0.0, 0.45), (1.0, 0.9)])
@pytest.mark.parametrize("to_host", [0, 1])
def test_throughput_with_no_wait_states(to_host, burst, least):
    """With SoC memory answering the cycle after each access and a host that never stalls, a classic
    Wishbone port moves at most a word every two cycles, a bursting one a word a cycle; the mover must
    come close: at least 0.45 (0.9) words per cycle over a page, and over three pages from the middle
    of one (three segments, a list)."""
    tb = DataMoverTB(seed=11, idle=0, backpressure=0, wait=0, burst=burst,
                     host={"max_latency": 0, "gap": 0, "backpressure": 0})
    rates = {}

    async def body(tb, ctx):
        for pages, off in ((1, 0), (3, PAGE // 2)):
            nbytes = pages * PAGE
            prp1, prp2, _, _ = tb.transfer(nbytes, prp1=tb.data_page() + off, list_offset=0)
            _, _, cycles = await tb.move(ctx, to_host, prp1, prp2, nbytes, SOC_BASE)
            rates[pages, off] = (nbytes // 4 / cycles, cycles / pages)
    tb.run(body)
    for (pages, off), (rate, per_page) in rates.items():
        print(f"{'to host' if to_host else 'to SoC'}: {pages} pages at +{off}: {per_page:.0f} cycles per 4 KiB, "
              f"{rate:.3f} words per cycle")
        assert rate >= least, (pages, off, rate)
    assert (tb.soc.bursts > 0) == (burst > 0)
