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

from atomflash import errors, spec
from atomflash.hostmem import PAGE, HostMemory
from atomflash.model import nvme as ref
from atomflash.model.semantics import Limits, Model
from atomflash.nvme import NvmeHost, cdw10_11
from atomflash.spec import NvmeAdminOpcode as Admin, NvmeCommandStatus, NvmeFeature, NvmeField as F
from atomflash.spec import NvmeCns, NvmeGenericStatus, NvmeIoOpcode, NvmeLogPage, NvmeSct, Status
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
                      io_queues=QUEUES, mqes=63, nuse=lambda: len(self.core.model.contents()),
                      percentage_used=lambda: self.percentage_used)
        self.percentage_used = 0      # the wear SMART reports (the SoC's firmware: wear.c, from erase counts)
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


@pytest.mark.parametrize("firmware", FIRMWARES)
def test_logs_features_events_and_reset(firmware):
    """What the first tests leave out: the error log and SMART after failures, the firmware slot log,
    Get/Set Features, an Asynchronous Event Request completed by an invalid doorbell write, shutdown,
    and a reset bringing the features back to their defaults."""
    tb = ControllerTB(3, firmware=firmware)
    cap, B = tb.limits.capacity, tb.limits.lba_size

    def status(c):
        return c.sct, c.sc

    def work():
        host = NvmeHost(tb.link, tb.memory, io_queues=1, queue_entries=8, timeout=600).initialize()
        out = {}
        data = tb.rng.randbytes(2 * B)
        host.write(3, data, qid=1)
        assert host.read(3, 2, qid=1) == data
        with pytest.raises(errors.error_class(Status.LBA_OUT_OF_RANGE)):
            host.read(cap - 1, 2, qid=1)
        c, _ = host.wait(0, host.submit(0, Admin.GET_FEATURES, slba=int(NvmeFeature.POWER_MANAGEMENT)))
        out["unknown feature"] = (status(c), c.cid)
        out["errors"] = host.error_log(3)
        out["identify"] = (host.identify(NvmeCns.CONTROLLER), host.identify(NvmeCns.NAMESPACE, nsid=1),
                           host.identify(NvmeCns.ACTIVE_NAMESPACES), len(tb.core.model.contents()))
        out["smart"] = host.smart()
        tb.percentage_used = 300                                # past its life: the byte saturates
        out["worn out"] = host.smart().percentage_used
        tb.percentage_used = 42
        out["worn"] = host.smart().percentage_used
        out["firmware log"] = host.log_page(NvmeLogPage.FIRMWARE, spec.NVME_FW_SLOT.size)
        out["write cache"] = host.get_features(NvmeFeature.VOLATILE_WRITE_CACHE)
        c, _ = host.wait(0, host.submit(0, Admin.SET_FEATURES,
                                        slba=cdw10_11(int(NvmeFeature.VOLATILE_WRITE_CACHE), F.WCE.put(1))))
        out["cache on"] = status(c)
        host.set_features(NvmeFeature.ARBITRATION, 0x0303)
        out["arbitration"] = host.get_features(NvmeFeature.ARBITRATION)
        out["queues"] = host.get_features(NvmeFeature.NUMBER_OF_QUEUES)
        aer = host.submit(0, Admin.ASYNC_EVENT_REQUEST)
        host.write_reg("sq_tail", 100, 1)                       # beyond the 8-entry queue: ignored
        c, _ = host.wait(0, aer)
        out["event"] = (status(c), c.result)
        out["event entry"] = host.error_log(1)[0]
        assert host.read(3, 2, qid=1) == data                  # the queue goes on
        host.shutdown()
        out["shst"] = host.reg("csts").shst
        host.initialize()                                       # a reset, then enabled again
        out["arbitration after reset"] = host.get_features(NvmeFeature.ARBITRATION)
        return out

    out = tb.run(work)
    G = NvmeSct.GENERIC
    (st, cid) = out["unknown feature"]
    assert st == (G, NvmeGenericStatus.INVALID_FIELD)
    newest, io_failure, empty = out["errors"]
    assert (newest.error_count, newest.sqid, newest.cid, newest.nsid) == (2, 0, cid, 0)
    assert spec.NVME_CQE.decompose("sf", newest.status).sc == NvmeGenericStatus.INVALID_FIELD
    assert (io_failure.error_count, io_failure.sqid, io_failure.lba, io_failure.nsid) == (1, 1, cap - 1, 1)
    assert spec.NVME_CQE.decompose("sf", io_failure.status).sc == NvmeGenericStatus.LBA_OUT_OF_RANGE
    assert io_failure.param == F.NOT_GIVEN and empty.error_count == 0
    smart = out["smart"]
    assert (smart.host_reads, smart.host_writes, smart.data_units_read, smart.data_units_written) == (1, 1, 1, 1)
    assert (smart.error_log_entries, smart.media_errors, smart.power_cycles) == (2, 0, 1)
    assert (smart.percentage_used, out["worn out"], out["worn"]) == (0, 255, 42)
    assert (smart.available_spare, smart.spare_threshold) == (ref.AVAILABLE_SPARE, ref.SPARE_THRESHOLD)
    assert out["firmware log"] == ref.firmware_log_data()
    controller, namespace, active, nuse = out["identify"]
    assert controller == ref.identify_controller_data(tb.limits, serial="AF0001", volatile_cache=False)
    assert namespace == ref.identify_namespace_data(tb.limits, nuse=nuse) and nuse == 2
    assert active == ref.active_namespaces_data(0)
    assert out["write cache"] == 0 and out["cache on"] == (G, NvmeGenericStatus.INVALID_FIELD)
    assert out["arbitration"] == 0x0303 and out["arbitration after reset"] == 0
    assert out["queues"] == F.NSQ.put(QUEUES - 1) | F.NCQ.put(QUEUES - 1)
    (st, result) = out["event"]
    assert st == (G, NvmeGenericStatus.SUCCESS)
    assert (F.AE_TYPE.take(result), F.AE_INFO.take(result), F.AE_LID.take(result)) == (
        F.AE_TYPE_ERROR, F.AE_INVALID_DB_VALUE, NvmeLogPage.ERROR)
    entry = out["event entry"]
    assert (entry.error_count, entry.sqid, entry.cid) == (4, F.NOT_GIVEN, F.NOT_GIVEN)
    assert out["shst"] == F.SHST_COMPLETE


@pytest.mark.parametrize("firmware", FIRMWARES)
def test_delete_sq_with_commands_waiting(firmware):
    """Delete I/O SQ while the queue holds commands the controller has not run: each completes, run or
    aborted (SQ_DELETION_ABORT), before the deletion does; then the CQ can go."""
    tb = ControllerTB(4, firmware=firmware, contexts=2)
    B = tb.limits.lba_size

    def work():
        host = NvmeHost(tb.link, tb.memory, io_queues=1, queue_entries=16, timeout=600).initialize()
        cids = [host.submit(1, NvmeIoOpcode.WRITE, data_out=tb.rng.randbytes(4 * B), slba=8 * i, cdw12=3)
                for i in range(12)]
        deleted, _ = host.wait(0, host.submit(0, Admin.DELETE_IO_SQ, slba=cdw10_11(F.QID.put(1))))
        done = {c.cid: (c.sct, c.sc) for c, _ in host.collect(1)}
        gone, _ = host.wait(0, host.submit(0, Admin.DELETE_IO_CQ, slba=cdw10_11(F.QID.put(1))))
        return cids, (deleted.sct, deleted.sc), done, (gone.sct, gone.sc)

    cids, deleted, done, gone = tb.run(work)
    ok, aborted = (NvmeSct.GENERIC, NvmeGenericStatus.SUCCESS), (NvmeSct.GENERIC, NvmeGenericStatus.SQ_DELETION_ABORT)
    assert deleted == ok and gone == ok
    assert sorted(done) == sorted(cids), "every command completed before the deletion did"
    assert set(done.values()) <= {ok, aborted}
    assert aborted in done.values(), "no command was still waiting in the SQ"


@pytest.mark.parametrize("firmware", FIRMWARES)
def test_a_disabled_controller_ignores_doorbells(firmware):
    """Doorbells rung before CC.EN (no queue exists): nothing is fetched or posted, no event or error
    is logged; the controller then comes up as usual."""
    tb = ControllerTB(5, firmware=firmware)

    def work():
        for qid in (0, 1):
            tb.link.mmio_write(spec.NVME_REGS["sq_tail"].address(qid), 1)
            tb.link.mmio_write(spec.NVME_REGS["cq_head"].address(qid), 1)
        for _ in range(50):
            tb.link.advance()
        requests = tb.host_dma.requests
        host = NvmeHost(tb.link, tb.memory, io_queues=1, queue_entries=8, timeout=600).initialize()
        return requests, host.error_log(1)[0], host.smart()

    requests, newest_error, smart = tb.run(work)
    assert requests == 0, "a disabled controller fetched or posted"
    assert newest_error.error_count == 0 and smart.error_log_entries == 0
