"""The reference NVMe controller (atomflash.model.nvme) driven register by register.

A small host helper below builds submission entries with ``spec.NVME_SQE.pack``, rings doorbells
and reads completions with ``spec.NVME_CQE.unpack`` -- just enough to talk to the controller; it
is not a driver.  Storage results are checked against a second, plain ``Model`` fed the same
operations: every status and every byte read must be what the model says."""

from __future__ import annotations

import copy
import itertools
import random
from dataclasses import dataclass

import pytest

from atomflash import spec
from atomflash.hostmem import PAGE, HostMemory
from atomflash.model import Completion, Limits, Model
from atomflash.model.nvme import NvmeController
from atomflash.spec import (NVME, NVME_CQE, NVME_ERROR_LOG, NVME_ID_CTRL, NVME_ID_NS, NVME_REGS, NVME_SMART,
                            NVME_SQE, NvmeAdminOpcode as Adm, NvmeCommandStatus as Cs, NvmeFeature,
                            NvmeGenericStatus as Gs, NvmeIoOpcode as Io, NvmeLogPage, NvmeSct, Status)

LIM = Limits(capacity=64, lba_size=512, max_transfer=16, max_atomic_pages=8, max_open_tx=3, max_pending=24,
             max_remap_triples=4, max_appends=4)
BIG = Limits(capacity=64, lba_size=4096, max_transfer=16)  # 64 KiB transfers


def generic(sc):
    return (NvmeSct.GENERIC, sc)


def specific(sc):
    return (NvmeSct.COMMAND_SPECIFIC, sc)


OK = generic(Gs.SUCCESS)


def nv(status, read=False):
    return spec.nvme_status_of(status, read=read)


def bits(register, value, name):
    b = next(b for b in NVME_REGS[register].bits if b.name == name)
    return (value >> b.lsb) & ((1 << b.width) - 1)


def regval(register, **fields):
    out = 0
    for name, v in fields.items():
        b = next(b for b in NVME_REGS[register].bits if b.name == name)
        out |= v << b.lsb
    return out


def addr(name, i=0):
    return NVME_REGS[name].address(i)


def status(cqe):
    sf = NVME_CQE.decompose("sf", cqe.sf)
    return (sf.sct, sf.sc)


def state(model: Model):
    """Everything a command could change in the model."""
    return (model.contents(), copy.deepcopy(model.tx), {h: (a.token, list(a.blocks)) for h, a in model.appends.items()},
            len(model.history))


@dataclass
class Sq:
    base: int
    size: int
    cqid: int
    tail: int = 0


@dataclass
class Cq:
    base: int
    size: int
    head: int = 0
    phase: int = 1


class Host:
    """Queues in host memory and the few steps a test needs; no driver logic beyond that."""

    def __init__(self, limits=LIM, **kw):
        self.mem = HostMemory()
        self.vectors: list[int] = []
        self.ctrl = NvmeController(self.mem, limits=limits, irq=self.vectors.append, **kw)
        self.limits = self.ctrl.limits
        self.sq: dict[int, Sq] = {}
        self.cq: dict[int, Cq] = {}
        self._cids = itertools.count(1)

    # -- registers ----------------------------------------------------------------------------------
    def read(self, name, i=0):
        return self.ctrl.mmio_read(addr(name, i))

    def write(self, name, value, i=0):
        self.ctrl.mmio_write(addr(name, i), value)

    def enable(self, entries=16, **cc):
        asq, acq = self.mem.alloc(entries * 64), self.mem.alloc(entries * 16)
        self.write("aqa", regval("aqa", asqs=entries - 1, acqs=entries - 1))
        for name, base in (("asq", asq), ("acq", acq)):
            self.write(f"{name}_lo", base & 0xFFFF_FFFF)
            self.write(f"{name}_hi", base >> 32)
        self.write("cc", regval("cc", **{"en": 1, "iosqes": 6, "iocqes": 4, **cc}))
        self.sq, self.cq = {0: Sq(asq, entries, 0)}, {0: Cq(acq, entries)}

    # -- commands -----------------------------------------------------------------------------------
    def put(self, qid, opc, cid=None, **fields) -> int:
        """Write one entry into SQ ``qid`` without ringing the doorbell."""
        q = self.sq[qid]
        cid = next(self._cids) & 0xFFFF if cid is None else cid
        self.mem.write(q.base + q.tail * 64, NVME_SQE.pack(cdw0=NVME_SQE.compose("cdw0", opc=opc, cid=cid),
                                                           **fields))
        q.tail = (q.tail + 1) % q.size
        return cid

    def ring(self, qid):
        self.write("sq_tail", self.sq[qid].tail, qid)

    def submit(self, qid, opc, **fields) -> int:
        cid = self.put(qid, opc, **fields)
        self.ring(qid)
        return cid

    def peek(self, cqid):
        """New completions in CQ ``cqid`` (phase tag matches), without releasing them."""
        q, out = self.cq[cqid], []
        head, phase = q.head, q.phase
        while True:
            e = NVME_CQE.unpack(self.mem.read(q.base + head * 16, 16))
            if NVME_CQE.decompose("sf", e.sf).p != phase:
                return out
            out.append(e)
            head += 1
            if head == q.size:
                head, phase = 0, phase ^ 1

    def reap(self, cqid):
        """Take the new completions and release them with the head doorbell."""
        got = self.peek(cqid)
        q = self.cq[cqid]
        for _ in got:
            q.head += 1
            if q.head == q.size:
                q.head, q.phase = 0, q.phase ^ 1
        if got:
            self.write("cq_head", q.head, cqid)
        return got

    def cmd(self, qid, opc, **fields):
        cid = self.submit(qid, opc, **fields)
        got = self.reap(self.sq[qid].cqid)
        assert [e.cid for e in got] == [cid], got
        assert got[0].sqid == qid and got[0].sqhd == self.sq[qid].tail
        return got[0]

    def admin(self, opc, cdw10=0, cdw11=0, **fields):
        return self.cmd(0, opc, slba=cdw10 | cdw11 << 32, **fields)

    # -- buffers and PRPs ---------------------------------------------------------------------------------
    def buffer(self, nbytes, offset=0, data=b""):
        base = self.mem.alloc(nbytes + offset) + offset
        if data:
            self.mem.write(base, data)
        return base

    def prps(self, base, nbytes):
        """PRP1/PRP2 for a contiguous buffer (a one-page PRP list when it spans more than two pages)."""
        first = PAGE - base % PAGE
        if nbytes <= first:
            return dict(prp1=base, prp2=0)
        pages = [base - base % PAGE + PAGE * (i + 1) for i in range(-(-(nbytes - first) // PAGE))]
        if len(pages) == 1:
            return dict(prp1=base, prp2=pages[0])
        lst = self.buffer(8 * len(pages), data=b"".join(p.to_bytes(8, "little") for p in pages))
        return dict(prp1=base, prp2=lst)

    def io(self, qid, opc, *, data=b"", nbytes=0, offset=0, **fields):
        """An I/O command with a data buffer: ``data`` to send, or ``nbytes`` to receive."""
        size = max(len(data), nbytes, 4)
        base = self.buffer(size, offset, data)
        e = self.cmd(qid, opc, nsid=NVME.NSID, **self.prps(base, size), **fields)
        return e, (self.mem.read(base, nbytes) if nbytes else b"")

    def create_pair(self, qid, entries=16, cqid=None, iv=None, ien=1):
        cqid = qid if cqid is None else cqid
        if cqid not in self.cq:
            cq = self.mem.alloc(entries * 16)
            e = self.admin(Adm.CREATE_IO_CQ, cdw10=cqid | (entries - 1) << 16,
                           cdw11=1 | ien << 1 | (cqid if iv is None else iv) << 16, prp1=cq)
            assert status(e) == OK
            self.cq[cqid] = Cq(cq, entries)
        sq = self.mem.alloc(entries * 64)
        e = self.admin(Adm.CREATE_IO_SQ, cdw10=qid | (entries - 1) << 16, cdw11=1 | cqid << 16, prp1=sq)
        assert status(e) == OK
        self.sq[qid] = Sq(sq, entries, cqid)

    def log(self, lid, nbytes, **fields):
        base = self.buffer(nbytes)
        e = self.admin(Adm.GET_LOG_PAGE, cdw10=lid | ((nbytes // 4 - 1) << 16), **self.prps(base, nbytes),
                       **fields)
        return e, self.mem.read(base, nbytes)

    def identify(self, cns, nsid=0, offset=0):
        base = self.buffer(4096, offset)
        e = self.admin(Adm.IDENTIFY, cdw10=cns, nsid=nsid, **self.prps(base, 4096))
        return e, self.mem.read(base, 4096)

    def smart(self):
        e, raw = self.log(NvmeLogPage.SMART, NVME_SMART.size)
        assert status(e) == OK
        return NVME_SMART.unpack(raw)

    def errors(self):
        e, raw = self.log(NvmeLogPage.ERROR, 64 * NVME_ERROR_LOG.size)
        assert status(e) == OK
        return [NVME_ERROR_LOG.unpack(raw[i:i + 64]) for i in range(0, len(raw), 64)]


def block(tag, n=1, size=LIM.lba_size):
    return b"".join(f"{tag}/{i}".encode().ljust(size, b".") for i in range(n))


@pytest.fixture
def host():
    h = Host()
    h.enable()
    h.create_pair(1)
    return h


# == registers and the init sequence ===============================================================================
def test_init_sequence_registers_and_fatal_configurations():
    h = Host()
    cap_lo, cap_hi = h.read("cap_lo"), h.read("cap_hi")
    assert bits("cap_lo", cap_lo, "mqes") == NVME.MQES and bits("cap_lo", cap_lo, "cqr") == 1
    assert bits("cap_lo", cap_lo, "to") == NVME.TIMEOUT_500MS
    assert bits("cap_hi", cap_hi, "css") & 1 and bits("cap_hi", cap_hi, "dstrd") == NVME.DSTRD
    assert bits("cap_hi", cap_hi, "mpsmin") == bits("cap_hi", cap_hi, "mpsmax") == 0
    assert h.read("vs") == NVME.VERSION
    assert h.read("csts") == 0 and h.read("cc") == 0
    h.enable(entries=8)
    assert h.read("aqa") == regval("aqa", asqs=7, acqs=7)
    assert h.read("asq_lo") | h.read("asq_hi") << 32 == h.sq[0].base
    assert h.read("acq_lo") | h.read("acq_hi") << 32 == h.cq[0].base
    csts = h.read("csts")
    assert bits("csts", csts, "rdy") == 1 and bits("csts", csts, "cfs") == 0
    assert status(h.identify(1)[0]) == OK  # the admin queue works
    h.write("cc", 0)
    assert h.read("csts") == 0
    # each unsupported configuration: CFS, not ready, until the reset (CC.EN 1 -> 0) clears it
    for cc in ({"mps": 1}, {"css": 1}, {"iosqes": 7}):
        h = Host()
        h.enable(**cc)
        csts = h.read("csts")
        assert (bits("csts", csts, "cfs"), bits("csts", csts, "rdy")) == (1, 0), cc
        h.write("cc", 0)
        assert h.read("csts") == 0
    h = Host()
    h.enable(entries=1)  # an admin queue of one entry cannot work
    assert bits("csts", h.read("csts"), "cfs") == 1
    h = Host()
    h.write("asq_lo", h.mem.alloc(PAGE) + 64)  # misaligned admin SQ
    h.write("acq_lo", h.mem.alloc(PAGE))
    h.write("aqa", regval("aqa", asqs=3, acqs=3))
    h.write("cc", regval("cc", en=1))
    assert bits("csts", h.read("csts"), "cfs") == 1
    with pytest.raises(ValueError):
        h.ctrl.mmio_read(2)


# == Identify ======================================================================================================
def test_identify_controller_namespace_and_list():
    h = Host(serial="SN42", volatile_cache=True)
    h.enable()
    e, raw = h.identify(1, offset=512)  # spans two pages: PRP2 used
    assert status(e) == OK
    c = NVME_ID_CTRL.unpack(raw)
    L = LIM
    assert c.vid == c.ssvid == NVME.VENDOR_ID and c.ver == NVME.VERSION and c.nn == 1
    assert raw[4:24] == b"SN42".ljust(20) and raw[24:64].rstrip() == b"atomflash"
    assert c.sqes == 0x66 and c.cqes == 0x44 and c.sgls == 0 and c.vwc & 1 == 1
    assert NVME_ID_CTRL.decompose("oncs", c.oncs) == {"write_zeroes": 1, "dsm": 1}
    assert (c.awun, c.awupf) == (L.max_transfer - 1, 0)
    assert 2 ** c.mdts * PAGE == L.max_transfer * L.lba_size  # 8 KiB: 2 pages
    assert (c.af_magic, c.af_max_atomic_pages, c.af_max_open_tx, c.af_max_pending, c.af_max_remap_triples,
            c.af_max_appends, c.af_spec_version) == (spec.IDENTIFY_MAGIC, L.max_atomic_pages, L.max_open_tx,
                                                     L.max_pending, L.max_remap_triples, L.max_appends,
                                                     spec.SPEC_VERSION)
    # the default limits give the spec's MDTS
    assert NVME_ID_CTRL.unpack(NvmeController(HostMemory()).identify_controller()).mdts == NVME.MDTS
    assert NVME_ID_CTRL.unpack(NvmeController(HostMemory()).identify_controller()).vwc == 0
    h.create_pair(1)
    assert status(h.io(1, Io.WRITE, data=block("x", 3), slba=5, cdw12=2)[0]) == OK
    e, raw = h.identify(0, nsid=1)
    n = NVME_ID_NS.unpack(raw)
    assert status(e) == OK and n.nsze == n.ncap == L.capacity and n.nuse == 3
    assert NVME_ID_NS.decompose("lbaf0", n.lbaf0).lbads == 9 and n.nlbaf == 0 and n.flbas == 0
    assert n.dlfeat & 7 == 1 and n.nsfeat & 2 and (n.nawun, n.nawupf) == (c.awun, c.awupf)
    e, raw = h.identify(2, nsid=0)
    assert status(e) == OK and raw[:8] == (1).to_bytes(4, "little") + bytes(4)
    e, raw = h.identify(2, nsid=1)
    assert status(e) == OK and raw == bytes(4096)
    assert status(h.identify(0, nsid=2)[0]) == generic(Gs.INVALID_NAMESPACE)
    assert status(h.identify(0, nsid=0)[0]) == generic(Gs.INVALID_NAMESPACE)
    assert status(h.identify(2, nsid=0xFFFF_FFFF)[0]) == generic(Gs.INVALID_NAMESPACE)
    assert status(h.identify(0x10)[0]) == generic(Gs.INVALID_FIELD)


# == queues ========================================================================================================
def test_create_and_delete_queues_with_every_error():
    h = Host(io_queues=4, mqes=31)
    h.enable()
    mem = h.mem
    page = mem.alloc(PAGE * 2)

    def create_cq(qid, entries=8, pc=1, ien=1, iv=1, base=page):
        return status(h.admin(Adm.CREATE_IO_CQ, cdw10=qid | (entries - 1) << 16,
                              cdw11=pc | ien << 1 | iv << 16, prp1=base))

    def create_sq(qid, cqid, entries=8, pc=1, base=page):
        return status(h.admin(Adm.CREATE_IO_SQ, cdw10=qid | (entries - 1) << 16, cdw11=pc | cqid << 16,
                              prp1=base))

    assert create_cq(0) == specific(Cs.INVALID_QID)
    assert create_cq(5) == specific(Cs.INVALID_QID)            # beyond io_queues
    assert create_cq(1, entries=1) == specific(Cs.INVALID_QUEUE_SIZE)
    assert create_cq(1, entries=33) == specific(Cs.INVALID_QUEUE_SIZE)  # above MQES + 1
    assert create_cq(1, pc=0) == generic(Gs.INVALID_FIELD)
    assert create_cq(1, base=page + 16) == generic(Gs.INVALID_FIELD)
    assert create_cq(1, iv=0) == specific(Cs.INVALID_INTERRUPT_VECTOR)
    assert create_cq(1, iv=5) == specific(Cs.INVALID_INTERRUPT_VECTOR)
    assert create_cq(1, entries=32) == OK
    assert create_cq(1) == specific(Cs.INVALID_QID)            # exists
    assert create_cq(2, ien=0, iv=0, base=page + PAGE) == OK   # polled: no vector needed
    assert create_sq(1, cqid=3) == specific(Cs.INVALID_CQ)
    assert create_sq(1, cqid=0) == specific(Cs.INVALID_CQ)     # the admin CQ
    assert create_sq(0, cqid=1) == specific(Cs.INVALID_QID)
    assert create_sq(1, cqid=1, entries=1) == specific(Cs.INVALID_QUEUE_SIZE)
    assert create_sq(1, cqid=1, pc=0) == generic(Gs.INVALID_FIELD)
    assert create_sq(1, cqid=1, base=page + 4) == generic(Gs.INVALID_FIELD)
    sq1, sq2 = mem.alloc(8 * 64), mem.alloc(8 * 64)
    assert create_sq(1, cqid=1, base=sq1) == OK
    assert create_sq(1, cqid=1, base=sq1) == specific(Cs.INVALID_QID)
    assert create_sq(2, cqid=1, base=sq2) == OK  # two SQs on one CQ
    h.sq[1], h.sq[2], h.cq[1] = Sq(sq1, 8, 1), Sq(sq2, 8, 1), Cq(page, 32)
    assert status(h.cmd(1, Io.FLUSH, nsid=1)) == OK
    assert status(h.cmd(2, Io.FLUSH, nsid=1)) == OK
    delete = lambda opc, qid: status(h.admin(opc, cdw10=qid))  # noqa: E731
    assert delete(Adm.DELETE_IO_CQ, 1) == specific(Cs.INVALID_QUEUE_DELETION)
    assert delete(Adm.DELETE_IO_SQ, 0) == specific(Cs.INVALID_QID)
    assert delete(Adm.DELETE_IO_SQ, 3) == specific(Cs.INVALID_QID)
    assert delete(Adm.DELETE_IO_SQ, 1) == OK
    assert delete(Adm.DELETE_IO_SQ, 1) == specific(Cs.INVALID_QID)
    assert delete(Adm.DELETE_IO_CQ, 1) == specific(Cs.INVALID_QUEUE_DELETION)  # SQ 2 still uses it
    assert delete(Adm.DELETE_IO_SQ, 2) == OK
    assert delete(Adm.DELETE_IO_CQ, 0) == specific(Cs.INVALID_QID)
    assert delete(Adm.DELETE_IO_CQ, 1) == OK
    assert delete(Adm.DELETE_IO_CQ, 1) == specific(Cs.INVALID_QID)
    assert delete(Adm.DELETE_IO_CQ, 2) == OK
    # the queue is gone: its doorbell runs nothing (it raises an event, logged as an error)
    errors = h.smart().error_log_entries
    h.put(1, Io.WRITE_ZEROES, nsid=1, cdw12=0)
    before = h.mem.writes
    h.ring(1)
    assert h.mem.writes == before and h.smart().error_log_entries == errors + 1
    # an I/O completion queue entry size other than 16 bytes when the queue is created: controller fatal
    h2 = Host()
    h2.enable(iocqes=0)
    h2.submit(0, Adm.CREATE_IO_CQ, slba=1 | 7 << 16 | (1 | 1 << 1 | 1 << 16) << 32, prp1=h2.mem.alloc(PAGE))
    assert bits("csts", h2.read("csts"), "cfs") == 1 and h2.peek(0) == []


def test_delete_sq_aborts_commands_not_fetched():
    """Commands an SQ holds when it is deleted complete with SQ_DELETION_ABORT (they are fetched only
    from inside irq here, the one time a queue holds entries the controller has not run)."""
    h = Host()
    h.enable()
    h.create_pair(1)
    h.create_pair(2, cqid=1)
    fired = []

    def irq(vector):
        if vector == 1 and not fired:
            fired.append(1)
            for _ in range(2):
                h.put(2, Io.WRITE, nsid=1, cdw12=0)  # never fetched: deleted first
            h.ring(2)
            h.submit(0, Adm.DELETE_IO_SQ, slba=2)

    h.ctrl.irq = irq
    before = state(h.ctrl.model)
    h.submit(1, Io.FLUSH, nsid=1)
    got = h.reap(1)
    # after the flush's pass, the next serves the admin queue (QID 0) before SQ 2: the delete comes first
    assert [status(e) for e in got] == [OK] + [generic(Gs.SQ_DELETION_ABORT)] * 2
    assert [e.sqid for e in got] == [1, 2, 2]
    assert status(h.reap(0)[0]) == OK
    assert state(h.ctrl.model) == before


# == I/O against the plain model ===================================================================================
def test_random_io_on_several_queues_matches_the_model():
    rng = random.Random(1234)
    h = Host(io_queues=4)
    h.enable()
    h.create_pair(1)
    h.create_pair(2)
    h.create_pair(3, entries=4)   # a small queue: wraps often
    h.create_pair(4, cqid=1)      # shares CQ 1
    ref = Model(LIM)
    L, N = LIM, LIM.lba_size
    tokens: list[tuple[int, int]] = []  # (token, blocks) ever issued
    seen = set()
    for step in range(500):
        qid = rng.choice([1, 2, 3, 4])
        kind = rng.choice(["write", "write", "read", "read", "zeroes", "dsm", "atomic", "txw", "txw", "txr",
                           "commit", "abort", "append", "append", "remap", "release", "hint", "flush"])
        off = rng.randrange(0, PAGE, 4)
        lba = rng.randrange(0, L.capacity + 4)
        n = rng.choice([1, 1, 2, 3, 5, L.max_transfer, L.max_transfer + 1])
        tid = rng.choice([0, 1, 2, 3, 4, 5])
        data = bytes(rng.randrange(256) for _ in range(8)) * (n * N // 8)
        read = False
        if kind == "write":
            fua = rng.randrange(2)
            want = ref.write(lba, data, fua=bool(fua))
            e, _ = h.io(qid, Io.WRITE, data=data, offset=off, slba=lba, cdw12=(n - 1) | fua << 30)
        elif kind in ("read", "txr"):
            read = True
            want = ref.read(lba, n) if kind == "read" else ref.tx_read(tid, lba, n, queue=qid)
            op = Io.READ if kind == "read" else Io.TX_READ
            e, got = h.io(qid, op, nbytes=n * N, offset=off, slba=lba, cdw12=n - 1, cdw13=tid)
            if want.ok:
                assert got == want.data, (step, kind)
        elif kind == "zeroes":
            want = ref.trim(lba, n)
            e = h.cmd(qid, Io.WRITE_ZEROES, nsid=1, slba=lba, cdw12=n - 1)
        elif kind == "dsm":
            ranges = [(rng.randrange(L.capacity + 2), rng.randrange(1, 6)) for _ in range(rng.randrange(1, 4))]
            if any(s + c > L.capacity for s, c in ranges):
                want = Completion(Status.LBA_OUT_OF_RANGE)  # and nothing trimmed
            else:
                want = [ref.trim(s, c) for s, c in ranges][-1]
            raw = b"".join(spec.NVME_DSM_RANGE.pack(nlb=c, slba=s) for s, c in ranges)
            e, _ = h.io(qid, Io.DATASET_MANAGEMENT, data=raw, offset=off, slba=(len(ranges) - 1) | 4 << 32)
        elif kind == "atomic":
            k = rng.choice([1, 2, 4, L.max_atomic_pages, L.max_atomic_pages + 1])
            lbas = [rng.randrange(L.capacity + (1 if rng.random() < 0.1 else 0)) for _ in range(k)]
            blocks = [block(f"a{step}.{i}") for i in range(k)]
            want = ref.atomic_write(zip(lbas, blocks))
            mptr = h.buffer(8 * k, data=b"".join(x.to_bytes(8, "little") for x in lbas))
            e, _ = h.io(qid, Io.ATOMIC_WRITE, data=b"".join(blocks), offset=off, cdw12=k - 1, mptr=mptr)
        elif kind == "txw":
            final, new = rng.random() < 0.3, rng.random() < 0.2
            want = ref.tx_write(tid, lba, data, final=final, new=new, queue=qid)
            e, _ = h.io(qid, Io.TX_WRITE, data=data, offset=off, slba=lba,
                        cdw12=(n - 1) | final << 16 | new << 17, cdw13=tid)
        elif kind in ("commit", "abort"):
            want = ref.tx_commit(tid, queue=qid) if kind == "commit" else ref.tx_abort(tid, queue=qid)
            e = h.cmd(qid, Io.TX_COMMIT if kind == "commit" else Io.TX_ABORT, nsid=1, cdw13=tid)
        elif kind == "append":
            n = rng.choice([1, 2, 3, 6])
            want = ref.append(block(f"p{step}", n), queue=qid)
            e, _ = h.io(qid, Io.APPEND, data=block(f"p{step}", n), offset=off, cdw12=n - 1)
            if want.ok:
                assert e.result == want.result
                tokens.append((want.result, n))
        elif kind == "remap":
            k = rng.choice([1, 1, 2, L.max_remap_triples + 1])
            triples = []
            for _ in range(k):
                tok, blocks_ = rng.choice(tokens) if tokens else (0, 1)
                triples.append((rng.randrange(L.capacity), tok, blocks_ if rng.random() < 0.85 else blocks_ + 1))
            want = ref.remap(triples, queue=qid)
            raw = b"".join(spec.NVME_REMAP_ENTRY.pack(lba=a, token=t, nlb=c) for a, t, c in triples)
            e, _ = h.io(qid, Io.REMAP, data=raw, offset=off, cdw12=k - 1)
        elif kind == "release":
            tok = rng.choice(tokens)[0] if tokens and rng.random() < 0.8 else rng.getrandbits(64)
            want = ref.release(tok, queue=qid)
            e = h.cmd(qid, Io.RELEASE, nsid=1, cdw14_15=tok)
        elif kind == "hint":
            hint = rng.randrange(4)
            want = ref.hint(hint)
            e = h.cmd(qid, Io.HINT, nsid=1, cdw13=hint)
        else:
            want = ref.flush()
            e = h.cmd(qid, Io.FLUSH, nsid=1)
        assert status(e) == nv(want.status, read=read), (step, kind, want.status)
        seen.add(want.status)
        if step % 50 == 0:
            assert state(h.ctrl.model)[:3] == state(ref)[:3], step
    assert h.ctrl.model.contents() == ref.contents()
    assert h.ctrl.model.tx == ref.tx
    assert {k: a.token for k, a in h.ctrl.model.appends.items()} == {k: a.token for k, a in ref.appends.items()}
    # the run exercised successes and a spread of failures
    assert {Status.SUCCESS, Status.LBA_OUT_OF_RANGE, Status.TRANSFER_TOO_LARGE, Status.INVALID_TID,
            Status.UNKNOWN_TX, Status.INVALID_TOKEN, Status.GROUP_TOO_LARGE, Status.REMAP_TOO_LARGE,
            Status.REMAP_LENGTH, Status.PENDING_FULL, Status.INVALID_FIELD} <= seen, seen


# == PRPs ==========================================================================================================
def test_prp_lists_cross_pages_and_chain():
    h = Host(limits=BIG)
    h.enable()
    h.create_pair(1)
    nbytes = 16 * BIG.lba_size  # 64 KiB
    data = bytes(random.Random(5).randrange(256) for _ in range(nbytes))
    assert status(h.io(1, Io.WRITE, data=data, offset=0x204, cdw12=15)[0]) == OK  # PRP1 inside a page, a list
    assert h.ctrl.model.read(0, 16).data == data

    def chained(base):
        """PRP1 at base (inside a page): 17 pages.  The list starts 4 entries before the end of a page:
        3 data entries and a pointer to a second list page with the other 13."""
        pages = [base - base % PAGE + PAGE * (i + 1) for i in range(16)]
        first = h.mem.alloc(PAGE) + PAGE - 32
        second = h.mem.alloc(PAGE)
        h.mem.write(first, b"".join(p.to_bytes(8, "little") for p in pages[:3] + [second]))
        h.mem.write(second, b"".join(p.to_bytes(8, "little") for p in pages[3:]))
        return first, second

    base = h.buffer(nbytes, 0x204)
    first, second = chained(base)
    e = h.cmd(1, Io.READ, nsid=1, prp1=base, prp2=first, cdw12=15)
    assert status(e) == OK and h.mem.read(base, nbytes) == data
    # and a write through the same chained list
    new = bytes(reversed(data))
    h.mem.write(base, new)
    assert status(h.cmd(1, Io.WRITE, nsid=1, prp1=base, prp2=first, slba=20, cdw12=15)) == OK
    assert h.ctrl.model.read(20, 16).data == new
    # a refused list page: DATA_TRANSFER_ERROR and nothing written
    before = state(h.ctrl.model)
    h.mem.refuse(second)
    assert status(h.cmd(1, Io.WRITE, nsid=1, prp1=base, prp2=first, slba=40, cdw12=15)) == \
        generic(Gs.DATA_TRANSFER_ERROR)
    assert state(h.ctrl.model) == before
    # a chain pointer off a page boundary: PRP_OFFSET_INVALID
    base2 = h.buffer(nbytes, 0x10)
    first2, second2 = chained(base2)
    h.mem.write(first2 + 24, (second2 + 8).to_bytes(8, "little"))
    assert status(h.cmd(1, Io.WRITE, nsid=1, prp1=base2, prp2=first2, slba=40, cdw12=15)) == \
        generic(Gs.PRP_OFFSET_INVALID)
    assert state(h.ctrl.model) == before


# == bad inputs ====================================================================================================
def test_each_bad_input_gets_its_status_and_changes_nothing(host):
    h = host
    N = LIM.lba_size
    assert status(h.io(1, Io.WRITE, data=block("keep", 4), slba=0, cdw12=3)[0]) == OK
    tok = h.io(1, Io.APPEND, data=block("ap", 2), cdw12=1)[0].result
    assert status(h.io(1, Io.TX_WRITE, data=block("tx"), slba=9, cdw13=7)[0]) == OK
    two = h.buffer(2 * N, PAGE - N)  # crosses into a second page
    refused = h.buffer(2 * N, PAGE - N, data=block("r", 2))
    h.mem.refuse(refused + N)  # its second page
    lbas = h.buffer(16, data=(1).to_bytes(8, "little") + (1).to_bytes(8, "little"))
    good_lbas = h.buffer(16, data=(1).to_bytes(8, "little") + (2).to_bytes(8, "little"))
    refused_lbas = h.mem.alloc(PAGE)
    h.mem.refuse(refused_lbas)
    out_of_range = b"".join(spec.NVME_DSM_RANGE.pack(nlb=1, slba=s) for s in (0, LIM.capacity))
    dsm = h.buffer(32, data=out_of_range)
    wide = h.buffer(16 * N, PAGE - 4)  # 16 blocks from 4 bytes before a page's end: three pages
    list_page = h.buffer(16, data=(h.mem.alloc(PAGE) + 8).to_bytes(8, "little") * 2)
    cases = [
        ("PRP1 not dword aligned", dict(opc=Io.WRITE, prp1=two + 2, prp2=two + N, cdw12=1),
         generic(Gs.PRP_OFFSET_INVALID)),
        ("PRP2 not page aligned", dict(opc=Io.WRITE, prp1=two, prp2=two + N + 8, cdw12=1),
         generic(Gs.PRP_OFFSET_INVALID)),
        ("list entry not page aligned", dict(opc=Io.WRITE, prp1=wide, prp2=list_page, cdw12=15),
         generic(Gs.PRP_OFFSET_INVALID)),
        ("list pointer not qword aligned", dict(opc=Io.WRITE, prp1=wide, prp2=list_page + 4, cdw12=15),
         generic(Gs.PRP_OFFSET_INVALID)),
        ("refused data page", dict(opc=Io.WRITE, prp1=refused, prp2=refused + N, cdw12=1),
         generic(Gs.DATA_TRANSFER_ERROR)),
        ("refused read buffer", dict(opc=Io.READ, prp1=refused, prp2=refused + N, cdw12=1),
         generic(Gs.DATA_TRANSFER_ERROR)),
        ("refused LBA list", dict(opc=Io.ATOMIC_WRITE, prp1=two, prp2=two + N, cdw12=1, mptr=refused_lbas),
         generic(Gs.DATA_TRANSFER_ERROR)),
        ("LBA list not dword aligned", dict(opc=Io.ATOMIC_WRITE, prp1=two, prp2=two + N, cdw12=1,
                                            mptr=good_lbas + 2), nv(Status.MISALIGNED_BUFFER)),
        ("duplicate LBA", dict(opc=Io.ATOMIC_WRITE, prp1=two, prp2=two + N, cdw12=1, mptr=lbas),
         nv(Status.DUPLICATE_LBA)),
        ("namespace 0", dict(opc=Io.WRITE, nsid=0, prp1=two, prp2=two + N, cdw12=1),
         generic(Gs.INVALID_NAMESPACE)),
        ("namespace 2", dict(opc=Io.READ, nsid=2, prp1=two, prp2=two + N, cdw12=1), generic(Gs.INVALID_NAMESPACE)),
        ("unknown I/O opcode", dict(opc=0x7D), generic(Gs.INVALID_OPCODE)),
        ("admin opcode on an I/O queue", dict(opc=Adm.IDENTIFY), generic(Gs.INVALID_OPCODE)),
        ("SGL", dict(opc=Io.WRITE, cdw0_psdt=1, prp1=two, prp2=two + N, cdw12=1), generic(Gs.INVALID_FIELD)),
        # too large to transfer: judged without fetching anything (the refused page is never touched)
        ("NLB + 1 above max_transfer", dict(opc=Io.WRITE, prp1=refused, prp2=refused + N, cdw12=LIM.max_transfer),
         generic(Gs.INVALID_FIELD)),
        ("read above max_transfer", dict(opc=Io.READ, prp1=refused, prp2=refused + N, cdw12=0xFFFF),
         generic(Gs.INVALID_FIELD)),
        ("group above max_atomic_pages", dict(opc=Io.ATOMIC_WRITE, prp1=refused, prp2=refused + N,
                                              mptr=refused_lbas, cdw12=LIM.max_atomic_pages),
         nv(Status.GROUP_TOO_LARGE)),
        ("LBA out of range", dict(opc=Io.WRITE, prp1=two, prp2=two + N, slba=LIM.capacity - 1, cdw12=1),
         generic(Gs.LBA_OUT_OF_RANGE)),
        ("write zeroes out of range", dict(opc=Io.WRITE_ZEROES, slba=LIM.capacity, cdw12=0),
         generic(Gs.LBA_OUT_OF_RANGE)),
        ("DSM range out of range", dict(opc=Io.DATASET_MANAGEMENT, prp1=dsm, slba=1 | 4 << 32),
         generic(Gs.LBA_OUT_OF_RANGE)),
        ("unknown transaction", dict(opc=Io.TX_COMMIT, cdw13=99), nv(Status.UNKNOWN_TX)),
        ("transaction 0", dict(opc=Io.TX_WRITE, prp1=refused, prp2=refused + N, cdw12=0xFFFF, cdw13=0),
         nv(Status.INVALID_TID)),  # the model's first check, though the blocks are too many
        ("open transaction as new", dict(opc=Io.TX_WRITE, prp1=two, cdw12=1 << 17, cdw13=7), nv(Status.TID_IN_USE)),
        ("stale token", dict(opc=Io.RELEASE, cdw14_15=tok ^ 1 << 40), nv(Status.INVALID_TOKEN)),
        ("unknown hint", dict(opc=Io.HINT, cdw13=77), nv(Status.INVALID_FIELD)),
    ]
    for i, (name, fields, want) in enumerate(cases):
        fields = dict(fields)
        opc = fields.pop("opc")
        psdt = fields.pop("cdw0_psdt", 0)
        fields.setdefault("nsid", 1)
        before = state(h.ctrl.model)
        q = h.sq[1]
        cid = 0x100 + i
        h.mem.write(q.base + q.tail * 64, NVME_SQE.pack(cdw0=NVME_SQE.compose("cdw0", opc=opc, cid=cid, psdt=psdt),
                                                        **fields))
        q.tail = (q.tail + 1) % q.size
        h.ring(1)
        (e,) = h.reap(1)
        assert (e.cid, status(e)) == (cid, want), name
        assert state(h.ctrl.model) == before, name
        newest = h.errors()[0]
        assert (newest.sqid, newest.cid, newest.nsid) == (1, cid, fields["nsid"]), name
        sf = NVME_CQE.decompose("sf", newest.status)
        assert (sf.sct, sf.sc, sf.p) == (*want, 0), name
    log = h.errors()
    counts = [x.error_count for x in log if x.error_count]
    assert counts == sorted(counts, reverse=True) and len(counts) == len(cases)
    assert counts[0] - counts[-1] == len(cases) - 1
    assert h.smart().error_log_entries == counts[0]
    # unknown admin opcode, on the admin queue
    assert status(h.admin(0x7F)) == generic(Gs.INVALID_OPCODE)


# == completion queue mechanics ====================================================================================
def test_full_cq_holds_completions_until_the_head_doorbell_and_phase_flips(host):
    h = host
    cq = h.mem.alloc(4 * 16)
    assert status(h.admin(Adm.CREATE_IO_CQ, cdw10=2 | 3 << 16, cdw11=1 | 1 << 1 | 2 << 16, prp1=cq)) == OK
    sq = h.mem.alloc(16 * 64)
    assert status(h.admin(Adm.CREATE_IO_SQ, cdw10=2 | 15 << 16, cdw11=1 | 2 << 16, prp1=sq)) == OK
    h.sq[2], h.cq[2] = Sq(sq, 16, 2), Cq(cq, 4)
    h.vectors.clear()
    cids = [h.submit(2, Io.WRITE_ZEROES, nsid=1, slba=i, cdw12=0) for i in range(7)]
    assert not h.ctrl.model.contents()  # they ran (trims), completions or not

    def entries():
        return [NVME_CQE.unpack(h.mem.read(cq + 16 * i, 16)) for i in range(4)]

    # four slots hold three completions: the queue is full with one slot empty
    got = entries()
    assert [e.cid for e in got[:3]] == cids[:3] and got[3].sf == 0
    assert [NVME_CQE.decompose("sf", e.sf).p for e in got[:3]] == [1, 1, 1]
    assert [e.sqhd for e in got[:3]] == [1, 2, 3] and h.vectors == [2, 2, 2]
    h.write("cq_head", 2, 2)  # two consumed: two more posted, wrapping with phase 0
    got = entries()
    assert [e.cid for e in got] == [cids[4], cids[1], cids[2], cids[3]]
    assert [NVME_CQE.decompose("sf", e.sf).p for e in got] == [0, 1, 1, 1]
    h.write("cq_head", 1, 2)   # slots 2, 3, 0 consumed
    got = entries()
    assert [e.cid for e in got] == [cids[4], cids[5], cids[6], cids[3]]
    assert [NVME_CQE.decompose("sf", e.sf).p for e in got] == [0, 0, 0, 1]
    assert [e.sqhd for e in got[:3]] == [5, 6, 7]
    # releasing more than was posted (head 1 -> 0: three, two are posted) is an invalid doorbell value
    errors = h.smart().error_log_entries
    h.write("cq_head", 0, 2)
    assert h.smart().error_log_entries == errors + 1 and h.errors()[0].sqid == 0xFFFF
    h.write("cq_head", 3, 2)   # the two posted consumed: the head did not move above
    assert h.smart().error_log_entries == errors + 1
    # the next pass over the queue has the other phase
    h.submit(2, Io.FLUSH, nsid=1)
    assert NVME_CQE.decompose("sf", entries()[3].sf).p == 0
    h.write("cq_head", 0, 2)
    h.submit(2, Io.FLUSH, nsid=1)
    assert NVME_CQE.decompose("sf", entries()[0].sf).p == 1


def test_round_robin_across_queues_that_fill_together():
    """Doorbells rung from inside irq while the controller is busy leave several SQs with entries:
    they are served one command each in turn."""
    h = Host()
    h.enable()
    h.create_pair(1)
    h.create_pair(2)
    order = []

    def irq(vector):
        if not order:
            order.append("go")
            for tag in "ab":
                h.put(1, Io.WRITE, nsid=1, slba=0, cdw12=0, **h.prps(h.buffer(512, data=block(f"1{tag}")), 512))
                h.put(2, Io.WRITE, nsid=1, slba=0, cdw12=0, **h.prps(h.buffer(512, data=block(f"2{tag}")), 512))
            h.put(1, Io.WRITE, nsid=1, slba=0, cdw12=0, **h.prps(h.buffer(512, data=block("1c")), 512))
            h.ring(2)
            h.ring(1)

    h.ctrl.irq = irq
    h.submit(1, Io.FLUSH, nsid=1)
    written = [op.writes[0][:2] for op in h.ctrl.model.history]
    assert written == [b"1a", b"2a", b"1b", b"2b", b"1c"]  # one from each queue in turn
    # SQHD: the queue's head after fetching each command (one doorbell submitted three)
    assert [(e.sqid, e.sqhd) for e in h.reap(1)] == [(1, 1), (1, 2), (1, 3), (1, 4)]
    assert [(e.sqid, e.sqhd) for e in h.reap(2)] == [(2, 1), (2, 2)]


def test_interrupt_vectors_and_masks():
    h = Host()
    h.enable()
    h.create_pair(1, iv=3)
    h.create_pair(2, ien=0, iv=0)
    h.vectors.clear()
    h.cmd(0, Adm.ABORT)
    h.cmd(1, Io.FLUSH, nsid=1)
    h.cmd(2, Io.FLUSH, nsid=1)
    assert h.vectors == [0, 3]
    h.write("intms", 1 << 3)
    assert h.read("intms") == h.read("intmc") == 1 << 3
    h.submit(1, Io.FLUSH, nsid=1)
    assert h.vectors == [0, 3]
    h.write("intmc", 1 << 3)  # unmasked with a completion waiting: it interrupts now
    assert h.vectors == [0, 3, 3] and h.read("intms") == 0


# == asynchronous events ===========================================================================================
def test_async_event_request_completes_on_invalid_doorbells():
    h = Host()
    h.enable(entries=8)
    h.create_pair(1, entries=4)
    aer = h.submit(0, Adm.ASYNC_EVENT_REQUEST)
    assert h.peek(0) == []  # outstanding
    before = state(h.ctrl.model)
    h.write("sq_tail", 1, 5)  # queue 5 does not exist
    (e,) = h.reap(0)
    assert (e.cid, status(e)) == (aer, OK)
    assert (e.result & 7, e.result >> 8 & 0xFF, e.result >> 16 & 0xFF) == (0, 0, NvmeLogPage.ERROR)
    aer2 = h.submit(0, Adm.ASYNC_EVENT_REQUEST)
    h.write("sq_tail", 4, 1)  # beyond the queue's 4 entries
    assert h.peek(0) == []     # error events stay masked until the error log is read
    base = h.buffer(128)
    cid = h.submit(0, Adm.GET_LOG_PAGE, slba=NvmeLogPage.ERROR | (128 // 4 - 1) << 16, **h.prps(base, 128))
    log, e = h.reap(0)  # the log page, then the second event: reading the log cleared the first
    assert (log.cid, status(log)) == (cid, OK)
    entries = [NVME_ERROR_LOG.unpack(h.mem.read(base + i, 64)) for i in (0, 64)]
    assert [(x.error_count, x.sqid, x.cid) for x in entries] == [(2, 0xFFFF, 0xFFFF), (1, 0xFFFF, 0xFFFF)]
    assert (e.cid, e.result & 7, e.result >> 8 & 0xFF, e.result >> 16 & 0xFF) == (aer2, 0, 1, NvmeLogPage.ERROR)
    assert state(h.ctrl.model) == before
    # AERL + 1 outstanding at most
    aerl = NVME_ID_CTRL.unpack(h.identify(1)[1]).aerl
    for _ in range(aerl + 1):
        h.submit(0, Adm.ASYNC_EVENT_REQUEST)
    e = h.cmd(0, Adm.ASYNC_EVENT_REQUEST)
    assert status(e) == specific(Cs.AER_LIMIT)
    # the I/O queue still works after the bad doorbell write
    assert status(h.cmd(1, Io.FLUSH, nsid=1)) == OK


# == admin: features, abort, logs ==================================================================================
def test_features_abort_and_log_pages(host):
    h = host
    nq = h.admin(Adm.SET_FEATURES, cdw10=NvmeFeature.NUMBER_OF_QUEUES, cdw11=63 | 2 << 16)
    want = (NVME.IO_QUEUES - 1) | (NVME.IO_QUEUES - 1) << 16
    assert status(nq) == OK and nq.result == want
    assert h.admin(Adm.GET_FEATURES, cdw10=NvmeFeature.NUMBER_OF_QUEUES).result == want
    assert status(h.admin(Adm.SET_FEATURES, cdw10=NvmeFeature.VOLATILE_WRITE_CACHE, cdw11=1)) == \
        generic(Gs.INVALID_FIELD)  # no cache in this build
    assert h.admin(Adm.GET_FEATURES, cdw10=NvmeFeature.VOLATILE_WRITE_CACHE).result == 0
    for fid, value in ((NvmeFeature.ARBITRATION, 3), (NvmeFeature.INTERRUPT_COALESCING, 0x0A04),
                       (NvmeFeature.ASYNC_EVENT_CONFIG, 0x100)):
        assert status(h.admin(Adm.SET_FEATURES, cdw10=fid, cdw11=value)) == OK
        assert h.admin(Adm.GET_FEATURES, cdw10=fid).result == value
    for fid in (NvmeFeature.POWER_MANAGEMENT, NvmeFeature.TEMPERATURE_THRESHOLD, 0x7F):
        assert status(h.admin(Adm.GET_FEATURES, cdw10=fid)) == generic(Gs.INVALID_FIELD)
        assert status(h.admin(Adm.SET_FEATURES, cdw10=fid)) == generic(Gs.INVALID_FIELD)
    e = h.admin(Adm.ABORT, cdw10=1 | 5 << 16)
    assert status(e) == OK and e.result & 1 == 1
    # C0h: the statistics page with the model's counts; C1h: what is open
    assert status(h.io(1, Io.WRITE, data=block("w", 3), slba=2, cdw12=2)[0]) == OK
    assert status(h.io(1, Io.READ, nbytes=2 * 512, slba=2, cdw12=1)[0]) == OK
    e, raw = h.log(NvmeLogPage.ATOMFLASH_STATS, spec.LOG_PAGE.size)
    stats = spec.LOG_PAGE.unpack(raw)
    assert status(e) == OK and (stats.host_write_pages, stats.host_read_pages) == (3, 2) and stats.nand_programs == 0
    tok = h.io(1, Io.APPEND, data=block("ap", 2), cdw12=1)[0].result
    assert status(h.io(1, Io.TX_WRITE, data=block("t", 2), slba=5, cdw12=1, cdw13=42)[0]) == OK
    assert status(h.io(1, Io.TX_WRITE, data=block("u", 1), slba=6, cdw12=0, cdw13=42)[0]) == OK
    size = spec.OPEN_TX.size * LIM.max_open_tx + spec.OPEN_APPEND.size * LIM.max_appends
    e, raw = h.log(NvmeLogPage.ATOMFLASH_OPEN, size)
    assert status(e) == OK
    # pages written so far: LBA 6 rewritten counts twice (2 distinct LBAs staged, 3 pages written)
    assert spec.OPEN_TX.unpack(raw[:16]) == dict(tid=42, pages=3, flags=0, rsvd=0)
    assert not any(raw[16:spec.OPEN_TX.size * LIM.max_open_tx])
    first_append = spec.OPEN_APPEND.unpack(raw[spec.OPEN_TX.size * LIM.max_open_tx:][:16])
    assert (first_append.token, first_append.nlb) == (tok, 2)
    # 03h firmware slot: slot 1 active, its revision the Identify one
    e, raw = h.log(NvmeLogPage.FIRMWARE, 512)
    fr = NVME_ID_CTRL.unpack(h.identify(1)[1])
    assert status(e) == OK and raw[0] == 1 and raw[8:16] == h.identify(1)[1][64:72] and fr.frmw & 1
    # offsets into a page (LPA extended data), and pages that do not exist
    e, raw = h.log(NvmeLogPage.ATOMFLASH_OPEN, 16, cdw12=spec.OPEN_TX.size * LIM.max_open_tx)
    assert status(e) == OK and spec.OPEN_APPEND.unpack(raw).token == tok
    assert status(h.log(0x55, 64)[0]) == specific(Cs.INVALID_LOG_PAGE)
    assert status(h.log(NvmeLogPage.SMART, 64, cdw12=4096)[0]) == generic(Gs.INVALID_FIELD)  # beyond the page
    assert status(h.log(NvmeLogPage.SMART, 64, cdw12=2)[0]) == generic(Gs.INVALID_FIELD)  # not a dword
    assert status(h.log(NvmeLogPage.ERROR, 4 * PAGE)[0]) == generic(Gs.INVALID_FIELD)  # above MDTS (2 pages)


def test_smart_counters():
    h = Host(limits=Limits(capacity=256, lba_size=4096, max_transfer=64))
    h.enable()
    h.create_pair(1)
    s = h.smart()
    assert (s.data_units_read, s.data_units_written, s.host_reads, s.host_writes) == (0, 0, 0, 0)
    assert (s.power_cycles, s.unsafe_shutdowns, s.media_errors, s.available_spare) == (0, 0, 0, 100)
    assert status(h.io(1, Io.WRITE, data=bytes(4096), slba=0, cdw12=0)[0]) == OK  # 8 units of 512 bytes
    assert h.smart().data_units_written == 1  # rounded up to a thousand
    for lba in (0, 64):
        assert status(h.io(1, Io.WRITE, data=bytes(64 * 4096), slba=lba, cdw12=63)[0]) == OK
    s = h.smart()
    assert (s.data_units_written, s.host_writes) == (-(-(8 + 1024) // 1000), 3)  # 1032 units: 2
    assert status(h.io(1, Io.READ, nbytes=4096, slba=300, cdw12=0)[0]) == generic(Gs.LBA_OUT_OF_RANGE)
    for _ in range(2):
        assert status(h.io(1, Io.READ, nbytes=61 * 4096, slba=0, cdw12=60)[0]) == OK
    s = h.smart()
    assert (s.data_units_read, s.host_reads) == (1, 2)  # 976 units; the failed read is not counted
    assert status(h.io(1, Io.ATOMIC_WRITE, data=bytes(4096), cdw12=0,
                       mptr=h.buffer(8, data=(3).to_bytes(8, "little")))[0]) == OK
    assert h.smart().host_writes == 4
    assert h.smart().error_log_entries == 1


# == power =========================================================================================================
def test_shutdown_then_power_cycle_is_safe_and_power_cycle_alone_is_not(host):
    h = host
    assert status(h.io(1, Io.WRITE, data=block("durable", 2), slba=7, cdw12=1)[0]) == OK
    h.write("cc", h.read("cc") | regval("cc", shn=1))
    assert bits("csts", h.read("csts"), "shst") == 2
    h.ctrl.power_cycle()
    assert h.read("cc") == 0 and h.read("csts") == 0 and h.read("aqa") == 0
    h.enable()
    s = h.smart()
    assert (s.power_cycles, s.unsafe_shutdowns) == (1, 0)
    h.create_pair(1)
    e, got = h.io(1, Io.READ, nbytes=2 * 512, slba=7, cdw12=1)
    assert status(e) == OK and got == block("durable", 2)
    tok = h.io(1, Io.APPEND, data=block("lost"), cdw12=0)[0].result
    h.ctrl.power_cycle()  # no shutdown: unsafe; the append is gone
    h.enable()
    s = h.smart()
    assert (s.power_cycles, s.unsafe_shutdowns) == (2, 1)
    h.create_pair(1)
    assert status(h.cmd(1, Io.RELEASE, nsid=1, cdw14_15=tok)) == nv(Status.INVALID_TOKEN)
    # a shutdown followed by a write is not a clean shutdown any more
    h.write("cc", h.read("cc") | regval("cc", shn=2))
    assert bits("csts", h.read("csts"), "shst") == 2
    h.io(1, Io.WRITE, data=block("late"), slba=1, cdw12=0)
    h.ctrl.power_cycle()
    h.enable()
    assert h.smart().unsafe_shutdowns == 2
    # shutdown, reset, power cycle: clean
    h.write("cc", h.read("cc") | regval("cc", shn=1))
    h.write("cc", 0)
    h.ctrl.power_cycle()
    h.enable()
    assert (h.smart().power_cycles, h.smart().unsafe_shutdowns) == (4, 2)


def test_volatile_cache_durability_and_shutdown_flush():
    h = Host(volatile_cache=True)
    h.enable()
    h.create_pair(1)
    assert h.admin(Adm.GET_FEATURES, cdw10=NvmeFeature.VOLATILE_WRITE_CACHE).result == 1
    h.io(1, Io.WRITE, data=block("c"), slba=1, cdw12=0)
    h.io(1, Io.WRITE, data=block("f"), slba=2, cdw12=1 << 30)  # FUA
    assert [op.durable for op in h.ctrl.model.history] == [False, True]
    assert status(h.admin(Adm.SET_FEATURES, cdw10=NvmeFeature.VOLATILE_WRITE_CACHE, cdw11=0)) == OK
    assert all(op.durable for op in h.ctrl.model.history)  # turning the cache off flushed it
    h.io(1, Io.WRITE, data=block("d"), slba=3, cdw12=0)
    assert h.ctrl.model.history[-1].durable  # cache off: written through
    assert status(h.admin(Adm.SET_FEATURES, cdw10=NvmeFeature.VOLATILE_WRITE_CACHE, cdw11=1)) == OK
    h.io(1, Io.WRITE, data=block("e"), slba=4, cdw12=0)
    assert not h.ctrl.model.history[-1].durable
    h.write("cc", h.read("cc") | regval("cc", shn=1))
    assert h.ctrl.model.history[-1].durable  # shutdown flushed
    h.io(1, Io.WRITE, data=block("g"), slba=5, cdw12=0)
    assert not h.ctrl.model.history[-1].durable
    assert status(h.cmd(1, Io.FLUSH, nsid=0xFFFF_FFFF)) == OK  # Flush of every namespace
    assert h.ctrl.model.history[-1].durable


def test_disabled_controller_ignores_doorbells():
    h = Host()
    # before any enable: an admin command in memory and its doorbell do nothing
    asq, acq = h.mem.alloc(PAGE), h.mem.alloc(PAGE)
    h.sq[0], h.cq[0] = Sq(asq, 4, 0), Cq(acq, 4)
    h.put(0, Adm.IDENTIFY, slba=1, prp1=h.mem.alloc(PAGE))
    h.ring(0)
    assert h.peek(0) == [] and h.vectors == []
    # after a reset (CC.EN 1 -> 0): queues are gone, writes in an I/O queue never run
    h = Host()
    h.enable()
    h.create_pair(1)
    errors = h.smart().error_log_entries
    h.write("cc", 0)
    assert bits("csts", h.read("csts"), "rdy") == 0
    writes, vectors = h.mem.writes, list(h.vectors)
    h.put(1, Io.WRITE, nsid=1, cdw12=0, **h.prps(h.buffer(512, data=block("no")), 512))
    h.ring(1)
    h.write("cq_head", 1, 1)
    assert h.ctrl.model.contents() == {} and h.vectors == vectors and h.mem.writes == writes + 512 + 64
    # enabled again: the admin queue starts afresh; the doorbells above raised no event either
    h.enable()
    assert h.smart().error_log_entries == errors
    h.write("sq_tail", 1, 1)  # the old I/O queue does not exist now
    assert h.ctrl.model.contents() == {} and h.smart().error_log_entries == errors + 1
