"""The window rank operator (Flink SQL's window Top-N and deduplication), by hand and by
a brute-force reference: per key and window, the rows that came before the window fired,
sorted by the ORDER BY (NULLs first ascending, last descending) and arrival, first N."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from wql.runtime import TumblingWindows
from wql.runtime.assigners import SessionWindows, SlidingWindows
from wql.runtime.rank import (
    DROP_DUPLICATE,
    DROP_OUTSIDE_TOP_N,
    RankConfig,
    WindowRankOperator,
)
from wql.runtime.windows import MAX_TIME, MIN_TIME


def ranked(op: WindowRankOperator) -> list[tuple]:
    """(key, window_start, window_end, rank, values...) of every emitted row."""
    return [(r[0], r[1], r[2], *r[7:]) for r in op.drain()]


def test_top_n_keeps_the_first_n_and_equal_rows_in_arrival_order():
    # view rows (n, window_start, window_end, name); top 2 by n DESC per window
    op = WindowRankOperator(RankConfig(2, ((0, True),), bounds=(1, 2)))
    rows = [(5, 0, 10, "a"), (9, 0, 10, "b"), (5, 0, 10, "c"), (9, 0, 10, "d"), (1, 10, 20, "e")]
    for r in rows:
        op.process_element((), None, r)
    op.advance_watermark(9)  # [0, 10) fires at 9
    assert ranked(op) == [((), 0, 10, 1, 9, 0, 10, "b"), ((), 0, 10, 2, 9, 0, 10, "d")]
    op.end_of_input()
    assert ranked(op) == [((), 10, 20, 1, 1, 10, 20, "e")]
    c = op.counters
    assert (c.rows_in, c.rows_emitted, c.dropped) == (5, 3, {DROP_OUTSIDE_TOP_N: 2})


def test_late_rows_are_dropped_and_counted():
    op = WindowRankOperator(RankConfig(3, ((0, False),), bounds=(1, 2)))
    op.process_element((), None, (1, 0, 10))
    op.advance_watermark(9)
    op.process_element((), None, (2, 0, 10))  # [0, 10) fired: late
    op.end_of_input()
    assert [r[7:9] for r in op.drain()] == [(1, 1)]
    assert op.counters.dropped == {"late": 1}


def test_deduplication_keeps_the_first_or_the_last_of_equal_times():
    # a window table over rows (ts, name): TUMBLE(10); keep first / last by ts
    rows = [(3, "x"), (7, "y"), (3, "z"), (7, "w")]
    first = WindowRankOperator(RankConfig(1, ((0, False),), "FIRST", assigner=TumblingWindows(10)))
    last = WindowRankOperator(RankConfig(1, ((0, True),), "LAST", assigner=TumblingWindows(10)))
    for op in (first, last):
        for ts, name in rows:
            op.process_element(("k",), ts, (ts, name))
        op.end_of_input()
    assert [r[8:] for r in first.drain()] == [(3, "x")]  # the first of the smallest time
    assert [r[8:] for r in last.drain()] == [(7, "w")]  # the LAST of the largest time
    assert last.counters.dropped == {DROP_DUPLICATE: 3}


def test_a_row_in_several_windows_counts_once():
    # HOP(5, 10): a row at 7 is in [0, 10) and [5, 15); it wins one, loses the other
    op = WindowRankOperator(RankConfig(1, ((0, True),), assigner=SlidingWindows(10, 5)))
    op.process_element((), 12, (1, "late winner"))  # [5, 15) and [10, 20)
    op.process_element((), 7, (0, "loser"))  # [0, 10) alone wins, [5, 15) loses
    op.end_of_input()
    got = sorted((r[1], r[9]) for r in op.drain())
    assert got == [(0, "loser"), (5, "late winner"), (10, "late winner")]
    assert op.counters.dropped == {}  # each row is in some output


def _replay(
    op: WindowRankOperator, assigner: SlidingWindows, rows: list, restore_at: int | None
) -> list[tuple]:
    """Feed ``rows`` (key, event time, sort value, watermark step) to ``op``, with a
    per-key snapshot round trip (a streaming host's) before row ``restore_at``, then end
    the input; the ``(key, window_start, window_end, row, value)`` of every row in a window
    that had not fired when it came."""
    wm, want_in = MIN_TIME, []
    for i, (key, ts, v, step) in enumerate(rows):
        if i == restore_at:
            _round_trip(op)
        wm = max(wm, ts - 5 * step) if wm != MIN_TIME or step else wm
        op.advance_watermark(wm)
        for w in assigner.assign_windows(ts, ()):
            if w.end - 1 > op.watermark:
                want_in.append(((key,), w.start, w.end, i, v))
        op.process_element((key,), ts, (i, v))
    op.end_of_input()
    return want_in


def _round_trip(op: WindowRankOperator) -> None:
    for k in ("a", "b"):
        saved = op.snapshot_key((k,))
        op.forget_key((k,))
        op.restore_key((k,), saved)


@settings(max_examples=200, deadline=None)
@given(
    rows=st.lists(
        st.tuples(
            st.sampled_from(["a", "b"]),
            st.integers(0, 60),
            st.one_of(st.none(), st.integers(0, 4)),
            st.integers(0, 5),
        ),
        max_size=40,
    ),
    limit=st.integers(1, 3),
    descending=st.booleans(),
    restore_at=st.one_of(st.none(), st.integers(0, 40)),
)
def test_matches_a_brute_force_ranking(rows, limit, descending, restore_at):
    # rows: (key, event time, sort value, watermark step); HOP(20, 10) windows
    assigner = SlidingWindows(20, 10)
    config = RankConfig(limit, ((1, descending),), assigner=assigner)
    op = WindowRankOperator(config)
    want_in = _replay(op, assigner, rows, restore_at)
    got = sorted((r[0], r[1], r[2], r[7], r[8]) for r in op.drain())

    def order(entry: tuple) -> tuple:
        v, i = entry[4], entry[3]
        if descending:
            return ((1, 0) if v is None else (0, -v), i)
        return ((0, 0) if v is None else (1, v), i)

    want: list[Any] = []
    groups: dict[tuple, list] = {}
    for entry in want_in:
        groups.setdefault(entry[:3], []).append(entry)
    for (key, start, end), entries in groups.items():
        for rank, e in enumerate(sorted(entries, key=order)[:limit], start=1):
            want.append((key, start, end, rank, e[3]))
    assert got == sorted(want)
    c = op.counters
    fired = len({r[4] for r in want})
    assert c.rows_in == fired + sum(c.dropped.values())


def test_rank_and_dense_rank_keep_every_row_tied_within_n():
    # top 2 by n DESC: 9, 9 share rank 1; RANK gives 5 rank 3 (out), DENSE_RANK rank 2
    rows = [(5, 0, 10, "a"), (9, 0, 10, "b"), (5, 0, 10, "c"), (9, 0, 10, "d"), (1, 0, 10, "e")]
    want = {
        "RANK": [(1, "b"), (1, "d")],
        "DENSE_RANK": [(1, "b"), (1, "d"), (2, "a"), (2, "c")],
    }
    for keep, kept in want.items():
        op = WindowRankOperator(RankConfig(2, ((0, True),), keep, bounds=(1, 2)))
        for r in rows:
            op.process_element((), None, r)
        op.end_of_input()
        assert [(r[7], r[11]) for r in op.drain()] == kept, keep
        c = op.counters
        assert (c.rows_emitted, c.dropped) == (len(kept), {DROP_OUTSIDE_TOP_N: 5 - len(kept)})


@settings(max_examples=200, deadline=None)
@given(
    rows=st.lists(
        st.tuples(
            st.sampled_from(["a", "b"]),
            st.integers(0, 60),
            st.one_of(st.none(), st.integers(0, 3)),
            st.integers(0, 5),
        ),
        max_size=40,
    ),
    keep=st.sampled_from(["RANK", "DENSE_RANK"]),
    limit=st.integers(1, 3),
    descending=st.booleans(),
    restore_at=st.one_of(st.none(), st.integers(0, 40)),
)
def test_rank_and_dense_rank_match_a_brute_force_ranking(rows, keep, limit, descending, restore_at):
    # rows: (key, event time, sort value, watermark step); HOP(20, 10) windows. SQL's
    # ranks: RANK = 1 + the rows with a smaller sort value, DENSE_RANK = 1 + the distinct
    # smaller values; rows come out in sort order, equal ones in arrival order
    assigner = SlidingWindows(20, 10)
    op = WindowRankOperator(RankConfig(limit, ((1, descending),), keep, assigner=assigner))
    want_in = _replay(op, assigner, rows, restore_at)
    got = [(r[0], r[1], r[2], r[7], r[8]) for r in op.drain()]

    def value(v: int | None) -> tuple:
        if descending:
            return (1, 0) if v is None else (0, -v)
        return (0, 0) if v is None else (1, v)

    groups: dict[tuple, list] = {}
    for entry in want_in:
        groups.setdefault(entry[:3], []).append(entry)
    want: dict[tuple, list] = {}
    for window, entries in groups.items():
        for e in sorted(entries, key=lambda e: (value(e[4]), e[3])):
            smaller = [value(o[4]) for o in entries if value(o[4]) < value(e[4])]
            rank = 1 + (len(smaller) if keep == "RANK" else len(set(smaller)))
            if rank <= limit:
                want.setdefault(window, []).append((*window, rank, e[3]))
    # each window's rows in rank order, equal ranks in arrival order
    by_window: dict[tuple, list] = {}
    for r in got:
        by_window.setdefault(r[:3], []).append(r)
    assert by_window == want
    c = op.counters
    fired = len({r[4] for rs in want.values() for r in rs})
    assert c.rows_in == len(rows) == fired + sum(c.dropped.values())


@settings(max_examples=200, deadline=None)
@given(
    rows=st.lists(
        st.tuples(
            st.sampled_from(["a", "b"]),
            st.integers(0, 40),
            st.one_of(st.none(), st.integers(0, 3)),
            st.one_of(st.none(), st.integers(0, 8)),
        ),
        max_size=30,
    ),
    gap=st.integers(1, 6),
    keep=st.sampled_from(["TOP", "RANK", "DENSE_RANK"]),
    limit=st.integers(1, 3),
    descending=st.booleans(),
    restore_at=st.one_of(st.none(), st.integers(0, 30)),
)
def test_a_session_table_rank_matches_a_brute_force_ranking(
    rows, gap, keep, limit, descending, restore_at
):
    # rows: (key, event time, sort value, watermark lag or None: no rise). Flink's SESSION
    # table function (UnalignedWindowTableFunctionOperator) then its window rank: a row's
    # [ts, ts + gap) merges with every intersecting (touching) session of its key; a merged
    # session behind the watermark is late; a session's rows are ranked when it fires
    op = WindowRankOperator(
        RankConfig(limit, ((0, descending),), keep, assigner=SessionWindows(gap))
    )

    def value(v: int | None) -> tuple:
        if descending:
            return (1, 0) if v is None else (0, -v)
        return (0, 0) if v is None else (1, v)

    sessions: dict[str, list[list]] = {"a": [], "b": []}
    want: list[tuple] = []
    late = 0

    def fire(watermark: int) -> None:
        for key, open_ in sessions.items():
            for s in [s for s in open_ if s[1] - 1 <= watermark]:
                open_.remove(s)
                rows_ = sorted(s[2], key=lambda e: (value(e[1]), e[0]))
                for i, (seq, v) in enumerate(rows_):
                    smaller = [value(o[1]) for o in rows_ if value(o[1]) < value(v)]
                    rank = {"TOP": i + 1, "RANK": len(smaller) + 1}.get(keep, len(set(smaller)) + 1)
                    if rank <= limit:
                        want.append((key, s[0], s[1], rank, seq))

    wm = MIN_TIME
    for i, (key, ts, v, lag) in enumerate(rows):
        if i == restore_at:  # a streaming host's per-key round trip
            _round_trip(op)
        if lag is not None and ts - lag > wm:
            wm = ts - lag
            fire(wm)
        op.advance_watermark(wm)
        op.process_element((key,), ts, (v, i))
        start, end = ts, ts + gap
        merged = [s for s in sessions[key] if s[0] <= end and s[1] >= start]
        for s in merged:
            start, end = min(start, s[0]), max(end, s[1])
        if end - 1 <= wm:
            late += 1
            continue
        for s in merged:
            sessions[key].remove(s)
        sessions[key].append([start, end, [(i, v)] + [e for s in merged for e in s[2]]])
    op.end_of_input()
    fire(MAX_TIME)
    got = sorted((r[0][0], r[1], r[2], r[7], r[9]) for r in op.drain())
    assert got == sorted(want)
    c = op.counters
    assert c.dropped.get("late", 0) == late
    assert c.rows_in == len(rows) == len(want) + sum(c.dropped.values())
