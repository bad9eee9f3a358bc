"""The NumPy fast path: exact kernels, and ``process_batch`` == the per-row loop."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from wql.runtime.vectorized import (
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
