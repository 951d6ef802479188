"""The command line (``python -m sim.campaign``; the package's docstring says what a campaign
does): options, presets, resuming from the results and the ledger, the trials in parallel."""

from __future__ import annotations

import argparse
import json
import re
import sys
from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait
from pathlib import Path

from atomflash import simctl, spec

from . import config
from .base import calibrate, no_calibration, prepare_base
from .config import CHAIN, QUICK, REPORT_EVERY, ROOT, SMOKE, TARGETS
from .draw import FAULTS, SITES, Trial, draw_trials, exhaustive_step, exhaustive_trial, kind_cut_supported
from .ledger import LEDGER_JSON, archived_ids, ledger_entry, read_ledger, read_results, resolved_for, resolved_path
from .report import report
from .run import chains_of, run_chain, run_trial


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m sim.campaign",
                                description=sys.modules[__package__].__doc__.split("\n\n")[0])
    p.add_argument("--count", type=int, default=10, help="trials (resumes: trials already in results.jsonl are kept)")
    p.add_argument("--port", choices=("debug", "nvme"), default="debug",
                   help="the host's way in: the debug port (UARTBone) or NVMe over the simulated PCIe link "
                        "(a build of its own, and a directory of its own: --dir)")
    p.add_argument("--seed", type=int, default=1, help="campaign seed (trial i uses seed * 100003 + i)")
    p.add_argument("--jobs", type=int, default=2, help="trials in parallel (one simulator each)")
    p.add_argument("--commands", type=int, default=40, help="workload commands per trial (the cut ends it first)")
    p.add_argument("--sites", default=",".join(s for s in SITES if not s.startswith("kind:") or kind_cut_supported()),
                   help="cut sites to rotate through")
    p.add_argument("--faults", nargs="?", const=",".join(FAULTS), default="",
                   help=f"NAND faults: bit errors, a program and an erase failure per target, MLC paired-page damage "
                        f"('mix': each trial draws none, one, or bits+program+erase; not mlc) "
                        f"(bare: all; or a comma-separated subset of {','.join(FAULTS)})")
    p.add_argument("--chain", type=int, default=CHAIN,
                   help="trials back to back on one device: a trial's reboot (recovery, verification) is the next "
                        "one's boot (1: every trial boots the base; --quick, --smoke and --exhaustive use 1)")
    p.add_argument("--queues", type=int, default=0,
                   help="host queues the workload runs on, interleaved (default 0: every host queue the SoC has)")
    p.add_argument("--cache-pages", type=int, nargs="?", const=spec.LIMITS.CACHE_PAGES, default=config.CACHE_PAGES,
                   help=f"the core's volatile write cache, in pages (0: none; bare: {spec.LIMITS.CACHE_PAGES}; a build "
                        "of its own): acknowledged writes not yet flushed may be lost at a cut, and the oracle (the "
                        "model with its cache, from IDENTIFY) allows exactly that")
    p.add_argument("--dir", type=Path, default=ROOT / "build" / "campaign", help="campaign directory")
    p.add_argument("--blocks-per-lun", type=int, default=config.BLOCKS_PER_LUN,
                   help="the device's blocks per LUN (4 x this blocks in all; more: fault runs keep room to work)")
    p.add_argument("--report", type=Path, default=None, help="write the report (markdown) here")
    p.add_argument("--ledger", type=Path, default=None,
                   help="a committed record of the results (JSON lines, a few fields per trial): trials in it "
                        "count as done and every new result is added, so the campaign resumes on another machine "
                        "whose --dir is empty (make campaign-long: docs/results/campaign_long.jsonl)")
    p.add_argument("--replay", type=Path, default=None, help="run this trial.json again")
    p.add_argument("--ids", default="",
                   help="run only trials A-B (inclusive) of the campaign the other options describe: a failure's "
                        "chain again, from its ledger entry's chain_start to its id, when its trial.json and images "
                        "are gone (use a --dir of its own; a chain rerun is close to, not always exactly, the run)")
    p.add_argument("--draw-v1-below", type=int, default=0, metavar="ID",
                   help="trials with ids below this are drawn by version 1 of the rules (Trial.draw; make "
                        "campaign-long: its first trials ran with it, so --ids reruns them as they ran)")
    p.add_argument("--report-only", action="store_true",
                   help="write --report from the results so far (of the --count trials) and stop")
    p.add_argument("--exhaustive", action="store_true",
                   help="cut one fixed workload at every program and every erase of every target, from power-on")
    p.add_argument("--max-k", type=int, default=0,
                   help="--exhaustive: up to this program or erase index (0: until the first that finds none to cut)")
    p.add_argument("--boot-cuts", type=int, default=0, metavar="N",
                   help="N more cuts per trial, each during the boot after the cut before it (an instant, an "
                        "erase or the first program of the recovering boot); the last boot recovers and is judged "
                        f"(--quick: {QUICK['boot_cuts']})")
    p.add_argument("--quick", action="store_true",
                   help=f"what make test runs: {QUICK['count']} trials of {QUICK['commands']} commands on a fresh "
                        f"device over the sites {', '.join(QUICK['sites'])}")
    p.add_argument("--smoke", action="store_true",
                   help=f"what make test-slow runs: {SMOKE['count']} trials of {SMOKE['commands']} commands on the "
                        f"seasoned base over the sites {', '.join(SMOKE['sites'])}")
    p.add_argument("--fresh", action="store_true",
                   help="start every trial on a fresh device instead of the seasoned base (no GC yet; no calibration)")
    p.add_argument("--pgo", action="store_true",
                   help="build the simulation profile-guided (soc/sim.py --pgo: 10-25%% faster trials, a build of "
                        "its own that takes about twice as long)")
    p.add_argument("--gateware", type=Path, default=None,
                   help="a built simulation (soc/sim.py --build-only prints it; default: build it now), or a "
                        "frozen copy a result names (its 'build', e.g. <dir>/gateware-<hash>). "
                        "A copy keeps a long campaign independent of later rebuilds")
    args = p.parse_args(argv)
    bad_faults = [f for f in args.faults.split(",") if f and f not in FAULTS and args.faults != "mix"]
    if bad_faults:
        p.error(f"--faults: {', '.join(bad_faults)}: not one of {', '.join(FAULTS)}")
    if args.boot_cuts < 0:
        p.error(f"--boot-cuts {args.boot_cuts}: want 0 or more (cuts in the boots after each trial's cut)")
    if args.chain < 1:
        p.error(f"--chain {args.chain}: want 1 or more (trials back to back on one device)")
    for flag, preset in (("quick", QUICK), ("smoke", SMOKE)):
        if getattr(args, flag):
            args.count, args.commands, args.sites = preset["count"], preset["commands"], ",".join(preset["sites"])
            args.fresh = args.fresh or preset["fresh"]
            args.boot_cuts = args.boot_cuts or preset.get("boot_cuts", 0)
            args.chain = 1
    ids = range(args.count)
    if args.ids:
        m = re.fullmatch(r"(\d+)-(\d+)", args.ids)
        if not m or int(m[1]) > int(m[2]):
            p.error(f"--ids {args.ids}: want A-B with A <= B (trial ids)")
        ids = range(int(m[1]), int(m[2]) + 1)
        args.count = max(args.count, ids.stop)   # the report counts them
    out = args.dir.resolve()
    out.mkdir(parents=True, exist_ok=True)
    base = out / "base"
    own = args.replay.parent / "base" if args.replay else None   # a chained trial's: the images its boot started from
    own = own if own is not None and (own / "initial.json").exists() else None
    for b in (own or base,):
        if args.replay and (b / "base.json").exists():   # a replay runs on the base its trial ran on
            meta = json.loads((b / "base.json").read_text())
            args.fresh, args.blocks_per_lun = meta["fresh"], meta.get("blocks_per_lun", 4)
            args.cache_pages = meta.get("cache_pages", 0)   # bases from before the cache have none
    if args.blocks_per_lun < 4:
        p.error("--blocks-per-lun: at least 4 (the checkpoint areas, GC's reserve and an open block per die)")
    config.set_geometry(args.blocks_per_lun, nvme=args.port == "nvme", cache_pages=args.cache_pages)
    if args.gateware and (args.gateware / "gateware" / "sim_config.js").exists():
        args.gateware = args.gateware / "gateware"   # a frozen copy: its gateware directory
    if args.gateware and not (args.gateware / "sim_config.js").exists():
        p.error(f"--gateware: {args.gateware} holds no built simulation (sim_config.js)")
    results_path = out / "results.jsonl"
    ledger, archived = read_ledger(args.ledger)
    done = {**ledger, **read_results(results_path)}
    if args.ledger:   # results from before the ledger, or from a run that stopped between the two appends
        with open(args.ledger, "a") as fh:
            if args.ledger.stat().st_size and not args.ledger.read_bytes().endswith(b"\n"):
                fh.write("\n")   # after a record cut short: the next one starts a line of its own
            for i in sorted(set(done) - set(ledger)):
                fh.write(json.dumps(ledger_entry(done[i]), **LEDGER_JSON) + "\n")
    gone = archived_ids(archived)
    if args.report_only:   # from the results alone: nothing built, frozen or booted
        mine = (lambda i: i >= 10_000) if args.exhaustive else (lambda i: i < args.count and i not in gone)
        print(report([r for i, r in sorted(done.items()) if mine(i)], args.report, args, archived))
        return 0
    gateware = (args.gateware.resolve() if args.gateware
                else simctl.freeze_gateware(simctl.build(simctl.SimConfig(blocks_per_lun=config.BLOCKS_PER_LUN,
                                                                          nvme=config.NVME,
                                                                          cache_pages=config.CACHE_PAGES,
                                                                          pgo=args.pgo)),
                                            out / "gateware"))
    if args.replay:
        t = Trial(**json.loads(args.replay.read_text()))
        if own is not None:   # no shared base to prepare: the trial's own images and their contents
            base, initial = own, {int(k): bytes.fromhex(v) for k, v in json.loads((own / "initial.json").read_text()).items()}
        else:
            initial = prepare_base(base, gateware, fresh=args.fresh, mlc="mlc" in t.faults.split(","))
        r = run_trial(t, base, out / "replay", gateware, initial=initial)
        print(json.dumps(r, indent=2))
        return 0 if r["outcome"] in ("pass", "no-cut") else 1

    mlc = "mlc" in args.faults.split(",")
    initial = prepare_base(base, gateware, fresh=args.fresh, mlc=mlc)
    cal = no_calibration() if args.fresh else calibrate(base, gateware, mlc=mlc)

    sites = [s for s in args.sites.split(",") if s]
    for s in sites:
        if s not in SITES:
            p.error(f"--sites: {s} is not one of {', '.join(SITES)}")
        if s.startswith("kind:") and not kind_cut_supported():
            p.error(f"--sites {s}: this NAND model has no power_cut_kind key")
    if args.exhaustive:
        args.chain = 1
        # a ladder per target and operation: k = 1, 2, ... until the first k that finds no such operation
        # to cut (no-cut: the workload is fixed, so no later k would), or --max-k
        trials, todo = [], []

        def ladder_step(op: str, target: int, k: int) -> Trial | None:
            """The ladder's k-th trial, None past its end."""
            if args.max_k and k > args.max_k:
                return None
            t = exhaustive_trial(op, target, k, args)
            trials.append(t)
            return t

        for op in ("program", "erase"):
            for target in range(TARGETS):   # resume: the first step not yet done
                k = 1
                while (t := ladder_step(op, target, k)) is not None and t.id in done:
                    if done[t.id]["outcome"] == "no-cut":
                        break
                    k += 1
                if t is not None and t.id not in done:
                    todo.append(t)
    else:
        trials = draw_trials(ids, seed=args.seed, sites=sites, commands=args.commands, faults=args.faults, cal=cal,
                             draw_v1_below=args.draw_v1_below, boot_cuts=args.boot_cuts)
        todo = [t for t in trials if t.id not in done and t.id not in gone]
    for t in trials:
        t.queues = args.queues
    print(f"campaign: {len(trials)} trials ({len(trials) - len(todo)} already done), {args.jobs} in parallel, "
          f"results in {results_path}" + (f" and {args.ledger}" if args.ledger else ""))
    try:
        from tqdm import tqdm
        bar = tqdm(total=len(todo), unit="cut", disable=not sys.stderr.isatty())
    except ImportError:  # pragma: no cover
        bar = None
    with ProcessPoolExecutor(max_workers=max(args.jobs, 1), initializer=config.set_geometry,
                             initargs=(config.BLOCKS_PER_LUN, config.NVME, config.CACHE_PAGES)) as pool:
        futs = {pool.submit(run_chain, c, base, out, initial, gateware) for c in chains_of(todo, args.chain)}

        def results_as_they_come():
            while futs:
                finished, _ = wait(futs, return_when=FIRST_COMPLETED)
                for f in finished:
                    futs.remove(f)
                    for r in f.result():
                        if args.exhaustive and r["outcome"] != "no-cut":
                            op, target, k = exhaustive_step(r["id"])
                            t = ladder_step(op, target, k + 1)
                            if t is not None:
                                t.queues = args.queues
                                if bar:
                                    bar.total += 1
                                futs.add(pool.submit(run_chain, [t], base, out, initial, gateware))
                        yield r

        for r in results_as_they_come():
            done[r["id"]] = r
            with open(results_path, "a") as fh:
                fh.write(json.dumps(r) + "\n")
            if args.ledger:
                with open(args.ledger, "a") as fh:
                    fh.write(json.dumps(ledger_entry(r), **LEDGER_JSON) + "\n")
            if bar:
                bar.update(1)
            mark = "ok " if r["outcome"] in ("pass", "no-cut") else "FAIL"
            print(f"{mark} trial {r['id']:5d} {r['site']:16} {r['outcome']:12} ops {r['commands']:3d} "
                  f"in flight {r['in_flight']}  {r['wall_s']:.0f} s" + (f"  {r['detail'][:200]}" if mark == 'FAIL' else ""),
                  flush=True)
            if mark == "FAIL":
                print(f"     replay: {r.get('replay')}", flush=True)
            if args.report and len(done) % REPORT_EVERY == 0:   # a long run stopped at any point has a current report
                report([done[t.id] for t in trials if t.id in done and t.id not in gone], args.report, args, archived)
    if bar:
        bar.close()
    results = [done[t.id] for t in trials if t.id in done and t.id not in gone]
    print(report(results, args.report, args, archived))
    bad = [r for r in results if r["outcome"] not in ("pass", "no-cut")]
    unresolved = [r["id"] for r in bad if r["id"] not in resolved_for(args)]
    if unresolved:
        print(f"campaign: {len(unresolved)} failures not resolved: trials {', '.join(map(str, unresolved[:20]))}")
    elif bad:
        print(f"campaign: {len(bad)} failures, every one resolved (their notes: {resolved_path(args.ledger)})")
    return 1 if unresolved else 0
