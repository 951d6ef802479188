"""An NVMe host driver for atomflash: what a host's kernel does with the drive, in Python.

:class:`NvmeHost` brings a controller up in the order NVM Express Base 2.0 gives (wait for CSTS.RDY
to clear, admin queues in AQA/ASQ/ACQ, CC.EN, wait for CSTS.RDY, Identify the controller and the
namespace, Set Features *number of queues*, create the I/O completion and submission queues), then
submits commands on its queues and collects their completions by phase tag.  Data moves through
PRPs it builds in host memory (:class:`~atomflash.hostmem.HostMemory`): PRP1 into the first page,
PRP2 the second page or a PRP list, chained when the list needs more than a page.

It speaks to the controller through a *link*: anything with ``mmio_read(offset)`` and
``mmio_write(offset, value)`` on BAR0 (the reference controller
:class:`atomflash.model.nvme.NvmeController` is one; a simulated PCIe root complex is another) and,
if the device runs on its own time, ``advance()``, called while the driver waits.

atomflash's verbs are vendor I/O commands (docs/nvme.md); a command that fails raises the exception
the debug-port library raises for the same status (``atomflash.errors``: the NVMe status maps back
through ``spec.atomflash_status_of``), or :class:`NvmeError` for an NVMe status atomflash has no name
for (queue management, aborts).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Iterable, Protocol

from . import errors, spec
from .hostmem import PAGE, HostMemory
from .spec import NvmeAdminOpcode as Admin
from .spec import NvmeCns, NvmeFeature, NvmeIoOpcode as Io, NvmeLogPage
from .spec import NvmeField as F

__all__ = ["NvmeHost", "NvmeError", "NvmeLink", "Completion"]

REGS = spec.NVME_REGS


class NvmeLink(Protocol):
    def mmio_read(self, offset: int) -> int: ...

    def mmio_write(self, offset: int, value: int) -> None: ...


class NvmeError(errors.Error):
    """A command completed with an NVMe status atomflash has no status of its own for."""

    def __init__(self, sct: int, sc: int, detail: str = ""):
        self.sct, self.sc = sct, sc
        try:
            name = {spec.NvmeSct.GENERIC: spec.NvmeGenericStatus, spec.NvmeSct.COMMAND_SPECIFIC:
                    spec.NvmeCommandStatus, spec.NvmeSct.MEDIA: spec.NvmeMediaStatus}[sct](sc).name
        except (KeyError, ValueError):
            name = "unknown"
        super().__init__(f"NVMe status type {sct} code 0x{sc:02x} {name}" + (f" ({detail})" if detail else ""))


@dataclass
class Completion:
    """One completion as the host read it."""
    cid: int
    sqid: int
    sqhd: int
    sct: int
    sc: int
    dnr: bool
    result: int

    @property
    def ok(self) -> bool:
        return self.sct == 0 and self.sc == 0

    def check(self, detail: str = "") -> "Completion":
        if not self.ok:
            status = spec.atomflash_status_of(self.sct, self.sc)
            if status is None:
                raise NvmeError(self.sct, self.sc, detail)
            errors.check(status, detail)
        return self


@dataclass
class _Queue:
    qid: int
    entries: int
    sq: int                   # host addresses
    cq: int
    tail: int = 0             # SQ tail (ours)
    head: int = 0             # CQ head (ours)
    phase: int = 1            # the phase a new completion carries
    sq_head: int = 0          # the controller's SQ head, from the last completion
    next_cid: int = 0
    waiting: dict[int, "_Pending"] = field(default_factory=dict)
    done: dict[int, Completion] = field(default_factory=dict)


@dataclass
class _Pending:
    buffers: list[tuple[int, int]]      # host memory to free once complete
    data_in: tuple[int, int] | None     # (address, bytes) the command returns data into


class NvmeHost:
    """Brings up an NVMe controller and runs commands on it; see the module docstring.

    Parameters
    ----------
    link : NvmeLink
        BAR0 of the controller.
    memory : HostMemory
        Host memory the controller reads and writes.
    io_queues : int
        I/O queue pairs to ask for (fewer if the controller grants fewer).
    queue_entries : int
        Entries per I/O queue (at most CAP.MQES + 1).
    timeout : float
        Seconds a wait may last (controller ready, a completion).
    """

    def __init__(self, link: NvmeLink, memory: HostMemory, *, io_queues: int = 1, queue_entries: int = 64,
                 admin_entries: int = 32, timeout: float = 30.0):
        self.link, self.memory, self.timeout = link, memory, timeout
        self.want_queues, self.queue_entries, self.admin_entries = io_queues, queue_entries, admin_entries
        self.queues: dict[int, _Queue] = {}
        self.controller = self.namespace = None
        self.block = 0

    # -- registers ---------------------------------------------------------------------------------
    def read_reg(self, name: str) -> int:
        return self.link.mmio_read(REGS[name].offset)

    def reg(self, name: str):
        """A register read and split into its named bits (``host.reg("csts").rdy``)."""
        return REGS[name].decompose(self.read_reg(name))

    def write_reg(self, name: str, value: int, index: int = 0) -> None:
        self.link.mmio_write(REGS[name].address(index), value)

    def _wait(self, what: str, done) -> None:
        deadline = time.monotonic() + self.timeout
        while not done():
            if time.monotonic() > deadline:
                raise errors.ReadyTimeout(f"the controller did not {what} within {self.timeout} s")
            advance = getattr(self.link, "advance", None)
            if advance:
                advance()

    # -- bring-up ------------------------------------------------------------------------------------
    def initialize(self) -> "NvmeHost":
        """The initialisation sequence of NVMe 2.0 section 3.5.1; returns self."""
        cap = self.reg("cap_lo")
        mqes, to_s = cap.mqes, max(1, cap.to) * 0.5
        if self.reg("cap_hi").mpsmin != 0:
            raise errors.DeviceError("the controller does not take 4 KiB memory pages")
        self.timeout = max(self.timeout, to_s)
        if self.reg("cc").en:
            self.write_reg("cc", 0)
        self._wait("clear CSTS.RDY", lambda: not self.reg("csts").rdy)
        self._free_queues()
        admin = self._new_queue(0, min(self.admin_entries, mqes + 1))
        self.write_reg("aqa", REGS["aqa"].compose(asqs=admin.entries - 1, acqs=admin.entries - 1))
        self.write_reg("asq_lo", admin.sq & 0xFFFF_FFFF)
        self.write_reg("asq_hi", admin.sq >> 32)
        self.write_reg("acq_lo", admin.cq & 0xFFFF_FFFF)
        self.write_reg("acq_hi", admin.cq >> 32)
        self.write_reg("cc", REGS["cc"].compose(en=1, css=0, mps=0, ams=0, iosqes=spec.NVME.SQES,
                                                iocqes=spec.NVME.CQES))
        self._wait("set CSTS.RDY", lambda: self.reg("csts").rdy or self.reg("csts").cfs)
        if self.reg("csts").cfs:
            raise errors.DeviceError("the controller reports a fatal status (CSTS.CFS) on enable")
        self.controller = spec.NVME_ID_CTRL.unpack(self.identify(NvmeCns.CONTROLLER))
        self.namespace = spec.NVME_ID_NS.unpack(self.identify(NvmeCns.NAMESPACE, nsid=spec.NVME.NSID))
        self.block = 1 << spec.NVME_ID_NS.decompose("lbaf0", self.namespace["lbaf0"]).lbads
        granted = self.set_features(NvmeFeature.NUMBER_OF_QUEUES,
                                    (self.want_queues - 1) | (self.want_queues - 1) << 16)
        n = min(self.want_queues, (granted & 0xFFFF) + 1, (granted >> 16) + 1)
        entries = min(self.queue_entries, mqes + 1)
        for qid in range(1, n + 1):
            q = self._new_queue(qid, entries)
            self.admin(Admin.CREATE_IO_CQ, prp1=q.cq, slba=cdw10_11(F.QSIZE.put(entries - 1) | F.QID.put(qid),
                                                                    F.PC.put(1) | F.IEN.put(1) | F.IV.put(qid)))
            self.admin(Admin.CREATE_IO_SQ, prp1=q.sq, slba=cdw10_11(F.QSIZE.put(entries - 1) | F.QID.put(qid),
                                                                    F.PC.put(1) | F.CQID.put(qid)))
        return self

    def shutdown(self) -> None:
        """A normal shutdown (CC.SHN = 1) and the wait for CSTS.SHST = complete."""
        self.write_reg("cc", self.read_reg("cc") | REGS["cc"].compose(shn=1))
        self._wait("finish its shutdown", lambda: self.reg("csts").shst == 2)

    def _new_queue(self, qid: int, entries: int) -> _Queue:
        q = _Queue(qid, entries, sq=self.memory.alloc(entries * spec.NVME_SQE.size),
                   cq=self.memory.alloc(entries * spec.NVME_CQE.size))
        self.queues[qid] = q
        return q

    def _free_queues(self) -> None:
        for q in self.queues.values():
            self.memory.free(q.sq, q.entries * spec.NVME_SQE.size)
            self.memory.free(q.cq, q.entries * spec.NVME_CQE.size)
        self.queues.clear()

    @property
    def io_queues(self) -> list[int]:
        return sorted(q for q in self.queues if q)

    # -- PRPs ---------------------------------------------------------------------------------------
    def _buffer(self, nbytes: int, offset: int = 0) -> tuple[int, list[tuple[int, int]]]:
        """A data buffer of ``nbytes`` starting ``offset`` bytes into its first page: its address and
        the allocations to free."""
        base = self.memory.alloc(offset + nbytes)
        return base + offset, [(base, offset + nbytes)]

    def prps(self, addr: int, nbytes: int, allocations: list) -> tuple[int, int]:
        """PRP1 and PRP2 for ``nbytes`` at ``addr`` (PRP lists allocated into ``allocations``)."""
        pages = [addr] + list(range((addr // PAGE + 1) * PAGE, addr + nbytes, PAGE))
        if len(pages) == 1:
            return pages[0], 0
        if len(pages) == 2:
            return pages[0], pages[1]
        per_list = PAGE // 8
        rest, prp2 = pages[1:], 0
        lists = []
        while rest:                          # each list page holds 511 entries and a chain, or 512 at the end
            take = rest if len(rest) <= per_list else rest[:per_list - 1]
            rest = rest[len(take):]
            page = self.memory.alloc(PAGE)
            allocations.append((page, PAGE))
            lists.append((page, take))
        for i, (page, entries) in enumerate(lists):
            chain = [lists[i + 1][0]] if i + 1 < len(lists) else []
            self.memory.write(page, b"".join(e.to_bytes(8, "little") for e in entries + chain))
        prp2 = lists[0][0]
        return pages[0], prp2

    # -- commands -----------------------------------------------------------------------------------
    def submit(self, qid: int, opcode: int, *, data_out: bytes = b"", data_in: int = 0, offset: int = 0,
               metadata: bytes = b"", **fields) -> int:
        """Put one command on queue ``qid`` and ring its doorbell; returns its cid.  ``data_out``: bytes
        the command takes; ``data_in``: bytes it returns (``offset``: where the buffer starts inside its
        first page); ``metadata``: bytes MPTR points at (ATOMIC_WRITE's LBA list), freed with the command.
        Other keyword arguments are NVME_SQE fields (``cdw12`` ...)."""
        q = self.queues[qid]
        if (q.tail + 1) % q.entries == q.sq_head:
            raise errors.HostMemoryFull(f"queue {qid} is full")
        cid = q.next_cid
        q.next_cid = (cid + 1) & 0xFFFF
        allocations, landing = [], None
        if data_out or data_in:
            nbytes = len(data_out) or data_in
            addr, taken = self._buffer(nbytes, offset)
            allocations += taken
            if data_out:
                self.memory.write(addr, data_out)
            else:
                landing = (addr, data_in)
            fields["prp1"], fields["prp2"] = self.prps(addr, nbytes, allocations)
        if metadata:
            fields["mptr"], taken = self._buffer(len(metadata))
            allocations += taken
            self.memory.write(fields["mptr"], metadata)
        fields.setdefault("nsid", spec.NVME.NSID if qid else 0)
        sqe = spec.NVME_SQE.pack(cdw0=spec.NVME_SQE.compose("cdw0", opc=int(opcode), cid=cid), **fields)
        self.memory.write(q.sq + q.tail * spec.NVME_SQE.size, sqe)
        q.waiting[cid] = _Pending(allocations, landing)
        q.tail = (q.tail + 1) % q.entries
        self.write_reg("sq_tail", q.tail, qid)
        return cid

    def reap(self, qid: int) -> int:
        """Take every completion posted on queue ``qid``'s CQ; returns how many."""
        q, n = self.queues[qid], 0
        while True:
            raw = self.memory.read(q.cq + q.head * spec.NVME_CQE.size, spec.NVME_CQE.size)
            e = spec.NVME_CQE.unpack(raw)
            sf = spec.NVME_CQE.decompose("sf", e.sf)
            if sf.p != q.phase:
                break
            q.head = (q.head + 1) % q.entries
            if q.head == 0:
                q.phase ^= 1
            q.sq_head = e.sqhd
            c = Completion(e.cid, e.sqid, e.sqhd, sf.sct, sf.sc, bool(sf.dnr), e.result)
            q.done[e.cid] = c
            n += 1
        if n:
            self.write_reg("cq_head", q.head, qid)
        return n

    def wait(self, qid: int, cid: int) -> tuple[Completion, bytes]:
        """The completion of command ``cid`` on ``qid`` and the data it returned."""
        q = self.queues[qid]
        self._wait(f"complete command {cid} on queue {qid}", lambda: self.reap(qid) >= 0 and cid in q.done)
        return self._take(q, cid)

    def collect(self, qid: int) -> list[tuple[Completion, bytes]]:
        """Every completion posted on ``qid`` and not yet taken, each with the data it returned, in the
        order they were posted; does not wait.  For a caller that keeps several commands in flight on
        a queue of its own and takes their completions as they come."""
        self.reap(qid)
        q = self.queues[qid]
        return [self._take(q, cid) for cid in list(q.done)]

    def _take(self, q: _Queue, cid: int) -> tuple[Completion, bytes]:
        """A posted completion, its data read and its buffers freed."""
        c = q.done.pop(cid)
        pending = q.waiting.pop(cid)
        data = self.memory.read(*pending.data_in) if pending.data_in and c.ok else b""
        for addr, n in pending.buffers:
            self.memory.free(addr, n)
        return c, data

    def run(self, qid: int, opcode: int, detail: str = "", **kw) -> tuple[Completion, bytes]:
        c, data = self.wait(qid, self.submit(qid, opcode, **kw))
        c.check(detail or getattr(opcode, "name", hex(opcode)).lower())
        return c, data

    def admin(self, opcode: Admin, **kw) -> tuple[Completion, bytes]:
        return self.run(0, opcode, **kw)

    # -- admin verbs --------------------------------------------------------------------------------
    def identify(self, cns: NvmeCns, nsid: int = 0) -> bytes:
        return self.admin(Admin.IDENTIFY, slba=int(cns), nsid=nsid, data_in=4096)[1]

    def set_features(self, fid: NvmeFeature, value: int) -> int:
        return self.admin(Admin.SET_FEATURES, slba=cdw10_11(int(fid), value))[0].result & 0xFFFF_FFFF

    def get_features(self, fid: NvmeFeature) -> int:
        return self.admin(Admin.GET_FEATURES, slba=int(fid))[0].result & 0xFFFF_FFFF

    def log_page(self, lid: int, nbytes: int, nsid: int = F.NSID_ALL) -> bytes:
        numd = nbytes // 4 - 1
        cdw10 = F.LID.put(int(lid)) | F.NUMDL.put(numd & 0xFFFF)
        return self.admin(Admin.GET_LOG_PAGE, nsid=nsid, slba=cdw10_11(cdw10, F.NUMDU.put(numd >> 16)),
                          data_in=nbytes)[1]

    def smart(self):
        return spec.NVME_SMART.unpack(self.log_page(NvmeLogPage.SMART, spec.NVME_SMART.size))

    def error_log(self, entries: int = 1) -> list:
        raw = self.log_page(NvmeLogPage.ERROR, entries * spec.NVME_ERROR_LOG.size)
        size = spec.NVME_ERROR_LOG.size
        return [spec.NVME_ERROR_LOG.unpack(raw[i:i + size]) for i in range(0, len(raw), size)]

    # -- I/O verbs ----------------------------------------------------------------------------------
    def _blocks(self, data: bytes) -> int:
        if not data or len(data) % self.block:
            raise errors.InvalidArgument(f"data must be whole {self.block}-byte blocks, not {len(data)} bytes")
        return len(data) // self.block

    def _qid(self, qid: int | None) -> int:
        return qid if qid is not None else self.io_queues[0]

    def read(self, lba: int, nlb: int = 1, *, qid: int | None = None, offset: int = 0) -> bytes:
        return self.run(self._qid(qid), Io.READ, slba=lba, cdw12=nlb - 1, data_in=nlb * self.block,
                        offset=offset)[1]

    def write(self, lba: int, data: bytes, *, fua: bool = False, qid: int | None = None, offset: int = 0) -> None:
        self.run(self._qid(qid), Io.WRITE, slba=lba, data_out=data, offset=offset,
                 cdw12=spec.NVME_SQE.compose("cdw12", nlb=self._blocks(data) - 1, fua=int(fua)))

    def flush(self, *, qid: int | None = None) -> None:
        self.run(self._qid(qid), Io.FLUSH)

    def write_zeroes(self, lba: int, nlb: int = 1, *, qid: int | None = None) -> None:
        self.run(self._qid(qid), Io.WRITE_ZEROES, slba=lba, cdw12=nlb - 1)

    def trim(self, ranges: Iterable[tuple[int, int]], *, qid: int | None = None) -> None:
        """Deallocate (lba, nlb) ranges (Dataset Management, AD)."""
        body = b"".join(spec.NVME_DSM_RANGE.pack(slba=lba, nlb=nlb) for lba, nlb in ranges)
        n = len(body) // spec.NVME_DSM_RANGE.size
        self.run(self._qid(qid), Io.DATASET_MANAGEMENT, slba=cdw10_11(F.NR.put(n - 1), F.AD.put(1)), data_out=body)

    def atomic_write(self, entries: Iterable[tuple[int, bytes]], *, qid: int | None = None) -> None:
        entries = list(entries)
        if not entries:
            raise errors.ZeroLength("an atomic group needs at least one block", submitted=False)
        data = b"".join(d for _, d in entries)
        if any(len(d) != self.block for _, d in entries):
            raise errors.InvalidArgument(f"each atomic entry is one {self.block}-byte block")
        lbas = b"".join(lba.to_bytes(8, "little") for lba, _ in entries)
        mptr, lists = self._buffer(len(lbas))
        self.memory.write(mptr, lbas)
        try:
            self.run(self._qid(qid), Io.ATOMIC_WRITE, data_out=data, mptr=mptr, cdw12=len(entries) - 1)
        finally:
            for addr, n in lists:
                self.memory.free(addr, n)

    def tx_write(self, tid: int, lba: int, data: bytes, *, final: bool = False, new: bool = False,
                 qid: int | None = None) -> None:
        self.run(self._qid(qid), Io.TX_WRITE, slba=lba, cdw13=tid, data_out=data,
                 cdw12=spec.NVME_SQE.compose("cdw12", nlb=self._blocks(data) - 1, tx_final=int(final),
                                             tx_new=int(new)))

    def tx_read(self, tid: int, lba: int, nlb: int = 1, *, qid: int | None = None) -> bytes:
        return self.run(self._qid(qid), Io.TX_READ, slba=lba, cdw12=nlb - 1, cdw13=tid,
                        data_in=nlb * self.block)[1]

    def tx_commit(self, tid: int, *, qid: int | None = None) -> None:
        self.run(self._qid(qid), Io.TX_COMMIT, cdw13=tid)

    def tx_abort(self, tid: int, *, qid: int | None = None) -> None:
        self.run(self._qid(qid), Io.TX_ABORT, cdw13=tid)

    def append(self, data: bytes, *, qid: int | None = None) -> int:
        """Stage blocks with no LBA; returns the remap token."""
        return self.run(self._qid(qid), Io.APPEND, data_out=data, cdw12=self._blocks(data) - 1)[0].result

    def remap(self, triples: Iterable[tuple[int, int, int]], *, qid: int | None = None) -> None:
        """Bind (lba, token, nlb) triples at once."""
        body = b"".join(spec.NVME_REMAP_ENTRY.pack(lba=lba, token=token, nlb=nlb) for lba, token, nlb in triples)
        if not body:
            raise errors.ZeroLength("a remap needs at least one triple", submitted=False)
        self.run(self._qid(qid), Io.REMAP, data_out=body, cdw12=len(body) // spec.NVME_REMAP_ENTRY.size - 1)

    def release(self, token: int, *, qid: int | None = None) -> None:
        self.run(self._qid(qid), Io.RELEASE, cdw14_15=token)

    def hint(self, hint: int, *, qid: int | None = None) -> None:
        self.run(self._qid(qid), Io.HINT, cdw13=int(hint))


def cdw10_11(cdw10: int, cdw11: int = 0) -> int:
    """NVME_SQE.slba from command dwords 10 and 11 (admin commands give them other meanings than an LBA)."""
    return cdw10 | cdw11 << 32



