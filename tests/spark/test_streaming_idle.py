"""Idle sources on a stream: ``WATERMARK ... IDLE AFTER`` with the idle monitor.

Real streaming queries with checkpoints (docs/streaming.md, "Idle sources"):
a quiet stream's event-time window closes once the source was idle for
``IDLE AFTER`` (and not before, while rows keep arriving), the monitor's
state survives a restart from the checkpoint, available-now runs apply the
rule between runs, and a drain still ends the stream. The expected rows are
derived by hand in each test.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import time
from collections import Counter
from pathlib import Path

import pytest
from pyspark.errors import AnalysisException

import wql
from wql.errors import ErrorCode, WqlUnsupportedError
from wql.spark.idle import STATE_FILE
from wql.spark.stream_sinks import read_output, read_stream_source, start_streams, tagged_counters
from wql.spark.streaming import IDLE_METRICS

pytestmark = pytest.mark.spark

BASE = dt.datetime(2024, 1, 1)

TEXT = """CREATE SOURCE s (k STRING, v BIGINT, ts TIMESTAMP,
    WATERMARK FOR ts AS ts - INTERVAL '0' SECOND IDLE AFTER INTERVAL '{idle}' SECOND)
WITH (format = 'json', path = '{path}', maxFilesPerTrigger = '1');
CREATE VIEW q AS
SELECT k, window_start, COUNT(*) AS n, SUM(v) AS total FROM s
GROUP BY k, TUMBLE(ts, INTERVAL '10' SECOND);
"""


def _at(seconds: float) -> dt.datetime:
    return BASE + dt.timedelta(seconds=seconds)


def _ms(seconds: float) -> int:
    return int((_at(seconds) - dt.datetime(1970, 1, 1)).total_seconds() * 1000)


def _write(folder: Path, i: int, rows: list[tuple[str, int, float]]) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    tmp = folder / f".f{i}.tmp"
    tmp.write_text(
        "".join(
            json.dumps({"k": k, "v": v, "ts": _at(sec).isoformat()}) + "\n" for k, v, sec in rows
        )
    )
    final = folder / f"f{i}.json"
    tmp.rename(final)
    # the file source orders new files by modification time
    os.utime(final, (1_000_000 + i, 1_000_000 + i))


def _compiled(base: Path, idle: int):
    return wql.compile(TEXT.format(idle=idle, path=base / "in"))


def _start(spark, base: Path, idle: int, **kw):
    compiled = _compiled(base, idle)
    source = read_stream_source(spark, compiled.program.source("s"), None)
    results = compiled.apply(spark, s=source)
    return start_streams(results, base / "out", base / "ck", fmt="parquet", **kw)


def _rows(spark, sinks) -> Counter:
    try:
        return Counter(tuple(r) for r in read_output(spark, sinks.outputs["q"]).collect())
    except AnalysisException:  # a running sink that committed no file yet
        return Counter()


def _first_batches_done(ck: Path) -> bool:
    """Whether every query under ``ck`` committed its first micro-batch. A stateful
    query stopped inside its first one refuses to restart on Spark 4.3
    (``STATE_STORE_CHECKPOINT_LOCATION_NOT_EMPTY``: its offsets log is not empty on
    batch 0; docs/streaming.md, "Known limits")."""
    queries = [d.parent for d in ck.rglob("offsets") if d.is_dir()]
    return bool(queries) and all((q / "commits" / "0").exists() for q in queries)


def _wait_for(spark, sinks, wanted: Counter, seconds: float = 90) -> None:
    """Until the output is ``wanted`` (read once a heartbeat was written: each read
    is a Spark job competing with the stream)."""
    deadline = time.monotonic() + seconds
    monitor = sinks.monitors["q"]
    while not monitor.heartbeats and time.monotonic() < deadline:
        time.sleep(0.2)
    while _rows(spark, sinks) != wanted and time.monotonic() < deadline:
        time.sleep(1)
    assert _rows(spark, sinks) == wanted


def _epoch_ms(ts: str) -> int:
    return int(dt.datetime.fromisoformat(ts.replace("Z", "+00:00")).timestamp() * 1000)


def _operator_batches(sinks) -> list[dict]:
    """The stage-1 (operator) query's micro-batches: timestamp, source rows, watermark."""
    (operator,) = sinks.stages[0]
    metrics = [(p.get("observedMetrics") or {}).get(IDLE_METRICS) for p in operator.recentProgress]
    return [
        {
            "at": _epoch_ms(p["timestamp"]),
            "rows": (m["rows"] or 0) if m is not None else 0,
            "wm": _epoch_ms(p["eventTime"]["watermark"]) if "watermark" in p["eventTime"] else 0,
        }
        for p, m in zip(operator.recentProgress, metrics, strict=True)
    ]


@pytest.mark.slow
def test_a_quiet_stream_closes_its_window_after_idle_after_and_not_before(spark, tmp_path):
    # rows keep coming (one file every 0.5 s); the largest event time stays 9.8 s, so
    # without the idle rule [0, 10) never closes. The quiet spell is counted between
    # the micro-batches that read rows, and a micro-batch took over 3 s while another
    # pytest process ran streams on the same 2 cores: IDLE AFTER is 6 s
    idle = 6
    files = [[("a", 1, 1.0), ("b", 2, 4.0)], [("a", 4, 9.5)], [("a", 8, 9.6)], [("a", 16, 9.8)]]
    _write(tmp_path / "in", 0, files[0])
    sinks = _start(spark, tmp_path, idle, trigger="500 milliseconds")
    try:
        for i, rows in enumerate(files[1:], start=1):
            time.sleep(0.5)
            _write(tmp_path / "in", i, rows)
        # after the quiet spell: (a, [0, 10), 4 rows, 1+4+8+16), (b, [0, 10), 1, 2)
        _wait_for(spark, sinks, Counter({("a", _at(0), 4, 29): 1, ("b", _at(0), 1, 2): 1}))
        monitor = sinks.monitors["q"]
        batches = _operator_batches(sinks)
    finally:
        sinks.stop()
    arrivals = [b["at"] for b in batches if b["rows"]]
    # [0, 10) fires in the first micro-batch whose watermark reaches 9.999 s; no
    # early close: that came after the last row's micro-batch, IDLE AFTER later
    fired = next(b for b in batches if b["wm"] >= _ms(10) - 1)
    assert fired["at"] >= arrivals[-1] + idle * 1000
    # the heartbeat: max event time + the quiet spell (at least IDLE AFTER)
    first = monitor.heartbeats[0]
    assert first >= _ms(9.8) + idle * 1000
    assert monitor.state.max_event_ms == _ms(9.8)
    assert monitor.state.last_arrival_ms == arrivals[-1]
    # heartbeats are no input rows
    assert tagged_counters(spark, sinks.tagged["q"])["rows_in"] == 5


@pytest.mark.slow
def test_the_idle_rule_survives_a_restart_from_the_checkpoint(spark, tmp_path):
    idle = 4  # the first run stops before it: room for a slow micro-batch
    _write(tmp_path / "in", 0, [("a", 1, 1.0), ("a", 2, 9.5)])
    sinks = _start(spark, tmp_path, idle, trigger="500 milliseconds")
    try:
        deadline = time.monotonic() + 60
        while (
            not (
                (tmp_path / "ck" / "q" / STATE_FILE).exists()
                and _first_batches_done(tmp_path / "ck")
            )
            and time.monotonic() < deadline
        ):
            time.sleep(0.2)
    finally:
        sinks.stop()  # before the source was idle for 4 s: nothing closed yet
    assert _rows(spark, sinks) == Counter()
    saved = json.loads((tmp_path / "ck" / "q" / STATE_FILE).read_text())
    assert saved["max_event_ms"] == _ms(9.5)

    sinks = _start(spark, tmp_path, idle, trigger="500 milliseconds")
    try:
        _wait_for(spark, sinks, Counter({("a", _at(0), 2, 3): 1}))
        monitor = sinks.monitors["q"]
    finally:
        sinks.stop()
    # the restarted monitor went on from the saved arrival: no row since
    assert monitor.state.last_arrival_ms == saved["last_arrival_ms"]
    assert monitor.heartbeats[0] >= _ms(9.5) + idle * 1000
    assert tagged_counters(spark, sinks.tagged["q"])["rows_in"] == 2


@pytest.mark.slow
def test_available_now_runs_apply_the_rule_between_runs_and_drain_still_ends(spark, tmp_path):
    idle = 1
    _write(tmp_path / "in", 0, [("a", 1, 1.0), ("a", 2, 9.5)])
    sinks = _start(spark, tmp_path, idle)
    assert _rows(spark, sinks) == Counter()  # the watermark is 9.499 s
    assert not sinks.monitors["q"].heartbeats
    time.sleep(idle + 0.2)
    # a run with no new row after the quiet spell: its first micro-batch takes a
    # heartbeat at 9.5 s + the spell (>= 1 s), so [0, 10) closes
    sinks = _start(spark, tmp_path, idle)
    (heartbeat,) = sinks.monitors["q"].heartbeats
    assert heartbeat >= _ms(9.5) + idle * 1000
    assert _rows(spark, sinks) == Counter({("a", _at(0), 2, 3): 1})
    # a row far ahead of the extrapolated event time (the runs took seconds, not
    # 1000 s), then the end of input: [1000, 1010) fires at the end, as in batch
    _write(tmp_path / "in", 1, [("b", 4, 1005.0)])
    sinks = _start(spark, tmp_path, idle, drain=True)
    assert "q" in sinks.drained
    assert _rows(spark, sinks) == Counter({("a", _at(0), 2, 3): 1, ("b", _at(1000), 1, 4): 1})
    counters = tagged_counters(spark, sinks.tagged["q"])
    assert (counters["rows_in"], counters["rows_emitted"], counters["late_rows"]) == (3, 2, 0)


def test_apply_alone_cannot_start_a_stream_over_an_idle_source(spark, tmp_path):
    _write(tmp_path / "in", 0, [("a", 1, 1.0)])
    compiled = _compiled(tmp_path, 2)
    source = read_stream_source(spark, compiled.program.source("s"), None)
    results = compiled.apply(spark, s=source)
    with pytest.raises(WqlUnsupportedError) as info:
        results.df.writeStream  # noqa: B018 - the access is what raises
    err = info.value
    assert err.code is ErrorCode.UNSUPPORTED
    assert (err.line, err.column) == (2, TEXT.splitlines()[1].index("IDLE AFTER") + 1)
    assert "start_streams" in (err.hint or "")
