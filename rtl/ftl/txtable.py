"""The transaction table: which host transactions are open, and what the log holds of each.

``slots`` transaction slots, each FREE, OPEN or CLOSING, with the host's tid, the pages written, the
first page's vseq (the transaction's tag, once its first page is taken) and whether it is *doomed* (a
write of it was dropped, so its commit must abort; ``doomed_no_page``: for want of a page).

A transaction belongs to the queue pair that opened it (its *owner*): each queue pair has its own
tids, so another queue's TX_WRITE, TX_READ, TX_COMMIT or TX_ABORT never finds it -- the same answer
as for a tid nobody opened (it learns nothing, and changes nothing).

The executor finds a command's transaction by (owner, tid) among the OPEN slots (``found``), opens the lowest
FREE slot for the first TX_WRITE of an unknown tid, and closes a slot (CLOSING) when it accepts the
TX_COMMIT, TX_ABORT or final TX_WRITE; the tid may then be reused at once.  The slot is FREE again
when that group is published (``free``).

``floor`` is the first vseq of the oldest transaction not yet published that has a page (all ones:
none): a map checkpoint must not claim a floor above it, or recovery would not see its pages.  It
comes from a :class:`~rtl.ftl.floorscan.FloorScanner` pass over the slots, as the append
table's floor does (``floor_passes``; read it as the firmware does: wait two passes).

A slot's ``first`` and ``npages`` live in LUT RAM (written at ``slot``, read without a clock at
``slot``, ``found_slot``, the view's and the peek's slot); the fields every slot is searched by
(state, tid, owner) and the flags are registers.  As registers with a comparator chain for the
floor, 16 slots took about 9 k LUT4.
"""

from amaranth import Array, Module, Mux, Signal
from amaranth.lib import memory, wiring
from amaranth.lib.wiring import In, Out

from rtl.lib.lutram import read_async

from .floorscan import NONE, FloorScanner

__all__ = ["TransactionTable", "TxState", "TxViewSignature", "NONE"]


class TxState:
    FREE, OPEN, CLOSING = range(3)


class TxViewSignature(wiring.Signature):
    """A look at one transaction slot's fields (from the viewer's side; combinational): what GET_LOG
    writes.  ``slot`` out; ``state``, ``tid``, ``owner``, ``npages``, ``first``, ``started``, ``doomed`` in."""

    def __init__(self, slots: int):
        super().__init__({"slot": Out(range(slots)), "state": In(2), "tid": In(32), "owner": In(16),
                          "npages": In(32), "first": In(64), "started": In(1), "doomed": In(1)})


class TransactionTable(wiring.Component):
    """The open transactions; see the module docstring.

    Parameters
    ----------
    slots : int
        Transactions open at once.
    owner_bits : int
        Width of a queue pair's number (a transaction's owner).

    Ports
    -----
    tid : In(32), owner : In(owner_bits) / found : Out(1), found_slot : Out(range(slots))
        The OPEN slot ``owner`` opened with ``tid``, matched in the cycle before (set ``tid`` and
        ``owner`` a cycle ahead: the 32-bit compare of every slot is a path of its own) and still OPEN.
    has_free : Out(1), free_slot : Out(range(slots)) / closing : Out(1)
        The lowest FREE slot / some slot is CLOSING (it will be FREE once published).
    slot : In(range(slots))
        The slot the operations below act on, and whose fields ``npages``, ``first``, ``started``,
        ``doomed_no_page`` show (combinational).
    open : In(1)
        ``slot`` becomes OPEN for ``owner`` and ``tid``, with no pages and not doomed.
    add_pages : In(1), pages : In(32)
        ``pages`` more pages of ``slot`` were reserved.
    close : In(1)
        ``slot`` is CLOSING.
    start : In(1), first_vseq : In(64)
        ``slot``'s first page was taken with vseq ``first_vseq``.
    free : In(1), free_which : In(range(slots))
        A CLOSING slot's closing group was published: FREE.
    doom : In(1), doom_which : In(range(slots)), doom_no_page : In(1)
        A write of that slot was dropped (for want of a page).
    view : In(TxViewSignature(slots))
        Another slot's fields: the GET_LOG records.
    peek : In(range(slots)) / peek_first : Out(64)
        Yet another slot's first vseq (combinational): a retried page's tag.
    found_npages : Out(32)
        ``found_slot``'s pages.
    doomed : Out(slots)
        The doomed slots (to the publisher, which aborts their commits).
    floor : Out(64), floor_passes : Out(32) / open_count : Out(range(slots + 1))
        The oldest unpublished transaction's first vseq (all ones: none) as of the scanner's last pass,
        and its passes / OPEN slots.

    ``scan_length``: cycles per pass of the floor's scanner (default ``slots``).
    """

    def __init__(self, slots: int, owner_bits: int = 1, scan_length: int | None = None):
        self.slots, self.owner_bits, self.scan_length = slots, owner_bits, scan_length
        S = range(slots)
        super().__init__({
            "tid": In(32), "owner": In(owner_bits), "found": Out(1), "found_slot": Out(S), "found_npages": Out(32),
            "has_free": Out(1), "free_slot": Out(S), "closing": Out(1),
            "slot": In(S), "npages": Out(32), "first": Out(64), "started": Out(1), "doomed_no_page": Out(1),
            "open": In(1), "add_pages": In(1), "pages": In(32), "close": In(1),
            "start": In(1), "first_vseq": In(64),
            "free": In(1), "free_which": In(S),
            "doom": In(1), "doom_which": In(S), "doom_no_page": In(1),
            "view": In(TxViewSignature(slots)), "peek": In(S), "peek_first": Out(64),
            "doomed": Out(slots),
            "floor": Out(64), "floor_passes": Out(32), "open_count": Out(range(slots + 1)),
        })

    def elaborate(self, platform):
        m = Module()
        T = self.slots
        state = Array(Signal(2, name=f"state{t}") for t in range(T))
        tid = Array(Signal(32, name=f"tid{t}") for t in range(T))
        owner = Array(Signal(self.owner_bits, name=f"owner{t}") for t in range(T))
        m.submodules.first = first = memory.Memory(shape=64, depth=T, init=[])
        m.submodules.npages = npages = memory.Memory(shape=32, depth=T, init=[])
        started = Signal(T)
        no_page = Signal(T)

        match, match_slot, matched, matched_slot = Signal(), Signal(range(T)), Signal(), Signal(range(T))
        for i in reversed(range(T)):
            with m.If((state[i] == TxState.OPEN) & (tid[i] == self.tid) & (owner[i] == self.owner)):
                m.d.comb += [match.eq(1), match_slot.eq(i)]
        m.d.sync += [matched.eq(match), matched_slot.eq(match_slot)]
        m.d.comb += [self.found.eq(matched & (state[matched_slot] == TxState.OPEN)), self.found_slot.eq(matched_slot)]
        for i in reversed(range(T)):
            with m.If(state[i] == TxState.FREE):
                m.d.comb += [self.has_free.eq(1), self.free_slot.eq(i)]
            with m.If(state[i] == TxState.CLOSING):
                m.d.comb += self.closing.eq(1)
        s, view = self.slot, self.view
        v = view.slot
        npages_s = read_async(m, npages, s)
        m.d.comb += [self.found_npages.eq(read_async(m, npages, self.found_slot)),
                     self.npages.eq(npages_s), self.first.eq(read_async(m, first, s)),
                     self.started.eq(started.bit_select(s, 1)),
                     self.doomed_no_page.eq(no_page.bit_select(s, 1)),
                     view.state.eq(state[v]), view.tid.eq(tid[v]), view.owner.eq(owner[v]),
                     view.npages.eq(read_async(m, npages, v)),
                     view.first.eq(read_async(m, first, v)), view.started.eq(started.bit_select(v, 1)),
                     view.doomed.eq(self.doomed.bit_select(v, 1)),
                     self.peek_first.eq(read_async(m, first, self.peek))]

        m.submodules.scanner = scanner = FloorScanner(T, self.scan_length)
        first_scan = first.read_port()
        live = Signal(T)
        for t in range(T):
            m.d.comb += live[t].eq((state[t] != TxState.FREE) & started[t])
        m.d.comb += [first_scan.addr.eq(scanner.addr), scanner.data.eq(first_scan.data), scanner.hold.eq(live),
                     self.floor.eq(scanner.floor), self.floor_passes.eq(scanner.passes),
                     self.open_count.eq(sum(state[t] == TxState.OPEN for t in range(T)))]

        npages_w, first_w = npages.write_port(), first.write_port()
        m.d.comb += [npages_w.addr.eq(s), first_w.addr.eq(s), first_w.data.eq(self.first_vseq),
                     first_w.en.eq(self.start),
                     # an open and an add of the same cycle: the add wins, as it did over registers
                     npages_w.data.eq(Mux(self.add_pages, npages_s + self.pages, 0)),
                     npages_w.en.eq(self.open | self.add_pages)]

        # publications first: the executor's own changes of the same cycle win
        with m.If(self.free):
            m.d.sync += state[self.free_which].eq(TxState.FREE)
        with m.If(self.doom):
            m.d.sync += self.doomed.bit_select(self.doom_which, 1).eq(1)
            with m.If(self.doom_no_page):
                m.d.sync += no_page.bit_select(self.doom_which, 1).eq(1)
        with m.If(self.open):
            m.d.sync += [state[s].eq(TxState.OPEN), tid[s].eq(self.tid), owner[s].eq(self.owner),
                         started.bit_select(s, 1).eq(0), self.doomed.bit_select(s, 1).eq(0),
                         no_page.bit_select(s, 1).eq(0)]
        with m.If(self.close):
            m.d.sync += state[s].eq(TxState.CLOSING)
        with m.If(self.start):
            m.d.sync += started.bit_select(s, 1).eq(1)
        return m
