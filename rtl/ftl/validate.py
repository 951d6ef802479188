"""Static command validation in gateware.

Decides, from the submission entry alone, whether a command may proceed; the
rules and their order are those of :func:`atomflash.command.static_status`
(read its docstring), and the cocotb test holds this block to that function on
random entries.  A rejected command leaves as a completion with its specific
status and has changed nothing; an accepted one continues to the FTL.
"""

from amaranth import Cat, Module, Signal
from amaranth.lib import stream, wiring
from amaranth.lib.wiring import In, Out

from atomflash import command
from atomflash.spec import Hint, LogPage, Opcode, Status
from rtl.host.queues import command_layout, completion_layout


class CommandValidator(wiring.Component):
    """Static checks between the host queues and the FTL.

    Parameters
    ----------
    queue_pairs : int
        As the ``HostQueues`` it follows.
    limits : atomflash.command.StaticLimits
        Elaboration-time limits (IDENTIFY reports the same values).

    Ports
    -----
    cmd : In(stream.Signature(command_layout(queue_pairs)))
    accepted : Out(stream.Signature(command_layout(queue_pairs)))
        Commands that passed, unchanged.
    rejected : Out(stream.Signature(completion_layout(queue_pairs)))
        Completions for the commands that did not (result 0).
    capacity : In(64)
        Logical blocks exposed to the host (set by the firmware at boot).
    """

    def __init__(self, *, queue_pairs: int, limits: command.StaticLimits = command.StaticLimits()):
        self.limits = limits
        super().__init__({
            "cmd": In(stream.Signature(command_layout(queue_pairs))),
            "accepted": Out(stream.Signature(command_layout(queue_pairs))),
            "rejected": Out(stream.Signature(completion_layout(queue_pairs))),
            "capacity": In(64),
        })

    def status_of(self, m: Module, c) -> Signal:
        """Combinational status of CMD view ``c`` (first failing rule wins)."""
        lim = self.limits
        status = Signal(15)
        known_op = Signal()
        known_hint = Signal()
        log_page_ok = Signal()
        with m.Switch(c.log_page):
            with m.Case(0):
                m.d.comb += log_page_ok.eq(1)
            with m.Case(*(int(p) for p in LogPage if p)):
                m.d.comb += log_page_ok.eq(c.opcode == Opcode.GET_LOG)
        with m.Switch(c.opcode):
            with m.Case(*(int(op) for op in Opcode)):
                m.d.comb += known_op.eq(1)
        with m.Switch(c.hint):
            with m.Case(*(int(h) for h in Hint)):
                m.d.comb += known_hint.eq(1)

        flags = c.flags.as_value()
        end = Signal(66)
        m.d.comb += end.eq(c.lba + c.nlb)
        out_of_range = end > self.capacity

        def buffer_bad(addr, align):
            return (addr[:align.bit_length() - 1] != 0) | (addr >= command.ADDRESS_LIMIT)

        op = c.opcode

        def is_(*ops):
            return Cat(*(op == int(o) for o in ops)).any()

        is_data = Signal()
        m.d.comb += is_data.eq(is_(*command.DATA_OPCODES))

        with m.If(~known_op):
            m.d.comb += status.eq(Status.INVALID_OPCODE)
        with m.Elif((c.nsid != command.NSID) | (c.rsvd != 0) | (flags & ~command.DEFINED_FLAGS).any()
                    | ((c.flags.tx_final | c.flags.tx_new) & (op != Opcode.TX_WRITE)) | ~log_page_ok):
            m.d.comb += status.eq(Status.INVALID_FIELD)
        with m.Elif(is_(*command.TX_OPCODES) & (c.tid == 0)):
            m.d.comb += status.eq(Status.INVALID_TID)
        with m.Elif((op == Opcode.APPEND) & (c.lba != 0)):
            m.d.comb += status.eq(Status.INVALID_FIELD)
        with m.Elif(is_data | (op == Opcode.APPEND)):
            with m.If(c.nlb == 0):
                m.d.comb += status.eq(Status.ZERO_LENGTH)
            with m.Elif(c.nlb > lim.max_transfer):
                m.d.comb += status.eq(Status.TRANSFER_TOO_LARGE)
            with m.Elif(is_data & out_of_range):
                m.d.comb += status.eq(Status.LBA_OUT_OF_RANGE)
            with m.Elif(buffer_bad(c.buf, command.BUF_ALIGN)):
                m.d.comb += status.eq(Status.MISALIGNED_BUFFER)
        with m.Elif(op == Opcode.DEALLOCATE):
            with m.If(c.nlb == 0):
                m.d.comb += status.eq(Status.ZERO_LENGTH)
            with m.Elif(out_of_range):
                m.d.comb += status.eq(Status.LBA_OUT_OF_RANGE)
        with m.Elif(is_(Opcode.IDENTIFY, Opcode.GET_LOG)):
            with m.If(buffer_bad(c.buf, command.BUF_ALIGN)):
                m.d.comb += status.eq(Status.MISALIGNED_BUFFER)
        with m.Elif(is_(Opcode.ATOMIC_WRITE, Opcode.REMAP)):
            with m.If(c.nlist == 0):
                m.d.comb += status.eq(Status.ZERO_LENGTH)
            with m.Elif((op == Opcode.ATOMIC_WRITE) & (c.nlist > lim.max_atomic_pages)):
                m.d.comb += status.eq(Status.GROUP_TOO_LARGE)
            with m.Elif((op == Opcode.REMAP) & (c.nlist > lim.max_remap_triples)):
                m.d.comb += status.eq(Status.REMAP_TOO_LARGE)
            with m.Elif(buffer_bad(c.list, command.LIST_ALIGN)):
                m.d.comb += status.eq(Status.MISALIGNED_BUFFER)
        with m.Elif((op == Opcode.HINT) & ~known_hint):
            m.d.comb += status.eq(Status.INVALID_FIELD)
        return status

    def elaborate(self, platform):
        m = Module()
        # One registered stage: the entry and its verdict.
        held = Signal.like(self.cmd.payload)
        verdict = Signal(15)
        full = Signal()

        status = self.status_of(m, self.cmd.payload.cmd)
        drained = (self.accepted.valid & self.accepted.ready) | (self.rejected.valid & self.rejected.ready)
        m.d.comb += self.cmd.ready.eq(~full | drained)
        with m.If(self.cmd.valid & self.cmd.ready):
            m.d.sync += [held.eq(self.cmd.payload), verdict.eq(status), full.eq(1)]
        with m.Elif(drained):
            m.d.sync += full.eq(0)

        m.d.comb += [
            self.accepted.valid.eq(full & (verdict == Status.SUCCESS)),
            self.accepted.payload.eq(held),
            self.rejected.valid.eq(full & (verdict != Status.SUCCESS)),
            self.rejected.payload.sqid.eq(held.sqid),
            self.rejected.payload.cid.eq(held.cmd.cid),
            self.rejected.payload.status.eq(verdict),
            self.rejected.payload.result.eq(0),
        ]
        return m
