"""System test: a power cut on the full SoC, judged twice.

1. *Fill* (shared by the tests): boot on fresh images with 4 blocks per LUN,
   automatic checkpoints every 32 pages, and ``io random`` over a hot range
   until GC has collected and checkpoints are on flash; shut down cleanly.
2. *Cut*: boot on a copy of those images with one NAND model told to cut
   power during its k-th program (or erase) at a random progress and end the
   simulation (``power_cut_finish``: every target loses power in that cycle),
   and run a random mix of console I/O (multi-block writes, atomic groups,
   trims, flushes) while GC and checkpoints run, until power goes.  A command
   is acknowledged when the console printed its result.
3. *Judge the flash*: read every page of the images the way the controller
   does (BCH-corrected, ``flashimg.read_log``), find the newest intact
   checkpoint (``flashimg.read_checkpoint``, decoded independently of the
   firmware) and run ``atomflash.model.recover``.
4. *Restart*: boot again.  The firmware's recovered map must equal the
   model's LBA by LBA (version and commit point; the page it names must hold
   that version intact), every acknowledged write/trim must read back, the
   command cut in flight must be all-or-nothing when atomic (old or new per
   LBA when not), and the device must take new work.

``AF_CUT_SEEDS=3,4,5`` runs both cut sites with those seeds instead (one
fill shared by all); a failure names its seed, and the images stay in the
test's tmp directory.
"""

from __future__ import annotations

import os
import random
import re
import shutil

import pytest

from atomflash import nandsim, spec
from atomflash.model import recover

from soc.console import ConsoleTimeout

from sim import flashimg
from sim.simboot import CLK_HZ, DEFAULT_WAYS, ROOT, TARGETS, boot, build, model_configs

pytestmark = [pytest.mark.soc, pytest.mark.xdist_group("soc_cut")]   # the module's booted SoC

PROFILE = spec.NAND_PROFILES["small"]
LAYOUT = spec.nand_page_layout(PROFILE)
BLOCKS_PER_LUN = 4
LBAS = 48              # the workload's LBAs (hot: GC finds garbage)
FILL_SEED, FILL_WRITES = 9, 300
COMMANDS = 60          # phase-2 commands; the cut comes well before the end
MAP_RE = re.compile(r"^lba (\d+): (?:(unbound)|vseq (\d+), commit seq (\d+|checkpoint)"
                    r"(?:, lost \(no intact page holds it\)|, ppa 0x([0-9a-f]{8}) \([^)]*\)))$", re.M)


def xorshift32(x: int) -> int:
    x ^= (x << 13) & 0xFFFFFFFF
    x ^= x >> 17
    return x ^ ((x << 5) & 0xFFFFFFFF)


def fill_tags(seed: int, writes: int, lbas: int) -> dict[int, int]:
    """What ``io random seed writes lbas`` leaves in every LBA (firmware/cmds_io.c's draws and tags)."""
    out, x = {}, seed
    for i in range(writes):
        x = xorshift32(x)
        out[x % lbas] = seed << 20 | (i + 1)
    return out


def workload(rnd: random.Random) -> list[tuple[str, dict[int, int], bool]]:
    """(console line, {lba: tag, 0 = trimmed}, atomic) per command."""
    steps = []
    for i in range(COMMANDS):
        tag, r = 1000 + i, rnd.random()
        if r < 0.5:
            lba = rnd.randrange(LBAS)
            n = min(rnd.randint(1, 6), LBAS - lba)
            steps.append((f"io write {tag} {lba} {n}", {lba + k: tag for k in range(n)}, False))
        elif r < 0.8:
            lbas = rnd.sample(range(LBAS), rnd.randint(2, 6))
            steps.append((f"io atomic {tag} " + " ".join(map(str, lbas)), {lba: tag for lba in lbas}, True))
        elif r < 0.93:
            lba = rnd.randrange(LBAS)
            n = min(rnd.randint(1, 3), LBAS - lba)
            steps.append((f"io trim {lba} {n}", {lba + k: 0 for k in range(n)}, False))
        else:
            steps.append(("io flush", {}, False))
    return steps


def configs(run_dir, cut=None):
    return model_configs(run_dir, profile="small", targets=TARGETS, clk_hz=CLK_HZ,
                         overrides=dict(blocks_per_lun=BLOCKS_PER_LUN),
                         per_target=[(cut or {}).get(t, {}) for t in range(TARGETS)])


@pytest.fixture(scope="module")
def filled(tmp_path_factory):
    """Images after the fill (GC has run, checkpoints on flash)."""
    build()
    run_dir = tmp_path_factory.mktemp("cut_fill")
    con = boot(run_dir, configs(run_dir), log=ROOT / "build" / "soc" / "test_cut_fill.log", timeout=120)
    try:
        assert "error" not in con.command("ckpt every 32")
        assert "error" not in con.command("gc thresholds 10 12")   # GC early: a short fill exercises it
        out = con.command(f"io random {FILL_SEED} {FILL_WRITES} {LBAS}", timeout=900)
        assert f"random: {FILL_WRITES} writes" in out and "error" not in out, out
        gc, ck = con.command("gc"), con.command("ckpt")
        assert int(re.search(r"victims (\d+)", gc).group(1)) > 0, gc
        assert re.search(r"newest checkpoint (\d+)", ck), ck
        con.send("exit\r")
        con.expect("simulation finished", timeout=30)
    finally:
        con.stop()
    return run_dir


def firmware_map(con) -> dict[int, tuple | None]:
    out = {}
    for first in range(0, LBAS, 16):
        text = con.command(f"map {first} 16", timeout=120)
        assert "error" not in text, text
        for m in MAP_RE.finditer(text):
            lba = int(m.group(1))
            if m.group(2):
                out[lba] = None
            else:
                cseq = -1 if m.group(4) == "checkpoint" else int(m.group(4))
                out[lba] = (int(m.group(3)), cseq, int(m.group(5), 16) if m.group(5) else None)
    assert sorted(out) == list(range(LBAS)), f"map printed {sorted(out)}"
    return out


def holds(pages_by_ppa, ppa: int, lba: int, vseq: int) -> bool:
    """Whether the page at ``ppa`` is an intact copy of ``lba``'s version ``vseq``."""
    p = pages_by_ppa.get(ppa)
    rec = p and spec.unpack_oob(p.oob)
    return bool(rec) and rec.kind in (spec.Kind.DATA, spec.Kind.GC_COPY) and rec.lba == lba and rec.vseq == vseq


def reads(con, lba: int, tag: int) -> bool:
    out = con.command(f"io check {tag} {lba}", timeout=120)
    assert "error" not in out, out
    return "pass" in out


SEEDS = [int(s) for s in os.environ.get("AF_CUT_SEEDS", "").split(",") if s]
CASES = [(site, s) for s in SEEDS for site in ("program", "erase")] or [("program", 1), ("erase", 2)]


@pytest.mark.slow      # ~6 min: make test-slow: the quick campaign cuts power on the full system in make test
@pytest.mark.parametrize("site,seed", CASES)
def test_power_cut_then_recovery_agrees_with_the_model(filled, tmp_path, site, seed):
    rnd = random.Random(seed)
    run_dir = tmp_path / "run"
    shutil.copytree(filled, run_dir, ignore=shutil.ignore_patterns("*.cfg", "*.json"))
    # a program cut on one target; an erase cut armed on every target (erases are rare: the first one cuts)
    progress = round(rnd.uniform(0.05, 0.95), 2)
    if site == "program":
        target, k = rnd.randrange(TARGETS), rnd.randint(3, 40)
        cut = {target: {"power_cut_program": k, "power_cut_progress": progress, "power_cut_finish": 1}}
    else:
        target, k = "*", rnd.randint(1, 2)
        cut = {t: {"power_cut_erase": k, "power_cut_progress": progress, "power_cut_finish": 1}
               for t in range(TARGETS)}
    steps = [("gc thresholds 10 12", {}, False), *workload(rnd)]   # as in the fill: GC (and erases) early
    want = dict(fill_tags(FILL_SEED, FILL_WRITES, LBAS))
    log = ROOT / "build" / "soc" / f"test_cut_{site}_{seed}.log"

    # -- 2. the cut --------------------------------------------------------------------------
    inflight = None
    try:
        con = boot(run_dir, configs(run_dir, cut), log=log, timeout=120)
    except ConsoleTimeout as e:   # the cut came while the firmware booted (recovery, the pool's erases)
        inflight, transcript = ("(boot)", {}, False), str(e)
    else:
        try:
            for i, (line, change, atomic) in enumerate(steps):
                try:
                    out = con.command(line, timeout=120)
                except (ConsoleTimeout, OSError):
                    inflight = steps[i]
                    break
                assert "error" not in out, f"{line}: {out}"
                want.update(change)
        finally:
            con.stop()
        transcript = con.transcript
    assert inflight is not None, f"no cut: nand{target} did not reach {site} {k} in {COMMANDS} commands"
    assert "POWER CUT" in transcript, transcript[-2000:]

    # -- 3. what the flash must recover to -----------------------------------------------------
    images = [nandsim.Image(run_dir / f"nand{t}.img") for t in range(TARGETS)]
    try:
        pages = flashimg.read_log(images, LAYOUT, DEFAULT_WAYS)
    finally:
        for img in images:
            img.close()
    ckpt = flashimg.read_checkpoint(pages, PROFILE.pages_per_block, PROFILE.page_data)
    assert ckpt is not None, "the fill left checkpoints: one must be intact"
    rec = recover(pages, ckpt.model)
    by_ppa = {p.addr: p for p in pages}

    # -- 4. restart: the firmware's recovery vs the model, then the data -----------------------
    con = boot(run_dir, configs(run_dir), log=log.with_name(f"test_cut_{site}_{seed}_restart.log"), timeout=300)
    try:
        assert "ftl: host interface on" in con.boot_text, con.boot_text
        got = firmware_map(con)
        for lba in range(LBAS):
            b = rec.map.get(lba)
            if b is None:
                assert got[lba] is None, f"lba {lba}: model unbound, firmware {got[lba]}"
                continue
            assert got[lba] is not None and got[lba][:2] == (b.vseq, b.cseq), \
                f"lba {lba}: firmware (vseq, cseq) {got[lba]}, model {(b.vseq, b.cseq)}"
            assert b.addr is not None, f"lba {lba}: the model finds no intact page of vseq {b.vseq}"
            assert holds(by_ppa, got[lba][2], lba, b.vseq), f"lba {lba}: page {got[lba][2]:#x} does not hold it"

        line, change, atomic = inflight
        for lba, tag in sorted(want.items()):
            if lba not in change:
                assert reads(con, lba, tag), f"lba {lba}: acknowledged tag {tag} lost ({line!r} was cut)"
        state = {lba: "new" if reads(con, lba, tag) else "old" if reads(con, lba, want.get(lba, 0)) else "neither"
                 for lba, tag in change.items()}
        assert "neither" not in state.values(), f"cut in {line!r}: {state}"
        if atomic:
            assert len(set(state.values())) == 1, f"atomic group {line!r} half visible: {state}"

        assert "wrote 2 blocks" in con.command("io write 4242 0 2", timeout=120)
        assert "pass" in con.command("io check 4242 0 2", timeout=120)
    finally:
        con.stop()
