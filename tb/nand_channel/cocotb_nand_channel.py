"""cocotb tests: the NAND controller top against the NAND model.

Run through test_nand_channel.py (small profile, 2 channels x 2 ways; the
realistic profile through the benchmark build).  Every test ends by asking
every model for its statistics: zero timing violations, zero protocol errors.
"""

from __future__ import annotations

import os
import random
import zlib

import cocotb

from atomflash import spec
from atomflash.nandsim import NandCtl, PROFILE_EXTRAS
from atomflash.spec import NandOp, NandResult, OnfiFeature
from sim.harness.channel_tb import ChannelTB, random_bytes

CHANNELS = int(os.environ.get("NANDTB_CHANNELS", "2"))
WAYS = int(os.environ.get("NANDTB_WAYS", "2"))
PROFILE = os.environ.get("NANDTB_PROFILE", "small")
SLOT_WORDS = int(os.environ["NANDTB_SLOT_WORDS"])
MODES = [int(m) for m in os.environ.get("NANDTB_MODES", "0,1,2,3,4,5").split(",")]


async def make(dut, name, **kw):
    return await ChannelTB.create(dut, channels=CHANNELS, ways=WAYS, profile=PROFILE, slot_words=SLOT_WORDS,
                                  name=name, **kw)


def ok(cpl, what=""):
    assert cpl.result == NandResult.OK, (what, cpl)
    return cpl


@cocotb.test()
async def every_operation_every_mode(dut):
    """Bring-up at mode 0, SET FEATURES to each mode, then every operation; zero violations."""
    rng = random.Random(1)
    for mode in MODES:
        tb = await make(dut, f"modes{mode}", mode=0)
        lay, prof = tb.layout, tb.profile
        c, t = mode % CHANNELS, (mode // CHANNELS) % WAYS
        ok(await tb.do(opcode=NandOp.RESET, channel=c, target=t, tag=1))
        await tb.write_slot(c, 0, 0, bytes([mode, 0, 0, 0]))
        ok(await tb.do(opcode=NandOp.SET_FEATURES, channel=c, target=t, column=OnfiFeature.TIMING_MODE,
                       length=4, slot=0, tag=2))
        tb.set_mode(mode)
        cpl = ok(await tb.do(opcode=NandOp.READ_ID, channel=c, target=t, column=0, length=5, slot=1, tag=3))
        want_id = bytes(int(x, 16) for x in PROFILE_EXTRAS[PROFILE]["id_bytes"].split(","))
        assert await tb.read_slot(c, 1, 0, 5) == want_id
        assert cpl.crc == zlib.crc32(want_id)
        ok(await tb.do(opcode=NandOp.READ_PARAM, channel=c, target=t, length=256, slot=1, tag=4))
        param = await tb.read_slot(c, 1, 0, 256)
        assert param[:4] == b"ONFI"
        assert int.from_bytes(param[80:84], "little") == prof.page_data
        cpl = ok(await tb.do(opcode=NandOp.READ_STATUS, channel=c, target=t, tag=5))
        assert cpl.nand_status & (1 << spec.OnfiStatus.RDY)
        ok(await tb.do(opcode=NandOp.ERASE, channel=c, target=t, block=1, tag=6))
        # ECC page: data + spare user bytes (BBM kept FFh)
        user = bytearray(random_bytes(rng, lay.user_bytes))
        user[lay.oob_col:lay.oob_col + lay.bbm_bytes] = b"\xff" * lay.bbm_bytes
        await tb.write_slot(c, 2, 0, user)
        cpl = ok(await tb.do(opcode=NandOp.PROGRAM, channel=c, target=t, block=1, page=0, column=0,
                             length=lay.user_bytes, slot=2, tag=7))
        assert cpl.crc == zlib.crc32(user)
        cpl = ok(await tb.do(opcode=NandOp.READ, channel=c, target=t, block=1, page=0, column=0,
                             length=lay.user_bytes, slot=3, tag=8))
        assert await tb.read_slot(c, 3, 0, lay.user_bytes) == user
        assert cpl.crc == zlib.crc32(user) and cpl.ecc_corrected == 0
        cpl = ok(await tb.do(opcode=NandOp.READ, channel=c, target=t, block=1, page=0, column=lay.oob_col,
                             length=lay.oob_bytes, slot=1, tag=9))
        assert await tb.read_slot(c, 1, lay.oob_col, lay.oob_bytes) == user[lay.oob_col:]
        # raw page, every byte of data and spare
        raw = random_bytes(rng, prof.page_bytes)
        await tb.write_slot(c, 2, 0, raw)
        ok(await tb.do(opcode=NandOp.PROGRAM, flags=1, channel=c, target=t, block=1, page=1, column=0,
                       length=prof.page_bytes, slot=2, tag=10))
        cpl = ok(await tb.do(opcode=NandOp.READ, flags=1, channel=c, target=t, block=1, page=1, column=0,
                             length=prof.page_bytes, slot=3, tag=11))
        assert await tb.read_slot(c, 3, 0, prof.page_bytes) == raw and cpl.crc == zlib.crc32(raw)
        # copyback keeps data and parity: the copy reads back through ECC
        ok(await tb.do(opcode=NandOp.ERASE, channel=c, target=t, block=2, tag=12))
        ok(await tb.do(opcode=NandOp.COPYBACK, channel=c, target=t, block=1, page=0, dst_block=2, dst_page=0,
                       tag=13))
        ok(await tb.do(opcode=NandOp.READ, channel=c, target=t, block=2, page=0, column=0,
                       length=lay.user_bytes, slot=3, tag=14))
        assert await tb.read_slot(c, 3, 0, lay.user_bytes) == user
        await tb.expect_clean()


@cocotb.test()
async def descriptor_errors_issue_no_bus_cycle(dut):
    tb = await make(dut, "errors", mode=5)
    prof, lay = tb.profile, tb.layout
    bad = [
        (dict(opcode=15), NandResult.BAD_OPCODE),
        (dict(opcode=NandOp.READ, channel=CHANNELS, length=4), NandResult.BAD_CHANNEL),
        (dict(opcode=NandOp.READ, target=WAYS, length=4), NandResult.BAD_TARGET),
        (dict(opcode=NandOp.ERASE, lun=prof.luns), NandResult.BAD_LUN),
        (dict(opcode=NandOp.ERASE, block=prof.blocks_per_lun), NandResult.BAD_BLOCK),
        (dict(opcode=NandOp.COPYBACK, dst_block=prof.blocks_per_lun), NandResult.BAD_BLOCK),
        (dict(opcode=NandOp.PROGRAM, page=prof.pages_per_block, length=4, flags=1), NandResult.BAD_PAGE),
        (dict(opcode=NandOp.READ, slot=99, length=4, flags=1), NandResult.BAD_SLOT),
        (dict(opcode=NandOp.READ, flags=1, column=prof.page_bytes, length=1), NandResult.BAD_COLUMN),
        (dict(opcode=NandOp.READ, column=100, length=512), NandResult.BAD_COLUMN),
        (dict(opcode=NandOp.READ, flags=1, column=prof.page_bytes - 4, length=5), NandResult.BAD_LENGTH),
        (dict(opcode=NandOp.PROGRAM, column=0, length=lay.user_bytes - 1), NandResult.BAD_LENGTH),
        (dict(opcode=NandOp.PROGRAM, flags=1, length=0), NandResult.BAD_LENGTH),
    ]
    before = [await tb.stat(i, "COMMANDS") for i in range(CHANNELS * WAYS)]
    for i, (fields, _) in enumerate(bad):
        fields.setdefault("channel", 0)
        await tb.submit(tag=i, **fields)
    await tb.wait_cpls(len(bad))
    assert [(c.tag, c.result) for c in tb.cpls] == [(i, r) for i, (_, r) in enumerate(bad)]
    assert [await tb.stat(i, "COMMANDS") for i in range(CHANNELS * WAYS)] == before
    await tb.expect_clean()


@cocotb.test()
async def random_mix_all_targets_with_failures(dut):
    """Rounds of concurrent random operations on every target of every channel,
    checked against a dict of page contents; injected program/erase failures
    must surface as FAIL."""
    rng = random.Random(int(os.environ.get("NANDTB_SEED", "7")))
    tb = await make(dut, "mix", mode=5)
    lay = tb.layout
    blocks = range(4)
    ppb = tb.profile.pages_per_block
    targets = [(c, t) for c in range(CHANNELS) for t in range(WAYS)]
    pages: dict = {}                       # (c, t, block, page) -> bytes | None (unknown after a failure)
    next_page = {(c, t, b): None for c, t in targets for b in blocks}   # None: block not erased yet
    counts = dict(program=0, read=0, erase=0, fail=0)
    tag = 0
    for rnd in range(int(os.environ.get("NANDTB_ROUNDS", "10"))):
        plan = []
        for c, t in targets:
            b = rng.choice(blocks)
            npg = next_page[(c, t, b)]
            written = [p for p in range(npg or 0) if (c, t, b, p) in pages]
            r = rng.random()
            if npg is None or (npg >= ppb) or r < 0.15:
                kind = "erase"
            elif written and r < 0.5:
                kind = "read"
            else:
                kind = "program"
            slot = t * 2 + (rnd % 2) if tb.slot_words else 0
            slot %= 4
            tag += 1
            fail = kind in ("program", "erase") and rng.random() < 0.12
            plan.append((c, t, b, kind, slot, tag, fail, written))
        expect = {}
        n_before = len(tb.cpls)
        for c, t, b, kind, slot, tg, fail, written in plan:
            idx = tb.index(c, t)
            if kind == "erase":
                if fail:
                    assert await tb.ctl(idx, NandCtl.FAIL_ERASE, (1 << 64) - 1) == 0
                await tb.submit(opcode=NandOp.ERASE, channel=c, target=t, block=b, tag=tg)
                expect[tg] = ("erase", c, t, b, fail)
            elif kind == "program":
                p = next_page[(c, t, b)]
                data = bytearray(random_bytes(rng, lay.user_bytes))
                data[lay.oob_col:lay.oob_col + lay.bbm_bytes] = b"\xff\xff"
                await tb.write_slot(c, slot, 0, data)
                if fail:
                    assert await tb.ctl(idx, NandCtl.FAIL_PROGRAM, (1 << 64) - 1) == 0
                await tb.submit(opcode=NandOp.PROGRAM, channel=c, target=t, block=b, page=p, column=0,
                                length=lay.user_bytes, slot=slot, tag=tg)
                expect[tg] = ("program", c, t, b, p, bytes(data), fail)
                next_page[(c, t, b)] = p + 1
            else:
                p = rng.choice(written)
                await tb.submit(opcode=NandOp.READ, channel=c, target=t, block=b, page=p, column=0,
                                length=lay.user_bytes, slot=slot, tag=tg)
                expect[tg] = ("read", c, t, b, p, slot)
        await tb.wait_cpls(n_before + len(plan))
        got = {x.tag: x for x in tb.cpls if x.tag in expect}
        for tg, e in expect.items():
            cpl = got[tg]
            counts[e[0]] += 1
            if e[0] == "erase":
                _, c, t, b, fail = e
                if fail:
                    assert cpl.result == NandResult.FAIL and cpl.nand_status & 1, cpl
                    counts["fail"] += 1
                    for p in range(ppb):
                        pages.pop((c, t, b, p), None)
                    next_page[(c, t, b)] = None
                else:
                    assert cpl.result == NandResult.OK, cpl
                    for p in range(ppb):
                        pages.pop((c, t, b, p), None)
                    next_page[(c, t, b)] = 0
            elif e[0] == "program":
                _, c, t, b, p, data, fail = e
                if fail:
                    assert cpl.result == NandResult.FAIL and cpl.nand_status & 1, cpl
                    counts["fail"] += 1
                else:
                    assert cpl.result == NandResult.OK, cpl
                    assert cpl.crc == zlib.crc32(data)
                    pages[(c, t, b, p)] = data
            else:
                _, c, t, b, p, slot = e
                assert cpl.result == NandResult.OK, cpl
                back = await tb.read_slot(c, slot, 0, lay.user_bytes)
                assert back == pages[(c, t, b, p)], (c, t, b, p)
                assert cpl.crc == zlib.crc32(back)
    cocotb.log.info(f"random mix: {counts}")
    assert counts["program"] and counts["read"] and counts["erase"] and counts["fail"]
    await tb.expect_clean()


@cocotb.test()
async def ecc_corrects_model_bit_errors(dut):
    rng = random.Random(3)
    tb = await make(dut, "ecc", mode=5)
    lay = tb.layout
    ok(await tb.do(opcode=NandOp.ERASE, channel=0, target=0, block=3, tag=1))
    user = bytearray(random_bytes(rng, lay.user_bytes))
    user[lay.oob_col:lay.oob_col + 2] = b"\xff\xff"
    await tb.write_slot(0, 0, 0, user)
    ok(await tb.do(opcode=NandOp.PROGRAM, channel=0, target=0, block=3, page=0, column=0,
                   length=lay.user_bytes, slot=0, tag=2))
    # ~2 raw bit errors per codeword on every array read
    rate = int(2 / (8 * (spec.ECC.codeword + spec.ECC.parity_bytes)) * 1e12)
    assert await tb.ctl(0, NandCtl.BIT_ERROR_RATE, rate) == 0
    corrected = 0
    for i in range(4):
        cpl = ok(await tb.do(opcode=NandOp.READ, channel=0, target=0, block=3, page=0, column=0,
                             length=lay.user_bytes, slot=1, tag=10 + i))
        assert await tb.read_slot(0, 1, 0, lay.user_bytes) == user
        assert cpl.crc == zlib.crc32(user)
        corrected += cpl.ecc_corrected
        assert cpl.ecc_max <= spec.ECC.t
    assert corrected > 0
    raw = await tb.do(opcode=NandOp.READ, flags=1, channel=0, target=0, block=3, page=0, column=0,
                      length=lay.user_bytes, slot=1, tag=20)
    assert await tb.read_slot(0, 1, 0, lay.user_bytes) != user or raw.result == NandResult.OK
    assert await tb.ctl(0, NandCtl.BIT_ERROR_RATE, 0) == 0
    # a page whose parity is garbage cannot decode: uncorrectable, never silently "fixed"
    junk = random_bytes(rng, tb.profile.page_bytes)
    await tb.write_slot(0, 2, 0, junk)
    ok(await tb.do(opcode=NandOp.PROGRAM, flags=1, channel=0, target=0, block=3, page=1, column=0,
                   length=tb.profile.page_bytes, slot=2, tag=30))
    cpl = await tb.do(opcode=NandOp.READ, channel=0, target=0, block=3, page=1, column=0,
                      length=lay.user_bytes, slot=3, tag=31)
    assert cpl.result == NandResult.UNCORRECTABLE and cpl.flags & 1, cpl
    assert await tb.read_slot(0, 3, 0, lay.user_bytes) == junk[:lay.user_bytes]
    cpl = await tb.do(opcode=NandOp.READ, channel=0, target=0, block=3, page=5, column=0,
                      length=lay.user_bytes, slot=3, tag=32)
    assert cpl.result == NandResult.ERASED and cpl.flags & 2, cpl
    await tb.expect_clean()
