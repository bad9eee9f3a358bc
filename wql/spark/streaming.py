"""The streaming host: a query's ``WindowOperator`` as a Spark Structured Streaming operator.

A streaming DataFrame passed to :meth:`wql.api.Compiled.apply` lands here
(:func:`run_streaming`) when the planner chose the operator engine for a
stream (today always: docs/native.md, "Streaming"). Operator queries run as::

    source -> withWatermark(ts, delay + 1 ms) -> WHERE -> key/value expressions
           -> groupBy(key).transformWithStateInPandas(WindowProcessor, timeMode)
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
* **State** per key is one ``ValueState``: the runtime's
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
* **One output**: Spark's stateful operator has a single output, so result
  rows, late rows and drop counters come out of one tagged stream
  (:attr:`StreamingRun.tagged`) and are split by ``__wql_kind``. Each split
  is an ordinary streaming DataFrame; starting both as two streaming queries
  runs the operator twice with independent checkpoints, whose micro-batch
  boundaries may differ. ``wql run --stream`` (:mod:`wql.spark.stream_sinks`)
  therefore writes the tagged stream once and fans it out exactly once.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql.streaming.stateful_processor import (
    ExpiredTimerInfo,
    StatefulProcessor,
    StatefulProcessorHandle,
    TimerValues,
)

from wql.compiler import plan as P
from wql.compiler.backends.operator import OperatorPlan, build_operator
from wql.compiler.types import WqlType
from wql.errors import WqlUnsupportedError

# The batch host's tagged-stream layout and conversions are the contract both
# hosts share: one schema, one post-aggregation projection, one late output.
from wql.spark.batch import (
    COUNTERS,
    KIND,
    _column,
    _late_output,
    _output_schema,
    _PartitionTask,
    _post_aggregation,
)

__all__ = [
    "STATE_SCHEMA",
    "StreamingRun",
    "WindowProcessor",
    "run_streaming",
    "spark_watermark_delay_ms",
    "time_mode",
]

MIN_TIME = -(2**63)
MAX_TIME = 2**63 - 1

#: Per-key Spark state: the runtime's per-key snapshot, the clocks the key last saw and
#: the Spark timers the processor registered for it (kept here so that no call needs
#: a listTimers() round trip to the JVM).
STATE_SCHEMA = "snapshot BINARY, watermark LONG, processing_time LONG, spark_timers ARRAY<LONG>"

_KEEP = "__wql_keep"
_TS = "__wql_ts"
_ALL = "__wql_all"  # the constant grouping column of a windowAll query


def spark_watermark_delay_ms(query: P.Query) -> int:
    """The ``withWatermark`` delay that makes Spark's watermark equal WQL's.

    Spark: ``max event time - delay``; WQL (Flink): ``max event time - delay - 1``.
    """
    et = query.source.event_time
    return 0 if et is None else et.delay_ms + 1


def time_mode(op: OperatorPlan) -> str:
    """The ``transformWithState`` time mode: ``EventTime``, ``ProcessingTime`` or ``None``."""
    if op.mixes_time_domains:
        q = op.query
        raise WqlUnsupportedError(
            f"query {q.name!r} uses both event time and processing time; a Spark streaming "
            "operator has timers in one time domain only, so it cannot run as a stream",
            q.trigger.span if q.trigger is not None else q.span,
            hint="run it in batch (replay with a processing_time column), or use one clock",
        )
    if op.uses_event_time:
        return "EventTime"
    if op.uses_processing_time:
        return "ProcessingTime"
    return "None"


@dataclass
class StreamingRun:
    """One operator-engine query over a streaming source.

    ``tagged`` is the processor's single output (``__wql_kind`` R/L/C);
    ``result`` and ``late`` are its splits with the plan's output and
    late-output schemas (``late`` is ``None`` without ``LATE DATA TO``).
    ``counters`` (a split too) has one row per processor call that dropped
    rows: a JSON object under ``__wql_counters``.
    """

    query: P.Query
    operator: OperatorPlan
    tagged: DataFrame
    result: DataFrame
    late: DataFrame | None
    counters: DataFrame
    time_mode: str

    def release(self) -> None:
        """Nothing is cached for a stream (the batch host's ``release`` counterpart)."""


def run_streaming(query: P.Query, source: DataFrame) -> StreamingRun:
    """Build the streaming operator pipeline of ``query`` over the streaming ``source``.

    ``source`` has the source relation's columns (names as declared). Nothing
    runs until the caller starts a streaming query on one of the outputs.
    """
    op = build_operator(query)
    mode = time_mode(op)
    et = query.source.event_time
    df = source
    if et is not None:
        # delay + 1 ms: Spark's watermark is then exactly WQL's (see the module doc)
        df = df.withWatermark(et.column, f"{spark_watermark_delay_ms(query)} milliseconds")
    if query.filter is not None:
        # WHERE after the watermark: a row WHERE rejects still advances it, as in batch
        # replay. Spark's optimizer moves a deterministic predicate that does not read
        # the event-time column below the watermark (PushPredicateThroughNonJoin), and
        # splits a guarded predicate into conjuncts first (and folds `rand() >= 0`).
        # So the WHERE result is a column computed next to an always-true
        # non-deterministic test: a filter on a non-deterministic projection stays
        # above the watermark (docs/streaming.md, "The streaming watermark").
        keep = F.when(F.rand(0) * 0 == 0, F.expr(query.filter.sql))
        df = df.withColumn(_KEEP, keep).where(F.col(_KEEP)).drop(_KEEP)
    key_cols = [f"__wql_k{i}" for i in range(len(op.keys))]
    value_cols = [f"__wql_v{i}" for i in range(len(op.values))]
    ts_col = (
        # a plain BIGINT: the operator's input then has no watermark attribute,
        # so Spark drops no late row; the runtime applies WQL's lateness rule
        F.unix_millis(F.col(_quote(et.column)).cast("timestamp")).alias(_TS, metadata={})
        if et is not None
        else F.lit(None).cast("bigint").alias(_TS)
    )
    # Every staged column gets empty metadata: a plain reference to the event-time
    # column (a late-output value, a key) would otherwise keep Spark's watermark
    # marker, and Spark would drop rows behind the previous batch's watermark.
    staged = df.select(
        *[F.expr(k.expr.sql).alias(c, metadata={}) for k, c in zip(op.keys, key_cols, strict=True)],
        *[F.expr(v.sql).alias(c, metadata={}) for v, c in zip(op.values, value_cols, strict=True)],
        ts_col,
        *([] if key_cols else [F.lit(0).alias(_ALL)]),
    )
    out_schema, arrow_schema, agg_types, late_types = _output_schema(query, op)
    processor = WindowProcessor(
        _Layout(
            config=op.config,
            n_keys=len(key_cols),
            n_values=len(value_cols),
            key_types=tuple(k.type for k in op.keys),
            agg_types=agg_types,
            late_types=late_types,
            out_schema=arrow_schema,
            mode=mode,
            has_event_time=et is not None,
        )
    )
    tagged = staged.groupBy(*(key_cols or [_ALL])).transformWithStateInPandas(
        statefulProcessor=processor,
        outputStructType=out_schema,
        outputMode="Append",
        timeMode=mode,
    )
    result = _post_aggregation(query, op, tagged.where(F.col(KIND) == "R"))
    late = None
    if query.late_output is not None:
        late = _late_output(query, op, tagged.where(F.col(KIND) == "L"))
    counters = tagged.where(F.col(KIND) == "C").select(COUNTERS)
    return StreamingRun(query, op, tagged, result, late, counters, mode)


# --------------------------------------------------------------------------- the processor


@dataclass(frozen=True)
class _Layout:
    """What the processor needs besides the runtime config (pickled to the workers)."""

    config: Any
    n_keys: int
    n_values: int
    key_types: tuple[WqlType, ...]
    agg_types: tuple[WqlType, ...]
    late_types: tuple[WqlType, ...]
    out_schema: pa.Schema
    mode: str
    #: the source has event time: rows carry it (ordering, TIME evictor,
    #: FIRST/LAST_VALUE) whatever the time mode, as in batch replay
    has_event_time: bool


class WindowProcessor(StatefulProcessor):
    """Flink's WindowOperator for one key at a time, its state in Spark's state store.

    ``handleInputRows(key, rows, timerValues)``: restore the key, raise its
    clock to the micro-batch's (firing due timers), process the batch's rows
    of the key in event-time order, emit, save, re-sync Spark timers.
    ``handleExpiredTimer(key, timerValues, expiredTimerInfo)``: the same
    without rows. Both return pandas frames of the tagged layout.
    """

    def __init__(self, layout: _Layout) -> None:
        self.layout = layout

    def init(self, handle: StatefulProcessorHandle) -> None:
        from wql.runtime.operator import WindowOperator

        self.handle = handle
        self.state = handle.getValueState("wql_key", STATE_SCHEMA)
        self.op = WindowOperator(self.layout.config)
        self._had_state = False
        self._spark_timers: set[int] = set()
        # an output helper sharing the batch host's Arrow conversions
        lay = self.layout
        self.out = _PartitionTask(
            config=lay.config,
            n_keys=lay.n_keys,
            n_values=lay.n_values,
            agg_types=lay.agg_types,
            key_types=lay.key_types,
            late_index=(),
            late_types=lay.late_types,
            has_event_time=lay.has_event_time,
            processing=lay.mode == "ProcessingTime",
            wall_clock=False,
            final_watermark=MIN_TIME,
            final_processing_time=MIN_TIME,
            clock_events=None,
            out_schema=lay.out_schema,
        )

    def handleInputRows(
        self, key: Any, rows: Iterator[pd.DataFrame], timerValues: TimerValues
    ) -> Iterator[pd.DataFrame]:
        frames = [f for f in rows if len(f)]
        wm, pt = self._clocks(timerValues)
        k = self._key(key)
        dropped_before = dict(self.op.counters.dropped)
        self._restore(k, wm, pt)
        if frames:
            self._process(k, pd.concat(frames, ignore_index=True) if len(frames) > 1 else frames[0])
        yield from self._finish(k, wm, pt, dropped_before)

    def handleExpiredTimer(
        self, key: Any, timerValues: TimerValues, expiredTimerInfo: ExpiredTimerInfo
    ) -> Iterator[pd.DataFrame]:
        wm, pt = self._clocks(timerValues)
        k = self._key(key)
        dropped_before = dict(self.op.counters.dropped)
        self._restore(k, wm, pt)
        yield from self._finish(k, wm, pt, dropped_before)

    def close(self) -> None:
        pass

    # -- steps ----------------------------------------------------------------

    def _clocks(self, tv: TimerValues) -> tuple[int, int]:
        mode = self.layout.mode
        wm = MIN_TIME
        pt = MIN_TIME
        if mode == "EventTime":
            spark_wm = int(tv.getCurrentWatermarkInMs())
            # Spark's watermark starts at 0 and cannot go below it: 0 = none yet
            wm = spark_wm if spark_wm > 0 else MIN_TIME
        elif mode == "ProcessingTime":
            pt = int(tv.getCurrentProcessingTimeInMs())
        return wm, pt

    def _key(self, key: Any) -> tuple:
        if self.layout.n_keys == 0:
            return ()
        return tuple(v.item() if isinstance(v, np.generic) else v for v in key)

    def _restore(self, k: tuple, wm: int, pt: int) -> None:
        op = self.op
        op.forget_key(k)
        # get() alone (None when absent): every state call is a round trip to the JVM
        saved = self.state.get()
        self._had_state = saved is not None
        self._spark_timers = set()
        if saved is not None:
            blob, key_wm, key_pt, spark_timers = saved
            self._spark_timers = {int(t) for t in spark_timers or ()}
            # the clocks this key last saw: a rise from there fires its due timers
            op.watermark = int(key_wm)
            op.processing_time = int(key_pt)
            op.restore_key(k, bytes(blob))
        else:
            op.watermark = MIN_TIME
            op.processing_time = MIN_TIME
        op.advance_watermark(wm)
        op.advance_processing_time(pt)

    def _process(self, k: tuple, frame: pd.DataFrame) -> None:
        from wql.runtime.config import RowBatch

        lay = self.layout
        # Spark hands the columns over by position (``_0``, ``_1``, ...), in the
        # order of the staged select: keys, values, event time
        batch = _microseconds(pa.RecordBatch.from_pandas(frame, preserve_index=False))
        n = batch.num_rows
        first_value = lay.n_keys
        ts_index = lay.n_keys + lay.n_values
        if lay.has_event_time:
            ts_arr = batch.column(ts_index)
            valid = ts_arr.is_valid().to_numpy(zero_copy_only=False)
            ts = ts_arr.fill_null(0).to_numpy(zero_copy_only=False).astype(np.int64)
            # event-time order within the micro-batch (stable: ties keep Spark's order);
            # rows without event time keep their place and are counted by the runtime
            order = np.argsort(np.where(valid, ts, MIN_TIME), kind="stable")
            if not np.all(order[:-1] <= order[1:]):
                batch = batch.take(pa.array(order))
                ts, valid = ts[order], valid[order]
            timestamps: Any = ts
            timestamp_valid: Any = valid if not valid.all() else None
        else:
            timestamps, timestamp_valid = None, None
        columns = tuple(_column(batch.column(first_value + i)) for i in range(lay.n_values))
        wm = np.full(n, self.op.watermark, dtype=np.int64)
        pt = (
            np.full(n, self.op.processing_time, dtype=np.int64)
            if lay.mode == "ProcessingTime"
            else None
        )
        self.op.process_batch(RowBatch([k] * n, timestamps, columns, wm, pt, timestamp_valid))

    def _finish(
        self, k: tuple, wm: int, pt: int, dropped_before: dict[str, int]
    ) -> Iterator[pd.DataFrame]:
        op = self.op
        results = op.drain()
        late = op.drain_late()
        event_timers, processing_timers = op.timers(k)
        if self.layout.mode == "EventTime":
            spark_timers = self._sync_timers(event_timers, wm)
        elif self.layout.mode == "ProcessingTime":
            # a processing-time timer at T is due once the clock passes T (reads T + 1:
            # Flink's 1 ms delay, WindowOperator.advance_processing_time)
            spark_timers = self._sync_timers([t + 1 for t in processing_timers], pt)
        else:
            spark_timers = set()
        if k in op.active_keys() or event_timers or processing_timers:
            self.state.update(
                (op.snapshot_key(k), op.watermark, op.processing_time, sorted(spark_timers))
            )
        elif self._had_state:
            self.state.clear()
        op.forget_key(k)
        if results:
            yield self.out._results_batch(results).to_pandas()
        if late:
            yield self.out._late_batch(late).to_pandas()
        delta = {
            r: n - dropped_before.get(r, 0)
            for r, n in op.counters.dropped.items()
            if n != dropped_before.get(r, 0)
        }
        if delta:
            yield self.out._batch(
                {
                    KIND: pa.array(["C"], pa.string()),
                    COUNTERS: pa.array([json.dumps({"dropped": delta})], pa.string()),
                },
                1,
            ).to_pandas()

    def _sync_timers(self, due: list[int], now: int) -> set[int]:
        """Spark timers at the distinct times the key's runtime timers become due.

        Spark fires a timer whose time is strictly below the batch's clock;
        ``due`` are the clock readings at which the key's runtime timers fire
        (``T`` for an event-time timer at ``T``, ``T + 1`` for a processing-time
        one); a timer due at ``T`` needs the clock to reach ``T``, and one
        at or below the current clock waits for the next rise: Spark time
        ``max(T - 1, now)``. Timers below ``now`` are Spark's business (it is
        firing them in this batch and deletes them after), a stale one at
        ``now`` only wakes the key once; later stale ones are deleted.
        Returns the key's Spark timers from ``now`` on (kept in its state).
        """
        wanted = {max(t - 1, now) for t in due if t < MAX_TIME}
        existing = {t for t in self._spark_timers if t >= now}
        for t in existing - wanted:
            if t > now:
                self.handle.deleteTimer(t)
        for t in wanted - existing:
            self.handle.registerTimer(t)
        return wanted | (existing & {now})


def _microseconds(batch: pa.RecordBatch) -> pa.RecordBatch:
    """``batch`` with its timestamps as naive UTC microseconds (Spark's precision, lossless).

    Spark hands a stream's rows over as pandas, whose timestamps are
    nanoseconds; Arrow turns those into ``pandas.Timestamp`` values (and a
    time zone into a ``zoneinfo`` object), which the runtime's snapshot, kept
    in the state store, refuses. Naive microseconds give plain ``datetime``
    values; the output's Arrow type (``timestamp[us, UTC]``) reads them as UTC.
    """
    wanted = pa.timestamp("us")
    if not any(pa.types.is_timestamp(f.type) and f.type != wanted for f in batch.schema):
        return batch
    columns = [
        c.cast(wanted) if pa.types.is_timestamp(c.type) and c.type != wanted else c
        for c in batch.columns
    ]
    return pa.RecordBatch.from_arrays(columns, names=batch.schema.names)


def _quote(name: str) -> str:
    return "`" + name.replace("`", "``") + "`"
