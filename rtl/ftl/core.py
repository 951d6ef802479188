"""The FTL core: host queues to NAND pins, every fast-path block joined.

::

    regs ──► HostQueues ─cmd─► CommandValidator ─accepted─► Executor ──read──► Reader
                 ▲                   │ rejected               │  │ groups        │ lookups (map port)
                 └──── StreamMerge ◄─┴────────── cpl ─────────┘  ▼               │ NAND READ, copy out
                                                           Publisher ─► MapPortArbiter ─► MapCache
                                                              ▲  │ rebinds ─► BlockTable
                  PageAllocator ─alloc─► LogWriter ─done──────┘  (member completions, by tag)
                                            │ PROGRAM        Reader │ READ      firmware (desc/cpl)
                                            ▼                       ▼               ▼
                                         NandPortMux ──────────────────────► NandController ─► NAND pins
                     log pages: LogPortArbiter (Executor's groups, Relocator's copies, PAD pages)
                     page buffers: BufferPortArbiter per channel (LogWriter, Reader, Relocator, firmware)
                     IDENTIFY, GET_LOG: Executor ─info_job─► InfoPageWriter (reads the executor's tables)
    mem ◄── Wishbone Arbiter (HostQueues, MapCache, BlockTable, LogWriter, Reader, Executor, Relocator,
                              InfoPageWriter, the write cache's MemoryCopier)

Everything the firmware owns enters as plain ports: erased blocks (``free``)
and the log's next seq (``seq_load``) after recovery, full blocks out on
``closed``, pages whose program failed on ``failed`` (the block is to be
retired; the data was re-issued on a fresh page), relocation requests (``reloc``), ``hold`` (no new command
from the host's queue pairs while it is up, the firmware's last pair still served: GC short of erased blocks), its own map-cache port
(``map_fw``: FLUSH before a checkpoint reads the table, INVALIDATE after it
rebuilt the table -- and at every boot, since block RAM keeps its contents
across a reset), the memory layout (L2P table, block table, scratch pages,
IDENTIFY and log records) and the capacity.  The SoC wraps these in registers
(``soc/ftl_bridge.py``); the cocotb system test (``tb/ftl_core``) drives them directly.
"""

from amaranth import Module, Signal
from amaranth.utils import exact_log2
from amaranth.lib import stream, wiring
from amaranth.lib.wiring import In, Out

from atomflash import command, spec
from rtl import spec as layouts
from rtl.host.queues import HostQueues, command_layout, completion_layout
from rtl.lib import wishbone
from rtl.lib.memcopy import MemoryCopier
from rtl.lib.streams import RegisterSlice, StreamMerge
from rtl.lib.trng import Trng
from rtl.nand.channel import ChannelParams
from rtl.nand.controller import NandController
from rtl.nand.phy import OnfiBusSignature
from rtl.nand.timing import TIMING

from .allocator import PAGE_BITS, PageAllocator
from .blocktable import REBIND, BlockTable
from .bufport import ArbitratedBufferSignature, BufferPortArbiter
from .executor import Executor
from .frontends import FrontEndJoin
from .infopages import InfoPageWriter
from .logwriter import LogWriter
from .mapcache import MapCache, seg_set_layout
from .mapport import MapPortArbiter, MapPortSignature
from .nandport import NandPortMux
from .logport import HOST_TAG_BITS, PAD_TAG, LogPortArbiter
from .pairing import PairedPages
from .pending import PendingTable
from .publisher import Publisher
from .reader import Reader
from .relocate import Relocator
from .validate import CommandValidator

__all__ = ["FtlCore"]


class FtlCore(wiring.Component):
    """Host queues, FTL and NAND controller; see the module docstring.

    Parameters
    ----------
    profile, channels, ways, nand_slots : NAND geometry and page-buffer slots per channel
        (per channel: programs, then the firmware's (``fw_slot``), the GC relocator's and the
        read path's ``read_slots``, the last; at least 3 + ``read_slots``).
    read_slots : page-buffer slots per channel for reads in flight (:class:`~rtl.ftl.reader.Reader`).
    read_commands : READ commands the reader holds between their lookup and their completion (a power of
        two): the window it finds work for idle dies in.
    queue_pairs, queue_depth : host queues.
    stream_queues : queue ids given to a front end outside the core (the NVMe controller), which hands
        commands in on ``stream_cmd`` and takes their completions from ``stream_cpl``: ids
        0..``stream_queues`` - 1 are its, the host queues' pairs follow (the firmware's pair stays the
        last id).  ``hold`` holds it like the host's pairs.  0: no such port.
    slots : publisher slots (commands changing the map in flight).
    map_sets, map_ways, map_line : MapCache geometry.
    map_segments : segments the MapCache's lazy-load gate tracks (``map_lazy``, ``map_seg``,
        ``map_fault``, ``map_faults``: the firmware loads the table after boot, the host waits only
        on the segments it touches first).
    cache_pages : the volatile write cache in SoC memory (``cache_base``), in pages; 0 = none
        (at least ``channels * ways``, one destage stripe; IDENTIFY.volatile_cache reports its bytes).
        ``cache_in`` / ``cache_coalesced`` / ``cache_destaged`` / ``cache_stripes`` count host pages
        written into it, those that replaced a buffered page of the same LBA, pages written to flash
        from it, and destage groups that filled a whole stripe; ``cache_dirty`` is its dirty pages now,
        ``cache_busy`` high while a destage is in flight or due (pages taken with no command in the core).
    host_read_pages, host_write_pages, record_pages, nand_reads, nand_programs, nand_erases : counters
        since reset: pages READ commands returned; host data pages and record pages the executor sent to the
        log; NAND page reads, page programs and block erases issued by anyone (the console's ``stats``).
    pad_idle : cycles without a page request before an exposed MLC lower page gets PAD pages
        (:mod:`rtl.ftl.pairing`; only with ``pairing.mlc``).  ``mlc`` (the NAND pairs pages) comes from the
        firmware, ``pad_pages`` counts PAD pages since reset.
    sim_gate_ecc : simulation only: clock each channel's BCH decoder only while it has work
        (:class:`rtl.ecc.bch.BchDecoder` ``sim_gate_idle``); the simulated SoC sets it.
    ring_oscillator, token_key_seed : the key append tokens are MACed under is drawn at reset by a
        :class:`~rtl.lib.trng.Trng`: from ring oscillators when ``ring_oscillator`` (a board build), else
        from its seeded stand-in (``token_key_seed``; simulation: the key is then known to whoever knows the
        seed).  ``token_key`` reports the draw (``spec.FTL_REGS`` token_key), never the key.
    """

    def __init__(self, *, profile: str = "small", channels: int = 2, ways: int = 2,
                 nand_slots: int = spec.NAND_DEFAULTS.SLOTS,
                 queue_pairs: int = 1, queue_depth: int = spec.LIMITS.QUEUE_DEPTH, stream_queues: int = 0,
                 slots: int = 16,
                 map_sets: int = 64, map_ways: int = 4, map_line: int = 8, map_segments: int = 4096,
                 limits: command.StaticLimits = command.StaticLimits(),
                 max_open_tx: int = spec.LIMITS.MAX_OPEN_TX, max_pending: int = spec.LIMITS.MAX_PENDING,
                 max_appends: int = spec.LIMITS.MAX_APPENDS, cache_pages: int = 0, pad_idle: int = 256,
                 read_slots: int = 1, read_commands: int = 16,
                 sim_gate_ecc: bool = False, ring_oscillator: bool = False, token_key_seed: int = 1):
        if read_slots < 1 or nand_slots < 3 + read_slots:
            raise ValueError(f"need at least {3 + max(read_slots, 1)} page-buffer slots per channel (programs, "
                             f"firmware, relocator, {max(read_slots, 1)} for reads)")
        self.params = ChannelParams(profile, ways=ways, slots=nand_slots, sim_gate_ecc=sim_gate_ecc)
        self.read_slots, self.read_commands = read_slots, read_commands
        self.fw_slot = nand_slots - 2 - read_slots  # the firmware's own slot while the core runs
        self.channels, self.ways, self.queue_pairs, self.slots = channels, ways, queue_pairs, slots
        self.stream_queues = stream_queues
        #: every queue id the core's blocks see: the stream front end's, then the host queues' pairs
        self.queue_ids = stream_queues + queue_pairs
        self.limits = limits
        self.max_open_tx, self.max_pending, self.max_appends = max_open_tx, max_pending, max_appends
        self.cache_pages = cache_pages
        self.pad_idle = pad_idle
        self.ring_oscillator, self.token_key_seed = ring_oscillator, token_key_seed
        self.profile = self.params.profile
        self.ctrl = NandController(self.params, channels=channels)
        self.slot_words = self.ctrl.slot_words
        self.buf_addr_width = (nand_slots * self.slot_words - 1).bit_length()
        self.map_geometry = dict(sets=map_sets, ways=map_ways, line=map_line, segments=map_segments)
        self.map_segments = map_segments
        self.alloc = PageAllocator(channels=channels, ways=ways)
        die_block = self.alloc.free.payload.shape()
        super().__init__({
            "regs": In(wishbone.Signature(addr_width=6, data_width=32)),
            "mem": Out(wishbone.Signature(addr_width=30, data_width=32, burst=True)),
            "irq": Out(1),
            "bus": Out(OnfiBusSignature(ways)).array(channels),
            "timing": In(TIMING),
            "busy": Out(channels),
            "desc": In(stream.Signature(layouts.NAND_DESC)),
            "fw_buf": In(ArbitratedBufferSignature(self.buf_addr_width)).array(channels),
            "cpl": Out(stream.Signature(layouts.NAND_CPL)),
            "free": In(stream.Signature(die_block)),
            "closed": Out(stream.Signature(die_block)),
            "failed": Out(stream.Signature(32)),
            "failed_lost": Out(1),
            "seq_load": In(stream.Signature(64)),
            "seq_next": Out(64),
            "hold": In(1),
            "no_space": In(1),
            "no_blocks": In(1),
            "pages_per_block": In(PAGE_BITS + 1),
            "starved": Out(1),
            "capacity": In(64),
            "l2p_base": In(32),
            "bt_base": In(32),
            "block_shift": In(5),
            "scratch_base": In(32),
            "identify_base": In(32),
            "log_base": In(32),
            "reloc": In(stream.Signature(Relocator.req_layout())),
            "reloc_done": Out(stream.Signature(Relocator.done_layout())),
            "gc_buf": In(32),
            "map_fw": In(MapPortSignature(32)),
            "map_hits": Out(32),
            "map_misses": Out(32),
            "map_lazy": In(1),
            "map_seg_shift": In(5),
            "map_seg_set": In(stream.Signature(seg_set_layout(exact_log2(map_segments)))),
            "map_fault": Out(1),
            "map_fault_seg": Out(32),
            "map_faults": Out(32),
            "tx_floor": Out(64),
            "floor_passes": Out(32),
            "tx_open": Out(range(max_open_tx + 1)),
            "pending_free": Out(range(max_pending + 1)),
            "pending_budget": In(range(max_pending + 1)),
            "cache_base": In(32),
            "cache_in": Out(32),
            "cache_coalesced": Out(32),
            "cache_destaged": Out(32),
            "cache_stripes": Out(32),
            "cache_dirty": Out(range(cache_pages + 1)),
            "cache_busy": Out(1),
            "host_read_pages": Out(32),
            "host_write_pages": Out(32),
            "record_pages": Out(32),
            "nand_reads": Out(32),
            "nand_programs": Out(32),
            "nand_erases": Out(32),
            "mlc": In(1),
            "pad_pages": Out(32),
            "token_key": Out(32),
            **({"stream_cmd": In(stream.Signature(command_layout(self.queue_ids))),
                "stream_cpl": Out(stream.Signature(completion_layout(self.queue_ids)))}
               if stream_queues else {}),
        })

    def elaborate(self, platform):
        m = Module()
        C, S = self.channels, self.stream_queues
        Q = self.queue_ids
        lim = self.limits
        m.submodules.ctrl = ctrl = self.ctrl
        m.submodules.alloc = alloc = self.alloc
        m.submodules.queues = queues = HostQueues(queue_pairs=self.queue_pairs)
        m.submodules.validator = validator = CommandValidator(queue_pairs=Q, limits=lim)
        T, E, A = self.max_open_tx, self.max_pending, self.max_appends
        m.submodules.executor = executor = Executor(queue_pairs=Q, page_data=self.profile.page_data,
                                                    slots=self.slots, max_transfer=lim.max_transfer,
                                                    max_members=max(lim.max_atomic_pages, lim.max_transfer),
                                                    max_open_tx=T, pending_entries=E, max_appends=A,
                                                    max_remap_triples=lim.max_remap_triples,
                                                    cache_pages=self.cache_pages, stripe=C * self.ways)
        owners = executor.owners       # transactions, then append slots
        m.submodules.pending = pending = PendingTable(entries=E, owners=owners, users=4)
        m.submodules.infopages = infopages = InfoPageWriter(tx_slots=T, append_slots=A, pending_entries=E,
                                                            owners=owners,
                                                            volatile_cache=self.cache_pages * self.profile.page_data)
        m.submodules.reader = reader = Reader(self.params, C, self.slot_words, queue_pairs=Q,
                                              max_transfer=lim.max_transfer, cache=self.cache_pages > 0,
                                              read_slots=self.read_slots, commands=self.read_commands)
        m.submodules.publisher = publisher = Publisher(slots=self.slots, max_members=executor.max_members,
                                                       pending_entries=E, owners=owners)
        # page-buffer slots per channel: programs, the firmware's, the relocator's, the reader's (the last)
        m.submodules.writer = writer = LogWriter(self.params, C, self.slot_words, write_slots=self.fw_slot)
        m.submodules.relocator = relocator = Relocator(self.params, C, self.slot_words,
                                                       slot=self.fw_slot + 1, pending_entries=E, owners=owners)
        m.submodules.mapcache = mapcache = MapCache(lba_bits=32, **self.map_geometry)
        m.submodules.mapport = mapport = MapPortArbiter(4, 32)
        m.submodules.blocktable = blocktable = BlockTable(channels=C, ways=self.ways)
        m.submodules.nandport = nandport = NandPortMux(4)
        m.submodules.cplmerge = cplmerge = StreamMerge(completion_layout(Q), 3)
        initiators = 8 + (self.cache_pages > 0)     # the write cache's fills have a copier of their own
        m.submodules.membus = membus = wishbone.Arbiter(initiators, addr_width=30, burst=True)
        m.submodules.rebinds = rebinds = StreamMerge(REBIND, 2)

        def connect_through_registers(name, source, sink):
            """``source`` to ``sink`` through a :class:`RegisterSlice`: a timing cut between two blocks
            whose handshakes would otherwise chain into one combinational path."""
            m.submodules[name] = cut = RegisterSlice(source.payload.shape())
            wiring.connect(m, source, cut.input)
            wiring.connect(m, cut.output, sink)

        # host side
        wiring.connect(m, wiring.flipped(self.regs), queues.bus)
        # `hold` (the firmware's GC short of blocks): no new command from the host's pairs; the
        # firmware's (the last) goes on, so GC can fence, erase and checkpoint with the host held
        m.d.comb += queues.hold.eq(self.hold)
        if S:
            # the stream front end's ids first, the host queues' after them
            m.submodules.frontends = frontends = FrontEndJoin(stream_queues=S, queue_pairs=self.queue_pairs)
            wiring.connect(m, queues.cmd, frontends.queues_cmd)
            wiring.connect(m, wiring.flipped(self.stream_cmd), frontends.stream_cmd)
            wiring.connect(m, frontends.cmd, validator.cmd)
            m.d.comb += frontends.hold.eq(self.hold)
        else:
            wiring.connect(m, queues.cmd, validator.cmd)
        wiring.connect(m, validator.accepted, executor.cmd)
        wiring.connect(m, executor.read, reader.cmd)
        wiring.connect(m, validator.rejected, cplmerge.inputs[0])
        connect_through_registers("executor_cpl", executor.cpl, cplmerge.inputs[1])
        connect_through_registers("reader_cpl", reader.cpl, cplmerge.inputs[2])   # its valid is a count's compare
        connect_through_registers("merged_cpl", cplmerge.output, frontends.cpl if S else queues.cpl)
        if S:
            wiring.connect(m, frontends.queues_cpl, queues.cpl)
            wiring.connect(m, frontends.stream_cpl, wiring.flipped(self.stream_cpl))
        m.d.comb += [self.irq.eq(queues.irq), validator.capacity.eq(self.capacity),
                     executor.capacity.eq(self.capacity), executor.scratch_base.eq(self.scratch_base),
                     infopages.identify_base.eq(self.identify_base), infopages.log_base.eq(self.log_base),
                     executor.no_space.eq(self.no_space)]
        # the tokens' key: drawn once after reset; APPEND waits for it
        m.submodules.trng = trng = Trng(ring_oscillator=self.ring_oscillator, sim_seed=self.token_key_seed)
        drawn = Signal()
        m.d.sync += drawn.eq(1)
        m.d.comb += [trng.start.eq(~drawn), executor.token_key.eq(trng.key), executor.token_key_ready.eq(trng.ready),
                     executor.token_key_failed.eq(trng.alarm & ~trng.busy)]
        K = {b.name: b for b in spec.FTL_REGS["token_key"].bits}
        m.d.comb += [self.token_key[K[name].lsb:K[name].lsb + K[name].width].eq(v) for name, v in (
            ("ready", trng.ready), ("busy", trng.busy), ("alarm", trng.alarm), ("alarm_rct", trng.alarm_rct),
            ("alarm_apt", trng.alarm_apt), ("hardware", int(self.ring_oscillator)), ("draws", trng.draws))]
        # IDENTIFY and GET_LOG: the executor hands the page over and waits; the writer reads its tables
        wiring.connect(m, executor.info_job, infopages.job)
        wiring.connect(m, infopages.done, executor.info_done)
        wiring.connect(m, infopages.tx_view, executor.tx_view)
        wiring.connect(m, infopages.append_view, executor.append_view)

        # executor <-> publisher <-> log writer
        wiring.connect(m, executor.pub_member_lba, publisher.member_lba)
        connect_through_registers("pub_open", executor.pub_open, publisher.open)
        m.d.comb += [executor.pub_transfer_error.eq(publisher.transfer_error),
                     executor.pub_no_page.eq(publisher.no_page)]
        wiring.connect(m, executor.pub_give_up, publisher.give_up)
        wiring.connect(m, publisher.retry, executor.pub_retry)
        connect_through_registers("published", publisher.published, executor.pub_published)
        # transactions: the pending-bindings table (publisher first: it holds the map port while it walks),
        # the reader's TX_READ overrides, the first page's seq as the transaction's tag
        wiring.connect(m, publisher.pending, pending.users[0])
        wiring.connect(m, relocator.pending, pending.users[1])
        wiring.connect(m, executor.pending, pending.users[2])
        wiring.connect(m, infopages.pending, pending.users[3])
        wiring.connect(m, publisher.freed, executor.pub_freed)
        # the firmware's budget bounds what TX_WRITE and APPEND may stage
        m.d.comb += [pending.budget.eq(self.pending_budget), executor.pending_free.eq(pending.room),
                     publisher.doomed.eq(executor.tx_doomed),
                     executor.page_seq.eq(alloc.seq_next),
                     self.tx_floor.eq(executor.tx_floor), self.tx_open.eq(executor.tx_open),
                     self.floor_passes.eq(executor.floor_passes),
                     self.pending_free.eq(pending.free)]
        wiring.connect(m, executor.overrides, reader.overrides)
        # the write cache: the reader's lookups and lock, the counters
        wiring.connect(m, reader.cache_lookup, executor.cache_lookup)
        # with MLC paired pages the cache keeps many more pages destaging (writecache.py, ``deep``)
        m.d.comb += [executor.cache_base.eq(self.cache_base), executor.cache_deep.eq(self.mlc),
                     self.cache_in.eq(executor.cache_in), self.cache_coalesced.eq(executor.cache_coalesced),
                     self.cache_destaged.eq(executor.cache_destaged), self.cache_stripes.eq(executor.cache_stripes),
                     self.cache_dirty.eq(executor.cache_dirty), self.cache_busy.eq(executor.cache_busy)]
        # the log writer: the executor (never inside a group it is issuing) and the relocator, alternating;
        # PAD pages for an exposed MLC lower page when both have been idle a while (rtl/ftl/pairing.py)
        assert executor.idx_bits + executor.slot_bits <= HOST_TAG_BITS, "executor tags must stay below PAD_TAG"
        assert (executor.idx_bits, executor.slot_bits) == (publisher.idx_bits, publisher.slot_bits), \
            "the executor tags its pages as the publisher reads them"
        m.submodules.pairing = pairing = PairedPages(channels=C, ways=self.ways, pad_tag=PAD_TAG,
                                                     pad_idle=self.pad_idle)
        m.submodules.logport = logport = LogPortArbiter(die_bits=alloc.die_bits)
        wiring.connect(m, executor.page, logport.host)
        # completions are cut after the log port sorts them by requester: a cut in front of it had the
        # requesters' ready, worked out from the completion itself, come back to its own registers
        connect_through_registers("member_done", logport.host_done, publisher.member)  # tagged Publisher.member_tag
        wiring.connect(m, relocator.page, logport.reloc)
        connect_through_registers("reloc_done", logport.reloc_done, relocator.page_done)
        wiring.connect(m, pairing.pad, logport.pad)
        wiring.connect(m, logport.req, writer.req)
        connect_through_registers("writer_done", writer.done, pairing.done_in)
        wiring.connect(m, pairing.done_out, logport.done)
        m.d.comb += [logport.host_lock.eq(executor.page_lock), logport.allocated.eq(writer.alloc.valid),
                     alloc.demand.eq(writer.req.valid),
                     alloc.force.eq(logport.force), alloc.force_die.eq(logport.force_die),
                     pairing.writer_idle.eq(logport.idle),
                     pairing.mlc.eq(self.mlc), pairing.pages_per_block.eq(self.pages_per_block),
                     pairing.open.eq(alloc.open),
                     pairing.issued.valid.eq(writer.alloc.valid & writer.alloc.ready),
                     pairing.issued.payload.ppa.eq(writer.alloc.payload.ppa),
                     pairing.issued.payload.pad.eq(logport.pad_now),
                     self.pad_pages.eq(logport.pad_pages), self.record_pages.eq(logport.record_pages),
                     self.host_write_pages.eq(logport.host_write_pages),
                     self.host_read_pages.eq(reader.pages),
                     writer.give_up.eq(self.no_blocks & alloc.starved)]
        wiring.connect(m, wiring.flipped(self.reloc), relocator.req)
        wiring.connect(m, relocator.done, wiring.flipped(self.reloc_done))
        m.d.comb += relocator.gc_buf.eq(self.gc_buf)
        wiring.connect(m, alloc.alloc, writer.alloc)
        wiring.connect(m, wiring.flipped(self.free), alloc.free)
        wiring.connect(m, wiring.flipped(self.seq_load), alloc.seq_load)
        wiring.connect(m, alloc.closed, wiring.flipped(self.closed))
        # program failures (the data itself is re-issued by the executor/relocator): the page, for the firmware
        wiring.connect(m, logport.failed, wiring.flipped(self.failed))
        m.d.comb += self.failed_lost.eq(logport.failed_lost)
        m.d.comb += [alloc.pages_per_block.eq(self.pages_per_block), self.starved.eq(alloc.starved),
                     self.seq_next.eq(alloc.seq_next)]

        # the map: publisher and reader share the cache; rebinds to the block table
        pub_port = mapport.users[0]
        m.d.comb += [pub_port.lock.eq(publisher.map_lock), publisher.map_grant.eq(pub_port.grant)]
        wiring.connect(m, publisher.map_req, pub_port.req)
        wiring.connect(m, pub_port.resp, publisher.map_resp)
        wiring.connect(m, reader.map, mapport.users[1])
        # the users' requests reach the cache through registers (each waits for its answers before it lets
        # the port go): a reader's lookup and the cache's line update were one path
        connect_through_registers("map_req", mapport.req, mapcache.req)
        wiring.connect(m, mapcache.resp, mapport.resp)
        wiring.connect(m, relocator.map, mapport.users[2])
        wiring.connect(m, wiring.flipped(self.map_fw), mapport.users[3])
        wiring.connect(m, publisher.rebind, rebinds.inputs[0])
        wiring.connect(m, relocator.rebind, rebinds.inputs[1])
        wiring.connect(m, rebinds.output, blocktable.rebind)
        m.d.comb += [mapcache.table_base.eq(self.l2p_base), blocktable.table_base.eq(self.bt_base),
                     blocktable.block_shift.eq(self.block_shift),
                     self.map_hits.eq(mapcache.hits), self.map_misses.eq(mapcache.misses),
                     mapcache.lazy.eq(self.map_lazy), mapcache.seg_shift.eq(self.map_seg_shift),
                     self.map_fault.eq(mapcache.fault), self.map_fault_seg.eq(mapcache.fault_seg),
                     self.map_faults.eq(mapcache.faults)]
        wiring.connect(m, wiring.flipped(self.map_seg_set), mapcache.seg_set)

        # NAND: descriptors from the log writer, the reader and the firmware
        # the writer's program leaves through registers: the descriptor arbiter's grant was in front of the
        # writer's in-flight table
        connect_through_registers("writer_desc", writer.desc, nandport.desc_in[0])
        wiring.connect(m, nandport.cpl_out[0], writer.cpl)
        wiring.connect(m, reader.desc, nandport.desc_in[1])
        wiring.connect(m, nandport.cpl_out[1], reader.ncpl)
        wiring.connect(m, relocator.desc, nandport.desc_in[2])
        wiring.connect(m, nandport.cpl_out[2], relocator.ncpl)
        wiring.connect(m, wiring.flipped(self.desc), nandport.desc_in[3])
        wiring.connect(m, nandport.cpl_out[3], wiring.flipped(self.cpl))
        connect_through_registers("nand_desc", nandport.desc, ctrl.desc)
        m.d.comb += [self.nand_reads.eq(nandport.reads), self.nand_programs.eq(nandport.programs),
                     self.nand_erases.eq(nandport.erases)]
        connect_through_registers("nand_cpl", ctrl.cpl, nandport.cpl)
        m.d.comb += [ctrl.timing.eq(self.timing), self.busy.eq(ctrl.busy)]
        for c in range(C):
            wiring.connect(m, wiring.flipped(self.bus[c]), ctrl.bus[c])
            arb = BufferPortArbiter(4, self.buf_addr_width)
            m.submodules[f"bufarb{c}"] = arb
            wiring.connect(m, writer.buf[c], arb.users[0])
            wiring.connect(m, reader.buf[c], arb.users[1])
            wiring.connect(m, relocator.buf[c], arb.users[2])
            wiring.connect(m, wiring.flipped(self.fw_buf[c]), arb.users[3])
            wiring.connect(m, arb.buf, ctrl.buf[c])

        # SoC memory
        buses = [queues.dma, mapcache.dma, blocktable.dma, writer.bus, reader.bus, executor.bus, relocator.bus,
                 infopages.bus]
        if self.cache_pages:
            m.submodules.cachecopy = cachecopy = MemoryCopier(chunk=64)
            wiring.connect(m, executor.copy, cachecopy.req)
            wiring.connect(m, cachecopy.done, executor.copy_done)
            buses.append(cachecopy.bus)
        for i, initiator in enumerate(buses):
            wishbone.connect(m, initiator, membus.initiators[i])   # the page copies burst, the rest is classic
        wiring.connect(m, membus.bus, wiring.flipped(self.mem))
        return m
