"""The power-cut oracle: given what the host was told (the acknowledged
history), what was still in flight, and what the device shows after the cut
and recovery, list every broken promise.

The promises (DESIGN.md, "On-flash format"):

* every **durable** op survives: each LBA shows that op's block or the block
  of an op that may legitimately be newer;
* every **atomic** op (atomic write, transaction commit, remap) is all or
  nothing: if any of its LBAs certainly shows it, every other LBA shows it or
  something newer;
* **nothing else changes**: every LBA shows its initial block or the block of
  some op that touched it; data from aborted transactions, unremapped appends,
  torn pages or thin air is "foreign".

Which values are allowed at an LBA: the op ``P`` (or the initial block) is
allowed unless some durable op ``Q`` touching the LBA certainly comes after
it (``precedes(P, Q)``).  Ops that are acknowledged but not durable (volatile
cache, no flush yet) and in-flight ops are allowed but not required.

Blocks are identified by content, so a workload should write distinct blocks
(the bundled workloads stamp every block).  With repeated contents the oracle
stays sound (never reports a false violation) but may miss some.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable, Mapping

from .semantics import Op, precedes

__all__ = ["Violation", "check_after_cut"]

INITIAL = "initial"


@dataclass(frozen=True)
class Violation:
    rule: str  # lost | foreign | partial
    lba: int
    op: int | None
    detail: str

    def __str__(self):
        who = f" op {self.op}" if self.op is not None else ""
        return f"{self.rule}: lba {self.lba}{who}: {self.detail}"


def check_after_cut(ops: Iterable[Op], recovered: Mapping[int, bytes | None], *, lba_size: int,
                    initial: Mapping[int, bytes | None] | None = None,
                    in_flight: Iterable[Op] = ()) -> list[Violation]:
    """Every violated promise, as a list (empty = the recovery is correct).

    ``ops``: every state-changing op issued in this power cycle (``Model.history``,
    or the log model's cut view), acknowledged or in flight.  ``recovered``: the
    blocks the device shows after recovery (unmapped LBAs may be absent or
    ``None``: both mean zeros).  ``initial``: the blocks at the start of the cycle.
    LBAs in none of the three are not examined (they must read as zeros).
    ``in_flight``: more ops, taken as issued but not completed whatever their fields say
    (for callers that keep the acknowledged history and the in-flight commands apart).
    """
    ops = list(ops) + [op.copy(completed=None, durable=False) for op in in_flight]
    initial = initial or {}
    zero = bytes(lba_size)

    def norm(v):
        return zero if v is None else bytes(v)

    touching: dict[int, list[Op]] = {}
    for op in ops:
        for lba in op.writes:
            touching.setdefault(lba, []).append(op)

    out: list[Violation] = []
    shown: dict[int, list] = {}  # lba -> ops (or INITIAL) that can explain what it shows
    for lba in sorted(set(touching) | set(recovered) | set(initial)):
        value = norm(recovered.get(lba))
        here = touching.get(lba, [])
        durable = [q for q in here if q.durable]
        allowed = [p for p in here if not any(precedes(p, q) for q in durable)]
        explain = [p for p in allowed if norm(p.writes[lba]) == value]
        if not durable and norm(initial.get(lba)) == value:
            explain.append(INITIAL)
        shown[lba] = explain
        if explain:
            continue
        if any(norm(p.writes[lba]) == value for p in here) or norm(initial.get(lba)) == value:
            newest = max(durable, key=lambda q: (q.order if q.order is not None else q.completed))
            out.append(Violation("lost", lba, newest.id,
                                 f"shows an older block; durable {newest.verb} op {newest.id} is missing"))
        else:
            out.append(Violation("foreign", lba, None, "shows a block no op wrote and that it did not hold"))

    for g in ops:
        if not g.atomic or len(g.writes) < 2:
            continue
        visible = [x for x in g.writes if shown.get(x) == [g]]
        if not visible:
            continue
        for y in g.writes:
            explain = shown.get(y)
            if not explain:
                continue  # already reported
            if all(p is INITIAL or (p is not g and precedes(p, g)) for p in explain):
                out.append(Violation("partial", y, g.id,
                                     f"{g.verb} op {g.id} is visible at lba {visible[0]} but not here"))
    return out
