"""`atomflash.Device` over NVMe (`Device.attach_nvme`): a Device on an I/O queue of `NvmeHost`
driving the reference controller (`atomflash.model.nvme`), checked against a plain `Model` fed the
same operations (data, tokens, statuses as exception classes), against the debug-port Device on the
fake SSD of tb/host (the same call raises the same class on both), several commands in flight
collected in any order, several queues, identify/stats/open_list, and the NVMe statuses atomflash
has no name for."""

from __future__ import annotations

import random

import pytest

import atomflash
from atomflash import errors, spec
from atomflash.device import Device, DeviceSet, NvmeDevice, _Shared
from atomflash.hostmem import HostMemory
from atomflash.model import Limits, Model
from atomflash.model import nvme as reference
from atomflash.model.nvme import NvmeController
from atomflash.nvme import NvmeError, NvmeHost
from atomflash.spec import NvmeGenericStatus, NvmeIoOpcode, Opcode, Status
from atomflash.transport import UartBoneTransport
from atomflash.workload import Recorder, random_workload, verify

from ..host.test_device_failures import Ssd
from ..host.test_device_queues import LAYOUT

LIMITS = Limits(capacity=128, lba_size=512, max_transfer=16, max_atomic_pages=8, max_open_tx=4, max_pending=64,
                max_remap_triples=4, max_appends=4)
BLK = LIMITS.lba_size


def bring_up(limits=LIMITS, io_queues=2, queue_entries=8, link=None, **ctrl_kw):
    memory = HostMemory()
    ctrl = NvmeController(memory, limits=limits, **ctrl_kw)
    host = NvmeHost(link(ctrl) if link else ctrl, memory, io_queues=io_queues, queue_entries=queue_entries)
    return ctrl, host


@pytest.fixture
def nvme():
    ctrl, host = bring_up()
    dev = Device.attach_nvme(host)
    yield ctrl, dev
    dev.close()


def test_attach_identify_and_the_package_exports():
    ctrl, host = bring_up()
    dev = atomflash.Device.attach_nvme(host)          # initializes the host
    assert isinstance(dev, atomflash.Device) and isinstance(dev, NvmeDevice) and dev.qid == 1
    assert atomflash.NvmeHost is NvmeHost and atomflash.NvmeError is NvmeError and atomflash.DeviceSet is DeviceSet
    info = dev.identify()
    assert info == dev.info and set(info) == {f.name for f in spec.IDENTIFY.fields}
    assert Limits.from_identify(info) == LIMITS
    assert (info.magic, info.spec_version) == (spec.IDENTIFY_MAGIC, spec.SPEC_VERSION)
    assert info.queue_depth == 8 and info.awupf == LIMITS.max_atomic_pages and info.volatile_cache == 0
    assert (dev.lba_size, dev.capacity) == (LIMITS.lba_size, LIMITS.capacity)
    with pytest.raises(errors.DeviceError, match="already has a Device"):
        Device.attach_nvme(host, 1)
    with pytest.raises(errors.BadQueue):
        Device.attach_nvme(host, 3)
    with pytest.raises(errors.InvalidArgument):
        Device.attach_nvme(host, 0)
    dev.close()
    Device.attach_nvme(host, 1).close()             # closed: the queue may be attached again
    cached = Device.attach_nvme(bring_up(Limits(capacity=64, lba_size=4096), volatile_cache=True)[1])
    assert cached.info.volatile_cache == 1 and cached.lba_size == 4096 and cached.capacity == 64


def expect(call, want):
    """``call()`` raises the class of the model's status ``want`` (or returns when SUCCESS)."""
    if want.status == Status.SUCCESS:
        return call()
    with pytest.raises(errors.error_class(want.status)):
        call()
    return None


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_every_verb_agrees_with_a_plain_model(seed, nvme):
    rng = random.Random(seed)
    ctrl, dev = nvme
    model = Model(LIMITS)
    tokens, tids, seen = [], [], set()
    for _ in range(500):
        op = rng.choice(["write", "read", "trim", "atomic", "tx", "append", "remap", "release", "flush", "hint"])
        lba = rng.randrange(LIMITS.capacity + 3)
        nlb = rng.choice([1, 1, 2, 3, LIMITS.max_transfer, LIMITS.max_transfer + 1])
        data = rng.randbytes(nlb * BLK)
        if op == "write":
            fua = rng.random() < 0.3
            expect(lambda: dev.write(lba, data, fua=fua), model.write(lba, data, fua=fua))
        elif op == "read":
            nlb = rng.choice([0, nlb])
            want = model.read(lba, nlb)
            got = expect(lambda: dev.read(lba, nlb), want)
            assert want.status != Status.SUCCESS or got == want.data
        elif op == "trim":
            nlb = rng.choice([0, nlb])
            expect(lambda: dev.trim(lba, nlb), model.trim(lba, nlb))
        elif op == "atomic":
            entries = [(rng.randrange(LIMITS.capacity + 1), rng.randbytes(BLK)) for _ in range(rng.randrange(10))]
            expect(lambda: dev.atomic_write(entries), model.atomic_write(entries))
        elif op == "tx":
            tid = rng.choice(tids + [0, rng.randrange(1, 40)])
            step = rng.choice(["write", "write", "read", "commit", "abort"])
            if step == "write":
                final, new = rng.random() < 0.2, rng.random() < 0.3
                expect(lambda: dev.tx_write(tid, lba, data, final=final, new=new),
                       model.tx_write(tid, lba, data, final=final, new=new))
                tids.append(tid)
            elif step == "read":
                want = model.tx_read(tid, lba, nlb) if tid else model.read(lba, nlb)   # tid 0: a plain READ
                got = expect(lambda: dev.tx_read(tid, lba, nlb), want)
                assert want.status != Status.SUCCESS or got == want.data
            else:
                expect(lambda: getattr(dev, f"tx_{step}")(tid), getattr(model, f"tx_{step}")(tid))
        elif op == "append":
            want = model.append(data)
            token = expect(lambda: dev.append(data), want)
            if token is not None:
                assert token == want.result
                tokens.append((token, nlb))
        elif op == "remap" and tokens:
            picked = [tokens.pop(rng.randrange(len(tokens))) for _ in range(min(len(tokens), rng.randrange(1, 3)))]
            triples = [(rng.choice([lba, 0]), t, n ^ rng.choice([0, 0, 0, 1])) for t, n in picked]
            expect(lambda: dev.remap(triples), model.remap(triples))
        elif op == "release" and tokens:
            token, _ = tokens.pop(rng.randrange(len(tokens)))
            token ^= rng.choice([0, 0, 1 << 40])
            expect(lambda: dev.release(token), model.release(token))
        elif op == "flush":
            expect(dev.flush, model.flush())
        elif op == "hint":
            hint = rng.choice([0, 1, 2, 9])
            expect(lambda: dev.hint(hint), model.hint(hint))
        seen.add(op)
    for lba in range(LIMITS.capacity):
        assert dev.read(lba) == model.read(lba, 1).data
    assert ctrl.model.contents() == model.contents()
    assert dev.in_flight == 0


def test_transactions_through_the_helper(nvme):
    ctrl, dev = nvme
    model = Model(LIMITS)
    with dev.transaction() as tx:
        tx.write(3, b"a" * BLK)
        tx.write(4, b"b" * BLK)
        assert tx.read(3) == b"a" * BLK and dev.read(3) == bytes(BLK)     # unmapped: zeros
        assert dev.open_list().tids == [tx.tid] and dev.open_tids == {tx.tid}
    assert tx.state == "committed" and dev.read(3, 2) == b"a" * BLK + b"b" * BLK and not dev.open_tids
    with pytest.raises(KeyError):
        with dev.transaction() as tx:
            tx.write(5, b"c" * BLK)
            raise KeyError("the block fails")
    assert tx.state == "aborted" and dev.read(5) == bytes(BLK) and dev.open_list().tids == []
    with dev.transaction() as tx:
        tx.write(6, b"d" * BLK, final=True)                 # the final write commits
    assert tx.state == "committed" and dev.read(6) == b"d" * BLK
    # tids are each queue's: another queue's tid 5 is another transaction; on the same queue a caller's
    # open id raises TidInUse and a drawn one is drawn again
    other = Device.attach_nvme(dev.host, 2)
    other._shared = _Shared()
    dev.tx_write(5, 10, b"A" * BLK)
    with other.transaction(5) as tx:
        tx.write(11, b"B" * BLK)
    assert tx.state == "committed" and dev.read(11) == b"B" * BLK and dev.read(10) == bytes(BLK)
    with pytest.raises(errors.TidInUse):
        dev.tx_write(5, 13, b"X" * BLK, new=True)
    draws = iter([5, 6])
    saved, dev.new_tid = dev.new_tid, lambda: next(draws)
    with dev.transaction() as tx:
        tx.write(12, b"C" * BLK)
    dev.new_tid = saved
    assert tx.tid == 6 and dev.read(12) == b"C" * BLK and dev.open_list().tids == [5]
    dev.tx_commit(5)
    assert dev.read(10) == b"A" * BLK and dev.read(13) == bytes(BLK)
    for lba, blk in {3: b"a", 4: b"b", 6: b"d", 10: b"A", 11: b"B", 12: b"C"}.items():
        model.write(lba, blk * BLK)
    assert ctrl.model.contents() == model.contents()


def test_commands_in_flight_collected_in_any_order(nvme):
    ctrl, dev = nvme
    rng = random.Random(7)
    blocks = {k: rng.randbytes(BLK) for k in range(6)}
    cmds = [dev.submit_write(k, blocks[k]) for k in range(4)]
    app = dev.submit_append(b"z" * 2 * BLK)
    bad = dev.submit_tx_commit(999)
    assert dev.in_flight == 6
    # the queue holds at most entries - 1 commands: the next submission collects completions first
    read = dev.submit_read(0, 4)
    assert dev.in_flight <= dev.qsize - 1
    order = cmds + [app, bad, read]
    rng.shuffle(order)
    for c in order:
        dev.wait(c, check=False)
    assert all(c.ok for c in cmds) and read.data == b"".join(blocks[k] for k in range(4))
    assert app.ok and app.result and dev.open_list().appends == ((app.result, 2),)
    assert bad.status == Status.UNKNOWN_TX and bad.done and not bad.ok
    with pytest.raises(errors.UnknownTx):
        bad.check()
    # identify and log pages are commands too: in flight until collected
    log = dev.submit(Opcode.GET_LOG, read_bytes=spec.LOG_PAGE.size, detail="get log")
    w = dev.submit_write(5, blocks[5])
    assert dev.in_flight == 2 and not log.done
    done = dev.poll()
    assert {c.cid for c in done} == {log.cid, w.cid} and dev.in_flight == 0
    assert spec.LOG_PAGE.unpack(log.data).host_write_pages == 4 + 2
    dev.wait_all()
    with pytest.raises(errors.DeviceError, match="not in flight"):
        dev.wait(type(w)(w.cid, Opcode.FLUSH, "a stranger"))


def test_a_device_set_over_several_io_queues():
    ctrl, host = bring_up(io_queues=3)
    devs = Device.attach_nvme_all(host)
    assert isinstance(devs, DeviceSet) and [d.qid for d in devs] == [1, 2, 3]
    a, b, c = devs
    assert a.new_tid() != b.new_tid() and a._shared is b._shared
    blk = [bytes([k]) * BLK for k in range(9)]
    cmds = [devs[k % 3].submit_write(k, blk[k]) for k in range(9)]
    assert devs.in_flight == 9
    got = Device.poll_any(devs, block=True)
    assert {x.cid for x in got} and all(x.ok for x in got)
    devs.wait_all()
    reads = [(k, devs[(k + 1) % 3].submit_read(k)) for k in range(9)]
    devs.wait_all()
    assert all(r.data == blk[k] for k, r in reads) and all(x.done for x in cmds)
    devs.close()
    two = Device.attach_nvme_all(host, 2)
    assert [d.qid for d in two] == [1, 2]
    with pytest.raises(errors.BadQueue):
        Device.attach_nvme_all(host, 4)
    with pytest.raises(errors.InvalidArgument):
        Device.attach_nvme_all(host, [3, 3])
    assert [d.qid for d in Device.attach_nvme_all(host, [3])] == [3]
    two.close()


@pytest.mark.parametrize("seed", [1, 2])
def test_the_interleaved_workload_over_nvme_queues(seed):
    """The workload library's interleaved streams on two NVMe queues: every status and read the
    Recorder's model predicted holds, and the controller ends with the model's contents."""
    ctrl, host = bring_up(Limits(capacity=64, lba_size=512, max_transfer=16, max_atomic_pages=8), queue_entries=16)
    devs = Device.attach_nvme_all(host)
    rec = Recorder(devs)
    random_workload(rec, random.Random(seed), commands=150, span=24, salt=seed)
    assert rec.counts.commands == 150 and not rec.pending and rec.counts.max_in_flight >= 2
    assert ctrl.model.contents() == rec.model.contents()
    assert verify(rec.model.history, ctrl.model.contents(), lba_size=512) == []
    devs.close()


def test_identify_stats_and_open_list(nvme):
    ctrl, dev = nvme
    assert dev.stats()["host_write_pages"] == 0 and dev.open_list() == atomflash.OpenList((), ())
    dev.write(0, bytes(3 * BLK))
    dev.atomic_write([(5, bytes(BLK)), (6, bytes(BLK))])
    dev.read(0, 2)
    dev.tx_write(9, 1, bytes(BLK))
    dev.tx_write(9, 2, bytes(BLK))
    tok = dev.append(bytes(2 * BLK))
    with pytest.raises(errors.LbaOutOfRange):
        dev.read(LIMITS.capacity)                 # failed: not counted
    s = dev.stats()
    assert (s["host_write_pages"], s["host_read_pages"]) == (3 + 2 + 2 + 2, 2)
    assert set(s) == {f.name for f in spec.LOG_PAGE.fields if not f.name.startswith("rsvd")}
    ol = dev.open_list()
    assert ol.transactions == ((9, 2, False),) and ol.appends == ((tok, 2),) and ol.tokens == [tok]
    dev.release(tok)
    dev.tx_abort(9)
    assert dev.open_list() == atomflash.OpenList((), ())
    assert dev.identify().capacity == LIMITS.capacity
    # the snapshot page is the firmware's: a host queue gets INVALID_FIELD, as over the debug port
    c = dev.wait(dev.submit(Opcode.GET_LOG, log_page=int(spec.LogPage.SNAPSHOT), read_bytes=64), check=False)
    assert c.status == Status.INVALID_FIELD


# -- the same call raises the same class over the debug port and over NVMe ---------------------------------------
class DebugSsd(Ssd):
    """tb/host's fake SSD (the debug port's host queues over a fake UARTBone), with HINT."""

    def _execute(self, i, c):
        if Opcode(c.opcode) == Opcode.HINT:
            return self.model.hint(c.hint).status, 0
        return super()._execute(i, c)


def open_txs(d, n):
    for tid in range(1, n + 1):
        d.tx_write(tid, tid, bytes(512))


def appended(d, nlb=2):
    return d.append(bytes(nlb * 512))


REFUSALS = [   # (what, call, the class the debug-port Device raises)
    ("read beyond capacity", lambda d: d.read(d.capacity - 1, 2), errors.LbaOutOfRange),
    ("read lba -1 (unsent)", lambda d: d.read(-1), errors.LbaOutOfRange),
    ("read 0 blocks", lambda d: d.read(0, 0), errors.ZeroLength),
    ("read too large", lambda d: d.read(0, d.info.max_transfer + 1), errors.TransferTooLarge),
    ("read nlb -1 (unsent)", lambda d: d.read(0, -1), errors.TransferTooLarge),
    ("write too large", lambda d: d.write(0, bytes((d.info.max_transfer + 1) * 512)), errors.TransferTooLarge),
    ("write part of a block", lambda d: d.write(0, bytes(513)), errors.InvalidArgument),
    ("write beyond capacity", lambda d: d.write(d.capacity, bytes(512)), errors.LbaOutOfRange),
    ("append too large", lambda d: d.append(bytes((d.info.max_transfer + 1) * 512)), errors.TransferTooLarge),
    ("tx write too large", lambda d: d.tx_write(3, 0, bytes((d.info.max_transfer + 1) * 512)),
     errors.TransferTooLarge),
    ("tx read too large", lambda d: d.tx_read(3, 0, d.info.max_transfer + 1), errors.TransferTooLarge),
    ("trim beyond capacity", lambda d: d.trim(d.capacity - 1, 2), errors.LbaOutOfRange),
    ("trim 0 blocks", lambda d: d.trim(0, 0), errors.ZeroLength),
    ("tx commit tid 0", lambda d: d.tx_commit(0), errors.InvalidTid),
    ("tx write tid 0", lambda d: d.tx_write(0, 0, bytes(512)), errors.InvalidTid),
    ("tx write tid 2**32 (unsent)", lambda d: d.tx_write(2**32, 0, bytes(512)), errors.InvalidTid),
    ("tx commit unknown", lambda d: d.tx_commit(12345), errors.UnknownTx),
    ("tx abort unknown", lambda d: d.tx_abort(12345), errors.UnknownTx),
    ("tx read unknown", lambda d: d.tx_read(12345, 0), errors.UnknownTx),
    ("too many open tx", lambda d: open_txs(d, 5), errors.TooManyOpenTx),
    ("tid in use", lambda d: (d.tx_write(7, 0, bytes(512)), d.tx_write(7, 1, bytes(512), new=True)),
     errors.TidInUse),
    ("release unknown token", lambda d: d.release(12345), errors.InvalidToken),
    ("release token -1 (unsent)", lambda d: d.release(-1), errors.InvalidToken),
    ("remap unknown token", lambda d: d.remap([(0, 12345, 1)]), errors.InvalidToken),
    ("remap wrong length", lambda d: d.remap([(0, appended(d), 1)]), errors.RemapLength),
    ("remap duplicate lba", lambda d: d.remap([(0, appended(d), 2), (0, appended(d), 2)]), errors.DuplicateLba),
    ("remap nothing", lambda d: d.remap([]), errors.ZeroLength),
    ("remap too many", lambda d: d.remap([(i, 1 + i, 1) for i in range(d.info.max_remap_triples + 1)]),
     errors.RemapTooLarge),
    ("atomic nothing", lambda d: d.atomic_write([]), errors.ZeroLength),
    ("atomic duplicate lba", lambda d: d.atomic_write([(1, bytes(512)), (1, bytes(512))]), errors.DuplicateLba),
    ("atomic too large", lambda d: d.atomic_write([(i, bytes(512)) for i in range(d.info.max_atomic_pages + 1)]),
     errors.GroupTooLarge),
    ("atomic beyond capacity", lambda d: d.atomic_write([(1, bytes(512)), (d.capacity, bytes(512))]),
     errors.LbaOutOfRange),
    ("hint unknown", lambda d: d.hint(9), errors.InvalidField),
    ("hint -1 (unsent)", lambda d: d.hint(-1), errors.InvalidField),
]


@pytest.mark.parametrize("what, call, error", REFUSALS, ids=[r[0] for r in REFUSALS])
def test_the_same_failure_raises_the_same_class_as_over_the_debug_port(what, call, error):
    fake = DebugSsd()
    with Device(UartBoneTransport(fake.port, timeout=10), LAYOUT, timeout=30) as debug:
        with pytest.raises(error) as over_debug:
            call(debug)
    with Device.attach_nvme(bring_up(fake.model.limits)[1]) as dev:     # the same limits
        with pytest.raises(error) as over_nvme:
            call(dev)
        assert type(over_nvme.value) is type(over_debug.value) and dev.in_flight == 0


# -- what NVMe has and atomflash has not ------------------------------------------------------------------------------
def test_an_nvme_status_without_an_atomflash_name_raises_nvme_error(nvme):
    ctrl, dev = nvme
    ctrl._io_handlers[NvmeIoOpcode.FLUSH] = lambda cmd: reference._Outcome(reference.INVALID_NAMESPACE)
    with pytest.raises(NvmeError) as e:
        dev.flush()
    assert (e.value.sct, e.value.sc) == (spec.NvmeSct.GENERIC, NvmeGenericStatus.INVALID_NAMESPACE)
    assert isinstance(e.value, errors.Error) and "flush" in str(e.value)
    c = dev.wait(dev.submit_flush(), check=False)
    assert c.done and c.status is None and isinstance(c.error, NvmeError)
    dev.write(0, b"x" * BLK)                             # the queue goes on
    assert dev.read(0) == b"x" * BLK


class Gate:
    """A link that holds back the submission doorbells of I/O queue 1 while ``closed``."""

    def __init__(self, ctrl):
        self.ctrl, self.closed, self.held = ctrl, False, None

    def mmio_read(self, offset):
        return self.ctrl.mmio_read(offset)

    def mmio_write(self, offset, value):
        if self.closed and offset == spec.NVME_REGS["sq_tail"].address(1):
            self.held = value
            return
        self.ctrl.mmio_write(offset, value)

    def open(self):
        self.closed = False
        if self.held is not None:
            self.ctrl.mmio_write(spec.NVME_REGS["sq_tail"].address(1), self.held)


class FakeClock:
    def __init__(self, step=0.0):
        self.now, self.step = 1000.0, step

    def __call__(self):
        self.now += self.step
        return self.now


def test_a_command_the_controller_never_completes_times_out_and_stays_in_flight():
    ctrl, host = bring_up(link=Gate)
    dev = Device.attach_nvme(host, timeout=30, clock=FakeClock(step=1.0))
    host.link.closed = True
    with pytest.raises(errors.CommandTimeout, match="flush .* did not complete within 30 s") as e:
        dev.flush()
    assert e.value.command.opcode == Opcode.FLUSH and dev.in_flight == 1
    host.link.open()
    dev.wait(e.value.command, timeout=30)
    assert dev.in_flight == 0 and e.value.command.ok
