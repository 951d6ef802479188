"""The `atomflash` CLI and `atomflash.Device` against a running simulated SSD
(`atomflash sim start`): every verb, every error path's message and exit
code, several commands in flight, and `make demo`'s script end to end."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = [pytest.mark.soc, pytest.mark.xdist_group("host_cli")]   # the module's booted SoC

from atomflash import errors, simctl, spec
from atomflash.cli import EXIT_NO_DEVICE, EXIT_STATUS_BASE, EXIT_USAGE, EXIT_VALUE
from atomflash.device import Device
from sim.simboot import build

ROOT = Path(__file__).resolve().parents[2]
CLI = [sys.executable, "-m", "atomflash.cli"]


def code(status: spec.Status) -> int:
    return EXIT_STATUS_BASE + int(status)


@pytest.fixture(scope="module")
def sim(tmp_path_factory):
    run_dir = tmp_path_factory.mktemp("cli") / "run"
    env = {**os.environ, "ATOMFLASH_RUN_DIR": str(run_dir)}

    def cli(*args, rc=0, stdin=None):
        r = subprocess.run([*CLI, *map(str, args)], capture_output=True, text=True, env=env, timeout=900,
                           stdin=subprocess.DEVNULL)
        assert r.returncode == rc, f"atomflash {' '.join(map(str, args))}: rc {r.returncode}, expected {rc}\n" \
                                   f"{r.stdout[-2000:]}\n{r.stderr[-2000:]}"
        return r

    cli.run_dir = run_dir
    build()  # the shared SoC build first (no timeout: it waits for another worker's under the lock)
    r = cli("sim", "start", "--fresh")
    assert "host interface on" in r.stdout and "running: host port" in r.stdout
    yield cli
    simctl.stop(run_dir, power_cut=True)


def test_status_identify_stats_console(sim):
    st = json.loads(sim("sim", "status", "--json").stdout)
    assert st["running"] and st["port"] > 0
    ident = json.loads(sim("identify", "--json").stdout)
    assert ident["magic"] == spec.IDENTIFY_MAGIC and ident["lba_size"] == 2048 and ident["capacity"] > 1000
    assert ident["max_atomic_pages"] == spec.LIMITS.MAX_ATOMIC_PAGES
    stats = json.loads(sim("stats", "--json").stdout)
    assert stats["clk_hz"] == 100_000_000 and stats["boot_pages_scanned"] == 0 and stats["boot_lost"] == 0
    assert stats["no_space"] == "NONE" and stats["spare_blocks"] > 0        # a fresh device takes writes
    assert "firmware" in sim("console", "info").stdout


def test_write_read_trim(sim, tmp_path):
    sim("write", 10, "--data", "hello", "--count", 3)
    out = sim("read", 10, "--count", 4).stdout.splitlines()
    assert len(out) == 4 and all("|hellohello" in l for l in out[:3]) and out[3].endswith("zeros")
    sim("read", 11, "--out", tmp_path / "b")
    assert (tmp_path / "b").read_bytes() == (b"hello" * 500)[:2048]
    sim("trim", 11)
    assert sim("read", 11).stdout.strip().endswith("zeros")
    sim("flush")
    sim("hint", "checkpoint")
    # the GET_LOG page (refreshed every 20 k idle cycles) counts them: 3 pages written, 6 read, a TRIM record
    st = json.loads(sim("stats", "--json").stdout)
    assert st["host_write_pages"] >= 3 and st["host_read_pages"] >= 6 and st["record_pages"] >= 1, st
    assert st["nand_programs"] >= 4 and st["write_amp"] >= 1.0, st


def test_atomic_tx_append_remap(sim):
    sim("atomic", 20, 21, 35, "--data", "grp")
    assert all("|grpgrp" in l for l in sim("read", 20, "--count", 2).stdout.splitlines())
    sim("tx", "write", 7, 40, "--data", "t7")
    assert "|t7t7" in sim("tx", "read", 7, 40).stdout
    assert sim("read", 40).stdout.strip().endswith("zeros")  # not visible before the commit
    sim("tx", "commit", 7)
    assert "|t7t7" in sim("read", 40).stdout
    sim("tx", "write", 8, 41, "--data", "t8")
    sim("tx", "abort", 8)
    assert sim("read", 41).stdout.strip().endswith("zeros")
    sim("tx", "write", 9, 42, "--data", "t9", "--final")
    assert "|t9t9" in sim("read", 42).stdout
    token = sim("append", "--data", "ap", "--count", 2).stdout.strip()
    sim("remap", f"50:{token}:2")
    assert all("|apap" in l for l in sim("read", 50, "--count", 2).stdout.splitlines())
    other = sim("append", "--data", "zz").stdout.strip()
    sim("release", other)
    r = sim("remap", f"60:{other}:1", rc=code(spec.Status.INVALID_TOKEN))
    assert "INVALID_TOKEN" in r.stderr
    assert sim("read", 60).stdout.strip().endswith("zeros")


def test_error_paths(sim, tmp_path):
    ident = json.loads(sim("identify", "--json").stdout)
    cap, max_atomic = ident["capacity"], ident["max_atomic_pages"]
    cases = [
        (("read", cap), spec.Status.LBA_OUT_OF_RANGE),
        (("write", cap - 1, "--count", 2, "--data", "x"), spec.Status.LBA_OUT_OF_RANGE),
        (("tx", "commit", 999), spec.Status.UNKNOWN_TX),
        (("tx", "abort", 998), spec.Status.UNKNOWN_TX),
        (("tx", "read", 997, 0), spec.Status.UNKNOWN_TX),
        (("remap", "1:0x1234567800010000:1"), spec.Status.INVALID_TOKEN),   # forged
        (("release", "0x0"), spec.Status.INVALID_TOKEN),
        (("atomic", *range(max_atomic + 1), "--data", "g"), spec.Status.GROUP_TOO_LARGE),
        (("atomic", 3, 3, "--data", "g"), spec.Status.DUPLICATE_LBA),
        (("read", 0, "--count", ident["max_transfer"] + 1), spec.Status.TRANSFER_TOO_LARGE),
    ]
    for args, status in cases:
        r = sim(*args, rc=code(status))
        lines = r.stderr.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("atomflash: ") and status.name in lines[0], r.stderr
    # usage and value errors: argparse (2) and ours (1), nothing sent
    sim("read", -1, rc=EXIT_USAGE)
    sim("hint", "bogus", rc=EXIT_USAGE)
    sim("remap", "1:2", rc=EXIT_USAGE)
    q = spec.NVME.IO_QUEUES                                         # over NVMe --qid N is I/O queue N + 1
    r = sim("--qid", q, "identify", rc=EXIT_USAGE)
    assert f"--qid: I/O queue {q + 1} is not one the host created" in r.stderr, r.stderr
    sim("read", 10, "--qid", q - 1)                                 # the last I/O queue works alike
    (tmp_path / "big").write_bytes(b"x" * 5000)
    r = sim("write", 0, "--data-file", tmp_path / "big", rc=EXIT_VALUE)
    assert "5000 bytes" in r.stderr
    # no device
    r = subprocess.run([*CLI, "--dir", tmp_path / "nothing", "identify"], capture_output=True, text=True)
    assert r.returncode == EXIT_NO_DEVICE and "no simulation running" in r.stderr


def test_queue_depth_above_one(sim):
    dev = Device.attach_sim(sim.run_dir)
    try:
        blocks = {100 + i: bytes([i + 1]) * dev.lba_size for i in range(12)}
        cmds = [dev.submit_write(lba, data) for lba, data in blocks.items()]
        assert dev.in_flight == len(cmds)  # all submitted before any completion was collected
        first = dev.poll(block=True)
        assert first and len({c.cid for c in cmds}) == len(cmds)
        dev.wait_all()
        assert all(c.done and c.ok for c in cmds)
        reads = [dev.submit_read(lba) for lba in blocks]
        assert dev.in_flight == len(reads)
        for (lba, data), c in zip(blocks.items(), reads):
            assert dev.wait(c).data == data
        # the append/remap paper's SCSI commands, mapped onto APPEND and REMAP
        from atomflash import scsi

        rod = dev.scsi(scsi.encode_append_atomic(2), b"S" * 2 * dev.lba_size)
        cdb, params = scsi.encode_remap([(200, scsi.decode_token(rod), 2)])
        assert dev.scsi(cdb, params) == b""
        assert dev.read(200, 2) == b"S" * 2 * dev.lba_size
        with pytest.raises(errors.InvalidToken):
            dev.scsi(cdb, params)  # spent
        # the library's transaction context manager: commit on success, abort on an exception
        with dev.transaction() as tx:
            tx.write(210, b"c" * dev.lba_size)
            assert tx.read(210) == b"c" * dev.lba_size and dev.read(210) == bytes(dev.lba_size)
        assert dev.read(210) == b"c" * dev.lba_size
        with pytest.raises(KeyError):
            with dev.transaction() as tx:
                tx.write(211, b"d" * dev.lba_size)
                raise KeyError("the application failed")
        assert dev.read(211) == bytes(dev.lba_size) and tx.state == "aborted"
    finally:
        dev.close()
    res = json.loads(sim("bench", "--qd", 4, "--ops", 8, "--span", 64, "--json").stdout)["results"]
    assert res["commands"] == 8 and res["pages_written"] == 8 and res["flash_pages_programmed"] >= 8


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_board_path_through_litex_server(sim, tmp_path):
    """A board's host path end to end: ``litex_server`` owns the UARTBone
    link (here the simulation's host port through pyserial's ``socket://``
    instead of a tty) and the CLI reaches it with ``--board-csr``/``--server``
    (:class:`atomflash.transport.LitexServerTransport`)."""
    import socket
    import time

    st = json.loads(sim("sim", "status", "--json").stdout)
    csr = json.loads((sim.run_dir / "sim.json").read_text())["csr_csv"]
    port = _free_port()
    log = open(tmp_path / "litex_server.log", "w")
    server = subprocess.Popen([str(Path(sys.executable).parent / "litex_server"), "--uart", "--uart-port",
                               f"socket://127.0.0.1:{st['port']}", "--bind-port", str(port)],
                              stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()  # one greeting, then gone
                break
            except OSError:
                assert server.poll() is None and time.monotonic() < deadline, (tmp_path / "litex_server.log").read_text()
                time.sleep(0.2)
        board = ["--board-csr", csr, "--server", f"127.0.0.1:{port}"]
        assert json.loads(sim(*board, "identify", "--json").stdout)["magic"] == spec.IDENTIFY_MAGIC
        sim(*board, "write", 40, "--data", "board", "--count", 2)
        out = sim(*board, "read", 40, "--count", 2).stdout.splitlines()
        assert len(out) == 2 and all("|boardboard" in l for l in out), out
        r = sim("--board-csr", tmp_path / "none.csv", "identify", rc=EXIT_USAGE)
        assert "no such file" in r.stderr
        r = sim("--board-csr", csr, "--server", f"127.0.0.1:{_free_port()}", "identify", rc=EXIT_NO_DEVICE)
        assert "no litex_server" in r.stderr
    finally:
        server.kill()
        server.wait()
        log.close()
    # the simulation's own path sees the same data -- only now: litex_sim's serial2tcp keeps one connection,
    # and a second connection while litex_server holds the first crashes it when they close
    assert all("|boardboard" in l for l in sim("read", 40, "--count", 2).stdout.splitlines())


def test_stop(sim):
    sim("sim", "stop")
    assert not json.loads(sim("sim", "status", "--json").stdout)["running"]
    r = sim("identify", rc=EXIT_NO_DEVICE)
    assert "no simulation running" in r.stderr
