"""The stream pipeline host: a whole pipeline (a query over a view, ...) in ONE stateful processor.

A query over a view on a stream (docs/streaming.md, "Pipelines") cannot be
two chained Spark stateful operators: the downstream one learns only the
micro-batch's new watermark, so the rows its view fires *at* a rise cannot
be processed before that rise, as Flink's operator chain does
(``AbstractStreamOperator.processWatermark``: an operator fires its timers
for ``W``, its rows go downstream, and only then is ``W`` forwarded; rows
fired while processing a row go downstream right after that row). Here every
stage's operator lives in one Python process, which orders them itself::

    source -> withWatermark -> WHERE -> stage 1's keys and values   (as run_streaming)
           -> groupBy(constant).transformWithStateInPandas(PipelineProcessor)
           -> ONE tagged stream of the LAST stage (R, L, C) -> result and late DataFrames

Per call (a micro-batch's rows, or a Spark timer), with ``W`` the
micro-batch's watermark (:meth:`WindowProcessor._clocks`, the same mapping
of Spark's watermark to WQL's):

1. **The rise.** Stage 1 advances to ``W``; the rows it fires become stage
   2's input rows (:class:`~wql.compiler.stream_pipelines.Link`), which
   stage 2 processes at its old watermark; then stage 2 advances to ``W``,
   and so on down the chain. Rows fired at one rise reach the next stage in
   the batch pipeline's order (docs/architecture.md, "Contract:
   pipelines"): rows fired by rows first, in order, then rows fired by
   timers by timer time, key (Spark's ascending order, NULL first), window
   end and window start; the stages that feed another tag their firings
   (``OperatorConfig.tag_firings``) for it.
2. **The rows.** The micro-batch's rows, in event-time order (ties in
   Spark's order), go to stage 1 at ``W``; every row it emits goes to stage
   2 in emission order, and so on (the watermark does not move within a
   micro-batch, so nothing interleaves).
3. **End of input** (a drained stream's end marker): the rise to the
   watermark after the last source row (``max event time - delay - 1``:
   batch replay's final rise, whatever micro-batches Spark ran), then every
   stage's ``end_of_input()`` in chain order.

The last stage's result and late rows are the output, with its counters
(the rows it took in from its view, as in batch); an upstream stage's late
rows and counters are its own query's (that view runs as its own stream).

**State and parallelism.** Stages are keyed differently (per auction, then
per window), so the processor holds every stage for ALL keys: the stream is
grouped by a constant, and one ``ValueState`` holds each stage's operator
snapshot. The pipeline runs in one task (parallelism 1), and every call
restores and saves the whole pipeline's state: that is the price of
Flink's order in Spark, whose stateful operators see one key at a time and
one watermark per micro-batch. One Spark timer, at the earliest runtime
timer of any stage, wakes it when the watermark rises without rows.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql.streaming.stateful_processor import (
    ExpiredTimerInfo,
    TimerValues,
)

from wql.compiler import plan as P
from wql.compiler.backends.operator import build_stage
from wql.compiler.stream_pipelines import Field, Link, view_links
from wql.runtime.config import (
    EMIT_KEY,
    EMIT_PANE_INDEX,
    EMIT_PANE_TIMING,
    EMIT_RESULTS,
    EMIT_WINDOW_END,
    EMIT_WINDOW_START,
    EMIT_WINDOW_TIME,
    RowBatch,
)
from wql.runtime.windows import MAX_TIME, MIN_TIME
from wql.spark import layout as L
from wql.spark.streaming import (
    END_MS,
    ProcessorLayout,
    StreamingRun,
    WindowProcessor,
    _microseconds,
    _moved,
    processor_layout,
    run_streaming,
    spark_watermark_delay_ms,
    stream_input,
)

__all__ = [
    "FIELD_COLUMNS",
    "PipelineProcessor",
    "PipelineStage",
    "key_tuples",
    "read_field",
    "run_stream",
    "run_stream_pipeline",
]

_GROUP = "__wql_pipeline"  # the constant grouping column: one group holds every key

#: The tagged columns of the emitted fields a link reads.
FIELD_COLUMNS = {
    EMIT_WINDOW_START: L.WINDOW_START,
    EMIT_WINDOW_END: L.WINDOW_END,
    EMIT_WINDOW_TIME: L.WINDOW_TIME,
    EMIT_PANE_INDEX: L.PANE_INDEX,
    EMIT_PANE_TIMING: L.PANE_TIMING,
}


def run_stream(
    stages: tuple[P.OperatorStage, ...], source: DataFrame, *, end: DataFrame | None = None
) -> StreamingRun:
    """The streaming run of the chain ``stages`` (upstream first, the query last) over
    ``source``: :func:`run_streaming` for one stage, :func:`run_stream_pipeline` for more."""
    if len(stages) == 1:
        return run_streaming(stages[0], source, end=end)
    return run_stream_pipeline(stages, source, end=end)


def run_stream_pipeline(
    stages: tuple[P.OperatorStage, ...], source: DataFrame, *, end: DataFrame | None = None
) -> StreamingRun:
    """Build the pipeline ``stages`` (upstream first, at least two) over the streaming
    ``source`` as one stateful processor (see the module doc); ``end`` as for
    :func:`run_streaming`. The run's result and late output are the last stage's."""
    links = view_links(stages)
    ops = [build_stage(s, tag_firings=i < len(stages) - 1) for i, s in enumerate(stages)]
    first, last = stages[0], stages[-1]
    drainable = end is not None
    staged, _, _, drainable, idle_ms, heartbeats = stream_input(
        first, ops[0], source, end, event_time_mode=True
    )
    mode = "EventTime"
    delay = spark_watermark_delay_ms(first)
    end_watermark = END_MS - delay if drainable else None
    layout = processor_layout(last, ops[-1], mode, end_watermark=end_watermark)
    specs = tuple(
        PipelineStage(
            op.config,
            len(op.keys),
            len(op.values),
            L.tagged_layout(s, op)[1],
            len(op.results),
            None if i == 0 else links[i - 1],
        )
        for i, (s, op) in enumerate(zip(stages, ops, strict=True))
    )
    has_event_time = first.source.event_time is not None
    processor = PipelineProcessor(layout, specs, delay, has_event_time)
    out_schema, _ = L.tagged_layout(last, ops[-1])
    tagged = (
        staged.withColumn(_GROUP, F.lit(0))
        .groupBy(_GROUP)
        .transformWithStateInPandas(
            statefulProcessor=processor,
            outputStructType=out_schema,
            outputMode="Append",
            timeMode=mode,
        )
    )
    result = L.results(last, ops[-1], tagged)
    late = L.late_rows(ops[-1], tagged) if last.late_output is not None else None
    counters = L.counters_of(tagged)
    return StreamingRun(
        last,
        ops[-1],
        tagged,
        result,
        late,
        counters,
        mode,
        source,
        drainable,
        idle_ms,
        heartbeats,
        stages=stages,
    )


@dataclass(frozen=True)
class PipelineStage:
    """One stage of the processor (pickled to the workers)."""

    config: Any
    n_keys: int
    n_values: int
    #: builds the stage's emitted rows as the tagged stream's Arrow columns (a link reads them)
    tagged: L.TaggedLayout
    n_results: int
    #: how the previous stage's rows become this stage's input (None: the first stage)
    link: Link | None


class PipelineProcessor(WindowProcessor):
    """Every stage of a pipeline for all keys, in Flink's chain order (see the module doc).

    It reuses :class:`~wql.spark.streaming.WindowProcessor`'s ``init`` (its
    one ``ValueState``, here the whole pipeline's), clocks (Spark's watermark
    as WQL's, the end of input) and Spark timer bookkeeping; its ``layout``
    is the last stage's, whose rows it emits.
    """

    def __init__(
        self,
        layout: ProcessorLayout,
        stages: tuple[PipelineStage, ...],
        delay_ms: int,
        has_event_time: bool,
    ) -> None:
        super().__init__(layout)
        self.stages = stages
        #: ``withWatermark``'s delay: the final watermark is ``max event time - delay``
        self.delay_ms = delay_ms
        self.has_event_time = has_event_time

    def handleInputRows(
        self, key: Any, rows: Iterator[pd.DataFrame], timerValues: TimerValues
    ) -> Iterator[pd.DataFrame]:
        frames = [f for f in rows if len(f)]
        frame = None
        if frames:
            frame = pd.concat(frames, ignore_index=True) if len(frames) > 1 else frames[0]
        yield from self._call(timerValues, frame)

    def handleExpiredTimer(
        self, key: Any, timerValues: TimerValues, expiredTimerInfo: ExpiredTimerInfo
    ) -> Iterator[pd.DataFrame]:
        yield from self._call(timerValues, None)

    # -- one call ---------------------------------------------------------------

    def _call(self, tv: TimerValues, frame: pd.DataFrame | None) -> Iterator[pd.DataFrame]:
        wm, _ = self._clocks(tv)
        ops, max_ts = self._restore_pipeline()
        last = ops[-1]
        before = last.counters.as_dict()
        self._results: list[tuple] = []
        self._late: list[tuple] = []
        after_end = 0
        if wm == MAX_TIME:
            after_end = 0 if frame is None else len(frame)
            if max_ts is not None:
                # batch replay's final rise (the watermark after the last row), then the end
                self._rise(ops, max(MIN_TIME, max_ts - self.delay_ms))
            self._rise(ops, MAX_TIME)
        else:
            self._rise(ops, wm)
            if frame is not None:
                max_ts = self._rows(ops, frame, max_ts)
        yield from self._finish_pipeline(ops, max_ts, wm, before, after_end)

    def _restore_pipeline(self) -> tuple[list[Any], int | None]:
        from wql.runtime import snapshot as snap
        from wql.runtime.operator_factory import make_operator
        from wql.runtime.window_operator import WindowOperator

        saved = self.state.get()
        self._had_state = saved is not None
        self._spark_timers = set()
        self._pending_rows = 0
        if saved is None:
            return [make_operator(s.config) for s in self.stages], None
        blob, _, _, spark_timers, pending = saved
        self._spark_timers = {int(t) for t in spark_timers or ()}
        self._pending_rows = int(pending or 0)
        payload = snap.loads(bytes(blob))
        ops = []
        for spec, data in zip(self.stages, payload["stages"], strict=True):
            if isinstance(data, bytes):
                ops.append(WindowOperator.restore(spec.config, data))
                continue
            # a window rank keeps per-key snapshots (it has no whole-operator one)
            op = make_operator(spec.config)
            op.watermark = data["watermark"]
            for k, b in data["keys"]:
                op.restore_key(k, b)
            ops.append(op)
        return ops, payload["max_ts"]

    def _snapshot(self, ops: list[Any], max_ts: int | None) -> bytes:
        from wql.runtime import snapshot as snap
        from wql.runtime.window_operator import WindowOperator

        stages: list[Any] = []
        for op in ops:
            if isinstance(op, WindowOperator):
                stages.append(op.snapshot())
            else:
                keys = [(k, op.snapshot_key(k)) for k in op.active_keys()]
                stages.append({"watermark": op.watermark, "keys": keys})
        return snap.dumps({"stages": stages, "max_ts": max_ts})

    def _rise(self, ops: list[Any], watermark: int) -> None:
        self._results += self._rise_chain(ops, 0, len(ops), watermark)

    def _rise_chain(self, ops: list[Any], lo: int, hi: int, watermark: int) -> list[tuple]:
        """Stage by stage of the chain ``ops[lo:hi]``: process the rows the stage before
        fired at this rise, then rise. Returns the rows the chain's last stage emitted."""
        rows: list[tuple] = []
        for i in range(lo, hi):
            op = ops[i]
            fed: list[tuple] = []
            if i > lo and rows:
                self._feed(i, op, rows)
                fed = op.drain()
            if watermark == MAX_TIME:
                op.end_of_input()
            else:
                op.advance_watermark(watermark)
            fired = op.drain()
            if i < hi - 1:
                fired.sort(key=self._timer_order(i))
            rows = fed + fired
            self._collect(i, ops, op)
        return rows

    def _rows(self, ops: list[Any], frame: pd.DataFrame, max_ts: int | None) -> int | None:
        """The micro-batch's rows through every stage, in emission order."""
        spec = self.stages[0]
        batch, timestamps, valid_mask, max_ts = self._in_time_order(
            frame, spec.n_keys + spec.n_values, max_ts
        )
        n = batch.num_rows
        keys = key_tuples([batch.column(i) for i in range(spec.n_keys)], n)
        columns = tuple(
            L.runtime_column(batch.column(spec.n_keys + j)) for j in range(spec.n_values)
        )
        wm = np.full(n, ops[0].watermark, dtype=np.int64)
        ops[0].process_batch(RowBatch(keys, timestamps, columns, wm, None, valid_mask))
        self._results += self._down(ops, 0, len(ops))
        return max_ts

    def _down(self, ops: list[Any], lo: int, hi: int) -> list[tuple]:
        """Stage ``lo`` took rows: what it emitted through ``ops[lo + 1:hi]``, in emission
        order. Returns the rows the chain's last stage emitted."""
        rows = ops[lo].drain()
        self._collect(lo, ops, ops[lo])
        for i in range(lo + 1, hi):
            if rows:
                self._feed(i, ops[i], rows)
            rows = ops[i].drain()
            self._collect(i, ops, ops[i])
        return rows

    def _in_time_order(
        self, frame: pd.DataFrame, ts_index: int, max_ts: int | None
    ) -> tuple[pa.RecordBatch, Any, Any, int | None]:
        """The micro-batch's rows as Arrow (timestamps in microseconds) in event-time order
        (stable: ties keep Spark's order), their event times (``ts_index``: the column) and
        validity mask (None: all valid; both None without event time), and the largest
        event time seen."""
        raw = pa.RecordBatch.from_pandas(frame, preserve_index=False)
        batch = pa.RecordBatch.from_arrays(
            [_microseconds(c) for c in raw.columns], names=raw.schema.names
        )
        if not self.has_event_time:
            return batch, None, None, max_ts
        ts_arr = batch.column(ts_index)
        valid = ts_arr.is_valid().to_numpy(zero_copy_only=False)
        ts = ts_arr.fill_null(0).to_numpy(zero_copy_only=False).astype(np.int64)
        order = np.argsort(np.where(valid, ts, MIN_TIME), kind="stable")
        batch = batch.take(pa.array(order))
        ts, valid = ts[order], valid[order]
        if valid.any():
            top = int(ts[valid].max())
            max_ts = top if max_ts is None else max(max_ts, top)
        return batch, ts, (valid if not valid.all() else None), max_ts

    def _collect(self, i: int, ops: list[Any], op: Any) -> None:
        """The last stage's late rows are output; an upstream's are its own query's."""
        late = op.drain_late()
        if i == len(ops) - 1:
            self._late += late

    def _feed(self, i: int, op: Any, rows: list[tuple]) -> None:
        """Stage ``i - 1``'s emitted ``rows`` as stage ``i``'s input, at its watermark.

        The rows go through the tagged stream's Arrow columns, the values the
        batch pipeline's reader gets from Spark (docs/architecture.md).
        """
        up, spec = self.stages[i - 1], self.stages[i]
        link = spec.link
        assert link is not None
        batch = up.tagged.rows(rows)
        n = batch.num_rows
        keys = key_tuples([read_field(batch, f, up.n_keys) for f in link.keys], n)
        columns = tuple(L.runtime_column(read_field(batch, f, up.n_keys)) for f in link.values)
        timestamps: Any = None
        valid_mask: Any = None
        if link.event_time is not None:
            ts_arr = batch.column(FIELD_COLUMNS[link.event_time])
            valid = ts_arr.is_valid().to_numpy(zero_copy_only=False)
            timestamps = ts_arr.fill_null(0).to_numpy(zero_copy_only=False).astype(np.int64)
            valid_mask = valid if not valid.all() else None
        wm = np.full(n, op.watermark, dtype=np.int64)
        op.process_batch(RowBatch(keys, timestamps, columns, wm, None, valid_mask))

    def _timer_order(self, i: int) -> Any:
        """The batch pipeline's order of the rows a rise fired (docs/architecture.md)."""
        tag = EMIT_RESULTS + self.stages[i].n_results  # FIRED_FIELDS follow the results

        def order(row: tuple) -> tuple:
            return (
                row[tag + 1],
                tuple(_spark_order(v) for v in row[EMIT_KEY]),
                _spark_order(row[EMIT_WINDOW_END]),
                _spark_order(row[EMIT_WINDOW_START]),
            )

        return order

    def _finish_pipeline(
        self, ops: list[Any], max_ts: int | None, wm: int, before: dict, after_end: int
    ) -> Iterator[pd.DataFrame]:
        ended = wm == MAX_TIME
        due = [t for op in ops for k in op.active_keys() for t in op.timers(k)[0]]
        keep = not ended and any(op.active_keys() for op in ops)
        # one Spark timer: the earliest runtime timer of any stage wakes the whole pipeline
        spark_timers = self._sync_timers([min(due)] if due else [], wm, keep)
        counters = _moved(before, ops[-1].counters.as_dict(), after_end, self._pending_rows)
        pending = 0
        results, late = self._results, self._late
        if counters is not None and keep and not (results or late or counters["dropped"]):
            # only rows taken in: they wait in the state for a call with output
            pending, counters = counters["rows_in"], None
        if keep:
            self.state.update(
                (
                    self._snapshot(ops, max_ts),
                    ops[0].watermark,
                    MIN_TIME,
                    sorted(spark_timers),
                    pending,
                )
            )
        elif self._had_state:
            self.state.clear()
        if results or late or counters:
            yield self.layout.tagged.rows(results, late, counters).to_pandas()


def read_field(batch: pa.RecordBatch, f: Field, n_keys: int) -> pa.Array:
    """One input column of a reader from the view's tagged rows (see :class:`Field`)."""
    kind = f.source[0]
    if kind == "key":
        arr = batch.column(L.key_columns(n_keys)[f.source[1]])
    elif kind == "first":
        return pc.equal(batch.column(L.PANE_INDEX), 0)
    elif kind == "last":
        return batch.column(L.IS_LAST)
    else:
        index = f.source[1]
        name = FIELD_COLUMNS.get(index) or L.result_column(index - EMIT_RESULTS)
        arr = batch.column(name)
    if f.as_ == "timestamp":
        # a window bound in ms as the TIMESTAMP the view's column holds (naive UTC, us)
        return pc.multiply(arr, 1000).cast(pa.timestamp("us"))
    if pa.types.is_timestamp(arr.type) and arr.type.tz is not None:
        return arr.cast(pa.timestamp("us"))
    return arr


def key_tuples(arrays: list[pa.Array], n: int) -> list[tuple]:
    if not arrays:
        return [()] * n
    return list(zip(*(a.to_pylist() for a in arrays), strict=True))


def _spark_order(v: Any) -> tuple:
    """A sort key of one value in Spark's ascending order: NULL first, NaN last."""
    if v is None:
        return (0,)
    if isinstance(v, float) and v != v:
        return (1, 1)
    return (1, 0, v)
