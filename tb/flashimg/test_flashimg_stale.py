"""`flashimg.stale_entries`, the soak's check of every checkpoint on flash: an entry must name the newest
version of its LBA that was on flash below the checkpoint's floor (for LBAs only plain WRITEs wrote).
Pure Python on pages as `flashimg.read_log` returns them: no simulation."""

import sys
from pathlib import Path
from types import SimpleNamespace

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from atomflash import spec  # noqa: E402
from atomflash.model import Page  # noqa: E402
from sim import flashimg  # noqa: E402

FLOOR = 1000


def page(addr: int, lba: int, vseq: int, kind=spec.Kind.DATA, seq=None, data_ok=True) -> Page:
    oob = spec.pack_oob(kind=int(kind), flags=1, group_len=1, lba=lba, seq=vseq if seq is None else seq, vseq=vseq)
    return Page(addr, oob, b"", data_ok)


def checkpoint(entries: dict[int, tuple[int, int]]) -> flashimg.FirmwareCheckpoint:
    return flashimg.FirmwareCheckpoint(SimpleNamespace(seq=FLOOR, number=7), [], [[], []], entries, [], set())


def test_an_entry_older_than_a_version_below_the_floor_is_stale():
    pages = [page(0x100, 5, 400), page(0x101, 5, 900),          # LBA 5: 900 is the newest below the floor
             page(0x102, 6, 500), page(0x103, 6, 1200),         # LBA 6: 1200 came after the floor
             page(0x104, 7, 300)]
    ck = checkpoint({5: (400, 0x100), 6: (500, 0x102), 7: (300, 0x104)})
    stale = flashimg.stale_entries(pages, ck, range(5, 8))
    assert [(s.lba, s.entry, s.newer) for s in stale] == [(5, (400, 0x100), (900, 0x101))]
    assert str(stale[0]) == ("checkpoint 7 names LBA 5 vseq 400 at PPA 0x00000100, but vseq 900 (PPA 0x00000101) "
                             "is older than its floor")
    assert flashimg.stale_entries(pages, checkpoint({5: (900, 0x101), 6: (500, 0x102), 7: (300, 0x104)}),
                                  range(5, 8)) == []


def test_a_gc_copy_counts_and_an_unbound_entry_can_be_stale():
    pages = [page(0x200, 9, 600, kind=spec.Kind.GC_COPY, seq=950)]    # a copy keeps its version's vseq
    stale = flashimg.stale_entries(pages, checkpoint({}), [9])
    assert [(s.lba, s.entry, s.newer) for s in stale] == [(9, None, (600, 0x200))]
    assert "names LBA 9 unbound" in str(stale[0])


def test_torn_pages_other_lbas_and_other_kinds_are_not_judged():
    pages = [page(0x300, 3, 800, data_ok=False),                    # recovery may not bind a torn page
             page(0x301, 4, 800),                                   # not an LBA only plain writes wrote
             page(0x302, 3, 850, kind=spec.Kind.APPEND),
             Page(0x303, b"\0" * spec.OOB.size)]                     # an OOB that does not check
    assert flashimg.stale_entries(pages, checkpoint({3: (100, 0x10)}), [3]) == []
