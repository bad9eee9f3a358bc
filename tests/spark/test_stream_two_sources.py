"""A window join of two sources on a stream: drained, it equals the batch join.

Each source is a folder of JSON files read as a stream (one file per
micro-batch), each with its own ``withWatermark``: Spark's global watermark
is then the minimum of the two (``multipleWatermarkPolicy`` ``min``), the
join's watermark as Flink's two-input operator keeps it (docs/streaming.md,
"Window joins of two sources"). The files of each source are in event-time
order, so no row is late in batch or on the stream.
"""

from __future__ import annotations

import datetime as dt
import json
import os

import pytest

import wql
from tests.spark.stream_helpers import batch_queries, counted_rows
from wql.errors import WqlError, WqlErrors

pytestmark = pytest.mark.spark

T0 = dt.datetime(2024, 1, 1)

SOURCES = """
CREATE SOURCE clicks (user_id STRING, ts TIMESTAMP,
    WATERMARK FOR ts AS ts - INTERVAL '1' SECOND)
WITH (format = 'json', path = '{clicks}'{options});
CREATE SOURCE imps (user_id STRING, ts TIMESTAMP,
    WATERMARK FOR ts AS ts - INTERVAL '3' SECOND)
WITH (format = 'json', path = '{imps}'{options});
"""

QUERIES = """
CREATE VIEW per_user AS
SELECT user_id, window_start, window_end, COUNT(*) AS n
FROM clicks
GROUP BY user_id, TUMBLE(ts, INTERVAL '10' SECOND);

CREATE VIEW tables AS
SELECT c.user_id, c.ts AS clicked, i.ts AS shown
FROM TABLE(TUMBLE(TABLE clicks, DESCRIPTOR(ts), INTERVAL '10' SECOND)) AS c
LEFT JOIN TABLE(TUMBLE(TABLE imps, DESCRIPTOR(ts), INTERVAL '10' SECOND)) AS i
    ON c.window_start = i.window_start AND c.window_end = i.window_end
   AND c.user_id = i.user_id;

CREATE VIEW bounds_only AS
SELECT c.user_id AS clicker, i.user_id AS shown_to
FROM TABLE(TUMBLE(TABLE clicks, DESCRIPTOR(ts), INTERVAL '10' SECOND)) AS c
JOIN TABLE(TUMBLE(TABLE imps, DESCRIPTOR(ts), INTERVAL '10' SECOND)) AS i
    ON c.window_start = i.window_start AND c.window_end = i.window_end;

CREATE VIEW with_view AS
SELECT i.user_id, i.ts AS shown, v.n
FROM TABLE(TUMBLE(TABLE imps, DESCRIPTOR(ts), INTERVAL '10' SECOND)) AS i
FULL JOIN per_user AS v
    ON i.window_start = v.window_start AND i.window_end = v.window_end
   AND i.user_id = v.user_id;
"""

# (seconds, user) per file, each source's files in event-time order
CLICK_FILES = [[(1, "a"), (3, "b")], [(6, "a"), (12, "a")], [(15, "b"), (27, "a")], [(41, "b")]]
IMP_FILES = [[(0, "a")], [(2, "b"), (8, "a")], [(13, "b"), (14, "a"), (22, "a")], [(40, "b")]]


def write(folder, files):
    """Each file's rows, ``(seconds, user[, seq])``, as JSON lines; the files in order."""
    folder.mkdir(parents=True)
    for i, rows in enumerate(files):
        path = folder / f"f{i:03d}.json"
        lines = []
        for row in rows:
            record = {"user_id": row[1], "ts": (T0 + dt.timedelta(seconds=row[0])).isoformat()}
            if len(row) > 2:
                record["seq"] = row[2]
            lines.append(json.dumps(record) + "\n")
        path.write_text("".join(lines))
        os.utime(path, (1_000_000 + i, 1_000_000 + i))


def text(tmp_path, stream: bool) -> str:
    options = ", maxFilesPerTrigger = '1'" if stream else ""
    return SOURCES.format(clicks=tmp_path / "c", imps=tmp_path / "i", options=options) + QUERIES


def test_a_drained_stream_join_of_two_sources_equals_the_batch_join(spark, tmp_path):
    from wql.spark.sources import read_stream_source
    from wql.spark.stream_sinks import read_output, start_streams

    write(tmp_path / "c", CLICK_FILES)
    write(tmp_path / "i", IMP_FILES)
    # keyed joins (partitioned by user_id) and one on the window bounds only (one group)
    names = ["tables", "with_view", "bounds_only"]
    compiled = wql.compile(text(tmp_path, stream=True))
    streams = {
        name: read_stream_source(spark, compiled.program.source(name), None)
        for name in ("clicks", "imps")
    }
    results = compiled.only(*names).apply(spark, **streams)
    for name in names:
        assert results.query(name).engine == "operator"
        assert "two sources" in " ".join(r.message for r in results.query(name).plan.engine.reasons)
    out, ck = tmp_path / "out", tmp_path / "ck"
    sinks = start_streams(results, out, ck, fmt="parquet", drain=True)
    streamed = {name: counted_rows(read_output(spark, out / name)) for name in names}
    counters = sinks.counters(spark)
    expected, batch_counters = batch_queries(spark, text(tmp_path, stream=False), names)
    # hand-derived: [0, 10) a: clicks 1, 6 x imps 0, 8; b: click 3 x imp 2;
    # [10, 20) a: click 12 x imp 14, b: click 15 x imp 13; [20, 30) a: click 27 x imp 22;
    # [40, 50) b: click 41 x imp 40 -- every click matched: 4 + 1 + 2 + 1 + 1 = 9 rows
    assert sum(expected["tables"].values()) == 9
    assert expected["tables"][("a", "2024-01-01 00:00:06", "2024-01-01 00:00:08")] == 1
    for name in names:
        assert streamed[name] == expected[name], name
        for key in ("rows_in", "rows_fired", "dropped"):
            assert counters[name][key] == batch_counters[name][key], (name, key)
    assert counters["tables"]["rows_in"] == 14  # 7 clicks and 7 impressions


def test_a_stream_join_of_two_sources_refuses_idle_after(tmp_path):
    idle = text(tmp_path, stream=True).replace(
        "INTERVAL '3' SECOND)", "INTERVAL '3' SECOND IDLE AFTER INTERVAL '1' MINUTE)"
    )
    with pytest.raises(WqlErrors) as e:
        wql.compile(idle, streaming=True)
    # every join of the two sources (window tables, on the bounds only, a view's), each
    # at IDLE AFTER
    assert len(e.value.errors) == 3
    for error in e.value.errors:
        assert "declares IDLE AFTER" in error.message and error.line == 6


@pytest.mark.slow
def test_nexmark_q8_over_two_sources_streams_to_its_expected_rows(spark, tmp_path):
    # `wql run --stream --drain` streams both declared sources (each a folder of one
    # file: one micro-batch each, then the end) to the expected rows of the batch run
    from tests.spark.examples_helpers import EXAMPLES, expected_outputs, rows_as_text
    from tests.spark.stream_helpers import stream_cli_argv
    from wql.cli import main as cli_main
    from wql.spark.stream_sinks import read_output

    stem = "nexmark_q8_two_sources"
    text = (EXAMPLES / "nexmark" / f"{stem}.wql").read_text()
    for name in ("persons", "auctions"):
        folder = tmp_path / name
        folder.mkdir()
        data = EXAMPLES / "data" / f"nexmark_{name}.csv"
        (folder / f"{name}.csv").write_text(data.read_text())
        text = text.replace(f"'../data/nexmark_{name}.csv'", f"'{name}'")
    query = tmp_path / f"{stem}.wql"
    query.write_text(text)
    out, ck = tmp_path / "out", tmp_path / "ck"
    assert cli_main(stream_cli_argv(spark, query, out, ck, "--drain", "--format", "parquet")) == 0
    for name, (header, want) in expected_outputs(stem).items():
        got_header, got = rows_as_text(read_output(spark, out / name))
        assert (got_header, got) == (header, want), name


def test_a_session_whose_watermark_policy_is_not_min_is_refused(spark, tmp_path):
    from wql.spark.sources import read_stream_source

    write(tmp_path / "c", CLICK_FILES[:1])
    write(tmp_path / "i", IMP_FILES[:1])
    compiled = wql.compile(text(tmp_path, stream=True)).only("tables")
    streams = {
        name: read_stream_source(spark, compiled.program.source(name), None)
        for name in ("clicks", "imps")
    }
    spark.conf.set("spark.sql.streaming.multipleWatermarkPolicy", "max")
    try:
        with pytest.raises(WqlError) as e:
            compiled.apply(spark, **streams)
    finally:
        spark.conf.unset("spark.sql.streaming.multipleWatermarkPolicy")
    assert "multipleWatermarkPolicy is 'max'" in e.value.message


LATE_SOURCES = """
CREATE SOURCE clicks (user_id STRING, ts TIMESTAMP, seq BIGINT,
    WATERMARK FOR ts AS ts - INTERVAL '1' SECOND)
WITH (format = 'json', path = '{clicks}', arrival_order = 'seq'{options});
CREATE SOURCE imps (user_id STRING, ts TIMESTAMP, seq BIGINT,
    WATERMARK FOR ts AS ts - INTERVAL '3' SECOND)
WITH (format = 'json', path = '{imps}', arrival_order = 'seq'{options});
CREATE VIEW seen AS
SELECT c.user_id, c.ts AS clicked, i.ts AS shown
FROM TABLE(TUMBLE(TABLE clicks, DESCRIPTOR(ts), INTERVAL '10' SECOND)) AS c
JOIN TABLE(TUMBLE(TABLE imps, DESCRIPTOR(ts), INTERVAL '10' SECOND)) AS i
    ON c.window_start = i.window_start AND c.window_end = i.window_end
   AND c.user_id = i.user_id;
"""

# (seconds, user, seq) per micro-batch: clicks file i and impressions file i; ``seq``
# (the shared arrival order) puts batch replay's rows in the micro-batches' order.
# After micro-batch 1 the join's watermark is min(14 - 1, 13 - 3) s - 1 ms: [0, 10) has
# fired, so micro-batch 2's first click (5 s) and its impression at 7 s are late, on
# the stream and in batch replay alike (each is the first row of its source there, and
# the click at 18 s before the impression does not move the minimum)
LATE_CLICKS = [[(1, "a", 0), (3, "b", 1)], [(6, "a", 4), (14, "a", 5)], [(5, "b", 8), (18, "a", 9)]]
LATE_IMPS = [[(0, "a", 2), (2, "b", 3)], [(8, "a", 6), (13, "b", 7)], [(7, "a", 10), (16, "b", 11)]]


def test_late_rows_of_a_stream_join_of_two_sources_are_counted_per_source(spark, tmp_path):
    """Each source's late rows are counted under its side's name (counters ``sides``), as
    Flink's window join counts them per input, on a drained stream as in batch."""
    from wql.spark.sources import read_stream_source
    from wql.spark.stream_sinks import read_output, start_streams

    write(tmp_path / "c", LATE_CLICKS)
    write(tmp_path / "i", LATE_IMPS)

    def late_text(stream: bool) -> str:
        options = ", maxFilesPerTrigger = '1'" if stream else ""
        return LATE_SOURCES.format(clicks=tmp_path / "c", imps=tmp_path / "i", options=options)

    compiled = wql.compile(late_text(stream=True))
    streams = {
        name: read_stream_source(spark, compiled.program.source(name), None)
        for name in ("clicks", "imps")
    }
    results = compiled.only("seen").apply(spark, **streams)
    out, ck = tmp_path / "out", tmp_path / "ck"
    sinks = start_streams(results, out, ck, fmt="parquet", drain=True)
    streamed = counted_rows(read_output(spark, out / "seen"))
    counters = sinks.counters(spark)["seen"]
    expected, batch_counters = batch_queries(spark, late_text(stream=False), ["seen"])
    # hand-derived: [0, 10) a: click 1 x imps 0, 8 and click 6 x imps 0, 8 (imp 7 late);
    # b: click 3 x imp 2 (click 5 late); [10, 20) a: clicks 14, 18 x no imp of a;
    # b: no click x imps 13, 16 -- 5 rows
    assert sum(expected["seen"].values()) == 5
    assert streamed == expected["seen"]
    batch = batch_counters["seen"]
    assert batch["sides"]["c"]["dropped"] == batch["sides"]["i"]["dropped"] == {"late": 1}
    assert counters["dropped"] == batch["dropped"] == {"late": 2}
    assert counters["sides"] == {
        name: {"dropped": s["dropped"]} for name, s in batch["sides"].items()
    }
    assert counters["rows_in"] == batch["rows_in"] == 12
