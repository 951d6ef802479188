"""A campaign's trials: where each cuts the power (:class:`Trial`, :func:`draw_trials`; the
sites in the package's docstring), the boots cut after it (:func:`draw_boot_cuts`), the NAND faults
it runs with (:func:`fault_keys`), and ``--exhaustive``'s ladders (:func:`exhaustive_trial`)."""

from __future__ import annotations

import random
from dataclasses import dataclass, field

from atomflash import nandsim, spec

from .config import MLC_KEYS, TARGETS

RANDOM_NS_PER_COMMAND = 150_000  # simulated time a workload command takes (30 took 4.7 ms): the random site's window
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
        """``cal``: what a boot of the base does before the workload (:func:`.base.calibrate`).  A
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


def draw_trials(ids, *, seed: int, sites, commands: int, faults: str, cal: dict, draw_v1_below: int = 0,
                boot_cuts: int = 0) -> list[Trial]:
    """The campaign's trials ``ids``: trial i cuts at site i mod len(sites), drawn from seed * 100003 + i
    (by version 1 of the rules below ``draw_v1_below``), each with ``boot_cuts`` more in the boots after."""
    return [Trial.draw(i, seed * 100003 + i, sites[i % len(sites)], commands, faults, cal,
                       version=1 if i < draw_v1_below else DRAW_VERSION, boot_cuts=boot_cuts) for i in ids]


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
