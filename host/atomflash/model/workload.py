"""Random workloads over every verb, for any target with the Model's verb API
(:class:`Model`, :class:`LogFTL`, or a device driver wrapped to look alike).

Every block written is unique (it carries a serial number), so the oracle can
tell versions apart.  Some commands are deliberately malformed; the caller can
check that they change nothing.
"""

from __future__ import annotations

import itertools
import random

from ..spec import Hint

__all__ = ["Workload"]


class Workload:
    def __init__(self, target, rng: random.Random, *, lbas: int | None = None, tids: int = 4,
                 bad: float = 0.05, firmware: float = 0.06):
        self.t = target
        self.rng = rng
        self.lbas = lbas or target.limits.capacity
        self.tids = tids
        self.bad = bad
        self.firmware = firmware  # probability of a checkpoint/GC step when the target has them
        self.tokens: list[int] = []
        self.dead_tokens: list[int] = []
        self._serial = itertools.count(1)
        self.log: list[tuple] = []  # (verb, args, status) of every command issued

    def block(self, tag: str = "") -> bytes:
        n = self.t.limits.lba_size
        return f"#{next(self._serial)}{tag}|".encode().ljust(n, b"\x5a")[:n]

    def blocks(self, k: int, tag: str = "") -> bytes:
        return b"".join(self.block(tag) for _ in range(k))

    def _lba(self, nlb: int = 1) -> int:
        return self.rng.randrange(0, self.lbas - nlb + 1)

    def _do(self, verb: str, *args, **kw):
        c = getattr(self.t, verb)(*args, **kw)
        self.log.append((verb, args, c.status))
        return c

    def step(self) -> None:
        r, rng = self.rng, self.rng
        if self.firmware and hasattr(self.t, "gc") and r.random() < self.firmware:
            if r.random() < 0.5 or not self.t.gc_candidates():
                self.t.checkpoint()
            else:
                self.t.gc(rng=r)
            return
        if r.random() < self.bad:
            return self._bad()
        verb = r.choices(["write", "atomic", "trim", "tx_write", "tx_end", "append", "remap", "release",
                          "flush"], [20, 12, 5, 18, 8, 8, 7, 2, 2])[0]
        if verb == "write":
            n = r.randint(1, 3)
            self._do("write", self._lba(n), self.blocks(n, "w"))
        elif verb == "atomic":
            lbas = r.sample(range(self.lbas), r.randint(2, min(5, self.lbas)))
            self._do("atomic_write", [(lba, self.block("a")) for lba in lbas])
        elif verb == "trim":
            n = r.randint(1, 3)
            self._do("trim", self._lba(n), n)
        elif verb == "tx_write":
            n = r.randint(1, 2)
            self._do("tx_write", r.randint(1, self.tids), self._lba(n), self.blocks(n, "t"),
                     final=r.random() < 0.3)
        elif verb == "tx_end":
            tid = r.randint(1, self.tids)
            self._do("tx_commit" if r.random() < 0.7 else "tx_abort", tid)
        elif verb == "append":
            c = self._do("append", self.blocks(r.randint(1, 3), "p"))
            if c.ok:
                self.tokens.append(c.result)
        elif verb == "remap" and self.tokens:
            chosen = r.sample(self.tokens, r.randint(1, min(3, len(self.tokens))))
            triples, used = [], set()
            for tok in chosen:
                nlb = self._token_len(tok)
                for _ in range(20):
                    lba = self._lba(nlb)
                    span = set(range(lba, lba + nlb))
                    if not span & used:
                        used |= span
                        triples.append((lba, tok, nlb))
                        break
            if triples and self._do("remap", triples).ok:
                for _, tok, _ in triples:
                    self.tokens.remove(tok)
                    self.dead_tokens.append(tok)
        elif verb == "release" and self.tokens:
            tok = r.choice(self.tokens)
            if self._do("release", tok).ok:
                self.tokens.remove(tok)
                self.dead_tokens.append(tok)
        elif verb == "flush":
            self._do("flush") if r.random() < 0.5 else self._do("hint", Hint.CHECKPOINT)

    def _token_len(self, tok: int) -> int:
        sem = getattr(self.t, "sem", self.t)
        a = sem._live_append(tok, 0)          # the workload runs on one queue
        return len(a.blocks) if a else 1

    def _bad(self) -> None:
        """A malformed or over-limit command (the target must reject it and change nothing)."""
        r, lim = self.rng, self.t.limits
        choice = r.randrange(8)
        if choice == 0:
            self._do("write", lim.capacity, self.block("x"))
        elif choice == 1:
            lba = self._lba()
            self._do("atomic_write", [(lba, self.block("x")), (lba, self.block("x"))])
        elif choice == 2:
            self._do("tx_write", 0, self._lba(), self.block("x"))
        elif choice == 3:
            self._do("tx_commit", 10_000 + r.randrange(100))
        elif choice == 4 and self.dead_tokens:
            self._do("remap", [(self._lba(), r.choice(self.dead_tokens), 1)])
        elif choice == 5:
            self._do("release", r.getrandbits(64))
        elif choice == 6:
            self._do("atomic_write", [(i % self.lbas, self.block("x")) for i in range(lim.max_atomic_pages + 1)])
        else:
            self._do("trim", self._lba(), 0)

    def run(self, steps: int) -> "Workload":
        for _ in range(steps):
            self.step()
        return self
