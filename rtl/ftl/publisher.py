"""Publisher: a group's bindings reach the map only when every member is on flash.

This is the gateware half of the commit-flag log's promise (``docs/ftl.md``,
"Commit point after durability"): the pages of an atomic group -- or of a
plain multi-page write, whose groups have one member each -- are programmed
in any order on any dies, and the L2P map must not point at any of them until
*all* of them are programmed successfully.  Until then reads see the old
data, GC keeps it (the map still points at it), and a power cut leaves
nothing half-visible (recovery proves the group complete from the OOB
records, ``atomflash.model.recover``).

For each command slot the executor declares the member LBAs
(``member_lba``) and the group size (``open``); the log writer's completions
of its pages come in as ``member``, straight from the log port (the page's
tag is ``member_tag``: slot and index).  The publisher notes, per slot,
whether a member's host buffer gave a bus error (``transfer_error``) or the
log writer found no page for it (``no_page``): the executor gives such a group
up rather than retry it, and answers DATA_TRANSFER_ERROR or NO_SPACE.  A
member that failed to program is sent back on
``retry`` with the version it was stamped with (the executor re-issues it on a
fresh page keeping that vseq, so the group's versions stay first..first+N-1);
a member the executor stops retrying comes back as ``give_up`` and the group
is dropped, never half-applied.

Slots are opened and published **in ring order** (slot 0, 1, ..., slots-1,
0, ...): the publisher binds the oldest open group once all its members are
programmed, so for every LBA the map follows command order ("commit order
decides", ``docs/model.md``) with no LBA hazard table, and a group opened with
no members (FLUSH) is published once everything before it is.  Publishing a
group walks its members in index order: ``MapCache.WRITE(lba, ppa)`` returns
the previous binding, and the ``BlockTable`` gets the rebind (old -> new) so
valid-page counts follow.  The map port is held (``map_lock``/``map_grant``)
for the whole group, so a reader holding it for its lookups sees either none
or all of a group.  Then ``published`` names the slot, and the executor
completes the host command.

A **trim** is a group whose one member is its TRIM record page and whose
``open`` carries ``trim_nlb``: once the record is programmed and the slot is
the oldest, the publisher unbinds ``trim_nlb`` LBAs from member 0's LBA on
(``MapCache.WRITE`` of ``PPA_UNMAPPED``, rebind old -> unmapped) instead of
binding the record page.

**Transactions** (``mode`` and ``walk`` in ``open``, ``owner`` its transaction
slot; the :class:`~rtl.ftl.pending.PendingTable` holds the staged bindings):

* ``mode = STAGE`` (TX_WRITE): each member's "LBA" is its pending-table entry;
  publishing *stages* it (``STAGE`` entry := the new page) and rebinds the
  version it supersedes (old staged page or none -> new), so GC counts a
  staged page as live while the map still names the committed data;
* ``mode = NONE``: the members (a COMMIT record page) are programmed but bind
  nothing;
* ``walk = COMMIT`` (TX_COMMIT, or a TX_WRITE marked final, after its members):
  with the map port held, every entry of ``owner`` is bound
  (``MapCache.WRITE``, rebind old -> none: the staged page was already
  counted) and freed -- the whole transaction becomes visible at once;
* ``walk = ABORT`` (TX_ABORT): every entry of ``owner`` is freed and its page
  rebound to none.  A COMMIT walk becomes an ABORT walk when the group was
  dropped or the executor marked the transaction ``doomed`` (one of its
  writes was dropped), and the slot is reported ``dropped``.

**Appends and remaps** use the same table, with owners ``max_open_tx`` and up
(one per append slot): an APPEND stages like a TX_WRITE (each entry's "lba"
is the page's index in the append; ``walk = ABORT_IF_DROPPED`` frees them if
the append failed); a RELEASE is an ABORT walk; a REMAP (``walk = REMAP``,
its one member the REMAP record page) walks, with the map port held
throughout, the ``trim_nlb`` triples declared as member LBAs (``lba`` =
where the append's pages go, ``owner`` = its slot), binding entry i at
lba + i.  After every walk ``freed`` names its owner, so the executor can
reuse the append slot (or transaction slot).
"""

from amaranth import Array, Cat, Module, Mux, Signal
from amaranth.lib import data, memory, stream, wiring
from amaranth.lib.wiring import In, Out
from amaranth.utils import ceil_log2, exact_log2

from atomflash import spec
from atomflash.spec import NandResult

from .blocktable import REBIND
from .logwriter import PAGE_DONE
from .mapcache import RESPONSE, MapOp, request_layout
from .pending import PendingOp, PendingUserSignature

__all__ = ["Publisher", "MemberMode", "Walk"]


class MemberMode:
    """What publishing does with a group's members."""
    BIND, STAGE, NONE = range(3)


class Walk:
    """What publishing does with pending entries after the members."""
    NONE, COMMIT, ABORT, REMAP, ABORT_IF_DROPPED = range(5)


class Publisher(wiring.Component):
    """Holds each group's members until all are programmed, then binds them.

    Parameters
    ----------
    slots : int
        Command slots (a power of two).
    max_members : int
        Largest group (``spec.LIMITS.MAX_ATOMIC_PAGES``; a power of two).
    lba_bits : int

    Ports
    -----
    member_lba : In(stream {slot, idx, lba, owner})
        Member ``idx`` of the slot's group binds ``lba`` (a REMAP's triple ``idx``: ``owner``'s pages at ``lba``).
    open : In(stream {slot, count, trim_nlb, mode, walk, owner, no_page})
        The slot's group has ``count`` (0..max_members) members; send it
        after its member LBAs and before its first ``member``, slots in ring
        order.  ``trim_nlb`` != 0: a trim; ``mode`` (``MemberMode``),
        ``walk`` (``Walk``), ``owner``: transactions (see above);
        ``no_page``: the slot's ``no_page`` starts set.
    member : In(stream of PAGE_DONE)
        The log writer's completion for a member (tag ``member_tag``; ``NandResult``).
    transfer_error, no_page : Out(slots)
        Per slot since its ``open``: a member's host buffer gave a bus error / the log
        writer found no page for a member.
    give_up : In(stream {slot, idx})
        The executor will not retry this failed member: the group is dropped.
    retry : Out(stream {slot, idx, vseq})
        A member whose program failed; re-issue it with this vseq.
    map_lock : Out(1) / map_grant : In(1)
        Ownership of the map port for a whole group.
    map_req : Out(stream of MapCache requests) / map_resp : In(stream of MapCache responses)
    rebind : Out(stream of BlockTable REBIND)
    published : Out(stream {slot, bus_error, dropped})
        The slot's group is done: bound (``bus_error``: the map answered a
        bus error for some member; the bindings before it are in place), or
        ``dropped`` after a ``give_up`` (nothing bound) or an aborted commit.
    pending : Out(PendingUserSignature)
        STAGE and WALK requests to the pending-bindings table.
    doomed : In(owners)
        Transactions one of whose writes was dropped: their commit aborts.
    freed : Out(stream {owner})
        A walk freed every entry of ``owner``.
    """

    def __init__(self, *, slots: int = 8, max_members: int = spec.LIMITS.MAX_ATOMIC_PAGES, lba_bits: int = 32,
                 pending_entries: int = spec.LIMITS.MAX_PENDING, owners: int = spec.LIMITS.MAX_OPEN_TX):
        exact_log2(slots)
        exact_log2(max_members)
        self.slots, self.max_members, self.lba_bits = slots, max_members, lba_bits
        self.owners = owners
        self.owner_bits = max(1, ceil_log2(owners))
        self.slot_bits = max(1, ceil_log2(slots))
        self.idx_bits = max(1, ceil_log2(max_members))
        slot_idx = {"slot": self.slot_bits, "idx": self.idx_bits}
        super().__init__({
            "member_lba": In(stream.Signature(data.StructLayout(slot_idx | {"lba": lba_bits,
                                                                             "owner": self.owner_bits}))),
            "open": In(stream.Signature(self.open_layout(self.slot_bits, self.idx_bits, self.owner_bits))),
            "member": In(stream.Signature(PAGE_DONE)),
            "transfer_error": Out(slots),
            "no_page": Out(slots),
            "give_up": In(stream.Signature(data.StructLayout(slot_idx))),
            "retry": Out(stream.Signature(data.StructLayout(slot_idx | {"vseq": 64}))),
            "map_lock": Out(1),
            "map_grant": In(1),
            "map_req": Out(stream.Signature(request_layout(lba_bits))),
            "map_resp": In(stream.Signature(RESPONSE)),
            "rebind": Out(stream.Signature(REBIND)),
            "published": Out(stream.Signature(data.StructLayout({"slot": self.slot_bits, "bus_error": 1,
                                                                 "dropped": 1}))),
            "pending": Out(PendingUserSignature(pending_entries, owners)),
            "doomed": In(owners),
            "freed": Out(stream.Signature(data.StructLayout({"owner": self.owner_bits}))),
        })

    @staticmethod
    def open_layout(slot_bits, idx_bits, owner_bits):
        return data.StructLayout({"slot": slot_bits, "count": idx_bits + 1, "trim_nlb": 32,
                                  "mode": 2, "walk": 3, "owner": owner_bits, "no_page": 1})

    @staticmethod
    def member_tag(slot_bits, idx_bits):
        """A member page's log-writer tag: its index in the group, then its slot."""
        return data.StructLayout({"idx": idx_bits, "slot": slot_bits})

    def elaborate(self, platform):
        m = Module()
        S, M = self.slots, self.max_members
        depth = S * M
        member_shape = data.StructLayout({"lba": self.lba_bits, "owner": self.owner_bits})
        m.submodules.lbas = lbas = memory.Memory(shape=member_shape, depth=depth, init=[])
        m.submodules.ppas = ppas = memory.Memory(shape=32, depth=depth, init=[])
        lba_w, ppa_w = lbas.write_port(), ppas.write_port()
        lba_r, ppa_r = lbas.read_port(), ppas.read_port()

        opened = Signal(S)
        dropped = Signal(S)
        expected = [Signal(self.idx_bits + 1, name=f"expected{s}") for s in range(S)]
        resolved = [Signal(self.idx_bits + 1, name=f"resolved{s}") for s in range(S)]
        trim_nlb = [Signal(32, name=f"trim_nlb{s}") for s in range(S)]
        is_trim = Signal(S)
        slot_mode = [Signal(2, name=f"mode{s}") for s in range(S)]
        slot_walk = [Signal(3, name=f"walk{s}") for s in range(S)]
        slot_owner = [Signal(self.owner_bits, name=f"owner{s}") for s in range(S)]

        def addr(slot, idx):
            return (slot << self.idx_bits) | idx

        # member LBAs
        ml = self.member_lba
        m.d.comb += [ml.ready.eq(1), lba_w.addr.eq(addr(ml.payload.slot, ml.payload.idx)),
                     lba_w.data.lba.eq(ml.payload.lba), lba_w.data.owner.eq(ml.payload.owner), lba_w.en.eq(ml.valid)]
        # members: OK ones are counted and their page kept, failed ones go back
        mb = self.member
        mtag = Signal(self.member_tag(self.slot_bits, self.idx_bits))
        m.d.comb += mtag.eq(mb.payload.tag)
        ok = mb.payload.result == NandResult.OK
        m.d.comb += [self.retry.payload.slot.eq(mtag.slot), self.retry.payload.idx.eq(mtag.idx),
                     self.retry.payload.vseq.eq(mb.payload.vseq),
                     self.retry.valid.eq(mb.valid & ~ok),
                     mb.ready.eq(ok | self.retry.ready),
                     ppa_w.addr.eq(addr(mtag.slot, mtag.idx)), ppa_w.data.eq(mb.payload.ppa),
                     ppa_w.en.eq(mb.valid & ok)]
        taken = mb.valid & mb.ready
        # give_up and open are always accepted; a member and a give_up in one cycle both count
        gu = self.give_up
        m.d.comb += [self.open.ready.eq(1), gu.ready.eq(1)]
        head = Signal(self.slot_bits)
        retire = Signal()
        for s in range(S):
            counted = (mb.valid & ok & (mtag.slot == s)) + (gu.valid & (gu.payload.slot == s))
            with m.If(self.open.valid & (self.open.payload.slot == s)):
                op = self.open.payload
                m.d.sync += [expected[s].eq(op.count), resolved[s].eq(0),
                             opened[s].eq(1), dropped[s].eq(0), trim_nlb[s].eq(op.trim_nlb),
                             is_trim[s].eq(op.trim_nlb != 0),
                             slot_mode[s].eq(op.mode), slot_walk[s].eq(op.walk), slot_owner[s].eq(op.owner),
                             self.transfer_error[s].eq(0), self.no_page[s].eq(op.no_page)]
            with m.Else():
                m.d.sync += resolved[s].eq(resolved[s] + counted)
                with m.If(taken & (mtag.slot == s) & mb.payload.dma_error):
                    m.d.sync += self.transfer_error[s].eq(1)
                with m.If(taken & (mtag.slot == s) & mb.payload.no_page):
                    m.d.sync += self.no_page[s].eq(1)
                with m.If(gu.valid & (gu.payload.slot == s)):
                    m.d.sync += dropped[s].eq(1)
                with m.If(retire & (head == s)):
                    m.d.sync += opened[s].eq(0)

        # publishing the oldest group once it is complete
        head_ready = Signal()
        complete = Cat(*(opened[s] & (resolved[s] == expected[s]) for s in range(S)))
        m.d.comb += head_ready.eq(complete.bit_select(head, 1))
        idx = Signal(32)
        count = Signal(32)           # map writes this group makes
        trim = Signal()
        is_dropped = Signal()
        mode = Signal(2)
        walk = Signal(3)
        owner = Signal(self.owner_bits)
        walk_owner = Signal(self.owner_bits)
        walk_base = Signal(32)       # a remap triple's first lba (0 for a transaction: entries hold lbas)
        triples = Signal(32)
        tri = Signal(32)
        use_tri = Signal()
        abort = Signal()             # the walk drops the owner's entries
        walk_dropped = Signal()      # a commit turned into an abort
        old = Signal(32)
        new = Signal(32)
        walk_lba = Signal(32)
        error = Signal()
        member = Signal(self.idx_bits)
        m.d.comb += [member.eq(Mux(use_tri, tri[:self.idx_bits], Mux(trim, 0, idx[:self.idx_bits]))),
                     lba_r.addr.eq(addr(head, member)), ppa_r.addr.eq(addr(head, member))]
        preq, presp = self.pending.req, self.pending.resp
        doomed = Signal()
        m.d.comb += doomed.eq(self.doomed.bit_select(owner, 1))

        # the head slot's map writes (its members, or a trim's LBAs) and its trim length through registers
        # every cycle: the slot is complete, so both settled, a cycle before IDLE sees it ready (muxes over
        # every slot's fields did not fit in FETCH)
        head_count, head_nlb = Signal(32), Signal(32)
        m.d.sync += [head_nlb.eq(Array(trim_nlb)[head]),
                     head_count.eq(Mux(is_trim.bit_select(head, 1), Array(trim_nlb)[head], Array(expected)[head]))]

        with m.FSM():
            with m.State("IDLE"):
                with m.If(head_ready):
                    m.d.sync += [idx.eq(0), error.eq(0), walk_dropped.eq(0)]
                    m.next = "FETCH"
            with m.State("FETCH"):
                # the head slot's fields through balanced multiplexers (a chain of ``head == s`` tests
                # was one long path), a trim known from when the slot opened; a state of their own, so the
                # slot's completeness test is not in front of their registers too
                m.d.sync += [count.eq(head_count), trim.eq(is_trim.bit_select(head, 1)),
                             is_dropped.eq(dropped.bit_select(head, 1)),
                             triples.eq(head_nlb), mode.eq(Array(slot_mode)[head]),
                             walk.eq(Array(slot_walk)[head]), owner.eq(Array(slot_owner)[head])]
                m.next = "LOCK"
            with m.State("LOCK"):
                with m.If(is_dropped | (count == 0) | (mode == MemberMode.NONE)):
                    m.next = "MEMBERS_DONE"
                with m.Elif(mode == MemberMode.STAGE):
                    m.next = "STAGE_READ"
                with m.Else():
                    m.d.comb += self.map_lock.eq(1)
                    with m.If(self.map_grant):
                        m.next = "READ"
            with m.State("READ"):
                m.d.comb += self.map_lock.eq(1)
                m.next = "MAP"      # member's lba/ppa arrive a cycle after the address
            with m.State("MAP"):
                m.d.comb += self.map_lock.eq(1)
                r = self.map_req.payload
                m.d.comb += [r.op.eq(MapOp.WRITE), r.lba.eq(Mux(trim, lba_r.data.lba + idx, lba_r.data.lba)),
                             r.value.eq(Mux(trim, spec.PPA_UNMAPPED, ppa_r.data)), self.map_req.valid.eq(1)]
                with m.If(self.map_req.ready):
                    m.d.sync += new.eq(r.value)
                    m.next = "RESP"
            with m.State("RESP"):
                m.d.comb += [self.map_lock.eq(1), self.map_resp.ready.eq(1)]
                with m.If(self.map_resp.valid):
                    m.d.sync += old.eq(self.map_resp.payload.old)
                    with m.If(self.map_resp.payload.error):
                        m.d.sync += error.eq(1)
                        m.next = "NEXT"
                    with m.Else():
                        m.next = "REBIND"
            with m.State("REBIND"):
                m.d.comb += [self.map_lock.eq(mode == MemberMode.BIND), self.rebind.payload.old.eq(old),
                             self.rebind.payload.new.eq(new), self.rebind.valid.eq(1)]
                with m.If(self.rebind.ready):
                    m.next = "NEXT"
            with m.State("NEXT"):
                m.d.comb += self.map_lock.eq(mode == MemberMode.BIND)
                m.d.sync += idx.eq(idx + 1)
                with m.If(idx + 1 == count):
                    m.next = "MEMBERS_DONE"
                with m.Elif(mode == MemberMode.STAGE):
                    m.next = "STAGE_READ"
                with m.Else():
                    m.next = "READ"

            # a transaction's member: its entry (lba memory) takes the page
            with m.State("STAGE_READ"):
                m.next = "STAGE"
            with m.State("STAGE"):
                m.d.comb += [preq.valid.eq(1), preq.payload.op.eq(PendingOp.STAGE),
                             preq.payload.entry.eq(lba_r.data.lba), preq.payload.ppa.eq(ppa_r.data)]
                with m.If(preq.ready):
                    m.d.sync += new.eq(ppa_r.data)
                    m.next = "STAGE_RESP"
            with m.State("STAGE_RESP"):
                m.d.comb += presp.ready.eq(1)
                with m.If(presp.valid):
                    m.d.sync += old.eq(presp.payload.ppa)
                    m.next = "REBIND"

            # after the members: bind (commit, remap) or drop (abort) pending entries
            with m.State("MEMBERS_DONE"):
                m.d.sync += [walk_owner.eq(owner), walk_base.eq(0), tri.eq(0)]
                with m.If((walk == Walk.NONE) | ((walk == Walk.ABORT_IF_DROPPED) & ~is_dropped)):
                    m.next = "DONE"
                with m.Elif(walk == Walk.REMAP):
                    m.d.sync += abort.eq(0)
                    m.next = "REMAP_LOCK"
                with m.Else():
                    m.d.sync += [abort.eq((walk != Walk.COMMIT) | is_dropped | doomed),
                                 walk_dropped.eq((walk == Walk.COMMIT) & (is_dropped | doomed))]
                    m.next = "WALK_LOCK"
            with m.State("WALK_LOCK"):
                m.d.comb += self.map_lock.eq(~abort)
                with m.If(abort | self.map_grant):
                    m.next = "WALK"
            # a remap: triple by triple, the map port held throughout
            with m.State("REMAP_LOCK"):
                m.d.comb += [self.map_lock.eq(1), use_tri.eq(1)]
                with m.If(self.map_grant):
                    m.next = "REMAP_LOAD"
            with m.State("REMAP_LOAD"):
                m.d.comb += [self.map_lock.eq(1), use_tri.eq(1)]
                m.d.sync += [walk_owner.eq(lba_r.data.owner), walk_base.eq(lba_r.data.lba)]
                m.next = "WALK"
            with m.State("WALK"):
                m.d.comb += [self.map_lock.eq(~abort), preq.valid.eq(1), preq.payload.op.eq(PendingOp.WALK),
                             preq.payload.owner.eq(walk_owner)]
                with m.If(preq.ready):
                    m.next = "WALK_RESP"
            with m.State("WALK_RESP"):
                m.d.comb += [self.map_lock.eq(~abort), presp.ready.eq(1)]
                with m.If(presp.valid):
                    m.d.sync += [walk_lba.eq(walk_base + presp.payload.lba), new.eq(presp.payload.ppa),
                                 old.eq(presp.payload.ppa)]
                    with m.If(presp.payload.last):
                        m.next = "FREED"
                    with m.Elif(presp.payload.ppa == spec.PPA_UNMAPPED):
                        pass         # reserved by a write that never staged (a dropped one)
                    with m.Elif(abort):
                        m.next = "WALK_REBIND"
                    with m.Else():
                        m.next = "WALK_MAP"
            with m.State("WALK_MAP"):
                r = self.map_req.payload
                m.d.comb += [self.map_lock.eq(1), r.op.eq(MapOp.WRITE), r.lba.eq(walk_lba), r.value.eq(new),
                             self.map_req.valid.eq(1)]
                with m.If(self.map_req.ready):
                    m.next = "WALK_MAP_RESP"
            with m.State("WALK_MAP_RESP"):
                m.d.comb += [self.map_lock.eq(1), self.map_resp.ready.eq(1)]
                with m.If(self.map_resp.valid):
                    m.d.sync += old.eq(self.map_resp.payload.old)
                    with m.If(self.map_resp.payload.error):
                        m.d.sync += error.eq(1)
                        m.next = "WALK_RESP"
                    with m.Else():
                        m.next = "WALK_REBIND"
            with m.State("WALK_REBIND"):
                # commit/remap: the superseded committed page loses its count (the staged one has it already);
                # abort: the staged page loses it
                m.d.comb += [self.map_lock.eq(~abort), self.rebind.payload.old.eq(old),
                             self.rebind.payload.new.eq(spec.PPA_UNMAPPED), self.rebind.valid.eq(1)]
                with m.If(self.rebind.ready):
                    m.next = "WALK_RESP"
            with m.State("FREED"):
                m.d.comb += [self.map_lock.eq(~abort), use_tri.eq(1), self.freed.valid.eq(1),
                             self.freed.payload.owner.eq(walk_owner)]
                with m.If(self.freed.ready):
                    m.d.sync += tri.eq(tri + 1)
                    with m.If((walk == Walk.REMAP) & (tri + 1 != triples)):
                        m.next = "REMAP_NEXT"
                    with m.Else():
                        m.next = "DONE"
            with m.State("REMAP_NEXT"):
                m.d.comb += [self.map_lock.eq(1), use_tri.eq(1)]     # lba_r shows triple tri next cycle
                m.next = "REMAP_LOAD"
            with m.State("DONE"):
                m.d.comb += [self.published.payload.slot.eq(head), self.published.payload.bus_error.eq(error),
                             self.published.payload.dropped.eq(is_dropped | walk_dropped),
                             self.published.valid.eq(1)]
                with m.If(self.published.ready):
                    m.d.comb += retire.eq(1)
                    m.d.sync += head.eq(head + 1)
                    m.next = "IDLE"
        return m
