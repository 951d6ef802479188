"""Executor: validated host commands in, log pages and completions out.

The executor turns each command that changes the map into one *group* in a
publisher slot, and lets the :class:`~rtl.ftl.publisher.Publisher` decide
when it becomes visible:

=============  ===============================================================
WRITE          nlb members, each its own commit point (DATA, group_len 1,
               commit bit): bound together once all are programmed
ATOMIC_WRITE   the (lba, buf) list is read from host memory and checked first
               (LBA range -> LBA_OUT_OF_RANGE, buffer alignment ->
               MISALIGNED_BUFFER, an LBA twice -> DUPLICATE_LBA; nothing is
               programmed for a rejected group); then N members with
               group_len N, group_idx i, the commit bit on the last, vseqs
               first..first+N-1 (issued back to back, so the allocator's seqs
               are consecutive)
DEALLOCATE     one TRIM record page (entry written to the slot's scratch page in
               SoC memory; the log writer stamps the header), then the publisher
               unbinds the range
FLUSH,         an empty group: published, hence completed, once every group
HINT(CKPT)     before it is -- every write acknowledged before it is on flash
TX_WRITE       nlb pages flagged ``tx``, tagged with the transaction's tag (its
               first page's vseq), bound only in the pending-bindings table
               (``MemberMode.STAGE``); with CMD.flags.tx_final the last page also
               carries the commit (``tx_final``, group_len = the transaction's
               page count) and the group ends with a COMMIT walk
TX_COMMIT      one COMMIT record page (REC_HDR + COMMIT_BODY: first vseq, pages,
               tid), then the publisher binds every staged page at once
TX_ABORT       an empty group whose publication drops the staged bindings
TX_READ        the transaction's staged pages for the range go to the reader's
               override table, then a READ
APPEND         nlb APPEND pages (flags.append, tid = tag, group_len nlb,
               group_idx i) staged under a free append slot; the completion's
               result is the token (``spec.TOKEN``: slot, generation, a check
               MACed under the boot's key over first vseq, slot, generation and
               the appending queue pair, the token's owner)
REMAP          the (lba, token, nlb) list is read and checked first (ZERO_LENGTH,
               LBA_OUT_OF_RANGE, DUPLICATE_LBA for overlapping ranges,
               INVALID_TOKEN for a token not live, named twice or another queue
               pair's, REMAP_LENGTH);
               then one REMAP record page (REMAP_REC_ENTRY per triple), after
               which the publisher binds every triple at once
RELEASE        an empty group whose publication drops the append's entries (the
               token must be live and the releasing queue pair's: INVALID_TOKEN)
=============  ===============================================================

**Transactions** live in ``max_open_tx`` transaction slots (state FREE / OPEN /
CLOSING, owner queue pair and host tid, first vseq, pages written, doomed), a
:class:`~rtl.ftl.txtable.TransactionTable`.  Each queue pair has its own tids:
another queue pair's command never finds a transaction (UNKNOWN_TX, as for a
tid nobody opened).  The first TX_WRITE of an unknown tid opens one (TOO_MANY_OPEN_TX when every
slot is open; it waits while one is closing).  Before anything is
programmed a TX_WRITE finds the entries its transaction already holds for the
range (a ``SCAN``), checks that the new ones fit (PENDING_FULL; it waits while
a closing transaction is about to free entries) and reserves them, so the
publisher only has to stage.  TX_COMMIT / TX_ABORT / TX_FINAL close the slot at
once (a second commit is UNKNOWN_TX, the tid may be reused) and free it when
published.  A TX_WRITE the publisher drops (program failures, a bus error)
*dooms* its transaction: the commit then aborts it and completes with
MEDIA_ERROR, or NO_SPACE when a dropped write of it found no page.  The tag
of a transaction is the seq its first page gets: the log writer's next seq
(``page_seq``) in the cycle the log port takes that page (it holds one page at
a time, so no other page can take a seq in between).
A TX_FINAL whose transaction would exceed ``LOG.TX_FINAL_MAX_PAGES`` pages is
INVALID_FIELD (commit with TX_COMMIT instead).  ``tx_floor`` is the first
vseq of the oldest transaction not yet published (all ones: none): a map
checkpoint must not claim a floor above it, or recovery would not see the
transaction's pages.

Slots are taken in ring order and published in ring order, so for each LBA
the map follows command order ("commit order decides").  A member whose
program fails comes back from the publisher and is re-issued on a fresh page
with its vseq (``keep_vseq``); after ``max_retries`` failures of one group,
or a bus error on its host buffer, the remaining failures are given up and
the group is dropped: MEDIA_ERROR (DATA_TRANSFER_ERROR for the bus error),
nothing bound.  A member the log writer could find no page for (``no_page``:
every erased block used up and none coming, ``ftl.host_enable.no_blocks``)
is not retried either: the group is dropped and the command completes
NO_SPACE (a TX_WRITE dooms its transaction, whose TX_COMMIT then answers
NO_SPACE too; a TX_COMMIT whose record found no page aborts it; a FLUSH after
a dropped destage answers NO_SPACE).

**Out of space** (``no_space``, set by the firmware when the good blocks left
cannot take more data; spec ``NoSpace``): WRITE, ATOMIC_WRITE, TX_WRITE and
APPEND complete with NO_SPACE in DECODE, before they take a slot, a
transaction, an append slot or a cache page, so a refused command changes
nothing.  Everything else goes on: reads, FLUSH, and the commands that finish
what is open or free space (DEALLOCATE, TX_COMMIT, TX_ABORT, REMAP, RELEASE;
one record page at most each).

READ goes to the :class:`~rtl.ftl.reader.Reader` (its own queue, so reads do
not wait for programs); IDENTIFY and GET_LOG to the
:class:`~rtl.ftl.infopages.InfoPageWriter`, which writes the page into the
host buffer while the dispatcher waits (GET_LOG SNAPSHOT once nothing is in
flight); HINT NONE / FLUSH_GROUP complete at once.
A TX_WRITE flagged ``tx_new`` whose tid is open already completes
TID_IN_USE and changes nothing.

**The write cache** (``cache_pages`` > 0; docs/ftl.md, "Write cache"): a
non-FUA WRITE copies each page into a free cache page and makes it the
LBA's DIRTY entry, freeing the DIRTY entry it replaces (coalesced), then
completes.  When fewer than two stripes of pages are free or being
destaged, a DESTAGE group of the ``stripe`` least recently written DIRTY
entries takes a publisher slot (plain-write members whose buffers are the
cache pages, no host completion); its entries are freed when it is
published.  FLUSH, HINT(CHECKPOINT), ATOMIC_WRITE, DEALLOCATE, TX_COMMIT, a
final TX_WRITE, REMAP and FUA writes first destage every DIRTY entry (the
fence), so ring order binds buffered data before them.  The reader looks
LBAs up in the table (``cache_lookup``, a :class:`~rtl.ftl.writecache.WriteCacheTable`)
under the cache-page lock.

**Appends** live in ``max_appends`` slots of an
:class:`~rtl.ftl.appendtable.AppendTable` (*live*: its token is valid;
*held*: its pages may still be needed -- from the first page's
acceptance until the publisher frees its entries).  An APPEND takes the
lowest free slot (PENDING_FULL when none is free or the pages do not fit;
both wait while anything is in flight, which may free room); a token is
consumed when the REMAP or RELEASE naming it is accepted, the slot is reused
once the publisher says its entries are freed (``pub_freed``).  The oldest
held append's first vseq also bounds ``tx_floor``, with the oldest unpublished
transaction's: each table's :class:`~rtl.ftl.floorscan.FloorScanner` reads
every slot in turn, both in passes of the same length (``floor_passes`` counts
them; the firmware reads ``seq_next``, waits two passes, then reads the floor).
"""

from amaranth import Array, Cat, Const, Module, Mux, Signal
from amaranth.lib import data, fifo, memory, stream, wiring
from amaranth.lib.wiring import In, Out
from amaranth.utils import ceil_log2, exact_log2

from atomflash import spec
from atomflash.spec import Hint, Kind, LogPage, Opcode, Status
from rtl import spec as layouts
from rtl.host.queues import command_layout, completion_layout
from rtl.lib import wishbone
from rtl.lib.lutram import read_async
from rtl.lib.memcopy import CopyError, copy_request_layout

from .appendtable import AppendTable, AppendViewSignature
from .infopages import DONE as INFO_DONE
from .infopages import JOB as INFO_JOB
from .infopages import InfoPage
from .listcheck import RangeOverlapChecker
from .logwriter import PAGE_WRITE
from .pending import PendingOp, PendingUserSignature
from .publisher import MemberMode, Publisher, Walk
from .reader import OverrideSignature, read_layout
from .txtable import TransactionTable, TxViewSignature
from .writecache import CacheLookupSignature, WriteCacheTable

__all__ = ["Executor"]

COMMIT = spec.OOB.compose("flags", commit=1)
TX_PAGE = spec.OOB.compose("flags", tx=1)
TX_FINAL_PAGE = spec.OOB.compose("flags", tx=1, tx_final=1, commit=1)
APPEND_PAGE = spec.OOB.compose("flags", append=1)


class _SlotField:
    """A per-slot field in LUT RAM: written at ``addr`` (the tail slot), read without a clock at any
    slot, one read port per :meth:`read`.  ``write`` returns the statements that write ``value`` this cycle
    (comb, under the caller's conditions): the slot holds it from the next cycle, like a register."""

    def __init__(self, m, name, shape, depth, addr):
        self.m = m
        self.mem = memory.Memory(shape=shape, depth=depth, init=[])
        m.submodules[f"slot_{name}"] = self.mem
        self.port = self.mem.write_port()
        m.d.comb += self.port.addr.eq(addr)

    def write(self, value):
        return [self.port.data.eq(value), self.port.en.eq(1)]

    def read(self, addr):
        return read_async(self.m, self.mem, addr)


def shift_add(x, k: int):
    """``x * k`` for a constant ``k`` as a sum of shifted ``x``: Yosys maps a product by a constant
    that is not a power of two to a DSP block, whose delay then starts a bus address path."""
    terms = [x << i for i in range(k.bit_length()) if k >> i & 1]
    total = terms[0] if terms else 0
    for t in terms[1:]:
        total = total + t
    return total


class Executor(wiring.Component):
    """Dispatches commands into publisher groups; see the module docstring.

    Parameters
    ----------
    queue_pairs : int
    page_data : int
        Bytes per logical block (the flash page's data area).
    slots : int
        Publisher slots (commands in flight), a power of two.
    max_members : int
        Publisher members per slot (>= max_transfer and max_atomic_pages).
    max_retries : int
        Program failures one group may see before it is dropped.

    Ports
    -----
    cmd : In(stream of command_layout) / cpl : Out(stream of completion_layout)
    page : Out(stream of PAGE_WRITE)
        The log writer (its completions go to the publisher; a page's tag is ``Publisher.member_tag``).
    page_lock : Out(1)
        A group is being issued: nobody else may take the log writer until it drops.
    pub_member_lba, pub_open, pub_give_up : Out(streams) / pub_retry, pub_published : In(streams)
        The publisher (same payloads as its ports).
    pub_transfer_error, pub_no_page : In(slots)
        The publisher's notes on each slot's members: a bus error on the host buffer, no page found.
    read : Out(stream of read_layout)
        READ commands for the Reader.
    bus : Out(wishbone.Signature)
        List reads, scratch-page writes.
    copy : Out(stream of copy_request_layout) / copy_done : In(stream of {error})
        Write-cache fills, to a :class:`~rtl.lib.memcopy.MemoryCopier` (bursts, a word a cycle): a
        host page into a cache page.
    no_space : In(1)
        The firmware is out of space (``ftl.host_enable.no_space``): commands that
        bring new data (WRITE, ATOMIC_WRITE, TX_WRITE, APPEND) complete with
        NO_SPACE before anything is taken or programmed; the rest go on.
    capacity : In(64), scratch_base : In(32)
        Set by the firmware; ``scratch_base`` holds ``slots`` pages.
    info_job : Out(stream of infopages.JOB) / info_done : In(stream of infopages.DONE)
        IDENTIFY and GET_LOG, to the :class:`~rtl.ftl.infopages.InfoPageWriter`.
    token_key : In(128), token_key_ready : In(1), token_key_failed : In(1)
        The key append tokens are MACed under, drawn at reset (:class:`~rtl.lib.trng.Trng`): an APPEND
        waits for it, and is NOT_READY when the draw failed its health tests.
    tx_view : In(TxViewSignature) / append_view : In(AppendViewSignature)
        The transaction and append tables' view ports, for the info-page writer.
    pending : Out(PendingUserSignature) / pending_free : In
        The pending-bindings table (SCAN, RESERVE) and its free entries.
    page_seq : In(64)
        The seq the log writer gives the page it takes this cycle.
    tx_doomed : Out(max_open_tx)
        To the publisher.
    overrides : Out(OverrideSignature)
        The reader's TX_READ override table.
    tx_floor : Out(64), tx_open : Out
        First vseq of the oldest unpublished transaction or held append; transactions open.
    pub_freed : In(stream {owner})
        The publisher freed an owner's entries (an append slot may be reused).
    floor_passes : Out(32)
        Passes of the append-floor scanner.
    """

    def __init__(self, *, queue_pairs: int, page_data: int, slots: int = 16,
                 max_members: int = spec.LIMITS.MAX_ATOMIC_PAGES, max_transfer: int = spec.LIMITS.MAX_TRANSFER,
                 max_retries: int = 4, retry_depth: int = 16, lba_bits: int = 32,
                 max_open_tx: int = spec.LIMITS.MAX_OPEN_TX, pending_entries: int = spec.LIMITS.MAX_PENDING,
                 max_appends: int = spec.LIMITS.MAX_APPENDS,
                 max_remap_triples: int = spec.LIMITS.MAX_REMAP_TRIPLES,
                 cache_pages: int = 0, stripe: int = 1):
        exact_log2(slots)
        if cache_pages and not stripe <= cache_pages:
            raise ValueError("the write cache must hold at least one stripe (channels x ways pages)")
        if stripe > max_members:
            raise ValueError("a destage stripe must fit one publisher slot")
        self.cache_pages, self.stripe = cache_pages, stripe
        exact_log2(max_members)
        if max_transfer > max_members:
            raise ValueError("a WRITE of max_transfer blocks must fit one publisher slot")
        self.queue_pairs, self.page_data, self.slots = queue_pairs, page_data, slots
        self.max_members, self.max_transfer, self.max_retries = max_members, max_transfer, max_retries
        self.retry_depth = retry_depth
        self.slot_bits = exact_log2(slots)
        self.idx_bits = exact_log2(max_members)
        self.lba_bits = lba_bits
        self.max_open_tx, self.pending_entries = max_open_tx, pending_entries
        self.max_appends, self.max_remap_triples = max_appends, max_remap_triples
        if max_remap_triples > spec.record_capacity(Kind.REMAP, page_data):
            raise ValueError("a REMAP record of max_remap_triples entries must fit one page")
        self.owners = max_open_tx + max_appends      # pending-table owners: transactions, then append slots
        self.owner_bits = max(1, ceil_log2(self.owners))
        slot_idx = {"slot": self.slot_bits, "idx": self.idx_bits}
        super().__init__({
            "cmd": In(stream.Signature(command_layout(queue_pairs))),
            "cpl": Out(stream.Signature(completion_layout(queue_pairs))),
            "page": Out(stream.Signature(PAGE_WRITE)),
            "page_lock": Out(1),
            "pub_member_lba": Out(stream.Signature(data.StructLayout(slot_idx | {"lba": lba_bits,
                                                                                 "owner": self.owner_bits}))),
            "pub_open": Out(stream.Signature(Publisher.open_layout(self.slot_bits, self.idx_bits,
                                                                   self.owner_bits))),
            "pub_transfer_error": In(slots),
            "pub_no_page": In(slots),
            "pub_give_up": Out(stream.Signature(data.StructLayout(slot_idx))),
            "pub_retry": In(stream.Signature(data.StructLayout(slot_idx | {"vseq": 64}))),
            "pub_published": In(stream.Signature(data.StructLayout({"slot": self.slot_bits, "bus_error": 1,
                                                                     "dropped": 1}))),
            "read": Out(stream.Signature(read_layout(queue_pairs, max_transfer))),
            "bus": Out(wishbone.Signature(addr_width=30, data_width=32)),
            "copy": Out(stream.Signature(copy_request_layout)),
            "copy_done": In(stream.Signature(data.StructLayout({"error": CopyError}))),
            "capacity": In(64),
            "no_space": In(1),
            "scratch_base": In(32),
            "info_job": Out(stream.Signature(INFO_JOB)),
            "info_done": In(stream.Signature(INFO_DONE)),
            "token_key": In(128), "token_key_ready": In(1), "token_key_failed": In(1),
            "tx_view": In(TxViewSignature(max_open_tx)),
            "append_view": In(AppendViewSignature(max_appends)),
            "pending": Out(PendingUserSignature(pending_entries, self.owners)),
            "pending_free": In(range(pending_entries + 1)),
            "page_seq": In(64),
            "tx_doomed": Out(self.owners),
            "pub_freed": In(stream.Signature(data.StructLayout({"owner": self.owner_bits}))),
            "floor_passes": Out(32),
            "overrides": Out(OverrideSignature(max_transfer)),
            "tx_floor": Out(64),
            "tx_open": Out(range(max_open_tx + 1)),
            # the write cache (``cache_pages`` pages at ``cache_base``): the reader's lookups, the counters
            "cache_base": In(32),
            "cache_deep": In(1),
            "cache_lookup": In(CacheLookupSignature(lba_bits)),
            "cache_in": Out(32),
            "cache_coalesced": Out(32),
            "cache_destaged": Out(32),
            "cache_stripes": Out(32),
            "cache_dirty": Out(range(cache_pages + 1)),
            "cache_busy": Out(1),
        })

    def elaborate(self, platform):
        m = Module()
        S, M = self.slots, self.max_members
        page_data = self.page_data
        ql = completion_layout(self.queue_pairs)

        # -- per-slot state -------------------------------------------------------
        class K:        # what a slot holds
            WRITE, ATOMIC, TRIM, FLUSH, TX, COMMIT, ABORT, APPEND, REMAP, RELEASE, DESTAGE = range(11)
        busy = Signal(S)
        tail = Signal(self.slot_bits)    # the next slot in ring order
        # A slot's fields are written only at the tail (when its command is taken) and read where the
        # publisher and the retry path name a slot: LUT RAM, one read port per place that reads it.
        # As registers, 16 slots' fields and their read and write selects took about 4 k LUT4.
        slot_sqid = _SlotField(m, "sqid", ql["sqid"].shape, S, tail)
        slot_cid = _SlotField(m, "cid", 16, S, tail)
        slot_kind = _SlotField(m, "kind", 4, S, tail)
        slot_tag = _SlotField(m, "tag", 32, S, tail)          # an append's tag
        slot_result = _SlotField(m, "result", 64, S, tail)    # an append's token
        slot_tx = _SlotField(m, "tx", self.owner_bits, S, tail)
        slot_final = Signal(S)
        slot_npages = _SlotField(m, "npages", 16, S, tail)    # a final page's group_len

        # -- transaction slots ----------------------------------------------------------
        T = self.max_open_tx
        queue_bits = len(self.cmd.payload.sqid)     # transactions and appends belong to a queue pair
        A, R = self.max_appends, self.max_remap_triples
        # both tables' floor scanners take the same cycles per pass, so they pass together and the
        # append table's count of passes (``floor_passes``) stands for both
        scan = max(A, T)
        m.submodules.txs = txs = TransactionTable(T, queue_bits, scan_length=scan)
        m.d.comb += [self.tx_doomed.eq(txs.doomed), self.tx_open.eq(txs.open_count)]
        wiring.connect(m, wiring.flipped(self.tx_view), txs.view)

        # -- append slots -----------------------------------------------------------------
        hbits = max(1, ceil_log2(A))
        m.submodules.apps = apps = AppendTable(A, queue_bits, scan_length=scan)
        m.d.comb += apps.key.eq(self.token_key)
        wiring.connect(m, wiring.flipped(self.append_view), apps.view)
        # the floor: the oldest held append's first vseq, and the oldest unpublished transaction's
        m.d.comb += [self.floor_passes.eq(apps.floor_passes),
                     self.tx_floor.eq(Mux(apps.floor < txs.floor, apps.floor, txs.floor))]
        # the publisher freed an owner's entries: an append slot may be taken again
        m.d.comb += self.pub_freed.ready.eq(1)
        freed_owner = self.pub_freed.payload.owner
        m.d.comb += [apps.freed.eq(self.pub_freed.valid & (freed_owner >= T)), apps.freed_slot.eq(freed_owner - T)]
        # REMAP triples as read from the list
        trip_shape = data.StructLayout({"lba": 32, "nlb": 32, "handle": 16, "gen": 16, "check": 32})
        m.submodules.trips = trips = memory.Memory(shape=trip_shape, depth=max(R, 2), init=[])
        trip_w = trips.write_port()
        trip_r = trips.read_port(transparent_for=(trip_w,))
        slot_lba = _SlotField(m, "lba", 32, S, tail)
        slot_buf = _SlotField(m, "buf", 32, S, tail)
        slot_n = _SlotField(m, "n", self.idx_bits + 1, S, tail)
        slot_fails = Array(Signal(range(self.max_retries + 2), name=f"fails{s}") for s in range(S))
        slot_xfer = self.pub_transfer_error     # a bus error on the slot's host buffer
        slot_nopage = self.pub_no_page          # a member found no page (log writer give_up): NO_SPACE
        # atomic members' (lba, buf), per slot and member
        member_shape = data.StructLayout({"lba": 32, "buf": 32})
        m.submodules.members = members = memory.Memory(shape=member_shape, depth=S * M, init=[])
        mem_w = members.write_port()
        mem_r = members.read_port(transparent_for=(mem_w,))
        mem_r2 = members.read_port(transparent_for=(mem_w,))   # the retry path's

        def maddr(slot, idx):
            return Cat(idx[:self.idx_bits], slot[:self.slot_bits])

        # -- the write cache (rtl/ftl/writecache.py): its table; the dispatcher fills and destages it ----
        W = self.cache_pages
        if W:
            m.submodules.cache = cache = WriteCacheTable(entries=W, lba_bits=self.lba_bits, slot_bits=self.slot_bits,
                                                         page_data=page_data, stripe=self.stripe)
            wiring.connect(m, wiring.flipped(self.cache_lookup), cache.lookup)
            m.d.comb += [cache.base.eq(self.cache_base), cache.deep.eq(self.cache_deep), self.cache_dirty.eq(cache.dirty), self.cache_busy.eq(cache.busy),
                         self.cache_in.eq(cache.filled), self.cache_coalesced.eq(cache.coalesced),
                         self.cache_destaged.eq(cache.destaged), self.cache_stripes.eq(cache.stripes)]
            watermark = cache.watermark

        # -- completions: published groups and immediate ones ----------------------
        # A published group's completion goes first, but an immediate one already offered stays on the
        # output until taken: the host queues write a completion's words over several cycles, and a
        # payload that changed under them posted one command's result (an APPEND's token) under
        # another's cid, or split an entry across two queues' rings.
        imm = Signal.like(self.cpl.payload)
        imm_valid = Signal()
        imm_offered = Signal()       # an immediate completion was on the output, not yet taken
        pub = self.pub_published.payload
        pub_kind, pub_tx = slot_kind.read(pub.slot), slot_tx.read(pub.slot)
        pub_destage = pub_kind == K.DESTAGE
        show_pub = self.pub_published.valid & ~imm_offered
        with m.If(show_pub & pub_destage):
            # a destage group: no host command to complete
            m.d.comb += self.pub_published.ready.eq(1)
        with m.Elif(show_pub):
            status = Signal(15)
            with m.If(pub.dropped):
                m.d.comb += status.eq(Mux(slot_xfer.bit_select(pub.slot, 1), Status.DATA_TRANSFER_ERROR,
                                          Mux(slot_nopage.bit_select(pub.slot, 1), Status.NO_SPACE,
                                              Status.MEDIA_ERROR)))
            with m.Elif(pub.bus_error):
                m.d.comb += status.eq(Status.INTERNAL_ERROR)
            with m.Elif((pub_kind == K.FLUSH) & (cache.failed if W else 0)):
                m.d.comb += status.eq(Mux(cache.failed_no_page if W else 0, Status.NO_SPACE, Status.MEDIA_ERROR))
            with m.Else():
                m.d.comb += status.eq(Status.SUCCESS)
            m.d.comb += [self.cpl.valid.eq(1), self.cpl.payload.sqid.eq(slot_sqid.read(pub.slot)),
                         self.cpl.payload.cid.eq(slot_cid.read(pub.slot)), self.cpl.payload.status.eq(status),
                         self.pub_published.ready.eq(self.cpl.ready)]
            with m.If((pub_kind == K.APPEND) & ~pub.dropped):
                m.d.comb += self.cpl.payload.result.eq(slot_result.read(pub.slot))     # the token
        with m.Else():
            m.d.comb += [self.cpl.valid.eq(imm_valid), self.cpl.payload.eq(imm)]
        imm_taken = imm_valid & ~show_pub & self.cpl.ready
        m.d.sync += imm_offered.eq(imm_valid & ~show_pub & ~self.cpl.ready)
        slot_freed = Signal(S)
        with m.If(self.pub_published.valid & self.pub_published.ready):
            m.d.comb += slot_freed.bit_select(pub.slot, 1).eq(1)
            pk, pt = pub_kind, pub_tx
            m.d.comb += [txs.free_which.eq(pt), txs.doom_which.eq(pt),
                         txs.doom_no_page.eq(slot_nopage.bit_select(pub.slot, 1))]
            with m.If((pk == K.COMMIT) | (pk == K.ABORT) | ((pk == K.TX) & slot_final.bit_select(pub.slot, 1))):
                m.d.comb += txs.free.eq(1)
            with m.Elif((pk == K.TX) & pub.dropped):
                m.d.comb += txs.doom.eq(1)
            # a dropped append: the publisher frees its entries (and then the slot)
            m.d.comb += [apps.dropped.eq((pk == K.APPEND) & pub.dropped), apps.dropped_slot.eq(pt - T)]


        # -- the page port: the dispatcher (a whole group at a time) or the retry path
        issuing = Signal()
        disp_page = Signal.like(self.page.payload)
        disp_valid = Signal()
        retry_page = Signal.like(self.page.payload)
        retry_built, retry_held = Signal.like(self.page.payload), Signal.like(self.page.payload)
        retry_valid = Signal()
        m.d.comb += self.page_lock.eq(issuing)
        with m.If(issuing):
            m.d.comb += [self.page.payload.eq(disp_page), self.page.valid.eq(disp_valid)]
        with m.Else():
            m.d.comb += [self.page.payload.eq(retry_page), self.page.valid.eq(retry_valid)]

        def member_page(pg, slot, idx, kind, lba_base, buf_base, n, atomic_lba, atomic_buf, tid, triples, npages):
            """PAGE_WRITE of member ``idx`` of ``slot`` (comb); ``tid``: the OOB tid of a transaction's or an append's page."""
            o = pg.oob
            member_tag = Signal(Publisher.member_tag(self.slot_bits, self.idx_bits))
            m.d.comb += [member_tag.idx.eq(idx), member_tag.slot.eq(slot), pg.tag.eq(member_tag), o.kind.eq(Kind.DATA)]
            with m.Switch(kind):
                with m.Case(K.WRITE):
                    m.d.comb += [pg.mem_addr.eq(buf_base + idx * page_data), o.lba.eq(lba_base + idx),
                                 o.group_len.eq(1), o.flags.eq(COMMIT)]
                with m.Case(K.ATOMIC):
                    m.d.comb += [pg.mem_addr.eq(atomic_buf), o.lba.eq(atomic_lba), o.group_len.eq(n),
                                 o.group_idx.eq(idx), o.flags.eq(Mux(idx == n - 1, COMMIT, 0))]
                with m.Case(K.DESTAGE):     # a plain write of a cache page
                    m.d.comb += [pg.mem_addr.eq(atomic_buf), o.lba.eq(atomic_lba), o.group_len.eq(1),
                                 o.flags.eq(COMMIT)]
                with m.Case(K.TRIM):
                    m.d.comb += [pg.mem_addr.eq(self.scratch_base + slot * page_data), o.kind.eq(Kind.TRIM),
                                 o.group_len.eq(1), o.flags.eq(COMMIT), pg.record.eq(1), pg.rec_count.eq(1),
                                 pg.rec_total.eq(1)]
                with m.Case(K.TX):
                    rides = slot_final.bit_select(slot, 1) & (idx == n - 1)
                    m.d.comb += [pg.mem_addr.eq(buf_base + idx * page_data), o.lba.eq(lba_base + idx),
                                 o.tid.eq(tid), o.flags.eq(Mux(rides, TX_FINAL_PAGE, TX_PAGE)),
                                 o.group_len.eq(Mux(rides, npages, 0))]
                with m.Case(K.COMMIT):
                    m.d.comb += [pg.mem_addr.eq(self.scratch_base + slot * page_data), o.kind.eq(Kind.COMMIT),
                                 o.group_len.eq(1), o.flags.eq(COMMIT), o.tid.eq(tid), pg.record.eq(1),
                                 pg.rec_count.eq(1), pg.rec_total.eq(1)]
                with m.Case(K.APPEND):
                    m.d.comb += [pg.mem_addr.eq(buf_base + idx * page_data), o.kind.eq(Kind.APPEND),
                                 o.tid.eq(tid), o.flags.eq(APPEND_PAGE), o.group_len.eq(n), o.group_idx.eq(idx)]
                with m.Case(K.REMAP):
                    m.d.comb += [pg.mem_addr.eq(self.scratch_base + slot * page_data), o.kind.eq(Kind.REMAP),
                                 o.group_len.eq(1), o.flags.eq(COMMIT), pg.record.eq(1),
                                 pg.rec_count.eq(triples), pg.rec_total.eq(triples)]

        # -- retry path ------------------------------------------------------------
        # Retries are always taken into a FIFO: the log writer's completions must never
        # wait for the page port, which a group being issued holds (that would deadlock).
        # Program failures are bounded by the slots in flight, so the FIFO holds them all;
        # no-page completions are not (each comes back at once, a group may have 64), so
        # one to be given up leaves the FIFO even while a group is issued: giving up needs
        # no page port.
        rt = Signal.like(self.pub_retry.payload)
        retry_width = len(self.pub_retry.payload.as_value())
        m.submodules.retries = retries = fifo.SyncFIFOBuffered(width=retry_width, depth=self.retry_depth)
        m.d.comb += [retries.w_data.eq(self.pub_retry.payload.as_value()), retries.w_en.eq(self.pub_retry.valid),
                     self.pub_retry.ready.eq(retries.w_rdy)]
        m.d.comb += mem_r2.addr.eq(maddr(rt.slot, rt.idx))

        def gives_up(slot):
            return ((slot_fails[slot] >= self.max_retries) | slot_xfer.bit_select(slot, 1)
                    | slot_nopage.bit_select(slot, 1))

        retry_idle = Signal()
        rt_kind = slot_kind.read(rt.slot)
        m.d.comb += txs.peek.eq(slot_tx.read(rt.slot))
        with m.FSM(name="retry"):
            with m.State("WAIT_FOR_A_RETRY"):
                # taken whatever it holds: deciding from the FIFO's head (a slot table read) was in
                # front of the FIFO's own read, across the die when placed
                m.d.comb += retry_idle.eq(1)
                with m.If(retries.r_rdy):
                    m.d.comb += retries.r_en.eq(1)
                    m.d.sync += rt.eq(retries.r_data)
                    m.next = "WAIT_FOR_THE_PAGE_PORT"
            with m.State("WAIT_FOR_THE_PAGE_PORT"):
                # a group being issued holds the port; giving up needs none
                with m.If(~issuing | gives_up(rt.slot)):
                    m.next = "RETRY_OR_GIVE_UP"
            with m.State("RETRY_OR_GIVE_UP"):
                fails = slot_fails[rt.slot]
                with m.If(gives_up(rt.slot)):
                    m.next = "GIVE_THE_MEMBER_UP"
                with m.Else():
                    m.d.sync += fails.eq(fails + 1)
                    m.next = "BUILD_THE_PAGE_AGAIN"
            with m.State("BUILD_THE_PAGE_AGAIN"):
                # the page request is built into registers first: the slot's tables and the member's
                # list entry, then the log port and the log writer behind it, were one long path
                rt_lba = slot_lba.read(rt.slot)
                member_page(retry_built, rt.slot, rt.idx, rt_kind, rt_lba, slot_buf.read(rt.slot),
                            slot_n.read(rt.slot), mem_r2.data.lba, mem_r2.data.buf,
                            Mux(rt_kind == K.APPEND, slot_tag.read(rt.slot), txs.peek_first[:32]),
                            rt_lba, slot_npages.read(rt.slot))
                m.d.comb += [retry_built.keep_vseq.eq(1), retry_built.oob.vseq.eq(rt.vseq)]
                m.d.sync += retry_held.eq(retry_built)
                m.next = "ISSUE_THE_PAGE_AGAIN"
            with m.State("ISSUE_THE_PAGE_AGAIN"):
                m.d.comb += [retry_page.eq(retry_held), retry_valid.eq(1)]
                with m.If(self.page.ready & ~issuing):
                    m.next = "WAIT_FOR_A_RETRY"
            with m.State("GIVE_THE_MEMBER_UP"):
                m.d.comb += [self.pub_give_up.valid.eq(1), self.pub_give_up.payload.slot.eq(rt.slot),
                             self.pub_give_up.payload.idx.eq(rt.idx)]
                with m.If(self.pub_give_up.ready):
                    m.d.sync += slot_fails[rt.slot].eq(self.max_retries)
                    m.next = "WAIT_FOR_A_RETRY"

        # -- the dispatcher ----------------------------------------------------------
        c = Signal(layouts.CMD)
        sqid = Signal.like(self.cmd.payload.sqid)
        idx = Signal(self.idx_bits + 1)
        n = Signal(self.idx_bits + 1)
        kind = Signal(4)
        t = Signal(self.owner_bits)          # the command's transaction slot (or T + append slot)
        h = Signal(hbits)                    # the command's append slot
        app_gen = Signal(16)
        app_first_v = Signal(64)
        m.d.comb += [txs.tid.eq(c.tid), txs.owner.eq(sqid), txs.slot.eq(t), apps.mint_slot.eq(h),
                     apps.mint_gen.eq(app_gen), apps.mint_first.eq(app_first_v), apps.mint_nlb.eq(n),
                     apps.mint_owner.eq(sqid)]
        ntrip = Signal(range(R + 1))         # REMAP triples
        ti = Signal(range(R + 1))            # the triple being read / checked
        zero_bad, range_bad, tok_bad, len_bad = Signal(), Signal(), Signal(), Signal()
        seen = Signal(A)                     # append slots a REMAP names
        trip_a = Signal(trip_shape)          # the triple compared against
        lba_hi = Signal(32)
        new_tx = Signal()
        have = Signal(M)                     # TX_WRITE members whose LBA the transaction holds an entry for
        existing = Signal(self.idx_bits + 1)
        final = Signal()
        preq, presp = self.pending.req, self.pending.resp
        word = Signal(8)
        status = Signal(15)
        lo = Signal(32)              # the list entry's words as they arrive
        hi_bad = Signal()
        m.submodules.overlaps = overlaps = RangeOverlapChecker(max(M, R))   # duplicate LBAs, overlapping triples
        copy_word = Signal(32)
        token_good = Signal()                # a RELEASE's token names a live append of its queue
        m.d.comb += [mem_r.addr.eq(maddr(tail, idx))]
        resume = Signal()                    # a destage made room for / drained ahead of the command in c
        if W:
            cw_resume = Signal()
            cw_idx = Signal.like(idx)
            # a destage group was dropped (no page, a failed program) since this command began to drain the
            # cache: its entries are DIRTY again, and draining on would destage them for ever on a drive out of
            # blocks; the command goes on and a FLUSH reports the failure (cache.failed)
            drain_dropped = Signal()
            with m.If(cache.published & cache.published_dropped):
                m.d.sync += drain_dropped.eq(1)

        # an immediate completion's status is kept first, and the completion built from it a cycle later:
        # thirty states finish a command, and the completion's register behind all their conditions was
        # one long path from each of them
        imm_status = Signal.like(imm.status)

        def finish(code):
            m.d.sync += imm_status.eq(code)
            m.next = "BUILD_THE_IMMEDIATE_COMPLETION"

        bus = self.bus
        record_body = (self.scratch_base + tail * page_data + spec.REC_HDR.size) >> 2   # the tail slot's record, after its header

        def write_info_page(page):
            """Hand the page to the info-page writer (idle while the dispatcher waits for it)."""
            m.d.comb += [self.info_job.valid.eq(1), self.info_job.payload.page.eq(page),
                         self.info_job.payload.buf.eq(c.buf[:32]), self.info_job.payload.seq.eq(self.page_seq),
                         self.info_job.payload.viewer.eq(sqid), self.info_job.payload.all.eq(sqid == self.queue_pairs - 1)]
            with m.If(self.info_job.ready):
                m.next = "WAIT_FOR_THE_INFO_PAGE"

        with m.FSM(name="dispatch"):
            with m.State("WAIT_FOR_A_COMMAND"):
                # the cache short of free pages with a stripe's worth dirty: destage the oldest stripe first
                m.d.comb += self.cmd.ready.eq(~watermark if W else 1)
                if W:
                    with m.If(watermark):
                        m.d.sync += resume.eq(0)
                        m.next = "TAKE_A_SLOT_FOR_A_DESTAGE"
                with m.If(self.cmd.valid & (~watermark if W else 1)):
                    m.d.sync += [c.eq(self.cmd.payload.cmd), sqid.eq(self.cmd.payload.sqid), idx.eq(0),
                                 word.eq(0), status.eq(Status.SUCCESS), hi_bad.eq(0), final.eq(0)]
                    if W:
                        m.d.sync += drain_dropped.eq(0)
                    m.next = "DRAIN_THE_CACHE_BEFORE_A_BINDING_COMMAND" if W else "DECODE"
            if W:
                # a command that binds the map (or a FUA write) first drains the cache: every DIRTY entry
                # into destage groups ahead of its own slot, so ring order puts buffered data before it
                with m.State("DRAIN_THE_CACHE_BEFORE_A_BINDING_COMMAND"):
                    op = c.opcode
                    fence = ((op == Opcode.FLUSH) | (op == Opcode.ATOMIC_WRITE) | (op == Opcode.DEALLOCATE) |
                             (op == Opcode.TX_COMMIT) | (op == Opcode.REMAP) |
                             ((op == Opcode.HINT) & (c.hint == Hint.CHECKPOINT)) |
                             ((op == Opcode.TX_WRITE) & c.flags.tx_final) | ((op == Opcode.WRITE) & c.flags.fua))
                    with m.If(fence & (cache.dirty != 0) & ~drain_dropped):
                        m.d.sync += resume.eq(1)
                        m.next = "TAKE_A_SLOT_FOR_A_DESTAGE"
                    with m.Else():
                        m.next = "DECODE"
                with m.State("RESUME_THE_COMMAND_AFTER_A_DESTAGE"):
                    with m.If(cw_resume):          # a WRITE in the middle of its pages
                        m.d.sync += [idx.eq(cw_idx), n.eq(c.nlb), cw_resume.eq(0)]
                        m.next = "FIND_A_CACHE_PAGE"
                    with m.Else():
                        m.d.sync += [idx.eq(0), word.eq(0), status.eq(Status.SUCCESS), hi_bad.eq(0), final.eq(0)]
                        m.next = "DRAIN_THE_CACHE_BEFORE_A_BINDING_COMMAND"

                # WRITE into the cache, page by page: a fresh page is filled from the host's buffer, then it
                # becomes the LBA's entry and the DIRTY one it replaces (if any) is freed -- coalesced
                with m.State("FIND_A_CACHE_PAGE"):
                    m.d.comb += cache.find_lba.eq(c.lba + idx)
                    with m.If(watermark):
                        m.d.sync += [resume.eq(1), cw_resume.eq(1), cw_idx.eq(idx)]
                        m.next = "TAKE_A_SLOT_FOR_A_DESTAGE"
                    with m.Elif(~cache.has_free):
                        pass                       # stripes in flight will free pages (else the watermark)
                    with m.Else():
                        m.d.comb += cache.claim.eq(1)
                        m.next = "LOCK_THE_CACHE_PAGES"
                with m.State("LOCK_THE_CACHE_PAGES"):
                    m.d.comb += cache.lock_req.eq(1)
                    with m.If(cache.lock_granted):
                        m.next = "COPY_THE_HOST_PAGE_INTO_IT"
                with m.State("COPY_THE_HOST_PAGE_INTO_IT"):
                    m.d.comb += [cache.lock_req.eq(1), self.copy.valid.eq(1),
                                 self.copy.payload.src.eq(c.buf[:32] + idx * page_data),
                                 self.copy.payload.dst.eq(cache.fill_addr),
                                 self.copy.payload.words.eq(page_data // 4)]
                    with m.If(self.copy.ready):
                        m.next = "WAIT_FOR_THE_COPY"
                with m.State("WAIT_FOR_THE_COPY"):
                    m.d.comb += [cache.lock_req.eq(1), self.copy_done.ready.eq(1)]
                    with m.If(self.copy_done.valid):
                        with m.Switch(self.copy_done.payload.error):
                            with m.Case(CopyError.READ):      # the host's buffer
                                m.d.comb += cache.fill_abort.eq(1)
                                finish(Status.DATA_TRANSFER_ERROR)
                            with m.Case(CopyError.WRITE):     # the cache page
                                m.d.comb += cache.fill_abort.eq(1)
                                finish(Status.INTERNAL_ERROR)
                            with m.Default():
                                m.next = "MAKE_THE_CACHE_PAGE_DIRTY"
                with m.State("MAKE_THE_CACHE_PAGE_DIRTY"):
                    m.d.comb += cache.fill_done.eq(1)
                    m.d.sync += idx.eq(idx + 1)
                    with m.If(idx + 1 == n):
                        finish(Status.SUCCESS)
                    with m.Else():
                        m.next = "FIND_A_CACHE_PAGE"

                # a destage group: up to a stripe of the oldest DIRTY entries as plain-write members (lba, page)
                with m.State("TAKE_A_SLOT_FOR_A_DESTAGE"):
                    with m.If(~busy.bit_select(tail, 1)):
                        m.d.comb += slot_kind.write(K.DESTAGE) + slot_tx.write(0)
                        m.d.sync += [slot_fails[tail].eq(0), slot_final.bit_select(tail, 1).eq(0), kind.eq(K.DESTAGE),
                                     idx.eq(0)]
                        m.next = "FIND_THE_OLDEST_DIRTY_PAGE"
                with m.State("FIND_THE_OLDEST_DIRTY_PAGE"):
                    m.d.comb += cache.scan.eq(1)
                    with m.If(cache.scan_last):
                        m.next = "ADD_IT_TO_THE_DESTAGE"
                with m.State("ADD_IT_TO_THE_DESTAGE"):
                    with m.If(cache.oldest_found):
                        m.d.comb += [mem_w.addr.eq(maddr(tail, idx)), mem_w.data.lba.eq(cache.oldest_lba),
                                     mem_w.data.buf.eq(cache.oldest_addr), mem_w.en.eq(1),
                                     cache.take.eq(1), cache.take_slot.eq(tail)]
                        m.d.sync += idx.eq(idx + 1)
                        with m.If(idx + 1 == self.stripe):
                            m.next = "CLOSE_THE_DESTAGE_GROUP"
                        with m.Else():
                            m.next = "FIND_THE_OLDEST_DIRTY_PAGE"
                    with m.Else():
                        m.next = "CLOSE_THE_DESTAGE_GROUP"
                with m.State("CLOSE_THE_DESTAGE_GROUP"):
                    m.d.comb += [cache.group_done.eq(1), cache.group_pages.eq(idx)]
                    m.d.comb += slot_n.write(idx)
                    m.d.sync += [n.eq(idx), idx.eq(0)]
                    with m.If(idx == 0):
                        m.next = "RESUME_THE_COMMAND_AFTER_A_DESTAGE"      # nothing dirty after all (not reached: callers check)
                    with m.Else():
                        m.next = "NEXT_MEMBER_LBA"
            with m.State("DECODE"):
                new_data = ((c.opcode == Opcode.WRITE) | (c.opcode == Opcode.ATOMIC_WRITE) |
                            (c.opcode == Opcode.TX_WRITE) | (c.opcode == Opcode.APPEND))
                with m.If(self.no_space & new_data):
                    finish(Status.NO_SPACE)   # nothing taken yet: no slot, transaction, append or cache page
                with m.Else():
                    with m.Switch(c.opcode):
                        with m.Case(Opcode.WRITE):
                            m.d.sync += [kind.eq(K.WRITE), n.eq(c.nlb)]
                            m.next = "WAIT_FOR_THE_NEXT_SLOT"
                            if W:
                                with m.If(~c.flags.fua):        # FUA writes through (after the drain)
                                    m.next = "FIND_A_CACHE_PAGE"
                        with m.Case(Opcode.ATOMIC_WRITE):
                            m.d.sync += [kind.eq(K.ATOMIC), n.eq(c.nlist)]
                            m.next = "WAIT_FOR_THE_NEXT_SLOT"
                        with m.Case(Opcode.DEALLOCATE):
                            m.d.sync += [kind.eq(K.TRIM), n.eq(1)]
                            m.next = "WAIT_FOR_THE_NEXT_SLOT"
                        with m.Case(Opcode.FLUSH):
                            m.d.sync += [kind.eq(K.FLUSH), n.eq(0)]
                            m.next = "WAIT_FOR_THE_NEXT_SLOT"
                        with m.Case(Opcode.HINT):
                            with m.If(c.hint == Hint.CHECKPOINT):
                                m.d.sync += [kind.eq(K.FLUSH), n.eq(0)]
                                m.next = "WAIT_FOR_THE_NEXT_SLOT"
                            with m.Else():
                                finish(Status.SUCCESS)
                        with m.Case(Opcode.READ):
                            m.next = "HAND_THE_READ_TO_THE_READER"
                        with m.Case(Opcode.IDENTIFY):
                            write_info_page(InfoPage.IDENTIFY)
                        with m.Case(Opcode.GET_LOG):
                            with m.If(c.log_page == LogPage.OPEN):
                                write_info_page(InfoPage.OPEN)
                            with m.Elif(c.log_page == LogPage.SNAPSHOT):
                                with m.If(sqid == self.queue_pairs - 1):
                                    m.next = "SNAPSHOT_WAIT_FOR_EARLIER_GROUPS"
                                with m.Else():
                                    finish(Status.INVALID_FIELD)   # a host may not see other queues' state
                            with m.Else():
                                write_info_page(InfoPage.RECORD)
                        with m.Case(Opcode.TX_WRITE):
                            m.d.sync += [kind.eq(K.TX), n.eq(c.nlb), final.eq(c.flags.tx_final)]
                            m.next = "FIND_THE_TRANSACTION"
                        with m.Case(Opcode.TX_READ):
                            m.next = "FIND_THE_TRANSACTION"
                        with m.Case(Opcode.TX_COMMIT):
                            m.d.sync += [kind.eq(K.COMMIT), n.eq(1), final.eq(0)]
                            m.next = "FIND_THE_TRANSACTION"
                        with m.Case(Opcode.TX_ABORT):
                            m.d.sync += [kind.eq(K.ABORT), n.eq(0), final.eq(0)]
                            m.next = "FIND_THE_TRANSACTION"
                        with m.Case(Opcode.APPEND):
                            m.d.sync += [kind.eq(K.APPEND), n.eq(c.nlb)]
                            m.next = "FIND_A_FREE_APPEND_SLOT"
                        with m.Case(Opcode.RELEASE):
                            m.d.sync += [kind.eq(K.RELEASE), n.eq(0)]
                            m.next = "READ_THE_RELEASED_TOKENS_SLOT"
                        with m.Case(Opcode.REMAP):
                            m.d.sync += [kind.eq(K.REMAP), n.eq(1), ntrip.eq(c.nlist), ti.eq(0), zero_bad.eq(0),
                                         range_bad.eq(0), tok_bad.eq(0), len_bad.eq(0), seen.eq(0)]
                            m.next = "READ_THE_REMAP_TRIPLES"
                        with m.Default():
                            finish(Status.INVALID_OPCODE)
            with m.State("BUILD_THE_IMMEDIATE_COMPLETION"):
                m.d.sync += [imm.sqid.eq(sqid), imm.cid.eq(c.cid), imm.status.eq(imm_status), imm.result.eq(0),
                             imm_valid.eq(1)]
                m.next = "POST_THE_IMMEDIATE_COMPLETION"
            with m.State("POST_THE_IMMEDIATE_COMPLETION"):
                with m.If(imm_taken):
                    m.d.sync += imm_valid.eq(0)
                    m.next = "WAIT_FOR_A_COMMAND"

            # READ: to the reader's queue
            with m.State("HAND_THE_READ_TO_THE_READER"):
                r = self.read.payload
                m.d.comb += [r.sqid.eq(sqid), r.cid.eq(c.cid), r.lba.eq(c.lba), r.nlb.eq(c.nlb),
                             r.buf.eq(c.buf), r.tx.eq(c.opcode == Opcode.TX_READ), self.read.valid.eq(1)]
                with m.If(self.read.ready):
                    m.next = "WAIT_FOR_A_COMMAND"

            # IDENTIFY / GET_LOG: the info-page writer writes the page; the tables it reads hold still
            # meanwhile.  SNAPSHOT first waits until every earlier group is published: nothing is then in
            # flight, so the tables and the log's next seq agree (a checkpoint records them: firmware/pending.h)
            with m.State("SNAPSHOT_WAIT_FOR_EARLIER_GROUPS"):
                with m.If(busy == 0):
                    write_info_page(InfoPage.SNAPSHOT)
            with m.State("WAIT_FOR_THE_INFO_PAGE"):
                m.d.comb += self.info_done.ready.eq(1)
                with m.If(self.info_done.valid):
                    finish(self.info_done.payload.status)

            # transactions: find the tid's slot (or a free one for a first TX_WRITE)
            with m.State("FIND_THE_TRANSACTION"):
                found, ft = txs.found, txs.found_slot
                with m.If(found & (c.opcode == Opcode.TX_WRITE) & c.flags.tx_new):
                    finish(Status.TID_IN_USE)        # someone else's transaction: nothing changes
                with m.Elif(found):
                    m.d.sync += [t.eq(ft), new_tx.eq(0)]
                    with m.Switch(c.opcode):
                        with m.Case(Opcode.TX_WRITE):
                            with m.If(c.flags.tx_final & (txs.found_npages + c.nlb > spec.LOG.TX_FINAL_MAX_PAGES)):
                                finish(Status.INVALID_FIELD)
                            with m.Else():
                                m.next = "WAIT_FOR_THE_NEXT_SLOT"
                        with m.Case(Opcode.TX_READ):
                            m.next = "CLAIM_THE_OVERRIDE_TABLE"
                        with m.Case(Opcode.TX_COMMIT):
                            with m.If(txs.doomed.bit_select(ft, 1)):
                                m.d.sync += n.eq(0)      # no record: the publisher aborts it (MEDIA_ERROR/NO_SPACE)
                            m.next = "WAIT_FOR_THE_NEXT_SLOT"
                        with m.Default():
                            m.next = "WAIT_FOR_THE_NEXT_SLOT"
                with m.Elif(c.opcode != Opcode.TX_WRITE):
                    finish(Status.UNKNOWN_TX)
                with m.Elif(txs.has_free):
                    m.d.sync += [t.eq(txs.free_slot), new_tx.eq(1)]
                    m.next = "WAIT_FOR_THE_NEXT_SLOT"
                with m.Elif(~txs.closing):
                    finish(Status.TOO_MANY_OPEN_TX)
                # else: wait for a closing transaction to free its slot

            # TX_READ: the transaction's staged pages into the reader's override table, then the READ
            with m.State("CLAIM_THE_OVERRIDE_TABLE"):
                with m.If(~self.overrides.busy):
                    m.d.comb += self.overrides.claim.eq(1)
                    m.next = "ASK_FOR_THE_STAGED_PAGES"
            with m.State("ASK_FOR_THE_STAGED_PAGES"):
                m.d.comb += [preq.valid.eq(1), preq.payload.op.eq(PendingOp.SCAN), preq.payload.owner.eq(t),
                             preq.payload.lba.eq(c.lba), preq.payload.nlb.eq(c.nlb)]
                with m.If(preq.ready):
                    m.next = "FILL_THE_OVERRIDE_TABLE"
            with m.State("FILL_THE_OVERRIDE_TABLE"):
                m.d.comb += [presp.ready.eq(1), self.overrides.idx.eq(presp.payload.idx),
                             self.overrides.ppa.eq(presp.payload.ppa)]
                with m.If(presp.valid):
                    with m.If(presp.payload.last):
                        m.next = "HAND_THE_READ_TO_THE_READER"
                    with m.Elif(presp.payload.ppa != spec.PPA_UNMAPPED):
                        m.d.comb += self.overrides.we.eq(1)

            # APPEND: the lowest free append slot, room for its pages (waiting while work in flight may free some)
            with m.State("FIND_A_FREE_APPEND_SLOT"):
                with m.If(~self.token_key_ready):
                    with m.If(self.token_key_failed):
                        finish(Status.NOT_READY)      # no key to mint under: no token may be issued
                with m.Elif(apps.has_free & (self.pending_free >= n)):
                    m.d.sync += [h.eq(apps.free_slot), t.eq(T + apps.free_slot)]
                    m.next = "WAIT_FOR_THE_NEXT_SLOT"
                with m.Elif(busy == 0):
                    finish(Status.PENDING_FULL)
            with m.State("READ_THE_SLOTS_GENERATION"):
                m.d.comb += apps.read_addr.eq(h)
                m.next = "TAKE_THE_NEXT_GENERATION"
            with m.State("TAKE_THE_NEXT_GENERATION"):
                m.d.sync += [app_gen.eq(apps.next_gen), idx.eq(0),
                             have.eq(0), existing.eq(0)]
                m.next = "RESERVE_THE_NEW_ENTRIES"
            # after the pages: the token (check = the MAC of TOKEN_MAC_IN) and the slot's state
            with m.State("MINT_THE_TOKEN"):
                m.d.comb += apps.mint.eq(1)
                m.next = "WAIT_FOR_THE_TOKEN"
            with m.State("WAIT_FOR_THE_TOKEN"):
                with m.If(apps.minted):
                    m.d.comb += slot_result.write(apps.token)
                    m.d.sync += tail.eq(tail + 1)
                    m.next = "WAIT_FOR_A_COMMAND"

            # RELEASE: the token must name a live append
            with m.State("READ_THE_RELEASED_TOKENS_SLOT"):
                tok = Signal(layouts.TOKEN)
                m.d.comb += [tok.eq(c.token), apps.read_addr.eq(tok.handle[:hbits])]
                m.d.sync += [h.eq(tok.handle[:hbits]), t.eq(T + tok.handle[:hbits])]
                with m.If(tok.handle >= A):
                    finish(Status.INVALID_TOKEN)
                with m.Else():
                    m.next = "CHECK_THE_RELEASED_TOKEN"
            with m.State("CHECK_THE_RELEASED_TOKEN"):
                # the comparison is registered before the decision: the append table's read and the
                # compares behind it, then the completion's registers, were one path
                tok = Signal(layouts.TOKEN)
                m.d.comb += tok.eq(c.token)
                m.d.sync += token_good.eq(apps.live.bit_select(h, 1) & (apps.read_meta.gen == tok.gen) &
                                          (apps.read_meta.check == tok.check) & (apps.read_meta.owner == sqid))
                m.next = "ANSWER_THE_RELEASED_TOKENS_CHECK"
            with m.State("ANSWER_THE_RELEASED_TOKENS_CHECK"):
                with m.If(token_good):
                    m.next = "WAIT_FOR_THE_NEXT_SLOT"
                with m.Else():
                    finish(Status.INVALID_TOKEN)

            # REMAP: read the triples (6 words each), then check them all, in the model's order
            with m.State("READ_THE_REMAP_TRIPLES"):
                wishbone.word_access(m, bus, (c.list[:32] >> 2) + shift_add(ti, spec.REMAP_ENTRY.size // 4) + word)
                with m.If(bus.err):
                    finish(Status.DATA_TRANSFER_ERROR)
                with m.Elif(bus.ack):
                    d = bus.dat_r
                    m.d.sync += word.eq(word + 1)
                    with m.Switch(word[:3]):
                        with m.Case(0):
                            m.d.sync += trip_a.lba.eq(d)
                        with m.Case(1):
                            m.d.sync += lba_hi.eq(d)
                        with m.Case(2):
                            m.d.sync += [trip_a.handle.eq(d[:16]), trip_a.gen.eq(d[16:])]
                        with m.Case(3):
                            m.d.sync += trip_a.check.eq(d)
                        with m.Case(4):
                            m.d.sync += trip_a.nlb.eq(d)
                        with m.Case(5):
                            with m.If(trip_a.nlb == 0):
                                m.d.sync += zero_bad.eq(1)
                            with m.If((lba_hi != 0) | (Cat(trip_a.lba, Const(0, 32)) + trip_a.nlb > self.capacity)):
                                m.d.sync += range_bad.eq(1)
                            m.d.comb += [trip_w.addr.eq(ti), trip_w.data.eq(trip_a), trip_w.en.eq(1)]
                            m.d.sync += [word.eq(0), ti.eq(ti + 1)]
                            with m.If(ti + 1 == ntrip):
                                m.next = "CHECK_THE_TRIPLES_LENGTHS_AND_RANGES"
            with m.State("CHECK_THE_TRIPLES_LENGTHS_AND_RANGES"):
                with m.If(zero_bad):
                    finish(Status.ZERO_LENGTH)
                with m.Elif(range_bad):
                    finish(Status.LBA_OUT_OF_RANGE)
                with m.Else():
                    m.d.comb += overlaps.start.eq(1)
                    m.d.sync += ti.eq(0)
                    m.next = "CHECK_THE_TRIPLES_FOR_OVERLAPS"
            with m.State("CHECK_THE_TRIPLES_FOR_OVERLAPS"):
                m.d.comb += [overlaps.count.eq(ntrip), trip_r.addr.eq(overlaps.addr),
                             overlaps.lba.eq(trip_r.data.lba), overlaps.nlb.eq(trip_r.data.nlb)]
                with m.If(overlaps.done & overlaps.overlap):
                    finish(Status.DUPLICATE_LBA)
                with m.Elif(overlaps.done):
                    m.next = "ADDRESS_THE_NEXT_TRIPLES_TOKEN"
            # tokens: live, named once, the append's length
            with m.State("ADDRESS_THE_NEXT_TRIPLES_TOKEN"):
                m.d.comb += trip_r.addr.eq(ti)
                with m.If(ti == ntrip):
                    m.next = "ANSWER_THE_TOKEN_CHECKS"
                with m.Else():
                    m.next = "READ_ITS_APPEND_SLOT"
            with m.State("READ_ITS_APPEND_SLOT"):
                m.d.comb += [trip_r.addr.eq(ti), apps.read_addr.eq(trip_r.data.handle[:hbits])]
                m.d.sync += trip_a.eq(trip_r.data)
                m.next = "CHECK_ITS_TOKEN_AND_LENGTH"
            with m.State("CHECK_ITS_TOKEN_AND_LENGTH"):
                hh = trip_a.handle[:hbits]
                good = ((trip_a.handle < A) & apps.live.bit_select(hh, 1) & ~seen.bit_select(hh, 1) &
                        (apps.read_meta.gen == trip_a.gen) & (apps.read_meta.check == trip_a.check) &
                        (apps.read_meta.owner == sqid))
                with m.If(~good):
                    m.d.sync += tok_bad.eq(1)
                with m.Elif(apps.read_meta.nlb != trip_a.nlb):
                    m.d.sync += len_bad.eq(1)
                with m.If(trip_a.handle < A):
                    m.d.sync += seen.bit_select(hh, 1).eq(1)
                m.d.sync += ti.eq(ti + 1)
                m.next = "ADDRESS_THE_NEXT_TRIPLES_TOKEN"
            with m.State("ANSWER_THE_TOKEN_CHECKS"):
                with m.If(tok_bad):
                    finish(Status.INVALID_TOKEN)
                with m.Elif(len_bad):
                    finish(Status.REMAP_LENGTH)
                with m.Else():
                    m.next = "WAIT_FOR_THE_NEXT_SLOT"

            # a group: wait for the next slot in ring order
            with m.State("WAIT_FOR_THE_NEXT_SLOT"):
                with m.If(~busy.bit_select(tail, 1)):
                    m.d.comb += (slot_sqid.write(sqid) + slot_cid.write(c.cid) + slot_kind.write(kind) +
                                 slot_lba.write(c.lba) + slot_buf.write(c.buf) + slot_n.write(n) + slot_tx.write(t))
                    m.d.sync += [slot_fails[tail].eq(0), slot_final.bit_select(tail, 1).eq(final), have.eq(0),
                                 existing.eq(0)]
                    with m.If(kind == K.ATOMIC):
                        m.next = "READ_THE_ATOMIC_LIST"
                    with m.Elif(kind == K.TRIM):
                        m.next = "WRITE_THE_TRIM_RECORD_ENTRY"
                    with m.Elif((kind == K.TX) & new_tx):
                        m.next = "CHECK_THE_NEW_ENTRIES_FIT"
                    with m.Elif(kind == K.TX):
                        m.next = "ASK_FOR_THE_ENTRIES_THE_TRANSACTION_HOLDS"
                    with m.Elif((kind == K.COMMIT) & (n != 0)):
                        m.d.sync += word.eq(0)
                        m.next = "WRITE_THE_COMMIT_RECORD_BODY"
                    with m.Elif((kind == K.COMMIT) | (kind == K.ABORT)):
                        m.d.comb += txs.close.eq(1)
                        m.next = "NEXT_MEMBER_LBA"
                    with m.Elif(kind == K.APPEND):
                        m.next = "READ_THE_SLOTS_GENERATION"
                    with m.Elif(kind == K.RELEASE):
                        m.d.comb += [apps.consume.eq(1), apps.consume_slot.eq(h)]
                        m.next = "NEXT_MEMBER_LBA"
                    with m.Elif(kind == K.REMAP):
                        m.d.comb += slot_lba.write(ntrip)    # its record's triple count, over c.lba above
                        m.d.sync += [ti.eq(0), word.eq(0)]
                        m.next = "ADDRESS_THE_NEXT_TRIPLE_FOR_THE_RECORD"
                    with m.Else():
                        m.next = "NEXT_MEMBER_LBA"

            # REMAP accepted: the tokens are spent; each triple into the record (REMAP_REC_ENTRY after the header)
            # and to the publisher (lba, owner)
            with m.State("ADDRESS_THE_NEXT_TRIPLE_FOR_THE_RECORD"):
                m.d.comb += trip_r.addr.eq(ti)
                with m.If(ti == ntrip):
                    m.next = "OPEN_THE_GROUP"
                with m.Else():
                    m.next = "READ_ITS_FIRST_VSEQ"
            with m.State("READ_ITS_FIRST_VSEQ"):
                m.d.comb += [trip_r.addr.eq(ti), apps.read_addr.eq(trip_r.data.handle[:hbits])]
                m.d.sync += trip_a.eq(trip_r.data)
                m.next = "WRITE_ITS_RECORD_ENTRY"
            with m.State("WRITE_ITS_RECORD_ENTRY"):
                rec = Signal(layouts.REMAP_REC_ENTRY)
                m.d.comb += [rec.lba.eq(trip_a.lba), rec.first_vseq.eq(apps.read_first), rec.nlb.eq(trip_a.nlb),
                             apps.read_addr.eq(trip_a.handle[:hbits])]
                entry_words = spec.REMAP_REC_ENTRY.size // 4
                wishbone.word_access(m, bus, record_body + shift_add(ti, entry_words) + word,
                                      rec.as_value().word_select(word[:3], 32))
                with m.If(bus.err):
                    finish(Status.INTERNAL_ERROR)
                with m.Elif(bus.ack):
                    m.d.sync += word.eq(word + 1)
                    with m.If(word == entry_words - 1):
                        m.d.sync += word.eq(0)
                        m.d.comb += [apps.consume.eq(1), apps.consume_slot.eq(trip_a.handle[:hbits])]
                        m.next = "DECLARE_ITS_LBA_TO_THE_PUBLISHER"
            with m.State("DECLARE_ITS_LBA_TO_THE_PUBLISHER"):
                p = self.pub_member_lba.payload
                m.d.comb += [p.slot.eq(tail), p.idx.eq(ti), p.lba.eq(trip_a.lba), p.owner.eq(T + trip_a.handle[:hbits]),
                             self.pub_member_lba.valid.eq(1)]
                with m.If(self.pub_member_lba.ready):
                    m.d.sync += ti.eq(ti + 1)
                    m.next = "ADDRESS_THE_NEXT_TRIPLE_FOR_THE_RECORD"

            # TX_WRITE: the entries the transaction already holds for the range...
            with m.State("ASK_FOR_THE_ENTRIES_THE_TRANSACTION_HOLDS"):
                m.d.comb += [preq.valid.eq(1), preq.payload.op.eq(PendingOp.SCAN), preq.payload.owner.eq(t),
                             preq.payload.lba.eq(c.lba), preq.payload.nlb.eq(c.nlb)]
                with m.If(preq.ready):
                    m.next = "NOTE_THE_ENTRIES_IT_HOLDS"
            with m.State("NOTE_THE_ENTRIES_IT_HOLDS"):
                m.d.comb += presp.ready.eq(1)
                with m.If(presp.valid):
                    with m.If(presp.payload.last):
                        m.next = "CHECK_THE_NEW_ENTRIES_FIT"
                    with m.Else():
                        m.d.comb += [mem_w.addr.eq(maddr(tail, presp.payload.idx)),
                                     mem_w.data.lba.eq(presp.payload.entry), mem_w.en.eq(1)]
                        m.d.sync += [have.bit_select(presp.payload.idx[:self.idx_bits], 1).eq(1),
                                     existing.eq(existing + 1)]
            # ...whether the new ones fit (waiting while a closing transaction will free some)...
            with m.State("CHECK_THE_NEW_ENTRIES_FIT"):
                with m.If(self.pending_free >= n - existing):
                    with m.If(new_tx):
                        m.d.comb += txs.open.eq(1)
                    m.d.sync += idx.eq(0)
                    m.next = "RESERVE_THE_NEW_ENTRIES"
                with m.Elif(~txs.closing):
                    finish(Status.PENDING_FULL)
            # ...and the new entries reserved
            with m.State("RESERVE_THE_NEW_ENTRIES"):
                with m.If(idx == n):
                    m.d.sync += idx.eq(0)
                    with m.If(kind == K.TX):
                        m.d.comb += slot_npages.write(txs.npages + n)
                        m.d.comb += [txs.add_pages.eq(1), txs.pages.eq(n), txs.close.eq(final)]
                    m.next = "NEXT_MEMBER_LBA"
                with m.Elif(have.bit_select(idx[:self.idx_bits], 1)):
                    m.d.sync += idx.eq(idx + 1)
                with m.Else():
                    m.d.comb += [preq.valid.eq(1), preq.payload.op.eq(PendingOp.RESERVE), preq.payload.owner.eq(t),
                                 preq.payload.lba.eq(c.lba + idx)]
                    with m.If(preq.ready):
                        m.next = "NOTE_THE_RESERVED_ENTRY"
            with m.State("NOTE_THE_RESERVED_ENTRY"):
                m.d.comb += presp.ready.eq(1)
                with m.If(presp.valid):
                    m.d.comb += [mem_w.addr.eq(maddr(tail, idx)), mem_w.data.lba.eq(presp.payload.entry),
                                 mem_w.en.eq(1)]
                    m.d.sync += idx.eq(idx + 1)
                    m.next = "RESERVE_THE_NEW_ENTRIES"

            # TX_COMMIT: the COMMIT_BODY into the slot's scratch page after the header
            with m.State("WRITE_THE_COMMIT_RECORD_BODY"):
                body = Signal(layouts.COMMIT_BODY)
                m.d.comb += [body.first_vseq.eq(txs.first), body.npages.eq(txs.npages), body.tid.eq(c.tid)]
                wishbone.word_access(m, bus, record_body + word, body.as_value().word_select(word[:2], 32))
                with m.If(bus.err):
                    finish(Status.INTERNAL_ERROR)
                with m.Elif(bus.ack):
                    m.d.sync += word.eq(word + 1)
                    with m.If(word == spec.COMMIT_BODY.size // 4 - 1):
                        m.d.comb += txs.close.eq(1)
                        m.next = "NEXT_MEMBER_LBA"

            # ATOMIC_WRITE: read the list (4 words per entry), check each entry
            with m.State("READ_THE_ATOMIC_LIST"):
                wishbone.word_access(m, bus, (c.list[:32] >> 2) + Cat(word[:2], idx[:self.idx_bits]))
                with m.If(bus.err):
                    finish(Status.DATA_TRANSFER_ERROR)
                with m.Elif(bus.ack):
                    m.d.sync += word.eq(word + 1)
                    d = bus.dat_r
                    with m.Switch(word[:2]):
                        with m.Case(0):
                            m.d.sync += lo.eq(d)
                        with m.Case(1):      # lba = d:lo
                            with m.If((Cat(lo, d) >= self.capacity) & (status == Status.SUCCESS)):
                                m.d.sync += status.eq(Status.LBA_OUT_OF_RANGE)
                            m.d.sync += copy_word.eq(lo)     # the entry's lba until buf arrives
                        with m.Case(2):
                            m.d.sync += lo.eq(d)
                        with m.Case(3):      # buf = d:lo
                            with m.If(((lo[:2] != 0) | (d != 0)) & (status == Status.SUCCESS)):
                                m.d.sync += hi_bad.eq(1)
                            m.d.comb += [mem_w.addr.eq(maddr(tail, idx)), mem_w.data.lba.eq(copy_word),
                                         mem_w.data.buf.eq(lo), mem_w.en.eq(1)]
                            m.d.sync += idx.eq(idx + 1)
                            with m.If(idx + 1 == n):
                                m.next = "CHECK_THE_LISTS_RANGES_AND_BUFFERS"
            with m.State("CHECK_THE_LISTS_RANGES_AND_BUFFERS"):
                with m.If(status != Status.SUCCESS):
                    finish(status)
                with m.Elif(hi_bad):
                    finish(Status.MISALIGNED_BUFFER)
                with m.Else():
                    m.d.comb += overlaps.start.eq(1)
                    m.d.sync += idx.eq(0)
                    m.next = "CHECK_THE_ENTRIES_FOR_DUPLICATES"
            with m.State("CHECK_THE_ENTRIES_FOR_DUPLICATES"):
                m.d.comb += [overlaps.count.eq(n), mem_r.addr.eq(maddr(tail, overlaps.addr)),
                             overlaps.lba.eq(mem_r.data.lba), overlaps.nlb.eq(1)]
                with m.If(overlaps.done & overlaps.overlap):
                    finish(Status.DUPLICATE_LBA)
                with m.Elif(overlaps.done):
                    m.next = "NEXT_MEMBER_LBA"

            # DEALLOCATE: the TRIM entry into the slot's scratch page after the header
            with m.State("WRITE_THE_TRIM_RECORD_ENTRY"):
                entry = Signal(layouts.TRIM_REC_ENTRY)
                m.d.comb += [entry.lba.eq(c.lba), entry.nlb.eq(c.nlb)]
                wishbone.word_access(m, bus, record_body + word, entry.as_value().word_select(word[:2], 32))
                with m.If(bus.err):
                    finish(Status.INTERNAL_ERROR)
                with m.Elif(bus.ack):
                    m.d.sync += word.eq(word + 1)
                    with m.If(word == spec.TRIM_REC_ENTRY.size // 4 - 1):
                        m.next = "NEXT_MEMBER_LBA"

            # the group's member LBAs, then its open
            with m.State("NEXT_MEMBER_LBA"):
                with m.If(idx == n):
                    m.next = "OPEN_THE_GROUP"
                with m.Else():
                    m.next = "DECLARE_A_MEMBER_LBA"
            with m.State("DECLARE_A_MEMBER_LBA"):
                # mem_r shows member idx of the tail slot (atomic)
                p = self.pub_member_lba.payload
                m.d.comb += [p.slot.eq(tail), p.idx.eq(idx), self.pub_member_lba.valid.eq(1),
                             p.lba.eq(Mux((kind == K.ATOMIC) | (kind == K.TX) | (kind == K.APPEND) |
                                          (kind == K.DESTAGE), mem_r.data.lba,
                                          c.lba + idx))]
                with m.If(self.pub_member_lba.ready):
                    m.d.sync += idx.eq(idx + 1)
                    m.next = "NEXT_MEMBER_LBA"
            with m.State("OPEN_THE_GROUP"):
                o = self.pub_open.payload
                # a doomed transaction's commit (no record, so no member to find no page) answers as its write did
                m.d.comb += [o.slot.eq(tail), o.count.eq(n), o.trim_nlb.eq(Mux(kind == K.TRIM, c.nlb, 0)),
                             o.owner.eq(t), o.no_page.eq((kind == K.COMMIT) & (n == 0) & txs.doomed_no_page),
                             self.pub_open.valid.eq(1)]
                with m.Switch(kind):
                    with m.Case(K.TX):
                        m.d.comb += [o.mode.eq(MemberMode.STAGE), o.walk.eq(Mux(final, Walk.COMMIT, Walk.NONE))]
                    with m.Case(K.COMMIT):
                        m.d.comb += [o.mode.eq(MemberMode.NONE), o.walk.eq(Walk.COMMIT)]
                    with m.Case(K.ABORT, K.RELEASE):
                        m.d.comb += [o.mode.eq(MemberMode.NONE), o.walk.eq(Walk.ABORT)]
                    with m.Case(K.APPEND):
                        m.d.comb += [o.mode.eq(MemberMode.STAGE), o.walk.eq(Walk.ABORT_IF_DROPPED)]
                    with m.Case(K.REMAP):
                        m.d.comb += [o.mode.eq(MemberMode.NONE), o.walk.eq(Walk.REMAP), o.trim_nlb.eq(ntrip)]
                with m.If(self.pub_open.ready):
                    m.d.sync += [busy.bit_select(tail, 1).eq(1), idx.eq(0)]
                    m.next = "WAIT_FOR_THE_RETRIES_TO_DRAIN"
            # members to the log writer back to back (the retry path waits meanwhile)
            with m.State("WAIT_FOR_THE_RETRIES_TO_DRAIN"):
                with m.If(idx == n):
                    m.d.sync += tail.eq(tail + 1)
                    m.next = "WAIT_FOR_A_COMMAND"
                    if W:
                        with m.If((kind == K.DESTAGE) & resume):
                            m.next = "RESUME_THE_COMMAND_AFTER_A_DESTAGE"
                with m.Elif(retry_idle & ~retries.r_rdy):
                    m.next = "ISSUE_A_MEMBER_PAGE"
            with m.State("ISSUE_A_MEMBER_PAGE"):
                m.d.comb += issuing.eq(1)
                first_page = Mux(kind == K.APPEND, idx == 0, ~txs.started)
                member_page(disp_page, tail, idx, kind, c.lba, c.buf, n, mem_r.data.lba, mem_r.data.buf,
                            Mux(first_page, self.page_seq[:32],
                                Mux(kind == K.APPEND, app_first_v[:32], txs.first[:32])), ntrip,
                            slot_npages.read(tail))
                m.d.comb += disp_valid.eq(1)
                with m.If(self.page.ready):
                    with m.If((kind == K.TX) & first_page):
                        m.d.comb += [txs.start.eq(1), txs.first_vseq.eq(self.page_seq)]
                    with m.If((kind == K.APPEND) & first_page):
                        # held from now on: a checkpoint's floor must stay at or below this page
                        m.d.comb += [apps.hold.eq(1), apps.hold_slot.eq(h), apps.hold_first.eq(self.page_seq)]
                        m.d.sync += app_first_v.eq(self.page_seq)
                        m.d.comb += slot_tag.write(self.page_seq[:32])
                    m.d.sync += idx.eq(idx + 1)
                    with m.If((idx + 1 == n) & (kind == K.APPEND)):
                        m.next = "MINT_THE_TOKEN"
                    with m.Elif(idx + 1 == n):
                        m.d.sync += tail.eq(tail + 1)
                        m.next = "WAIT_FOR_A_COMMAND"
                        if W:
                            with m.If((kind == K.DESTAGE) & resume):
                                m.next = "RESUME_THE_COMMAND_AFTER_A_DESTAGE"      # back to the command the destage made room for
                    with m.Else():
                        m.next = "READ_THE_NEXT_MEMBER"
            with m.State("READ_THE_NEXT_MEMBER"):
                # one cycle for mem_r to show the next member
                m.d.comb += issuing.eq(1)
                m.next = "ISSUE_A_MEMBER_PAGE"

        # slot bookkeeping (after the FSMs: a slot freed and retaken in one cycle cannot happen,
        # the dispatcher waits for ~busy first)
        for s in range(S):
            with m.If(slot_freed[s]):
                m.d.sync += busy[s].eq(0)
        if W:
            fired = self.pub_published.valid & self.pub_published.ready
            m.d.comb += [cache.published.eq(fired & pub_destage), cache.published_slot.eq(pub.slot),
                         cache.published_dropped.eq(pub.dropped),
                         cache.published_no_page.eq(slot_nopage.bit_select(pub.slot, 1)),
                         cache.failure_reported.eq(fired & (pub_kind == K.FLUSH))]
        return m
