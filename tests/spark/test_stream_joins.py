"""Window joins on streams: the join and both sides' pipelines in one stateful processor.

The streams are the burst files of the stream pipeline tests
(``tests/spark/stream_helpers.py``: every row of a burst at one event time,
a file holding the rest of one burst and the first row of the next), so the
watermark rises at the same places as in batch replay and a drained stream's
join equals the batch join (docs/streaming.md, "Window joins"). The joins of
each group of GROUPS run together, in one stream over the burst files that
their tests share (the ``drained`` fixture: a few streaming queries at a
time, each with its Python workers), stopped in the middle and restarted from
its checkpoint.
"""

from __future__ import annotations

import json
import os
from collections import Counter
from pathlib import Path

import pytest

import wql
from tests.spark.examples_helpers import EXAMPLES, expected_outputs, rows_as_text
from tests.spark.stream_helpers import (
    BURSTS,
    SOURCE,
    batch_queries,
    batch_query,
    files,
    stream_cli_argv,
    stream_queries,
    stream_query,
    write_files,
)
from wql.spark.stream_sinks import read_output

pytestmark = pytest.mark.spark


MAX_PRICES = """
CREATE VIEW max_prices AS
SELECT window_start, window_end, MAX(price) AS max_price
FROM bids GROUP BY TUMBLE(ts, INTERVAL '10' SECOND);
"""

HIGH_AND_LOW = """
CREATE VIEW high AS
SELECT auction, window_start, window_end, COUNT(*) AS num, SUM(price) AS total
FROM bids WHERE price >= 5 GROUP BY auction, TUMBLE(ts, INTERVAL '10' SECOND);
CREATE VIEW low AS
SELECT auction AS item, window_start, window_end, COUNT(*) AS num
FROM bids WHERE price < 5 GROUP BY auction, TUMBLE(ts, INTERVAL '10' SECOND);
"""

JOINS = {
    # Nexmark q7's shape: a window table joined with its windows' maximum (a view)
    "highest": MAX_PRICES
    + """
CREATE VIEW highest AS
SELECT b.auction, b.price, b.ts, b.window_start, m.window_end
FROM TABLE(TUMBLE(TABLE bids, DESCRIPTOR(ts), INTERVAL '10' SECOND)) AS b
JOIN max_prices AS m
    ON b.window_start = m.window_start AND b.window_end = m.window_end
    AND b.price = m.max_price
WHERE b.auction <> 'z';
""",
    # two views, a FULL join: unmatched rows on both sides; an expression in SELECT
    "full": HIGH_AND_LOW
    + """
CREATE VIEW full AS
SELECT COALESCE(h.auction, l.item) AS auction, h.window_start AS hs, l.window_end AS le,
    h.num AS high, l.num AS low, h.total * 2 AS doubled
FROM high AS h FULL JOIN low AS l
    ON h.auction = l.item AND h.window_start = l.window_start
    AND h.window_end = l.window_end;
""",
    # LEFT join of a HOP window table with a view of the same windows
    "left": """
CREATE VIEW counts AS
SELECT auction, window_start, window_end, COUNT(*) AS num
FROM bids WHERE price > 4 GROUP BY auction, HOP(ts, INTERVAL '5' SECOND, INTERVAL '10' SECOND);
CREATE VIEW left AS
SELECT b.auction, b.price, b.window_start, b.window_end, c.num
FROM TABLE(HOP(TABLE bids, DESCRIPTOR(ts), INTERVAL '5' SECOND, INTERVAL '10' SECOND)) AS b
LEFT JOIN counts AS c
    ON b.auction = c.auction AND b.window_start = c.window_start
    AND b.window_end = c.window_end;
""",
    # a window table over a view (windowed by its window_time) joined with a view of it
    "table_over_view": """
CREATE VIEW per AS
SELECT auction, window_time AS wt, COUNT(*) AS num, MAX(price) AS top
FROM bids GROUP BY auction, TUMBLE(ts, INTERVAL '5' SECOND);
CREATE VIEW per10 AS
SELECT auction, window_start, window_end, SUM(num) AS n
FROM per GROUP BY auction, TUMBLE(wt, INTERVAL '10' SECOND);
CREATE VIEW table_over_view AS
SELECT a.auction, a.wt, a.top, b.n, a.window_end
FROM TABLE(TUMBLE(TABLE per, DESCRIPTOR(wt), INTERVAL '10' SECOND)) AS a
RIGHT JOIN per10 AS b ON a.window_start = b.window_start AND a.window_end = b.window_end
    AND a.auction = b.auction;
""",
    # sides read through Spark SQL (docs/streaming.md, "Window joins"): a view with
    # HAVING in a FULL join with a view the join processor runs
    "having_side": HIGH_AND_LOW
    + """
CREATE VIEW busy_high AS
SELECT auction, window_start, window_end, COUNT(*) AS num, SUM(price) AS total
FROM bids WHERE price >= 5 GROUP BY auction, TUMBLE(ts, INTERVAL '10' SECOND)
HAVING COUNT(*) > 1;
CREATE VIEW having_side AS
SELECT COALESCE(h.auction, l.item) AS auction, h.window_start AS hs, h.num AS high,
    h.total, l.num AS low
FROM busy_high AS h FULL JOIN low AS l
    ON h.auction = l.item AND h.window_start = l.window_start
    AND h.window_end = l.window_end;
""",
    # a window table LEFT JOIN a view column the view computes
    "computed_side": """
CREATE VIEW doubled_counts AS
SELECT auction, window_start, window_end, COUNT(*) * 2 AS twice
FROM bids GROUP BY auction, TUMBLE(ts, INTERVAL '10' SECOND);
CREATE VIEW computed_side AS
SELECT b.auction, b.price, b.window_start, c.twice
FROM TABLE(TUMBLE(TABLE bids, DESCRIPTOR(ts), INTERVAL '10' SECOND)) AS b
LEFT JOIN doubled_counts AS c
    ON b.auction = c.auction AND b.window_start = c.window_start
    AND b.window_end = c.window_end;
""",
    # both sides cut: a window table over a view with HAVING, FULL JOIN a view whose
    # pipeline has a link in Spark SQL (a WHERE over its view)
    "cut_sides": """
CREATE VIEW per_busy AS
SELECT auction, window_time AS wt, COUNT(*) AS num, MAX(price) AS top
FROM bids GROUP BY auction, TUMBLE(ts, INTERVAL '5' SECOND) HAVING COUNT(*) > 1;
CREATE VIEW per5 AS
SELECT auction, window_time, COUNT(*) AS num, MAX(price) AS top
FROM bids GROUP BY auction, TUMBLE(ts, INTERVAL '5' SECOND);
CREATE VIEW sums AS
SELECT auction, window_start, window_end, SUM(num) AS n
FROM per5 WHERE top > 2 GROUP BY auction, TUMBLE(window_time, INTERVAL '10' SECOND);
CREATE VIEW cut_sides AS
SELECT COALESCE(a.auction, s.auction) AS auction, a.wt, a.top, s.n, s.window_end
FROM TABLE(TUMBLE(TABLE per_busy, DESCRIPTOR(wt), INTERVAL '10' SECOND)) AS a
FULL JOIN sums AS s ON a.window_start = s.window_start AND a.window_end = s.window_end
    AND a.auction = s.auction;
""",
    # outer joins whose ON has conditions other than column equalities: the processor
    # gives each row of an outer side with its equality matches, Spark picks the pairs
    # the whole ON matches and the unmatched rows (partitioned by auction)
    "left_residual": HIGH_AND_LOW
    + """
CREATE VIEW left_residual AS
SELECT b.auction, b.price, b.window_start, h.num, h.total
FROM TABLE(TUMBLE(TABLE bids, DESCRIPTOR(ts), INTERVAL '10' SECOND)) AS b
LEFT JOIN high AS h ON b.auction = h.auction AND b.window_start = h.window_start
    AND b.window_end = h.window_end AND b.price * h.num > h.total / 2;
""",
    # a FULL join on the windows and a comparison (one group)
    "full_residual": HIGH_AND_LOW
    + """
CREATE VIEW full_residual AS
SELECT h.auction, h.window_start AS hs, h.num AS high, l.item, l.window_end AS le, l.num AS low
FROM high AS h FULL JOIN low AS l
    ON h.window_start = l.window_start AND h.window_end = l.window_end AND h.num >= l.num;
""",
    # a RIGHT join with a residual ON over a view with HAVING (read through Spark SQL)
    "right_residual": """
CREATE VIEW busy_counts AS
SELECT auction, window_start, window_end, COUNT(*) AS num
FROM bids GROUP BY auction, TUMBLE(ts, INTERVAL '10' SECOND) HAVING COUNT(*) > 1;
CREATE VIEW right_residual AS
SELECT b.auction, b.price, c.auction AS counted, c.num
FROM TABLE(TUMBLE(TABLE bids, DESCRIPTOR(ts), INTERVAL '10' SECOND)) AS b
RIGHT JOIN busy_counts AS c ON b.auction = c.auction AND b.window_start = c.window_start
    AND b.window_end = c.window_end AND b.price > 3 * c.num;
""",
    # INNER with an ON condition that is no equality (Spark applies it after the join)
    "residual": HIGH_AND_LOW
    + """
CREATE VIEW residual AS
SELECT h.auction, h.window_start, h.num AS high, l.num AS low
FROM high AS h JOIN low AS l
    ON h.window_start = l.window_start AND h.window_end = l.window_end
    AND h.num >= l.num;
""",
}


#: The joins streamed together: those the join processor runs alone, those with a side
#: read through Spark SQL, those outer on more than equalities.
GROUPS = (
    ("full", "highest", "left", "residual", "table_over_view"),
    ("computed_side", "cut_sides", "having_side"),
    ("full_residual", "left_residual", "right_residual"),
)


def every_join(folder: Path, stream: bool = True, names=tuple(JOINS)) -> str:
    """Every join of ``names`` (of JOINS) in one text, each view defined once."""
    options = ", maxFilesPerTrigger = '1'" if stream else ""
    body = ""
    for name in names:
        join = JOINS[name]
        body += join.replace(HIGH_AND_LOW, "") if HIGH_AND_LOW in body else join
    return SOURCE.format(path=folder, options=options) + body


@pytest.fixture(scope="module")
def drained(spark, tmp_path_factory):
    """Every join streamed over the burst files, a group of GROUPS per stream, each
    stream stopped after files 0-3 and resumed from its checkpoint with the rest and
    the end of input, drained; and in batch: (streamed rows, stream counters, batch
    rows, batch counters, rows of the first run)."""
    out: tuple[dict, dict, dict, dict, dict] = ({}, {}, {}, {}, {})
    for group in GROUPS:
        base = tmp_path_factory.mktemp("joins")
        folder, stream_out, ck = base / "in", base / "out", base / "ck"
        names = list(group)
        write_files(folder, range(4))
        first, _ = stream_queries(
            spark, every_join(folder, names=names), names, stream_out, ck, drain=False
        )
        write_files(folder, range(4, len(files())))
        streamed, sinks = stream_queries(
            spark, every_join(folder, names=names), names, stream_out, ck
        )
        counters = sinks.counters(spark)
        batch_text = every_join(folder, stream=False, names=names)
        expected, batch_counters = batch_queries(spark, batch_text, names)
        parts = (streamed, counters, expected, batch_counters, first)
        for whole, part in zip(out, parts, strict=True):
            whole.update({name: part[name] for name in names})
    return out


@pytest.mark.parametrize("name", sorted(JOINS))
def test_a_drained_stream_join_equals_the_batch_join(drained, name):
    streamed, stream_counters, batch, batch_counters, _ = drained
    expected, counters = batch[name], batch_counters[name]
    assert sum(expected.values()) >= 3
    assert streamed[name] == expected
    got = stream_counters[name]
    for key in ("rows_in", "rows_filtered", "rows_fired", "dropped"):
        assert got[key] == counters[key], key
    # each side's dropped rows under its name (the sides with drops): together the
    # join's, and batch's per side where batch counts per side
    sides = {side: s["dropped"] for side, s in got.get("sides", {}).items()}
    assert sum((Counter(d) for d in sides.values()), Counter()) == Counter(got["dropped"])
    if "sides" in counters:
        batch_sides = counters["sides"].items()
        assert sides == {side: s["dropped"] for side, s in batch_sides if s["dropped"]}


# a bid behind the watermark: at 3 s, in the micro-batch after the 17 s burst's first row
# raised the watermark to 14.999 s; ``seq`` (the files' order) is the arrival order, so
# batch replay sees it behind the same watermark
LATE_BURSTS = [*BURSTS[:5], (3, [("a", 8)]), *BURSTS[5:]]
SEQ_SOURCE = """
CREATE SOURCE bids (auction STRING, price BIGINT, ts TIMESTAMP, seq BIGINT,
    WATERMARK FOR ts AS ts - INTERVAL '2' SECOND)
WITH (format = 'json', path = '{path}', arrival_order = 'seq'{options});
"""


def test_a_window_table_row_behind_the_watermark_is_late_and_counted(spark, tmp_path):
    folder = tmp_path / "in"
    folder.mkdir()
    seq = 0
    for i, rows_ in enumerate(files(LATE_BURSTS)):
        for r in rows_:
            r["seq"], seq = seq, seq + 1
        path = folder / f"f{i:03d}.json"
        path.write_text("".join(json.dumps(r) + "\n" for r in rows_))
        os.utime(path, (1_000_000 + i, 1_000_000 + i))
    body = JOINS["left"]
    streamed, sinks = stream_query(
        spark,
        SEQ_SOURCE.format(path=folder, options=", maxFilesPerTrigger = '1'") + body,
        "left",
        tmp_path / "out",
        tmp_path / "ck",
    )
    expected, counters = batch_query(
        spark, SEQ_SOURCE.format(path=folder, options="") + body, "left"
    )
    assert not any(r[:2] == ("a", "8") for r in expected)  # in no window: late
    assert streamed == expected
    got = sinks.counters(spark)["left"]
    assert got["dropped"] == counters["dropped"] == {"late": 1}
    assert got["rows_in"] == counters["rows_in"]


@pytest.mark.parametrize("name", ["full", "cut_sides", "full_residual"])
def test_a_restart_between_micro_batches_gives_the_uninterrupted_rows(drained, name):
    # cut_sides: both sides' pipelines run in stateful operators before the join's,
    # each with its state in the checkpoint (rows between them never outlive a batch);
    # every group's stream stopped after files 0-3 and resumed from its checkpoint
    resumed, stream_counters, batch, batch_counters, first = drained
    expected = batch[name]  # the batch join of the same files
    assert 0 < sum(first[name].values()) < sum(expected.values())
    assert resumed[name] == expected
    got, counters = stream_counters[name], batch_counters[name]
    for key in ("rows_in", "rows_filtered", "rows_fired", "dropped"):
        assert got[key] == counters[key], key


@pytest.mark.slow
@pytest.mark.parametrize("stem", ["nexmark_q7", "nexmark_q8"])
def test_nexmark_joins_stream_to_their_expected_rows(spark, tmp_path, stem):
    # the committed sample as one file of a folder: one micro-batch, then the end
    source = EXAMPLES / "nexmark" / f"{stem}.wql"
    folder = tmp_path / "events"
    folder.mkdir()
    (folder / "events.csv").write_text((EXAMPLES / "data" / "nexmark_events.csv").read_text())
    query = tmp_path / f"{stem}.wql"
    query.write_text(source.read_text().replace("'../data/nexmark_events.csv'", "'events'"))
    from wql.cli import main as cli_main

    out, ck = tmp_path / "out", tmp_path / "ck"
    assert cli_main(stream_cli_argv(spark, query, out, ck, "--drain", "--format", "parquet")) == 0
    for name, (header, want) in expected_outputs(stem).items():
        got_header, got = rows_as_text(read_output(spark, out / name))
        assert (got_header, got) == (header, want), name


def test_sides_read_through_spark_sql_are_cut_and_outer_residuals_take_partners():
    # a view's HAVING, a column the view computes, a link in Spark SQL in a side's
    # pipeline: the side's pipeline runs before the join's operator, partitioned by the
    # view key the join matches on (its segments by the keys their pipeline carries)
    program = wql.compile(every_join(Path("in")), streaming=True).program
    for name, cut, keys in (
        ("having_side", [True, False], ("h.auction = l.item",)),
        ("computed_side", [False, True], ("b.auction = c.auction",)),
        ("right_residual", [False, True], ("b.auction = c.auction",)),
    ):
        how = program.view(name).engine.stream
        assert [side.sql for side in how.sides] == cut, name
        assert how.partition_text == keys and not how.serial, name
    # both sides cut: no source row carries the join's keys, one group
    both = program.view("cut_sides").engine.stream
    assert [side.sql for side in both.sides] == [True, True]
    assert not both.partition_text and "both sides read their views" in both.serial
    assert [side.sql for side in program.view("full").engine.stream.sides] == [False, False]
    # an outer join's ON with a condition that is no equality of two columns: the whole
    # ON over each row of an outer side and a partner (the other side's struct)
    partners = {
        name: program.view(name).engine.stream.partners
        for name in ("left_residual", "full_residual", "right_residual", "residual")
    }
    assert partners["residual"] == ("", "")  # INNER: the residual filters the pairs
    assert partners["left_residual"][0] and not partners["left_residual"][1]
    assert not partners["right_residual"][0] and partners["right_residual"][1]
    assert all(partners["full_residual"])
    assert "__wql_p.__wql_r3" in partners["left_residual"][0]  # h.num of a partner
    assert program.view("left_residual").engine.stream.partition_text == ("b.auction = h.auction",)


def test_the_groups_stream_every_join_once():
    assert sorted(name for group in GROUPS for name in group) == sorted(JOINS)


def test_a_partitioned_cut_side_ends_with_its_last_rows_in_one_micro_batch(spark, tmp_path):
    # every row in one micro-batch, then the end; the view's WHERE rejects the last row
    # of auction a, which its join group takes (a window table row): the segment group
    # of a and the join group of a know different last event times, and the view's
    # window [0, 10) of a still joins, as in batch (docs/streaming.md, "Partitioned
    # window joins")
    text = (
        SOURCE.format(path=tmp_path / "in", options="")
        + """
CREATE VIEW busy AS
SELECT auction, window_start, window_end, COUNT(*) AS num
FROM bids WHERE price >= 5 GROUP BY auction, TUMBLE(ts, INTERVAL '10' SECOND)
HAVING COUNT(*) > 1;
CREATE VIEW joined AS
SELECT b.auction, b.price, c.num
FROM TABLE(TUMBLE(TABLE bids, DESCRIPTOR(ts), INTERVAL '10' SECOND)) AS b
JOIN busy AS c ON b.auction = c.auction AND b.window_start = c.window_start
    AND b.window_end = c.window_end;
"""
    )
    how = wql.compile(text, streaming=True).program.view("joined").engine.stream
    assert how.partition_text == ("b.auction = c.auction",)
    folder = tmp_path / "in"
    folder.mkdir()
    rows = [("a", 10, 1), ("a", 10, 2), ("b", 9, 3), ("a", 1, 30), ("q", 1, 31)]
    (folder / "f.json").write_text(
        "".join(
            json.dumps({"auction": a, "price": p, "ts": f"2024-01-01T00:00:{s:02d}"}) + "\n"
            for a, p, s in rows
        )
    )
    streamed, sinks = stream_queries(spark, text, ["joined"], tmp_path / "out", tmp_path / "ck")
    batch, counters = batch_queries(spark, text, ["joined"])
    assert streamed["joined"] == batch["joined"] == Counter({("a", "10", "2"): 2})
    got = sinks.counters(spark)["joined"]
    for key in ("rows_in", "rows_filtered", "rows_fired", "dropped"):
        assert got[key] == counters["joined"][key], key
