"""NVMe 2.0's PRP rules, written from the standard's wording, as the benches' reference.

:func:`reference_walk` is what the PRP walker (``rtl/nvme/prp.py``) and every block built on it (the
data mover, ``rtl/nvme/datamover.py``) must do with a transfer's PRP1 and PRP2: the pieces of host
memory it names, in order, and the status it ends with.  It reads PRP lists from a
:class:`~atomflash.hostmem.HostMemory` and honours the pages that memory refuses, as the
host-memory model (``sim/harness/hostdma.py``) does.
"""

from atomflash.hostmem import PAGE, HostMemory
from atomflash.spec import Status

__all__ = ["reference_walk", "SLOT"]

SLOT = 8                                    # bytes per PRP entry


def reference_walk(memory: HostMemory, prp1: int, prp2: int, nbytes: int):
    """(segments, status, list slots read) of a transfer: segments as (addr, bytes, last); the
    transfer stops at the first pointer that breaks a rule or list read the host refuses."""
    segments, slots = [], []

    def result(status):
        if status == Status.SUCCESS and segments:
            segments[-1] = segments[-1][:2] + (1,)
        return segments, status, slots

    if nbytes == 0:
        return result(Status.SUCCESS)
    if prp1 % 4:                                    # PRP1: dword aligned offset
        return result(Status.MISALIGNED_BUFFER)
    first = min(nbytes, PAGE - prp1 % PAGE)
    left = nbytes - first
    pages = -(-left // PAGE)
    if (pages == 1 and prp2 % PAGE) or (pages > 1 and prp2 % 8):   # a page, or a qword-aligned list pointer
        return result(Status.MISALIGNED_BUFFER)
    segments.append((prp1, first, 0))
    if pages == 1:
        segments.append((prp2, left, 0))
    slot = prp2
    while pages > 1 and left:
        if slot // PAGE in memory.refused:
            return result(Status.DATA_TRANSFER_ERROR)
        slots.append(slot)
        value = int.from_bytes(memory.read(slot, SLOT), "little")
        if value % PAGE:                            # every entry in a list has offset 0
            return result(Status.MISALIGNED_BUFFER)
        if slot % PAGE == PAGE - SLOT and left > PAGE:   # the page's last entry, more to come: the next list
            slot = value
            continue
        segments.append((value, min(PAGE, left), 0))
        left -= min(PAGE, left)
        slot += SLOT
    return result(Status.SUCCESS)
