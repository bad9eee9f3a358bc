"""Emit semantics through Spark: the batch host and the streaming processor.

Small inputs with expected rows derived by hand (the runtime's own vectors
are in ``tests/runtime/test_emit.py``). The streaming side drives
:class:`wql.spark.streaming.WindowProcessor` with the micro-batch driver of
``processor_helpers.py`` (Spark's rules, no streaming engine).
"""

from __future__ import annotations

import datetime as dt

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import wql
from tests.spark.processor_helpers import Driver, rel_ms, rows_st, split_batches

pytestmark = pytest.mark.spark

SCHEMA = "k string, v bigint, ts timestamp"
EPOCH = dt.datetime(1970, 1, 1)


def at(seconds: float) -> dt.datetime:
    return EPOCH + dt.timedelta(seconds=seconds)


#: Replayed in event-time order: a@1 a@2 b@3 a@5 a@12 a@21 (seconds).
ROWS = [("a", 1, 1), ("a", 2, 2), ("b", 1, 3), ("a", 4, 5), ("a", 1, 12), ("a", 1, 21)]
SOURCE = (
    "CREATE SOURCE s (k STRING, v BIGINT, ts TIMESTAMP, "
    "WATERMARK FOR ts AS ts - INTERVAL '0' SECOND);\n"
)


def run(spark, text: str, rows=ROWS, engine: str = "auto") -> dict[str, list[tuple]]:
    df = spark.createDataFrame([(k, v, at(t)) for k, v, t in rows], SCHEMA)
    results = wql.compile(text, engine).apply(spark, s=df)
    try:
        return {r.name: sorted(tuple(row) for row in r.df.collect()) for r in results.queries}
    finally:
        results.release()


def recorded(d: Driver) -> list[dict]:
    """The result records (``R``) the processor hands ``d``, extended fields included."""
    records: list[dict] = []
    collect = d._collect

    def keep(frames):
        for f in frames:
            records.extend(r for r in f.to_dict("records") if r["__wql_kind"] == "R")
            collect([f])

    d._collect = keep
    return records


def test_is_first_and_is_last_in_batch(spark):
    text = SOURCE + (
        "CREATE VIEW early AS SELECT k, window_start, pane_index, pane_timing, is_first, "
        "is_last, SUM(v) AS total FROM s GROUP BY k, TUMBLE(ts, INTERVAL '10' SECOND) "
        "TRIGGER WATERMARK WITH EARLY COUNT(2);\n"
        "CREATE VIEW plain AS SELECT k, window_start, is_first, is_last, COUNT(*) AS n "
        "FROM s GROUP BY k, TUMBLE(ts, INTERVAL '10' SECOND)"
    )
    assert wql.compile(text).engine == {"early": "operator", "plain": "native"}
    got = run(spark, text)
    # a[0,10): a@1, a@2 fire EARLY (COUNT(2)); a@21's watermark 20.999 passes 9.999:
    # ON_TIME with a@5 too, the cleanup timer's pane (lateness 0): the last.
    assert got["early"] == [
        ("a", at(0), 0, "EARLY", True, False, 3),
        ("a", at(0), 1, "ON_TIME", False, True, 7),
        ("a", at(10), 0, "ON_TIME", True, True, 1),
        ("a", at(20), 0, "ON_TIME", True, True, 1),
        ("b", at(0), 0, "ON_TIME", True, True, 1),
    ]
    plain = [("a", at(0), True, True, 3), ("a", at(10), True, True, 1)]
    plain += [("a", at(20), True, True, 1), ("b", at(0), True, True, 1)]
    assert got["plain"] == plain
    # the native engine's constants are the operator's marks
    assert run(spark, text, engine="operator")["plain"] == plain


def test_is_last_through_the_streaming_processor():
    text = SOURCE.replace("STRING, v BIGINT", "STRING, v DOUBLE") + (
        "SELECT k, is_last, SUM(v) AS total FROM s GROUP BY k, TUMBLE(ts, INTERVAL '2' SECOND) "
        "TRIGGER WATERMARK WITH EARLY COUNT(1)"
    )
    d = Driver(text)
    records = recorded(d)
    d.batch([("a", 1, 500)])  # (times are ms after the driver's BASE)
    d.batch([("a", 1, 2500)])  # watermark 499: nothing due
    d.batch([("a", 1, 4100)])  # watermark 2499 fires [0,2000) ON_TIME first
    d.end()
    marks = [(rel_ms(r["__wql_we"]), r["__wql_pane"], r["__wql_last"]) for r in records]
    assert {r["__wql_op"] for r in records} == {"+I"}
    # every row fires an EARLY pane; each ON_TIME pane is its window's cleanup: the last
    assert marks == [
        (2000, 0, False),
        (4000, 0, False),
        (2000, 1, True),
        (6000, 0, False),
        (4000, 1, True),
        (6000, 1, True),
    ]


def test_accumulation_per_pane_timing_in_batch(spark):
    # arrival order: k's rows, then z@2.0 s (the watermark 1.999 s passes k's
    # window), then two late rows of k within the 1 s lateness
    text = (
        "CREATE SOURCE s (k STRING, v BIGINT, ts TIMESTAMP, seq BIGINT, "
        "WATERMARK FOR ts AS ts - INTERVAL '0' SECOND) WITH (arrival_order = 'seq');\n"
        "SELECT k, pane_index, pane_timing, SUM(v) AS total FROM s "
        "GROUP BY k, TUMBLE(ts, INTERVAL '2' SECOND) ALLOWED LATENESS INTERVAL '1' SECOND "
        "TRIGGER WATERMARK WITH EARLY COUNT(2) EMIT ON_TIME DISCARDING, LATE DISCARDING"
    )
    rows = [("k", 1, 0.1), ("k", 2, 0.2), ("k", 4, 0.3), ("z", 1, 2.0)]
    rows += [("k", 8, 0.4), ("k", 16, 0.5)]
    df = spark.createDataFrame(
        [(k, v, at(t), i) for i, (k, v, t) in enumerate(rows)], SCHEMA + ", seq bigint"
    )
    results = wql.compile(text).apply(spark, s=df)
    try:
        got = sorted(tuple(r) for r in results.df.collect())
    finally:
        results.release()
    # EARLY accumulates (3 rows, 2 fired); ON_TIME fires all 3 and discards;
    # each LATE pane holds its late row only
    assert got == [
        ("k", 0, "EARLY", 3),
        ("k", 1, "ON_TIME", 7),
        ("k", 2, "LATE", 8),
        ("k", 3, "LATE", 16),
        ("z", 0, "ON_TIME", 1),
    ]


def test_accumulation_through_the_streaming_processor():
    text = SOURCE.replace("STRING, v BIGINT", "STRING, v DOUBLE") + (
        "SELECT k, SUM(v) AS total FROM s GROUP BY k, TUMBLE(ts, INTERVAL '2' SECOND) "
        "ALLOWED LATENESS INTERVAL '1' SECOND TRIGGER WATERMARK WITH EARLY COUNT(2) "
        "EMIT ON_TIME DISCARDING, LATE DISCARDING"
    )
    d = Driver(text)
    d.batch([("k", 1, 100), ("k", 2, 200), ("k", 4, 300)])
    d.batch([("z", 1, 2000)])  # watermark 299
    d.batch([("k", 8, 400)])  # watermark 1999: [0,2000) fires ON_TIME first
    d.batch([("k", 16, 500)])
    d.end()
    assert d.results == [
        ("k", 0, 2000, 0, "EARLY", 3.0),
        ("k", 0, 2000, 1, "ON_TIME", 7.0),
        ("k", 0, 2000, 2, "LATE", 8.0),
        ("k", 0, 2000, 3, "LATE", 16.0),
        ("z", 2000, 4000, 0, "ON_TIME", 1.0),
    ]


ON_UPDATE_ROWS = [("a", 1, 0.5), ("a", 1, 0.7), ("z", 1, 2.1), ("z", 1, 4.1), ("a", 1, 4.5)]
ON_UPDATE_ROWS += [("z", 1, 11)]


def test_every_on_update_in_batch(spark):
    text = SOURCE + (
        "SELECT k, window_start, pane_index, pane_timing, COUNT(*) AS n FROM s "
        "GROUP BY k, TUMBLE(ts, INTERVAL '10' SECOND) TRIGGER EVERY INTERVAL '2' SECOND ON UPDATE"
    )
    # a@0.5 arms a's window at 2 s; z@2.1 arms z's at 4 s; the watermark 2.099
    # (before z@4.1) fires a's; 4.099 (before a@4.5) fires z's, and a@4.5 arms
    # 6 s, which fires at end of input; z@11 opens [10,20), armed at 12 s. No
    # window fires again without a new row (EVERY would fire a's at 4, 6, 8, 9.999).
    assert run(spark, text, ON_UPDATE_ROWS)["query_1"] == [
        ("a", at(0), 0, "EARLY", 2),
        ("a", at(0), 1, "EARLY", 3),
        ("z", at(0), 0, "EARLY", 2),
        ("z", at(10), 0, "EARLY", 1),
    ]


def test_after_fires_a_delay_after_each_panes_first_row_in_batch(spark):
    text = SOURCE + (
        "SELECT k, window_start, pane_index, pane_timing, COUNT(*) AS n FROM s "
        "GROUP BY k, TUMBLE(ts, INTERVAL '10' SECOND) TRIGGER AFTER INTERVAL '2' SECOND"
    )
    rows = [("a", 1, 0.5), ("z", 1, 2.1), ("a", 1, 2.2), ("z", 1, 3.0), ("z", 1, 12)]
    # a@0.5 arms a's window at 2.5 s; z@2.1 arms z's at 4.1 s; a@2.2 (watermark 2.099)
    # joins a's pane; z@12 (watermark 2.999) fires a's pane with both rows. The end of
    # input fires z's at 4.1 s and z@12's at 14 s. (EVERY 2 s ON UPDATE fires a@0.5
    # alone at the boundary 2 s, then a@2.2 at 4 s: two panes.)
    assert run(spark, text, rows)["query_1"] == [
        ("a", at(0), 0, "EARLY", 2),
        ("z", at(0), 0, "EARLY", 2),
        ("z", at(10), 0, "EARLY", 1),
    ]
    aligned = text.replace("AFTER INTERVAL '2' SECOND", "EVERY INTERVAL '2' SECOND ON UPDATE")
    assert [r for r in run(spark, aligned, rows)["query_1"] if r[0] == "a"] == [
        ("a", at(0), 0, "EARLY", 1),
        ("a", at(0), 1, "EARLY", 2),
    ]


def test_every_on_update_through_the_streaming_processor():
    text = SOURCE.replace("STRING, v BIGINT", "STRING, v DOUBLE") + (
        "SELECT k, SUM(v) AS total FROM s GROUP BY k, TUMBLE(ts, INTERVAL '10' SECOND) "
        "TRIGGER EVERY INTERVAL '2' SECOND ON UPDATE"
    )
    d = Driver(text)
    d.batch([("a", 1, 500), ("a", 1, 700)])  # a armed at 2000
    d.batch([("z", 1, 2100)])  # watermark 699; z armed at 4000
    d.batch([("z", 1, 4100)])  # watermark 2099: a fires
    d.batch([("a", 1, 4500)])  # watermark 4099: z fires; a armed at 6000
    d.end()  # a fires at 6000; the cleanup timers fire nothing
    assert d.results == [
        ("a", 0, 10_000, 0, "EARLY", 2.0),
        ("z", 0, 10_000, 0, "EARLY", 2.0),
        ("a", 0, 10_000, 1, "EARLY", 3.0),
    ]


def test_after_through_the_streaming_processor():
    text = SOURCE.replace("STRING, v BIGINT", "STRING, v DOUBLE") + (
        "SELECT k, SUM(v) AS total FROM s GROUP BY k, TUMBLE(ts, INTERVAL '10' SECOND) "
        "TRIGGER AFTER INTERVAL '2' SECOND"
    )
    d = Driver(text)
    d.batch([("a", 1, 500)])  # a armed at 2500
    d.batch([("z", 1, 2100), ("a", 1, 2200)])  # watermark 499; z armed at 4100
    d.batch([("z", 1, 3000)])  # watermark 2199: nothing due
    d.batch([("z", 1, 12_000)])  # watermark 2999: a fires both rows; [10,20) armed at 14000
    d.end()  # z fires at 4100, then z's [10, 20) at 14000
    assert d.results == [
        ("a", 0, 10_000, 0, "EARLY", 2.0),
        ("z", 0, 10_000, 0, "EARLY", 2.0),
        ("z", 10_000, 20_000, 0, "EARLY", 1.0),
    ]


# k@0 and k@5 are two sessions; k@2.5 comes at the watermark 4.999 s, which
# fires [0,3) on time, and bridges them; z@8.001 moves the watermark to 8 s;
# k@7.5 is behind it, its session is not: the on-time pane of [0,8) first, then
# the merge into [0,10.5). Replayed in arrival order (seq); lateness 3 s keeps
# the sessions that fired mergeable.
CHANGELOG_ROWS = [("k", 1, 0), ("k", 2, 5), ("k", 4, 2.5), ("z", 1, 8.001), ("k", 8, 7.5)]
CHANGELOG_TEXT = (
    "CREATE SOURCE s (k STRING, v BIGINT, ts TIMESTAMP, seq BIGINT, "
    "WATERMARK FOR ts AS ts - INTERVAL '0' SECOND) WITH (arrival_order = 'seq');\n"
    "SELECT k, window_start, window_end, pane_index, pane_timing, SUM(v) AS total FROM s "
    "GROUP BY k, SESSION(ts, INTERVAL '3' SECOND) ALLOWED LATENESS INTERVAL '3' SECOND "
    "TRIGGER WATERMARK WITH EARLY COUNT(1) EMIT CHANGELOG"
)
#: (op, key, start s, end s, pane_index, pane_timing, total) in emission order, by hand
CHANGELOG_EXPECTED = [
    ("+I", "k", 0, 3, 0, "EARLY", 1),
    ("+I", "k", 5, 8, 0, "EARLY", 2),
    ("-U", "k", 0, 3, 0, "EARLY", 1),
    ("+U", "k", 0, 3, 1, "ON_TIME", 1),
    ("-D", "k", 0, 3, 1, "ON_TIME", 1),
    ("-D", "k", 5, 8, 0, "EARLY", 2),
    ("+I", "k", 0, 8, 2, "EARLY", 7),
    ("+I", "z", 8.001, 11.001, 0, "EARLY", 1),
    ("-U", "k", 0, 8, 2, "EARLY", 7),
    ("+U", "k", 0, 8, 3, "ON_TIME", 7),
    ("-D", "k", 0, 8, 3, "ON_TIME", 7),
    ("+I", "k", 0, 10.5, 4, "EARLY", 15),
    ("-U", "k", 0, 10.5, 4, "EARLY", 15),
    ("+U", "k", 0, 10.5, 5, "ON_TIME", 15),
    ("-U", "z", 8.001, 11.001, 0, "EARLY", 1),
    ("+U", "z", 8.001, 11.001, 1, "ON_TIME", 1),
]


def fold_changelog(df):
    """The latest row of every window: a window's last change, unless it is a retraction.

    A window's rows are ordered by pane_index, a row before its retraction
    (docs/language.md, "Changelog output") -- Spark gives no row order.
    """
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    retraction = F.col("op").isin("-U", "-D").cast("int")
    w = Window.partitionBy("k", "window_start", "window_end").orderBy(
        F.col("pane_index").desc(), retraction.desc()
    )
    last = df.withColumn("_n", F.row_number().over(w)).where("_n = 1")
    return last.where(~F.col("op").isin("-U", "-D")).drop("_n", "op")


def test_changelog_in_batch_and_its_fold(spark):
    df = spark.createDataFrame(
        [(k, v, at(t), i) for i, (k, v, t) in enumerate(CHANGELOG_ROWS)], SCHEMA + ", seq bigint"
    )
    results = wql.compile(CHANGELOG_TEXT).apply(spark, s=df)
    try:
        got = sorted(tuple(r) for r in results.df.collect())
        folded = sorted(tuple(r) for r in fold_changelog(results.df).collect())
    finally:
        results.release()
    expected = [(op, k, at(s), at(e), p, t, v) for op, k, s, e, p, t, v in CHANGELOG_EXPECTED]
    assert got == sorted(expected)
    assert folded == [
        ("k", at(0), at(10.5), 5, "ON_TIME", 15),
        ("z", at(8.001), at(11.001), 1, "ON_TIME", 1),
    ]


def test_changelog_through_the_streaming_processor():
    text = CHANGELOG_TEXT.replace("v BIGINT", "v DOUBLE").replace(
        " WITH (arrival_order = 'seq')", ""
    )
    d = Driver(text)
    records = recorded(d)
    for k, v, t in CHANGELOG_ROWS:  # one micro-batch per row: batch replay's watermarks
        d.batch([(k, v, round(t * 1000))])
    d.end()
    got = [(rec["__wql_op"], *r) for rec, r in zip(records, d.results, strict=True)]
    assert got == [
        (op, k, round(s * 1000), round(e * 1000), p, t, float(v))
        for op, k, s, e, p, t, v in CHANGELOG_EXPECTED
    ]


@settings(max_examples=25, deadline=None)
@given(rows=rows_st, cuts=st.lists(st.integers(0, 40), max_size=6))
def test_changelog_through_the_processor_folds_to_the_latest_panes(rows, cuts):
    """Random rows cut into micro-batches: the processor's changelog (per-key state,
    snapshots, Spark timers) folds, window by window, to the latest pane of every
    window a merge did not absorb (the panes: the same stream without CHANGELOG)."""
    text = SOURCE.replace("STRING, v BIGINT", "STRING, v DOUBLE") + (
        "SELECT k, window_start, window_end, pane_index, SUM(v) AS total FROM s "
        "GROUP BY k, SESSION(ts, INTERVAL '3' SECOND) ALLOWED LATENESS INTERVAL '2' SECOND "
        "TRIGGER WATERMARK WITH EARLY COUNT(2) EMIT CHANGELOG"
    )
    batches = split_batches(rows, cuts)
    d = Driver(text)
    records = recorded(d)
    for batch in batches:
        d.batch(batch)
    d.end()
    table: dict = {}
    for rec, (k, start, end, *rest) in zip(records, d.results, strict=True):
        op = rec["__wql_op"]
        window = (k, start, end)
        if op in ("+I", "+U"):
            assert window not in table
            table[window] = rest
        else:
            assert table.pop(window) == rest  # exactly the row it retracts
    # the panes of the same stream without CHANGELOG, their latest per window
    panes = Driver(text.replace(" EMIT CHANGELOG", ""))
    for batch in batches:
        panes.batch(batch)
    panes.end()
    latest = {(k, s, e): rest for k, s, e, *rest in panes.results}
    assert all(latest[w] == row for w, row in table.items())
    # every window without a row in the table was merged into one that has a row
    for k, s, e in set(latest) - set(table):
        assert any(k2 == k and s2 <= s and e <= e2 for k2, s2, e2 in table), (k, s, e)


# --------------------------------------------------------------------------- idle sources

IDLE_SOURCE = (
    "CREATE SOURCE s (k STRING, v BIGINT, ts TIMESTAMP, pt BIGINT, "
    "WATERMARK FOR ts AS ts - INTERVAL '0' SECOND IDLE AFTER INTERVAL '10' SECOND) "
    "WITH (processing_time = 'pt', arrival_order = 'pt');\n"
)
#: (key, event time s, processing time s): three rows, 40 s of quiet, two more
IDLE_ROWS = [("a", 10, 0), ("a", 20, 1), ("b", 30, 2), ("c", 40, 42), ("d", 90, 43)]


def idle_frame(spark):
    return spark.createDataFrame(
        [(k, 1, at(t), p * 1000) for k, t, p in IDLE_ROWS], SCHEMA + ", pt bigint"
    )


def test_idle_source_watermarks_in_batch_replay(spark):
    from wql.spark import replay as R

    spec = R.ReplaySpec(event_time="ts", processing_time="pt", arrival_order="pt", idle_ms=10_000)
    replayed = R.replay(idle_frame(spark), spec)
    try:
        wms = [r[R.WM] for r in replayed.df.orderBy(R.SEQ).collect()]
    finally:
        replayed.release()
    # c comes 40 s after b: the watermark advanced with processing time meanwhile,
    # max(ts before) + 40 s - 1 ms; it never goes back (d's own would be 39.999 s)
    assert wms == [R.MIN_TIME, 9_999, 19_999, 69_999, 69_999]
    # without IDLE AFTER, and without a processing_time column, the rule is off
    for plain in (
        R.ReplaySpec(event_time="ts", processing_time="pt", arrival_order="pt"),
        R.ReplaySpec(event_time="ts", arrival_order="pt", idle_ms=10_000),
    ):
        replayed = R.replay(idle_frame(spark), plain)
        try:
            wms = [r[R.WM] for r in replayed.df.orderBy(R.SEQ).collect()]
        finally:
            replayed.release()
        assert wms == [R.MIN_TIME, 9_999, 19_999, 29_999, 39_999]


def test_an_idle_source_closes_its_windows(spark):
    text = IDLE_SOURCE + (
        "SELECT k, window_start, pane_timing, COUNT(*) AS n FROM s "
        "GROUP BY k, TUMBLE(ts, INTERVAL '1' MINUTE) LATE DATA TO late_rows"
    )
    results = wql.compile(text).apply(spark, s=idle_frame(spark))
    try:
        got = sorted(tuple(r) for r in results.df.collect())
        late = sorted((r["k"], r["ts"]) for r in results.late.collect())
    finally:
        results.release()
    # the quiet 40 s moved the watermark to 69.999 s: [0,60) fired before c came,
    # and c (event time 40 s) is late for it
    assert got == [
        ("a", at(0), "ON_TIME", 2),
        ("b", at(0), "ON_TIME", 1),
        ("d", at(60), "ON_TIME", 1),
    ]
    assert late == [("c", at(40))]


def test_an_idle_source_runs_on_a_stream_in_event_time():
    # streams run it with the idle monitor (tests/spark/test_streaming_idle.py)
    from wql.compiler import compile_source
    from wql.compiler.backends.operator import build_operator
    from wql.spark.streaming import time_mode

    text = (
        IDLE_SOURCE + "SELECT k, COUNT(*) AS n FROM s GROUP BY k, TUMBLE(ts, INTERVAL '1' MINUTE)"
    )
    q = compile_source(text, streaming=True).queries[0]
    assert time_mode(build_operator(q)) == "EventTime"
