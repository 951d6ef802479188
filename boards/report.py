#!/usr/bin/env python3
"""Resource and timing report for the board targets -> docs/results/boards.md.

    python boards/report.py                       # everything (tens of minutes on 2 cores)
    python boards/report.py --boards colorlight_i5 --no-core
    python boards/report.py --render-only         # rewrite docs/results/boards.md from build/boards/report.json

``make board-report`` runs it.  Two parts:

* **controller core alone, per channel**: :class:`boards.nand_bridge.NandBridge`
  with one channel (the configuration each board instantiates per channel),
  Yosys ``synth_ecp5`` (:mod:`boards.synth`) and nextpnr-ecp5
  ``--out-of-context`` on an LFE5U-25F at 100 MHz (no pins, so the figure is
  the logic's own Fmax);
* **each board**: the full bitstream build (``boards/<board>.py --build``),
  resources from Yosys and nextpnr, Fmax of every clock domain from
  nextpnr's timing analysis after routing, PASS/FAIL and the margin at the
  constrained frequency, and the critical path.

Results accumulate in ``build/boards/report.json`` (one entry per part), so
parts can be rerun alone; docs/results/boards.md is rendered from it and from the
boards' pin plans, so the pin tables and the figures cannot drift apart.
"""

from __future__ import annotations

import argparse
import importlib
import json
import re
import subprocess
import sys
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from boards.common import BUILD, SIGNALS_SHARED  # noqa: E402
from boards.synth import nextpnr_ooc, parse_nextpnr, resources, synth  # noqa: E402

DOC = ROOT / "docs" / "results" / "boards.md"
STORE = BUILD / "report.json"

# (key, board module, extra args, build dir name, FPGA)
BOARDS = {
    "colorlight_i5": ("colorlight_i5", [], "colorlight_i5", "LFE5U-25F"),
    "ulx3s_85f": ("ulx3s", ["--device", "LFE5U-85F"], "ulx3s_lfe5u-85f", "LFE5U-85F"),
    "ulx3s_45f": ("ulx3s", ["--device", "LFE5U-45F", "--core", "nand"], "ulx3s_lfe5u-45f", "LFE5U-45F"),
    "colorlight_i9": ("colorlight_i5", ["--board", "i9", "--channels", "2"], "colorlight_i9", "LFE5U-45F"),
    "ecpix5": ("ecpix5", [], "ecpix5", "LFE5UM5G-85F"),
}
DEFAULT_BOARDS = "colorlight_i5,ulx3s_85f,ecpix5"
CORE_CONFIGS = [  # profile, ways, slots, ecc
    ("realistic", 2, 2, True),

]
CORE_TARGET_MHZ = 100


def load() -> dict:
    return json.loads(STORE.read_text()) if STORE.exists() else {"core": {}, "boards": {}}


_SAVE = threading.Lock()   # board builds run in threads (--jobs) and each saves its entry


def save(data: dict) -> None:
    with _SAVE:
        STORE.parent.mkdir(parents=True, exist_ok=True)
        STORE.write_text(json.dumps(data, indent=1, default=str))


def run_core(data: dict, seed: int) -> None:
    from boards.nand_bridge import NandBridge
    from rtl.nand.channel import ChannelParams

    for profile, ways, slots, ecc in CORE_CONFIGS:
        key = f"{profile}_w{ways}_s{slots}_{'ecc' if ecc else 'noecc'}"
        name = f"af_nand_core_{key}"
        print(f"core {key}: synth_ecp5 ...", flush=True)
        t0 = time.time()
        bridge = NandBridge(ChannelParams(profile, ways=ways, slots=slots, ecc=ecc), 1,
                            clk_hz=CORE_TARGET_MHZ * 1_000_000)
        res = synth(bridge, name, json_out=True, full=True)
        print(f"  {res['LUT4']} LUT4, {res['FF']} FF, {res['DP16KD']} DP16KD ({res['yosys_s']} s); nextpnr ...",
              flush=True)
        pnr = nextpnr_ooc(res["json"], device="25k", package="CABGA381", freq_mhz=CORE_TARGET_MHZ, seed=seed)
        clocks = pnr["clocks"]
        print(f"  {clocks} ({pnr['seconds']} s)", flush=True)
        data["core"][key] = dict(profile=profile, ways=ways, slots=slots, ecc=ecc,
                                 res={k: res[k] for k in ("LUT4", "FF", "CCU2C", "DP16KD", "MULT18X18D", "LUTRAM")},
                                 clocks=clocks, critical=pnr["critical"][:3], utilization=pnr["utilization"],
                                 pnr_ok=pnr["returncode"] == 0, synth_s=res["yosys_s"], pnr_s=pnr["seconds"],
                                 total_s=round(time.time() - t0, 1), when=time.strftime("%Y-%m-%d"))
        save(data)


def board_args(extra: list[str]) -> list[str]:
    return extra


def run_board(data: dict, key: str, build: bool, seed: int, extra: list[str]) -> None:
    module, args, dirname, fpga = BOARDS[key]
    gw = BUILD / dirname / "gateware"
    t0 = time.time()
    if build:
        cmd = [sys.executable, str(ROOT / "boards" / f"{module}.py"), "--build", "--nextpnr-seed", str(seed),
               *args, *extra]
        print(f"{key}: {' '.join(cmd[1:])}", flush=True)
        res = subprocess.run(cmd, cwd=ROOT)
        ok_build = res.returncode == 0
    else:
        ok_build = (gw / "build.log").exists()
    entry = collect_board(gw, module)
    entry.update(fpga=fpga, module=module, args=args + extra, build_ok=ok_build,
                 seconds=round(time.time() - t0, 1) if build else data["boards"].get(key, {}).get("seconds"),
                 when=time.strftime("%Y-%m-%d"))
    with _SAVE:
        data["boards"][key] = entry
    save(data)


def collect_board(gw: Path, module: str) -> dict:
    out: dict = {}
    name = None
    for p in gw.glob("*_stat.json"):
        name = p.name[:-len("_stat.json")]
        out["res"] = resources(p)
    log = gw / "nextpnr.log"
    if log.exists():
        rpt = gw / "nextpnr_report.json"
        pnr = parse_nextpnr(log.read_text(), rpt if rpt.exists() else None)
        out.update(clocks=pnr["clocks"], placed_clocks=pnr["placed_clocks"], critical=pnr["critical"][:3],
                   utilization=pnr["utilization"], routed=pnr["routed"])
        text = log.read_text()
        over = re.findall(r"overused=(\d+)", text)
        out["overused"] = int(over[-1]) if over else None
        out["router_iters"] = len(re.findall(r"Info:\s+iter=\d+ wires=", text))
    # what the SoC was built with: from the generated soc.h
    soch = gw.parent / "software" / "include" / "generated" / "soc.h"
    if soch.exists():
        text = soch.read_text()
        for k in ("CONFIG_CLOCK_FREQUENCY", "CONFIG_AF_CHANNELS", "CONFIG_AF_WAYS", "CONFIG_AF_SLOTS"):
            m = re.search(rf"#define {k} (\d+)", text)
            if m:
                out[k] = int(m.group(1))
        m = re.search(r"#define AF_NAND_PROFILE_(\w+)", text)
        out["profile"] = m.group(1).lower() if m else None
        out["core"] = "ftl" if re.search(r"#define AFCTRL_FTL\b", text) else "nand"
    out["bitstream"] = bool(name and (gw / f"{name}.bit").exists())
    return out


# Rendering ----------------------------------------------------------------------

def fmt_clocks(clocks: dict) -> list[str]:
    rows = []
    for clk, c in sorted(clocks.items()):
        margin = c["fmax"] - c["target"]
        slack_ns = 1000 / c["target"] - 1000 / c["fmax"]
        rows.append(f"`{clk}` | {c['fmax']:.1f} | {c['target']:.1f} | {'PASS' if c['ok'] else '**FAIL**'} "
                    f"| {margin:+.1f} MHz ({slack_ns:+.2f} ns)")
    return rows


def build_state(b: dict) -> str:
    if b.get("bitstream"):
        return "bitstream"
    if b.get("utilization") and not b.get("routed", True):
        return "placed, **not routed** (below)"
    return "**failed**"


def util(u: dict, k: str) -> str:
    return f"{u[k][0]} / {u[k][1]}" if k in u else "-"


def render(data: dict) -> str:
    from boards import colorlight_i5, ecpix5, ulx3s
    from rtl.nand.window import BLOCK_ID, CTRL, REGS, STATUS
    from boards.common import AFNAND_ORIGIN, BOARD_FTL_ROM_BYTES, BOARD_L2_BYTES, BOARD_ROM_BYTES, BOARD_SRAM_BYTES
    from soc.atomflash_soc import HOSTMEM_ORIGIN
    from soc.atomflash_soc import SRAM_BYTES as FTL_SRAM

    L = []
    w = L.append
    w("# Open FPGA boards")
    w("")
    w("atomflash on ECP5 boards with open tools only: litex-boards platforms, Yosys, nextpnr-ecp5")
    w("and ecppack from PyPI (YoWASP).  Everything on this page below the first section is generated by")
    w("`make board-report` (`boards/report.py`) from the build logs and the boards' pin plans.")
    w("")
    w("```")
    w("make bitstream BOARD=colorlight_i5                     # build/boards/colorlight_i5/gateware/colorlight_i5.bit")
    w("make bitstream BOARD=ulx3s                             # LFE5U-85F, the whole SSD (--core ftl)")
    w("make bitstream BOARD=ecpix5                            # LFE5UM5G-85F, the whole SSD on Gigabit Ethernet")
    w("make bitstream BOARD=ulx3s BOARD_ARGS=\"--device LFE5U-45F --core nand\"")
    w("make bitstream BOARD=colorlight_i5 BOARD_ARGS=\"--sys-clk-freq 50e6 --channels 1 --ways 4\"")
    w("make board-report                                      # the boards + the core alone -> this page")
    w(".venv/bin/python boards/ulx3s.py --help                # every flag (LiteX's toolchain flags too)")
    w("```")
    w("")
    w('**PCIe and NVMe.**  The NVMe drive (docs/nvme.md) is a LitePCIe endpoint, and no board here can carry')
    w("it: ECP5 has no PCIe hard block, and there is no working open soft PHY for it (LitePCIe's PHYs wrap")
    w('vendor hard blocks: Xilinx 7-series `S7PCIEPHY`, UltraScale `USPCIEPHY`, UltraScale+ `USPPCIEPHY`,')
    w('Intel Cyclone V `C5PCIEPHY`).  A board for the NVMe drive is one with such a block and a PCIe edge')
    w('connector or M.2 key: for example an UltraScale+ card (the simulated endpoint models the UltraScale+')
    w("hard block's interface, `soc/pcie.py`, so `USPPCIEPHY` is the PHY it would use), or an Artix-7 board")
    w("with `S7PCIEPHY` (LitePCIe's 128-bit UltraScale+ adapter limit does not apply there, but the NVMe")
    w("controller needs 64-bit host addresses; check the PHY's header format first).  Those need the vendor's")
    w("tools for the PCIe block, so they are outside this page's open-tools rule; the ECP5 builds below keep")
    w('the debug port (UARTBone) as their host link and build unchanged (the FTL bridge carries the NVMe')
    w('controller only when built with `nvme_queues`).')
    w("")
    w("## What a board build contains")
    w("")
    w("Two controllers, chosen with `--core` (ULX3S and ECPIX-5 default `ftl`; Colorlight default `nand`, the i5's")
    w("25F cannot hold the FTL core's firmware):")
    w("")
    w(f"* **`--core ftl`: the whole SSD.**  The simulated SoC of `soc/` (docs/soc.md) on the board: VexRiscv, the")
    w(f"  firmware as the boot ROM ({BOARD_FTL_ROM_BYTES // 1024} KiB ROM with the SDRAM's initialisation, {FTL_SRAM // 1024} KiB SRAM as in simulation), the FTL core at")
    w(f"  `afctrl` `0x9000_0000` (`soc/ftl_bridge.py`: host queues, the FTL fast path, the NAND controller and the")
    w(f"  firmware's NAND window; the simulated SoC's core, generated from the same sources), the board's SDR SDRAM")
    l2 = f"behind a {BOARD_L2_BYTES} B L2 cache" if BOARD_L2_BYTES else "without an L2 cache, as in simulation"
    w(f"  as main RAM at `0x4000_0000` ({l2}), and host memory (`hostmem`, the host's queues")
    w(f"  and data buffers) at `0x{HOSTMEM_ORIGIN:08X}`: the SDRAM's top slice on a LiteDRAM port of its own; main RAM")
    w("  (`MAIN_RAM_SIZE`) ends below it.  The firmware initialises and tests the SDRAM (liblitedram's")
    w("  `sdram_init`) before its tables move in.  The crossbar interconnect and a bus timeout per master, as in")
    w("  simulation.  The host port is LiteX's UARTBone on the board's USB-UART, with the firmware console a")
    w("  crossover UART behind it, so one cable carries both (*Attaching a host*, below).  Needs an LFE5U-85F")
    w("  (about 47 k LUT4 and 178 block RAMs; `boards/common.py` refuses smaller parts before building),")
    w("  at least 4 page-buffer slots per channel, and BCH ECC.  The same memory system runs in simulation: `soc/sim.py --sdram` /")
    w("  `atomflash sim start --sdram` (LiteDRAM's SDRAM model of the ULX3S's part; `tb/host/test_sdram_sim.py`).")
    w("  **The ECPIX-5** (`boards/ecpix5.py`) carries the same SoC with its 512 MiB DDR3 (LiteDRAM's ECP5 PHY) as")
    w("  main RAM and host memory, and a second host link beside the UART: Gigabit Ethernet (LiteEth's RGMII PHY")
    w("  on the board's KSZ9031) with Etherbone as a host bus master (`soc/etherbone.py`: a 32-bit datapath on the")
    w("  system clock, a whole-frame receive buffer, two LiteEth/LiteX fixes), answering at 192.168.1.50, UDP 1234")
    w("  (`spec.ETHERBONE`).  The same link runs in simulation: `soc/sim.py --etherbone` / `atomflash sim start")
    w("  --ethernet` (`tb/host/test_etherbone_sim.py`; `make bench-etherbone`: 99 % of the wire's record rate).")
    w(f"* **`--core nand`: the NAND controller alone.**  {BOARD_ROM_BYTES // 1024} KiB ROM, {BOARD_SRAM_BYTES // 1024} KiB SRAM, the")
    w("  identify placeholder at `afctrl`, and `NandController` (`rtl/nand/`) with `--channels` channels of `--ways`")
    w(f"  targets behind the Wishbone window `afnand` at `0x{AFNAND_ORIGIN:08X}` (`boards/nand_bridge.py`, block id")
    w(f"  `0x{BLOCK_ID:08X}` \"AFNB\").  The firmware brings the flash up (`nand id`, the bad-block scan) and runs its")
    w("  console on the board's UART; there is no FTL and no host interface.  The window's registers (the")
    w("  FTL core's firmware NAND window has the same map):")
    w("")
    w("  The CPU writes a `spec.NAND_DESC` descriptor into `DESC`, pushes it (`CTRL.PUSH`), takes the `spec.NAND_CPL`")
    w("  completion from `CPL` (`STATUS.CPL_VALID`, interrupt `AFNAND_INTERRUPT` when `IRQ_EN`), and moves page data")
    w("  through each channel's buffer window.  Offsets reach the firmware as `AFNAND_REG_*`, `AFNAND_STATUS_*`,")
    w("  `AFNAND_CTRL_*` in the generated `soc.h` (defined once, in `rtl/nand/window.py`):")
    w("")
    w("  | register | offset | | register | offset |")
    w("  | --- | --- | --- | --- | --- |")
    items = list(REGS.items())
    half = (len(items) + 1) // 2
    for (a, b), c in zip(items[:half], items[half:] + [("", None)] * (2 * half - len(items))):
        w(f"  | `{a}` | `0x{b:03X}` | | " + (f"`{c[0]}` | `0x{c[1]:03X}` |" if c[1] is not None else " | |"))
    w("  | `BUF` | `max(0x100, BUF_STRIDE)` | | channel `c` buffer | `BUF + c * BUF_STRIDE` |")
    w("")
    w(f"  `STATUS` bits: {', '.join(f'`{k}`={v}' for k, v in STATUS.items())} (+ channel); "
      f"`CTRL` bits: {', '.join(f'`{k}`={v}' for k, v in CTRL.items())}.")
    w("  `TIMING` resets to ONFI mode 0 at the build's clock, so a board talks to any ONFI part out of reset;")
    w("  `tSAMPLE` (`--dq-sample`, default 1) covers the DQ input register the bridge adds.")
    w("* NAND pins: per channel DQ0-7, CLE, ALE, WE#, RE#, WP#, then CE#/R/B# per way, allocated in that order")
    w("  from the board's list of header pins (the tables below).  DQ goes through ECP5 tristate buffers, every")
    w("  output is LVCMOS33.")
    w("* LEDs: *activity* (a channel is busy, stretched to ~70 ms so a human sees it) and *fault* (a completion")
    w("  reported FAIL, UNCORRECTABLE or a descriptor error; latched until `CTRL.CLEAR_FAULT`; with the FTL core,")
    w("  completions of the firmware's own NAND operations).")
    w("* Main RAM bounds the flash a `--core ftl` board can manage: the firmware keeps the whole map and")
    w("  recovery's scan table in it (72 bytes per flash page, `soc.atomflash_soc.main_ram_bytes`) and refuses at")
    w("  boot a geometry that does not fit.  The ULX3S's 32 MiB (less host memory) holds about 440 k pages: e.g.")
    w("  one or two 4 Gbit SLC parts with 2 KiB pages; the `realistic` profile's 1 GiB-per-target geometry")
    w("  (262 k pages of 4 KiB per target) fits one target, not four.")
    w("")
    w("### Attaching a host (`--core ftl`)")
    w("")
    w("```")
    w("litex_server --uart --uart-port /dev/ttyUSB0 --uart-baudrate 115200     # owns the serial port")
    w("litex_term crossover                                                   # the firmware console")
    w("atomflash --board-csr build/boards/ulx3s_lfe5u-85f/csr.csv identify     # the host library / CLI")
    w("atomflash --board-csr build/boards/ulx3s_lfe5u-85f/csr.csv write 0 --data hello")
    w("```")
    w("")
    w("`litex_server` turns Etherbone packets from TCP clients into UARTBone commands; `atomflash.Device.attach_board`")
    w("(`--board-csr`, `--server host:port`) finds the controller window and host memory in the build's `csr.csv`")
    w("and speaks to it through `atomflash.transport.LitexServerTransport` (a timed-out read is an error, never")
    w("zeros).  At 115200 baud a 4 KiB block moves in about half a second; build with `--uart-baudrate 1e6` (or up")
    w("to the FT231X's 3 Mbaud) and give `litex_server` the same rate for more.  The same path runs against the")
    w("simulated SSD in `make test` (`tb/host/test_cli_sim.py`: `litex_server --uart-port socket://...` in front")
    w("of the simulation's host port).  The board boots without a console reader: a character waits at most")
    w("10 ms for room in the crossover FIFO, then console output is dropped until a reader drains it")
    w("(`firmware/conout.c`), so the host interface comes up with nobody at the console.")
    w("")
    w("On the ECPIX-5 the host talks to the drive over the LAN instead, straight over UDP")
    w("(`atomflash.transport.EtherboneTransport`: several records in flight, every one answered, lost ones sent")
    w("again) or through `litex_server --udp` (which binds UDP port 1234 itself, so use one or the other):")
    w("")
    w("```")
    w("ip addr add 192.168.1.100/24 dev eth0                                  # the host on the drive's subnet")
    w("atomflash --board-csr build/boards/ecpix5/csr.csv --etherbone 192.168.1.50 identify")
    w("atomflash --board-csr build/boards/ecpix5/csr.csv --etherbone 192.168.1.50 bench --qd 8 --ops 1000")
    w("litex_server --udp --udp-ip 192.168.1.50 & atomflash --board-csr build/boards/ecpix5/csr.csv identify")
    w("```")
    w("")
    w('### SATA (device role)')
    w('')
    w('The SATA stack (`rtl/sata/`, [sata](../sata.md)) runs in simulation only: no board build carries it yet.')
    w('A board needs a transceiver that runs a SATA line rate (Gen1 1.5 Gb/s, Gen2 3 Gb/s, Gen3 6 Gb/s) with')
    w('8b/10b and comma alignment; that sends out-of-band bursts, its transmitter entering and leaving electrical')
    w("idle within COMWAKE's 106.7 ns gaps; and that tells the host's bursts apart by their gaps (320 ns for")
    w("COMRESET, 106.7 ns for COMWAKE).  LiteSATA's PHYs are for Xilinx GTP/GTX/GTH/GTY transceivers, whose")
    w('receivers decode OOB in hardware.  Of the boards here only the ECPIX-5 has a SATA connector, on its')
    w("ECP5-5G's SERDES (up to 5 Gb/s: Gen1 and Gen2).  LiteICLink's `SerDesECP5` switches that transmitter's")
    w("electrical idle through the SERDES's serial configuration interface, a register write per change, and")
    w("gives the receiver's loss of signal as a status bit only: device-role OOB there needs the idle control")
    w('driven directly and a gap detector built on loss of signal, both to be proven on hardware.  The Colorlight')
    w("i5's and the ULX3S's FPGAs (LFE5U) have no SERDES.")
    w('')
    w("### Wiring a NAND breakout")
    w("")
    w("* **3.3 V parts only** (VccQ = 3.3 V): the headers are LVCMOS33.  1.8 V-VccQ parts need level shifters.")
    w("* **R/B# is open drain**: fit a pull-up from each R/B# line to VccQ on the breakout; 10 kOhm is fine at")
    w("  ONFI timings of the modes used here (the rise time only delays the ready detection; the controller")
    w("  waits tWB before it looks).  The FPGA's internal pull-up is also enabled (`PULLMODE=UP`), but at")
    w("  tens of kOhm it is too weak to be relied on alone.  Several targets of a channel may share one R/B# line")
    w("  (wired-AND) only if every way's R/B# pin below is tied to it; the controller expects one per way.")
    w("* **WP#** is driven high (writes allowed); tie it low with a jumper to make the part read-only.")
    w("* **CE#** of an unused way: leave the pin unconnected; the controller never selects it if the firmware")
    w("  sends no descriptor to that target.  Pull CE# up on the breakout so the part stays deselected while the")
    w("  FPGA is unconfigured.")
    w("* Keep the wires short (< 10 cm) and share ground: ONFI mode 0 (100 ns cycle) tolerates jumper wires,")
    w("  faster modes want a proper adapter.  Decouple VCC/VccQ at the part.")
    w("")
    for title, mod, note in (
            ("Colorlight i5 (LFE5U-25F) / i9 (LFE5U-45F) on the extension board", colorlight_i5,
             "Connector names are LiteX's (`pmode` ...), with the extension board's connector and Pmod pin number. "
             "UART: J17 TX / H18 RX (the extension board's USB-UART), 115200 8N1.  LED: the single user LED "
             "(U16, active low) is on while a channel is busy and blinks while a fault is latched."),
            ("ULX3S (LFE5U-12F/25F/45F/85F)", ulx3s,
             "GPn/GNn are the ULX3S's silkscreen names (J1: GP/GN0-13, J2: GP/GN14-27).  UART: the FT231X USB-UART "
             "(L4 TX / M1 RX), 115200 8N1.  LED0 (B2) = activity, LED1 (C2) = fault."),
            ("ECPIX-5 (LFE5UM5G-85F)", ecpix5,
             "UART: the board's USB-UART (FPGA R24 TX / R26 RX), 115200 8N1.  RGB LED 0: green = activity, "
             "red = fault.  Ethernet: the RJ45 (RGMII to the KSZ9031).")):
        w(f"### Pins: {title}")
        w("")
        w(note + " " + " ".join(mod.PLAN.notes))
        w("")
        w(f"The table shows 2 channels x 2 ways (default build: `--channels {getattr(mod, 'DEFAULT_CHANNELS', 2)}"
          f" --ways 2`); each channel has room for up to "
          f"{min(mod.PLAN.max_ways(c) for c in range(len(mod.PLAN.channels)))} ways on this board "
          "(further ways take the next pins of the channel's list in `boards/" + mod.__name__.split('.')[-1] + ".py`).")
        w("")
        w(mod.PLAN.markdown(2, 2))
    w("### Known limits")
    w("")
    w("* Not yet run on hardware: the bitstreams are built and timed, the pin tables are checked against the")
    w("  litex-boards platforms and the ULX3S constraint file, but no board has booted them here.  What a board")
    w("  adds to the simulated SSD -- SDRAM main RAM and host memory, `sdram_init` -- runs in")
    w("  simulation (`--sdram`); the crossover console and the ECP5 I/O do not.")
    w("* The whole SSD (`--core ftl`) fits both 85F boards; the ECPIX-5 routes with every clock met, the ULX3S")
    w("  does not meet its clock yet.  Packed, it takes 64 % of the ULX3S's logic cells and 75 % of the ECPIX-5's")
    w("  (its DDR3 PHY and LiteEth on top), and 177-186 of the 208 block RAMs, the firmware ROM 72-80 of them.")
    w("  The tables below are from the last full `make board-report`, before the timing and area work that")
    w("  followed.  Since then the ECPIX-5 at 50 MHz (its default now) placed, routed (nextpnr's router1, 23")
    w("  minutes; router2 stalls at 3,900 overused wires, which is why the build no longer asks for it) and")
    w("  packed to a bitstream: system clock 59.7 MHz for 50, RGMII receive 171.7 MHz for 125.  The ULX3S's")
    w("  speed grade is 6 against the ECPIX-5's 8: placed at 50 MHz it reaches 34.5-39.7 MHz since the")
    w("  allocator offers its page from registers and the log port chooses whose page goes a cycle ahead")
    w("  (29.7 before: the allocator's choice, the log writer's decision and the pairing gate's bookkeeping")
    w("  were one path across the die; one netlist's placement differs from the next by a tenth).  Not yet")
    w("  routed: the ECPIX-5 routes a fifth faster than its placement estimate (49.8 placed, 59.7 routed), which")
    w("  would leave the ULX3S short of 50.  An earlier ULX3S netlist placed as speed grade 8 reached 42.9 MHz")
    w("  against 32.6 as grade 6: the grade accounts for a factor of 1.3.  The late paths left (`python -m")
    w("  boards.depth --placed`) are a few LUTs each between blocks placed far apart: the Wishbone arbiter's")
    w("  grant through the bus stage's posted-write acknowledge back to each initiator's counters, the")
    w("  publisher's head-slot count from its members' memory, the info pages' state from the executor's")
    w("  log page, the log writer's page registers, and the reset's fan-out.")
    w("  The ECPIX-5 routed after the")
    w("  area cuts: the BCH decoders' Berlekamp-Massey on one multiplier each and the log")
    w("  writer's in-flight entries in a LUT RAM (2,800 LUT4 and 2,200 flip-flops fewer; `python -m")
    w("  boards.depth --blocks` finds where the logic is).  router2's congestion map named the transaction")
    w("  table's tid compares, the executor's command fields, the two SipHash states and the Chien search's")
    w("  locator registers as the most overused nets: the next candidates.  Placement-blind,")
    w("  `python -m boards.depth` (docs/ftl.md, \"Timing on an FPGA\") puts the SoC's worst register input at")
    w("  18 ns after the cuts (41 ns before: register slices between the core's blocks, both bus ports behind")
    w("  registers, registers between each memory read or compare and the decision behind it, no L2 cache);")
    w("  with `--placed` the late paths are short in LUTs and long in wire: nets between blocks placed far")
    w("  apart cross half the die (on the ULX3S each NAND channel's and the executor's registers span most")
    w("  of its width).  The block RAMs are not what spreads it: the same")
    w("  netlist with the firmware ROM cut to 8 KiB (68 block RAMs fewer) placed at 26.5 MHz.")
    w("* Yosys runs `synth_ecp5` without its final `autoname` step (the WebAssembly Yosys runs out of memory")
    w("  there on this design), so cell names in nextpnr's reports are Yosys' internal ones; the critical")
    w("  paths below are given by their named nets and source lines instead.")
    w("")
    # figures
    w("## Resources and timing")
    w("")
    w("### Controller core alone (one channel)")
    w("")
    w(f"`NandBridge` with one channel (what a board instantiates per channel: PHY, way scheduler, queues, page")
    w(f"buffer, CRC, BCH encoder/decoder, registers), Yosys `synth_ecp5` then nextpnr-ecp5 `--out-of-context` on an")
    w(f"LFE5U-25F, constrained to {CORE_TARGET_MHZ} MHz.  Per channel: a board with C channels uses C times the")
    w("channel logic (the bridge registers are shared and small).")
    w("")
    w("| configuration | LUT4 | FF | CCU2C | DP16KD | MULT18X18D | LUTRAM | Fmax (MHz) | target | result | margin | synth + P&R s |")
    w("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- | --- | ---: |")
    for key, c in data["core"].items():
        r = c["res"]
        for row in fmt_clocks(c["clocks"]) or ["- | - | - | -"]:
            fmax, target, res, margin = [x.strip() for x in row.split("|")[1:5]]
            w(f"| {c['profile']}, {c['ways']} ways, {c['slots']} slots, ECC {'on' if c['ecc'] else 'off'} "
              f"| {r['LUT4']} | {r['FF']} | {r['CCU2C']} | {r['DP16KD']} | {r['MULT18X18D']} | {r['LUTRAM']} "
              f"| {fmax} | {target} | {res} | {margin} | {c['total_s']} |")
    for key, c in data["core"].items():
        for p in c.get("critical", [])[:1]:
            w("")
            w(f"Critical path ({key}): {p['delay']} ns, {p['logic_levels']} cells, through "
              + (", ".join(f"`{n}`" for n in p.get("nets", [])) or f"`{p['start']}` -> `{p['end']}`")
              + (f" (sources: {', '.join(p.get('sources', [])[:4])})" if p.get("sources") else "") + ".")
    w("")
    w("### Full SoC per board")
    w("")
    w("Place and route of the whole bitstream (`make bitstream`), nextpnr-ecp5 timing after routing.  "
      "LUT4/FF from Yosys; the rest from nextpnr's utilisation report (used / available).")
    w("")
    w("| board | FPGA | core | NAND | clock | LUT4 | FF | TRELLIS_COMB | DP16KD | MULT18X18D | IO | build | build s |")
    w("| --- | --- | --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- | ---: |")
    for key, b in data["boards"].items():
        r = b.get("res", {})
        u = b.get("utilization", {})
        nand = (f"{b.get('CONFIG_AF_CHANNELS', '?')}x{b.get('CONFIG_AF_WAYS', '?')}, "
                f"{b.get('profile', '?')}, {b.get('CONFIG_AF_SLOTS', '?')} slots")
        clk = b.get("CONFIG_CLOCK_FREQUENCY")
        w(f"| {key} | {b['fpga']} | {b.get('core', 'nand')} | {nand} | {clk / 1e6 if clk else '?'} MHz | {r.get('LUT4', '-')} "
          f"| {r.get('FF', '-')} | {util(u, 'TRELLIS_COMB')} | {util(u, 'DP16KD')} | {util(u, 'MULT18X18D')} "
          f"| {util(u, 'TRELLIS_IO')} | {build_state(b)} | {b.get('seconds') or '-'} |")
    w("")
    w("| board | clock domain | Fmax (MHz) | constraint (MHz) | result | margin |")
    w("| --- | --- | ---: | ---: | --- | --- |")
    for key, b in data["boards"].items():
        for row in fmt_clocks(b.get("clocks", {})):
            w(f"| {key} | {row} |")
    for key, b in data["boards"].items():
        if b.get("utilization") and not b.get("routed", True):
            w("")
            est = ", ".join(f"`{clk}` {c['fmax']:.1f} MHz ({'PASS' if c['ok'] else 'FAIL'} at {c['target']:.1f})"
                            for clk, c in sorted(b.get("placed_clocks", {}).items())) or "none in the log"
            w(f"**{key} is placed but not routed.**  nextpnr-ecp5 (YoWASP, one thread) placed it; router2 had "
              f"{b.get('overused') if b.get('overused') is not None else '?'} overused wires left after "
              f"{b.get('router_iters') or 0} iterations when the log was collected, so there is no Fmax after "
              f"routing.  The placer's timing estimate: {est}.")
    for key, b in data["boards"].items():
        for p in b.get("critical", [])[:1]:
            w("")
            w(f"Critical path ({key}, `{p['clock']}`): {p['delay']} ns, {p['logic_levels']} cells, through "
              + (", ".join(f"`{n}`" for n in p.get("nets", [])) or f"`{p['start']}` -> `{p['end']}`")
              + (f" (sources: {', '.join(p.get('sources', [])[:4])})" if p.get("sources") else "") + ".")
    allnets = [n for part in (data["core"], data["boards"]) for e in part.values()
               for p in e.get("critical", [])[:1] for n in p.get("nets", [])]
    if any(n.endswith(("]",)) and (".n_par[" in n or ".n_cw[" in n) for n in allnets):
        w("")
        w("**Where the time goes.**  Every critical path above is the same one, inside the channel")
        w("(`rtl/nand/channel.py`, the derived values of the descriptor being worked on): the descriptor register")
        w("`d` -> `d_end = column + length` and `cw_first`/`cw_end` (carry chains and comparisons against the page")
        w("size) -> `n_cw = cw_end - cw_first` -> `n_par = n_cw * P` (a MULT18X18D, ~4 ns on its own) -> the")
        w("parity column / byte-count muxes -> a flip-flop: all combinational from `d` in one cycle.  These values")
        w("only change when a new descriptor is loaded, so registering them (one cycle after `d` is loaded, before")
        w("the first bus operation that uses them) removes the path at no throughput cost; `n_par` and `pcol` are")
        w("also cheaper as shift-and-add or a small table than a multiplier.  The next paths then decide the")
        w("clock; with this one gone both the 60 MHz board target and the 100 MHz core target look within reach,")
        w("but that is for the next measurement to show.")
    w("")
    return "\n".join(L) + "\n"


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--boards", default=DEFAULT_BOARDS, help=f"comma list of {', '.join(BOARDS)}")
    ap.add_argument("--no-core", action="store_true", help="skip the controller-core-alone part")
    ap.add_argument("--no-boards", action="store_true", help="skip the board builds")
    ap.add_argument("--render-only", action="store_true", help="only rewrite docs/results/boards.md from report.json")
    ap.add_argument("--collect-only", action="store_true",
                    help="re-read existing board build logs instead of building")
    ap.add_argument("--seed", type=int, default=1, help="nextpnr placement seed")
    ap.add_argument("--jobs", type=int, default=2, help="board builds at once (each takes one core)")
    ap.add_argument("board_args", nargs="*", help="extra arguments for every board target (after --)")
    args = ap.parse_args(argv)
    data = load()
    if not args.render_only:
        if not args.no_core:
            run_core(data, args.seed)
        if not args.no_boards:
            # each build is one thread (YoWASP's Yosys and nextpnr): --jobs builds at once
            from concurrent.futures import ThreadPoolExecutor

            with ThreadPoolExecutor(max(1, args.jobs)) as pool:
                for f in [pool.submit(run_board, data, key, not args.collect_only, args.seed, args.board_args)
                          for key in args.boards.split(",")]:
                    f.result()
    DOC.write_text(render(data))
    print(f"wrote {DOC}")


if __name__ == "__main__":
    main()
