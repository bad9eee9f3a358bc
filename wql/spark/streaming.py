"""The streaming host: a query's ``WindowOperator`` as a Spark Structured Streaming operator.

A streaming DataFrame passed to :meth:`wql.api.Compiled.apply` lands here
(:func:`run_streaming`) when the planner chose the operator engine for a
stream (today always: docs/native.md, "Streaming"). Operator queries run as::

    source -> withWatermark(ts, delay + 1 ms) -> WHERE (a flag) and key/value expressions
           -> bucket of key -> mapInArrow(pack_buckets): one row per bucket and partition
           -> groupBy(bucket).transformWithStateInPandas(BucketProcessor, timeMode)
              (a keyless query: groupBy(constant), WindowProcessor, rows unpacked)
           -> ONE tagged stream (R = result rows, L = late rows, C = drop counters)
           -> result DataFrame (HAVING + SELECT) and late DataFrame (late-output columns)

The contract (docs/streaming.md has the long form and the measurements):

* **The streaming watermark** is Spark's global watermark of the
  micro-batch, shifted to WQL's convention: ``W = max(event time of every
  earlier micro-batch) - delay - 1 ms`` (Flink's BoundedOutOfOrderness after
  the last row of the previous batch). Every row of a micro-batch sees the
  same ``W``; batch replay gives every row the watermark left by the rows
  before it. Spark's watermark starts at 0 and never goes below it, so a
  Spark watermark of 0 reads as "no watermark yet" (``MIN_TIME``).
* **Every row is counted as batch counts it.** WHERE is a flag column, not a
  filter: the rows it rejects reach the processor without their keys and
  values (NULL, 0 for numbers), which counts them (``rows_filtered``) and
  runs the others.
* **Nothing is dropped by Spark.** Spark's EventTime mode would drop rows
  behind its watermark before the processor sees them; the host projects
  the event time to a plain BIGINT column after ``withWatermark``, so the
  operator's input carries no watermark attribute and every row reaches the
  runtime, which applies WQL's own lateness rule (``ts + lateness <= W``)
  and sends late rows to the late output or counts them.
* **Order of a micro-batch, per key**: the watermark rises to ``W`` first
  (every timer ``<= W`` of the key fires, in time order), then the key's
  rows of the batch are processed in event-time order (ties in the order
  Spark delivers them). Keys without rows are woken by Spark timers.
* **State** per key (in its key bucket's ``MapState``, :class:`BucketProcessor`;
  a keyless query's in one ``ValueState``): the runtime's
  ``snapshot_key`` bytes (window contents or accumulators, trigger state,
  pane counts, merging set, the key's (window, time) timer index) plus the
  clocks the key last saw. Spark timers are registered at the distinct
  times the runtime's timers are due; Spark fires a timer when its time is
  *strictly below* the batch's watermark, so a runtime timer at ``T`` is
  registered at ``max(T - 1, W)``: due when ``W >= T``, and a timer
  already at or below ``W`` waits for the next rise (Flink's rule).
* **Time modes**: event-time queries use ``EventTime``, processing-time
  queries ``ProcessingTime`` (the processing clock is the micro-batch's
  timestamp), count and global windows without time triggers ``None``. A
  query that uses both clocks is refused (Spark gives a stateful operator
  one timer domain).
* **End of input** (``run_streaming(..., end=...)``, what ``wql run --stream
  --drain`` uses): a stream has none, so a second source, the *end* stream,
  is unioned with the input before ``withWatermark``; a row arriving there
  carries Spark's largest timestamp (:data:`END_MS`) and is filtered out
  before the operator, so Spark's watermark jumps past every window. The
  processor reads that watermark as ``MAX_TIME``: every key with state is
  woken by a Spark timer (a key whose state outlives its runtime timers,
  e.g. a count window's, keeps one at the end watermark), fires what
  ``end_of_input()`` fires, counts the rows that wait in windows that never
  fire, and clears its state. Queries without event-time timers run in
  ``EventTime`` mode for it (on a synthetic watermark column when the source
  has no event time); processing-time queries cannot be drained.
* **Idle sources** (``IDLE AFTER``): the end stream also takes heartbeat
  rows (:data:`HEARTBEAT_COLUMN`), markers at the event time the idle rule
  extrapolates, written by the driver's idle monitor (:mod:`wql.spark.idle`)
  from the per-micro-batch metrics :data:`IDLE_METRICS` observed here; they
  move Spark's watermark and are filtered out like the end marker.
* **One output**: Spark's stateful operator has a single output, so result
  rows, late rows and drop counters come out of one tagged stream
  (:attr:`StreamRun.tagged`) and are split by ``__wql_kind``. Each split
  is an ordinary streaming DataFrame; starting both as two streaming queries
  runs the operator twice with independent checkpoints, whose micro-batch
  boundaries may differ. ``wql run --stream`` (:mod:`wql.spark.stream_sinks`)
  therefore writes the tagged stream once and fans it out exactly once.
"""

from __future__ import annotations

import pickle
import zlib
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, replace
from functools import reduce
from typing import Any, Self

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql.streaming.stateful_processor import (
    ExpiredTimerInfo,
    StatefulProcessor,
    StatefulProcessorHandle,
    TimerValues,
)

from wql.compiler import plan as P
from wql.compiler import types as T
from wql.compiler.backends.escaping import sql_identifier
from wql.compiler.backends.operator import OperatorPlan, build_stage
from wql.compiler.types import WqlType
from wql.errors import ErrorCode, WqlUnsupportedError
from wql.runtime.assigners import DROP_MISSING_TIMESTAMP
from wql.runtime.config import NAN_KEY, nan_keys
from wql.runtime.watermarks import watermark_lag
from wql.runtime.windows import MAX_TIME, MIN_TIME

# The tagged-stream layout both hosts share: one schema, one post-aggregation
# projection, one late output (docs/architecture.md).
from wql.spark import layout as L
from wql.spark.deferred import deferred

__all__ = [
    "BUCKET_STATE_SCHEMA",
    "DUE_NAME",
    "END_MS",
    "HEARTBEAT_COLUMN",
    "IDLE_METRICS",
    "KEYS_NAME",
    "KEY_BUCKETS",
    "KEY_BUCKETS_CONF",
    "KEY_CHUNK",
    "KEY_CHUNK_CONF",
    "KEY_SCHEMA",
    "PACKED_SCHEMA",
    "REASON_AFTER_END",
    "STATE_NAME",
    "STATE_SCHEMA",
    "ProcessorLayout",
    "ProcessorState",
    "StreamQueryRun",
    "StreamRun",
    "BucketProcessor",
    "WindowProcessor",
    "bucket_column",
    "pack_buckets",
    "call_clocks",
    "end_watermark",
    "float_inputs",
    "group_value",
    "grouped_by",
    "key_buckets",
    "key_chunk",
    "input_frame",
    "nan_columns",
    "nan_names",
    "nan_rows",
    "output_frame",
    "processor_layout",
    "run_streaming",
    "spark_watermark_delay_ms",
    "time_mode",
    "unpack_buckets",
    "with_nans",
]

#: The name of the per-key Spark state (Spark's state reader reads it by that name).
STATE_NAME = "wql_key"

#: Per-key Spark state: the runtime's per-key snapshot, the clocks the key last saw,
#: the Spark timers the processor registered for it (kept here so that no call needs
#: a listTimers() round trip to the JVM) and the rows it took in since its last
#: counters row (a counters row rides on a call's output, so a call that only adds
#: rows to windows costs no output frame).
STATE_SCHEMA = (
    "snapshot BINARY, watermark LONG, processing_time LONG, spark_timers ARRAY<LONG>, "
    "pending_rows LONG"
)

#: The event time of an end-of-input marker, in ms: Spark's largest timestamp
#: (``Long.MAX_VALUE`` microseconds), later than any row a source can hold.
END_MS = (2**63 - 1) // 1000

#: The end stream's column that makes a marker row an idle *heartbeat*: its event time
#: in ms (NULL: the end of input). Only the end stream of a query over an idle source has it.
HEARTBEAT_COLUMN = "heartbeat_ms"

#: The name of the per-micro-batch metrics (``DataFrame.observe``) of a query over an
#: idle source: ``rows`` (source rows with an event time) and ``max_ms`` (their
#: largest event time), both without marker rows (:mod:`wql.spark.idle` reads them).
IDLE_METRICS = "wql_idle"

#: Rows that reach a drained stream (files added while it was drained): counted, never run.
REASON_AFTER_END = "after the end of input"

#: The most output rows the processor hands to Spark in one frame (WindowProcessor._emit).
_FRAME_ROWS = 10_000

_KEEP = "__wql_keep"
_TS = "__wql_ts"
_ALL = "__wql_all"  # the constant grouping column of a windowAll query
_END = "__wql_end"  # true on a marker row (the end of input, an idle heartbeat)
_END_TS = "__wql_end_ts"  # the watermark column of a drainable query without event time


def spark_watermark_delay_ms(query: P.OperatorStage) -> int:
    """The ``withWatermark`` delay that makes Spark's watermark equal WQL's.

    Spark: ``max event time - delay``; WQL (Flink): ``max event time - delay - 1``.
    """
    et = query.source.event_time
    return 0 if et is None else watermark_lag(et.delay_ms)


def end_watermark(query: P.OperatorStage) -> int:
    """Spark's watermark once a drained stream's end marker (at :data:`END_MS`) is read:
    the processor reads it as the end of input."""
    return END_MS - spark_watermark_delay_ms(query)


def time_mode(op: OperatorPlan, *, drainable: bool = False) -> str:
    """The ``transformWithState`` time mode: ``EventTime``, ``ProcessingTime`` or ``None``.

    ``drainable``: the query has an end of input, which reaches its keys through
    event-time timers, so a query without time (``None``) runs in ``EventTime``.
    Raises a positioned :class:`WqlUnsupportedError` for what a stream cannot
    run: both clocks.
    """
    if op.mixes_time_domains:
        q = op.query
        raise WqlUnsupportedError(
            f"query {q.name!r} uses both event time and processing time; a Spark streaming "
            "operator has timers in one time domain only, so it cannot run as a stream",
            op.trigger_span,
            hint="run it in batch (replay with a processing_time column), or use one clock",
            code=ErrorCode.MIXED_CLOCKS,
        )
    if op.uses_event_time:
        return "EventTime"
    if op.uses_processing_time:
        return "ProcessingTime"
    return "EventTime" if drainable else "None"


@dataclass(kw_only=True)
class StreamRun:
    """What a stage's stream processor gives: one kind per stage (the subclasses),
    each with what the sinks need (:func:`wql.spark.stream_sinks.start_streams`).

    ``tagged`` is the processor's single output (``__wql_kind`` R/L/C);
    ``result`` and ``late`` are its splits with the stage's output and
    late-output schemas (``late`` is ``None`` without ``LATE DATA TO``).
    ``counters`` (a split too) holds the runtime's counters as JSON under
    ``__wql_counters``, one row with a key's output or when its state ends
    (:func:`wql.spark.layout.sum_counters` adds them up).
    ``source`` is the input it was built on; ``drainable``: it has an end
    stream (:meth:`with_end`). ``idle_ms``: the source's ``IDLE AFTER``;
    ``heartbeats``: its end stream takes idle heartbeats
    (:mod:`wql.spark.idle` writes them), without which the idle rule cannot
    apply (docs/streaming.md, "Idle sources"). ``buckets``: the key bucket
    count of a stage grouped by key bucket (:class:`BucketProcessor`), else None.
    """

    tagged: DataFrame
    result: DataFrame
    late: DataFrame | None
    counters: DataFrame
    time_mode: str
    source: DataFrame
    drainable: bool = False
    idle_ms: int | None = None
    heartbeats: bool = False
    buckets: int | None = None

    def release(self) -> None:
        """Nothing is cached for a stream (the batch host's ``release`` counterpart)."""

    def read(self, tagged: DataFrame) -> tuple[DataFrame, DataFrame | None]:
        """The result and the late output (None without one) of a tagged stream of this
        run's layout: what a sink that fans the tagged stream out reads."""
        raise NotImplementedError

    def with_end(self, end: DataFrame) -> StreamRun:
        """The same stage over the same source with the end stream ``end`` (a first row
        there is the end of input; see :func:`run_streaming`)."""
        raise NotImplementedError


@dataclass(kw_only=True)
class StreamQueryRun(StreamRun):
    """One operator stage (a window aggregate or rank) over its streaming source."""

    query: P.OperatorStage
    operator: OperatorPlan

    @classmethod
    def of(cls, query: P.OperatorStage, op: OperatorPlan, tagged: DataFrame, **fields: Any) -> Self:
        """The run of the processor output ``tagged`` of ``query`` (``op``: its operator
        plan), with its splits; ``fields``: the other fields."""
        late = L.late_rows(op, tagged) if query.late_output is not None else None
        return cls(
            query=query,
            operator=op,
            tagged=tagged,
            result=L.results(query, op, tagged),
            late=late,
            counters=L.counters_of(tagged),
            **fields,
        )

    def read(self, tagged: DataFrame) -> tuple[DataFrame, DataFrame | None]:
        late = L.late_rows(self.operator, tagged) if self.query.late_output is not None else None
        return L.results(self.query, self.operator, tagged), late

    def with_end(self, end: DataFrame) -> StreamRun:
        return run_streaming(self.query, self.source, end=end, operator=self.operator)


def run_streaming(
    query: P.OperatorStage,
    source: DataFrame,
    *,
    end: DataFrame | None = None,
    operator: OperatorPlan | None = None,
) -> StreamQueryRun:
    """Build the streaming operator pipeline of ``query`` over the streaming ``source``.

    ``source`` has the source relation's columns (names as declared). ``end``:
    a streaming DataFrame whose first row is the end of input (see the module
    doc); ignored for a processing-time query, which cannot end. With a
    :data:`HEARTBEAT_COLUMN`, a row of ``end`` that has one is an idle
    heartbeat: a marker at that event time (docs/streaming.md, "Idle
    sources"). Nothing runs until the caller starts a streaming query on one
    of the outputs. ``operator``: ``query``'s operator plan when it was built already.
    """
    op = operator or build_stage(query)
    staged, key_cols, mode, drainable, idle_ms, heartbeats = stream_input(
        query, op, source, end, flag_where=True
    )
    out_schema, _ = L.tagged_layout(query, op)
    end_wm = end_watermark(query) if drainable else None
    layout = processor_layout(query, op, mode, end_watermark=end_wm)
    buckets = None
    if key_cols:
        # Spark groups by the key's bucket: one call per bucket and micro-batch, each
        # key's state in the bucket's MapState (docs/streaming.md, "Key buckets"); a
        # bucket's rows reach it packed, a few Arrow values per input partition
        spark = source.sparkSession
        buckets = key_buckets(spark)
        chunk = key_chunk(spark)
        staged = staged.select("*", bucket_column(key_cols, buckets)).mapInArrow(
            pack_buckets, PACKED_SCHEMA
        )
        zone = spark.conf.get("spark.sql.session.timeZone")
        processor: WindowProcessor = BucketProcessor(
            replace(layout, packed=True, timezone=zone, buckets=buckets, chunk_keys=chunk)
        )
        grouping = [_BUCKET]
    else:
        processor, grouping = WindowProcessor(layout), [_ALL]
    tagged = staged.groupBy(*grouping).transformWithStateInPandas(
        statefulProcessor=deferred(processor),
        outputStructType=out_schema,
        outputMode="Append",
        timeMode=mode,
    )
    return StreamQueryRun.of(
        query,
        op,
        tagged,
        time_mode=mode,
        source=source,
        drainable=drainable,
        idle_ms=idle_ms,
        heartbeats=heartbeats,
        buckets=buckets,
    )


def watermarked(
    source_ref: P.SourceRef,
    source: DataFrame,
    end: DataFrame | None,
    delay_ms: int,
    condition: P.Expr | None = None,
) -> tuple[DataFrame, int | None, bool]:
    """``source`` with Spark's watermark (``delay_ms``), its end stream's markers when
    ``end`` is given (filtered out again after the watermark), and ``condition`` (a
    WHERE) applied after the watermark: ``(rows, idle_ms, heartbeats)``."""
    et = source_ref.event_time
    df = source
    watermark = et.column if et is not None else None
    keep: list[Column] = []
    if end is not None:
        df = _with_end(source, end, watermark)
        watermark = watermark or _END_TS
        keep.append(~F.col(_END))
    if watermark is not None:
        # delay + 1 ms: Spark's watermark is then exactly WQL's (see the module doc)
        df = df.withWatermark(watermark, f"{delay_ms} milliseconds")
    idle_ms = et.idle_ms if et is not None else None
    heartbeats = end is not None and HEARTBEAT_COLUMN in end.columns
    if idle_ms is not None and et is not None:
        # what the idle monitor needs of each micro-batch: did source rows arrive,
        # and their largest event time (a marker's would be an extrapolation)
        source_ts = F.unix_millis(F.col(sql_identifier(et.column)).cast("timestamp"))
        if heartbeats:
            source_ts = F.when(~F.col(_END), source_ts)
        df = df.observe(
            IDLE_METRICS,
            F.count(source_ts).alias("rows"),
            F.max(source_ts).alias("max_ms"),
        )
    if condition is not None:
        keep.append(F.expr(condition.sql))
    if keep:
        # WHERE (and the end markers' filter) after the watermark: a row WHERE rejects
        # still advances it, as in batch replay. Spark's optimizer moves a deterministic
        # predicate that does not read the event-time column below the watermark
        # (PushPredicateThroughNonJoin), and splits a guarded predicate into conjuncts
        # first (and folds `rand() >= 0`). So the result is a column computed next to an
        # always-true non-deterministic test: a filter on a non-deterministic
        # projection stays above the watermark (docs/streaming.md, "The streaming
        # watermark"). The marker test comes first: Spark's AND does not evaluate its
        # right side when the left is false, so WHERE never sees a marker row.
        kept = F.when(F.rand(0) * 0 == 0, reduce(lambda a, b: a & b, keep))
        df = df.withColumn(_KEEP, kept).where(F.col(_KEEP)).drop(_KEEP)
    return df, idle_ms, heartbeats


def stream_input(
    query: P.OperatorStage,
    op: OperatorPlan,
    source: DataFrame,
    end: DataFrame | None,
    *,
    event_time_mode: bool = False,
    flag_where: bool = False,
) -> tuple[DataFrame, list[str], str, bool, int | None, bool]:
    """The rows ``op``'s processor takes: ``(staged, key columns, time mode, drainable,
    idle_ms, heartbeats)`` (see :func:`run_streaming`; the pipeline host uses it for its
    first stage). ``event_time_mode``: run in ``EventTime`` whatever ``op`` uses.

    ``flag_where``: the rows ``WHERE`` rejects reach the processor too, which counts
    them (``rows_filtered``, as batch does); the staged :data:`_KEEP` column after the
    event time says which (a rejected row computes no key or value, as after a filter).
    Without it Spark drops them (what a pipeline's first stage needs: its counters are
    its own query's stream's)."""
    drainable = end is not None and not op.uses_processing_time
    mode = "EventTime" if event_time_mode else time_mode(op, drainable=drainable)
    et = query.source.event_time
    flagged = flag_where and query.filter is not None
    df, idle_ms, heartbeats = watermarked(
        query.source,
        source,
        end if drainable else None,
        spark_watermark_delay_ms(query),
        None if flagged else query.filter,
    )
    key_cols = L.key_columns(len(op.keys))
    value_cols = L.value_columns(len(op.values))
    ts_col = (
        # a plain BIGINT: the operator's input then has no watermark attribute,
        # so Spark drops no late row; the runtime applies WQL's lateness rule
        F.unix_millis(F.col(sql_identifier(et.column)).cast("timestamp")).alias(_TS, metadata={})
        if et is not None
        else F.lit(None).cast("bigint").alias(_TS)
    )
    keep: Column | None = None
    if flagged:
        assert query.filter is not None
        # a projection, not a filter: nothing for Spark to move below the watermark
        keep = F.coalesce(F.expr(query.filter.sql), F.lit(False))

    def computed(sql: str, t: WqlType) -> Column:
        if keep is None:
            return F.expr(sql)
        # A row WHERE rejects computes nothing, as after a filter. A number is 0 there,
        # not NULL: Spark hands the rows over as pandas, where one NULL makes a whole
        # batch's integer column float (the kept rows' keys and values too) and a NaN
        # key a group of its own per row.
        value = F.when(keep, F.expr(sql))
        return value.otherwise(F.lit(0).cast(T.to_spark(t))) if _is_number(t) else value

    # Every staged column gets empty metadata: a plain reference to the event-time
    # column (a late-output value, a key) would otherwise keep Spark's watermark
    # marker, and Spark would drop rows behind the previous batch's watermark.
    inputs = [computed(k.expr.sql, k.type) for k in op.keys]
    inputs += [computed(v.sql, v.type) for v in op.values]
    staged = df.select(
        *[c.alias(n, metadata={}) for c, n in zip(inputs, key_cols + value_cols, strict=True)],
        ts_col,
        *([] if keep is None else [keep.alias(_KEEP, metadata={})]),
        *([] if key_cols else [F.lit(0).alias(_ALL)]),
        *nan_columns(inputs, float_inputs(op)),
    )
    return staged, key_cols, mode, drainable, idle_ms, heartbeats


#: The staged columns of a row's NaN floats, after every other staged column: bit
#: ``b % 62`` of column ``b // 62`` is set when the ``b``-th FLOAT/DOUBLE key or input
#: (:func:`float_inputs`) is NaN. Spark hands rows to a processor as pandas, where a
#: NULL float is NaN too; these tell the two apart (:func:`nan_rows`).
_NANS = "__wql_nans"
_NAN_BITS = 62


def group_value(column: Column, spark_type: str) -> Column:
    """What a stateful operator groups by for ``column`` of Spark type ``spark_type``
    (``DataFrame.dtypes``' names): a FLOAT or DOUBLE as its text (-0.0 as 0.0), else
    the column. PySpark's worker cuts a partition's rows into calls by comparing their
    key tuples, where a NaN (and a NULL float, NaN in pandas) is unequal to itself: a
    float grouping column would make each such row a call of its own."""
    if spark_type in ("float", "double"):
        return (column + F.lit(0.0)).cast("string")
    return column


def grouped_by(df: DataFrame, columns: list[str]) -> tuple[DataFrame, list[str]]:
    """``df`` with what it is grouped by for ``columns`` (:func:`group_value`) and those
    columns' names: a float one is a column of its own, after ``df``'s."""
    types = dict(df.dtypes)
    extra: list[Column] = []
    names: list[str] = []
    for j, c in enumerate(columns):
        value = group_value(F.col(c), types[c])
        if types[c] in ("float", "double"):
            names.append(f"{_GROUP_TEXT}{j}")
            extra.append(value.alias(names[-1]))
        else:
            names.append(c)
    return (df.select("*", *extra) if extra else df), names


_GROUP_TEXT = "__wql_group_text"


def float_inputs(op: OperatorPlan) -> tuple[int, ...]:
    """The staged positions (keys, then inputs) of ``op``'s FLOAT and DOUBLE ones."""
    types = [k.type for k in op.keys] + [v.type for v in op.values]
    return tuple(i for i, t in enumerate(types) if t.kind in ("FLOAT", "DOUBLE"))


def nan_columns(inputs: list[Column], floats: tuple[int, ...]) -> list[Column]:
    """The :data:`_NANS` columns of the staged ``inputs`` whose positions are ``floats``."""
    bits = [
        F.when(F.isnan(inputs[i]), F.lit(1 << (b % _NAN_BITS))).otherwise(F.lit(0)).cast("bigint")
        for b, i in enumerate(floats)
    ]
    chunks = [bits[at : at + _NAN_BITS] for at in range(0, len(bits), _NAN_BITS)]
    return [
        reduce(Column.bitwiseOR, chunk).alias(name, metadata={})
        for name, chunk in zip(nan_names(len(chunks)), chunks, strict=True)
    ]


def nan_names(n: int) -> list[str]:
    """The names of the first ``n`` :data:`_NANS` columns."""
    return [f"{_NANS}{j}" for j in range(n)]


def nan_rows(frame: pd.DataFrame, at: int, b: int) -> np.ndarray | None:
    """Which rows of ``frame`` (its :data:`_NANS` columns from position ``at``) hold a NaN,
    not a NULL, in their ``b``-th float input; None when none does."""
    bits = frame.iloc[:, at + b // _NAN_BITS].to_numpy(dtype=np.int64)
    rows = ((bits >> (b % _NAN_BITS)) & 1).astype(bool)
    return rows if rows.any() else None


def with_nans(arr: pa.Array, rows: np.ndarray | None) -> pa.Array:
    """``arr`` (read from pandas, its NaNs NULL) with NaN again at ``rows``."""
    if rows is None:
        return arr
    return pc.if_else(pa.array(rows), pa.scalar(float("nan"), arr.type), arr)


def _is_number(t: WqlType) -> bool:
    """Types pandas holds as NumPy numbers, which a NULL turns into float NaN."""
    return t.is_integral or t.kind in ("FLOAT", "DOUBLE")


def _with_end(source: DataFrame, end: DataFrame, event_time: str | None) -> DataFrame:
    """``source`` and, per row of ``end``, a marker row at :data:`END_MS` (column ``_END``).

    A row of ``end`` with a :data:`HEARTBEAT_COLUMN` value is an idle
    heartbeat: its marker has that event time instead. The marker's other
    columns are NULL. Without event time, both get a watermark column of
    their own (epoch 0 for every source row: Spark's watermark stays at
    "none yet" until a marker arrives).
    """
    at_end = F.timestamp_micros(F.lit(END_MS * 1000))
    if event_time is not None and HEARTBEAT_COLUMN in end.columns:
        at_end = F.coalesce(F.timestamp_millis(F.col(HEARTBEAT_COLUMN)), at_end)
    wanted = (event_time or "").lower()
    markers = end.select(
        *[
            (at_end if f.name.lower() == wanted else F.lit(None)).cast(f.dataType).alias(f.name)
            for f in source.schema.fields
        ],
        F.lit(True).alias(_END),
    )
    rows = source.withColumn(_END, F.lit(False))
    if event_time is None:
        rows = rows.withColumn(_END_TS, F.timestamp_millis(F.lit(0)))
        markers = markers.withColumn(_END_TS, at_end)
    return rows.unionByName(markers)


# --------------------------------------------------------------------------- the processor


#: How many key buckets a keyed query's stream is grouped into by default (Flink's key
#: groups, its maximum parallelism): Spark's grouping key is ``pmod(xxhash64(keys), n)``.
#: Spark's Python side pays per bucket and micro-batch (docs/benchmarks.md, "Fewer key
#: buckets"), and no more tasks than buckets do a query's work: the session conf
#: :data:`KEY_BUCKETS_CONF` sets another count. Every bucket's saved state records it; a
#: checkpoint written with another count is refused (:class:`BucketProcessor`), since
#: its keys would sit in the wrong buckets.
KEY_BUCKETS = 16

#: The session conf of a keyed stream's bucket count (:data:`KEY_BUCKETS` without it).
KEY_BUCKETS_CONF = "spark.wql.stream.keyBuckets"

#: The most key buckets :data:`KEY_BUCKETS_CONF` may ask for.
MAX_KEY_BUCKETS = 1 << 15

#: How many keys a key bucket keeps per state entry by default (:class:`_KeyStore`'s
#: chunks; a bucket of many keys keeps one entry per key): a micro-batch that runs most
#: of a bucket's keys writes about one entry per eight keys (docs/benchmarks.md, "Key
#: chunks").
KEY_CHUNK = 8

#: The session conf of how many keys a key bucket keeps per state entry
#: (:data:`KEY_CHUNK` without it; 0: one entry per key).
KEY_CHUNK_CONF = "spark.wql.stream.keyChunk"

#: The largest chunk :data:`KEY_CHUNK_CONF` may ask for.
MAX_KEY_CHUNK = 255


@dataclass(frozen=True)
class ProcessorLayout:
    """What the processor needs: runtime config, input and output (pickled to the workers)."""

    config: Any
    n_keys: int
    n_values: int
    tagged: L.TaggedLayout
    mode: str
    #: the source has event time: rows carry it (ordering, TIME evictor,
    #: FIRST/LAST_VALUE) whatever the time mode, as in batch replay
    has_event_time: bool
    #: Spark's watermark once the end of input arrived (``None``: the stream has no end)
    end_watermark: int | None = None
    #: the rows carry WHERE's result after the event time (``stream_input(flag_where=True)``)
    where_flag: bool = False
    #: a bucket's rows arrive packed (:func:`pack_buckets`), not one Spark row each
    packed: bool = False
    #: the session time zone Spark converts timestamps to pandas in (packed rows are
    #: converted by the processor, as Spark converts unpacked ones)
    timezone: str | None = None
    #: the staged positions of the FLOAT/DOUBLE keys and inputs (:func:`float_inputs`)
    floats: tuple[int, ...] = ()
    #: how many key buckets the rows are grouped into (:class:`BucketProcessor`)
    buckets: int = KEY_BUCKETS
    #: a bucket's keys per state entry (:data:`KEY_CHUNK_CONF`; 0: one per key, the
    #: layout a processor built without a session keeps)
    chunk_keys: int = 0

    @property
    def nans_at(self) -> int:
        """The position of the first :data:`_NANS` column: after the keys, inputs, event
        time, WHERE's flag and a keyless query's constant."""
        return self.n_keys + self.n_values + 1 + self.where_flag + (self.n_keys == 0)

    def nan_rows(self, frame: pd.DataFrame, position: int) -> np.ndarray | None:
        """The rows whose staged key or input ``position`` is NaN (not NULL), or None."""
        if position not in self.floats:
            return None
        return nan_rows(frame, self.nans_at, self.floats.index(position))


def processor_layout(
    query: P.OperatorStage, op: OperatorPlan, mode: str, *, end_watermark: int | None = None
) -> ProcessorLayout:
    """The :class:`WindowProcessor` configuration of ``query`` in time mode ``mode``, its
    rows staged by ``stream_input(flag_where=True)``."""
    _, tagged = L.tagged_layout(query, op)
    has_event_time = query.source.event_time is not None
    return ProcessorLayout(
        op.config,
        len(op.keys),
        len(op.values),
        tagged,
        mode,
        has_event_time,
        end_watermark,
        query.filter is not None,
        floats=float_inputs(op),
    )


class ProcessorState:
    """A processor's one ``ValueState`` in :data:`STATE_SCHEMA`'s layout, per call.

    Every processor (one key's operator, a pipeline's or a join's stages for
    all keys) keeps ``(snapshot, watermark, processing_time, spark_timers,
    pending_rows)``; :meth:`load` reads it at the start of a call and
    :meth:`save` writes or clears it at the end, with the *pending-rows
    rule*: a call that only took rows in (no output, nothing dropped) emits
    no counters row; its ``rows_in`` wait in the state and ride on the next
    call with output (a counters row alone would cost an output frame).
    """

    def __init__(self, handle: StatefulProcessorHandle, end_watermark: int | None) -> None:
        self.handle = handle
        self.value = handle.getValueState(STATE_NAME, STATE_SCHEMA)
        #: the Spark timer that wakes a state with no runtime timer at the end of input
        self.end_timer = None if end_watermark is None else end_watermark - 1
        #: the call found a saved state (so an ended one must clear it)
        self.found = False
        #: the Spark timers registered for the state (no listTimers() round trip)
        self.spark_timers: set[int] = set()
        #: rows taken in by earlier calls that emitted no counters row
        self.pending_rows = 0

    def load(self) -> tuple[bytes, int, int] | None:
        """The saved ``(snapshot, watermark, processing_time)``, None when there is none;
        the Spark timers and pending rows go to :attr:`spark_timers`, :attr:`pending_rows`."""
        # get() alone (None when absent): every state call is a round trip to the JVM
        saved = self.value.get()
        self.found = saved is not None
        self.spark_timers = set()
        self.pending_rows = 0
        if saved is None:
            return None
        blob, watermark, processing_time, spark_timers, pending = saved
        self.spark_timers = {int(t) for t in spark_timers or ()}
        self.pending_rows = int(pending or 0)
        return bytes(blob), int(watermark), int(processing_time)

    def save(
        self,
        counters: dict[str, Any] | None,
        *,
        keep: bool,
        output: bool,
        snapshot: Callable[[], bytes],
        watermark: int,
        processing_time: int,
        spark_timers: set[int],
    ) -> dict[str, Any] | None:
        """Write the state (``keep``) or clear it; returns the counters the call emits
        (``counters`` moved by it; ``output``: it emits result or late rows)."""
        pending = 0
        if (
            counters is not None
            and keep
            and not (output or counters["dropped"] or counters.get("rows_filtered"))
        ):
            # only rows taken in: they wait in the state for a call with output
            pending, counters = counters["rows_in"], None
        if keep:
            self.value.update(
                (snapshot(), watermark, processing_time, sorted(spark_timers), pending)
            )
        elif self.found:
            self.value.clear()
        return counters

    def sync_timers(self, due: list[int], now: int, keep: bool) -> set[int]:
        """Spark timers at the distinct times the state's runtime timers become due.

        Spark fires a timer whose time is strictly below the batch's clock;
        ``due`` are the clock readings at which the key's runtime timers fire
        (``T`` for an event-time timer at ``T``, ``T + 1`` for a processing-time
        one); a timer due at ``T`` needs the clock to reach ``T``, and one
        at or below the current clock waits for the next rise: Spark time
        ``max(T - 1, now)``. Timers below ``now`` are Spark's business (it is
        firing them in this batch and deletes them after), a stale one at
        ``now`` only wakes the key once; later stale ones are deleted.
        A drainable stream's timers stop at the end timer (which the end of
        input passes), and a key that keeps state without any timer gets the
        end timer, so that the end of input reaches it. At the end of input
        (``now`` is ``MAX_TIME``) every timer is past. Returns the key's Spark
        timers from ``now`` on (kept in its state).
        """
        if now == MAX_TIME:
            return set()
        wanted = {max(t - 1, now) for t in due if t < MAX_TIME}
        end = self.end_timer
        if end is not None:
            wanted = {min(t, end) for t in wanted}
            if keep and not wanted:
                wanted = {end}
        existing = {t for t in self.spark_timers if t >= now}
        for t in existing - wanted:
            if t > now:
                self.handle.deleteTimer(t)
        for t in wanted - existing:
            self.handle.registerTimer(t)
        return wanted | (existing & {now})


def input_frame(rows: Iterator[pd.DataFrame]) -> pd.DataFrame | None:
    """The rows of one ``handleInputRows`` call as one frame (``None``: no rows). Spark
    hands a grouping key's rows over in Arrow batches, some of them empty."""
    frames = [f for f in rows if len(f)]
    return _one_frame(frames) if frames else None


def _one_frame(frames: list[pd.DataFrame]) -> pd.DataFrame:
    return pd.concat(frames, ignore_index=True) if len(frames) > 1 else frames[0]


def call_clocks(tv: TimerValues, mode: str, end_watermark: int | None) -> tuple[int, int, int]:
    """A call's clocks in the runtime's terms: ``(watermark, processing time, Spark's
    watermark)``; ``MAX_TIME``: the end of input (``end_watermark``: Spark's watermark
    once the end marker is read). A clock the time ``mode`` does not keep is ``MIN_TIME``
    (Spark's watermark ``-1`` then)."""
    wm = MIN_TIME
    pt = MIN_TIME
    spark_wm = -1
    if mode == "EventTime":
        spark_wm = int(tv.getCurrentWatermarkInMs())
        if end_watermark is not None and spark_wm >= end_watermark:
            wm = MAX_TIME
        else:
            # Spark's watermark starts at 0 and cannot go below it: 0 = none yet
            wm = spark_wm if spark_wm > 0 else MIN_TIME
    elif mode == "ProcessingTime":
        pt = int(tv.getCurrentProcessingTimeInMs())
    return wm, pt, spark_wm


class WindowProcessor(StatefulProcessor):
    """Flink's WindowOperator for one key at a time, its state in Spark's state store.

    ``handleInputRows(key, rows, timerValues)``: restore the key, raise its
    clock to the micro-batch's (firing due timers), process the batch's rows
    of the key in event-time order, emit, save, re-sync Spark timers.
    ``handleExpiredTimer(key, timerValues, expiredTimerInfo)``: the same
    without rows. Both return pandas frames of the tagged layout: the key's
    result and late rows, and a counters row when its counters moved; in
    ``EventTime`` mode the frames of a task's calls with rows go to Spark as
    one at its first timer call (:meth:`_emit`).

    At the end of input (the watermark of an end marker) a call restores the
    key into a fresh operator, runs ``end_of_input()`` (every event-time
    timer fires; rows waiting in windows that never fire are counted, as a
    batch partition counts them) and clears the key's state; rows that still
    arrive are counted under :data:`REASON_AFTER_END`.
    """

    def __init__(self, layout: ProcessorLayout) -> None:
        self.layout = layout

    def init(self, handle: StatefulProcessorHandle) -> None:
        from wql.runtime.operator_factory import make_operator

        self.handle = handle
        self.state = ProcessorState(handle, self.layout.end_watermark)
        self._make = make_operator
        self.op = make_operator(self.layout.config)
        #: output of this task's keys not yet handed to Spark (see _emit)
        self._buffer: list[pa.RecordBatch] = []
        self._buffered_rows = 0
        #: the Spark timer that flushes the buffer in this task is registered
        self._flush_timer = False
        #: Spark's event-time watermark of the call (``None``: another time mode)
        self._spark_clock: int | None = None

    def handleInputRows(
        self, key: Any, rows: Iterator[pd.DataFrame], timerValues: TimerValues
    ) -> Iterator[pd.DataFrame]:
        frame = input_frame(rows)
        wm, pt = self._clocks(timerValues)
        k = self._key(key)
        before = self._begin(wm)
        self._restore(k, wm, pt)
        after_end = 0
        rejected: dict[str, int] = {}
        if frame is not None:
            if wm == MAX_TIME:
                after_end = len(frame)
            else:
                if self.layout.where_flag:
                    frame, rejected = self._where(frame)
                if len(frame):
                    self._process(k, frame)
        yield from self._finish(k, wm, pt, before, after_end, rejected, rows=True)

    def handleExpiredTimer(
        self, key: Any, timerValues: TimerValues, expiredTimerInfo: ExpiredTimerInfo
    ) -> Iterator[pd.DataFrame]:
        # the keys' buffered output first: it precedes every timer's, as it would unbuffered;
        # the task's calls with rows are over, a later micro-batch needs its own flush timer
        yield from self._flush()
        self._flush_timer = False
        # the flush timer's key goes on as for any timer of its own: a call for a
        # key whose clock did not move fires nothing, emits nothing
        k = self._key(key)
        wm, pt = self._clocks(timerValues)
        before = self._begin(wm)
        self._restore(k, wm, pt)
        yield from self._finish(k, wm, pt, before)

    def close(self) -> None:
        if self._buffer:
            # every buffered frame has a flush timer below the watermark: this is a bug
            raise RuntimeError(
                f"WQL's streaming processor ends a task with {self._buffered_rows} output "
                "rows that no timer call handed to Spark"
            )

    # -- steps ----------------------------------------------------------------

    def _clocks(self, tv: TimerValues) -> tuple[int, int]:
        """The batch's clocks in the runtime's terms (``MAX_TIME``: the end of input)."""
        wm, pt, spark_wm = call_clocks(tv, self.layout.mode, self.layout.end_watermark)
        if self.layout.mode == "EventTime":
            self._spark_clock = spark_wm
        return wm, pt

    def _begin(self, wm: int) -> dict[str, Any]:
        """The counters before this call; at the end of input, of a fresh operator.

        ``end_of_input()`` counts the rows in no firing once per operator: each
        key ends in an operator of its own.
        """
        if wm == MAX_TIME:
            self.op = self._make(self.layout.config)
        return self.op.counters.as_dict()

    def _key(self, key: Any) -> tuple:
        if self.layout.n_keys == 0:
            return ()
        # Spark's grouping key: NaN (one group) and NULL apart, NaN as the runtime's one
        values = [v.item() if isinstance(v, np.generic) else v for v in key]
        return tuple(nan_keys(values))

    def _restore(self, k: tuple, wm: int, pt: int) -> None:
        _restore_key(self.op, k, self.state.load(), wm, pt)

    def _where(self, frame: pd.DataFrame) -> tuple[pd.DataFrame, dict[str, int]]:
        """The rows WHERE keeps (the staged flag after the event time), and how many it
        rejected: ``filtered``, and ``missing`` rows without event time, which batch
        replay drops before WHERE runs (counted as the runtime counts them)."""
        lay = self.layout
        at = lay.n_keys + lay.n_values
        keep = frame.iloc[:, at + 1].to_numpy(dtype=bool)
        if keep.all():
            return frame, {}
        rejected = ~keep
        missing = 0
        if lay.has_event_time:
            _, valid = _event_times(frame.iloc[:, at])
            missing = int((rejected & ~valid).sum())
        counts = {"filtered": int(rejected.sum()) - missing, "missing": missing}
        return frame[keep], counts

    def _process(self, k: tuple, frame: pd.DataFrame) -> None:
        from wql.runtime.config import RowBatch

        lay = self.layout
        # Spark hands the columns over by position (``_0``, ``_1``, ...), in the
        # order of the staged select: keys, values, event time. Each column is read
        # once, as NumPy where pandas holds it so (no Arrow round trip per key).
        series = [s for _, s in frame.items()]
        n = len(frame)
        first_value = lay.n_keys
        order: np.ndarray | None = None
        if lay.has_event_time:
            ts, valid = _event_times(series[lay.n_keys + lay.n_values])
            # event-time order within the micro-batch (stable: ties keep Spark's order);
            # rows without event time keep their place and are counted by the runtime
            order = np.argsort(np.where(valid, ts, MIN_TIME), kind="stable")
            if np.all(order[:-1] <= order[1:]):
                order = None
            else:
                ts, valid = ts[order], valid[order]
            timestamps: Any = ts
            timestamp_valid: Any = valid if not valid.all() else None
        else:
            timestamps, timestamp_valid = None, None
        columns = tuple(
            _runtime_values(series[first_value + i], order, lay.nan_rows(frame, first_value + i))
            for i in range(lay.n_values)
        )
        wm = np.full(n, self.op.watermark, dtype=np.int64)
        pt = (
            np.full(n, self.op.processing_time, dtype=np.int64)
            if lay.mode == "ProcessingTime"
            else None
        )
        self.op.process_batch(RowBatch([k] * n, timestamps, columns, wm, pt, timestamp_valid))

    def _finish(
        self,
        k: tuple,
        wm: int,
        pt: int,
        before: dict[str, Any],
        after_end: int = 0,
        rejected: dict[str, int] | None = None,
        *,
        rows: bool = False,
    ) -> Iterator[pd.DataFrame]:
        op = self.op
        results, late, event_timers, processing_timers, keep = _settle_key(op, k, wm)
        if self.layout.mode == "EventTime":
            spark_timers = self.state.sync_timers(event_timers, wm, keep)
        elif self.layout.mode == "ProcessingTime":
            # a processing-time timer at T is due once the clock passes T (reads T + 1:
            # Flink's 1 ms delay, WindowOperator.advance_processing_time)
            due = [t + 1 for t in processing_timers]
            spark_timers = self.state.sync_timers(due, pt, keep)
        else:
            spark_timers = set()
        counters = self.state.save(
            _moved(before, op.counters.as_dict(), after_end, self.state.pending_rows, rejected),
            keep=keep,
            output=bool(results or late),
            snapshot=lambda: op.snapshot_key(k),
            watermark=op.watermark,
            processing_time=op.processing_time,
            spark_timers=spark_timers,
        )
        op.forget_key(k)
        if results or late or counters:
            yield from self._emit(k, self.layout.tagged.rows(results, late, counters), rows)

    def _emit(self, k: tuple, batch: pa.RecordBatch, rows: bool) -> Iterator[pd.DataFrame]:
        """Hand a key's output to Spark, or keep it for one frame of many keys.

        Spark converts every frame a call yields on its own, and that costs
        more per frame than the processor's whole work for a key (11 columns,
        a few rows: docs/benchmarks.md, "Streaming"). So calls with rows keep
        their output, and the task hands it over in frames of up to
        :data:`_FRAME_ROWS` rows: at the first timer call of the task, which
        comes after every call with rows (Spark fires the expired timers of a
        partition after its rows). A Spark timer just below the watermark,
        registered with the first kept frame, makes sure there is such a
        call; for its key it is a call whose clock did not move, which fires
        and emits nothing (as Spark's firing of any timer below the watermark
        of a key that had rows in the batch). The rows
        reach the same micro-batch, in the same order. Without an event-time
        watermark (other time modes, or none yet) a call yields its frame.
        """
        clock = self._spark_clock if self.layout.mode == "EventTime" else None
        if not rows or clock is None or clock <= 0:
            yield from self._flush()
            yield output_frame(batch)
            return
        self._buffer.append(batch)
        self._buffered_rows += batch.num_rows
        if not self._flush_timer:
            self._flush_timer = True
            self.handle.registerTimer(clock - 1)
        if self._buffered_rows >= _FRAME_ROWS:
            yield from self._flush()

    def _flush(self) -> Iterator[pd.DataFrame]:
        """The kept output as one frame (nothing when there is none)."""
        if self._buffer:
            batch = pa.concat_batches(self._buffer) if len(self._buffer) > 1 else self._buffer[0]
            self._buffer, self._buffered_rows = [], 0
            yield output_frame(batch)


# --------------------------------------------------------------------------- key buckets

#: A key bucket's own state (the ``ValueState`` :data:`STATE_NAME`): the rows its keys
#: took in since its last counters row (the pending-rows rule, per bucket), the bucket
#: count it was written with and its keys' layout (:func:`bucket_stamp`), and how many
#: keys it holds.
BUCKET_STATE_SCHEMA = "pending_rows LONG, buckets INT, keys LONG"

#: The name of a bucket's per-key state (``MapState``: encoded key -> :data:`KEY_SCHEMA`).
KEYS_NAME = "wql_keys"

#: One key's state in its bucket: the runtime's ``snapshot_key``, the clocks the key last
#: saw and the time of the timer index entry that lists it (:class:`_Entry`; NULL: none).
KEY_SCHEMA = "snapshot BINARY, watermark LONG, processing_time LONG, wake LONG"

#: The name of a bucket's timer index (``MapState``: Spark time -> :class:`_Entry`).
DUE_NAME = "wql_due"

_BUCKET = "__wql_bucket"
_PACKED = "__wql_rows"


def key_buckets(spark: Any) -> int:
    """The key bucket count a keyed stream built in ``spark`` uses: :data:`KEY_BUCKETS_CONF`,
    else :data:`KEY_BUCKETS`."""
    return _whole_number_conf(
        spark,
        KEY_BUCKETS_CONF,
        KEY_BUCKETS,
        1,
        MAX_KEY_BUCKETS,
        hint=f"unset it for the default ({KEY_BUCKETS}), or set at least the number of "
        'cores the stream should use (docs/streaming.md, "Key buckets")',
    )


def key_chunk(spark: Any) -> int:
    """How many keys a key bucket of a stream built in ``spark`` keeps per state entry:
    :data:`KEY_CHUNK_CONF`, else :data:`KEY_CHUNK`."""
    return _whole_number_conf(
        spark,
        KEY_CHUNK_CONF,
        KEY_CHUNK,
        0,
        MAX_KEY_CHUNK,
        hint=f"unset it for the default ({KEY_CHUNK}), or set 0 for one state entry per key "
        '(docs/streaming.md, "Key buckets")',
    )


def _whole_number_conf(spark: Any, name: str, default: int, low: int, high: int, hint: str) -> int:
    """The session conf ``name`` as a whole number from ``low`` to ``high`` (``default``
    when unset); any other value is a usage error naming the conf."""
    configured = spark.conf.get(name, None)
    if configured is None:
        return default
    try:
        value = int(str(configured).strip())
    except ValueError:
        value = low - 1
    if not low <= value <= high:
        raise WqlUnsupportedError(
            f"{name} is {configured!r}; it must be a whole number from {low} to {high}",
            code=ErrorCode.USAGE,
            hint=hint,
        )
    return value


def bucket_column(key_cols: list[str], buckets: int = KEY_BUCKETS) -> Column:
    """The Spark grouping column of a keyed query: its key's bucket, of ``buckets``."""
    return F.pmod(F.xxhash64(*[F.col(c) for c in key_cols]), F.lit(buckets)).alias(_BUCKET)


#: The rows of a keyed query as its stateful operator takes them (:func:`pack_buckets`):
#: per bucket and input partition, the bucket and its staged rows as one Arrow IPC stream.
PACKED_SCHEMA = f"{_BUCKET} LONG, {_PACKED} BINARY"

#: The most rows :func:`pack_buckets` holds before it hands a partition's buckets on.
_PACK_ROWS = 1 << 20


def pack_buckets(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    """``mapInArrow``: a partition's staged rows as one row per bucket (:data:`PACKED_SCHEMA`).

    The input's last column is the bucket (:func:`bucket_column`), the others
    are the staged columns; each output row holds the bucket's rows of the
    partition (up to :data:`_PACK_ROWS` rows held at a time) in their input
    order, without the bucket column, as an Arrow IPC stream. Spark's Python
    worker for ``transformWithStateInPandas`` walks its input row by row to
    regroup it (``itertuples``): packed, that is a few rows per bucket
    instead of every input row (docs/streaming.md, "Key buckets").
    """
    held: dict[int, list[pa.RecordBatch]] = {}
    count = 0
    for batch in batches:
        if not batch.num_rows:
            continue
        buckets = batch.column(batch.num_columns - 1).to_numpy(zero_copy_only=False)
        rows = batch.select(list(range(batch.num_columns - 1)))
        order = np.argsort(buckets, kind="stable")
        ordered = buckets[order]
        starts = np.flatnonzero(np.diff(ordered, prepend=ordered[0] - 1))
        if np.any(order[:-1] > order[1:]):
            rows = rows.take(pa.array(order))
        ends = [*starts[1:], len(ordered)]
        for start, end in zip(starts, ends, strict=True):
            held.setdefault(int(ordered[start]), []).append(rows.slice(start, end - start))
        count += batch.num_rows
        if count >= _PACK_ROWS:
            yield _packed(held)
            held, count = {}, 0
    if held:
        yield _packed(held)


def _packed(held: dict[int, list[pa.RecordBatch]]) -> pa.RecordBatch:
    blobs = []
    for parts in held.values():
        sink = pa.BufferOutputStream()
        with pa.ipc.new_stream(sink, parts[0].schema) as writer:
            for part in parts:
                writer.write_batch(part)
        blobs.append(sink.getvalue().to_pybytes())
    return pa.record_batch(
        [pa.array(list(held), pa.int64()), pa.array(blobs, pa.binary())],
        names=[_BUCKET, _PACKED],
    )


def unpack_buckets(frames: list[pd.DataFrame], timezone: str) -> pd.DataFrame:
    """The staged rows of :func:`pack_buckets`' rows (their packed column is the last)
    as the frame Spark hands an unpacked call: Spark's own Arrow-to-pandas conversion
    in the session time zone, columns by position."""
    from pyspark.sql.conversion import ArrowBatchTransformer

    parts = [
        part
        for frame in frames
        for blob in frame.iloc[:, -1]
        for part in pa.ipc.open_stream(pa.py_buffer(blob))
    ]
    batch = pa.concat_batches(parts) if len(parts) > 1 else parts[0]
    series = ArrowBatchTransformer.to_pandas(batch, timezone=timezone)
    # Spark's worker rebuilds its frame from rows of Python scalars, so a narrower
    # NumPy number (INT, FLOAT, ...) comes back as int64 or float64: as here
    columns = {f"_{i}": _widened(s.to_numpy() if _numeric(s) else s) for i, s in enumerate(series)}
    return pd.DataFrame(columns, copy=False)


def _numeric(s: pd.Series) -> bool:
    return isinstance(s.dtype, np.dtype) and s.dtype.kind in "iuf"


def _widened(values: Any) -> Any:
    if isinstance(values, np.ndarray):
        wide = np.int64 if values.dtype.kind in "iu" else np.float64
        return values.astype(wide, copy=False)
    return values.reset_index(drop=True)


def _key_value(v: Any, t: WqlType, nan: bool) -> Any:
    """One grouping-key value as Spark hands a per-key call its key (Python scalars): an
    integer column with a NULL in the frame reaches pandas as floats with NaN, so its
    values are integers again and its NaN is NULL (the same key's state in every call);
    a float's NaN is NULL too unless ``nan`` (its :data:`_NANS` bit) says it is NaN,
    then it is the runtime's one NaN key."""
    v = v.item() if isinstance(v, np.generic) else v
    if isinstance(v, float) and v != v:  # noqa: PLR0124 - NaN
        return NAN_KEY if nan and not t.is_integral else None
    if t.is_integral and isinstance(v, float):
        return int(v)
    return v


def _encoded_key(k: tuple) -> bytes:
    """A key's identity in its bucket's ``MapState``, which unpickles as the key: equal for
    the values Spark groups as one (every NaN, which :func:`_key_value` made
    :data:`~wql.runtime.config.NAN_KEY`; -0.0 and 0.0)."""
    norm = tuple(
        (NAN_KEY if v != v else v + 0.0) if isinstance(v, float) else v  # noqa: PLR0124 - NaN
        for v in k
    )
    return pickle.dumps(norm, protocol=5)


def _key_groups(
    keys: list[pd.Series], types: tuple[WqlType, ...], nans: list[np.ndarray | None]
) -> list[tuple[tuple, np.ndarray]]:
    """The rows of each key in a bucket's frame: ``(key, row positions)`` in the order
    the keys first appear, a key's rows in frame order. The key is its first row's
    values (what Spark hands a per-key call); every NaN is one key and NULL another
    (``nans``: each key column's NaN rows, pandas reads both as NaN), -0.0 and 0.0 are
    one key, as Spark groups them."""
    codes: np.ndarray | None = None
    factors = [pd.factorize(column, use_na_sentinel=False)[0] for column in keys]
    factors += [rows.astype(np.int64) for rows in nans if rows is not None]
    for c in factors:
        codes = c if codes is None else pd.factorize(codes * (int(c.max()) + 1) + c)[0]
    assert codes is not None
    order = np.argsort(codes, kind="stable")
    starts = np.flatnonzero(np.diff(codes[order], prepend=-1))
    groups = np.split(order, starts[1:])
    return [
        (
            tuple(
                _key_value(column.iat[int(rows[0])], t, nan is not None and bool(nan[rows[0]]))
                for column, t, nan in zip(keys, types, nans, strict=True)
            ),
            rows,
        )
        for rows in groups
    ]


class BucketProcessor(WindowProcessor):
    """:class:`WindowProcessor` for every key of a key bucket in one Spark call.

    Spark groups a keyed query by its key's bucket (:func:`bucket_column`),
    so ``transformWithStateInPandas`` pays per bucket and micro-batch, not
    per key (docs/streaming.md, "Key buckets"). A bucket's state:

    * ``ValueState`` :data:`STATE_NAME` (:data:`BUCKET_STATE_SCHEMA`): the
      bucket's pending rows, bucket count and number of keys;
    * ``MapState`` :data:`KEYS_NAME`: encoded key -> the key's state in
      :data:`KEY_SCHEMA` (the runtime's ``snapshot_key``, its clocks, its
      index group's entry). A call reads and writes only the entries of the
      keys it runs and of their groups;
    * ``MapState`` :data:`DUE_NAME`: the timer index, Spark time ``t`` ->
      :class:`_Entry`: groups of keys with their wake times, one Spark timer
      of the bucket per group at its earliest wake (a pointer from the entry
      at that time when it is not the group's own).

    Each key runs exactly as a :class:`WindowProcessor` call runs it (its
    clocks, its rows in event-time order, its timers, its counters), so
    results and counters are the same; a key's wake time is the earliest
    Spark timer the per-key processor would hold. The pending-rows rule
    holds per bucket: a call whose keys only took rows in emits no counters
    row, its rows wait in the bucket's state (where
    :func:`wql.spark.stream_sinks.waiting_rows` reads them).
    """

    #: The most keys a call puts in one index group (:class:`_Entry`): a key that moves
    #: rewrites the entry of its group, so this bounds what one key's move costs.
    group_keys = 16

    #: A call whose rows run at least ``1 / read_whole`` of as many keys as its bucket
    #: holds reads the bucket's key map and timer index in one request each (a
    #: ``MapState`` iterator) instead of a request per key and per index entry: the key
    #: entries it reads stay within ``read_whole`` times the keys it runs
    #: (docs/streaming.md, "Key buckets").
    read_whole = 1

    #: A key that leaves its index group in a call that has not read the group's entry
    #: leaves it **lazily**: the entry is not read and rewritten for it, the key's state
    #: names its new group, and the stale element is dropped when the old group's timer
    #: reaches it (an element is the key's only while the key's state names that
    #: entry). False: every leaving key reads and rewrites its old entry, as the
    #: version before lazy leaving did (docs/streaming.md, "Key buckets").
    lazy_leave = True

    #: An input call runs its keys together (:meth:`_run_keys`: restored at once, their
    #: rows one batch for the runtime); False: one by one (:meth:`_run_key`).
    together = True

    #: The most keys restored at once: the operator's per-key steps (a key's snapshot,
    #: its rows followed for "in no firing") look through the keys it holds, so a part
    #: of n keys costs ~n² of them; the runtime's batch step is shared well before.
    together_keys = 64

    def init(self, handle: StatefulProcessorHandle) -> None:
        from wql.runtime.operator_factory import make_operator

        # WindowProcessor.init without its per-key ValueState (this one has its own)
        self.handle = handle
        self._make = make_operator
        self.op = make_operator(self.layout.config)
        self._buffer: list[pa.RecordBatch] = []
        self._buffered_rows = 0
        self._flush_timer = False
        self._spark_clock: int | None = None
        end = self.layout.end_watermark
        #: the Spark time that wakes a key with no runtime timer at the end of input
        self._end_timer = None if end is None else end - 1
        self.bucket = handle.getValueState(STATE_NAME, BUCKET_STATE_SCHEMA)
        self.keys = handle.getMapState(KEYS_NAME, "key BINARY", KEY_SCHEMA)
        #: the keys' states in it, per call
        self.store = _KeyStore(self.keys)
        #: the keys the bucket held as the call began, and its stamp (bucket count
        #: and chunk layout: :func:`bucket_stamp`; None: a new bucket)
        self._held = 0
        self._stamp: int | None = None
        #: keys the call added to the bucket (negative: removed)
        self._added = 0
        self.due = handle.getMapState(DUE_NAME, "time LONG", "keys ARRAY<BINARY>")
        #: the Spark clock of the call (timers strictly below it fire), None without timers
        self._timer_clock: int | None = None
        #: the index entries this call read, as it leaves them
        self._entries: dict[int, _Entry] = {}
        #: keys the call moved to a new wake time: (key, its state but the group, wake)
        self._moved: list[tuple[bytes, tuple[bytes, int, int], int]] = []
        #: keys that left a group lazily in this call: (key, the group's entry time)
        self._left: list[tuple[bytes, int]] = []
        #: the bucket's key map and timer index as the call began, when it read them
        #: whole (:meth:`_read_whole`); None: read entry by entry
        self._saved_due: dict[int, tuple] | None = None

    def handleInputRows(
        self, key: Any, rows: Iterator[pd.DataFrame], timerValues: TimerValues
    ) -> Iterator[pd.DataFrame]:
        frames = [f for f in rows if len(f)]
        wm, pt = self._clocks(timerValues)
        self._call_clock(wm, pt)
        if not frames:
            return
        lay = self.layout
        tz = lay.timezone or "UTC"
        frame = unpack_buckets(frames, tz) if lay.packed else _one_frame(frames)
        out = _Output()
        if lay.where_flag and wm != MAX_TIME:
            # the rows WHERE rejects are counted for the bucket and run no key (their
            # staged keys are placeholders); after the end of input every row is a
            # key's, dropped after the end as the per-key processor drops it
            frame, rejected = self._where(frame)
            frame = frame.reset_index(drop=True)
            out.add([], [], _moved(_NO_COUNTERS, _NO_COUNTERS, 0, 0, rejected))
        pending, held = self._load_bucket()
        if len(frame):
            series = [s for _, s in frame.items()]
            columns = _BucketColumns(frame, lay)
            nans = [lay.nan_rows(frame, i) for i in range(lay.n_keys)]
            groups = _key_groups(series[: lay.n_keys], lay.tagged.key_types, nans)
            if len(groups) * self.read_whole >= held:
                self._read_whole()
            if wm == MAX_TIME or not self.together:
                for k, idx in groups:
                    self._run_key(_encoded_key(k), k, wm, pt, out, columns, idx)
            else:
                keyed = [(_encoded_key(k), k, idx) for k, idx in groups]
                self._run_keys(keyed, wm, pt, out, columns)
        self._save_index()
        self._save_bucket(out, pending, held, ended=wm == MAX_TIME)
        yield from out.emit(self, rows=True)

    def handleExpiredTimer(
        self, key: Any, timerValues: TimerValues, expiredTimerInfo: ExpiredTimerInfo
    ) -> Iterator[pd.DataFrame]:
        yield from self._flush()
        self._flush_timer = False
        wm, pt = self._clocks(timerValues)
        self._call_clock(wm, pt)
        t = int(expiredTimerInfo.getExpiryTimeInMs())
        # the groups whose timer this is: the entry's own, and those it points to
        fired = self._entry(t)
        groups = ([t] if fired.own else []) + sorted(fired.pointers)
        clock = self._timer_clock
        # (wake, key, the group that lists it): a key listed by a group it lazily left
        # is that group's stale element (_run_key drops it)
        due = sorted(
            (wake, kb, g)
            for g in groups
            for kb, wake in self._entry(g).own.items()
            if wake == t or (clock is not None and wake < clock)
        )
        if not due and not fired.pointers:
            # the flush timer of the task's output (WindowProcessor._emit), or a time
            # whose keys left it
            self._entries = {}
            return
        # the groups this timer was for: those it points to, and its own if it ran keys
        reached = set(fired.pointers)
        if any(g == t for _, _, g in due):
            reached.add(t)
        out = _Output()
        pending, held = self._load_bucket()
        for wake, kb, g in due:
            # each key as its own Spark timer at its wake time would run it
            self._run_key(kb, pickle.loads(kb), wm, pt, out, None, None, fired=wake, via=g)
        self._save_index(fired=t, reached=frozenset(reached))
        self._save_bucket(out, pending, held, ended=wm == MAX_TIME)
        yield from out.emit(self, rows=False)

    # -- steps ----------------------------------------------------------------

    def _call_clock(self, wm: int, pt: int) -> None:
        mode = self.layout.mode
        if mode == "EventTime":
            self._timer_clock = self._spark_clock
        elif mode == "ProcessingTime":
            self._timer_clock = pt
        else:
            self._timer_clock = None

    def _run_key(
        self,
        kb: bytes,
        k: tuple,
        wm: int,
        pt: int,
        out: _Output,
        columns: _BucketColumns | None,
        idx: np.ndarray | None,
        *,
        fired: int | None = None,
        via: int | None = None,
    ) -> None:
        """One key's call: restore, the clocks' rise, its rows, save, re-index.
        ``fired``: the key's wake time when a Spark timer runs it (Spark deletes that
        timer after the call), ``via``: the group whose element it is; a stale element
        (the key's state names another group, or the key has none) is dropped and the
        key does not run."""
        saved = self.store.get(kb)
        if via is not None and (saved is None or saved[3] is None or int(saved[3]) != via):
            stale = self._entry(via)
            del stale.own[kb]
            stale.changed = True
            return
        before = self._begin(wm)
        op = self.op
        if saved is not None:
            blob, key_wm, key_pt, _ = saved
            _restore_key(op, k, (bytes(blob), int(key_wm), int(key_pt)), wm, pt)
        else:
            _restore_key(op, k, None, wm, pt)
        after_end = 0
        if idx is not None and columns is not None:
            if wm == MAX_TIME:
                after_end = len(idx)
            else:
                columns.process(op, k, idx)
        results, late, event_timers, processing_timers, keep = _settle_key(op, k, wm)
        counters = _moved(before, op.counters.as_dict(), after_end, 0)
        self._save_key(kb, k, saved, keep, event_timers, processing_timers, wm, pt, fired)
        out.add(results, late, counters)

    def _run_keys(
        self,
        keys: list[tuple[bytes, tuple, np.ndarray]],
        wm: int,
        pt: int,
        out: _Output,
        columns: _BucketColumns,
    ) -> None:
        """The keys with rows of an input call before the end of input, run together:
        the keys that saw the same clocks (up to :attr:`together_keys` at a time) are
        restored into the operator at once, the
        clocks rise once (each key's due timers fire, as in its own call), their rows
        go in as one batch (each key's in event-time order), then each key is saved.
        Keys share nothing in the operator but its counters, so each key's results,
        late rows and state are those of :meth:`_run_key`; the calls' counters sum."""
        by_clock: dict[tuple[int, int], list[tuple[bytes, tuple, np.ndarray, Any]]] = {}
        for kb, k, idx in keys:
            saved = self.store.get(kb)
            clock = (MIN_TIME, MIN_TIME) if saved is None else (int(saved[1]), int(saved[2]))
            by_clock.setdefault(clock, []).append((kb, k, idx, saved))
        op = self.op
        size = max(1, self.together_keys)
        parts = [
            (clock, same[i : i + size])
            for clock, same in by_clock.items()
            for i in range(0, len(same), size)
        ]
        for (key_wm, key_pt), part in parts:
            before = op.counters.as_dict()
            op.watermark = key_wm
            op.processing_time = key_pt
            for _, k, _, saved in part:
                op.forget_key(k)
                if saved is not None:
                    op.restore_key(k, bytes(saved[0]))
            op.advance_watermark(wm)
            op.advance_processing_time(pt)
            columns.process_keys(op, [(k, idx) for _, k, idx, _ in part])
            results, late = op.drain(), op.drain_late()
            active = set(op.active_keys())
            for kb, k, _, saved in part:
                event_timers, processing_timers = op.timers(k)
                keep = bool(k in active or event_timers or processing_timers)
                self._save_key(kb, k, saved, keep, event_timers, processing_timers, wm, pt, None)
            out.add(results, late, _moved(before, op.counters.as_dict(), 0, 0))

    def _save_key(
        self,
        kb: bytes,
        k: tuple,
        saved: Any,
        keep: bool,
        event_timers: list[int],
        processing_timers: list[int],
        wm: int,
        pt: int,
        fired: int | None,
    ) -> None:
        """Key ``k`` after its call (``saved``: its state as the call read it): its state
        written or removed, its wake time re-indexed, the key out of the operator."""
        op = self.op
        group = None if saved is None or saved[3] is None else int(saved[3])
        mode = self.layout.mode
        if mode == "EventTime":
            wake = self._wake(event_timers, wm, keep, fired)
        elif mode == "ProcessingTime":
            wake = self._wake([t + 1 for t in processing_timers], pt, keep, fired)
        else:
            wake = None
        # the key's wake time as its group lists it; an entry the call has not read is
        # left lazily (lazy_leave): the key is re-indexed as if it moved
        entry = None
        if group is not None:
            if self.lazy_leave and group not in self._entries and self._saved_due is None:
                self._left.append((kb, group))
            else:
                entry = self._entry(group)
        old_wake = None if entry is None else entry.own.get(kb)
        if keep:
            state = (op.snapshot_key(k), op.watermark, op.processing_time)
            if wake is not None and wake == old_wake:
                self.store.put(kb, (*state, group))
            elif wake is None:
                self.store.put(kb, (*state, None))
            else:
                # written once the call has formed its groups (_save_index)
                self._moved.append((kb, state, wake))
            self._added += saved is None
        elif saved is not None:
            self.store.remove(kb)
            self._added -= 1
        op.forget_key(k)
        if entry is not None and old_wake is not None and (not keep or wake != old_wake):
            del entry.own[kb]
            entry.changed = True

    def _load_bucket(self) -> tuple[int, int]:
        """The bucket's pending rows and key count (refusing another bucket count); the
        call's own bookkeeping starts here."""
        self._added = 0
        self._saved_due = None
        saved = self.bucket.get()
        if saved is None:
            self._held = 0
            self.store.begin(0, self.layout.chunk_keys)
            self._stamp = None
            return 0, 0
        pending, stamp, held = saved
        buckets, chunks = bucket_stamp(int(stamp))
        if buckets != self.layout.buckets:
            raise WqlUnsupportedError(
                f"the stream's checkpoint keeps its keys in {buckets} buckets; this "
                f"stream groups them into {self.layout.buckets}",
                code=ErrorCode.SNAPSHOT,
                hint=f"restart it with {KEY_BUCKETS_CONF} = {buckets} (the WQL version that "
                "wrote the checkpoint had that count by default unless it was set), or "
                "start the stream on a new checkpoint",
            )
        self._held = int(held)
        self.store.begin(self._held, self.layout.chunk_keys, chunks)
        self._stamp = int(stamp)
        return int(pending), int(held)

    def _save_bucket(self, out: _Output, pending: int, held: int, *, ended: bool) -> None:
        """The pending-rows rule for the bucket (:class:`ProcessorState`'s, per bucket):
        the call's counters with the rows that waited, or, when its keys only took rows
        in and the bucket keeps keys, no counters row and the rows wait on."""
        keys = held + self._added
        counters = out.counters
        if pending:
            if counters is None:
                counters = {"rows_in": 0, "rows_emitted": 0, "late_rows": 0, "dropped": {}}
            counters["rows_in"] += pending
        new_pending = 0
        only_in = counters is not None and not (
            out.results or out.late or counters["dropped"] or counters.get("rows_filtered")
        )
        if only_in and keys > 0 and not ended:
            assert counters is not None
            new_pending, counters = counters["rows_in"], None
        out.counters = counters
        if keys > 0:
            stamp = self.layout.buckets | self.store.stamp()
            if (new_pending, keys, stamp) != (pending, held, self._stamp):
                self.bucket.update((new_pending, stamp, keys))
        elif held > 0 or pending:
            self.bucket.clear()

    def _wake(self, due: list[int], now: int, keep: bool, fired: int | None) -> int | None:
        """The Spark time to wake a key at (:meth:`ProcessorState.sync_timers`' rule,
        its earliest timer): ``max(T - 1, now)`` for its earliest due clock ``T``; a
        drainable stream's at most at the end timer, which a key with state and no
        timer gets. None: no wake (or the end of input, when every timer is past)."""
        if now == MAX_TIME:
            return None
        wanted = [max(t - 1, now) for t in due if t < MAX_TIME]
        if fired is not None:
            # Spark fires a timer registered at the call's clock in the same micro-batch
            # (observed: a stale timer at W) and deletes it after the call; the per-key
            # processor's other timers then wake the key: so do the next of them
            wanted = [t for t in wanted if t > fired]
        end = self._end_timer
        if end is not None:
            wanted = [min(t, end) for t in wanted]
            if keep and not wanted:
                wanted = [end]
        return min(wanted) if wanted else None

    def _read_whole(self) -> None:
        """Read the bucket's key map and timer index in one request each (the call's
        keys and entries are then taken from them, each before the call writes it)."""
        self.store.read_whole()
        self._saved_due = {int(t[0]): v for t, v in self.due.iterator()}

    def _entry(self, t: int) -> _Entry:
        """The index entry at ``t`` as this call leaves it (read once per call)."""
        entry = self._entries.get(t)
        if entry is None:
            whole = self._saved_due
            entry = _Entry(t, self.due.getValue((t,)) if whole is None else whole.get(t))
            self._entries[t] = entry
        return entry

    def _save_index(
        self, *, fired: int | None = None, reached: frozenset[int] = frozenset()
    ) -> None:
        """Put the keys the call moved into groups, keep each group's timer at its
        earliest wake, write the entries the call changed and move the bucket's Spark
        timers: one at each time a group waits for. ``fired``: the timer of this call,
        whose pointers to the groups ``reached`` are spent (Spark deletes it after)."""
        for kb, g in self._left:
            # a group the call read after its key left it lazily: dropped now
            read = self._entries.get(g)
            if read is not None and kb in read.own:
                del read.own[kb]
                read.changed = True
        self._left = []
        moved = sorted(self._moved, key=lambda m: m[2])
        self._moved = []
        size = max(1, self.group_keys)
        for start in range(0, len(moved), size):
            chunk = moved[start : start + size]
            # the group's entry is at its earliest wake: its own timer, no pointer
            g = chunk[0][2]
            entry = self._entry(g)
            for kb, state, wake in chunk:
                entry.own[kb] = wake
                self.store.put(kb, (*state, g))
            entry.changed = True
        clock = self._timer_clock
        for entry in [e for e in self._entries.values() if e.changed or e.t in reached]:
            low = entry.earliest()
            spent = fired is not None and entry.t in reached
            if low == entry.low and not spent:
                continue
            if (
                not spent
                and low is not None
                and entry.low is not None
                and clock is not None
                and low < clock
            ):
                # still due in this micro-batch: its timer there (below the clock, which
                # Spark fires after the rows) reaches it, a new one would not be needed
                continue
            for at in (entry.low, fired if spent else None):
                if at is not None and at != entry.t:
                    self._entry(at).drop_pointer(entry.t)
            if low is not None and low != entry.t:
                pointing = self._entry(low)
                pointing.pointers.add(entry.t)
                pointing.changed = True
        for t, entry in self._entries.items():
            if entry.changed:
                if entry.own or entry.pointers:
                    self.due.updateValue((t,), (entry.value(),))
                elif entry.existed:
                    self.due.removeKey((t,))
            timer = entry.has_timer()
            if timer and not entry.timer:
                self.handle.registerTimer(t)
            elif entry.timer and not timer and (clock is None or t >= clock):
                # a time below the clock is Spark's to fire in this micro-batch: it
                # finds no key then, and Spark drops it after
                self.handle.deleteTimer(t)
        self._entries = {}
        self._saved_due = None
        self.store.finish(self._held + self._added)


#: A chunk's map key in :class:`_KeyStore`: this tag, then the chunk's number (a key's is
#: a pickle: 0x80 first).
_CHUNK_TAG = 1


def bucket_stamp(stamp: int) -> tuple[int, tuple[int, int]]:
    """A bucket's ``buckets`` field (:data:`BUCKET_STATE_SCHEMA`): the bucket count in
    its low 16 bits, then ``log2(C) + 1`` in 5 bits and the keys per chunk ``n`` in
    8 (:class:`_KeyStore`; both 0: one entry per key, as every bucket written before
    chunks). Returns the count and ``(C, n)``, ``(0, 0)`` for one entry per key."""
    log = (stamp >> 16) & 0x1F
    return stamp & 0xFFFF, ((1 << (log - 1)) if log else 0, (stamp >> 21) & 0xFF)


class _KeyStore:
    """A bucket's keys' states in its ``MapState`` :data:`KEYS_NAME`, one call at a time.

    Two layouts (docs/streaming.md, "Key buckets"). **One entry per key** (every bucket
    with :data:`KEY_CHUNK_CONF` ``= 0``, and every bucket written before chunks
    existed). **Chunks** (:data:`KEY_CHUNK_CONF` ``= n``): the keys are spread over
    ``C`` entries by a stable hash (CRC-32) of the encoded key, each entry a pickled
    dict ``key -> state``; the bucket's ``ValueState`` records ``C`` and ``n``
    (:func:`bucket_stamp`). ``C`` doubles when the bucket holds more than ``2 * n * C``
    keys (every chunk rewritten once: amortized per key). A call reads and writes the
    chunks of the keys it runs: the bench's 1 000 keys in ~125 writes, not 1 000; a key
    alone in a call reads and writes its chunk (up to ``2n`` keys' states) instead of
    its own entry.

    Chunks pay where a call runs most of its bucket's keys, an entry per key where it
    runs a sparse few of many, which is what a bucket of many keys sees (a micro-batch
    touches a share of a large state). So a bucket holding more than
    ``2 * n * max_chunks`` keys **spreads** them into one entry per key, and a bucket
    of one entry per key whose call has every entry in hand (a whole read) and leaves
    it at most a quarter of that **gathers** them into chunks; both rewrite the
    bucket's keys once, and the factor of four between the two keeps a bucket near
    the bound from turning back and forth.
    """

    #: the most chunks a bucket keeps before it spreads its keys one to an entry
    max_chunks = 16

    def __init__(self, keys: Any) -> None:
        self.keys = keys
        self.begin(0, 0)

    def begin(self, held: int, chunk_keys: int, layout: tuple[int, int] = (0, 0)) -> None:
        """A call on a bucket that holds ``held`` keys in ``layout`` (``(C, n)``, see
        :func:`bucket_stamp`); ``chunk_keys``: the keys per chunk the conf asks for
        (0: one entry per key), a new bucket's layout and the one a bucket gathers
        into."""
        #: the keys per chunk wanted (:data:`KEY_CHUNK_CONF`)
        self.wanted = chunk_keys
        #: the bucket's chunk count (0: one entry per key) and keys per chunk
        self.count, self.size = (1 if chunk_keys > 0 else 0, chunk_keys) if held == 0 else layout
        #: chunk number -> the chunk as the call leaves it
        self.chunks: dict[int, dict[bytes, tuple]] = {}
        #: the chunks the bucket had saved that the call read
        self.saved: set[int] = set()
        self.dirty: set[int] = set()
        #: every entry of the bucket is in hand (read whole, or the bucket is new)
        self.whole = held == 0
        #: the entries of a bucket of one entry per key, read whole, as the call
        #: leaves them
        self.loose: dict[bytes, tuple] | None = {} if held == 0 and not self.count else None

    def stamp(self) -> int:
        """The layout's bits of the bucket's stamp (:func:`bucket_stamp`)."""
        if not self.count:
            return 0
        return (self.count.bit_length() << 16) | (self.size << 21)

    def read_whole(self) -> None:
        """Every entry of the bucket in one request (the call's keys are then taken from
        them)."""
        if self.whole:
            return
        entries = [(bytes(k[0]), v) for k, v in self.keys.iterator()]
        self.whole = True
        if self.count:
            chunks = {int.from_bytes(kb[1:], "big"): pickle.loads(bytes(v[0])) for kb, v in entries}
            self.saved.update(chunks)
            chunks.update(self.chunks)  # what the call changed wins
            self.chunks = chunks
        else:
            self.loose = dict(entries)

    def _chunk(self, kb: bytes) -> tuple[int, dict[bytes, tuple]]:
        n = zlib.crc32(kb) % self.count
        chunk = self.chunks.get(n)
        if chunk is None:
            saved = None if self.whole else self.keys.getValue((_chunk_key(n),))
            if saved is not None:
                self.saved.add(n)
            chunk = self.chunks[n] = {} if saved is None else pickle.loads(bytes(saved[0]))
        return n, chunk

    def get(self, kb: bytes) -> tuple | None:
        """Key ``kb``'s state: (snapshot, watermark, processing time, index group)."""
        if not self.count:
            return self.keys.getValue((kb,)) if self.loose is None else self.loose.get(kb)
        return self._chunk(kb)[1].get(kb)

    def put(self, kb: bytes, state: tuple) -> None:
        if not self.count:
            self.keys.updateValue((kb,), state)
            if self.loose is not None:
                self.loose[kb] = state
            return
        n, chunk = self._chunk(kb)
        chunk[kb] = (bytes(state[0]), *state[1:])
        self.dirty.add(n)

    def remove(self, kb: bytes) -> None:
        if not self.count:
            self.keys.removeKey((kb,))
            if self.loose is not None:
                self.loose.pop(kb, None)
            return
        n, chunk = self._chunk(kb)
        chunk.pop(kb, None)
        self.dirty.add(n)

    def finish(self, held: int) -> None:
        """Write what the call changed; the bucket now holds ``held`` keys."""
        if not self.count:
            if (
                self.wanted
                and self.loose is not None
                and 0 < held <= self.wanted * self.max_chunks // 2
            ):
                self._gather(held)
            return
        if held > 2 * self.size * self.max_chunks:
            self._spread()
        elif held > 2 * self.size * self.count:
            self._grow(held)
        else:
            for n in sorted(self.dirty):
                self._write(n, self.chunks[n])

    def _grow(self, held: int) -> None:
        """Rehash every key into as many chunks as ``held`` keys need."""
        self.read_whole()
        states = (item for chunk in self.chunks.values() for item in chunk.items())
        count, spread = _rehash(states, self.size, held)
        for n in sorted(set(self.chunks) | set(spread)):
            self._write(n, spread.get(n, {}))
        self.count = count

    def _spread(self) -> None:
        """Every key to an entry of its own, the chunks removed."""
        self.read_whole()
        for chunk in self.chunks.values():
            for kb, state in chunk.items():
                self.keys.updateValue((kb,), state)
        for n in sorted(self.saved):
            self.keys.removeKey((_chunk_key(n),))
        self.count = self.size = 0

    def _gather(self, held: int) -> None:
        """The keys of a bucket of one entry per key, every one in hand, into chunks of
        the wanted size."""
        assert self.loose is not None
        for kb in self.loose:
            self.keys.removeKey((kb,))
        states = ((kb, (bytes(state[0]), *state[1:])) for kb, state in self.loose.items())
        self.count, spread = _rehash(states, self.wanted, held)
        self.size = self.wanted
        for n in sorted(spread):
            self._write(n, spread[n])

    def _write(self, n: int, chunk: dict[bytes, tuple]) -> None:
        if chunk:
            self.keys.updateValue((_chunk_key(n),), (pickle.dumps(chunk, 5), None, None, None))
        else:
            self.keys.removeKey((_chunk_key(n),))


def _rehash(
    states: Iterable[tuple[bytes, tuple]], size: int, held: int
) -> tuple[int, dict[int, dict[bytes, tuple]]]:
    """The chunk count ``held`` keys need at ``size`` keys per chunk (a power of two,
    at most ``2 * size`` keys per chunk on average) and ``states`` spread over it."""
    count = 1
    while held > 2 * size * count:
        count *= 2
    spread: dict[int, dict[bytes, tuple]] = {}
    for kb, state in states:
        spread.setdefault(zlib.crc32(kb) % count, {})[kb] = state
    return count, spread


def _chunk_key(n: int) -> bytes:
    return bytes([_CHUNK_TAG]) + n.to_bytes(4, "big")


#: An index element's first byte when it is not a plain key (a plain element is a key
#: as :func:`_encoded_key` writes it, a pickle, whose first byte is 0x80): a key with
#: its wake time, a pointer to a group.
_WAKE_TAG = 1
_POINTER_TAG = 2


def _long(v: int) -> bytes:
    return v.to_bytes(8, "big", signed=True)


class _Entry:
    """A bucket's timer index entry at Spark time ``t`` (``MapState`` :data:`DUE_NAME`).

    It holds a **group** of keys, each with its wake time (at or after ``t``): a key
    whose wake is ``t`` as a plain element (the encoded key), another as
    ``_WAKE_TAG``, wake, key; and **pointers** (``_POINTER_TAG``, a time) to the
    entries of other groups whose earliest wake is ``t``. A key's state names the
    entry of its group. The bucket has a Spark timer at ``t`` when its group's earliest
    wake is ``t`` or it holds a pointer: one timer per group, at its earliest wake. An
    entry written before groups (one per wake time, plain keys) reads as a group
    whose keys all wake at ``t``. An element is its key's only while the key's state
    names this entry; another is **stale** (its key left lazily,
    :attr:`BucketProcessor.lazy_leave`) and is dropped when a timer call reaches it.
    """

    __slots__ = ("changed", "existed", "low", "own", "pointers", "t", "timer")

    def __init__(self, t: int, saved: tuple | None) -> None:
        self.t = t
        #: the group: key -> its wake time
        self.own: dict[bytes, int] = {}
        #: entries of groups whose earliest wake is t
        self.pointers: set[int] = set()
        for raw in () if saved is None else saved[0]:
            b = bytes(raw)
            if b[0] == _WAKE_TAG:
                self.own[b[9:]] = int.from_bytes(b[1:9], "big", signed=True)
            elif b[0] == _POINTER_TAG:
                self.pointers.add(int.from_bytes(b[1:9], "big", signed=True))
            else:
                self.own[b] = t
        self.existed = saved is not None
        #: the group's earliest wake as read: where its timer is
        self.low = self.earliest()
        #: whether the bucket had a Spark timer at t before the call
        self.timer = self.has_timer()
        self.changed = False

    def earliest(self) -> int | None:
        return min(self.own.values()) if self.own else None

    def has_timer(self) -> bool:
        return bool(self.pointers) or (bool(self.own) and self.earliest() == self.t)

    def drop_pointer(self, g: int) -> None:
        if g in self.pointers:
            self.pointers.discard(g)
            self.changed = True

    def value(self) -> list[bytes]:
        t = self.t
        out = [
            kb if wake == t else bytes([_WAKE_TAG]) + _long(wake) + kb
            for kb, wake in self.own.items()
        ]
        out.extend(bytes([_POINTER_TAG]) + _long(g) for g in sorted(self.pointers))
        return out


#: The counters of a call that counted nothing yet (:func:`_moved`'s ``before`` and ``after``).
_NO_COUNTERS: dict[str, Any] = {"rows_in": 0, "rows_emitted": 0, "late_rows": 0, "dropped": {}}


class _Output:
    """A bucket call's output: its keys' result and late rows, their counters summed."""

    def __init__(self) -> None:
        self.results: list[tuple] = []
        self.late: list[tuple] = []
        self.counters: dict[str, Any] | None = None

    def add(self, results: list, late: list, counters: dict[str, Any] | None) -> None:
        self.results.extend(results)
        self.late.extend(late)
        if counters is None:
            return
        total = self.counters
        if total is None:
            self.counters = {**counters, "dropped": dict(counters["dropped"])}
            return
        for name in ("rows_in", "rows_emitted", "late_rows"):
            total[name] += counters[name]
        if counters.get("rows_filtered"):
            total["rows_filtered"] = total.get("rows_filtered", 0) + counters["rows_filtered"]
        for reason, n in counters["dropped"].items():
            total["dropped"][reason] = total["dropped"].get(reason, 0) + n

    def emit(self, proc: WindowProcessor, *, rows: bool) -> Iterator[pd.DataFrame]:
        if self.results or self.late or self.counters:
            batch = proc.layout.tagged.rows(self.results, self.late, self.counters)
            yield from proc._emit((), batch, rows)


class _BucketColumns:
    """A bucket's staged frame read once: each key's rows are taken from it as
    :meth:`WindowProcessor._process` reads a key's own frame (the same values)."""

    def __init__(self, frame: pd.DataFrame, layout: ProcessorLayout) -> None:
        self.layout = layout
        n_keys, n_values = layout.n_keys, layout.n_values
        series = [s for _, s in frame.items()]
        self.ts: np.ndarray | None = None
        self.valid: np.ndarray | None = None
        if layout.has_event_time:
            self.ts, self.valid = _event_times(series[n_keys + n_values])
        self.values = [
            _StagedValues(series[n_keys + i], layout.nan_rows(frame, n_keys + i))
            for i in range(n_values)
        ]

    def process(self, op: Any, k: tuple, idx: np.ndarray) -> None:
        """Feed ``op`` the rows ``idx`` of key ``k`` in event-time order (ties in Spark's)."""
        self.process_keys(op, [(k, idx)])

    def process_keys(self, op: Any, keys: list[tuple[tuple, np.ndarray]]) -> None:
        """Feed ``op`` the rows of each key, one key after another, each key's in
        event-time order (ties in Spark's), as one batch."""
        from wql.runtime.config import RowBatch

        if self.ts is not None and self.valid is not None:
            ordered = []
            for _, rows in keys:
                ts, valid = self.ts[rows], self.valid[rows]
                order = np.argsort(np.where(valid, ts, MIN_TIME), kind="stable")
                ordered.append(rows[order] if np.any(order[:-1] > order[1:]) else rows)
            idx = ordered[0] if len(ordered) == 1 else np.concatenate(ordered)
        else:
            idx = keys[0][1] if len(keys) == 1 else np.concatenate([rows for _, rows in keys])
        n = len(idx)
        batch_keys = [k for k, rows in keys for _ in range(len(rows))]
        timestamps: Any = None
        timestamp_valid: Any = None
        if self.ts is not None and self.valid is not None:
            ts, valid = self.ts[idx], self.valid[idx]
            timestamps = ts
            timestamp_valid = valid if not valid.all() else None
        columns = tuple(v.take(idx) for v in self.values)
        wm = np.full(n, op.watermark, dtype=np.int64)
        pt = (
            np.full(n, op.processing_time, dtype=np.int64)
            if self.layout.mode == "ProcessingTime"
            else None
        )
        op.process_batch(RowBatch(batch_keys, timestamps, columns, wm, pt, timestamp_valid))


def staged_arrow(column: pd.Series, nans: np.ndarray | None) -> pa.Array:
    """A staged column in Arrow exactly as ``RecordBatch.from_pandas`` converts it,
    timestamps as naive microseconds (:func:`_microseconds`); ``nans``: the rows whose
    NaN is a NaN, not a NULL (:meth:`ProcessorLayout.nan_rows`, :func:`with_nans`)."""
    return with_nans(_microseconds(pa.array(column, from_pandas=True)), nans)


class _StagedValues:
    """One staged value column as the runtime wants it (:func:`wql.spark.layout.runtime_column`).

    A numeric NumPy column without nulls (pandas' NaN is Arrow's null) is the
    runtime's NumPy array as is; any other column goes through Arrow
    (:func:`staged_arrow`). Read once per call; :meth:`take` gives the rows of a
    key, or of the call, in the order asked.
    """

    def __init__(self, column: pd.Series, nans: np.ndarray | None) -> None:
        self.numpy: np.ndarray | None = None
        self.arrow: pa.Array | None = None
        if isinstance(column.dtype, np.dtype):
            values = column.to_numpy()
            kind = values.dtype.kind
            if kind in "iu" or (kind == "f" and not np.isnan(values).any()):
                self.numpy = values
                return
        self.arrow = staged_arrow(column, nans)

    def take(self, idx: np.ndarray | None) -> Any:
        """The rows at ``idx`` in its order (None: every row as staged)."""
        if self.numpy is not None:
            return self.numpy if idx is None else self.numpy[idx]
        assert self.arrow is not None
        return L.runtime_column(self.arrow if idx is None else self.arrow.take(pa.array(idx)))


def _restore_key(op: Any, k: tuple, saved: tuple[bytes, int, int] | None, wm: int, pt: int) -> None:
    """Key ``k``'s state into ``op`` at the clocks it last saw (``saved``: its snapshot,
    watermark and processing time; None: a new key), then the rise to the call's clocks,
    which fires its due timers."""
    op.forget_key(k)
    if saved is not None:
        blob, key_wm, key_pt = saved
        op.watermark = key_wm
        op.processing_time = key_pt
        op.restore_key(k, blob)
    else:
        op.watermark = MIN_TIME
        op.processing_time = MIN_TIME
    op.advance_watermark(wm)
    op.advance_processing_time(pt)


def _settle_key(op: Any, k: tuple, wm: int) -> tuple[list, list, list[int], list[int], bool]:
    """After key ``k``'s call: at the end of input (``wm`` is ``MAX_TIME``) what never
    fires is counted; its result and late rows, its event- and processing-time timers,
    and whether its state is kept."""
    ended = wm == MAX_TIME
    if ended:
        # every event-time timer fired in the rise; count what never fires
        op.end_of_input()
    results = op.drain()
    late = op.drain_late()
    event_timers, processing_timers = op.timers(k)
    keep = not ended and bool(k in op.active_keys() or event_timers or processing_timers)
    return results, late, event_timers, processing_timers, keep


def _moved(
    before: dict[str, Any],
    after: dict[str, Any],
    after_end: int,
    pending: int,
    rejected: dict[str, int] | None = None,
) -> dict | None:
    """The counters of one call (``None`` when nothing moved), with the ``pending``
    rows the key took in before; ``after_end`` rows arrived after the end of input:
    in, and dropped under :data:`REASON_AFTER_END`; ``rejected`` (``WindowProcessor._where``):
    rows WHERE rejected, in and ``rows_filtered`` (or dropped without event time)."""
    moved: dict[str, Any] = {
        k: after[k] - before[k] for k in ("rows_in", "rows_emitted", "late_rows")
    }
    moved["rows_in"] += pending
    dropped = {
        r: n - before["dropped"].get(r, 0)
        for r, n in after["dropped"].items()
        if n != before["dropped"].get(r, 0)
    }
    if after_end:
        moved["rows_in"] += after_end
        dropped[REASON_AFTER_END] = after_end
    if rejected:
        missing = rejected.get("missing", 0)
        moved["rows_in"] += rejected.get("filtered", 0) + missing
        if rejected.get("filtered"):
            moved["rows_filtered"] = rejected["filtered"]
        if missing:
            dropped[DROP_MISSING_TIMESTAMP] = dropped.get(DROP_MISSING_TIMESTAMP, 0) + missing
    if not dropped and not any(moved.values()):
        return None
    moved["dropped"] = dropped
    sides = {}
    for name, mine in after.get("sides", {}).items():
        was = before.get("sides", {}).get(name, {}).get("dropped", {})
        now = {r: n - was.get(r, 0) for r, n in mine["dropped"].items() if n != was.get(r, 0)}
        if now:
            sides[name] = {"dropped": now}
    if sides:
        moved["sides"] = sides  # a window join's drops by side (Counters.sides)
    return moved


def _event_times(column: pd.Series) -> tuple[np.ndarray, np.ndarray]:
    """The staged event-time column (BIGINT ms) as int64 values and a validity mask.

    Without nulls pandas holds it as int64; with nulls Spark's conversion made it
    float64 with NaN (or objects), read through Arrow as ``RecordBatch.from_pandas``
    reads it (NaN and None are nulls).
    """
    values = column.to_numpy()
    if values.dtype.kind in "iu":
        return values.astype(np.int64, copy=False), np.ones(len(values), dtype=bool)
    arr = pa.array(column, from_pandas=True)
    valid = arr.is_valid().to_numpy(zero_copy_only=False)
    return arr.fill_null(0).to_numpy(zero_copy_only=False).astype(np.int64), valid


def _runtime_values(column: pd.Series, order: np.ndarray | None, nans: np.ndarray | None) -> Any:
    """One staged value column as the runtime wants it (:class:`_StagedValues`), its
    rows in ``order`` (the rows' event-time order; None: as staged)."""
    return _StagedValues(column, nans).take(order)


def _microseconds(arr: pa.Array) -> pa.Array:
    """``arr`` with timestamps as naive UTC microseconds (Spark's precision, lossless).

    Spark hands a stream's rows over as pandas, whose timestamps are
    nanoseconds; Arrow turns those into ``pandas.Timestamp`` values (and a
    time zone into a ``zoneinfo`` object), which the runtime's snapshot, kept
    in the state store, refuses. Naive microseconds give plain ``datetime``
    values; the output's Arrow type (``timestamp[us, UTC]``) reads them as UTC.
    """
    wanted = pa.timestamp("us")
    if pa.types.is_timestamp(arr.type) and arr.type != wanted:
        return arr.cast(wanted)
    return arr


def _as_numpy(t: pa.DataType) -> bool:
    """Arrow types whose ``to_numpy`` column is the one ``to_pandas`` builds."""
    return bool(
        pa.types.is_integer(t)
        or pa.types.is_floating(t)
        or pa.types.is_boolean(t)
        or pa.types.is_string(t)
    )


def output_frame(batch: pa.RecordBatch) -> pd.DataFrame:
    """``batch.to_pandas()`` without Arrow's per-call pandas metadata work.

    A key's output is a few rows; ``RecordBatch.to_pandas`` costs more per
    call than building the frame from its columns. Numbers, booleans and
    strings convert with ``Array.to_numpy`` exactly as ``to_pandas`` converts
    them (integers with nulls as float64 with NaN, strings and nullable
    booleans as objects); every other type (timestamps with their time zone,
    decimals, arrays) through ``Array.to_pandas``.
    """
    columns: dict[str, Any] = {}
    for field, column in zip(batch.schema, batch.columns, strict=True):
        t = field.type
        if pa.types.is_floating(t) and _has_nan(column):
            # Spark reads a pandas NaN as NULL (its conversion masks ``isnull()``), but
            # not in an Arrow-backed column: the NaN a key or an aggregate holds stays NaN
            columns[field.name] = pd.arrays.ArrowExtensionArray(column)
        elif _as_numpy(t):
            columns[field.name] = column.to_numpy(zero_copy_only=False)
        else:
            columns[field.name] = column.to_pandas()
    return pd.DataFrame(columns, copy=False)


def _has_nan(column: pa.Array) -> bool:
    return bool(column.null_count < len(column) and pc.any(pc.is_nan(column)).as_py())
