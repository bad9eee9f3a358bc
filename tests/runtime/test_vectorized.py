"""The NumPy fast path: exact kernels, and ``process_batch`` == the per-row loop."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from wql.runtime.vectorized.kernels import (
    RangeTable,
    floor_start,
    group_rows,
    segments,
    sequential_sums,
    session_components,
)

# --------------------------------------------------------------------------- kernels


@settings(max_examples=100, deadline=None)
@given(
    st.lists(st.integers(-10_000, 10_000), min_size=1, max_size=60),
    st.integers(1, 700),
    st.integers(-699, 699),
)
def test_floor_start_matches_python_floor_modulo(ts, size, offset):
    offset = offset % size if offset >= size else offset
    got = floor_start(np.array(ts, np.int64), offset, size)
    assert got.tolist() == [t - (t - offset) % size for t in ts]


@settings(max_examples=100, deadline=None)
@given(
    st.lists(
        st.tuples(st.integers(0, 4), st.integers(-3, 3), st.floats(-1e6, 1e6, width=64)),
        max_size=200,
    ),
    st.booleans(),
)
def test_sequential_sums_add_in_arrival_order_like_the_loop(rows, long_runs):
    if long_runs:
        rows = rows * 3  # groups longer than the level threshold take the accumulate path
    a = np.array([r[0] for r in rows], np.int64)
    b = np.array([r[1] for r in rows], np.int64)
    v = np.array([r[2] for r in rows], np.float64)
    order, group, starts = group_rows(a, b)
    n_groups = len(starts)
    init = np.full(n_groups, -0.0)
    got = sequential_sums(v[order], group, starts, init)
    expected: dict[tuple[int, int], float] = {}
    for x, y, value in rows:
        expected[(x, y)] = expected.get((x, y), -0.0) + value
    keys = sorted(expected)
    assert len(keys) == n_groups
    for g, k in enumerate(keys):
        # bit-identical, not approximately equal
        assert got[g] == expected[k] and np.signbit(got[g]) == np.signbit(expected[k])


def test_sequential_sums_is_not_pairwise():
    # pairwise summation would give 1.0 here; the loop gives 0.0
    values = np.array([1e16, 1.0, -1e16] + [0.0] * 100, np.float64)
    group = np.zeros(len(values), np.int64)
    got = sequential_sums(values, group, np.array([0]), np.array([-0.0]))
    expected = -0.0
    for x in values.tolist():
        expected = expected + x
    assert got[0] == expected


def test_segments_and_group_rows_keep_arrival_order():
    keys = np.array([3, 1, 3, 1, 2], np.int64)
    order, group, starts = group_rows(keys)
    assert order.tolist() == [1, 3, 4, 0, 2]
    assert group.tolist() == [0, 0, 1, 2, 2]
    assert starts.tolist() == [0, 2, 3]
    s, lengths = segments(keys[order])
    assert s.tolist() == [0, 2, 3] and lengths.tolist() == [2, 1, 2]


@settings(max_examples=150, deadline=None)
@given(
    st.lists(st.tuples(st.integers(0, 3), st.integers(-50, 50), st.integers(1, 20)), max_size=60)
)
def test_session_components_equal_pairwise_merging(intervals):
    key = np.array([k for k, _, _ in intervals], np.int64)
    start = np.array([s for _, s, _ in intervals], np.int64)
    end = np.array([s + g for _, s, g in intervals], np.int64)
    comp, ckey, cstart, cend = session_components(key, start, end)
    # brute force: repeatedly merge touching intervals of one key
    groups: list[tuple[int, int, int, set[int]]] = []
    for i, (k, s, g) in enumerate(intervals):
        cur = (k, s, s + g, {i})
        while True:
            hit = next((x for x in groups if x[0] == k and x[1] <= cur[2] and x[2] >= cur[1]), None)
            if hit is None:
                break
            groups.remove(hit)
            cur = (k, min(cur[1], hit[1]), max(cur[2], hit[2]), cur[3] | hit[3])
        groups.append(cur)
    assert len(cstart) == len(groups)
    for k, s, e, members in groups:
        ids = {int(comp[i]) for i in members}
        assert len(ids) == 1
        c = ids.pop()
        assert (int(ckey[c]), int(cstart[c]), int(cend[c])) == (k, s, e)


@settings(max_examples=100, deadline=None)
@given(
    st.lists(st.integers(-1000, 1000), min_size=1, max_size=70),
    st.data(),
)
def test_range_table_min_max(values, data):
    arr = np.array(values, np.int64)
    pairs = data.draw(
        st.lists(
            st.tuples(st.integers(0, len(values) - 1), st.integers(1, len(values))),
            min_size=1,
            max_size=20,
        )
    )
    lo = np.array([min(a, b - 1) for a, b in pairs], np.int64)
    hi = np.array([max(a + 1, b) for a, b in pairs], np.int64)
    mins = RangeTable(arr, np.minimum).query(lo, hi)
    maxs = RangeTable(arr, np.maximum).query(lo, hi)
    for i, (a, b) in enumerate(zip(lo.tolist(), hi.tolist(), strict=True)):
        assert mins[i] == min(values[a:b]) and maxs[i] == max(values[a:b])


# --------------------------------------------------------------------------- the fast path

from collections import Counter  # noqa: E402
from typing import Any  # noqa: E402

from wql.runtime import (  # noqa: E402
    MIN_TIME,
    AggregateSpec,
    CountEvictor,
    CountTrigger,
    CumulateWindows,
    DynamicSessionWindows,
    OperatorConfig,
    PurgingTrigger,
    RowBatch,
    SessionWindows,
    SlidingWindows,
    TumblingWindows,
    WindowOperator,
    count_windows,
    vectorized,  # noqa: E402
)
from wql.runtime.vectorized import sessions, try_process_batch  # noqa: E402


@pytest.fixture(autouse=True)
def plan_short_batches(monkeypatch):
    """The tests below are about the NumPy path: it plans batches of any length (the
    operator sends those shorter than ``MIN_BATCH`` to the loop, pinned at the end)."""
    monkeypatch.setattr(vectorized, "MIN_BATCH", 0)


FAST_AGGS = [
    "COUNT_STAR",
    "COUNT",
    "SUM",
    "MIN",
    "MAX",
    "AVG",
    "FIRST_VALUE",
    "LAST_VALUE",
    "COUNT_DISTINCT",
    "COLLECT_LIST",
]


@st.composite
def fast_configs(draw, lateness=None, evictors=True):
    kind = draw(st.sampled_from(["tumble", "hop", "cumulate", "session", "dynamic", "count"]))
    trigger = evictor = None
    if kind == "count":
        # sliding count windows keep rows (an evictor): the fast path declines them
        slide = draw(st.one_of(st.none(), st.integers(1, 3))) if evictors else None
        assigner, trigger, evictor = count_windows(draw(st.integers(1, 5)), slide)
    elif kind == "tumble":
        size = draw(st.integers(1, 30))
        assigner: Any = TumblingWindows(size, draw(st.integers(-(size - 1), size - 1)))
    elif kind == "hop":
        slide = draw(st.integers(1, 8))
        size = draw(st.one_of(st.integers(1, 6).map(lambda k: k * slide), st.integers(1, 40)))
        assigner = SlidingWindows(size=size, slide=slide, offset=draw(st.integers(0, slide - 1)))
    elif kind == "cumulate":
        step = draw(st.integers(1, 8))
        size = step * draw(st.integers(1, 6))
        assigner = CumulateWindows(step=step, size=size, offset=draw(st.integers(0, size - 1)))
    elif kind == "session":
        assigner = SessionWindows(draw(st.integers(1, 20)))
    else:
        assigner = DynamicSessionWindows(1)
    specs = draw(
        st.lists(
            st.sampled_from(FAST_AGGS).map(
                lambda k: AggregateSpec(k, None if k == "COUNT_STAR" else 0)
            ),
            min_size=1,
            max_size=4,
        )
    )
    return OperatorConfig(
        assigner,
        tuple(specs),
        trigger=trigger,
        evictor=evictor,
        allowed_lateness=draw(st.integers(0, 12) if lateness is None else lateness),
        late_output=draw(st.booleans()),
    )


def replay(rows: list[tuple], delay: int) -> list[int]:
    out, high = [], None
    for _, ts, _ in rows:
        out.append(MIN_TIME if high is None else high - delay - 1)
        high = ts if high is None else max(high, ts)
    return out


def batch_of(
    rows: list[tuple],
    wms: list[int],
    float_values: bool,
    as_lists: bool,
    missing=(),
    no_time: bool = False,
) -> RowBatch:
    values = [v for _, _, v in rows]
    vcol = np.array([v[0] for v in values], np.float64 if float_values else np.int64)
    gcol = np.array([v[1] for v in values], np.int64)
    columns: tuple = (vcol.tolist(), gcol.tolist()) if as_lists else (vcol, gcol)
    valid = None
    if missing:
        valid = np.ones(len(rows), dtype=bool)
        valid[list(missing)] = False
    return RowBatch(
        keys=[k for k, _, _ in rows],
        timestamps=None if no_time else np.array([t for _, t, _ in rows], np.int64),
        columns=columns,
        watermark_before=np.array(wms, np.int64),
        timestamp_valid=valid,
    )


def loop(op: WindowOperator, batch: RowBatch) -> None:
    """The per-row loop of the architecture contract, written independently of the runtime."""
    columns = [c.tolist() if isinstance(c, np.ndarray) else list(c) for c in batch.columns]
    valid = batch.timestamp_valid
    for i in range(len(batch)):
        op.advance_watermark(int(batch.watermark_before[i]))
        has_ts = batch.timestamps is not None and (valid is None or valid[i])
        ts = int(batch.timestamps[i]) if has_ts else None  # type: ignore[index]
        op.process_element(batch.keys[i], ts, tuple(c[i] for c in columns))


def state_view(op: WindowOperator) -> dict:
    """Window contents, pane counts and timers per key, independent of state-window names."""
    view = {}
    for key, ks in op._keys.items():
        if ks.merging is not None:
            windows = {
                w: (_norm(ks.contents.get(sw)), ks.panes.get(sw))
                for w, sw in ks.merging.mapping.items()
            }
        else:
            windows = {w: (_norm(acc), ks.panes.get(w)) for w, acc in ks.contents.items()}
            windows.update({w: (_norm(ks.contents.get(w)), p) for w, p in ks.panes.items()})
        view[key] = (windows, op.timers(key), _norm(sorted(ks.trigger.items(), key=repr)))
    return view


def _norm(acc: Any) -> Any:
    if isinstance(acc, float):
        return acc.hex()  # bit for bit: NaN equals NaN, -0.0 differs from 0.0
    if isinstance(acc, list | tuple):
        return tuple(_norm(x) for x in acc)
    if isinstance(acc, set):  # COUNT_DISTINCT's accumulator
        return ("set", tuple(sorted((_norm(x) for x in acc), key=repr)))
    return acc


def _bits(row: tuple) -> tuple:
    # floats compared bit for bit (so -0.0 != 0.0 and NaN == NaN), also inside values
    return _norm(row)


def observed(op: WindowOperator, emitted: list[tuple]) -> tuple:
    c = op.counters
    return (
        Counter(_bits(r) for r in emitted),
        Counter(_bits(r) for r in op.drain_late()),
        (c.rows_in, c.rows_emitted, c.late_rows, dict(c.dropped)),
        op.watermark,
        op._seq,
    )


@st.composite
def streams(draw, in_order: bool | None = None, float_values: bool | None = None):
    n = draw(st.integers(1, 60))
    keys = [("a",), ("b",), ("c",)]
    floats = draw(st.booleans()) if float_values is None else float_values
    value = (
        st.one_of(
            st.floats(-1e6, 1e6, allow_nan=False, allow_infinity=False),
            st.sampled_from([1e16, -1e16, 0.1, 0.0, -0.0, 2.5]),
            st.integers(-1000, 1000).map(float),  # integral: HOP/CUMULATE may share panes
            st.just(float("nan")),
        )
        if floats
        else st.integers(-(10**6), 10**6)
    )
    rows = [
        (
            draw(st.sampled_from(keys)),
            draw(st.integers(-40, 160)),
            (draw(value), draw(st.integers(1, 25))),
        )
        for _ in range(n)
    ]
    ordered = draw(st.booleans()) if in_order is None else in_order
    if ordered:
        rows.sort(key=lambda r: r[1])
    return rows, floats


def run_both(config: OperatorConfig, rows, delay, cuts, floats, as_lists, missing=(), snap=False):
    wms = replay(rows, delay)
    bounds = [0, *sorted(set(cuts)), len(rows)]
    fast, slow = WindowOperator(config), WindowOperator(config)
    fast_out, slow_out, taken = [], [], []
    for a, b in zip(bounds[:-1], bounds[1:], strict=True):
        if a == b:
            continue
        batch = batch_of(
            rows[a:b],
            wms[a:b],
            floats,
            as_lists,
            [i - a for i in missing if a <= i < b],
            no_time=not config.assigner.is_event_time and a % 2 == 1,
        )
        took = try_process_batch(fast, batch)
        if not took:
            loop(fast, batch)
        if snap:  # what the fast path leaves behind must survive a snapshot
            fast_out += fast.drain()
            fast = WindowOperator.restore(config, fast.snapshot())
        taken.append(took)
        loop(slow, batch)
        fast_out += fast.drain()
        slow_out += slow.drain()
        # after every batch: same state, so later batches, timers and snapshots continue alike
        assert state_view(fast) == state_view(slow)
    return fast, slow, fast_out, slow_out, taken


@settings(max_examples=250, deadline=None)
@given(fast_configs(), streams(), st.integers(0, 6), st.data())
def test_fast_path_equals_the_per_row_loop(config, stream, delay, data):
    rows, floats = stream
    cuts = data.draw(st.lists(st.integers(0, len(rows)), max_size=3))
    as_lists = data.draw(st.booleans())
    missing = data.draw(st.lists(st.integers(0, len(rows) - 1), max_size=2, unique=True))
    snap = data.draw(st.booleans())
    fast, slow, fast_out, slow_out, _ = run_both(
        config, rows, delay, cuts, floats, as_lists, missing, snap
    )
    fast.end_of_input()
    slow.end_of_input()
    assert observed(fast, fast_out + fast.drain()) == observed(slow, slow_out + slow.drain())


@settings(max_examples=120, deadline=None)
@given(
    fast_configs(lateness=st.just(0), evictors=False),
    streams(in_order=True, float_values=False),
    st.integers(1, 6),
    st.data(),
)
def test_fast_path_is_taken_for_in_order_batches(config, stream, delay, data):
    rows, floats = stream
    cuts = data.draw(st.lists(st.integers(0, len(rows)), max_size=3))
    fast, slow, fast_out, slow_out, taken = run_both(config, rows, delay, cuts, floats, False)
    # in order with delay >= 1: no row can be late or touch a fired window
    assert all(taken)
    fast.end_of_input()
    slow.end_of_input()
    assert observed(fast, fast_out + fast.drain()) == observed(slow, slow_out + slow.drain())


def test_hop_shares_panes_and_stays_exact_for_integral_float_sums():
    config = OperatorConfig(
        SlidingWindows(size=60_000, slide=1_000),
        (AggregateSpec("SUM", 0), AggregateSpec("MAX", 0), AggregateSpec("COUNT_STAR")),
    )
    rng = np.random.default_rng(7)
    n = 5_000
    ts = np.sort(rng.integers(0, 300_000, n))
    rows = [
        ((int(k),), int(t), (float(v), 1))
        for k, t, v in zip(rng.integers(0, 20, n), ts, rng.integers(-500, 500, n), strict=True)
    ]
    fast, slow, fast_out, slow_out, taken = run_both(config, rows, 100, [2_000], True, False)
    assert all(taken)
    fast.end_of_input()
    slow.end_of_input()
    assert observed(fast, fast_out + fast.drain()) == observed(slow, slow_out + slow.drain())


def test_declines_what_it_cannot_prove_and_changes_nothing():
    late_fire = OperatorConfig(TumblingWindows(10), (AggregateSpec("SUM", 0),), allowed_lateness=50)
    op = WindowOperator(late_fire)
    op.advance_watermark(25)
    before = state_view(op)
    # ts 5: window [0, 10) fired at watermark 25 but is kept until 59: a late firing
    batch = RowBatch([("a",)], np.array([5]), (np.array([1]),), np.array([25]))
    assert try_process_batch(op, batch) is False
    assert state_view(op) == before and op.counters.rows_in == 0
    counting = OperatorConfig(TumblingWindows(10), (), trigger=CountTrigger(2))
    assert try_process_batch(WindowOperator(counting), batch) is False
    nulls = RowBatch([("a",)], np.array([5]), ([None],), np.array([MIN_TIME]))
    assert try_process_batch(WindowOperator(late_fire), nulls) is False


def test_a_row_bridging_existing_sessions_cuts_the_batch(monkeypatch):
    # sessions [0, 20) and [40, 60) exist; the row at 20 joins them (touching windows):
    # the rows before it are planned, it goes through the loop alone, then the rest
    cfg = OperatorConfig(SessionWindows(20), (AggregateSpec("COUNT_STAR"), AggregateSpec("SUM", 0)))
    fast, plain = WindowOperator(cfg), WindowOperator(cfg, fast=False)
    for op in (fast, plain):
        op.process_element(("k",), 0, (1,))
        op.process_element(("k",), 40, (2,))
    keys = [("j",)] * 3 + [("k",)] + [("j",)] * 3
    times = np.array([100, 101, 102, 20, 103, 104, 200])
    batch = RowBatch(keys, times, (np.arange(7),), np.full(7, -1))
    planned: list = []
    plan = sessions.plan_sessions
    monkeypatch.setattr(
        sessions, "plan_sessions", lambda op, p: planned.append(plan(op, p)) or planned[-1]
    )
    monkeypatch.setattr(vectorized, "MIN_PART", 1)
    assert try_process_batch(fast, batch)
    loop(plain, batch)
    assert [type(x).__name__ for x in planned] == ["Cut", "Plan", "Plan"]
    assert observed(fast, fast.drain()) == observed(plain, plain.drain())
    assert state_view(fast) == state_view(plain)
    for op in (fast, plain):
        op.end_of_input()
    assert observed(fast, fast.drain()) == observed(plain, plain.drain())


@settings(max_examples=60, deadline=None)
@given(
    steps=st.lists(
        st.tuples(st.sampled_from([("a",), ("b",), ("c",)]), st.integers(0, 6)),
        min_size=20,
        max_size=80,
    ),
    cuts=st.lists(st.integers(0, 80), max_size=4),
    n=st.integers(1, 4),
    keep=st.integers(1, 3),
    purging=st.booleans(),
    lateness=st.sampled_from([0, 5]),
)
def test_count_triggered_sessions_fire_as_the_loop(steps, cuts, n, keep, purging, lateness):
    # mostly in-order rows per key, sessions of gap 8 holding many rows: COUNT(n) fires
    # inside batches, the evictor keeps `keep` rows; every batch equals the loop
    trigger = PurgingTrigger(CountTrigger(n)) if purging else CountTrigger(n)
    cfg = OperatorConfig(
        SessionWindows(8),
        (AggregateSpec("COUNT_STAR"), AggregateSpec("SUM", 0), AggregateSpec("COLLECT_LIST", 0)),
        trigger=trigger,
        evictor=None if purging else CountEvictor(keep),
        allowed_lateness=lateness,
    )
    fast, plain = WindowOperator(cfg), WindowOperator(cfg, fast=False)
    clock, keys, times = 0, [], []
    for key, dt in steps:
        clock += dt
        keys.append(key)
        times.append(clock)
    wms = [t - 10 for t in times]
    bounds = sorted({0, len(keys), *(c for c in cuts if c < len(keys))})
    for a, b in zip(bounds[:-1], bounds[1:], strict=True):
        batch = RowBatch(keys[a:b], np.array(times[a:b]), (np.arange(a, b),), np.array(wms[a:b]))
        assert try_process_batch(fast, batch)
        loop(plain, batch)
        assert observed(fast, fast.drain()) == observed(plain, plain.drain())
        assert state_view(fast) == state_view(plain)
    for op in (fast, plain):
        op.end_of_input()
    assert observed(fast, fast.drain()) == observed(plain, plain.drain())


def test_short_batches_go_to_the_loop(monkeypatch):
    """A batch shorter than ``MIN_BATCH`` is left to the per-row loop (cheaper for it):
    not planned, the operator untouched; one of ``MIN_BATCH`` rows is planned."""
    monkeypatch.setattr(vectorized, "MIN_BATCH", 4)
    config = OperatorConfig(SessionWindows(10), (AggregateSpec("SUM", 0),))

    def batch(n: int) -> RowBatch:
        ts = np.arange(n, dtype=np.int64)
        return RowBatch([("a",)] * n, ts, (np.ones(n, np.int64),), np.full(n, MIN_TIME))

    op = WindowOperator(config)
    before = state_view(op)
    assert try_process_batch(op, batch(3)) is False
    assert state_view(op) == before
    assert op.process_batch(batch(3)) is False  # the loop ran it
    assert try_process_batch(WindowOperator(config), batch(4)) is True
