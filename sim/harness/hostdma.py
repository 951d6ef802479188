"""Host memory behind a :class:`rtl.nvme.hostdma.HostDmaSignature` initiator port, for Amaranth pysim benches.

:class:`HostDmaModel` is what the PCIe endpoint and the host's memory are to an NVMe controller block in
a unit bench: it takes the block's requests one at a time, answers reads from a
:class:`~atomflash.hostmem.HostMemory` and stores writes into it, with seeded random timing so a block
that counts on a fixed latency fails.  Use it like this::

    memory = HostMemory()
    host = HostDmaModel(dut.dma, memory, seed=1)
    sim.add_process(host.process)
    ...
    memory.refuse(page)             # accesses to that page now end with an error

Timing (all drawn from ``seed``): ``req.ready`` is held low ``backpressure`` of the cycles while the
model is free (it never takes a request before the previous one's ``done`` was taken); a read's first
word comes 0..``max_latency`` cycles after its request, then each word after a gap of 1..``max_gap``
idle cycles with probability ``gap``; a write's words are each taken after 1..``max_gap`` cycles of
``ready`` low with probability ``gap``; ``done`` comes 0..``max_gap`` cycles after the last word.
A word or ``done`` once offered stays offered until taken, as streams require.  The model alone drives
``req.ready``, ``wdata.ready``, ``rdata`` and ``done`` (it tells pysim of changes only).

Checks, each failing the simulation with :class:`HostDmaViolation` (an ``AssertionError``) naming the
request: ``addr`` dword aligned; ``bytes`` a multiple of 4 from 4 to 4096; no 4 KiB boundary crossed;
a write's words exactly ``bytes / 4`` with ``last`` on the final one and only there.

Refused pages (:meth:`HostMemory.refuse`): a read of one returns poison words (so an initiator that
trusts them shows it) with ``error`` on the final word and on ``done``; a write to one stores nothing
and ends with ``done.error``.  Since no request crosses a page, a request is refused whole or not at
all.  The refusal is decided when the request is taken (a write whose page is refused while its words
come is refused too).

Counters for benches: ``requests``, ``reads``/``writes`` (requests of each kind), ``bytes_read``,
``bytes_written``, ``refused``, and ``log``: every request taken, as :class:`DmaRequest`.
``busy`` is true from a request's acceptance until its ``done`` is taken.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field

from amaranth import Cat

from atomflash.hostmem import PAGE, HostMemory, HostMemoryError
from rtl.nvme.hostdma import DONE, REQUEST, WORD

__all__ = ["HostDmaModel", "HostDmaViolation", "DmaRequest"]

MAX_BYTES = 4096
POISON = 0xDEADBEEF


class HostDmaViolation(AssertionError):
    """The initiator broke the HostDmaSignature protocol."""


@dataclass
class DmaRequest:
    """One request as the model took it."""
    write: bool
    addr: int
    bytes: int
    refused: bool = False
    words: list[int] = field(default_factory=list, repr=False)   # read: the words to send; write: received

    def __str__(self):
        return f"{'write' if self.write else 'read'} of {self.bytes} bytes at {self.addr:#x}"


class HostDmaModel:
    """Answers the HostDmaSignature initiator port ``port`` from ``memory``; see the module docstring.

    Parameters
    ----------
    port
        The initiator's port (e.g. ``dut.dma``): ``req``, ``wdata``, ``rdata``, ``done``.
    memory : HostMemory
        What the host holds (a fresh one when omitted).
    seed : int
        Seeds every random timing choice.
    max_latency : int
        Most idle cycles between a read request and its first word.
    gap, max_gap : float, int
        The share of words (read words offered, write words taken) that wait 1..``max_gap`` cycles.
    backpressure : float
        The share of free cycles with ``req.ready`` low.
    """

    def __init__(self, port, memory: HostMemory | None = None, *, seed: int = 0, max_latency: int = 12,
                 gap: float = 0.25, max_gap: int = 3, backpressure: float = 0.25):
        self.port = port
        self.memory = memory if memory is not None else HostMemory()
        self.rng = random.Random(seed)
        self.max_latency, self.gap, self.max_gap, self.backpressure = max_latency, gap, max_gap, backpressure
        self.requests = self.reads = self.writes = self.bytes_read = self.bytes_written = self.refused = 0
        self.log: list[DmaRequest] = []
        self._current: DmaRequest | None = None
        self._next_word = 0          # read: the index of the word offered or next to offer; write: received
        self._wait = 0               # idle cycles before the next word or done is offered
        self._done_due = False       # every word moved: done is next
        self._outputs: dict = {}     # the signals the model drives, by name
        self._shown: dict = {}       # their values as last set

    @property
    def busy(self) -> bool:
        return self._current is not None

    # -- the protocol's rules -----------------------------------------------------------------------
    def _violation(self, what: str, request: DmaRequest | None = None):
        raise HostDmaViolation(f"host DMA: {what}" + (f" ({request})" if request else ""))

    def _take_request(self, write: int, addr: int, nbytes: int) -> None:
        r = DmaRequest(bool(write), addr, nbytes)
        if addr % 4:
            self._violation("address not dword aligned", r)
        if nbytes % 4 or not 4 <= nbytes <= MAX_BYTES:
            self._violation("bytes not a multiple of 4 from 4 to 4096", r)
        if addr % PAGE + nbytes > PAGE:
            self._violation("request crosses a 4 KiB boundary", r)
        self.requests += 1
        self.log.append(r)
        if addr // PAGE in self.memory.refused:
            r.refused = True
            self.refused += 1
        if write:
            self.writes += 1
        else:
            self.reads += 1
            if r.refused:
                r.words = [POISON] * (nbytes // 4)
            else:
                raw = self.memory.read(addr, nbytes)
                r.words = [int.from_bytes(raw[i:i + 4], "little") for i in range(0, nbytes, 4)]
                self.bytes_read += nbytes
        self._current, self._next_word, self._done_due = r, 0, False
        self._wait = self._stall() if write else self.rng.randint(0, self.max_latency)

    def _take_write_word(self, data: int, last: int) -> None:
        r = self._current
        final = self._next_word == r.bytes // 4 - 1
        if last and not final:
            self._violation(f"last on write word {self._next_word + 1} of {r.bytes // 4}", r)
        if final and not last:
            self._violation(f"write word {self._next_word + 1} of {r.bytes // 4} without last", r)
        r.words.append(data)
        self._next_word += 1
        if not final:
            self._wait = self._stall()
            return
        if not r.refused:
            try:
                self.memory.write(r.addr, b"".join(w.to_bytes(4, "little") for w in r.words))
                self.bytes_written += r.bytes
            except HostMemoryError:         # refused while the words came
                r.refused = True
                self.refused += 1
        self._words_moved()

    def _words_moved(self) -> None:
        self._done_due = True
        self._wait = self.rng.randint(0, self.max_gap)

    def _stall(self) -> int:
        return self.rng.randint(1, self.max_gap) if self.rng.random() < self.gap else 0

    # -- the process --------------------------------------------------------------------------------
    async def process(self, ctx):
        """The model's pysim process: ``sim.add_process(model.process)``."""
        req, wdata, rdata, done = self.port.req, self.port.wdata, self.port.rdata, self.port.done
        # one sample of every handshake bit and one of each payload: pysim's cost is per value sampled
        handshakes = Cat(req.valid, req.ready, wdata.valid, wdata.ready, rdata.valid, rdata.ready,
                         done.valid, done.ready)
        self._outputs = {"req_ready": req.ready, "wdata_ready": wdata.ready, "rdata_valid": rdata.valid,
                         "rdata_payload": rdata.payload.as_value(), "done_valid": done.valid,
                         "done_payload": done.payload.as_value()}
        self._show(ctx, "req_ready", 0)
        async for _, _, hs, q, w in ctx.tick().sample(handshakes, req.payload.as_value(), wdata.payload.as_value()):
            # what moved on this edge
            if hs & 0xC0 == 0xC0:
                self._current = None
            if hs & 0x03 == 0x03:
                self._take_request(_field(REQUEST, q, "write"), _field(REQUEST, q, "addr"), _field(REQUEST, q, "bytes"))
            if hs & 0x30 == 0x30:
                self._next_word += 1
                if self._next_word == len(self._current.words):
                    self._words_moved()
                else:
                    self._wait = self._stall()
            if hs & 0x0C == 0x0C:
                self._take_write_word(_field(WORD, w, "data"), _field(WORD, w, "last"))
            self._drive(ctx, hs & 0x30 == 0x10, hs & 0xC0 == 0x40)

    def _show(self, ctx, output: str, value: int) -> None:
        """Drive ``output`` to ``value``; pysim is only told of changes."""
        if self._shown.get(output) != value:
            self._shown[output] = value
            ctx.set(self._outputs[output], value)

    def _drive(self, ctx, word_offered: bool, done_offered: bool) -> None:
        """The outputs for the next cycle; a word or done still offered stays as it is."""
        r = self._current
        self._show(ctx, "req_ready", int(r is None and self.rng.random() >= self.backpressure))
        self._show(ctx, "wdata_ready", 0)
        if done_offered or word_offered:
            return
        self._show(ctx, "rdata_valid", 0)
        self._show(ctx, "done_valid", 0)
        if r is None:
            return
        if self._wait:
            self._wait -= 1
        elif self._done_due:
            self._show(ctx, "done_payload", _pack(DONE, error=r.refused))
            self._show(ctx, "done_valid", 1)
        elif r.write:
            self._show(ctx, "wdata_ready", 1)
        else:
            final = self._next_word == len(r.words) - 1
            self._show(ctx, "rdata_payload",
                       _pack(WORD, data=r.words[self._next_word], last=final, error=final and r.refused))
            self._show(ctx, "rdata_valid", 1)


def _field(layout, value: int, name: str) -> int:
    f = layout[name]
    return (value >> f.offset) & ((1 << f.width) - 1)


def _pack(layout, **fields) -> int:
    return sum(int(v) << layout[k].offset for k, v in fields.items())
