"""cocotb side of ``make bench-ftl``: the FTL core, realistic profile, 2
channels x 4 ways, measured in simulated cycles.  Writes its figures as JSON
to ``$FTL_BENCH_OUT``; ``sim/bench_ftl.py`` turns them into docs."""

import json
import os
import random

import cocotb
from cocotb.triggers import ClockCycles

from atomflash import spec
from atomflash.spec import Hint, Opcode, Status
from sim.harness.ftl_core import MAX_OPEN_TX
from sim.harness.ftl_tb import FtlCoreTB

CHANNELS, WAYS = 2, 4
SLOTS = int(os.environ["FTL_SLOTS"])
SLOT_WORDS = int(os.environ["NANDTB_SLOT_WORDS"])
CAPACITY = 8192
PAGES = int(os.environ.get("FTL_BENCH_PAGES", "512"))
READS = PAGES // 2          # the map-cache runs (bench_reads measures throughput on its own build)
QD = int(os.environ.get("FTL_BENCH_QD", "16"))
BUFFERS = 64
CACHE_PAGES = int(os.environ.get("FTL_CACHE_PAGES", "0"))     # the write-cache build (bench_cache)
HOT_WRITES = 2 * PAGES          # per hot-spot trace
CKPT_EVERY = 256                # a HINT(CHECKPOINT) after every this many writes (the paper's checkpoint interval)


async def programs(tb) -> int:
    return sum([await tb.chan.stat(i, "PROGRAMS") for i in range(tb.dies)])


def zipf_sampler(rng, n, s=0.99):
    weights = [1 / (k + 1) ** s for k in range(n)]
    perm = list(range(n))
    rng.shuffle(perm)
    return lambda: perm[rng.choices(range(n), weights)[0]]


def hot_traces() -> dict[str, list[int]]:
    """Hot-spot overwrite traces (the same in every build): Zipf over 1,024 LBAs, and 80/20 over 256
    (80% of the writes to the first 20% of the LBAs)."""
    rng = random.Random(11)
    zipf = zipf_sampler(rng, 1024)
    hot = 256 // 5

    def eighty_twenty():
        return rng.randrange(hot) if rng.random() < 0.8 else rng.randrange(hot, 256)
    return {"zipf": [zipf() for _ in range(HOT_WRITES)], "80_20": [eighty_twenty() for _ in range(HOT_WRITES)]}


def cache_counters(dut) -> dict:
    return {k: int(getattr(dut, f"cache_{k}").value) for k in ("in", "coalesced", "destaged", "stripes")}


async def run_hot(tb, out, bufs, key, ckpt_every=CKPT_EVERY):
    """Each hot-spot trace at QD 16, a HINT(CHECKPOINT) every ``ckpt_every`` writes and at the end (so
    the whole trace is durable when the run ends): cycles, flash programs, the cache's counters."""
    for name, lbas in hot_traces().items():
        cmds = []
        for i, lba in enumerate(lbas):
            cmds.append(dict(opcode=Opcode.WRITE, lba=lba, nlb=1, buf=bufs[i % len(bufs)]))
            if (i + 1) % ckpt_every == 0 or i + 1 == len(lbas):
                cmds.append(dict(opcode=Opcode.HINT, hint=Hint.CHECKPOINT))
        p0, c0 = await programs(tb), cache_counters(tb.dut)
        cycles, st, _ = await tb.run_queue(cmds, QD)
        assert set(st) == {Status.SUCCESS}
        c1 = cache_counters(tb.dut)
        out[f"hot_{name}_{key}"] = dict(cycles=cycles, programs=await programs(tb) - p0, writes=len(lbas),
                                        distinct=len(set(lbas)), **{k: c1[k] - c0[k] for k in c1})


@cocotb.test()
async def bench_cache(dut):
    """The hot-spot traces on the write-cache build (``FTL_CACHE_PAGES`` pages)."""
    assert CACHE_PAGES, "run on the write-cache build"
    tb = await FtlCoreTB.create(dut, channels=CHANNELS, ways=WAYS, slots=SLOTS, slot_words=SLOT_WORDS,
                                capacity=CAPACITY, blocks_per_die=12, profile="realistic", name="bench_cache")
    tb.poll_cycles = 128
    page = tb.page
    bufs = [tb.data + i * page for i in range(8)]
    for i, b in enumerate(bufs):
        tb.write_bytes(b, bytes([i]) * page)
    cache_base = tb.data + len(bufs) * page
    assert cache_base + CACHE_PAGES * page <= 4 << 17, "the cache must fit the harness memory"
    dut.cache_base.value = cache_base
    out = {"cache_pages": CACHE_PAGES}
    await run_hot(tb, out, bufs, "cache")
    # the same traces with the checkpoint at the end only: what the intermediate drains cost
    await run_hot(tb, out, bufs, "cache_end", ckpt_every=HOT_WRITES)
    with open(os.environ["FTL_BENCH_OUT"], "w") as f:
        json.dump(out, f, indent=1)


@cocotb.test()
async def bench(dut):
    tb = await FtlCoreTB.create(dut, channels=CHANNELS, ways=WAYS, slots=SLOTS, slot_words=SLOT_WORDS,
                                capacity=CAPACITY, blocks_per_die=12, profile="realistic", name="bench")
    tb.poll_cycles = 128         # 1.28 us: far below a page's time, so the queue stays full
    rng = random.Random(7)
    page = tb.page
    bufs = [tb.data + i * page for i in range(BUFFERS)]
    for i, b in enumerate(bufs):
        tb.write_bytes(b, bytes([i]) * page)
    lists = tb.data + BUFFERS * page
    out = {"clk_hz": spec.NAND_CLK_HZ, "pages": PAGES, "reads": READS, "qd": QD, "slots": SLOTS, "channels": CHANNELS,
           "ways": WAYS, "profile": "realistic"}

    # 4 KiB random writes at QD 16
    lbas = [rng.randrange(CAPACITY) for _ in range(PAGES)]
    p0 = await programs(tb)
    cycles, st, _ = await tb.run_queue([dict(opcode=Opcode.WRITE, lba=lba, nlb=1, buf=bufs[i % BUFFERS])
                                      for i, lba in enumerate(lbas)], QD)
    assert set(st) == {Status.SUCCESS}
    out["random_write"] = dict(cycles=cycles, programs=await programs(tb) - p0)
    # and at QD 8, where fewer commands in flight than publisher slots leave the bus idle between pages
    p0 = await programs(tb)
    cycles, st, _ = await tb.run_queue([dict(opcode=Opcode.WRITE, lba=rng.randrange(CAPACITY), nlb=1,
                                             buf=bufs[i % BUFFERS]) for i in range(PAGES)], 8)
    assert set(st) == {Status.SUCCESS}
    out["random_write_qd8"] = dict(cycles=cycles, qd=8, programs=await programs(tb) - p0)

    # atomic groups of 8 and 64 pages (the same number of pages), lists in memory
    for n in (8, 64):
        groups = PAGES // n
        cmds = []
        for g in range(groups):
            members = rng.sample(range(CAPACITY), n)
            addr = lists + (g % 4) * 64 * spec.ATOMIC_ENTRY.size
            cmds.append((addr, b"".join(spec.ATOMIC_ENTRY.pack(lba=lba, buf=bufs[k % BUFFERS])
                                        for k, lba in enumerate(members))))
        p0 = await programs(tb)
        start = int(dut.cycle.value)
        inflight = []
        for g, (addr, entries) in enumerate(cmds):
            # a list buffer is rewritten only once the group that used it completed
            while len(inflight) >= min(QD, 4):
                cid = inflight.pop(0)
                assert (await tb.wait(cid))["status"] == Status.SUCCESS
            tb.write_bytes(addr, entries)
            inflight.append(await tb.submit(opcode=Opcode.ATOMIC_WRITE, list=addr, nlist=n))
        for cid in inflight:
            assert (await tb.wait(cid))["status"] == Status.SUCCESS
        out[f"atomic_{n}"] = dict(cycles=int(dut.cycle.value) - start, programs=await programs(tb) - p0,
                                  groups=groups)

    # append-then-remap: APPENDs of 8 pages, each REMAPped as soon as its token is back (4 appends in flight):
    # the token's MAC is minted beside the append's programs and checked by the REMAP
    appends, k = PAGES // 8, 8
    p0 = await programs(tb)
    start = int(dut.cycle.value)
    inflight, remaps = [], []

    async def remap_when_appended(cid):
        """The append's token back, REMAPped at once (4 REMAP lists in turn, 4 REMAPs in flight)."""
        cpl = await tb.wait(cid)
        assert cpl["status"] == Status.SUCCESS
        if len(remaps) >= 4:      # the REMAP that used this list before is done with it
            assert (await tb.wait(remaps[-4]))["status"] == Status.SUCCESS
        addr = lists + (len(remaps) % 4) * 64 * spec.REMAP_ENTRY.size
        tb.write_bytes(addr, spec.REMAP_ENTRY.pack(lba=rng.randrange(CAPACITY - k), token=cpl["result"], nlb=k))
        remaps.append(await tb.submit(opcode=Opcode.REMAP, list=addr, nlist=1))

    for a in range(appends):
        while len(inflight) >= 4:
            await remap_when_appended(inflight.pop(0))
        inflight.append(await tb.submit(opcode=Opcode.APPEND, nlb=k, buf=bufs[a % (BUFFERS - k)]))
    for cid in inflight:
        await remap_when_appended(cid)
    for cid in remaps[-4:]:
        assert (await tb.wait(cid))["status"] == Status.SUCCESS
    out["append_remap_8"] = dict(cycles=int(dut.cycle.value) - start, programs=await programs(tb) - p0,
                                 appends=appends)

    # transactions of k pages: one TX_WRITE of k pages then TX_COMMIT (a COMMIT record), or one TX_WRITE marked
    # final (the commit rides on its last page); MAX_OPEN_TX transactions in flight, the same number of pages
    final_flag = spec.CMD.compose("flags", tx_final=1)
    for k in (1, 8, 64):
        for final in (False, True):
            cmds = []
            for i in range(PAGES // k):
                tid, lba = 1 + i % MAX_OPEN_TX, rng.randrange(CAPACITY - k)
                cmds.append(dict(opcode=Opcode.TX_WRITE, tid=tid, lba=lba, nlb=k, buf=bufs[0],
                                 flags=final_flag if final else 0))
                if not final:
                    cmds.append(dict(opcode=Opcode.TX_COMMIT, tid=tid))
            p0 = await programs(tb)
            cycles, st, _ = await tb.run_queue(cmds, MAX_OPEN_TX * (1 if final else 2))
            assert set(st) == {Status.SUCCESS}, st
            out[f"tx_{k}_{'final' if final else 'commit'}"] = dict(cycles=cycles, programs=await programs(tb) - p0,
                                                                   transactions=PAGES // k)

    # the hot-spot overwrite traces without the write cache (bench_cache runs them with it)
    await run_hot(tb, out, bufs, "nocache")

    # map cache: reads only, uniform and Zipf over the whole capacity
    for name, pick in (("uniform", lambda: rng.randrange(CAPACITY)), ("zipf", zipf_sampler(rng, CAPACITY))):
        h0, m0 = int(dut.map_hits.value), int(dut.map_misses.value)
        cycles, st, _ = await tb.run_queue([dict(opcode=Opcode.READ, lba=pick(), nlb=1, buf=bufs[i % BUFFERS])
                                          for i in range(READS)], 8)
        assert set(st) == {Status.SUCCESS}
        out[f"reads_{name}"] = dict(cycles=cycles, hits=int(dut.map_hits.value) - h0,
                                    misses=int(dut.map_misses.value) - m0)

    # read latency of a written page at QD 1: map hit (read it twice) and miss (a cold line)
    tb.poll_cycles = 4           # latency to within 4 cycles
    samples = []
    for k in range(8):
        lba = lbas[k]
        for kind in ("miss", "hit"):
            if kind == "miss":
                # evict its map line: five other lines of the same set (4 ways, round-robin victim)
                for j in range(1, 6):
                    assert (await tb.do(opcode=Opcode.READ, lba=(lba + j * 512) % CAPACITY, nlb=1,
                                        buf=bufs[1]))["status"] == Status.SUCCESS
            m0 = int(dut.map_misses.value)
            start = int(dut.cycle.value)
            assert (await tb.do(opcode=Opcode.READ, lba=lba, nlb=1, buf=bufs[0]))["status"] == Status.SUCCESS
            samples.append(dict(cycles=int(dut.cycle.value) - start, map_miss=int(dut.map_misses.value) - m0))
    out["read_latency"] = samples
    with open(os.environ["FTL_BENCH_OUT"], "w") as f:
        json.dump(out, f, indent=1)


MLC_QD1_WRITES = 64


@cocotb.test()
async def bench_mlc(dut):
    """MLC paired pages (rtl/ftl/pairing.py): the NAND models pair pages (``mlc_paired``), the core's
    ``mlc`` is on.  4 KiB random writes at QD 16 and at QD 1 (the host submits the next write
    ``host_gap`` cycles after a completion), and the same QD 1 writes with ``mlc`` off for
    comparison: cycles, flash programs and PAD pages of each."""
    out = {}
    for mlc in (1, 0):
        tb = await FtlCoreTB.create(dut, channels=CHANNELS, ways=WAYS, slots=SLOTS, slot_words=SLOT_WORDS,
                                    capacity=CAPACITY, blocks_per_die=12, profile="realistic", name=f"mlc{mlc}",
                                    mlc_paired=1)
        dut.mlc.value = mlc
        tb.poll_cycles = 128
        rng = random.Random(17)
        page = tb.page
        bufs = [tb.data + i * page for i in range(BUFFERS)]
        for i, b in enumerate(bufs):
            tb.write_bytes(b, bytes([i]) * page)
        await ClockCycles(dut.clk, 2000)         # an idle log: the pre-pads of a fresh device
        runs = [("qd1", 1, MLC_QD1_WRITES)] + ([("qd16", QD, PAGES)] if mlc else [])
        for name, depth, n in runs:
            p0, pad0 = await programs(tb), int(dut.pad_pages.value)
            cycles, st, _ = await tb.run_queue([dict(opcode=Opcode.WRITE, lba=rng.randrange(CAPACITY), nlb=1,
                                                   buf=bufs[i % BUFFERS]) for i in range(n)], depth)
            assert set(st) == {Status.SUCCESS}
            await ClockCycles(dut.clk, 2000)     # the idle log's pads after the last write
            out[f"{name}_{'mlc' if mlc else 'slc'}"] = dict(
                writes=n, qd=depth, cycles=cycles, programs=await programs(tb) - p0,
                pads=int(dut.pad_pages.value) - pad0)
    out["host_gap"] = 128
    with open(os.environ["FTL_BENCH_OUT"], "w") as f:
        json.dump(out, f, indent=1)


@cocotb.test()
async def bench_mlc_cache(dut):
    """MLC paired pages on the write-cache build: 4 KiB random writes at QD 16 over the whole capacity
    (few repeats, so the cache coalesces little), then a FLUSH, so every write is durable when the run
    ends.  The cache acknowledges a write once its page is in SoC memory, and destages up to its
    ``CACHE_PAGES`` pages at once: more pages in flight than the host's 16, which a lower page's wait for
    its word line's upper page needs."""
    assert CACHE_PAGES, "run on the write-cache build"
    tb = await FtlCoreTB.create(dut, channels=CHANNELS, ways=WAYS, slots=SLOTS, slot_words=SLOT_WORDS,
                                capacity=CAPACITY, blocks_per_die=12, profile="realistic", name="mlc_cache",
                                mlc_paired=1)
    dut.mlc.value = 1
    tb.poll_cycles = 128
    rng = random.Random(17)
    page = tb.page
    bufs = [tb.data + i * page for i in range(8)]
    for i, b in enumerate(bufs):
        tb.write_bytes(b, bytes([i]) * page)
    dut.cache_base.value = tb.data + len(bufs) * page
    await ClockCycles(dut.clk, 2000)
    cmds = [dict(opcode=Opcode.WRITE, lba=rng.randrange(CAPACITY), nlb=1, buf=bufs[i % len(bufs)])
            for i in range(PAGES)]
    p0, pad0, c0 = await programs(tb), int(dut.pad_pages.value), cache_counters(dut)
    cycles, st, _ = await tb.run_queue(cmds, QD)
    flush_cycles, st2, _ = await tb.run_queue([dict(opcode=Opcode.FLUSH)], 1)    # after every write completed
    assert set(st + st2) == {Status.SUCCESS}, (st, st2)
    cycles += flush_cycles
    c1 = cache_counters(dut)
    out = dict(writes=PAGES, qd=QD, cycles=cycles, flush_cycles=flush_cycles, programs=await programs(tb) - p0, cache_pages=CACHE_PAGES,
               pads=int(dut.pad_pages.value) - pad0, **{k: c1[k] - c0[k] for k in c1})
    with open(os.environ["FTL_BENCH_OUT"], "w") as f:
        json.dump(out, f, indent=1)


READ_REGION = int(os.environ.get("FTL_BENCH_READ_REGION", "512"))    # LBAs written first, then read


@cocotb.test()
async def bench_reads(dut):
    """Reads at the limit, on a build with several read slots per channel (``read_slots``): a region of
    ``READ_REGION`` LBAs written sequentially, then random 4 KiB reads over it at QD 1, 8 and 32,
    sequential 64 KiB reads, a 70/30 random read/write mix at QD 32, and the read latency at QD 1.
    Every read's data is checked against what was written (the region's pages name their LBA)."""
    tb = await FtlCoreTB.create(dut, channels=CHANNELS, ways=WAYS, slots=SLOTS, slot_words=SLOT_WORDS,
                                capacity=CAPACITY, blocks_per_die=12, profile="realistic", name="reads")
    tb.poll_cycles = 128
    rng = random.Random(11)
    page = tb.page
    n = READ_REGION
    out = {"clk_hz": spec.NAND_CLK_HZ, "region": n, "read_slots": int(os.environ["FTL_READ_SLOTS"])}

    def content(lba: int) -> bytes:
        return lba.to_bytes(4, "little") * (page // 4)

    # the region, 8 pages a command, from a staging area of 16 pages (SoC memory holds 16 + 64 pages of
    # buffers besides the core's tables)
    stage = tb.data
    for base in range(0, n, 16):
        for i in range(16):
            tb.write_bytes(stage + i * page, content(base + i))
        cycles, st, _ = await tb.run_queue([dict(opcode=Opcode.WRITE, lba=base + k, nlb=8, buf=stage + k * page)
                                            for k in (0, 8)], 2)
        assert set(st) == {Status.SUCCESS}, st
    rbufs = tb.data + 16 * page               # 64 pages of read buffers

    async def reads(cmds, depth):
        """``cmds``: (lba, nlb), each into the next ``nlb``-page buffer of the 64 pages in turn: a buffer is
        used again only after the command before it there completed (depth <= 64 / nlb), so the last ones
        hold their own command's data when the run ends.  Returns the cycles and the buffers."""
        bufs = [rbufs + (i * nlb % 64) * page for i, (_, nlb) in enumerate(cmds)]
        cycles, st, _ = await tb.run_queue([dict(opcode=Opcode.READ, lba=lba, nlb=nlb, buf=b)
                                            for (lba, nlb), b in zip(cmds, bufs)], depth)
        assert set(st) == {Status.SUCCESS}, st
        for (lba, nlb), b in list(zip(cmds, bufs))[-depth:]:
            assert tb.read_bytes(b, nlb * page) == b"".join(content(lba + j) for j in range(nlb)), \
                f"the read of {nlb} pages at LBA {lba}"
        return cycles

    async def channel_reads():
        """Array reads so far per channel (the NAND models' own counts)."""
        return [sum([await tb.chan.stat(tb.chan.index(c, w), "READS") for w in range(WAYS)]) for c in range(CHANNELS)]

    # random LBAs without repeats (fio's random map): the region is striped over the channels, so each
    # channel gets its share of the reads and the run is not bound by one channel's extra draws
    for depth, count in ((1, 64), (8, 256), (32, 512)):
        r0, c0 = int(dut.nand_reads.value), await channel_reads()
        cycles = await reads([(lba, 1) for lba in rng.sample(range(n), count)], depth)
        out[f"random_qd{depth}"] = dict(cycles=cycles, pages=count, nand_reads=int(dut.nand_reads.value) - r0,
                                        channel_reads=[b - a for a, b in zip(c0, await channel_reads())])
    # sequential: 64 KiB commands over the region, 4 in flight
    out["sequential_64k_qd4"] = dict(cycles=await reads([(lba, 16) for lba in range(0, n, 16)], 4), pages=n)

    # 70/30 random reads over the region and writes over its first 16 LBAs (each rewrites its LBA's content)
    for i in range(16):
        tb.write_bytes(stage + i * page, content(i))
    mixed = []
    for i in range(512):
        if rng.random() < 0.7:
            mixed.append(dict(opcode=Opcode.READ, lba=rng.randrange(n), nlb=1, buf=rbufs + (i % 64) * page))
        else:
            lba = rng.randrange(16)
            mixed.append(dict(opcode=Opcode.WRITE, lba=lba, nlb=1, buf=stage + lba * page))
    cycles, st, _ = await tb.run_queue(mixed, 32)
    assert set(st) == {Status.SUCCESS}, st
    out["mixed_70_30_qd32"] = dict(cycles=cycles, reads=sum(c["opcode"] == Opcode.READ for c in mixed),
                                   writes=sum(c["opcode"] == Opcode.WRITE for c in mixed))

    # read latency at QD 1 (map hits: the region's lines were just read)
    tb.poll_cycles = 4
    samples = []
    for lba in rng.sample(range(n), 8):
        start = int(dut.cycle.value)
        assert (await tb.do(opcode=Opcode.READ, lba=lba, nlb=1, buf=rbufs))["status"] == Status.SUCCESS
        samples.append(int(dut.cycle.value) - start)
        assert tb.read_bytes(rbufs, page) == content(lba)
    out["latency_qd1"] = samples
    with open(os.environ["FTL_BENCH_OUT"], "w") as f:
        json.dump(out, f, indent=1)
