"""The long campaign's resolved failures (`sim/campaign.py`, ``RESOLVED``): they are its trials
only, the report says so, and a run whose every failure is resolved exits 0.
Pure Python: no simulation."""

import sys
from pathlib import Path
from types import SimpleNamespace

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "sim"))

import campaign  # noqa: E402


def test_resolved_belongs_to_the_long_campaigns_ledger_only():
    long_run = SimpleNamespace(ledger=ROOT / "docs" / "campaign_long.jsonl")
    assert campaign.resolved_for(long_run) is campaign.RESOLVED and campaign.RESOLVED
    # another campaign's trial 149 is another trial: nothing of the long campaign's notes applies
    for other in (SimpleNamespace(ledger=ROOT / "docs" / "campaign_mlc.jsonl"), SimpleNamespace(ledger=None),
                  SimpleNamespace()):
        assert campaign.resolved_for(other) == {}
    assert campaign._resolved(149, {}) == ""
    assert campaign._resolved(149, campaign.RESOLVED).startswith("\n  resolved: the harness")


def test_the_report_counts_the_resolved():
    ids = sorted(campaign.RESOLVED)[:3]
    fails = [{"id": i} for i in ids[:2]]
    assert campaign.n_resolved_text(fails, [{"id": ids[2]}], campaign.RESOLVED) == " (all resolved)"
    assert campaign.n_resolved_text(fails + [{"id": 10**9}], [], campaign.RESOLVED) == " (2 resolved)"
    assert campaign.n_resolved_text(fails, [], {}) == ""


def test_every_resolved_trial_is_a_failure_in_the_long_report():
    # a note on a trial that did not fail would be a typo in an id
    text = (ROOT / "docs" / "campaign_long.md").read_text()
    for i in campaign.RESOLVED:
        assert f"\n* trial {i} (" in text, f"trial {i} is in RESOLVED but not among the report's failures"
