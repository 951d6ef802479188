"""check_after_cut(): it accepts every legal outcome and names every illegal one."""

from atomflash.model import Limits, Model, Op, check_after_cut

N = 8
LIM = Limits(capacity=16, lba_size=N)


def b(s) -> bytes:
    return str(s).encode().ljust(N, b".")


def rules(v):
    return sorted((x.rule, x.lba) for x in v)


def test_clean_history_passes_and_lost_write_is_caught():
    m = Model(LIM)
    m.write(1, b("a"))
    m.write(1, b("b"))
    m.trim(2, 1)
    assert check_after_cut(m.history, {1: b("b")}, lba_size=N) == []
    assert rules(check_after_cut(m.history, {1: b("a")}, lba_size=N)) == [("lost", 1)]
    assert rules(check_after_cut(m.history, {}, lba_size=N)) == [("lost", 1)]


def test_foreign_data_and_resurrected_trim():
    m = Model(LIM, initial={4: b("init")})
    m.write(5, b("x"))
    m.trim(4, 1)
    assert check_after_cut(m.history, {5: b("x")}, lba_size=N, initial=m.initial) == []
    got = check_after_cut(m.history, {5: b("x"), 4: b("init")}, lba_size=N, initial=m.initial)
    assert rules(got) == [("lost", 4)], "a durable trim must not be undone"
    got = check_after_cut(m.history, {5: b("x"), 9: b("ghost")}, lba_size=N, initial=m.initial)
    assert rules(got) == [("foreign", 9)]


def test_aborted_and_unremapped_data_is_foreign():
    m = Model(LIM)
    m.tx_write(1, 3, b("tx"))
    m.tx_abort(1)
    m.append(b("ap"))
    assert rules(check_after_cut(m.history, {3: b("tx"), 4: b("ap")}, lba_size=N)) == [("foreign", 3), ("foreign", 4)]


def test_half_visible_group_is_caught_whole_or_nothing_in_flight_is_fine():
    m = Model(LIM, auto_complete=False)
    for lba in (1, 2, 3):
        m.complete(m.write(lba, b(f"old{lba}")).ops[0])
    g = m.atomic_write([(1, b("g1")), (2, b("g2")), (3, b("g3"))]).ops[0]  # in flight at the cut
    old = {1: b("old1"), 2: b("old2"), 3: b("old3")}
    new = {1: b("g1"), 2: b("g2"), 3: b("g3")}
    assert check_after_cut(m.history, old, lba_size=N) == []
    assert check_after_cut(m.history, new, lba_size=N) == []
    half = {1: b("g1"), 2: b("old2"), 3: b("g3")}
    assert rules(check_after_cut(m.history, half, lba_size=N)) == [("partial", 2)]
    m.complete(g)  # once acknowledged, the old state is a loss
    assert rules(check_after_cut(m.history, old, lba_size=N)) == [("lost", 1), ("lost", 2), ("lost", 3)]


def test_in_flight_ops_can_be_passed_apart():
    m = Model(LIM)
    m.write(1, b("old"))
    g = Model(LIM).atomic_write([(1, b("g1")), (2, b("g2"))]).ops[0]
    g.issued = g.completed = 99
    for shown_ in ({1: b("old")}, {1: b("g1"), 2: b("g2")}):
        assert check_after_cut(m.history, shown_, lba_size=N, in_flight=[g]) == []
    assert rules(check_after_cut(m.history, {1: b("old"), 2: b("g2")}, lba_size=N, in_flight=[g])) == [("partial", 1)]


def test_group_partly_overwritten_later_is_not_partial():
    m = Model(LIM)
    m.atomic_write([(1, b("g1")), (2, b("g2"))])
    m.write(2, b("later"))
    assert check_after_cut(m.history, {1: b("g1"), 2: b("later")}, lba_size=N) == []


def test_unflushed_cached_writes_may_go_flushed_ones_may_not():
    m = Model(LIM, cache=True)
    m.write(1, b("flushed"))
    m.flush()
    m.write(1, b("cached"))
    m.write(2, b("cached2"))
    assert check_after_cut(m.history, {1: b("flushed")}, lba_size=N) == []
    assert check_after_cut(m.history, {1: b("cached"), 2: b("cached2")}, lba_size=N) == []
    assert rules(check_after_cut(m.history, {}, lba_size=N)) == [("lost", 1)]


def test_explicit_order_is_used_when_known():
    """The log model knows the commit order: an in-flight op older than a durable one is superseded."""
    older = Op(1, "write", {1: b("old")}, False, issued=1, completed=None, durable=False, order=1)
    newer = Op(2, "write", {1: b("new")}, False, issued=2, completed=2, durable=True, order=2)
    assert check_after_cut([older, newer], {1: b("new")}, lba_size=N) == []
    assert rules(check_after_cut([older, newer], {1: b("old")}, lba_size=N)) == [("lost", 1)]
    # without an order, an in-flight op could have landed last: allowed
    older.order = newer.order = None
    assert check_after_cut([older, newer], {1: b("old")}, lba_size=N) == []


def test_violation_text_names_the_op():
    m = Model(LIM)
    m.write(1, b("a"))
    (v,) = check_after_cut(m.history, {}, lba_size=N)
    assert str(v) == "lost: lba 1 op 1: shows an older block; durable write op 1 is missing"
