"""cocotb: power cuts on the FTL core (``power_cut_0`` .. ``power_cut_2``, three seeds of one
workload): a random mix of commands in flight, power fails on one die mid-program and then on
every die, and what the flash recovers to is checked by ``atomflash.model.check_after_cut``."""

import os
import random

import cocotb

from atomflash import spec
from atomflash.model import Limits, Model, check_after_cut, recover
from atomflash.nandsim import NandCtl, NandCutWhen
from atomflash.spec import Opcode, Status
from sim.harness.ftl_core import MAX_OPEN_TX, MAX_PENDING
from ftl_core_tb import CACHE_PAGES, CAPACITY, Blocks, Host, make_tb


async def power_cut(dut, round_):
    """Random writes, atomic groups, trims, transactions (writes, final
    writes, commits, aborts) and appends with remaps in flight; power fails on
    one die during its k-th program and then on every die; the images recover
    to a state the oracle accepts: every acknowledged write, commit and remap,
    every group, transaction and remap whole, nothing of an open or aborted
    transaction or of an append not remapped."""
    rng = random.Random(int(os.environ.get("FTL_SEED", "1")) * 1000 + round_)
    tb = await make_tb(dut, name=f"cut{round_}")
    host = Host(tb)
    page = tb.page
    model = Model(Limits(capacity=CAPACITY, lba_size=page, max_open_tx=MAX_OPEN_TX, max_pending=MAX_PENDING),
                  auto_complete=False, cache=bool(CACHE_PAGES))
    cut_die = rng.randrange(tb.dies)
    await tb.chan.ctl(cut_die, NandCtl.SCHEDULE_CUT, int(NandCutWhen.PROGRAM), rng.randrange(4, 30),
                      rng.randrange(50, 950))
    pending = {}            # cid -> model ops
    tokens, appending = {}, {}      # completed appends: model token -> device token; cid -> model token
    blocks = Blocks(page, 100_000 * (round_ + 1))
    cut = False
    # a transaction written and committed first: the cut may come at the die's 4th program, and a
    # round whose draws left it without a commit would not test the commit's recovery
    opening = [("tx", 1), ("tx_end", 1)]
    while not cut:
        kind = rng.choice(["write", "atomic", "atomic", "trim", "tx", "tx", "tx_end", "append", "remap"])
        tid = rng.randrange(1, MAX_OPEN_TX + 1)
        scripted = bool(opening)
        if scripted:
            kind, tid = opening.pop(0)
        if kind == "tx_end" and (0, tid) not in model.tx:     # the TB's one queue pair
            kind = "tx"
        if kind == "remap" and not tokens:
            kind = "append"
        if kind == "append":
            nlb = rng.randrange(1, 4)
            data = blocks(nlb)
            buf = host.buffer(nlb)
            tb.write_bytes(buf, data)
            c = model.append(data)
            cid = await tb.submit(opcode=Opcode.APPEND, nlb=nlb, buf=buf)
            if c.ok:
                appending[cid] = c.result
        elif kind == "remap":
            picks = rng.sample(sorted(tokens), min(len(tokens), rng.randrange(1, 3)))
            triples = [(lba, tok, len(model.appends[spec.split_token(tok).handle].blocks))
                       for lba, tok in zip(rng.sample(range(0, 36, 4), len(picks)), picks)]
            c = model.remap(triples)
            lst = host.buffer()
            tb.write_bytes(lst, b"".join(spec.REMAP_ENTRY.pack(lba=lba, token=tokens[tok], nlb=nlb)
                                         for lba, tok, nlb in triples))
            cid = await tb.submit(opcode=Opcode.REMAP, list=lst, nlist=len(triples))
            for tok in picks:
                del tokens[tok]
        elif kind == "tx":
            nlb = rng.randrange(1, 4)
            lba = rng.randrange(40 - nlb)
            data = blocks(nlb)
            buf = host.buffer(nlb)
            tb.write_bytes(buf, data)
            final = rng.random() < 0.25 and not scripted
            c = model.tx_write(tid, lba, data, final=final)
            cid = await tb.submit(opcode=Opcode.TX_WRITE, tid=tid, lba=lba, nlb=nlb, buf=buf,
                                  flags=spec.CMD.compose("flags", tx_final=int(final)))
        elif kind == "tx_end":
            commit = rng.random() < 0.7 or scripted
            c = model.tx_commit(tid) if commit else model.tx_abort(tid)
            cid = await tb.submit(opcode=Opcode.TX_COMMIT if commit else Opcode.TX_ABORT, tid=tid)
        elif kind == "write":
            lba = rng.randrange(40)
            data = blocks(1)
            buf = host.buffer()
            tb.write_bytes(buf, data)
            c = model.write(lba, data)
            cid = await tb.submit(opcode=Opcode.WRITE, lba=lba, nlb=1, buf=buf)
        elif kind == "atomic":
            pairs = []
            for lba in rng.sample(range(40), rng.randrange(2, 9)):
                pairs.append((lba, blocks(1)))
            lst = host.atomic_list(pairs)
            c = model.atomic_write(pairs)
            cid = await tb.submit(opcode=Opcode.ATOMIC_WRITE, list=lst, nlist=len(pairs))
        else:
            lba, nlb = rng.randrange(36), rng.randrange(1, 5)
            c = model.trim(lba, nlb)
            cid = await tb.submit(opcode=Opcode.DEALLOCATE, lba=lba, nlb=nlb)
        pending[cid] = (c.status, c.ops)
        # acknowledge what completed; stop at the cut
        while len(pending) >= 6 or (pending and rng.random() < 0.3):
            await tb.cycles(500)
            for done_cid in [k for k in pending if k in tb.done]:
                status, ops = pending.pop(done_cid)
                cpl = tb.done.pop(done_cid)
                assert Status(cpl["status"]) == status
                if done_cid in appending:
                    tokens[appending.pop(done_cid)] = cpl["result"]
                for op in ops:
                    model.complete(op)
            if await tb.chan.stat(cut_die, "POWER_CUTS"):
                cut = True
                break
        if not cut and await tb.chan.stat(cut_die, "POWER_CUTS"):
            cut = True
    for i in range(tb.dies):
        await tb.chan.ctl(i, NandCtl.POWER_CUT)
    # acknowledged = completed before the cut was seen; the rest stays in flight
    acked = [op for op in model.history if op.completed is not None]
    assert acked, "the cut came before any command was acknowledged: nothing was tested"
    assert any(op.verb == "commit" for op in model.history), "no transaction committed before the cut"
    contents = recover(tb.flash_pages(trust_torn=False)).contents()
    violations = check_after_cut(model.history, contents, lba_size=page)
    assert not violations, violations[:5]


@cocotb.test()
async def power_cut_0(dut):
    await power_cut(dut, 0)


@cocotb.test()
async def power_cut_1(dut):
    await power_cut(dut, 1)


@cocotb.test()
async def power_cut_2(dut):
    await power_cut(dut, 2)
