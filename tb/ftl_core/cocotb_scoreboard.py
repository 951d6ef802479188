"""cocotb: the FTL core under a random workload (``random_scoreboard``): batches of plain writes,
atomic groups, trims, transactions (writes, final writes, commits, aborts, refusals) and appends
with remaps and releases at queue depth > 1, then reads and TX_READs checked against
``atomflash.model``; finally the flash itself recovers (``atomflash.model.recover``) to exactly the
model's contents and the block table counts exactly the bound pages.

``FTL_SEED``, ``FTL_BATCHES`` and ``FTL_BLOCKS`` size it (``test_ftl_core_long``)."""

import os
import random

import cocotb

from atomflash import spec
from atomflash.model import Limits, Model, recover
from atomflash.spec import Opcode, Status
from sim.harness.ftl_core import MAX_APPENDS, MAX_OPEN_TX, MAX_PENDING
from ftl_core_tb import CACHE_PAGES, CAPACITY, Blocks, Host, check_valid_counts, expect, make_tb


@cocotb.test()
async def random_scoreboard(dut):
    tb = await make_tb(dut, name="random", blocks_per_die=int(os.environ.get("FTL_BLOCKS", "24")), stalls=0.3)
    rng = random.Random(int(os.environ.get("FTL_SEED", "1")))
    host = Host(tb)
    page = tb.page
    # on the write-cache build: plain writes are buffered (Model(cache=True)), overwrites coalesce
    model = Model(Limits(capacity=CAPACITY, lba_size=page, max_open_tx=MAX_OPEN_TX, max_pending=MAX_PENDING,
                         max_appends=MAX_APPENDS),
                  cache=bool(CACHE_PAGES))
    lbas = range(48)                # overlapping on purpose
    blocks = Blocks(page, 1000)
    programs = 0
    tids = range(1, 7)              # more than MAX_OPEN_TX, so some first writes are refused
    tokens = {}                     # live appends: model token -> device token
    appended = []                   # (cid, model token) of this batch's appends

    for batch in range(int(os.environ.get("FTL_BATCHES", "8"))):
        # up to 8 commands in flight; completion order = command order for the ones that change the map
        cmds = []                   # (cid, the model's status)
        kind_of = {}                # cid -> the command's kind, for the report
        for _ in range(rng.randrange(1, 9)):
            issued = len(cmds)
            kind = rng.choices(["write", "atomic", "trim", "flush", "tx_write", "tx_commit", "tx_abort",
                                "append", "remap", "release"], [5, 3, 1, 1, 4, 1, 1, 2, 2, 1])[0]
            if kind == "write":
                nlb = rng.randrange(1, 4)
                lba = rng.randrange(0, len(lbas) - nlb)
                data = blocks(nlb)
                buf = host.buffer(nlb)
                tb.write_bytes(buf, data)
                c = model.write(lba, data)
                programs += nlb
                cmds.append((await tb.submit(opcode=Opcode.WRITE, lba=lba, nlb=nlb, buf=buf), c.status))
            elif kind == "atomic":
                pairs = [(lba, blocks(1)) for lba in rng.sample(lbas, rng.randrange(1, 9))]
                lst = host.atomic_list(pairs)
                c = model.atomic_write(pairs)
                programs += len(pairs)
                cmds.append((await tb.submit(opcode=Opcode.ATOMIC_WRITE, list=lst, nlist=len(pairs)), c.status))
            elif kind == "trim":
                nlb = rng.randrange(1, 6)
                lba = rng.randrange(0, len(lbas) - nlb)
                c = model.trim(lba, nlb)
                programs += 1
                cmds.append((await tb.submit(opcode=Opcode.DEALLOCATE, lba=lba, nlb=nlb), c.status))
            elif kind == "flush":
                cmds.append((await tb.submit(opcode=Opcode.FLUSH), model.flush().status))
            elif kind == "tx_write":
                tid, nlb = rng.choice(tids), rng.randrange(1, 5)
                lba = rng.randrange(0, len(lbas) - nlb)
                final = rng.random() < 0.2
                data = blocks(nlb)
                buf = host.buffer(nlb)
                tb.write_bytes(buf, data)
                c = model.tx_write(tid, lba, data, final=final)
                programs += nlb if c.ok else 0
                cmds.append((await tb.submit(opcode=Opcode.TX_WRITE, tid=tid, lba=lba, nlb=nlb, buf=buf,
                                             flags=spec.CMD.compose("flags", tx_final=int(final))), c.status))
            elif kind == "append":
                nlb = rng.randrange(1, 4)
                data = blocks(nlb)
                buf = host.buffer(nlb)
                tb.write_bytes(buf, data)
                c = model.append(data)
                programs += nlb if c.ok else 0
                cid = await tb.submit(opcode=Opcode.APPEND, nlb=nlb, buf=buf)
                cmds.append((cid, c.status))
                if c.ok:
                    appended.append((cid, c.result))
            elif kind in ("remap", "release") and tokens:
                picks = rng.sample(sorted(tokens), min(len(tokens), rng.randrange(1, 4)))
                if kind == "release":
                    c = model.release(picks[0])
                    cmds.append((await tb.submit(opcode=Opcode.RELEASE, token=tokens[picks[0]]), c.status))
                else:
                    at = rng.sample(range(0, len(lbas) - 3, 3), len(picks))
                    triples = [(lba, tok, len(model.appends[spec.split_token(tok).handle].blocks))
                               for lba, tok in zip(at, picks)]
                    c = model.remap(triples)
                    programs += int(c.ok)       # the REMAP record
                    lst = host.buffer()
                    tb.write_bytes(lst, b"".join(spec.REMAP_ENTRY.pack(lba=lba, token=tokens[tok], nlb=nlb)
                                                 for lba, tok, nlb in triples))
                    cmds.append((await tb.submit(opcode=Opcode.REMAP, list=lst, nlist=len(triples)), c.status))
                # a RELEASE frees its one token, a REMAP all it names
                for tok in (picks[:1] if kind == "release" else picks) if c.ok else ():
                    del tokens[tok]
            elif kind in ("remap", "release"):
                continue
            else:
                tid = rng.choice(tids)
                commit = kind == "tx_commit"
                c = model.tx_commit(tid) if commit else model.tx_abort(tid)
                programs += int(commit and c.ok)        # the COMMIT record
                cmds.append((await tb.submit(opcode=Opcode.TX_COMMIT if commit else Opcode.TX_ABORT, tid=tid),
                             c.status))
            if len(cmds) > issued:
                kind_of[cmds[-1][0]] = kind
        done = [await tb.wait(cid) for cid, _ in cmds]
        wrong = [(cid, kind_of[cid], want, Status(d["status"]), d["cycle"]) for (cid, want), d in zip(cmds, done)
                 if Status(d["status"]) != want]
        assert not wrong, (f"batch {batch}: {len(wrong)} of {len(cmds)} differ (cid, kind, model, drive, cycle): "
                           f"{wrong[:12]}; the batch: {[kind_of[cid] for cid, _ in cmds]}")
        by_cid = {cid: d for (cid, _), d in zip(cmds, done)}
        for cid, mtok in appended:
            tokens[mtok] = by_cid[cid]["result"]          # the device's token for the model's
        appended.clear()
        # publication follows command order, so completions do too (refusals complete at once; with the
        # write cache, so do buffered writes)
        cycles = [d["cycle"] for d in done if Status(d["status"]) == Status.SUCCESS]
        assert CACHE_PAGES or cycles == sorted(cycles)
        # reads of every LBA, committed and as one open transaction sees them, several in flight
        reads = []
        open_tids = sorted(t for _, t in model.tx)       # (queue, tid) keys: the TB's one queue pair
        for tid in [None] + rng.sample(open_tids, min(1, len(open_tids))):
            for lba in range(0, len(lbas), 4):
                buf = host.buffer(4)
                if tid is None:
                    cid = await tb.submit(opcode=Opcode.READ, lba=lba, nlb=4, buf=buf)
                else:
                    cid = await tb.submit(opcode=Opcode.TX_READ, tid=tid, lba=lba, nlb=4, buf=buf)
                reads.append((tid, lba, buf, cid))
        for tid, lba, buf, cid in reads:
            expect(await tb.wait(cid), Status.SUCCESS)
            want = (model.read(lba, 4) if tid is None else model.tx_read(tid, lba, 4)).data
            got = tb.read_bytes(buf, 4 * page)
            for i in range(4):
                assert got[i * page:(i + 1) * page] == want[i * page:(i + 1) * page], \
                    f"batch {batch} lba {lba + i} tid {tid}"
    # close what is open: commit half, abort the rest; release the appends left
    for mtok, dtok in tokens.items():
        expect(await tb.do(opcode=Opcode.RELEASE, token=dtok), model.release(mtok).status)
    # every live append was tracked, so none is left holding staged pages the block table counts
    assert not model.appends, f"appends the test lost track of: {sorted(model.appends)}"
    for tid in sorted(t for _, t in model.tx):
        commit = tid % 2 == 0
        c = model.tx_commit(tid) if commit else model.tx_abort(tid)
        programs += int(commit)
        expect(await tb.do(opcode=Opcode.TX_COMMIT if commit else Opcode.TX_ABORT, tid=tid), c.status)
    if CACHE_PAGES:     # drain: then every page written is on flash except the coalesced ones
        expect(await tb.do(opcode=Opcode.FLUSH), Status.SUCCESS)
        assert int(dut.cache_dirty.value) == 0 and int(dut.cache_coalesced.value) > 0
        programs -= int(dut.cache_coalesced.value)
    pages = tb.flash_pages()
    assert len(pages) == programs, (len(pages), programs)   # no extra flash program for atomicity
    recovered = recover(pages)
    assert recovered.contents() == model.contents()
    # the block table (valid pages per block, in SoC memory) counts exactly the pages the map binds
    await check_valid_counts(tb, model)
    hits, misses = int(dut.map_hits.value), int(dut.map_misses.value)
    assert hits > 0 and misses > 0
    await tb.chan.expect_clean()
