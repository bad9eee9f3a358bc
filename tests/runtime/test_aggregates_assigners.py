"""Aggregates (incremental, null-ignoring, exact merges) and window assigners."""

from __future__ import annotations

from decimal import Decimal

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from wql.runtime import (
    AggregateSpec,
    Aggregator,
    CumulateWindows,
    DropRow,
    DynamicSessionWindows,
    GlobalWindows,
    OperatorConfig,
    SessionWindows,
    SlidingWindows,
    TimeWindow,
    TumblingWindows,
    WindowOperator,
)

ALL = (
    AggregateSpec("COUNT_STAR"),
    AggregateSpec("COUNT", 0),
    AggregateSpec("SUM", 0),
    AggregateSpec("MIN", 0),
    AggregateSpec("MAX", 0),
    AggregateSpec("AVG", 0),
    AggregateSpec("COUNT_DISTINCT", 0),
    AggregateSpec("FIRST_VALUE", 0),
    AggregateSpec("LAST_VALUE", 0),
    AggregateSpec("COLLECT_LIST", 0),
)


def brute(rows):
    """(ts, seq, v) rows -> the expected ALL results, straight from the definitions."""
    vals = [v for _, _, v in rows if v is not None]
    ordered = [v for _, _, v in sorted(rows, key=lambda r: (r[0], r[1])) if v is not None]
    return (
        len(rows),
        len(vals),
        sum(vals) if vals else None,
        min(vals, default=None),
        max(vals, default=None),
        sum(vals) / len(vals) if vals else None,
        len(set(vals)),
        ordered[0] if ordered else None,
        ordered[-1] if ordered else None,
        ordered,
    )


def test_empty_and_all_null_windows():
    agg = Aggregator(ALL)
    acc = agg.create()
    assert agg.result(acc) == (0, 0, None, None, None, None, 0, None, None, [])
    agg.add(acc, 5, 0, (None,))
    assert agg.result(acc) == (1, 0, None, None, None, None, 0, None, None, [])


def test_decimal_and_ties_by_arrival():
    agg = Aggregator(ALL)
    acc = agg.create()
    for seq, v in enumerate([Decimal("1.5"), Decimal("2.5"), Decimal("1.5")]):
        agg.add(acc, 100, seq, (v,))
    assert agg.result(acc) == (
        3,
        3,
        Decimal("5.5"),
        Decimal("1.5"),
        Decimal("2.5"),
        Decimal("5.5") / 3,
        2,
        Decimal("1.5"),
        Decimal("1.5"),
        [Decimal("1.5"), Decimal("2.5"), Decimal("1.5")],
    )


rows_strategy = st.lists(
    st.tuples(st.integers(-5, 5), st.one_of(st.none(), st.integers(-3, 3))), max_size=12
)


@settings(max_examples=150, deadline=None)
@given(rows_strategy, rows_strategy)
def test_merge_equals_adding_everything(a, b):
    agg = Aggregator(ALL)
    rows_a = [(ts, i, v) for i, (ts, v) in enumerate(a)]
    rows_b = [(ts, 100 + i, v) for i, (ts, v) in enumerate(b)]
    acc_a, acc_b = agg.create(), agg.create()
    for ts, seq, v in rows_a:
        agg.add(acc_a, ts, seq, (v,))
    for ts, seq, v in rows_b:
        agg.add(acc_b, ts, seq, (v,))
    agg.merge(acc_b, acc_a)
    assert agg.result(acc_b) == brute(rows_a + rows_b)
    assert agg.result_of_rows([(ts, s, (v,)) for ts, s, v in rows_a + rows_b]) == brute(
        rows_a + rows_b
    )


@settings(max_examples=100, deadline=None)
@given(rows_strategy, st.lists(st.integers(0, 12), max_size=4))
def test_merge_all_of_any_split_equals_adding_everything(rows, cuts):
    # slicing rebuilds a window from its slices with merge_all (integer values: exact)
    agg = Aggregator(ALL)
    entries = [(ts, i, v) for i, (ts, v) in enumerate(rows)]
    bounds = sorted({0, len(entries), *(c for c in cuts if c <= len(entries))})
    parts = []
    for lo, hi in zip(bounds[:-1], bounds[1:], strict=True):
        part = agg.create()
        for ts, seq, v in entries[lo:hi]:
            agg.add(part, ts, seq, (v,))
        parts.append(part)
    acc = agg.create()
    agg.merge_all(acc, parts)
    assert agg.result(acc) == brute(entries)


def test_the_table_of_kinds_is_the_compilers_list_of_aggregates():
    from wql.compiler.expressions import aggregate_type
    from wql.compiler.plan import AggKind
    from wql.compiler.types import BIGINT, DOUBLE
    from wql.runtime.aggregates import AGGREGATE_KINDS, KINDS

    assert [k.value for k in AggKind] == list(KINDS)
    for name, kind in AGGREGATE_KINDS.items():
        assert kind.name == name
        assert aggregate_type(AggKind(name), BIGINT) is not None
    # the kinds that add round over floating-point arguments (native folds them in order)
    assert {n for n, k in AGGREGATE_KINDS.items() if k.rounds} == {"SUM", "AVG"}
    assert aggregate_type(AggKind.AVG, BIGINT) == DOUBLE


def test_aggregate_spec_validation():
    with pytest.raises(ValueError):
        AggregateSpec("MEDIAN", 0)
    with pytest.raises(ValueError):
        AggregateSpec("SUM")
    with pytest.raises(ValueError):
        AggregateSpec("COUNT_STAR", 1)


def test_state_stays_small_without_evictor():
    cfg = OperatorConfig(
        TumblingWindows(60_000),
        (
            AggregateSpec("COUNT_STAR"),
            AggregateSpec("SUM", 0),
            AggregateSpec("AVG", 0),
            AggregateSpec("FIRST_VALUE", 0),
            AggregateSpec("LAST_VALUE", 0),
        ),
    )
    op = WindowOperator(cfg)
    for i in range(100_000):
        op.process_element((i % 3,), i, (float(i),))
    # 3 keys x 2 windows, one accumulator each (+ their timers): no row is kept
    assert op.open_windows() == 6
    assert op.state_size() == 6
    op.end_of_input()
    assert sum(r[7] for r in op.drain()) == 100_000


def test_sessions_merge_accumulators_not_rows():
    op = WindowOperator(OperatorConfig(SessionWindows(10), (AggregateSpec("COUNT_STAR"),)))
    for i in range(50_000):
        op.process_element(("k",), i, ())
    assert op.state_size() <= 3
    op.end_of_input()
    assert [r[-1] for r in op.drain()] == [50_000]


# ------------------------------------------------------------------ assigners


@pytest.mark.parametrize(
    ("ts", "offset", "expected"),
    [
        (0, 0, (0, 1000)),
        (999, 0, (0, 1000)),
        (-1, 0, (-1000, 0)),
        (-1000, 0, (-1000, 0)),
        (-1001, 0, (-2000, -1000)),
        (50, 100, (-900, 100)),
        (100, 100, (100, 1100)),
        (50, -100, (-100, 900)),
    ],
)
def test_tumbling_floor_modulo(ts, offset, expected):
    assert TumblingWindows(1000, offset).assign_windows(ts, ()) == (TimeWindow(*expected),)


def test_sliding_negative_and_offset():
    assert SlidingWindows(3000, 1000).assign_windows(-1, ()) == (
        TimeWindow(-1000, 2000),
        TimeWindow(-2000, 1000),
        TimeWindow(-3000, 0),
    )
    assert SlidingWindows(3000, 1000, offset=500).assign_windows(600, ()) == (
        TimeWindow(500, 3500),
        TimeWindow(-500, 2500),
        TimeWindow(-1500, 1500),
    )


def test_cumulate():
    a = CumulateWindows(step=1000, size=3000)
    assert a.assign_windows(0, ()) == (
        TimeWindow(0, 1000),
        TimeWindow(0, 2000),
        TimeWindow(0, 3000),
    )
    assert a.assign_windows(2999, ()) == (TimeWindow(0, 3000),)
    assert a.assign_windows(-1, ()) == (TimeWindow(-3000, 0),)
    assert CumulateWindows(1000, 3000, offset=500).assign_windows(600, ()) == (
        TimeWindow(500, 1500),
        TimeWindow(500, 2500),
        TimeWindow(500, 3500),
    )


@settings(max_examples=200, deadline=None)
@given(st.integers(-(10**6), 10**6), st.integers(1, 50), st.integers(1, 6))
def test_cumulate_windows_are_exactly_those_containing_ts(ts, step, k):
    size = step * k
    windows = CumulateWindows(step, size).assign_windows(ts, ())
    start = ts - ts % size
    expected = [
        TimeWindow(start, start + j * step) for j in range(1, k + 1) if start + j * step > ts
    ]
    assert list(windows) == expected
    assert all(w.start <= ts < w.end for w in windows)


def test_assigner_validation():
    for bad in (
        lambda: TumblingWindows(0),
        lambda: TumblingWindows(10, 10),
        lambda: SlidingWindows(10, 0),
        lambda: SlidingWindows(10, 5, 5),
        lambda: CumulateWindows(3, 10),
        lambda: SessionWindows(-1),
    ):
        with pytest.raises(ValueError):
            bad()


def test_session_and_dynamic_session():
    assert SessionWindows(30).assign_windows(5, ()) == (TimeWindow(5, 35),)
    assert DynamicSessionWindows(1).assign_windows(5, ("x", 7)) == (TimeWindow(5, 12),)
    with pytest.raises(DropRow) as e:
        DynamicSessionWindows(1).assign_windows(5, ("x", 0))
    assert e.value.reason == "invalid session gap"


def test_global_windows():
    (w,) = GlobalWindows().assign_windows(123, ())
    assert w.max_timestamp == 2**63 - 1
    assert not GlobalWindows().is_event_time


def test_count_distinct_counts_nan_once():
    agg = Aggregator((AggregateSpec("COUNT_DISTINCT", 0),))
    acc = agg.create()
    for seq, v in enumerate([float("nan"), float("nan"), 1.0, None]):
        agg.add(acc, 0, seq, (v,))
    assert agg.result(acc) == (2,)
