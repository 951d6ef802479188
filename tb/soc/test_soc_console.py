"""System test: boot the atomflash SoC in Verilator and talk to its console.

One build (``soc/sim.py --build-only``: cached in build/soc/sim, a no-op when
nothing changed) and one boot for the whole module; the tests below are a
scripted dialogue over a pty, in order, on that one simulator.  All of them run
on one xdist worker (``xdist_group``).  The NAND models get fresh images of
two blocks per target (the boot scans every page: a small device boots in a
few seconds); tb/soc/test_soc_nand.py tests the NAND path on a written device.
"""

from __future__ import annotations

import re

import pytest

from atomflash import spec

from .simboot import CLK_HZ, ROOT, TARGETS, boot, build, model_configs

from soc import placeholder  # noqa: E402  (simboot put the repository root on sys.path)

pytestmark = pytest.mark.xdist_group("soc_sim")

BLOCKS_PER_LUN = 2


def registered_commands() -> set[str]:
    """Every AF_COMMAND(name, ...) in firmware/*.c (the console's table)."""
    names = set()
    for c in (ROOT / "firmware").glob("*.c"):
        names |= set(re.findall(r"^\s*AF_COMMAND\(\s*(\w+)\s*,", c.read_text(), re.M))
    return names


@pytest.fixture(scope="module")
def con(tmp_path_factory):
    t_build = build()
    run_dir = tmp_path_factory.mktemp("soc_console")
    cfgs = model_configs(run_dir, profile="small", targets=TARGETS, clk_hz=CLK_HZ,
                         overrides=dict(blocks_per_lun=BLOCKS_PER_LUN))
    console = boot(run_dir, cfgs, log=ROOT / "build" / "soc" / "test_console.log", timeout=120)
    try:
        console.build_wall = t_build
        yield console
    finally:
        console.stop()


def test_boot_report(con):
    text = con.boot_text
    assert "atomflash firmware" in text
    assert f"spec {spec.SPEC_VERSION}" in text
    m = re.search(r"boot: (\d+) cycles", text)
    assert m and int(m.group(1)) > 0
    assert "identify placeholder" in text  # the host interface is not built yet
    assert f"{BLOCKS_PER_LUN} blocks/LUN" in text  # geometry from the models' parameter pages
    assert "recovery: 0 LBAs bound" in text  # fresh images


def test_help_lists_every_command(con):
    out = con.command("help")
    listed = set(re.findall(r"^  (\w+)", out, re.M))
    expected = registered_commands()
    assert {"help", "info", "stats", "nand", "bbt", "map", "block", "selftest", "exit"} <= expected
    assert listed == expected, f"help lists {sorted(listed)}, firmware registers {sorted(expected)}"
    out = con.command("help nand")
    assert "nand id" in out


def parse_identify(out: str) -> dict[str, int]:
    section = out.split("identify (read from the controller", 1)[1].split("spec limits", 1)[0]
    fields = {}
    for name, value in re.findall(r"^  (\w+)\s+(0x[0-9a-f]+|\d+)", section, re.M):
        fields[name] = int(value, 0)
    return fields


def test_info_shows_identify_from_hardware(con):
    out = con.command("info")
    assert "error" not in out
    assert f"sys clock    {spec.NAND_CLK_HZ} Hz" in out
    fields = parse_identify(out)
    # What the Amaranth block was elaborated with ...
    want = spec.IDENTIFY.unpack(spec.IDENTIFY.pack(placeholder.identify_fields()))
    for name, value in fields.items():
        assert value == getattr(want, name), f"IDENTIFY.{name}: console {value}, block {getattr(want, name)}"
    # ... and, independently, the spec's own values.
    assert fields["magic"] == spec.IDENTIFY_MAGIC
    assert fields["spec_version"] == spec.SPEC_VERSION
    lim = spec.LIMITS
    assert fields["max_transfer"] == lim.MAX_TRANSFER
    assert fields["max_atomic_pages"] == lim.MAX_ATOMIC_PAGES
    assert fields["max_open_tx"] == lim.MAX_OPEN_TX
    assert fields["max_pending"] == lim.MAX_PENDING
    assert fields["max_remap_triples"] == lim.MAX_REMAP_TRIPLES
    assert fields["queue_depth"] == lim.QUEUE_DEPTH
    assert fields["channels"] == 0 and fields["capacity"] == 0  # no NAND: nothing faked
    assert len(fields) >= 20
    assert "(ok)" in out.split("magic", 1)[1].splitlines()[0]


def test_bad_command_and_bad_arguments(con):
    assert "error: unknown command 'frobnicate'" in con.command("frobnicate 1 2")
    assert "error: usage: stats" in con.command("stats now")
    assert "error: usage: nand id|status|reset|read" in con.command("nand")
    assert "error: usage: nand id|status|reset|read" in con.command("nand erase")
    assert "error: unknown command 'nosuch'" in con.command("help nosuch")
    assert con.command("") == ""  # empty line: just a new prompt


def test_fresh_flash_maps_nothing(con):
    assert "lba 0: unbound" in con.command("map 0")
    out = con.command("block 0")
    assert "free, 0 of" in out and "0 valid" in out
    assert "0 bad blocks" in con.command("bbt")


def test_selftest_exercises_slave_and_dma(con):
    out = con.command("selftest")
    assert "ctrl scratch   pass" in out
    assert "ctrl dma       pass" in out
    assert "main ram       pass" in out
    assert f"nand status    pass ({TARGETS} targets ready)" in out
    assert "selftest: pass" in out


def test_stats_counters(con):
    a = con.command("stats")
    b = con.command("stats")
    up = [int(re.search(r"uptime_cycles\s+(\d+)", x).group(1)) for x in (a, b)]
    assert up[1] > up[0]
    assert int(re.search(r"ctrl_dma_copies\s+(\d+)", b).group(1)) >= 1  # selftest ran the DMA
    assert int(re.search(r"console_errors\s+(\d+)", b).group(1)) >= 4
    assert int(re.search(r"boot_pages_scanned\s+(\d+)", b).group(1)) == TARGETS * BLOCKS_PER_LUN * spec.NAND_PROFILES["small"].pages_per_block


def test_exit_ends_simulation(con):
    con.send("exit\r")
    con.expect("simulation finished", timeout=30)
    assert con.proc.wait(timeout=30) == 0
