"""sim/simboot.check_runs: the SoC tests' `io check` commands cover exactly the expected LBAs."""

from sim.simboot import check_runs


def test_check_runs_cover_each_lba_once_within_aligned_runs():
    want = {**{lba: 11 for lba in range(0, 20)}, 32: 12, 33: 12, 34: 0, 200: 11, 201: 11}
    runs = check_runs(want)
    assert runs == [(11, 0, 8), (11, 8, 8), (11, 16, 4), (12, 32, 2), (0, 34, 1), (11, 200, 2)]
    covered = {lba + k: seed for seed, lba, n in runs for k in range(n)}
    assert covered == want
    assert all(n <= 8 and (lba % 8) + n <= 8 for _, lba, n in runs)   # never across a multiple of 8
    assert check_runs({}) == []
    assert check_runs({5: 1, 6: 1, 7: 1, 8: 1}) == [(1, 5, 3), (1, 8, 1)]
