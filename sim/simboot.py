"""Build the simulated SoC once (cached in build/soc/sim) and boot it with
given NAND model configurations, for the tb/soc system tests and
``sim/bench_soc.py``."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from soc.console import SimConsole  # noqa: E402
from atomflash.nandsim import model_configs, write_configs  # noqa: E402
from soc.sim import DEFAULT_CHANNELS, DEFAULT_WAYS  # noqa: E402

# AF_SOC_BUILD_DIR: another build directory (an engineer testing firmware changes beside a shared checkout)
BUILD_DIR = Path(os.environ.get("AF_SOC_BUILD_DIR", ROOT / "build" / "soc" / "sim"))
GATEWARE = BUILD_DIR / "gateware"
CLK_HZ = 100_000_000  # the default build's --sys-clk-freq (spec.NAND_CLK_HZ)
TARGETS = DEFAULT_CHANNELS * DEFAULT_WAYS

__all__ = ["build", "boot", "check_runs", "ftl_capacity", "ftl_pending_budget", "model_configs", "write_configs", "GATEWARE", "CLK_HZ", "TARGETS",
           "DEFAULT_CHANNELS", "DEFAULT_WAYS"]


def build() -> float:
    """``soc/sim.py --build-only`` (a no-op when nothing changed); returns seconds taken."""
    t0 = time.monotonic()
    r = subprocess.run([sys.executable, str(ROOT / "soc" / "sim.py"), "--build-only", "-q",
                        *(["--build-dir", str(BUILD_DIR)] if "AF_SOC_BUILD_DIR" in os.environ else [])],
                       cwd=ROOT, capture_output=True, text=True)
    assert r.returncode == 0, f"SoC build failed:\n{r.stdout[-3000:]}\n{r.stderr[-3000:]}"
    return time.monotonic() - t0


def boot(run_dir: Path, cfgs, *, log: Path, timeout: float = 300) -> SimConsole:
    """Start Vsim with one model config per target and wait for the console
    prompt; ``con.boot_text`` is everything before it, ``con.boot_wall`` the
    seconds it took."""
    plusargs = write_configs(run_dir, cfgs)
    con = SimConsole(GATEWARE, plusargs=plusargs, log=log).start()
    t0 = time.monotonic()
    try:
        con.boot_text = con.wait_prompt(timeout=timeout)
    except BaseException:
        con.stop()
        raise
    con.boot_wall = time.monotonic() - t0
    con.times.append((con.boot_wall, "(boot, to the first prompt)"))
    return con


def ftl_capacity(blocks_per_lun: int, profile: str = "small", dies: int = TARGETS,
                 pages_per_block: int | None = None) -> int:
    """LBAs the firmware exposes (firmware/ftl.c): the dies' blocks less GC's
    reserve, one open block per die, the anchor's blocks and the two
    checkpoint areas, less the over-provisioning (one block at least)."""
    from atomflash import spec

    return _geometry(blocks_per_lun, profile, dies, pages_per_block)[0]


def ftl_pending_budget(blocks_per_lun: int, profile: str = "small", dies: int = TARGETS,
                       pages_per_block: int | None = None) -> int:
    """IDENTIFY.max_pending as the firmware sets it (firmware/ftl.c): half the over-provisioning's pages,
    at most the core's table."""
    from atomflash import spec

    cap, usable = _geometry(blocks_per_lun, profile, dies, pages_per_block)
    return min(max(usable - cap, 0) // 2, spec.LIMITS.MAX_PENDING)


def _geometry(blocks_per_lun, profile, dies, pages_per_block) -> tuple[int, int]:
    """(capacity, pages of the blocks the capacity is carved from) as firmware/ftl.c computes them."""
    from atomflash import spec

    p = spec.NAND_PROFILES[profile]
    ppb = pages_per_block or p.pages_per_block
    lim = spec.LIMITS
    pend_pages = -(-(lim.MAX_OPEN_TX + lim.MAX_APPENDS + lim.MAX_PENDING) // (p.page_data // spec.CKPT_PEND.size))
    held, narea, cap, blocks = lim.GC_RESERVE_BLOCKS + dies + spec.ANCHOR.BLOCKS, 1, 0, 0
    for _ in range(3):
        blocks = max(dies * blocks_per_lun - held - spec.CKPT.AREAS * narea, 0)
        cap = blocks * ppb * (100 - lim.OVER_PROVISION_PERCENT) // 100
        cap = min(cap, max(blocks - 1, 0) * ppb)  # at least a block held back: GC's headroom
        map_pages = -(-cap * spec.CKPT_ENTRY.size // p.page_data)
        wear_pages = -(-dies * blocks_per_lun * 4 // p.page_data)
        ckpt_pages = 1 + map_pages + 2 * wear_pages + -(-map_pages * 4 // p.page_data) + pend_pages
        narea = -(-ckpt_pages // ppb)
    return cap, blocks * ppb


def check_runs(expected: dict[int, int], align: int = 8) -> list[tuple[int, int, int]]:
    """``(seed, lba, count)`` for one ``io check`` each, covering ``expected`` (LBA -> seed): runs of
    consecutive LBAs with one seed, cut at multiples of ``align`` (a run never straddles a map page or
    segment, whose LBA counts are multiples of 8), so a test checks a whole write in one command."""
    runs: list[tuple[int, int, int]] = []
    for lba in sorted(expected):
        seed = expected[lba]
        if runs and runs[-1][0] == seed and runs[-1][1] + runs[-1][2] == lba and lba % align:
            runs[-1] = (seed, runs[-1][1], runs[-1][2] + 1)
        else:
            runs.append((seed, lba, 1))
    return runs
