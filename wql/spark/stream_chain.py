"""The stream pipeline host: a whole pipeline (a query over a view, ...) in ONE stateful processor.

A query over a view on a stream (docs/streaming.md, "Pipelines") is not two
plainly chained Spark stateful operators: the downstream one learns only the
micro-batch's new watermark, so the rows its view fires *at* a rise would be
processed after that rise, not before it as Flink's operator chain does
(``AbstractStreamOperator.processWatermark``: an operator fires its timers
for ``W``, its rows go downstream, and only then is ``W`` forwarded; rows
fired while processing a row go downstream right after that row). Here every
stage's operator lives in one Python process, which orders them itself (a
link in Spark SQL cuts the chain into such processors that pass the order on
in tags, :mod:`wql.spark.stream_links`)::

    source -> withWatermark -> WHERE -> stage 1's keys and values   (as run_streaming)
           -> groupBy(the first stage's partition keys, or a constant)
              .transformWithStateInPandas(AllKeysProcessor: ChainBody)
           -> ONE tagged stream of the LAST stage (R, L, C) -> result and late DataFrames

Per call (a micro-batch's rows, or a Spark timer), with ``W`` the
micro-batch's watermark (:func:`~wql.spark.streaming.call_clocks`, the same mapping
of Spark's watermark to WQL's):

1. **The rise.** Stage 1 advances to ``W``; the rows it fires become stage
   2's input rows (:class:`~wql.compiler.plan.Link`), which
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

(A link that needs Spark SQL cuts the pipeline into one such processor per
segment, with Spark's projection between them: :mod:`wql.spark.stream_links`.)

The last stage's result and late rows are the output, with its counters
(the rows it took in from its view, as in batch); an upstream stage's late
rows and counters are its own query's (that view runs as its own stream).

**State and parallelism.** A processor holds every stage for the keys of
its Spark group, one ``ValueState`` with each stage's operator snapshot,
restored and saved by every call; one Spark timer, at the earliest runtime
timer of any stage, wakes it when the watermark rises without rows.

* A *partitioned* chain (``StreamChain.partition``, the planner's
  :func:`~wql.compiler.stream_plan.chain_partition`: every later stage keeps
  copies of some of the first stage's keys among its own and takes its
  event time from a window's end or time) is grouped by those keys: rows
  of different groups never meet in any stage, so each group runs the
  pipeline of its own rows in Flink's order, on every core, and a call
  restores and saves the state of its group only (docs/streaming.md,
  "Partitioned pipelines").
* Any other chain (a stage that rolls every key up, ranks across keys or
  groups by other keys) is grouped by a constant: ONE task holds every
  stage for ALL keys (parallelism 1), and every call restores and saves the
  whole pipeline's state.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql.streaming.stateful_processor import (
    ExpiredTimerInfo,
    StatefulProcessor,
    StatefulProcessorHandle,
    TimerValues,
)

from wql.compiler import plan as P
from wql.compiler.backends.operator import OperatorPlan, build_stage, tagging_firings
from wql.runtime.config import (
    EMIT_RESULTS,
    RowBatch,
)
from wql.runtime.pipeline import OperatorChain
from wql.runtime.watermarks import bounded_watermark
from wql.runtime.windows import MAX_TIME, MIN_TIME
from wql.spark import layout as L
from wql.spark.deferred import deferred
from wql.spark.streaming import (
    ProcessorState,
    StreamQueryRun,
    StreamRun,
    _moved,
    call_clocks,
    end_watermark,
    float_inputs,
    grouped_by,
    input_frame,
    nan_rows,
    output_frame,
    run_streaming,
    staged_arrow,
    stream_input,
)

__all__ = [
    "AllKeysProcessor",
    "ChainBody",
    "PipelineStage",
    "StreamChainRun",
    "chain_body",
    "feed",
    "key_tuples",
    "read_field",
    "run_stream_chain",
]

_GROUP = "__wql_pipeline"  # the constant grouping column of a chain that is not partitioned


def run_stream_chain(
    query: P.OperatorStage,
    chain: P.StreamChain,
    source: DataFrame,
    *,
    end: DataFrame | None = None,
) -> StreamQueryRun:
    """The streaming run of ``query`` over the views of its ``chain`` (the planner's) and
    the streaming ``source``: :func:`run_streaming` for a query over its source, else the
    whole pipeline as one stateful processor (see the module doc), or, when a link needs
    Spark SQL, as a stateful operator per segment (:mod:`wql.spark.stream_links`); ``end`` as for
    :func:`run_streaming`. The run's result and late output are ``query``'s."""
    if not chain.upstream:
        return run_streaming(query, source, end=end)
    if any(link.sql for link in chain.links):
        from wql.spark.stream_links import run_linked_chain

        return run_linked_chain(query, chain, source, end=end)
    ops, body = chain_body((*chain.upstream, query), chain.links, chain.ops)
    first = chain.upstream[0]
    staged, key_cols, _, drainable, idle_ms, heartbeats = stream_input(
        first, ops[0], source, end, event_time_mode=True
    )
    mode = "EventTime"
    end_wm = end_watermark(first) if drainable else None
    et = first.source.event_time
    out_schema, output = L.tagged_layout(query, ops[-1])
    configs = tuple(op.config for op in ops)
    floats = float_inputs(ops[0])
    nans_at = len(ops[0].keys) + len(ops[0].values) + 1 + (not key_cols)
    processor = AllKeysProcessor(
        output, end_wm, configs, body, et.delay_ms if et else 0, et is not None, (floats, nans_at)
    )
    if chain.partition:
        # a group per value of the first stage's keys that every stage keeps
        staged, groups = grouped_by(staged, [key_cols[i] for i in chain.partition])
        grouped = staged.groupBy(*groups)
    else:
        grouped = staged.withColumn(_GROUP, F.lit(0)).groupBy(_GROUP)
    tagged = grouped.transformWithStateInPandas(
        statefulProcessor=deferred(processor),
        outputStructType=out_schema,
        outputMode="Append",
        timeMode=mode,
    )
    return StreamChainRun.of(
        query,
        ops[-1],
        tagged,
        chain=chain,
        time_mode=mode,
        source=source,
        drainable=drainable,
        idle_ms=idle_ms,
        heartbeats=heartbeats,
    )


def chain_body(
    stages: tuple[P.OperatorStage, ...],
    links: tuple[P.Link, ...],
    planned: tuple[OperatorPlan, ...] = (),
) -> tuple[list[OperatorPlan], ChainBody]:
    """The operator plans of a chain's ``stages`` (upstream first; each but the last tags
    its firings for the next) and the :class:`ChainBody` that runs them, ``links[i]``
    feeding stage ``i + 1``. ``planned``: the stages' plans the planner built (else
    they are built here)."""
    last = len(stages) - 1
    if planned:
        ops = [tagging_firings(op) if i < last else op for i, op in enumerate(planned)]
    else:
        ops = [build_stage(s, tag_firings=i < last) for i, s in enumerate(stages)]
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
    return ops, ChainBody(specs)


@dataclass(kw_only=True)
class StreamChainRun(StreamQueryRun):
    """A query over views on a stream: its pipeline in one processor (``chain``), whose
    output is the query's (read as a single query's)."""

    chain: P.StreamChain

    def with_end(self, end: DataFrame) -> StreamRun:
        return run_stream_chain(self.query, self.chain, self.source, end=end)


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
    link: P.Link | None


class ProcessorBody(Protocol):
    """What an :class:`AllKeysProcessor` runs: its operators' work at a rise and on a
    micro-batch's rows, each returning the output's result and late rows."""

    @property
    def ts_index(self) -> int:
        """The staged event-time column of a micro-batch's rows."""
        ...

    def rise(self, ops: list[Any], watermark: int) -> tuple[list[tuple], list[tuple]]: ...

    def rows(
        self, ops: list[Any], batch: pa.RecordBatch, timestamps: Any, valid: Any
    ) -> tuple[list[tuple], list[tuple]]: ...


class AllKeysProcessor(StatefulProcessor):
    """Several operators for all keys in one Spark group, in Flink's chain order: a
    pipeline's stages (:class:`ChainBody`) or a window join with both sides'
    pipelines (:class:`wql.spark.stream_join.JoinBody`); see the module doc.

    It owns what every such processor does per call: Spark's watermark as
    WQL's (:func:`~wql.spark.streaming.call_clocks`), the operators restored
    from and saved to one ``ValueState``
    (:class:`~wql.spark.streaming.ProcessorState`: the pending-rows rule, one
    Spark timer at the earliest runtime timer), the final rise of a drained
    stream, the counters of the last operator and the output rows; the body
    says what a rise and a micro-batch's rows do to the operators.
    ``configs``: every operator's runtime configuration, the body's order
    (the last one's counters are the output's); ``output``: the output
    layout (its ``rows(results, late, counters)``).
    """

    def __init__(
        self,
        output: L.TaggedLayout | L.JoinLayout,
        end_watermark: int | None,
        configs: tuple[Any, ...],
        body: ProcessorBody,
        delay_ms: int,
        has_event_time: bool,
        nans: tuple[tuple[int, ...], int] = ((), 0),
    ) -> None:
        self.output = output
        self.end_watermark = end_watermark
        self.configs = configs
        self.body = body
        #: the source's watermark delay: the final rise is to ``bounded_watermark(max_ts)``
        self.delay_ms = delay_ms
        self.has_event_time = has_event_time
        #: the staged columns that are FLOAT/DOUBLE (positions) and the position of the
        #: first column that says which of their NaNs are NaN, not NULL
        #: (:func:`~wql.spark.streaming.nan_columns`)
        self.nans = nans

    def init(self, handle: StatefulProcessorHandle) -> None:
        self.state = ProcessorState(handle, self.end_watermark)

    def handleInputRows(
        self, key: Any, rows: Iterator[pd.DataFrame], timerValues: TimerValues
    ) -> Iterator[pd.DataFrame]:
        frame = input_frame(rows)
        yield from self._call(timerValues, frame)

    def handleExpiredTimer(
        self, key: Any, timerValues: TimerValues, expiredTimerInfo: ExpiredTimerInfo
    ) -> Iterator[pd.DataFrame]:
        yield from self._call(timerValues, None)

    def _call(self, tv: TimerValues, frame: pd.DataFrame | None) -> Iterator[pd.DataFrame]:
        wm, _, _ = call_clocks(tv, "EventTime", self.end_watermark)
        ops, max_ts = self._restore()
        before = ops[-1].counters.as_dict()
        results: list[tuple] = []
        late: list[tuple] = []
        after_end = 0
        rises = [wm]
        if wm == MAX_TIME:
            after_end = 0 if frame is None else len(frame)
            # batch replay's final rise (the watermark after the last row), then the end
            final = [] if max_ts is None else [bounded_watermark(max_ts, self.delay_ms)]
            rises = [*final, MAX_TIME]
        for watermark in rises:
            out = self.body.rise(ops, watermark)
            results += out[0]
            late += out[1]
        if frame is not None and wm != MAX_TIME:
            batch, timestamps, valid, max_ts = self._in_time_order(frame, max_ts)
            out = self.body.rows(ops, batch, timestamps, valid)
            results += out[0]
            late += out[1]
        yield from self._finish(ops, max_ts, wm, before, after_end, results, late)

    def _restore(self) -> tuple[list[Any], int | None]:
        from wql.runtime import snapshot as snap
        from wql.runtime.operator_factory import make_operator
        from wql.runtime.window_operator import WindowOperator

        saved = self.state.load()
        if saved is None:
            return [make_operator(c) for c in self.configs], None
        payload = snap.loads(saved[0])
        ops = []
        for config, data in zip(self.configs, payload["stages"], strict=True):
            if isinstance(data, bytes):
                ops.append(WindowOperator.restore(config, data))
                continue
            # a window rank (or join) keeps per-key snapshots (it has no whole-operator one)
            op = make_operator(config)
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

    def _in_time_order(
        self, frame: pd.DataFrame, max_ts: int | None
    ) -> tuple[pa.RecordBatch, Any, Any, int | None]:
        """The micro-batch's rows as Arrow (timestamps in microseconds) in event-time order
        (stable: ties keep Spark's order), their event times (the body's ``ts_index``
        column) and validity mask (None: all valid; both None without event time), and
        the largest event time seen."""
        batch = self.arrow(frame, frame.shape[1])
        if not self.has_event_time:
            return batch, None, None, max_ts
        ts_arr = batch.column(self.body.ts_index)
        valid = ts_arr.is_valid().to_numpy(zero_copy_only=False)
        ts = ts_arr.fill_null(0).to_numpy(zero_copy_only=False).astype(np.int64)
        order = np.argsort(np.where(valid, ts, MIN_TIME), kind="stable")
        if (order[1:] < order[:-1]).any():  # else in order already (one row, most often)
            batch = batch.take(pa.array(order))
            ts, valid = ts[order], valid[order]
        if valid.any():
            top = int(ts[valid].max())
            max_ts = top if max_ts is None else max(max_ts, top)
        return batch, ts, (valid if not valid.all() else None), max_ts

    def arrow(self, frame: pd.DataFrame, width: int) -> pa.RecordBatch:
        """The first ``width`` staged columns of ``frame`` as Arrow, timestamps in
        microseconds, a float's NaN NaN and its NULL NULL (see :attr:`nans`)."""
        floats, nans_at = self.nans
        columns = []
        names = []
        # each column as ``RecordBatch.from_pandas`` converts it, without the frame's
        # slice and pandas metadata, which cost more than a call's few rows
        for i, (name, series) in enumerate(frame.items()):
            if i == width:
                break
            names.append(str(name))
            nans = nan_rows(frame, nans_at, floats.index(i)) if i in floats else None
            columns.append(staged_arrow(series, nans))
        return pa.RecordBatch.from_arrays(columns, names=names)

    def _finish(
        self,
        ops: list[Any],
        max_ts: int | None,
        wm: int,
        before: dict,
        after_end: int,
        results: list[tuple],
        late: list[tuple],
    ) -> Iterator[pd.DataFrame]:
        ended = wm == MAX_TIME
        due = [t for op in ops for k in op.active_keys() for t in op.timers(k)[0]]
        keep = not ended and any(op.active_keys() for op in ops)
        # one Spark timer: the earliest runtime timer of any stage wakes the whole pipeline
        spark_timers = self.state.sync_timers([min(due)] if due else [], wm, keep)
        counters = self.state.save(
            _moved(before, ops[-1].counters.as_dict(), after_end, self.state.pending_rows),
            keep=keep,
            output=bool(results or late),
            snapshot=lambda: self._snapshot(ops, max_ts),
            watermark=ops[0].watermark,
            processing_time=MIN_TIME,
            spark_timers=spark_timers,
        )
        if results or late or counters:
            yield output_frame(self.output.rows(results, late, counters))


@dataclass(frozen=True)
class ChainBody:
    """A pipeline's stages in an :class:`AllKeysProcessor` (pickled to the workers):
    the micro-batch's rows go to the first stage, each stage's rows to the next
    (:class:`~wql.runtime.pipeline.OperatorChain`); the last stage's rows and late
    rows are the output."""

    stages: tuple[PipelineStage, ...]
    #: the last stage's rows feed another processor (:mod:`wql.spark.stream_links`):
    #: the rows it fires at a rise leave in the pipeline's timer order too
    feeds: bool = False

    @property
    def ts_index(self) -> int:
        """The staged event-time column: after the first stage's keys and values."""
        return self.stages[0].n_keys + self.stages[0].n_values

    def chain(self, ops: list[Any], *, keep_late: bool = True) -> OperatorChain:
        """The chain of ``ops`` (this body's stages'), each stage fed its view's rows."""
        return OperatorChain(
            ops,
            lambda i, rows: feed(self.stages[i - 1], self.stages[i], ops[i], rows),
            [EMIT_RESULTS + s.n_results for s in self.stages],
            keep_late=keep_late,
            feeds_on=self.feeds,
        )

    def rise(self, ops: list[Any], watermark: int) -> tuple[list[tuple], list[tuple]]:
        chain = self.chain(ops)
        return chain.rise(watermark), chain.late

    def rows(
        self, ops: list[Any], batch: pa.RecordBatch, timestamps: Any, valid: Any
    ) -> tuple[list[tuple], list[tuple]]:
        """The micro-batch's rows through every stage, in emission order."""
        self._first(ops, batch, timestamps, valid)
        chain = self.chain(ops)
        return chain.pass_down(), chain.late

    def take(
        self, ops: list[Any], batch: pa.RecordBatch, timestamps: Any, valid: Any, rise: int | None
    ) -> tuple[list[tuple], list[tuple]]:
        """Rows another processor emitted (staged as a micro-batch's rows, in its emission
        order) to the first stage at its watermark; then, for the rows it fired at a rise
        to ``rise``, every stage rises to it (they go on ahead of what the first stage
        fires), else they go through every stage (rows it emitted while taking rows)."""
        self._first(ops, batch, timestamps, valid)
        chain = self.chain(ops)
        if rise is None:
            return chain.pass_down(), chain.late
        return chain.rise(rise, first=ops[0].drain()), chain.late

    def _first(self, ops: list[Any], batch: pa.RecordBatch, timestamps: Any, valid: Any) -> None:
        """The staged rows ``batch`` into the first stage, at its watermark."""
        spec = self.stages[0]
        n = batch.num_rows
        keys = key_tuples([batch.column(i) for i in range(spec.n_keys)], n)
        columns = tuple(
            L.runtime_column(batch.column(spec.n_keys + j)) for j in range(spec.n_values)
        )
        wm = np.full(n, ops[0].watermark, dtype=np.int64)
        ops[0].process_batch(RowBatch(keys, timestamps, columns, wm, None, valid))


def feed(up: PipelineStage, spec: PipelineStage, op: Any, rows: list[tuple]) -> None:
    """The rows the stage ``up`` emitted as the next stage's input (``spec``, its
    operator ``op``), at its watermark.

    The rows go through the tagged stream's Arrow columns, the values the
    batch pipeline's reader gets from Spark (docs/architecture.md).
    """
    link = spec.link
    assert link is not None
    batch = up.tagged.rows(rows)
    n = batch.num_rows
    keys = key_tuples([read_field(batch, f, up.n_keys) for f in link.keys], n)
    columns = tuple(L.runtime_column(read_field(batch, f, up.n_keys)) for f in link.values)
    timestamps: Any = None
    valid_mask: Any = None
    if link.event_time is not None:
        ts_arr = batch.column(L.FIELD_COLUMNS[link.event_time])
        valid = ts_arr.is_valid().to_numpy(zero_copy_only=False)
        timestamps = ts_arr.fill_null(0).to_numpy(zero_copy_only=False).astype(np.int64)
        valid_mask = valid if not valid.all() else None
    wm = np.full(n, op.watermark, dtype=np.int64)
    op.process_batch(RowBatch(keys, timestamps, columns, wm, None, valid_mask))


def read_field(batch: pa.RecordBatch, f: P.LinkField, n_keys: int) -> pa.Array:
    """One input column of a reader from the view's tagged rows (``f``: what it reads)."""
    kind = f.source[0]
    if kind == "key":
        arr = batch.column(L.key_columns(n_keys)[f.source[1]])
    elif kind == "first":
        return pc.equal(batch.column(L.PANE_INDEX), 0)
    elif kind == "last":
        return batch.column(L.IS_LAST)
    else:
        index = f.source[1]
        name = L.FIELD_COLUMNS.get(index) or L.result_column(index - EMIT_RESULTS)
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
    return list(zip(*(_key_column(a) for a in arrays), strict=True))


def _key_column(a: pa.Array) -> list[Any]:
    """One key column's values, a float NaN as the runtime's one NaN key."""
    from wql.runtime.config import nan_keys

    return nan_keys(a.to_pylist()) if pa.types.is_floating(a.type) else a.to_pylist()
