"""The SATA transport and ATA command layers (``rtl/sata/transport.py``, ``rtl/sata/command.py``) as a
device, spoken to in FISes on the link layer's streams.

``SataTB`` builds the transport and the command layer, SoC memory for the staging area
(``sim/harness/wbmem.py``, random wait states) and the FTL core's stand-in
(``sim/harness/core_stand_in.py``: the reference model behind the core's stream front end).  The bench
stands in for the link and the host: it sends Register H2D and Data FISes on ``rx`` (random gaps; the
device's ``rx.ready`` is its HOLD), takes what the device sends on ``tx`` (random backpressure), and
answers each frame on ``tx_status`` -- R_ERR now and then on a non-Data FIS, which the transport must
send again.  It plays the host's side of each protocol (PIO data-in, DMA in/out, non-data).

The oracle is ``AtaReference``: ATA as ACS defines it for the commands implemented, on its own
:class:`~atomflash.model.semantics.Model`, with the statuses through ``spec.ata_status_of``.  Each
command's status, error and data (every read) must agree with it, and so must both models' contents
after every command (a rejected command changes nothing).
"""

import random

import pytest
from amaranth import Module
from amaranth.lib import wiring
from amaranth.sim import Simulator

from atomflash import command, spec
from atomflash.model.semantics import Completion, Limits, Model
from atomflash.spec import ATA, AtaCommand as Ata, AtaError, AtaFeature, AtaStatus, SataFisType, Status
from rtl.sata.command import AtaCommandLayer
from rtl.sata.transport import SataTransport
from sim.harness.core_stand_in import FtlCoreStandIn
from sim.harness.wbmem import WishboneMemoryModel

STAGING = 0x4000_0000
FIS_BYTES = 4 * spec.SATA_TRANSPORT.DATA_FIS_MAX_DWORDS
OK = (int(AtaStatus.DRDY), 0)
ABRT = (int(AtaStatus.DRDY | AtaStatus.ERR), int(AtaError.ABRT))
IDNF = (int(AtaStatus.DRDY | AtaStatus.ERR), int(AtaError.IDNF))
UNC = (int(AtaStatus.DRDY | AtaStatus.ERR), int(AtaError.UNC))
ICRC = (int(AtaStatus.DRDY | AtaStatus.ERR), int(AtaError.ICRC | AtaError.ABRT))


class FlakyModel(Model):
    """A model whose reads of ``bad`` LBAs fail as the medium's uncorrectable errors do."""

    def __init__(self, *args, bad=(), **kw):
        super().__init__(*args, **kw)
        self.bad = set(bad)

    def read(self, lba, nlb):
        if nlb > 0 and self._in_range(lba, nlb) and self.bad & set(range(lba, lba + nlb)):
            return Completion(Status.MEDIA_ERROR)
        return super().read(lba, nlb)


class AtaReference:
    """ATA (ACS-3) for the commands the device implements, on ``model`` (whose LBAs are blocks of
    ``block`` bytes), with logical sectors of ``sector`` bytes (512e: a block holds several):
    (status, error, data in)."""

    def __init__(self, model, *, block, sector=None, volatile_cache=True, limits=command.StaticLimits()):
        self.model, self.block, self.volatile_cache, self.limits = model, block, volatile_cache, limits
        self.sector = sector or block
        self.per_block = block // self.sector
        self.max_sectors = limits.max_transfer * self.per_block - (self.per_block - 1)
        self.write_cache = volatile_cache
        self.pending = {}               # NCQ: tag -> the queued command (READ/WRITE DMA EXT, lba, count)
        self.ncq_error = False          # stopped until READ LOG EXT 10h
        self.log = self.ncq_log()

    @staticmethod
    def ncq_log(tag=0, nq=0, status=0, error=0, lba=0, count=0):
        """READ LOG EXT 10h's page (``spec.ATA_NCQ_ERROR_LOG``)."""
        rec = spec.ATA_NCQ_ERROR_LOG
        raw = rec.pack(tag=rec.compose("tag", tag=tag, nq=nq), status=status, error=error, count=count,
                       device=ATA.DEVICE_LBA if status else 0, **{f"lba{i}": lba >> 8 * i & 0xFF for i in range(6)})
        return raw[:511] + bytes([-sum(raw[:511]) & 0xFF])

    def _ncq_failure(self, **log):
        self.pending.clear()
        self.ncq_error = True
        self.log = self.ncq_log(**log)

    def queue(self, cmd, *, tag, lba, count):
        """A READ/WRITE FPDMA QUEUED arriving: (status, error) of its acknowledgement (a Register D2H)."""
        abrt = spec.ata_status_of(Status.INVALID_FIELD)
        if self.ncq_error:
            return abrt
        if tag in self.pending:                                        # every queued command aborted
            self._ncq_failure(tag=tag, status=abrt[0], error=abrt[1], lba=lba, count=count)
            return abrt
        self.pending[tag] = (Ata.WRITE_DMA_EXT if cmd == Ata.WRITE_FPDMA_QUEUED else Ata.READ_DMA_EXT, lba, count)
        return OK

    def complete(self, tag, data=b""):
        """Queued command ``tag`` run to its end (in any order the device chooses): (status, error, data in)."""
        cmd, lba, count = self.pending.pop(tag)
        got = self._execute(cmd, lba=lba, count=count, data=data)
        if got[:2] != OK:
            self._ncq_failure(tag=tag, status=got[0], error=got[1], lba=lba, count=count)
        return got

    def run(self, cmd, *, features=0, lba=0, count=0, data=b""):
        model, per, S = self.model, self.per_block, self.sector
        abrt = (*spec.ata_status_of(Status.INVALID_FIELD), b"")
        log_page = cmd == Ata.READ_LOG_EXT and lba & 0xFF == ATA.LOG_NCQ_ERROR
        if self.ncq_error and not log_page:
            return abrt
        if self.pending and not self.ncq_error:                        # a non-queued command among queued ones
            self._ncq_failure(nq=1, status=abrt[0], error=abrt[1])
            return abrt
        if cmd == Ata.READ_LOG_EXT:
            if not log_page or lba >> 8 or count != 1:
                return abrt
            self.ncq_error = False
            self.pending.clear()
            return (*OK, self.log)
        return self._execute(cmd, features=features, lba=lba, count=count, data=data)

    def _execute(self, cmd, *, features=0, lba=0, count=0, data=b""):
        model, per, S = self.model, self.per_block, self.sector
        capacity = self.model.limits.capacity * per
        n = count or 65536

        def status(s, read=False):
            return (*spec.ata_status_of(s, read=read), b"")
        if cmd == Ata.IDENTIFY_DEVICE:
            return (*OK, spec.ata_identify(capacity=capacity, block_bytes=self.block, sector_bytes=self.sector,
                                           volatile_cache=self.volatile_cache, write_cache=self.write_cache))
        if cmd in (Ata.READ_DMA_EXT, Ata.WRITE_DMA_EXT):
            if n > self.max_sectors:
                return status(Status.TRANSFER_TOO_LARGE)
            if lba + n > capacity:
                return status(Status.LBA_OUT_OF_RANGE)
            first, end = lba // per, -(-(lba + n) // per)           # the blocks covering the sectors
            head = (lba - first * per) * S
            if cmd == Ata.READ_DMA_EXT:
                r = model.read(first, end - first)
                return (*spec.ata_status_of(r.status, read=True), r.data[head:head + n * S] if r.data else b"")
            if lba % per or (lba + n) % per:                         # read-modify-write
                r = model.read(first, end - first)
                if r.status != Status.SUCCESS:
                    return status(r.status)
                data = r.data[:head] + data + r.data[head + n * S:]
            return status(model.write(first, data, fua=not self.write_cache).status)
        if cmd in (Ata.FLUSH_CACHE, Ata.FLUSH_CACHE_EXT):
            return status(model.flush().status)
        if cmd == Ata.SET_FEATURES:
            sub = features & 0xFF
            if sub == AtaFeature.ENABLE_WRITE_CACHE and self.volatile_cache:
                self.write_cache = True
            elif sub == AtaFeature.DISABLE_WRITE_CACHE:
                model.flush()
                self.write_cache = False
            elif sub != AtaFeature.SET_TRANSFER_MODE:
                return status(Status.INVALID_FIELD)
            return status(Status.SUCCESS)
        if cmd == Ata.DATA_SET_MANAGEMENT:
            if not features & 1 or n > ATA.DSM_MAX_BLOCKS:
                return status(Status.INVALID_FIELD)
            entries = [spec.ATA_DSM_RANGE.decompose("entry", int.from_bytes(data[i:i + 8], "little"))
                       for i in range(0, len(data), 8)]
            ranges = [(e.lba, e.length) for e in entries if e.length]
            if any(s + k > capacity for s, k in ranges):
                return status(Status.LBA_OUT_OF_RANGE)
            for s, k in ranges:                                       # the whole blocks only
                first, end = -(-s // per), (s + k) // per
                if end > first:
                    model.trim(first, end - first, fua=not self.write_cache)
            return status(Status.SUCCESS)
        return status(Status.INVALID_OPCODE)


def h2d(cmd, *, features=0, lba=0, count=0, c=1, control=0, device=ATA.DEVICE_LBA):
    """A Register H2D FIS as dwords."""
    raw = spec.SATA_FIS_REG_H2D.pack(
        type=SataFisType.REG_H2D, flags=spec.SATA_FIS_REG_H2D.compose("flags", c=c), command=cmd,
        features=features & 0xFF, features_exp=features >> 8, count=count, device=device, control=control,
        **{f"lba{i}": lba >> 8 * i & 0xFF for i in range(6)})
    return [int.from_bytes(raw[i:i + 4], "little") for i in range(0, len(raw), 4)]


def dwords(raw):
    return [int.from_bytes(raw[i:i + 4], "little") for i in range(0, len(raw), 4)]


def unpack(record, words):
    return record.unpack(b"".join(w.to_bytes(4, "little") for w in words[:record.size // 4]))


class SataTB:
    def __init__(self, seed, *, block=512, sector=None, capacity=200, volatile_cache=True, r_err=0.15, gap=0.3,
                 backpressure=0.3, bad=(), largest=8):
        """``capacity`` and ``bad`` in blocks; ``sector``: the logical sector (default the block)."""
        self.rng = random.Random(seed)
        self.sector = sector or block
        self.sectors = capacity * (block // self.sector)
        self.largest = largest           # random transfers' sectors at most
        self.written = []                # LBAs random writes started at
        self.block, self.capacity, self.r_err, self.gap, self.backpressure = block, capacity, r_err, gap, backpressure
        m = Module()
        m.submodules.transport = self.transport = t = SataTransport()
        m.submodules.layer = self.layer = a = AtaCommandLayer(block_bytes=block, sector_bytes=sector,
                                                                 volatile_cache=volatile_cache)
        wiring.connect(m, t.command, a.command)
        wiring.connect(m, t.data_in, a.data_in)
        wiring.connect(m, a.send, t.send)
        wiring.connect(m, a.data_out, t.data_out)
        wiring.connect(m, t.sent, a.sent)
        m.d.comb += t.data_wanted.eq(a.data_wanted)
        self.m = m
        self.soc = WishboneMemoryModel(a.mem, a.staging_bytes, seed=seed, base=STAGING)
        limits = Limits(capacity=capacity, lba_size=block)
        self.core_model = FlakyModel(limits, cache=volatile_cache, bad=bad)
        self.core = FtlCoreStandIn(a.core_cmd, a.core_cpl, self.core_model, self.soc, ids=1, seed=seed)
        self.ref = AtaReference(FlakyModel(limits, cache=volatile_cache, bad=bad), block=block, sector=sector,
                                volatile_cache=volatile_cache)
        self.frames = []                 # what the device sent and the host took (R_OK)
        self.r_errs = 0                  # R_ERRs the bench answered
        self.fail_next_data = False      # answer the next Data FIS with R_ERR
        self.pending_acks = []           # queued commands sent, not yet acknowledged
        self.data_past_command = 0       # Data FISes sent while a queued command waited for its acknowledgement

    # -- the link --------------------------------------------------------------------------------------
    async def link_tx(self, ctx):
        """Takes the device's frames with random backpressure; answers each on tx_status."""
        t, rng = self.transport, self.rng
        words, refused_in_a_row = [], 0
        while True:
            ctx.set(t.tx.ready, int(rng.random() > self.backpressure))
            _, _, valid, ready, data, last = await ctx.tick().sample(
                t.tx.valid, t.tx.ready, t.tx.payload.data, t.tx.payload.last)
            if not (valid and ready):
                continue
            words.append(data)
            if not last:
                continue
            ctx.set(t.tx.ready, 0)
            kind = words[0] & 0xFF
            if kind == SataFisType.DATA:
                ok = not self.fail_next_data
                self.fail_next_data = False
            else:               # R_ERR as often as asked, never more often in a row than the transport retries
                ok = refused_in_a_row >= t.retries or rng.random() >= self.r_err
            refused_in_a_row = 0 if ok else refused_in_a_row + 1
            if ok:
                self.frames.append(words)
            else:
                self.r_errs += 1
            words = []
            ctx.set(t.tx_status.payload.ok, int(ok))
            ctx.set(t.tx_status.valid, 1)
            while True:
                _, _, ready = await ctx.tick().sample(t.tx_status.ready)
                if ready:
                    break
            ctx.set(t.tx_status.valid, 0)

    async def send_fis(self, ctx, words, *, error=False):
        """One frame on rx, with random gaps; ``error``: the link found its CRC bad."""
        rx, rng = self.transport.rx, self.rng
        for i, w in enumerate(words):
            while rng.random() < self.gap:
                ctx.set(rx.valid, 0)
                await ctx.tick()
            last = i == len(words) - 1
            ctx.set(rx.payload, {"data": w, "last": int(last), "error": int(error and last)})
            ctx.set(rx.valid, 1)
            for _ in range(10_000):
                _, _, ready = await ctx.tick().sample(rx.ready)
                if ready:
                    break
            else:
                raise AssertionError("the device held the link for ever")
        ctx.set(rx.valid, 0)

    async def next_frame(self, ctx, cycles=100_000):
        for _ in range(cycles):
            if self.frames:
                return self.frames.pop(0)
            await ctx.tick()
        raise AssertionError("the device sent nothing")

    # -- the host ------------------------------------------------------------------------------------
    async def ata(self, ctx, cmd, *, features=0, lba=0, count=0, data=b"", corrupt_data=False, short_data=False):
        """Runs one command as a host does: (status, error, data in)."""
        await self.send_fis(ctx, h2d(cmd, features=features, lba=lba, count=count))
        got, offset = b"", 0
        pio = None
        while True:
            frame = await self.next_frame(ctx)
            kind = frame[0] & 0xFF
            if kind == SataFisType.REG_D2H:
                d2h = unpack(spec.SATA_FIS_REG_D2H, frame)
                assert len(frame) == 5 and spec.SATA_FIS_REG_D2H.decompose("flags", d2h.flags).i, "D2H without I"
                assert pio is None, "a D2H after PIO data-in"
                return d2h.status, d2h.error, got
            if kind == SataFisType.DMA_ACTIVATE:
                assert len(frame) == 1 and data[offset:], "a DMA Activate with nothing left to send"
                piece = data[offset:offset + FIS_BYTES]
                offset += len(piece)
                words = dwords(piece)
                if short_data:
                    words = words[:-1]
                await self.send_fis(ctx, [int(SataFisType.DATA)] + words, error=corrupt_data)
            elif kind == SataFisType.PIO_SETUP:
                pio = unpack(spec.SATA_FIS_PIO_SETUP, frame)
                flags = spec.SATA_FIS_PIO_SETUP.decompose("flags", pio.flags)
                assert len(frame) == 5 and flags.d and flags.i and pio.status & AtaStatus.DRQ
                assert pio.transfer_count == spec.ATA_IDENTIFY.size
            elif kind == SataFisType.DATA:
                assert len(frame) - 1 <= FIS_BYTES // 4, "a Data FIS above 8 KiB"
                got += b"".join(w.to_bytes(4, "little") for w in frame[1:])
                if pio is not None:
                    assert len(got) == pio.transfer_count
                    return pio.e_status, pio.error, got
            else:
                raise AssertionError(f"the device sent a FIS of type {kind:#x}")

    async def check(self, ctx, cmd, label="", **kw):
        """Runs one command on the device and the reference; they must agree, and so must the models."""
        got = await self.ata(ctx, cmd, **kw)
        ref = {k: v for k, v in kw.items() if k in ("features", "lba", "count", "data")}
        want = self.ref.run(cmd, **ref)
        assert got[:2] == want[:2], f"{label} {cmd:#x} {ref.get('lba')}+{ref.get('count')}: status/error " \
                                    f"{got[0]:#x}/{got[1]:#x}, expected {want[0]:#x}/{want[1]:#x}"
        assert got[2] == want[2], f"{label} {cmd:#x}: the data in differs"
        assert self.core_model.contents() == self.ref.model.contents(), f"{label} {cmd:#x}: the models differ"
        return got

    # -- NCQ, as a host drives it ----------------------------------------------------------------------
    async def ncq(self, ctx, batch, *, wait_for_ack=True):
        """Queues ``batch`` (dicts: cmd, tag, lba, count, data, fua) one after another, each after the previous
        one's acknowledgement (or, ``wait_for_ack`` False, all at once as a host ignoring BSY), moving each
        command's data when the device asks; each completion goes through the reference.  Returns the
        acknowledgements [(status, error)], the completion order, and the first SDB with ERR ((status, error)
        and the SActive bits) if any."""
        to_send, acks, completed, failed = list(batch), [], [], None
        by_tag = {c["tag"]: c for c in batch if "tag" in c}
        outstanding, current, got, offset = set(), None, {}, {}
        queued_kinds = (Ata.READ_FPDMA_QUEUED, Ata.WRITE_FPDMA_QUEUED)
        if not wait_for_ack:            # the link held: every command is in before the first acknowledgement
            backpressure, self.backpressure = self.backpressure, 1.0
            for c in to_send:
                if c["cmd"] in queued_kinds:
                    await self.send_fis(ctx, h2d(c["cmd"], features=c["count"], lba=c["lba"], count=c["tag"] << 3))
                else:
                    await self.send_fis(ctx, h2d(c["cmd"], lba=c["lba"], count=c["count"]))
                self.pending_acks.append(c)
            to_send.clear()
            self.backpressure = backpressure
        while to_send or self.pending_acks or outstanding:
            if to_send and not self.pending_acks and failed is None:
                c = to_send.pop(0)
                await self.send_fis(ctx, h2d(c["cmd"], features=c["count"], lba=c["lba"], count=c["tag"] << 3,
                                             device=ATA.DEVICE_LBA | (ATA.DEVICE_FUA if c.get("fua") else 0)))
                self.pending_acks.append(c)
                continue
            if failed is not None and not self.pending_acks:
                break
            frame = await self.next_frame(ctx)
            kind = frame[0] & 0xFF
            if kind == SataFisType.REG_D2H:
                d2h = unpack(spec.SATA_FIS_REG_D2H, frame)
                c = self.pending_acks.pop(0)
                if c["cmd"] in queued_kinds:
                    want = self.ref.queue(c["cmd"], tag=c["tag"], lba=c["lba"], count=c["count"])
                else:
                    want = self.ref.run(c["cmd"], lba=c["lba"], count=c["count"])[:2]
                assert (d2h.status, d2h.error) == want, f"tag {c['tag']}: acknowledged {d2h.status:#x}/{d2h.error:#x}"
                assert not d2h.status & AtaStatus.BSY
                acks.append((d2h.status, d2h.error))
                if want == OK:
                    outstanding.add(c["tag"])
                else:
                    outstanding.clear()                 # all aborted
            elif kind == SataFisType.DMA_SETUP:
                fis = unpack(spec.SATA_FIS_DMA_SETUP, frame)
                flags = spec.SATA_FIS_DMA_SETUP.decompose("flags", fis.flags)
                current = fis.buffer_id_lo
                c = by_tag[current]
                assert current in outstanding and current not in got, f"DMA Setup for tag {current}"
                assert flags.d == (c["cmd"] == Ata.READ_FPDMA_QUEUED) and not flags.a
                assert fis.transfer_count == c["count"] * self.sector
                got[current], offset[current] = b"", 0
            elif kind == SataFisType.DMA_ACTIVATE:
                c = by_tag[current]
                assert c["cmd"] == Ata.WRITE_FPDMA_QUEUED and c["data"][offset[current]:]
                piece = c["data"][offset[current]:offset[current] + FIS_BYTES]
                offset[current] += len(piece)
                self.data_past_command += len(self.pending_acks) > 0
                await self.send_fis(ctx, [int(SataFisType.DATA)] + dwords(piece))
            elif kind == SataFisType.DATA:
                assert by_tag[current]["cmd"] == Ata.READ_FPDMA_QUEUED
                got[current] += b"".join(w.to_bytes(4, "little") for w in frame[1:])
            elif kind == SataFisType.SET_DEVICE_BITS:
                sdb = unpack(spec.SATA_FIS_SET_DEVICE_BITS, frame)
                status = sdb.status
                assert spec.SATA_FIS_SET_DEVICE_BITS.decompose("flags", sdb.flags).i
                for t in range(32):
                    if sdb.sactive >> t & 1:
                        assert t in outstanding, f"tag {t} completed twice or never queued"
                        outstanding.discard(t)
                        completed.append(t)
                        c = by_tag[t]
                        want = self.ref.complete(t, c.get("data", b""))
                        assert want[:2] == OK, f"tag {t} completed, the reference failed it {want[:2]}"
                        assert got.pop(t, b"") == want[2], f"tag {t}: the data in differs"
                        assert self.core_model.contents() == self.ref.model.contents(), f"tag {t}: the models differ"
                if status & AtaStatus.ERR:              # stopped: READ LOG EXT says which tag failed
                    failed = ((status, sdb.error), sdb.sactive)
                    outstanding.clear()
            else:
                raise AssertionError(f"the device sent a FIS of type {kind:#x}")
        return acks, completed, failed

    def simulator(self, bench):
        sim = Simulator(self.m)
        sim.add_clock(1e-8)
        sim.add_process(self.soc.process)
        sim.add_process(self.core.process)
        sim.add_process(self.link_tx)

        async def setup_and_run(ctx):
            ctx.set(self.layer.staging_base, STAGING)
            ctx.set(self.layer.capacity, self.capacity)
            ctx.set(self.transport.link_up, 1)
            await ctx.tick()
            await bench(ctx)
        sim.add_testbench(setup_and_run)
        return sim

    # -- random commands ---------------------------------------------------------------------------------
    def random_command(self):
        r, B, cap = self.rng, self.sector, self.sectors
        maxn = self.layer.max_sectors
        cmd = r.choice([Ata.WRITE_DMA_EXT] * 5 + [Ata.READ_DMA_EXT] * 5 + [Ata.DATA_SET_MANAGEMENT] * 2 +
                       [Ata.FLUSH_CACHE_EXT, Ata.FLUSH_CACHE, Ata.SET_FEATURES, 0x00, 0xC8, 0x24])
        kw = {}
        if cmd in (Ata.WRITE_DMA_EXT, Ata.READ_DMA_EXT):
            n = r.choice([1, 1, 2, 3, r.randint(1, self.largest), maxn + 1, 0])   # big ones: the multi-FIS test
            lba = r.randrange(cap - min(n or 1, cap - 1)) if r.random() < 0.8 else cap - r.randint(0, 3)
            if cmd == Ata.READ_DMA_EXT and self.written and r.random() < 0.7:
                lba = min(r.choice(self.written), cap - (n or 1))            # mostly where data was written
            kw = {"lba": lba, "count": n}
            if cmd == Ata.WRITE_DMA_EXT and 0 < n <= maxn and lba + n <= cap:
                kw["data"] = r.randbytes(n * B)
                self.written.append(lba)
        elif cmd == Ata.DATA_SET_MANAGEMENT:
            lengths = [0, 1, 2, 5] + ([r.randint(1, 3 * self.block // B)] * 2 if B < self.block else [])
            ranges = [(r.randrange(cap), r.choice(lengths)) for _ in range(r.randint(1, 4))]
            if r.random() < 0.1:
                ranges.append((cap - 1, 2))                     # runs off the end
            body = b"".join(spec.ATA_DSM_RANGE.pack(entry=spec.ATA_DSM_RANGE.compose("entry", lba=s, length=k))
                            for s, k in ranges).ljust(ATA.DSM_BLOCK_BYTES, b"\0")
            trim = r.random() < 0.9
            kw = {"features": int(trim), "count": 1, "data": body if trim else b""}
        elif cmd == Ata.SET_FEATURES:
            kw = {"features": r.choice([AtaFeature.ENABLE_WRITE_CACHE, AtaFeature.DISABLE_WRITE_CACHE,
                                        AtaFeature.SET_TRANSFER_MODE, 0x55, 0xAA])}
        return cmd, kw


def run(tb, bench):
    tb.simulator(bench).run()


@pytest.mark.parametrize("seed,block,sector,count", [(1, 512, None, 50), (2, 4096, None, 15),
                                                     (12, 2048, 512, 60), (13, 4096, 512, 40),
                                                     pytest.param(3, 512, None, 400, marks=pytest.mark.slow),
                                                     pytest.param(14, 2048, 512, 400, marks=pytest.mark.slow)])
def test_random_commands_as_the_reference_answers_them(seed, block, sector, count):
    """Random commands (reads checked against the reference), R_ERR on non-Data FISes, random backpressure;
    with 512-byte sectors on larger blocks, unaligned reads, writes (read-modify-write) and trims."""
    capacity, largest = {(512, None): (200, 8), (4096, None): (96, 2), (2048, 512): (48, 12),
                         (4096, 512): (24, 20)}[block, sector]
    tb = SataTB(seed, block=block, sector=sector, capacity=capacity, largest=largest)
    seen = {}
    data_read = 0

    async def bench(ctx):
        for i in range(count):
            cmd, kw = tb.random_command()
            nonlocal data_read
            st, er, got = await tb.check(ctx, cmd, label=f"command {i}", **kw)
            seen[(cmd, st, er)] = seen.get((cmd, st, er), 0) + 1
            data_read += len({got[k:k + 4] for k in range(0, len(got), 4)}) > 1     # not all one word
        assert ctx.get(tb.transport.malformed) == 0 and ctx.get(tb.transport.crc_errors) == 0

    run(tb, bench)
    outcomes = {(st, er) for _, st, er in seen}
    assert OK in outcomes and ABRT in outcomes and (IDNF in outcomes or count < 40), outcomes
    assert tb.r_errs, "no R_ERR to retry"
    assert data_read >= count // 20, f"only {data_read} reads returned written data"
    assert tb.core.seen["WRITE"] and tb.core.seen["READ"] and (tb.core.seen["DEALLOCATE"] or count < 40)


def test_identify_device_words():
    tb = SataTB(4, block=4096, capacity=0x1234_5678_9, r_err=0.3)      # above 28 bits

    async def bench(ctx):
        for cache in (True, False):
            if not cache:
                assert (await tb.ata(ctx, Ata.SET_FEATURES, features=AtaFeature.DISABLE_WRITE_CACHE))[:2] == OK
            st, er, raw = await tb.ata(ctx, Ata.IDENTIFY_DEVICE)
            assert (st, er) == OK and len(raw) == 512
            w = [int.from_bytes(raw[2 * i:2 * i + 2], "little") for i in range(256)]
            assert w[60] | w[61] << 16 == 0x0FFF_FFFF, "28-bit capacity saturates"
            assert w[100] | w[101] << 16 | w[102] << 32 | w[103] << 48 == tb.capacity
            assert w[106] == 0x4000 | 1 << 12, "logical sector longer than 256 words, one per physical"
            assert w[117] | w[118] << 16 == 4096 // 2
            assert w[83] & 1 << 10 and w[86] & 1 << 10, "48-bit address feature set"
            assert w[83] & 1 << 13 and w[86] & 1 << 13, "FLUSH CACHE EXT"
            assert w[82] & 1 << 5, "write cache supported"
            assert bool(w[85] & 1 << 5) == cache, "write cache enabled"
            assert w[169] & 1, "TRIM supported"
            assert w[105] == ATA.DSM_MAX_BLOCKS
            assert w[49] & 1 << 9 and w[49] & 1 << 8, "LBA and DMA"
            assert w[75] == 31 and w[76] & 1 << 8 and w[76] & 1 << 1, "NCQ, 32 tags; Gen1"
            model = b"".join(x.to_bytes(2, "big") for x in w[27:47]).decode("ascii")
            assert model.rstrip() == spec.ATA_MODEL_NUMBER and len(model) == 40
            assert b"".join(x.to_bytes(2, "big") for x in w[23:27]).decode().rstrip() == spec.ATA_FIRMWARE_REVISION
            assert b"".join(x.to_bytes(2, "big") for x in w[10:20]).decode().rstrip() == spec.ATA_SERIAL_NUMBER
            assert w[255] & 0xFF == 0xA5 and sum(raw) % 256 == 0, "the checksum"
            assert raw == tb.ref.run(Ata.IDENTIFY_DEVICE)[2] if cache else True

    run(tb, bench)
    assert tb.r_errs, "no PIO Setup or Data FIS refused"


def test_identify_reports_512_byte_sectors_without_words_117_118():
    tb = SataTB(5, block=512, capacity=1000, volatile_cache=False)

    async def bench(ctx):
        st, er, raw = await tb.ata(ctx, Ata.IDENTIFY_DEVICE)
        w = [int.from_bytes(raw[2 * i:2 * i + 2], "little") for i in range(256)]
        assert (st, er) == OK and w[60] | w[61] << 16 == 1000 and w[106] == 0x4000 and w[117] == w[118] == 0
        assert not w[82] & 1 << 5 and not w[85] & 1 << 5, "no write cache"
        assert sum(raw) % 256 == 0
        assert (await tb.ata(ctx, Ata.SET_FEATURES, features=AtaFeature.ENABLE_WRITE_CACHE))[:2] == ABRT

    run(tb, bench)


def test_each_error_changes_nothing():
    """ABRT for an unknown command and each bad field, IDNF beyond the capacity, UNC for a bad block:
    nothing written, nothing trimmed."""
    tb = SataTB(6, capacity=64, bad={40})
    B = tb.block
    maxn = command.StaticLimits().max_transfer

    async def bench(ctx):
        data = tb.rng.randbytes(8 * B)
        assert (await tb.check(ctx, Ata.WRITE_DMA_EXT, lba=0, count=8, data=data))[:2] == OK
        before = tb.core_model.contents()
        dsm = spec.ATA_DSM_RANGE.pack(entry=spec.ATA_DSM_RANGE.compose("entry", lba=0, length=4))
        far = spec.ATA_DSM_RANGE.pack(entry=spec.ATA_DSM_RANGE.compose("entry", lba=63, length=2))
        cases = [
            (ABRT, 0x00, {}), (ABRT, 0xC8, {"lba": 0, "count": 1}),               # NOP, READ DMA (28-bit)
            (ABRT, Ata.SET_FEATURES, {"features": 0x55}),
            (ABRT, Ata.READ_DMA_EXT, {"lba": 0, "count": maxn + 1}),
            (ABRT, Ata.READ_DMA_EXT, {"lba": 0, "count": 0}),                    # 65536 sectors
            (ABRT, Ata.WRITE_DMA_EXT, {"lba": 0, "count": maxn + 1}),
            (ABRT, Ata.DATA_SET_MANAGEMENT, {"features": 0, "count": 1}),         # no TRIM bit
            (ABRT, Ata.DATA_SET_MANAGEMENT, {"features": 1, "count": ATA.DSM_MAX_BLOCKS + 1}),
            (IDNF, Ata.READ_DMA_EXT, {"lba": 60, "count": 5}),
            (IDNF, Ata.READ_DMA_EXT, {"lba": 1 << 40, "count": 1}),
            (IDNF, Ata.WRITE_DMA_EXT, {"lba": 63, "count": 2}),
            (IDNF, Ata.DATA_SET_MANAGEMENT, {"features": 1, "count": 1, "data": (dsm + far).ljust(512, b"\0")}),
            (UNC, Ata.READ_DMA_EXT, {"lba": 38, "count": 4}),
        ]
        for want, cmd, kw in cases:
            got = await tb.check(ctx, cmd, **kw)
            assert got[:2] == want and not got[2], f"{cmd:#x} {kw}: {got[:2]}, expected {want}"
            assert tb.core_model.contents() == before, f"{cmd:#x} {kw} changed something"
        assert (await tb.check(ctx, Ata.READ_DMA_EXT, lba=0, count=8))[2] == data

    run(tb, bench)
    assert tb.core.seen["READ"] == 2 and tb.core.seen["WRITE"] == 1 and not tb.core.seen["DEALLOCATE"]


def test_trim_then_read_back_zeros():
    tb = SataTB(7, capacity=64)
    B = tb.block

    async def bench(ctx):
        data = tb.rng.randbytes(16 * B)
        assert (await tb.check(ctx, Ata.WRITE_DMA_EXT, lba=8, count=16, data=data))[:2] == OK
        ranges = [(10, 2), (0, 0), (20, 3)]
        body = b"".join(spec.ATA_DSM_RANGE.pack(entry=spec.ATA_DSM_RANGE.compose("entry", lba=s, length=k))
                        for s, k in ranges).ljust(512, b"\0")
        assert (await tb.check(ctx, Ata.DATA_SET_MANAGEMENT, features=1, count=1, data=body))[:2] == OK
        _, _, got = await tb.check(ctx, Ata.READ_DMA_EXT, lba=8, count=16)
        want = bytearray(data)
        for s, k in ranges:
            want[(s - 8) * B:(s - 8 + k) * B] = bytes(k * B)
        assert got == bytes(want), "trimmed blocks read zeros"

    run(tb, bench)
    assert tb.core.seen["DEALLOCATE"] == 2


def test_a_write_of_more_than_one_data_fis_and_the_write_cache():
    """A write of 20 sectors of 512 bytes (an 8 KiB Data FIS and a 2 KiB one, each after its DMA Activate; a
    read likewise); FUA while the cache is off."""
    tb = SataTB(8, capacity=256)
    fua = []
    run_core = tb.core.run

    def spy(raw, queue=0):
        c = spec.CMD.unpack(raw.to_bytes(spec.CMD.size, "little"))
        fua.append((c.opcode, spec.CMD.decompose("flags", c.flags).fua))
        return run_core(raw, queue)
    tb.core.run = spy

    async def bench(ctx):
        data = tb.rng.randbytes(20 * tb.block)
        assert (await tb.check(ctx, Ata.WRITE_DMA_EXT, lba=100, count=20, data=data))[:2] == OK
        assert (await tb.check(ctx, Ata.SET_FEATURES, features=AtaFeature.DISABLE_WRITE_CACHE))[:2] == OK
        assert not ctx.get(tb.layer.write_cache)
        assert (await tb.check(ctx, Ata.WRITE_DMA_EXT, lba=0, count=1, data=data[:512]))[:2] == OK
        assert (await tb.check(ctx, Ata.SET_FEATURES, features=AtaFeature.ENABLE_WRITE_CACHE))[:2] == OK
        assert (await tb.check(ctx, Ata.FLUSH_CACHE_EXT))[:2] == OK
        assert (await tb.check(ctx, Ata.READ_DMA_EXT, lba=100, count=20))[2] == data

    run(tb, bench)
    W, F = int(spec.Opcode.WRITE), int(spec.Opcode.FLUSH)
    assert fua[:3] == [(W, 0), (F, 0), (W, 1)], fua


def test_link_errors_on_data_fail_the_command_with_icrc():
    """A Data FIS in with a bad CRC or short, or one of ours answered R_ERR: ICRC|ABRT, nothing written."""
    tb = SataTB(9, capacity=64, r_err=0)
    B = tb.block

    async def bench(ctx):
        data = tb.rng.randbytes(4 * B)
        assert (await tb.ata(ctx, Ata.WRITE_DMA_EXT, lba=0, count=4, data=data, corrupt_data=True))[:2] == ICRC
        assert (await tb.ata(ctx, Ata.WRITE_DMA_EXT, lba=0, count=4, data=data, short_data=True))[:2] == ICRC
        assert tb.core_model.contents() == {} and not tb.core.seen["WRITE"]
        assert ctx.get(tb.transport.crc_errors) == 1
        assert (await tb.check(ctx, Ata.WRITE_DMA_EXT, lba=0, count=4, data=data))[:2] == OK
        tb.fail_next_data = True
        assert (await tb.ata(ctx, Ata.READ_DMA_EXT, lba=0, count=4))[:2] == ICRC
        assert (await tb.check(ctx, Ata.READ_DMA_EXT, lba=0, count=4))[2] == data

    run(tb, bench)


def test_malformed_fises_are_dropped_and_counted():
    tb = SataTB(10, capacity=64)
    B = tb.block

    async def bench(ctx):
        t = tb.transport
        good = h2d(Ata.WRITE_DMA_EXT, lba=0, count=1)
        await tb.send_fis(ctx, [0x99, 1, 2])                                # unknown type
        await tb.send_fis(ctx, good[:4])                                    # Register H2D too short
        await tb.send_fis(ctx, good + [0])                                  # ... too long
        await tb.send_fis(ctx, [int(SataFisType.DATA)] + dwords(bytes(B)))  # Data nobody asked for
        await tb.send_fis(ctx, [int(SataFisType.DATA)])                     # Data with no data
        await tb.send_fis(ctx, h2d(Ata.READ_DMA_EXT, lba=0, count=1)[:1])   # one dword
        await tb.send_fis(ctx, [int(spec.SataFisType.REG_D2H)] + [0] * 4)   # the device's own kind
        await tb.send_fis(ctx, good, error=True)                            # bad CRC
        await tb.send_fis(ctx, h2d(Ata.SET_FEATURES, features=AtaFeature.DISABLE_WRITE_CACHE, c=0))  # control
        await ctx.tick().repeat(200)
        assert ctx.get(t.malformed) == 7 and ctx.get(t.crc_errors) == 1
        assert not tb.frames and ctx.get(tb.layer.idle) and ctx.get(tb.layer.write_cache)
        assert tb.core_model.contents() == {} and not tb.core.seen
        data = tb.rng.randbytes(B)
        assert (await tb.check(ctx, Ata.WRITE_DMA_EXT, lba=3, count=1, data=data))[:2] == OK
        assert (await tb.check(ctx, Ata.READ_DMA_EXT, lba=3, count=1))[2] == data

    run(tb, bench)


def test_a_memory_error_on_the_staging_area_fails_the_command():
    """SoC memory refusing the staging area: the write reaches nothing, the read's D2H reports it."""
    tb = SataTB(11, capacity=64, r_err=0)
    B = tb.block
    fault = (int(AtaStatus.DRDY | AtaStatus.DF | AtaStatus.ERR), int(AtaError.ABRT))
    assert spec.ata_status_of(Status.INTERNAL_ERROR) == fault

    async def bench(ctx):
        data = tb.rng.randbytes(2 * B)
        assert (await tb.check(ctx, Ata.WRITE_DMA_EXT, lba=5, count=2, data=data))[:2] == OK
        tb.soc.error_at(range(STAGING + B + 8, STAGING + B + 12))
        assert (await tb.ata(ctx, Ata.WRITE_DMA_EXT, lba=9, count=2, data=data))[:2] == fault
        assert sorted(tb.core_model.contents()) == [5, 6], "the failed write changed something"
        assert (await tb.ata(ctx, Ata.READ_DMA_EXT, lba=5, count=2))[:2] == fault
        assert (await tb.ata(ctx, Ata.READ_DMA_EXT, lba=5, count=1))[:2] == OK

    run(tb, bench)


def test_512e_identify_partial_writes_and_trims():
    """512-byte sectors on 2048-byte blocks: IDENTIFY's sector words; a write of part of a block keeps the
    block's other sectors (read-modify-write); a trim deallocates only the whole blocks it covers."""
    tb = SataTB(15, block=2048, sector=512, capacity=32, r_err=0)
    S = 512

    async def bench(ctx):
        st, er, raw = await tb.check(ctx, Ata.IDENTIFY_DEVICE)
        w = [int.from_bytes(raw[2 * i:2 * i + 2], "little") for i in range(256)]
        assert w[100] | w[101] << 16 == 32 * 4 and w[60] | w[61] << 16 == 32 * 4, "capacity in 512-byte sectors"
        assert w[106] == 0x4000 | 1 << 13 | 2, "4 logical sectors per physical"
        assert w[117] == w[118] == 0 and w[209] == 0x4000, "512-byte logical sectors, LBA 0 aligned"
        assert w[69] & 1 << 14 and not w[69] & 1 << 5, "deterministic after TRIM, not zeros"
        base = tb.rng.randbytes(12 * S)
        assert (await tb.check(ctx, Ata.WRITE_DMA_EXT, lba=4, count=12, data=base))[:2] == OK
        assert tb.core.seen["WRITE"] == 1 and not tb.core.seen["READ"], "whole blocks: no read first"
        patch = tb.rng.randbytes(5 * S)
        assert (await tb.check(ctx, Ata.WRITE_DMA_EXT, lba=6, count=5, data=patch))[:2] == OK
        assert tb.core.seen["READ"] == 1, "a partial write reads its blocks first"
        want = base[:2 * S] + patch + base[7 * S:]
        assert (await tb.check(ctx, Ata.READ_DMA_EXT, lba=4, count=12))[2] == want
        assert (await tb.check(ctx, Ata.READ_DMA_EXT, lba=7, count=3))[2] == want[3 * S:6 * S]
        body = spec.ATA_DSM_RANGE.pack(entry=spec.ATA_DSM_RANGE.compose("entry", lba=5, length=8)).ljust(512, b"\0")
        assert (await tb.check(ctx, Ata.DATA_SET_MANAGEMENT, features=1, count=1, data=body))[:2] == OK
        assert tb.core.seen["DEALLOCATE"] == 1, "sectors 5-12: only the block of sectors 8-11"
        got = (await tb.check(ctx, Ata.READ_DMA_EXT, lba=4, count=12))[2]
        assert got == want[:4 * S] + bytes(4 * S) + want[8 * S:]

    run(tb, bench)


# -- NCQ ---------------------------------------------------------------------------------------------------
def random_batch(tb, size, *, writes=0.5):
    """Queued reads and writes on distinct tags and disjoint sector ranges (their order is the device's)."""
    r = tb.rng
    taken, batch = set(), []
    for tag in r.sample(range(ATA.NCQ_DEPTH), size):
        for _ in range(100):
            n = r.randint(1, tb.largest)
            lba = r.randrange(tb.sectors - n)
            if not taken & set(range(lba, lba + n)):
                break
        taken |= set(range(lba, lba + n))
        write = r.random() < writes
        batch.append({"cmd": Ata.WRITE_FPDMA_QUEUED if write else Ata.READ_FPDMA_QUEUED, "tag": tag, "lba": lba,
                      "count": n, "fua": r.random() < 0.3, "data": r.randbytes(n * tb.sector) if write else b""})
    return batch


@pytest.mark.parametrize("seed,block,sector", [(21, 512, None), (22, 2048, 512)])
def test_ncq_random_queued_reads_and_writes(seed, block, sector):
    """Batches of up to 32 queued reads and writes (512e: unaligned, read-modify-write) on random tags, the
    host queueing each after the previous one's acknowledgement while the device moves data: each tag
    acknowledged, set up, moved and completed exactly once, data and contents as the reference has them."""
    tb = SataTB(seed, block=block, sector=sector, capacity={512: 512, 2048: 128}[block], largest=8)
    orders = []             # completion order and issue order of each batch

    async def bench(ctx):
        for size in (32, 12):
            batch = random_batch(tb, size, writes=0.7 if not orders else 0.5)
            acks, completed, failed = await tb.ncq(ctx, batch)
            assert acks == [OK] * size and failed is None
            assert sorted(completed) == sorted(c["tag"] for c in batch), "a tag not completed exactly once"
            orders.append((completed, [c["tag"] for c in batch]))
        assert ctx.get(tb.transport.malformed) == 0 and ctx.get(tb.transport.crc_errors) == 0
        assert (await tb.check(ctx, Ata.READ_LOG_EXT, lba=ATA.LOG_NCQ_ERROR, count=1))[2] == tb.ref.ncq_log()

    run(tb, bench)
    assert tb.data_past_command, "no Data FIS passed a queued command waiting in the transport"
    assert tb.core.seen["READ"] and tb.core.seen["WRITE"]


def test_ncq_a_failed_command_stops_the_queue_until_read_log_ext():
    """A queued read beyond the capacity: SDB with ERR (IDNF), no SActive bit; every other command ABRT until
    READ LOG EXT 10h, whose page names the tag, status, error, LBA and count; the rest of the queue is aborted
    (never run); then the device takes commands again."""
    tb = SataTB(23, capacity=256, r_err=0)
    data = tb.rng.randbytes(4 * tb.block)

    async def bench(ctx):
        batch = [{"cmd": Ata.WRITE_FPDMA_QUEUED, "tag": 3, "lba": 8, "count": 4, "data": data},
                 {"cmd": Ata.READ_FPDMA_QUEUED, "tag": 17, "lba": 254, "count": 4},
                 {"cmd": Ata.WRITE_FPDMA_QUEUED, "tag": 30, "lba": 40, "count": 4, "data": data}]
        acks, completed, failed = await tb.ncq(ctx, batch[:2])
        assert completed == [3] and failed == (IDNF, 0)
        tb.ref.complete(17)
        assert (await tb.check(ctx, Ata.READ_DMA_EXT, lba=8, count=4))[:2] == ABRT, "not stopped"
        acks, completed, failed = await tb.ncq(ctx, batch[2:])
        assert acks == [ABRT] and not completed
        st, er, page = await tb.check(ctx, Ata.READ_LOG_EXT, lba=ATA.LOG_NCQ_ERROR, count=1)
        log = spec.ATA_NCQ_ERROR_LOG.unpack(page)
        assert (st, er) == OK and spec.ATA_NCQ_ERROR_LOG.decompose("tag", log.tag).tag == 17
        assert (log.status, log.error, log.count, log.lba0) == (*IDNF, 4, 254) and sum(page) % 256 == 0
        acks, completed, failed = await tb.ncq(ctx, batch[2:])
        assert acks == [OK] and completed == [30]
        assert (await tb.check(ctx, Ata.READ_DMA_EXT, lba=8, count=4))[2] == data

    run(tb, bench)


def test_ncq_a_tag_in_use_aborts_the_queue():
    """A host queueing a tag still outstanding (both commands in before the first acknowledgement): the
    second is ABRT, every queued command aborted, the log names the tag; READ LOG EXT clears it all."""
    tb = SataTB(24, capacity=256, r_err=0)

    async def bench(ctx):
        cmd = {"cmd": Ata.READ_FPDMA_QUEUED, "tag": 7, "lba": 0, "count": 2}
        acks, completed, failed = await tb.ncq(ctx, [cmd, dict(cmd, lba=9)], wait_for_ack=False)
        assert acks == [OK, ABRT] and not completed and not tb.core.seen
        st, er, page = await tb.check(ctx, Ata.READ_LOG_EXT, lba=ATA.LOG_NCQ_ERROR, count=1)
        assert spec.ATA_NCQ_ERROR_LOG.decompose("tag", page[0]).tag == 7
        acks, completed, failed = await tb.ncq(ctx, [cmd])
        assert acks == [OK] and completed == [7]

    run(tb, bench)


def test_ncq_a_non_queued_command_among_queued_ones_aborts_them():
    """READ DMA EXT arriving while a queued command is outstanding: ABRT, the queued one aborted (never
    run), the log's NQ bit set; afterwards everything works."""
    tb = SataTB(25, capacity=256, r_err=0)

    async def bench(ctx):
        queued = {"cmd": Ata.WRITE_FPDMA_QUEUED, "tag": 12, "lba": 0, "count": 2, "data": bytes(1024)}
        plain = {"cmd": Ata.READ_DMA_EXT, "lba": 0, "count": 1}
        acks, completed, failed = await tb.ncq(ctx, [queued, plain], wait_for_ack=False)
        assert acks == [OK, ABRT] and not completed and not tb.core.seen
        st, er, page = await tb.check(ctx, Ata.READ_LOG_EXT, lba=ATA.LOG_NCQ_ERROR, count=1)
        assert spec.ATA_NCQ_ERROR_LOG.decompose("tag", page[0]).nq == 1
        assert (await tb.check(ctx, Ata.READ_LOG_EXT, lba=0x11, count=1))[:2] == ABRT
        assert (await tb.check(ctx, Ata.READ_DMA_EXT, lba=0, count=1))[:2] == OK

    run(tb, bench)


def test_ncq_a_queued_command_while_a_non_queued_one_runs_is_aborted():
    """A host queueing a command while FLUSH CACHE EXT still runs (BSY): the flush completes, the queued
    command is ABRT and changes nothing (no queue, no error state); then queued commands work."""
    tb = SataTB(26, capacity=256, r_err=0)

    async def bench(ctx):
        data = tb.rng.randbytes(2 * tb.block)
        queued = {"cmd": Ata.WRITE_FPDMA_QUEUED, "tag": 5, "lba": 4, "count": 2, "data": data}
        backpressure, tb.backpressure = tb.backpressure, 1.0             # the flush's D2H waits
        await tb.send_fis(ctx, h2d(Ata.FLUSH_CACHE_EXT))
        await tb.send_fis(ctx, h2d(queued["cmd"], features=2, lba=4, count=5 << 3))
        tb.backpressure = backpressure
        for want in (OK, ABRT):
            d2h = unpack(spec.SATA_FIS_REG_D2H, await tb.next_frame(ctx))
            assert (d2h.status, d2h.error) == want
        assert tb.ref.run(Ata.FLUSH_CACHE_EXT)[:2] == OK
        assert tb.core.seen["FLUSH"] == 1 and not tb.core.seen["WRITE"]
        acks, completed, failed = await tb.ncq(ctx, [queued])
        assert acks == [OK] and completed == [5] and failed is None, "the device did not take queued commands again"
        assert (await tb.check(ctx, Ata.READ_LOG_EXT, lba=ATA.LOG_NCQ_ERROR, count=1))[2] == tb.ref.ncq_log()

    run(tb, bench)
