"""SQLite on the simulated SoC (LiteX SoC in Verilator: firmware, the FTL core, NAND models) through
atomflash.sqlite: the `atomflash sql` CLI, the write pattern of atomic and rollback mode counted by the
device itself (GET_LOG) and matched by the reference model's drive, and a power cut in the middle of
a transaction judged by SQLite after the restart."""

from __future__ import annotations

import os
import random
import subprocess
import sys
import threading

import pytest

pytestmark = [pytest.mark.soc, pytest.mark.xdist_group("sqlite_soc")]

from atomflash import simctl
from atomflash import sqlbench as sb
from atomflash import sqlite as afsql
from atomflash.device import Device
from atomflash.modeldrive import ModelDrive
from sim.simboot import build

TUPLES = 150
CLI = [sys.executable, "-m", "atomflash.cli"]


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory):
    run_dir = tmp_path_factory.mktemp("sqlite") / "run"
    build()
    simctl.start(run_dir, simctl.SimConfig(), fresh=True)
    yield run_dir
    simctl.stop(run_dir, power_cut=True)


def test_cli_sql(run_dir):
    env = {**os.environ, "ATOMFLASH_RUN_DIR": str(run_dir)}

    def sql(db, text, rc=0):
        r = subprocess.run([*CLI, "sql", db, text], capture_output=True, text=True, env=env, timeout=600,
                           stdin=subprocess.DEVNULL)
        assert r.returncode == rc, r.stderr
        return r

    sql("cli.db", "CREATE TABLE t(a INTEGER, b TEXT); INSERT INTO t VALUES(1, 'one'), (2, 'two')")
    assert sql("cli.db", "SELECT a, b FROM t ORDER BY a").stdout.split() == ["1|one", "2|two"]
    r = sql("cli.db", "SELEC nonsense", rc=1)
    assert "syntax error" in r.stderr


def _per_tx(dev, vfs, con, rng, txns, run):
    out = []
    for t in range(txns):
        s0, c0 = dev.stats(fresh=True), dict(vfs.store.counts)
        sb.transaction(con, rng, 5, TUPLES, t + 1, run=run)
        s1 = dev.stats(fresh=True)
        c = {k: vfs.store.counts[k] - c0.get(k, 0) for k in vfs.store.counts}
        out.append((c, {k: s1[k] - s0[k] for k in ("nand_programs", "host_write_pages", "record_pages",
                                                    "ckpt_pages", "gc_copies")}))
    return out


@pytest.mark.parametrize("mode", ["atomic", "rollback"])
def test_write_pattern_on_the_soc_matches_the_model(run_dir, mode):
    dev = Device.attach_sim(run_dir)
    try:
        vfs = afsql.VFS(dev, format=True, batch_atomic=mode == "atomic")
        con = afsql.connect(vfs, sb.DB, mode)
        sb.create_partsupp(con, TUPLES)
        soc = _per_tx(dev, vfs, con, random.Random(4), 3, run=1)
        assert con.execute("PRAGMA integrity_check").fetchall() == [("ok",)]
        con.close()
        vfs.unregister()
    finally:
        dev.close()
    info = dev.info
    drive = ModelDrive(info.channels * info.ways * info.luns * info.blocks_per_lun,
                       pages_per_block=info.pages_per_block, capacity=info.capacity,
                       max_atomic_pages=info.max_atomic_pages, max_pending=info.max_pending)
    mvfs = afsql.VFS(drive, format=True, batch_atomic=mode == "atomic")
    mcon = afsql.connect(mvfs, sb.DB, mode)
    sb.create_partsupp(mcon, TUPLES)
    model = _per_tx(drive, mvfs, mcon, random.Random(4), 3, run=1)
    for (c, s), (mc, ms) in zip(soc, model):
        for key in ("db", "journal", "meta", "flush", "atomic_groups"):
            assert c.get(key, 0) == mc.get(key, 0), (key, c, mc)          # the same host I/O
        assert s["host_write_pages"] == ms["host_write_pages"]
        if mode == "atomic":
            assert c.get("journal", 0) == 0 and c.get("meta", 0) == 0 and c["atomic_groups"] == 1
            # each changed page once, no commit record: the device programmed exactly the group's pages
            assert s["record_pages"] == 0 and s["nand_programs"] - s["ckpt_pages"] - s["gc_copies"] == c["db"]
        else:
            assert c["journal"] >= c["db"] and c["meta"] == 2 and c["flush"] == 2


def test_power_cut_mid_transaction(run_dir):
    dev = Device.attach_sim(run_dir)
    vfs = afsql.VFS(dev, format=True)
    con = afsql.connect(vfs, sb.DB, "atomic")
    sb.create_partsupp(con, TUPLES)
    base = sb._state(con)
    rng = random.Random(9)
    updates = [sb.transaction(con, rng, 5, TUPLES, t + 1, run=2) for t in range(3)]
    committed = len(updates)
    timer = threading.Timer(0.4, lambda: simctl.stop(run_dir, power_cut=True))
    timer.start()
    with pytest.raises(Exception):
        for _ in range(200):                          # until the power goes
            u = sb.plan(rng, 5, TUPLES, len(updates) + 1, run=2)
            updates.append(u)
            sb.apply(con, u)
            committed = len(updates)
    timer.join()
    for closer in (con.close, dev.close, vfs.unregister):
        try:
            closer()
        except Exception:  # noqa: BLE001 -- the device is gone
            pass
    simctl.start(run_dir, simctl.SimConfig())
    dev = Device.attach_sim(run_dir)
    try:
        vfs = afsql.VFS(dev)
        con = afsql.connect(vfs, sb.DB, "atomic")
        found, detail = sb.judge(con, base, updates, committed, len(updates))
        assert found is not None, detail
        con.close()
    finally:
        dev.close()
