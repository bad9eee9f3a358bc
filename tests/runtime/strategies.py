"""Hypothesis strategies and operator configurations shared by the runtime's
property tests (``test_plain_path.py``, ``test_emit.py``, ``test_slicing.py``)."""

from __future__ import annotations

from typing import Any

from hypothesis import strategies as st

from wql.runtime import AggregateSpec, count_windows
from wql.runtime.assigners import (
    CumulateWindows,
    DynamicSessionWindows,
    SessionWindows,
    SlidingWindows,
    TumblingWindows,
)
from wql.runtime.evictors import CountEvictor
from wql.runtime.triggers import CountTrigger, PurgingTrigger

#: Every kind, over an integer column (0) and a string column (1).
ALL_AGGS = (
    AggregateSpec("COUNT_STAR"),
    AggregateSpec("COUNT", 0),
    AggregateSpec("SUM", 0),
    AggregateSpec("AVG", 0),
    AggregateSpec("MIN", 0),
    AggregateSpec("MAX", 1),
    AggregateSpec("COUNT_DISTINCT", 0),
    AggregateSpec("FIRST_VALUE", 1),
    AggregateSpec("LAST_VALUE", 0),
    AggregateSpec("COLLECT_LIST", 1),
)


@st.composite
def hops(draw: Any, gaps: bool = False) -> SlidingWindows:
    slide = draw(st.integers(1, 12))
    size = draw(st.integers(1, 40))
    if not gaps:
        size = slide * draw(st.integers(1, 5))  # a multiple: the slotted assignment
    return SlidingWindows(size, slide, draw(st.integers(-(slide - 1), slide - 1)))


@st.composite
def cumulates(draw: Any) -> CumulateWindows:
    step = draw(st.integers(1, 10))
    size = step * draw(st.integers(1, 6))
    return CumulateWindows(step, size, draw(st.integers(-(size - 1), size - 1)))


#: name -> (assigner strategy, trigger or None, the fast operator's per-row path[, evictor])
CONFIGS: dict[str, tuple] = {
    "tumble": (st.builds(TumblingWindows, st.integers(1, 30)), None, "WindowPath"),
    "hop": (hops(), None, "WindowPath"),
    "hop-any-size": (hops(gaps=True), None, "WindowPath"),
    "cumulate": (cumulates(), None, "WindowPath"),
    "session": (st.builds(SessionWindows, st.integers(1, 25)), None, "SessionPath"),
    "dynamic-session": (st.just(DynamicSessionWindows(2)), None, "SessionPath"),
    "tumble-count-trigger": (
        st.builds(TumblingWindows, st.integers(1, 30)),
        CountTrigger(2),
        "WindowPath",
    ),
    "tumble-processing-time": (
        st.builds(TumblingWindows, st.integers(1, 30), st.just(0), st.just(False)),
        None,
        "WindowPath",
    ),
    "count-window": (st.just(count_windows(3)[0]), count_windows(3)[1], None),
    "session-count-evict": (
        st.builds(SessionWindows, st.integers(1, 25)),
        CountTrigger(3),
        "CountSessionPath",
        CountEvictor(2),
    ),
    "session-purging-count": (
        st.builds(SessionWindows, st.integers(1, 25)),
        PurgingTrigger(CountTrigger(2)),
        "CountSessionPath",
    ),
    "dynamic-session-count": (
        st.just(DynamicSessionWindows(2)),
        CountTrigger(2),
        "CountSessionPath",
        CountEvictor(1),
    ),
}

rows_st = st.lists(
    st.tuples(
        st.sampled_from([("a",), ("b",), ("c",)]),
        st.one_of(st.none(), st.integers(-40, 120)),  # None: missing timestamp
        st.one_of(st.none(), st.integers(-5, 9)),
        st.one_of(st.none(), st.sampled_from(["x", "y", "z"])),
        st.one_of(st.none(), st.integers(-2, 25)),  # dynamic session gap
        st.integers(0, 12),  # clock step before the row
    ),
    max_size=50,
)
