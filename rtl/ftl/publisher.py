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
(``member_lba``) and the group size (``open``), then hands the log writer's
completions in as ``member``.  A member that failed to program is sent back on
``retry`` (the executor re-issues it on a fresh page; nothing is counted).
When a slot has all its members, the publisher walks them in index order:
``MapCache.WRITE(lba, ppa)`` returns the previous binding, and the
``BlockTable`` gets the rebind (old -> new) so valid-page counts follow.  Then
``published`` names the slot, and the executor completes the host command.
One group is published at a time; the executor's LBA hazard table keeps
commands that share LBAs apart, so publish order is commit order per LBA.
"""

from amaranth import Module, Signal
from amaranth.lib import data, memory, stream, wiring
from amaranth.lib.wiring import In, Out
from amaranth.utils import ceil_log2, exact_log2

from atomflash import spec
from atomflash.spec import NandResult

from .blocktable import REBIND
from .mapcache import RESPONSE, MapOp, request_layout

__all__ = ["Publisher"]


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
    member_lba : In(stream {slot, idx, lba})
        Member ``idx`` of the slot's group binds ``lba``.
    open : In(stream {slot, count})
        The slot's group has ``count`` (1..max_members) members; send it
        after its member LBAs and before its first ``member``.
    member : In(stream {slot, idx, result, ppa})
        The log writer's completion for a member (``NandResult``).
    retry : Out(stream {slot, idx})
        A member whose program failed; re-issue it.
    map_req : Out(stream of MapCache requests) / map_resp : In(stream of MapCache responses)
    rebind : Out(stream of BlockTable REBIND)
    published : Out(stream {slot, error})
        The slot's group is bound (``error``: the map answered a bus error
        for some member; the bindings before it are in place).
    """

    def __init__(self, *, slots: int = 8, max_members: int = spec.LIMITS.MAX_ATOMIC_PAGES, lba_bits: int = 32):
        exact_log2(slots)
        exact_log2(max_members)
        self.slots, self.max_members, self.lba_bits = slots, max_members, lba_bits
        self.slot_bits = max(1, ceil_log2(slots))
        self.idx_bits = max(1, ceil_log2(max_members))
        slot_idx = {"slot": self.slot_bits, "idx": self.idx_bits}
        super().__init__({
            "member_lba": In(stream.Signature(data.StructLayout(slot_idx | {"lba": lba_bits}))),
            "open": In(stream.Signature(data.StructLayout({"slot": self.slot_bits,
                                                           "count": self.idx_bits + 1}))),
            "member": In(stream.Signature(data.StructLayout(slot_idx | {"result": 8, "ppa": 32}))),
            "retry": Out(stream.Signature(data.StructLayout(slot_idx))),
            "map_req": Out(stream.Signature(request_layout(lba_bits))),
            "map_resp": In(stream.Signature(RESPONSE)),
            "rebind": Out(stream.Signature(REBIND)),
            "published": Out(stream.Signature(data.StructLayout({"slot": self.slot_bits, "error": 1}))),
        })

    def elaborate(self, platform):
        m = Module()
        S, M = self.slots, self.max_members
        depth = S * M
        m.submodules.lbas = lbas = memory.Memory(shape=self.lba_bits, depth=depth, init=[])
        m.submodules.ppas = ppas = memory.Memory(shape=32, depth=depth, init=[])
        lba_w, ppa_w = lbas.write_port(), ppas.write_port()
        lba_r, ppa_r = lbas.read_port(), ppas.read_port()

        expected = [Signal(self.idx_bits + 1, name=f"expected{s}") for s in range(S)]
        done = [Signal(self.idx_bits + 1, name=f"done{s}") for s in range(S)]

        def addr(slot, idx):
            return (slot << self.idx_bits) | idx

        # member LBAs
        ml = self.member_lba
        m.d.comb += [ml.ready.eq(1), lba_w.addr.eq(addr(ml.payload.slot, ml.payload.idx)),
                     lba_w.data.eq(ml.payload.lba), lba_w.en.eq(ml.valid)]
        # open: the group size; the count starts over
        m.d.comb += self.open.ready.eq(1)
        # members: OK ones are counted and their page kept, failed ones go back
        mb = self.member
        ok = mb.payload.result == NandResult.OK
        m.d.comb += [self.retry.payload.slot.eq(mb.payload.slot), self.retry.payload.idx.eq(mb.payload.idx),
                     self.retry.valid.eq(mb.valid & ~ok),
                     mb.ready.eq(ok | self.retry.ready),
                     ppa_w.addr.eq(addr(mb.payload.slot, mb.payload.idx)), ppa_w.data.eq(mb.payload.ppa),
                     ppa_w.en.eq(mb.valid & ok)]
        for s in range(S):
            with m.If(self.open.valid & (self.open.payload.slot == s)):
                m.d.sync += [expected[s].eq(self.open.payload.count), done[s].eq(0)]
            with m.Elif(mb.valid & ok & (mb.payload.slot == s)):
                m.d.sync += done[s].eq(done[s] + 1)

        # publishing, one group at a time
        complete = Signal(S)
        for s in range(S):
            m.d.comb += complete[s].eq((expected[s] != 0) & (done[s] == expected[s]))
        pick = Signal(self.slot_bits)
        for s in reversed(range(S)):
            with m.If(complete[s]):
                m.d.comb += pick.eq(s)

        slot = Signal(self.slot_bits)
        idx = Signal(self.idx_bits + 1)
        count = Signal(self.idx_bits + 1)
        old = Signal(32)
        new = Signal(32)
        error = Signal()
        m.d.comb += [lba_r.addr.eq(addr(slot, idx[:self.idx_bits])), ppa_r.addr.eq(addr(slot, idx[:self.idx_bits]))]

        with m.FSM():
            with m.State("IDLE"):
                with m.If(complete.any()):
                    m.d.sync += [slot.eq(pick), idx.eq(0), error.eq(0)]
                    for s in range(S):
                        with m.If(pick == s):
                            m.d.sync += [count.eq(expected[s]), expected[s].eq(0)]
                    m.next = "READ"
            with m.State("READ"):
                m.next = "MAP"      # member's lba/ppa arrive a cycle after the address
            with m.State("MAP"):
                r = self.map_req.payload
                m.d.comb += [r.op.eq(MapOp.WRITE), r.lba.eq(lba_r.data), r.value.eq(ppa_r.data),
                             self.map_req.valid.eq(1)]
                with m.If(self.map_req.ready):
                    m.d.sync += new.eq(ppa_r.data)
                    m.next = "RESP"
            with m.State("RESP"):
                m.d.comb += self.map_resp.ready.eq(1)
                with m.If(self.map_resp.valid):
                    m.d.sync += old.eq(self.map_resp.payload.old)
                    with m.If(self.map_resp.payload.error):
                        m.d.sync += error.eq(1)
                        m.next = "NEXT"
                    with m.Else():
                        m.next = "REBIND"
            with m.State("REBIND"):
                m.d.comb += [self.rebind.payload.old.eq(old), self.rebind.payload.new.eq(new),
                             self.rebind.valid.eq(1)]
                with m.If(self.rebind.ready):
                    m.next = "NEXT"
            with m.State("NEXT"):
                m.d.sync += idx.eq(idx + 1)
                with m.If(idx + 1 == count):
                    m.next = "DONE"
                with m.Else():
                    m.next = "READ"
            with m.State("DONE"):
                m.d.comb += [self.published.payload.slot.eq(slot), self.published.payload.error.eq(error),
                             self.published.valid.eq(1)]
                with m.If(self.published.ready):
                    m.next = "IDLE"
        return m
