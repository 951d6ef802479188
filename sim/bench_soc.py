"""``make bench-soc``: the full SoC's recovery time, GC write amplification and
simulation speed, in simulated time at the nominal clock.  Writes
docs/results/soc_bench.md (and the raw figures to docs/results/soc_bench.json).

1. **Boot time vs pages written since the checkpoint** (4 targets x 16
   blocks): write a base, ``ckpt now``, write N more one-page writes with
   automatic checkpoints off, power-cycle; the boot report's phases.
2. **Boot time vs device size** (blocks per LUN 8 .. 64, the small
   profile's full size) with a checkpoint and 128 pages since: the design's
   goal is flat in device size (only page 0 of every block and the bad-block
   markers scale).
3. **GC write amplification vs over-provisioning** (4 x 8 blocks, greedy):
   uniform random one-page writes over U LBAs, warm-up then a measured
   stretch; WA = (host pages + GC copies) / host pages, against the
   analytic greedy value (1 + rho) / (2 rho), rho = (T - U) / U, T = the
   pages of the blocks data can use (good blocks less the two checkpoint
   areas).
4. **Simulation speed**: simulated cycles per wall second while the host
   writes (the controller busy) and at boot.

Options: ``--quick`` (fewer points, for a look), ``--only boot|size|gc``.
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
from sim.simboot import CLK_HZ, TARGETS, boot, build, ftl_capacity, model_configs  # noqa: E402

DOC = ROOT / "docs" / "results" / "soc_bench.md"
PROFILE = spec.NAND_PROFILES["small"]
PPB = PROFILE.pages_per_block
SINCE_BPL = 16      # room for 2048 pages after the checkpoint with GC off
TIME_RE = re.compile(r"time: bring-up ([\d.]+) ms, bbt ([\d.]+) ms, page 0 ([\d.]+) ms, checkpoint ([\d.]+) ms, "
                     r"scan ([\d.]+) ms, finish ([\d.]+) ms")
BOOT_RE = re.compile(r"boot: (\d+) cycles")
START_RE = re.compile(r"^ftl: host interface on: .*; started in ([\d.]+) ms$", re.M)


def progress(msg: str):
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", flush=True)


class Device:
    """Fresh images of ``bpl`` blocks per LUN in a temporary run directory."""

    def __init__(self, tmp: Path, bpl: int):
        self.bpl = bpl
        self.run = tmp / f"bpl{bpl}"
        self.cfgs = model_configs(self.run, profile="small", targets=TARGETS, clk_hz=CLK_HZ,
                                  overrides=dict(blocks_per_lun=bpl))

    def boot(self, timeout=900):
        t0 = time.monotonic()
        con = boot(self.run, self.cfgs, log=self.run / "console.log", timeout=timeout)
        wall = time.monotonic() - t0
        text = con.boot_text
        m, b = TIME_RE.search(text), BOOT_RE.search(text)
        assert m and b, text
        phases = dict(zip(("bringup", "bbt", "page0", "checkpoint", "scan", "finish"), map(float, m.groups())))
        started = START_RE.search(text)
        assert started, text
        phases["ftl_start"] = float(started.group(1))
        scanned = re.search(r"recovery: (\d+) of (\d+) good blocks scanned", text)
        p0 = re.search(r"^anchor: [^\n]*: page 0 of (\d+|every) blocks? read", text, re.M)
        assert p0, text
        return con, dict(phases_ms=phases, boot_cycles=int(b.group(1)), wall_s=wall,
                         blocks_scanned=int(scanned.group(1)), blocks=int(scanned.group(2)),
                         page0_blocks=None if p0.group(1) == "every" else int(p0.group(1)))

    @staticmethod
    def cmd(con, line, timeout=3600):
        out = con.command(line, timeout=timeout)
        assert "error" not in out, f"{line}: {out}"
        return out

    @staticmethod
    def close(con):
        con.send("exit\r")
        con.expect("simulation finished", timeout=60)
        con.stop()


def uptime(con) -> int:
    return int(re.search(r"uptime_cycles\s+(\d+)", con.command("stats")).group(1))


def writes(con, seed, n, lbas) -> dict:
    """``io random``: simulated cycles and wall seconds."""
    c0, t0 = uptime(con), time.monotonic()
    out = Device.cmd(con, f"io random {seed} {n} {lbas}")
    wall = time.monotonic() - t0
    cycles = uptime(con) - c0
    return dict(cycles=cycles, wall_s=wall, sim_speed=cycles / wall, out=out)


def gc_copies(con) -> int:
    return int(re.search(r"copies (\d+)", con.command("gc")).group(1))


def boot_vs_since(tmp: Path, points) -> list[dict]:
    out = []
    for n in points:
        progress(f"boot vs pages since the checkpoint: {n}")
        dev = Device(tmp / f"since{n}", SINCE_BPL)
        con, _ = dev.boot()
        Device.cmd(con, "ckpt every 0")
        Device.cmd(con, "gc off")
        writes(con, 1, 256, 256)
        Device.cmd(con, "ckpt now")
        w = writes(con, 2, n, 512) if n else None
        Device.close(con)
        con, r = dev.boot()
        Device.close(con)
        out.append(dict(since=n, **r, write_speed=w and w["sim_speed"]))
    return out


def boot_vs_size(tmp: Path, sizes, since=128) -> list[dict]:
    out = []
    for bpl in sizes:
        progress(f"boot vs device size: {bpl} blocks per LUN")
        dev = Device(tmp / f"size{bpl}", bpl)
        con, first = dev.boot(timeout=1800)
        Device.cmd(con, "ckpt every 0")
        writes(con, 1, 64, 64)
        Device.cmd(con, "ckpt now")
        writes(con, 2, since, 256)
        Device.close(con)
        con, r = dev.boot()
        Device.close(con)
        out.append(dict(blocks_per_lun=bpl, pages=TARGETS * bpl * PPB, since=since, first_boot=first, **r))
    return out


def greedy_wa(rho: float) -> float:
    """The analytic WA of greedy GC under uniform random writes, rho = (T - U) / U: (1 + rho) / (2 rho), the
    limit of many pages per block (a victim's valid fraction u_v with the blocks' fractions spread evenly
    from u_v to 1, their mean U / T: WA = 1 / (1 - u_v))."""
    return (1 + rho) / (2 * rho)


def gc_wa(tmp: Path, utilisations, bpl=8) -> list[dict]:
    out = []
    cap = ftl_capacity(bpl)
    for i, lbas in enumerate(utilisations):
        progress(f"GC write amplification: {lbas} LBAs of {cap}")
        dev = Device(tmp / f"gc{lbas}", bpl)
        con, _ = dev.boot()
        Device.cmd(con, "ckpt every 1024")
        areas = int(re.search(r"(\d+) pages", Device.cmd(con, "ckpt now")).group(1))
        warm = writes(con, 1 + i, 2 * lbas, lbas)
        c0 = gc_copies(con)
        measured = writes(con, 100 + i, 2 * lbas, lbas)
        copies = gc_copies(con) - c0
        Device.close(con)
        area_blocks = spec.CKPT.AREAS * -(-areas // PPB)
        total = (TARGETS * bpl - area_blocks) * PPB
        rho = (total - lbas) / lbas
        out.append(dict(lbas=lbas, capacity=cap, data_pages=total, rho=rho, host=2 * lbas, copies=copies,
                        wa=(2 * lbas + copies) / (2 * lbas), greedy=greedy_wa(rho),
                        sim_speed=measured["sim_speed"], warm_speed=warm["sim_speed"]))
    return out


def render(r: dict) -> str:
    clk = CLK_HZ / 1e6
    lines = ["# Full-SoC measurements (`make bench-soc`)", "",
             f"Simulated time at the nominal {clk:.0f} MHz clock; the small NAND profile ({PROFILE.page_data} B "
             f"pages, {PPB} pages per block, tPROG {PROFILE.t_prog_ns / 1000:.0f} us), 2 channels x 2 ways, the "
             "firmware on VexRiscv, the FTL core in Verilator.  Generated by `sim/bench_soc.py`; raw figures in "
             "`docs/results/soc_bench.json`.", ""]
    if r.get("note"):
        lines += [r["note"], ""]
    if r.get("mode") == "quick":
        lines += ["**This run: `--quick`** (fewer points: no 32/64-block devices, one GC point; the full "
                  "`make bench-soc` adds them and the 100 % logical fill point, about an hour).  Wall-clock "
                  "figures (simulation speed) were taken on a machine busy with other jobs.", ""]
    if r.get("since"):
        lines += ["## Boot time vs pages written since the checkpoint", "",
                  f"4 x {SINCE_BPL} blocks; a base of 256 writes, `ckpt now`, then N one-page writes (automatic checkpoints "
                  "and GC off), power cycle.", "",
                  "| pages since | blocks scanned | page 0 pass | checkpoint load | scan | finish | boot total |",
                  "| ---: | ---: | ---: | ---: | ---: | ---: | ---: |"]
        for p in r["since"]:
            ph = p["phases_ms"]
            lines.append(f"| {p['since']} | {p['blocks_scanned']} of {p['blocks']} | {ph['page0']:.2f} ms | "
                         f"{ph['checkpoint']:.2f} ms | {ph['scan']:.2f} ms | {ph['finish']:.2f} ms | "
                         f"{p['boot_cycles'] / CLK_HZ * 1e3:.1f} ms |")
        lines += ["", "The scan covers the blocks written since the checkpoint's floor (whole blocks: a block "
                  "opened before the floor is scanned too), so it grows with the writes since, in steps of "
                  "blocks.", ""]
    if r.get("size"):
        lines += ["## Boot time vs device size", "",
                  f"A checkpoint and {r['size'][0]['since']} one-page writes since, then a power cycle; the first "
                  "boot (fresh images: no checkpoint, every page's OOB read) for comparison.", "",
                  "| blocks per LUN | pages | page 0 read | blocks scanned | bbt + page 0 | checkpoint load | scan "
                  "| FTL start | boot total | first boot (full scan) |",
                  "| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"]
        for p in r["size"]:
            ph = p["phases_ms"]
            p0 = "every block" if p.get("page0_blocks", 0) is None else f"{p.get('page0_blocks', '?')} blocks"
            lines.append(f"| {p['blocks_per_lun']} | {p['pages']} | {p0} | {p['blocks_scanned']} of {p['blocks']} | "
                         f"{ph['bbt'] + ph['page0']:.2f} ms | {ph['checkpoint']:.2f} ms | {ph['scan']:.2f} ms | "
                         f"{ph['ftl_start']:.2f} ms | {p['boot_cycles'] / CLK_HZ * 1e3:.1f} ms | "
                         f"{p['first_boot']['boot_cycles'] / CLK_HZ * 1e3:.1f} ms |")
        a, b = r["size"][0], r["size"][-1]

        def grew(*names):
            return sum(b["phases_ms"][n] - a["phases_ms"][n] for n in names)

        total = (b["boot_cycles"] - a["boot_cycles"]) / CLK_HZ * 1e3
        known = grew(*a["phases_ms"])
        per_block = (b["boot_cycles"] - a["boot_cycles"]) / (b["blocks"] - a["blocks"])
        lines += ["", f"What grows with the device ({a['blocks_per_lun']} -> {b['blocks_per_lun']} blocks per "
                  f"LUN, 8x: {total:+.1f} ms, {per_block:.0f} cycles per block added): the page-0 pass ({grew('page0'):+.1f} ms: with the anchor's record "
                  "(docs/firmware.md, *The anchor*) page 0 of the checkpoint's open blocks and the plan only, "
                  "without it one OOB read per block; the bad-block markers, one raw read per block, "
                  f"{grew('bbt'):+.1f} ms: a boot reads them only while no checkpoint of format 4 carries the "
                  f"table, as on the first boot); the checkpoint load ({grew('checkpoint'):+.1f} ms: "
                  "a boot (format 3 on) reads the header and the pages after the map -- erase counts, valid counts, "
                  "the map pages' CRCs, a few bytes per block -- and no map page); the recovery's finish "
                  f"({grew('finish'):+.1f} ms: it loads only the map segments the scan touches); "
                  f"the FTL's start ({grew('ftl_start'):+.1f} ms: its pass over the block table, the anchor's "
                  "plan and record, the space check, handing erased blocks to the dies); and the rest of the boot "
                  f"({total - known:+.1f} ms: the passes between the phases, such as the selection of the blocks "
                  f"to scan).  The scan ({grew('scan'):+.1f} ms) reads only the "
                  "blocks written since the checkpoint's floor and steps over no others.  The map loads after "
                  "the host interface is on (docs/firmware.md, *The map, loaded lazily*).", ""]
    if r.get("gc"):
        lines += ["## GC write amplification vs over-provisioning", "",
                  "4 x 8 blocks, greedy victims; uniform random one-page writes over U LBAs: 2U to warm up, then "
                  "2U measured.  T = pages of the blocks data can use (good blocks less the checkpoint areas); "
                  "rho = (T - U) / U; analytic greedy WA = (1 + rho) / (2 rho).", "",
                  "| U (LBAs) | T (pages) | rho | measured WA | (1+rho)/(2 rho) | sim speed (cycles/s) |",
                  "| ---: | ---: | ---: | ---: | ---: | ---: |"]
        for p in r["gc"]:
            lines.append(f"| {p['lbas']} | {p['data_pages']} | {p['rho']:.2f} | {p['wa']:.2f} | "
                         f"{p['greedy']:.2f} | {p['sim_speed'] / 1e3:.0f} k |")
        lines += ["", "The analytic value approximates greedy GC under uniform random writes for a device "
                  "with little spare space (small rho); for rho >= 1 it drops below 1, where the real floor is "
                  "1 (every host page is programmed once).  It is for an idealised collector over many blocks; with 32 blocks "
                  "of 64 pages, four of them open at once (one per die) and two reserved, the device has far "
                  "fewer blocks to choose from, and the open blocks hold valid data GC cannot take.", "",
                  "The same policies at scale (1,024 blocks, greedy and cost-benefit, skewed writes, hot/cold "
                  "separation) on the host, cross-checked against this SoC: [gc_bench](gc_bench.md) "
                  "(`make bench-gc`).", ""]
    speeds = [p["write_speed"] for p in r.get("since", []) if p.get("write_speed")]
    speeds += [p["sim_speed"] for p in r.get("gc", [])]
    if speeds:
        lines += ["## Simulation speed", "",
                  f"While the host writes (console `io random`, the controller busy): "
                  f"{min(speeds) / 1e3:.0f}-{max(speeds) / 1e3:.0f} k simulated cycles per wall second "
                  f"(goal: 1 M).  Where the time goes: see docs/firmware.md (*Why the simulation is slow*).", ""]
    return "\n".join(lines)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--quick", action="store_true", help="fewer points")
    p.add_argument("--only", choices=("boot", "size", "gc"), action="append")
    p.add_argument("--render", action="store_true", help="only rewrite docs/results/soc_bench.md from docs/results/soc_bench.json")
    args = p.parse_args(argv)
    if args.render:
        DOC.write_text(render(json.loads(DOC.with_suffix(".json").read_text())))
        return 0
    only = set(args.only or ("boot", "size", "gc"))
    progress("building the SoC (cached)")
    build()
    results: dict = {"mode": "quick" if args.quick else "full"}
    if args.only and not args.quick:   # a partial run keeps the other parts' figures (and says which it re-ran)
        results = json.loads(DOC.with_suffix(".json").read_text())
        results["note"] = (f"Re-run alone: {', '.join(sorted(only))}; "
                           "the other parts are from an earlier run.")
    partial = ROOT / "build" / "soc_bench.partial.json"  # each part as it finishes: a long run that stops keeps them

    def done(name, rows):
        for row in rows:
            row.pop("out", None)
        results[name] = rows
        partial.write_text(json.dumps(results, indent=1))

    with tempfile.TemporaryDirectory(dir=ROOT / "build") as tmp:
        tmp = Path(tmp)
        if "boot" in only:
            done("since", boot_vs_since(tmp, (0, 256, 1024) if args.quick else (0, 128, 512, 1024, 2048)))
        if "size" in only:
            done("size", boot_vs_size(tmp, (8, 16) if args.quick else (8, 16, 32, 64)))
        if "gc" in only:
            cap = ftl_capacity(8)
            done("gc", gc_wa(tmp, (cap // 2,) if args.quick else (cap // 3, cap // 2, cap)))
    DOC.with_suffix(".json").write_text(json.dumps(results, indent=1))
    DOC.write_text(render(results))
    print(DOC.read_text())
    return 0


if __name__ == "__main__":
    sys.exit(main())
