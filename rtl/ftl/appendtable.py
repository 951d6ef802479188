"""The append table: the appends whose pages the log holds, and the tokens that name them.

``slots`` append slots.  A slot is *held* from its append's first page until the publisher frees its
pending entries (``freed``): its pages may still be needed, so the slot is not reused and a map
checkpoint's floor stays at or below its first vseq (``floor``, from an
:class:`~rtl.ftl.floorscan.FloorScanner`).  A slot is *live* while its token is valid: from the
token's minting until a REMAP or RELEASE naming it is accepted (``consume``) or the publisher drops
the append (``dropped``).

A token (``spec.TOKEN``) is (slot, generation, check).  The generation moves on each time the slot
is reused (1 after 0xFFFF, never 0), so a spent token does not name the slot's next append.  The check
is a MAC: SipHash-2-4 (``rtl.lib.siphash``) of ``spec.TOKEN_MAC_IN`` (first vseq, slot, generation,
owner) under ``key``, drawn at boot by the TRNG, truncated to 32 bits (``spec.token_check``).  A CRC
would do against a guess, but not against a host that knows the format, sees its own tokens and can
estimate sequence numbers: it could compute another host's token.  Without the key it cannot: every
check it makes up matches with probability 2^-32, and it learns nothing from a refusal.  The table
keeps (generation, pages, check, owner) per slot; a token is valid when its slot is live and its
generation and check match, and only its owner (the queue pair that appended) may use it.  Minting
takes the MAC's 25 cycles, next to the append's page programs.

Per slot the table keeps the first vseq and the meta (generation, pages, check) in memories, read
through one synchronous port (``read_addr``: the words appear the next cycle).
"""

from amaranth import Module, Mux, Signal
from amaranth.lib import data, memory, wiring
from amaranth.lib.wiring import In, Out

from atomflash import spec
from rtl import spec as layouts

from rtl.lib.priority import lowest_set
from rtl.lib.siphash import SipHash

from .floorscan import FloorScanner

__all__ = ["AppendTable", "AppendViewSignature", "VIEW_META", "meta_layout"]


VIEW_META = data.StructLayout({"gen": 16, "nlb": 32, "check": 32})


def meta_layout(owner_bits: int) -> data.StructLayout:
    """What the table keeps per slot beside its first vseq: VIEW_META and the owner."""
    return data.StructLayout({**dict(VIEW_META.members), "owner": owner_bits})


class AppendViewSignature(wiring.Signature):
    """A look at one append slot (from the viewer's side): ``first``, ``meta`` and ``owner`` of ``slot``
    the cycle after it is presented, ``live`` and ``held`` of it at once: what GET_LOG writes."""

    def __init__(self, slots: int):
        super().__init__({"slot": Out(range(slots)), "first": In(64), "meta": In(VIEW_META), "owner": In(16),
                          "live": In(1), "held": In(1)})


class AppendTable(wiring.Component):
    """The append slots and their tokens; see the module docstring.

    Parameters
    ----------
    slots : int
        Appends open at once.
    owner_bits : int
        Width of a queue pair's number (an append's owner).
    scan_length : int
        Cycles per pass of the floor's scanner (default ``slots``; see :mod:`rtl.ftl.floorscan`).

    Ports
    -----
    has_free : Out(1), free_slot : Out(range(slots))
        The lowest slot not held, a cycle behind ``held``.
    live, held : Out(slots)
        The slots whose token is valid / whose pages may still be needed.
    key : In(128)
        The MAC's key (``spec.token_check``), held from boot; a token minted under another key is
        refused.
    read_addr : In(range(slots)) / read_first : Out(64), read_meta : Out(meta_layout(owner_bits))
        A slot's first vseq and meta, the cycle after its address.
    view : In(AppendViewSignature(slots))
        A second read port, for GET_LOG.
    next_gen : Out(16)
        The generation the read slot's next token gets.
    hold : In(1), hold_slot : In(range(slots)), hold_first : In(64)
        The append in that slot took its first page, with this vseq: held.
    mint : In(1), mint_slot : In(range(slots)), mint_gen : In(16), mint_first : In(64), mint_nlb : In(32),
    mint_owner : In(owner_bits)
        Make the token of an append (the inputs hold until ``minted``).
    minted : Out(1), token : Out(spec.TOKEN)
        The token is ready (one cycle): the slot is live from the next.
    consume : In(1), consume_slot : In(range(slots))
        A REMAP or RELEASE naming the slot's token was accepted: not live.
    dropped : In(1), dropped_slot : In(range(slots))
        The publisher dropped the slot's append: not live (from the next cycle on).
    freed : In(1), freed_slot : In(range(slots))
        The publisher freed the slot's entries: not held.
    floor : Out(64), floor_passes : Out(32)
        The oldest held slot's first vseq (all ones: none) and the scanner's passes.
    """

    def __init__(self, slots: int, owner_bits: int = 1, scan_length: int | None = None):
        self.slots, self.owner_bits, self.scan_length = slots, owner_bits, scan_length
        self.meta_layout = meta = meta_layout(owner_bits)
        S = range(slots)
        super().__init__({
            "has_free": Out(1), "free_slot": Out(S), "live": Out(slots), "held": Out(slots),
            "key": In(128), "read_addr": In(S), "read_first": Out(64), "read_meta": Out(meta),
            "view": In(AppendViewSignature(slots)), "next_gen": Out(16),
            "hold": In(1), "hold_slot": In(S), "hold_first": In(64),
            "mint": In(1), "mint_slot": In(S), "mint_gen": In(16), "mint_first": In(64), "mint_nlb": In(32),
            "mint_owner": In(owner_bits),
            "minted": Out(1), "token": Out(layouts.TOKEN),
            "consume": In(1), "consume_slot": In(S),
            "dropped": In(1), "dropped_slot": In(S),
            "freed": In(1), "freed_slot": In(S),
            "floor": Out(64), "floor_passes": Out(32),
        })

    def elaborate(self, platform):
        m = Module()
        A = self.slots
        m.submodules.first = first = memory.Memory(shape=64, depth=A, init=[])
        first_w, first_r, first_scan = first.write_port(), first.read_port(), first.read_port()
        first_view = first.read_port()
        m.submodules.meta = meta = memory.Memory(shape=self.meta_layout, depth=A, init=[])
        meta_w, meta_r, meta_view = meta.write_port(), meta.read_port(), meta.read_port()
        view = self.view
        m.d.comb += [first_view.addr.eq(view.slot), meta_view.addr.eq(view.slot), view.first.eq(first_view.data),
                     view.meta.gen.eq(meta_view.data.gen), view.meta.nlb.eq(meta_view.data.nlb),
                     view.meta.check.eq(meta_view.data.check), view.owner.eq(meta_view.data.owner), view.live.eq(self.live.bit_select(view.slot, 1)),
                     view.held.eq(self.held.bit_select(view.slot, 1))]
        m.d.comb += [first_r.addr.eq(self.read_addr), meta_r.addr.eq(self.read_addr),
                     self.read_first.eq(first_r.data), self.read_meta.eq(meta_r.data),
                     self.next_gen.eq(Mux(meta_r.data.gen >= 0xFFFF, 1, meta_r.data.gen + 1))]
        # the lowest free slot from registers, a cycle behind ``held`` (a priority search over every
        # slot, then the executor's slot choice, were one long path; the executor takes a slot only
        # several cycles after it minted the last one)
        has_free, free_slot = lowest_set(m, [~self.held[i] for i in range(A)])
        m.d.sync += [self.has_free.eq(has_free), self.free_slot.eq(free_slot)]

        m.submodules.scanner = scanner = FloorScanner(A, self.scan_length)
        m.d.comb += [first_scan.addr.eq(scanner.addr), scanner.data.eq(first_scan.data), scanner.hold.eq(self.held),
                     self.floor.eq(scanner.floor), self.floor_passes.eq(scanner.passes)]

        # the publisher's changes first: the executor's of the same cycle name other slots
        with m.If(self.freed):
            m.d.sync += self.held.bit_select(self.freed_slot, 1).eq(0)
        # a drop takes effect a cycle after it comes (the publisher's news through the executor's slot
        # tables was one long path into these bits); a dropped append's slot is minted again only after
        # the publisher frees it
        dropping, dropping_slot = Signal(), Signal.like(self.dropped_slot)
        m.d.sync += [dropping.eq(self.dropped), dropping_slot.eq(self.dropped_slot)]
        with m.If(dropping):
            m.d.sync += self.live.bit_select(dropping_slot, 1).eq(0)
        with m.If(self.consume):
            m.d.sync += self.live.bit_select(self.consume_slot, 1).eq(0)
        with m.If(self.hold):
            m.d.comb += [first_w.addr.eq(self.hold_slot), first_w.data.eq(self.hold_first), first_w.en.eq(1)]
            m.d.sync += self.held.bit_select(self.hold_slot, 1).eq(1)

        # minting: TOKEN_MAC_IN through SipHash-2-4 under the key, then the token and the slot's meta
        m.submodules.mac = mac = SipHash(words=spec.TOKEN_MAC_IN.size // 8)
        mac_in = Signal(layouts.TOKEN_MAC_IN)
        m.d.comb += [mac.key.eq(self.key), mac_in.first_vseq.eq(self.mint_first), mac_in.handle.eq(self.mint_slot),
                     mac_in.gen.eq(self.mint_gen), mac_in.owner.eq(self.mint_owner)]
        word = Signal(range(mac.words))
        check = Signal(32)
        with m.FSM(name="mint"):
            with m.State("IDLE"):
                with m.If(self.mint):
                    m.d.sync += word.eq(0)
                    m.next = "FEED"
            with m.State("FEED"):
                m.d.comb += [mac.message.payload.eq(mac_in.as_value().word_select(word, 64)), mac.message.valid.eq(1)]
                with m.If(mac.message.ready):
                    m.d.sync += word.eq(word + 1)
                    with m.If(word == mac.words - 1):
                        m.next = "DIGEST"
            with m.State("DIGEST"):
                m.d.comb += mac.digest.ready.eq(1)
                with m.If(mac.digest.valid):
                    m.d.sync += check.eq(mac.digest.payload[:32])
                    m.next = "DONE"
            with m.State("DONE"):
                m.d.comb += [self.minted.eq(1), self.token.handle.eq(self.mint_slot), self.token.gen.eq(self.mint_gen),
                             self.token.check.eq(check),
                             meta_w.addr.eq(self.mint_slot), meta_w.data.gen.eq(self.mint_gen),
                             meta_w.data.nlb.eq(self.mint_nlb), meta_w.data.check.eq(check),
                             meta_w.data.owner.eq(self.mint_owner), meta_w.en.eq(1)]
                m.d.sync += self.live.bit_select(self.mint_slot, 1).eq(1)
                m.next = "IDLE"
        return m
