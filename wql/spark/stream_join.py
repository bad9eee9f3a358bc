"""The stream join host: a window join and both sides' pipelines in ONE stateful processor.

A window join on a stream (docs/streaming.md, "Window joins") cannot be
Spark's stream-stream join: that emits matches as rows arrive and drops
rows behind its watermark without counting them, where Flink's
``WindowJoinOperator`` joins each window once, when the watermark passes
its end, and counts its late rows. Nor can it follow two chained Spark
stateful operators, for the reason of :mod:`wql.spark.stream_chain`:
the rows a side's view fires *at* a rise must reach the join before that
rise. So, as the pipeline host does, one processor holds everything::

    source -> withWatermark -> per side: its WHERE (a flag), keys and values
                               (a view's first stage) or the columns it copies
                               (a window table)
           -> groupBy(ON's key equalities both sides keep: each row once per side,
                      or a constant).transformWithStateInPandas(AllKeysProcessor: JoinBody)
           -> ONE tagged stream: the joined relation (R) and counters (C)
           -> ON's other conjuncts, WHERE, SELECT in Spark

Per call, with ``W`` the micro-batch's watermark (WQL's, as every
streaming host maps it):

1. **The rise.** Each view side's pipeline rises to ``W`` stage by stage
   (:class:`~wql.runtime.pipeline.OperatorChain`); the rows its view fires go to
   the join; then the join rises to ``W``: every window whose end - 1 it
   reaches joins its two buffers once (:class:`~wql.runtime.join.WindowJoinOperator`).
2. **The rows.** The micro-batch's rows in event-time order: a view side's
   rows (those its WHERE keeps) run through its pipeline at its watermark
   and what its view emits goes to the join; a window table side's rows go
   to the join, each in the windows its event time gets (late for a window
   that has joined).
3. **End of input** (a drained stream): the rise to the watermark after the
   last source row, then the end (every window joins).

The processor matches rows on ON's equalities of one column of each side
(:class:`~wql.compiler.plan.StreamJoin`); Spark applies the rest
of ON, WHERE and SELECT to the joined rows after it (an outer join's rest
of ON over each row of an outer side and its equality matches, which the
processor gives as its partners: ``StreamJoin.partners``). The counters
are the join's (both sides' rows in, late rows dropped), as in batch; each
view's own counters and late rows are its own query's (it streams on its
own as well).

When equalities of ON are between values both sides take from each source
row before any stage (``StreamJoin.partition``: a window table's column, a
view's key its pipeline carries from its first stage), each source row is
staged once per side (tagged ``__wql_side``) in the Spark group of that
side's values: rows of different values never match, so each group joins
its rows as the one group would, on every core, and a call restores and
saves its group's state only (docs/streaming.md, "Partitioned window
joins"). Any other join runs in one group: parallelism 1, and the whole
state restored and saved every call, as for a pipeline in one task.

A join of two sources (:func:`_two_sources`) streams each source with its
own ``withWatermark`` and stages its rows for its own side only (tagged
``__wql_side``): Spark's global watermark, the minimum of the two, is the
join's, as Flink's two-input operator keeps it (docs/streaming.md, "Window
joins of two sources").
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa
from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql import types as ST

from wql.compiler import plan as P
from wql.compiler.backends.escaping import sql_identifier
from wql.compiler.backends.operator import OperatorPlan, window_assigner
from wql.errors import ErrorCode, WqlUnsupportedError
from wql.runtime.config import RowBatch
from wql.runtime.join import JoinConfig
from wql.runtime.join import JoinSide as RuntimeSide
from wql.runtime.watermarks import bounded_watermark, watermark_lag
from wql.runtime.windows import MAX_TIME
from wql.spark import layout as L
from wql.spark.deferred import deferred
from wql.spark.replay import REASON_NULL_EVENT_TIME
from wql.spark.stream_chain import (
    AllKeysProcessor,
    ChainBody,
    chain_body,
    key_tuples,
    read_field,
)
from wql.spark.streaming import (
    END_MS,
    StreamRun,
    group_value,
    nan_columns,
    nan_names,
    watermarked,
)

__all__ = ["JoinBody", "StreamJoinRun", "run_stream_join"]

_GROUP = "__wql_join"  # the constant grouping column of a join that is not partitioned
_TS = "__wql_ts"
_SIDE = "__wql_side"  # a partitioned join's row: the side it is staged for


def _group(k: int) -> str:
    """A partitioned join's grouping column: the ``k``-th partitioning equality's value."""
    return f"__wql_g{k}"


def _column(side: int, what: str, i: int) -> str:
    """A staged column of side ``side``: a view's key (``k``) or value (``v``), a window
    table's copied column (``c``)."""
    return f"__wql_s{side}_{what}{i}"


def _keep(side: int) -> str:
    return f"__wql_s{side}_keep"


@dataclass(kw_only=True)
class StreamJoinRun(StreamRun):
    """A window join on a stream: the join and both sides' pipelines in one processor,
    run as ``plan`` (the planner's) says over its root source ``root``."""

    join: P.WindowJoin
    plan: P.StreamJoin
    root: P.SourceRef
    #: the right side's root source and stream, when the join reads two sources
    other: tuple[P.SourceRef, DataFrame] | None = None

    def read(self, tagged: DataFrame) -> tuple[DataFrame, DataFrame | None]:
        return L.join_results(self.join, self.plan.residual, tagged, self.plan.partners), None

    def with_end(self, end: DataFrame) -> StreamRun:
        return run_stream_join(
            self.join, self.plan, self.root, self.source, end=end, other=self.other
        )


def run_stream_join(
    join: P.WindowJoin,
    plan: P.StreamJoin,
    root: P.SourceRef,
    source: DataFrame,
    *,
    end: DataFrame | None = None,
    other: tuple[P.SourceRef, DataFrame] | None = None,
) -> StreamJoinRun:
    """The window join ``join`` (run as ``plan`` says) over the streaming ``source`` of its
    root source ``root``, as one stateful processor (see the module doc); ``end`` as for
    :func:`wql.spark.streaming.run_streaming`. ``other``: the right side's root source
    and stream when the join reads two sources (``root`` and ``source`` are the left's;
    :func:`_two_sources`)."""
    if other is not None:
        return _two_sources(join, plan, ((root, source), other), end)
    if any(how.sql for how in plan.sides):
        from wql.spark.stream_join_links import run_linked_join

        return run_linked_join(join, plan, root, source, end=end)
    et = root.event_time
    if et is None:  # the binder gives a window join's source event time
        raise WqlUnsupportedError(
            f"query {join.name!r} is a window join over a source without event time",
            join.span,
            code=ErrorCode.UNSUPPORTED,
        )
    # Spark's watermark is then WQL's (streaming module doc)
    df, idle_ms, heartbeats = watermarked(root, source, end, watermark_lag(et.delay_ms))
    staged: list[tuple[str, Column]] = [
        (_TS, F.unix_millis(F.col(sql_identifier(et.column)).cast("timestamp")))
    ]
    bodies: list[ChainBody] = []
    configs: list[Any] = []
    runtime_sides: list[RuntimeSide] = []
    for s, (side, how) in enumerate(zip(join.sides, plan.sides, strict=True)):
        ops, body = chain_body(how.chain, how.links, how.ops)
        bodies.append(body)
        configs += [op.config for op in ops]
        staged += _staged(s, how, ops)
        assigner = window_assigner(side.window) if side.window is not None else None
        runtime_sides.append(RuntimeSide(len(side.columns), assigner, how.window_columns))
    config = join_config(join, plan, runtime_sides)
    out_schema, layout = L.join_layout(join, partners=any(plan.partners))
    end_watermark = bounded_watermark(END_MS, et.delay_ms) if end is not None else None
    # empty metadata: no column keeps Spark's watermark marker, so Spark drops no
    # row (the runtime applies lateness)
    columns = [c.alias(n, metadata={}) for n, c in staged]
    # which staged FLOAT/DOUBLE values are NaN, not NULL (pandas reads both as NaN)
    types = df.select(*columns).schema.fields
    floats = tuple(
        i for i, f in enumerate(types) if isinstance(f.dataType, ST.FloatType | ST.DoubleType)
    )
    nans = nan_columns([c for _, c in staged], floats)
    columns += nans
    names = (*(name for name, _ in staged), *nan_names(len(nans)))
    if plan.partition_text:
        # each row once per side, in the group of that side's partition columns: rows
        # of different values never match (docs/streaming.md, "Partitioned window joins")
        # (one branch over the source: an explode, not a union that reads it twice)
        groups = [_group(k) for k in range(len(plan.partition_text))]
        kinds = dict(df.select(*columns).dtypes)
        names += (_SIDE, *groups)
        per_side = F.explode(
            F.array(
                *(
                    F.struct(
                        F.lit(s).alias(_SIDE),
                        *(
                            group_value(
                                F.col(_column(s, what, i)), kinds[_column(s, what, i)]
                            ).alias(g)
                            for g, (what, i) in zip(groups, plan.partition[s], strict=True)
                        ),
                    )
                    for s in (0, 1)
                )
            )
        )
        rows = df.select(*columns).select(*names[: len(columns)], per_side.alias(_SIDE))
        grouped = rows.select(
            *names[: len(columns)], *(F.col(f"{_SIDE}.{n}").alias(n) for n in (_SIDE, *groups))
        ).groupBy(*groups)
    else:
        grouped = df.select(*columns, F.lit(0).alias(_GROUP)).groupBy(_GROUP)
    joined = JoinBody(plan, (bodies[0], bodies[1]), names)
    processor = AllKeysProcessor(
        layout, end_watermark, (*configs, config), joined, et.delay_ms, True, (floats, len(staged))
    )
    return join_run(
        join, plan, grouped, processor, out_schema, (root, source), end, idle_ms, heartbeats
    )


def join_run(
    join: P.WindowJoin,
    plan: P.StreamJoin,
    grouped: Any,
    processor: Any,
    out_schema: Any,
    root: tuple[P.SourceRef, DataFrame],
    end: DataFrame | None,
    idle_ms: int | None,
    heartbeats: bool,
    other: tuple[P.SourceRef, DataFrame] | None = None,
) -> StreamJoinRun:
    """The join's processor over the ``grouped`` rows (Spark's
    ``transformWithStateInPandas`` in event time) and what reads its output: the run of
    the join over ``root``'s source (and ``other``'s, for two sources)."""
    tagged = grouped.transformWithStateInPandas(
        statefulProcessor=deferred(processor),
        outputStructType=out_schema,
        outputMode="Append",
        timeMode="EventTime",
    )
    return StreamJoinRun(
        join=join,
        plan=plan,
        root=root[0],
        other=other,
        tagged=tagged,
        result=L.join_results(join, plan.residual, tagged, plan.partners),
        late=None,
        counters=L.counters_of(tagged),
        time_mode="EventTime",
        source=root[1],
        drainable=end is not None,
        idle_ms=idle_ms,
        heartbeats=heartbeats,
    )


def _two_sources(
    join: P.WindowJoin,
    plan: P.StreamJoin,
    roots: tuple[tuple[P.SourceRef, DataFrame], tuple[P.SourceRef, DataFrame]],
    end: DataFrame | None,
) -> StreamJoinRun:
    """A window join of two sources on a stream (docs/streaming.md, "Window joins of two
    sources"): each source with its own ``withWatermark``, so that Spark's global
    watermark, the minimum of the two (``spark.sql.streaming.multipleWatermarkPolicy``
    ``min``, the default), is the join's as Flink's two-input operator keeps it; each
    source's rows staged for its own side only (tagged ``__wql_side``, the other side's
    columns NULL), the two unioned into the one processor the join of one source runs."""
    if any(plan.partners) or any(how.sql for how in plan.sides):
        raise WqlUnsupportedError(
            f"query {join.name!r} joins two sources on a stream as an outer join on more "
            "than column equalities, or with a side that reads its view through Spark SQL; "
            "a join of two sources runs on a stream in the one join processor only",
            join.span,
            hint="run the join in batch",
            code=ErrorCode.UNSUPPORTED,
        )
    if not all(df.isStreaming for _, df in roots):
        raise WqlUnsupportedError(
            f"query {join.name!r} joins two sources of which one is a stream and one is "
            "not: both must be streams, or neither",
            join.span,
            code=ErrorCode.UNSUPPORTED,
        )
    policy = roots[0][1].sparkSession.conf.get("spark.sql.streaming.multipleWatermarkPolicy", "min")
    if str(policy).lower() != "min":
        raise WqlUnsupportedError(
            f"query {join.name!r} joins two sources on a stream, whose watermark is the "
            "minimum of both; the session's spark.sql.streaming.multipleWatermarkPolicy is "
            f"{policy!r}",
            join.span,
            hint="set spark.sql.streaming.multipleWatermarkPolicy to min (Spark's default)",
            code=ErrorCode.UNSUPPORTED,
        )
    bodies: list[ChainBody] = []
    configs: list[Any] = []
    runtime_sides: list[RuntimeSide] = []
    side_columns: list[list[tuple[str, Column]]] = []
    frames: list[DataFrame] = []
    for s, (side, how) in enumerate(zip(join.sides, plan.sides, strict=True)):
        ref, source = roots[s]
        et = ref.event_time
        assert et is not None  # the binder gives a window join's sources event time
        df, _, _ = watermarked(ref, source, end, watermark_lag(et.delay_ms))
        ops, body = chain_body(how.chain, how.links, how.ops)
        bodies.append(body)
        configs += [op.config for op in ops]
        ts = F.unix_millis(F.col(sql_identifier(et.column)).cast("timestamp"))
        side_columns.append([(_TS, ts), *_staged(s, how, ops)])
        frames.append(df)
        assigner = window_assigner(side.window) if side.window is not None else None
        runtime_sides.append(RuntimeSide(len(side.columns), assigner, how.window_columns))
    config = join_config(join, plan, runtime_sides)
    out_schema, layout = L.join_layout(join)
    types = [frames[s].select(*(c.alias(n) for n, c in side_columns[s])).schema for s in (0, 1)]
    # one layout for both: the event time, then each side's columns (NULL in the other
    # source's rows, which the processor never gives that side)
    names = [_TS, *(n for n, _ in side_columns[0][1:]), *(n for n, _ in side_columns[1][1:])]
    fields = {f.name: f.dataType for t in types for f in t.fields}
    floats = tuple(
        i for i, n in enumerate(names) if isinstance(fields[n], ST.FloatType | ST.DoubleType)
    )
    groups = [_group(k) for k in range(len(plan.partition_text))]
    # which staged FLOAT/DOUBLE values are NaN, not NULL (pandas reads both as NaN)
    nans = nan_columns([F.col(n) for n in names], floats)
    parts = []
    for s in (0, 1):
        mine = dict(side_columns[s])
        columns = [
            (mine[n] if n in mine else F.lit(None).cast(fields[n])).alias(n, metadata={})
            for n in names
        ]
        kinds = {f.name: f.dataType.simpleString() for f in types[s].fields}
        grouping = [
            group_value(F.col(_column(s, what, i)), kinds[_column(s, what, i)]).alias(g)
            for g, (what, i) in zip(groups, plan.partition[s], strict=True)
        ]
        staged = frames[s].select(*columns)
        parts.append(
            staged.select(
                *names,
                *nans,
                F.lit(s).alias(_SIDE),
                *(grouping or [F.lit(0).alias(_GROUP)]),
            )
        )
    rows = parts[0].unionByName(parts[1])
    names_in = (*names, *nan_names(len(nans)), _SIDE, *groups)
    grouped = rows.groupBy(*groups) if groups else rows.groupBy(_GROUP)
    delays = [ref.event_time.delay_ms for ref, _ in roots if ref.event_time is not None]
    # the join's final watermark: the minimum of both sources' (the larger delay); the
    # final rise comes after every row, so its value changes no joined row
    end_watermark = min(bounded_watermark(END_MS, d) for d in delays) if end is not None else None
    joined = JoinBody(plan, (bodies[0], bodies[1]), names_in)
    processor = AllKeysProcessor(
        layout, end_watermark, (*configs, config), joined, max(delays), True, (floats, len(names))
    )
    return join_run(
        join, plan, grouped, processor, out_schema, roots[0], end, None, False, other=roots[1]
    )


def join_config(
    join: P.WindowJoin, plan: P.StreamJoin, runtime_sides: list[RuntimeSide]
) -> JoinConfig:
    """The runtime join of ``join`` on a stream, for each of its hosts: a row without event
    time dropped as in batch, each side's drops also counted under its name."""
    return JoinConfig(
        join.kind.value,
        plan.equi,
        (runtime_sides[0], runtime_sides[1]),
        missing_time_reason=REASON_NULL_EVENT_TIME,
        partners=any(plan.partners),
        side_names=(join.left.qualifier, join.right.qualifier),
    )


def _staged(side: int, how: P.JoinInput, ops: list[OperatorPlan]) -> list[tuple[str, Column]]:
    """The columns side ``side`` reads of each source row, by name."""
    if not how.chain:
        return [
            (_column(side, "c", j), F.col(sql_identifier(name)))
            for j, name in enumerate(how.source_columns)
            if name is not None
        ]
    first, op = how.chain[0], ops[0]
    keep: Column | None = None
    out: list[tuple[str, Column]] = []
    if first.filter is not None:
        keep = F.coalesce(F.expr(first.filter.sql), F.lit(False))
        out.append((_keep(side), keep))

    def value(sql: str) -> Column:
        # a row the side's WHERE rejects computes nothing (as after a filter)
        return F.when(keep, F.expr(sql)) if keep is not None else F.expr(sql)

    out += [(_column(side, "k", i), value(k.expr.sql)) for i, k in enumerate(op.keys)]
    out += [(_column(side, "v", j), value(v.sql)) for j, v in enumerate(op.values)]
    return out


@dataclass(frozen=True)
class JoinBody:
    """A window join and both sides' pipelines in an
    :class:`~wql.spark.stream_chain.AllKeysProcessor` (see the module doc; pickled
    to the workers).

    Its operators are the left side's view pipeline, the right side's (a
    window table side over the source has none), then the join; ``columns``:
    the staged columns' names, in the order Spark hands them over (by position).
    """

    plan: P.StreamJoin
    sides: tuple[ChainBody, ChainBody]
    columns: tuple[str, ...]
    #: the staged event-time column
    ts_index: int = 0

    def _ranges(self) -> tuple[tuple[int, int], tuple[int, int]]:
        """Each side's operators' positions in the processor's list."""
        n0 = len(self.sides[0].stages)
        return (0, n0), (n0, n0 + len(self.sides[1].stages))

    def rise(self, ops: list[Any], watermark: int) -> tuple[list[tuple], list[tuple]]:
        """Each view side's pipeline rises and its view's rows go to the join; then the
        join rises (every window whose end - 1 it reaches joins once)."""
        join = ops[-1]
        for s, (lo, hi) in enumerate(self._ranges()):
            if hi > lo:
                chain = self.sides[s].chain(ops[lo:hi], keep_late=False)
                self._to_join(s, join, chain.rise(watermark))
        if watermark == MAX_TIME:
            join.end_of_input()
        else:
            join.advance_watermark(watermark)
        return join.drain(), []

    def rows(
        self, ops: list[Any], batch: pa.RecordBatch, timestamps: Any, valid: Any
    ) -> tuple[list[tuple], list[tuple]]:
        """The micro-batch's rows: a view side's (those its WHERE keeps) through its
        pipeline to the join, a window table side's to the join."""
        names = list(self.columns)
        join = ops[-1]
        every = batch, timestamps, valid
        for s, (how, (lo, hi)) in enumerate(zip(self.plan.sides, self._ranges(), strict=True)):
            if how.sql:
                continue  # its view's rows come from Spark SQL (stream_join_links)
            batch, timestamps, valid = every
            if _SIDE in names:
                # a partitioned join stages each row once per side: this side's rows
                mine = batch.column(names.index(_SIDE)).to_numpy(zero_copy_only=False) == s
                batch = batch.filter(pa.array(mine))
                timestamps = timestamps[mine]
                valid = valid[mine] if valid is not None else None
                if valid is not None and valid.all():
                    valid = None
            if not how.chain:
                n = batch.num_rows
                copied = [
                    [None] * n
                    if name is None
                    else batch.column(names.index(_column(s, "c", j))).to_pylist()
                    for j, name in enumerate(how.source_columns)
                ]
                rows = list(zip(*copied, strict=True)) if copied else [()] * n
                ts = timestamps.tolist()
                if valid is not None:
                    ts = [t if ok else None for t, ok in zip(ts, valid.tolist(), strict=True)]
                join.process_rows(s, [None] * n, ts, rows)
                continue
            spec = self.sides[s].stages[0]
            side = batch
            if _keep(s) in names:
                mask = batch.column(names.index(_keep(s)))
                side = batch.filter(mask)
                keep = mask.to_numpy(zero_copy_only=False)
                side_ts = timestamps[keep]
                side_valid = valid[keep] if valid is not None else None
            else:
                side_ts, side_valid = timestamps, valid
            n = side.num_rows
            if not n:
                continue
            keys = key_tuples(
                [side.column(names.index(_column(s, "k", i))) for i in range(spec.n_keys)], n
            )
            columns = tuple(
                L.runtime_column(side.column(names.index(_column(s, "v", j))))
                for j in range(spec.n_values)
            )
            if side_valid is not None and side_valid.all():
                side_valid = None
            wm = np.full(n, ops[lo].watermark, dtype=np.int64)
            ops[lo].process_batch(RowBatch(keys, side_ts, columns, wm, None, side_valid))
            chain = self.sides[s].chain(ops[lo:hi], keep_late=False)
            self._to_join(s, join, chain.pass_down())
        return join.drain(), []

    def _to_join(self, side: int, join: Any, rows: list[tuple]) -> None:
        """A view side's emitted ``rows`` as the join's input rows of that side."""
        if not rows:
            return
        up = self.sides[side].stages[-1]
        batch = up.tagged.rows(rows)
        n = batch.num_rows
        columns = [
            [None] * n if f is None else read_field(batch, f, up.n_keys).to_pylist()
            for f in self.plan.sides[side].fields
        ]
        values = list(zip(*columns, strict=True)) if columns else [()] * n
        event_time = self.plan.sides[side].event_time
        if event_time is not None:
            # a window table over the view: each row in the windows of its window bound
            times = batch.column(L.FIELD_COLUMNS[event_time]).to_pylist()
            join.process_rows(side, [None] * n, times, values)
            return
        starts = batch.column(L.WINDOW_START).to_pylist()
        ends = batch.column(L.WINDOW_END).to_pylist()
        join.process_rows(side, list(zip(starts, ends, strict=True)), [None] * n, values)
