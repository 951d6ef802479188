"""recover(): the proof rules, one trap of DESIGN.md at a time, on hand-built
flash images and on scenarios driven through the reference log writer."""

import random

import pytest

from atomflash import spec
from atomflash.model import Checkpoint, Flash, Limits, LogFTL, Page, PendingTx, check_after_cut, recover
from atomflash.spec import Kind

LIM = Limits(capacity=16, lba_size=64, max_atomic_pages=8, max_open_tx=4, max_pending=32, max_remap_triples=4)
N = LIM.lba_size


def blk(s) -> bytes:
    return str(s).encode().ljust(N, b".")


def flags(**bits) -> int:
    return spec.OOB.compose("flags", **bits)


class Img:
    """A hand-built flash image: pages appended at consecutive addresses."""

    def __init__(self):
        self.pages = []

    def page(self, data=b"", **fields):
        fields.setdefault("vseq", fields["seq"])
        self.pages.append(Page(len(self.pages), spec.pack_oob(**fields), bytes(data).ljust(N, b"\xff")))
        return self.pages[-1]

    def write(self, lba, seq, data=None):
        return self.page(data or blk(f"w{seq}"), kind=Kind.DATA, lba=lba, seq=seq, group_len=1, flags=flags(commit=1))

    def group(self, first, lbas, skip=()):
        n = len(lbas)
        for i, lba in enumerate(lbas):
            if i not in skip:
                self.page(blk(f"g{first}.{i}"), kind=Kind.DATA, lba=lba, seq=first + i, group_len=n, group_idx=i,
                          flags=flags(commit=int(i == n - 1)))

    def record(self, kind, seq, entries, tid=0):
        data = spec.pack_record_page(kind, seq, entries, len(entries), N)
        return self.page(data, kind=kind, seq=seq, group_len=1, tid=tid, flags=flags(commit=1))

    def torn(self, oob=None):
        self.pages.append(Page(len(self.pages), oob or random.Random(len(self.pages)).randbytes(spec.OOB.size),
                               b"\x00" * N))


def shown(r):
    return {lba: d[:12].rstrip(b".") for lba, d in r.contents().items()}


# -- basics ------------------------------------------------------------------------------

def test_newest_commit_point_wins_and_erased_pages_are_ignored():
    img = Img()
    img.write(1, 10)
    img.write(1, 12)
    img.write(2, 11)
    img.pages.append(Page(99, b"\xff" * spec.OOB.size, b"\xff" * N))  # erased
    r = recover(img.pages)
    assert shown(r) == {1: b"w12", 2: b"w11"} and r.torn == 0


# -- trap 1: out-of-order completion ---------------------------------------------------------

def test_group_with_commit_page_durable_but_member_missing_is_discarded():
    img = Img()
    img.write(5, 1, blk("old5"))
    img.group(10, [5, 6, 7], skip={1})  # the commit page (idx 2) landed, idx 1 did not
    r = recover(img.pages)
    assert shown(r) == {5: b"old5"}
    assert any("members [1] not present" in why for why in r.rejected)
    img.group(10, [5, 6, 7], skip={0, 2})  # now idx 1 arrives too (say, from another die)
    assert shown(recover(img.pages)) == {5: b"g10.0", 6: b"g10.1", 7: b"g10.2"}


def test_group_member_fields_must_match():
    """A page with the right vseq but another group shape proves nothing."""
    img = Img()
    img.group(10, [5, 6])
    img.pages.pop(0)
    img.page(blk("impostor"), kind=Kind.DATA, lba=5, seq=10, group_len=1, flags=flags(commit=1))
    r = recover(img.pages)
    assert 6 not in r.contents() and shown(r)[5] == b"impostor"


def test_log_model_cut_commit_page_durable_member_torn():
    f = LogFTL(LIM)
    f.write(3, blk("before"))
    f.atomic_write([(3, blk("a")), (4, blk("b")), (5, blk("c"))])
    k = len(f.stream)
    cut = f.cut(k, window=3, outcomes={k - 3: "done", k - 2: "torn", k - 1: "done"})
    r = recover(cut.pages, cut.checkpoint)
    assert shown(r) == {3: b"before"}
    assert check_after_cut(cut.ops, r.contents(), lba_size=N) == []


# -- trap 2: GC versus proofs -------------------------------------------------------------

def test_group_member_known_only_by_its_gc_copy_still_proves_the_group():
    img = Img()
    img.group(10, [5, 6, 7], skip={0})
    img.page(blk("g10.0"), kind=Kind.GC_COPY, lba=5, seq=40, vseq=10, group_len=3, group_idx=0)
    assert shown(recover(img.pages)) == {5: b"g10.0", 6: b"g10.1", 7: b"g10.2"}


def test_stale_gc_copy_cannot_beat_newer_data():
    img = Img()
    img.write(5, 10, blk("old"))
    img.write(5, 20, blk("new"))
    img.page(blk("old"), kind=Kind.GC_COPY, lba=5, seq=30, vseq=10, group_len=1, flags=flags(commit=1))
    assert shown(recover(img.pages)) == {5: b"new"}


def test_gc_erases_superseded_group_member_after_checkpoint():
    """The group's member 0 is overwritten, a checkpoint covers it, GC erases its
    block: the group stays (the checkpoint decided it)."""
    f = LogFTL(LIM, Flash(16, 4))
    f.atomic_write([(1, blk("a1")), (2, blk("a2")), (3, blk("a3"))])
    f.write(1, blk("new1"))
    for i in range(4):
        f.write(8 + i, blk(f"pad{i}"))  # fill the group's block and the next
    f.checkpoint()
    erased = f.gc(block=0)
    assert erased == 0 and f.gc_copies == 3  # a2, a3, new1 relocated; a1 superseded, dropped
    f.write(4, blk("after"))
    cut = f.cut(window=0)
    r = recover(cut.pages, cut.checkpoint)
    assert r.contents() == f.sem.contents() and shown(r)[2] == b"a2"
    assert check_after_cut(cut.ops, r.contents(), lba_size=N) == []


def test_gc_refuses_blocks_newer_than_the_checkpoint():
    f = LogFTL(LIM, Flash(16, 4))
    for i in range(6):
        f.write(i, blk(i))
    assert f.gc_candidates() == []
    f.checkpoint()
    assert f.gc_candidates() == [0]
    with pytest.raises(AssertionError):
        f.gc(block=1)


# -- trap 3: torn pages at the head ----------------------------------------------------------

def test_torn_pages_are_absent_never_data():
    img = Img()
    img.write(1, 10, blk("good"))
    good = spec.pack_oob(kind=Kind.DATA, lba=1, seq=11, vseq=11, group_len=1, flags=flags(commit=1))
    img.torn(good[:-1] + bytes([good[-1] ^ 0x40]))  # readable fields, broken CRC
    img.torn()  # garbage
    r = recover(img.pages)
    assert shown(r) == {1: b"good"} and r.torn == 2


def test_record_page_with_corrupt_payload_is_absent():
    img = Img()
    img.write(2, 5, blk("keep"))
    p = img.record(Kind.TRIM, 6, [dict(lba=2, nlb=1)])
    bad = bytearray(p.data)
    bad[30] ^= 1
    img.pages[-1] = Page(p.addr, p.oob, bytes(bad))
    r = recover(img.pages)
    assert shown(r) == {2: b"keep"} and r.torn == 1


# -- trap 5: sequence numbers past torn pages ----------------------------------------------

def test_next_seq_passes_torn_pages_and_the_gap():
    gap = spec.LOG.SEQ_RESUME_GAP
    img = Img()
    img.write(1, 100)
    assert recover(img.pages).next_seq == 100 + gap
    hint = spec.pack_oob(kind=Kind.DATA, lba=1, seq=130, vseq=130, group_len=1)
    img.torn(hint[:-2] + b"\0\0")  # torn, but its seq field still reads 130
    assert recover(img.pages).next_seq == 130 + gap
    wild = spec.pack_oob(kind=Kind.DATA, lba=1, seq=2**60, vseq=1, group_len=1)
    img.torn(wild[:-2] + b"\0\0")  # implausible: garbage, not a hint
    assert recover(img.pages).next_seq == 130 + gap
    ck = Checkpoint(seq=5000, map={})
    assert recover(img.pages, ck).next_seq == 4999 + gap


# -- trap 6: recovery is idempotent -----------------------------------------------------------

def _post_recovery_checkpoint(r):
    return Checkpoint(seq=r.next_seq, map={lba: b.vseq for lba, b in r.map.items()})


@pytest.mark.parametrize("seed", range(3))
def test_recovery_twice_and_after_its_own_checkpoint(seed):
    from atomflash.model.workload import Workload
    f = LogFTL(LIM, Flash(64, 8))
    Workload(f, random.Random(seed)).run(80)
    for k in range(0, len(f.stream) + 1, 7):
        cut = f.cut(k, rng=random.Random(k))
        first = recover(cut.pages, cut.checkpoint)
        again = recover(cut.pages, cut.checkpoint)
        assert first.map == again.map and first.next_seq == again.next_seq
        # firmware writes a checkpoint of the result; a second cut may tear it or not
        ck = _post_recovery_checkpoint(first)
        third = recover(cut.pages, ck)
        assert third.contents() == first.contents()
        torn_slot = recover(cut.pages, cut.checkpoint)
        assert torn_slot.contents() == first.contents()


# -- trap 7: trims are logged ------------------------------------------------------------------

def test_trim_record_survives_and_stale_copy_cannot_resurrect():
    img = Img()
    img.write(3, 10, blk("old"))
    img.record(Kind.TRIM, 11, [dict(lba=3, nlb=2)])
    assert shown(recover(img.pages)) == {}
    # a racing GC copy of the trimmed version made later is still older than the trim
    img.page(blk("old"), kind=Kind.GC_COPY, lba=3, seq=12, vseq=10, group_len=1, flags=flags(commit=1))
    assert shown(recover(img.pages)) == {}
    # with a checkpoint after the trim the old commit point is not even considered
    assert shown(recover(img.pages[1:], Checkpoint(seq=12, map={}))) == {}


# -- trap 8: checkpoints ------------------------------------------------------------------------

def test_tx_open_across_checkpoint_commits_with_pre_checkpoint_pages_erased():
    f = LogFTL(LIM, Flash(16, 4))
    f.tx_write(7, 1, blk("t-old"))
    f.tx_write(7, 1, blk("t-new"))  # supersedes within the transaction
    f.tx_write(7, 2, blk("t2"))
    f.write(9, blk("pad"))
    f.checkpoint()
    f.gc(block=0)  # the superseded tx page is erased (vouched for by the checkpoint)
    f.tx_write(7, 3, blk("t3"))
    f.tx_commit(7)
    cut = f.cut(window=0)
    r = recover(cut.pages, cut.checkpoint)
    assert shown(r) == {1: b"t-new", 2: b"t2", 3: b"t3", 9: b"pad"}
    # without the pending record in the checkpoint the commit cannot be proven
    bare = Checkpoint(cut.checkpoint.seq, cut.checkpoint.map)
    r2 = recover(cut.pages, bare)
    assert 3 not in r2.contents() and any("does not record it" in why for why in r2.rejected)


def test_mlc_lower_pages_of_incomplete_word_lines_are_not_trusted():
    """Trap 4: with paired pages (``mlc``), a data page on a lower page counts only when the upper
    page of its word line is in the block's written prefix and intact -- a cut in the upper page
    may have damaged it behind an intact OOB, and the core acknowledged nothing there yet.
    Their seqs still count for the resume; an SLC reading of the same image keeps them."""
    img = Img()
    for s in range(4):      # pages 0-3: lower 0 (upper 2), lower 1 (upper 4), upper 2, lower 3 (upper 6)
        img.write(s, 10 + s)
    img.torn()              # page 4: the cut, in the upper page of page 1
    slc = recover(img.pages)
    assert shown(slc) == {0: b"w10", 1: b"w11", 2: b"w12", 3: b"w13"}
    mlc = recover(img.pages, mlc=64)
    assert shown(mlc) == {0: b"w10", 2: b"w12"}  # 1: its upper page is torn; 3: its upper page never came
    assert mlc.next_seq == slc.next_seq
    # complete word lines count; a group with a member on an incomplete one is not proven
    img = Img()
    for s in range(5):      # pages 0-4: uppers 2 and 4 complete lowers 0 and 1
        img.write(s, 20 + s)
    img.group(25, [8, 9])   # pages 5 (lower, upper 8: missing) and 6 (upper of 3)
    r = recover(img.pages, mlc=64)
    assert shown(r) == {0: b"w20", 1: b"w21", 2: b"w22", 3: b"w23", 4: b"w24"}  # 3: its upper page 6 is intact
    assert any("group at vseq 25" in why for why in r.rejected)
    # a failed (torn) upper page mid-block: only its own lower page is untrusted; the block goes on
    img = Img()
    for s in range(4):
        img.write(s, 30 + s)  # pages 0-3
    img.torn()                # page 4: the upper page of 1 failed
    for s in range(5, 9):
        img.write(s, 30 + s)  # pages 5-8: 6 completes 3, 8 completes 5; 7's upper (10) never came
    r = recover(img.pages, mlc=64)
    assert shown(r) == {0: b"w30", 2: b"w32", 3: b"w33", 5: b"w35", 6: b"w36", 8: b"w38"}


def test_torn_checkpoint_falls_back_to_the_older_slot():
    f = LogFTL(LIM, Flash(32, 4))
    f.write(1, blk("a"))
    f.checkpoint()
    f.write(1, blk("b"))
    f.trim(2, 1)
    f.checkpoint()
    k = len(f.stream)
    cut = f.cut(k, window=2, outcomes={k - 1: "torn"})
    assert cut.checkpoint is f.stream[k - 4].ckpt
    r = recover(cut.pages, cut.checkpoint)
    assert shown(r) == {1: b"b"}


# -- trap 9: abort after relocation -------------------------------------------------------------

def test_aborted_transaction_relocated_by_gc_never_appears():
    f = LogFTL(LIM, Flash(16, 4))
    f.write(5, blk("base"))
    f.tx_write(3, 5, blk("tx-doomed"))
    f.tx_write(3, 6, blk("tx-doomed2"))
    f.write(10, blk("pad"))
    f.checkpoint()
    f.gc(block=0)
    assert f.gc_copies == 4  # base, pad and both staged pages moved
    f.tx_abort(3)
    f.tx_write(3, 7, blk("reused-tid"), final=True)  # same tid, new tag
    f.checkpoint()
    cut = f.cut(window=0)
    for ck in (cut.checkpoint, None, f.stream[-1].ckpt):
        r = recover(cut.pages, ck if ck is not None else None)
        assert 6 not in r.contents() and shown(r)[5] == b"base"
    assert check_after_cut(cut.ops, recover(cut.pages, cut.checkpoint).contents(), lba_size=N) == []


# -- transactions: tags, tx_final, commit records ----------------------------------------------

def test_tx_final_needs_every_page_of_its_incarnation():
    f = LogFTL(LIM)
    f.tx_write(1, 0, blk("aborted"))
    f.tx_abort(1)
    f.tx_write(1, 1, blk("x"))
    f.tx_write(1, 0, blk("y"))
    f.tx_write(1, 2, blk("z"), final=True)
    k = len(f.stream)
    # the page of lba 0 of the new incarnation is lost: the old incarnation's lba-0 page
    # (same tid, same lba) must not stand in for it
    cut = f.cut(k, window=3, outcomes={k - 3: "done", k - 2: "missing", k - 1: "done"})
    r = recover(cut.pages)
    assert r.contents() == {} and any("2 of 3 pages" in why for why in r.rejected)
    assert check_after_cut(cut.ops, r.contents(), lba_size=N) == []


def test_tx_superseded_write_missing_cannot_let_the_older_one_through():
    f = LogFTL(LIM)
    f.tx_write(2, 4, blk("first"))
    f.tx_write(2, 4, blk("second"))
    f.tx_commit(2)
    k = len(f.stream)
    cut = f.cut(k, window=2, outcomes={k - 2: "torn", k - 1: "done"})
    assert recover(cut.pages).contents() == {}


def test_transaction_published_below_a_held_floor_survives_a_firmware_checkpoint():
    """Campaign trial 4900: an append held the checkpoint's floor at 20; a transaction
    began below it (pages 18, 19), wrote on above it (22) and committed at 26, published before the
    firmware read the floor, so nothing held the floor at 18.  Plain writes of its LBAs came between
    (23: before the commit, which wins; 31: after it).  The map, read after the commit, holds the
    transaction's pages.  Recovery cannot count the pages below the floor; under the firmware's kind
    of checkpoint (published_below) it keeps the transaction, binds 22 at the commit point and
    re-asserts the entries in [18, 20) there, so 23 cannot displace them."""
    img = Img()
    img.write(6, 10)
    tx = dict(kind=Kind.DATA, group_len=0, tid=18, flags=flags(tx=1))
    img.page(blk("t18"), lba=5, seq=18, **tx)
    img.page(blk("t19"), lba=8, seq=19, **tx)
    img.page(blk("a20"), kind=Kind.APPEND, lba=0, seq=20, group_len=2, group_idx=0, tid=20, flags=flags(append=1))
    img.page(blk("a21"), kind=Kind.APPEND, lba=0, seq=21, group_len=2, group_idx=1, tid=20, flags=flags(append=1))
    img.page(blk("t22"), lba=7, seq=22, **tx)
    img.write(5, 23)
    img.write(7, 24)
    img.record(Kind.COMMIT, 26, [dict(first_vseq=18, npages=3, tid=1)], tid=18)
    img.write(8, 31)
    snapshot = {5: 18, 7: 22, 8: 19, 6: 10}
    r = recover(img.pages, Checkpoint(20, snapshot, published_below=True))
    assert shown(r) == {5: b"t18", 7: b"t22", 8: b"w31", 6: b"w10"}, r.rejected
    # a checkpoint that records open transactions instead proves nothing for one it does not record
    r = recover(img.pages, Checkpoint(20, snapshot))
    assert shown(r) == {5: b"w23", 7: b"w24", 8: b"w31", 6: b"w10"}
    assert any("does not record it" in why for why in r.rejected)


def test_commit_record_transaction_and_commit_order_after_recovery():
    f = LogFTL(LIM)
    f.tx_write(4, 1, blk("tx"))
    f.write(1, blk("plain"))  # staged before, but the commit comes later and wins
    f.tx_commit(4)
    assert f.read(1, 1).data == blk("tx")
    cut = f.cut(window=0)
    assert shown(recover(cut.pages)) == {1: b"tx"}


def test_transaction_too_long_for_tx_final_uses_a_commit_record(monkeypatch):
    monkeypatch.setattr(spec.LOG, "items", [c if c.name != "TX_FINAL_MAX_PAGES" else
                                            type(c)(c.name, 2, c.doc) for c in spec.LOG.items])
    f = LogFTL(LIM)
    f.tx_write(1, 0, blk(0) + blk(1) + blk(2), final=True)
    kinds = [spec.unpack_oob(e.oob).kind for e in f.stream]
    assert kinds[-1] == Kind.COMMIT
    assert recover(f.cut(window=0).pages).contents() == f.sem.contents()


# -- remap ------------------------------------------------------------------------------------

def test_remap_record_across_pages_is_all_or_nothing():
    f = LogFTL(LIM)  # 64-byte pages hold one remap entry: 3 triples take 3 record pages
    toks = [f.append(blk(f"p{i}")).result for i in range(3)]
    f.write(0, blk("old"))
    f.remap([(0, toks[0], 1), (5, toks[1], 1), (9, toks[2], 1)])
    k = len(f.stream)
    assert [spec.unpack_oob(e.oob).kind for e in f.stream[-3:]] == [Kind.REMAP] * 3
    whole = recover(f.cut(window=0).pages)
    assert shown(whole) == {0: b"p0", 5: b"p1", 9: b"p2"}
    part = recover(f.cut(k, window=3, outcomes={k - 3: "done", k - 2: "missing", k - 1: "done"}).pages)
    assert shown(part) == {0: b"old"}


def test_appends_without_remap_vanish_and_missing_append_page_voids_the_remap():
    f = LogFTL(LIM)
    f.append(blk("lonely"))
    tok = f.append(blk("q1") + blk("q2")).result
    f.remap([(3, tok, 2)])
    app_idx = len(f.stream) - 2  # q2's page, right before the remap record
    assert recover(f.cut(window=0).pages).contents() == {3: blk("q1"), 4: blk("q2")}
    cut = f.cut(len(f.stream), window=2, outcomes={app_idx: "torn", app_idx + 1: "done"})
    r = recover(cut.pages)
    assert r.contents() == {} and any("append pages" in why for why in r.rejected)


def test_checkpoint_slots_and_pending_appends_survive_gc():
    f = LogFTL(LIM, Flash(16, 4))
    tok = f.append(blk("staged"))
    for i in range(4):
        f.write(i, blk(i))
    f.checkpoint()
    f.gc(block=0)
    f.write(1, blk("x"))
    f.remap([(12, tok.result, 1)])
    cut = f.cut(window=0)
    assert recover(cut.pages, cut.checkpoint).contents() == f.sem.contents()
