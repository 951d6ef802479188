"""Read path: READ commands from the map to the host's buffer, several pages in flight.

A read costs the NAND a short command, tR of the die alone, then the page's
bytes over the channel's bus; the copy to the host buffer follows.  One page at
a time leaves the bus idle for tR and the copy of every page, and the other
dies idle throughout, so the reader is cut into three stages joined by queues,
and a page's stage is what it waits for, not the page ahead of it:

* **Lookup** takes one command at a time: with the map port held
  (``MapPortArbiter``) it looks up every LBA of the command, so the read sees
  each atomic group whole or not at all, and writes the command's pages into
  the job queues -- a mapped page as a NAND job into its die's queue, an
  unmapped one as a zero fill or a write-cache hit as a cache copy into the
  copier's -- then records the command at the tail of the command ring
  (``commands`` deep).
* **Dispatch**, per channel, picks round-robin among the channel's dies that
  have a job queued and no read of the reader's in flight, and sends the
  job to the NAND controller in one of the channel's ``read_slots`` read
  slots (the last slots; the relocator has the one before, the firmware the
  one before that, the log writer the rest), the slot as its tag.  The
  controller runs reads on different dies side by side and answers them in
  any order.  One read per die: a second one would hold a slot through the
  first's tR and transfer while another die could use it; the die takes its
  next read once its page has landed in the slot.
* **Copy** has the host bus: it copies a read page from its slot to the host
  buffer with a :class:`~rtl.ftl.dma.BufferDMA` holding the channel's buffer
  port (then frees the slot), writes a zero fill, or copies a cache page with
  a :class:`~rtl.lib.memcopy.MemoryCopier`.  Each page done counts toward its
  command.

**Completion in order.**  The command at the head of the ring completes when
all its pages are done.  Commands complete in the order they came, so a READ
completes only after every READ before it -- the firmware's read fence before
an erase (``firmware/gc.c``) relies on that: no read still looks at a page the
map named before GC moved it.

**Errors.**  A page the channel cannot return (``UNCORRECTABLE``, or
``ERASED`` where the map points) makes its command ``MEDIA_ERROR``, a bus
error on the host buffer ``DATA_TRANSFER_ERROR``, a map error (looked up
before anything is read: no page is read then) ``INTERNAL_ERROR``: never
wrong data with success.  The command's other pages are still read (the
buffer's content is undefined after an error); the first error is the
command's status.

**TX_READ** (``tx`` set in the command) reads what its transaction sees:
before handing it over, the executor claims the *override* table
(``overrides.claim``) and writes the pages the transaction staged for the range
(``overrides.we``, by index in the command); a lookup whose index has an override
uses that page instead of the map's.  The table is released
(``overrides.busy`` falls) when the command's lookups are done: its pages are
in the job queues then.

**The write cache** (``cache``): the executor holds LBAs whose newest data is
still in a SoC-memory cache page.  The lookup stage takes the cache lock
(``cache_lookup.req`` / ``.grant``) before the map port and looks every LBA up
in the cache too (``.lba`` -> ``.hit``, ``.addr``) while it holds the map port:
a cache entry is freed only after its destage group is published, so a miss
means the map already has the data.  Priority: a TX_READ override, then the
cache, then the map.  The lock stays held while any command that hit is in
the ring, so a page freed meanwhile is not refilled under the copy; a command
without hits drops it after its lookups.
"""

from amaranth import Array, Cat, Const, Module, Mux, Signal
from amaranth.lib import data, enum, fifo, memory, stream, wiring
from amaranth.lib.wiring import In, Out

from atomflash import spec
from atomflash.spec import NandOp, NandResult, Status
from rtl import spec as layouts
from rtl.host.queues import completion_layout
from rtl.lib import wishbone
from rtl.lib.roundrobin import round_robin
from rtl.lib.memcopy import CopyError, MemoryCopier
from rtl.nand.channel import ChannelParams

from .bufport import ArbitratedBufferSignature, held_grant
from .dma import BufferDMA, Direction
from .mapcache import MapOp
from .mapport import MapPortSignature
from .nandport import page_desc
from .writecache import CacheLookupSignature

__all__ = ["OverrideSignature", "Reader", "read_layout"]


def read_layout(queue_pairs: int, max_transfer: int) -> data.StructLayout:
    q = completion_layout(queue_pairs)
    return data.StructLayout({"sqid": q["sqid"].shape, "cid": 16, "lba": 32,
                              "nlb": range(max_transfer + 1), "buf": 32, "tx": 1})


class OverrideSignature(wiring.Signature):
    """The reader's TX_READ override table, from the side that fills it.

    Members
    -------
    claim : Out(1) / busy : In(1)
        Claim the table for the next TX_READ (a pulse); busy until that command's lookups are done.
    we : Out(1), idx : Out(range(max_transfer)), ppa : Out(32)
        Index ``idx`` of that TX_READ reads page ``ppa`` instead of the map's.
    """

    def __init__(self, max_transfer: int):
        super().__init__({"claim": Out(1), "busy": In(1), "we": Out(1), "idx": Out(range(max_transfer)),
                          "ppa": Out(32)})


class JobKind(enum.Enum, shape=2):
    NAND = 0     # read the page from flash into a read slot, then copy it
    ZERO = 1     # an unmapped LBA: zeros into the host buffer
    CACHE = 2    # a write-cache hit: copy the cache page


class Reader(wiring.Component):
    """Serves READ commands; see the module docstring.

    Parameters
    ----------
    read_slots : int
        Page-buffer slots per channel for reads in flight (the channel's last ones).
    commands : int
        Commands in the completion ring (looked up, not yet completed).

    Ports
    -----
    cmd : In(stream of read_layout)
    cpl : Out(stream of completion_layout)
    map : Out(MapPortSignature)
    desc : Out(stream of NAND_DESC) / ncpl : In(stream of NAND_CPL)
        Descriptor tags are read-slot numbers, ``channel * read_slots + j``.
    buf : Out(ArbitratedBufferSignature).array(channels)
    bus : Out(wishbone.Signature)
    overrides : In(OverrideSignature)
        The TX_READ override table (the executor fills it).
    cache_lookup : Out(CacheLookupSignature)
        The write cache's lookups and lock (``cache``).
    pages : Out(32)
        Pages returned to a host buffer since reset.
    """

    DIE_QUEUE = 4      # NAND jobs queued per die (a command's spill waits for room)
    DIRECT_QUEUE = 8   # zero fills and cache copies queued for the copier

    def __init__(self, params: ChannelParams, channels: int, slot_words: int, *, queue_pairs: int,
                 max_transfer: int = spec.LIMITS.MAX_TRANSFER, lba_bits: int = 32, cache: bool = False,
                 read_slots: int = 1, commands: int = 16):
        if not 1 <= read_slots <= params.slots:
            raise ValueError(f"read_slots must be 1..{params.slots}")
        if commands < 1 or commands & (commands - 1):
            raise ValueError("commands must be a power of two")
        self.p, self.channels, self.slot_words = params, channels, slot_words
        self.cache = cache
        self.max_transfer = max_transfer
        self.read_slots, self.commands = read_slots, commands
        self.first_slot = params.slots - read_slots
        self.buf_addr_width = (params.slots * slot_words - 1).bit_length()
        super().__init__({
            "cmd": In(stream.Signature(read_layout(queue_pairs, max_transfer))),
            "cpl": Out(stream.Signature(completion_layout(queue_pairs))),
            "map": Out(MapPortSignature(lba_bits)),
            "desc": Out(stream.Signature(layouts.NAND_DESC)),
            "ncpl": In(stream.Signature(layouts.NAND_CPL)),
            "buf": Out(ArbitratedBufferSignature(self.buf_addr_width)).array(channels),
            "bus": Out(wishbone.Signature(addr_width=30, data_width=32, burst=True)),
            "overrides": In(OverrideSignature(max_transfer)),
            "cache_lookup": Out(CacheLookupSignature(lba_bits)),
            "pages": Out(32),
        })

    def elaborate(self, platform):
        m = Module()
        C, R, K = self.channels, self.read_slots, self.commands
        W = self.p.ways
        D = C * W                                   # dies (a target's LUNs share its queue)
        S = C * R                                   # read slots in all
        page_data = self.p.profile.page_data
        page_words = page_data // 4
        q = self.cpl.payload
        tag_shape = range(K)
        slot_shape = range(max(S, 2))

        # ---- the command ring: recorded at the tail by the lookup stage, completed from the head
        rec_layout = data.StructLayout({"sqid": q.sqid.shape(), "cid": 16, "status": 15,
                                        "npages": range(self.max_transfer + 1), "hit": 1})
        m.submodules.ring = ring = memory.Memory(shape=rec_layout, depth=K, init=[])
        ring_w, ring_r = ring.write_port(), ring.read_port(domain="comb")
        head, tail = Signal(tag_shape), Signal(tag_shape)
        recorded = Signal(range(K + 1))             # commands in the ring (the tail's is not yet)
        done = [Signal(range(self.max_transfer + 1), name=f"done{k}") for k in range(K)]
        error = [Signal(15, name=f"error{k}") for k in range(K)]
        hit_cmds = Signal(range(K + 2))             # commands in the ring (or being looked up) that hit

        # ---- lookup stage
        m.submodules.ppas = ppas = memory.Memory(shape=32, depth=self.max_transfer, init=[])
        ppa_w, ppa_r = ppas.write_port(), ppas.read_port()

        # TX_READ overrides: the transaction's staged pages by index
        m.submodules.ovr = ovr = memory.Memory(shape=32, depth=self.max_transfer, init=[])
        ovr_w, ovr_r = ovr.write_port(), ovr.read_port(domain="comb")
        ovr_mask = Signal(self.max_transfer)
        # an override is written a cycle after it comes (the executor's decision to write it ends a long
        # path already); the TX_READ it is for comes later still, after the pending table's last answer
        ovr_we, ovr_idx, ovr_ppa = Signal(), Signal.like(self.overrides.idx), Signal(32)
        m.d.sync += [ovr_we.eq(self.overrides.we), ovr_idx.eq(self.overrides.idx), ovr_ppa.eq(self.overrides.ppa)]
        m.d.comb += [ovr_w.addr.eq(ovr_idx), ovr_w.data.eq(ovr_ppa), ovr_w.en.eq(ovr_we)]
        ovr_done = Signal()
        with m.If(self.overrides.claim):
            m.d.sync += [self.overrides.busy.eq(1), ovr_mask.eq(0)]
        with m.If(ovr_we):
            m.d.sync += ovr_mask.bit_select(ovr_idx, 1).eq(1)
        with m.If(ovr_done):
            m.d.sync += self.overrides.busy.eq(0)

        # cache hits: the cache page's address by index
        m.submodules.caddrs = caddrs = memory.Memory(shape=32, depth=self.max_transfer, init=[])
        caddr_w, caddr_r = caddrs.write_port(), caddrs.read_port(domain="comb")
        hits = Signal(self.max_transfer)
        looking_in_cache = Signal()
        if self.cache:
            m.d.comb += self.cache_lookup.req.eq(looking_in_cache | (hit_cmds != 0))

        # the job queues: one per die (channel c, way w: queue c * W + w) for NAND jobs, so a die busy
        # with a read holds up only its own; one for the copier's direct jobs (zero fills, cache copies)
        job_layout = data.StructLayout({"kind": JobKind, "addr": 32, "mem": 32, "tag": tag_shape})
        queues = []
        for d in range(D + 1):
            q_ = fifo.SyncFIFO(width=job_layout.size, depth=self.DIE_QUEUE if d < D else self.DIRECT_QUEUE)
            m.submodules[f"jobs{d}" if d < D else "direct_jobs"] = q_
            queues.append(q_)
        job_in = Signal(job_layout)
        job_queue = Signal(range(D + 1))           # where the job being spilled goes
        for q_ in queues:
            m.d.comb += q_.w_data.eq(job_in)
        job_room = Array(q_.w_rdy for q_ in queues)[job_queue]
        push = Signal()
        for i, q_ in enumerate(queues):
            m.d.comb += q_.w_en.eq(push & (job_queue == i))

        cmd = Signal.like(self.cmd.payload)
        idx = Signal(range(self.max_transfer + 1))
        status = Signal(15)
        start = Signal()            # a command starts at the tail: its counters clear
        m.d.comb += ring_w.addr.eq(tail)

        with m.FSM(name="lookup"):
            with m.State("IDLE"):
                m.d.comb += self.cmd.ready.eq(recorded < K)
                with m.If(self.cmd.valid & (recorded < K)):
                    m.d.comb += start.eq(1)
                    m.d.sync += [cmd.eq(self.cmd.payload), idx.eq(0), status.eq(Status.SUCCESS), hits.eq(0)]
                    if self.cache:
                        m.d.sync += looking_in_cache.eq(1)
                        m.next = "CACHE_LOCK"
                    else:
                        m.next = "LOCK"
            with m.State("CACHE_LOCK"):
                with m.If(self.cache_lookup.grant):
                    m.next = "LOCK"
            with m.State("LOCK"):
                m.d.comb += self.map.lock.eq(1)
                with m.If(self.map.grant):
                    m.next = "LOOKUP"
            with m.State("LOOKUP"):
                r = self.map.req.payload
                m.d.comb += [self.map.lock.eq(1), r.op.eq(MapOp.READ), r.lba.eq(cmd.lba + idx),
                             self.map.req.valid.eq(1)]
                with m.If(self.map.req.ready):
                    m.next = "LOOKUP_RESP"
            with m.State("LOOKUP_RESP"):
                m.d.comb += [self.map.lock.eq(1), self.map.resp.ready.eq(1)]
                m.d.comb += ovr_r.addr.eq(idx)
                with m.If(self.map.resp.valid):
                    use_ovr = cmd.tx & ovr_mask.bit_select(idx, 1)
                    m.d.comb += [ppa_w.addr.eq(idx), ppa_w.data.eq(Mux(use_ovr, ovr_r.data, self.map.resp.payload.old)),
                                 ppa_w.en.eq(1)]
                    last = (idx + 1 == cmd.nlb) | self.map.resp.payload.error
                    if self.cache:
                        hit = self.cache_lookup.hit & ~use_ovr
                        m.d.comb += [self.cache_lookup.lba.eq(cmd.lba + idx), caddr_w.addr.eq(idx),
                                     caddr_w.data.eq(self.cache_lookup.addr), caddr_w.en.eq(hit)]
                        with m.If(hit):
                            m.d.sync += hits.bit_select(idx, 1).eq(1)
                        with m.If(last & ~hit & (hits == 0)):
                            m.d.sync += looking_in_cache.eq(0)   # no page of the cache to protect
                        # else the lock passes to the ring's count of commands that hit, when recorded
                    with m.If(self.map.resp.payload.error):
                        m.d.sync += status.eq(Status.INTERNAL_ERROR)
                    with m.If(last):
                        m.d.comb += ovr_done.eq(cmd.tx)
                        m.d.sync += idx.eq(0)
                        with m.If(self.map.resp.payload.error):
                            m.next = "RECORD"
                        with m.Else():
                            m.next = "SPILL_ADDRESS"
                    with m.Else():
                        m.d.sync += idx.eq(idx + 1)
                        m.next = "LOOKUP"
            # the command's pages into the job queues (the PPA table's read port shows entry idx a cycle on)
            with m.State("SPILL_ADDRESS"):
                m.next = "SPILL"
            with m.State("SPILL"):
                spill_ppa = Signal(layouts.PPA)
                m.d.comb += [spill_ppa.eq(ppa_r.data), job_in.mem.eq(cmd.buf + idx * page_data),
                             job_in.tag.eq(tail), push.eq(1), job_queue.eq(D)]
                with m.If(hits.bit_select(idx, 1)):
                    m.d.comb += [job_in.kind.eq(JobKind.CACHE), job_in.addr.eq(caddr_r.data)]
                with m.Elif(ppa_r.data == spec.PPA_UNMAPPED):
                    m.d.comb += [job_in.kind.eq(JobKind.ZERO), job_in.addr.eq(ppa_r.data)]
                with m.Else():
                    # a bad channel or way goes to die 0's queue and channel 0's slots: the controller
                    # answers it BAD_CHANNEL (or the channel BAD_TARGET), and the command MEDIA_ERROR
                    f = spill_ppa.ppa
                    die_ok = (f.channel < C) & (f.way < W)
                    m.d.comb += [job_in.kind.eq(JobKind.NAND), job_in.addr.eq(ppa_r.data),
                                 job_queue.eq(Mux(die_ok, f.channel * W + f.way, 0))]
                with m.If(job_room):
                    m.d.sync += idx.eq(idx + 1)
                    with m.If(idx + 1 == cmd.nlb):
                        m.next = "RECORD"
                    with m.Else():
                        m.next = "SPILL_ADDRESS"
            with m.State("RECORD"):
                rec = ring_w.data
                m.d.comb += [rec.sqid.eq(cmd.sqid), rec.cid.eq(cmd.cid), rec.status.eq(status),
                             rec.npages.eq(Mux(status == Status.SUCCESS, cmd.nlb, 0)), rec.hit.eq(hits != 0),
                             ring_w.en.eq(1)]
                m.d.sync += [tail.eq(tail + 1), looking_in_cache.eq(0)]
                m.next = "IDLE"
        m.d.comb += [ppa_r.addr.eq(idx), caddr_r.addr.eq(idx)]

        # ---- dispatch: per channel, round-robin over its dies with a job queued and no read of ours in
        # flight, into a free read slot of the channel.  One read per die: a second would hold a slot
        # through the first's tR and transfer; the die is free again when its read lands.
        busy = Signal(max(S, 1))                    # read slot s = channel * R + j in flight
        die_busy = Signal(D)
        slot_mem = Array(Signal(32, name=f"slot_mem{s}") for s in range(S))
        slot_tag = Array(Signal(tag_shape, name=f"slot_tag{s}") for s in range(S))
        slot_die = Array(Signal(range(max(D, 2)), name=f"slot_die{s}") for s in range(S))
        set_en = Signal(C)                          # channel c takes a slot this cycle
        set_slot = [Signal(slot_shape, name=f"set_slot{c}") for c in range(C)]
        set_die = [Signal(range(max(D, 2)), name=f"set_die{c}") for c in range(C)]
        clr_en = Signal()
        clr_slot = Signal(slot_shape)
        landed_en = Signal()                        # a read landed: its die is free
        landed_die = Signal(range(max(D, 2)))
        # a descriptor register per channel, offered round-robin to the NAND port
        desc_valid = Signal(C)
        descs = [Signal(layouts.NAND_DESC, name=f"desc{c}") for c in range(C)]
        last_desc = Signal(range(max(C, 2)))
        grant, any_desc = round_robin(m, [desc_valid[c] for c in range(C)], last_desc, C)
        m.d.comb += [self.desc.valid.eq(any_desc),
                     self.desc.payload.eq(Array(d.as_value() for d in descs)[grant])]   # (Array of plain values)
        with m.If(any_desc & self.desc.ready):
            m.d.sync += [last_desc.eq(grant), desc_valid.bit_select(grant, 1).eq(0)]
        for c in range(C):
            free_j = Signal(range(max(R, 2)), name=f"free_j{c}")
            any_free = Signal(name=f"any_free{c}")
            for j in reversed(range(R)):
                with m.If(~busy[c * R + j]):
                    m.d.comb += [free_j.eq(j), any_free.eq(1)]
            ready_dies = [queues[c * W + w].r_rdy & ~die_busy[c * W + w] for w in range(W)]
            last_die = Signal(range(max(W, 2)), name=f"last_die{c}")
            w_pick, any_die = round_robin(m, ready_dies, last_die, W)
            job = Signal(job_layout, name=f"job{c}")       # the picked die's queue head
            m.d.comb += job.eq(Array(queues[c * W + w].r_data for w in range(W))[w_pick])
            jppa = Signal(layouts.PPA, name=f"jppa{c}")
            m.d.comb += [jppa.eq(job.addr), set_slot[c].eq(c * R + free_j), set_die[c].eq(c * W + w_pick)]
            with m.If(any_die & ~desc_valid[c] & any_free):
                m.d.comb += set_en[c].eq(1)
                for w in range(W):
                    m.d.comb += queues[c * W + w].r_en.eq(w_pick == w)
                m.d.sync += [*page_desc(descs[c], NandOp.READ, jppa.ppa, length=page_data,
                                        slot=self.first_slot + free_j, tag=set_slot[c]),
                             desc_valid[c].eq(1), last_die.eq(w_pick), slot_mem[set_slot[c]].eq(job.mem),
                             slot_tag[set_slot[c]].eq(job.tag), slot_die[set_slot[c]].eq(set_die[c])]
        for s in range(S):
            with m.If(set_en[s // R] & (set_slot[s // R] == s)):
                m.d.sync += busy[s].eq(1)
            with m.If(clr_en & (clr_slot == s)):
                m.d.sync += busy[s].eq(0)
        for d in range(D):
            with m.If(set_en[d // W] & (set_die[d // W] == d)):
                m.d.sync += die_busy[d].eq(1)
            with m.If(landed_en & (landed_die == d)):
                m.d.sync += die_busy[d].eq(0)

        # the copier's direct offer: a zero fill or a cache copy
        direct = queues[D]
        direct_job = data.View(job_layout, direct.r_data)
        direct_valid, direct_ready = Signal(), Signal()
        m.d.comb += [direct_valid.eq(direct.r_rdy), direct.r_en.eq(direct_ready)]

        # NAND completions wait here for the copier (one per slot at most: the FIFO cannot overflow)
        m.submodules.landed = landed = fifo.SyncFIFO(width=len(clr_slot) + 1, depth=max(S, 2))
        m.d.comb += [landed.w_data.eq(Cat(self.ncpl.payload.result == NandResult.OK,
                                          self.ncpl.payload.tag[:len(clr_slot)])),
                     landed.w_en.eq(self.ncpl.valid), self.ncpl.ready.eq(landed.w_rdy),
                     landed_en.eq(self.ncpl.valid & landed.w_rdy),
                     landed_die.eq(slot_die[self.ncpl.payload.tag[:len(clr_slot)]])]

        # ---- copy: one page at a time on the host bus
        m.submodules.dma = dma = BufferDMA(self.buf_addr_width)
        kind = Signal(JobKind)
        src = Signal(32)               # a cache copy's source page
        mem = Signal(32)
        page_tag = Signal(tag_shape)
        slot = Signal(slot_shape)
        chan = Signal(range(max(C, 2)))
        buf_slot = Signal(range(self.p.slots))
        word = Signal(range(page_words + 1))
        page_error = Signal(15)
        zeroing, copying, holding = Signal(), Signal(), Signal()
        page_done = Signal()

        m.submodules.cachecopy = cachecopy = MemoryCopier()
        with m.If(zeroing):
            wishbone.word_access(m, self.bus, (mem >> 2) + word, 0)
        with m.Elif(copying):
            wiring.connect(m, wiring.flipped(self.bus), cachecopy.bus)
        with m.Else():
            wiring.connect(m, wiring.flipped(self.bus), dma.bus)

        # the channel's buffer port, held from grant to the end of the copy
        for c in range(C):
            port = self.buf[c]
            m.d.comb += port.request.eq(holding & (chan == c))
            with m.If(chan == c):
                m.d.comb += [port.port.addr.eq(dma.buf.addr), port.port.w_en.eq(dma.buf.w_en),
                             port.port.w_data.eq(dma.buf.w_data), dma.buf.r_data.eq(port.port.r_data)]
        granted = held_grant(m, self.buf, chan, holding)

        landed_slot = landed.r_data[1:]
        with m.FSM(name="copy"):
            with m.State("IDLE"):
                m.d.sync += [word.eq(0), page_error.eq(Status.SUCCESS)]
                with m.If(landed.r_rdy):
                    m.d.comb += landed.r_en.eq(1)
                    m.d.sync += [kind.eq(JobKind.NAND), slot.eq(landed_slot), mem.eq(slot_mem[landed_slot]),
                                 page_tag.eq(slot_tag[landed_slot]),
                                 chan.eq(Array(Const(s // R) for s in range(S))[landed_slot]),
                                 buf_slot.eq(Array(Const(self.first_slot + s % R) for s in range(S))[landed_slot])]
                    with m.If(landed.r_data[0]):
                        m.next = "GRANT"
                    with m.Else():
                        m.d.sync += page_error.eq(Status.MEDIA_ERROR)
                        m.next = "PAGE_DONE"
                with m.Elif(direct_valid):
                    m.d.comb += direct_ready.eq(1)
                    m.d.sync += [kind.eq(direct_job.kind), src.eq(direct_job.addr), mem.eq(direct_job.mem),
                                 page_tag.eq(direct_job.tag)]
                    with m.If(direct_job.kind == JobKind.ZERO):
                        m.next = "ZERO"
                    with m.Else():
                        m.next = "CACHE"
            with m.State("ZERO"):
                m.d.comb += zeroing.eq(1)
                with m.If(self.bus.err):
                    m.d.sync += page_error.eq(Status.DATA_TRANSFER_ERROR)
                    m.next = "PAGE_DONE"
                with m.Elif(self.bus.ack):
                    m.d.sync += word.eq(word + 1)
                    with m.If(word == page_words - 1):
                        m.next = "PAGE_DONE"
            # a cache hit: the cache page to the host buffer in bursts
            with m.State("CACHE"):
                m.d.comb += [copying.eq(1), cachecopy.req.valid.eq(1), cachecopy.req.payload.src.eq(src),
                             cachecopy.req.payload.dst.eq(mem), cachecopy.req.payload.words.eq(page_words)]
                with m.If(cachecopy.req.ready):
                    m.next = "CACHE_WAIT"
            with m.State("CACHE_WAIT"):
                m.d.comb += [copying.eq(1), cachecopy.done.ready.eq(1)]
                with m.If(cachecopy.done.valid):
                    with m.Switch(cachecopy.done.payload.error):
                        with m.Case(CopyError.READ):      # the cache page
                            m.d.sync += page_error.eq(Status.INTERNAL_ERROR)
                        with m.Case(CopyError.WRITE):     # the host's buffer
                            m.d.sync += page_error.eq(Status.DATA_TRANSFER_ERROR)
                    m.next = "PAGE_DONE"
            with m.State("GRANT"):
                m.d.comb += holding.eq(1)
                with m.If(granted):
                    m.next = "COPY"
            with m.State("COPY"):
                m.d.comb += [holding.eq(1), dma.req.valid.eq(1),
                             dma.req.payload.direction.eq(Direction.TO_MEMORY),
                             dma.req.payload.mem_addr.eq(mem),
                             dma.req.payload.buf_addr.eq(buf_slot * self.slot_words),
                             dma.req.payload.words.eq(page_words)]
                with m.If(dma.req.ready):
                    m.next = "COPY_WAIT"
            with m.State("COPY_WAIT"):
                m.d.comb += [holding.eq(1), dma.done.ready.eq(1)]
                with m.If(dma.done.valid):
                    with m.If(dma.done.payload.error):
                        m.d.sync += page_error.eq(Status.DATA_TRANSFER_ERROR)
                    m.next = "PAGE_DONE"
            with m.State("PAGE_DONE"):
                m.d.comb += page_done.eq(1)
                with m.If(kind == JobKind.NAND):
                    m.d.comb += [clr_en.eq(1), clr_slot.eq(slot)]
                with m.If(page_error == Status.SUCCESS):
                    m.d.sync += self.pages.eq(self.pages + 1)
                m.next = "IDLE"

        # ---- per-command counters: cleared when the command starts at the tail, counted by the copier
        for k in range(K):
            with m.If(start & (tail == k)):
                m.d.sync += [done[k].eq(0), error[k].eq(Status.SUCCESS)]
            with m.If(page_done & (page_tag == k)):
                m.d.sync += done[k].eq(done[k] + 1)
                with m.If(error[k] == Status.SUCCESS):
                    m.d.sync += error[k].eq(page_error)


        # ---- completion: the head, once its pages are all done
        rec = ring_r.data
        m.d.comb += ring_r.addr.eq(head)
        head_done = Array(done)[head]
        head_error = Array(error)[head]
        m.d.comb += [q.sqid.eq(rec.sqid), q.cid.eq(rec.cid), q.result.eq(0),
                     q.status.eq(Mux(rec.status != Status.SUCCESS, rec.status, head_error)),
                     self.cpl.valid.eq((recorded != 0) & (head_done == rec.npages))]
        completing = self.cpl.valid & self.cpl.ready
        recording = Signal()
        with m.If(completing):
            m.d.sync += head.eq(head + 1)
        m.d.comb += recording.eq(ring_w.en)
        m.d.sync += recorded.eq(recorded + recording - completing)
        # the cache lock's count: a command that hit, from its lookups to its completion
        hit_now = Signal()
        hit_gone = Signal()
        if self.cache:
            m.d.comb += [hit_now.eq(ring_w.en & ring_w.data.hit), hit_gone.eq(completing & rec.hit)]
            m.d.sync += hit_cmds.eq(hit_cmds + hit_now - hit_gone)
        return m
