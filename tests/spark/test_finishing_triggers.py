"""Triggers that finish (ONCE, UNTIL, SEQUENCE) through Spark: batch replay in
arrival order with late rows, and the streaming processor on the same rows.

Expected rows by hand from Beam's ReduceFnRunner (docs/language.md, "Triggers
that finish"): the finishing pane is the last, a row reaching a closed window
is dropped and counted ``closed window``, a row past the window's cleanup is
late as for any trigger. The example ``examples/login_alerts.wql`` runs the
three triggers in batch and as a drained stream (test_examples.py,
test_streaming_examples.py).
"""

from __future__ import annotations

import datetime as dt

import pytest

import wql
from tests.spark.processor_helpers import Driver, source_text

pytestmark = pytest.mark.spark

EPOCH = dt.datetime(1970, 1, 1)


def at(seconds: float) -> dt.datetime:
    return EPOCH + dt.timedelta(seconds=seconds)


# Arrival order: a@1; b@2; a@12 (the watermark 11.999 s passes [0,10): it fires
# and, under ONCE, closes); a@3 within the 5 s lateness (cleanup at 14.999 s):
# closed under ONCE, a LATE pane under WATERMARK; b@25 (watermark 24.999 s: the
# cleanup of [0,10) passed); a@4, late for every trigger: the late output.
ROWS = [("a", 1), ("b", 2), ("a", 12), ("a", 3), ("b", 25), ("a", 4)]
QUERY = (
    "SELECT k, window_start, pane_index, pane_timing, is_last, COUNT(*) AS n FROM s "
    "GROUP BY k, TUMBLE(ts, INTERVAL '10' SECOND) ALLOWED LATENESS INTERVAL '5' SECOND "
    "TRIGGER {trigger} LATE DATA TO side"
)


def run_batch(spark, trigger: str):
    text = (
        "CREATE SOURCE s (k STRING, ts TIMESTAMP, seq BIGINT, "
        "WATERMARK FOR ts AS ts - INTERVAL '0' SECOND) WITH (arrival_order = 'seq');\n"
        + QUERY.format(trigger=trigger)
    )
    df = spark.createDataFrame(
        [(k, at(t), i) for i, (k, t) in enumerate(ROWS)], "k string, ts timestamp, seq bigint"
    )
    results = wql.compile(text).apply(spark, s=df)
    try:
        got = sorted(tuple(r) for r in results.df.collect())
        late = sorted((r[0], r[1]) for r in results["side"].collect())
        counters = results.counters
    finally:
        results.release()
    return got, late, counters


def test_once_watermark_in_batch_drops_rows_of_a_closed_window(spark, partitions):
    got, late, counters = run_batch(spark, "ONCE WATERMARK")
    assert got == [
        ("a", at(0), 0, "ON_TIME", True, 1),
        ("a", at(10), 0, "ON_TIME", True, 1),
        ("b", at(0), 0, "ON_TIME", True, 1),
        ("b", at(20), 0, "ON_TIME", True, 1),
    ]
    assert late == [("a", at(4))]
    assert counters["dropped"] == {"closed window": 1}
    assert counters["rows_in"] == counters["rows_fired"] + counters["late_rows"] + 1


def test_the_repeating_watermark_fires_that_row_late_instead(spark):
    got, late, counters = run_batch(spark, "WATERMARK")
    assert ("a", at(0), 1, "LATE", False, 2) in got
    assert late == [("a", at(4))]
    assert counters["dropped"] == {}


def test_sequence_in_batch(spark):
    # the first row of each window, then the on-time pane (Beam's
    # AfterEach.inOrder(AfterPane(1), AfterWatermark.pastEndOfWindow()))
    got, late, counters = run_batch(spark, "SEQUENCE(ONCE COUNT(1), ONCE WATERMARK)")
    assert got == [
        ("a", at(0), 0, "EARLY", False, 1),
        ("a", at(0), 1, "ON_TIME", True, 1),
        ("a", at(10), 0, "EARLY", False, 1),
        ("a", at(10), 1, "ON_TIME", True, 1),
        ("b", at(0), 0, "EARLY", False, 1),
        ("b", at(0), 1, "ON_TIME", True, 1),
        ("b", at(20), 0, "EARLY", False, 1),
        ("b", at(20), 1, "ON_TIME", True, 1),
    ]
    assert late == [("a", at(4))]
    assert counters["dropped"] == {"closed window": 1}


def stream(trigger: str) -> Driver:
    """The same rows, one micro-batch each: a row sees the watermark of the batches
    before it, which here is the one batch replay gives it."""
    text = source_text() + QUERY.format(trigger=trigger).replace("COUNT(*) AS n", "SUM(v) AS n")
    d = Driver(text)
    for k, t in ROWS:
        d.batch([(k, 1.0, t * 1000)])
    d.end()
    return d


def test_once_watermark_on_a_stream_equals_batch():
    d = stream("ONCE WATERMARK")
    assert sorted(d.results) == [
        ("a", 0, 10_000, 0, "ON_TIME", 1.0),
        ("a", 10_000, 20_000, 0, "ON_TIME", 1.0),
        ("b", 0, 10_000, 0, "ON_TIME", 1.0),
        ("b", 20_000, 30_000, 0, "ON_TIME", 1.0),
    ]
    assert [(k, t) for k, _, t in d.late] == [("a", 4000)]
    assert d.dropped == {"closed window": 1}


def test_until_on_a_stream_equals_batch(spark):
    trigger = "UNTIL(COUNT(1), ONCE WATERMARK)"
    got, late, counters = run_batch(spark, trigger)
    d = stream(trigger)
    assert sorted(d.results) == [
        (
            k,
            int((ws - EPOCH).total_seconds() * 1000),
            int((ws - EPOCH).total_seconds() * 1000) + 10_000,
            pane,
            timing,
            float(n),
        )
        for k, ws, pane, timing, _, n in got
    ]
    assert [(k, t) for k, _, t in d.late] == [
        (k, int((t - EPOCH).total_seconds() * 1000)) for k, t in late
    ]
    assert d.dropped == counters["dropped"] == {"closed window": 1}


SESSION_QUERY = (
    "SELECT k, window_start, window_end, pane_index, pane_timing, SUM(v) AS n FROM s "
    "GROUP BY k, SESSION(ts, INTERVAL '3' SECOND) TRIGGER ONCE COUNT(2)"
)
# a@1 and a@2 make the session [1, 5): two rows, it fires and closes. a@1.5 falls in
# its range but a closed session merges no more (Beam removes it from the active
# windows): a new session [1.5, 4.5), which a@3 extends to [1.5, 6): two rows, fired.
SESSION_ROWS = [("a", 1.0), ("a", 2.0), ("a", 1.5), ("a", 3.0)]
SESSION_EXPECTED = [
    ("a", 1_000, 5_000, 0, "EARLY", 2.0),
    ("a", 1_500, 6_000, 0, "EARLY", 2.0),
]


def test_a_closed_session_merges_no_more_in_batch(spark):
    text = (
        "CREATE SOURCE s (k STRING, v DOUBLE, ts TIMESTAMP, seq BIGINT, "
        "WATERMARK FOR ts AS ts - INTERVAL '5' SECOND) WITH (arrival_order = 'seq');\n"
        + SESSION_QUERY
    )
    df = spark.createDataFrame(
        [(k, 1.0, at(t), i) for i, (k, t) in enumerate(SESSION_ROWS)],
        "k string, v double, ts timestamp, seq bigint",
    )
    results = wql.compile(text).apply(spark, s=df)
    try:
        got = sorted(tuple(r) for r in results.df.collect())
        dropped = results.counters["dropped"]
    finally:
        results.release()
    assert got == [
        (k, at(s / 1000), at(e / 1000), pane, timing, n)
        for k, s, e, pane, timing, n in SESSION_EXPECTED
    ]
    assert dropped == {}


def test_a_closed_session_merges_no_more_on_a_stream():
    d = Driver(source_text(5) + SESSION_QUERY)
    for k, t in SESSION_ROWS:
        d.batch([(k, 1.0, int(t * 1000))])
    d.end()
    assert sorted(d.results) == SESSION_EXPECTED
    assert d.dropped == {}
