"""Plans for TUMBLE / HOP / CUMULATE batches: the windows each row adds to.

A plan lists the (key, window) groups the batch touches with the rows (or,
for HOP/CUMULATE with pane-combinable aggregates, the per-pane partials)
that go into each, and the rows no window takes. ``None``: a row would meet
a window that fired but is still within the allowed lateness, or the
values are not provably exact; the loop runs.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from wql.runtime.assigners import CumulateWindows, SlidingWindows, TumblingWindows
from wql.runtime.vectorized.kernels import (
    BoolArray,
    IntArray,
    floor_start,
    group_rows,
)
from wql.runtime.vectorized.prepare import FLOAT_EXACT, INT_EXACT, MAX_PAIRS, Prepared
from wql.runtime.vectorized.slices import SliceShape, SliceTable
from wql.runtime.windows import TimeWindow

if TYPE_CHECKING:
    from wql.runtime.window_operator import WindowOperator


@dataclass
class Groups:
    """Windows (or sessions) that receive rows in this batch, with their partials.

    ``rows``/``group``/``starts`` list the contributing batch rows in grouped
    order (arrival order inside a group) for the row-level partials; the
    pane path fills ``pane`` instead.
    """

    key: IntArray
    start: IntArray
    end: IntArray
    rows: IntArray | None = None
    group: IntArray | None = None
    starts: IntArray | None = None
    pane: PanePartials | None = None
    existing: list[TimeWindow | None] | None = None  # sessions: the pre-batch window


@dataclass
class PanePartials:
    count: IntArray
    sums: dict[int, IntArray]  # values index -> exact int64 window sums
    mins: dict[int, np.ndarray]
    maxs: dict[int, np.ndarray]
    first_row: IntArray
    last_row: IntArray


@dataclass
class Plan:
    groups: Groups
    rejected: IntArray  # valid rows no window accepted (late / no window)
    invalid_gap: IntArray  # rows dropped for an invalid dynamic gap
    float_sums_exact: bool  # float sums combined as exact integers (pane path)


def _ceil_div(a: IntArray, b: int) -> IntArray:
    return -((-a) // b)


def sum_columns(op: WindowOperator) -> set[int]:
    return {s.arg for s in op.config.aggregates if s.info.partial == "sum" and s.arg is not None}


def _minmax_columns(op: WindowOperator) -> set[int]:
    aggs = op.config.aggregates
    return {s.arg for s in aggs if s.info.partial in ("min", "max") and s.arg is not None}


def columns_ok(op: WindowOperator, p: Prepared, rows: IntArray) -> bool:
    """Value checks every path needs: int sums cannot overflow, MIN/MAX see no NaN/-0.0."""
    if len(rows) == 0:
        return True
    for index in sum_columns(op):
        col = p.columns[index]
        if col.dtype.kind == "i":
            v = col[rows]
            biggest = max(abs(int(v.min())), abs(int(v.max())))
            if biggest * len(rows) >= INT_EXACT:
                return False
    distinct = {s.arg for s in op.config.aggregates if s.info.partial == "distinct"}
    for index in sorted(i for i in distinct if i is not None):
        col = p.columns[index]
        if col.dtype.kind == "f" and np.isnan(col[rows]).any():
            return False  # every NaN is its own set member: keep the loop's objects
    for index in _minmax_columns(op):
        col = p.columns[index]
        if col.dtype.kind == "f":
            v = col[rows]
            # The loop keeps the first of equal values (-0.0 vs 0.0) and a NaN
            # only when it comes first; reductions do neither.
            if np.isnan(v).any() or (np.signbit(v) & (v == 0)).any():
                return False
    return True


def _float_sums_integral(op: WindowOperator, p: Prepared, rows: IntArray) -> bool:
    """Float sums are order-independent when every partial sum is an exact integer."""
    for index in sum_columns(op):
        col = p.columns[index]
        if col.dtype.kind == "f":
            v = col[rows]
            if not np.isfinite(v).all() or (np.floor(v) != v).any():
                return False
            if (np.signbit(v) & (v == 0)).any():
                return False  # an all -0.0 sum stays -0.0 in the loop, 0 as an integer
            if float(np.abs(v).sum()) >= FLOAT_EXACT / 2:
                return False
    return True


@dataclass(frozen=True)
class Cut:
    """A plan that cannot take batch row ``row``: plan the rows before it, loop it alone."""

    row: int


def rows_alone(op: WindowOperator, p: Prepared) -> BoolArray:
    """Rows with a window that fired but is within the allowed lateness (the loop fires it
    at once, with the contents of that moment); the per-row loop takes them one at a time."""
    alone = np.zeros(p.n, dtype=bool)
    L = p.lateness
    if L == 0:
        return alone
    rows = np.flatnonzero(p.valid)
    alone[rows[_late_firing(op.config.assigner, p.ts[rows], p.wm[rows], L)]] = True
    return alone


def _late_firing(a: Any, ts: IntArray, wm: IntArray, L: int) -> BoolArray:
    """Per row: does one of its windows end in ``(wm + 1 - L, wm + 1]`` (fired, not cleaned up)?"""
    _, count, _, _, min_end, max_end, end_step = _row_windows(a, ts)
    lo = np.maximum(min_end, wm - L + 2)
    hi = np.minimum(max_end, wm + 1)
    first_in = min_end + _ceil_div(lo - min_end, end_step) * end_step
    return (count > 0) & (lo <= hi) & (first_in <= hi)


def _row_windows(a: Any, ts: IntArray) -> tuple:
    """Per row, its windows as arithmetic progressions: ``(first_start, count, step_start,
    step_end, min_end, max_end, end_step)`` (CUMULATE: ``first_start`` is the period start)."""
    if isinstance(a, TumblingWindows):
        first_start = floor_start(ts, a.offset, a.size)
        count = np.ones(len(ts), np.int64)
        end = first_start + a.size
        return first_start, count, 0, 0, end, end, a.size
    if isinstance(a, SlidingWindows):
        last = floor_start(ts, a.offset, a.slide)
        count = np.maximum(0, _ceil_div(last - ts + a.size, a.slide))
        min_end = last - (np.maximum(count, 1) - 1) * a.slide + a.size
        # pairs go backwards from the latest start
        return last, count, -a.slide, -a.slide, min_end, last + a.size, a.slide
    assert isinstance(a, CumulateWindows)
    first_start = floor_start(ts, a.offset, a.size)
    first_end = floor_start(ts, a.offset, a.step) + a.step
    max_end = first_start + a.size
    count = (max_end - first_end) // a.step + 1
    return first_start, count, 0, a.step, first_end, max_end, a.step


def plan_time_windows(op: WindowOperator, p: Prepared) -> Plan | None:
    a = op.config.assigner
    L = p.lateness
    rows = np.flatnonzero(p.valid)
    ts, wm = p.ts[rows], p.wm[rows]
    first_start, count, step_start, step_end, min_end, max_end, _ = _row_windows(a, ts)
    # A pair fires late at once when end - 1 <= wm < end - 1 + L: decline if
    # any window end of a row falls in (wm + 1 - L, wm + 1] (rows_alone).
    if L > 0 and _late_firing(a, ts, wm, L).any():
        return None
    has_windows = count > 0
    fully_pending = has_windows & (min_end - 1 > wm)
    fully_dropped = ~has_windows | (max_end - 1 + L <= wm)
    mixed = ~(fully_pending | fully_dropped)
    keep = ~fully_dropped
    if not columns_ok(op, p, rows[keep]):
        return None
    shareable = (
        isinstance(a, SlidingWindows | CumulateWindows)
        and all(spec.info.panes for spec in op.config.aggregates)
        and keep.any()
        and not mixed.any()
        and _float_sums_integral(op, p, rows[keep])
    )
    if shareable:
        groups = _pane_groups(op, p, rows[keep])
        if groups is None:
            return None
        return Plan(groups, rows[fully_dropped], np.zeros(0, np.int64), True)

    # One (row, window) pair per membership.
    kept = rows[keep]
    counts = count[keep]
    total = int(counts.sum())
    if total > MAX_PAIRS:
        return None
    pair_row = np.repeat(kept, counts)
    within = np.arange(total, dtype=np.int64) - np.repeat(np.cumsum(counts) - counts, counts)
    if isinstance(a, CumulateWindows):
        pair_start = np.repeat(first_start[keep], counts)
        pair_end = np.repeat(min_end[keep], counts) + within * step_end
    else:
        assert isinstance(a, TumblingWindows | SlidingWindows)
        pair_start = np.repeat(first_start[keep], counts) + within * step_start
        pair_end = pair_start + a.size
    pair_wm = p.wm[pair_row]
    accepted = pair_end - 1 + L > pair_wm  # pending, since late firings were declined
    pair_row, pair_start, pair_end = pair_row[accepted], pair_start[accepted], pair_end[accepted]
    rejected = rows[fully_dropped]
    if mixed.any():
        hit = np.zeros(p.n, dtype=bool)
        hit[pair_row] = True
        rejected = rows[~hit[rows]]
    if isinstance(a, CumulateWindows):
        order, group, starts = group_rows(p.key_codes[pair_row], pair_start, pair_end)
    else:  # the end follows from the start
        order, group, starts = group_rows(p.key_codes[pair_row], pair_start)
    srt_rows = pair_row[order]
    groups = Groups(
        key=p.key_codes[srt_rows[starts]],
        start=pair_start[order][starts],
        end=pair_end[order][starts],
        rows=srt_rows,
        group=group,
        starts=starts,
    )
    return Plan(groups, rejected, np.zeros(0, np.int64), False)


def _pane_groups(op: WindowOperator, p: Prepared, rows: IntArray) -> Groups | None:
    """HOP/CUMULATE windows from the batch's slices (``vectorized.slices``): each row
    aggregated once into its (key, slice), each window combined from its slices."""
    shape = SliceShape.of(op.config.assigner)
    assert shape is not None
    q = shape.index(p.ts[rows])
    keys = p.key_codes[rows]
    aggs = op.config.aggregates
    sum_cols = sum_columns(op)
    min_cols = {s.arg for s in aggs if s.info.partial == "min" and s.arg is not None}
    max_cols = {s.arg for s in aggs if s.info.partial == "max" and s.arg is not None}
    table = SliceTable(shape, int(q.min()), sum_cols, min_cols, max_cols)
    if not table.fits(q, int(keys.max()) + 1):
        return None
    sums = {}
    for index in sum_cols:
        v = p.columns[index][rows]
        # integer-valued float sums (``_float_sums_integral``) add exactly as int64
        sums[index] = v.astype(np.int64) if v.dtype.kind == "f" else v
    extrema = {index: p.columns[index][rows] for index in min_cols | max_cols}
    order, starts = table.add(keys, q, sums, extrema)
    # the groups' order: key, then window (a window's end gives its start)
    found = shape.windows(*table.slices(), limit=MAX_PAIRS, by_key=True)
    if found is None:
        return None
    w_key, w_end = found
    w_start = shape.start(w_end)
    lo, hi = table.ranges(w_key, w_end)
    # per slice its first and last row by (event time, arrival); a window's are those
    # of its first and last slice
    group = np.repeat(np.arange(len(starts), dtype=np.int64), np.diff(np.append(starts, len(q))))
    first_row, last_row = first_last_rows(p, rows[order], group, starts)
    partials = PanePartials(
        count=table.window_count(lo, hi),
        sums={index: table.window_sum(index, lo, hi) for index in sum_cols},
        mins={index: table.window_extremum("min", index, lo, hi) for index in min_cols},
        maxs={index: table.window_extremum("max", index, lo, hi) for index in max_cols},
        first_row=first_row[lo],
        last_row=last_row[hi - 1],
    )
    return Groups(key=w_key, start=shape.time(w_start), end=shape.time(w_end), pane=partials)


def first_last_rows(
    p: Prepared, srt: IntArray, group: IntArray, starts: IntArray
) -> tuple[IntArray, IntArray]:
    """Per group the row with the smallest / largest (event time, arrival)."""
    if len(srt) == 0:
        empty = np.zeros(0, np.int64)
        return empty, empty
    # srt is arrival order inside each group; a stable sort by time keeps it
    by_time = np.lexsort((p.ts[srt], group))
    ends = np.append(starts[1:], len(srt)) - 1
    return srt[by_time[starts]], srt[by_time[ends]]
