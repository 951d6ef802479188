"""System test: a lazily loaded segment never overwrites what was written while it was out of memory.

Until its segment loads, an L2P entry holds ``PPA_NOT_LOADED``; the map
cache's gate keeps the core away from such segments.  Were anything to write
an entry there anyway, a load that put the checkpoint's older version back
would leave a clean map-cache line naming the newer one over a table naming
the older one: the next checkpoint would record the older version, GC could
erase it, and the next boot would lose the LBA.  So a load keeps such an
entry and says so.  Here the host writes one entry of a segment not loaded
yet straight into SoC memory (the debug bridge reaches all of it), then the
rest of the map loads: the entry must still hold the host's value, and the
console must say which entry was kept.
"""

from __future__ import annotations

import json
import re

import pytest

from atomflash import simctl
from atomflash.transport import UartBoneTransport

pytestmark = pytest.mark.soc

CFG = simctl.SimConfig(blocks_per_lun=16)   # ~2,500 LBAs: about 20 segments, most not loaded right after boot


def con(run, line: str, timeout: float = 300) -> str:
    out = simctl.console_command(line, run, timeout=timeout)
    return out


def test_a_segment_load_keeps_entries_written_before_it(tmp_path):
    run = tmp_path / "run"
    simctl.start(run, CFG, fresh=True)
    try:
        assert "off" in con(run, "ckpt every 0")
        for seed, lba in ((3, 0), (4, 1200), (5, 2300)):
            assert "wrote 8 blocks" in con(run, f"io write {seed} {lba} 8")
        assert "taken" in con(run, "ckpt now")
    finally:
        simctl.stop(run)
    simctl.start(run, CFG)
    try:
        out = con(run, "map load pause")
        m = re.search(r"map: (\d+) of (\d+) segments of (\d+) LBAs loaded", out)
        assert m, out
        loaded, nseg, per = map(int, m.groups())
        assert loaded < nseg, out
        table = int(re.search(r"the table at 0x([0-9a-f]+)", out).group(1), 16)
        capacity = int(re.search(r"host interface on: capacity (\d+) LBAs", simctl.boot_text(run)).group(1))
        value = int(re.search(r"now: ppa 0x([0-9a-f]+)", con(run, "map 0")).group(1), 16)   # LBA 0's page
        port = json.loads((run / "sim.json").read_text())["port"]
        t = UartBoneTransport(port)
        try:
            # an LBA the host may use in a segment not loaded yet (spec.PPA_NOT_LOADED in the table)
            lba = next(x for x in range(capacity - 1, 0, -per) if t.read(table + 4 * x, 1) == [0xFFFF_FFFE])
            t.write(table + 4 * lba, [value])
        finally:
            t.close()
        seg = lba // per
        out = con(run, "map load all")
        assert re.search(rf"error: map: segment {seg}: 1 entries written before it was loaded "
                         rf"\(LBA {lba}: 0x{value:08x}\), kept", out), out
        assert re.search(r"1 entries were written before their segment loaded", out), out
        assert f"now: ppa 0x{value:08x}" in con(run, f"map {lba}")
        # the loads went on around it: what the checkpoint holds reads back
        for seed, lba in ((3, 0), (4, 1200), (5, 2300)):
            assert "pass" in con(run, f"io check {seed} {lba} 8")
    finally:
        simctl.stop(run, power_cut=True)
