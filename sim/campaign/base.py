"""What every trial starts from: the simulation's build, frozen (``simctl.freeze_gateware``), the
base image (:func:`prepare_base`: a fill that makes GC and checkpoints happen) and what a boot of it
does before a workload (:func:`calibrate`); :func:`start_sim` boots a run directory."""

from __future__ import annotations

import json
import shutil
import time
from pathlib import Path

from atomflash import simctl
from atomflash.device import Device
from atomflash.workload import read_span

from . import config
from .config import CALIBRATE_CUT_NS, MLC_KEYS, SETUP, SPAN, TARGETS
from .draw import KINDS


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
        if meta.get("blocks_per_lun", 4) != config.BLOCKS_PER_LUN:
            raise SystemExit(f"campaign: {base} holds a base of {meta.get('blocks_per_lun', 4)} blocks per LUN; "
                             f"use another --dir for {config.BLOCKS_PER_LUN}")
        return {int(k): bytes.fromhex(v) for k, v in json.loads(done.read_text()).items()}
    log(f"campaign: preparing the {'fresh' if fresh else 'seasoned'} base image{' (MLC)' if mlc else ''} in {base} ...")
    cfg = simctl.SimConfig(blocks_per_lun=config.BLOCKS_PER_LUN, nand_set=MLC_KEYS if mlc else {}, nvme=config.NVME,
                           cache_pages=config.CACHE_PAGES)
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
        # anchor's path when the images let them, and the judge checks it (judge.anchor_check)
        simctl.console_command("ckpt now", base, timeout=600)
        dev = Device.attach_sim(base)
        initial = read_span(dev, SPAN)
        dev.close()
        gc = simctl.console_command("gc", base)
        ck = simctl.console_command("ckpt", base)
    finally:
        simctl.stop(base)
    log(f"campaign: base ready ({gc.splitlines()[0] if gc else ''}; {ck.splitlines()[0] if ck else ''})")
    (base / "base.json").write_text(json.dumps({"fresh": fresh, "blocks_per_lun": config.BLOCKS_PER_LUN,
                                                "build": build_name(gateware), "mlc": mlc,
                                                "cache_pages": config.CACHE_PAGES}))
    done.write_text(json.dumps({str(k): v.hex() for k, v in initial.items()}))
    return initial


def no_calibration() -> dict:
    """A young device's boot programs next to nothing: draw cuts from power-on
    (one that lands in the boot is judged like any other)."""
    return {"programs": [0] * TARGETS, "erases": [0] * TARGETS,
            "by_kind": {k.name: [0] * TARGETS for k in KINDS.values()}}


def model_stats(run_dir: Path) -> list[dict]:
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
    start_sim(run, gateware, {}, {"power_cut_ns": CALIBRATE_CUT_NS, "power_cut_finish": 0, **(MLC_KEYS if mlc else {})})
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
    for st in model_stats(run):
        cal["programs"].append(st["programs"])
        cal["erases"].append(st["erases"])
        for k in KINDS.values():
            cal["by_kind"].setdefault(k.name, []).append(st.get("programs_by_kind", {}).get(k.name, 0))
    shutil.rmtree(run, ignore_errors=True)
    done.write_text(json.dumps(cal, indent=2))
    log(f"campaign: a boot programs {cal['programs']} pages and erases {cal['erases']} blocks per target")
    return cal


def start_sim(run_dir: Path, gateware: Path, keys_for: dict[int, dict], every: dict | None = None):
    cfg = simctl.SimConfig(blocks_per_lun=config.BLOCKS_PER_LUN, image=str(run_dir / "nand"), nvme=config.NVME,
                           cache_pages=config.CACHE_PAGES,
                           nand_set=dict(every or {}),
                           target_set=[keys_for.get(t, {}) for t in range(TARGETS)])
    return simctl.start(run_dir, cfg, fresh=False, boot_timeout=600, gateware=gateware)


def build_name(gateware: Path) -> str:
    """What a result records of the simulation it ran on: the frozen copy's name (binary and firmware
    images), or the directory it was given."""
    return gateware.parent.name if gateware.name == "gateware" else str(gateware)
