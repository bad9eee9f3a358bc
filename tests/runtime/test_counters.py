"""Every input row ends in exactly one counter (docs/runtime.md, "Counters").

``rows_in = rows in a firing + late_rows + dropped (every reason)``, where a
row is *in a firing* when at least one emitted firing aggregated it. The
tests measure that set independently of the operator's bookkeeping: each
row carries a unique id and every query collects the ids (``COLLECT_LIST``
over the rows a firing aggregates, i.e. after ``EVICT ... BEFORE``), so the
union of the emitted id lists is exactly the rows in a firing.
"""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from tests.runtime.reference import replay_watermarks
from wql.runtime import (
    AggregateSpec,
    AnyTrigger,
    ContinuousEventTimeTrigger,
    CountEvictor,
    CountTrigger,
    CumulateWindows,
    DeltaEvictor,
    DeltaTrigger,
    DynamicSessionWindows,
    EventTimeTrigger,
    GlobalWindows,
    OnceTrigger,
    OperatorConfig,
    ProcessingTimeTrigger,
    PurgingTrigger,
    RowBatch,
    SequenceTrigger,
    SessionWindows,
    SlidingWindows,
    TimeEvictor,
    TumblingWindows,
    UntilTrigger,
    WindowOperator,
    count_windows,
)
from wql.runtime.assigners import DROP_IN_NO_FIRING

KEYS = [("a",), ("b",), ("c",)]
ID, VALUE, GAP = 0, 1, 2  # the values of a row

ASSIGNERS = st.sampled_from(
    [
        TumblingWindows(10),
        SlidingWindows(size=12, slide=4),
        SlidingWindows(size=5, slide=8),  # gaps between windows
        CumulateWindows(step=5, size=15),
        SessionWindows(6),
        DynamicSessionWindows(GAP),
        GlobalWindows(),
    ]
)
BASE_TRIGGERS = [
    None,
    EventTimeTrigger(),
    CountTrigger(2),
    CountTrigger(3),
    ContinuousEventTimeTrigger(7),
    ProcessingTimeTrigger(),
    AnyTrigger((CountTrigger(4), EventTimeTrigger())),
    DeltaTrigger(VALUE, 4.0),
    # triggers that finish: rows reaching a closed window are counted "closed window"
    OnceTrigger(CountTrigger(2)),
    UntilTrigger(CountTrigger(1), OnceTrigger(EventTimeTrigger())),
    SequenceTrigger((OnceTrigger(CountTrigger(2)), EventTimeTrigger()), end_timer=True),
]
TRIGGERS = st.sampled_from(BASE_TRIGGERS).flatmap(
    lambda t: st.sampled_from([t] if t is None else [t, PurgingTrigger(t)])
)
EVICTORS = st.sampled_from(
    [
        None,
        CountEvictor(2),
        CountEvictor(1, after=True),
        TimeEvictor(4),
        DeltaEvictor(VALUE, 3.0),
    ]
)


@st.composite
def rows(draw):
    n = draw(st.integers(0, 30))
    out = []
    for i in range(n):
        key = draw(st.sampled_from(KEYS))
        ts = draw(st.one_of(st.integers(0, 80), st.none() if i % 7 == 3 else st.integers(0, 80)))
        value = draw(st.integers(-9, 9))
        gap = draw(st.integers(-1, 12))  # <= 0 is an invalid gap for dynamic sessions
        out.append((key, ts, (i, value, gap)))
    return out


def config_of(assigner, trigger, evictor, lateness, late_output) -> OperatorConfig | None:
    if isinstance(assigner, GlobalWindows) and trigger is None:
        return None  # GLOBAL() needs a trigger
    if isinstance(assigner, GlobalWindows) and isinstance(trigger, EventTimeTrigger):
        return None
    try:
        return OperatorConfig(
            assigner,
            (AggregateSpec("COLLECT_LIST", ID), AggregateSpec("COUNT_STAR")),
            trigger=trigger,
            evictor=evictor,
            allowed_lateness=lateness if assigner.is_event_time else 0,
            late_output=late_output,
        )
    except Exception:  # e.g. DELTA on sessions: not a query WQL accepts
        return None


def run(config: OperatorConfig, data, delay: int, batched: bool) -> tuple[WindowOperator, list]:
    op = WindowOperator(config)
    wms = replay_watermarks([ts if ts is not None else -(2**63) for _, ts, _ in data], delay)
    if batched and data:
        import numpy as np

        op.process_batch(
            RowBatch(
                keys=[k for k, _, _ in data],
                timestamps=np.array([ts or 0 for _, ts, _ in data], dtype=np.int64),
                timestamp_valid=np.array([ts is not None for _, ts, _ in data]),
                columns=[np.array([v[c] for _, _, v in data]) for c in range(3)],
                watermark_before=np.array(wms, dtype=np.int64),
                processing_time=np.array([i * 3 for i in range(len(data))], dtype=np.int64),
            )
        )
    else:
        for i, ((key, ts, values), wm) in enumerate(zip(data, wms, strict=True)):
            op.advance_watermark(wm)
            op.advance_processing_time(i * 3)
            op.process_element(key, ts, values)
    op.end_of_input()
    return op, op.drain()


def assert_identity(op: WindowOperator, emitted: list[tuple[Any, ...]], n_rows: int) -> None:
    in_a_firing = {i for row in emitted for i in row[-2]}
    c = op.counters
    assert c.rows_in == n_rows
    assert c.rows_in == len(in_a_firing) + c.late_rows + sum(c.dropped.values()), c.as_dict()
    # and the rows counted as "in no firing" are exactly the others that a window took
    accepted = n_rows - c.late_rows - sum(v for k, v in c.dropped.items() if k != DROP_IN_NO_FIRING)
    assert c.dropped.get(DROP_IN_NO_FIRING, 0) == accepted - len(in_a_firing)


@settings(max_examples=400, deadline=None)
@given(
    assigner=ASSIGNERS,
    trigger=TRIGGERS,
    evictor=EVICTORS,
    lateness=st.sampled_from([0, 5]),
    late_output=st.booleans(),
    data=rows(),
    delay=st.sampled_from([0, 3]),
    batched=st.booleans(),
)
def test_every_row_ends_in_exactly_one_counter(
    assigner, trigger, evictor, lateness, late_output, data, delay, batched
):
    config = config_of(assigner, trigger, evictor, lateness, late_output)
    if config is None:
        return
    op, emitted = run(config, data, delay, batched)
    assert_identity(op, emitted, len(data))


@settings(max_examples=100, deadline=None)
@given(
    size=st.integers(1, 5),
    slide=st.one_of(st.none(), st.integers(1, 7)),
    data=rows(),
    batched=st.booleans(),
)
def test_count_windows_count_their_remainder(size, slide, data, batched):
    assigner, trigger, evictor = count_windows(size, slide)
    config = OperatorConfig(
        assigner,
        (AggregateSpec("COLLECT_LIST", ID), AggregateSpec("COUNT_STAR")),
        trigger=trigger,
        evictor=evictor,
    )
    op, emitted = run(config, data, 0, batched)
    assert_identity(op, emitted, len(data))


def test_count_window_remainder_by_hand():
    # COUNT_WINDOW(3): key a has 5 rows -> one firing of rows 0-2, rows 3-4 never fire;
    # key b has 2 rows -> no firing at all.
    assigner, trigger, evictor = count_windows(3, None)
    op = WindowOperator(OperatorConfig(assigner, (AggregateSpec("COUNT_STAR"),), trigger=trigger))
    for i, key in enumerate(["a", "a", "b", "a", "a", "b", "a"]):
        op.process_element((key,), i, (i,))
    op.end_of_input()
    assert [r[-1] for r in op.drain()] == [3]
    assert op.counters.dropped == {DROP_IN_NO_FIRING: 4}
    op.end_of_input()  # counted once
    assert op.counters.dropped == {DROP_IN_NO_FIRING: 4}


def test_hop_row_in_a_fired_and_an_unfired_window_is_out_once():
    # HOP(slide 5, size 10) with TRIGGER COUNT(2): a row at 7 is in [0, 10) and [5, 15).
    # Rows at 2 and 7 fill [0, 10) -> it fires with both; [5, 15) holds only the row
    # at 7 and never reaches 2. The row at 7 was in a firing: nothing is dropped.
    op = WindowOperator(
        OperatorConfig(
            SlidingWindows(size=10, slide=5), (AggregateSpec("COUNT_STAR"),), CountTrigger(2)
        )
    )
    op.process_element(("a",), 2, (0,))
    op.process_element(("a",), 7, (1,))
    op.end_of_input()
    assert [(r[1], r[-1]) for r in op.drain()] == [(0, 2)]
    assert op.counters.dropped == {}
    # A third row at 12 is only in [5, 15) and [10, 20): [5, 15) now holds 7 and 12
    # and fires; [10, 20) never does, but the row at 12 was in the [5, 15) firing.
    # A fourth row at 17 is in [10, 20) (with 12: fires) and [15, 25) (alone).
    op2 = WindowOperator(
        OperatorConfig(
            SlidingWindows(size=10, slide=5), (AggregateSpec("COUNT_STAR"),), CountTrigger(2)
        )
    )
    for i, ts in enumerate([2, 7, 12, 23]):
        op2.process_element(("a",), ts, (i,))
    op2.end_of_input()
    # [0,10): 2,7 fires. [5,15): 7,12 fires. [10,20): 12 alone. [15,25): 23 alone.
    # [20,30): 23 alone -> the row at 23 is in no firing.
    assert sorted((r[1], r[-1]) for r in op2.drain()) == [(0, 2), (5, 2)]
    assert op2.counters.dropped == {DROP_IN_NO_FIRING: 1}


def test_evicted_before_any_firing_is_in_no_firing():
    # TUMBLE(10) + EVICT COUNT(1): the window fires once at end of input with its
    # last row only; the two earlier rows were evicted before that firing.
    op = WindowOperator(
        OperatorConfig(TumblingWindows(10), (AggregateSpec("COUNT_STAR"),), evictor=CountEvictor(1))
    )
    for i, ts in enumerate([1, 2, 3]):
        op.process_element(("a",), ts, (i,))
    op.end_of_input()
    assert [r[-1] for r in op.drain()] == [1]
    assert op.counters.dropped == {DROP_IN_NO_FIRING: 2}


@settings(max_examples=150, deadline=None)
@given(
    assigner=ASSIGNERS,
    trigger=TRIGGERS,
    evictor=EVICTORS,
    data=rows(),
)
def test_per_key_snapshots_keep_the_rows_in_no_firing(assigner, trigger, evictor, data):
    # A host that keeps state per key (the streaming host) saves, forgets and
    # restores a key around each of its rows: the counts must not change.
    config = config_of(assigner, trigger, evictor, 0, False)
    if config is None:
        return
    whole, _ = run(config, data, 0, batched=False)
    op = WindowOperator(config)
    wms = replay_watermarks([ts if ts is not None else -(2**63) for _, ts, _ in data], 0)
    for i, ((key, ts, values), wm) in enumerate(zip(data, wms, strict=True)):
        blob = op.snapshot_key(key)
        op.forget_key(key)
        op.restore_key(key, blob)
        op.advance_watermark(wm)
        op.advance_processing_time(i * 3)
        op.process_element(key, ts, values)
    op.end_of_input()
    assert op.counters.as_dict() == whole.counters.as_dict()
