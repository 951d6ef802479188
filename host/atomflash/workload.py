"""Scoreboarded workloads against a real (or simulated) device, judged after a
power cut by the semantic model's oracle.

:class:`Recorder` sends every command to a :class:`~atomflash.device.Device`
*and* to an :class:`~atomflash.model.Model` with ``auto_complete=False``:
an op the model records stays "in flight" until the device completes the
command, so after a power cut the model's history says exactly what the host
was promised (acknowledged ops must survive, in-flight ones may or may not,
atomic ones all-or-nothing).  A device answer that differs from the model's
(status, read data, an append's token validity) is a :class:`Mismatch`.

:func:`random_workload` mixes plain writes (several in flight), atomic groups,
transactions (TX_COMMIT, the final-write commit, aborts), appends with remaps
and releases, trims and flushes, over ``span`` LBAs; every block it writes is
unique (op number and LBA stamped in), so the oracle can tell them apart.

:func:`verify` reads the span back and returns the oracle's violations; the
demo and the power-fault campaign both use it, and a test hands it a
deliberately corrupted read to prove it can fail.
"""

from __future__ import annotations

import random
import struct
from dataclasses import dataclass, field
from typing import Callable, Mapping

from .model import Limits, Model
from .model.oracle import Violation, check_after_cut
from .spec import Status

__all__ = ["Recorder", "Mismatch", "random_workload", "read_span", "verify", "WorkloadCounts"]


class Mismatch(AssertionError):
    """The device answered differently from the semantic model."""


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
    commands: int = 0
    refused: dict = field(default_factory=dict)


class Recorder:
    """Mirror of every command in a model; completes the model's ops on the device's completions."""

    def __init__(self, dev, *, initial: Mapping[int, bytes] | None = None):
        self.dev = dev
        info = dev.info
        self.model = Model(Limits.from_identify(info), cache=info.volatile_cache > 0, auto_complete=False,
                           initial=initial)
        self.pending: list[tuple[object, tuple]] = []  # (device Command, model ops) in flight
        self.tokens: dict[int, int] = {}  # device token -> model token
        self.counts = WorkloadCounts()

    # -- plumbing --------------------------------------------------------------
    def _expect(self, what: str, model_status: Status, cmd) -> None:
        if cmd.status != model_status:
            raise Mismatch(f"{what}: device {cmd.status.name}, model {model_status.name}")

    def _settle(self, cmds) -> None:
        done = {id(c) for c in cmds}
        keep = []
        for cmd, (what, st, ops) in self.pending:
            if id(cmd) in done:
                self._expect(what, st, cmd)
                for op in ops:
                    self.model.complete(op)
            else:
                keep.append((cmd, (what, st, ops)))
        self.pending = keep

    def drain(self) -> None:
        while self.dev.in_flight:
            self._settle(self.dev.poll(block=True))

    def _sync(self, what: str, cmd, comp) -> object:
        """Wait for ``cmd`` (everything before it settles too) and check it against ``comp``."""
        self.pending.append((cmd, (what, comp.status, comp.ops)))
        while not cmd.done:
            self._settle(self.dev.poll(block=True))
        return cmd

    @property
    def in_flight_ops(self):
        return [op for _, (_, _, ops) in self.pending for op in ops]

    # -- verbs -----------------------------------------------------------------
    def write(self, lba: int, data: bytes, *, wait: bool = True):
        comp = self.model.write(lba, data)
        cmd = self.dev.submit_write(lba, data)
        self.counts.writes += 1
        self.counts.pages += len(data) // self.dev.lba_size
        if wait:
            return self._sync(f"write {lba}", cmd, comp)
        self.pending.append((cmd, (f"write {lba}", comp.status, comp.ops)))
        return cmd

    def read(self, lba: int, nlb: int = 1) -> bytes:
        self.drain()
        comp = self.model.read(lba, nlb)
        cmd = self.dev.wait(self.dev.submit_read(lba, nlb), check=False)
        self._expect(f"read {lba}", comp.status, cmd)
        if cmd.ok and cmd.data != comp.data:
            raise Mismatch(f"read {lba} x {nlb}: the device's data differ from the model's")
        return cmd.data

    def trim(self, lba: int, nlb: int):
        self.drain()
        self.counts.trims += 1
        return self._sync(f"trim {lba}", self.dev.submit_trim(lba, nlb), self.model.trim(lba, nlb))

    def flush(self):
        self.drain()
        self.counts.flushes += 1
        cmd = self._sync("flush", self.dev.submit_flush(), _Ok())
        if cmd.ok:
            self.model.flush()  # completed writes are durable once the device says so
        return cmd

    def atomic(self, entries):
        self.drain()
        self.counts.atomic += 1
        self.counts.pages += len(entries)
        return self._sync("atomic", self.dev.submit_atomic_write(entries), self.model.atomic_write(entries))

    def tx_write(self, tid: int, lba: int, data: bytes, *, final: bool = False):
        self.drain()
        self.counts.pages += len(data) // self.dev.lba_size
        comp = self.model.tx_write(tid, lba, data, final=final)
        cmd = self._sync(f"tx write {tid}", self.dev.submit_tx_write(tid, lba, data, final=final), comp)
        if final and cmd.ok:
            self.counts.tx_final += 1
        return cmd

    def tx_commit(self, tid: int):
        self.drain()
        cmd = self._sync(f"tx commit {tid}", self.dev.submit_tx_commit(tid), self.model.tx_commit(tid))
        self.counts.tx_committed += cmd.ok
        return cmd

    def tx_abort(self, tid: int):
        self.drain()
        cmd = self._sync(f"tx abort {tid}", self.dev.submit_tx_abort(tid), self.model.tx_abort(tid))
        self.counts.tx_aborted += cmd.ok
        return cmd

    def append(self, data: bytes):
        self.drain()
        comp = self.model.append(data)
        cmd = self._sync("append", self.dev.submit_append(data), comp)
        if cmd.ok:
            self.tokens[cmd.result] = comp.result
            self.counts.appends += 1
            self.counts.pages += len(data) // self.dev.lba_size
        return cmd

    def remap(self, triples):
        self.drain()
        model_triples = [(lba, self.tokens.get(tok, tok ^ 0xDEAD), n) for lba, tok, n in triples]
        cmd = self._sync("remap", self.dev.submit_remap(triples), self.model.remap(model_triples))
        self.counts.remaps += cmd.ok
        return cmd

    def release(self, token: int):
        self.drain()
        cmd = self._sync("release", self.dev.submit_release(token),
                         self.model.release(self.tokens.get(token, token ^ 0xDEAD)))
        self.counts.releases += cmd.ok
        return cmd


class _Ok:
    status = Status.SUCCESS
    ops = ()


def _block(lba_size: int, serial: int, lba: int, salt: int) -> bytes:
    head = struct.pack("<QQQ", serial, lba, salt)
    return (head * (lba_size // len(head) + 1))[:lba_size]


def random_workload(rec: Recorder, rnd: random.Random, *, commands: int, span: int, qd: int = 4,
                    salt: int = 0, on_step: Callable[[int, str], None] | None = None) -> None:
    """``commands`` random commands over LBAs [0, span).  Raises whatever the
    device raises (a lost link when power goes: the recorder keeps the history)."""
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
