"""The long campaign's resolved failures (docs/results/campaign_long.resolved.json, beside its ledger; read by
sim/campaign/ledger.py): they are its trials only, the report says so, and a run whose every failure is
resolved exits 0.  Pure Python: no simulation."""

from pathlib import Path
from types import SimpleNamespace

from sim.campaign import ledger, report

ROOT = Path(__file__).resolve().parents[2]
RESULTS = ROOT / "docs" / "results"
RESOLVED = ledger.resolved_notes(RESULTS / "campaign_long.jsonl")


def test_resolved_belongs_to_the_long_campaigns_ledger_only():
    long_run = SimpleNamespace(ledger=RESULTS / "campaign_long.jsonl")
    assert ledger.resolved_for(long_run) == RESOLVED and RESOLVED
    # another campaign's trial 149 is another trial: nothing of the long campaign's notes applies
    for other in (SimpleNamespace(ledger=RESULTS / "campaign_mlc.jsonl"), SimpleNamespace(ledger=None),
                  SimpleNamespace()):
        assert ledger.resolved_for(other) == {}
    assert report._resolved(149, {}) == ""
    assert report._resolved(149, RESOLVED).startswith("\n  resolved: the harness")


def test_the_report_counts_the_resolved():
    ids = sorted(RESOLVED)[:3]
    fails = [{"id": i} for i in ids[:2]]
    assert report.n_resolved_text(fails, [{"id": ids[2]}], RESOLVED) == " (all resolved)"
    assert report.n_resolved_text(fails + [{"id": 10**9}], [], RESOLVED) == " (2 resolved)"
    assert report.n_resolved_text(fails, [], {}) == ""


def test_every_resolved_trial_is_a_failure_in_the_long_report():
    # a note on a trial that did not fail would be a typo in an id
    text = (RESULTS / "campaign_long.md").read_text()
    for i in RESOLVED:
        assert f"\n* trial {i} (" in text, f"trial {i} is in RESOLVED but not among the report's failures"
