"""A reference log writer on abstract flash: turns verbs into the pages the
FTL programs, so that ``recover`` can be tested against the semantic model.

:class:`LogFTL` runs every command through a :class:`Model` (which decides
status codes and records the host-visible history) and, when the command
succeeds, writes what the commit-flag log prescribes: OOB-stamped data pages,
atomic groups with consecutive seqs and the commit bit on the last, tagged
transaction pages, COMMIT/REMAP/TRIM record pages, append pages; plus GC
copies, erases and checkpoints when asked.

Everything it does is appended to :attr:`LogFTL.stream`, in issue order.  A
power cut after ``k`` entries (:meth:`LogFTL.cut`) leaves entries before the
in-flight *window* durable and each entry inside it done, missing or torn,
chosen independently: pages of one group finish in any order across dies
(trap 1).  Erases and checkpoints are barriers: the firmware issues them only
once everything before them is durable, and issues nothing after them until
they finish, so the window never reaches back across one.  GC follows the
contract in :mod:`.recover`: it erases only blocks older than the newest
checkpoint, after relocating their live and pending versions.
"""

from __future__ import annotations

import random
from collections import deque
from dataclasses import dataclass, field

from .. import spec
from ..spec import Kind
from .recover import Checkpoint, Page, PendingTx
from .semantics import Completion, Limits, Model, Op

__all__ = ["Entry", "Flash", "Cut", "LogFTL"]


@dataclass
class Entry:
    kind: str  # program | erase | checkpoint
    addr: int = -1
    oob: bytes = b""
    data: bytes = b""
    block: int = -1
    ckpt: Checkpoint | None = None
    slot: int = 0

    @property
    def barrier(self) -> bool:
        return self.kind != "program"


@dataclass(frozen=True)
class Flash:
    nblocks: int = 64
    pages_per_block: int = 16


@dataclass
class Cut:
    """The state after a power cut: what recovery gets and what the oracle needs."""

    k: int  # entries issued
    pages: list[Page]
    slots: list[Checkpoint | None]
    ops: list[Op]  # ops issued before the cut; completed/durable as the cut left them
    in_flight: dict[int, str]  # stream index -> outcome (done | missing | torn)

    @property
    def checkpoint(self) -> Checkpoint | None:
        from .recover import newest_checkpoint
        return newest_checkpoint(self.slots)


@dataclass
class _Tx:
    first: int = -1
    pages: list[tuple[int, int]] = field(default_factory=list)  # (vseq, stream index)
    live: dict[int, int] = field(default_factory=dict)  # lba -> vseq

    @property
    def tag(self) -> int:
        return spec.tag_of(self.first)


class LogFTL:
    """The log model.  Verbs take the same arguments and return the same
    :class:`Completion` as :class:`Model`; :meth:`read` serves from flash."""

    def __init__(self, limits: Limits | None = None, flash: Flash | None = None, *, first_seq: int = 1):
        self.sem = Model(limits)
        self.limits = self.sem.limits
        self.flash = flash or Flash()
        self.stream: list[Entry] = []
        self.seq = first_seq
        self.l2p: dict[int, int] = {}  # lba -> vseq
        self.loc: dict[int, int] = {}  # vseq -> addr of its current copy
        self.phys: dict[int, tuple[dict, bytes]] = {}  # addr -> (oob fields, data): flash as last written
        self.tx: dict[int, _Tx] = {}
        self.apps: dict[int, tuple[int, int, list[int]]] = {}  # token -> (first vseq, nlb, stream indices)
        self.free = deque(range(self.flash.nblocks))
        self.open_block, self.wp = self.free.popleft(), 0
        self.block_max_seq: dict[int, int] = {}
        self.ckpt: Checkpoint | None = None
        self.slot = 0
        self.gc_copies = 0

    # -- flash primitives ---------------------------------------------------------
    def _take(self, n: int = 1) -> int:
        first, self.seq = self.seq, self.seq + n
        return first

    def _alloc(self) -> int:
        if self.wp == self.flash.pages_per_block:
            if not self.free:
                raise RuntimeError("log model: flash full (run gc() or use a larger Flash)")
            self.open_block, self.wp = self.free.popleft(), 0
        addr = self.open_block * self.flash.pages_per_block + self.wp
        self.wp += 1
        return addr

    def _program(self, data: bytes, **fields) -> tuple[int, int]:
        """Program one page; returns (stream index, addr)."""
        addr = self._alloc()
        fields.setdefault("vseq", fields["seq"])
        data = bytes(data).ljust(self.limits.lba_size, b"\xff")
        self.stream.append(Entry("program", addr=addr, oob=spec.pack_oob(**fields), data=data))
        self.phys[addr] = (dict(fields), data)
        blk = addr // self.flash.pages_per_block
        self.block_max_seq[blk] = max(self.block_max_seq.get(blk, 0), fields["seq"])
        return len(self.stream) - 1, addr

    @staticmethod
    def _flags(**bits) -> int:
        return spec.OOB.compose("flags", **bits)

    def _record(self, kind: Kind, entries: list[dict], tid: int = 0) -> list[int]:
        cap = spec.record_capacity(kind, self.limits.lba_size)
        chunks = [entries[i:i + cap] for i in range(0, len(entries), cap)] or [[]]
        first = self._take(len(chunks))
        idxs = []
        for i, chunk in enumerate(chunks):
            data = spec.pack_record_page(kind, first + i, chunk, len(entries), self.limits.lba_size)
            idx, _ = self._program(data, kind=kind, seq=first + i, group_len=len(chunks), group_idx=i, tid=tid,
                                   flags=self._flags(commit=int(i == len(chunks) - 1)))
            idxs.append(idx)
        return idxs

    @staticmethod
    def _mark(op: Op, needs, order: int) -> None:
        op.needs, op.order = tuple(needs), order

    # -- verbs ------------------------------------------------------------------------
    def write(self, lba: int, data: bytes, **kw) -> Completion:
        c = self.sem.write(lba, data, **kw)
        for i, op in enumerate(c.ops):
            seq = self._take()
            block = op.writes[lba + i]
            idx, addr = self._program(block, kind=Kind.DATA, lba=lba + i, seq=seq, group_len=1,
                                      flags=self._flags(commit=1))
            self.l2p[lba + i], self.loc[seq] = seq, addr
            self._mark(op, [idx], idx)
        return c

    def atomic_write(self, entries) -> Completion:
        entries = list(entries)
        c = self.sem.atomic_write(entries)
        if not c.ok:
            return c
        n, first = len(entries), self._take(len(entries))
        idxs = []
        for i, (lba, block) in enumerate(entries):
            idx, addr = self._program(block, kind=Kind.DATA, lba=lba, seq=first + i, group_len=n, group_idx=i,
                                      flags=self._flags(commit=int(i == n - 1)))
            self.l2p[lba], self.loc[first + i] = first + i, addr
            idxs.append(idx)
        self._mark(c.ops[0], idxs, idxs[-1])
        return c

    def trim(self, lba: int, nlb: int, **kw) -> Completion:
        c = self.sem.trim(lba, nlb, **kw)
        if c.ok:
            idxs = self._record(Kind.TRIM, [dict(lba=lba, nlb=nlb)])
            for i in range(nlb):
                self.l2p.pop(lba + i, None)
            self._mark(c.ops[0], idxs, idxs[-1])
        return c

    def tx_write(self, tid: int, lba: int, data: bytes, *, final: bool = False) -> Completion:
        c = self.sem.tx_write(tid, lba, data, final=final)
        if not c.ok:
            return c
        tx = self.tx.setdefault(tid, _Tx())
        nlb = len(data) // self.limits.lba_size
        commit_idx = None
        for i in range(nlb):
            seq = self._take()
            if tx.first < 0:
                tx.first = seq
            count = len(tx.pages) + 1
            rides = final and i == nlb - 1 and count <= spec.LOG.TX_FINAL_MAX_PAGES
            block = bytes(data[i * self.limits.lba_size:(i + 1) * self.limits.lba_size])
            idx, addr = self._program(block, kind=Kind.DATA, lba=lba + i, seq=seq, tid=tx.tag,
                                      group_len=count if rides else 0,
                                      flags=self._flags(tx=1, tx_final=int(rides), commit=int(rides)))
            tx.pages.append((seq, idx))
            tx.live[lba + i] = seq
            self.loc[seq] = addr
            if rides:
                commit_idx = [idx]
        if final:
            self._publish(tid, c.ops[0], commit_idx or self._commit_record(tid))
        return c

    def _commit_record(self, tid: int) -> list[int]:
        tx = self.tx[tid]
        return self._record(Kind.COMMIT, [dict(first_vseq=tx.first, npages=len(tx.pages), tid=tid)], tid=tx.tag)

    def _publish(self, tid: int, op: Op, commit_idxs: list[int]) -> None:
        tx = self.tx.pop(tid)
        self.l2p.update(tx.live)
        self._mark(op, [i for _, i in tx.pages] + commit_idxs, commit_idxs[-1])

    def tx_commit(self, tid: int) -> Completion:
        c = self.sem.tx_commit(tid)
        if c.ok:
            self._publish(tid, c.ops[0], self._commit_record(tid))
        return c

    def tx_abort(self, tid: int) -> Completion:
        c = self.sem.tx_abort(tid)
        if c.ok:
            del self.tx[tid]  # its pages are garbage; nothing is written
        return c

    def tx_read(self, tid: int, lba: int, nlb: int) -> Completion:
        return self.sem.tx_read(tid, lba, nlb)

    def append(self, data: bytes) -> Completion:
        c = self.sem.append(data)
        if not c.ok:
            return c
        n = self.limits.lba_size
        nlb = len(data) // n
        first = self._take(nlb)
        idxs = []
        for i in range(nlb):
            idx, addr = self._program(data[i * n:(i + 1) * n], kind=Kind.APPEND, seq=first + i, group_len=nlb,
                                      group_idx=i, tid=spec.tag_of(first), flags=self._flags(append=1))
            self.loc[first + i] = addr
            idxs.append(idx)
        self.apps[c.result] = (first, nlb, idxs)
        return c

    def remap(self, triples) -> Completion:
        triples = list(triples)
        c = self.sem.remap(triples)
        if not c.ok:
            return c
        entries, needs = [], []
        for lba, tok, nlb in triples:
            first, _, idxs = self.apps.pop(tok)
            entries.append(dict(lba=lba, first_vseq=first, nlb=nlb))
            needs += idxs
            for i in range(nlb):
                self.l2p[lba + i] = first + i
        idxs = self._record(Kind.REMAP, entries)
        self._mark(c.ops[0], needs + idxs, idxs[-1])
        return c

    def release(self, token: int) -> Completion:
        c = self.sem.release(token)
        if c.ok:
            del self.apps[token]
        return c

    def flush(self) -> Completion:
        return self.sem.flush()

    def hint(self, hint: int) -> Completion:
        return self.sem.hint(hint)

    def read(self, lba: int, nlb: int) -> Completion:
        """READ served from the log: l2p -> current copy of the version -> page data."""
        c = self.sem.read(lba, nlb)
        if not c.ok:
            return c
        out = b""
        for i in range(nlb):
            v = self.l2p.get(lba + i)
            out += bytes(self.limits.lba_size) if v is None else self.phys[self.loc[v]][1]
        return Completion(c.status, data=out)

    # -- firmware side: checkpoints and GC ------------------------------------------------
    def checkpoint(self) -> Checkpoint:
        """Write a checkpoint (a barrier) into the next of two alternating slots."""
        ck = Checkpoint(
            seq=self.seq, map=dict(self.l2p),
            pending_tx={t.tag: PendingTx(t.first, len(t.pages), dict(t.live)) for t in self.tx.values()},
            pending_appends={first: nlb for first, nlb, _ in self.apps.values()})
        self.stream.append(Entry("checkpoint", ckpt=ck, slot=self.slot))
        self.slot ^= 1
        self.ckpt = ck
        return ck

    def gc_candidates(self) -> list[int]:
        """Full blocks whose every page is older than the newest checkpoint (the only erasable ones)."""
        if self.ckpt is None:
            return []
        used = set(self.free)
        if self.wp < self.flash.pages_per_block:
            used.add(self.open_block)  # still being written
        return [b for b in range(self.flash.nblocks)
                if b not in used and self.block_max_seq.get(b, 0) < self.ckpt.seq]

    def _needed(self) -> set[int]:
        """Versions GC must keep: bound, pending in an open transaction, or staged by a live append."""
        keep = set(self.l2p.values())
        for t in self.tx.values():
            keep |= set(t.live.values())
        for first, nlb, _ in self.apps.values():
            keep |= set(range(first, first + nlb))
        return keep

    def gc(self, block: int | None = None, rng: random.Random | None = None) -> int | None:
        """Relocate the needed versions out of one erasable block, then erase it (a barrier)."""
        cands = self.gc_candidates()
        if block is None:
            if not cands:
                return None
            block = (rng or random).choice(cands)
        assert block in cands, "GC may only erase blocks older than the newest checkpoint"
        keep = self._needed()
        ppb = self.flash.pages_per_block
        for addr in range(block * ppb, (block + 1) * ppb):
            got = self.phys.get(addr)
            if got is None:
                continue
            fields, data = got
            if fields["kind"] in (Kind.DATA, Kind.GC_COPY, Kind.APPEND) and fields["vseq"] in keep \
                    and self.loc.get(fields["vseq"]) == addr:
                copy = dict(fields, kind=Kind.GC_COPY, seq=self._take())
                _, new = self._program(data, **copy)
                self.loc[fields["vseq"]] = new
                self.gc_copies += 1
        self.stream.append(Entry("erase", block=block))
        for addr in range(block * ppb, (block + 1) * ppb):
            self.phys.pop(addr, None)
        self.block_max_seq.pop(block, None)
        self.free.append(block)
        return block

    # -- power cuts -----------------------------------------------------------------------
    def in_flight(self, k: int, window: int) -> list[int]:
        """Stream indices that may be unfinished when power is cut after ``k`` entries."""
        out = []
        for i in range(max(0, k - window), k):
            later = self.stream[i + 1:k]
            if any(e.barrier for e in later) or (self.stream[i].barrier and i != k - 1):
                continue
            out.append(i)
        return out

    def cut(self, k: int | None = None, *, window: int = 4, rng: random.Random | None = None,
            outcomes: dict[int, str] | None = None) -> Cut:
        """The flash image and the oracle's view after a cut following ``k`` issued entries.
        ``outcomes`` fixes the fate of in-flight entries (done | missing | torn); others are drawn from rng."""
        k = len(self.stream) if k is None else k
        rng = rng or random.Random(k)
        fate = {}
        for i in self.in_flight(k, window):
            fate[i] = (outcomes or {}).get(i) or rng.choice(("done", "missing", "torn"))
        pages: dict[int, Page] = {}
        slots: list[Checkpoint | None] = [None, None]
        ppb = self.flash.pages_per_block
        for i, e in enumerate(self.stream[:k]):
            f = fate.get(i, "done")
            if e.kind == "program":
                if f == "done":
                    pages[e.addr] = Page(e.addr, e.oob, e.data)
                elif f == "torn":
                    pages[e.addr] = Page(e.addr, _tear(e.oob, rng), rng.randbytes(len(e.data)))
            elif e.kind == "erase":
                for addr in range(e.block * ppb, (e.block + 1) * ppb):
                    if f == "done" or (f == "torn" and rng.random() < 0.5):
                        pages.pop(addr, None)
                    elif f == "torn" and addr in pages:
                        pages[addr] = Page(addr, _tear(pages[addr].oob, rng), rng.randbytes(len(pages[addr].data)))
            elif e.kind == "checkpoint":
                slots[e.slot] = e.ckpt if f == "done" else None
        ops = []
        for op in self.sem.history:
            if op.order is None or op.order >= k:
                continue  # not issued before the cut
            acked = all(n < k and n not in fate for n in op.needs)
            ops.append(op.copy(issued=op.order, completed=op.order if acked else None, durable=acked))
        return Cut(k, list(pages.values()), slots, ops, fate)

    def cut_points(self) -> range:
        return range(len(self.stream) + 1)


def _tear(oob: bytes, rng: random.Random) -> bytes:
    """A torn OOB: garbage, or the real record with a broken CRC (readable but untrustworthy)."""
    if rng.random() < 0.5:
        return rng.randbytes(len(oob))
    bad = bytearray(oob)
    bad[-1] ^= 1 + rng.randrange(255)
    return bytes(bad)
