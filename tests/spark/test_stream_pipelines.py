"""Pipelines on streams: the whole chain in one stateful processor, against batch replay.

Every stream reads a folder of JSON files with ``maxFilesPerTrigger = 1``
(one file = one micro-batch). The stream equals batch replay when every row
sees the same watermark in both (docs/streaming.md, "The streaming
watermark"): the rows come in *bursts*, every row of a burst at the same
event time and of its own key, and a file holds the rest of one burst and
the first row of the next (the only row that raises the maximum event time);
so the watermark rises at the same places in both, before the same rows, and
a pipeline's stages see every rise in Flink's order in both
(docs/architecture.md, "Contract: pipelines"). ``--drain`` plays batch
replay's end of input.
"""

from __future__ import annotations

import datetime as dt
import json
import os
from collections import Counter
from pathlib import Path

import pytest

import wql
from wql.errors import WqlUnsupportedError
from wql.spark.stream_sinks import read_output, start_streams

pytestmark = pytest.mark.spark

BASE = dt.datetime(2024, 1, 1)

# bursts: (seconds, [(auction, price), ...]); one row per auction per burst
BURSTS = [
    (0, [("a", 5), ("b", 7), ("c", 1)]),
    (4, [("b", 3), ("a", 9)]),
    (8, [("c", 4), ("a", 2), ("b", 8)]),
    (13, [("a", 6), ("c", 5)]),
    (17, [("b", 2), ("a", 1), ("c", 9)]),
    (26, [("c", 3), ("b", 4)]),
    (31, [("a", 7), ("b", 6), ("c", 2)]),
    (44, [("b", 5), ("a", 3)]),
]

SOURCE = """
CREATE SOURCE bids (auction STRING, price BIGINT, ts TIMESTAMP,
    WATERMARK FOR ts AS ts - INTERVAL '2' SECOND)
WITH (format = 'json', path = '{path}'{options});
"""

PER_AUCTION = """
CREATE VIEW per_auction AS
SELECT auction, window_start, window_end, window_time, COUNT(*) AS num, MAX(price) AS top
FROM bids GROUP BY auction, TUMBLE(ts, INTERVAL '10' SECOND);
"""

PIPELINES = {
    # a rollup of the 10 s windows into 20 s ones (keyless)
    "rollup": PER_AUCTION
    + """
CREATE VIEW rollup AS
SELECT window_start, window_end, SUM(num) AS bids, MAX(top) AS top, COUNT(*) AS auctions
FROM per_auction GROUP BY TUMBLE(window_time, INTERVAL '20' SECOND);
""",
    # the view's rows in pairs, in the order they fire: the rise order is visible
    "pairs": PER_AUCTION
    + """
CREATE VIEW pairs AS
SELECT COLLECT_LIST(auction) AS auctions, SUM(num) AS bids
FROM per_auction GROUP BY COUNT_WINDOW(2);
""",
    # Nexmark q5's shape: the hottest auction of every window (a window rank, last)
    "hot": PER_AUCTION
    + """
CREATE VIEW hot AS
SELECT auction, num, window_start, window_end
FROM (SELECT *, ROW_NUMBER() OVER (PARTITION BY window_start, window_end
      ORDER BY num DESC, auction) AS rn FROM per_auction)
WHERE rn <= 1;
""",
}


def files() -> list[list[dict]]:
    """The bursts cut into files: the rest of one burst and the first row of the next."""
    rows = [
        [{"auction": k, "price": p, "ts": (BASE + dt.timedelta(seconds=s)).isoformat()}
         for k, p in burst]
        for s, burst in BURSTS
    ]
    out = [rows[0][:1]]
    for i, burst in enumerate(rows):
        out[-1] += burst[1:]
        if i + 1 < len(rows):
            out[-1].append(rows[i + 1][0])
            out.append([])
    return [f for f in out if f]


def write_files(folder: Path, indices) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    all_files = files()
    for i in indices:
        tmp = folder / f".f{i:03d}.tmp"
        tmp.write_text("".join(json.dumps(r) + "\n" for r in all_files[i]))
        final = folder / f"f{i:03d}.json"
        tmp.rename(final)
        # the file source orders new files by modification time
        os.utime(final, (1_000_000 + i, 1_000_000 + i))


def text(name: str, folder: Path, stream: bool = True) -> str:
    options = ", maxFilesPerTrigger = '1'" if stream else ""
    return SOURCE.format(path=folder, options=options) + PIPELINES[name]


def rows(df) -> Counter:
    return Counter(tuple(str(v) for v in r) for r in df.collect())


def stream(spark, name: str, folder: Path, out: Path, ck: Path, drain: bool = True):
    from wql.spark.sources import read_stream_source

    compiled = wql.compile(text(name, folder))
    source = read_stream_source(spark, compiled.program.source("bids"), None)
    results = compiled.apply(spark, bids=source).only(name) if False else None
    results = compiled.only(name).apply(spark, bids=source)
    start_streams(results, out, ck, fmt="parquet", drain=drain)
    return rows(read_output(spark, out / name))


def batch(spark, name: str, folder: Path) -> Counter:
    results = wql.compile(text(name, folder, stream=False)).apply(spark)
    try:
        return rows(results[name])
    finally:
        results.release()


@pytest.mark.parametrize("name", sorted(PIPELINES))
def test_a_drained_stream_pipeline_equals_the_batch_pipeline(spark, tmp_path, name):
    write_files(tmp_path / "in", range(len(files())))
    streamed = stream(spark, name, tmp_path / "in", tmp_path / "out", tmp_path / "ck")
    expected = batch(spark, name, tmp_path / "in")
    assert sum(expected.values()) >= 3
    assert streamed == expected
