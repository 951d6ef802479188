"""cocotb: X-FTL transactions on the FTL core (``transactions``): staging, TX_READ, commit and
abort, TX_FINAL, every refusal, GET_LOG SNAPSHOT and GC moving staged pages, step by step against
``atomflash.model``."""

import cocotb

from atomflash import spec
from atomflash.model import Limits, Model, recover
from atomflash.spec import Kind, Opcode, Status
from rtl.ftl.relocate import RelocResult
from sim.harness.ftl_core import MAX_APPENDS, MAX_OPEN_TX, MAX_PENDING
from ftl_core_tb import CAPACITY, Blocks, Host, check_valid_counts, expect, make_tb


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
