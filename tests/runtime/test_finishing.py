"""Triggers that finish (ONCE, UNTIL, SEQUENCE) and the windows they close.

The vectors are derived by hand from Beam's trigger state machines
(runners/core-java: AfterPaneStateMachine, OrFinallyStateMachine,
AfterEachStateMachine, RepeatedlyStateMachine) and its ReduceFnRunner (a
finishing pane is the last, a closed window drops and counts its later rows
as droppedDueToClosedWindow, its finished bits go at garbage collection); the
property test runs random trees of count triggers through a small model of
Beam's shouldFire/onFire state machines written for this test.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from wql.errors import ErrorCode, WqlSemanticError
from wql.runtime import (
    DROP_CLOSED_WINDOW,
    AggregateSpec,
    AnyTrigger,
    CountTrigger,
    EarlyLateTrigger,
    EventTimeTrigger,
    GlobalWindows,
    OnceTrigger,
    OperatorConfig,
    PanePurgingTrigger,
    PurgingTrigger,
    SequenceTrigger,
    SessionWindows,
    Trigger,
    TumblingWindows,
    UntilTrigger,
    WindowOperator,
)
from wql.runtime.testing import Harness

COUNT = (AggregateSpec("COUNT_STAR"),)


def panes(trigger: Trigger, script: str, assigner=None, lateness: int = 0):
    config = OperatorConfig(
        assigner or TumblingWindows(1000),
        COUNT,
        trigger,
        allowed_lateness=lateness,
        mark_last=True,
    )
    h = Harness(config)
    fired = h.run(script)
    rows = [(f.value, f.start, f.pane_index, f.pane_timing, f.is_last) for f in fired]
    return rows, h.op.counters


def test_once_count_fires_once_and_closes_the_window():
    # AfterPane.elementCountAtLeast(2) alone: one pane, the last; rows 3 and 4 of
    # the window are dropped (closed window); the next window is a new one.
    rows, counters = panes(
        OnceTrigger(CountTrigger(2)), "k@1, k@2, k@3, k@4, WM 999, k@1500, k@1600, END"
    )
    assert rows == [(2, 0, 0, "EARLY", True), (2, 1000, 0, "EARLY", True)]
    assert counters.dropped == {DROP_CLOSED_WINDOW: 2}
    assert counters.rows_in == 6


def test_once_watermark_drops_late_rows_of_its_window_as_closed():
    # AfterWatermark.pastEndOfWindow() alone, lateness 500: the on-time pane is the
    # last; a row within the lateness is dropped (closed), not fired LATE.
    rows, counters = panes(OnceTrigger(EventTimeTrigger()), "k@1, WM 999, k@2, END", lateness=500)
    assert rows == [(1, 0, 0, "ON_TIME", True)]
    assert counters.dropped == {DROP_CLOSED_WINDOW: 1}
    # the repeating WATERMARK fires the late row instead
    rows, counters = panes(EventTimeTrigger(), "k@1, WM 999, k@2, END", lateness=500)
    assert rows == [(1, 0, 0, "ON_TIME", False), (2, 0, 1, "LATE", False)]


def test_the_closed_mark_goes_at_the_cleanup_time():
    # After the cleanup time the window's rows are late, as for any window.
    rows, counters = panes(
        OnceTrigger(CountTrigger(1)), "k@1, k@2, WM 1499, k@3, END", lateness=500
    )
    assert rows == [(1, 0, 0, "EARLY", True)]
    assert counters.dropped == {DROP_CLOSED_WINDOW: 1, "late": 1}


def test_until_fires_as_its_trigger_and_a_last_time_for_until():
    # Repeatedly.forever(AfterPane(2)).orFinally(AfterPane(5)), accumulating: panes
    # at rows 2, 4 and 5 (the last, for until); row 6 is dropped.
    rows, counters = panes(
        UntilTrigger(CountTrigger(2), CountTrigger(5)), "k@1, k@2, k@3, k@4, k@5, k@6, END"
    )
    assert rows == [
        (2, 0, 0, "EARLY", False),
        (4, 0, 1, "EARLY", False),
        (5, 0, 2, "EARLY", True),
    ]
    assert counters.dropped == {DROP_CLOSED_WINDOW: 1}


def test_until_discarding_last_pane_may_hold_one_row():
    # Beam's Javadoc of orFinally: with discarding panes "the final firing of
    # Repeatedly.forever(AfterPane.elementCountAtLeast(2)).orFinally(
    # AfterPane.elementCountAtLeast(5)) may have only 1 element".
    rows, _ = panes(
        PurgingTrigger(UntilTrigger(CountTrigger(2), CountTrigger(5))),
        "k@1, k@2, k@3, k@4, k@5, END",
        assigner=GlobalWindows(),
    )
    assert [r[0] for r in rows] == [2, 2, 1]
    assert [r[4] for r in rows] == [False, False, True]


def test_until_finishes_when_its_trigger_finishes():
    rows, counters = panes(
        UntilTrigger(OnceTrigger(CountTrigger(3)), CountTrigger(10)), "k@1, k@2, k@3, k@4, END"
    )
    assert rows == [(3, 0, 0, "EARLY", True)]
    assert counters.dropped == {DROP_CLOSED_WINDOW: 1}


def test_sequence_runs_one_child_at_a_time():
    # AfterEach.inOrder(AfterPane(2), AfterWatermark.pastEndOfWindow()), lateness 500:
    # an early pane at 2 rows; row 3 waits for the watermark child; the on-time pane
    # is the last; a row within the lateness is dropped.
    rows, counters = panes(
        SequenceTrigger((OnceTrigger(CountTrigger(2)), OnceTrigger(EventTimeTrigger())), True),
        "k@1, k@2, k@3, WM 999, k@4, END",
        lateness=500,
    )
    assert rows == [(2, 0, 0, "EARLY", False), (3, 0, 1, "ON_TIME", True)]
    assert counters.dropped == {DROP_CLOSED_WINDOW: 1}


def test_sequence_next_child_hears_the_window_end_without_new_rows():
    # Beam's ReduceFnRunner holds an end-of-window timer for every window: the
    # watermark child fires at the end although it saw no row of its own.
    trigger = SequenceTrigger((OnceTrigger(CountTrigger(2)), OnceTrigger(EventTimeTrigger())), True)
    rows, _ = panes(trigger, "k@1, k@2, WM 999, END", lateness=500)
    assert rows == [(2, 0, 0, "EARLY", False), (2, 0, 1, "ON_TIME", True)]


def test_sequence_counts_only_rows_after_the_child_before_finished():
    # The second COUNT(2) sees rows 3 and 4 only (Beam: only the first unfinished
    # subtrigger gets onElement), then it repeats.
    trigger = SequenceTrigger((OnceTrigger(CountTrigger(3)), CountTrigger(2)))
    rows, counters = panes(trigger, ", ".join(["k@1"] * 8) + ", END", assigner=GlobalWindows())
    assert [r[0] for r in rows] == [3, 5, 7]
    assert counters.dropped == {"in no firing": 1}


def test_finishing_pane_of_a_timer_is_last_and_pane_timing_is_kept():
    trigger = UntilTrigger(CountTrigger(1), OnceTrigger(EventTimeTrigger()))
    rows, _ = panes(trigger, "k@1, k@2, WM 999, END", lateness=500)
    assert rows == [
        (1, 0, 0, "EARLY", False),
        (2, 0, 1, "EARLY", False),
        (2, 0, 2, "ON_TIME", True),
    ]


def test_closed_session_merges_no_more():
    # ReduceFnRunner removes a closed window from the active windows: a later row
    # in its range starts a new session, which merges with active ones only.
    rows, counters = panes(
        OnceTrigger(CountTrigger(2)), "k@1, k@2, k@50, k@60, END", assigner=SessionWindows(100)
    )
    assert rows == [(2, 1, 0, "EARLY", True), (2, 50, 0, "EARLY", True)]
    assert counters.dropped == {}


def test_sessions_merge_their_counts_before_finishing():
    rows, _ = panes(
        OnceTrigger(CountTrigger(3)), "k@0, k@200, k@100, END", assigner=SessionWindows(100)
    )
    assert rows == [(3, 0, 0, "EARLY", True)]


def test_a_row_giving_exactly_a_closed_session_is_dropped():
    # The closed session [1, 101) by row 1 alone; a row at 1 again is that very
    # window: its finished bits are still there (Beam's isClosed), so it is dropped.
    rows, counters = panes(
        OnceTrigger(CountTrigger(1)), "k@1, k@1, END", assigner=SessionWindows(100)
    )
    assert rows == [(1, 1, 0, "EARLY", True)]
    assert counters.dropped == {DROP_CLOSED_WINDOW: 1}


def test_purging_and_emit_discarding_keep_the_finish():
    for wrap in (
        PurgingTrigger,
        lambda t: PanePurgingTrigger(t, frozenset({"EARLY"}), True),
    ):
        rows, counters = panes(wrap(OnceTrigger(CountTrigger(2))), "k@1, k@2, k@3, END")
        assert rows == [(2, 0, 0, "EARLY", True)]
        assert counters.dropped == {DROP_CLOSED_WINDOW: 1}


def test_closed_mark_survives_a_key_snapshot():
    config = OperatorConfig(
        TumblingWindows(1000), COUNT, OnceTrigger(CountTrigger(1)), allowed_lateness=500
    )
    op = WindowOperator(config)
    op.process_element(("k",), 1, (1,))
    data = op.snapshot_key(("k",))
    fresh = WindowOperator(config)
    fresh.restore_key(("k",), data)
    fresh.process_element(("k",), 2, (1,))
    assert fresh.drain() == []
    assert fresh.counters.dropped == {DROP_CLOSED_WINDOW: 1}
    fresh.advance_watermark(1499)  # the cleanup time forgets the window
    assert ("k",) not in fresh.key_states


@pytest.mark.parametrize(
    "trigger",
    [
        AnyTrigger((OnceTrigger(CountTrigger(2)), CountTrigger(3))),
        EarlyLateTrigger(UntilTrigger(CountTrigger(1), CountTrigger(2))),
    ],
    ids=["any", "early"],
)
def test_a_finishing_child_of_a_repeating_trigger_is_refused(trigger):
    with pytest.raises(WqlSemanticError) as info:
        OperatorConfig(TumblingWindows(1000), COUNT, trigger)
    assert info.value.code is ErrorCode.FINISHING_TRIGGER


# ------------------------------------------------------------------ a model of Beam


@dataclass
class _Node:
    """One node of Beam's trigger state machine, count triggers only (non-merging).

    kind: "count" (Repeatedly.forever(AfterPane.elementCountAtLeast(n))), "once"
    (the child's first firing, then finished), "until" (orFinally, the until
    child's firing finishes it), "seq" (AfterEach.inOrder).
    """

    kind: str
    n: int = 0
    children: list[_Node] = field(default_factory=list)
    count: int = 0
    finished: bool = False

    def on_element(self) -> None:
        if self.finished:
            return
        if self.kind == "count":
            self.count += 1
        elif self.kind == "seq":
            self._current().on_element()
        else:
            for c in self.children:
                c.on_element()

    def should_fire(self) -> bool:
        if self.finished:
            return False
        if self.kind == "count":
            return self.count >= self.n
        if self.kind == "seq":
            return self._current().should_fire()
        return any(c.should_fire() for c in self.children)

    def on_fire(self) -> None:
        if self.kind == "count":
            self.count = 0  # Repeatedly resets its subtree
        elif self.kind == "once":
            self.children[0].on_fire()
            self.finished = True
        elif self.kind == "until":
            actual, until = self.children
            if until.should_fire():
                until.on_fire()
                self.finished = True
            else:
                actual.on_fire()
                self.finished = actual.finished
        else:
            self._current().on_fire()
            self.finished = all(c.finished for c in self.children)

    def _current(self) -> _Node:
        return next(c for c in self.children if not c.finished)


def _beam(node: _Node, rows: int, discarding: bool) -> tuple[list[int], int, int]:
    """ReduceFnRunner over one window: pane sizes, rows dropped as closed, rows left."""
    panes_out: list[int] = []
    buffer = dropped = 0
    for _ in range(rows):
        if node.finished:
            dropped += 1
            continue
        buffer += 1
        node.on_element()
        if node.should_fire():
            node.on_fire()
            panes_out.append(buffer)
            if discarding or node.finished:
                buffer = 0
    return panes_out, dropped, buffer


def _runtime(node: _Node) -> Trigger:
    if node.kind == "count":
        return CountTrigger(node.n)
    if node.kind == "once":
        return OnceTrigger(_runtime(node.children[0]))
    if node.kind == "until":
        return UntilTrigger(_runtime(node.children[0]), _runtime(node.children[1]))
    return SequenceTrigger(tuple(_runtime(c) for c in node.children))


def _finishes(node: _Node) -> bool:
    return node.kind != "count"


@st.composite
def _trees(draw: st.DrawFn, depth: int = 0, finishing: bool = False) -> _Node:
    kinds = ["once", "until", "seq"] if finishing else ["count", "once", "until", "seq"]
    if depth >= 2:
        kinds = ["once"] if finishing else ["count", "once"]
    kind = draw(st.sampled_from(kinds))
    if kind == "count":
        return _Node("count", n=draw(st.integers(1, 4)))
    if kind == "once":
        return _Node("once", children=[draw(_trees(depth + 1))])
    if kind == "until":
        return _Node("until", children=[draw(_trees(depth + 1)), draw(_trees(depth + 1))])
    n = draw(st.integers(2, 3))
    children = [draw(_trees(depth + 1, finishing=True)) for _ in range(n - 1)]
    children.append(draw(_trees(depth + 1)))
    return _Node("seq", children=children)


@settings(max_examples=300, deadline=None)
@given(tree=_trees(), rows=st.integers(0, 20), discarding=st.booleans())
def test_finishing_triggers_match_a_model_of_beams_state_machines(tree, rows, discarding):
    trigger = _runtime(tree)
    if discarding:
        trigger = PurgingTrigger(trigger)
    op = WindowOperator(OperatorConfig(GlobalWindows(), COUNT, trigger))
    for _ in range(rows):
        op.process_element(("k",), 0, (1,))
    op.end_of_input()
    fired = [row[7] for row in op.drain()]
    expected, dropped, left = _beam(tree, rows, discarding)
    assert fired == expected
    assert op.counters.dropped.get(DROP_CLOSED_WINDOW, 0) == dropped
    if not discarding and not tree.finished:
        # accumulating: a row is in a firing when a pane came after it
        never = rows - dropped - (max(expected) if expected else 0)
        assert op.counters.dropped.get("in no firing", 0) == never
    assert left >= 0
