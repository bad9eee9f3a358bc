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

import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql import types as ST

from wql.compiler import plan as P
from wql.compiler import types as T
from wql.compiler.backends.escaping import sql_identifier
from wql.compiler.backends.operator import OperatorPlan, build_stage
from wql.compiler.clock_dependence import depends_on_watermark_sequence
from wql.errors import ErrorCode, WqlUnsupportedError
from wql.runtime.config import EMIT_RESULTS, FIRED_BY_ROW
from wql.runtime.pipeline import CLASS_ROW, CLASS_TIMER, GlobalClock
from wql.runtime.watermarks import bounded_watermark
from wql.runtime.windows import MAX_TIME, MIN_TIME
from wql.spark import driver_run
from wql.spark import layout as L
from wql.spark import replay as R

__all__ = ["OperatorRun", "REASON_FILTERED", "run_operator", "run_view_stage"]

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
    #: result with each row's place in the global sequence (``layout.STEP``, ``layout.RANK``), what
    #: the queries reading this one take as input, and the pipeline's clock.
    placed: DataFrame | None = None
    clock: GlobalClock | None = None
    #: ``result``'s row count when it is known without a job: a run in the driver whose
    #: projection keeps every fired row (no HAVING, QUALIFY or outer WHERE)
    rows_out: int | None = None

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
    # the tasks compute the watermarks themselves unless something needs the rows'
    # global positions: a pipeline's clock and placer, or the clock-event sequence
    in_task = not tag and not op.mixes_time_domains
    spark = source.sparkSession
    if (
        replay_strategy == R.STRATEGY_AUTO
        and driver_run.applies(spec, op, tag)
        and spark.conf.get(OPERATOR_PARTITIONS_CONF, None) is None
        and small_by_size(source)
    ):
        # a small source: read once, replayed and run here (wql/spark/driver_run.py)
        replayed, rows = driver_run.collect(query, op, source, spec)
        task = partition_task(query, op, spec, replayed)
        tagged, counters, fired = _in_driver(spark, query, op, task, rows)
        run = _outcome(
            query,
            op,
            tagged,
            counters,
            replayed.rows_replayed,
            replayed.dropped,
            replayed.rows_in,
            replayed,
            None,
            fired,
        )
        _add_drops(run, replayed)
        return run
    if replay_strategy == R.STRATEGY_AUTO and in_task and not depends_on_watermark_sequence(query):
        # no global clock at all: each key partition's own rows' (docs/running.md,
        # "Plans that do not depend on the watermark sequence")
        replay_strategy = R.STRATEGY_LOCAL
    replayed = R.replay(source, spec, strategy=replay_strategy, in_task=in_task)
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
    # an idle timeout measures gaps between arrivals on the processing-time column
    idle = et is not None and et.idle_ms is not None and query.source.processing_time is not None
    spec = R.ReplaySpec(
        event_time=et.column if et else None,
        delay_ms=et.delay_ms if et else 0,
        arrival_order=query.source.arrival_order,
        processing_time=query.source.processing_time if op.uses_processing_time or idle else None,
        idle_ms=et.idle_ms if idle and et is not None else None,
    )
    if op.mixes_time_domains and spec.processing_time is None:
        raise WqlUnsupportedError(
            f"query {query.name!r} uses both event time and processing time; batch replay "
            "needs the global sequence of both clocks, which exists only with a declared "
            "processing-time column",
            op.trigger_span,
            hint="declare WITH (processing_time = '<column>') on the source",
            code=ErrorCode.MIXED_CLOCKS,
        )
    return spec


OPERATOR_PARTITIONS_CONF = "spark.wql.operator.partitions"


# Up to this many replayed rows the operator runs in ONE partition, gathered
# without a shuffle: a small input is done before a second task would start
# (bench/small_files.py, docs/benchmarks.md "Small inputs").
SMALL_INPUT_ROWS = 10_000


#: A local replay (no statistics job, so no row count before the operator stage)
#: runs as a small input when the plan's size estimate is at most this many bytes.
SMALL_INPUT_BYTES = 1 << 20


def small_by_size(df: DataFrame) -> bool:
    """Whether Spark's size estimate of ``df`` (no job) is at most :data:`SMALL_INPUT_BYTES`.

    File scans estimate their files' size, local data its rows' size; a plan
    Spark cannot estimate reports a huge default. Only speed depends on it:
    a small input's one partition runs in the driver, with the same rows in
    the same order as any other partitioning.
    """
    try:
        stats = df._jdf.queryExecution().optimizedPlan().stats()  # type: ignore[operator]
        size = stats.sizeInBytes()  # a Scala BigInt, which py4j may hand over as an int
        return int(size if isinstance(size, int) else size.toString()) <= SMALL_INPUT_BYTES
    except Exception:  # no JVM plan to read (e.g. a Spark Connect session)
        return False


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
    ``__wql_v<i>``, and the replay columns (position, event time, clocks; for a
    summary replay its order columns (event time or arrival, input order) instead of
    position and watermark).
    """
    if replayed.summary is not None:
        replay_cols = dict.fromkeys([*replayed.order, R.TS, R.INPUT_ID, R.PT])
        return _staged(query, op, replayed.df, *replay_cols)
    return _staged(query, op, replayed.df, R.SEQ, R.TS, R.WM, R.PT)


def stage_view(
    query: P.OperatorStage, op: OperatorPlan, placed: DataFrame
) -> tuple[DataFrame, list[str]]:
    """:func:`stage` for a query over a view: its rows with their steps and ranks.

    The event time is the view's event-time column in ms; the watermark each
    row sees comes from the pipeline's clock, in the task.
    """
    et = query.source.event_time
    ts = (
        F.unix_millis(F.col(sql_identifier(et.column)))
        if et is not None
        else F.lit(None).cast("bigint")
    )
    return _staged(query, op, placed, L.STEP, L.RANK, ts.alias(R.TS))


def _staged(
    query: P.OperatorStage, op: OperatorPlan, df: DataFrame, *replay: str | Column
) -> tuple[DataFrame, list[str]]:
    if query.filter is not None:
        df = df.where(F.expr(query.filter.sql))
    key_cols = L.key_columns(len(op.keys))
    value_cols = L.value_columns(len(op.values))
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
    if replayed is not None and replayed.local_order is not None:
        # each partition's own clock; end of input fires the rest (nothing global)
        final, clock_events = (MIN_TIME, MIN_TIME), None
    elif replayed is not None:
        assert spec is not None
        final = final_clocks(replayed, spec)
        clock_events = global_clock_events(replayed) if op.mixes_time_domains else None
    else:
        assert clock is not None
        final, clock_events = (clock.final, MIN_TIME), None
    _, layout = L.tagged_layout(query, op)
    return _PartitionTask(
        config=op.config,
        n_keys=len(op.keys),
        n_values=len(op.values),
        layout=layout,
        has_event_time=query.source.event_time is not None,
        processing=op.uses_processing_time,
        wall_clock=op.uses_processing_time and (spec is None or spec.processing_time is None),
        final_watermark=final[0],
        final_processing_time=final[1],
        clock_events=clock_events,
        clock=clock,
        view_input=replayed is None,
        summary=None if replayed is None else replayed.summary,
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
    staged, key_cols = stage(query, op, replayed)
    task = partition_task(query, op, spec, replayed, clock=clock)
    run = _execute(
        query,
        op,
        staged,
        key_cols,
        task,
        replayed.rows_replayed if replayed.settled else None,
        replayed.dropped,
        replayed.rows_in,
        replayed,
        clock,
    )
    _add_drops(run, replayed)
    return run


def _add_drops(run: OperatorRun, replayed: R.Replay) -> None:
    """The replay's drops (rows never replayed) in the run's counters, by reason."""
    for reason, n in replayed.dropped_counts.items():
        run.counters["dropped"][reason] = run.counters["dropped"].get(reason, 0) + n


def _execute(
    query: P.OperatorStage,
    op: OperatorPlan,
    staged: DataFrame,
    key_cols: list[str],
    task: _PartitionTask,
    rows: int | None,
    dropped: DataFrame,
    rows_in: int,
    replayed: R.Replay | None,
    clock: GlobalClock | None,
) -> OperatorRun:
    """Run the operator stage over ``staged`` (``rows`` rows), one ``task`` per key partition.

    ``rows`` None: a local replay, whose counts are known once this job has
    read the rows (:meth:`Replay.settle`); it is small when its plan's size
    estimate is (:func:`small_by_size`).
    """
    spark = staged.sparkSession
    partitions = operator_partitions(spark, rows)
    if rows is None:
        small = spark.conf.get(OPERATOR_PARTITIONS_CONF, None) is None and small_by_size(staged)
    else:
        small = partitions == 1 and rows <= SMALL_INPUT_ROWS
    if small:
        # a small replay is one partition already (the window strategy): gather,
        # no shuffle, and no extra stage for adaptive execution to plan
        staged = staged.coalesce(1)
    elif key_cols:
        staged = staged.repartition(partitions, *key_cols)
    else:
        staged = staged.repartition(1)
    staged = staged.sortWithinPartitions(*task.order)
    if task.summary is not None:
        # sorted by them; the task needs the row id (and arrival)
        staged = staged.drop(R.INPUT_FILE, R.INPUT_RANK)
    out_schema, layout = L.tagged_layout(query, op)
    if small:
        # The one partition's task runs right here, on the rows collected in
        # replay order: a small input then costs one Spark job instead of the
        # operator stage's jobs (its exchange, the cache build, the collect),
        # and the outputs read a local relation instead of a cache
        # (docs/benchmarks.md, "Small inputs"). Same task, same rows, same order.
        tagged, counters, fired = _in_driver(spark, query, op, task, staged.toArrow())
    else:
        tagged = staged.mapInArrow(task, out_schema).persist()
        counters = L.sum_counters(r[L.COUNTERS] for r in L.counters_of(tagged).collect())
        fired = None
    if rows is None:
        assert replayed is not None
        replayed.settle()  # the job above read the rows: their counts are observed
        rows, rows_in = replayed.rows_replayed, replayed.rows_in
    return _outcome(query, op, tagged, counters, rows, dropped, rows_in, replayed, clock, fired)


def _in_driver(
    spark: Any, query: P.OperatorStage, op: OperatorPlan, task: _PartitionTask, rows: pa.Table
) -> tuple[DataFrame, dict[str, Any], int]:
    """One partition's ``task`` run here on ``rows`` (in replay order): its tagged output
    as a local relation, its counters and its number of result rows (read from the
    output, no job)."""
    out_schema, layout = L.tagged_layout(query, op)
    done = task(iter(rows.to_batches()))
    table = pa.Table.from_batches(list(done), layout.schema)
    tagged = spark.createDataFrame(table, out_schema).coalesce(1)
    kinds = table.column(L.KIND).to_pylist()
    parts = table.column(L.COUNTERS).to_pylist()
    counters = L.sum_counters(c for k, c in zip(kinds, parts, strict=True) if k == L.COUNTS)
    return tagged, counters, kinds.count(L.RESULT)


def _outcome(
    query: P.OperatorStage,
    op: OperatorPlan,
    tagged: DataFrame,
    counters: dict[str, Any],
    rows: int,
    dropped: DataFrame,
    rows_in: int,
    replayed: R.Replay | None,
    clock: GlobalClock | None,
    fired: int | None = None,
) -> OperatorRun:
    """The run's outputs over the operator's ``tagged`` output and its summed counters;
    ``fired``: the number of its result rows, when known (a run in the driver)."""
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
    result = L.results(query, op, tagged)
    placed = L.placed_results(query, op, tagged) if op.config.tag_firings else None
    late = L.late_rows(op, tagged) if query.late_output is not None else None
    return OperatorRun(
        query,
        result,
        late,
        dropped,
        summary,
        [tagged],
        replayed,
        placed=placed,
        clock=clock,
        rows_out=fired if fired is not None and L.keeps_every_row(query) else None,
    )


def _dropped_schema(query: P.OperatorStage) -> ST.StructType:
    """A query's input columns and ``reason``: the shape of :attr:`OperatorRun.dropped`."""
    fields = [ST.StructField(c.name, T.to_spark(c.type)) for c in query.source.columns]
    return ST.StructType([*fields, ST.StructField("reason", ST.StringType())])


# --------------------------------------------------------------------------- clocks


def final_clocks(replayed: R.Replay, spec: R.ReplaySpec) -> tuple[int, int]:
    """The watermark and processing time after the last replayed row (global)."""
    max_ts = replayed.max_ts
    wm = MIN_TIME if max_ts is None else bounded_watermark(max_ts, spec.delay_ms)
    pt = MIN_TIME if replayed.max_pt is None else replayed.max_pt
    return wm, pt


def global_clock_events(replayed: R.Replay) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The global clock sequence: ``(seq, watermark_before, processing_time)`` at each change."""
    rows = replayed.df.select(R.SEQ, R.WM, R.PT).orderBy(R.SEQ).toArrow()
    seq = rows.column(R.SEQ).to_numpy()
    wm = rows.column(R.WM).to_numpy()
    pt = rows.column(R.PT).fill_null(MIN_TIME).to_numpy()
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
    layout: L.TaggedLayout
    has_event_time: bool
    processing: bool
    wall_clock: bool
    final_watermark: int
    final_processing_time: int
    clock_events: tuple[np.ndarray, np.ndarray, np.ndarray] | None
    #: a pipeline's clock: the task places its rows (a stage that tags them) and, for
    #: a view's rows (``view_input``), gives each the watermark of its step
    clock: GlobalClock | None = None
    view_input: bool = False
    #: a summary replay's: the rows carry their replay order, not their watermark
    summary: R.ReplaySummary | None = None

    @property
    def order(self) -> tuple[str, ...]:
        """The columns each partition's rows are sorted by before the task reads them."""
        if self.view_input:
            return (L.STEP, L.RANK)
        return self.summary.order if self.summary is not None else (R.SEQ,)

    def __call__(self, batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        from wql.runtime.config import RowBatch
        from wql.runtime.operator_factory import make_operator

        op = make_operator(self.config)
        events = ClockCursor(self.clock_events) if self.clock_events is not None else None
        placer = (
            _Placer(self.clock, len(self.layout.agg_types))
            if self.clock is not None and self.config.tag_firings
            else None
        )
        carry = MIN_TIME  # a local replay's clock: the largest event time so far
        for batch in batches:
            if batch.num_rows == 0:
                continue
            keys = self._keys(batch)
            columns = tuple(
                L.runtime_column(batch.column(c)) for c in L.value_columns(self.n_values)
            )
            ts = (
                batch.column(R.TS).to_numpy(zero_copy_only=False).astype(np.int64)
                if self.has_event_time
                else None
            )
            if self.view_input:
                assert self.clock is not None
                steps = batch.column(L.STEP).to_numpy(zero_copy_only=False).astype(np.int64)
                wm = self.clock.watermarks_before(steps)
                if placer is not None:
                    placer.add(steps, batch.column(L.RANK).to_numpy(zero_copy_only=False))
            elif isinstance(self.summary, R.LocalClock):
                # the partition's own clock (a plan that does not depend on it)
                if ts is None:
                    wm = np.full(batch.num_rows, MIN_TIME, dtype=np.int64)
                else:
                    wm, carry = R.watermarks_before(ts, carry, self.summary.delay_ms)
            elif self.summary is not None:
                wm = self.summary.watermarks_of(batch)
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
                row_keys = keys.tolist() if hasattr(keys, "tolist") else keys
                replay_rows(op, events, seqs, wm, pt, row_keys, ts, rows)
            yield from self._emit(op, placer)
        # the clocks after the last row of the whole replay (other keys' rows included)
        final_pt = None
        if self.processing:
            final_pt = (
                time.time_ns() // 1_000_000 if self.wall_clock else self.final_processing_time
            )
        end_of_replay(op, events, self.final_watermark, final_pt)
        yield from self._emit(op, placer)
        yield self.layout.rows(counters=op.counters.as_dict())

    def _keys(self, batch: pa.RecordBatch) -> Any:
        """The batch's keys, factorised in Arrow when their Python values compare as Arrow's.

        One tuple per distinct key instead of one per row (and no hashing of
        row tuples downstream: ``RowBatch.keys`` as ``EncodedKeys``).
        """
        from wql.runtime.config import EncodedKeys, nan_keys

        n = batch.num_rows
        if self.n_keys == 0:
            return EncodedKeys(np.zeros(n, np.int64), [()])
        arrays = [batch.column(c) for c in L.key_columns(self.n_keys)]
        encoded = _encode_keys(arrays)
        if encoded is None:
            # floats: every NaN is one key (NAN_KEY); -0.0 and 0.0 are one as Python's ==
            cols = [
                nan_keys(a.to_pylist()) if pa.types.is_floating(a.type) else a.to_pylist()
                for a in arrays
            ]
            return list(zip(*cols, strict=True))
        return EncodedKeys(*encoded)

    def _emit(self, op: Any, placer: _Placer | None = None) -> Iterator[pa.RecordBatch]:
        results = op.drain()
        late = op.drain_late()
        if results or late:
            placed = placer.place(results) if placer is not None and results else None
            yield self.layout.rows(results, late, placed=placed)


class _Placer:
    """Places a tagging stage's emitted rows in the pipeline's global sequence.

    Keeps the step and rank of every input row by arrival number (the
    operator numbers the rows it is given), and numbers the emitted rows.
    """

    def __init__(self, clock: GlobalClock, n_aggregates: int) -> None:
        self.clock = clock
        self.tags = EMIT_RESULTS + n_aggregates  # FIRED_FIELDS follow the aggregate results
        self.steps: list[int] = []
        self.ranks: list[int] = []
        self.emitted = 0

    def add(self, steps: np.ndarray, ranks: np.ndarray) -> None:
        """The next input rows' steps and ranks, in the order the operator takes them."""
        self.steps += steps.tolist()
        self.ranks += ranks.tolist()

    def place(self, rows: list[tuple]) -> dict[str, pa.Array]:
        """The placement columns of ``rows`` (emitted, in order)."""
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
            L.STEP: pa.array(step, pa.int64()),
            L.PLACE_CLASS: pa.array(cls, pa.int64()),
            L.PLACE_ORDER1: pa.array(o1, pa.int64()),
            L.PLACE_ORDER2: pa.array(o2, pa.int64()),
            L.PLACE_EMITTED: pa.array(emit, pa.int64()),
        }


def clocks_before_row(
    op: Any, events: ClockCursor | None, seq: int, watermark: int, processing_time: int | None
) -> None:
    """Bring ``op``'s clocks to those the replay's row ``seq`` sees: the clock changes of
    other keys' rows before it (``events``: a query that mixes clocks), then the row's
    watermark and processing time (None: the query has no processing clock)."""
    if events is not None:
        events.advance_before(op, seq)
    op.advance_watermark(watermark)
    if processing_time is not None:
        op.advance_processing_time(processing_time)


def replay_rows(
    op: Any,
    events: ClockCursor | None,
    seqs: Any,
    watermarks: Any,
    processing_times: Any,
    keys: Sequence[tuple],
    timestamps: Any,
    rows: Sequence[tuple],
    *,
    rising: Callable[[int], None] | None = None,
    processed: Callable[[int], None] | None = None,
) -> None:
    """Row by row in replay order (``seqs``, ``watermarks``, ``processing_times``,
    ``timestamps``: integer arrays or lists, None where the query has no such clock):
    ``op``'s clocks brought to those row ``i`` sees
    (:func:`clocks_before_row`), then the row. ``rising(i)``: called after row ``i``'s
    clocks rose and before it is processed, ``processed(i)`` after: what ``wql run
    --timeline`` records of each row (the partition task passes neither)."""
    for i in range(len(keys)):
        row_pt = None if processing_times is None else int(processing_times[i])
        clocks_before_row(op, events, int(seqs[i]), int(watermarks[i]), row_pt)
        if rising is not None:
            rising(i)
        op.process_element(keys[i], None if timestamps is None else int(timestamps[i]), rows[i])
        if processed is not None:
            processed(i)


def end_of_replay(
    op: Any, events: ClockCursor | None, watermark: int, processing_time: int | None
) -> None:
    """The end of a key partition's replay: the clocks after the last row of the whole
    replay (every other key's clock change, the final watermark and processing time),
    then the end of input."""
    if events is not None:
        events.advance_before(op, MAX_TIME)
    op.advance_watermark(watermark)
    if processing_time is not None:
        op.advance_processing_time(processing_time)
    op.end_of_input()


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


def _encodable(t: pa.DataType) -> bool:
    """Key types whose Arrow equality is Python's (floats are not: NaN, -0.0)."""
    return (
        pa.types.is_integer(t)
        or pa.types.is_string(t)
        or pa.types.is_large_string(t)
        or pa.types.is_boolean(t)
        or pa.types.is_date(t)
        or pa.types.is_timestamp(t)
        or pa.types.is_decimal(t)
        or pa.types.is_binary(t)
    )


def _encode_keys(arrays: list[pa.Array]) -> tuple[np.ndarray, list[tuple]] | None:
    """``(codes, distinct key tuples)`` in first-appearance order, or None (not encodable).

    Each column is dictionary-encoded (nulls are a value of their own, as
    ``None`` in a Python key); several columns combine their codes and are
    factorised again, keeping first appearance.
    """
    if not all(_encodable(a.type) for a in arrays):
        return None
    codes: np.ndarray | None = None
    values: list[list] = []
    width = 1
    for a in arrays:
        enc = pc.dictionary_encode(a, null_encoding="encode")
        dictionary = enc.dictionary.to_pylist()
        c = enc.indices.to_numpy(zero_copy_only=False).astype(np.int64)
        width *= max(len(dictionary), 1)
        if width >= 2**62:
            return None
        codes = c if codes is None else codes * len(dictionary) + c
        values.append(dictionary)
    assert codes is not None
    if len(values) == 1:
        return codes, [(v,) for v in values[0]]
    combined, first, inverse = np.unique(codes, return_index=True, return_inverse=True)
    order = np.argsort(first, kind="stable")
    rank = np.empty(len(order), np.int64)
    rank[order] = np.arange(len(order), dtype=np.int64)
    keys = []
    for code in combined[order].tolist():
        digits = []
        for dictionary in reversed(values):
            code, d = divmod(code, len(dictionary))
            digits.append(dictionary[d])
        keys.append(tuple(reversed(digits)))
    return rank[inverse.reshape(-1)], keys
