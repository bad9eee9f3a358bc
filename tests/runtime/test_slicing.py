"""Sliced HOP/CUMULATE (``wql.runtime.columnar``): what only the slices have.

That the sliced operator equals ``WindowOperator(config, fast=False)`` on
random batches (a whole snapshot or every key's restored mid-way) is the
columnar case of ``test_plain_path.py``. Here: one partial per (key,
slice), slices freed with their last window, a value the slices cannot
merge exactly handing over to the per-window path, per-key snapshots
holding the per-window state, and where slices apply.
"""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from tests.runtime.strategies import ALL_AGGS
from wql.runtime import AggregateSpec, OperatorConfig, RowBatch, WindowOperator
from wql.runtime import snapshot as snap
from wql.runtime.assigners import CumulateWindows, SlidingWindows, TumblingWindows
from wql.runtime.columnar import ColumnarWindows
from wql.runtime.fastpath import WindowPath
from wql.runtime.triggers import CountTrigger

AGGS = ALL_AGGS


@st.composite
def assigners(draw):
    if draw(st.booleans()):
        slide = draw(st.integers(1, 12))
        size = draw(st.integers(1, 40))
        offset = draw(st.integers(-(slide - 1), slide - 1))
        return SlidingWindows(size, slide, offset)
    step = draw(st.integers(1, 10))
    size = step * draw(st.integers(1, 6))
    offset = draw(st.integers(-(size - 1), size - 1))
    return CumulateWindows(step, size, offset)


rows_st = st.lists(
    st.tuples(
        st.sampled_from([("a",), ("b",), ("c",)]),
        st.one_of(st.none(), st.integers(-40, 120)),  # None: missing timestamp
        st.one_of(st.none(), st.integers(-5, 9)),
        st.one_of(st.none(), st.sampled_from(["x", "y", "z"])),
        st.integers(0, 12),  # watermark step before the row
    ),
    max_size=50,
)


def _content(op: WindowOperator) -> object:
    # sets (COUNT DISTINCT) may pickle in another order: compare the loaded data
    return snap.loads(op.snapshot())


def _assert_same(sliced: WindowOperator, plain: WindowOperator) -> None:
    assert sliced.drain() == plain.drain()
    assert sliced.drain_late() == plain.drain_late()
    assert sliced.counters == plain.counters
    assert sliced.open_windows() == plain.open_windows()
    assert sliced.state_size() == plain.state_size()
    assert _content(sliced) == _content(plain)


@settings(max_examples=60, deadline=None)
@given(assigner=assigners(), rows=rows_st)
def test_sliced_per_key_snapshots_equal_per_window(assigner, rows) -> None:
    # the streaming host's round trip: every key restored from its snapshot before its row
    config = OperatorConfig(assigner, AGGS, allowed_lateness=5)
    sliced = WindowOperator(config)
    plain = WindowOperator(config, fast=False)
    wm = -60
    for key, ts, v, s, step in rows:
        wm += step
        data, plain_data = sliced.snapshot_key(key), plain.snapshot_key(key)
        assert snap.loads(data) == snap.loads(plain_data)
        sliced.restore_key(key, data)
        plain.restore_key(key, plain_data)
        for op in (sliced, plain):
            op.advance_watermark(wm)
            op.process_element(key, ts, (v, s))
        _assert_same(sliced, plain)


def _batch(rows: list[tuple[int, object]], wm: int = -100) -> RowBatch:
    return RowBatch(
        [("k",)] * len(rows), [t for t, _ in rows], ([v for _, v in rows],), [wm] * len(rows)
    )


def test_slices_keep_one_partial_per_key_and_slice() -> None:
    # HOP 60 / 1: a row updates one slice, not 60 windows
    config = OperatorConfig(SlidingWindows(60, 1), (AggregateSpec("SUM", 0),))
    op = WindowOperator(config)
    assert op.process_batch(_batch([(t, t) for t in range(100)]))
    assert isinstance(op._path, ColumnarWindows)
    assert len(op._path.table.enc) == 100
    assert op.open_windows() == 159  # windows [t - 59, t + 1) for t in -59..99
    op.advance_watermark(59)
    out = op.drain()
    # window [0, 60) holds rows 0..59: 59 * 60 / 2 = 1770
    assert out[-1][1:4] == (0, 60, 59) and out[-1][-1] == 1770
    # slices whose every window has fired are freed: slice 0 ended with [0, 60)
    assert len(op._path.table.enc) == 99


def test_float_values_hand_the_slices_to_the_per_window_path_exactly() -> None:
    config = OperatorConfig(SlidingWindows(30, 10), (AggregateSpec("SUM", 0),))
    fast = WindowOperator(config)
    plain = WindowOperator(config, fast=False)
    fast.process_batch(_batch([(1, 1)]))
    fast.process_batch(_batch([(12, 0.1), (25, 0.2)]))
    for t, v in ((1, 1), (12, 0.1), (25, 0.2)):
        plain.advance_watermark(-100)
        plain.process_element(("k",), t, (v,))
    for op in (fast, plain):
        op.end_of_input()
    assert type(fast._path) is WindowPath  # the per-window path took over
    _assert_same(fast, plain)


def test_only_hop_and_cumulate_with_the_default_trigger_are_sliced() -> None:
    aggs = (AggregateSpec("COUNT_STAR"),)
    cumulate = OperatorConfig(CumulateWindows(2, 10), aggs)

    def sliced(op: WindowOperator) -> bool:
        return isinstance(op._path, ColumnarWindows)

    assert sliced(WindowOperator(cumulate))
    assert sliced(WindowOperator(OperatorConfig(SlidingWindows(10, 2), aggs)))
    assert not sliced(WindowOperator(cumulate, fast=False))
    assert not sliced(WindowOperator(OperatorConfig(TumblingWindows(10), aggs)))
    counted = OperatorConfig(SlidingWindows(10, 2), aggs, trigger=CountTrigger(3))
    assert not sliced(WindowOperator(counted))
    late = OperatorConfig(SlidingWindows(10, 2), aggs, allowed_lateness=1)
    assert not sliced(WindowOperator(late))
