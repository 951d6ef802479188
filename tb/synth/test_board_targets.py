"""Board targets with the whole controller (``--core ftl``): the SoC a board
build generates, checked without place and route.

One ULX3S (LFE5U-85F) SoC is generated as ``make bitstream`` would, up to the
Verilog and the firmware (about a minute: LiteX's libraries and the firmware
are compiled): the FTL core sits at ``AFCTRL_BASE`` (the simulated SoC's
core), host memory is a slice of the SDRAM on a LiteDRAM port of its own and
main RAM ends below it, the host port is UARTBone with the console a
crossover UART behind it, every master has a bus timeout, and the firmware
(with liblitedram's ``sdram_init``) fits the ROM.  ``make board-report``
places and routes it.

Configurations a board cannot hold are refused before anything is built.
"""

from __future__ import annotations

import csv
import re
import subprocess
import sys
from pathlib import Path

import pytest

from soc.atomflash_soc import HOSTMEM_ORIGIN, hostmem_bytes

ROOT = Path(__file__).resolve().parents[2]
ULX3S = [sys.executable, str(ROOT / "boards" / "ulx3s.py")]
SDRAM_BYTES = 32 << 20  # the ULX3S's MT48LC16M16
pytestmark = pytest.mark.xdist_group("board_ulx3s")   # one generated SoC for the module


def _regions(csr_csv: Path) -> dict[str, tuple[int, int, str]]:
    with open(csr_csv, newline="") as f:
        return {r[1]: (int(r[2], 0), int(r[3]), r[4]) for r in csv.reader(f) if r and r[0] == "memory_region"}


@pytest.fixture(scope="module")
def ulx3s_ftl(tmp_path_factory):
    out = tmp_path_factory.mktemp("ulx3s_ftl")
    r = subprocess.run([*ULX3S, "--device", "LFE5U-85F", "--output-dir", str(out)], capture_output=True,
                       text=True, timeout=900, stdin=subprocess.DEVNULL)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    return out, r.stdout + r.stderr


@pytest.mark.long
def test_ftl_core_host_memory_and_ports(ulx3s_ftl):
    out, log = ulx3s_ftl
    regions = _regions(out / "csr.csv")
    host = hostmem_bytes("realistic", 1)
    assert regions["hostmem"] == (HOSTMEM_ORIGIN, host, "io"), regions
    assert regions["afctrl"][2] == "io", regions
    # main RAM: the SDRAM below host memory (what the firmware allocates its tables in)
    assert regions["main_ram"][1] == SDRAM_BYTES - host, regions
    mem_h = (out / "software" / "include" / "generated" / "mem.h").read_text()
    assert f"#define MAIN_RAM_SIZE 0x{SDRAM_BYTES - host:08x}" in mem_h, mem_h
    soc_h = (out / "software" / "include" / "generated" / "soc.h").read_text()
    assert "#define AFCTRL_FTL" in soc_h and "#define BUS_UNMAPPED_PROBE" in soc_h, soc_h
    assert "#define CSR_SDRAM_BASE" in (out / "software" / "include" / "generated" / "csr.h").read_text()
    # host port: UARTBone as a bus master, the console a crossover UART; every master timed out
    for master in ("uartbone", "afctrl_dma", "cpu_bus0"):
        assert f"{master}_timeout (MasterTimeout)" in log, f"{master} has no bus timeout\n{log[-3000:]}"
    assert "uart (UARTCrossover)" in log
    assert re.search(r"Interconnect: Crossbar", log)
    top = (out / "gateware" / "radiona_ulx3s.v").read_text()
    assert "af_ftl_bridge" in top and "hostmem" in top
    # the core's reset from a global network's buffer (its ~20 k flip-flops), not the fabric's routing
    dcca = re.search(r"DCCA \w+\(.*?\.CLKI\s*\(sys_rst\).*?\.CLKO\s*\((\w+)\)", top, re.S)
    assert dcca and re.search(rf"\.rst\s*\({dcca.group(1)}\)", top), "the core's reset is not on a DCCA"


def test_firmware_has_sdram_init_and_fits_the_rom(ulx3s_ftl):
    out, _ = ulx3s_ftl
    fw = out / "software" / "firmware"
    rom = _regions(out / "csr.csv")["rom"][1]
    assert (fw / "firmware.bin").stat().st_size <= rom
    assert re.search(r"^\s+\.text\.sdram_init\b|\bsdram_init$", (fw / "firmware.elf.map").read_text(), re.M)


@pytest.mark.parametrize("args, message", [
    (["--device", "LFE5U-45F"], "--core ftl needs an LFE5U-85F"),
    (["--slots", "2"], "needs at least 4 page-buffer slots"),
    (["--no-ecc"], "always carry BCH ECC"),
])
def test_configurations_the_board_cannot_hold_are_refused(tmp_path, args, message):
    r = subprocess.run([*ULX3S, *args, "--output-dir", str(tmp_path)], capture_output=True, text=True,
                       timeout=600, stdin=subprocess.DEVNULL)
    assert r.returncode != 0 and message in r.stderr + r.stdout, r.stdout[-2000:] + r.stderr[-2000:]
    assert not (tmp_path / "gateware").exists()  # refused before anything was generated



ECPIX5 = [sys.executable, str(ROOT / "boards" / "ecpix5.py")]


@pytest.mark.long
@pytest.mark.xdist_group("board_ecpix5")
def test_ecpix5_carries_the_ssd_with_the_etherbone_host_link(tmp_path):
    """The Ethernet board: the same core and host memory (in its DDR3), and the host link the
    simulated SoC tests with ``--etherbone`` (soc/etherbone.py) on the board's RGMII PHY."""
    r = subprocess.run([*ECPIX5, "--output-dir", str(tmp_path)], capture_output=True, text=True, timeout=900,
                       stdin=subprocess.DEVNULL)
    log = r.stdout + r.stderr
    assert r.returncode == 0, log[-3000:]
    regions = _regions(tmp_path / "csr.csv")
    assert regions["hostmem"] == (HOSTMEM_ORIGIN, hostmem_bytes("realistic", 1), "io"), regions
    for master in ("etherbone", "uartbone", "afctrl_dma", "cpu_bus0"):
        assert f"{master}_timeout (MasterTimeout)" in log, f"{master} has no bus timeout\n{log[-3000:]}"
    soc_h = (tmp_path / "software" / "include" / "generated" / "soc.h").read_text()
    assert '#define AF_ETHERBONE_IP "192.168.1.50"' in soc_h and "#define AFCTRL_FTL" in soc_h
    csr = (tmp_path / "csr.csv").read_text()
    assert "ethrxbuf_dropped" in csr and "sdram" in csr
    top = (tmp_path / "gateware" / "lambdaconcept_ecpix5.v").read_text()
    assert "af_ftl_bridge" in top and "eth_rx_ctl" in top and "ODDRX1F" in top   # RGMII's DDR outputs
