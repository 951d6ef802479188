"""The long campaign's ledger (`python -m sim.campaign --ledger`, sim/campaign/ledger.py): a committed record
of the results, so a campaign resumes on a machine whose build directory is
empty, and the archived parts of it (counts only, recovered from a report
when the raw results are gone).  Pure Python: no simulation."""

import json
import random
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

from sim.campaign import draw, ledger, report

ROOT = Path(__file__).resolve().parents[2]

ARGS = SimpleNamespace(count=100, seed=1, commands=40, faults="mix", fresh=False)


def fake_results(ids, rng: random.Random) -> list[dict]:
    out = []
    for i in ids:
        outcome = rng.choice(["pass"] * 6 + ["no-cut", "error"])
        r = {"id": i, "site": draw.SITES[i % len(draw.SITES)], "seed": i,
             "faults": rng.choice(["", "bits", "program"]), "outcome": outcome, "cut_seen": outcome != "no-cut",
             "in_flight": rng.randrange(6), "commands": 40, "build": f"gateware-{i // 30:016x}",
             "wall_s": 12.5, "detail": "Boom: x" if outcome == "error" else "", "phases": {"boot": 1.0},
             "chain_start": i - i % 8}
        if r["site"] == "recovery" and r["cut_seen"]:
            r["recovery_cut"] = "during boot"
        if outcome == "error":
            r["replay"] = f"python -m sim.campaign --replay t{i:05d}/trial.json"
        out.append(r)
    return out


def table_of(text: str) -> str:
    """A report's tables and counts (its first lines name the command that wrote it)."""
    return text.split("\n\n", 2)[2].split("\n\nBuilds")[0]


def test_an_archive_of_a_report_reproduces_its_counts(tmp_path):
    rng = random.Random(7)
    results = fake_results(range(60), rng)
    report.report(results, tmp_path / "full.md", ARGS)
    archived = ledger.archive_from_report((tmp_path / "full.md").read_text(), "the report at X")
    assert archived["ids"] == [0, 59] and archived["trials"] == 60
    assert sorted(f["id"] for f in archived["failures"]) == [r["id"] for r in results if r["outcome"] == "error"]
    report.report([], tmp_path / "archived.md", ARGS, [archived])
    assert table_of((tmp_path / "archived.md").read_text()) == table_of((tmp_path / "full.md").read_text())


def test_archived_counts_and_new_results_add_up(tmp_path):
    rng = random.Random(8)
    old, new = fake_results(range(40), rng), fake_results(range(40, 70), rng)
    report.report(old, tmp_path / "old.md", ARGS)
    archived = ledger.archive_from_report((tmp_path / "old.md").read_text(), "the report at X")
    report.report(old + new, tmp_path / "all.md", ARGS)
    report.report(new, tmp_path / "merged.md", ARGS, [archived])
    merged = (tmp_path / "merged.md").read_text()
    # counts per site, fault set and outcome are sums; the means of ops in flight are rounded per part
    strip = lambda t: [ln.rsplit("|", 2)[0] for ln in table_of(t).splitlines()]  # noqa: E731
    assert strip(merged) == strip((tmp_path / "all.md").read_text())
    assert "70 of 100 trials done" in merged
    assert "trials 0-39 (40), counts only: the report at X" in merged


def test_a_campaign_resumes_from_its_ledger_alone(tmp_path):
    """--report-only over a ledger and an empty --dir: the ledger's trials and archive are the campaign."""
    rng = random.Random(9)
    old, new = fake_results(range(20), rng), fake_results(range(20, 35), rng)
    report.report(old, tmp_path / "old.md", ARGS)
    ledger_file = tmp_path / "ledger.jsonl"
    with open(ledger_file, "w") as fh:
        fh.write(json.dumps({"archived": ledger.archive_from_report((tmp_path / "old.md").read_text(), "X")}) + "\n")
        for r in new:
            e = ledger.ledger_entry(r)
            assert "phases" not in e and "seed" not in e   # a few fields per trial
            assert e["chain_start"] == r["chain_start"]      # a failure's chain can run again (--ids)
            fh.write(json.dumps(e) + "\n")
    trials, archived = ledger.read_ledger(ledger_file)
    assert sorted(trials) == list(range(20, 35)) and ledger.archived_ids(archived) == set(range(20))
    r = subprocess.run([sys.executable, "-m", "sim.campaign", "--dir", str(tmp_path / "empty"),
                        "--count", "100", "--faults", "mix", "--ledger", str(ledger_file), "--report",
                        str(tmp_path / "r.md"), "--report-only"], capture_output=True, text=True, timeout=120,
                       cwd=ROOT)
    assert r.returncode == 0, r.stderr
    assert "35 of 100 trials done" in (tmp_path / "r.md").read_text()
    # results a run appended to its --dir but not yet to the ledger go into the ledger
    (tmp_path / "empty" / "results.jsonl").write_text(json.dumps(fake_results([35], rng)[0]) + "\n")
    r = subprocess.run([sys.executable, "-m", "sim.campaign", "--dir", str(tmp_path / "empty"),
                        "--count", "100", "--faults", "mix", "--ledger", str(ledger_file), "--report",
                        str(tmp_path / "r.md"), "--report-only"], capture_output=True, text=True, timeout=120,
                       cwd=ROOT)
    assert r.returncode == 0, r.stderr
    assert sorted(ledger.read_ledger(ledger_file)[0]) == list(range(20, 36))
    assert "36 of 100 trials done" in (tmp_path / "r.md").read_text()


def test_a_record_cut_short_is_skipped(tmp_path, capsys):
    """A run killed while it appended leaves half a line: the ledger still reads, that trial runs again."""
    ledger_file = tmp_path / "ledger.jsonl"
    whole = [ledger.ledger_entry(r) for r in fake_results(range(3), random.Random(10))]
    ledger_file.write_text("".join(json.dumps(e) + "\n" for e in whole) + json.dumps(whole[0])[:25])
    trials, archived = ledger.read_ledger(ledger_file)
    assert sorted(trials) == [0, 1, 2] and not archived
    assert "ledger.jsonl:4: not a whole record" in capsys.readouterr().err
    # a run started on it adds what it finds in its --dir on a line of its own
    (tmp_path / "d").mkdir()
    (tmp_path / "d" / "results.jsonl").write_text(json.dumps(fake_results([3], random.Random(11))[0]) + "\n")
    r = subprocess.run([sys.executable, "-m", "sim.campaign", "--dir", str(tmp_path / "d"),
                        "--count", "10", "--ledger", str(ledger_file), "--report-only"], capture_output=True, text=True,
                       timeout=120, cwd=ROOT)
    assert r.returncode == 0, r.stderr
    assert sorted(ledger.read_ledger(ledger_file)[0]) == [0, 1, 2, 3]


def test_a_failure_names_the_chain_to_run_again(tmp_path):
    """Its images go with the machine that ran it: the report names the --ids range of its chain."""
    r = fake_results([21], random.Random(11))[0]
    r.update(outcome="violation", detail="lost: lba 7", replay="python -m sim.campaign --replay t00021/trial.json")
    report.report([r], tmp_path / "r.md", ARGS)
    assert "with `--ids 16-21`" in (tmp_path / "r.md").read_text()
    bad = subprocess.run([sys.executable, "-m", "sim.campaign", "--dir", str(tmp_path / "d"),
                          "--ids", "21-16"], capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert bad.returncode == 2 and "--ids 21-16: want A-B with A <= B" in bad.stderr
    assert not (tmp_path / "d").exists()                 # refused before anything was made
