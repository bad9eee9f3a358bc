r"""A window join whose side reads its view through Spark SQL: the side's pipeline before the join.

The join processor (:mod:`wql.spark.stream_join`) runs each view side's
pipeline itself, so a view row reaches the join before the rise that fired
it, as Flink's chain orders it. It has no Spark inside to evaluate SQL, so a
side whose view has ``HAVING``, whose column the join reads is computed by
the view, or whose pipeline has a link in Spark SQL (``JoinInput.sql``,
planned in :mod:`wql.compiler.stream_plan`) runs as a pipeline cut at a
link in Spark SQL does (:mod:`wql.spark.stream_links`): its pipeline's
segments are stateful operators of the same streaming query, the last one
tagging its rows with the rise that fired them, its phase and its place,
with a marker per rise; Spark evaluates the view's relation, ``HAVING`` and
``SELECT`` over them (:func:`~wql.spark.layout.linked_view_rows`); and the
join's operator takes them with the source's rows::

    source -> withWatermark -> side s's first stage (keys, values) -> [segments]
                                  -> the view's HAVING and SELECT (tagged rows, markers)
                            \-> the join's staged columns (the sides it runs itself)
           -> union -> groupBy(constant, or the equalities' values)
           -> transformWithStateInPandas(LinkedJoinProcessor)
           -> the joined relation (R) and counters (C) -> ON's rest, WHERE, SELECT

Per call, with ``W`` the micro-batch's watermark: every step of the call in
(rise, phase) order -- per rise, the side rows the rise fired (in their
emission order) go to the join at its watermark, the sides the processor
runs rise (their views' rows to the join), then the join rises; after the
rise to ``W`` the micro-batch's source rows go to the sides the processor
runs, and the side rows of phase 1 (emitted while the side's first stage
took the micro-batch's rows) to the join. That is the one processor's call:
the rows a side's view fires at a rise reach the join before it rises, and
rows at one watermark enter the join's buffers in an order that changes only
the order of the joined rows (a window joins its two buffers once, whole).

Exact, rows and counters, for the reasons of a pipeline cut at a link in
Spark SQL (docs/streaming.md, "Links in Spark SQL"): every operator of the
query runs in every micro-batch at the same watermark; every segment and
the join run in one group (a constant), so each sees every rise the one
before made (its markers) and the join processor sees every source row --
or, when the planner partitions the join by an equality whose cut side's
column is a view key its pipeline carries (``stream_plan._cut_ref``), the
segments run partitioned by the pipeline's keys and the join by the
equalities' values, so each join group sees the rises of the segment groups
that feed it (docs/streaming.md, "Partitioned window joins"); a
rise a segment misses (a later operator's timer) fires nothing in it, and a
row its view fires later at a timer at ``T`` has a window whose end - 1 (its
``window_time``) is at least ``T``, so it is late for no join window at
either watermark (a window table over a view is windowed by the view's
``window_time``: the binder's rule). The
join's counters are its own (the view rows it took, after ``HAVING``, as in
batch); each view streams on its own with its counters.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql import types as ST
from pyspark.sql.streaming.stateful_processor import TimerValues

from wql.compiler import plan as P
from wql.compiler.backends.escaping import sql_identifier
from wql.compiler.backends.operator import OperatorPlan, window_assigner
from wql.compiler.stream_plan import carried_keys, chain_partition
from wql.runtime.config import EMIT_WINDOW_END, EMIT_WINDOW_START
from wql.runtime.join import JoinSide as RuntimeSide
from wql.runtime.watermarks import bounded_watermark, watermark_lag
from wql.runtime.windows import MAX_TIME
from wql.spark import layout as L
from wql.spark.stream_chain import AllKeysProcessor, ChainBody, chain_body
from wql.spark.stream_join import (
    _GROUP,
    _TS,
    JoinBody,
    StreamJoinRun,
    _column,
    _group,
    _staged,
    join_config,
    join_run,
)
from wql.spark.stream_links import MAX_TS, PHASE, RISE, SEQ, TAGS, run_segments
from wql.spark.streaming import (
    _ALL,
    END_MS,
    call_clocks,
    end_watermark,
    float_inputs,
    nan_columns,
    watermarked,
)

__all__ = ["LinkedJoinProcessor", "run_linked_join"]

_ORIGIN = "__wql_origin"  # 0: a source row; s + 1: a row (or marker) of side s's view
_MARKED = "__wql_marker"


def _window(side: int, what: str) -> str:
    """A side's staged window start (``ws``), end (``we``) or event time (``t``), in ms."""
    return f"__wql_s{side}_{what}"


def run_linked_join(
    join: P.WindowJoin,
    plan: P.StreamJoin,
    root: P.SourceRef,
    source: DataFrame,
    *,
    end: DataFrame | None = None,
) -> StreamJoinRun:
    """The window join ``join`` whose ``plan`` has a side read through Spark SQL, over the
    streaming ``source`` of its root source ``root`` (see the module doc); ``end`` as
    for :func:`wql.spark.streaming.run_streaming`."""
    et = root.event_time
    assert et is not None  # the binder gives a window join's source event time
    df, idle_ms, heartbeats = watermarked(root, source, end, watermark_lag(et.delay_ms))
    joined: list[tuple[str, Column]] = [
        (_TS, F.unix_millis(F.col(sql_identifier(et.column)).cast("timestamp")))
    ]
    bodies: list[ChainBody] = []
    configs: list[Any] = []
    runtime_sides: list[RuntimeSide] = []
    fed: dict[int, tuple[DataFrame, list[tuple[str, Column]]]] = {}
    for s, (side, how) in enumerate(zip(join.sides, plan.sides, strict=True)):
        assigner = window_assigner(side.window) if side.window is not None else None
        runtime_sides.append(RuntimeSide(len(side.columns), assigner, how.window_columns))
        if how.sql:
            bodies.append(ChainBody(()))
            fed[s] = _side_rows(s, how, df, end is not None, bool(plan.partition_text))
            continue
        ops, body = chain_body(how.chain, how.links, how.ops)
        bodies.append(body)
        configs += [op.config for op in ops]
        joined += _staged(s, how, ops)
    config = join_config(join, plan, runtime_sides)
    # one column list for every branch of the union: each branch fills the others'
    # columns with a placeholder, then its origin, marker flag and tags
    branches = [(df, joined)] + [fed[s] for s in sorted(fed)]
    types: dict[str, ST.DataType] = {}
    for frame, columns in branches:
        for f in frame.select(*(c.alias(n) for n, c in columns)).schema.fields:
            types[f.name] = f.dataType
    names = list(types)
    floats = tuple(
        i for i, n in enumerate(names) if isinstance(types[n], ST.FloatType | ST.DoubleType)
    )
    tag_columns = (_ORIGIN, _MARKED, *TAGS)
    groups = [_group(k) for k in range(len(plan.partition_text))]
    # a partitioned join (planned with one side read through Spark SQL): a row's group
    # is its side's column of each equality, a marker's too (the segments run partitioned
    # by the view's keys, which their markers carry: docs/streaming.md, "Partitioned
    # window joins"); one type per group column, the side the processor runs gives it
    own_side = 1 - min(fed)
    group_types = [types[_column(own_side, w, i)] for w, i in plan.partition[own_side]]
    selected = []
    for origin, (frame, columns) in enumerate(branches):
        own = dict(columns)
        part = sorted(fed)[origin - 1] if origin else own_side
        grouping = [
            own[_column(part, what, i)].cast(t).alias(g, metadata={})
            for g, (what, i), t in zip(groups, plan.partition[part], group_types, strict=True)
        ]
        if origin:
            # a marker computes nothing (a number is 0 there, as in another branch)
            is_row = F.col(L.KIND) == L.RESULT
            own = {n: F.when(is_row, c).otherwise(_placeholder(types[n])) for n, c in own.items()}
        exprs = [own.get(n, _placeholder(types[n])) for n in names]
        if origin:
            fed_side = sorted(fed)[origin - 1]
            tags = [F.lit(fed_side + 1), F.col(L.KIND) == L.MARKER, *(F.col(t) for t in TAGS)]
        else:
            tags = [F.lit(0), F.lit(False), *(F.lit(0).cast("bigint") for _ in TAGS)]
        selected.append(
            frame.select(
                *(c.alias(n, metadata={}) for n, c in zip(names, exprs, strict=True)),
                *(c.alias(n, metadata={}) for n, c in zip(tag_columns, tags, strict=True)),
                *nan_columns(exprs, floats),
                *grouping,
            )
        )
    rows = selected[0]
    for branch in selected[1:]:
        rows = rows.union(branch)
    join_body = JoinBody(plan, (bodies[0], bodies[1]), tuple(rows.columns))
    out_schema, layout = L.join_layout(join, partners=any(plan.partners))
    end_wm = bounded_watermark(END_MS, et.delay_ms) if end is not None else None
    processor = LinkedJoinProcessor(
        layout,
        end_wm,
        (*configs, config),
        join_body,
        et.delay_ms,
        True,
        (floats, len(names) + len(tag_columns)),
    )
    grouped = rows.groupBy(*groups) if groups else rows.withColumn(_GROUP, F.lit(0)).groupBy(_GROUP)
    return join_run(
        join, plan, grouped, processor, out_schema, (root, source), end, idle_ms, heartbeats
    )


def _placeholder(t: ST.DataType) -> Column:
    """What a branch of the join's input puts in another branch's column (and a marker
    in its own): a number 0, as a marker's across a cut (one NULL would make a pandas
    integer column float), else NULL."""
    number = isinstance(t, ST.IntegralType | ST.FloatType | ST.DoubleType)
    return (F.lit(0) if number else F.lit(None)).cast(t)


def _side_rows(
    s: int, how: P.JoinInput, df: DataFrame, drainable: bool, partitioned: bool
) -> tuple[DataFrame, list[tuple[str, Column]]]:
    """Side ``s``'s view rows (and markers) as the join takes them, from the watermarked
    source ``df``: its pipeline's segments (:func:`~wql.spark.stream_links.run_segments`,
    the last one feeding), then the view's HAVING and SELECT in Spark; with the columns
    the join reads (by name). ``partitioned``: the join is, by a view key its pipeline
    carries from its first stage's partition keys (``stream_plan._cut_ref``), and the
    segments run partitioned by those (their markers carry the group's keys)."""
    ops, body = chain_body(how.chain, how.links, how.ops)
    first = how.chain[0]
    staged = _first_staged(first, ops[0], df)
    end_wm = end_watermark(first) if drainable else None
    carried = None
    if partitioned:
        partition, _ = chain_partition(how.chain, list(how.ops), how.links)
        carried = carried_keys(how.links, partition)
    key_cols = L.key_columns(len(ops[0].keys))
    groups = [key_cols[i] for i in carried[0]] if carried else []
    out = run_segments(
        how.chain, how.links, ops, body, staged, groups, carried, end_wm,
        keyed=bool(ops[0].keys), feeds_on=True,
    )  # fmt: skip
    view = how.chain[-1]
    assert isinstance(view, P.Query)  # planned: a join's view is a window aggregate
    bounds = (L.FIELD_COLUMNS[EMIT_WINDOW_START], L.FIELD_COLUMNS[EMIT_WINDOW_END])
    time = None if how.event_time is None else L.FIELD_COLUMNS[how.event_time]
    keep = tuple(dict.fromkeys((L.KIND, *TAGS, *bounds, *([time] if time else []))))
    rows = L.linked_view_rows(view, ops[-1], out, keep)
    columns = [
        (_column(s, "c", j), F.col(sql_identifier(name)))
        for j, name in enumerate(how.source_columns)
        if name is not None
    ]
    if how.event_time is None:
        columns += [(_window(s, "ws"), F.col(bounds[0])), (_window(s, "we"), F.col(bounds[1]))]
    else:
        assert time is not None
        columns.append((_window(s, "t"), F.col(time)))
    return rows, columns


def _first_staged(first: P.OperatorStage, op: OperatorPlan, df: DataFrame) -> DataFrame:
    """The rows a side's first stage takes, staged as
    :func:`~wql.spark.streaming.stream_input` stages them, from the join's watermarked
    source: its WHERE as a filter after the watermark (a column next to an always-true
    non-deterministic test, which Spark's optimizer does not move below it:
    docs/streaming.md, "The streaming watermark")."""
    if first.filter is not None:
        kept = F.when(F.rand(0) * 0 == 0, F.expr(first.filter.sql))
        df = df.withColumn(_KEPT, kept).where(F.col(_KEPT)).drop(_KEPT)
    inputs = [F.expr(k.expr.sql) for k in op.keys] + [F.expr(v.sql) for v in op.values]
    names = L.key_columns(len(op.keys)) + L.value_columns(len(op.values))
    et = first.source.event_time
    ts = (
        F.unix_millis(F.col(sql_identifier(et.column)).cast("timestamp"))
        if et is not None
        else F.lit(None).cast("bigint")
    )
    return df.select(
        *(c.alias(n, metadata={}) for c, n in zip(inputs, names, strict=True)),
        ts.alias(_TS, metadata={}),
        *([] if op.keys else [F.lit(0).alias(_ALL)]),
        *nan_columns(inputs, float_inputs(op)),
    )


_KEPT = "__wql_kept"


class LinkedJoinProcessor(AllKeysProcessor):
    """The join processor of a join with a side read through Spark SQL (see the module
    doc): the source's rows for the sides it runs, the tagged rows of the others."""

    def _call(self, tv: TimerValues, frame: pd.DataFrame | None) -> Iterator[pd.DataFrame]:
        wm, _, _ = call_clocks(tv, "EventTime", self.end_watermark)
        ops, max_ts = self._restore()
        before = ops[-1].counters.as_dict()
        body = self.body
        assert isinstance(body, JoinBody)
        names = list(body.columns)
        source: pd.DataFrame | None = None
        fed: dict[int, pa.RecordBatch] = {}
        # (rise, phase) -> side -> its rows of that step, in their emission order
        steps: dict[tuple[int, int], dict[int, np.ndarray]] = {}
        if frame is not None:
            origin = frame.iloc[:, names.index(_ORIGIN)].to_numpy(dtype=np.int64)
            if (origin == 0).any():
                source = frame[origin == 0].reset_index(drop=True)
            for s in sorted(set(origin.tolist()) - {0}):
                part = frame[origin == s].reset_index(drop=True)
                max_ts = self._steps(s - 1, part, names, steps, max_ts)
                fed[s - 1] = self.arrow(part, self.nans[1])
        after_end = 0
        if wm == MAX_TIME:
            after_end = 0 if source is None else len(source)
            # batch replay's final rise (the watermark after the last row), then the end
            final = [] if max_ts is None else [bounded_watermark(max_ts, self.delay_ms)]
            own = [*final, MAX_TIME]
        else:
            own = [wm]
        for r in own:
            steps.setdefault((r, 0), {})
        ordered: tuple[pa.RecordBatch, Any, Any] | None = None
        if source is not None and wm != MAX_TIME:
            batch, timestamps, valid, max_ts = self._in_time_order(source, max_ts)
            ordered = batch, timestamps, valid
        join = ops[-1]
        results: list[tuple] = []
        for r, p in sorted(steps):
            for s, idx in steps[(r, p)].items():
                self._to_join(s, join, fed[s].take(pa.array(idx)), names)
            if p == 0:
                results += body.rise(ops, r)[0]
            else:
                results += join.drain()
            if ordered is not None and (r, p) == (wm, 0):
                # the micro-batch's source rows, after its rise
                results += body.rows(ops, *ordered)[0]
                ordered = None
        yield from self._finish(ops, max_ts, wm, before, after_end, results, [])

    def _steps(
        self,
        side: int,
        part: pd.DataFrame,
        names: list[str],
        steps: dict[tuple[int, int], dict[int, np.ndarray]],
        max_ts: int | None,
    ) -> int | None:
        """Side ``side``'s tagged rows ``part`` into ``steps`` (markers make a step with no
        rows); returns the largest source event time known."""
        marked = part.iloc[:, names.index(_MARKED)].to_numpy(dtype=bool)
        rise = part.iloc[:, names.index(RISE)].to_numpy(dtype=np.int64)
        phase = part.iloc[:, names.index(PHASE)].to_numpy(dtype=np.int64)
        seq = part.iloc[:, names.index(SEQ)].to_numpy(dtype=np.int64)
        tops = part.iloc[:, names.index(MAX_TS)][marked].dropna()
        if len(tops):
            top = int(tops.max())
            max_ts = top if max_ts is None else max(max_ts, top)
        order = np.lexsort((seq, phase, rise))
        for r, p in {(int(r), int(p)) for r, p in zip(rise, phase, strict=True)}:
            at = order[(rise[order] == r) & (phase[order] == p) & ~marked[order]]
            steps.setdefault((r, p), {})[side] = at
        return max_ts

    def _to_join(self, side: int, join: Any, batch: pa.RecordBatch, names: list[str]) -> None:
        """Side rows (the view's, after Spark SQL) as the join's input rows of ``side``."""
        n = batch.num_rows
        if not n:
            return
        how = self.body.plan.sides[side]  # type: ignore[attr-defined]
        columns = [
            [None] * n
            if name is None
            else batch.column(names.index(_column(side, "c", j))).to_pylist()
            for j, name in enumerate(how.source_columns)
        ]
        values = list(zip(*columns, strict=True)) if columns else [()] * n
        if how.event_time is not None:
            # a window table over the view: each row in the windows of its window bound
            times = batch.column(names.index(_window(side, "t"))).to_pylist()
            join.process_rows(side, [None] * n, times, values)
            return
        starts = batch.column(names.index(_window(side, "ws"))).to_pylist()
        ends = batch.column(names.index(_window(side, "we"))).to_pylist()
        join.process_rows(side, list(zip(starts, ends, strict=True)), [None] * n, values)
