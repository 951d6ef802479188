"""Running trials: chains of them back to back on one simulated device (:func:`run_chain`), and
one trial's boot, setup, workload, cut(s), reboot and verification (:func:`run_trial`); a failing
trial keeps a reproducer (its images, console log, ``trial.json``) and a replay command."""

from __future__ import annotations

import json
import random
import shutil
import time
import traceback
from dataclasses import asdict, dataclass
from pathlib import Path

from atomflash import simctl
from atomflash.device import Device
from atomflash.transport import TransportError
from atomflash.workload import Mismatch, OutOfSpace, Recorder, random_workload

from . import config
from .base import build_name, model_stats, start_sim
from .config import SETUP, SPAN, TAIL_CYCLES, TARGETS, loses_blocks
from .draw import Trial
from .judge import anchor_check, no_space_episode, verify_recovered


def arm_cut(dev, run_dir: Path, arm: dict) -> None:
    """Arm ``arm`` (a Trial's) on the running simulation, counted from now."""
    from atomflash.nandsim import NandCutWhen

    with simctl.debug_port(run_dir, dev) as t:
        ctl = simctl.NandControl.attach(t, run_dir)
        ctl.schedule_cut(arm["targets"], NandCutWhen[arm["when"]], arm.get("k", 0), ns=arm.get("ns", 0),
                         kind=arm.get("kind", 0), progress=arm.get("progress"),
                         clk_hz=simctl.status(run_dir)["clk_hz"])


def _programs_by_kind(run_dir: Path) -> dict[str, int]:
    """Programs per OOB kind in the last run, all targets."""
    total: dict[str, int] = {}
    for st in model_stats(run_dir):
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
            start_sim(run, gateware, {}, boot_keys)
        except simctl.SimError as e:
            res.update(outcome="boot-failure", detail=str(e)[-800:])
            return res
        phase("reboot")
        recovered = verify_recovered(trial, run, rec, initial, res)
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
            (tdir / "base" / "base.json").write_text(json.dumps({"fresh": False, "blocks_per_lun": config.BLOCKS_PER_LUN,
                                                                     "cache_pages": config.CACHE_PAGES}))
            res["replay"] = f"python -m sim.campaign --dir {out} --replay {tdir / 'trial.json'}"
            (tdir / "result.json").write_text(json.dumps(res, indent=2))
    return res


def _boot(trial: Trial, run: Path, gateware: Path, res: dict) -> bool:
    """Power on for the trial (not chained).  The cut may come before the workload: the firmware's own
    programs (recovery, GC at boot) count too, which is a cut like any other.  False: the boot failed."""
    try:
        # power_cut_finish everywhere: a cut armed later ends the simulation too
        start_sim(run, gateware, {int(i): keys for i, keys in trial.cuts.items()},
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
            total = TARGETS * config.BLOCKS_PER_LUN
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
            with simctl.debug_port(run, devs[0]) as t:
                ctl = simctl.NandControl.attach(t, run)
                c0 = ctl.cycle()
                while ctl.cycle() - c0 < TAIL_CYCLES:
                    time.sleep(0.1)
    except TransportError:
        res.update(cut_seen=True, cut_during="workload")
    except OutOfSpace as e:
        # the device refused new data (grown bad blocks, GC stuck): the workload ends here and the
        # power goes now; the refused command changed nothing (it stays unacknowledged)
        res["no_space"] = f"workload: {e}"
        no_space_episode(res, len(rec.model.map), rec.dev.capacity)
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


def _cut(trial: Trial, run: Path, gateware: Path, res: dict) -> None:
    """The power goes (if the cut did not already take it), then the optional second cut in the boot."""
    if not res["cut_seen"]:
        simctl.stop(run, power_cut=True)
    simctl.wait_exit(run, timeout=120)
    res["programs_by_kind"] = _programs_by_kind(run)
    anchor_check(run, res)
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
        start_sim(run, gateware, {}, {**keys, "power_cut_finish": 1})
        where = "after boot"
        simctl.stop(run, power_cut=True)
    except simctl.SimError:
        if not _power_lost(run):
            raise   # the boot failed by itself
        where = "during boot"
    simctl.wait_exit(run, timeout=120)
    anchor_check(run, res)
    return where
