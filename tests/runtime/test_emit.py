"""Emit semantics of the runtime: final-pane marking (``is_last``).

Hand-derived vectors (notation of ``wql.runtime.testing``: ``k:v@ts``,
``WM t``, ``PT t``, ``END``) pin when a pane is the window's last, per window
kind and trigger (docs/runtime.md, "Final panes"), and hypothesis properties
check on random streams with early, late, purging and merging firings that
``is_last`` is never TRUE on a pane a later pane of the same window follows,
and that marking changes no firing.
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.runtime.strategies import ALL_AGGS, CONFIGS, rows_st
from wql.runtime import (
    AggregateSpec,
    ContinuousEventTimeTrigger,
    CountTrigger,
    DynamicSessionWindows,
    EarlyLateTrigger,
    EventTimeTrigger,
    GlobalWindows,
    OnUpdateTrigger,
    OperatorConfig,
    PanePurgingTrigger,
    ProcessingTimeoutTrigger,
    PurgingTrigger,
    RowBatch,
    SessionWindows,
    SlidingWindows,
    TumblingWindows,
    WindowOperator,
    count_windows,
)
from wql.runtime import snapshot as snap
from wql.runtime.assigners import DROP_IN_NO_FIRING
from wql.runtime.testing import Harness

SUM = (AggregateSpec("SUM", 0),)


def marked(assigner: Any, trigger: Any = None, lateness: int = 0) -> Harness:
    return Harness(
        OperatorConfig(assigner, SUM, trigger=trigger, allowed_lateness=lateness, mark_last=True)
    )


def lasts(fired: list) -> list[tuple]:
    """(key, value, start, end, pane_index, pane_timing, is_last) of each firing."""
    return [(f.key, f.value, f.start, f.end, f.pane_index, f.pane_timing, f.is_last) for f in fired]


# --------------------------------------------------------------------------- vectors


def test_time_window_without_lateness_its_on_time_pane_is_last():
    # Flink vector 1, k1: the watermark timer at 2999 is also the cleanup timer.
    h = marked(TumblingWindows(3000))
    assert lasts(h.run("k1:1@20, k1:1@0, k1:1@999, WM 2999")) == [
        ("k1", 3, 0, 3000, 0, "ON_TIME", True)
    ]


def test_time_window_with_lateness_has_no_last_pane():
    # Flink vector 7 without PURGING: cleanup at 1999 + 500 = 2499, where the
    # WATERMARK trigger does not fire; no pane is the one of the cleanup timer.
    h = marked(TumblingWindows(2000), lateness=500)
    assert lasts(h.run("k2:1@500, WM 1999, k2:1@1300, WM 2499, END")) == [
        ("k2", 1, 0, 2000, 0, "ON_TIME", False),
        ("k2", 2, 0, 2000, 1, "LATE", False),
    ]


def test_every_fires_early_then_its_max_timestamp_pane_is_last():
    # EVERY 1 s on TUMBLE 3 s: boundaries 1000, 2000 fire EARLY; 2999 is both the
    # max-timestamp timer and the cleanup timer (lateness 0): one callback, last.
    h = marked(TumblingWindows(3000), ContinuousEventTimeTrigger(1000))
    assert lasts(h.run("k:1@100, WM 1000, k:2@1500, WM 2999")) == [
        ("k", 1, 0, 3000, 0, "EARLY", False),
        ("k", 3, 0, 3000, 1, "EARLY", False),
        ("k", 3, 0, 3000, 2, "ON_TIME", True),
    ]


def test_a_count_trigger_does_not_fire_at_cleanup_so_no_pane_is_last():
    h = marked(TumblingWindows(3000), CountTrigger(2))
    assert lasts(h.run("k:1@1, k:2@2, k:4@3, WM 2999, END")) == [
        ("k", 3, 0, 3000, 0, "EARLY", False)
    ]


def test_early_late_on_time_pane_is_last_only_without_lateness():
    trigger = EarlyLateTrigger(CountTrigger(1), None)
    h = marked(TumblingWindows(1000), trigger)
    assert lasts(h.run("k:1@10, WM 999")) == [
        ("k", 1, 0, 1000, 0, "EARLY", False),
        ("k", 1, 0, 1000, 1, "ON_TIME", True),
    ]
    h = marked(TumblingWindows(1000), trigger, lateness=100)
    assert lasts(h.run("k:1@10, WM 999, k:2@20, WM 1099, END")) == [
        ("k", 1, 0, 1000, 0, "EARLY", False),
        ("k", 1, 0, 1000, 1, "ON_TIME", False),
        ("k", 3, 0, 1000, 2, "LATE", False),
    ]


def test_a_trigger_firing_on_the_cleanup_timer_marks_that_pane_last():
    # TIMEOUT fires on any timer of its window (Flink's ProcessingTimeoutTrigger),
    # the cleanup timer at 1999 + 1000 included: that pane is the last.
    h = marked(TumblingWindows(2000), ProcessingTimeoutTrigger(CountTrigger(5), 60_000), 1000)
    assert lasts(h.run("PT 0, k:1@100, k:2@200, WM 2999")) == [("k", 3, 0, 2000, 0, "LATE", True)]


def test_session_without_lateness_fires_its_last_pane_and_cannot_merge_after():
    # Gap 3 s: [0, 4000) fires at 3999 and is cleaned up. A later row at 3000
    # (late, its own window [3000, 6000) is not) starts a new session; it does
    # not merge with the one that is gone.
    h = marked(SessionWindows(3000))
    assert lasts(h.run("k:1@0, k:2@1000, WM 3999, k:4@3000, END")) == [
        ("k", 3, 0, 4000, 0, "ON_TIME", True),
        ("k", 4, 3000, 6000, 0, "ON_TIME", True),
    ]


def test_session_with_lateness_merging_late_rows_marks_no_pane():
    # Flink vector 9(c), lateness 10, accumulating: panes of windows that can still
    # merge are not last; their cleanup timers fire nothing.
    h = marked(SessionWindows(3000), lateness=10)
    out = h.run(
        "e:1@1000, WM 1999, e:1@2000, WM 4998, e:1@4500, e:1@8500, WM 7400, e:1@7000, "
        "WM 11501, e:1@11600, WM 14600, e:1@10000, e:1@14500, WM 20000"
    )
    assert [f.is_last for f in out] == [False] * len(out)
    assert (out[-1].value, out[-1].start, out[-1].end) == (3, 10000, 17500)


def test_processing_time_window_fires_last_at_its_end():
    h = marked(TumblingWindows(1000, event_time=False))
    assert lasts(h.run("PT 10, k:1@0, k:2@0, PT 999, PT 1000")) == [
        ("k", 3, 0, 1000, 0, "ON_TIME", True)
    ]


@pytest.mark.parametrize(
    ("assigner", "trigger"),
    [
        (GlobalWindows(), EventTimeTrigger()),
        (GlobalWindows(), PurgingTrigger(CountTrigger(2))),
        count_windows(2, 1)[:2],
    ],
    ids=["global-watermark", "global-purging-count", "count-window"],
)
def test_windows_without_an_end_are_never_cleaned_up_so_never_last(assigner, trigger):
    h = marked(assigner, trigger)
    out = h.run("k:1@1, k:2@2, k:3@3, k:4@4, END")
    assert out and not any(f.is_last for f in out)


# --------------------------------------------------------------------------- properties

#: Configurations with early, on-time, late, purging and merging firings.
MARK_CONFIGS = [
    (TumblingWindows(10), None),
    (TumblingWindows(10), EarlyLateTrigger(CountTrigger(2), CountTrigger(1))),
    (TumblingWindows(10), PurgingTrigger(EarlyLateTrigger(CountTrigger(2), None))),
    (SlidingWindows(size=12, slide=4), ContinuousEventTimeTrigger(3)),
    (SlidingWindows(size=12, slide=4), CountTrigger(2)),
    (SessionWindows(6), None),
    (SessionWindows(6), EarlyLateTrigger(CountTrigger(1), None)),
    (SessionWindows(6), PurgingTrigger(ContinuousEventTimeTrigger(4))),
    (DynamicSessionWindows(1), EarlyLateTrigger(CountTrigger(2), CountTrigger(1))),
    (TumblingWindows(10, event_time=False), None),
    (TumblingWindows(10), ProcessingTimeoutTrigger(CountTrigger(3), 5)),
    (GlobalWindows(), PurgingTrigger(CountTrigger(2))),
    (TumblingWindows(10), OnUpdateTrigger(3, True, True, 5)),
    (SessionWindows(6), EarlyLateTrigger(OnUpdateTrigger(2, True, True), None)),
    (SessionWindows(6), EarlyLateTrigger(None, OnUpdateTrigger(4, True, True, 30))),
]

steps_st = st.lists(
    st.one_of(
        st.tuples(
            st.just("row"),
            st.sampled_from([("a",), ("b",)]),
            st.integers(0, 60),
            st.integers(1, 9),
            st.integers(-1, 9),  # dynamic gap; <= 0 is dropped
        ),
        st.tuples(st.just("wm"), st.integers(0, 80)),
        st.tuples(st.just("pt"), st.integers(0, 80)),
    ),
    max_size=40,
)


def run_steps(config: OperatorConfig, steps: list, end: bool, fast: bool = True) -> list[tuple]:
    op = WindowOperator(config, fast=fast)
    out: list[tuple] = []
    for step in steps:
        if step[0] == "row":
            _, key, ts, value, gap = step
            op.process_element(key, ts, (value, gap))
        elif step[0] == "wm":
            op.advance_watermark(step[1])
        else:
            op.advance_processing_time(step[1])
        out.extend(op.drain())
    if end:
        op.end_of_input()
        out.extend(op.drain())
    return out


def window_of(row: tuple) -> tuple:
    return (row[0], row[1], row[2])


@settings(max_examples=150, deadline=None)
@given(
    shape=st.sampled_from(MARK_CONFIGS),
    lateness=st.sampled_from([0, 0, 5, 30]),
    steps=steps_st,
    end=st.booleans(),
)
def test_is_last_is_never_followed_by_a_pane_of_its_window(shape, lateness, steps, end):
    assigner, trigger = shape
    config = OperatorConfig(
        assigner,
        (AggregateSpec("SUM", 0),),
        trigger=trigger,
        allowed_lateness=lateness if assigner.is_event_time else 0,
        mark_last=True,
    )
    out = run_steps(config, steps, end)
    closed: set[tuple] = set()
    for row in out:
        assert window_of(row) not in closed, (row, out)
        if row[-2]:
            closed.add(window_of(row))
    # marking changes nothing else: the same firings without it
    unmarked = run_steps(
        OperatorConfig(assigner, config.aggregates, trigger, None, config.allowed_lateness),
        steps,
        end,
    )
    assert [row[:-2] for row in out] == unmarked
    assert {row[-1] for row in out} <= {"+I"}


@settings(max_examples=60, deadline=None)
@given(steps=steps_st, lateness=st.sampled_from([0, 0, 7]))
def test_default_trigger_without_lateness_every_window_ends_with_a_last_pane(steps, lateness):
    # Event-time windows, WATERMARK trigger: each window fires ON_TIME at its end;
    # without lateness that firing is the cleanup, so at end of input every
    # window's final row is marked, and only that one.
    config = OperatorConfig(TumblingWindows(10), SUM, allowed_lateness=lateness, mark_last=True)
    out = run_steps(config, steps, end=True)
    final: dict[tuple, tuple] = {}
    for row in out:
        final[window_of(row)] = row
    if lateness == 0:
        assert all(row[-2] for row in final.values())
    assert sum(row[-2] for row in out) == (len(final) if lateness == 0 else 0)


@pytest.mark.parametrize(
    ("path", "name"),
    [
        *(("per-row", name) for name in CONFIGS if name != "count-window"),
    ],
)
@settings(max_examples=25, deadline=None)
@given(data=st.data(), rows=rows_st, lateness=st.sampled_from([0, 1, 7]))
def test_marking_fast_paths_equal_the_plain_path(path, name, data, rows, lateness):
    assigner_st, trigger, _, *evictor = CONFIGS[name]
    config = OperatorConfig(
        data.draw(assigner_st),
        ALL_AGGS,
        trigger=trigger,
        evictor=evictor[0] if evictor else None,
        allowed_lateness=lateness,
        mark_last=True,
    )
    fast = WindowOperator(config)
    plain = WindowOperator(config, fast=False)
    clock = -60
    for key, ts, v, s, gap, step in rows:
        clock += step
        for op in (fast, plain):
            op.advance_watermark(clock)
            op.advance_processing_time(clock)
            op.process_element(key, ts, (v, s, gap))
        assert fast.drain() == plain.drain()
    for op in (fast, plain):
        op.end_of_input()
    assert fast.drain() == plain.drain()
    assert snap.loads(fast.snapshot()) == snap.loads(plain.snapshot())


# --------------------------------------------------------------------------- accumulation

#: TUMBLE 2 s, lateness 1 s, EARLY COUNT(2), every late row fires: an EARLY pane at
#: the 2nd row, ON_TIME at the watermark, a LATE pane for each of two late rows.
ACCUMULATION_SCRIPT = "k:1@100, k:2@200, k:4@300, WM 1999, k:8@400, k:16@500, WM 2999"
EARLY_COUNT = EarlyLateTrigger(CountTrigger(2), None)


def accumulated(discard: frozenset[str] | None, purging: bool = False) -> list[tuple]:
    trigger: Any = EARLY_COUNT
    if purging:
        trigger = PurgingTrigger(trigger)
    elif discard is not None:
        trigger = PanePurgingTrigger(trigger, discard, True)
    h = Harness(OperatorConfig(TumblingWindows(2000), SUM, trigger=trigger, allowed_lateness=1000))
    return [(f.pane_index, f.pane_timing, f.value) for f in h.run(ACCUMULATION_SCRIPT)]


@pytest.mark.parametrize(
    ("discard", "values"),
    [
        # accumulating (no EMIT, or EMIT ACCUMULATING): every pane holds every row
        (frozenset(), [3, 7, 15, 31]),
        # EMIT DISCARDING: every pane only the rows since the previous one
        (frozenset({"EARLY", "ON_TIME", "LATE"}), [3, 4, 8, 16]),
        # EMIT EARLY DISCARDING: the early rows are gone from the ON_TIME pane on
        (frozenset({"EARLY"}), [3, 4, 12, 28]),
        # EMIT ON_TIME DISCARDING, LATE DISCARDING: late panes only the late rows
        (frozenset({"ON_TIME", "LATE"}), [3, 7, 8, 16]),
        # EMIT LATE DISCARDING: the first late pane still holds the on-time rows
        (frozenset({"LATE"}), [3, 7, 15, 16]),
    ],
    ids=["accumulating", "discarding", "early", "on_time+late", "late"],
)
def test_accumulation_per_pane_timing(discard, values):
    timings = ["EARLY", "ON_TIME", "LATE", "LATE"]
    assert accumulated(discard) == list(zip(range(4), timings, values, strict=True))


def test_discarding_every_pane_is_purging():
    assert accumulated(frozenset({"EARLY", "ON_TIME", "LATE"})) == accumulated(None, purging=True)


def test_discarding_early_panes_of_merging_sessions():
    # Gap 3 s, every row fires EARLY. Discarding: [0,3000) fires 1 and purges,
    # [5000,8000) fires 2 and purges; 4@2500 bridges them: the merged session
    # [0,8000) holds only the new row (the others were purged), pane_index 1
    # (the larger count of the merged sessions). Accumulating: it holds all.
    def run(discard: frozenset[str]) -> list[tuple]:
        trigger = PanePurgingTrigger(EarlyLateTrigger(CountTrigger(1), None), discard, True)
        h = Harness(OperatorConfig(SessionWindows(3000), SUM, trigger=trigger))
        out = h.run("k:1@0, k:2@5000, k:4@2500, WM 8000")
        return [(f.value, f.start, f.end, f.pane_index, f.pane_timing) for f in out]

    assert run(frozenset({"EARLY"})) == [
        (1, 0, 3000, 0, "EARLY"),
        (2, 5000, 8000, 0, "EARLY"),
        (4, 0, 8000, 1, "EARLY"),
    ]
    assert run(frozenset()) == [
        (1, 0, 3000, 0, "EARLY"),
        (2, 5000, 8000, 0, "EARLY"),
        (7, 0, 8000, 1, "EARLY"),
        (7, 0, 8000, 2, "ON_TIME"),
    ]


@settings(max_examples=100, deadline=None)
@given(shape=st.sampled_from(MARK_CONFIGS), lateness=st.sampled_from([0, 5, 30]), steps=steps_st)
def test_pane_purging_for_every_timing_equals_purging(shape, lateness, steps):
    assigner, trigger = shape
    trigger = trigger if trigger is not None else assigner.default_trigger()
    lateness = lateness if assigner.is_event_time else 0

    def config(t: Any) -> OperatorConfig:
        return OperatorConfig(assigner, SUM, trigger=t, allowed_lateness=lateness)

    every = frozenset({"EARLY", "ON_TIME", "LATE"})
    pane = PanePurgingTrigger(trigger, every, assigner.is_event_time)
    assert run_steps(config(pane), steps, True) == run_steps(
        config(PurgingTrigger(trigger)), steps, True
    )
    # and discarding nothing is the trigger itself
    none = PanePurgingTrigger(trigger, frozenset(), assigner.is_event_time)
    assert run_steps(config(none), steps, True) == run_steps(config(trigger), steps, True)


# --------------------------------------------------------------------------- ON UPDATE


def on_update(assigner: Any, trigger: Any, script: str, lateness: int = 0) -> list[tuple]:
    config = OperatorConfig(
        assigner, SUM, trigger=trigger, allowed_lateness=lateness, mark_last=True
    )
    return [
        (f.value, f.start, f.end, f.pane_index, f.pane_timing, f.is_last)
        for f in Harness(config).run(script)
    ]


def test_on_update_fires_at_the_next_boundary_only_after_rows():
    # TUMBLE 10 s, EVERY 2 s ON UPDATE: 500 arms 2000; 700 joins it; nothing is
    # armed at 4000 (no row since 2000); 4500 arms 6000; the cleanup at 9999
    # finds nothing pending: every row was in a firing, no ON_TIME repeat.
    script = "k:1@500, k:2@700, WM 2000, WM 4000, k:4@4500, WM 9999"
    assert on_update(TumblingWindows(10_000), OnUpdateTrigger(2000, True, True), script) == [
        (3, 0, 10_000, 0, "EARLY", False),
        (7, 0, 10_000, 1, "EARLY", False),
    ]
    # EVERY 2 s (Flink's ContinuousEventTimeTrigger) fires at every boundary
    every = Harness(OperatorConfig(TumblingWindows(10_000), SUM, ContinuousEventTimeTrigger(2000)))
    assert [(f.value, f.pane_timing) for f in every.run(script)] == [
        (3, "EARLY"),
        (3, "EARLY"),
        (7, "EARLY"),
        (7, "EARLY"),
        (7, "ON_TIME"),
    ]


def test_on_update_never_passes_the_window_end():
    # 9500 arms 10000, capped at the window's end 9999: ON_TIME, and the cleanup's
    script = "k:1@500, WM 2000, k:2@9500, WM 9999"
    assert on_update(TumblingWindows(10_000), OnUpdateTrigger(2000, True, True), script) == [
        (1, 0, 10_000, 0, "EARLY", False),
        (3, 0, 10_000, 1, "ON_TIME", True),
    ]


def test_on_update_as_late_trigger_batches_late_rows_up_to_the_cleanup():
    # lateness 3 s: after the ON_TIME pane, 600 arms the boundary after the
    # watermark (10000), 700 joins; 800 at watermark 12000 arms 14000, capped at
    # the cleanup time 12999: that LATE pane is the window's last.
    trigger = EarlyLateTrigger(None, OnUpdateTrigger(2000, True, True, lateness=3000))
    script = "k:1@500, WM 9999, k:2@600, k:4@700, WM 11000, WM 12000, k:8@800, WM 12999"
    assert on_update(TumblingWindows(10_000), trigger, script, lateness=3000) == [
        (1, 0, 10_000, 0, "ON_TIME", False),
        (7, 0, 10_000, 1, "LATE", False),
        (15, 0, 10_000, 2, "LATE", True),
    ]


def test_on_update_in_processing_time():
    # processing-time TUMBLE 10 s, EVERY 3 s OF PROCESSING TIME ON UPDATE: the
    # timer at 3000 fires once the clock passes it; 6500 arms 9000
    window = TumblingWindows(10_000, event_time=False)
    script = "PT 1000, k:1@0, k:2@0, PT 3001, PT 6500, k:4@0, PT 9000, PT 10000"
    assert on_update(window, OnUpdateTrigger(3000, False, True), script) == [
        (3, 0, 10_000, 0, "EARLY", False),
        (7, 0, 10_000, 1, "EARLY", False),
    ]


def test_on_update_merges_the_earliest_pending_timer():
    # SESSION gap 3 s: [0,3000) armed at 1000, [4000,7000) at 5000; 2500 bridges
    # them: the merged session takes 1000 and fires everything there once.
    script = "k:1@0, k:2@4000, WM 500, k:4@2500, WM 8000"
    assert on_update(SessionWindows(3000), OnUpdateTrigger(1000, True, True), script) == [
        (7, 0, 7000, 0, "EARLY", False),
    ]


def test_after_fires_a_delay_after_the_first_row_of_a_pane():
    # AFTER 2 s (Beam's pastFirstElementInPane().plusDelayOf(2 s)): 500 arms 2500, not
    # the boundary 2000; 2100 joins the armed pane, which fires at 2600 with both rows.
    # EVERY 2 s ON UPDATE fires 500 alone at 2000, and 2100 arms the boundary 4000.
    script = "k:1@500, WM 2000, k:2@2100, WM 2600, WM 9999"
    after = OnUpdateTrigger(2000, True, True, aligned=False)
    assert on_update(TumblingWindows(10_000), after, script) == [
        (3, 0, 10_000, 0, "EARLY", False),
    ]
    assert on_update(TumblingWindows(10_000), OnUpdateTrigger(2000, True, True), script) == [
        (1, 0, 10_000, 0, "EARLY", False),
        (3, 0, 10_000, 1, "EARLY", False),
    ]
    # a row whose delay passes the window's end fires at the end: an ON_TIME pane
    assert on_update(TumblingWindows(10_000), after, "k:1@500, WM 2600, k:2@9000, WM 9999") == [
        (1, 0, 10_000, 0, "EARLY", False),
        (3, 0, 10_000, 1, "ON_TIME", True),
    ]


def test_after_in_processing_time():
    # processing-time TUMBLE 10 s, AFTER 2 s OF PROCESSING TIME: the first row at
    # clock 1000 arms 3000, which fires once the clock passes it; 6500 arms 8500
    window = TumblingWindows(10_000, event_time=False)
    script = "PT 1000, k:1@0, PT 2500, k:2@0, PT 3001, PT 6500, k:4@0, PT 9000, PT 10000"
    trigger = OnUpdateTrigger(2000, False, True, aligned=False)
    assert on_update(window, trigger, script) == [
        (3, 0, 10_000, 0, "EARLY", False),
        (7, 0, 10_000, 1, "EARLY", False),
    ]


@settings(max_examples=120, deadline=None)
@given(
    assigner=st.sampled_from(
        [TumblingWindows(10), SlidingWindows(size=12, slide=4), SessionWindows(6)]
        + [DynamicSessionWindows(1)]
    ),
    interval=st.sampled_from([1, 3, 7, 20]),
    lateness=st.sampled_from([0, 5]),
    steps=steps_st,
)
def test_on_update_fires_every_row_once_and_never_without_a_new_row(
    assigner, interval, lateness, steps
):
    config = OperatorConfig(
        assigner,
        (AggregateSpec("COUNT_STAR"),),
        trigger=OnUpdateTrigger(interval, True, True, lateness),
        allowed_lateness=lateness,
    )
    op = WindowOperator(config)
    out = []
    for step in steps:
        if step[0] == "row":
            op.process_element(step[1], step[2], (step[3], step[4]))
        elif step[0] == "wm":
            op.advance_watermark(step[1])
        out.extend(op.drain())
    op.end_of_input()
    out.extend(op.drain())
    # bounded by the window's end or cleanup: every accepted row is in a firing
    assert DROP_IN_NO_FIRING not in op.counters.dropped
    # accumulating COUNT(*): a window's panes grow, so no pane fired without new rows
    last: dict[tuple, int] = {}
    for row in out:
        assert row[-1] > last.get(window_of(row), 0), out
        last[window_of(row)] = row[-1]
    assert op.active_keys() == []  # no timer or state left once every window is gone


# --------------------------------------------------------------------------- changelog

#: With early, on-time, late, purging, discarding and merging firings.
CHANGELOG_CONFIGS = [
    *MARK_CONFIGS,
    (SessionWindows(6), CountTrigger(2)),
    (
        SessionWindows(6),
        PanePurgingTrigger(
            EarlyLateTrigger(CountTrigger(1), CountTrigger(1)), frozenset({"EARLY"}), True
        ),
    ),
    (SessionWindows(5), PurgingTrigger(EarlyLateTrigger(CountTrigger(2), None))),
    (DynamicSessionWindows(1), OnUpdateTrigger(3, True, True, 30)),
    count_windows(3)[:2],
    (GlobalWindows(), CountTrigger(2)),
]


def changelog_pair(shape: tuple, lateness: int) -> tuple[OperatorConfig, OperatorConfig]:
    """The same query marking last panes (the panes) and as a changelog."""
    assigner, trigger = shape
    lateness = lateness if assigner.is_event_time else 0
    aggs = (AggregateSpec("SUM", 0), AggregateSpec("COLLECT_LIST", 0))
    marked = OperatorConfig(assigner, aggs, trigger, None, lateness, mark_last=True)
    changes = OperatorConfig(assigner, aggs, trigger, None, lateness, changelog=True)
    return marked, changes


def fold(table: dict, changes: list[tuple]) -> None:
    """Apply changelog rows to ``table`` (window -> row without op), checking each kind."""
    for row in changes:
        key, op = window_of(row), row[-1]
        if op in ("+I", "+U"):
            assert key not in table, ("an insert of a window that has a row", row)
            table[key] = row[:-1]
        else:
            assert op in ("-U", "-D"), row
            # a retraction carries exactly the values of the row it retracts
            assert table.get(key) == row[:-1], ("retracts another row", row, table.get(key))
            del table[key]


def live_windows(op: WindowOperator, key: Any) -> set:
    ks = op.key_states.get(key)
    if ks is None or ks.merging is None:
        return set()
    return set(ks.merging.mapping)


@settings(max_examples=200, deadline=None)
@given(
    shape=st.sampled_from(CHANGELOG_CONFIGS),
    lateness=st.sampled_from([0, 5, 30]),
    steps=steps_st,
    end=st.booleans(),
    restore=st.sampled_from([None, "key", "whole"]),
)
def test_folding_the_changelog_gives_the_latest_pane_of_every_live_window(
    shape, lateness, steps, end, restore
):
    marked_config, config = changelog_pair(shape, lateness)
    panes = WindowOperator(marked_config)
    changes = WindowOperator(config)
    table: dict = {}
    latest: dict = {}
    for i, step in enumerate(steps + ([("end",)] if end else [])):
        merged: set = set()
        if step[0] == "row":
            _, key, ts, value, gap = step
            if restore == "key":  # the streaming host's round trip, before every row
                changes.restore_key(key, changes.snapshot_key(key))
            before = live_windows(panes, key)
            for op in (panes, changes):
                op.process_element(key, ts, (value, gap))
            # a row never cleans a window up: the windows it made vanish were merged away
            merged = {(key, w.start, w.end) for w in before - live_windows(panes, key)}
        elif step[0] == "wm":
            for op in (panes, changes):
                op.advance_watermark(step[1])
        elif step[0] == "pt":
            for op in (panes, changes):
                op.advance_processing_time(step[1])
        else:
            for op in (panes, changes):
                op.end_of_input()
        fired = panes.drain()
        changed = changes.drain()
        # a changelog adds only retractions: its inserts are the panes (in the same
        # order per window; restored keys may fire equal-time timers in another key order)
        inserts = [r[:-1] for r in changed if r[-1] in ("+I", "+U")]
        assert sorted(inserts, key=window_of) == sorted((r[:-1] for r in fired), key=window_of)
        assert {r[-1] for r in changed} <= {"+I", "-U", "+U", "-D"}
        fold(table, changed)
        for row in fired:
            latest[window_of(row)] = row[:-1]
        for window in merged:
            latest.pop(window, None)
        assert table == latest
        if restore == "whole" and i == len(steps) // 2:
            changes = WindowOperator.restore(config, changes.snapshot())
    assert changes.counters == panes.counters
    if end:
        assert changes.active_keys() == [] or not shape[0].is_event_time


def test_changelog_of_an_early_session_that_merges_and_fires_late():
    # gap 3 s, lateness 2 s, every row fires EARLY, every late row LATE:
    # k@0 and k@5000 are two sessions (+I each); k@2500 bridges them: both rows
    # are retracted (-D), the merged session fires a row of its own (+I, pane 1);
    # the watermark fires it ON_TIME (-U, +U); k@7500 (behind the watermark, its
    # session not) extends it to [0,10500): -D of [0,8000), +I of the new
    # window's EARLY pane, which the watermark fires ON_TIME (-U, +U).
    trigger = EarlyLateTrigger(CountTrigger(1), None)
    config = OperatorConfig(SessionWindows(3000), SUM, trigger, None, 2000, changelog=True)
    out = Harness(config).run("k:1@0, k:2@5000, k:4@2500, WM 8000, k:8@7500, WM 10499")
    assert [(f.op, f.value, f.start, f.end, f.pane_index, f.pane_timing) for f in out] == [
        ("+I", 1, 0, 3000, 0, "EARLY"),
        ("+I", 2, 5000, 8000, 0, "EARLY"),
        ("-D", 1, 0, 3000, 0, "EARLY"),
        ("-D", 2, 5000, 8000, 0, "EARLY"),
        ("+I", 7, 0, 8000, 1, "EARLY"),
        ("-U", 7, 0, 8000, 1, "EARLY"),
        ("+U", 7, 0, 8000, 2, "ON_TIME"),
        ("-D", 7, 0, 8000, 2, "ON_TIME"),
        ("+I", 15, 0, 10500, 3, "EARLY"),
        ("-U", 15, 0, 10500, 3, "EARLY"),
        ("+U", 15, 0, 10500, 4, "ON_TIME"),
    ]


@pytest.mark.parametrize("name", ["tumble", "hop", "cumulate", "session", "session-count-evict"])
@settings(max_examples=20, deadline=None)
@given(data=st.data(), rows=rows_st)
def test_marked_batches_equal_the_per_row_loop(name, data, rows):
    # the batch forms build rows without the marks: with them, process_batch is the loop
    assigner_st, trigger, _, *evictor = CONFIGS[name]
    config = OperatorConfig(
        data.draw(assigner_st),
        (AggregateSpec("COUNT_STAR"), AggregateSpec("SUM", 0)),
        trigger=trigger,
        evictor=evictor[0] if evictor else None,
        mark_last=True,
    )
    wms, clock = [], -60
    for *_, step in rows:
        clock += step
        wms.append(clock)
    batched, looped = WindowOperator(config), WindowOperator(config)
    batch = RowBatch(
        keys=[r[0] for r in rows],
        timestamps=[0 if r[1] is None else r[1] for r in rows],
        columns=(
            [0 if r[2] is None else r[2] for r in rows],
            [r[3] for r in rows],
            [r[4] for r in rows],
        ),
        watermark_before=wms,
        timestamp_valid=[r[1] is not None for r in rows],
    )
    assert batched.process_batch(batch) is False
    looped.process_rows(batch)
    for op in (batched, looped):
        op.end_of_input()
    assert batched.drain() == looped.drain()
