"""Testbench around ``tb_nand_model``: configuration, control port, statistics.

Every cocotb test starts with ``tb = await NandTB.create(dut, name, ...)``,
which writes a fresh config for target 0 (and optionally target 1) and
power-cycles the model onto a new image through the control port -- so one
simulation process runs many configurations without rebuilding anything.
"""

from __future__ import annotations

from pathlib import Path

import cocotb
from cocotb.triggers import Timer

from atomflash.nandsim import Image, NandConfig, NandCtl, NandCutWhen, NandStat, read_stats
from onfi_host import NvDdr2Host
from sim.harness.nandctl import model_ctl



class NandTB:
    def __init__(self, dut, name: str):
        self.dut = dut
        self.name = name
        self.period_ps = int(cocotb.plusargs.get("clk_period_ps", 10000))
        self.workdir = Path(cocotb.plusargs["nandtb_dir"])
        self.host = NvDdr2Host(dut, self.period_ps)
        self.cfg: dict[int, NandConfig] = {}

    @classmethod
    async def create(cls, dut, name: str, *, fresh: bool = True, target1: dict | None = None, **cfg) -> "NandTB":
        tb = cls(dut, name)
        # Let the models' initial blocks open their boot configs before these are rewritten.
        await Timer(2 * tb.period_ps, "ps")
        await tb.configure(0, fresh=fresh, **cfg)
        if target1 is not None:
            await tb.configure(1, fresh=fresh, **target1)
        await tb.host.align()
        return tb

    def model(self, target: int = 0):
        return getattr(self.dut, f"target{target}")

    def config_path(self, target: int) -> Path:
        return Path(cocotb.plusargs[f"nand{target}_config"])

    def image_path(self, target: int = 0, suffix: str = "") -> Path:
        return self.workdir / f"{self.name}{suffix}.t{target}.img"

    async def configure(self, target: int = 0, *, fresh: bool = True, profile: str = "small", **kw) -> NandConfig:
        """Write target's config and power-cycle it onto it (``fresh``: delete the image first)."""
        kw.setdefault("image", self.image_path(target))
        kw.setdefault("clk_period_ps", self.period_ps)
        cfg = NandConfig(profile, **kw)
        if fresh:
            for p in (Path(cfg["image"]), cfg.stats_path()):
                if p.exists():
                    p.unlink()
        cfg.write(self.config_path(target))
        self.cfg[target] = cfg
        assert await self.ctl(NandCtl.RELOAD, target=target) == 0, f"target {target} did not power on"
        return cfg

    async def power_cycle(self, target: int = 0) -> None:
        """Restart on the same image with the same config (as after a power cut)."""
        self.cfg[target].write(self.config_path(target))
        assert await self.ctl(NandCtl.RELOAD, target=target) == 0

    # -- control port -----------------------------------------------------
    async def ctl(self, op: int, a0: int = 0, a1: int = 0, a2: int = 0, *, target: int = 0) -> int:
        return await model_ctl(self.model(target), self.period_ps, op, a0, a1, a2)

    async def stat(self, name: str, arg: int = 0, target: int = 0) -> int:
        return await self.ctl(NandCtl.STAT, int(NandStat[name]), arg, target=target)

    async def stats(self, target: int = 0) -> dict:
        assert await self.ctl(NandCtl.DUMP_STATS, target=target) == 0
        return read_stats(self.cfg[target].stats_path())

    async def schedule_cut(self, when: NandCutWhen, value: int, progress: float = 0.5, target: int = 0) -> None:
        assert await self.ctl(NandCtl.SCHEDULE_CUT, int(when), value, int(progress * 1000), target=target) == 0

    def image(self, target: int = 0) -> Image:
        return Image(self.cfg[target]["image"])

    def power_lost(self, target: int = 0) -> bool:
        return bool(int(self.model(target).power_lost.value))

    def row(self, block: int, page: int, lun: int = 0, target: int = 0) -> int:
        return self.cfg[target].geometry.row(lun, block, page)

    async def expect_clean(self, target: int = 0) -> dict:
        """Statistics, asserting no timing violation and no protocol error happened."""
        s = await self.stats(target)
        assert s["violations_total"] == 0, s["violation_log"]
        assert s["protocol_errors"] == 0, s["error_log"]
        return s


def pattern(n: int, seed: int = 0) -> bytes:
    """Deterministic test bytes with both 0 and 1 bits everywhere."""
    x = (seed * 2654435761 + 12345) & 0xFFFFFFFF
    out = bytearray()
    for _ in range(n):
        x = (x * 1103515245 + 12345) & 0xFFFFFFFF
        out.append((x >> 16) & 0xFF)
    return bytes(out)


__all__ = ["NandTB", "pattern"]
