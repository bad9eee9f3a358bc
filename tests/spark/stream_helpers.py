"""Helpers for the streaming tests: ``wql run --stream`` on the test session's settings, and
the burst files of the stream pipeline and join tests."""

from __future__ import annotations

import datetime as dt
import json
import os
from collections import Counter
from pathlib import Path
from typing import Any


def stream_cli_argv(spark, query: Path, out: Path, ck: Path, *flags: str) -> list[str]:
    """The arguments of ``wql run QUERY --stream [FLAGS] --checkpoint CK --output OUT``.

    On ``local[2]`` with the test session's shuffle partitions, so the CLI's
    session (the same JVM) plans as the tests' does.
    """
    partitions = spark.conf.get("spark.sql.shuffle.partitions")
    argv = ["run", str(query), "--stream", *flags, "--checkpoint", str(ck)]
    argv += ["--output", str(out), "--master", "local[2]"]
    return [*argv, "--conf", f"spark.sql.shuffle.partitions={partitions}"]


BASE = dt.datetime(2024, 1, 1)

#: The bursts' source: ``path`` the folder, ``options`` more WITH options (a leading comma).
SOURCE = """
CREATE SOURCE bids (auction STRING, price BIGINT, ts TIMESTAMP,
    WATERMARK FOR ts AS ts - INTERVAL '2' SECOND)
WITH (format = 'json', path = '{path}'{options});
"""

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


def files(bursts: list = BURSTS) -> list[list[dict]]:
    """The bursts cut into files: the rest of one burst and the first row of the next."""
    rows = [
        [
            {"auction": k, "price": p, "ts": (BASE + dt.timedelta(seconds=s)).isoformat()}
            for k, p in burst
        ]
        for s, burst in bursts
    ]
    out = [rows[0][:1]]
    for i, burst in enumerate(rows):
        out[-1] += burst[1:]
        if i + 1 < len(rows):
            out[-1].append(rows[i + 1][0])
            out.append([])
    return [f for f in out if f]


def write_files(folder: Path, indices, bursts: list = BURSTS) -> None:
    """Files ``indices`` of :func:`files`, in that order (one micro-batch each)."""
    folder.mkdir(parents=True, exist_ok=True)
    all_files = files(bursts)
    for i in indices:
        tmp = folder / f".f{i:03d}.tmp"
        tmp.write_text("".join(json.dumps(r) + "\n" for r in all_files[i]))
        final = folder / f"f{i:03d}.json"
        tmp.rename(final)
        # the file source orders new files by modification time
        os.utime(final, (1_000_000 + i, 1_000_000 + i))


def counted_rows(df) -> Counter:
    """A DataFrame's rows as text tuples, counted."""
    return Counter(tuple(str(v) for v in r) for r in df.collect())


def stream_query(
    spark, text: str, name: str, out: Path, ck: Path, drain: bool = True
) -> tuple[Counter, Any]:
    """Query ``name`` of ``text`` (its source ``bids`` read as a stream) on the operator
    engine through :func:`start_streams`: its output rows and the sinks."""
    rows, sinks = stream_queries(spark, text, [name], out, ck, drain)
    return rows[name], sinks


def stream_queries(
    spark, text: str, names: list[str], out: Path, ck: Path, drain: bool = True
) -> tuple[dict[str, Counter], Any]:
    """Queries ``names`` of ``text`` streamed together (one :func:`start_streams`, one
    stream of ``bids``), each on the operator engine: their output rows and the sinks."""
    import wql
    from wql.spark.sources import read_stream_source
    from wql.spark.stream_sinks import read_output, start_streams

    compiled = wql.compile(text)
    source = read_stream_source(spark, compiled.program.source("bids"), None)
    results = compiled.only(*names).apply(spark, bids=source)
    for name in names:
        assert results.query(name).engine == "operator", name
    sinks = start_streams(results, out, ck, fmt="parquet", drain=drain)
    return {name: counted_rows(read_output(spark, out / name)) for name in names}, sinks


def batch_query(spark, text: str, name: str) -> tuple[Counter, dict]:
    """Query ``name`` of ``text`` in batch: its rows and counters."""
    rows, counters = batch_queries(spark, text, [name])
    return rows[name], counters[name]


def batch_queries(
    spark, text: str, names: list[str] | None = None
) -> tuple[dict[str, Counter], dict[str, dict]]:
    """Queries ``names`` of ``text`` (every query when None) in batch: rows and counters."""
    import wql

    results = wql.compile(text).apply(spark)
    try:
        names = [r.name for r in results.queries] if names is None else names
        rows = {name: counted_rows(results[name]) for name in names}
        return rows, {name: results.query(name).counters for name in names}
    finally:
        results.release()


# The stream pipelines' views over the bids (tests/spark/test_stream_pipelines.py,
# tests/spark/test_stream_processors.py)
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
    # EARLY panes (fired by rows) and ON_TIME panes (fired by rises), in firing order
    "early": """
CREATE VIEW panes AS
SELECT auction, window_time, pane_timing, COUNT(*) AS num
FROM bids GROUP BY auction, TUMBLE(ts, INTERVAL '10' SECOND)
TRIGGER WATERMARK WITH EARLY COUNT(2);
CREATE VIEW early AS
SELECT window_start, COLLECT_LIST(pane_timing) AS timings, SUM(num) AS counted, COUNT(*) AS panes
FROM panes GROUP BY TUMBLE(window_time, INTERVAL '10' SECOND)
LATE DATA TO late_panes;
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
