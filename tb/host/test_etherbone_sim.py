"""An Ethernet board's host path in the full simulated SSD (`atomflash sim
start --ethernet`, `soc/sim.py --etherbone`): LiteEth's UDP/IP core and
Etherbone on the Ethernet PHY model, exactly as `add_etherbone_host` puts them
on a board, with the litex_sim module `soc/eth2udp.c` as the LAN -- no root,
no tap.  The host library and the CLI reach the drive over UDP
(`atomflash.transport.EtherboneTransport`), their writes are judged by the
model's oracle with several records in flight (the window that needed two
fixes to LiteEth, soc/etherbone.py), and the debug port beside it sees the same
data."""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
from pathlib import Path

import pytest

from atomflash import simctl, spec
from atomflash.device import Device, DeviceError
from atomflash.transport import EtherboneTransport, TransportError
from atomflash.workload import Recorder, random_workload, read_span, verify

pytestmark = [pytest.mark.soc, pytest.mark.xdist_group("etherbone")]

SPAN = 40
CLI = [sys.executable, "-m", "atomflash.cli"]


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    run = tmp_path_factory.mktemp("etherbone") / "run"
    simctl.start(run, simctl.SimConfig(etherbone=True), fresh=True)
    yield run
    simctl.stop(run, power_cut=True)


def cli(run, *args, rc=0):
    r = subprocess.run([*CLI, "--dir", str(run), *map(str, args)], capture_output=True, text=True, timeout=600,
                       stdin=subprocess.DEVNULL, env={**os.environ})
    assert r.returncode == rc, f"atomflash {' '.join(map(str, args))}: rc {r.returncode}\n{r.stdout}\n{r.stderr}"
    return r


def test_workload_over_etherbone_judged_by_the_model(run):
    try:
        dev = Device.attach_sim(run, port="etherbone")
        assert isinstance(dev.t, EtherboneTransport)
        n = dev.lba_size
        rec = Recorder(dev, initial={lba: bytes(n) for lba in range(SPAN)})
        random_workload(rec, random.Random(11), commands=24, span=SPAN, salt=11)
        assert verify(rec.model.history, read_span(dev, SPAN), lba_size=n, initial=rec.model.initial) == []
        t = dev.t
        assert t.window > 1 and t.resends == 0 and t.words_written > 0 and t.words_read > 0
        dev.close()
        # the debug port beside it: the same drive, the same data, and no frame dropped on the way in
        dbg = Device.attach_sim(run, port="debug")
        assert verify(rec.model.history, read_span(dbg, SPAN), lba_size=n, initial=rec.model.initial) == []
        csr = {f[1]: int(f[2], 0) for f in (line.split(",") for line in
                                           Path(simctl.status(run)["csr_csv"]).read_text().splitlines())
               if f[0] == "csr_register"}
        frames, dropped = (dbg.t.read(csr[f"ethrxbuf_{name}"], 1)[0] for name in ("frames", "dropped"))
        assert frames > 100 and dropped == 0, (frames, dropped)
        dbg.close()
    except TransportError:
        pytest.fail("the simulation ended unexpectedly:\n" + simctl.boot_text(run)[-3000:])


def test_cli_over_etherbone(run):
    st = json.loads(cli(run, "sim", "status", "--json").stdout)
    assert st["etherbone_port"] and st["config"]["etherbone"]
    ident = json.loads(cli(run, "--link", "etherbone", "identify", "--json").stdout)
    assert ident["magic"] == spec.IDENTIFY_MAGIC
    cli(run, "--link", "etherbone", "write", SPAN + 2, "--data", "udp", "--count", 2)
    out = cli(run, "--link", "etherbone", "read", SPAN + 2, "--count", 2).stdout.splitlines()
    assert len(out) == 2 and all("|udpudp" in line for line in out), out
    # a board's path (--board-csr with --etherbone), here to the simulation's gateway on the loopback
    board = ["--board-csr", st["csr_csv"], "--etherbone", f"127.0.0.1:{st['etherbone_port']}"]
    assert json.loads(cli(run, *board, "identify", "--json").stdout)["magic"] == spec.IDENTIFY_MAGIC
    out = cli(run, *board, "read", SPAN + 2, "--count", 2).stdout.splitlines()
    assert all("|udpudp" in line for line in out), out


def test_a_simulation_without_ethernet_says_so(tmp_path, run):
    csr = json.loads((run / "sim.json").read_text())["csr_csv"]
    (tmp_path / "sim.json").write_text(json.dumps({"csr_csv": csr, "port": 1, "etherbone_port": None}))
    with pytest.raises(DeviceError, match="no Ethernet port .*sim start --ethernet"):
        Device.attach_sim(tmp_path, port="etherbone")
