"""cocotb testbench for ``tb_nand_controller``: NAND controller + NAND models.

``ChannelTB`` configures every model (one per target, through the control
port: write config, RELOAD), programs the timing registers, issues
descriptors, fills/reads page buffer slots and collects completions.  Python
runs only at those moments; everything per-cycle is HDL or C++.
"""

from __future__ import annotations

import random
from pathlib import Path

import cocotb
from cocotb.triggers import Event, FallingEdge, ReadOnly, RisingEdge, Timer

from atomflash import spec
from atomflash.nandsim import NandConfig, NandCtl, NandStat, read_stats
from atomflash.spec import NandOp, NandResult, OnfiFeature, OnfiInterface
from rtl.nand.pagebuf import HOST_READ_LATENCY
from rtl.nand.timing import TIMING, choose_nvddr2_mode, nvddr2_modes_fitting, nvddr2_timing_cycles, timing_cycles
from .nandctl import model_ctl



# Round trip in the harness: the model timestamps an RE# fall on the edge after
# the PHY drives it (+1), and the PHY samples the model's registered DQ on the
# edge after the model drives it (+1): a byte is sampled tREA + 2 cycles after
# the PHY's fall.  At modes 4-5 that is after the next fall; the model's EDO
# hold (tRLOH) keeps the byte there, as a real part does.  A board adds its
# I/O registers the same way; tSAMPLE is the knob for both.
HARNESS_SAMPLE_CYCLES = 2


def timing_word(mode: int, clk_hz: int = spec.NAND_CLK_HZ, sample: int = HARNESS_SAMPLE_CYCLES) -> int:
    return TIMING.const(timing_cycles(mode, clk_hz, sample)).as_bits()


class ChannelTB:
    def __init__(self, dut, channels: int, ways: int, profile: str, slot_words: int, name: str = "t"):
        self.dut, self.channels, self.ways = dut, channels, ways
        self.profile = spec.NAND_PROFILES[profile]
        self.layout = spec.nand_page_layout(self.profile)
        self.slot_words = slot_words
        self.period_ps = int(cocotb.plusargs.get("clk_period_ps", 10**12 // spec.NAND_CLK_HZ))
        # the NV-DDR2 harness clocks the models faster (sim.harness.nand_channel.DDR_MODEL_CLK_DIV)
        self.model_period_ps = self.period_ps // int(cocotb.plusargs.get("nand_model_clk_div", 1))
        self.workdir = Path(cocotb.plusargs["nandtb_dir"])
        self.name = name
        self.cfg: dict[int, NandConfig] = {}
        self.cpls: list = []
        self.cpl_event = Event()
        self.clk = dut.clk

    @classmethod
    async def create(cls, dut, *, channels, ways, profile, slot_words, name, mode=0, **model_cfg):
        tb = cls(dut, channels, ways, profile, slot_words, name)
        dut.desc_valid.value = 0
        dut.cpl_ready.value = 0
        for c in range(channels):
            if hasattr(dut, f"buf{c}_w_en"):   # harnesses whose page buffers belong to the design have none
                getattr(dut, f"buf{c}_w_en").value = 0
        dut.rst.value = 1
        for i in range(channels * ways):
            await tb.configure(i, timing_mode=mode, **model_cfg)
        tb.set_mode(mode)
        for _ in range(4):
            await RisingEdge(tb.clk)
        dut.rst.value = 0
        cocotb.start_soon(tb._collect())
        return tb

    # -- models ------------------------------------------------------------------
    def model(self, index):
        return getattr(self.dut, f"target{index}")

    def index(self, channel, target):
        return channel * self.ways + target

    async def configure(self, index, **kw):
        kw.setdefault("image", self.workdir / f"{self.name}.n{index}.img")
        kw.setdefault("clk_period_ps", self.model_period_ps)
        kw.setdefault("seed", 100 + index)
        cfg = NandConfig(self.profile.name, **kw)
        for p in (Path(cfg["image"]), cfg.stats_path()):
            if p.exists():
                p.unlink()
        cfg.write(Path(cocotb.plusargs[f"nand{index}_config"]))
        self.cfg[index] = cfg
        assert await self.ctl(index, NandCtl.RELOAD) == 0

    async def ctl(self, index, op, a0=0, a1=0, a2=0):
        return await model_ctl(self.model(index), self.period_ps, op, a0, a1, a2)

    async def stat(self, index, name):
        return await self.ctl(index, NandCtl.STAT, int(NandStat[name]))

    async def stats(self, index) -> dict:
        """Model ``index``'s statistics file, written now."""
        assert await self.ctl(index, NandCtl.DUMP_STATS) == 0
        return read_stats(self.cfg[index].stats_path())

    async def expect_clean(self):
        """No model saw a timing violation or a protocol error."""
        for i in range(self.channels * self.ways):
            assert await self.ctl(i, NandCtl.DUMP_STATS) == 0
            s = read_stats(self.cfg[i].stats_path())
            assert s["violations_total"] == 0, (i, s["violation_log"])
            assert s["protocol_errors"] == 0, (i, s["error_log"])

    def set_mode(self, mode):
        self.dut.timing_w.value = timing_word(mode, 10**12 // self.period_ps)

    def set_nvddr2_mode(self, mode):
        """The timing registers for NV-DDR2 ``mode`` (rtl.nand.timing.nvddr2_timing_cycles)."""
        self.dut.timing_w.value = TIMING.const(
            nvddr2_timing_cycles(mode, 10**12 // self.period_ps, HARNESS_SAMPLE_CYCLES)).as_bits()

    async def wait_ns(self, ns):
        await Timer(ns * 1000, "ps")
        await RisingEdge(self.clk)

    async def bring_up_nvddr2(self, channel, target, controller_max=max(spec.ONFI_NVDDR2_MODES), slot=0):
        """The NV-DDR2 negotiation, as bring-up runs it: RESET in SDR mode 0, READ PARAMETER PAGE, the
        fastest NV-DDR2 mode both sides support by SET FEATURES 01h, tITC, then that mode's timing.
        Returns the mode (None: the part has no NV-DDR2, the bus stays SDR mode 0)."""
        self.set_mode(0)
        cpl = await self.do(opcode=NandOp.RESET, channel=channel, target=target)
        assert cpl.result == NandResult.OK, cpl
        cpl = await self.do(opcode=NandOp.READ_PARAM, channel=channel, target=target, length=256, slot=slot)
        assert cpl.result == NandResult.OK, cpl
        page = await self.read_slot(channel, slot, 0, 256)
        mode = choose_nvddr2_mode(page, nvddr2_modes_fitting(10**12 // self.period_ps), controller_max)
        if mode is None:
            return None
        await self.write_slot(channel, slot, 0, bytes([OnfiInterface.NV_DDR2 << 4 | mode, 0, 0, 0]))
        cpl = await self.do(opcode=NandOp.SET_FEATURES, channel=channel, target=target,
                            column=OnfiFeature.TIMING_MODE, length=4, slot=slot)
        assert cpl.result == NandResult.OK, cpl
        await self.wait_ns(spec.ONFI_NVDDR2_TIMING_PS["tITC"][mode] // 1000)
        self.set_nvddr2_mode(mode)
        return mode

    async def reset_to_sdr(self, channel, target):
        """RESET, which a part takes in SDR mode 0 whatever interface it runs, and leaves it in."""
        self.set_mode(0)
        cpl = await self.do(opcode=NandOp.RESET, channel=channel, target=target)
        assert cpl.result == NandResult.OK, cpl

    # -- descriptors and completions --------------------------------------------------
    async def submit(self, **fields):
        self.dut.desc_payload.value = int.from_bytes(spec.NAND_DESC.pack(fields), "little")
        self.dut.desc_valid.value = 1
        while True:
            await ReadOnly()
            if int(self.dut.desc_ready.value):
                await RisingEdge(self.clk)      # the handshake happens on this edge
                break
            await RisingEdge(self.dut.desc_ready)   # queue full: sleep until it has room
        await FallingEdge(self.clk)
        self.dut.desc_valid.value = 0

    async def _collect(self):
        while True:
            if not int(self.dut.cpl_valid.value):
                await RisingEdge(self.dut.cpl_valid)
            await FallingEdge(self.clk)
            payload = int(self.dut.cpl_payload.value)
            self.dut.cpl_ready.value = 1
            await RisingEdge(self.clk)
            await FallingEdge(self.clk)
            self.dut.cpl_ready.value = 0
            self.cpls.append(spec.NAND_CPL.unpack(payload.to_bytes(spec.NAND_CPL.size, "little")))
            self.cpl_event.set()

    async def wait_cpls(self, n, timeout_cycles=50_000_000):
        deadline = int(self.dut.cycle.value) + timeout_cycles
        while len(self.cpls) < n:
            self.cpl_event.clear()
            await self.cpl_event.wait()
            assert int(self.dut.cycle.value) < deadline, "completion timeout"
        return self.cpls

    async def do(self, **fields):
        """Submit one descriptor and return its completion."""
        n = len(self.cpls)
        await self.submit(**fields)
        await self.wait_cpls(n + 1)
        return self.cpls[n]

    # -- page buffer ------------------------------------------------------------------
    async def write_slot(self, channel, slot, offset, data: bytes):
        assert offset % 4 == 0
        data = bytes(data) + bytes(-len(data) % 4)
        addr, wen, wdata = (getattr(self.dut, f"buf{channel}_{n}") for n in ("addr", "w_en", "w_data"))
        await FallingEdge(self.clk)
        base = slot * self.slot_words + offset // 4
        for i in range(0, len(data), 4):
            addr.value = base + i // 4
            wdata.value = int.from_bytes(data[i:i + 4], "little")
            wen.value = 0xF
            await FallingEdge(self.clk)
        wen.value = 0

    async def read_slot(self, channel, slot, offset, length) -> bytes:
        """A word an edge, each word's data HOST_READ_LATENCY edges after its address."""
        addr, rdata = getattr(self.dut, f"buf{channel}_addr"), getattr(self.dut, f"buf{channel}_r_data")
        first, last = offset // 4, (offset + length + 3) // 4
        out = bytearray()
        await FallingEdge(self.clk)
        for i in range(last - first + HOST_READ_LATENCY):
            if i >= HOST_READ_LATENCY:
                out += int(rdata.value).to_bytes(4, "little")
            addr.value = slot * self.slot_words + first + min(i, last - first - 1)
            await FallingEdge(self.clk)
        return bytes(out[offset - 4 * first:][:length])


def random_bytes(rng: random.Random, n: int) -> bytes:
    return rng.getrandbits(8 * n).to_bytes(n, "little")


__all__ = ["ChannelTB", "random_bytes", "timing_word", "NandOp", "HARNESS_SAMPLE_CYCLES"]
