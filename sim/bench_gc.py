"""``make bench-gc``: GC write amplification at scale, the firmware's own victim policies (firmware/policy.c)
built for the host (sim/gcsim) on a device of 1,024 blocks, and a cross-check against the full SoC on a
small one.  Writes docs/results/gc_bench.md, gc_bench.json and gc_bench.png.

1. **WA vs over-provisioning, uniform random writes**: greedy, cost-benefit and LFS's cost-benefit, GC's
   copies beside the host's writes (the core's way), rho = (T - U) / U from 0.07 to 1.5, against the
   analytic greedy curve of ``make bench-soc`` (sim/bench_soc.py ``greedy_wa``).
2. **Skewed writes** (80 % of writes to 20 % of the LBAs, 90 % to 10 %): every policy with GC's copies
   beside the host's writes and in open blocks of their own (hot/cold separation).
3. **What bounds greedy against the analytic curve**: the same rho over pages per block and device size.
4. **Cross-check against the SoC** (``--no-soc`` leaves it out): the console's ``io random`` on the full
   SoC (4 x 8 blocks) and the same draws on the host model of that device: greedy at 3/4 of the capacity
   (``--soc-policies greedy,cost-benefit``, ``--soc-fill 0.75,1`` for more; each SoC run takes 5-10 min).

Every run: a fill of every LBA in order, a warm-up of WARM x U random writes, then MEASURE x U measured
(U: the LBAs written); WA = (host pages + GC copies) / host pages over the measured stretch.
Options: ``--quick`` (fewer points), ``--no-soc``, ``--soc-policies``, ``--soc-fill``, ``--render`` (rewrite the report and plot from the JSON).
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from atomflash import spec  # noqa: E402
from sim import gcsim  # noqa: E402
from sim.bench_soc import greedy_wa  # noqa: E402

DOC = ROOT / "docs" / "results" / "gc_bench.md"
G, P = spec.GcPolicy, spec.GcPlacement
DEV = dict(dies=4, blocks_per_die=256, ppb=64)      # 1,024 blocks of 64 pages (the small profile's block)
WARM, MEASURE = 4, 8                                # x U random writes after the fill
RHOS = (0.07, 0.1, 0.15, 0.2, 0.3, 0.42, 0.6, 0.8, 1.0, 1.5)
SKEW_RHOS = (0.1, 0.2, 0.42)
SKEWS = ((800, 200), (900, 100))                    # (per mille of writes, per mille of LBAs) hot
SOC_BPL = 8
SOC_TOLERANCE = 0.10


def progress(msg: str):
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", flush=True)


def pname(p) -> str:
    return p.name.lower().replace("_", "-")


def greedy_wa_many_pages(rho: float) -> float:
    """Greedy's WA under uniform random writes in the limit of many pages per block: a block's valid
    fraction decays as exp(-age / U) with the host's writes, so the victim (the oldest, then also the
    emptiest) holds u_v with (1 - u_v) / -ln(u_v) = U / T = 1 / (1 + rho), and WA = 1 / (1 - u_v) (the FIFO
    cleaner's fixed point, which greedy reaches as the valid counts' spread vanishes)."""
    import math
    target, lo, hi = 1 / (1 + rho), 1e-12, 1 - 1e-12
    for _ in range(200):
        mid = (lo + hi) / 2
        if (1 - mid) / -math.log(mid) < target:
            lo = mid
        else:
            hi = mid
    return 1 / (1 - lo)


def lbas_for(rho: float, pages: int) -> int:
    return round(pages / (1 + rho))


def one(lbas: int, **kw) -> dict:
    dev = {**DEV, **{k: kw.pop(k) for k in list(kw) if k in DEV}}
    r = gcsim.run(lbas=lbas, warm=kw.pop("warm", WARM * lbas), measure=kw.pop("measure", MEASURE * lbas),
                  **dev, **kw)
    assert r.lost == 0 and r.stuck == 0, r
    pages = r.pages
    wins = r.window_wa()
    half = len(wins) // 2
    return dict(lbas=lbas, pages=pages, rho=(pages - lbas) / lbas, wa=r.wa, host=r.host, copies=r.copies,
                victims=r.victims, ckpts=r.ckpts, mixed_blocks=r.mixed_blocks,
                drift=(sum(wins[half:]) / (len(wins) - half)) / (sum(wins[:half]) / half) - 1 if half else 0.0,
                windows=[round(w, 4) for w in wins], **{k: (pname(v) if hasattr(v, "name") else v)
                                                         for k, v in kw.items()})


def uniform(quick: bool) -> list[dict]:
    pages = DEV["dies"] * DEV["blocks_per_die"] * DEV["ppb"]
    out = []
    for rho in (RHOS[::2] if quick else RHOS):
        for pol in G:
            out.append(one(lbas_for(rho, pages), policy=pol, seed=7))
        progress(f"uniform rho {rho}: " + ", ".join(f"{r['policy']} {r['wa']:.2f}" for r in out[-len(G):]))
    return out


def skewed(quick: bool) -> list[dict]:
    pages = DEV["dies"] * DEV["blocks_per_die"] * DEV["ppb"]
    out = []
    for hw, hl in SKEWS:
        for rho in (SKEW_RHOS[1:2] if quick else SKEW_RHOS):
            for place in P:
                for pol in G:
                    out.append(one(lbas_for(rho, pages), policy=pol, placement=place, seed=11, hot_writes=hw,
                                   hot_lbas=hl))
            progress(f"skew {hw // 10}/{hl // 10} rho {rho}: " + ", ".join(
                f"{r['policy']}/{r['placement']} {r['wa']:.2f}" for r in out[-2 * len(G):]))
    return out


def bounds(quick: bool) -> dict:
    """Greedy, uniform, rho 0.42: over pages per block (4,096 blocks) and over device size (64 pages)."""
    rho = 0.42
    ppbs = (16, 64, 256) if quick else (16, 64, 256, 1024)
    by_ppb = [one(lbas_for(rho, 4096 * b), dies=4, blocks_per_die=1024, ppb=b, seed=3) for b in ppbs]
    sizes = (32, 128, 1024) if quick else (32, 128, 1024, 4096)
    by_size = [one(lbas_for(rho, n * 64), dies=4, blocks_per_die=n // 4, ppb=64, seed=3) for n in sizes]
    progress("bounds: ppb " + ", ".join(f"{b} {r['wa']:.2f}" for b, r in zip(ppbs, by_ppb)) +
             "; blocks " + ", ".join(f"{n} {r['wa']:.2f}" for n, r in zip(sizes, by_size)))
    return dict(rho=rho, by_ppb=[dict(ppb=b, **r) for b, r in zip(ppbs, by_ppb)],
                by_size=[dict(blocks=n, **r) for n, r in zip(sizes, by_size)])


# -- the SoC cross-check -------------------------------------------------------------------------

def soc_geometry() -> dict:
    """The host model of the SoC's 4 x 8-block device: the blocks data can use (32 less the anchor's and
    the two checkpoint areas'), spread evenly over the dies."""
    from sim.simboot import TARGETS
    data_blocks = TARGETS * SOC_BPL - spec.ANCHOR.BLOCKS - spec.CKPT.AREAS
    return dict(dies=TARGETS, blocks_per_die=data_blocks // TARGETS, ppb=spec.NAND_PROFILES["small"].pages_per_block,
                data_blocks=data_blocks)


def soc_capacity() -> int:
    from sim.simboot import ftl_capacity
    return ftl_capacity(SOC_BPL)


def soc_host(lbas: int, policy, i: int) -> dict:
    """The SoC run's trace on the host model: no fill, 2U writes from seed 1 + i, then 2U from 100 + i."""
    geo = soc_geometry()
    r = gcsim.run(lbas=lbas, dies=geo["dies"], blocks_per_die=geo["blocks_per_die"], ppb=geo["ppb"],
                  policy=policy, fill=False, warm=2 * lbas, warm_seed=1 + i, seed=100 + i, measure=2 * lbas,
                  ckpt=1024)
    assert r.lost == 0 and r.stuck == 0, r
    return dict(wa=r.wa, copies=r.copies, host=r.host, victims=r.victims)


def soc_run(tmp: Path, lbas: int, policy, i: int) -> dict:
    """bench_soc's GC run with the policy set first: fresh images, ``ckpt every 1024``, 2U writes to warm up,
    2U measured."""
    from sim.bench_soc import Device, gc_copies, writes
    dev = Device(tmp / f"gc_{pname(policy)}_{lbas}", SOC_BPL)
    con, _ = dev.boot()
    Device.cmd(con, f"gc policy {pname(policy)}")
    assert f"gc policy {pname(policy)}" in con.command("gc")
    Device.cmd(con, "ckpt every 1024")
    Device.cmd(con, "ckpt now")
    t0 = time.monotonic()
    writes(con, 1 + i, 2 * lbas, lbas)
    c0 = gc_copies(con)
    measured = writes(con, 100 + i, 2 * lbas, lbas)
    copies = gc_copies(con) - c0
    Device.close(con)
    return dict(wa=(2 * lbas + copies) / (2 * lbas), copies=copies, host=2 * lbas,
                sim_speed=measured["sim_speed"], wall_s=time.monotonic() - t0)


def soc_check(policies, fractions) -> list[dict]:
    from sim.simboot import build
    progress("building the SoC (cached)")
    build()
    cap = soc_capacity()
    out = []
    with tempfile.TemporaryDirectory(dir=ROOT / "build") as tmp:
        # 3/4 of the capacity: WA ~1.5, ~5-9 min of simulation per policy; the whole capacity (WA ~2.7)
        # takes about three times that
        for i, lbas in enumerate(round(cap * f) for f in fractions):
            for pol in policies:
                progress(f"SoC cross-check: {pname(pol)}, {lbas} LBAs (the SoC, then the host model)")
                soc = soc_run(Path(tmp), lbas, pol, i)
                host = soc_host(lbas, pol, i)
                out.append(dict(lbas=lbas, capacity=cap, policy=pname(pol), soc=soc, host=host,
                                diff=host["wa"] / soc["wa"] - 1))
                progress(f"  SoC {soc['wa']:.3f}, host model {host['wa']:.3f}")
    return out


# -- the report ------------------------------------------------------------------------------------

def plot(r: dict, path: Path) -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (a, b) = plt.subplots(1, 2, figsize=(12, 4.8))
    rows = r["uniform"]
    rhos = sorted({p["rho"] for p in rows})
    fine = [min(rhos) + (max(rhos) - min(rhos)) * k / 200 for k in range(201)]
    a.plot(fine, [max(1.0, greedy_wa(x)) for x in fine], "k--", label="analytic greedy (1 + rho) / (2 rho), floor 1")
    a.plot(fine, [greedy_wa_many_pages(x) for x in fine], "k:", label="greedy, many pages per block (FIFO fixed point)")
    for pol, style in zip(G, ("o-", "s-", "^-")):
        pts = sorted((p["rho"], p["wa"]) for p in rows if p["policy"] == pname(pol))
        a.plot(*zip(*pts), style, label=f"{pname(pol)} (1,024 blocks)", markersize=4)
    a.set_xscale("log")
    a.set_xlabel("over-provisioning rho = (T - U) / U")
    a.set_ylabel("write amplification")
    a.set_title("uniform random writes")
    a.grid(True, which="both", alpha=0.3)
    a.legend(fontsize=8)
    sk = [p for p in r["skewed"] if abs(p["rho"] - 0.2) < 0.01] or r["skewed"]
    labels = [f"{hw // 10}/{hl // 10}" for hw, hl in SKEWS]
    combos = [(pl, pol) for pl in P for pol in G]
    width = 0.8 / len(combos)
    for k, (pl, pol) in enumerate(combos):
        vals = []
        for hw, hl in SKEWS:
            m = [p["wa"] for p in sk if p["hot_writes"] == hw and p["policy"] == pname(pol)
                 and p["placement"] == pname(pl)]
            vals.append(m[0] if m else 0)
        b.bar([i + (k - len(combos) / 2 + 0.5) * width for i in range(len(SKEWS))], vals, width,
              label=f"{pname(pol)}, copies {'apart (hot/cold)' if pl == P.SEPARATE else 'with host writes'}",
              hatch="//" if pl == P.SEPARATE else None)
    b.set_xticks(range(len(SKEWS)), [f"{l} hot/cold, rho {sk[0]['rho']:.2f}" for l in labels])
    b.set_ylabel("write amplification")
    b.set_title("skewed writes (1,024 blocks)")
    b.grid(True, axis="y", alpha=0.3)
    b.set_ylim(0, 1.4 * max(p["wa"] for p in sk))
    b.legend(fontsize=7, ncol=2, loc="upper left")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def render(r: dict) -> str:
    dev = r["device"]
    lines = ["# GC write amplification at scale (`make bench-gc`)", "",
             f"The firmware's victim policies (`firmware/policy.c`, what `firmware/gc.c` runs on the SoC) built for "
             f"the host with `sim/gcsim`, a stand-in for the core's page writes, valid counts and relocation "
             f"(docs/firmware.md, *GC policies*), on {dev['dies']} dies x {dev['blocks_per_die']} blocks = "
             f"{dev['dies'] * dev['blocks_per_die']:,} blocks of {dev['ppb']} pages (T = {dev['pages']:,} pages).  "
             "Generated by `sim/bench_gc.py`; raw figures in `docs/results/gc_bench.json`, plot "
             "`docs/results/gc_bench.png`.", "",
             f"Every run: a fill of every LBA in order, {r['warm']} x U random writes to warm up, then "
             f"{r['measure']} x U measured (U = the LBAs written); WA = (host pages + GC copies) / host pages "
             "over the measured stretch (records and checkpoints left out, as the SoC's `gc` copies count).  "
             "rho = (T - U) / U.  Steady state: the measured stretch's second half differs from its first by "
             f"at most {100 * r['max_drift']:.1f} % in every run (`drift` in the JSON; the WA of each tenth "
             "in `windows`).", ""]
    if r.get("mode") == "quick":
        lines += ["**This run: `--quick`** (fewer points).", ""]
    lines += ["![WA vs over-provisioning and on skewed writes](gc_bench.png)", "",
              "## WA vs over-provisioning, uniform random writes", "",
              "GC's copies beside the host's writes (the core's one open block per die).  Analytic: "
              "`sim/bench_soc.py` `greedy_wa` = (1 + rho) / (2 rho), as `make bench-soc` compares with.", "",
              "| rho | U (LBAs) | greedy | cost-benefit | cost-benefit-lfs | analytic greedy (1+rho)/(2 rho) | greedy / analytic | many pages per block |",
              "| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"]
    rows = r["uniform"]
    for rho in sorted({p["rho"] for p in rows}):
        at = {p["policy"]: p for p in rows if p["rho"] == rho}
        gw = greedy_wa(rho)
        lines.append(f"| {rho:.2f} | {at['greedy']['lbas']:,} | " +
                     " | ".join(f"{at[pname(p)]['wa']:.2f}" for p in G) +
                     f" | {gw:.2f} | {at['greedy']['wa'] / gw:.2f} | {greedy_wa_many_pages(rho):.2f} |")
    lines += ["", r["notes"]["uniform"], ""]
    lines += ["## Skewed writes: hot/cold separation", "",
              "x/y: x % of the writes go to y % of the LBAs (the first ones), uniformly within each set.  "
              "*with host*: GC's copies go to the open block the host's writes go to (the SoC's core); "
              "*apart*: to open blocks of their own, one per die (hot/cold separation: a page GC moves has "
              "outlived the pages written beside it, so it is likely cold).", "",
              "| skew | rho | " + " | ".join(f"{pname(pol)}, with host" for pol in G) + " | " +
              " | ".join(f"{pname(pol)}, apart" for pol in G) + " |",
              "| --- | ---: |" + " ---: |" * (2 * len(G))]
    for hw, hl in SKEWS:
        for rho in sorted({p["rho"] for p in r["skewed"] if p["hot_writes"] == hw}):
            at = {(p["policy"], p["placement"]): p["wa"] for p in r["skewed"]
                  if p["hot_writes"] == hw and p["rho"] == rho}
            lines.append(f"| {hw // 10}/{hl // 10} | {rho:.2f} | " + " | ".join(
                f"{at[(pname(pol), pname(pl))]:.2f}" for pl in P for pol in G) + " |")
    lines += ["", r["notes"]["skewed"], ""]
    b = r["bounds"]
    lines += ["## What bounds greedy against the analytic curve", "",
              f"Greedy, uniform random writes, rho {b['rho']}: analytic (1 + rho) / (2 rho) {greedy_wa(b['rho']):.2f}, "
              f"many pages per block {greedy_wa_many_pages(b['rho']):.2f}.", "",
              "| pages per block (4,096 blocks) | WA |", "| ---: | ---: |"]
    lines += [f"| {p['ppb']} | {p['wa']:.2f} |" for p in b["by_ppb"]]
    lines += ["", "| blocks (64 pages each) | WA |", "| ---: | ---: |"]
    lines += [f"| {p['blocks']:,} | {p['wa']:.2f} |" for p in b["by_size"]]
    lines += ["", r["notes"]["bounds"], ""]
    if r.get("soc"):
        geo = r["soc_geometry"]
        lines += ["## Cross-check against the full SoC", "",
                  f"The SoC of `make bench-soc` (4 x {SOC_BPL} blocks, the firmware on VexRiscv, the core in "
                  f"Verilator), `gc policy <p>`, `ckpt every 1024`, then the console's `io random`: 2U writes "
                  "to warm up (seed 1 + i), 2U measured (seed 100 + i), no fill.  The host model of that device: "
                  f"{geo['data_blocks']} blocks data can use (32 less the anchor's {spec.ANCHOR.BLOCKS} and the "
                  f"{spec.CKPT.AREAS} checkpoint areas) as {geo['dies']} dies x {geo['blocks_per_die']}, the same "
                  "draws (xorshift32, as `io random`), checkpoints every 1,024 pages.", "",
                  f"This run: {', '.join(sorted({p['policy'] for p in r['soc']}))} at "
                  f"{', '.join(str(u) for u in sorted({p['lbas'] for p in r['soc']}))} LBAs of the SoC's "
                  f"{soc_capacity()}; the SoC's simulation took "
                  f"{r.get('soc_wall_s', 0) / 60:.0f} min (`--soc-policies`, `--soc-fill` choose more).", "",
                  "| U (LBAs) | policy | SoC WA | host model WA | host / SoC - 1 |",
                  "| ---: | --- | ---: | ---: | ---: |"]
        for p in r["soc"]:
            lines.append(f"| {p['lbas']} | {p['policy']} | {p['soc']['wa']:.3f} | {p['host']['wa']:.3f} | "
                         f"{100 * p['diff']:+.1f} % |")
        lines += ["", r["notes"]["soc"], ""]
    else:
        lines += ["## Cross-check against the full SoC", "", "Not run (`--no-soc`).", ""]
    return "\n".join(lines)


def notes(r: dict) -> dict:
    u = r["uniform"]
    by = lambda pol, rho: next(p["wa"] for p in u if p["policy"] == pol and p["rho"] == rho)  # noqa: E731
    rhos = sorted({p["rho"] for p in u})
    worse = [by("cost-benefit", x) / by("greedy", x) - 1 for x in rhos]
    ratio = {x: by("greedy", x) / greedy_wa(x) for x in rhos if x <= 1}
    many = {x: by("greedy", x) / greedy_wa_many_pages(x) for x in rhos}
    lo_r, hi_r = min(ratio, key=ratio.get), max(ratio, key=ratio.get)
    top = max(rhos)
    sk = r["skewed"]

    def s(hw, rho, pol, pl):
        return next(p["wa"] for p in sk if p["hot_writes"] == hw and p["rho"] == rho and p["policy"] == pol
                    and p["placement"] == pl)
    rows = []
    for hw, _ in SKEWS:
        for rho in sorted({p["rho"] for p in sk if p["hot_writes"] == hw}):
            rows.append((hw, rho, s(hw, rho, "greedy", "shared"), s(hw, rho, "greedy", "separate"),
                         s(hw, rho, "cost-benefit", "separate"), s(hw, rho, "cost-benefit", "shared")))
    sep_gain = [sep / g - 1 for _, _, g, sep, _, _ in rows]
    hc_gain = [hc / g - 1 for _, _, g, _, hc, _ in rows]
    cb_gain = [cb / g - 1 for _, _, g, _, _, cb in rows]
    best = min(rows, key=lambda t: t[4] / t[2])
    b = r["bounds"]
    ppb = b["by_ppb"]
    size = b["by_size"]
    out = dict(
        uniform=(f"Greedy against the analytic curve: {100 * (ratio[lo_r] - 1):+.0f} % (rho {lo_r:.2f}) to "
                 f"{100 * (ratio[hi_r] - 1):+.0f} % (rho {hi_r:.2f}) for rho <= 1; past rho = 1 the curve falls "
                 f"below 1, the floor of any WA (measured {by('greedy', top):.2f} at rho {top:.2f}).  The curve "
                 "assumes the blocks' valid fractions spread evenly between the victim's and 1.  Under uniform "
                 "random writes a block's valid fraction decays exponentially with its age instead; with many "
                 "pages per block greedy's victim is then the oldest block and WA is the FIFO cleaner's fixed "
                 "point (the *many pages per block* column), which greedy at 64 pages per block follows within "
                 f"{100 * (min(many.values()) - 1):+.0f} % to {100 * (max(many.values()) - 1):+.0f} %: the curve "
                 "of `make bench-soc` is low by the gap between the two, largest at high rho.  Below it at low "
                 "rho, 64 pages per block scatter the valid counts (a binomial spread) and greedy takes the "
                 "emptiest outliers.  Cost-benefit is no better under uniform writes, as expected (no block's "
                 f"data is colder than another's; age only steers it off the emptiest block): "
                 f"{100 * min(worse):+.1f} % to {100 * max(worse):+.1f} % against greedy, the LFS form alike."),
        skewed=("Skew hurts greedy: at the same rho it copies more than under uniform writes (the cold blocks "
                "hold pages that stay valid, their few dead pages never make them the emptiest, and the hot "
                "blocks greedy takes still hold cold pages, copied again and again).  The hot/cold separation "
                "policy -- GC's copies in open blocks of their own, cost-benefit victims -- beats greedy in "
                f"every skewed run: {100 * max(hc_gain):+.0f} % to {100 * min(hc_gain):+.0f} %, best "
                f"{best[2]:.2f} -> {best[4]:.2f} at {best[0] // 10}/{100 - best[0] // 10}, rho {best[1]:.2f}; "
                "the LFS form does the same within a few per cent.  Each half alone does less: separation with "
                f"greedy victims {100 * min(sep_gain):+.1f} % to {100 * max(sep_gain):+.1f} % (greedy rarely "
                "chooses the copies' cold blocks, so keeping them apart saves little), cost-benefit with the "
                f"copies among the host's writes {100 * min(cb_gain):+.1f} % to {100 * max(cb_gain):+.1f} % "
                "(the cold pages it moves land in hot blocks and are moved again).  The SoC's core has one "
                "open block per die for the host's writes and the relocator's copies (rtl/ftl/allocator.py), "
                "so on the SoC only the *with host* columns apply today: separation needs a second allocation "
                "stream in the core for GC_COPY pages; the firmware's side (the victim policy) is there."),
        bounds=(f"Pages per block, not the number of blocks, hold greedy off the analytic curve: from "
                f"{ppb[0]['ppb']} to {ppb[-1]['ppb']} pages per block WA goes {ppb[0]['wa']:.2f} -> "
                f"{ppb[-1]['wa']:.2f}, toward the many-pages limit {greedy_wa_many_pages(b['rho']):.2f} (fewer pages "
                "scatter the valid counts more, and greedy profits from the spread); the analytic "
                f"{greedy_wa(b['rho']):.2f} is below every one of them from 64 pages on.  Small devices lose to "
                f"the blocks GC cannot choose: {size[0]['blocks']} blocks {size[0]['wa']:.2f} (the open block "
                f"per die and the {DEV['dies']} erased blocks GC keeps are a quarter of the device), "
                f"{size[-2]['blocks']:,} blocks {size[-2]['wa']:.2f}, {size[-1]['blocks']:,} blocks "
                f"{size[-1]['wa']:.2f}: at 1,024 blocks the device's size no longer matters."),
    )
    if r.get("soc"):
        d = [abs(p["diff"]) for p in r["soc"]]
        verdict = (f"The host model and the SoC agree within {100 * max(d):.1f} %, inside the 10 % tolerance."
                   if max(d) <= SOC_TOLERANCE else
                   f"The host model and the SoC differ by up to {100 * max(d):.1f} %, outside the 10 % tolerance.")
        spread = []
        for p in r["soc"]:
            pol = G[p["policy"].upper().replace("-", "_")]
            w = [soc_host(p["lbas"], pol, i)["wa"] for i in range(12)]
            spread.append(f"{p['policy']} at {p['lbas']} LBAs {min(w):.2f}-{max(w):.2f}")
        out["soc"] = (f"{verdict}  Over a few thousand writes on {r['soc_geometry']['data_blocks']} blocks the "
                      "draw alone moves WA by a few per cent: the host model's WA over 12 pairs of seeds "
                      f"(1 + i, 100 + i) spans {'; '.join(spread)}.  What the host model leaves out: the SoC's GC runs between `io random`'s batches of up to 4 writes "
                      "and may run in the background; a victim must also fit the pages left beside the block "
                      "kept for the commands in the core; the SoC's data blocks are not spread evenly over the "
                      "dies (the anchor's and the checkpoint areas' sit where they were allocated), and static "
                      "wear levelling's moves are counted with GC's copies in the SoC's `gc` counter.")
    return out


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--quick", action="store_true", help="fewer points")
    p.add_argument("--no-soc", action="store_true", help="leave out the cross-check on the full SoC")
    p.add_argument("--soc-policies", default="greedy",
                   help="the SoC cross-check's policies, comma-separated (default greedy, the SoC's default)")
    p.add_argument("--soc-fill", default="0.75",
                   help="the SoC cross-check's LBAs, as fractions of the SoC's capacity, comma-separated")
    p.add_argument("--render", action="store_true", help="only rewrite the report and plot from the JSON")
    args = p.parse_args(argv)
    if args.render:
        r = json.loads(DOC.with_suffix(".json").read_text())
        r["notes"] = notes(r)
    else:
        t0 = time.monotonic()
        progress("building the host model of the firmware's GC (sim/gcsim)")
        gcsim.build()
        r = dict(mode="quick" if args.quick else "full", warm=WARM, measure=MEASURE,
                 device=dict(**DEV, pages=DEV["dies"] * DEV["blocks_per_die"] * DEV["ppb"]))
        r["uniform"] = uniform(args.quick)
        r["skewed"] = skewed(args.quick)
        r["bounds"] = bounds(args.quick)
        r["host_wall_s"] = round(time.monotonic() - t0, 1)
        if not args.no_soc:
            r["soc_geometry"] = soc_geometry()
            r["soc"] = soc_check([G[n.strip().upper().replace("-", "_")] for n in args.soc_policies.split(",")],
                                 [float(f) for f in args.soc_fill.split(",")])
            r["soc_wall_s"] = round(sum(p["soc"]["wall_s"] for p in r["soc"]), 1)
        runs = r["uniform"] + r["skewed"] + r["bounds"]["by_ppb"] + r["bounds"]["by_size"]
        r["max_drift"] = max(abs(x["drift"]) for x in runs)
        r["notes"] = notes(r)
        DOC.with_suffix(".json").write_text(json.dumps(r, indent=1))
    plot(r, DOC.with_suffix(".png"))
    DOC.write_text(render(r))
    print(DOC.read_text())
    return 0


if __name__ == "__main__":
    sys.exit(main())
