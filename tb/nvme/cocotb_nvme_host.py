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
        host = NvmeHost(link, memory, io_queues=tb.queues, queue_entries=16).initialize()
        dev = Device.attach_nvme(host, qid=1)
        other = Device.attach_nvme(host, qid=2)
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
        dev.flush()
        host.shutdown()
        return host

    await in_thread(work)
    assert set(link.interrupts) >= {0, 1, 2}, f"MSI-X vectors seen: {dict(link.interrupts)}"
    assert firmware.error_count == 1
