"""The Spark hosts' shared output layout: one tagged stream of result, late and counters rows.

Both operator hosts emit ONE stream, whichever Spark operator runs the
``WindowOperator`` (``mapInArrow`` in :mod:`wql.spark.batch`,
``transformWithStateInPandas`` in :mod:`wql.spark.streaming`): a Spark
stateful operator has a single output, and the batch host caches that
one output and splits it so the operator runs once. Every row is tagged
by :data:`KIND`:

* ``R`` (:data:`RESULT`): one emitted firing: the grouping key
  (``__wql_k<i>``), the window (``__wql_ws``, ``__wql_we``, ``__wql_wt``:
  epoch ms, NULL for count and global windows), ``__wql_pane``,
  ``__wql_timing`` and the aggregate results (``__wql_a<i>``) in the
  plan's types; with the runtime's extended rows
  (``OperatorConfig.extended_rows``: a query that reads ``is_last``, or EMIT
  CHANGELOG) also ``__wql_last`` and ``__wql_op`` (a changelog's
  retractions are ``R`` rows too);
* ``L`` (:data:`LATE_ROW`): a late row no window accepted: the late-output
  columns (``__wql_l<j>``) and its event time (``__wql_late_ts``);
* ``C`` (:data:`COUNTS`): runtime counters as JSON under :data:`COUNTERS`
  (``rows_in``, ``rows_emitted``, ``late_rows``, ``dropped`` by reason),
  summed with :func:`sum_counters` (the batch host writes one per partition,
  the streaming host one with a key's output, or when its state ends,
  docs/streaming.md "Counters and drops").

A pipeline stage (``OperatorConfig.tag_firings``) adds to its ``R`` rows
their place in the pipeline's global sequence: :data:`STEP` and what the
rank within the step is computed from (:data:`PLACE_COLUMNS`); its readers
take the rows by :data:`STEP` and :data:`RANK` (:func:`placed_results`,
docs/architecture.md "Contract: pipelines").

Every other column of a row is NULL. The post-aggregation projection
(:func:`results`: HAVING + SELECT over the relation of keys, window columns
and aggregates) and the late output (:func:`late_rows`) read this layout
and give the plan's output and late-output schemas, for either host and for
``wql run --stream``'s fan-out of a tagged file sink.

Runtime rows are read by name: :data:`wql.runtime.config.EMITTED_FIELDS`
and the positions named next to it.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from decimal import ROUND_HALF_UP, Decimal
from operator import itemgetter
from typing import Any

import numpy as np
import pyarrow as pa
from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql import types as ST

from wql.compiler import plan as P
from wql.compiler import types as T
from wql.compiler.backends.escaping import sql_identifier
from wql.compiler.backends.operator import OperatorPlan, post_aggregation_relation
from wql.compiler.types import WqlType
from wql.errors import ErrorCode, WqlUnsupportedError
from wql.runtime.config import (
    EMIT_KEY,
    EMIT_PANE_INDEX,
    EMIT_PANE_TIMING,
    EMIT_RESULTS,
    EMIT_WINDOW_END,
    EMIT_WINDOW_START,
    EMIT_WINDOW_TIME,
    LATE_TIMESTAMP,
    LATE_VALUES,
)
from wql.runtime.join import LEFT_PARTNERS, RIGHT_PARTNERS
from wql.runtime.pipeline import TIMER_ORDER_FIELDS

__all__ = [
    "COUNTERS",
    "COUNTS",
    "CSV_TIMESTAMP_FORM",
    "FIELD_COLUMNS",
    "JoinLayout",
    "KIND",
    "LATE_ROW",
    "MARKER",
    "PLACE_COLUMNS",
    "RANK",
    "RESULT",
    "STEP",
    "TaggedLayout",
    "arrow_type",
    "counters_of",
    "csv_timestamp",
    "join_layout",
    "join_results",
    "keeps_every_row",
    "key_columns",
    "late_rows",
    "linked_view_rows",
    "placed_results",
    "result_column",
    "results",
    "runtime_column",
    "sum_counters",
    "tagged_layout",
    "value_columns",
    "writable",
]

KIND = "__wql_kind"
COUNTERS = "__wql_counters"
RESULT, LATE_ROW, COUNTS = "R", "L", "C"
#: A rise of the stream processor that feeds another one across a link in Spark SQL
#: (:mod:`wql.spark.stream_links`): a row with its tags and no values.
MARKER = "M"

WINDOW_START = "__wql_ws"
WINDOW_END = "__wql_we"
WINDOW_TIME = "__wql_wt"
PANE_INDEX = "__wql_pane"
PANE_TIMING = "__wql_timing"
LATE_EVENT_TIME = "__wql_late_ts"
#: The runtime's extended fields (wql.runtime.config.EXTENDED_FIELDS): is_last, op.
IS_LAST = "__wql_last"
OP = "__wql_op"
#: A pipeline stage's rows in the global sequence (docs/architecture.md, "Contract:
#: pipelines"): the step, and the rank within the step (the order its reader takes them in).
STEP = "__wql_step"
RANK = "__wql_rank"
#: What the rank is computed from: rows fired by rows first (by their input's rank,
#: then emission number), then rows fired by timers (by time, key, window end and
#: start); the emission number breaks the remaining ties.
PLACE_CLASS, PLACE_ORDER1, PLACE_ORDER2, PLACE_EMITTED = (
    "__wql_cls",
    "__wql_o1",
    "__wql_o2",
    "__wql_emit",
)
PLACE_COLUMNS = (STEP, PLACE_CLASS, PLACE_ORDER1, PLACE_ORDER2, PLACE_EMITTED)
#: The tagged column of each emitted field that is neither a key nor a result.
FIELD_COLUMNS = {
    EMIT_WINDOW_START: WINDOW_START,
    EMIT_WINDOW_END: WINDOW_END,
    EMIT_WINDOW_TIME: WINDOW_TIME,
    EMIT_PANE_INDEX: PANE_INDEX,
    EMIT_PANE_TIMING: PANE_TIMING,
}


def key_columns(n: int) -> list[str]:
    """The names of the first ``n`` grouping-key columns (staged input and ``R`` rows)."""
    return [_key_column(i) for i in range(n)]


def value_columns(n: int) -> list[str]:
    """The names of the operator's ``n`` staged input values (``OperatorPlan.values``)."""
    return [f"__wql_v{i}" for i in range(n)]


def result_column(i: int) -> str:
    """The name of the ``i``-th result (aggregate) column of ``R`` rows."""
    return _aggregate_column(i)


def _key_column(i: int) -> str:
    return f"__wql_k{i}"


def _aggregate_column(i: int) -> str:
    return f"__wql_a{i}"


def _late_column(j: int) -> str:
    return f"__wql_l{j}"


# --------------------------------------------------------------------------- the rows


@dataclass(frozen=True)
class TaggedLayout:
    """Builds the tagged stream's Arrow batches from runtime output (pickled to the workers)."""

    key_types: tuple[WqlType, ...]
    agg_types: tuple[WqlType, ...]
    late_types: tuple[WqlType, ...]
    schema: pa.Schema
    #: result rows end with is_last and op (``OperatorConfig.extended_rows``)
    extended: bool = False

    def rows(
        self,
        results: Sequence[tuple] = (),
        late: Sequence[tuple] = (),
        counters: dict[str, Any] | None = None,
        *,
        placed: dict[str, pa.Array] | None = None,
    ) -> pa.RecordBatch:
        """One batch: ``drain()`` rows (``R``), ``drain_late()`` rows (``L``), a counters row.

        ``placed``: the :data:`PLACE_COLUMNS` of the result rows (a pipeline stage).
        """
        nr, nl, nc = len(results), len(late), 0 if counters is None else 1
        n = nr + nl + nc
        cols: dict[str, pa.Array] = {
            KIND: pa.array([RESULT] * nr + [LATE_ROW] * nl + [COUNTS] * nc, pa.string())
        }
        if nr:
            pad = [None] * (nl + nc)

            def field(index: int) -> list:  # result rows come first; the others are NULL
                values = list(map(itemgetter(index), results))
                return values + pad if pad else values

            if self.key_types:
                keys = list(map(itemgetter(EMIT_KEY), results))
                if len(self.key_types) == 1 and None not in keys:
                    cols[_key_column(0)] = _arrow([k[0] for k in keys] + pad, self.key_types[0])
                else:
                    for i, t in enumerate(self.key_types):
                        column = [None if k is None else k[i] for k in keys]
                        cols[_key_column(i)] = _arrow(column + pad, t)
            for name, index in (
                (WINDOW_START, EMIT_WINDOW_START),
                (WINDOW_END, EMIT_WINDOW_END),
                (WINDOW_TIME, EMIT_WINDOW_TIME),
                (PANE_INDEX, EMIT_PANE_INDEX),
            ):
                cols[name] = pa.array(field(index), pa.int64())
            cols[PANE_TIMING] = pa.array(field(EMIT_PANE_TIMING), pa.string())
            for i, t in enumerate(self.agg_types):
                cols[_aggregate_column(i)] = _arrow(field(EMIT_RESULTS + i), t)
            if self.extended:
                # the last two fields of an extended row (EXTENDED_FIELDS)
                cols[IS_LAST] = pa.array(field(-2), pa.bool_())
                cols[OP] = pa.array(field(-1), pa.string())
            if placed is not None:
                pad_place = pa.nulls(nl + nc, pa.int64())
                for name, arr in placed.items():
                    cols[name] = pa.concat_arrays([arr, pad_place]) if nl + nc else arr
        if nl:
            head, tail = [None] * nr, [None] * nc
            for j, t in enumerate(self.late_types):
                cols[_late_column(j)] = _arrow(head + [r[LATE_VALUES][j] for r in late] + tail, t)
            ts = head + [r[LATE_TIMESTAMP] for r in late] + tail
            cols[LATE_EVENT_TIME] = pa.array(ts, pa.int64())
        if nc:
            cols[COUNTERS] = pa.array([None] * (nr + nl) + [json.dumps(counters)], pa.string())
        arrays = [cols[f.name] if f.name in cols else pa.nulls(n, f.type) for f in self.schema]
        return pa.RecordBatch.from_arrays(arrays, schema=self.schema)


def tagged_layout(query: P.OperatorStage, op: OperatorPlan) -> tuple[ST.StructType, TaggedLayout]:
    """The tagged stream's schema in Spark, and the layout that builds its Arrow batches."""
    columns: list[tuple[str, WqlType]] = [(KIND, T.STRING)]
    columns += [(_key_column(i), k.type) for i, k in enumerate(op.keys)]
    columns += [(n, T.BIGINT) for n in (WINDOW_START, WINDOW_END, WINDOW_TIME, PANE_INDEX)]
    columns.append((PANE_TIMING, T.STRING))
    agg_types = op.results
    columns += [(_aggregate_column(i), t) for i, t in enumerate(agg_types)]
    extended = op.config.extended_rows
    if extended:
        columns += [(IS_LAST, T.BOOLEAN), (OP, T.STRING)]
    late_types = tuple(op.values[i].type for _, i in op.late_columns)
    columns += [(_late_column(j), t) for j, t in enumerate(late_types)]
    columns += [(LATE_EVENT_TIME, T.BIGINT), (COUNTERS, T.STRING)]
    if op.config.tag_firings:
        columns += [(c, T.BIGINT) for c in PLACE_COLUMNS]
    spark_schema = ST.StructType([ST.StructField(n, _spark_type(t)) for n, t in columns])
    arrow = pa.schema([pa.field(n, arrow_type(t)) for n, t in columns])
    layout = TaggedLayout(tuple(k.type for k in op.keys), agg_types, late_types, arrow, extended)
    return spark_schema, layout


@dataclass(frozen=True)
class JoinLayout:
    """The tagged stream of a window join on a stream (pickled to the workers): ``R`` rows
    hold the joined relation under its internal names (``WindowJoin.joined_schema``), ``C``
    rows the counters; a join has no late rows."""

    types: tuple[WqlType, ...]
    schema: pa.Schema
    #: the left side's width when the runtime gives each row's kind and partners
    #: (``JoinConfig.partners``: :data:`CANDIDATE`, :data:`PARTNERS`); 0: it does not
    partners_at: int = 0

    def rows(
        self,
        results: Sequence[tuple] = (),
        late: Sequence[tuple] = (),
        counters: dict[str, Any] | None = None,
    ) -> pa.RecordBatch:
        """One batch: the joined rows (``R``) and a counters row."""
        nr, nc = len(results), 0 if counters is None else 1
        arrays = [pa.array([RESULT] * nr + [COUNTS] * nc, pa.string())]
        pad = [None] * nc
        for i, t in enumerate(self.types):
            arrays.append(_arrow([r[i] for r in results] + pad, t))
        arrays.append(pa.array([None] * nr + [json.dumps(counters)] * nc, pa.string()))
        if self.partners_at:
            n = len(self.types)
            arrays.append(pa.array([r[n] for r in results] + pad, pa.int8()))
            left, right = self.types[: self.partners_at], self.types[self.partners_at :]
            for kind, types in ((LEFT_PARTNERS, right), (RIGHT_PARTNERS, left)):
                lists = [r[n + 1] if r[n] == kind else None for r in results] + pad
                arrays.append(self._partners(lists, types, len(arrays)))
        return pa.RecordBatch.from_arrays(arrays, schema=self.schema)

    def _partners(self, lists: list, types: tuple[WqlType, ...], at: int) -> pa.Array:
        """The partner rows of each joined row (None: none) as a list of structs."""
        flat = [row for rows in lists if rows is not None for row in rows]
        struct_type = self.schema.field(at).type.value_type
        children = [_arrow([row[i] for row in flat], t) for i, t in enumerate(types)]
        structs = pa.StructArray.from_arrays(children, fields=list(struct_type))
        offsets = np.cumsum([0] + [len(rows) if rows is not None else 0 for rows in lists])
        mask = pa.array([rows is None for rows in lists])
        return pa.ListArray.from_arrays(pa.array(offsets, pa.int32()), structs, mask=mask)


#: A joined row's kind when the runtime gives partners (``wql.runtime.join``: FINAL,
#: LEFT_PARTNERS, RIGHT_PARTNERS), and each row's partners of the other side.
CANDIDATE = "__wql_candidate"
PARTNERS = ("__wql_right_partners", "__wql_left_partners")
#: The lambda variable of a partner in ``StreamJoin.partners``' conditions.
PARTNER = "__wql_p"


def join_layout(join: P.WindowJoin, *, partners: bool = False) -> tuple[ST.StructType, JoinLayout]:
    """A stream window join's tagged schema in Spark, and the layout that builds it;
    ``partners``: the runtime gives each row's kind and partners (after the counters)."""
    columns = [(KIND, T.STRING), *((c.name, c.type) for c in join.joined_schema)]
    columns.append((COUNTERS, T.STRING))
    fields = [ST.StructField(n, _spark_type(t)) for n, t in columns]
    arrow = [pa.field(n, arrow_type(t)) for n, t in columns]
    width = len(join.left.internal)
    if partners:
        sides = (join.joined_schema[width:], join.joined_schema[:width])
        fields.append(ST.StructField(CANDIDATE, ST.ByteType()))
        arrow.append(pa.field(CANDIDATE, pa.int8()))
        for name, side in zip(PARTNERS, sides, strict=True):
            struct = [ST.StructField(c.name, _spark_type(c.type)) for c in side]
            fields.append(ST.StructField(name, ST.ArrayType(ST.StructType(struct))))
            arrow_struct = pa.struct([pa.field(c.name, arrow_type(c.type)) for c in side])
            arrow.append(pa.field(name, pa.list_(arrow_struct)))
    types = tuple(c.type for c in join.joined_schema)
    layout = JoinLayout(types, pa.schema(arrow), width if partners else 0)
    return ST.StructType(fields), layout


def join_results(
    join: P.WindowJoin,
    residual: Sequence[str],
    tagged: DataFrame,
    partners: tuple[str, str] = ("", ""),
) -> DataFrame:
    """A stream window join's ``R`` rows -> ON's ``residual`` conjuncts (those the join
    processor does not match on) -> WHERE -> SELECT (the plan's output schema).
    ``partners``: an outer join's whole ON over a left row and a right partner, and over
    a right row and a left partner (``StreamJoin.partners``; the runtime gives rows
    with partners, :func:`join_layout`): Spark picks the pairs and the unmatched rows."""
    names = [sql_identifier(c.name) for c in join.joined_schema]
    rows = tagged.where(F.col(KIND) == RESULT)
    if any(partners):
        rows = _with_partners(join, rows, partners)
    else:
        rows = rows.select(*[F.col(n) for n in names])
    for condition in residual if not any(partners) else ():
        rows = rows.where(F.expr(condition))
    if join.where is not None:
        rows = rows.where(F.expr(join.where.sql))
    return rows.select(*_projection(join.output))


def _with_partners(join: P.WindowJoin, rows: DataFrame, on: tuple[str, str]) -> DataFrame:
    """An outer join's rows from the runtime's rows with partners (``JoinConfig.partners``):
    final rows as they are; per left row, the right partners the whole ON (``on[0]``)
    matches, each a joined row, or, when none does, the row with the right side NULL
    (``explode_outer`` of an empty list: one row, NULL) -- a LEFT or FULL join; per
    right row the same with its left partners (``on[1]``) for a RIGHT join, and for a
    FULL join (whose pairs the left rows give) the right row alone when none matches."""
    schema = join.joined_schema
    width = len(join.left.internal)
    left = [sql_identifier(c.name) for c in schema[:width]]
    right = [sql_identifier(c.name) for c in schema[width:]]
    kind = F.col(CANDIDATE)
    parts = [rows.where(kind == 0).select(*left, *right)]

    def matched(column: str, condition: str) -> Column:
        return F.expr(f"filter({column}, {PARTNER} -> coalesce(({condition}), false))")

    def partner(c: P.Column) -> Column:
        return F.col(PARTNER).getField(c.name).alias(c.name)

    if on[0]:
        pairs = rows.where(kind == LEFT_PARTNERS).select(
            *left, F.explode_outer(matched(PARTNERS[0], on[0])).alias(PARTNER)
        )
        parts.append(pairs.select(*left, *(partner(c) for c in schema[width:])))
    if on[1]:
        own = rows.where(kind == RIGHT_PARTNERS)
        if join.kind is P.JoinKind.RIGHT:
            pairs = own.select(*right, F.explode_outer(matched(PARTNERS[1], on[1])).alias(PARTNER))
            parts.append(pairs.select(*(partner(c) for c in schema[:width]), *right))
        else:
            alone = own.where(F.size(matched(PARTNERS[1], on[1])) == 0)
            nulls = [F.lit(None).cast(_spark_type(c.type)).alias(c.name) for c in schema[:width]]
            parts.append(alone.select(*nulls, *right))
    out = parts[0]
    for part in parts[1:]:
        out = out.unionByName(part)
    return out


def _spark_type(t: WqlType) -> ST.DataType:
    if t.is_unknown:
        raise WqlUnsupportedError(
            f"the operator engine needs a known type, got {t.ddl}; add a CAST to the expression",
            code=ErrorCode.WRONG_TYPE,
        )
    return T.to_spark(t)


# --------------------------------------------------------------------------- projections


def results(query: P.OperatorStage, op: OperatorPlan, tagged: DataFrame) -> DataFrame:
    """``R`` rows -> the post-aggregation relation -> HAVING -> SELECT (plan output schema)."""
    return _project(query, op, tagged.where(F.col(KIND) == RESULT))


def placed_results(query: P.OperatorStage, op: OperatorPlan, tagged: DataFrame) -> DataFrame:
    """A pipeline stage's :func:`results` with :data:`STEP` and :data:`RANK` after them:
    what the queries reading it take as input, in that order."""
    from pyspark.sql import Window

    fired = tagged.where(F.col(KIND) == RESULT)
    # the pipeline's one order of a step's rows (wql.runtime.pipeline.TIMER_ORDER_FIELDS)
    columns = {EMIT_KEY: key_columns(len(op.keys)), **{f: [c] for f, c in FIELD_COLUMNS.items()}}
    order = [
        PLACE_CLASS,
        PLACE_ORDER1,
        PLACE_ORDER2,
        *[c for f in TIMER_ORDER_FIELDS for c in columns[f]],
        PLACE_EMITTED,
    ]
    w = Window.partitionBy(STEP).orderBy(*[F.col(c).asc_nulls_first() for c in order])
    ranked = fired.withColumn(RANK, (F.row_number().over(w) - 1).cast("bigint"))
    return _project(query, op, ranked, keep=(STEP, RANK))


def _project(
    query: P.OperatorStage, op: OperatorPlan, rows: DataFrame, keep: tuple[str, ...] = ()
) -> DataFrame:
    """``R`` rows -> the plan's output; ``keep``: columns carried through, after the output
    (:data:`_PROJECTIONS`: a window aggregate's or a window rank's)."""
    return _PROJECTIONS[type(query)](query, op, rows, keep)


def _project_aggregate(
    query: P.Query, op: OperatorPlan, rows: DataFrame, keep: tuple[str, ...] = ()
) -> DataFrame:
    """A window aggregate's ``R`` rows -> its post-aggregation relation -> HAVING ->
    SELECT."""
    rel = rows.select(
        *keep,
        # a changelog's op, kept apart from the relation SELECT and HAVING read
        *([F.col(OP)] if query.changelog is not None else []),
        *[
            _emitted(read, len(op.keys)).alias(name)
            for name, read, _ in post_aggregation_relation(query, op)
        ],
    )
    if query.having is not None:
        rel = rel.where(F.expr(query.having.sql))
    out = []
    if query.changelog is not None:
        out.append(F.col(OP).alias(P.OP_COLUMN))
    return rel.select(*out, *_projection(query.output), *keep)


def linked_view_rows(
    query: P.Query, op: OperatorPlan, fed: DataFrame, keep: tuple[str, ...]
) -> DataFrame:
    """A view's rows as its reader takes them across a link in Spark SQL
    (:mod:`wql.spark.stream_links`): its ``R`` rows through the post-aggregation
    relation, HAVING and SELECT, as :func:`results` gives them, and its :data:`MARKER`
    rows kept whatever HAVING says; the ``keep`` columns after the output."""
    rel = fed.select(
        *keep,
        *[
            _emitted(read, len(op.keys)).alias(name)
            for name, read, _ in post_aggregation_relation(query, op)
        ],
    )
    if query.having is not None:
        having = F.coalesce(F.expr(query.having.sql), F.lit(False))
        rel = rel.where((F.col(KIND) == MARKER) | having)
    return rel.select(*_projection(query.output), *keep)


def linked_rank_rows(
    rank: P.WindowRank, op: OperatorPlan, fed: DataFrame, keep: tuple[str, ...]
) -> DataFrame:
    """A window rank's rows as its reader takes them across a link in Spark SQL: its ``R``
    rows through the ranked relation, outer WHERE or QUALIFY and SELECT, as
    :func:`results` gives them, and its :data:`MARKER` rows kept whatever the condition
    says (``keep`` holds :data:`KIND`); the ``keep`` columns after the output."""
    return _project_rank(rank, op, fed, keep, markers=True)


def _emitted(read: P.FieldSource, keys: int) -> Column:
    """The column of a tagged ``R`` row that ``read`` (an emitted field, a key, the
    first-pane or last-firing mark) reads; window bounds as TIMESTAMP."""
    if read[0] == "key":
        return F.col(key_columns(keys)[read[1]])
    if read[0] == "first":
        return F.col(PANE_INDEX) == 0
    if read[0] == "last":
        return F.col(IS_LAST)
    index = read[1]
    if index >= EMIT_RESULTS:
        return F.col(_aggregate_column(index - EMIT_RESULTS))
    column = F.col(FIELD_COLUMNS[index])
    if index in (EMIT_WINDOW_START, EMIT_WINDOW_END, EMIT_WINDOW_TIME):
        return F.timestamp_millis(column)
    return column


def _project_rank(
    rank: P.WindowRank,
    op: OperatorPlan,
    rows: DataFrame,
    keep: tuple[str, ...],
    *,
    markers: bool = False,
) -> DataFrame:
    """A window rank's rows -> the input row and its rank -> the ranked relation (the
    subquery's list) -> the outer WHERE or QUALIFY -> the outer SELECT. ``markers``:
    :data:`MARKER` rows pass the condition (:func:`linked_rank_rows`)."""
    # results: the rank (__wql_a0), then the operator's values (__wql_a<1 + index>)
    rel = [F.col(_aggregate_column(1 + i)).alias(name) for name, i in op.payload]
    if rank.window is not None:
        rel += [
            F.timestamp_millis(F.col(c)).alias(n)
            for c, n in zip(
                (WINDOW_START, WINDOW_END, WINDOW_TIME), P.WINDOW_TABLE_COLUMNS, strict=True
            )
        ]
    rel.append(F.col(_aggregate_column(0)).alias(P.RANK_COLUMN))
    ranked = rows.select(*keep, *rel).select(*keep, *_projection(rank.inner))
    if rank.condition is not None:
        condition = F.expr(rank.condition.sql)
        if markers:
            condition = (F.col(KIND) == MARKER) | F.coalesce(condition, F.lit(False))
        ranked = ranked.where(condition)
    return ranked.select(*_projection(rank.output), *keep)


def _project_over(
    over: P.OverAggregate, op: OperatorPlan, rows: DataFrame, keep: tuple[str, ...]
) -> DataFrame:
    """An OVER aggregation's rows -> the over relation (the input row, then its aggregates
    ``__agg_<i>``) -> SELECT."""
    # results: the aggregates (__wql_a<i>), then the operator's values (__wql_a<n + index>)
    n = len(over.aggregates)
    rel = [F.col(_aggregate_column(n + i)).alias(name) for name, i in op.payload]
    rel += [F.col(_aggregate_column(i)).alias(a.name) for i, a in enumerate(over.aggregates)]
    return rows.select(*keep, *rel).select(*_projection(over.output), *keep)


#: The projection of each kind of operator stage's rows.
_PROJECTIONS: dict[type, Any] = {
    P.Query: _project_aggregate,
    P.WindowRank: _project_rank,
    P.OverAggregate: _project_over,
}


def keeps_every_row(query: P.OperatorStage) -> bool:
    """Whether :func:`results` has one row per ``R`` row: its projection filters none
    (no HAVING; for a window rank, no outer WHERE or QUALIFY)."""
    if isinstance(query, P.WindowRank):
        return query.condition is None
    if isinstance(query, P.OverAggregate):
        return True
    return query.having is None


def _projection(columns: tuple[P.OutputColumn, ...]) -> list[Column]:
    out = []
    for c in columns:
        col = F.expr(c.expr.sql)
        if not c.type.is_unknown:
            col = col.cast(T.to_spark(c.type))
        out.append(col.alias(c.name))
    return out


def late_rows(op: OperatorPlan, tagged: DataFrame) -> DataFrame:
    """``L`` rows -> the late output: its columns, then the row's event time."""
    rows = tagged.where(F.col(KIND) == LATE_ROW)
    cols = [
        F.col(_late_column(j)).alias(name)
        for j, (name, _) in enumerate(op.late_columns)
        if name.lower() != P.LATE_EVENT_TIME_COLUMN
    ]
    cols.append(F.timestamp_millis(F.col(LATE_EVENT_TIME)).alias(P.LATE_EVENT_TIME_COLUMN))
    return rows.select(*cols)


#: How CSV outputs spell a timestamp (``wql run --format csv``, streaming CSV sinks): UTC,
#: ``yyyy-MM-dd HH:mm:ss``, then ``.SSS`` when the milliseconds are not zero (``.SSSSSS``
#: when the microseconds are not): the form of the files under ``examples/expected/``.
CSV_TIMESTAMP_FORM = "yyyy-MM-dd HH:mm:ss[.SSS]"


def writable(df: DataFrame, fmt: str) -> DataFrame:
    """An output as file format ``fmt`` can hold it: in CSV, arrays (COLLECT_LIST) as JSON
    text and timestamps as :data:`CSV_TIMESTAMP_FORM`.

    Batch outputs (``wql run --output``) and streaming sinks write the same way. The
    columns are SQL text, one ``selectExpr``: built as ``functions`` calls they cost a
    py4j round trip per call, most of a small output's write (docs/benchmarks.md, "The
    fixed cost of a small query").
    """
    if fmt != "csv":
        return df
    fields = df.schema.fields
    if not any(isinstance(f.dataType, _CSV_CONVERTED) for f in fields):
        return df
    zone = df.sparkSession.conf.get("spark.sql.session.timeZone") or "UTC"
    out = []
    for f in fields:
        c = sql_identifier(f.name)
        if isinstance(f.dataType, ST.ArrayType):
            c = f"to_json({c})"
        elif isinstance(f.dataType, ST.TimestampType):
            c = csv_timestamp(f"to_utc_timestamp({c}, {_sql_string(zone)})")
        elif isinstance(f.dataType, ST.TimestampNTZType):
            c = csv_timestamp(c)
        out.append(f"{c} AS {sql_identifier(f.name)}")
    return df.selectExpr(*out)


#: The column types :func:`writable` turns into text for CSV.
_CSV_CONVERTED = (ST.ArrayType, ST.TimestampType, ST.TimestampNTZType)


def csv_timestamp(c: str) -> str:
    """The SQL expression ``c`` (a timestamp) as text in :data:`CSV_TIMESTAMP_FORM`,
    formatted in the session's zone (callers shift an instant to UTC first)."""
    seconds = f"date_format({c}, 'yyyy-MM-dd HH:mm:ss')"
    micros = f"date_format({c}, 'SSSSSS')"
    return (
        f"CASE WHEN {micros} = '000000' THEN {seconds} "
        f"WHEN endswith({micros}, '000') THEN concat({seconds}, '.', substring({micros}, 1, 3)) "
        f"ELSE concat({seconds}, '.', {micros}) END"
    )


def _sql_string(text: str) -> str:
    """``text`` as a Spark SQL string literal."""
    return "'" + text.replace("\\", "\\\\").replace("'", "\\'") + "'"


def write_output(df: DataFrame, target: str, fmt: str) -> None:
    """Write a batch output to ``target`` as ``fmt``, replacing what is there (CSV with a
    header): what ``wql run --output`` writes for every query and late output."""
    writer = writable(df, fmt).write.mode("overwrite").format(fmt)
    if fmt == "csv":
        writer = writer.option("header", "true")
    writer.save(target)


def counters_of(tagged: DataFrame) -> DataFrame:
    """The ``C`` rows: one JSON column, :data:`COUNTERS`."""
    return tagged.where(F.col(KIND) == COUNTS).select(COUNTERS)


def sum_counters(parts: Iterable[str | dict[str, Any]]) -> dict[str, Any]:
    """Counters rows (JSON text or dicts) summed: rows_in, rows_emitted, late_rows, dropped,
    a window join's ``sides`` (drops by side, then reason) when a row has them,
    and ``rows_filtered`` when a row has it (a stream's processor counts the rows its
    WHERE rejected; the batch host's rows_in are the operator's, WHERE ran before it)."""
    total: dict[str, Any] = {"rows_in": 0, "rows_emitted": 0, "late_rows": 0, "dropped": {}}
    for part in parts:
        p = json.loads(part) if isinstance(part, str) else part
        for k in ("rows_in", "rows_emitted", "late_rows"):
            total[k] += int(p.get(k, 0))
        if "rows_filtered" in p:
            total["rows_filtered"] = total.get("rows_filtered", 0) + int(p["rows_filtered"])
        for reason, n in p.get("dropped", {}).items():
            total["dropped"][reason] = total["dropped"].get(reason, 0) + int(n)
        for name, side in p.get("sides", {}).items():
            mine = total.setdefault("sides", {}).setdefault(name, {"dropped": {}})["dropped"]
            for reason, n in side["dropped"].items():
                mine[reason] = mine.get(reason, 0) + int(n)
    return total


# --------------------------------------------------------------------------- conversions


def runtime_column(arr: pa.Array) -> Any:
    """An Arrow column as the runtime wants it: NumPy when numeric without nulls, else a list."""
    if arr.null_count == 0 and (pa.types.is_integer(arr.type) or pa.types.is_floating(arr.type)):
        return arr.to_numpy(zero_copy_only=False)
    return arr.to_pylist()


def arrow_type(t: WqlType) -> pa.DataType:
    """The Arrow type Spark expects for a column of WQL type ``t`` in the tagged stream."""
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
    raise WqlUnsupportedError(
        f"the operator engine cannot output values of type {t.ddl}", code=ErrorCode.WRONG_TYPE
    )


#: Per WQL type, the Python types whose values :func:`_coerce` returns unchanged
#: (or as an equal value Arrow converts identically): such a column goes to
#: Arrow without a Python call per value.
_AS_IS: dict[str, frozenset[type]] = {
    "BIGINT": frozenset({int, np.int64, type(None)}),
    "INT": frozenset({int, type(None)}),
    "SMALLINT": frozenset({int, type(None)}),
    "TINYINT": frozenset({int, type(None)}),
    "DOUBLE": frozenset({float, np.float64, type(None)}),
    "FLOAT": frozenset({float, type(None)}),
    "STRING": frozenset({str, type(None)}),
    "BOOLEAN": frozenset({bool, type(None)}),
}


def _arrow(values: list, t: WqlType) -> pa.Array:
    """Values computed by the runtime as an Arrow array of the plan's type."""
    as_is = _AS_IS.get(t.kind)
    if as_is is not None and as_is.issuperset(map(type, values)):
        return pa.array(values, type=arrow_type(t))
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
