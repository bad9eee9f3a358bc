"""Views as sources (cascading windows) on Spark, against hand-derived rows.

A query reads a view's output; the view's ``window_time`` is its event time
and its firings reach the reader before the watermark that fired them
(docs/architecture.md, "Contract: pipelines"). Each case below derives its
rows by hand in its comments; the operator engine runs every stage per key
partition (three of them, forced), so equal rows also show that the host
places every upstream row right in the global sequence. The last test runs
two-stage pipelines with random triggers and out-of-order rows on Spark and
compares them with one global sequential run of the runtime
(``tests/runtime/test_pipeline.py``).
"""

from __future__ import annotations

import datetime as dt
import random

import pytest

import wql
from tests.runtime.pipeline_reference import global_run
from tests.spark.pipeline_helpers import T0, at, run
from wql.compiler.backends.operator import build_operator

pytestmark = pytest.mark.spark

CLICKS = "user STRING, ts TIMESTAMP, WATERMARK FOR ts AS ts - INTERVAL '10' SECOND"

ROLLUP = f"""
CREATE SOURCE clicks ({CLICKS});
CREATE VIEW per_minute AS
SELECT user, window_time AS minute_end, COUNT(*) AS clicks
FROM clicks GROUP BY user, TUMBLE(ts, INTERVAL '1' MINUTE);
CREATE VIEW per_hour AS
SELECT user, window_start, window_end, SUM(clicks) AS clicks, COUNT(*) AS active_minutes
FROM per_minute GROUP BY user, TUMBLE(minute_end, INTERVAL '1' HOUR);
"""


def clicks(spark):
    # alice: 00:00:10, 00:00:50 (minute 0), 00:30:00 (minute 30), 01:00:05 (minute 60);
    # bob: 00:59:59 (minute 59) and 00:59:30 -- behind the watermark (01:00:05 - 10 s
    # - 1 ms = 00:59:54.999)? No: replayed in event-time order, nothing is late.
    rows = [
        ("alice", at(10)),
        ("alice", at(50)),
        ("alice", at(1800)),
        ("bob", at(3599)),
        ("bob", at(3570)),
        ("alice", at(3605)),
    ]
    return spark.createDataFrame(rows, "user string, ts timestamp")


def test_minute_windows_roll_up_into_hours_on_both_engines(spark, partitions):
    # per_minute: alice [00:00] 2, [00:30] 1, [01:00] 1; bob [00:59] 2.
    # per_hour (minute_end = the minute's end - 1 ms): alice [00:00, 01:00) = 2 + 1 over
    # 2 minutes, [01:00, 02:00) = 1 over 1; bob [00:00, 01:00) = 2 over 1.
    want = [
        ("alice", "2024-01-01 00:00:00", "2024-01-01 01:00:00", "3", "2"),
        ("alice", "2024-01-01 01:00:00", "2024-01-01 02:00:00", "1", "1"),
        ("bob", "2024-01-01 00:00:00", "2024-01-01 01:00:00", "2", "1"),
    ]
    native, _, native_engines = run(spark, ROLLUP, clicks=clicks(spark))
    operator, counters, _ = run(spark, ROLLUP, "operator", clicks=clicks(spark))
    assert native_engines == {"per_minute": "native", "per_hour": "native"}
    assert native["per_hour"] == want
    assert native == operator
    # the rollup read the 4 minute rows, every one in a firing
    c = counters["per_hour"]
    assert (c["rows_in"], c["rows_fired"], c["late_rows"], c["dropped"]) == (4, 4, 0, {})


def test_a_view_that_marks_its_last_panes_is_read_like_any_other(spark, partitions):
    # The view's rows carry is_last (the runtime's extended fields) and, as a pipeline
    # stage, what fired them (FIRED_FIELDS, before the extended ones): the reader's
    # rows are the rollup's above; every pane of a default-trigger window is its last.
    text = f"""
    CREATE SOURCE clicks ({CLICKS});
    CREATE VIEW per_minute AS
    SELECT user, window_time AS minute_end, is_last, COUNT(*) AS clicks
    FROM clicks GROUP BY user, TUMBLE(ts, INTERVAL '1' MINUTE);
    CREATE VIEW per_hour AS
    SELECT user, window_start, window_end, SUM(clicks) AS clicks, COUNT(*) AS active_minutes
    FROM per_minute WHERE is_last GROUP BY user, TUMBLE(minute_end, INTERVAL '1' HOUR);
    """
    out, counters, engines = run(spark, text, "operator", clicks=clicks(spark))
    assert engines == {"per_minute": "operator", "per_hour": "operator"}
    assert [r[2] for r in out["per_minute"]] == ["True"] * 4
    assert out["per_hour"] == [
        ("alice", "2024-01-01 00:00:00", "2024-01-01 01:00:00", "3", "2"),
        ("alice", "2024-01-01 01:00:00", "2024-01-01 02:00:00", "1", "1"),
        ("bob", "2024-01-01 00:00:00", "2024-01-01 01:00:00", "2", "1"),
    ]
    assert counters["per_hour"]["rows_fired"] == 4


def test_session_over_tumbling_windows(spark, partitions):
    # Sessions of active minutes: a user is in one session while their minutes with
    # clicks are at most 2 minutes apart (a SESSION gap of 2 min over minute_end).
    text = f"""
    CREATE SOURCE clicks ({CLICKS});
    CREATE VIEW per_minute AS
    SELECT user, window_time AS minute_end, COUNT(*) AS clicks
    FROM clicks GROUP BY user, TUMBLE(ts, INTERVAL '1' MINUTE);
    CREATE VIEW visits AS
    SELECT user, window_start, window_end, COUNT(*) AS minutes, SUM(clicks) AS clicks
    FROM per_minute GROUP BY user, SESSION(minute_end, INTERVAL '2' MINUTE);
    """
    # alice clicks in minutes 0, 1, 3 (one session: 00:00:59.999 + 2 min reaches
    # 00:01:59.999 and 00:03:59.999 is within 2 min of it) and minute 7;
    # bob in minutes 2 and 5 (00:02:59.999 + 2 min = 00:04:59.999 < 00:05:59.999).
    rows = [
        ("alice", at(5)),
        ("alice", at(30)),
        ("alice", at(70)),
        ("bob", at(150)),
        ("alice", at(200)),
        ("bob", at(310)),
        ("alice", at(430)),
    ]
    df = spark.createDataFrame(rows, "user string, ts timestamp")
    out, counters, engines = run(spark, text, clicks=df)
    # minute ends: alice 59.999, 119.999, 239.999, 479.999; bob 179.999, 359.999
    assert engines["visits"] == "operator"  # keyed sessions over a view (planner)
    assert out["visits"] == [
        ("alice", "2024-01-01 00:00:59.999", "2024-01-01 00:05:59.999", "3", "4"),
        ("alice", "2024-01-01 00:07:59.999", "2024-01-01 00:09:59.999", "1", "1"),
        ("bob", "2024-01-01 00:02:59.999", "2024-01-01 00:04:59.999", "1", "1"),
        ("bob", "2024-01-01 00:05:59.999", "2024-01-01 00:07:59.999", "1", "1"),
    ]
    assert counters["visits"]["rows_in"] == 6


EARLY_LATE = """
CREATE SOURCE events (k STRING, ts TIMESTAMP, seq BIGINT, WATERMARK FOR ts AS ts)
WITH (arrival_order = 'seq');
CREATE VIEW panes AS
SELECT k, window_time AS wt, pane_timing, COUNT(*) AS n
FROM events GROUP BY k, TUMBLE(ts, INTERVAL '10' SECOND)
ALLOWED LATENESS INTERVAL '20' SECOND
TRIGGER WATERMARK WITH EARLY COUNT(2);
CREATE VIEW totals AS
SELECT k, window_start, window_end, SUM(n) AS n, COUNT(*) AS panes
FROM panes GROUP BY k, TUMBLE(wt, INTERVAL '20' SECOND)
LATE DATA TO late_panes;
"""


def test_early_and_late_panes_flow_downstream_and_late_ones_are_counted(spark, partitions):
    # Arrival order, watermark = max ts before the row - 1 ms (no delay):
    #   r0 a@1s  (wm none)
    #   r1 a@2s  (wm 0.999)   [0,10) counts 2: EARLY n=2 (fired by r1)
    #   r2 a@12s (wm 1.999)   [10,20) counts 1
    #   r3 a@21s (wm 11.999)  the rise fires [0,10) ON_TIME n=2; r3 opens [20,30)
    #   r4 a@25s (wm 20.999)  the rise fires [10,20) ON_TIME n=1, and then (after it)
    #                         totals' [0,20) fires: EARLY 2 + ON_TIME 2 + ON_TIME 1 =
    #                         5 over 3 panes. r4: [20,30) counts 2: EARLY n=2
    #   r5 a@3s  (wm 24.999)  [0,10) is past its end but within the lateness (cleanup
    #                         29.999): a LATE pane n=3 (every late row fires), with
    #                         wt 9.999 -- behind totals' watermark 24.999, and totals'
    #                         [0,20) is gone: late, to late_panes
    #   end of input: [20,30) ON_TIME n=2; totals' [20,40) = EARLY 2 + ON_TIME 2 = 4
    rows = [("a", at(t), i) for i, t in enumerate([1, 2, 12, 21, 25, 3])]
    df = spark.createDataFrame(rows, "k string, ts timestamp, seq bigint")
    out, counters, engines = run(spark, EARLY_LATE, events=df)
    assert engines == {"panes": "operator", "totals": "operator"}
    assert out["panes"] == [
        ("a", "2024-01-01 00:00:09.999", "EARLY", "2"),
        ("a", "2024-01-01 00:00:09.999", "LATE", "3"),
        ("a", "2024-01-01 00:00:09.999", "ON_TIME", "2"),
        ("a", "2024-01-01 00:00:19.999", "ON_TIME", "1"),
        ("a", "2024-01-01 00:00:29.999", "EARLY", "2"),
        ("a", "2024-01-01 00:00:29.999", "ON_TIME", "2"),
    ]
    assert out["totals"] == [
        ("a", "2024-01-01 00:00:00", "2024-01-01 00:00:20", "5", "3"),
        ("a", "2024-01-01 00:00:20", "2024-01-01 00:00:40", "4", "2"),
    ]
    # the late pane, with the view's columns and its event time
    assert out["late_panes"] == [
        ("a", "2024-01-01 00:00:09.999", "LATE", "3", "2024-01-01 00:00:09.999")
    ]
    c = counters["totals"]
    assert (c["rows_in"], c["rows_fired"], c["late_rows"]) == (6, 5, 1)


def test_a_pipeline_runs_on_a_stream_and_a_link_in_spark_sql_cuts_it(spark, tmp_path):
    # the rollup streams in one processor (tests/spark/test_stream_pipelines.py runs
    # such streams); a reader's WHERE over the view needs Spark SQL between the stages:
    # the pipeline streams as two stateful operators with the WHERE in Spark between
    # them (docs/streaming.md, "Links in Spark SQL"; tests/spark/test_stream_links.py
    # runs such streams against batch)
    (tmp_path / "in").mkdir()
    df = spark.readStream.schema("user string, ts timestamp").csv(str(tmp_path / "in"))
    results = wql.compile(ROLLUP).apply(spark, clicks=df)
    assert results["per_hour"].isStreaming
    filtered = ROLLUP.replace("FROM per_minute GROUP", "FROM per_minute WHERE clicks > 1 GROUP")
    compiled = wql.compile(filtered, streaming=True)
    results = compiled.apply(spark, clicks=df)
    assert results["per_hour"].isStreaming
    how = compiled.program.view("per_hour").engine.stream
    assert [link.sql for link in how.links] == [True]


# --------------------------------------------------------------------------- random


LATE_EARLY = "ALLOWED LATENESS INTERVAL '5' SECOND TRIGGER WATERMARK WITH EARLY COUNT(2)"
CASES = [
    # (upstream window and trigger, downstream window and trigger)
    (
        "HOP(ts, INTERVAL '3' SECOND, INTERVAL '6' SECOND) TRIGGER WATERMARK WITH EARLY COUNT(1)",
        "SESSION(wt, INTERVAL '3' SECOND) TRIGGER COUNT(2)",
    ),
    (
        f"TUMBLE(ts, INTERVAL '4' SECOND) {LATE_EARLY}",
        "HOP(wt, INTERVAL '3' SECOND, INTERVAL '6' SECOND) TRIGGER EVERY INTERVAL '3' SECOND",
    ),
    (
        "SESSION(ts, INTERVAL '3' SECOND) TRIGGER EVERY INTERVAL '2' SECOND",
        f"TUMBLE(wt, INTERVAL '4' SECOND) {LATE_EARLY}",
    ),
]


@pytest.mark.parametrize(("seed", "case"), list(enumerate(CASES)))
def test_random_pipelines_equal_one_global_run(spark, partitions, seed, case):
    rnd = random.Random(seed)
    up, down = case
    text = f"""
    CREATE SOURCE s (k STRING, v BIGINT, ts TIMESTAMP, seq BIGINT,
        WATERMARK FOR ts AS ts - INTERVAL '2' MILLISECOND) WITH (arrival_order = 'seq');
    CREATE VIEW up AS SELECT k, window_time AS wt, COUNT(*) AS n FROM s GROUP BY k, {up};
    CREATE VIEW down AS
    SELECT k, window_start, window_end, pane_index, pane_timing, SUM(n) AS total
    FROM up GROUP BY k, {down};
    """
    # seconds 0..30 in a shuffled arrival order: many rows come behind the watermark
    rows = [
        (rnd.choice("abc"), rnd.randrange(0, 30_000, 250), rnd.randint(1, 9)) for _ in range(40)
    ]
    df = spark.createDataFrame(
        [(k, v, T0 + dt.timedelta(milliseconds=t), i) for i, (k, t, v) in enumerate(rows)],
        "k string, v bigint, ts timestamp, seq bigint",
    )
    out, _, _ = run(spark, text, "operator", s=df)

    program = wql.compile(text, "operator").program
    configs = [build_operator(q, tag_firings=True).config for q in program.queries]
    epoch = int((T0 - dt.datetime(1970, 1, 1)).total_seconds() * 1000)
    stages = global_run(configs, ["same"] * 3, [((k,), epoch + t, v) for k, t, v in rows])
    want = sorted((r[0][0], _ts(r[1]), _ts(r[2]), str(r[4]), r[5], str(r[7])) for _, r in stages[1])
    assert out["down"] == want


def _ts(ms: int) -> str:
    value = dt.datetime(1970, 1, 1) + dt.timedelta(milliseconds=ms)
    return value.strftime("%Y-%m-%d %H:%M:%S") + (
        f".{value.microsecond // 1000:03d}" if value.microsecond else ""
    )


def test_wql_run_lets_a_file_read_the_views_of_the_files_before_it(spark, tmp_path, capsys):
    from tests.spark.examples_helpers import EXAMPLES, expected_outputs
    from wql.cli import main

    text = (EXAMPLES / "pipelines" / "hourly_rollup.wql").read_text()
    text = text.replace("'../data/clicks.csv'", f"'{EXAMPLES / 'data' / 'clicks.csv'}'")
    split = text.index("CREATE VIEW per_hour")
    (tmp_path / "minutes.wql").write_text(text[:split])
    (tmp_path / "hours.wql").write_text(text[split:])
    out = tmp_path / "out"
    files = [str(tmp_path / "minutes.wql"), str(tmp_path / "hours.wql")]
    assert main(["run", *files, "--output", str(out)]) == 0
    assert "hours.wql: per_hour [native] | rows in 8 | out 5" in capsys.readouterr().err
    got = spark.read.option("header", "true").csv(str(out / "hours" / "per_hour"))
    # CSV timestamps are written in the expected files' form (docs/running.md)
    assert (
        sorted(tuple(r) for r in got.collect()) == expected_outputs("hourly_rollup")["per_hour"][1]
    )


LATE_FIRST = """
CREATE SOURCE events (k STRING, ts TIMESTAMP, seq BIGINT, WATERMARK FOR ts AS ts)
WITH (arrival_order = 'seq');
CREATE VIEW panes AS
SELECT k, window_time AS wt, COUNT(*) AS n
FROM events GROUP BY k, TUMBLE(ts, INTERVAL '10' SECOND);
CREATE VIEW totals AS
SELECT k, window_start, SUM(n) AS n
FROM panes GROUP BY k, TUMBLE(wt, INTERVAL '20' SECOND);
"""


def test_every_stages_counters_are_reachable_when_only_the_last_is_applied(spark):
    # arrival order a@1s, a@12s, a@21s, a@3s: the rise to 20.999 fired [0, 10), so
    # a@3s is late in panes (no lateness): dropped there, not seen by totals
    rows = [("a", at(t), i) for i, t in enumerate([1, 12, 21, 3])]
    df = spark.createDataFrame(rows, "k string, ts timestamp, seq bigint")
    everything = wql.compile(LATE_FIRST).apply(spark, events=df)
    alone = wql.compile(LATE_FIRST).only("totals").apply(spark, events=df)
    try:
        stages = alone.stages
        assert list(stages) == ["panes", "totals"]
        panes = stages["panes"]
        assert (panes["rows_in"], panes["dropped"], panes["rows_out"]) == (4, {"late": 1}, 3)
        # the fields of the query's own counters are unchanged
        assert stages["totals"] == alone.counters
        assert (alone.counters["rows_in"], alone.counters["dropped"]) == (3, {})
        # the same counters as the view's own query reports
        assert panes == everything.query("panes").counters
        assert everything.query("totals").stages == stages
    finally:
        everything.release()
        alone.release()


def test_a_native_pipelines_stages_have_their_counters(spark):
    results = wql.compile(ROLLUP).only("per_hour").apply(spark, clicks=clicks(spark))
    try:
        assert results.query("per_hour").engine == "native"
        per_minute = results.stages["per_minute"]
        assert (per_minute["rows_in"], per_minute["rows_out"], per_minute["engine"]) == (
            6,
            4,
            "native",
        )
        assert results.stages["per_hour"]["rows_in"] == 4
    finally:
        results.release()
