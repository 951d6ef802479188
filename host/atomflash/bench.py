"""``atomflash bench``: a configurable workload against a device, figures in
*simulated* time (the device's own cycle counter from GET_LOG), so they say
what the hardware would do at its nominal clock, not how fast the host or
the simulator is.

Each command is a read or a write of ``block_count`` blocks (``read_pct``
decides), at a uniform or Zipf-skewed LBA (``zipf``) in ``span`` LBAs, or
sequential; writes may be atomic groups of ``atomic`` blocks or transactions
of ``tx`` blocks (their writes in flight together, then the commit).  Up to
``qd`` commands are in flight.

Figures: commands and pages per simulated second, flash pages the device
programmed per host page written (write amplification: log pages, checkpoint
pages), and the modelled NAND's program limit (dies / tPROG) for scale.
"""

from __future__ import annotations

import bisect
import itertools
import random
import time
from dataclasses import asdict, dataclass

from . import spec

__all__ = ["BenchConfig", "run_bench"]


@dataclass
class BenchConfig:
    pattern: str = "rand"     # rand | seq
    read_pct: int = 0
    qd: int = 4
    ops: int = 100
    duration: float = 0.0     # wall seconds, 0 = until ops
    block_count: int = 1
    atomic: int = 0
    tx: int = 0
    zipf: float = 0.0
    span: int = 0
    seed: int = 1

    def check(self, dev) -> None:
        if self.atomic and self.tx:
            raise ValueError("--atomic and --tx exclude each other")
        if not 0 <= self.read_pct <= 100:
            raise ValueError("--read-pct is a percentage (0..100)")
        if self.atomic > dev.info.max_atomic_pages:
            raise ValueError(f"--atomic {self.atomic}: the device's groups hold at most {dev.info.max_atomic_pages}")
        if self.block_count > dev.info.max_transfer:
            raise ValueError(f"--count {self.block_count}: the device transfers at most {dev.info.max_transfer}")
        if self.span and self.span > dev.capacity:
            raise ValueError(f"--span {self.span}: the device has {dev.capacity} LBAs")


class _Lbas:
    def __init__(self, cfg: BenchConfig, capacity: int, width: int):
        self.rnd = random.Random(cfg.seed)
        self.span = max(min(cfg.span or capacity, capacity) - width + 1, 1)
        self.seq = itertools.count()
        self.pattern = cfg.pattern
        self.cum = None
        if cfg.zipf > 0:
            w = [1.0 / (k + 1) ** cfg.zipf for k in range(self.span)]
            self.cum = list(itertools.accumulate(w))
            self.perm = list(range(self.span))
            self.rnd.shuffle(self.perm)  # hot LBAs spread over the span

    def next(self) -> int:
        if self.pattern == "seq":
            return next(self.seq) % self.span
        if self.cum:
            k = bisect.bisect_left(self.cum, self.rnd.random() * self.cum[-1])
            return self.perm[min(k, self.span - 1)]
        return self.rnd.randrange(self.span)


def _nand_limit(info) -> float | None:
    for p in spec.NAND_PROFILES.values():
        if (p.page_data, p.pages_per_block) == (info.page_data, info.pages_per_block):
            return info.channels * info.ways * info.luns / (p.t_prog_ns * 1e-9)
    return None


def run_bench(dev, cfg: BenchConfig, *, progress: bool = False) -> dict:
    cfg.check(dev)
    n = dev.lba_size
    width = max(cfg.block_count, cfg.atomic, cfg.tx, 1)
    lbas = _Lbas(cfg, dev.capacity, width)
    rnd = random.Random(cfg.seed ^ 0x5EED)
    before = dev.stats(fresh=True)
    t_wall = time.monotonic()
    done = {"reads": 0, "writes": 0, "atomic": 0, "tx": 0, "pages_read": 0, "pages_written": 0}
    bar = None
    if progress:
        from tqdm import tqdm

        bar = tqdm(total=cfg.ops, unit="cmd", desc="bench", leave=False)

    stamp = itertools.count(1)

    def block():
        return next(stamp).to_bytes(8, "little") * (n // 8)

    issued = 0
    while issued < cfg.ops and not (cfg.duration and time.monotonic() - t_wall > cfg.duration):
        while dev.in_flight >= cfg.qd:
            for c in dev.poll(block=True):
                c.check()
        lba = lbas.next()
        if rnd.randrange(100) < cfg.read_pct:
            dev.submit_read(lba, cfg.block_count)
            done["reads"] += 1
            done["pages_read"] += cfg.block_count
        elif cfg.atomic:
            members = sorted(set(lbas.next() for _ in range(cfg.atomic * 2)))[:cfg.atomic]
            while len(members) < cfg.atomic:
                members = sorted(set(members) | {lbas.next()})[:cfg.atomic]
            dev.submit_atomic_write([(m, block()) for m in members])
            done["atomic"] += 1
            done["pages_written"] += cfg.atomic
        elif cfg.tx:
            tid = dev.new_tid()
            cmds = [dev.submit_tx_write(tid, lba + i, block()) for i in range(cfg.tx)]
            for c in cmds:
                dev.wait(c)
            dev.submit_tx_commit(tid)
            done["tx"] += 1
            done["pages_written"] += cfg.tx
        else:
            dev.submit_write(lba, block() * cfg.block_count)
            done["writes"] += 1
            done["pages_written"] += cfg.block_count
        issued += 1
        if bar is not None:
            bar.update(1)
    for c in dev.poll(block=False):
        c.check()
    dev.wait_all()
    if bar is not None:
        bar.close()
    dev.flush()
    after = dev.stats(fresh=True)   # counts every command above
    hz = after["clk_hz"] or 1
    sim_s = (after["uptime_cycles"] - before["uptime_cycles"]) / hz
    flash = (after["log_pages"] - before["log_pages"]) + (after["ckpt_pages"] - before["ckpt_pages"])
    limit = _nand_limit(dev.info)
    res = {
        "commands": issued,
        "simulated_ms": round(sim_s * 1000, 3),
        "wall_s": round(time.monotonic() - t_wall, 1),
        "commands_per_s": round(issued / sim_s, 1) if sim_s else 0.0,
        "pages_written": done["pages_written"],
        "pages_read": done["pages_read"],
        "write_pages_per_s": round(done["pages_written"] / sim_s, 1) if sim_s else 0.0,
        "read_pages_per_s": round(done["pages_read"] / sim_s, 1) if sim_s else 0.0,
        "flash_pages_programmed": flash,
        "write_amplification": round(flash / done["pages_written"], 3) if done["pages_written"] else 0.0,
        "gc_copies": after["gc_copies"] - before["gc_copies"],
        "erases": after["erases"] - before["erases"],
        "nand_program_limit_pages_per_s": round(limit, 1) if limit else "n/a",
    }
    return {"config": ", ".join(f"{k}={v}" for k, v in asdict(cfg).items()), "results": res,
            "clk_hz": hz, "counts": done}
