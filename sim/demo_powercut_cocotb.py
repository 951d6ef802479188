"""cocotb side of `make demo`: a commit-flag log on simulated flash, a power
cut in the middle of an atomic group, a power cycle, and recovery.

Hardware in the loop: the Amaranth NAND controller (2 channels x 2 ways, BCH
ECC, CRC) drives four NAND models (small profile) in Verilator.  Python plays
the FTL that does not exist yet in gateware: it lays out the log exactly as
docs/model.md specifies (OOB records with commit flags, tags, a COMMIT record
page), writes the page images into the controller's page buffers and issues
PROGRAM descriptors.  Then it reads every page back through the controller
(ECC-corrected, torn pages flagged uncorrectable) and hands them to
``atomflash.model.recover``; the semantic model's oracle judges the result.

Results go to $DEMO_OUT as JSON for sim/demo.py to print.
"""

import json
import os
from pathlib import Path

import cocotb
from cocotb.triggers import RisingEdge, Timer

from atomflash import spec
from atomflash.model import Limits, Model, Page, check_after_cut, recover
from atomflash.nandsim import NandConfig, NandCtl
from atomflash.spec import Kind, NandOp, NandResult
from sim.harness.channel_tb import ChannelTB

CHANNELS, WAYS = 2, 2
DIES = CHANNELS * WAYS
BLOCK = 1
MODE = 0
CUT_DIE = 3          # the die whose program is cut ...
CUT_PROGRAM = 3      # ... during its 3rd program since power-on


def die_address(die):
    return die // WAYS, die % WAYS  # channel, target (tb.index = channel * WAYS + target)


class DemoLog:
    """Lays out pages the way the FTL will: round-robin over dies, seq per page."""

    def __init__(self, tb, profile):
        self.tb = tb
        self.layout = spec.nand_page_layout(profile)
        self.page_data = profile.page_data
        self.next_page = [0] * DIES
        self.seq = 1
        self.programs = []   # (die, page, oob dict, description)

    def block_of(self, lba, version):
        """Recognisable page data: which LBA, which version."""
        text = f"LBA {lba} version {version} ".encode()
        return (text * (self.page_data // len(text) + 1))[:self.page_data]

    def user_bytes(self, data, oob_fields):
        lay = self.layout
        user = bytearray(b"\xff" * lay.user_bytes)
        user[:self.page_data] = data
        user[lay.oob_record_col:lay.oob_record_col + spec.OOB.size] = spec.pack_oob(**oob_fields)
        return bytes(user)

    async def program(self, die, data, oob_fields, what, wait=True):
        page = self.next_page[die]
        self.next_page[die] += 1
        c, t = die_address(die)
        slot = die % 4
        await self.tb.write_slot(c, slot, 0, self.user_bytes(data, oob_fields))
        self.programs.append(dict(die=die, page=page, kind=Kind(oob_fields["kind"]).name,
                                  lba=oob_fields.get("lba", 0), seq=oob_fields["seq"], what=what))
        fields = dict(opcode=NandOp.PROGRAM, channel=c, target=t, block=BLOCK, page=page, column=0,
                      length=self.layout.user_bytes, slot=slot, tag=len(self.programs))
        if not wait:
            await self.tb.submit(**fields)
            return None
        cpl = await self.tb.do(**fields)
        assert cpl.result == NandResult.OK, f"program of {what} failed: {NandResult(cpl.result).name}"
        return cpl

    def take_seq(self):
        self.seq += 1
        return self.seq - 1


async def wait_for_cut(tb, index, limit_ns=50_000_000):
    for _ in range(limit_ns // 10_000):
        await Timer(10_000, "ns")
        if await tb.ctl(index, NandCtl.STAT, 0x0B):  # NandStat.POWER_CUTS
            return
    raise AssertionError("the scheduled power cut never happened")


async def model_stats(tb):
    names = ("PROGRAMS", "READS", "ERASES", "TIMING_VIOLATIONS", "PROTOCOL_ERRORS", "POWER_CUTS")
    return [{n: await tb.stat(i, n) for n in names} for i in range(DIES)]


@cocotb.test()
async def demo(dut):
    out = {"session1": [], "session2": []}
    slot_words = int(os.environ["NANDTB_SLOT_WORDS"])
    tb = await ChannelTB.create(dut, channels=CHANNELS, ways=WAYS, profile="small", slot_words=slot_words,
                                name="demo", mode=MODE)
    profile = tb.profile
    # The die that will lose power mid-program is told so now (its k-th program).
    await tb.configure(CUT_DIE, timing_mode=MODE, power_cut_program=CUT_PROGRAM, power_cut_progress=0.5)
    log = DemoLog(tb, profile)
    model = Model(Limits(capacity=64, lba_size=profile.page_data), auto_complete=False)
    commit = spec.OOB.compose("flags", commit=1)

    for die in range(DIES):
        c, t = die_address(die)
        assert (await tb.do(opcode=NandOp.RESET, channel=c, target=t, tag=98)).result == NandResult.OK
        assert (await tb.do(opcode=NandOp.ERASE, channel=c, target=t, block=BLOCK, tag=99)).result == NandResult.OK

    # 1. Six plain writes: each page is its own commit point.
    for lba in range(6):
        data = log.block_of(lba, 1)
        seq = log.take_seq()
        await log.program(lba % DIES, data, dict(kind=Kind.DATA, lba=lba, seq=seq, vseq=seq, group_len=1,
                                                 flags=commit), f"write LBA {lba}")
        for op in model.write(lba, data).ops:
            model.complete(op)

    # 2. Transaction 9 writes LBAs 10 and 11, then commits with a COMMIT record page.
    first = log.seq
    tag = spec.tag_of(first)
    txflag = spec.OOB.compose("flags", tx=1)
    tx_ops = []
    for i, lba in enumerate((10, 11)):
        data = log.block_of(lba, 1)
        seq = log.take_seq()
        await log.program(2 + i, data, dict(kind=Kind.DATA, lba=lba, seq=seq, vseq=seq, group_len=1, tid=tag,
                                            flags=txflag), f"tx 9 writes LBA {lba}")
        tx_ops += model.tx_write(9, lba, data).ops
    seq = log.take_seq()
    record = spec.pack_record_page(Kind.COMMIT, seq, [dict(first_vseq=first, npages=2, tid=9)], 1, profile.page_data)
    await log.program(0, record, dict(kind=Kind.COMMIT, seq=seq, vseq=seq, group_len=1, tid=tag, flags=commit),
                      "tx 9 COMMIT record")
    for op in tx_ops + list(model.tx_commit(9).ops):
        model.complete(op)

    # 3. An atomic group of four LBAs, one member per die.  The member carrying the
    #    commit bit is programmed first (trap 1: it lands before the others), and
    #    power fails while the third member is being programmed.
    group_lbas = [20, 21, 22, 23]
    first = log.seq
    seqs = {i: log.take_seq() for i in range(4)}
    group = model.atomic_write([(lba, log.block_of(lba, 1)) for lba in group_lbas])  # in flight, never acknowledged
    assert group.ok
    member_die = {0: 1, 1: 2, 2: CUT_DIE, 3: 0}
    for idx in (3, 0, 1, 2):
        lba = group_lbas[idx]
        fields = dict(kind=Kind.DATA, lba=lba, seq=seqs[idx], vseq=first + idx, group_len=4, group_idx=idx,
                      flags=commit if idx == 3 else 0)
        await log.program(member_die[idx], log.block_of(lba, 1), fields,
                          f"atomic group member {idx}/4 LBA {lba}" + (" (commit bit)" if idx == 3 else ""),
                          wait=idx != 2)
    await wait_for_cut(tb, tb.index(*die_address(CUT_DIE)))
    for i in range(DIES):  # the cut hits every die at once
        await tb.ctl(i, NandCtl.POWER_CUT)
    out["stats1"] = await model_stats(tb)
    out["session1"] = log.programs
    out["cut"] = dict(die=CUT_DIE, program=CUT_PROGRAM, what=log.programs[-1]["what"])

    # -- power cycle: controller reset, every NAND model reopens its image ---------
    dut.rst.value = 1
    for i in range(DIES):
        cfg = NandConfig(profile.name, image=tb.cfg[i]["image"], timing_mode=MODE,
                         clk_period_ps=tb.period_ps, seed=200 + i)
        cfg.write(Path(cocotb.plusargs[f"nand{i}_config"]))
        tb.cfg[i] = cfg
        assert await tb.ctl(i, NandCtl.RELOAD) == 0
    for _ in range(8):
        await RisingEdge(dut.clk)
    dut.rst.value = 0
    tb.cpls.clear()

    # 4. Recovery's input: every page of the block on every die, read through the
    #    controller with ECC.  A torn page reads uncorrectable: absent, never data.
    lay = log.layout
    pages = []
    for die in range(DIES):
        c, t = die_address(die)
        assert (await tb.do(opcode=NandOp.RESET, channel=c, target=t, tag=1)).result == NandResult.OK
        for page in range(profile.pages_per_block):
            cpl = await tb.do(opcode=NandOp.READ, channel=c, target=t, block=BLOCK, page=page, column=0,
                              length=lay.user_bytes, slot=0, tag=page)
            result = NandResult(cpl.result)
            entry = dict(die=die, page=page, result=result.name, corrected=cpl.ecc_corrected)
            if result == NandResult.ERASED:
                break
            user = await tb.read_slot(c, 0, 0, lay.user_bytes)
            oob = user[lay.oob_record_col:lay.oob_record_col + spec.OOB.size]
            if result != NandResult.OK:
                oob = b"\0" * spec.OOB.size  # uncorrectable: not trusted
            rec = spec.unpack_oob(oob)
            entry.update(kind=Kind(rec.kind).name if rec else "-", lba=rec.lba if rec else None,
                         seq=rec.seq if rec else None)
            out["session2"].append(entry)
            pages.append(Page(addr=spec.pack_ppa(c, t, 0, BLOCK, page), oob=oob, data=user[:profile.page_data]))

    recovered = recover(pages)
    contents = recovered.contents()
    violations = check_after_cut(model.history, contents, lba_size=profile.page_data)
    out["recovered"] = {str(lba): contents[lba][:24].decode(errors="replace").strip() for lba in sorted(contents)}
    out["rejected"] = recovered.rejected
    out["torn"] = recovered.torn
    out["next_seq"] = recovered.next_seq
    out["violations"] = [str(v) for v in violations]
    out["stats2"] = await model_stats(tb)
    out["cycles"] = int(dut.cycle.value)
    with open(os.environ["DEMO_OUT"], "w") as f:
        json.dump(out, f, indent=1, default=str)
    assert not violations, violations
