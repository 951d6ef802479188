"""The simulated SoC as an NVMe drive (``atomflash sim start --nvme``): the RISC-V firmware runs the
controller's admin path, the host library is the root complex of the simulated PCIe link, and
``atomflash.Device`` and the CLI use the drive over NVMe with the verbs and errors of the debug port,
which stays beside it."""

from __future__ import annotations

import contextlib
import os
import re
import subprocess
import sys

import pytest

pytestmark = [pytest.mark.soc, pytest.mark.xdist_group("host_nvme")]   # the module's booted SoC

from atomflash import errors, nandsim, simctl
from atomflash.device import Device, NvmeDevice
from atomflash import spec
from atomflash.spec import NvmeCns, Status
from rtl.lib.trng import simulation_key

CLI = [sys.executable, "-m", "atomflash.cli"]
ENDURANCE = 20                  # the parameter page's rated erases per block: the few erases of a short run show in SMART
CFG = simctl.SimConfig(nvme=True, nand_set={"endurance": ENDURANCE})


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


def test_smart_percentage_used_is_the_flash_wear_and_nuse_the_blocks_in_use(run_dir):
    """SMART's Percentage Used is the mean erase count of the good blocks over the endurance the
    parameter page rates, as the console's `wear` reports the counts; Identify Namespace's NUSE counts
    written blocks and forgets deallocated ones."""
    with Device.attach_sim(run_dir, timeout=120) as dev:
        used = dev.host.smart().percentage_used

        def nuse():
            return spec.NVME_ID_NS.unpack(dev.host.identify(NvmeCns.NAMESPACE, nsid=1)[:spec.NVME_ID_NS.size]).nuse
        n = dev.lba_size
        dev.write(200, b"u" * 4 * n)
        dev.flush()
        before = nuse()
        dev.trim(200, 4)
        dev.flush()
        after = nuse()
        assert before - after == 4 and 4 <= before <= dev.identify()["capacity"], (before, after)
    wear = simctl.console_command("wear", run_dir)
    m = re.search(r"erase counts of (\d+) good blocks: min \d+, mean (\d+)\.(\d\d)", wear)
    assert m, wear
    mean_x100 = int(m[2]) * 100 + int(m[3])                # floor(100 x sum / n)
    assert used == mean_x100 // ENDURANCE and used > 0, wear
    assert f"life used: {used}% " in wear, wear



def test_smart_power_cycles_and_unsafe_shutdowns_persist_across_boots(run_dir):
    """SMART Power Cycles and Unsafe Shutdowns are kept in the anchor's records (firmware/anchor.c): a boot
    after a completed shutdown (CC.SHN, then CSTS.SHST complete) counts a power cycle and no unsafe
    shutdown; a boot after power lost without one, or after the host enabled the controller again once it
    had shut down, counts an unsafe shutdown too.  Each restart runs on the same NAND images, and before it
    sim/flashimg reads the newest record as the next boot will."""
    from atomflash.hostmem import HostMemory
    from atomflash.nvme import NvmeHost
    from atomflash.pcie_link import SimPcieLink
    from sim import flashimg

    profile = spec.NAND_PROFILES[CFG.profile]

    @contextlib.contextmanager
    def attach():
        # Device.attach_sim's, with more time than its host's 30 s for CSTS.RDY and CSTS.SHST: on a loaded
        # machine a shutdown's checkpoint, or the firmware's idle work after a boot, takes minutes of wall time
        memory = HostMemory()
        link = SimPcieLink(simctl.status(run_dir)["pcie_port"], memory)
        try:
            host = NvmeHost(link, memory, io_queues=2, timeout=900).initialize()
            with Device.attach_nvme(host, timeout=120) as dev:
                yield dev
        finally:
            link.close()

    def counters(dev):
        s = dev.host.smart()
        return s.power_cycles, s.unsafe_shutdowns

    def power_cycle(counted, clean):
        simctl.stop(run_dir, power_cut=True)
        images = [nandsim.Image(p) for p in simctl.status(run_dir)["images"]]
        try:
            rec = flashimg.read_anchor(flashimg.read_anchor_blocks(images, spec.nand_page_layout(profile)),
                                       profile.page_data)
        finally:
            for img in images:
                img.close()
        h = rec.header
        assert (h.format, (h.power_cycles, h.unsafe_shutdowns), bool(h.flags & spec.ANCHOR.FLAG_SHUTDOWN_CLEAN)) \
            == (spec.ANCHOR.FORMAT, counted, clean), h
        simctl.start(run_dir, CFG)
        assert "nvme: controller ready" in simctl.boot_text(run_dir)

    with attach() as dev:
        n = dev.lba_size
        cycles, unsafe = counters(dev)
        assert cycles >= 1
        dev.write(60, b"s" * n)
        dev.host.shutdown()                       # CC.SHN: flush, checkpoint, the clean record; SHST complete
    power_cycle((cycles, unsafe), clean=True)
    with attach() as dev:
        assert counters(dev) == (cycles + 1, unsafe)
        assert dev.read(60) == b"s" * n
        dev.write(61, b"u" * n, fua=True)         # durable past the write cache; then power lost without a
                                                  # shutdown notification
    power_cycle((cycles + 1, unsafe), clean=False)
    with attach() as dev:
        assert counters(dev) == (cycles + 2, unsafe + 1)
        dev.host.shutdown()
    with attach() as dev:                         # the host resets and enables the controller again: in use
        assert counters(dev) == (cycles + 2, unsafe + 1)
    power_cycle((cycles + 2, unsafe + 1), clean=False)
    with attach() as dev:
        assert counters(dev) == (cycles + 3, unsafe + 2)
        assert (dev.read(60), dev.read(61)) == (b"s" * n, b"u" * n)
    assert f"power        {cycles + 3} power cycles, {unsafe + 2} unsafe shutdowns" in simctl.console_command(
        "info", run_dir)


def test_tokens_and_transactions_are_their_queues_and_a_token_made_without_the_key_is_refused(run_dir):
    """Queue 2 cannot use queue 1's append token or transaction (it gets INVALID_TOKEN / UNKNOWN_TX and
    nothing changes), and a host that knows everything about an append but the key -- its slot, its
    generation, its first vseq (the console's `tx` prints it), its owner -- cannot make its token: not
    with the CRC the check once was, not with SipHash under another key.  With the simulation's key (its
    stand-in has no entropy: the seed gives it) the same construction makes the token the drive issued,
    so the refusals are the key's doing."""
    invalid_token, unknown_tx = errors.error_class(Status.INVALID_TOKEN), errors.error_class(Status.UNKNOWN_TX)
    with Device.attach_sim(run_dir, timeout=120) as a:
        b = Device.attach_nvme(a.host, qid=2, timeout=120)
        n = a.lba_size
        token = a.append(b"t" * n)
        for attempt in (lambda: b.remap([(300, token, 1)]), lambda: b.release(token)):
            with pytest.raises(invalid_token):
                attempt()
        a.tx_write(77, 301, b"x" * n)
        for attempt in (lambda: b.tx_commit(77), lambda: b.tx_abort(77), lambda: b.tx_read(77, 301)):
            with pytest.raises(unknown_tx):
                attempt()
        assert a.read(300) == bytes(n) and a.read(301) == bytes(n)
        a.tx_commit(77)
        assert a.read(301) == b"x" * n

        # the attack: everything but the key
        t = spec.split_token(token)
        floor = re.search(r"began at seq (\d+)", simctl.console_command("tx", run_dir))
        assert floor, "the console names the live append's first page"
        first = int(floor[1])
        owner = 0                                   # I/O queue 1 is the core's queue 0
        crc = int.from_bytes(spec.TOKEN.pack(handle=t.handle, gen=t.gen, check=spec.crc32(
            spec.TOKEN_MAC_IN.pack(first_vseq=first, handle=t.handle, gen=t.gen))), "little")
        guessed = spec.make_token(t.handle, t.gen, first, owner=owner, key=bytes(16))
        keyed = spec.make_token(t.handle, t.gen, first, owner=owner, key=simulation_key(1))
        assert keyed == token, "the attacker's construction is exact: only the key differs"
        for forged in (crc, guessed):
            assert forged != token
            for dev in (a, b):
                with pytest.raises(invalid_token):
                    dev.remap([(302, forged, 1)])
        with pytest.raises(invalid_token):
            b.remap([(302, keyed, 1)])              # even the real token: not queue 2's
        a.remap([(302, token, 1)])                  # untouched by every refusal
        assert a.read(302) == b"t" * n and a.read(300) == bytes(n)
        b.close()
