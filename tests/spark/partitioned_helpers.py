"""The keyed pipelines and window joins that run partitioned on a stream
(docs/streaming.md, "Partitioned pipelines", "Partitioned window joins"), over the
burst files' ``bids`` (tests/spark/stream_helpers.py); shared by
tests/spark/test_stream_partitioned.py and the cluster suite."""

from __future__ import annotations

from pathlib import Path

from tests.spark.stream_helpers import PER_AUCTION, SOURCE

KEYED = {
    # per-auction 10 s counts rolled into 20 s windows per auction (window_time)
    "auction_rollup": PER_AUCTION
    + """
CREATE VIEW auction_rollup AS
SELECT auction, window_start, window_end, SUM(num) AS bids, MAX(top) AS top,
    COUNT(*) AS windows
FROM per_auction GROUP BY auction, TUMBLE(window_time, INTERVAL '20' SECOND);
""",
    # more keys downstream than upstream (auction and its window's top price), and a
    # third stage: three stages, each keyed by the auction
    "by_top": PER_AUCTION
    + """
CREATE VIEW per_top AS
SELECT auction, top, window_time, COUNT(*) AS windows, SUM(num) AS bids
FROM per_auction GROUP BY auction, top, TUMBLE(window_time, INTERVAL '20' SECOND);
CREATE VIEW by_top AS
SELECT auction, window_start, COLLECT_LIST(top) AS tops, SUM(bids) AS bids
FROM per_top GROUP BY auction, TUMBLE(window_time, INTERVAL '40' SECOND);
""",
    # EARLY panes (fired by rows) and ON_TIME panes (fired by rises) per auction, in
    # firing order, with a late output
    "early_keyed": """
CREATE VIEW panes_keyed AS
SELECT auction, window_time, pane_timing, COUNT(*) AS num
FROM bids GROUP BY auction, TUMBLE(ts, INTERVAL '10' SECOND)
TRIGGER WATERMARK WITH EARLY COUNT(2);
CREATE VIEW early_keyed AS
SELECT auction, window_start, COLLECT_LIST(pane_timing) AS timings, SUM(num) AS counted
FROM panes_keyed GROUP BY auction, TUMBLE(window_time, INTERVAL '20' SECOND)
LATE DATA TO late_keyed;
""",
    # the best window of each auction per 20 s: a window rank partitioned by the key
    "best": PER_AUCTION
    + """
CREATE VIEW per20 AS
SELECT auction, window_start, window_end, MAX(num) AS most, SUM(num) AS bids
FROM per_auction GROUP BY auction, TUMBLE(window_time, INTERVAL '20' SECOND);
CREATE VIEW best AS
SELECT auction, bids, window_start, window_end
FROM (SELECT *, ROW_NUMBER() OVER (PARTITION BY auction, window_start, window_end
      ORDER BY most DESC) AS rn FROM per20)
WHERE rn <= 1;
""",
}

# window equi-joins on the auction: both sides grouped by it
KEYED_JOINS = {
    # a HOP window table LEFT JOIN a view of the same windows per auction
    "keyed_left": """
CREATE VIEW hop_counts AS
SELECT auction, window_start, window_end, COUNT(*) AS num
FROM bids WHERE price > 4 GROUP BY auction, HOP(ts, INTERVAL '5' SECOND, INTERVAL '10' SECOND);
CREATE VIEW keyed_left AS
SELECT b.auction, b.price, b.window_start, b.window_end, c.num
FROM TABLE(HOP(TABLE bids, DESCRIPTOR(ts), INTERVAL '5' SECOND, INTERVAL '10' SECOND)) AS b
LEFT JOIN hop_counts AS c
    ON b.auction = c.auction AND b.window_start = c.window_start
    AND b.window_end = c.window_end;
""",
    # two views FULL JOIN on the auction, one of them a two-stage pipeline
    "keyed_full": """
CREATE VIEW high5 AS
SELECT auction, window_time, COUNT(*) AS num, SUM(price) AS total
FROM bids WHERE price >= 5 GROUP BY auction, TUMBLE(ts, INTERVAL '5' SECOND);
CREATE VIEW high10 AS
SELECT auction, window_start, window_end, SUM(num) AS num, SUM(total) AS total
FROM high5 GROUP BY auction, TUMBLE(window_time, INTERVAL '10' SECOND);
CREATE VIEW low10 AS
SELECT auction AS item, window_start, window_end, COUNT(*) AS num
FROM bids WHERE price < 5 GROUP BY auction, TUMBLE(ts, INTERVAL '10' SECOND);
CREATE VIEW keyed_full AS
SELECT COALESCE(h.auction, l.item) AS auction, h.window_start AS hs, l.window_end AS le,
    h.num AS high, l.num AS low, h.total
FROM high10 AS h FULL JOIN low10 AS l
    ON h.auction = l.item AND h.window_start = l.window_start
    AND h.window_end = l.window_end;
""",
}

COUNTED = ("rows_in", "rows_fired", "late_rows", "dropped")
NAMES = sorted([*KEYED, *KEYED_JOINS])


def every_pipeline(folder: Path, stream: bool = True) -> str:
    """Every pipeline of KEYED in one text, each view defined once."""
    options = ", maxFilesPerTrigger = '1'" if stream else ""
    body = ""
    for pipeline in KEYED.values():
        body += pipeline.replace(PER_AUCTION, "") if PER_AUCTION in body else pipeline
    body += "".join(KEYED_JOINS.values())
    return SOURCE.format(path=folder, options=options) + body
