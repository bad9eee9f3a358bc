"""What the pipeline, window rank and window join tests share: times and a run of a
file's queries on DataFrames (the ``partitions`` fixture is in conftest.py)."""

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
