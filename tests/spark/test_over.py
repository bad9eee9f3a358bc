"""OVER aggregations on Spark (Flink SQL's event-time over aggregate), against
hand-derived rows, on both engines in batch and on a checkpointed stream.

Every row comes out once, when the watermark passes its time, with the
aggregates over its frame: RANGE, the key's rows with time in
``[ts - preceding, ts]`` (rows of equal time share it); ROWS, the row and the
``n`` rows before it in (time, arrival) order. A row is late for a bounded
frame when its time is not above the last time its key fired (docs/language.md,
"OVER aggregations")."""

from __future__ import annotations

import datetime as dt
from collections import Counter

import pytest

import wql
from tests.spark.examples_helpers import text as as_text
from tests.spark.pipeline_helpers import at, run
from tests.spark.stream_helpers import (
    SOURCE,
    batch_query,
    files,
    stream_query,
    write_files,
)
from wql.errors import WqlUnsupportedError

pytestmark = pytest.mark.spark

SRC = (
    "CREATE SOURCE clicks (user_id STRING, amount BIGINT, ts TIMESTAMP, seq BIGINT, "
    "WATERMARK FOR ts AS ts - INTERVAL '2' SECOND){options};\n"
)

# user, amount, seconds (input order = seq)
CLICKS = [
    ("u", 1, 1),
    ("u", 2, 3),
    ("v", 5, 3),
    ("u", 4, 3),
    ("u", 8, 6),
    ("v", 1, 9),
    ("u", 16, 10),
]


def clicks(spark, rows=CLICKS):
    return spark.createDataFrame(
        [(u, a, at(t), i) for i, (u, a, t) in enumerate(rows)],
        "user_id string, amount bigint, ts timestamp, seq bigint",
    )


def query(frame: str, extra: str = "", options: str = "") -> str:
    window = f"OVER (PARTITION BY user_id ORDER BY ts {frame})"
    return SRC.format(options=options) + (
        f"SELECT seq, user_id, amount, SUM(amount) {window} AS total, "
        f"COUNT(*) {window} AS n FROM clicks {extra}"
    )


RANGE_3S = "RANGE BETWEEN INTERVAL '3' SECOND PRECEDING AND CURRENT ROW"
ROWS_1 = "ROWS BETWEEN 1 PRECEDING AND CURRENT ROW"
UNBOUNDED = "ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW"


def texts(rows: list[tuple]) -> list[tuple]:
    return sorted(tuple(as_text(v) for v in r) for r in rows)


@pytest.mark.parametrize(
    ("frame", "want"),
    [
        # u's frames [ts - 3 s, ts]: 1 s -> {1}; 3 s -> {1, 2, 4} (equal times share);
        # 6 s -> {2, 4, 8} (3 s is in, 1 s is not); 10 s -> {16} (7 s..10 s); v's 3 s and
        # 9 s are 6 s apart: each alone
        (
            RANGE_3S,
            [(0, 1, 1), (1, 7, 3), (2, 5, 1), (3, 7, 3), (4, 14, 3), (5, 1, 1), (6, 16, 1)],
        ),
        # the row and the one before it in (time, arrival) order: u is 1, 2, 4, 8, 16
        (ROWS_1, [(0, 1, 1), (1, 3, 2), (2, 5, 1), (3, 6, 2), (4, 12, 2), (5, 6, 2), (6, 24, 2)]),
        (
            UNBOUNDED,
            [(0, 1, 1), (1, 3, 2), (2, 5, 1), (3, 7, 3), (4, 15, 4), (5, 6, 2), (6, 31, 5)],
        ),
    ],
)
def test_batch_rows_on_both_engines(spark, partitions, frame, want):
    text = query(frame)
    native, native_counters, engines = run(spark, text, clicks=clicks(spark))
    operator, counters, _ = run(spark, text, "operator", clicks=clicks(spark))
    assert engines == {"query_1": "native"}
    expected = sorted(
        (str(seq), CLICKS[seq][0], str(CLICKS[seq][1]), str(total), str(n))
        for seq, total, n in want
    )
    assert native["query_1"] == expected
    assert operator["query_1"] == expected
    for c in (native_counters["query_1"], counters["query_1"]):
        assert (c["rows_in"], c["rows_fired"], c["late_rows"], c["dropped"]) == (7, 7, 0, {})


# arrival order: seq says how the rows come; u's row at 2 s comes after the watermark
# passed 4 s (the row at 7 s: 7 - 2 - 1), when u fired 3 s already: late (2 <= 3);
# w's row at 1 s comes when w fired nothing: not late for a bounded frame, although
# the watermark passed it; for the unbounded frame both are late (at or below 4 s)
ARRIVING = [("u", 1, 3), ("v", 2, 3), ("u", 4, 7), ("u", 8, 2), ("w", 16, 1), ("u", 32, 8)]


def test_rows_behind_their_key_are_late_and_go_to_the_late_output(spark):
    text = query(RANGE_3S, "LATE DATA TO late_clicks").replace(
        "WATERMARK FOR ts AS ts - INTERVAL '2' SECOND)",
        "WATERMARK FOR ts AS ts - INTERVAL '2' SECOND) WITH (arrival_order = 'seq')",
    )
    out, counters, engines = run(spark, text, clicks=clicks(spark, ARRIVING))
    assert engines == {"query_1": "operator"}
    # u: 3 s {1}; 7 s {4} (3 s is 4 s before); 8 s {4, 32}; v: 3 s {2}; w: 1 s {16},
    # emitted at the next watermark rise
    assert out["query_1"] == texts(
        [
            (0, "u", 1, 1, 1),
            (1, "v", 2, 2, 1),
            (2, "u", 4, 4, 1),
            (4, "w", 16, 16, 1),
            (5, "u", 32, 36, 2),
        ]
    )
    assert out["late_clicks"] == texts([("u", 8, at(2), 3, at(2))])
    c = counters["query_1"]
    assert (c["rows_in"], c["rows_fired"], c["late_rows"], c["dropped"]) == (6, 5, 1, {})
    # the unbounded frame calls a row late at or below the watermark: both
    out, counters, _ = run(
        spark,
        text.replace(RANGE_3S, UNBOUNDED.replace("ROWS", "RANGE")),
        clicks=clicks(spark, ARRIVING),
    )
    assert [r[0] for r in out["late_clicks"]] == ["u", "w"]
    assert counters["query_1"]["late_rows"] == 2


def test_forcing_native_where_rows_can_be_late_is_refused():
    text = query(ROWS_1, "LATE DATA TO late_clicks")
    with pytest.raises(WqlUnsupportedError) as e:
        wql.compile(text, "native")
    assert "LATE DATA TO late_clicks" in e.value.message


# --------------------------------------------------------------------------- streams

STREAM_QUERY = """
CREATE VIEW totals AS
SELECT auction, price, ts,
    SUM(price) OVER (PARTITION BY auction ORDER BY ts RANGE BETWEEN INTERVAL '10' SECOND
        PRECEDING AND CURRENT ROW) AS recent,
    COUNT(*) OVER (PARTITION BY auction ORDER BY ts RANGE BETWEEN INTERVAL '10' SECOND
        PRECEDING AND CURRENT ROW) AS n
FROM bids;
"""


def stream_text(folder, stream: bool = True) -> str:
    options = ", maxFilesPerTrigger = '1'" if stream else ""
    return SOURCE.format(path=folder, options=options) + STREAM_QUERY


def test_a_drained_stream_equals_batch_and_survives_a_restart(spark, tmp_path):
    folder, out, ck = tmp_path / "in", tmp_path / "out", tmp_path / "ck"
    write_files(folder, range(len(files())))
    expected, counters = batch_query(spark, stream_text(folder, stream=False), "totals")
    assert sum(expected.values()) == 20 and counters["late_rows"] == 0
    streamed, _ = stream_query(spark, stream_text(folder), "totals", out, ck)
    assert streamed == expected
    # again from files 0-3, a stop, then the rest and the end of input (one checkpoint)
    folder2, out2, ck2 = tmp_path / "in2", tmp_path / "out2", tmp_path / "ck2"
    write_files(folder2, range(4))
    first, _ = stream_query(spark, stream_text(folder2), "totals", out2, ck2, drain=False)
    write_files(folder2, range(4, len(files())))
    resumed, _ = stream_query(spark, stream_text(folder2), "totals", out2, ck2)
    assert 0 < sum(first.values()) < 20
    assert resumed == expected
    assert Counter(resumed) == Counter(expected)


def test_spark_refuses_the_native_lowering_on_a_stream(spark, tmp_path):
    # what NATIVE_STREAMING declares (over_aggregate=False): Spark's window functions
    # that are not time windows do not run on a streaming DataFrame
    from pyspark.errors import AnalysisException
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    folder = tmp_path / "in"
    folder.mkdir()
    (folder / "a.json").write_text('{"k": "a", "v": 1, "ts": "2024-01-01T00:00:01"}\n')
    df = spark.readStream.schema("k string, v bigint, ts timestamp").json(str(folder))
    over = df.withColumn("s", F.sum("v").over(Window.partitionBy("k").orderBy("ts")))
    with pytest.raises(AnalysisException, match="NON_TIME_WINDOW_NOT_SUPPORTED_IN_STREAMING"):
        over.writeStream.format("memory").queryName("wql_over_refused").option(
            "checkpointLocation", str(tmp_path / "ck")
        ).start().awaitTermination()


def test_late_rows_on_a_stream_go_to_the_late_output_as_in_batch(spark, tmp_path):
    # one file per micro-batch: [a@3, a@20] (the watermark after it is 17 s: a fires 3 s),
    # [a@2, b@1] (a@2 is behind a's firing at 3 s: late; b fired nothing: not late, it
    # comes out at the end of input), then the end of input
    import json
    import os

    from tests.spark.stream_helpers import BASE, counted_rows
    from wql.spark.sources import read_stream_source
    from wql.spark.stream_sinks import read_output, start_streams

    batches = [[("a", 1, 3), ("a", 2, 20)], [("a", 4, 2), ("b", 8, 1)]]
    folder = tmp_path / "in"
    folder.mkdir()
    seq = 0
    for i, rows in enumerate(batches):
        lines = ""
        for auction, price, s in rows:
            ts = (BASE + dt.timedelta(seconds=s)).isoformat()
            lines += json.dumps({"auction": auction, "price": price, "ts": ts, "seq": seq}) + "\n"
            seq += 1
        path = folder / f"f{i:03d}.json"
        path.write_text(lines)
        os.utime(path, (1_000_000 + i, 1_000_000 + i))
    late_query = """
    CREATE VIEW totals AS
    SELECT auction, price, SUM(price) OVER (PARTITION BY auction ORDER BY ts
        ROWS BETWEEN 1 PRECEDING AND CURRENT ROW) AS pair
    FROM bids LATE DATA TO late_bids;
    """

    def text(stream: bool) -> str:
        options = ", maxFilesPerTrigger = '1'" if stream else ", arrival_order = 'seq'"
        source = SOURCE.replace("ts TIMESTAMP,", "ts TIMESTAMP, seq BIGINT,")
        return source.format(path=folder, options=options) + late_query

    compiled = wql.compile(text(True))
    source = read_stream_source(spark, compiled.program.source("bids"), None)
    results = compiled.apply(spark, bids=source)
    start_streams(results, tmp_path / "out", tmp_path / "ck", fmt="parquet", drain=True)
    streamed = counted_rows(read_output(spark, tmp_path / "out" / "totals"))
    late = counted_rows(read_output(spark, tmp_path / "out" / "late_bids"))
    want = Counter({("a", "1", "1"): 1, ("a", "2", "3"): 1, ("b", "8", "8"): 1})
    assert streamed == want
    assert [k[0] for k in late] == ["a"]
    # batch replay in the same arrival order gives the same rows and late row
    batch = wql.compile(text(False)).apply(spark)
    try:
        assert counted_rows(batch["totals"]) == want
        assert counted_rows(batch["late_bids"]) == late
    finally:
        batch.release()


def test_rows_at_or_before_the_epoch_are_late_for_a_bounded_frame_on_both_engines(spark):
    # Flink's bounded over functions start a key's last triggering time at 0: a row at
    # or before 1970-01-01 00:00:00 is late (counted); the unbounded frame compares with
    # the watermark, and takes them
    epoch = dt.datetime(1970, 1, 1)
    rows = [("u", 1, epoch - dt.timedelta(seconds=5)), ("u", 2, epoch), ("u", 4, at(1))]
    df = spark.createDataFrame(
        [(u, a, t, i) for i, (u, a, t) in enumerate(rows)],
        "user_id string, amount bigint, ts timestamp, seq bigint",
    )
    for engine in ("auto", "operator"):
        out, counters, engines = run(spark, query(ROWS_1), engine, clicks=df)
        assert engines["query_1"] == ("native" if engine == "auto" else "operator")
        assert out["query_1"] == [("2", "u", "4", "4", "1")]
        c = counters["query_1"]
        assert (c["rows_in"], c["rows_fired"], c["dropped"]) == (3, 1, {"late": 2})
        out, counters, _ = run(spark, query(UNBOUNDED), engine, clicks=df)
        assert [r[3] for r in out["query_1"]] == ["1", "3", "7"]
        assert counters["query_1"]["dropped"] == {}
