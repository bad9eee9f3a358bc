"""Small inputs read once: the replay and the operator in the driver equal the Spark stages.

``wql/spark/driver_run.py`` reads a small source with ONE Spark job and does
the replay and the one partition's task in the driver. Setting
``spark.wql.operator.partitions`` turns it off, so the same query over the
same DataFrame runs through the Spark stages (statistics, summary or window,
key exchange): every outcome must be the same.
"""

from __future__ import annotations

import tempfile
import uuid

import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.spark.host_helpers import SELECT, outcome, source, ts
from wql.compiler import compile_source
from wql.spark.batch import OPERATOR_PARTITIONS_CONF, run_operator

pytestmark = pytest.mark.spark

QUERIES = [
    # independent of the watermark sequence: the local clock
    f"{SELECT} FROM s GROUP BY k, TUMBLE(ts, INTERVAL '2' SECOND) "
    "ALLOWED LATENESS INTERVAL '1' SECOND LATE DATA TO late_s",
    # a session without delay, EVERY of event time: the summary or the window replay
    f"{SELECT} FROM s GROUP BY k, SESSION(ts, INTERVAL '1' SECOND) "
    "ALLOWED LATENESS INTERVAL '500' MILLISECOND LATE DATA TO late_s",
    f"{SELECT} FROM s GROUP BY k, TUMBLE(ts, INTERVAL '2' SECOND) "
    "TRIGGER EVERY INTERVAL '250' MILLISECOND OF EVENT TIME",
    # WHERE after the watermark; a key that would fail on the rows WHERE rejects
    f"{SELECT} FROM s WHERE v > 3 GROUP BY k, TUMBLE(ts, INTERVAL '2' SECOND) "
    "TRIGGER COUNT(2) EVICT COUNT(2)",
    "SELECT k, pane_index, SUM(v) AS total, COUNT(*) AS n FROM s GROUP BY k, COUNT_WINDOW(3, 2)",
]

OPTIONS = [
    "",
    " WITH (arrival_order = 'arr')",
    " WITH (arrival_order = 'arr', processing_time = 'pt')",
]


def spark_jobs(spark, action):
    """``action()`` and the number of Spark jobs it ran."""
    sc = spark.sparkContext
    # a fresh name per call: a group's job ids outlive it, and id() of a lambda is reused
    group = f"driver-run-{uuid.uuid4().hex}"
    sc.setJobGroup(group, group)
    try:
        value = action()
    finally:
        sc.setLocalProperty("spark.jobGroup.id", None)
    return value, len(sc.statusTracker().getJobIdsForGroup(group))


def parquet_frame(spark, folder, rows, files=2):
    """``rows`` written as ``files`` Parquet files and read back: a source Spark can size."""
    import pyarrow.parquet as pq

    for i in range(files):
        part = rows[i::files]
        table = pa.table(
            {
                "k": pa.array([r["k"] for r in part], pa.string()),
                "v": pa.array([r["v"] for r in part], pa.float64()),
                "ts": pa.array([r["ts"] for r in part], pa.timestamp("us")),
                "arr": pa.array([r["arr"] for r in part], pa.int64()),
                "pt": pa.array([r["pt"] for r in part], pa.int64()),
            }
        )
        pq.write_table(table, f"{folder}/part-{i}.parquet")
    return spark.read.parquet(folder)


def both(spark, text, rows):
    query = compile_source(text, engine="operator").queries[0]
    with tempfile.TemporaryDirectory() as tmp:
        df = parquet_frame(spark, tmp, rows)
        run, jobs = spark_jobs(spark, lambda: run_operator(query, df))
        here = outcome(run)
        spark.conf.set(OPERATOR_PARTITIONS_CONF, "2")
        try:
            in_spark = outcome(run_operator(query, df))
        finally:
            spark.conf.unset(OPERATOR_PARTITIONS_CONF)
    return here, in_spark, jobs


@settings(
    max_examples=12,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    data=st.lists(
        st.tuples(
            st.sampled_from(["a", "b", "c"]),
            st.integers(0, 9),
            st.one_of(st.integers(0, 16).map(lambda t: t * 250), st.none()),
            st.one_of(st.integers(0, 6), st.none()),
            st.one_of(st.integers(0, 4000), st.none()),
        ),
        min_size=1,
        max_size=14,
    ),
    query=st.sampled_from(QUERIES),
    options=st.sampled_from(OPTIONS),
    delay=st.sampled_from([0, 1]),
)
def test_a_small_input_in_the_driver_equals_the_spark_stages(spark, data, query, options, delay):
    rows = [{"k": k, "v": float(v), "ts": ts(t), "arr": a, "pt": p} for k, v, t, a, p in data]
    here, in_spark, jobs = both(spark, source(delay, options) + query, rows)
    assert here == in_spark
    assert jobs == 1  # the source read once; results and late rows are local relations


def test_where_guards_the_expressions_it_rejects(spark):
    # under ANSI mode 1 / (v - 2) fails on v = 2; WHERE v <> 2 rejects that row before
    # the key is computed, in the driver run as in the Spark stages
    text = source(1) + (
        "SELECT CAST(1 / (v - 2) AS STRING) AS k2, COUNT(*) AS n FROM s WHERE v <> 2 "
        "GROUP BY CAST(1 / (v - 2) AS STRING), TUMBLE(ts, INTERVAL '1' SECOND)"
    )
    rows = [
        {"k": "a", "v": v, "ts": ts(t), "arr": i, "pt": 0}
        for i, (v, t) in enumerate([(1.0, 0), (2.0, 100), (3.0, 200), (2.0, None)])
    ]
    ansi = spark.conf.get("spark.sql.ansi.enabled")
    spark.conf.set("spark.sql.ansi.enabled", "true")
    try:
        here, in_spark, _ = both(spark, text, rows)
    finally:
        spark.conf.set("spark.sql.ansi.enabled", ansi)
    assert here == in_spark
    assert here[3]["rows_filtered"] == 1 and here[3]["dropped"] == {"null event time": 1}


WQL_RUN = """CREATE SOURCE readings (
    device STRING, temp DOUBLE, ts TIMESTAMP, seq BIGINT,
    WATERMARK FOR ts AS ts - INTERVAL '2' SECOND
) WITH (format = 'csv', path = 'readings.csv', header = 'true', arrival_order = 'seq');
CREATE VIEW per_window AS SELECT device, window_start, COUNT(*) AS readings, MAX(temp) AS max_temp
FROM readings GROUP BY device, TUMBLE(ts, INTERVAL '10' SECOND)
ALLOWED LATENESS INTERVAL '5' SECOND LATE DATA TO late_readings;
"""


def test_a_small_query_as_wql_run_runs_it_costs_one_job_per_read_and_write(spark, tmp_path):
    """What ``wql run --output`` does with a small CSV (bench/small_files.py): the apply
    reads the rows once (the header without Spark), each output is one write, the
    counters one scan for malformed rows (rows_out from the operator's output)."""
    import wql
    from wql.spark.layout import write_output

    lines = ["device,temp,ts,seq"]
    for i, (d, s) in enumerate([("a", 1), ("b", 3), ("a", 12), ("a", 2), ("b", 25), ("a", 9)]):
        lines.append(f"{d},{i}.5,2024-05-01 12:00:{s:02d},{i}")
    (tmp_path / "readings.csv").write_text("\n".join(lines) + "\n")
    (tmp_path / "q.wql").write_text(WQL_RUN)
    results, apply_jobs = spark_jobs(spark, lambda: wql.compile_file(tmp_path / "q.wql").apply())
    try:
        _, write_jobs = spark_jobs(
            spark,
            lambda: [write_output(results[n], str(tmp_path / "out" / n), "csv") for n in results],
        )
        counters, counter_jobs = spark_jobs(spark, lambda: results.counters)
    finally:
        results.release()
    assert (apply_jobs, write_jobs, counter_jobs) == (1, 2, 1)
    written = spark.read.option("header", "true").csv(str(tmp_path / "out" / "per_window"))
    assert counters["rows_out"] == written.count() == 5  # a[0,10) fires twice
    assert (counters["rows_in"], counters["late_rows"], counters["malformed"]) == (6, 1, 0)
