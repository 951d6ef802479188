"""cocotb: the FTL core's verbs, one at a time: each command and each status the core decides
(``every_verb``), that a rejected command changes nothing, the activity counters, and what
``no_space`` refuses and what it lets through."""

import functools

import cocotb

from atomflash import spec
from atomflash.model import Limits, Model, recover
from atomflash.spec import Hint, Opcode, Status
from sim.harness.ftl_tb import IDENTIFY
from ftl_core_tb import CAPACITY, MEM_END, Host, block, expect, make_tb, read_and_compare


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

    read_check = functools.partial(read_and_compare, tb, host, model)

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
