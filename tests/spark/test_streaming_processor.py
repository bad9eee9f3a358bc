"""The streaming processor without Spark's engine: a micro-batch driver with Spark's rules.

``Driver`` plays Spark's part for :class:`wql.spark.streaming.WindowProcessor`
exactly as Structured Streaming does for ``transformWithStateInPandas`` in
EventTime mode: per micro-batch, the batch's watermark is
``max(event time of earlier batches) - (delay + 1)`` (0 until it rises),
``handleInputRows`` is called once per key with rows, then
``handleExpiredTimer`` once per (key, timer) whose time is *strictly below*
the watermark (Spark's ``TimerStateImpl.getExpiredTimers``), keyword
arguments, in time order; per-key state lives in a dict of ValueStates.

The driver and the references live in ``processor_helpers.py`` (``test_emit.py``
uses them too). Reference (``reference_stream``): ONE ``WindowOperator`` at parallelism 1 fed
the documented streaming semantics: before each micro-batch
``advance_watermark(W)``, then the batch's rows in event-time order. Equal
outputs mean the per-key snapshot/restore, the clock hand-over and the
timer mapping of the processor are exact. ``reference_batch`` is batch
replay (per-row watermark, docs/architecture.md) for the agreement and difference tests.
"""

from __future__ import annotations

from collections import Counter

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

pytest.importorskip("pyspark")

from tests.spark.processor_helpers import (  # noqa: E402
    BASE,
    DRAINED,
    QUERIES,
    Driver,
    collect_emitted,
    fed_operator,
    reference_batch,
    reference_stream,
    rows_st,
    run_driver,
    source_text,
    split_batches,
)
from wql.spark.layout import sum_counters  # noqa: E402
from wql.spark.streaming import (  # noqa: E402
    REASON_AFTER_END,
)

# --------------------------------------------------------------------------- Flink vectors


def test_session_vector_3_through_the_processor():
    """Flink vector 3 (session gap 3 s) with the watermarks as micro-batches."""
    text = source_text() + (
        "SELECT k, SUM(v) AS total FROM s GROUP BY k, SESSION(ts, INTERVAL '3' SECOND) "
        "LATE DATA TO late_s"
    )
    d = Driver(text)
    d.batch(
        [
            ("k2", 1, 0),
            ("k2", 2, 1000),
            ("k2", 3, 2500),
            ("k1", 1, 10),
            ("k1", 2, 1000),
            ("k1", 3, 2500),
            ("k2", 4, 5501),
            ("k2", 5, 6000),
            ("k2", 5, 6000),
            ("k2", 6, 6050),
        ]
    )
    d.batch([], BASE + 12000)
    assert Counter((r[0], r[1], r[2], r[5]) for r in d.results) == Counter(
        {("k1", 10, 5500, 6.0): 1, ("k2", 0, 5500, 6.0): 1, ("k2", 5501, 9050, 20.0): 1}
    )
    d.results.clear()
    d.batch([("k2", 10, 15000), ("k2", 20, 15000)], BASE + 12000)
    d.batch([], BASE + 17999)
    assert [(r[0], r[1], r[2], r[5]) for r in d.results] == [("k2", 15000, 18000, 30.0)]
    assert d.late == [] and not d.state  # every window cleaned up, no key state left


def test_lateness_vector_7_through_the_processor():
    """Flink vector 7: tumbling 2 s, lateness 500, PURGING WATERMARK, one watermark per batch."""
    text = source_text() + (
        "SELECT k, pane_index, pane_timing, SUM(v) AS total FROM s GROUP BY k, "
        "TUMBLE(ts, INTERVAL '2' SECOND) ALLOWED LATENESS INTERVAL '500' MILLISECOND "
        "TRIGGER PURGING WATERMARK LATE DATA TO late_s"
    )
    d = Driver(text)
    d.batch([("k2", 1, 500)], 0)
    d.batch([("k2", 1, 1300)], BASE + 1500)
    d.batch([], BASE + 2300)
    assert [(r[3], r[4], r[5]) for r in d.results] == [(0, "ON_TIME", 2.0)]
    d.batch([("k2", 1, 1997)], BASE + 2300)  # cleanup 2499 > 2300: accepted, fires at once
    assert [(r[3], r[4], r[5]) for r in d.results[1:]] == [(1, "LATE", 1.0)]
    d.batch([], BASE + 2301)  # no timer left behind to fire it again
    assert len(d.results) == 2
    d.batch([("k2", 1, 1998)], BASE + 6000)
    assert d.late == [("k2", 1.0, 1998)]
    d.end()
    assert len(d.results) == 2 and not d.state and not any(d.timers.values())


def test_a_watermark_jump_between_batches_fires_every_boundary():
    """EVERY 1 s on a 10 s window: the rise at a batch start fires each boundary passed
    (Flink fires once per boundary, identical rows), an equal watermark fires nothing."""
    text = source_text() + (
        "SELECT k, pane_timing, SUM(v) AS total FROM s GROUP BY k, "
        "TUMBLE(ts, INTERVAL '10' SECOND) TRIGGER EVERY INTERVAL '1' SECOND"
    )
    d = Driver(text)
    d.batch([("a", 1, 100)], 0)
    d.batch([("a", 1, 2500)], BASE + 1000)  # boundary timer of the first row: 1000 <= W
    assert [(r[4], r[5]) for r in d.results] == [("EARLY", 1.0)]
    d.batch([], BASE + 1000)  # equal watermark: nothing
    assert len(d.results) == 1
    d.batch([], BASE + 3000)  # the rise fires the timers due at 2000 and 3000
    assert [(r[4], r[5]) for r in d.results[1:]] == [("EARLY", 2.0), ("EARLY", 2.0)]


def test_drops_are_counted_in_the_tagged_stream():
    text = source_text() + (
        "SELECT k, SUM(v) AS total FROM s GROUP BY k, TUMBLE(ts, INTERVAL '1' SECOND)"
    )
    d = Driver(text)
    d.batch([("a", 1, 5000)])
    d.batch([("a", 1, 100), ("b", 1, 200)])
    assert d.dropped == Counter({"late": 2})


# --------------------------------------------------------------------------- properties


@pytest.mark.parametrize("name", sorted(QUERIES))
@settings(max_examples=25, deadline=None)
@given(rows=rows_st, cuts=st.lists(st.integers(0, 40), max_size=6))
def test_processor_equals_one_operator_with_a_watermark_per_batch(name, rows, cuts):
    """Per-key state in Spark, timers at the due times: same as one global operator."""
    text = QUERIES[name]
    batches = split_batches(rows, cuts)
    d = run_driver(text, batches)
    results, late = reference_stream(text, batches)
    assert Counter(d.results) == results
    assert Counter(d.late) == late
    assert not d.state or name == "hop_every"  # all windows fired and cleaned at the end
    assert not any(d.timers.values())  # no Spark timer left behind


@pytest.mark.parametrize("name", ["session_purging_count", "tumble_lateness", "hop_count"])
@settings(max_examples=25, deadline=None)
@given(rows=rows_st, cuts=st.lists(st.integers(0, 40), max_size=6))
def test_stream_agrees_with_batch_replay_when_no_row_is_late(name, rows, cuts):
    """Rows arriving in event-time order, cut anywhere into micro-batches: no row is
    late under either watermark, and the stream fires exactly what batch replay fires.

    Not for EVERY: its early panes hold whatever arrived when the watermark
    passed a boundary, and the watermark moves per row in batch replay but per
    micro-batch in a stream (pinned below)."""
    text = QUERIES[name]
    ordered = sorted(rows, key=lambda r: r[2])
    d = run_driver(text, split_batches(ordered, cuts))
    results, late = reference_batch(text, ordered)
    assert not d.late and not late
    assert Counter(d.results) == results


# --------------------------------------------------------------------------- end of input


def reference_drained(text: str, batches: list[list[tuple]]) -> tuple[Counter, Counter, dict]:
    """One operator, the streaming semantics, then ``end_of_input()``: results, late, counters."""
    op, results, late = fed_operator(text, batches)
    op.end_of_input()
    collect_emitted(op, results, late)
    return Counter(results), Counter(late), op.counters.as_dict()


@pytest.mark.parametrize("name", sorted(DRAINED))
@settings(max_examples=20, deadline=None)
@given(rows=rows_st, cuts=st.lists(st.integers(0, 40), max_size=6))
def test_a_drained_stream_ends_as_one_operator_at_end_of_input(name, rows, cuts):
    """The end marker's watermark reaches every key with state (a key whose state
    has no runtime timer keeps one at the end), fires what end_of_input() fires,
    counts the rows no firing will take, and leaves no state and no timer; the
    counters rows add up to the operator's counters (rows in = fired + late +
    dropped, as in batch)."""
    text = DRAINED[name]
    batches = split_batches(rows, cuts)
    d = Driver(text, drainable=True)
    assert d.proc.layout.mode == "EventTime"
    for rows_ in batches:
        d.batch(rows_)
    d.drain()
    results, late, counters = reference_drained(text, batches)
    assert Counter(d.results) == results
    assert Counter(d.late) == late
    assert sum_counters(d.counters) == counters
    assert not d.state and not any(d.timers.values())
    # every Spark timer of a drainable stream is below the end watermark
    assert all(t < d.end_watermark for ts in d.timers.values() for t in ts)


def test_rows_after_the_end_are_counted_not_run():
    text = DRAINED["count_window"]
    d = Driver(text, drainable=True)
    d.batch([("a", 1, 0), ("a", 1, 10), ("b", 1, 20), ("a", 1, 30)])
    d.drain()
    assert [(r[0], r[5]) for r in d.results] == [("a", 3.0)]
    assert d.dropped == Counter({"in no firing": 1})  # b's only row
    d.batch([("a", 1, 40), ("a", 1, 50), ("a", 1, 60)], d.end_watermark)
    assert len(d.results) == 1
    assert d.dropped == Counter({"in no firing": 1, REASON_AFTER_END: 3})
    total = sum_counters(d.counters)
    assert total["rows_in"] == 7 and total["rows_emitted"] == 1
    assert not d.state


# --------------------------------------------------------------------------- pinned differences


def test_a_micro_batch_shares_one_watermark_batch_replay_does_not():
    """Arrival order a@1000, a@2500, a@1500 (tumble 2 s, delay 0, lateness 0).

    Batch replay (arrival order): a@1500 sees max(1000, 2500) - 1 = 2499, its
    window [0, 2000) has fired: late. One micro-batch: every row sees the
    watermark left by EARLIER batches (none yet), so a@1500 joins [0, 2000).
    Split as [a@1000, a@2500] then [a@1500], the stream agrees with batch replay.
    """
    text = (
        QUERIES["tumble_lateness"]
        .replace("'1' SECOND);", "'0' SECOND);")
        .replace("ALLOWED LATENESS INTERVAL '1' SECOND ", "")
    )
    arrival = [("a", 1, 1000), ("a", 1, 2500), ("a", 1, 1500)]
    batch_results, batch_late = reference_batch(text, arrival)
    assert batch_late == Counter({("a", 1.0, 1500): 1})
    assert sorted(r[5] for r in batch_results) == [1.0, 1.0]

    one = run_driver(text, [arrival])
    assert one.late == []
    assert sorted((r[1], r[5]) for r in one.results) == [(0, 2.0), (2000, 1.0)]

    two = run_driver(text, [arrival[:2], arrival[2:]])
    assert Counter(two.results) == batch_results and Counter(two.late) == batch_late


def test_a_watermark_rise_waits_for_the_next_micro_batch():
    """A row that raises the watermark fires windows only at the next micro-batch;
    rows of the same batch still see the old watermark and are on time."""
    text = (
        QUERIES["tumble_lateness"]
        .replace("'1' SECOND);", "'0' SECOND);")
        .replace("ALLOWED LATENESS INTERVAL '1' SECOND ", "")
    )
    d = Driver(text)
    d.batch([("a", 1, 100), ("b", 1, 9000), ("a", 1, 200)])
    assert d.results == [] and d.late == []  # b@9000 raises the watermark for the NEXT batch
    d.batch([("a", 1, 300)])
    assert [(r[0], r[5]) for r in d.results] == [("a", 2.0)]
    assert d.late == [("a", 1.0, 300)]


def test_every_panes_follow_the_micro_batch_watermark():
    """EVERY 500 ms, rows 0, 501, 501 in event-time order. Batch replay: the third row
    sees 501 - 1 = 500, the boundary timer at 500 fires with the first two rows. One
    micro-batch: all three rows see no watermark; every boundary fires at the end with
    all three. The final ON_TIME firing of each window agrees."""
    text = QUERIES["hop_every"]
    rows = [("a", 1, 0), ("a", 1, 501), ("a", 1, 501)]
    batch_results, _ = reference_batch(text, rows)
    stream = run_driver(text, [rows])
    assert ("a", 0, 3000, 0, "EARLY", 2.0) in batch_results
    assert all(r[5] == 3.0 for r in stream.results if r[1] == 0)
    on_time = Counter(r for r in stream.results if r[4] == "ON_TIME")
    assert on_time == Counter({r: n for r, n in batch_results.items() if r[4] == "ON_TIME"})


def test_processing_time_windows_fire_on_the_micro_batch_clock():
    """TUMBLE(PROCTIME(), 10 s): rows take the batch timestamp; a Spark processing-time
    timer fires the window in the first batch whose clock passes its end."""
    text = source_text() + (
        "SELECT k, window_start, pane_timing, COUNT(*) AS n FROM s "
        "GROUP BY k, TUMBLE(PROCTIME(), INTERVAL '10' SECOND)"
    )
    d = Driver(text)
    assert d.proc.layout.mode == "ProcessingTime"
    d.batch([("a", 1, 0), ("b", 1, 0)], BASE + 1000)
    d.batch([("a", 1, 0)], BASE + 9000)
    assert d.results == []
    d.batch([], BASE + 9999)  # the clock reads the window's max timestamp: not yet
    assert d.results == []
    d.batch([], BASE + 10000)  # the clock passed it (Flink's 1 ms timer delay): it fires
    assert sorted((r[0], r[1], r[4], r[5]) for r in d.results) == [
        ("a", 0, "ON_TIME", 2.0),
        ("b", 0, "ON_TIME", 1.0),
    ]
    d.batch([("a", 1, 0)], BASE + 10500)  # the next window
    d.batch([], BASE + 20000)
    assert sorted((r[0], r[1], r[5]) for r in d.results)[1] == ("a", 10000, 1.0)
    assert not d.state


def test_rows_carry_event_time_in_a_count_window_too():
    """GLOBAL() + COUNT(3) + EVICT TIME(1 s): no timers (time mode None), but the rows
    keep their event time, so the TIME evictor works as in batch replay."""
    text = source_text() + (
        "SELECT k, SUM(v) AS total FROM s GROUP BY k, GLOBAL() "
        "TRIGGER COUNT(3) EVICT TIME(INTERVAL '1' SECOND)"
    )
    d = Driver(text)
    assert d.proc.layout.mode == "None"
    d.batch([("a", 1, 5500), ("a", 1, 0), ("a", 1, 5000)])
    assert [(r[0], r[1], r[5]) for r in d.results] == [("a", None, 2.0)]
    results, _ = reference_batch(text, [("a", 1, 0), ("a", 1, 5000), ("a", 1, 5500)])
    assert Counter(d.results) == results


def test_rows_kept_in_state_with_a_timestamp_value_survive_the_state_store():
    # An evictor keeps whole rows in the key's state; the late output copies `ts`
    # into them. Spark hands timestamps over as pandas (nanoseconds), which must
    # reach the runtime as datetime: its snapshot refuses pandas.Timestamp, and
    # the next micro-batch of the key could not restore its state.
    d = Driver(
        source_text(1) + "SELECT k, window_start, MAX(v) AS m FROM s\n"
        "GROUP BY k, TUMBLE(ts, INTERVAL '10' SECOND) EVICT COUNT(2) LATE DATA TO late;"
    )
    d.batch([("a", 1.0, 1000)])
    d.batch([("a", 5.0, 2000)])
    d.batch([("a", 3.0, 3000)])
    d.end()
    # EVICT COUNT(2) keeps the last two rows of [0, 10 s): 5.0 and 3.0
    assert d.results == [("a", 0, 10000, 0, "ON_TIME", 5.0)]
