"""The volatile write cache's table: which LBAs have their newest data in a SoC-memory page.

``entries`` pages at ``base`` (entry ``e`` at ``base + e * page_data``), each in one of four states:

=========  ==========================================================================================
FREE       holds nothing
FILL       claimed by the executor, which is copying a host page into it; invisible to lookups
DIRTY      the newest data of its LBA, not on flash yet
DESTAGING  in a destage group not yet published: still the LBA's newest data, its page must not
           change
=========  ==========================================================================================

An LBA has at most one DIRTY and one DESTAGING entry.  A fill that replaces a DIRTY entry frees it
when it completes (coalesced); a WRITE to a DESTAGING LBA does not wait for the destage: it fills a
new entry, the newer data (lookups prefer DIRTY), and marks the destaging one superseded, so that a
dropped destage frees it instead of making it DIRTY again.  The scan passes over a DIRTY entry whose
LBA is still destaging, so two destages of one LBA are never in flight.  The destage policy is least recently written first: every entry carries a stamp of
its fill order, and the oldest DIRTY entry is found by a scan of one entry per cycle.  The cache asks
for a destage (``watermark``) when fewer than two stripes of pages are free or about to be (two
stripes in flight keep every die busy) and at least a stripe is dirty; the rest stays resident, to be
coalesced.  With ``deep`` (MLC paired pages) it asks while fewer than all but one stripe are: a lower
page completes only once its word line's upper page, three pages later on its die, is programmed, so
a destage group waits for the three after it, and the log needs many more pages in flight than two
stripes to keep the dies busy; coalescing gives way to that.

The reader and the executor share the pages under one lock (``lookup.req``/``lookup.grant`` and
``lock_req``/``lock_granted``): the reader holds it from its lookups to the end of a command that hit,
so a page freed under it is not refilled meanwhile; the executor holds it while it copies into a
claimed page.

A destage group that the publisher drops puts its entries back to DIRTY (destaged later) and sets
``failed`` (``failed_no_page`` when it found no page), which the next FLUSH reports once.
"""

from amaranth import Array, Cat, Module, Mux, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

__all__ = ["CacheLookupSignature", "WriteCacheTable", "FREE", "FILL", "DIRTY", "DESTAGING"]

FREE, FILL, DIRTY, DESTAGING = range(4)


class CacheLookupSignature(wiring.Signature):
    """The reader's side of the cache: the lock, then lookups while it is held.

    Members
    -------
    req : Out(1) / grant : In(1)
        The reader wants / holds the cache-page lock.
    lba : Out(lba_bits) / hit : In(1), addr : In(32)
        An LBA's DIRTY or DESTAGING entry (combinational): the address of its page.
    """

    def __init__(self, lba_bits: int):
        super().__init__({"req": Out(1), "grant": In(1), "lba": Out(lba_bits), "hit": In(1), "addr": In(32)})


class WriteCacheTable(wiring.Component):
    """The write cache's entries; see the module docstring.

    Parameters
    ----------
    entries : int
        Cache pages.
    lba_bits, slot_bits : int
        Widths of an LBA and of a publisher slot number.
    page_data : int
        Bytes per cache page.
    stripe : int
        Pages of one destage group (channels x ways).

    Ports
    -----
    base : In(32)
        The first page's address in SoC memory.
    lookup : In(CacheLookupSignature)
        The reader.
    lock_req : In(1) / lock_granted : Out(1)
        The executor wants / holds the cache-page lock (to copy into its claimed entry).
    find_lba : In(lba_bits) / found, found_destaging : Out(1), found_entry : Out(range(entries))
        The executor's lookup (combinational).
    has_free : Out(1)
        A FREE entry exists.
    claim : In(1)
        Claim the lowest FREE entry for ``find_lba`` (FILL): it becomes ``fill_entry``, and the entry
        ``find_lba`` has now, if any, is the one the fill replaces.
    fill_entry : Out(range(entries)), fill_addr : Out(32)
        The claimed entry and its page.
    fill_done : In(1) / fill_abort : In(1)
        The claimed page is filled: DIRTY, the replaced entry FREE / the fill failed: FREE again.
    deep : In(1)
        Destage whenever a stripe is dirty and all but one stripe are not yet free or destaging (MLC
        paired pages) instead of keeping two stripes free or destaging.
    watermark : Out(1)
        A destage is due.
    scan : In(1) / scan_last : Out(1)
        One step of the scan for the oldest DIRTY entry; ``scan_last``: this step is the scan's last.
    oldest_found : Out(1), oldest_lba : Out(lba_bits), oldest_addr : Out(32)
        The scan's result, valid after its last step until ``take``.
    take : In(1), take_slot : In(slot_bits)
        The oldest DIRTY entry joins the destage group in ``take_slot`` (DESTAGING).
    group_done : In(1), group_pages : In
        A destage group of ``group_pages`` pages was issued (counters).
    published : In(1), published_slot : In(slot_bits), published_dropped : In(1), published_no_page : In(1)
        A destage group was published (its entries FREE) or dropped (DIRTY again; ``failed``).
    failure_reported : In(1)
        A FLUSH was published: ``failed`` clears.
    failed : Out(1), failed_no_page : Out(1)
        A destage group was dropped since the last FLUSH (for want of a page).
    dirty : Out(range(entries + 1))
        DIRTY entries.
    busy : Out(1)
        A destage is in flight or due (``watermark``): the cache will take log pages with no host
        command in the core.  Low, it stays low until a write comes.
    filled, coalesced, destaged, stripes : Out(32)
        Pages filled, DIRTY entries replaced by a newer fill, pages destaged, destage groups that were
        a whole stripe.
    """

    def __init__(self, *, entries: int, lba_bits: int, slot_bits: int, page_data: int, stripe: int):
        if not 1 <= stripe <= entries:
            raise ValueError("the write cache must hold at least one stripe")
        self.entries, self.page_data, self.stripe = entries, page_data, stripe
        self.deep_level = max(2 * stripe, entries - stripe)     # free or destaging pages ``deep`` keeps
        W = range(entries)
        super().__init__({
            "base": In(32),
            "lookup": In(CacheLookupSignature(lba_bits)),
            "lock_req": In(1), "lock_granted": Out(1),
            "find_lba": In(lba_bits), "found": Out(1), "found_destaging": Out(1), "found_entry": Out(W),
            "has_free": Out(1),
            "claim": In(1), "fill_entry": Out(W), "fill_addr": Out(32), "fill_done": In(1), "fill_abort": In(1),
            "deep": In(1), "watermark": Out(1),
            "scan": In(1), "scan_last": Out(1),
            "oldest_found": Out(1), "oldest_lba": Out(lba_bits), "oldest_addr": Out(32),
            "take": In(1), "take_slot": In(slot_bits),
            "group_done": In(1), "group_pages": In(range(stripe + 1)),
            "published": In(1), "published_slot": In(slot_bits), "published_dropped": In(1),
            "published_no_page": In(1),
            "failure_reported": In(1), "failed": Out(1), "failed_no_page": Out(1),
            "dirty": Out(range(entries + 1)), "busy": Out(1),
            "filled": Out(32), "coalesced": Out(32), "destaged": Out(32), "stripes": Out(32),
        })

    def elaborate(self, platform):
        m = Module()
        W = self.entries
        state = [Signal(2, name=f"state{i}") for i in range(W)]
        lba = [Signal.like(self.find_lba, name=f"lba{i}") for i in range(W)]
        stamp = [Signal(32, name=f"stamp{i}") for i in range(W)]      # fill order: least recently written first
        slot = [Signal.like(self.take_slot, name=f"slot{i}") for i in range(W)]
        STATE, LBA, STAMP, SLOT = Array(state), Array(lba), Array(stamp), Array(slot)
        superseded = Array(Signal(name=f"superseded{i}") for i in range(W))   # a newer fill of its LBA completed

        def page(e):
            return self.base + e * self.page_data

        n_free, n_destaging = Signal(range(W + 1)), Signal(range(W + 1))
        m.d.comb += [n_free.eq(sum(s == FREE for s in state)), self.dirty.eq(sum(s == DIRTY for s in state)),
                     n_destaging.eq(sum(s == DESTAGING for s in state)),
                     self.watermark.eq((n_free + n_destaging < Mux(self.deep, self.deep_level, 2 * self.stripe)) &
                                       (self.dirty >= self.stripe)),
                     self.busy.eq((n_destaging != 0) | self.watermark)]
        free_entry = Signal(range(W))
        for i in reversed(range(W)):
            with m.If(state[i] == FREE):
                m.d.comb += [free_entry.eq(i), self.has_free.eq(1)]

        def find(key, hit, e):
            # an LBA has at most one DIRTY and one DESTAGING entry (a write while its page destages fills a
            # new one, which the scan keeps back until that destage is published): the DIRTY one is newer
            for wanted in (DESTAGING, DIRTY):
                for i in reversed(range(W)):
                    with m.If((state[i] == wanted) & (lba[i] == key)):
                        m.d.comb += [hit.eq(1), e.eq(i)]

        reader_entry = Signal(range(W))
        find(self.lookup.lba, self.lookup.hit, reader_entry)
        m.d.comb += self.lookup.addr.eq(page(reader_entry))
        find(self.find_lba, self.found, self.found_entry)
        m.d.comb += self.found_destaging.eq(self.found & (STATE[self.found_entry] == DESTAGING))

        # the cache-page lock: a request is granted from the next cycle; the reader first when both ask
        with m.FSM(name="lock"):
            with m.State("FREE"):
                with m.If(self.lookup.req):
                    m.next = "READER"
                with m.Elif(self.lock_req):
                    m.next = "EXECUTOR"
            with m.State("READER"):
                m.d.comb += self.lookup.grant.eq(1)
                with m.If(~self.lookup.req):
                    m.next = "FREE"
            with m.State("EXECUTOR"):
                m.d.comb += self.lock_granted.eq(1)
                with m.If(~self.lock_req):
                    m.next = "FREE"

        # fills
        replaces, supersedes, replaced = Signal(), Signal(), Signal(range(W))
        next_stamp = Signal(32)
        m.d.comb += self.fill_addr.eq(page(self.fill_entry))
        with m.If(self.claim):
            m.d.sync += [self.fill_entry.eq(free_entry), replaces.eq(self.found & ~self.found_destaging),
                         supersedes.eq(self.found_destaging), replaced.eq(self.found_entry), superseded[free_entry].eq(0),
                         STATE[free_entry].eq(FILL), LBA[free_entry].eq(self.find_lba)]
        with m.If(self.fill_abort):
            m.d.sync += STATE[self.fill_entry].eq(FREE)
        with m.If(self.fill_done):
            m.d.sync += [STATE[self.fill_entry].eq(DIRTY), STAMP[self.fill_entry].eq(next_stamp),
                         next_stamp.eq(next_stamp + 1), self.filled.eq(self.filled + 1)]
            # (a superseded destage dropped during the copy is DIRTY again, and as stale as a replaced one)
            with m.If(replaces | (supersedes & (STATE[replaced] == DIRTY))):
                m.d.sync += [STATE[replaced].eq(FREE), self.coalesced.eq(self.coalesced + 1)]
            with m.Elif(supersedes):
                m.d.sync += superseded[replaced].eq(1)

        # the oldest DIRTY entry, one entry a cycle; the index wraps to 0 after the last step
        at, best = Signal(range(W)), Signal(range(W))
        best_stamp = Signal(32)
        m.d.comb += [self.scan_last.eq(at == W - 1), self.oldest_lba.eq(LBA[best]), self.oldest_addr.eq(page(best))]
        # a DIRTY page whose LBA is still destaging waits for that destage's publication: two destages of
        # one LBA in flight would leave the reader two candidates and no order between them
        lba_destaging = Signal()
        m.d.comb += lba_destaging.eq(Cat(*((s == DESTAGING) & (a == LBA[at]) for s, a in zip(state, lba))).any())
        with m.If(self.scan):
            with m.If((STATE[at] == DIRTY) & ~lba_destaging & (~self.oldest_found | (STAMP[at] < best_stamp))):
                m.d.sync += [best.eq(at), best_stamp.eq(STAMP[at]), self.oldest_found.eq(1)]
            m.d.sync += at.eq(Mux(at == W - 1, 0, at + 1))
        with m.If(self.take):
            m.d.sync += [STATE[best].eq(DESTAGING), SLOT[best].eq(self.take_slot), self.oldest_found.eq(0),
                         self.destaged.eq(self.destaged + 1)]
        with m.If(self.group_done & (self.group_pages == self.stripe)):
            m.d.sync += self.stripes.eq(self.stripes + 1)

        # a destage group published: its pages are on flash and bound, its entries free (dropped: DIRTY again)
        with m.If(self.published):
            for i in range(W):
                with m.If((state[i] == DESTAGING) & (slot[i] == self.published_slot)):
                    newer = superseded[i] | (self.fill_done & supersedes & (replaced == i))
                    m.d.sync += state[i].eq(Mux(self.published_dropped & ~newer, DIRTY, FREE))
            with m.If(self.published_dropped):
                m.d.sync += [self.failed.eq(1), self.failed_no_page.eq(self.published_no_page)]
        with m.Elif(self.failure_reported):
            m.d.sync += [self.failed.eq(0), self.failed_no_page.eq(0)]
        return m
