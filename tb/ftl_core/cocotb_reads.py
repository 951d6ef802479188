"""cocotb: reads in flight (``reads_in_flight``): a batch of READs submitted at once overlaps on the
dies and channels, returns every page's data, zeros for an unmapped LBA, and completes in the order
it was submitted (the firmware's read fence before an erase relies on that order)."""

import cocotb

from atomflash.spec import Opcode, Status
from ftl_core_tb import Blocks, Host, expect, make_tb


@cocotb.test()
async def reads_in_flight(dut):
    """16 single-page READs, a 6-page READ and a READ of an unmapped LBA, submitted together: each
    returns its data, they complete in submission order, and the batch of single pages takes less than
    half the time of as many reads one after another (one read at a time it would take all of it)."""
    tb = await make_tb(dut, name="reads")
    host = Host(tb)
    page = tb.page
    blocks = Blocks(page, 9000)
    data = blocks(16)
    buf = host.buffer(16)
    tb.write_bytes(buf, data)
    expect(await tb.do(opcode=Opcode.WRITE, lba=0, nlb=16, buf=buf), Status.SUCCESS)
    want = {lba: data[lba * page:(lba + 1) * page] for lba in range(16)}

    # one read alone, for the time of a read's whole path
    tb.poll_cycles = 4
    b = host.buffer()
    start = int(dut.cycle.value)
    expect(await tb.do(opcode=Opcode.READ, lba=3, nlb=1, buf=b), Status.SUCCESS)
    alone = int(dut.cycle.value) - start
    assert tb.read_bytes(b, page) == want[3]

    order = [5, 12, 0, 9, 14, 2, 7, 11, 1, 15, 4, 8, 13, 6, 10, 3]
    bufs = [host.buffer() for _ in order]
    for b in bufs:
        tb.write_bytes(b, b"\xa5" * page)
    reads0 = int(dut.nand_reads.value)
    start = int(dut.cycle.value)
    cids = [await tb.submit(opcode=Opcode.READ, lba=lba, nlb=1, buf=b) for lba, b in zip(order, bufs)]
    for cid in cids:
        while cid not in tb.done:
            await tb.cycles(tb.poll_cycles)
    batch = int(dut.cycle.value) - start
    assert list(tb.done) == cids, f"completions out of submission order: {list(tb.done)} for {cids}"
    for cid in cids:
        expect(tb.done.pop(cid), Status.SUCCESS)
    for lba, b in zip(order, bufs):
        assert tb.read_bytes(b, page) == want[lba], f"lba {lba}"
    assert int(dut.nand_reads.value) - reads0 == len(order)
    assert batch < len(order) * alone / 2, f"{len(order)} reads in {batch} cycles, one alone in {alone}"
    dut._log.info(f"{len(order)} reads in {batch} cycles ({batch / len(order):.0f} a read), one alone {alone}")

    # a multi-page read, an unmapped LBA and single pages mixed, in flight together
    multi, unmapped, single = host.buffer(6), host.buffer(), host.buffer()
    tb.write_bytes(multi, b"\xa5" * 6 * page)
    tb.write_bytes(unmapped, b"\xa5" * page)
    cids = [await tb.submit(opcode=Opcode.READ, lba=8, nlb=6, buf=multi),
            await tb.submit(opcode=Opcode.READ, lba=200, nlb=1, buf=unmapped),
            await tb.submit(opcode=Opcode.READ, lba=1, nlb=1, buf=single)]
    for cid in cids:
        while cid not in tb.done:
            await tb.cycles(tb.poll_cycles)
    assert list(tb.done) == cids, f"completions out of submission order: {list(tb.done)} for {cids}"
    for cid in cids:
        expect(tb.done.pop(cid), Status.SUCCESS)
    assert tb.read_bytes(multi, 6 * page) == b"".join(want[lba] for lba in range(8, 14))
    assert tb.read_bytes(unmapped, page) == bytes(page)
    assert tb.read_bytes(single, page) == want[1]
