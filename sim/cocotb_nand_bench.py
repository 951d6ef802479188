"""Channel benchmarks in simulated cycles (driven by sim/bench_channel.py).

Results are appended as JSON lines to $NANDBENCH_OUT.  Figures:

* bus efficiency: cycles the bus needs for a page's data transfer vs the
  mode's theoretical byte time (tRC per byte read, tWC per byte written),
  measured from the completion times of back-to-back raw page reads/programs
  of one target with the array time subtracted (the model reports busy time);
* program throughput with 1, 2 and 4 ways on one channel, and with 1 and 2
  channels: pages per million cycles with tPROG of the realistic part.
"""

from __future__ import annotations

import json
import os

import cocotb

from atomflash import spec
from atomflash.spec import NandOp, NandResult
from sim.harness.channel_tb import ChannelTB

CHANNELS = int(os.environ["NANDTB_CHANNELS"])
WAYS = int(os.environ["NANDTB_WAYS"])
PROFILE = os.environ["NANDTB_PROFILE"]
SLOT_WORDS = int(os.environ["NANDTB_SLOT_WORDS"])
OUT = os.environ["NANDBENCH_OUT"]
PAGES = int(os.environ.get("NANDBENCH_PAGES", "8"))


def emit(**rec):
    with open(OUT, "a") as f:
        f.write(json.dumps(rec) + "\n")


async def cycles(tb):
    return int(tb.dut.cycle.value)


@cocotb.test()
async def bus_efficiency(dut):
    for mode in (0, 1, 2, 3, 4, 5):
        tb = await ChannelTB.create(dut, channels=CHANNELS, ways=WAYS, profile=PROFILE, slot_words=SLOT_WORDS,
                                    name=f"eff{mode}", mode=mode)
        prof = tb.profile
        t = spec.onfi_timing_cycles(mode, spec.NAND_CLK_HZ)
        n = prof.page_bytes
        await tb.do(opcode=NandOp.ERASE, channel=0, target=0, block=0, tag=1)
        # program: the bus phase of a raw full-page program; tPROG excluded by
        # timing phase 0 alone (descriptor accepted -> target busy)
        t_r = -(-prof.t_r_ns * spec.NAND_CLK_HZ // 10**9)
        t_prog = -(-prof.t_prog_ns * spec.NAND_CLK_HZ // 10**9)
        c0 = await cycles(tb)
        cpl = await tb.do(opcode=NandOp.PROGRAM, flags=1, channel=0, target=0, block=0, page=0, column=0,
                          length=n, slot=0, tag=2)
        assert cpl.result == NandResult.OK
        prog_total = await cycles(tb) - c0
        c0 = await cycles(tb)
        cpl = await tb.do(opcode=NandOp.READ, flags=1, channel=0, target=0, block=0, page=0, column=0,
                          length=n, slot=1, tag=3)
        assert cpl.result == NandResult.OK
        read_total = await cycles(tb) - c0
        # ECC read (parity first, then data with decoding)
        c0 = await cycles(tb)
        cpl = await tb.do(opcode=NandOp.READ, channel=0, target=0, block=0, page=0, column=0,
                          length=tb.layout.user_bytes, slot=1, tag=4)
        ecc_read_total = await cycles(tb) - c0
        emit(kind="efficiency", mode=mode, page_bytes=n, tRC=t["tRC"], tWC=t["tWC"],
             t_r=t_r, t_prog=t_prog, read_total=read_total, prog_total=prog_total,
             ecc_read_total=ecc_read_total, ecc_user_bytes=tb.layout.user_bytes,
             ecc_transfer_bytes=tb.layout.user_bytes + tb.layout.parity_bytes)
        await tb.expect_clean()


@cocotb.test()
async def program_throughput(dut):
    configs = [(1, 1), (1, 2), (1, 4), (2, 4)] if CHANNELS > 1 else [(1, 1), (1, 2), (1, 4)]
    # the profile's tPROG, and 3x it (a slower part) where tPROG dominates the bus time
    t_prog_ns = spec.NAND_PROFILES[PROFILE].t_prog_ns
    for scale, (channels, ways) in [(s, c) for s in (1, 3) for c in configs]:
        if ways > WAYS:
            continue
        tb = await ChannelTB.create(dut, channels=CHANNELS, ways=WAYS, profile=PROFILE, slot_words=SLOT_WORDS,
                                    name=f"tp{channels}{ways}x{scale}", mode=5, t_prog_ns=t_prog_ns * scale)
        lay = tb.layout
        targets = [(c, w) for c in range(channels) for w in range(ways)]
        for c, w in targets:
            await tb.submit(opcode=NandOp.ERASE, channel=c, target=w, block=0, tag=0)
        await tb.wait_cpls(len(targets))
        for c in range(channels):
            for s in range(4):
                await tb.write_slot(c, s, 0, bytes([s]) * lay.user_bytes)
        base = len(tb.cpls)
        start = await cycles(tb)
        tag = 0
        # keep every target two deep: the queue hides the descriptor latency
        for p in range(PAGES):
            for c, w in targets:
                tag += 1
                await tb.submit(opcode=NandOp.PROGRAM, channel=c, target=w, block=0, page=p, column=0,
                                length=lay.user_bytes, slot=(p + w) % 4, tag=tag)
        await tb.wait_cpls(base + tag)
        total = await cycles(tb) - start
        assert all(x.result == NandResult.OK for x in tb.cpls[base:])
        emit(kind="throughput", channels=channels, ways=ways, pages=tag, cycles=total,
             t_prog=-(-t_prog_ns * scale * spec.NAND_CLK_HZ // 10**9))
        await tb.expect_clean()
