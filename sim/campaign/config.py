"""The device the campaign runs on and its fixed settings: the geometry (blocks per LUN is
an option: :func:`set_geometry` in every process), the workload's span, what every boot sets up, the
``--quick`` and ``--smoke`` presets."""

from __future__ import annotations

from pathlib import Path

from atomflash import spec

ROOT = Path(__file__).resolve().parents[2]
TARGETS = 4                 # the default build: 2 channels x 2 ways
WAYS = 2
PROFILE = spec.NAND_PROFILES["small"]
BLOCKS_PER_LUN = 4          # a small device: GC and checkpoints come quickly (--blocks-per-lun)


NVME = False                # the host drives the device over NVMe (--port nvme), not the debug port
CACHE_PAGES = spec.LIMITS.CACHE_PAGES   # the core's volatile write cache (--cache-pages; 0: none)


def set_geometry(blocks_per_lun: int, nvme: bool = False, cache_pages: int = spec.LIMITS.CACHE_PAGES) -> None:
    """The campaign's blocks per LUN, the host's port and the write cache, in this process (the trial
    workers' initializer too).  Read them as ``config.BLOCKS_PER_LUN``, ``config.NVME`` and
    ``config.CACHE_PAGES``, never copies imported before this ran."""
    global BLOCKS_PER_LUN, NVME, CACHE_PAGES
    BLOCKS_PER_LUN, NVME, CACHE_PAGES = blocks_per_lun, nvme, cache_pages


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
CALIBRATE_CUT_NS = 80_000_000  # simulated: boot (~30 ms), the setup and GC at boot (~15 ms) are over
MLC_KEYS = {"mlc_paired": 1}   # an MLC device: every boot of its images, the base's too


def loses_blocks(faults: str | None) -> bool:
    """``faults`` (a trial's) inject program or erase failures: the only way a block goes bad (grown bad,
    retired)."""
    return bool({"program", "erase"} & set((faults or "").split(",")))
