"""Window Top-N and deduplication on Spark, against hand-derived rows, on both engines.

Flink SQL's window rank: per window (and key), the first N rows by the
ORDER BY when the watermark passes the window's end; equal rows in arrival
order; a deduplication keeps the first (ORDER BY time) or the last (DESC)
row, the last of equal times. The operator engine runs in three key
partitions (forced), so the view's rows reach the rank in the pipeline's
global order (docs/architecture.md, "Contract: pipelines").
"""

from __future__ import annotations

import pytest

import wql
from tests.spark.examples_helpers import text as as_text
from tests.spark.pipeline_helpers import BIDS, ROWS, at, bids, run
from wql.errors import WqlUnsupportedError

pytestmark = pytest.mark.spark

HOTTEST = (
    BIDS
    + """
CREATE VIEW counts AS
SELECT auction, window_start, window_end, COUNT(*) AS n
FROM bids GROUP BY auction, TUMBLE(ts, INTERVAL '10' SECOND);
CREATE VIEW hottest AS
SELECT * FROM (
    SELECT *, ROW_NUMBER() OVER (PARTITION BY window_start, window_end ORDER BY n DESC) AS rn
    FROM counts
) WHERE rn <= 2;
"""
)


def test_top_n_over_a_window_aggregate_on_both_engines(spark, partitions):
    # counts: [0, 10): auction 1 n=2, 2 n=2, 3 n=1; [10, 20): 1 n=1, 3 n=2.
    # [0, 10): 1 and 2 tie on n=2; the view's rows of a window fire together and
    # reach the rank in key order (auction 1 first): 1 is rank 1, 2 rank 2, 3 out.
    want = [
        ("1", "2024-01-01 00:00:00", "2024-01-01 00:00:10", "2", "1"),
        ("1", "2024-01-01 00:00:10", "2024-01-01 00:00:20", "1", "2"),
        ("2", "2024-01-01 00:00:00", "2024-01-01 00:00:10", "2", "2"),
        ("3", "2024-01-01 00:00:10", "2024-01-01 00:00:20", "2", "1"),
    ]
    native, native_counters, engines = run(spark, HOTTEST, bids=bids(spark, ROWS))
    operator, counters, _ = run(spark, HOTTEST, "operator", bids=bids(spark, ROWS))
    assert engines == {"counts": "native", "hottest": "native"}
    assert native["hottest"] == want
    assert native == operator
    for c in (native_counters["hottest"], counters["hottest"]):
        assert (c["rows_in"], c["rows_fired"], c["dropped"]) == (5, 4, {"outside the top N": 1})


def _ranked(function: str, view_keys: str = "auction, ") -> str:
    return HOTTEST.replace("ROW_NUMBER()", f"{function}()").replace(
        "SELECT auction, window_start", f"SELECT {view_keys}window_start"
    )


@pytest.mark.parametrize(
    ("function", "want", "dropped"),
    [
        # [0, 10): 1 and 2 tie on n=2, both rank 1; 3 (n=1) is rank 3 for RANK, out
        (
            "RANK",
            [
                ("1", "2024-01-01 00:00:00", "2024-01-01 00:00:10", "2", "1"),
                ("1", "2024-01-01 00:00:10", "2024-01-01 00:00:20", "1", "2"),
                ("2", "2024-01-01 00:00:00", "2024-01-01 00:00:10", "2", "1"),
                ("3", "2024-01-01 00:00:10", "2024-01-01 00:00:20", "2", "1"),
            ],
            {"outside the top N": 1},
        ),
        # ... and rank 2 for DENSE_RANK: every row kept
        (
            "DENSE_RANK",
            [
                ("1", "2024-01-01 00:00:00", "2024-01-01 00:00:10", "2", "1"),
                ("1", "2024-01-01 00:00:10", "2024-01-01 00:00:20", "1", "2"),
                ("2", "2024-01-01 00:00:00", "2024-01-01 00:00:10", "2", "1"),
                ("3", "2024-01-01 00:00:00", "2024-01-01 00:00:10", "1", "2"),
                ("3", "2024-01-01 00:00:10", "2024-01-01 00:00:20", "2", "1"),
            ],
            {},
        ),
    ],
)
def test_rank_and_dense_rank_keep_ties_on_both_engines(spark, partitions, function, want, dropped):
    text = _ranked(function)
    native, native_counters, engines = run(spark, text, bids=bids(spark, ROWS))
    operator, counters, _ = run(spark, text, "operator", bids=bids(spark, ROWS))
    assert engines == {"counts": "native", "hottest": "native"}
    assert native["hottest"] == want
    assert native == operator
    for c in (native_counters["hottest"], counters["hottest"]):
        assert (c["rows_in"], c["rows_fired"], c["dropped"]) == (5, len(want), dropped)


def test_rank_runs_natively_without_the_views_keys(spark):
    # equal rows share a rank, so the order they reach the rank in changes no row: unlike
    # ROW_NUMBER (test_forcing_native_on_a_rank_that_cannot_is_a_positioned_error)
    text = _ranked("RANK", view_keys="")
    native, _, engines = run(spark, text, bids=bids(spark, ROWS))
    operator, _, _ = run(spark, text, "operator", bids=bids(spark, ROWS))
    assert engines["hottest"] == "native"
    assert native == operator
    assert native["hottest"] == [
        ("2024-01-01 00:00:00", "2024-01-01 00:00:10", "2", "1"),
        ("2024-01-01 00:00:00", "2024-01-01 00:00:10", "2", "1"),
        ("2024-01-01 00:00:10", "2024-01-01 00:00:20", "1", "2"),
        ("2024-01-01 00:00:10", "2024-01-01 00:00:20", "2", "1"),
    ]


def test_rank_over_a_window_table_keeps_equal_times(spark, partitions):
    # the latest bid per 10 s window: [10, 20) has two at 13 s, both rank 1
    text = (
        BIDS
        + """
    SELECT auction, price, window_start FROM TABLE(TUMBLE(TABLE bids, DESCRIPTOR(ts),
        INTERVAL '10' SECOND))
    QUALIFY RANK() OVER (PARTITION BY window_start, window_end ORDER BY ts DESC) <= 1;
    """
    )
    native, native_counters, engines = run(spark, text, bids=bids(spark, ROWS))
    operator, counters, _ = run(spark, text, "operator", bids=bids(spark, ROWS))
    assert engines == {"query_1": "native"}
    assert native == operator
    assert native["query_1"] == [
        ("2", "25", "2024-01-01 00:00:00"),
        ("3", "40", "2024-01-01 00:00:10"),
        ("3", "41", "2024-01-01 00:00:10"),
    ]
    for c in (native_counters["query_1"], counters["query_1"]):
        assert (c["rows_fired"], c["dropped"]) == (3, {"outside the top N": 5})


DEDUP = (
    BIDS
    + """
CREATE VIEW first_bid AS
SELECT auction, price, bidder, window_start
FROM TABLE(TUMBLE(TABLE bids, DESCRIPTOR(ts), INTERVAL '10' SECOND))
QUALIFY ROW_NUMBER() OVER (PARTITION BY window_start, window_end, bidder ORDER BY ts) = 1;
CREATE VIEW last_bid AS
SELECT auction, price, bidder, window_start FROM (
    SELECT *, ROW_NUMBER() OVER (PARTITION BY window_start, window_end, bidder ORDER BY ts DESC)
        AS rn
    FROM TABLE(TUMBLE(TABLE bids, DESCRIPTOR(ts), INTERVAL '10' SECOND))
) WHERE rn = 1;
"""
)


def test_deduplication_keeps_the_first_or_the_last_row(spark, partitions):
    # per bidder and 10 s window: a bids at 1, 4, 7; b at 2 and 12; c at 3 and twice at 13
    # (41 arrives after 40: the last of equal times is 41, the first 40)
    first = [
        ("1", "10", "a", "2024-01-01 00:00:00"),
        ("1", "15", "c", "2024-01-01 00:00:00"),
        ("1", "30", "b", "2024-01-01 00:00:10"),
        ("2", "20", "b", "2024-01-01 00:00:00"),
        ("3", "40", "c", "2024-01-01 00:00:10"),
    ]
    last = [
        ("1", "15", "c", "2024-01-01 00:00:00"),
        ("1", "30", "b", "2024-01-01 00:00:10"),
        ("2", "20", "b", "2024-01-01 00:00:00"),
        ("2", "25", "a", "2024-01-01 00:00:00"),
        ("3", "41", "c", "2024-01-01 00:00:10"),
    ]
    native, native_counters, engines = run(spark, DEDUP, bids=bids(spark, ROWS))
    operator, counters, _ = run(spark, DEDUP, "operator", bids=bids(spark, ROWS))
    assert engines == {"first_bid": "native", "last_bid": "native"}
    assert native == operator == {"first_bid": first, "last_bid": last}
    for c in (native_counters["last_bid"], counters["last_bid"]):
        assert (c["rows_in"], c["rows_fired"], c["dropped"]) == (8, 5, {"duplicate": 3})


def test_rows_of_a_fired_window_are_late_dropped_and_counted(spark, partitions):
    # arrival order (seq): the bid at 3 s comes after the one at 12 s moved the
    # watermark to 10.999: [0, 10) fired, so it is late for the rank: dropped
    text = (
        BIDS.replace(";\n", " WITH (arrival_order = 'seq');\n")
        + """
    SELECT * FROM TABLE(TUMBLE(TABLE bids, DESCRIPTOR(ts), INTERVAL '10' SECOND))
    QUALIFY ROW_NUMBER() OVER (PARTITION BY window_start, window_end ORDER BY price DESC) <= 1;
    """
    )
    rows = [(1, 10, "a", 1), (2, 50, "b", 2), (1, 30, "b", 12), (9, 99, "z", 3)]
    out, counters, engines = run(spark, text, bids=bids(spark, rows))
    assert engines == {"query_1": "operator"}  # arrival order: the planner says why
    assert [(r[0], r[1]) for r in out["query_1"]] == [("1", "30"), ("2", "50")]
    c = counters["query_1"]
    assert (c["rows_in"], c["rows_fired"], c["dropped"]) == (
        4,
        2,
        {"late": 1, "outside the top N": 1},
    )


def _drained_stream(spark, tmp_path, text: str, name: str) -> list[tuple]:
    """``name``'s rows when ``text`` runs on a stream (a micro-batch per file), drained."""
    folder = tmp_path / "in"
    folder.mkdir()
    (folder / "a.csv").write_text(
        "auction,price,bidder,ts,seq\n"
        + "".join(f"{a},{p},{b},{at(t)},{i}\n" for i, (a, p, b, t) in enumerate(ROWS))
    )
    (folder / "b.csv").write_text("auction,price,bidder,ts,seq\n9,1,z,2024-01-01 00:01:00,9\n")
    df = (
        spark.readStream.schema(
            "auction bigint, price bigint, bidder string, ts timestamp, seq bigint"
        )
        .option("header", "true")
        .option("maxFilesPerTrigger", "1")
        .csv(str(folder))
    )
    results = wql.compile(text).apply(spark, bids=df)
    r = results.query(name)
    assert r.engine == "operator"
    table = f"wql_rank_stream_{name}"
    query = (
        r.df.writeStream.format("memory")
        .queryName(table)
        .outputMode("append")
        .option("checkpointLocation", str(tmp_path / "ck"))
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination()
    return sorted(tuple(as_text(v) for v in row) for row in spark.table(table).collect())


def test_a_rank_over_a_window_table_streams(spark, tmp_path):
    # one stateful operator: it runs on a stream (a micro-batch per file) and gives the
    # batch rows once the watermark has passed every window
    batch, _, _ = run(spark, DEDUP, bids=bids(spark, ROWS))
    assert _drained_stream(spark, tmp_path, DEDUP, "last_bid") == batch["last_bid"]


def test_rank_with_ties_streams(spark, tmp_path):
    # RANK() on a stream: both bids at 13 s rank 1, as in batch
    text = (
        BIDS
        + """
    CREATE VIEW latest AS
    SELECT auction, price, window_start FROM TABLE(TUMBLE(TABLE bids, DESCRIPTOR(ts),
        INTERVAL '10' SECOND))
    QUALIFY RANK() OVER (PARTITION BY window_start, window_end ORDER BY ts DESC) <= 1;
    """
    )
    batch, _, _ = run(spark, text, bids=bids(spark, ROWS))
    assert len(batch["latest"]) == 3
    assert _drained_stream(spark, tmp_path, text, "latest") == batch["latest"]


#: Top-N and deduplication over SESSION tables (Flink 2.3 runs both): each bidder's
#: sessions of 5 s gaps, ranked when they close.
SESSIONS = (
    BIDS
    + """
CREATE VIEW best_of_session AS
SELECT * FROM (
    SELECT *, ROW_NUMBER() OVER (PARTITION BY window_start, window_end, bidder
        ORDER BY price DESC) AS rn
    FROM TABLE(SESSION(TABLE bids PARTITION BY bidder, DESCRIPTOR(ts), INTERVAL '5' SECOND))
) WHERE rn <= 1;
CREATE VIEW last_of_session AS
SELECT bidder, price, window_start, window_end
FROM TABLE(SESSION(TABLE bids PARTITION BY bidder, DESCRIPTOR(ts), INTERVAL '5' SECOND))
QUALIFY ROW_NUMBER() OVER (PARTITION BY window_start, window_end, bidder ORDER BY ts DESC) = 1;
"""
)
# bidder a: 1 s (10), 3 s (15) -> [1, 8); 9 s (5) -> [9, 14) (8 < 9: no touch).
# b: 2 s (20) -> [2, 7); 20 s (25), 22 s (30) -> [20, 27). c: 13 s (40, 41) -> [13, 18).
SESSION_ROWS = [
    (1, 10, "a", 1),
    (2, 20, "b", 2),
    (1, 15, "a", 3),
    (3, 5, "a", 9),
    (2, 25, "b", 20),
    (1, 30, "b", 22),
    (3, 40, "c", 13),
    (3, 41, "c", 13),
]


def test_top_n_and_deduplication_over_session_tables(spark, partitions):
    out, counters, engines = run(spark, SESSIONS, bids=bids(spark, SESSION_ROWS))
    assert engines == {"best_of_session": "operator", "last_of_session": "operator"}
    best = [(r[0], r[1], r[2], r[5], r[6], r[8]) for r in out["best_of_session"]]
    assert best == [
        ("1", "15", "a", "2024-01-01 00:00:01", "2024-01-01 00:00:08", "1"),
        ("1", "30", "b", "2024-01-01 00:00:20", "2024-01-01 00:00:27", "1"),
        ("2", "20", "b", "2024-01-01 00:00:02", "2024-01-01 00:00:07", "1"),
        ("3", "41", "c", "2024-01-01 00:00:13", "2024-01-01 00:00:18", "1"),
        ("3", "5", "a", "2024-01-01 00:00:09", "2024-01-01 00:00:14", "1"),
    ]
    # the last of equal times: 41 came after 40
    assert out["last_of_session"] == [
        ("a", "15", "2024-01-01 00:00:01", "2024-01-01 00:00:08"),
        ("a", "5", "2024-01-01 00:00:09", "2024-01-01 00:00:14"),
        ("b", "20", "2024-01-01 00:00:02", "2024-01-01 00:00:07"),
        ("b", "30", "2024-01-01 00:00:20", "2024-01-01 00:00:27"),
        ("c", "41", "2024-01-01 00:00:13", "2024-01-01 00:00:18"),
    ]
    c = counters["best_of_session"]
    assert (c["rows_in"], c["rows_fired"], c["dropped"]) == (8, 5, {"outside the top N": 3})
    c = counters["last_of_session"]
    assert (c["rows_in"], c["rows_fired"], c["dropped"]) == (8, 5, {"duplicate": 3})


def test_a_rank_over_a_session_table_streams(spark, tmp_path):
    batch, _, _ = run(spark, SESSIONS, bids=bids(spark, ROWS))
    assert batch["best_of_session"]
    assert _drained_stream(spark, tmp_path, SESSIONS, "best_of_session") == batch["best_of_session"]


def test_forcing_native_on_a_rank_that_cannot_is_a_positioned_error():
    text = HOTTEST.replace("SELECT auction, window_start", "SELECT window_start")
    with pytest.raises(WqlUnsupportedError, match="grouping keys") as e:
        wql.compile(text, "native")
    assert e.value.span is not None
