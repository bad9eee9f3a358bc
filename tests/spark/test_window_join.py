"""Window joins on Spark, against hand-derived rows, on both engines.

Flink SQL's window join: two windowed relations of the same windows joined
on the window bounds and keys, each window joined once when the watermark
passes its end, rows of a window that has joined already dropped as late
and counted. The operator engine runs in three key partitions (forced), so
the views reach the join in the pipeline's global order.
"""

from __future__ import annotations

import pytest

import wql
from tests.spark.pipeline_helpers import BIDS, ROWS, bids, run
from wql.errors import WqlError

pytestmark = pytest.mark.spark


TUMBLE_BIDS = "TABLE(TUMBLE(TABLE bids, DESCRIPTOR(ts), INTERVAL '10' SECOND))"

HIGHEST = (
    BIDS
    + f"""
CREATE VIEW top AS
SELECT window_start, window_end, MAX(price) AS maxprice
FROM bids GROUP BY TUMBLE(ts, INTERVAL '10' SECOND);
CREATE VIEW highest AS
SELECT b.auction, b.price, b.bidder, b.window_start
FROM {TUMBLE_BIDS} AS b
JOIN top AS t
  ON b.window_start = t.window_start AND b.window_end = t.window_end AND b.price = t.maxprice;
"""
)


def test_the_highest_bid_joined_back_to_its_bids(spark, partitions):
    # [0, 10): prices 10, 20, 15, 5, 25 -> 25 (auction 2, a at 7 s);
    # [10, 20): 30, 40, 41 -> 41 (auction 3, c at 13 s)
    want = [
        ("2", "25", "a", "2024-01-01 00:00:00"),
        ("3", "41", "c", "2024-01-01 00:00:10"),
    ]
    native, native_counters, engines = run(spark, HIGHEST, bids=bids(spark, ROWS))
    operator, counters, _ = run(spark, HIGHEST, "operator", bids=bids(spark, ROWS))
    assert engines == {"top": "native", "highest": "native"}
    assert native["highest"] == want
    assert native == operator
    # the join reads 8 bids and the view's 2 rows; every one is in its window's join
    for c in (native_counters["highest"], counters["highest"]):
        assert (c["rows_in"], c["rows_fired"], c["dropped"]) == (10, 10, {})


BIG = (
    BIDS
    + """
CREATE VIEW counts AS
SELECT auction, window_start, window_end, COUNT(*) AS n
FROM bids GROUP BY auction, TUMBLE(ts, INTERVAL '10' SECOND);
CREATE VIEW big AS
SELECT auction, window_start, window_end, MAX(price) AS top
FROM bids WHERE price >= 25 GROUP BY auction, TUMBLE(ts, INTERVAL '10' SECOND);
SELECT c.auction, c.window_start, c.n, b.top
FROM counts c LEFT JOIN big b
  ON c.window_start = b.window_start AND c.window_end = b.window_end
 AND c.auction = b.auction;
"""
)


def test_a_left_join_keeps_the_rows_without_a_match(spark, partitions):
    # counts: [0, 10) 1: 2, 2: 2, 3: 1; [10, 20) 1: 1, 3: 2
    # big (price >= 25): [0, 10) 2: 25; [10, 20) 1: 30, 3: 41
    want = [
        ("1", "2024-01-01 00:00:00", "2", ""),
        ("1", "2024-01-01 00:00:10", "1", "30"),
        ("2", "2024-01-01 00:00:00", "2", "25"),
        ("3", "2024-01-01 00:00:00", "1", ""),
        ("3", "2024-01-01 00:00:10", "2", "41"),
    ]
    native, _, engines = run(spark, BIG, bids=bids(spark, ROWS))
    operator, _, _ = run(spark, BIG, "operator", bids=bids(spark, ROWS))
    assert engines["query_1"] == "native"
    assert native["query_1"] == want
    assert native == operator


LATE = (
    BIDS.replace(";\n", " WITH (arrival_order = 'seq');\n")
    + f"""
CREATE VIEW per_bidder AS
SELECT bidder, window_start, window_end, COUNT(*) AS n
FROM bids GROUP BY bidder, TUMBLE(ts, INTERVAL '10' SECOND);
SELECT b.bidder, b.price, p.n, b.window_start
FROM {TUMBLE_BIDS} b
JOIN per_bidder p
  ON b.window_start = p.window_start AND b.window_end = p.window_end AND b.bidder = p.bidder;
"""
)


def test_rows_of_a_joined_window_are_late_dropped_and_counted(spark, partitions):
    # arrival order (seq): the bid at 3 s comes after the one at 12 s moved the
    # watermark to 11 s: [0, 10) has joined, so the bid is late on both inputs
    # (the view drops it too: per_bidder counts a once in [0, 10))
    rows = [(1, 10, "a", 1), (2, 50, "b", 2), (1, 30, "b", 12), (9, 99, "a", 3)]
    out, counters, engines = run(spark, LATE, bids=bids(spark, rows))
    # the view is native (its late bid left out of [0, 10), docs/native.md "Arrival order")
    assert engines == {"per_bidder": "native", "query_1": "operator"}
    assert out["query_1"] == [
        ("a", "10", "1", "2024-01-01 00:00:00"),
        ("b", "30", "1", "2024-01-01 00:00:10"),
        ("b", "50", "1", "2024-01-01 00:00:00"),
    ]
    c = counters["query_1"]
    # 4 bids and the view's 3 rows; the late bid is dropped
    assert (c["rows_in"], c["rows_fired"], c["late_rows"], c["dropped"]) == (7, 6, 0, {"late": 1})
    with pytest.raises(WqlError) as e:
        wql.compile(LATE, "native")
    join = e.value  # the join alone: the view runs natively
    assert "query_1" in join.message
    assert (join.line, join.column) == (7, 25)  # the window table's source
    assert "Spark's join would still join" in join.message


def test_a_window_join_on_a_stream_runs_in_the_join_processor(spark, tmp_path):
    # the operator engine, both sides and the join in one processor; an outer join on
    # more than column equalities too (Spark's ON over each row and its partners)
    folder = tmp_path / "in"
    folder.mkdir()
    (folder / "a.csv").write_text("auction,price,bidder,ts,seq\n1,10,a,2024-01-01 00:00:01,0\n")
    df = spark.readStream.schema(
        "auction bigint, price bigint, bidder string, ts timestamp, seq bigint"
    ).csv(str(folder))
    join = f"""
SELECT l.bidder, l.price, r.price AS other
FROM {TUMBLE_BIDS} l JOIN {TUMBLE_BIDS} r
  ON l.window_start = r.window_start AND l.window_end = r.window_end AND l.bidder = r.bidder"""
    results = wql.compile(BIDS + join + ";").apply(spark, bids=df)
    q = results.queries[0]
    assert q.engine == "operator" and q.df.isStreaming
    assert any("join processor" in r.message for r in q.plan.engine.reasons)
    outer = join.replace(" JOIN ", " LEFT JOIN ") + " AND l.price < r.price;"
    q = wql.compile(BIDS + outer).apply(spark, bids=df).queries[0]
    assert q.engine == "operator" and q.df.isStreaming
    assert any("besides its equalities" in r.message for r in q.plan.engine.reasons)


def test_the_compiled_spark_sql_and_pyspark_script_join_the_same_rows(spark):
    import types

    from tests.spark.examples_helpers import rows_as_text
    from wql.compiler import compile_source
    from wql.compiler.backends.pyspark_script import render_script
    from wql.compiler.backends.spark_sql import spark_sql_script

    want, _, _ = run(spark, HIGHEST, bids=bids(spark, ROWS))
    program = compile_source(HIGHEST, "h.wql")
    df = bids(spark, ROWS)
    df.createOrReplaceTempView("bids")
    try:
        statements = [s for s in spark_sql_script(program).split(";\n") if "SELECT" in s]
        for stmt in statements[:-1]:  # the view's CREATE TEMPORARY VIEW
            spark.sql(stmt)
        assert rows_as_text(spark.sql(statements[-1]))[1] == want["highest"]
    finally:
        spark.catalog.dropTempView("bids")
        spark.catalog.dropTempView("top")
    module = types.ModuleType("wql_generated")
    exec(compile(render_script(program, HIGHEST, "h.wql"), "h.py", "exec"), module.__dict__)  # noqa: S102
    got = module.QUERIES["highest"](spark, {"bids": df})
    assert rows_as_text(got)[1] == want["highest"]
