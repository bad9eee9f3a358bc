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

When it applies (everything else falls back; a batch shorter than
``MIN_BATCH`` rows goes to the loop whole, which is faster for it):

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
  ``sessions.plan_sessions``), and no batch bridges two sessions that
  existed before it.

Rows that break a condition on their own do not send the whole batch to the
loop: ``rows_alone`` marks them (a session row at or behind the watermark it
sees, a row whose window fired but is within the allowed lateness), and the
batch is cut there: the rows between such rows are planned as batches of
their own, each marked row goes through the per-row loop alone. A row that
bridges existing sessions cuts the same way (``Cut``). That is the loop by
construction: the loop over a batch is the loop over its consecutive parts,
and each part is either planned (exact, as above) or looped.

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

Modules, by concern: ``kernels`` (exact NumPy kernels), ``prepare`` (which
configurations and batches qualify; the batch as NumPy columns),
``time_windows`` and ``sessions`` (plans: the groups a batch touches),
``apply`` (folding a plan into the operator's state, generated per-group
loops), ``count_windows`` (``COUNT_WINDOW(n)``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from wql.runtime.config import RowBatch
from wql.runtime.vectorized import count_sessions, sessions, time_windows
from wql.runtime.vectorized.apply import apply_plan, lookup
from wql.runtime.vectorized.count_windows import process_count_windows
from wql.runtime.vectorized.prepare import (
    Prepared,
    count_sessions_shape,
    count_window_size,
    prepare,
)
from wql.runtime.vectorized.time_windows import Cut

if TYPE_CHECKING:
    from wql.runtime.window_operator import WindowOperator

__all__ = ["try_process_batch"]

#: Parts of a cut batch shorter than this go through the loop: planning a part
#: costs about as much as looping this many rows.
MIN_PART = 128

#: Batches shorter than this go through the loop whole: a plan's fixed cost (~0.3 ms)
#: is more than looping them (a session query's key: 0.10 ms for one row, 0.35 ms for
#: 32, against 0.35 and 0.49 ms planned; docs/benchmarks.md, "Small batches loop").
#: Hosts that run a key's few rows per call (a stream's key buckets) take this often.
MIN_BATCH = 32


def try_process_batch(operator: WindowOperator, batch: RowBatch) -> bool:
    """Process ``batch`` with NumPy when provably equal to the per-row loop.

    Returns ``False`` without touching the operator when it cannot prove it
    (see the module docstring for the conditions); ``process_batch`` then
    runs the loop. A batch cut at rows that must go alone is processed part
    by part (planned or looped) and returns ``True``.
    """
    if len(batch) < MIN_BATCH:
        return False
    counted = count_sessions_shape(operator.config) is not None
    if operator.tracks_rows and not counted:
        return False  # only count_sessions keeps the rows followed for "in no firing"
    prepared = prepare(operator, batch)
    if prepared is None:
        return False
    if count_window_size(operator) is not None:
        return process_count_windows(operator, prepared)
    planner = sessions if prepared.merging else time_windows
    alone = planner.rows_alone(operator, prepared)
    if not alone.any():
        return _process(operator, batch, prepared, 0, len(batch), whole=True)
    # planned parts: the runs between rows that go alone; give up when they are short
    bounds = np.flatnonzero(np.diff(np.concatenate(([1], alone.view(np.int8), [1]))) != 0)
    runs = [(a, b) for a, b in zip(bounds[:-1], bounds[1:], strict=True) if not alone[a]]
    planned = sum(b - a for a, b in runs if b - a >= MIN_PART)
    if planned == 0 or 2 * planned < len(batch):
        return False
    pos = 0
    for a, b in runs:
        if a > pos:
            operator.process_rows(batch.slice(pos, a))
        _process(operator, batch, None, int(a), int(b))
        pos = int(b)
    if pos < len(batch):
        operator.process_rows(batch.slice(pos, len(batch)))
    return True


def _process(
    op: WindowOperator,
    batch: RowBatch,
    prepared: Prepared | None,
    start: int,
    stop: int,
    whole: bool = False,
) -> bool:
    """Rows ``start:stop`` of ``batch``: planned, cut, or looped.

    ``whole``: the entire batch; then nothing is done (``False``) when it
    cannot be planned, so that the caller loops it.
    """
    while start < stop:
        if not whole and stop - start < MIN_PART:
            op.process_rows(batch.slice(start, stop))
            return True
        part = batch if whole else batch.slice(start, stop)
        p = prepared if prepared is not None else prepare(op, part)
        prepared = None
        done = False if p is None else _attempt(op, p)
        if isinstance(done, Cut):
            # plan the rows before the cut, loop the cut row alone, go on after it
            cut = start + done.row
            _process(op, batch, None, start, cut)
            op.process_rows(batch.slice(cut, cut + 1))
            start, whole = cut + 1, False
            continue
        if not done:
            if whole:
                return False
            op.process_rows(part)
        return True
    return True


def _attempt(op: WindowOperator, p: Prepared) -> bool | Cut:
    """Process ``p`` (``True``), or leave the operator as it was: ``False`` or a ``Cut``."""
    if count_sessions_shape(op.config) is not None:
        return count_sessions.process(op, p)
    planned = (sessions.plan_sessions if p.merging else time_windows.plan_time_windows)(op, p)
    if planned is None or isinstance(planned, Cut):
        return planned or False
    found = lookup(op, p, planned)
    if found is None:
        return False
    apply_plan(op, p, planned, found)
    return True
