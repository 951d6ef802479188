"""Classic Wishbone B4 (non-pipelined), as LiteX's SoC buses speak it.

amaranth-soc is not installable here, so atomflash carries this one signature.
Addresses are word addresses (``adr`` counts ``data_width``-bit words), ``sel``
has one bit per ``granularity``-bit lane, and a cycle ends on ``ack`` or
``err``.  ``Signature`` is seen from the initiator: an initiator port is
``Out(Signature(...))``, a target port ``In(Signature(...))``.

Incrementing bursts.  ``Signature(burst=True)`` adds the registered-feedback
cycle type tags ``cti`` and ``bte`` (Wishbone B4 section 4).  A classic
access answers its ``ack`` the cycle after it is seen, so the next access
starts a cycle later and a word moves every two cycles.  An initiator that
tags an access ``CTI_INCREMENTING`` says the next access will be at the next
address: a target that bursts (LiteX's ``wishbone.SRAM`` on a bus with
``bursting``) then has that word's answer ready in the cycle right after, and
a word moves every cycle.  The tag is a promise only about the address: an
initiator may still drop ``stb`` after any ``ack`` (the target's early answer
in that cycle is then ignored, as every ``ack`` without ``stb`` is), and
tags its last access ``CTI_END``.  Untagged (``CTI_CLASSIC``) accesses, and
every access to a target that does not burst, stay classic, so a bursting
initiator works everywhere.
"""

from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

# cycle type identifiers (cti)
CTI_CLASSIC = 0b000
CTI_INCREMENTING = 0b010
CTI_END = 0b111


class Signature(wiring.Signature):
    """Wishbone initiator signature.

    Members: ``adr``, ``dat_w``, ``dat_r``, ``sel``, ``cyc``, ``stb``, ``we``,
    ``ack``, ``err``; with ``burst``, also ``cti`` and ``bte`` (always linear
    bursts here: ``bte`` 0).
    """

    def __init__(self, *, addr_width: int, data_width: int = 32, granularity: int = 8, burst: bool = False):
        if data_width % granularity:
            raise ValueError(f"data width {data_width} is not a multiple of granularity {granularity}")
        self.addr_width = addr_width
        self.data_width = data_width
        self.granularity = granularity
        self.burst = burst
        super().__init__({
            **({"cti": Out(3), "bte": Out(2)} if burst else {}),
            "adr": Out(addr_width),
            "dat_w": Out(data_width),
            "dat_r": In(data_width),
            "sel": Out(data_width // granularity),
            "cyc": Out(1),
            "stb": Out(1),
            "we": Out(1),
            "ack": In(1),
            "err": In(1),
        })

    def __eq__(self, other):
        return (isinstance(other, Signature) and self.addr_width == other.addr_width
                and self.data_width == other.data_width and self.granularity == other.granularity
                and self.burst == other.burst)

    def __repr__(self):
        return (f"wishbone.Signature(addr_width={self.addr_width}, data_width={self.data_width}, "
                f"granularity={self.granularity}, burst={self.burst})")


class Arbiter(wiring.Component):
    """Round-robin arbiter: ``n`` classic Wishbone initiators share one bus.

    A grant lasts for a whole bus cycle (``cyc`` high), so an initiator's
    multi-access cycle (e.g. a read-modify-write holding ``cyc``) is never
    split; when the granted initiator drops ``cyc``, the next one in turn
    that requests gets the bus on the following clock.  No initiator waits
    for more than ``n - 1`` other cycles.

    Ports
    -----
    initiators : In(Signature(...)).array(n)
        The initiators' buses (connect each initiator's ``Out`` port here).
    bus : Out(Signature(...))
        The shared bus.

    With ``burst``, initiators and bus carry ``cti``/``bte`` (bursts pass
    through whole: a grant lasts the cycle); :func:`connect` joins a classic
    initiator to a bursting port.
    """

    def __init__(self, n: int, *, addr_width: int, data_width: int = 32, granularity: int = 8, burst: bool = False):
        if n < 1:
            raise ValueError("an arbiter needs at least one initiator")
        self.n = n
        self.burst = burst
        sig = Signature(addr_width=addr_width, data_width=data_width, granularity=granularity, burst=burst)
        super().__init__({"initiators": In(sig).array(n), "bus": Out(sig)})

    def elaborate(self, platform):
        from amaranth.hdl import Module, Signal

        from .roundrobin import round_robin

        m = Module()
        n = self.n
        grant = Signal(range(max(n, 2)))
        busy = Signal()          # the granted initiator is in a cycle
        for i, ini in enumerate(self.initiators):
            with m.If(grant == i):
                m.d.comb += [
                    self.bus.adr.eq(ini.adr), self.bus.dat_w.eq(ini.dat_w), self.bus.sel.eq(ini.sel),
                    self.bus.cyc.eq(ini.cyc), self.bus.stb.eq(ini.stb), self.bus.we.eq(ini.we),
                    ini.ack.eq(self.bus.ack), ini.err.eq(self.bus.err),
                ]
                if self.burst:
                    m.d.comb += [self.bus.cti.eq(ini.cti), self.bus.bte.eq(ini.bte)]
            m.d.comb += ini.dat_r.eq(self.bus.dat_r)
        m.d.comb += busy.eq(self.bus.cyc)
        # re-arbitrate only between cycles: the next requester after the current grant
        following, any_ = round_robin(m, [ini.cyc for ini in self.initiators], grant, n)
        with m.If(~busy & any_):
            m.d.sync += grant.eq(following)
        return m


def word_access(m, bus, adr, dat_w=None):
    """One classic-Wishbone word access on the initiator ``bus``: every lane, ``adr`` a word address; a
    write of ``dat_w`` when it is given, else a read.  Driven combinationally, so call it in each FSM
    state (or branch) that holds the access: the cycle lasts while the state does, and ends when the
    state moves on at ``bus.ack`` (``bus.dat_r`` then holds a read's word) or ``bus.err``."""
    m.d.comb += [bus.adr.eq(adr), bus.sel.eq((1 << len(bus.sel)) - 1), bus.cyc.eq(1), bus.stb.eq(1)]
    if dat_w is not None:
        m.d.comb += [bus.we.eq(1), bus.dat_w.eq(dat_w)]


def connect(m, initiator, target):
    """Join an initiator port to a target port whose signatures differ only in ``burst``: the common
    members are connected; a classic initiator's accesses reach a bursting target as ``CTI_CLASSIC``,
    and a bursting initiator's tags are dropped before a classic target (which then answers every
    access classically: the initiator still works, a word every two cycles)."""
    for name in ("adr", "dat_w", "sel", "cyc", "stb", "we"):
        m.d.comb += getattr(target, name).eq(getattr(initiator, name))
    for name in ("dat_r", "ack", "err"):
        m.d.comb += getattr(initiator, name).eq(getattr(target, name))
    if hasattr(initiator, "cti") and hasattr(target, "cti"):
        m.d.comb += [target.cti.eq(initiator.cti), target.bte.eq(initiator.bte)]


class RegisteredTarget(wiring.Component):
    """A classic Wishbone target behind registers: the request an initiator makes on ``bus`` reaches
    ``target`` from flip-flops a cycle later, and the target's answer reaches ``bus`` from flip-flops a
    cycle after it came, so no combinational path runs between the two sides (an SoC's interconnect
    on one, a wide block on the other).  An access takes two cycles more.

    An initiator that gives up a cycle (``cyc`` low) while the target is answering leaves the target's
    access to finish; its answer is dropped.

    Ports
    -----
    bus : In(Signature(...))
        The initiators' side.
    target : Out(Signature(...))
        The target's side.
    """

    def __init__(self, *, addr_width: int, data_width: int = 32, granularity: int = 8):
        sig = Signature(addr_width=addr_width, data_width=data_width, granularity=granularity)
        super().__init__({"bus": In(sig), "target": Out(sig)})

    def elaborate(self, platform):
        from amaranth.hdl import Module

        m = Module()
        bus, tgt = self.bus, self.target
        with m.FSM():
            with m.State("IDLE"):
                with m.If(bus.cyc & bus.stb):
                    m.d.sync += [tgt.adr.eq(bus.adr), tgt.dat_w.eq(bus.dat_w), tgt.sel.eq(bus.sel),
                                 tgt.we.eq(bus.we), tgt.cyc.eq(1), tgt.stb.eq(1)]
                    m.next = "ACCESS"
            with m.State("ACCESS"):
                with m.If(tgt.ack | tgt.err):
                    m.d.sync += [tgt.cyc.eq(0), tgt.stb.eq(0), bus.dat_r.eq(tgt.dat_r),
                                 bus.ack.eq(tgt.ack & bus.cyc), bus.err.eq(tgt.err & bus.cyc)]
                    m.next = "ANSWER"
            with m.State("ANSWER"):
                # the initiator sees the answer in this cycle; its next request comes in the next
                m.d.sync += [bus.ack.eq(0), bus.err.eq(0)]
                m.next = "IDLE"
        return m


class RegisteredInitiator(wiring.Component):
    """A bursting initiator's accesses into an SoC's interconnect behind registers, a word a cycle kept.

    :class:`RegisteredTarget` cuts every combinational path between its sides but answers each access
    four cycles after it starts: a burst would move a word every four cycles.  This stage also drives
    ``target`` only from flip-flops and answers ``bus`` from flip-flops (a posted write's ``ack`` is
    gated by the initiator's own ``cti``, a path that stays on the initiator's side), and it keeps
    an incrementing burst at a word a cycle by trusting the burst's promise (the next access is at the
    next address, see the module's notes):

    * **Reads** are fetched ahead.  The stage runs its own burst on ``target`` from the initiator's first
      address and keeps up to ``depth`` words in a FIFO; it answers each of the initiator's accesses
      from the FIFO, so after the first word (two cycles later than a direct read) the words come back a
      cycle apart.  When the initiator ends its burst (an access tagged otherwise acked, or ``stb``
      dropped) the words fetched beyond it are dropped; reading ahead of a burst's end is harmless in
      memory, and a word whose fetch failed (``err``) is answered ``err`` only if the initiator asks
      for it.
    * **Writes** are posted, but not a burst's last.  Each access tagged incrementing is acked into the
      FIFO as it comes and written behind it; the access tagged as the last (``CTI_END``, or a classic
      write) is answered only once every word before it and itself were acked by ``target``, with
      ``err`` if any of them was refused.  So when an initiator's burst is answered its data is in
      memory, as without the stage.  An initiator that gives up a burst (``cyc``/``stb`` low, or a read
      where its promise said a write) leaves its posted words to be written; nothing is answered.

    An answer the stage gives ahead of a burst's next access is there in the cycle after the one
    before was answered, whether or not that access comes: an initiator that drops ``stb`` then
    ignores it, as every answer without ``stb`` is ignored (see the module's notes).
    A new burst starts only when the last one is finished on ``target``, so accesses keep their order.
    A classic read costs two cycles more than without the stage, a classic write three.
    ``target`` drops ``stb`` whenever the FIFO (reads: full; writes: empty) makes it wait, which LiteX's
    bursting SRAM takes as the burst's end and restarts from the address it then sees.

    Ports
    -----
    bus : In(Signature(..., burst=True))
        The initiator's side.
    target : Out(Signature(..., burst=True))
        The interconnect's side.
    """

    def __init__(self, *, addr_width: int, data_width: int = 32, granularity: int = 8, depth: int = 4):
        if depth < 2 or depth & (depth - 1):
            raise ValueError(f"depth {depth} is not a power of two of at least 2")
        self.depth = depth
        sig = Signature(addr_width=addr_width, data_width=data_width, granularity=granularity, burst=True)
        super().__init__({"bus": In(sig), "target": Out(sig)})

    def elaborate(self, platform):
        from amaranth.hdl import Array, Module, Mux, Signal

        m = Module()
        bus, tgt, depth = self.bus, self.target, self.depth
        # FIFO: reads carry (word, err); writes carry (word, lanes, last)
        # reads' and writes' words apart: a register behind a choice of the two would put a multiplexer
        # after the late target's answer (and after the initiator's data)
        read_words = Array(Signal(len(bus.dat_r), name=f"read_word{i}") for i in range(depth))
        write_words = Array(Signal(len(bus.dat_w), name=f"write_word{i}") for i in range(depth))
        lanes = Array(Signal(len(bus.sel), name=f"lanes{i}") for i in range(depth))
        flags = Array(Signal(name=f"flag{i}") for i in range(depth))
        head, tail = Signal(range(depth)), Signal(range(depth))
        count = Signal(range(depth + 1))
        push_read, push_write, pop, clear = Signal(), Signal(), Signal(), Signal()
        push = push_read | push_write
        push_lanes, push_flag = Signal.like(bus.sel), Signal()
        # ``target``'s answer comes late in the cycle (through the SoC's crossbar, e.g. from an L2 cache's
        # tag compare), so what depends on it selects among values worked out ahead rather than adding it
        count_up, count_down = Signal.like(count), Signal.like(count)
        m.d.comb += [count_up.eq(count + 1), count_down.eq(count - 1)]
        # a word's register is enabled by its own push: a write's push never waits on ``target``'s answer
        with m.If(push_write):
            m.d.sync += write_words[tail].eq(bus.dat_w)
        with m.If(push_read):
            m.d.sync += read_words[tail].eq(tgt.dat_r)
        with m.If(clear):
            m.d.sync += [head.eq(0), tail.eq(0), count.eq(0)]
        with m.Else():
            with m.If(push):
                m.d.sync += [lanes[tail].eq(push_lanes), flags[tail].eq(push_flag),
                             tail.eq(tail + 1)]
            with m.If(pop):
                m.d.sync += head.eq(head + 1)
            with m.If(push & ~pop):
                m.d.sync += count.eq(count_up)
            with m.Elif(pop & ~push):
                m.d.sync += count.eq(count_down)
        # words in the FIFO next cycle: any / more than one
        after_push = Signal()
        m.d.comb += after_push.eq(Mux(pop, (count >= 2) | ((count == 1) & push), (count != 0) | push))
        # the flag of the word at the head next cycle, in a register: a read's answer (ack or err) then
        # comes from flip-flops, not through a multiplexer over the FIFO behind the head pointer
        head_flag = Signal()
        flag_after_pop = Mux(count >= 2, flags[(head + 1)[:len(head)]], push_flag)
        flag_if_kept = Mux(count != 0, flags[head], push_flag)
        m.d.sync += head_flag.eq(Mux(pop, flag_after_pop, flag_if_kept))

        incrementing = bus.cti == CTI_INCREMENTING
        requesting = bus.cyc & bus.stb
        up_ack = Signal()                  # registered: the access the initiator presents is answered
        answer_err = Signal()              # a write burst's last access is answered err
        refused = Signal()                 # a posted write was answered err
        ahead = Signal()                   # reads: the initiator's burst goes on, fetch ahead
        read_lanes = Signal.like(bus.sel)
        taken = Signal()
        answered = tgt.stb & (tgt.ack | tgt.err)
        m.d.comb += [tgt.cyc.eq(tgt.stb), tgt.dat_w.eq(write_words[head]), bus.dat_r.eq(read_words[head]),
                     tgt.sel.eq(Mux(tgt.we, lanes[head], read_lanes)),
                     tgt.cti.eq(Mux(tgt.we, Mux(flags[head], CTI_END, CTI_INCREMENTING),
                                    Mux(ahead, CTI_INCREMENTING, CTI_CLASSIC)))]
        m.d.sync += up_ack.eq(0)

        def write_behind():
            # posted words leave the FIFO in order, a word a cycle while it has them
            m.d.comb += pop.eq(answered)
            with m.If(answered):
                m.d.sync += [tgt.adr.eq(tgt.adr + 1), refused.eq(refused | tgt.err)]
            m.d.sync += tgt.stb.eq(after_push)

        with m.FSM():
            with m.State("IDLE"):
                m.d.comb += clear.eq(1)
                with m.If(requesting):
                    m.d.sync += [tgt.adr.eq(bus.adr), tgt.we.eq(bus.we), refused.eq(0)]
                    with m.If(bus.we):
                        # the first word is acked (into the FIFO) next cycle if more follow
                        m.d.sync += up_ack.eq(incrementing)
                        m.next = "WRITE"
                    with m.Else():
                        m.d.sync += [tgt.stb.eq(1), ahead.eq(incrementing), read_lanes.eq(bus.sel)]
                        m.next = "READ"

            with m.State("READ"):
                m.d.comb += [taken.eq(requesting & up_ack & ~bus.we), pop.eq(taken),
                             bus.ack.eq(up_ack & ~head_flag), bus.err.eq(up_ack & head_flag),
                             push_read.eq(answered), push_flag.eq(tgt.err)]
                with m.If(answered):
                    m.d.sync += tgt.adr.eq(tgt.adr + 1)
                    # go on while the burst does and the FIFO keeps room for this word and the next
                    with m.If(~ahead | (count + 2 > depth)):
                        m.d.sync += tgt.stb.eq(0)
                with m.Elif(~tgt.stb & ahead & (count + 1 < depth)):
                    m.d.sync += tgt.stb.eq(1)
                with m.If(~requesting | bus.we | (taken & ~incrementing)):
                    m.next = "FLUSH"       # the burst ended (or was given up): drop what was fetched ahead
                with m.Elif(after_push):
                    m.d.sync += up_ack.eq(1)

            with m.State("FLUSH"):
                with m.If(answered):
                    m.d.sync += tgt.stb.eq(0)
                with m.If(~tgt.stb):
                    m.next = "IDLE"

            with m.State("WRITE"):
                last = requesting & bus.we & ~incrementing
                m.d.comb += [bus.ack.eq(up_ack & incrementing), taken.eq(requesting & bus.we & bus.ack),
                             push_write.eq(taken | (last & (count != depth))),
                             push_lanes.eq(bus.sel), push_flag.eq(last)]
                write_behind()
                with m.If(last & (count != depth)):
                    m.next = "LAST"
                with m.Elif(~(requesting & bus.we)):
                    m.next = "DRAIN"       # given up: its posted words are still written
                with m.Elif(count + taken < depth):
                    m.d.sync += up_ack.eq(1)

            with m.State("LAST"):
                # the last word is in the FIFO: answer once it and every word before it are written
                write_behind()
                with m.If(answered & flags[head]):
                    m.d.sync += answer_err.eq(refused | tgt.err)
                    m.next = "ANSWER"

            with m.State("ANSWER"):
                m.d.comb += [bus.ack.eq(~answer_err), bus.err.eq(answer_err)]
                m.next = "IDLE"

            with m.State("DRAIN"):
                write_behind()
                with m.If((count == 0) & ~tgt.stb):
                    m.next = "IDLE"
        return m
