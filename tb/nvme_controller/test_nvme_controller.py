"""The NVMe controller (``rtl/nvme/controller.py``) end to end in pysim: the host driver, the firmware's
admin path and the FTL core played around the gateware.

``ControllerTB`` puts the synchronous host driver (:class:`atomflash.nvme.NvmeHost`) in a thread whose
BAR0 accesses the bench carries out (``sim/harness/threaded_link.py``), host memory behind the
controller's DMA (``sim/harness/hostdma.py``), the firmware's NVMe duties as a process on the
controller's window, the FTL core as the reference model behind its stream front end
(``sim/harness/core_stand_in.py``) and SoC memory (``sim/harness/wbmem.py``).  What the driver gets back is
compared with a plain model fed the same operations.

The firmware is played twice over, every test once with each: ``python``, the model of its duties
(``sim/harness/nvme_firmware.py``), as a process on the window; ``c``, firmware/nvme.c itself built for
the host (``tb/firmware_nvme``), its main loop in a second thread whose window accesses the bench serves
as it serves the driver's (``ThreadedBus``).
"""

import random

import pytest
from amaranth.sim import Simulator

from atomflash import errors
from atomflash.hostmem import PAGE, HostMemory
from atomflash.model.semantics import Limits, Model
from atomflash.nvme import NvmeHost
from atomflash.spec import NvmeCommandStatus, NvmeGenericStatus, NvmeSct, Status
from rtl.nvme.controller import NvmeController
from sim.harness.core_stand_in import FtlCoreStandIn
from sim.harness.hostdma import HostDmaModel
from sim.harness.nvme_firmware import NvmeFirmwareModel
from sim.harness.threaded_link import ThreadedBus, ThreadedLink
from sim.harness.wbmem import WishboneMemoryModel
from tb.common.simbus import wb_access
from tb.firmware_nvme.cnvme import CNvmeFirmware

STAGING = 0x4000_0000
QUEUES = 2


class _Window:
    """The firmware window from a pysim process."""

    def __init__(self, ctx, port):
        self.ctx, self.port = ctx, port

    async def read(self, offset):
        return await wb_access(self.ctx, self.port, offset)

    async def write(self, offset, value):
        await wb_access(self.ctx, self.port, offset, value)


class _SocView:
    def __init__(self, memory):
        self.memory = memory

    def write_bytes(self, addr, data):
        self.memory.write(addr, data)

    def read_bytes(self, addr, n):
        return self.memory.read(addr, n)


FIRMWARES = ("python", "c")


class ControllerTB:
    def __init__(self, seed, *, firmware="python", contexts=4, block=512, capacity=256):
        self.limits = Limits(capacity=capacity, lba_size=block)
        self.dut = dut = NvmeController(queues=QUEUES, mqes=63, core_queue_ids=QUEUES + 1, block_bytes=block,
                                        contexts=contexts, list_batch=8)
        self.memory = HostMemory()
        self.host_dma = HostDmaModel(dut.dma, self.memory, seed=seed, backpressure=0.1, gap=0.1)
        self.soc = WishboneMemoryModel(dut.mem, dut.staging_bytes + PAGE, seed=seed, wait=0.1, base=STAGING)
        self.core = FtlCoreStandIn(dut.core_cmd, dut.core_cpl, Model(self.limits), self.soc, ids=contexts, seed=seed)
        duties = dict(limits=self.limits, scratch=STAGING + dut.staging_bytes, staging_base=STAGING,
                      io_queues=QUEUES, mqes=63, nuse=lambda: len(self.core.model.contents()))
        self.kind = firmware
        if firmware == "c":
            self.fw_bus = ThreadedBus(lambda ctx, offset, value=None: wb_access(ctx, dut.fw, offset, value))
            self.firmware = CNvmeFirmware(self.fw_bus, _SocView(self.soc), keep_running=lambda: not self.finished,
                                          **duties)
        else:
            self.firmware = NvmeFirmwareModel(None, _SocView(self.soc), **duties)
        self.link = ThreadedLink(lambda ctx, offset, value=None: wb_access(ctx, dut.bar, offset, value))
        self.vectors = []
        self.rng = random.Random(seed)
        self.finished = False

    async def run_firmware(self, ctx):
        if self.kind == "c":
            await self.fw_bus.run(ctx, self.firmware.run)
            return
        self.firmware.window = _Window(ctx, self.dut.fw)
        await self.firmware.start()
        while not self.finished:
            if not await self.firmware.poll():
                await ctx.tick().repeat(4)

    async def interrupts(self, ctx):
        ctx.set(self.dut.msix.ready, 1)
        async for _, _, valid, vector in ctx.tick().sample(self.dut.msix.valid, self.dut.msix.payload.vector):
            if valid:
                self.vectors.append(vector)

    def run(self, work):
        """Run ``work(host_memory)`` in the driver's thread against the simulated controller."""
        sim = Simulator(self.dut)
        sim.add_clock(1e-8)
        for process in (self.host_dma.process, self.soc.process, self.core.process, self.interrupts):
            sim.add_process(process)
        sim.add_testbench(self.run_firmware)      # a testbench: it samples the window's answers
        result = []

        async def bench(ctx):
            ctx.set(self.dut.capacity, self.limits.capacity)
            await ctx.tick()
            try:
                result.append(await self.link.run(ctx, work))
            finally:
                self.finished = True
        sim.add_testbench(bench)
        sim.run()
        return result[0]


@pytest.mark.parametrize("firmware", FIRMWARES)
def test_bring_up_io_and_shutdown(firmware):
    tb = ControllerTB(1, firmware=firmware)
    B = tb.limits.lba_size
    model = Model(tb.limits)
    rng = tb.rng

    def work():
        host = NvmeHost(tb.link, tb.memory, io_queues=QUEUES, queue_entries=16, timeout=600).initialize()
        assert host.block == B and host.controller["af_max_atomic_pages"] == tb.limits.max_atomic_pages
        assert sorted(host.queues) == [0, 1, 2]
        data = rng.randbytes(3 * B)
        host.write(5, data, qid=1)
        model.write(5, data)
        assert host.read(5, 3, qid=2) == data
        group = [(20, rng.randbytes(B)), (7, rng.randbytes(B))]
        host.atomic_write(group, qid=2)
        model.atomic_write(group)
        token = host.append(rng.randbytes(2 * B), qid=1)
        host.remap([(30, token, 2)], qid=1)
        host.trim([(6, 1)], qid=2)
        model.trim(6, 1)
        for lba in (5, 6, 7, 20):
            assert host.read(lba, 1, qid=1) == model.read(lba, 1).data, f"LBA {lba}"
        with pytest.raises(errors.error_class(Status.LBA_OUT_OF_RANGE)):
            host.read(tb.limits.capacity - 1, 2, qid=1)
        with pytest.raises(errors.error_class(Status.UNKNOWN_TX)):
            host.tx_commit(77, qid=2)
        host.shutdown()
        return host

    tb.run(work)
    assert set(tb.vectors) == {0, 1, 2}, f"interrupts on {sorted(set(tb.vectors))}"
    assert tb.firmware.error_count == 2


@pytest.mark.parametrize("firmware", FIRMWARES)
def test_admin_errors_as_the_reference_gives_them(firmware):
    tb = ControllerTB(2, firmware=firmware)

    def work():
        host = NvmeHost(tb.link, tb.memory, io_queues=1, queue_entries=8, timeout=600).initialize()
        cq = tb.memory.alloc(PAGE)
        from atomflash.nvme import cdw10_11
        from atomflash.spec import NvmeAdminOpcode as Admin, NvmeField as F
        outcomes = []
        for opcode, fields in (
                (Admin.CREATE_IO_CQ, dict(prp1=cq, slba=cdw10_11(F.QSIZE.put(7) | F.QID.put(1), F.PC.put(1)))),
                (Admin.CREATE_IO_CQ, dict(prp1=cq, slba=cdw10_11(F.QSIZE.put(7) | F.QID.put(9), F.PC.put(1)))),
                (Admin.CREATE_IO_CQ, dict(prp1=cq, slba=cdw10_11(F.QSIZE.put(64) | F.QID.put(2), F.PC.put(1)))),
                (Admin.CREATE_IO_SQ, dict(prp1=cq, slba=cdw10_11(F.QSIZE.put(7) | F.QID.put(2),
                                                                 F.PC.put(1) | F.CQID.put(2)))),
                (Admin.DELETE_IO_CQ, dict(slba=cdw10_11(F.QID.put(1)))),
                (0x7E, {})):
            c, _ = host.wait(0, host.submit(0, opcode, **fields))
            outcomes.append((c.sct, c.sc))
        return outcomes

    outcomes = tb.run(work)
    S = NvmeSct.COMMAND_SPECIFIC
    assert outcomes == [(S, NvmeCommandStatus.INVALID_QID), (S, NvmeCommandStatus.INVALID_QID),
                        (S, NvmeCommandStatus.INVALID_QUEUE_SIZE), (S, NvmeCommandStatus.INVALID_CQ),
                        (S, NvmeCommandStatus.INVALID_QUEUE_DELETION),
                        (NvmeSct.GENERIC, NvmeGenericStatus.INVALID_OPCODE)]
