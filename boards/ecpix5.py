#!/usr/bin/env python3
"""atomflash on the LambdaConcept ECPIX-5 (Lattice ECP5 LFE5UM5G-85F), the whole SSD with a Gigabit
Ethernet host link.

    python boards/ecpix5.py                              # SoC headers + firmware only
    python boards/ecpix5.py --build                      # + bitstream
    make bitstream BOARD=ecpix5 [BOARD_ARGS="--sys-clk-freq 60e6 --channels 1"]

litex-boards' ``lambdaconcept_ecpix5`` target supplies the CRG (100 MHz -> ECP5 PLL, sys and sys2x
for the DDR3 PHY) and the 512 MiB DDR3 (main RAM and host memory, through LiteDRAM's ECP5 PHY);
atomflash adds the firmware ROM, the FTL core (``--core ftl``, as in the simulated SoC), the NAND
channels on the Pmods and the LEDs, and the host link: LiteEth's RGMII PHY on the board's KSZ9031
with Etherbone as a host bus master (``soc/etherbone.py``: the simulated SoC's
``--etherbone`` link, tested there), answering at ``spec.ETHERBONE`` (192.168.1.50, UDP 1234):

    atomflash --board-csr build/boards/ecpix5/csr.csv --etherbone 192.168.1.50 identify

The USB-UART (FPGA R24 TX / R26 RX) carries the debug port (UARTBone, through ``litex_server``) with the
firmware console as a crossover UART behind it, as on the ULX3S.  LEDs: RGB LED 0 green = NAND
activity, red = fault.
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from litex_boards.platforms import lambdaconcept_ecpix5 as platform_mod  # noqa: E402
from litex_boards.targets import lambdaconcept_ecpix5 as target_mod  # noqa: E402
from migen import Signal  # noqa: E402

from soc.atomflash_soc import DEFAULT_SLOTS  # noqa: E402
from boards.common import (BUILD, FirmwareROM, HeaderPin, PinPlan, add_atomflash_board,  # noqa: E402
                           add_board_args, base_soc_kwargs, board_slots, build, check_fits)

BOARD = "ecpix5"
DEFAULT_SYS_CLK = 50e6   # routed with every clock met at 50 MHz (docs/results/boards.md)
DEFAULT_DEVICE = "85F"

_CONNECTORS = {name: pins.split() for name, pins in platform_mod._connectors}
_PMOD_PIN = [1, 2, 3, 4, 7, 8, 9, 10]  # litex connector index -> Pmod header pin number


def _pmod(conn: str, idx=range(8)) -> list[HeaderPin]:
    return [HeaderPin(label=f"{conn}:{i}", ball=_CONNECTORS[conn][i],
                      where=f"`{conn}:{i}` (Pmod pin {_PMOD_PIN[i]})") for i in idx]


PLAN = PinPlan(
    board=BOARD,
    channels=[
        # DQ0-7 on one Pmod, CLE ALE WE# RE# WP# CE0# R/B0# CE1# on the next, then more ways
        _pmod("pmod0") + _pmod("pmod1") + _pmod("pmod4", range(4)),
        _pmod("pmod2") + _pmod("pmod3") + _pmod("pmod4", range(4, 8)),
    ],
    notes=["ECPIX-5 Pmods P0-P7 are litex-boards' `pmod0`-`pmod7`; pin numbers follow the Pmod convention "
           "(1-4 and 7-10 signals, 5/11 GND, 6/12 3.3 V).  `pmod5`-`pmod7` stay free."],
)


class AtomflashECPIX5(FirmwareROM, target_mod.BaseSoC):
    def __init__(self, *, device=DEFAULT_DEVICE, sys_clk_freq=DEFAULT_SYS_CLK, profile="realistic", channels=2, ways=2,
                 slots=DEFAULT_SLOTS, ecc=True, sample=1, core="ftl", host_queues=1, out_dir: Path, **kwargs):
        check_fits("ecpix5", f"LFE5U-{device}", core)
        kw = dict(base_soc_kwargs(core), **kwargs)
        target_mod.BaseSoC.__init__(self, device=device, sys_clk_freq=sys_clk_freq, with_led_chaser=False,
                                    with_etherbone=False, with_ethernet=False, **kw)
        led = self.platform.request("rgb_led", 0)          # active low
        act, fault = Signal(), Signal()
        self.comb += [led.g.eq(~act), led.r.eq(~fault), led.b.eq(1)]
        add_atomflash_board(self, plan=PLAN, profile=profile, channels=channels, ways=ways, slots=slots,
                            ecc=ecc, sys_clk_freq=sys_clk_freq, sample=sample, led_pads=act, led_fault_pads=fault,
                            out_dir=out_dir, core=core, host_queues=host_queues)
        if core == "ftl":
            from liteeth.phy.ecp5rgmii import LiteEthPHYRGMII

            from soc.etherbone import add_etherbone_host

            self.ethphy = LiteEthPHYRGMII(clock_pads=self.platform.request("eth_clocks"),
                                          pads=self.platform.request("eth"), rx_delay=0e-9)
            add_etherbone_host(self, self.ethphy)


def main(argv=None):
    from litex.build.parser import LiteXArgumentParser

    parser = LiteXArgumentParser(platform=platform_mod.Platform, description=__doc__.splitlines()[0])
    parser.add_target_argument("--device", default=DEFAULT_DEVICE, choices=("45F", "85F"),
                               help="FPGA: LFE5UM5G-45F or -85F (--core ftl needs the 85F).")
    add_board_args(parser, default_clk=DEFAULT_SYS_CLK)
    args = parser.parse_args(argv)
    out = Path(args.output_dir) if args.output_dir else BUILD / BOARD
    soc = AtomflashECPIX5(
        device=args.device, sys_clk_freq=args.sys_clk_freq, profile=args.nand_profile, channels=args.channels,
        ways=args.ways, slots=board_slots(args), ecc=not args.no_ecc, sample=args.dq_sample, core=args.core,
        host_queues=args.host_queues, uart_baudrate=int(args.uart_baudrate), out_dir=out)
    build(soc, args, board=BOARD)


if __name__ == "__main__":
    main()
