"""The NAND models' control port on the SoC bus (soc/nand_sim.py
NandModelControl, ``atomflash.simctl.NandControl``): a host arms power cuts
counted from the moment it asks -- the k-th program of one target, or an
instant from now on every target -- which is how the power-fault campaign
cuts inside its workloads."""

from __future__ import annotations

import json
import time

import pytest

from atomflash import simctl
from atomflash.device import Device
from atomflash.nandsim import NandCtl, NandCutWhen, NandStat
from atomflash.transport import TransportError

pytestmark = pytest.mark.soc


def _stats(run, target: int) -> dict:
    return json.loads((run / f"nand{target}.img.stats.json").read_text())


def test_a_program_cut_armed_from_the_host_lands_on_the_kth_program_from_now(tmp_path):
    run = tmp_path / "run"
    simctl.start(run, simctl.SimConfig(blocks_per_lun=4, nand_set={"power_cut_finish": 1}), fresh=True)
    try:
        dev = Device.attach_sim(run, timeout=300)
        ctl = simctl.NandControl.attach(dev.t, run)
        c0 = ctl.cycle()
        assert ctl.cycle() > c0 > 0                     # the models' clock runs
        assert ctl.run([0, 1, 2, 3], NandCtl.NOP) == 0
        before = [ctl.run([t], NandCtl.STAT, NandStat.PROGRAMS) for t in range(4)]
        dev.write(0, b"w" * dev.lba_size, fua=True)      # past the write cache: programmed at once
        after = [ctl.run([t], NandCtl.STAT, NandStat.PROGRAMS) for t in range(4)]
        assert sum(after) > sum(before), (before, after)  # STAT answers per target, live
        with pytest.raises(simctl.SimError, match="refused"):   # k must be >= 1
            ctl.schedule_cut([2], NandCutWhen.PROGRAM_KIND, 0, kind=1)
        armed_at = ctl.run([2], NandCtl.STAT, NandStat.PROGRAMS)
        ctl.schedule_cut([2], NandCutWhen.PROGRAM, 3, progress=0.5)
        with pytest.raises(TransportError):
            for i in range(200):
                dev.write(1 + i % 64, bytes([i & 0xFF]) * dev.lba_size)
        dev.close()
        simctl.wait_exit(run, timeout=120)
        assert "nand2: power lost" in simctl.boot_text(run)
        assert _stats(run, 2)["programs"] == armed_at + 3
    finally:
        simctl.stop(run, power_cut=True)


def test_a_timed_cut_ends_an_idle_simulation_on_time(tmp_path):
    run = tmp_path / "run"
    clk_hz = 100_000_000
    simctl.start(run, simctl.SimConfig(blocks_per_lun=4, nand_set={"power_cut_finish": 1}), fresh=True)
    try:
        dev = Device.attach_sim(run, timeout=300)
        ctl = simctl.NandControl.attach(dev.t, run)
        now = ctl.cycle()
        ctl.schedule_cut(range(4), NandCutWhen.AT_TIME, ns=500_000, clk_hz=clk_hz)   # 0.5 ms from now
        deadline = time.monotonic() + 120
        with pytest.raises(TransportError):
            while time.monotonic() < deadline:       # nothing for the NAND to do: the cut comes anyway
                ctl.cycle()
                time.sleep(0.05)
        dev.close()
        simctl.wait_exit(run, timeout=120)
        text = simctl.boot_text(run)
        cut_cycles = [int(line.split("cycle")[1].split()[0]) for line in text.splitlines() if "power lost at cycle" in line]
        assert len(cut_cycles) == 4, text[-2000:]
        # every model cut at the instant asked for (the models count cycles from power-on, as nandctl_cycle)
        assert all(now + 50_000 <= c <= now + 60_000 for c in cut_cycles), (now, cut_cycles)
    finally:
        simctl.stop(run, power_cut=True)
