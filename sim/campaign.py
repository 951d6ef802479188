#!/usr/bin/env python3
"""`make campaign`: power cuts across the full simulated system, judged by the model's oracle.

Each *trial* starts the simulated SSD (SoC + firmware + FTL core + NAND
models, ``atomflash.simctl``) on a copy of a seasoned base image (filled, GC
and checkpoints already on flash), sets GC and checkpoints to run often,
drives a random host workload (``atomflash.workload``: plain writes several in
flight, atomic groups, transactions committed/final/aborted, appends with
remaps and releases, trims, flushes) mirrored in the semantic model, and
cuts power at the trial's *cut site*:

=============  ==========================================================
site           how
=============  ==========================================================
``random``     a random simulated instant of the workload, on every target
               at once (an operation in flight is torn where it got to)
``program``    during the k-th program of a random target (a torn page)
``erase``      during the k-th erase of a random target
``kind:K``     during the k-th program of a page whose OOB kind is K
               (COMMIT/REMAP records, CHECKPOINT pages, GC_COPY relocations,
               TRIM records) on any target (each counts its own; the first
               to get there cuts), when the NAND model supports it
``recovery``   a program cut as above, then a second cut at a random
               instant of the next boot (while the firmware recovers)
=============  ==========================================================

``--boot-cuts N`` (``--quick``: 3) adds N more cuts to every trial, each in
the boot after the one before (:func:`draw_boot_cuts`): the firmware is cut
again and again while it recovers, then recovers for good and is judged.

Most cuts are armed when the workload starts, counted from that moment,
through the SoC's NAND model control port (``simctl.NandControl``): the
k-th program from now, or an instant from now.  A quarter of them (three
quarters for ``kind:gc``) land in the boot instead -- the recovery of the
base and GC at boot: those are NAND model settings counted from power-on,
drawn within what a clean boot of the base does (:func:`calibrate`).

Then it restarts on the same images, lets the firmware recover, reads the
workload's LBAs back and judges them (``workload.verify``): every acknowledged
write, commit and remap present; every group, transaction and remap
all-or-nothing; nothing else changed; and the device must take new work.
``--faults`` adds the NAND model's bit errors, a program and an erase failure
and MLC paired-page damage (``--faults bits,program,erase``: a subset; see
:data:`FAULTS`; ``--faults mix``: each trial draws its own, see
:data:`FAULT_MIX_WEIGHTS`).

Outcomes: ``pass``; ``violation`` (the oracle's list); ``mismatch`` (the device
answered a command differently from the model before the cut); ``no-cut``
(the workload ended first: power is then cut by killing the simulator, still
judged); ``boot-failure``; ``error``.  Every failing trial keeps its directory
(images before and after, console log, ``trial.json``) and prints its replay
command; results append to ``<dir>/results.jsonl`` (and to ``--ledger``, a committed copy), so a campaign resumes
where it stopped.  ``--report`` writes the counts per site and outcome.

    python sim/campaign.py --count 20 --jobs 2                # a campaign
    python sim/campaign.py --exhaustive                       # every program/erase of a fixed workload
    python sim/campaign.py --replay build/campaign/t0007/trial.json
"""

from __future__ import annotations

import argparse
import json
import random
import re
import shutil
import sys
import time
import traceback
from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait
from dataclasses import asdict, dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "host"))
sys.path.insert(0, str(ROOT))  # sim.flashimg: the images decoded independently of the firmware

from atomflash import errors, nandsim, simctl, spec  # noqa: E402
from atomflash.device import Device  # noqa: E402
from atomflash.transport import TransportError  # noqa: E402
from atomflash.workload import Mismatch, OutOfSpace, Recorder, random_workload, read_span, verify  # noqa: E402
from sim import flashimg  # noqa: E402

TARGETS = 4                 # the default build: 2 channels x 2 ways
WAYS = 2
PROFILE = spec.NAND_PROFILES["small"]
BLOCKS_PER_LUN = 4          # a small device: GC and checkpoints come quickly (--blocks-per-lun)


def _set_geometry(blocks_per_lun: int) -> None:
    """The campaign's blocks per LUN, in this process (the trial workers' initializer too)."""
    global BLOCKS_PER_LUN
    BLOCKS_PER_LUN = blocks_per_lun
SPAN = 48                   # the workload's LBAs (hot: GC finds garbage)
SETUP = ("ckpt every 16", "gc thresholds 10 12")  # per boot: checkpoints and GC often
# --quick, what make test runs: a fresh device (no fill, no calibration), short workloads, the sites a
# young device reaches (no GC yet); --smoke: the seasoned base, GC at boot included (make test-slow)
QUICK = {"count": 8, "commands": 30, "fresh": True, "boot_cuts": 3,
         "sites": ("program", "kind:commit", "recovery", "kind:remap", "erase", "kind:checkpoint", "random",
                   "kind:trim")}
SMOKE = {"count": 6, "commands": 25, "fresh": False,
         "sites": ("program", "kind:commit", "recovery", "kind:gc", "erase", "random")}
TAIL_CYCLES = 1_500_000        # after a workload whose armed cut has not come: idle this long (a checkpoint takes ~1 M)
CHAIN = 8                        # --chain: trials per device boot sequence
REPORT_EVERY = 20                # --report is rewritten every this many trials, and at the end
RANDOM_NS_PER_COMMAND = 150_000  # simulated time a workload command takes (30 took 4.7 ms): the random site's window
CALIBRATE_CUT_NS = 80_000_000  # simulated: boot (~30 ms), the setup and GC at boot (~15 ms) are over
DRAW_VERSION = 2                 # Trial.draw's rules (--draw-v1-below: older trials keep version 1)
KINDS = {"commit": spec.Kind.COMMIT, "remap": spec.Kind.REMAP, "checkpoint": spec.Kind.CHECKPOINT,
         "gc": spec.Kind.GC_COPY, "trim": spec.Kind.TRIM}
SITES = ("random", "program", "erase", "recovery", *(f"kind:{k}" for k in KINDS))


def kind_cut_supported() -> bool:
    return any(k == "power_cut_kind" for k, *_ in nandsim.CONFIG_KEYS)


@dataclass
class Trial:
    id: int
    seed: int
    site: str
    commands: int
    faults: str = ""                                  # the FAULTS switched on, comma-separated ("" none)
    cuts: dict = field(default_factory=dict)          # NAND model keys per target ("0".."3")
    recovery_cut_ns: int = 0                          # second cut during the next boot (site recovery)
    kill_after_s: float = 0.0                         # (older trials) site random: wall seconds into the workload
    arm: dict = field(default_factory=dict)           # a cut armed when the workload starts (arm_cut)
    fault_keys: dict = field(default_factory=dict)
    queues: int = 0                                   # host queues the workload uses (0: every one)
    boot_cuts: list = field(default_factory=list)     # then more cuts, each in the boot after the last (--boot-cuts)

    @classmethod
    def draw(cls, tid: int, seed: int, site: str, commands: int, faults: str, cal: dict,
             version: int = DRAW_VERSION, boot_cuts: int = 0) -> "Trial":
        """``cal``: what a boot of the base does before the workload (:func:`calibrate`).  A
        quarter of the cuts land in it (recovery, GC at boot) where it does any of the site's
        operations, three quarters for ``kind:gc`` (a short workload rarely makes GC run again); the
        rest are armed when the workload starts (``arm``).

        ``version`` 1 (the rules the long campaign's first trials ran with, ``--draw-v1-below``): an
        armed kind cut at the k-th page (k in 1..2) of the first target to reach it, an armed erase cut
        at the k-th erase (1..3) of one target.  A 40-command workload writes about three records of a kind
        over four targets, so k = 2 found no cut 43 % of the time and an erase cut 15-31 %.
        Version 2: kind cuts at the first page of the kind (the workload still decides when it comes),
        erase cuts at the first erase (a quarter: the second) of whichever target gets there first."""
        rnd = random.Random(seed)
        t = cls(tid, seed, site, commands, faults)
        target = rnd.randrange(TARGETS)
        per_target_programs = max(commands * 2 // TARGETS, 4)
        in_boot = rnd.random() < (0.75 if site == "kind:gc" else 0.25)
        progress = round(rnd.uniform(0.05, 0.95), 3)

        cut = {}
        if site in ("program", "recovery"):
            if in_boot and cal["programs"][target]:
                cut = {target: {"power_cut_program": rnd.randint(1, cal["programs"][target])}}
            else:
                t.arm = {"when": "PROGRAM", "targets": [target], "k": rnd.randint(1, per_target_programs)}
        elif site == "erase":
            if in_boot and cal["erases"][target]:
                cut = {target: {"power_cut_erase": rnd.randint(1, cal["erases"][target])}}
            elif not any(cal["programs"]):
                # a young device (no calibration): a short workload erases nothing, its boot erases the
                # blocks it hands out (erased blocks are erased again before use)
                cut = {target: {"power_cut_erase": rnd.randint(1, 3)}}
            elif version == 1:
                t.arm = {"when": "ERASE", "targets": [target], "k": rnd.randint(1, 3)}
            else:
                t.arm = {"when": "ERASE", "targets": list(range(TARGETS)), "k": 1 if rnd.random() < 0.75 else 2}
        elif site == "random":
            t.arm = {"when": "AT_TIME", "targets": list(range(TARGETS)),
                     "ns": rnd.randint(1, commands * RANDOM_NS_PER_COMMAND)}
        elif site.startswith("kind:"):
            # every target counts its own pages of the kind; the first to reach its k-th cuts
            kind = KINDS[site[5:]]
            before = cal["by_kind"].get(kind.name, [0] * TARGETS)
            if in_boot and any(before):
                cut = {i: {"power_cut_kind": int(kind), "power_cut_kind_nth": rnd.randint(1, before[i])}
                       for i in range(TARGETS) if before[i]}
            else:
                t.arm = {"when": "PROGRAM_KIND", "targets": list(range(TARGETS)), "kind": int(kind),
                         "k": rnd.randint(1, 2) if version == 1 else 1}
        if t.arm:
            t.arm["progress"] = progress
        t.cuts = {str(i): {**keys, "power_cut_progress": progress, "power_cut_finish": 1} for i, keys in cut.items()}
        if site == "recovery":
            t.recovery_cut_ns = rnd.randint(1_000_000, 12_000_000)
        if faults == "mix":   # this trial's own subset (kept in the trial, so a replay has the same faults)
            t.faults = rnd.choices(FAULT_MIX, weights=[w for _, w in FAULT_MIX_WEIGHTS])[0]
        t.fault_keys = fault_keys(t.faults, rnd)
        t.boot_cuts = draw_boot_cuts(seed, boot_cuts)
        return t


BOOT_CUT_NS = (300_000, 10_000_000)   # a boot's random instants: bring-up at ~0.2 ms, a young device's boot ~5-10 ms


def draw_boot_cuts(seed: int, n: int) -> list[dict]:
    """``n`` more cuts, each during the boot that follows the cut before it (``--boot-cuts``), as NAND model
    keys for every target, counted from power-on: a random instant of the boot (its reads: the page-0
    pass, the checkpoint, the scan), the k-th erase on any target (the boot erases the blocks it hands
    out, and GC at boot its victims), or its first program (an anchor record, a checkpoint page, a GC
    copy).  Drawn from a stream of their own, so a trial's other draws stay as they were without them."""
    rnd = random.Random(f"boot cuts {seed}")
    cuts = []
    for _ in range(n):
        what, progress = rnd.choice(("instant", "erase", "program")), round(rnd.uniform(0.05, 0.95), 3)
        if what == "instant":
            cuts.append({"power_cut_ns": rnd.randint(*BOOT_CUT_NS)})
        elif what == "erase":
            cuts.append({"power_cut_erase": rnd.randint(1, 3), "power_cut_progress": progress})
        else:
            cuts.append({"power_cut_program": 1, "power_cut_progress": progress})
    return cuts


def exhaustive_trial(op: str, target: int, k: int, args) -> Trial:
    """``--exhaustive``: the fixed workload (seed ``args.seed``) cut at the ``k``-th program or erase of
    ``target`` counted from power-on, half way through it.  Ids: 10000 + 1000 x target + k for programs,
    20000 + ... for erases."""
    key = {"program": "power_cut_program", "erase": "power_cut_erase"}[op]
    return Trial((10_000 if op == "program" else 20_000) + 1000 * target + k, args.seed, op, args.commands,
                 args.faults, cuts={str(target): {key: k, "power_cut_progress": 0.5, "power_cut_finish": 1}},
                 fault_keys=fault_keys(args.faults, random.Random(args.seed)))


def exhaustive_step(trial_id: int) -> tuple[str, int, int]:
    """(operation, target, k) of an :func:`exhaustive_trial` id."""
    return "program" if trial_id < 20_000 else "erase", trial_id % 10_000 // 1000, trial_id % 1000


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


def draw_trials(ids, *, seed: int, sites, commands: int, faults: str, cal: dict, draw_v1_below: int = 0,
                boot_cuts: int = 0) -> list[Trial]:
    """The campaign's trials ``ids``: trial i cuts at site i mod len(sites), drawn from seed * 100003 + i
    (by version 1 of the rules below ``draw_v1_below``), each with ``boot_cuts`` more in the boots after."""
    return [Trial.draw(i, seed * 100003 + i, sites[i % len(sites)], commands, faults, cal,
                       version=1 if i < draw_v1_below else DRAW_VERSION, boot_cuts=boot_cuts) for i in ids]


MLC_KEYS = {"mlc_paired": 1}   # an MLC device: every boot of its images, the base's too
FAULTS = ("bits", "program", "erase", "mlc")
# --faults mix: each trial draws one of these (MLC changes what the device is, so it needs a base of its own)
FAULT_MIX_WEIGHTS = (("", 4), ("bits", 1), ("program", 1), ("erase", 1), ("bits,program,erase", 2))
FAULT_MIX = [f for f, _ in FAULT_MIX_WEIGHTS]


def fault_keys(faults: str, rnd: random.Random) -> dict:
    """NAND model keys for the faults named in ``faults`` (comma-separated FAULTS):
    raw bit errors (ECC corrects them), one program and one erase failure on
    every target, MLC paired-page damage at a cut (the models then report 2
    bits per cell)."""
    on = set(f for f in faults.split(",") if f)
    keys = {}
    if "bits" in on:
        keys["bit_error_rate"] = 2e-5
    if "mlc" in on:
        keys.update(MLC_KEYS)
    if "program" in on:
        keys["fail_program_nth"] = str(rnd.randint(5, 40))
    if "erase" in on:
        keys["fail_erase_nth"] = str(rnd.randint(1, 4))
    return keys


# -- the base image -------------------------------------------------------------

def prepare_base(base: Path, gateware: Path, log=print, fresh: bool = False, mlc: bool = False) -> dict[int, bytes]:
    """Fresh images, a fill that makes GC and checkpoints happen (``fresh``:
    none, a young device), a clean stop.  Returns the base's contents over the
    span (the oracle's initial state).  ``mlc``: the device is MLC (``mlc_paired``) from its first
    boot, so the base's own pages were written as an MLC device writes them (lower pages held until
    their upper page, PAD pages): trials with MLC damage need such a base."""
    done = base / "initial.json"
    meta = json.loads((base / "base.json").read_text()) if (base / "base.json").exists() else {"fresh": False}
    if done.exists() and meta.get("build") != build_name(gateware):
        # another firmware filled it: its anchor blocks hold that firmware's data, say, and the boot would
        # keep the anchor off (flash.c): every build gets a base of its own
        log(f"campaign: the base in {base} was filled by {meta.get('build', 'an older build')}: filled again")
        done.unlink()
    if done.exists():
        if meta["fresh"] != fresh:
            raise SystemExit(f"campaign: {base} holds a {'fresh' if meta['fresh'] else 'seasoned'} base; "
                             f"use another --dir for a {'fresh' if fresh else 'seasoned'} one")
        if meta.get("mlc", False) != mlc:
            raise SystemExit(f"campaign: {base} holds a base of an {'MLC' if meta.get('mlc') else 'SLC'} device; "
                             f"use another --dir for {'MLC paired-page damage' if mlc else 'faults without mlc'}")
        if meta.get("blocks_per_lun", 4) != BLOCKS_PER_LUN:
            raise SystemExit(f"campaign: {base} holds a base of {meta.get('blocks_per_lun', 4)} blocks per LUN; "
                             f"use another --dir for {BLOCKS_PER_LUN}")
        return {int(k): bytes.fromhex(v) for k, v in json.loads(done.read_text()).items()}
    log(f"campaign: preparing the {'fresh' if fresh else 'seasoned'} base image{' (MLC)' if mlc else ''} in {base} ...")
    cfg = simctl.SimConfig(blocks_per_lun=BLOCKS_PER_LUN, nand_set=MLC_KEYS if mlc else {})
    simctl.start(base, cfg, fresh=True, gateware=gateware)
    gc = ck = ""
    try:
        for line in SETUP:
            simctl.console_command(line, base)
        if not fresh:
            out = simctl.console_command(f"io random 9 300 {SPAN}", base, timeout=1800)
            if "error" in out:
                raise RuntimeError(f"base fill failed: {out}")
        # a checkpoint (and its anchor record) even on a young device: the boots after the cuts take the
        # anchor's path when the images let them, and the judge checks it (_anchor_check)
        simctl.console_command("ckpt now", base, timeout=600)
        dev = Device.attach_sim(base)
        initial = read_span(dev, SPAN)
        dev.close()
        gc = simctl.console_command("gc", base)
        ck = simctl.console_command("ckpt", base)
    finally:
        simctl.stop(base)
    log(f"campaign: base ready ({gc.splitlines()[0] if gc else ''}; {ck.splitlines()[0] if ck else ''})")
    (base / "base.json").write_text(json.dumps({"fresh": fresh, "blocks_per_lun": BLOCKS_PER_LUN,
                                                "build": build_name(gateware), "mlc": mlc}))
    done.write_text(json.dumps({str(k): v.hex() for k, v in initial.items()}))
    return initial


def no_calibration() -> dict:
    """A young device's boot programs next to nothing: draw cuts from power-on
    (one that lands in the boot is judged like any other)."""
    return {"programs": [0] * TARGETS, "erases": [0] * TARGETS,
            "by_kind": {k.name: [0] * TARGETS for k in KINDS.values()}}


def _model_stats(run_dir: Path) -> list[dict]:
    """The NAND models' statistics of the last run, per target ({} where a model wrote none)."""
    out = []
    for i in range(TARGETS):
        try:
            out.append(json.loads((run_dir / f"nand{i}.img.stats.json").read_text()))
        except (OSError, json.JSONDecodeError):
            out.append({})
    return out


def calibrate(base: Path, gateware: Path, log=print, mlc: bool = False) -> dict:
    """What a boot of the base does before a workload starts: programs,
    erases and programs per OOB kind on each target, from a clean boot with
    the trial's setup, once GC at boot has settled.  The simulation is
    deterministic in cycles, so a cut drawn past these counts lands in the
    workload.  Cached in ``base/calibration.json``."""
    done = base / "calibration.json"
    if done.exists():
        return json.loads(done.read_text())
    log("campaign: calibrating (a boot of the base without a cut) ...")
    run = base.parent / "calibrate"
    shutil.rmtree(run, ignore_errors=True)
    run.mkdir(parents=True)
    for i in range(TARGETS):
        shutil.copy(base / f"nand{i}.img", run / f"nand{i}.img")
    # The models write their statistics at a power cut: cut every target at a
    # fixed instant well after the setup and GC at boot have settled.
    # (power_cut_finish 0: the first model's $finish would end the run before the others wrote theirs)
    _start(run, gateware, {}, {"power_cut_ns": CALIBRATE_CUT_NS, "power_cut_finish": 0, **(MLC_KEYS if mlc else {})})
    stats = [run / f"nand{i}.img.stats.json" for i in range(TARGETS)]
    try:
        for line in SETUP:
            simctl.console_command(line, run)
        deadline = time.monotonic() + 900
        while not all(p.exists() for p in stats):
            if time.monotonic() > deadline:
                raise RuntimeError(f"calibration: the cut at {CALIBRATE_CUT_NS} ns did not come")
            time.sleep(1)
        time.sleep(1)  # the last file completely written
    finally:
        simctl.stop(run, power_cut=True)
    cal = {"programs": [], "erases": [], "by_kind": {}}
    for st in _model_stats(run):
        cal["programs"].append(st["programs"])
        cal["erases"].append(st["erases"])
        for k in KINDS.values():
            cal["by_kind"].setdefault(k.name, []).append(st.get("programs_by_kind", {}).get(k.name, 0))
    shutil.rmtree(run, ignore_errors=True)
    done.write_text(json.dumps(cal, indent=2))
    log(f"campaign: a boot programs {cal['programs']} pages and erases {cal['erases']} blocks per target")
    return cal


# -- one trial ----------------------------------------------------------------------

def arm_cut(dev, run_dir: Path, arm: dict) -> None:
    """Arm ``arm`` (a Trial's) on the running simulation, counted from now."""
    from atomflash.nandsim import NandCutWhen

    ctl = simctl.NandControl.attach(dev.t, run_dir)
    ctl.schedule_cut(arm["targets"], NandCutWhen[arm["when"]], arm.get("k", 0), ns=arm.get("ns", 0),
                     kind=arm.get("kind", 0), progress=arm.get("progress"), clk_hz=simctl.status(run_dir)["clk_hz"])


def _start(run_dir: Path, gateware: Path, keys_for: dict[int, dict], every: dict | None = None):
    cfg = simctl.SimConfig(blocks_per_lun=BLOCKS_PER_LUN, image=str(run_dir / "nand"),
                           nand_set=dict(every or {}),
                           target_set=[keys_for.get(t, {}) for t in range(TARGETS)])
    return simctl.start(run_dir, cfg, fresh=False, boot_timeout=600, gateware=gateware)


def _programs_by_kind(run_dir: Path) -> dict[str, int]:
    """Programs per OOB kind in the last run, all targets."""
    total: dict[str, int] = {}
    for st in _model_stats(run_dir):
        for k, v in st.get("programs_by_kind", {}).items():
            total[k] = total.get(k, 0) + v
    return total


def _power_lost(run_dir: Path) -> bool:
    """The NAND models cut the power in the current run (as configured)."""
    return "power lost at" in simctl.boot_text(run_dir)


@dataclass
class Chain:
    """One simulated device that trials run on back to back (:func:`run_chain`): a trial's reboot, which
    recovers and verifies its cut, is the next trial's boot."""
    run: Path                       # the simulation's directory (its images are the device)
    initial: dict[int, bytes]       # what the span holds now: the next trial's oracle state
    start: Path                     # the images the running boot started from (a failing trial's reproducer)
    booted: bool = False            # up, recovered, verified: the next trial goes straight to its workload
    first: int = -1                 # the id of its first trial (a ledger entry's chain_start)

    def snapshot(self, name: str) -> Path:
        """Copy the (stopped) simulation's images to run/<name>; returns that directory."""
        d = self.run / name
        shutil.rmtree(d, ignore_errors=True)
        d.mkdir(parents=True)
        for i in range(TARGETS):
            shutil.copy(self.run / f"nand{i}.img", d / f"nand{i}.img")
        return d


def loses_blocks(faults: str | None) -> bool:
    """``faults`` (a trial's) inject program or erase failures: the only way a block goes bad (grown bad,
    retired)."""
    return bool({"program", "erase"} & set((faults or "").split(",")))


def _chain_ends_after(t: Trial) -> bool:
    """Program or erase failures leave grown bad blocks: the next trial starts from the base again."""
    return loses_blocks(t.faults)


def chains_of(trials: list[Trial], length: int) -> list[list[Trial]]:
    """Trials grouped into chains of up to ``length``: a trial whose cut is a NAND setting counted from
    power-on (``cuts``: in the boot) starts a chain; one that leaves grown bad blocks ends it."""
    out, cur = [], []
    for t in trials:
        if cur and (t.cuts or len(cur) >= length):
            out.append(cur)
            cur = []
        cur.append(t)
        if _chain_ends_after(t):
            out.append(cur)
            cur = []
    if cur:
        out.append(cur)
    return out


def run_chain(trials: list[Trial], base: Path, out: Path, initial: dict[int, bytes], gateware: Path) -> list[dict]:
    """``trials`` back to back on one copy of the base: each trial's reboot recovers and verifies its cut,
    then the next trial's workload runs on that same boot.  A trial that fails, or leaves the device out
    of space, ends the chain there (the rest run as a new chain from the base)."""
    results = []
    while trials:
        chain = Chain(out / f"chain-{trials[0].id:05d}", dict(initial), base, first=trials[0].id)
        shutil.rmtree(chain.run, ignore_errors=True)
        chain.run.mkdir(parents=True)
        for i in range(TARGETS):
            shutil.copy(base / f"nand{i}.img", chain.run / f"nand{i}.img")
        try:
            while trials:
                t = trials.pop(0)
                nxt = trials[0] if trials and not trials[0].cuts and not _chain_ends_after(t) else None
                r = run_trial(t, chain, out, gateware, next_trial=nxt)
                results.append(r)
                if not chain.booted:
                    break
        finally:
            if chain.booted:
                simctl.stop(chain.run, power_cut=True)
            shutil.rmtree(chain.run, ignore_errors=True)
    return results


def run_trial(trial: Trial, chain: Chain | Path, out: Path, gateware: Path, initial: dict[int, bytes] | None = None,
              next_trial: Trial | None = None) -> dict:
    """One trial on ``chain`` (or, given a base directory and ``initial``, on a copy of it).  With
    ``next_trial`` the simulation stays up after a passing verification, set up for that trial."""
    if not isinstance(chain, Chain):
        results = run_chain([trial], chain, out, initial, gateware)
        return results[0]
    run = chain.run
    tdir = out / f"t{trial.id:05d}"
    shutil.rmtree(tdir, ignore_errors=True)
    tdir.mkdir(parents=True)
    (tdir / "trial.json").write_text(json.dumps(asdict(trial), indent=2))
    initial, start = chain.initial, chain.start
    res = {"id": trial.id, "site": trial.site, "seed": trial.seed, "faults": trial.faults, "outcome": "error",
           "detail": "", "commands": 0, "in_flight": 0, "cut_seen": False, "chained": chain.booted,
           "chain_start": chain.first,
           "build": build_name(gateware)}
    t0 = time.monotonic()
    phases = res["phases"] = {}

    def phase(name):  # wall seconds per phase, for the report and for tuning
        phases[name] = round(time.monotonic() - t0 - sum(phases.values()), 1)

    try:
        if not chain.booted and not _boot(trial, run, gateware, res):
            return res
        chain.booted = False
        phase("boot")
        attached = None if res["cut_seen"] else _setup(trial, run, initial, res)
        phase("setup")
        rec = attached and attached[1]
        if attached is not None and not _workload(trial, *attached, run, res):
            return res
        phase("workload")
        _cut(trial, run, gateware, res)
        phase("cut")
        # what the next trial's boot starts from: its reproducer, should it fail
        after_cut = chain.snapshot(f"start-{next_trial.id:05d}") if next_trial is not None else None
        # the reboot recovers and verifies this trial; chained, it is also the next trial's boot (its faults)
        boot_keys = ({**next_trial.fault_keys, **({"power_cut_finish": 1} if next_trial.arm else {})}
                     if next_trial is not None else trial.fault_keys)
        try:
            _start(run, gateware, {}, boot_keys)
        except simctl.SimError as e:
            res.update(outcome="boot-failure", detail=str(e)[-800:])
            return res
        phase("reboot")
        recovered = _verify(trial, run, rec, initial, res)
        if res["outcome"] in ("pass", "no-cut") and next_trial is not None and not res.get("no_space"):
            chain.booted, chain.initial, chain.start = True, recovered, after_cut
            if start.parent == run:
                shutil.rmtree(start, ignore_errors=True)   # this trial's own start: it passed
        else:
            simctl.stop(run)
        phase("verify")
    except Exception as e:  # noqa: BLE001 -- every failure becomes a reproducer
        res.update(outcome="error", detail=f"{type(e).__name__}: {e}\n{traceback.format_exc()[-1500:]}")
        chain.booted = False
        simctl.stop(run, power_cut=True)
    finally:
        res["wall_s"] = round(time.monotonic() - t0, 1)
        if res["outcome"] in ("pass", "no-cut"):
            shutil.rmtree(tdir, ignore_errors=True)
        else:
            # the reproducer: the images this trial's boot started from, its oracle state, the base's settings;
            # and what the firmware printed (the chain's directory goes when the chain ends)
            for log in ("console.log", "supervisor.log"):
                if (run / log).exists():
                    shutil.copy(run / log, tdir / log)
            shutil.copytree(start, tdir / "base", ignore=shutil.ignore_patterns("*.sock", "modules"), dirs_exist_ok=True)
            (tdir / "base" / "initial.json").write_text(json.dumps({str(k): v.hex() for k, v in initial.items()}))
            (tdir / "base" / "base.json").write_text(json.dumps({"fresh": False, "blocks_per_lun": BLOCKS_PER_LUN}))
            res["replay"] = f"python sim/campaign.py --dir {out} --replay {tdir / 'trial.json'}"
            (tdir / "result.json").write_text(json.dumps(res, indent=2))
    return res


def _boot(trial: Trial, run: Path, gateware: Path, res: dict) -> bool:
    """Power on for the trial (not chained).  The cut may come before the workload: the firmware's own
    programs (recovery, GC at boot) count too, which is a cut like any other.  False: the boot failed."""
    try:
        # power_cut_finish everywhere: a cut armed later ends the simulation too
        _start(run, gateware, {int(i): keys for i, keys in trial.cuts.items()},
               {**trial.fault_keys, **({"power_cut_finish": 1} if trial.arm else {})})
    except simctl.SimError as e:
        if not _power_lost(run):
            res.update(outcome="boot-failure", detail=str(e)[-800:])
            return False
        res.update(cut_seen=True, cut_during="boot")
    return True


def _setup(trial: Trial, run: Path, initial: dict[int, bytes], res: dict):
    """Console settings, the host queues attached and mirrored in the model, the cut armed: (the
    devices, their recorder), or None when the power went meanwhile."""
    try:
        for line in SETUP:
            simctl.console_command(line, run)
        devs = Device.attach_sim_all(run, queues=trial.queues or None, timeout=300)
        rec = Recorder(devs, initial=initial)
        if trial.arm:
            arm_cut(devs[0], run, trial.arm)
        if trial.site == "kind:gc":
            # GC now, whatever the device's size: a workload's open appends and transactions hold
            # the checkpoint floor, after which GC may erase nothing newer (docs/firmware.md)
            total = TARGETS * BLOCKS_PER_LUN
            simctl.console_command(f"gc thresholds {total - 4} {total - 2}", run)
        return devs, rec
    except (simctl.SimError, TransportError):
        if not _power_lost(run):
            raise
        res.update(cut_seen=True, cut_during="setup")
        return None


def _workload(trial: Trial, devs, rec: Recorder, run: Path, res: dict) -> bool:
    """The random host workload until it ends or the power goes; an armed cut that has not come gets the
    idle tail.  False: a read disagreed with the model (the trial is over)."""
    killer = None
    if trial.kill_after_s:
        import threading

        killer = threading.Timer(trial.kill_after_s, simctl.stop, args=(run,), kwargs={"power_cut": True})
        killer.start()
    try:
        random_workload(rec, random.Random(trial.seed), commands=trial.commands, span=SPAN, salt=trial.seed)
        if trial.arm:
            # an armed cut that has not come: the idle loop's work (a checkpoint due, background GC)
            # may still reach it
            res["tail"] = True
            ctl = simctl.NandControl.attach(devs[0].t, run)
            c0 = ctl.cycle()
            while ctl.cycle() - c0 < TAIL_CYCLES:
                time.sleep(0.1)
    except TransportError:
        res.update(cut_seen=True, cut_during="workload")
    except OutOfSpace as e:
        # the device refused new data (grown bad blocks, GC stuck): the workload ends here and the
        # power goes now; the refused command changed nothing (it stays unacknowledged)
        res["no_space"] = f"workload: {e}"
        _no_space_episode(res, len(rec.model.map), rec.dev.capacity)
    except Mismatch as e:
        res.update(outcome="mismatch", detail=str(e))
        simctl.stop(run, power_cut=True)
        return False
    finally:
        if killer is not None:
            killer.cancel()
            killer.join()   # a cut already firing must end before the next boot, or it cuts that one
    devs.close()
    res["commands"] = rec.counts.commands
    res["queues"] = len(rec.devs)
    res["overlapped"] = rec.counts.overlapped   # commands submitted while another queue had one in flight
    res["in_flight"] = len(rec.in_flight_ops)
    return True


def _anchor_check(run: Path, res: dict) -> None:
    """Judge the images as the next boot finds them: when the newest anchor record belongs to the newest
    checkpoint (the boot reads page 0 of the blocks they name only), every block written since the
    checkpoint's floor must be among them, or the boot would take it for free and erase it."""
    images = [nandsim.Image(run / f"nand{i}.img") for i in range(TARGETS)]
    try:
        pages = flashimg.read_log(images, spec.nand_page_layout(PROFILE), WAYS)
        anchor_pages = flashimg.read_anchor_blocks(images, spec.nand_page_layout(PROFILE))
    finally:
        for img in images:
            img.close()
    ck = flashimg.read_checkpoint(pages, PROFILE.pages_per_block, PROFILE.page_data)
    rec = flashimg.read_anchor(pages + anchor_pages, PROFILE.page_data)
    if not flashimg.anchor_belongs(rec, ck):
        res.setdefault("anchor", "full")            # the boot reads page 0 of every block
        return
    res.setdefault("anchor", "fast")
    missed = flashimg.anchor_uncovered(pages, ck, rec, WAYS, BLOCKS_PER_LUN)
    if missed:
        res.setdefault("anchor_missed", []).extend(f"0x{p:08x}" for p in missed)


def _cut(trial: Trial, run: Path, gateware: Path, res: dict) -> None:
    """The power goes (if the cut did not already take it), then the optional second cut in the boot."""
    if not res["cut_seen"]:
        simctl.stop(run, power_cut=True)
    simctl.wait_exit(run, timeout=120)
    res["programs_by_kind"] = _programs_by_kind(run)
    _anchor_check(run, res)
    if trial.recovery_cut_ns:   # the second cut: during the next boot
        res["recovery_cut"] = _cut_boot(run, gateware, {**trial.fault_keys, "power_cut_ns": trial.recovery_cut_ns}, res)
    # an injected program or erase failure counts from power-on: every boot would add one more per target, so
    # these boots keep the device's own faults only (bit errors, MLC pairing)
    physical = {k: v for k, v in trial.fault_keys.items() if not k.startswith("fail_")}
    for keys in trial.boot_cuts:
        res.setdefault("boot_cuts", []).append(_cut_boot(run, gateware, {**physical, **keys}, res))


def _cut_boot(run: Path, gateware: Path, keys: dict, res: dict) -> str:
    """A boot of the images with a cut armed by ``keys`` (every target): 'during boot' when it came while
    the firmware recovered, 'after boot' when the boot got to its prompt first (the power goes there)."""
    try:
        _start(run, gateware, {}, {**keys, "power_cut_finish": 1})
        where = "after boot"
        simctl.stop(run, power_cut=True)
    except simctl.SimError:
        if not _power_lost(run):
            raise   # the boot failed by itself
        where = "during boot"
    simctl.wait_exit(run, timeout=120)
    _anchor_check(run, res)
    return where


def _verify(trial: Trial, run: Path, rec: Recorder | None, initial: dict[int, bytes], res: dict) -> dict[int, bytes]:
    """On the recovered device: every LBA of the span judged against the model's history, then a probe
    write (new work, or NO_SPACE with its reason and reads going on).  Sets the outcome; returns the span
    as read back."""
    dev = Device.attach_sim(run, timeout=300)
    res["recovery"] = [l for l in simctl.boot_report(run).splitlines() if l.startswith("recovery:")][:2]
    recovered = read_span(dev, SPAN)
    history = rec.model.history if rec is not None else []
    violations = verify(history, recovered, lba_size=dev.lba_size, initial=initial)
    probe = bytes([trial.id & 0xFF or 1]) * dev.lba_size
    before = dev.read(SPAN)
    try:
        dev.write(SPAN, probe)
        new_work = dev.read(SPAN) == probe
    except TimeoutError as e:
        # a hang: what the firmware says of its space and GC (if its console still answers) goes with
        # the error, since a replay may not hang again (trial 6441)
        said = []
        for line in ("stats", "gc"):
            try:
                said.append(simctl.console_command(line, run, timeout=30))
            except simctl.SimError as ce:
                said.append(f"{line}: no answer ({ce})")
                break
        raise TimeoutError(f"{e}; the console after it:\n" + "\n".join(said)) from e
    except errors.NoSpace:
        # out of space is an answer, not a hang: the log page must say why, and reads must go on
        log = dev.stats()
        why = spec.NoSpace(log["no_space"])
        res["no_space"] = f"after recovery: {why.name}"
        res["spare_blocks"] = log["spare_blocks"]
        _no_space_episode(res, sum(1 for b in recovered.values() if any(b)), getattr(dev, "capacity", None))
        new_work = why != spec.NoSpace.NONE and dev.read(SPAN) == before
        if why == spec.NoSpace.FULL and not loses_blocks(trial.faults):
            # a chain ends after any trial that may grow bad blocks, so this device has every block the
            # base had: the capacity leaves room for GC on those (docs/firmware.md "Out of space")
            res["full_unlost"] = True
    timeouts = simctl.bus_errors(dev.t, run)   # a bus access no slave answered: never, in a healthy SoC
    dev.close()
    if violations:
        res.update(outcome="violation", detail="; ".join(map(str, violations[:10])), violations=len(violations))
    elif res.get("anchor_missed"):
        res.update(outcome="violation", detail="the anchor's plan and the checkpoint's open list miss blocks "
                   "written since its floor (page 0 at " + ", ".join(res["anchor_missed"][:8]) + ")")
    elif timeouts:
        res.update(outcome="violation", detail=f"{timeouts} bus timeouts since the reboot (ctrl_bus_errors)")
    elif res.get("full_unlost"):
        res.update(outcome="violation", detail="the device refused new work as FULL without a grown bad block "
                   f"(spare_blocks {res['spare_blocks']}; no program or erase failure was injected)")
    elif no_space_below_capacity(trial, res):
        res.update(outcome="violation", detail=f"{res['no_space_episodes']} NO_SPACE episode(s) with "
                   f"{res['no_space_stored']} of {res.get('capacity') or '?'} LBAs stored and no program or erase "
                   f"failure injected (last: {res['no_space']})")
    elif not new_work:
        res.update(outcome="violation", detail="the device did not take new work after recovery")
    else:
        res["outcome"] = "pass" if res["cut_seen"] else "no-cut"
    return recovered


def _no_space_episode(res: dict, stored: int, capacity: int | None) -> None:
    """Count one NO_SPACE episode of the trial (its workload's, or the probe's after recovery) and the
    LBAs the host had stored then."""
    res["no_space_episodes"] = res.get("no_space_episodes", 0) + 1
    res["no_space_stored"] = max(res.get("no_space_stored", 0), stored)
    res["capacity"] = capacity if capacity is not None else res.get("capacity")


def no_space_below_capacity(trial: Trial, res: dict) -> bool:
    """The trial met NO_SPACE while the host stored less than the capacity, on a device that cannot have
    lost a block (no program or erase failure injected): a drive must keep taking writes then, whatever
    the host left open (docs/firmware.md "Out of space")."""
    if not res.get("no_space_episodes") or loses_blocks(trial.faults):
        return False
    return res.get("capacity") is None or res["no_space_stored"] < res["capacity"]


# -- campaign --------------------------------------------------------------------------

def freeze_gateware(gw: Path, dest: Path) -> Path:
    """A copy of what a simulation runs from (``Vsim``, ``modules/``, the memory images, ``sim_config.js``,
    ``csr.csv``) under ``dest``: the shared build may be rebuilt while a long campaign runs (a test, a
    firmware change), and a running ``Vsim`` whose binary is replaced dies (SIGBUS).  Returns the copy's
    gateware directory.  One copy per build (named by the binary's time stamp, the memory images and the modules,
    so a firmware-only rebuild gets a copy of its own), so a replay started while a campaign runs in the
    same directory shares its copy instead of replacing it."""
    import hashlib

    h = hashlib.sha256(str((gw / "obj_dir" / "Vsim").stat().st_mtime_ns).encode())
    for f in sorted(gw.glob("*.init")):   # the firmware is in the memory images, not the binary
        h.update(f.name.encode() + f.read_bytes())
    for f in sorted((gw / "modules").glob("*.so")):   # the simulator's modules: the host port's among them
        h.update(f.name.encode() + f.read_bytes())
    dest = dest.with_name(f"{dest.name}-{h.hexdigest()[:16]}")
    dest_gw = dest / "gateware"
    if (dest / "csr.csv").exists():
        return dest_gw
    shutil.rmtree(dest, ignore_errors=True)
    (dest_gw / "obj_dir").mkdir(parents=True)
    shutil.copy2(gw / "obj_dir" / "Vsim", dest_gw / "obj_dir" / "Vsim")
    shutil.copytree(gw / "modules", dest_gw / "modules")
    for f in gw.iterdir():
        if f.suffix in (".init", ".js"):
            shutil.copy2(f, dest_gw / f.name)
    shutil.copy2(gw.parent / "csr.csv", dest / "csr.csv")
    return dest_gw


def build_name(gateware: Path) -> str:
    """What a result records of the simulation it ran on: the frozen copy's name (binary and firmware
    images), or the directory it was given."""
    return gateware.parent.name if gateware.name == "gateware" else str(gateware)


def _done(results: Path) -> dict[int, dict]:
    if not results.exists():
        return {}
    return {r["id"]: r for r in _json_lines(results)}


def _json_lines(path: Path) -> list[dict]:
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


# -- the ledger: a long campaign's results, committed, so a new machine resumes it ------------------

# What became of a failure of the long campaign (the ledger named here) once it was looked into (the
# report prints it under the failure; its counts stay as judged then; the run's exit status counts only
# the failures not in it): trial id -> the cause and the change that dealt with it.
RESOLVED_LEDGER = "campaign_long.jsonl"
RESOLVED = {
    149: "the harness: a warning from the idle loop landed inside the echoed command; the console keeps the "
         "line being typed whole since c9d5b7d (docs/campaign.md)",
    459: "recovery: a cut at 97% left an intact OOB over torn data; the page ending a block's written prefix "
         "counts only if its data decodes since 7e2532a (docs/campaign.md)",
    2745: "firmware: a block the core closed during a checkpoint's FLUSH was in neither the header's open list "
          "nor the plan; fixed in 27696e9 (the header lists every block closed after the floor)",
    3514: "the judge: the block held only a failed checkpoint's pages (a map-page program failure), rotated back "
          "into the free pool by the next checkpoint; the boot erases it and loses nothing.  anchor_uncovered "
          "counts no checkpoint pages since (replay: pass); the firmware now retires an area block whose program "
          "failed",
    3605: "as trial 3514 (replay: pass)",
    4432: "firmware: a block retired after a program failure left the next boot's scan before a checkpoint "
          "covered it, with pages recovery still needed (a COMMIT record, a superseded member: GC moves only "
          "bound data); it now retires only under a covering checkpoint (its images are gone; "
          "test_soc_badblock reproduces the loss)",
    5704: "the harness: its reader of the console connected while the prompt after the boot was printed and "
          "saw only its last space, which the echo's pattern did not allow (the firmware had answered); "
          "any tail of the prompt is now allowed (console_text.command_output; trial 5982 met "
          "it on the limits in simulator time).  Its chain again (--ids 5704-5707): all four pass",
    5707: "the harness: a 600 s wall-clock limit ended a boot the simulator, starved on a loaded machine, had "
          "barely run (the report stops mid-line; neighbour 5705 took 1,214 s for a ~35 s trial); limits "
          "count the simulator's CPU time since d81bc8c (simctl.SimDeadline); the chain again passes",
    5982: "as trial 5704 (the wait for the prompt used 300 s of the simulator's own time, 916 s of wall time)",
    6441: "firmware: erase failures ate GC's reserve and GC copied on into the last pages; the next copy, and the "
          "write the core had taken, waited for a page no erase would bring.  GC now keeps one block for the "
          "commands in the core (then GC_STUCK); test_soc_nospace reproduces the hang",
    6952: "firmware: after the reboot the core had no block (two left, both GC's reserve) and the probe write "
          "waited for a page; GC needed a checkpoint first, whose FLUSH waited behind that write, so nothing "
          "moved (replayed on its build: the firmware's queue one command behind, the core starved).  The "
          "reserve goes to a starved core while the firmware waits for its own command, and with no block "
          "at all the core completes what waits NO_SPACE (ftl.host_enable.no_blocks); the "
          "replay on the new build passes (its run differs: the cut lands elsewhere)",
}

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
        for r in _json_lines(path):
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


def boot_cuts_seen(results: list[dict]) -> int:
    """The ``--boot-cuts`` that came while their boot recovered."""
    return sum(c == "during boot" for r in results for c in r.get("boot_cuts", ()))


def archived_ids(archived: list[dict]) -> set[int]:
    return {i for a in archived for i in range(a["ids"][0], a["ids"][1] + 1)}


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

Generated by `sim/campaign.py {' '.join(a for a in sys.argv[1:] if a != '--report-only')}` ({n} {'trials' if getattr(args, 'exhaustive', False) else f'of {args.count} trials'} done, {hours:.1f} simulator-hours; rerunning the command resumes; seed {args.seed}; commands per trial {args.commands};
{TARGETS} NAND targets x {BLOCKS_PER_LUN} blocks per LUN, small profile; faults {args.faults or 'off'}).
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


def resolved_for(args) -> dict[int, str]:
    """RESOLVED, for the long campaign's ledger only: another campaign's trial ids are other trials."""
    ledger = getattr(args, "ledger", None)
    return RESOLVED if ledger is not None and Path(ledger).name == RESOLVED_LEDGER else {}


def _resolved(trial_id: int, resolved: dict[int, str]) -> str:
    return f"\n  resolved: {resolved[trial_id]}" if trial_id in resolved else ""


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--count", type=int, default=10, help="trials (resumes: trials already in results.jsonl are kept)")
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
    p.add_argument("--dir", type=Path, default=ROOT / "build" / "campaign", help="campaign directory")
    p.add_argument("--blocks-per-lun", type=int, default=BLOCKS_PER_LUN,
                   help="the device's blocks per LUN (4 x this blocks in all; more: fault runs keep room to work)")
    p.add_argument("--report", type=Path, default=None, help="write the report (markdown) here")
    p.add_argument("--ledger", type=Path, default=None,
                   help="a committed record of the results (JSON lines, a few fields per trial): trials in it "
                        "count as done and every new result is added, so the campaign resumes on another machine "
                        "whose --dir is empty (make campaign-long: docs/campaign_long.jsonl)")
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
    if args.blocks_per_lun < 4:
        p.error("--blocks-per-lun: at least 4 (the checkpoint areas, GC's reserve and an open block per die)")
    _set_geometry(args.blocks_per_lun)
    if args.gateware and (args.gateware / "gateware" / "sim_config.js").exists():
        args.gateware = args.gateware / "gateware"   # a frozen copy: its gateware directory
    if args.gateware and not (args.gateware / "sim_config.js").exists():
        p.error(f"--gateware: {args.gateware} holds no built simulation (sim_config.js)")
    results_path = out / "results.jsonl"
    ledger, archived = read_ledger(args.ledger)
    done = {**ledger, **_done(results_path)}
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
                else freeze_gateware(simctl.build(simctl.SimConfig(blocks_per_lun=BLOCKS_PER_LUN, pgo=args.pgo)),
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
    with ProcessPoolExecutor(max_workers=max(args.jobs, 1), initializer=_set_geometry,
                             initargs=(BLOCKS_PER_LUN,)) as pool:
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
        print(f"campaign: {len(bad)} failures, every one resolved (RESOLVED in sim/campaign.py)")
    return 1 if unresolved else 0


if __name__ == "__main__":
    sys.exit(main())
