"""The verdict on a trial: the images as the next boot finds them (:func:`anchor_check`), then
the recovered device against the model's history, and whether it takes new work
(:func:`verify_recovered`); NO_SPACE below the capacity on a device that lost no block is a
violation (:func:`no_space_below_capacity`)."""

from __future__ import annotations

from pathlib import Path

from atomflash import errors, nandsim, simctl, spec
from atomflash.device import Device
from atomflash.workload import Recorder, read_span, verify
from sim import flashimg

from . import config
from .config import PROFILE, SPAN, TARGETS, WAYS, loses_blocks
from .draw import Trial


def anchor_check(run: Path, res: dict) -> None:
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
    missed = flashimg.anchor_uncovered(pages, ck, rec, WAYS, config.BLOCKS_PER_LUN)
    if missed:
        res.setdefault("anchor_missed", []).extend(f"0x{p:08x}" for p in missed)


def verify_recovered(trial: Trial, run: Path, rec: Recorder | None, initial: dict[int, bytes], res: dict) -> dict[int, bytes]:
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
        no_space_episode(res, sum(1 for b in recovered.values() if any(b)), getattr(dev, "capacity", None))
        new_work = why != spec.NoSpace.NONE and dev.read(SPAN) == before
        if why == spec.NoSpace.FULL and not loses_blocks(trial.faults):
            # a chain ends after any trial that may grow bad blocks, so this device has every block the
            # base had: the capacity leaves room for GC on those (docs/firmware.md "Out of space")
            res["full_unlost"] = True
    with simctl.debug_port(run, dev) as t:
        timeouts = simctl.bus_errors(t, run)   # a bus access no slave answered: never, in a healthy SoC
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


def no_space_episode(res: dict, stored: int, capacity: int | None) -> None:
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
