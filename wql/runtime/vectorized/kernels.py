"""Exact NumPy kernels of the vectorized path (no operator semantics in here).

Grouping, runs, left-to-right float sums, session components and a sparse
table for range min/max: each equals the obvious per-row Python loop
exactly (``tests/runtime/test_vectorized.py`` checks them against it).
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

IntArray = npt.NDArray[np.int64]


BoolArray = npt.NDArray[np.bool_]


# Segments longer than this are summed one by one with np.add.accumulate
# (sequential, C speed); shorter ones level by level across all segments.
_LONG_SEGMENT = 48


def floor_start(ts: IntArray, offset: int, size: int) -> IntArray:
    """``ts - ((ts - offset) mod size)`` with floor modulo (negative times work)."""
    return ts - np.mod(ts - offset, size)


def segments(codes: IntArray) -> tuple[IntArray, IntArray]:
    """Starts and lengths of the runs of equal values of an already grouped array."""
    n = len(codes)
    if n == 0:
        return np.zeros(0, np.int64), np.zeros(0, np.int64)
    starts = np.flatnonzero(np.concatenate(([True], codes[1:] != codes[:-1])))
    lengths = np.diff(np.append(starts, n))
    return starts.astype(np.int64), lengths.astype(np.int64)


def group_rows(*columns: IntArray) -> tuple[IntArray, IntArray, IntArray]:
    """Group rows by the given int64 columns, keeping arrival order inside a group.

    Returns ``(order, group_of_sorted_row, group_starts)``: ``order`` is a
    permutation that sorts rows by the columns (stable, so rows of one group
    stay in arrival order), ``group_of_sorted_row[i]`` is the group number of
    ``order[i]`` and ``group_starts`` indexes ``order`` at each group's first
    row.  Groups are numbered in sorted column order.
    """
    n = len(columns[0])
    if n == 0:
        empty = np.zeros(0, np.int64)
        return empty, empty, empty
    order = np.lexsort(tuple(reversed(columns)))  # lexsort is stable; last key is primary
    change = np.zeros(n, dtype=bool)
    change[0] = True
    for col in columns:
        s = col[order]
        change[1:] |= s[1:] != s[:-1]
    starts = np.flatnonzero(change).astype(np.int64)
    group = np.cumsum(change, dtype=np.int64) - 1
    return order.astype(np.int64), group, starts


def sequential_sums(
    values: npt.NDArray[np.float64],
    group: IntArray,
    starts: IntArray,
    init: npt.NDArray[np.float64],
) -> npt.NDArray[np.float64]:
    """Per group ``init[g] + v0 + v1 + ...`` added left to right, as the per-row loop does.

    ``values``/``group`` are in grouped order (``group`` non-decreasing,
    ``starts`` its run starts), arrival order inside a group.  ``init`` holds
    each group's starting accumulator (``-0.0`` for "nothing yet": it is the
    additive identity that also keeps the sign of a ``-0.0`` first value).
    """
    acc = np.array(init, dtype=np.float64, copy=True)
    n = len(values)
    if n == 0:
        return acc
    lengths = np.diff(np.append(starts, n))
    long_groups = np.flatnonzero(lengths > _LONG_SEGMENT)
    for g in long_groups:
        a = starts[g]
        seg = np.concatenate(([acc[g]], values[a : a + lengths[g]]))
        acc[g] = np.add.accumulate(seg)[-1]
    short = lengths <= _LONG_SEGMENT
    if not short.any():
        return acc
    rank = np.arange(n, dtype=np.int64) - np.repeat(starts, lengths)
    row_short = np.repeat(short, lengths)
    max_rank = int(lengths[short].max())
    for r in range(max_rank):
        sel = row_short & (rank == r)
        idx = group[sel]
        # group numbers are unique within one rank, so fancy += is exact
        acc[idx] = acc[idx] + values[sel]
    return acc


def session_components(
    key: IntArray, start: IntArray, end: IntArray
) -> tuple[IntArray, IntArray, IntArray, IntArray]:
    """Connected components of intervals per key, touching intervals joined.

    Flink's ``TimeWindow.intersects``: ``[a, b)`` and ``[c, d)`` merge when
    ``a <= d and b >= c``.  Returns ``(component_of_interval,
    component_key, component_start, component_end)``, components numbered
    by (key, start).
    """
    n = len(key)
    if n == 0:
        empty = np.zeros(0, np.int64)
        return empty, empty, empty, empty
    order = np.lexsort((start, key))
    k, s, e = key[order], start[order], end[order]
    # running max of ends within a key: a new component starts where the
    # key changes or the interval starts after everything before it ended
    running = _segmented_cummax(e, k)
    new = np.ones(n, dtype=bool)
    new[1:] = (k[1:] != k[:-1]) | (s[1:] > running[:-1])
    comp_sorted = np.cumsum(new, dtype=np.int64) - 1
    comp = np.empty(n, np.int64)
    comp[order] = comp_sorted
    first = np.flatnonzero(new)
    last = np.append(first[1:], n) - 1
    return comp, k[first], s[first], running[last]


def _segmented_cummax(values: IntArray, seg: IntArray) -> IntArray:
    """Running maximum that restarts where ``seg`` changes (``seg`` grouped)."""
    n = len(values)
    if n == 0:
        return values.copy()
    # shift each segment above all earlier ones so one global cummax works
    seg_start = np.concatenate(([True], seg[1:] != seg[:-1]))
    seg_no = np.cumsum(seg_start) - 1
    lo, hi = int(values.min()), int(values.max())
    span = hi - lo + 1
    if span * (int(seg_no[-1]) + 1) < 2**62:
        shifted = (values - lo) + seg_no * span
        return np.maximum.accumulate(shifted) - seg_no * span + lo
    out = np.empty_like(values)  # huge time ranges: per segment (rare)
    starts = np.flatnonzero(seg_start)
    bounds = np.append(starts, n)
    for a, b in zip(bounds[:-1], bounds[1:], strict=True):
        out[a:b] = np.maximum.accumulate(values[a:b])
    return out


class RangeTable:
    """Sparse table for exact range min/max over a 1-D array (O(n log n) build).

    ``query(lo, hi)`` gives the reduction of ``values[lo:hi]`` for each pair
    (``hi > lo``).  Used to combine per-pane partial aggregates into sliding
    windows without touching each row once per window.
    """

    def __init__(self, values: np.ndarray, op: np.ufunc) -> None:
        self.op = op
        self.levels = [np.asarray(values)]
        width = 1
        while 2 * width <= len(values):
            prev = self.levels[-1]
            self.levels.append(op(prev[: len(prev) - width], prev[width:]))
            width *= 2

    def query(self, lo: IntArray, hi: IntArray) -> np.ndarray:
        length = hi - lo
        if len(length) and int(length.min()) < 1:
            raise ValueError("empty range")
        level = np.zeros(len(length), np.int64)
        if len(length):
            level = (np.floor(np.log2(length))).astype(np.int64)
            # guard float rounding at exact powers of two
            level = np.where((1 << (level + 1)) <= length, level + 1, level)
            level = np.where((1 << level) > length, level - 1, level)
        out = np.empty(len(lo), dtype=self.levels[0].dtype)
        for lv in np.unique(level):
            sel = level == lv
            table = self.levels[lv]
            a = table[lo[sel]]
            b = table[hi[sel] - (1 << int(lv))]
            out[sel] = self.op(a, b)
        return out
