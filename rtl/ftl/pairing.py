"""MLC paired pages: a lower page counts as written only when its word line is.

On a two-bit-per-cell part every word line holds two pages, programmed at
different times: first the *lower* page, a little later the *upper* page
(the order is :func:`atomflash.spec.mlc_paired_lower`: word line 0 holds
pages 0 and 2, word line n pages 2n-1 and 2n+2, the last ppb-3 and ppb-1).
Programming the upper page moves the cells of the lower page again, so a
power cut in the middle of it can destroy the lower page's data -- data the
host may have been told was safe (DESIGN.md trap 4; the NAND model does
exactly this with ``mlc_paired``).

The cure here needs no extra flash writes while the log is busy and no
change anywhere else in the core: **a lower page's program completion is
held back until the upper page of its word line has completed.**  Everything
downstream -- publishing a binding, acknowledging a command, a GC rebind,
the end of a FLUSH -- waits for the completion, so nothing ever names a
lower page that a later cut could still damage: the map, a checkpoint and
the host only ever see pages whose word line is complete.  A cut during the
upper page then destroys only data nobody was told about; recovery does not
trust a lower page whose upper page is not intact (``af_rec_mlc_filter``,
docs/recovery.md), and a group with such a member is not proven.

Held completions wait for more log pages on the same die.  When the log goes
idle with a die's lower page still exposed, that completion would wait
forever, so the core programs **PAD pages** (``Kind.PAD``: no payload, bound
to nothing, skipped by recovery and GC) on that die until the upper page is
issued.  A PAD costs a program, so it is issued only after ``pad_idle``
cycles with no page requested (a busy log pads nothing), and only on a die
with no page in flight: while a die programs, that page or the host's next
one may still complete the word line with data, and a PAD queued behind it
would hold the die a whole program more, with every page sent there next
behind it.

An idle log also *pre-pads*: a die whose next page is a lower page gets one
PAD there, so the next write that arrives alone lands on an upper page --
whose word line is complete the moment it is programmed.  A queue-depth-1
writer then pays one PAD per write, done while the log waits for it, and
the write's latency stays one program; without pre-padding every lone write
would land on a lower page and wait for three more programs (PAD, PAD,
upper page).  Lower pages get data only while writes come faster than
``pad_idle``, and then later writes complete their word lines.

Two parts:

* the **exposure tracker** watches pages as the log writer takes them
  (``issued``): a non-PAD lower page exposes its die until the die's upper
  page for it is taken, and counts the die's pages in flight until their
  completions come back; once the writer has been idle (``writer_idle``) for
  ``pad_idle`` cycles ``pad`` asks for a PAD page on the lowest exposed die
  with none in flight, else on the lowest such open die whose next page is
  a lower page (an offer stands until taken);
* the **completion gate** sits on the log writer's ``done`` stream: an OK
  lower page's completion (not a PAD's) is held per die; an upper page's
  completion first releases the held completion of its lower page, then
  passes.  When the upper page's program failed, the lower page's completion
  leaves with the same failure: the word line is not written, recovery will
  not trust the lower page (docs/recovery.md), and the requester programs its
  data again elsewhere, as for any failed page.  A channel completes each target's operations in issue order, so
  per die at most two lower pages are ever held (lower pages 2j+1 and 2j+3
  wait for uppers 2j+4 and 2j+6) and the oldest held one is always the one
  the next upper page releases.

With ``mlc`` low (SLC parts) both parts are transparent.
"""

from amaranth import Array, Cat, Module, Mux, Signal
from amaranth.lib import data, memory, stream, wiring
from amaranth.lib.wiring import In, Out
from amaranth.utils import ceil_log2

from atomflash.spec import NandResult
from rtl import spec as layouts
from rtl.lib.lutram import read_async

from .allocator import PAGE_BITS
from .logwriter import PAGE_DONE

__all__ = ["PairedPages", "BlockEnds", "upper_of", "paired_lower"]


class BlockEnds:
    """A block's last page (``pages_per_block - 1``) and the last lower page (``pages_per_block - 3``),
    worked out once into registers: ``pages_per_block`` is set once, and subtracting it in front of
    every compare put a carry chain at the head of the gate's paths."""

    def __init__(self, m, pages_per_block):
        self.last = Signal(PAGE_BITS + 1, name="last_page")
        self.last_lower = Signal(PAGE_BITS + 1, name="last_lower_page")
        m.d.sync += [self.last.eq(pages_per_block - 1), self.last_lower.eq(pages_per_block - 3)]


def paired_lower(page, ends):
    """``spec.mlc_paired_lower`` as logic: ``(is_upper, lower)``; ``ends``: :class:`BlockEnds`."""
    is_upper = (page == 2) | (page == ends.last) | ((page >= 4) & ~page[0])
    lower = Mux(page == 2, 0, Mux(page == ends.last, ends.last_lower, page - 3))
    return is_upper, lower[:len(page)]


def upper_of(page, ends):
    """``spec.mlc_upper_of`` as logic: ``(is_lower, upper)``; ``ends``: :class:`BlockEnds`."""
    is_lower = (page == 0) | (page[0] & (page <= ends.last_lower))
    upper = Mux(page == 0, 2, Mux(page == ends.last_lower, ends.last, page + 3))
    return is_lower, upper[:len(page)]


class PairedPages(wiring.Component):
    """Hold lower-page completions until their word line is complete; ask for PAD pages.

    Parameters
    ----------
    channels, ways, luns : int
        The allocator's dies: die ``(lun * ways + way) * channels + channel``.
    pad_tag : int
        The tag bit PAD pages carry (:data:`rtl.ftl.logport.PAD_TAG`; their completions are never held).
    pad_idle : int
        Cycles the writer must have been idle before a PAD page is asked for.

    Ports
    -----
    mlc : In(1)
        The NAND pairs pages; low: every completion passes, no PAD is asked for.
    pages_per_block : In(PAGE_BITS + 1)
    issued : In(stream {ppa, pad})
        A page the log writer took (observed: ``ready`` is always high).
    writer_idle : In(1)
        No page request is waiting for the log writer.
    open : In(dies)
        The allocator's dies with an open block (a pre-pad needs one).
    pad : Out(stream {die})
        A die with an exposed lower page; a transfer means a PAD page for it was taken.
    done_in : In(stream of PAGE_DONE)
        The log writer's completions.
    done_out : Out(stream of PAGE_DONE)
        The same completions, lower pages' ones held back as described.
    held : Out(range)
        Completions held now (all dies).
    """

    def __init__(self, *, channels: int, ways: int, luns: int = 1, pad_tag: int, pad_idle: int = 256):
        self.channels, self.ways, self.luns = channels, ways, luns
        self.dies = channels * ways * luns
        self.die_bits = max(1, ceil_log2(self.dies))
        self.pad_tag, self.pad_idle = pad_tag, pad_idle
        super().__init__({
            "mlc": In(1),
            "pages_per_block": In(PAGE_BITS + 1),
            "issued": In(stream.Signature(data.StructLayout({"ppa": layouts.PPA, "pad": 1}))),
            "writer_idle": In(1),
            "open": In(self.dies),
            "pad": Out(stream.Signature(data.StructLayout({"die": self.die_bits}))),
            "done_in": In(stream.Signature(PAGE_DONE)),
            "done_out": Out(stream.Signature(PAGE_DONE)),
            "held": Out(range(2 * self.dies + 1)),
        })

    def die_of(self, ppa):
        C, W = self.channels, self.ways
        return ((ppa.lun * W + ppa.way) * C + ppa.channel)[:self.die_bits]

    def elaborate(self, platform):
        m = Module()
        D = self.dies
        ends = BlockEnds(m, self.pages_per_block)    # set before any page is programmed

        # -- exposure tracker
        exposed = Signal(D)
        cover = Array(Signal(PAGE_BITS, name=f"cover{d}") for d in range(D))
        # a page taken is looked at a cycle later, from registers: the log writer's request behind it
        # starts at the allocator, and the two made one long path (boards/depth.py)
        m.d.comb += self.issued.ready.eq(1)
        taken = Signal.like(self.issued.payload)
        looking = Signal()
        m.d.sync += [taken.eq(self.issued.payload), looking.eq(self.issued.valid)]
        i_ppa = taken.ppa.ppa
        i_die = self.die_of(i_ppa)
        i_is_lower, i_upper = upper_of(i_ppa.page, ends)
        next_page = Array(Signal(PAGE_BITS, name=f"next{d}") for d in range(D))  # blocks open at page 0
        with m.If(looking):
            with m.If(self.mlc & ~taken.pad & i_is_lower):
                m.d.sync += [exposed.bit_select(i_die, 1).eq(1), cover[i_die].eq(i_upper)]
            with m.Elif(i_ppa.page >= cover[i_die]):
                m.d.sync += exposed.bit_select(i_die, 1).eq(0)
            m.d.sync += next_page[i_die].eq(Mux(i_ppa.page == ends.last, 0, i_ppa.page + 1))
        with m.If(~self.mlc):
            m.d.sync += exposed.eq(0)
        # pages taken and not yet completed, per die: a PAD goes only to a die with none, since a page
        # in flight there (and whatever follows it) may complete the word line with data
        inflight = Array(Signal(range(64), name=f"inflight{d}") for d in range(D))
        busy = Signal(D)
        for d in range(D):
            m.d.comb += busy[d].eq(inflight[d] != 0)
        next_lower = Signal(D)
        for d in range(D):
            m.d.comb += next_lower[d].eq(upper_of(next_page[d], ends)[0] & self.open[d] & ~busy[d])

        idle = Signal(range(self.pad_idle + 1))
        with m.If(~self.writer_idle):
            m.d.sync += idle.eq(0)
        with m.Elif(idle != self.pad_idle):
            m.d.sync += idle.eq(idle + 1)
        # the lowest exposed die first (completions wait for it), else the lowest one to pre-pad.  The
        # offer leaves from registers: the log port hands a PAD's die to the allocator as a forced die,
        # and the allocator's page for it goes to the log writer, so an offer straight from the
        # comparisons here began one long path through all three (boards/depth.py)
        offer_die = Signal.like(self.pad.payload.die)
        for d in reversed(range(D)):
            with m.If(next_lower[d]):
                m.d.comb += offer_die.eq(d)
        exposed_idle = exposed & ~busy
        with m.If(exposed_idle.any()):
            for d in reversed(range(D)):
                with m.If(exposed_idle[d]):
                    m.d.comb += offer_die.eq(d)
        # none while a page taken is still being looked at (the die it names may need no PAD any more),
        # nor right after one was taken: the cycle a page is taken (``issued``, from the allocator's and
        # the log port's registers) and the one it is looked at.  The offer's valid is a register too:
        # the log port loads its request registers on it
        offer = Signal()
        # an offer stands until taken: a completion meanwhile may free a lower die, but the one offered
        # still needs its PAD (only a page taken makes it busy again, and that withdraws the offer)
        with m.If(~(self.pad.valid & ~self.pad.ready)):
            m.d.sync += self.pad.payload.die.eq(offer_die)
        m.d.sync += [offer.eq(self.mlc & (exposed_idle | next_lower).any() & (idle == self.pad_idle)
                              & ~(self.pad.valid & self.pad.ready) & ~self.issued.valid & ~looking)]
        m.d.comb += self.pad.valid.eq(offer)

        # -- completion gate: per die, two held completions, the oldest first.  They live in a small
        # memory (LUT RAM, read without a clock) addressed (die, entry), a FIFO of two per die: as
        # registers, every held bit needed its own shift, load and select logic (about 8 k LUT4 of
        # an 85F for 2 x 2 dies), as memory they cost a few hundred.
        store = memory.Memory(shape=PAGE_DONE, depth=2 * D, init=[])
        m.submodules.store = store
        head_ptr = Signal(D)                     # entry of each die's oldest held completion
        count = Array(Signal(range(3), name=f"held{d}") for d in range(D))
        m.d.comb += self.held.eq(sum(count))

        # a completion is taken into registers first, with what follows from it alone (its die, and
        # whether it is a lower or an upper page and which lower page it pairs with), and decided on a
        # cycle later: deciding as it came put the page arithmetic, the held entry's read and its
        # compare in one path behind the log writer's slice (boards/depth.py).  A completion every three
        # cycles is plenty: one comes per page program.
        x = Signal(PAGE_DONE)
        have = Signal()
        x_die = Signal(self.die_bits)
        x_is_lower, x_is_upper, is_pad = Signal(), Signal(), Signal()
        x_lower = Signal(PAGE_BITS)
        m.d.comb += self.done_in.ready.eq(~have)
        took = self.done_in.valid & ~have
        y_die = self.die_of(self.done_in.payload.ppa.ppa)
        for d in range(D):
            up = looking & (i_die == d)
            down = took & ~self.done_in.payload.no_page & (y_die == d)
            with m.If(up & ~down):
                m.d.sync += inflight[d].eq(inflight[d] + 1)
            with m.Elif(down & ~up & (inflight[d] != 0)):
                m.d.sync += inflight[d].eq(inflight[d] - 1)
        with m.If(self.done_in.valid & ~have):
            y = self.done_in.payload
            y_page = y.ppa.ppa.page
            m.d.sync += [x.eq(y), have.eq(1), x_die.eq(self.die_of(y.ppa.ppa)),
                         x_is_lower.eq(upper_of(y_page, ends)[0]),
                         Cat(x_is_upper, x_lower).eq(Cat(*paired_lower(y_page, ends))),
                         is_pad.eq((y.tag & self.pad_tag) != 0)]
        x_head = head_ptr.bit_select(x_die, 1)
        h = read_async(m, store, Cat(x_head, x_die))
        wr = store.write_port()
        m.d.comb += [wr.addr.eq(Cat(x_head ^ (count[x_die] != 0), x_die)), wr.data.eq(x)]
        releases = (self.mlc & ~x.no_page & x_is_upper & (count[x_die] != 0) & (h.ppa.ppa.page == x_lower)
                    & (h.ppa.ppa.block == x.ppa.ppa.block))
        holds = self.mlc & ~x.no_page & x_is_lower & (x.result == NandResult.OK) & ~x.dma_error & ~is_pad

        # and what it decides is taken into registers too, before anything acts on it: the held entry's
        # read and the page compares were in front of the completion slice's enables
        judged, rel, hold = Signal(), Signal(), Signal()
        held_entry = Signal(PAGE_DONE)
        with m.If(have & ~judged):
            m.d.sync += [judged.eq(1), rel.eq(releases), hold.eq(holds), held_entry.eq(h)]

        pop, push, done = Signal(), Signal(), Signal()
        with m.If(judged & rel):
            # a failed upper page fails its word line: the lower page's data goes again too
            m.d.comb += [self.done_out.valid.eq(1), self.done_out.payload.eq(held_entry), pop.eq(self.done_out.ready)]
            with m.If(x.result != NandResult.OK):
                m.d.comb += self.done_out.payload.result.eq(x.result)
        with m.Elif(judged & hold):
            m.d.comb += [push.eq(count[x_die] != 2), done.eq(push)]
        with m.Elif(judged):
            m.d.comb += [self.done_out.valid.eq(1), self.done_out.payload.eq(x),
                         done.eq(self.done_out.ready)]
        with m.If(done):
            m.d.sync += [have.eq(0), judged.eq(0)]
        with m.If(pop):
            # the upper page goes next, at once: the next held entry is another word line's (a page
            # completes once between erases)
            m.d.sync += rel.eq(0)

        m.d.comb += wr.en.eq(push)
        with m.If(pop):
            m.d.sync += [head_ptr.bit_select(x_die, 1).eq(~x_head), count[x_die].eq(count[x_die] - 1)]
        with m.If(push):
            m.d.sync += count[x_die].eq(count[x_die] + 1)
        return m
