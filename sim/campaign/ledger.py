"""Results: ``<dir>/results.jsonl`` and the ledger (``--ledger``), a long campaign's results
committed, so a new machine resumes it; a report's counts archived in it when the raw results are
gone (:func:`archive_from_report`); the notes on its resolved failures, kept beside it
(:func:`resolved_notes`)."""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path


def read_results(results: Path) -> dict[int, dict]:
    """A campaign directory's ``results.jsonl`` by trial id ({} before its first result)."""
    if not results.exists():
        return {}
    return {r["id"]: r for r in json_lines(results)}


def json_lines(path: Path) -> list[dict]:
    """The records of a JSON-lines file; a line cut short (a run killed while it appended) is skipped."""
    out = []
    for n, line in enumerate(path.read_text().splitlines(), 1):
        if line.strip():
            try:
                out.append(json.loads(line))
            except json.JSONDecodeError:
                print(f"campaign: {path}:{n}: not a whole record (a run stopped while writing it?): skipped",
                      file=sys.stderr)
    return out


LEDGER_KEYS = ("id", "site", "faults", "outcome", "cut_seen", "recovery_cut", "boot_cuts", "in_flight", "no_space",
               "build", "anchor", "chain_start", "wall_s")
LEDGER_JSON = {"separators": (",", ":")}   # ~130 bytes a trial: 10,000 stay well under 2 MiB
OUTCOMES = ("pass", "no-cut", "violation", "mismatch", "boot-failure", "error")


def ledger_entry(r: dict) -> dict:
    """What the ledger keeps of a result: what the report counts; a failure's detail and replay too."""
    e = {k: r[k] for k in LEDGER_KEYS if r.get(k) not in (None, "")}
    if r["outcome"] not in ("pass", "no-cut"):
        e.update(detail=r.get("detail", "")[:300], replay=r.get("replay", ""))
    return e


def read_ledger(path: Path | None) -> tuple[dict[int, dict], list[dict]]:
    """A ledger's trials by id, and its archived parts (trials whose raw results are gone: counts only,
    :func:`archive_from_report`)."""
    trials: dict[int, dict] = {}
    archived: list[dict] = []
    if path and path.exists():
        for r in json_lines(path):
            if "archived" in r:
                archived.append(r["archived"])
            else:
                trials[r["id"]] = r
    return trials, archived


def archive_from_report(text: str, source: str) -> dict:
    """The counts of a report this module wrote (its per-site and per-fault tables, the cuts line, the
    builds, the failures), as an archived ledger part: for trials whose results.jsonl is gone with the
    machine that ran them.  Its ids are those the builds list names."""
    def table(header: str) -> dict[str, dict]:
        rows = {}
        lines = text.splitlines()
        i = next(i for i, ln in enumerate(lines) if ln.startswith(f"| {header} | trials |"))
        for ln in lines[i + 2:]:
            if not ln.startswith("|"):
                break
            cells = [c.strip() for c in ln.strip("|").split("|")]
            row = {"trials": int(cells[1]), **{o: int(cells[2 + j]) for j, o in enumerate(OUTCOMES)}}
            if header == "site":
                row["in_flight_mean"] = None if cells[8] == "-" else float(cells[8])
            rows[cells[0]] = row
        return rows

    cuts = re.search(r"(\d+) power cuts judged: (\d+) trials lost power at their site, (\d+) (?:of them again|more "
                     r"cuts came) while recovering; (\d+) trials ended", text)
    hours = re.search(r"of \d+ trials done, ([\d.]+) simulator-hours", text)
    builds = {m[1]: (int(m[2]), int(m[3]), int(m[4])) for m in
              re.finditer(r"^\* (.+?): (\d+) trials, ids (\d+)-(\d+)$", text, re.M)}
    failures = [{"id": int(m[1]), "site": m[2], "outcome": m[3], "detail": m[4]} for m in
                re.finditer(r"^\* trial (\d+) \((\S+)\): ([\w-]+): (.*)$", text, re.M)]
    sites = table("site")
    return {"source": source, "ids": [min(b[1] for b in builds.values()), max(b[2] for b in builds.values())],
            "sites": sites, "faults": table("faults"), "cut_seen": int(cuts[2]), "recovery_cut": int(cuts[3]),
            "wall_s": float(hours[1]) * 3600, "builds": {b: v[0] for b, v in builds.items()},
            "failures": failures, "trials": sum(r["trials"] for r in sites.values())}


def archived_ids(archived: list[dict]) -> set[int]:
    return {i for a in archived for i in range(a["ids"][0], a["ids"][1] + 1)}



def resolved_path(ledger: Path) -> Path:
    """Where a ledger's resolved notes live: ``<ledger>.resolved.json`` beside it (make
    campaign-long's: docs/results/campaign_long.resolved.json)."""
    return ledger.with_name(ledger.name.removesuffix(".jsonl") + ".resolved.json")


def resolved_notes(ledger: Path | None) -> dict[int, str]:
    """What became of the ledger's failures once they were looked into: trial id -> the cause and the
    change that dealt with it (the report prints it under the failure; the run's exit status counts only
    the failures without one).  A ledger's own: another campaign's trial ids are other trials, and a run
    without a ledger has none."""
    if ledger is None or not resolved_path(Path(ledger)).exists():
        return {}
    data = json.loads(resolved_path(Path(ledger)).read_text())
    return {int(k): v for k, v in data["resolved"].items()}


def resolved_for(args) -> dict[int, str]:
    """:func:`resolved_notes` of the run's ``--ledger``."""
    return resolved_notes(getattr(args, "ledger", None))
