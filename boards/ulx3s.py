#!/usr/bin/env python3
"""atomflash on the Radiona ULX3S (Lattice ECP5 LFE5U-12F/25F/45F/85F).

    python boards/ulx3s.py                               # SoC headers + firmware only (85F, --core ftl)
    python boards/ulx3s.py --build                       # + bitstream
    python boards/ulx3s.py --device LFE5U-45F --core nand --build
    make bitstream BOARD=ulx3s [BOARD_ARGS="--device LFE5U-45F --core nand --sys-clk-freq 60e6"]

litex-boards' ``radiona_ulx3s`` target supplies the CRG (25 MHz -> ECP5 PLL)
and the 32 MiB SDR SDRAM (main RAM); atomflash adds the firmware ROM, the
controller windows, the NAND channels on the GP/GN header pins (channel 0 on
J1, channel 1 on J2; see docs/results/boards.md) and the LEDs.

``--core ftl`` (the default; LFE5U-85F only): the whole SSD, the simulated
SoC's FTL core with host memory in the SDRAM; the FT231X USB-UART (FPGA L4
TX / M1 RX, 115200 8N1 unless ``--uart-baudrate``) carries LiteX's UARTBone
(the host port, through ``litex_server``) with the console as a crossover
UART behind it.  ``--core nand``: the NAND controller alone, console on the
UART as the litex-boards target uses it.  LEDs: LED0 = NAND activity, LED1 = fault
(latched until the firmware clears it).
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from litex_boards.platforms import radiona_ulx3s as platform_mod  # noqa: E402
from litex_boards.targets import radiona_ulx3s as target_mod  # noqa: E402

from soc.atomflash_soc import DEFAULT_SLOTS  # noqa: E402
from boards.common import (BUILD, FirmwareROM, HeaderPin, PinPlan, add_atomflash_board,  # noqa: E402
                           add_board_args, base_soc_kwargs, board_slots, build, check_fits)

BOARD = "ulx3s"
DEFAULT_SYS_CLK = 50e6   # the whole SSD's target (the NAND controller alone, --core nand, meets 60 MHz)
DEFAULT_DEVICE = "LFE5U-85F"

# GP/GN header pins -> FPGA balls (ULX3S v2.x/v3.0 constraint file).  gp/gn 11-13
# are shared with the ESP32 and gp/gn 14-17 with the ADC inputs: used last.
_GP = {0: "B11", 1: "A10", 2: "A9", 3: "B9", 4: "A7", 5: "C8", 6: "C6", 7: "A6", 8: "A4", 9: "A2",
       10: "C4", 14: "U18", 15: "N17", 16: "N16", 17: "L16", 18: "H18", 19: "F17", 20: "D18",
       21: "C18", 22: "B15", 23: "B17", 24: "C16", 25: "D14", 26: "B13", 27: "D13"}
_GN = {0: "C11", 1: "A11", 2: "B10", 3: "C10", 4: "A8", 5: "B8", 6: "C7", 7: "B6", 8: "A5", 9: "B1",
       10: "B4", 14: "U17", 15: "P16", 16: "M17", 17: "L17", 18: "H17", 19: "G18", 20: "E17",
       21: "D17", 22: "C15", 23: "C17", 24: "D16", 25: "E14", 26: "C13", 27: "E13"}


def _pins(names: list[str]) -> list[HeaderPin]:
    out = []
    for n in names:
        kind, num = n[:2], int(n[2:])
        ball = (_GP if kind == "gp" else _GN)[num]
        header = "J1" if num <= 13 else "J2"
        out.append(HeaderPin(label=n.upper(), ball=ball, where=f"{n.upper()} ({header})"))
    return out


def _pairs(nums) -> list[str]:
    return [f"{k}{n}" for n in nums for k in ("gp", "gn")]


PLAN = PinPlan(
    board=BOARD,
    channels=[
        _pins(_pairs(range(0, 11))),              # J1: GP/GN0-10 (22 pins)
        _pins(_pairs(range(18, 28)) + _pairs([14])),  # J2: GP/GN18-27, then GP/GN14 (22 pins)
    ],
    notes=["J1/J2 pins 1-2 are 3.3 V, 3-4 GND (ULX3S silkscreen names GPn/GNn)."],
)


class AtomflashULX3S(FirmwareROM, target_mod.BaseSoC):
    def __init__(self, *, device=DEFAULT_DEVICE, revision="2.0", sdram_module="MT48LC16M16",
                 sys_clk_freq=DEFAULT_SYS_CLK, profile="realistic", channels=2, ways=2, slots=DEFAULT_SLOTS, ecc=True,
                 sample=1, core="ftl", host_queues=1, out_dir: Path, **kwargs):
        check_fits("ulx3s", device, core)
        kw = dict(base_soc_kwargs(core), **kwargs)
        target_mod.BaseSoC.__init__(self, device=device, revision=revision, sys_clk_freq=sys_clk_freq,
                                    sdram_module_cls=sdram_module, with_led_chaser=False, **kw)
        add_atomflash_board(self, plan=PLAN, profile=profile, channels=channels, ways=ways, slots=slots,
                            ecc=ecc, sys_clk_freq=sys_clk_freq, sample=sample,
                            led_pads=self.platform.request("user_led", 0),
                            led_fault_pads=self.platform.request("user_led", 1), out_dir=out_dir,
                            core=core, host_queues=host_queues)


def main(argv=None):
    from litex.build.parser import LiteXArgumentParser

    parser = LiteXArgumentParser(platform=platform_mod.Platform, description=__doc__.splitlines()[0])
    parser.add_target_argument("--device", default=DEFAULT_DEVICE,
                               help="FPGA device (LFE5U-12F, LFE5U-25F, LFE5U-45F or LFE5U-85F).")
    parser.add_target_argument("--revision", default="2.0", help="Board revision (2.0 or 1.7).")
    parser.add_target_argument("--sdram-module", default="MT48LC16M16",
                               help="SDRAM module (MT48LC16M16, AS4C32M16 or AS4C16M16).")
    add_board_args(parser, default_clk=DEFAULT_SYS_CLK)
    args = parser.parse_args(argv)
    out = Path(args.output_dir) if args.output_dir else BUILD / f"{BOARD}_{args.device.lower()}"
    soc = AtomflashULX3S(
        device=args.device, revision=args.revision, sdram_module=args.sdram_module,
        sys_clk_freq=args.sys_clk_freq, profile=args.nand_profile, channels=args.channels, ways=args.ways,
        slots=board_slots(args), ecc=not args.no_ecc, sample=args.dq_sample, core=args.core,
        host_queues=args.host_queues, uart_baudrate=int(args.uart_baudrate), out_dir=out)
    build(soc, args, board=f"{BOARD}_{args.device.lower()}")


if __name__ == "__main__":
    main()
