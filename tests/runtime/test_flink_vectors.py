"""The 11 Flink test-vector groups (from Flink's WindowOperator test suites), one test each.

Outputs are compared step by step: what each watermark (or row) emits, with
window bounds and the emitted timestamp (= window max timestamp).
"""

from __future__ import annotations

from wql.runtime import (
    AggregateSpec,
    ContinuousEventTimeTrigger,
    CountEvictor,
    CountTrigger,
    DynamicSessionWindows,
    EventTimeTrigger,
    GlobalWindows,
    MergingWindowSet,
    OperatorConfig,
    PurgingTrigger,
    SessionWindows,
    SlidingWindows,
    TimeEvictor,
    TimeWindow,
    TumblingWindows,
)
from wql.runtime.assigners import merge_time_windows
from wql.runtime.testing import Harness, sums

SUM = (AggregateSpec("SUM", 0),)
INPUT_1 = "k2:1@3999, k2:1@3000, k1:1@20, k1:1@0, k1:1@999, k2:1@1998, k2:1@1999, k2:1@1000"


def test_1_tumbling():
    h = Harness(OperatorConfig(TumblingWindows(3000), SUM))
    assert h.run(INPUT_1) == []
    assert h.run("WM 999, WM 1999") == []
    fired = h.run("WM 2999")
    assert sums(fired) == [("k1", 3, 0, 3000), ("k2", 3, 0, 3000)]
    assert {f.timestamp for f in fired} == {2999}
    assert h.run("WM 3999, WM 4999") == []
    fired = h.run("WM 5999")
    assert sums(fired) == [("k2", 2, 3000, 6000)]
    assert fired[0].timestamp == 5999


def test_2_sliding():
    h = Harness(OperatorConfig(SlidingWindows(size=3000, slide=1000), SUM))
    h.run(INPUT_1)
    assert sums(h.run("WM 999")) == [("k1", 3, -2000, 1000)]
    assert sums(h.run("WM 1999")) == [("k1", 3, -1000, 2000), ("k2", 3, -1000, 2000)]
    assert sums(h.run("WM 2999")) == [("k1", 3, 0, 3000), ("k2", 3, 0, 3000)]
    assert sums(h.run("WM 3999")) == [("k2", 5, 1000, 4000)]
    assert sums(h.run("WM 4999")) == [("k2", 2, 2000, 5000)]
    fired = h.run("WM 5999")
    assert sums(fired) == [("k2", 2, 3000, 6000)]
    assert fired[0].timestamp == 5999


def test_3_session():
    h = Harness(OperatorConfig(SessionWindows(3000), SUM))
    h.run(
        "k2:1@0, k2:2@1000, k2:3@2500, k1:1@10, k1:2@1000, k1:3@2500,"
        " k2:4@5501, k2:5@6000, k2:5@6000, k2:6@6050"
    )
    assert sums(h.run("WM 12000")) == [
        ("k1", 6, 10, 5500),
        ("k2", 6, 0, 5500),
        ("k2", 20, 5501, 9050),
    ]
    h.run("k2:10@15000, k2:20@15000")
    fired = h.run("WM 17999")
    assert sums(fired) == [("k2", 30, 15000, 18000)]
    assert fired[0].timestamp == 17999


def test_4_session_purging_count():
    h = Harness(OperatorConfig(SessionWindows(3000), SUM, PurgingTrigger(CountTrigger(4))))
    assert h.run("k2:1@0, k2:2@1000, k2:3@2500") == []
    assert sums(h.run("k2:4@3500")) == [("k2", 10, 0, 6500)]
    assert h.run("k1:1@10, k1:2@1000, k1:3@2500, k1:1@6000, k1:2@6500, k1:3@7000") == []
    assert sums(h.run("k1:10@4500")) == [("k1", 22, 10, 10000)]


def test_5_session_continuous_event_time():
    h = Harness(OperatorConfig(SessionWindows(3000), SUM, ContinuousEventTimeTrigger(2000)))
    h.run("k1:1@1500, k2:1@0, k2:3@2500, k2:2@1000")
    assert sums(h.run("WM 2500")) == [("k1", 1, 1500, 4500), ("k2", 6, 0, 5500)]
    h.run("k2:5@4000")
    assert h.run("WM 3000") == []
    h.run("k1:2@4000, k2:4@3500")
    assert sums(h.run("WM 4000")) == [("k1", 3, 1500, 7000), ("k2", 15, 0, 7000)]


def _gap(key, value):
    if key == "k1":
        return (value, 3000)
    return (value, 1000 if value == 10 else 2000)


def test_6_dynamic_gap():
    h = Harness(OperatorConfig(DynamicSessionWindows(gap_index=1), SUM), values=_gap)
    h.run("k1:3@10, k2:4@5000, k2:5@6000")
    assert sums(h.run("WM 8999")) == [("k1", 3, 10, 3010), ("k2", 9, 5000, 8000)]
    h.run("k2:1@9000, k2:2@10000, k2:10@10500")
    assert sums(h.run("WM 12999")) == [("k2", 13, 9000, 12000)]
    h.run("k2:10@13000, k2:10@13500, k2:1@14000")
    assert sums(h.run("WM 16999")) == [("k2", 21, 13000, 16000)]


def test_7_lateness_purging():
    h = Harness(
        OperatorConfig(
            TumblingWindows(2000),
            SUM,
            PurgingTrigger(EventTimeTrigger()),
            allowed_lateness=500,
            late_output=True,
        )
    )
    h.run("k2:1@500, WM 1500, k2:1@1300")
    fired = h.run("WM 2300")
    assert [(f.key, f.value, f.timestamp, f.pane_index, f.pane_timing) for f in fired] == [
        ("k2", 2, 1999, 0, "ON_TIME")
    ]
    fired = h.run("k2:1@1997")  # cleanup 2499 > 2300: accepted and fires at once
    assert [(f.key, f.value, f.timestamp, f.pane_index, f.pane_timing) for f in fired] == [
        ("k2", 1, 1999, 1, "LATE")
    ]
    assert h.run("WM 6000, k2:1@1998") == []
    assert [(r.key, r.timestamp, r.values) for r in h.late()] == [("k2", 1998, (1,))]
    assert h.op.counters.late_rows == 1
    assert h.op.counters.dropped == {}


def test_8_sliding_late_rows_taken_by_other_windows():
    h = Harness(OperatorConfig(SlidingWindows(size=3000, slide=1000), SUM, late_output=True))
    h.run("k2@1000")
    assert sums(h.run("WM 1999")) == [("k2", 1, -1000, 2000)]
    h.run("k2@2000")
    assert sums(h.run("WM 3000")) == [("k2", 2, 0, 3000)]
    assert h.run("k2@2400, k2@2400") == []
    assert h.late() == []  # [0,3000) dropped them, [1000,4000) and [2000,5000) took them
    assert h.op.counters.dropped == {} and h.op.counters.late_rows == 0
    assert sums(h.run("END")) == [("k2", 3, 2000, 5000), ("k2", 4, 1000, 4000)]


def _vector_9(lateness: int, purging: bool) -> Harness:
    trigger = PurgingTrigger(EventTimeTrigger()) if purging else EventTimeTrigger()
    h = Harness(
        OperatorConfig(
            SessionWindows(3000),
            (AggregateSpec("COUNT_STAR"),),
            trigger,
            allowed_lateness=lateness,
            late_output=True,
        )
    )
    h.run("e@1000, WM 1999, e@2000, WM 4998, e@4500, e@8500, WM 7400")
    assert h.run("e@7000") == []  # bridges [4500,7500) and [8500,11500)
    assert sums(h.run("WM 11501")) == [("e", 5, 1000, 11500)]
    assert sums(h.run("e@11600, WM 14600")) == [("e", 1, 11600, 14600)]
    return h


def test_9a_session_late_merge_no_lateness():
    h = _vector_9(0, purging=False)
    assert h.run("e@10000") == []
    assert [(r.key, r.timestamp) for r in h.late()] == [("e", 10000)]
    assert h.run("e@14500") == []
    assert sums(h.run("WM 20000")) == [("e", 1, 14500, 17500)]


def test_9b_session_late_merge_lateness_purging():
    h = _vector_9(10, purging=True)
    fired = h.run("e@10000")
    assert sums(fired) == [("e", 1, 10000, 14600)]
    assert fired[0].pane_timing == "LATE" and fired[0].pane_index == 1
    assert h.run("e@14500") == []
    assert sums(h.run("WM 20000")) == [("e", 1, 10000, 17500)]
    assert h.late() == []


def test_9c_session_late_merge_lateness_accumulating():
    h = _vector_9(10, purging=False)
    assert sums(h.run("e@10000")) == [("e", 2, 10000, 14600)]
    assert h.run("e@14500") == []
    fired = h.run("WM 20000")
    assert sums(fired) == [("e", 3, 10000, 17500)]
    assert fired[0].pane_timing == "ON_TIME"


def test_9e_session_late_merge_long_lateness():
    h = _vector_9(10000, purging=False)
    assert sums(h.run("e@10000")) == [("e", 7, 1000, 14600)]
    assert h.run("e@14500") == []
    assert sums(h.run("WM 20000")) == [("e", 8, 1000, 17500)]


def test_10_evictors():
    h = Harness(OperatorConfig(GlobalWindows(), SUM, CountTrigger(2), CountEvictor(4, after=True)))
    fired = h.run(", ".join(["k2@0"] * 8))
    assert [f.value for f in fired] == [2, 4, 6, 6]
    assert [f.pane_index for f in fired] == [0, 1, 2, 3]
    assert all(f.start is None and f.end is None for f in fired)

    h = Harness(OperatorConfig(TumblingWindows(4000), SUM, evictor=TimeEvictor(2000)))
    h.run("k2@1000, k2@3999")
    fired = h.run("WM 3999")
    assert [(f.key, f.value, f.timestamp) for f in fired] == [("k2", 1, 3999)]


def test_11_merging_window_set():
    calls = []
    merge = lambda *a: calls.append(a)  # noqa: E731
    s = MergingWindowSet(merge_time_windows, {})
    assert s.add_window(TimeWindow(0, 4), merge) == TimeWindow(0, 4)
    assert s.add_window(TimeWindow(3, 5), merge) == TimeWindow(0, 5)
    assert s.get_state_window(TimeWindow(0, 5)) == TimeWindow(0, 4)
    assert s.add_window(TimeWindow(4, 6), merge) == TimeWindow(0, 6)
    assert s.get_state_window(TimeWindow(0, 6)) == TimeWindow(0, 4)

    s = MergingWindowSet(merge_time_windows, {})
    s.add_window(TimeWindow(11, 14), merge)
    assert s.add_window(TimeWindow(10, 13), merge) == TimeWindow(10, 14)
    assert s.get_state_window(TimeWindow(10, 14)) == TimeWindow(11, 14)

    s = MergingWindowSet(merge_time_windows, {})
    for w in (TimeWindow(0, 3), TimeWindow(5, 8), TimeWindow(10, 13)):
        s.add_window(w, merge)
    calls.clear()
    assert s.add_window(TimeWindow(8, 10), merge) == TimeWindow(5, 13)
    assert calls == [
        (
            TimeWindow(5, 13),
            [TimeWindow(5, 8), TimeWindow(10, 13)],
            TimeWindow(5, 8),
            [TimeWindow(10, 13)],
        )
    ]
    assert s.add_window(TimeWindow(3, 5), merge) == TimeWindow(0, 13)
    # WQL's rule (Flink: hash-set order): the earliest merged window's state window
    assert s.mapping == {TimeWindow(0, 13): TimeWindow(0, 3)}
