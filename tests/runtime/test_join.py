"""The window join operator (Flink SQL's window join on a stream), by hand and against a
brute-force reference: each window joins once, the rows of both sides that came before
the watermark passed its end, matched on the equi-key (NULL matches nothing, NaN matches
NaN), outer sides' unmatched rows padded with NULLs; a row every window of which has
joined is late."""

from __future__ import annotations

import dataclasses
import math
from collections import Counter
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from wql.runtime.assigners import SlidingWindows, TumblingWindows
from wql.runtime.join import (
    FINAL,
    LEFT_PARTNERS,
    JoinConfig,
    JoinSide,
    WindowJoinOperator,
    as_timestamp,
)
from wql.runtime.operator_factory import make_operator
from wql.runtime.windows import MIN_TIME


def table_side(assigner: Any) -> JoinSide:
    # a window table's rows: (key, price, window_start, window_end, window_time)
    return JoinSide(5, assigner, (2, 3, 4))


VIEW = JoinSide(3)  # a view's rows: (key, window_start, window_end)


def config(kind: str, assigner: Any = None) -> JoinConfig:
    # ON l.key = r.key AND l.window_start = r.window_start AND l.window_end = r.window_end
    return JoinConfig(
        kind, ((0, 0), (2, 1), (3, 2)), (table_side(assigner or TumblingWindows(10)), VIEW)
    )


def view_row(key: Any, start: int, end: int) -> tuple:
    return (key, as_timestamp(start), as_timestamp(end))


def test_each_window_joins_once_when_the_watermark_passes_its_end():
    op = make_operator(config("INNER"))
    assert isinstance(op, WindowJoinOperator)
    op.process_side(0, None, 3, ("a", 5, None, None, None))
    op.process_side(0, None, 12, ("a", 6, None, None, None))
    op.process_side(1, (0, 10), None, view_row("a", 0, 10))
    op.process_side(1, (10, 20), None, view_row("b", 10, 20))
    op.advance_watermark(8)
    assert op.drain() == []
    op.advance_watermark(9)  # [0, 10) joins at 9
    w0 = (as_timestamp(0), as_timestamp(10))
    assert op.drain() == [("a", 5, *w0, as_timestamp(9), "a", *w0)]
    op.end_of_input()
    assert op.drain() == []  # [10, 20): a and b do not match
    c = op.counters
    assert (c.rows_in, c.rows_emitted, c.dropped) == (4, 1, {})
    assert op.active_keys() == []


def test_outer_joins_pad_the_unmatched_side_with_nulls():
    for kind, expected in (
        ("LEFT", {("a", "a"), ("b", None)}),
        ("RIGHT", {("a", "a"), (None, "c")}),
        ("FULL", {("a", "a"), ("b", None), (None, "c")}),
    ):
        op = WindowJoinOperator(config(kind))
        for key, price in (("a", 1), ("b", 2)):
            op.process_side(0, None, 3, (key, price, None, None, None))
        for key in ("a", "c"):
            op.process_side(1, (0, 10), None, view_row(key, 0, 10))
        op.end_of_input()
        got = {(r[0], r[5]) for r in op.drain()}  # (left key, right key)
        assert got == expected, kind


def test_nulls_match_nothing_and_nan_matches_nan():
    cfg = JoinConfig("INNER", ((0, 0),), (JoinSide(1), JoinSide(1)))
    op = WindowJoinOperator(cfg)
    for side in (0, 1):
        for v in (None, math.nan, -0.0 if side else 0.0):
            op.process_side(side, (0, 10), None, (v,))
    op.end_of_input()
    got = sorted(repr(r) for r in op.drain())
    assert got == ["(0.0, -0.0)", "(nan, nan)"]


def test_a_row_every_window_of_which_has_joined_is_late():
    op = WindowJoinOperator(config("INNER", SlidingWindows(10, 5)))
    op.process_side(1, (0, 10), None, view_row("a", 0, 10))
    op.advance_watermark(9)  # [0, 10) joined; [5, 15) still open
    op.process_side(0, None, 7, ("a", 1, None, None, None))  # in [5, 15) only
    op.process_side(0, None, 3, ("a", 2, None, None, None))  # [-5, 5) and [0, 10): late
    op.process_side(1, (0, 10), None, view_row("a", 0, 10))  # its window joined: late
    op.process_side(0, None, None, ("a", 3, None, None, None))  # no event time
    op.end_of_input()
    assert op.drain() == []  # [5, 15) has no right rows
    assert op.counters.dropped == {"late": 2, "missing timestamp": 1}
    assert op.counters.rows_in == 5
    assert op.counters.sides == {}  # no side names: the totals only


def test_named_sides_count_their_dropped_rows_apart():
    # as Flink's leftNumLateRecordsDropped / rightNumLateRecordsDropped: each row dropped
    # by the side it came from, and in the totals
    cfg = dataclasses.replace(config("INNER", SlidingWindows(10, 5)), side_names=("l", "r"))
    op = WindowJoinOperator(cfg)
    op.process_side(1, (0, 10), None, view_row("a", 0, 10))
    op.advance_watermark(9)
    op.process_side(0, None, 3, ("a", 2, None, None, None))  # late on the left
    op.process_side(1, (0, 10), None, view_row("a", 0, 10))  # late on the right
    op.process_side(1, (5, 15), None, view_row("a", 5, 15))  # on time
    op.process_side(0, None, None, ("a", 3, None, None, None))  # no event time, left
    assert op.counters.dropped == {"late": 2, "missing timestamp": 1}
    assert op.counters.sides == {"l": {"late": 1, "missing timestamp": 1}, "r": {"late": 1}}
    assert op.counters.as_dict()["sides"] == {
        "l": {"dropped": {"late": 1, "missing timestamp": 1}},
        "r": {"dropped": {"late": 1}},
    }


ROWS = st.lists(
    st.tuples(
        st.sampled_from(["row0", "row1", "wm"]),
        st.integers(0, 60),  # event time, a view row's window start / 10, or a watermark
        st.sampled_from(["a", "b", None]),
    ),
    max_size=40,
)


def reference(kind: str, steps: list[tuple]) -> tuple[Counter, int, int]:
    """The join by definition: every row's windows not fired when it came, joined per
    window by nested loops; (rows, rows emitted, late rows)."""
    assigner = SlidingWindows(20, 10)
    wm = MIN_TIME
    held: dict[tuple[int, int], tuple[list, list]] = {}
    late = 0
    for i, (what, t, key) in enumerate(steps):
        if what == "wm":
            wm = max(wm, t)
            continue
        if what == "row0":
            windows = [(w.start, w.end) for w in assigner.assign_windows(t, ())]
        else:
            windows = [(t // 10 * 10, t // 10 * 10 + 20)]
        taken = [w for w in windows if w[1] - 1 > wm]
        for w in taken:
            row = (
                (key, i, as_timestamp(w[0]), as_timestamp(w[1]), as_timestamp(w[1] - 1))
                if what == "row0"
                else view_row(key, *w)
            )
            held.setdefault(w, ([], []))[0 if what == "row0" else 1].append(row)
        late += not taken
    out: Counter = Counter()
    for left, right in held.values():
        for lrow in left:
            hits = [
                r for r in right if lrow[0] is not None and r[0] == lrow[0] and r[1:3] == lrow[2:4]
            ]
            out.update(lrow + r for r in hits)
            if not hits and kind in ("LEFT", "FULL"):
                out[lrow + (None,) * 3] += 1
        if kind in ("RIGHT", "FULL"):
            for r in right:
                if not any(lrow[0] is not None and r[0] == lrow[0] for lrow in left):
                    out[(None,) * 5 + r] += 1
    return out, sum(out.values()), late


@pytest.mark.parametrize("kind", ["INNER", "LEFT", "RIGHT", "FULL"])
@settings(max_examples=60, deadline=None)
@given(steps=ROWS, restore_at=st.integers(0, 40))
def test_the_operator_equals_the_reference_across_a_restore(kind, steps, restore_at):
    cfg = config(kind, SlidingWindows(20, 10))
    op = WindowJoinOperator(cfg)
    out: Counter = Counter()
    for i, (what, t, key) in enumerate(steps):
        if i == restore_at:
            # the state a stream keeps between micro-batches: one snapshot of every window
            saved = [(k, op.snapshot_key(k)) for k in op.active_keys()]
            counters, watermark = op.counters, op.watermark
            op = WindowJoinOperator(cfg)
            op.counters, op.watermark = counters, watermark
            for k, data in saved:
                op.restore_key(k, data)
        if what == "wm":
            op.advance_watermark(t)
        elif what == "row0":
            op.process_side(0, None, t, (key, i, None, None, None))
        else:
            start = t // 10 * 10
            op.process_side(1, (start, start + 20), None, view_row(key, start, start + 20))
        out.update(op.drain())
    op.end_of_input()
    out.update(op.drain())
    expected, emitted, late = reference(kind, steps)
    assert out == expected
    assert op.counters.rows_emitted == emitted
    assert op.counters.dropped.get("late", 0) == late
    assert op.counters.rows_in == sum(1 for s in steps if s[0] != "wm")


def _on(lrow: tuple, rrow: tuple) -> bool:
    """ON's conditions besides the equalities, for the partners tests: a comparison of
    both sides' columns (an even row number, or the right key 'a')."""
    return lrow[1] % 2 == 0 or rrow[0] == "a"


def _equal(lrow: tuple, rrow: tuple) -> bool:
    return lrow[0] is not None and rrow[0] == lrow[0] and rrow[1:3] == lrow[2:4]


def _with_partners(kind: str, rows: list[tuple]) -> Counter:
    """What the stream host makes of rows with partners (``layout._with_partners`` in
    Spark): a left row's partners ON matches as pairs (LEFT, FULL), a right row's
    (RIGHT), each row no partner matches padded with NULLs once."""
    out: Counter = Counter()
    for row in rows:
        *joined, what, partners = row
        if what == FINAL:
            out[tuple(joined)] += 1
        elif what == LEFT_PARTNERS:
            left = tuple(joined[:5])
            matched = [p for p in partners if _on(left, p)]
            out.update(left + p for p in matched)
            out[left + (None,) * 3] += not matched
        else:
            right = tuple(joined[5:])
            matched = [p for p in partners if _on(p, right)]
            if kind == "RIGHT":
                out.update(p + right for p in matched)
            out[(None,) * 5 + right] += not matched
    return +out


@pytest.mark.parametrize("kind", ["LEFT", "RIGHT", "FULL"])
@settings(max_examples=60, deadline=None)
@given(steps=ROWS, restore_at=st.integers(0, 40))
def test_partners_give_the_outer_join_on_its_whole_on(kind, steps, restore_at):
    """An outer join whose ON has more than equalities (``JoinConfig.partners``): the
    rows with partners, picked by the whole ON, are the join by definition (nested loops
    over each window's rows on the whole ON), across a snapshot and restore."""
    cfg = dataclasses.replace(config(kind, SlidingWindows(20, 10)), partners=True)
    op = WindowJoinOperator(cfg)
    rows: list[tuple] = []
    held: dict[tuple[int, int], tuple[list, list]] = {}
    wm = MIN_TIME
    for i, (what, t, key) in enumerate(steps):
        if i == restore_at:
            saved = [(k, op.snapshot_key(k)) for k in op.active_keys()]
            counters, watermark = op.counters, op.watermark
            op = WindowJoinOperator(cfg)
            op.counters, op.watermark = counters, watermark
            for k, data in saved:
                op.restore_key(k, data)
        if what == "wm":
            op.advance_watermark(t)
            wm = max(wm, t)
        elif what == "row0":
            op.process_side(0, None, t, (key, i, None, None, None))
            for w in SlidingWindows(20, 10).assign_windows(t, ()):
                if w.end - 1 > wm:
                    window = (as_timestamp(w.start), as_timestamp(w.end))
                    row = (key, i, *window, as_timestamp(w.end - 1))
                    held.setdefault((w.start, w.end), ([], []))[0].append(row)
        else:
            start = t // 10 * 10
            op.process_side(1, (start, start + 20), None, view_row(key, start, start + 20))
            if start + 19 > wm:
                held.setdefault((start, start + 20), ([], []))[1].append(
                    view_row(key, start, start + 20)
                )
        rows += op.drain()
    op.end_of_input()
    rows += op.drain()
    expected: Counter = Counter()
    for left, right in held.values():
        for lrow in left:
            hits = [r for r in right if _equal(lrow, r) and _on(lrow, r)]
            if kind != "RIGHT":
                expected.update(lrow + r for r in hits)
                expected[lrow + (None,) * 3] += not hits
        if kind in ("RIGHT", "FULL"):
            for r in right:
                hits = [lrow for lrow in left if _equal(lrow, r) and _on(lrow, r)]
                if kind == "RIGHT":
                    expected.update(lrow + r for lrow in hits)
                expected[(None,) * 5 + r] += not hits
    assert _with_partners(kind, rows) == +expected
