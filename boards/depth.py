"""Estimated register-to-register delays of a synthesized ECP5 netlist, every path at once.

nextpnr reports one critical path per clock, and only after routing, which for the whole SSD takes
most of an hour.  To close timing one needs the whole list: which registers end paths that are too
long, and what lies on them.  This tool reads the Yosys JSON that ``synth_ecp5`` writes (a flat
netlist of LUT4, PFUMX, L6MUX21, CCU2C, TRELLIS_FF, TRELLIS_DPR16X4, DP16KD ...) and computes, for
every net, its arrival time from the nearest start point (a flip-flop's Q, a block RAM's output, a
top-level input) with a fixed delay per cell and per net hop.  The cell delays are nextpnr's for
the ECP5 speed grade 6 (LUT 0.24 ns, carry 0.07 ns per two bits ...); a net between slices is
charged :data:`ROUTE_NS`, the mean of the routed executor's critical path.  The estimate is
placement-blind, so it ranks paths rather than predicting Fmax: an endpoint past 20 ns here is
one to pipeline for 50 MHz.

With ``--placed`` (the same design as nextpnr wrote it after placement, ``nextpnr-ecp5 --no-route
--write placed.json``, a quarter of an hour) each net is charged by the distance between the tiles
its ends were placed on, with the placer's own estimate: that is where a design that fills the chip
loses its time, nets between blocks that placement had to spread out.

``python -m boards.depth design.json --blocks DEPTH [--under PREFIX]`` prints where the logic is
instead: every cell charged to the design block (a dotted name cut to ``DEPTH`` parts) of the first
named net at or after its output, a block's cells counted by type and, with ``--placed``, the tiles
its cells were placed on (10th, 50th and 90th percentile of x and y: a wide spread is a block the
placer had to pull apart).

``python -m boards.depth design.json [--top N] [--budget NS] [--via file.py:line]`` prints a
histogram of arrivals, the source lines the late paths pass most, and the worst registers (bits
grouped), each with the source lines its critical path passes.  ``python -m boards.depth
--ftl-bridge`` first synthesizes the boards' FTL core (:class:`soc.ftl_bridge.FtlBridge` as the
ULX3S and the ECPIX-5 build it) into ``build/boards/depth/``: about ten minutes of Yosys.
"""

from __future__ import annotations

import argparse
import json
import re
from collections import defaultdict
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path

ROUTE_NS = 1.0          # one inter-slice net (the routed executor's critical path: 27 ns over 27 nets)
CLK_TO_Q_NS = 0.52
BRAM_CLK_TO_Q_NS = 4.0  # DP16KD without its output register
MULT_NS = 4.0
SETUP_NS = {"TRELLIS_FF": 0.0, "DP16KD": 0.5, "TRELLIS_DPR16X4": 0.3}

# combinational delay from any input to an output, per cell type and output port (ns), and the
# direct (slice-internal) hops that pay no routing
COMB_NS = {
    "LUT4": {"Z": 0.24},
    "PFUMX": {"Z": 0.26},
    "L6MUX21": {"Z": 0.26},
    "TRELLIS_DPR16X4": {"DO": 0.5},
    "MULT18X18D": {"*": MULT_NS},
}
DIRECT = {("LUT4", "Z", "PFUMX"), ("PFUMX", "Z", "L6MUX21"), ("CCU2C", "COUT", "CCU2C")}
SEQUENTIAL_OUT = {"TRELLIS_FF": CLK_TO_Q_NS, "DP16KD": BRAM_CLK_TO_Q_NS}
# inputs of the RAM cells that are not timed through to an output (written on the clock)
WRITE_PORTS = {"TRELLIS_DPR16X4": {"WAD", "DI", "WRE", "WCK"}}


def ccu2c_delay(in_port: str, out_port: str) -> float:
    if in_port == "CIN":
        return 0.07 if out_port == "COUT" else 0.44
    return 0.45


@dataclass
class Endpoint:
    arrival: float
    register: str
    src: str
    bits: int = 1
    path: list = field(default_factory=list)


def placement(placed: dict) -> dict[str, tuple[int, int]]:
    """Cell name -> (x, y) tile from a design nextpnr placed and wrote (``--write``): its
    ``NEXTPNR_BEL`` attributes.  Yosys' LUT4 and flip-flop names survive packing; a CCU2C or a
    TRELLIS_DPR16X4 became cells named after it (``<name>$CCU2_COMB0``, ``<name>$RAMW_SLICE``)."""
    cells = next(iter(placed["modules"].values()))["cells"]
    loc: dict[str, tuple[int, int]] = {}
    for name, c in cells.items():
        bel = c.get("attributes", {}).get("NEXTPNR_BEL", "")
        m = re.match(r"X(\d+)/Y(\d+)/", bel)
        if not m:
            continue
        xy = (int(m.group(1)), int(m.group(2)))
        loc[name] = xy
        base = re.sub(r"\$(CCU2_COMB\d|RAMW_\w+)$", "", name)
        loc.setdefault(base, xy)
    return loc


def placed_route_ns(a: tuple[int, int], b: tuple[int, int]) -> float:
    """nextpnr-ecp5's placer estimate of a net from tile ``a`` to tile ``b`` (``predictDelay``,
    speed grade 6): 0.12 ns per unit, a near tile costing twice a far one."""
    dx, dy = abs(a[0] - b[0]), abs(a[1] - b[1])
    return 0.12 * (3 + max(dx - 5, 0) + max(dy - 5, 0) + 2 * (min(dx, 5) + min(dy, 5)))


class Netlist:
    def __init__(self, design: dict, top: str | None = None, placed: dict | None = None):
        self.loc = placement(placed) if placed is not None else None
        mods = design["modules"]
        if top is None:
            top = next(k for k, v in mods.items() if v.get("attributes", {}).get("top"))
        self.mod = mods[top]
        self.cells = self.mod["cells"]
        self.driver: dict[int, tuple[str, str]] = {}
        for name, c in self.cells.items():
            for port, d in c["port_directions"].items():
                if d == "output":
                    for b in c["connections"][port]:
                        if isinstance(b, int):
                            self.driver[b] = (name, port)
        self.name_of: dict[int, tuple[str, str]] = {}
        for nm, n in sorted(self.mod["netnames"].items(), key=lambda kv: kv[1].get("hide_name", 0), reverse=True):
            for i, b in enumerate(n["bits"]):
                if isinstance(b, int):
                    label = nm if len(n["bits"]) == 1 else f"{nm}[{i}]"
                    self.name_of[b] = (label, n.get("attributes", {}).get("src", ""))
        self.inputs = {b for p in self.mod["ports"].values() if p["direction"] == "input"
                       for b in p["bits"] if isinstance(b, int)}
        self._arrival: dict[int, tuple[float, int | None]] = {}

    @cached_property
    def sinks(self) -> dict[int, list[str]]:
        """Net bit -> the cells that take it as an input."""
        out: dict[int, list[str]] = defaultdict(list)
        for name, c in self.cells.items():
            for port, d in c["port_directions"].items():
                if d == "input":
                    for b in c["connections"][port]:
                        if isinstance(b, int):
                            out[b].append(name)
        return out

    def arrival(self, bit) -> float:
        return self._solve(bit)[0]

    def _solve(self, bit):
        """(arrival ns, the input bit it came through) of ``bit``, iteratively."""
        if not isinstance(bit, int):
            return (0.0, None)
        stack, open_ = [bit], set()
        while stack:
            b = stack[-1]
            if b in self._arrival:
                stack.pop()
                continue
            # a dependency already open is a combinational loop (a ring oscillator): cut it there
            deps = [(d, t) for d, t in self._fanin(b) if d not in open_ or d in self._arrival]
            missing = [d for d, _ in deps if d not in self._arrival]
            if missing and b not in open_:
                open_.add(b)
                stack.extend(missing)
                continue
            deps = [(d, t) for d, t in deps if d in self._arrival]
            best = (0.0, None)
            for d, delay in deps:
                t = self._arrival[d][0] + delay
                if t > best[0]:
                    best = (t, d)
            if not deps:
                best = (self._start(b), None)
            self._arrival[b] = best
            open_.discard(b)
            stack.pop()
        return self._arrival[bit]

    def _start(self, bit) -> float:
        drv = self.driver.get(bit)
        if drv is None:
            return 0.0          # top-level input or constant
        return SEQUENTIAL_OUT.get(self.cells[drv[0]]["type"], 0.0)

    def _fanin(self, bit):
        """The bits ``bit`` depends on combinationally, with the delay from each."""
        drv = self.driver.get(bit)
        if drv is None:
            return []
        cname, oport = drv
        c = self.cells[cname]
        typ = c["type"]
        if typ in SEQUENTIAL_OUT:
            return []
        skip = WRITE_PORTS.get(typ, set())
        deps = []
        for port, d in c["port_directions"].items():
            if d != "input" or port in skip:
                continue
            for b in c["connections"][port]:
                if not isinstance(b, int):
                    continue
                if typ == "CCU2C":
                    delay = ccu2c_delay(port, oport)
                else:
                    table = COMB_NS.get(typ, {})
                    delay = table.get(oport, table.get("*", 0.3))
                deps.append((b, delay + self._route(b, cname)))
        return deps

    def _route(self, bit, sink: str) -> float:
        drv = self.driver.get(bit)
        if drv is None:
            return 0.0
        src_type = self.cells[drv[0]]["type"]
        if (src_type, drv[1], self.cells[sink]["type"]) in DIRECT:
            return 0.0
        if self.loc is not None:
            a, b = self._where(drv[0]), self._where(sink)
            if a is not None and b is not None:
                return placed_route_ns(a, b)
        return ROUTE_NS

    def _where(self, cell: str, depth: int = 3):
        """A cell's tile; a wide-LUT multiplexer (merged into a LUT's slice) is where its inputs are."""
        xy = self.loc.get(cell)
        if xy is None and depth and self.cells[cell]["type"] in ("PFUMX", "L6MUX21"):
            for port in ("ALUT", "BLUT", "D0", "D1"):
                for b in self.cells[cell]["connections"].get(port, []):
                    drv = self.driver.get(b) if isinstance(b, int) else None
                    if drv and (xy := self._where(drv[0], depth - 1)) is not None:
                        self.loc[cell] = xy
                        return xy
        return xy

    def path(self, bit) -> list[tuple[str, str, float]]:
        """The critical path into ``bit``, start first: (net name, its source line, arrival)."""
        out = []
        while bit is not None:
            t, prev = self._solve(bit)
            name, src = self.name_of.get(bit, (f"${bit}", ""))
            drv = self.driver.get(bit)
            if drv and not py_lines(src) and not drv[0].startswith("$"):
                name = src = drv[0]          # a named cell (a block RAM: "core.pending.table.0.3")
            out.append((name, src, t))
            bit = prev
        return out[::-1]

    def endpoints(self):
        """(arrival with setup, cell, port, bit) of every timed input."""
        for name, c in self.cells.items():
            typ = c["type"]
            if typ not in SETUP_NS:
                continue
            for port, d in c["port_directions"].items():
                if d != "input" or port in ("CLK", "CLKA", "CLKB", "WCK"):
                    continue
                if typ == "TRELLIS_DPR16X4" and port not in WRITE_PORTS[typ]:
                    continue
                for b in c["connections"][port]:
                    if isinstance(b, int):
                        yield self.arrival(b) + self._route(b, name) + SETUP_NS[typ], name, port, b


_SRC = re.compile(r"([^/|]+\.py):(\d+)")


def py_lines(src: str) -> list[str]:
    """The Python source lines named in a Yosys ``src`` attribute (file.py:line)."""
    return [f"{m.group(1)}:{m.group(2)}" for m in _SRC.finditer(src)]


def register_of(net: Netlist, cell: str) -> tuple[str, str]:
    """A register's name (its Q net's, bit index dropped) and its source line."""
    c = net.cells[cell]
    q = c["connections"].get("Q") or c["connections"].get("DOA0") or [None]
    name, src = net.name_of.get(q[0], (cell, c.get("attributes", {}).get("src", "")))
    name = re.sub(r"\.storage\.\d+\.\d+$", "", re.sub(r"\[\d+\]$", "", name))
    return name, src or c.get("attributes", {}).get("src", "")


def worst(net: Netlist, budget: float, top: int, via: str | None = None) -> list[Endpoint]:
    """The registers whose worst input arrives after ``budget`` ns, worst first, at most ``top``
    (``via``: only paths through that source line, ``file.py:line``)."""
    by_reg: dict[str, Endpoint] = {}
    bits = defaultdict(int)
    for t, cell, port, bit in net.endpoints():
        if t <= budget:
            continue
        if via and not any(via in py_lines(src) for _, src, _ in net.path(bit)):
            continue
        reg, src = register_of(net, cell)
        key = f"{reg} ({port if port in ('CE', 'LSR') else 'D'})"
        bits[key] += 1
        if key not in by_reg or by_reg[key].arrival < t:
            by_reg[key] = Endpoint(t, key, src, path=[bit])
    eps = sorted(by_reg.values(), key=lambda e: -e.arrival)[:top]
    for e in eps:
        e.bits = bits[e.register]
        e.path = net.path(e.path[0])
    return eps


def through(net: Netlist, budget: float) -> list[tuple[str, int, float]]:
    """The source lines the late endpoints' critical paths pass most often: (file:line, endpoints,
    latest arrival there).  Registering a signal near the top of this list cuts many paths."""
    count, latest = defaultdict(int), defaultdict(float)
    for t, cell, port, bit in net.endpoints():
        if t <= budget:
            continue
        seen = set()
        for name, src, at in net.path(bit):
            for line in py_lines(src):
                if line not in seen:
                    seen.add(line)
                    count[line] += 1
                    latest[line] = max(latest[line], at)
    return sorted(((k, n, latest[k]) for k, n in count.items()), key=lambda x: -x[1])


def histogram(net: Netlist, step: float = 2.0) -> dict[float, int]:
    """Register inputs per arrival bucket (ns, lower edge)."""
    h = defaultdict(int)
    for t, *_ in net.endpoints():
        h[step * int(t // step)] += 1
    return dict(sorted(h.items()))


def describe(e: Endpoint) -> str:
    lines = [f"{e.arrival:6.1f} ns  {e.register}  ({e.bits} bits; {', '.join(py_lines(e.src)) or e.src})"]
    seen = []
    for name, src, t in e.path:
        where = ", ".join(py_lines(src)) or (src if src == name else "")
        if not where or (seen and seen[-1][1] == where):
            continue
        seen.append((name, where, t))
    for name, where, t in seen:
        lines.append(f"         {t:5.1f}  {where:28s} {name}")
    return "\n".join(lines)


def block_of(net: Netlist, cell: str, depth: int, hops: int = 6) -> str:
    """The block a cell belongs to: the first named net (not a Yosys ``$`` name) at its outputs or, for
    logic that drives only unnamed nets, at the outputs of the cells it feeds (breadth first, ``hops``
    deep), cut to ``depth`` dotted parts; ``"?"`` when none is near."""
    frontier, seen = [cell], {cell}
    for _ in range(hops + 1):
        nxt = []
        for name in frontier:
            c = net.cells[name]
            outs = [b for p, d in c["port_directions"].items() if d == "output"
                    for b in c["connections"][p] if isinstance(b, int)]
            for b in outs:
                label = net.name_of.get(b, ("$",))[0]
                if not label.startswith("$"):
                    return ".".join(re.sub(r"\[\d+\]$", "", label).split(".")[:depth])
            nxt += [s for b in outs for s in net.sinks.get(b, [])[:8] if s not in seen]
            seen.update(nxt)
        frontier = nxt
    return "?"


def blocks(net: Netlist, depth: int, under: str = "") -> list[tuple[str, dict[str, int], list]]:
    """(block, cells per type, placed tiles) for every block under ``under``, most logic cells first."""
    count: dict[str, dict[str, int]] = defaultdict(lambda: defaultdict(int))
    tiles: dict[str, list] = defaultdict(list)
    for name, c in net.cells.items():
        blk = block_of(net, name, depth + under.count(".") + (1 if under else 0))
        if under and not (blk == under or blk.startswith(under + ".")):
            continue
        count[blk][c["type"]] += 1
        if net.loc is not None and (xy := net.loc.get(name)) is not None:
            tiles[blk].append(xy)
    logic = ("LUT4", "TRELLIS_COMB", "CCU2C")
    return sorted(((b, dict(n), tiles[b]) for b, n in count.items()),
                  key=lambda r: -sum(v for k, v in r[1].items() if k in logic))


def describe_blocks(rows, top: int) -> str:
    def pct(v, q):
        v = sorted(v)
        return v[min(len(v) - 1, int(q * len(v)))]
    out = []
    for blk, n, xy in rows[:top]:
        cells = ", ".join(f"{k} {v}" for k, v in sorted(n.items(), key=lambda kv: -kv[1])[:4])
        where = ""
        if xy:
            xs, ys = [p[0] for p in xy], [p[1] for p in xy]
            where = (f"  x {pct(xs, .1)}-{pct(xs, .5)}-{pct(xs, .9)}"
                     f"  y {pct(ys, .1)}-{pct(ys, .5)}-{pct(ys, .9)}")
        out.append(f"  {blk:56s} {cells}{where}")
    return "\n".join(out)


def synth_ftl_bridge(out_dir: Path) -> Path:
    """The boards' FTL core through the checked ``synth_ecp5`` (:func:`boards.synth.synth`); its JSON."""
    from boards.nand_bridge import LED_STRETCH
    from boards.synth import synth
    from boards.ulx3s import DEFAULT_SYS_CLK
    from soc.atomflash_soc import DEFAULT_SLOTS
    from soc.ftl_bridge import FtlBridge

    # as boards/common.py's add_atomflash_board builds it (one host queue pair and the firmware's), but
    # the TRNG's ring oscillators: LUT4 instances the checked flow refuses, and untimed anyway
    bridge = FtlBridge(clk_hz=int(DEFAULT_SYS_CLK), sample=1, profile="realistic", channels=2, ways=2,
                       nand_slots=DEFAULT_SLOTS, queue_pairs=2, led_stretch=LED_STRETCH, ring_oscillator=False)
    res = synth(bridge, "af_ftl_bridge", out_dir=out_dir, json_out=True)
    return res["json"]


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("json", type=Path, nargs="?")
    ap.add_argument("--ftl-bridge", action="store_true", help="synthesize the boards' FTL core first")
    ap.add_argument("--top-module")
    ap.add_argument("--top", type=int, default=30, help="registers to list")
    ap.add_argument("--budget", type=float, default=16.0, help="ns: list registers whose inputs arrive later")
    ap.add_argument("--via", help="only paths through this source line (file.py:line)")
    ap.add_argument("--placed", type=Path,
                    help="the same design placed by nextpnr (--write): charge each net by its distance")
    ap.add_argument("--blocks", type=int, metavar="DEPTH",
                    help="where the logic is: cells per block, blocks cut to DEPTH dotted name parts")
    ap.add_argument("--under", default="", help="with --blocks: only blocks under this name")
    args = ap.parse_args(argv)
    if args.ftl_bridge:
        args.json = synth_ftl_bridge(Path(__file__).resolve().parents[1] / "build" / "boards" / "depth")
    elif args.json is None:
        ap.error("a Yosys JSON, or --ftl-bridge")
    placed = json.loads(args.placed.read_text()) if args.placed else None
    net = Netlist(json.loads(args.json.read_text()), args.top_module, placed)
    if args.blocks is not None:
        print(f"cells per block (depth {args.blocks}{', under ' + args.under if args.under else ''}):")
        print(describe_blocks(blocks(net, args.blocks, args.under), args.top))
        return
    eps = worst(net, args.budget, args.top, args.via)
    print("register inputs per arrival (ns):")
    for lo, n in histogram(net).items():
        print(f"  {lo:5.0f}-{lo + 2:<3.0f} {n:7d}")
    total = sum(1 for t, *_ in net.endpoints() if t > args.budget)
    print(f"{total} register inputs arrive after {args.budget} ns; the source lines their paths pass most:")
    for line, n, at in through(net, args.budget)[:args.top]:
        print(f"  {n:6d}  {line:32s} (up to {at:.1f} ns there)")
    print(f"the worst {len(eps)} registers:")
    for e in eps:
        print(describe(e))


if __name__ == "__main__":
    main()
