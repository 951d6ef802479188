"""The firmware's GC policies (firmware/policy.c) built for the host with sim/gcsim's stand-in for the
core: victim choice, hot/cold placement, exact write amplification on traces worked by hand, and nothing
lost across relocation on a 1,024-block device.  Each test runs in well under a second once built."""

from __future__ import annotations

import pytest

from atomflash import spec
from sim import gcsim

G = spec.GcPolicy
P = spec.GcPlacement


def test_greedy_picks_the_block_with_fewest_valid_pages():
    blocks = [(0, 40, 10), (1, 12, 900), (2, 30, 5), (3, 12, 1), (4, 64, 0), (5, 63, 2)]
    victim, scores = gcsim.pick(G.GREEDY, 64, 1000, blocks)
    assert victim == 1                       # fewest valid; the first of a tie (block 3)
    assert 4 not in scores                   # a full block frees nothing: never scored
    assert gcsim.pick(G.GREEDY, 64, 1000, [(7, 64, 0)])[0] is None


@pytest.mark.parametrize("policy", [G.COST_BENEFIT, G.COST_BENEFIT_LFS])
def test_cost_benefit_prefers_an_old_cold_block_to_a_young_emptier_one(policy):
    # block 0: 20 of 64 valid, closed long ago; block 1: 10 valid, closed just now
    now = 100_000
    victim, scores = gcsim.pick(policy, 64, now, [(0, 20, 1_000), (1, 10, now - 500)])
    assert victim == 0
    assert gcsim.pick(G.GREEDY, 64, now, [(0, 20, 1_000), (1, 10, now - 500)])[0] == 1
    # the same age: the emptier block wins; an empty block wins over any age
    assert gcsim.pick(policy, 64, now, [(0, 20, 1_000), (1, 10, 1_000)])[0] == 1
    assert gcsim.pick(policy, 64, now, [(0, 1, 0), (1, 0, now - 1)])[0] == 1


def test_cost_benefit_scores_are_the_formulas():
    ppb, now = 64, 10_000
    _, cb = gcsim.pick(G.COST_BENEFIT, ppb, now, [(0, 16, 2_000)])
    _, lfs = gcsim.pick(G.COST_BENEFIT_LFS, ppb, now, [(0, 16, 2_000)])
    age = now - 2_000
    assert cb[0] == (ppb - 16) * age * 1024 // (2 * 16)         # (1 - u) / 2u x age, x 1024
    assert lfs[0] == (ppb - 16) * age * 1024 // (ppb + 16)       # (1 - u) / (1 + u) x age, x 1024


def test_policy_names_are_the_specs():
    for p in G:
        name = p.name.lower().replace("_", "-")
        assert gcsim.named(name) == (int(p), name)
    assert gcsim.named("lru")[0] == -1


def test_sequential_overwrites_copy_nothing():
    # every LBA rewritten in order: each victim is a block of superseded pages, WA exactly 1
    dev = dict(dies=2, blocks_per_die=16, ppb=8)
    lbas = 200
    for policy in G:
        r = gcsim.run(lbas=lbas, policy=policy, trace=list(range(lbas)) * 5, **dev)
        assert (r.host, r.copies, r.lost) == (5 * lbas, 0, 0)
        assert r.victims > 0 and r.wa == 1.0


def test_write_amplification_of_a_trace_worked_by_hand():
    # one die, 3 blocks (A, B, C: the pool hands them out in that order) of 4 pages, 6 LBAs, no fill; GC
    # below one erased block (low 1, reserve 0).  Writes 0 1 4 5 fill A; 0 1 2 3 fill B (A keeps 4, 5);
    # 2 opens C, the last erased block; 3 finds none: GC's victim is A (2 valid, B has 3), whose 4 and 5
    # move into C beside 2, A is erased, and 3 takes C's last page.  10 host pages, 2 copies.
    trace = [0, 1, 4, 5, 0, 1, 2, 3, 2, 3]
    for policy in G:   # every policy: A is the emptier and the older
        r = gcsim.run(lbas=6, dies=1, blocks_per_die=3, ppb=4, low=1, reserve=0, fill=False, trace=trace,
                      policy=policy)
        assert (r.host, r.copies, r.victims, r.victim_valid, r.lost) == (10, 2, 1, 2, 0)
        assert r.wa == 12 / 10
    # the same trace with GC's copies in a block of their own: C is the host's, no erased block is left for
    # the copies' own, so A's 2 valid pages do not fit and GC collects nothing (gc.c's copy budget)
    r = gcsim.run(lbas=6, dies=1, blocks_per_die=3, ppb=4, low=1, reserve=0, fill=False, trace=trace,
                  placement=P.SEPARATE)
    assert (r.host, r.copies, r.victims, r.lost) == (10, 0, 0, 0)


def test_separate_placement_keeps_gc_copies_out_of_the_hosts_open_blocks():
    common = dict(lbas=3000, dies=4, blocks_per_die=16, ppb=64, warm=6000, measure=6000, hot_writes=900,
                  hot_lbas=100)
    shared = gcsim.run(placement=P.SHARED, **common)
    separate = gcsim.run(placement=P.SEPARATE, **common)
    assert shared.copies > 0 and separate.copies > 0
    assert shared.mixed_blocks > 0            # the core's way: copies land beside the host's writes
    assert separate.mixed_blocks == 0         # no block ever holds both
    assert shared.lost == separate.lost == 0


@pytest.mark.parametrize("policy", list(G))
@pytest.mark.parametrize("placement", list(P))
def test_nothing_lost_across_relocation_on_1024_blocks(policy, placement):
    # 1,024 blocks of 64 pages at 90 % logical fill, skewed writes: many thousand copies, then every LBA
    # must read its newest version through the map, and every block's count must equal the map's
    r = gcsim.run(lbas=60_000, dies=4, blocks_per_die=256, ppb=64, policy=policy, placement=placement,
                  warm=0, measure=120_000, hot_writes=800, hot_lbas=200, ckpt=1024)
    assert r.pages == 1024 * 64
    assert r.copies > 50_000 and r.ckpts > 0
    assert r.lost == 0 and r.stuck == 0


def test_checkpoint_floor_keeps_young_blocks_out_until_a_checkpoint_covers_them():
    # with automatic checkpoints rare, GC must take its own (gc.c pick_covered) and still never stall
    r = gcsim.run(lbas=700, dies=2, blocks_per_die=8, ppb=64, warm=3000, measure=3000, ckpt=100_000)
    assert r.ckpts > 0 and r.lost == 0 and r.stuck == 0


def test_greedy_follows_the_many_pages_limit_of_theory():
    # uniform random writes, 1,024 blocks of 256 pages: greedy within a few per cent of the FIFO fixed point the
    # bench plots (sim/bench_gc.py), and above the (1 + rho) / (2 rho) curve of bench_soc at rho 0.42
    from sim.bench_gc import greedy_wa_many_pages
    from sim.bench_soc import greedy_wa

    rho = 0.42
    pages = 1024 * 256
    lbas = round(pages / (1 + rho))
    r = gcsim.run(lbas=lbas, dies=4, blocks_per_die=256, ppb=256, warm=3 * lbas, measure=3 * lbas, seed=5)
    assert r.wa == pytest.approx(greedy_wa_many_pages(rho), rel=0.04)
    assert r.wa > greedy_wa(rho) * 1.05
