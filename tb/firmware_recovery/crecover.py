"""Drive firmware/recovery.c on the host and compare it with atomflash.model.recover.

``build()`` compiles recovery.c with driver.c (host gcc, sanitizers when the
toolchain has them) into build/firmware_recovery/ with
``sim.harness.runner.host_build`` (cached by a hash of the sources, headers,
flags and compiler).  ``run_cases`` feeds any number of cases to one driver
process; ``expected`` turns a model result into the same shape, and
``differences`` lists where the two disagree.
"""

from __future__ import annotations

import struct
import subprocess
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterable

from atomflash import spec
from atomflash.model import Checkpoint, Page
from atomflash.model.recover import Recovered
from atomflash.spec import Kind
from sim.harness import runner

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
FW = ROOT / "firmware"
CFLAGS = ["-std=c11", "-O1", "-g", "-Wall", "-Wextra", "-Werror", "-Wno-unused-function", "-Wconversion",
          "-Wno-sign-conversion"]
SANITIZE = ["-fsanitize=address,undefined", "-fno-sanitize-recover=all"]
PPA_NONE = spec.PPA_UNMAPPED
DATA_KINDS = (Kind.DATA, Kind.GC_COPY, Kind.APPEND)
CASE_MAGIC = 0x45534143


def _runs(driver: Path) -> None:
    """An empty case list through ``driver``: a sanitized build whose runtime is missing fails here."""
    subprocess.run([str(driver)], input=struct.pack("<I", 0), check=True, capture_output=True)


def build() -> Path:
    """The driver executable (cached by content hash; safe under pytest-xdist)."""
    return runner.host_build("driver", [FW / "recovery.c", HERE / "driver.c"], build_dir="firmware_recovery",
                             cflags=CFLAGS, includes=[FW], try_flags=SANITIZE, try_check=_runs)


# -- cases ------------------------------------------------------------------------------------

Locator = Callable[[int, "int | None"], int]  # (vseq, lba or None for an append page) -> ppa


@dataclass
class Case:
    pages: list[Page]
    checkpoint: Checkpoint | None = None
    nlba: int = 20
    page_data: int = 64
    ppb: int = 8
    nblocks: int = 96
    cap: int | None = None  # page table entries (default: one per page)
    runs: int = 2  # run recovery this many times on the same input; the driver reports if all agree
    unreadable: frozenset[int] = frozenset()  # addrs whose reads fail
    locate: Locator | None = None  # where the checkpoint says its versions are (default: unknown)
    mlc: int = 0  # af_rec_mlc_filter with these pages per block (addresses are then spec.PPA); 0: SLC

    def encode(self) -> bytes:
        out = [struct.pack("<8I", CASE_MAGIC, self.nlba, self.page_data, self.ppb, self.nblocks,
                           len(self.pages) if self.cap is None else self.cap, self.runs, self.mlc)]
        out.append(struct.pack("<I", len(self.pages)))
        for p in self.pages:
            oob = bytes(p.oob).ljust(spec.OOB.size, b"\xff")[:spec.OOB.size]
            unreadable = int(p.addr in self.unreadable) | int(not p.data_ok) << 1  # driver.c: page, data area
            out.append(struct.pack("<II", p.addr, unreadable) + oob +
                       struct.pack("<I", len(p.data)) + bytes(p.data))
        ck = self.checkpoint
        if ck is None:
            out.append(struct.pack("<I", 0))
            return b"".join(out)
        loc = self.locate or (lambda v, lba: PPA_NONE)
        out.append(struct.pack("<IQI", 1, ck.seq, len(ck.map)))
        for lba, v in ck.map.items():
            out.append(struct.pack("<IQI", lba, v, loc(v, lba)))
        out.append(struct.pack("<I", len(ck.pending_tx)))
        for tag, p in ck.pending_tx.items():
            out.append(struct.pack("<IQII", tag, p.first_vseq, p.npages, len(p.live)))
            for lba, v in p.live.items():
                out.append(struct.pack("<QQI", lba, v, loc(v, lba)))
        out.append(struct.pack("<I", len(ck.pending_appends)))
        for first, nlb in ck.pending_appends.items():
            out.append(struct.pack("<QI", first, nlb))
            out.append(b"".join(struct.pack("<I", loc(first + i, None)) for i in range(nlb)))
        out.append(struct.pack("<I", int(ck.published_below)))
        return b"".join(out)


@dataclass
class Result:
    rc: int
    report: dict[str, int]
    map: dict[int, tuple[int, int, int | None]]  # lba -> (vseq, cseq or -1 for the checkpoint's, ppa or None)
    valid: dict[int, int] = field(default_factory=dict)  # block -> valid pages


def run_cases(cases: Iterable[Case]) -> list[Result]:
    cases = list(cases)
    data = b"".join(c.encode() for c in cases) + struct.pack("<I", 0)
    proc = subprocess.run([str(build())], input=data, capture_output=True, check=True)
    results, cur = [], None
    for line in proc.stdout.decode().splitlines():
        word, *rest = line.split()
        if word == "rc":
            cur = Result(int(rest[0]), {}, {})
        elif word == "report":
            cur.report = {k: int(v) for k, v in (kv.split("=") for kv in rest)}
        elif word == "map":
            lba, v, c1, ppa = map(int, rest)
            cur.map[lba] = (v, c1 - 1, None if ppa == PPA_NONE else ppa)
        elif word == "valid":
            cur.valid[int(rest[0])] = int(rest[1])
        elif word == "end":
            results.append(cur)
    assert len(results) == len(cases), proc.stderr.decode()
    return results


def run_case(case: Case) -> Result:
    return run_cases([case])[0]


# -- the model's result in the same shape ----------------------------------------------------

COUNTS = ("writes_kept", "groups_kept", "groups_discarded", "tx_kept", "tx_discarded", "remaps_kept",
          "remaps_discarded", "trims_kept", "records_incomplete", "torn", "next_seq", "lost")


def model_counts(r: Recovered) -> dict[str, int]:
    c = Counter()
    for _, what in r.accepted:
        if what == "write":
            c["writes_kept"] += 1
        elif what.startswith("group of"):
            c["groups_kept"] += 1
        elif what.startswith(("commit record", "tx_final")):
            c["tx_kept"] += 1
        elif what.startswith("trim record"):
            c["trims_kept"] += 1
        elif what.startswith("remap record"):
            c["remaps_kept"] += 1
        elif what.startswith("checkpoint entries of transactions published below"):
            pass   # part of those transactions, which count as kept
        else:
            raise AssertionError(f"unknown accepted event {what!r}")
    for why in r.rejected:
        if why.startswith("group at vseq"):
            c["groups_discarded"] += 1
        elif why.startswith(("commit record", "tx_final")):
            c["tx_discarded"] += 1
        elif why.startswith("remap record"):
            c["remaps_discarded"] += 1
        elif why.endswith(": incomplete"):
            c["records_incomplete"] += 1
        else:
            raise AssertionError(f"unknown rejection {why!r}")
    c["torn"] = r.torn
    c["next_seq"] = r.next_seq
    c["lost"] = len(r.lost())
    return {k: c[k] for k in COUNTS}


def expected(r: Recovered, ppb: int) -> Result:
    return Result(0, model_counts(r), {lba: (b.vseq, b.cseq, b.addr) for lba, b in r.map.items()},
                  dict(Counter(b.addr // ppb for b in r.map.values() if b.addr is not None)))


def differences(want: Result, got: Result, *, addrs: bool = True) -> list[str]:
    """Where the firmware's result differs from the model's (empty: identical)."""
    out = []
    if got.rc != 0:
        out.append(f"rc {got.rc}")
    for k in COUNTS:
        if want.report[k] != got.report.get(k):
            out.append(f"{k}: model {want.report[k]} firmware {got.report.get(k)}")
    for lba in sorted(set(want.map) | set(got.map)):
        w, g = want.map.get(lba), got.map.get(lba)
        if not addrs and w and g:
            w, g = w[:2], g[:2]
        if w != g:
            out.append(f"lba {lba}: model {w} firmware {g}")
    if addrs and want.valid != got.valid:
        out.append(f"valid counts: model {want.valid} firmware {got.valid}")
    if got.report.get("out_of_range"):
        out.append(f"{got.report['out_of_range']} bindings out of range")
    return out


# -- flash images ------------------------------------------------------------------------------

def intact_copies(pages: Iterable[Page]) -> dict[int, list[tuple[int, int, bool]]]:
    """vseq -> [(lba, addr, append flag)] of intact data pages, in page order."""
    out: dict[int, list] = {}
    for p in pages:
        rec = spec.unpack_oob(p.oob)
        if rec is None or rec.format != spec.OOB_FORMAT or rec.kind not in DATA_KINDS:
            continue
        out.setdefault(rec.vseq, []).append((rec.lba, p.addr, bool(spec.OOB.decompose("flags", rec.flags).append)))
    return out


def locator(pages: Iterable[Page]) -> Locator:
    """Where a version is among ``pages`` (the model's rule: first copy whose lba matches, or an append page)."""
    copies = intact_copies(pages)

    def locate(v: int, lba: int | None) -> int:
        for clba, addr, app in copies.get(v, ()):
            if app or (lba is not None and clba == lba):
                return addr
        return PPA_NONE
    return locate
