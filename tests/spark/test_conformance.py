"""Conformance: a query both engines accept gives identical rows on both.

Operator-only queries are checked against hand-derived rows in
``test_examples.py`` (the examples) and ``test_batch_host.py`` (Flink's test
vectors); here every query the native engine can run is run on both engines
— the examples and hypothesis-generated out-of-order data — and the results
must be the same multiset of rows with the same schema.
"""

from __future__ import annotations

import datetime as dt

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

import wql
from tests.spark.examples_helpers import example_files, rows_as_text
from wql.errors import WqlUnsupportedError

pytestmark = pytest.mark.spark

EPOCH = dt.datetime(2024, 5, 1)


def both_engines(spark, make, counters: bool = False, **dataframes):
    """``{engine: (schema, sorted rows as text[, counters])}`` for the only query
    ``make(engine)`` compiles."""
    out = {}
    for engine in ("native", "operator"):
        results = make(engine).apply(spark, **dataframes)
        try:
            r = results.queries[0]
            assert r.engine == engine
            out[engine] = (r.df.schema.simpleString(), rows_as_text(r.df)[1])
            if counters:
                c = r.counters
                out[engine] += ({k: c[k] for k in COUNTERS},)
        finally:
            results.release()
    return out


#: The counters both engines keep alike (the operator adds its own stages' counts).
COUNTERS = ("rows_in", "late_rows", "rows_filtered", "rows_fired", "dropped")

#: Settings of the random-data tests below: a dozen inputs each, Spark is slow per example.
RANDOM_DATA = settings(
    max_examples=12,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)


def native_queries():
    for path in example_files():
        compiled = wql.compile_file(path)
        for q in compiled.program.queries:
            if compiled.engine[q.name] == "native":
                yield pytest.param(path, q.name, id=f"{path.stem}.{q.name}")


@pytest.mark.parametrize(("path", "name"), list(native_queries()))
def test_native_examples_equal_the_operator_engine(spark, path, name):
    text = path.read_text()

    def make(engine):
        return wql.compile(text, engine, filename=str(path), base_dir=path.parent)

    got = both_engines(spark, make)
    assert got["native"] == got["operator"]
    assert got["native"][1], "an example with no output proves nothing"


WINDOWS = [
    "TUMBLE(ts, INTERVAL '2' SECOND)",
    "TUMBLE(ts, INTERVAL '3' SECOND, INTERVAL '1' SECOND)",
    "HOP(ts, INTERVAL '1' SECOND, INTERVAL '3' SECOND)",
    "HOP(ts, INTERVAL '2' SECOND, INTERVAL '3' SECOND)",
    "SESSION(ts, INTERVAL '1500' MILLISECOND)",
    "CUMULATE(ts, INTERVAL '1' SECOND, INTERVAL '4' SECOND)",
]
AGGREGATES = "COUNT(*) AS n, SUM(v) AS total, MIN(v) AS lo, MAX(v) AS hi, AVG(v) AS mean"


@settings(
    max_examples=6,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    rows=st.lists(
        st.tuples(
            st.sampled_from(["a", "b"]),
            st.integers(-3, 9),
            st.integers(-2_000, 9_000),
        ),
        min_size=1,
        max_size=12,
    ),
    window=st.sampled_from(WINDOWS),
    keyed=st.booleans(),
    delay=st.sampled_from([1, 2]),
)
def test_generated_out_of_order_data_gives_the_same_rows(spark, rows, window, keyed, delay):
    df = spark.createDataFrame(
        [(k, float(v), EPOCH + dt.timedelta(milliseconds=t)) for k, v, t in rows],
        "k string, v double, ts timestamp",
    )
    keys = "k, " if keyed else ""
    text = (
        "CREATE SOURCE s (k STRING, v DOUBLE, ts TIMESTAMP, "
        f"WATERMARK FOR ts AS ts - INTERVAL '{delay}' SECOND);\n"
        f"SELECT {keys}window_start, window_end, window_time, pane_index, pane_timing, "
        f"{AGGREGATES} FROM s GROUP BY {keys}{window}"
    )
    try:
        wql.compile(text, "native")
    except WqlUnsupportedError:
        assume(False)  # the planner keeps this shape on the operator engine
    got = both_engines(spark, lambda engine: wql.compile(text, engine), s=df)
    assert got["native"] == got["operator"]


UPSTREAM = [
    "TUMBLE(ts, INTERVAL '2' SECOND)",
    "HOP(ts, INTERVAL '1' SECOND, INTERVAL '3' SECOND)",
    "CUMULATE(ts, INTERVAL '1' SECOND, INTERVAL '4' SECOND)",
    "SESSION(ts, INTERVAL '1500' MILLISECOND)",
]
DOWNSTREAM = [
    "TUMBLE(wt, INTERVAL '4' SECOND)",
    "HOP(wt, INTERVAL '2' SECOND, INTERVAL '6' SECOND)",
    "CUMULATE(wt, INTERVAL '2' SECOND, INTERVAL '6' SECOND)",
    "SESSION(wt, INTERVAL '2' SECOND)",
]


@settings(
    max_examples=5,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    rows=st.lists(
        st.tuples(st.sampled_from(["a", "b"]), st.integers(-3, 9), st.integers(-2_000, 9_000)),
        min_size=1,
        max_size=12,
    ),
    up=st.sampled_from(UPSTREAM),
    down=st.sampled_from(DOWNSTREAM),
    keyed=st.booleans(),
)
def test_native_pipelines_equal_the_operator_engine(spark, rows, up, down, keyed):
    # A query over a native view is native when it is eligible itself (keyed sessions
    # over a view are not, see the planner): both stages run on both engines.
    df = spark.createDataFrame(
        [(k, v, EPOCH + dt.timedelta(milliseconds=t)) for k, v, t in rows],
        "k string, v bigint, ts timestamp",
    )
    keys = "k, " if keyed else ""
    text = (
        "CREATE SOURCE s (k STRING, v BIGINT, ts TIMESTAMP, "
        "WATERMARK FOR ts AS ts - INTERVAL '1' SECOND);\n"
        f"CREATE VIEW up AS SELECT k, window_time AS wt, COUNT(*) AS n, SUM(v) AS total "
        f"FROM s GROUP BY k, {up};\n"
        f"SELECT {keys}window_start, window_end, pane_timing, SUM(n) AS n, MAX(total) AS top, "
        f"COUNT(*) AS windows FROM up GROUP BY {keys}{down}"
    )
    try:
        wql.compile(text, "native")
    except WqlUnsupportedError:
        assume(False)  # the planner keeps this chain on the operator engine
    got = {}
    for engine in ("native", "operator"):
        results = wql.compile(text, engine).apply(spark, s=df)
        try:
            r = results.query("query_1")
            assert r.engine == engine
            got[engine] = (r.df.schema.simpleString(), rows_as_text(r.df)[1])
        finally:
            results.release()
    assert got["native"] == got["operator"]


ARRIVAL_WINDOWS = [
    "TUMBLE(ts, INTERVAL '2' SECOND)",
    "TUMBLE(ts, INTERVAL '3' SECOND, INTERVAL '1' SECOND)",
    "HOP(ts, INTERVAL '1' SECOND, INTERVAL '3' SECOND)",
    "HOP(ts, INTERVAL '2' SECOND, INTERVAL '3' SECOND, INTERVAL '500' MILLISECOND)",
    "CUMULATE(ts, INTERVAL '1' SECOND, INTERVAL '4' SECOND)",
]
ARRIVAL_AGGREGATES = [
    # in one phase: floating sums in replay order, AVG, COUNT DISTINCT
    "COUNT(*) AS n, COUNT(v) AS cv, SUM(v) AS total, MIN(v) AS lo, MAX(d) AS hi, AVG(v) AS mean, "
    "SUM(d) AS dsum, COUNT(DISTINCT v) AS dv",
    # HOP (size a multiple of the slide) and CUMULATE in two phases over slices
    "COUNT(*) AS n, COUNT(v) AS cv, SUM(v) AS total, MIN(v) AS lo, MAX(k) AS hk",
]


#: Columns of the random rows: a key, a nullable value, nullable times in ms from
#: EPOCH, nullable arrivals with ties, doubles whose sum depends on the order.
KEYS = st.sampled_from(["a", "b"])
VALUES = st.one_of(st.none(), st.integers(-3, 9))
TIMES = st.one_of(st.none(), st.integers(-2_000, 9_000))
ARRIVALS = st.one_of(st.none(), st.integers(0, 6))
DOUBLES = st.sampled_from([0.1, 0.2, 1e16, -1e16, None])


@RANDOM_DATA
@given(
    rows=st.lists(
        st.tuples(KEYS, VALUES, TIMES, ARRIVALS, DOUBLES),
        min_size=1,
        max_size=16,
    ),
    window=st.sampled_from(ARRIVAL_WINDOWS),
    keyed=st.booleans(),
    delay=st.sampled_from([0, 1, 2]),
    where=st.booleans(),
    files=st.sampled_from([1, 3]),
    aggregates=st.sampled_from(ARRIVAL_AGGREGATES),
    arrival=st.booleans(),
)
def test_arrival_order_gives_the_same_rows_and_counters(
    spark, tmp_path_factory, rows, window, keyed, delay, where, files, aggregates, arrival
):
    # Replayed in arrival order, rows come behind the watermark: the native engine
    # leaves them out of the windows that are late for them, as the operator does,
    # and counts the rows late for every window (docs/native.md, "Arrival order").
    # Several files: rows of equal arrival go in input order, file by file. Without
    # arrival_order (event-time order) no row is late, on both engines.
    data = [
        (k, v, None if t is None else EPOCH + dt.timedelta(milliseconds=t), a, d)
        for k, v, t, a, d in rows
    ]
    df = spark.createDataFrame(data, "k string, v int, ts timestamp, a int, d double")
    if files > 1:
        path = str(tmp_path_factory.mktemp("arrival") / "rows")
        df.repartition(files).write.parquet(path)
        df = spark.read.parquet(path)
    keys = "k, " if keyed else ""
    options = " WITH (arrival_order = 'a')" if arrival else ""
    text = (
        "CREATE SOURCE s (k STRING, v INT, ts TIMESTAMP, a INT, d DOUBLE, "
        f"WATERMARK FOR ts AS ts - INTERVAL '{delay}' SECOND)"
        f"{options};\n"
        f"SELECT {keys}window_start, window_end, window_time, pane_index, pane_timing, "
        f"{aggregates} FROM s {'WHERE v IS NULL OR v > 0 ' if where else ''}"
        f"GROUP BY {keys}{window}"
    )
    auto = wql.compile(text)
    assert auto.engine == {"query_1": "native"}
    got = both_engines(spark, lambda engine: wql.compile(text, engine), counters=True, s=df)
    assert got["native"] == got["operator"]


PROCESSING_WINDOWS = [
    "TUMBLE(PROCTIME(), INTERVAL '2' SECOND)",
    "HOP(PROCTIME(), INTERVAL '1' SECOND, INTERVAL '3' SECOND)",
    "HOP(PROCTIME(), INTERVAL '2' SECOND, INTERVAL '3' SECOND)",
    "CUMULATE(PROCTIME(), INTERVAL '1' SECOND, INTERVAL '4' SECOND)",
]


@RANDOM_DATA
@given(
    rows=st.lists(
        # processing time, arrival, event time
        st.tuples(KEYS, VALUES, TIMES, ARRIVALS, TIMES, DOUBLES),
        min_size=1,
        max_size=16,
    ),
    window=st.sampled_from(PROCESSING_WINDOWS),
    keyed=st.booleans(),
    where=st.booleans(),
    aggregates=st.sampled_from(ARRIVAL_AGGREGATES),
    arrival=st.booleans(),
    event_time=st.booleans(),
)
def test_processing_time_column_gives_the_same_rows_and_counters(
    spark, rows, window, keyed, where, aggregates, arrival, event_time
):
    # A declared processing_time column is a clock batch replay computes: its running
    # maximum in replay order (arrival, else event time, else itself; then input
    # order). Every window fires once when the clock reaches its end; the windows the
    # final clock does not reach never fire, and their rows are counted in no firing.
    data = [
        (
            k,
            v,
            None if p is None else EPOCH + dt.timedelta(milliseconds=p),
            a,
            None if t is None else EPOCH + dt.timedelta(milliseconds=t),
            d,
        )
        for k, v, p, a, t, d in rows
    ]
    df = spark.createDataFrame(data, "k string, v int, pt timestamp, a int, ts timestamp, d double")
    keys = "k, " if keyed else ""
    options = ["processing_time = 'pt'", *(["arrival_order = 'a'"] if arrival else [])]
    watermark = ", WATERMARK FOR ts AS ts - INTERVAL '1' SECOND" if event_time else ""
    text = (
        "CREATE SOURCE s (k STRING, v INT, pt TIMESTAMP, a INT, ts TIMESTAMP, d DOUBLE"
        f"{watermark}) WITH ({', '.join(options)});\n"
        f"SELECT {keys}window_start, window_end, window_time, pane_index, pane_timing, "
        f"{aggregates} FROM s {'WHERE v IS NULL OR v > 0 ' if where else ''}"
        f"GROUP BY {keys}{window}"
    )
    assert wql.compile(text).engine == {"query_1": "native"}
    got = both_engines(spark, lambda engine: wql.compile(text, engine), counters=True, s=df)
    assert got["native"] == got["operator"]
