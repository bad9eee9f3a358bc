"""The batch host: the operator engine in Spark equals one global operator, whatever the layout."""

from __future__ import annotations

from datetime import datetime
from decimal import Decimal

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.spark.host_helpers import (
    QUERIES,
    SELECT,
    frame,
    key_files,
    multiset,
    outcome,
    rows_of,
    run_in_process,
    source,
    summary_and_window,
    ts,
)
from wql.compiler import compile_source
from wql.compiler import types as T
from wql.errors import WqlUnsupportedError
from wql.runtime.assigners import DROP_LATE
from wql.runtime.config import EncodedKeys
from wql.spark import layout as L
from wql.spark import replay as R
from wql.spark.batch import OPERATOR_PARTITIONS_CONF, _encode_keys, run_operator

pytestmark = pytest.mark.spark


def host(spark, text, rows):
    query = compile_source(text, engine="operator").queries[0]
    run = run_operator(query, frame(spark, rows))
    try:
        result = [tuple(r) for r in run.result.collect()]
        late = [tuple(r) for r in run.late.collect()] if run.late is not None else []
        return result, late, run.counters
    finally:
        run.release()


def test_flink_vector_tumbling_through_spark(spark):
    # Flink's tumbling-window case (rows in the given order, a large delay so all fire at the end)
    text = source(10, " WITH (arrival_order = 'arr')") + (
        f"{SELECT} FROM s GROUP BY k, TUMBLE(ts, INTERVAL '3' SECOND)"
    )
    rows = rows_of(
        ("k2", 1.0, 3999),
        ("k2", 1.0, 3000),
        ("k1", 1.0, 20),
        ("k1", 1.0, 0),
        ("k1", 1.0, 999),
        ("k2", 1.0, 1998),
        ("k2", 1.0, 1999),
        ("k2", 1.0, 1000),
    )
    result, late, counters = host(spark, text, rows)
    assert sorted(result) == [
        ("k1", ts(0), ts(3000), 0, "ON_TIME", 3.0, 3),
        ("k2", ts(0), ts(3000), 0, "ON_TIME", 3.0, 3),
        ("k2", ts(3000), ts(6000), 0, "ON_TIME", 2.0, 2),
    ]
    assert late == [] and counters["rows_emitted"] == 3 and counters["dropped"] == {}


def test_the_watermark_is_global_across_keys(spark):
    # b@5000 moves the watermark to 4999 (delay 0): a's window [0,1000) is done, so
    # a@100 arriving afterwards is late although key a itself never saw a later row
    text = source(0, " WITH (arrival_order = 'arr')") + (
        f"{SELECT} FROM s GROUP BY k, TUMBLE(ts, INTERVAL '1' SECOND) LATE DATA TO late_s"
    )
    rows = rows_of(("a", 1.0, 0), ("b", 1.0, 5000), ("a", 5.0, 100))
    result, late, counters = host(spark, text, rows)
    assert sorted(result) == [
        ("a", ts(0), ts(1000), 0, "ON_TIME", 1.0, 1),
        ("b", ts(5000), ts(6000), 0, "ON_TIME", 1.0, 1),
    ]
    assert late == [("a", 5.0, ts(100), 2, 0, ts(100))]
    assert counters["late_rows"] == 1


def test_lateness_vector_7_with_late_output(spark):
    # Flink's lateness case: watermarks made by rows of another key (delay 0)
    text = source(0, " WITH (arrival_order = 'arr')") + (
        f"{SELECT} FROM s WHERE v > 0 GROUP BY k, TUMBLE(ts, INTERVAL '2' SECOND) "
        "ALLOWED LATENESS INTERVAL '500' MILLISECOND TRIGGER PURGING WATERMARK "
        "LATE DATA TO late_s"
    )
    rows = rows_of(
        ("k2", 1.0, 500),
        ("w", 0.0, 1501),
        ("k2", 1.0, 1300),
        ("w", 0.0, 2301),
        ("k2", 1.0, 1997),
        ("w", 0.0, 6001),
        ("k2", 1.0, 1998),
    )
    result, late, counters = host(spark, text, rows)
    assert sorted(result) == [
        ("k2", ts(0), ts(2000), 0, "ON_TIME", 2.0, 2),
        ("k2", ts(0), ts(2000), 1, "LATE", 1.0, 1),
    ]
    assert [(r[0], r[2]) for r in late] == [("k2", ts(1998))]
    assert counters["rows_filtered"] == 3 and counters["late_rows"] == 1


def test_null_event_times_and_late_rows_without_output_are_counted(spark):
    text = source(0, " WITH (arrival_order = 'arr')") + (
        f"{SELECT} FROM s GROUP BY k, TUMBLE(ts, INTERVAL '1' SECOND)"
    )
    rows = rows_of(("a", 1.0, 5000), ("a", 1.0, None), ("a", 1.0, 10))
    result, late, counters = host(spark, text, rows)
    assert result == [("a", ts(5000), ts(6000), 0, "ON_TIME", 1.0, 1)]
    assert counters["rows_in"] == 3
    assert counters["dropped"] == {R.REASON_NULL_EVENT_TIME: 1, DROP_LATE: 1}


def test_mixed_time_domains_need_the_processing_time_column(spark):
    text = source(0) + (
        f"{SELECT} FROM s GROUP BY k, TUMBLE(ts, INTERVAL '1' SECOND) "
        "TRIGGER EVERY INTERVAL '1' SECOND OF PROCESSING TIME"
    )
    query = compile_source(text, engine="operator").queries[0]
    with pytest.raises(WqlUnsupportedError, match="processing-time column") as info:
        run_operator(query, frame(spark, rows_of(("a", 1.0, 0))))
    assert info.value.span is not None


def test_mixed_time_domains_replay_the_global_clock_sequence(spark):
    # key a's EVERY-1s processing-time timer is due only because of b's rows' clock
    text = source(0, " WITH (arrival_order = 'arr', processing_time = 'pt')") + (
        f"{SELECT} FROM s GROUP BY k, TUMBLE(ts, INTERVAL '10' SECOND) "
        "TRIGGER ANY(WATERMARK, EVERY INTERVAL '1' SECOND OF PROCESSING TIME)"
    )
    rows = rows_of(("a", 1.0, 0), ("b", 2.0, 100), ("b", 3.0, 200), ("a", 4.0, 300))
    for r, pt in zip(rows, (0, 500, 2500, 2600), strict=True):
        r["pt"] = pt
    expected = run_in_process(text, rows, delay_ms=0, arrival="arr", processing_time="pt")
    result, _, counters = host(spark, text, rows)
    assert multiset(result) == multiset(expected[0])
    assert any(r[4] == "EARLY" for r in result)  # the processing-time firing happened
    assert counters["rows_emitted"] == expected[2]["rows_emitted"]


@settings(
    max_examples=8,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    data=st.lists(
        st.tuples(
            st.sampled_from(["a", "b", "c"]),
            st.integers(0, 9),
            st.one_of(st.integers(0, 8000), st.none()),
            st.integers(0, 30),
        ),
        min_size=1,
        max_size=14,
    ),
    query=st.sampled_from(QUERIES),
    delay=st.sampled_from([0, 1]),
    arrival=st.booleans(),
    partitions=st.sampled_from(["1", "3"]),
    batch=st.sampled_from(["2", "10000"]),
)
def test_spark_host_equals_one_global_operator(
    spark, data, query, delay, arrival, partitions, batch
):
    rows = [{"k": k, "v": float(v), "ts": ts(t), "arr": a, "pt": 0} for k, v, t, a in data]
    options = " WITH (arrival_order = 'arr')" if arrival else ""
    text = source(delay, options) + query
    expected, expected_late, counters = run_in_process(
        text, rows, delay_ms=delay * 1000, arrival="arr" if arrival else None
    )
    if "COUNT_WINDOW" in query:  # that query selects (k, pane_index, total, n)
        expected = [(r[0], r[3], *r[5:]) for r in expected]
    before = spark.conf.get("spark.sql.shuffle.partitions")
    spark.conf.set("spark.sql.shuffle.partitions", partitions)
    # small inputs run in one partition unless told otherwise
    spark.conf.set(OPERATOR_PARTITIONS_CONF, partitions)
    spark.conf.set("spark.sql.execution.arrow.maxRecordsPerBatch", batch)
    try:
        result, late, host_counters = host(spark, text, rows)
    finally:
        spark.conf.set("spark.sql.shuffle.partitions", before)
        spark.conf.unset(OPERATOR_PARTITIONS_CONF)
        spark.conf.unset("spark.sql.execution.arrow.maxRecordsPerBatch")
    assert multiset(result) == multiset(expected)
    assert multiset(late) == multiset(expected_late)
    assert host_counters["rows_emitted"] == counters["rows_emitted"]
    assert host_counters["late_rows"] == counters["late_rows"]
    nulls = sum(r["ts"] is None for r in rows)
    assert host_counters["rows_in"] == len(rows)
    assert host_counters["dropped"].get(R.REASON_NULL_EVENT_TIME, 0) == nulls


def test_every_aggregate_type_comes_back_with_the_plan_type(spark):
    import datetime as dt
    import decimal

    import wql

    t0 = dt.datetime(2024, 5, 1)
    rows = [
        (dt.date(2024, 5, 1), decimal.Decimal("1.25"), 3, t0, "x"),
        (dt.date(2024, 5, 1), decimal.Decimal("2.50"), None, t0 + dt.timedelta(seconds=1), "y"),
        (dt.date(2024, 5, 2), None, 7, t0 + dt.timedelta(seconds=2), "x"),
    ]
    df = spark.createDataFrame(rows, "d date, price decimal(10,2), n int, ts timestamp, tag string")
    text = (
        "CREATE SOURCE s (d DATE, price DECIMAL(10,2), n INT, ts TIMESTAMP, tag STRING, "
        "WATERMARK FOR ts AS ts - INTERVAL '1' SECOND);\n"
        "SELECT d, window_time, SUM(price) AS total, AVG(price) AS mean, MIN(ts) AS first_ts, "
        "COLLECT_LIST(tag) AS tags, FIRST_VALUE(tag) AS f, LAST_VALUE(n) AS l, "
        "COUNT(DISTINCT tag) AS dt, COUNT(n) AS cn, AVG(n) AS an "
        "FROM s GROUP BY d, TUMBLE(ts, INTERVAL '1' MINUTE)"
    )
    results = wql.compile(text, "operator").apply(spark, s=df)
    try:
        out = results.df
        query = results.query("query_1").plan
        assert [f.name for f in out.schema.fields] == [c.name for c in query.output]
        assert out.schema.simpleString() == (
            "struct<d:date,window_time:timestamp,total:decimal(20,2),mean:decimal(14,6),"
            "first_ts:timestamp,tags:array<string>,f:string,l:int,dt:bigint,cn:bigint,an:double>"
        )
        window_time = t0 + dt.timedelta(seconds=59, milliseconds=999)
        assert sorted(tuple(r) for r in out.collect()) == [
            (
                dt.date(2024, 5, 1),
                window_time,
                decimal.Decimal("3.75"),
                decimal.Decimal("1.875000"),
                t0,
                ["x", "y"],
                "x",
                3,
                2,
                1,
                3.0,
            ),
            (
                dt.date(2024, 5, 2),
                window_time,
                None,
                None,
                t0 + dt.timedelta(seconds=2),
                ["x"],
                "x",
                7,
                1,
                1,
                7.0,
            ),
        ]
    finally:
        results.release()


def test_processing_time_windows_read_the_declared_clock(spark):
    # PROCTIME() windows on the processing_time column: a's window [0, 1000) is due
    # only because b's later row moves the (global) processing clock to 1500
    text = source(0, " WITH (arrival_order = 'arr', processing_time = 'pt')") + (
        "SELECT k, window_start, window_end, pane_index, pane_timing, SUM(v) AS total, "
        "COUNT(*) AS n FROM s GROUP BY k, TUMBLE(PROCTIME(), INTERVAL '1' SECOND)"
    )
    rows = rows_of(("a", 1.0, 0), ("a", 2.0, 10), ("b", 4.0, 20), ("b", 8.0, 30))
    for r, pt in zip(rows, (100, 900, 1500, 1600), strict=True):
        r["pt"] = pt
    expected, _, _ = run_in_process(text, rows, delay_ms=0, arrival="arr", processing_time="pt")
    result, _, counters = host(spark, text, rows)
    assert multiset(result) == multiset(expected)
    # b's window [1000, 2000) is still open at end of input: processing time does not fire then
    assert sorted(result) == [("a", ts(0), ts(1000), 0, "ON_TIME", 3.0, 2)]
    assert counters["rows_operator"] == 4


def test_operator_partitions_follow_the_cores_unless_configured(spark):
    from wql.spark.batch import SMALL_INPUT_ROWS, operator_partitions

    cores = spark.sparkContext.defaultParallelism
    before = spark.conf.get("spark.sql.shuffle.partitions")
    try:
        spark.conf.set("spark.sql.shuffle.partitions", "200")
        assert operator_partitions(spark) == 2 * cores
        assert operator_partitions(spark, SMALL_INPUT_ROWS + 1) == 2 * cores
        assert operator_partitions(spark, SMALL_INPUT_ROWS) == 1  # a small input: one task
        spark.conf.set("spark.sql.shuffle.partitions", "1")
        assert operator_partitions(spark) == 1
        spark.conf.set(OPERATOR_PARTITIONS_CONF, "7")
        assert operator_partitions(spark) == 7
    finally:
        spark.conf.unset(OPERATOR_PARTITIONS_CONF)
        spark.conf.set("spark.sql.shuffle.partitions", before)


def test_hop_operators_give_every_window(spark):
    # HOP 1 s / 3 s: every row lands in 3 windows (one partial per 1 s slice)
    text = source(10, " WITH (arrival_order = 'arr')") + (
        "SELECT k, window_start, window_end, COUNT(*) AS n, MIN(arr) AS first_arr "
        "FROM s GROUP BY k, HOP(ts, INTERVAL '1' SECOND, INTERVAL '3' SECOND)"
    )
    rows = rows_of(("a", 1.0, 0), ("a", 1.0, 1500), ("b", 1.0, 2500), ("a", 1.0, 2600))
    expected = [
        ("a", ts(-2000), ts(1000), 1, 0),
        ("a", ts(-1000), ts(2000), 2, 0),
        ("a", ts(0), ts(3000), 3, 0),
        ("a", ts(1000), ts(4000), 2, 1),
        ("a", ts(2000), ts(5000), 1, 3),
        ("b", ts(0), ts(3000), 1, 2),
        ("b", ts(1000), ts(4000), 1, 2),
        ("b", ts(2000), ts(5000), 1, 2),
    ]
    result, late, counters = host(spark, text, rows)
    assert sorted(result) == expected
    assert late == [] and counters["rows_emitted"] == 8


_KEY_COLUMNS = {
    "int": (st.one_of(st.none(), st.integers(-3, 3)), pa.int64()),
    "str": (st.one_of(st.none(), st.sampled_from(["a", "b", ""])), pa.string()),
    "bool": (st.one_of(st.none(), st.booleans()), pa.bool_()),
    "decimal": (
        st.one_of(st.none(), st.sampled_from([Decimal("1.50"), Decimal("-2.00")])),
        pa.decimal128(5, 2),
    ),
    "ts": (
        st.one_of(st.none(), st.sampled_from([datetime(2024, 1, 1), datetime(1970, 1, 1)])),
        pa.timestamp("us"),
    ),
}


@settings(max_examples=100, deadline=None)
@given(
    data=st.data(),
    kinds=st.lists(st.sampled_from(sorted(_KEY_COLUMNS)), min_size=1, max_size=3),
    n=st.integers(1, 30),
)
def test_keys_encoded_in_arrow_read_as_the_row_tuples(data, kinds, n):
    arrays = [
        pa.array(
            data.draw(st.lists(_KEY_COLUMNS[k][0], min_size=n, max_size=n)), _KEY_COLUMNS[k][1]
        )
        for k in kinds
    ]
    codes, keys = _encode_keys(arrays)
    rows = list(zip(*[a.to_pylist() for a in arrays], strict=True))
    assert EncodedKeys(codes, keys).tolist() == rows
    assert keys == list(dict.fromkeys(rows))  # distinct, in first-appearance order


def test_float_keys_are_not_encoded():
    # NaN and -0.0 compare differently in Arrow and in Python keys: row tuples instead
    assert _encode_keys([pa.array([0.0, -0.0, float("nan")])]) is None


_OUTPUT_VALUES = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(2**62), 2**62),
    st.floats(allow_nan=False),
    st.text(max_size=3),
    st.integers(-100, 100).map(np.int64),
    st.floats(-1e6, 1e6).map(np.float64),
)


@settings(max_examples=200, deadline=None)
@given(
    kind=st.sampled_from(["BIGINT", "INT", "TINYINT", "DOUBLE", "FLOAT", "STRING", "BOOLEAN"]),
    values=st.lists(_OUTPUT_VALUES, max_size=8),
)
def test_output_columns_convert_as_value_by_value(kind, values):
    # the layout passes a column to Arrow whole when its values need no coercion;
    # it must give what coercing every value gives (or fail alike)
    t = getattr(T, kind)
    try:
        expected = pa.array([L._coerce(v, t) for v in values], type=L.arrow_type(t))
    except (pa.ArrowException, TypeError, ValueError, OverflowError):
        with pytest.raises((pa.ArrowException, TypeError, ValueError, OverflowError)):
            L._arrow(values, t)
        return
    assert L._arrow(values, t).equals(expected)


SUMMARY_QUERIES = [
    f"{SELECT} FROM s GROUP BY k, SESSION(ts, INTERVAL '1' SECOND)",
    f"{SELECT} FROM s GROUP BY k, TUMBLE(ts, INTERVAL '1' SECOND) "
    "ALLOWED LATENESS INTERVAL '500' MILLISECOND LATE DATA TO late_s",
    f"{SELECT} FROM s GROUP BY k, SESSION(ts, INTERVAL '1' SECOND) TRIGGER PURGING COUNT(2)",
    f"{SELECT} FROM s GROUP BY k, TUMBLE(ts, INTERVAL '2' SECOND) "
    "ALLOWED LATENESS INTERVAL '1' SECOND TRIGGER WATERMARK WITH EARLY COUNT(2)",
    f"{SELECT} FROM s GROUP BY k, TUMBLE(ts, INTERVAL '2' SECOND) TRIGGER COUNT(2) EVICT COUNT(2)",
    # timers on the times' grid: whether a tie's later row comes before or after a
    # firing depends on the watermark it sees (its twin's time, not the time below)
    f"{SELECT} FROM s GROUP BY k, TUMBLE(ts, INTERVAL '2' SECOND) "
    "TRIGGER EVERY INTERVAL '250' MILLISECOND OF EVENT TIME",
]


@settings(
    max_examples=10,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    files=key_files(st.integers(0, 9), slots=8, rows=8, files=4),
    query=st.sampled_from(SUMMARY_QUERIES),
    delay=st.sampled_from([0, 1]),
    partitions=st.sampled_from(["1", "3"]),
    batch=st.sampled_from(["2", "10000"]),
)
def test_summary_replay_equals_the_window_replay(spark, files, query, delay, partitions, batch):
    # the key partitions compute their rows' watermarks from the event-time summary
    # (wql/spark/replay.py, summary strategy): every outcome as the global window's
    files = [[(k, v, t, 0) for k, v, t in rows] for rows in files]
    got, expected = summary_and_window(spark, source(delay) + query, files, partitions, batch)
    assert got == expected


@settings(
    max_examples=10,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    files=st.lists(
        st.lists(
            st.tuples(
                st.sampled_from(["a", "b", "c"]),
                st.integers(0, 9),
                # event times out of arrival order, a few far behind (late), some NULL
                st.one_of(st.integers(0, 12).map(lambda t: t * 250), st.none()),
                # few arrival values: ties within and across files, some NULL
                st.one_of(st.integers(0, 5), st.none()),
            ),
            min_size=1,
            max_size=8,
        ),
        min_size=1,
        max_size=4,
    ),
    query=st.sampled_from(SUMMARY_QUERIES),
    delay=st.sampled_from([0, 1]),
    partitions=st.sampled_from(["1", "3"]),
    batch=st.sampled_from(["2", "10000"]),
)
def test_arrival_summary_replay_equals_the_window_replay(
    spark, files, query, delay, partitions, batch
):
    # in arrival order the tasks compute the watermarks from the records (the rows above
    # every earlier one): every outcome, late rows and drops included, as the window's
    text = source(delay, " WITH (arrival_order = 'arr')") + query
    got, expected = summary_and_window(spark, text, files, partitions, batch)
    assert got == expected


def test_arrival_summary_late_rows_and_drops(spark):
    # arrival ties (b@3000 and a@3000 share arrival 1), a row late beyond the allowed
    # lateness (a@100 after the watermark passed 2999), NULL time and NULL arrival
    text = source(0, " WITH (arrival_order = 'arr')") + SUMMARY_QUERIES[1]
    query = compile_source(text, engine="operator").queries[0]
    items = [("a", 0, 0), ("b", 3000, 1), ("a", 3000, 1), ("a", 100, 2), ("b", None, 3)]
    rows = [{"k": k, "v": 1.0, "ts": ts(t), "arr": a, "pt": 0} for k, t, a in items]
    rows.append({"k": "a", "v": 1.0, "ts": ts(200), "arr": None, "pt": 0})
    got = outcome(run_operator(query, frame(spark, rows), replay_strategy=R.STRATEGY_SUMMARY))
    expected = outcome(run_operator(query, frame(spark, rows), replay_strategy=R.STRATEGY_WINDOW))
    assert got == expected
    counters = got[3]
    assert counters["late_rows"] == 1
    assert counters["dropped"] == {R.REASON_NULL_EVENT_TIME: 1, R.REASON_NULL_ARRIVAL_ORDER: 1}


def test_a_ties_later_row_sees_its_twins_time(spark):
    # a@500 comes after b@500 in input order: it sees watermark 499, so a's EVERY
    # timer at 250 fires before it (pane of a@0 alone); b@500 sees -1 (0 - 0 - 1)
    text = source(0) + SUMMARY_QUERIES[-1]
    query = compile_source(text, engine="operator").queries[0]
    rows = rows_of(("a", 1.0, 0), ("b", 1.0, 500), ("a", 1.0, 500))
    got = outcome(run_operator(query, frame(spark, rows), replay_strategy=R.STRATEGY_SUMMARY))
    expected = outcome(run_operator(query, frame(spark, rows), replay_strategy=R.STRATEGY_WINDOW))
    assert got == expected
    assert got[0][("a", ts(0), ts(2000), 0, "EARLY", 1.0, 1)] == 1


def test_summary_replay_only_where_nothing_needs_positions(spark):
    rows = rows_of(("a", 1.0, 500), ("b", 1.0, 500), ("a", 1.0, 100))
    plain = compile_source(source(0) + QUERIES[0], engine="operator").queries[0]
    run = run_operator(plain, frame(spark, rows))
    assert run._replay is not None and run._replay.summary is not None  # auto takes it
    run.release()
    # a pipeline's first stage places its rows by replay position: today's replay
    run = run_operator(plain, frame(spark, rows), tag=True)
    assert run._replay is not None and run._replay.summary is None
    run.release()
    # arrival order with event time as the only clock: the arrival summary
    ordered = compile_source(source(0, " WITH (arrival_order = 'arr')") + QUERIES[0])
    run = run_operator(ordered.queries[0], frame(spark, rows))
    assert run._replay is not None and isinstance(run._replay.summary, R.ArrivalSummary)
    run.release()
    # a processing-time clock needs the global clock sequence: no summary
    clocked = compile_source(
        source(0, " WITH (arrival_order = 'arr', processing_time = 'pt')")
        + "SELECT k, COUNT(*) AS n FROM s GROUP BY k, TUMBLE(PROCTIME(), INTERVAL '1' SECOND)"
    )
    with pytest.raises(ValueError, match="summary replay"):
        run_operator(clocked.queries[0], frame(spark, rows), replay_strategy=R.STRATEGY_SUMMARY)
