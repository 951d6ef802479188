"""The info-page writer: what IDENTIFY and GET_LOG put in the host's buffer.

The executor hands it one job at a time and waits for the status (it posts the completion), so the
tables the writer reads hold still while it writes them.  Four kinds of page:

============  =================================================================================
IDENTIFY      ``spec.IDENTIFY.size`` bytes copied from the firmware's record (``identify_base``), with
              IDENTIFY.volatile_cache replaced by the write cache's size (``volatile_cache``
              bytes, when the build has a cache: the firmware's record cannot know it)
RECORD        the same copy of the log record the firmware keeps (``log_base``; GET_LOG's other
              pages)
OPEN          GET_LOG ``LogPage.OPEN``: a ``spec.OPEN_TX`` per transaction slot (tid, pages,
              doomed; zeros unless OPEN), then a ``spec.OPEN_APPEND`` per append slot (its
              token and pages while live; zeros otherwise).  A host's queue pair sees only the
              transactions and appends it owns (the others read as free slots: their tokens are
              theirs); the firmware's pair (``all``) sees every one
SNAPSHOT      GET_LOG ``LogPage.SNAPSHOT``: ``spec.SNAP_HDR`` (``seq``: the log's next seq, as
              the executor saw it with nothing in flight), a ``spec.SNAP_TX`` per transaction
              slot, a ``spec.SNAP_APPEND`` per append slot, then a ``spec.SNAP_ENTRY`` per
              pending-table entry (read through the table's READ): what a checkpoint records
============  =================================================================================

Every record is four words, written a word per bus cycle.  An append slot's memories answer a
cycle after the slot is presented, so the writer presents each append slot for a cycle before its
words.  A bus error on the firmware's record is INTERNAL_ERROR; on the host's buffer,
DATA_TRANSFER_ERROR; the page is then partly written and the command says so.
"""

import enum

from amaranth import Cat, Const, Module, Mux, Signal
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

from atomflash import spec
from atomflash.spec import Status
from rtl import spec as layouts
from rtl.lib import wishbone

from .appendtable import AppendViewSignature
from .pending import PendingOp, PendingUserSignature
from .txtable import TxState, TxViewSignature

__all__ = ["InfoPage", "InfoPageWriter", "JOB", "DONE"]

VOLATILE_CACHE_WORD = [f for f in spec.IDENTIFY.fields if f.name == "volatile_cache"][0].offset // 4


class InfoPage(enum.IntEnum):
    IDENTIFY, RECORD, OPEN, SNAPSHOT = range(4)


# ``viewer``: the queue pair that asked; ``all``: it may see every queue's transactions and appends (the
# firmware's pair) -- a host's queue sees only its own, or it would learn the others' tokens
JOB = data.StructLayout({"page": InfoPage, "buf": 32, "seq": 64, "viewer": 16, "all": 1})
DONE = data.StructLayout({"status": 15})


class InfoPageWriter(wiring.Component):
    """Writes one info page per job; see the module docstring.

    Parameters
    ----------
    tx_slots, append_slots, pending_entries, owners : int
        The sizes of the tables it reads (``owners``: the pending table's owners).
    volatile_cache : int
        The write cache's bytes (0: no cache; IDENTIFY copies the record's field as it is).

    Ports
    -----
    job : In(stream {page: InfoPage, buf: 32, seq: 64})
        A page to write into the host buffer at byte address ``buf``; ``seq``: SNAP_HDR's seq (SNAPSHOT).
    identify_base, log_base : In(32)
        The firmware's records (IDENTIFY, RECORD), set by the firmware.
    done : Out(stream {status: 15})
        The job's status, once its last word is written (or a bus error stopped it).
    bus : Out(wishbone.Signature)
        SoC memory: the firmware's records, the host buffer.
    tx_view : Out(TxViewSignature) / append_view : Out(AppendViewSignature)
        The transaction and append tables' view ports.
    pending : Out(PendingUserSignature)
        The pending table (READ of each entry).
    """

    def __init__(self, *, tx_slots: int, append_slots: int, pending_entries: int, owners: int,
                 volatile_cache: int = 0):
        self.tx_slots, self.append_slots, self.pending_entries = tx_slots, append_slots, pending_entries
        self.volatile_cache = volatile_cache
        super().__init__({
            "job": In(stream.Signature(JOB)),
            "identify_base": In(32),
            "log_base": In(32),
            "done": Out(stream.Signature(DONE)),
            "bus": Out(wishbone.Signature(addr_width=30, data_width=32)),
            "tx_view": Out(TxViewSignature(tx_slots)),
            "append_view": Out(AppendViewSignature(append_slots)),
            "pending": Out(PendingUserSignature(pending_entries, owners)),
        })

    def elaborate(self, platform):
        m = Module()
        T, A, E = self.tx_slots, self.append_slots, self.pending_entries
        hbits = max(1, (A - 1).bit_length())
        bus, txv, apv = self.bus, self.tx_view, self.append_view
        preq, presp = self.pending.req, self.pending.resp

        job = Signal.like(self.job.payload)
        host = job.buf[2:]                       # the host buffer's word address
        src = Signal(30)                         # the record's
        status = Signal(15)
        copy_word = Signal(32)
        word = Signal(range(spec.IDENTIFY.size // 4))
        # OPEN: the word being written; its transaction slot (words 0 .. 4T - 1), its append slot (4T ..)
        ow = Signal(range(4 * (T + A) + 1))
        o_t, o_h = Signal(range(T)), Signal(hbits)
        m.d.comb += [o_t.eq(ow[2:]), o_h.eq((ow - 4 * T)[2:])]
        # SNAPSHOT: the header's or a slot record's word; its slots; then the entry and its word
        slot_words = 4 * (1 + T + A)
        sw = Signal(range(slot_words + 1))
        s_t, s_h = Signal(range(T)), Signal(hbits)
        m.d.comb += [s_t.eq((sw - 4)[2:]), s_h.eq((sw - 4 - 4 * T)[2:])]
        s_e = Signal(range(E + 1))
        s_ew = Signal(2)
        s_entry = Signal(data.StructLayout({"valid": 1, "owner": 8, "lba": 32, "ppa": 32}))
        # a slot record's word is formed into a register before it is written: formed as it was
        # written, the slot views' selects (64 append slots' flags) stood in front of the bus's data
        out_word = Signal(32)

        def finish(code):
            m.d.sync += status.eq(code)
            m.next = "ANSWER"

        with m.FSM(name="info_page"):
            with m.State("WAIT_FOR_A_JOB"):
                m.d.comb += self.job.ready.eq(1)
                with m.If(self.job.valid):
                    m.d.sync += [job.eq(self.job.payload), word.eq(0), ow.eq(0), sw.eq(0),
                                 src.eq(Mux(self.job.payload.page == InfoPage.IDENTIFY, self.identify_base,
                                            self.log_base)[2:])]
                    with m.Switch(self.job.payload.page):
                        with m.Case(InfoPage.OPEN):
                            m.next = "FORM_A_WORD_OF_THE_OPEN_LOG"
                        with m.Case(InfoPage.SNAPSHOT):
                            m.next = "FORM_A_WORD_OF_THE_SNAPSHOTS_SLOTS"
                        with m.Default():
                            m.next = "READ_A_WORD_OF_THE_RECORD"

            # IDENTIFY, RECORD: a word copy from the firmware's record to the host buffer
            with m.State("READ_A_WORD_OF_THE_RECORD"):
                wishbone.word_access(m, bus, src + word)
                with m.If(bus.err):
                    finish(Status.INTERNAL_ERROR)
                with m.Elif(bus.ack):
                    m.d.sync += copy_word.eq(bus.dat_r)
                    m.next = "WRITE_IT_TO_THE_HOST_BUFFER"
            with m.State("WRITE_IT_TO_THE_HOST_BUFFER"):
                wishbone.word_access(m, bus, host + word, copy_word)
                if self.volatile_cache:
                    with m.If((job.page == InfoPage.IDENTIFY) & (word == VOLATILE_CACHE_WORD)):
                        m.d.comb += bus.dat_w.eq(self.volatile_cache)
                with m.If(bus.err):
                    finish(Status.DATA_TRANSFER_ERROR)
                with m.Elif(bus.ack):
                    m.d.sync += word.eq(word + 1)
                    with m.If(word == spec.IDENTIFY.size // 4 - 1):
                        finish(Status.SUCCESS)
                    with m.Else():
                        m.next = "READ_A_WORD_OF_THE_RECORD"

            # OPEN: OPEN_TX per transaction slot, then OPEN_APPEND per append slot
            with m.State("PRESENT_AN_APPEND_SLOT_FOR_THE_OPEN_LOG"):
                m.d.comb += apv.slot.eq(o_h)
                m.next = "FORM_A_WORD_OF_THE_OPEN_LOG"
            with m.State("FORM_A_WORD_OF_THE_OPEN_LOG"):
                o_word = Signal(32)
                o_field = ow[:2]
                m.d.comb += [txv.slot.eq(o_t), apv.slot.eq(o_h)]
                tx_open = (txv.state == TxState.OPEN) & (job.all | (txv.owner == job.viewer))
                app_live = apv.live & (job.all | (apv.owner == job.viewer))
                with m.If(ow < 4 * T):
                    with m.Switch(o_field):
                        with m.Case(0):
                            m.d.comb += o_word.eq(Mux(tx_open, txv.tid, 0))
                        with m.Case(1):
                            m.d.comb += o_word.eq(Mux(tx_open, txv.npages, 0))
                        with m.Case(2):
                            m.d.comb += o_word.eq(Mux(tx_open, txv.doomed, 0))
                with m.Else():
                    with m.Switch(o_field):
                        with m.Case(0):
                            m.d.comb += o_word.eq(Mux(app_live, Cat(o_h, Const(0, 16 - hbits), apv.meta.gen), 0))
                        with m.Case(1):
                            m.d.comb += o_word.eq(Mux(app_live, apv.meta.check, 0))
                        with m.Case(2):
                            m.d.comb += o_word.eq(Mux(app_live, apv.meta.nlb, 0))
                m.d.sync += out_word.eq(o_word)
                m.next = "WRITE_THE_OPEN_LOGS_WORD"
            with m.State("WRITE_THE_OPEN_LOGS_WORD"):
                m.d.comb += apv.slot.eq(o_h)     # still presented: the slot's next word is formed next
                wishbone.word_access(m, bus, host + ow, out_word)
                with m.If(bus.err):
                    finish(Status.DATA_TRANSFER_ERROR)
                with m.Elif(bus.ack):
                    m.d.sync += ow.eq(ow + 1)
                    with m.If(ow == 4 * (T + A) - 1):
                        finish(Status.SUCCESS)
                    with m.Elif((ow >= 4 * T - 1) & (ow[:2] == 3)):
                        m.next = "PRESENT_AN_APPEND_SLOT_FOR_THE_OPEN_LOG"
                    with m.Else():
                        m.next = "FORM_A_WORD_OF_THE_OPEN_LOG"

            # SNAPSHOT: the header and the slots' records, then the pending table's entries
            with m.State("PRESENT_AN_APPEND_SLOT_FOR_THE_SNAPSHOT"):
                m.d.comb += apv.slot.eq(s_h)
                m.next = "FORM_A_WORD_OF_THE_SNAPSHOTS_SLOTS"
            with m.State("FORM_A_WORD_OF_THE_SNAPSHOTS_SLOTS"):
                s_word = Signal(32)
                s_field = sw[:2]
                hdr = Signal(layouts.SNAP_HDR)
                txr = Signal(layouts.SNAP_TX)
                apr = Signal(layouts.SNAP_APPEND)
                m.d.comb += [hdr.seq.eq(job.seq), hdr.tx_slots.eq(T), hdr.append_slots.eq(A), hdr.entries.eq(E),
                             txv.slot.eq(s_t), txr.first_vseq.eq(txv.first), txr.npages.eq(txv.npages),
                             txr.flags.open.eq(txv.state == TxState.OPEN), txr.flags.started.eq(txv.started),
                             txr.flags.doomed.eq(txv.doomed),
                             apv.slot.eq(s_h), apr.first_vseq.eq(apv.first), apr.nlb.eq(apv.meta.nlb),
                             apr.flags.live.eq(apv.live), apr.flags.held.eq(apv.held)]
                with m.If(sw < 4):
                    m.d.comb += s_word.eq(hdr.as_value().word_select(s_field, 32))
                with m.Elif(sw < 4 + 4 * T):
                    m.d.comb += s_word.eq(txr.as_value().word_select(s_field, 32))
                with m.Else():
                    m.d.comb += s_word.eq(apr.as_value().word_select(s_field, 32))
                m.d.sync += out_word.eq(s_word)
                m.next = "WRITE_THE_SNAPSHOTS_WORD"
            with m.State("WRITE_THE_SNAPSHOTS_WORD"):
                m.d.comb += apv.slot.eq(s_h)
                wishbone.word_access(m, bus, host + sw, out_word)
                with m.If(bus.err):
                    finish(Status.DATA_TRANSFER_ERROR)
                with m.Elif(bus.ack):
                    m.d.sync += sw.eq(sw + 1)
                    with m.If(sw == slot_words - 1):
                        m.d.sync += s_e.eq(0)
                        m.next = "ASK_FOR_A_PENDING_ENTRY"
                    with m.Elif((sw >= 4 + 4 * T - 1) & (sw[:2] == 3)):
                        m.next = "PRESENT_AN_APPEND_SLOT_FOR_THE_SNAPSHOT"
                    with m.Else():
                        m.next = "FORM_A_WORD_OF_THE_SNAPSHOTS_SLOTS"
            with m.State("ASK_FOR_A_PENDING_ENTRY"):
                m.d.comb += [preq.valid.eq(1), preq.payload.op.eq(PendingOp.READ), preq.payload.entry.eq(s_e)]
                with m.If(preq.ready):
                    m.next = "TAKE_THE_PENDING_ENTRY"
            with m.State("TAKE_THE_PENDING_ENTRY"):
                m.d.comb += presp.ready.eq(1)
                with m.If(presp.valid):
                    m.d.sync += [s_entry.valid.eq(presp.payload.hit), s_entry.owner.eq(presp.payload.idx),
                                 s_entry.lba.eq(presp.payload.lba), s_entry.ppa.eq(presp.payload.ppa), s_ew.eq(0)]
                    m.next = "WRITE_A_WORD_OF_THE_ENTRY"
            with m.State("WRITE_A_WORD_OF_THE_ENTRY"):
                er = Signal(layouts.SNAP_ENTRY)
                m.d.comb += [er.flags.valid.eq(s_entry.valid), er.flags.owner.eq(s_entry.owner),
                             er.lba.eq(s_entry.lba), er.ppa.eq(s_entry.ppa)]
                wishbone.word_access(m, bus, host + slot_words + Cat(s_ew, s_e), er.as_value().word_select(s_ew, 32))
                with m.If(bus.err):
                    finish(Status.DATA_TRANSFER_ERROR)
                with m.Elif(bus.ack):
                    m.d.sync += s_ew.eq(s_ew + 1)
                    with m.If(s_ew == 3):
                        m.d.sync += s_e.eq(s_e + 1)
                        with m.If(s_e == E - 1):
                            finish(Status.SUCCESS)
                        with m.Else():
                            m.next = "ASK_FOR_A_PENDING_ENTRY"

            with m.State("ANSWER"):
                m.d.comb += [self.done.valid.eq(1), self.done.payload.status.eq(status)]
                with m.If(self.done.ready):
                    m.next = "WAIT_FOR_A_JOB"
        return m
