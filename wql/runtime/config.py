"""The runtime's configuration and I/O types: what a host builds and what it reads back.

``OperatorConfig`` is everything the operator needs to know about a query
(the compiler's ``backends/operator.py`` builds it from the plan); it holds
no per-key state and can be shared. ``RowBatch`` is the columnar input of
``WindowOperator.process_batch``. Emitted rows are plain tuples, laid out as
``EMITTED_FIELDS`` followed by the aggregate results in config order, then,
when the config asks for it (``tag_firings``), ``FIRED_FIELDS``: what fired
the row, which a host needs to place it in a pipeline's global sequence
(docs/architecture.md, "Contract: pipelines"), and last ``EXTENDED_FIELDS``
when the config asks for them (``OperatorConfig.extended_rows``:
``mark_last`` or ``changelog``); late rows as ``LATE_FIELDS``; hosts read
both by the positions named here (``EMIT_*``, ``LATE_*``), never by bare
numbers.

>>> cfg = OperatorConfig(TumblingWindows(3000), (AggregateSpec("SUM", 0),))
>>> type(cfg.effective_trigger).__name__
'EventTimeTrigger'
>>> assigner, trigger, evictor = count_windows(4, 2)
>>> trigger, evictor
(CountTrigger(count=2), CountEvictor(count=4, after=False))
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt

from wql.errors import ErrorCode, WqlSemanticError
from wql.runtime import windows as W
from wql.runtime.aggregates import AggregateSpec
from wql.runtime.assigners import GlobalWindows, TumblingWindows, WindowAssigner
from wql.runtime.evictors import CountEvictor, Evictor
from wql.runtime.triggers import (
    AllTrigger,
    AnyTrigger,
    CountTrigger,
    EarlyLateTrigger,
    ProcessingTimeoutTrigger,
    PurgingTrigger,
    Trigger,
    walk,
)

#: Composite triggers that fire again and again whatever their children do: a child
#: that finishes means nothing inside them (Beam's ``Repeatedly`` resets a finished
#: child; WQL refuses it, docs/language.md "Triggers that finish").
_REPEATING = (AnyTrigger, AllTrigger, ProcessingTimeoutTrigger, EarlyLateTrigger)

__all__ = [
    "EMITTED_FIELDS",
    "EMIT_KEY",
    "EMIT_PANE_INDEX",
    "EMIT_PANE_TIMING",
    "EMIT_RESULTS",
    "EMIT_TIMESTAMP",
    "EMIT_WINDOW_END",
    "EMIT_WINDOW_START",
    "EMIT_WINDOW_TIME",
    "EXTENDED_FIELDS",
    "FIRED_BY_EVENT_TIMER",
    "FIRED_BY_PROCESSING_TIMER",
    "FIRED_BY_ROW",
    "FIRED_FIELDS",
    "LATE_FIELDS",
    "LATE_KEY",
    "LATE_TIMESTAMP",
    "LATE_VALUES",
    "Counters",
    "EncodedKeys",
    "OperatorConfig",
    "RowBatch",
    "count_windows",
    "TumblingWindows",
]

#: A column of a RowBatch: a NumPy array or any sequence (one entry per row).
Column = Sequence[Any] | npt.NDArray[Any]

#: Leading fields of every emitted row; aggregate results follow in config order.
#: ``window_start``/``window_end``/``window_time`` are None for GlobalWindows;
#: ``timestamp`` is the window's max timestamp (MAX_TIME for GlobalWindows).
EMITTED_FIELDS = (
    "key",
    "window_start",
    "window_end",
    "window_time",
    "pane_index",
    "pane_timing",
    "timestamp",
)

#: Positions in an emitted row, named once for every host (``row[EMIT_PANE_INDEX]``).
(
    EMIT_KEY,
    EMIT_WINDOW_START,
    EMIT_WINDOW_END,
    EMIT_WINDOW_TIME,
    EMIT_PANE_INDEX,
    EMIT_PANE_TIMING,
    EMIT_TIMESTAMP,
) = range(len(EMITTED_FIELDS))
#: Position of the first aggregate result in an emitted row.
EMIT_RESULTS = len(EMITTED_FIELDS)

#: Fields after the aggregate results when ``OperatorConfig.extended_rows``:
#: ``is_last`` (bool, the firing cleaned the window up: no later pane can
#: follow) and ``op`` (Flink's RowKind in its short form: ``+I`` insert,
#: ``-U`` / ``+U`` the previous pane's row retracted / the new one, ``-D`` the
#: row of a window merged away; without ``changelog`` every row is ``+I``).
#: They are the last two fields: ``row[-2]``, ``row[-1]``.
EXTENDED_FIELDS = ("is_last", "op")

#: A late row (``drain_late()``) is ``(key, timestamp, values)``; ``values`` holds the
#: late-output columns (``OperatorConfig.late_columns``).
LATE_FIELDS = ("key", "timestamp", "values")
LATE_KEY, LATE_TIMESTAMP, LATE_VALUES = range(len(LATE_FIELDS))

# The pane timings live with the windows (wql.runtime.windows.pane_timing).
EARLY, ON_TIME, LATE = W.EARLY, W.ON_TIME, W.LATE

INSERT = "+I"
UPDATE_BEFORE = "-U"
UPDATE_AFTER = "+U"
DELETE = "-D"

#: With ``OperatorConfig.tag_firings`` every emitted row carries, after its
#: aggregate results (and before ``EXTENDED_FIELDS``, which stay last), these
#: fields: what made the operator emit it.
#:
#: ``fired_by`` is one of the ``FIRED_BY_*`` codes below; ``fired_time`` is
#: the timer's time (None for a row fired by a row); ``fired_row`` is an
#: arrival number (the operator numbers the rows it is given 0, 1, 2, ...):
#:
#: * ``FIRED_BY_ROW``: fired while processing row ``fired_row`` (a COUNT or
#:   an early trigger, a late row within the allowed lateness);
#: * ``FIRED_BY_EVENT_TIMER`` / ``FIRED_BY_PROCESSING_TIMER``: fired by a timer
#:   at ``fired_time`` when the clock rose to it. ``fired_row`` is None when
#:   the timer was ahead of the clock before that rise: a global sequential
#:   run fires it at the first rise that reaches it. Otherwise the timer was
#:   at or behind the clock already (registered by a row since the clock's
#:   last rise, e.g. an EVERY boundary of a row far behind the watermark):
#:   it fires at the first rise after row ``fired_row``, the last row the
#:   operator processed before the rise.
#:
#: A timer registered while firing another one, at an earlier time, fires in
#: the same pass and carries that timer's fields. ``wql.runtime.pipeline``
#: turns these fields into positions of a global sequence.
FIRED_FIELDS = ("fired_by", "fired_time", "fired_row")
FIRED_BY_ROW = 0
FIRED_BY_EVENT_TIMER = 1
FIRED_BY_PROCESSING_TIMER = 2


@dataclass(frozen=True)
class OperatorConfig:
    """One windowed query, as the runtime sees it.

    Attributes:
        assigner: the window assigner (event or processing time, merging or not).
        aggregates: the aggregates computed per firing, over ``values`` indices.
        trigger: the trigger; ``None`` means the assigner's default.
        evictor: optional evictor (then windows buffer rows instead of accumulators).
        allowed_lateness: ms; only meaningful for event-time assigners.
        late_output: send late rows that no window accepted to ``drain_late()``
            instead of counting them as dropped.
        late_columns: which ``values`` indices the late output carries
            (``None``: all of them).
        tag_firings: end every emitted row's results with ``FIRED_FIELDS``
            (a stage of a pipeline: its host places each row in the global
            sequence); ``EXTENDED_FIELDS``, if any, follow them.
        mark_last: emitted rows carry ``is_last`` (``EXTENDED_FIELDS``).
        changelog: emitted rows carry ``op`` and every pane after a window's
            first is preceded by the retraction (``-U``) of the window's
            previous row; a session merge retracts (``-D``) the rows of the
            windows it absorbs (docs/runtime.md, "Changelog"). Not with
            ``tag_firings``: a window stage reads appends only (Flink's
            window aggregate does not consume updates).
    """

    assigner: WindowAssigner
    aggregates: tuple[AggregateSpec, ...] = ()
    trigger: Trigger | None = None
    evictor: Evictor | None = None
    allowed_lateness: int = 0
    late_output: bool = False
    late_columns: tuple[int, ...] | None = None
    # Not in repr: the snapshot fingerprint of a config without them stays what it
    # was (WindowOperator._config_fingerprint adds them when set).
    tag_firings: bool = field(default=False, repr=False)
    mark_last: bool = field(default=False, repr=False)
    changelog: bool = field(default=False, repr=False)

    def __post_init__(self) -> None:
        if not isinstance(self.allowed_lateness, int) or self.allowed_lateness < 0:
            raise WqlSemanticError(
                "allowed lateness must be a non-negative number of ms, "
                f"got {self.allowed_lateness!r}",
                code=ErrorCode.OUT_OF_RANGE,
            )
        object.__setattr__(self, "aggregates", tuple(self.aggregates))
        if self.tag_firings and self.changelog:
            raise WqlSemanticError(
                "a pipeline stage cannot emit a changelog: the next window stage reads "
                "appended rows only",
                code=ErrorCode.PIPELINE,
            )
        for t in walk(self.effective_trigger):
            if isinstance(t, _REPEATING) and any(c.can_finish() for c in walk(t)[1:]):
                raise WqlSemanticError(
                    f"a trigger that finishes cannot be a child of {type(t).__name__}, which "
                    "fires again and again",
                    code=ErrorCode.FINISHING_TRIGGER,
                )
        if self.assigner.is_merging:
            for t in walk(self.effective_trigger):
                if not t.can_merge():
                    raise WqlSemanticError(
                        f"trigger {type(t).__name__} cannot merge windows, so it cannot be "
                        "used with session windows",
                        code=ErrorCode.NOT_MERGEABLE,
                    )

    @property
    def effective_trigger(self) -> Trigger:
        return self.trigger if self.trigger is not None else self.assigner.default_trigger()

    @property
    def extended_rows(self) -> bool:
        """Emitted rows end with ``EXTENDED_FIELDS`` (``is_last``, ``op``)."""
        return self.mark_last or self.changelog


def count_windows(
    size: int, slide: int | None = None
) -> tuple[WindowAssigner, Trigger, Evictor | None]:
    """COUNT_WINDOW(size [, slide]) as Flink builds it (``countWindow``).

    Tumbling: GlobalWindows + PurgingTrigger(CountTrigger(size)).
    Sliding: GlobalWindows + CountTrigger(slide) + CountEvictor(size).
    """
    if slide is None:
        return GlobalWindows(), PurgingTrigger(CountTrigger(size)), None
    return GlobalWindows(), CountTrigger(slide), CountEvictor(size)


class EncodedKeys:
    """A key column as codes into its distinct keys (what ``RowBatch.keys`` may hold).

    ``keys`` are distinct (no two equal as Python values) and ``codes[i]``
    is the index of row i's key. A host that factorises keys in Arrow or
    NumPy builds one tuple per distinct key instead of one per row, and the
    vectorized path needs no hashing of its own. As a sequence it reads as
    the per-row keys.
    """

    __slots__ = ("codes", "keys")

    def __init__(self, codes: npt.NDArray[np.int64], keys: Sequence[Any]) -> None:
        self.codes = codes
        self.keys = list(keys)

    def __len__(self) -> int:
        return len(self.codes)

    def __getitem__(self, i: Any) -> Any:
        if isinstance(i, slice):
            return EncodedKeys(self.codes[i], self.keys)
        return self.keys[int(self.codes[i])]

    def tolist(self) -> list[Any]:
        """The per-row keys."""
        return list(map(self.keys.__getitem__, self.codes.tolist()))


class _NaNKey(float):
    """The one NaN of grouping keys (see :data:`NAN_KEY`)."""

    __slots__ = ()

    def __reduce__(self) -> tuple[Any, tuple[()]]:
        return (nan_key, ())


#: A key's NaN. Python's NaN is unequal to itself, so two NaN floats are two
#: dict keys; Flink groups every NaN key as one (``Double.equals``, and Flink
#: SQL's binary rows), as Spark does. Hosts put this object in a key tuple
#: wherever a key value is NaN (:func:`nan_keys`); tuples compare their items
#: by identity first, so every key holding it is one key, and it pickles (and
#: restores from a snapshot) as itself. It is a float: it reaches Arrow and the
#: output as NaN.
NAN_KEY: float = _NaNKey("nan")


def nan_key() -> float:
    """:data:`NAN_KEY` (what it unpickles as)."""
    return NAN_KEY


def nan_keys(values: list[Any]) -> list[Any]:
    """``values`` (one key column) with every float NaN replaced by :data:`NAN_KEY`."""
    return [NAN_KEY if isinstance(v, float) and v != v else v for v in values]  # noqa: PLR0124


@dataclass(frozen=True)
class RowBatch:
    """Columnar input of ``process_batch``; all sequences have one entry per row.

    Attributes:
        keys: grouping-key tuples (``()`` for windowAll), one per row, or
            :class:`EncodedKeys`.
        timestamps: event time per row, int ms (an int64 array or a sequence);
            ``None`` when the query has no event time.
        columns: one sequence per ``values`` index. NumPy numeric arrays cannot
            hold nulls: pass a list or an object array when a column has some.
        watermark_before: the watermark each row sees (advanced before the row).
        processing_time: processing time per row (advanced before the row), or
            ``None`` when the query does not use processing time.
        timestamp_valid: optional bool mask; ``False`` marks a row without
            event time (counted as dropped "missing timestamp").
    """

    keys: Column
    timestamps: Column | None
    columns: tuple[Column, ...]
    watermark_before: Column
    processing_time: Column | None = None
    timestamp_valid: Column | None = None

    def __post_init__(self) -> None:
        n = len(self.keys)
        named = [
            ("timestamps", self.timestamps),
            ("watermark_before", self.watermark_before),
            ("processing_time", self.processing_time),
            ("timestamp_valid", self.timestamp_valid),
        ]
        named += [(f"columns[{i}]", c) for i, c in enumerate(self.columns)]
        for name, column in named:
            if column is not None and len(column) != n:
                raise ValueError(f"RowBatch.{name} has {len(column)} rows, keys has {n}")

    def __len__(self) -> int:
        return len(self.keys)

    def per_row(self) -> tuple[list, list, list, list[tuple]]:
        """The batch as Python lists for a per-row loop: keys, the watermark each row
        sees, event times (``None`` for a row without one) and value tuples."""
        n = len(self)
        keys = as_list(self.keys)
        wms = as_list(self.watermark_before)
        tss = as_list(self.timestamps) if self.timestamps is not None else [None] * n
        if self.timestamp_valid is not None:
            valid = as_list(self.timestamp_valid)
            tss = [t if ok else None for t, ok in zip(tss, valid, strict=True)]
        rows = (
            list(zip(*[as_list(c) for c in self.columns], strict=True))
            if self.columns
            else [()] * n
        )
        return keys, wms, tss, rows

    def slice(self, start: int, stop: int) -> RowBatch:
        """Rows ``start`` to ``stop`` (exclusive) as a batch of their own."""

        def cut(column: Any) -> Any:
            return None if column is None else column[start:stop]

        return RowBatch(
            self.keys[start:stop],
            cut(self.timestamps),
            tuple(c[start:stop] for c in self.columns),
            self.watermark_before[start:stop],
            cut(self.processing_time),
            cut(self.timestamp_valid),
        )


@dataclass
class Counters:
    """Operator counters. Every input row ends up accepted, side-output or dropped."""

    rows_in: int = 0
    rows_emitted: int = 0
    late_rows: int = 0
    dropped: dict[str, int] = field(default_factory=dict)
    #: a window join's dropped rows by side name, then reason (``JoinConfig.side_names``)
    sides: dict[str, dict[str, int]] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "rows_in": self.rows_in,
            "rows_emitted": self.rows_emitted,
            "late_rows": self.late_rows,
            "dropped": dict(self.dropped),
        }
        if self.sides:
            out["sides"] = {name: {"dropped": dict(d)} for name, d in self.sides.items()}
        return out


def as_list(column: Any) -> list:
    """A column (NumPy array, Arrow-like or sequence) as a Python list."""
    tolist = getattr(column, "tolist", None)
    return tolist() if tolist is not None else list(column)
