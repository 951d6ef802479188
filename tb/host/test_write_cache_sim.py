"""The FTL core's write cache in the full system (on by default in the
simulated SoC; `soc/sim.py --cache-pages`, `atomflash sim start
--cache-pages`): the firmware gives it main RAM and reports it, buffered
writes read back, FLUSH makes them durable, and a power cut loses only what
was never flushed -- judged by the model's oracle, which knows the cache from
IDENTIFY.volatile_cache; a clean `exit` flushes it.  In `make test-slow`."""

from __future__ import annotations

import random
import re

import pytest

from atomflash import simctl, spec
from atomflash.device import Device
from atomflash.transport import TransportError
from atomflash.workload import Recorder, random_workload, read_span, verify

pytestmark = [pytest.mark.soc, pytest.mark.slow]

CACHE_PAGES = spec.LIMITS.CACHE_PAGES     # the default build's
SPAN = 32


def console_counters(run_dir) -> dict[str, int]:
    out = simctl.console_command("stats", run_dir)
    return {k: int(v) for k, v in re.findall(r"^(cache_\w+)\s+(\d+)", out, re.M)}


def test_write_cache_in_the_soc(tmp_path):
    run = tmp_path / "run"
    cfg = simctl.SimConfig(cache_pages=CACHE_PAGES)
    simctl.start(run, cfg, fresh=True)
    try:
        dev = Device.attach_sim(run)
        assert dev.info.volatile_cache == CACHE_PAGES * dev.lba_size
        assert f"write cache: {CACHE_PAGES} pages" in simctl.console_command("info", run)
        n = dev.lba_size
        before = console_counters(run)
        assert before["cache_pages"] == CACHE_PAGES and before["cache_in"] == 0

        # buffered writes read back before any flush; an overwrite is coalesced
        dev.write(0, b"a" * n)
        dev.write(1, b"b" * n)
        dev.write(0, b"c" * n)
        assert dev.read(0) == b"c" * n and dev.read(1) == b"b" * n
        c = console_counters(run)
        assert c["cache_in"] == 3 and c["cache_coalesced"] == 1 and c["cache_dirty"] == 2
        dev.flush()
        c = console_counters(run)
        assert c["cache_dirty"] == 0 and c["cache_destaged"] >= 2

        # a random workload, then a power cut: only unflushed writes may be lost
        rec = Recorder(dev, initial={lba: bytes(n) for lba in range(2, SPAN)} | {0: b"c" * n, 1: b"b" * n})
        random_workload(rec, random.Random(11), commands=25, span=SPAN, salt=11)
        assert console_counters(run)["cache_in"] > 3
        dev.close()
        simctl.stop(run, power_cut=True)
        simctl.start(run, cfg)
        dev = Device.attach_sim(run)
        recovered = read_span(dev, SPAN)
        assert verify(rec.model.history, recovered, lba_size=n, initial=rec.model.initial) == []
        # and the device takes new work
        dev.write(SPAN, b"z" * n, fua=True)
        assert dev.read(SPAN) == b"z" * n
        # a clean exit flushes the cache: a buffered write survives it
        dev.write(SPAN + 1, b"y" * n)
        assert console_counters(run)["cache_dirty"] >= 1
        dev.close()
        simctl.stop(run)
        simctl.start(run, cfg)
        dev = Device.attach_sim(run)
        assert dev.read(SPAN + 1) == b"y" * n and dev.read(SPAN) == b"z" * n
        dev.close()
    except TransportError:
        pytest.fail("the simulation ended unexpectedly:\n" + simctl.boot_text(run)[-3000:])
    finally:
        simctl.stop(run, power_cut=True)
