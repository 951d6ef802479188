"""cocotb drivers for amaranth.lib.stream ports flattened into harness signals
``<name>_valid``, ``<name>_ready``, ``<name>_payload`` (or the top-level port
names ``<name>__valid`` ...).  Python wakes only on handshakes, never per idle
cycle.

Like Forencich's benches, a source can insert idle cycles before a payload
(``idle``: the share of payloads that wait 1-``max_gap`` cycles first) and a
sink can hold ``ready`` low (``backpressure``: the share of payloads it
takes only after 1-``max_gap`` cycles), from a seeded generator, so a design
that loses or reorders data under stalls fails the bench that uses them."""

from __future__ import annotations

import random

import cocotb
from cocotb.triggers import ClockCycles, Event, FallingEdge, ReadOnly, RisingEdge
from cocotb.utils import get_sim_time


def _sig(dut, name, part):
    # Amaranth's ports first: a design may also hold an internal signal named "<name>_<part>"
    for sep in ("__", "_"):
        if hasattr(dut, f"{name}{sep}{part}"):
            return getattr(dut, f"{name}{sep}{part}")
    raise AttributeError(f"{dut._name} has no {name}_{part}")


def _check_share(name: str, share: float) -> None:
    if not 0.0 <= share < 1.0:
        raise ValueError(f"{name} {share} is not a share in [0, 1)")


class StreamSource:
    """Drives a stream into the design, one payload (an int) at a time; ``idle`` of them after a gap."""

    def __init__(self, dut, name: str, clk, *, idle: float = 0.0, max_gap: int = 4, seed: int = 0):
        _check_share("idle", idle)
        self.valid, self.ready, self.payload = (_sig(dut, name, p) for p in ("valid", "ready", "payload"))
        self.clk = clk
        self.idle, self.max_gap, self.rng = idle, max_gap, random.Random(seed)
        self.gaps = 0                           # payloads sent after an idle gap
        self.valid.value = 0

    async def send(self, payload: int) -> None:
        if self.idle and self.rng.random() < self.idle:
            self.gaps += 1
            await ClockCycles(self.clk, self.rng.randint(1, self.max_gap), rising=False)
        self.payload.value = payload
        self.valid.value = 1
        while True:
            await ReadOnly()
            if int(self.ready.value):
                await RisingEdge(self.clk)      # the handshake happens on this edge
                break
            await RisingEdge(self.ready)
        await FallingEdge(self.clk)
        self.valid.value = 0


class StreamSink:
    """Ready a cycle after valid (``backpressure`` of the payloads a gap later); collects every payload
    (an int) in ``items``, and in ``times`` the simulation time (in steps) of the clock edge that took
    it, so a bench can order what several sinks took."""

    def __init__(self, dut, name: str, clk, *, backpressure: float = 0.0, max_gap: int = 4, seed: int = 0):
        _check_share("backpressure", backpressure)
        self.valid, self.ready, self.payload = (_sig(dut, name, p) for p in ("valid", "ready", "payload"))
        self.clk = clk
        self.backpressure, self.max_gap, self.rng = backpressure, max_gap, random.Random(seed)
        self.stalls = 0                         # payloads taken after holding ready low
        self.items: list[int] = []
        self.times: list[int] = []
        self.event = Event()
        self.ready.value = 0
        cocotb.start_soon(self._run())

    async def _run(self):
        while True:
            if not int(self.valid.value):
                await RisingEdge(self.valid)
            await FallingEdge(self.clk)
            if self.backpressure and self.rng.random() < self.backpressure:
                self.stalls += 1
                await ClockCycles(self.clk, self.rng.randint(1, self.max_gap), rising=False)
            payload = int(self.payload.value)
            self.ready.value = 1
            await RisingEdge(self.clk)
            taken = get_sim_time()
            await FallingEdge(self.clk)
            self.ready.value = 0
            self.items.append(payload)
            self.times.append(taken)
            self.event.set()

    async def wait_for(self, n: int) -> list[int]:
        while len(self.items) < n:
            self.event.clear()
            await self.event.wait()
        return self.items


class SettledStreamSink(StreamSink):
    """A :class:`StreamSink` for an output whose ``valid`` follows an input combinationally (a
    pass-through fed by a :class:`StreamSource`).  That source writes ``valid`` on the same falling
    edge where a sink decides, and a write shows only once the edge's writes settle, so a plain sink
    can read the stale ``valid`` of the payload it just took and take it again; this one raises
    ``ready``, reads ``valid`` and the payload settled (ReadOnly), and takes nothing when ``valid`` is
    low then."""

    async def _run(self):
        while True:
            if not int(self.valid.value):
                await RisingEdge(self.valid)
            await FallingEdge(self.clk)
            if self.backpressure and self.rng.random() < self.backpressure:
                self.stalls += 1
                await ClockCycles(self.clk, self.rng.randint(1, self.max_gap), rising=False)
            self.ready.value = 1
            await ReadOnly()
            took, payload = int(self.valid.value), int(self.payload.value)
            await RisingEdge(self.clk)
            taken = get_sim_time()
            await FallingEdge(self.clk)
            self.ready.value = 0
            if took:
                self.items.append(payload)
                self.times.append(taken)
                self.event.set()


class FullRateStreamSink(StreamSink):
    """A :class:`StreamSink` that keeps ``ready`` high through a burst, so it takes payloads on
    consecutive clock edges, the design's full rate (a plain sink takes at most one payload every other
    cycle).  ``backpressure`` of its attempts first hold ``ready`` low for 1-``max_gap`` cycles; ``stalls``
    counts those that held back a valid payload.  Like :class:`SettledStreamSink` it raises ``ready`` on
    a falling edge and reads ``valid`` and the payload settled (ReadOnly), so it also suits an output that
    follows an input combinationally.

    With ``credit`` (an int) it takes only that many payloads, and as many more as :meth:`grant` adds: for
    a stream the design offers before anyone asks (an allocator's next page, a request for a PAD page),
    the bench decides how many it takes.  Lowering ``credit`` stops it from the next falling edge on."""

    def __init__(self, dut, name: str, clk, *, credit: int | None = None, **kw):
        self.credit = credit
        self._granted = Event()
        super().__init__(dut, name, clk, **kw)

    def grant(self, n: int = 1) -> None:
        """``n`` more payloads to take (a sink made with ``credit``)."""
        if self.credit is None:
            raise ValueError("grant() on a sink without credit")
        self.credit += n
        self._granted.set()

    def _may_take(self) -> bool:
        return self.credit is None or self.credit > 0

    async def _run(self):
        await FallingEdge(self.clk)
        while True:                             # on a falling edge, ready low
            if not self._may_take():
                self._granted.clear()
                await self._granted.wait()
                await FallingEdge(self.clk)
            elif not int(self.valid.value):
                await RisingEdge(self.valid)
                await FallingEdge(self.clk)
            else:
                await self._burst()

    async def _burst(self):
        """From a falling edge: take payloads while they come back to back (and credit lasts); returns on
        the falling edge after the first attempt that took none, ``ready`` low again."""
        while self._may_take():
            if self.backpressure and self.rng.random() < self.backpressure:
                self.ready.value = 0
                held = False
                for _ in range(self.rng.randint(1, self.max_gap)):
                    await ReadOnly()
                    held |= bool(int(self.valid.value))
                    await FallingEdge(self.clk)
                self.stalls += held
            self.ready.value = 1
            await ReadOnly()
            took, payload = int(self.valid.value), int(self.payload.value)
            await RisingEdge(self.clk)
            if took:
                self.items.append(payload)
                self.times.append(get_sim_time())
                if self.credit is not None:
                    self.credit -= 1
                self.event.set()
            await FallingEdge(self.clk)
            if not took:
                break
        self.ready.value = 0


class SettledStreamSource(StreamSource):
    """A :class:`StreamSource` that decides each transfer on ``ready`` as it stands after the falling edge
    before the clock edge that would take the payload.  A plain source that sees ``ready`` rise on a rising
    edge (from the design's state) counts the transfer at the next edge without looking again, so when a
    sink lowers ``ready`` on the falling edge in between (a pass-through, whose ``ready`` is its output
    sink's, under backpressure) it counts a transfer that did not happen and moves on to its next
    payload; for such a pass-through, use this one."""

    async def send(self, payload: int) -> None:
        if self.idle and self.rng.random() < self.idle:
            self.gaps += 1
            await ClockCycles(self.clk, self.rng.randint(1, self.max_gap), rising=False)
        self.payload.value = payload
        self.valid.value = 1
        while True:
            await ReadOnly()
            if int(self.clk.value):             # before the falling edge: ready may still change
                await FallingEdge(self.clk)
            elif int(self.ready.value):
                await RisingEdge(self.clk)      # the handshake happens on this edge
                break
            else:
                await RisingEdge(self.ready)
        await FallingEdge(self.clk)
        self.valid.value = 0
