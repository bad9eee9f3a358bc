"""A batch as validated NumPy columns, and whether the vectorized path may try it.

:func:`prepare` checks the configuration (assigner, trigger, evictor,
aggregates) and the batch (int64 times and watermarks, numeric argument
columns without nulls, keys factorised to codes) without touching the
operator; ``None`` means the per-row loop runs.
"""

from __future__ import annotations

from collections.abc import Hashable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from wql.runtime.assigners import (
    CumulateWindows,
    DynamicSessionWindows,
    GlobalWindows,
    SessionWindows,
    SlidingWindows,
    TumblingWindows,
)
from wql.runtime.config import EncodedKeys, OperatorConfig, RowBatch
from wql.runtime.triggers import CountTrigger, EventTimeTrigger, PurgingTrigger
from wql.runtime.vectorized.kernels import BoolArray, IntArray
from wql.runtime.windows import MAX_TIME, MIN_TIME

if TYPE_CHECKING:
    from wql.runtime.window_operator import WindowOperator


# Times and window bounds stay well inside int64, so no expression overflows.
TIME_LIMIT = 2**60


INT_EXACT = 2**62


FLOAT_EXACT = 2**53


# Above this many (row, window) pairs the batch is left to the loop rather
# than materialised (HOP/CUMULATE with non-shareable aggregates).
MAX_PAIRS = 4_000_000


_ASSIGNERS = (
    TumblingWindows,
    SlidingWindows,
    CumulateWindows,
    SessionWindows,
    DynamicSessionWindows,
)


@dataclass
class Prepared:
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


def prepare(op: WindowOperator, batch: RowBatch) -> Prepared | None:
    n = len(batch)
    if n == 0:
        return None
    cfg = op.config
    assigner = cfg.assigner
    # COUNT_WINDOW(n) (GlobalWindows + PurgingTrigger(CountTrigger(n))) has no time
    count_window = count_window_size(op) is not None
    # sessions under [PURGING] COUNT(n) with any evictor: aggregates over the rows
    # themselves (vectorized/count_sessions.py), so no column needs to be numeric
    counted = count_sessions_shape(cfg) is not None
    if not count_window and (
        type(assigner) not in _ASSIGNERS
        or not assigner.is_event_time
        or (cfg.trigger is not None and type(cfg.trigger) is not EventTimeTrigger and not counted)
    ):
        return None
    if (cfg.evictor is not None and not counted) or batch.processing_time is not None:
        return None
    if batch.timestamps is None and not count_window:
        return None
    for size in [*_assigner_lengths(assigner), cfg.allowed_lateness]:
        if size >= TIME_LIMIT:
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
        if int(tv.min()) < -TIME_LIMIT or int(tv.max()) > TIME_LIMIT:
            return None
    needed = set() if counted else {spec.arg for spec in cfg.aggregates if spec.arg is not None}
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
    return Prepared(
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
    if isinstance(keys, EncodedKeys):
        return keys.codes.astype(np.int64, copy=False), keys.keys
    index: dict[Hashable, int] = {}
    setdefault = index.setdefault
    try:
        codes = [setdefault(k, len(index)) for k in keys]
    except TypeError:  # an unhashable key: let the loop raise its own error
        return None
    return np.array(codes, dtype=np.int64), list(index)


def count_sessions_shape(config: OperatorConfig) -> tuple[int, bool] | None:
    """``(n, purging)`` for event-time sessions under ``[PURGING] COUNT(n)``, else None."""
    trigger = config.trigger
    purging = type(trigger) is PurgingTrigger
    inner = trigger.nested if isinstance(trigger, PurgingTrigger) else trigger
    if (
        isinstance(config.assigner, SessionWindows | DynamicSessionWindows)
        and config.assigner.is_event_time
        and type(inner) is CountTrigger
    ):
        return inner.count, purging
    return None


def count_window_size(op: WindowOperator) -> int | None:
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
