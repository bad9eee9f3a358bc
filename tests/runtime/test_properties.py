"""Property tests: the WindowOperator against the brute-force reference.

Rows are fed exactly as the batch replay host feeds them (docs/architecture.md):
for each row in replay order ``advance_watermark(max_ts_before - delay - 1)``
then ``process_element``, and ``end_of_input()`` at the end.  Outputs are
compared as multisets of emitted rows (firing order across keys and windows
is not part of the contract), plus late rows and drop counters.

Also checked: a snapshot/restore at a random row gives the uninterrupted
run's output, and ``process_batch`` over any split into batches equals the
per-row loop (whichever path ``process_batch`` takes).
"""

from __future__ import annotations

from collections import Counter
from typing import Any

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.runtime.reference import (
    MIN_TIME,
    Agg,
    CountWindow,
    Cumulate,
    DynamicSession,
    Hop,
    RefQuery,
    Row,
    Session,
    Tumble,
    in_order_reference,
    replay_watermarks,
    simulate_reference,
)
from wql.runtime import (
    AggregateSpec,
    CumulateWindows,
    DynamicSessionWindows,
    OperatorConfig,
    RowBatch,
    SessionWindows,
    SlidingWindows,
    TumblingWindows,
    WindowOperator,
    count_windows,
)

KEYS = [("a",), ("b",), ("c",), ("d",)]

# --------------------------------------------------------------------------- strategies


@st.composite
def tumbles(draw):
    size = draw(st.integers(1, 40))
    return Tumble(size, draw(st.integers(-(size - 1), size - 1)))


@st.composite
def hops(draw):
    slide = draw(st.integers(1, 15))
    size = draw(st.one_of(st.integers(1, 4).map(lambda k: k * slide), st.integers(1, 45)))
    return Hop(slide, size, draw(st.integers(-(slide - 1), slide - 1)))


@st.composite
def cumulates(draw):
    step = draw(st.integers(1, 12))
    size = step * draw(st.integers(1, 5))
    return Cumulate(step, size, draw(st.integers(-(size - 1), size - 1)))


sessions = st.integers(1, 25).map(Session)
dynamic_sessions = st.just(DynamicSession(1))
time_windows = st.one_of(tumbles(), hops(), cumulates(), sessions, dynamic_sessions)
count_window_shapes = st.builds(
    CountWindow, st.integers(1, 5), st.one_of(st.none(), st.integers(1, 4))
)

agg_lists = st.lists(
    st.sampled_from(
        [
            Agg("count_star"),
            Agg("count", 0),
            Agg("sum", 0),
            Agg("min", 0),
            Agg("max", 0),
            Agg("avg", 0),
            Agg("count_distinct", 0),
            Agg("first_value", 0),
            Agg("last_value", 0),
            Agg("collect_list", 0),
        ]
    ),
    min_size=1,
    max_size=4,
)


@st.composite
def row_lists(draw, min_ts=-60, max_ts=160, max_size=40, nulls=True, bad_gaps=False):
    """Rows ``(key, ts, (value, gap))``; values may be null, gaps are > 0 unless asked."""
    n = draw(st.integers(0, max_size))
    value = st.one_of(st.none(), st.integers(-9, 9)) if nulls else st.integers(-9, 9)
    gap = st.integers(-2, 30) if bad_gaps else st.integers(1, 30)
    rows = []
    for _ in range(n):
        rows.append(
            (
                draw(st.sampled_from(KEYS)),
                draw(st.integers(min_ts, max_ts)),
                (draw(value), draw(gap)),
            )
        )
    return rows


# --------------------------------------------------------------------------- running


def to_config(query: RefQuery) -> OperatorConfig:
    """The runtime configuration of a reference query shape."""
    w = query.window
    aggs = tuple(AggregateSpec(a.kind.upper(), a.arg) for a in query.aggs)
    trigger = evictor = None
    if isinstance(w, Tumble):
        assigner: Any = TumblingWindows(w.size, w.offset)
    elif isinstance(w, Hop):
        assigner = SlidingWindows(size=w.size, slide=w.slide, offset=w.offset)
    elif isinstance(w, Cumulate):
        assigner = CumulateWindows(step=w.step, size=w.size, offset=w.offset)
    elif isinstance(w, Session):
        assigner = SessionWindows(w.gap)
    elif isinstance(w, DynamicSession):
        assigner = DynamicSessionWindows(w.gap_index)
    else:
        assigner, trigger, evictor = count_windows(w.size, w.slide)
    return OperatorConfig(
        assigner,
        aggs,
        trigger=trigger,
        evictor=evictor,
        allowed_lateness=query.lateness,
        late_output=query.late_output,
    )


def run_rows(op: WindowOperator, rows: list[Row], wms: list[int]) -> None:
    for (key, ts, values), wm in zip(rows, wms, strict=True):
        op.advance_watermark(wm)
        op.process_element(key, ts, values)


def _hashable(x: Any) -> Any:
    return tuple(x) if isinstance(x, list) else x


def multiset(rows: list[tuple]) -> Counter:
    return Counter(tuple(_hashable(x) for x in row) for row in rows)


def outcome(op: WindowOperator, emitted: list[tuple], late: list[tuple]) -> tuple:
    c = op.counters
    return (
        multiset(emitted),
        multiset(late),
        c.rows_in,
        c.rows_emitted,
        c.late_rows,
        {k: v for k, v in c.dropped.items() if v},
    )


def run_runtime(query: RefQuery, rows: list[Row], delay: int) -> tuple:
    op = WindowOperator(to_config(query))
    run_rows(op, rows, replay_watermarks([ts for _, ts, _ in rows], delay))
    op.end_of_input()
    return op, op.drain(), op.drain_late()


def assert_matches_reference(query: RefQuery, rows: list[Row], delay: int, reference) -> None:
    op, emitted, late = run_runtime(query, rows, delay)
    expected = reference(query, rows, delay)
    assert multiset(emitted) == multiset(expected.emitted)
    assert multiset(late) == multiset(expected.late)
    assert {k: v for k, v in op.counters.dropped.items() if v} == expected.dropped
    assert op.counters.rows_in == len(rows)
    assert op.counters.rows_emitted == len(expected.emitted)
    assert op.counters.late_rows == len(expected.late)


def in_replay_order(rows: list[Row]) -> list[Row]:
    """Event-time order, ties by input order (docs/architecture.md)."""
    return sorted(rows, key=lambda r: r[1])


# --------------------------------------------------------------------------- the reference itself


@settings(max_examples=150, deadline=None)
@given(
    st.one_of(time_windows, count_window_shapes),
    agg_lists,
    row_lists(),
    st.integers(0, 20),
    st.integers(0, 3),
    st.booleans(),
)
def test_reference_closed_form_agrees_with_simulation(window, aggs, rows, lateness, delay, late):
    # Two derivations of the reference must agree where both apply (in-order input).
    query = RefQuery(window, tuple(aggs), lateness, late)
    rows = in_replay_order(rows)
    a = in_order_reference(query, rows, delay)
    b = simulate_reference(query, rows, delay)
    assert multiset(a.emitted) == multiset(b.emitted)
    assert a.late == b.late == [] and a.dropped == b.dropped


def test_reference_reproduces_flink_session_vector_9():
    rows = [("e", t, (1,)) for t in (1000, 2000, 4500, 8500, 7000, 11600, 10000, 14500)]
    wms = [MIN_TIME, 1999, 4998, 4998, 7400, 11501, 14600, 14600]

    def fired(lateness):
        q = RefQuery(Session(3000), (Agg("sum", 0),), lateness)
        r = simulate_reference(q, rows, watermarks=wms)
        return [(e[1], e[2], e[7]) for e in r.emitted], r.late

    assert fired(0) == (
        [(1000, 11500, 5), (11600, 14600, 1), (14500, 17500, 1)],
        [("e", 10000, (1,))],
    )
    assert fired(10) == (
        [(1000, 11500, 5), (11600, 14600, 1), (10000, 14600, 2), (10000, 17500, 3)],
        [],
    )
    assert fired(10000)[0][2:] == [(1000, 14600, 7), (1000, 17500, 8)]


# --------------------------------------------------------------------------- runtime vs reference


@settings(max_examples=120, deadline=None)
@given(
    st.one_of(tumbles(), hops(), cumulates()),
    agg_lists,
    row_lists(),
    st.integers(0, 3),
    st.integers(0, 15),
)
def test_time_windows_in_order(window, aggs, rows, delay, lateness):
    query = RefQuery(window, tuple(aggs), lateness)
    assert_matches_reference(query, in_replay_order(rows), delay, in_order_reference)


@settings(max_examples=120, deadline=None)
@given(
    st.one_of(sessions, dynamic_sessions),
    agg_lists,
    row_lists(),
    st.integers(0, 3),
    st.integers(0, 15),
)
def test_sessions_in_order_with_global_watermark_cuts(window, aggs, rows, delay, lateness):
    query = RefQuery(window, tuple(aggs), lateness)
    assert_matches_reference(query, in_replay_order(rows), delay, in_order_reference)


@settings(max_examples=60, deadline=None)
@given(count_window_shapes, agg_lists, row_lists())
def test_count_windows(window, aggs, rows):
    query = RefQuery(window, tuple(aggs))
    # count windows have no time: any order, any delay
    assert_matches_reference(query, rows, 0, in_order_reference)


@settings(max_examples=150, deadline=None)
@given(
    time_windows,
    agg_lists,
    row_lists(bad_gaps=True),
    st.integers(0, 30),
    st.integers(0, 30),
    st.booleans(),
)
def test_out_of_order_with_lateness_and_late_output(window, aggs, rows, delay, lateness, late):
    # rows in arbitrary arrival order (the arrival_order column case)
    query = RefQuery(window, tuple(aggs), lateness, late)
    assert_matches_reference(query, rows, delay, simulate_reference)


# --------------------------------------------------------------------------- snapshots, batches


@settings(max_examples=60, deadline=None)
@given(
    st.one_of(time_windows, count_window_shapes),
    agg_lists,
    row_lists(),
    st.integers(0, 20),
    st.integers(0, 20),
    st.data(),
)
def test_snapshot_restore_at_any_row_equals_uninterrupted(
    window, aggs, rows, delay, lateness, data
):
    query = RefQuery(window, tuple(aggs), lateness, True)
    config = to_config(query)
    wms = replay_watermarks([ts for _, ts, _ in rows], delay)
    _, emitted, late = run_runtime(query, rows, delay)
    cut = data.draw(st.integers(0, len(rows)))
    first = WindowOperator(config)
    run_rows(first, rows[:cut], wms[:cut])
    early_out = first.drain()  # drained output is not part of the snapshot
    second = WindowOperator.restore(config, first.snapshot())
    run_rows(second, rows[cut:], wms[cut:])
    second.end_of_input()
    assert multiset(early_out + second.drain()) == multiset(emitted)
    assert multiset(second.drain_late()) == multiset(late)
    assert second.counters.rows_in == len(rows)


def make_batch(rows: list[Row], wms: list[int], numpy_columns: bool) -> RowBatch:
    values = list(zip(*[v for _, _, v in rows], strict=True)) if rows else [(), ()]
    columns: tuple = tuple(
        np.array(col, dtype=np.int64) if numpy_columns else list(col) for col in values
    )
    return RowBatch(
        keys=[k for k, _, _ in rows],
        timestamps=np.array([ts for _, ts, _ in rows], dtype=np.int64),
        columns=columns,
        watermark_before=np.array(wms, dtype=np.int64),
    )


def run_in_batches(config: OperatorConfig, rows: list[Row], wms: list[int], cuts, numpy_columns):
    op = WindowOperator(config)
    bounds = [0, *sorted(cuts), len(rows)]
    emitted: list[tuple] = []
    for a, b in zip(bounds[:-1], bounds[1:], strict=True):
        op.process_batch(make_batch(rows[a:b], wms[a:b], numpy_columns))
        emitted += op.drain()
    op.end_of_input()
    return op, emitted + op.drain(), op.drain_late()


@settings(max_examples=150, deadline=None)
@given(
    st.one_of(time_windows, count_window_shapes),
    agg_lists,
    row_lists(nulls=False),
    st.integers(0, 20),
    st.integers(0, 20),
    st.booleans(),
    st.booleans(),
    st.data(),
)
def test_process_batch_any_split_equals_per_row_loop(
    window, aggs, rows, delay, lateness, ordered, numpy_columns, data
):
    if ordered:
        rows = in_replay_order(rows)
    query = RefQuery(window, tuple(aggs), lateness, True)
    config = to_config(query)
    wms = replay_watermarks([ts for _, ts, _ in rows], delay)
    loop, loop_emitted, loop_late = run_runtime(query, rows, delay)
    cuts = data.draw(st.lists(st.integers(0, len(rows)), max_size=4))
    op, emitted, late = run_in_batches(config, rows, wms, cuts, numpy_columns)
    assert outcome(op, emitted, late) == outcome(loop, loop_emitted, loop_late)
