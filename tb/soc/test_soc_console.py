"""System test: boot the atomflash SoC in Verilator and talk to its console.

The SoC's controller is the FTL core (soc/ftl_bridge.py); the firmware hands
it the device after recovery, and the console's ``io`` command is a host on
the core's last queue pair, so these tests also drive host commands end to
end: fetch, validation, programs through the log writer, reads, the map.

One build (``soc/sim.py --build-only``: cached in build/soc/sim, a no-op when
nothing changed) and one boot for the whole module; the tests below are a
scripted dialogue over a pty, in order, on that one simulator.  All of them run
on one xdist worker (``xdist_group``).  The NAND models get fresh images of
four blocks per target (the boot scans every page: a small device boots in a
few seconds); tb/soc/test_soc_nand.py tests the NAND path on a written device.
"""

from __future__ import annotations

import re

import pytest

from atomflash import spec

from sim.simboot import CLK_HZ, ROOT, TARGETS, boot, build, ftl_capacity, ftl_pending_budget, model_configs

pytestmark = [pytest.mark.soc, pytest.mark.xdist_group("soc_console")]   # the module's booted SoC

BLOCKS_PER_LUN = 4
PROFILE = spec.NAND_PROFILES["small"]
CAPACITY = ftl_capacity(BLOCKS_PER_LUN)


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
    assert f"ftl: host interface on: capacity {CAPACITY} LBAs of {PROFILE.page_data} B" in text
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
    section = out.split("identify (the record IDENTIFY returns", 1)[1].split("spec limits", 1)[0]
    fields = {}
    for name, value in re.findall(r"^  (\w+)\s+(0x[0-9a-f]+|\d+)", section, re.M):
        fields[name] = int(value, 0)
    return fields


def test_info_shows_identify_from_hardware(con):
    out = con.command("info")
    assert "error" not in out
    assert f"sys clock    {spec.NAND_CLK_HZ} Hz" in out
    fields = parse_identify(out)
    lim = spec.LIMITS
    want = dict(magic=spec.IDENTIFY_MAGIC, spec_version=spec.SPEC_VERSION, capacity=CAPACITY,
                lba_size=PROFILE.page_data, max_transfer=lim.MAX_TRANSFER, max_atomic_pages=lim.MAX_ATOMIC_PAGES,
                max_open_tx=lim.MAX_OPEN_TX, max_pending=ftl_pending_budget(BLOCKS_PER_LUN),
                max_remap_triples=lim.MAX_REMAP_TRIPLES,
                max_appends=lim.MAX_APPENDS,
                awupf=lim.MAX_ATOMIC_PAGES, volatile_cache=lim.CACHE_PAGES * PROFILE.page_data, channels=2, ways=2, luns=1,
                page_data=PROFILE.page_data, page_spare=PROFILE.page_spare, pages_per_block=PROFILE.pages_per_block,
                blocks_per_lun=BLOCKS_PER_LUN, queue_depth=lim.QUEUE_DEPTH, ecc_t=spec.ECC.t,
                ecc_codeword=spec.ECC.codeword)
    for name, value in want.items():
        assert fields[name] == value, f"IDENTIFY.{name}: console {fields[name]}, expected {value}"
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
    out = con.command("map 0")
    assert "lba 0: unbound" in out and "  now: unbound" in out
    out = con.command("block 0")       # the first good blocks of target 0 hold the anchor's records
    assert re.search(r"^block 0 \(ch 0 way 0 lun 0 block 0\): anchor \(boot records; the next in block [01], "
                     r"page \d+ of \d+\), \d+ erases$", out, re.M), out
    out = con.command(f"block {BLOCKS_PER_LUN}")  # target 1's first: the core's
    assert "the FTL core's (open or queued), 0 of" in out and "0 valid" in out
    assert "0 bad blocks" in con.command("bbt")
    last = TARGETS * BLOCKS_PER_LUN - 1
    for cmd in ("block", "nand test"):   # a block number past the device or not a number: a specific error
        assert f"error: block {last + 1} out of range (0..{last})" in con.command(f"{cmd} {last + 1}")
        assert "error: usage: " in con.command(f"{cmd} x")


def test_selftest_exercises_slave_and_dma(con):
    out = con.command("selftest")
    assert "ctrl register  pass" in out
    assert "ctrl identify  pass (IDENTIFY command: status 0" in out
    assert "ctrl map port  pass (lba 0 -> 0xffffffff)" in out
    assert "main ram       pass" in out
    assert f"nand status    pass ({TARGETS} targets ready)" in out
    # an address no slave decodes: the bus timeout ends the read (all ones) and counts it, the CPU goes on
    m = re.search(r"bus timeout    pass \(0xb0000000, no slave: 0xffffffff after (\d+) cycles; bus_errors 0 -> 1\)", out)
    assert m, out
    assert int(m.group(1)) < 2 * (1 << 17)
    assert "selftest: pass" in out


def test_stats_counters(con):
    a = con.command("stats")
    b = con.command("stats")
    up = [int(re.search(r"uptime_cycles\s+(\d+)", x).group(1)) for x in (a, b)]
    assert up[1] > up[0]
    assert int(re.search(r"map_cache_hits\s+(\d+)", b).group(1)) + \
        int(re.search(r"map_cache_misses\s+(\d+)", b).group(1)) >= 1  # selftest read the map
    to_core, free = (int(re.search(rf"{k}\s+(\d+)", b).group(1)) for k in ("blocks_to_core", "blocks_free"))
    # every good block but the anchor's (every die has one; GC's reserve)
    assert to_core + free == TARGETS * BLOCKS_PER_LUN - spec.ANCHOR.BLOCKS and to_core >= TARGETS
    assert int(re.search(r"console_errors\s+(\d+)", b).group(1)) >= 4
    assert int(re.search(r"bus_errors\s+(\d+)", b).group(1)) == 1  # the selftest's probe, nothing else
    assert int(re.search(r"boot_pages_scanned\s+(\d+)", b).group(1)) == 0  # fresh: every page 0 erased, no block read on


def test_host_commands_through_the_firmware_queue(con):
    """WRITE, READ, ATOMIC_WRITE, DEALLOCATE and FLUSH through the core, from the console,
    and the activity counters `stats` shows for them."""

    def counters():
        out = con.command("stats")
        return {k: int(v) for k, v in re.findall(r"^(host_\w+|record_pages|nand_\w+)\s+(\d+)", out, re.M)}

    before = counters()
    assert "wrote 4 blocks at lba 10 (seed 7)" in con.command("io write 7 10 4")
    assert "check 4 blocks at lba 10 (seed 7): pass" in con.command("io check 7 10 4")
    after = counters()
    delta = {k: after[k] - before[k] for k in before}
    assert delta["host_write_pages"] == 4 and delta["host_read_pages"] == 4 and delta["record_pages"] == 0, delta
    # the write cache holds them (below its watermark) and answers the reads: no flash touched yet
    assert delta["nand_programs"] == 0 and delta["nand_reads"] == 0, delta
    assert "flushed" in con.command("io flush")
    assert "check 4 blocks at lba 10 (seed 7): pass" in con.command("io check 7 10 4")
    delta = {k: v - before[k] for k, v in counters().items()}
    assert delta["nand_programs"] == 4 and delta["nand_reads"] >= 4 and delta["nand_erases"] == 0, delta
    assert "FAIL" in con.command("io check 8 10 1")          # a different pattern: the check can fail
    assert "wrote an atomic group of 3 blocks (seed 9)" in con.command("io atomic 9 11 40 3")
    for lba in (11, 40, 3):
        assert "pass" in con.command(f"io check 9 {lba}")
    assert "pass" in con.command("io check 7 10")             # the group left lba 10 alone
    assert "trimmed 1 blocks at lba 40" in con.command("io trim 40")
    assert "pass" in con.command("io check 0 40")             # trimmed: zeros
    assert "flushed" in con.command("io flush")
    out = con.command("stats")
    assert counters()["record_pages"] == before["record_pages"] + 1           # the TRIM record
    assert re.search(r"^write_amp\s+\d+\.\d\d$", out, re.M), out
    out = con.command("map 11")
    assert re.search(r"  now: ppa 0x[0-9a-f]{8} \(ch \d way \d lun 0 block \d+ page \d+\)", out), out


def test_host_command_errors(con):
    out = con.command(f"io write 1 {CAPACITY - 1} 2")
    assert "error: write: status 0x03 LBA_OUT_OF_RANGE" in out
    assert "pass" in con.command(f"io check 0 {CAPACITY - 1}")  # nothing written
    assert "DUPLICATE_LBA" in con.command("io atomic 5 20 21 20")
    assert "pass" in con.command("io check 0 20 2")
    assert "error: count must be 1..8" in con.command("io write 1 0 9")
    assert "error: usage: io" in con.command("io write 1")
    assert "error: unknown io operation 'erase'" in con.command("io erase 1")


def test_idle_output_does_not_break_the_line_being_typed(con):
    """Background GC prints (trace on) while a line is half typed: the message gets lines of its
    own, the prompt and the partial line are drawn again, and the finished line runs as typed."""
    assert "foreground below 1, background below 1" in con.command("gc thresholds 1 1")  # keep the dirty blocks
    # enough writes to close blocks though the write cache coalesces most of them
    assert "random: 900 writes" in con.command("io random 9 900 24", timeout=240)
    assert "gc trace on" in con.command("gc trace")
    erased = int(re.search(r"queued in the core: (\d+);", con.command("gc")).group(1))
    con.command(f"gc thresholds 1 {erased + 1}")     # background GC whenever the console is quiet
    con.expect(r"gc: victim \d+", timeout=60)      # it runs from the idle loop, a victim per step
    before = len(con.transcript)
    con.send("inf")
    con.expect(r"gc: victim \d+", timeout=60)      # the next step: it prints over "atomflash> inf"
    con.send("o\r")                                  # completes "info"
    out = con.output_of("info")
    assert "spec_version" in out and "error" not in out, out
    shown = con.transcript[before:].split("\n")
    assert any(line.startswith("gc: victim") for line in shown), shown
    assert "atomflash> info" in shown, shown          # the line as typed, whole, after the last message
    assert "gc trace off" in con.command("gc trace")
    assert "0 wrong: pass" in con.command("io verify 9 900 24", timeout=240)
    # replaying only the first 450 writes expects older data on the LBAs rewritten since: the (pipelined)
    # verify must name them
    out = con.command("io verify 9 450 24", timeout=120)
    m = re.search(r"verify: (\d+) LBAs checked, (\d+) wrong: FAIL", out)
    assert m and 0 < int(m.group(2)) <= int(m.group(1)), out
    assert re.search(r"^lba \d+: word 0 0x[0-9a-f]{8}, expected 0x[0-9a-f]{8}", out, re.M), out


def test_exit_ends_simulation(con):
    con.send("exit\r")
    con.expect("simulation finished", timeout=30)
    assert con.proc.wait(timeout=30) == 0
