"""What must survive a power cut: rebuild the map from the pages on flash.

``recover(pages, checkpoint)`` is the reference for the firmware's recovery
and the judge of any flash image.  It reads nothing but OOB records, record
payloads and an optional checkpoint, and it trusts nothing it cannot prove.

The proof rules
===============

**Absent unless intact.**  A page whose OOB fails its CRC (``spec.unpack_oob``
returns None) is absent: torn, erased or garbage, never data (trap 3).  A
record page (COMMIT/REMAP/TRIM) is also absent when its payload fails
``spec.unpack_record_page`` (magic, kind, format, seq, CRC).

**Versions, not pages.**  Every block of host data has a version, ``vseq``:
the seq it was first programmed with.  GC copies keep every OOB field but
``kind`` and ``seq``, so "version v is present" means "some intact page,
original or copy, carries vseq v with the expected lba/flags/group fields".
Recovery never needs a particular physical page, only a version (trap 2).

**Commit points.**  A binding becomes visible at its commit point; its
``cseq`` is the seq of that point and *the newest commit point wins* per LBA
(commit order decides, also between a transaction and a plain write):

=================  =================================  =====================================
verb               commit point (``cseq``)            proof that it happened
=================  =================================  =====================================
plain write        the page itself (its vseq)         the page (group_len 1, commit bit)
atomic group of N  last member: first + N - 1         all N versions first..first+N-1 present
                                                      with group_len N, group_idx i (trap 1)
transaction        COMMIT record page seq, or the     the record (or tx_final page) and
                   tx_final page's vseq               *exactly* npages versions tagged with the
                                                      transaction's tag in [first, cseq]
remap              REMAP record page seq              the record and every append version it
                                                      names (flags.append, group_len = nlb)
trim               TRIM record page seq               the record
=================  =================================  =====================================

A record may span K pages (group_len K, group_idx, consecutive seqs, commit
bit on the last); it counts only with all K intact, like an atomic group.

**Tags, not tids.**  A transaction's and an append's pages carry a *tag* in
``OOB.tid``: the low 32 bits of the vseq of its first page.  The tag is unique
per incarnation (tids are reused by hosts; tags are not), so pages of an
aborted earlier use of the same tid can never complete a later one, and the
first vseq follows from any page's vseq (``spec.first_vseq_of``).  That is what
lets a tx_final page prove its transaction with no record: it carries the page
count in ``group_len``.  The count includes superseded pages (a transaction
that wrote one LBA twice has two pages), so a missing newest write can never
let an older one through.

**Checkpoints.**  A checkpoint ``C`` is a map snapshot taken when every
commit point with seq < ``C.seq`` was applied; commit points older than
``C.seq`` are *decided by the checkpoint* and ignored by the scan (so a stale
GC copy of trimmed or overwritten data cannot resurrect).  For transactions
open at the checkpoint it holds the tag, first vseq, number of pages written
before ``C.seq`` and their live bindings, so a commit after the checkpoint is
proven by ``C`` for the old part and by the scan for the rest (trap 8).
Likewise it lists the live appends (first vseq, length): a remap after the
checkpoint of an append staged before it is proven by ``C`` for that append
(its pages may since have been superseded and erased; if still bound, GC
keeps them).

The contract this puts on GC and the checkpointer (trap 2): *GC erases only
blocks whose every page has seq < the newest durable checkpoint's seq, after
relocating the live and pending versions in them; a checkpoint is never taken
inside an atomic group or record.*  Then every page a post-checkpoint proof
needs is still on flash.

**Nothing staged survives.**  Open transactions, aborted ones (even after GC
moved their pages, trap 9) and appends no remap names have no commit point,
so nothing of them is bound.

**Sequence resume.**  ``next_seq`` = highest seq seen + ``LOG.SEQ_RESUME_GAP``,
where "seen" includes the checkpoint and plausible seqs read from torn pages
(a raw OOB with the right format byte and a seq no further than the gap above
the intact maximum).  The gap exceeds anything that can be in flight, so a
torn page's seq is never reused even if the page later reads back intact
(trap 5).

**MLC word lines (trap 4).**  On a part with paired pages (``mlc``: the pages
per block), a data or record page on a *lower* page counts only when its word
line is complete: its upper page (``spec.mlc_upper_of``) lies in the block's
written prefix (before its first erased page) and is intact.  A cut while the upper page
programmed may have damaged the lower page although its OOB still reads
intact; the core acknowledges nothing on a lower page before its upper page
is programmed (rtl/ftl/pairing.py), so dropping these loses nothing
acknowledged.  Their seqs still count for the resume.

**Torn under an intact OOB.**  A cut tears the page being programmed: the
last page of its block's written prefix (pages are programmed in order).
Its OOB record, one codeword, can survive while a data codeword does not
(the campaign saw it on SLC: a cut at 97 % of a program).  So a data page that
ends its block's written prefix counts only if its data area decodes too
(``Page.data_ok``; addresses are ``spec.PPA``); otherwise it is torn (its seq
still counts for the resume).  The page was being programmed, so nothing
acknowledged is lost.  Only block ends are judged so: a page further back
was complete when the next one started, and an unreadable one there is a
media error the host must see, not an older version.  On MLC, a lower page
whose upper page is such a torn end has an incomplete word line.

**Idempotent.**  Recovery writes nothing; its result depends only on intact
pages and the checkpoint, so running it twice, or on the same flash plus a
checkpoint of its own result, gives the same map (trap 6).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Iterable, Mapping

from .. import spec
from ..spec import Kind

__all__ = ["Page", "PendingTx", "Checkpoint", "Binding", "Recovered", "recover", "newest_checkpoint"]

_DATA_KINDS = (Kind.DATA, Kind.GC_COPY, Kind.APPEND)
_RECORD_KINDS = (Kind.COMMIT, Kind.REMAP, Kind.TRIM)
_ERASED_OOB = b"\xff" * spec.OOB.size
_KINDS = frozenset(int(k) for k in Kind)


@dataclass(frozen=True)
class Page:
    """One physical page as read from flash: its address, OOB bytes and data bytes."""

    addr: int
    oob: bytes
    data: bytes = b""
    data_ok: bool = True  # False: a data codeword did not decode (see "Torn under an intact OOB")


@dataclass(frozen=True)
class PendingTx:
    """A transaction open when a checkpoint was taken."""

    first_vseq: int
    npages: int  # pages it had programmed (vseq < checkpoint seq), superseded ones included
    live: Mapping[int, int] = field(default_factory=dict)  # lba -> vseq of its latest write so far


@dataclass(frozen=True)
class Checkpoint:
    """What a checkpoint must hold (the firmware's on-flash format maps to this).

    ``seq``: every commit point with seq < ``seq`` is reflected in ``map``.
    ``map``: lba -> vseq of the bound version.  ``pending_tx``: tag -> PendingTx.
    ``pending_appends``: first_vseq -> nlb of live appends (recovery needs them
    only to *find* the pages; they prove nothing).

    ``published_below``: the firmware's kind of checkpoint, which records no
    open transaction but holds its ``seq`` (the floor) at or below the first
    page of every transaction not yet published when the floor was read, and
    reads the map after that.  A transaction that began below ``seq`` and
    committed at or above it was therefore published (whole) before the map
    was read: recovery keeps it without counting its pages, and the entries
    of ``map`` whose vseq lies in [its first vseq, ``seq``) take its commit
    point (campaign trial 4900; docs/recovery.md).
    """

    seq: int
    map: Mapping[int, int]
    pending_tx: Mapping[int, PendingTx] = field(default_factory=dict)
    pending_appends: Mapping[int, int] = field(default_factory=dict)
    published_below: bool = False


def newest_checkpoint(slots: Iterable[Checkpoint | None]) -> Checkpoint | None:
    """The newest valid checkpoint among the slots (torn slots are None)."""
    valid = [c for c in slots if c is not None]
    return max(valid, key=lambda c: c.seq) if valid else None


@dataclass(frozen=True)
class Binding:
    vseq: int  # the version bound
    cseq: int  # its commit point (-1: from the checkpoint)
    addr: int | None  # an intact page holding the version (None: lost)


@dataclass
class Recovered:
    map: dict[int, Binding]
    next_seq: int
    data: dict[int, bytes]  # lba -> block of every bound LBA whose version is present
    accepted: list[tuple[int, str]]  # (cseq, description) of every commit point applied
    rejected: list[str]  # why each candidate commit point was refused
    torn: int  # pages present but not intact

    def contents(self) -> dict[int, bytes]:
        """The blocks a host would read (lost versions omitted)."""
        return dict(self.data)

    def lost(self) -> list[int]:
        """LBAs bound to a version no intact page holds (media loss)."""
        return sorted(lba for lba, b in self.map.items() if b.addr is None)


@dataclass
class _Copy:
    rec: dict
    addr: int
    data: bytes
    flags: dict = None

    def __post_init__(self):
        self.flags = spec.OOB.decompose("flags", self.rec.flags)


class _Scan:
    """Intact pages indexed by version and record groups indexed by first seq."""

    def __init__(self, pages: Iterable[Page], mlc: int | None = None):
        pages = list(pages)
        blocks = _blocks(pages) if mlc or not all(p.data_ok for p in pages) else {}
        torn_ends = _torn_block_ends(blocks)
        incomplete = _incomplete_word_lines(blocks, mlc, torn_ends) if mlc else set()
        self.mlc_dropped = 0
        self.versions: dict[int, list[_Copy]] = {}
        self.tx_pages: dict[int, set[int]] = {}  # tag -> vseqs of transaction pages carrying it
        self.records: dict[int, dict[int, tuple[dict, list]]] = {}  # first seq -> {idx: (oob, entries)}
        self.max_seq = 0
        self.hints: list[int] = []
        self.torn = 0
        for p in pages:
            rec = spec.unpack_oob(p.oob)
            if rec is None or rec.format != spec.OOB_FORMAT or rec.kind not in _KINDS:
                if bytes(p.oob) != _ERASED_OOB:
                    self.torn += 1
                    raw = spec.OOB.unpack(p.oob)
                    if raw.format == spec.OOB_FORMAT:
                        self.hints.append(raw.seq)
                continue
            if p.addr in torn_ends:
                self.torn += 1
                self.max_seq = max(self.max_seq, rec.seq)
                continue
            if p.addr in incomplete and rec.kind in _RECORD_KINDS + _DATA_KINDS:
                self.mlc_dropped += 1
                self.max_seq = max(self.max_seq, rec.seq)
                continue
            if rec.kind in _RECORD_KINDS:
                parsed = spec.unpack_record_page(p.data, rec.kind, rec.seq)
                if parsed is None:
                    self.torn += 1
                    self.hints.append(rec.seq)  # the OOB is intact, so its seq was certainly used
                    continue
                self.max_seq = max(self.max_seq, rec.seq)
                first = rec.vseq - rec.group_idx
                self.records.setdefault(first, {})[rec.group_idx] = (rec, parsed[1])
            elif rec.kind in _DATA_KINDS:
                self.max_seq = max(self.max_seq, rec.seq)
                copy = _Copy(rec, p.addr, bytes(p.data))
                self.versions.setdefault(rec.vseq, []).append(copy)
                if copy.flags.tx:
                    self.tx_pages.setdefault(rec.tid, set()).add(rec.vseq)
            else:  # CHECKPOINT pages (the firmware's format) and PAD pages (MLC word-line filler): the seq only
                self.max_seq = max(self.max_seq, rec.seq)

    def copy(self, vseq: int, **want) -> _Copy | None:
        """An intact copy of version ``vseq`` whose OOB fields equal ``want`` (flags by bit name)."""
        flags = {k: want.pop(k) for k in ("tx", "append", "tx_final", "commit") if k in want}
        for c in self.versions.get(vseq, ()):
            if all(c.rec[k] == v for k, v in want.items()) and all(c.flags[k] == v for k, v in flags.items()):
                return c
        return None

    def record(self, first: int, kind: int):
        """(cseq, entries) of the complete record group starting at seq ``first``, else None."""
        pages = self.records.get(first, {})
        if not pages:
            return None
        k = next(iter(pages.values()))[0].group_len
        if k == 0 or len(pages) != k or any(pages.get(i) is None for i in range(k)):
            return None
        recs = [pages[i][0] for i in range(k)]
        if any(r.kind != kind or r.group_len != k or r.vseq != first + i for i, r in enumerate(recs)):
            return None
        flags = [spec.OOB.decompose("flags", r.flags).commit for r in recs]
        if flags != [0] * (k - 1) + [1]:
            return None
        entries = [e for i in range(k) for e in pages[i][1]]
        return first + k - 1, entries


def _intact(p: Page) -> bool:
    rec = spec.unpack_oob(p.oob)
    if rec is None or rec.format != spec.OOB_FORMAT or rec.kind not in _KINDS:
        return False
    return rec.kind not in _RECORD_KINDS or spec.unpack_record_page(p.data, rec.kind, rec.seq) is not None


def _blocks(pages: list[Page]) -> dict[int, tuple[dict[int, Page], int]]:
    """Pages by block (its page-0 PPA): {page index: page} and the written prefix, the pages before
    the first one absent from ``pages`` or erased (what the firmware's scan reads)."""
    by_block: dict[int, dict[int, Page]] = {}
    for p in pages:
        f = spec.PPA.decompose("ppa", p.addr)
        by_block.setdefault(p.addr - f.page, {})[f.page] = p
    out = {}
    for base, here in by_block.items():
        prefix = 0
        while prefix in here and bytes(here[prefix].oob) != _ERASED_OOB:
            prefix += 1
        out[base] = (here, prefix)
    return out


def _torn_block_ends(blocks: dict[int, tuple[dict[int, Page], int]]) -> set[int]:
    """Addresses of data pages that end their block's written prefix with a data area that does not
    decode: torn by a cut although their OOB is intact."""
    out = set()
    for base, (here, prefix) in blocks.items():
        last = here.get(prefix - 1)
        if last is not None and not last.data_ok:
            rec = spec.unpack_oob(last.oob)
            if rec is not None and rec.format == spec.OOB_FORMAT and rec.kind in _DATA_KINDS:
                out.add(last.addr)
    return out


def _incomplete_word_lines(blocks: dict[int, tuple[dict[int, Page], int]], pages_per_block: int,
                           torn_ends: set[int]) -> set[int]:
    """Addresses (PPAs) of lower pages whose word line is not complete: the upper page is past the
    block's written prefix, not intact, or a torn block end."""
    out = set()
    for base, (here, prefix) in blocks.items():
        for page in here:
            upper = spec.mlc_upper_of(page, pages_per_block)
            if upper >= 0 and (upper >= prefix or not _intact(here[upper]) or base + upper in torn_ends):
                out.add(base + page)
    return out


def recover(pages: Iterable[Page], checkpoint: Checkpoint | None = None, *, mlc: int | None = None) -> Recovered:
    """The map that must survive, from every page on flash (any order; torn,
    erased and garbage pages included) and the newest valid checkpoint.
    ``mlc``: the NAND pairs pages (its pages per block); pages are addressed by
    ``spec.PPA`` then (the firmware's rule for incomplete word lines)."""
    scan = _Scan(pages, mlc)
    floor = checkpoint.seq if checkpoint else 0
    pending = dict(checkpoint.pending_tx) if checkpoint else {}
    events: list[tuple[int, str, dict[int, int | None]]] = []
    rejected: list[str] = []

    # -- plain writes and atomic groups (one event per group, found from any member) --
    seen_groups = set()
    for vseq, copies in scan.versions.items():
        for c in copies:
            f = c.flags
            if f.tx or f.append or c.rec.group_len == 0:
                continue
            n, first = c.rec.group_len, vseq - c.rec.group_idx
            cseq = first + n - 1
            if (first, n) in seen_groups or cseq < floor:
                continue
            seen_groups.add((first, n))
            members = [scan.copy(first + i, group_len=n, group_idx=i, tx=0, append=0,
                                 commit=int(i == n - 1)) for i in range(n)]
            missing = [i for i, m in enumerate(members) if m is None]
            if missing:
                rejected.append(f"group at vseq {first} (len {n}): members {missing} not present")
                continue
            events.append((cseq, "write" if n == 1 else f"group of {n}",
                           {m.rec.lba: m.rec.vseq for m in members}))

    # -- transactions --------------------------------------------------------------
    # published before the floor was read (Checkpoint.published_below): the oldest first vseq and
    # the newest commit point of such transactions; the checkpoint's entries in [first, floor) are
    # re-asserted at that commit point (an entry there is what the map held after every such
    # commit, so no proven event below that point can be newer than it)
    published = {"first": None, "cseq": None}

    def tx_event(tag: int, first: int, npages: int, cseq: int, how: str):
        members: dict[int, _Copy] = {}
        for v in scan.tx_pages.get(tag, ()):
            if not max(first, floor) <= v <= cseq:
                continue
            c = scan.copy(v, tx=1, append=0, tid=tag)
            if c is not None:
                members[v] = c
        counted = len(members)
        live: dict[int, int] = {}
        whole = first < floor and tag not in pending and checkpoint.published_below
        if whole:   # published before the floor was read: its pages below it need no count
            published["first"] = first if published["first"] is None else min(published["first"], first)
            published["cseq"] = cseq if published["cseq"] is None else max(published["cseq"], cseq)
        elif first < floor:
            p = pending.get(tag)
            if p is None or p.first_vseq != first:
                rejected.append(f"{how} tag {tag:#x}: opened before the checkpoint, which does not record it")
                return
            counted += p.npages
            live.update(p.live)
        if not whole and counted != npages:
            rejected.append(f"{how} tag {tag:#x}: {counted} of {npages} pages present")
            return
        for v in sorted(members):
            live[members[v].rec.lba] = v  # later writes of the transaction win
        events.append((cseq, how, live))

    for first, pages_ in scan.records.items():
        kind = next(iter(pages_.values()))[0].kind
        got = scan.record(first, kind)
        if got is None:
            rejected.append(f"{Kind(kind).name} record at seq {first}: incomplete")
            continue
        cseq, entries = got
        if cseq < floor:
            continue
        if kind == Kind.COMMIT:
            for e in entries:
                tx_event(spec.tag_of(e.first_vseq), e.first_vseq, e.npages, cseq, f"commit record {cseq}")
        elif kind == Kind.TRIM:
            events.append((cseq, f"trim record {cseq}",
                           {e.lba + i: None for e in entries for i in range(e.nlb)}))
        elif kind == Kind.REMAP:
            binds, missing = {}, []
            for e in entries:
                vouched = e.first_vseq < floor and checkpoint.pending_appends.get(e.first_vseq) == e.nlb
                for i in range(e.nlb):
                    binds[e.lba + i] = e.first_vseq + i
                    if vouched:
                        continue  # staged before the checkpoint, which proves it; GC keeps it while bound
                    c = scan.copy(e.first_vseq + i, append=1, group_len=e.nlb, group_idx=i,
                                  tid=spec.tag_of(e.first_vseq))
                    if c is None:
                        missing.append(e.first_vseq + i)
            if missing:
                rejected.append(f"remap record {cseq}: append pages {missing} not present")
                continue
            events.append((cseq, f"remap record {cseq}", binds))

    finals = set()
    for vseq, copies in scan.versions.items():
        for c in copies:
            f = c.flags
            if f.tx and f.tx_final and f.commit and vseq >= floor and vseq not in finals:
                finals.add(vseq)
                tag = c.rec.tid
                tx_event(tag, spec.first_vseq_of(tag, vseq), c.rec.group_len, vseq, f"tx_final {vseq}")

    # -- apply: checkpoint first, then commit points in order -------------------------
    bound: dict[int, tuple[int, int]] = {}
    if checkpoint:
        bound = {lba: (v, -1) for lba, v in checkpoint.map.items()}
    if published["first"] is not None:   # first among equal commit points, as the firmware binds it
        events.insert(0, (published["cseq"], "checkpoint entries of transactions published below its floor",
                       {lba: v for lba, v in checkpoint.map.items() if published["first"] <= v < floor}))
    events.sort(key=lambda e: e[0])
    for cseq, _, binds in events:
        for lba, v in binds.items():
            if v is None:
                bound.pop(lba, None)
            else:
                bound[lba] = (v, cseq)

    out_map, data = {}, {}
    for lba, (v, cseq) in bound.items():
        c = next((c for c in scan.versions.get(v, ()) if c.rec.lba == lba or c.flags.append), None)
        out_map[lba] = Binding(v, cseq, c.addr if c else None)
        if c is not None:
            data[lba] = c.data

    high = max(scan.max_seq, floor - 1 if checkpoint else 0)
    plausible = [h for h in scan.hints if h <= high + spec.LOG.SEQ_RESUME_GAP]
    high = max([high, *plausible])
    return Recovered(out_map, high + spec.LOG.SEQ_RESUME_GAP, data, [(e[0], e[1]) for e in events], rejected,
                     scan.torn)
