"""Per-row specialisations of ``WindowOperator`` equal the general per-row path.

``WindowOperator`` routes some configurations to a dedicated per-row method
(static event-time sessions with the default trigger and no evictor:
``_session_element``). Deleting the instance attribute restores the general
``process_element``; both operators are fed the same out-of-order rows,
watermarks and allowed lateness and must agree on everything observable:
emitted rows, late rows, counters and the whole snapshot (state, merging
sets, timers with their registration numbers, clocks).
"""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from wql.runtime import (
    AggregateSpec,
    OperatorConfig,
    SessionWindows,
    WindowOperator,
)

AGGS = (
    AggregateSpec("COUNT_STAR"),
    AggregateSpec("SUM", 0),
    AggregateSpec("FIRST_VALUE", 0),
    AggregateSpec("COLLECT_LIST", 0),
)

rows_st = st.lists(
    st.tuples(
        st.sampled_from([("a",), ("b",), ("c",)]),
        st.one_of(st.none(), st.integers(-40, 120)),  # None: missing timestamp
        st.one_of(st.none(), st.integers(-5, 9)),
        st.integers(0, 30),  # watermark step before the row
    ),
    max_size=60,
)


def _pair(config: OperatorConfig) -> tuple[WindowOperator, WindowOperator]:
    fast = WindowOperator(config)
    general = WindowOperator(config)
    assert "process_element" in vars(fast), "the specialised path is expected here"
    del general.process_element  # back to WindowOperator.process_element
    return fast, general


def _assert_same(fast: WindowOperator, general: WindowOperator) -> None:
    assert fast.drain() == general.drain()
    assert fast.drain_late() == general.drain_late()
    assert fast.counters == general.counters
    assert fast.snapshot() == general.snapshot()


@settings(max_examples=150, deadline=None)
@given(
    rows=rows_st,
    gap=st.integers(1, 25),
    lateness=st.sampled_from([0, 1, 7, 40, 2**63]),
    late_output=st.booleans(),
)
def test_session_element_equals_general_path(rows, gap, lateness, late_output) -> None:
    config = OperatorConfig(
        SessionWindows(gap), AGGS, allowed_lateness=lateness, late_output=late_output
    )
    fast, general = _pair(config)
    wm = -60
    for key, ts, v, step in rows:
        wm += step
        for op in (fast, general):
            op.advance_watermark(wm)
            op.process_element(key, ts, (v,))
        _assert_same(fast, general)
    for op in (fast, general):
        op.end_of_input()
        # After end of input every window is late (the watermark is MAX_TIME).
        op.process_element(("a",), 5, (1,))
    _assert_same(fast, general)


def test_session_element_bridging_row_merges_three_sessions() -> None:
    config = OperatorConfig(SessionWindows(10), AGGS)
    fast, general = _pair(config)
    for op in (fast, general):
        for ts in (0, 20, 10, 40, 30):  # 10 and 30 each bridge two sessions (touching)
            op.process_element(("k",), ts, (ts,))
    _assert_same(fast, general)
    assert fast.open_windows() == 1
    for op in (fast, general):
        op.end_of_input()
    out = fast.drain()
    assert [(r[1], r[2], r[7], r[8], r[9]) for r in out] == [(0, 50, 5, 100, 0)]
    general.drain()
    _assert_same(fast, general)
