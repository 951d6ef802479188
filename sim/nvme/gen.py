"""The Verilator top of the whole NVMe drive under cocotbext-pcie's root complex.

The drive (``rtl.nvme.drive.NvmeDrive``: the NVMe controller in front of the FTL core) meets the
host through the simulated PCIe endpoint of ``sim/pcie``, and the flash through the NAND models of
``sim/harness``.  Two generated modules make the top:

::

    tb_nvme_drive (SystemVerilog, the Verilator top; sim.harness.nand_channel.generate_top)
    │  ports: the hard block's side of LitePCIe's adapters (user_clk, user_reset, s_axis_rq_*, ...)
    │
    ├── atomflash_nvme_pcie pcie (Migen: SimUSPPCIEPHY + soc.pcie.PcieEndpoint, sys = user_clk)
    │     BAR0 user region ──────────────► nvme_bar    (Wishbone, word addressed)
    │     HostDmaPort on the endpoint's DMA ◄── nvme_dma  (bus master = the function's BME)
    │     PcieMSIX irqs ◄───────────────── nvme_msix  (one message per vector value)
    │
    ├── <drive> dut (Amaranth's Verilog of NvmeDrive; clk = user_clk, reset = rst | user_reset)
    │     bus[c] ──► nand_model target<i> (one per target, DQ OR-ed per channel)
    │     mem ─────► mem[] (SoC memory: one wait state, bursts, FFh at power-on, err past the end)
    │     regs, free, closed, seq_load, capacity, ..., desc/cpl, fw_buf, nvme_fw, nvme_fw_irq
    │         └── harness signals of the same names, which cocotb drives and reads (the firmware)
    └── cycle (a cycle counter)

The SystemVerilog top is ``generate_top``'s harness of the bare FTL core (``sim/harness/ftl_core``)
taking its clock from the PCIe model instead of making one, so whatever plays the firmware for the
bare core (``FtlCoreTB``) plays it here on the same signal names; the ``clk_period_ps`` plusarg
(:func:`plusargs`) tells the NAND models and the testbench the user clock's period (4 ns).  The
endpoint's ports are the top's, as ``sim/pcie``'s are, so ``PcieTB`` drives them as it drives
that top.  The endpoint's BAR0 user region (``[0, msix_table_offset)``) is the drive's ``nvme_bar``;
its MSI-X table has one entry per vector the controller raises: 1 + ``queues``, vector 0 the admin
CQ's (``spec.NVME.MSIX_VECTORS`` with the I/O queues built).  The PCIe identity is NVMe's
(:func:`pcie_config`).

SoC memory holds the core's tables and the controller's staging areas (``NvmeDrive.staging_bytes``);
cocotb reads and writes ``mem`` by VPI, never word by word on the clock.  Only the top's signals and
the models' control ports are visible to VPI (``sim/verilator/nvme_drive_public.vlt``), which keeps
the build to a few minutes.

:func:`build` returns ``runner.run``'s arguments, one Verilator build shared by every test of a
configuration; its ``extra_env`` ``NVME_SIM`` (JSON) tells the testbench the build's sizes.
"""

from __future__ import annotations

import json
from pathlib import Path

from amaranth.hdl import Shape, Value
from amaranth.lib.wiring import In
from migen import Cat, ClockDomain, ClockSignal, ResetSignal, Signal

from litex.gen import LiteXModule
from litex.soc.interconnect import wishbone

from atomflash import nandsim, spec
from rtl.nvme.drive import NvmeDrive
from rtl.nvme.hostdma import DONE, REQUEST, WORD
from sim.harness import runner
from sim.harness.ftl_core import MAX_APPENDS, MAX_OPEN_TX, MAX_PENDING, firmware_ports, memory
from sim.harness.nand_channel import MODEL, generate_top, model_plusargs
from sim.pcie.gen import write_top
from sim.pcie.support import SimUSPPCIEPHY, hard_block_ports
from soc.pcie import HostDmaPort, PcieConfig, PcieEndpoint

TOPLEVEL = "tb_nvme_drive"
PCIE_MODULE = "atomflash_nvme_pcie"
OUT_DIR = runner.BUILD / "nvme"
MEM_WORDS = 1 << 18            # 1 MiB of SoC memory, the least a build gets: the core's tables, the staging areas at the top
CORE_BYTES = 256 * 1024       # at least this much below the staging areas (at the top) for the core's tables
QUEUES, CONTEXTS = 2, 4        # small: the tests' sizes
SLOTS, NAND_SLOTS = 8, 5       # the core's publisher slots and page-buffer slots per channel
#: the drive's ports the endpoint serves
LINK = ("nvme_bar", "nvme_dma", "nvme_msix")
#: the drive's ports the testbench drives besides the core's (``sim.harness.ftl_core``'s list)
FIRMWARE = ("nvme_fw", "nvme_fw_irq")


def pcie_config(queues: int = QUEUES) -> PcieConfig:
    """The endpoint as an NVMe function: NVMe's ids and class code, an MSI-X vector per CQ."""
    return PcieConfig(vendor_id=spec.NVME.VENDOR_ID, device_id=spec.NVME.DEVICE_ID,
                      class_code=spec.NVME.PCI_CLASS, msix_vectors=1 + queues)


def drive_ports(drive: NvmeDrive, groups) -> list[tuple[str, int, str]]:
    """``(name, width, "in"/"out")`` of the drive's ports under ``groups``, as the Verilog names
    them (``nvme_dma__req__payload``); "in": into the drive."""
    ports = []
    for path, member, value in drive.signature.flatten(drive):
        if path[0] in groups:
            ports.append(("__".join(map(str, path)), len(Value.cast(value)), "in" if member.flow == In else "out"))
    return ports


def _fields(layout) -> list[tuple[str, int, int]]:
    """``(name, offset, width)`` of an Amaranth struct layout, as its flat Verilog payload holds them."""
    return sorted(((name, f.offset, Shape.cast(f.shape).width) for name, f in layout), key=lambda f: f[1])


class _UserRegion(LiteXModule):
    """BAR0's user region as a Wishbone initiator, for the top to bring out."""

    def __init__(self):
        self.bus = wishbone.Interface(data_width=32)


class NvmePcieTop(LiteXModule):
    """The endpoint on the simulation PHY (``sys`` = the model's user clock) with the drive's link
    ports: ``ports`` = ``drive_ports(drive, LINK)``, each a port of this module of the same name and
    the opposite direction."""

    def __init__(self, config: PcieConfig, ports):
        phy = SimUSPPCIEPHY(config)            # a submodule of the endpoint
        self.pcie = PcieEndpoint(phy, config, user=lambda endpoint: _UserRegion())
        self.host_dma_port = HostDmaPort(self.pcie.dma, bus_master=self.pcie.bus_master_enable)
        self.cd_sys = ClockDomain()
        self.comb += [ClockSignal("sys").eq(ClockSignal("pcie")), ResetSignal("sys").eq(ResetSignal("pcie"))]
        s = {}
        for name, width, _ in ports:
            s[name] = Signal(width)
            s[name].name_override = name
        self.ios = phy.hard.ios() | set(s.values())

        # BAR0's user region: the controller's registers and doorbells
        bar = self.pcie.user.bus
        assert config.msix_table_offset // 4 <= 1 << len(s["nvme_bar__adr"]), "BAR0's user region outgrows nvme_bar"
        self.comb += [s[f"nvme_bar__{n}"].eq(getattr(bar, n)) for n in ("adr", "dat_w", "sel", "cyc", "stb", "we")]
        self.comb += [getattr(bar, n).eq(s[f"nvme_bar__{n}"]) for n in ("dat_r", "ack", "err")]

        # host DMA: the flat payloads of HostDmaSignature onto HostDmaPort's fields
        port = self.host_dma_port

        def unpack(endpoint, payload, layout):
            return [getattr(endpoint, n).eq(payload[o:o + w]) for n, o, w in _fields(layout)]

        def pack(endpoint, layout):
            return Cat(*(getattr(endpoint, n) for n, _, _ in _fields(layout)))

        for stream, layout, inward in (("req", REQUEST, True), ("wdata", WORD, True),
                                       ("rdata", WORD, False), ("done", DONE, False)):
            ep, pre = getattr(port, stream), f"nvme_dma__{stream}__"
            if inward:
                self.comb += [ep.valid.eq(s[pre + "valid"]), s[pre + "ready"].eq(ep.ready),
                              *unpack(ep, s[pre + "payload"], layout)]
            else:
                self.comb += [s[pre + "valid"].eq(ep.valid), ep.ready.eq(s[pre + "ready"]),
                              s[pre + "payload"].eq(pack(ep, layout))]

        # MSI-X: a vector per message; PcieMSIX holds it pending until the host lets it go
        irqs = self.pcie.msix.irqs
        self.comb += [s["nvme_msix__ready"].eq(1),
                      irqs.eq(Cat(*(s["nvme_msix__valid"] & (s["nvme_msix__payload"] == v)
                                    for v in range(len(irqs)))))]


def mem_words_for(staging_bytes: int) -> int:
    """The SoC memory a build needs: the core's tables (``CORE_BYTES``) below the staging areas,
    rounded up to a power of two of words, never below ``MEM_WORDS``."""
    words = (CORE_BYTES + staging_bytes + 0xFFF) // 4
    return max(MEM_WORDS, 1 << (words - 1).bit_length())


def generate(drive: NvmeDrive, drive_module: str, config: PcieConfig,
             mem_words: int = MEM_WORDS) -> tuple[list[Path], Path]:
    """The endpoint's Verilog (and LitePCIe's adapters) and the top's SystemVerilog, each in files
    of this build's own (``drive_module``), so builds of other sizes can run side by side."""
    link = drive_ports(drive, LINK)
    assert drive.queues + 1 == config.msix_vectors, "an MSI-X vector per completion queue"
    pcie_sources = write_top(lambda: NvmePcieTop(config, link), PCIE_MODULE, OUT_DIR / drive_module,
                             config.data_width)
    hard = hard_block_ports(config.data_width)
    top_ports = tuple(f"{'input' if d == 'in' else 'output'} wire [{w - 1}:0] {n}" for n, w, d in hard)
    extra = (*firmware_ports(drive.core),
             *((d, w, n) for n, w, d in drive_ports(drive, FIRMWARE)),
             # the link ports: the drive's inputs among them are the endpoint's outputs
             *(("wire" if d == "in" else "out", w, n) for n, w, d in link))
    text = generate_top(drive.core.channels, drive.core.ways, module=drive_module, buffers=False, extra=extra,
                        top=TOPLEVEL, ports=top_ports, clock="user_clk", reset="rst | user_reset")
    conns = [f".{n}({n})" for n, _, _ in hard] + [f".{n}({n})" for n, _, _ in link]
    body = f"    {PCIE_MODULE} pcie (" + ", ".join(conns) + ");\n" + memory(mem_words)
    text = text.replace("\nendmodule\n", "\n" + body + "endmodule\n")
    sv = runner.write_if_changed(OUT_DIR / drive_module / f"{TOPLEVEL}.sv", text)
    return pcie_sources, sv


def build(profile: str = "small", channels: int = 1, ways: int = 2, queues: int = QUEUES,
          contexts: int = CONTEXTS, *, slots: int = SLOTS, nand_slots: int = NAND_SLOTS,
          mem_words: int | None = None, test_dir: Path) -> dict:
    """Generate the drive's Verilog, the endpoint's and the top; ``runner.run``'s keyword arguments
    (``test_dir``: the cocotb module's directory), ``extra_env`` telling the testbench the sizes.
    ``slots``, ``nand_slots``: the core's publisher and page-buffer slots; ``mem_words``: SoC memory
    in 32-bit words (a power of two; by default what the contexts' staging areas need,
    :func:`mem_words_for`)."""
    core_args = dict(profile=profile, channels=channels, ways=ways, slots=slots, nand_slots=nand_slots,
                     max_open_tx=MAX_OPEN_TX, max_pending=MAX_PENDING, max_appends=MAX_APPENDS)
    drive = NvmeDrive(queues=queues, contexts=contexts, **core_args)
    mem_words = mem_words or mem_words_for(drive.staging_bytes)
    name = f"nvme_drive_{profile}_c{channels}w{ways}q{queues}x{contexts}"
    if (slots, nand_slots) != (SLOTS, NAND_SLOTS):
        name += f"s{slots}n{nand_slots}"
    if mem_words != MEM_WORDS:
        name += f"m{mem_words * 4 >> 20}"
    verilog = runner.amaranth_verilog(drive, name, key=dict(queues=queues, contexts=contexts, **core_args))
    config = pcie_config(queues)
    pcie_sources, sv = generate(drive, name, config, mem_words)
    assert mem_words * 4 - drive.staging_bytes >= CORE_BYTES, "SoC memory: no room for the core's tables"
    sizes = dict(profile=profile, channels=channels, ways=ways, slots=slots, slot_words=drive.core.slot_words,
                 nand_slots=nand_slots, queues=queues, contexts=contexts, staging_bytes=drive.staging_bytes,
                 mem_bytes=mem_words * 4)
    gen = nandsim.write_header(runner.GEN).parent        # the NAND model's C++ includes it
    return dict(
        toplevel=TOPLEVEL,
        sources=[MODEL / "nand_model.sv", verilog, *pcie_sources, sv],
        build_name=name,
        test_dir=test_dir,
        build_args=["--timing", str(MODEL / "nand_model.cpp"), "-CFLAGS", f"-I{gen} -I{MODEL}",
                    "-Wno-MULTIDRIVEN", "-Wno-PINMISSING",
                    "--no-public-flat-rw", str(runner.ROOT / "sim" / "verilator" / "nvme_drive_public.vlt")],
        extra_env={"NVME_SIM": json.dumps(sizes)},
    )


def plusargs(workdir: Path, profile: str = "small", targets: int = 2, config: PcieConfig | None = None) -> list[str]:
    """The run's plusargs: the NAND models' configuration files in ``workdir`` and the clock period."""
    config = config or pcie_config()
    return [*model_plusargs(workdir, profile, targets), f"+clk_period_ps={round(1e12 / config.user_clk_hz)}"]
