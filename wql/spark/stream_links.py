"""A stream pipeline cut where a link needs Spark SQL: a Spark stateful operator per segment.

A pipeline's link is Spark SQL when the reader cannot take the view's rows as
they are (``Link.sql``, planned in :mod:`wql.compiler.stream_plan`): the view
has ``HAVING`` or the reader reads a column the view computes, or the reader
has ``WHERE`` or computes a key or input from view columns. The chain is cut
there into *segments*, runs of stages whose links the processor copies; each
segment is one ``transformWithStateInPandas`` operator
(:class:`SegmentProcessor`, the :class:`~wql.spark.stream_chain.ChainBody` of
its stages), and between two of them Spark evaluates the link as batch does
(:func:`~wql.spark.layout.linked_view_rows`: the view's relation, HAVING and
SELECT; then the reader's WHERE, keys, inputs and event time)::

    source -> stage 1's keys and values -> [segment 1] -> view rows (HAVING, SELECT)
           -> reader's WHERE, keys, inputs -> [segment 2] -> ... -> the query's tagged stream

Why this is the one-processor pipeline, rows and counters (docs/streaming.md,
"Links in Spark SQL"):

* **The same micro-batch.** Spark runs every stateful operator of a query in
  each micro-batch, and ``TransformWithStateExec.produceOutputWatermark``
  (EventTime mode) hands the next operator the same watermark
  (``eventTimeWatermarkForEviction``); a segment's output carries no
  watermark attribute, so Spark's late-event filter drops nothing.
* **Flink's chain order, from tags.** A segment that feeds another tags
  every row it emits with the watermark of the rise that fired it and its
  phase (0: fired at that rise; 1: emitted while its first stage took the
  micro-batch's rows) and its place in the call's emission order, and emits a
  :data:`~wql.spark.layout.MARKER` row per rise it makes. The next segment
  replays them in that order: the rows of a rise go to its first stage at its
  old watermark, and only then does it rise (what the one processor does
  inside a call, ``AbstractStreamOperator.processWatermark``); then the rows
  of phase 1 at the new watermark. Spark calls it with the micro-batch's rows
  before its own timers (``PROCESS_DATA`` before ``PROCESS_TIMER``), so no
  rise of its own comes before them.
* **The same groups.** Every segment is grouped as the whole chain would be:
  by the copies of the first stage's partition keys at its first stage
  (:func:`~wql.compiler.stream_plan.carried_keys`), or by a constant; the
  marker rows carry the group's key values, so one group of a segment feeds
  exactly one group of the next, which sees every rise of the one before
  (the markers) and its own timers' rises.
* **The end of input.** The markers carry the source's largest event time
  and the rows after the end: a segment called at the end without them makes
  the final rise the first segment made (``max event time - delay - 1``).

The last segment's counters are the query's, as the one processor's: the rows
the query's ``WHERE`` rejects reach it flagged and are counted
(``rows_filtered``), as a single query counts them; a view's ``HAVING`` and a
middle query's ``WHERE`` filter in Spark (those rows are never the query's).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql.streaming.stateful_processor import ExpiredTimerInfo, TimerValues

from wql.compiler import plan as P
from wql.compiler import types as T
from wql.compiler.backends.escaping import sql_identifier
from wql.compiler.backends.operator import OperatorPlan
from wql.compiler.stream_plan import carried_keys
from wql.runtime.watermarks import bounded_watermark
from wql.runtime.windows import MAX_TIME, MIN_TIME
from wql.spark import layout as L
from wql.spark.deferred import deferred
from wql.spark.stream_chain import _GROUP, AllKeysProcessor, ChainBody, StreamChainRun, chain_body
from wql.spark.streaming import (
    StreamQueryRun,
    _moved,
    call_clocks,
    end_watermark,
    float_inputs,
    grouped_by,
    input_frame,
    nan_columns,
    output_frame,
    stream_input,
)

__all__ = ["TAGS", "SegmentProcessor", "run_linked_chain"]

#: The tags of a feeding segment's rows: the rise that fired a row (its watermark),
#: the phase (0: fired at the rise, 1: emitted while taking the micro-batch's rows),
#: the row's place in the call's emission order (-1: a marker), and on markers the
#: source's largest event time and the rows that came after the end of input.
RISE, PHASE, SEQ, MAX_TS, AFTER_END = (
    "__wql_rise",
    "__wql_phase",
    "__wql_seq",
    "__wql_max_ts",
    "__wql_after_end",
)
TAGS = (RISE, PHASE, SEQ, MAX_TS, AFTER_END)
_TS = "__wql_ts"
_MARKED = "__wql_marker"  # a marker row (no values)
_KEEP = "__wql_keep"  # a row the segment's first stage takes (WHERE kept it)


def run_linked_chain(
    query: P.OperatorStage, chain: P.StreamChain, source: DataFrame, *, end: DataFrame | None
) -> StreamQueryRun:
    """The streaming run of ``query`` over its ``chain``, cut at every link in Spark SQL
    (see the module doc); ``end`` as for :func:`~wql.spark.streaming.run_streaming`."""
    stages = (*chain.upstream, query)
    ops, body = chain_body(stages, chain.links, chain.ops)
    carried = carried_keys(chain.links, chain.partition) if chain.partition else None
    first = stages[0]
    staged, key_cols, _, drainable, idle_ms, heartbeats = stream_input(
        first, ops[0], source, end, event_time_mode=True
    )
    end_wm = end_watermark(first) if drainable else None
    groups = [key_cols[i] for i in carried[0]] if carried else []
    df = run_segments(
        stages, chain.links, ops, body, staged, groups, carried, end_wm, keyed=bool(key_cols)
    )
    return StreamChainRun.of(
        query,
        ops[-1],
        df,
        chain=chain,
        time_mode="EventTime",
        source=source,
        drainable=drainable,
        idle_ms=idle_ms,
        heartbeats=heartbeats,
    )


def run_segments(
    stages: tuple[P.OperatorStage, ...],
    links: tuple[P.Link, ...],
    ops: list[OperatorPlan],
    body: ChainBody,
    staged: DataFrame,
    groups: list[str],
    carried: list[tuple[int, ...]] | None,
    end_wm: int | None,
    *,
    keyed: bool,
    feeds_on: bool = False,
) -> DataFrame:
    """The Spark stateful operators of a chain of ``stages`` (``links`` between them, their
    operator plans ``ops`` and ``body``) cut at its links in Spark SQL, over the first
    stage's ``staged`` rows grouped by ``groups`` (``carried``: each stage's keys that
    copy them): the last segment's output. ``feeds_on``: that output feeds a window join
    (:mod:`wql.spark.stream_join_links`): tagged rows and markers, as a segment feeding
    another emits them; else the query's tagged stream."""
    cuts = [i + 1 for i, link in enumerate(links) if link.sql]
    bounds = list(zip([0, *cuts], [*cuts, len(stages)], strict=True))
    et = stages[0].source.event_time
    df = staged
    for n, (a, b) in enumerate(bounds):
        last = b == len(stages)
        counts_where = False
        if n:
            reads_last = a == len(stages) - 1 and not feeds_on
            df, groups = _across(
                stages[a - 1],
                ops[a - 1],
                stages[a],
                ops[a],
                df,
                carried[a] if carried else (),
                flag_where=reads_last,
            )
            counts_where = reads_last and stages[a].filter is not None
        specs = ChainBody(body.stages[a:b], feeds=not last)
        out_schema, output = L.tagged_layout(stages[b - 1], ops[b - 1])
        feeds = None
        if not last or feeds_on:
            n_keys = len(ops[b - 1].keys)
            columns = L.key_columns(n_keys)
            marks = tuple(columns[p] for p in carried[b - 1]) if carried else ()
            feeds = Feed(marks, _feed_schema(output.schema))
            out_schema = _with_tags(out_schema)
        processor = SegmentProcessor(
            output,
            end_wm,
            tuple(op.config for op in ops[a:b]),
            specs,
            et.delay_ms if et else 0,
            et is not None,
            first=n == 0,
            feeds=feeds,
            counts_where=counts_where,
            nans=_nans(ops[a], first=n == 0, keyed=keyed),
        )
        if groups:
            df, by = grouped_by(df, groups)
            grouped = df.groupBy(*by)
        else:
            grouped = df.withColumn(_GROUP, F.lit(0)).groupBy(_GROUP)
        df = grouped.transformWithStateInPandas(
            statefulProcessor=deferred(processor),
            outputStructType=out_schema,
            outputMode="Append",
            timeMode="EventTime",
        )
    return df


def _nans(op: OperatorPlan, *, first: bool, keyed: bool) -> tuple[tuple[int, ...], int]:
    """A segment's staged float inputs and the position of its first NaN column
    (:func:`~wql.spark.streaming.nan_columns`): after a first segment's event time (and
    a keyless one's constant), after the flags and tags of a later one (:func:`_across`)."""
    at = len(op.keys) + len(op.values) + 1
    return float_inputs(op), (at + (not keyed) if first else at + 2 + len(TAGS))


def _with_tags(schema: Any) -> Any:
    from pyspark.sql import types as ST

    return ST.StructType([*schema.fields, *(ST.StructField(t, ST.LongType()) for t in TAGS)])


def _feed_schema(schema: pa.Schema) -> pa.Schema:
    return pa.schema([*schema, *(pa.field(t, pa.int64()) for t in TAGS)])


def _across(
    up: P.OperatorStage,
    up_op: OperatorPlan,
    down: P.OperatorStage,
    op: OperatorPlan,
    fed: DataFrame,
    partition: tuple[int, ...],
    *,
    flag_where: bool,
) -> tuple[DataFrame, list[str]]:
    """The feeding segment's output ``fed`` (rows of the view ``up``, markers) as the rows
    the reader ``down`` takes, in Spark SQL: ``(staged, grouping columns)``. Staged as
    a first stage's rows (keys, inputs, event time in ms), then the marker and keep
    flags and the tags. ``partition``: the reader's keys that copy the chain's
    partition keys (plain copies of view keys, which the markers carry too);
    ``flag_where``: the reader is the query, whose counters count the rows its WHERE
    rejects (else Spark drops them: a middle query's own stream counts them)."""
    if isinstance(up, P.WindowRank):
        rows = L.linked_rank_rows(up, up_op, fed, (L.KIND, *TAGS))
    else:
        # the binder refuses a view of an OVER aggregation (binder/views.py)
        assert isinstance(up, P.Query), type(up).__name__
        rows = L.linked_view_rows(up, up_op, fed, (L.KIND, *TAGS))
    is_row = F.col(L.KIND) == L.RESULT
    keep = is_row
    if down.filter is not None:
        where = F.coalesce(F.expr(down.filter.sql), F.lit(False))
        if flag_where:
            keep = is_row & where
        else:
            rows = rows.where(~is_row | where)

    def computed(sql: str, t: Any, plain: bool = False) -> Column:
        if plain:
            return F.expr(sql)
        # a marker or a rejected row computes nothing; a number is 0 there, not NULL
        # (one NULL makes a pandas integer column float: see stream_input)
        value = F.when(keep, F.expr(sql))
        number = t.is_integral or t.kind in ("FLOAT", "DOUBLE")
        return value.otherwise(F.lit(0).cast(T.to_spark(t))) if number else value

    key_cols = L.key_columns(len(op.keys))
    value_cols = L.value_columns(len(op.values))
    et = down.source.event_time
    # planned: a link in Spark SQL has a window bound as event time, or none (a count
    # window; a window rank, which places a row by the window its view row names)
    ts = (
        F.when(keep, F.unix_millis(F.col(sql_identifier(et.column)).cast("timestamp")))
        if et is not None
        else F.lit(None).cast("bigint")
    )
    inputs = [computed(k.expr.sql, k.type, i in partition) for i, k in enumerate(op.keys)]
    inputs += [computed(v.sql, v.type) for v in op.values]
    staged = rows.select(
        *[c.alias(n, metadata={}) for c, n in zip(inputs, key_cols + value_cols, strict=True)],
        ts.alias(_TS, metadata={}),
        (~is_row).alias(_MARKED),
        keep.alias(_KEEP),
        *TAGS,
        *nan_columns(inputs, float_inputs(op)),
    )
    return staged, [key_cols[i] for i in partition]


@dataclass(frozen=True)
class Feed:
    """How a segment that feeds another emits (pickled to the workers)."""

    #: the tagged key columns that carry the group's key values, in its order
    marks: tuple[str, ...]
    #: the output's Arrow schema: the segment's last stage's tagged layout, then TAGS
    schema: pa.Schema


class SegmentProcessor(AllKeysProcessor):
    """One segment of a pipeline cut at links in Spark SQL (see the module doc): the
    first takes the source's staged rows as :class:`AllKeysProcessor` does; a later one
    replays the tagged rows of the one before. ``feeds``: the segment feeds another
    (its rows leave tagged, with markers; its last stage's late rows and counters are
    its own query's); else its output is the query's. ``counts_where``: its rows carry
    the query's WHERE (rejected rows are counted, ``rows_filtered``)."""

    def __init__(
        self,
        output: L.TaggedLayout,
        end_watermark: int | None,
        configs: tuple[Any, ...],
        body: ChainBody,
        delay_ms: int,
        has_event_time: bool,
        *,
        first: bool,
        feeds: Feed | None,
        counts_where: bool,
        nans: tuple[tuple[int, ...], int],
    ) -> None:
        super().__init__(output, end_watermark, configs, body, delay_ms, has_event_time, nans)
        self.segment = body
        self.first = first
        self.feeds = feeds
        self.counts_where = counts_where

    def handleInputRows(
        self, key: Any, rows: Iterator[pd.DataFrame], timerValues: TimerValues
    ) -> Iterator[pd.DataFrame]:
        frame = input_frame(rows)
        yield from self._segment(key, timerValues, frame)

    def handleExpiredTimer(
        self, key: Any, timerValues: TimerValues, expiredTimerInfo: ExpiredTimerInfo
    ) -> Iterator[pd.DataFrame]:
        yield from self._segment(key, timerValues, None)

    def _segment(
        self, key: Any, tv: TimerValues, frame: pd.DataFrame | None
    ) -> Iterator[pd.DataFrame]:
        wm, _, _ = call_clocks(tv, "EventTime", self.end_watermark)
        ops, max_ts = self._restore()
        before = ops[-1].counters.as_dict()
        call = _Call()

        def rise(watermark: int) -> None:
            rows, late = self.body.rise(ops, watermark)
            call.step(watermark, 0, rows, late)

        if self.first:
            if wm == MAX_TIME:
                call.after_end = 0 if frame is None else len(frame)
                # batch replay's final rise (the watermark after the last row), then the end
                if max_ts is not None:
                    rise(bounded_watermark(max_ts, self.delay_ms))
                rise(MAX_TIME)
            else:
                rise(wm)
                if frame is not None:
                    batch, timestamps, valid, max_ts = self._in_time_order(frame, max_ts)
                    rows, late = self.body.rows(ops, batch, timestamps, valid)
                    call.step(wm, 1, rows, late)
        else:
            if frame is not None:
                max_ts = self._replay(ops, frame, max_ts, call)
            risen = [r for r, _, _ in call.steps]
            if wm == MAX_TIME and MAX_TIME not in risen:
                # the end without the feeding segment's final rises: the first segment's
                final = None if max_ts is None else bounded_watermark(max_ts, self.delay_ms)
                if final is not None and final > ops[0].watermark:
                    rise(final)
                rise(MAX_TIME)
            elif wm != MAX_TIME and wm > ops[0].watermark:
                rise(wm)  # a rise of this segment's own timers
        yield from self._close(key, ops, max_ts, wm, before, call)

    def _replay(
        self, ops: list[Any], frame: pd.DataFrame, max_ts: int | None, call: _Call
    ) -> int | None:
        """The feeding segment's rows of this micro-batch, in its order (see the module
        doc); returns the largest source event time known."""
        at = self.body.ts_index
        marked = frame.iloc[:, at + 1].to_numpy(dtype=bool)
        keep = frame.iloc[:, at + 2].to_numpy(dtype=bool)
        rise = frame.iloc[:, at + 3].to_numpy(dtype=np.int64)
        phase = frame.iloc[:, at + 4].to_numpy(dtype=np.int64)
        seq = frame.iloc[:, at + 5].to_numpy(dtype=np.int64)
        tops = frame.iloc[:, at + 6][marked].dropna()
        if len(tops):
            top = int(tops.max())
            max_ts = top if max_ts is None else max(max_ts, top)
        call.after_end += int(frame.iloc[:, at + 7][marked].fillna(0).sum())
        taken = ~marked & keep
        if self.counts_where:
            call.filtered += int((~marked & ~keep).sum())
        batch = self.arrow(frame, at + 1)
        order = np.lexsort((seq, phase, rise))
        steps = sorted({(int(r), int(p)) for r, p in zip(rise, phase, strict=True)})
        for r, p in steps:
            idx = order[(rise[order] == r) & (phase[order] == p) & taken[order]]
            if not len(idx):
                if p == 0:
                    rows, late = self.body.rise(ops, r)
                    call.step(r, 0, rows, late)
                continue
            part = batch.take(pa.array(idx))
            ts_arr = part.column(at)
            valid = ts_arr.is_valid().to_numpy(zero_copy_only=False)
            timestamps = ts_arr.fill_null(0).to_numpy(zero_copy_only=False).astype(np.int64)
            rows, late = self.segment.take(
                ops, part, timestamps, None if valid.all() else valid, r if p == 0 else None
            )
            call.step(r, p, rows, late)
        return max_ts

    def _close(
        self, key: Any, ops: list[Any], max_ts: int | None, wm: int, before: dict, call: _Call
    ) -> Iterator[pd.DataFrame]:
        ended = wm == MAX_TIME
        due = [t for op in ops for k in op.active_keys() for t in op.timers(k)[0]]
        keep = not ended and any(op.active_keys() for op in ops)
        spark_timers = self.state.sync_timers([min(due)] if due else [], wm, keep)
        results = [row for _, _, rows in call.steps for row in rows]
        counters = None
        if self.feeds is None:
            rejected = {"filtered": call.filtered} if call.filtered else None
            counters = _moved(
                before,
                ops[-1].counters.as_dict(),
                call.after_end,
                self.state.pending_rows,
                rejected,
            )
        counters = self.state.save(
            counters,
            keep=keep,
            output=bool(results or call.late),
            snapshot=lambda: self._snapshot(ops, max_ts),
            watermark=ops[0].watermark,
            processing_time=MIN_TIME,
            spark_timers=spark_timers,
        )
        if self.feeds is None:
            if results or call.late or counters:
                yield output_frame(self.output.rows(results, call.late, counters))
            return
        if call.steps:
            yield output_frame(self._fed(key, max_ts, call))

    def _fed(self, key: Any, max_ts: int | None, call: _Call) -> pa.RecordBatch:
        """The call's rows for the next segment: per step a marker, then its rows, tagged."""
        feeds = self.feeds
        assert feeds is not None
        results = [row for _, _, rows in call.steps for row in rows]
        n_marks = len(call.steps)
        tags: dict[str, list] = {t: [] for t in TAGS}
        for i, (r, p, _) in enumerate(call.steps):
            tags[RISE].append(r)
            tags[PHASE].append(p)
            tags[SEQ].append(-1)
            tags[MAX_TS].append(max_ts)
            tags[AFTER_END].append(call.after_end if i == 0 else 0)
        for r, p, rows in call.steps:
            tags[RISE] += [r] * len(rows)
            tags[PHASE] += [p] * len(rows)
            tags[SEQ] += list(range(len(rows)))
            tags[MAX_TS] += [None] * len(rows)
            tags[AFTER_END] += [None] * len(rows)
        base = self.output.rows(results)
        values = [v.item() if isinstance(v, np.generic) else v for v in tuple(key)]
        group = dict(zip(feeds.marks, values, strict=False))
        arrays = []
        for f in feeds.schema:
            if f.name in tags:
                arrays.append(pa.array(tags[f.name], pa.int64()))
                continue
            if f.name == L.KIND:
                head = pa.array([L.MARKER] * n_marks, pa.string())
            elif f.name in group:
                value = group[f.name]
                if isinstance(value, str) and pa.types.is_floating(f.type):
                    value = float(value)  # a float group is its text (grouped_by)
                head = pa.array([value] * n_marks, f.type)
            else:
                head = pa.nulls(n_marks, f.type)
            arrays.append(pa.concat_arrays([head, base.column(f.name)]))
        return pa.RecordBatch.from_arrays(arrays, schema=feeds.schema)


class _Call:
    """What one call of a segment did: its steps (rise, phase, the last stage's rows),
    the last stage's late rows, the rows after the end, the rows WHERE rejected."""

    def __init__(self) -> None:
        self.steps: list[tuple[int, int, list[tuple]]] = []
        self.late: list[tuple] = []
        self.after_end = 0
        self.filtered = 0

    def step(self, rise: int, phase: int, rows: list[tuple], late: list[tuple]) -> None:
        self.steps.append((rise, phase, rows))
        self.late += late
