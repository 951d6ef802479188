"""Every command, on both profiles: ID, parameter page, status, read/program/erase, columns, copyback."""

import cocotb

from nand_tb import NandTB, pattern
from onfi_host import failed


@cocotb.test()
async def id_and_program_read(dut):
    tb = await NandTB.create(dut, "smoke")
    h = tb.host
    await h.reset()
    ident = await h.read_id(0x00, 5)
    dut._log.info("ID %s", ident.hex())
    onfi = await h.read_id(0x20, 4)
    assert onfi == b"ONFI", onfi
    data = pattern(16)
    st = await h.program(tb.row(1, 0), 0, data)
    assert not failed(st), hex(st)
    back = await h.read(tb.row(1, 0), 0, 16)
    assert back == data, (back.hex(), data.hex())
    await tb.expect_clean()
