"""The firmware's GC policies on the host at any device size (sim/gcsim/gcsim.c).

``build()`` compiles firmware/policy.c -- the victim choice firmware/gc.c makes and the least-worn pick of
firmware/ftl.c's pool -- with gcsim.c, a host stand-in for what the RTL core does around them (page
allocation per die, valid counts, the map, the relocator's copies), into build/gcsim/ with
``sim.harness.runner.host_build`` (cached by a hash of the sources, headers, flags and compiler).  ``run()``
drives one workload and returns its counters; ``pick()`` asks the policy for a victim among given blocks.
Used by ``make bench-gc`` (sim/bench_gc.py) and tb/firmware_gc.
"""

from __future__ import annotations

import subprocess
from dataclasses import dataclass, field
from pathlib import Path

from atomflash import spec
from sim.harness import runner

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
FW = ROOT / "firmware"
CFLAGS = ["-std=c11", "-O2", "-Wall", "-Wextra", "-Werror", "-Wconversion", "-Wno-sign-conversion"]


def build() -> Path:
    """The gcsim executable (cached by content hash; safe under pytest-xdist)."""
    return runner.host_build("gcsim", [FW / "policy.c", HERE / "gcsim.c"], build_dir="gcsim", cflags=CFLAGS,
                             includes=[FW])


@dataclass
class Result:
    host: int            # host pages written in the measured stretch
    copies: int          # GC's copies in it
    victims: int
    victim_valid: int    # valid pages the victims held (= copies)
    ckpts: int
    mixed_blocks: int    # blocks holding both host pages and GC copies at the end
    lost: int            # LBAs whose newest version the map does not reach, plus blocks whose count is wrong
    stuck: int
    pages: int           # the device's pages
    erases_min: int
    erases_max: int
    windows: list[tuple[int, int]] = field(default_factory=list)   # (host, copies) per tenth of the stretch

    @property
    def wa(self) -> float:
        return (self.host + self.copies) / self.host

    def window_wa(self) -> list[float]:
        return [(h + c) / h for h, c in self.windows if h]


def run(*, lbas: int, dies: int = 4, blocks_per_die: int = 256, ppb: int = 64,
        policy: spec.GcPolicy = spec.GcPolicy.GREEDY, placement: spec.GcPlacement = spec.GcPlacement.SHARED,
        seed: int = 1, warm: int = 0, measure: int = 0, fill: bool = True, hot_writes: int = 0,
        hot_lbas: int = 200, low: int | None = None, reserve: int | None = None, ckpt: int = 0,
        warm_seed: int = 0, trace: list[int] | None = None, windows: int = 10) -> Result:
    """One workload: a fill of every LBA in order (``fill``), ``warm`` writes, then ``measure`` writes whose
    counters are returned (or the LBAs of ``trace``).  Writes draw LBAs as the console's ``io random``
    does (xorshift32 from ``seed``, mod ``lbas``), or with ``hot_writes`` per mille of them to the first
    ``hot_lbas`` per mille of the LBAs."""
    args = dict(lbas=lbas, dies=dies, blocks_per_die=blocks_per_die, ppb=ppb, policy=int(policy),
                placement=int(placement), seed=seed, warm=warm, measure=measure, fill=int(fill),
                hot_writes=hot_writes, hot_lbas=hot_lbas, ckpt=ckpt, warm_seed=warm_seed,
                stdin=int(trace is not None), windows=windows)
    if low is not None:
        args["low"] = low
    if reserve is not None:
        args["reserve"] = reserve
    stdin = "\n".join(map(str, trace)) + "\n" if trace is not None else ""
    proc = subprocess.run([str(build()), "run", *(f"{k}={v}" for k, v in args.items())], input=stdin,
                          capture_output=True, text=True, check=True)
    wins, out = [], {}
    for line in proc.stdout.splitlines():
        word, *rest = line.split()
        kv = {k: int(v) for k, v in (x.split("=") for x in rest)}
        if word == "window":
            wins.append((kv["host"], kv["copies"]))
        else:
            out = {k: int(v) for k, v in (x.split("=") for x in line.split())}
    assert out and out["rc"] == 0, proc.stdout + proc.stderr
    return Result(out["host"], out["copies"], out["victims"], out["victim_valid"], out["ckpts"],
                  out["mixed_blocks"], out["lost"], out["stuck"], out["pages"], out["erases_min"],
                  out["erases_max"], wins)


def pick(policy: spec.GcPolicy, ppb: int, now: int, blocks: list[tuple[int, int, int]]) -> tuple[int | None, dict[int, int]]:
    """The victim firmware/policy.c chooses among ``blocks`` = [(block, valid pages, close_seq)] (None: no
    victim), and each candidate's score."""
    stdin = f"{int(policy)} {ppb} {now}\n" + "".join(f"{g} {v} {c}\n" for g, v, c in blocks)
    proc = subprocess.run([str(build()), "pick"], input=stdin, capture_output=True, text=True, check=True)
    scores, victim = {}, None
    for line in proc.stdout.splitlines():
        word, *rest = line.split()
        if word == "score":
            scores[int(rest[0])] = int(rest[1])
        elif word == "victim":
            victim = None if int(rest[0]) < 0 else int(rest[0])
    return victim, scores


def named(name: str) -> tuple[int, str]:
    """firmware/policy.c's af_policy_named(name) and the name af_policy_name gives it back."""
    out = subprocess.run([str(build()), "named", name], capture_output=True, text=True, check=True).stdout.split()
    return int(out[0]), out[1]
