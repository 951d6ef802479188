"""cocotb: the log writer programs a small log; the flash images and a read through the controller
must show exactly what the requests described.

``LogWriterTB`` owns the harness (:class:`sim.harness.channel_tb.ChannelTB`: the NAND controller,
its models and its clock), the log writer's stream drivers (requests and free blocks from
:class:`~sim.harness.streams.StreamSource` with seeded idle gaps, completions taken by a
:class:`~sim.harness.streams.StreamSink` under backpressure), the reference (the requests it sent, as
the flash must show them, down to the map the model's recovery builds) and the scoreboard.  Payloads go
through the log writer's layouts (PAGE_WRITE, PAGE_DONE, the allocator's free block) and the spec's
records (OOB, PPA)."""

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
from sim.harness.channel_tb import ChannelTB
from sim.harness.layouts import pack, unpack
from sim.harness.streams import StreamSink, StreamSource
from top import pattern_bytes

CHANNELS, WAYS = 2, 2
DIES = CHANNELS * WAYS
SEQ0 = 1000
BLOCKS = (1, 2)
COMMIT = spec.OOB.compose("flags", commit=1)
FREE = PageAllocator(channels=CHANNELS, ways=WAYS).free.payload.shape()


def page_write(tag, mem_addr, record=None, **oob):
    fields = dict(kind=Kind.DATA, lba=0, seq=0, vseq=0, group_len=1, group_idx=0, flags=0, tid=0) | oob
    oob_bits = int.from_bytes(spec.pack_oob(**fields), "little")
    rec = dict(record=1, rec_count=record[0], rec_total=record[1]) if record else {}
    return pack(PAGE_WRITE, tag=tag, mem_addr=mem_addr, oob=oob_bits, **rec)


def page_done(x):
    return unpack(PAGE_DONE, x, raw=("ppa",))


def ppa_fields(ppa):
    return spec.PPA.decompose("ppa", ppa)


def die_of(ppa) -> int:
    p = ppa_fields(ppa)
    return p["way"] * CHANNELS + p["channel"]


class LogWriterTB:
    def __init__(self, dut, harness: ChannelTB, *, idle=0.0, free_idle=0.0, backpressure=0.0, seed=1):
        self.dut, self.nand, self.clk = dut, harness, harness.clk
        self.layout, self.profile = harness.layout, harness.profile
        self.req = StreamSource(dut, "req", self.clk, idle=idle, seed=seed)
        self.free = StreamSource(dut, "free", self.clk, idle=free_idle, seed=seed + 1)
        self.seq_load = StreamSource(dut, "seq_load", self.clk)
        self.done = StreamSink(dut, "done", self.clk, backpressure=backpressure, max_gap=8, seed=seed + 2)
        self.writes = []           # the reference: (tag, oob fields, memory address) of every request sent
        dut.no_blocks.value = 0
        dut.pages_per_block.value = self.profile.pages_per_block

    @classmethod
    async def create(cls, dut, name: str, **drivers):
        harness = await ChannelTB.create(dut, channels=CHANNELS, ways=WAYS, profile="small",
                                         slot_words=int(os.environ["NANDTB_SLOT_WORDS"]), name=name, mode=5)
        return cls(dut, harness, **drivers)

    # -- what the firmware does ---------------------------------------------------------------------------
    async def boot(self, blocks=BLOCKS):
        """At boot: reset and erase every die, hand the seq and the blocks over."""
        for die in range(DIES):
            c, w = die % CHANNELS, die // CHANNELS
            assert (await self.nand.do(opcode=NandOp.RESET, channel=c, target=w, tag=die)).result == NandResult.OK
            for block in blocks:
                cpl = await self.nand.do(opcode=NandOp.ERASE, channel=c, target=w, block=block, tag=die)
                assert cpl.result == NandResult.OK
        await self.seq_load.send(SEQ0)
        for block in blocks:
            for die in range(DIES):
                await self.free.send(pack(FREE, die=die, block=block))

    async def programs(self):
        return [await self.nand.stat(i, "PROGRAMS") for i in range(DIES)]

    # -- requests and completions ------------------------------------------------------------------------
    async def write(self, tag, mem_addr, **fields):
        self.writes.append((tag, fields, mem_addr))
        await self.req.send(page_write(tag, mem_addr, **fields))

    async def completion(self, n):
        """The ``n``-th completion (from 1), unpacked."""
        return page_done((await self.done.wait_for(n))[n - 1])

    async def completions(self):
        """One completion per request sent, in tag order."""
        return sorted((page_done(x) for x in await self.done.wait_for(len(self.writes))), key=lambda d: d["tag"])

    # -- the scoreboard ----------------------------------------------------------------------------------
    def check_log(self, results):
        """Every page programmed, seqs consecutive in request order, pages distinct and in order per die;
        the flash holds the data and an OOB record recovery accepts, and recovers the requests' map."""
        lay, prof = self.layout, self.profile
        writes = [w for _, w, _ in self.writes]
        mem = [addr for _, _, addr in self.writes]
        assert [r["tag"] for r in results] == [tag for tag, _, _ in self.writes]
        assert [r["result"] for r in results] == [NandResult.OK] * len(writes), results
        assert [r["seq"] for r in results] == [SEQ0 + i for i in range(len(writes))]
        ppas = [ppa_fields(r["ppa"]) for r in results]
        assert len({r["ppa"] for r in results}) == len(results)
        for die in range(DIES):
            pages = [p["page"] for p in ppas if p["channel"] == die % CHANNELS and p["way"] == die // CHANNELS]
            assert pages == sorted(pages) and pages, (die, pages)

        images = [Image(self.nand.cfg[i]["image"]) for i in range(DIES)]
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
                assert (hdr.count, hdr.total, len(entries)) == (w["record"][0], w["record"][1], w["record"][0])
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
        return ppas

    async def check_read(self, result, ppa, fields, mem_addr):
        """An ECC read through the controller agrees byte for byte (CRC of the user bytes)."""
        lay, prof = self.layout, self.profile
        oob = dict(kind=Kind.DATA, lba=0, seq=result["seq"], vseq=result["seq"], group_len=1, group_idx=0, flags=0,
                   tid=0) | {k: fields[k] for k in ("lba", "group_len", "group_idx", "flags") if k in fields}
        user = pattern_bytes(mem_addr, prof.page_data) + b"\xff" * lay.bbm_bytes + spec.pack_oob(**oob)
        cpl = await self.nand.do(opcode=NandOp.READ, channel=ppa["channel"], target=ppa["way"], block=ppa["block"],
                                 page=ppa["page"], column=0, length=lay.user_bytes, slot=3, tag=1)
        assert cpl.result == NandResult.OK and cpl.crc == zlib.crc32(user[:lay.user_bytes])


@cocotb.test()
async def log_of_writes_and_a_group(dut):
    # requests and free blocks with idle gaps, completions taken late: nothing may be lost, reordered or
    # stamped twice
    tb = await LogWriterTB.create(dut, "lw", idle=0.4, free_idle=0.4, backpressure=0.5, seed=1)
    await tb.boot()
    # ten plain writes, an atomic group overwriting two of them, one more overwrite
    writes = [dict(lba=lba, group_len=1, flags=COMMIT) for lba in range(10)]
    group = [30, 5, 31, 2]
    writes += [dict(lba=lba, group_len=len(group), group_idx=i, flags=COMMIT if i == len(group) - 1 else 0)
               for i, lba in enumerate(group)]
    writes.append(dict(lba=0, group_len=1, flags=COMMIT))
    # and a TRIM record page of 3 entries (their bytes come from memory; the header is the log writer's)
    writes.append(dict(kind=Kind.TRIM, lba=0, group_len=1, flags=COMMIT, record=(3, 3)))
    for tag, w in enumerate(writes):
        await tb.write(tag, 0x10000 * (tag + 1), **w)
    results = await tb.completions()
    assert tb.req.gaps and tb.free.gaps and tb.done.stalls, "the stalls did not happen"
    ppas = tb.check_log(results)
    # lba 0's first version (overwritten since, still on flash) read back through the ECC path
    tag, fields, addr = tb.writes[0]
    await tb.check_read(results[0], ppas[0], fields, addr)
    await tb.nand.expect_clean()


@cocotb.test()
async def no_page_when_no_block_will_come(dut):
    """Starved, a request waits for a page; with ``no_blocks`` it completes at once with ``no_page``,
    programs nothing and takes no seq; a block handed over ends the give-up (the allocator is no
    longer starved), and the next request gets the first seq."""
    tb = await LogWriterTB.create(dut, "lw_nopage", idle=0.5, backpressure=0.5, seed=4)
    await tb.seq_load.send(SEQ0)
    programs = await tb.programs()

    sending = cocotb.start_soon(tb.write(1, 0x10000, lba=7, flags=COMMIT))   # not taken: no page
    await ClockCycles(tb.clk, 2000)
    assert int(dut.starved.value) == 1 and not tb.done.items, "a request completed without a page"
    dut.no_blocks.value = 1
    await sending
    first = await tb.completion(1)
    assert (first["tag"], first["result"], first["no_page"]) == (1, NandResult.FAIL, 1), first
    await tb.write(2, 0x20000, lba=8, flags=COMMIT)
    second = await tb.completion(2)
    assert (second["tag"], second["no_page"]) == (2, 1), second

    # an erased block: no longer starved from the cycle it is offered, so no_blocks (still set) gives
    # nothing up
    assert (await tb.nand.do(opcode=NandOp.ERASE, channel=0, target=0, block=1, tag=0)).result == NandResult.OK
    block = pack(FREE, die=0, block=1)
    dut.free__payload.value = block
    dut.free__valid.value = 1
    await ReadOnly()
    assert int(dut.starved.value) == 0, "a block offered: not starved"
    await FallingEdge(tb.clk)
    await tb.free.send(block)
    await tb.write(3, 0x30000, lba=9, flags=COMMIT)
    third = await tb.completion(3)
    assert (third["tag"], third["result"], third["no_page"], third["seq"]) == (3, NandResult.OK, 0, SEQ0), third
    assert ppa_fields(third["ppa"])["block"] == 1 and die_of(third["ppa"]) == 0
    assert await tb.programs() == [programs[0] + 1] + programs[1:], "a no_page request was programmed"
    assert tb.req.gaps and tb.done.stalls, "the stalls did not happen"
    await tb.nand.expect_clean()
