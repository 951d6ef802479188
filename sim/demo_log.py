#!/usr/bin/env python3
"""`make demo-log`: the commit-flag log alone, written by a Python log writer
(`make demo` is the full system, the RTL FTL included: sim/demo.py).

What it shows: the commit-flag log on simulated flash, through the RTL NAND controller
(2 channels x 2 ways, BCH ECC) and four NAND behavioural models, with a power
cut in the middle of an atomic group whose commit-bit page already landed;
after a power cycle every page is read back through the controller and
``atomflash.model.recover`` rebuilds the map, judged by the semantic model's
oracle.
"""

import json
import os
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from rich.console import Console  # noqa: E402
from rich.table import Table  # noqa: E402

from sim.harness import runner  # noqa: E402
from sim.harness.nand_channel import build, model_plusargs  # noqa: E402

HERE = Path(__file__).parent


def main() -> int:
    console = Console()
    console.rule("[bold]atomflash demo: a power cut inside an atomic group, on simulated flash")
    console.print("building the NAND controller (Amaranth) + 4 NAND models (SV/C++) in Verilator "
                  "(cached after the first run) ...")
    args = build("small", 2, 2, 4, test_dir=HERE)
    slot_words = args.pop("slot_words")
    work = Path(tempfile.mkdtemp(prefix="demo-", dir=runner.BUILD))
    out = work / "demo.json"
    plusargs = model_plusargs(work, "small", 4, image_prefix="demo")
    try:
        runner.run(test_module="demo_powercut_cocotb", plusargs=plusargs,
                   extra_env={"NANDTB_SLOT_WORDS": str(slot_words), "DEMO_OUT": str(out)}, **args)
        passed = True
    except (AssertionError, SystemExit):
        passed = False
    if not out.exists():
        console.print("[bold red]demo FAILED before producing results (see the log above)")
        return 1
    r = json.loads(out.read_text())

    t = Table(title="before the power cycle: what the log writer programmed (die = channel x way)")
    for col in ("#", "die", "page", "kind", "lba", "seq", "what"):
        t.add_column(col)
    for i, p in enumerate(r["session1"], 1):
        style = "red" if i == len(r["session1"]) else ""
        t.add_row(str(i), str(p["die"]), str(p["page"]), p["kind"], str(p["lba"]), str(p["seq"]), p["what"],
                  style=style)
    console.print(t)
    console.print(f"[bold red]power cut[/] on die {r['cut']['die']} during its program #{r['cut']['program']}: "
                  f"{r['cut']['what']} — then every die lost power.")

    t = Table(title="after the power cycle: every page read back through the controller + ECC")
    for col in ("die", "page", "controller", "ECC bits fixed", "kind", "lba", "seq"):
        t.add_column(col)
    for p in r["session2"]:
        style = "red" if p["result"] != "OK" else ""
        t.add_row(str(p["die"]), str(p["page"]), p["result"], str(p["corrected"]), p.get("kind", "-"),
                  str(p.get("lba", "")), str(p.get("seq", "")), style=style)
    console.print(t)

    t = Table(title="atomflash.model.recover: the map that survives")
    t.add_column("lba")
    t.add_column("data")
    for lba, text in r["recovered"].items():
        t.add_row(lba, text)
    console.print(t)
    for why in r["rejected"]:
        console.print(f"  rejected: {why}")
    console.print(f"torn pages: {r['torn']}; the log resumes at seq {r['next_seq']}")
    viol = sum(s["TIMING_VIOLATIONS"] + s["PROTOCOL_ERRORS"] for s in r["stats1"] + r["stats2"])
    programs = sum(s["PROGRAMS"] for s in r["stats1"])
    console.print(f"flash programs before the power cycle: {programs}; ONFI timing/protocol violations seen "
                  f"by the models: {viol}; simulated cycles (at the end, after the power cycle): "
                  f"{r['cycles']:,} at 100 MHz")
    if r["violations"]:
        for v in r["violations"]:
            console.print(f"[red]oracle: {v}")
    ok = passed and not r["violations"] and viol == 0
    console.print("[bold green]demo passed: every acknowledged write and the committed transaction survived; "
                  "the cut atomic group is gone as a whole" if ok else "[bold red]demo FAILED")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
