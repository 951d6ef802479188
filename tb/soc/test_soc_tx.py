"""System test: transactions on the full SoC, across a checkpoint and a power cycle.

Through the firmware's queue pair (``io tx``): a transaction stages pages
(visible to TX_READ only), a checkpoint is taken while it is open (its floor
must stay at or below the transaction's first page, trap 8), then it commits;
a second transaction stays open, a third aborts, a fourth commits with
TX_FINAL.  After a power cycle the boot recovers from that checkpoint: the
committed transactions are whole, the open and the aborted one left nothing,
and the device takes new transactions.
"""

from __future__ import annotations

import re

import pytest

from atomflash import spec

from .simboot import CLK_HZ, ROOT, TARGETS, boot, build, model_configs

pytestmark = pytest.mark.xdist_group("soc_tx")

BLOCKS_PER_LUN = 4


def ok(con, line, want="pass"):
    out = con.command(line, timeout=60)
    assert want in out and "error" not in out, f"{line}: {out}"
    return out


def test_transactions_across_a_checkpoint_and_a_power_cycle(tmp_path):
    build()
    run_dir = tmp_path / "run"
    cfgs = model_configs(run_dir, profile="small", targets=TARGETS, clk_hz=CLK_HZ,
                         overrides=dict(blocks_per_lun=BLOCKS_PER_LUN))
    log = ROOT / "build" / "soc" / "test_tx_console.log"
    con = boot(run_dir, cfgs, log=log, timeout=120)
    try:
        info = con.command("info")
        # the IDENTIFY record reports the core's transaction limits
        assert re.search(rf"max_open_tx\s+{spec.LIMITS.MAX_OPEN_TX}\r?\n", info), info
        assert re.search(rf"max_pending\s+{spec.LIMITS.MAX_PENDING}\r?\n", info), info
        ok(con, "io write 1 0 8", "wrote 8 blocks")
        ok(con, "io tx write 5 2 2 3", "staged 3 blocks")
        ok(con, "io check 1 0 8")                       # committed data unchanged
        ok(con, "io tx check 5 2 2 3")                  # the transaction sees its own writes
        tx = con.command("tx")
        assert "1 open of" in tx and "3 of" in tx and "oldest open transaction began at seq" in tx, tx
        first = int(re.search(r"began at seq (\d+)", tx).group(1))
        ck = ok(con, "ckpt now", "taken")
        floor = int(re.search(r"floor seq (\d+)", ck).group(1))
        assert floor <= first, ck                       # the open transaction holds the floor back
        ok(con, "io tx write 5 2 20 2", "staged 2 blocks")
        ok(con, "io tx commit 5", "committed")
        ok(con, "io check 2 2 3")
        ok(con, "io check 2 20 2")
        assert "no transaction holds" in con.command("tx")
        # one left open, one aborted, one committed by its final write
        ok(con, "io tx write 6 3 10 2", "staged 2 blocks")
        ok(con, "io tx write 7 4 12 2", "staged 2 blocks")
        ok(con, "io tx abort 7", "aborted")
        ok(con, "io tx write 8 5 30 2", "staged 2 blocks")
        ok(con, "io tx final 8 5 32 2", "committed")
        ok(con, "io check 5 30 4")
        out = con.command("io tx commit 7")
        assert "UNKNOWN_TX" in out, out
        out = con.command("io tx write 0 1 0 1")
        assert "INVALID_TID" in out, out
        con.send("exit\r")
        con.expect("simulation finished", timeout=30)
    finally:
        con.stop()

    con = boot(run_dir, cfgs, log=log.with_name("test_tx_console2.log"), timeout=120)
    try:
        text = con.boot_text
        assert "ftl: host interface on" in text
        m = re.search(r"kept \d+ writes, \d+ groups, (\d+) tx", text)
        assert m and int(m.group(1)) == 2, text          # transactions 5 and 8, from the checkpoint's floor on
        ok(con, "io check 1 0 2")
        ok(con, "io check 2 2 3")
        ok(con, "io check 1 5 3")
        ok(con, "io check 2 20 2")
        ok(con, "io check 0 10 4")                       # the open and the aborted transaction: nothing
        ok(con, "io check 5 30 4")
        assert "0 open of" in con.command("tx")
        ok(con, "io tx write 6 9 10 2", "staged 2 blocks")  # a new transaction, the old tid reused
        ok(con, "io tx commit 6", "committed")
        ok(con, "io check 9 10 2")
    finally:
        con.stop()
