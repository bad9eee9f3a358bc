"""Native and operator engines give the same rows and types on data built to tell them apart.

The data has what separates Spark from Flink: sub-millisecond and negative
timestamps, NULL values, ties in event time, doubles whose sum depends on
the order of addition (1e16 and 0.1), decimals, and an offset window. The
conformance suite compares more queries; this test guards the native
backend's own choices (ms flooring, ordered double sums, casts).
"""

from __future__ import annotations

import datetime as dt
import random

import pytest

import wql

pytestmark = pytest.mark.spark

TEXT = """
CREATE SOURCE s (k STRING, ts TIMESTAMP, v INT, d DOUBLE, dec DECIMAL(12,3),
                 WATERMARK FOR ts AS ts - INTERVAL '2' SECOND);
CREATE VIEW hop AS
SELECT k, window_start, window_end, window_time, pane_index, pane_timing,
       COUNT(*) c, COUNT(v) cv, SUM(v) sv, AVG(v) av, MIN(d) mn, MAX(d) mx,
       SUM(d) sd, AVG(d) ad, COUNT(DISTINCT v) dv, SUM(dec) sdec, AVG(dec) adec
FROM s WHERE v IS NULL OR v > -3
GROUP BY k, HOP(ts, INTERVAL '1' SECOND, INTERVAL '3' SECOND, INTERVAL '250' MILLISECOND);
CREATE VIEW sess AS
SELECT k, window_start, window_end, COUNT(*) c, SUM(d) sd, AVG(dec) adec
FROM s GROUP BY k, SESSION(ts, INTERVAL '700' MILLISECOND) HAVING COUNT(*) > 1;
CREATE VIEW cum AS
SELECT window_start, window_end, SUM(d) sd, AVG(v) av, COUNT(*) c
FROM s GROUP BY CUMULATE(ts, INTERVAL '2' SECOND, INTERVAL '6' SECOND);
CREATE VIEW tum AS
SELECT upper(k) kk, window_start, SUM(v) * 2 s2
FROM s GROUP BY upper(k), TUMBLE(ts, INTERVAL '3' SECOND, INTERVAL '-1' SECOND);
"""

EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)


def _rows(seed: int, n: int):
    rng = random.Random(seed)
    out = []
    for _ in range(n):
        ts = EPOCH + dt.timedelta(
            milliseconds=rng.randint(-5000, 20000), microseconds=rng.randint(0, 999)
        )
        d = rng.choice([None, 0.1, 0.2, 1e16, -1e16, 0.3])
        out.append((rng.choice("abc"), ts, rng.choice([None, 1, 2, 5, -3]), d))
    return out


def _normalised(df):
    from pyspark.sql import functions as F
    from pyspark.sql import types as T

    cols = [
        F.unix_micros(F.col(f"`{f.name}`")).alias(f.name)
        if isinstance(f.dataType, T.TimestampType)
        else F.col(f"`{f.name}`")
        for f in df.schema.fields
    ]
    return sorted((tuple(r) for r in df.select(*cols).collect()), key=repr)


def test_native_equals_operator(spark):
    df = spark.createDataFrame(_rows(7, 160), "k STRING, ts TIMESTAMP, v INT, d DOUBLE")
    df = df.selectExpr("*", "CAST(CASE WHEN abs(d) < 1e6 THEN d END AS DECIMAL(12,3)) AS dec")
    auto = wql.compile(TEXT)
    assert set(auto.engine.values()) == {"native"}
    native = auto.apply(spark, s=df)
    operator = wql.compile(TEXT, "operator").apply(spark, s=df)
    for name in auto.queries:
        assert [f.dataType for f in native[name].schema.fields] == [
            f.dataType for f in operator[name].schema.fields
        ], name
        rows = _normalised(native[name])
        assert rows, f"{name}: no rows, the data does not exercise it"
        assert rows == _normalised(operator[name]), name
