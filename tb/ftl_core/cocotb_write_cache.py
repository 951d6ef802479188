"""cocotb: the FTL core's volatile write cache (``write_cache``, on the build with
``FTL_CACHE_PAGES`` pages): coalescing, reads from the cache, stripe destage, the drains and fences,
and a power cut losing exactly the writes still buffered."""

import functools

import cocotb

from atomflash import spec
from atomflash.model import Limits, Model, check_after_cut, recover
from atomflash.nandsim import NandCtl
from atomflash.spec import Hint, Opcode, Status
from sim.harness.ftl_core import MAX_OPEN_TX, MAX_PENDING
from sim.harness.ftl_tb import IDENTIFY
from ftl_core_tb import (CACHE_BASE, CACHE_PAGES, CAPACITY, CHANNELS, WAYS, Blocks, Host, expect, make_tb,
                         read_and_compare)


@cocotb.test()
async def write_cache(dut):
    """The volatile write cache (a build with ``FTL_CACHE_PAGES`` pages): overwrites coalesce in place with
    exact counters, reads see buffered data, destage fills whole stripes, FLUSH drains (a power cut after
    it loses nothing), ATOMIC_WRITE / TX_COMMIT / TX_FINAL / REMAP / trims / FUA writes drain first, and a
    power cut before a flush loses exactly the writes still buffered -- what ``Model(cache=True)`` and the
    oracle allow; a destage dropped after program failures is MEDIA_ERROR on its FLUSH, and the pages stay
    buffered for the next one."""
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

    read_check = functools.partial(read_and_compare, tb, host, model)

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

    # a destage the flash refuses: every program of a stripe fails twice (more than the group's retries),
    # so its group is dropped; the FLUSH that drove it answers MEDIA_ERROR, the pages stay buffered and
    # readable, and the next FLUSH (the flash working again) makes them durable
    for lba in range(720, 720 + stripe):
        await write(lba)
    assert counters()["dirty"] == stripe
    fails0 = sum([await tb.chan.stat(i, "PROGRAM_FAILS") for i in range(tb.dies)])
    for die in range(tb.dies):
        for _ in range(2):
            await tb.chan.ctl(die, NandCtl.FAIL_PROGRAM, -1)
    expect(await tb.do(opcode=Opcode.FLUSH), Status.MEDIA_ERROR)
    assert sum([await tb.chan.stat(i, "PROGRAM_FAILS") for i in range(tb.dies)]) - fails0 == 2 * tb.dies
    assert counters()["dirty"] == stripe, counters()
    await read_check(718, stripe + 4)
    expect(await tb.do(opcode=Opcode.FLUSH), Status.SUCCESS)
    model.flush()
    assert counters()["dirty"] == 0, counters()
    assert recover(tb.flash_pages()).contents() == model.contents()
    await read_check(718, stripe + 4)

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
