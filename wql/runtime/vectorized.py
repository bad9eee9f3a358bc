"""The NumPy fast path of ``WindowOperator.process_batch``.

``try_process_batch(operator, batch)`` either processes the whole batch and
returns ``True``, leaving the operator exactly as the per-row loop

    for i: advance_watermark(wm_before[i]); process_element(key[i], ts[i], values[i])

would (same emitted rows with pane index/timing and timestamps, same late
rows, same counters, same window contents, pane counts, merging sets and
timers), or it changes nothing and returns ``False`` so that the loop runs.
It only says ``True`` when it can *prove* the equivalence for this batch.

Ordering contract (agreed with the runtime): emitted rows are compared as
a multiset keyed by (key, window, pane_index).  Rows fired inside the batch
are emitted in window-time order, rows fired by the final watermark advance
in the runtime's timer order; the interleaving may differ from the loop's.

When it applies (everything else falls back):

- an event-time TUMBLE / HOP / CUMULATE / SESSION (static or integer dynamic
  gap) assigner with the default ``WATERMARK`` trigger and no evictor, or a
  tumbling ``COUNT_WINDOW(n)`` (GlobalWindows + PURGING COUNT(n));
- aggregates ``COUNT(*)``, ``COUNT``, ``SUM``, ``MIN``, ``MAX``, ``AVG``,
  ``FIRST_VALUE``, ``LAST_VALUE``, ``COUNT(DISTINCT)``, ``COLLECT_LIST`` over
  numeric columns without nulls (int64-exact or float64; no NaN or negative
  zero where MIN/MAX look, no NaN in COUNT DISTINCT);
- no processing-time column;
- every (row, window) pair is either *pending* (the window's end is ahead
  of the watermark the row sees, so the row only adds to it) or *dropped*
  (the window's cleanup time has passed).  A pair whose window already
  fired but is still within the allowed lateness would fire at once with
  the contents of that moment, which the batch form does not reproduce;
- sessions: no row can touch a session that already fired (see
  ``_plan_sessions``), and no batch bridges two sessions that existed
  before it.

Why "add everything, then advance the watermark once" is exact under those
conditions: a pending pair only ever adds to a window that has not fired,
and a window fires at the first watermark >= its end - 1, after which every
later pair for it is dropped (lateness 0) or would be a late firing
(declined).  So each window fires once within the batch, with all of its
accepted rows, and its pane timing depends only on the timer's time.
Windows that fire and are cleaned up before the batch ends are emitted
directly: from the batch partial when they are new (no operator state is
touched), from their folded accumulator when they existed before the batch
(their state and timers are removed, as the cleanup timer would).  All
others are merged into the window state with their timers registered, and
the operator's own ``advance_watermark`` fires what is due (windows the
batch did not touch).

Exact arithmetic: NumPy's ``reduce``/``reduceat`` sum floats pairwise,
which rounds differently from the per-row ``acc = acc + x``.  Float sums
therefore go through :func:`sequential_sums` (left to right, starting from
the window's existing accumulator).  Integer sums are computed in int64
only when no overflow is possible.  HOP and CUMULATE share panes (slices of
``gcd(size, slide)`` / ``step``): rows are aggregated once per pane and panes
are combined per window with prefix sums and range-min/max tables, which is
exact for counts, integer sums (and integer-valued float sums below 2**53),
min/max and first/last; float sums that are not provably exact use one
(row, window) pair per membership instead.
"""

from __future__ import annotations

from collections.abc import Hashable
from dataclasses import dataclass
from math import gcd
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt

from wql.runtime.aggregates import merge_lines, order_key, result_expression
from wql.runtime.assigners import (
    DROP_INVALID_GAP,
    DROP_LATE,
    DROP_LATE_WINDOW,
    DROP_MISSING_TIMESTAMP,
    CumulateWindows,
    DynamicSessionWindows,
    GlobalWindows,
    SessionWindows,
    SlidingWindows,
    TumblingWindows,
)
from wql.runtime.config import EARLY, LATE, ON_TIME, RowBatch
from wql.runtime.triggers import CountTrigger, EventTimeTrigger, PurgingTrigger
from wql.runtime.windows import GLOBAL_WINDOW, MAX_TIME, MIN_TIME, TimeWindow

if TYPE_CHECKING:
    from wql.runtime.operator import WindowOperator

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


# --------------------------------------------------------------------------- the fast path

# Times and window bounds stay well inside int64, so no expression overflows.
_TIME_LIMIT = 2**60
_INT_EXACT = 2**62
_FLOAT_EXACT = 2**53
# Above this many (row, window) pairs the batch is left to the loop rather
# than materialised (HOP/CUMULATE with non-shareable aggregates).
_MAX_PAIRS = 4_000_000

_ASSIGNERS = (
    TumblingWindows,
    SlidingWindows,
    CumulateWindows,
    SessionWindows,
    DynamicSessionWindows,
)


def try_process_batch(operator: WindowOperator, batch: RowBatch) -> bool:
    """Process ``batch`` with NumPy when provably equal to the per-row loop.

    Returns ``False`` without touching the operator when it cannot prove it
    (see the module docstring for the conditions); ``process_batch`` then
    runs the loop.
    """
    prepared = _prepare(operator, batch)
    if prepared is None:
        return False
    if _count_window_size(operator) is not None:
        return _count_windows(operator, prepared)
    if prepared.merging:
        plan = _plan_sessions(operator, prepared)
    else:
        plan = _plan_time_windows(operator, prepared)
    if plan is None:
        return False
    found = _lookup(operator, prepared, plan)
    if found is None:
        return False
    _apply(operator, prepared, plan, found)
    return True


@dataclass
class _Prepared:
    """The batch as validated NumPy columns (nothing of the operator changed yet)."""

    n: int
    keys: Any  # the batch's key column (a sequence or an object array)
    key_codes: IntArray
    uniques: list[Hashable]
    ts: IntArray
    wm: IntArray  # effective watermark each row sees, clipped to +-2**62
    wm_raw: IntArray  # the same, not clipped (late-row tests use exact ints)
    wm_last: int  # the operator's watermark after the batch (not clipped)
    valid: BoolArray
    columns: dict[int, np.ndarray]  # numeric argument columns by values index
    merging: bool
    lateness: int
    batch: RowBatch


def _int64(column: Any) -> IntArray | None:
    if isinstance(column, np.ndarray):
        if column.dtype.kind == "i":
            return column.astype(np.int64, copy=False)
        if column.dtype.kind == "u":
            if column.size and int(column.max()) > MAX_TIME:
                return None
            return column.astype(np.int64)
        return None
    try:
        types = set(map(type, column))
    except TypeError:
        return None
    if types != {int}:
        return None
    try:
        return np.array(column, dtype=np.int64)
    except OverflowError:
        return None


def _numeric(column: Any) -> np.ndarray | None:
    """An int64 or float64 array with the values the loop would see, or None.

    Lists qualify only when every element has the same Python type (int or
    float): the loop's arithmetic differs for mixed ints and floats.
    """
    if isinstance(column, np.ndarray):
        kind = column.dtype.kind
        if kind in "iu":
            return _int64(column)
        if kind == "f":
            return column.astype(np.float64, copy=False)
        return None
    try:
        types = set(map(type, column))
    except TypeError:
        return None
    try:
        if types == {int}:
            return np.array(column, dtype=np.int64)
        if types == {float}:
            return np.array(column, dtype=np.float64)
    except OverflowError:
        return None
    return None


def _prepare(op: WindowOperator, batch: RowBatch) -> _Prepared | None:
    n = len(batch)
    if n == 0:
        return None
    cfg = op.config
    assigner = cfg.assigner
    # COUNT_WINDOW(n) (GlobalWindows + PurgingTrigger(CountTrigger(n))) has no time
    count_window = _count_window_size(op) is not None
    if not count_window and (
        type(assigner) not in _ASSIGNERS
        or not assigner.is_event_time
        or (cfg.trigger is not None and type(cfg.trigger) is not EventTimeTrigger)
    ):
        return None
    if cfg.evictor is not None or batch.processing_time is not None:
        return None
    if batch.timestamps is None and not count_window:
        return None
    for size in [*_assigner_lengths(assigner), cfg.allowed_lateness]:
        if size >= _TIME_LIMIT:
            return None
    wm = _int64(batch.watermark_before)
    if batch.timestamps is None:
        ts: IntArray | None = np.full(n, MIN_TIME, dtype=np.int64)
    else:
        ts = _int64(batch.timestamps)
    if ts is None or wm is None or len(ts) != n or len(wm) != n:
        return None
    if batch.timestamp_valid is None:
        valid = np.ones(n, dtype=bool)
    else:
        valid = np.asarray(batch.timestamp_valid)
        if valid.dtype != np.bool_ or len(valid) != n:
            return None
    if count_window:
        # not an event-time window: a row without a timestamp is not dropped,
        # its aggregates order it at MIN_TIME (as Aggregator.add does for None)
        ts = np.where(valid, ts, MIN_TIME)
        valid = np.ones(n, dtype=bool)
    elif valid.any():
        tv = ts[valid]
        if int(tv.min()) < -_TIME_LIMIT or int(tv.max()) > _TIME_LIMIT:
            return None
    needed = {spec.arg for spec in cfg.aggregates if spec.arg is not None}
    if isinstance(assigner, DynamicSessionWindows):
        needed.add(assigner.gap_index)
    columns: dict[int, np.ndarray] = {}
    for index in needed:
        if index >= len(batch.columns):
            return None
        arr = _numeric(batch.columns[index])
        if arr is None or len(arr) != n:
            return None
        columns[index] = arr
    gap_index = getattr(assigner, "gap_index", None)
    if gap_index is not None and columns[gap_index].dtype.kind != "i":
        return None  # the loop truncates float gaps with int(); not worth mirroring
    codes = _factorize(batch.keys, n)
    if codes is None:
        return None
    key_codes, uniques = codes
    wm_eff = np.maximum.accumulate(np.maximum(wm, np.int64(op.watermark)))
    wm_last = max(op.watermark, int(wm_eff[-1]))
    return _Prepared(
        n=n,
        keys=batch.keys,
        key_codes=key_codes,
        uniques=uniques,
        ts=ts,
        wm=np.clip(wm_eff, -(2**62), 2**62),
        wm_raw=wm_eff,
        wm_last=wm_last,
        valid=valid,
        columns=columns,
        merging=isinstance(assigner, SessionWindows | DynamicSessionWindows),
        lateness=cfg.allowed_lateness,
        batch=batch,
    )


def _assigner_lengths(assigner: Any) -> list[int]:
    return [
        getattr(assigner, name)
        for name in ("size", "slide", "step", "gap")
        if isinstance(getattr(assigner, name, None), int)
    ] + ([abs(assigner.offset)] if isinstance(getattr(assigner, "offset", None), int) else [])


def _factorize(keys: Any, n: int) -> tuple[IntArray, list[Hashable]] | None:
    if len(keys) != n:
        return None
    index: dict[Hashable, int] = {}
    setdefault = index.setdefault
    try:
        codes = [setdefault(k, len(index)) for k in keys]
    except TypeError:  # an unhashable key: let the loop raise its own error
        return None
    return np.array(codes, dtype=np.int64), list(index)


# --------------------------------------------------------------------------- plans


@dataclass
class _Groups:
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
    pane: _PanePartials | None = None
    existing: list[TimeWindow | None] | None = None  # sessions: the pre-batch window


@dataclass
class _PanePartials:
    count: IntArray
    sums: dict[int, IntArray]  # values index -> exact int64 window sums
    mins: dict[int, np.ndarray]
    maxs: dict[int, np.ndarray]
    first_row: IntArray
    last_row: IntArray


@dataclass
class _Plan:
    groups: _Groups
    rejected: IntArray  # valid rows no window accepted (late / no window)
    invalid_gap: IntArray  # rows dropped for an invalid dynamic gap
    float_sums_exact: bool  # float sums combined as exact integers (pane path)


def _ceil_div(a: IntArray, b: int) -> IntArray:
    return -((-a) // b)


def _sum_columns(op: WindowOperator) -> set[int]:
    return {s.arg for s in op.config.aggregates if s.info.partial == "sum" and s.arg is not None}


def _minmax_columns(op: WindowOperator) -> set[int]:
    aggs = op.config.aggregates
    return {s.arg for s in aggs if s.info.partial in ("min", "max") and s.arg is not None}


def _columns_ok(op: WindowOperator, p: _Prepared, rows: IntArray) -> bool:
    """Value checks every path needs: int sums cannot overflow, MIN/MAX see no NaN/-0.0."""
    if len(rows) == 0:
        return True
    for index in _sum_columns(op):
        col = p.columns[index]
        if col.dtype.kind == "i":
            v = col[rows]
            biggest = max(abs(int(v.min())), abs(int(v.max())))
            if biggest * len(rows) >= _INT_EXACT:
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


def _float_sums_integral(op: WindowOperator, p: _Prepared, rows: IntArray) -> bool:
    """Float sums are order-independent when every partial sum is an exact integer."""
    for index in _sum_columns(op):
        col = p.columns[index]
        if col.dtype.kind == "f":
            v = col[rows]
            if not np.isfinite(v).all() or (np.floor(v) != v).any():
                return False
            if (np.signbit(v) & (v == 0)).any():
                return False  # an all -0.0 sum stays -0.0 in the loop, 0 as an integer
            if float(np.abs(v).sum()) >= _FLOAT_EXACT / 2:
                return False
    return True


def _plan_time_windows(op: WindowOperator, p: _Prepared) -> _Plan | None:
    a = op.config.assigner
    L = p.lateness
    rows = np.flatnonzero(p.valid)
    ts, wm = p.ts[rows], p.wm[rows]
    if isinstance(a, TumblingWindows):
        first_start = floor_start(ts, a.offset, a.size)
        count = np.ones(len(rows), np.int64)
        step_start, step_end = 0, 0
        min_end = max_end = first_start + a.size
        end_step = a.size
    elif isinstance(a, SlidingWindows):
        last = floor_start(ts, a.offset, a.slide)
        count = np.maximum(0, _ceil_div(last - ts + a.size, a.slide))
        first_start = last  # pairs go backwards from the latest start
        step_start, step_end = -a.slide, -a.slide
        max_end = last + a.size
        min_end = last - (np.maximum(count, 1) - 1) * a.slide + a.size
        end_step = a.slide
    else:
        assert isinstance(a, CumulateWindows)
        first_start = floor_start(ts, a.offset, a.size)
        first_end = floor_start(ts, a.offset, a.step) + a.step
        max_end = first_start + a.size
        count = (max_end - first_end) // a.step + 1
        step_start, step_end = 0, a.step
        min_end = first_end
        end_step = a.step
    # A pair fires late at once when end - 1 <= wm < end - 1 + L: decline if
    # any window end of a row falls in (wm + 1 - L, wm + 1].
    has_windows = count > 0
    if L > 0:
        lo = np.maximum(min_end, wm - L + 2)
        hi = np.minimum(max_end, wm + 1)
        first_in = min_end + _ceil_div(lo - min_end, end_step) * end_step
        if (has_windows & (lo <= hi) & (first_in <= hi)).any():
            return None
    fully_pending = has_windows & (min_end - 1 > wm)
    fully_dropped = ~has_windows | (max_end - 1 + L <= wm)
    mixed = ~(fully_pending | fully_dropped)
    keep = ~fully_dropped
    if not _columns_ok(op, p, rows[keep]):
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
        return _Plan(groups, rows[fully_dropped], np.zeros(0, np.int64), True)

    # One (row, window) pair per membership.
    kept = rows[keep]
    counts = count[keep]
    total = int(counts.sum())
    if total > _MAX_PAIRS:
        return None
    pair_row = np.repeat(kept, counts)
    within = np.arange(total, dtype=np.int64) - np.repeat(np.cumsum(counts) - counts, counts)
    if isinstance(a, CumulateWindows):
        pair_start = np.repeat(first_start[keep], counts)
        pair_end = np.repeat(first_end[keep], counts) + within * step_end
    else:
        pair_start = np.repeat(first_start[keep], counts) + within * step_start
        pair_end = pair_start + (a.size)
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
    groups = _Groups(
        key=p.key_codes[srt_rows[starts]],
        start=pair_start[order][starts],
        end=pair_end[order][starts],
        rows=srt_rows,
        group=group,
        starts=starts,
    )
    return _Plan(groups, rejected, np.zeros(0, np.int64), False)


def _pane_groups(op: WindowOperator, p: _Prepared, rows: IntArray) -> _Groups | None:
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
        if int(per_pane.sum()) > _MAX_PAIRS:
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
        if int(per_pane.sum()) > _MAX_PAIRS:
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
    if (int(pane_key.max()) + 1) * span >= _INT_EXACT:
        return None
    enc = pane_key * span + (pane_q - q0)
    lo_idx = np.searchsorted(enc, w_key * span + (np.clip(w_lo, q0, q0 + span - 1) - q0))
    hi_idx = np.searchsorted(enc, w_key * span + (np.clip(w_hi, q0, q0 + span - 1) - q0))
    # pane partials
    cum_count = np.concatenate(([0], np.cumsum(lengths)))
    sums: dict[int, IntArray] = {}
    mins: dict[int, np.ndarray] = {}
    maxs: dict[int, np.ndarray] = {}
    for index in _sum_columns(op):
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
    first_row, last_row = _first_last_rows(p, srt, group, starts)
    partials = _PanePartials(
        count=cum_count[hi_idx] - cum_count[lo_idx],
        sums=sums,
        mins=mins,
        maxs=maxs,
        first_row=first_row[lo_idx],
        last_row=last_row[hi_idx - 1],
    )
    return _Groups(
        key=w_key,
        start=offset + w_lo * pane,
        end=offset + w_hi * pane,
        pane=partials,
    )


def _first_last_rows(
    p: _Prepared, srt: IntArray, group: IntArray, starts: IntArray
) -> tuple[IntArray, IntArray]:
    """Per group the row with the smallest / largest (event time, arrival)."""
    if len(srt) == 0:
        empty = np.zeros(0, np.int64)
        return empty, empty
    # srt is arrival order inside each group; a stable sort by time keeps it
    by_time = np.lexsort((p.ts[srt], group))
    ends = np.append(starts[1:], len(srt)) - 1
    return srt[by_time[starts]], srt[by_time[ends]]


def _plan_sessions(op: WindowOperator, p: _Prepared) -> _Plan | None:
    """Sessions formed by the batch, merged with the sessions that existed before it.

    Exactness argument.  A session D that row i touches (intersects
    ``[ts, ts + gap)``) has ``D.end >= ts``, so it has not fired when
    ``ts >= wm + 2``; with ``ts == wm + 1`` it has fired exactly when some
    member interval ends at ``ts`` (then the loop cleans it up and starts a
    new session, or merges into a fired session): such batches are
    declined, as are rows with ``ts <= wm``.  Then no session ever fires
    before its last merge, none is cleaned up while a row could still touch
    it, and the final sessions are the connected components of the existing
    sessions and the rows' windows.  Float sums additionally need the merge
    order of the loop: each key's rows in non-decreasing time with at most
    one existing session starting before them makes every row extend one
    chain, so the sum is the left-to-right sum from that session's value.
    """
    a = op.config.assigner
    valid_rows = np.flatnonzero(p.valid)
    if isinstance(a, DynamicSessionWindows):
        gap_all = p.columns[a.gap_index]
        ok_gap = gap_all[valid_rows] > 0
        invalid_gap = valid_rows[~ok_gap]
        rows = valid_rows[ok_gap]
        gaps = gap_all[rows]
        if len(gaps) and int(gaps.max()) >= _TIME_LIMIT:
            return None
    else:
        assert isinstance(a, SessionWindows)
        invalid_gap = np.zeros(0, np.int64)
        rows = valid_rows
        gaps = np.full(len(rows), a.gap, dtype=np.int64)
    ts, wm = p.ts[rows], p.wm[rows]
    if (ts <= wm).any():
        return None
    if not _columns_ok(op, p, rows):
        return None
    # the sessions of the batch's keys that exist before it
    ex_key: list[int] = []
    ex_win: list[TimeWindow] = []
    keys_state = op._keys
    for code in np.unique(p.key_codes[rows]).tolist():
        ks = keys_state.get(p.uniques[code])
        if ks is not None and ks.merging is not None:
            for w in ks.merging.mapping:
                ex_key.append(code)
                ex_win.append(w)
    n_ex = len(ex_win)
    m_key = np.concatenate((np.array(ex_key, np.int64), p.key_codes[rows]))
    m_start = np.concatenate((np.array([w.start for w in ex_win], np.int64), ts))
    m_end = np.concatenate((np.array([w.end for w in ex_win], np.int64), ts + gaps))
    tie = ts == wm + 1
    if tie.any() and _ends_at(m_key, m_end, p.key_codes[rows][tie], ts[tie]):
        return None
    comp, c_key, c_start, c_end = session_components(m_key, m_start, m_end)
    n_comp = len(c_key)
    ex_per_comp = np.bincount(comp[:n_ex], minlength=n_comp)
    if (ex_per_comp > 1).any():
        return None  # the batch bridges sessions that existed before it
    row_comp = comp[n_ex:]
    has_rows = np.bincount(row_comp, minlength=n_comp) > 0
    if _has_float_sums(op, p) and not _single_chains(p, rows, row_comp, comp[:n_ex], ex_win):
        return None
    # renumber the components that got rows: groups of the plan
    new_id = np.cumsum(has_rows) - 1
    order, group, starts = group_rows(new_id[row_comp])
    existing: list[TimeWindow | None] = [None] * int(has_rows.sum())
    for i, c in enumerate(comp[:n_ex].tolist()):
        if has_rows[c]:
            existing[int(new_id[c])] = ex_win[i]
    groups = _Groups(
        key=c_key[has_rows],
        start=c_start[has_rows],
        end=c_end[has_rows],
        rows=rows[order],
        group=group,
        starts=starts,
        existing=existing,
    )
    return _Plan(groups, np.zeros(0, np.int64), invalid_gap, False)


def _ends_at(m_key: IntArray, m_end: IntArray, q_key: IntArray, q_time: IntArray) -> bool:
    """Does any member interval of the same key end exactly at a queried time?"""
    lo = min(int(m_end.min()), int(q_time.min()))
    span = max(int(m_end.max()), int(q_time.max())) - lo + 1
    if (int(max(m_key.max(), q_key.max())) + 1) * span < _INT_EXACT:
        return bool(np.isin(q_key * span + (q_time - lo), m_key * span + (m_end - lo)).any())
    ends = set(zip(m_key.tolist(), m_end.tolist(), strict=True))
    return any(pair in ends for pair in zip(q_key.tolist(), q_time.tolist(), strict=True))


def _has_float_sums(op: WindowOperator, p: _Prepared) -> bool:
    return any(p.columns[i].dtype.kind == "f" for i in _sum_columns(op))


def _single_chains(
    p: _Prepared,
    rows: IntArray,
    row_comp: IntArray,
    ex_comp: IntArray,
    ex_win: list[TimeWindow],
) -> bool:
    """Each key's rows in non-decreasing time, any existing session starting before them."""
    key = p.key_codes[rows]
    ts = p.ts[rows]
    order = np.argsort(key, kind="stable")
    k, t = key[order], ts[order]
    if ((k[1:] == k[:-1]) & (t[1:] < t[:-1])).any():
        return False
    if len(ex_win):
        first_ts = np.full(int(row_comp.max()) + 1 if len(row_comp) else 0, np.iinfo(np.int64).max)
        np.minimum.at(first_ts, row_comp, ts)
        for c, w in zip(ex_comp.tolist(), ex_win, strict=True):
            if c < len(first_ts) and w.start > first_ts[c]:
                return False
    return True


# --------------------------------------------------------------------------- applying a plan


@dataclass
class _Found:
    """The operator state each group meets (looked up before anything changes)."""

    keys: list[Hashable]
    states: list[Any]  # KeyState or None
    accs: list[list | None]
    fresh: list[bool]  # no contents, no pane count, no pre-batch session


def _lookup(op: WindowOperator, p: _Prepared, plan: _Plan) -> _Found | None:
    g = plan.groups
    sum_checks = _sum_checks(op, p)
    keys_state = op._keys
    uniques = p.uniques
    codes = g.key.tolist()
    keys = [uniques[c] for c in codes]
    states = [keys_state.get(k) for k in keys] if keys_state else [None] * len(keys)
    accs: list[list | None] = [None] * len(keys)
    fresh = [True] * len(keys)
    if not keys_state:
        return _Found(keys, states, accs, fresh)
    starts, ends = g.start.tolist(), g.end.tolist()
    existing = g.existing
    for i, ks in enumerate(states):
        if ks is None:
            continue
        acc = None
        if existing is None:
            w = TimeWindow(starts[i], ends[i])
            acc = ks.contents.get(w)
            if acc is not None or w in ks.panes:
                fresh[i] = False
        else:
            before = existing[i]
            if before is not None:
                assert ks.merging is not None
                fresh[i] = False
                acc = ks.contents.get(ks.merging.mapping[before])
        if acc is None:
            continue
        accs[i] = acc
        if not _acc_ok(acc, sum_checks, plan.float_sums_exact):
            return None
    return _Found(keys, states, accs, fresh)


def _sum_checks(op: WindowOperator, p: _Prepared) -> list[tuple[int, type]]:
    """(slot, Python type) of every SUM/AVG accumulator slot, from its column's kind."""
    checks: list[tuple[int, type]] = []
    for spec, slot in zip(op.config.aggregates, op._agg.slots, strict=True):
        if spec.info.partial == "sum":
            assert spec.arg is not None
            checks.append((slot, float if p.columns[spec.arg].dtype.kind == "f" else int))
    return checks


def _small_integral(value: float) -> bool:
    """An integer-valued float whose sums with the batch's stay exact (and not -0.0)."""
    return (
        value.is_integer()
        and abs(value) < _FLOAT_EXACT / 2
        and not (value == 0 and bool(np.signbit(value)))
    )


def _acc_ok(acc: list, checks: list[tuple[int, type]], float_sums_exact: bool) -> bool:
    """Can the batch partial be folded into this existing accumulator exactly?"""
    for slot, kind in checks:
        value: Any = acc[slot]
        if value is None:
            continue
        # the loop's left-to-right arithmetic keeps the accumulator's type
        if type(value) is not kind:
            return False
        if float_sums_exact and kind is float and not _small_integral(acc[slot]):
            return False
    return True


def _partials(
    op: WindowOperator, p: _Prepared, plan: _Plan, found: _Found
) -> tuple[list[int], list[list | None]]:
    """Per group: the row count and, per aggregate, its batch partial as Python values."""
    g = plan.groups
    specs = op.config.aggregates
    slots = op._agg.slots
    seq0 = op._seq
    wants_order = any(s.info.partial in ("first", "last") for s in specs)
    first_row = last_row = None
    if g.pane is not None:
        counts = g.pane.count
        first_row, last_row = g.pane.first_row, g.pane.last_row
    else:
        assert g.rows is not None and g.group is not None and g.starts is not None
        counts = np.diff(np.append(g.starts, len(g.rows)))
        if wants_order:
            first_row, last_row = _first_last_rows(p, g.rows, g.group, g.starts)
    per_spec: list[list | None] = []
    int_sums: dict[int, list] = {}
    extrema: dict[tuple[str, int], list] = {}
    for spec, slot in zip(specs, slots, strict=True):
        kind, arg = spec.info.partial, spec.arg
        if kind == "count":
            per_spec.append(None)
        elif kind == "sum":
            assert arg is not None
            col = p.columns[arg]
            if g.pane is not None:
                values = g.pane.sums[arg].tolist()
                per_spec.append([float(v) for v in values] if col.dtype.kind == "f" else values)
            elif col.dtype.kind == "i":
                if arg not in int_sums:
                    assert g.rows is not None and g.starts is not None
                    int_sums[arg] = np.add.reduceat(col[g.rows], g.starts).tolist()
                per_spec.append(int_sums[arg])
            else:
                # left to right from the accumulator's value, as the loop adds
                init = np.array(
                    [-0.0 if acc is None or acc[slot] is None else acc[slot] for acc in found.accs],
                    dtype=np.float64,
                )
                assert g.rows is not None and g.group is not None and g.starts is not None
                per_spec.append(sequential_sums(col[g.rows], g.group, g.starts, init).tolist())
        elif kind in ("min", "max"):
            assert arg is not None
            if (kind, arg) not in extrema:
                if g.pane is not None:
                    table = g.pane.mins if kind == "min" else g.pane.maxs
                    extrema[(kind, arg)] = table[arg].tolist()
                else:
                    assert g.rows is not None and g.starts is not None
                    ufunc = np.minimum if kind == "min" else np.maximum
                    extrema[(kind, arg)] = ufunc.reduceat(p.columns[arg][g.rows], g.starts).tolist()
            per_spec.append(extrema[(kind, arg)])
        elif kind in ("list", "distinct"):
            # per group the accumulator's own shape: (t, seq, value) entries or a set
            assert arg is not None and g.rows is not None and g.starts is not None
            r = g.rows
            values = p.columns[arg][r].tolist()
            bounds = np.append(g.starts, len(r)).tolist()
            if kind == "distinct":
                per_spec.append(
                    [set(values[a:b]) for a, b in zip(bounds[:-1], bounds[1:], strict=True)]
                )
            else:
                entries = list(zip(p.ts[r].tolist(), (r + seq0).tolist(), values, strict=True))
                per_spec.append(
                    [entries[a:b] for a, b in zip(bounds[:-1], bounds[1:], strict=True)]
                )
        else:  # first / last: (event time, arrival seq, value)
            assert arg is not None and first_row is not None and last_row is not None
            chosen = first_row if kind == "first" else last_row
            per_spec.append(
                list(
                    zip(
                        p.ts[chosen].tolist(),
                        (chosen + seq0).tolist(),
                        p.columns[arg][chosen].tolist(),
                        strict=True,
                    )
                )
            )
    return counts.tolist(), per_spec


def _codegen(
    specs: tuple, slots: list[int], seq_sums: tuple[bool, ...]
) -> tuple[list[str], list[str]]:
    """Per aggregate: the result expression of a fresh group's partial (``P{j}[i]``,
    ``cnt``) and the lines folding it into an accumulator ``acc`` the way
    ``Aggregator.add`` would have, row by row: the kind's merge
    (``wql.runtime.aggregates``), a batch partial being the accumulator of
    the group's rows."""
    results = []
    fold = []
    for j, (spec, s, seq_sum) in enumerate(zip(specs, slots, seq_sums, strict=True)):
        info = spec.info
        if info.partial == "count":
            sources = ["cnt"]
        elif spec.kind == "AVG":
            sources = [f"P{j}[i]", "cnt"]
        else:
            sources = [f"P{j}[i]"]
        results.append(result_expression(spec.kind, sources))
        targets = [f"acc[{s + n}]" for n in range(len(info.create))]
        if seq_sum:
            # the float partial already started from the accumulator (sequential_sums)
            fold.append(f"        acc[{s}] = P{j}[i]")
            fold += [f"        acc[{s + 1}] += cnt"] if spec.kind == "AVG" else []
            continue
        names = [src if src == "cnt" else f"b{j}_{n}" for n, src in enumerate(sources)]
        fold += [f"        {b} = {src}" for b, src in zip(names, sources, strict=True) if b != src]
        fold += [f"        {line}" for line in merge_lines(spec.kind, targets, names)]
    return results, fold


_GROUP_LOOPS: dict[tuple, Any] = {}


def _group_loop(specs: tuple, slots: list[int], seq_sums: tuple[bool, ...], merging: bool) -> Any:
    """Straight-line Python for the per-group work, generated once per shape.

    The loop runs once per (key, window) group, so (as the runtime's own
    ``Aggregator.add``) it is generated without per-aggregate dispatch.
    For each group: either emit the window (created and completed inside
    the batch) or fold the batch partial into the window's accumulator the
    way ``Aggregator.add`` would have row by row, store it and register the
    window's timers.
    """
    shape = (tuple((s.kind, s.arg) for s in specs), tuple(slots), seq_sums, merging)
    fn = _GROUP_LOOPS.get(shape)
    if fn is not None:
        return fn
    results, fold = _codegen(specs, slots, seq_sums)
    unpack = "".join(f"    P{j} = parts[{j}]\n" for j in range(len(specs)))
    row = ", ".join(["key", "start", "end", "end - 1", "0", "ON_TIME", "end - 1", *results])
    if merging:
        store = """\
        before = existing[i]
        window = TimeWindow(start, end)
        if before is None:
            ks.merging.mapping[window] = window
            ks.contents[window] = acc
            register(key, window, end - 1)
            cleanup(key, window)
        else:
            mapping = ks.merging.mapping
            sw = mapping[before]
            if done[i] == 2:
                # an earlier session that fires and is cleaned up in this batch:
                # emit it here instead of through its timers (which go)
                pane = ks.panes.pop(sw, 0)
                direct.append((key, start, end, end - 1, pane, ON_TIME, end - 1, *result(acc)))
                ks.contents.pop(sw, None)
                del mapping[before]
                delete(key, before, before.end - 1)
                delete_cleanup(key, before)
                emptied.append(key)
                continue
            ks.contents[sw] = acc
            if before != window:
                # the loop's merge callback: the absorbed window's trigger and
                # cleanup timers go, the cover gets its own
                del mapping[before]
                mapping[window] = sw
                delete(key, before, before.end - 1)
                delete_cleanup(key, before)
                register(key, window, end - 1)
                cleanup(key, window)
"""
    else:
        store = """\
        window = TimeWindow(start, end)
        if done[i] == 2:
            # a window from an earlier batch that fires and is cleaned up in
            # this one: emit it here instead of through its timers (which go)
            pane = ks.panes.pop(window, 0)
            direct.append((key, start, end, end - 1, pane, ON_TIME, end - 1, *result(acc)))
            ks.contents.pop(window, None)
            delete(key, window, end - 1)
            delete_cleanup(key, window)
            emptied.append(key)
            continue
        ks.contents[window] = acc
        if fresh[i]:  # an existing window already has both timers
            register(key, window, end - 1)
            cleanup(key, window)
"""
    src = f"""\
def group_loop(op, keys, states, accs, fresh, existing, starts, ends, counts, parts, done, direct,
               emptied):
{unpack}    create = op._agg.create
    result = op._agg.result
    key_states = op._keys
    new_key_state = op._new_key_state
    register = op._timers.register_event_time_timer
    delete = op._timers.delete_event_time_timer
    cleanup = op._register_cleanup_timer
    delete_cleanup = op._delete_cleanup_timer
    for i in range(len(keys)):
        key = keys[i]; start = starts[i]; end = ends[i]; cnt = counts[i]
        if done[i] == 1:
            direct.append(({row}))
            continue
        acc = accs[i]
        if acc is None:
            acc = create()
{chr(10).join(fold)}
        ks = states[i]
        if ks is None:
            ks = key_states.get(key)
            if ks is None:
                ks = new_key_state(key)
{store}"""
    namespace: dict[str, Any] = {
        "TimeWindow": TimeWindow,
        "ON_TIME": ON_TIME,
        "_order": order_key,
    }
    exec(compile(src, "<wql.runtime.vectorized.group_loop>", "exec"), namespace)  # noqa: S102
    fn = _GROUP_LOOPS[shape] = namespace["group_loop"]
    return fn


def _apply(op: WindowOperator, p: _Prepared, plan: _Plan, found: _Found) -> None:
    g = plan.groups
    specs = op.config.aggregates
    seq0 = op._seq
    counts, per_spec = _partials(op, p, plan, found)
    seq_sums = tuple(
        spec.info.partial == "sum" and g.pane is None and p.columns[spec.arg].dtype.kind == "f"  # type: ignore[index]
        for spec in specs
    )
    # windows created and completed inside the batch are emitted directly
    ends = g.end
    cleanup = np.minimum(ends - 1 + min(p.lateness, _INT_EXACT), MAX_TIME)
    # 1: created and completed inside the batch (emitted from the partial);
    # 2: existing before the batch, fires and is cleaned up inside it
    due = (ends - 1 <= p.wm_last) & (cleanup <= p.wm_last)
    fresh = np.array(found.fresh, dtype=bool)
    done = (due & fresh).astype(np.int64)
    done[due & ~fresh] = 2
    done_list = done.tolist()
    emptied: list[Hashable] = []
    direct: list[tuple] = []
    loop = _group_loop(specs, op._agg.slots, seq_sums, g.existing is not None)
    loop(
        op,
        found.keys,
        found.states,
        found.accs,
        found.fresh,
        g.existing,
        g.start.tolist(),
        ends.tolist(),
        counts,
        per_spec,
        done_list,
        direct,
        emptied,
    )
    key_states = op._keys
    for key in emptied:  # as the runtime does after a cleanup timer
        ks = key_states.get(key)
        if ks is not None and ks.is_empty() and not op._timers.has_timers(key):
            del key_states[key]

    # rows that no window took, dropped rows, counters
    counters = op.counters
    dropped = counters.dropped
    invalid_ts = p.n - int(p.valid.sum())
    if invalid_ts:
        dropped[DROP_MISSING_TIMESTAMP] = dropped.get(DROP_MISSING_TIMESTAMP, 0) + invalid_ts
    if len(plan.invalid_gap):
        dropped[DROP_INVALID_GAP] = dropped.get(DROP_INVALID_GAP, 0) + len(plan.invalid_gap)
    if len(plan.rejected):
        _reject(op, p, plan.rejected)
    counters.rows_in += p.n
    op._seq = seq0 + p.n
    if direct:
        direct.sort(key=_by_window_time)  # timer order: window time first
        op._out.extend(direct)
        counters.rows_emitted += len(direct)
    op.advance_watermark(p.wm_last)


def _by_window_time(row: tuple) -> int:
    return row[3]


def _reject(op: WindowOperator, p: _Prepared, rows: IntArray) -> None:
    """Rows no window accepted: late output, or counted (the loop's rules)."""
    cfg = op.config
    counters = op.counters
    dropped = counters.dropped
    lateness = p.lateness
    late_columns = cfg.late_columns
    columns = p.batch.columns
    picked = list(range(len(columns))) if late_columns is None else list(late_columns)
    values_of = {
        c: (
            np.asarray(columns[c])[rows].tolist()
            if isinstance(columns[c], np.ndarray)
            else [columns[c][r] for r in rows.tolist()]
        )
        for c in set(picked)
    }
    for j, (r, t, w) in enumerate(
        zip(rows.tolist(), p.ts[rows].tolist(), p.wm_raw[rows].tolist(), strict=True)
    ):
        if t + lateness <= w:
            if cfg.late_output:
                values = tuple(values_of[c][j] for c in picked)
                op._late.append((p.keys[r], t, values))
                counters.late_rows += 1
            else:
                dropped[DROP_LATE] = dropped.get(DROP_LATE, 0) + 1
        else:
            dropped[DROP_LATE_WINDOW] = dropped.get(DROP_LATE_WINDOW, 0) + 1


# --------------------------------------------------------------------------- count windows

#: The CountTrigger's state under PurgingTrigger (child 0 of the trigger context).
_COUNT_STATE = (GLOBAL_WINDOW, "0.count")


def _count_window_size(op: WindowOperator) -> int | None:
    """n for COUNT_WINDOW(n) (GlobalWindows + PurgingTrigger(CountTrigger(n))), else None."""
    cfg = op.config
    trigger = cfg.trigger
    if (
        type(cfg.assigner) is GlobalWindows
        and cfg.evictor is None
        and type(trigger) is PurgingTrigger
        and type(trigger.nested) is CountTrigger
    ):
        return trigger.nested.count
    return None


def _count_windows(op: WindowOperator, p: _Prepared) -> bool:
    """Tumbling count windows: every n-th row of a key fires and purges its window.

    Per key, row r (arrival rank) of the batch is the (c0 + r + 1)-th row
    since the last purge, where c0 is the count the trigger kept; rows with
    the same ``(c0 + r) // n`` share one firing, the first of them on top
    of the window's existing accumulator.  A firing happens on an element
    (no timers), so its pane timing is EARLY below the end of time.
    """
    n_fire = _count_window_size(op)
    assert n_fire is not None
    if not _columns_ok(op, p, np.arange(p.n, dtype=np.int64)):
        return False
    order, kgroup, kstarts = group_rows(p.key_codes)
    lengths = np.diff(np.append(kstarts, p.n))
    key_codes = p.key_codes[order[kstarts]].tolist()
    keys = [p.uniques[c] for c in key_codes]
    key_states = op._keys
    states = [key_states.get(k) for k in keys]
    c0_list: list[int] = []
    pane0: list[int] = []
    acc0: list[list | None] = []
    checks = _sum_checks(op, p)
    for ks in states:
        if ks is None:
            c0_list.append(0)
            pane0.append(0)
            acc0.append(None)
            continue
        c0_list.append(ks.trigger.get(_COUNT_STATE) or 0)
        pane0.append(ks.panes.get(GLOBAL_WINDOW, 0))
        acc = ks.contents.get(GLOBAL_WINDOW)
        if acc is not None and not _acc_ok(acc, checks, False):
            return False
        acc0.append(acc)
    c0 = np.array(c0_list, dtype=np.int64)
    rank = np.arange(p.n, dtype=np.int64) - np.repeat(kstarts, lengths)
    fire_no = (np.repeat(c0, lengths) + rank) // n_fire
    new = np.ones(p.n, dtype=bool)
    new[1:] = (kgroup[1:] != kgroup[:-1]) | (fire_no[1:] != fire_no[:-1])
    g_starts = np.flatnonzero(new).astype(np.int64)
    g_group = np.cumsum(new, dtype=np.int64) - 1
    g_key = kgroup[g_starts]
    g_fire = fire_no[g_starts]
    total = c0 + lengths
    fires = (g_fire + 1) * n_fire <= total[g_key]
    last_row = order[np.append(g_starts[1:], p.n) - 1]
    g_key_l = g_key.tolist()
    first_of_key = (g_fire == 0).tolist()
    groups = _Groups(
        key=p.key_codes[order[g_starts]],
        start=np.zeros(len(g_starts), np.int64),
        end=np.zeros(len(g_starts), np.int64),
        rows=order.astype(np.int64),
        group=g_group,
        starts=g_starts,
    )
    accs = [acc0[k] if first else None for k, first in zip(g_key_l, first_of_key, strict=True)]
    found = _Found([keys[k] for k in g_key_l], [None] * len(g_key_l), accs, [True] * len(g_key_l))
    plan = _Plan(groups, np.zeros(0, np.int64), np.zeros(0, np.int64), False)
    counts, per_spec = _partials(op, p, plan, found)
    seq_sums = tuple(
        spec.info.partial == "sum" and p.columns[spec.arg].dtype.kind == "f"  # type: ignore[index]
        for spec in op.config.aggregates
    )
    panes = (np.array(pane0, np.int64)[g_key] + g_fire).tolist()
    timings = np.where(p.wm_raw[last_row] < MAX_TIME, 0, 1).tolist()
    emitted: list[tuple] = []
    keep: list[list | None] = [None] * len(keys)
    loop = _count_loop(op.config.aggregates, op._agg.slots, seq_sums)
    loop(
        op,
        found.keys,
        accs,
        counts,
        per_spec,
        fires.tolist(),
        panes,
        timings,
        last_row.tolist(),
        g_key_l,
        keep,
        emitted,
    )
    # the key's window after the batch: the trailing partial group, if any
    fired_per_key = np.bincount(g_key[fires], minlength=len(keys)).tolist()
    remainder = (total % n_fire).tolist()
    for k, key in enumerate(keys):
        ks = states[k]
        if ks is None:
            ks = key_states.get(key) or op._new_key_state(key)
        if fired_per_key[k]:
            ks.panes[GLOBAL_WINDOW] = pane0[k] + fired_per_key[k]
        if remainder[k]:
            ks.trigger[_COUNT_STATE] = remainder[k]
            ks.contents[GLOBAL_WINDOW] = keep[k]
        else:
            ks.trigger.pop(_COUNT_STATE, None)
            ks.contents.pop(GLOBAL_WINDOW, None)
    emitted.sort(key=_by_row)
    op._out.extend(row for _, row in emitted)
    op.counters.rows_emitted += len(emitted)
    op.counters.rows_in += p.n
    op._seq += p.n
    op.advance_watermark(p.wm_last)
    return True


def _by_row(entry: tuple) -> int:
    return entry[0]


_COUNT_LOOPS: dict[tuple, Any] = {}


def _count_loop(specs: tuple, slots: list[int], seq_sums: tuple[bool, ...]) -> Any:
    """Generated per-group loop of count windows (see ``_group_loop``)."""
    shape = (tuple((s.kind, s.arg) for s in specs), tuple(slots), seq_sums)
    fn = _COUNT_LOOPS.get(shape)
    if fn is not None:
        return fn
    results, fold = _codegen(specs, slots, seq_sums)
    unpack = "".join(f"    P{j} = parts[{j}]\n" for j in range(len(specs)))
    head = "key, None, None, None, panes[i], TIMING[timings[i]], MAX_TIME"
    src = f"""\
def count_loop(op, keys, accs, counts, parts, fires, panes, timings, rows, key_of, keep, out):
{unpack}    create = op._agg.create
    result = op._agg.result
    for i in range(len(keys)):
        key = keys[i]; cnt = counts[i]
        acc = accs[i]
        if acc is None and fires[i]:
            out.append((rows[i], ({head}, {", ".join(results)})))
            continue
        if acc is None:
            acc = create()
{chr(10).join(fold)}
        if fires[i]:
            out.append((rows[i], ({head}, *result(acc))))
        else:
            keep[key_of[i]] = acc
"""
    namespace: dict[str, Any] = {
        "MAX_TIME": MAX_TIME,
        "TIMING": (EARLY, LATE),
        "_order": order_key,
    }
    exec(compile(src, "<wql.runtime.vectorized.count_loop>", "exec"), namespace)  # noqa: S102
    fn = _COUNT_LOOPS[shape] = namespace["count_loop"]
    return fn
