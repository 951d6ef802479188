"""How the campaign draws a trial's cut (sim/campaign/draw.py, ``Trial.draw``).
Pure Python: no simulation.

Version 1 is what the long campaign's first trials ran with (``make
campaign-long``'s ``--draw-v1-below``): a rerun with ``--ids`` must draw them
again exactly, so version 1 may not change.  Version 2 arms kind cuts at the
first page of the kind and erase cuts on every target (version 1's k = 2 and
single-target erases ended without a cut 15-43 % of the time)."""

import json
from pathlib import Path

from sim.campaign import cli, draw, ledger, report

ROOT = Path(__file__).resolve().parents[2]
RESULTS = ROOT / "docs" / "results"

# a seasoned base's calibration: its boot programs a checkpoint page on target 0 and erases a few blocks
CAL = {"programs": [1, 0, 0, 0], "erases": [2, 3, 3, 3],
       "by_kind": {k: [1 if k == "CHECKPOINT" else 0, 0, 0, 0]
                   for k in ("COMMIT", "REMAP", "CHECKPOINT", "GC_COPY", "TRIM")}}


def draws(site: str, version: int, n: int = 400) -> list[draw.Trial]:
    return [draw.Trial.draw(i, 100003 + i, site, 40, "mix", CAL, version=version) for i in range(n)]


def test_version_1_draws_what_the_long_campaign_ran():
    # the ledger's faults are the last thing a draw takes from its random source: one more or one fewer
    # draw before them (a changed rule) changes them.  Trials 5000-6758 ran on bases calibrated as CAL.
    ledger = [json.loads(line) for line in (RESULTS / "campaign_long.jsonl").read_text().splitlines()]
    ran = [r for r in ledger if 5000 <= r.get("id", -1) <= 6758]
    assert len(ran) > 1500
    for r in ran:
        t = draw.Trial.draw(r["id"], 100003 + r["id"], draw.SITES[r["id"] % len(draw.SITES)], 40,
                                "mix", CAL, version=1)
        assert (t.site, t.faults) == (r["site"], r.get("faults", "")), r


def test_version_1_kind_cuts_reach_the_second_page_and_erases_one_target():
    ks = {t.arm["k"] for t in draws("kind:commit", 1)}
    assert ks == {1, 2}
    erases = [t for t in draws("erase", 1) if t.arm]
    assert erases and all(len(t.arm["targets"]) == 1 and 1 <= t.arm["k"] <= 3 for t in erases)


def test_version_2_cuts_the_first_page_of_a_kind_on_any_target():
    for site in ("kind:commit", "kind:remap", "kind:trim", "kind:gc"):
        armed = [t for t in draws(site, 2) if t.arm]
        assert armed, site
        assert all(t.arm["k"] == 1 and t.arm["targets"] == [0, 1, 2, 3] for t in armed), site


def test_version_2_cuts_an_early_erase_of_whichever_target_gets_there_first():
    armed = [t for t in draws("erase", 2) if t.arm]
    booted = [t for t in draws("erase", 2) if t.cuts]
    assert armed and booted                     # a quarter still land in the boot's erases
    assert all(t.arm["targets"] == [0, 1, 2, 3] for t in armed)
    ks = [t.arm["k"] for t in armed]
    assert set(ks) == {1, 2} and ks.count(1) > 2 * ks.count(2)


def test_draw_v1_below_splits_a_campaign_by_trial_id():
    trials = draw.draw_trials(range(6790, 6810), seed=1, sites=draw.SITES, commands=40, faults="mix",
                                  cal=CAL, draw_v1_below=6800)
    for t in trials:
        version = 1 if t.id < 6800 else 2
        assert t == draw.Trial.draw(t.id, 100003 + t.id, t.site, 40, "mix", CAL, version=version)
    # the two versions differ somewhere in the range (else the split proves nothing)
    assert any(draw.Trial.draw(t.id, 100003 + t.id, t.site, 40, "mix", CAL, version=1) != t
               for t in trials if t.id >= 6800)


def test_the_report_compares_no_cut_shares_across_the_split(tmp_path):
    from types import SimpleNamespace
    args = SimpleNamespace(count=40, seed=1, commands=40, faults="mix", fresh=False, draw_v1_below=20)

    def result(i, outcome):
        return {"id": i, "site": "kind:commit" if i % 2 else "program", "outcome": outcome,
                "cut_seen": outcome == "pass", "in_flight": 1, "build": "gateware-x", "wall_s": 1.0,
                "chain_start": i}
    before = [result(i, "no-cut" if i in (1, 3, 5) else "pass") for i in range(20)]
    after = [result(i, "no-cut" if i == 21 else "pass") for i in range(20, 40)]
    text = report.report(before + after, tmp_path / "r.md", args)
    # the program trials do not count: only erase and kind sites are armed differently
    assert ("Trials from 20 on are drawn by version 2" in text and "no cut came in 1 of 10 (10 %)" in text
            and "against 3 of 10 (30 %) before" in text), text
    assert "version 2" not in report.report(before, tmp_path / "r1.md", args)


def test_boot_cuts_are_drawn_apart_and_change_nothing_else():
    """--boot-cuts adds cuts in the boots after a trial's cut from a random stream of its own: every other
    field of the trial is what it was without them (the long campaign's trials draw again as they ran)."""
    for site in draw.SITES:
        for t in draws(site, 2, n=40):
            more = draw.Trial.draw(t.id, t.seed, site, 40, "mix", CAL, version=2, boot_cuts=3)
            assert len(more.boot_cuts) == 3 and t.boot_cuts == []
            more.boot_cuts = []
            assert more == t, site
    cuts = [c for t in draws("program", 2, n=200) for c in
            draw.draw_boot_cuts(t.seed, 3)]
    instants = [c["power_cut_ns"] for c in cuts if "power_cut_ns" in c]
    erases = [c["power_cut_erase"] for c in cuts if "power_cut_erase" in c]
    programs = [c for c in cuts if "power_cut_program" in c]
    # all three kinds, a third each (give or take), inside their ranges
    assert all(len(x) > len(cuts) / 5 for x in (instants, erases, programs)), (len(instants), len(erases), len(programs))
    assert all(draw.BOOT_CUT_NS[0] <= ns <= draw.BOOT_CUT_NS[1] for ns in instants)
    assert set(erases) == {1, 2, 3} and all(c["power_cut_program"] == 1 for c in programs)
    assert all(0.05 <= c["power_cut_progress"] <= 0.95 for c in cuts if "power_cut_progress" in c)


def test_the_report_counts_the_boot_cuts_that_came(tmp_path):
    from types import SimpleNamespace
    args = SimpleNamespace(count=3, seed=1, commands=30, faults="", fresh=True)
    rs = [{"id": i, "site": "program", "outcome": "pass", "cut_seen": True, "in_flight": 1, "build": "gateware-x",
           "wall_s": 1.0, "chain_start": i, "boot_cuts": bc}
          for i, bc in enumerate((["during boot"] * 3, ["during boot", "after boot", "during boot"], []))]
    rs[2]["site"], rs[2]["recovery_cut"] = "recovery", "during boot"
    rs[0]["faults"] = "bits"   # two fault sets: the report has its per-fault table, which an archive reads
    text = report.report(rs, tmp_path / "r.md", args)
    assert "9 power cuts judged: 3 trials lost power at their site, 6 more cuts came while recovering" in text, text
    assert "5 of those came from --boot-cuts, which armed a cut in 6 boots after a cut" in text, text
    assert ledger.ledger_entry(rs[1])["boot_cuts"] == ["during boot", "after boot", "during boot"]
    # a report with boot cuts still archives (the cuts line), for a ledger that outlives its results
    archived = ledger.archive_from_report((tmp_path / "r.md").read_text(), "X")
    assert (archived["cut_seen"], archived["recovery_cut"]) == (3, 6)


def test_bad_counts_are_refused_before_anything_is_built(tmp_path, capsys):
    """--chain below 1 and --boot-cuts below 0 end at the argument check: no directory, base or build."""
    import pytest
    for bad, says in ((["--chain", "0"], "--chain 0: want 1 or more"),
                      (["--boot-cuts", "-1"], "--boot-cuts -1: want 0 or more")):
        d = tmp_path / bad[0].strip("-")
        with pytest.raises(SystemExit) as e:
            cli.main(["--dir", str(d), *bad])
        assert e.value.code == 2
        assert says in capsys.readouterr().err
        assert not d.exists()
