"""cocotb: the RTL validator decides as atomflash.command.static_status does.

``ValidateTB`` owns the validator, its clock, the command source (idle gaps) and the two verdict
sinks (backpressure), the reference (``static_status``) and the scoreboard: every command leaves
exactly once, on the stream its status names, in command order, the cycle after it was taken."""

import os
import random

import cocotb
from cocotb.clock import Clock
from cocotb.triggers import ClockCycles, FallingEdge, ReadOnly, RisingEdge

from atomflash import spec
from atomflash.command import StaticLimits, static_status
from atomflash.spec import Hint, Opcode, Status
from rtl.host.queues import command_layout, completion_layout
from sim.harness.layouts import pack, unpack
from sim.harness.streams import StreamSink, StreamSource

CAPACITY = 5000
QUEUE_PAIRS = int(os.environ.get("VALIDATE_QUEUE_PAIRS", "4"))
CMD_LAYOUT, CPL_LAYOUT = command_layout(QUEUE_PAIRS), completion_layout(QUEUE_PAIRS)


def interesting_command(rng: random.Random) -> dict:
    """A random entry biased towards every rule's boundary."""
    lim = StaticLimits()
    c = {f.name: 0 for f in spec.CMD.fields}
    c["opcode"] = rng.choice([int(o) for o in Opcode] * 3 + [0x7F, 0xFF, 0x03])
    c["cid"] = rng.getrandbits(16)
    c["nsid"] = 1 if rng.random() < 0.9 else rng.choice([0, 2, 0xFFFFFFFF])
    c["rsvd"] = 0 if rng.random() < 0.95 else rng.getrandbits(32)
    c["log_page"] = 0 if rng.random() < 0.8 else rng.choice([int(p) for p in spec.LogPage] + [0x7F, 0xFFFFFFFF])
    c["flags"] = rng.choice([0, 0, 0, 1, 2, 3, 4, 6, 8, 0x80])
    c["tid"] = rng.choice([0, 1, 7, 0xFFFFFFFF])
    c["hint"] = rng.choice([int(h) for h in Hint] + [3, 0xFFFFFFFF])
    c["lba"] = rng.choice([0, 1, CAPACITY - 1, CAPACITY, CAPACITY - lim.max_transfer, rng.getrandbits(64),
                           rng.randrange(CAPACITY)])
    c["nlb"] = rng.choice([0, 1, 2, lim.max_transfer, lim.max_transfer + 1, rng.getrandbits(32),
                           rng.randrange(1, 80)])
    c["nlist"] = rng.choice([0, 1, lim.max_atomic_pages, lim.max_atomic_pages + 1, lim.max_remap_triples,
                             lim.max_remap_triples + 1, rng.getrandbits(32)])
    c["buf"] = rng.choice([0x1000, 0x1001, 0x1002, 0x1004, (1 << 32) - 4, 1 << 32, rng.getrandbits(64)])
    c["list"] = rng.choice([0x2000, 0x2004, 0x2008, (1 << 32) - 8, 1 << 32, rng.getrandbits(64)])
    c["token"] = rng.getrandbits(64)
    return c


def entry_bits(c: dict) -> int:
    """The submission entry as the host writes it (the spec record's bytes, little-endian)."""
    return int.from_bytes(spec.CMD.pack(c), "little")


class ValidateTB:
    def __init__(self, dut, seed: int = 7):
        self.dut, self.clk = dut, dut.clk
        self.rng = random.Random(seed)
        self.expected = []          # per command sent: ("accepted", payload fields) or ("rejected", ...)
        self.statuses = {}          # how many commands the reference gave each status
        self.taken = 0              # commands the validator took (the monitor's count)
        self.cmd = self.accepted = self.rejected = None
        cocotb.start_soon(Clock(dut.clk, 10, "ns").start())

    async def reset(self, *, idle=0.0, backpressure=0.0, drivers=True):
        """Reset; with ``drivers`` the source and sinks take the streams (else the test drives them)."""
        d = self.dut
        d.rst.value = 1
        d.cmd__valid.value = 0
        d.capacity.value = CAPACITY
        d.accepted__ready.value = 0
        d.rejected__ready.value = 0
        await ClockCycles(self.clk, 2)
        d.rst.value = 0
        if drivers:
            seed = self.rng.getrandbits(32)
            self.cmd = StreamSource(d, "cmd", self.clk, idle=idle, max_gap=3, seed=seed)
            self.accepted = StreamSink(d, "accepted", self.clk, backpressure=backpressure, max_gap=3, seed=seed + 1)
            self.rejected = StreamSink(d, "rejected", self.clk, backpressure=backpressure, max_gap=3, seed=seed + 2)
            cocotb.start_soon(self._monitor())

    async def _monitor(self):
        """A command taken on a clock edge has its verdict out right after it, on one stream only."""
        d = self.dut
        while True:
            await FallingEdge(self.clk)
            await ReadOnly()                # the drivers change their signals on falling edges only
            if d.cmd__valid.value and d.cmd__ready.value:
                await RisingEdge(self.clk)
                await ReadOnly()
                self.taken += 1
                assert int(d.accepted__valid.value) + int(d.rejected__valid.value) == 1, \
                    f"command #{self.taken}: accepted {d.accepted__valid.value}, rejected {d.rejected__valid.value}"

    def expect(self, c: dict, sqid: int) -> Status:
        """The reference's verdict on (entry, queue), queued for the scoreboard."""
        want = static_status(c, CAPACITY)
        self.statuses[want] = self.statuses.get(want, 0) + 1
        if want == Status.SUCCESS:
            self.expected.append(("accepted", {"sqid": sqid, "cmd": entry_bits(c)}))
        else:
            self.expected.append(("rejected", {"sqid": sqid, "cid": c["cid"], "status": int(want), "result": 0}))
        return want

    async def send(self, c: dict, sqid: int):
        self.expect(c, sqid)
        await self.cmd.send(pack(CMD_LAYOUT, sqid=sqid, cmd=c))

    async def verdicts(self) -> list:
        """Every verdict so far, as (stream, payload fields), in the order the validator gave them."""
        n = len(self.expected)
        for _ in range(100 * n + 100):
            if len(self.accepted.items) + len(self.rejected.items) >= n:
                break
            await RisingEdge(self.clk)
        await ClockCycles(self.clk, 10)     # and nothing more comes
        out = [(t, "accepted", unpack(CMD_LAYOUT, v, raw=("cmd",)))
               for t, v in zip(self.accepted.times, self.accepted.items)]
        out += [(t, "rejected", unpack(CPL_LAYOUT, v)) for t, v in zip(self.rejected.times, self.rejected.items)]
        out.sort(key=lambda x: x[0])
        assert len({t for t, _, _ in out}) == len(out), "two verdicts taken on one edge"
        return [(stream, fields) for _, stream, fields in out]


@cocotb.test()
async def random_entries_match_python(dut):
    tb = ValidateTB(dut, seed=7)
    await tb.reset(idle=0.3, backpressure=0.3)
    for _ in range(1500):
        await tb.send(interesting_command(tb.rng), tb.rng.randrange(QUEUE_PAIRS))
    got = await tb.verdicts()
    assert len(got) == len(tb.expected) == tb.taken == 1500, (len(got), len(tb.expected), tb.taken)
    for n, (g, want) in enumerate(zip(got, tb.expected)):
        if g != want:
            status = lambda v: Status(v[1]["status"]).name if v[0] == "rejected" else "SUCCESS"  # noqa: E731
            assert g == want, f"#{n}: RTL {status(g)} {g} != Python {status(want)} {want}"
    assert len(tb.statuses) >= 10, f"the random entries exercised too few rules: {tb.statuses}"
    # the run proves it exercised them: commands after idle gaps, verdicts held on both streams
    assert tb.cmd.gaps > 50 and tb.accepted.stalls > 20 and tb.rejected.stalls > 20, \
        (tb.cmd.gaps, tb.accepted.stalls, tb.rejected.stalls)


@cocotb.test()
async def backpressure_holds_the_verdict(dut):
    tb = ValidateTB(dut)
    await tb.reset(drivers=False)
    good = {f.name: 0 for f in spec.CMD.fields} | dict(opcode=Opcode.FLUSH, nsid=1, cid=1)
    bad = dict(good, opcode=0x7F, cid=2)
    for entry in (good, bad):
        dut.cmd__payload.value = pack(CMD_LAYOUT, sqid=0, cmd=entry)
        dut.cmd__valid.value = 1
        await RisingEdge(dut.clk)
    await ReadOnly()
    assert dut.cmd__ready.value == 0, "a second entry must wait while the first is held"
    assert dut.accepted__valid.value == 1
    assert unpack(CMD_LAYOUT, dut.accepted__payload.value, raw=("cmd",))["cmd"] == entry_bits(good)
    await RisingEdge(dut.clk)
    dut.accepted__ready.value = 1
    await RisingEdge(dut.clk)
    dut.cmd__valid.value = 0
    dut.accepted__ready.value = 0
    await ReadOnly()
    assert dut.rejected__valid.value == 1
    rejected = unpack(CPL_LAYOUT, dut.rejected__payload.value)
    assert rejected["cid"] == 2 and rejected["status"] == Status.INVALID_OPCODE, rejected
