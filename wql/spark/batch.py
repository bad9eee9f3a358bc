"""The batch host: run a query's ``WindowOperator`` inside Spark over a static source.

Pipeline (docs/architecture.md, "Contract: batch replay on Spark"):

1. :mod:`wql.spark.replay` orders the source rows and attaches to each its
   replay position and the global clocks it sees (``watermark_before``,
   processing time). Rows without event time are counted, not replayed.
2. ``WHERE`` is applied *after* the clocks are computed: the watermark is
   generated at the source, before any filter, as in Flink SQL (a filtered
   row still advances the watermark).
3. Every pre-aggregation expression (keys, aggregate arguments, dynamic
   gaps, DELTA expressions, late-output columns) is evaluated in Spark, so
   the operator sees plain values (:mod:`wql.compiler.backends.operator`).
4. Rows are repartitioned by key (one partition, without a shuffle, for
   small inputs) and sorted by replay position within each partition;
   ``mapInArrow`` runs one ``WindowOperator`` per partition over the Arrow
   batches (``process_batch`` with each row's ``watermark_before``),
   then advances the clocks to their final global values and calls
   ``end_of_input()``. It emits ONE stream tagged by kind: result rows
   (``R``), late rows (``L``) and one counters row per partition (``C``).
   That stream is cached and split, so the operator runs once (measured in
   ``docs/running.md``).
5. The post-aggregation projection (``HAVING`` + ``SELECT``, Spark SQL over
   the post-aggregation relation) runs in Spark, giving exactly the plan's
   output schema.

Why the result does not depend on partitioning, core count or Arrow batch
size: each row carries the global clocks it must see; a key's state changes
only through its own rows and its own timers, and timers fire in time order
whenever a clock rises, so firing them in one jump before the key's next row
(or at end of input) is the same sequence as firing them across smaller rises.
At end of input each partition first moves the processing clock to its final
global value (the largest processing time of the replay), because Flink does
not fire processing-time timers at end of input and a key's last pending
timer may be due only because of *other* keys' rows.

A query whose window and trigger tree use *both* clocks (e.g. ``EVERY ... OF
PROCESSING TIME`` on an event-time window, ``TIMEOUT``) depends on how the two
clocks interleave; for it, every partition replays the global sequence of
clock changes merged with its own rows (collected to the driver and
broadcast; per-row path). That needs the declared ``processing_time``
column: with the wall clock there is no global sequence to replay, and such
a query is rejected with a :class:`~wql.errors.WqlUnsupportedError`.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from decimal import ROUND_HALF_UP, Decimal
from typing import Any

import numpy as np
import pyarrow as pa
from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql import types as ST

from wql.compiler import plan as P
from wql.compiler import types as T
from wql.compiler.backends.operator import OperatorPlan, build_stage
from wql.compiler.types import WqlType
from wql.errors import WqlUnsupportedError
from wql.runtime.pipeline import CLASS_ROW, CLASS_TIMER, GlobalClock
from wql.spark import replay as R

__all__ = ["OperatorRun", "REASON_FILTERED", "run_operator", "run_view_stage"]

KIND = "__wql_kind"
COUNTERS = "__wql_counters"
#: A pipeline stage's rows in the global sequence (docs/architecture.md, "Contract:
#: pipelines"): the step, and the rank within the step (the order its reader takes them in).
STEP = "__wql_step"
RANK = "__wql_rank"
# what the rank is computed from: rows fired by rows first (by their input's rank, then
# emission number), then rows fired by timers (by time, key, window end and start)
_CLS, _O1, _O2, _EMIT = "__wql_cls", "__wql_o1", "__wql_o2", "__wql_emit"
_WS, _WE, _WT, _PI, _PT, _LTS = (
    "__wql_ws",
    "__wql_we",
    "__wql_wt",
    "__wql_pane",
    "__wql_timing",
    "__wql_late_ts",
)

#: Not a drop: rows the query's WHERE clause rejects (reported separately).
REASON_FILTERED = "filtered by WHERE"


@dataclass
class OperatorRun:
    """The outcome of one query on the operator engine.

    ``result`` has the plan's output schema; ``late`` the late-output schema
    (``None`` without ``LATE DATA TO``); ``dropped`` the source rows that were
    not replayed, with a ``reason``. ``counters`` are the runtime's counters
    summed over partitions plus the replay's: ``rows_in`` (source rows),
    ``rows_replayed``, ``rows_filtered`` (WHERE), ``rows_operator`` (rows the
    operators saw), ``rows_emitted`` (firings, before HAVING), ``late_rows``
    and ``dropped`` by reason (replay and runtime reasons together).
    """

    query: P.OperatorStage
    result: DataFrame
    late: DataFrame | None
    dropped: DataFrame
    counters: dict[str, Any]
    _cached: list[DataFrame] = field(default_factory=list, repr=False)
    _replay: R.Replay | None = field(default=None, repr=False)
    #: A stage of a pipeline (``run_operator(tag=True)``, ``run_view_stage``): the
    #: result with each row's place in the global sequence (``STEP``, ``RANK``), what
    #: the queries reading this one take as input, and the pipeline's clock.
    placed: DataFrame | None = None
    clock: GlobalClock | None = None

    def release(self) -> None:
        """Free the cached operator output and replay."""
        for df in self._cached:
            df.unpersist()
        self._cached.clear()
        if self._replay is not None:
            self._replay.release()


def run_operator(
    query: P.OperatorStage,
    source: DataFrame,
    *,
    operator_plan: OperatorPlan | None = None,
    replay_strategy: str = R.STRATEGY_AUTO,
    tag: bool = False,
) -> OperatorRun:
    """Run ``query`` on the operator engine over the batch DataFrame ``source``.

    ``source`` must hold the source relation's columns (names as declared).
    Runs the Spark jobs needed for the replay statistics and the operator
    (whose output is cached); the returned DataFrames read that cache.
    ``tag``: ``query`` is the first stage of a pipeline (other queries read
    it): the run also gives its rows placed in the global sequence
    (:attr:`OperatorRun.placed`) and the pipeline's clock.
    """
    op = operator_plan or build_stage(query, tag_firings=tag)
    spec = replay_spec(query, op)
    replayed = R.replay(source, spec, strategy=replay_strategy)
    try:
        clock = pipeline_clock(replayed, spec) if tag else None
        return _run(query, op, spec, replayed, clock)
    except BaseException:
        replayed.release()
        raise


def run_view_stage(
    query: P.OperatorStage, upstream: OperatorRun, *, tag: bool = False
) -> OperatorRun:
    """Run ``query``, which reads the view ``upstream`` ran, on the operator engine.

    ``upstream`` is a pipeline stage's run (``placed`` rows and ``clock``):
    its rows are ``query``'s input in their global order, each seeing the
    watermark the pipeline's clock gives its step (docs/architecture.md,
    "Contract: pipelines"). ``tag``: further queries read ``query`` too.
    """
    assert upstream.placed is not None and upstream.clock is not None
    op = build_stage(query, tag_firings=tag)
    spark = upstream.placed.sparkSession
    staged, key_cols = stage_view(query, op, upstream.placed)
    rows = upstream.placed.count()
    task = partition_task(query, op, None, None, clock=upstream.clock)
    # a view's rows are never dropped before the operator: nothing is replayed
    no_rows = spark.createDataFrame([], _dropped_schema(query))
    return _execute(query, op, staged, key_cols, task, rows, no_rows, rows, None, upstream.clock)


def replay_spec(query: P.OperatorStage, op: OperatorPlan) -> R.ReplaySpec:
    """How ``query``'s source is replayed for the operator ``op`` (clocks and order)."""
    et = query.source.event_time
    spec = R.ReplaySpec(
        event_time=et.column if et else None,
        delay_ms=et.delay_ms if et else 0,
        arrival_order=query.source.arrival_order,
        processing_time=query.source.processing_time if op.uses_processing_time else None,
    )
    if op.mixes_time_domains and spec.processing_time is None:
        raise WqlUnsupportedError(
            f"query {query.name!r} uses both event time and processing time; batch replay "
            "needs the global sequence of both clocks, which exists only with a declared "
            "processing-time column",
            _trigger_span(query),
            hint="declare WITH (processing_time = '<column>') on the source",
        )
    return spec


def _trigger_span(query: P.OperatorStage) -> Any:
    """Where the trigger of ``query`` is written, else the query."""
    trigger = getattr(query, "trigger", None)
    return trigger.span if trigger is not None else query.span


OPERATOR_PARTITIONS_CONF = "spark.wql.operator.partitions"
#: "true": HOP/CUMULATE operators keep one accumulator per (key, slice)
#: (``WindowOperator(config, slicing=True)``, docs/runtime.md "Slicing").
OPERATOR_SLICING_CONF = "spark.wql.operator.slicing"


# Up to this many replayed rows the operator runs in ONE partition, gathered
# without a shuffle: a small input is done before a second task would start
# (bench/small_files.py, docs/benchmarks.md "Small inputs").
SMALL_INPUT_ROWS = 10_000


def operator_partitions(spark: Any, rows: int | None = None) -> int:
    """How many key partitions the operator stage runs in, for ``rows`` replayed rows.

    ``spark.wql.operator.partitions`` when set; otherwise 1 for at most
    :data:`SMALL_INPUT_ROWS` rows, else two per core of the cluster
    (``defaultParallelism``), at most ``spark.sql.shuffle.partitions``.
    Every partition starts a Python worker and an operator, so Spark's default
    of 200 shuffle partitions on a 2-core machine made a 2 M-row SESSION query
    ~2.8x slower (bench/spark.py: 10.8 s at 200 partitions, 3.9 s at 8). The
    count never changes results: rows carry their own watermark.
    """
    configured = spark.conf.get(OPERATOR_PARTITIONS_CONF, None)
    if configured:
        return max(1, int(configured))
    if rows is not None and rows <= SMALL_INPUT_ROWS:
        return 1
    cores = spark.sparkContext.defaultParallelism
    return max(1, min(R.shuffle_partitions(spark), 2 * cores))


def stage(
    query: P.OperatorStage, op: OperatorPlan, replayed: R.Replay
) -> tuple[DataFrame, list[str]]:
    """The rows the operators see, and the names of their key columns.

    ``WHERE`` applied; keys as ``__wql_k<i>``, the operator's input values as
    ``__wql_v<i>``, and the replay columns (position, event time, clocks).
    """
    return _staged(query, op, replayed.df, R.SEQ, R.TS, R.WM, R.PT)


def stage_view(
    query: P.OperatorStage, op: OperatorPlan, placed: DataFrame
) -> tuple[DataFrame, list[str]]:
    """:func:`stage` for a query over a view: its rows with their steps and ranks.

    The event time is the view's event-time column in ms; the watermark each
    row sees comes from the pipeline's clock, in the task.
    """
    et = query.source.event_time
    ts = F.unix_millis(F.col(_quote(et.column))) if et is not None else F.lit(None).cast("bigint")
    return _staged(query, op, placed, STEP, RANK, ts.alias(R.TS))


def _staged(
    query: P.OperatorStage, op: OperatorPlan, df: DataFrame, *replay: str | Column
) -> tuple[DataFrame, list[str]]:
    if query.filter is not None:
        df = df.where(F.expr(query.filter.sql))
    key_cols = [f"__wql_k{i}" for i in range(len(op.keys))]
    value_cols = [f"__wql_v{i}" for i in range(len(op.values))]
    staged = df.select(
        *[F.expr(k.expr.sql).alias(c) for k, c in zip(op.keys, key_cols, strict=True)],
        *[F.expr(v.sql).alias(c) for v, c in zip(op.values, value_cols, strict=True)],
        *replay,
    )
    return staged, key_cols


def partition_task(
    query: P.OperatorStage,
    op: OperatorPlan,
    spec: R.ReplaySpec | None,
    replayed: R.Replay | None,
    *,
    slicing: bool = False,
    clock: GlobalClock | None = None,
) -> _PartitionTask:
    """The function the operator stage runs per key partition (``mapInArrow``).

    It holds the operator configuration, the output layout and the global
    clocks at the end of the replay; called on a partition's Arrow batches
    (rows of :func:`stage`, sorted by replay position) it yields the tagged
    output batches. ``clock``: a pipeline's (a stage that tags its rows, or
    reads a view): the task places its rows in the global sequence; without
    ``replayed`` the input is a view's (:func:`stage_view`).
    """
    if replayed is not None:
        assert spec is not None
        final = final_clocks(replayed, spec)
        clock_events = global_clock_events(replayed) if op.mixes_time_domains else None
    else:
        assert clock is not None
        final, clock_events = (clock.final, R.MIN_TIME), None
    _, arrow_schema, agg_types, late_types = _output_schema(query, op)
    return _PartitionTask(
        config=op.config,
        n_keys=len(op.keys),
        n_values=len(op.values),
        agg_types=agg_types,
        key_types=tuple(k.type for k in op.keys),
        late_index=tuple(i for _, i in op.late_columns),
        late_types=late_types,
        has_event_time=query.source.event_time is not None,
        processing=op.uses_processing_time,
        wall_clock=op.uses_processing_time and (spec is None or spec.processing_time is None),
        final_watermark=final[0],
        final_processing_time=final[1],
        clock_events=clock_events,
        out_schema=arrow_schema,
        slicing=slicing,
        clock=clock,
        view_input=replayed is None,
    )


def pipeline_clock(replayed: R.Replay, spec: R.ReplaySpec) -> GlobalClock:
    """The pipeline's global clock: where the replay's watermark rises (one Spark job)."""
    rows = (
        replayed.df.groupBy(R.WM)
        .agg(F.min(R.SEQ).alias("first"), F.max(R.SEQ).alias("last"))
        .orderBy(R.WM)
        .collect()
    )
    end = max((r["last"] for r in rows), default=-1) + 1
    rises = [r for r in rows if r[R.WM] > R.MIN_TIME]
    return GlobalClock.from_rises(
        [r["first"] for r in rises],
        [r[R.WM] for r in rises],
        final_clocks(replayed, spec)[0],
        end,
    )


def _run(
    query: P.OperatorStage,
    op: OperatorPlan,
    spec: R.ReplaySpec,
    replayed: R.Replay,
    clock: GlobalClock | None,
) -> OperatorRun:
    spark = replayed.df.sparkSession
    staged, key_cols = stage(query, op, replayed)
    slicing = str(spark.conf.get(OPERATOR_SLICING_CONF, "false")).lower() == "true"
    task = partition_task(query, op, spec, replayed, slicing=slicing, clock=clock)
    run = _execute(
        query,
        op,
        staged,
        key_cols,
        task,
        replayed.rows_replayed,
        replayed.dropped,
        replayed.rows_in,
        replayed,
        clock,
    )
    for reason, n in replayed.dropped_counts.items():
        run.counters["dropped"][reason] = run.counters["dropped"].get(reason, 0) + n
    return run


def _execute(
    query: P.OperatorStage,
    op: OperatorPlan,
    staged: DataFrame,
    key_cols: list[str],
    task: _PartitionTask,
    rows: int,
    dropped: DataFrame,
    rows_in: int,
    replayed: R.Replay | None,
    clock: GlobalClock | None,
) -> OperatorRun:
    """Run the operator stage over ``staged`` (``rows`` rows), one ``task`` per key partition."""
    spark = staged.sparkSession
    partitions = operator_partitions(spark, rows)
    small = partitions == 1 and rows <= SMALL_INPUT_ROWS
    if small:
        # a small replay is one partition already (the window strategy): gather,
        # no shuffle, and no extra stage for adaptive execution to plan
        staged = staged.coalesce(1)
    elif key_cols:
        staged = staged.repartition(partitions, *key_cols)
    else:
        staged = staged.repartition(1)
    staged = staged.sortWithinPartitions(*((STEP, RANK) if task.view_input else (R.SEQ,)))
    out_schema, arrow_schema, _, _ = _output_schema(query, op)
    if small:
        # The one partition's task runs right here, on the rows collected in
        # replay order: a small input then costs one Spark job instead of the
        # operator stage's jobs (its exchange, the cache build, the collect),
        # and the outputs read a local relation instead of a cache
        # (docs/benchmarks.md, "Small inputs"). Same task, same rows, same order.
        done = task(iter(staged.toArrow().to_batches()))
        table = pa.Table.from_batches(list(done), arrow_schema)
        tagged = spark.createDataFrame(table, out_schema).coalesce(1)
    else:
        tagged = staged.mapInArrow(task, out_schema).persist()
    counter_rows = tagged.where(F.col(KIND) == "C").select(COUNTERS).collect()
    counters = _sum_counters([json.loads(r[COUNTERS]) for r in counter_rows])
    filtered = rows - counters["rows_in"]
    summary = {
        "rows_in": rows_in,
        "rows_replayed": rows,
        "rows_filtered": filtered,
        "rows_operator": counters["rows_in"],
        "rows_emitted": counters["rows_emitted"],
        "late_rows": counters["late_rows"],
        # rows the operator took into a window and that were in an emitted
        # firing: every other operator row is late or dropped under a reason
        # (the runtime's identity, docs/runtime.md "Counters")
        "rows_fired": counters["rows_in"]
        - counters["late_rows"]
        - sum(counters["dropped"].values()),
        "dropped": dict(counters["dropped"]),
    }
    fired = tagged.where(F.col(KIND) == "R")
    result = _post_aggregation(query, op, fired)
    placed = None
    if op.config.tag_firings:
        placed = _post_aggregation(query, op, _ranked(fired, len(op.keys)), keep=(STEP, RANK))
    late = None
    if query.late_output is not None:
        late = _late_output(query, op, tagged.where(F.col(KIND) == "L"))
    return OperatorRun(
        query, result, late, dropped, summary, [tagged], replayed, placed=placed, clock=clock
    )


def _ranked(fired: DataFrame, n_keys: int) -> DataFrame:
    """A stage's fired rows with their rank within their step (the order readers take)."""
    from pyspark.sql import Window

    order = [_CLS, _O1, _O2, *[f"__wql_k{i}" for i in range(n_keys)], _WE, _WS, _EMIT]
    w = Window.partitionBy(STEP).orderBy(*[F.col(c).asc_nulls_first() for c in order])
    return fired.withColumn(RANK, (F.row_number().over(w) - 1).cast("bigint"))


def _dropped_schema(query: P.OperatorStage) -> ST.StructType:
    """A query's input columns and ``reason``: the shape of :attr:`OperatorRun.dropped`."""
    fields = [ST.StructField(c.name, _spark_type(c.type)) for c in query.source.columns]
    return ST.StructType([*fields, ST.StructField("reason", ST.StringType())])


# --------------------------------------------------------------------------- clocks


def final_clocks(replayed: R.Replay, spec: R.ReplaySpec) -> tuple[int, int]:
    """The watermark and processing time after the last replayed row (global)."""
    max_ts = replayed.max_ts
    wm = R.MIN_TIME if max_ts is None else max(R.MIN_TIME, max_ts - spec.delay_ms - 1)
    pt = R.MIN_TIME if replayed.max_pt is None else replayed.max_pt
    return wm, pt


def global_clock_events(replayed: R.Replay) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The global clock sequence: ``(seq, watermark_before, processing_time)`` at each change."""
    rows = replayed.df.select(R.SEQ, R.WM, R.PT).orderBy(R.SEQ).toArrow()
    seq = rows.column(R.SEQ).to_numpy()
    wm = rows.column(R.WM).to_numpy()
    pt = rows.column(R.PT).fill_null(R.MIN_TIME).to_numpy()
    if len(seq) == 0:
        return seq, wm, pt
    changed = np.ones(len(seq), dtype=bool)
    changed[1:] = (wm[1:] != wm[:-1]) | (pt[1:] != pt[:-1])
    return seq[changed], wm[changed], pt[changed]


# --------------------------------------------------------------------------- the task


@dataclass(frozen=True)
class _PartitionTask:
    """The function ``mapInArrow`` runs per partition (pickled to the executors)."""

    config: Any
    n_keys: int
    n_values: int
    agg_types: tuple[WqlType, ...]
    key_types: tuple[WqlType, ...]
    late_index: tuple[int, ...]
    late_types: tuple[WqlType, ...]
    has_event_time: bool
    processing: bool
    wall_clock: bool
    final_watermark: int
    final_processing_time: int
    clock_events: tuple[np.ndarray, np.ndarray, np.ndarray] | None
    out_schema: pa.Schema
    slicing: bool = False
    #: a pipeline's clock: the task places its rows (a stage that tags them) and, for
    #: a view's rows (``view_input``), gives each the watermark of its step
    clock: GlobalClock | None = None
    view_input: bool = False

    def __call__(self, batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        from wql.runtime.config import RowBatch
        from wql.runtime.operators import make_operator

        op = make_operator(self.config, slicing=self.slicing)
        events = ClockCursor(self.clock_events) if self.clock_events is not None else None
        placer = (
            _Placer(self.clock, len(self.agg_types))
            if self.clock is not None and self.config.tag_firings
            else None
        )
        for batch in batches:
            if batch.num_rows == 0:
                continue
            keys = self._keys(batch)
            columns = tuple(_column(batch.column(f"__wql_v{i}")) for i in range(self.n_values))
            ts = (
                batch.column(R.TS).to_numpy(zero_copy_only=False).astype(np.int64)
                if self.has_event_time
                else None
            )
            if self.view_input:
                assert self.clock is not None
                steps = batch.column(STEP).to_numpy(zero_copy_only=False).astype(np.int64)
                wm = self.clock.watermarks_before(steps)
                if placer is not None:
                    placer.add(steps, batch.column(RANK).to_numpy(zero_copy_only=False))
            else:
                wm = batch.column(R.WM).to_numpy(zero_copy_only=False).astype(np.int64)
                if placer is not None:
                    seqs = batch.column(R.SEQ).to_numpy(zero_copy_only=False).astype(np.int64)
                    placer.add(2 * seqs + 1, np.zeros(len(seqs), dtype=np.int64))
            pt = None
            if self.wall_clock:
                pt = np.full(batch.num_rows, time.time_ns() // 1_000_000, dtype=np.int64)
            elif self.processing:
                pt = batch.column(R.PT).to_numpy(zero_copy_only=False).astype(np.int64)
            if events is None:
                op.process_batch(RowBatch(keys, ts, columns, wm, pt))
            else:
                seqs = batch.column(R.SEQ).to_numpy(zero_copy_only=False)
                rows = list(zip(*columns, strict=True)) if columns else [()] * len(keys)
                for i in range(len(keys)):
                    events.advance_before(op, int(seqs[i]))
                    op.advance_watermark(int(wm[i]))
                    if pt is not None:
                        op.advance_processing_time(int(pt[i]))
                    op.process_element(keys[i], None if ts is None else int(ts[i]), rows[i])
            yield from self._emit(op, placer)
        if events is not None:
            events.advance_before(op, R.MAX_TIME)
        # the clocks after the last row of the whole replay (other keys' rows included)
        op.advance_watermark(self.final_watermark)
        if self.processing:
            final_pt = (
                time.time_ns() // 1_000_000 if self.wall_clock else self.final_processing_time
            )
            op.advance_processing_time(final_pt)
        op.end_of_input()
        yield from self._emit(op, placer)
        counters = json.dumps(op.counters.as_dict())
        yield self._batch(
            {KIND: pa.array(["C"], pa.string()), COUNTERS: pa.array([counters], pa.string())}, 1
        )

    def _keys(self, batch: pa.RecordBatch) -> list:
        n = batch.num_rows
        if self.n_keys == 0:
            return [()] * n
        cols = [batch.column(f"__wql_k{i}").to_pylist() for i in range(self.n_keys)]
        return list(zip(*cols, strict=True))

    def _emit(self, op: Any, placer: _Placer | None = None) -> Iterator[pa.RecordBatch]:
        results = op.drain()
        late = op.drain_late()
        if results:
            yield self._results_batch(results, placer)
        if late:
            yield self._late_batch(late)

    def _results_batch(self, rows: list[tuple], placer: _Placer | None = None) -> pa.RecordBatch:
        n = len(rows)
        cols: dict[str, pa.Array] = {KIND: pa.array(["R"] * n, pa.string())}
        for i, t in enumerate(self.key_types):
            cols[f"__wql_k{i}"] = _arrow([r[0][i] for r in rows], t)
        for name, idx in ((_WS, 1), (_WE, 2), (_WT, 3), (_PI, 4)):
            cols[name] = pa.array([r[idx] for r in rows], pa.int64())
        cols[_PT] = pa.array([r[5] for r in rows], pa.string())
        for i, t in enumerate(self.agg_types):
            cols[f"__wql_a{i}"] = _arrow([r[7 + i] for r in rows], t)
        if placer is not None:
            cols.update(placer.place(rows))
        return self._batch(cols, n)

    def _late_batch(self, rows: list[tuple]) -> pa.RecordBatch:
        n = len(rows)
        cols: dict[str, pa.Array] = {KIND: pa.array(["L"] * n, pa.string())}
        for j, t in enumerate(self.late_types):
            cols[f"__wql_l{j}"] = _arrow([r[2][j] for r in rows], t)
        cols[_LTS] = pa.array([r[1] for r in rows], pa.int64())
        return self._batch(cols, n)

    def _batch(self, cols: dict[str, pa.Array], n: int) -> pa.RecordBatch:
        arrays = [cols[f.name] if f.name in cols else pa.nulls(n, f.type) for f in self.out_schema]
        return pa.RecordBatch.from_arrays(arrays, schema=self.out_schema)


class _Placer:
    """Places a tagging stage's emitted rows in the pipeline's global sequence.

    Keeps the step and rank of every input row by arrival number (the
    operator numbers the rows it is given), and numbers the emitted rows.
    """

    def __init__(self, clock: GlobalClock, n_aggregates: int) -> None:
        self.clock = clock
        self.tags = 7 + n_aggregates  # FIRED_FIELDS follow the aggregate results
        self.steps: list[int] = []
        self.ranks: list[int] = []
        self.emitted = 0

    def add(self, steps: np.ndarray, ranks: np.ndarray) -> None:
        """The next input rows' steps and ranks, in the order the operator takes them."""
        self.steps += steps.tolist()
        self.ranks += ranks.tolist()

    def place(self, rows: list[tuple]) -> dict[str, pa.Array]:
        """The placement columns of ``rows`` (emitted, in order)."""
        from wql.runtime.config import FIRED_BY_ROW

        step: list[int] = []
        cls: list[int] = []
        o1: list[int] = []
        o2: list[int | None] = []
        emit: list[int] = []
        place = self.clock.place
        for r in rows:
            by, time, a = r[self.tags : self.tags + 3]
            step.append(place(by, time, None if a is None else self.steps[a]))
            if by == FIRED_BY_ROW:
                cls.append(CLASS_ROW)
                o1.append(self.ranks[a])
                o2.append(self.emitted)
            else:
                cls.append(CLASS_TIMER)
                o1.append(time)
                o2.append(None)
            emit.append(self.emitted)
            self.emitted += 1
        return {
            STEP: pa.array(step, pa.int64()),
            _CLS: pa.array(cls, pa.int64()),
            _O1: pa.array(o1, pa.int64()),
            _O2: pa.array(o2, pa.int64()),
            _EMIT: pa.array(emit, pa.int64()),
        }


class ClockCursor:
    """Walks the global clock sequence, replaying the changes made by other keys' rows."""

    def __init__(self, events: tuple[np.ndarray, np.ndarray, np.ndarray]) -> None:
        self.seq, self.wm, self.pt = (a.tolist() for a in events)
        self.pos = 0

    def advance_before(self, op: Any, seq: int) -> None:
        while self.pos < len(self.seq) and self.seq[self.pos] < seq:
            op.advance_watermark(self.wm[self.pos])
            op.advance_processing_time(self.pt[self.pos])
            self.pos += 1


# --------------------------------------------------------------------------- conversions


def _column(arr: pa.Array) -> Any:
    """An Arrow column as the runtime wants it: NumPy when numeric without nulls, else a list."""
    if arr.null_count == 0 and (pa.types.is_integer(arr.type) or pa.types.is_floating(arr.type)):
        return arr.to_numpy(zero_copy_only=False)
    return arr.to_pylist()


def arrow_type(t: WqlType) -> pa.DataType:
    """The Arrow type Spark expects for a column of WQL type ``t`` in ``mapInArrow`` output."""
    simple = {
        "STRING": pa.string(),
        "TINYINT": pa.int8(),
        "SMALLINT": pa.int16(),
        "INT": pa.int32(),
        "BIGINT": pa.int64(),
        "FLOAT": pa.float32(),
        "DOUBLE": pa.float64(),
        "BOOLEAN": pa.bool_(),
        "TIMESTAMP": pa.timestamp("us", tz="UTC"),
        "DATE": pa.date32(),
        "BINARY": pa.binary(),
        "NULL": pa.null(),
    }
    if t.kind in simple:
        return simple[t.kind]
    if t.kind == "DECIMAL":
        return pa.decimal128(t.precision, t.scale)
    if t.kind == "ARRAY":
        assert t.element is not None
        return pa.list_(arrow_type(t.element))
    raise WqlUnsupportedError(f"the operator engine cannot output values of type {t.ddl}")


def _arrow(values: list, t: WqlType) -> pa.Array:
    """Values computed by the runtime as an Arrow array of the plan's type."""
    return pa.array([_coerce(v, t) for v in values], type=arrow_type(t))


def _coerce(v: Any, t: WqlType) -> Any:
    if v is None:
        return None
    kind = t.kind
    if kind in ("DOUBLE", "FLOAT"):
        return float(v)
    if kind in ("BIGINT", "INT", "SMALLINT", "TINYINT"):
        return int(v)
    if kind == "DECIMAL":
        # Spark rounds decimal results HALF_UP to the result scale
        d = v if isinstance(v, Decimal) else Decimal(str(v))
        return d.quantize(Decimal(1).scaleb(-(t.scale or 0)), rounding=ROUND_HALF_UP)
    if kind == "ARRAY":
        assert t.element is not None
        return [_coerce(x, t.element) for x in v]
    if isinstance(v, np.generic):
        return v.item()
    return v


# --------------------------------------------------------------------------- schemas


def _output_schema(
    query: P.OperatorStage, op: OperatorPlan
) -> tuple[ST.StructType, pa.Schema, tuple[WqlType, ...], tuple[WqlType, ...]]:
    """The tagged stream's schema, in Spark and in Arrow (every batch must match it)."""
    columns: list[tuple[str, WqlType]] = [(KIND, T.STRING)]
    columns += [(f"__wql_k{i}", k.type) for i, k in enumerate(op.keys)]
    columns += [(n, T.BIGINT) for n in (_WS, _WE, _WT, _PI)]
    columns.append((_PT, T.STRING))
    agg_types = op.results
    columns += [(f"__wql_a{i}", t) for i, t in enumerate(agg_types)]
    late_types = tuple(op.values[i].type for _, i in op.late_columns)
    columns += [(f"__wql_l{j}", t) for j, t in enumerate(late_types)]
    columns += [(_LTS, T.BIGINT), (COUNTERS, T.STRING)]
    if op.config.tag_firings:
        columns += [(c, T.BIGINT) for c in (STEP, _CLS, _O1, _O2, _EMIT)]
    spark_schema = ST.StructType([ST.StructField(n, _spark_type(t)) for n, t in columns])
    arrow = pa.schema([pa.field(n, arrow_type(t)) for n, t in columns])
    return spark_schema, arrow, agg_types, late_types


def _spark_type(t: WqlType) -> ST.DataType:
    if t.is_unknown:
        raise WqlUnsupportedError(
            f"the operator engine needs a known type, got {t.ddl}; add a CAST to the expression"
        )
    return T.to_spark(t)


def _quote(name: str) -> str:
    return "`" + name.replace("`", "``") + "`"


def _post_aggregation(
    query: P.OperatorStage, op: OperatorPlan, rows: DataFrame, keep: tuple[str, ...] = ()
) -> DataFrame:
    """Operator rows -> the post-aggregation relation -> HAVING -> SELECT (plan output schema).

    ``keep``: columns of ``rows`` carried through, after the output columns.
    A window rank's rows go through :func:`_post_rank` instead.
    """
    if isinstance(query, P.WindowRank):
        return _post_rank(query, op, rows, keep)
    rel = rows.select(
        *keep,
        *[F.col(f"__wql_k{i}").alias(k.name) for i, k in enumerate(op.keys)],
        F.timestamp_millis(F.col(_WS)).alias("window_start"),
        F.timestamp_millis(F.col(_WE)).alias("window_end"),
        F.timestamp_millis(F.col(_WT)).alias("window_time"),
        F.col(_PI).alias("pane_index"),
        F.col(_PT).alias("pane_timing"),
        *[F.col(f"__wql_a{i}").alias(a.name) for i, a in enumerate(query.aggregates)],
    )
    if query.having is not None:
        rel = rel.where(F.expr(query.having.sql))
    return rel.select(*_projection(query.output), *keep)


def _post_rank(
    rank: P.WindowRank, op: OperatorPlan, rows: DataFrame, keep: tuple[str, ...]
) -> DataFrame:
    """A window rank's rows -> the input row and its rank -> the ranked relation (the
    subquery's list) -> the outer WHERE or QUALIFY -> the outer SELECT."""
    # results: the rank (__wql_a0), then the operator's values (__wql_a<1 + index>)
    rel = [F.col(f"__wql_a{1 + i}").alias(name) for name, i in op.payload]
    if rank.window is not None:
        rel += [
            F.timestamp_millis(F.col(c)).alias(n)
            for c, n in zip((_WS, _WE, _WT), P.WINDOW_TABLE_COLUMNS, strict=True)
        ]
    rel.append(F.col("__wql_a0").alias(P.RANK_COLUMN))
    ranked = rows.select(*keep, *rel).select(*keep, *_projection(rank.inner))
    if rank.condition is not None:
        ranked = ranked.where(F.expr(rank.condition.sql))
    return ranked.select(*_projection(rank.output), *keep)


def _projection(columns: tuple[P.OutputColumn, ...]) -> list[Column]:
    out = []
    for c in columns:
        col = F.expr(c.expr.sql)
        if not c.type.is_unknown:
            col = col.cast(T.to_spark(c.type))
        out.append(col.alias(c.name))
    return out


def _late_output(query: P.OperatorStage, op: OperatorPlan, rows: DataFrame) -> DataFrame:
    cols = [
        F.col(f"__wql_l{j}").alias(name)
        for j, (name, _) in enumerate(op.late_columns)
        if name.lower() != P.LATE_EVENT_TIME_COLUMN
    ]
    cols.append(F.timestamp_millis(F.col(_LTS)).alias(P.LATE_EVENT_TIME_COLUMN))
    return rows.select(*cols)


def _sum_counters(parts: list[dict[str, Any]]) -> dict[str, Any]:
    total: dict[str, Any] = {"rows_in": 0, "rows_emitted": 0, "late_rows": 0, "dropped": {}}
    for p in parts:
        for k in ("rows_in", "rows_emitted", "late_rows"):
            total[k] += int(p.get(k, 0))
        for reason, n in p.get("dropped", {}).items():
            total["dropped"][reason] = total["dropped"].get(reason, 0) + int(n)
    return total
