"""Plan queries built by hand and small data for the native backend's tests.

The tests build plan nodes directly (not through the parser), so they pin
the backend against the plan contract alone; expected rows come from the
project's brute-force reference (``tests/runtime/reference.py``), which
never imports the runtime or Spark.
"""

from __future__ import annotations

import datetime as dt

from tests.runtime import reference as R
from wql.compiler import plan as P
from wql.compiler import types as T
from wql.compiler.expressions import aggregate_type

EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)

SCHEMA = "k STRING, ts TIMESTAMP, v INT, d DOUBLE"
COLUMNS = (
    P.Column("k", T.STRING),
    P.Column("ts", T.TIMESTAMP),
    P.Column("v", T.INT),
    P.Column("d", T.DOUBLE),
)
VALUE_TYPES = {"v": T.INT, "d": T.DOUBLE, "k": T.STRING}


def at(ms: int, micros: int = 0) -> dt.datetime:
    """The UTC timestamp ``ms`` milliseconds (+ ``micros``) after the epoch."""
    return EPOCH + dt.timedelta(milliseconds=ms, microseconds=micros)


def source(delay_ms: int = 1000, arrival_order: str | None = None) -> P.SourceRef:
    return P.SourceRef(
        "events",
        COLUMNS,
        event_time=P.EventTime("ts", delay_ms),
        arrival_order=arrival_order,
    )


def agg(i: int, kind: P.AggKind, column: str | None = None) -> P.Aggregate:
    arg = None if column is None else P.Expr(column, VALUE_TYPES[column], (column,))
    rtype = aggregate_type(kind, None if arg is None else arg.type)
    assert rtype is not None
    return P.Aggregate(kind, arg, f"__agg_{i}", rtype)


#: aggregate kinds × argument column, the ones the native engine runs
NATIVE_AGGS = (
    (P.AggKind.COUNT_STAR, None),
    (P.AggKind.COUNT, "v"),
    (P.AggKind.SUM, "v"),
    (P.AggKind.MIN, "v"),
    (P.AggKind.MAX, "d"),
    (P.AggKind.AVG, "v"),
    (P.AggKind.COUNT_DISTINCT, "v"),
)

_REF_KIND = {
    P.AggKind.COUNT_STAR: "count_star",
    P.AggKind.COUNT: "count",
    P.AggKind.SUM: "sum",
    P.AggKind.MIN: "min",
    P.AggKind.MAX: "max",
    P.AggKind.AVG: "avg",
    P.AggKind.COUNT_DISTINCT: "count_distinct",
    P.AggKind.FIRST_VALUE: "first_value",
    P.AggKind.LAST_VALUE: "last_value",
    P.AggKind.COLLECT_LIST: "collect_list",
}
_VALUE_INDEX = {"v": 0, "d": 1}


def query(
    window: P.Window,
    *,
    keyed: bool = True,
    aggs=NATIVE_AGGS,
    delay_ms: int = 1000,
    where: str | None = None,
    having: str | None = None,
    trigger: P.Trigger | None = None,
    lateness: int = 0,
    arrival_order: str | None = None,
    output: tuple[tuple[str, str, T.WqlType], ...] | None = None,
) -> P.Query:
    """A query ``SELECT [k,] window_*, pane_*, aggregates FROM events GROUP BY [k,] window``."""
    keys = (P.KeyColumn("k", P.Expr("k", T.STRING, ("k",)), T.STRING),) if keyed else ()
    aggregates = tuple(agg(i, kind, col) for i, (kind, col) in enumerate(aggs))
    if output is None:
        cols: list[tuple[str, str, T.WqlType]] = [("k", "k", T.STRING)] if keyed else []
        cols += [(n, n, T.TIMESTAMP) for n in P.WINDOW_COLUMNS]
        cols += [("pane_index", "pane_index", T.BIGINT), ("pane_timing", "pane_timing", T.STRING)]
        cols += [(f"a{i}", a.name, a.type) for i, a in enumerate(aggregates)]
        output = tuple(cols)
    out = tuple(P.OutputColumn(name, P.Expr(sql, t, (sql,)), t) for name, sql, t in output)
    return P.Query(
        name="q",
        source=source(delay_ms, arrival_order),
        filter=None if where is None else P.Expr(where, T.BOOLEAN),
        keys=keys,
        window=window,
        trigger=trigger,
        effective_trigger=trigger or P.WatermarkTrigger(),
        evictor=None,
        allowed_lateness_ms=lateness,
        late_output=None,
        aggregates=aggregates,
        output=out,
        having=None if having is None else P.Expr(having, T.BOOLEAN),
    )


def ref_window(w: P.Window):
    if isinstance(w, P.Tumble):
        return R.Tumble(w.size_ms, w.offset_ms)
    if isinstance(w, P.Hop):
        return R.Hop(w.slide_ms, w.size_ms, w.offset_ms)
    if isinstance(w, P.Cumulate):
        return R.Cumulate(w.step_ms, w.size_ms, w.offset_ms)
    if isinstance(w, P.Session):
        return R.Session(w.gap_ms)
    if isinstance(w, P.DynamicSession):
        # the tests' dynamic gaps are the column v itself
        assert w.gap_ms.sql == "v", w.gap_ms.sql
        return R.DynamicSession(_VALUE_INDEX["v"])
    raise AssertionError(w)


def expected_rows(q: P.Query, rows: list[tuple[str, int, int | None, float | None]]):
    """The operator's output for ``rows`` (key, ts ms, v, d) per the brute-force reference.

    Rows are replayed in event-time order, ties by input order (docs/architecture.md), as
    tuples in the order of :func:`query`'s default output.
    """
    et = q.source.event_time
    assert et is not None
    replay = sorted(
        ((r[0] if q.keys else (), r[1], (r[2], r[3])) for r in rows), key=lambda r: r[1]
    )
    aggs = tuple(
        R.Agg(_REF_KIND[a.kind], None if a.arg is None else _VALUE_INDEX[a.arg.sql])
        for a in q.aggregates
    )
    ref = R.in_order_reference(R.RefQuery(ref_window(q.window), aggs), replay, et.delay_ms)
    out = []
    for key, start, end, wtime, pane, timing, _ts, *values in ref.emitted:
        head = (key,) if q.keys else ()
        out.append((*head, start, end, wtime, pane, timing, *values))
    return sorted(out, key=repr)


def actual_rows(df) -> list[tuple]:
    """A result DataFrame as sorted tuples, timestamps as epoch ms (converted by Spark).

    Spark returns naive local datetimes to Python; converting in Spark keeps
    the test independent of the Python process's time zone.
    """
    from pyspark.sql import functions as F
    from pyspark.sql import types as ST

    cols = [
        F.unix_millis(F.col(f"`{f.name}`")).alias(f.name)
        if isinstance(f.dataType, ST.TimestampType)
        else F.col(f"`{f.name}`")
        for f in df.schema.fields
    ]
    return sorted((tuple(r) for r in df.select(*cols).collect()), key=repr)


def frame(spark, rows):
    """(key, ts ms, v, d) rows as the ``events`` DataFrame."""
    return spark.createDataFrame(
        [(k, None if ts is None else at(ts), v, d) for k, ts, v, d in rows], SCHEMA
    )
