"""cocotb: the FTL core's relocation hook (``gc_relocation``), with the firmware's streams
stalling: pages moved keep their data and versions, a host write racing the move wins, an erased
page is not moved, the flash with its GC copies recovers to the host's view."""

import cocotb

from atomflash import spec
from atomflash.model import Limits, Model, recover
from atomflash.spec import Kind, Opcode, Status
from rtl.ftl.relocate import RelocResult
from ftl_core_tb import CAPACITY, Host, block, expect, make_tb


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
