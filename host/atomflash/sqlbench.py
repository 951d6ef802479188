"""The X-FTL experiment with real SQLite on atomflash, and SQLite judging power cuts.

Workload (the X-FTL paper's synthetic one): a table shaped like TPC-H
``partsupp`` (partkey, suppkey, availqty, supplycost, comment; ~220-byte
tuples); each transaction reads k random tuples by partkey, updates their
supplycost and commits.  Modes: ``rollback`` (journal_mode=DELETE on a drive
without SQLITE_IOCAP_BATCH_ATOMIC), ``wal`` (journal_mode=WAL) and ``atomic``
(DELETE on the drive with batch atomic writes: SQLite keeps its journal in
memory and the VFS sends each commit as one atomic group).

``python -m atomflash.sqlbench bench`` (``make bench-sqlite``): the full table
on the reference model (:class:`atomflash.modeldrive.ModelDrive`), aged so GC
carries about 30 % and 50 % valid pages, a reduced table on the simulated SoC,
and both written to docs/sqlite.md (between its markers), the raw figures
and the plots to docs/results/.  ``crash`` (``make crash-sqlite``): power
cuts at random points of the workload in every mode, each judged by SQLite
after the restart.
"""

from __future__ import annotations

import argparse
import json
import math
import random
import sys
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

from . import sqlite as afsql
from .modeldrive import ModelDrive

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"
RESULTS_DIR = DOCS / "results"   # the raw figures and the plots; docs/sqlite.md embeds the tables
DB = "partsupp.db"
MODES = afsql.MODES
KS = (1, 5, 10, 20)
# the paper's Table 1 (k = 5, GC validity 50 %, 1,000 transactions; 8 KiB pages on OpenSSD, ext4)
PAPER = {
    "rollback": dict(db=6230, journal=7222, fs=15987, total=29439, fsync=2999, ftl_write=243639, ftl_read=9792,
                     gc=756, erase=2044),
    "wal": dict(db=3523, journal=5754, fs=3646, total=12923, fsync=1013, ftl_write=92979, ftl_read=3472,
                gc=409, erase=897),
    "atomic": dict(db=5211, journal=0, fs=994, total=6205, fsync=994, ftl_write=33239, ftl_read=2011,
                   gc=115, erase=243),
}

_WORDS = ("furiously regular deposits sleep carefully final pinto beans haggle blithely ironic packages "
          "slyly express accounts nag quickly even requests wake along the bold foxes theodolites cajole "
          "instructions doze above pending dependencies use daringly silent asymptotes").split()


def comment(rng: random.Random, n: int = 195) -> str:
    out = []
    while sum(len(w) + 1 for w in out) < n:
        out.append(rng.choice(_WORDS))
    return " ".join(out)[:n]


def create_partsupp(con, tuples: int, seed: int = 1, chunk: int = 400) -> None:
    """``tuples`` rows of ~220 bytes, partkey 1..tuples (the rowid), in transactions of ``chunk`` rows."""
    rng = random.Random(seed)
    con.execute("CREATE TABLE IF NOT EXISTS partsupp(ps_partkey INTEGER PRIMARY KEY, ps_suppkey INTEGER, "
                "ps_availqty INTEGER, ps_supplycost REAL, ps_comment TEXT)")
    for lo in range(1, tuples + 1, chunk):
        con.execute("BEGIN")
        con.executemany("INSERT INTO partsupp VALUES(?,?,?,?,?)",
                        [(pk, rng.randrange(1, 10_000), rng.randrange(1, 10_000), rng.randrange(100, 100_000) / 100,
                          comment(rng)) for pk in range(lo, min(lo + chunk, tuples + 1))])
        con.execute("COMMIT")


def cost_of(tx_no: int, j: int, run: int = 0) -> float:
    """The supplycost transaction ``tx_no`` of run ``run`` gives its j-th tuple: unique, so every update
    changes the tuple (SQLite skips a page whose row is rewritten unchanged) and a cut's result is checkable."""
    return float((run * 1_000_000 + tx_no) * 100 + j)


def plan(rng: random.Random, k: int, tuples: int, tx_no: int, run: int = 0) -> dict[int, float]:
    """What transaction ``tx_no`` will set: k random partkeys -> their new supplycost."""
    return {pk: cost_of(tx_no, j, run) for j, pk in enumerate(rng.sample(range(1, tuples + 1), k))}


def apply(con, updates: dict[int, float]) -> None:
    """One transaction of the workload: read each tuple by partkey, update its supplycost, commit."""
    con.execute("BEGIN")
    for pk, cost in updates.items():
        row = con.execute("SELECT ps_suppkey, ps_availqty, ps_supplycost FROM partsupp WHERE ps_partkey=?",
                          (pk,)).fetchall()
        assert row, pk
        con.execute("UPDATE partsupp SET ps_supplycost=? WHERE ps_partkey=?", (cost, pk))
    con.execute("COMMIT")


def transaction(con, rng: random.Random, k: int, tuples: int, tx_no: int, run: int = 0) -> dict[int, float]:
    """Plan and apply one transaction; returns what it set."""
    u = plan(rng, k, tuples, tx_no, run)
    apply(con, u)
    return u


# -- measuring ----------------------------------------------------------------------------------------
@dataclass
class Result:
    backend: str
    mode: str
    k: int
    txns: int
    tuples: int
    db: int = 0            # database blocks the VFS wrote
    journal: int = 0       # rollback journal or WAL blocks
    fs: int = 0            # file slots (sizes, extents, create, delete)
    flushes: int = 0
    host_reads: int = 0
    programs: int = 0      # NAND programs (host pages, record pages, GC copies, and on the SoC checkpoints)
    erases: int = 0
    gc_copies: int = 0
    gc_victims: int = 0
    nand_reads: int = 0
    host_pages: int = 0    # pages the device took from the host
    seconds: float = 0.0   # simulated
    atomic_groups: int = 0
    transactions: int = 0
    fallbacks: int = 0
    validity: float = float("nan")   # GC: copies / (victims x pages per block)
    extra: dict = field(default_factory=dict)

    def per_tx(self, key: str) -> float:
        return getattr(self, key) / self.txns


def _snapshot(drive, store) -> tuple[dict, dict]:
    return dict(drive.stats(fresh=True) if not isinstance(drive, ModelDrive) else drive.stats()), dict(store.counts)


_runs = iter(range(1, 1 << 30))


def measure(drive, vfs, mode: str, k: int, txns: int, tuples: int, seed: int, backend: str,
            ppb: int, progress=None) -> Result:
    """Run ``txns`` transactions of k updates in ``mode`` and count what they cost (the connection's
    close included: WAL's last checkpoint belongs to the run)."""
    con = afsql.connect(vfs, DB, mode)
    con.execute("SELECT count(*) FROM partsupp").fetchall()
    rng = random.Random(seed)
    s0, c0 = _snapshot(drive, vfs.store)
    run = next(_runs)
    for t in range(txns):
        transaction(con, rng, k, tuples, t + 1, run)
        if progress:
            progress(t + 1)
    if mode == "wal":
        con.execute("PRAGMA journal_mode=DELETE").fetchall()   # checkpoint everything, remove the WAL
    con.close()
    s1, c1 = _snapshot(drive, vfs.store)
    d = {key: s1.get(key, 0) - s0.get(key, 0) for key in s1 if isinstance(s1[key], (int, float))}
    c = {key: c1.get(key, 0) - c0.get(key, 0) for key in c1}
    clk = s1.get("clk_hz") or 100_000_000
    r = Result(backend, mode, k, txns, tuples, db=c.get("db", 0), journal=c.get("journal", 0) + c.get("wal", 0),
               fs=c.get("meta", 0), flushes=c.get("flush", 0), host_reads=c.get("read", 0),
               programs=d.get("nand_programs", 0), erases=d.get("nand_erases", 0), gc_copies=d.get("gc_copies", 0),
               gc_victims=d.get("gc_victims", 0), nand_reads=d.get("nand_reads", 0),
               host_pages=d.get("host_write_pages", 0), seconds=d.get("uptime_cycles", 0) / clk,
               atomic_groups=c.get("atomic_groups", 0), transactions=c.get("transactions", 0),
               fallbacks=c.get("fallbacks", 0))
    if r.gc_victims:
        r.validity = r.gc_copies / (r.gc_victims * ppb)
    r.extra = {"record_pages": d.get("record_pages", 0), "checkpoints": d.get("checkpoints", 0)}
    return r


def age(drive, vfs, writes: int, seed: int = 7) -> None:
    """Age the drive: ``writes`` random rewrites of the database file's blocks with their own content
    (the data stays, the FTL's log turns over until GC runs in its steady state)."""
    m = vfs.store.files[DB]
    nblocks = -(-m.size // vfs.store.lba_size)
    rng = random.Random(seed)
    for _ in range(writes):
        i = rng.randrange(nblocks)
        lba = m.lba_of(i)
        drive.write(lba, drive.read(lba, 1))


def greedy_utilization(validity: float) -> float:
    """The live fraction of the flash at which greedy GC under uniform random updates carries
    ``validity`` of each victim block: u = (1 - v) / -ln(v)."""
    return (1 - validity) / -math.log(validity)


def model_drive_for(tuples: int, validity: float, *, ppb: int = 64, **kw) -> ModelDrive:
    """A model drive whose GC carries about ``validity`` of each victim block in this workload: the
    table's blocks fill ``greedy_utilization(validity)`` of the flash (a journal, a WAL and the GC
    reserve come on top; a WAL's thousand blocks raise WAL mode's validity somewhat).  The LBA space
    holds the table and a WAL."""
    table_blocks = int(tuples * 1.25 * 220 / 2048) + 64     # rows at b-tree fill, interior pages
    capacity = table_blocks + 1100 + 256
    blocks = int(max(table_blocks / greedy_utilization(validity), capacity / 0.9) / ppb) + 6
    return ModelDrive(blocks, pages_per_block=ppb, capacity=capacity, **kw)


def setup(drive, tuples: int, *, seed: int = 1, age_writes: int = 0) -> afsql.VFS:
    vfs = afsql.VFS(drive, format=True)
    con = afsql.connect(vfs, DB, "rollback")
    create_partsupp(con, tuples, seed)
    con.close()
    if age_writes:
        age(drive, vfs, age_writes)
    return vfs


def run_model(tuples: int, txns: int, ks=KS, validities=(0.3, 0.5), modes=MODES, log=print) -> list[Result]:
    """The full table on model drives: for each GC validity and mode a drive of its own, loaded and aged
    the same way, then the k runs one after the other."""
    out = []
    for v in validities:
        for mode in modes:
            drive = model_drive_for(tuples, v)
            t0 = time.monotonic()
            vfs = setup(drive, tuples, age_writes=2 * drive.flash.nblocks * drive.flash.pages_per_block)
            vfs.batch_atomic = mode == "atomic"
            log(f"model, validity {v:.0%}, {mode}: {drive.flash.nblocks} blocks x {drive.flash.pages_per_block} "
                f"pages, {tuples} tuples in {vfs.store.files[DB].size // vfs.store.lba_size} blocks, aged "
                f"({time.monotonic() - t0:.0f} s)")
            for k in ks:
                t0 = time.monotonic()
                r = measure(drive, vfs, mode, k, txns, tuples, seed=1000 * k + 17, backend=f"model{int(v * 100)}",
                            ppb=drive.flash.pages_per_block)
                r.extra["target_validity"] = v
                out.append(r)
                log(f"  {mode:8s} k={k:2d}: {r.per_tx('programs'):6.2f} programs/tx, {r.per_tx('flushes'):.2f} "
                    f"flushes/tx, GC validity {r.validity:.2f}, {r.seconds:.2f} s simulated "
                    f"({time.monotonic() - t0:.0f} s)")
    return out


def run_soc(tuples: int, txns: int, ks=(1, 5), modes=MODES, blocks_per_lun: int = 16, log=print,
            model_too: bool = True) -> list[Result]:
    """The reduced table on the simulated SoC, and the same runs on a model drive of the SoC's shape."""
    import tempfile

    from . import simctl
    from .device import Device

    out = []
    run_dir = Path(tempfile.mkdtemp(prefix="sqlbench-")) / "run"
    cfg = simctl.SimConfig(blocks_per_lun=blocks_per_lun)
    t0 = time.monotonic()
    simctl.start(run_dir, cfg, fresh=True)
    try:
        dev = Device.attach_sim(run_dir)
        ident = dev.info
        log(f"SoC: {ident.capacity} LBAs of {ident.lba_size} B, {ident.channels}x{ident.ways} targets, "
            f"{ident.blocks_per_lun} blocks/LUN ({time.monotonic() - t0:.0f} s to boot)")
        vfs = setup(dev, tuples)
        for mode in modes:
            vfs.batch_atomic = mode == "atomic"
            for k in ks:
                t1 = time.monotonic()
                r = measure(dev, vfs, mode, k, txns, tuples, seed=1000 * k + 17, backend="soc",
                            ppb=ident.pages_per_block)
                out.append(r)
                log(f"  soc {mode:8s} k={k:2d}: {r.per_tx('programs'):6.2f} programs/tx, host "
                    f"{(r.db + r.journal + r.fs) / r.txns:.2f} blocks/tx, {r.seconds:.3f} s simulated "
                    f"({time.monotonic() - t1:.0f} s)")
        dev.close()
    finally:
        simctl.stop(run_dir, power_cut=True)
    if model_too:
        dies = ident.channels * ident.ways * ident.luns
        drive = ModelDrive(dies * ident.blocks_per_lun, pages_per_block=ident.pages_per_block,
                           lba_size=ident.lba_size, capacity=ident.capacity, dies=dies,
                           max_atomic_pages=ident.max_atomic_pages, max_pending=ident.max_pending,
                           max_transfer=ident.max_transfer, max_open_tx=ident.max_open_tx)
        vfs = setup(drive, tuples)
        for mode in modes:
            vfs.batch_atomic = mode == "atomic"
            for k in ks:
                r = measure(drive, vfs, mode, k, txns, tuples, seed=1000 * k + 17, backend="model-soc",
                            ppb=ident.pages_per_block)
                out.append(r)
    return out


# -- crash safety ------------------------------------------------------------------------------------------
@dataclass
class CutResult:
    mode: str
    cut: int
    k_entry: int
    committed: int          # transactions whose COMMIT had returned (and were durable) before the cut
    started: int            # transactions begun before the cut
    found: int | None       # the prefix of transactions the database shows (None: no prefix matches)
    ok: bool
    detail: str = ""


def _state(con) -> dict[int, float]:
    return dict(con.execute("SELECT ps_partkey, ps_supplycost FROM partsupp").fetchall())


def judge(con, base: dict[int, float], updates: list[dict[int, float]], lo: int, hi: int) -> tuple[int | None, str]:
    """Which prefix of ``updates`` (lo..hi transactions) the database shows, after PRAGMA integrity_check."""
    ic = con.execute("PRAGMA integrity_check").fetchall()
    if ic != [("ok",)]:
        return None, f"integrity_check: {ic[:3]}"
    got = _state(con)
    want = dict(base)
    for u in updates[:lo]:
        want.update(u)
    for m in range(lo, hi + 1):
        if m > lo:
            want.update(updates[m - 1])
        if got == want:
            return m, ""
    diff = [pk for pk in want if got.get(pk) != want[pk]][:5]
    return None, f"no prefix of {lo}..{hi} transactions matches (first differing partkeys {diff})"


def crash_model(mode: str, cuts: int, *, tuples: int = 200, txns: int = 80, k: int = 5, seed: int = 1,
                blocks: int = 10, log=None) -> list[CutResult]:
    """One workload on a model drive that keeps its program stream, then ``cuts`` power cuts at random
    entries of it (a drive of ``blocks`` 64-page blocks, small enough that GC runs during the workload):
    each restart recovers the drive (``atomflash.model.recover``), reopens the database
    (SQLite rolls back a hot journal or replays its WAL) and judges it."""
    drive = ModelDrive(blocks, pages_per_block=64, keep_stream=True, seed=seed, gc_free_blocks=3)
    vfs = afsql.VFS(drive, format=True, batch_atomic=mode == "atomic")
    con = afsql.connect(vfs, DB, mode)
    create_partsupp(con, tuples, seed)
    base = _state(con)
    start = drive.stream_len()
    rng = random.Random(seed)
    marks = []        # (stream length when the transaction began, when its COMMIT returned)
    updates = []
    for t in range(txns):
        b = drive.stream_len()
        updates.append(transaction(con, rng, k, tuples, t + 1))
        marks.append((b, drive.stream_len()))
    con.close()
    end = drive.stream_len()
    out = []
    crng = random.Random(seed * 7919 + len(mode))
    for i in range(cuts):
        kk = crng.randrange(start + 1, end + 1)
        contents = drive.cut(kk)
        done = drive.completed_before(kk)                  # the commands before the one cut short
        committed = sum(1 for _, c in marks if c <= done)
        started = sum(1 for b, _ in marks if b < kk)
        d2 = drive.recovered(contents)
        try:
            v2 = afsql.VFS(d2, batch_atomic=mode == "atomic")
            c2 = afsql.connect(v2, DB, mode)
            found, detail = judge(c2, base, updates, committed, started)
            c2.close()
        except Exception as e:  # noqa: BLE001 -- any failure to open or read is a violation
            found, detail = None, f"{type(e).__name__}: {e}"
        r = CutResult(mode, i, kk, committed, started, found, found is not None, detail)
        out.append(r)
        if log:
            log(f"  {mode:8s} cut {i:2d} after entry {kk - start:5d}/{end - start}: committed {committed}, "
                f"started {started}, database shows {found}  {'ok' if r.ok else 'VIOLATION ' + detail}")
    return out


def crash_soc(mode: str, cuts: int, *, tuples: int = 150, k: int = 5, seed: int = 1, blocks_per_lun: int = 8,
              log=None) -> list[CutResult]:
    """Power cuts on the simulated SoC: run transactions, kill the simulation after a random number of
    them plus a random delay (mid-transaction), restart on the same NAND images, judge."""
    import tempfile
    import threading

    from . import simctl
    from .device import Device

    run_dir = Path(tempfile.mkdtemp(prefix="sqlcrash-")) / "run"
    cfg = simctl.SimConfig(blocks_per_lun=blocks_per_lun)
    rng = random.Random(seed)
    simctl.start(run_dir, cfg, fresh=True)
    dev = Device.attach_sim(run_dir)
    vfs = afsql.VFS(dev, format=True, batch_atomic=mode == "atomic")
    con = afsql.connect(vfs, DB, mode)
    create_partsupp(con, tuples, seed)
    base = _state(con)
    updates: list[dict] = []
    out = []
    for i in range(cuts):
        n_before = rng.randrange(1, 6)
        delay = rng.uniform(0.0, 1.5)
        for _ in range(n_before):
            updates.append(transaction(con, rng, k, tuples, len(updates) + 1))
        committed = len(updates)
        timer = threading.Timer(delay, lambda: simctl.stop(run_dir, power_cut=True))
        timer.start()
        try:
            while True:                                     # until the power goes
                u = plan(rng, k, tuples, len(updates) + 1)
                updates.append(u)                           # maybe applied: its COMMIT has not returned
                apply(con, u)
                committed = len(updates)
        except Exception:  # noqa: BLE001 -- the device is gone mid-transaction
            pass
        timer.join()
        started = len(updates)
        try:
            con.close()
        except Exception:  # noqa: BLE001
            pass
        try:
            dev.close()
        except Exception:  # noqa: BLE001
            pass
        simctl.start(run_dir, cfg)
        dev = Device.attach_sim(run_dir)
        vfs = afsql.VFS(dev, batch_atomic=mode == "atomic")
        try:
            con = afsql.connect(vfs, DB, mode)
            found, detail = judge(con, base, updates, committed, started)
        except Exception as e:  # noqa: BLE001
            found, detail = None, f"{type(e).__name__}: {e}"
        r = CutResult(mode, i, -1, committed, started, found, found is not None, detail)
        out.append(r)
        if log:
            log(f"  soc {mode:8s} cut {i}: committed {committed}, database shows {found}  "
                f"{'ok' if r.ok else 'VIOLATION ' + detail}")
        if found is None:
            break
        updates = updates[:found]
    try:
        con.close()
        dev.close()
    finally:
        simctl.stop(run_dir, power_cut=True)
    return out


# -- the report ---------------------------------------------------------------------------------------------
RESULTS = RESULTS_DIR / "sqlite_bench.json"
CRASH = RESULTS_DIR / "sqlite_crash.json"


def _load(path: Path) -> dict:
    try:
        return json.loads(path.read_text())
    except FileNotFoundError:
        return {}


def _save_results(key: str, results: list[Result], meta: dict) -> None:
    data = _load(RESULTS)
    data[key] = {"meta": meta, "results": [asdict(r) for r in results]}
    RESULTS.write_text(json.dumps(data, indent=1, default=str) + "\n")


def _ratio(a: float, b: float) -> str:
    return f"{a / b:.1f}x" if b else "-"


def plots(rows: list[dict]) -> list[str]:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = []
    for key, ylabel, fname in (("programs", "flash programs per transaction", "sqlite_programs.png"),
                               ("seconds", "simulated ms per transaction", "sqlite_time.png")):
        backends = sorted({r["backend"] for r in rows if r["backend"].startswith("model") and r["backend"] != "model-soc"})
        fig, axes = plt.subplots(1, len(backends), figsize=(5 * len(backends), 4), squeeze=False)
        for ax, b in zip(axes[0], backends):
            for mode, style in zip(MODES, ("s-", "o-", "^-")):
                pts = sorted((r["k"], r[key] / r["txns"] * (1000 if key == "seconds" else 1)) for r in rows
                             if r["backend"] == b and r["mode"] == mode)
                if pts:
                    ax.plot([p[0] for p in pts], [p[1] for p in pts], style, label=mode)
            ax.set_xlabel("tuples updated per transaction (k)")
            ax.set_ylabel(ylabel)
            ax.set_title(f"reference model, GC validity target {b[5:]} %")
            ax.set_xticks(KS)
            ax.grid(alpha=0.3)
            ax.legend()
        fig.tight_layout()
        fig.savefig(RESULTS_DIR / fname, dpi=90)
        plt.close(fig)
        names.append(fname)
    return names


def factors_table(rows: dict) -> str:
    """The flash-write ratios at k = 5, validity 50 %, as three factors, for the paper's Table 1 and for
    ``rows`` (mode -> result): SQLite's own writes, then with the file system's, then the flash writes per
    host write (their product is the ratio of flash writes)."""
    def sqlite_only(mode, src):
        return src[mode]["db"] + src[mode]["journal"]

    def host(mode, src):
        return src[mode]["total"] if src is PAPER else src[mode]["db"] + src[mode]["journal"] + src[mode]["fs"]

    def flash(mode, src):
        return src[mode]["ftl_write"] if src is PAPER else src[mode]["programs"]

    def cell(num, den, fmt="{:,.0f}"):
        return f"{fmt.format(num)} / {fmt.format(den)} = {num / den:.2f}x"

    out = ["| factor (k = 5, validity 50 %) | paper: rollback / X-FTL | paper: WAL / X-FTL | "
           "here: rollback / atomic | here: WAL / atomic |",
           "| --- | ---: | ---: | ---: | ---: |"]
    pairs = [(src, mode) for src in (PAPER, rows) for mode in ("rollback", "wal")]
    lines = {
        "SQLite's writes (database + journal or WAL)":
            [cell(sqlite_only(m, s), sqlite_only("atomic", s)) for s, m in pairs],
        "... with the file system's metadata writes": [cell(host(m, s), host("atomic", s)) for s, m in pairs],
        "flash writes per host write, relative":
            [cell(flash(m, s) / host(m, s), flash("atomic", s) / host("atomic", s), "{:.2f}") for s, m in pairs],
        "flash writes (the product)": [f"{flash(m, s) / flash('atomic', s):.1f}x" for s, m in pairs],
    }
    out += [f"| {name} | " + " | ".join(v) + " |" for name, v in lines.items()]
    return "\nThe same ratios as three factors, of which only the first is SQLite's own:\n\n" + "\n".join(out) + "\n"


def report_tables() -> str:
    """The generated part of docs/sqlite.md."""
    data = _load(RESULTS)
    out = []
    model = data.get("model", {}).get("results", [])
    if model:
        meta = data["model"]["meta"]
        out.append(f"### The full table on the reference model\n\n{meta['tuples']:,} tuples, {meta['txns']:,} "
                   f"transactions per row, drive aged first (`{meta['command']}`, {meta['wall_s']:.0f} s wall).  "
                   "Per transaction: blocks the VFS wrote (database, journal or WAL, file slots), flushes, "
                   "NAND programs (host pages + GC copies), erases, GC copies; simulated ms per transaction "
                   "(modeldrive.Timing); GC validity as measured (copies / victims x 64).\n")
        for b in sorted({r["backend"] for r in model}):
            rows = [r for r in model if r["backend"] == b]
            out.append(f"\n**GC validity target {b[5:]} %**\n")
            out.append("| mode | k | db | journal/WAL | file slots | flushes | programs | erases | GC copies | "
                       "validity | ms |")
            out.append("| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
            for k in KS:
                for mode in MODES:
                    for r in rows:
                        if r["k"] == k and r["mode"] == mode:
                            n = r["txns"]
                            out.append(f"| {mode} | {k} | {r['db'] / n:.2f} | {r['journal'] / n:.2f} | "
                                       f"{r['fs'] / n:.2f} | {r['flushes'] / n:.2f} | {r['programs'] / n:.2f} | "
                                       f"{r['erases'] / n:.3f} | {r['gc_copies'] / n:.2f} | {r['validity']:.2f} | "
                                       f"{1000 * r['seconds'] / n:.3f} |")
            out.append("\nRatios (programs; simulated time):\n")
            out.append("| k | WAL / atomic programs | rollback / atomic programs | WAL / atomic time | "
                       "rollback / atomic time |")
            out.append("| --- | ---: | ---: | ---: | ---: |")
            for k in KS:
                by = {r["mode"]: r for r in rows if r["k"] == k}
                if len(by) == 3:
                    a, w, rb = by["atomic"], by["wal"], by["rollback"]
                    out.append(f"| {k} | {_ratio(w['programs'], a['programs'])} | "
                               f"{_ratio(rb['programs'], a['programs'])} | {_ratio(w['seconds'], a['seconds'])} | "
                               f"{_ratio(rb['seconds'], a['seconds'])} |")
        # beside the paper's Table 1 (k = 5, validity 50 %)
        rows = {r["mode"]: r for r in model if r["k"] == 5 and r["backend"] == "model50"}
        if rows:
            out.append("\n### Beside the paper's Table 1 (k = 5, GC validity 50 %, 1,000 transactions)\n")
            out.append("| mode | paper: SQLite DB | journal | file system | fsync | FTL writes | GC | erases | "
                       "here: db | journal/WAL | file slots | flushes | NAND programs | GC copies | erases |")
            out.append("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | "
                       "---: | ---: |")
            for mode in MODES:
                p, r = PAPER[mode], rows.get(mode)
                if r is None:
                    continue
                s = 1000 / r["txns"]
                out.append(f"| {mode} (paper: {'RBJ' if mode == 'rollback' else 'WAL' if mode == 'wal' else 'X-FTL'}) "
                           f"| {p['db']:,} | {p['journal']:,} | {p['fs']:,} | {p['fsync']:,} | {p['ftl_write']:,} | "
                           f"{p['gc']:,} | {p['erase']:,} | {r['db'] * s:,.0f} | {r['journal'] * s:,.0f} | "
                           f"{r['fs'] * s:,.0f} | {r['flushes'] * s:,.0f} | {r['programs'] * s:,.0f} | "
                           f"{r['gc_copies'] * s:,.0f} | {r['erases'] * s:,.0f} |")
            a, w, rb = rows.get("atomic"), rows.get("wal"), rows.get("rollback")
            if a and w and rb:
                out.append(f"\nFlash writes, WAL / atomic: paper {PAPER['wal']['ftl_write'] / PAPER['atomic']['ftl_write']:.1f}x, "
                           f"here {w['programs'] / a['programs']:.1f}x; rollback / atomic: paper "
                           f"{PAPER['rollback']['ftl_write'] / PAPER['atomic']['ftl_write']:.1f}x, here "
                           f"{rb['programs'] / a['programs']:.1f}x.\n")
                out.append(factors_table(rows))
    soc = data.get("soc", {}).get("results", [])
    if soc:
        meta = data["soc"]["meta"]
        out.append(f"\n### The reduced table on the simulated SoC, beside the model\n\n{meta['tuples']:,} tuples, "
                   f"{meta['txns']} transactions per row, no aging (`{meta['command']}`, {meta['wall_s']:.0f} s "
                   f"wall); the same runs on a model drive of the SoC's geometry and limits (`model-soc`).  "
                   "Per transaction.  The SoC's programs include the firmware's checkpoint pages, its simulated "
                   "time the byte-serial host port (docs/host.md: a 2 KiB block takes over 2,000 cycles to "
                   "cross it).\n")
        out.append("| mode | k | backend | db | journal/WAL | file slots | flushes | host pages | programs | "
                   "GC copies | ms |")
        out.append("| --- | --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
        for mode in MODES:
            for k in sorted({r["k"] for r in soc}):
                for b in ("soc", "model-soc"):
                    for r in soc:
                        if r["mode"] == mode and r["k"] == k and r["backend"] == b:
                            n = r["txns"]
                            out.append(f"| {mode} | {k} | {b} | {r['db'] / n:.2f} | {r['journal'] / n:.2f} | "
                                       f"{r['fs'] / n:.2f} | {r['flushes'] / n:.2f} | {r['host_pages'] / n:.2f} | "
                                       f"{r['programs'] / n:.2f} | {r['gc_copies'] / n:.2f} | "
                                       f"{1000 * r['seconds'] / n:.2f} |")
    return "\n".join(out) + "\n"


def crash_table() -> str:
    data = _load(CRASH)
    if not data:
        return ""
    out = ["| where | mode | cuts | violations | committed transactions checked |", "| --- | --- | ---: | ---: | ---: |"]
    for key in sorted(data):
        rs = data[key]["cuts"]
        for mode in MODES:
            m = [r for r in rs if r["mode"] == mode]
            if m:
                out.append(f"| {key} | {mode} | {len(m)} | {sum(not r['ok'] for r in m)} | "
                           f"{sum(r['committed'] for r in m):,} |")
    return "\n".join(out) + "\n"


BEGIN, END = "<!-- sqlbench:begin -->", "<!-- sqlbench:end -->"
CBEGIN, CEND = "<!-- sqlcrash:begin -->", "<!-- sqlcrash:end -->"


def write_docs() -> None:
    doc = DOCS / "sqlite.md"
    text = doc.read_text()
    data = _load(RESULTS)
    rows = [r for v in data.values() for r in v["results"]]
    if rows:
        plots(rows)
    for b, e, body in ((BEGIN, END, report_tables()), (CBEGIN, CEND, crash_table())):
        if b in text and body:
            text = text[:text.index(b) + len(b)] + "\n" + body + text[text.index(e):]
    doc.write_text(text)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m atomflash.sqlbench", description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    b = sub.add_parser("bench", help="the X-FTL experiment -> docs/results/sqlite_bench.json, docs/sqlite.md, plots")
    b.add_argument("--tuples", type=int, default=60_000)
    b.add_argument("--txns", type=int, default=1000)
    b.add_argument("--soc-tuples", type=int, default=1500)
    b.add_argument("--soc-txns", type=int, default=40)
    b.add_argument("--no-model", action="store_true", help="keep the model's results, run the SoC part")
    b.add_argument("--no-soc", action="store_true", help="keep the SoC's results, run the model part")
    c = sub.add_parser("crash", help="power cuts judged by SQLite -> docs/results/sqlite_crash.json, docs/sqlite.md")
    c.add_argument("--cuts", type=int, default=100, help="cuts per mode on the model")
    c.add_argument("--soc-cuts", type=int, default=2, help="cuts per mode on the simulated SoC")
    c.add_argument("--seed", type=int, default=1)
    sub.add_parser("report", help="rewrite docs/sqlite.md and the plots from the saved results")
    args = ap.parse_args(argv)
    log = lambda s: print(s, flush=True)  # noqa: E731
    command = "make bench-sqlite" if args.cmd == "bench" else "make crash-sqlite"
    if args.cmd == "bench":
        if not args.no_model:
            t0 = time.monotonic()
            rs = run_model(args.tuples, args.txns, log=log)
            _save_results("model", rs, dict(tuples=args.tuples, txns=args.txns, command=command,
                                            wall_s=time.monotonic() - t0))
        if not args.no_soc:
            t0 = time.monotonic()
            rs = run_soc(args.soc_tuples, args.soc_txns, log=log)
            _save_results("soc", rs, dict(tuples=args.soc_tuples, txns=args.soc_txns, command=command,
                                          wall_s=time.monotonic() - t0))
    elif args.cmd == "crash":
        data = _load(CRASH)
        bad = 0
        cuts = []
        for mode in MODES:
            cuts += crash_model(mode, args.cuts, seed=args.seed, log=log)
        data["model"] = {"cuts": [asdict(r) for r in cuts]}
        bad += sum(not r.ok for r in cuts)
        if args.soc_cuts:
            cuts = []
            for mode in MODES:
                cuts += crash_soc(mode, args.soc_cuts, seed=args.seed, log=log)
            data["soc"] = {"cuts": [asdict(r) for r in cuts]}
            bad += sum(not r.ok for r in cuts)
        CRASH.write_text(json.dumps(data, indent=1) + "\n")
        total = sum(len(v["cuts"]) for v in data.values())
        log(f"{total} cuts, {bad} violations")
        write_docs()
        return 1 if bad else 0
    write_docs()
    return 0


if __name__ == "__main__":
    sys.exit(main())
