"""cocotb: the log writer programs a small log; the flash images and a read
through the controller must show exactly what the requests described."""

import os
import zlib

import cocotb
from cocotb.triggers import ClockCycles, FallingEdge, ReadOnly

from atomflash import spec
from atomflash.model import Page, recover
from atomflash.nandsim import Image
from atomflash.spec import Kind, NandOp, NandResult
from rtl.ftl.allocator import PageAllocator
from rtl.ftl.logwriter import PAGE_DONE, PAGE_WRITE
from sim.harness.layouts import pack, unpack
from sim.harness.streams import StreamSink, StreamSource
from sim.harness.channel_tb import ChannelTB
from top import pattern_bytes

CHANNELS, WAYS = 2, 2
DIES = CHANNELS * WAYS
SEQ0 = 1000
BLOCKS = (1, 2)
COMMIT = spec.OOB.compose("flags", commit=1)

_free = {name: f for name, f in PageAllocator(channels=CHANNELS, ways=WAYS).free.payload.shape()}


def page_write(tag, mem_addr, record=None, **oob):
    fields = dict(kind=Kind.DATA, lba=0, seq=0, vseq=0, group_len=1, group_idx=0, flags=0, tid=0) | oob
    oob_bits = int.from_bytes(spec.pack_oob(**fields), "little")
    rec = dict(record=1, rec_count=record[0], rec_total=record[1]) if record else {}
    return pack(PAGE_WRITE, tag=tag, mem_addr=mem_addr, oob=oob_bits, **rec)


def page_done(x):
    return unpack(PAGE_DONE, x, raw=("ppa",))


def unpack_ppa(ppa):
    return dict(page=ppa & 0x3FF, block=(ppa >> 10) & 0x3FFF, lun=(ppa >> 24) & 3, way=(ppa >> 26) & 7,
                channel=ppa >> 29)


@cocotb.test()
async def log_of_writes_and_a_group(dut):
    tb = await ChannelTB.create(dut, channels=CHANNELS, ways=WAYS, profile="small",
                                slot_words=int(os.environ["NANDTB_SLOT_WORDS"]), name="lw", mode=5)
    lay, prof = tb.layout, tb.profile
    # requests with idle gaps, completions taken late: nothing may be lost, reordered or stamped twice
    req = StreamSource(dut, "req", tb.clk, idle=0.4, seed=1)
    free = StreamSource(dut, "free", tb.clk, idle=0.4, seed=2)
    seq_load = StreamSource(dut, "seq_load", tb.clk)
    done = StreamSink(dut, "done", tb.clk, backpressure=0.5, max_gap=8, seed=3)

    # what the firmware does at boot: reset, erase, hand blocks and the seq over
    for die in range(DIES):
        c, w = die % CHANNELS, die // CHANNELS
        assert (await tb.do(opcode=NandOp.RESET, channel=c, target=w, tag=die)).result == NandResult.OK
        for block in BLOCKS:
            cpl = await tb.do(opcode=NandOp.ERASE, channel=c, target=w, block=block, tag=die)
            assert cpl.result == NandResult.OK
    dut.pages_per_block.value = prof.pages_per_block
    await seq_load.send(SEQ0)
    for block in BLOCKS:
        for die in range(DIES):
            await free.send(die << _free["die"].offset | block << _free["block"].offset)

    # ten plain writes, an atomic group overwriting two of them, one more overwrite
    writes = [dict(lba=lba, group_len=1, flags=COMMIT) for lba in range(10)]
    group = [30, 5, 31, 2]
    writes += [dict(lba=lba, group_len=len(group), group_idx=i, flags=COMMIT if i == len(group) - 1 else 0)
               for i, lba in enumerate(group)]
    writes.append(dict(lba=0, group_len=1, flags=COMMIT))
    # and a TRIM record page of 3 entries (their bytes come from memory; the header is the log writer's)
    writes.append(dict(kind=Kind.TRIM, lba=0, group_len=1, flags=COMMIT, record=(3, 3)))
    mem = [0x10000 * (i + 1) for i in range(len(writes))]
    for tag, (w, addr) in enumerate(zip(writes, mem)):
        await req.send(page_write(tag, addr, **w))
    results = sorted((page_done(x) for x in await done.wait_for(len(writes))), key=lambda d: d["tag"])
    assert req.gaps and done.stalls, "the stalls did not happen"

    # every page programmed, seqs consecutive in request order, pages distinct and in order per die
    assert [r["result"] for r in results] == [NandResult.OK] * len(writes), results
    assert [r["seq"] for r in results] == [SEQ0 + i for i in range(len(writes))]
    ppas = [unpack_ppa(r["ppa"]) for r in results]
    assert len({r["ppa"] for r in results}) == len(results)
    for die in range(DIES):
        pages = [p["page"] for p in ppas if p["channel"] == die % CHANNELS and p["way"] == die // CHANNELS]
        assert pages == sorted(pages) and pages, (die, pages)

    # the flash holds the data and an OOB record recovery accepts
    images = [Image(tb.cfg[i]["image"]) for i in range(DIES)]
    flash_pages = []
    for r, p, w, addr in zip(results, ppas, writes, mem):
        img = images[p["channel"] * WAYS + p["way"]]
        data = img.data(p["lun"], p["block"], p["page"])
        if w.get("record"):
            # REC_HDR stamped with the page's seq; entries and the rest as in memory
            hdr_size = spec.REC_HDR.size
            assert data[hdr_size:] == pattern_bytes(addr, prof.page_data)[hdr_size:]
            parsed = spec.unpack_record_page(data, Kind.TRIM, r["seq"])
            assert parsed is not None, "record page does not verify"
            hdr, entries = parsed
            assert (hdr.count, hdr.total, len(entries)) == (3, 3, 3)
            assert spec.unpack_record_page(data, Kind.TRIM, r["seq"] + 1) is None
            rec = spec.unpack_oob(img.spare(p["lun"], p["block"], p["page"])[lay.oob_record_col - prof.page_data:]
                                  [:spec.OOB.size])
            assert rec is not None and rec.kind == Kind.TRIM and rec.seq == r["seq"]
            continue
        assert data == pattern_bytes(addr, prof.page_data), f"data of request {r['tag']}"
        spare = img.spare(p["lun"], p["block"], p["page"])
        oob = spare[lay.oob_record_col - prof.page_data:][:spec.OOB.size]
        assert spare[:lay.bbm_bytes] == b"\xff" * lay.bbm_bytes, "bad-block marker must stay erased"
        rec = spec.unpack_oob(oob)
        assert rec is not None, f"OOB record of request {r['tag']} does not verify"
        assert (rec.kind, rec.lba, rec.seq, rec.vseq, rec.group_len, rec.group_idx, rec.flags) == \
            (Kind.DATA, w["lba"], r["seq"], r["seq"], w["group_len"], w.get("group_idx", 0), w["flags"])
        flash_pages.append(Page(addr=r["ppa"], oob=oob, data=data))
    want = {}
    for w, addr in zip(writes, mem):
        if not w.get("record"):
            want[w["lba"]] = pattern_bytes(addr, prof.page_data)
    assert recover(flash_pages).contents() == want

    # an ECC read through the controller agrees byte for byte (CRC of the user bytes)
    p, r = ppas[0], results[0]
    user = pattern_bytes(mem[0], prof.page_data) + b"\xff" * lay.bbm_bytes + spec.pack_oob(
        kind=Kind.DATA, lba=0, seq=r["seq"], vseq=r["seq"], group_len=1, group_idx=0, flags=COMMIT, tid=0)
    cpl = await tb.do(opcode=NandOp.READ, channel=p["channel"], target=p["way"], block=p["block"], page=p["page"],
                      column=0, length=lay.user_bytes, slot=3, tag=1)
    assert cpl.result == NandResult.OK and cpl.crc == zlib.crc32(user[:lay.user_bytes])
    await tb.expect_clean()


@cocotb.test()
async def no_page_when_no_block_will_come(dut):
    """Starved, a request waits for a page; with ``no_blocks`` it completes at once with ``no_page``,
    programs nothing and takes no seq; a block handed over ends the give-up (the allocator is no
    longer starved), and the next request gets the first seq."""
    tb = await ChannelTB.create(dut, channels=CHANNELS, ways=WAYS, profile="small",
                                slot_words=int(os.environ["NANDTB_SLOT_WORDS"]), name="lw_nopage", mode=5)
    req = StreamSource(dut, "req", tb.clk)
    free = StreamSource(dut, "free", tb.clk)
    seq_load = StreamSource(dut, "seq_load", tb.clk)
    done = StreamSink(dut, "done", tb.clk)
    dut.no_blocks.value = 0
    dut.pages_per_block.value = tb.profile.pages_per_block
    await seq_load.send(SEQ0)
    programs = [await tb.stat(i, "PROGRAMS") for i in range(DIES)]

    sending = cocotb.start_soon(req.send(page_write(1, 0x10000, lba=7, flags=COMMIT)))   # not taken: no page
    await ClockCycles(tb.clk, 2000)
    assert int(dut.starved.value) == 1 and not done.items, "a request completed without a page"
    dut.no_blocks.value = 1
    await sending
    first = page_done((await done.wait_for(1))[0])
    assert (first["tag"], first["result"], first["no_page"]) == (1, NandResult.FAIL, 1), first
    await req.send(page_write(2, 0x20000, lba=8, flags=COMMIT))
    second = page_done((await done.wait_for(2))[1])
    assert (second["tag"], second["no_page"]) == (2, 1), second

    # an erased block: no longer starved from the cycle it is offered, so no_blocks (still set) gives
    # nothing up
    assert (await tb.do(opcode=NandOp.ERASE, channel=0, target=0, block=1, tag=0)).result == NandResult.OK
    dut.free__payload.value = 0 << _free["die"].offset | 1 << _free["block"].offset
    dut.free__valid.value = 1
    await ReadOnly()
    assert int(dut.starved.value) == 0, "a block offered: not starved"
    await FallingEdge(tb.clk)
    await free.send(0 << _free["die"].offset | 1 << _free["block"].offset)
    await req.send(page_write(3, 0x30000, lba=9, flags=COMMIT))
    third = page_done((await done.wait_for(3))[2])
    assert (third["tag"], third["result"], third["no_page"], third["seq"]) == (3, NandResult.OK, 0, SEQ0), third
    assert unpack_ppa(third["ppa"])["block"] == 1
    assert [await tb.stat(i, "PROGRAMS") for i in range(DIES)] == [programs[0] + 1] + programs[1:], \
        "a no_page request was programmed"
    await tb.expect_clean()
