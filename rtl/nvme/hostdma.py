"""The NVMe controller's way into host memory: one request at a time, 32-bit words.

Every block of the controller that reads or writes host memory (submission entries, PRP lists, data
pages, completion entries) is an initiator of :class:`HostDmaSignature`.  In the SoC it is carried to
the PCIe endpoint's DMA (``soc/pcie.py``: ``HostDMA``, which splits a request into TLPs by the
negotiated payload and read-request sizes); in a unit bench a Python model answers it.

A request is ``(write, addr, bytes)``: ``addr`` dword aligned, ``bytes`` a multiple of 4 from 4 to
4096 that does not cross a 4 KiB boundary (the PRP rules already split transfers at page
boundaries).  A write then takes ``bytes / 4`` words on ``wdata`` (``last`` on the final one); a read
returns them on ``rdata`` (``last`` on the final one, and ``error`` on it when the host refused the
read: the words before it are not to be trusted).  Every request ends with one ``done`` (``error``:
the host refused it, e.g. an IOMMU fault or a completion timeout), after its last word.  Words are
little-endian: the byte at ``addr`` is bits 7:0 of the first word.

One request is outstanding at a time: the next ``req`` is taken only after the previous ``done``.
An initiator takes ``rdata`` as it comes (holding it back holds the link); ``wdata.error`` carries
nothing (0).  A refused read's words are not to be trusted, so an initiator acts on what it read
only after a ``done`` without ``error``.
"""

from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

__all__ = ["HostDmaSignature", "REQUEST", "WORD", "DONE"]

REQUEST = data.StructLayout({"write": 1, "addr": 64, "bytes": 13})
WORD = data.StructLayout({"data": 32, "last": 1, "error": 1})
DONE = data.StructLayout({"error": 1})


class HostDmaSignature(wiring.Signature):
    """Host-memory DMA, from the initiator's side: ``req`` and ``wdata`` out, ``rdata`` and ``done`` in."""

    def __init__(self):
        super().__init__({
            "req": Out(stream.Signature(REQUEST)),
            "wdata": Out(stream.Signature(WORD)),
            "rdata": In(stream.Signature(WORD)),
            "done": In(stream.Signature(DONE)),
        })
