"""ATA command layer, device role: ATA commands as the FTL core's commands.

The host's ATA commands come from the transport layer (``rtl/sata/transport.py``) as decoded
Register H2D FISes.  This layer runs one at a time (queued ones too) on the FTL core's stream front end,
as ``rtl/nvme/translate.py`` runs NVMe's: a ``spec.CMD`` on ``core_cmd`` whose data sits in SoC
memory (the staging area at ``staging_base``, reached over ``mem``), answered on ``core_cpl``.

The protocols, as SATA lays them out in FISes (device side):

* **PIO data-in** (IDENTIFY DEVICE): PIO Setup (D = 1, I = 1, status DRDY|DRQ, E_Status the ending
  status, transfer count 512), then one Data FIS of 128 dwords.  No Register D2H: the host takes
  the ending status from the PIO Setup's E_Status.  The words come from ``spec.ata_identify`` with
  the capacity, the write cache state and the checksum filled in here.
* **DMA in** (READ DMA EXT): the core reads the blocks into the staging area; then Data FISes of at
  most 8 KiB each, then Register D2H.  A failed read sends no data, only the D2H.
* **DMA out** (WRITE DMA EXT; DATA SET MANAGEMENT): DMA Activate, one Data FIS of at most 8 KiB
  into the staging area, again until all has come; then the core command(s); then Register D2H.
  WRITE is one core WRITE (FUA while the volatile write cache is off).  DATA SET MANAGEMENT with
  the TRIM bit takes ``count`` 512-byte blocks of ``spec.ATA_DSM_RANGE``; every non-empty range is
  checked against ``capacity`` first (one beyond it fails the command before any range is
  trimmed), then each becomes one core DEALLOCATE.
* **Non-data** (FLUSH CACHE [EXT], SET FEATURES): the core command if any, then Register D2H.
  SET FEATURES 02h/82h turn the volatile write cache on/off (82h flushes it first), 03h (transfer
  mode) is taken and changes nothing.

**Logical sectors on larger blocks (512e).**  With ``sector_bytes`` below the core's block, an LBA is a
sector and a block holds ``block_bytes // sector_bytes`` of them (IDENTIFY word 106 says how many, word
209 that LBA 0 starts a block).  A read reads the blocks covering its sectors into the staging area and
sends the slice from where the first sector starts.  A write covering whole blocks writes them; one
covering part of a block is a read-modify-write: the covering blocks are read into the staging area
first, the host's sectors land over them, and the blocks are written back, so the other sectors keep
their data.  A TRIM range deallocates only the whole blocks it covers; the rest keep their data, so
IDENTIFY claims deterministic reads after TRIM but zeros only when the sector is the block.

Every outcome is an atomflash ``Status``, reported through the one table ``spec.ata_status_of``:
ABRT for an unknown command (INVALID_OPCODE) or a bad field (INVALID_FIELD, a transfer above the
core's ``max_transfer``), IDNF for an LBA range beyond the capacity, UNC for a read the medium could
not return, ICRC|ABRT for a transfer the link lost (a Data FIS with a bad CRC or of the wrong length
from the host, R_ERR on ours: DATA_TRANSFER_ERROR).  A command refused before its data phase sends
just the D2H; one whose write data went wrong reaches the core not at all; either way nothing changed.

**NCQ** (READ/WRITE FPDMA QUEUED: the tag in count 7:3, the sectors in features, FUA in device bit 7). A
queued command is written into its tag's slot of a table and acknowledged at once with a Register D2H
(DRDY, BSY clear), so the host may queue more. When no command is arriving, the lowest pending tag runs
as READ/WRITE DMA EXT would, with a DMA Setup FIS (the tag as buffer id, the direction, no
auto-activate) just before its data moves, and completes in a Set Device Bits FIS with its SActive bit.
A queued command that fails sends the SDB with ERR and no SActive bit and stops the queue: the NCQ error
state, in which every command but READ LOG EXT 10h is ABRT. A tag already outstanding, or a non-queued
command while queued ones are outstanding, is ABRT, aborts every outstanding queued command and enters
the error state too (the log's NQ bit for the latter); a queued command that arrived while a non-queued
one ran (the host ignored BSY) is ABRT once that one has ended, and changes nothing. READ LOG EXT 10h
(PIO data-in, as IDENTIFY) sends the NCQ command error log (``spec.ATA_NCQ_ERROR_LOG``: the failed tag,
NQ, status, error, LBA, count), leaves the error state and aborts whatever was still queued. One queued
command runs at a time; the transport keeps a waiting Register H2D aside so the running command's Data
FISes pass it.

Register H2D FISes with C = 0 (device control) are taken and ignored.
"""

from amaranth import Array, Cat, Const, Module, Mux, Signal
from amaranth.lib import data
from amaranth.lib import stream, wiring
from amaranth.lib.wiring import In, Out
from amaranth.utils import exact_log2

from atomflash import command, spec
from atomflash.spec import ATA, AtaCommand as Ata, AtaFeature, AtaStatus, Opcode, SataFisType, Status
from rtl.host.queues import command_layout, completion_layout
from rtl import spec as layouts
from rtl.lib import wishbone

from .transport import ATA_COMMAND, LINK_RX, LINK_TX, LINK_TX_STATUS, SEND

__all__ = ["AtaCommandLayer"]

FIS_DWORDS = spec.SATA_TRANSPORT.DATA_FIS_MAX_DWORDS
DSM_ENTRIES = ATA.DSM_MAX_BLOCKS * ATA.DSM_BLOCK_BYTES // spec.ATA_DSM_RANGE.size
IDENTIFY_DWORDS = spec.ATA_IDENTIFY.size // 4
NCQ_TAGS = ATA.NCQ_DEPTH
#: a queued command waiting for its turn
QUEUED = data.StructLayout({"write": 1, "lba": 48, "count": 16, "fua": 1})


class AtaCommandLayer(wiring.Component):
    """See the module docstring.

    Parameters
    ----------
    block_bytes : int
        The core's logical block: ATA's physical sector.
    sector_bytes : int or None
        ATA's logical sector: 512 for 512e (``block_bytes // sector_bytes`` sectors to a block), or
        ``None`` for the block itself.
    limits : atomflash.command.StaticLimits
        The core's limits (``max_transfer`` blocks to a core command; ``max_sectors``, the most sectors a
        READ/WRITE DMA EXT takes, is what fits in that many blocks wherever the range starts).
    core_queue_ids, core_queue : int
        Every queue id the core knows, and the one this layer's commands use.
    volatile_cache : bool
        The core has a volatile write cache (IDENTIFY word 82 bit 5; SET FEATURES 02h/82h allowed).

    Ports
    -----
    command, data_in, data_wanted, send, data_out, sent
        The transport layer's upper side.
    core_cmd, core_cpl
        The FTL core's stream front end.
    mem : Out(wishbone.Signature(addr_width=30))
        SoC memory: the staging area (``staging_bytes`` from ``staging_base``, 4-byte aligned).
    capacity : In(64)
        The core's blocks (the device has ``block_bytes // sector_bytes`` times as many sectors).
    write_cache : Out(1)
        The volatile write cache is enabled (on at reset when there is one).
    idle : Out(1)
        No command in progress.
    """

    def __init__(self, *, block_bytes: int, sector_bytes: int | None = None,
                 limits: command.StaticLimits = command.StaticLimits(),
                 core_queue_ids: int = 1, core_queue: int = 0, volatile_cache: bool = True):
        sector_bytes = sector_bytes or block_bytes
        exact_log2(block_bytes)
        exact_log2(sector_bytes)
        if sector_bytes < ATA.SECTOR_BYTES_MIN or block_bytes < sector_bytes:
            raise ValueError(f"ATA sectors are at least {ATA.SECTOR_BYTES_MIN} bytes and at most a block")
        self.block_bytes, self.sector_bytes, self.limits, self.volatile_cache = \
            block_bytes, sector_bytes, limits, volatile_cache
        self.per_block_log2 = exact_log2(block_bytes // sector_bytes)
        per_block = 1 << self.per_block_log2
        self.max_sectors = limits.max_transfer * per_block - (per_block - 1)
        self.core_queue_ids, self.core_queue = core_queue_ids, core_queue
        self.staging_bytes = max(limits.max_transfer * block_bytes, ATA.DSM_MAX_BLOCKS * ATA.DSM_BLOCK_BYTES)
        super().__init__({
            "command": In(stream.Signature(ATA_COMMAND)),
            "data_in": In(stream.Signature(LINK_RX)),
            "data_wanted": Out(1),
            "send": Out(stream.Signature(SEND)),
            "data_out": Out(stream.Signature(LINK_TX)),
            "sent": In(stream.Signature(LINK_TX_STATUS)),
            "core_cmd": Out(stream.Signature(command_layout(core_queue_ids))),
            "core_cpl": In(stream.Signature(completion_layout(core_queue_ids))),
            "mem": Out(wishbone.Signature(addr_width=30, data_width=32)),
            "staging_base": In(32),
            "capacity": In(64),
            "write_cache": Out(1, init=int(volatile_cache)),
            "idle": Out(1),
        })

    def _identify_dword(self, m, index, sectors):
        """IDENTIFY DEVICE's dword ``index``: the constant words, the capacity, the write cache state, the checksum."""
        base = spec.ata_identify(capacity=0, block_bytes=self.block_bytes, sector_bytes=self.sector_bytes,
                                 volatile_cache=self.volatile_cache, write_cache=False)
        rec = spec.ATA_IDENTIFY
        cap28 = Signal(32)
        m.d.comb += cap28.eq(Mux(sectors > 0x0FFF_FFFF, 0x0FFF_FFFF, sectors))
        wce = self.write_cache & int(self.volatile_cache)
        wce_bit = 8 * rec["enabled1"].offset + rec["enabled1"].bits[0].lsb
        # the byte sum of words 0..254 (mod 256) with what is filled in here
        variable_bytes = [cap28[8 * i:8 * i + 8] for i in range(4)] + [sectors[8 * i:8 * i + 8] for i in range(8)]
        total = Signal(8)
        m.d.comb += total.eq(sum(base[:510]) + ATA.IDENTIFY_SIGNATURE + sum(variable_bytes) +
                             Mux(wce, 1 << (wce_bit % 8), 0))
        words = {i: Const(int.from_bytes(base[4 * i:4 * i + 4], "little"), 32) for i in range(IDENTIFY_DWORDS)}
        words[rec["sectors28"].offset // 4] = cap28
        words[rec["sectors48"].offset // 4] = sectors[:32]
        words[rec["sectors48"].offset // 4 + 1] = sectors[32:64]
        words[wce_bit // 32] = words[wce_bit // 32] | (wce << (wce_bit % 32))
        last = IDENTIFY_DWORDS - 1
        words[last] = Cat(words[last][:16], Const(ATA.IDENTIFY_SIGNATURE, 8), (-total)[:8])
        out = Signal(32)
        with m.Switch(index):
            for i, w in words.items():
                with m.Case(i):
                    m.d.comb += out.eq(w)
        return out

    def _ncq_log_dword(self, m, index, log):
        """READ LOG EXT 10h's dword ``index`` from ``log`` (``ATA_NCQ_ERROR_LOG`` without its checksum)."""
        raw = log.as_value()
        total = Signal(8)
        m.d.comb += total.eq(sum(raw[8 * i:8 * i + 8] for i in range(16)))     # all but the checksum is in 0..15
        out = Signal(32)
        m.d.comb += out.eq(raw.word_select(index, 32))
        with m.If(index == IDENTIFY_DWORDS - 1):
            m.d.comb += out.eq(Cat(Const(0, 24), (-total)[:8]))
        return out

    def elaborate(self, platform):
        m = Module()
        per_block_log2 = self.per_block_log2
        per_block = 1 << per_block_log2
        sector_bytes_log2 = exact_log2(self.sector_bytes)
        sector_words_log2 = sector_bytes_log2 - 2
        sectors = Signal(64)
        m.d.comb += sectors.eq(self.capacity << per_block_log2)

        # -- the command -----------------------------------------------------------------------------
        op = Signal(8)
        features = Signal(16)
        lba = Signal(48)
        n = Signal(17)                          # sectors (count, 0 = 65536), or DSM blocks
        status = Signal(15)                     # the outcome, an atomflash Status
        identify = Signal()                     # the data out is IDENTIFY's
        words_left = Signal(24)                 # of the whole transfer
        chunk = Signal(range(FIS_DWORDS + 1))   # of this Data FIS
        fis_words = Signal(16)                  # dwords of this Data FIS so far
        offset = Signal(24)                     # bytes into the staging area
        word = Signal(32)
        have_word = Signal()
        mem_error = Signal()                    # SoC memory answered err during this transfer
        index = Signal(range(DSM_ENTRIES + 1))
        lo = Signal(32)
        core_lba, core_nlb = Signal(48), Signal(17)    # the blocks of the core command
        head = Signal(24)                       # bytes into the first block where the sectors start
        merging = Signal()                      # a partial-block write: the blocks are read first
        disabling_cache = Signal()
        # -- NCQ ----------------------------------------------------------------------------------------
        log_out = Signal()                      # the PIO data out is the NCQ error log
        queued = Signal()                       # the command running is a queued one, of tag ``tag``
        tag = Signal(5)
        fua = Signal()
        device = Signal(8)
        device_fua = (device & ATA.DEVICE_FUA) != 0
        pending = Signal(NCQ_TAGS)              # queued commands acknowledged and not yet completed
        table = Array(Signal(QUEUED, name=f"queued_{t}") for t in range(NCQ_TAGS))
        ncq_error = Signal()                    # stopped until READ LOG EXT 10h
        running_plain = Signal()                # a non-queued command is running (BSY, for the host)
        arrived_busy = Signal()                 # a command came in while one was: the host ignored BSY
        collided = Signal()                     # ... and that is the command being decoded
        log = Signal(layouts.layout_of(spec.ATA_NCQ_ERROR_LOG))

        def ncq_failure(nq, status_bits, error_bits, at_tag=0, at_lba=0, count=0):
            """Enter the NCQ error state: what the log page will report."""
            m.d.sync += [ncq_error.eq(1), log.as_value().eq(0), log.tag.eq(Cat(Const(0, 5) | at_tag, Const(0, 2), nq)),
                         log.status.eq(status_bits), log.error.eq(error_bits), log.device.eq(ATA.DEVICE_LBA),
                         log.count.eq(count),
                         *(log[f"lba{i}"].eq((Const(0, 48) | at_lba)[8 * i:8 * i + 8]) for i in range(6))]

        def is_(*ops):
            return Cat(*(op == int(o) for o in ops)).any()

        read = is_(Ata.READ_DMA_EXT)
        mem = self.mem

        # -- core command ------------------------------------------------------------------------------
        core_opcode = Signal(8)
        cmd = self.core_cmd.payload.cmd
        m.d.comb += [self.core_cmd.payload.sqid.eq(self.core_queue), cmd.opcode.eq(core_opcode), cmd.cid.eq(0),
                     cmd.nsid.eq(command.NSID), cmd.buf.eq(self.staging_base),
                     cmd.flags.fua.eq((~self.write_cache | fua) & (core_opcode != Opcode.FLUSH) &
                                      (core_opcode != Opcode.READ))]
        with m.If(is_(Ata.DATA_SET_MANAGEMENT, Ata.READ_DMA_EXT, Ata.WRITE_DMA_EXT)):
            m.d.comb += [cmd.lba.eq(core_lba), cmd.nlb.eq(core_nlb)]

        # -- the ending status: spec.ata_status_of ---------------------------------------------------------
        ata_status, ata_error = Signal(8), Signal(8)
        with m.Switch(status):
            for s in Status:
                with m.Case(int(s)):
                    as_read, as_other = spec.ata_status_of(s, read=True), spec.ata_status_of(s)
                    m.d.comb += [ata_status.eq(Mux(read, as_read[0], as_other[0])),
                                 ata_error.eq(Mux(read, as_read[1], as_other[1]))]
            with m.Default():
                st, er = spec.ata_status_of(Status.INTERNAL_ERROR)
                m.d.comb += [ata_status.eq(st), ata_error.eq(er)]

        def fail(code):
            m.d.sync += status.eq(code)
            m.next = "D2H"

        def access(address, write=False, value=0):
            m.d.comb += [mem.cyc.eq(1), mem.stb.eq(1), mem.adr.eq(address[2:]), mem.sel.eq(0xF),
                         mem.we.eq(write), mem.dat_w.eq(value)]
            return mem.ack | mem.err

        def send(fis_type, **values):
            m.d.comb += [self.send.valid.eq(1), self.send.payload.type.eq(int(fis_type))]
            for k, v in values.items():
                m.d.comb += self.send.payload[k].eq(v)

        def start_transfer(words, following, at=0):
            m.d.sync += [words_left.eq(words), offset.eq(at), mem_error.eq(0)]
            with m.If(queued):                  # first-party DMA: the DMA Setup FIS names the tag first
                m.next = "DMA_SETUP"
            with m.Else():
                m.next = following

        identify_word = Mux(log_out, self._ncq_log_dword(m, fis_words[:7], log),
                            self._identify_dword(m, fis_words[:7], sectors))
        # the blocks covering sectors lba..lba+n-1, and where in the first one they start
        first_block = lba >> per_block_log2
        end_block = (lba + n + (per_block - 1)) >> per_block_log2
        partial = ((lba | (lba + n)) & (per_block - 1)) != 0
        staged = self.staging_base + offset
        first_chunk = Mux(words_left > FIS_DWORDS, FIS_DWORDS, words_left)

        with m.If(self.command.valid & running_plain & ~self.idle):
            m.d.sync += arrived_busy.eq(1)
        with m.FSM() as fsm:
            m.d.comb += self.idle.eq(fsm.ongoing("IDLE"))
            with m.State("IDLE"):
                m.d.comb += self.command.ready.eq(1)
                c = self.command.payload
                with m.If(self.command.valid & c.c):
                    m.d.sync += [op.eq(c.command), features.eq(c.features), lba.eq(c.lba),
                                 n.eq(Mux(c.count == 0, 1 << 16, c.count)), status.eq(Status.SUCCESS),
                                 identify.eq(0), log_out.eq(0), disabling_cache.eq(0), index.eq(0), queued.eq(0),
                                 fua.eq(0), tag.eq(c.count[ATA.NCQ_TAG_SHIFT:ATA.NCQ_TAG_SHIFT + 5]),
                                 device.eq(c.device), collided.eq(arrived_busy), arrived_busy.eq(0),
                                 running_plain.eq(0)]
                    m.next = "DECODE"
                with m.Elif(pending.any() & ~ncq_error):
                    m.d.comb += self.command.ready.eq(0)
                    lowest = Signal(5)
                    for t in reversed(range(NCQ_TAGS)):
                        with m.If(pending[t]):
                            m.d.comb += lowest.eq(t)
                    e = table[lowest]
                    m.d.sync += [op.eq(Mux(e.write, Ata.WRITE_DMA_EXT, Ata.READ_DMA_EXT)), lba.eq(e.lba),
                                 n.eq(Mux(e.count == 0, 1 << 16, e.count)), status.eq(Status.SUCCESS),
                                 identify.eq(0), log_out.eq(0), disabling_cache.eq(0), queued.eq(1), tag.eq(lowest),
                                 fua.eq(e.fua)]
                    m.next = "DECODE"

            with m.State("DECODE"):
                is_queued_op = is_(Ata.READ_FPDMA_QUEUED, Ata.WRITE_FPDMA_QUEUED) & ~queued
                log_page = is_(Ata.READ_LOG_EXT) & (lba[:8] == ATA.LOG_NCQ_ERROR)
                abrt = spec.ata_status_of(Status.INVALID_FIELD)
                with m.If(ncq_error & ~log_page):
                    fail(Status.INVALID_FIELD)                  # stopped until the host reads the log
                with m.Elif(is_queued_op & collided):
                    fail(Status.INVALID_FIELD)                  # queued while a non-queued command ran
                with m.Elif(is_queued_op & pending.bit_select(tag, 1)):
                    m.d.sync += pending.eq(0)                   # a tag in use: every queued command aborted
                    ncq_failure(0, *abrt, at_tag=tag, at_lba=lba, count=features)
                    fail(Status.INVALID_FIELD)
                with m.Elif(is_queued_op):
                    m.d.sync += [table[tag].write.eq(is_(Ata.WRITE_FPDMA_QUEUED)), table[tag].lba.eq(lba),
                                 table[tag].count.eq(features), table[tag].fua.eq(device_fua),
                                 pending.bit_select(tag, 1).eq(1)]
                    m.next = "ACKNOWLEDGE"
                with m.Elif(pending.any() & ~queued & ~ncq_error):
                    m.d.sync += pending.eq(0)                   # a non-queued command among queued ones
                    ncq_failure(1, *abrt)
                    fail(Status.INVALID_FIELD)
                with m.Else():
                    m.d.sync += running_plain.eq(~queued)
                    with m.Switch(op):
                        with m.Case(Ata.READ_LOG_EXT):
                            with m.If((lba[:8] != ATA.LOG_NCQ_ERROR) | (lba[8:] != 0) | (n != 1)):
                                fail(Status.INVALID_FIELD)
                            with m.Else():
                                m.d.sync += log_out.eq(1)
                                m.next = "PIO_SETUP"
                        with m.Case(Ata.IDENTIFY_DEVICE):
                            m.d.sync += identify.eq(1)
                            m.next = "PIO_SETUP"
                        with m.Case(Ata.READ_DMA_EXT, Ata.WRITE_DMA_EXT):
                            m.d.sync += [core_lba.eq(first_block), core_nlb.eq(end_block - first_block),
                                         head.eq((lba & (per_block - 1)) << sector_bytes_log2), merging.eq(0)]
                            with m.If(n > self.max_sectors):
                                fail(Status.TRANSFER_TOO_LARGE)
                            with m.Elif(lba + n > sectors):
                                fail(Status.LBA_OUT_OF_RANGE)
                            with m.Elif(read):
                                m.d.sync += core_opcode.eq(Opcode.READ)
                                m.next = "ISSUE"
                            with m.Elif(partial):           # read-modify-write: the blocks first
                                m.d.sync += [core_opcode.eq(Opcode.READ), merging.eq(1)]
                                m.next = "ISSUE"
                            with m.Else():
                                m.d.sync += core_opcode.eq(Opcode.WRITE)
                                start_transfer(n << sector_words_log2, "ACTIVATE")
                        with m.Case(Ata.FLUSH_CACHE, Ata.FLUSH_CACHE_EXT):
                            m.d.sync += core_opcode.eq(Opcode.FLUSH)
                            m.next = "ISSUE"
                        with m.Case(Ata.SET_FEATURES):
                            with m.Switch(features[:8]):
                                with m.Case(AtaFeature.ENABLE_WRITE_CACHE):
                                    if self.volatile_cache:
                                        m.d.sync += self.write_cache.eq(1)
                                        m.next = "D2H"
                                    else:
                                        fail(Status.INVALID_FIELD)
                                with m.Case(AtaFeature.DISABLE_WRITE_CACHE):
                                    m.d.sync += [core_opcode.eq(Opcode.FLUSH), disabling_cache.eq(1)]
                                    m.next = "ISSUE"
                                with m.Case(AtaFeature.SET_TRANSFER_MODE):
                                    m.next = "D2H"
                                with m.Default():
                                    fail(Status.INVALID_FIELD)
                        with m.Case(Ata.DATA_SET_MANAGEMENT):
                            with m.If(~features[0] | (n > ATA.DSM_MAX_BLOCKS)):
                                fail(Status.INVALID_FIELD)
                            with m.Else():
                                m.d.sync += core_opcode.eq(Opcode.DEALLOCATE)
                                start_transfer(n * (ATA.DSM_BLOCK_BYTES // 4), "ACTIVATE")
                        with m.Default():
                            fail(Status.INVALID_OPCODE)

            # -- NCQ: the acknowledgement of a queued command, and the DMA Setup before its data ------------------
            with m.State("ACKNOWLEDGE"):
                send(SataFisType.REG_D2H, status=spec.ata_status_of(Status.SUCCESS)[0], device=ATA.DEVICE_LBA)
                with m.If(self.send.ready):
                    m.next = "ACKNOWLEDGE_SENT"
            with m.State("ACKNOWLEDGE_SENT"):
                m.d.comb += self.sent.ready.eq(1)
                with m.If(self.sent.valid):
                    m.next = "IDLE"
            with m.State("DMA_SETUP"):
                send(SataFisType.DMA_SETUP, to_host=read, buffer_id=tag, transfer_count=n << sector_bytes_log2)
                with m.If(self.send.ready):
                    m.next = "DMA_SETUP_SENT"
            with m.State("DMA_SETUP_SENT"):
                m.d.comb += self.sent.ready.eq(1)
                with m.If(self.sent.valid):
                    with m.If(~self.sent.payload.ok):
                        fail(Status.DATA_TRANSFER_ERROR)
                    with m.Elif(read):
                        m.next = "DATA_HEADER"
                    with m.Else():
                        m.next = "ACTIVATE"

            # -- DMA out: DMA Activate, a Data FIS into the staging area, until all has come ---------------------
            with m.State("ACTIVATE"):
                send(SataFisType.DMA_ACTIVATE)
                with m.If(self.send.ready):
                    m.next = "ACTIVATE_SENT"
            with m.State("ACTIVATE_SENT"):
                m.d.comb += [self.data_wanted.eq(1), self.sent.ready.eq(1)]
                with m.If(self.sent.valid):
                    with m.If(self.sent.payload.ok):
                        m.d.sync += [chunk.eq(first_chunk), fis_words.eq(0)]
                        m.next = "RECEIVE"
                    with m.Else():
                        fail(Status.DATA_TRANSFER_ERROR)
            with m.State("RECEIVE"):
                m.d.comb += self.data_wanted.eq(1)
                d = self.data_in
                in_chunk = fis_words < chunk
                taken = Signal()
                with m.If(d.valid):
                    with m.If(in_chunk):
                        m.d.comb += taken.eq(access(staged, write=True, value=d.payload.data))
                        with m.If(mem.err):
                            m.d.sync += mem_error.eq(1)
                    with m.Else():
                        m.d.comb += taken.eq(1)
                m.d.comb += d.ready.eq(taken)
                with m.If(d.valid & taken):
                    m.d.sync += [fis_words.eq(fis_words + 1), offset.eq(offset + Mux(in_chunk, 4, 0))]
                    with m.If(d.payload.last):
                        with m.If(mem_error | mem.err):
                            fail(Status.INTERNAL_ERROR)
                        with m.Elif(d.payload.error | (fis_words + 1 != chunk)):
                            fail(Status.DATA_TRANSFER_ERROR)
                        with m.Elif(words_left == chunk):
                            with m.If(is_(Ata.DATA_SET_MANAGEMENT)):
                                m.next = "CHECK_RANGE_LO"
                            with m.Else():
                                m.next = "ISSUE"
                        with m.Else():
                            m.d.sync += words_left.eq(words_left - chunk)
                            m.next = "ACTIVATE"

            # -- DATA SET MANAGEMENT: every range within the capacity first, then one DEALLOCATE each ---------
            entry_at = self.staging_base + (index << 3)
            with m.State("CHECK_RANGE_LO"):
                with m.If(access(entry_at)):
                    m.d.sync += lo.eq(mem.dat_r)
                    m.next = "CHECK_RANGE_HI"
            with m.State("CHECK_RANGE_HI"):
                with m.If(access(entry_at + 4)):
                    length = mem.dat_r[16:]
                    with m.If((length != 0) & (Cat(lo, mem.dat_r[:16]) + length > sectors)):
                        fail(Status.LBA_OUT_OF_RANGE)
                    with m.Elif(index + 1 == n * (DSM_ENTRIES // ATA.DSM_MAX_BLOCKS)):
                        m.d.sync += index.eq(0)
                        m.next = "NEXT_RANGE_LO"
                    with m.Else():
                        m.d.sync += index.eq(index + 1)
                        m.next = "CHECK_RANGE_LO"
            with m.State("NEXT_RANGE_LO"):
                with m.If(index == n * (DSM_ENTRIES // ATA.DSM_MAX_BLOCKS)):
                    m.next = "D2H"
                with m.Else():
                    with m.If(access(entry_at)):
                        m.d.sync += lo.eq(mem.dat_r)
                        m.next = "NEXT_RANGE_HI"
            with m.State("NEXT_RANGE_HI"):
                # only the whole blocks a range covers are deallocated
                range_start = Cat(lo, mem.dat_r[:16])
                range_first = (range_start + (per_block - 1)) >> per_block_log2
                range_end = (range_start + mem.dat_r[16:]) >> per_block_log2
                with m.If(access(entry_at + 4)):
                    m.d.sync += [core_lba.eq(range_first), core_nlb.eq(range_end - range_first),
                                 index.eq(index + 1)]
                    with m.If(range_end <= range_first):
                        m.next = "NEXT_RANGE_LO"
                    with m.Else():
                        m.next = "ISSUE"

            # -- the core ----------------------------------------------------------------------------------
            with m.State("ISSUE"):
                m.d.comb += self.core_cmd.valid.eq(1)
                with m.If(self.core_cmd.ready):
                    m.next = "CORE"
            with m.State("CORE"):
                m.d.comb += self.core_cpl.ready.eq(1)
                with m.If(self.core_cpl.valid):
                    s = self.core_cpl.payload.status
                    m.d.sync += status.eq(s)
                    with m.If(s != Status.SUCCESS):
                        m.next = "D2H"
                    with m.Elif(merging):                # the write's sectors go over the blocks read
                        m.d.sync += [core_opcode.eq(Opcode.WRITE), merging.eq(0)]
                        start_transfer(n << sector_words_log2, "ACTIVATE", at=head)
                    with m.Elif(read):
                        start_transfer(n << sector_words_log2, "DATA_HEADER", at=head)
                    with m.Elif(is_(Ata.DATA_SET_MANAGEMENT)):
                        m.next = "NEXT_RANGE_LO"
                    with m.Else():
                        with m.If(disabling_cache):
                            m.d.sync += self.write_cache.eq(0)
                        m.next = "D2H"

            # -- PIO data-in: PIO Setup, then the Data FIS --------------------------------------------------
            with m.State("PIO_SETUP"):
                ok_status = spec.ata_status_of(Status.SUCCESS)[0]
                send(SataFisType.PIO_SETUP, to_host=1, interrupt=1, status=ok_status | AtaStatus.DRQ,
                     e_status=ok_status, transfer_count=spec.ATA_IDENTIFY.size, device=ATA.DEVICE_LBA)
                with m.If(self.send.ready):
                    m.next = "PIO_SETUP_SENT"
            with m.State("PIO_SETUP_SENT"):
                m.d.comb += self.sent.ready.eq(1)
                with m.If(self.sent.valid):
                    with m.If(self.sent.payload.ok):
                        start_transfer(IDENTIFY_DWORDS, "DATA_HEADER")
                    with m.Else():
                        fail(Status.DATA_TRANSFER_ERROR)

            # -- data out: Data FISes of at most 8 KiB from the staging area (or IDENTIFY's words) ----------
            with m.State("DATA_HEADER"):
                send(SataFisType.DATA)
                with m.If(self.send.ready):
                    m.d.sync += [chunk.eq(first_chunk), fis_words.eq(0), have_word.eq(0)]
                    m.next = "DATA_WORDS"
            with m.State("DATA_WORDS"):
                with m.If(~have_word):
                    with m.If(identify | log_out):
                        m.d.sync += [word.eq(identify_word), have_word.eq(1)]
                    with m.Else():
                        with m.If(access(staged)):
                            m.d.sync += [word.eq(mem.dat_r), have_word.eq(1)]
                        with m.If(mem.err):
                            m.d.sync += mem_error.eq(1)     # the FIS goes on; the D2H reports it
                with m.Else():
                    last_word = fis_words + 1 == chunk
                    m.d.comb += [self.data_out.valid.eq(1), self.data_out.payload.data.eq(word),
                                 self.data_out.payload.last.eq(last_word)]
                    with m.If(self.data_out.ready):
                        m.d.sync += [have_word.eq(0), fis_words.eq(fis_words + 1), offset.eq(offset + 4)]
                        with m.If(last_word):
                            m.next = "DATA_SENT"
            with m.State("DATA_SENT"):
                m.d.comb += self.sent.ready.eq(1)
                with m.If(self.sent.valid):
                    with m.If(~self.sent.payload.ok):
                        fail(Status.DATA_TRANSFER_ERROR)
                    with m.Elif(mem_error & (words_left == chunk)):
                        fail(Status.INTERNAL_ERROR)
                    with m.Elif(words_left != chunk):
                        m.d.sync += words_left.eq(words_left - chunk)
                        m.next = "DATA_HEADER"
                    with m.Elif(identify | log_out):
                        m.next = "IDLE"             # PIO data-in ends with the PIO Setup's E_Status
                        with m.If(log_out):         # the log read: the queued commands are aborted
                            m.d.sync += [ncq_error.eq(0), pending.eq(0)]
                    with m.Else():
                        m.next = "D2H"

            # -- the ending status ---------------------------------------------------------------------------
            # (a queued command's: Set Device Bits, its tag's SActive bit set when it succeeded)
            with m.State("D2H"):
                with m.If(queued):
                    send(SataFisType.SET_DEVICE_BITS, interrupt=1, status=ata_status, error=ata_error,
                         sactive=Mux(status == Status.SUCCESS, Const(1, NCQ_TAGS) << tag, 0))
                with m.Else():
                    send(SataFisType.REG_D2H, interrupt=1, status=ata_status, error=ata_error, device=ATA.DEVICE_LBA)
                with m.If(self.send.ready):
                    m.next = "D2H_SENT"
            with m.State("D2H_SENT"):
                m.d.comb += self.sent.ready.eq(1)
                with m.If(self.sent.valid):
                    m.next = "IDLE"
                    with m.If(queued):
                        m.d.sync += pending.bit_select(tag, 1).eq(0)
                        with m.If(status != Status.SUCCESS):        # stopped until READ LOG EXT 10h
                            ncq_failure(0, ata_status, ata_error, at_tag=tag, at_lba=lba, count=n[:16])
        return m
