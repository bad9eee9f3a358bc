"""The contract every trigger honours (parametrized over all of them).

- configuration only: frozen, unchanged by use, state only through the context;
- ``clear`` removes every state entry and timer the trigger made for the window;
- state is per window (two windows never see each other's state);
- ``on_merge`` (mergeable triggers) folds the merged windows' state into the
  target, and clearing the merged windows afterwards leaves nothing behind;
- end to end in an operator: once every window is cleaned up, no key state and
  no timer is left; FIRE keeps contents, FIRE_AND_PURGE empties them.
"""

from __future__ import annotations

import dataclasses
import re

import pytest

from wql.runtime import (
    AggregateSpec,
    AllTrigger,
    AnyTrigger,
    ContinuousEventTimeTrigger,
    ContinuousProcessingTimeTrigger,
    CountTrigger,
    DeltaTrigger,
    EarlyLateTrigger,
    EventTimeTrigger,
    EveryElementTrigger,
    NeverTrigger,
    OnceTrigger,
    OnUpdateTrigger,
    OperatorConfig,
    PanePurgingTrigger,
    ProcessingTimeoutTrigger,
    ProcessingTimeTrigger,
    PurgingTrigger,
    SequenceTrigger,
    SessionWindows,
    TimeWindow,
    TriggerResult,
    TumblingWindows,
    UntilTrigger,
    WindowOperator,
)
from wql.runtime.testing import TriggerProbe

TRIGGERS = [
    EventTimeTrigger(),
    ProcessingTimeTrigger(),
    CountTrigger(3),
    ContinuousEventTimeTrigger(1000),
    ContinuousProcessingTimeTrigger(1000),
    DeltaTrigger(0, 2.0),
    ProcessingTimeoutTrigger(CountTrigger(3), 500),
    PurgingTrigger(CountTrigger(2)),
    AnyTrigger((CountTrigger(2), EventTimeTrigger())),
    AllTrigger((CountTrigger(2), ContinuousEventTimeTrigger(1000))),
    EarlyLateTrigger(CountTrigger(2)),
    EarlyLateTrigger(ContinuousProcessingTimeTrigger(500), CountTrigger(2)),
    NeverTrigger(),
    EveryElementTrigger(),
    PanePurgingTrigger(EarlyLateTrigger(CountTrigger(2)), frozenset({"ON_TIME", "LATE"}), True),
    PanePurgingTrigger(ContinuousEventTimeTrigger(1000), frozenset({"EARLY"}), True),
    OnUpdateTrigger(1000, event_time=True, bounded=True, lateness=500),
    OnUpdateTrigger(700, event_time=False),
    OnUpdateTrigger(900, event_time=True, bounded=True, lateness=500, aligned=False),
    EarlyLateTrigger(OnUpdateTrigger(600, False, aligned=False), CountTrigger(1)),
    EarlyLateTrigger(OnUpdateTrigger(500, True, True), OnUpdateTrigger(800, True, True, 2000)),
    OnceTrigger(CountTrigger(2)),
    UntilTrigger(CountTrigger(2), OnceTrigger(EventTimeTrigger())),
    PurgingTrigger(UntilTrigger(PurgingTrigger(CountTrigger(2)), CountTrigger(3))),
    SequenceTrigger((OnceTrigger(CountTrigger(2)), ContinuousEventTimeTrigger(1000)), True),
    SequenceTrigger((UntilTrigger(CountTrigger(1), CountTrigger(2)), OnceTrigger(CountTrigger(1)))),
]
MERGEABLE = [t for t in TRIGGERS if t.can_merge()]


def _test_id(trigger: object) -> str:
    """The trigger's repr with its sets in sorted order: a frozenset's repr follows the
    string hash seed, and the test ids must not (parallel workers collect alike)."""
    return re.sub(
        r"frozenset\(\{([^}]*)\}\)",
        lambda m: "frozenset({" + ", ".join(sorted(m.group(1).split(", "))) + "})",
        repr(trigger),
    )


IDS = [_test_id(t) for t in TRIGGERS]
MERGEABLE_IDS = [_test_id(t) for t in MERGEABLE]

W1 = TimeWindow(0, 3000)
W2 = TimeWindow(3000, 6000)


def drive(probe: TriggerProbe, window: TimeWindow, base: int = 0) -> list[TriggerResult]:
    """A bit of everything: rows, an early event timer, processing timers."""
    results = []
    for i, ts in enumerate((base + 100, base + 1200, base + 1500, base + 2100)):
        probe.processing_time = 10_000 + 300 * i
        results.append(probe.element(window, ts, (float(i * 3),)))
    results.append(probe.event_time(window, base + 1000))
    results.append(probe.processing_time_timer(window, 10_500))
    probe.processing_time = 11_000
    results.append(probe.element(window, base + 2500, (0.0,)))
    return results


@pytest.mark.parametrize("trigger", TRIGGERS, ids=IDS)
def test_configuration_only(trigger):
    assert dataclasses.is_dataclass(trigger)
    before = dataclasses.astuple(trigger)
    with pytest.raises(dataclasses.FrozenInstanceError):
        trigger.__setattr__(
            dataclasses.fields(trigger)[0].name if dataclasses.fields(trigger) else "x", None
        )
    probe = TriggerProbe(trigger)
    drive(probe, W1)
    assert dataclasses.astuple(trigger) == before
    assert not hasattr(trigger, "__dict__") or not {
        k for k in vars(trigger) if k not in {f.name for f in dataclasses.fields(trigger)}
    }


@pytest.mark.parametrize("trigger", TRIGGERS, ids=IDS)
def test_clear_removes_all_state_and_timers(trigger):
    probe = TriggerProbe(trigger)
    drive(probe, W1)
    drive(probe, W2, base=3000)
    w2_state, w2_timers = probe.state(W2), probe.timers(W2)
    probe.clear(W1)
    assert probe.state(W1) == {}
    assert probe.timers(W1) == (set(), set())
    # the other window is untouched
    assert probe.state(W2) == w2_state and probe.timers(W2) == w2_timers


@pytest.mark.parametrize("trigger", TRIGGERS, ids=IDS)
def test_state_is_per_window(trigger):
    alone = TriggerProbe(trigger)
    alone_results = drive(alone, W1)
    shared = TriggerProbe(trigger)
    drive(shared, W2, base=3000)
    shared_results = drive(shared, W1)
    assert shared_results == alone_results
    assert shared.state(W1) == alone.state(W1)
    assert shared.timers(W1) == alone.timers(W1)


@pytest.mark.parametrize("trigger", MERGEABLE, ids=MERGEABLE_IDS)
def test_merge_then_clear_merged_leaves_only_target(trigger):
    a, b, target = TimeWindow(0, 3000), TimeWindow(2000, 5000), TimeWindow(0, 5000)
    probe = TriggerProbe(trigger)
    drive(probe, a)
    drive(probe, b, base=2000)
    probe.merge(target, [a, b])
    for w in (a, b):
        probe.clear(w)
        assert probe.state(w) == {} and probe.timers(w) == (set(), set())
    probe.clear(target)
    assert probe.ks.trigger == {}
    assert probe.timers(target) == (set(), set())


def test_count_trigger_merges_counts():
    probe = TriggerProbe(CountTrigger(5))
    a, b, target = TimeWindow(0, 3), TimeWindow(2, 5), TimeWindow(0, 5)
    for _ in range(2):
        probe.element(a, 1)
    for _ in range(2):
        probe.element(b, 3)
    probe.merge(target, [a, b])
    assert probe.state(target) == {"count": 4}
    assert probe.element(target, 4) == TriggerResult.FIRE


def test_continuous_event_time_merge_takes_earliest_fire_time():
    probe = TriggerProbe(ContinuousEventTimeTrigger(1000))
    a, b, target = TimeWindow(0, 3000), TimeWindow(2500, 5500), TimeWindow(0, 5500)
    probe.element(a, 100)
    probe.element(b, 2600)
    probe.merge(target, [a, b])
    assert probe.state(target) == {"fire": 1000}
    assert 1000 in probe.timers(target)[0]


def test_delta_trigger_cannot_merge_and_timeout_cannot_merge():
    assert not DeltaTrigger(0, 1.0).can_merge()
    assert not ProcessingTimeoutTrigger(CountTrigger(2), 10).can_merge()
    assert not AnyTrigger((CountTrigger(2), DeltaTrigger(0, 1.0))).can_merge()


def _scenario_ops(trigger, assigner, lateness):
    op = WindowOperator(
        OperatorConfig(assigner, (AggregateSpec("COUNT_STAR"),), trigger, allowed_lateness=lateness)
    )
    pt = 0
    for i, ts in enumerate([100, 900, 2500, 2600, 4000, 4100, 7000, 1500, 9000]):
        pt += 250
        op.advance_processing_time(pt)
        op.process_element(("k",) if i % 2 else ("j",), ts, (float(i),))
        op.advance_watermark(ts - 1500)
    return op


@pytest.mark.parametrize("lateness", [0, 700])
@pytest.mark.parametrize("trigger", TRIGGERS, ids=IDS)
def test_no_state_or_timer_survives_cleanup_tumbling(trigger, lateness):
    op = _scenario_ops(trigger, TumblingWindows(3000), lateness)
    op.end_of_input()
    assert op.active_keys() == []
    assert op.timers(("k",)) == ([], []) and op.timers(("j",)) == ([], [])


@pytest.mark.parametrize("lateness", [0, 700])
@pytest.mark.parametrize("trigger", MERGEABLE, ids=MERGEABLE_IDS)
def test_no_state_or_timer_survives_cleanup_sessions(trigger, lateness):
    op = _scenario_ops(trigger, SessionWindows(1000), lateness)
    op.end_of_input()
    assert op.active_keys() == []
    assert op.timers(("k",)) == ([], []) and op.timers(("j",)) == ([], [])


def test_fire_keeps_contents_and_purge_empties_them():
    cfg = OperatorConfig(TumblingWindows(10_000), (AggregateSpec("COUNT_STAR"),), CountTrigger(2))
    op = WindowOperator(cfg)
    for ts in range(6):
        op.process_element(("k",), ts, ())
    assert [r[-1] for r in op.drain()] == [2, 4, 6]
    op = WindowOperator(
        OperatorConfig(cfg.assigner, cfg.aggregates, PurgingTrigger(CountTrigger(2)))
    )
    for ts in range(6):
        op.process_element(("k",), ts, ())
    rows = op.drain()
    assert [r[-1] for r in rows] == [2, 2, 2]
    assert [r[4] for r in rows] == [0, 1, 2]  # pane index survives purges
    op.end_of_input()
    assert op.drain() == []  # purged window has no contents at the watermark


def test_session_with_unmergeable_trigger_is_rejected():
    from wql.errors import WqlSemanticError

    with pytest.raises(WqlSemanticError, match="cannot merge"):
        OperatorConfig(SessionWindows(10), (), DeltaTrigger(0, 1.0))
    with pytest.raises(WqlSemanticError, match="cannot merge"):
        OperatorConfig(SessionWindows(10), (), AllTrigger((CountTrigger(2), DeltaTrigger(0, 1.0))))
