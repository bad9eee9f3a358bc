"""What the pipeline, window rank and window join tests share: times, a run of a
file's queries on DataFrames, and the bids source with its rows (the ``partitions``
fixture is in conftest.py)."""

from __future__ import annotations

import datetime as dt

import wql
from tests.spark.examples_helpers import rows_as_text

T0 = dt.datetime(2024, 1, 1)


def at(seconds: float) -> dt.datetime:
    return T0 + dt.timedelta(seconds=seconds)


def run(spark, text: str, engine: str = "auto", **dataframes):
    """Every output of ``text`` as sorted text rows, with each query's counters and engine."""
    results = wql.compile(text, engine).apply(spark, **dataframes)
    try:
        out = {name: rows_as_text(results[name])[1] for name in results}
        counters = {r.name: r.counters for r in results.queries}
        engines = {r.name: r.engine for r in results.queries}
    finally:
        results.release()
    return out, counters, engines


#: The bids of the window rank and window join tests.
BIDS = (
    "CREATE SOURCE bids (auction BIGINT, price BIGINT, bidder STRING, ts TIMESTAMP, seq BIGINT, "
    "WATERMARK FOR ts AS ts - INTERVAL '1' SECOND);\n"
)


def bids(spark, rows):
    return spark.createDataFrame(
        [(a, p, b, at(t), i) for i, (a, p, b, t) in enumerate(rows)],
        "auction bigint, price bigint, bidder string, ts timestamp, seq bigint",
    )


# auction, price, bidder, seconds
ROWS = [
    (1, 10, "a", 1),
    (2, 20, "b", 2),
    (1, 15, "c", 3),
    (3, 5, "a", 4),
    (2, 25, "a", 7),
    (1, 30, "b", 12),
    (3, 40, "c", 13),
    (3, 41, "c", 13),
]
