"""The NVMe controller's window for the firmware: the admin path and the rare events, as registers.

The gateware runs the I/O path alone; the firmware runs what is rare and varied (docs/nvme.md,
"Gateware and firmware").  This block is where the two meet, as the register map
``spec.NVME_FW_REGS`` on a Wishbone target the SoC's CPU reads and writes:

* **CC.** Every host write of CC raises ``status.cc_changed`` until ``ctrl.ack_cc``; the firmware
  reads ``cc``'s mirror from the BAR0 register block, acts (enable, reset, shutdown) and answers
  through ``csts`` (RDY, SHST; CFS is also raised by the queue engine's ``fatal``).
* **Admin commands.** An admin entry fetched by the queue engine waits in ``admin_sqe`` (the
  queue engine fetches no other admin entry meanwhile) until ``ctrl.pop_admin``; the firmware
  answers with ``cpl_*`` and ``ctrl.post``, which the queue engine posts on the admin CQ.
* **Queues.** ``queue_*`` and ``ctrl.config`` hand one queue operation to the queue engine (creation
  and deletion after the firmware has checked the admin command, RESET at a controller reset);
  ``status.config_busy`` until the engine applied it.
* **Data.** ``move_*`` and ``ctrl.move`` run one transfer on the data mover between host pages
  (PRPs) and SoC memory (an Identify page, a log page), shared with the I/O commands;
  ``status.move_busy`` until done, then ``move_status``.
* **Events.** A failed I/O command (for the error information log) and an ignored doorbell write
  (for an Asynchronous Event) wait in ``failed_*`` / ``doorbell_error`` until popped.
* **Counters and settings** for SMART and Set Features: commands and blocks read and written, the
  staging area's base, the volatile write cache.

Every access is acknowledged the cycle after it is presented; ``irq`` is high while anything waits
for the firmware.
"""

from amaranth import Cat, Const, Module, Signal
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

from atomflash import spec
from rtl.lib import wishbone

from .datamover import DONE as MOVED, JOB as MOVE
from .queues import SQE, QueueOp
from .regs import register_layout
from .translate import completion_payload, failure_payload

__all__ = ["NvmeFirmwareWindow"]

REGS = spec.NVME_FW_REGS


def _bits(register, name):
    b = next(b for b in REGS[register].bits if b.name == name)
    return slice(b.lsb, b.lsb + b.width)


class NvmeFirmwareWindow(wiring.Component):
    """``spec.NVME_FW_REGS`` for the firmware; see the module docstring.

    Ports
    -----
    bus : In(wishbone.Signature(addr_width=6))
        The window, word addressed.
    cc, cc_written, aqa, asq, acq : In
        From :class:`~rtl.nvme.regs.NvmeRegisters`.
    rdy, cfs, shst : Out
        CSTS, to :class:`~rtl.nvme.regs.NvmeRegisters`.
    fatal : In(1)
        The queue engine stopped (raises CFS).
    admin : In(stream {sqe})
        Admin commands from the queue engine.
    admin_completion : Out(stream completion_payload(queues))
        The firmware's answers, for the queue engine (sqid 0).
    config : Out(stream), config_done : In(stream)
        The queue engine's ``config`` and ``config_done``.
    move : Out(stream DataMover JOB), moved : In(stream {status})
        The firmware's transfers.
    failed : In(stream failure_payload(queues)), doorbell_error : In(stream {queue, cq, kind})
        Events for the logs and the asynchronous events.
    io_idle, busy_queues, read_commands, write_commands, blocks_read, blocks_written, failed_lost : In
        From the command translator.
    staging_base : Out(32), write_cache : Out(1)
        To the command translator.
    irq : Out(1)
        Something waits for the firmware.
    """

    def __init__(self, *, queues: int = spec.NVME.IO_QUEUES):
        self.queues = queues
        qid = range(queues + 1)
        super().__init__({
            "bus": In(wishbone.Signature(addr_width=(REGS.size - 1).bit_length() - 2, data_width=32)),
            "cc": In(register_layout("cc")), "cc_written": In(1),
            "aqa": In(register_layout("aqa")), "asq": In(64), "acq": In(64),
            "rdy": Out(1), "cfs": Out(1), "shst": Out(2),
            "fatal": In(1),
            "admin": In(stream.Signature(data.StructLayout({"sqe": SQE}))),
            "admin_completion": Out(stream.Signature(completion_payload(queues))),
            "config": Out(stream.Signature(data.StructLayout({
                "op": QueueOp, "qid": qid, "base": 64, "size": 16, "cqid": qid, "ien": 1, "iv": qid}))),
            "config_done": In(stream.Signature(0)),
            "move": Out(stream.Signature(MOVE)),
            "moved": In(stream.Signature(MOVED)),
            "failed": In(stream.Signature(failure_payload(queues))),
            "doorbell_error": In(stream.Signature(data.StructLayout({"queue": qid, "cq": 1, "kind": 1}))),
            "io_idle": In(1),
            "busy_queues": In(queues + 1),
            "read_commands": In(32), "write_commands": In(32),
            "blocks_read": In(48), "blocks_written": In(48), "failed_lost": In(32),
            "staging_base": Out(32),
            "write_cache": Out(1),
            "irq": Out(1),
        })

    def elaborate(self, platform):
        m = Module()
        bus = self.bus
        stored = {r.name: Signal(32, name=r.name) for r in REGS if r.access == "rw"}

        cc_changed = Signal()
        admin_full = Signal()
        admin_sqe = Signal(len(self.admin.payload.sqe.as_value()))
        posting = Signal()
        configuring, config_taken = Signal(), Signal()
        moving, move_taken = Signal(), Signal()
        move_status = Signal(15)

        status = Signal(32)
        for name, value in (("cc_changed", cc_changed), ("admin_valid", admin_full), ("post_busy", posting),
                            ("move_busy", moving), ("config_busy", configuring),
                            ("failed_valid", self.failed.valid), ("doorbell_error_valid", self.doorbell_error.valid),
                            ("fatal", self.fatal), ("io_idle", self.io_idle)):
            m.d.comb += status[_bits("status", name)].eq(value)
        failed, dberr = self.failed.payload, self.doorbell_error.payload
        readable = {
            "id": Const(spec.NVME_FW_REGS_ID, 32), "status": status,
            "cc": self.cc.as_value(), "aqa": self.aqa.as_value(), "asq_lo": self.asq[:32], "asq_hi": self.asq[32:],
            "acq_lo": self.acq[:32], "acq_hi": self.acq[32:],
            "failed_command": failed.sqid | (failed.cid << 16),
            "failed_status": failed.sc | (failed.sct << 8),
            "failed_lba_lo": failed.lba[:32], "failed_lba_hi": failed.lba[32:],
            "failed_nsid": failed.nsid,
            "doorbell_error": dberr.queue | (dberr.cq << 8) | (dberr.kind << 9),
            "move_status": move_status,
            "read_commands": self.read_commands, "write_commands": self.write_commands,
            "blocks_read_lo": self.blocks_read[:32], "blocks_read_hi": self.blocks_read[32:],
            "blocks_written_lo": self.blocks_written[:32], "blocks_written_hi": self.blocks_written[32:],
            "failed_lost": self.failed_lost, "busy_queues": self.busy_queues,
        } | stored
        for r in REGS:
            if r.access != "wo" and r.name not in readable and r.name != "admin_sqe":
                raise NotImplementedError(f"firmware window register {r.name} ({r.access}) has no behaviour here")

        access = bus.cyc & bus.stb & ~bus.ack
        m.d.sync += bus.ack.eq(access)
        rdata = Signal(32)
        with m.Switch(bus.adr):
            for r in REGS:
                if r.name == "admin_sqe":
                    for i in range(r.count):
                        with m.Case((r.offset + i * r.stride) // 4):
                            m.d.comb += rdata.eq(admin_sqe[32 * i:32 * (i + 1)])
                elif r.name in readable:
                    with m.Case(r.offset // 4):
                        m.d.comb += rdata.eq(readable[r.name])
        m.d.sync += bus.dat_r.eq(rdata)

        lanes = Cat(bus.sel[i].replicate(8) for i in range(4))
        action = Signal(32)
        with m.If(access & bus.we):
            with m.Switch(bus.adr):
                for r in REGS:
                    with m.Case(r.offset // 4):
                        if r.access == "rw":
                            m.d.sync += stored[r.name].eq((stored[r.name] & ~lanes) | (bus.dat_w & lanes))
                        elif r.name == "ctrl":
                            m.d.comb += action.eq(bus.dat_w & lanes)

        def act(name):
            return action[_bits("ctrl", name)].any()

        # CC
        with m.If(self.cc_written):
            m.d.sync += cc_changed.eq(1)
        with m.Elif(act("ack_cc")):
            m.d.sync += cc_changed.eq(0)
        csts = stored["csts"]
        m.d.comb += [self.rdy.eq(csts[_bits("csts", "rdy")]), self.shst.eq(csts[_bits("csts", "shst")]),
                     self.cfs.eq(csts[_bits("csts", "cfs")] | self.fatal)]

        # admin commands in, completions out
        m.d.comb += self.admin.ready.eq(~admin_full)
        with m.If(self.admin.valid & ~admin_full):
            m.d.sync += [admin_sqe.eq(self.admin.payload.sqe), admin_full.eq(1)]
        with m.Elif(act("pop_admin")):
            m.d.sync += admin_full.eq(0)
        cpl_status = stored["cpl_status"]
        p = self.admin_completion.payload
        m.d.comb += [self.admin_completion.valid.eq(posting), p.sqid.eq(0),
                     p.cid.eq(cpl_status[_bits("cpl_status", "cid")]), p.sc.eq(cpl_status[_bits("cpl_status", "sc")]),
                     p.sct.eq(cpl_status[_bits("cpl_status", "sct")]), p.dnr.eq(cpl_status[_bits("cpl_status", "dnr")]),
                     p.result.eq(Cat(stored["cpl_result_lo"], stored["cpl_result_hi"]))]
        with m.If(act("post") & ~posting):
            m.d.sync += posting.eq(1)
        with m.Elif(self.admin_completion.ready):
            m.d.sync += posting.eq(0)

        # queue operations
        q = stored["queue_op"]
        c = self.config.payload
        m.d.comb += [self.config.valid.eq(configuring & ~config_taken),
                     c.op.eq(q[_bits("queue_op", "op")]), c.qid.eq(q[_bits("queue_op", "qid")]),
                     c.cqid.eq(q[_bits("queue_op", "cqid")]), c.ien.eq(q[_bits("queue_op", "ien")]),
                     c.iv.eq(q[_bits("queue_op", "iv")]),
                     c.base.eq(Cat(stored["queue_base_lo"], stored["queue_base_hi"])), c.size.eq(stored["queue_size"]),
                     self.config_done.ready.eq(1)]
        with m.If(act("config") & ~configuring):
            m.d.sync += [configuring.eq(1), config_taken.eq(0)]
        with m.If(self.config.valid & self.config.ready):
            m.d.sync += config_taken.eq(1)
        with m.If(self.config_done.valid):
            m.d.sync += configuring.eq(0)

        # the firmware's transfers
        j = self.move.payload
        mb = stored["move_bytes"]
        m.d.comb += [self.move.valid.eq(moving & ~move_taken), j.to_host.eq(mb[_bits("move_bytes", "to_host")]),
                     j.bytes.eq(mb[_bits("move_bytes", "bytes")]), j.local.eq(stored["move_local"]),
                     j.prp1.eq(Cat(stored["move_prp1_lo"], stored["move_prp1_hi"])),
                     j.prp2.eq(Cat(stored["move_prp2_lo"], stored["move_prp2_hi"])),
                     self.moved.ready.eq(1)]
        with m.If(act("move") & ~moving):
            m.d.sync += [moving.eq(1), move_taken.eq(0)]
        with m.If(self.move.valid & self.move.ready):
            m.d.sync += move_taken.eq(1)
        with m.If(self.moved.valid & move_taken):
            m.d.sync += [moving.eq(0), move_status.eq(self.moved.payload.status)]

        # events, settings
        m.d.comb += [self.failed.ready.eq(act("pop_failed")),
                     self.doorbell_error.ready.eq(act("pop_doorbell_error")),
                     self.staging_base.eq(stored["staging_base"]),
                     self.write_cache.eq(stored["features"][_bits("features", "write_cache")]),
                     self.irq.eq(cc_changed | admin_full | self.failed.valid | self.doorbell_error.valid
                                 | self.fatal)]
        return m
