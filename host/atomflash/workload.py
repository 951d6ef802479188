"""Scoreboarded workloads against a real (or simulated) device, judged after a
power cut by the semantic model's oracle.

:class:`Recorder` sends every command to a :class:`~atomflash.device.Device`
(or to several, one per host queue of the same device) *and* to an
:class:`~atomflash.model.Model` with ``auto_complete=False``: an op the model
records stays "in flight" from its submission until the device completes the
command, so after a power cut the model's history says exactly what the host
was promised (acknowledged ops must survive, in-flight ones may or may not,
atomic ones all-or-nothing).  A device answer that differs from the model's
(status, read data, an append's token validity) is a :class:`Mismatch`,
except NO_SPACE where the model said SUCCESS: the model knows nothing of
flash space, so that is :class:`OutOfSpace` -- the device refused the
command and changed nothing, which the model's history already allows (the
op stays unacknowledged), and the workload cannot go on.

:func:`random_workload` mixes plain writes (several in flight), atomic groups,
transactions (TX_COMMIT, the final-write commit, aborts), appends with remaps
and releases, trims and flushes, over ``span`` LBAs; every block it writes is
unique (op number and LBA stamped in), so the oracle can tell them apart.
With several queues it runs one such stream per queue, interleaved: each
queue's next command is submitted as soon as it may be, so commands are in
flight on several queues at once.

Several queues, one model
-------------------------

The model applies each command when it is submitted, in submission order;
the device runs commands on different queues in an order the host does not
know (the front-end fetches round-robin, completions come in any order).
So the Recorder only lets commands be in flight together when every order
gives the same statuses, read data and final contents
(:meth:`Recorder.conflicts`): no shared LBA (written, staged, committed,
remapped or read), no shared transaction id or token, and room in the
limited resources (pending-table entries, append slots, open transactions)
even if every command in flight that frees some ran after this one -- a
command that needs more than that room runs alone (``exclusive``).  Then
the model's state is the device's in whatever order the device ran them.
The oracle sees the concurrency through the ops' ``issued``/``completed``
ticks: two ops in flight at the same time are ordered neither way
(``model.precedes``), so after a cut either may be the newer.  A FLUSH makes
durable the ops that had completed when it was submitted (those completed
while it ran on another queue are not covered).

:func:`verify` reads the span back and returns the oracle's violations; the
demo and the power-fault campaign both use it, and a test hands it a
deliberately corrupted read to prove it can fail.
"""

from __future__ import annotations

import random
import struct
from dataclasses import dataclass, field
from typing import Callable, Iterator, Mapping, Sequence

from .model import Limits, Model
from .model.oracle import Violation, check_after_cut
from .spec import Status

__all__ = ["Recorder", "Pending", "Mismatch", "OutOfSpace", "random_workload", "interleaved_workload", "read_span", "verify",
           "WorkloadCounts"]


class Mismatch(AssertionError):
    """The device answered differently from the semantic model."""


class OutOfSpace(RuntimeError):
    """The device refused a command with NO_SPACE (spec ``NoSpace``): it is out of good blocks or GC is
    stuck.  The command's op is left unacknowledged in the model (a refused command changes nothing)."""


@dataclass
class WorkloadCounts:
    writes: int = 0
    atomic: int = 0
    tx_committed: int = 0
    tx_final: int = 0
    tx_aborted: int = 0
    appends: int = 0
    remaps: int = 0
    releases: int = 0
    trims: int = 0
    flushes: int = 0
    pages: int = 0
    commands: int = 0          # workload steps (a step may be several device commands)
    refused: dict = field(default_factory=dict)
    issued: int = 0            # device commands submitted through the Recorder
    per_queue: dict = field(default_factory=dict)   # queue index -> device commands submitted
    overlapped: int = 0        # commands submitted while another queue had one in flight
    max_in_flight: int = 0     # most commands in flight at once (all queues)


_RESOURCES = ("pending", "appends", "tx")


@dataclass(eq=False)
class Pending:
    """One command submitted through the :class:`Recorder`: the device's
    ``cmd`` (None until it reached the transport), the model's ``comp``, what
    it touches, and what the model freed for it (``frees``: resource -> amount)."""

    q: int
    what: str
    comp: object
    lbas: frozenset = frozenset()
    tids: frozenset = frozenset()
    tokens: frozenset = frozenset()
    frees: dict = field(default_factory=dict)
    need: dict = field(default_factory=dict)
    exclusive: bool = False
    then: Callable | None = None
    cmd: object = None
    settled: bool = False


class Recorder:
    """Mirror of every command in a model; completes the model's ops on the device's completions.

    ``devs``: a :class:`~atomflash.device.Device`, or several on one device
    (one per host queue: ``Device.attach_sim_all``); queue ``q`` below is an
    index into them.  The blocking verbs (:meth:`write`, :meth:`atomic`, ...)
    work one command at a time (writes may stay in flight) on queue ``q``
    (default 0); :meth:`issue` submits without waiting, on any queue, and
    :meth:`conflicts` says whether it may yet."""

    def __init__(self, devs, *, initial: Mapping[int, bytes] | None = None):
        self.devs = list(devs) if isinstance(devs, (list, tuple)) else [devs]
        if not self.devs:
            raise ValueError("a Recorder needs at least one Device")
        self.dev = self.devs[0]
        info = self.dev.info
        self.model = Model(Limits.from_identify(info), cache=info.volatile_cache > 0, auto_complete=False,
                           initial=initial)
        self.pending: list[Pending] = []   # submitted, not settled (in submission order)
        self.tokens: dict[int, int] = {}   # device token -> model token
        self.counts = WorkloadCounts()

    # -- plumbing --------------------------------------------------------------
    @property
    def in_flight_ops(self):
        return [op for p in self.pending for op in p.comp.ops]

    def in_flight(self, q: int | None = None) -> int:
        """Commands submitted and not settled (on queue ``q``, or all)."""
        return sum(1 for p in self.pending if q is None or p.q == q)

    def settle(self) -> None:
        """Check and complete, in the model, every command the device completed."""
        keep = []
        for i, p in enumerate(self.pending):
            if p.cmd is not None and p.cmd.done:
                if p.cmd.status is None:   # no completion: the link was lost (a power cut), seen first here
                    self.pending = keep + self.pending[i:]
                    raise p.cmd.error
                self._finish(p)
            else:
                keep.append(p)
        self.pending = keep

    def _finish(self, p: Pending) -> None:
        if p.cmd.status == Status.NO_SPACE and p.comp.status == Status.SUCCESS:
            raise OutOfSpace(f"{p.what}{self._on(p.q)}: the device is out of space")
        if p.cmd.status != p.comp.status:
            raise Mismatch(f"{p.what}{self._on(p.q)}: device {p.cmd.status.name}, model {p.comp.status.name}")
        for op in p.comp.ops:
            self.model.complete(op)
        p.settled = True
        if p.then is not None:
            p.then(p)

    def _on(self, q: int) -> str:
        return f" (queue {self.devs[q].qid})" if len(self.devs) > 1 else ""

    def poll(self, block: bool = False) -> None:
        """Collect completions on every queue and settle them (``block``: wait for one)."""
        from .device import Device

        Device.poll_any(self.devs, block=block)
        self.settle()

    def wait(self, p: Pending) -> Pending:
        while not p.settled:
            if p.cmd is None:
                raise RuntimeError(f"{p.what}: never reached the device")
            self.poll(block=True)
        return p

    def drain(self) -> None:
        """Until nothing is in flight on any queue."""
        while self.pending:
            self.poll(block=True)

    # -- what a command touches, and whether it may be submitted now -----------
    def footprint(self, verb: str, *args, **kw) -> dict:
        """What ``verb(*args)`` touches: ``lbas``, ``tids``, ``tokens``, and the
        most it may take of each resource (``need``)."""
        n = self.dev.lba_size
        lbas, tids, tokens, need = set(), set(), set(), {}

        def span(lba, nlb):
            return set(range(lba, lba + max(nlb, 1)))

        if verb in ("write", "append", "tx_write"):
            data = args[-1]
            nlb = max(len(data) // n, 1)
            if verb != "append":
                lbas = span(args[-2], nlb)
            if verb == "tx_write":
                tids = {args[0]}
                if kw.get("final"):   # commits what the tid staged before, too
                    lbas |= self._staged(args[0])
                need = {"pending": nlb, "tx": 0 if any(t == args[0] for _, t in self.model.tx) else 1}
            elif verb == "append":
                need = {"pending": nlb, "appends": 1}
        elif verb in ("read", "trim"):
            lbas = span(args[0], args[1] if len(args) > 1 else 1)
        elif verb == "atomic":
            lbas = {lba for lba, _ in args[0]}
        elif verb in ("tx_commit", "tx_abort"):
            tids = {args[0]}
            lbas = self._staged(args[0])
        elif verb == "remap":
            for lba, tok, nlb in args[0]:
                lbas |= span(lba, nlb)
                tokens.add(tok)
        elif verb == "release":
            tokens = {args[0]}
        elif verb != "flush":
            raise ValueError(f"no verb {verb!r}")
        return {"lbas": lbas, "tids": tids, "tokens": tokens, "need": need}

    def _near_limit(self, need: Mapping[str, int]) -> bool:
        """Could a command needing ``need`` (resource -> most it takes), or one
        in flight, meet a full resource in some order of what is in flight?

        The model's usage counts every command in flight as done.  In the
        device's order, a command may run before the ones in flight that free
        (add back what the model freed for them), and a command in flight may
        run after this one (it needs its own ``need`` on top: a final TX_WRITE
        stages its page before its commit frees the rest).  If even that fits,
        every order gives every command the status the model gave it."""
        if not any(need.values()):
            return False
        use, lim = self.model.usage(), self.model.usage_limits()
        for r, k in need.items():
            if not k:
                continue
            freed = sum(p.frees.get(r, 0) for p in self.pending)
            other = max((p.need.get(r, 0) for p in self.pending), default=0)
            if use[r] + freed + k + other > lim[r]:
                return True
        return False

    def _staged(self, tid: int) -> set[int]:
        """The LBAs transaction ``tid`` staged, on whichever queue opened it (the workloads give each
        transaction a tid of its own)."""
        return {lba for (_, t), staged in self.model.tx.items() if t == tid for lba in staged}

    def conflicts(self, verb: str, *args, **kw) -> bool:
        """True while ``verb(*args)`` may not be submitted: it shares an LBA,
        tid or token with a command in flight, one in flight runs alone, or it
        would run alone (near a resource limit) and something is in flight."""
        if not self.pending:
            return False
        fp = self.footprint(verb, *args, **kw)
        if self._near_limit(fp["need"]):
            return True
        return any(p.exclusive or p.lbas & fp["lbas"] or p.tids & fp["tids"] or p.tokens & fp["tokens"]
                   for p in self.pending)

    # -- submission --------------------------------------------------------------
    def issue(self, q: int, verb: str, *args, **kw) -> Pending:
        """Submit ``verb(*args)`` on queue ``q`` without waiting, mirrored in the
        model.  The caller checks :meth:`conflicts` first when other commands
        are in flight (the blocking verbs drain instead)."""
        self.settle()
        fp = self.footprint(verb, *args, **kw)
        exclusive = self._near_limit(fp["need"])
        before = self.model.usage()
        self._queue = q          # the plans tell the model which queue pair runs the verb (it owns what it opens)
        comp, submit, what, then = getattr(self, f"_plan_{verb}")(*args, **kw)
        after = self.model.usage()
        p = Pending(q, what, comp, frozenset(fp["lbas"]), frozenset(fp["tids"]), frozenset(fp["tokens"]),
                    frees={r: before[r] - after[r] for r in _RESOURCES if before[r] > after[r]},
                    need=dict(fp["need"]), exclusive=exclusive, then=then)
        c = self.counts
        if any(o.q != q for o in self.pending):
            c.overlapped += 1
        self.pending.append(p)
        c.issued += 1
        c.per_queue[q] = c.per_queue.get(q, 0) + 1
        c.max_in_flight = max(c.max_in_flight, len(self.pending))
        p.cmd = submit(self.devs[q])   # may raise (the link lost): the model keeps the op in flight
        return p

    # each _plan_<verb>: the model's Completion (the model runs the verb now), how to submit it, its
    # description, and what to do once the device's status matched the model's
    def _plan_write(self, lba: int, data: bytes, *, fua: bool = False):
        self.counts.writes += 1
        self.counts.pages += len(data) // self.dev.lba_size
        return (self.model.write(lba, data, fua=fua), lambda d: d.submit_write(lba, data, fua=fua),
                f"write {lba}", None)

    def _plan_read(self, lba: int, nlb: int = 1):
        comp = self.model.read(lba, nlb)

        def then(p):
            if p.cmd.ok and p.cmd.data != comp.data:
                raise Mismatch(f"read {lba} x {nlb}{self._on(p.q)}: the device's data differ from the model's: "
                               + _differing_blocks(lba, p.cmd.data, comp.data, self.dev.lba_size))
        return comp, lambda d: d.submit_read(lba, nlb), f"read {lba}", then

    def _plan_trim(self, lba: int, nlb: int = 1):
        self.counts.trims += 1
        return self.model.trim(lba, nlb), lambda d: d.submit_trim(lba, nlb), f"trim {lba}", None

    def _plan_flush(self):
        self.counts.flushes += 1
        covered = [op for op in self.model.history if op.completed is not None and not op.durable]

        def then(p):
            if p.cmd.ok:
                self.model.flush(covered)   # what had completed when the FLUSH was submitted is durable
        return _Ok(), lambda d: d.submit_flush(), "flush", then

    def _plan_atomic(self, entries):
        entries = list(entries)
        self.counts.atomic += 1
        self.counts.pages += len(entries)
        return (self.model.atomic_write(entries), lambda d: d.submit_atomic_write(entries), "atomic", None)

    def _plan_tx_write(self, tid: int, lba: int, data: bytes, *, final: bool = False):
        self.counts.pages += len(data) // self.dev.lba_size
        comp = self.model.tx_write(tid, lba, data, final=final, queue=self._queue)

        def then(p):
            if final and p.cmd.ok:
                self.counts.tx_final += 1
        return (comp, lambda d: d.submit_tx_write(tid, lba, data, final=final), f"tx write {tid}", then)

    def _plan_tx_commit(self, tid: int):
        def then(p):
            self.counts.tx_committed += p.cmd.ok
        return (self.model.tx_commit(tid, queue=self._queue), lambda d: d.submit_tx_commit(tid), f"tx commit {tid}",
                then)

    def _plan_tx_abort(self, tid: int):
        def then(p):
            self.counts.tx_aborted += p.cmd.ok
        return (self.model.tx_abort(tid, queue=self._queue), lambda d: d.submit_tx_abort(tid), f"tx abort {tid}",
                then)

    def _plan_append(self, data: bytes):
        comp = self.model.append(data, queue=self._queue)

        def then(p):
            if p.cmd.ok:
                self.tokens[p.cmd.result] = comp.result
                self.counts.appends += 1
                self.counts.pages += len(data) // self.dev.lba_size
        return comp, lambda d: d.submit_append(data), "append", then

    def _plan_remap(self, triples):
        triples = list(triples)
        model_triples = [(lba, self.tokens.get(tok, tok ^ 0xDEAD), n) for lba, tok, n in triples]

        def then(p):
            self.counts.remaps += p.cmd.ok
        what = "remap " + ", ".join(f"{lba} <- 0x{tok:016x} x {n}" for lba, tok, n in triples)
        return self.model.remap(model_triples, queue=self._queue), lambda d: d.submit_remap(triples), what, then

    def _plan_release(self, token: int):
        def then(p):
            self.counts.releases += p.cmd.ok
        return (self.model.release(self.tokens.get(token, token ^ 0xDEAD), queue=self._queue),
                lambda d: d.submit_release(token),
                f"release 0x{token:016x}", then)

    # -- blocking verbs (one queue, one command at a time; writes may stay in flight) ----
    def _sync(self, q: int, verb: str, *args, **kw):
        """Drain, submit, wait; returns the device's Command."""
        self.drain()
        return self.wait(self.issue(q, verb, *args, **kw)).cmd

    def write(self, lba: int, data: bytes, *, wait: bool = True, q: int = 0):
        """A plain write; ``wait=False`` leaves it in flight (with the writes
        before it: the caller keeps their LBAs distinct)."""
        p = self.issue(q, "write", lba, data)
        return self.wait(p).cmd if wait else p.cmd

    def read(self, lba: int, nlb: int = 1, *, q: int = 0) -> bytes:
        return self._sync(q, "read", lba, nlb).data

    def trim(self, lba: int, nlb: int, *, q: int = 0):
        return self._sync(q, "trim", lba, nlb)

    def flush(self, *, q: int = 0):
        return self._sync(q, "flush")

    def atomic(self, entries, *, q: int = 0):
        return self._sync(q, "atomic", list(entries))

    def tx_write(self, tid: int, lba: int, data: bytes, *, final: bool = False, q: int = 0):
        return self._sync(q, "tx_write", tid, lba, data, final=final)

    def tx_commit(self, tid: int, *, q: int = 0):
        return self._sync(q, "tx_commit", tid)

    def tx_abort(self, tid: int, *, q: int = 0):
        return self._sync(q, "tx_abort", tid)

    def append(self, data: bytes, *, q: int = 0):
        return self._sync(q, "append", data)

    def remap(self, triples, *, q: int = 0):
        return self._sync(q, "remap", list(triples))

    def release(self, token: int, *, q: int = 0):
        return self._sync(q, "release", token)


class _Ok:
    status = Status.SUCCESS
    ops = ()


def _block(lba_size: int, serial: int, lba: int, salt: int) -> bytes:
    head = struct.pack("<QQQ", serial, lba, salt)
    return (head * (lba_size // len(head) + 1))[:lba_size]


def random_workload(rec: Recorder, rnd: random.Random, *, commands: int, span: int, qd: int = 4,
                    salt: int = 0, on_step: Callable[[int, str], None] | None = None,
                    queues: int | None = None) -> None:
    """``commands`` random workload steps over LBAs [0, span).  Raises
    whatever the device raises (a lost link when power goes: the recorder
    keeps the history).

    ``queues``: how many of the recorder's queues to use (default all).  One
    queue: the steps one after another (a batch of writes in flight
    together, everything else waited for).  Several: one stream of steps per
    queue, interleaved (:func:`interleaved_workload`)."""
    queues = len(rec.devs) if queues is None else queues
    if not 1 <= queues <= len(rec.devs):
        raise ValueError(f"queues {queues}: 1..{len(rec.devs)} (the recorder's Devices)")
    if queues > 1:
        return interleaved_workload(rec, rnd, commands=commands, span=span, qd=qd, salt=salt, on_step=on_step,
                                    queues=queues)
    dev = rec.dev
    n = dev.lba_size
    serial = iter(range(1, 1 << 62))
    max_atomic = min(dev.info.max_atomic_pages, 8)

    def blk(lba):
        return _block(n, next(serial), lba, salt)

    live_tokens: list[tuple[int, int]] = []  # (device token, blocks)
    for step in range(commands):
        r = rnd.random()
        if r < 0.40:   # a batch of plain writes in flight together, on distinct LBAs
            k = rnd.randint(1, qd)
            starts = rnd.sample(range(span), k)
            used = set()
            for lba in starts:
                nlb = min(rnd.randint(1, 3), span - lba)
                lbas = [lba + i for i in range(nlb)]
                if used & set(lbas):
                    continue
                used |= set(lbas)
                rec.write(lba, b"".join(blk(x) for x in lbas), wait=False)
            rec.drain()
            what = "write"
        elif r < 0.55:
            members = rnd.sample(range(span), rnd.randint(2, max_atomic))
            rec.atomic([(lba, blk(lba)) for lba in members])
            what = "atomic"
        elif r < 0.72:
            tid = dev.new_tid()
            lbas = rnd.sample(range(span), rnd.randint(1, 4))
            kind = rnd.random()
            for i, lba in enumerate(lbas):
                final = kind < 0.35 and i == len(lbas) - 1
                rec.tx_write(tid, lba, blk(lba), final=final)
            if kind < 0.35:
                what = "tx final"
            elif kind < 0.80:
                rec.tx_commit(tid)
                what = "tx commit"
            else:
                rec.tx_abort(tid)
                what = "tx abort"
        elif r < 0.84:
            nlb = rnd.randint(1, 3)
            cmd = rec.append(b"".join(blk(0xA000 + i) for i in range(nlb)))
            if cmd.ok:
                live_tokens.append((cmd.result, nlb))
            if live_tokens and rnd.random() < 0.7:
                tok, nlb = live_tokens.pop(rnd.randrange(len(live_tokens)))
                if rnd.random() < 0.85:
                    lba = rnd.randrange(span - nlb + 1)
                    rec.remap([(lba, tok, nlb)])
                    what = "append+remap"
                else:
                    rec.release(tok)
                    what = "append+release"
            else:
                what = "append"
        elif r < 0.92:
            lba = rnd.randrange(span)
            rec.trim(lba, min(rnd.randint(1, 4), span - lba))
            what = "trim"
        elif r < 0.96:
            rec.flush()
            what = "flush"
        else:
            lba = rnd.randrange(span)
            rec.read(lba, min(rnd.randint(1, 4), span - lba))
            what = "read"
        rec.counts.commands += 1
        if on_step:
            on_step(step, what)
    rec.drain()


class _Req:
    """A program's next command (``verb(*args, **kw)``)."""

    def __init__(self, verb: str, *args, **kw):
        self.verb, self.args, self.kw = verb, args, kw


class _Wait:
    """A program waits for one of its commands to settle."""

    def __init__(self, pending: Pending):
        self.pending = pending


class _Streams:
    """What the queues' programs share: the random source, fresh blocks, live tokens."""

    def __init__(self, rec: Recorder, rnd: random.Random, span: int, qd: int, salt: int):
        self.rec, self.rnd, self.span, self.qd, self.salt = rec, rnd, span, qd, salt
        self.serial = iter(range(1, 1 << 62))
        self.live_tokens: list[tuple[int, int]] = []   # (device token, blocks), any queue may spend one
        self.max_atomic = min(rec.dev.info.max_atomic_pages, 8)

    def blk(self, lba: int) -> bytes:
        return _block(self.rec.dev.lba_size, next(self.serial), lba, self.salt)

    def _busy(self) -> set[int]:
        return set().union(*(p.lbas for p in self.rec.pending))

    def pick(self, k: int) -> list[int]:
        """``k`` distinct LBAs, from those no command in flight touches when there are enough."""
        busy = self._busy()
        idle = [lba for lba in range(self.span) if lba not in busy]
        return self.rnd.sample(idle if len(idle) >= k else range(self.span), k)

    def pick_run(self, nlb: int) -> int:
        """The first of ``nlb`` consecutive LBAs, none in flight if there are such."""
        busy = self._busy()
        starts = range(self.span - nlb + 1)
        idle = [s for s in starts if not busy & set(range(s, s + nlb))]
        return self.rnd.choice(idle or starts)

    def program(self) -> Iterator:
        """One workload step as a generator: yields :class:`_Req` (gets the
        :class:`Pending` back) or :class:`_Wait`; returns what it was."""
        rnd, span = self.rnd, self.span
        r = rnd.random()
        if r < 0.40:   # a batch of plain writes, on distinct LBAs
            used: set[int] = set()
            for lba in self.pick(rnd.randint(1, self.qd)):
                lbas = set(range(lba, lba + min(rnd.randint(1, 3), span - lba)))
                if used & lbas:
                    continue
                used |= lbas
                yield _Req("write", lba, b"".join(self.blk(x) for x in sorted(lbas)))
            return "write"
        if r < 0.55:
            members = self.pick(rnd.randint(2, self.max_atomic))
            yield _Req("atomic", [(lba, self.blk(lba)) for lba in members])
            return "atomic"
        if r < 0.72:   # the tid orders its own commands: each waits for the one before
            tid = self.rec.dev.new_tid()
            lbas = self.pick(rnd.randint(1, 4))
            kind = rnd.random()
            for i, lba in enumerate(lbas):
                yield _Req("tx_write", tid, lba, self.blk(lba), final=kind < 0.35 and i == len(lbas) - 1)
            if kind < 0.35:
                return "tx final"
            if kind < 0.80:
                yield _Req("tx_commit", tid)
                return "tx commit"
            yield _Req("tx_abort", tid)
            return "tx abort"
        if r < 0.84:
            nlb = rnd.randint(1, 3)
            p = yield _Req("append", b"".join(self.blk(0xA000 + i) for i in range(nlb)))
            yield _Wait(p)   # its token, for this queue or another
            if p.cmd.ok:
                self.live_tokens.append((p.cmd.result, nlb))
            if self.live_tokens and rnd.random() < 0.7:
                tok, nlb = self.live_tokens.pop(rnd.randrange(len(self.live_tokens)))
                if rnd.random() < 0.85:
                    yield _Req("remap", [(self.pick_run(nlb), tok, nlb)])
                    return "append+remap"
                yield _Req("release", tok)
                return "append+release"
            return "append"
        if r < 0.92:
            lba = self.pick(1)[0]
            yield _Req("trim", lba, min(rnd.randint(1, 4), span - lba))
            return "trim"
        if r < 0.96:
            yield _Req("flush")
            return "flush"
        lba = self.pick(1)[0]
        yield _Req("read", lba, min(rnd.randint(1, 4), span - lba))
        return "read"


def interleaved_workload(rec: Recorder, rnd: random.Random, *, commands: int, span: int, qd: int = 4,
                         salt: int = 0, on_step: Callable[[int, str], None] | None = None,
                         queues: int | None = None) -> None:
    """``commands`` random workload steps (the mix of :func:`random_workload`)
    spread over ``queues`` of the recorder's queues (default all), each queue
    running one step at a time, the queues interleaved: round-robin, each
    queue submits its next command as soon as :meth:`Recorder.conflicts`
    allows and it has fewer than ``qd`` in flight, without waiting for the
    others.  Steps do not wait for their commands (a transaction's commands
    wait for each other through its tid; an append waits for its token), so a
    queue's next step overlaps its last.  ``on_step(step, what)`` when a step
    has submitted its last command."""
    queues = len(rec.devs) if queues is None else queues
    if not 1 <= queues <= len(rec.devs):
        raise ValueError(f"queues {queues}: 1..{len(rec.devs)} (the recorder's Devices)")
    st = _Streams(rec, rnd, span, qd, salt)
    qs = list(range(queues))
    prog: dict[int, Iterator | None] = {q: None for q in qs}
    want: dict[int, object] = {}
    since: dict[int, int] = {}     # queue -> the round its wanted command first met a conflict
    started = finished = rounds = 0

    def step(q: int, value) -> None:
        nonlocal finished
        since.pop(q, None)
        try:
            want[q] = prog[q].send(value)
        except StopIteration as e:
            prog[q] = None
            rec.counts.commands += 1
            if on_step:
                on_step(finished, e.value)
            finished += 1

    def yields_to_older(q: int, fp: dict) -> bool:
        """A command another queue has waited for longer needs what this one would take
        (so no queue starves behind a stream of younger commands)."""
        mine = since.get(q, rounds)
        for o in qs:
            if o == q or prog[o] is None or not isinstance(want.get(o), _Req) or since.get(o, rounds) >= mine:
                continue
            w = want[o]
            ofp = rec.footprint(w.verb, *w.args, **w.kw)
            if (rec._near_limit(ofp["need"]) or ofp["lbas"] & fp["lbas"] or ofp["tids"] & fp["tids"]
                    or ofp["tokens"] & fp["tokens"]):
                return True
        return False

    while True:
        moved = False
        for q in qs[rounds % len(qs):] + qs[:rounds % len(qs)]:
            if prog[q] is None:
                if started >= commands:
                    continue
                prog[q] = st.program()
                started += 1
                moved = True
                step(q, None)
                if prog[q] is None:
                    continue
            w = want[q]
            if isinstance(w, _Wait):
                if w.pending.settled:
                    step(q, w.pending)
                    moved = True
                continue
            if rec.in_flight(q) >= qd:
                continue
            if rec.conflicts(w.verb, *w.args, **w.kw):
                since.setdefault(q, rounds)
                continue
            if yields_to_older(q, rec.footprint(w.verb, *w.args, **w.kw)):
                continue
            step(q, rec.issue(q, w.verb, *w.args, **w.kw))
            moved = True
        rounds += 1
        if started >= commands and all(prog[q] is None for q in qs):
            break
        if not moved and not rec.pending:
            raise RuntimeError("interleaved workload: every queue waits and nothing is in flight")
        rec.poll(block=not moved)
    rec.drain()


def _differing_blocks(lba: int, got: bytes, want: bytes, lba_size: int, show: int = 4) -> str:
    """Which blocks of a read differ, each with the first 24 bytes the device and the model have (a
    workload that starts each block with what wrote it can tell a stale copy from garbage)."""
    out = []
    for i in range(max(len(got), len(want)) // lba_size):
        g, w = (x[i * lba_size:(i + 1) * lba_size] for x in (got, want))
        if g != w:
            note = " (erased)" if g == b"\xff" * lba_size else " (zeros)" if g == bytes(lba_size) else ""
            out.append(f"LBA {lba + i}: device {g[:24].hex()}{note}, model {w[:24].hex()}")
    more = f"; {len(out) - show} more" if len(out) > show else ""
    return "; ".join(out[:show]) + more


def read_span(dev, span: int, *, qd: int = 4) -> dict[int, bytes]:
    """Every LBA in [0, span), read with several commands in flight."""
    chunk = min(dev.info.max_transfer, 16)
    out, cmds = {}, []
    for lba in range(0, span, chunk):
        cmds.append((lba, dev.submit_read(lba, min(chunk, span - lba))))
        if dev.in_flight >= qd:
            dev.poll(block=True)
    for lba, c in cmds:
        dev.wait(c)
        for i in range(len(c.data) // dev.lba_size):
            out[lba + i] = c.data[i * dev.lba_size:(i + 1) * dev.lba_size]
    return out


def verify(history, recovered: Mapping[int, bytes], *, lba_size: int, initial=None,
           in_flight=()) -> list[Violation]:
    """The oracle's verdict on what the device shows after a cut (empty = correct)."""
    return check_after_cut(history, recovered, lba_size=lba_size, initial=initial, in_flight=in_flight)
