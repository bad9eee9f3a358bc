"""The native backend against the brute-force reference, and the Spark differences it pins."""

from __future__ import annotations

import dataclasses

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.spark.native_helpers import (
    NATIVE_AGGS,
    actual_rows,
    at,
    expected_rows,
    frame,
    query,
)
from wql.compiler import plan as P
from wql.compiler import types as T
from wql.compiler.backends import native
from wql.compiler.capabilities import NATIVE
from wql.errors import WqlUnsupportedError

pytestmark = pytest.mark.spark

EV = P.TimeDomain.EVENT

# (key, ts ms, v, d): negative times, ties, a NULL value, a touching session
ROWS = [
    ("a", 0, 1, 0.5),
    ("a", 999, 2, 1.25),
    ("a", 1000, 2, None),
    ("b", -1, 5, 2.0),
    ("b", -2500, None, 0.25),
    ("a", 3000, 7, 1.0),
    ("b", 1998, 1, 3.5),
    ("a", 6000, 1, 0.5),
    ("b", 4000, 3, 0.75),
    ("a", 20, 4, 8.0),
    ("b", 3999, 3, 1.5),
]

WINDOWS = {
    "tumble": P.Tumble(EV, "ts", 3000),
    "tumble_offset": P.Tumble(EV, "ts", 3000, offset_ms=-1000),
    "hop": P.Hop(EV, "ts", 1000, 3000),
    "hop_ragged_offset": P.Hop(EV, "ts", 2000, 5000, offset_ms=500),
    "hop_negative_offset": P.Hop(EV, "ts", 2000, 3000, offset_ms=-1500),
    "cumulate": P.Cumulate(EV, "ts", 1000, 3000),
    "cumulate_offset": P.Cumulate(EV, "ts", 500, 2000, offset_ms=250),
    "cumulate_negative_offset": P.Cumulate(EV, "ts", 1000, 3000, offset_ms=-2999),
    "session": P.Session(EV, "ts", 1000),
}


@pytest.mark.parametrize("name", sorted(WINDOWS))
@pytest.mark.parametrize("keyed", [True, False], ids=["keyed", "window_all"])
def test_window_kinds_match_reference(spark, name, keyed):
    q = query(WINDOWS[name], keyed=keyed)
    got = native.build_native(q, frame(spark, ROWS))
    assert actual_rows(got) == expected_rows(q, ROWS)


def test_output_schema_is_the_plan_schema(spark):
    q = query(WINDOWS["hop"])
    got = native.build_native(q, frame(spark, ROWS))
    assert [f.name for f in got.schema.fields] == [c.name for c in q.output_schema]
    assert [T.from_spark(f.dataType) for f in got.schema.fields] == [
        c.type for c in q.output_schema
    ]


def test_touching_sessions_merge(spark):
    # [0, 3000) and [3000, 6000) touch: Flink merges them, so must native
    q = query(P.Session(EV, "ts", 3000), aggs=((P.AggKind.COUNT_STAR, None),))
    rows = [("a", 0, 1, 1.0), ("a", 3000, 1, 1.0)]
    got = actual_rows(native.build_native(q, frame(spark, rows)))
    assert got == [("a", 0, 6000, 5999, 0, "ON_TIME", 2)]


def test_sub_millisecond_times_are_floored_before_windowing(spark):
    # Spark alone would start the session at .999999 and end it at 1.999999 s
    q = query(P.Session(EV, "ts", 1000), aggs=((P.AggKind.COUNT_STAR, None),))
    df = spark.createDataFrame(
        [("a", at(0, 999), 1, 1.0), ("a", at(-1, 500), 1, 1.0)],
        "k STRING, ts TIMESTAMP, v INT, d DOUBLE",
    )
    got = native.build_native(q, df).selectExpr(
        "unix_micros(window_start)", "unix_micros(window_end)", "unix_micros(window_time)"
    )
    assert [tuple(r) for r in got.collect()] == [(-1000, 1_000_000, 999_000)]


def test_window_time_is_end_minus_one_millisecond(spark):
    q = query(P.Tumble(EV, "ts", 1000), aggs=((P.AggKind.COUNT_STAR, None),))
    got = native.build_native(q, frame(spark, [("a", 5, 1, 1.0)]))
    row = got.selectExpr("unix_micros(window_end) - unix_micros(window_time) AS d").first()
    assert row.d == 1000


def test_null_event_times_are_counted_not_lost(spark):
    rows = [("a", None, 1, 1.0), ("a", 10, 2, 1.0), ("b", None, 3, 1.0)]
    q = query(P.Tumble(EV, "ts", 1000), aggs=((P.AggKind.COUNT_STAR, None),))
    df = frame(spark, rows)
    assert actual_rows(native.build_native(q, df)) == [("a", 0, 1000, 999, 0, "ON_TIME", 1)]
    assert native.drop_counts(q, df) == {native.REASON_NULL_EVENT_TIME: 2}
    dropped = native.dropped_rows(q, df).orderBy("v").collect()
    assert [(r.k, r.v, r.reason) for r in dropped] == [
        ("a", 1, "null event time"),
        ("b", 3, "null event time"),
    ]


def test_where_having_and_select_expressions(spark):
    output = (
        ("k", "k", T.STRING),
        ("start_ms", "unix_millis(window_start)", T.BIGINT),
        ("total", "__agg_0 * 10", T.BIGINT),
    )
    q = query(
        P.Tumble(EV, "ts", 3000),
        aggs=((P.AggKind.SUM, "v"), (P.AggKind.COUNT_STAR, None)),
        where="v IS NOT NULL AND v < 7",
        having="__agg_1 >= 2",
        output=output,
    )
    got = sorted(tuple(r) for r in native.build_native(q, frame(spark, ROWS)).collect())
    # a [0,3000): v 1, 2, 2, 4 -> 9 (4 rows); b [-3000,0): v 5 (NULL filtered) -> 1 row, cut
    # by HAVING; b [0,3000): 1 -> 1 row, cut; b [3000,6000): 3, 3 -> 6 (2 rows)
    assert got == [("a", 0, 90), ("b", 3000, 60)]


def test_decimal_sum_and_avg_types_follow_the_plan(spark):
    df = spark.createDataFrame(
        [("a", at(1), 1, 1.0), ("a", at(2), 2, 2.0)], "k STRING, ts TIMESTAMP, v INT, d DOUBLE"
    ).selectExpr("k", "ts", "CAST(v AS DECIMAL(10,2)) AS v", "d")
    dec = T.DECIMAL(10, 2)
    base = query(P.Tumble(EV, "ts", 1000), aggs=())
    cols = tuple(
        dataclasses.replace(c, type=dec) if c.name == "v" else c for c in base.source.columns
    )
    sum_t, avg_t = T.DECIMAL(20, 2), T.DECIMAL(14, 6)
    arg = P.Expr("v", dec, ("v",))
    aggs = (
        P.Aggregate(P.AggKind.SUM, arg, "__agg_0", sum_t),
        P.Aggregate(P.AggKind.AVG, arg, "__agg_1", avg_t),
    )
    out = (
        P.OutputColumn("s", P.Expr("__agg_0", sum_t), sum_t),
        P.OutputColumn("m", P.Expr("__agg_1", avg_t), avg_t),
    )
    q = dataclasses.replace(
        base, source=dataclasses.replace(base.source, columns=cols), aggregates=aggs, output=out
    )
    got = native.build_native(q, df)
    assert [T.from_spark(f.dataType) for f in got.schema.fields] == [sum_t, avg_t]
    assert [(str(r.s), str(r.m)) for r in got.collect()] == [("3.00", "1.500000")]


def test_event_time_as_text_and_ntz_is_read_as_utc(spark):
    q = query(P.Tumble(EV, "ts", 1000), aggs=((P.AggKind.COUNT_STAR, None),))
    text = spark.createDataFrame(
        [("a", "1970-01-01 00:00:01.5", 1, 1.0), ("a", "not a time", 1, 1.0)],
        "k STRING, ts STRING, v INT, d DOUBLE",
    )
    assert actual_rows(native.build_native(q, text)) == [("a", 1000, 2000, 1999, 0, "ON_TIME", 1)]
    assert native.drop_counts(q, text) == {"null event time": 1}
    ntz = text.selectExpr("k", "CAST(try_to_timestamp(ts) AS TIMESTAMP_NTZ) AS ts", "v", "d")
    assert actual_rows(native.build_native(q, ntz)) == [("a", 1000, 2000, 1999, 0, "ON_TIME", 1)]


# --------------------------------------------------------------------------- capabilities


def _blocked(q: P.Query) -> WqlUnsupportedError:
    with pytest.raises(WqlUnsupportedError) as info:
        native.check_native(q)
    return info.value


def test_operator_only_constructs_are_refused_with_their_clause():
    cases = [
        (query(P.Tumble(EV, "ts", 1000), trigger=P.CountTrigger(3)), "TRIGGER"),
        (query(P.Tumble(EV, "ts", 1000), lateness=10), "ALLOWED LATENESS"),
        (query(P.Session(EV, "ts", 1000), arrival_order="v"), "arrival_order"),
        (query(P.Tumble(EV, "ts", 1000), aggs=((P.AggKind.FIRST_VALUE, "v"),)), "FIRST_VALUE"),
        (query(P.Tumble(EV, "ts", 1000), aggs=((P.AggKind.COLLECT_LIST, "v"),)), "COLLECT_LIST"),
        (query(P.Session(EV, "ts", 1000), delay_ms=0), "zero watermark delay"),
    ]
    for q, needle in cases:
        assert needle in _blocked(q).message


def test_refusal_carries_the_clause_span():
    from wql.errors import Span

    text = "GROUP BY k, TUMBLE(PROCTIME(), INTERVAL '1' SECOND)"
    span = Span.from_offsets(text, 12, 51)
    q = query(P.Tumble(P.TimeDomain.PROCESSING, None, 1000, span=span))
    err = _blocked(q)
    assert (err.span.line, err.span.column) == (1, 13)
    assert native.native_blockers(query(P.Tumble(EV, "ts", 1000))) == ()


def test_keyless_session_with_zero_delay_runs_natively(spark):
    # one key: the first row at a session's end is that key's own, so it merges
    q = query(P.Session(EV, "ts", 1000), keyed=False, delay_ms=0)
    got = native.build_native(q, frame(spark, ROWS))
    assert actual_rows(got) == expected_rows(q, ROWS)


# --------------------------------------------------------------------------- dynamic gap


def test_dynamic_gap_counts_invalid_gaps(spark):
    # the lowering is exact (Flink's dynamic-gap session case) and counts
    # NULL and <= 0 gaps instead of letting session_window drop them
    caps = NATIVE
    gap = P.Expr("CASE WHEN v = 10 THEN 1000 WHEN v > 0 THEN 2000 ELSE v END", T.INT, ("v",))
    q = query(P.DynamicSession(EV, "ts", gap), aggs=((P.AggKind.SUM, "v"),))
    rows = [
        ("k2", 9000, 1, 0.0),
        ("k2", 10000, 2, 0.0),
        ("k2", 10500, 10, 0.0),
        ("k2", 20000, 0, 0.0),
        ("k2", 30000, -3, 0.0),
        ("k2", 40000, None, 0.0),
    ]
    df = frame(spark, rows)
    got = native.run_steps(native.lower(q, caps=caps).steps, df)
    assert actual_rows(got) == [("k2", 9000, 12000, 11999, 0, "ON_TIME", 13)]
    assert native.drop_counts(q, df, caps) == {"invalid session gap": 3}


# --------------------------------------------------------------------------- property


def _offset(raw: int, bound: int) -> int:
    """``raw`` folded into the valid offset range ``|offset| < bound``, keeping its sign."""
    return raw % bound if raw >= 0 else -((-raw) % bound)


_row = st.tuples(
    st.sampled_from(["a", "b", "c"]),
    st.integers(-5000, 12000),
    st.one_of(st.none(), st.integers(-3, 9)),
    st.one_of(st.none(), st.sampled_from([0.5, 1.25, -2.0, 4.0])),
)
_window = st.one_of(
    st.builds(
        lambda s, o: P.Tumble(EV, "ts", s, o % s), st.integers(1, 4000), st.integers(0, 3999)
    ),
    st.builds(
        lambda sl, n, o: P.Hop(EV, "ts", sl, sl * n + (sl // 3), o % sl),
        st.integers(1, 2000),
        st.integers(1, 3),
        st.integers(0, 1999),
    ),
    st.builds(
        lambda st_, n, o: P.Cumulate(EV, "ts", st_, st_ * n, o % (st_ * n)),
        st.integers(1, 1500),
        st.integers(1, 4),
        st.integers(0, 5999),
    ),
    st.builds(lambda g: P.Session(EV, "ts", g), st.integers(1, 3000)),
)


@settings(
    max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(rows=st.lists(_row, max_size=14), window=_window, keyed=st.booleans())
def test_native_equals_reference_property(spark, rows, window, keyed):
    q = query(window, keyed=keyed, aggs=NATIVE_AGGS, delay_ms=250)
    got = native.build_native(q, frame(spark, rows))
    assert actual_rows(got) == expected_rows(q, rows)


def test_zero_delay_keyed_session_is_refused_because_the_operator_splits_it():
    # b@1000 raises the global watermark to 999 before a@1000 is processed:
    # a's session [0, 1000) fires and is cleaned, so a@1000 starts a new one;
    # Spark's session_window would merge the touching windows into [0, 2000)
    rows = [("a", 0, 1, 1.0), ("b", 1000, 1, 1.0), ("a", 1000, 1, 1.0)]
    q = query(P.Session(EV, "ts", 1000), aggs=((P.AggKind.COUNT_STAR, None),), delay_ms=0)
    assert [r for r in expected_rows(q, rows) if r[0] == "a"] == [
        ("a", 0, 1000, 999, 0, "ON_TIME", 1),
        ("a", 1000, 2000, 1999, 0, "ON_TIME", 1),
    ]
    assert "zero watermark delay" in _blocked(q).message


def test_double_sums_follow_replay_order_not_partitioning(spark):
    # 1e16 + 1 is 1e16 in doubles: the result depends on the order of addition.
    # Spark's own SUM gave 1.0, 4.0 or 5.0 here depending on partitioning.
    values = [1e16, 1.0, -1e16, 1.0] * 3
    rows = [("a", i, 1, x) for i, x in enumerate(values)]
    sequential = 0.0
    for x in values:  # the operator adds in event-time order
        sequential += x
    q = query(
        P.Tumble(EV, "ts", 1000),
        aggs=((P.AggKind.SUM, "d"), (P.AggKind.AVG, "d"), (P.AggKind.COUNT_STAR, None)),
    )
    base = frame(spark, list(reversed(rows)))  # input order is not event-time order
    for parts in (1, 2, 5, 12):
        got = actual_rows(native.build_native(q, base.repartition(parts)))
        assert got == [("a", 0, 1000, 999, 0, "ON_TIME", sequential, sequential / 12, 12)]


def test_double_sum_ties_follow_input_order(spark):
    # equal event times: replay order is input order (docs/architecture.md)
    values = [1.0, 1e16, -1e16, 1.0, None]
    rows = [("a", 5, 1, x) for x in values]
    q = query(P.Tumble(EV, "ts", 1000), aggs=((P.AggKind.SUM, "d"),))
    # ((1 + 1e16) - 1e16) + 1 = 0 + 1 in doubles
    assert actual_rows(native.build_native(q, frame(spark, rows))) == [
        ("a", 0, 1000, 999, 0, "ON_TIME", 1.0)
    ]
    only_null = [("a", 5, 1, None)]
    assert actual_rows(native.build_native(q, frame(spark, only_null))) == [
        ("a", 0, 1000, 999, 0, "ON_TIME", None)
    ]


_gap_row = st.tuples(
    st.sampled_from(["a", "b"]),
    st.integers(-4000, 9000),
    st.integers(1, 2500),
    st.one_of(st.none(), st.sampled_from([0.5, -1.25, 3.0])),
)


@settings(
    max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(rows=st.lists(_gap_row, max_size=12), keyed=st.booleans())
def test_dynamic_gap_equals_reference_property(spark, rows, keyed):
    caps = NATIVE
    q = query(P.DynamicSession(EV, "ts", P.Expr("v", T.INT, ("v",))), keyed=keyed, delay_ms=100)
    got = native.run_steps(native.lower(q, caps=caps).steps, frame(spark, rows))
    assert actual_rows(got) == expected_rows(q, rows)


def test_query_without_aggregates(spark):
    output = (("k", "k", T.STRING), ("window_start", "window_start", T.TIMESTAMP))
    q = query(P.Hop(EV, "ts", 1000, 2000), aggs=(), output=output)
    df = frame(spark, [("a", 10, 1, 1.0), ("a", 20, 1, 1.0)])
    got = actual_rows(native.build_native(q, df))
    assert got == [("a", -1000), ("a", 0)]
    df.createOrReplaceTempView("events")
    assert actual_rows(spark.sql(native.to_spark_sql(q))) == got


def test_streaming_input_gets_a_watermark_on_the_millisecond_event_time(spark, tmp_path):
    # no batch-only operation in the steps; a stream needs Spark's watermark
    # on the column the windows use, with the query's delay
    stream = spark.readStream.schema("k STRING, ts TIMESTAMP, v INT, d DOUBLE").csv(str(tmp_path))
    q = query(P.Tumble(EV, "ts", 1000), delay_ms=1500)
    # the backend checks the stream capabilities: late rows (docs/native.md, "Streaming")
    with pytest.raises(WqlUnsupportedError, match="cannot run on the native engine on a stream"):
        native.build_native(q, stream)
    got = native.run_steps(native.lower(q).steps, stream)
    assert got.isStreaming
    plan = got._jdf.queryExecution().analyzed().toString()
    marks = [line for line in plan.splitlines() if "EventTimeWatermark" in line]
    assert len(marks) == 1 and "__wql_et" in marks[0] and "1.5 seconds" in marks[0]
    batch = native.build_native(query(P.Tumble(EV, "ts", 1000)), frame(spark, ROWS))
    assert "EventTimeWatermark" not in batch._jdf.queryExecution().analyzed().toString()
