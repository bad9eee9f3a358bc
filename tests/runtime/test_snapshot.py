"""Snapshot/restore: mid-stream restores equal the uninterrupted run; per-key moves."""

from __future__ import annotations

import pickle

import pytest

from wql.errors import WqlUnsupportedError
from wql.runtime import (
    AggregateSpec,
    AllTrigger,
    ContinuousEventTimeTrigger,
    ContinuousProcessingTimeTrigger,
    CountEvictor,
    CountTrigger,
    EarlyLateTrigger,
    EventTimeTrigger,
    GlobalWindows,
    OperatorConfig,
    ProcessingTimeoutTrigger,
    PurgingTrigger,
    SessionWindows,
    SlidingWindows,
    SnapshotError,
    TumblingWindows,
    WindowOperator,
)
from wql.runtime.testing import Harness

AGGS = (
    AggregateSpec("COUNT_STAR"),
    AggregateSpec("SUM", 0),
    AggregateSpec("FIRST_VALUE", 0),
    AggregateSpec("COLLECT_LIST", 0),
    AggregateSpec("COUNT_DISTINCT", 0),
)

CONFIGS = [
    OperatorConfig(TumblingWindows(1000), AGGS),
    OperatorConfig(SlidingWindows(2000, 500), AGGS, allowed_lateness=300, late_output=True),
    OperatorConfig(
        SessionWindows(700), AGGS, PurgingTrigger(CountTrigger(3)), allowed_lateness=200
    ),
    OperatorConfig(SessionWindows(700), AGGS, ContinuousEventTimeTrigger(250)),
    OperatorConfig(SessionWindows(700), AGGS, evictor=CountEvictor(2)),
    OperatorConfig(
        TumblingWindows(1000),
        AGGS,
        EarlyLateTrigger(ContinuousProcessingTimeTrigger(100), CountTrigger(2)),
        allowed_lateness=1000,
    ),
    OperatorConfig(
        GlobalWindows(),
        AGGS,
        ProcessingTimeoutTrigger(CountTrigger(4), 150),
        evictor=CountEvictor(3, after=True),
    ),
    OperatorConfig(TumblingWindows(1000), AGGS, AllTrigger((CountTrigger(2), EventTimeTrigger()))),
]

SCRIPT = [
    "PT 0",
    "a:1@100",
    "b:2@150",
    "a:3@900",
    "PT 90",
    "WM 200",
    "a:4@1200",
    "b:5@400",
    "PT 210",
    "WM 800",
    "a:6@300",
    "b:7@1700",
    "a:1@1100",
    "PT 400",
    "WM 1300",
    "b:2@950",
    "a:8@2500",
    "PT 700",
    "a:9@2600",
    "WM 2100",
    "b:1@2000",
    "a:2@150",
    "PT 900",
    "WM 3100",
    "b:3@3600",
    "PT 1000",
    "END",
]


def run(config, restore_at=None, via_bytes=True):
    h = Harness(config)
    out = []
    for i, step in enumerate(SCRIPT):
        if i == restore_at:
            data = h.op.snapshot()
            assert isinstance(data, bytes)
            h.snapshot_restore()
        out.append((step, h.step(step), h.late()))
    c = h.op.counters
    return out, (c.rows_in, c.rows_emitted, c.late_rows, c.dropped)


@pytest.mark.parametrize(
    "config",
    CONFIGS,
    ids=lambda c: f"{type(c.assigner).__name__}-{type(c.effective_trigger).__name__}",
)
def test_restore_at_any_step_equals_uninterrupted_run(config):
    expected = run(config)
    assert any(fired for _, fired, _ in expected[0])  # the script exercises the config
    for i in range(len(SCRIPT)):
        assert run(config, restore_at=i) == expected, f"restored before step {i}"


def test_undrained_output_survives_restore():
    cfg = CONFIGS[0]
    op = WindowOperator(cfg)
    op.process_element(("a",), 10, (1,))
    op.advance_watermark(999)
    restored = WindowOperator.restore(cfg, op.snapshot())
    assert restored.drain() == op.drain() != []


def test_per_key_snapshot_moves_a_key_between_operators():
    cfg = OperatorConfig(SessionWindows(700), AGGS, ContinuousEventTimeTrigger(250))
    reference = WindowOperator(cfg)
    first, second = WindowOperator(cfg), WindowOperator(cfg)
    rows = [(("a",), 100, (1,)), (("b",), 120, (2,)), (("a",), 500, (3,))]
    for op in (reference, first):
        for r in rows:
            op.process_element(*r)
    assert first.timers(("a",)) == ([250, 1199], [])
    data = first.snapshot_key(("a",))
    first.forget_key(("a",))
    assert first.timers(("a",)) == ([], []) and ("a",) not in first.active_keys()
    second.restore_key(("a",), data)
    assert second.timers(("a",)) == reference.timers(("a",))
    for op in (reference, second):
        op.process_element(("a",), 900, (4,))
        op.end_of_input()
    ref_a = [r for r in reference.drain() if r[0] == ("a",)]
    assert second.drain() == ref_a
    first.end_of_input()
    assert {r[0] for r in first.drain()} == {("b",)}


def test_restore_key_keeps_arrival_numbers_increasing():
    cfg = OperatorConfig(TumblingWindows(1000), (AggregateSpec("FIRST_VALUE", 0),))
    a = WindowOperator(cfg)
    for i in range(5):
        a.process_element(("k",), 10, (i,))
    b = WindowOperator(cfg)
    b.restore_key(("k",), a.snapshot_key(("k",)))
    b.process_element(("k",), 10, (99,))  # same timestamp, arrives later
    b.end_of_input()
    assert b.drain()[0][-1] == 0


def test_bad_snapshots_are_rejected():
    cfg = CONFIGS[0]
    with pytest.raises(SnapshotError):
        WindowOperator.restore(cfg, b"not a snapshot")
    evil = b"WQLRT\x01" + pickle.dumps(print)
    with pytest.raises(SnapshotError, match="disallowed"):
        WindowOperator.restore(cfg, evil)
    data = WindowOperator(cfg).snapshot()
    with pytest.raises(SnapshotError, match="version"):
        WindowOperator.restore(cfg, data[:5] + b"\x09" + data[6:])
    with pytest.raises(SnapshotError, match="corrupt"):
        WindowOperator.restore(cfg, data[:-5])
    with pytest.raises(WqlUnsupportedError, match="different operator configuration"):
        WindowOperator.restore(CONFIGS[1], data)
    with pytest.raises(SnapshotError, match="per-key"):
        WindowOperator(cfg).restore_key(("k",), data)


def test_count_distinct_nan_survives_restore():
    cfg = OperatorConfig(TumblingWindows(1000), (AggregateSpec("COUNT_DISTINCT", 0),))
    op = WindowOperator(cfg)
    op.process_element(("k",), 1, (float("nan"),))
    op = WindowOperator.restore(cfg, op.snapshot())
    op.process_element(("k",), 2, (float("nan"),))
    other = WindowOperator(cfg)
    other.restore_key(("k",), op.snapshot_key(("k",)))
    other.process_element(("k",), 3, (float("nan"),))
    other.end_of_input()
    assert other.drain()[0][-1] == 1
