"""Late rows on a stream: the planner's rule, pinned on one stream with hand-derived rows.

The rule (docs/native.md, "Streaming"): native runs only where it gives the
operator engine's rows, and no row is lost silently. On a stream Spark's own
aggregation gives rows behind its watermark another outcome than the operator
engine, so a query that is native in batch runs on the operator engine on a
stream, where every late row is counted (or sent to ``LATE DATA TO``).

The stream, one file per micro-batch, TUMBLE 10 s, watermark delay 1 s (times
in seconds after 2024-01-01 00:00:00)::

    file 0: a@1 v=1, b@2 v=2, a@25 v=4      -> watermark after it: 25 - 1 - 0.001
    file 1: a@12 v=8, b@24.5 v=16            a@12: [10, 20) ended at 19.999 <= 23.999: late
    file 2: a@5 v=32                         a@5: [0, 10) long gone: late
    file 3: zz@100 v=0                       the sentinel: its watermark fires the rest

Operator engine (what both queries run on the stream), per micro-batch: file 1
first fires a [0, 10) and b [0, 10) (their end passed the watermark), then
a@12 is late; b@24.5 joins b [20, 30); a@5 is late; the sentinel's watermark
fires a [20, 30) and b [20, 30). So ``counted`` is a 0 (1 row, 1), b 0 (1, 2),
a 20 (1, 4), b 20 (1, 16) with 2 rows dropped as late, and ``routed`` the
same windows with a@12 and a@5 in its late output and nothing dropped. Batch
replay in arrival order gives the same. Spark's native aggregation on the same
stream (measured): a@12 is added to a window [10, 20) it emits with 1 row, and
a@5 vanishes, visible only in a progress metric (``numRowsDroppedByWatermark``).
"""

from __future__ import annotations

import datetime as dt
import json
import os
from collections import Counter
from pathlib import Path

import pytest

import wql
from wql.compiler.backends import native
from wql.errors import WqlUnsupportedError
from wql.spark.stream_sinks import read_output, read_stream_source, start_streams

pytestmark = pytest.mark.spark

BASE = dt.datetime(2024, 1, 1)
FILES = [
    [("a", 1, 1000), ("b", 2, 2000), ("a", 4, 25000)],
    [("a", 8, 12000), ("b", 16, 24500)],
    [("a", 32, 5000)],
    [("zz", 0, 100000)],
]

SOURCE = """
CREATE SOURCE s (k STRING, v BIGINT, ts TIMESTAMP, seq BIGINT,
    WATERMARK FOR ts AS ts - INTERVAL '1' SECOND)
WITH (format = 'json', path = '{path}', maxFilesPerTrigger = '1'{extra});
"""
COUNTED = """
CREATE VIEW counted AS
SELECT k, window_start, COUNT(*) AS n, SUM(v) AS total FROM s
GROUP BY k, TUMBLE(ts, INTERVAL '10' SECOND);
"""
QUERIES = (
    COUNTED
    + """
CREATE VIEW routed AS
SELECT k, window_start, COUNT(*) AS n FROM s
GROUP BY k, TUMBLE(ts, INTERVAL '10' SECOND)
LATE DATA TO late_rows;
"""
)


def _at(seconds: float) -> dt.datetime:
    return BASE + dt.timedelta(seconds=seconds)


WINDOWS = Counter({("a", _at(0), 1, 1): 1, ("b", _at(0), 1, 2): 1})
WINDOWS += Counter({("a", _at(20), 1, 4): 1, ("b", _at(20), 1, 16): 1})
ROUTED = Counter({(k, start, n): 1 for k, start, n, _ in WINDOWS})


def _write(folder: Path) -> None:
    folder.mkdir(parents=True)
    seq = 0
    for i, rows in enumerate(FILES):
        lines = []
        for k, v, ms in rows:
            ts = (BASE + dt.timedelta(milliseconds=ms)).isoformat()
            lines.append(json.dumps({"k": k, "v": v, "ts": ts, "seq": seq}))
            seq += 1
        tmp = folder / f".f{i}.tmp"
        tmp.write_text("\n".join(lines) + "\n")
        final = folder / f"f{i}.json"
        tmp.rename(final)
        # the file source orders new files by modification time
        os.utime(final, (1_000_000 + i, 1_000_000 + i))


def _rows(df) -> Counter:
    return Counter(tuple(r) for r in df.collect() if r["k"] != "zz")


@pytest.fixture(scope="module")
def stream(spark, tmp_path_factory):
    base = tmp_path_factory.mktemp("late_rows")
    _write(base / "in")
    text = SOURCE.format(path=base / "in", extra="") + QUERIES
    compiled = wql.compile(text)
    source = read_stream_source(spark, compiled.program.source("s"), None)
    return base, text, compiled, source


def test_a_query_native_in_batch_runs_on_the_operator_engine_on_a_stream(spark, stream):
    base, _, compiled, source = stream
    assert compiled.engine["counted"] == "native"  # planned for a batch source
    results = compiled.apply(spark, s=source)
    counted = results.query("counted")
    assert counted.engine == "operator"
    assert counted.plan.engine.streaming
    (reason,) = counted.plan.engine.reasons
    assert reason.text.startswith(
        "WATERMARK FOR ts at line 3 needs the operator engine on a stream"
    )

    sinks = start_streams(results, base / "out", base / "ck", fmt="parquet")
    assert _rows(read_output(spark, sinks.outputs["counted"])) == WINDOWS
    assert _rows(read_output(spark, sinks.outputs["routed"])) == ROUTED
    late = read_output(spark, sinks.outputs["late_rows"]).select("k", "v", "ts").collect()
    assert sorted(tuple(r) for r in late) == [("a", 8, _at(12)), ("a", 32, _at(5))]

    # every late row counted: the tagged stream's counter rows, per query
    def dropped(name: str) -> Counter:
        from wql.spark.layout import COUNTERS, KIND

        total: Counter = Counter()
        tagged = read_output(spark, sinks.tagged[name]).where(f"{KIND} = 'C'")
        for row in tagged.select(COUNTERS).collect():
            total.update(json.loads(row[0])["dropped"])
        return total

    assert dropped("counted") == Counter({"late": 2})
    assert dropped("routed") == Counter()


def test_batch_replay_in_arrival_order_gives_the_stream_rows(spark, stream, tmp_path):
    base, stream_text, _, _ = stream
    # planned for streams, a batch DataFrame still gets the batch choice at apply()
    planned = wql.compile(stream_text, streaming=True)
    assert planned.engine == {"counted": "operator", "routed": "operator"}
    batch_df = spark.read.schema("k STRING, v BIGINT, ts TIMESTAMP, seq BIGINT").json(
        str(base / "in")
    )
    applied = planned.only("counted").apply(spark, s=batch_df)
    assert applied.query("counted").engine == "native"  # lazy: nothing ran

    text = SOURCE.format(path=base / "in", extra=", arrival_order = 'seq'") + QUERIES
    results = wql.compile(text).apply(spark)
    try:
        assert _rows(results["counted"]) == WINDOWS
        assert _rows(results["routed"]) == ROUTED
        assert results.query("counted").counters["dropped"] == {"late": 2}
        late = results["late_rows"].select("k", "v").collect()
        assert sorted(tuple(r) for r in late) == [("a", 8), ("a", 32)]
    finally:
        results.release()


def test_forcing_native_on_the_stream_is_a_positioned_error(spark, stream):
    base, _, _, source = stream
    text = SOURCE.format(path=base / "in", extra="") + COUNTED
    compiled = wql.compile(text, "native")  # fine in batch
    with pytest.raises(WqlUnsupportedError) as info:
        compiled.only("counted").apply(spark, s=source)
    err = info.value
    assert "cannot run on the native engine on a stream: WATERMARK FOR ts at line 3" in err.message
    assert (err.line, err.column) == (3, 5)
    with pytest.raises(WqlUnsupportedError, match="on a stream"):
        wql.compile(text, "native", streaming=True)


def test_spark_native_aggregation_on_the_same_stream_loses_and_misplaces_late_rows(spark, stream):
    """Why native is refused on streams: the native lowering run on the stream
    by hand (the planner never does this) disagrees with the operator engine."""
    base, _, compiled, source = stream
    q = compiled.program.query("counted")
    with pytest.raises(WqlUnsupportedError, match="on a stream"):
        native.build_native(q, source)  # the backend checks the stream capabilities too
    df = native.run_steps(native.lower(q).steps, source)
    query = (
        df.writeStream.format("memory")
        .queryName("wql_native_late_rows")
        .outputMode("append")
        .option("checkpointLocation", str(base / "native_ck"))
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination()
    got = _rows(spark.sql("SELECT * FROM wql_native_late_rows"))
    # a@12 is one micro-batch behind: Spark adds it to a window [10, 20) it emits
    assert got[("a", _at(10), 1, 8)] == 1
    # a@5 is gone: in no window, in no output, only in a progress metric
    assert not any(total >= 32 for *_, total in got)
    dropped = sum(
        op.get("numRowsDroppedByWatermark", 0)
        for p in query.recentProgress
        for op in p.get("stateOperators", [])
    )
    assert dropped == 1


def test_rows_where_rejects_still_raise_the_stream_watermark(spark, tmp_path):
    """As in batch replay, the watermark is generated at the source, before WHERE.

    file 0: a@1 v=1; file 1: a@25 v=0, rejected by WHERE v > 0, whose event
    time raises the watermark to 25 - 1 - 0.001 s; file 2: zz@26 v=0 (rejected
    too), whose micro-batch sees that watermark: [0, 10) of a fires with a@1
    alone. Only rejected rows come after a@1, so without them the window
    never fires. (Spark's optimizer had moved the WHERE below the watermark, so
    the rejected row did not count and the window did not fire.)
    """
    folder = tmp_path / "in"
    folder.mkdir()
    for i, (k, v, ms) in enumerate([("a", 1, 1000), ("a", 0, 25000), ("zz", 0, 26000)]):
        ts = (BASE + dt.timedelta(milliseconds=ms)).isoformat()
        final = folder / f"f{i}.json"
        final.write_text(json.dumps({"k": k, "v": v, "ts": ts, "seq": i}) + "\n")
        os.utime(final, (1_000_000 + i, 1_000_000 + i))
    text = SOURCE.format(path=folder, extra="") + (
        "SELECT k, window_start, COUNT(*) AS n FROM s WHERE v > 0 "
        "GROUP BY k, TUMBLE(ts, INTERVAL '10' SECOND)"
    )
    compiled = wql.compile(text)
    source = read_stream_source(spark, compiled.program.source("s"), None)
    results = compiled.apply(spark, s=source)
    sinks = start_streams(results, tmp_path / "out", tmp_path / "ck", fmt="parquet")
    assert _rows(read_output(spark, sinks.outputs["query_1"])) == Counter({("a", _at(0), 1): 1})
    # batch replay agrees
    batch = spark.read.schema("k STRING, v BIGINT, ts TIMESTAMP, seq BIGINT").json(str(folder))
    assert _rows(wql.compile(text).apply(spark, s=batch).df) == Counter({("a", _at(0), 1): 1})
