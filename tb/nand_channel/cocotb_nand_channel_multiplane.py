"""cocotb tests: multi-plane READ, PROGRAM and ERASE descriptors on the NAND
controller top against the NAND model (two planes per LUN).

A multi-plane descriptor names ``block`` and works on ``block ^ 1`` too (the
other plane, same LUN and page); ``slot`` holds ``block``'s data, ``slot2``
the partner's.  Every test ends with zero model timing violations and zero
protocol errors, so no sequence broke an ONFI multi-plane rule.
"""

from __future__ import annotations

import os
import random
import zlib

import cocotb

from atomflash import spec
from atomflash.nandsim import NandCtl, read_stats
from atomflash.spec import NandOp, NandResult
from sim.harness.channel_tb import ChannelTB, random_bytes

CHANNELS = int(os.environ.get("NANDTB_CHANNELS", "2"))
WAYS = int(os.environ.get("NANDTB_WAYS", "2"))
PROFILE = os.environ.get("NANDTB_PROFILE", "small")
SLOT_WORDS = int(os.environ["NANDTB_SLOT_WORDS"])
SLOTS = 4
MP = 1 << spec.NandFlag.MULTI_PLANE
RAW = 1 << spec.NandFlag.RAW
FAIL = 1 << spec.OnfiStatus.FAIL
F_UNCORR, F_ERASED = 1, 2
F_UNCORR2, F_ERASED2 = 4, 8


async def make(dut, name, **kw):
    return await ChannelTB.create(dut, channels=CHANNELS, ways=WAYS, profile=PROFILE, slot_words=SLOT_WORDS,
                                  name=name, **kw)


def ok(cpl, what=""):
    assert cpl.result == NandResult.OK, (what, cpl)
    return cpl


async def learn(tb, c, t, length=256, slot=3):
    """READ PARAMETER PAGE: the channel learns the target's multi-plane claims from it."""
    ok(await tb.do(opcode=NandOp.READ_PARAM, channel=c, target=t, length=length, slot=slot, tag=0xF00 + t))


def user_page(rng, lay):
    data = bytearray(random_bytes(rng, lay.user_bytes))
    data[lay.oob_col:lay.oob_col + lay.bbm_bytes] = b"\xff" * lay.bbm_bytes
    return bytes(data)


def page_index(tb, lun, block, page):
    return (lun * tb.profile.blocks_per_lun + block) * tb.profile.pages_per_block + page


def diff(a, b):
    """Where two byte strings differ: (count, first offsets)."""
    d = [i for i in range(min(len(a), len(b))) if a[i] != b[i]]
    return len(d), d[:8], len(a), len(b)


async def mp_stats(tb):
    out = []
    for i in range(CHANNELS * WAYS):
        assert await tb.ctl(i, NandCtl.DUMP_STATS) == 0
        out.append(read_stats(tb.cfg[i].stats_path()))
    return out


@cocotb.test()
async def multiplane_refusals(dut):
    """Multi-plane descriptors a target cannot take complete at once with their error and send nothing:
    before the parameter page claimed multi-plane, on an operation without a multi-plane form, with a
    bad or (READ) shared second slot.  The plane pair itself cannot be wrong: it is block and block ^ 1."""
    tb = await make(dut, "mprefuse", mode=5)
    prof, lay = tb.profile, tb.layout
    n = CHANNELS * WAYS
    base = dict(channel=0, target=0, block=2, page=0, column=0, length=lay.user_bytes, slot=0, slot2=1)
    # nothing learnt yet: every target refuses
    cases = [(dict(base, opcode=NandOp.PROGRAM, flags=MP), NandResult.BAD_PLANE),
             (dict(base, opcode=NandOp.READ, flags=MP), NandResult.BAD_PLANE),
             (dict(base, opcode=NandOp.ERASE, flags=MP, target=1), NandResult.BAD_PLANE)]
    before = [await tb.stat(i, "COMMANDS") for i in range(n)]
    for i, (fields, _) in enumerate(cases):
        await tb.submit(tag=i, **fields)
    await tb.wait_cpls(len(cases))
    assert [(x.tag, x.result) for x in tb.cpls] == [(i, r) for i, (_, r) in enumerate(cases)]
    assert [await tb.stat(i, "COMMANDS") for i in range(n)] == before
    # half a parameter page (no CRC seen) teaches nothing; the whole first copy does, per target
    await learn(tb, 0, 0, length=128)
    cpl = await tb.do(opcode=NandOp.ERASE, flags=MP, channel=0, target=0, block=2, tag=50)
    assert cpl.result == NandResult.BAD_PLANE, cpl
    await learn(tb, 0, 0)
    ok(await tb.do(opcode=NandOp.ERASE, flags=MP, channel=0, target=0, block=2, tag=51))
    cpl = await tb.do(opcode=NandOp.ERASE, flags=MP, channel=0, target=1, block=2, tag=52)
    assert cpl.result == NandResult.BAD_PLANE, cpl
    # learnt: what is still refused
    bad = [
        (dict(base, opcode=NandOp.COPYBACK, flags=MP, dst_block=4), NandResult.BAD_PLANE),
        (dict(base, opcode=NandOp.READ_ID, flags=MP, length=4), NandResult.BAD_PLANE),
        (dict(base, opcode=NandOp.READ_STATUS, flags=MP), NandResult.BAD_PLANE),
        (dict(base, opcode=NandOp.READ, flags=MP, slot2=0), NandResult.BAD_SLOT),
        (dict(base, opcode=NandOp.READ, flags=MP, slot2=SLOTS), NandResult.BAD_SLOT),
        (dict(base, opcode=NandOp.PROGRAM, flags=MP, slot2=SLOTS), NandResult.BAD_SLOT),
        (dict(base, opcode=NandOp.PROGRAM, flags=MP, block=prof.blocks_per_lun), NandResult.BAD_BLOCK),
        (dict(base, opcode=NandOp.READ, flags=MP, page=prof.pages_per_block), NandResult.BAD_PAGE),
        (dict(base, opcode=NandOp.READ, flags=MP, column=100), NandResult.BAD_COLUMN),
        (dict(base, opcode=NandOp.PROGRAM, flags=MP | RAW, length=0), NandResult.BAD_LENGTH),
        (dict(base, opcode=NandOp.PROGRAM, flags=MP, target=1), NandResult.BAD_PLANE),
    ]
    n0 = len(tb.cpls)
    before = [await tb.stat(i, "COMMANDS") for i in range(n)]
    for i, (fields, _) in enumerate(bad):
        await tb.submit(tag=100 + i, **fields)
    await tb.wait_cpls(n0 + len(bad))
    assert [(x.tag, x.result) for x in tb.cpls[n0:]] == [(100 + i, r) for i, (_, r) in enumerate(bad)]
    assert [await tb.stat(i, "COMMANDS") for i in range(n)] == before
    # a program sharing one slot for both planes is legal: the same bytes on both pages
    data = user_page(random.Random(5), lay)
    await tb.write_slot(0, 0, 0, data)
    cpl = ok(await tb.do(**dict(base, opcode=NandOp.PROGRAM, flags=MP, slot2=0, tag=200)))
    assert cpl.crc == zlib.crc32(data + data)
    for b in (2, 3):
        ok(await tb.do(opcode=NandOp.READ, channel=0, target=0, block=b, page=0, column=0,
                       length=lay.user_bytes, slot=2, tag=201 + b))
        assert await tb.read_slot(0, 2, 0, lay.user_bytes) == data
    await tb.expect_clean()


@cocotb.test()
async def multiplane_random_against_reference(dut):
    """Rounds of random multi-plane erases, programs and reads (ECC and raw, whole pages and
    codeword ranges, OOB only) on every target at once, with single-plane reads in between,
    scoreboarded against a dict of page contents per plane; a round with raw bit errors corrects
    in both planes; the model counts every operation as one multi-plane array operation."""
    rng = random.Random(int(os.environ.get("NANDTB_SEED", "11")))
    tb = await make(dut, "mprand", mode=5)
    lay, prof = tb.layout, tb.profile
    cw = spec.ECC.codeword
    targets = [(c, t) for c in range(CHANNELS) for t in range(WAYS)]
    for c, t in targets:
        await learn(tb, c, t)
    pairs = (0, 2)
    pages: dict = {}                        # (c, t, block, page) -> user bytes (ECC) or raw page bytes
    next_page = {(c, t, b): None for c, t in targets for b in pairs}
    counts = dict(erase=0, program=0, read=0, sread=0, raw=0, corrected=0)
    mp_ops = 0
    tag = 0
    rounds = int(os.environ.get("NANDTB_ROUNDS", "14"))
    for rnd in range(rounds):
        noisy = rnd == rounds - 4
        if noisy:    # ~2 raw bit errors per codeword on every array read
            rate = int(2 / (8 * (cw + spec.ECC.parity_bytes)) * 1e12)
            for i in range(len(targets)):
                assert await tb.ctl(i, NandCtl.BIT_ERROR_RATE, rate) == 0
        expect = {}
        n0 = len(tb.cpls)
        for c, t in targets:
            pair = rng.choice(pairs)
            b = pair + rng.randrange(2)     # either plane may be the descriptor's block
            npg = next_page[(c, t, pair)]
            written = [p for p in range(npg or 0) if (c, t, pair, p) in pages]
            if noisy:       # raw pages would read back with the injected errors
                written = [p for p in written if not pages[(c, t, pair, p)][0]]
            r = rng.random()
            # the two targets of a channel share its buffer: give each its own pair of slots
            s1, s2 = (0, 1) if t == 0 else (2, 3)
            if rng.random() < 0.5:
                s1, s2 = s2, s1
            tag += 1
            if noisy and written:
                kind = "read"
            elif npg is None or npg >= prof.pages_per_block or r < 0.08:
                kind = "erase"
            elif written and r < 0.55:
                kind = "read"
            else:
                kind = "program"
            if kind == "erase":
                await tb.submit(opcode=NandOp.ERASE, flags=MP, channel=c, target=t, block=b, tag=tag)
                expect[tag] = ("erase", c, t, pair)
                for p in range(prof.pages_per_block):
                    pages.pop((c, t, pair, p), None)
                    pages.pop((c, t, pair + 1, p), None)
                next_page[(c, t, pair)] = 0
            elif kind == "program":
                p = npg
                raw = not noisy and rng.random() < 0.2
                n = prof.page_bytes if raw else lay.user_bytes
                d1 = random_bytes(rng, n) if raw else user_page(rng, lay)
                d2 = random_bytes(rng, n) if raw else user_page(rng, lay)
                await tb.write_slot(c, s1, 0, d1)
                await tb.write_slot(c, s2, 0, d2)
                await tb.submit(opcode=NandOp.PROGRAM, flags=MP | (RAW if raw else 0), channel=c, target=t, block=b,
                                page=p, column=0, length=n, slot=s1, slot2=s2, tag=tag)
                pages[(c, t, b, p)] = (raw, d1)
                pages[(c, t, b ^ 1, p)] = (raw, d2)
                next_page[(c, t, pair)] = p + 1
                expect[tag] = ("program", d1 + d2)
                counts["raw"] += raw
            else:
                p = rng.choice(written)
                raw = pages[(c, t, b, p)][0]
                if raw:
                    col = rng.randrange(prof.page_bytes - 1)
                    length = rng.randrange(1, prof.page_bytes - col + 1)
                else:
                    choice = rng.random()
                    if choice < 0.4:
                        col, length = 0, lay.user_bytes
                    elif choice < 0.7:
                        col, length = lay.oob_col, lay.oob_bytes
                    else:
                        first = rng.randrange(lay.data_codewords)
                        col, length = first * cw, rng.randrange(1, lay.data_codewords - first + 1) * cw
                        if rng.random() < 0.3 and col + length == prof.page_data:
                            length += lay.oob_bytes
                await tb.submit(opcode=NandOp.READ, flags=MP | (RAW if raw else 0), channel=c, target=t, block=b,
                                page=p, column=col, length=length, slot=s1, slot2=s2, tag=tag)
                expect[tag] = ("read", c, b, p, t, col, length, s1, s2)
        await tb.wait_cpls(n0 + len(expect))
        got = {x.tag: x for x in tb.cpls[n0:]}
        assert set(got) == set(expect)
        for tg, e in expect.items():
            cpl = got[tg]
            mp_ops += 1
            counts[e[0]] += 1
            assert cpl.result == NandResult.OK, (e[:2], cpl)
            if e[0] == "program":
                assert cpl.crc == zlib.crc32(e[1])
                assert not (cpl.nand_status | cpl.nand_status2) & FAIL, cpl
            elif e[0] == "erase":
                assert not (cpl.nand_status | cpl.nand_status2) & FAIL, cpl
                assert cpl.nand_status & (1 << spec.OnfiStatus.RDY) and cpl.nand_status2 & (1 << spec.OnfiStatus.RDY)
            else:
                _, c, b, p, t, col, length, s1, s2 = e
                a1 = await tb.read_slot(c, s1, col, length)
                a2 = await tb.read_slot(c, s2, col, length)
                w1, w2 = pages[(c, t, b, p)][1][col:col + length], pages[(c, t, b ^ 1, p)][1][col:col + length]
                if a1 != w1 or a2 != w2:
                    cocotb.log.error(f"MISMATCH {e} {diff(a1, w1)} {diff(a2, w2)} {cpl}")
                assert a1 == w1, ("plane of block", c, t, b, p, col, length, diff(a1, w1), cpl)
                assert a2 == w2, ("partner plane", c, t, b ^ 1, p, col, length, diff(a2, w2), cpl)
                assert cpl.crc == zlib.crc32(a1 + a2)
                assert not cpl.flags & (F_UNCORR | F_UNCORR2 | F_ERASED | F_ERASED2), cpl
                counts["corrected"] += cpl.ecc_corrected
        if noisy:
            assert counts["corrected"] > 0
            for i in range(len(targets)):
                assert await tb.ctl(i, NandCtl.BIT_ERROR_RATE, 0) == 0
        # cross-check one plane of a written pair single-plane: the data really is on that block
        c, t = rng.choice(targets)
        known = [k for k in pages if k[:2] == (c, t) and not pages[k][0]]
        if known:
            _, _, b, p = rng.choice(known)
            s = 0 if t == 0 else 2
            cpl = ok(await tb.do(opcode=NandOp.READ, channel=c, target=t, block=b, page=p, column=0,
                                 length=lay.user_bytes, slot=s, tag=0x8000 + rnd))
            assert await tb.read_slot(c, s, 0, lay.user_bytes) == pages[(c, t, b, p)][1]
            assert cpl.nand_status2 == 0 and not cpl.flags & (F_UNCORR2 | F_ERASED2)
            counts["sread"] += 1
    cocotb.log.info(f"multi-plane random: {counts}")
    assert counts["erase"] and counts["program"] and counts["read"] and counts["raw"] and counts["sread"]
    stats = await mp_stats(tb)
    assert sum(s["multi_plane_ops"] for s in stats) == mp_ops, ([s["multi_plane_ops"] for s in stats], mp_ops)
    await tb.expect_clean()


@cocotb.test()
async def multiplane_erased_and_half_written(dut):
    """Per-plane ECC flags: an erased pair reads ERASED with both flags; a pair with one page
    programmed (single-plane) reads OK, the erased plane flagged, the other's data in its slot;
    an uncorrectable partner is UNCORRECTABLE with only its flag."""
    rng = random.Random(9)
    tb = await make(dut, "mperased", mode=4)
    lay, prof = tb.layout, tb.profile
    await learn(tb, 1, 1)
    c, t = 1, 1
    ok(await tb.do(opcode=NandOp.ERASE, flags=MP, channel=c, target=t, block=7, tag=1))
    cpl = await tb.do(opcode=NandOp.READ, flags=MP, channel=c, target=t, block=6, page=0, column=0,
                      length=lay.user_bytes, slot=0, slot2=1, tag=2)
    assert cpl.result == NandResult.ERASED and cpl.flags & F_ERASED and cpl.flags & F_ERASED2, cpl
    data = user_page(rng, lay)
    await tb.write_slot(c, 2, 0, data)
    ok(await tb.do(opcode=NandOp.PROGRAM, channel=c, target=t, block=6, page=0, column=0,
                   length=lay.user_bytes, slot=2, tag=3))
    cpl = ok(await tb.do(opcode=NandOp.READ, flags=MP, channel=c, target=t, block=7, page=0, column=0,
                         length=lay.user_bytes, slot=0, slot2=1, tag=4))
    assert cpl.flags == F_ERASED, cpl
    assert await tb.read_slot(c, 1, 0, lay.user_bytes) == data
    assert await tb.read_slot(c, 0, 0, lay.user_bytes) == b"\xff" * lay.user_bytes
    # the partner's page without valid parity: uncorrectable, only its flag
    junk = random_bytes(rng, prof.page_bytes)
    await tb.write_slot(c, 2, 0, junk)
    ok(await tb.do(opcode=NandOp.PROGRAM, flags=RAW, channel=c, target=t, block=6, page=1, column=0,
                   length=prof.page_bytes, slot=2, tag=5))
    await tb.write_slot(c, 3, 0, data)
    ok(await tb.do(opcode=NandOp.PROGRAM, channel=c, target=t, block=7, page=1, column=0,
                   length=lay.user_bytes, slot=3, tag=6))
    cpl = await tb.do(opcode=NandOp.READ, flags=MP, channel=c, target=t, block=7, page=1, column=0,
                      length=lay.user_bytes, slot=0, slot2=1, tag=7)
    assert cpl.result == NandResult.UNCORRECTABLE and cpl.flags == F_UNCORR2, cpl
    assert await tb.read_slot(c, 0, 0, lay.user_bytes) == data
    await tb.expect_clean()


@cocotb.test()
async def multiplane_failure_names_the_plane(dut):
    """An injected program (then erase) failure on one plane: the completion is FAIL, READ STATUS
    ENHANCED's byte of that plane has FAIL and the other's not; the other plane's page is good."""
    rng = random.Random(4)
    tb = await make(dut, "mpfail", mode=5)
    lay = tb.layout
    c, t = 0, 1
    idx = tb.index(c, t)
    await learn(tb, c, t)
    for fail_partner in (True, False):
        b = 10 if fail_partner else 13          # the descriptor's block; the partner is b ^ 1
        ok(await tb.do(opcode=NandOp.ERASE, flags=MP, channel=c, target=t, block=b, tag=1))
        d1, d2 = user_page(rng, lay), user_page(rng, lay)
        await tb.write_slot(c, 0, 0, d1)
        await tb.write_slot(c, 1, 0, d2)
        bad = b ^ 1 if fail_partner else b
        assert await tb.ctl(idx, NandCtl.FAIL_PROGRAM, page_index(tb, 0, bad, 0)) == 0
        cpl = await tb.do(opcode=NandOp.PROGRAM, flags=MP, channel=c, target=t, block=b, page=0, column=0,
                          length=lay.user_bytes, slot=0, slot2=1, tag=2)
        assert cpl.result == NandResult.FAIL, cpl
        assert bool(cpl.nand_status2 & FAIL) == fail_partner and bool(cpl.nand_status & FAIL) != fail_partner, cpl
        good, good_data = (b, d1) if fail_partner else (b ^ 1, d2)
        ok(await tb.do(opcode=NandOp.READ, channel=c, target=t, block=good, page=0, column=0,
                       length=lay.user_bytes, slot=2, tag=3))
        assert await tb.read_slot(c, 2, 0, lay.user_bytes) == good_data
        # an erase failing on one plane
        assert await tb.ctl(idx, NandCtl.FAIL_ERASE, bad) == 0
        cpl = await tb.do(opcode=NandOp.ERASE, flags=MP, channel=c, target=t, block=b, tag=4)
        assert cpl.result == NandResult.FAIL, cpl
        assert bool(cpl.nand_status2 & FAIL) == fail_partner and bool(cpl.nand_status & FAIL) != fail_partner, cpl
    assert await tb.stat(idx, "PROGRAM_FAILS") == 2 and await tb.stat(idx, "ERASE_FAILS") == 2
    await tb.expect_clean()


@cocotb.test()
async def multiplane_one_array_time(dut):
    """Simulated time: two pages programmed as one multi-plane PROGRAM take one tPROG (the model's
    busy time grows by one tPROG plus tDBSY), two single-plane PROGRAMs of the same pages two; the
    same for ERASE (tBERS) and READ (tR)."""
    rng = random.Random(2)
    tb = await make(dut, "mptime", mode=5)
    lay, prof = tb.layout, tb.profile
    c, t = 0, 0
    idx = tb.index(c, t)
    await learn(tb, c, t)
    cyc_ns = tb.period_ps / 1000
    t_dbsy = spec.ONFI_MULTI_PLANE.T_DBSY_NS

    async def timed(*descs):
        """Issue the descriptors one after another; (cycles, model busy ns) from first submit to last completion."""
        busy0 = await tb.stat(idx, "BUSY_NS")
        start = int(tb.dut.cycle.value)
        for i, d in enumerate(descs):
            ok(await tb.do(channel=c, target=t, tag=300 + i, **d))
        return int(tb.dut.cycle.value) - start, await tb.stat(idx, "BUSY_NS") - busy0

    d1, d2 = user_page(rng, lay), user_page(rng, lay)
    await tb.write_slot(c, 0, 0, d1)
    await tb.write_slot(c, 1, 0, d2)
    prog = dict(opcode=NandOp.PROGRAM, column=0, length=lay.user_bytes)
    read = dict(opcode=NandOp.READ, column=0, length=lay.user_bytes)
    results = {}
    results["erase 1+1"] = await timed(dict(opcode=NandOp.ERASE, block=20), dict(opcode=NandOp.ERASE, block=21))
    results["erase mp"] = await timed(dict(opcode=NandOp.ERASE, flags=MP, block=22))
    results["program 1+1"] = await timed(dict(prog, block=20, page=0, slot=0), dict(prog, block=21, page=0, slot=1))
    results["program mp"] = await timed(dict(prog, flags=MP, block=22, page=0, slot=0, slot2=1))
    results["read 1+1"] = await timed(dict(read, block=22, page=0, slot=2), dict(read, block=23, page=0, slot=3))
    results["read mp"] = await timed(dict(read, flags=MP, block=22, page=0, slot=2, slot2=3))
    assert await tb.read_slot(c, 2, 0, lay.user_bytes) == d1 and await tb.read_slot(c, 3, 0, lay.user_bytes) == d2
    for name, (cycles, busy) in results.items():
        cocotb.log.info(f"{name}: {cycles} cycles = {cycles * cyc_ns / 1000:.1f} us, model busy {busy} ns")
    for op, t_arr in (("erase", prof.t_bers_ns), ("program", prof.t_prog_ns), ("read", prof.t_r_ns)):
        (c1, b1), (cm, bm) = results[f"{op} 1+1"], results[f"{op} mp"]
        # the array: two operations single-plane, one (plus tDBSY) multi-plane
        assert 2 * t_arr <= b1 < 2 * t_arr + 1000, (op, b1)
        assert t_arr <= bm <= t_arr + 2 * t_dbsy + 1000, (op, bm)
        # the clock: multi-plane saves one array time, less tDBSY and the 78h/06h extras
        saved_ns = (c1 - cm) * cyc_ns
        assert t_arr - 2 * t_dbsy - 2000 < saved_ns < t_arr + 1000, (op, saved_ns)
    await tb.expect_clean()


@cocotb.test()
async def multiplane_bench_throughput(dut):
    """For sim/bench_channel.py (runs only with NANDBENCH_OUT set): full ECC pages programmed
    single-plane and multi-plane (two pages a descriptor), every target two descriptors deep, mode 5."""
    out = os.environ.get("NANDBENCH_OUT")
    if not out:
        return
    import json
    pages = int(os.environ.get("NANDBENCH_PAGES", "8"))
    configs = [(1, 1), (1, 2), (1, 4), (2, 4)] if CHANNELS > 1 else [(1, 1), (1, 2), (1, 4)]
    for multi, (channels, ways) in [(mpl, cfg) for mpl in (False, True) for cfg in configs]:
        if ways > WAYS:
            continue
        tb = await make(dut, f"mptp{channels}{ways}{int(multi)}", mode=5)
        lay = tb.layout
        targets = [(c, w) for c in range(channels) for w in range(ways)]
        for c, w in targets:
            await learn(tb, c, w)
            ok(await tb.do(opcode=NandOp.ERASE, flags=MP, channel=c, target=w, block=0, tag=0))
        for c in range(channels):
            for s in range(SLOTS):
                await tb.write_slot(c, s, 0, bytes([s]) * lay.user_bytes)
        base = len(tb.cpls)
        start = int(tb.dut.cycle.value)
        tag = 0
        for p in range(pages):
            for c, w in targets:
                tag += 1
                if multi:   # blocks 0 and 1, page p: two pages a descriptor
                    await tb.submit(opcode=NandOp.PROGRAM, flags=MP, channel=c, target=w, block=0, page=p, column=0,
                                    length=lay.user_bytes, slot=(p + w) % SLOTS, slot2=(p + w + 1) % SLOTS, tag=tag)
                else:       # blocks 0 then 1 (the same pages), one a descriptor
                    await tb.submit(opcode=NandOp.PROGRAM, channel=c, target=w, block=p % 2, page=p // 2,
                                    column=0, length=lay.user_bytes, slot=(p + w) % SLOTS, tag=tag)
        await tb.wait_cpls(base + tag)
        total = int(tb.dut.cycle.value) - start
        assert all(x.result == NandResult.OK for x in tb.cpls[base:])
        with open(out, "a") as f:
            f.write(json.dumps(dict(kind="mp_throughput", multi_plane=multi, channels=channels, ways=ways,
                                    pages=tag * (2 if multi else 1), cycles=total)) + "\n")
        await tb.expect_clean()
