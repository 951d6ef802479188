"""The demo's and the campaign's verification step (atomflash.workload.verify)
must fail when handed a corrupted result: each kind of broken promise."""

from atomflash.model import Limits, Model
from atomflash.workload import _block, verify

N = 512


def _history():
    m = Model(Limits(capacity=64, lba_size=N))
    for lba in range(8):
        m.write(lba, _block(N, lba + 1, lba, 0))
    m.atomic_write([(10, _block(N, 100, 10, 0)), (11, _block(N, 101, 11, 0)), (12, _block(N, 102, 12, 0))])
    m.tx_write(5, 20, _block(N, 200, 20, 0))
    m.tx_write(5, 21, _block(N, 201, 21, 0))
    m.tx_commit(5)
    m.tx_write(6, 30, _block(N, 300, 30, 0))  # never committed: must not show
    return m


def test_intact_result_passes():
    m = _history()
    assert verify(m.history, m.contents(), lba_size=N) == []


def test_flipped_bit_is_foreign():
    m = _history()
    got = m.contents()
    blk = bytearray(got[3])
    blk[7] ^= 1
    got[3] = bytes(blk)
    v = verify(m.history, got, lba_size=N)
    assert [x.rule for x in v] == ["foreign"] and v[0].lba == 3


def test_lost_acknowledged_write():
    m = _history()
    got = m.contents()
    del got[4]  # reads as zeros: the acknowledged write is gone
    v = verify(m.history, got, lba_size=N)
    assert [(x.rule, x.lba) for x in v] == [("lost", 4)]


def test_acknowledged_group_and_transaction_missing_a_member():
    m = _history()
    got = m.contents()
    del got[11]  # the group shows at 10 and 12 only
    got[21] = None  # the transaction shows at 20 only
    assert {(x.rule, x.lba) for x in verify(m.history, got, lba_size=N)} == {("lost", 11), ("lost", 21)}


def test_half_visible_group_in_flight_at_the_cut():
    m = Model(Limits(capacity=64, lba_size=N), auto_complete=False)
    m.atomic_write([(10, _block(N, 100, 10, 0)), (11, _block(N, 101, 11, 0)), (12, _block(N, 102, 12, 0))])
    got = m.contents()
    assert verify(m.history, got, lba_size=N) == []  # in flight: all of it may show ...
    assert verify(m.history, {}, lba_size=N) == []   # ... or none of it
    del got[11]  # ... but never a part
    assert [(x.rule, x.lba) for x in verify(m.history, got, lba_size=N)] == [("partial", 11)]


def test_uncommitted_transaction_data_is_foreign():
    m = _history()
    got = m.contents()
    got[30] = _block(N, 300, 30, 0)
    assert [(x.rule, x.lba) for x in verify(m.history, got, lba_size=N)] == [("foreign", 30)]
