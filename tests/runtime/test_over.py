"""The OVER aggregation operator (Flink SQL's event-time over aggregate), by hand and by
a brute-force reference that replays the rows with Flink's rules written out plainly:
per key, a list of accepted rows and a set of timer times scanned in full at every
watermark rise; frames recomputed by filtering the key's rows."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from wql.runtime.aggregates import AggregateSpec
from wql.runtime.config import RowBatch
from wql.runtime.over import RANGE, ROWS, OverAggregateOperator, OverConfig
from wql.runtime.windows import MAX_TIME, MIN_TIME

AGGS = (
    AggregateSpec("SUM", 0),
    AggregateSpec("COUNT_STAR"),
    AggregateSpec("MIN", 0),
    AggregateSpec("MAX", 0),
)


def emitted(op: OverAggregateOperator) -> list[tuple]:
    """(key, time, sum, count, min, max, value, id) of every emitted row."""
    return [(r[0], r[6], *r[7:]) for r in op.drain()]


def run(config: OverConfig, rows: list[tuple], wms: list[int]) -> OverAggregateOperator:
    op = OverAggregateOperator(config)
    for (key, ts, v, i), wm in zip(rows, wms, strict=True):
        op.advance_watermark(wm)
        op.process_element(key, ts, (v, i))
    op.end_of_input()
    return op


def test_range_rows_of_equal_time_share_the_frame_and_bounds_are_inclusive():
    # RANGE 10 ms PRECEDING: the frame of time 20 is [10, 20]
    config = OverConfig(RANGE, 10, AGGS)
    rows = [(("a",), 5, 1, 0), (("a",), 10, 2, 1), (("a",), 20, 4, 2), (("a",), 20, 8, 3)]
    op = run(config, rows, [MIN_TIME] * 4)
    assert emitted(op) == [
        (("a",), 5, 1, 1, 1, 1, 1, 0),
        (("a",), 10, 3, 2, 1, 2, 2, 1),
        (("a",), 20, 14, 3, 2, 8, 4, 2),  # 5 is out (20 - 5 > 10), 10 is in
        (("a",), 20, 14, 3, 2, 8, 8, 3),
    ]


def test_rows_frame_is_the_row_and_n_before_it_in_time_then_arrival_order():
    config = OverConfig(ROWS, 1, AGGS)
    rows = [(("a",), 20, 4, 0), (("a",), 10, 2, 1), (("a",), 20, 8, 2), (("a",), 30, 1, 3)]
    op = run(config, rows, [MIN_TIME] * 4)
    assert [(t, s, i) for _, t, s, _, _, _, _, i in emitted(op)] == [
        (10, 2, 1),
        (20, 6, 0),
        (20, 12, 2),
        (30, 9, 3),
    ]


def test_bounded_lateness_is_the_last_fired_time_not_the_watermark():
    # a row at or below the watermark whose key fired nothing at or after its time is
    # not late for a bounded frame (Flink compares with lastTriggeringTs)
    config = OverConfig(ROWS, 2, AGGS)
    op = OverAggregateOperator(config)
    op.process_element(("a",), 100, (1, 0))
    op.advance_watermark(150)  # fires 100: the key's last triggering time is 100
    op.process_element(("b",), 120, (1, 1))  # key b fired nothing: accepted
    op.process_element(("a",), 100, (1, 2))  # not above 100: late
    op.process_element(("a",), 101, (1, 3))  # accepted, fires at the next rise
    op.end_of_input()
    assert [r[-1] for r in op.drain()] == [0, 3, 1]  # timers in time order: 101, then 120
    assert op.counters.dropped == {"late": 1}
    # the unbounded frame compares with the watermark
    op = OverAggregateOperator(OverConfig(ROWS, None, AGGS))
    op.advance_watermark(150)
    op.process_element(("b",), 120, (1, 1))
    op.process_element(("b",), 151, (1, 2))
    op.end_of_input()
    assert [r[-1] for r in op.drain()] == [2]
    assert op.counters.dropped == {"late": 1}


def test_range_cleanup_forgets_the_key_and_a_superseded_cleanup_timer_counts():
    # RANGE 10: the row at 100 sets cleanup to 100 + 15 + 1 = 116; the row at 106 to 122
    # (116 < 106 + 11; at 105 it would stay: 116 is not below 105 + 11), so 116 is a
    # superseded timer: when it fires the key's last triggering time becomes 116 and a
    # row at 110 is late
    config = OverConfig(RANGE, 10, AGGS, late_output=True)
    op = OverAggregateOperator(config)
    op.process_element(("a",), 100, (1, 0))
    op.process_element(("a",), 106, (1, 1))
    op.advance_watermark(116)
    op.process_element(("a",), 110, (1, 2))
    assert [r[2] for r in op.drain_late()] == [(1, 2)]
    op.advance_watermark(122)  # the current cleanup timer: state cleared
    assert op.active_keys() == []
    op.process_element(("a",), 110, (5, 3))  # after cleanup: accepted, alone in its frame
    op.end_of_input()
    assert [(r[6], r[7], r[8]) for r in op.drain()] == [(100, 1, 1), (106, 2, 2), (110, 5, 1)]


# --------------------------------------------------------------------------- reference


def reference(
    frame: str, preceding: int | None, rows: list[tuple], wms: list[int]
) -> tuple[list[tuple], int]:
    """Flink's over functions replayed naively: (emitted rows as ``emitted`` gives them,
    sorted; late count)."""
    watermark = MIN_TIME
    accepted: dict[Any, list[tuple]] = {}  # key -> [(ts, seq, v, id, epoch)]
    emitted_rows: dict[Any, list[tuple]] = {}  # key -> [(ts, seq, v, id, epoch)] in order
    timers: dict[Any, set[int]] = {}
    last: dict[Any, int] = {}
    cleanup: dict[Any, int | None] = {}
    epoch: dict[Any, int] = {}
    out: list[tuple] = []
    late = 0

    def value(frame_rows: list[tuple]) -> tuple:
        vs = [r[2] for r in frame_rows]
        return (sum(vs), len(vs), min(vs), max(vs))

    def fire(key: Any, t: int) -> None:
        if preceding is None:
            if not accepted[key]:
                return
            due = sorted((r for r in accepted[key] if r[0] <= watermark), key=lambda r: r[:2])
            for r in due:
                accepted[key].remove(r)
                emitted_rows[key].append(r)
                if frame == ROWS:
                    out.append((key, r[0], *value(emitted_rows[key]), r[2], r[3]))
            if frame == RANGE:
                for r in due:
                    same_or_before = [e for e in emitted_rows[key] if e[0] <= r[0]]
                    out.append((key, r[0], *value(same_or_before), r[2], r[3]))
            if accepted[key]:
                timers[key].add(watermark + 1)
            return
        if frame == RANGE and cleanup[key] is not None and cleanup[key] <= t:  # type: ignore[operator]
            epoch[key] += 1
            last.pop(key, None)
            cleanup[key] = None
            return
        inputs = sorted((r for r in accepted[key] if r[0] == t), key=lambda r: r[1])
        for r in inputs:
            accepted[key].remove(r)
            emitted_rows[key].append(r)
            if frame == RANGE:
                assert preceding is not None
                live = [
                    e
                    for e in emitted_rows[key] + inputs
                    if e[4] == epoch[key] and t - preceding <= e[0] <= t
                ]
                live = list({e[1]: e for e in live}.values())
            else:
                assert preceding is not None
                live = emitted_rows[key][-(preceding + 1) :]
            out.append((key, t, *value(live), r[2], r[3]))
        last[key] = t

    def rise(wm: int) -> None:
        nonlocal watermark
        if wm <= watermark:
            return
        watermark = wm
        while True:
            due = [(t, k) for k, ts in timers.items() for t in ts if t <= wm]
            if not due:
                return
            t, k = min(due, key=lambda x: x[0])
            timers[k].discard(t)
            fire(k, t)

    for seq, ((key, ts, v, i), wm) in enumerate(zip(rows, wms, strict=True)):
        rise(wm)
        for d in (accepted, emitted_rows, timers):
            d.setdefault(key, [] if d is not timers else set())  # type: ignore[arg-type]
        cleanup.setdefault(key, None)
        epoch.setdefault(key, 0)
        if preceding is None:
            if ts <= watermark:
                late += 1
                continue
            timers[key].add(0 if watermark < 0 else watermark + 1)
        else:
            if ts <= last.get(key, 0):
                late += 1
                continue
            timers[key].add(ts)
            if frame == RANGE and (cleanup[key] is None or cleanup[key] < ts + preceding + 1):  # type: ignore[operator]
                cleanup[key] = ts + int(preceding * 1.5) + 1
                timers[key].add(cleanup[key])  # type: ignore[arg-type]
        accepted[key].append((ts, seq, v, i, epoch[key]))
    rise(MAX_TIME)
    return sorted(out, key=repr), late


@st.composite
def replays(draw: Any) -> tuple[list[tuple], list[int]]:
    """Rows (key, ts, value, id) in arrival order with the watermark each sees: the
    bounded out-of-orderness watermark of the rows before it (max - delay - 1)."""
    n = draw(st.integers(0, 30))
    delay = draw(st.integers(0, 15))
    rows, wms, top = [], [], None
    for i in range(n):
        key = (draw(st.sampled_from("ab")),)
        ts = draw(st.integers(-3, 60))
        rows.append((key, ts, draw(st.integers(-5, 9)), i))
        wms.append(MIN_TIME if top is None else top - delay - 1)
        top = ts if top is None else max(top, ts)
    return rows, wms


@settings(max_examples=300, deadline=None)
@given(
    replays(),
    st.sampled_from([RANGE, ROWS]),
    st.one_of(st.none(), st.integers(0, 12)),
    st.booleans(),
)
def test_operator_equals_the_brute_force_replay(
    replay: tuple, frame: str, preceding: int | None, restore: bool
) -> None:
    rows, wms = replay
    config = OverConfig(frame, preceding, AGGS)
    op = OverAggregateOperator(config)
    out: list[tuple] = []
    for j, ((key, ts, v, i), wm) in enumerate(zip(rows, wms, strict=True)):
        op.advance_watermark(wm)
        out += emitted(op)
        if restore and j % 3 == 2:
            # a stream host restores each key between micro-batches
            fresh = OverAggregateOperator(config)
            fresh.watermark = op.watermark
            fresh.counters = op.counters
            for k in op.active_keys():
                fresh.restore_key(k, op.snapshot_key(k))
            op = fresh
        op.process_element(key, ts, (v, i))
    op.end_of_input()
    out += emitted(op)
    expected, late = reference(frame, preceding, rows, wms)
    assert sorted(out, key=repr) == expected
    c = op.counters
    assert c.dropped.get("late", 0) == late
    assert c.rows_in == len(rows) and c.rows_emitted + late == len(rows)


def test_process_batch_equals_the_row_loop():
    rows = [(("a",), 5, 1, 0), (("b",), 3, 2, 1), (("a",), 2, 3, 2), (("a",), 9, 4, 3)]
    wms = [MIN_TIME, 4, 4, 4]
    config = OverConfig(RANGE, 3, AGGS)
    batch = RowBatch(
        [r[0] for r in rows],
        [r[1] for r in rows],
        ([r[2] for r in rows], [r[3] for r in rows]),
        wms,
    )
    op = OverAggregateOperator(config)
    op.process_batch(batch)
    op.end_of_input()
    assert sorted(emitted(op), key=repr) == sorted(emitted(run(config, rows, wms)), key=repr)
