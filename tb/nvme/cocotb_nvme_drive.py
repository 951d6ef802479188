"""The whole NVMe drive under cocotbext-pcie's root complex, the test playing the firmware.

Each test builds its own :class:`NvmeDriveTB` (a fresh root complex and device model; the core
booted again) and brings the link up itself."""

from __future__ import annotations

import cocotb
from cocotb.triggers import Timer
from cocotbext.pcie.core.caps import PciCapId

from atomflash import spec
from nvme_drive_tb import FW, NVME, NvmeDriveTB
from rtl.nvme.regs import NvmeRegisters


@cocotb.test()
async def enumeration(dut):
    """An NVMe function: the ids and class code PcieConfig gives it, BAR0 big enough for the
    controller's registers and doorbells and the MSI-X table and PBA, one MSI-X vector per CQ."""
    tb = NvmeDriveTB(dut)
    await tb.start()
    cfg, pdev = tb.config, tb.pdev

    assert (cfg.vendor_id, cfg.device_id, cfg.class_code) == (spec.NVME.VENDOR_ID, spec.NVME.DEVICE_ID,
                                                              spec.NVME.PCI_CLASS)
    assert await pdev.config_read_dword(0x00) == cfg.device_id << 16 | cfg.vendor_id
    assert (await pdev.config_read_dword(0x08)) >> 8 == 0x010802, "class code: not NVM Express"

    last_doorbell = NVME["cq_head"].address(tb.queues) + 4
    assert pdev.bar_size[0] == cfg.bar0_size
    assert last_doorbell <= cfg.msix_table_offset, "the doorbells run into the MSI-X table"
    assert cfg.msix_table_offset + 16 * cfg.msix_vectors <= cfg.msix_pba_offset < cfg.bar0_size

    ctrl = await pdev.capability_read_word(PciCapId.MSIX, 2)
    assert ctrl & 0x7FF == tb.queues, f"MSI-X table size {(ctrl & 0x7FF) + 1}: want 1 + {tb.queues} queues"
    assert ctrl & 0x8000, "MSI-X not enabled"


@cocotb.test()
async def registers_and_firmware_window(dut):
    """CAP and VS as spec.NVME_REGS and rtl/nvme/regs.py compose them; a CC write reaches the
    firmware (status.cc_changed, the cc mirror, ack_cc); the firmware's csts.rdy is the host's
    CSTS.RDY."""
    tb = NvmeDriveTB(dut)
    await tb.start()
    regs = NvmeRegisters(queues=tb.queues)

    assert await tb.bar_read(NVME["cap_lo"].offset) == regs.cap_lo
    assert await tb.bar_read(NVME["cap_hi"].offset) == regs.cap_hi
    assert await tb.bar_read(NVME["vs"].offset) == spec.NVME.VERSION
    cap = NVME["cap_lo"].decompose(regs.cap_lo)
    assert (cap["mqes"], cap["cqr"]) == (spec.NVME.MQES, 1)
    assert NVME["cap_hi"].decompose(regs.cap_hi)["css"] == spec.NVME.CSS_NVM

    assert not (await tb.fw_status())["cc_changed"]
    cc = NVME["cc"].compose(en=1, iosqes=spec.NVME.SQES, iocqes=spec.NVME.CQES)
    await tb.bar_write(NVME["cc"].offset, cc)
    assert await tb.bar_read(NVME["cc"].offset) == cc      # the read follows the posted write
    await tb.fw_wait("cc_changed")
    assert await tb.fw_read(FW["cc"].offset) == cc
    await tb.fw_action(ack_cc=1)
    assert not (await tb.fw_status())["cc_changed"]

    assert NVME["csts"].decompose(await tb.bar_read(NVME["csts"].offset))["rdy"] == 0
    await tb.set_ready()
    assert NVME["csts"].decompose(await tb.bar_read(NVME["csts"].offset))["rdy"] == 1
    await tb.set_ready(0)
    assert NVME["csts"].decompose(await tb.bar_read(NVME["csts"].offset))["rdy"] == 0


@cocotb.test()
async def admin_round_trip(dut):
    """The host sets up the admin queues and enables the controller; the firmware creates the admin
    CQ (interrupts on, vector 0) and SQ from AQA/ASQ/ACQ and reports ready; one admin command goes
    to the firmware through the window, its completion comes back in the admin CQ with the command's
    cid and phase 1, followed by vector 0's MSI-X message."""
    tb = NvmeDriveTB(dut)
    await tb.start()
    page = 1 << spec.NVME.PAGE_SHIFT
    base, host = tb.host_alloc(3 * page)
    skip = -base % page                       # the queues are page aligned
    asq, acq = base + skip, base + skip + page
    entries = 8

    # the host: admin queues, then CC.EN
    await tb.bar_write(NVME["aqa"].offset, NVME["aqa"].compose(asqs=entries - 1, acqs=entries - 1))
    for name, value in (("asq", asq), ("acq", acq)):
        await tb.bar_write(NVME[f"{name}_lo"].offset, value & 0xFFFF_FFFF)
        await tb.bar_write(NVME[f"{name}_hi"].offset, value >> 32)
    await tb.bar_write(NVME["cc"].offset, NVME["cc"].compose(en=1, iosqes=spec.NVME.SQES, iocqes=spec.NVME.CQES))

    # the firmware: CC.EN -> the admin queues, CSTS.RDY
    await tb.fw_wait("cc_changed")
    assert NVME["cc"].decompose(await tb.fw_read(FW["cc"].offset))["en"] == 1
    await tb.fw_action(ack_cc=1)
    await tb.create_admin_queues(ien=1)
    await tb.set_ready()

    # the host: ready, then one command
    for _ in range(50):
        if NVME["csts"].decompose(await tb.bar_read(NVME["csts"].offset))["rdy"]:
            break
    else:
        raise AssertionError("CSTS.RDY never came")
    cid = 0x1234
    sqe = spec.NVME_SQE.pack(cdw0=spec.NVME_SQE.compose("cdw0", opc=spec.NvmeAdminOpcode.GET_FEATURES, cid=cid),
                             slba=spec.NvmeFeature.NUMBER_OF_QUEUES)      # CDW10: the feature
    host[skip:skip + len(sqe)] = sqe
    host[skip + page:skip + 2 * page] = bytes(page)            # the CQ: phase 0 everywhere
    tb.vectors[0].event.clear()
    await tb.bar_write(NVME["sq_tail"].address(0), 1)

    # the firmware: the command in the window, answered
    await tb.fw_wait("admin_valid")
    assert await tb.admin_sqe() == sqe
    result = 0x0001_0001
    await tb.post_admin(cid, result=result)
    await tb.fw_action(pop_admin=1)
    assert not (await tb.fw_status())["admin_valid"]

    # the host: the CQE, then the interrupt that follows it
    for _ in range(200):
        cqe = spec.NVME_CQE.unpack(host[skip + page:skip + page + spec.NVME_CQE.size])    # a copy: read again
        if spec.NVME_CQE.decompose("sf", cqe.sf)["p"] == 1:
            break
        await Timer(100, "ns")
    else:
        raise AssertionError("no completion in the admin CQ")
    sf = spec.NVME_CQE.decompose("sf", cqe.sf)
    assert (cqe.cid, cqe.sqid, cqe.sqhd, cqe.result) == (cid, 0, 1, result), cqe
    assert (sf["sc"], sf["sct"], sf["dnr"]) == (0, 0, 0), sf
    assert await tb.wait_vector(0), "no MSI-X message on vector 0"
    assert not any(v.event.is_set() for v in tb.vectors[1:]), "a message on an I/O queue's vector"
    await tb.bar_write(NVME["cq_head"].address(0), 1)
    assert not (await tb.fw_status())["doorbell_error_valid"]
