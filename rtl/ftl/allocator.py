"""Page allocator: where the log goes next.

The log is written out of place, one page at a time, into *open blocks* the
firmware hands over: the firmware owns the free-block pool (it knows erase
counts, bad blocks and GC), the gateware owns the per-page decision.  To keep
every die busy, consecutive pages go to consecutive dies, channels first:
die ``d`` is channel ``d % C``, way ``(d // C) % W``, LUN ``d // (C * W)``, so
a run of C x W pages programs on every channel and every way at once.

Each die has one open block and a small FIFO of erased blocks the firmware
pushes (``free``).  A page request takes the next page of the next die in
round-robin order that has room, stamping it with the next log sequence number
(``seq``, loaded by the firmware after recovery and incremented per page).
The page is chosen while a requester waits (``demand``) and offered from
registers the next cycle: the choice (a round robin over every die's state)
then never meets the requester's own decision in one clock, which on a full
FPGA sits across the die from the allocator.  For the same reason the
requester's ``demand`` and ``force`` reach the choice through registers here:
a page is chosen a cycle after the demand is seen.
When a block's last page is handed out the block leaves on ``closed`` (a GC
candidate from then on) and the die opens the next block from its FIFO; a die
with neither is skipped, and when every die is out of blocks requests wait and
``starved`` is raised for the firmware.  Requests from one requester in a row
get consecutive seqs — an atomic group's members rely on it.
"""

from amaranth import Array, Cat, Module, Mux, Signal
from amaranth.lib import data, fifo, stream, wiring
from amaranth.lib.wiring import In, Out
from amaranth.utils import ceil_log2, exact_log2

from atomflash import spec
from rtl import spec as layouts


BLOCK_BITS = next(b.width for b in spec.PPA["ppa"].bits if b.name == "block")
PAGE_BITS = next(b.width for b in spec.PPA["ppa"].bits if b.name == "page")


class PageAllocator(wiring.Component):
    """Round-robin page allocation over open blocks, one per die.

    Parameters
    ----------
    channels, ways, luns : int
        Powers of two; dies = channels * ways * luns.
    free_depth : int
        Erased blocks a die can have queued behind its open block.

    Ports
    -----
    free : In(stream.Signature({die, block}))
        An erased block for die ``die`` (firmware, through a CSR).
    alloc : Out(stream.Signature({ppa, seq}))
        The next page (``spec.PPA`` view) and its sequence number, from
        registers, offered until a transfer takes it (pages are never
        dropped, seqs never skipped).
    demand : In(1)
        A requester waits for a page: seen a cycle later (a register), and then,
        while nothing is offered, the allocator chooses one, offered from the
        next cycle.  The requester lowers it with the transfer (a demand seen
        with a transfer is forgotten) or gives up while ``starved`` (no die
        has a block to choose from then, and none opens the next cycle), so no
        page is chosen for a request that went.
    closed : Out(stream.Signature({die, block}))
        Blocks whose last page has been allocated.
    pages_per_block : In(11)
        Geometry (from the parameter page), at most 1024.
    seq_load : In(stream.Signature(64))
        Sets the next sequence number (after recovery, before any request:
        a page already offered keeps its own).
    force : In(1), force_die : In(die bits)
        While ``force`` is high, ``alloc`` offers the next page of ``force_die`` only (not
        valid if that die has no open block): a PAD page for an exposed MLC lower page
        (:mod:`rtl.ftl.pairing`) must land on that die.  Seen through registers, as
        ``demand`` is: set with the demand, held while it lasts.
    seq_next : Out(64)
        The sequence number the next page taken gets (the offered page's, else
        the next to choose): every page handed out so far has a smaller one
        (the firmware's checkpoint floor).
    starved : Out(1)
        No die has an open block or a queued free block, and none is being pushed.
    open : Out(dies)
        Die ``d`` has an open block.
    free_level : Out(dies * bits)
        Queued free blocks per die (``free_level.word_select(d, bits)``).
    """

    def __init__(self, *, channels: int, ways: int, luns: int = 1, free_depth: int = 4):
        for name, v in (("channels", channels), ("ways", ways), ("luns", luns)):
            exact_log2(v)
        self.channels, self.ways, self.luns = channels, ways, luns
        self.dies = channels * ways * luns
        self.die_bits = max(1, ceil_log2(self.dies))
        self.free_depth = free_depth
        self.level_bits = ceil_log2(free_depth + 1)
        block_bits = BLOCK_BITS
        die_block = data.StructLayout({"die": self.die_bits, "block": block_bits})
        super().__init__({
            "free": In(stream.Signature(die_block)),
            "alloc": Out(stream.Signature(data.StructLayout({"ppa": layouts.PPA, "seq": 64}))),
            "closed": Out(stream.Signature(die_block)),
            "pages_per_block": In(PAGE_BITS + 1),
            "seq_load": In(stream.Signature(64)),
            "demand": In(1),
            "force": In(1),
            "force_die": In(self.die_bits),
            "seq_next": Out(64),
            "starved": Out(1),
            "open": Out(self.dies),
            "free_level": Out(self.dies * self.level_bits),
        })

    def elaborate(self, platform):
        m = Module()
        dies = self.dies
        block_bits = BLOCK_BITS
        ch_bits, way_bits = exact_log2(self.channels), exact_log2(self.ways)

        queues = []
        for d in range(dies):
            q = fifo.SyncFIFOBuffered(width=block_bits, depth=self.free_depth)
            m.submodules[f"free{d}"] = q
            queues.append(q)
            m.d.comb += [
                q.w_data.eq(self.free.payload.block),
                q.w_en.eq(self.free.valid & (self.free.payload.die == d)),
                self.free_level.word_select(d, self.level_bits).eq(q.level),
            ]
        free_ready = Array(q.w_rdy for q in queues)
        m.d.comb += self.free.ready.eq(free_ready[self.free.payload.die])

        is_open = Array(Signal(name=f"open{d}") for d in range(dies))
        block = Array(Signal(block_bits, name=f"block{d}") for d in range(dies))
        page = Array(Signal(PAGE_BITS, name=f"page{d}") for d in range(dies))

        # A die without an open block opens one from its FIFO (one die per cycle).
        for d, q in enumerate(queues):
            with m.If(~is_open[d] & q.r_rdy):
                m.d.comb += q.r_en.eq(1)
                m.d.sync += [is_open[d].eq(1), block[d].eq(q.r_data), page[d].eq(0)]

        m.d.comb += self.open.eq(Cat(*is_open))

        seq = Signal(64)
        offered = Signal()          # a chosen page waits in ``alloc.payload`` (registers)
        m.d.comb += [self.alloc.valid.eq(offered), self.seq_load.ready.eq(1),
                     self.seq_next.eq(Mux(offered, self.alloc.payload.seq, seq))]

        # Round-robin: the first open die at or after `next_die` (or the forced die).
        next_die = Signal(self.die_bits)
        rr_pick = Signal(self.die_bits)
        rr_valid = Signal()
        for k in reversed(range(dies)):
            d = (next_die + k)[:self.die_bits]
            with m.If(is_open[d]):
                m.d.comb += [rr_pick.eq(d), rr_valid.eq(1)]
        # not starved from the cycle a block is offered: the FIFO shows it a cycle or two later, and the log
        # writer gives a request up while starved (ftl.host_enable.no_blocks)
        m.d.comb += self.starved.eq(~rr_valid & ~Cat(*(q.level != 0 for q in queues)).any() & ~self.free.valid)
        # the requester's wishes through registers: it sits across the die, and they fan out to every
        # register the choice loads
        wanted, forced, forced_die = Signal(), Signal(), Signal.like(self.force_die)
        m.d.sync += [wanted.eq(self.demand & ~(self.alloc.valid & self.alloc.ready)),
                     forced.eq(self.force), forced_die.eq(self.force_die)]
        pick = Signal(self.die_bits)
        pick_valid = Signal()
        with m.If(forced):
            m.d.comb += [pick.eq(forced_die), pick_valid.eq(is_open[forced_die])]
        with m.Else():
            m.d.comb += [pick.eq(rr_pick), pick_valid.eq(rr_valid)]

        # The block being closed waits in a one-entry register for `closed`.
        closing = Signal()
        closing_die = Signal(self.die_bits)
        closing_block = Signal(block_bits)
        m.d.comb += [
            self.closed.valid.eq(closing),
            self.closed.payload.die.eq(closing_die),
            self.closed.payload.block.eq(closing_block),
        ]
        with m.If(self.closed.valid & self.closed.ready):
            m.d.sync += closing.eq(0)

        # Choose while a requester waits and nothing is offered; not while a closed block is still unreported (so
        # none is lost) or a seq is being loaded.
        choose = Signal()
        m.d.comb += choose.eq(wanted & ~offered & pick_valid & ~self.seq_load.valid & ~closing)
        with m.If(self.alloc.valid & self.alloc.ready):
            m.d.sync += offered.eq(0)
        ppa = self.alloc.payload.ppa.ppa
        last_page = page[pick] == self.pages_per_block - 1
        with m.If(choose):
            m.d.sync += [
                offered.eq(1),
                ppa.channel.eq(pick[:ch_bits] if ch_bits else 0),
                ppa.way.eq(pick[ch_bits:ch_bits + way_bits] if way_bits else 0),
                ppa.lun.eq(pick[ch_bits + way_bits:] if self.luns > 1 else 0),
                ppa.block.eq(block[pick]),
                ppa.page.eq(page[pick]),
                self.alloc.payload.seq.eq(seq),
                seq.eq(seq + 1), next_die.eq(pick + 1),
            ]
            with m.If(last_page):
                m.d.sync += [is_open[pick].eq(0), closing.eq(1), closing_die.eq(pick),
                             closing_block.eq(block[pick])]
            with m.Else():
                m.d.sync += page[pick].eq(page[pick] + 1)
        # the firmware loads the seq before the core takes requests (after recovery): nothing is offered then
        with m.If(self.seq_load.valid):
            m.d.sync += seq.eq(self.seq_load.payload)
        return m
