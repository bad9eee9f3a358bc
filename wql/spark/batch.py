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
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from wql.compiler import plan as P
from wql.compiler.backends.operator import OperatorPlan, build_operator
from wql.errors import ErrorCode, WqlUnsupportedError
from wql.runtime.windows import MAX_TIME, MIN_TIME
from wql.spark import layout as L
from wql.spark import replay as R

__all__ = ["OperatorRun", "REASON_FILTERED", "run_operator"]

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

    query: P.Query
    result: DataFrame
    late: DataFrame | None
    dropped: DataFrame
    counters: dict[str, Any]
    _cached: list[DataFrame] = field(default_factory=list, repr=False)
    _replay: R.Replay | None = field(default=None, repr=False)

    def release(self) -> None:
        """Free the cached operator output and replay."""
        for df in self._cached:
            df.unpersist()
        self._cached.clear()
        if self._replay is not None:
            self._replay.release()


def run_operator(
    query: P.Query,
    source: DataFrame,
    *,
    operator_plan: OperatorPlan | None = None,
    replay_strategy: str = R.STRATEGY_AUTO,
) -> OperatorRun:
    """Run ``query`` on the operator engine over the batch DataFrame ``source``.

    ``source`` must hold the source relation's columns (names as declared).
    Runs the Spark jobs needed for the replay statistics and the operator
    (whose output is cached); the returned DataFrames read that cache.
    """
    op = operator_plan or build_operator(query)
    spec = replay_spec(query, op)
    replayed = R.replay(source, spec, strategy=replay_strategy)
    try:
        return _run(query, op, spec, replayed)
    except BaseException:
        replayed.release()
        raise


def replay_spec(query: P.Query, op: OperatorPlan) -> R.ReplaySpec:
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
            query.trigger.span if query.trigger is not None else query.span,
            hint="declare WITH (processing_time = '<column>') on the source",
            code=ErrorCode.MIXED_CLOCKS,
        )
    return spec


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


def stage(query: P.Query, op: OperatorPlan, replayed: R.Replay) -> tuple[DataFrame, list[str]]:
    """The rows the operators see, and the names of their key columns.

    ``WHERE`` applied; keys as ``__wql_k<i>``, the operator's input values as
    ``__wql_v<i>``, and the replay columns (position, event time, clocks).
    """
    df = replayed.df
    if query.filter is not None:
        df = df.where(F.expr(query.filter.sql))
    key_cols = L.key_columns(len(op.keys))
    value_cols = L.value_columns(len(op.values))
    staged = df.select(
        *[F.expr(k.expr.sql).alias(c) for k, c in zip(op.keys, key_cols, strict=True)],
        *[F.expr(v.sql).alias(c) for v, c in zip(op.values, value_cols, strict=True)],
        R.SEQ,
        R.TS,
        R.WM,
        R.PT,
    )
    return staged, key_cols


def partition_task(
    query: P.Query,
    op: OperatorPlan,
    spec: R.ReplaySpec,
    replayed: R.Replay,
    *,
    slicing: bool = False,
) -> _PartitionTask:
    """The function the operator stage runs per key partition (``mapInArrow``).

    It holds the operator configuration, the output layout and the global
    clocks at the end of the replay; called on a partition's Arrow batches
    (rows of :func:`stage`, sorted by replay position) it yields the tagged
    output batches.
    """
    final_watermark, final_processing_time = final_clocks(replayed, spec)
    clock_events = global_clock_events(replayed) if op.mixes_time_domains else None
    _, layout = L.tagged_layout(query, op)
    return _PartitionTask(
        config=op.config,
        n_keys=len(op.keys),
        n_values=len(op.values),
        layout=layout,
        has_event_time=spec.event_time is not None,
        processing=op.uses_processing_time,
        wall_clock=op.uses_processing_time and spec.processing_time is None,
        final_watermark=final_watermark,
        final_processing_time=final_processing_time,
        clock_events=clock_events,
        slicing=slicing,
    )


def _run(query: P.Query, op: OperatorPlan, spec: R.ReplaySpec, replayed: R.Replay) -> OperatorRun:
    spark = replayed.df.sparkSession
    staged, key_cols = stage(query, op, replayed)
    rows = replayed.rows_replayed
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
    staged = staged.sortWithinPartitions(R.SEQ)

    slicing = str(spark.conf.get(OPERATOR_SLICING_CONF, "false")).lower() == "true"
    task = partition_task(query, op, spec, replayed, slicing=slicing)
    out_schema, layout = L.tagged_layout(query, op)
    if small:
        # The one partition's task runs right here, on the rows collected in
        # replay order: a small input then costs one Spark job instead of the
        # operator stage's jobs (its exchange, the cache build, the collect),
        # and the outputs read a local relation instead of a cache
        # (docs/benchmarks.md, "Small inputs"). Same task, same rows, same order.
        done = task(iter(staged.toArrow().to_batches()))
        table = pa.Table.from_batches(list(done), layout.schema)
        tagged = spark.createDataFrame(table, out_schema).coalesce(1)
    else:
        tagged = staged.mapInArrow(task, out_schema).persist()
    counters = L.sum_counters(r[L.COUNTERS] for r in L.counters_of(tagged).collect())
    replayed_rows = replayed.rows_replayed
    filtered = replayed_rows - counters["rows_in"]
    dropped = dict(replayed.dropped_counts)
    for reason, n in counters["dropped"].items():
        dropped[reason] = dropped.get(reason, 0) + n
    summary = {
        "rows_in": replayed.rows_in,
        "rows_replayed": replayed_rows,
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
        "dropped": dropped,
    }
    result = L.results(query, op, tagged)
    late = L.late_rows(op, tagged) if query.late_output is not None else None
    return OperatorRun(query, result, late, replayed.dropped, summary, [tagged], replayed)


# --------------------------------------------------------------------------- clocks


def final_clocks(replayed: R.Replay, spec: R.ReplaySpec) -> tuple[int, int]:
    """The watermark and processing time after the last replayed row (global)."""
    max_ts = replayed.max_ts
    wm = MIN_TIME if max_ts is None else max(MIN_TIME, max_ts - spec.delay_ms - 1)
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
    slicing: bool = False

    def __call__(self, batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        from wql.runtime.config import RowBatch
        from wql.runtime.operator import WindowOperator

        op = WindowOperator(self.config, slicing=self.slicing)
        events = ClockCursor(self.clock_events) if self.clock_events is not None else None
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
            wm = batch.column(R.WM).to_numpy(zero_copy_only=False).astype(np.int64)
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
                for i in range(len(row_keys)):
                    events.advance_before(op, int(seqs[i]))
                    op.advance_watermark(int(wm[i]))
                    if pt is not None:
                        op.advance_processing_time(int(pt[i]))
                    op.process_element(row_keys[i], None if ts is None else int(ts[i]), rows[i])
            yield from self._emit(op)
        if events is not None:
            events.advance_before(op, MAX_TIME)
        # the clocks after the last row of the whole replay (other keys' rows included)
        op.advance_watermark(self.final_watermark)
        if self.processing:
            final_pt = (
                time.time_ns() // 1_000_000 if self.wall_clock else self.final_processing_time
            )
            op.advance_processing_time(final_pt)
        op.end_of_input()
        yield from self._emit(op)
        yield self.layout.rows(counters=op.counters.as_dict())

    def _keys(self, batch: pa.RecordBatch) -> Any:
        """The batch's keys, factorised in Arrow when their Python values compare as Arrow's.

        One tuple per distinct key instead of one per row (and no hashing of
        row tuples downstream: ``RowBatch.keys`` as ``EncodedKeys``).
        """
        from wql.runtime.config import EncodedKeys

        n = batch.num_rows
        if self.n_keys == 0:
            return EncodedKeys(np.zeros(n, np.int64), [()])
        arrays = [batch.column(c) for c in L.key_columns(self.n_keys)]
        encoded = _encode_keys(arrays)
        if encoded is None:
            cols = [a.to_pylist() for a in arrays]
            return list(zip(*cols, strict=True))
        return EncodedKeys(*encoded)

    def _emit(self, op: Any) -> Iterator[pa.RecordBatch]:
        results = op.drain()
        late = op.drain_late()
        if results or late:
            yield self.layout.rows(results, late)


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
