"""The NVMe formats in ``atomflash.spec`` against the NVMe base specification's own offsets and bits.

The numbers here are typed from the standard (NVM Express Base 2.0: figures for the controller
registers, the submission and completion entries, Identify Controller and Namespace, the SMART
log), not read back from the spec module, so a field placed at the wrong offset fails."""

import pytest

from atomflash import spec
from atomflash.spec import NvmeIoOpcode, NvmeSct, Status


@pytest.mark.parametrize("record, field, offset", [
    (spec.NVME_ID_CTRL, "vid", 0), (spec.NVME_ID_CTRL, "sn0", 4), (spec.NVME_ID_CTRL, "mn0", 24),
    (spec.NVME_ID_CTRL, "fr0", 64), (spec.NVME_ID_CTRL, "mdts", 77), (spec.NVME_ID_CTRL, "cntlid", 78),
    (spec.NVME_ID_CTRL, "ver", 80), (spec.NVME_ID_CTRL, "cntrltype", 111), (spec.NVME_ID_CTRL, "oacs", 256),
    (spec.NVME_ID_CTRL, "aerl", 259), (spec.NVME_ID_CTRL, "elpe", 262), (spec.NVME_ID_CTRL, "sqes", 512),
    (spec.NVME_ID_CTRL, "cqes", 513), (spec.NVME_ID_CTRL, "maxcmd", 514), (spec.NVME_ID_CTRL, "nn", 516),
    (spec.NVME_ID_CTRL, "oncs", 520), (spec.NVME_ID_CTRL, "vwc", 525), (spec.NVME_ID_CTRL, "awun", 526),
    (spec.NVME_ID_CTRL, "awupf", 528), (spec.NVME_ID_CTRL, "sgls", 536), (spec.NVME_ID_CTRL, "subnqn0", 768),
    (spec.NVME_ID_NS, "nsze", 0), (spec.NVME_ID_NS, "ncap", 8), (spec.NVME_ID_NS, "nuse", 16),
    (spec.NVME_ID_NS, "nsfeat", 24), (spec.NVME_ID_NS, "nlbaf", 25), (spec.NVME_ID_NS, "flbas", 26),
    (spec.NVME_ID_NS, "dlfeat", 33), (spec.NVME_ID_NS, "nawun", 34), (spec.NVME_ID_NS, "nawupf", 36),
    (spec.NVME_ID_NS, "lbaf0", 128),
    (spec.NVME_SMART, "percentage_used", 5), (spec.NVME_SMART, "data_units_read", 32),
    (spec.NVME_SMART, "data_units_written", 48), (spec.NVME_SMART, "host_reads", 64),
    (spec.NVME_SMART, "host_writes", 80), (spec.NVME_SMART, "power_cycles", 112),
    (spec.NVME_SMART, "unsafe_shutdowns", 144), (spec.NVME_SMART, "media_errors", 160),
    (spec.NVME_SQE, "nsid", 4), (spec.NVME_SQE, "mptr", 16), (spec.NVME_SQE, "prp1", 24),
    (spec.NVME_SQE, "prp2", 32), (spec.NVME_SQE, "slba", 40), (spec.NVME_SQE, "cdw12", 48),
    (spec.NVME_SQE, "cdw13", 52), (spec.NVME_CQE, "sqhd", 8), (spec.NVME_CQE, "sqid", 10),
    (spec.NVME_CQE, "cid", 12), (spec.NVME_CQE, "sf", 14),
])
def test_fields_sit_where_the_standard_puts_them(record, field, offset):
    assert record[field].offset == offset


def test_the_structures_have_the_standards_sizes():
    assert (spec.NVME_SQE.size, spec.NVME_CQE.size, spec.NVME_ID_CTRL.size, spec.NVME_ID_NS.size,
            spec.NVME_SMART.size, spec.NVME_ERROR_LOG.size) == (64, 16, 4096, 4096, 512, 64)


@pytest.mark.parametrize("register, offset", [("cap_lo", 0x00), ("vs", 0x08), ("intms", 0x0C), ("intmc", 0x10),
                                              ("cc", 0x14), ("csts", 0x1C), ("aqa", 0x24), ("asq_lo", 0x28),
                                              ("acq_lo", 0x30)])
def test_controller_registers(register, offset):
    assert spec.NVME_REGS[register].offset == offset


def test_doorbells_follow_the_stride():
    stride = 4 << spec.NVME.DSTRD
    for y in range(1 + spec.NVME.IO_QUEUES):
        assert spec.NVME_REGS["sq_tail"].address(y) == 0x1000 + 2 * y * stride
        assert spec.NVME_REGS["cq_head"].address(y) == 0x1000 + (2 * y + 1) * stride


def test_bits_of_the_entries_and_registers():
    cdw0 = spec.NVME_SQE.compose("cdw0", opc=0x02, cid=0xBEEF)
    assert cdw0 == 0xBEEF_0002
    sf = spec.NVME_CQE.compose("sf", p=1, sc=0x80, sct=0, dnr=1)
    assert sf == 1 | 0x80 << 1 | 1 << 15
    cc = spec.NVME_REGS["cc"]
    assert {b.name: (b.lsb, b.width) for b in cc.bits}["shn"] == (14, 2)
    assert {b.name: (b.lsb, b.width) for b in spec.NVME_REGS["csts"].bits}["shst"] == (2, 2)
    assert spec.NVME.VERSION == 0x0002_0000 and spec.NVME.PCI_CLASS == 0x01_08_02


def test_vendor_opcodes_say_which_way_their_data_goes():
    """Opcode bits 1:0: 01 data to the controller, 10 from it, 00 none (the standard's convention)."""
    to_ctrl = {NvmeIoOpcode.ATOMIC_WRITE, NvmeIoOpcode.TX_WRITE, NvmeIoOpcode.APPEND, NvmeIoOpcode.REMAP,
               NvmeIoOpcode.WRITE}
    from_ctrl = {NvmeIoOpcode.TX_READ, NvmeIoOpcode.READ}
    for op in NvmeIoOpcode:
        want = 0b01 if op in to_ctrl else 0b10 if op in from_ctrl else None
        if op >= 0x80:
            assert op & 3 == (want or 0), op
        elif want:
            assert op & 3 == want, op


@pytest.mark.parametrize("status", list(Status))
def test_every_status_has_an_nvme_status_that_maps_back(status):
    sct, sc = spec.nvme_status_of(status)
    assert 0 <= sc < 256 and sct in NvmeSct
    back = spec.atomflash_status_of(sct, sc)
    # several atomflash statuses share NVMe's INVALID_FIELD; the rest come back as they went
    if status in (Status.ZERO_LENGTH, Status.TRANSFER_TOO_LARGE):
        assert back == Status.INVALID_FIELD
    else:
        assert back == status


def test_statuses_nvme_names_are_reported_as_nvme_names_them():
    assert spec.nvme_status_of(Status.LBA_OUT_OF_RANGE) == (NvmeSct.GENERIC, 0x80)
    assert spec.nvme_status_of(Status.INVALID_OPCODE) == (NvmeSct.GENERIC, 0x01)
    assert spec.nvme_status_of(Status.MEDIA_ERROR, read=True) == (NvmeSct.MEDIA, 0x81)
    assert spec.nvme_status_of(Status.MEDIA_ERROR) == (NvmeSct.MEDIA, 0x80)
    assert spec.nvme_status_of(Status.DUPLICATE_LBA) == (NvmeSct.COMMAND_SPECIFIC, 0xC0 + Status.DUPLICATE_LBA)


def test_strings_are_space_padded_ascii():
    values = spec.ascii_values("mn", "atomflash", 40)
    raw = spec.NVME_ID_CTRL.pack(values)[24:64]
    assert raw == b"atomflash".ljust(40, b" ")
