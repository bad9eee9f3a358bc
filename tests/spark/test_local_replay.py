"""The local replay: plans that do not depend on the watermark sequence need no global clock.

Where the planner finds a query's output independent of when the watermark
advanced (``wql/compiler/clock_dependence.py``; the argument in
docs/running.md, "Plans that do not depend on the watermark sequence"), the
batch host lets each key partition advance the watermark on its own rows
(``replay.STRATEGY_LOCAL``). These tests hold it to the full replay's global
clock on random inputs: results with their pane columns, late rows, drops
and every counter.
"""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.spark.host_helpers import (
    frame,
    key_files,
    outcome,
    rows_of,
    source,
    summary_and_window,
    ts,
)
from wql.compiler import compile_source
from wql.compiler.clock_dependence import depends_on_watermark_sequence, watermark_dependence
from wql.spark import replay as R
from wql.spark.batch import OPERATOR_PARTITIONS_CONF, run_operator

pytestmark = pytest.mark.spark

PANES = "SELECT k, window_start, window_end, pane_index, pane_timing, is_last, "
AGGS = "SUM(v) AS total, COUNT(*) AS n, MAX(v) AS top"

#: plans the planner finds independent of the watermark sequence (with a delay > 0)
INDEPENDENT = [
    f"{PANES}{AGGS} FROM s GROUP BY k, TUMBLE(ts, INTERVAL '2' SECOND) "
    "ALLOWED LATENESS INTERVAL '1' SECOND LATE DATA TO late_s",
    f"{PANES}{AGGS} FROM s GROUP BY k, HOP(ts, INTERVAL '1' SECOND, INTERVAL '3' SECOND)",
    f"{PANES}{AGGS} FROM s GROUP BY k, CUMULATE(ts, INTERVAL '1' SECOND, INTERVAL '4' SECOND) "
    "ALLOWED LATENESS INTERVAL '2' SECOND",
    f"{PANES}{AGGS} FROM s GROUP BY k, SESSION(ts, INTERVAL '1' SECOND) "
    "ALLOWED LATENESS INTERVAL '500' MILLISECOND LATE DATA TO late_s",
    f"{PANES}{AGGS} FROM s GROUP BY k, SESSION(ts, INTERVAL '1' SECOND) TRIGGER PURGING COUNT(2)",
    f"{PANES}{AGGS} FROM s GROUP BY k, SESSION(ts, GAP v * INTERVAL '250' MILLISECOND)",
    f"{PANES}{AGGS} FROM s GROUP BY k, TUMBLE(ts, INTERVAL '2' SECOND) "
    "ALLOWED LATENESS INTERVAL '2' SECOND TRIGGER WATERMARK WITH EARLY COUNT(2)",
    "SELECT k, window_start, window_end, pane_index, pane_timing, SUM(v) AS total FROM s "
    "GROUP BY k, SESSION(ts, INTERVAL '1' SECOND) ALLOWED LATENESS INTERVAL '1' SECOND "
    "TRIGGER WATERMARK WITH EARLY COUNT(1) EMIT CHANGELOG",
    "SELECT k, pane_index, SUM(v) AS total, COUNT(*) AS n FROM s GROUP BY k, COUNT_WINDOW(3, 2)",
    f"{PANES}{AGGS} FROM s GROUP BY k, TUMBLE(ts, INTERVAL '2' SECOND) "
    "TRIGGER COUNT(2) EVICT COUNT(2)",
    f"{PANES}{AGGS} FROM s GROUP BY k, TUMBLE(ts, INTERVAL '2' SECOND) "
    "TRIGGER ANY(COUNT(3), DELTA(v, 4)) EVICT TIME(INTERVAL '500' MILLISECOND)",
    "SELECT window_start, pane_index, pane_timing, is_last, SUM(v) AS total, COUNT(*) AS n "
    "FROM s WHERE v > 2 GROUP BY TUMBLE(ts, INTERVAL '1' SECOND)",
]


def planned(text):
    return compile_source(text, engine="operator").queries[0]


@pytest.mark.parametrize("query", INDEPENDENT)
def test_the_planner_finds_these_independent(query):
    assert watermark_dependence(planned(source(1) + query)) is None


@pytest.mark.parametrize(
    ("options", "query", "clause"),
    [
        (" WITH (arrival_order = 'arr')", INDEPENDENT[0], "arrival_order"),
        ("", INDEPENDENT[3].replace("'500' MILLISECOND", "'0' SECOND"), "WATERMARK"),
        (
            "",
            f"{PANES}{AGGS} FROM s GROUP BY k, TUMBLE(ts, INTERVAL '2' SECOND) "
            "TRIGGER EVERY INTERVAL '250' MILLISECOND OF EVENT TIME",
            "EVERY ... OF EVENT TIME",
        ),
        (
            "",
            f"{PANES}{AGGS} FROM s GROUP BY k, TUMBLE(ts, INTERVAL '2' SECOND) "
            "TRIGGER WATERMARK WITH EARLY AFTER INTERVAL '250' MILLISECOND",
            "AFTER ... OF EVENT TIME",
        ),
        (
            " WITH (processing_time = 'pt')",
            "SELECT k, COUNT(*) AS n FROM s GROUP BY k, TUMBLE(PROCTIME(), INTERVAL '1' SECOND)",
            "",
        ),
    ],
)
def test_the_planner_finds_these_dependent(options, query, clause):
    delay = 0 if clause == "WATERMARK" else 1
    reason = watermark_dependence(planned(source(delay, options) + query))
    assert reason is not None and reason.clause == clause


@settings(
    max_examples=14,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    # times far behind in input order: rows a stream would have had late
    files=key_files(st.integers(1, 9), slots=24, rows=10, files=3),
    query=st.sampled_from(INDEPENDENT),
    delay=st.sampled_from([1, 2]),
    partitions=st.sampled_from(["1", "3"]),
    batch=st.sampled_from(["2", "10000"]),
)
def test_local_replay_equals_the_global_replay(spark, files, query, delay, partitions, batch):
    text = source(delay) + query
    assert not depends_on_watermark_sequence(planned(text))
    files = [[(k, v, t, 0) for k, v, t in rows] for rows in files]
    local, window = local_and_window(spark, text, files, partitions, batch)
    assert local == window


def local_and_window(spark, text, files, partitions, batch):
    """Outcomes of the local replay (what ``auto`` takes) and of the global window replay."""
    return summary_and_window(spark, text, files, partitions, batch, R.STRATEGY_AUTO)


def test_auto_takes_the_local_replay_only_for_independent_plans(spark):
    rows = rows_of(("a", 1.0, 500), ("b", 1.0, 500), ("a", 1.0, 100))
    run = run_operator(planned(source(1) + INDEPENDENT[0]), frame(spark, rows))
    assert run._replay is not None and run._replay.local_order is not None
    run.release()
    dependent = planned(source(1, " WITH (arrival_order = 'arr')") + INDEPENDENT[0])
    run = run_operator(dependent, frame(spark, rows))
    assert run._replay is not None and run._replay.local_order is None
    run.release()
    # a pipeline's first stage places its rows in the global sequence
    run = run_operator(planned(source(1) + INDEPENDENT[0]), frame(spark, rows), tag=True)
    assert run._replay is not None and run._replay.local_order is None
    run.release()


def test_a_session_with_no_delay_depends_on_other_keys_ties(spark):
    # b@1000 comes before a@1000 in input order: globally a's session [0, 1000) fires
    # and is cleared before a@1000 (watermark 999), which starts a new session; on
    # a's own clock (watermark -1) a@1000 merges into it (Flink's sessions meet at the
    # end). Why the planner keeps sessions with a zero delay on the global clock.
    from pyspark.sql import functions as F

    text = source(0) + f"{PANES}{AGGS} FROM s GROUP BY k, SESSION(ts, INTERVAL '1' SECOND)"
    query = planned(text)
    assert watermark_dependence(query) is not None
    # the tie's key in another key partition than a (Spark's hash partitioning)
    where = spark.createDataFrame([(k,) for k in "abcdefg"], "k string").select(
        "k", F.pmod(F.hash("k"), F.lit(3)).alias("p")
    )
    partition = dict(tuple(r) for r in where.collect())
    other = next(k for k in "bcdefg" if partition[k] != partition["a"])
    rows = rows_of(("a", 1.0, 0), (other, 1.0, 1000), ("a", 1.0, 1000))
    spark.conf.set(OPERATOR_PARTITIONS_CONF, "3")
    try:
        local = outcome(run_operator(query, frame(spark, rows), replay_strategy=R.STRATEGY_LOCAL))
        window = outcome(run_operator(query, frame(spark, rows), replay_strategy=R.STRATEGY_WINDOW))
    finally:
        spark.conf.unset(OPERATOR_PARTITIONS_CONF)
    merged = ("a", ts(0), ts(2000), 0, "ON_TIME", True, 2.0, 2, 1.0)
    assert local[0][merged] == 1 and window[0][merged] == 0
    assert window[0][("a", ts(1000), ts(2000), 0, "ON_TIME", True, 1.0, 1, 1.0)] == 1


def test_no_row_left_after_the_drops_is_still_counted(spark):
    # every row has a NULL event time: adaptive execution replaces the observed stage by
    # an empty relation and Spark reports no metrics; the local replay counts them itself
    rows = rows_of(("a", 1.0, None), ("b", 2.0, None))
    spark.conf.set(OPERATOR_PARTITIONS_CONF, "2")
    try:
        run = run_operator(planned(source(1) + INDEPENDENT[0]), frame(spark, rows))
        assert run._replay is not None and run._replay.local_order is not None
        result, _, dropped, counters = outcome(run)
    finally:
        spark.conf.unset(OPERATOR_PARTITIONS_CONF)
    assert not result and sum(dropped.values()) == 2
    assert counters["rows_in"] == 2 and counters["dropped"] == {R.REASON_NULL_EVENT_TIME: 2}
