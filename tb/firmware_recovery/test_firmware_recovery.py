"""firmware/recovery.c against atomflash.model.recover.

The C recovery is compiled for the host (with ASan/UBSan when available) and
fed the page images of the reference log writer (LogFTL) under random
workloads over every verb, cut at random points with random fates of the
in-flight pages (done / missing / torn: out-of-order member completion and
torn pages), with and without a checkpoint.  Two ways of feeding it:

* the whole image (as the model gets it): map (vseq, commit seq, address),
  kept/discarded counts, torn count, next_seq and valid counts must be
  identical;
* what the firmware scans: only the pages programmed after the checkpoint,
  with the checkpoint's addresses for its versions.  Identical to the model on
  the same pages wherever the model finds the page, the checkpoint's address
  elsewhere, and the same map as the model on the whole image.

Every case also runs twice in one driver process (trap 6: same input, same
result), and after its own result taken as a checkpoint.
"""

from __future__ import annotations

import importlib.util
import itertools
import random
import shutil
import subprocess
from collections import Counter

import pytest

from atomflash import spec
from atomflash.model import Checkpoint, Flash, Limits, LogFTL, Page, recover
from atomflash.model.workload import Workload
from atomflash.spec import Kind
from sim.harness import runner

from . import crecover as cr

LIM = Limits(capacity=20, lba_size=64, max_atomic_pages=6, max_open_tx=3, max_pending=24, max_remap_triples=3)
FLASH = Flash(96, 8)
PPB = FLASH.pages_per_block


def workload(seed: int, steps: int) -> LogFTL:
    f = LogFTL(LIM, FLASH)
    Workload(f, random.Random(seed), firmware=0.08).run(steps)
    return f


def case(pages, checkpoint=None, **kw) -> cr.Case:
    kw.setdefault("nblocks", FLASH.nblocks)
    kw.setdefault("ppb", PPB)
    return cr.Case(list(pages), checkpoint, nlba=LIM.capacity, page_data=LIM.lba_size, **kw)


def random_cuts(f: LogFTL, rng: random.Random, n: int):
    for _ in range(n):
        k = rng.choice(f.cut_points())
        yield f.cut(k, window=rng.choice((0, 3, 5, 8)), rng=rng)


def since_checkpoint(f: LogFTL, cut) -> tuple[list[Page], list[Page]]:
    """(pages programmed after the cut's checkpoint, the others), in page order."""
    ck = cut.checkpoint
    at = max(i for i, e in enumerate(f.stream[:cut.k]) if e.kind == "checkpoint" and e.ckpt is ck)
    last = {}
    for i, e in enumerate(f.stream[:cut.k]):
        if e.kind == "program":
            last[e.addr] = i
    post = [p for p in cut.pages if last.get(p.addr, -1) > at]
    pre = [p for p in cut.pages if last.get(p.addr, -1) <= at]
    return post, pre


def own_checkpoint(got: cr.Result) -> tuple[Checkpoint, cr.Locator]:
    """The firmware's result as the checkpoint it would write right after recovery."""
    ck = Checkpoint(got.report["next_seq"], {lba: v for lba, (v, _, _) in got.map.items()})
    where = {(v, lba): ppa for lba, (v, _, ppa) in got.map.items()}
    return ck, lambda v, lba: cr.PPA_NONE if where.get((v, lba)) is None else where[(v, lba)]


def assert_same(want: cr.Result, got: cr.Result, what: str) -> None:
    diff = cr.differences(want, got)
    assert not diff, f"{what}: {diff[:6]}"
    assert got.report["idempotent"] == 1, f"{what}: a second run on the same input differed"
    assert got.report["data_reads_nonrecord"] == 0, f"{what}: read the data of a non-record page"


# -- the cross-check -------------------------------------------------------------------------

@pytest.mark.parametrize("seed", range(8))
def test_whole_image_matches_the_model(seed):
    f = workload(seed, 130)
    cuts = list(random_cuts(f, random.Random(seed), 30))
    cuts.append(f.cut(window=0))
    got = cr.run_cases(case(c.pages, c.checkpoint) for c in cuts)
    for c, g in zip(cuts, got):
        assert_same(cr.expected(recover(c.pages, c.checkpoint), PPB), g, f"seed {seed} cut {c.k} {c.in_flight}")
    assert sum(c.checkpoint is not None for c in cuts) > 5


@pytest.mark.parametrize("seed", range(8))
def test_scan_since_checkpoint_matches_the_model(seed):
    """The firmware's view: pages written after the checkpoint plus the checkpoint's addresses."""
    f = workload(100 + seed, 130)
    rng = random.Random(seed)
    cuts = [c for c in random_cuts(f, rng, 60) if c.checkpoint is not None][:30]
    assert len(cuts) >= 10
    cases, models = [], []
    for c in cuts:
        post, pre = since_checkpoint(f, c)
        cases.append(case(post, c.checkpoint, locate=cr.locator(pre)))
        models.append((recover(post, c.checkpoint), recover(c.pages, c.checkpoint), cr.locator(pre)))
    for c, g, (part, whole, locate) in zip(cuts, cr.run_cases(cases), models):
        what = f"seed {seed} cut {c.k} {c.in_flight}"
        want = cr.expected(part, PPB)
        for lba, (v, cseq, addr) in want.map.items():
            if addr is None:  # not in the scan: the checkpoint says where it is
                want.map[lba] = (v, cseq, None if locate(v, lba) == cr.PPA_NONE else locate(v, lba))
        want.valid = g.valid  # follows from the map; checked against the whole image below
        want.report["lost"] = sum(a is None for _, _, a in want.map.values())
        assert_same(want, g, what)
        # the scan since the checkpoint decides exactly what the whole image decides
        assert {k: b[:2] for k, b in g.map.items()} == {k: (b.vseq, b.cseq) for k, b in whole.map.items()}, what
        assert g.report["next_seq"] == whole.next_seq, what
        copies = cr.intact_copies(c.pages)
        for lba, (v, _, addr) in g.map.items():  # every address holds the version bound there
            assert (addr is None) == (whole.map[lba].addr is None), what
            assert addr is None or any(a == addr and (app or clba == lba) for clba, a, app in copies[v]), what


@pytest.mark.parametrize("order", ("reversed", "shuffled", "interleaved"))
def test_scan_order_does_not_matter(order):
    """The scan may read pages in any order (the sort merges whatever runs they arrive in: one per
    block in page order, one per page reversed): the same result as the model fed that order."""
    f = workload(40, 130)
    rng = random.Random(order)
    cuts = list(random_cuts(f, rng, 12)) + [f.cut(window=0)]

    def arrange(pages):
        if order == "reversed":
            return pages[::-1]
        if order == "shuffled":
            return rng.sample(pages, len(pages))
        return pages[::2] + pages[1::2][::-1]  # one ascending run, one descending

    arranged = [arrange(list(c.pages)) for c in cuts]
    got = cr.run_cases(case(p, c.checkpoint) for p, c in zip(arranged, cuts))
    for c, pages, g in zip(cuts, arranged, got):
        assert_same(cr.expected(recover(pages, c.checkpoint), PPB), g, f"{order} cut {c.k} {c.in_flight}")

def test_every_fate_combination_of_a_small_window():
    """Every done/missing/torn combination of a 3-entry window at every cut point of one workload."""
    f = workload(7, 45)
    cuts = []
    for k in f.cut_points():
        window = f.in_flight(k, 3)
        for fates in itertools.product(("done", "missing", "torn"), repeat=len(window)):
            cuts.append(f.cut(k, window=3, rng=random.Random(k), outcomes=dict(zip(window, fates))))
    assert len(cuts) > 500
    for c, g in zip(cuts, cr.run_cases(case(c.pages, c.checkpoint, runs=1) for c in cuts)):
        assert not cr.differences(cr.expected(recover(c.pages, c.checkpoint), PPB), g), f"cut {c.k} {c.in_flight}"


def test_hand_built_trap_scenarios_match_the_model(monkeypatch):
    """Every recover() call of tb/model/test_model_recover.py (one trap at a time, hand-built and
    forged images included) replayed through the firmware."""
    path = cr.ROOT / "tb" / "model" / "test_model_recover.py"
    spec_ = importlib.util.spec_from_file_location("_af_model_recover_scenarios", path)
    mod = importlib.util.module_from_spec(spec_)
    spec_.loader.exec_module(mod)
    calls = []

    def recording(pages, checkpoint=None, *, mlc=None):
        pages = list(pages)
        r = recover(pages, checkpoint, mlc=mlc)
        calls.append((pages, checkpoint, r, mlc))
        return r

    mod.recover = recording
    ran = 0
    for name in dir(mod):
        fn = getattr(mod, name)
        if not name.startswith("test_") or not callable(fn):
            continue
        args = fn.__code__.co_varnames[:fn.__code__.co_argcount]
        if not set(args) <= {"seed", "monkeypatch"}:
            continue  # a fixture this replay does not provide
        for seed in (range(3) if "seed" in args else [None]):
            kw = {"seed": seed} if seed is not None else {}
            if "monkeypatch" in args:
                with pytest.MonkeyPatch.context() as mp:
                    fn(monkeypatch=mp, **kw)
            else:
                fn(**kw)
            ran += 1
    assert ran >= 20 and len(calls) >= 40
    cases = []
    assert any(mlc for *_, mlc in calls), "the MLC word-line rule must be among the scenarios"
    for pages, ck, r, mlc in calls:
        assert not mlc or all(p.addr == i for i, p in enumerate(pages)), "MLC scenarios keep their addresses"
        lbas = [lba for lba in r.map] + (list(ck.map) if ck else [])
        for p in pages:
            rec = spec.unpack_oob(p.oob)
            if rec is not None and rec.kind in cr.DATA_KINDS:
                lbas.append(rec.lba)
        # hand-built images may reuse an address: the driver gets the page's index as its address
        unique = [Page(i, p.oob, p.data) for i, p in enumerate(pages)]
        cases.append(cr.Case(unique, ck, nlba=max([LIM.capacity, *lbas]) + 1,
                             page_data=len(pages[0].data) if pages else 64, ppb=1, nblocks=max(len(pages), 1),
                             mlc=mlc or 0))
    for (pages, ck, r, _), g in zip(calls, cr.run_cases(cases)):
        g.map = {lba: (v, cs, None if a is None else pages[a].addr) for lba, (v, cs, a) in g.map.items()}
        g.valid = dict(Counter(a // PPB for _, _, a in g.map.values() if a is not None))
        assert_same(cr.expected(r, PPB), g, f"{len(pages)} pages, checkpoint {ck and ck.seq}: {r.rejected[:3]}")


def forge(rng: random.Random, pages: list[Page]) -> list[Page]:
    """A few forged but intact pages (CRC recomputed): group fields, flags, tags, vseqs, lbas, kinds
    (unknown ones too), format bytes and seqs changed; GC-like duplicate copies; pages dropped or reordered; forged COMMIT/REMAP/TRIM
    records (single pages or a piece of a 2-page group).  Addresses are renumbered to stay unique."""
    pages = list(pages)
    for _ in range(rng.randint(1, 8)):
        if not pages:
            break
        i = rng.randrange(len(pages))
        p, rec = pages[i], spec.unpack_oob(pages[i].oob)
        if rec is None:
            continue
        f = {k: rec[k] for k in ("kind", "flags", "group_len", "group_idx", "lba", "seq", "vseq", "tid", "format")}
        op = rng.randrange(5)
        if op == 0:
            name = rng.choice(("group_len", "group_idx", "flags", "tid", "vseq", "lba", "kind", "seq", "format"))
            f[name] = {
                "group_len": lambda: rng.randrange(5), "group_idx": lambda: rng.randrange(5),
                "flags": lambda: rng.randrange(16), "lba": lambda: rng.randrange(LIM.capacity),
                "tid": lambda: rng.choice((0, rec.tid + 1, spec.tag_of(max(0, rec.vseq - rng.randrange(4))))),
                "vseq": lambda: max(0, rec.vseq + rng.randrange(-3, 4)),
                "seq": lambda: max(0, rec.seq + rng.randrange(-2, 3)),
                "kind": lambda: rng.choice((Kind.DATA, Kind.GC_COPY, Kind.APPEND, Kind.CHECKPOINT, Kind.ERASED, 0x09)),
                "format": lambda: rng.choice((0, spec.OOB_FORMAT + 1)),  # intact CRC, unknown format: torn
            }[name]()
            pages[i] = Page(p.addr, spec.pack_oob(**f), p.data)
        elif op == 1:
            if f["kind"] in cr.DATA_KINDS:
                f["kind"] = Kind.GC_COPY
            pages.insert(rng.randrange(len(pages) + 1), Page(-1, spec.pack_oob(**f), p.data))
        elif op == 2:
            pages.pop(i)
        elif op == 3:
            kind = rng.choice((Kind.COMMIT, Kind.REMAP, Kind.TRIM))
            seq = rng.choice((rec.seq, rec.vseq + rng.randrange(4)))
            other = spec.unpack_oob(rng.choice(pages).oob) or rec
            entry = {Kind.COMMIT: dict(first_vseq=max(0, other.vseq - rng.randrange(3)), npages=rng.randrange(4), tid=1),
                     Kind.REMAP: dict(lba=rng.randrange(LIM.capacity - 3), first_vseq=max(0, other.vseq - other.group_idx),
                                      nlb=rng.randrange(1, 4)),
                     Kind.TRIM: dict(lba=rng.randrange(LIM.capacity), nlb=rng.randrange(1, 4))}[kind]
            n = rng.choice((1, 1, 2))
            idx = rng.randrange(n)
            oob = spec.pack_oob(kind=kind, seq=seq, vseq=seq + rng.choice((0, 0, 1)), group_len=n, group_idx=idx,
                                flags=int(idx == n - 1))
            data = spec.pack_record_page(kind, seq, [entry], 1, LIM.lba_size)
            pages.insert(rng.randrange(len(pages) + 1), Page(-1, oob, data))
        else:
            j = rng.randrange(len(pages))
            pages[i], pages[j] = pages[j], pages[i]
    return [Page(a, p.oob, p.data) for a, p in enumerate(pages)]


def test_forged_intact_pages_match_the_model():
    """Pages that pass every CRC but break the log's rules (what a firmware bug, or a format change,
    could write): both recoveries must still decide identically.  Images where two *different*
    events share a commit seq are skipped (their order is the one documented divergence)."""
    rng = random.Random(1)
    cases, models = [], []
    for seed in range(6):
        f = workload(300 + seed, 100)
        for c in random_cuts(f, random.Random(seed), 60):
            pages = forge(rng, c.pages)
            r = recover(pages, c.checkpoint)
            seen = {}
            if any(seen.setdefault(cseq, what) != what for cseq, what in r.accepted):
                continue
            cases.append(case(pages, c.checkpoint, nblocks=len(pages) // PPB + 1, runs=1))
            models.append(r)
    assert len(cases) > 300
    changed = 0
    for r, g in zip(models, cr.run_cases(cases)):
        assert not cr.differences(cr.expected(r, PPB), g), r.rejected[:4]
        changed += bool(r.rejected)
    assert changed > 50  # the forgeries do make recovery refuse things


# -- idempotence (trap 6) -------------------------------------------------------------------

@pytest.mark.parametrize("seed", range(3))
def test_recovery_after_its_own_checkpoint_keeps_the_map(seed):
    """A cut right after recovery wrote its checkpoint: recovering again from that checkpoint over the
    same flash gives the same map (and the same addresses)."""
    f = workload(200 + seed, 120)
    cuts = list(random_cuts(f, random.Random(seed), 25))
    first = cr.run_cases(case(c.pages, c.checkpoint) for c in cuts)
    again = []
    for c, g in zip(cuts, first):
        ck, locate = own_checkpoint(g)
        again.append(case(c.pages, ck, locate=locate))
    for c, g, h, a in zip(cuts, first, cr.run_cases(again), again):
        what = f"seed {seed} cut {c.k}"
        assert {k: (v, p) for k, (v, _, p) in g.map.items()} == {k: (v, p) for k, (v, _, p) in h.map.items()}, what
        assert all(cs == -1 for _, cs, _ in h.map.values()), what  # all decided by the checkpoint now
        assert h.report["next_seq"] >= g.report["next_seq"] + spec.LOG.SEQ_RESUME_GAP - 1, what
        assert_same(cr.expected(recover(c.pages, a.checkpoint), PPB), h, what)


# -- the comparison bites -------------------------------------------------------------------

def _bound_plain_write(f: LogFTL, cut, r):
    """A page holding a plain write the model keeps, written after the checkpoint (so the page is its
    only proof), whose LBA has an older version on flash."""
    copies = cr.intact_copies(cut.pages)
    floor = cut.checkpoint.seq if cut.checkpoint else 0
    for p in cut.pages:
        rec = spec.unpack_oob(p.oob)
        if rec and rec.kind == Kind.DATA and rec.group_len == 1 and not rec.flags & ~1 and rec.vseq >= floor and \
                r.map.get(rec.lba) and r.map[rec.lba].vseq == rec.vseq and len(copies[rec.vseq]) == 1 and \
                any(lba == rec.lba for v, cs in copies.items() if v < rec.vseq for lba, _, _ in cs):
            return p, rec
    raise AssertionError("no suitable page")


def test_corrupted_oob_crc_makes_the_page_absent():
    f = workload(3, 150)
    cut = f.cut(window=0)
    r = recover(cut.pages, cut.checkpoint)
    page, rec = _bound_plain_write(f, cut, r)
    bad = bytearray(page.oob)
    bad[spec.OOB_CRC_SPAN] ^= 0x01  # one bit of the stored CRC
    pages = [Page(p.addr, bytes(bad), p.data) if p is page else p for p in cut.pages]
    good_c, bad_c = cr.run_cases([case(cut.pages, cut.checkpoint), case(pages, cut.checkpoint)])
    r_bad = recover(pages, cut.checkpoint)
    # the firmware and the model agree on the corrupted image too
    assert not cr.differences(cr.expected(r_bad, PPB), bad_c)
    # ... and the page is absent: one more torn page, its version no longer bound
    assert bad_c.report["torn"] == good_c.report["torn"] + 1
    assert good_c.map[rec.lba][0] == rec.vseq and bad_c.map.get(rec.lba, (None,))[0] != rec.vseq
    # the comparison sees the difference when only one side gets the corrupted page
    diff = cr.differences(cr.expected(r, PPB), bad_c)
    assert any(d.startswith(f"lba {rec.lba}:") for d in diff) and any(d.startswith("torn") for d in diff)


def test_unreadable_page_is_absent():
    """A page the NAND controller cannot read (uncorrectable) is absent, like a torn one."""
    f = workload(3, 150)
    cut = f.cut(window=0)
    r = recover(cut.pages, cut.checkpoint)
    page, rec = _bound_plain_write(f, cut, r)
    got = cr.run_case(case(cut.pages, cut.checkpoint, unreadable=frozenset({page.addr})))
    want = recover([p for p in cut.pages if p is not page] + [Page(page.addr, bytes(spec.OOB.size), b"")],
                   cut.checkpoint)
    assert not cr.differences(cr.expected(want, PPB), got)


def test_torn_data_under_an_intact_oob_at_a_block_end():
    """A cut tears the page being programmed, the last of its block's written prefix, and its OOB can
    survive while its data does not (the long campaign, trial 459).  Firmware and model both drop
    that page (one more torn page, the older version stands); a page further back with unreadable
    data stays bound (a media error the host must see, not a tear)."""
    ppa_ppb = 1 << spec.PPA.decompose("ppa", 0xFFFFFFFF)["page"].bit_length()  # blocks as spec.PPA

    def as_ppa(addr: int) -> int:
        return spec.pack_ppa(0, 0, 0, addr // PPB, addr % PPB)

    def run(pages):
        got = cr.run_case(case(pages, cut.checkpoint, ppb=ppa_ppb))
        want = recover(pages, cut.checkpoint)
        assert not cr.differences(cr.expected(want, ppa_ppb), got)
        assert got.report["data_reads_nonrecord"] == 0
        return want

    f = workload(3, 150)
    cut = f.cut(window=0)
    pages = [Page(as_ppa(p.addr), p.oob, p.data) for p in cut.pages]
    base = run(pages)
    written: dict[int, list[Page]] = {}
    for p in sorted(pages, key=lambda p: p.addr):
        written.setdefault(p.addr // ppa_ppb, []).append(p)
    ends = {blk[-1].addr for blk in written.values()}
    bound = {b.addr: lba for lba, b in base.map.items()}
    end = next(p for p in pages if p.addr in ends and p.addr in bound)
    mid = next(p for p in pages if p.addr not in ends and p.addr in bound)

    torn = run([Page(p.addr, p.oob, p.data, data_ok=p is not end) for p in pages])
    assert torn.torn == base.torn + 1
    lba = bound[end.addr]
    assert torn.map.get(lba) is None or torn.map[lba].addr != end.addr

    media = run([Page(p.addr, p.oob, p.data, data_ok=p is not mid) for p in pages])
    assert media.torn == base.torn and media.map[bound[mid.addr]].addr == mid.addr


def test_corrupted_record_payload_voids_the_record():
    f = workload(5, 150)
    cut = f.cut(window=0)
    recs = [p for p in cut.pages if (o := spec.unpack_oob(p.oob)) and o.kind in (Kind.COMMIT, Kind.TRIM, Kind.REMAP)]
    assert recs
    for victim in recs[:8]:
        data = bytearray(victim.data)
        data[spec.REC_HDR.size] ^= 0x80  # first entry byte: the payload CRC must catch it
        pages = [Page(p.addr, p.oob, bytes(data)) if p is victim else p for p in cut.pages]
        got = cr.run_case(case(pages, cut.checkpoint))
        want = recover(pages, cut.checkpoint)
        assert not cr.differences(cr.expected(want, PPB), got)
        assert got.report["torn"] == recover(cut.pages, cut.checkpoint).torn + 1


def test_full_page_table_is_reported():
    f = workload(1, 60)
    cut = f.cut(window=0)
    got = cr.run_case(case(cut.pages, cut.checkpoint, cap=len(cut.pages) // 2))
    assert got.rc == -1  # AF_REC_EFULL


# -- it is firmware: builds for the rv32 CPU with nothing but memcpy/memset -------------------

RV_GCC = "riscv64-unknown-elf-gcc"


@pytest.mark.skipif(shutil.which(RV_GCC) is None, reason="no riscv64-unknown-elf-gcc")
def test_compiles_for_rv32_without_libraries(tmp_path):
    header = runner.spec_header()
    obj = tmp_path / "recovery.o"
    subprocess.run([RV_GCC, "-march=rv32im", "-mabi=ilp32", "-Os", "-ffreestanding", "-std=c11", "-Wall", "-Wextra",
                    "-Werror", "-Wno-unused-function", f"-I{header.parent}", f"-I{cr.FW}", "-c",
                    str(cr.FW / "recovery.c"), "-o", str(obj)], check=True)
    undefined = subprocess.run([RV_GCC.replace("gcc", "nm"), "-u", str(obj)], capture_output=True, text=True,
                               check=True).stdout.split()
    assert set(undefined) - {"U"} <= {"memcpy", "memset"}, undefined  # no malloc, no soft-float, no libgcc


def test_compiles_for_ilp32(tmp_path):
    header = runner.spec_header()
    subprocess.run(["gcc", "-m32", "-ffreestanding", "-fsyntax-only", *cr.CFLAGS, f"-I{header.parent}",
                    f"-I{cr.FW}", str(cr.FW / "recovery.c")], check=True)
