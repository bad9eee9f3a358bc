"""Dynamic session gaps written with interval arithmetic, on both engines.

Every form below is a gap of ``g`` seconds; the sessions are derived by
hand. Typing ``g * INTERVAL '1' SECOND`` as an integer used to read the
product as milliseconds (Spark casts a second-interval to whole seconds),
so every row ended up in a session of its own.
"""

from __future__ import annotations

import pytest

import wql
from tests.spark.native_helpers import at

pytestmark = pytest.mark.spark

FORMS = [
    "g * INTERVAL '1' SECOND",
    "INTERVAL '1' SECOND * g",
    "(g * INTERVAL '2' SECOND) / 2",
    "INTERVAL '2' SECOND * g / 2",
    "g * INTERVAL '500' MILLISECOND + g * INTERVAL '0.5' SECOND",
    "g * INTERVAL '3' SECOND - INTERVAL '2' SECOND * g",
    "-(INTERVAL '-1' SECOND * g)",
    "CASE WHEN g > 0 THEN g * INTERVAL '1' SECOND ELSE INTERVAL '1' DAY END",
    "CASE WHEN g <= 0 THEN NULL ELSE INTERVAL '1' SECOND * g END",
    "IF(g > 0, g * INTERVAL '1' SECOND, INTERVAL '1' DAY)",
    "coalesce(CAST(g AS BIGINT) * INTERVAL '1' SECOND, INTERVAL '1' DAY)",
    "make_dt_interval(0, 0, 0, g)",
    "CAST(concat(CAST(g AS STRING), ' seconds') AS INTERVAL)",
]

# key, g (seconds), event time (ms)
ROWS = [
    ("a", 10, 0),
    ("a", 10, 5_000),
    ("a", 10, 30_000),
    ("b", 2, 0),
    ("b", 2, 1_500),
    ("b", 2, 4_000),
]

# a: [0, 10 000) and [5 000, 15 000) overlap -> [0, 15 000) with 2 rows;
#    30 000 is after 15 000 -> [30 000, 40 000) alone.
# b: [0, 2 000) and [1 500, 3 500) overlap -> [0, 3 500) with 2 rows;
#    4 000 > 3 500 -> [4 000, 6 000) alone.
EXPECTED = [
    ("a", 0, 15_000, 2),
    ("a", 30_000, 40_000, 1),
    ("b", 0, 3_500, 2),
    ("b", 4_000, 6_000, 1),
]


@pytest.fixture(scope="module")
def events(spark):
    return spark.createDataFrame(
        [(k, g, at(t)) for k, g, t in ROWS], "k STRING, g INT, ts TIMESTAMP"
    )


def _sessions(df) -> list[tuple]:
    from pyspark.sql import functions as F

    out = df.select("k", F.unix_millis("window_start"), F.unix_millis("window_end"), "n").collect()
    return sorted(tuple(r) for r in out)


@pytest.mark.parametrize("engine", ["native", "operator"])
@pytest.mark.parametrize("gap", FORMS)
def test_interval_gap_forms_give_the_hand_derived_sessions(spark, events, engine, gap):
    text = (
        "CREATE SOURCE s (k STRING, g INT, ts TIMESTAMP, "
        "WATERMARK FOR ts AS ts - INTERVAL '1' SECOND);\n"
        "SELECT k, window_start, window_end, COUNT(*) AS n FROM s "
        f"GROUP BY k, SESSION(ts, GAP {gap})"
    )
    results = wql.compile(text, engine).apply(spark, s=events)
    try:
        assert results.queries[0].engine == engine
        assert _sessions(results.df) == EXPECTED
    finally:
        results.release()
