"""Sliced HOP/CUMULATE (``wql.runtime.slicing``): what only slicing has.

That the sliced operator equals ``WindowOperator(config, fast=False)`` on
random streams (every aggregate kind, lateness, late output, a whole
snapshot restored mid-way, per-key restores, a float that switches slicing
off) is the sliced case of ``test_plain_path.py``. Here: one accumulator per
slice, slices freed with their last window, per-key snapshots holding the
per-window state, and where slicing applies.
"""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from tests.runtime.strategies import ALL_AGGS
from wql.runtime import AggregateSpec, OperatorConfig, WindowOperator
from wql.runtime import snapshot as snap
from wql.runtime.assigners import CumulateWindows, SlidingWindows, TumblingWindows
from wql.runtime.fastpath import WindowPath
from wql.runtime.slicing import Slicer
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
    sliced = WindowOperator(config, slicing=True)
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


def test_slicing_keeps_one_accumulator_per_slice() -> None:
    # HOP 60 / 1: a row updates one slice, not 60 windows
    config = OperatorConfig(SlidingWindows(60, 1), (AggregateSpec("SUM", 0),))
    sliced = WindowOperator(config, slicing=True)
    for t in range(100):
        sliced.process_element(("k",), t, (t,))
    assert isinstance(sliced._path, Slicer)
    assert len(sliced._path.slices[("k",)]) == 100
    assert sliced.open_windows() == 159  # windows [t - 59, t + 1) for t in -59..99
    sliced.advance_watermark(59)
    out = sliced.drain()
    # window [0, 60) holds rows 0..59: 59 * 60 / 2 = 1770
    assert out[-1][1:4] == (0, 60, 59) and out[-1][-1] == 1770
    # slices of windows that are cleaned up are freed
    assert min(sliced._path.slices[("k",)]) == 1


def test_float_values_switch_slicing_off_exactly() -> None:
    config = OperatorConfig(SlidingWindows(30, 10), (AggregateSpec("SUM", 0),))
    sliced = WindowOperator(config, slicing=True)
    plain = WindowOperator(config, fast=False)
    for op in (sliced, plain):
        op.process_element(("k",), 1, (1,))
        op.process_element(("k",), 12, (0.1,))
        op.process_element(("k",), 25, (0.2,))
        op.end_of_input()
    assert type(sliced._path) is WindowPath  # back on the per-window path
    _assert_same(sliced, plain)


def test_only_hop_and_cumulate_with_the_default_trigger_are_sliced() -> None:
    aggs = (AggregateSpec("COUNT_STAR"),)
    cumulate = OperatorConfig(CumulateWindows(2, 10), aggs)

    def sliced(op: WindowOperator) -> bool:
        return isinstance(op._path, Slicer)

    assert sliced(WindowOperator(cumulate, slicing=True))
    assert not sliced(WindowOperator(cumulate))  # opt-in
    assert not sliced(WindowOperator(cumulate, fast=False, slicing=True))
    assert not sliced(WindowOperator(OperatorConfig(TumblingWindows(10), aggs), slicing=True))
    counted = OperatorConfig(SlidingWindows(10, 2), aggs, trigger=CountTrigger(3))
    assert not sliced(WindowOperator(counted, slicing=True))
