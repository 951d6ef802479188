"""cocotb: the FTL core when the flash fails it: program failures retried (alone, and under load
with READs of the same LBAs in flight, up to a group dropped with MEDIA_ERROR), and every erased
block used up with none coming (``no_blocks``: NO_SPACE, nothing half-bound)."""

import os
import random

import cocotb

from atomflash import spec
from atomflash.model import Limits, Model, recover
from atomflash.nandsim import NandCtl
from atomflash.spec import NandOp, NandResult, Opcode, Status
from rtl.ftl.mapcache import MapOp
from sim.harness.ftl_core import MAX_OPEN_TX, MAX_PENDING
from ftl_core_tb import CAPACITY, CHANNELS, WAYS, Blocks, Host, block, check_valid_counts, expect, make_tb


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
