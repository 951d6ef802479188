"""SQLite on the drive: an APSW VFS that keeps a database, its rollback journal
and its WAL as files on an atomflash device, and hands SQLite's batch atomic
writes to the drive as one atomic group (or one transaction).

The files (:class:`FileStore`, formats ``spec.FS``, ``FS_SUPER``, ``FS_FILE``,
``FS_EXTENT``): block ``FS.SUPER_LBA`` is the super block; each of the next
``slots`` blocks holds one file -- its name, size and extents; data from
``data_lba`` on.  A file's slot is rewritten (one single-block write, atomic on
the drive) when its size or extents change, after its data: a file grows
safely (data, then size).  A file deleted or truncated gets its slot written at
once, before its blocks can go to another file.

Between syncs a file's written blocks wait in the VFS (as in an operating
system's page cache); ``xSync`` writes them, then the slot if it changed, then
FLUSH.  So SQLite in rollback or WAL mode sees what a file system gives it.

``xDeviceCharacteristics``: ``SQLITE_IOCAP_BATCH_ATOMIC`` (unless the VFS is
made with ``batch_atomic=False``, a plain drive), ``SQLITE_IOCAP_ATOMIC<n>`` for
the block size (a block write is atomic), ``SAFE_APPEND`` (data before size)
and ``POWERSAFE_OVERWRITE`` (a write changes no other block).  Not
``SEQUENTIAL``: blocks of different files reach the drive at their own syncs.

Batch atomic writes: SQLite (built with SQLITE_ENABLE_BATCH_ATOMIC_WRITE) keeps
its rollback journal in memory and brackets the commit's database writes with
``BEGIN_ATOMIC_WRITE`` / ``COMMIT_ATOMIC_WRITE``.  The VFS collects them and at
COMMIT writes the blocks (and the slot, if the file grew) as one ATOMIC_WRITE
group when they fit ``max_atomic_pages``, else as one transaction (TX_WRITE ...
with TX_FINAL on the last) when they fit the pending-bindings table, else it
fails the commit with SQLITE_IOERR and SQLite writes its journal instead.
``ROLLBACK_ATOMIC_WRITE`` drops the collected blocks.

Any object with the :class:`atomflash.device.Device` verbs used here is a drive
(``info``, ``read``, ``write``, ``atomic_write``, ``new_tid``, ``tx_write``,
``tx_abort``, ``flush``): the simulated SoC's Device, or
:class:`atomflash.modeldrive.ModelDrive` on the reference model.
"""

from __future__ import annotations

import collections
import itertools
import sys
from dataclasses import dataclass, field

import apsw

from . import spec

__all__ = ["FileStore", "FsError", "VFS", "connect", "MODES", "IOCAP", "FCNTL"]



def _k(name: str, fallback: int) -> int:
    return int(getattr(apsw, name, fallback))


# SQLite's own API values (sqlite3.h), from APSW when it exports them
IOCAP = dict(
    ATOMIC=_k("SQLITE_IOCAP_ATOMIC", 0x1), ATOMIC512=_k("SQLITE_IOCAP_ATOMIC512", 0x2),
    SAFE_APPEND=_k("SQLITE_IOCAP_SAFE_APPEND", 0x200), SEQUENTIAL=_k("SQLITE_IOCAP_SEQUENTIAL", 0x400),
    POWERSAFE_OVERWRITE=_k("SQLITE_IOCAP_POWERSAFE_OVERWRITE", 0x1000),
    BATCH_ATOMIC=_k("SQLITE_IOCAP_BATCH_ATOMIC", 0x4000))
FCNTL = dict(BEGIN_ATOMIC_WRITE=_k("SQLITE_FCNTL_BEGIN_ATOMIC_WRITE", 31),
             COMMIT_ATOMIC_WRITE=_k("SQLITE_FCNTL_COMMIT_ATOMIC_WRITE", 32),
             ROLLBACK_ATOMIC_WRITE=_k("SQLITE_FCNTL_ROLLBACK_ATOMIC_WRITE", 33))
OPEN_MAIN_DB = _k("SQLITE_OPEN_MAIN_DB", 0x100)
OPEN_MAIN_JOURNAL = _k("SQLITE_OPEN_MAIN_JOURNAL", 0x800)
OPEN_WAL = _k("SQLITE_OPEN_WAL", 0x80000)
OPEN_CREATE = _k("SQLITE_OPEN_CREATE", 0x4)
OPEN_DELETEONCLOSE = _k("SQLITE_OPEN_DELETEONCLOSE", 0x8)

# journal modes of the X-FTL experiment: rollback journal, WAL, and batch atomic (journal in memory)
MODES = ("rollback", "wal", "atomic")


class FsError(Exception):
    """The files on the drive cannot do what was asked (no space, too many files or extents)."""


def _iocap_atomic(lba_size: int) -> int:
    """SQLITE_IOCAP_ATOMIC<n> for n = the block size (512 .. 64 KiB)."""
    bit = IOCAP["ATOMIC512"] << max(0, (lba_size // 512).bit_length() - 1)
    return bit if 512 <= lba_size <= 65536 and lba_size & (lba_size - 1) == 0 else 0


@dataclass
class _Meta:
    """One file: its slot, size, extents; what its slot on the drive says (``disk``)."""

    name: str
    slot: int
    size: int = 0
    extents: list = field(default_factory=list)     # [(lba, nlb)]
    gen: int = 0
    disk: tuple | None = None                        # (size, extents) on the drive; None: no slot written
    kind: str = "other"                              # db | journal | wal | other (for the counts)

    def blocks(self) -> int:
        return sum(n for _, n in self.extents)

    def lba_of(self, index: int) -> int:
        for lba, n in self.extents:
            if index < n:
                return lba + index
            index -= n
        raise IndexError(index)

    def state(self) -> tuple:
        return (self.size, tuple(self.extents))


class FileStore:
    """The files on one drive.  ``counts``: blocks written per kind (db, journal, wal, meta),
    blocks read, flushes, atomic groups, transactions, batch commits that fell back."""

    def __init__(self, dev, *, format: bool = False, alloc_blocks: int = 32, trim_freed: bool = False):
        self.dev = dev
        info = dev.info
        self.lba_size = int(info.lba_size)
        self.capacity = int(info.capacity)
        self.max_transfer = int(info.max_transfer)
        self.max_atomic = int(info.max_atomic_pages)
        self.max_pending = int(info.max_pending)
        self.alloc_blocks = alloc_blocks
        self.trim_freed = trim_freed
        self.counts = collections.Counter()
        self.files: dict[str, _Meta] = {}
        self.free_slots: list[int] = []
        if format or not self._mount():
            self._format()

    # -- super block and slots -------------------------------------------------------
    def _super_bytes(self, slots: int, data_lba: int) -> bytes:
        head = spec.FS_SUPER.pack(magic=spec.FS.MAGIC, format=spec.FS.FORMAT, lba_size=self.lba_size, slots=slots,
                                  data_lba=data_lba, capacity=self.capacity)
        crc_at = spec.FS_SUPER["crc"].offset
        head = head[:crc_at] + spec.crc32(head[:crc_at]).to_bytes(4, "little") + head[crc_at + 4:]
        return head.ljust(self.lba_size, b"\0")

    def _format(self) -> None:
        slots = spec.FS.SLOTS
        self.slots, self.data_lba = slots, spec.FS.SUPER_LBA + 1 + slots
        if self.data_lba >= self.capacity:
            raise FsError(f"a drive of {self.capacity} blocks is too small for the files")
        # empty slots first, the super block last: a format cut short leaves no super block (formats again)
        self.write_runs([(spec.FS.SUPER_LBA + 1 + i, bytes(self.lba_size)) for i in range(slots)], kind="meta")
        self._write(spec.FS.SUPER_LBA, self._super_bytes(slots, self.data_lba), kind="meta")
        self.files.clear()
        self.free_slots = list(range(slots))

    def _mount(self) -> bool:
        raw = self._read(spec.FS.SUPER_LBA, 1)
        sup = spec.FS_SUPER.unpack(raw[:spec.FS_SUPER.size])
        crc_at = spec.FS_SUPER["crc"].offset
        if sup.magic != spec.FS.MAGIC or sup.crc != spec.crc32(raw[:crc_at]):
            return False
        if sup.format != spec.FS.FORMAT or sup.lba_size != self.lba_size:
            raise FsError(f"the drive's files are format {sup.format} with {sup.lba_size}-byte blocks; "
                          f"this is format {spec.FS.FORMAT} on {self.lba_size}-byte blocks")
        self.slots, self.data_lba = sup.slots, sup.data_lba
        raw = self._read(spec.FS.SUPER_LBA + 1, self.slots)
        self.free_slots = []
        for i in range(self.slots):
            meta = self._parse_slot(i, raw[i * self.lba_size:(i + 1) * self.lba_size])
            if meta is None:
                self.free_slots.append(i)
            else:
                self.files[meta.name] = meta
        return True

    def _slot_bytes(self, m: _Meta) -> bytes:
        name = m.name.encode()
        ext = b"".join(spec.FS_EXTENT.pack(lba=l, nlb=n) for l, n in m.extents)
        head = spec.FS_FILE.pack(magic=spec.FS.FILE_MAGIC, format=spec.FS.FORMAT, name_len=len(name), size=m.size,
                                 gen=m.gen, nextents=len(m.extents))
        crc_at = spec.FS_FILE["crc"].offset
        body = name.ljust(spec.FS.NAME_BYTES, b"\0") + ext
        crc = spec.crc32(head[:crc_at] + body)
        out = head[:crc_at] + crc.to_bytes(4, "little") + head[crc_at + 4:] + body
        return out.ljust(self.lba_size, b"\0")

    def max_extents(self) -> int:
        return (self.lba_size - spec.FS_FILE.size - spec.FS.NAME_BYTES) // spec.FS_EXTENT.size

    def _parse_slot(self, i: int, raw: bytes) -> _Meta | None:
        h = spec.FS_FILE.unpack(raw[:spec.FS_FILE.size])
        if h.magic != spec.FS.FILE_MAGIC:
            return None
        crc_at = spec.FS_FILE["crc"].offset
        n_ext = min(h.nextents, self.max_extents())
        body = raw[spec.FS_FILE.size:spec.FS_FILE.size + spec.FS.NAME_BYTES + n_ext * spec.FS_EXTENT.size]
        if h.format != spec.FS.FORMAT or h.nextents != n_ext or h.crc != spec.crc32(raw[:crc_at] + body):
            raise FsError(f"file slot {i} is damaged")
        name = body[:h.name_len].decode()
        ext = []
        for j in range(n_ext):
            off = spec.FS.NAME_BYTES + j * spec.FS_EXTENT.size
            e = spec.FS_EXTENT.unpack(body[off:off + spec.FS_EXTENT.size])
            ext.append((e.lba, e.nlb))
        m = _Meta(name, i, h.size, ext, h.gen, kind=_kind_of(name))
        m.disk = m.state()
        return m

    def slot_lba(self, m: _Meta) -> int:
        return spec.FS.SUPER_LBA + 1 + m.slot

    def slot_entry(self, m: _Meta) -> tuple[int, bytes]:
        """The (lba, block) that records ``m`` as it is now (the slot's generation advances)."""
        if len(m.extents) > self.max_extents():
            raise FsError(f"{m.name}: {len(m.extents)} extents, a slot holds {self.max_extents()}")
        m.gen += 1
        return self.slot_lba(m), self._slot_bytes(m)

    def write_slot(self, m: _Meta) -> None:
        lba, block = self.slot_entry(m)
        self._write(lba, block, kind="meta")
        m.disk = m.state()

    # -- files -------------------------------------------------------------------------
    def create(self, name: str) -> _Meta:
        if len(name.encode()) > spec.FS.NAME_BYTES:
            raise FsError(f"file name longer than {spec.FS.NAME_BYTES} bytes: {name!r}")
        if not self.free_slots:
            raise FsError(f"every one of the {self.slots} file slots is in use")
        m = _Meta(name, self.free_slots.pop(0), kind=_kind_of(name))
        self.files[name] = m
        return m

    def delete(self, name: str) -> None:
        m = self.files.pop(name, None)
        if m is None:
            return
        if m.disk is not None:
            self._write(self.slot_lba(m), bytes(self.lba_size), kind="meta")
        if self.trim_freed:
            for lba, n in m.extents:
                self.dev.trim(lba, n)
        self.free_slots.append(m.slot)
        self.free_slots.sort()

    def _used(self) -> list[tuple[int, int]]:
        return sorted(e for m in self.files.values() for e in m.extents)

    def grow(self, m: _Meta, blocks: int) -> None:
        """Give ``m`` at least ``blocks`` blocks: extend its last extent in place when the
        blocks after it are free, else a new extent (first fit), ``alloc_blocks`` at a time."""
        need = blocks - m.blocks()
        if need <= 0:
            return
        want = max(need, self.alloc_blocks)
        used = self._used()
        if m.extents:
            lba, n = m.extents[-1]
            end = lba + n
            nxt = min([l for l, _ in used if l >= end], default=self.capacity)
            take = min(want, nxt - end)
            if take >= need:
                m.extents[-1] = (lba, n + take)
                return
        start = self.data_lba
        for l, n in used + [(self.capacity, 0)]:
            gap = l - start
            if gap >= need:
                m.extents.append((start, min(want, gap)))
                return
            start = max(start, l + n)
        raise FsError(f"no run of {need} free blocks for {m.name}")

    def shrink(self, m: _Meta, size: int) -> None:
        """Truncate ``m`` to ``size`` bytes; blocks past it go back to the free space (the slot is
        written at once, so they are free on the drive before another file takes them)."""
        m.size = size
        keep = -(-size // self.lba_size)
        if keep < m.blocks():
            out, left = [], keep
            for lba, n in m.extents:
                if left > 0:
                    out.append((lba, min(n, left)))
                left -= n
            m.extents = out
            self.write_slot(m)

    # -- blocks ------------------------------------------------------------------------------
    def _read(self, lba: int, nlb: int) -> bytes:
        out = b""
        while nlb:
            n = min(nlb, self.max_transfer)
            out += self.dev.read(lba, n)
            self.counts["read"] += n
            lba, nlb = lba + n, nlb - n
        return out

    def read_blocks(self, m: _Meta, first: int, count: int) -> list[bytes]:
        """Blocks first .. first+count-1 of ``m`` as the drive holds them (contiguous runs in one read)."""
        lbas = [m.lba_of(i) for i in range(first, first + count)]
        out, i = [], 0
        while i < len(lbas):
            j = i + 1
            while j < len(lbas) and lbas[j] == lbas[j - 1] + 1 and j - i < self.max_transfer:
                j += 1
            data = self._read(lbas[i], j - i)
            out += [data[k * self.lba_size:(k + 1) * self.lba_size] for k in range(j - i)]
            i = j
        return out

    def _write(self, lba: int, data: bytes, *, kind: str) -> None:
        self.dev.write(lba, data)
        self.counts[kind] += len(data) // self.lba_size
        self.counts["commands"] += 1

    def write_runs(self, pairs: list[tuple[int, bytes]], *, kind: str) -> None:
        """Plain writes of (lba, block) pairs, contiguous LBAs in one command."""
        pairs = sorted(pairs)
        i = 0
        while i < len(pairs):
            j = i + 1
            while j < len(pairs) and pairs[j][0] == pairs[j - 1][0] + 1 and j - i < self.max_transfer:
                j += 1
            self._write(pairs[i][0], b"".join(b for _, b in pairs[i:j]), kind=kind)
            i = j

    def fits_batch(self, n: int) -> bool:
        return n <= self.max_atomic or n <= self.max_pending

    def _write_group(self, pairs: list[tuple[int, bytes]], *, kind: str | dict) -> None:
        """``pairs`` all or nothing: one ATOMIC_WRITE group if it fits, else one transaction."""
        kinds = kind if isinstance(kind, dict) else {lba: kind for lba, _ in pairs}
        for lba, _ in pairs:
            self.counts[kinds[lba]] += 1
        self.counts["commands"] += 1
        if len(pairs) <= self.max_atomic:
            self.dev.atomic_write(pairs)
            self.counts["atomic_groups"] += 1
            return
        if len(pairs) > self.max_pending:
            raise FsError(f"{len(pairs)} blocks do not fit one transaction ({self.max_pending} pending entries)")
        tid = self.dev.new_tid()
        pairs = sorted(pairs)
        runs, i = [], 0
        while i < len(pairs):
            j = i + 1
            while j < len(pairs) and pairs[j][0] == pairs[j - 1][0] + 1 and j - i < self.max_transfer:
                j += 1
            runs.append((pairs[i][0], b"".join(b for _, b in pairs[i:j])))
            i = j
        try:
            for k, (lba, data) in enumerate(runs):
                self.dev.tx_write(tid, lba, data, final=k == len(runs) - 1)
                self.counts["commands"] += k > 0
        except BaseException:
            try:
                self.dev.tx_abort(tid)
            except Exception:
                pass
            raise
        self.counts["transactions"] += 1

    def write_group(self, pairs: list[tuple[int, bytes]], kinds: dict) -> None:
        self._write_group(pairs, kind=kinds)

    def flush(self) -> None:
        self.dev.flush()
        self.counts["flush"] += 1


def _kind_of(name: str) -> str:
    if name.endswith("-journal"):
        return "journal"
    if name.endswith("-wal"):
        return "wal"
    return "db"


class _OneProcessLocks:
    """The drive has one user at a time (the process that opened it): SQLite's file locks are no-ops."""

    def xLock(self, level):
        pass

    def xUnlock(self, level):
        pass

    def xCheckReservedLock(self):
        return False


class _MemFile(_OneProcessLocks):
    """Temporary files (sorts, statement journals): in host memory, as SQLite's own temp files
    would be with temp_store=memory."""

    def __init__(self):
        self.data = bytearray()

    def xRead(self, amount, offset):
        return bytes(self.data[offset:offset + amount])   # shorter past the end: SQLite's short read

    def xWrite(self, data, offset):
        if offset > len(self.data):
            self.data.extend(bytes(offset - len(self.data)))
        self.data[offset:offset + len(data)] = data

    def xTruncate(self, size):
        del self.data[size:]

    def xSync(self, flags):
        pass

    def xFileSize(self):
        return len(self.data)

    def xClose(self):
        self.data = bytearray()

    def xFileControl(self, op, ptr):
        return False

    def xSectorSize(self):
        return 512

    def xDeviceCharacteristics(self):
        return 0


class _DriveFile(_OneProcessLocks):
    """One open file of :class:`VFS`: the SQLite file methods over a :class:`FileStore` file."""

    def __init__(self, vfs: "VFS", meta: _Meta, delete_on_close: bool):
        self.vfs, self.store, self.m = vfs, vfs.store, meta
        self.bs = self.store.lba_size
        self.dirty: dict[int, bytes] = {}        # block index -> block (written at the next sync)
        self.clean = collections.OrderedDict()   # a small read cache: block index -> block
        self.batch: dict[int, bytes] | None = None
        self.batch_undo = None
        self.delete_on_close = delete_on_close
        self.closed = False

    # block access ------------------------------------------------------------------------
    def _disk_blocks(self) -> int:
        return -(-self.m.disk[0] // self.bs) if self.m.disk else 0

    def _block(self, i: int) -> bytes:
        if self.batch is not None and i in self.batch:
            return self.batch[i]
        if i in self.dirty:
            return self.dirty[i]
        if i in self.clean:
            self.clean.move_to_end(i)
            return self.clean[i]
        if i >= self._disk_blocks() or i >= self.m.blocks():
            return bytes(self.bs)
        b = self.store.read_blocks(self.m, i, 1)[0]
        self._cache(i, b)
        return b

    def _cache(self, i: int, b: bytes) -> None:
        self.clean[i] = b
        if len(self.clean) > self.vfs.read_cache_blocks:
            self.clean.popitem(last=False)

    def _prefetch(self, first: int, last: int) -> None:
        """Read the blocks first..last not held here with as few commands as possible."""
        lim = min(last + 1, self._disk_blocks(), self.m.blocks())
        i = first
        while i < lim:
            if i in self.dirty or i in self.clean or (self.batch is not None and i in self.batch):
                i += 1
                continue
            j = i
            while j < lim and j not in self.dirty and j not in self.clean and not (
                    self.batch is not None and j in self.batch):
                j += 1
            for k, b in enumerate(self.store.read_blocks(self.m, i, j - i)):
                self._cache(i + k, b)
            i = j

    # the SQLite file methods ------------------------------------------------------------------
    def xRead(self, amount, offset):
        size = self.m.size
        end = min(offset + amount, size)
        out = bytearray()
        if end > offset:
            first, last = offset // self.bs, (end - 1) // self.bs
            self._prefetch(first, last)
            for i in range(first, last + 1):
                b = self._block(i)
                lo = max(offset, i * self.bs) - i * self.bs
                hi = min(end, (i + 1) * self.bs) - i * self.bs
                out += b[lo:hi]
        return bytes(out)   # shorter past the end: APSW reports SQLite's short read, the rest zeros

    def xWrite(self, data, offset):
        data = bytes(data)
        end = offset + len(data)
        first, last = offset // self.bs, (end - 1) // self.bs
        if end > self.m.blocks() * self.bs:
            try:
                self.store.grow(self.m, last + 1)
            except FsError as e:
                raise apsw.FullError(str(e)) from None       # SQLITE_FULL: the drive has no room
        target = self.batch if self.batch is not None else self.dirty
        partial = [i for i in (first, last) if not (offset <= i * self.bs and end >= (i + 1) * self.bs)]
        if partial:
            self._prefetch(min(partial), max(partial))
        for i in range(first, last + 1):
            lo = max(offset, i * self.bs)
            hi = min(end, (i + 1) * self.bs)
            piece = data[lo - offset:hi - offset]
            if hi - lo == self.bs:
                blk = piece
            else:
                cur = bytearray(self._block(i))
                cur[lo - i * self.bs:hi - i * self.bs] = piece
                blk = bytes(cur)
            target[i] = blk
            self.clean.pop(i, None)
        if end > self.m.size:
            self.m.size = end

    def xTruncate(self, newsize):
        if self.batch is not None:
            raise apsw.IOError("truncate inside a batch atomic write")
        keep = -(-newsize // self.bs)
        for d in (self.dirty, self.clean):
            for i in [i for i in d if i >= keep]:
                del d[i]
        if newsize < self.m.size:
            self.store.shrink(self.m, newsize)
        else:
            self.m.size = newsize

    def _flush_dirty(self) -> None:
        if self.dirty:
            self.store.write_runs([(self.m.lba_of(i), b) for i, b in self.dirty.items()], kind=self.m.kind)
            for i, b in self.dirty.items():
                self._cache(i, b)
            self.dirty.clear()
        if self.m.disk != self.m.state() and self.m.name in self.store.files:
            self.store.write_slot(self.m)

    def xSync(self, flags):
        self._flush_dirty()
        self.store.flush()

    def xFileSize(self):
        return self.m.size

    def xClose(self):
        if self.closed:
            return
        self.closed = True
        if self.delete_on_close:
            self.store.delete(self.m.name)
        elif self.m.name in self.store.files:
            self._flush_dirty()

    def xSectorSize(self):
        return self.bs

    def xDeviceCharacteristics(self):
        caps = IOCAP["SAFE_APPEND"] | IOCAP["POWERSAFE_OVERWRITE"] | _iocap_atomic(self.bs)
        if self.vfs.batch_atomic and self.m.kind == "db":
            caps |= IOCAP["BATCH_ATOMIC"]
        return caps

    def xFileControl(self, op, ptr):
        if op == FCNTL["BEGIN_ATOMIC_WRITE"]:
            self._flush_dirty()
            self.batch = {}
            self.batch_undo = (self.m.size, list(self.m.extents))
            return True
        if op == FCNTL["COMMIT_ATOMIC_WRITE"]:
            return self._commit_batch()
        if op == FCNTL["ROLLBACK_ATOMIC_WRITE"]:
            self._drop_batch()
            return True
        return False

    def _drop_batch(self) -> None:
        if self.batch is not None:
            for i in self.batch:
                self.clean.pop(i, None)
            self.m.size, self.m.extents = self.batch_undo
        self.batch = self.batch_undo = None

    def _commit_batch(self) -> bool:
        batch = self.batch or {}
        pairs = [(self.m.lba_of(i), b) for i, b in batch.items()]
        kinds = {lba: self.m.kind for lba, _ in pairs}
        grew = self.m.disk != self.m.state()
        n = len(pairs) + grew
        st = self.store
        if not st.fits_batch(n) or n > self.vfs.max_batch:
            st.counts["fallbacks"] += 1
            self.vfs.last_fallback = n
            raise apsw.IOError(f"a batch of {n} blocks is more than the drive takes at once "
                               f"(atomic group {st.max_atomic}, pending bindings {st.max_pending})")
        if grew:
            lba, block = st.slot_entry(self.m)
            pairs.append((lba, block))
            kinds[lba] = "meta"
        if pairs:
            st.write_group(pairs, kinds)
            st.counts["batches"] += 1
        if grew:
            self.m.disk = self.m.state()
        for i, b in batch.items():
            self._cache(i, b)
        self.batch = self.batch_undo = None
        return True

    def excepthook(self, etype, evalue, etraceback):
        """A failed batch commit is SQLite's cue to use its journal: not worth a traceback."""
        if isinstance(evalue, apsw.IOError) and "more than the drive takes" in str(evalue):
            return
        self.vfs.errors.append(evalue)
        if isinstance(evalue, ConnectionError):      # the drive is gone (a power cut): one line is enough
            print(f"atomflash.sqlite: {self.m.name}: {evalue}", file=sys.stderr)
            return
        import traceback
        traceback.print_exception(etype, evalue, etraceback)


_names = itertools.count(1)


class VFS(apsw.VFS):
    """An APSW VFS over a drive.  ``batch_atomic=False``: the drive as a plain block device
    (no SQLITE_IOCAP_BATCH_ATOMIC).  ``max_batch``: fewer blocks than the drive's limits per
    batch commit (tests of the journal fallback).  ``store``: a :class:`FileStore` to share."""

    def __init__(self, dev=None, *, name: str | None = None, batch_atomic: bool = True, store: FileStore | None = None,
                 max_batch: int | None = None, read_cache_blocks: int = 4096, format: bool = False):
        self.store = store or FileStore(dev, format=format)
        self.batch_atomic = batch_atomic
        self.max_batch = max_batch if max_batch is not None else 1 << 62
        self.read_cache_blocks = read_cache_blocks
        self.errors: list[BaseException] = []
        self.last_fallback = 0
        self.vfs_name = name or f"atomflash-{next(_names)}"
        super().__init__(self.vfs_name, base="")

    def xOpen(self, name, flags):
        inflags = flags[0]
        fname = name if isinstance(name, str) or name is None else name.filename()
        if fname is None or not inflags & (OPEN_MAIN_DB | OPEN_MAIN_JOURNAL | OPEN_WAL):
            return _MemFile()
        m = self.store.files.get(fname)
        if m is None:
            if not inflags & OPEN_CREATE:
                raise apsw.CantOpenError(f"no file {fname!r} on the drive")
            m = self.store.create(fname)
        flags[1] = inflags
        return _DriveFile(self, m, bool(inflags & OPEN_DELETEONCLOSE))

    def xAccess(self, pathname, flags):
        m = self.store.files.get(pathname)
        return m is not None and (m.size > 0 or m.kind == "db")

    def xDelete(self, filename, syncdir):
        self.store.delete(filename)
        if syncdir:
            self.store.flush()

    def xFullPathname(self, name):
        return name


def pragmas(mode: str) -> list[str]:
    """The PRAGMAs that put a connection in one of the experiment's modes (``MODES``).  Every connection
    starts with exclusive locking: a database left in WAL mode is then opened without shared memory
    (APSW's Python files have none; WAL's index lives in the heap), and the other modes return to
    normal locking once their journal mode is set, so DELETE deletes its journal at every commit."""
    if mode == "wal":
        return ["PRAGMA locking_mode=EXCLUSIVE", "PRAGMA journal_mode=WAL", "PRAGMA synchronous=FULL"]
    if mode in ("rollback", "atomic"):
        return ["PRAGMA locking_mode=EXCLUSIVE", "PRAGMA journal_mode=DELETE", "PRAGMA locking_mode=NORMAL",
                "PRAGMA synchronous=FULL"]
    raise ValueError(f"mode {mode!r}: one of {', '.join(MODES)}")


def connect(vfs: VFS, dbname: str, mode: str = "atomic", *, cache_kib: int = 4096) -> apsw.Connection:
    """An APSW connection to ``dbname`` on the drive, in ``mode``; page size = the drive's block."""
    con = apsw.Connection(dbname, vfs=vfs.vfs_name)
    ps = pragmas(mode)
    con.execute(ps[0]).fetchall()
    con.execute(f"PRAGMA page_size={vfs.store.lba_size}")
    con.execute(f"PRAGMA cache_size=-{cache_kib}")
    con.execute("PRAGMA temp_store=MEMORY")
    for p in ps[1:]:
        con.execute(p).fetchall()
    return con


class SqlError(ValueError):
    """SQLite refused a statement (syntax, constraint, ...)."""


def run_sql(dev, dbname: str, sql: str, mode: str = "atomic") -> list[tuple]:
    """Run ``sql`` (one or more statements) on database ``dbname`` on the drive (the files are
    formatted on a drive that has none); returns the rows the statements produced.  The CLI's
    ``atomflash sql DB "SQL..."``."""
    vfs = VFS(dev, batch_atomic=mode != "rollback")
    try:
        con = connect(vfs, dbname, mode)
        try:
            return [tuple(r) for r in con.execute(sql)]
        except apsw.Error as e:
            raise SqlError(f"{type(e).__name__}: {e}") from None
        finally:
            con.close()
    finally:
        vfs.unregister()
