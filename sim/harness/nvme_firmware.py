"""The firmware's NVMe duties, played by Python through the controller's window (``spec.NVME_FW_REGS``).

In the SoC the RISC-V firmware runs the NVMe controller's admin path (docs/nvme.md, "Gateware and
firmware"); in a simulation of the drive without a CPU (``tb/nvme``) this class does the same work
through the same registers, as ``sim/harness/ftl_tb.py`` plays the firmware's FTL duties.  What it
answers follows the reference controller (:mod:`atomflash.model.nvme`): the same checks in the same
order, the same data structures (built by the reference's own functions), the same choices.

* **CC.** EN 0 -> 1: the configuration is checked (CFS when it is not one this controller runs), the
  admin CQ and SQ are created from AQA/ASQ/ACQ, RDY set.  EN 1 -> 0: the write cache is flushed, every
  queue dropped (a queue engine RESET), the I/O commands in flight finish, features return to their
  defaults, RDY and CFS clear.  SHN: flush and checkpoint (the ``flush`` callable), SHST complete.
* **Admin commands**: Identify (CNS 00h, 01h, 02h), Create/Delete I/O SQ/CQ (checked, then applied
  to the queue engine; a Delete I/O SQ completes once the queue's commands have), Get Log Page (01h,
  02h, 03h, and the vendor pages through ``vendor_log``), Get/Set Features, Abort, Asynchronous Event
  Request.  Data goes to the host through the data mover, from a scratch page in SoC memory.
* **Events**: each failed command (I/O, from ``failed_*``, and admin) enters the error log, a media
  error counts in SMART; an ignored doorbell becomes an error event for an outstanding Asynchronous
  Event Request.

``window`` has ``async read(offset)`` and ``async write(offset, value)``; ``soc`` has
``write_bytes(addr, data)`` and ``read_bytes(addr, n)`` (the bench's direct view of SoC memory).
Call :meth:`poll` from the bench's loop (it returns whether it did anything), or run :meth:`run`.
"""

from __future__ import annotations

from collections import deque
from typing import Awaitable, Callable

from atomflash import spec
from atomflash.model import nvme as ref
from atomflash.model.semantics import Limits
from atomflash.spec import (NVME, NVME_ERROR_LOG, NVME_FW_REGS as R, NVME_SQE, NvmeAdminOpcode as Admin, NvmeCns,
                            NvmeCommandStatus, NvmeFeature, NvmeField as F, NvmeGenericStatus as G, NvmeLogPage,
                            NvmeSct, Status)
from rtl.nvme.queues import QueueOp

__all__ = ["NvmeFirmwareModel"]

PAGE = 1 << NVME.PAGE_SHIFT
SUCCESS = (NvmeSct.GENERIC, G.SUCCESS)


def _generic(sc):
    return NvmeSct.GENERIC, int(sc)


def _specific(sc):
    return NvmeSct.COMMAND_SPECIFIC, int(sc)


class _Fail(Exception):
    def __init__(self, status):
        super().__init__(status)
        self.status = status


class NvmeFirmwareModel:
    """Runs the admin path of the NVMe controller through its window; see the module docstring.

    Parameters
    ----------
    window, soc : the register window and SoC memory (see the module docstring).
    limits : the drive's limits (capacity, block size ...), as IDENTIFY reports them.
    scratch : a page of SoC memory the firmware may use for the data it sends.
    staging_base : where the I/O commands' staging areas start (``NvmeController.staging_bytes``).
    io_queues, mqes : as the controller was built.
    volatile_cache : the drive has a volatile write cache.
    flush : ``async flush(checkpoint: bool)``: make every acknowledged write durable (and write a
        checkpoint), the firmware's FTL work; called at a reset and a shutdown.
    vendor_log : ``async vendor_log(lid) -> bytes``: atomflash's log pages C0h and C1h.
    nuse : ``() -> int``: blocks allocated, for Identify Namespace.
    percentage_used : ``() -> int``: the life the flash has used, percent, for SMART.
    """

    def __init__(self, window, soc, *, limits: Limits, scratch: int, staging_base: int,
                 io_queues: int = NVME.IO_QUEUES, mqes: int = NVME.MQES, volatile_cache: bool = False,
                 flush: Callable[[bool], Awaitable[None]] | None = None,
                 vendor_log: Callable[[int], Awaitable[bytes]] | None = None,
                 nuse: Callable[[], int] = lambda: 0, percentage_used: Callable[[], int] = lambda: 0,
                 serial: str = "AF0001"):
        self.window, self.soc, self.limits = window, soc, limits
        self.scratch, self.staging_base = scratch, staging_base
        self.io_queues, self.mqes, self.volatile_cache = io_queues, mqes, volatile_cache
        self.flush, self.vendor_log, self.nuse, self.serial = flush, vendor_log, nuse, serial
        self.percentage_used = percentage_used
        self.cc = 0
        self.cqs: dict[int, tuple[int, bool, int]] = {}      # qid -> (size, ien, iv)
        self.sqs: dict[int, int] = {}                        # qid -> cqid
        self.features = self._default_features()
        self.errors: deque[bytes] = deque(maxlen=ref.ERROR_LOG_ENTRIES)
        self.error_count = 0
        self.aers: deque[int] = deque()
        self.events: list[tuple[int, int, int]] = []
        self.masked: set[int] = set()
        self.smart = dict(power_cycles=1, unsafe_shutdowns=0, media_errors=0)
        self.seen: dict[str, int] = {}

    # -- registers ----------------------------------------------------------------------------------
    async def rd(self, name: str, i: int = 0) -> int:
        return await self.window.read(R[name].offset + i * R[name].stride)

    async def wr(self, name: str, value: int) -> None:
        await self.window.write(R[name].offset, value)

    async def status(self):
        return R["status"].decompose(await self.rd("status"))

    async def act(self, **bits) -> None:
        await self.wr("ctrl", R["ctrl"].compose(**bits))

    async def until(self, what: str, done, polls: int = 200_000) -> None:
        for _ in range(polls):
            if done(await self.status()):
                return
        raise AssertionError(f"firmware: {what} never happened")

    async def start(self) -> None:
        """Power on: the staging areas and the features the gateware acts on."""
        assert await self.rd("id") == spec.NVME_FW_REGS_ID
        await self.wr("staging_base", self.staging_base)
        await self._apply_features()

    async def run(self, idle: Callable[[], Awaitable[None]]) -> None:
        """Serve for ever; ``idle()`` lets time pass when there was nothing to do."""
        while True:
            if not await self.poll():
                await idle()

    async def poll(self) -> bool:
        """One pass over what waits: CC, events, one admin command."""
        st = await self.status()
        worked = False
        if st.cc_changed:
            await self.act(ack_cc=1)
            await self._cc_written(await self.rd("cc"))
            worked = True
        if st.failed_valid:
            await self._failed_io()
            worked = True
        if st.doorbell_error_valid:
            e = R["doorbell_error"].decompose(await self.rd("doorbell_error"))
            await self.act(pop_doorbell_error=1)
            if 0 in self.sqs:       # a controller not ready ignores doorbells, raising no event either
                await self._event(F.AE_TYPE_ERROR, e.kind, NvmeLogPage.ERROR)
            worked = True
        if st.admin_valid:
            await self._admin()
            worked = True
        return worked

    # -- CC -------------------------------------------------------------------------------------------
    def _default_features(self) -> dict[int, int]:
        return {NvmeFeature.ARBITRATION: 0, NvmeFeature.VOLATILE_WRITE_CACHE: F.WCE.put(int(self.volatile_cache)),
                NvmeFeature.INTERRUPT_COALESCING: 0, NvmeFeature.ASYNC_EVENT_CONFIG: 0}

    async def _apply_features(self) -> None:
        await self.wr("features", R["features"].compose(write_cache=self._write_cache_on()))

    def _write_cache_on(self) -> bool:
        return bool(F.WCE.take(self.features[NvmeFeature.VOLATILE_WRITE_CACHE]))

    async def _set_csts(self, **bits) -> None:
        now = R["csts"].decompose(await self.rd("csts"))
        await self.wr("csts", R["csts"].compose(**(dict(now) | bits)))

    async def _cc_written(self, value: int) -> None:
        cc = spec.NVME_REGS["cc"]
        old, self.cc = self.cc, value
        was, now = cc.decompose(old).en, cc.decompose(value).en
        if was and not now:
            await self._reset()
        elif now and not was:
            await self._enable()
        if cc.decompose(value).shn != F.SHN_NONE and cc.decompose(old).shn == F.SHN_NONE:
            if self.flush:
                await self.flush(True)
            await self._set_csts(shst=F.SHST_COMPLETE)
        self.seen["cc"] = self.seen.get("cc", 0) + 1

    async def _enable(self) -> None:
        cc = spec.NVME_REGS["cc"].decompose(self.cc)
        aqa = spec.NVME_REGS["aqa"].decompose(await self.rd("aqa"))
        asq = await self.rd("asq_lo") | await self.rd("asq_hi") << 32
        acq = await self.rd("acq_lo") | await self.rd("acq_hi") << 32
        bad = (cc.mps != 0 or cc.css != 0 or cc.iosqes not in (0, NVME.SQES) or cc.iocqes not in (0, NVME.CQES)
               or asq % PAGE or acq % PAGE or aqa.asqs == 0 or aqa.acqs == 0)
        if bad:
            await self._set_csts(cfs=1)
            return
        await self._queue_op(QueueOp.CREATE_CQ, 0, base=acq, size=aqa.acqs, ien=1, iv=0)
        await self._queue_op(QueueOp.CREATE_SQ, 0, base=asq, size=aqa.asqs, cqid=0)
        self.cqs, self.sqs = {0: (aqa.acqs + 1, True, 0)}, {0: 0}
        await self._set_csts(rdy=1, shst=0)

    async def _reset(self) -> None:
        if self.flush:
            await self.flush(False)
        await self._queue_op(QueueOp.RESET, 0)
        await self.until("the I/O commands to finish after a reset", lambda st: st.io_idle)
        self.cqs, self.sqs, self.aers = {}, {}, deque()
        self.features = self._default_features()
        await self._apply_features()
        await self._set_csts(rdy=0, cfs=0)

    async def _queue_op(self, op: int, qid: int, *, base=0, size=0, cqid=0, ien=0, iv=0) -> None:
        await self.wr("queue_op", R["queue_op"].compose(op=op, qid=qid, cqid=cqid, ien=ien, iv=iv))
        await self.wr("queue_base_lo", base & 0xFFFF_FFFF)
        await self.wr("queue_base_hi", base >> 32)
        await self.wr("queue_size", size)
        await self.act(config=1)
        await self.until("a queue operation", lambda st: not st.config_busy)

    # -- events and the error log --------------------------------------------------------------------
    def _log_error(self, sqid: int, cid: int, status, *, lba: int, nsid: int) -> None:
        self.error_count += 1
        sct, sc = status
        self.errors.appendleft(NVME_ERROR_LOG.pack(
            error_count=self.error_count, sqid=sqid, cid=cid, status=spec.NVME_CQE.compose("sf", sc=sc, sct=sct),
            param=F.NOT_GIVEN, lba=lba, nsid=nsid))

    async def _failed_io(self) -> None:
        c = R["failed_command"].decompose(await self.rd("failed_command"))
        s = R["failed_status"].decompose(await self.rd("failed_status"))
        lba = await self.rd("failed_lba_lo") | await self.rd("failed_lba_hi") << 32
        nsid = await self.rd("failed_nsid")
        await self.act(pop_failed=1)
        if s.sct == NvmeSct.MEDIA:
            self.smart["media_errors"] += 1
        self._log_error(c.sqid, c.cid, (s.sct, s.sc), lba=lba, nsid=nsid)

    async def _event(self, etype: int, info: int, lid: int) -> None:
        if etype == F.AE_TYPE_ERROR:
            self._log_error(F.NOT_GIVEN, F.NOT_GIVEN, SUCCESS, lba=0, nsid=0)
        event = (etype, info, int(lid))
        if event not in self.events:
            self.events.append(event)
        await self._report_events()

    async def _report_events(self) -> None:
        while self.aers and 0 in self.sqs:
            event = next((e for e in self.events if e[0] not in self.masked), None)
            if event is None:
                return
            self.events.remove(event)
            self.masked.add(event[0])
            result = F.AE_TYPE.put(event[0]) | F.AE_INFO.put(event[1]) | F.AE_LID.put(event[2])
            await self._post(self.aers.popleft(), SUCCESS, result)

    # -- admin commands ------------------------------------------------------------------------------
    async def _post(self, cid: int, status, result: int = 0) -> None:
        await self.until("the previous admin completion to be posted", lambda st: not st.post_busy)
        sct, sc = status
        await self.wr("cpl_result_lo", result & 0xFFFF_FFFF)
        await self.wr("cpl_result_hi", result >> 32)
        await self.wr("cpl_status", R["cpl_status"].compose(cid=cid, sc=sc, sct=sct))
        await self.act(post=1)

    async def _admin(self) -> None:
        raw = b"".join([(await self.rd("admin_sqe", i)).to_bytes(4, "little") for i in range(16)])
        await self.act(pop_admin=1)
        cmd = NVME_SQE.unpack(raw)
        cdw0 = NVME_SQE.decompose("cdw0", cmd.cdw0)
        self.seen[f"admin {cdw0.opc:#x}"] = self.seen.get(f"admin {cdw0.opc:#x}", 0) + 1
        handlers = {Admin.IDENTIFY: self._identify, Admin.CREATE_IO_CQ: self._create_cq,
                    Admin.CREATE_IO_SQ: self._create_sq, Admin.DELETE_IO_SQ: self._delete_sq,
                    Admin.DELETE_IO_CQ: self._delete_cq, Admin.GET_LOG_PAGE: self._get_log_page,
                    Admin.GET_FEATURES: self._get_features, Admin.SET_FEATURES: self._set_features,
                    Admin.ABORT: self._abort, Admin.ASYNC_EVENT_REQUEST: self._async_event_request}
        handler = handlers.get(cdw0.opc)
        try:
            if handler is None:
                outcome = (_generic(G.INVALID_OPCODE), 0)
            elif cdw0.psdt or cdw0.fuse:
                outcome = (_generic(G.INVALID_FIELD), 0)
            else:
                outcome = await handler(cmd, cdw0.cid)
        except _Fail as failure:
            outcome = (failure.status, 0)
        if outcome is None:                 # an Asynchronous Event Request: completed by an event
            await self._report_events()
            return
        status, result = outcome
        if status != SUCCESS:
            self._log_error(0, cdw0.cid, status, lba=0, nsid=cmd.nsid)
        await self._post(cdw0.cid, status, result)
        await self._report_events()

    @staticmethod
    def _dwords(cmd) -> tuple[int, int]:
        return cmd.slba & 0xFFFF_FFFF, cmd.slba >> 32

    async def _send(self, cmd, data: bytes) -> None:
        """``data`` to the host at the command's PRPs, through the data mover."""
        self.soc.write_bytes(self.scratch, data)
        await self.wr("move_prp1_lo", cmd.prp1 & 0xFFFF_FFFF)
        await self.wr("move_prp1_hi", cmd.prp1 >> 32)
        await self.wr("move_prp2_lo", cmd.prp2 & 0xFFFF_FFFF)
        await self.wr("move_prp2_hi", cmd.prp2 >> 32)
        await self.wr("move_bytes", R["move_bytes"].compose(bytes=len(data), to_host=1))
        await self.wr("move_local", self.scratch)
        await self.act(move=1)
        await self.until("a transfer to the host", lambda st: not st.move_busy)
        status = await self.rd("move_status")
        if status != Status.SUCCESS:
            raise _Fail(spec.nvme_status_of(status))

    async def _identify(self, cmd, cid):
        cns = F.CNS.take(self._dwords(cmd)[0])
        if cns == NvmeCns.CONTROLLER:
            data = ref.identify_controller_data(self.limits, serial=self.serial, volatile_cache=self.volatile_cache)
        elif cns == NvmeCns.NAMESPACE:
            if cmd.nsid != NVME.NSID:
                return _generic(G.INVALID_NAMESPACE), 0
            data = ref.identify_namespace_data(self.limits, nuse=self.nuse())
        elif cns == NvmeCns.ACTIVE_NAMESPACES:
            data = ref.active_namespaces_data(cmd.nsid)
            if data is None:
                return _generic(G.INVALID_NAMESPACE), 0
        else:
            return _generic(G.INVALID_FIELD), 0
        await self._send(cmd, data)
        return SUCCESS, 0

    def _check_new_queue(self, qid, qsize, existing, cdw11, base):
        if not 1 <= qid <= self.io_queues or qid in existing:
            raise _Fail(_specific(NvmeCommandStatus.INVALID_QID))
        if not 1 <= qsize <= self.mqes:
            raise _Fail(_specific(NvmeCommandStatus.INVALID_QUEUE_SIZE))
        if not F.PC.take(cdw11) or base % PAGE:
            raise _Fail(_generic(G.INVALID_FIELD))

    async def _create_cq(self, cmd, cid):
        cdw10, cdw11 = self._dwords(cmd)
        qid, qsize = F.QID.take(cdw10), F.QSIZE.take(cdw10)
        self._check_new_queue(qid, qsize, self.cqs, cdw11, cmd.prp1)
        ien, iv = bool(F.IEN.take(cdw11)), F.IV.take(cdw11)
        if ien and not 1 <= iv <= self.io_queues:
            return _specific(NvmeCommandStatus.INVALID_INTERRUPT_VECTOR), 0
        if spec.NVME_REGS["cc"].decompose(self.cc).iocqes != NVME.CQES:
            await self._set_csts(cfs=1)
            return None
        await self._queue_op(QueueOp.CREATE_CQ, qid, base=cmd.prp1, size=qsize, ien=int(ien), iv=iv)
        self.cqs[qid] = (qsize + 1, ien, iv)
        return SUCCESS, 0

    async def _create_sq(self, cmd, cid):
        cdw10, cdw11 = self._dwords(cmd)
        qid, qsize = F.QID.take(cdw10), F.QSIZE.take(cdw10)
        self._check_new_queue(qid, qsize, self.sqs, cdw11, cmd.prp1)
        cqid = F.CQID.take(cdw11)
        if cqid == 0 or cqid not in self.cqs:
            return _specific(NvmeCommandStatus.INVALID_CQ), 0
        if spec.NVME_REGS["cc"].decompose(self.cc).iosqes != NVME.SQES:
            await self._set_csts(cfs=1)
            return None
        await self._queue_op(QueueOp.CREATE_SQ, qid, base=cmd.prp1, size=qsize, cqid=cqid)
        self.sqs[qid] = cqid
        return SUCCESS, 0

    async def _delete_sq(self, cmd, cid):
        qid = F.QID.take(self._dwords(cmd)[0])
        if not qid or qid not in self.sqs:
            return _specific(NvmeCommandStatus.INVALID_QID), 0
        await self._queue_op(QueueOp.DELETE_SQ, qid)
        del self.sqs[qid]
        for _ in range(200_000):                 # its commands (aborted or run) complete first
            if not await self.rd("busy_queues") >> qid & 1:
                break
        else:
            raise AssertionError(f"firmware: SQ {qid}'s commands never finished")
        return SUCCESS, 0

    async def _delete_cq(self, cmd, cid):
        qid = F.QID.take(self._dwords(cmd)[0])
        if not qid or qid not in self.cqs:
            return _specific(NvmeCommandStatus.INVALID_QID), 0
        if any(c == qid for c in self.sqs.values()):
            return _specific(NvmeCommandStatus.INVALID_QUEUE_DELETION), 0
        await self._queue_op(QueueOp.DELETE_CQ, qid)
        del self.cqs[qid]
        return SUCCESS, 0

    async def _abort(self, cmd, cid):
        return SUCCESS, F.NOT_ABORTED.put(1)

    async def _async_event_request(self, cmd, cid):
        if len(self.aers) > ref.AERL:
            return _specific(NvmeCommandStatus.AER_LIMIT), 0
        self.aers.append(cid)
        return None

    async def smart_counters(self) -> dict:
        B = self.limits.lba_size
        blocks_read = await self.rd("blocks_read_lo") | await self.rd("blocks_read_hi") << 32
        blocks_written = await self.rd("blocks_written_lo") | await self.rd("blocks_written_hi") << 32
        return dict(self.smart, percentage_used=self.percentage_used(), bytes_read=blocks_read * B,
                    bytes_written=blocks_written * B,
                    host_reads=await self.rd("read_commands"), host_writes=await self.rd("write_commands"))

    async def _get_log_page(self, cmd, cid):
        cdw10, cdw11 = self._dwords(cmd)
        lid = F.LID.take(cdw10)
        length = ((F.NUMDU.take(cdw11) << 16 | F.NUMDL.take(cdw10)) + 1) * 4
        offset = cmd.cdw12 | cmd.cdw13 << 32
        if lid == NvmeLogPage.ERROR:
            page = b"".join(self.errors).ljust(ref.ERROR_LOG_ENTRIES * NVME_ERROR_LOG.size, b"\0")
        elif lid == NvmeLogPage.SMART:
            page = ref.smart_log_data(await self.smart_counters(), error_log_entries=self.error_count)
        elif lid == NvmeLogPage.FIRMWARE:
            page = ref.firmware_log_data()
        elif lid in (NvmeLogPage.ATOMFLASH_STATS, NvmeLogPage.ATOMFLASH_OPEN) and self.vendor_log:
            page = await self.vendor_log(lid)
        else:
            return _specific(NvmeCommandStatus.INVALID_LOG_PAGE), 0
        if offset % 4 or offset > len(page) or length > (1 << ref.mdts_of(self.limits)) * PAGE:
            return _generic(G.INVALID_FIELD), 0
        await self._send(cmd, page[offset:offset + length].ljust(length, b"\0"))
        if lid == NvmeLogPage.ERROR and not F.RAE.take(cdw10):
            self.masked.discard(F.AE_TYPE_ERROR)
        return SUCCESS, 0

    def _number_of_queues(self) -> int:
        return F.NSQ.put(self.io_queues - 1) | F.NCQ.put(self.io_queues - 1)

    async def _get_features(self, cmd, cid):
        fid = F.FID.take(self._dwords(cmd)[0])
        if fid == NvmeFeature.NUMBER_OF_QUEUES:
            return SUCCESS, self._number_of_queues()
        if fid not in self.features:
            return _generic(G.INVALID_FIELD), 0
        return SUCCESS, self.features[fid]

    async def _set_features(self, cmd, cid):
        cdw10, value = self._dwords(cmd)
        fid = F.FID.take(cdw10)
        if fid == NvmeFeature.NUMBER_OF_QUEUES:
            return SUCCESS, self._number_of_queues()
        if fid not in self.features:
            return _generic(G.INVALID_FIELD), 0
        if fid == NvmeFeature.VOLATILE_WRITE_CACHE:
            enable = F.WCE.take(value)
            if enable and not self.volatile_cache:
                return _generic(G.INVALID_FIELD), 0
            if not enable and self.flush:
                await self.flush(False)
            value = F.WCE.put(enable)
        self.features[fid] = value
        await self._apply_features()
        return SUCCESS, 0
