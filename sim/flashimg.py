"""Pre-written flash for the simulated SoC: NAND model images holding a
commit-flag log, exactly as the RTL controller would have programmed it.

* :func:`encode_page`: a page as the channel programs it with ECC
  (``atomflash.spec.nand_page_layout``): data codewords, the bad-block marker
  bytes (FFh) and the OOB record as one more codeword, then every codeword's
  BCH parity (``bchlib``, which the RTL encoder matches bit for bit).
* :class:`LogPlacement`: the reference log writer (``atomflash.model.LogFTL``)
  numbers pages ``block * pages_per_block + page`` on abstract flash; this maps
  its blocks onto good blocks of the targets, round-robin, and gives each page
  its spec PPA (what the firmware's map holds).
* :func:`program_images`: program the pages of a power cut (``LogFTL.cut``)
  into the images (``atomflash.nandsim.Image.create`` / ``program``), and
  return them as ``atomflash.model.recover`` should see them: in the
  firmware's scan order, addressed by PPA.  Pages can be made unreadable
  (parity destroyed: the controller reports UNCORRECTABLE); recover then gets
  them with a zeroed OOB, as the demo does: absent, never data.

And the way back, to judge what the firmware left on flash (after a power cut):

* :func:`read_log`: every programmed page of the images as the controller
  reads it (BCH-corrected with ``bchlib``; an uncorrectable OOB codeword reads
  as a zeroed OOB record, an uncorrectable data codeword as zeroed data and
  ``Page.data_ok`` false), by PPA, for ``atomflash.model.recover``.
* :func:`read_checkpoint`: the newest intact firmware checkpoint
  (``spec.CKPT_HDR`` + ``spec.CKPT_ENTRY`` pages, decoded here independently
  of firmware/ckpt_take.c, read back by ckpt.c) as an ``atomflash.model.Checkpoint``
  (:func:`read_checkpoints`: every intact one).
* :func:`stale_entries`: a checkpoint's entries older than a version of
  their LBA it must have seen (the soak's check of every checkpoint).
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from pathlib import Path

import bchlib

from atomflash import nandsim, spec
from atomflash.model import Checkpoint, Page, PendingTx


def encode_page(layout: spec.NandPageLayout, user: bytes) -> bytes:
    """``user`` (data, then the spare user bytes: BBM + OOB record) with ECC parity, as programmed."""
    assert len(user) == layout.user_bytes
    bch = bchlib.BCH(layout.ecc.t, prim_poly=layout.ecc.prim_poly)
    page = bytearray(b"\xff" * layout.profile.page_bytes)
    page[:layout.user_bytes] = user
    for i in range(layout.codewords):
        col, n = layout.codeword_span(i)
        pcol, pn = layout.parity_span(i)
        page[pcol:pcol + pn] = bch.encode(bytes(user[col:col + n]))
    return bytes(page)


def user_bytes(layout: spec.NandPageLayout, data: bytes, oob: bytes) -> bytes:
    u = bytearray(b"\xff" * layout.user_bytes)
    u[:len(data)] = data
    u[layout.oob_record_col:layout.oob_record_col + len(oob)] = oob
    return bytes(u)


@dataclass
class LogPlacement:
    """Log blocks onto physical blocks: log block k -> the k-th good block in
    (block, channel, way) order, so consecutive log blocks land on different targets."""

    channels: int
    ways: int
    blocks_per_lun: int
    pages_per_block: int
    bad: set[tuple[int, int]] = field(default_factory=set)  # (target, block)

    def __post_init__(self):
        self.blocks = [(t, b) for b in range(self.blocks_per_lun) for t in range(self.channels * self.ways)
                       if (t, b) not in self.bad]

    def where(self, addr: int) -> tuple[int, int, int]:
        """(target, block, page) of log address ``addr``."""
        k, page = divmod(addr, self.pages_per_block)
        t, block = self.blocks[k]
        return t, block, page

    def ppa(self, addr: int) -> int:
        t, block, page = self.where(addr)
        return spec.pack_ppa(t // self.ways, t % self.ways, 0, block, page)

    def global_block(self, t: int, block: int) -> int:
        return t * self.blocks_per_lun + block  # one LUN per target

    def scan_key(self, ppa: int) -> tuple[int, int, int, int]:
        """The firmware's scan order: lun, block, page, channel, way."""
        f = spec.PPA.decompose("ppa", ppa)
        return f.lun, f.block, f.page, f.channel * self.ways + f.way


def program_images(images: list[nandsim.Image], layout: spec.NandPageLayout, place: LogPlacement,
                   pages: list[Page], *, unreadable: set[int] = frozenset(), seed: int = 0) -> list[Page]:
    """Program ``pages`` (log addresses) into ``images`` (one per target);
    returns what recover must see, in the firmware's scan order, by PPA."""
    rng = random.Random(seed)
    seen = []
    for p in pages:
        t, block, page = place.where(p.addr)
        content = encode_page(layout, user_bytes(layout, p.data, p.oob))
        oob = p.oob
        if p.addr in unreadable:  # far more bit errors than ECC corrects: UNCORRECTABLE
            broken = bytearray(content)
            for col in range(layout.oob_col, layout.oob_col + layout.oob_bytes):
                broken[col] ^= rng.randrange(1, 256)
            content = bytes(broken)
            oob = b"\0" * spec.OOB.size
        images[t].program(0, block, page, content)
        seen.append(Page(place.ppa(p.addr), oob, p.data))
    return sorted(written_prefix(seen), key=lambda q: place.scan_key(q.addr))


def written_prefix(pages: list[Page], position=None) -> list[Page]:
    """Of each block, the pages the firmware's recovery scan reads: page 0
    on, up to the first page missing from ``pages`` (erased).  A cut of the
    reference log (``LogFTL.cut``) may leave a later page of a block
    programmed and an earlier one not, which one die programming a block in
    order never does; the scan stops at the gap (docs/recovery.md).
    ``position(page) -> (block key, page index)``; default: from the PPA."""
    def by_ppa(p):
        f = spec.PPA.decompose("ppa", p.addr)
        return (f.channel, f.way, f.lun, f.block), f.page

    position = position or by_ppa
    out, nxt = [], {}
    for p in sorted(pages, key=position):
        blk, page = position(p)
        if page == nxt.get(blk, 0):
            out.append(p)
            nxt[blk] = page + 1
    return out


def create_images(run_dir: Path, cfgs: list[nandsim.NandConfig]) -> list[nandsim.Image]:
    """Fresh images for every target's config (as the model would create them)."""
    out = []
    for cfg in cfgs:
        path = Path(cfg["image"])
        path.unlink(missing_ok=True)
        Path(str(path) + ".stats.json").unlink(missing_ok=True)
        out.append(nandsim.Image.create(path, cfg))
    return out


def decode_page(layout: spec.NandPageLayout, raw: bytes, bch: "bchlib.BCH | None" = None) -> tuple[bytes, bytes]:
    """(data, OOB record) of a programmed page as the controller returns them:
    every codeword corrected; an uncorrectable codeword reads as zeros."""
    data, oob, _ = decode_page_checked(layout, raw, bch)
    return data, oob


def decode_page_checked(layout: spec.NandPageLayout, raw: bytes,
                        bch: "bchlib.BCH | None" = None) -> tuple[bytes, bytes, bool]:
    """:func:`decode_page`, and whether every codeword of the data area decoded
    (``Page.data_ok``: the controller would have answered an uncorrectable read)."""
    bch = bch or bchlib.BCH(layout.ecc.t, prim_poly=layout.ecc.prim_poly)
    user = bytearray(layout.user_bytes)
    data_ok = True
    for i in range(layout.codewords):
        col, n = layout.codeword_span(i)
        pcol, pn = layout.parity_span(i)
        cw, ecc = bytearray(raw[col:col + n]), bytearray(raw[pcol:pcol + pn])
        if bch.decode(cw, ecc) >= 0:
            bch.correct(cw, ecc)
            user[col:col + n] = cw
        elif col < layout.profile.page_data:
            data_ok = False
    rec = layout.oob_record_col
    return bytes(user[:layout.profile.page_data]), bytes(user[rec:rec + spec.OOB.size]), data_ok


def read_log(images: list[nandsim.Image], layout: spec.NandPageLayout, ways: int) -> list[Page]:
    """The pages recovery reads on every target (image ``i`` = channel ``i //
    ways``, way ``i % ways``) as the controller reads them, addressed by PPA:
    each block's written prefix, its pages up to the first one never
    programmed (or reading as erased), as the firmware's scan stops there
    (docs/recovery.md).  Programmed pages past it exist only after an
    interrupted erase, and the firmware erases such a block before reuse."""
    bch = bchlib.BCH(layout.ecc.t, prim_poly=layout.ecc.prim_poly)
    out = []
    erased_oob = b"\xff" * spec.OOB.size
    for t, img in enumerate(images):
        ended: set[tuple[int, int]] = set()
        expect: dict[tuple[int, int], int] = {}
        for lun, block, page in img.pages():  # image order: by block, then page
            key = (lun, block)
            if key in ended:
                continue
            if page != expect.get(key, 0):  # an erased page before it
                ended.add(key)
                continue
            expect[key] = page + 1
            data, oob, data_ok = decode_page_checked(layout, img.page(lun, block, page), bch)
            if oob == erased_oob:
                ended.add(key)
                continue
            out.append(Page(spec.pack_ppa(t // ways, t % ways, lun, block, page), oob, data, data_ok))
    return out


@dataclass
class FirmwareCheckpoint:
    """A checkpoint as firmware/ckpt_take.c writes it, and the model's view of it."""

    header: object                 # spec.CKPT_HDR fields
    open_blocks: list[int]         # page-0 PPAs of the blocks the log writer had open or queued
    areas: list[list[int]]         # page-0 PPAs of each area's blocks
    entries: dict[int, tuple[int, int]]   # lba -> (vseq, ppa) of every bound LBA
    erases: list[int]              # erase count per global block (the wear pages)
    retired: set[int]              # global blocks it names as grown bad (spec.CKPT.WEAR_RETIRED)
    valid: list[int] | None = None  # format 3: valid pages per global block as the firmware counted them
    factory_bad: set[int] | None = None  # format 4: global blocks it names as factory bad (CKPT.WEAR_FACTORY_BAD)
    free: set[int] | None = None   # format 5: global blocks of the free pool (CKPT.WEAR_FREE)
    anchor_word: int | None = None  # format 5: the anchor record it belongs to (0: none)
    pending: list | None = None    # format 6: its CKPT_PEND records (transactions open, appends live)

    @property
    def model(self) -> Checkpoint:
        entries = {lba: v for lba, (v, _) in self.entries.items()}
        if self.pending is None:   # before format 6: the floor was held below every open one instead
            return Checkpoint(seq=self.header.seq, map=entries, published_below=True)
        txs, appends, tx = {}, {}, None
        for r in self.pending:
            if r.kind == spec.CkptPend.TX:
                tx = PendingTx(first_vseq=r.vseq, npages=r.count, live={})
                txs[spec.tag_of(r.vseq)] = tx
            elif r.kind == spec.CkptPend.LIVE:
                tx.live[r.lba] = r.vseq
            elif r.kind == spec.CkptPend.APPEND:
                appends[r.vseq] = r.count
        return Checkpoint(seq=self.header.seq, map=entries, pending_tx=txs, pending_appends=appends)


def _checkpoint_at(pages: dict[int, Page], ppa: int, ppb: int, page_data: int) -> FirmwareCheckpoint | None:
    """The checkpoint whose header page is ``ppa``, if it is intact (the checks of af_ckpt_load)."""
    hdr_size, ent = spec.CKPT_HDR.size, spec.CKPT_ENTRY
    p = pages.get(ppa)
    if p is None or len(p.data) < hdr_size:
        return None
    h = spec.CKPT_HDR.unpack(p.data[:hdr_size])
    nlist = h.nopen + spec.CKPT.AREAS * h.narea
    nwords = nlist + (h.format >= 5)   # format 5: the anchor record word after the lists
    per_page = page_data // ent.size
    fmt3 = h.format >= 3
    count_pages = h.wear_pages if fmt3 else 0
    crc_pages = -(-h.map_pages * 4 // page_data) if fmt3 else 0
    pend_pages = h.pend_pages if h.format >= spec.CKPT.FORMAT_PENDING else 0
    if (h.magic != spec.CKPT.MAGIC or not spec.CKPT.FORMAT_OLDEST <= h.format <= spec.CKPT.FORMAT
            or h.area >= spec.CKPT.AREAS or h.narea == 0 or hdr_size + 4 * nwords > page_data
            or h.map_pages != -(-h.nlba // per_page) or h.wear_pages != -(-h.nblocks * 4 // page_data)
            or 1 + h.map_pages + h.wear_pages + count_pages + crc_pages + pend_pages > h.narea * ppb):
        return None
    crc_at = spec.CKPT_HDR["crc"].offset
    lists = p.data[hdr_size:hdr_size + 4 * nwords]
    if spec.crc32(p.data[:crc_at] + lists) != h.crc:
        return None
    words = [int.from_bytes(lists[4 * i:4 * i + 4], "little") for i in range(nwords)]
    anchor_word = words[nlist] if h.format >= 5 else None
    opened, areas = words[:h.nopen], [words[h.nopen + a * h.narea:h.nopen + (a + 1) * h.narea]
                                      for a in range(spec.CKPT.AREAS)]
    if areas[h.area][0] != ppa:
        return None
    def page(index):
        f = spec.PPA.decompose("ppa", areas[h.area][index // ppb])
        return pages.get(spec.pack_ppa(f.channel, f.way, f.lun, f.block, index % ppb))

    payload, entries, lba, map_crcs = bytearray(), {}, 0, []
    for index in range(1, 1 + h.map_pages):
        mp = page(index)
        if mp is None:
            return None
        payload += mp.data[:page_data]
        map_crcs.append(spec.crc32(mp.data[:page_data]))
        for i in range(per_page):
            if lba >= h.nlba:
                break
            e = ent.unpack(mp.data[i * ent.size:(i + 1) * ent.size])
            if e.vseq != (1 << 64) - 1:
                entries[lba] = (e.vseq, e.ppa)
            lba += 1
    wear, counts, crcs, pend = bytearray(), bytearray(), bytearray(), bytearray()
    first_count, first_crc = 1 + h.map_pages + h.wear_pages, 1 + h.map_pages + h.wear_pages + count_pages
    first_pend = first_crc + crc_pages
    for index in range(1 + h.map_pages, first_pend + pend_pages):
        wp = page(index)
        if wp is None:
            return None
        (wear if index < first_count else counts if index < first_crc else crcs if index < first_pend
         else pend).extend(wp.data[:page_data])
    if fmt3:   # the pages after the map, and each map page against its recorded CRC
        recorded = [int.from_bytes(crcs[4 * q:4 * q + 4], "little") for q in range(h.map_pages)]
        if spec.crc32(bytes(wear + counts + crcs + pend)) != h.payload_crc or recorded != map_crcs:
            return None
    pending = None
    if h.format >= spec.CKPT.FORMAT_PENDING:
        pending, per = [], page_data // spec.CKPT_PEND.size
        for q in range(pend_pages):
            for i in range(per):
                at = q * page_data + i * spec.CKPT_PEND.size
                r = spec.CKPT_PEND.unpack(bytes(pend[at:at + spec.CKPT_PEND.size]))
                if r.kind == spec.CkptPend.END:
                    break
                pending.append(r)
    elif spec.crc32(bytes(payload + wear)) != h.payload_crc:
        return None
    words = [int.from_bytes(wear[4 * g:4 * g + 4], "little") for g in range(h.nblocks)]
    valid = [int.from_bytes(counts[4 * g:4 * g + 4], "little") for g in range(h.nblocks)] if count_pages else None
    factory_bad = {g for g, w in enumerate(words) if w & spec.CKPT.WEAR_FACTORY_BAD} if h.format >= 4 else None
    free = {g for g, w in enumerate(words) if w & spec.CKPT.WEAR_FREE} if h.format >= 5 else None
    return FirmwareCheckpoint(h, opened, areas, entries, [w & spec.CKPT.WEAR_COUNT_MASK for w in words],
                              {g for g, w in enumerate(words) if w & spec.CKPT.WEAR_RETIRED}, valid, factory_bad,
                              free, anchor_word, pending)


@dataclass
class AnchorRecord:
    """An anchor record as firmware/anchor.c writes it (spec.ANCHOR_HDR and its lists)."""

    ppa: int
    header: object                 # spec.ANCHOR_HDR fields
    areas: list[list[int]]         # page-0 PPAs of each area's blocks (PPA_UNMAPPED: none yet)
    plan: list[int]                # page-0 PPAs of the planned blocks
    bad: list[int]                 # page-0 PPAs of the grown bad blocks it names


def read_anchor_blocks(images: list[nandsim.Image], layout: spec.NandPageLayout) -> list[Page]:
    """Every programmed page of the anchor blocks (target 0's blocks whose page 0 holds an anchor record),
    for :func:`read_anchor`.  On MLC parts the firmware writes its records on lower pages only
    (firmware/anchor.c), so such a block's written prefix (:func:`read_log`) ends at its first upper page."""
    bch = bchlib.BCH(layout.ecc.t, prim_poly=layout.ecc.prim_poly)
    erased_oob = b"\xff" * spec.OOB.size
    out, anchor_blocks = [], set()
    img = images[0]
    for lun, block, page in img.pages():
        if page != 0 and (lun, block) not in anchor_blocks:
            continue
        data, oob, data_ok = decode_page_checked(layout, img.page(lun, block, page), bch)
        rec = spec.unpack_oob(oob) if oob != erased_oob else None
        if page == 0:
            if rec is None or rec.kind != spec.Kind.CHECKPOINT or rec.lba != spec.ANCHOR.OOB_LBA:
                continue
            anchor_blocks.add((lun, block))
        if rec is not None:
            out.append(Page(spec.pack_ppa(0, 0, lun, block, page), oob, data, data_ok))
    return out


def anchor_header_bytes(fmt: int) -> int:
    """Bytes of an ANCHOR_HDR of format ``fmt``: format 1 ends before the power-on counters."""
    return spec.ANCHOR_HDR["power_cycles"].offset if fmt < 2 else spec.ANCHOR_HDR.size


def anchor_crc(data: bytes, fmt: int, lists: bytes) -> int:
    """ANCHOR_HDR.crc of a record whose page starts with ``data`` (its header): the header bytes before
    the crc field, from format 2 those after it too, then the lists."""
    crc = spec.ANCHOR_HDR["crc"]
    head = data[:crc.offset]
    if fmt >= 2:
        head += data[crc.offset + crc.size:spec.ANCHOR_HDR.size]
    return spec.crc32(head + lists)


def read_anchor(pages: list[Page], page_data: int) -> AnchorRecord | None:
    """The newest intact anchor record among ``pages`` (:func:`read_log`), or None.  A format-1 record
    (ANCHOR.FORMAT_OLDEST) reads as the firmware reads it: its counters 0, never FLAG_SHUTDOWN_CLEAN."""
    best, full = None, spec.ANCHOR_HDR.size
    for p in pages:
        rec = spec.unpack_oob(p.oob)
        if (rec is None or rec.kind != spec.Kind.CHECKPOINT or rec.lba != spec.ANCHOR.OOB_LBA
                or len(p.data) < full or not p.data_ok):
            continue
        h = spec.ANCHOR_HDR.unpack(p.data[:full])
        if h.magic != spec.ANCHOR.MAGIC or not spec.ANCHOR.FORMAT_OLDEST <= h.format <= spec.ANCHOR.FORMAT:
            continue
        size = anchor_header_bytes(h.format)
        n = spec.CKPT.AREAS * h.narea + h.nplan + h.nbad
        if size + 4 * n > page_data or h.seq != rec.vseq:
            continue
        lists = p.data[size:size + 4 * n]
        if anchor_crc(p.data, h.format, lists) != h.crc:
            continue
        if h.format < 2:
            h.update(power_cycles=0, unsafe_shutdowns=0, flags=h.flags & ~spec.ANCHOR.FLAG_SHUTDOWN_CLEAN)
        words = [int.from_bytes(lists[4 * i:4 * i + 4], "little") for i in range(n)]
        if best is None or h.seq > best.header.seq:
            plan = spec.CKPT.AREAS * h.narea
            best = AnchorRecord(p.addr, h, [words[a * h.narea:(a + 1) * h.narea] for a in range(spec.CKPT.AREAS)],
                                words[plan:plan + h.nplan], words[plan + h.nplan:])
    return best


def anchor_belongs(rec: AnchorRecord | None, ck: FirmwareCheckpoint | None) -> bool:
    """Would a boot trust ``rec`` with ``ck`` (the checks of af_ckpt_load's fast path): a record with a
    plan whose base is the checkpoint, or that the checkpoint's header names, with its areas."""
    if rec is None or ck is None or ck.header.format < 5 or rec.header.flags & spec.ANCHOR.FLAG_NO_PLAN:
        return False
    h = ck.header
    named = ck.anchor_word != 0 and ck.anchor_word == rec.header.seq & 0xFFFF_FFFF
    return (rec.header.narea == h.narea and (rec.header.base == h.number or named)
            and [block_of(p) for p in ck.areas[h.area]] == [block_of(p) for p in rec.areas[h.area]])


def block_of(ppa: int) -> tuple[int, int, int, int]:
    """(channel, way, LUN, block) of a PPA."""
    f = spec.PPA.decompose("ppa", ppa)
    return f.channel, f.way, f.lun, f.block


def anchor_uncovered(pages: list[Page], ck: FirmwareCheckpoint, rec: AnchorRecord, ways: int,
                     blocks_per_lun: int, luns: int = 1) -> list[int]:
    """Page-0 PPAs of the blocks holding an intact page with a seq at or above ``ck``'s floor (written
    since: recovery must read it) that the anchor's boot would not read: in neither ``ck``'s open list nor
    ``rec``'s plan, and no area, anchor or bad block.  Empty when the anchor loses nothing.  Torn and
    older pages are not counted: a failed or interrupted erase leaves them in a block the boot takes for
    free and erases before use, and they hold nothing acknowledged.  Nor are checkpoint pages: recovery
    replays none, and one in a block no list names is a failed checkpoint's, left in an area block that
    a later checkpoint rotated back into the free pool (it is erased when next handed out).  Bad: named
    by the checkpoint (factory or retired: global block numbers, hence the geometry) or by the record."""
    floor = ck.header.seq
    skip = {block_of(p) for p in ck.open_blocks + rec.plan + rec.bad}
    skip |= {block_of(p) for a in ck.areas + rec.areas for p in a if p != spec.PPA_UNMAPPED}

    def by_global(g):
        t, rest = divmod(g, luns * blocks_per_lun)
        return t // ways, t % ways, rest // blocks_per_lun, rest % blocks_per_lun

    skip |= {by_global(g) for g in ck.retired | (ck.factory_bad or set())}
    out = set()
    for p in pages:
        blk = block_of(p.addr)
        if blk in skip:
            continue
        r = spec.unpack_oob(p.oob)
        if r is None or r.kind == spec.Kind.CHECKPOINT:
            continue                                     # torn, or a checkpoint's or anchor record's page
        if r.seq >= floor:
            out.add(spec.pack_ppa(*blk, 0))
    return sorted(out)


def read_checkpoints(pages: list[Page], pages_per_block: int, page_data: int) -> list[FirmwareCheckpoint]:
    """Every intact firmware checkpoint among ``pages`` (:func:`read_log`), oldest first."""
    by_ppa = {p.addr: p for p in pages}
    found = []
    for p in pages:
        rec = spec.unpack_oob(p.oob)
        if rec is None or rec.kind != spec.Kind.CHECKPOINT or rec.group_idx != 0:
            continue
        c = _checkpoint_at(by_ppa, p.addr, pages_per_block, page_data)
        if c is not None:
            found.append(c)
    return sorted(found, key=lambda c: c.header.number)


def read_checkpoint(pages: list[Page], pages_per_block: int, page_data: int) -> FirmwareCheckpoint | None:
    """The newest intact firmware checkpoint among ``pages`` (:func:`read_log`), or None."""
    found = read_checkpoints(pages, pages_per_block, page_data)
    return found[-1] if found else None


@dataclass(frozen=True)
class StaleEntry:
    """A checkpoint entry older than a version of its LBA that was on flash below the checkpoint's floor."""
    checkpoint: int                # its number
    lba: int
    entry: tuple[int, int] | None  # the checkpoint's (vseq, ppa); None: unbound
    newer: tuple[int, int]         # (vseq, ppa) of the newest page of the LBA below the floor

    def __str__(self):
        have = "unbound" if self.entry is None else f"vseq {self.entry[0]} at PPA 0x{self.entry[1]:08x}"
        return (f"checkpoint {self.checkpoint} names LBA {self.lba} {have}, but vseq {self.newer[0]} "
                f"(PPA 0x{self.newer[1]:08x}) is older than its floor")


def stale_entries(pages: list[Page], ck: FirmwareCheckpoint, lbas) -> list[StaleEntry]:
    """Entries of ``ck`` that name an older version of an LBA than a page on flash below its floor.

    Only for ``lbas`` that nothing but plain WRITEs ever wrote (no TRIM, atomic group, transaction or
    remap): each such page is its own commit point, published before any checkpoint whose floor is above
    its vseq, so every later checkpoint must name it or a newer version.  Pages whose data did not decode
    are left out (recovery may not bind a torn page)."""
    lbas = set(lbas)
    floor = ck.header.seq
    newest: dict[int, tuple[int, int]] = {}
    for p in pages:
        rec = spec.unpack_oob(p.oob)
        if (rec is None or not p.data_ok or rec.kind not in (spec.Kind.DATA, spec.Kind.GC_COPY)
                or rec.lba not in lbas or rec.vseq >= floor):
            continue
        if rec.vseq > newest.get(rec.lba, (-1, 0))[0]:
            newest[rec.lba] = (rec.vseq, p.addr)
    return [StaleEntry(ck.header.number, lba, ck.entries.get(lba), v) for lba, v in sorted(newest.items())
            if ck.entries.get(lba, (-1, 0))[0] < v[0]]


def newest_checkpoint_of(cfgs: list[dict], profile, ways: int) -> FirmwareCheckpoint | None:
    """:func:`read_checkpoint` of the images the NAND model configurations ``cfgs`` name."""
    images = [nandsim.Image(c["image"]) for c in cfgs]
    try:
        return read_checkpoint(read_log(images, spec.nand_page_layout(profile), ways), profile.pages_per_block,
                               profile.page_data)
    finally:
        for img in images:
            img.close()
