"""Plans for TUMBLE / HOP / CUMULATE batches: the windows each row adds to.

A plan lists the (key, window) groups the batch touches with the rows (or,
for HOP/CUMULATE with pane-combinable aggregates, the per-pane partials)
that go into each, and the rows no window takes. ``None``: a row would meet
a window that fired but is still within the allowed lateness, or the
values are not provably exact; the loop runs.
"""

from __future__ import annotations

from dataclasses import dataclass
from math import gcd
from typing import TYPE_CHECKING, Any

import numpy as np

from wql.runtime.assigners import CumulateWindows, SlidingWindows, TumblingWindows
from wql.runtime.vectorized.kernels import (
    BoolArray,
    IntArray,
    RangeTable,
    floor_start,
    group_rows,
)
from wql.runtime.vectorized.prepare import FLOAT_EXACT, INT_EXACT, MAX_PAIRS, Prepared
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
    """HOP/CUMULATE windows from per-pane partials (each row aggregated once)."""
    a = op.config.assigner
    if isinstance(a, SlidingWindows):
        pane = gcd(a.size, a.slide)
        per_slide, per_size = a.slide // pane, a.size // pane
    else:
        assert isinstance(a, CumulateWindows)
        pane = a.step
        per_slide, per_size = 0, a.size // a.step
    offset = a.offset
    q = (p.ts[rows] - offset) // pane
    order, group, starts = group_rows(p.key_codes[rows], q)
    srt = rows[order]
    n_panes = len(starts)
    pane_key = p.key_codes[srt[starts]]
    pane_q = q[order][starts]
    lengths = np.diff(np.append(starts, len(srt)))
    # Windows per pane, in pane units [w_lo, w_hi), each enumerated once:
    # panes are sorted by (key, q) and a pane's window range only moves
    # forward with q, so pane t adds the part of its range beyond pane t-1's.
    same_key = np.zeros(n_panes, dtype=bool)
    same_key[1:] = pane_key[1:] == pane_key[:-1]
    if isinstance(a, SlidingWindows):
        j_hi = pane_q // per_slide
        j_lo = (pane_q - per_size) // per_slide + 1
        prev_hi = np.concatenate(([0], j_hi[:-1]))
        j_first = np.where(same_key, np.maximum(j_lo, prev_hi + 1), j_lo)
        per_pane = np.maximum(0, j_hi - j_first + 1)
        if int(per_pane.sum()) > MAX_PAIRS:
            return None
        rep = np.repeat(np.arange(n_panes, dtype=np.int64), per_pane)
        within = np.arange(len(rep), dtype=np.int64) - np.repeat(
            np.cumsum(per_pane) - per_pane, per_pane
        )
        w_lo = (j_first[rep] + within) * per_slide
        w_hi = w_lo + per_size
    else:
        # a CUMULATE pane belongs to the windows [base, base + k) with
        # k > q - base: the first pane of a (key, base) already names them all
        base = (pane_q // per_size) * per_size
        new_base = ~same_key
        new_base[1:] |= base[1:] != base[:-1]
        k_lo = pane_q - base + 1
        per_pane = np.where(new_base, per_size - k_lo + 1, 0)
        if int(per_pane.sum()) > MAX_PAIRS:
            return None
        rep = np.repeat(np.arange(n_panes, dtype=np.int64), per_pane)
        within = np.arange(len(rep), dtype=np.int64) - np.repeat(
            np.cumsum(per_pane) - per_pane, per_pane
        )
        w_lo = base[rep]
        w_hi = w_lo + k_lo[rep] + within
    w_key = pane_key[rep]
    # locate each window's pane range in the (key, q)-sorted pane list
    q0 = int(pane_q.min()) - per_size - 1
    span = int(pane_q.max()) - q0 + per_size + 2
    if (int(pane_key.max()) + 1) * span >= INT_EXACT:
        return None
    enc = pane_key * span + (pane_q - q0)
    lo_idx = np.searchsorted(enc, w_key * span + (np.clip(w_lo, q0, q0 + span - 1) - q0))
    hi_idx = np.searchsorted(enc, w_key * span + (np.clip(w_hi, q0, q0 + span - 1) - q0))
    # pane partials
    cum_count = np.concatenate(([0], np.cumsum(lengths)))
    sums: dict[int, IntArray] = {}
    mins: dict[int, np.ndarray] = {}
    maxs: dict[int, np.ndarray] = {}
    for index in sum_columns(op):
        v = p.columns[index][srt]
        v = v.astype(np.int64) if v.dtype.kind == "f" else v
        cum = np.concatenate(([0], np.cumsum(np.add.reduceat(v, starts))))
        sums[index] = cum[hi_idx] - cum[lo_idx]
    for spec in op.config.aggregates:
        if spec.info.partial in ("min", "max") and spec.arg is not None:
            target = mins if spec.info.partial == "min" else maxs
            if spec.arg not in target:
                ufunc = np.minimum if spec.info.partial == "min" else np.maximum
                pane_values = ufunc.reduceat(p.columns[spec.arg][srt], starts)
                target[spec.arg] = RangeTable(pane_values, ufunc).query(lo_idx, hi_idx)
    first_row, last_row = first_last_rows(p, srt, group, starts)
    partials = PanePartials(
        count=cum_count[hi_idx] - cum_count[lo_idx],
        sums=sums,
        mins=mins,
        maxs=maxs,
        first_row=first_row[lo_idx],
        last_row=last_row[hi_idx - 1],
    )
    return Groups(
        key=w_key,
        start=offset + w_lo * pane,
        end=offset + w_hi * pane,
        pane=partials,
    )


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
