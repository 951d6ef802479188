"""Each rule of atomflash.command.static_status on hand-made entries."""

import pytest

from atomflash import spec
from atomflash.command import StaticLimits, static_status
from atomflash.spec import Opcode, Status

CAP = 1000


def cmd(**kw):
    base = {f.name: 0 for f in spec.CMD.fields}
    base.update(nsid=1, nlb=1, buf=0x1000, list=0x2000, nlist=1)
    base.update(kw)
    return base


@pytest.mark.parametrize("entry, status", [
    (cmd(opcode=Opcode.WRITE), Status.SUCCESS),
    (cmd(opcode=0x7F), Status.INVALID_OPCODE),
    (cmd(opcode=Opcode.WRITE, nsid=2), Status.INVALID_FIELD),
    (cmd(opcode=Opcode.WRITE, rsvd=1), Status.INVALID_FIELD),
    (cmd(opcode=Opcode.WRITE, flags=0x80), Status.INVALID_FIELD),
    (cmd(opcode=Opcode.WRITE, flags=spec.CMD.compose("flags", tx_final=1)), Status.INVALID_FIELD),
    (cmd(opcode=Opcode.TX_WRITE, tid=5, flags=spec.CMD.compose("flags", tx_final=1)), Status.SUCCESS),
    (cmd(opcode=Opcode.TX_WRITE, tid=5, flags=spec.CMD.compose("flags", tx_new=1)), Status.SUCCESS),
    (cmd(opcode=Opcode.WRITE, flags=spec.CMD.compose("flags", tx_new=1)), Status.INVALID_FIELD),
    (cmd(opcode=Opcode.GET_LOG, log_page=spec.LogPage.OPEN), Status.SUCCESS),
    (cmd(opcode=Opcode.GET_LOG, log_page=0x7F), Status.INVALID_FIELD),
    (cmd(opcode=Opcode.IDENTIFY, log_page=spec.LogPage.OPEN), Status.INVALID_FIELD),
    (cmd(opcode=Opcode.TX_COMMIT, tid=0), Status.INVALID_TID),
    (cmd(opcode=Opcode.READ, nlb=0), Status.ZERO_LENGTH),
    (cmd(opcode=Opcode.READ, nlb=StaticLimits().max_transfer + 1), Status.TRANSFER_TOO_LARGE),
    (cmd(opcode=Opcode.READ, lba=CAP - 1, nlb=2), Status.LBA_OUT_OF_RANGE),
    (cmd(opcode=Opcode.READ, lba=CAP - 1, nlb=1), Status.SUCCESS),
    (cmd(opcode=Opcode.WRITE, buf=0x1002), Status.MISALIGNED_BUFFER),
    (cmd(opcode=Opcode.WRITE, buf=1 << 32), Status.MISALIGNED_BUFFER),
    (cmd(opcode=Opcode.APPEND, lba=3), Status.INVALID_FIELD),
    (cmd(opcode=Opcode.APPEND, nlb=4), Status.SUCCESS),
    (cmd(opcode=Opcode.DEALLOCATE, lba=10, nlb=CAP), Status.LBA_OUT_OF_RANGE),
    (cmd(opcode=Opcode.DEALLOCATE, lba=0, nlb=CAP), Status.SUCCESS),
    (cmd(opcode=Opcode.ATOMIC_WRITE, nlist=0), Status.ZERO_LENGTH),
    (cmd(opcode=Opcode.ATOMIC_WRITE, nlist=StaticLimits().max_atomic_pages + 1), Status.GROUP_TOO_LARGE),
    (cmd(opcode=Opcode.ATOMIC_WRITE, list=0x2004), Status.MISALIGNED_BUFFER),
    (cmd(opcode=Opcode.REMAP, nlist=StaticLimits().max_remap_triples + 1), Status.REMAP_TOO_LARGE),
    (cmd(opcode=Opcode.HINT, hint=99), Status.INVALID_FIELD),
    (cmd(opcode=Opcode.HINT, hint=spec.Hint.CHECKPOINT), Status.SUCCESS),
    (cmd(opcode=Opcode.FLUSH, nlb=0, buf=3), Status.SUCCESS),
])
def test_rule(entry, status):
    assert static_status(entry, CAP) == status
