"""Several host queue pairs on one transport (`atomflash.device`), and the
interleaved workload over them (`atomflash.workload`), against a fake SSD
behind the fake UARTBone of test_transport: host queue registers, commands
fetched from host memory and executed by `atomflash.model.Model` -- in a
random order across (and within) queues, completions held back -- and every
DMA address checked against the queue's slice of host memory."""

from __future__ import annotations

import random

import pytest

from atomflash import spec
from atomflash.device import BadQueue, Device, DeviceError, DeviceSet, Layout, hostmem_slices
from atomflash.model import Limits, Model
from atomflash.spec import Opcode, Status
from atomflash.transport import UartBoneTransport
from atomflash.workload import Mismatch, Recorder, random_workload, verify

from .test_transport import FakeUartBone

HQ = spec.HOST_REGS
CTRL = 0x9000_0000
LAYOUT = Layout(ctrl_base=CTRL, hostmem_base=0xA000_0000, hostmem_size=0x8_0000)
LBA = 512          # small blocks: little traffic on the fake link
CAPACITY = 64


class FakeSsd(FakeUartBone):
    """The host queue front-end and an FTL that is the semantic model.

    ``queue_pairs`` pairs (the last the firmware's, never used here).  A read
    of a ``cq_tail`` register (a host's poll) lets the device do a little
    work: fetch what the doorbells announced, execute up to two fetched
    commands chosen at random among every queue's, post their completions."""

    def __init__(self, queue_pairs: int = 3, *, seed: int = 1, hold: int = 4, **limits):
        self.n = queue_pairs
        self.rng = random.Random(seed)
        self.hold = hold                                  # commands fetched per queue before executing
        self.model = Model(Limits(capacity=CAPACITY, lba_size=LBA, max_transfer=16, max_atomic_pages=8, **limits))
        self.statuses: dict[Status, int] = {}
        self.q = [dict(sq_base=0, cq_base=0, size=0, sq_tail=0, sq_head=0, cq_head=0, cq_tail=0, phase=1)
                  for _ in range(queue_pairs)]
        self.fetched: list[tuple[int, object]] = []       # (qid, CMD) fetched, not executed
        self.touched: dict[int, set[int]] = {q: set() for q in range(queue_pairs)}   # byte addresses per queue
        self.executed = 0
        self.regs = {}
        for r in HQ:
            for i in range(r.count or 1):
                self.regs[(CTRL + r.offset + (r.stride or 0) * i) // 4] = (r.name, i)
        super().__init__()
        self.mem[(CTRL + HQ["id"].offset) // 4] = spec.HOST_REGS_ID
        self.mem[(CTRL + HQ["version"].offset) // 4] = spec.SPEC_VERSION
        self.mem[(CTRL + HQ["queues"].offset) // 4] = queue_pairs
        self.mem[(CTRL + HQ["max_entries"].offset) // 4] = 32

    # -- host memory, as the device's DMA sees it ------------------------------------
    def dma_read(self, q: int, addr: int, nbytes: int) -> bytes:
        self.touched[q].update(range(addr, addr + nbytes, 4))
        return b"".join(self.mem.get(addr // 4 + i, 0).to_bytes(4, "little") for i in range(-(-nbytes // 4)))[:nbytes]

    def dma_write(self, q: int, addr: int, data: bytes) -> None:
        self.touched[q].update(range(addr, addr + len(data), 4))
        data = data + b"\0" * (-len(data) % 4)
        for i in range(len(data) // 4):
            self.mem[addr // 4 + i] = int.from_bytes(data[4 * i:4 * i + 4], "little")

    # -- registers ---------------------------------------------------------------------
    def written(self, word, value):
        if word not in self.regs:
            return
        name, i = self.regs[word]
        if name in ("sq_base", "cq_base", "sq_tail", "cq_head"):
            self.q[i][name] = value
        elif name == "size":
            self.q[i].update(size=value, sq_tail=0, sq_head=0, cq_head=0, cq_tail=0, phase=1)
        self._mirror(i)

    def _mirror(self, i):
        for name in ("sq_head", "cq_tail", "size"):
            self.mem[(CTRL + HQ[name].offset + HQ[name].stride * i) // 4] = self.q[i][name]

    def reading(self, word, n):
        tails = {(CTRL + HQ["cq_tail"].offset + HQ["cq_tail"].stride * i) // 4 for i in range(self.n)}
        if tails & set(range(word, word + n)):
            self._work()

    def _work(self):
        for i, q in enumerate(self.q):
            while q["size"] and q["sq_head"] != q["sq_tail"] and sum(f == i for f, _ in self.fetched) < self.hold:
                raw = self.dma_read(i, q["sq_base"] + 64 * q["sq_head"], 64)
                self.fetched.append((i, spec.CMD.unpack(raw)))
                q["sq_head"] = (q["sq_head"] + 1) % q["size"]
                self._mirror(i)
        for _ in range(self.rng.randint(0, 2)):
            if not self.fetched:
                return
            i, cmd = self.fetched.pop(self.rng.randrange(len(self.fetched)))
            status, result = self._execute(i, cmd)
            self.statuses[status] = self.statuses.get(status, 0) + 1
            self._post(i, cmd.cid, status, result)

    def _post(self, i, cid, status, result):
        q = self.q[i]
        assert (q["cq_tail"] + 1) % q["size"] != q["cq_head"], "the host let its CQ fill"
        entry = spec.CPL.pack(result=result, sqhd=q["sq_head"], sqid=i, cid=cid, sf=int(status) << 1 | q["phase"])
        self.dma_write(i, q["cq_base"] + 16 * q["cq_tail"], entry)
        q["cq_tail"] = (q["cq_tail"] + 1) % q["size"]
        if q["cq_tail"] == 0:
            q["phase"] ^= 1
        self._mirror(i)

    def _execute(self, i, c):
        self.executed += 1
        m, op = self.model, Opcode(c.opcode)
        flags = spec.CMD.decompose("flags", c.flags)
        final = flags.tx_final
        if op == Opcode.IDENTIFY:
            lim = m.limits
            self.dma_write(i, c.buf, spec.IDENTIFY.pack(
                magic=spec.IDENTIFY_MAGIC, spec_version=spec.SPEC_VERSION, capacity=lim.capacity, lba_size=lim.lba_size,
                max_transfer=lim.max_transfer, max_atomic_pages=lim.max_atomic_pages, max_open_tx=lim.max_open_tx,
                max_pending=lim.max_pending, max_remap_triples=lim.max_remap_triples, max_appends=lim.max_appends,
                page_data=LBA))
            return Status.SUCCESS, 0
        if op in (Opcode.READ, Opcode.TX_READ):
            comp = m.read(c.lba, c.nlb) if op == Opcode.READ else m.tx_read(c.tid, c.lba, c.nlb, queue=i)
            if comp.ok:
                self.dma_write(i, c.buf, comp.data)
            return comp.status, 0
        if op == Opcode.WRITE:
            return m.write(c.lba, self.dma_read(i, c.buf, c.nlb * LBA)).status, 0
        if op == Opcode.DEALLOCATE:
            return m.trim(c.lba, c.nlb).status, 0
        if op == Opcode.FLUSH:
            return m.flush().status, 0
        if op == Opcode.ATOMIC_WRITE:
            entries = [spec.ATOMIC_ENTRY.unpack(self.dma_read(i, c.list + 16 * k, 16)) for k in range(c.nlist)]
            return m.atomic_write([(e.lba, self.dma_read(i, e.buf, LBA)) for e in entries]).status, 0
        if op == Opcode.TX_WRITE:
            return m.tx_write(c.tid, c.lba, self.dma_read(i, c.buf, c.nlb * LBA), final=bool(final),
                              new=bool(flags.tx_new), queue=i).status, 0
        if op == Opcode.TX_COMMIT:
            return m.tx_commit(c.tid, queue=i).status, 0
        if op == Opcode.TX_ABORT:
            return m.tx_abort(c.tid, queue=i).status, 0
        if op == Opcode.APPEND:
            comp = m.append(self.dma_read(i, c.buf, c.nlb * LBA), queue=i)
            return comp.status, comp.result
        if op == Opcode.REMAP:
            entries = [spec.REMAP_ENTRY.unpack(self.dma_read(i, c.list + spec.REMAP_ENTRY.size * k,
                                                             spec.REMAP_ENTRY.size)) for k in range(c.nlist)]
            return m.remap([(e.lba, e.token, e.nlb) for e in entries], queue=i).status, 0
        if op == Opcode.RELEASE:
            return m.release(c.token, queue=i).status, 0
        raise AssertionError(f"the fake does not do {op.name}")


@pytest.fixture
def ssd():
    fake = FakeSsd()
    t = UartBoneTransport(fake.port, timeout=10)
    yield fake, t
    t.close()


def test_hostmem_slices_are_disjoint_and_aligned():
    for n in (1, 2, 3, 5):
        sl = hostmem_slices(LAYOUT, n)
        assert len(sl) == n
        for (b, s), (b2, _) in zip(sl, sl[1:]):
            assert b + s <= b2
        assert all(b % 4096 == 0 and s % 4096 == 0 for b, s in sl)
        assert sl[-1][0] + sl[-1][1] <= LAYOUT.hostmem_base + LAYOUT.hostmem_size
    with pytest.raises(DeviceError):
        hostmem_slices(Layout(CTRL, 0xA000_0000, 4096), 2)


def test_two_queues_share_one_transport_and_split_host_memory(ssd):
    fake, t = ssd
    devs = Device.open_queues(t, LAYOUT, timeout=10)
    assert isinstance(devs, DeviceSet) and [d.qid for d in devs] == [0, 1]
    a, b = devs
    assert a.t is b.t is t and a.host_queues == 2 and a.queue_pairs == 3
    slices = hostmem_slices(LAYOUT, 2)
    assert (a.mem_base, a.mem_size) == slices[0] and (b.mem_base, b.mem_size) == slices[1]
    assert a.new_tid() != b.new_tid()                       # transaction ids are the device's, not a queue's
    blk = [bytes([k]) * LBA for k in range(8)]
    cmds = [d.submit_write(k, blk[k]) for k in range(8) for d in (devs[k % 2],)]
    assert devs.in_flight == 8
    devs.wait_all()
    reads = [(k, devs[(k + 1) % 2].submit_read(k)) for k in range(8)]
    devs.wait_all()
    assert all(c.data == blk[k] for k, c in reads) and all(c.ok for c in cmds)
    for q, d in enumerate(devs):                               # every DMA address in the queue's own slice
        assert fake.touched[q] and all(d.mem_base <= x < d.mem_base + d.mem_size for x in fake.touched[q])
    assert not fake.touched[0] & fake.touched[1]
    a.close()
    assert t.sock is not None                                  # b still uses it
    b.read(3)
    b.close()
    assert t.sock is None                                      # the last one closed it


def test_bad_queue_numbers(ssd):
    fake, t = ssd
    with pytest.raises(BadQueue, match="queue pair 2 is not a host queue.*0 .. 1 are the host's.*2 is the firmware"):
        Device(t, LAYOUT, qid=2, timeout=10)
    with pytest.raises(DeviceError, match="queue pair 7 is not a host queue"):
        Device(t, LAYOUT, qid=7, timeout=10)
    for bad in (-1, "1", 1.0, True):
        with pytest.raises(ValueError, match="qid"):
            Device(t, LAYOUT, qid=bad, timeout=10)
    with pytest.raises(BadQueue, match="3 host queues asked for, the device has 2"):
        Device.open_queues(t, LAYOUT, 3, timeout=10)
    with pytest.raises(ValueError, match="each at most once"):
        Device.open_queues(t, LAYOUT, [1, 1], timeout=10)
    d = Device(t, LAYOUT, qid=1, timeout=10)
    with pytest.raises(DeviceError, match="queue pair 1 already has a Device"):
        Device(t, LAYOUT, qid=1, timeout=10)
    only = Device.open_queues(t, LAYOUT, [0], timeout=10)
    assert [x.qid for x in only] == [0]
    d.close()
    only.close()


def _workload(seed, commands, *, stop_after=None, **limits):
    fake = FakeSsd(seed=seed, **limits)
    t = UartBoneTransport(fake.port, timeout=10)
    devs = Device.open_queues(t, LAYOUT, timeout=10)
    rec = Recorder(devs)

    class Stop(Exception):
        pass

    def on_step(step, what):
        if stop_after is not None and step + 1 >= stop_after:
            raise Stop
    try:
        random_workload(rec, random.Random(seed), commands=commands, span=24, salt=seed, on_step=on_step)
    except Stop:
        t.sync()   # the fake has every command the host sent; it works only when polled
    return fake, devs, rec


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_interleaved_workload_agrees_with_a_device_that_reorders(seed):
    """The fake runs the commands of both queues in a random order: every
    status and read the Recorder's model predicted must still hold, and the
    final contents are the model's."""
    fake, devs, rec = _workload(seed, 150)
    c = rec.counts
    assert c.commands == 150 and not rec.pending
    assert c.per_queue.get(0, 0) > 40 and c.per_queue.get(1, 0) > 40
    assert c.overlapped > 30 and c.max_in_flight >= 4, c
    assert c.writes and c.atomic and c.tx_committed and c.tx_final and c.tx_aborted and c.remaps and c.trims
    assert fake.model.contents() == rec.model.contents()
    assert verify(rec.model.history, fake.model.contents(), lba_size=LBA) == []
    devs.close()


@pytest.mark.parametrize("seed", [4, 5])
def test_interleaved_workload_near_the_resource_limits(seed):
    """A pending table of 6 entries, 2 append slots, 2 open transactions:
    commands are refused (PENDING_FULL, TOO_MANY_OPEN_TX) and the refusals
    must not depend on the order the device ran them in -- a command that
    could meet a full table runs alone."""
    fake, devs, rec = _workload(seed, 150, max_pending=6, max_appends=2, max_open_tx=2)
    refused = fake.statuses.get(Status.PENDING_FULL, 0) + fake.statuses.get(Status.TOO_MANY_OPEN_TX, 0)
    assert refused > 0, fake.statuses
    assert rec.counts.overlapped > 30
    assert fake.model.contents() == rec.model.contents()
    devs.close()


@pytest.mark.parametrize("seed", range(10, 16))
def test_a_cut_with_commands_in_flight_on_both_queues_is_judged_correct(seed):
    """Stop mid-workload: the fake has executed some of the commands in flight
    and not others, in its own order.  The oracle must accept what it shows
    (in-flight ops on different queues are concurrent: either may be newer)."""
    fake, devs, rec = _workload(seed, 200, stop_after=40 + seed)
    assert rec.pending, "the stop should leave commands in flight"
    shown = fake.model.contents()
    assert verify(rec.model.history, shown, lba_size=LBA) == []
    # and a real loss is still caught: drop an acknowledged write the device shows
    acked = [op for op in rec.model.history if op.durable and op.verb == "write"
             and all(shown.get(l) == b for l, b in op.writes.items())]
    lba = next(iter(acked[-1].writes))
    assert verify(rec.model.history, {**shown, lba: bytes(LBA)}, lba_size=LBA)
    devs.close()


def test_a_mismatch_is_reported_with_its_queue():
    fake = FakeSsd(seed=5)
    t = UartBoneTransport(fake.port, timeout=10)
    devs = Device.open_queues(t, LAYOUT, timeout=10)
    rec = Recorder(devs)
    rec.write(3, b"a" * LBA, q=1)
    fake.model.write(3, b"b" * LBA)        # the device changed behind the host's back
    with pytest.raises(Mismatch, match=r"read 3 x 1 \(queue 1\)"):
        rec.read(3, q=1)
    devs.close()
