"""The campaign's report (``--report``, markdown): counts per cut site, fault set and outcome over
the results and the ledger's archived parts, the builds, and every failure with its replay and, when
resolved, what became of it."""

from __future__ import annotations

import sys
from pathlib import Path

from . import config
from .config import TARGETS, loses_blocks
from .draw import exhaustive_step
from .ledger import OUTCOMES, resolved_for


def ladder_summary(results: list[dict]) -> str:
    """``--exhaustive``: how far each ladder got (ids as :func:`exhaustive_trial` makes them)."""
    ladders: dict[tuple[str, int], dict[int, dict]] = {}
    for r in results:
        op, target, k = exhaustive_step(r["id"])
        ladders.setdefault((op, target), {})[k] = r
    lines = ["| target | operation | cut at k = | ended |", "| ---: | --- | --- | --- |"]
    for (op, target), steps in sorted(ladders.items(), key=lambda kv: (kv[0][1], kv[0][0])):
        cut = sorted(k for k, r in steps.items() if r["outcome"] != "no-cut")
        none = [k for k, r in steps.items() if r["outcome"] == "no-cut"]
        if cut and cut == list(range(1, cut[-1] + 1)):
            span = f"1-{cut[-1]}" if len(cut) > 1 else "1"
        else:
            span = ", ".join(map(str, cut)) or "-"
        ended = f"k = {min(none)} found no {op} to cut" if none else "not yet (or --max-k)"
        lines.append(f"| {target} | {op} | {span} | {ended} |")
    return "Ladders (every program and erase of each target, from power-on):\n\n" + "\n".join(lines)


def boot_cuts_seen(results: list[dict]) -> int:
    """The ``--boot-cuts`` that came while their boot recovered."""
    return sum(c == "during boot" for r in results for c in r.get("boot_cuts", ()))


def report(results: list[dict], path: Path | None, args, archived: list[dict] = ()) -> str:
    """The counts per cut site, per fault set and per outcome, over ``results`` and the ``archived`` ledger
    parts (counts only: see :func:`archive_from_report`)."""
    outcomes = list(OUTCOMES)
    resolved = resolved_for(args)

    def tally(key: str, name: str) -> dict[str, dict]:
        rows: dict[str, dict] = {}
        for a in archived:
            for k, v in a[name].items():
                k = "" if k == "none" else k
                row = rows.setdefault(k, {"trials": 0, **{o: 0 for o in outcomes}, "fl_sum": 0.0, "fl_n": 0})
                for o in ("trials", *outcomes):
                    row[o] += v[o]
                if v.get("in_flight_mean") is not None:   # its weight: the trials whose cut came
                    row["fl_sum"] += v["in_flight_mean"] * (v["trials"] - v["no-cut"])
                    row["fl_n"] += v["trials"] - v["no-cut"]
        for r in results:
            row = rows.setdefault(r.get(key, ""), {"trials": 0, **{o: 0 for o in outcomes}, "fl_sum": 0.0, "fl_n": 0})
            row["trials"] += 1
            row[r["outcome"]] += 1
            if r.get("cut_seen"):
                row["fl_sum"] += r.get("in_flight", 0)
                row["fl_n"] += 1
        return dict(sorted(rows.items()))

    lines = ["| site | trials | " + " | ".join(outcomes) + " | mean ops in flight at the cut |",
             "| --- | ---: | " + " | ".join("---:" for _ in outcomes) + " | ---: |"]
    for site, row in tally("site", "sites").items():
        counts = " | ".join(str(row[o]) for o in outcomes)
        mean = f"{row['fl_sum'] / row['fl_n']:.1f}" if row["fl_n"] else "-"
        lines.append(f"| {site} | {row['trials']} | {counts} | {mean} |")
    table = "\n".join(lines)
    by_faults = tally("faults", "faults")
    if len(by_faults) > 1:
        rows = ["| faults | trials | " + " | ".join(outcomes) + " |", "| --- | ---: | " + " | ".join("---:" for _ in outcomes) + " |"]
        for f, row in by_faults.items():
            rows.append(f"| {f or 'none'} | {row['trials']} | " + " | ".join(str(row[o]) for o in outcomes) + " |")
        table += "\n\n" + "\n".join(rows)
    cut = sum(bool(r.get("cut_seen")) for r in results) + sum(a["cut_seen"] for a in archived)
    second = (sum(r.get("recovery_cut") == "during boot" for r in results) + sum(a["recovery_cut"] for a in archived)
              + boot_cuts_seen(results))
    no_cut = sum(r["outcome"] == "no-cut" for r in results) + sum(v["no-cut"] for a in archived for v in a["sites"].values())
    table += (f"\n\n{cut + second} power cuts judged: {cut} trials lost power at their site, {second} more cuts came "
              f"while recovering; {no_cut} trials ended their workload before the cut came (judged after a kill).")
    tried = sum(len(r.get("boot_cuts", ())) for r in results)
    if tried:
        seen = boot_cuts_seen(results)
        table += (f" {seen} of those came from --boot-cuts, which armed a cut in {tried} boots after a cut (an "
                  f"instant, an erase or the first program): the other {tried - seen} reached the prompt first and "
                  "lost power there.")
    if getattr(args, "exhaustive", False):
        table += "\n\n" + ladder_summary(results)
    split = getattr(args, "draw_v1_below", 0)
    if split and any(r["id"] >= split for r in results):
        def no_cut_share(rs):
            rs = [r for r in rs if r["site"] == "erase" or r["site"].startswith("kind:")]
            n = sum(r["outcome"] == "no-cut" for r in rs)
            return f"{n} of {len(rs)} ({100 * n / max(len(rs), 1):.0f} %)"
        table += (f"\n\nTrials from {split} on are drawn by version 2 of the rules (docs/campaign.md: a kind's first "
                  f"page, an erase on any target): no cut came in {no_cut_share([r for r in results if r['id'] >= split])} "
                  f"of their erase and kind trials, against {no_cut_share([r for r in results if r['id'] < split])} "
                  "before" + (" (of the trials with results in the ledger)." if archived else "."))
    anchored = [r for r in results if r.get("anchor")]
    if anchored:
        fast = sum(r["anchor"] == "fast" for r in anchored)
        table += (f"\n\nThe anchor (firmware/anchor.h), judged on the images after each cut of the {len(anchored)} "
                  f"trials that checked it: after {fast} the next boot reads page 0 of only the blocks the newest "
                  "anchor record and checkpoint name, which must include every block holding a page written since the checkpoint's "
                  f"floor (a miss is a violation); after {len(anchored) - fast} it reads page 0 of every block.")
    full = [r for r in results if r.get("no_space") and r["outcome"] in ("pass", "no-cut")]
    if full:
        ended = sum(r["no_space"].startswith("workload") for r in full)
        why: dict[str, tuple[list, list]] = {}   # after recovery: reason -> (ids with program/erase faults, without)
        for r in full:
            if r["no_space"].startswith("after recovery: "):
                why.setdefault(r["no_space"].split(": ", 1)[1], ([], []))[not loses_blocks(r.get("faults"))].append(r["id"])
        table += (f"\n\n{len(full)} of these trials ran out of space (grown bad blocks, or GC stuck; "
                  f"{ended} of them during the workload, which then ended before its cut): the device refused new "
                  "writes with NO_SPACE, kept every acknowledged one, and served reads"
                  + (" (counted over the trials with results in the ledger)." if archived else "."))
        if why:
            def without(ids):
                return f"{len(ids)} without" + (": trial" + "s" * (len(ids) > 1) + " " + ", ".join(map(str, sorted(ids)))
                                                if 0 < len(ids) <= 10 else "")
            table += (" After recovery: " + "; ".join(f"{n} {len(lost) + len(unlost)} ({len(lost)} with program or "
                                                      f"erase failures injected, {without(unlost)})"
                                                      for n, (lost, unlost) in sorted(why.items()))
                      + ". Without an injected program or erase failure, NO_SPACE below the capacity is a "
                      "violation (a device that lost no block keeps taking writes); trials without one counted "
                      "here were judged before that rule.")
    builds: dict[str, list[int]] = {}
    for r in results:
        builds.setdefault(r.get("build", "untagged (before results named their build)"), []).append(r["id"])
    if archived or builds:
        table += "\n\nBuilds (a firmware or gateware change freezes a new copy; the trials on each):\n"
        for a in archived:
            table += (f"\n* trials {a['ids'][0]}-{a['ids'][1]} ({a['trials']}), counts only: {a['source']}; "
                      "their builds: " + ", ".join(f"{b} ({n})" for b, n in a["builds"].items()))
        table += "".join(f"\n* {b}: {len(ids)} trials, ids {min(ids)}-{max(ids)}" for b, ids in builds.items())
    if path:
        fails = [r for r in results if r["outcome"] not in ("pass", "no-cut")]
        old_fails = [f for a in archived for f in a["failures"]]
        n = len(results) + sum(a["trials"] for a in archived)
        hours = (sum(r.get("wall_s", 0) for r in results) + sum(a["wall_s"] for a in archived)) / 3600
        text = f"""# Power-fault campaign (`make campaign`)

Generated by `python -m sim.campaign {' '.join(a for a in sys.argv[1:] if a != '--report-only')}` ({n} {'trials' if getattr(args, 'exhaustive', False) else f'of {args.count} trials'} done, {hours:.1f} simulator-hours; rerunning the command resumes; seed {args.seed}; commands per trial {args.commands};
{TARGETS} NAND targets x {config.BLOCKS_PER_LUN} blocks per LUN, small profile; {f'a write cache of {config.CACHE_PAGES} pages (unflushed writes may be lost)' if config.CACHE_PAGES else 'no write cache'}; faults {args.faults or 'off'}).
Each trial: a {'fresh' if args.fresh else 'seasoned'} base image, a random host workload mirrored in the model, a power cut at the
site, restart, recovery, every LBA of the workload judged by the model's oracle, new work accepted.

{table}

Failures: {len(fails) + len(old_fails)}{n_resolved_text(fails, old_fails, resolved)}.
""" + "".join(f"\n* trial {f['id']} ({f['site']}): {f['outcome']}: {f.get('detail', '')} (counts only: {a['source']})"
              + _resolved(f['id'], resolved) for a in archived for f in a["failures"]) \
    + "".join(f"\n* trial {r['id']} ({r['site']}): {r['outcome']}: {r['detail'][:300]}\n  replay: `{r.get('replay')}`"
              + _rerun(r) + _resolved(r['id'], resolved) for r in fails)
        path.write_text(text)
    return table


def _rerun(r: dict) -> str:
    """Where the trial's images are gone: its chain again, from the campaign's seed (``--ids``)."""
    start = r.get("chain_start", -1)
    return f" (images gone: its chain again with `--ids {start}-{r['id']}`)" if 0 <= start else ""


def n_resolved_text(fails: list[dict], old_fails: list[dict], resolved: dict[int, str]) -> str:
    n = sum(f["id"] in resolved for f in [*fails, *old_fails])
    return f" ({'all' if n == len(fails) + len(old_fails) else n} resolved)" if n else ""


def _resolved(trial_id: int, resolved: dict[int, str]) -> str:
    return f"\n  resolved: {resolved[trial_id]}" if trial_id in resolved else ""
