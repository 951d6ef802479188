"""cocotb: MLC paired pages on the FTL core (``mlc_paired_pages``): the same writes and the same
cut with pairing off (an acknowledged write is lost) and on (nothing acknowledged is lost)."""

import cocotb

from atomflash.model import Limits, Model, check_after_cut, recover
from atomflash.nandsim import Image, NandCtl, NandCutWhen
from atomflash.spec import Opcode, Status
from sim.harness.ftl_core import MAX_OPEN_TX, MAX_PENDING
from ftl_core_tb import CAPACITY, Blocks, Host, make_tb


@cocotb.test()
async def mlc_paired_pages(dut):
    """MLC paired pages (DESIGN.md trap 4, rtl/ftl/pairing.py): the same queue-depth-1 writes to
    distinct LBAs and the same cut -- in die 0's 7th program, an upper page whose lower page
    holds a write -- twice.  With ``mlc`` off the cut destroys a write acknowledged long before
    (so the check below can fail); with it on, nothing acknowledged is lost: a lone write lands on
    a pre-padded upper page, and a lower page the cut damages holds a PAD or a write whose
    completion still waited for its word line."""
    lost, damaged = {}, {}
    for mlc in (0, 1):
        tb = await make_tb(dut, name=f"mlc{mlc}", mlc_paired=1)
        dut.mlc.value = mlc
        host, page = Host(tb), tb.page
        model = Model(Limits(capacity=CAPACITY, lba_size=page, max_open_tx=MAX_OPEN_TX, max_pending=MAX_PENDING),
                      auto_complete=False)
        await tb.chan.ctl(0, NandCtl.SCHEDULE_CUT, int(NandCutWhen.PROGRAM), 7, 500)
        blocks = Blocks(page, 300_000 + 1000 * mlc)
        acked = 0
        for lba in range(64):
            data = blocks(1)
            buf = host.buffer()
            tb.write_bytes(buf, data)
            c = model.write(lba, data)
            cid = await tb.submit(opcode=Opcode.WRITE, lba=lba, nlb=1, buf=buf)
            cut = False
            while cid not in tb.done and not cut:
                await tb.cycles(500)
                cut = bool(await tb.chan.stat(0, "POWER_CUTS"))
            if cid not in tb.done:
                break
            assert Status(tb.done.pop(cid)["status"]) == Status.SUCCESS
            for op in c.ops:
                model.complete(op)
            acked += 1
        else:
            raise AssertionError("the scheduled cut never came")
        pads, programs = int(dut.pad_pages.value), int(dut.nand_programs.value)
        host_pages = int(dut.host_write_pages.value)
        for i in range(tb.dies):
            await tb.chan.ctl(i, NandCtl.POWER_CUT)
        with Image(tb.chan.cfg[tb.chan.index(0, 0)]["image"]) as img:
            damaged[mlc] = [p for b in tb.blocks_used[0] for p in range(tb.profile.pages_per_block)
                            if img.page_state(0, b, p).paired_damage]
        contents = recover(tb.flash_pages(trust_torn=False)).contents()
        lost[mlc] = check_after_cut(model.history, contents, lba_size=page)
        assert acked >= 4, f"mlc {mlc}: only {acked} writes acknowledged before the cut"
        if mlc:
            assert pads > 0 and programs == host_pages + pads, (pads, programs, host_pages)
        else:
            assert pads == 0
    assert damaged[0] and damaged[1], f"the cut must damage a lower page both times: {damaged}"
    assert lost[0], "without pairing the cut must lose an acknowledged write (else this test proves nothing)"
    assert not lost[1], lost[1][:5]
