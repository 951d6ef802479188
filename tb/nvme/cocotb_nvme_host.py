"""The NVMe drive end to end under cocotbext-pcie: the host library's ``Device`` over the host driver
over PCIe, the controller gateware, the real FTL core and NAND models; the firmware's NVMe duties
played by ``sim/harness/nvme_firmware.py`` on the controller's window, its FTL duties by FtlCoreTB.

Every answer the drive gives is compared with a plain :class:`~atomflash.model.semantics.Model` fed
the same operations."""

import random

import cocotb

from atomflash import errors
from atomflash.device import Device
from atomflash.model.semantics import Model
from atomflash.nvme import NvmeHost
from atomflash.spec import Status
from sim.pcie.nvme_host_bridge import PcieNvmeLink, RootComplexMemory, in_thread

from nvme_drive_tb import start_drive


@cocotb.test()
async def device_over_nvme(dut):
    tb, firmware, limits = await start_drive(dut)
    link = PcieNvmeLink(tb.pdev)
    memory = RootComplexMemory(tb.rc)
    model = Model(limits)
    rng = random.Random(1)
    B = limits.lba_size

    def work():
        # the driver's and the Devices' timeouts are wall-clock seconds, and the PCIe model simulates
        # slowly (a few microseconds a second on a loaded machine)
        host = NvmeHost(link, memory, io_queues=tb.queues, queue_entries=16, timeout=600).initialize()
        dev = Device.attach_nvme(host, qid=1, timeout=600)
        other = Device.attach_nvme(host, qid=2, timeout=600)
        assert dev.identify()["capacity"] == limits.capacity
        data = rng.randbytes(3 * B)
        dev.write(10, data)
        model.write(10, data)
        assert other.read(10, 3) == data
        group = [(40, rng.randbytes(B)), (3, rng.randbytes(B))]
        dev.atomic_write(group)
        model.atomic_write(group)
        staged = rng.randbytes(B), rng.randbytes(B)
        with dev.transaction() as tx:
            tx.write(50, staged[0])
            tx.write(51, staged[1])
            assert other.read(50) == bytes(B), "a transaction's write seen before its commit"
        appended = rng.randbytes(2 * B)
        token = other.append(appended)
        other.remap([(60, token, 2)])
        assert dev.read(50, 2) == b"".join(staged) and dev.read(60, 2) == appended
        dev.trim(11, 1)
        model.trim(11, 1)
        for lba in (3, 10, 11, 12, 40):
            assert dev.read(lba) == model.read(lba, 1).data, f"LBA {lba}"
        try:
            dev.read(limits.capacity - 1, 2)
            raise AssertionError("a read past the end succeeded")
        except errors.error_class(Status.LBA_OUT_OF_RANGE):
            pass
        cmds = [dev.submit_write(100 + i, rng.randbytes(B)) for i in range(6)]
        for c in reversed(cmds):
            dev.wait(c)
        # a transfer of more pages than PRP1 and PRP2 name, from inside a page: a PRP list
        big = rng.randbytes(9 * B)
        host.write(120, big, qid=2, offset=0x404)
        assert host.read(120, 9, qid=1, offset=0x7FC) == big
        dev.flush()
        admin_commands(host)
        host.shutdown()
        return host

    await in_thread(work)
    assert set(link.interrupts) >= {0, 1, 2}, f"MSI-X vectors seen: {dict(link.interrupts)}"
    assert firmware.error_count == 5     # a read past the end, the doorbell event, three admin failures


def admin_commands(host):
    """The admin commands the bring-up does not send, answered as the reference controller answers."""
    from atomflash.nvme import cdw10_11
    from atomflash.spec import (NvmeAdminOpcode as Admin, NvmeCommandStatus, NvmeFeature, NvmeField as F,
                                NvmeGenericStatus, NvmeLogPage, NvmeSct)

    def status(c):
        return c.sct, c.sc

    assert host.get_features(NvmeFeature.NUMBER_OF_QUEUES) == F.NSQ.put(host.want_queues - 1) | \
        F.NCQ.put(host.want_queues - 1)
    host.set_features(NvmeFeature.INTERRUPT_COALESCING, 0x0102)
    assert host.get_features(NvmeFeature.INTERRUPT_COALESCING) == 0x0102
    c, _ = host.wait(0, host.submit(0, Admin.ABORT, slba=cdw10_11(1)))
    assert status(c) == (0, 0) and F.NOT_ABORTED.take(c.result) == 1
    aer = host.submit(0, Admin.ASYNC_EVENT_REQUEST)
    host.write_reg("sq_tail", 1000, 2)                       # beyond the queue: an asynchronous event
    c, _ = host.wait(0, aer)
    assert status(c) == (0, 0) and F.AE_INFO.take(c.result) == F.AE_INVALID_DB_VALUE
    errors_seen = host.error_log(2)
    assert errors_seen[0].sqid == F.NOT_GIVEN and errors_seen[1].lba == host.namespace["nsze"] - 1
    smart = host.smart()
    assert smart.host_writes >= 10 and smart.host_reads >= 8 and smart.error_log_entries == 2
    assert host.log_page(NvmeLogPage.FIRMWARE, 512)[0] == 1
    # queues: an SQ's CQ cannot go first; the SQ, then the CQ, then both again
    c, _ = host.wait(0, host.submit(0, Admin.DELETE_IO_CQ, slba=cdw10_11(F.QID.put(2))))
    assert status(c) == (NvmeSct.COMMAND_SPECIFIC, NvmeCommandStatus.INVALID_QUEUE_DELETION)
    for opcode in (Admin.DELETE_IO_SQ, Admin.DELETE_IO_CQ):
        c, _ = host.wait(0, host.submit(0, opcode, slba=cdw10_11(F.QID.put(2))))
        assert status(c) == (0, 0)
    q = host.queues[2]
    c, _ = host.wait(0, host.submit(0, Admin.CREATE_IO_SQ, prp1=q.sq, slba=cdw10_11(
        F.QSIZE.put(q.entries - 1) | F.QID.put(2), F.PC.put(1) | F.CQID.put(2))))
    assert status(c) == (NvmeSct.COMMAND_SPECIFIC, NvmeCommandStatus.INVALID_CQ)
    c, _ = host.wait(0, host.submit(0, 0x7F))
    assert status(c) == (NvmeSct.GENERIC, NvmeGenericStatus.INVALID_OPCODE)
