"""The idle monitor's rule without Spark: progress in, heartbeats and saved state out.

``IdleMonitor.absorb`` reads ``StreamingQuery.recentProgress`` entries (plain
dicts here, with the fields Spark reports); ``beat`` writes heartbeats
(docs/streaming.md, "Idle sources"). Expected values are derived by hand.
"""

from __future__ import annotations

import json
from pathlib import Path

from wql.spark.idle import STATE_FILE, IdleMonitor, IdleState
from wql.spark.streaming import HEARTBEAT_COLUMN, IDLE_METRICS

T0 = 1_800_000_000_000  # a processing time, ms
E0 = 1_704_067_200_000  # an event time, ms


def _progress(batch: int, at_ms: int, rows: int, max_ms: int | None) -> dict:
    import datetime as dt

    stamp = dt.datetime.fromtimestamp(at_ms / 1000, dt.UTC).isoformat(timespec="milliseconds")
    metrics = {IDLE_METRICS: {"rows": rows, "max_ms": max_ms}}
    return {"batchId": batch, "timestamp": stamp.replace("+00:00", "Z"), "observedMetrics": metrics}


def _heartbeats(end: Path) -> list[int]:
    return sorted(json.loads(p.read_text())[HEARTBEAT_COLUMN] for p in end.glob("heartbeat-*"))


def test_the_rule_extrapolates_event_time_after_the_quiet_spell(tmp_path):
    m = IdleMonitor(2000, tmp_path / "end", tmp_path)
    # two batches with rows (max event time 9.5 s, then 9.8 s), a heartbeat-only one
    m.absorb([_progress(0, T0, 2, E0 + 9500), _progress(1, T0 + 700, 1, E0 + 9800)])
    m.absorb([_progress(1, T0 + 700, 1, E0 + 9800), _progress(2, T0 + 900, 0, None)])
    assert (m.state.last_arrival_ms, m.state.max_event_ms, m.state.batch_id) == (
        T0 + 700,
        E0 + 9800,
        2,
    )
    assert m.beat(T0 + 700 + 1999) is None  # not idle yet
    # idle: max event time + the quiet spell; Spark's watermark = that - delay - 1
    assert m.beat(T0 + 700 + 2000) == E0 + 9800 + 2000
    assert m.beat(T0 + 700 + 3999) is None  # one heartbeat per IDLE AFTER while quiet
    assert m.beat(T0 + 700 + 4000) == E0 + 9800 + 4000
    assert _heartbeats(tmp_path / "end") == [E0 + 11800, E0 + 13800]
    # a row again: the spell ends, the next one counts from its micro-batch
    m.absorb([_progress(5, T0 + 6000, 1, E0 + 9000)])
    assert m.state.max_event_ms == E0 + 9800  # the largest event time never goes back
    assert m.beat(T0 + 7000) is None
    # idle again at T0 + 8000, but 9.8 s + 2 s is below the last heartbeat (13.8 s)
    assert m.beat(T0 + 8000) is None
    assert m.beat(T0 + 10_000) is None
    assert m.beat(T0 + 10_001) == E0 + 13_801


def test_heartbeats_only_rise(tmp_path):
    m = IdleMonitor(1000, tmp_path / "end", tmp_path)
    m.absorb([_progress(0, T0, 1, E0 + 5000)])
    assert m.beat(T0 + 3000) == E0 + 8000
    # a later row far behind in event time: the extrapolation from it would be lower
    m.absorb([_progress(1, T0 + 3500, 1, E0 + 100)])
    assert m.state.max_event_ms == E0 + 5000
    assert m.beat(T0 + 4500) is None  # 5000 + 1000 = 6000 < 8000: nothing to raise
    assert m.beat(T0 + 7000) == E0 + 8500


def test_the_state_is_saved_and_a_restart_goes_on_from_it(tmp_path):
    m = IdleMonitor(2000, tmp_path / "end", tmp_path)
    m.absorb([_progress(0, T0, 2, E0 + 9500)])
    saved = json.loads((tmp_path / STATE_FILE).read_text())
    assert saved == {"last_arrival_ms": T0, "max_event_ms": E0 + 9500, "batch_id": 0}
    again = IdleMonitor(2000, tmp_path / "end", tmp_path)
    assert again.state == IdleState(T0, E0 + 9500, 0)
    assert again.beat(T0 + 5000) == E0 + 9500 + 5000


def test_a_later_committed_batch_counts_as_an_arrival_after_a_restart(tmp_path):
    m = IdleMonitor(2000, tmp_path / "end", tmp_path)
    m.absorb([_progress(0, T0, 2, E0 + 9500)])
    # the checkpoint committed batch 1 (at T0 + 3000) that the saved state never saw
    ck = tmp_path / "operator"
    (ck / "commits").mkdir(parents=True)
    (ck / "offsets").mkdir()
    (ck / "commits" / "1").write_text("v1\n{}\n")
    (ck / "offsets" / "1").write_text(
        "v1\n" + json.dumps({"batchWatermarkMs": 0, "batchTimestampMs": T0 + 3000}) + "\n{}\n"
    )
    again = IdleMonitor(2000, tmp_path / "end", tmp_path)
    assert (again.state.last_arrival_ms, again.state.batch_id) == (T0 + 3000, 1)
    # never ahead of the uninterrupted rule: idle from T0 + 5000 on, not T0 + 2000
    assert again.beat(T0 + 4999) is None
    assert again.beat(T0 + 5000) == E0 + 9500 + 2000
