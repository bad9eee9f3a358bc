"""Queries written as Flink SQL window table functions run on both engines (hand-derived rows)."""

from __future__ import annotations

import datetime as dt

import pytest

import wql

pytestmark = pytest.mark.spark

T0 = dt.datetime(2024, 5, 1, 12, 0, 0)

TEXT = """
CREATE SOURCE bids (auction BIGINT, bidder BIGINT, ts TIMESTAMP,
    WATERMARK FOR ts AS ts - INTERVAL '4' SECOND);
CREATE VIEW per_auction AS
SELECT auction, window_start, COUNT(*) AS n
FROM TABLE(TUMBLE(TABLE bids, DESCRIPTOR(ts), INTERVAL '10' SECOND))
GROUP BY window_start, window_end, auction;
CREATE VIEW sessions AS
SELECT bidder, window_start, window_end, COUNT(*) AS n
FROM TABLE(SESSION(TABLE bids PARTITION BY bidder, DESCRIPTOR(ts), INTERVAL '5' SECOND))
GROUP BY window_start, window_end, bidder;
"""


def _at(seconds: int) -> dt.datetime:
    return T0 + dt.timedelta(seconds=seconds)


@pytest.mark.parametrize("engine", ["native", "operator"])
def test_tvf_queries_on_both_engines(spark, engine):
    rows = [(1, 7, _at(1)), (1, 7, _at(3)), (2, 8, _at(4)), (1, 7, _at(12)), (2, 7, _at(30))]
    df = spark.createDataFrame(rows, "auction bigint, bidder bigint, ts timestamp")
    results = wql.compile(TEXT, engine).apply(spark, bids=df)
    assert {q.engine for q in results.queries} == {engine}
    per_auction = sorted(tuple(r) for r in results["per_auction"].collect())
    # [0 s, 10 s): auction 1 x2, auction 2 x1; [10 s, 20 s): auction 1; [30 s, 40 s): auction 2
    assert per_auction == [(1, _at(0), 2), (1, _at(10), 1), (2, _at(0), 1), (2, _at(30), 1)]
    sessions = sorted(tuple(r) for r in results["sessions"].collect())
    # bidder 7: 1 s, 3 s -> [1, 8); 12 s -> [12, 17); 30 s -> [30, 35). bidder 8: [4, 9)
    assert sessions == [
        (7, _at(1), _at(8), 2),
        (7, _at(12), _at(17), 1),
        (7, _at(30), _at(35), 1),
        (8, _at(4), _at(9), 1),
    ]
    results.release()
