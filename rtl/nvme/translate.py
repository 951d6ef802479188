"""NVMe I/O commands as the FTL core's commands: decode, stage the data, issue, send the data back, complete.

The FTL core (``rtl/ftl/core.py``) runs atomflash's own commands (``spec.CMD``), whose data sits in
device memory at ``buf``.  An NVMe I/O command names its data in host memory through PRPs.  Between the
two sits this translator, so the core, its DMA and its tests stay as they are (docs/nvme.md, "Gateware
and firmware"): each command in flight owns a *context*, and with it a staging area in SoC memory big
enough for the largest transfer.

A command's life:

1. **Decode** (``command``, from the queue engine; I/O queues only).  An opcode outside
   ``NvmeIoOpcode`` is INVALID_OPCODE, fused operations and SGLs (``fuse``, ``psdt``) INVALID_FIELD, a
   namespace other than 1 INVALID_NAMESPACE (Flush may name all namespaces), and a command the queue
   engine marked ``abort`` (its SQ is being deleted) SQ_DELETION_ABORT: answered at once, with no
   context.  Otherwise the command takes a free context (it waits on the stream while none is free).
2. **Stage in** what the host sends, through the data mover (``move``/``moved``): the blocks of WRITE,
   TX_WRITE, APPEND and ATOMIC_WRITE (the last also its LBA list from MPTR, first), REMAP's triples,
   Dataset Management's ranges.  A PRP or DMA error completes the command with its status; nothing
   reached the core, so nothing changed.  A command larger than the core takes (blocks above
   ``max_transfer``, a group above ``max_atomic_pages``, triples above ``max_remap_triples``) skips
   this: the core rejects it with the same status as the reference model, which never fetches such data.
3. **Prepare**, over ``mem``: ATOMIC_WRITE's ``spec.ATOMIC_ENTRY`` list from the staged LBAs; Dataset
   Management's ranges checked against ``capacity`` (one beyond it fails the command before any range
   is deallocated).
4. **Issue** one ``spec.CMD`` on ``core_cmd``, its ``cid`` the context's index and its queue id the NVMe
   queue's less one, so a queue's transactions and appends stay its own in the core.  Write Zeroes is
   a DEALLOCATE (deallocated blocks read zeros and the trim is durable like a write); Dataset
   Management issues one DEALLOCATE per non-empty range, the next once the previous completed.
5. **Stage out**, after a successful READ or TX_READ, the blocks to the host's pages.  A failed read
   sends nothing, and its data pointers are never looked at.
6. **Complete** on ``completion``: the core's ``Status`` as NVMe's (``spec.nvme_status_of``), APPEND's
   token in DW0-DW1.  A failed command is also offered on ``failed`` for the error information log
   (dropped when the firmware is behind: ``failed_lost`` counts them).

Core completions are taken the cycle they come (each context has at most one command in the core) and
queued; one sequencer then serves, between commands, the oldest finished context before a new command,
so contexts come free first.  The data mover and ``mem`` are the sequencer's alone.

FUA: a WRITE is durable on completion when CDW12.FUA is set or the volatile write cache is off
(``write_cache``, Set Features 06h); Write Zeroes likewise; a Dataset Management deallocation when the
cache is off.

Staging layout from ``staging_base`` (``staging_bytes`` in all): each context's data area
(``data_stride`` bytes: the largest of its transfers, a power of two), then each context's list area
(``LIST_STRIDE``: the LBA list at 0, the ATOMIC_ENTRY list at ``ENTRIES_AT``).
"""

from amaranth import Array, Cat, Const, Module, Mux, Signal
from amaranth.lib import data, fifo, stream, wiring
from amaranth.lib.wiring import In, Out
from amaranth.utils import ceil_log2, exact_log2

from atomflash import command, spec
from atomflash.spec import NvmeField, NvmeGenericStatus, NvmeIoOpcode as Io, NvmeSct, Opcode, Status
from rtl import spec as layouts
from rtl.host.queues import command_layout, completion_layout
from rtl.lib import wishbone

from .datamover import DONE as MOVED, JOB as MOVE
from .queues import command_layout as queue_command_layout

__all__ = ["NvmeCommandTranslator", "LIST_STRIDE", "ENTRIES_AT"]

SQE = layouts.layout_of(spec.NVME_SQE)
ENTRIES_AT = 1024                     # the ATOMIC_ENTRY list, after the LBA list (8 bytes a block)
LIST_STRIDE = 2048                    # room for 64 LBAs and 64 entries
RANGE = spec.NVME_DSM_RANGE
NR, NR_AD = NvmeField.NR, NvmeField.AD  # Dataset Management's CDW10 and CDW11 (the SQE's slba)
DSM_RANGES = 1 << NR.width            # NR is 0-based

#: NVMe I/O opcode -> the core's opcode
CORE_OPCODE = {Io.FLUSH: Opcode.FLUSH, Io.WRITE: Opcode.WRITE, Io.READ: Opcode.READ,
               Io.WRITE_ZEROES: Opcode.DEALLOCATE, Io.DATASET_MANAGEMENT: Opcode.DEALLOCATE,
               Io.ATOMIC_WRITE: Opcode.ATOMIC_WRITE, Io.TX_WRITE: Opcode.TX_WRITE, Io.TX_READ: Opcode.TX_READ,
               Io.TX_COMMIT: Opcode.TX_COMMIT, Io.TX_ABORT: Opcode.TX_ABORT, Io.APPEND: Opcode.APPEND,
               Io.REMAP: Opcode.REMAP, Io.RELEASE: Opcode.RELEASE, Io.HINT: Opcode.HINT}
assert set(CORE_OPCODE) == set(Io), "every NVMe I/O opcode has its core command"
BLOCKS_IN = (Io.WRITE, Io.TX_WRITE, Io.APPEND, Io.ATOMIC_WRITE)   # the host sends blocks
BLOCKS_OUT = (Io.READ, Io.TX_READ)                               # the host receives blocks


def _any_of(values):
    """The bitwise or of ``values``."""
    out = values[0]
    for v in values[1:]:
        out = out | v
    return out


def completion_payload(queues: int) -> data.StructLayout:
    return data.StructLayout({"sqid": range(queues + 1), "cid": 16, "sct": 3, "sc": 8, "dnr": 1, "result": 64})


def failure_payload(queues: int) -> data.StructLayout:
    return data.StructLayout({"sqid": range(queues + 1), "cid": 16, "sct": 3, "sc": 8, "lba": 64, "nsid": 32})


class NvmeCommandTranslator(wiring.Component):
    """Runs NVMe I/O commands on the FTL core; see the module docstring.

    Parameters
    ----------
    queues : int
        NVMe I/O queues (ids 1..``queues``); the core's stream front end has ids 0..``queues`` - 1.
    core_queue_ids : int
        Every queue id the core knows (``FtlCore.queue_ids``): the width of its ``sqid``.
    contexts : int
        Commands in flight at once (each with a staging area).
    block_bytes : int
        The logical block (the core's page data).
    limits : atomflash.command.StaticLimits
        The core's limits.

    Ports
    -----
    command : In(stream {sqid, sqe: NVME_SQE, abort})
        I/O commands from the queue engine (``abort``: completed as SQ_DELETION_ABORT, not run).
    completion : Out(stream {sqid, cid, sct, sc, dnr, result})
        Their outcomes, for the queue engine to post.
    core_cmd : Out(stream {sqid, cmd: CMD}), core_cpl : In(stream {sqid, cid, status, result})
        The FTL core's stream front end.
    move : Out(stream DataMover JOB), moved : In(stream {status})
        The data mover.
    mem : Out(wishbone.Signature(addr_width=30))
        SoC memory: the staged lists.
    failed : Out(stream {sqid, cid, sct, sc, lba, nsid})
        Every command that did not succeed, for the error log; ``failed_lost`` counts those dropped.
    staging_base : In(32)
        Where the staging areas start in SoC memory (``staging_bytes`` bytes, 4-byte aligned).
    capacity : In(64)
        The namespace's blocks.
    write_cache : In(1)
        The volatile write cache is on (Set Features 06h).
    idle : Out(1)
        No command anywhere in the translator.
    busy_queues : Out(queues + 1)
        Bit y: a command of I/O queue y is in the translator or the core (the firmware completes a
        Delete I/O SQ only once its queue's bit is clear).
    read_commands, write_commands : Out(32), blocks_read, blocks_written : Out(48)
        Successful commands that carried blocks, and their blocks (the SMART counters).
    """

    def __init__(self, *, queues: int = spec.NVME.IO_QUEUES, core_queue_ids: int, contexts: int = 16,
                 block_bytes: int, limits: command.StaticLimits = command.StaticLimits()):
        if core_queue_ids < queues:
            raise ValueError("the core must give the translator one queue id per NVMe I/O queue")
        if 8 * limits.max_atomic_pages > ENTRIES_AT or spec.ATOMIC_ENTRY.size * limits.max_atomic_pages > \
                LIST_STRIDE - ENTRIES_AT:
            raise ValueError(f"a group of {limits.max_atomic_pages} does not fit the list area")
        exact_log2(block_bytes)
        self.queues, self.contexts, self.block_bytes, self.limits = queues, contexts, block_bytes, limits
        self.core_queue_ids = core_queue_ids
        largest = max(limits.max_transfer * block_bytes, limits.max_atomic_pages * block_bytes,
                      limits.max_remap_triples * spec.NVME_REMAP_ENTRY.size, DSM_RANGES * RANGE.size)
        self.data_stride = 1 << ceil_log2(largest)
        self.staging_bytes = contexts * (self.data_stride + LIST_STRIDE)
        super().__init__({
            "command": In(stream.Signature(queue_command_layout(queues))),
            "completion": Out(stream.Signature(completion_payload(queues))),
            "core_cmd": Out(stream.Signature(command_layout(core_queue_ids))),
            "core_cpl": In(stream.Signature(completion_layout(core_queue_ids))),
            "move": Out(stream.Signature(MOVE)),
            "moved": In(stream.Signature(MOVED)),
            "mem": Out(wishbone.Signature(addr_width=30, data_width=32)),
            "failed": Out(stream.Signature(failure_payload(queues))),
            "failed_lost": Out(32),
            "staging_base": In(32),
            "capacity": In(64),
            "write_cache": In(1),
            "idle": Out(1),
            "busy_queues": Out(queues + 1),
            "read_commands": Out(32),
            "write_commands": Out(32),
            "blocks_read": Out(48),
            "blocks_written": Out(48),
        })

    def elaborate(self, platform):
        m = Module()
        K, lim, B = self.contexts, self.limits, self.block_bytes
        kbits = max(1, ceil_log2(K))
        block_shift = exact_log2(B)

        # -- contexts ----------------------------------------------------------------------------------
        def array(name, shape):
            return Array(Signal(shape, name=f"{name}{i}") for i in range(K))

        busy = Signal(K)
        ctx_sqid, ctx_cid, ctx_op = array("ctx_sqid", range(self.queues + 1)), array("ctx_cid", 16), array("ctx_op", 8)
        ctx_prp1, ctx_prp2, ctx_lba = array("ctx_prp1", 64), array("ctx_prp2", 64), array("ctx_lba", 64)
        ctx_nsid, ctx_n = array("ctx_nsid", 32), array("ctx_n", 17)
        ctx_status, ctx_result = array("ctx_status", 15), array("ctx_result", 64)
        ctx_next_range, ctx_ranges = array("ctx_next_range", 9), array("ctx_ranges", 9)

        # core completions: kept in their context, the context queued for the sequencer
        m.submodules.finished = finished = fifo.SyncFIFOBuffered(width=kbits, depth=K)
        cpl = self.core_cpl
        m.d.comb += [cpl.ready.eq(1), finished.w_en.eq(cpl.valid), finished.w_data.eq(cpl.payload.cid[:kbits])]
        with m.If(cpl.valid):
            m.d.sync += [ctx_status[cpl.payload.cid[:kbits]].eq(cpl.payload.status),
                         ctx_result[cpl.payload.cid[:kbits]].eq(cpl.payload.result)]

        free = Signal(kbits)
        any_free = Signal()
        for i in reversed(range(K)):
            with m.If(~busy[i]):
                m.d.comb += [free.eq(i), any_free.eq(1)]

        # -- the command the sequencer works on ----------------------------------------------------------
        k = Signal(kbits)
        has_ctx = Signal()
        sqid = Signal(range(self.queues + 1))
        cid, op, nsid = Signal(16), Signal(8), Signal(32)
        prp1, prp2, mptr, slba = Signal(64), Signal(64), Signal(64), Signal(64)
        n = Signal(17)                          # blocks (NLB + 1), triples, or ranges
        fua, tx_final, tx_new = Signal(), Signal(), Signal()
        cdw13, token = Signal(32), Signal(64)
        deallocate = Signal()                   # Dataset Management: AD
        status = Signal(15)                     # an atomflash Status ...
        direct = Signal()                       # ... or NVMe's own (sct, sc), for what only NVMe names
        direct_sct, direct_sc = Signal(3), Signal(8)
        result = Signal(64)
        index = Signal(9)                       # the list entry or range being worked on
        lo = Signal(32)                         # a 64-bit value's low half, read before its high half
        range_nlb = Signal(32)
        core_lba, core_nlb = Signal(64), Signal(32)

        data_addr = Signal(32)
        list_addr = Signal(32)
        m.d.comb += [data_addr.eq(self.staging_base + (k << exact_log2(self.data_stride))),
                     list_addr.eq(self.staging_base + K * self.data_stride + k * LIST_STRIDE)]

        def is_(*ops):
            return Cat(*(op == int(o) for o in ops)).any()

        known = Signal()
        with m.Switch(op):
            with m.Case(*(int(o) for o in Io)):
                m.d.comb += known.eq(1)
        block_bytes_n = (n << block_shift)[:24]
        too_large = Signal()
        m.d.comb += too_large.eq(Mux(is_(Io.ATOMIC_WRITE), n > lim.max_atomic_pages,
                                     Mux(is_(Io.REMAP), n > lim.max_remap_triples,
                                         is_(*BLOCKS_IN, *BLOCKS_OUT) & (n > lim.max_transfer))))
        bytes_in = Signal(24)
        m.d.comb += bytes_in.eq(Mux(is_(Io.REMAP), n * spec.NVME_REMAP_ENTRY.size,
                                    Mux(is_(Io.DATASET_MANAGEMENT), n * RANGE.size, block_bytes_n)))
        read = is_(*BLOCKS_OUT)

        # -- outputs the states drive ------------------------------------------------------------------
        mem = self.mem
        cmd = self.core_cmd.payload.cmd
        m.d.comb += [
            self.core_cmd.payload.sqid.eq(sqid - 1),
            cmd.cid.eq(k), cmd.nsid.eq(command.NSID),
            cmd.flags.fua.eq(fua & is_(Io.WRITE, Io.WRITE_ZEROES, Io.DATASET_MANAGEMENT)),
            cmd.flags.tx_final.eq(tx_final & is_(Io.TX_WRITE)),
            cmd.flags.tx_new.eq(tx_new & is_(Io.TX_WRITE)),
            cmd.tid.eq(Mux(is_(Io.TX_WRITE, Io.TX_READ, Io.TX_COMMIT, Io.TX_ABORT), cdw13, 0)),
            cmd.hint.eq(Mux(is_(Io.HINT), cdw13, 0)),
            cmd.token.eq(Mux(is_(Io.RELEASE), token, 0)),
            cmd.buf.eq(data_addr),
            cmd.list.eq(Mux(is_(Io.ATOMIC_WRITE), list_addr + ENTRIES_AT, data_addr)),
            cmd.nlist.eq(Mux(is_(Io.ATOMIC_WRITE, Io.REMAP), n, 0)),
            cmd.lba.eq(core_lba), cmd.nlb.eq(core_nlb),
        ]
        with m.Switch(op):
            for nvme_op, core_op in CORE_OPCODE.items():
                with m.Case(int(nvme_op)):
                    m.d.comb += cmd.opcode.eq(core_op)

        # NVMe status of `status` (or the direct one)
        sct, sc = Signal(3), Signal(8)
        with m.If(direct):
            m.d.comb += [sct.eq(direct_sct), sc.eq(direct_sc)]
        with m.Else():
            with m.Switch(status):
                for s in Status:
                    with m.Case(int(s)):
                        as_read, as_write = spec.nvme_status_of(s, read=True), spec.nvme_status_of(s)
                        m.d.comb += [sct.eq(Mux(read, as_read[0], as_write[0])),
                                     sc.eq(Mux(read, as_read[1], as_write[1]))]
                with m.Default():
                    m.d.comb += [sct.eq(NvmeSct.GENERIC), sc.eq(NvmeGenericStatus.INTERNAL_ERROR)]
        ok = ~direct & (status == Status.SUCCESS)

        m.d.comb += [self.completion.payload.sqid.eq(sqid), self.completion.payload.cid.eq(cid),
                     self.completion.payload.sct.eq(sct), self.completion.payload.sc.eq(sc),
                     self.completion.payload.result.eq(Mux(ok, result, 0))]

        # the error log's copy of a failure
        m.submodules.failures = failures = fifo.SyncFIFOBuffered(width=len(self.failed.payload.as_value()), depth=4)
        failure = Signal(failure_payload(self.queues))
        m.d.comb += [failure.sqid.eq(sqid), failure.cid.eq(cid), failure.sct.eq(sct), failure.sc.eq(sc),
                     failure.lba.eq(Mux(nsid == spec.NVME.NSID, slba, 0)), failure.nsid.eq(nsid),
                     failures.w_data.eq(failure),
                     self.failed.valid.eq(failures.r_rdy), self.failed.payload.eq(failures.r_data),
                     failures.r_en.eq(self.failed.ready)]

        def move(to_host, source_prp1, source_prp2, nbytes, local):
            m.d.comb += [self.move.valid.eq(1), self.move.payload.to_host.eq(to_host),
                         self.move.payload.prp1.eq(source_prp1), self.move.payload.prp2.eq(source_prp2),
                         self.move.payload.bytes.eq(nbytes), self.move.payload.local.eq(local)]

        def fail(code):
            m.d.sync += [status.eq(code), direct.eq(0)]
            m.next = "COMPLETE"

        def fail_nvme(code):
            m.d.sync += [direct.eq(1), direct_sct.eq(NvmeSct.GENERIC), direct_sc.eq(code)]
            m.next = "COMPLETE"

        def access(address, write=False, value=0):
            """One Wishbone word cycle this state; True on its ack (an ``err`` fails the command)."""
            m.d.comb += [mem.cyc.eq(1), mem.stb.eq(1), mem.adr.eq(address[2:]), mem.sel.eq(0xF),
                         mem.we.eq(write), mem.dat_w.eq(value)]
            with m.If(mem.err):
                fail(Status.INTERNAL_ERROR)
            return mem.ack

        sqe = self.command.payload.sqe
        m.d.comb += self.idle.eq(~busy.any() & ~finished.r_rdy)

        width = self.queues + 1
        in_flight = [Mux(busy[i], Const(1, width) << ctx_sqid[i], 0) for i in range(K)]
        with m.FSM() as fsm:
            current = Mux(fsm.ongoing("IDLE"), 0, Const(1, width) << sqid)
            m.d.comb += self.busy_queues.eq(_any_of(in_flight + [current]))
            with m.State("IDLE"):
                m.d.sync += [direct.eq(0), status.eq(Status.SUCCESS), result.eq(0), index.eq(0)]
                with m.If(finished.r_rdy):
                    m.d.comb += finished.r_en.eq(1)
                    f = finished.r_data
                    m.d.sync += [k.eq(f), has_ctx.eq(1), sqid.eq(ctx_sqid[f]), cid.eq(ctx_cid[f]),
                                 op.eq(ctx_op[f]), nsid.eq(ctx_nsid[f]), prp1.eq(ctx_prp1[f]), prp2.eq(ctx_prp2[f]),
                                 slba.eq(ctx_lba[f]), n.eq(ctx_n[f]), status.eq(ctx_status[f]),
                                 result.eq(ctx_result[f]), index.eq(ctx_next_range[f]), fua.eq(~self.write_cache)]
                    m.next = "FINISHED"
                with m.Elif(self.command.valid & any_free):
                    m.d.comb += self.command.ready.eq(1)
                    c12 = sqe.cdw12
                    m.d.sync += [k.eq(free), has_ctx.eq(0), sqid.eq(self.command.payload.sqid), cid.eq(sqe.cdw0.cid),
                                 op.eq(sqe.cdw0.opc), nsid.eq(sqe.nsid), prp1.eq(sqe.prp1), prp2.eq(sqe.prp2),
                                 mptr.eq(sqe.mptr), slba.eq(sqe.slba), cdw13.eq(sqe.cdw13), token.eq(sqe.cdw14_15),
                                 tx_final.eq(c12.tx_final), tx_new.eq(c12.tx_new),
                                 fua.eq(~self.write_cache | (c12.fua & (sqe.cdw0.opc != Io.DATASET_MANAGEMENT))),
                                 deallocate.eq(sqe.slba[32 + NR_AD.lsb])]
                    with m.If(sqe.cdw0.opc == Io.DATASET_MANAGEMENT):
                        m.d.sync += n.eq(sqe.slba[NR.lsb:NR.lsb + NR.width] + 1)
                    with m.Else():
                        m.d.sync += n.eq(c12.nlb + 1)
                    with m.If((sqe.cdw0.fuse != 0) | (sqe.cdw0.psdt != 0)):
                        m.d.sync += [status.eq(Status.INVALID_FIELD)]
                    with m.If(self.command.payload.abort):
                        m.d.sync += [direct.eq(1), direct_sct.eq(NvmeSct.GENERIC),
                                     direct_sc.eq(NvmeGenericStatus.SQ_DELETION_ABORT)]
                        m.next = "COMPLETE"
                    with m.Else():
                        m.next = "DECODE"

            with m.State("DECODE"):
                nsid_ok = (nsid == spec.NVME.NSID) | (is_(Io.FLUSH) & (nsid == NvmeField.NSID_ALL))
                with m.If(~known):
                    fail(Status.INVALID_OPCODE)
                with m.Elif(status != Status.SUCCESS):          # fused or SGL
                    m.next = "COMPLETE"
                with m.Elif(~nsid_ok):
                    fail_nvme(NvmeGenericStatus.INVALID_NAMESPACE)
                with m.Else():
                    m.d.sync += [busy.bit_select(k, 1).eq(1), has_ctx.eq(1),
                                 ctx_sqid[k].eq(sqid), ctx_cid[k].eq(cid), ctx_op[k].eq(op), ctx_nsid[k].eq(nsid),
                                 ctx_prp1[k].eq(prp1), ctx_prp2[k].eq(prp2), ctx_lba[k].eq(slba), ctx_n[k].eq(n),
                                 core_lba.eq(Mux(is_(Io.APPEND), 0, slba)),
                                 core_nlb.eq(Mux(is_(*BLOCKS_IN, *BLOCKS_OUT, Io.WRITE_ZEROES) & ~is_(Io.ATOMIC_WRITE),
                                                 n, 0))]
                    with m.If(too_large):
                        m.next = "ISSUE"
                    with m.Elif(is_(Io.ATOMIC_WRITE)):
                        m.next = "STAGE_THE_LBA_LIST"
                    with m.Elif(is_(*BLOCKS_IN, Io.REMAP, Io.DATASET_MANAGEMENT)):
                        m.next = "STAGE_IN"
                    with m.Else():
                        m.next = "ISSUE"

            # ATOMIC_WRITE's LBAs: contiguous at MPTR, so at most two pages (the second one PRP2's way)
            with m.State("STAGE_THE_LBA_LIST"):
                move(0, mptr, Cat(Const(0, spec.NVME.PAGE_SHIFT), mptr[spec.NVME.PAGE_SHIFT:] + 1), n * 8, list_addr)
                with m.If(self.move.ready):
                    m.next = "WAIT_FOR_THE_LBA_LIST"
            with m.State("WAIT_FOR_THE_LBA_LIST"):
                m.d.comb += self.moved.ready.eq(1)
                with m.If(self.moved.valid):
                    with m.If(self.moved.payload.status != Status.SUCCESS):
                        fail(self.moved.payload.status)
                    with m.Else():
                        m.next = "STAGE_IN"

            with m.State("STAGE_IN"):
                move(0, prp1, prp2, bytes_in, data_addr)
                with m.If(self.move.ready):
                    m.next = "WAIT_FOR_THE_DATA"
            with m.State("WAIT_FOR_THE_DATA"):
                m.d.comb += self.moved.ready.eq(1)
                with m.If(self.moved.valid):
                    with m.If(self.moved.payload.status != Status.SUCCESS):
                        fail(self.moved.payload.status)
                    with m.Elif(is_(Io.ATOMIC_WRITE)):
                        m.next = "ENTRY_LBA_LO"
                    with m.Elif(is_(Io.DATASET_MANAGEMENT) & ~deallocate):
                        m.next = "COMPLETE"                     # nothing to do but take the ranges
                    with m.Elif(is_(Io.DATASET_MANAGEMENT)):
                        m.next = "CHECK_RANGE_NLB"
                    with m.Else():
                        m.next = "ISSUE"

            # ATOMIC_WRITE: entry i = (LBA i, its block in the staging area)
            lba_at = list_addr + (index << 3)
            entry_at = list_addr + ENTRIES_AT + (index << 4)
            with m.State("ENTRY_LBA_LO"):
                with m.If(access(lba_at)):
                    m.d.sync += lo.eq(mem.dat_r)
                    m.next = "ENTRY_LBA_HI"
            with m.State("ENTRY_LBA_HI"):
                with m.If(access(lba_at + 4)):
                    m.d.sync += core_lba.eq(Cat(lo, mem.dat_r))
                    m.next = "ENTRY_WRITE_LBA_LO"
            for word, (state, value, following) in enumerate((
                    ("ENTRY_WRITE_LBA_LO", core_lba[:32], "ENTRY_WRITE_LBA_HI"),
                    ("ENTRY_WRITE_LBA_HI", core_lba[32:], "ENTRY_WRITE_BUF_LO"),
                    ("ENTRY_WRITE_BUF_LO", (data_addr + (index << block_shift))[:32], "ENTRY_WRITE_BUF_HI"),
                    ("ENTRY_WRITE_BUF_HI", Const(0, 32), None))):
                with m.State(state):
                    with m.If(access(entry_at + 4 * word, write=True, value=value)):
                        if following:
                            m.next = following
                        else:
                            m.d.sync += index.eq(index + 1)
                            with m.If(index + 1 == n):
                                m.d.sync += core_lba.eq(0)
                                m.next = "ISSUE"
                            with m.Else():
                                m.next = "ENTRY_LBA_LO"

            # Dataset Management: every range within the namespace first, then one DEALLOCATE per range
            range_at = data_addr + index * RANGE.size
            nlb_at, slba_at = RANGE["nlb"].offset, RANGE["slba"].offset
            with m.State("CHECK_RANGE_NLB"):
                with m.If(access(range_at + nlb_at)):
                    m.d.sync += range_nlb.eq(mem.dat_r)
                    m.next = "CHECK_RANGE_SLBA_LO"
            with m.State("CHECK_RANGE_SLBA_LO"):
                with m.If(access(range_at + slba_at)):
                    m.d.sync += lo.eq(mem.dat_r)
                    m.next = "CHECK_RANGE_SLBA_HI"
            with m.State("CHECK_RANGE_SLBA_HI"):
                with m.If(access(range_at + slba_at + 4)):
                    with m.If(Cat(lo, mem.dat_r) + range_nlb > self.capacity):
                        fail(Status.LBA_OUT_OF_RANGE)
                    with m.Elif(index + 1 == n):
                        m.d.sync += index.eq(0)
                        m.next = "NEXT_RANGE_NLB"
                    with m.Else():
                        m.d.sync += index.eq(index + 1)
                        m.next = "CHECK_RANGE_NLB"
            with m.State("NEXT_RANGE_NLB"):
                with m.If(index == n):
                    m.next = "COMPLETE"
                with m.Else():
                    with m.If(access(range_at + nlb_at)):
                        m.d.sync += core_nlb.eq(mem.dat_r)
                        with m.If(mem.dat_r == 0):
                            m.d.sync += index.eq(index + 1)
                        with m.Else():
                            m.next = "NEXT_RANGE_SLBA_LO"
            with m.State("NEXT_RANGE_SLBA_LO"):
                with m.If(access(range_at + slba_at)):
                    m.d.sync += lo.eq(mem.dat_r)
                    m.next = "NEXT_RANGE_SLBA_HI"
            with m.State("NEXT_RANGE_SLBA_HI"):
                with m.If(access(range_at + slba_at + 4)):
                    m.d.sync += [core_lba.eq(Cat(lo, mem.dat_r)), ctx_next_range[k].eq(index + 1)]
                    m.next = "ISSUE"

            with m.State("ISSUE"):
                m.d.comb += self.core_cmd.valid.eq(1)
                with m.If(self.core_cmd.ready):
                    m.next = "IDLE"

            # a context's command came back from the core
            with m.State("FINISHED"):
                with m.If(is_(Io.DATASET_MANAGEMENT) & (status == Status.SUCCESS)):
                    m.next = "NEXT_RANGE_NLB"
                with m.Elif(read & (status == Status.SUCCESS)):
                    m.next = "STAGE_OUT"
                with m.Else():
                    m.next = "COMPLETE"
            with m.State("STAGE_OUT"):
                move(1, prp1, prp2, block_bytes_n, data_addr)
                with m.If(self.move.ready):
                    m.next = "WAIT_FOR_THE_HOST"
            with m.State("WAIT_FOR_THE_HOST"):
                m.d.comb += self.moved.ready.eq(1)
                with m.If(self.moved.valid):
                    m.d.sync += status.eq(self.moved.payload.status)
                    m.next = "COMPLETE"

            with m.State("COMPLETE"):
                m.d.comb += self.completion.valid.eq(1)
                with m.If(self.completion.ready):
                    with m.If(has_ctx):
                        m.d.sync += busy.bit_select(k, 1).eq(0)
                    with m.If(ok & is_(*BLOCKS_IN)):
                        m.d.sync += [self.write_commands.eq(self.write_commands + 1),
                                     self.blocks_written.eq(self.blocks_written + n)]
                    with m.If(ok & read):
                        m.d.sync += [self.read_commands.eq(self.read_commands + 1),
                                     self.blocks_read.eq(self.blocks_read + n)]
                    with m.If(~ok):
                        m.d.comb += failures.w_en.eq(1)
                        with m.If(~failures.w_rdy):
                            m.d.sync += self.failed_lost.eq(self.failed_lost + 1)
                    m.next = "IDLE"
        return m
