#!/usr/bin/env python3
"""Build and run the full atomflash SoC in Verilator, console on the terminal.

    python soc/sim.py                      # build (cached) and run; Ctrl-C or `exit` ends it
    python soc/sim.py --build-only         # just build; prints the run directory
    python soc/sim.py --firmware-only      # SoC headers + libraries + firmware, no Verilator
    python soc/sim.py --sys-clk-freq 60e6 --trace
    python soc/sim.py --nand-set blocks_per_lun=8 --nand-set bad_blocks=0:3   # smaller, faster-booting flash
    python soc/sim.py --pcie exerciser --pcie-port 7000   # a PCIe function, its link on TCP port 7000

The SoC carries the NAND controller (boards/nand_bridge.py, ``--channels`` x
``--ways`` targets, default 2 x 2) wired to one NAND behavioural model per
target.  Each run writes the models' config files into the run directory
(``nand<i>.cfg``: the build's profile and clock, ``--nand-set`` overrides) and
their images persist there (``nand<i>.img``, or ``--image PREFIX``): a
restart is a power cycle.  ``--plusarg nand<i>_config=FILE`` takes over.

Build layout (one directory per configuration, default ``build/soc/sim``):

* ``gateware/``  LiteX output: ``sim.v``, the Amaranth block's Verilog lives in
  ``rtl/``, ``sim_rom.init`` (the firmware, read by ``$readmemh`` when the
  simulator starts), ``sim_config.js`` and ``obj_dir/Vsim``;
* ``software/``  LiteX's libc/libbase/compiler-rt and ``firmware/firmware.bin``.

Caching: Verilator runs only when what it compiles changed (hash of every
Verilog/C++ source, flag and generated C++ glue; the firmware image is not part
of it because the ROM is loaded from ``sim_rom.init`` at start-up).  A firmware
edit therefore costs a few seconds, not a Verilator rebuild.  A file lock makes
concurrent builders of one directory (pytest-xdist, a shell) safe.

Ethernet: ``--etherbone`` adds the Etherbone host link (LiteEth on its PHY model, as an Ethernet
board has it); ``--etherbone-port`` puts the litex_sim module ``soc/eth2udp.c`` on its pads, a
gateway that turns UDP datagrams on 127.0.0.1 into frames to the SoC and its answers back.

PCIe: ``--pcie USER`` adds a PCIe function on the simulated link (``soc/pcie_sim_phy.py``, the
endpoint of ``soc/pcie.py`` with ``USER`` on BAR0: ``soc.atomflash_soc.PCIE_USERS``); the litex_sim
module ``soc/pcie2tcp.c`` (built into ``gateware/modules/``) carries its TLPs to a root complex on
TCP (``atomflash.pcie_link.SimPcieLink``), named in the run's ``sim_config.js`` with ``--pcie-port``.

Extension points: ``--extra-source`` adds Verilog/SystemVerilog (``--cc`` to Verilator) or C/C++
(compiled and linked into ``Vsim``, e.g. DPI code); ``--verilator-flag`` and
``--cflags`` pass flags through; ``--plusarg`` reaches ``$value$plusargs`` at
run time.  The same lists exist on the SoC object (``soc.sim_sources``,
``soc.sim_verilator_flags``, ``soc.sim_cflags``) for a ``nand_hook`` to fill.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import re
import shlex
import shutil
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
# Run as a script, sys.path[0] is soc/ itself: import the package from the root instead.
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != ROOT / "soc"]
sys.path.insert(0, str(ROOT))

from rtl.build_cache import locked  # noqa: E402
from atomflash.simctl import prepare_run_dir, vsim_command  # noqa: E402,F401  (the run directory: the host package's)

DEFAULT_BUILD_DIR = ROOT / "build" / "soc" / "sim"
DEFAULT_CHANNELS = 2   # NAND channels of the default build
DEFAULT_WAYS = 2       # targets per channel of the default build
DEFAULT_HOST_QUEUES = 2  # host queue pairs of the default build (soc.nand.DEFAULT_HOST_QUEUES)
PGO_TRAINING = (8, 300, 256)  # --pgo's training run: blocks per LUN, then `io random 1 <writes> <LBAs>`

VERILOG_EXT = {".v", ".sv", ".vh", ".svh"}
CXX_EXT = {".c", ".cc", ".cpp", ".cxx"}


def parse_args(argv=None):
    from atomflash import spec

    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    p.add_argument("--sys-clk-freq", type=float, default=float(spec.NAND_CLK_HZ),
                   help="nominal system clock in Hz (simulated time; every figure states it)")
    p.add_argument("--nand-profile", default="small", choices=sorted(spec.NAND_PROFILES),
                   help="NAND geometry the controller is elaborated for and the models' default profile")
    p.add_argument("--channels", type=int, default=DEFAULT_CHANNELS, help="NAND channels")
    p.add_argument("--ways", type=int, default=DEFAULT_WAYS, help="targets (chip enables) per channel")
    p.add_argument("--slots", type=int, default=spec.NAND_DEFAULTS.SLOTS, help="page-buffer slots per channel")
    p.add_argument("--cache-pages", type=int, default=spec.LIMITS.CACHE_PAGES,
                   help="the FTL core's volatile write cache in main RAM, in pages (0: none; else at least "
                        "channels x ways, one destage stripe; default %(default)s)")
    p.add_argument("--host-queues", type=int, default=DEFAULT_HOST_QUEUES,
                   help="host queue pairs of the FTL core (the firmware's own comes on top); the host memory "
                        "has a slice per queue")
    p.add_argument("--sdram", action="store_true",
                   help="main RAM and host memory in a simulated SDR SDRAM behind LiteX's controller, "
                        "as on a board (the firmware runs sdram_init); default: SRAMs")
    p.add_argument("--no-nand", action="store_true",
                   help="no NAND controller and models (the identify placeholder alone)")
    p.add_argument("--image", default=None,
                   help="NAND image path prefix: target i uses <prefix><i>.img (default <run dir>/nand<i>.img); "
                        "images persist across runs, a restart is a power cycle")
    p.add_argument("--nand-set", action="append", default=[], metavar="KEY=VALUE",
                   help="NAND model config key for every target (atomflash.nandsim.CONFIG_KEYS), e.g. "
                        "bad_blocks=0:3,0:9 or blocks_per_lun=16; repeatable")
    p.add_argument("--build-dir", type=Path, default=None,
                   help="build directory (default build/soc/sim, or build/soc/sim-<config> off defaults)")
    p.add_argument("--build-only", action="store_true", help="build, do not run")
    p.add_argument("--firmware-only", action="store_true",
                   help="generate SoC headers and build the firmware only (no Verilator)")
    p.add_argument("--jobs", type=int, default=os.cpu_count() or 2, help="C++ compile jobs")
    p.add_argument("--opt-level", default="O2",
                   help="C++ optimisation of the Verilated model (-O2 measured ~10%% faster than Verilator's own -Os, same build time)")
    p.add_argument("--debug-info", action="store_true",
                   help="compile the model with -ggdb (for gdb; off by default: it costs build time)")
    p.add_argument("--pgo", action="store_true",
                   help="profile-guided build of the model: gcc -fprofile-generate, a training run (a boot and "
                        f"{PGO_TRAINING[1]} random writes through the firmware), then -fprofile-use; 10-25%% more "
                        "cycles per second for about twice the build time (long campaigns, benchmarks)")
    p.add_argument("--threads", type=int, default=1,
                   help="Verilator model threads (--threads; each spins a core, so only with cores to spare)")
    p.add_argument("--trace", action="store_true", help="dump a VCD (gateware/sim.vcd)")
    p.add_argument("--trace-fst", action="store_true", help="dump FST instead of VCD")
    p.add_argument("--trace-start", type=int, default=0, help="trace start time (ps)")
    p.add_argument("--trace-end", type=int, default=-1, help="trace end time (ps, -1 = never)")
    p.add_argument("--extra-source", action="append", default=[], type=Path,
                   help="extra Verilog/SV (to Verilator) or C/C++ (linked into Vsim) file; repeatable")
    p.add_argument("--verilator-flag", action="append", default=[], help="extra Verilator flag; repeatable")
    p.add_argument("--cflags", action="append", default=[], help="extra C++ flags for the model; repeatable")
    p.add_argument("--plusarg", action="append", default=[], help="run-time +plusarg for Vsim; repeatable")
    p.add_argument("--host-port", type=int, default=None,
                   help="put the host port (UARTBone) on this TCP port, for atomflash.Device / the atomflash CLI")
    p.add_argument("--etherbone", action="store_true",
                   help="the Etherbone host link on a simulated Ethernet port beside the host port "
                        "(soc.etherbone.add_etherbone_host; a build of its own)")
    p.add_argument("--etherbone-port", type=int, default=None,
                   help="put the Ethernet port's UDP gateway (eth2udp) on this UDP port of 127.0.0.1, "
                        "for atomflash.transport.EtherboneTransport")
    from soc.atomflash_soc import PCIE_FUNCTIONS

    p.add_argument("--pcie", default=None, choices=PCIE_FUNCTIONS,
                   help="a PCIe function on the simulated link: this block on BAR0 (soc.atomflash_soc.PCIE_FUNCTIONS), "
                        "nvme: the drive as an NVMe device")
    p.add_argument("--pcie-port", type=int, default=None,
                   help="the PCIe link (pcie2tcp) on this TCP port, for atomflash.pcie_link.SimPcieLink")
    p.add_argument("--pcie-link", default="2x1", metavar="GENxLANES",
                   help="the modelled link of --pcie-port: generation and lanes (1x1 .. 3x16)")
    p.add_argument("--run-dir", type=Path, default=None,
                   help="run in this directory (its own sim_config.js; default: the gateware directory, "
                        "or <build dir>/run with --host-port)")
    p.add_argument("-q", "--quiet", action="store_true", help="less build output")
    args = p.parse_args(argv)
    for kv in args.nand_set:
        if "=" not in kv:
            p.error(f"--nand-set {kv}: expected KEY=VALUE")
    if args.pgo and (args.no_nand or args.trace or args.trace_fst):
        p.error("--pgo: a model with the NAND path and without tracing (the training run writes through it)")
    if args.cache_pages and args.cache_pages < args.channels * args.ways:
        p.error(f"--cache-pages: at least {args.channels * args.ways} (channels x ways, one destage stripe), or 0")
    if not 1 <= args.host_queues <= spec.HOST_REGS["size"].count - 1:
        p.error(f"--host-queues: 1..{spec.HOST_REGS['size'].count - 1} (the firmware takes one more pair)")
    if args.pcie_port is not None and args.pcie is None:
        p.error("--pcie-port needs --pcie")
    if args.etherbone_port is not None and not args.etherbone:
        p.error("--etherbone-port needs --etherbone")
    if args.etherbone and args.no_nand:
        p.error("--etherbone: the host link of the FTL core (drop --no-nand)")
    if not re.fullmatch(r"[123]x([1-9]|1[0-6])", args.pcie_link):
        p.error("--pcie-link: GENxLANES, generation 1..3, 1..16 lanes (say 2x1 or 3x4)")
    if args.no_nand and (args.image or args.nand_set):
        p.error("--image/--nand-set need the NAND models (drop --no-nand)")
    return args


def config_build_dir(args) -> Path:
    if args.build_dir is not None:
        return args.build_dir.resolve()
    from atomflash import spec

    defaults = dict(sys_clk_freq=float(spec.NAND_CLK_HZ), nand_profile="small", channels=DEFAULT_CHANNELS,
                    ways=DEFAULT_WAYS, slots=spec.NAND_DEFAULTS.SLOTS, no_nand=False, trace=False, trace_fst=False,
                    threads=1, cache_pages=spec.LIMITS.CACHE_PAGES, host_queues=DEFAULT_HOST_QUEUES, sdram=False, pgo=False,
                    debug_info=False, pcie=None, etherbone=False)
    diff = [f"{k}={getattr(args, k)}" for k, v in defaults.items() if getattr(args, k) != v]
    if not diff:
        return DEFAULT_BUILD_DIR
    tag = hashlib.sha1(",".join(diff).encode()).hexdigest()[:8]
    return DEFAULT_BUILD_DIR.parent / f"sim-{tag}"


class _Quiet:
    """Silence LiteX's logging/prints (build output goes to build.log)."""

    def __init__(self, log: Path, enabled: bool):
        self.log, self.enabled = log, enabled

    def __enter__(self):
        if self.enabled:
            self.fd = open(self.log, "w")
            sys.stdout.flush(); sys.stderr.flush()
            self.saved = os.dup(1), os.dup(2)
            os.dup2(self.fd.fileno(), 1)
            os.dup2(self.fd.fileno(), 2)
        return self

    def __exit__(self, *exc):
        if self.enabled:
            sys.stdout.flush(); sys.stderr.flush()
            os.dup2(self.saved[0], 1)
            os.dup2(self.saved[1], 2)
            os.close(self.saved[0]); os.close(self.saved[1])
            self.fd.close()


def make_soc(args, build_dir: Path):
    from litex.soc.integration.builder import Builder

    from soc.atomflash_soc import AtomflashSoC

    soc = AtomflashSoC(sys_clk_freq=int(args.sys_clk_freq), profile=args.nand_profile,
                       channels=args.channels, ways=args.ways, nand=not args.no_nand, slots=args.slots,
                       cache_pages=args.cache_pages, host_queues=args.host_queues, sdram=args.sdram,
                       trace_from_reset=args.trace_start == 0,
                       rtl_dir=build_dir / "rtl", pcie=args.pcie, etherbone=args.etherbone)
    soc.sim_sources = [Path(s).resolve() for s in args.extra_source]
    soc.sim_verilator_flags = list(args.verilator_flag)
    soc.sim_cflags = list(args.cflags)
    if not args.no_nand:
        from soc.nand_sim import add_nand_models, wire_core

        add_nand_models(soc, channels=args.channels, ways=args.ways, gen_dir=build_dir / "gen")
        wire_core(soc, soc.nand_core, channels=args.channels, ways=args.ways)
    builder = Builder(soc, output_dir=str(build_dir), compile_gateware=False, compile_software=True)
    # The firmware links only these; skip LiteX's other libraries (SD card, SATA, ...).
    keep = ("libc", "libcompiler_rt", "libbase", *(("liblitedram",) if args.sdram else ()))
    builder.software_packages = [(n, d) for n, d in builder.software_packages if n in keep]
    builder.software_libraries = [n for n in builder.software_libraries if n in keep]
    return soc, builder


def sim_config(args):
    from litex.build.sim.config import SimConfig

    cfg = SimConfig()
    cfg.add_clocker("sys_clk", freq_hz=int(args.sys_clk_freq))
    cfg.add_module("serial2console", "serial")
    return cfg


SRC_ATTR = re.compile(rb'\(\* src = "[^"]*" \*\)\s*')
def _content_for_hash(path: Path) -> bytes:
    data = path.read_bytes()
    if path.suffix in VERILOG_EXT:
        # LiteX stamps the build date (and a sha) into comments of sim.v; Amaranth
        # names Python source lines in (* src = ... *) attributes, which move with
        # every edit of an RTL file but change nothing Verilator compiles.
        data = b"\n".join(l for l in data.splitlines() if not l.lstrip().startswith(b"//"))
        data = SRC_ATTR.sub(b"", data)
    return data


def verilator_command(soc, gw: Path, args, pgo: str = "") -> tuple[list[str], str]:
    """The make command compiling the Verilated model (``soc/sim_verilator.mk``:
    LiteX's core Makefile with ``--trace`` only when asked, without its
    unconditional ``rm -rf obj_dir``) and a hash of its inputs."""
    srcs = []
    h = hashlib.sha256()
    for f, *_ in soc.platform.sources:
        p = Path(f) if os.path.isabs(f) else gw / f
        if p.suffix in (".hex", ".init"):
            continue
        srcs.append(str(p))
    for s in soc.sim_sources:
        if s.suffix in VERILOG_EXT or s.suffix in CXX_EXT:
            srcs.append(str(s))
        else:
            raise SystemExit(f"sim: don't know how to build {s} (Verilog/SV or C/C++ expected)")
    cc_srcs = []
    for s in srcs:
        # Verilator compiles .cpp/.c given on its command line into the --exe.
        cc_srcs.append(s if Path(s).suffix in CXX_EXT else f"--cc {s}")
        h.update(s.encode() + b"\0" + _content_for_hash(Path(s)))
    for flag in soc.sim_cflags:
        cc_srcs.append(f"-CFLAGS {shlex.quote(flag)}")
    cc_srcs += soc.sim_verilator_flags
    # LiteX's core Makefile and glue, but --trace only when asked (soc/sim_verilator.mk)
    makefile, veril = ROOT / "soc" / "sim_verilator.mk", ROOT / "soc" / "sim_veril.cpp"
    cmd = ["make", "-C", str(gw), "-f", str(makefile), f"CC_SRCS={' '.join(cc_srcs)}", f"VERIL_CPP={veril}",
           f"JOBS={args.jobs}", f"OPT_LEVEL={args.opt_level}", f"OPT_FAST=-{args.opt_level}"]
    if args.threads > 1:
        cmd.append(f"THREADS={args.threads}")
    if args.debug_info:
        cmd.append("DEBUG=1")
    if pgo:
        cmd.append(f"PGO={pgo}")
    if args.trace or args.trace_fst:
        cmd.append("TRACE=1")
    if args.trace_fst:
        cmd.append("TRACE_FST=1")
    h.update(veril.read_bytes())
    for extra in getattr(soc, "sim_hash_extra", []):  # headers the sources include (generated ones)
        h.update(str(extra).encode() + b"\0" + Path(extra).read_bytes())
    for glue in ("sim_init.cpp", "sim_header.h", "variables.mak"):
        h.update((gw / glue).read_bytes())
    h.update(makefile.read_bytes())
    h.update(" ".join(cmd).encode())
    return cmd, h.hexdigest()


def build(args) -> Path:
    """Build everything (cached); returns the gateware (run) directory."""
    build_dir = config_build_dir(args)
    gw = build_dir / "gateware"
    with locked(build_dir):
        t0 = time.time()
        log = build_dir / "build.log"
        with _Quiet(log, args.quiet):
            soc, builder = make_soc(args, build_dir)
            builder.build(sim_config=sim_config(args), trace=args.trace or args.trace_fst,
                          trace_fst=args.trace_fst, trace_start=args.trace_start,
                          trace_end=args.trace_end, run=False)
        fw = soc.firmware_bin
        print(f"sim: SoC + firmware ({fw.stat().st_size} bytes) ready in {time.time() - t0:.1f} s "
              f"[{build_dir.relative_to(ROOT) if build_dir.is_relative_to(ROOT) else build_dir}]",
              file=sys.stderr)
        if args.firmware_only:
            return gw
        # a --pgo model's stamp is its final build's (PGO=use): checked against the same, or every
        # start would build and train it again
        cmd, digest = verilator_command(soc, gw, args, pgo="use" if args.pgo else "")
        stamp = gw / ".af_verilator_hash"
        vsim = gw / "obj_dir" / "Vsim"
        if vsim.exists() and stamp.exists() and stamp.read_text() == digest:
            print("sim: Verilated model up to date", file=sys.stderr)
        else:
            t1 = time.time()
            print("sim: Verilating (first build takes about a minute)...", file=sys.stderr)
            stamp.unlink(missing_ok=True)
            (build_dir / "verilator.log").write_text("")
            if args.pgo:
                # every object built again each time: make goes by time stamps, not flags, and an object
                # left from the last build (Verilator's runtime, say) would miss the profile
                _remove_objects(gw, "*.gcda")
                _make_model(verilator_command(soc, gw, args, pgo="generate")[0], build_dir)
                print(f"sim: instrumented model built in {time.time() - t1:.1f} s; training it", file=sys.stderr)
                pgo_train(gw, args, build_dir / "pgo-train")
                _remove_objects(gw)
                cmd, digest = verilator_command(soc, gw, args, pgo="use")
            _make_model(cmd, build_dir)
            stamp.write_text(digest)
            print(f"sim: Verilated model built in {time.time() - t1:.1f} s", file=sys.stderr)
        build_host_port_module(gw)
        if args.pcie is not None:
            build_pcie_module(gw)
        if args.etherbone:
            build_sim_module(gw, ETHERNET_MODULE)
    return gw


HOST_PORT_MODULE = ROOT / "soc" / "hostport2tcp.c"
PCIE_MODULE = ROOT / "soc" / "pcie2tcp.c"
ETHERNET_MODULE = ROOT / "soc" / "eth2udp.c"
SIM_MODULE_HEADER = ROOT / "soc" / "sim_module.h"   # what the modules share


def build_sim_module(gw: Path, source: Path, libs=("-levent", "-ljson-c")) -> Path:
    """``modules/<source's name>.so`` beside LiteX's modules, a litex_sim module built from ``source``
    (again when the source changed)."""
    from litex.build.sim.verilator import core_directory

    so = gw / "modules" / f"{source.stem}.so"
    stamp = so.with_suffix(".sha256")
    digest = hashlib.sha256(source.read_bytes() + SIM_MODULE_HEADER.read_bytes()).hexdigest()
    if so.exists() and stamp.exists() and stamp.read_text() == digest:
        return so
    so.parent.mkdir(parents=True, exist_ok=True)
    r = subprocess.run(["gcc", "-Wall", "-Werror", "-O2", "-fPIC", "-shared", f"-I{core_directory}",
                        f"-I{SIM_MODULE_HEADER.parent}",
                        f"-Wl,-soname,{so.name}", "-o", str(so), str(source), *libs],
                       capture_output=True, text=True)
    if r.returncode != 0:
        raise SystemExit(f"sim: building {source.name} failed:\n{r.stderr}")
    stamp.write_text(digest)
    return so


def build_host_port_module(gw: Path) -> Path:
    """The host port on TCP with an answer in one segment (soc/hostport2tcp.c)."""
    return build_sim_module(gw, HOST_PORT_MODULE)


def build_pcie_module(gw: Path) -> Path:
    """The PCIe link on TCP, TLPs to a root complex in the host's process (soc/pcie2tcp.c)."""
    return build_sim_module(gw, PCIE_MODULE, libs=("-levent", "-ljson-c", "-lm"))


def _remove_objects(gw: Path, *more: str) -> None:
    obj = gw / "obj_dir"
    for pattern in ("*.o", "*.a", "Vsim", *more):
        for f in obj.glob(pattern):
            f.unlink()


def _make_model(cmd: list[str], build_dir: Path) -> None:
    from rtl.build_cache import compiler_cache_env

    # ccache, but not for a --pgo build: its objects must come from this profile
    cache = {} if any(c.startswith("PGO=") for c in cmd) else compiler_cache_env()
    with open(build_dir / "verilator.log", "a") as logf:
        r = subprocess.run(cmd, stdout=logf, stderr=subprocess.STDOUT, env={**os.environ, **cache})
    if r.returncode != 0:
        tail = (build_dir / "verilator.log").read_text().splitlines()[-40:]
        raise SystemExit("sim: Verilator build failed:\n" + "\n".join(tail))


def pgo_train(gw: Path, args, run_dir: Path) -> None:
    """--pgo: run the instrumented model on a fresh device (boot, then random writes through the firmware's
    own queue) and end it cleanly, so it writes its profile (obj_dir/*.gcda)."""
    from atomflash import simctl

    bpl, writes, lbas = PGO_TRAINING
    cfg = simctl.SimConfig(channels=args.channels, ways=args.ways, profile=args.nand_profile, blocks_per_lun=bpl,
                           cache_pages=args.cache_pages, host_queues=args.host_queues, sdram=args.sdram)
    shutil.rmtree(run_dir, ignore_errors=True)
    try:
        simctl.start(run_dir, cfg, fresh=True, gateware=gw)
        out = simctl.console_command(f"io random 1 {writes} {lbas}", run_dir, timeout=1800)
        if "error" in out:
            raise SystemExit(f"sim: --pgo training run failed: {out}")
    finally:
        simctl.stop(run_dir, timeout=300)
    if not any((gw / "obj_dir").glob("*.gcda")):
        raise SystemExit("sim: --pgo: the training run wrote no profile (obj_dir/*.gcda)")
    shutil.rmtree(run_dir, ignore_errors=True)


def run_interactive(gw: Path, plusargs=(), cwd: Path | None = None) -> int:
    import termios

    interactive = sys.stdin.isatty()
    saved = termios.tcgetattr(sys.stdin.fileno()) if interactive else None
    print("sim: running; the console is on this terminal. 'exit' or Ctrl-C ends the simulation.",
          file=sys.stderr)
    try:
        return subprocess.call(vsim_command(gw, plusargs), cwd=cwd or gw)
    except KeyboardInterrupt:
        return 130
    finally:
        if saved is not None:
            termios.tcsetattr(sys.stdin.fileno(), termios.TCSAFLUSH, saved)


def nand_plusargs(args, gw: Path) -> list[str]:
    """Model config files for every target (in the run directory) and the
    plusargs naming them, unless the caller passed its own ``nand<i>_config``."""
    if args.no_nand or any(a.lstrip("+").startswith("nand") and "_config=" in a for a in args.plusarg):
        return []
    from atomflash import nandsim
    from atomflash.nandsim import model_configs, write_configs

    overrides = dict(kv.split("=", 1) for kv in args.nand_set)
    cfgs = model_configs(gw, profile=args.nand_profile, targets=args.channels * args.ways,
                         clk_hz=int(args.sys_clk_freq), image_prefix=args.image, overrides=overrides)
    for cfg in cfgs:  # a kept image must match the geometry asked for (the model refuses it otherwise)
        path = Path(cfg["image"])
        if path.exists() and path.stat().st_size:
            with nandsim.Image(path) as img:
                if img.geometry != cfg.geometry:
                    raise SystemExit(f"sim: {path} holds a {img.geometry} flash, this run asks for "
                                     f"{cfg.geometry}: delete the image (a new one is made) or use --image")
    return write_configs(gw, cfgs)


def main(argv=None) -> int:
    args = parse_args(argv)
    gw = build(args)
    if args.firmware_only or args.build_only:
        print(gw)
        return 0
    networked = args.host_port is not None or args.pcie_port is not None or args.etherbone_port is not None
    run_dir = args.run_dir or (gw.parent / "run" if networked else None)
    if run_dir is not None:
        prepare_run_dir(gw, run_dir, host_port=args.host_port, etherbone_port=args.etherbone_port)
        if args.etherbone_port is not None:
            print(f"sim: Etherbone on udp://127.0.0.1:{args.etherbone_port} (atomflash --board-csr "
                  f"{gw.parent / 'csr.csv'} --etherbone 127.0.0.1:{args.etherbone_port} ...)", file=sys.stderr)
        if args.host_port is not None:
            print(f"sim: host port on tcp://127.0.0.1:{args.host_port} (atomflash --port {args.host_port} ...)",
                  file=sys.stderr)
        if args.pcie_port is not None:
            from atomflash.pcie_link import add_sim_module

            gen, lanes = (int(x) for x in args.pcie_link.split("x"))
            add_sim_module(run_dir / "sim_config.js", args.pcie_port, gen=gen, lanes=lanes)
            print(f"sim: PCIe link (gen{gen} x{lanes}) on tcp://127.0.0.1:{args.pcie_port} "
                  "(atomflash.pcie_link.SimPcieLink)", file=sys.stderr)
    return run_interactive(gw, [*nand_plusargs(args, run_dir or gw), *args.plusarg], cwd=run_dir)


if __name__ == "__main__":
    sys.exit(main())
