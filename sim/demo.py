#!/usr/bin/env python3
"""`make demo`: the whole atomflash system, used by a host, losing power.

1. Start the simulated SSD on fresh NAND images (LiteX SoC in Verilator:
   VexRiscv firmware, the Amaranth FTL core, 2 channels x 2 ways of NAND
   behavioural models); NAND target 0 is told to lose power while it
   programs its k-th page (``power_cut_program``), mid-program: a torn page.
2. A host (``atomflash.Device`` over NVMe: the host library is the root complex of the
   simulated PCIe link; ``--port debug``: over the debug port, UARTBone) runs a random
   workload: plain writes with several in flight, atomic groups,
   transactions (committed with TX_COMMIT, committed by their final write,
   aborted), appends remapped or released, trims, flushes.  Every command is
   mirrored in the semantic model (``atomflash.workload.Recorder``).
3. Power goes in the middle of it; the host loses the device.
4. Restart on the same images: the firmware finds the newest checkpoint,
   recovers the log written since, and prints its report.
5. Read every LBA back and let the model's oracle judge: every acknowledged
   write, commit and remap present; every atomic group, transaction and
   remap all-or-nothing; nothing else changed.  The device then takes new work.

    python sim/demo.py [--seed N] [--commands N] [--cut-program K] [--port nvme|debug] [--keep]

``--corrupt`` flips one byte of one recovered block before judging, to show
the verification fails when it should (exit status 1).
"""

from __future__ import annotations

import argparse
import random
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "host"))

from rich.console import Console  # noqa: E402
from rich.table import Table  # noqa: E402

from atomflash import nandsim, simctl  # noqa: E402
from atomflash.device import Device  # noqa: E402
from atomflash.transport import TransportError  # noqa: E402
from atomflash.workload import Recorder, random_workload, read_span, verify  # noqa: E402

RECOVERY_LINES = ("checkpoint", "recovery", "time:", "ftl:", "boot:", "bbt")


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--seed", type=int, default=2026, help="workload and cut-point seed")
    p.add_argument("--commands", type=int, default=200, help="workload commands at most (the cut ends it first)")
    p.add_argument("--span", type=int, default=96, help="LBAs the workload touches")
    p.add_argument("--cut-program", type=int, default=0,
                   help="target 0 loses power during its k-th program (default: drawn from the seed)")
    p.add_argument("--dir", type=Path, default=ROOT / "build" / "demo", help="run directory (images, console log)")
    p.add_argument("--keep", action="store_true", help="leave the restarted simulation running (atomflash --dir ...)")
    p.add_argument("--corrupt", action="store_true", help="corrupt one recovered block: the check must fail")
    p.add_argument("--port", choices=("nvme", "debug"), default="nvme",
                   help="the host's way in: NVMe over the simulated PCIe link, or the debug port (UARTBone)")
    return p.parse_args(argv)


def flash_counts(images) -> tuple[int, int]:
    programs = erases = 0
    for path in images:
        with nandsim.Image(path) as img:
            programs += img.programs
            g = img.geometry
            erases += sum(img.erase_count(lun, b) for lun in range(g.luns) for b in range(g.blocks_per_lun))
    return programs, erases


def main(argv=None) -> int:
    args = parse_args(argv)
    con = Console(highlight=False, soft_wrap=True)
    rnd = random.Random(args.seed)
    cut = args.cut_program or rnd.randint(25, 60)
    run_dir = args.dir.resolve()
    t_start = time.monotonic()

    con.rule("[bold]atomflash demo: a host, a workload, a power cut, recovery")
    con.print(f"1. starting the simulated SSD on fresh images in {run_dir} "
              f"(NAND target 0 loses power during its program #{cut}) ...")
    simctl.stop(run_dir, power_cut=True)
    nvme = args.port == "nvme"
    cfg = simctl.SimConfig(nvme=nvme, target_set=[{"power_cut_program": cut, "power_cut_finish": 1}])
    st = simctl.start(run_dir, cfg, fresh=True)
    dev = Device.attach_sim(run_dir, port=args.port)
    info = dev.info
    dies = f", {info.channels} x {info.ways} dies" if info.channels else ""
    con.print(f"   device up over {'NVMe (simulated PCIe link)' if nvme else 'the debug port'}: "
              f"{info.capacity} LBAs of {info.lba_size} B{dies}, "
              f"atomic groups <= {info.max_atomic_pages} pages, {info.max_open_tx} open transactions, "
              f"{info.max_appends} appends, volatile cache {info.volatile_cache} B")

    con.print(f"2. workload: up to {args.commands} random commands over LBAs 0..{args.span - 1} "
              f"(seed {args.seed}) until the power goes")
    rec = Recorder(dev)
    steps: dict[str, int] = {}
    last = [time.monotonic()]

    def on_step(i, what):
        steps[what] = steps.get(what, 0) + 1
        if time.monotonic() - last[0] > 10:
            last[0] = time.monotonic()
            con.print(f"   ... {i + 1} commands", style="dim")

    cut_seen = False
    try:
        random_workload(rec, rnd, commands=args.commands, span=args.span, salt=args.seed, on_step=on_step)
    except TransportError as e:
        cut_seen = True
        con.print(f"3. [bold red]power cut[/] after {rec.counts.commands} commands: {e}")
    dev.close()
    if not cut_seen:
        con.print(f"3. the workload ended before program #{cut}; cutting power now (the simulator is killed)")
        simctl.stop(run_dir, power_cut=True)
    st = simctl.wait_exit(run_dir)
    in_flight = rec.in_flight_ops
    host_pages = rec.counts.pages
    con.print(f"   {len(rec.model.history)} state-changing ops recorded, {len(in_flight)} of them in flight at the cut")

    con.print("4. power back on: the firmware recovers")
    simctl.start(run_dir, simctl.SimConfig(nvme=nvme), fresh=False)
    report = simctl.boot_report(run_dir)
    for line in report.splitlines():
        if line.startswith(RECOVERY_LINES):
            con.print(f"   [cyan]|[/] {line}")
    dev = Device.attach_sim(run_dir, port=args.port)
    stats = dev.stats(fresh=True)

    con.print(f"5. reading LBAs 0..{args.span - 1} back and judging them with the model's oracle")
    recovered = read_span(dev, args.span)
    if args.corrupt:
        victim = next((lba for lba in sorted(recovered) if any(recovered[lba])), 0)
        blk = bytearray(recovered[victim])
        blk[len(blk) // 2] ^= 0x01
        recovered[victim] = bytes(blk)
        con.print(f"   --corrupt: flipped one bit of lba {victim} before judging")
    violations = verify(rec.model.history, recovered, lba_size=dev.lba_size, initial=rec.model.initial)
    probe = bytes([0xA5]) * dev.lba_size
    dev.write(args.span, probe)
    new_work = dev.read(args.span) == probe
    dev.close()
    if not args.keep:
        simctl.stop(run_dir)
    programs, erases = flash_counts(st["images"])

    hz = stats["clk_hz"] or 1
    t = Table(title="summary", show_header=False)
    t.add_column("what")
    t.add_column("value", justify="right")
    c = rec.counts
    t.add_row("host commands (before the cut)", f"{c.commands}")
    t.add_row("  plain writes / atomic groups", f"{c.writes} / {c.atomic}")
    t.add_row("  transactions committed / by final write / aborted", f"{c.tx_committed} / {c.tx_final} / {c.tx_aborted}")
    t.add_row("  appends / remaps / releases", f"{c.appends} / {c.remaps} / {c.releases}")
    t.add_row("  trims / flushes", f"{c.trims} / {c.flushes}")
    t.add_row("host pages written", f"{host_pages}")
    t.add_row("flash programs / erases (NAND models, both boots)", f"{programs} / {erases}")
    t.add_row("write amplification (programs / host pages)", f"{programs / host_pages:.2f}" if host_pages else "n/a")
    t.add_row("recovery: pages scanned", f"{stats['boot_pages_scanned']}")
    t.add_row("recovery: groups / tx / remaps discarded",
              f"{stats['boot_groups_discarded']} / {stats['boot_tx_discarded']} / {stats['boot_remaps_discarded']}")
    t.add_row("recovery time (scan + rebuild, simulated)", f"{stats['boot_scan_cycles'] / hz * 1000:.3f} ms")
    t.add_row("boot to host interface (simulated)", f"{stats['boot_cycles'] / hz * 1000:.3f} ms")
    t.add_row("violations seen by the oracle", f"{len(violations)}")
    t.add_row("new work after recovery", "accepted" if new_work else "REFUSED")
    t.add_row("wall time", f"{time.monotonic() - t_start:.0f} s")
    con.print(t)
    for v in violations[:20]:
        con.print(f"   [red]{v}[/]")
    if violations or not new_work:
        con.print("[bold red]demo FAILED[/]: the device broke a promise (details above)")
        return 1
    con.print("[bold green]demo passed[/]: every acknowledged write, commit and remap survived the power cut, "
              "no atomic group, transaction or remap is half-visible")
    return 0


if __name__ == "__main__":
    sys.exit(main())
