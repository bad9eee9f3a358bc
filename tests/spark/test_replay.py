"""Batch replay: replay order, per-row watermark, processing clock, dropped rows."""

from __future__ import annotations

import datetime as dt
from contextlib import contextmanager

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from wql.errors import WqlSemanticError, WqlUnsupportedError
from wql.spark import replay as R

pytestmark = pytest.mark.spark

EPOCH = dt.datetime(1970, 1, 1)


def ts(ms: int) -> dt.datetime:
    return EPOCH + dt.timedelta(milliseconds=ms)


def reference(rows, delay, order_index=None):
    """Replay by hand: (input index, ts ms) sorted by (order key, input index)."""
    kept = [(i, t) for i, t in enumerate(rows) if t is not None]
    key = (lambda r: (order_index[r[0]], r[0])) if order_index else (lambda r: (r[1], r[0]))
    out, seen = [], None
    for i, t in sorted(kept, key=key):
        wm = R.MIN_TIME if seen is None else seen - delay - 1
        out.append((i, t, wm))
        seen = t if seen is None else max(seen, t)
    return out


def run(spark, rows, delay, strategy, arrival=None):
    data = [
        (i, None if t is None else ts(t), None if arrival is None else arrival[i])
        for i, t in enumerate(rows)
    ]
    df = spark.createDataFrame(data, "i int, ts timestamp, arr bigint")
    spec = R.ReplaySpec("ts", delay, arrival_order="arr" if arrival else None)
    replayed = R.replay(df, spec, strategy=strategy)
    try:
        got = [(r["i"], r[R.TS], r[R.WM]) for r in replayed.df.orderBy(R.SEQ).collect()]
        return got, replayed.rows_in, replayed.dropped_counts, replayed.dropped.collect()
    finally:
        replayed.release()


@pytest.mark.parametrize("strategy", [R.STRATEGY_BUCKETED, R.STRATEGY_WINDOW])
def test_event_time_order_ties_nulls_and_negative_times(spark, strategy):
    rows = [5000, None, 1000, 5000, -1, 3000, 1000]
    got, rows_in, dropped, dropped_rows = run(spark, rows, 1000, strategy)
    assert got == reference(rows, 1000)
    # ties keep input order, the first row sees MIN_TIME, the tie's second row sees its twin
    assert [i for i, _, _ in got] == [4, 2, 6, 5, 0, 3]
    assert got[0][2] == R.MIN_TIME
    assert got[-1] == (3, 5000, 5000 - 1000 - 1)
    assert rows_in == 7
    assert dropped == {R.REASON_NULL_EVENT_TIME: 1}
    assert [(r["i"], r["reason"]) for r in dropped_rows] == [(1, R.REASON_NULL_EVENT_TIME)]


def test_arrival_order_column_orders_the_replay(spark):
    rows = [100, 50, 300, 200]
    arrival = [3, 1, 0, 2]
    for strategy in (R.STRATEGY_BUCKETED, R.STRATEGY_WINDOW):
        got, *_ = run(spark, rows, 10, strategy, arrival)
        assert got == reference(rows, 10, arrival)
    # out-of-order: the row at 50 arrives after 300 and sees 300 - 10 - 1
    assert (1, 50, 289) in got


def test_submillisecond_times_are_floored(spark):
    df = spark.createDataFrame(
        [
            (dt.datetime(1969, 12, 31, 23, 59, 59, 999_500),),
            (dt.datetime(1970, 1, 1, 0, 0, 0, 1_999),),
        ],
        "ts timestamp",
    )
    replayed = R.replay(df, R.ReplaySpec("ts", 0))
    assert [r[R.TS] for r in replayed.df.orderBy(R.SEQ).collect()] == [-1, 1]
    replayed.release()


def test_unparseable_text_event_time_is_counted_not_lost(spark):
    df = spark.createDataFrame([("2024-01-01 00:00:01",), ("not a time",), (None,)], "ts string")
    replayed = R.replay(df, R.ReplaySpec("ts", 0))
    assert replayed.df.count() == 1
    assert replayed.dropped_counts == {R.REASON_NULL_EVENT_TIME: 2}
    assert replayed.rows_replayed == 1
    replayed.release()


def test_processing_time_clock_is_a_running_maximum(spark):
    data = [(ts(10), 500), (ts(20), 300), (ts(30), 900), (ts(40), None)]
    df = spark.createDataFrame(data, "ts timestamp, pt bigint")
    replayed = R.replay(df, R.ReplaySpec("ts", 0, processing_time="pt"))
    got = [r[R.PT] for r in replayed.df.orderBy(R.SEQ).collect()]
    assert got == [500, 500, 900]
    assert replayed.dropped_counts == {R.REASON_NULL_PROCESSING_TIME: 1}
    replayed.release()


def test_bad_columns_are_semantic_errors(spark):
    df = spark.createDataFrame([(1,)], "n int")
    with pytest.raises(WqlSemanticError, match="not in the source"):
        R.replay(df, R.ReplaySpec("ts", 0))
    with pytest.raises(WqlSemanticError, match="must be a TIMESTAMP"):
        R.replay(df, R.ReplaySpec("n", 0))
    reserved = spark.createDataFrame([(1,)], "__wql_ts int")
    with pytest.raises(WqlUnsupportedError, match="reserved"):
        R.replay(reserved, R.ReplaySpec(None, 0))


@contextmanager
def tiny_splits(spark, tmp_path, lines_a, lines_b, schema):
    """Two CSV files read in 256-byte splits: each file over several partitions."""
    (tmp_path / "1.csv").write_text("\n".join(lines_a) + "\n")
    (tmp_path / "2.csv").write_text("\n".join(lines_b) + "\n")
    spark.conf.set("spark.sql.files.maxPartitionBytes", "256")
    try:
        df = spark.read.csv(str(tmp_path), schema=schema)
        assert df.rdd.getNumPartitions() > 4
        yield df
    finally:
        spark.conf.unset("spark.sql.files.maxPartitionBytes")


def test_file_input_order_survives_split_packing(spark, tmp_path):
    # two files, tiny splits: Spark packs splits by size, not by file, so the
    # partition id alone would interleave them; (path, id) keeps file order
    lines_a = [f"a,{i}" for i in range(300)]
    lines_b = [f"b,{i}" for i in range(120)]
    with tiny_splits(spark, tmp_path, lines_a, lines_b, "f string, n int") as df:
        df = df.withColumn("ts", R.F.lit("1970-01-01 00:00:00").cast("timestamp"))
        replayed = R.replay(df, R.ReplaySpec("ts", 0))
        got = [(r["f"], r["n"]) for r in replayed.df.orderBy(R.SEQ).collect()]
        replayed.release()
    assert got == [("a", i) for i in range(300)] + [("b", i) for i in range(120)]


@settings(
    max_examples=10, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    rows=st.lists(st.one_of(st.none(), st.integers(-5_000, 5_000)), min_size=1, max_size=25),
    delay=st.integers(0, 2_000),
    partitions=st.sampled_from(["1", "3", "7"]),
    batch=st.sampled_from(["1", "4", "10000"]),
    strategy=st.just(R.STRATEGY_BUCKETED),
)
def test_scalable_replays_match_reference_whatever_the_layout(
    spark, rows, delay, partitions, batch, strategy
):
    before = spark.conf.get("spark.sql.shuffle.partitions")
    spark.conf.set("spark.sql.shuffle.partitions", partitions)
    spark.conf.set("spark.sql.execution.arrow.maxRecordsPerBatch", batch)
    try:
        got, rows_in, dropped, _ = run(spark, rows, delay, strategy)
    finally:
        spark.conf.set("spark.sql.shuffle.partitions", before)
        spark.conf.unset("spark.sql.execution.arrow.maxRecordsPerBatch")
    assert got == reference(rows, delay)
    assert rows_in == len(rows)
    nulls = sum(t is None for t in rows)
    assert dropped == ({R.REASON_NULL_EVENT_TIME: nulls} if nulls else {})


@settings(
    max_examples=10, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    rows=st.lists(st.one_of(st.none(), st.integers(-3, 3).map(lambda t: t * 500)), max_size=25),
    delay=st.integers(0, 1_500),
    partitions=st.sampled_from([1, 3]),
)
def test_summary_watermarks_match_reference(spark, rows, delay, partitions):
    # every row's watermark from the event-time summary, whatever order the rows are read in
    data = [(i, None if t is None else ts(t)) for i, t in enumerate(rows)]
    df = spark.createDataFrame(
        spark.sparkContext.parallelize(data, partitions), "i int, ts timestamp"
    )
    replayed = R.replay(df, R.ReplaySpec("ts", delay), strategy=R.STRATEGY_SUMMARY, in_task=True)
    assert replayed.summary is not None and R.SEQ not in replayed.df.columns
    got = replayed.df.select("i", R.TS, R.INPUT_ID).toArrow()
    wm = replayed.summary.watermarks(
        got.column(R.TS).to_numpy().astype(np.int64), got.column(R.INPUT_ID).to_numpy()
    )
    # input order: the frame's row ids (one input "file", several partitions)
    ids, index = got.column(R.INPUT_ID).to_pylist(), got.column("i").to_pylist()
    order = [i for _, i in sorted(zip(ids, index, strict=True))]
    dropped = [i for i, t in enumerate(rows) if t is None]
    expected = reference([rows[i] for i in order] + [None] * len(dropped), delay)
    assert sorted((order[j], t, w) for j, t, w in expected) == sorted(
        zip(index, got.column(R.TS).to_pylist(), wm.tolist(), strict=True)
    )
    assert replayed.rows_in == len(rows)
    nulls = len(dropped)
    assert replayed.dropped_counts == ({R.REASON_NULL_EVENT_TIME: nulls} if nulls else {})
    assert replayed.max_ts == max((t for t in rows if t is not None), default=None)


def test_summary_replay_needs_a_stable_input_order(spark):
    df = spark.createDataFrame([(1, ts(0))], "i int, ts timestamp")
    assert R.stable_input_order(df)
    # a shuffle's output arrives in fetch order: two jobs may number it differently
    assert not R.stable_input_order(df.repartition(3))
    with pytest.raises(ValueError, match="input order"):
        R.replay(
            df.repartition(3), R.ReplaySpec("ts", 0), strategy=R.STRATEGY_SUMMARY, in_task=True
        )
    auto = R.replay(df.repartition(3), R.ReplaySpec("ts", 0), in_task=True)
    assert auto.summary is None and R.SEQ in auto.df.columns


def test_summary_replay_reads_file_order_from_id_runs(spark, tmp_path):
    # tiny splits: each file's rows are spread over several partitions; every time
    # has ties in both files, and the first row of a time is the first file's
    lines_a = [f"a,{i},{i % 3 * 1000}" for i in range(300)]
    lines_b = [f"b,{i},{i % 4 * 1000}" for i in range(120)]
    with tiny_splits(spark, tmp_path, lines_a, lines_b, "f string, n int, t long") as df:
        df = df.withColumn("ts", R.F.timestamp_millis("t"))
        spec = R.ReplaySpec("ts", 500)
        replayed = R.replay(df, spec, strategy=R.STRATEGY_SUMMARY, in_task=True)
        assert replayed.summary is not None and replayed.summary.order[1] == R.INPUT_RANK
        got = replayed.df.select("f", "n", R.TS, R.INPUT_ID).toArrow()
    wm = replayed.summary.watermarks(
        got.column(R.TS).to_numpy().astype(np.int64), got.column(R.INPUT_ID).to_numpy()
    )
    rows = zip(got.column("f").to_pylist(), got.column("n").to_pylist(), strict=True)
    mine = dict(zip(rows, wm.tolist(), strict=True))
    names = [("a", i) for i in range(300)] + [("b", i) for i in range(120)]
    times = [i % 3 * 1000 for i in range(300)] + [i % 4 * 1000 for i in range(120)]
    expected = {names[i]: w for i, _, w in reference(times, 500)}
    assert mine == expected


def window_watermarks(df, spec):
    """Every replayed row's ``(i, event time, watermark)`` by the window strategy."""
    replayed = R.replay(df, spec, strategy=R.STRATEGY_WINDOW)
    try:
        return sorted((r["i"], r[R.TS], r[R.WM]) for r in replayed.df.collect()), replayed
    finally:
        replayed.release()


def arrival_summary_watermarks(df, spec):
    """Every replayed row's ``(i, event time, watermark)`` from the arrival summary."""
    replayed = R.replay(df, spec, strategy=R.STRATEGY_SUMMARY, in_task=True)
    assert isinstance(replayed.summary, R.ArrivalSummary) and R.SEQ not in replayed.df.columns
    got = replayed.df.select("i", R.TS, R.ARRIVAL, R.INPUT_ID).toArrow()
    wm = replayed.summary.watermarks(
        got.column(R.ARRIVAL).to_numpy().astype(np.int64), got.column(R.INPUT_ID).to_numpy()
    )
    rows = zip(got.column("i").to_pylist(), got.column(R.TS).to_pylist(), wm.tolist(), strict=True)
    return sorted(rows), replayed


@settings(
    max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    rows=st.lists(
        st.tuples(
            st.one_of(st.none(), st.integers(-3, 3).map(lambda t: t * 500)),
            # few arrival values: ties broken by input order
            st.one_of(st.none(), st.integers(0, 4)),
        ),
        max_size=25,
    ),
    delay=st.integers(0, 1_500),
    partitions=st.sampled_from([1, 3]),
)
def test_arrival_summary_watermarks_match_the_window_replay(spark, rows, delay, partitions):
    # the watermark is the maximum event time before the row in (arrival, input order)
    data = [(i, None if t is None else ts(t), a) for i, (t, a) in enumerate(rows)]
    df = spark.createDataFrame(
        spark.sparkContext.parallelize(data, partitions), "i int, ts timestamp, arr bigint"
    )
    spec = R.ReplaySpec("ts", delay, arrival_order="arr")
    got, summary = arrival_summary_watermarks(df, spec)
    expected, window = window_watermarks(df, spec)
    assert got == expected
    assert summary.rows_in == window.rows_in == len(rows)
    assert summary.dropped_counts == window.dropped_counts
    assert summary.max_ts == window.max_ts


def test_arrival_summary_records_and_ties():
    # positions are the ids themselves (one run); records: the rows above every earlier row
    arrival = np.array([0, 0, 1, 1, 1, 2, 3], dtype=np.int64)
    times = np.array([500, 500, 200, 900, 900, 700, 1000], dtype=np.int64)
    ids = np.arange(7, dtype=np.int64)
    narrow = pa.table({R.ARRIVAL: arrival, R.TS: times, R.INPUT_ID: ids})
    summary, max_ts = R._arrival_summary(narrow, [((0, 6), 0)], 0, (R.ARRIVAL, R.INPUT_ID))
    assert summary is not None and max_ts == 1000
    assert summary.times.tolist() == [500, 900, 1000]  # equal times are not records
    # read in any order: each row sees the maximum before it, a record the previous one's
    back = np.arange(6, -1, -1)
    got = summary.watermarks(arrival[back], ids[back])[::-1]
    assert got.tolist() == [R.MIN_TIME, 499, 499, 499, 899, 899, 899]
    # a row between the records (arrival 2 is no record's): the last record arrived earlier
    assert summary.watermarks(np.array([2]), np.array([5])).tolist() == [899]


def test_arrival_summary_reads_file_order_from_id_runs(spark, tmp_path):
    # two files in tiny splits; arrival ties across and within files, times out of order
    lines_a = [f"a,{i},{i % 5},{(i * 7) % 11 * 100}" for i in range(300)]
    lines_b = [f"b,{i},{i % 3},{(i * 5) % 13 * 100}" for i in range(120)]
    schema = "f string, n int, arr int, t long"
    with tiny_splits(spark, tmp_path, lines_a, lines_b, schema) as df:
        df = df.withColumn("ts", R.F.timestamp_millis("t")).withColumn(
            "i", R.F.when(R.F.col("f") == "a", R.F.col("n")).otherwise(R.F.col("n") + 1000)
        )
        spec = R.ReplaySpec("ts", 250, arrival_order="arr")
        got, summary = arrival_summary_watermarks(df, spec)
        assert summary.summary is not None and summary.summary.order[1] == R.INPUT_RANK
        expected, _ = window_watermarks(df, spec)
    assert got == expected


def test_arrival_summary_needs_integer_or_timestamp_arrivals(spark):
    df = spark.createDataFrame([(1, ts(0), 0.5)], "i int, ts timestamp, arr double")
    spec = R.ReplaySpec("ts", 0, arrival_order="arr")
    with pytest.raises(ValueError, match="arrival order"):
        R.replay(df, spec, strategy=R.STRATEGY_SUMMARY, in_task=True)
    auto = R.replay(df, spec, in_task=True)
    assert auto.summary is None and R.SEQ in auto.df.columns
    auto.release()
    stamped = spark.createDataFrame([(1, ts(0), ts(5))], "i int, ts timestamp, arr timestamp")
    replayed = R.replay(stamped, spec, in_task=True)
    assert isinstance(replayed.summary, R.ArrivalSummary)
