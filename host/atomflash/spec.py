"""The single source of truth for every format that crosses a boundary.

Host library, firmware (through the generated C header, ``make gen``), RTL
(through :mod:`rtl.spec`) and the NAND model all take their formats, codes and
limits from here.  Change a field here and every side follows; never copy a
constant into another language by hand.

Byte order is little-endian everywhere (host, RISC-V firmware and the RTL's
Wishbone buses are all little-endian).
"""

from __future__ import annotations

import zlib
from dataclasses import dataclass

from .siphash import siphash
from .specdsl import Bits, Constant, ConstantGroup, DocEnum, Field, Record, Register, RegisterMap, at, u8, u16, u32, u64

SPEC_VERSION = 1

# -----------------------------------------------------------------------------
# Opcodes: standard NVMe-shaped verbs, then atomflash's vendor verbs (>= 0x80,
# the range NVMe leaves to vendors).
# -----------------------------------------------------------------------------


class Opcode(DocEnum):
    FLUSH = 0x00, "return once every acknowledged write is durable on flash"
    WRITE = 0x01, "write nlb blocks from buf to lba..lba+nlb-1 (each block commits on its own)"
    READ = 0x02, "read nlb blocks at lba into buf; unmapped blocks read as zeros"
    DEALLOCATE = 0x09, "trim: unbind nlb blocks at lba (durable through a trim record)"
    IDENTIFY = 0x06, "copy the IDENTIFY record (geometry and limits) to buf"
    GET_LOG = 0x0A, "copy the statistics log page to buf"
    ATOMIC_WRITE = 0x81, "write nlist (lba, buf) pairs from list as one all-or-nothing group"
    TX_WRITE = 0x82, "stage nlb blocks at lba in transaction tid (visible to tid only)"
    TX_READ = 0x83, "read nlb blocks at lba as transaction tid sees them"
    TX_COMMIT = 0x84, "make every write of tid durable and visible, all or nothing"
    TX_ABORT = 0x85, "drop every write of tid"
    APPEND = 0x86, "stage nlb blocks from buf with no LBA; result is a remap token"
    REMAP = 0x87, "atomically bind nlist (lba, token, nlb) triples from list"
    RELEASE = 0x88, "discard the staged append named by token"
    HINT = 0x89, "application hint (cdw hint): checkpoint / flush group"


class CmdFlag(DocEnum):
    FUA = 0, "force unit access: complete only once durable (bit number)"
    TX_FINAL = 1, "TX_WRITE: this is the transaction's last write; its last page carries the commit"
    TX_NEW = 2, "TX_WRITE: this write opens the transaction; TID_IN_USE (nothing changes) if the tid is open already"


class Hint(DocEnum):
    NONE = 0, "no hint"
    CHECKPOINT = 1, "application checkpoint: drain the write buffer (like flush)"
    FLUSH_GROUP = 2, "end of a group of related writes: destage it together"


class Status(DocEnum):
    SUCCESS = 0x00, "success"
    INVALID_OPCODE = 0x01, "the opcode is not one the device implements"
    INVALID_FIELD = 0x02, "a field of the command holds a value the command does not allow"
    LBA_OUT_OF_RANGE = 0x03, "an LBA (or lba + nlb) lies beyond the device's capacity"
    ZERO_LENGTH = 0x04, "nlb or nlist is zero"
    MISALIGNED_BUFFER = 0x05, "a buffer or list address is not aligned as the command requires"
    TRANSFER_TOO_LARGE = 0x06, "nlb exceeds the largest transfer in IDENTIFY"
    GROUP_TOO_LARGE = 0x07, "an atomic group has more pages than IDENTIFY's max_atomic_pages"
    DUPLICATE_LBA = 0x08, "an atomic group or remap names the same LBA twice"
    TOO_MANY_OPEN_TX = 0x09, "opening this transaction would exceed IDENTIFY's max_open_tx"
    UNKNOWN_TX = 0x0A, "no transaction with this tid is open (never opened, or already committed/aborted)"
    INVALID_TID = 0x0B, "tid 0 is reserved for 'no transaction'"
    PENDING_FULL = 0x0C, ("the pending-bindings budget (IDENTIFY max_pending) has no room for these pages (or "
                          "every append slot is live)")
    INVALID_TOKEN = 0x0D, "the token names no live append (guessed, stale, released or already remapped)"
    REMAP_TOO_LARGE = 0x0E, "a remap has more triples than IDENTIFY's max_remap_triples"
    REMAP_LENGTH = 0x0F, "a remap triple's length differs from the append it names"
    MEDIA_ERROR = 0x10, "flash could not return or store the data (uncorrectable ECC, program failure)"
    NO_SPACE = 0x11, "no free flash pages remain for this write"
    NOT_READY = 0x12, "the device is recovering or not yet enabled"
    INTERNAL_ERROR = 0x13, "the controller hit an internal inconsistency; the command changed nothing"
    LIST_TOO_LONG = 0x14, "nlist exceeds the list capacity of this command"
    DATA_TRANSFER_ERROR = 0x15, "a data buffer or list in host memory could not be read or written (bus error)"
    TID_IN_USE = 0x16, "a TX_WRITE flagged tx_new names a transaction this queue pair has open already"


class LogPage(DocEnum):
    STATS = 0, "the statistics page (LOG_PAGE, 256 bytes), refreshed by the firmware while it idles"
    OPEN = 1, ("what is open now, from the core's own tables: an OPEN_TX per transaction slot (IDENTIFY "
               "max_open_tx), then an OPEN_APPEND per append slot (max_appends); a host's queue pair sees "
               "only what it owns (the rest read as free slots), the firmware's pair everything")
    SNAPSHOT = 2, ("the firmware's queue pair only (others: INVALID_FIELD): once every command before it is "
                   "published, the pending state as of the log's next seq -- SNAP_HDR, a SNAP_TX per "
                   "transaction slot, a SNAP_APPEND per append slot, a SNAP_ENTRY per pending-table entry; "
                   "what a checkpoint records so its floor need not wait for open transactions and appends")


# -----------------------------------------------------------------------------
# Host queues: a 64-byte submission entry and a 16-byte completion entry.
# -----------------------------------------------------------------------------

CMD = Record(
    "cmd",
    "Host submission queue entry (NVMe-shaped, 64 bytes).",
    [
        u8("opcode", "Opcode"),
        u8("flags", "CmdFlag bits", [Bits("fua", 0, 1, "force unit access"),
                                     Bits("tx_final", 1, 1, "last write of a transaction carries its commit"),
                                     Bits("tx_new", 2, 1, "TX_WRITE opens the transaction (TID_IN_USE if open)")]),
        u16("cid", "command id, echoed in the completion"),
        u32("nsid", "namespace id (1; 0 and others reserved)"),
        u32("tid", "transaction id for TX_* commands (0 = none)"),
        u32("hint", "Hint for HINT; reserved otherwise"),
        u64("token", "remap token for RELEASE"),
        u64("buf", "data buffer address in device-visible memory (4-byte aligned)"),
        u64("list", "list address: ATOMIC_ENTRY[] for ATOMIC_WRITE, REMAP_ENTRY[] for REMAP"),
        u64("lba", "first logical block"),
        u32("nlb", "number of logical blocks (1-based; 0 is invalid)"),
        u32("nlist", "number of list entries (ATOMIC_WRITE, REMAP)"),
        u32("log_page", "LogPage for GET_LOG; must be 0 otherwise"),
        u32("rsvd", "reserved, must be 0"),
    ],
    size=64,
)

CPL = Record(
    "cpl",
    "Host completion queue entry (NVMe-shaped, 16 bytes).",
    [
        u64("result", "command result: token for APPEND, otherwise 0"),
        u16("sqhd", "submission queue head after this command"),
        u16("sqid", "submission queue id"),
        u16("cid", "command id of the completed command"),
        u16("sf", "status field", [Bits("phase", 0, 1, "phase tag, flips each pass over the queue"),
                                   Bits("status", 1, 15, "Status code")]),
    ],
    size=16,
)

ATOMIC_ENTRY = Record(
    "atomic_entry",
    "One member of an ATOMIC_WRITE group: one logical block and its data.",
    [u64("lba", "logical block"), u64("buf", "address of the block's data")],
    size=16,
)

REMAP_ENTRY = Record(
    "remap_entry",
    "One REMAP triple: bind nlb blocks of the append named by token at lba.",
    [u64("lba", "first logical block to bind"), u64("token", "append token (from APPEND's completion)"),
     u32("nlb", "blocks; must equal the append's length"), u32("rsvd", "reserved, must be 0")],
    size=24,
)

# -----------------------------------------------------------------------------
# On-flash: the OOB record every programmed page carries (the commit-flag log).
# -----------------------------------------------------------------------------


class Kind(DocEnum):
    DATA = 0x01, "host data bound to lba (plain, atomic-group member or transaction page)"
    COMMIT = 0x02, "transaction commit record; payload REC_HDR + COMMIT_BODY (first vseq, page count)"
    REMAP = 0x03, "remap record; payload REC_HDR + REMAP_REC_ENTRY[] bindings published together"
    CHECKPOINT = 0x04, "part of a map/block-table checkpoint"
    GC_COPY = 0x05, "data relocated by GC: every field of the original kept (lba, flags, group, vseq, tid) but kind and seq"
    APPEND = 0x06, "staged append data, bound to no lba until a remap record names it"
    TRIM = 0x07, "trim record; payload REC_HDR + TRIM_REC_ENTRY[] unbound LBA ranges"
    PAD = 0x08, "filler the core programs to complete an MLC word line (see mlc_paired_lower); no payload, bound to nothing"
    ERASED = 0xFF, "never programmed since erase (all bytes FFh)"


OOB = Record(
    "oob",
    "OOB metadata record stamped into every programmed page's spare area.",
    [
        u8("kind", "Kind"),
        u8("flags", "flags", [Bits("commit", 0, 1, "commit point: the page completes its group/transaction"),
                              Bits("tx_final", 1, 1, "transaction page that carries the tid's commit"),
                              Bits("tx", 2, 1, "transaction page: tid holds the transaction's tag"),
                              Bits("append", 3, 1, "staged append page: tid holds the append's tag")]),
        u16("group_len", "pages in this page's atomic group or record (1 for a plain write); "
                         "transaction pages 0 but the tx_final one: the transaction's page count; "
                         "append pages: the append's length"),
        u16("group_idx", "this page's index in its group (0..group_len-1)"),
        u8("format", "OOB format version (OOB_FORMAT)"),
        u8("rsvd", "reserved, 0"),
        u64("lba", "logical block (DATA, GC_COPY); 0 for other kinds"),
        u64("seq", "log sequence number: strictly increasing over the device's life"),
        u64("vseq", "version: the seq the data was first written with (GC copies keep it); "
                    "a group's members have vseq = first + group_idx"),
        u32("tid", "tag of the page's transaction (flags.tx, COMMIT) or append (flags.append): "
                   "its first vseq & TAG_MASK; 0 otherwise"),
        u32("crc", "CRC-32 (OOB_CRC) over every byte before this field"),
    ],
    size=40,
)

OOB_FORMAT = 1

# -----------------------------------------------------------------------------
# Physical page addresses: what the L2P table in SoC memory holds per LBA.
# -----------------------------------------------------------------------------

PPA = Record(
    "ppa",
    "Physical page address: one L2P table entry (32 bits; PPA_UNMAPPED = no binding).",
    [u32("ppa", "packed address", [
        Bits("page", 0, 10, "page in its block"),
        Bits("block", 10, 14, "erase block in its LUN"),
        Bits("lun", 24, 2, "LUN in its target"),
        Bits("way", 26, 3, "target (chip enable) on its channel"),
        Bits("channel", 29, 3, "channel"),
    ])],
    size=4,
)
PPA_UNMAPPED = 0xFFFF_FFFF  # erased-memory value; no real page has every field at its maximum
# An L2P entry of a segment the firmware has not loaded yet (firmware/mapload.c): never a real page either
# (channel, way, LUN and block at their maximum), so a load can tell it from anything written meanwhile.
PPA_NOT_LOADED = 0xFFFF_FFFE


def pack_ppa(channel: int, way: int, lun: int, block: int, page: int) -> int:
    value = PPA.compose("ppa", channel=channel, way=way, lun=lun, block=block, page=page)
    if value in (PPA_UNMAPPED, PPA_NOT_LOADED):
        raise ValueError("that address is reserved (PPA_UNMAPPED, PPA_NOT_LOADED)")
    return value


@dataclass(frozen=True)
class CrcParams:
    """CRC parameters in the Rocksoft/catalogue convention (as amaranth.lib.crc uses)."""

    name: str
    width: int
    polynomial: int
    initial_crc: int
    reflect_input: bool
    reflect_output: bool
    xor_output: int
    check: int  # CRC of b"123456789"


OOB_CRC = CrcParams("CRC-32/ISO-HDLC", 32, 0x04C11DB7, 0xFFFFFFFF, True, True, 0xFFFFFFFF, 0xCBF43926)
assert zlib.crc32(b"123456789") == OOB_CRC.check  # zlib implements exactly OOB_CRC


def crc32(data: bytes) -> int:
    """OOB_CRC of ``data`` (CRC-32/ISO-HDLC, the one zlib implements)."""
    return zlib.crc32(data)


OOB_CRC_SPAN = OOB["crc"].offset  # the CRC covers bytes [0, OOB_CRC_SPAN)


def pack_oob(**fields: int) -> bytes:
    """Pack an OOB record and fill in its CRC (``crc`` must not be given)."""
    if "crc" in fields:
        raise ValueError("pack_oob computes crc itself")
    fields.setdefault("format", OOB_FORMAT)
    body = OOB.pack(fields)
    return body[:OOB_CRC_SPAN] + crc32(body[:OOB_CRC_SPAN]).to_bytes(4, "little")


def unpack_oob(data: bytes):
    """Unpack an OOB record; returns None when its CRC fails (torn/erased page)."""
    rec = OOB.unpack(data)
    if crc32(bytes(data[:OOB_CRC_SPAN])) != rec.crc:
        return None
    return rec


# -----------------------------------------------------------------------------
# On-flash: the payloads of record pages (COMMIT, REMAP, TRIM), transaction and
# append tags, and the remap token.  docs/model.md states the proof rules that
# recovery (atomflash.model.recover) applies to them.
# -----------------------------------------------------------------------------

LOG = ConstantGroup("log", "Commit-flag log formats: record pages, tags, sequence resume.", [
    Constant("REC_MAGIC", int.from_bytes(b"AFRC", "little"), "REC_HDR.magic of every record page"),
    Constant("REC_FORMAT", 1, "REC_HDR.format: record payload format version"),
    Constant("TAG_MASK", 0xFFFF_FFFF, "a transaction's or append's tag (OOB.tid) = its first vseq & TAG_MASK"),
    Constant("TX_FINAL_MAX_PAGES", 0xFFFF, "largest transaction (pages written) whose commit may ride on its "
                                           "last page (OOB.group_len); larger ones commit with a COMMIT record"),
    Constant("SEQ_RESUME_GAP", 1 << 16, "after recovery the log resumes at (highest seq seen) + this; must exceed "
                                        "the pages that can be in flight, so no torn page's seq is ever reused"),
])

REC_HDR = Record(
    "rec_hdr",
    "Header at byte 0 of every COMMIT/REMAP/TRIM record page's data; `count` entries follow it.",
    [
        u32("magic", "REC_MAGIC"),
        u8("kind", "the page's OOB kind (COMMIT, REMAP or TRIM)"),
        u8("format", "REC_FORMAT"),
        u16("count", "entries in this page"),
        u64("seq", "the page's OOB seq (binds the payload to its OOB record)"),
        u32("total", "entries in the whole record (the sum of count over its group_len pages)"),
        u32("crc", "OOB_CRC over the header bytes before this field followed by this page's entries"),
    ],
    size=24,
)

COMMIT_BODY = Record(
    "commit_body",
    "The single entry of a COMMIT record: which pages the committed transaction wrote.",
    [
        u64("first_vseq", "vseq of the transaction's first page (its tag is first_vseq & TAG_MASK)"),
        u32("npages", "pages the transaction programmed, superseded ones included; all must be proven present"),
        u32("tid", "host transaction id (informational: recovery keys on the tag)"),
    ],
    size=16,
)

REMAP_REC_ENTRY = Record(
    "remap_rec_entry",
    "One binding of a REMAP record: blocks lba..lba+nlb-1 take the append's pages first_vseq..first_vseq+nlb-1.",
    [
        u64("lba", "first logical block bound"),
        u64("first_vseq", "vseq of the append's first page (names the append; GC copies keep it)"),
        u32("nlb", "blocks; equals the append's length (its pages' group_len)"),
        u32("rsvd", "reserved, 0"),
    ],
    size=24,
)

TRIM_REC_ENTRY = Record(
    "trim_rec_entry",
    "One range of a TRIM record: blocks lba..lba+nlb-1 become unmapped at the record's seq.",
    [u64("lba", "first logical block unbound"), u64("nlb", "blocks")],
    size=16,
)

REC_ENTRY = {Kind.COMMIT: COMMIT_BODY, Kind.REMAP: REMAP_REC_ENTRY, Kind.TRIM: TRIM_REC_ENTRY}


def record_capacity(kind: int, page_data: int) -> int:
    """Entries of ``kind`` that fit in one record page of ``page_data`` bytes."""
    return min((page_data - REC_HDR.size) // REC_ENTRY[Kind(kind)].size, 0xFFFF)


def pack_record_page(kind: int, seq: int, entries: list, total: int, page_data: int) -> bytes:
    """One record page's data: REC_HDR, the packed entries (dicts), FFh padding."""
    body = b"".join(REC_ENTRY[Kind(kind)].pack(e) for e in entries)
    if len(entries) > record_capacity(kind, page_data):
        raise ValueError("too many entries for one record page")
    head = REC_HDR.pack(magic=LOG.REC_MAGIC, kind=kind, format=LOG.REC_FORMAT, count=len(entries), seq=seq,
                        total=total)
    span = REC_HDR["crc"].offset
    head = head[:span] + crc32(head[:span] + body).to_bytes(4, "little")
    return (head + body).ljust(page_data, b"\xff")


def unpack_record_page(data: bytes, kind: int, seq: int):
    """(header, entries) of a record page, or None when it is not an intact ``kind`` record page for ``seq``."""
    if len(data) < REC_HDR.size:
        return None
    hdr = REC_HDR.unpack(data[:REC_HDR.size])
    rec = REC_ENTRY.get(kind)
    if (rec is None or hdr.magic != LOG.REC_MAGIC or hdr.kind != kind or hdr.format != LOG.REC_FORMAT
            or hdr.seq != seq or REC_HDR.size + hdr.count * rec.size > len(data)):
        return None
    body = bytes(data[REC_HDR.size:REC_HDR.size + hdr.count * rec.size])
    span = REC_HDR["crc"].offset
    if crc32(bytes(data[:span]) + body) != hdr.crc:
        return None
    return hdr, [rec.unpack(body[i * rec.size:(i + 1) * rec.size]) for i in range(hdr.count)]


def tag_of(first_vseq: int) -> int:
    """The tag (OOB.tid) of a transaction or append whose first page has ``first_vseq``."""
    return first_vseq & LOG.TAG_MASK


def first_vseq_of(tag: int, vseq: int) -> int:
    """The first vseq of the transaction/append tagged ``tag`` that owns a page of version ``vseq``:
    the largest value <= vseq whose low bits are the tag (a transaction spans < 2**32 seqs)."""
    return vseq - ((vseq - tag) & LOG.TAG_MASK)


# -----------------------------------------------------------------------------
# Checkpoints (firmware, trap 8): a map snapshot in one of two alternating
# areas of reserved blocks.  Page 0 of a checkpoint holds CKPT_HDR, then the
# lists it names; map pages of CKPT_ENTRY follow, in the area's blocks in order,
# then the wear pages: one u32 per global block (the firmware's numbering:
# target-major, then LUN, then block): its erase count, and CKPT.WEAR_RETIRED
# when it is a grown bad block, so wear levelling and retirements survive power
# cycles (erases after the newest checkpoint are not counted), and (format 4)
# CKPT.WEAR_FACTORY_BAD when its factory marker said bad: the bad-block table
# is read from the markers on the first boot only, then from the checkpoint
# (an older format makes the boot read the markers again); then (format 3)
# as many valid-count pages: one u32 per global block, the pages of it the
# checkpoint's map binds, so a boot has its valid counts without a pass over
# the map (recovery adjusts them per entry it changes); then the map-CRC
# pages: one u32 per map page, OOB_CRC of its data.  A format-3 boot reads
# the pages after the map (their CRC is payload_crc) and loads map pages
# lazily, each checked against its CRC.  Format 5: wear entries carry
# CKPT.WEAR_FREE for the blocks of the firmware's free pool, so a boot that
# finds an anchor (ANCHOR below) reads page 0 of no other block.  Format 6:
# the pending-bindings pages follow (CKPT_HDR.pend_pages of CKPT_PEND records,
# covered by payload_crc): every transaction open and every append live at the
# floor, with where their staged pages are, so the floor is the log's next seq
# however long a transaction or append stays open (trap 8), and the boot's
# recovery proves a commit or remap after the floor from them.
# Every page's OOB: kind CHECKPOINT, lba = page index in the checkpoint,
# vseq = the checkpoint number, seq = its floor, group_len = its pages.
# -----------------------------------------------------------------------------

CKPT = ConstantGroup("ckpt", "Checkpoint format constants.", [
    Constant("MAGIC", int.from_bytes(b"AFCK", "little"), "CKPT_HDR.magic"),
    Constant("FORMAT", 6, "CKPT_HDR.format written (3: valid-count and map-CRC pages after the wear pages, "
                          "CKPT_HDR.bound; 4: wear entries carry WEAR_FACTORY_BAD; 5: and WEAR_FREE; 6: "
                          "pending-bindings pages after the map-CRC pages, and the floor is never held back)"),
    Constant("FORMAT_PENDING", 6, "first format that records pending bindings (older ones: the floor was held at "
                                  "the first page of every open transaction and live append)"),
    Constant("FORMAT_OLDEST", 2, "oldest CKPT_HDR.format the firmware still loads (2: no valid-count pages; "
                                 "the boot counts from the map)"),
    Constant("AREAS", 2, "alternating checkpoint areas"),
    Constant("WEAR_RETIRED", 1 << 31, "wear-page entry bit: the block is retired (grown bad, its data moved)"),
    Constant("WEAR_RETIRING", 1 << 30, "wear-page entry bit: a program failed in the block and its data has not "
                                        "all moved yet: scanned like any block, never handed out again, retired "
                                        "once GC moved its data"),
    Constant("WEAR_FACTORY_BAD", 1 << 29, "wear-page entry bit (format 4): the block is factory bad (its marker "
                                          "was not FFh, or did not read, when the markers were read)"),
    Constant("WEAR_FREE", 1 << 28, "wear-page entry bit (format 5): the block was in the firmware's free pool "
                                   "(erased, or to be erased before use) when the checkpoint was taken"),
    Constant("WEAR_COUNT_MASK", (1 << 28) - 1, "wear-page entry bits holding the erase count"),
])

CKPT_HDR = Record(
    "ckpt_hdr",
    "Header at byte 0 of a checkpoint's first page; after it: nopen u32 PPAs (page 0 of every block the "
    "log writer had open or queued), then narea u32 PPAs of area 0's blocks, then narea of area 1's.",
    [
        u32("magic", "CKPT.MAGIC"),
        u8("format", "CKPT.FORMAT"),
        u8("area", "the area this checkpoint is written in (0 or 1)"),
        u16("pend_pages", "format 6: pages of CKPT_PEND records after the map-CRC pages (older formats: 0)"),
        u64("seq", "floor: every commit point with seq < this is reflected in the map; recovery scans what "
                   "was written from it on"),
        u64("number", "checkpoint number (one more than the previous); the newest intact one is used"),
        u64("nlba", "map entries"),
        u32("map_pages", "pages of CKPT_ENTRY after the header page"),
        u32("nopen", "blocks listed as open"),
        u32("narea", "blocks per area"),
        u32("payload_crc", "format 2: OOB_CRC over the data of every map page, then every wear page, in "
                           "order; format 3: over every page after the map pages (wear, valid-count, map-CRC), "
                           "in order (each map page has its own CRC in the map-CRC pages)"),
        u32("wear_pages", "pages of u32 erase counts after the map pages (format 3: as many valid-count pages "
                          "follow them, then ceil(4 * map_pages / page size) map-CRC pages)"),
        u32("nblocks", "erase counts in the wear pages (global blocks)"),
        u32("bound", "format 3: map entries that are bound (vseq not all-ones); the valid-count pages hold "
                     "where they are, per block (format 2: reserved, 0)"),
        u32("crc", "OOB_CRC over the header bytes before this field followed by the lists"),
    ],
    size=64,
)

class CkptPend(DocEnum):
    """Kinds of CKPT_PEND records, in the order a checkpoint writes them."""
    END = 0, "no more records (the rest of the pages is zero)"
    TX = 1, ("a transaction open at the floor: vseq = its first vseq (its tag is the low bits), count = pages it "
             "had programmed, superseded ones included; its LIVE records follow")
    LIVE = 2, "the transaction's latest staged write of lba: version vseq, at ppa when the checkpoint was taken"
    APPEND = 3, "an append live at the floor: vseq = its first vseq, count = its blocks; its APPEND_PAGE records follow"
    APPEND_PAGE = 4, "page `count` of that append: version vseq at ppa"


CKPT_PEND = Record(
    "ckpt_pend",
    "One pending-bindings record of a format-6 checkpoint (CKPT_HDR.pend_pages pages of them; a record never "
    "straddles two pages).",
    [
        u8("kind", "CkptPend"),
        u8("rsvd0", "reserved, 0"),
        u16("rsvd1", "reserved, 0"),
        u32("count", "TX: pages programmed; APPEND: blocks; APPEND_PAGE: its index in the append; LIVE: 0"),
        u64("vseq", "TX, APPEND: first vseq; LIVE, APPEND_PAGE: the staged version"),
        u32("lba", "LIVE: the LBA it stages; otherwise 0"),
        u32("ppa", "LIVE, APPEND_PAGE: the page holding the version when the checkpoint was taken"),
    ],
    size=24,
)

CKPT_ENTRY = Record(
    "ckpt_entry",
    "One LBA of a checkpoint's map (LBA = index over the map pages).",
    [
        u64("vseq", "version bound to the LBA; all-ones: unbound"),
        u32("ppa", "page holding that version when the checkpoint was taken (PPA_UNMAPPED: none)"),
        u32("rsvd", "reserved, 0"),
    ],
    size=16,
)


# -----------------------------------------------------------------------------
# The anchor (firmware): what lets a boot read page 0 of a bounded set of
# blocks instead of every block.  The first ANCHOR.BLOCKS good blocks of LUN 0
# of target 0 (among its first ANCHOR.SEARCH blocks, by factory marker) hold an
# append-only log of records, one page each: ANCHOR_HDR, then both checkpoint
# areas' blocks, then the *plan*: every block the firmware has handed to the
# core, or may hand to it, since the header of checkpoint `base` was built.
# A record is programmed before the areas change and before a block outside
# the plan is handed out, so at boot the newest intact record names the areas
# (the newest checkpoint is page 0 of one of them) and, with that checkpoint's
# open blocks, every block written since its floor.  Every other block's
# state is in the checkpoint (format 5: CKPT.WEAR_FREE).  A record with
# ANCHOR.FLAG_NO_PLAN (its plan did not fit a page), none, or a checkpoint
# that is neither `base` nor the next one: the boot reads page 0 of every
# block, as without an anchor.  When one block is full the other is erased
# and the next record is its page 0 (the full block keeps the newest record
# until then).  Records also list the grown bad blocks (one is written after a
# block retires), so a boot knows them before a checkpoint does.  Format 2
# adds the drive's NVMe power-on counters (SMART Power Cycles and Unsafe
# Shutdowns): each boot counts itself from the newest record, one unsafe
# shutdown more unless that record is ANCHOR.FLAG_SHUTDOWN_CLEAN (programmed
# once a host's shutdown notification completed; any later record clears it),
# and every record carries them.  OOB: kind CHECKPOINT, lba ANCHOR.OOB_LBA,
# vseq = the record's seq, seq 0.
# -----------------------------------------------------------------------------

ANCHOR = ConstantGroup("anchor", "Anchor log constants (firmware boot).", [
    Constant("MAGIC", int.from_bytes(b"AFAN", "little"), "ANCHOR_HDR.magic"),
    Constant("FORMAT", 2, "ANCHOR_HDR.format written"),
    Constant("FORMAT_OLDEST", 1, "oldest ANCHOR_HDR.format a boot still loads (1: the header ends at nbad, "
                                 "its CRC covers the bytes before crc and the lists; its counters read as 0, "
                                 "and it is never FLAG_SHUTDOWN_CLEAN)"),
    Constant("BLOCKS", 2, "anchor blocks: the first good ones of LUN 0 of target 0"),
    Constant("SEARCH", 8, "blocks of LUN 0 of target 0 whose factory markers the boot reads to find them "
                          "(fewer good ones: no anchor, every boot reads page 0 of every block)"),
    Constant("OOB_LBA", 0xFFFF_FFFF, "OOB.lba of an anchor page (kind CHECKPOINT; a checkpoint's pages count "
                                     "from 0)"),
    Constant("FLAG_NO_PLAN", 1 << 0, "ANCHOR_HDR.flags: blocks are handed out without a plan: the boot reads "
                                     "page 0 of every block"),
    Constant("FLAG_SHUTDOWN_CLEAN", 1 << 1, "ANCHOR_HDR.flags: programmed when a host's shutdown notification "
                                            "completed, after its flush and checkpoint; any later record "
                                            "clears it"),
])

ANCHOR_HDR = Record(
    "anchor_hdr",
    "Header at byte 0 of an anchor record's page; after it: narea u32 PPAs of area 0's blocks, narea of area "
    "1's, nplan u32 PPAs (page 0 of each planned block), then nbad (page 0 of each grown bad block).",
    [
        u32("magic", "ANCHOR.MAGIC"),
        u8("format", "ANCHOR.FORMAT"),
        u8("flags", "ANCHOR.FLAG_*"),
        u16("rsvd0", "reserved, 0"),
        u64("seq", "record number: one more than the previous record's"),
        u64("base", "the checkpoint the plan counts from (0: none yet)"),
        u32("narea", "blocks per checkpoint area"),
        u32("nplan", "blocks in the plan"),
        u32("crc", "OOB_CRC over the header bytes before this field, then the header bytes after it, then "
                   "the lists (format 1: the bytes before it, then the lists)"),
        u32("nbad", "grown bad blocks listed after the plan (retired, nothing bound in them): a boot marks them "
                    "bad before any checkpoint does; as many as fit, since an erase finds them again"),
        u64("power_cycles", "boots of this device, this one included (format 2; a format-1 record's header "
                            "ends before this field)"),
        u64("unsafe_shutdowns", "boots whose previous record was not FLAG_SHUTDOWN_CLEAN: power lost without a "
                                "completed shutdown notification"),
    ],
    size=56,
)


TOKEN = Record(
    "token",
    "Remap token returned by APPEND (CPL.result, 8 bytes as the paper's ROD): slot, reuse generation, check.",
    [
        u16("handle", "append slot in the pending-bindings table"),
        u16("gen", "slot generation: 1..0xFFFF, advanced each time the slot is allocated (0 is never issued)"),
        u32("check", "token_check: the low 32 bits of SipHash-2-4 of TOKEN_MAC_IN under the key the gateware "
                     "drew at boot; without the key a forged check matches with probability 2^-32"),
    ],
    size=8,
)

TOKEN_MAC_IN = Record(
    "token_mac_in",
    "The message a token's check is the MAC of (two SipHash words).",
    [u64("first_vseq", "vseq of the append's first page"), u16("handle", "TOKEN.handle"), u16("gen", "TOKEN.gen"),
     u16("owner", "the queue pair that appended (its sqid): only it may remap or release the append"),
     u16("rsvd", "0")],
    size=16,
)


def token_check(key: bytes, handle: int, gen: int, first_vseq: int, owner: int) -> int:
    """TOKEN.check of an append under the 16-byte ``key``."""
    return siphash(key, TOKEN_MAC_IN.pack(first_vseq=first_vseq, handle=handle, gen=gen, owner=owner)) & 0xFFFF_FFFF


def make_token(handle: int, gen: int, first_vseq: int, *, owner: int = 0, key: bytes = bytes(16)) -> int:
    """The 64-bit token (little-endian TOKEN) for an append."""
    check = token_check(key, handle, gen, first_vseq, owner)
    return int.from_bytes(TOKEN.pack(handle=handle, gen=gen, check=check), "little")


def split_token(token: int):
    """TOKEN fields of a 64-bit token value."""
    return TOKEN.unpack(int(token & (2**64 - 1)).to_bytes(8, "little"))

# -----------------------------------------------------------------------------
# Host files on the drive (atomflash.sqlite): a tiny file system that keeps a
# database, its rollback journal and its WAL as named files.  LBA
# FS.SUPER_LBA holds FS_SUPER; each of the next `slots` LBAs holds one file's
# FS_FILE record (all zeros: a free slot), its name and its extents; file data
# lives from `data_lba` on.  A slot is one block, so every change of a file's
# size or extents is one single-block write (atomic on the drive), or a member
# of the atomic group that also writes the data.  Free space is whatever no
# slot's extents name.
# -----------------------------------------------------------------------------

FS = ConstantGroup("fs", "Host files on the drive (atomflash.sqlite): super block and file slots.", [
    Constant("MAGIC", int.from_bytes(b"AFFS", "little"), "FS_SUPER.magic"),
    Constant("FILE_MAGIC", int.from_bytes(b"AFFI", "little"), "FS_FILE.magic of a slot in use"),
    Constant("FORMAT", 1, "FS_SUPER.format and FS_FILE.format written"),
    Constant("SUPER_LBA", 0, "LBA of the super block"),
    Constant("SLOTS", 8, "file slots made by a format (LBAs SUPER_LBA + 1 ..)"),
    Constant("NAME_BYTES", 256, "bytes after FS_FILE for the file's name (UTF-8, zero padded)"),
])

FS_SUPER = Record(
    "fs_super",
    "Super block of the host files (block FS.SUPER_LBA).",
    [
        u32("magic", "FS.MAGIC"),
        u32("format", "FS.FORMAT"),
        u32("lba_size", "the drive's block size when formatted"),
        u32("slots", "file slots: LBAs SUPER_LBA + 1 .. SUPER_LBA + slots"),
        u64("data_lba", "first LBA file data may use"),
        u64("capacity", "the drive's LBAs when formatted"),
        u32("crc", "OOB_CRC over the bytes before this field"),
        u32("rsvd", "0"),
    ],
    size=40,
)

FS_FILE = Record(
    "fs_file",
    "One file's slot block: this record, FS.NAME_BYTES of name, then `nextents` FS_EXTENT entries.",
    [
        u32("magic", "FS.FILE_MAGIC (anything else: a free slot)"),
        u16("format", "FS.FORMAT"),
        u16("name_len", "bytes of the name"),
        u64("size", "file size in bytes"),
        u64("gen", "incremented at every write of this slot"),
        u32("nextents", "FS_EXTENT entries after the name; their blocks in order hold the file's bytes"),
        u32("crc", "OOB_CRC over the bytes before this field, the name area and the extents"),
    ],
    size=32,
)

FS_EXTENT = Record(
    "fs_extent",
    "A run of a file's blocks: `nlb` LBAs from `lba`.",
    [u64("lba", "first LBA"), u64("nlb", "blocks")],
    size=16,
)


# -----------------------------------------------------------------------------
# Identify: geometry and limits the device reports.
# -----------------------------------------------------------------------------

IDENTIFY_MAGIC = int.from_bytes(b"ATOMFLSH", "little")

IDENTIFY = Record(
    "identify",
    "IDENTIFY data: what the device is and its limits (256 bytes).",
    [
        u64("magic", "IDENTIFY_MAGIC"),
        u32("spec_version", "SPEC_VERSION the device implements"),
        u32("fw_version", "firmware version (major << 16 | minor)"),
        u64("capacity", "logical blocks exposed to the host"),
        u32("lba_size", "bytes per logical block (= flash page data bytes)"),
        u32("max_transfer", "largest nlb of one READ/WRITE"),
        u32("max_atomic_pages", "largest ATOMIC_WRITE group (pages)"),
        u32("max_open_tx", "transactions open at once"),
        u32("max_pending", "pending-bindings table entries (staged tx/append pages)"),
        u32("max_remap_triples", "largest REMAP list"),
        u32("awupf", "power-fail atomic write unit in blocks (= max_atomic_pages)"),
        u32("volatile_cache", "bytes of volatile write buffer (0 = none; flush makes it durable)"),
        u16("channels", "NAND channels"),
        u16("ways", "targets (chip enables) per channel"),
        u16("luns", "LUNs per target"),
        u16("rsvd0", "reserved"),
        u32("page_data", "flash page data bytes"),
        u32("page_spare", "flash page spare bytes"),
        u32("pages_per_block", "pages per erase block"),
        u32("blocks_per_lun", "erase blocks per LUN"),
        u32("queue_depth", "entries per submission/completion queue"),
        u32("ecc_t", "BCH correctable bits per codeword"),
        u32("ecc_codeword", "BCH codeword data bytes"),
        u32("max_appends", "staged appends live at once (tokens not yet remapped or released)"),
    ] + [u64(f"rsvd{i}", "reserved") for i in range(2, 2 + 20)],
    size=256,
)

LOG_PAGE = Record(
    "log_page",
    "GET_LOG statistics page (256 bytes): the firmware's counters, refreshed while it idles.",
    [
        u64("uptime_cycles", "system clock cycles since reset when the page was refreshed"),
        u64("boot_cycles", "cycles from reset until the host interface came up (recovery included)"),
        u64("log_pages", "pages the core's log writer programmed since boot (host data, records, GC copies)"),
        u64("boot_scan_cycles", "cycles the boot spent scanning and rebuilding the map (recovery)"),
        u64("ckpt_seq", "floor of the newest checkpoint (recovery starts there)"),
        u32("clk_hz", "nominal system clock"),
        u32("ckpt_pages", "checkpoint pages the firmware programmed since boot"),
        u32("checkpoints", "checkpoints taken since boot"),
        u32("erases", "blocks erased since boot"),
        u32("gc_victims", "blocks GC collected since boot"),
        u32("gc_copies", "pages GC relocated since boot"),
        u32("wear_copies", "pages static wear levelling relocated since boot"),
        u32("bad_blocks", "blocks not in use: factory bad, unreadable and grown (retired)"),
        u32("free_blocks", "erased blocks the firmware holds"),
        u32("map_hits", "map-cache lookups that hit since reset"),
        u32("map_misses", "map-cache lookups that missed since reset"),
        u32("boot_pages_scanned", "pages recovery scanned at boot"),
        u32("boot_groups_discarded", "atomic groups recovery discarded (a member not proven present)"),
        u32("boot_tx_discarded", "transaction commit points recovery discarded"),
        u32("boot_remaps_discarded", "remap records recovery discarded"),
        u32("boot_lost", "bound LBAs no intact page holds after recovery (should be 0)"),
        u32("host_read_pages", "pages READ commands returned since reset (FTL register host_read_pages)"),
        u32("host_write_pages", "pages the host wrote since reset (into the write cache or to the log)"),
        u32("record_pages", "record pages (COMMIT, REMAP, TRIM) the core programmed since reset"),
        u32("nand_reads", "NAND page reads since reset (host, GC, firmware)"),
        u32("nand_programs", "NAND page programs since reset: write amplification is nand_programs / host_write_pages"),
        u32("nand_erases", "NAND block erases since reset"),
        u32("pad_pages", "PAD pages the core programmed since reset to complete MLC word lines (counted in nand_programs)"),
        u32("bits_per_cell", "the NAND's bits per cell (parameter page); 2: lower-page completions wait for their "
                             "word line (MLC pairing)"),
        u32("no_space", "NoSpace: NONE, or why writes complete with NO_SPACE"),
        u32("spare_blocks", "good blocks beyond what the capacity needs (0: grown bad blocks used up the "
                            "over-provisioning; the device refuses writes once the data stored no longer fits)"),
    ] + [u64(f"rsvd{i}", "reserved") for i in range(14)],
    size=256,
)

OPEN_TX = Record(
    "open_tx",
    "GET_LOG page OPEN: one transaction slot of the core (16 bytes).",
    [
        u32("tid", "the open transaction's id; 0: the slot holds no open transaction"),
        u32("pages", "pages the transaction has written so far"),
        u32("flags", "state bits", [Bits("doomed", 0, 1, "a write of it failed (MEDIA_ERROR, NO_SPACE): "
                                                              "its commit will fail; abort it")]),
        u32("rsvd", "0"),
    ],
    size=16,
)

OPEN_APPEND = Record(
    "open_append",
    "GET_LOG page OPEN: one append slot of the core (16 bytes).",
    [
        u64("token", "the live append's token (remap or release it); 0: the slot holds no live append"),
        u32("nlb", "the append's blocks"),
        u32("rsvd", "0"),
    ],
    size=16,
)

SNAP_HDR = Record(
    "snap_hdr",
    "GET_LOG page SNAPSHOT: its header (16 bytes); the slot and entry records follow.",
    [
        u64("seq", "the log's next seq when the tables were read: every page before it is accounted for"),
        u16("tx_slots", "SNAP_TX records after this header"),
        u16("append_slots", "SNAP_APPEND records after those"),
        u32("entries", "SNAP_ENTRY records after those (the pending-bindings table)"),
    ],
    size=16,
)

SNAP_TX = Record(
    "snap_tx",
    "GET_LOG page SNAPSHOT: one transaction slot (16 bytes).",
    [
        u64("first_vseq", "its first page's vseq (its tag is the low bits); valid with flags.started"),
        u32("npages", "pages it has written, superseded ones included"),
        u32("flags", "state", [Bits("open", 0, 1, "the slot holds a transaction not committed or aborted"),
                               Bits("started", 1, 1, "its first page has a seq (first_vseq is valid)"),
                               Bits("doomed", 2, 1, "a write of it was dropped: its commit aborts it")]),
    ],
    size=16,
)

SNAP_APPEND = Record(
    "snap_append",
    "GET_LOG page SNAPSHOT: one append slot (16 bytes).",
    [
        u64("first_vseq", "its first page's vseq"),
        u32("nlb", "its blocks"),
        u32("flags", "state", [Bits("live", 0, 1, "its token is valid (not remapped or released)"),
                               Bits("held", 1, 1, "its pages may still be needed (entries not freed yet)")]),
    ],
    size=16,
)

SNAP_ENTRY = Record(
    "snap_entry",
    "GET_LOG page SNAPSHOT: one entry of the pending-bindings table (16 bytes).",
    [
        u32("flags", "state", [Bits("valid", 0, 1, "the entry is in use"),
                               Bits("owner", 8, 8, "transaction slot, or max_open_tx + append slot")]),
        u32("lba", "the staged LBA (an append's: its first command LBA + page index)"),
        u32("ppa", "the staged page (PPA_UNMAPPED: reserved, not programmed yet)"),
        u32("rsvd", "0"),
    ],
    size=16,
)

LIMITS = ConstantGroup("limits", "Default device limits (elaboration parameters; IDENTIFY reports the built values).", [
    Constant("LBA_SIZE", 4096, "bytes per logical block for the realistic profile"),
    Constant("MAX_TRANSFER", 64, "largest READ/WRITE nlb"),
    Constant("MAX_ATOMIC_PAGES", 64, "largest ATOMIC_WRITE group"),
    Constant("MAX_OPEN_TX", 16, "open transactions"),
    Constant("MAX_PENDING", 1024, "pending-bindings table entries"),
    Constant("MAX_REMAP_TRIPLES", 32, "largest REMAP list"),
    Constant("MAX_APPENDS", 64, "staged appends live at once (append slots: a token's handle is below this)"),
    Constant("QUEUE_DEPTH", 32, "entries per host queue"),
    Constant("CACHE_PAGES", 16, "the simulated SoC's volatile write cache, in pages (IDENTIFY.volatile_cache; "
                                "soc/sim.py --cache-pages 0: none)"),
    Constant("TOKEN_BYTES", 8, "remap token size (the paper's ROD is 8 bytes)"),
    Constant("GC_RESERVE_BLOCKS", 2, "erased blocks the firmware hands to the log writer only while GC relocates"),
    Constant("OVER_PROVISION_PERCENT", 12, "flash pages held back from the host, in percent of the pages of every "
                                           "die's blocks: room for GC, bad blocks and the open blocks"),
])


# -----------------------------------------------------------------------------
# NAND: geometry profiles and ONFI asynchronous timing modes, shared by the
# NAND model (C++), the channel controller (RTL) and the firmware.
# -----------------------------------------------------------------------------


@dataclass(frozen=True)
class NandProfile:
    name: str
    page_data: int
    page_spare: int
    pages_per_block: int
    blocks_per_lun: int
    luns: int
    t_r_ns: int  # array read (page to register)
    t_prog_ns: int
    t_bers_ns: int
    source: str
    # Planes per LUN.  The plane is the low bits of the block address (ONFI
    # "number of plane address bits"); blocks_per_lun counts every plane's blocks.
    planes: int = 1

    @property
    def page_bytes(self) -> int:
        return self.page_data + self.page_spare

    @property
    def plane_bits(self) -> int:
        return (self.planes - 1).bit_length()


NAND_PROFILES = {
    # Small: fast tests.  Page/spare/block shape of a 2 KiB SLC part with a 128-byte
    # spare (Toshiba TC58NVG1S3H class), few blocks, array times scaled down 10x so
    # a test sees many busy periods quickly.
    "small": NandProfile("small", 2048, 128, 64, 64, 1, 2_500, 20_000, 100_000,
                         "2 KiB+128 SLC shape (Toshiba TC58NVG1S3H class); array times /10 for speed; "
                         "2 planes like the realistic part",
                         planes=2),
    # Realistic: Micron MT29F8G08ABABA (8 Gb SLC, 4320-byte page = 4096 + 224,
    # 128 pages per block, 2048 blocks per LUN, tR 25 us, tPROG 230 us typ,
    # tBERS 0.7 ms typ; 2 planes of 1024 blocks, the plane selected by block
    # address bit 0; datasheet rev. F), one LUN.
    "realistic": NandProfile("realistic", 4096, 224, 128, 2048, 1, 25_000, 230_000, 700_000,
                             "Micron MT29F8G08ABABA datasheet: 4096+224 B page, 128 pages/block, "
                             "2048 blocks in 2 planes, tR 25 us, tPROG 230 us, tBERS 700 us", planes=2),
}

# MLC paired pages.  On a two-bit-per-cell part a word line holds two pages,
# a lower and an upper one, programmed at different times; a power cut while
# the upper page programs can destroy the lower page's data too (DESIGN.md
# trap 4).  The pairing is the common shared-page order (word line 0: pages 0
# and 2; word line n: 2n-1 and 2n+2; the last: ppb-3 and ppb-1), so the
# program order 0 1 2 3 4 5 ... alternates lower and upper pages after the
# first three.  The NAND model damages by this rule; the core holds a lower
# page's completion until its upper page is programmed (rtl/ftl/pairing.py).


def mlc_paired_lower(page: int, pages_per_block: int) -> int:
    """The lower page sharing a word line with upper page ``page``; -1 when ``page`` is a lower page."""
    if page == 2:
        return 0
    if page == pages_per_block - 1:
        return pages_per_block - 3
    if page >= 4 and page % 2 == 0:
        return page - 3
    return -1


def mlc_upper_of(page: int, pages_per_block: int) -> int:
    """The upper page sharing a word line with lower page ``page``; -1 when ``page`` is an upper page."""
    if page == 0:
        return 2
    if page % 2 == 1 and page <= pages_per_block - 5:
        return page + 3
    if page == pages_per_block - 3:
        return pages_per_block - 1
    return -1


# ONFI asynchronous SDR timing modes 0-5 in ns (ONFI 4.0, "SDR timing
# parameters"; ONFI 4.x lengthened tADL to 400 ns and tWHR to 80 ns from
# mode 1 up, against ONFI 2.x's 70-200 and 60-120).  Minimums unless noted;
# tREA, tWB, tCEA are maximums the device guarantees.
ONFI_TIMING_PARAMS = (
    # name,  mode0..mode5, doc
    ("tADL", (400, 400, 400, 400, 400, 400), "ALE to data loading time"),
    ("tALH", (20, 10, 10, 5, 5, 5), "ALE hold time"),
    ("tALS", (50, 25, 15, 10, 10, 10), "ALE setup time"),
    ("tAR", (25, 10, 10, 10, 10, 10), "ALE to RE# delay"),
    ("tCEA", (100, 45, 30, 25, 25, 25), "CE# access time (max)"),
    ("tCH", (20, 10, 10, 5, 5, 5), "CE# hold time"),
    ("tCLH", (20, 10, 10, 5, 5, 5), "CLE hold time"),
    ("tCLR", (20, 10, 10, 10, 10, 10), "CLE to RE# delay"),
    ("tCLS", (50, 25, 15, 10, 10, 10), "CLE setup time"),
    ("tCS", (70, 35, 25, 25, 20, 15), "CE# setup time"),
    ("tDH", (20, 10, 5, 5, 5, 5), "data hold time"),
    ("tDS", (40, 20, 15, 10, 10, 7), "data setup time"),
    ("tREA", (40, 30, 25, 20, 20, 16), "RE# access time (max)"),
    ("tREH", (30, 15, 15, 10, 10, 7), "RE# high hold time"),
    ("tRHW", (200, 100, 100, 100, 100, 100), "RE# high to WE# low"),
    ("tRP", (50, 25, 17, 15, 12, 10), "RE# pulse width"),
    ("tRC", (100, 50, 35, 30, 25, 20), "read cycle time"),
    ("tRR", (40, 20, 20, 20, 20, 20), "ready to RE# low"),
    ("tWB", (200, 100, 100, 100, 100, 100), "WE# high to SR[6] low (max)"),
    ("tWC", (100, 45, 35, 30, 25, 20), "write cycle time"),
    ("tWH", (30, 15, 15, 10, 10, 7), "WE# high hold time"),
    ("tWHR", (120, 80, 80, 80, 80, 80), "WE# high to RE# low"),
    ("tWP", (50, 25, 17, 15, 12, 10), "WE# pulse width"),
)

# EDO output hold: after the next RE# fall the previous byte stays on DQ this
# long (ONFI tRLOH, minimum; 0 below mode 4).  A master running RE# at tRC with
# tREA close to tRC samples inside this window.  The PHY needs no register for
# it; the NAND model drives DQ accordingly.
ONFI_TRLOH_NS = (0, 0, 0, 0, 5, 5)

ONFI_TIMING = {name: dict(enumerate(values)) for name, values, _ in ONFI_TIMING_PARAMS}
ONFI_MODES = range(6)

# ONFI NV-DDR2 timing modes 0-7 in ps (ONFI 4.0, "NV-DDR2 timing
# parameters"): data on both edges of DQS, 2 / tRC bytes a second (66 to
# 400 MT/s).  Commands and addresses are still latched by WE# but with the
# NV-DDR2 names: tCALS/tCALH (CLE, ALE setup/hold) and tCAS/tCAH (DQ
# setup/hold) replace tCLS, tALS, tCLH, tALH, tDS and tDH of a command or
# address cycle; tDS/tDH here are data to DQS.  tDQSRE and tDQSD are the
# device's maximums (the host's capture must cope with anything below); tITC
# bounds the interface change after SET FEATURES.  Minimums unless noted.
ONFI_NVDDR2_MODES = range(8)
ONFI_NVDDR2_TIMING_PARAMS = (
    # name, mode0..mode7 (ps), doc
    ("tRC", (30000, 25000, 15000, 12000, 10000, 7500, 6000, 5000), "RE# and DQS cycle time (a byte on each edge)"),
    ("tRP", (12900, 10750, 6450, 5160, 4300, 3225, 2580, 2150), "RE# low width (0.43 tRC)"),
    ("tREH", (12900, 10750, 6450, 5160, 4300, 3225, 2580, 2150), "RE# high width (0.43 tRC)"),
    ("tDQSL", (12900, 10750, 6450, 5160, 4300, 3225, 2580, 2150), "DQS low width in data input (0.43 tRC)"),
    ("tDQSH", (12900, 10750, 6450, 5160, 4300, 3225, 2580, 2150), "DQS high width in data input (0.43 tRC)"),
    ("tDS", (4000, 3300, 2000, 1100, 700, 600, 550, 400), "data setup to a DQS edge (data input)"),
    ("tDH", (4000, 3300, 2000, 1100, 700, 600, 550, 400), "data hold after a DQS edge (data input)"),
    ("tWPRE", (15000,) * 8, "DQS write preamble: DQS low before its first rising edge"),
    ("tWPST", (6500,) * 8, "DQS write postamble: DQS held after its last edge"),
    ("tRPRE", (15000,) * 8, "RE# read preamble: RE# low before its first rising edge"),
    ("tDQSRE", (25000,) * 8, "RE# edge to DQS edge (max; the model's delay is configurable)"),
    ("tDQSD", (18000,) * 8, "RE# fall to DQS driven low (max)"),
    ("tCS", (20000,) * 8, "CE# setup time"),
    ("tCH", (5000,) * 8, "CE# hold time"),
    ("tCALS", (15000,) * 8, "CLE/ALE setup to WE# rising"),
    ("tCALH", (5000,) * 8, "CLE/ALE hold after WE# rising"),
    ("tCAS", (5000,) * 8, "DQ setup of a command/address cycle"),
    ("tCAH", (5000,) * 8, "DQ hold of a command/address cycle"),
    ("tWP", (11000,) * 8, "WE# pulse width"),
    ("tWH", (11000,) * 8, "WE# high hold time"),
    ("tWC", (25000,) * 8, "WE# cycle time"),
    ("tADL", (400000,) * 8, "ALE to data loading time"),
    ("tWHR", (80000,) * 8, "WE# high to RE# low"),
    ("tRHW", (100000,) * 8, "RE# high to WE# low"),
    ("tWB", (100000,) * 8, "WE# high to SR[6] low (max)"),
    ("tRR", (20000,) * 8, "ready to RE# low"),
    ("tAR", (10000,) * 8, "ALE to RE# delay"),
    ("tCLR", (10000,) * 8, "CLE to RE# delay"),
    ("tITC", (1000000,) * 8, "interface and timing mode change: R/B# rising after SET FEATURES to the next cycle"),
)
ONFI_NVDDR2_TIMING_PS = {name: dict(enumerate(values)) for name, values, _ in ONFI_NVDDR2_TIMING_PARAMS}
# What an SDR check becomes in NV-DDR2: the command/address-cycle names.
ONFI_NVDDR2_FOR_SDR = {"tCLS": "tCALS", "tALS": "tCALS", "tCLH": "tCALH", "tALH": "tCALH", "tDS": "tCAS",
                       "tDH": "tCAH"}


def onfi_timing_cycles(mode: int, clk_hz: int) -> dict[str, int]:
    """Every ONFI timing of ``mode`` rounded up to whole cycles of ``clk_hz``."""
    period_ps = 10**12 // clk_hz
    return {name: -(-(values[mode] * 1000) // period_ps) for name, values, _ in ONFI_TIMING_PARAMS}


# ONFI command opcodes the model and the channel controller speak.
class OnfiCmd(DocEnum):
    READ_1 = 0x00, "READ first cycle / COPYBACK READ first cycle"
    READ_2 = 0x30, "READ second cycle"
    COPYBACK_READ_2 = 0x35, "COPYBACK READ second cycle"
    CHANGE_READ_COL_1 = 0x05, "CHANGE READ COLUMN first cycle"
    CHANGE_READ_COL_2 = 0xE0, "CHANGE READ COLUMN second cycle"
    PROGRAM_1 = 0x80, "PAGE PROGRAM first cycle"
    PROGRAM_2 = 0x10, "PAGE PROGRAM / COPYBACK PROGRAM confirm"
    CHANGE_WRITE_COL = 0x85, "CHANGE WRITE COLUMN / COPYBACK PROGRAM first cycle"
    ERASE_1 = 0x60, "BLOCK ERASE first cycle"
    ERASE_2 = 0xD0, "BLOCK ERASE second cycle"
    READ_STATUS = 0x70, "READ STATUS"
    READ_ID = 0x90, "READ ID"
    READ_PARAM_PAGE = 0xEC, "READ PARAMETER PAGE"
    READ_STATUS_ENH = 0x78, "READ STATUS ENHANCED: status of the LUN and plane named by 3 row address cycles"
    PROGRAM_MULTI_PLANE = 0x11, "multi-plane PAGE PROGRAM: queue this plane (busy tDBSY); the last plane confirms with 10h"
    READ_MULTI_PLANE = 0x32, "multi-plane READ: queue this plane (busy tDBSY); the last plane confirms with 30h"
    ERASE_MULTI_PLANE = 0xD1, "multi-plane BLOCK ERASE (ONFI 3.0+): queue this block (busy tDBSY); the last confirms with D0h"
    CHANGE_READ_COL_ENH = 0x06, "CHANGE READ COLUMN ENHANCED first cycle: 2 column + 3 row cycles (LUN and plane), then E0h"
    SET_FEATURES = 0xEF, "SET FEATURES: feature address, then 4 parameter bytes (tADL), busy tFEAT"
    GET_FEATURES = 0xEE, "GET FEATURES: feature address, busy tFEAT, then 4 parameter bytes out"
    RESET = 0xFF, "RESET"


class OnfiFeature(DocEnum):
    TIMING_MODE = 0x01, "feature address: P1[3:0] the timing mode, P1[5:4] the data interface (OnfiInterface)"


class OnfiInterface(DocEnum):
    """The data interface in P1[5:4] of feature 01h."""
    SDR = 0, "asynchronous SDR (power-on, and after RESET issued in SDR mode 0)"
    NV_DDR = 1, "NV-DDR (a clock pin; not modelled)"
    NV_DDR2 = 2, "NV-DDR2: data on both edges of DQS, RE# the read strobe"


# ONFI parameter page (READ PARAMETER PAGE, ECh): where the fields a controller
# reads at bring-up sit, in bytes (ONFI 4.0 "Parameter page data structure definition";
# multi-byte fields little-endian, several of them unaligned, so these are
# offsets rather than a Record).  The part sends PAGE_BYTES bytes and then
# redundant copies; each copy ends in a CRC-16 over the bytes before it.
ONFI_PARAM = ConstantGroup("onfi_param", "ONFI parameter page: byte offsets of the fields read at bring-up.", [
    Constant("PAGE_BYTES", 256, "bytes in one copy of the parameter page"),
    Constant("COPIES", 3, "copies a part sends at least (the mandatory redundancy)"),
    Constant("SIGNATURE", 0, "4 bytes 'ONFI'"),
    Constant("SIGNATURE_VALUE", int.from_bytes(b"ONFI", "little"), "the signature read as a little-endian u32"),
    Constant("REVISION", 4, "u16: supported ONFI revisions (OnfiRevision bits)"),
    Constant("FEATURES", 6, "u16: features supported (OnfiParamFeature bits)"),
    Constant("OPT_COMMANDS", 8, "u16: optional commands supported (OnfiOptCommand bits)"),
    Constant("EXT_PARAM_PAGE_LEN", 12, "u16: extended parameter page length in 16-byte units (0: none)"),
    Constant("PARAM_PAGES", 14, "u8: copies of the parameter page the part sends"),
    Constant("MANUFACTURER", 32, "12 ASCII bytes, space padded"),
    Constant("MANUFACTURER_LEN", 12, "bytes of the manufacturer field"),
    Constant("MODEL", 44, "20 ASCII bytes, space padded"),
    Constant("MODEL_LEN", 20, "bytes of the model field"),
    Constant("JEDEC_ID", 64, "u8: JEDEC manufacturer ID"),
    Constant("PAGE_DATA", 80, "u32: data bytes per page"),
    Constant("PAGE_SPARE", 84, "u16: spare bytes per page"),
    Constant("PAGES_PER_BLOCK", 92, "u32: pages per block"),
    Constant("BLOCKS_PER_LUN", 96, "u32: blocks per LUN"),
    Constant("LUNS", 100, "u8: LUNs per chip enable"),
    Constant("ADDR_CYCLES", 101, "u8: column address cycles [7:4], row address cycles [3:0]"),
    Constant("BITS_PER_CELL", 102, "u8: bits per cell"),
    Constant("MAX_BAD_BLOCKS", 103, "u16: bad blocks per LUN at most"),
    Constant("ENDURANCE_VALUE", 105, "u8: block endurance, program/erase cycles = value x 10^exponent"),
    Constant("ENDURANCE_EXPONENT", 106, "u8: block endurance's decimal exponent"),
    Constant("PROGRAMS_PER_PAGE", 110, "u8: partial programs per page (NOP)"),
    Constant("PLANE_ADDR_BITS", 113, "u8: [3:0] number of plane address bits (the low bits of the block address)"),
    Constant("MULTI_PLANE_ATTR", 114, "u8: multi-plane operation attributes (OnfiMultiPlaneAttr bits)"),
    Constant("TIMING_MODES", 129, "u16: asynchronous timing modes supported, bit n = mode n"),
    Constant("T_PROG_US", 133, "u16: tPROG maximum, us"),
    Constant("T_BERS_US", 135, "u16: tBERS maximum, us"),
    Constant("T_R_US", 137, "u16: tR maximum, us"),
    Constant("T_CCS_NS", 139, "u16: tCCS minimum, ns"),
    Constant("NVDDR2_MODES", 142, "u8: NV-DDR2 timing modes supported, bit n = mode n"),
    Constant("NVDDR2_FEATURES", 158, "u8: NV-DDR2 features (0: single-ended DQS and RE#, no ODT)"),
    Constant("CRC", 254, "u16: CRC-16 of bytes 0..253 of the copy"),
    Constant("CRC_INIT", 0x4F4E, "CRC-16 initial value (polynomial CRC_POLY, MSB first, no reflection)"),
    Constant("CRC_POLY", 0x8005, "CRC-16 polynomial"),
])


class OnfiRevision(DocEnum):
    """Bits of the parameter page's revision field (ONFI_PARAM.REVISION)."""
    ONFI_1_0 = 1, "supports ONFI 1.0"
    ONFI_2_0 = 2, "supports ONFI 2.0"
    ONFI_2_1 = 3, "supports ONFI 2.1"
    ONFI_2_2 = 4, "supports ONFI 2.2"
    ONFI_2_3 = 5, "supports ONFI 2.3"
    ONFI_3_0 = 6, "supports ONFI 3.0"
    ONFI_3_1 = 7, "supports ONFI 3.1"
    ONFI_3_2 = 8, "supports ONFI 3.2"
    ONFI_4_0 = 9, "supports ONFI 4.0"


class OnfiParamFeature(DocEnum):
    """Bits of the parameter page's features-supported field (ONFI_PARAM.FEATURES)."""
    BUS_16 = 0, "16-bit data bus"
    MULTI_LUN = 1, "operations on several LUNs at once"
    NON_SEQUENTIAL_PROGRAM = 2, "pages of a block programmed in any order"
    MULTI_PLANE_PROGRAM_ERASE = 3, "multi-plane program and erase"
    ODD_TO_EVEN_COPYBACK = 4, "copyback between odd and even pages"
    NV_DDR = 5, "the NV-DDR data interface"
    MULTI_PLANE_READ = 6, "multi-plane read"
    EXTENDED_PARAM_PAGE = 7, "an extended parameter page"
    PROGRAM_REGISTER_CLEAR = 8, "program page register clear enhancement"
    EZ_NAND = 9, "EZ NAND (ECC in the part)"
    NV_DDR2 = 10, "the NV-DDR2 data interface"
    VOLUME_ADDRESSING = 11, "volume addressing"
    EXTERNAL_VPP = 12, "external Vpp"


class OnfiOptCommand(DocEnum):
    """Bits of the parameter page's optional-commands field (ONFI_PARAM.OPT_COMMANDS)."""
    PAGE_CACHE_PROGRAM = 0, "PAGE CACHE PROGRAM (80h-15h)"
    READ_CACHE = 1, "READ CACHE SEQUENTIAL/RANDOM/END (31h, 00h-31h, 3Fh)"
    GET_SET_FEATURES = 2, "GET FEATURES and SET FEATURES (EEh, EFh)"
    READ_STATUS_ENHANCED = 3, "READ STATUS ENHANCED (78h)"
    COPYBACK = 4, "COPYBACK READ and PROGRAM (00h-35h, 85h-10h)"
    READ_UNIQUE_ID = 5, "READ UNIQUE ID (EDh)"
    CHANGE_READ_COLUMN_ENHANCED = 6, "CHANGE READ COLUMN ENHANCED (06h-E0h)"
    CHANGE_ROW_ADDRESS = 7, "CHANGE ROW ADDRESS (85h with a full address inside a program)"
    SMALL_DATA_MOVE = 8, "small data move"
    RESET_LUN = 9, "RESET LUN (FAh)"
    VOLUME_SELECT = 10, "VOLUME SELECT (E1h)"
    ODT_CONFIGURE = 11, "ODT CONFIGURE (E2h)"
    LUN_GET_SET_FEATURES = 12, "LUN GET/SET FEATURES (D4h, D5h)"
    ZQ_CALIBRATION = 13, "ZQ CALIBRATION (F9h, D9h)"


class OnfiMultiPlaneAttr(DocEnum):
    """Bits of the parameter page's multi-plane operation attributes (ONFI_PARAM.MULTI_PLANE_ATTR)."""
    OVERLAPPED = 0, "1: planes start operations independently (overlapped); 0: together (concurrent)"
    NO_BLOCK_ADDRESS_RESTRICTIONS = 1, "the block address bits above the plane bits may differ between planes"
    PROGRAM_CACHE = 2, "multi-plane PAGE CACHE PROGRAM"
    CACHE_ADDRESS_RESTRICTIONS = 3, "address restrictions apply to multi-plane cache operations"
    READ_CACHE = 4, "multi-plane READ CACHE"
    LOWER_BIT_XNOR = 5, "lower bit XNOR block address restriction"


# ONFI multi-plane operations (ONFI 4.0 "Multi-plane Operations"; Micron
# MT29F8G08ABABA "Multi-plane Operations"): each plane's address is confirmed
# with 11h / 32h / D1h and the LUN is busy for tDBSY; the last one's 10h / 30h /
# D0h starts one array operation on every plane queued.  The addresses of one
# operation name the same LUN and page, distinct planes and, unless the
# parameter page claims no block address restrictions, the same block bits
# above the plane bits.
ONFI_MULTI_PLANE = ConstantGroup("onfi_mp", "ONFI multi-plane operations.", [
    Constant("T_DBSY_NS", 500, "tDBSY, busy after 11h / 32h / D1h: 0.5 us typical, 1 us maximum "
                               "(Micron MT29F8G08ABABA array characteristics)"),
])

# NandProfile.planes for C (the NAND model selects a profile by name).
NAND_PLANES = ConstantGroup("nand_planes", "Planes per LUN of each NAND_PROFILES entry (NandProfile.planes).",
                            [Constant(p.name.upper(), p.planes, p.source) for p in NAND_PROFILES.values()])


class OnfiStatus(DocEnum):
    FAIL = 0, "status bit: last program/erase failed (bit number)"
    FAILC = 1, "status bit: previous operation failed (cache ops)"
    ARDY = 5, "status bit: array ready"
    RDY = 6, "status bit: ready for a new command"
    WP_N = 7, "status bit: not write protected"


# -----------------------------------------------------------------------------
# ECC: binary BCH over GF(2^m) per codeword of up to ``codeword`` data bytes,
# parity bytes identical to the Linux kernel BCH library (bchlib) built with
# the same t and primitive polynomial.  The RTL engine is rtl/ecc/bch.py; the
# channel controller places the parity in the spare area.
# -----------------------------------------------------------------------------


@dataclass(frozen=True)
class EccParams:
    m: int          # Galois field GF(2^m)
    t: int          # correctable bit errors per codeword
    codeword: int   # data bytes per (full) codeword; shorter codewords are allowed
    prim_poly: int  # primitive polynomial of GF(2^m) (bit m set), bchlib's default for m

    @property
    def parity_bytes(self) -> int:
        """Parity bytes per codeword (m*t bits, MSB-first, zero-padded to bytes)."""
        return -(-self.m * self.t // 8)


ECC = EccParams(m=13, t=8, codeword=512, prim_poly=0x201B)

ECC_CONSTANTS = ConstantGroup("ecc", "BCH ECC parameters (ECC in atomflash.spec).", [
    Constant("M", ECC.m, "Galois field GF(2^m)"),
    Constant("T", ECC.t, "correctable bit errors per codeword"),
    Constant("CODEWORD", ECC.codeword, "data bytes per full codeword"),
    Constant("PARITY_BYTES", ECC.parity_bytes, "parity bytes per codeword"),
    Constant("PRIM_POLY", ECC.prim_poly, "primitive polynomial of GF(2^m)"),
])

# -----------------------------------------------------------------------------
# NAND channel controller (rtl/nand): the operation descriptor the FTL and the
# firmware issue, the completion it returns, and where ECC parity lives in a
# page.  Geometry limits are elaboration parameters (a NandProfile); the
# channel checks every descriptor against them before touching the bus.
# -----------------------------------------------------------------------------

NAND_CLK_HZ = 100_000_000  # nominal controller clock: the ONFI cycle tables are built for it
NAND_TCCS_NS = 200  # ONFI tCCS (change column setup) the modelled parts report in their parameter page


class NandOp(DocEnum):
    RESET = 0x0, "RESET (FFh); completes when the target is ready again"
    READ_ID = 0x1, "READ ID (90h) at ID address `column`; `length` bytes into the slot from offset 0"
    READ_PARAM = 0x2, "READ PARAMETER PAGE (ECh, address 00h); `length` bytes into the slot from offset 0"
    READ_STATUS = 0x3, "READ STATUS (70h); the status byte is the completion's nand_status"
    READ = 0x4, ("READ PAGE: `length` bytes at `column` into the slot at the same offset (ECC-corrected unless raw); "
                 "multi_plane: also block ^ 1's page into `slot2`")
    PROGRAM = 0x5, ("PROGRAM PAGE: `length` bytes at `column` of the slot (ECC parity written unless raw); "
                    "multi_plane: also `slot2`'s bytes to block ^ 1, one tPROG for both")
    ERASE = 0x6, "ERASE BLOCK `block`; multi_plane: block and block ^ 1, one tBERS for both"
    COPYBACK = 0x7, "COPYBACK (00h-35h, 85h-10h): page (block, page) to (dst_block, dst_page) inside the LUN"
    SET_FEATURES = 0x8, "SET FEATURES (EFh) at feature address `column`; `length` = 4 parameter bytes from the slot's offset 0"


class NandFlag(DocEnum):
    RAW = 0, "no ECC: any column/length, bytes exactly as stored (bit number)"
    MULTI_PLANE = 1, ("READ, PROGRAM, ERASE on two planes at once: `block` and its partner block ^ 1 (the other "
                      "plane, same LUN and page), `slot2` the partner's data (bit number)")


class NandResult(DocEnum):
    OK = 0x00, "done"
    FAIL = 0x01, "the NAND reported FAIL (SR[0]) for a program, erase or copyback"
    UNCORRECTABLE = 0x02, "a codeword had more bit errors than ECC corrects; the slot holds raw data"
    ERASED = 0x03, "every codeword read was erased (all FFh but at most t bits); the slot holds the raw bytes"
    BAD_OPCODE = 0x10, "descriptor error: opcode is not a NandOp (nothing was sent to the NAND)"
    BAD_CHANNEL = 0x11, "descriptor error: channel does not exist"
    BAD_TARGET = 0x12, "descriptor error: target (chip enable) does not exist on the channel"
    BAD_LUN = 0x13, "descriptor error: LUN does not exist in the target"
    BAD_BLOCK = 0x14, "descriptor error: block (or dst_block) past the LUN"
    BAD_PAGE = 0x15, "descriptor error: page (or dst_page) past the block"
    BAD_COLUMN = 0x16, "descriptor error: column past the page, or not codeword-aligned with ECC"
    BAD_LENGTH = 0x17, "descriptor error: length zero, past the page/slot, or not whole codewords with ECC"
    BAD_SLOT = 0x18, ("descriptor error: buffer slot (or multi-plane slot2) does not exist, or a multi-plane "
                      "READ's slot2 is its slot")
    BAD_PLANE = 0x19, ("descriptor error: multi_plane on an operation without a multi-plane form, or on a target "
                       "whose parameter page does not claim it")


NAND_DESC = Record(
    "nand_desc",
    "NAND channel operation descriptor (FTL/firmware to channel controller).",
    [
        u8("opcode", "NandOp"),
        u8("flags", "NandFlag bits", [Bits("raw", 0, 1, "no ECC"),
                                      Bits("multi_plane", 1, 1, "block and block ^ 1 at once (READ, PROGRAM, ERASE)")]),
        u8("channel", "channel (controller top routes on it)"),
        u8("target", "target (chip enable) on the channel"),
        u8("lun", "LUN inside the target"),
        u8("rsvd0", "reserved, 0"),
        u16("tag", "echoed in the completion"),
        u32("block", "erase block inside the LUN"),
        u16("page", "page inside the block"),
        u16("column", "first byte in the page (ECC: a codeword boundary); READ_ID: the ID address"),
        u16("length", "bytes to transfer"),
        u16("slot", "page buffer slot the data comes from or goes to"),
        u32("dst_block", "COPYBACK destination block"),
        u16("dst_page", "COPYBACK destination page"),
        u16("slot2", "multi-plane READ/PROGRAM: page buffer slot of block ^ 1's data; 0 otherwise"),
    ],
    size=28,
)

NAND_CPL = Record(
    "nand_cpl",
    "NAND channel completion (channel controller to FTL/firmware).",
    [
        u16("tag", "the descriptor's tag"),
        u8("result", "NandResult"),
        u8("channel", "channel that executed it"),
        u8("target", "target that executed it"),
        u8("nand_status", "last ONFI status byte read (OnfiStatus bits); 0 when none was read"),
        u8("ecc_max", "most bits corrected in one codeword"),
        u8("flags", "ECC flags (multi-plane: bits 0-1 for `block`, 2-3 for block ^ 1)",
           [Bits("uncorrectable", 0, 1, "some codeword was uncorrectable"),
            Bits("erased", 1, 1, "every codeword read was erased (all FFh)"),
            Bits("uncorrectable2", 2, 1, "multi-plane READ: some codeword of block ^ 1's page was uncorrectable"),
            Bits("erased2", 3, 1, "multi-plane READ: every codeword of block ^ 1's page was erased")]),
        u16("ecc_corrected", "bits corrected over all codewords"),
        u8("nand_status2", "multi-plane PROGRAM/ERASE: block ^ 1's status (78h); nand_status is block's; 0 otherwise"),
        u8("rsvd", "reserved, 0"),
        u32("crc", "NAND_CRC of the `length` bytes transferred, as they are in the slot afterwards "
                   "(multi-plane: the slot's, then slot2's)"),
    ],
    size=16,
)

NAND_CRC = OOB_CRC  # end-to-end page CRC: the same CRC-32 (zlib's)
NAND_BBM_BYTES = 2  # spare bytes kept for the bad-block marker before the OOB record

NAND_DEFAULTS = ConstantGroup("nand", "NAND channel controller elaboration defaults.", [
    Constant("CHANNELS", 2, "channels in the controller top"),
    Constant("WAYS", 4, "targets (chip enables) per channel"),
    Constant("SLOTS", 8, "page buffer slots per channel"),
    Constant("QUEUE", 2, "descriptors queued per target besides the one executing"),
])


@dataclass(frozen=True)
class NandPageLayout:
    """Where the channel puts user bytes and ECC parity in a page.

    ``[0, page_data)`` data, codewords of ``ecc.codeword`` bytes;
    ``[oob_col, oob_col + oob_bytes)`` the spare user bytes, a codeword of its
    own: ``bbm_bytes`` bad-block marker bytes (keep them FFh: a factory-bad
    block is one whose first spare byte is not FFh) then the OOB record;
    ``[parity_col, parity_col + parity_bytes)`` every codeword's parity in
    codeword order (data codewords, then the OOB codeword); the rest is unused.
    """

    profile: NandProfile
    ecc: EccParams
    bbm_bytes: int
    oob_record: int

    @property
    def oob_bytes(self) -> int:
        return self.bbm_bytes + self.oob_record

    @property
    def oob_record_col(self) -> int:
        """Column of the OOB record (after the bad-block marker)."""
        return self.oob_col + self.bbm_bytes

    @property
    def data_codewords(self) -> int:
        return self.profile.page_data // self.ecc.codeword

    @property
    def codewords(self) -> int:
        return self.data_codewords + 1

    @property
    def oob_col(self) -> int:
        return self.profile.page_data

    @property
    def user_bytes(self) -> int:
        return self.profile.page_data + self.oob_bytes

    @property
    def parity_col(self) -> int:
        return self.user_bytes

    @property
    def parity_bytes(self) -> int:
        return self.codewords * self.ecc.parity_bytes

    def codeword_span(self, index: int) -> tuple[int, int]:
        """(column, bytes) of codeword ``index`` (the last one is the OOB record)."""
        if index < self.data_codewords:
            return index * self.ecc.codeword, self.ecc.codeword
        return self.oob_col, self.oob_bytes

    def parity_span(self, index: int) -> tuple[int, int]:
        return self.parity_col + index * self.ecc.parity_bytes, self.ecc.parity_bytes


def nand_page_layout(profile: NandProfile, ecc: EccParams = ECC) -> NandPageLayout:
    layout = NandPageLayout(profile, ecc, NAND_BBM_BYTES, OOB.size)
    assert profile.page_data % ecc.codeword == 0
    assert layout.parity_col + layout.parity_bytes <= profile.page_bytes, f"{profile.name}: spare too small"
    return layout

# -----------------------------------------------------------------------------
# Host interface registers: the controller's Wishbone target window.  Queues
# live in SoC memory (NVMe-shaped); the host programs their base and size,
# then rings doorbells.  Every register is 32 bits.
# -----------------------------------------------------------------------------

HOST_QUEUE_PAIRS = 4  # queue pairs the front-end implements (elaboration default)
HOST_REGS_ID = int.from_bytes(b"AFHQ", "little")

HOST_REGS = RegisterMap("hostq", "Host queue front-end registers (byte offsets in the controller window).", 0x100, [
    Register("id", 0x00, "ro", "HOST_REGS_ID: identifies the block"),
    Register("version", 0x04, "ro", "SPEC_VERSION implemented"),
    Register("ctrl", 0x08, "rw", "control", (Bits("enable", 0, 1, "fetch commands from enabled queues"),)),
    Register("status", 0x0C, "ro", "status (error bits are sticky until ctrl.enable is cleared)",
             (Bits("ready", 0, 1, "enabled and not halted"),
              Bits("bus_error", 1, 1, "a queue memory access got a bus error; fetching halted"),
              Bits("doorbell_error", 2, 1, "a doorbell was written with an index >= size; the write was ignored"),
              Bits("config_error", 3, 1, "a base/size write was invalid (misaligned, not a power of two, "
                                         "too large); the write was ignored"))),
    Register("int_status", 0x10, "w1c", "interrupt causes", (Bits("cq", 0, 1, "a completion was posted"),
                                                             Bits("error", 1, 1, "an error bit of status was set"))),
    Register("int_enable", 0x14, "rw", "interrupt enables, same bits as int_status",
             (Bits("cq", 0, 1, "raise irq on completions"), Bits("error", 1, 1, "raise irq on errors"))),
    Register("queues", 0x18, "ro", "queue pairs implemented"),
    Register("max_entries", 0x1C, "ro", "largest queue size in entries"),
    Register("sq_base", 0x40, "rw", "submission queue base (byte address, 64-byte aligned)",
             count=HOST_QUEUE_PAIRS, stride=0x20),
    Register("cq_base", 0x44, "rw", "completion queue base (byte address, 16-byte aligned)",
             count=HOST_QUEUE_PAIRS, stride=0x20),
    Register("size", 0x48, "rw", "entries in this pair's SQ and CQ (2..max_entries, power of two); 0 = disabled",
             count=HOST_QUEUE_PAIRS, stride=0x20),
    Register("sq_tail", 0x4C, "rw", "SQ tail doorbell: index after the last submitted entry",
             count=HOST_QUEUE_PAIRS, stride=0x20),
    Register("cq_head", 0x50, "rw", "CQ head doorbell: index after the last consumed completion",
             count=HOST_QUEUE_PAIRS, stride=0x20),
    Register("sq_head", 0x54, "ro", "SQ head: entries fetched so far (index)", count=HOST_QUEUE_PAIRS, stride=0x20),
    Register("cq_tail", 0x58, "ro", "CQ tail: next completion slot (index)", count=HOST_QUEUE_PAIRS, stride=0x20),
])

# -----------------------------------------------------------------------------
# FTL firmware registers: what the firmware owns of the FTL core (free blocks
# in, full blocks out, the log's seq after recovery, GC relocation, its own
# map-cache port, the memory layout).  In the SoC they follow the host queue
# registers in the controller window (soc/ftl_bridge.py).  Pushes are
# single-entry mailboxes: write the argument registers, then the action; the
# status bit says when the core took it.
# -----------------------------------------------------------------------------

FTL_REGS_ID = int.from_bytes(b"AFFT", "little")


class MapFwOp(DocEnum):
    READ = 0, "read the entry of lba"
    WRITE = 1, "write value to the entry of lba"
    CAS = 2, "write value if the entry equals expected"
    FLUSH = 3, "write every dirty line back to the L2P table in memory (before a checkpoint reads it)"
    INVALIDATE = 4, "drop every line without writing back (after the firmware rebuilt the table; at boot)"


class NoSpace(DocEnum):
    """Why the device refuses writes (LOG_PAGE.no_space, the console's ``stats``)."""
    NONE = 0, "writes are accepted"
    FULL = 1, ("the good blocks left (grown bad blocks are lost) cannot hold the data stored plus GC's headroom: "
               "writes complete with NO_SPACE until trims free enough")
    GC_STUCK = 2, ("the free pool is down to GC's reserve and GC found nothing to collect (an open transaction or "
                   "append pins old pages): writes complete with NO_SPACE until GC frees a block")
    NO_BLOCKS = 3, ("not one erased block for the core and none in the pool (erases failed): the commands that "
                    "wait for a page complete NO_SPACE (ftl.host_enable.no_blocks), and so do new writes, until GC "
                    "frees a block")


class RelocResult(DocEnum):
    MOVED = 0, "copied and rebound: new_ppa holds the page now"
    RACED = 1, "copied, but the map no longer pointed at the page (a host write won): the copy is garbage"
    READ_FAILED = 2, "the page could not be read (uncorrectable): nothing changed"
    PROGRAM_FAILED = 3, "every program attempt failed: nothing changed"


class GcPolicy(DocEnum):
    """GC's victim choice (firmware/policy.c; the console's ``gc policy``, the host model sim/gcsim)."""
    GREEDY = 0, "the block with the fewest valid pages"
    COST_BENEFIT = 1, "the highest (1 - u) / 2u x age (u: the block's valid fraction, age: seqs since it closed)"
    COST_BENEFIT_LFS = 2, "the highest (1 - u) / (1 + u) x age (Rosenblum and Ousterhout's LFS cleaner)"


class GcPlacement(DocEnum):
    """Where GC's copies go (the host model sim/gcsim; the core's allocator has one stream: SHARED)."""
    SHARED = 0, "the open block the host's writes go to (the core: one open block per die for both)"
    SEPARATE = 1, "open blocks of their own, one per die (hot/cold separation: copies are cold data)"


_DIE_BLOCK = (Bits("block", 0, 16, "block in the LUN"), Bits("die", 16, 8, "die: (lun * ways + way) * channels + channel"))

FTL_REGS = RegisterMap("ftl", "FTL firmware registers (byte offsets in their 512-byte window).", 0x200, [
    Register("id", 0x00, "ro", "FTL_REGS_ID: identifies the block"),
    Register("version", 0x04, "ro", "SPEC_VERSION implemented"),
    Register("geometry", 0x08, "ro", "the core's build",
             (Bits("channels", 0, 8, "NAND channels"), Bits("ways", 8, 8, "targets per channel"),
              Bits("queue_pairs", 16, 8, "queue pairs of the host-queue front-end (the last is the firmware's own)"), Bits("fw_slot", 24, 8,
              "the page-buffer slot of every channel the firmware may use while the core runs"))),
    Register("status", 0x0C, "ro", "mailbox and core state",
             (Bits("free_pending", 0, 1, "the last free-block push has not been taken yet"),
              Bits("closed_valid", 1, 1, "closed holds a full block (pop with ctrl.pop_closed)"),
              Bits("seq_pending", 2, 1, "the last seq load has not been taken yet"),
              Bits("reloc_pending", 3, 1, "the last relocation request has not been taken yet"),
              Bits("reloc_done_valid", 4, 1, "reloc_done holds a relocation result (pop with ctrl.pop_reloc_done)"),
              Bits("map_busy", 5, 1, "a map request is in flight"),
              Bits("map_done", 6, 1, "map_result/map_old hold the last map request's answer"),
              Bits("starved", 7, 1, "the log writer waits for a page: no die has an open or a queued free block"),
              Bits("failed_valid", 8, 1, "failed holds a page whose program failed (pop with ctrl.pop_failed)"),
              Bits("failed_lost", 9, 1, "a program failure found the failed FIFO full (sticky until reset): "
                                        "some block with one was not reported"),
              Bits("cache_busy", 10, 1, "the write cache has a destage in flight or due: it takes log pages with "
                                        "no host command in the core (0 without a cache; stays 0 until a write)"))),
    Register("ctrl", 0x10, "wo", "actions (write 1)",
             (Bits("pop_closed", 0, 1, "drop the block in closed"),
              Bits("pop_reloc_done", 1, 1, "drop the result in reloc_done"),
              Bits("load_seq", 2, 1, "hand seq_lo/seq_hi to the log writer as its next seq"),
              Bits("relocate", 3, 1, "request the relocation of reloc_ppa with reloc_tag"),
              Bits("map_go", 4, 1, "issue map_op on the firmware's map-cache port"),
              Bits("pop_failed", 5, 1, "drop the page in failed"))),
    Register("pages_per_block", 0x14, "rw", "pages per erase block (from the parameter page)"),
    Register("block_shift", 0x18, "rw", "block-table index = die << block_shift | block"),
    Register("capacity_lo", 0x1C, "rw", "LBAs the host may address, low word"),
    Register("capacity_hi", 0x20, "rw", "LBAs the host may address, high word"),
    Register("l2p_base", 0x24, "rw", "byte address of the L2P table (one PPA per LBA)"),
    Register("bt_base", 0x28, "rw", "byte address of the block table (one 32-bit valid count per block)"),
    Register("scratch_base", 0x2C, "rw", "byte address of the core's record scratch pages"),
    Register("identify_base", 0x30, "rw", "byte address of the IDENTIFY record the firmware keeps"),
    Register("log_base", 0x34, "rw", "byte address of the log page GET_LOG returns"),
    Register("gc_buf", 0x38, "rw", "byte address of the relocator's page buffer in memory"),
    Register("free", 0x40, "wo", "push an erased block to the allocator (ignored while status.free_pending)",
             _DIE_BLOCK),
    Register("closed", 0x44, "ro", "the oldest block the allocator filled (valid: status.closed_valid)", _DIE_BLOCK),
    Register("seq_lo", 0x48, "rw", "the log's next seq, low word (ctrl.load_seq)"),
    Register("seq_hi", 0x4C, "rw", "the log's next seq, high word"),
    Register("reloc_ppa", 0x50, "rw", "page to relocate (ctrl.relocate)"),
    Register("reloc_tag", 0x54, "rw", "the firmware's tag for that request (15 bits)"),
    Register("reloc_done", 0x58, "ro", "the oldest relocation result",
             (Bits("tag", 0, 15, "the request's reloc_tag"), Bits("result", 16, 2, "RelocResult"))),
    Register("reloc_new_ppa", 0x5C, "ro", "where the page went (RelocResult MOVED/RACED)"),
    Register("map_op", 0x60, "rw", "map request: MapFwOp (ctrl.map_go)"),
    Register("map_lba", 0x64, "rw", "map request: lba"),
    Register("map_value", 0x68, "rw", "map request: value (WRITE, CAS)"),
    Register("map_expected", 0x6C, "rw", "map request: expected (CAS)"),
    Register("map_result", 0x70, "ro", "map answer",
             (Bits("updated", 0, 1, "the entry was written"), Bits("hit", 1, 1, "the line was cached"),
              Bits("error", 2, 1, "a bus error: the entry is unknown and unchanged"))),
    Register("map_old", 0x74, "ro", "map answer: the entry before the request"),
    Register("map_hits", 0x78, "ro", "map-cache lookups that hit since reset"),
    Register("map_misses", 0x7C, "ro", "map-cache lookups that missed since reset"),
    Register("scratch_pages", 0x80, "ro", "pages of page_data bytes scratch_base must hold (one per publisher slot)"),
    Register("free_depth", 0x84, "ro", "erased blocks each die queues (pushes beyond it wait in status.free_pending)"),
    Register("host_enable", 0x88, "rw", "the host queue registers answer (until then they read 0 and ignore "
                                        "writes: a host waits for hostq.id); the firmware sets it after recovery",
             (Bits("enable", 0, 1, "host interface on"),
              Bits("hold", 1, 1, "fetch no new command from the host's queue pairs (GC short of erased "
                                 "blocks, and the boot's); the firmware's, the last, is still served; "
                                 "commands in flight finish"),
              Bits("no_space", 2, 1, "out of space (NoSpace): WRITE, ATOMIC_WRITE, TX_WRITE and APPEND complete "
                                     "with NO_SPACE and change nothing; reads, FLUSH, DEALLOCATE, TX_COMMIT, "
                                     "TX_ABORT, REMAP and RELEASE go on (a record page at most each: they "
                                     "finish what is open or free space)"),
              Bits("no_blocks", 3, 1, "no erased block will come (every one left failed its erase): while the "
                                      "allocator is starved, a page request completes at once without a page, "
                                      "so a command already in the core completes NO_SPACE (its group dropped, "
                                      "nothing bound) instead of waiting for ever"))),
    Register("seq_next_lo", 0x8C, "ro", "the seq the log writer gives its next page, low word (every page so far "
                                        "has a smaller one; read hi, lo, hi again)"),
    Register("seq_next_hi", 0x90, "ro", "the seq the log writer gives its next page, high word"),
    Register("failed", 0x94, "ro", "the oldest page (PPA) a program failed on (valid: status.failed_valid); the "
                                   "core already re-issued its data on a fresh page, the firmware retires the block"),
    Register("tx_floor_lo", 0x98, "ro", "first vseq of the oldest transaction not yet committed or aborted, or "
                                        "append not yet remapped or released, low word (all ones: none); what "
                                        "is open (console `tx`; checkpoints record it: GET_LOG SNAPSHOT)"),
    Register("tx_floor_hi", 0x9C, "ro", "the same, high word (read hi, lo, hi again)"),
    Register("tx_limits", 0xA0, "ro", "the core's build: what IDENTIFY reports",
             (Bits("max_open_tx", 0, 8, "transaction slots"),
              Bits("max_pending", 8, 24, "pending-bindings table entries"))),
    Register("tx_status", 0xA4, "ro", "transactions now",
             (Bits("open", 0, 8, "transactions open (not committing or aborting)"),
              Bits("pending_free", 8, 24, "free pending-bindings entries"))),
    Register("append_limits", 0xA8, "ro", "the core's build: what IDENTIFY reports",
             (Bits("max_appends", 0, 16, "append slots"), Bits("max_remap_triples", 16, 8, "largest REMAP list"))),
    Register("floor_passes", 0xAC, "ro", "passes of the append-floor scanner: tx_floor covers every append whose "
                                         "first page was taken before the pass before the last one began "
                                         "(read seq_next, wait for two more passes, then read tx_floor)"),
    Register("cache_base", 0xB0, "rw", "byte address of the volatile write cache (cache_pages pages of page_data bytes)"),
    Register("cache_pages", 0xB4, "ro", "the core's build: write-cache pages (0 = no write cache; IDENTIFY.volatile_cache "
                                        "reports them in bytes)"),
    Register("cache_in", 0xB8, "ro", "host pages written into the write cache since reset"),
    Register("cache_coalesced", 0xBC, "ro", "of them, pages that replaced a buffered page of the same LBA (a flash "
                                            "program saved each)"),
    Register("cache_destaged", 0xC0, "ro", "pages the write cache sent to flash since reset"),
    Register("cache_stripes", 0xC4, "ro", "destage groups that filled a whole stripe (channels x ways pages)"),
    Register("cache_dirty", 0xC8, "ro", "write-cache pages holding data not yet on flash, now"),
    Register("host_read_pages", 0xCC, "ro", "pages READ and TX_READ commands returned since reset (every queue pair)"),
    Register("host_write_pages", 0xD0, "ro", "host data pages the core sent to the log since reset (writes, groups, "
                                             "transactions, appends, destaged cache pages; not records, not GC copies)"),
    Register("record_pages", 0xD4, "ro", "record pages (COMMIT, REMAP, TRIM) the core sent to the log since reset"),
    Register("nand_reads", 0xD8, "ro", "NAND READ PAGE operations issued since reset (host, GC and firmware)"),
    Register("nand_programs", 0xDC, "ro", "NAND PROGRAM PAGE operations issued since reset (log, GC and firmware)"),
    Register("nand_erases", 0xE0, "ro", "NAND ERASE BLOCK operations issued since reset"),
    Register("pairing", 0xE4, "rw", "MLC paired pages (DESIGN.md trap 4; the firmware sets it from the parameter page)",
             (Bits("mlc", 0, 1, "the NAND pairs pages (two bits per cell): a lower page's completion waits for its "
                                "word line's upper page, and an idle die with such a page gets PAD pages"),)),
    Register("pad_pages", 0xE8, "ro", "PAD pages the core programmed since reset to complete MLC word lines"),
    Register("map_lazy", 0xEC, "rw", "the map cache's lazy-load gate (rtl/ftl/mapcache.py): while the firmware "
                                     "loads the L2P table segment by segment after boot, a miss in a segment not "
                                     "loaded yet waits (map_fault) until map_seg marks it loaded",
             (Bits("enable", 0, 1, "gate on (off: every segment is taken to be in memory)"),
              Bits("seg_shift", 8, 5, "log2 of the LBAs per segment"))),
    Register("map_seg", 0xF0, "wo", "mark one segment of the gate",
             (Bits("index", 0, 24, "segment (LBA >> map_lazy.seg_shift)"),
              Bits("loaded", 31, 1, "1: its table entries are in memory; 0: not yet"))),
    Register("map_fault", 0xF4, "ro", "the map cache's request waiting for a segment",
             (Bits("index", 0, 24, "the segment it waits for"),
              Bits("waiting", 31, 1, "a request waits (the host path stalls until the firmware loads it)"))),
    Register("map_faults", 0xF8, "ro", "map-cache requests that waited for a segment since reset"),
    Register("map_segments", 0xFC, "ro", "the core's build: segments the gate tracks (the firmware picks seg_shift "
                                         "so the table fits, or loads it whole)"),
    Register("reloc_lba", 0x100, "rw", "the LBA the relocation request rebinds, for a page whose OOB does not "
                                       "name it (an append page a REMAP bound)",
             (Bits("lba", 0, 31, "the LBA (the map must point at reloc_ppa for it)"),
              Bits("given", 31, 1, "1: rebind lba and stamp it in the copy's OOB; 0: the OOB's lba, and a "
                                   "staged page no pending binding or map entry names is not copied (RACED)"))),
    Register("pending_budget", 0x104, "rw", "pending-bindings entries TX_WRITE and APPEND may hold at once "
                                            "(0: the whole table); beyond it they complete PENDING_FULL.  Staged "
                                            "pages are live, so the firmware keeps them within the "
                                            "over-provisioning, and IDENTIFY reports it as max_pending"),
    Register("token_key", 0x108, "ro", "the key append tokens are MACed under, drawn by the TRNG at reset (the "
                                       "key itself never leaves the gateware)",
             (Bits("ready", 0, 1, "the key is drawn: APPEND mints tokens"),
              Bits("busy", 1, 1, "a draw is under way (APPEND waits)"),
              Bits("alarm", 2, 1, "the draw failed a health test: APPEND completes NOT_READY until reset"),
              Bits("alarm_rct", 3, 1, "the repetition count test failed"),
              Bits("alarm_apt", 4, 1, "the adaptive proportion test failed"),
              Bits("hardware", 5, 1, "the noise is ring oscillators (0: the simulation's seeded stand-in, which "
                                     "has no entropy)"),
              Bits("draws", 16, 16, "draws started since reset"))),
])

# -----------------------------------------------------------------------------
# NVMe (NVM Express Base Specification 2.0, NVM Command Set 1.0): what the drive
# speaks over PCIe.  The controller registers of BAR0, the 64-byte submission and
# 16-byte completion entries, the opcodes and status codes, the Identify and log
# pages atomflash fills, atomflash's verbs as vendor-specific I/O commands, and
# how each atomflash Status is reported.  Offsets and bits are the standard's.
# -----------------------------------------------------------------------------

NVME = ConstantGroup("nvme", "NVMe controller constants.", [
    Constant("VERSION", 0x00020000, "VS: NVMe 2.0.0"),
    Constant("PCI_CLASS", 0x010802, "PCI class code: mass storage, non-volatile memory, NVM Express"),
    Constant("DOORBELL_BASE", 0x1000, "first doorbell (SQ0TDBL) in BAR0"),
    Constant("DSTRD", 0, "doorbell stride: 4 << DSTRD bytes between doorbells"),
    Constant("IO_QUEUES", 8, "I/O submission/completion queue pairs"),
    Constant("MQES", 255, "largest queue, 0-based (CAP.MQES): 256 entries"),
    Constant("TIMEOUT_500MS", 20, "CAP.TO: worst time to ready after CC.EN changes, in 500 ms units"),
    Constant("PAGE_SHIFT", 12, "memory page size 4 KiB (CC.MPS 0): the only one supported"),
    Constant("MDTS", 6, "largest data transfer: 2**MDTS memory pages (256 KiB: LIMITS.MAX_TRANSFER 4 KiB blocks)"),
    Constant("CSS_NVM", 1 << 0, "CAP.CSS: the NVM command set (bit 0)"),
    Constant("MSIX_VECTORS", 9, "MSI-X vectors: 0 for the admin queue, one per I/O completion queue"),
    Constant("SQES", 6, "log2 of the submission entry size (64 B)"),
    Constant("CQES", 4, "log2 of the completion entry size (16 B)"),
    Constant("NSID", 1, "the one namespace"),
    Constant("VENDOR_ID", 0x1D1D, "PCI vendor id the simulated function reports"),
    Constant("DEVICE_ID", 0xAF01, "PCI device id"),
])

NVME_REGS = RegisterMap("nvme", "NVMe controller registers (BAR0; 64-bit registers as two 32-bit halves).",
                        NVME.DOORBELL_BASE + 2 * (4 << NVME.DSTRD) * (1 + NVME.IO_QUEUES), [
    Register("cap_lo", 0x00, "ro", "CAP bits 31:0",
             (Bits("mqes", 0, 16, "largest queue, 0-based"), Bits("cqr", 16, 1, "queues must be contiguous"),
              Bits("ams", 17, 2, "arbitration mechanisms beyond round robin"),
              Bits("to", 24, 8, "ready timeout, 500 ms units"))),
    Register("cap_hi", 0x04, "ro", "CAP bits 63:32",
             (Bits("dstrd", 0, 4, "doorbell stride"), Bits("nssrs", 4, 1, "NVM subsystem reset"),
              Bits("css", 5, 8, "command sets: bit 0 the NVM command set"),
              Bits("bps", 13, 1, "boot partitions"), Bits("mpsmin", 16, 4, "smallest page: 2**(12 + MPSMIN)"),
              Bits("mpsmax", 20, 4, "largest page: 2**(12 + MPSMAX)"))),
    Register("vs", 0x08, "ro", "version", (Bits("ter", 0, 8, "tertiary"), Bits("mnr", 8, 8, "minor"),
                                            Bits("mjr", 16, 16, "major"))),
    Register("intms", 0x0C, "w1s", "interrupt mask set (pin/MSI only; reads give the mask)"),
    Register("intmc", 0x10, "w1c", "interrupt mask clear (pin/MSI only; reads give the mask)"),
    Register("cc", 0x14, "rw", "controller configuration",
             (Bits("en", 0, 1, "enable: 0 -> 1 starts the controller, 1 -> 0 resets it"),
              Bits("css", 4, 3, "command set (0: NVM)"), Bits("mps", 7, 4, "page size 2**(12 + MPS)"),
              Bits("ams", 11, 3, "arbitration (0: round robin)"),
              Bits("shn", 14, 2, "shutdown notification: 1 normal, 2 abrupt"),
              Bits("iosqes", 16, 4, "log2 I/O submission entry size"),
              Bits("iocqes", 20, 4, "log2 I/O completion entry size"))),
    Register("csts", 0x1C, "ro", "controller status",
             (Bits("rdy", 0, 1, "ready"), Bits("cfs", 1, 1, "controller fatal status"),
              Bits("shst", 2, 2, "shutdown status: 0 normal, 1 in progress, 2 complete"),
              Bits("nssro", 4, 1, "NVM subsystem reset occurred"), Bits("pp", 5, 1, "processing paused"))),
    Register("aqa", 0x24, "rw", "admin queue attributes",
             (Bits("asqs", 0, 12, "admin SQ size, 0-based"), Bits("acqs", 16, 12, "admin CQ size, 0-based"))),
    Register("asq_lo", 0x28, "rw", "admin SQ base, bits 31:0 (4 KiB aligned)"),
    Register("asq_hi", 0x2C, "rw", "admin SQ base, bits 63:32"),
    Register("acq_lo", 0x30, "rw", "admin CQ base, bits 31:0 (4 KiB aligned)"),
    Register("acq_hi", 0x34, "rw", "admin CQ base, bits 63:32"),
    Register("sq_tail", NVME.DOORBELL_BASE, "wo", "SQyTDBL: submission queue y's new tail (queue 0: admin)",
             (Bits("tail", 0, 16, "tail"),), count=1 + NVME.IO_QUEUES, stride=2 * (4 << NVME.DSTRD)),
    Register("cq_head", NVME.DOORBELL_BASE + (4 << NVME.DSTRD), "wo", "CQyHDBL: completion queue y's new head",
             (Bits("head", 0, 16, "head"),), count=1 + NVME.IO_QUEUES, stride=2 * (4 << NVME.DSTRD)),
])


NVME_FW_REGS_ID = int.from_bytes(b"AFNV", "little")

NVME_FW_REGS = RegisterMap("nvmefw", "NVMe controller: the firmware's window (admin commands, queues, CSTS, logs).",
                           0x100, [
    Register("id", 0x00, "ro", "NVME_FW_REGS_ID: identifies the block"),
    Register("status", 0x04, "ro", "what waits for the firmware",
             (Bits("cc_changed", 0, 1, "the host wrote CC (acknowledge with ctrl.ack_cc)"),
              Bits("admin_valid", 1, 1, "admin_sqe holds an admin command (take with ctrl.pop_admin)"),
              Bits("post_busy", 2, 1, "the last admin completion is not posted yet"),
              Bits("move_busy", 3, 1, "the data mover runs the firmware's transfer"),
              Bits("config_busy", 4, 1, "the last queue operation is not applied yet"),
              Bits("failed_valid", 5, 1, "failed_* hold an I/O command that failed (drop with ctrl.pop_failed)"),
              Bits("doorbell_error_valid", 6, 1, "doorbell_error holds an ignored doorbell write "
                                                 "(drop with ctrl.pop_doorbell_error)"),
              Bits("fatal", 7, 1, "the host refused a queue DMA: the queue engine stopped (CSTS.CFS)"),
              Bits("io_idle", 8, 1, "no I/O command anywhere in the controller"))),
    Register("ctrl", 0x08, "wo", "actions (write 1)",
             (Bits("ack_cc", 0, 1, "clear status.cc_changed"),
              Bits("pop_admin", 1, 1, "drop the command in admin_sqe"),
              Bits("post", 2, 1, "post cpl_* on the admin completion queue"),
              Bits("move", 3, 1, "run move_* on the data mover"),
              Bits("config", 4, 1, "apply queue_* to the queue engine"),
              Bits("pop_failed", 5, 1, "drop the failure in failed_*"),
              Bits("pop_doorbell_error", 6, 1, "drop doorbell_error"))),
    Register("csts", 0x0C, "rw", "what CSTS reports (CFS is also set by status.fatal)",
             (Bits("rdy", 0, 1, "ready"), Bits("cfs", 1, 1, "controller fatal status"),
              Bits("shst", 2, 2, "shutdown status"))),
    Register("cc", 0x10, "ro", "CC as the host wrote it"),
    Register("aqa", 0x14, "ro", "AQA as the host wrote it"),
    Register("asq_lo", 0x18, "ro", "ASQ bits 31:0"),
    Register("asq_hi", 0x1C, "ro", "ASQ bits 63:32"),
    Register("acq_lo", 0x20, "ro", "ACQ bits 31:0"),
    Register("acq_hi", 0x24, "ro", "ACQ bits 63:32"),
    Register("admin_sqe", 0x40, "ro", "the admin command, dword by dword (NVME_SQE)", count=16, stride=4),
    Register("cpl_result_lo", 0x80, "rw", "the admin completion's DW0"),
    Register("cpl_result_hi", 0x84, "rw", "the admin completion's DW1"),
    Register("cpl_status", 0x88, "rw", "the admin completion's command and status",
             (Bits("cid", 0, 16, "command identifier"), Bits("sc", 16, 8, "status code"),
              Bits("sct", 24, 3, "status code type"), Bits("dnr", 27, 1, "do not retry"))),
    Register("queue_op", 0x90, "rw", "a queue operation for the queue engine",
             (Bits("op", 0, 3, "QueueOp: 0 CREATE_CQ, 1 CREATE_SQ, 2 DELETE_SQ, 3 DELETE_CQ, 4 RESET"),
              Bits("ien", 3, 1, "CREATE_CQ: interrupts enabled"), Bits("qid", 8, 8, "queue identifier"),
              Bits("cqid", 16, 8, "CREATE_SQ: its completion queue"), Bits("iv", 24, 8, "CREATE_CQ: MSI-X vector"))),
    Register("queue_base_lo", 0x94, "rw", "CREATE_*: the queue's base, bits 31:0 (page aligned)"),
    Register("queue_base_hi", 0x98, "rw", "CREATE_*: the queue's base, bits 63:32"),
    Register("queue_size", 0x9C, "rw", "CREATE_*: entries, 0-based"),
    Register("move_prp1_lo", 0xA0, "rw", "the firmware's transfer: PRP1, bits 31:0"),
    Register("move_prp1_hi", 0xA4, "rw", "PRP1, bits 63:32"),
    Register("move_prp2_lo", 0xA8, "rw", "PRP2, bits 31:0"),
    Register("move_prp2_hi", 0xAC, "rw", "PRP2, bits 63:32"),
    Register("move_bytes", 0xB0, "rw", "the transfer's length and direction",
             (Bits("bytes", 0, 24, "bytes, a multiple of 4"), Bits("to_host", 31, 1, "1: SoC memory to the host"))),
    Register("move_local", 0xB4, "rw", "the transfer's SoC memory address"),
    Register("move_status", 0xB8, "ro", "the last transfer's Status (when status.move_busy is 0)"),
    Register("failed_command", 0xC0, "ro", "a failed I/O command: its queue and command",
             (Bits("sqid", 0, 16, "submission queue"), Bits("cid", 16, 16, "command identifier"))),
    Register("failed_status", 0xC4, "ro", "its status", (Bits("sc", 0, 8, "status code"),
                                                          Bits("sct", 8, 3, "status code type"))),
    Register("failed_lba_lo", 0xC8, "ro", "its first LBA, bits 31:0 (0 when the namespace was invalid)"),
    Register("failed_lba_hi", 0xCC, "ro", "its first LBA, bits 63:32"),
    Register("failed_nsid", 0xD0, "ro", "its namespace"),
    Register("doorbell_error", 0xD4, "ro", "an ignored doorbell write",
             (Bits("queue", 0, 8, "queue identifier"), Bits("cq", 8, 1, "1: a CQ head doorbell, 0: an SQ tail"),
              Bits("kind", 9, 1, "NvmeAsyncErrorInfo: 0 invalid doorbell register, 1 invalid doorbell write value"))),
    Register("staging_base", 0xD8, "rw", "where the I/O commands' staging areas start in SoC memory"),
    Register("features", 0xDC, "rw", "features the gateware acts on", (Bits("write_cache", 0, 1,
                                                                          "the volatile write cache is on"),)),
    Register("read_commands", 0xE0, "ro", "READ and TX_READ commands that succeeded"),
    Register("write_commands", 0xE4, "ro", "WRITE, TX_WRITE, ATOMIC_WRITE and APPEND commands that succeeded"),
    Register("blocks_read_lo", 0xE8, "ro", "their blocks read, bits 31:0"),
    Register("blocks_read_hi", 0xEC, "ro", "bits 47:32"),
    Register("blocks_written_lo", 0xF0, "ro", "their blocks written, bits 31:0"),
    Register("blocks_written_hi", 0xF4, "ro", "bits 47:32"),
    Register("failed_lost", 0xF8, "ro", "failures dropped because failed_* was full"),
    Register("busy_queues", 0xFC, "ro", "bit y: I/O submission queue y has a command in flight or, being deleted, "
                                        "entries still to abort"),
])


class NvmeAdminOpcode(DocEnum):
    DELETE_IO_SQ = 0x00, "delete an I/O submission queue"
    CREATE_IO_SQ = 0x01, "create an I/O submission queue"
    GET_LOG_PAGE = 0x02, "get log page"
    DELETE_IO_CQ = 0x04, "delete an I/O completion queue"
    CREATE_IO_CQ = 0x05, "create an I/O completion queue"
    IDENTIFY = 0x06, "identify (CNS in CDW10)"
    ABORT = 0x08, "abort a command"
    SET_FEATURES = 0x09, "set features"
    GET_FEATURES = 0x0A, "get features"
    ASYNC_EVENT_REQUEST = 0x0C, "asynchronous event request"


class NvmeIoOpcode(DocEnum):
    """NVM command set opcodes; bits 1:0 give the data direction (01 to the controller, 10 from it)."""
    FLUSH = 0x00, "flush the volatile write cache"
    WRITE = 0x01, "write"
    READ = 0x02, "read"
    WRITE_ZEROES = 0x08, "write zeroes"
    DATASET_MANAGEMENT = 0x09, "dataset management (deallocate: trim)"
    ATOMIC_WRITE = 0x81, ("vendor: an atomic group -- NLB + 1 blocks of data (PRPs), LBAs from the list at "
                          "MPTR (NLB + 1 little-endian u64), all or nothing")
    TX_WRITE = 0x85, "vendor: stage NLB + 1 blocks at SLBA in transaction TID (CDW13)"
    TX_READ = 0x86, "vendor: read NLB + 1 blocks at SLBA as transaction TID sees them"
    TX_COMMIT = 0x88, "vendor: commit transaction TID"
    TX_ABORT = 0x8C, "vendor: abort transaction TID"
    APPEND = 0x89, "vendor: stage NLB + 1 blocks with no LBA; completion DW0-DW1 hold the remap token"
    REMAP = 0x8D, "vendor: bind the (lba, token, nlb) triples of the data buffer (NVME_REMAP_ENTRY), atomically"
    RELEASE = 0x90, "vendor: discard the staged append of TOKEN (CDW14-15)"
    HINT = 0x94, "vendor: application hint (CDW13: Hint)"


NVME_SQE = Record(
    "nvme_sqe",
    "NVMe submission queue entry (64 bytes); CDW10-15 as the I/O commands and atomflash's vendor verbs use them.",
    [
        u32("cdw0", "command dword 0", [Bits("opc", 0, 8, "opcode"), Bits("fuse", 8, 2, "fused operation (0)"),
                                        Bits("psdt", 14, 2, "PRP or SGL (0: PRPs)"),
                                        Bits("cid", 16, 16, "command identifier")]),
        u32("nsid", "namespace"),
        u32("cdw2", "reserved"),
        u32("cdw3", "reserved"),
        u64("mptr", "metadata pointer; ATOMIC_WRITE: the LBA list"),
        u64("prp1", "PRP entry 1: the first data page (may start inside it, dword aligned)"),
        u64("prp2", "PRP entry 2: the second page, or a PRP list once the data spans more than two"),
        u64("slba", "CDW10-11: first LBA; RELEASE: 0"),
        u32("cdw12", "CDW12", [Bits("nlb", 0, 16, "blocks, 0-based; REMAP: triples, 0-based"),
                               Bits("tx_final", 16, 1, "TX_WRITE: the last write of the transaction, it commits"),
                               Bits("tx_new", 17, 1, "TX_WRITE: opens the transaction (TID_IN_USE if open)"),
                               Bits("fua", 30, 1, "force unit access"),
                               Bits("lr", 31, 1, "limited retry")]),
        u32("cdw13", "CDW13: TX_*: the transaction id; HINT: the Hint"),
        u64("cdw14_15", "CDW14-15: RELEASE: the token"),
    ],
    size=64,
)

NVME_CQE = Record(
    "nvme_cqe",
    "NVMe completion queue entry (16 bytes).",
    [
        u64("result", "DW0-DW1: command specific (APPEND: the token; Get/Set Features: the value)"),
        u16("sqhd", "submission queue head"),
        u16("sqid", "submission queue identifier"),
        u16("cid", "command identifier"),
        u16("sf", "phase and status field",
            [Bits("p", 0, 1, "phase tag"), Bits("sc", 1, 8, "status code"), Bits("sct", 9, 3, "status code type"),
             Bits("crd", 12, 2, "command retry delay"), Bits("m", 14, 1, "more (error log page)"),
             Bits("dnr", 15, 1, "do not retry")]),
    ],
    size=16,
)

NVME_REMAP_ENTRY = Record(
    "nvme_remap_entry",
    "REMAP's data over NVMe: one (lba, token, nlb) triple (24 bytes), NLB + 1 of them in the data buffer.",
    [u64("lba", "first LBA to bind"), u64("token", "the append's token"), u32("nlb", "blocks (the append's)"),
     u32("rsvd", "0")],
    size=24,
)


NVME_DSM_RANGE = Record(
    "nvme_dsm_range",
    "Dataset Management: one range (16 bytes); NR + 1 of them in the data buffer (CDW10 NR, CDW11 bit 2 AD: "
    "deallocate).",
    [u32("attributes", "context attributes (ignored)"), u32("nlb", "blocks (1-based)"), u64("slba", "first LBA")],
    size=16,
)


class NvmeSct(DocEnum):
    GENERIC = 0, "generic command status"
    COMMAND_SPECIFIC = 1, "command specific status"
    MEDIA = 2, "media and data integrity errors"
    PATH = 3, "path related status"
    VENDOR = 7, "vendor specific"


class NvmeGenericStatus(DocEnum):
    SUCCESS = 0x00, "successful completion"
    INVALID_OPCODE = 0x01, "invalid command opcode"
    INVALID_FIELD = 0x02, "invalid field in command"
    CID_CONFLICT = 0x03, "command ID conflict"
    DATA_TRANSFER_ERROR = 0x04, "data transfer error"
    POWER_LOSS_ABORT = 0x05, "commands aborted due to power loss notification"
    INTERNAL_ERROR = 0x06, "internal error"
    ABORT_REQUESTED = 0x07, "command abort requested"
    SQ_DELETION_ABORT = 0x08, "command aborted due to SQ deletion"
    INVALID_NAMESPACE = 0x0B, "invalid namespace or format"
    COMMAND_SEQUENCE_ERROR = 0x0C, "command sequence error"
    PRP_OFFSET_INVALID = 0x13, "PRP offset invalid"
    LBA_OUT_OF_RANGE = 0x80, "LBA out of range"
    CAPACITY_EXCEEDED = 0x81, "capacity exceeded"
    NAMESPACE_NOT_READY = 0x82, "namespace not ready"


class NvmeCommandStatus(DocEnum):
    """Command specific status (SCT 1); atomflash's own from 0xC0 (the vendor-specific range)."""
    INVALID_CQ = 0x00, "completion queue invalid"
    INVALID_QID = 0x01, "invalid queue identifier"
    INVALID_QUEUE_SIZE = 0x02, "invalid queue size"
    ABORT_LIMIT = 0x03, "abort command limit exceeded"
    AER_LIMIT = 0x05, "asynchronous event request limit exceeded"
    INVALID_INTERRUPT_VECTOR = 0x08, "invalid interrupt vector"
    INVALID_LOG_PAGE = 0x09, "invalid log page"
    INVALID_QUEUE_DELETION = 0x0C, "invalid queue deletion (an SQ still uses the CQ)"
    FEATURE_NOT_SAVEABLE = 0x0D, "feature identifier not saveable"
    FEATURE_NOT_CHANGEABLE = 0x0E, "feature not changeable"
    ATOMFLASH = 0xC0, "atomflash's own statuses: 0xC0 + the Status code (NVME_STATUS_OF)"


class NvmeMediaStatus(DocEnum):
    WRITE_FAULT = 0x80, "write fault"
    UNRECOVERED_READ_ERROR = 0x81, "unrecovered read error"


def nvme_status_of(status: int, *, read: bool = False) -> tuple[int, int]:
    """The NVMe (SCT, SC) that reports atomflash's ``status`` (``read``: the command read the medium)."""
    s = Status(status)
    generic = {Status.SUCCESS: NvmeGenericStatus.SUCCESS, Status.INVALID_OPCODE: NvmeGenericStatus.INVALID_OPCODE,
               Status.INVALID_FIELD: NvmeGenericStatus.INVALID_FIELD,
               Status.ZERO_LENGTH: NvmeGenericStatus.INVALID_FIELD,
               Status.TRANSFER_TOO_LARGE: NvmeGenericStatus.INVALID_FIELD,
               Status.LBA_OUT_OF_RANGE: NvmeGenericStatus.LBA_OUT_OF_RANGE,
               Status.MISALIGNED_BUFFER: NvmeGenericStatus.PRP_OFFSET_INVALID,
               Status.NO_SPACE: NvmeGenericStatus.CAPACITY_EXCEEDED,
               Status.NOT_READY: NvmeGenericStatus.NAMESPACE_NOT_READY,
               Status.INTERNAL_ERROR: NvmeGenericStatus.INTERNAL_ERROR,
               Status.DATA_TRANSFER_ERROR: NvmeGenericStatus.DATA_TRANSFER_ERROR}
    if s in generic:
        return NvmeSct.GENERIC, int(generic[s])
    if s == Status.MEDIA_ERROR:
        return NvmeSct.MEDIA, int(NvmeMediaStatus.UNRECOVERED_READ_ERROR if read else NvmeMediaStatus.WRITE_FAULT)
    return NvmeSct.COMMAND_SPECIFIC, NvmeCommandStatus.ATOMFLASH + int(s)


def atomflash_status_of(sct: int, sc: int) -> int | None:
    """The atomflash Status an NVMe (SCT, SC) reports, or None for an NVMe status with no counterpart
    (queue management, aborts ...): the inverse of :func:`nvme_status_of` where it is one to one."""
    if sct == NvmeSct.COMMAND_SPECIFIC and sc >= NvmeCommandStatus.ATOMFLASH:
        return Status(sc - NvmeCommandStatus.ATOMFLASH)
    if sct == NvmeSct.MEDIA and sc in (NvmeMediaStatus.WRITE_FAULT, NvmeMediaStatus.UNRECOVERED_READ_ERROR):
        return Status.MEDIA_ERROR
    if sct == NvmeSct.GENERIC:
        back = {NvmeGenericStatus.SUCCESS: Status.SUCCESS, NvmeGenericStatus.INVALID_OPCODE: Status.INVALID_OPCODE,
                NvmeGenericStatus.INVALID_FIELD: Status.INVALID_FIELD,
                NvmeGenericStatus.LBA_OUT_OF_RANGE: Status.LBA_OUT_OF_RANGE,
                NvmeGenericStatus.PRP_OFFSET_INVALID: Status.MISALIGNED_BUFFER,
                NvmeGenericStatus.CAPACITY_EXCEEDED: Status.NO_SPACE,
                NvmeGenericStatus.NAMESPACE_NOT_READY: Status.NOT_READY,
                NvmeGenericStatus.INTERNAL_ERROR: Status.INTERNAL_ERROR,
                NvmeGenericStatus.DATA_TRANSFER_ERROR: Status.DATA_TRANSFER_ERROR}
        return back.get(sc)
    return None


class NvmeCns(DocEnum):
    NAMESPACE = 0x00, "Identify Namespace (NSID)"
    CONTROLLER = 0x01, "Identify Controller"
    ACTIVE_NAMESPACES = 0x02, "active namespace ID list"


class NvmeLogPage(DocEnum):
    ERROR = 0x01, "error information"
    SMART = 0x02, "SMART / health information"
    FIRMWARE = 0x03, "firmware slot information"
    ATOMFLASH_STATS = 0xC0, "vendor: atomflash's statistics page (LOG_PAGE)"
    ATOMFLASH_OPEN = 0xC1, "vendor: what is open (OPEN_TX, OPEN_APPEND: LogPage.OPEN)"


class NvmeAsyncErrorInfo(DocEnum):
    """Asynchronous event information of the error status type (completion DW0 bits 15:8)."""
    INVALID_DOORBELL_REGISTER = 0x00, "a write to a doorbell register that does not exist"
    INVALID_DOORBELL_VALUE = 0x01, "a doorbell written with a value the queue cannot take"


class NvmeFeature(DocEnum):
    ARBITRATION = 0x01, "arbitration"
    POWER_MANAGEMENT = 0x02, "power management"
    TEMPERATURE_THRESHOLD = 0x04, "temperature threshold"
    VOLATILE_WRITE_CACHE = 0x06, "volatile write cache (bit 0: enabled)"
    NUMBER_OF_QUEUES = 0x07, "number of queues (0-based SQ count 15:0, CQ count 31:16)"
    INTERRUPT_COALESCING = 0x08, "interrupt coalescing (threshold 7:0, time 15:8)"
    INTERRUPT_VECTOR_CONFIG = 0x09, "interrupt vector configuration"
    ASYNC_EVENT_CONFIG = 0x0B, "asynchronous event configuration"


def _ascii(prefix: str, offset: int, nbytes: int, doc: str) -> list[tuple[int, Field]]:
    """An ASCII string field of ``nbytes`` (space padded) as u32 pieces ``prefix0`` ..."""
    return [(offset + 4 * i, u32(f"{prefix}{i}", f"{doc} (bytes {4 * i}..{4 * i + 3})")) for i in range(nbytes // 4)]


def ascii_values(prefix: str, text: str, nbytes: int) -> dict[str, int]:
    """Field values of a string laid out by ``_ascii``: ASCII, left aligned, space padded."""
    raw = text.encode("ascii")[:nbytes].ljust(nbytes, b" ")
    return {f"{prefix}{i}": int.from_bytes(raw[4 * i:4 * i + 4], "little") for i in range(nbytes // 4)}


NVME_ID_CTRL = Record(
    "nvme_id_ctrl",
    "Identify Controller data structure (CNS 01h, 4096 bytes): the fields atomflash fills; atomflash's limits "
    "in the vendor-specific area from byte 3072.",
    at(4096, [
        (0, u16("vid", "PCI vendor id")), (2, u16("ssvid", "PCI subsystem vendor id")),
        *_ascii("sn", 4, 20, "serial number"), *_ascii("mn", 24, 40, "model number"),
        *_ascii("fr", 64, 8, "firmware revision"),
        (72, u8("rab", "recommended arbitration burst")), (77, u8("mdts", "largest transfer: 2**MDTS pages")),
        (78, u16("cntlid", "controller id")), (80, u32("ver", "version (VS)")),
        (96, u32("ctratt", "controller attributes")), (111, u8("cntrltype", "1: I/O controller")),
        (256, u16("oacs", "optional admin commands (0: none)")), (258, u8("acl", "abort command limit, 0-based")),
        (259, u8("aerl", "asynchronous event request limit, 0-based")),
        (260, u8("frmw", "firmware updates: bit 0 slot 1 read only, bits 3:1 slots")),
        (261, u8("lpa", "log page attributes")), (262, u8("elpe", "error log entries, 0-based")),
        (512, u8("sqes", "submission entry size: 3:0 required, 7:4 largest (log2)")),
        (513, u8("cqes", "completion entry size: 3:0 required, 7:4 largest (log2)")),
        (514, u16("maxcmd", "commands outstanding at most")), (516, u32("nn", "namespaces")),
        (520, u16("oncs", "optional NVM commands", [Bits("write_zeroes", 3, 1, "Write Zeroes"),
                                                     Bits("dsm", 2, 1, "Dataset Management")])),
        (522, u16("fuses", "fused operations (0)")), (524, u8("fna", "format NVM attributes")),
        (525, u8("vwc", "volatile write cache: bit 0 present; bits 2:1 = 11b: Flush with NSID FFFFFFFFh supported")),
        (526, u16("awun", "atomic write unit normal, 0-based blocks")),
        (528, u16("awupf", "atomic write unit power fail, 0-based blocks")),
        (530, u8("icsvscc", "I/O command set vendor specific command configuration (1: same format)")),
        (536, u32("sgls", "SGL support (0: none)")),
        *_ascii("subnqn", 768, 256, "NVM subsystem NVMe qualified name"),
        (3072, u64("af_magic", "atomflash: IDENTIFY_MAGIC")),
        (3080, u32("af_max_atomic_pages", "atomflash: the largest atomic group")),
        (3084, u32("af_max_open_tx", "atomflash: transactions open at once")),
        (3088, u32("af_max_pending", "atomflash: pending-bindings entries")),
        (3092, u32("af_max_remap_triples", "atomflash: the largest REMAP list")),
        (3096, u32("af_max_appends", "atomflash: appends live at once")),
        (3100, u32("af_spec_version", "atomflash: SPEC_VERSION")),
    ]),
    size=4096,
)

NVME_ID_NS = Record(
    "nvme_id_ns",
    "Identify Namespace data structure (CNS 00h, 4096 bytes).",
    at(4096, [
        (0, u64("nsze", "namespace size, blocks")), (8, u64("ncap", "namespace capacity, blocks")),
        (16, u64("nuse", "namespace utilisation, blocks")),
        (24, u8("nsfeat", "features: bit 1 NAWUN/NAWUPF/NACWU valid")),
        (25, u8("nlbaf", "LBA formats, 0-based")), (26, u8("flbas", "the format in use (3:0)")),
        (33, u8("dlfeat", "deallocate: bits 2:0 = 001b reads zeros")),
        (34, u16("nawun", "namespace atomic write unit normal, 0-based blocks")),
        (36, u16("nawupf", "namespace atomic write unit power fail, 0-based blocks")),
        (128, u32("lbaf0", "LBA format 0", [Bits("ms", 0, 16, "metadata bytes"),
                                            Bits("lbads", 16, 8, "log2 block size"),
                                            Bits("rp", 24, 2, "relative performance")])),
    ]),
    size=4096,
)

NVME_SMART = Record(
    "nvme_smart",
    "SMART / health information log page (02h, 512 bytes); 128-bit counters as low and high halves.",
    at(512, [
        (0, u8("critical_warning", "critical warnings", [Bits("spare", 0, 1, "available spare below threshold"),
                                                          Bits("reliability", 2, 1, "reliability degraded"),
                                                          Bits("read_only", 3, 1, "media read only")])),
        (1, u8("temperature_lo", "composite temperature, kelvin: bits 7:0 (the standard places this u16 at byte 1)")),
        (2, u8("temperature_hi", "composite temperature, kelvin: bits 15:8")),
        (3, u8("available_spare", "spare left, percent")), (4, u8("spare_threshold", "spare threshold, percent")),
        (5, u8("percentage_used", "life used, percent (may exceed 100)")),
        (32, u64("data_units_read", "512,000-byte units read (low half)")), (40, u64("data_units_read_hi", "high half")),
        (48, u64("data_units_written", "512,000-byte units written (low half)")),
        (56, u64("data_units_written_hi", "high half")),
        (64, u64("host_reads", "read commands completed (low half)")), (72, u64("host_reads_hi", "high half")),
        (80, u64("host_writes", "write commands completed (low half)")), (88, u64("host_writes_hi", "high half")),
        (112, u64("power_cycles", "power cycles (low half)")), (120, u64("power_cycles_hi", "high half")),
        (144, u64("unsafe_shutdowns", "power losses without a shutdown notification (low half)")),
        (152, u64("unsafe_shutdowns_hi", "high half")),
        (160, u64("media_errors", "unrecovered data integrity errors (low half)")),
        (168, u64("media_errors_hi", "high half")),
        (176, u64("error_log_entries", "error log entries over the life (low half)")),
        (184, u64("error_log_entries_hi", "high half")),
    ]),
    size=512,
)

NVME_ERROR_LOG = Record(
    "nvme_error_log",
    "Error information log entry (64 bytes).",
    at(64, [
        (0, u64("error_count", "this error's number, from 1 (0: the entry is empty)")),
        (8, u16("sqid", "submission queue")), (10, u16("cid", "command")),
        (12, u16("status", "the completion's status field (15:1), phase 0")),
        (14, u16("param", "byte (7:0) and bit (10:8) of the field in error; 0xFFFF: not given")),
        (16, u64("lba", "first LBA of the failed command")), (24, u32("nsid", "namespace")),
    ]),
    size=64,
)

REGISTER_MAPS = [HOST_REGS, FTL_REGS, NVME_REGS, NVME_FW_REGS]

CONSTANTS = [LIMITS, LOG, CKPT, ANCHOR, ECC_CONSTANTS, NAND_DEFAULTS, ONFI_PARAM, ONFI_MULTI_PLANE, NAND_PLANES, FS, NVME]
ENUMS = [Opcode, CmdFlag, Hint, Status, Kind, CkptPend, OnfiCmd, OnfiFeature, OnfiInterface, OnfiRevision, OnfiParamFeature, OnfiOptCommand, OnfiMultiPlaneAttr, OnfiStatus, NandOp, NandFlag, NandResult, MapFwOp,
         RelocResult, NoSpace, GcPolicy, GcPlacement, LogPage, NvmeAdminOpcode, NvmeIoOpcode, NvmeSct, NvmeGenericStatus, NvmeCommandStatus,
         NvmeMediaStatus, NvmeCns, NvmeLogPage, NvmeFeature, NvmeAsyncErrorInfo]
RECORDS = [CMD, CPL, ATOMIC_ENTRY, REMAP_ENTRY, OOB, REC_HDR, COMMIT_BODY, REMAP_REC_ENTRY, TRIM_REC_ENTRY, TOKEN, TOKEN_MAC_IN, IDENTIFY, LOG_PAGE, OPEN_TX, OPEN_APPEND, SNAP_HDR, SNAP_TX, SNAP_APPEND, SNAP_ENTRY, PPA, NAND_DESC, NAND_CPL, CKPT_HDR, CKPT_ENTRY, CKPT_PEND, ANCHOR_HDR, FS_SUPER, FS_FILE, FS_EXTENT,
           NVME_SQE, NVME_CQE, NVME_REMAP_ENTRY, NVME_DSM_RANGE, NVME_ID_CTRL, NVME_ID_NS, NVME_SMART, NVME_ERROR_LOG]
SCALARS = {
    "SPEC_VERSION": (SPEC_VERSION, "version of this specification"),
    "OOB_FORMAT": (OOB_FORMAT, "OOB format version stamped in every record"),
    "OOB_CRC_SPAN": (OOB_CRC_SPAN, "bytes of the OOB record the CRC covers"),
    "IDENTIFY_MAGIC": (IDENTIFY_MAGIC, "IDENTIFY.magic"),
    "NAND_CLK_HZ": (NAND_CLK_HZ, "nominal controller clock the ONFI cycle tables are built for"),
    "PPA_UNMAPPED": (PPA_UNMAPPED, "L2P entry of an unmapped LBA"),
    "PPA_NOT_LOADED": (PPA_NOT_LOADED, "L2P entry of a segment the lazy map loader has not loaded yet"),
    "NAND_BBM_BYTES": (NAND_BBM_BYTES, "spare bytes before the OOB record kept for the bad-block marker (FFh)"),
    "HOST_QUEUE_PAIRS": (HOST_QUEUE_PAIRS, "host queue pairs implemented by default"),
    "HOST_REGS_ID": (HOST_REGS_ID, "hostq.id register value"),
    "FTL_REGS_ID": (FTL_REGS_ID, "ftl.id register value"),
    "NVME_FW_REGS_ID": (NVME_FW_REGS_ID, "nvmefw.id register value"),
}


class NvmeField:
    """NVMe 2.0 fields inside command dwords, completion DW0 and registers that the records above keep whole
    (``NVME_SQE`` names CDW10-11 ``slba`` and CDW14-15 ``cdw14_15``, the I/O commands' view), and the
    values of them this controller uses."""
    QID = Bits("qid", 0, 16, "Create/Delete I/O SQ/CQ CDW10: queue identifier")
    QSIZE = Bits("qsize", 16, 16, "Create I/O SQ/CQ CDW10: entries, 0-based")
    PC = Bits("pc", 0, 1, "Create I/O SQ/CQ CDW11: physically contiguous")
    IEN = Bits("ien", 1, 1, "Create I/O CQ CDW11: interrupts enabled")
    IV = Bits("iv", 16, 16, "Create I/O CQ CDW11: interrupt vector")
    CQID = Bits("cqid", 16, 16, "Create I/O SQ CDW11: the completion queue")
    CNS = Bits("cns", 0, 8, "Identify CDW10: which data structure")
    LID = Bits("lid", 0, 8, "Get Log Page CDW10: log page identifier")
    RAE = Bits("rae", 15, 1, "Get Log Page CDW10: retain asynchronous event")
    NUMDL = Bits("numdl", 16, 16, "Get Log Page CDW10: dwords, 0-based, bits 15:0")
    NUMDU = Bits("numdu", 0, 16, "Get Log Page CDW11: dwords, bits 31:16")
    FID = Bits("fid", 0, 8, "Get/Set Features CDW10: feature identifier")
    NR = Bits("nr", 0, 8, "Dataset Management CDW10: ranges, 0-based")
    AD = Bits("ad", 2, 1, "Dataset Management CDW11: deallocate")
    NSQ = Bits("nsq", 0, 16, "Number of Queues: I/O submission queues, 0-based")
    NCQ = Bits("ncq", 16, 16, "Number of Queues: I/O completion queues, 0-based")
    WCE = Bits("wce", 0, 1, "Volatile Write Cache: enabled")
    NOT_ABORTED = Bits("not_aborted", 0, 1, "Abort completion DW0: the command was not aborted")
    AE_TYPE = Bits("type", 0, 3, "Asynchronous Event Request completion DW0: event type")
    AE_INFO = Bits("info", 8, 8, "Asynchronous Event Request completion DW0: event information")
    AE_LID = Bits("lid", 16, 8, "Asynchronous Event Request completion DW0: the log page to read")
    CAP_CSS_NVM = Bits("nvm", (NVME.CSS_NVM).bit_length() - 1, 1, "CAP.CSS: the NVM command set")
    LPA_EXTENDED = Bits("extended", 2, 1, "Identify LPA: Get Log Page takes NUMDU and an offset")
    FRMW_SLOT1_RO = Bits("slot1_ro", 0, 1, "Identify FRMW: slot 1 is read only")
    FRMW_SLOTS = Bits("slots", 1, 3, "Identify FRMW: firmware slots")
    NSFEAT_NSABP = Bits("nsabp", 1, 1, "Identify Namespace NSFEAT: NAWUN/NAWUPF/NACWU are valid")
    DLFEAT_READ = Bits("read", 0, 3, "Identify Namespace DLFEAT: what a deallocated block reads (001b: zeros)")
    DLFEAT_ZEROS = 1
    CNTRLTYPE_IO = 1           # Identify CNTRLTYPE: an I/O controller
    SHN_NONE = 0               # CC.SHN: no notification (1 normal, 2 abrupt)
    SHST_COMPLETE = 2          # CSTS.SHST: shutdown processing complete
    AE_TYPE_ERROR = 0          # asynchronous event type: error status
    AE_INVALID_DB_REGISTER = NvmeAsyncErrorInfo.INVALID_DOORBELL_REGISTER
    AE_INVALID_DB_VALUE = NvmeAsyncErrorInfo.INVALID_DOORBELL_VALUE
    NSID_ALL = 0xFFFF_FFFF     # the broadcast namespace identifier
    NOT_GIVEN = 0xFFFF         # error log entry SQID, CID, parameter location: not specific to a command


NVME_FW_SLOT = Record(
    "nvme_fw_slot", "Firmware slot information log page (LID 03h, 512 bytes): the fields this controller fills.",
    at(512, [(0, u8("afi", "active firmware info: bits 2:0 the running slot")),
             (8, u32("frs1_0", "slot 1 firmware revision, bytes 0..3")),
             (12, u32("frs1_1", "slot 1 firmware revision, bytes 4..7"))]),
    size=512)
RECORDS.append(NVME_FW_SLOT)


class NvmeQueueOp(DocEnum):
    """queue_op.op of ``NVME_FW_REGS``: what the queue engine applies (``rtl.nvme.queues.QueueOp``)."""
    CREATE_CQ = 0, "create a completion queue (base, size, ien, iv)"
    CREATE_SQ = 1, "create a submission queue (base, size, cqid)"
    DELETE_SQ = 2, "delete a submission queue (what it holds unfetched completes SQ_DELETION_ABORT)"
    DELETE_CQ = 3, "delete a completion queue"
    RESET = 4, "drop every queue (a controller reset)"


ENUMS.append(NvmeQueueOp)

# What the NVMe controller reports of itself, for the reference (model/nvme.py) and the firmware (firmware/nvme.c).
NVME_MODEL_NUMBER = "atomflash"
NVME_FIRMWARE_REVISION = f"{SPEC_VERSION}"

NVME_IDENT = ConstantGroup("nvme_ident", "What the NVMe controller reports of itself (Identify, log pages).", [
    Constant("AERL", 3, "Asynchronous Event Requests outstanding at most, 0-based"),
    Constant("ACL", 3, "Abort commands outstanding at most, 0-based (none ever is)"),
    Constant("ERROR_LOG_ENTRIES", 64, "entries the error information log keeps (ELPE + 1)"),
    Constant("AVAILABLE_SPARE", 100, "SMART: spare left, percent"),
    Constant("SPARE_THRESHOLD", 10, "SMART: spare threshold, percent"),
    *[Constant(name.upper(), value, f"Identify {name}: NVME_MODEL_NUMBER, ASCII, space padded")
      for name, value in ascii_values("mn", NVME_MODEL_NUMBER, 40).items()],
    *[Constant(name.upper(), value, f"Identify {name} and the firmware slot log's frs1_{name[2:]}: "
               "NVME_FIRMWARE_REVISION, ASCII, space padded")
      for name, value in ascii_values("fr", NVME_FIRMWARE_REVISION, 8).items()],
])


def _nvme_field_constants() -> list[Constant]:
    out = []
    for name, value in vars(NvmeField).items():
        if isinstance(value, Bits):
            out += [Constant(f"{name}_SHIFT", value.lsb, value.doc), Constant(f"{name}_MASK", value.mask, value.doc)]
        elif isinstance(value, int) and not name.startswith("_"):
            out.append(Constant(name, int(value), f"NvmeField.{name}"))
    return out


NVME_FIELD = ConstantGroup("nvme_field", "NvmeField for C: each field's SHIFT and MASK, and the values.",
                           _nvme_field_constants())

NVME_STATUS_OF = ConstantGroup(
    "nvme_status_of", "nvme_status_of(status) for C: SCT << 8 | SC of each Status (a command that did not read "
    "the medium).", [Constant(s.name, (lambda sct, sc: int(sct) << 8 | int(sc))(*nvme_status_of(s)), s.doc)
                     for s in Status])

CONSTANTS += [NVME_IDENT, NVME_FIELD, NVME_STATUS_OF]

# -----------------------------------------------------------------------------
# SATA link (rtl/sata/phy.py, rtl/sata/link.py; docs/sata.md): the dwords a
# SATA link layer sends on the line, and its CRC and scrambler.  A primitive
# is one dword whose byte 0 is a K28.x control character (charisk 0b0001),
# the other three bytes data characters; the values are the 8b/10b symbols
# as a little-endian dword, as LiteSATA (litesata.common.primitives) and the
# transceivers carry them.
# -----------------------------------------------------------------------------


class SataPrimitive(DocEnum):
    ALIGN = 0x7B4A4ABC, "K28.5 D10.2 D10.2 D27.3: clock compensation, two at least every 256 dwords; dropped on receive"
    CONT = 0x9999AA7C, "the previous primitive repeats; data dwords until the next primitive are junk"
    SYNC = 0xB5B5957C, "the link is idle"
    X_RDY = 0x5757B57C, "transmitter has a frame to send"
    R_RDY = 0x4A4A957C, "receiver is ready for the frame (answers X_RDY)"
    SOF = 0x3737B57C, "start of frame: scrambled FIS dwords and its CRC follow"
    EOF = 0xD5D5B57C, "end of frame: the dword before was the CRC"
    R_IP = 0x5555B57C, "receiver: reception in progress"
    WTRM = 0x5858B57C, "transmitter: frame sent, waiting for R_OK or R_ERR"
    R_OK = 0x3535B57C, "receiver: frame received, CRC good"
    R_ERR = 0x5656B57C, "receiver: frame received with a bad CRC (or lost data)"
    HOLD = 0xD5D5AA7C, "receiver: stop sending data; transmitter: no data ready"
    HOLDA = 0x9595AA7C, "acknowledges a HOLD from the other side"


SATA_PRIMITIVE_CHARISK = 0b0001   # charisk of a primitive: byte 0 is the K character
SATA_D10_2 = 0x4A4A4A4A           # D10.2 dwords: what a host sends while it waits for the device's ALIGNs

# The frame CRC: CRC-32's polynomial over 32-bit dwords, MSB first, no reflection, no final xor, a
# seed of its own; a frame followed by its CRC leaves the register at 0 (the receiver's check).
SATA_CRC = CrcParams("SATA", 32, 0x04C11DB7, 0x52325032, False, False, 0x00000000, 0xCF72AFE8)

SATA_LINK = ConstantGroup("sata_link", "SATA link layer numbers (rtl/sata).", [
    Constant("SCRAMBLER_POLY", 0xA011, "scrambler LFSR x^16+x^15+x^13+x^4+1 (Galois, shifting left; the low "
             "16 bits of the polynomial); each dword takes 32 output bits, bit 0 first"),
    Constant("SCRAMBLER_SEED", 0xFFFF, "scrambler state at SOF; the first dword's mask is 0xC2D2768D"),
    Constant("ALIGN_PERIOD", 256, "dwords per ALIGN period on transmit"),
    Constant("ALIGNS_PER_PERIOD", 2, "ALIGNs sent back to back at the start of each period"),
    Constant("CONT_AFTER", 2, "a primitive is sent this many times before CONT replaces the repeats"),
])

CONSTANTS += [SATA_LINK]
ENUMS.append(SataPrimitive)


# -----------------------------------------------------------------------------
# Etherbone host link (soc.atomflash_soc.add_etherbone_host): where a drive on
# Ethernet answers, and the gateway the simulated LAN shows it (soc/eth2udp.c).
# The packet format is LiteX's Etherbone (litex.tools.remote.etherbone).
# -----------------------------------------------------------------------------


@dataclass(frozen=True)
class EtherboneLink:
    ip: str = "192.168.1.50"             # the drive's IPv4 address (LiteX's Etherbone default)
    mac: int = 0x10E2_D500_0000          # the drive's MAC (LiteX's default)
    udp_port: int = 1234                 # Etherbone's UDP port: requests to it, answers from and to it
    gateway_ip: str = "192.168.1.100"    # the simulated LAN's host (soc/eth2udp.c)
    gateway_mac: int = 0x02AF_0000_0001  # locally administered
    record_words: int = 255              # words one Etherbone record reads or writes (8-bit counts)
    window: int = 4                      # requests a host keeps in flight (the drive buffers their frames whole)
    frame_header_bytes: int = 14 + 20 + 8 + 8 + 4   # Ethernet, IPv4, UDP, Etherbone packet and record headers

    @property
    def request_frame_bytes(self) -> int:
        """The largest request's frame: the headers and a record of ``record_words`` words plus one
        address word (reads: the return address; writes of ``record_words - 2``: base address,
        return address and the read of the last word)."""
        return self.frame_header_bytes + 4 * (self.record_words + 1)

    @staticmethod
    def mac_text(mac: int) -> str:
        return ":".join(f"{b:02x}" for b in mac.to_bytes(6, "big"))


ETHERBONE = EtherboneLink()

# -----------------------------------------------------------------------------
# ATA / SATA FIS (Serial ATA Revision 3.x, transport layer; ATA/ATAPI Command
# Set ACS-3): the Frame Information Structures the device-role SATA stack
# (rtl/sata/transport.py) takes and sends, the ATA commands its command layer
# (rtl/sata/command.py) runs, the status and error bits, IDENTIFY DEVICE's
# words, and how each atomflash Status is reported.  A FIS travels as
# little-endian dwords, so a record's bytes read little-endian are the FIS's
# dwords one after the other (dword 0's bits 7:0 are the FIS type).
# -----------------------------------------------------------------------------


class SataFisType(DocEnum):
    REG_H2D = 0x27, "Register, host to device: a command (C = 1) or a device control update (C = 0)"
    REG_D2H = 0x34, "Register, device to host: a command's ending status"
    DMA_ACTIVATE = 0x39, "DMA Activate, device to host: send the next Data FIS of a DMA write"
    DMA_SETUP = 0x41, "DMA Setup, either way: first-party DMA (NCQ) buffer selection"
    BIST_ACTIVATE = 0x58, "BIST Activate, either way"
    PIO_SETUP = 0x5F, "PIO Setup, device to host: a PIO data phase follows"
    DATA = 0x46, "Data, either way: one dword header, then 1..2048 dwords of data"
    SET_DEVICE_BITS = 0xA1, "Set Device Bits, device to host: status, error and SActive updates"


_FIS_PM = Bits("pm_port", 0, 4, "port multiplier port")

SATA_FIS_REG_H2D = Record(
    "sata_fis_reg_h2d", "Register FIS, host to device (5 dwords).",
    [u8("type", "SataFisType.REG_H2D"),
     u8("flags", "flags", [_FIS_PM, Bits("c", 7, 1, "1: the command register was written; 0: device control")]),
     u8("command", "AtaCommand"), u8("features", "features 7:0"),
     u8("lba0", "LBA 7:0"), u8("lba1", "LBA 15:8"), u8("lba2", "LBA 23:16"),
     u8("device", "device register (bit 6: LBA mode)"),
     u8("lba3", "LBA 31:24"), u8("lba4", "LBA 39:32"), u8("lba5", "LBA 47:40"), u8("features_exp", "features 15:8"),
     u16("count", "count 15:0 (sectors; 0 means 65536 where the command says so; NCQ: the tag in bits 7:3)"),
     u8("icc", "isochronous command completion"),
     u8("control", "device control (bit 2: SRST)"),
     u32("auxiliary", "auxiliary")],
    size=20)

SATA_FIS_REG_D2H = Record(
    "sata_fis_reg_d2h", "Register FIS, device to host (5 dwords).",
    [u8("type", "SataFisType.REG_D2H"), u8("flags", "flags", [_FIS_PM, Bits("i", 6, 1, "interrupt")]),
     u8("status", "AtaStatus bits"), u8("error", "AtaError bits"),
     u8("lba0", "LBA 7:0"), u8("lba1", "LBA 15:8"), u8("lba2", "LBA 23:16"), u8("device", "device register"),
     u8("lba3", "LBA 31:24"), u8("lba4", "LBA 39:32"), u8("lba5", "LBA 47:40"), u8("rsvd11", "reserved"),
     u16("count", "count 15:0"), u16("rsvd14", "reserved"), u32("rsvd16", "reserved")],
    size=20)

SATA_FIS_DMA_ACTIVATE = Record(
    "sata_fis_dma_activate", "DMA Activate FIS, device to host (1 dword).",
    [u8("type", "SataFisType.DMA_ACTIVATE"), u8("flags", "flags", [_FIS_PM]), u16("rsvd2", "reserved")],
    size=4)

SATA_FIS_DATA_HEADER = Record(
    "sata_fis_data_header", "Data FIS, either way: its first dword (the data dwords follow).",
    [u8("type", "SataFisType.DATA"), u8("flags", "flags", [_FIS_PM]), u16("rsvd2", "reserved")],
    size=4)

SATA_FIS_PIO_SETUP = Record(
    "sata_fis_pio_setup", "PIO Setup FIS, device to host (5 dwords).",
    [u8("type", "SataFisType.PIO_SETUP"),
     u8("flags", "flags", [_FIS_PM, Bits("d", 5, 1, "direction: 1 device to host"), Bits("i", 6, 1, "interrupt")]),
     u8("status", "status while the data moves (DRQ set)"), u8("error", "AtaError bits"),
     u8("lba0", "LBA 7:0"), u8("lba1", "LBA 15:8"), u8("lba2", "LBA 23:16"), u8("device", "device register"),
     u8("lba3", "LBA 31:24"), u8("lba4", "LBA 39:32"), u8("lba5", "LBA 47:40"), u8("rsvd11", "reserved"),
     u16("count", "count 15:0"), u8("rsvd14", "reserved"), u8("e_status", "status once the data phase ends"),
     u16("transfer_count", "bytes the following Data FIS carries"), u16("rsvd18", "reserved")],
    size=20)

SATA_FIS_SET_DEVICE_BITS = Record(
    "sata_fis_set_device_bits", "Set Device Bits FIS, device to host (2 dwords).",
    [u8("type", "SataFisType.SET_DEVICE_BITS"),
     u8("flags", "flags", [_FIS_PM, Bits("i", 6, 1, "interrupt"), Bits("n", 7, 1, "notification")]),
     u8("status", "status bits", [Bits("lo", 0, 3, "status bits 2:0"), Bits("hi", 4, 3, "status bits 6:4")]),
     u8("error", "AtaError bits"),
     u32("sactive", "NCQ: bit t set completes tag t")],
    size=8)

SATA_FIS_DMA_SETUP = Record(
    "sata_fis_dma_setup", "DMA Setup FIS (7 dwords): first-party DMA, the NCQ tag in DMA buffer id 4:0.",
    [u8("type", "SataFisType.DMA_SETUP"),
     u8("flags", "flags", [_FIS_PM, Bits("d", 5, 1, "direction: 1 device to host"), Bits("i", 6, 1, "interrupt"),
                           Bits("a", 7, 1, "auto-activate")]),
     u16("rsvd2", "reserved"), u32("buffer_id_lo", "DMA buffer identifier 31:0 (NCQ: the tag)"),
     u32("buffer_id_hi", "DMA buffer identifier 63:32"), u32("rsvd12", "reserved"),
     u32("buffer_offset", "DMA buffer offset"), u32("transfer_count", "DMA transfer count (bytes)"),
     u32("rsvd24", "reserved")],
    size=28)

SATA_TRANSPORT = ConstantGroup("sata_transport", "SATA transport constants.", [
    Constant("DATA_FIS_MAX_DWORDS", 2048, "data dwords one Data FIS carries at most (8 KiB)"),
])


class AtaCommand(DocEnum):
    DATA_SET_MANAGEMENT = 0x06, "DATA SET MANAGEMENT (features bit 0: TRIM; count: 512-byte blocks of ranges)"
    READ_DMA_EXT = 0x25, "READ DMA EXT (LBA48, count sectors, 0 = 65536)"
    READ_LOG_EXT = 0x2F, "READ LOG EXT (PIO data-in; LBA 7:0 the log address, count 512-byte pages)"
    WRITE_DMA_EXT = 0x35, "WRITE DMA EXT (LBA48, count sectors, 0 = 65536)"
    READ_FPDMA_QUEUED = 0x60, "READ FPDMA QUEUED (NCQ: tag in count 7:3, sectors in features, FUA in device bit 7)"
    WRITE_FPDMA_QUEUED = 0x61, "WRITE FPDMA QUEUED (NCQ: tag in count 7:3, sectors in features, FUA in device bit 7)"
    FLUSH_CACHE = 0xE7, "FLUSH CACHE"
    FLUSH_CACHE_EXT = 0xEA, "FLUSH CACHE EXT"
    IDENTIFY_DEVICE = 0xEC, "IDENTIFY DEVICE (PIO data-in, 512 bytes)"
    SET_FEATURES = 0xEF, "SET FEATURES (features: AtaFeature)"


class AtaFeature(DocEnum):
    """SET FEATURES subcommands (the features register) this device takes; others are ABRT."""
    ENABLE_WRITE_CACHE = 0x02, "enable the volatile write cache"
    SET_TRANSFER_MODE = 0x03, "set transfer mode (count): accepted, nothing to change on SATA"
    DISABLE_WRITE_CACHE = 0x82, "disable the volatile write cache (what it holds is flushed first)"


class AtaStatus(DocEnum):
    """Bits of the status register."""
    ERR = 0x01, "error: the error register says which"
    DRQ = 0x08, "data request"
    DF = 0x20, "device fault"
    DRDY = 0x40, "device ready"
    BSY = 0x80, "busy"


class AtaError(DocEnum):
    """Bits of the error register."""
    ABRT = 0x04, "command aborted: not supported, a bad field, or it could not run"
    IDNF = 0x10, "ID not found: an LBA beyond the capacity"
    UNC = 0x40, "uncorrectable data error"
    ICRC = 0x80, "interface CRC error during a data transfer"


ATA_DSM_RANGE = Record(
    "ata_dsm_range", "DATA SET MANAGEMENT (TRIM) LBA range entry: 64 to a 512-byte block; length 0 = unused.",
    [u64("entry", "the range", [Bits("lba", 0, 48, "first LBA"), Bits("length", 48, 16, "sectors")])],
    size=8)

ATA = ConstantGroup("ata", "What the ATA command layer implements.", [
    Constant("SECTOR_BYTES_MIN", 512, "ATA's smallest logical sector; IDENTIFY words 117-118 give a larger one"),
    Constant("DSM_BLOCK_BYTES", 512, "DATA SET MANAGEMENT's count is in blocks of this many bytes of ranges"),
    Constant("DSM_MAX_BLOCKS", 1, "IDENTIFY word 105: blocks of range entries one DATA SET MANAGEMENT takes"),
    Constant("IDENTIFY_SIGNATURE", 0xA5, "IDENTIFY word 255 bits 7:0; bits 15:8 make the 512 bytes sum to 0"),
    Constant("SATA_CAPABILITIES", 0x0102, "IDENTIFY word 76: SATA Gen1 signaling (1.5 Gb/s), NCQ (bit 8)"),
    Constant("NCQ_DEPTH", 32, "NCQ tags (IDENTIFY word 75 holds this minus 1)"),
    Constant("NCQ_TAG_SHIFT", 3, "FPDMA QUEUED: the tag is count 7:3"),
    Constant("DEVICE_FUA", 0x80, "FPDMA QUEUED: device bit 7, forced unit access"),
    Constant("LOG_NCQ_ERROR", 0x10, "READ LOG EXT log address of the NCQ command error log"),
    Constant("DEVICE_LBA", 0x40, "device register: LBA mode (the ending status echoes it)"),
])


def ata_status_of(status: int, *, read: bool = False) -> tuple[int, int]:
    """The ATA (status, error) registers that report atomflash's ``status`` (``read``: the command read
    the medium).  The one table from atomflash's statuses to ATA's."""
    s = Status(status)
    if s == Status.SUCCESS:
        return int(AtaStatus.DRDY), 0
    failed = int(AtaStatus.DRDY | AtaStatus.ERR)
    if s == Status.LBA_OUT_OF_RANGE:
        return failed, int(AtaError.IDNF)
    if s == Status.MEDIA_ERROR:
        return (failed, int(AtaError.UNC)) if read else (failed | AtaStatus.DF, int(AtaError.ABRT))
    if s == Status.DATA_TRANSFER_ERROR:
        return failed, int(AtaError.ICRC | AtaError.ABRT)
    if s == Status.INTERNAL_ERROR:
        return failed | AtaStatus.DF, int(AtaError.ABRT)
    return failed, int(AtaError.ABRT)


ATA_MODEL_NUMBER = NVME_MODEL_NUMBER
ATA_SERIAL_NUMBER = "0000000000000001"
ATA_FIRMWARE_REVISION = NVME_FIRMWARE_REVISION


def ata_string_values(prefix: str, text: str, nwords: int) -> dict[str, int]:
    """Word values of an IDENTIFY string: ASCII, space padded, the first character of each pair in the
    word's high byte (ATA's order)."""
    raw = text.encode("ascii")[:2 * nwords].ljust(2 * nwords, b" ")
    return {f"{prefix}{i}": raw[2 * i] << 8 | raw[2 * i + 1] for i in range(nwords)}


def _ata_words(prefix: str, first: int, nwords: int, doc: str) -> list[tuple[int, Field]]:
    return [(2 * (first + i), u16(f"{prefix}{i}", f"{doc} (word {first + i})")) for i in range(nwords)]


ATA_IDENTIFY = Record(
    "ata_identify", "IDENTIFY DEVICE data (256 words, little-endian): the words this device fills.",
    at(512, [
        (0, u16("general", "general configuration (bit 15 clear: an ATA device)")),
        *_ata_words("sn", 10, 10, "serial number"),
        *_ata_words("fw", 23, 4, "firmware revision"),
        *_ata_words("mn", 27, 20, "model number"),
        (94, u16("multiple_max", "READ/WRITE MULTIPLE: 8000h, none")),
        (98, u16("capabilities", "capabilities", [Bits("dma", 8, 1, "DMA"), Bits("lba", 9, 1, "LBA")])),
        (100, u16("capabilities2", "bit 14 shall be 1")),
        (106, u16("valid", "bit 1: words 64-70 valid, bit 2: word 88 valid")),
        (120, u32("sectors28", "addressable sectors with 28-bit commands (at most 0FFFFFFFh)")),
        (126, u16("mwdma", "multiword DMA modes supported")),
        (128, u16("pio", "PIO modes 3 and 4 supported")),
        (130, u16("cycle_mwdma_min", "minimum multiword DMA cycle (ns)")),
        (132, u16("cycle_mwdma", "recommended multiword DMA cycle (ns)")),
        (134, u16("cycle_pio", "minimum PIO cycle without flow control (ns)")),
        (136, u16("cycle_pio_iordy", "minimum PIO cycle with IORDY (ns)")),
        (138, u16("additional", "additional supported", [
            Bits("trim_zeros", 5, 1, "trimmed sectors read zeros (needs deterministic_trim)"),
            Bits("deterministic_trim", 14, 1, "trimmed sectors read the same until written")])),
        (150, u16("queue_depth", "NCQ queue depth - 1 (0: no NCQ)")),
        (152, u16("sata_capabilities", "SATA capabilities (ATA.SATA_CAPABILITIES)")),
        (160, u16("major_version", "ACS versions: ATA8-ACS, ACS-2, ACS-3")),
        (164, u16("supported1", "features supported", [Bits("write_cache", 5, 1, "volatile write cache")])),
        (166, u16("supported2", "features supported", [
            Bits("lba48", 10, 1, "48-bit address"), Bits("flush_cache", 12, 1, "FLUSH CACHE"),
            Bits("flush_cache_ext", 13, 1, "FLUSH CACHE EXT"), Bits("one", 14, 1, "shall be 1")])),
        (168, u16("supported3", "bit 14 shall be 1")),
        (170, u16("enabled1", "features enabled", [Bits("write_cache", 5, 1, "volatile write cache")])),
        (172, u16("enabled2", "features enabled", [
            Bits("lba48", 10, 1, "48-bit address"), Bits("flush_cache", 12, 1, "FLUSH CACHE"),
            Bits("flush_cache_ext", 13, 1, "FLUSH CACHE EXT"), Bits("words119_120", 15, 1, "words 119-120 valid")])),
        (174, u16("enabled3", "bit 14 shall be 1")),
        (176, u16("udma", "Ultra DMA modes 0-6 supported")),
        (200, u64("sectors48", "addressable sectors with 48-bit commands")),
        (210, u16("dsm_max_blocks", "DATA SET MANAGEMENT: 512-byte blocks of ranges at most (ATA.DSM_MAX_BLOCKS)")),
        (212, u16("sector_size", "physical/logical sector size", [
            Bits("logical_log2_per_physical", 0, 4, "log2 of logical sectors per physical sector"),
            Bits("logical_large", 12, 1, "the logical sector is longer than 256 words (words 117-118)"),
            Bits("multiple_logical", 13, 1, "more than one logical sector per physical sector"),
            Bits("one", 14, 1, "shall be 1")])),
        (234, u16("logical_words_lo", "logical sector size in words, bits 15:0")),
        (236, u16("logical_words_hi", "logical sector size in words, bits 31:16")),
        (238, u16("supported4", "bit 14 shall be 1")),
        (240, u16("enabled4", "bit 14 shall be 1")),
        (338, u16("dsm", "DATA SET MANAGEMENT", [Bits("trim", 0, 1, "TRIM supported")])),
        (418, u16("alignment", "bit 14 shall be 1; bits 13:0 the offset of LBA 0 in its physical sector")),
        (434, u16("rotation", "nominal media rotation rate (1: non-rotating)")),
        (510, u16("integrity", "integrity word", [Bits("signature", 0, 8, "ATA.IDENTIFY_SIGNATURE"),
                                                  Bits("checksum", 8, 8, "makes the 512 bytes sum to 0 mod 256")])),
    ]), size=512)


def ata_identify(*, capacity: int, block_bytes: int, volatile_cache: bool, write_cache: bool,
                 sector_bytes: int | None = None) -> bytes:
    """IDENTIFY DEVICE's 512 bytes for a device of ``capacity`` logical sectors of ``sector_bytes`` (default
    ``block_bytes``) on physical sectors of ``block_bytes`` (the core's block), LBA 0 aligned.  A trimmed
    sector reads the same until written: zeros when the logical sector is the block (the core deallocates
    it), its old data otherwise (a range deallocates only the whole blocks it covers)."""
    sector_bytes = sector_bytes or block_bytes
    per_physical_log2 = (block_bytes // sector_bytes).bit_length() - 1
    if sector_bytes < ATA.SECTOR_BYTES_MIN or sector_bytes << per_physical_log2 != block_bytes:
        raise ValueError(f"a {block_bytes}-byte block is not a power of two of {sector_bytes}-byte sectors")
    logical_large = sector_bytes > ATA.SECTOR_BYTES_MIN
    values = dict(
        general=0x0040, multiple_max=0x8000,
        capabilities=ATA_IDENTIFY.compose("capabilities", dma=1, lba=1), capabilities2=0x4000, valid=0x0006,
        sectors28=min(capacity, 0x0FFF_FFFF), mwdma=0x0007, pio=0x0003,
        cycle_mwdma_min=120, cycle_mwdma=120, cycle_pio=120, cycle_pio_iordy=120,
        queue_depth=ATA.NCQ_DEPTH - 1, sata_capabilities=ATA.SATA_CAPABILITIES, major_version=0x0780,
        supported1=ATA_IDENTIFY.compose("supported1", write_cache=int(volatile_cache)),
        supported2=ATA_IDENTIFY.compose("supported2", lba48=1, flush_cache=1, flush_cache_ext=1, one=1),
        supported3=0x4000,
        enabled1=ATA_IDENTIFY.compose("enabled1", write_cache=int(volatile_cache and write_cache)),
        enabled2=ATA_IDENTIFY.compose("enabled2", lba48=1, flush_cache=1, flush_cache_ext=1, words119_120=1),
        enabled3=0x4000, udma=0x007F, sectors48=capacity, dsm_max_blocks=ATA.DSM_MAX_BLOCKS,
        additional=ATA_IDENTIFY.compose("additional", deterministic_trim=1, trim_zeros=int(per_physical_log2 == 0)),
        sector_size=ATA_IDENTIFY.compose("sector_size", logical_log2_per_physical=per_physical_log2,
                                         multiple_logical=int(per_physical_log2 > 0),
                                         logical_large=int(logical_large), one=1),
        logical_words_lo=(sector_bytes // 2) & 0xFFFF if logical_large else 0,
        logical_words_hi=(sector_bytes // 2) >> 16 if logical_large else 0,
        alignment=0x4000,
        supported4=0x4000, enabled4=0x4000, dsm=ATA_IDENTIFY.compose("dsm", trim=1), rotation=1,
        **ata_string_values("sn", ATA_SERIAL_NUMBER, 10), **ata_string_values("fw", ATA_FIRMWARE_REVISION, 4),
        **ata_string_values("mn", ATA_MODEL_NUMBER, 20))
    body = ATA_IDENTIFY.pack(values)
    checksum = -(sum(body[:510]) + ATA.IDENTIFY_SIGNATURE) & 0xFF
    return body[:510] + bytes([ATA.IDENTIFY_SIGNATURE, checksum])


ATA_NCQ_ERROR_LOG = Record(
    "ata_ncq_error_log", "READ LOG EXT log 10h, the NCQ command error log (one 512-byte page): the queued "
    "command that failed, or NQ when a non-queued command caused the error.",
    at(512, [
        (0, u8("tag", "tag", [Bits("tag", 0, 5, "the failed command's tag"),
                              Bits("nq", 7, 1, "a non-queued command caused the error; the tag is not valid")])),
        (2, u8("status", "AtaStatus bits of the failed command")),
        (3, u8("error", "AtaError bits of the failed command")),
        (4, u8("lba0", "LBA 7:0")), (5, u8("lba1", "LBA 15:8")), (6, u8("lba2", "LBA 23:16")),
        (7, u8("device", "device register")),
        (8, u8("lba3", "LBA 31:24")), (9, u8("lba4", "LBA 39:32")), (10, u8("lba5", "LBA 47:40")),
        (12, u16("count", "sectors (the command's features)")),
        (511, u8("checksum", "the 512 bytes sum to 0 mod 256")),
    ]))


ATA_STATUS_OF = ConstantGroup(
    "ata_status_of", "ata_status_of(status) for C: status << 8 | error of each Status (a command that did not "
    "read the medium).", [Constant(s.name, (lambda st, er: st << 8 | er)(*ata_status_of(s)), s.doc) for s in Status])

CONSTANTS += [SATA_TRANSPORT, ATA, ATA_STATUS_OF]
ENUMS += [SataFisType, AtaCommand, AtaFeature, AtaStatus, AtaError]
RECORDS += [SATA_FIS_REG_H2D, SATA_FIS_REG_D2H, SATA_FIS_DMA_ACTIVATE, SATA_FIS_DATA_HEADER, SATA_FIS_PIO_SETUP,
            SATA_FIS_SET_DEVICE_BITS, SATA_FIS_DMA_SETUP, ATA_DSM_RANGE, ATA_IDENTIFY, ATA_NCQ_ERROR_LOG]
