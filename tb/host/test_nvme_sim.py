"""The simulated SoC as an NVMe drive (``atomflash sim start --nvme``): the RISC-V firmware runs the
controller's admin path, the host library is the root complex of the simulated PCIe link, and
``atomflash.Device`` and the CLI use the drive over NVMe with the verbs and errors of the debug port,
which stays beside it."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

pytestmark = [pytest.mark.soc, pytest.mark.xdist_group("host_nvme")]   # the module's booted SoC

from atomflash import errors, simctl
from atomflash.device import Device, NvmeDevice
from atomflash.spec import Status

CLI = [sys.executable, "-m", "atomflash.cli"]
CFG = simctl.SimConfig(nvme=True)


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory):
    run = tmp_path_factory.mktemp("nvme") / "run"
    simctl.build(CFG)           # no timeout: another worker may hold the build's lock
    simctl.start(run, CFG, fresh=True)
    assert "nvme: controller ready" in simctl.boot_text(run)
    yield run
    simctl.stop(run, power_cut=True)


def test_every_verb_over_nvme_as_over_the_debug_port(run_dir):
    with Device.attach_sim(run_dir, timeout=120) as dev:
        assert isinstance(dev, NvmeDevice)
        n = dev.lba_size
        dev.write(5, b"a" * n + b"b" * n)
        dev.atomic_write([(30, b"c" * n), (2, b"d" * n)])
        with dev.transaction() as tx:
            tx.write(40, b"e" * n)
        token = dev.append(b"f" * 2 * n)
        dev.remap([(50, token, 2)])
        dev.trim(6)
        dev.flush()
        assert dev.read(5, 2) == b"a" * n + bytes(n)
        assert (dev.read(30), dev.read(2), dev.read(40), dev.read(50, 2)) == (b"c" * n, b"d" * n, b"e" * n, b"f" * 2 * n)
        with pytest.raises(errors.error_class(Status.LBA_OUT_OF_RANGE)):
            dev.read(dev.identify()["capacity"])
        with pytest.raises(errors.error_class(Status.UNKNOWN_TX)):
            dev.tx_commit(12345)
        nvme_identify = dev.identify()
        assert dev.stats()["host_write_pages"] >= 6        # atomflash's statistics page, log page C0h
    with Device.attach_sim(run_dir, port="debug", timeout=120) as debug:
        ident = debug.identify()
        for field in ("capacity", "lba_size", "max_transfer", "max_atomic_pages", "max_open_tx", "max_appends"):
            assert nvme_identify[field] == ident[field], field
        assert debug.read(50, 2) == b"f" * 2 * n            # one drive behind both ports


def test_the_cli_over_nvme(run_dir, tmp_path):
    env = {**os.environ, "ATOMFLASH_RUN_DIR": str(run_dir)}

    def cli(*args):
        r = subprocess.run([*CLI, *map(str, args)], capture_output=True, text=True, env=env, timeout=600,
                           stdin=subprocess.DEVNULL)
        assert r.returncode == 0, f"atomflash {' '.join(map(str, args))}: rc {r.returncode}\n{r.stdout}\n{r.stderr}"
        return r.stdout

    cli("write", 100, "--data", "nvme", "--count", 2)
    cli("read", 100, "--count", 2, "--out", tmp_path / "back")
    data = (tmp_path / "back").read_bytes()
    assert data[:4] == b"nvme" and len(data) == 2 * 2048
