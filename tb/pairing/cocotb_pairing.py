"""cocotb tests for the MLC paired-page gate and PAD requests (rtl/ftl/pairing.py).

The gate is checked against :func:`reference`, the rule in plain Python
(spec.mlc_paired_lower / mlc_upper_of), on random completion streams: several
dies interleaved, each in issue order, with PAD pages and failed programs
mixed in -- and, independently of the model, against the property the core
relies on: an OK lower page's completion never leaves before its upper page's
completion has arrived.

``PairingTB`` owns the gate, its clock, the drivers (completions from a
:class:`~sim.harness.streams.SettledStreamSource` and issued pages from a
:class:`~sim.harness.streams.StreamSource`, with seeded idle gaps; completions taken by a
:class:`~sim.harness.streams.FullRateStreamSink` under seeded backpressure, back to back otherwise, its
reads settled as the gate passes completions through combinationally; PAD requests taken one at a
time by a credit :class:`~sim.harness.streams.FullRateStreamSink`, as the core takes them), a monitor
of the completions the gate took (when), the reference and the scoreboard.  Payloads go through
``PAGE_DONE``, the gate's ``issued`` and ``pad`` layouts and ``spec.pack_ppa``."""

import os
import random
from collections import deque

import cocotb
from cocotb.clock import Clock
from cocotb.result import SimTimeoutError
from cocotb.triggers import ClockCycles, FallingEdge, ReadOnly, RisingEdge, with_timeout
from cocotb.utils import get_sim_steps, get_sim_time

from atomflash import spec
from atomflash.spec import NandResult
from rtl.ftl.logport import PAD_TAG
from rtl.ftl.logwriter import PAGE_DONE
from rtl.ftl.pairing import PairedPages
from sim.harness.layouts import pack, unpack
from sim.harness.streams import FullRateStreamSink, SettledStreamSource, StreamSource

CHANNELS, WAYS, PAD_IDLE = (int(os.environ[k]) for k in ("CHANNELS", "WAYS", "PAD_IDLE"))
DIES = CHANNELS * WAYS
_PORTS = PairedPages(channels=CHANNELS, ways=WAYS, pad_tag=PAD_TAG, pad_idle=PAD_IDLE)
ISSUED, PAD = _PORTS.issued.payload.shape(), _PORTS.pad.payload.shape()
PERIOD_NS = 10


def die_ppa(die, block, page):
    return spec.pack_ppa(die % CHANNELS, (die // CHANNELS) % WAYS, 0, block, page)


def is_lower(page, ppb):
    return spec.mlc_upper_of(page, ppb) >= 0


class Completion:
    """One log-writer completion: die, block, page, PAD or not, result."""

    def __init__(self, serial, die, block, page, pad=False, result=NandResult.OK):
        self.serial, self.die, self.block, self.page, self.pad, self.result = serial, die, block, page, pad, result

    def payload(self):
        tag = (self.serial & 0x3FFF) | (PAD_TAG if self.pad else 0)
        return pack(PAGE_DONE, tag=tag, result=self.result, ppa=die_ppa(self.die, self.block, self.page),
                    seq=self.serial, vseq=self.serial)

    def held(self, mlc, ppb):
        return mlc and is_lower(self.page, ppb) and self.result == NandResult.OK and not self.pad


def reference(stream, mlc, ppb):
    """The gate's rule: what leaves, in order, and what is still held at the end."""
    held = {d: deque() for d in range(DIES)}
    out = []
    for x in stream:
        lower = spec.mlc_paired_lower(x.page, ppb)
        q = held[x.die]
        if mlc and lower >= 0 and q and q[0].block == x.block and q[0].page == lower:
            out.append((q.popleft(), x.result))  # a failed upper page fails its lower page too
        if x.held(mlc, ppb):
            q.append(x)
        else:
            out.append((x, x.result))
    return out, [x for q in held.values() for x in q]


def random_stream(rng, ppb, blocks=2, pad_p=0.15, fail_p=0.05):
    """Every die programs ``blocks`` whole blocks in page order; completions of different dies interleave."""
    per_die = []
    serial = 0
    for d in range(DIES):
        pages = []
        for b in range(blocks):
            for p in range(ppb):
                serial += 1
                r = rng.random()
                pages.append(Completion(serial, d, 10 + b, p, pad=r < pad_p,
                                        result=NandResult.FAIL if pad_p <= r < pad_p + fail_p else NandResult.OK))
        per_die.append(deque(pages))
    stream = []
    while any(per_die):
        q = rng.choice([q for q in per_die if q])
        stream.append(q.popleft())
    return stream


class PairingTB:
    def __init__(self, dut, seed, *, idle=0.3, backpressure=0.3):
        self.dut, self.clk = dut, dut.clk
        self.rng = random.Random(seed)
        # settled: done_in's ready is done_out's, which the sink lowers on falling edges (see SettledStreamSource)
        self.done_in = SettledStreamSource(dut, "done_in", dut.clk, idle=idle, max_gap=3, seed=seed + 1)
        self.done_out = FullRateStreamSink(dut, "done_out", dut.clk, backpressure=backpressure, max_gap=3,
                                           seed=seed + 2)
        self.issued = StreamSource(dut, "issued", dut.clk, idle=idle, max_gap=3, seed=seed + 3)
        self.pad = FullRateStreamSink(dut, "pad", dut.clk, credit=0, backpressure=backpressure, max_gap=3,
                                      seed=seed + 4)
        self.taken_in = []          # when the gate took each completion (clock-edge times)
        self.serial = 0             # issue()'s completions
        dut.writer_idle.value = 0
        cocotb.start_soon(Clock(dut.clk, PERIOD_NS, "ns").start())
        cocotb.start_soon(self._monitor_in())

    async def reset(self, mlc, ppb):
        d = self.dut
        d.rst.value = 1
        d.mlc.value = mlc
        d.pages_per_block.value = ppb
        d.writer_idle.value = 0
        d.open.value = (1 << DIES) - 1
        await ClockCycles(d.clk, 3)
        d.rst.value = 0
        await RisingEdge(d.clk)

    async def _monitor_in(self):
        """Records the clock edge of every completion the gate takes (the drivers write on falling edges)."""
        d = self.dut
        while True:
            await FallingEdge(self.clk)
            await ReadOnly()
            if d.done_in__valid.value and d.done_in__ready.value:
                await RisingEdge(self.clk)
                self.taken_in.append(get_sim_time())

    # -- the completion gate -------------------------------------------------------------------------------
    async def run_gate(self, stream):
        """Feed ``stream`` into done_in, take done_out under backpressure until it is quiet; returns the
        (serial, result) that left, in order, and per serial how many of the stream's completions the
        gate had taken when it left (one past the index of the one it was deciding on: to check the
        word-line property)."""
        by_serial = {x.serial: x for x in stream}
        first_out, first_in = len(self.done_out.items), len(self.taken_in)
        for x in stream:   # a gate that holds a completion forever refuses the next: a deadline, not a hang
            await with_timeout(self.done_in.send(x.payload()), 2000 * PERIOD_NS, "ns")
        while True:                                     # until nothing more leaves
            n = len(self.done_out.items)
            await ClockCycles(self.clk, 20 + self.done_out.max_gap)
            if len(self.done_out.items) == n:
                break
        taken_in = self.taken_in[first_in:]
        assert len(taken_in) == len(stream)
        out, offered_when = [], {}
        for v, t in zip(self.done_out.items[first_out:], self.done_out.times[first_out:]):
            x = unpack(PAGE_DONE, v)
            serial = x["seq"]
            assert serial in by_serial and serial not in offered_when, x
            out.append((serial, NandResult(x["result"])))
            offered_when[serial] = sum(1 for ti in taken_in if ti < t)
        return out, offered_when

    # -- issued pages and PAD requests ------------------------------------------------------------------
    async def issue(self, die, block, page, pad=False, complete=True):
        """A page the log writer took (``issued``), and (``complete``) its program's completion: a die with
        a page in flight gets no PAD."""
        await self.issued.send(pack(ISSUED, ppa=die_ppa(die, block, page), pad=int(pad)))
        if complete:
            self.serial += 1
            await self.done_in.send(Completion(10_000 + self.serial, die, block, page, pad=pad).payload())

    async def _watch_pad(self):
        """While a PAD is asked for: once offered and not taken, the request stays, for the same die."""
        d = self.dut
        offered = None
        while True:
            await FallingEdge(self.clk)
            await ReadOnly()
            valid, ready = int(d.pad__valid.value), int(d.pad__ready.value)
            die = unpack(PAD, d.pad__payload.value)["die"]
            if offered is not None:
                assert valid and die == offered, f"a PAD request for die {offered} withdrawn or changed to {die}"
            offered = die if valid and not ready and self.pad.credit > 0 else None

    async def pads_until_quiet(self, next_page, block, limit=200):
        """Play the core: ask for a PAD, and whenever one is given take it and issue a PAD page on that die.
        Returns the dies padded, in order; ``next_page`` (per die) advances."""
        padded = []
        self.dut.writer_idle.value = 1
        watch = cocotb.start_soon(self._watch_pad())
        for _ in range(limit):
            n = len(self.pad.items) + 1
            self.pad.grant(1)
            try:
                await with_timeout(self.pad.wait_for(n), (3 * PAD_IDLE + self.pad.max_gap + 2) * PERIOD_NS, "ns")
            except SimTimeoutError:
                self.pad.credit = 0         # no request for 3 x pad_idle cycles: quiet
                break
            die = unpack(PAD, self.pad.items[n - 1])["die"]
            await self.issue(die, block, next_page[die], pad=True)
            next_page[die] += 1
            padded.append(die)
        watch.kill()
        self.dut.writer_idle.value = 0
        return padded


def back_to_back(times) -> bool:
    """Two of ``times`` on consecutive clock edges."""
    return any(b - a == get_sim_steps(PERIOD_NS, "ns") for a, b in zip(times, times[1:]))


@cocotb.test()
async def lower_completions_wait_for_their_word_line(dut):
    tb = PairingTB(dut, seed=0xA11)
    for ppb in (8, 16, 64):
        await tb.reset(1, ppb)
        stream = random_stream(tb.rng, ppb)
        want, still_held = reference(stream, True, ppb)
        got, offered_when = await tb.run_gate(stream)
        assert got == [(x.serial, r) for x, r in want], f"ppb {ppb}: the gate differs from the reference"
        failed_lowers = [x for x, r in want if x.held(True, ppb) and r != NandResult.OK]
        assert failed_lowers, "the stream must fail some upper page of a held lower page"
        assert not still_held and int(dut.held.value) == 0  # whole blocks: every lower page met its upper
        # the property itself: an OK lower page leaves only once its upper page's completion is taken, and
        # before the gate takes the next one
        index = {(x.die, x.block, x.page): n for n, x in enumerate(stream)}
        results = dict(got)
        for x in stream:
            if x.held(True, ppb):
                upper = stream[index[(x.die, x.block, spec.mlc_upper_of(x.page, ppb))]]
                assert offered_when[x.serial] == index[(upper.die, upper.block, upper.page)] + 1, (ppb, x.die, x.page)
                assert results[x.serial] == upper.result, "a lower page fails with its word line"
        held_pages = sum(x.held(True, ppb) for x in stream)
        assert held_pages > len(stream) // 4, "the stream must exercise the gate"
    # the run exercised them: completions after idle gaps, held by the core, and taken back to back
    assert tb.done_in.gaps > 50 and tb.done_out.stalls > 50, (tb.done_in.gaps, tb.done_out.stalls)
    assert back_to_back(tb.done_out.times), "no two completions left on consecutive edges"


@cocotb.test()
async def a_block_cut_short_keeps_its_exposed_lower_pages(dut):
    """A die that stops before a lower page's upper page keeps that completion (it must not
    leave: the word line is not complete), at most two per die."""
    tb = PairingTB(dut, seed=7)
    ppb = 16
    await tb.reset(1, ppb)
    stream = [Completion(0, die, 3, p) for die in range(DIES) for p in range(6 + die)]
    for n, x in enumerate(stream):
        x.serial = n + 1
    want, still_held = reference(stream, True, ppb)
    got, _ = await tb.run_gate(stream)
    assert got == [(x.serial, r) for x, r in want]
    assert int(dut.held.value) == len(still_held) and 0 < len(still_held) <= 2 * DIES
    for x in still_held:  # each one's upper page was never programmed
        assert spec.mlc_upper_of(x.page, ppb) >= 6 + x.die
    assert tb.done_in.gaps and tb.done_out.stalls, (tb.done_in.gaps, tb.done_out.stalls)


@cocotb.test()
async def slc_passes_every_completion_in_order(dut):
    tb = PairingTB(dut, seed=3)
    await tb.reset(0, 16)
    stream = random_stream(tb.rng, 16, blocks=1)
    got, _ = await tb.run_gate(stream)
    assert got == [(x.serial, x.result) for x in stream] and int(dut.held.value) == 0
    assert tb.done_in.gaps and tb.done_out.stalls, (tb.done_in.gaps, tb.done_out.stalls)


@cocotb.test()
async def idle_dies_with_exposed_lower_pages_get_pads(dut):
    tb = PairingTB(dut, seed=5)
    ppb, block = 16, 5
    await tb.reset(1, ppb)
    # die 0: data on page 0 (lower; upper 2); die 1: pages 0-3 (3 is lower, upper 6);
    # die 2: pages 0-4 (4 is upper of 1; 3 exposed, upper 6); die 3: PAD on its lower page 0 only
    data_pages = {0: 1, 1: 4, 2: 5}
    next_page = [0] * DIES
    for die, n in data_pages.items():
        for p in range(n):
            await tb.issue(die, block, p)
            next_page[die] += 1
    await tb.issue(3, block, 0, pad=True)
    next_page[3] = 1
    # busy writer: no pad however long
    dut.writer_idle.value = 0
    for _ in range(3 * PAD_IDLE):
        await RisingEdge(dut.clk)
        assert not int(dut.pad__valid.value)
    # idle: pads, the lowest exposed die with no page in flight first, each die up to the upper page of its
    # last data lower page; then pre-pads: every open die whose next page is a lower page gets one there
    # (die 3 is not open yet).  A PAD's program is in flight until its completion comes back, so the order
    # across dies follows those completions: counted per die
    dut.open.value = (1 << DIES) - 1 - (1 << 3)
    dut.writer_idle.value = 1
    await ClockCycles(dut.clk, PAD_IDLE - 2)
    assert not int(dut.pad__valid.value), "a pad before pad_idle idle cycles"
    padded = await tb.pads_until_quiet(next_page, block)
    want = []
    for die, n in data_pages.items():
        last_lower = max(p for p in range(n) if is_lower(p, ppb))
        want += [die] * (spec.mlc_upper_of(last_lower, ppb) - n + 1)
    assert want == [0, 0, 1, 1, 1, 2, 2]
    want += [0, 1, 2]       # next pages 3, 7, 7: lower pages
    assert sorted(padded) == sorted(want), padded
    assert all(not is_lower(next_page[d], ppb) for d in range(DIES - 1)), "every open die waits at an upper page"
    # die 3 opens: its next page (1) is a lower page
    dut.open.value = (1 << DIES) - 1
    assert await tb.pads_until_quiet(next_page, block) == [3]
    # a lone write now lands on an upper page: complete at once, nothing exposed; one pre-pad follows
    await tb.issue(0, block, next_page[0])
    next_page[0] += 1
    assert await tb.pads_until_quiet(next_page, block) == [0]
    assert tb.pad.stalls and tb.issued.gaps, (tb.pad.stalls, tb.issued.gaps)
    # mlc off: nothing is exposed, nothing padded
    await tb.reset(0, ppb)
    await tb.issue(0, block, 0)
    assert await tb.pads_until_quiet([1, 0, 0, 0], block) == []


@cocotb.test()
async def no_pad_for_a_die_with_a_page_in_flight(dut):
    """A die whose program is still in flight gets no PAD, however long the writer idles: that page, and
    whatever the host sends next, may complete the word line with data.  Once it completes, the PAD comes."""
    tb = PairingTB(dut, seed=9)
    ppb, block = 16, 3
    await tb.reset(1, ppb)
    dut.open.value = 0b0001                           # only die 0: no pre-pad elsewhere
    await tb.issue(0, block, 0, complete=False)       # a data lower page, exposed, its program in flight
    dut.writer_idle.value = 1
    for _ in range(3 * PAD_IDLE):
        await RisingEdge(dut.clk)
        assert not int(dut.pad__valid.value), "a PAD for a die with a page in flight"
    dut.writer_idle.value = 0
    tb.serial += 1
    await tb.done_in.send(Completion(10_000 + tb.serial, 0, block, 0).payload())   # held: a lower page
    assert await tb.pads_until_quiet([1, 0, 0, 0], block) == [0, 0, 0]           # pages 1, 2 (its upper), 3
