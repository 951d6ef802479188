"""Power-cut enumeration on the log model: random workloads over every verb
with GC and checkpoints, cut after every stream entry with random (and, for a
small run, all) fates of the in-flight pages; recover() must give zero oracle
violations.  Then the same enumeration must catch deliberately wrong
recoveries, so the oracle is known to bite."""

import itertools
import random

import pytest

from atomflash import spec
from atomflash.model import Flash, Limits, LogFTL, check_after_cut, recover
from atomflash.model.workload import Workload
from atomflash.spec import Kind

LIM = Limits(capacity=20, lba_size=64, max_atomic_pages=6, max_open_tx=3, max_pending=24, max_remap_triples=3)


def run(seed: int, steps: int) -> LogFTL:
    f = LogFTL(LIM, Flash(96, 8))
    Workload(f, random.Random(seed), firmware=0.08).run(steps)
    return f


def judge(f: LogFTL, cut, recover_fn=recover):
    r = recover_fn(cut.pages, cut.checkpoint)
    return check_after_cut(cut.ops, r.contents(), lba_size=LIM.lba_size)


@pytest.mark.parametrize("seed", range(4))
def test_every_cut_point_with_random_fates(seed):
    f = run(seed, 110)
    assert f.gc_copies or seed, "the workload should exercise GC"
    for k in f.cut_points():
        for rep in range(2):
            cut = f.cut(k, window=5, rng=random.Random(1000 * k + rep))
            bad = judge(f, cut)
            assert not bad, f"seed {seed} cut {k} fates {cut.in_flight}: {bad[:3]}"


def test_full_image_recovers_the_semantic_model():
    for seed in range(6):
        f = run(100 + seed, 150)
        cut = f.cut(window=0)
        assert recover(cut.pages, cut.checkpoint).contents() == f.sem.contents()
        for lba in range(LIM.capacity):
            assert f.read(lba, 1).data == f.sem.read(lba, 1).data


def test_every_cut_point_with_every_fate_combination():
    f = run(7, 45)
    checked = 0
    for k in f.cut_points():
        window = f.in_flight(k, 3)
        for fates in itertools.product(("done", "missing", "torn"), repeat=len(window)):
            cut = f.cut(k, window=3, rng=random.Random(k), outcomes=dict(zip(window, fates)))
            bad = judge(f, cut)
            assert not bad, f"cut {k} fates {cut.in_flight}: {bad[:3]}"
            checked += 1
    assert checked > 500


@pytest.mark.slow
@pytest.mark.parametrize("seed", range(20))
def test_long_random_cuts(seed):
    f = run(10_000 + seed, 300)
    for k in f.cut_points():
        cut = f.cut(k, window=8, rng=random.Random(k))
        assert not judge(f, cut)


# -- the oracle catches wrong recoveries ----------------------------------------------------

def naive_recover(pages, checkpoint=None):
    """Trust every intact data page, newest vseq wins: no group, commit or remap proofs
    (the classic trap-1/trap-9 bug)."""
    r = recover(pages, checkpoint)
    best = {}
    for p in pages:
        rec = spec.unpack_oob(p.oob)
        if rec is None or rec.kind not in (Kind.DATA, Kind.GC_COPY):
            continue
        if rec.vseq > best.get(rec.lba, (-1,))[0]:
            best[rec.lba] = (rec.vseq, p.data)
    out = dict(r.contents())
    for lba, (vseq, data) in best.items():
        if lba not in r.map or vseq > r.map[lba].vseq:
            out[lba] = data
    r.data = out
    return r


def forgetful_recover(pages, checkpoint=None):
    """Drops the newest bound LBA: an acknowledged write goes missing."""
    r = recover(pages, checkpoint)
    if r.map:
        newest = max(r.map, key=lambda lba: r.map[lba].cseq)
        r.data.pop(newest, None)
    return r


def no_checkpoint_recover(pages, checkpoint=None):
    """Ignores the checkpoint: once GC has erased proofs, committed state is lost."""
    return recover(pages, None)


@pytest.mark.parametrize("wrong", [naive_recover, forgetful_recover, no_checkpoint_recover],
                         ids=lambda f: f.__name__)
def test_oracle_catches_wrong_recovery(wrong):
    rules = set()
    for seed in range(3):
        f = run(seed, 110)
        for k in f.cut_points():
            cut = f.cut(k, window=5, rng=random.Random(k))
            rules |= {v.rule for v in judge(f, cut, wrong)}
    assert rules, f"{wrong.__name__} went unnoticed"
    if wrong is naive_recover:
        assert {"partial", "foreign"} & rules
