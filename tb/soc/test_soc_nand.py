"""System test: the firmware's NAND boot path on the simulated SoC.

The SoC (VexRiscv + the RTL NAND controller behind its Wishbone window, 2
channels x 2 ways, one NAND behavioural model per target) boots on flash
images prepared here:

* every model gets its own configuration: fewer blocks than the profile (the
  firmware must take the geometry from the parameter page, not from the
  build), factory bad blocks, its own ID bytes;
* the images hold a commit-flag log written by the reference log writer
  (``LogFTL`` under a random workload: plain writes, atomic groups,
  transactions with COMMIT records, appends and remaps, trims), cut by a
  power failure that tore pages and lost members of an atomic group, placed
  on the good blocks of all four targets and programmed with the channel's
  ECC layout; one page is unreadable (uncorrectable ECC).

The firmware resets the targets, reads their IDs and parameter pages, scans
the bad-block markers, reads every page's OOB record through the controller
and runs recovery.  Its map must equal ``atomflash.model.recover`` on the same
pages (in the firmware's scan order, by physical page address), entry by
entry: version, commit seq, address; and so must the boot report's counts.
A power cycle (new simulator process on the same images) recovers the same.
One simulator boot per power cycle; all tests of this module share it, in
order, on one xdist worker.
"""

from __future__ import annotations

import random
import re
from collections import Counter

import pytest

from atomflash import nandsim, spec
from atomflash.model import Flash, Limits, LogFTL, recover
from atomflash.model.workload import Workload

from tb.firmware_recovery.crecover import model_counts

from sim import flashimg
from sim.simboot import CLK_HZ, DEFAULT_CHANNELS, DEFAULT_WAYS, TARGETS, ROOT, boot, build, model_configs

pytestmark = [pytest.mark.soc, pytest.mark.xdist_group("soc_nand")]   # the module's booted SoC

PROFILE = spec.NAND_PROFILES["small"]
LAYOUT = spec.nand_page_layout(PROFILE)
BLOCKS_PER_LUN = 8            # the models' geometry; the controller is built for the profile's 64
BAD = {0: [3], 2: [1, 5]}     # target -> factory bad blocks
ID_BYTES = [f"af,5a,{t:02x},15,{0x40 + t:02x}" for t in range(TARGETS)]
LIMITS = Limits(capacity=48, lba_size=PROFILE.page_data, max_atomic_pages=6, max_open_tx=3, max_pending=24,
                max_remap_triples=3)
LOG_BLOCKS = 6
MAP_RE = re.compile(r"^lba (\d+): (?:unbound|vseq (\d+), commit seq (\d+|checkpoint)"
                    r"(?:, lost \(no intact page holds it\)|, ppa 0x([0-9a-f]{8}) \(([^)]*)\)))$", re.M)


def log_prefix(pages):
    """What the firmware's scan reads of a log once placed (a log block is one physical block)."""
    return flashimg.written_prefix(pages, lambda p: divmod(p.addr, PROFILE.pages_per_block))


def workload_cut():
    """A log whose power cut discarded an atomic group and tore a page (the first seed that does),
    as the firmware's scan sees it (each block's written prefix)."""
    for seed in range(100):
        f = LogFTL(LIMITS, Flash(LOG_BLOCKS, PROFILE.pages_per_block))
        try:
            Workload(f, random.Random(seed), firmware=0).run(160)
        except RuntimeError:  # the log outgrew LOG_BLOCKS
            continue
        cut = f.cut(window=6, rng=random.Random(seed))
        seen = log_prefix(cut.pages)
        r = recover(seen)
        kinds = Counter(spec.unpack_oob(p.oob).kind for p in seen if spec.unpack_oob(p.oob))
        if (r.torn and any(x.startswith("group") for x in r.rejected) and kinds[spec.Kind.COMMIT]
                and kinds[spec.Kind.REMAP] and kinds[spec.Kind.TRIM]):
            return seed, f, cut
    raise AssertionError("no workload seed gives the cut this test wants")


class Flashed:
    """The prepared images and what recover says about them."""

    def __init__(self, run_dir):
        self.run_dir = run_dir
        self.cfgs = model_configs(run_dir, profile="small", targets=TARGETS, clk_hz=CLK_HZ,
                                  overrides=dict(blocks_per_lun=BLOCKS_PER_LUN),
                                  per_target=[dict(bad_blocks=[(0, b) for b in BAD.get(t, [])], id_bytes=ID_BYTES[t])
                                              for t in range(TARGETS)])
        self.place = flashimg.LogPlacement(DEFAULT_CHANNELS, DEFAULT_WAYS, BLOCKS_PER_LUN, PROFILE.pages_per_block,
                                           bad={(t, b) for t, bs in BAD.items() for b in bs})
        self.seed, self.log, self.cut = workload_cut()
        images = flashimg.create_images(run_dir, self.cfgs)
        data_addrs = sorted(p.addr for p in log_prefix(self.cut.pages) if spec.unpack_oob(p.oob)
                            and spec.unpack_oob(p.oob).kind == spec.Kind.DATA)
        self.unreadable = {data_addrs[len(data_addrs) // 2]}
        self.seen = flashimg.program_images(images, LAYOUT, self.place, self.cut.pages,
                                            unreadable=self.unreadable, seed=self.seed)
        for img in images:
            img.close()
        self.rec = recover(self.seen)
        used = {self.place.where(p.addr)[:2] for p in self.cut.pages}
        self.used_blocks = sorted(self.place.global_block(t, b) for t, b in used)
        self.valid = Counter(self.block_of(b.addr) for b in self.rec.map.values() if b.addr is not None)

    def block_of(self, ppa: int) -> int:
        f = spec.PPA.decompose("ppa", ppa)
        return self.place.global_block(f.channel * DEFAULT_WAYS + f.way, f.block)

    @property
    def bad_global(self) -> list[int]:
        return sorted(self.place.global_block(t, b) for t, bs in BAD.items() for b in bs)


@pytest.fixture(scope="module")
def flashed(tmp_path_factory):
    return Flashed(tmp_path_factory.mktemp("soc_nand"))


@pytest.fixture(scope="module")
def con(flashed):
    build()
    console = boot(flashed.run_dir, flashed.cfgs, log=ROOT / "build" / "soc" / "test_nand_console.log")
    try:
        yield console
    finally:
        console.stop()


def report_value(text: str, pattern: str) -> int:
    m = re.search(pattern, text)
    assert m, f"{pattern!r} not in the boot report:\n{text}"
    return int(m.group(1))


def firmware_map(con, nlba: int) -> dict[int, tuple]:
    out = {}
    for first in range(0, nlba, 64):
        text = con.command(f"map {first} {min(64, nlba - first)}", timeout=120)   # ~130 lines of output
        for m in MAP_RE.finditer(text):
            lba = int(m.group(1))
            if m.group(2) is None:
                out[lba] = None
            else:
                cseq = None if m.group(3) == "checkpoint" else int(m.group(3))   # from a checkpoint: not kept
                out[lba] = (int(m.group(2)), cseq, int(m.group(4), 16) if m.group(4) else None)
        assert "error" not in text, text
    assert sorted(out) == list(range(nlba)), f"map printed LBAs {sorted(out)}"
    return out


def model_map(rec, nlba: int) -> dict[int, tuple]:
    out = {}
    for lba in range(nlba):
        b = rec.map.get(lba)
        out[lba] = None if b is None else (b.vseq, b.cseq, b.addr)
    return out


def test_boot_report_geometry_from_the_device(con, flashed):
    text = con.boot_text
    blocks = TARGETS * BLOCKS_PER_LUN
    assert (f"geometry {PROFILE.page_data}+{PROFILE.page_spare} B pages, {PROFILE.pages_per_block} pages/block, "
            f"{BLOCKS_PER_LUN} blocks/LUN, 1 LUN/target, {TARGETS} targets: {blocks} blocks, "
            f"{blocks * PROFILE.pages_per_block} pages") in text
    assert f"{DEFAULT_CHANNELS} channels x {DEFAULT_WAYS} ways" in text
    assert re.search(r"device ATOMFLASH AFSIM-SMALL", text)
    assert "timing mode 5" in text  # the models offer 0-5; the firmware switches with SET FEATURES
    assert "error" not in text.lower(), text
    ms = report_value(text, r"boot: \d+ cycles \((\d+)\.\d{3} ms simulated\)")
    assert 0 < ms < 200


def test_boot_report_recovery_counts(con, flashed):
    text, rec = con.boot_text, flashed.rec
    want = model_counts(rec)
    # the scan reads each written block up to its first erased page, and no block whose page 0 is erased
    prefix = Counter(flashed.block_of(p.addr) for p in flashed.seen)
    open_blocks = sum(1 for n in prefix.values() if n < PROFILE.pages_per_block)
    assert report_value(text, r"recovery: (\d+) pages scanned") == len(flashed.seen) + open_blocks
    assert report_value(text, r"(\d+) erased") == open_blocks
    assert report_value(text, r"recovery: (\d+) of \d+ good blocks scanned") == len(prefix)
    m = re.search(r"recovery: kept (\d+) writes, (\d+) groups, (\d+) tx, (\d+) remaps, (\d+) trims; discarded "
                  r"(\d+) groups, (\d+) tx, (\d+) remaps, (\d+) incomplete records", text)
    assert m, text
    names = ("writes_kept", "groups_kept", "tx_kept", "remaps_kept", "trims_kept", "groups_discarded",
             "tx_discarded", "remaps_discarded", "records_incomplete")
    got = dict(zip(names, map(int, m.groups())))
    got.update(torn=report_value(text, r" (\d+) torn"), next_seq=report_value(text, r"next seq (\d+)"),
               lost=report_value(text, r", (\d+) lost"))
    assert got == {k: want[k] for k in got}
    assert got["groups_discarded"] >= 1 and got["torn"] >= 2  # the cut's torn pages + the unreadable one
    assert report_value(text, r"recovery: (\d+) LBAs bound") == len(rec.map)


def test_map_agrees_with_model_recover(con, flashed):
    nlba = LIMITS.capacity + 8  # past the workload's LBAs: unbound
    got = firmware_map(con, nlba)
    want = model_map(flashed.rec, nlba)
    diff = {lba: (got[lba], want[lba]) for lba in range(nlba) if got[lba] != want[lba]}
    assert not diff, f"firmware vs model (vseq, commit seq, ppa): {diff}"
    assert sum(v is not None for v in got.values()) >= 20


def test_map_names_the_page_it_holds(con, flashed):
    """Decoded address fields agree with the PPA layout of the spec."""
    lba, b = next((lba, b) for lba, b in sorted(flashed.rec.map.items()) if b.addr is not None)
    out = con.command(f"map {lba}")
    f = spec.PPA.decompose("ppa", b.addr)
    assert f"(ch {f.channel} way {f.way} lun {f.lun} block {f.block} page {f.page})" in out


def test_block_state_and_valid_counts(con, flashed):
    for b in flashed.used_blocks + flashed.bad_global[:1] + [TARGETS * BLOCKS_PER_LUN - 1]:
        out = con.command(f"block {b}")
        m = re.search(r"\): (.+?), (\d+) of (\d+) pages written, (\d+) torn, (\d+) valid", out)
        assert m, out
        state, written, valid = m.group(1), int(m.group(2)), int(m.group(5))
        if b in flashed.bad_global:
            assert state == "bad (factory)"
        elif b in flashed.used_blocks:
            assert state in ("open", "full") and written > 0
            assert valid == flashed.valid[b], f"block {b}: firmware {valid} valid, model {flashed.valid[b]}"
        else:
            assert state == "free" and written == 0 and valid == 0


def test_nand_id_reads_the_models(con, flashed):
    out = con.command("nand id")
    assert "error" not in out
    for t in range(TARGETS):
        want = [int(x, 16) for x in ID_BYTES[t].split(",")]
        m = re.search(rf"ch {t // DEFAULT_WAYS} way {t % DEFAULT_WAYS}: id ((?:[0-9a-f]{{2}} ?)+), id 20h \"ONFI\"", out)
        assert m, out
        got = [int(x, 16) for x in m.group(1).split()]
        assert got[:len(want)] == want and not any(got[len(want):])
    assert out.count(f"{PROFILE.page_data}+{PROFILE.page_spare} B pages, {PROFILE.pages_per_block} pages/block, "
                     f"{BLOCKS_PER_LUN} blocks/LUN") == TARGETS
    assert out.count("ATOMFLASH AFSIM-SMALL") == TARGETS


def test_bbt_lists_the_factory_bad_blocks(con, flashed):
    out = con.command("bbt")
    assert f"{len(flashed.bad_global)} bad blocks of {TARGETS * BLOCKS_PER_LUN}" in out
    listed = [int(x) for x in re.findall(r"^  block (\d+) \(.*\): factory bad$", out, re.M)]
    assert listed == flashed.bad_global
    for t, blocks in BAD.items():
        for b in blocks:
            assert f"(ch {t // DEFAULT_WAYS} way {t % DEFAULT_WAYS} lun 0 block {b}): factory bad" in out


def test_info_shows_device_geometry(con):
    out = con.command("info")
    assert re.search(rf"nand +geometry {PROFILE.page_data}\+{PROFILE.page_spare} B pages, "
                     rf"{PROFILE.pages_per_block} pages/block, {BLOCKS_PER_LUN} blocks/LUN", out), out


def test_nand_status_and_read(con, flashed):
    out = con.command("nand status")
    assert out.count(": RDY ARDY") == TARGETS and "FAIL" not in out
    # a programmed page reads back through ECC with its OOB record
    p = flashed.seen[0]
    f = spec.PPA.decompose("ppa", p.addr)
    out = con.command(f"nand read {f.channel} {f.way} {f.block} {f.page} oob")
    assert out.startswith("OK,"), out
    raw = bytes(int(x, 16) for x in out.split("oob:", 1)[1].split())
    assert raw == b"\xff" * spec.NAND_BBM_BYTES + p.oob
    # an erased page
    free = TARGETS * BLOCKS_PER_LUN - 1
    out = con.command(f"nand read {DEFAULT_CHANNELS - 1} {DEFAULT_WAYS - 1} {free % BLOCKS_PER_LUN} 0")
    assert out.startswith("ERASED"), out


def test_nand_test_programs_and_erases_a_free_block(con, flashed):
    """PROGRAM and ERASE through the controller: a free block is erased,
    programmed, read back through ECC and erased again; used and bad blocks are refused."""
    free = TARGETS * BLOCKS_PER_LUN - 1
    erases = re.compile(r"(\d+) erases$", re.M)
    before = int(erases.search(con.command(f"block {free}"))[1])
    out = con.command(f"nand test {free}")
    assert re.search(r"erase \d+ cycles, 2 pages programmed \(\d+ cycles each\) and read back identical "
                     r"\(\d+ cycles each\), erased again: pass", out), out
    after = con.command(f"block {free}")
    assert "free, 0 of" in after
    assert int(erases.search(after)[1]) == before + 2, after   # both erases count (wear levelling reads them)
    out = con.command(f"nand read {DEFAULT_CHANNELS - 1} {DEFAULT_WAYS - 1} {free % BLOCKS_PER_LUN} 1 oob")
    assert out.startswith("ERASED"), out
    assert "error: block" in con.command(f"nand test {flashed.used_blocks[0]}")
    assert "is bad" in con.command(f"nand test {flashed.bad_global[0]}")


def test_bad_arguments_give_errors(con):
    nblocks = TARGETS * BLOCKS_PER_LUN
    nlba = nblocks * PROFILE.pages_per_block
    cases = {
        "map": "error: usage: map <lba> [count]",
        "map x": "error: usage: map <lba> [count]",
        "map 1 2 3": "error: usage: map <lba> [count]",
        f"map {nlba}": f"error: lba {nlba} out of range (0..{nlba - 1})",
        "map 0 0": "error: count 0 out of range",
        f"map {nlba - 1} 2": "out of range",
        "block": "error: usage: block <n>",
        "block -1": "error: usage: block <n>",
        f"block {nblocks}": f"error: block {nblocks} out of range (0..{nblocks - 1})",
        "bbt all": "error: usage: bbt",
        "nand": "error: usage: nand id|status|reset|read",
        "nand erase": "error: usage: nand id|status|reset|read",
        "nand read 0 0 0": "error: usage: nand",
        "nand test": "error: usage: nand",
        f"nand test {nblocks}": f"error: block {nblocks} out of range",
        f"nand read {DEFAULT_CHANNELS} 0 0 0": "error: no such page",
        f"nand read 0 0 0 {PROFILE.pages_per_block}": "error: no such page",
    }
    for line, want in cases.items():
        out = con.command(line)
        assert want in out, f"{line!r}: {out!r}"
    out = con.command("help")
    for verb in ("nand id|status|reset", "bbt", "map <lba>", "block <n>"):
        assert verb in out


def test_power_cycle_recovers_the_same(con, flashed):
    """Restart = power cycle: a new simulator process reopens the images."""
    nlba = LIMITS.capacity + 8
    before = firmware_map(con, nlba)
    con.send("exit\r")
    con.expect("simulation finished", timeout=30)
    assert con.proc.wait(timeout=30) == 0
    con.stop()
    again = boot(flashed.run_dir, flashed.cfgs, log=ROOT / "build" / "soc" / "test_nand_console2.log")
    try:
        assert firmware_map(again, nlba) == before
        for t in range(TARGETS):
            with nandsim.Image(flashed.cfgs[t]["image"]) as img:
                assert img.power_ons == 2
        again.send("exit\r")
        again.expect("simulation finished", timeout=30)
    finally:
        again.stop()


def test_the_bad_block_table_is_kept_in_the_checkpoint(flashed):
    """The factory markers are read while no checkpoint carries the table: a checkpoint (format 4) names
    the factory bad blocks in its wear pages, and the next boot takes the table from it, reading no
    marker, with the same blocks bad and the same map."""
    nlba = LIMITS.capacity + 8
    bad = flashed.bad_global
    con = boot(flashed.run_dir, flashed.cfgs, log=ROOT / "build" / "soc" / "test_nand_console3.log")
    try:
        assert "(factory markers read)" in con.boot_text, con.boot_text   # no checkpoint on the images yet
        before = firmware_map(con, nlba)
        assert "taken" in con.command("ckpt now", timeout=120)
        con.send("exit\r")
        con.expect("simulation finished", timeout=30)
    finally:
        con.stop()
    ck = flashimg.newest_checkpoint_of(flashed.cfgs, PROFILE, DEFAULT_WAYS)
    assert ck is not None and ck.header.format == spec.CKPT.FORMAT >= 4
    assert ck.factory_bad == set(bad) and not ck.retired
    again = boot(flashed.run_dir, flashed.cfgs, log=ROOT / "build" / "soc" / "test_nand_console4.log")
    try:
        text = again.boot_text
        assert (f"bbt: {len(bad)} bad blocks of {TARGETS * BLOCKS_PER_LUN}: {' '.join(map(str, bad))} "
                f"(the table of checkpoint {ck.header.number}; no markers read)") in text, text
        assert re.search(r"time: bring-up [\d.]+ ms, bbt 0\.000 ms", text), text
        listed = [int(x) for x in re.findall(r"^  block (\d+) \(.*\): factory bad$", again.command("bbt"), re.M)]
        assert listed == bad
        assert "bad (factory)" in again.command(f"block {bad[0]}")
        unseq = lambda m: {lba: v and (v[0], v[2]) for lba, v in m.items()}  # noqa: E731  (vseq, ppa)
        assert unseq(firmware_map(again, nlba)) == unseq(before)
        again.send("exit\r")
        again.expect("simulation finished", timeout=30)
    finally:
        again.stop()
