"""System tests: a device out of space refuses writes with NO_SPACE instead of hanging, and keeps its data.

1. It wears out.

Every NAND model is given an endurance of two erases (``endurance``): each
block's third erase fails, so as random one-block writes keep GC collecting,
the firmware retires block after block.  The device must not hang: once the
good blocks left cannot hold the data stored plus GC's headroom, the firmware
sets ``ftl.host_enable.no_space`` and the core completes writes with
NO_SPACE (spec ``NoSpace.FULL``).  Then:

* every write acknowledged before is still there (``io verify``), and reads go on;
* a refused write changed nothing; a trim still works (it frees space);
* ``stats`` says why (``no_space FULL``) and how many good blocks are left;
* after a power cycle the boot finds the same state at once: NO_SPACE, data intact.

(An open transaction no longer pins the checkpoint floor: test_soc_liveness.py.)

2. Erase failures eat GC's reserve (campaign trial 6441): GC keeps one block
   for the commands in the core, so writes end in NO_SPACE, not in a hang.

3. No erase succeeds at all: the firmware sets ``ftl.host_enable.no_blocks``
   (the core completes what waits for a page NO_SPACE), and the data stays.

4. FULL first, then GC stuck with only its reserve: the reserve still goes
   to the core, so a host's trim in it completes (NO_SPACE once the last
   block is used), not waits for ever.
"""

from __future__ import annotations

import re

import pytest

from atomflash import simctl
from atomflash.device import Device
from atomflash.spec import Status

from sim.simboot import CLK_HZ, ROOT, TARGETS, boot, build, model_configs

pytestmark = pytest.mark.soc

BLOCKS_PER_LUN = 4
ENDURANCE = 2          # erases each block survives: the third fails
HOT = 40               # LBAs the writes hit (GC finds garbage at once)
SEED = 5
WRITES = 4000          # far more than the device survives
STOPPED_RE = re.compile(r"random: stopped after (\d+) writes")


def stat(text: str, name: str) -> str:
    m = re.search(rf"^{name}\s+(\S+)", text, re.M)
    assert m, f"no {name} in:\n{text}"
    return m.group(1)


@pytest.mark.long
def test_worn_out_device_refuses_writes_and_keeps_its_data(tmp_path):
    build()
    run_dir = tmp_path / "run"
    cfgs = model_configs(run_dir, profile="small", targets=TARGETS, clk_hz=CLK_HZ,
                         overrides=dict(blocks_per_lun=BLOCKS_PER_LUN, endurance=ENDURANCE))
    log = ROOT / "build" / "soc" / "test_nospace.log"
    con = boot(run_dir, cfgs, log=log, timeout=120)
    try:
        before = con.command("stats")
        assert stat(before, "no_space") == "NONE", before
        good0 = int(stat(before, "good_blocks"))
        assert "error" not in con.command("gc thresholds 10 12")   # GC (and so erases) early
        out = con.command(f"io random {SEED} {WRITES} {HOT}", timeout=1500)
        m = STOPPED_RE.search(out)
        assert m, f"the device never refused a write:\n{out[-3000:]}"
        acked = int(m.group(1))
        assert "status 0x11 NO_SPACE" in out, out[-3000:]
        assert "erase failed" in out and "out of space" in out, out[-3000:]
        stats = con.command("stats")
        assert stat(stats, "no_space") == "FULL", stats
        good = int(stat(stats, "good_blocks"))
        assert good < good0 and stat(stats, "spare_blocks") == "0", stats
        # nothing acknowledged lost; more writes refused, and they change nothing
        assert "0 wrong: pass" in con.command(f"io verify {SEED} {acked} {HOT}", timeout=300)
        assert "NO_SPACE" in con.command("io write 9 3 1")
        assert "NO_SPACE" in con.command("io tx write 4 9 3 1")
        assert "NO_SPACE" in con.command("io append 9 3 1")
        assert "0 wrong: pass" in con.command(f"io verify {SEED} {acked} {HOT}", timeout=300)
        # a trim goes on (a record page: it is how a host frees space)
        assert "error" not in con.command(f"io trim {HOT} 1")
        con.send("exit\r")
        con.expect("simulation finished", timeout=30)
    finally:
        con.stop()

    # a power cycle: the boot sees it at once, before the host interface comes up
    con = boot(run_dir, cfgs, log=log.with_name("test_nospace_restart.log"), timeout=300)
    try:
        assert "out of space" in con.boot_text, con.boot_text
        assert stat(con.command("stats"), "no_space") == "FULL"
        assert "0 wrong: pass" in con.command(f"io verify {SEED} {acked} {HOT}", timeout=300)
        assert "NO_SPACE" in con.command("io write 9 3 1")
    finally:
        con.stop()


# 3. Erase failures eat GC's reserve (campaign trial 6441)
BIG_BLOCKS_PER_LUN = 8       # trial 6441's geometry: 32 blocks, 1239 LBAs
SPREAD = 1000                # LBAs, most of them stored: GC's victims hold many pages to copy
BLOCK_RE = re.compile(r"^block (\d+) \(.*\): full, ", re.M)


@pytest.mark.slow      # ~10 min: make test-slow (the campaign's erase faults reach this path in make test rarely)
def test_erase_failures_that_eat_gcs_reserve_end_in_no_space_not_a_hang(tmp_path):
    """After a power cycle every full block fails its first erase: each GC victim's copies take pages
    and its erase retires it instead of freeing it.  GC must stop while the log writer still has a
    block for the commands in the core (new writes get NO_SPACE, those in flight finish); were it to
    copy on into the last pages, the next copy would wait for a page no erase would bring, and so
    would the write behind it (campaign trial 6441: the host's write never completed)."""
    build()
    run_dir = tmp_path / "run"
    overrides = dict(blocks_per_lun=BIG_BLOCKS_PER_LUN)
    cfgs = model_configs(run_dir, profile="small", targets=TARGETS, clk_hz=CLK_HZ, overrides=overrides)
    log = ROOT / "build" / "soc" / "test_nospace_reserve.log"
    con = boot(run_dir, cfgs, log=log, timeout=120)
    try:
        out = con.command(f"io random {SEED} 3000 {SPREAD}", timeout=900)
        assert "random: 3000 writes" in out and "error" not in out, out
        full = [int(g) for g in BLOCK_RE.findall("\n".join(
            con.command(f"block {g}") for g in range(TARGETS * BIG_BLOCKS_PER_LUN)))]
        assert len(full) >= 12, full
        con.send("exit\r")
        con.expect("simulation finished", timeout=30)
    finally:
        con.stop()

    failing = [[] for _ in range(TARGETS)]           # per target: "lun:block" of its full blocks
    for g in full:
        failing[g // BIG_BLOCKS_PER_LUN].append(f"0:{g % BIG_BLOCKS_PER_LUN}")
    per_target = [{"fail_erase": ",".join(f)} if f else {} for f in failing]
    cfgs = model_configs(run_dir, profile="small", targets=TARGETS, clk_hz=CLK_HZ, overrides=overrides,
                         per_target=per_target)
    con = boot(run_dir, cfgs, log=log.with_name("test_nospace_reserve2.log"), timeout=300)
    try:
        out = con.command(f"io random {SEED + 1} 2000 {SPREAD}", timeout=1500)
        assert "its erase failed" in out, out[-3000:]
        m = STOPPED_RE.search(out)
        assert m and "status 0x11 NO_SPACE" in out, f"the device never refused a write:\n{out[-3000:]}"
        # nothing waited for a page: not a copy (gc.c relocate), not a write (ftl.c reap)
        assert "no answer" not in out and "waits long" not in out, out[-3000:]
        acked = int(m.group(1))
        stats = con.command("stats")
        assert stat(stats, "no_space") in ("GC_STUCK", "FULL"), stats
        assert "0 wrong: pass" in con.command(f"io verify {SEED + 1} {acked} {SPREAD}", timeout=300)
        assert "NO_SPACE" in con.command("io write 9 3 1")
        assert "error" not in con.command(f"io trim {SPREAD} 1")       # a record still finds a page
    finally:
        con.stop()


# 4. No erase succeeds any more
@pytest.mark.long      # ~1 min: three short boots
def test_no_erase_succeeding_sets_no_blocks(tmp_path):
    """After a power cycle no erase succeeds: every block the pool offers is retired on its erase, the
    core gets no block at all and the device is out of space.  The firmware then sets
    ``ftl.host_enable.no_blocks`` (a command the core took before would otherwise wait for a page for
    ever: ``tb/ftl_core::no_page_completes_no_space`` drives that race in the core), writes complete
    NO_SPACE, the data stored reads back, across another power cycle too."""
    build()
    run_dir = tmp_path / "run"
    overrides = dict(blocks_per_lun=BLOCKS_PER_LUN)
    cfgs = model_configs(run_dir, profile="small", targets=TARGETS, clk_hz=CLK_HZ, overrides=overrides)
    log = ROOT / "build" / "soc" / "test_nospace_noerase.log"
    con = boot(run_dir, cfgs, log=log, timeout=120)
    try:
        out = con.command(f"io random {SEED} 300 {HOT}", timeout=900)
        assert "random: 300 writes" in out and "error" not in out, out
        assert stat(con.command("stats"), "no_blocks") == "0"
        con.send("exit\r")
        con.expect("simulation finished", timeout=30)
    finally:
        con.stop()

    every = ",".join(f"0:{b}" for b in range(BLOCKS_PER_LUN))
    failing = model_configs(run_dir, profile="small", targets=TARGETS, clk_hz=CLK_HZ, overrides=overrides,
                            per_target=[{"fail_erase": every}] * TARGETS)
    con = boot(run_dir, failing, log=log.with_name("test_nospace_noerase2.log"), timeout=300)
    try:
        text = con.boot_text
        for _ in range(20):        # GC runs from the idle loop between console commands: it gives up first
            stats = con.command("stats")
            text += stats
            if stat(stats, "no_blocks") == "1":
                break
        assert "its erase failed" in text and "no erased block for the core" in text, text
        assert stat(stats, "no_blocks") == "1" and stat(stats, "core_starved") == "1", text
        assert stat(stats, "blocks_free") == "0", stats
        assert stat(stats, "no_space") in ("FULL", "GC_STUCK", "NO_BLOCKS"), stats
        assert "NO_SPACE" in con.command("io write 9 3 1")
        assert "NO_SPACE" in con.command("io atomic 9 5 6 7")
        assert "0 wrong: pass" in con.command(f"io verify {SEED} 300 {HOT}", timeout=300)
        con.send("exit\r")
        con.expect("simulation finished", timeout=30)
    finally:
        con.stop()

    # erases work again, but every good block holds data: still no block for the core, until GC can
    # free one -- and no_blocks says exactly that (out of space, the core starved, the pool empty)
    con = boot(run_dir, cfgs, log=log.with_name("test_nospace_noerase3.log"), timeout=300)
    try:
        assert "0 wrong: pass" in con.command(f"io verify {SEED} 300 {HOT}", timeout=300)
        stats = con.command("stats")
        none_coming = (stat(stats, "no_space") != "NONE" and stat(stats, "blocks_free") == "0"
                       and stat(stats, "core_starved") == "1")
        assert stat(stats, "no_blocks") == str(int(none_coming)), stats
    finally:
        con.stop()


@pytest.mark.long      # ~2 min
def test_a_starved_core_gets_the_reserve_then_no_space_not_a_hang(tmp_path):
    """GC off, writes through the firmware's own queue (``io random``) until the pool is down to GC's
    reserve: the core starves with a write in it, and the firmware waits for that write.  The reserve
    goes to the core while the firmware waits for its own command (campaign trial 6952: a checkpoint's
    FLUSH behind a starved host write, with only the reserve left, hung the device); once the pool is
    empty the firmware sets ``no_blocks`` and the waiting write completes NO_SPACE (``NO_BLOCKS``).
    Every acknowledged write reads back; with GC on again the device takes writes."""
    build()
    run_dir = tmp_path / "run"
    cfgs = model_configs(run_dir, profile="small", targets=TARGETS, clk_hz=CLK_HZ,
                         overrides=dict(blocks_per_lun=BLOCKS_PER_LUN))
    con = boot(run_dir, cfgs, log=ROOT / "build" / "soc" / "test_nospace_starved.log", timeout=120)
    try:
        # a checkpoint first: it reserves the checkpoint areas, which GC needs to get the device out
        assert "error" not in con.command("ckpt now")
        assert "off" in con.command("gc off")
        out = con.command(f"io random {SEED} {WRITES} {HOT}", timeout=1500)
        m = STOPPED_RE.search(out)
        assert m and "status 0x11 NO_SPACE" in out, f"the device never refused a write:\n{out[-3000:]}"
        assert "waits long" not in out, out[-3000:]
        assert "no erased block for the core" in out, out[-3000:]
        acked = int(m.group(1))
        stats = con.command("stats")
        assert stat(stats, "no_space") == "NO_BLOCKS" and stat(stats, "no_blocks") == "1", stats
        assert stat(stats, "blocks_free") == "0", stats
        assert "0 wrong: pass" in con.command(f"io verify {SEED} {acked} {HOT}", timeout=300)
        assert "NO_SPACE" in con.command("io write 9 3 1")
        # the write cache still holds pages it could not destage: a FLUSH says so, and changes nothing
        assert int(stat(stats, "cache_dirty")) > 0, stats
        assert "error: flush: status 0x11 NO_SPACE" in con.command("io flush")
        assert "0 wrong: pass" in con.command(f"io verify {SEED} {acked} {HOT}", timeout=300)
        # GC on: it collects (a victim's copies need no page beyond the block it keeps: they are few),
        # a block reaches the core, the refusals end
        assert "on" in con.command("gc on")
        for _ in range(20):
            stats = con.command("stats")
            if stat(stats, "no_blocks") == "0":
                break
        else:
            raise AssertionError(f"no block reached the core again:\n{stats}")
        out = con.command(f"io random {SEED + 1} 100 {HOT}", timeout=900)
        assert "random: 100 writes" in out and "error" not in out, out[-3000:]
        assert "0 wrong: pass" in con.command(f"io verify {SEED + 1} 100 {HOT}", timeout=300)
    finally:
        con.stop()


# 4. FULL first, then GC stuck: the host's commands in the core still get pages
TRIMS = 600                  # far more record pages than the worn device has left


@pytest.mark.long      # ~1.5 min
def test_a_full_device_with_gc_stuck_hands_its_reserve_to_the_hosts_commands(tmp_path):
    """The worn-out device of test 1 (FULL), then trims from a host queue -- each a TRIM record page, of
    an LBA never written, so the data stored stays and FULL with it -- until the worn blocks are gone
    and GC finds nothing to collect with only its reserve left.  The reserve goes to the core though
    the reason shown is FULL, not GC_STUCK (``af_ftl.gc_stuck``, ``stats``), and every trim completes:
    SUCCESS until the last block is used, then NO_SPACE (``no_blocks``); the data stored reads back.

    The reserve must not go to the core only on GC_STUCK.  This workload would not hang even then
    (its trims fill blocks GC can collect, and a collection hands the reserve out too: it would end
    in NO_SPACE as well); a hang needs pages GC cannot collect in front of the starved command,
    e.g. an old transaction pinning the floor of a worn device."""
    run = tmp_path / "run"
    simctl.start(run, simctl.SimConfig(blocks_per_lun=BLOCKS_PER_LUN, nand_set=dict(endurance=ENDURANCE)),
                 fresh=True)
    try:
        assert "error" not in simctl.console_command("gc thresholds 10 12", run)
        out = simctl.console_command(f"io random {SEED} {WRITES} {HOT}", run, timeout=1500)
        m = STOPPED_RE.search(out)
        assert m and "status 0x11 NO_SPACE" in out, f"the device never refused a write:\n{out[-3000:]}"
        acked = int(m.group(1))
        assert stat(simctl.console_command("stats", run), "no_space") == "FULL"

        dev = Device.attach_sim(run, timeout=120)   # a hang, not a slow trim: one takes well under a second
        lba, answers, stuck_seen = dev.capacity - 1, [], False
        assert lba >= HOT
        for i in range(TRIMS):
            c = dev.submit_trim(lba)
            try:
                dev.wait(c, check=False)
            except TimeoutError as e:
                stats = simctl.console_command("stats", run)
                raise AssertionError(f"trim {i} (after {answers.count(Status.SUCCESS)} done) never completed: "
                                     f"{e}\n{stats}") from None
            answers.append(c.status)
            if c.status != Status.SUCCESS:
                break
            if i % 16 == 0 and not stuck_seen:
                stats = simctl.console_command("stats", run)
                stuck_seen = stat(stats, "gc_stuck") == "1" and stat(stats, "no_space") == "FULL"
        assert answers[-1] == Status.NO_SPACE, f"{len(answers)} trims, all {answers[-1].name}"
        assert set(answers[:-1]) == {Status.SUCCESS}, answers
        assert stuck_seen, "GC was never stuck while FULL: the test did not reach the case it is for"
        stats = simctl.console_command("stats", run)
        assert stat(stats, "no_space") == "FULL" and stat(stats, "no_blocks") == "1", stats
        assert stat(stats, "gc_stuck") == "1" and stat(stats, "blocks_free") == "0", stats
        dev.close()
        assert "0 wrong: pass" in simctl.console_command(f"io verify {SEED} {acked} {HOT}", run, timeout=300)
    finally:
        simctl.stop(run)
