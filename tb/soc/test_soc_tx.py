"""System test: transactions and appends on the full SoC, across a checkpoint and a power cycle.

Through the firmware's queue pair (``io tx``): a transaction stages pages
(visible to TX_READ only), a checkpoint is taken while it is open (it records
the transaction and the live appends, and its floor is the log's next seq,
trap 8), then it commits;
a second transaction stays open, a third aborts, a fourth commits with
TX_FINAL.  Likewise an append staged before the checkpoint is remapped
after it, another stays live, a third is released; forged and spent tokens
are refused.  After a power cycle the boot recovers from that checkpoint:
the committed transactions and the remap are whole, the open transaction,
the aborted one and the appends not remapped left nothing, and the device
takes new work.
"""

from __future__ import annotations

import re

import pytest

from atomflash import spec

from sim.simboot import CLK_HZ, ROOT, TARGETS, boot, build, ftl_pending_budget, model_configs

pytestmark = pytest.mark.soc

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
        # staged pages are live: the firmware's budget keeps them within the over-provisioning
        assert re.search(rf"max_pending\s+{ftl_pending_budget(BLOCKS_PER_LUN)}\r?\n", info), info
        assert re.search(rf"max_appends\s+{spec.LIMITS.MAX_APPENDS}\r?\n", info), info
        assert re.search(rf"max_remap_triples\s+{spec.LIMITS.MAX_REMAP_TRIPLES}\r?\n", info), info
        ok(con, "io write 1 0 8", "wrote 8 blocks")
        ok(con, "io tx write 5 2 2 3", "staged 3 blocks")
        ok(con, "io check 1 0 8")                       # committed data unchanged
        ok(con, "io tx check 5 2 2 3")                  # the transaction sees its own writes
        tx = con.command("tx")
        assert "1 open of" in tx and "3 of" in tx and "began at seq" in tx, tx
        first = int(re.search(r"began at seq (\d+)", tx).group(1))
        # appends: one remapped after the checkpoint, one left live
        tokens = []
        for seed, lba in ((7, 60), (8, 64)):
            out = ok(con, f"io append {seed} {lba} 2", "appended 2 blocks")
            tokens.append(re.search(r"token (0x[0-9a-f]+)", out).group(1))
        ck = ok(con, "ckpt now", "taken")
        floor = int(re.search(r"floor seq (\d+)", ck).group(1))
        assert floor > first, ck                        # the checkpoint records the open transaction instead
        assert "recorded 1 open transactions and 2 live appends" in con.command("tx")
        ok(con, "io tx write 5 2 20 2", "staged 2 blocks")
        ok(con, "io tx commit 5", "committed")
        ok(con, f"io remap 60 {tokens[0]} 2", "remapped 1 appends")
        ok(con, "io check 7 60 2")
        ok(con, "io check 0 64 2")                      # the live append binds nothing
        for line in (f"io remap 70 {tokens[0]} 2", "io remap 70 0x1234 2", f"io release {tokens[0]}"):
            assert "INVALID_TOKEN" in con.command(line), line   # spent, forged
        assert "REMAP_LENGTH" in con.command(f"io remap 70 {tokens[1]} 1")
        out = ok(con, "io append 9 80 1", "appended 1 blocks")
        ok(con, f"io release {re.search(r'token (0x[0-9a-f]+)', out).group(1)}", "released")
        ok(con, "io check 2 2 3")
        ok(con, "io check 2 20 2")
        assert "began at seq" in con.command("tx")      # the live append is still open
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
        m = re.search(r"kept \d+ writes, \d+ groups, (\d+) tx, (\d+) remaps", text)
        assert m and (int(m.group(1)), int(m.group(2))) == (2, 1), text   # tx 5 and 8, the remap, from the floor on
        ok(con, "io check 1 0 2")
        ok(con, "io check 2 2 3")
        ok(con, "io check 1 5 3")
        ok(con, "io check 2 20 2")
        ok(con, "io check 0 10 4")                       # the open and the aborted transaction: nothing
        ok(con, "io check 7 60 2")                       # the remap, of pages appended before the checkpoint
        ok(con, "io check 0 64 2")                       # the append never remapped: nothing
        ok(con, "io check 0 80 1")
        assert "INVALID_TOKEN" in con.command(f"io release {tokens[1]}")   # tokens die with the power
        ok(con, "io check 5 30 4")
        tx = con.command("tx")
        assert "0 open of" in tx and "no transaction or append is open" in tx, tx   # nothing survives a cut
        ok(con, "io tx write 6 9 10 2", "staged 2 blocks")  # a new transaction, the old tid reused
        ok(con, "io tx commit 6", "committed")
        ok(con, "io check 9 10 2")
        # a remap binds LBAs 90-91 to append pages (OOB lba 0): the next checkpoint takes them as those
        # LBAs' versions, not as pages that do not hold them
        out = ok(con, "io append 11 90 2", "appended 2 blocks")
        ok(con, f"io remap 90 {re.search(r'token (0x[0-9a-f]+)', out).group(1)} 2", "remapped 1 appends")
        ck = ok(con, "ckpt now", "taken")
        assert "not this LBA's" not in ck, ck
        ok(con, "io check 11 90 2")
    finally:
        con.stop()
