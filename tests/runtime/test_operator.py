"""WindowOperator behaviour beyond the Flink vectors: lateness, drops, pane timing,
clocks, processing time, count/global windows, composite triggers, evictors."""

from __future__ import annotations

import pytest

from wql.runtime import (
    MAX_TIME,
    AggregateSpec,
    AllTrigger,
    AnyTrigger,
    ContinuousEventTimeTrigger,
    ContinuousProcessingTimeTrigger,
    CountEvictor,
    CountTrigger,
    DeltaEvictor,
    DeltaTrigger,
    DynamicSessionWindows,
    EarlyLateTrigger,
    EventTimeTrigger,
    GlobalWindows,
    OperatorConfig,
    ProcessingTimeoutTrigger,
    PurgingTrigger,
    RowBatch,
    SessionWindows,
    SlidingWindows,
    TimeEvictor,
    TumblingWindows,
    WindowOperator,
    count_windows,
)
from wql.runtime.testing import Harness, sums

SUM = (AggregateSpec("SUM", 0),)
COUNT = (AggregateSpec("COUNT_STAR"),)


def timing(fired):
    return [(f.value, f.pane_index, f.pane_timing) for f in fired]


# ------------------------------------------------------------ lateness, drops


def test_late_row_without_side_output_is_counted_dropped():
    h = Harness(OperatorConfig(TumblingWindows(1000), SUM))
    h.run("k@100, WM 5000, k@200")
    assert h.op.counters.dropped == {"late": 1}
    assert h.op.counters.late_rows == 0 and h.late() == []
    assert h.op.counters.rows_in == 2


def test_late_output_carries_selected_columns():
    cfg = OperatorConfig(TumblingWindows(1000), SUM, late_output=True, late_columns=(1,))
    h = Harness(cfg, values=lambda k, v: (v, f"row{v}"))
    h.run("k:1@100, WM 5000, k:7@200")
    assert [(r.key, r.timestamp, r.values) for r in h.late()] == [("k", 200, ("row7",))]
    assert h.op.counters.late_rows == 1 and h.op.counters.dropped == {}


def test_missing_timestamp_is_counted_not_raised():
    op = WindowOperator(OperatorConfig(TumblingWindows(1000), SUM))
    op.process_element(("k",), None, (1,))
    assert op.counters.dropped == {"missing timestamp": 1}
    assert op.active_keys() == []


@pytest.mark.parametrize("gap", [0, -5, None, "soon", True])
def test_invalid_dynamic_gap_is_counted(gap):
    op = WindowOperator(OperatorConfig(DynamicSessionWindows(1), SUM))
    op.process_element(("k",), 10, (1, gap))
    op.process_element(("k",), 20, (2, 100))
    op.end_of_input()
    assert op.counters.dropped == {"invalid session gap": 1}
    assert [r[-1] for r in op.drain()] == [2]


def test_hop_gap_row_is_counted():
    # size < slide leaves gaps: a row there belongs to no window
    op = WindowOperator(OperatorConfig(SlidingWindows(size=1000, slide=5000), COUNT))
    op.process_element(("k",), 2500, ())
    assert op.counters.dropped == {"late window": 1}


def test_every_row_is_accounted_for():
    cfg = OperatorConfig(SessionWindows(1000), COUNT, allowed_lateness=200, late_output=True)
    op = WindowOperator(cfg)
    stream = [(100, 0), (5000, 0), (300, 0), (4000, 3700), (4500, 3700), (None, 3700), (50, 9000)]
    for ts, wm in stream:
        op.advance_watermark(wm)
        op.process_element(("k",), ts, ())
    op.end_of_input()
    emitted = sum(r[-1] for r in op.drain())  # each accepted row is in exactly one session
    c = op.counters
    assert c.rows_in == len(stream)
    assert emitted + c.late_rows + sum(c.dropped.values()) == c.rows_in


# ---------------------------------------------------------------- pane timing


def test_pane_timing_early_on_time_late():
    cfg = OperatorConfig(
        TumblingWindows(1000), COUNT, EarlyLateTrigger(CountTrigger(2)), allowed_lateness=500
    )
    h = Harness(cfg)
    assert timing(h.run("k@1, k@2")) == [(2, 0, "EARLY")]
    assert timing(h.run("k@3, WM 999")) == [(3, 1, "ON_TIME")]
    assert timing(h.run("k@4")) == [(4, 2, "LATE")]  # no LATE trigger: every late row fires
    assert timing(h.run("k@5")) == [(5, 3, "LATE")]
    assert h.run("WM 1499, k@6") == []
    assert h.op.counters.dropped == {"late": 1}


def test_early_late_with_late_trigger():
    cfg = OperatorConfig(
        TumblingWindows(1000), COUNT, EarlyLateTrigger(None, CountTrigger(2)), allowed_lateness=500
    )
    h = Harness(cfg)
    assert h.run("k@1, k@2, k@3") == []
    assert timing(h.run("WM 1000")) == [(3, 0, "ON_TIME")]
    assert h.run("k@4") == []
    assert timing(h.run("k@5")) == [(5, 1, "LATE")]


def test_early_late_window_first_seen_after_watermark():
    cfg = OperatorConfig(
        TumblingWindows(1000), COUNT, EarlyLateTrigger(CountTrigger(5)), allowed_lateness=5000
    )
    h = Harness(cfg)
    assert timing(h.run("WM 2000, k@10")) == [(1, 0, "LATE")]


def test_early_late_window_first_seen_late_fires_every_row_whatever_late_says():
    # Flink's AfterEndOfWindowEarlyAndLate: on_time_fired is only set by the on-time
    # timer, so a window whose first row is already late fires on every row.
    cfg = OperatorConfig(
        TumblingWindows(1000),
        COUNT,
        EarlyLateTrigger(CountTrigger(5), CountTrigger(3)),
        allowed_lateness=5000,
    )
    h = Harness(cfg)
    assert timing(h.run("WM 2000, k@10")) == [(1, 0, "LATE")]
    assert timing(h.run("k@11")) == [(2, 1, "LATE")]


def test_early_late_late_merge_fires_late_then_on_time_as_flink():
    # Flink registers the merged window's on-time timer even when the watermark has
    # passed it (no FLINK-9201 fix in the table-runtime triggers): the late row fires
    # LATE at once and the timer fires ON_TIME at the next watermark rise.
    cfg = OperatorConfig(
        SessionWindows(3000), COUNT, EarlyLateTrigger(CountTrigger(10)), allowed_lateness=10_000
    )
    h = Harness(cfg)
    assert timing(h.run("k@1000, WM 4000")) == [(1, 0, "ON_TIME")]
    assert timing(h.run("WM 5000, k@1500")) == [(2, 1, "LATE")]
    assert timing(h.run("WM 5001")) == [(2, 2, "ON_TIME")]


def test_every_fires_once_per_boundary_on_a_jump():
    cfg = OperatorConfig(TumblingWindows(10_000), SUM, ContinuousEventTimeTrigger(2000))
    h = Harness(cfg)
    h.run("k:5@0")
    fired = h.run("END")
    assert [(f.value, f.pane_timing) for f in fired] == [(5, "EARLY")] * 4 + [(5, "ON_TIME")]
    assert [f.pane_index for f in fired] == [0, 1, 2, 3, 4]
    assert h.op.active_keys() == []


def test_count_trigger_on_time_window_replaces_watermark_firing():
    h = Harness(OperatorConfig(TumblingWindows(1000), COUNT, CountTrigger(3)))
    assert h.run("k@1, k@2, END") == []
    assert h.op.active_keys() == []


# --------------------------------------------------------------------- clocks


def test_equal_or_lower_watermark_fires_nothing():
    h = Harness(OperatorConfig(TumblingWindows(1000), COUNT))
    h.run("k@1, WM 500")
    assert h.run("WM 500, WM 400") == []
    assert h.op.watermark == 500
    assert len(h.run("WM 999")) == 1


def test_timer_registered_behind_the_clock_waits_for_the_next_rise():
    # EVERY OF PROCESSING TIME caps its fire time at the (event-time) window's
    # max timestamp, here far behind processing time (Flink does the same).
    cfg = OperatorConfig(TumblingWindows(1000), COUNT, ContinuousProcessingTimeTrigger(300))
    h = Harness(cfg)
    h.run("PT 5000, k@10")
    assert h.op.timers(("k",)) == ([999], [999])
    assert h.run("PT 5000") == []  # not a rise
    fired = h.run("PT 5001")
    assert [(f.value, f.pane_timing) for f in fired] == [(1, "EARLY")]
    assert h.op.timers(("k",)) == ([999], [])  # the capped schedule stops (WQL)
    assert [(f.value, f.pane_timing) for f in h.run("k@20, PT 5002")] == [(2, "EARLY")]


def test_timers_fire_in_time_order_across_keys():
    h = Harness(OperatorConfig(TumblingWindows(1000), COUNT))
    h.run("b@2500, a@100, c@1500")
    assert [(f.key, f.end) for f in h.run("END")] == [("a", 1000), ("c", 2000), ("b", 3000)]


def test_processing_time_windows_fire_on_processing_time_only():
    cfg = OperatorConfig(TumblingWindows(1000, event_time=False), COUNT)
    h = Harness(cfg)
    h.run("PT 100")
    h.op.process_element(("k",), None, ())
    h.run("PT 900")
    h.op.process_element(("k",), None, ())
    assert h.run("WM 5000") == []
    # a processing-time timer at T fires once the clock passes T (Flink's 1 ms delay)
    assert h.run("PT 999") == []
    fired = h.run("PT 1000")
    assert [(f.value, f.start, f.end, f.pane_timing) for f in fired] == [(2, 0, 1000, "ON_TIME")]
    h.run("PT 1500")
    h.op.process_element(("k",), None, ())
    assert h.run("END") == []  # processing-time timers do not fire at end of input
    assert h.op.timers(("k",)) == ([], [1999])


def test_rows_at_a_processing_time_windows_last_millisecond_reach_it():
    """Nexmark q12's shape, rows derived by hand. Flink delays a processing-time timer
    at T by 1 ms (``ProcessingTimeServiceUtil.getProcessingTimeDelay``): rows processed
    while the clock reads T = 999 (the window's max timestamp) are in [0, 1000), which
    fires once, when the clock reads 1000. Firing at 999 emitted [0, 1000) twice."""
    cfg = OperatorConfig(TumblingWindows(1000, event_time=False), COUNT)
    op = WindowOperator(cfg)
    for pt, key in ((500, "a"), (999, "a"), (999, "b"), (999, "a"), (1000, "a"), (1999, "b")):
        op.advance_processing_time(pt)
        op.process_element((key,), None, ())
    op.advance_processing_time(2000)
    assert op.drain() == [
        (("a",), 0, 1000, 999, 0, "ON_TIME", 999, 3),
        (("b",), 0, 1000, 999, 0, "ON_TIME", 999, 1),
        (("a",), 1000, 2000, 1999, 0, "ON_TIME", 1999, 1),
        (("b",), 1000, 2000, 1999, 0, "ON_TIME", 1999, 1),
    ]


def test_processing_time_session():
    cfg = OperatorConfig(SessionWindows(100, event_time=False), COUNT)
    op = WindowOperator(cfg)
    for pt in (0, 50, 120, 400):
        op.advance_processing_time(pt)
        op.process_element(("k",), None, ())
    op.advance_processing_time(1000)
    assert [(r[1], r[2], r[-1]) for r in op.drain()] == [(0, 220, 3), (400, 500, 1)]


# ------------------------------------------------------- count/global windows


def test_tumbling_count_window():
    assigner, trigger, evictor = count_windows(3)
    h = Harness(OperatorConfig(assigner, SUM, trigger, evictor))
    fired = h.run("k:1@0, k:2@0, k:3@0, k:4@0, WM 99999, k:5@-5, k:6@0")
    assert [(f.value, f.start, f.end, f.timestamp) for f in fired] == [
        (6, None, None, MAX_TIME),
        (15, None, None, MAX_TIME),
    ]
    assert h.op.counters.dropped == {}  # never late


def test_sliding_count_window():
    assigner, trigger, evictor = count_windows(4, 2)
    h = Harness(OperatorConfig(assigner, SUM, trigger, evictor))
    fired = h.run(", ".join(f"k:{v}@0" for v in range(1, 9)))
    assert [f.value for f in fired] == [1 + 2, 1 + 2 + 3 + 4, 3 + 4 + 5 + 6, 5 + 6 + 7 + 8]


def test_global_window_without_trigger_never_fires():
    h = Harness(OperatorConfig(GlobalWindows(), SUM))
    assert h.run("k@1, k@2, END") == []
    assert h.op.open_windows() == 1


# ----------------------------------------------------------- composite triggers


def test_any_fires_when_any_child_fires():
    trigger = AnyTrigger((CountTrigger(3), EventTimeTrigger()))
    h = Harness(OperatorConfig(TumblingWindows(1000), COUNT, trigger))
    assert timing(h.run("k@1, k@2, k@3")) == [(3, 0, "EARLY")]
    assert timing(h.run("k@4, WM 999")) == [(4, 1, "ON_TIME")]


def test_any_purges_when_a_child_purges():
    trigger = AnyTrigger((PurgingTrigger(CountTrigger(2)), EventTimeTrigger()))
    h = Harness(OperatorConfig(TumblingWindows(1000), COUNT, trigger))
    assert [f.value for f in h.run("k@1, k@2, k@3, WM 999")] == [2, 1]


def test_all_fires_when_every_child_fired_since_last_firing():
    trigger = AllTrigger((CountTrigger(2), CountTrigger(3)))
    h = Harness(OperatorConfig(GlobalWindows(), COUNT, trigger))
    fired = h.run(", ".join(["k@0"] * 9))
    # child A fires at rows 2,4,6,8; child B at 3,6,9: ALL at 3 (A@2,B@3), 6, 9
    assert [f.value for f in fired] == [3, 6, 9]


def test_all_purges_if_a_child_firing_purged():
    trigger = AllTrigger((PurgingTrigger(CountTrigger(2)), CountTrigger(3)))
    h = Harness(OperatorConfig(GlobalWindows(), COUNT, trigger))
    fired = h.run(", ".join(["k@0"] * 6))
    assert [f.value for f in fired] == [3, 3]


def test_timeout_fires_on_timeout_and_clears_nested():
    trigger = ProcessingTimeoutTrigger(CountTrigger(3), 500)
    h = Harness(OperatorConfig(GlobalWindows(), COUNT, trigger))
    h.run("PT 0, k@0, PT 100, k@0")
    assert [f.value for f in h.run("PT 500")] == []  # due at 500: fires once the clock passes it
    assert [f.value for f in h.run("PT 501")] == [2]
    # nested count was cleared: 2 more rows do not reach 3; the next timeout does
    h.run("PT 600, k@0, k@0")
    assert [f.value for f in h.run("PT 1101")] == [4]
    fired = h.run("PT 1200, k@0, k@0, k@0")  # nested fires first: timeout cleared
    assert [f.value for f in fired] == [7]
    assert h.op.timers(("k",)) == ([], [])


def test_delta_trigger():
    h = Harness(OperatorConfig(GlobalWindows(), SUM, DeltaTrigger(0, 2.0)))
    assert h.run("k:1@0, k:2@0") == []
    assert [f.value for f in h.run("k:5@0")] == [8]  # |5 - 1| > 2
    assert h.run("k:7@0") == []  # |7 - 5| = 2 is not > 2
    assert [f.value for f in h.run("k:7.5@0")] == [22.5]


def test_continuous_processing_time_on_processing_window():
    cfg = OperatorConfig(
        TumblingWindows(1000, event_time=False), COUNT, ContinuousProcessingTimeTrigger(300)
    )
    h = Harness(cfg)
    h.run("PT 10")
    h.op.process_element(("k",), None, ())
    fired = h.run("PT 2000")
    # fires at 300, 600, 900 and at the cap 999; the cleanup at 999 ends it
    assert [(f.value, f.pane_timing) for f in fired] == [(1, "EARLY")] * 3 + [(1, "ON_TIME")]
    assert h.op.active_keys() == []


# -------------------------------------------------------------------- evictors


def test_count_evictor_after_session_merge_orders_by_arrival():
    cfg = OperatorConfig(SessionWindows(3000), SUM, evictor=CountEvictor(2))
    h = Harness(cfg)
    h.run("k:1@5000, k:10@1000, k:100@3500")  # the last row bridges both sessions
    assert sums(h.run("END")) == [("k", 110, 1000, 8000)]


def test_delta_evictor():
    cfg = OperatorConfig(TumblingWindows(1000), SUM, evictor=DeltaEvictor(0, 2.0))
    h = Harness(cfg)
    assert [f.value for f in h.run("k:1@0, k:5@1, k:6@2, END")] == [11]


def test_time_evictor_after_and_empty_buffer():
    cfg = OperatorConfig(GlobalWindows(), COUNT, CountTrigger(2), TimeEvictor(100, after=True))
    h = Harness(cfg)
    assert [f.value for f in h.run("k@0, k@500")] == [2]  # evicts 0 after the firing
    assert [f.value for f in h.run("k@1000, k@1050")] == [3]


def test_evict_before_everything_still_emits_like_flink():
    # Flink calls the window function on the empty remainder (COUNT = 0, SUM = None).
    cfg = OperatorConfig(
        TumblingWindows(1000),
        (AggregateSpec("COUNT_STAR"), AggregateSpec("SUM", 0)),
        evictor=DeltaEvictor(0, -1.0),
    )
    h = Harness(cfg)
    assert [f.value for f in h.run("k:1@0, END")] == [(0, None)]


# ----------------------------------------------------------------------- batch


def test_process_batch_equals_row_loop():
    import numpy as np

    cfg = OperatorConfig(
        SessionWindows(100),
        (AggregateSpec("COUNT_STAR"), AggregateSpec("MAX", 0)),
        allowed_lateness=50,
        late_output=True,
    )
    rows = [
        (("a",), 10, 1.0),
        (("b",), 20, None),
        (("a",), 400, 3.0),
        (("a",), 30, 2.0),
        (("b",), None, 1.0),
        (("a",), 1000, 5.0),
    ]
    wms = [-(2**63), 0, 10, 300, 300, 300]
    loop = WindowOperator(cfg)
    for (k, ts, v), wm in zip(rows, wms, strict=True):
        loop.advance_watermark(wm)
        loop.process_element(k, ts, (v,))
    loop.end_of_input()
    batch = WindowOperator(cfg)
    batch.process_batch(
        RowBatch(
            keys=[r[0] for r in rows],
            timestamps=np.array([r[1] or 0 for r in rows], dtype=np.int64),
            columns=([r[2] for r in rows],),
            watermark_before=np.array(wms, dtype=np.int64),
            timestamp_valid=np.array([r[1] is not None for r in rows]),
        )
    )
    batch.end_of_input()
    assert sorted(batch.drain(), key=repr) == sorted(loop.drain(), key=repr)
    assert batch.drain_late() == loop.drain_late()
    assert batch.counters == loop.counters


def test_after_end_of_input_every_window_is_late_even_with_huge_lateness():
    # cleanupTime overflows to MAX_TIME, and MAX_TIME <= watermark after the end
    for assigner in (TumblingWindows(1000), SessionWindows(1000)):
        cfg = OperatorConfig(assigner, COUNT, allowed_lateness=2**62, late_output=True)
        op = WindowOperator(cfg)
        op.end_of_input()
        op.process_element(("k",), 2**62, ())
        assert op.counters.late_rows == 1 and op.drain_late()[0][1] == 2**62


def test_row_batch_rejects_ragged_columns():
    with pytest.raises(ValueError, match=r"columns\[0\] has 1 rows, keys has 2"):
        RowBatch(keys=[("a",), ("b",)], timestamps=[1, 2], columns=([1],), watermark_before=[0, 0])


def test_every_of_event_time_on_a_global_window_ends_at_end_of_input():
    """A window without an end: Flink would fire once per interval up to Long.MAX.

    a@5 arms the boundary 1000; WM 10000 fires the boundaries 1000..10000 (10
    panes); at end of input the pending boundary 11000 passes without firing
    and the max-timestamp timer fires the window once more (docs/runtime.md,
    "Decisions").
    """
    from wql.runtime.assigners import GlobalWindows
    from wql.runtime.triggers import ContinuousEventTimeTrigger, PurgingTrigger

    for trigger, counts in (
        (ContinuousEventTimeTrigger(1000), [1] * 11),
        (PurgingTrigger(ContinuousEventTimeTrigger(1000)), [1]),
    ):
        op = WindowOperator(
            OperatorConfig(GlobalWindows(), (AggregateSpec("COUNT_STAR"),), trigger=trigger)
        )
        op.process_element(("a",), 5, ())
        op.advance_watermark(10_000)
        op.end_of_input()
        assert [r[-1] for r in op.drain()] == counts
