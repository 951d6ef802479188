"""NvmeDriveTB: the whole NVMe drive (``sim/nvme``) under cocotbext-pcie's root complex, the test
playing the firmware.

One top, three roles, each an existing testbench's:

* **the host** -- :class:`tb.pcie.pcie_tb.PcieTB` on the top's PCIe ports (the root complex, the
  UltraScale+ device model, enumeration, BAR0 ``read32``/``write32``, what the device sends the
  host), configured as ``sim.nvme.gen.pcie_config`` builds the endpoint (NVMe's ids and class code,
  an MSI-X vector per completion queue);
* **the firmware's FTL duties** -- :class:`sim.harness.ftl_tb.FtlCoreTB` on the drive's core ports,
  which keep the bare core's names in this top: NAND reset and erase through the firmware's
  descriptor port, free blocks, the log's seq, the table bases and the capacity, the map cache
  invalidated, its own host-queue pair in SoC memory;
* **the firmware's NVMe duties** -- the controller's window ``spec.NVME_FW_REGS`` on the top's
  ``nvme_fw`` Wishbone port (:meth:`fw_read` / :meth:`fw_write`, a Python-driven bus cycle each:
  the firmware's accesses are few), and SoC memory by VPI (:meth:`mem_read_bytes` /
  :meth:`mem_write_bytes`).

:meth:`start` brings the link up first (the model clocks the whole top, ``user_clk``), allocates
every MSI-X vector in the root complex (the table entries written through BAR0, MSI-X enabled), then
boots the core (which holds the drive in reset while it configures the NAND models) and gives the
controller its staging areas at the top of SoC memory.  The controller itself is left as the
firmware finds it after reset: CC.EN is the host's, CSTS.RDY and the admin queues the firmware's
(:meth:`create_admin_queues`, :meth:`set_ready`).
"""

from __future__ import annotations

import json
import logging
import os

import cocotb
from cocotb.triggers import Timer

from atomflash import spec
from atomflash.model.semantics import Limits
from atomflash.spec import Opcode, Status
from rtl.nvme.queues import QueueOp
from sim.harness import ftl_core
from sim.harness.ftl_tb import FtlCoreTB
from sim.harness.nvme_firmware import NvmeFirmwareModel
from sim.harness.wishbone import WishboneInitiator
from sim.nvme.gen import pcie_config
from sim.pcie.pcie_tb import PcieTB

FW = spec.NVME_FW_REGS
NVME = spec.NVME_REGS


def fw_bits(register: str, **fields: int) -> int:
    """A value of firmware-window register ``register`` from its named bits."""
    return FW[register].compose(**fields)


class DrivePcieTB(PcieTB):
    """PcieTB on ``sim/nvme``'s top: the endpoint's user side is the drive, no ports of its own."""

    user_ports = ()
    user_idle_inputs = ()

    def _build(self):
        super()._build()
        # the device model's streams log every TLP under the top's name
        logging.getLogger(f"cocotb.{self.dut._name}").setLevel(logging.WARNING)


class NvmeDriveTB:
    """See the module docstring.  ``sizes``: the build's (``NVME_SIM``, from ``sim.nvme.gen.build``)."""

    def __init__(self, dut, *, capacity: int = 1024):
        self.dut = dut
        self.sizes = json.loads(os.environ["NVME_SIM"])
        self.queues = self.sizes["queues"]
        self.config = pcie_config(self.queues)
        self.pcie = DrivePcieTB(dut, self.config)
        self.capacity = capacity
        self.ftl: FtlCoreTB | None = None
        self.fw = WishboneInitiator(dut, "nvme_fw", dut.clk)
        #: the controller's staging areas: the top of SoC memory, page aligned
        self.staging_base = (self.sizes["mem_bytes"] - self.sizes["staging_bytes"]) & ~0xFFF
        self.vectors = []           # the root complex's MSI-X vectors (``event``, ``addr``, ``data``)

    @property
    def rc(self):
        return self.pcie.rc

    @property
    def pdev(self):
        return self.pcie.pdev

    async def start(self, *, msix: bool = True, blocks_per_die: int = 2):
        """Link up, enumerated, memory and bus mastering on (and MSI-X with every vector, unless
        ``msix`` is False); the core booted; the controller's staging base set."""
        await self.pcie.start(master=True)
        if msix:
            n = self.config.msix_vectors
            assert await self.pdev.alloc_irq_vectors(n, n) == n
            self.vectors = self.pdev.msi_vectors
        s = self.sizes
        self.ftl = await FtlCoreTB.create(self.dut, channels=s["channels"], ways=s["ways"], slots=s["slots"],
                                          slot_words=s["slot_words"], capacity=self.capacity,
                                          blocks_per_die=blocks_per_die, profile=s["profile"], name="nvme")
        assert self.ftl.data + 64 * 1024 <= self.staging_base, "the core's tables run into the staging areas"
        assert await self.fw_read(FW["id"].offset) == spec.NVME_FW_REGS_ID
        await self.fw_write(FW["staging_base"].offset, self.staging_base)

    async def cycles(self, n: int):
        await self.pcie.cycles(n)

    # The host: BAR0 and host memory ---------------------------------------------------------------

    async def bar_read(self, offset: int) -> int:
        return await self.pcie.read32(offset)

    async def bar_write(self, offset: int, value: int):
        await self.pcie.write32(offset, value)

    def host_alloc(self, size: int) -> tuple[int, memoryview]:
        """Host memory the device may reach: (bus address, its bytes)."""
        return self.rc.alloc_region(size)

    async def wait_vector(self, vector: int, timeout_ns: float = 20_000) -> bool:
        """Whether MSI-X ``vector``'s message arrives within ``timeout_ns`` (or has since cleared)."""
        return await self.pcie.wait_event(self.vectors[vector].event, timeout_ns)

    # The firmware: its window and SoC memory ------------------------------------------------------

    async def fw_read(self, offset: int) -> int:
        """The firmware window's register at byte ``offset`` (``spec.NVME_FW_REGS``)."""
        return await self.fw.read(offset)

    async def fw_write(self, offset: int, value: int):
        await self.fw.write(offset, value)

    async def fw_status(self):
        """``status``, decomposed (``cc_changed``, ``admin_valid``, ...)."""
        return FW["status"].decompose(await self.fw_read(FW["status"].offset))

    async def fw_wait(self, bit: str, value: int = 1, timeout_ns: float = 50_000, poll_ns: float = 200):
        """Until status bit ``bit`` reads ``value``."""
        waited = 0.0
        while (await self.fw_status())[bit] != value:
            assert waited < timeout_ns, f"status.{bit} not {value} after {timeout_ns} ns"
            await Timer(poll_ns, "ns")
            waited += poll_ns

    async def fw_action(self, **actions: int):
        """Write ``ctrl`` with the named actions (``post=1``, ``pop_admin=1``, ...)."""
        await self.fw_write(FW["ctrl"].offset, fw_bits("ctrl", **actions))

    def mem_read_bytes(self, addr: int, n: int) -> bytes:
        """SoC memory from byte ``addr`` (VPI, word aligned; the simulation does not run meanwhile)."""
        assert addr % 4 == 0 and n % 4 == 0
        mem = self.dut.mem
        return b"".join(int(mem[addr // 4 + i].value).to_bytes(4, "little") for i in range(n // 4))

    def mem_write_bytes(self, addr: int, data: bytes):
        assert addr % 4 == 0 and len(data) % 4 == 0
        mem = self.dut.mem
        for i in range(0, len(data), 4):
            mem[(addr + i) // 4].value = int.from_bytes(data[i:i + 4], "little")

    # Firmware routines the tests share -------------------------------------------------------------

    async def set_ready(self, rdy: int = 1):
        """CSTS.RDY as the firmware reports it."""
        await self.fw_write(FW["csts"].offset, fw_bits("csts", rdy=rdy))

    async def queue_op(self, op: int, qid: int, *, base: int = 0, size: int = 0, cqid: int = 0,
                       ien: int = 0, iv: int = 0):
        """One queue operation on the queue engine (``rtl.nvme.queues.QueueOp``), until applied."""
        await self.fw_write(FW["queue_base_lo"].offset, base & 0xFFFF_FFFF)
        await self.fw_write(FW["queue_base_hi"].offset, base >> 32)
        await self.fw_write(FW["queue_size"].offset, size)
        await self.fw_write(FW["queue_op"].offset, fw_bits("queue_op", op=op, qid=qid, cqid=cqid, ien=ien, iv=iv))
        await self.fw_action(config=1)
        await self.fw_wait("config_busy", 0)

    async def create_admin_queues(self, *, ien: int = 1):
        """The admin CQ, then the admin SQ, from AQA/ASQ/ACQ as the host wrote them (the window's
        mirrors), interrupts on vector 0 when ``ien``."""
        aqa = NVME["aqa"].decompose(await self.fw_read(FW["aqa"].offset))
        asq = await self.fw_read(FW["asq_lo"].offset) | await self.fw_read(FW["asq_hi"].offset) << 32
        acq = await self.fw_read(FW["acq_lo"].offset) | await self.fw_read(FW["acq_hi"].offset) << 32
        await self.queue_op(QueueOp.CREATE_CQ, 0, base=acq, size=aqa["acqs"], ien=ien, iv=0)
        await self.queue_op(QueueOp.CREATE_SQ, 0, base=asq, size=aqa["asqs"], cqid=0)

    async def admin_sqe(self) -> bytes:
        """The admin command waiting in the window (after ``status.admin_valid``)."""
        r = FW["admin_sqe"]
        words = [await self.fw_read(r.offset + i * r.stride) for i in range(r.count)]
        return b"".join(w.to_bytes(4, "little") for w in words)

    async def post_admin(self, cid: int, *, sc: int = 0, sct: int = 0, dnr: int = 0, result: int = 0):
        """Post an admin completion and wait until the queue engine took it."""
        await self.fw_write(FW["cpl_result_lo"].offset, result & 0xFFFF_FFFF)
        await self.fw_write(FW["cpl_result_hi"].offset, result >> 32)
        await self.fw_write(FW["cpl_status"].offset, fw_bits("cpl_status", cid=cid, sc=sc, sct=sct, dnr=dnr))
        await self.fw_action(post=1)
        await self.fw_wait("post_busy", 0)


class _Window:
    """The firmware window as ``NvmeFirmwareModel`` reaches it."""

    def __init__(self, tb):
        self.read, self.write = tb.fw_read, tb.fw_write


class _Soc:
    """SoC memory as ``NvmeFirmwareModel`` reaches it."""

    def __init__(self, tb):
        self.write_bytes, self.read_bytes = tb.mem_write_bytes, tb.mem_read_bytes


async def start_drive(dut, *, capacity: int = 256, blocks_per_die: int = 2, idle_ns: float = 200):
    """The drive up with its firmware's admin path running (``NvmeFirmwareModel``, polling the
    window every ``idle_ns`` when idle): (tb, firmware, limits)."""
    tb = NvmeDriveTB(dut, capacity=capacity)
    await tb.start(blocks_per_die=blocks_per_die)
    limits = Limits(capacity=capacity, lba_size=tb.ftl.page, max_open_tx=ftl_core.MAX_OPEN_TX,
                    max_pending=ftl_core.MAX_PENDING, max_appends=ftl_core.MAX_APPENDS)

    async def flush(checkpoint):
        r = await tb.ftl.do(opcode=Opcode.FLUSH)
        assert r["status"] == Status.SUCCESS

    firmware = NvmeFirmwareModel(_Window(tb), _Soc(tb), limits=limits, scratch=tb.ftl.data + 0x8000,
                                 staging_base=tb.staging_base, io_queues=tb.queues, flush=flush)
    await firmware.start()

    async def idle():
        await Timer(idle_ns, "ns")
    cocotb.start_soon(firmware.run(idle))
    return tb, firmware, limits
