"""A value that does not parse in a CSV or JSON source (Spark's PERMISSIVE mode) keeps its
row with the value NULL and is counted as ``malformed`` (docs/running.md, the counters)."""

from __future__ import annotations

import wql
from wql.cli import main

TEXT = """
CREATE SOURCE readings (k STRING, v BIGINT, ts TIMESTAMP,
    WATERMARK FOR ts AS ts - INTERVAL '1' SECOND)
WITH (format = '{fmt}', path = '{path}', header = 'true');
SELECT k, window_start, COUNT(*) AS n, COUNT(v) AS with_v FROM readings
GROUP BY k, TUMBLE(ts, INTERVAL '10' SECOND);
"""

CSV = """k,v,ts
a,1,2024-01-01 00:00:01
a,lots,2024-01-01 00:00:02
b,3,2024-01-01 00:00:03
b,4,not a time
"""

JSON = """{"k": "a", "v": 1, "ts": "2024-01-01 00:00:01"}
{"k": "a", "v": "lots", "ts": "2024-01-01 00:00:02"}
{"k": "b", "v": 3, "ts": "2024-01-01 00:00:03"}
"""


def test_malformed_csv_values_are_kept_as_null_and_counted(spark, tmp_path, capsys):
    data = tmp_path / "readings.csv"
    data.write_text(CSV)
    results = wql.compile(TEXT.format(fmt="csv", path=data)).apply(spark)
    try:
        rows = sorted((r["k"], r["n"], r["with_v"]) for r in results.df.collect())
        # 'lots' is a NULL v in a kept row; 'not a time' a NULL time: kept by the
        # reader, dropped by the replay (null event time), malformed all the same
        assert rows == [("a", 2, 1), ("b", 1, 1)]
        c = results.counters
        assert (c["rows_in"], c["malformed"], c["dropped"]) == (4, 2, {"null event time": 1})
    finally:
        results.release()
    path = tmp_path / "readings.wql"
    path.write_text(TEXT.format(fmt="csv", path=data))
    assert main(["run", str(path), "--show", "0"]) == 0
    assert "| malformed 2 |" in capsys.readouterr().err


def test_malformed_json_values_are_counted_and_clean_files_count_none(spark, tmp_path):
    data = tmp_path / "readings.json"
    data.write_text(JSON)
    results = wql.compile(TEXT.format(fmt="json", path=data)).apply(spark)
    try:
        assert results.counters["malformed"] == 1
        assert sorted(r["n"] for r in results.df.collect()) == [1, 2]
    finally:
        results.release()
    clean = tmp_path / "clean.csv"
    clean.write_text("k,v,ts\na,1,2024-01-01 00:00:01\n")
    results = wql.compile(TEXT.format(fmt="csv", path=clean)).apply(spark)
    try:
        assert results.counters["malformed"] == 0
    finally:
        results.release()


def test_small_and_large_sources_count_malformed_rows_alike(spark, tmp_path, monkeypatch):
    """A small source's count collects the malformed rows' hashes, a large one's
    aggregates: the same rows either way (a bad value in a column no query reads too)."""
    import wql.spark.batch as batch
    from wql.compiler import compile_source
    from wql.spark.sources import malformed_rows

    data = tmp_path / "readings.csv"
    data.write_text(CSV + "c,5,2024-01-01 00:00:04,extra\nc,x,y\n")
    decl = compile_source(TEXT.format(fmt="csv", path=data)).sources[0]
    small = malformed_rows(spark, decl, None)
    monkeypatch.setattr(batch, "SMALL_INPUT_BYTES", -1)
    assert small >= 2  # 'lots', 'not a time' and the rows of the wrong width
    assert malformed_rows(spark, decl, None) == small
