"""The semantic model: every verb, every status code, and "a rejected command
changes nothing"; randomized runs against a trivially simple dict model."""

import copy
import random

import pytest

from atomflash import spec
from atomflash.model import Limits, Model, semantics
from atomflash.spec import Hint, Status

LIM = Limits(capacity=32, lba_size=16, max_transfer=4, max_atomic_pages=4, max_open_tx=2, max_pending=6,
             max_remap_triples=2)
N = LIM.lba_size


def blk(s) -> bytes:
    return str(s).encode().ljust(N, b".")


def state(m: Model):
    """Everything a command could change."""
    return (dict(m.map), copy.deepcopy(m.tx), {h: a.token for h, a in m.appends.items()}, len(m.history),
            dict(m._slot_gen))


@pytest.fixture
def m():
    return Model(LIM)


def rejected(m, status, verb, *args, **kw):
    before = state(m)
    c = getattr(m, verb)(*args, **kw)
    assert c.status == status, (verb, args, c.status)
    assert state(m) == before, f"{verb} changed state although it returned {status.name}"


# -- plain verbs -----------------------------------------------------------------------

def test_unmapped_reads_zero_and_write_read_trim(m):
    assert m.read(0, 2).data == bytes(2 * N)
    assert m.write(3, blk("a") + blk("b")).ok
    assert m.read(2, 4).data == bytes(N) + blk("a") + blk("b") + bytes(N)
    assert len(m.history) == 2 and not any(op.atomic for op in m.history), "plain writes commit per block"
    assert m.trim(4, 1).ok
    assert m.read(3, 2).data == blk("a") + bytes(N)
    assert m.flush().ok and m.hint(Hint.CHECKPOINT).ok and m.hint(Hint.FLUSH_GROUP).ok and m.hint(Hint.NONE).ok


def test_plain_verb_statuses(m):
    m.write(0, blk("keep"))
    rejected(m, Status.ZERO_LENGTH, "write", 0, b"")
    rejected(m, Status.INVALID_FIELD, "write", 0, b"short")
    rejected(m, Status.TRANSFER_TOO_LARGE, "write", 0, blk(1) * 5)
    rejected(m, Status.LBA_OUT_OF_RANGE, "write", 31, blk(1) * 2)
    rejected(m, Status.LBA_OUT_OF_RANGE, "write", -1, blk(1))
    rejected(m, Status.ZERO_LENGTH, "read", 0, 0)
    rejected(m, Status.TRANSFER_TOO_LARGE, "read", 0, 5)
    rejected(m, Status.LBA_OUT_OF_RANGE, "read", 32, 1)
    rejected(m, Status.ZERO_LENGTH, "trim", 0, 0)
    rejected(m, Status.LBA_OUT_OF_RANGE, "trim", 30, 3)
    rejected(m, Status.INVALID_FIELD, "hint", 77)
    assert m.trim(0, 32).ok, "trim has no transfer limit"


# -- atomic write ------------------------------------------------------------------------

def test_atomic_write_all_visible_one_op(m):
    assert m.atomic_write([(9, blk("x")), (2, blk("y")), (30, blk("z"))]).ok
    assert m.read(9, 1).data == blk("x") and m.read(2, 1).data == blk("y") and m.read(30, 1).data == blk("z")
    (op,) = m.history
    assert op.atomic and op.durable and set(op.writes) == {9, 2, 30}


def test_atomic_write_statuses(m):
    rejected(m, Status.ZERO_LENGTH, "atomic_write", [])
    rejected(m, Status.GROUP_TOO_LARGE, "atomic_write", [(i, blk(i)) for i in range(5)])
    rejected(m, Status.INVALID_FIELD, "atomic_write", [(1, b"x")])
    rejected(m, Status.LBA_OUT_OF_RANGE, "atomic_write", [(1, blk(1)), (32, blk(2))])
    rejected(m, Status.DUPLICATE_LBA, "atomic_write", [(1, blk(1)), (1, blk(2))])


# -- transactions ---------------------------------------------------------------------

def test_tx_isolation_commit_and_abort(m):
    m.write(1, blk("old"))
    assert m.tx_write(7, 1, blk("t7")).ok
    assert m.read(1, 1).data == blk("old"), "others see committed data only"
    assert m.tx_read(7, 1, 1).data == blk("t7"), "a transaction sees its own writes"
    assert m.tx_read(7, 2, 1).data == bytes(N)
    assert m.tx_write(8, 2, blk("t8")).ok
    assert m.tx_read(8, 1, 1).data == blk("old")
    assert m.tx_commit(7).ok
    assert m.read(1, 1).data == blk("t7")
    assert m.tx_read(8, 1, 1).data == blk("t7"), "read-committed: others' commits become visible"
    assert m.tx_abort(8).ok
    assert m.read(2, 1).data == bytes(N)
    assert [op.verb for op in m.history] == ["write", "commit"]


def test_tx_rewrite_same_lba_keeps_latest(m):
    m.tx_write(1, 3, blk("a"))
    m.tx_write(1, 3, blk("b"))
    m.tx_commit(1)
    assert m.read(3, 1).data == blk("b")
    assert m.history[-1].writes == {3: blk("b")}


def test_commit_order_decides_between_transactions_and_plain_writes(m):
    m.tx_write(1, 5, blk("t1"))
    m.tx_write(2, 5, blk("t2"))
    m.tx_commit(2)
    m.tx_commit(1)
    assert m.read(5, 1).data == blk("t1"), "the later commit wins"
    m.tx_write(1, 6, blk("t1b"))
    m.write(6, blk("plain"))
    m.tx_commit(1)
    assert m.read(6, 1).data == blk("t1b"), "a commit after a plain write wins even though staged before it"


def test_tx_final_commits(m):
    m.tx_write(3, 0, blk("a"))
    assert m.tx_write(3, 1, blk("b") + blk("c"), final=True).ok
    assert (0, 3) not in m.tx and m.read(0, 3).data == blk("a") + blk("b") + blk("c")
    assert m.history[-1].verb == "commit" and m.history[-1].atomic
    assert m.tx_write(4, 9, blk("solo"), final=True).ok, "a one-write transaction may be final at once"
    assert m.read(9, 1).data == blk("solo")


def test_tx_statuses(m):
    rejected(m, Status.INVALID_TID, "tx_write", 0, 0, blk(0))
    rejected(m, Status.INVALID_TID, "tx_read", 0, 0, 1)
    rejected(m, Status.INVALID_TID, "tx_commit", 0)
    rejected(m, Status.INVALID_TID, "tx_abort", 0)
    rejected(m, Status.UNKNOWN_TX, "tx_commit", 5)
    rejected(m, Status.UNKNOWN_TX, "tx_abort", 5)
    rejected(m, Status.UNKNOWN_TX, "tx_read", 5, 0, 1)
    rejected(m, Status.ZERO_LENGTH, "tx_write", 1, 0, b"")
    rejected(m, Status.INVALID_FIELD, "tx_write", 1, 0, b"abc")
    rejected(m, Status.TRANSFER_TOO_LARGE, "tx_write", 1, 0, blk(0) * 5)
    rejected(m, Status.LBA_OUT_OF_RANGE, "tx_write", 1, 31, blk(0) * 2)
    assert m.tx_write(1, 0, blk(0)).ok and m.tx_write(2, 1, blk(1)).ok
    rejected(m, Status.TOO_MANY_OPEN_TX, "tx_write", 3, 2, blk(2))
    rejected(m, Status.ZERO_LENGTH, "tx_read", 1, 0, 0)
    rejected(m, Status.TRANSFER_TOO_LARGE, "tx_read", 1, 0, 5)
    rejected(m, Status.LBA_OUT_OF_RANGE, "tx_read", 1, 32, 1)
    assert m.tx_write(1, 2, blk(0) * 4).ok  # 6 pending entries: table full
    rejected(m, Status.PENDING_FULL, "tx_write", 2, 10, blk(2))
    assert m.tx_write(2, 1, blk("again")).ok, "rewriting a staged LBA takes no new entry"
    assert m.tx_commit(1).ok
    rejected(m, Status.UNKNOWN_TX, "tx_commit", 1)  # already committed
    assert m.tx_abort(2).ok
    rejected(m, Status.UNKNOWN_TX, "tx_abort", 2)  # already aborted


def test_final_write_rejected_leaves_tx_open(m):
    m.tx_write(1, 0, blk(0))
    rejected(m, Status.LBA_OUT_OF_RANGE, "tx_write", 1, 40, blk(1), final=True)
    assert (0, 1) in m.tx         # (queue, tid)


# -- append / remap / release -------------------------------------------------------------

def test_append_invisible_until_remap(m):
    c = m.append(blk("p") + blk("q"))
    assert c.ok and c.result and not m.history and m.read(0, 32 // 8).data == bytes(4 * N)
    assert m.remap([(10, c.result, 2)]).ok
    assert m.read(10, 2).data == blk("p") + blk("q")
    (op,) = m.history
    assert op.verb == "remap" and op.atomic


def test_remap_many_triples_atomically(m):
    a, b = m.append(blk("a")).result, m.append(blk("b1") + blk("b2")).result
    m.write(20, blk("old"))
    assert m.remap([(20, a, 1), (0, b, 2)]).ok
    assert m.read(20, 1).data == blk("a") and m.read(0, 2).data == blk("b1") + blk("b2")
    assert m.history[-1].writes == {20: blk("a"), 0: blk("b1"), 1: blk("b2")}


def test_tokens_are_single_use_and_unforgeable(m):
    a = m.append(blk("a")).result
    t = spec.split_token(a)
    key = semantics.MODEL_TOKEN_KEY
    assert t.gen >= 1 and t.check == spec.token_check(key, t.handle, t.gen, 1, 0)
    forged = [a ^ (1 << 40), a ^ 1, a ^ (1 << 16), spec.make_token(t.handle, t.gen, 999, key=key), 0, 2**64 - 1,
              spec.make_token(t.handle, t.gen, 1), spec.make_token(t.handle, t.gen, 1, owner=1, key=key)]
    for bad in forged:
        rejected(m, Status.INVALID_TOKEN, "remap", [(0, bad, 1)])
        rejected(m, Status.INVALID_TOKEN, "release", bad)
    assert m.remap([(0, a, 1)]).ok
    rejected(m, Status.INVALID_TOKEN, "remap", [(1, a, 1)])  # already remapped
    rejected(m, Status.INVALID_TOKEN, "release", a)
    b = m.append(blk("b")).result
    assert spec.split_token(b).handle == t.handle and b != a, "slot reused with a new generation"
    rejected(m, Status.INVALID_TOKEN, "remap", [(1, a, 1)])  # stale token for the reused slot
    assert m.release(b).ok
    rejected(m, Status.INVALID_TOKEN, "remap", [(1, b, 1)])  # released


def test_transactions_and_tokens_belong_to_their_queue(m):
    """Each queue pair has its own tids, and an append's token is its queue's: another queue gets the
    answer a tid nobody opened or a token never issued gets, and nothing changes."""
    assert m.tx_write(7, 10, blk("q0"), queue=0).ok
    for verb, args in (("tx_commit", (7,)), ("tx_abort", (7,)), ("tx_read", (7, 10, 1))):
        rejected(m, Status.UNKNOWN_TX, verb, *args, queue=1)
    assert m.tx_write(7, 11, blk("q1"), new=True, queue=1).ok        # queue 1's own tid 7, not queue 0's
    assert m.tx_read(7, 10, 1, queue=0).data == blk("q0") and m.tx_read(7, 10, 1, queue=1).data == m.zero
    rejected(m, Status.TID_IN_USE, "tx_write", 7, 12, blk("x"), new=True, queue=0)
    assert m.tx_commit(7, queue=1).ok and m.read(11, 1).data == blk("q1") and m.read(10, 1).data == m.zero
    assert m.tx_commit(7, queue=0).ok and m.read(10, 1).data == blk("q0")
    a = m.append(blk("a"), queue=0).result
    rejected(m, Status.INVALID_TOKEN, "remap", [(20, a, 1)], queue=1)
    rejected(m, Status.INVALID_TOKEN, "release", a, queue=1)
    assert m.remap([(20, a, 1)], queue=0).ok and m.read(20, 1).data == blk("a")


def test_remap_statuses(m):
    a, b = m.append(blk("a")).result, m.append(blk("b") * 2).result
    rejected(m, Status.ZERO_LENGTH, "remap", [])
    rejected(m, Status.ZERO_LENGTH, "remap", [(0, a, 0)])
    rejected(m, Status.REMAP_TOO_LARGE, "remap", [(0, a, 1), (1, b, 2), (5, a, 1)])
    rejected(m, Status.LBA_OUT_OF_RANGE, "remap", [(31, b, 2)])
    rejected(m, Status.DUPLICATE_LBA, "remap", [(0, a, 1), (0, b, 2)])
    rejected(m, Status.INVALID_TOKEN, "remap", [(0, a, 1), (4, a, 1)])  # same token twice
    rejected(m, Status.REMAP_LENGTH, "remap", [(0, b, 1)])
    rejected(m, Status.ZERO_LENGTH, "append", b"")
    rejected(m, Status.INVALID_FIELD, "append", b"x")
    rejected(m, Status.TRANSFER_TOO_LARGE, "append", blk(0) * 5)
    m.tx_write(1, 0, blk(0) * 3)  # 3 appended + 3 staged = 6 = max_pending
    rejected(m, Status.PENDING_FULL, "append", blk(0))
    rejected(m, Status.PENDING_FULL, "tx_write", 2, 9, blk(0))
    assert m.release(a).ok and m.append(blk("c")).ok, "release frees pending entries"


def test_power_cycle_drops_staged_state(m):
    a = m.append(blk("a")).result
    m.tx_write(1, 0, blk("t"))
    m.write(3, blk("w"))
    m.power_cycle()
    assert not m.tx and not m.appends and m.read(3, 1).data == blk("w") and m.initial == {3: blk("w")}
    rejected(m, Status.INVALID_TOKEN, "remap", [(0, a, 1)])
    rejected(m, Status.UNKNOWN_TX, "tx_commit", 1)


# -- durability bookkeeping -------------------------------------------------------------

def test_write_through_ops_are_durable_on_completion(m):
    m.write(0, blk(0))
    m.trim(0, 1)
    assert all(op.durable for op in m.history)


def test_volatile_cache_needs_flush_but_atomic_verbs_do_not():
    m = Model(LIM, cache=True)
    m.write(0, blk(0))
    m.trim(1, 1)
    m.write(2, blk(2), fua=True)
    m.atomic_write([(3, blk(3)), (4, blk(4))])
    m.tx_write(1, 5, blk(5), final=True)
    assert [op.durable for op in m.history] == [False, False, True, True, True]
    m.hint(Hint.FLUSH_GROUP)
    assert not m.history[0].durable, "FLUSH_GROUP promises no durability"
    m.hint(Hint.CHECKPOINT)
    assert all(op.durable for op in m.history)


def test_manual_completion_for_device_harnesses():
    m = Model(LIM, auto_complete=False)
    op = m.write(0, blk(0)).ops[0]
    assert op.completed is None and not op.durable
    m.flush()
    assert not op.durable, "flush covers completed commands only"
    m.complete(op)
    assert op.durable and op.completed > op.issued


def test_limits_from_identify():
    ident = spec.IDENTIFY.unpack(spec.IDENTIFY.pack(capacity=99, lba_size=512, max_transfer=8, max_atomic_pages=16,
                                                    max_open_tx=3, max_pending=40, max_remap_triples=5,
                                                    max_appends=7))
    assert Limits.from_identify(ident) == Limits(99, 512, 8, 16, 3, 40, 5, 7)


def test_append_slots_run_out():
    """PENDING_FULL once max_appends appends are live, though entries remain; a release frees a slot."""
    m = Model(Limits(capacity=16, lba_size=512, max_pending=40, max_appends=2))
    tokens = [m.append(bytes(512)).result for _ in range(2)]
    assert m.append(bytes(512)).status == Status.PENDING_FULL
    assert m.release(tokens[0]).ok
    assert m.append(bytes(512)).ok


# -- randomized: the model against a dict ------------------------------------------------

@pytest.mark.parametrize("seed", range(4))
def test_random_plain_and_atomic_against_a_dict(seed):
    """Plain writes, trims and atomic writes are a dict of blocks; transactions and
    appends that are aborted/released must leave no trace."""
    rng = random.Random(seed)
    m, ref = Model(LIM), {}
    serial = 0
    for _ in range(3000):
        serial += 1
        r = rng.random()
        lba = rng.randrange(LIM.capacity)
        if r < 0.35:
            n = rng.randint(1, min(4, LIM.capacity - lba))
            data = [blk(f"{serial}.{i}") for i in range(n)]
            assert m.write(lba, b"".join(data)).ok
            ref.update({lba + i: d for i, d in enumerate(data)})
        elif r < 0.5:
            n = rng.randint(1, min(3, LIM.capacity - lba))
            assert m.trim(lba, n).ok
            for i in range(n):
                ref.pop(lba + i, None)
        elif r < 0.7:
            lbas = rng.sample(range(LIM.capacity), rng.randint(1, 4))
            pairs = [(x, blk(f"{serial}a{x}")) for x in lbas]
            assert m.atomic_write(pairs).ok
            ref.update(pairs)
        elif r < 0.8:
            tid = rng.randint(1, 2)
            m.tx_write(tid, lba, blk(f"tx{serial}"))
            if rng.random() < 0.5:
                m.tx_abort(tid)
        elif r < 0.85:
            c = m.append(blk(f"ap{serial}"))
            if c.ok:
                assert m.release(c.result).ok
        else:
            n = rng.randint(1, min(4, LIM.capacity - lba))
            assert m.read(lba, n).data == b"".join(ref.get(lba + i, bytes(N)) for i in range(n))
        if rng.random() < 0.01:  # abort everything still open so nothing is left to commit
            for tid in list(m.tx):
                m.tx_abort(tid)
    for tid in list(m.tx):
        m.tx_abort(tid)
    assert m.contents() == ref
