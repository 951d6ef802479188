"""How `atomflash.Device` fails, against the fake SSD of test_device_queues
(host queue registers, an FTL that is `atomflash.model`): refused commands
give back their host memory, every exception is one of `atomflash.errors`,
a lost link fails what is in flight and frees it, a hung command times out
even while others complete (a fake clock: no wall time is measured),
transaction ids two hosts cannot silently share, the submit_tx_* forms
tracked like the blocking ones, and GET_LOG OPEN parsed into an OpenList."""

from __future__ import annotations

import pytest

import atomflash
from atomflash import errors, spec
from atomflash.device import Device, _Shared
from atomflash.model import Limits, Model
from atomflash.spec import LogPage, Opcode, Status
from atomflash.transport import UartBoneTransport

from .test_device_queues import CAPACITY, LAYOUT, LBA, FakeSsd

BIG = 64   # blocks a READ may move here: the size of the READ that failed after three refusals


class Ssd(FakeSsd):
    """The fake with a 64-block transfer limit, GET_LOG OPEN from the model's state, and two ways
    to misbehave: ``stall`` (opcodes it fetches and never completes) and ``drop_link`` (it closes
    the connection at the next poll)."""

    def __init__(self, **kw):
        super().__init__(**kw)
        self.model = Model(Limits(capacity=CAPACITY, lba_size=LBA, max_transfer=BIG, max_atomic_pages=8,
                                  max_open_tx=4, max_appends=4))
        self.stall: set[Opcode] = set()
        self.drop_link = False

    def reading(self, word, n):
        if self.drop_link:
            raise EOFError          # the fake UARTBone closes the connection
        super().reading(word, n)

    def _work(self):
        for i, q in enumerate(self.q):        # FakeSsd._work, but what ``stall`` names stays fetched
            while q["size"] and q["sq_head"] != q["sq_tail"] and sum(f == i for f, _ in self.fetched) < self.hold:
                self.fetched.append((i, spec.CMD.unpack(self.dma_read(i, q["sq_base"] + 64 * q["sq_head"], 64))))
                q["sq_head"] = (q["sq_head"] + 1) % q["size"]
                self._mirror(i)
        for _ in range(self.rng.randint(0, 2)):
            runnable = [x for x in self.fetched if Opcode(x[1].opcode) not in self.stall]
            if not runnable:
                return
            self.fetched.remove(i_c := self.rng.choice(runnable))
            status, result = self._execute(*i_c)
            self._post(i_c[0], i_c[1].cid, status, result)

    def _execute(self, i, c):
        if Opcode(c.opcode) == Opcode.GET_LOG and c.log_page == LogPage.OPEN:
            m = self.model
            # a host's queue sees what it owns (the device's OPEN page; the firmware's pair would see all)
            txs = [spec.OPEN_TX.pack(tid=tid, pages=len(staged)) for (q, tid), staged in m.tx.items() if q == i]
            txs += [bytes(spec.OPEN_TX.size)] * (m.limits.max_open_tx - len(txs))
            apps = [spec.OPEN_APPEND.pack(token=a.token, nlb=len(a.blocks)) if (a := m.appends.get(h)) and a.owner == i
                    else bytes(spec.OPEN_APPEND.size) for h in range(m.limits.max_appends)]
            self.dma_write(i, c.buf, b"".join(txs + apps))
            return Status.SUCCESS, 0
        return super()._execute(i, c)


class FakeClock:
    """A Device's clock that moves only when told, or by ``step`` each time it is read."""

    def __init__(self, step: float = 0.0):
        self.now, self.step = 1000.0, step

    def __call__(self):
        self.now += self.step
        return self.now


@pytest.fixture
def ssd():
    fake = Ssd()
    t = UartBoneTransport(fake.port, timeout=10)
    dev = Device(t, LAYOUT, timeout=30)
    yield fake, dev
    t.close()


def free_bytes(dev):
    return sum(size for _, size in dev.mem.free)


def test_the_library_is_atomflash_device():
    assert atomflash.Device is Device
    assert issubclass(errors.TransportError, ConnectionError) and issubclass(errors.CommandTimeout, TimeoutError)
    for cls in (errors.AtomflashError, errors.DeviceError, errors.BadQueue, errors.HostMemoryFull,
                errors.InvalidArgument, errors.TransportError, errors.CommandTimeout, errors.ReadyTimeout,
                errors.TidInUse, atomflash.scsi.CdbError if hasattr(atomflash, "scsi") else errors.Error):
        assert issubclass(cls, errors.Error)


def test_refused_reads_keep_no_host_memory(ssd):
    """Three READs of LBA -1 then a valid 64-block READ: the refused READs leave no host memory taken, so
    the last one does not fail with HostMemoryFull."""
    fake, dev = ssd
    n = dev.heap_bytes // 3 // LBA          # three leaks of this size would fill the queue's share
    assert n >= BIG
    dev.write(0, bytes(range(256)) * (LBA // 256))
    free = free_bytes(dev)
    for _ in range(3):
        with pytest.raises(errors.LbaOutOfRange, match="lba -1 does not fit.*not sent") as e:
            dev.read(-1, n)
        assert not e.value.submitted and isinstance(e.value, errors.Error)
    assert free_bytes(dev) == free
    data = dev.read(0, BIG)
    assert data[:LBA] == bytes(range(256)) * (LBA // 256) and len(data) == BIG * LBA
    assert free_bytes(dev) == free


@pytest.mark.parametrize("call, error", [
    (lambda d: d.read(-1), errors.LbaOutOfRange),
    (lambda d: d.read(2**64), errors.LbaOutOfRange),
    (lambda d: d.read(0, -1), errors.TransferTooLarge),
    (lambda d: d.write(-5, bytes(LBA)), errors.LbaOutOfRange),
    (lambda d: d.write(0, bytes(LBA + 1)), errors.InvalidArgument),
    (lambda d: d.trim(-1, 2), errors.LbaOutOfRange),
    (lambda d: d.tx_write(2**32, 0, bytes(LBA)), errors.InvalidTid),
    (lambda d: d.tx_commit(-1), errors.InvalidTid),
    (lambda d: d.tx_read(3, -1), errors.LbaOutOfRange),
    (lambda d: d.release(-1), errors.InvalidToken),
    (lambda d: d.release(2**64), errors.InvalidToken),
    (lambda d: d.remap([(-1, 5, 1)]), errors.LbaOutOfRange),
    (lambda d: d.remap([(1, 2**64, 1)]), errors.InvalidToken),
    (lambda d: d.remap([(1, 5, 2**32)]), errors.RemapLength),
    (lambda d: d.atomic_write([(1, bytes(LBA)), (-1, bytes(LBA))]), errors.LbaOutOfRange),
    (lambda d: d.atomic_write([(1, bytes(LBA - 1))]), errors.InvalidArgument),
    (lambda d: d.hint(-1), errors.InvalidField),
    (lambda d: d.read("0"), errors.InvalidArgument),
])
def test_every_refusal_is_an_atomflash_error_and_holds_nothing(ssd, call, error):
    fake, dev = ssd
    free, executed = free_bytes(dev), fake.executed
    with pytest.raises(error) as e:
        call(dev)
    assert isinstance(e.value, errors.Error)
    assert free_bytes(dev) == free and fake.executed == executed and dev.in_flight == 0


def test_a_status_failure_gives_back_its_memory(ssd):
    fake, dev = ssd
    free = free_bytes(dev)
    with pytest.raises(errors.LbaOutOfRange) as e:
        dev.read(CAPACITY - 1, 2)               # the device's refusal this time
    assert e.value.submitted and free_bytes(dev) == free
    with pytest.raises(errors.UnknownTx):
        dev.tx_commit(12345)
    assert free_bytes(dev) == free


def test_a_lost_link_fails_what_is_in_flight_and_frees_it(ssd):
    fake, dev = ssd
    free = free_bytes(dev)
    fake.stall = {Opcode.WRITE}
    cmds = [dev.submit_write(k, bytes([k]) * LBA) for k in range(4)]
    assert dev.in_flight == 4 and free_bytes(dev) < free
    fake.drop_link = True
    with pytest.raises(errors.TransportError):
        dev.wait(cmds[0])
    assert dev.in_flight == 0 and free_bytes(dev) == free
    for c in cmds:
        assert c.done and c.status is None
        with pytest.raises(errors.TransportError):
            c.check()
    with pytest.raises(errors.TransportError, match="lost earlier"):
        dev.read(0)
    assert free_bytes(dev) == free


def test_a_stalled_drive_times_out(ssd):
    fake, dev = ssd
    dev.clock = FakeClock(step=1.0)           # each reading: one second later
    fake.stall = set(Opcode)
    with pytest.raises(errors.CommandTimeout, match="flush .* did not complete within 30 s") as e:
        dev.flush()
    assert e.value.command.opcode == Opcode.FLUSH and not e.value.command.done
    assert dev.in_flight == 1                 # it stays in flight: the drive may still complete it
    fake.stall = set()
    dev.clock.step = 0
    dev.wait(e.value.command, timeout=30)     # waited for again, it completes: collected, memory given back
    assert dev.in_flight == 0


def test_a_hung_command_times_out_while_others_complete(ssd):
    fake, dev = ssd
    dev.clock = clock = FakeClock()
    fake.stall = {Opcode.FLUSH}
    flush = dev.submit_flush()
    with pytest.raises(errors.CommandTimeout) as e:
        for k in range(40):                   # each write completes; the clock moves 1 s per write
            dev.write(k % CAPACITY, bytes([k]) * LBA)
            clock.now += 1.0
    assert e.value.command is flush and 30 <= k < 40   # not before its 30 s, and not never


def test_submitted_transactions_are_tracked(ssd):
    fake, dev = ssd
    a = dev.submit_tx_write(77, 1, bytes(LBA))
    b = dev.submit_tx_write(78, 2, bytes(LBA), final=True)
    assert {77, 78} <= dev.open_tids
    dev.wait_all()
    assert 77 in dev.open_tids and 78 not in dev.open_tids and a.ok and b.ok
    dev.wait(dev.submit_tx_commit(77))
    assert 77 not in dev.open_tids
    dev.wait(dev.submit_tx_write(79, 3, bytes(LBA)))
    dev.wait(dev.submit_tx_abort(79))
    assert not dev.open_tids


def test_two_hosts_cannot_share_a_transaction(ssd, monkeypatch):
    """A transaction is its queue pair's: a host on another queue neither finds it nor disturbs it (its
    own tid 5 is another transaction); on the same queue, ``tx_new`` refuses an open tid."""
    fake, dev = ssd
    other = Device(dev.t, LAYOUT, qid=1, timeout=30)
    other._shared = _Shared()                 # another process: its own idea of what it opened
    dev.tx_write(5, 10, b"A" * LBA)           # the CLI's way: tx write 5 ... (joins or opens)
    with pytest.raises(errors.error_class(Status.UNKNOWN_TX)):
        other.tx_commit(5)                    # queue 0's transaction: unknown to queue 1
    with other.transaction(5) as tx:          # queue 1's own tid 5
        tx.write(11, b"B" * LBA)
    assert tx.state == "committed" and dev.read(11) == b"B" * LBA and dev.read(10) == bytes(LBA)
    assert fake.model.tx[(0, 5)] == {10: b"A" * LBA} and 5 not in other.open_tids
    with pytest.raises(errors.TidInUse):
        dev.tx_write(5, 12, b"C" * LBA, new=True)     # open on its own queue: refused, not shared
    draws = iter([5, 6])                      # a drawn id that collides is drawn again
    monkeypatch.setattr(dev, "new_tid", lambda: next(draws))
    with dev.transaction() as tx:
        tx.write(12, b"C" * LBA)
    monkeypatch.undo()
    assert tx.tid == 6 and tx.state == "committed" and dev.read(12) == b"C" * LBA
    assert dev.open_list().tids == [5]
    dev.tx_commit(5)
    assert dev.read(10) == b"A" * LBA and dev.read(11) == b"B" * LBA
    ids = {dev.new_tid() for _ in range(50)}
    assert len(ids) == 50 and 0 not in ids and max(ids) > 2**16    # drawn from the whole 32-bit space
    other._shared = dev._shared
    other.close()


def test_open_list(ssd):
    fake, dev = ssd
    assert dev.open_list() == atomflash.OpenList((), ())
    dev.tx_write(9, 1, bytes(LBA))
    dev.tx_write(9, 2, bytes(LBA))
    tok = dev.append(bytes(2 * LBA))
    ol = dev.open_list()
    assert ol.transactions == ((9, 2, False),) and ol.appends == ((tok, 2),) and ol.tokens == [tok]
    dev.release(tok)
    dev.tx_abort(9)
    assert dev.open_list() == atomflash.OpenList((), ())


def test_a_link_lost_while_submitting_gives_back_the_buffer(ssd):
    fake, dev = ssd
    free = free_bytes(dev)
    fake.drop_link = True                     # the link goes at the next read: the flow-control read inside
    with pytest.raises(errors.TransportError):    # this write's data (more than one window of words)
        dev.write(0, bytes(LBA * 40))
    assert free_bytes(dev) == free and dev.in_flight == 0


def test_a_recorder_sees_a_link_lost_behind_its_back(ssd):
    """The link fails in a call the workload does not see (a statistics sample that swallows the
    error): the recorder's next settle raises that error and keeps the lost commands in flight
    (their outcome is the oracle's to judge), rather than judging a completion that never came."""
    from atomflash.workload import Recorder

    fake, dev = ssd
    rec = Recorder(dev)
    fake.stall = {Opcode.WRITE}
    for k in range(3):
        rec.issue(0, "write", k, bytes([k + 1]) * LBA)
    fake.drop_link = True
    with pytest.raises(errors.TransportError):
        dev.stats()
    with pytest.raises(errors.TransportError):
        rec.settle()
    assert rec.in_flight() == 3 and len(rec.in_flight_ops) == 3
