"""Pending-bindings table (X-FTL's X-L2P): staged pages the map does not name yet.

A transaction's pages are programmed as they are written, but the L2P map
keeps pointing at the committed data until the transaction's commit point is
durable (``../shared/DESIGN.md``, "On-flash format").  Until then each staged
page is named here, by an *entry*::

    valid   owner (transaction slot)   lba   ppa (PPA_UNMAPPED: reserved, not yet programmed)

One entry per (owner, LBA): a transaction rewriting an LBA it staged before
reuses the entry, so the table's capacity is what IDENTIFY reports as
``max_pending`` (``docs/model.md``, choice 4).

Operations (``PendingOp``), served one at a time from several users (lowest
user index first; each user has a request and a response stream):

==========  ==================================================================
RESERVE     take a free entry for (owner, lba), ppa unmapped; answers ``entry``
            (``hit`` 0 when the table is full -- callers check ``free`` first)
STAGE       entry's ppa := ``ppa``; answers the previous ppa (the staged version
            it supersedes, or unmapped)
SCAN        every valid entry of ``owner`` with lba in [lba, lba + nlb): one
            answer each (``entry``, ``idx`` = its lba - lba, ``ppa``), then ``last``
WALK        every valid entry of ``owner``: one answer each (``lba``, ``ppa``),
            freeing it; then ``last`` (commit: bind them; abort: drop them)
CAS         the entry whose ppa is ``ppa`` (GC moved that page) takes ``new``;
            answers ``hit``
READ        entry ``entry`` as it is: ``hit`` = valid, ``lba``, ``ppa``, and its
            owner in ``idx`` (a checkpoint's snapshot of the table)
==========  ==================================================================

SCAN, WALK and CAS read the whole table, one entry per clock (a table of
1024 entries costs ~10 us at 100 MHz, against the ~40 us a channel needs per
page).  Free entries come from a FIFO that holds every index after reset: the
block RAM keeps its contents across a reset, so an ``INIT`` pass clears every
entry first (``ready`` is low until it is done).
"""

import enum

from amaranth import Cat, Module, Mux, Signal
from amaranth.lib import data, fifo, memory, stream, wiring
from amaranth.lib.wiring import In, Out
from amaranth.utils import ceil_log2, exact_log2

from atomflash import spec
from rtl.lib.streams import RegisterSlice

__all__ = ["PendingOp", "PendingTable", "pending_request", "pending_response"]


class PendingOp(enum.IntEnum):
    RESERVE = 0
    STAGE = 1
    SCAN = 2
    WALK = 3
    CAS = 4
    READ = 5


def pending_request(entries: int, owners: int) -> data.StructLayout:
    return data.StructLayout({"op": 3, "owner": max(1, ceil_log2(owners)), "entry": ceil_log2(entries),
                              "lba": 32, "nlb": 32, "ppa": 32, "new": 32})


def pending_response(entries: int) -> data.StructLayout:
    return data.StructLayout({"last": 1, "hit": 1, "entry": ceil_log2(entries), "idx": 32, "lba": 32, "ppa": 32})


class PendingUserSignature(wiring.Signature):
    """One user's port: requests out, answers in (from the user's side)."""

    def __init__(self, entries: int, owners: int):
        super().__init__({
            "req": Out(stream.Signature(pending_request(entries, owners))),
            "resp": In(stream.Signature(pending_response(entries))),
        })


class PendingTable(wiring.Component):
    """The pending-bindings table; see the module docstring.

    Parameters
    ----------
    entries : int
        Table size (a power of two): ``max_pending``.
    owners : int
        Transaction slots (``max_open_tx``).
    users : int

    Ports
    -----
    users : In(PendingUserSignature).array(users)
        Served one request at a time, user 0 first.
    free : Out(range(entries + 1))
        Entries free now.
    budget : In(range(entries + 1)) / room : Out(range(entries + 1))
        The firmware's budget of entries in use (0: the whole table), and the entries a new TX_WRITE
        or APPEND may still take: the free ones, but no more than the budget leaves (staged pages are
        live, so more of them than the over-provisioning holds would leave GC nothing to free); a
        cycle behind.
    ready : Out(1)
        The reset-time clearing pass is done.
    """

    def __init__(self, *, entries: int = spec.LIMITS.MAX_PENDING, owners: int = spec.LIMITS.MAX_OPEN_TX,
                 users: int = 3):
        exact_log2(entries)
        self.entries, self.owners, self.nusers = entries, owners, users
        self.owner_bits = max(1, ceil_log2(owners))
        super().__init__({
            "users": In(PendingUserSignature(entries, owners)).array(users),
            "free": Out(range(entries + 1)),
            "budget": In(range(entries + 1)),
            "room": Out(range(entries + 1)),
            "ready": Out(1),
        })

    def elaborate(self, platform):
        m = Module()
        E = self.entries
        entry_shape = data.StructLayout({"valid": 1, "owner": self.owner_bits, "lba": 32, "ppa": 32})
        m.submodules.table = table = memory.Memory(shape=entry_shape, depth=E, init=[])
        w = table.write_port()
        r = table.read_port()
        m.submodules.free_list = free_list = fifo.SyncFIFOBuffered(width=ceil_log2(E), depth=E)
        m.d.comb += self.free.eq(free_list.level)
        used = Signal(range(E + 1))
        budget_room = Signal(range(E + 1))
        # ``room`` from a register, a cycle behind the free list: the level, the budget's arithmetic and
        # the executor's decision behind it were one long path; entries are taken by requests served
        # one at a time, each several cycles after the executor looked at the room
        m.d.comb += [used.eq(E - free_list.level),
                     budget_room.eq(Mux(self.budget == 0, free_list.level,
                                        Mux(self.budget > used, self.budget - used, 0)))]
        m.d.sync += self.room.eq(Mux(budget_room < free_list.level, budget_room, free_list.level))

        req = Signal(pending_request(E, self.owners))
        user = Signal(range(max(self.nusers, 2)))
        resp = Signal(pending_response(E))          # answers from a register (RESERVE, STAGE, ends)...
        resp_valid = Signal()
        loop_resp = Signal(pending_response(E))     # ...or straight from the table while it is read
        loop_valid = Signal()
        in_loop = Signal()
        resp_ready = Signal()
        for u, port in enumerate(self.users):
            # each user's answers leave through registers: a scan's answer comes straight from the
            # table's read, and the user's logic behind it would make one long path of both.  The
            # table may take the next request while an answer still waits there: answers are in the
            # order requests were taken, which is the order their effects happen in.
            m.submodules[f"resp{u}"] = out = RegisterSlice(pending_response(E))
            wiring.connect(m, out.output, wiring.flipped(port.resp))
            m.d.comb += out.input.payload.eq(Mux(in_loop, loop_resp, resp))
            with m.If(user == u):
                m.d.comb += [out.input.valid.eq(Mux(in_loop, loop_valid, resp_valid)),
                             resp_ready.eq(out.input.ready)]

        # SCAN, WALK and CAS read the table through two stages: the entry the read port shows (``ci``)
        # is matched into registers (``_b``), and the answer leaves from those.  Matching straight into
        # the answers, the stall and the read port's enable made the block RAM's read, a 32-bit
        # subtraction and a compare one path (boards/depth.py).
        i = Signal(range(E + 1))          # address presented to the read port
        ci = Signal(range(E))             # the entry r.data shows
        have = Signal()                   # r.data is entry ci
        e = r.data
        offset = Signal(32)
        m.d.comb += [offset.eq(e.lba - req.lba), r.addr.eq(i)]
        e_b = Signal(entry_shape)
        ci_b = Signal(range(E))
        have_b, match_b = Signal(), Signal()
        offset_b = Signal(32)

        with m.FSM():
            with m.State("INIT"):
                m.d.comb += [w.addr.eq(i), w.data.eq(0), w.en.eq(1), free_list.w_data.eq(i),
                             free_list.w_en.eq(1)]
                m.d.sync += i.eq(i + 1)
                with m.If(i == E - 1):
                    m.next = "IDLE"
            with m.State("IDLE"):
                m.d.comb += self.ready.eq(1)
                chosen = Signal()
                for u in reversed(range(self.nusers)):
                    with m.If(self.users[u].req.valid):
                        m.d.comb += chosen.eq(1)
                        m.d.sync += [user.eq(u), req.eq(self.users[u].req.payload)]
                with m.If(chosen):
                    for u in range(self.nusers):
                        ahead = Cat(*(self.users[v].req.valid for v in range(u)))
                        m.d.comb += self.users[u].req.ready.eq(~ahead.any() if u else 1)
                    m.d.sync += [i.eq(0), have.eq(0), have_b.eq(0), resp.eq(0)]
                    m.next = "DECODE"
            with m.State("DECODE"):
                with m.Switch(req.op):
                    with m.Case(PendingOp.RESERVE):
                        with m.If(free_list.r_rdy):
                            m.d.comb += [w.addr.eq(free_list.r_data), w.data.valid.eq(1), w.data.owner.eq(req.owner),
                                         w.data.lba.eq(req.lba), w.data.ppa.eq(spec.PPA_UNMAPPED), w.en.eq(1),
                                         free_list.r_en.eq(1)]
                            m.d.sync += [resp.entry.eq(free_list.r_data), resp.hit.eq(1)]
                        m.d.sync += [resp.last.eq(1), resp_valid.eq(1)]
                        m.next = "ANSWER"
                    with m.Case(PendingOp.STAGE):
                        m.d.comb += r.addr.eq(req.entry)
                        m.next = "STAGE"
                    with m.Case(PendingOp.READ):
                        m.d.comb += r.addr.eq(req.entry)
                        m.next = "READ"
                    with m.Default():
                        m.next = "LOOP"
            with m.State("STAGE"):
                m.d.comb += [w.addr.eq(req.entry), w.data.eq(e), w.data.ppa.eq(req.ppa), w.en.eq(1)]
                m.d.sync += [resp.ppa.eq(e.ppa), resp.entry.eq(req.entry), resp.hit.eq(1), resp.last.eq(1),
                             resp_valid.eq(1)]
                m.next = "ANSWER"
            with m.State("READ"):
                m.d.sync += [resp.hit.eq(e.valid), resp.entry.eq(req.entry), resp.lba.eq(e.lba), resp.ppa.eq(e.ppa),
                             resp.idx.eq(e.owner), resp.last.eq(1), resp_valid.eq(1)]
                m.next = "ANSWER"
            with m.State("ANSWER"):
                with m.If(resp_ready):
                    m.d.sync += resp_valid.eq(0)
                    m.next = "IDLE"
            with m.State("LOOP"):
                m.d.comb += in_loop.eq(1)
                match = Signal()
                with m.Switch(req.op):
                    with m.Case(PendingOp.SCAN):
                        m.d.comb += match.eq(e.valid & (e.owner == req.owner) & (offset < req.nlb))
                    with m.Case(PendingOp.WALK):
                        m.d.comb += match.eq(e.valid & (e.owner == req.owner))
                    with m.Case(PendingOp.CAS):
                        m.d.comb += match.eq(e.valid & (e.ppa == req.ppa))
                hit = have_b & match_b
                stall = Signal()
                m.d.comb += stall.eq(hit & ~resp_ready)
                with m.If(hit):
                    m.d.comb += [loop_valid.eq(1), loop_resp.entry.eq(ci_b), loop_resp.idx.eq(offset_b),
                                 loop_resp.lba.eq(e_b.lba), loop_resp.ppa.eq(e_b.ppa), loop_resp.hit.eq(1),
                                 loop_resp.last.eq(req.op == PendingOp.CAS)]
                m.d.comb += r.en.eq(~stall)
                with m.If(~stall):
                    m.d.sync += [e_b.eq(e), ci_b.eq(ci), have_b.eq(have), match_b.eq(match), offset_b.eq(offset),
                                 ci.eq(i), have.eq(1), i.eq(i + 1)]
                    with m.If(hit & (req.op == PendingOp.WALK)):
                        m.d.comb += [w.addr.eq(ci_b), w.data.eq(0), w.en.eq(1), free_list.w_data.eq(ci_b),
                                     free_list.w_en.eq(1)]
                    with m.If(hit & (req.op == PendingOp.CAS)):
                        m.d.comb += [w.addr.eq(ci_b), w.data.eq(e_b), w.data.ppa.eq(req.new), w.en.eq(1)]
                        m.next = "IDLE"
                    with m.Elif(have_b & (ci_b == E - 1)):
                        m.d.sync += [resp.last.eq(1), resp.hit.eq(0), resp_valid.eq(1)]
                        m.next = "ANSWER"
        return m
