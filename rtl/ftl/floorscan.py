"""The checkpoint floor's scanner: the oldest first vseq among the slots whose pages may still be needed.

A map checkpoint must not claim a floor above the first page of an append that is still held (its
token live, or its entries not yet freed by the publisher), or of a transaction not yet published,
or recovery would not see its pages.  The append table and the transaction table keep each slot's
first vseq in a memory; this scanner reads every slot in turn through a read port of its own, one
slot per cycle, and at the end of each pass publishes the smallest first vseq among the held slots
(all ones: none held).  A pass is ``length`` cycles (at least ``slots``; the positions beyond the
slots are never held): the executor gives both tables' scanners the same length, so they pass
together and one count of passes (``passes``) serves both floors.

A slot whose state changes during a pass may be counted in the old state, so a reader that needs
the floor as of some moment reads ``passes``, waits until it has moved on by two, then reads
``floor`` (the firmware does this before a checkpoint: ``af_pend_snapshot``).
"""

from amaranth import Module, Mux, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

__all__ = ["FloorScanner"]

NONE = 2**64 - 1


class FloorScanner(wiring.Component):
    """The oldest held slot's first vseq; see the module docstring.

    Parameters
    ----------
    slots : int
        Slots (appends, or transactions).
    length : int
        Cycles per pass (default ``slots``).

    Ports
    -----
    addr : Out(range(length)) / data : In(64)
        A synchronous read port of the slots' first vseqs (``data`` is the word at the previous
        cycle's ``addr``).
    hold : In(slots)
        The slots whose pages may still be needed.
    floor : Out(64)
        The smallest first vseq among the slots held, as of the last complete pass (all ones: none).
    passes : Out(32)
        Complete passes since reset.
    """

    def __init__(self, slots: int, length: int | None = None):
        self.slots, self.length = slots, length or slots
        if self.length < slots:
            raise ValueError("a pass must visit every slot")
        super().__init__({
            "addr": Out(range(self.length)),
            "data": In(64),
            "hold": In(slots),
            "floor": Out(64, init=NONE),
            "passes": Out(32),
        })

    def elaborate(self, platform):
        m = Module()
        A = self.length
        prev = Signal(range(A))       # the slot whose word is on ``data`` now
        valid = Signal()
        run_min = Signal(64, init=NONE)
        m.d.sync += [self.addr.eq(Mux(self.addr == A - 1, 0, self.addr + 1)), prev.eq(self.addr), valid.eq(1)]
        held = self.hold.bit_select(prev, 1) & (prev < self.slots)
        cand = Mux(valid & held & (self.data < run_min), self.data, run_min)
        with m.If(valid & (prev == A - 1)):
            m.d.sync += [self.floor.eq(cand), run_min.eq(NONE), self.passes.eq(self.passes + 1)]
        with m.Else():
            m.d.sync += run_min.eq(cand)
        return m
