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
the boot after the one before (:func:`.draw.draw_boot_cuts`): the firmware is cut
again and again while it recovers, then recovers for good and is judged.

Most cuts are armed when the workload starts, counted from that moment,
through the SoC's NAND model control port (``simctl.NandControl``): the
k-th program from now, or an instant from now.  A quarter of them (three
quarters for ``kind:gc``) land in the boot instead -- the recovery of the
base and GC at boot: those are NAND model settings counted from power-on,
drawn within what a clean boot of the base does (:func:`.base.calibrate`).

Then it restarts on the same images, lets the firmware recover, reads the
workload's LBAs back and judges them (``workload.verify``): every acknowledged
write, commit and remap present; every group, transaction and remap
all-or-nothing; nothing else changed; and the device must take new work.
``--faults`` adds the NAND model's bit errors, a program and an erase failure
and MLC paired-page damage (``--faults bits,program,erase``: a subset; see
:data:`.draw.FAULTS`; ``--faults mix``: each trial draws its own, see
:data:`.draw.FAULT_MIX_WEIGHTS`).

Outcomes: ``pass``; ``violation`` (the oracle's list); ``mismatch`` (the device
answered a command differently from the model before the cut); ``no-cut``
(the workload ended first: power is then cut by killing the simulator, still
judged); ``boot-failure``; ``error``.  Every failing trial keeps its directory
(images before and after, console log, ``trial.json``) and prints its replay
command; results append to ``<dir>/results.jsonl`` (and to ``--ledger``, a committed copy), so a campaign resumes
where it stopped.  ``--report`` writes the counts per site and outcome.

    python -m sim.campaign --count 20 --jobs 2                # a campaign
    python -m sim.campaign --exhaustive                       # every program/erase of a fixed workload
    python -m sim.campaign --replay build/campaign/t0007/trial.json

The parts: :mod:`.config` (the device, the presets), :mod:`.draw` (the trials), :mod:`.base` (the
build, the base image, its calibration), :mod:`.run` (chains of trials), :mod:`.judge` (the
verdict), :mod:`.ledger` (results, the ledger, its resolved notes), :mod:`.report`, :mod:`.cli`.
"""
