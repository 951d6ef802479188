"""Overlapping ranges in a command's list: the duplicate check ATOMIC_WRITE and REMAP share.

An ATOMIC_WRITE whose list names an LBA twice is DUPLICATE_LBA, and so is a REMAP whose triples'
ranges overlap (an ATOMIC_WRITE entry is the range of one block).  The executor keeps the list in a
memory of its own; this checker reads it through a synchronous read port (``lba``/``nlb`` are the
entry at the previous cycle's ``addr``) and compares every entry with every earlier one: for entry
``i`` one cycle to address it, one to load it, then one compare per earlier entry (the next entry's
read overlaps the compare) and one more to look at the last compare's result, so ``n`` entries take
``n(n-1)/2 + 3n - 2`` cycles from ``start`` to ``done`` when none overlap, fewer when two do (the
check stops at the first overlap).  Each compare's result is registered and looked at a cycle
later: the list memory's read, a 33-bit sum and a 33-bit compare are one path already, and the
executor's decision on ``done`` and ``overlap`` behind them made it too long for an FPGA's clock.

Ranges are compared with 33-bit ends, so a range that runs past 2^32 still overlaps what it covers.
"""

from amaranth import Cat, Const, Module, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

__all__ = ["RangeOverlapChecker"]


class RangeOverlapChecker(wiring.Component):
    """Whether any two of the first ``count`` entries' ranges overlap; see the module docstring.

    Parameters
    ----------
    entries : int
        The longest list.

    Ports
    -----
    start : In(1), count : In(range(entries + 1))
        Check the first ``count`` entries (``count`` held until ``done``).
    addr : Out(range(entries)) / lba : In(32), nlb : In(32)
        The list's read port: the entry at the previous cycle's ``addr``.
    done : Out(1), overlap : Out(1)
        The check ended (one cycle): two ranges overlap, or none does.
    """

    def __init__(self, entries: int):
        self.entries = entries
        super().__init__({
            "start": In(1), "count": In(range(entries + 1)),
            "addr": Out(range(entries)), "lba": In(32), "nlb": In(32),
            "done": Out(1), "overlap": Out(1),
        })

    def elaborate(self, platform):
        m = Module()
        i = Signal(range(self.entries + 1))      # the entry compared with every earlier one
        j = Signal(range(self.entries + 1))      # ... the earlier one
        a_lba, a_nlb = Signal(32), Signal(32)
        hit = Signal()                           # the previous cycle's compare found an overlap
        compared = Signal()                      # ... and there was one
        b_lba, b_nlb = self.lba, self.nlb
        overlap = ((Cat(a_lba, Const(0, 1)) < Cat(b_lba, Const(0, 1)) + b_nlb) &
                   (Cat(b_lba, Const(0, 1)) < Cat(a_lba, Const(0, 1)) + a_nlb))
        with m.FSM(name="check"):
            with m.State("IDLE"):
                with m.If(self.start):
                    m.d.sync += [i.eq(1), j.eq(0)]
                    m.next = "ADDRESS_THE_NEXT_ENTRY"
            with m.State("ADDRESS_THE_NEXT_ENTRY"):
                m.d.comb += self.addr.eq(i)
                with m.If(i >= self.count):
                    m.d.comb += self.done.eq(1)
                    m.next = "IDLE"
                with m.Else():
                    m.next = "LOAD_IT"
            with m.State("LOAD_IT"):
                m.d.comb += self.addr.eq(j)
                m.d.sync += [a_lba.eq(self.lba), a_nlb.eq(self.nlb), compared.eq(0)]
                m.next = "COMPARE_IT_WITH_AN_EARLIER_ONE"
            with m.State("COMPARE_IT_WITH_AN_EARLIER_ONE"):
                m.d.sync += [hit.eq(overlap), compared.eq(1)]
                with m.If(compared & hit):
                    m.d.comb += [self.done.eq(1), self.overlap.eq(1)]
                    m.next = "IDLE"
                with m.Elif(j + 1 == i):
                    m.next = "LOOK_AT_THE_LAST_COMPARE"
                with m.Else():
                    m.d.comb += self.addr.eq(j + 1)
                    m.d.sync += j.eq(j + 1)
            with m.State("LOOK_AT_THE_LAST_COMPARE"):
                with m.If(hit):
                    m.d.comb += [self.done.eq(1), self.overlap.eq(1)]
                    m.next = "IDLE"
                with m.Else():
                    m.d.sync += [i.eq(i + 1), j.eq(0)]
                    m.next = "ADDRESS_THE_NEXT_ENTRY"
        return m
