"""Static command validation: the checks a submission entry must pass before
the FTL does any work for it.

These are the checks that need nothing but the 64-byte entry, the device
limits and its capacity.  The RTL validator (``rtl/ftl/validate.py``) must
decide exactly as :func:`static_status` does; its cocotb test compares the two
on random entries.  Checks that need state (unknown transaction, forged token,
duplicate LBAs inside a list, per-entry ranges of a list) come later in the
pipeline and are not here.

Rules, first failing rule wins:

1. opcode is not an ``Opcode``                               → INVALID_OPCODE
2. ``nsid != 1``, ``rsvd != 0``, undefined flag bits,
   ``tx_final`` or ``tx_new`` on anything but TX_WRITE, or
   ``log_page`` not a ``LogPage`` (GET_LOG) / not 0 (others)   → INVALID_FIELD
3. TX_WRITE, TX_READ, TX_COMMIT, TX_ABORT with ``tid == 0``    → INVALID_TID
4. per opcode:

   ================  =========================================================
   READ, WRITE,      nlb == 0 → ZERO_LENGTH; nlb > max_transfer →
   TX_READ, TX_WRITE TRANSFER_TOO_LARGE; lba + nlb > capacity → LBA_OUT_OF_RANGE;
                     buf not 4-byte aligned or above 4 GiB → MISALIGNED_BUFFER
   APPEND            lba != 0 → INVALID_FIELD; then nlb and buf as above
   DEALLOCATE        nlb == 0 → ZERO_LENGTH; lba + nlb > capacity → LBA_OUT_OF_RANGE
   IDENTIFY, GET_LOG buf as above
   ATOMIC_WRITE      nlist == 0 → ZERO_LENGTH; nlist > max_atomic_pages →
                     GROUP_TOO_LARGE; list not 8-byte aligned or above 4 GiB →
                     MISALIGNED_BUFFER
   REMAP             nlist == 0 → ZERO_LENGTH; nlist > max_remap_triples →
                     REMAP_TOO_LARGE; list as above
   HINT              hint is not a ``Hint`` → INVALID_FIELD
   ================  =========================================================

The device addresses 32-bit SoC memory, hence the 4 GiB bound on buffers.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping

from .spec import CMD, LIMITS, Hint, LogPage, Opcode, Status

NSID = 1
BUF_ALIGN = 4
LIST_ALIGN = 8
ADDRESS_LIMIT = 1 << 32

DATA_OPCODES = (Opcode.READ, Opcode.WRITE, Opcode.TX_READ, Opcode.TX_WRITE)
TX_OPCODES = (Opcode.TX_WRITE, Opcode.TX_READ, Opcode.TX_COMMIT, Opcode.TX_ABORT)
DEFINED_FLAGS = sum(b.mask for b in CMD["flags"].bits)
TX_FINAL = CMD.compose("flags", tx_final=1)
TX_NEW = CMD.compose("flags", tx_new=1)
LOG_PAGES = tuple(int(p) for p in LogPage)  # SNAPSHOT passes here; the executor refuses it from a host's queue


@dataclass(frozen=True)
class StaticLimits:
    """The limits static validation needs (IDENTIFY reports them)."""

    max_transfer: int = LIMITS.MAX_TRANSFER
    max_atomic_pages: int = LIMITS.MAX_ATOMIC_PAGES
    max_remap_triples: int = LIMITS.MAX_REMAP_TRIPLES


def _buffer_status(addr: int, align: int) -> Status:
    if addr % align or addr >= ADDRESS_LIMIT:
        return Status.MISALIGNED_BUFFER
    return Status.SUCCESS


def static_status(cmd: Mapping[str, int], capacity: int, limits: StaticLimits = StaticLimits()) -> Status:
    """The status the device returns for ``cmd`` before doing any work
    (``SUCCESS`` when it passes every static check)."""
    try:
        op = Opcode(cmd["opcode"])
    except ValueError:
        return Status.INVALID_OPCODE
    flags = cmd["flags"]
    if cmd["nsid"] != NSID or cmd["rsvd"] != 0 or flags & ~DEFINED_FLAGS:
        return Status.INVALID_FIELD
    if flags & (TX_FINAL | TX_NEW) and op != Opcode.TX_WRITE:
        return Status.INVALID_FIELD
    if cmd["log_page"] not in (LOG_PAGES if op == Opcode.GET_LOG else (0,)):
        return Status.INVALID_FIELD
    if op in TX_OPCODES and cmd["tid"] == 0:
        return Status.INVALID_TID

    lba, nlb = cmd["lba"], cmd["nlb"]
    if op == Opcode.APPEND and lba != 0:
        return Status.INVALID_FIELD
    if op in DATA_OPCODES or op == Opcode.APPEND:
        if nlb == 0:
            return Status.ZERO_LENGTH
        if nlb > limits.max_transfer:
            return Status.TRANSFER_TOO_LARGE
        if op != Opcode.APPEND and lba + nlb > capacity:
            return Status.LBA_OUT_OF_RANGE
        return _buffer_status(cmd["buf"], BUF_ALIGN)
    if op == Opcode.DEALLOCATE:
        if nlb == 0:
            return Status.ZERO_LENGTH
        if lba + nlb > capacity:
            return Status.LBA_OUT_OF_RANGE
        return Status.SUCCESS
    if op in (Opcode.IDENTIFY, Opcode.GET_LOG):
        return _buffer_status(cmd["buf"], BUF_ALIGN)
    if op in (Opcode.ATOMIC_WRITE, Opcode.REMAP):
        nlist = cmd["nlist"]
        if nlist == 0:
            return Status.ZERO_LENGTH
        if op == Opcode.ATOMIC_WRITE and nlist > limits.max_atomic_pages:
            return Status.GROUP_TOO_LARGE
        if op == Opcode.REMAP and nlist > limits.max_remap_triples:
            return Status.REMAP_TOO_LARGE
        return _buffer_status(cmd["list"], LIST_ALIGN)
    if op == Opcode.HINT:
        try:
            Hint(cmd["hint"])
        except ValueError:
            return Status.INVALID_FIELD
    return Status.SUCCESS
