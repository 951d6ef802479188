"""cocotb: the FTL core (host queues to NAND pins) against four NAND models.

* ``every_verb``: each command and each status the core decides, and that a
  rejected command changes nothing;
* ``random_scoreboard``: random batches of plain writes, atomic groups,
  trims, transactions (writes, final writes, commits, aborts, refusals) and
  appends with remaps and releases at
  queue depth > 1, then reads and TX_READs checked against ``atomflash.model``;
  finally the flash itself recovers (``atomflash.model.recover``) to exactly
  the model's contents.
"""

import os
import random

import cocotb

from atomflash import spec
from atomflash.model import Limits, Model, check_after_cut, recover
from atomflash.nandsim import Image, NandCtl, NandCutWhen
from atomflash.spec import Hint, Kind, NandOp, NandResult, Opcode, Status
from rtl.ftl.mapcache import MapOp
from rtl.ftl.relocate import RelocResult
from sim.harness.ftl_core import MAX_APPENDS, MAX_OPEN_TX, MAX_PENDING
from sim.harness.ftl_tb import IDENTIFY, FtlCoreTB

CHANNELS, WAYS = 2, 2
SLOTS = int(os.environ.get("FTL_SLOTS", "8"))
SLOT_WORDS = int(os.environ["NANDTB_SLOT_WORDS"])
CAPACITY = 2048
MEM_END = 1 << 19


CACHE_PAGES = int(os.environ.get("FTL_CACHE_PAGES", "0"))     # the write-cache build (test_ftl_core_write_cache)
CACHE_BASE = 0x60000


async def make_tb(dut, **kw):
    tb = await FtlCoreTB.create(dut, channels=CHANNELS, ways=WAYS, slots=SLOTS, slot_words=SLOT_WORDS,
                                capacity=CAPACITY, **kw)
    dut.cache_base.value = CACHE_BASE      # used by the write-cache build only
    return tb


def block(tag: int, page: int) -> bytes:
    """A unique, recognisable block."""
    rng = random.Random(tag)
    return tag.to_bytes(8, "little") + rng.randbytes(page - 8)


class Blocks:
    """Consecutive unique blocks from ``first`` on: ``blocks(n)`` is the data of the next n."""

    def __init__(self, page: int, first: int):
        self.page, self.serial = page, first

    def __call__(self, n: int) -> bytes:
        out = []
        for _ in range(n):
            self.serial += 1
            out.append(block(self.serial, self.page))
        return b"".join(out)


class Host:
    """Data buffers in the harness memory, handed out round-robin."""

    def __init__(self, tb: FtlCoreTB, pages: int = 128):
        self.tb, self.pages, self.next = tb, pages, 0

    def buffer(self, nlb=1) -> int:
        if self.next + nlb > self.pages:
            self.next = 0
        addr = self.tb.data + self.next * self.tb.page
        self.next += nlb
        return addr

    def atomic_list(self, pairs) -> int:
        """Each (lba, block) into a buffer of its own, then the ATOMIC_ENTRY list; the list's address."""
        entries = []
        for lba, data in pairs:
            buf = self.buffer()
            self.tb.write_bytes(buf, data)
            entries.append(spec.ATOMIC_ENTRY.pack(lba=lba, buf=buf))
        lst = self.buffer()
        self.tb.write_bytes(lst, b"".join(entries))
        return lst


def expect(cpl, status):
    assert Status(cpl["status"]) == status, f"status {Status(cpl['status']).name}, expected {status.name}"


async def check_valid_counts(tb, model):
    """The block table (valid pages per block, in SoC memory) counts exactly the pages the device's map binds
    for the model's LBAs (the device's map, not recovery's: recovery may name an original where the device
    binds its GC copy of the same version)."""
    want = {}
    for lba in model.contents():
        ppa = (await tb.map_op(MapOp.READ, lba=lba))["old"]
        f = spec.PPA.decompose("ppa", ppa)
        die = (f["lun"] * WAYS + f["way"]) * CHANNELS + f["channel"]
        want[(die, f["block"])] = want.get((die, f["block"]), 0) + 1
    for die in range(tb.dies):
        for blk in tb.blocks_used[die]:
            got = tb.mem_read(tb.block_table // 4 + (die << tb.block_shift) + blk)
            assert got == want.get((die, blk), 0), (die, blk, got, want.get((die, blk), 0))


@cocotb.test()
async def every_verb(dut):
    tb = await make_tb(dut, name="verbs")
    host = Host(tb)
    page = tb.page
    model = Model(Limits(capacity=CAPACITY, lba_size=page))

    async def write(lba, blocks):
        buf = host.buffer(len(blocks))
        tb.write_bytes(buf, b"".join(blocks))
        model.write(lba, b"".join(blocks))
        return await tb.do(opcode=Opcode.WRITE, lba=lba, nlb=len(blocks), buf=buf)

    async def read_check(lba, nlb):
        buf = host.buffer(nlb)
        tb.write_bytes(buf, b"\xa5" * (nlb * page))
        expect(await tb.do(opcode=Opcode.READ, lba=lba, nlb=nlb, buf=buf), Status.SUCCESS)
        got = tb.read_bytes(buf, nlb * page)
        want = model.read(lba, nlb).data
        for i in range(nlb):
            assert got[i * page:(i + 1) * page] == want[i * page:(i + 1) * page], f"lba {lba + i}"

    async def atomic(pairs, status=Status.SUCCESS, list_addr=None, bufs=None):
        entries = []
        for i, (lba, data) in enumerate(pairs):
            buf = bufs[i] if bufs else host.buffer()
            if data is not None:
                tb.write_bytes(buf, data)
            entries.append(spec.ATOMIC_ENTRY.pack(lba=lba, buf=buf))
        lst = list_addr if list_addr is not None else host.buffer()
        if lst < MEM_END:
            tb.write_bytes(lst, b"".join(entries))
        cpl = await tb.do(opcode=Opcode.ATOMIC_WRITE, list=lst, nlist=len(pairs))
        expect(cpl, status)
        if status == Status.SUCCESS:
            model.atomic_write(pairs)

    # IDENTIFY: the record the firmware keeps, copied to the host
    ident = spec.IDENTIFY.pack(magic=spec.IDENTIFY_MAGIC, capacity=CAPACITY, lba_size=page, max_transfer=64)
    tb.write_bytes(IDENTIFY, ident)
    buf = host.buffer()
    expect(await tb.do(opcode=Opcode.IDENTIFY, buf=buf), Status.SUCCESS)
    assert tb.read_bytes(buf, spec.IDENTIFY.size) == ident

    # unmapped reads are zeros; writes read back; overwrites win
    await read_check(0, 4)
    expect(await write(10, [block(1, page), block(2, page), block(3, page)]), Status.SUCCESS)
    await read_check(9, 5)
    expect(await write(11, [block(4, page)]), Status.SUCCESS)
    await read_check(10, 3)

    # atomic group of non-contiguous LBAs, the last overwriting an earlier write
    await atomic([(100, block(10, page)), (7, block(11, page)), (2047, block(12, page)), (12, block(13, page))])
    for lba in (100, 7, 2047, 12, 10, 11):
        await read_check(lba, 1)

    # rejected groups change nothing
    await atomic([(20, block(20, page)), (21, block(21, page)), (20, block(22, page))], Status.DUPLICATE_LBA)
    await atomic([(22, block(23, page)), (CAPACITY, block(24, page))], Status.LBA_OUT_OF_RANGE)
    await atomic([(23, block(25, page)), (24, None)], Status.MISALIGNED_BUFFER, bufs=[host.buffer(), tb.data + 2])
    await atomic([(25, block(26, page))], Status.DATA_TRANSFER_ERROR, list_addr=MEM_END + 64)
    for lba in (20, 21, 22, 23, 24, 25):
        await read_check(lba, 1)

    # static rejections (the validator), one each
    expect(await tb.do(opcode=0x7F), Status.INVALID_OPCODE)
    expect(await tb.do(opcode=Opcode.WRITE, lba=0, nlb=0, buf=tb.data), Status.ZERO_LENGTH)
    expect(await tb.do(opcode=Opcode.WRITE, lba=CAPACITY - 1, nlb=2, buf=tb.data), Status.LBA_OUT_OF_RANGE)
    expect(await tb.do(opcode=Opcode.WRITE, lba=0, nlb=65, buf=tb.data), Status.TRANSFER_TOO_LARGE)
    expect(await tb.do(opcode=Opcode.READ, lba=0, nlb=1, buf=tb.data + 1), Status.MISALIGNED_BUFFER)
    expect(await tb.do(opcode=Opcode.ATOMIC_WRITE, list=tb.data, nlist=65), Status.GROUP_TOO_LARGE)
    expect(await tb.do(opcode=0x8A), Status.INVALID_OPCODE)

    # a write from a buffer past the memory: transfer error, nothing bound
    expect(await tb.do(opcode=Opcode.WRITE, lba=30, nlb=1, buf=MEM_END), Status.DATA_TRANSFER_ERROR)
    await read_check(30, 1)
    # a read into a buffer past the memory
    expect(await tb.do(opcode=Opcode.READ, lba=10, nlb=1, buf=MEM_END), Status.DATA_TRANSFER_ERROR)
    expect(await tb.do(opcode=Opcode.READ, lba=40, nlb=1, buf=MEM_END), Status.DATA_TRANSFER_ERROR)

    # trim: a TRIM record, then the range reads as zeros
    expect(await tb.do(opcode=Opcode.DEALLOCATE, lba=10, nlb=3), Status.SUCCESS)
    model.trim(10, 3)
    await read_check(9, 5)

    # flush and hints
    expect(await tb.do(opcode=Opcode.FLUSH), Status.SUCCESS)
    for hint in Hint:
        expect(await tb.do(opcode=Opcode.HINT, hint=hint), Status.SUCCESS)

    # the flash recovers to exactly what the host sees
    assert recover(tb.flash_pages()).contents() == model.contents()
    await tb.chan.expect_clean()

    # the activity counters (the console's `stats`)
    counters = {n: int(getattr(dut, n).value) for n in ("host_read_pages", "host_write_pages", "record_pages",
                                                       "nand_reads", "nand_programs", "nand_erases")}
    dut._log.info(f"counters: {counters}")
    assert counters["host_read_pages"] == 30       # every page read_check read (failed READs end before theirs)
    # 8 pages of writes and the group, and the WRITE from past the memory (sent to the log; its fetch failed)
    assert counters["host_write_pages"] == 9 and counters["record_pages"] == 1      # the TRIM record
    assert counters["nand_programs"] == 9 + 1 - 1                                   # the failed fetch: no program
    assert counters["nand_erases"] == tb.erased_at_boot and counters["nand_reads"] > 0

    # out of space (ftl.host_enable.no_space): commands that bring new data are refused before they take
    # anything; a transaction opened before may still commit, trims and flushes go on, reads see no change
    tx_buf = host.buffer()
    tx_data = block(40, page)
    tb.write_bytes(tx_buf, tx_data)
    expect(await tb.do(opcode=Opcode.TX_WRITE, tid=5, lba=50, nlb=1, buf=tx_buf), Status.SUCCESS)
    programs = int(dut.nand_programs.value)
    dut.no_space.value = 1
    buf = host.buffer()
    tb.write_bytes(buf, block(41, page))
    expect(await tb.do(opcode=Opcode.WRITE, lba=60, nlb=1, buf=buf), Status.NO_SPACE)
    await atomic([(61, block(42, page)), (62, block(43, page))], Status.NO_SPACE)
    buf = host.buffer()
    tb.write_bytes(buf, block(44, page))
    expect(await tb.do(opcode=Opcode.TX_WRITE, tid=6, lba=63, nlb=1, buf=buf), Status.NO_SPACE)
    expect(await tb.do(opcode=Opcode.TX_WRITE, tid=5, lba=64, nlb=1, buf=buf), Status.NO_SPACE)
    expect(await tb.do(opcode=Opcode.APPEND, nlb=1, buf=buf), Status.NO_SPACE)
    expect(await tb.do(opcode=Opcode.TX_ABORT, tid=6), Status.UNKNOWN_TX)    # the refused TX_WRITE opened nothing
    assert int(dut.nand_programs.value) == programs, "a refused command programmed a page"
    expect(await tb.do(opcode=Opcode.TX_COMMIT, tid=5), Status.SUCCESS)        # one COMMIT record
    model.write(50, tx_data)
    expect(await tb.do(opcode=Opcode.DEALLOCATE, lba=100, nlb=1), Status.SUCCESS)   # one TRIM record
    model.trim(100, 1)
    expect(await tb.do(opcode=Opcode.FLUSH), Status.SUCCESS)
    assert int(dut.nand_programs.value) == programs + 2
    for lba in (50, 60, 61, 62, 63, 64, 100):
        await read_check(lba, 1)
    dut.no_space.value = 0
    expect(await write(60, [block(45, page)]), Status.SUCCESS)
    await read_check(60, 1)
    assert recover(tb.flash_pages()).contents() == model.contents()


@cocotb.test()
async def random_scoreboard(dut):
    tb = await make_tb(dut, name="random", blocks_per_die=int(os.environ.get("FTL_BLOCKS", "24")), stalls=0.3)
    rng = random.Random(int(os.environ.get("FTL_SEED", "1")))
    host = Host(tb)
    page = tb.page
    # on the write-cache build: plain writes are buffered (Model(cache=True)), overwrites coalesce
    model = Model(Limits(capacity=CAPACITY, lba_size=page, max_open_tx=MAX_OPEN_TX, max_pending=MAX_PENDING),
                  cache=bool(CACHE_PAGES))
    lbas = range(48)                # overlapping on purpose
    blocks = Blocks(page, 1000)
    programs = 0
    tids = range(1, 7)              # more than MAX_OPEN_TX, so some first writes are refused
    tokens = {}                     # live appends: model token -> device token
    appended = []                   # (cid, model token) of this batch's appends

    for batch in range(int(os.environ.get("FTL_BATCHES", "8"))):
        # up to 8 commands in flight; completion order = command order for the ones that change the map
        cmds = []                   # (cid, the model's status)
        for _ in range(rng.randrange(1, 9)):
            kind = rng.choices(["write", "atomic", "trim", "flush", "tx_write", "tx_commit", "tx_abort",
                                "append", "remap", "release"], [5, 3, 1, 1, 4, 1, 1, 2, 2, 1])[0]
            if kind == "write":
                nlb = rng.randrange(1, 4)
                lba = rng.randrange(0, len(lbas) - nlb)
                data = blocks(nlb)
                buf = host.buffer(nlb)
                tb.write_bytes(buf, data)
                c = model.write(lba, data)
                programs += nlb
                cmds.append((await tb.submit(opcode=Opcode.WRITE, lba=lba, nlb=nlb, buf=buf), c.status))
            elif kind == "atomic":
                pairs = [(lba, blocks(1)) for lba in rng.sample(lbas, rng.randrange(1, 9))]
                lst = host.atomic_list(pairs)
                c = model.atomic_write(pairs)
                programs += len(pairs)
                cmds.append((await tb.submit(opcode=Opcode.ATOMIC_WRITE, list=lst, nlist=len(pairs)), c.status))
            elif kind == "trim":
                nlb = rng.randrange(1, 6)
                lba = rng.randrange(0, len(lbas) - nlb)
                c = model.trim(lba, nlb)
                programs += 1
                cmds.append((await tb.submit(opcode=Opcode.DEALLOCATE, lba=lba, nlb=nlb), c.status))
            elif kind == "flush":
                cmds.append((await tb.submit(opcode=Opcode.FLUSH), model.flush().status))
            elif kind == "tx_write":
                tid, nlb = rng.choice(tids), rng.randrange(1, 5)
                lba = rng.randrange(0, len(lbas) - nlb)
                final = rng.random() < 0.2
                data = blocks(nlb)
                buf = host.buffer(nlb)
                tb.write_bytes(buf, data)
                c = model.tx_write(tid, lba, data, final=final)
                programs += nlb if c.ok else 0
                cmds.append((await tb.submit(opcode=Opcode.TX_WRITE, tid=tid, lba=lba, nlb=nlb, buf=buf,
                                             flags=spec.CMD.compose("flags", tx_final=int(final))), c.status))
            elif kind == "append":
                nlb = rng.randrange(1, 4)
                data = blocks(nlb)
                buf = host.buffer(nlb)
                tb.write_bytes(buf, data)
                c = model.append(data)
                programs += nlb if c.ok else 0
                cid = await tb.submit(opcode=Opcode.APPEND, nlb=nlb, buf=buf)
                cmds.append((cid, c.status))
                if c.ok:
                    appended.append((cid, c.result))
            elif kind in ("remap", "release") and tokens:
                picks = rng.sample(sorted(tokens), min(len(tokens), rng.randrange(1, 4)))
                if kind == "release":
                    c = model.release(picks[0])
                    cmds.append((await tb.submit(opcode=Opcode.RELEASE, token=tokens[picks[0]]), c.status))
                else:
                    at = rng.sample(range(0, len(lbas) - 3, 3), len(picks))
                    triples = [(lba, tok, len(model.appends[spec.split_token(tok).handle].blocks))
                               for lba, tok in zip(at, picks)]
                    c = model.remap(triples)
                    programs += int(c.ok)       # the REMAP record
                    lst = host.buffer()
                    tb.write_bytes(lst, b"".join(spec.REMAP_ENTRY.pack(lba=lba, token=tokens[tok], nlb=nlb)
                                                 for lba, tok, nlb in triples))
                    cmds.append((await tb.submit(opcode=Opcode.REMAP, list=lst, nlist=len(triples)), c.status))
                for tok in picks if c.ok else ():
                    del tokens[tok]
            elif kind in ("remap", "release"):
                continue
            else:
                tid = rng.choice(tids)
                commit = kind == "tx_commit"
                c = model.tx_commit(tid) if commit else model.tx_abort(tid)
                programs += int(commit and c.ok)        # the COMMIT record
                cmds.append((await tb.submit(opcode=Opcode.TX_COMMIT if commit else Opcode.TX_ABORT, tid=tid),
                             c.status))
        done = [await tb.wait(cid) for cid, _ in cmds]
        assert [Status(d["status"]) for d in done] == [want for _, want in cmds], (done, cmds)
        by_cid = {cid: d for (cid, _), d in zip(cmds, done)}
        for cid, mtok in appended:
            tokens[mtok] = by_cid[cid]["result"]          # the device's token for the model's
        appended.clear()
        # publication follows command order, so completions do too (refusals complete at once; with the
        # write cache, so do buffered writes)
        cycles = [d["cycle"] for d in done if Status(d["status"]) == Status.SUCCESS]
        assert CACHE_PAGES or cycles == sorted(cycles)
        # reads of every LBA, committed and as one open transaction sees them, several in flight
        reads = []
        for tid in [None] + rng.sample(sorted(model.tx), min(1, len(model.tx))):
            for lba in range(0, len(lbas), 4):
                buf = host.buffer(4)
                if tid is None:
                    cid = await tb.submit(opcode=Opcode.READ, lba=lba, nlb=4, buf=buf)
                else:
                    cid = await tb.submit(opcode=Opcode.TX_READ, tid=tid, lba=lba, nlb=4, buf=buf)
                reads.append((tid, lba, buf, cid))
        for tid, lba, buf, cid in reads:
            expect(await tb.wait(cid), Status.SUCCESS)
            want = (model.read(lba, 4) if tid is None else model.tx_read(tid, lba, 4)).data
            got = tb.read_bytes(buf, 4 * page)
            for i in range(4):
                assert got[i * page:(i + 1) * page] == want[i * page:(i + 1) * page], \
                    f"batch {batch} lba {lba + i} tid {tid}"
    # close what is open: commit half, abort the rest; release the appends left
    for mtok, dtok in tokens.items():
        expect(await tb.do(opcode=Opcode.RELEASE, token=dtok), model.release(mtok).status)
    for tid in sorted(model.tx):
        commit = tid % 2 == 0
        c = model.tx_commit(tid) if commit else model.tx_abort(tid)
        programs += int(commit)
        expect(await tb.do(opcode=Opcode.TX_COMMIT if commit else Opcode.TX_ABORT, tid=tid), c.status)
    if CACHE_PAGES:     # drain: then every page written is on flash except the coalesced ones
        expect(await tb.do(opcode=Opcode.FLUSH), Status.SUCCESS)
        assert int(dut.cache_dirty.value) == 0 and int(dut.cache_coalesced.value) > 0
        programs -= int(dut.cache_coalesced.value)
    pages = tb.flash_pages()
    assert len(pages) == programs, (len(pages), programs)   # no extra flash program for atomicity
    recovered = recover(pages)
    assert recovered.contents() == model.contents()
    # the block table (valid pages per block, in SoC memory) counts exactly the bound pages
    want = {}
    for binding in recovered.map.values():
        f = spec.PPA.decompose("ppa", binding.addr)
        die = (f["lun"] * WAYS + f["way"]) * CHANNELS + f["channel"]
        want[(die, f["block"])] = want.get((die, f["block"]), 0) + 1
    wrong = {}
    for die in range(tb.dies):
        for blk in tb.blocks_used[die]:
            got = tb.mem_read(tb.block_table // 4 + (die << tb.block_shift) + blk)
            if got != want.get((die, blk), 0):
                wrong[(die, blk)] = (got, want.get((die, blk), 0))
    assert not wrong, wrong
    hits, misses = int(dut.map_hits.value), int(dut.map_misses.value)
    assert hits > 0 and misses > 0
    await tb.chan.expect_clean()


@cocotb.test()
async def program_failures_are_retried(dut):
    """Every die fails its next program: the members land on fresh pages with their
    versions, the group completes whole, the flash recovers to it."""
    tb = await make_tb(dut, name="pfail")
    host = Host(tb)
    page = tb.page
    model = Model(Limits(capacity=CAPACITY, lba_size=page))
    for i in range(tb.dies):
        await tb.chan.ctl(i, NandCtl.FAIL_PROGRAM, -1)
    pairs = [(lba, block(5000 + k, page)) for k, lba in enumerate((5, 900, 17, 3, 64, 2000, 6, 8))]
    lst = host.atomic_list(pairs)
    expect(await tb.do(opcode=Opcode.ATOMIC_WRITE, list=lst, nlist=len(pairs)), Status.SUCCESS)
    model.atomic_write(pairs)
    failed = sum([await tb.chan.stat(i, "PROGRAM_FAILS") for i in range(tb.dies)])
    assert failed == tb.dies, failed
    # each failed page is reported once, for the firmware to retire its block
    reported = [spec.PPA.decompose("ppa", p) for p in tb.failed.items]
    assert sorted((f["channel"], f["way"]) for f in reported) == \
        sorted((c, w) for c in range(CHANNELS) for w in range(WAYS)), reported
    assert not int(dut.failed_lost.value)
    buf = host.buffer()
    for lba, data in pairs:
        expect(await tb.do(opcode=Opcode.READ, lba=lba, nlb=1, buf=buf), Status.SUCCESS)
        assert tb.read_bytes(buf, page) == data, lba
    assert recover(tb.flash_pages()).contents() == model.contents()


@cocotb.test()
async def no_page_completes_no_space(dut):
    """Every erased block used up and none coming (the firmware sets ``no_blocks``): an atomic
    group already waiting for pages completes NO_SPACE and none of it is visible (reads, the
    flash's recovery, the block table); later writes complete NO_SPACE at once; a TX_COMMIT
    whose COMMIT record finds no page aborts its transaction; a TX_WRITE that finds no page dooms
    its transaction, whose TX_COMMIT then aborts it with NO_SPACE too (not MEDIA_ERROR: nothing
    failed on the flash); nothing is reported as a program failure; once a block comes again the
    core takes writes."""
    tb = await make_tb(dut, name="nopage", blocks_per_die=1)
    tb.pool_may_run_dry = True
    host = Host(tb)
    page, ppb = tb.page, tb.profile.pages_per_block
    model = Model(Limits(capacity=CAPACITY, lba_size=page, max_open_tx=MAX_OPEN_TX, max_pending=MAX_PENDING))
    blocks = Blocks(page, 20000)

    async def write(lba, nlb, status=Status.SUCCESS):
        data = blocks(nlb)
        buf = host.buffer(nlb)
        tb.write_bytes(buf, data)
        expect(await tb.do(opcode=Opcode.WRITE, lba=lba, nlb=nlb, buf=buf), status)
        if status == Status.SUCCESS:
            model.write(lba, data)

    async def check(lbas):
        buf = host.buffer()
        for lba in lbas:
            expect(await tb.do(opcode=Opcode.READ, lba=lba, nlb=1, buf=buf), Status.SUCCESS)
            assert tb.read_bytes(buf, page) == model.read(lba, 1).data, f"lba {lba}"

    # a transaction staged, then the log filled up to 5 pages short of its last page
    tx_data = blocks(2)
    buf = host.buffer(2)
    tb.write_bytes(buf, tx_data)
    expect(await tb.do(opcode=Opcode.TX_WRITE, tid=3, lba=500, nlb=2, buf=buf), Status.SUCCESS)
    model.tx_write(3, 500, tx_data)
    room, used, lba = tb.dies * ppb, 2, 0
    while used < room - 5:
        n = min(32, room - 5 - used)
        await write(lba, n)
        lba, used = lba + n, used + n
    written = range(lba)

    # an atomic group of 8: 5 members find pages, 3 wait for a block that does not come
    pairs = [(1000 + 3 * k, blocks(1)) for k in range(8)]
    cid = await tb.submit(opcode=Opcode.ATOMIC_WRITE, list=host.atomic_list(pairs), nlist=len(pairs))
    await tb.cycles(100_000)
    assert int(dut.starved.value) == 1
    assert cid not in tb.done, "the group completed without a page for every member"
    dut.no_blocks.value = 1
    expect(await tb.wait(cid), Status.NO_SPACE)
    await check([lba_ for lba_, _ in pairs] + [500, 501])

    # more writes find no page at once (the core's no_space is still clear: this is no_blocks alone),
    # a group of 64 too: its no-page completions come back faster than any program failure could
    await write(2000, 2, Status.NO_SPACE)
    await write(1900, 64, Status.NO_SPACE)
    big = [(1200 + k, blocks(1)) for k in range(64)]
    expect(await tb.do(opcode=Opcode.ATOMIC_WRITE, list=host.atomic_list(big), nlist=len(big)), Status.NO_SPACE)
    await write(2002, 1, Status.NO_SPACE)
    # the commit's record finds no page: the transaction is aborted, not half-committed
    expect(await tb.do(opcode=Opcode.TX_COMMIT, tid=3), Status.NO_SPACE)
    model.tx_abort(3)
    expect(await tb.do(opcode=Opcode.TX_COMMIT, tid=3), Status.UNKNOWN_TX)
    # a transaction whose write found no page: doomed, and its commit says why
    buf = host.buffer(1)
    tb.write_bytes(buf, blocks(1))
    expect(await tb.do(opcode=Opcode.TX_WRITE, tid=4, lba=600, nlb=1, buf=buf), Status.NO_SPACE)
    expect(await tb.do(opcode=Opcode.TX_COMMIT, tid=4), Status.NO_SPACE)
    expect(await tb.do(opcode=Opcode.TX_COMMIT, tid=4), Status.UNKNOWN_TX)
    assert not tb.failed.items, "a page that was never programmed was reported as a program failure"
    await check([500, 501, 600, 2000, 2001, 2002, 1900, 1963, 1200, 1263] + list(written)[::7])
    await check_valid_counts(tb, model)

    # a block again: the core writes
    dut.no_blocks.value = 0
    die, fresh = 1, 1 + len(tb.blocks_used[1])
    assert (await tb.chan.do(opcode=NandOp.ERASE, channel=die % CHANNELS, target=die // CHANNELS, block=fresh,
                             tag=die)).result == NandResult.OK
    tb.spare_blocks[die] = [fresh]
    await tb.give_block(die)
    await write(2000, 2)
    await write(1003, 1)
    await check([2000, 2001, 1003, 1000])
    await check_valid_counts(tb, model)
    assert recover(tb.flash_pages()).contents() == model.contents()


@cocotb.test()
async def program_failures_under_load(dut):
    """Every die fails a program while multi-page WRITEs, ATOMIC_WRITEs and READs of the same LBAs are in
    flight (campaign trial 459's situation before its power cut).  Failed members are re-issued; every READ
    completes SUCCESS and returns one consistent map state, between the writes acknowledged before it was
    submitted and those submitted before it completed (never a failed or unprogrammed page: that would be
    MEDIA_ERROR or wrong data).  Then a group failing more than ``max_retries`` (4) times is dropped
    (MEDIA_ERROR, nothing bound) with READs and a later WRITE of its LBAs in flight.  At the end the map names
    no failed page, the block table counts exactly the bound pages, the flash recovers to the model."""
    tb = await make_tb(dut, name="pfail_load")
    rng = random.Random(int(os.environ.get("FTL_SEED", "1")))
    host = Host(tb, pages=200)
    page = tb.page
    model = Model(Limits(capacity=CAPACITY, lba_size=page))
    span = 48
    blocks = Blocks(page, 9000)
    zero = bytes(page)
    states = [{lba: zero for lba in range(span)}]     # the map after each map-changing command, in ring order
    writes = []                                       # (cid, submit cycle) of those commands
    done_writes = 0                                   # leading writes whose completion has been waited for
    fails = 0                                         # failures armed so far (all consumed at each check)

    def cycle():
        return int(dut.cycle.value)

    def acked():
        """Writes acknowledged so far: completions come in ring order, so a prefix."""
        n = done_writes
        while n < len(writes) and writes[n][0] in tb.done:
            n += 1
        return n

    def new_state(changes):
        st = dict(states[-1])
        st.update(changes)
        states.append(st)

    async def submit_write():
        nlb = rng.randrange(4, 17)
        lba = rng.randrange(0, span - nlb + 1)
        data = blocks(nlb)
        buf = host.buffer(nlb)
        tb.write_bytes(buf, data)
        model.write(lba, data)
        new_state({lba + i: data[i * page:(i + 1) * page] for i in range(nlb)})
        at = cycle()
        writes.append((await tb.submit(opcode=Opcode.WRITE, lba=lba, nlb=nlb, buf=buf), at))
        return writes[-1][0]

    async def submit_atomic():
        pairs = [(lba, blocks(1)) for lba in rng.sample(range(span), rng.randrange(2, 9))]
        lst = host.atomic_list(pairs)
        model.atomic_write(pairs)
        new_state(dict(pairs))
        at = cycle()
        writes.append((await tb.submit(opcode=Opcode.ATOMIC_WRITE, list=lst, nlist=len(pairs)), at))
        return writes[-1][0]

    async def submit_read(lba=None, nlb=None):
        nlb = nlb or rng.randrange(1, 17)
        lba = rng.randrange(0, span - nlb + 1) if lba is None else lba
        buf = host.buffer(nlb)
        tb.write_bytes(buf, b"\xa5" * (nlb * page))
        lo = acked()
        return (await tb.submit(opcode=Opcode.READ, lba=lba, nlb=nlb, buf=buf), lba, nlb, buf, lo)

    async def arm(per_die=1):
        nonlocal fails
        for die in rng.sample(range(tb.dies), tb.dies):
            for _ in range(per_die):
                await tb.chan.ctl(die, NandCtl.FAIL_PROGRAM, -1)
        fails += per_die * tb.dies

    async def program_fails():
        return sum([await tb.chan.stat(i, "PROGRAM_FAILS") for i in range(tb.dies)])

    async def settle(cids, reads, want=Status.SUCCESS, where=""):
        """Wait for a batch; every READ one consistent state between its bounds."""
        nonlocal done_writes
        for cid in cids:
            expect(await tb.wait(cid), want.get(cid, Status.SUCCESS) if isinstance(want, dict) else want)
        done_writes = len(writes)
        for cid, lba, nlb, buf, lo in reads:
            d = await tb.wait(cid)
            assert Status(d["status"]) == Status.SUCCESS, \
                f"{where}: READ lba {lba} nlb {nlb}: {Status(d['status']).name}"
            hi = sum(1 for _, at in writes if at < d["cycle"])
            got = tb.read_bytes(buf, nlb * page)
            pages = [got[i * page:(i + 1) * page] for i in range(nlb)]
            fits = [k for k in range(lo, hi + 1) if all(pages[i] == states[k][lba + i] for i in range(nlb))]
            if not fits:
                detail = {lba + i: [k for k in range(len(states)) if pages[i] == states[k][lba + i]][:8]
                          for i in range(nlb)}
                raise AssertionError(f"{where}: READ lba {lba} nlb {nlb} matches no state in {lo}..{hi} "
                                     f"(per LBA, the states it matches: {detail})")

    rounds = int(os.environ.get("FTL_ROUNDS", "3"))
    for rnd in range(rounds):
        # a few multi-page writes and atomic groups first, so the dies are busy when the failures are armed
        cids, reads = [], []
        n_cmds = rng.randrange(5, 10)
        arm_at = rng.randrange(1, 4)
        for i in range(n_cmds):
            if i == arm_at:
                await tb.cycles(rng.randrange(0, 12_000))
                await arm()
            kind = rng.choices(["write", "atomic", "read"], [4, 2, 4])[0]
            if kind == "read":
                reads.append(await submit_read())
            else:
                cids.append(await (submit_write() if kind == "write" else submit_atomic()))
            await tb.cycles(rng.choice([0, 0, 200, 2_000]))
        reads.append(await submit_read(16, 16))       # the campaign's read, behind everything
        await settle(cids, reads, where=f"round {rnd}")
        # every armed failure consumed (else more writes until it is)
        while await program_fails() < fails:
            cid = await submit_write()
            await settle([cid], [], where=f"round {rnd} filler")
        assert await program_fails() == fails
        dut._log.info(f"round {rnd}: {len(cids)} writes, {len(reads)} reads, {fails} program failures so far")

    # more than max_retries failures in one group: 8 members, two armed failures per die, so all eight first
    # programs fail, four are re-issued and the rest given up -- the group is dropped (MEDIA_ERROR, nothing
    # bound) while READs of its LBAs and a later WRITE are in flight
    await arm(per_die=2)
    pairs = [(lba, blocks(1)) for lba in rng.sample(range(span), 8)]
    lst = host.atomic_list(pairs)
    cids = [await tb.submit(opcode=Opcode.ATOMIC_WRITE, list=lst, nlist=8)]
    dropped = cids[0]
    reads = [await submit_read(0, 16), await submit_read(16, 16)]
    cids.append(await submit_write())
    reads += [await submit_read(16, 16), await submit_read(32, 16)]
    await settle(cids, reads, want={dropped: Status.MEDIA_ERROR}, where="dropped group")
    assert await program_fails() == fails
    for lba, data in pairs:                           # nothing of the dropped group is visible
        buf = host.buffer()
        expect(await tb.do(opcode=Opcode.READ, lba=lba, nlb=1, buf=buf), Status.SUCCESS)
        assert tb.read_bytes(buf, page) == states[-1][lba], lba

    # the firmware heard of each failed page once; the map names none of them
    failed = set(tb.failed.items)
    assert len(failed) == len(tb.failed.items) == fails, (len(tb.failed.items), fails)
    assert not int(dut.failed_lost.value)
    for lba in range(span):
        ppa = (await tb.map_op(MapOp.READ, lba=lba))["old"]
        assert ppa not in failed, f"lba {lba} bound to failed page {ppa:#x}"
    buf = host.buffer(span)
    expect(await tb.do(opcode=Opcode.READ, lba=0, nlb=span, buf=buf), Status.SUCCESS)
    assert tb.read_bytes(buf, span * page) == model.read(0, span).data
    await check_valid_counts(tb, model)
    assert recover(tb.flash_pages()).contents() == model.contents()
    await tb.chan.expect_clean()

async def power_cut(dut, round_):
    """Random writes, atomic groups, trims, transactions (writes, final
    writes, commits, aborts) and appends with remaps in flight; power fails on
    one die during its k-th program and then on every die; the images recover
    to a state the oracle accepts: every acknowledged write, commit and remap,
    every group, transaction and remap whole, nothing of an open or aborted
    transaction or of an append not remapped."""
    rng = random.Random(int(os.environ.get("FTL_SEED", "1")) * 1000 + round_)
    tb = await make_tb(dut, name=f"cut{round_}")
    host = Host(tb)
    page = tb.page
    model = Model(Limits(capacity=CAPACITY, lba_size=page, max_open_tx=MAX_OPEN_TX, max_pending=MAX_PENDING),
                  auto_complete=False, cache=bool(CACHE_PAGES))
    cut_die = rng.randrange(tb.dies)
    await tb.chan.ctl(cut_die, NandCtl.SCHEDULE_CUT, int(NandCutWhen.PROGRAM), rng.randrange(4, 30),
                      rng.randrange(50, 950))
    pending = {}            # cid -> model ops
    tokens, appending = {}, {}      # completed appends: model token -> device token; cid -> model token
    blocks = Blocks(page, 100_000 * (round_ + 1))
    cut = False
    while not cut:
        kind = rng.choice(["write", "atomic", "atomic", "trim", "tx", "tx", "tx_end", "append", "remap"])
        tid = rng.randrange(1, MAX_OPEN_TX + 1)
        if kind == "tx_end" and tid not in model.tx:
            kind = "tx"
        if kind == "remap" and not tokens:
            kind = "append"
        if kind == "append":
            nlb = rng.randrange(1, 4)
            data = blocks(nlb)
            buf = host.buffer(nlb)
            tb.write_bytes(buf, data)
            c = model.append(data)
            cid = await tb.submit(opcode=Opcode.APPEND, nlb=nlb, buf=buf)
            if c.ok:
                appending[cid] = c.result
        elif kind == "remap":
            picks = rng.sample(sorted(tokens), min(len(tokens), rng.randrange(1, 3)))
            triples = [(lba, tok, len(model.appends[spec.split_token(tok).handle].blocks))
                       for lba, tok in zip(rng.sample(range(0, 36, 4), len(picks)), picks)]
            c = model.remap(triples)
            lst = host.buffer()
            tb.write_bytes(lst, b"".join(spec.REMAP_ENTRY.pack(lba=lba, token=tokens[tok], nlb=nlb)
                                         for lba, tok, nlb in triples))
            cid = await tb.submit(opcode=Opcode.REMAP, list=lst, nlist=len(triples))
            for tok in picks:
                del tokens[tok]
        elif kind == "tx":
            nlb = rng.randrange(1, 4)
            lba = rng.randrange(40 - nlb)
            data = blocks(nlb)
            buf = host.buffer(nlb)
            tb.write_bytes(buf, data)
            final = rng.random() < 0.25
            c = model.tx_write(tid, lba, data, final=final)
            cid = await tb.submit(opcode=Opcode.TX_WRITE, tid=tid, lba=lba, nlb=nlb, buf=buf,
                                  flags=spec.CMD.compose("flags", tx_final=int(final)))
        elif kind == "tx_end":
            commit = rng.random() < 0.7
            c = model.tx_commit(tid) if commit else model.tx_abort(tid)
            cid = await tb.submit(opcode=Opcode.TX_COMMIT if commit else Opcode.TX_ABORT, tid=tid)
        elif kind == "write":
            lba = rng.randrange(40)
            data = blocks(1)
            buf = host.buffer()
            tb.write_bytes(buf, data)
            c = model.write(lba, data)
            cid = await tb.submit(opcode=Opcode.WRITE, lba=lba, nlb=1, buf=buf)
        elif kind == "atomic":
            pairs = []
            for lba in rng.sample(range(40), rng.randrange(2, 9)):
                pairs.append((lba, blocks(1)))
            lst = host.atomic_list(pairs)
            c = model.atomic_write(pairs)
            cid = await tb.submit(opcode=Opcode.ATOMIC_WRITE, list=lst, nlist=len(pairs))
        else:
            lba, nlb = rng.randrange(36), rng.randrange(1, 5)
            c = model.trim(lba, nlb)
            cid = await tb.submit(opcode=Opcode.DEALLOCATE, lba=lba, nlb=nlb)
        pending[cid] = (c.status, c.ops)
        # acknowledge what completed; stop at the cut
        while len(pending) >= 6 or (pending and rng.random() < 0.3):
            await tb.cycles(500)
            for done_cid in [k for k in pending if k in tb.done]:
                status, ops = pending.pop(done_cid)
                cpl = tb.done.pop(done_cid)
                assert Status(cpl["status"]) == status
                if done_cid in appending:
                    tokens[appending.pop(done_cid)] = cpl["result"]
                for op in ops:
                    model.complete(op)
            if await tb.chan.stat(cut_die, "POWER_CUTS"):
                cut = True
                break
        if not cut and await tb.chan.stat(cut_die, "POWER_CUTS"):
            cut = True
    for i in range(tb.dies):
        await tb.chan.ctl(i, NandCtl.POWER_CUT)
    # acknowledged = completed before the cut was seen; the rest stays in flight
    acked = [op for op in model.history if op.completed is not None]
    assert acked, "the cut came before any command was acknowledged: nothing was tested"
    assert any(op.verb == "commit" for op in model.history), "no transaction committed before the cut"
    contents = recover(tb.flash_pages(trust_torn=False)).contents()
    violations = check_after_cut(model.history, contents, lba_size=page)
    assert not violations, violations[:5]


@cocotb.test()
async def power_cut_0(dut):
    await power_cut(dut, 0)


@cocotb.test()
async def power_cut_1(dut):
    await power_cut(dut, 1)


@cocotb.test()
async def power_cut_2(dut):
    await power_cut(dut, 2)


@cocotb.test()
async def gc_relocation(dut):
    """The relocation hook moves mapped pages (a plain write, an atomic member)
    keeping their data and versions; a host write that rebound the LBA wins
    (RACED); an erased page cannot be relocated; the flash with its GC copies
    recovers to the host's view."""
    tb = await make_tb(dut, name="gc", stalls=0.7)      # the firmware's streams stall: relocation must not care
    host = Host(tb)
    page = tb.page
    model = Model(Limits(capacity=CAPACITY, lba_size=page))
    data = [block(7000 + i, page) for i in range(8)]
    buf = host.buffer(8)
    tb.write_bytes(buf, b"".join(data))
    expect(await tb.do(opcode=Opcode.WRITE, lba=0, nlb=8, buf=buf), Status.SUCCESS)
    model.write(0, b"".join(data))
    pairs = [(11, block(7100, page)), (10, block(7101, page)), (12, block(7102, page))]
    lst = host.atomic_list(pairs)
    expect(await tb.do(opcode=Opcode.ATOMIC_WRITE, list=lst, nlist=3), Status.SUCCESS)
    model.atomic_write(pairs)

    async def read(lba):
        b = host.buffer()
        expect(await tb.do(opcode=Opcode.READ, lba=lba, nlb=1, buf=b), Status.SUCCESS)
        return tb.read_bytes(b, page)

    where = recover(tb.flash_pages()).map
    for lba in (3, 11):
        r = await tb.relocate(where[lba].addr, tag=lba)
        assert (r["tag"], RelocResult(r["result"])) == (lba, RelocResult.MOVED), r
        assert r["new_ppa"] != where[lba].addr
        assert await read(lba) == model.read(lba, 1).data
        # the copy: GC_COPY, same lba, version and group fields, same data, a newer seq
        pages = {pg.addr: pg for pg in tb.flash_pages()}
        orig, copy = spec.unpack_oob(pages[where[lba].addr].oob), spec.unpack_oob(pages[r["new_ppa"]].oob)
        assert copy.kind == Kind.GC_COPY and copy.seq > orig.seq
        assert (copy.lba, copy.vseq, copy.group_len, copy.group_idx, copy.flags) == \
            (orig.lba, orig.vseq, orig.group_len, orig.group_idx, orig.flags)
        assert pages[r["new_ppa"]].data == pages[where[lba].addr].data

    # a host write rebinds LBA 5 first: the relocation of its old page loses
    new5 = block(7200, page)
    b = host.buffer()
    tb.write_bytes(b, new5)
    expect(await tb.do(opcode=Opcode.WRITE, lba=5, nlb=1, buf=b), Status.SUCCESS)
    model.write(5, new5)
    r = await tb.relocate(where[5].addr, tag=5)
    assert RelocResult(r["result"]) == RelocResult.RACED, r
    assert await read(5) == new5
    # an erased page: nothing to move
    r = await tb.relocate(spec.pack_ppa(0, 0, 0, 1, tb.profile.pages_per_block - 1), tag=9)
    assert RelocResult(r["result"]) == RelocResult.READ_FAILED, r
    assert tb.reloc.gaps and tb.reloc_done.stalls, "the stalls did not happen"

    assert recover(tb.flash_pages()).contents() == model.contents()
    await tb.chan.expect_clean()


@cocotb.test()
async def transactions(dut):
    """X-FTL transactions on the core, each step against ``atomflash.model``:
    staged pages visible to their tid only (TX_READ) until the commit binds
    them all at once; rewrites of a staged LBA; abort; TX_FINAL riding the
    commit on the last page (no COMMIT record) and TX_COMMIT writing one;
    commit order deciding between two transactions and a plain write; every
    status (UNKNOWN_TX, TOO_MANY_OPEN_TX, PENDING_FULL, INVALID_TID) changing
    nothing; GC moving a staged page, then a commit and an abort after moves
    (trap 9); the flash recovering to the model's contents; the block table
    counting staged pages as live until an abort drops them."""
    tb = await make_tb(dut, name="tx")
    host = Host(tb)
    page = tb.page
    model = Model(Limits(capacity=CAPACITY, lba_size=page, max_open_tx=MAX_OPEN_TX, max_pending=MAX_PENDING))
    blocks = Blocks(page, 9000)

    async def write(lba, nlb):
        data = blocks(nlb)
        buf = host.buffer(nlb)
        tb.write_bytes(buf, data)
        model.write(lba, data)
        expect(await tb.do(opcode=Opcode.WRITE, lba=lba, nlb=nlb, buf=buf), Status.SUCCESS)

    async def tx_write(tid, lba, nlb, final=False):
        data = blocks(nlb)
        buf = host.buffer(nlb)
        tb.write_bytes(buf, data)
        want = model.tx_write(tid, lba, data, final=final).status
        cpl = await tb.do(opcode=Opcode.TX_WRITE, tid=tid, lba=lba, nlb=nlb, buf=buf,
                          flags=spec.CMD.compose("flags", tx_final=int(final)))
        expect(cpl, want)
        return want

    async def verb(opcode, tid, call):
        want = call(tid).status
        expect(await tb.do(opcode=opcode, tid=tid), want)
        return want

    async def check(lba, nlb, tid=None):
        buf = host.buffer(nlb)
        tb.write_bytes(buf, b"\xa5" * (nlb * page))
        if tid is None:
            want = model.read(lba, nlb)
            cpl = await tb.do(opcode=Opcode.READ, lba=lba, nlb=nlb, buf=buf)
        else:
            want = model.tx_read(tid, lba, nlb)
            cpl = await tb.do(opcode=Opcode.TX_READ, tid=tid, lba=lba, nlb=nlb, buf=buf)
        expect(cpl, want.status)
        if want.ok:
            got = tb.read_bytes(buf, nlb * page)
            for i in range(nlb):
                assert got[i * page:(i + 1) * page] == want.data[i * page:(i + 1) * page], \
                    f"lba {lba + i} as {'committed' if tid is None else f'tid {tid}'} sees it"

    def kinds():
        out = {}
        for pg in tb.flash_pages():
            rec = spec.unpack_oob(pg.oob)
            if rec:
                out[Kind(rec.kind)] = out.get(Kind(rec.kind), 0) + 1
        return out

    await write(0, 8)
    # staged: visible to tid 1 only
    await tx_write(1, 2, 3)
    await check(0, 8)
    await check(0, 8, tid=1)
    await tx_write(1, 3, 1)                       # rewrite of a staged LBA
    await tx_write(1, 20, 2)
    await check(0, 8, tid=1)
    await check(20, 2, tid=1)
    await check(20, 2)
    for opcode in (Opcode.TX_READ, Opcode.TX_COMMIT, Opcode.TX_ABORT):
        expect(await tb.do(opcode=opcode, tid=77, lba=0, nlb=1, buf=host.buffer()), Status.UNKNOWN_TX)
    expect(await tb.do(opcode=Opcode.TX_WRITE, tid=0, lba=0, nlb=1, buf=host.buffer()), Status.INVALID_TID)
    # commit: all at once
    records = kinds().get(Kind.COMMIT, 0)
    assert await verb(Opcode.TX_COMMIT, 1, model.tx_commit) == Status.SUCCESS
    assert kinds().get(Kind.COMMIT, 0) == records + 1
    await check(0, 8)
    await check(20, 2)
    await verb(Opcode.TX_COMMIT, 1, model.tx_commit)       # UNKNOWN_TX now
    await check(0, 1, tid=1)                               # UNKNOWN_TX

    # abort: nothing of it is ever visible
    await tx_write(2, 4, 2)
    await check(4, 2, tid=2)
    assert await verb(Opcode.TX_ABORT, 2, model.tx_abort) == Status.SUCCESS
    await check(0, 8)

    # TX_FINAL: the commit rides on the last page; no record
    records, programs = kinds().get(Kind.COMMIT, 0), len(tb.flash_pages())
    await tx_write(3, 30, 2)
    assert await tx_write(3, 32, 2, final=True) == Status.SUCCESS
    assert kinds().get(Kind.COMMIT, 0) == records and len(tb.flash_pages()) == programs + 4
    await check(30, 4)

    # commit order decides: tid 4 and tid 5 stage LBA 40, a plain write follows, tid 5 commits, then tid 4
    await tx_write(4, 40, 1)
    await tx_write(5, 40, 2)
    await write(40, 1)
    await verb(Opcode.TX_COMMIT, 5, model.tx_commit)
    await check(40, 2)
    await verb(Opcode.TX_COMMIT, 4, model.tx_commit)
    await check(40, 2)

    # TOO_MANY_OPEN_TX (the limit is the model's too); a rejected first write opens nothing
    for tid in range(10, 10 + MAX_OPEN_TX):
        assert await tx_write(tid, 50 + tid, 1) == Status.SUCCESS
    assert await tx_write(99, 60, 1) == Status.TOO_MANY_OPEN_TX
    await check(60, 1, tid=99)
    for tid in range(10, 10 + MAX_OPEN_TX):
        await verb(Opcode.TX_ABORT, tid, model.tx_abort)

    # PENDING_FULL: fill the table; a rewrite of staged LBAs still fits, a new LBA does not
    lba = 100
    while model._pending_used() + 16 <= MAX_PENDING:
        assert await tx_write(6, lba, 16) == Status.SUCCESS
        lba += 16
    left = MAX_PENDING - model._pending_used()
    if left:
        assert await tx_write(6, lba, left) == Status.SUCCESS
        lba += left
    assert int(dut.pending_free.value) == 0
    assert await tx_write(6, lba, 1) == Status.PENDING_FULL
    assert await tx_write(7, 500, 1) == Status.PENDING_FULL
    assert await tx_write(6, 100, 4) == Status.SUCCESS
    await check(100, 4, tid=6)
    await check(lba, 1, tid=6)
    await verb(Opcode.TX_ABORT, 6, model.tx_abort)
    assert int(dut.pending_free.value) == MAX_PENDING

    # GC moves staged pages (the pending binding follows the copy); then commit one transaction and abort
    # another that also had a page moved (trap 9)
    await tx_write(8, 70, 2)
    await tx_write(9, 72, 1)

    # GET_LOG SNAPSHOT (what a checkpoint records; this bench's one queue pair is the "firmware's"): the
    # log's next seq, the open transactions, and exactly their staged pages
    T, A = MAX_OPEN_TX, MAX_APPENDS
    snap_bytes = spec.SNAP_HDR.size + 16 * (T + A + MAX_PENDING)
    snap = host.buffer(-(-snap_bytes // page))
    expect(await tb.do(opcode=Opcode.GET_LOG, log_page=spec.LogPage.SNAPSHOT, nlb=1, buf=snap), Status.SUCCESS)
    raw = tb.read_bytes(snap, snap_bytes)
    hdr = spec.SNAP_HDR.unpack(raw[:16])
    assert (hdr.tx_slots, hdr.append_slots, hdr.entries) == (T, A, MAX_PENDING), hdr
    assert hdr.seq == int(dut.seq_next.value), hdr
    slots = [spec.SNAP_TX.unpack(raw[16 * (1 + t):16 * (2 + t)]) for t in range(T)]
    open_slots = {t: s for t, s in enumerate(slots) if s.flags & spec.SNAP_TX.compose("flags", open=1)}
    assert sorted(s.npages for s in open_slots.values()) == [1, 2], slots
    entries = [spec.SNAP_ENTRY.unpack(raw[16 * (1 + T + A + i):16 * (2 + T + A + i)]) for i in range(MAX_PENDING)]
    staged_by = {}
    for e in entries:
        if e.flags & 1:
            staged_by.setdefault(e.flags >> 8 & 0xFF, set()).add((e.lba, e.ppa))
    assert set(staged_by) == set(open_slots), (staged_by, open_slots)
    by_addr = {pg.addr: spec.unpack_oob(pg.oob) for pg in tb.flash_pages()}
    for t, pages in staged_by.items():
        assert len(pages) == open_slots[t].npages
        for lba, ppa in pages:
            rec = by_addr[ppa]
            assert rec.lba == lba and rec.tid == open_slots[t].first_vseq & spec.LOG.TAG_MASK, rec
            assert rec.vseq < hdr.seq
    assert sorted(lba for pages in staged_by.values() for lba, _ in pages) == [70, 71, 72]

    def staged(lba, tid_tag=None):
        best = None
        for pg in tb.flash_pages():
            rec = spec.unpack_oob(pg.oob)
            if rec and rec.lba == lba and rec.flags & spec.OOB.compose("flags", tx=1) and \
                    (best is None or rec.seq > best[1]):
                best = (pg.addr, rec.seq)
        return best[0]
    for lba in (71, 72):
        r = await tb.relocate(staged(lba), tag=lba)
        assert RelocResult(r["result"]) == RelocResult.MOVED, r
    await check(70, 3, tid=8)
    await check(70, 3, tid=9)
    await check(70, 3)
    # a page no map entry or binding names (tid 2's aborted page) is not moved, nor even copied
    aborted = staged(5)
    programs = int(dut.nand_programs.value)
    r = await tb.relocate(aborted, tag=5)
    assert RelocResult(r["result"]) == RelocResult.RACED, r
    assert int(dut.nand_programs.value) == programs, "a dead staged page was copied"
    await verb(Opcode.TX_COMMIT, 8, model.tx_commit)
    await verb(Opcode.TX_ABORT, 9, model.tx_abort)
    await check(70, 3)
    assert int(dut.tx_open.value) == 0
    assert int(dut.tx_floor.value) == 2**64 - 1

    # the flash recovers to what the host sees; the block table counts exactly the pages the map binds
    assert recover(tb.flash_pages()).contents() == model.contents()
    await check_valid_counts(tb, model)
    await tb.chan.expect_clean()


@cocotb.test()
async def completions_hold_while_posted(dut):
    """A completion stays on the host queues' input until they take it: a flood of immediate completions
    (RELEASEs of a forged token, INVALID_TOKEN at once) posted while APPENDs publish never lends an APPEND
    its result words.  The host queues write an entry's four words over several cycles; an executor that
    let a published group's completion take over its output mid-entry posted the APPEND's cid and status
    with the RELEASE's result (0): a token that was never live."""
    tb = await make_tb(dut, name="cplhold")
    host = Host(tb)
    blocks = Blocks(tb.page, 40000)
    forged = int.from_bytes(spec.TOKEN.pack(handle=0xFFFF, gen=1, check=0x5EED), "little")
    appends, tokens, releases = 48, [], []
    done = False

    async def flood():
        while not done:
            if tb.outstanding < 24:
                releases.append(await tb.submit(opcode=Opcode.RELEASE, token=forged))
            else:
                await tb.cycles(16)

    async def settle(cid):
        """The append's token is one the core issues, live, and its own: its RELEASE succeeds."""
        cpl = await tb.wait(cid)
        expect(cpl, Status.SUCCESS)
        token = cpl["result"]
        f = spec.split_token(token)
        assert 0 <= f.handle < MAX_APPENDS and f.gen >= 1, f"0x{token:016x}: not a token the core issues"
        assert token not in tokens, "a token was issued twice"
        tokens.append(token)
        expect(await tb.do(opcode=Opcode.RELEASE, token=token), Status.SUCCESS)

    flooding = cocotb.start_soon(flood())
    in_flight = []
    for i in range(appends):
        buf = host.buffer()
        tb.write_bytes(buf, blocks(1))
        in_flight.append(await tb.submit(opcode=Opcode.APPEND, nlb=1, buf=buf))
        if len(in_flight) >= 4:
            await settle(in_flight.pop(0))
    for cid in in_flight:
        await settle(cid)
    done = True
    await flooding
    for cid in releases:
        cpl = await tb.wait(cid)
        expect(cpl, Status.INVALID_TOKEN)
        assert cpl["result"] == 0, cpl
    assert len(releases) > 4 * appends, "the flood was too thin to overlap the appends' publications"


@cocotb.test()
async def appends_and_remaps(dut):
    """Append-then-remap on the core, each step against ``atomflash.model``
    (device and model tokens differ: the test maps one to the other): APPEND
    returns an 8-byte token and binds nothing; REMAP binds several appends at
    once and unbinds what the LBAs held; RELEASE; every refusal (a forged, a
    stale, a released, a remapped, a twice-named token: INVALID_TOKEN; a length
    differing from the append: REMAP_LENGTH; overlapping ranges: DUPLICATE_LBA;
    ZERO_LENGTH; LBA_OUT_OF_RANGE; every append slot live: PENDING_FULL)
    changes nothing; a token stays valid while GC moves its pages; the flash
    recovers to the model's contents; the block table counts exactly the
    bound pages."""
    tb = await make_tb(dut, name="append")
    host = Host(tb)
    page = tb.page
    model = Model(Limits(capacity=CAPACITY, lba_size=page, max_open_tx=MAX_OPEN_TX, max_pending=MAX_PENDING,
                         max_appends=MAX_APPENDS))
    blocks = Blocks(page, 20000)
    device_of = {}            # model token -> device token

    async def append(nlb):
        data = blocks(nlb)
        buf = host.buffer(nlb)
        tb.write_bytes(buf, data)
        want = model.append(data)
        cpl = await tb.do(opcode=Opcode.APPEND, nlb=nlb, buf=buf)
        expect(cpl, want.status)
        if want.ok:
            token = cpl["result"]
            f = spec.split_token(token)
            assert 0 <= f.handle < MAX_APPENDS and f.gen >= 1, f
            assert token not in device_of.values(), "a token was issued twice"
            device_of[want.result] = token
            return want.result
        return None

    async def remap(triples, dev_tokens=None):
        """triples: (lba, model token, nlb); dev_tokens overrides the device tokens."""
        want = model.remap(triples)
        toks = dev_tokens or [device_of.get(t, t) for _, t, _ in triples]
        lst = host.buffer()
        tb.write_bytes(lst, b"".join(spec.REMAP_ENTRY.pack(lba=lba, token=tok, nlb=nlb)
                                     for (lba, _, nlb), tok in zip(triples, toks)))
        expect(await tb.do(opcode=Opcode.REMAP, list=lst, nlist=len(triples)), want.status)
        return want.status

    async def release(mtok, dev=None):
        want = model.release(mtok)
        expect(await tb.do(opcode=Opcode.RELEASE, token=dev if dev is not None else device_of.get(mtok, mtok)),
               want.status)
        return want.status

    async def check(lba, nlb):
        buf = host.buffer(nlb)
        tb.write_bytes(buf, b"\xa5" * (nlb * page))
        expect(await tb.do(opcode=Opcode.READ, lba=lba, nlb=nlb, buf=buf), Status.SUCCESS)
        got, want = tb.read_bytes(buf, nlb * page), model.read(lba, nlb).data
        for i in range(nlb):
            assert got[i * page:(i + 1) * page] == want[i * page:(i + 1) * page], f"lba {lba + i}"

    # old data, then appends: nothing visible until the remap
    data = blocks(8)
    buf = host.buffer(8)
    tb.write_bytes(buf, data)
    model.write(0, data)
    expect(await tb.do(opcode=Opcode.WRITE, lba=0, nlb=8, buf=buf), Status.SUCCESS)
    a, b, c = await append(2), await append(3), await append(1)
    await check(0, 8)
    assert await remap([(1, a, 2), (5, b, 3), (100, c, 1)]) == Status.SUCCESS
    await check(0, 8)
    await check(100, 1)
    # a spent token: INVALID_TOKEN, also for RELEASE
    assert await remap([(20, a, 2)]) == Status.INVALID_TOKEN
    assert await release(b) == Status.INVALID_TOKEN

    # refusals change nothing; each leaves the tokens live
    d, e = await append(2), await append(1)
    dev_d = spec.split_token(device_of[d])
    forged = int.from_bytes(spec.TOKEN.pack(handle=dev_d.handle, gen=dev_d.gen, check=dev_d.check ^ 1), "little")
    stale = int.from_bytes(spec.TOKEN.pack(handle=dev_d.handle, gen=dev_d.gen - 1 or 0xFFFF, check=dev_d.check),
                           "little")
    beyond = int.from_bytes(spec.TOKEN.pack(handle=0xFFFF, gen=1, check=0), "little")
    for tok in (forged, stale, beyond):
        want = model.remap([(30, 0xDEAD, 2)])
        assert want.status == Status.INVALID_TOKEN
        lst = host.buffer()
        tb.write_bytes(lst, spec.REMAP_ENTRY.pack(lba=30, token=tok, nlb=2))
        expect(await tb.do(opcode=Opcode.REMAP, list=lst, nlist=1), Status.INVALID_TOKEN)
        expect(await tb.do(opcode=Opcode.RELEASE, token=tok), Status.INVALID_TOKEN)
    assert await remap([(30, d, 2), (40, d, 2)]) == Status.INVALID_TOKEN          # named twice
    assert await remap([(30, d, 1)]) == Status.REMAP_LENGTH
    assert await remap([(30, d, 2), (31, e, 1)]) == Status.DUPLICATE_LBA          # ranges overlap
    assert await remap([(30, d, 2), (40, e, 0)]) == Status.ZERO_LENGTH
    assert await remap([(CAPACITY - 1, d, 2)]) == Status.LBA_OUT_OF_RANGE
    assert await remap([(30, d, 2), (40, 0x1234, 1)], [device_of[d], forged]) == Status.INVALID_TOKEN
    await check(28, 16)
    # release: the token dies, the pages become garbage
    assert await release(e) == Status.SUCCESS
    assert await remap([(40, e, 1)]) == Status.INVALID_TOKEN

    # every append slot live: PENDING_FULL (the model's limit too); a release frees one
    live = [d] + [await append(1) for _ in range(MAX_APPENDS - 1)]
    assert await append(1) is None
    assert await release(live.pop()) == Status.SUCCESS
    live.append(await append(1))
    assert live[-1] is not None

    # GC moves an append's pages: the token still remaps them, to the moved copies.  d is the newest
    # two-page append (a, the other one, is bound already)
    by_tag = {}
    for pg in tb.flash_pages():
        rec = spec.unpack_oob(pg.oob)
        if rec and rec.kind == Kind.APPEND and rec.group_len == 2:
            by_tag.setdefault(rec.tid, []).append((rec.seq, pg.addr))
    d_pages = max(by_tag.values())
    assert len(d_pages) == 2
    for _, addr in d_pages:
        r = await tb.relocate(addr, tag=3)
        assert RelocResult(r["result"]) == RelocResult.MOVED, r
    assert await remap([(30, d, 2)] + [(50 + i, tok, 1) for i, tok in enumerate(live[1:4])]) == Status.SUCCESS
    await check(28, 30)
    # a remapped page's OOB names no LBA: asked by its page alone, the relocator copies nothing; named
    # with its LBA (the firmware finds it in the map), it moves and its copy carries the LBA
    moved = {}
    for lba in (30, 31):
        addr = (await tb.map_op(MapOp.READ, lba))["old"]
        programs = int(dut.nand_programs.value)
        r = await tb.relocate(addr, tag=7)
        assert RelocResult(r["result"]) == RelocResult.RACED and int(dut.nand_programs.value) == programs, r
        r = await tb.relocate(addr, tag=8, lba=lba)
        assert RelocResult(r["result"]) == RelocResult.MOVED, r
        moved[lba] = r["new_ppa"]
        assert (await tb.map_op(MapOp.READ, lba))["old"] == r["new_ppa"]
    for pg in tb.flash_pages():
        if pg.addr in moved.values():
            rec = spec.unpack_oob(pg.oob)
            assert rec.kind == Kind.GC_COPY and moved[rec.lba] == pg.addr, rec
            assert rec.flags & spec.OOB.compose("flags", append=1), rec
    r = await tb.relocate(moved[30], tag=9)                 # the copy is found by its OOB's LBA
    assert RelocResult(r["result"]) == RelocResult.MOVED, r
    await check(28, 30)
    for tok in live[4:]:
        assert await release(tok) == Status.SUCCESS
    assert int(dut.pending_free.value) == MAX_PENDING

    # the flash recovers to what the host sees; the block table counts exactly the pages the map binds
    assert recover(tb.flash_pages()).contents() == model.contents()
    await check_valid_counts(tb, model)
    await tb.chan.expect_clean()


@cocotb.test()
async def write_cache(dut):
    """The volatile write cache (a build with ``FTL_CACHE_PAGES`` pages): overwrites coalesce in place with
    exact counters, reads see buffered data, destage fills whole stripes, FLUSH drains (a power cut after
    it loses nothing), ATOMIC_WRITE / TX_COMMIT / TX_FINAL / REMAP / trims / FUA writes drain first, and a
    power cut before a flush loses exactly the writes still buffered -- what ``Model(cache=True)`` and the
    oracle allow."""
    assert CACHE_PAGES >= 4 * CHANNELS * WAYS, "run on the write-cache build"
    tb = await make_tb(dut, name="wcache")
    dut.cache_base.value = CACHE_BASE
    host = Host(tb)
    page = tb.page
    stripe = CHANNELS * WAYS
    model = Model(Limits(capacity=CAPACITY, lba_size=page, max_open_tx=MAX_OPEN_TX, max_pending=MAX_PENDING),
                  cache=True)
    blocks = Blocks(page, 7000)

    def counters():
        return dict(cin=int(dut.cache_in.value), coal=int(dut.cache_coalesced.value),
                    dest=int(dut.cache_destaged.value), stripes=int(dut.cache_stripes.value),
                    dirty=int(dut.cache_dirty.value))

    async def write(lba, nlb=1, fua=False):
        data = blocks(nlb)
        buf = host.buffer(nlb)
        tb.write_bytes(buf, data)
        model.write(lba, data, fua=fua)
        expect(await tb.do(opcode=Opcode.WRITE, lba=lba, nlb=nlb, buf=buf,
                           flags=spec.CMD.compose("flags", fua=int(fua))), Status.SUCCESS)

    async def read_check(lba, nlb):
        buf = host.buffer(nlb)
        tb.write_bytes(buf, b"\xa5" * (nlb * page))
        expect(await tb.do(opcode=Opcode.READ, lba=lba, nlb=nlb, buf=buf), Status.SUCCESS)
        got, want = tb.read_bytes(buf, nlb * page), model.read(lba, nlb).data
        for i in range(nlb):
            assert got[i * page:(i + 1) * page] == want[i * page:(i + 1) * page], f"lba {lba + i}"

    async def programs():
        return sum([await tb.chan.stat(i, "PROGRAMS") for i in range(tb.dies)])

    # IDENTIFY reports the cache, whatever the firmware's record says
    ident = spec.IDENTIFY.pack(magic=spec.IDENTIFY_MAGIC, capacity=CAPACITY, lba_size=page, max_transfer=64)
    tb.write_bytes(IDENTIFY, ident)
    buf = host.buffer()
    expect(await tb.do(opcode=Opcode.IDENTIFY, buf=buf), Status.SUCCESS)
    got = spec.IDENTIFY.unpack(tb.read_bytes(buf, spec.IDENTIFY.size))
    assert got.volatile_cache == CACHE_PAGES * page and got.capacity == CAPACITY

    # coalescing: 4 LBAs, then each of two overwritten three times; nothing reaches the flash
    await write(0, 4)
    for _ in range(3):
        await write(0, 2)
    assert counters() == dict(cin=10, coal=6, dest=0, stripes=0, dirty=4), counters()
    assert await programs() == 0
    # reads: all buffered, buffered + unmapped, buffered + flash
    await read_check(0, 4)
    await read_check(2, 5)
    # FLUSH drains: one whole stripe, everything durable
    expect(await tb.do(opcode=Opcode.FLUSH), Status.SUCCESS)
    model.flush()
    assert counters() == dict(cin=10, coal=6, dest=4, stripes=1, dirty=0), counters()
    assert await programs() == 4
    assert recover(tb.flash_pages()).contents() == model.contents()
    await read_check(0, 6)

    # more distinct LBAs than the cache holds: destaged in whole stripes, the oldest first, reads right
    # throughout (hits, pages being destaged, flash)
    before = counters()
    n = 3 * CACHE_PAGES
    for lba in range(100, 100 + n, 4):
        await write(lba, 4)
        await read_check(lba - 2, 6)
    c = counters()
    assert c["cin"] - before["cin"] == n and c["coal"] == before["coal"]
    destaged = c["dest"] - before["dest"]
    assert destaged >= n - CACHE_PAGES and destaged % stripe == 0, c
    assert c["stripes"] - before["stripes"] == destaged // stripe     # every destage a whole stripe
    assert c["dirty"] == n - destaged, c
    await read_check(96, 64)
    # a hot LBA among them keeps coalescing while the others destage
    for k in range(8):
        await write(100 + n - 1)
        await write(500 + k)
    await read_check(100 + n - 4, 4)
    await read_check(500, 8)
    expect(await tb.do(opcode=Opcode.HINT, hint=Hint.CHECKPOINT), Status.SUCCESS)   # drains like FLUSH
    model.hint(Hint.CHECKPOINT)
    assert counters()["dirty"] == 0
    assert recover(tb.flash_pages()).contents() == model.contents()

    # the fence: each verb that binds the map first drains the cache, so buffered data is never part of
    # its group and never lands after it
    async def buffered_then(lba, verb):
        await write(lba)
        await write(lba + 1)
        assert counters()["dirty"] >= 2
        await verb()
        assert counters()["dirty"] == 0, verb
        await read_check(lba, 2)

    async def atomic():
        pairs = [(600, blocks(1)), (3, blocks(1))]
        expect(await tb.do(opcode=Opcode.ATOMIC_WRITE, list=host.atomic_list(pairs), nlist=2), Status.SUCCESS)
        model.atomic_write(pairs)
    await buffered_then(600, atomic)

    async def trim():
        expect(await tb.do(opcode=Opcode.DEALLOCATE, lba=611, nlb=1), Status.SUCCESS)
        model.trim(611, 1)
    await buffered_then(610, trim)

    async def fua():
        await write(621, fua=True)
    await buffered_then(620, fua)

    async def tx_commit():
        data = blocks(1)
        buf = host.buffer()
        tb.write_bytes(buf, data)
        expect(await tb.do(opcode=Opcode.TX_WRITE, tid=5, lba=630, nlb=1, buf=buf), Status.SUCCESS)
        model.tx_write(5, 630, data)
        await write(631)            # buffered while the transaction is open
        tx_buf = host.buffer()
        expect(await tb.do(opcode=Opcode.TX_READ, tid=5, lba=630, nlb=2, buf=tx_buf), Status.SUCCESS)
        assert tb.read_bytes(tx_buf, 2 * page) == model.tx_read(5, 630, 2).data      # staged page + buffered
        expect(await tb.do(opcode=Opcode.TX_COMMIT, tid=5), Status.SUCCESS)
        model.tx_commit(5)
    await buffered_then(630, tx_commit)

    async def tx_final():
        data = blocks(2)
        buf = host.buffer(2)
        tb.write_bytes(buf, data)
        expect(await tb.do(opcode=Opcode.TX_WRITE, tid=6, lba=641, nlb=2, buf=buf,
                           flags=spec.CMD.compose("flags", tx_final=1)), Status.SUCCESS)
        model.tx_write(6, 641, data, final=True)
    await buffered_then(640, tx_final)

    async def remap():
        data = blocks(2)
        buf = host.buffer(2)
        tb.write_bytes(buf, data)
        cpl = await tb.do(opcode=Opcode.APPEND, nlb=2, buf=buf)
        expect(cpl, Status.SUCCESS)
        mtok = model.append(data).result
        assert counters()["dirty"] >= 2          # an APPEND does not drain
        lst = host.buffer()
        tb.write_bytes(lst, spec.REMAP_ENTRY.pack(lba=651, token=cpl["result"], nlb=2))
        expect(await tb.do(opcode=Opcode.REMAP, list=lst, nlist=1), Status.SUCCESS)
        model.remap([(651, mtok, 2)])
    await buffered_then(650, remap)
    await read_check(600, 60)
    assert recover(tb.flash_pages()).contents() == model.contents()

    # a power cut before the flush: what was flushed survives, exactly the writes still buffered are lost
    await write(700, 4)
    await write(3)                   # over a flushed atomic member: the cut brings the old block back
    await write(700, 2)              # coalesced
    expect(await tb.do(opcode=Opcode.FLUSH), Status.SUCCESS)
    model.flush()
    flushed = model.contents()
    await write(0, 2)
    await write(702)
    await write(710, 3)
    lost = {0, 1, 702, 710, 711, 712}
    assert counters()["dirty"] == len(lost)
    await read_check(0, 2)
    await read_check(700, 13)
    for i in range(tb.dies):
        await tb.chan.ctl(i, NandCtl.POWER_CUT)
    contents = recover(tb.flash_pages(trust_torn=False)).contents()
    assert not check_after_cut(model.history, contents, lba_size=page)
    assert {k: v for k, v in contents.items() if k not in lost} == \
        {k: v for k, v in flushed.items() if k not in lost}
    for lba in lost:
        assert contents.get(lba) == flushed.get(lba), lba          # the old block, or still unmapped
        assert model.contents()[lba] != flushed.get(lba), lba


@cocotb.test()
async def mlc_paired_pages(dut):
    """MLC paired pages (DESIGN.md trap 4, rtl/ftl/pairing.py): the same queue-depth-1 writes to
    distinct LBAs and the same cut -- in die 0's 7th program, an upper page whose lower page
    holds a write -- twice.  With ``mlc`` off the cut destroys a write acknowledged long before
    (so the check below can fail); with it on, nothing acknowledged is lost: a lone write lands on
    a pre-padded upper page, and a lower page the cut damages holds a PAD or a write whose
    completion still waited for its word line."""
    lost, damaged = {}, {}
    for mlc in (0, 1):
        tb = await make_tb(dut, name=f"mlc{mlc}", mlc_paired=1)
        dut.mlc.value = mlc
        host, page = Host(tb), tb.page
        model = Model(Limits(capacity=CAPACITY, lba_size=page, max_open_tx=MAX_OPEN_TX, max_pending=MAX_PENDING),
                      auto_complete=False)
        await tb.chan.ctl(0, NandCtl.SCHEDULE_CUT, int(NandCutWhen.PROGRAM), 7, 500)
        blocks = Blocks(page, 300_000 + 1000 * mlc)
        acked = 0
        for lba in range(64):
            data = blocks(1)
            buf = host.buffer()
            tb.write_bytes(buf, data)
            c = model.write(lba, data)
            cid = await tb.submit(opcode=Opcode.WRITE, lba=lba, nlb=1, buf=buf)
            cut = False
            while cid not in tb.done and not cut:
                await tb.cycles(500)
                cut = bool(await tb.chan.stat(0, "POWER_CUTS"))
            if cid not in tb.done:
                break
            assert Status(tb.done.pop(cid)["status"]) == Status.SUCCESS
            for op in c.ops:
                model.complete(op)
            acked += 1
        else:
            raise AssertionError("the scheduled cut never came")
        pads, programs = int(dut.pad_pages.value), int(dut.nand_programs.value)
        host_pages = int(dut.host_write_pages.value)
        for i in range(tb.dies):
            await tb.chan.ctl(i, NandCtl.POWER_CUT)
        with Image(tb.chan.cfg[tb.chan.index(0, 0)]["image"]) as img:
            damaged[mlc] = [p for b in tb.blocks_used[0] for p in range(tb.profile.pages_per_block)
                            if img.page_state(0, b, p).paired_damage]
        contents = recover(tb.flash_pages(trust_torn=False)).contents()
        lost[mlc] = check_after_cut(model.history, contents, lba_size=page)
        assert acked >= 4, f"mlc {mlc}: only {acked} writes acknowledged before the cut"
        if mlc:
            assert pads > 0 and programs == host_pages + pads, (pads, programs, host_pages)
        else:
            assert pads == 0
    assert damaged[0] and damaged[1], f"the cut must damage a lower page both times: {damaged}"
    assert lost[0], "without pairing the cut must lose an acknowledged write (else this test proves nothing)"
    assert not lost[1], lost[1][:5]
