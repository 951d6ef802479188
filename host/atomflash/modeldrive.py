"""A drive on the reference model: :class:`ModelDrive` has the
:class:`atomflash.device.Device` verbs a host file layer uses (``read``,
``write``, ``trim``, ``flush``, ``atomic_write``, transactions, ``stats``) and
runs them through :class:`atomflash.model.LogFTL`, the reference log writer:
the pages it programs are the commit-flag log's (atomic groups with no extra
page, a transaction committed by its final page, TRIM records), with greedy GC
(a checkpoint, then the erasable block with the fewest needed versions) when
fewer than ``gc_free_blocks`` blocks are erased.

Counts (``stats()``, the names of the device's GET_LOG page): host pages
written and read, NAND programs (host pages, record pages, GC copies), NAND
reads, erases, GC victims and copies.  Time is simulated with
:class:`Timing` (every command in turn, as SQLite issues them: queue depth 1):
``uptime_cycles`` at ``spec.NAND_CLK_HZ``.

``keep_stream=True`` keeps LogFTL's program stream, so :meth:`cut` can lose
power after any of its entries and :meth:`recovered` builds the drive that
``atomflash.model.recover`` says survives.
"""

from __future__ import annotations

import itertools
import math
import random
from dataclasses import dataclass
from types import SimpleNamespace

from . import errors, spec
from .model import Flash, Limits, LogFTL, recover
from .spec import Kind

__all__ = ["Timing", "ModelDrive"]


@dataclass(frozen=True)
class Timing:
    """What a command costs in simulated time (ns), from a NAND profile: array times, the page
    moving over the NAND bus and the host link (``ns_per_byte`` each way), a fixed per-command cost;
    programs and reads of one command spread over ``dies``; GC in the foreground (copies read and
    programmed over the dies, then the erase)."""

    t_r: int
    t_prog: int
    t_bers: int
    dies: int
    page_bytes: int
    ns_per_byte: float = 10.0     # 100 MB/s: an ONFI mode-4 bus, and a host link of the same rate
    command_ns: int = 5_000       # host and firmware work per command

    @classmethod
    def from_profile(cls, profile: str = "small", dies: int = 4, **kw) -> "Timing":
        p = spec.NAND_PROFILES[profile]
        return cls(p.t_r_ns, p.t_prog_ns, p.t_bers_ns, dies, p.page_data, **kw)

    def xfer(self, pages: int) -> float:
        return pages * self.page_bytes * self.ns_per_byte

    def write(self, host_pages: int, programs: int) -> float:
        return self.command_ns + 2 * self.xfer(host_pages) + math.ceil(programs / self.dies) * self.t_prog

    def read(self, pages: int) -> float:
        return self.command_ns + 2 * self.xfer(pages) + math.ceil(pages / self.dies) * self.t_r

    def gc(self, copies: int) -> float:
        return math.ceil(copies / self.dies) * (self.t_r + self.t_prog) + 2 * self.xfer(copies) / self.dies \
            + self.t_bers


class ModelDrive:
    """A Device-like drive on :class:`LogFTL`.  ``blocks`` erase blocks of ``pages_per_block``
    pages of ``lba_size`` bytes; ``capacity`` LBAs (default: all but the over-provisioning,
    ``spec.LIMITS.OVER_PROVISION_PERCENT``); limits default to ``spec.LIMITS``."""

    def __init__(self, blocks: int = 64, *, pages_per_block: int = 64, lba_size: int = 2048,
                 capacity: int | None = None, profile: str = "small", dies: int = 4, gc_free_blocks: int = 3,
                 keep_stream: bool = False, timing: Timing | None = None, seed: int = 0, **limits):
        if capacity is None:
            capacity = blocks * pages_per_block * (100 - spec.LIMITS.OVER_PROVISION_PERCENT) // 100
        self.limits = Limits(capacity=capacity, lba_size=lba_size, **limits)
        self.flash = Flash(blocks, pages_per_block)
        self.ftl = LogFTL(self.limits, self.flash)
        self.keep_stream = keep_stream
        self.gc_free_blocks = gc_free_blocks
        self.timing = timing or Timing.from_profile(profile, dies)
        self.rng = random.Random(seed)
        L = self.limits
        self.info = SimpleNamespace(
            magic=spec.IDENTIFY_MAGIC, capacity=L.capacity, lba_size=L.lba_size, max_transfer=L.max_transfer,
            max_atomic_pages=L.max_atomic_pages, max_open_tx=L.max_open_tx, max_pending=L.max_pending,
            max_remap_triples=L.max_remap_triples, max_appends=L.max_appends, awupf=L.max_atomic_pages,
            volatile_cache=0, pages_per_block=pages_per_block, blocks=blocks)
        self.lba_size, self.capacity = L.lba_size, L.capacity
        self._tids = itertools.count(1)
        self._seen = 0
        self.origin = 0               # the stream's first entry a cut may follow (after a restart's setup)
        self.boundaries = [0]         # stream length after each command completed (keep_stream)
        self.counters = dict(host_write_pages=0, host_read_pages=0, nand_programs=0, nand_reads=0, nand_erases=0,
                             gc_victims=0, gc_copies=0, record_pages=0, ckpt_pages=0, checkpoints=0, flushes=0,
                             commands=0)   # ckpt_pages: the model's checkpoints take no flash page
        self.time_ns = 0.0

    # -- bookkeeping ----------------------------------------------------------------
    def _drain(self) -> int:
        """Count what LogFTL issued since the last call; returns the pages programmed."""
        new = self.ftl.stream[self._seen:]
        programs = 0
        for e in new:
            if e.kind == "program":
                programs += 1
                kind = spec.OOB.unpack(e.oob).kind
                if kind in (Kind.COMMIT, Kind.REMAP, Kind.TRIM):
                    self.counters["record_pages"] += 1
            elif e.kind == "erase":
                self.counters["nand_erases"] += 1
            elif e.kind == "checkpoint":
                self.counters["checkpoints"] += 1
        self.counters["nand_programs"] += programs
        if self.keep_stream:
            self._seen = len(self.ftl.stream)
        else:
            self.ftl.stream.clear()
            self.ftl.sem.history.clear()
            self._seen = 0
        return programs

    def _check(self, c, what: str):
        if not c.ok:
            errors.check(int(c.status), what)
        return c

    def _after_write(self, host_pages: int) -> None:
        programs = self._drain()
        self.counters["host_write_pages"] += host_pages
        self.counters["commands"] += 1
        self.time_ns += self.timing.write(host_pages, programs)
        self._gc()
        if self.keep_stream:
            self.boundaries.append(len(self.ftl.stream))

    def _valid(self, block: int, keep: set) -> int:
        ppb, ftl, n = self.flash.pages_per_block, self.ftl, 0
        for addr in range(block * ppb, (block + 1) * ppb):
            got = ftl.phys.get(addr)
            if got is not None:
                f = got[0]
                if f["kind"] in (Kind.DATA, Kind.GC_COPY, Kind.APPEND) and f["vseq"] in keep \
                        and ftl.loc.get(f["vseq"]) == addr:
                    n += 1
        return n

    def _gc(self) -> None:
        ftl = self.ftl
        rounds = 0
        while len(ftl.free) < self.gc_free_blocks:
            rounds += 1
            if rounds > self.flash.nblocks:
                raise errors.BY_STATUS[spec.Status.NO_SPACE](
                    "model drive full: GC cannot free a block (more live data than the flash holds)")
            ftl.checkpoint()
            cands = ftl.gc_candidates()
            if not cands:
                break
            keep = ftl._needed()
            victim = min(cands, key=lambda b: (self._valid(b, keep), b))
            before = ftl.gc_copies
            ftl.gc(victim)
            copies = ftl.gc_copies - before
            self.counters["gc_victims"] += 1
            self.counters["gc_copies"] += copies
            self.counters["nand_reads"] += copies
            self._drain()
            self.time_ns += self.timing.gc(copies)

    # -- the Device verbs -------------------------------------------------------------
    def _blocks(self, data: bytes) -> int:
        if not data or len(data) % self.lba_size:
            raise errors.InvalidArgument(f"data must be a whole number of {self.lba_size}-byte blocks")
        return len(data) // self.lba_size

    def read(self, lba: int, nlb: int = 1) -> bytes:
        c = self._check(self.ftl.read(lba, nlb), f"read lba {lba} x {nlb}")
        self.counters["host_read_pages"] += nlb
        self.counters["nand_reads"] += nlb
        self.counters["commands"] += 1
        self.time_ns += self.timing.read(nlb)
        return c.data

    def write(self, lba: int, data: bytes, *, fua: bool = False) -> None:
        n = self._blocks(data)
        self._check(self.ftl.write(lba, bytes(data)), f"write lba {lba} x {n}")
        self._after_write(n)

    def trim(self, lba: int, nlb: int = 1) -> None:
        self._check(self.ftl.trim(lba, nlb), f"trim lba {lba} x {nlb}")
        self._after_write(0)

    def flush(self) -> None:
        self.ftl.flush()
        self.counters["flushes"] += 1
        self.counters["commands"] += 1
        self.time_ns += self.timing.command_ns

    def hint(self, hint) -> None:
        self.ftl.hint(int(hint))
        self.counters["commands"] += 1

    def atomic_write(self, entries) -> None:
        entries = [(lba, bytes(b)) for lba, b in entries]
        self._check(self.ftl.atomic_write(entries), f"atomic write of {len(entries)} blocks")
        self._after_write(len(entries))

    def new_tid(self) -> int:
        return next(self._tids)

    def tx_write(self, tid: int, lba: int, data: bytes, *, final: bool = False) -> None:
        n = self._blocks(data)
        self._check(self.ftl.tx_write(tid, lba, bytes(data), final=final), f"tx write tid {tid} lba {lba} x {n}")
        self._after_write(n)

    def tx_read(self, tid: int, lba: int, nlb: int = 1) -> bytes:
        return self._check(self.ftl.tx_read(tid, lba, nlb), f"tx read tid {tid}").data

    def tx_commit(self, tid: int) -> None:
        self._check(self.ftl.tx_commit(tid), f"tx commit tid {tid}")
        self._after_write(0)

    def tx_abort(self, tid: int) -> None:
        self._check(self.ftl.tx_abort(tid), f"tx abort tid {tid}")
        self.counters["commands"] += 1

    def stats(self, **_) -> dict:
        """The counters under the GET_LOG page's names; ``uptime_cycles`` is the simulated time."""
        return dict(self.counters, uptime_cycles=int(self.time_ns * spec.NAND_CLK_HZ / 1e9),
                    clk_hz=spec.NAND_CLK_HZ, time_ns=self.time_ns, free_blocks=len(self.ftl.free))

    def close(self) -> None:
        pass

    # -- power cuts ----------------------------------------------------------------------
    def stream_len(self) -> int:
        return len(self.ftl.stream)

    def cut(self, k: int | None = None) -> dict[int, bytes]:
        """Power lost after ``k`` issued entries of the stream (``keep_stream``): what recovery keeps,
        {lba: block}.  The host issues one command at a time and waits for it, so what can be in flight
        is the entries of the command that was running (each done, missing or torn at random);
        everything before it completed, and a completed command is durable (no volatile cache)."""
        assert self.keep_stream, "ModelDrive(keep_stream=True) to cut power"
        import bisect

        k = len(self.ftl.stream) if k is None else k
        started = self.boundaries[bisect.bisect_right(self.boundaries, k) - 1]
        c = self.ftl.cut(k, window=k - started, rng=self.rng)
        return recover(c.pages, c.checkpoint).contents()

    def completed_before(self, k: int) -> int:
        """The stream length when the last command completed before a cut after ``k`` entries."""
        import bisect

        return self.boundaries[bisect.bisect_right(self.boundaries, k) - 1]

    def recovered(self, contents: dict[int, bytes], **kw) -> "ModelDrive":
        """A drive like this one holding ``contents`` (the restart after a cut); its counts start at 0."""
        d = ModelDrive(self.flash.nblocks, pages_per_block=self.flash.pages_per_block, lba_size=self.lba_size,
                       capacity=self.capacity, keep_stream=self.keep_stream, timing=self.timing,
                       gc_free_blocks=self.gc_free_blocks, max_transfer=self.limits.max_transfer,
                       max_atomic_pages=self.limits.max_atomic_pages, max_open_tx=self.limits.max_open_tx,
                       max_pending=self.limits.max_pending, **kw)
        for lba in sorted(contents):
            if any(contents[lba]):
                d.ftl.write(lba, contents[lba])
                d._drain()
                d._gc()
        d.ftl.checkpoint()
        d._drain()
        d._seen = d.origin = len(d.ftl.stream) if d.keep_stream else 0
        d.boundaries = [d.origin]
        for k in d.counters:
            d.counters[k] = 0
        d.time_ns = 0.0
        return d
