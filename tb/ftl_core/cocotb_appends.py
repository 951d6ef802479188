"""cocotb: append-then-remap on the FTL core: APPEND tokens, REMAP, RELEASE and every refusal
against ``atomflash.model``, a token surviving GC (``appends_and_remaps``); an APPEND's completion
never taking another command's result words while immediate completions flood the host queues
(``completions_hold_while_posted``)."""

import functools

import cocotb

from atomflash import spec
from atomflash.model import Limits, Model, recover
from atomflash.spec import Kind, Opcode, Status
from rtl.ftl.mapcache import MapOp
from rtl.ftl.relocate import RelocResult
from sim.harness.ftl_core import MAX_APPENDS, MAX_OPEN_TX, MAX_PENDING
from ftl_core_tb import CAPACITY, Blocks, Host, check_valid_counts, expect, make_tb, read_and_compare


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

    check = functools.partial(read_and_compare, tb, host, model)

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
