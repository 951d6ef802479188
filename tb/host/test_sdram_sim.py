"""The board's memory system in the full simulated SSD (`soc/sim.py --sdram`,
`atomflash sim start --sdram`): main RAM in an SDR SDRAM (LiteDRAM's
``SDRAMPHYModel`` of the ULX3S's 16-bit part) behind LiteX's controller,
host memory on a LiteDRAM port of its own at the SDRAM's top
(:func:`soc.atomflash_soc.add_sdram_hostmem`), exactly as ``boards/ulx3s.py
--core ftl`` builds them.  The firmware initialises and tests the SDRAM
before its tables move in; then the host path, the console's selftest and a
power cycle (the SDRAM forgets, the flash does not) are judged by the
model's oracle.  A SoC build of its own (~5 minutes), so it is in
`make test-slow`."""

from __future__ import annotations

import random
import re

import pytest

from atomflash import simctl
from atomflash.device import Device
from atomflash.transport import TransportError
from atomflash.workload import Recorder, random_workload, read_span, verify

pytestmark = [pytest.mark.soc, pytest.mark.slow]

SPAN = 48


def test_ftl_on_sdram_main_ram_and_host_memory(tmp_path):
    run = tmp_path / "run"
    cfg = simctl.SimConfig(sdram=True)
    simctl.start(run, cfg, fresh=True)
    try:
        boot = simctl.boot_text(run)
        # liblitedram's init and memtest ran, and main RAM ends below host memory
        assert "Initializing SDRAM" in boot and "Memtest OK" in boot, boot[-3000:]
        assert "failed its test" not in boot
        main_kib = int(re.search(r"main RAM (\d+) KiB", boot).group(1))
        assert main_kib < 32 * 1024, boot[-2000:]   # 32 MiB SDRAM less host memory
        out = simctl.console_command("selftest", run, timeout=600)
        assert "main ram       pass" in out and "selftest: pass" in out, out   # incl. the core's DMA into SDRAM

        dev = Device.attach_sim(run)
        n = dev.lba_size
        rec = Recorder(dev, initial={lba: bytes(n) for lba in range(SPAN)})
        random_workload(rec, random.Random(5), commands=30, span=SPAN, salt=5)
        assert verify(rec.model.history, read_span(dev, SPAN), lba_size=n, initial=rec.model.initial) == []
        dev.close()

        # a power cycle: main RAM (SDRAM) starts over, recovery rebuilds the map from the flash
        simctl.stop(run, power_cut=True)
        simctl.start(run, cfg)
        dev = Device.attach_sim(run)
        assert verify(rec.model.history, read_span(dev, SPAN), lba_size=n, initial=rec.model.initial) == []
        dev.write(SPAN, b"s" * n, fua=True)
        assert dev.read(SPAN) == b"s" * n
        dev.close()
    except TransportError:
        pytest.fail("the simulation ended unexpectedly:\n" + simctl.boot_text(run)[-3000:])
    finally:
        simctl.stop(run, power_cut=True)
