"""Stream pipelines whose links need Spark SQL, against batch replay.

A reader's WHERE over a view, a view's HAVING, a computed column a reader
reads (by an aggregate or a window rank): the pipeline is cut there into
Spark stateful operators with Spark's projection between them
(wql/spark/stream_links.py, docs/streaming.md "Links in Spark SQL"). The
streams read the burst files of tests/spark/test_stream_pipelines.py (the
same watermark rises as batch replay) in one stream for the module, stopped
after four files and restarted from its checkpoint; drained, every pipeline's
rows and counters equal the batch run's.
"""

from __future__ import annotations

import json
import os

import pytest

import wql
from tests.spark.stream_helpers import (
    BURSTS,
    PER_AUCTION,
    SOURCE,
    batch_queries,
    counted_rows,
    files,
    stream_queries,
    write_files,
)
from wql.spark.stream_sinks import read_output

pytestmark = pytest.mark.spark

#: One text: per_auction (10 s windows per auction) and the queries over it whose
#: links need Spark SQL, each cut differently.
LINKED = (
    PER_AUCTION
    + """
-- the reader's WHERE over the view (a keyless rollup: one group; the rows WHERE
-- rejects are counted as the query's rows_filtered)
CREATE VIEW busy AS
SELECT window_start, window_end, SUM(num) AS bids, MAX(top) AS top, COUNT(*) AS auctions
FROM per_auction WHERE num > 1 GROUP BY TUMBLE(window_time, INTERVAL '20' SECOND);

-- a view with HAVING, read by a rollup
CREATE VIEW crowded AS
SELECT auction, window_time, COUNT(*) AS num
FROM bids GROUP BY auction, TUMBLE(ts, INTERVAL '10' SECOND) HAVING COUNT(*) > 1;
CREATE VIEW crowded_rollup AS
SELECT window_start, SUM(num) AS bids, COUNT(*) AS auctions
FROM crowded GROUP BY TUMBLE(window_time, INTERVAL '20' SECOND);

-- a computed input and a computed key, partitioned by auction (the key is a copy)
CREATE VIEW doubled AS
SELECT auction, window_start, SUM(num * 2) AS twice, MAX(top) AS top
FROM per_auction WHERE top > 3
GROUP BY auction, TUMBLE(window_time, INTERVAL '20' SECOND);

-- the view's rows in pairs, in the order they fire (the rise order across the cut)
CREATE VIEW pairs AS
SELECT COLLECT_LIST(auction) AS auctions, SUM(num) AS bids
FROM per_auction WHERE auction <> 'c' GROUP BY COUNT_WINDOW(2);

-- EARLY and ON_TIME panes, a late output: WHERE keeps the ON_TIME ones
CREATE VIEW panes AS
SELECT auction, window_time, pane_timing, COUNT(*) AS num
FROM bids GROUP BY auction, TUMBLE(ts, INTERVAL '10' SECOND)
TRIGGER WATERMARK WITH EARLY COUNT(2);
CREATE VIEW on_time AS
SELECT window_start, SUM(num) AS counted, COUNT(*) AS panes
FROM panes WHERE pane_timing = 'ON_TIME' GROUP BY TUMBLE(window_time, INTERVAL '10' SECOND)
LATE DATA TO late_panes;

-- three stages, a cut in the middle (the middle query's WHERE filters in Spark)
CREATE VIEW middle AS
SELECT auction, window_time, SUM(num) AS num
FROM per_auction WHERE top >= 4 GROUP BY auction, TUMBLE(window_time, INTERVAL '20' SECOND);
CREATE VIEW three AS
SELECT window_start, SUM(num) AS bids, COUNT(*) AS rows_read
FROM middle GROUP BY TUMBLE(window_time, INTERVAL '40' SECOND);

-- three stages cut twice: the middle segment is fed and feeds
CREATE VIEW twice_cut AS
SELECT window_start, SUM(num) AS bids, COUNT(*) AS rows_read
FROM middle WHERE num > 1 GROUP BY TUMBLE(window_time, INTERVAL '40' SECOND);

-- window ranks over a view through Spark SQL: a Top-N over a view with HAVING (one
-- order over every key: one group)
CREATE VIEW crowded_windows AS
SELECT auction, window_start, window_end, COUNT(*) AS num, MAX(price) AS top
FROM bids GROUP BY auction, TUMBLE(ts, INTERVAL '10' SECOND) HAVING COUNT(*) > 1;
CREATE VIEW crowded_top AS
SELECT auction, num, top, window_start, window_end
FROM (SELECT *, ROW_NUMBER() OVER (PARTITION BY window_start, window_end
      ORDER BY num DESC, auction) AS rn FROM crowded_windows)
WHERE rn <= 2;

-- a RANK() Top-N whose WHERE filters the view's rows (counted) and whose ORDER BY is
-- computed from view columns
CREATE VIEW picky_top AS
SELECT auction, num, top, window_start, place
FROM (SELECT *, RANK() OVER (PARTITION BY window_start, window_end
      ORDER BY top * num DESC) AS place FROM per_auction WHERE num > 1)
WHERE place <= 1;

-- a Top-N per auction (partitioned by auction) with WHERE
CREATE VIEW auction_top AS
SELECT auction, window_start, num
FROM (SELECT *, ROW_NUMBER() OVER (PARTITION BY window_start, window_end, auction
      ORDER BY num DESC) AS rn FROM per_auction WHERE top > 3)
WHERE rn <= 1;

-- a deduplication over a view's computed column: the first row each window fires
CREATE VIEW shouted AS
SELECT UPPER(auction) AS name, window_start, window_end, window_time, COUNT(*) AS num
FROM bids GROUP BY auction, TUMBLE(ts, INTERVAL '10' SECOND);
CREATE VIEW first_shouted AS
SELECT name, num, window_start
FROM shouted
QUALIFY ROW_NUMBER() OVER (PARTITION BY window_start, window_end ORDER BY window_time) = 1;

-- queries over a window rank (its ranked relation, outer WHERE and SELECT in Spark):
-- the ranked rows in pairs, in the order they fire (cut twice: HAVING, the rank)
CREATE VIEW top_pairs AS
SELECT COLLECT_LIST(auction) AS auctions, SUM(num) AS bids
FROM crowded_top GROUP BY COUNT_WINDOW(2);
-- per auction, over a Top-N per auction whose view is read through WHERE
CREATE VIEW top_rollup AS
SELECT auction, MAX(num) AS most, COUNT(*) AS ranked
FROM auction_top GROUP BY auction, COUNT_WINDOW(2);
"""
)
NAMES = ["busy", "crowded_rollup", "doubled", "pairs", "on_time", "three", "twice_cut"]
RANKS = ["crowded_top", "picky_top", "auction_top", "first_shouted", "top_pairs", "top_rollup"]
COUNTED = ("rows_in", "rows_filtered", "rows_fired", "late_rows", "dropped")


def text(folder, stream: bool = True) -> str:
    options = ", maxFilesPerTrigger = '1'" if stream else ""
    return SOURCE.format(path=folder, options=options) + LINKED


@pytest.fixture(scope="module")
def drained(spark, tmp_path_factory):
    """Every linked pipeline streamed together in one stream with a stop in the middle
    (files 0-3, stop, then the rest and the end of input from the same checkpoint),
    drained, and in batch: (rows of the first run, streamed rows, stream counters,
    batch rows, batch counters)."""
    base = tmp_path_factory.mktemp("links")
    folder, out, ck = base / "in", base / "out", base / "ck"
    names = NAMES + RANKS
    write_files(folder, range(4))
    first, _ = stream_queries(spark, text(folder), names, out, ck, drain=False)
    write_files(folder, range(4, len(files())))
    streamed, sinks = stream_queries(spark, text(folder), names, out, ck)
    expected, counters = batch_queries(spark, text(folder, stream=False), names)
    return first, streamed, sinks.counters(spark), expected, counters


def test_the_links_need_spark_sql_and_the_pipelines_are_cut_there(tmp_path):
    program = wql.compile(text(tmp_path), streaming=True).program
    for name in NAMES + RANKS:
        how = program.view(name).engine.stream
        assert any(link.sql for link in how.links), name
    explained = wql.compile(text(tmp_path), streaming=True).explain()
    assert "stateful operators in one streaming query, cut where" in explained


@pytest.mark.parametrize("name", NAMES + RANKS)
def test_a_drained_linked_pipeline_equals_the_batch_pipeline(drained, name):
    _, streamed, stream_counters, expected, batch_counters = drained
    assert sum(expected[name].values()) >= 1, name
    assert streamed[name] == expected[name]
    for key in COUNTED:
        assert stream_counters[name][key] == batch_counters[name][key], (name, key)


def test_where_over_a_view_is_counted_as_batch_counts_it(drained):
    _, _, stream_counters, _, batch_counters = drained
    # busy: per_auction fires 13 windows; WHERE num > 1 rejects the 8 with one bid
    assert (batch_counters["busy"]["rows_in"], batch_counters["busy"]["rows_filtered"]) == (13, 8)
    assert stream_counters["busy"]["rows_filtered"] == 8


def test_a_restart_between_micro_batches_gives_the_uninterrupted_rows(drained):
    # every segment's state (and the rows in flight between them: none, a micro-batch
    # runs every operator) survives in the checkpoint: the module's stream stopped
    # after files 0-3 and resumed from the same checkpoint
    first, resumed, counters, expected, batch_counters = drained
    names = ["busy", "on_time", "three", "crowded_top", "auction_top", "top_pairs"]
    assert sum(sum(first[name].values()) for name in names) > 0
    assert {name: resumed[name] for name in names} == {name: expected[name] for name in names}
    for name in names:
        for key in COUNTED:
            assert counters[name][key] == batch_counters[name][key], (name, key)


#: The bursts with a late one after the 13 s burst (the watermark is 10.999 s): its
#: rows at 5 s fire LATE panes of [0, 10) within the view's lateness, in the
#: micro-batch's rows (phase 1 across the cut). Batch replays them in arrival order
#: (``seq``, the order of the files), where they are late too.
LATE_BURSTS = [*BURSTS[:4], (5, [("a", 4), ("c", 6)]), *BURSTS[4:]]
LATE_SOURCE = """
CREATE SOURCE bids (auction STRING, price BIGINT, ts TIMESTAMP, seq BIGINT,
    WATERMARK FOR ts AS ts - INTERVAL '2' SECOND)
WITH (format = 'json', path = '{path}', arrival_order = 'seq'{options});
"""
LATE = """
CREATE VIEW lasting AS
SELECT auction, window_time, pane_timing, COUNT(*) AS num, MAX(price) AS top
FROM bids GROUP BY auction, TUMBLE(ts, INTERVAL '10' SECOND)
ALLOWED LATENESS INTERVAL '5' SECOND;
CREATE VIEW late_rollup AS
SELECT window_start, SUM(num) AS bids, COUNT(*) AS panes
FROM lasting WHERE top > 1 GROUP BY TUMBLE(window_time, INTERVAL '20' SECOND)
LATE DATA TO late_rollup_late;
"""


def write_numbered(folder, bursts) -> None:
    """:func:`write_files` of ``bursts``, every row numbered in arrival order (``seq``)."""
    folder.mkdir(parents=True)
    seq = 0
    for i, rows in enumerate(files(bursts)):
        lines = []
        for row in rows:
            lines.append(json.dumps({**row, "seq": seq}) + "\n")
            seq += 1
        final = folder / f"f{i:03d}.json"
        final.write_text("".join(lines))
        os.utime(final, (1_000_000 + i, 1_000_000 + i))


@pytest.mark.slow
def test_late_firings_cross_the_cut_as_in_batch(spark, tmp_path):
    """LATE panes a view fires while taking a micro-batch's rows reach the reader after
    its rise, at its watermark, as batch replay (in arrival order) orders them: rows,
    the late output and counters equal."""
    folder = tmp_path / "in"
    write_numbered(folder, LATE_BURSTS)
    stream_text = LATE_SOURCE.format(path=folder, options=", maxFilesPerTrigger = '1'") + LATE
    names = ["lasting", "late_rollup"]
    streamed, sinks = stream_queries(spark, stream_text, names, tmp_path / "out", tmp_path / "ck")
    batch_text = LATE_SOURCE.format(path=folder, options="") + LATE
    expected, batch = batch_queries(spark, batch_text, names)
    assert streamed == expected
    # the view fired LATE panes (the late burst), which crossed the cut
    assert any("LATE" in row for row in expected["lasting"])
    results = wql.compile(batch_text).apply(spark)
    try:
        batch_late = counted_rows(results["late_rollup_late"])
    finally:
        results.release()
    assert counted_rows(read_output(spark, tmp_path / "out" / "late_rollup_late")) == batch_late
    counters = sinks.counters(spark)
    for key in COUNTED:
        assert counters["late_rollup"][key] == batch["late_rollup"][key], key
