"""The reference NVMe controller: atomflash as docs/nvme.md says the drive speaks NVMe, in Python.

What it is for
--------------
:class:`NvmeController` is the behavioural model of the drive's NVMe controller.  The gateware
controller will be checked against it, and the host driver (:mod:`atomflash.nvme`) is first tested
on it.  It owns no semantics of its own: every command that touches the storage calls the reference
model (:class:`~atomflash.model.semantics.Model`, kept in :attr:`NvmeController.model`), whose
:class:`~atomflash.spec.Status` becomes the completion's NVMe status through
:func:`atomflash.spec.nvme_status_of`.  What the controller adds is the NVMe machinery around it:
registers, queues, data pointers, admin commands, logs and counters.

How it is driven
----------------
The host reads and writes BAR0 one dword at a time (:meth:`~NvmeController.mmio_read`,
:meth:`~NvmeController.mmio_write`) and shares its memory with the controller
(:class:`~atomflash.hostmem.HostMemory`): queues, PRP lists and data buffers live there.  Nothing
happens on its own.  Writing a submission queue's tail doorbell fetches and runs the new commands
at once, in queue order, one from each non-empty queue in turn (round robin; queues fill at the same
time only when the host rings a doorbell from inside ``irq``).  Each completion is written to its
completion queue with the phase tag of the current pass over the queue, and ``irq(vector)`` is
called for a queue with interrupts enabled (vector 0 for the admin queue) -- the stand-in for an
MSI-X message.  A completion queue the host has not emptied holds further completions inside the
controller until a head doorbell write makes room; the commands themselves have run.

What it models
--------------
* Registers (``spec.NVME_REGS``): CAP, VS, INTMS/INTMC, CC, CSTS, AQA, ASQ, ACQ and the doorbells.
  CC.EN 0 -> 1 creates the admin queues from AQA/ASQ/ACQ and sets CSTS.RDY at once, or sets
  CSTS.CFS when the configuration cannot work (a page size or command set other than the one
  supported, admin queues not page aligned or of one entry, I/O entry sizes other than 64/16
  bytes; 0 means "not set yet" and is checked again when an I/O queue is created).  CC.EN 1 -> 0
  is a controller reset: every queue, held completion and outstanding Asynchronous Event Request
  is dropped, features return to their defaults and what was acknowledged is made durable
  (``Model.flush``).  CC.SHN (normal or abrupt) flushes and reports CSTS.SHST complete; a power
  cycle after that is not an unsafe shutdown, unless the controller was enabled again or ran a
  command that changes storage in between.  A controller that is not ready (disabled, or CFS)
  ignores every doorbell.
* Queues: Create/Delete I/O SQ/CQ with the checks and statuses of the NVMe base specification;
  doorbell writes to queues that do not exist or outside a queue, and head doorbells releasing
  entries never posted, change nothing and raise an asynchronous event (error status, reported on
  an outstanding Asynchronous Event Request, masked until the host reads the error log).  Queue
  memory the host refuses is a fatal error (CSTS.CFS): no completion could say so.
* Data pointers: PRP1, PRP2 and PRP lists (chained through the last entry of a list page), checked
  before any data moves; SGLs are not supported.
* Admin commands: Identify, Get Log Page (error, SMART, firmware slot, atomflash's statistics and
  open-state pages), Get/Set Features, Abort (never aborts), Asynchronous Event Request.
* I/O commands: Read, Write, Flush, Write Zeroes, Dataset Management and atomflash's vendor verbs
  (docs/nvme.md's table), each a call of the model.  A command whose input cannot be fetched
  changes nothing: all input is read before the model is called.
* Every failed command enters the error information log (so does every asynchronous error event,
  with SQID and CID FFFFh); SMART counts data and commands, power cycles, unsafe shutdowns, media
  errors and error log entries over the drive's life (they survive resets and power cycles).

What it does not model
----------------------
* Time: no command is ever in flight, CSTS.RDY and CSTS.SHST change at once, interrupt coalescing
  is stored and never applied, Abort therefore never finds a command to abort.
* Optional NVMe features: SGLs, metadata and protection information, fused commands, namespace
  management, several namespaces, firmware download and commit, self-test, sanitize, reservations,
  saved features, weighted round robin (queue priorities are accepted and ignored).
* PCIe: the MSI-X table and pending-bit array (``irq`` stands in for a message), config space.
* Data loss at power loss: :meth:`NvmeController.power_cycle` keeps whatever the model holds
  (``Model.power_cycle()``); the power-cut oracle, not this controller, judges what may be lost.

Choices the documents leave open are marked ``CHOICE`` below.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field
from typing import Callable

from .. import spec
from ..hostmem import HostMemory, HostMemoryError
from ..spec import NvmeField as F
from ..spec import (NVME, NVME_CQE, NVME_FW_SLOT, NVME_DSM_RANGE, NVME_ERROR_LOG, NVME_ID_CTRL, NVME_ID_NS, NVME_REGS,
                    NVME_REMAP_ENTRY, NVME_SMART, NVME_SQE, NvmeAdminOpcode, NvmeCns, NvmeCommandStatus,
                    NvmeFeature, NvmeGenericStatus, NvmeIoOpcode, NvmeLogPage, NvmeSct, Status)
from ..specdsl import Bits, Record, at, u8, u32
from .semantics import Completion, Limits, Model

__all__ = ["NvmeController"]

PAGE = 1 << NVME.PAGE_SHIFT  # the one memory page size (CC.MPS 0)
SQE_BYTES = 1 << NVME.SQES
CQE_BYTES = 1 << NVME.CQES

# -- this controller's own parameters --------------------------------------------------------------------------
# (in spec.NVME_IDENT, shared with the firmware's admin path)
MODEL_NUMBER = spec.NVME_MODEL_NUMBER
FIRMWARE_REVISION = spec.NVME_FIRMWARE_REVISION
AERL = spec.NVME_IDENT.AERL                            # Asynchronous Event Requests outstanding at most, 0-based
ACL = spec.NVME_IDENT.ACL                              # Abort commands outstanding at most, 0-based
ERROR_LOG_ENTRIES = spec.NVME_IDENT.ERROR_LOG_ENTRIES  # entries the error information log keeps (ELPE + 1)
AVAILABLE_SPARE = spec.NVME_IDENT.AVAILABLE_SPARE      # SMART: the model has no flash to wear out
SPARE_THRESHOLD = spec.NVME_IDENT.SPARE_THRESHOLD

# Status field values (SCT, SC).
Nvst = tuple[int, int]


def _generic(sc: NvmeGenericStatus) -> Nvst:
    return int(NvmeSct.GENERIC), int(sc)


def _specific(sc: NvmeCommandStatus) -> Nvst:
    return int(NvmeSct.COMMAND_SPECIFIC), int(sc)


SUCCESS = _generic(NvmeGenericStatus.SUCCESS)
INVALID_FIELD = _generic(NvmeGenericStatus.INVALID_FIELD)
INVALID_OPCODE = _generic(NvmeGenericStatus.INVALID_OPCODE)
INVALID_NAMESPACE = _generic(NvmeGenericStatus.INVALID_NAMESPACE)
PRP_OFFSET_INVALID = _generic(NvmeGenericStatus.PRP_OFFSET_INVALID)
DATA_TRANSFER_ERROR = _generic(NvmeGenericStatus.DATA_TRANSFER_ERROR)


def take(bits: Bits, value: int) -> int:
    """The value of ``bits`` inside ``value``."""
    return bits.take(value)


def put(bits: Bits, value: int) -> int:
    """``value`` placed at ``bits``."""
    return bits.put(value)


def reg_field(register: str, name: str, value: int) -> int:
    """Field ``name`` of a register value (``spec.NVME_REGS``)."""
    return NVME_REGS[register].decompose(value)[name]


def reg_value(register: str, **fields: int) -> int:
    """A register value from its named fields."""
    return NVME_REGS[register].compose(**fields)


def _reg_mask(register: str) -> int:
    return sum(b.mask for b in NVME_REGS[register].bits)


class _Fail(Exception):
    """A command ends with ``status`` (raised from deep inside, e.g. a bad PRP)."""

    def __init__(self, status: Nvst):
        super().__init__(status)
        self.status = status


@dataclass
class _Outcome:
    """How a command completes: its status and DW0-DW1."""

    status: Nvst = SUCCESS
    result: int = 0


@dataclass
class _CQ:
    qid: int
    base: int
    size: int
    ien: bool
    iv: int
    tail: int = 0        # the next slot the controller writes
    head: int = 0        # the host's head doorbell
    phase: int = 1       # phase tag of the current pass
    posted: int = 0      # entries written and not yet released by the head doorbell
    held: deque = field(default_factory=deque)  # completions waiting for room


@dataclass
class _SQ:
    qid: int
    base: int
    size: int
    cqid: int
    head: int = 0        # the next entry the controller fetches
    tail: int = 0        # the host's tail doorbell


@dataclass
class _Event:
    type: int
    info: int
    lid: int


# == what the controller reports: built here for the reference and for whatever plays the firmware ================
def mdts_of(limits: Limits) -> int:
    """MDTS: the largest transfer in pages as a power of two (``NVME.MDTS`` for the default limits).
    CHOICE: for other limits the largest power of two within max_transfer blocks; NVMe cannot say
    less than two pages (MDTS 0 means no limit), and AWUN + 1 gives the exact block count."""
    pages = limits.max_transfer * limits.lba_size // PAGE
    return max(1, pages.bit_length() - 1)


def identify_controller_data(limits: Limits, *, serial: str, volatile_cache: bool) -> bytes:
    """The Identify Controller data structure (CNS 01h)."""
    L = limits
    return NVME_ID_CTRL.pack(
        vid=NVME.VENDOR_ID, ssvid=NVME.VENDOR_ID,
        **spec.ascii_values("sn", serial, 20), **spec.ascii_values("mn", MODEL_NUMBER, 40),
        **spec.ascii_values("fr", FIRMWARE_REVISION, 8),
        mdts=mdts_of(L), ver=NVME.VERSION, cntrltype=F.CNTRLTYPE_IO, acl=ACL, aerl=AERL,
        frmw=put(F.FRMW_SLOT1_RO, 1) | put(F.FRMW_SLOTS, 1), lpa=put(F.LPA_EXTENDED, 1), elpe=ERROR_LOG_ENTRIES - 1,
        sqes=NVME.SQES | NVME.SQES << 4, cqes=NVME.CQES | NVME.CQES << 4, nn=1,
        oncs=NVME_ID_CTRL.compose("oncs", write_zeroes=1, dsm=1),
        vwc=int(volatile_cache),  # bits 2:1 00b: Flush with the broadcast NSID not indicated
        awun=L.max_transfer - 1, awupf=0,
        af_magic=spec.IDENTIFY_MAGIC, af_max_atomic_pages=L.max_atomic_pages, af_max_open_tx=L.max_open_tx,
        af_max_pending=L.max_pending, af_max_remap_triples=L.max_remap_triples,
        af_max_appends=L.max_appends, af_spec_version=spec.SPEC_VERSION)


def identify_namespace_data(limits: Limits, *, nuse: int) -> bytes:
    """The Identify Namespace data structure (CNS 00h) of namespace 1; ``nuse``: blocks allocated."""
    L = limits
    return NVME_ID_NS.pack(
        nsze=L.capacity, ncap=L.capacity, nuse=nuse,
        nsfeat=put(F.NSFEAT_NSABP, 1), nlbaf=0, flbas=0, dlfeat=put(F.DLFEAT_READ, F.DLFEAT_ZEROS),
        nawun=L.max_transfer - 1, nawupf=0,
        lbaf0=NVME_ID_NS.compose("lbaf0", lbads=L.lba_size.bit_length() - 1))


def active_namespaces_data(nsid: int) -> bytes | None:
    """CNS 02h: the active namespace ids above ``nsid``; None for an nsid the list may not start at."""
    if nsid >= F.NSID_ALL - 1:
        return None
    active = [NVME.NSID] if nsid < NVME.NSID else []
    return b"".join(n.to_bytes(4, "little") for n in active).ljust(NVME_ID_CTRL.size, b"\0")


def smart_log_data(counters: dict, *, error_log_entries: int) -> bytes:
    """Log page 02h from ``counters`` (bytes_read, bytes_written, host_reads, host_writes, power_cycles,
    unsafe_shutdowns, media_errors, and percentage_used when the drive knows its wear; it saturates at
    255)."""
    def units(nbytes: int) -> int:  # thousands of 512-byte units, rounded up
        return -(-nbytes // (1000 * 512))

    s = counters
    return NVME_SMART.pack(
        available_spare=AVAILABLE_SPARE, spare_threshold=SPARE_THRESHOLD,
        data_units_read=units(s["bytes_read"]), data_units_written=units(s["bytes_written"]),
        host_reads=s["host_reads"], host_writes=s["host_writes"], power_cycles=s["power_cycles"],
        unsafe_shutdowns=s["unsafe_shutdowns"], media_errors=s["media_errors"],
        percentage_used=min(255, s.get("percentage_used", 0)),
        error_log_entries=error_log_entries)


def firmware_log_data() -> bytes:
    """Log page 03h: one read-only slot, running."""
    return NVME_FW_SLOT.pack(afi=1, **spec.ascii_values("frs1_", FIRMWARE_REVISION, 8))


class NvmeController:
    """The reference NVMe controller (see the module's documentation).

    Parameters
    ----------
    memory : HostMemory
        The host's memory as the controller reaches it.
    model, limits
        The semantics underneath; by default a new ``Model(limits, cache=volatile_cache)``.
    io_queues : int
        I/O queue pairs (and MSI-X vectors after vector 0) the controller implements.
    mqes : int
        CAP.MQES: the largest I/O queue, 0-based.
    volatile_cache : bool
        The build has a volatile write cache (Identify VWC, the Volatile Write Cache feature).
    serial : str
        Identify's serial number.
    irq : callable
        Called with the vector after a completion is posted to a queue with interrupts enabled.
    """

    def __init__(self, memory: HostMemory, *, model: Model | None = None, limits: Limits | None = None,
                 io_queues: int = NVME.IO_QUEUES, mqes: int = NVME.MQES, volatile_cache: bool = False,
                 serial: str = "AF0001", irq: Callable[[int], None] | None = None):
        if model is not None and limits is not None and model.limits != limits:
            raise ValueError("limits differ from the model's")
        if not 1 <= io_queues < NVME_REGS["sq_tail"].count:
            raise ValueError(f"io_queues must be 1..{NVME_REGS['sq_tail'].count - 1} (the doorbells BAR0 has)")
        if not 1 <= mqes <= NVME_REGS["cap_lo"].compose(mqes=0xFFFF):
            raise ValueError("mqes must allow queues of two entries or more")
        self.memory = memory
        self.model = model if model is not None else Model(limits, cache=volatile_cache)
        self.limits = self.model.limits
        if self.limits.lba_size & (self.limits.lba_size - 1):
            raise ValueError("NVMe block sizes are powers of two")
        self.io_queues, self.mqes = io_queues, mqes
        self._queue = 0               # the submission queue of the command being executed
        self.volatile_cache = volatile_cache or self.model.cache
        self.serial = serial
        self.irq = irq
        self._doorbells = {NVME_REGS[name].address(i): (name, i)
                           for name in ("sq_tail", "cq_head") for i in range(NVME_REGS[name].count)}
        self._admin_handlers = {
            NvmeAdminOpcode.DELETE_IO_SQ: self._delete_sq, NvmeAdminOpcode.CREATE_IO_SQ: self._create_sq,
            NvmeAdminOpcode.GET_LOG_PAGE: self._get_log_page, NvmeAdminOpcode.DELETE_IO_CQ: self._delete_cq,
            NvmeAdminOpcode.CREATE_IO_CQ: self._create_cq, NvmeAdminOpcode.IDENTIFY: self._identify,
            NvmeAdminOpcode.ABORT: self._abort, NvmeAdminOpcode.SET_FEATURES: self._set_features,
            NvmeAdminOpcode.GET_FEATURES: self._get_features,
            NvmeAdminOpcode.ASYNC_EVENT_REQUEST: self._async_event_request}
        self._io_handlers = {
            NvmeIoOpcode.FLUSH: self._flush, NvmeIoOpcode.WRITE: self._write, NvmeIoOpcode.READ: self._read,
            NvmeIoOpcode.WRITE_ZEROES: self._write_zeroes, NvmeIoOpcode.DATASET_MANAGEMENT: self._dsm,
            NvmeIoOpcode.ATOMIC_WRITE: self._atomic_write, NvmeIoOpcode.TX_WRITE: self._tx_write,
            NvmeIoOpcode.TX_READ: self._tx_read, NvmeIoOpcode.TX_COMMIT: self._tx_commit,
            NvmeIoOpcode.TX_ABORT: self._tx_abort, NvmeIoOpcode.APPEND: self._append,
            NvmeIoOpcode.REMAP: self._remap, NvmeIoOpcode.RELEASE: self._release, NvmeIoOpcode.HINT: self._hint}
        # Over the drive's life (SMART, the error log): kept across resets and power cycles.
        self.smart = dict(bytes_read=0, bytes_written=0, host_reads=0, host_writes=0, power_cycles=0,
                          unsafe_shutdowns=0, media_errors=0)
        self._errors: deque[bytes] = deque(maxlen=ERROR_LOG_ENTRIES)  # packed entries, newest first
        self._error_count = 0
        self._power_on()

    # == power and reset ===========================================================================================
    def _power_on(self) -> None:
        """Registers at their reset values, no queues, counters since power on at zero."""
        self._cc = self._aqa = self._intm = 0
        self._base = {"asq": 0, "acq": 0}  # ASQ, ACQ (64-bit, written as two halves)
        self._rdy = self._cfs = self._shst = 0
        self._clean = False          # a shutdown completed and no storage command ran since
        self._since_power_on = dict(host_read_pages=0, host_write_pages=0)
        self._drop_queues()
        self._features = self._default_features()

    def _drop_queues(self) -> None:
        self._sqs: dict[int, _SQ] = {}
        self._cqs: dict[int, _CQ] = {}
        self._aers: deque[int] = deque()      # CIDs of outstanding Asynchronous Event Requests
        self._events: deque[_Event] = deque()  # events not reported yet
        self._masked: set[int] = set()         # event types reported and not cleared by reading their log
        self._busy = False

    def _default_features(self) -> dict[int, int]:
        return {NvmeFeature.ARBITRATION: 0, NvmeFeature.VOLATILE_WRITE_CACHE: put(F.WCE, int(self.volatile_cache)),
                NvmeFeature.INTERRUPT_COALESCING: 0, NvmeFeature.ASYNC_EVENT_CONFIG: 0}

    def power_cycle(self) -> None:
        """Power lost and back: registers at reset, queues gone, the model's power cycle.  An unsafe
        shutdown unless the host completed a shutdown (CC.SHN) and ran no storage command since."""
        self.smart["power_cycles"] += 1
        if not self._clean:
            self.smart["unsafe_shutdowns"] += 1
        self.model.power_cycle()
        self._power_on()

    def _ready(self) -> bool:
        return bool(self._rdy) and not self._cfs

    def _enable(self) -> None:
        """CC.EN 0 -> 1: check the configuration, create the admin queues, report ready."""
        cc = self._cc
        asqs, acqs = reg_field("aqa", "asqs", self._aqa), reg_field("aqa", "acqs", self._aqa)
        bad = (reg_field("cc", "mps", cc) != 0 or reg_field("cc", "css", cc) != 0
               or reg_field("cc", "iosqes", cc) not in (0, NVME.SQES)  # CHOICE: 0 = "set before creating queues"
               or reg_field("cc", "iocqes", cc) not in (0, NVME.CQES)
               or self._base["asq"] % PAGE or self._base["acq"] % PAGE or asqs == 0 or acqs == 0)
        if bad:
            self._cfs = 1
            return
        self._cqs[0] = _CQ(0, self._base["acq"], acqs + 1, ien=True, iv=0)
        self._sqs[0] = _SQ(0, self._base["asq"], asqs + 1, cqid=0)
        self._rdy, self._shst, self._clean = 1, 0, False

    # CHOICE: error log, SMART counters and the model's open transactions and appends outlive a
    # controller reset (they belong to the drive, not to one enable of the controller).
    def _reset(self) -> None:
        """CC.EN 1 -> 0: a controller reset.  What was acknowledged is durable, as after any reset."""
        self.model.flush()
        self._drop_queues()
        self._features = self._default_features()
        self._rdy = self._cfs = 0

    def _shutdown(self) -> None:
        """CC.SHN normal or abrupt: flush (the drive also writes a checkpoint) and report complete."""
        self.model.flush()
        self._shst, self._clean = F.SHST_COMPLETE, True

    def _fatal(self) -> None:
        """A failure no completion can report (queue memory refused): CSTS.CFS, until a reset."""
        self._cfs = 1

    # == registers =================================================================================================
    def mmio_read(self, offset: int) -> int:
        """A 32-bit read of BAR0 at byte ``offset``."""
        self._check_offset(offset)
        regs = {
            "cap_lo": lambda: reg_value("cap_lo", mqes=self.mqes, cqr=1, to=NVME.TIMEOUT_500MS),
            "cap_hi": lambda: reg_value("cap_hi", dstrd=NVME.DSTRD, css=put(F.CAP_CSS_NVM, 1), mpsmin=0, mpsmax=0),
            "vs": lambda: NVME.VERSION,
            "intms": lambda: self._intm, "intmc": lambda: self._intm,
            "cc": lambda: self._cc,
            "csts": lambda: reg_value("csts", rdy=self._rdy, cfs=self._cfs, shst=self._shst),
            "aqa": lambda: self._aqa,
            "asq_lo": lambda: self._base["asq"] & 0xFFFF_FFFF, "asq_hi": lambda: self._base["asq"] >> 32,
            "acq_lo": lambda: self._base["acq"] & 0xFFFF_FFFF, "acq_hi": lambda: self._base["acq"] >> 32,
        }
        name = self._register_at(offset)
        return regs[name]() if name in regs else 0  # doorbells are write only; holes read 0

    def mmio_write(self, offset: int, value: int) -> None:
        """A 32-bit write of BAR0 at byte ``offset``; a tail doorbell runs the commands it submits."""
        self._check_offset(offset)
        value &= 0xFFFF_FFFF
        if offset in self._doorbells:
            name, qid = self._doorbells[offset]
            self._doorbell(name, qid, value)
            return
        name = self._register_at(offset)
        if name == "cc":
            self._write_cc(value & _reg_mask("cc"))
        elif name == "intms":
            self._intm |= value
        elif name == "intmc":
            self._unmask(value)
        elif name == "aqa":
            self._aqa = value & _reg_mask("aqa")
        elif name in ("asq_lo", "asq_hi", "acq_lo", "acq_hi"):
            self._write_half(name, value)

    @staticmethod
    def _check_offset(offset: int) -> None:
        if offset % 4 or not 0 <= offset < NVME_REGS.size:
            raise ValueError(f"BAR0 offset {offset:#x}: dword aligned, inside the {NVME_REGS.size:#x}-byte BAR")

    @staticmethod
    def _register_at(offset: int) -> str | None:
        return next((r.name for r in NVME_REGS if r.count == 1 and r.offset == offset), None)

    def _write_half(self, name: str, value: int) -> None:
        reg, half = name.split("_")
        old = self._base[reg]
        self._base[reg] = (old & ~0xFFFF_FFFF) | value if half == "lo" else (old & 0xFFFF_FFFF) | value << 32

    def _write_cc(self, value: int) -> None:
        old, self._cc = self._cc, value
        was, now = reg_field("cc", "en", old), reg_field("cc", "en", value)
        if was and not now:
            self._reset()
        elif now and not was:
            self._enable()
        if reg_field("cc", "shn", value) != F.SHN_NONE and reg_field("cc", "shn", old) == F.SHN_NONE:
            self._shutdown()

    def _unmask(self, value: int) -> None:
        """INTMC: unmask vectors; one with completions the host has not consumed interrupts now."""
        unmasked, self._intm = self._intm & value, self._intm & ~value
        for cq in list(self._cqs.values()):
            if cq.ien and cq.posted and unmasked >> cq.iv & 1 and self.irq:
                self.irq(cq.iv)

    # == doorbells, fetching, completing ============================================================================
    def _doorbell(self, name: str, qid: int, value: int) -> None:
        if not self._ready():
            return  # CHOICE: a controller not ready ignores doorbells, raising no event either
        queue = (self._sqs if name == "sq_tail" else self._cqs).get(qid)
        if queue is None:
            self._event(F.AE_TYPE_ERROR, F.AE_INVALID_DB_REGISTER, NvmeLogPage.ERROR)
        elif value >= queue.size:
            self._event(F.AE_TYPE_ERROR, F.AE_INVALID_DB_VALUE, NvmeLogPage.ERROR)
        elif name == "sq_tail":
            queue.tail = value
            self._service()
        else:
            self._release_cq(queue, value)

    def _release_cq(self, cq: _CQ, head: int) -> None:
        """CQyHDBL: the host consumed the entries up to ``head``; post completions held for room."""
        released = (head - cq.head) % cq.size
        if released > cq.posted:  # removing entries from an empty queue
            self._event(F.AE_TYPE_ERROR, F.AE_INVALID_DB_VALUE, NvmeLogPage.ERROR)
            return
        cq.head, cq.posted = head, cq.posted - released
        self._drain(cq)

    def _service(self) -> None:
        """Run what the submission queues hold: one command from each non-empty queue in turn."""
        if self._busy:
            return  # a doorbell rung from inside irq: the loop below picks its commands up
        self._busy = True
        try:
            while self._ready():
                waiting = [sq for _, sq in sorted(self._sqs.items()) if sq.head != sq.tail]
                if not waiting:
                    break
                for sq in waiting:
                    if self._ready() and self._sqs.get(sq.qid) is sq and sq.head != sq.tail:
                        self._run_next(sq)
        finally:
            self._busy = False

    def _run_next(self, sq: _SQ) -> None:
        try:
            raw = self.memory.read(sq.base + sq.head * SQE_BYTES, SQE_BYTES)
        except HostMemoryError:
            self._fatal()
            return
        sq.head = (sq.head + 1) % sq.size
        cmd = NVME_SQE.unpack(raw)
        outcome = self._execute(sq, cmd)
        if outcome is not None:
            self._complete(sq, cmd, outcome)
        self._report_events()  # a new request, or a log read that cleared an event

    def _execute(self, sq: _SQ, cmd) -> _Outcome | None:
        """The command's outcome, or None when it completes later (an Asynchronous Event Request)."""
        cdw0 = NVME_SQE.decompose("cdw0", cmd.cdw0)
        handlers = self._admin_handlers if sq.qid == 0 else self._io_handlers
        handler = handlers.get(cdw0.opc)
        try:
            if handler is None:
                return _Outcome(INVALID_OPCODE)
            if cdw0.psdt or cdw0.fuse:
                return _Outcome(INVALID_FIELD)  # SGLs and fused operations are not supported
            if sq.qid:
                self._check_io(cdw0.opc, cmd)
            self._queue = sq.qid      # what a queue opens (a transaction, an append) is that queue's
            return handler(cmd)
        except _Fail as failure:
            return _Outcome(failure.status)

    def _complete(self, sq: _SQ, cmd, outcome: _Outcome) -> None:
        cid = NVME_SQE.decompose("cdw0", cmd.cdw0).cid
        if outcome.status != SUCCESS:
            lba = cmd.slba if sq.qid and cmd.nsid == NVME.NSID else 0
            self._log_error(sq.qid, cid, outcome.status, lba=lba, nsid=cmd.nsid)
        self._post(self._cqs[sq.cqid], outcome, sqhd=sq.head, sqid=sq.qid, cid=cid)

    def _post(self, cq: _CQ, outcome: _Outcome, *, sqhd: int, sqid: int, cid: int) -> None:
        cq.held.append((outcome, sqhd, sqid, cid))
        self._drain(cq)

    def _drain(self, cq: _CQ) -> None:
        """Write held completions while the queue has room (a queue of n entries holds n - 1)."""
        while cq.held and cq.posted < cq.size - 1 and self._cqs.get(cq.qid) is cq and not self._cfs:
            outcome, sqhd, sqid, cid = cq.held.popleft()
            sct, sc = outcome.status
            entry = NVME_CQE.pack(result=outcome.result, sqhd=sqhd, sqid=sqid, cid=cid,
                                  sf=NVME_CQE.compose("sf", p=cq.phase, sc=sc, sct=sct))
            try:
                self.memory.write(cq.base + cq.tail * CQE_BYTES, entry)
            except HostMemoryError:
                self._fatal()
                return
            cq.tail += 1
            if cq.tail == cq.size:
                cq.tail, cq.phase = 0, cq.phase ^ 1
            cq.posted += 1
            self._interrupt(cq)

    def _interrupt(self, cq: _CQ) -> None:
        if cq.ien and self.irq is not None and not self._intm >> cq.iv & 1:
            self.irq(cq.iv)

    # == asynchronous events and the error log ======================================================================
    def _event(self, etype: int, info: int, lid: int) -> None:
        """An asynchronous event: logged, then reported on an outstanding request when one is."""
        if etype == F.AE_TYPE_ERROR:  # CHOICE: logged, so the log page the event names says something
            self._log_error(F.NOT_GIVEN, F.NOT_GIVEN, SUCCESS, lba=0, nsid=0)
        event = _Event(etype, info, int(lid))
        if event not in self._events:  # CHOICE: the same event twice before it is reported is reported once
            self._events.append(event)
        self._report_events()

    def _report_events(self) -> None:
        while self._aers and 0 in self._sqs:
            event = next((e for e in self._events if e.type not in self._masked), None)
            if event is None:
                return
            self._events.remove(event)
            self._masked.add(event.type)  # until the host reads the event's log page
            result = put(F.AE_TYPE, event.type) | put(F.AE_INFO, event.info) | put(F.AE_LID, event.lid)
            admin = self._sqs[0]
            self._post(self._cqs[0], _Outcome(SUCCESS, result), sqhd=admin.head, sqid=0, cid=self._aers.popleft())

    def _log_error(self, sqid: int, cid: int, status: Nvst, *, lba: int, nsid: int) -> None:
        self._error_count += 1
        sct, sc = status
        self._errors.appendleft(NVME_ERROR_LOG.pack(
            error_count=self._error_count, sqid=sqid, cid=cid, status=NVME_CQE.compose("sf", sc=sc, sct=sct),
            param=F.NOT_GIVEN, lba=lba, nsid=nsid))

    # == data pointers ==============================================================================================
    def _prps(self, cmd, length: int) -> list[tuple[int, int]]:
        """The (address, bytes) pieces of ``length`` bytes of data at PRP1/PRP2, every pointer checked."""
        prp1, prp2 = cmd.prp1, cmd.prp2
        if prp1 % 4:
            raise _Fail(PRP_OFFSET_INVALID)
        first = min(length, PAGE - prp1 % PAGE)
        rest = length - first
        if rest == 0:
            return [(prp1, first)]
        if rest <= PAGE:
            pages = [prp2]
        else:
            if prp2 % 8:  # a PRP list pointer may start inside its page, qword aligned
                raise _Fail(PRP_OFFSET_INVALID)
            pages = self._prp_list(prp2, -(-rest // PAGE))
        if any(p % PAGE for p in pages):
            raise _Fail(PRP_OFFSET_INVALID)
        return [(prp1, first)] + [(p, min(PAGE, rest - i * PAGE)) for i, p in enumerate(pages)]

    def _prp_list(self, pointer: int, count: int) -> list[int]:
        """``count`` entries of the PRP list at ``pointer``: a list page's last entry points to the next
        list page when more entries are needed than the page has left."""
        entries: list[int] = []
        while True:
            room = (PAGE - pointer % PAGE) // 8
            needed = count - len(entries)
            chained = needed > room
            raw = self._fetch(pointer, 8 * (room if chained else needed))
            got = [int.from_bytes(raw[i:i + 8], "little") for i in range(0, len(raw), 8)]
            if not chained:
                return entries + got
            pointer = got.pop()
            entries += got
            if pointer % PAGE:
                raise _Fail(PRP_OFFSET_INVALID)

    def _fetch(self, address: int, length: int) -> bytes:
        try:
            return self.memory.read(address, length)
        except HostMemoryError:
            raise _Fail(DATA_TRANSFER_ERROR) from None

    def _gather(self, cmd, length: int) -> bytes:
        """``length`` bytes from the host through the command's PRPs."""
        return b"".join(self._fetch(a, n) for a, n in self._prps(cmd, length))

    def _scatter(self, pieces: list[tuple[int, int]], data: bytes) -> None:
        """``data`` to the host at ``pieces`` (from :meth:`_prps`)."""
        at_ = 0
        for address, n in pieces:
            try:
                self.memory.write(address, data[at_:at_ + n])
            except HostMemoryError:
                raise _Fail(DATA_TRANSFER_ERROR) from None
            at_ += n

    def _send(self, cmd, data: bytes) -> None:
        self._scatter(self._prps(cmd, len(data)), data)

    def _max_data(self) -> int:
        return (1 << self._mdts()) * PAGE

    def _mdts(self) -> int:
        return mdts_of(self.limits)

    # == admin commands =============================================================================================
    def _admin_dwords(self, cmd) -> tuple[int, int]:
        """CDW10 and CDW11 (``spec.NVME_SQE`` keeps them as the I/O commands' SLBA)."""
        return cmd.slba & 0xFFFF_FFFF, cmd.slba >> 32

    def _create_cq(self, cmd) -> _Outcome | None:
        cdw10, cdw11 = self._admin_dwords(cmd)
        qid, qsize = take(F.QID, cdw10), take(F.QSIZE, cdw10)
        self._check_new_queue(qid, qsize, self._cqs, cdw11, cmd.prp1)
        ien, iv = bool(take(F.IEN, cdw11)), take(F.IV, cdw11)
        if ien and not 1 <= iv <= self.io_queues:  # one MSI-X vector per I/O completion queue
            return _Outcome(_specific(NvmeCommandStatus.INVALID_INTERRUPT_VECTOR))
        if reg_field("cc", "iocqes", self._cc) != NVME.CQES:  # CHOICE: docs/nvme.md's CFS, checked here
            self._fatal()
            return None
        self._cqs[qid] = _CQ(qid, cmd.prp1, qsize + 1, ien, iv)
        return _Outcome()

    def _create_sq(self, cmd) -> _Outcome | None:
        cdw10, cdw11 = self._admin_dwords(cmd)
        qid, qsize = take(F.QID, cdw10), take(F.QSIZE, cdw10)
        self._check_new_queue(qid, qsize, self._sqs, cdw11, cmd.prp1)
        cqid = take(F.CQID, cdw11)
        if cqid == 0 or cqid not in self._cqs:
            return _Outcome(_specific(NvmeCommandStatus.INVALID_CQ))
        if reg_field("cc", "iosqes", self._cc) != NVME.SQES:
            self._fatal()
            return None
        self._sqs[qid] = _SQ(qid, cmd.prp1, qsize + 1, cqid)
        return _Outcome()

    def _check_new_queue(self, qid: int, qsize: int, existing: dict, cdw11: int, base: int) -> None:
        if not 1 <= qid <= self.io_queues or qid in existing:
            raise _Fail(_specific(NvmeCommandStatus.INVALID_QID))
        if not 1 <= qsize <= self.mqes:  # two entries at least, MQES + 1 at most
            raise _Fail(_specific(NvmeCommandStatus.INVALID_QUEUE_SIZE))
        if not take(F.PC, cdw11) or base % PAGE:  # CAP.CQR: contiguous queues, on a page
            raise _Fail(INVALID_FIELD)

    def _delete_sq(self, cmd) -> _Outcome:
        qid = take(F.QID, self._admin_dwords(cmd)[0])
        sq = self._sqs.get(qid) if qid else None
        if sq is None:
            return _Outcome(_specific(NvmeCommandStatus.INVALID_QID))
        del self._sqs[qid]
        while sq.head != sq.tail:  # submitted and not fetched: aborted (completions held for it stay)
            slot, sq.head = sq.head, (sq.head + 1) % sq.size
            try:
                aborted = NVME_SQE.unpack(self.memory.read(sq.base + slot * SQE_BYTES, SQE_BYTES))
            except HostMemoryError:
                continue
            self._complete(sq, aborted, _Outcome(_generic(NvmeGenericStatus.SQ_DELETION_ABORT)))
        return _Outcome()

    def _delete_cq(self, cmd) -> _Outcome:
        qid = take(F.QID, self._admin_dwords(cmd)[0])
        if not qid or qid not in self._cqs:
            return _Outcome(_specific(NvmeCommandStatus.INVALID_QID))
        if any(sq.cqid == qid for sq in self._sqs.values()):
            return _Outcome(_specific(NvmeCommandStatus.INVALID_QUEUE_DELETION))
        del self._cqs[qid]
        return _Outcome()

    def _abort(self, cmd) -> _Outcome:
        return _Outcome(result=put(F.NOT_ABORTED, 1))  # nothing is ever in flight to abort

    def _async_event_request(self, cmd) -> _Outcome | None:
        if len(self._aers) > AERL:
            return _Outcome(_specific(NvmeCommandStatus.AER_LIMIT))
        self._aers.append(NVME_SQE.decompose("cdw0", cmd.cdw0).cid)
        return None

    # -- Identify -------------------------------------------------------------------------------------------------
    def _identify(self, cmd) -> _Outcome:
        cns = take(F.CNS, self._admin_dwords(cmd)[0])
        if cns == NvmeCns.CONTROLLER:
            data = self.identify_controller()
        elif cns == NvmeCns.NAMESPACE:
            if cmd.nsid != NVME.NSID:
                return _Outcome(INVALID_NAMESPACE)
            data = self.identify_namespace()
        elif cns == NvmeCns.ACTIVE_NAMESPACES:
            data = active_namespaces_data(cmd.nsid)
            if data is None:
                return _Outcome(INVALID_NAMESPACE)
        else:
            return _Outcome(INVALID_FIELD)
        self._send(cmd, data)
        return _Outcome()

    def identify_controller(self) -> bytes:
        """The Identify Controller data structure (F.CNS 01h)."""
        return identify_controller_data(self.limits, serial=self.serial, volatile_cache=self.volatile_cache)

    def identify_namespace(self) -> bytes:
        """The Identify Namespace data structure (F.CNS 00h) of namespace 1."""
        return identify_namespace_data(self.limits, nuse=len(self.model.contents()))

    # -- Get Log Page ---------------------------------------------------------------------------------------------
    def _get_log_page(self, cmd) -> _Outcome:
        cdw10, cdw11 = self._admin_dwords(cmd)
        lid = take(F.LID, cdw10)
        length = ((take(F.NUMDU, cdw11) << 16 | take(F.NUMDL, cdw10)) + 1) * 4
        offset = cmd.cdw12 | cmd.cdw13 << 32
        pages = {NvmeLogPage.ERROR: self.error_log, NvmeLogPage.SMART: self.smart_log,
                 NvmeLogPage.FIRMWARE: self.firmware_log, NvmeLogPage.ATOMFLASH_STATS: self.stats_log,
                 NvmeLogPage.ATOMFLASH_OPEN: self.open_log}
        if lid not in pages:
            return _Outcome(_specific(NvmeCommandStatus.INVALID_LOG_PAGE))
        page = pages[lid]()
        if offset % 4 or offset > len(page) or length > self._max_data():
            return _Outcome(INVALID_FIELD)
        self._send(cmd, page[offset:offset + length].ljust(length, b"\0"))
        if lid == NvmeLogPage.ERROR and not take(F.RAE, cdw10):
            self._masked.discard(F.AE_TYPE_ERROR)  # reading the log clears the error event
        return _Outcome()

    def error_log(self) -> bytes:
        """Log page 01h: the newest ``ERROR_LOG_ENTRIES`` errors, newest first."""
        return b"".join(self._errors).ljust(ERROR_LOG_ENTRIES * NVME_ERROR_LOG.size, b"\0")

    def smart_log(self) -> bytes:
        """Log page 02h: SMART / health information over the drive's life."""
        return smart_log_data(self.smart, error_log_entries=self._error_count)

    def firmware_log(self) -> bytes:
        """Log page 03h: one read-only slot, running."""
        return firmware_log_data()

    def stats_log(self) -> bytes:
        """Log page C0h: ``spec.LOG_PAGE`` with the counters the model can give (since power on); the
        flash-side counters it has no flash for are zero."""
        return spec.LOG_PAGE.pack(**self._since_power_on)

    def open_log(self) -> bytes:
        """Log page C1h: an ``OPEN_TX`` per transaction slot, then an ``OPEN_APPEND`` per append slot.
        CHOICE: the model has no transaction slots, so open transactions fill the first slots in the
        order they opened; ``pages`` counts the blocks each has written, rewrites included."""
        L = self.limits
        txs = list(self.model.tx_written.items())
        out = [spec.OPEN_TX.pack(tid=tid, pages=written) for (_, tid), written in txs]
        out += [spec.OPEN_TX.pack()] * (L.max_open_tx - len(txs))
        for slot in range(L.max_appends):
            a = self.model.appends.get(slot)
            out.append(spec.OPEN_APPEND.pack(token=a.token, nlb=len(a.blocks)) if a else spec.OPEN_APPEND.pack())
        return b"".join(out)

    # -- Features -------------------------------------------------------------------------------------------------
    def _number_of_queues(self) -> int:
        return put(F.NSQ, self.io_queues - 1) | put(F.NCQ, self.io_queues - 1)

    def _get_features(self, cmd) -> _Outcome:
        fid = take(F.FID, self._admin_dwords(cmd)[0])
        if fid == NvmeFeature.NUMBER_OF_QUEUES:
            return _Outcome(result=self._number_of_queues())
        if fid not in self._features:
            return _Outcome(INVALID_FIELD)
        return _Outcome(result=self._features[fid])

    def _set_features(self, cmd) -> _Outcome:
        cdw10, value = self._admin_dwords(cmd)
        fid = take(F.FID, cdw10)
        if fid == NvmeFeature.NUMBER_OF_QUEUES:  # CHOICE: what is allocated, whatever was asked (FFFFh too)
            return _Outcome(result=self._number_of_queues())
        if fid not in self._features:
            return _Outcome(INVALID_FIELD)
        if fid == NvmeFeature.VOLATILE_WRITE_CACHE:
            enable = take(F.WCE, value)
            if enable and not self.volatile_cache:
                return _Outcome(INVALID_FIELD)
            if not enable:
                self.model.flush()  # what the cache held is durable before writes go through it no more
            value = put(F.WCE, enable)
        self._features[fid] = value
        return _Outcome()

    def _write_cache_on(self) -> bool:
        return bool(take(F.WCE, self._features[NvmeFeature.VOLATILE_WRITE_CACHE]))

    # == I/O commands ===============================================================================================
    def _check_io(self, opcode: int, cmd) -> None:
        """What every I/O command must satisfy: the namespace (Flush may also name all of them)."""
        allowed = (NVME.NSID, F.NSID_ALL) if opcode == NvmeIoOpcode.FLUSH else (NVME.NSID,)
        if cmd.nsid not in allowed:
            raise _Fail(INVALID_NAMESPACE)
        if opcode not in (NvmeIoOpcode.READ, NvmeIoOpcode.TX_READ, NvmeIoOpcode.FLUSH):
            self._clean = False  # storage changed after the shutdown

    def _judge(self, c: Completion, *, read: bool = False) -> _Outcome:
        """The model's completion as an NVMe outcome."""
        if c.status == Status.MEDIA_ERROR:
            self.smart["media_errors"] += 1
        return _Outcome(spec.nvme_status_of(c.status, read=read), c.result)

    @staticmethod
    def _blocks(cmd) -> int:
        return NVME_SQE.decompose("cdw12", cmd.cdw12).nlb + 1

    def _fua(self, cmd) -> bool:
        """Durable on completion: FUA, or no write cache in use."""
        return bool(NVME_SQE.decompose("cdw12", cmd.cdw12).fua) or not self._write_cache_on()

    def _stand_in(self) -> bytes:
        """Data for a command larger than any the model accepts, which the controller does not fetch:
        the model judges one block more than its limit (it checks sizes before contents), so its
        status is the one it would give the whole command."""
        return bytes((self.limits.max_transfer + 1) * self.limits.lba_size)

    # CHOICE: SMART and the C0h page count commands that succeeded -- host reads: READ and TX_READ;
    # host writes: WRITE, TX_WRITE, ATOMIC_WRITE and APPEND (the commands that carry blocks from the
    # host).  Write Zeroes, Dataset Management and REMAP carry none.
    def _count_written(self, c: Completion, blocks: int) -> None:
        if c.ok:
            self.smart["host_writes"] += 1
            self.smart["bytes_written"] += blocks * self.limits.lba_size
            self._since_power_on["host_write_pages"] += blocks

    def _count_read(self, c: Completion, blocks: int) -> None:
        if c.ok:
            self.smart["host_reads"] += 1
            self.smart["bytes_read"] += blocks * self.limits.lba_size
            self._since_power_on["host_read_pages"] += blocks

    def _read_blocks(self, cmd, run: Callable[[int], Completion]) -> _Outcome:
        """READ and TX_READ: ask the model, then send what it returns.  CHOICE: the data pointers are
        looked at only once there is data to send (a command that fails reports its own status, as the
        gateware, which reads the flash before it walks the PRPs)."""
        n = self._blocks(cmd)
        c = run(n)
        if c.ok:
            self._send(cmd, c.data)
        self._count_read(c, n)
        return self._judge(c, read=True)

    def _write_blocks(self, cmd, run: Callable[[bytes], Completion]) -> _Outcome:
        """WRITE, TX_WRITE and APPEND: fetch the blocks, then ask the model."""
        n = self._blocks(cmd)
        if n > self.limits.max_transfer:
            return self._judge(run(self._stand_in()))
        c = run(self._gather(cmd, n * self.limits.lba_size))
        self._count_written(c, n)
        return self._judge(c)

    def _read(self, cmd) -> _Outcome:
        return self._read_blocks(cmd, lambda n: self.model.read(cmd.slba, n))

    def _tx_read(self, cmd) -> _Outcome:
        return self._read_blocks(cmd, lambda n: self.model.tx_read(cmd.cdw13, cmd.slba, n, queue=self._queue))

    def _write(self, cmd) -> _Outcome:
        return self._write_blocks(cmd, lambda data: self.model.write(cmd.slba, data, fua=self._fua(cmd)))

    def _tx_write(self, cmd) -> _Outcome:
        flags = NVME_SQE.decompose("cdw12", cmd.cdw12)
        return self._write_blocks(cmd, lambda data: self.model.tx_write(
            cmd.cdw13, cmd.slba, data, final=bool(flags.tx_final), new=bool(flags.tx_new), queue=self._queue))

    def _append(self, cmd) -> _Outcome:
        return self._write_blocks(cmd, lambda data: self.model.append(data, queue=self._queue))

    def _flush(self, cmd) -> _Outcome:
        return self._judge(self.model.flush())

    def _write_zeroes(self, cmd) -> _Outcome:
        """The blocks read zeros, durable like a write: the model's deallocate (DLFEAT: reads zeros).
        CHOICE: like the model's trim, not limited to max_transfer blocks (no data moves)."""
        return self._judge(self.model.trim(cmd.slba, self._blocks(cmd), fua=self._fua(cmd)))

    def _dsm(self, cmd) -> _Outcome:
        """Dataset Management: with F.AD, deallocate every range; a range beyond the namespace fails the
        command before any is deallocated.  CHOICE: a range of 0 blocks deallocates nothing."""
        cdw10, cdw11 = self._admin_dwords(cmd)
        count = take(F.NR, cdw10) + 1
        raw = self._gather(cmd, count * NVME_DSM_RANGE.size)
        if not take(F.AD, cdw11):
            return _Outcome()
        ranges = [NVME_DSM_RANGE.unpack(raw[i:i + NVME_DSM_RANGE.size])
                  for i in range(0, len(raw), NVME_DSM_RANGE.size)]
        if any(r.slba + r.nlb > self.limits.capacity for r in ranges):
            return self._judge(Completion(Status.LBA_OUT_OF_RANGE))
        durable = not self._write_cache_on()
        for r in ranges:
            if r.nlb:
                c = self.model.trim(r.slba, r.nlb, fua=durable)
                if not c.ok:
                    return self._judge(c)
        return _Outcome()

    def _atomic_write(self, cmd) -> _Outcome:
        """ATOMIC_WRITE: the LBA list at MPTR (NLB + 1 u64), the blocks in list order at the PRPs."""
        L, n = self.limits, self._blocks(cmd)
        if n > L.max_atomic_pages:
            return self._judge(self.model.atomic_write([(0, self.model.zero)] * (L.max_atomic_pages + 1)))
        if cmd.mptr % 4:
            return self._judge(Completion(Status.MISALIGNED_BUFFER))
        raw_lbas = self._fetch(cmd.mptr, 8 * n)
        data = self._gather(cmd, n * L.lba_size)
        lbas = [int.from_bytes(raw_lbas[i:i + 8], "little") for i in range(0, len(raw_lbas), 8)]
        blocks = [data[i * L.lba_size:(i + 1) * L.lba_size] for i in range(n)]
        c = self.model.atomic_write(zip(lbas, blocks))
        self._count_written(c, n)
        return self._judge(c)

    def _remap(self, cmd) -> _Outcome:
        """REMAP: NLB + 1 ``NVME_REMAP_ENTRY`` triples in the data buffer, bound at once."""
        L, n = self.limits, self._blocks(cmd)
        if n > L.max_remap_triples:
            return self._judge(self.model.remap([(0, 0, 1)] * (L.max_remap_triples + 1)))
        raw = self._gather(cmd, n * NVME_REMAP_ENTRY.size)
        entries = [NVME_REMAP_ENTRY.unpack(raw[i:i + NVME_REMAP_ENTRY.size])
                   for i in range(0, len(raw), NVME_REMAP_ENTRY.size)]
        return self._judge(self.model.remap([(e.lba, e.token, e.nlb) for e in entries], queue=self._queue))

    def _tx_commit(self, cmd) -> _Outcome:
        return self._judge(self.model.tx_commit(cmd.cdw13, queue=self._queue))

    def _tx_abort(self, cmd) -> _Outcome:
        return self._judge(self.model.tx_abort(cmd.cdw13, queue=self._queue))

    def _release(self, cmd) -> _Outcome:
        return self._judge(self.model.release(cmd.cdw14_15, queue=self._queue))

    def _hint(self, cmd) -> _Outcome:
        return self._judge(self.model.hint(cmd.cdw13))
