"""On the simulated SSD: what is open (GET_LOG OPEN, `atomflash open`),
transaction ids two hosts cannot silently share (TX_WRITE's tx_new flag,
TID_IN_USE), a NAND power cut armed from the CLI counted from now, and the
CLI's exit codes for "no device" and "the boot lost power"."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

pytestmark = [pytest.mark.soc, pytest.mark.xdist_group("host_open")]   # the module's booted SoC

from atomflash import errors, simctl, spec
from atomflash.cli import EXIT_NO_DEVICE, EXIT_POWER_LOST, EXIT_STATUS_BASE
from atomflash.device import Device, OpenList
from atomflash.spec import LogPage, Opcode
from sim.simboot import build

CLI = [sys.executable, "-m", "atomflash.cli"]


@pytest.fixture(scope="module")
def sim(tmp_path_factory):
    run_dir = tmp_path_factory.mktemp("open") / "run"
    env = {**os.environ, "ATOMFLASH_RUN_DIR": str(run_dir)}

    def cli(*args, rc=0):
        r = subprocess.run([*CLI, *map(str, args)], capture_output=True, text=True, env=env, timeout=900,
                           stdin=subprocess.DEVNULL)
        assert r.returncode == rc, f"atomflash {' '.join(map(str, args))}: rc {r.returncode}, expected {rc}\n" \
                                   f"{r.stdout[-2000:]}\n{r.stderr[-2000:]}"
        return r

    cli.run_dir = run_dir
    build()  # the shared SoC build first (no timeout: it waits for another worker's under the lock)
    cli("sim", "start", "--fresh")
    yield cli
    simctl.stop(run_dir, power_cut=True)


def attach(sim) -> Device:
    """The host port takes one connection (a newer one closes the older): attach between CLI calls."""
    return Device.attach_sim(sim.run_dir, timeout=120)


def test_open_list_and_tids_no_two_hosts_share(sim):
    with attach(sim) as dev:
        n = dev.lba_size
        assert dev.open_list() == OpenList((), ())
        dev.tx_write(77, 100, b"a" * n)                    # opened the way the CLI does (joins or opens)
        dev.tx_write(77, 101, b"b" * n)
        tok = dev.append(b"c" * 2 * n)
        ol = dev.open_list()                               # written by the core in command order: no wait
        assert ol.transactions == ((77, 2, False),) and ol.appends == ((tok, 2),)
        with pytest.raises(errors.InvalidField):           # a log page the device does not have
            dev.wait(dev.submit(Opcode.GET_LOG, log_page=0x7F, read_bytes=256, detail="get log 0x7f"))
    shown = json.loads(sim("open", "--json").stdout)
    assert shown == {"transactions": [{"tid": 77, "pages": 2, "doomed": False}],
                     "appends": [{"token": f"0x{tok:016x}", "nlb": 2}]}
    # another host opening tid 77 as new: refused, and the transaction is as it was
    r = sim("tx", "write", 77, 102, "--new", "--data", "x", rc=EXIT_STATUS_BASE + spec.Status.TID_IN_USE)
    assert "TID_IN_USE" in r.stderr
    with attach(sim) as dev:
        n = dev.lba_size
        assert dev.open_list().transactions == ((77, 2, False),)
        assert dev.tx_read(77, 100, 3) == b"a" * n + b"b" * n + bytes(n)
        with pytest.raises(errors.TidInUse):
            with dev.transaction(77) as tx:                # an id of the caller's that is open: not shared
                tx.write(103, b"d" * n)
        with dev.transaction() as tx:                      # a drawn id: random over 32 bits, opened as new
            tx.write(104, b"e" * n)
            assert tx.tid in {t for t, _, _ in dev.open_list().transactions}
        assert tx.state == "committed" and dev.read(104) == b"e" * n and dev.read(103) == bytes(n)
        dev.tx_commit(77)
        dev.release(tok)
        assert dev.open_list() == OpenList((), ()) and not dev.open_tids
        assert dev.read(100, 2) == b"a" * n + b"b" * n
    sim("tx", "write", 78, 110, "--new", "--data", "y")    # a tid nobody has open opens
    assert "tx 78: 1 page(s) staged" in sim("open").stdout
    sim("tx", "abort", 78)
    assert sim("open").stdout.strip() == "nothing open"


def test_cut_from_now_and_a_boot_that_loses_power(sim):
    sim("write", 0, "--data", "kept", "--count", 4, "--fua")
    r = sim("sim", "cut", "--program", 1)
    assert "armed: targets 0, 1, 2, 3 lose power during the 1st program from now" in r.stdout
    r = sim("write", 20, "--data", "cut", "--count", 4, "--fua", rc=EXIT_NO_DEVICE)  # its programs cut the power
    assert not json.loads(sim("sim", "status", "--json").stdout)["running"]
    assert simctl.power_lost(sim.run_dir)
    sim("identify", rc=EXIT_NO_DEVICE)
    # a boot cut half a millisecond after power-on: the boot lost power, not "no device"
    r = sim("sim", "start", "--nand-set", "power_cut_ns=500000", rc=EXIT_POWER_LOST)
    assert "the boot lost power" in r.stderr
    sim("sim", "start")
    out = sim("read", 0, "--count", 4).stdout.splitlines()
    assert len(out) == 4 and all("|keptkept" in l for l in out)
    assert sim("open").stdout.strip() == "nothing open"
    sim("sim", "cut", "--target", 9, "--erase", 1, rc=2)   # a target the flash does not have
