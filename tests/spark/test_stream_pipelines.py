"""Pipelines on streams: the whole chain in one stateful processor, against batch replay.

Every stream reads a folder of JSON files with ``maxFilesPerTrigger = 1``
(one file = one micro-batch). The stream equals batch replay when every row
sees the same watermark in both (docs/streaming.md, "The streaming
watermark"): the rows come in *bursts*, every row of a burst at the same
event time and of its own key, and a file holds the rest of one burst and
the first row of the next (the only row that raises the maximum event time);
so the watermark rises at the same places in both, before the same rows, and
a pipeline's stages see every rise in Flink's order in both
(docs/architecture.md, "Contract: pipelines"). ``--drain`` plays batch
replay's end of input. The pipelines of PIPELINES run together, in one stream
over the burst files that their tests share (the ``drained`` fixture), stopped
in the middle and restarted from its checkpoint.
"""

from __future__ import annotations

from pathlib import Path

import pytest

import wql
from tests.spark.stream_helpers import (
    PER_AUCTION,
    PIPELINES,
    SOURCE,
    batch_queries,
    files,
    stream_cli_argv,
    stream_queries,
    write_files,
)

pytestmark = pytest.mark.spark


def text(name: str, folder: Path, stream: bool = True) -> str:
    options = ", maxFilesPerTrigger = '1'" if stream else ""
    return SOURCE.format(path=folder, options=options) + PIPELINES[name]


def every_pipeline(folder: Path, stream: bool = True) -> str:
    """Every pipeline of PIPELINES in one text, each view defined once."""
    options = ", maxFilesPerTrigger = '1'" if stream else ""
    body = ""
    for pipeline in PIPELINES.values():
        body += pipeline.replace(PER_AUCTION, "") if PER_AUCTION in body else pipeline
    return SOURCE.format(path=folder, options=options) + body


@pytest.fixture(scope="module")
def drained(spark, tmp_path_factory):
    """Every pipeline streamed together over the burst files (one stream for the
    module), stopped after files 0-3 and resumed from the same checkpoint with the rest
    and the end of input, drained; and in batch: (rows of the first run, streamed rows,
    batch rows) per pipeline."""
    base = tmp_path_factory.mktemp("pipelines")
    folder, out, ck = base / "in", base / "out", base / "ck"
    names = sorted(PIPELINES)
    write_files(folder, range(4))
    first, _ = stream_queries(spark, every_pipeline(folder), names, out, ck, drain=False)
    write_files(folder, range(4, len(files())))
    streamed, _ = stream_queries(spark, every_pipeline(folder), names, out, ck)
    expected, _ = batch_queries(spark, every_pipeline(folder, stream=False), names)
    return first, streamed, expected


@pytest.mark.parametrize("name", sorted(PIPELINES))
def test_a_drained_stream_pipeline_equals_the_batch_pipeline(drained, name):
    _, streamed, batch = drained
    expected = batch[name]
    assert sum(expected.values()) >= 3
    assert streamed[name] == expected


def test_a_restart_between_micro_batches_gives_the_uninterrupted_rows(drained):
    # the pipeline's state (every stage, every key) survives in the checkpoint: the
    # module's stream stopped after files 0-3 and resumed from its checkpoint
    first, resumed, batch = drained
    expected = batch["early"]  # the batch pipeline of the same files
    assert 0 < sum(first["early"].values()) < sum(expected.values())
    assert resumed["early"] == expected


#: the rollup over a view whose WHERE rejects 8 of the 20 bids (prices 1, 2 and 3)
FILTERED = PIPELINES["rollup"].replace("FROM bids GROUP", "FROM bids WHERE price > 3 GROUP")


@pytest.mark.slow
def test_a_restarted_stream_counts_the_rows_where_rejects_as_batch(spark, tmp_path):
    """A view with WHERE streams on its own (a single query) and feeds the rollup (a
    pipeline): files 0-3, stop, then the rest and the end of input from the same
    checkpoint. Each query's counters are the batch run's: rows in (the rows WHERE
    rejects too), filtered, fired, late, dropped."""
    folder, out, ck = tmp_path / "in", tmp_path / "out", tmp_path / "ck"
    body = SOURCE.format(path=folder, options=", maxFilesPerTrigger = '1'") + FILTERED
    names = ["per_auction", "rollup"]
    write_files(folder, range(4))
    stream_queries(spark, body, names, out, ck, drain=False)
    write_files(folder, range(4, len(files())))
    streamed, sinks = stream_queries(spark, body, names, out, ck)
    expected, batch = batch_queries(spark, SOURCE.format(path=folder, options="") + FILTERED)
    assert streamed == {name: expected[name] for name in names}
    assert (batch["per_auction"]["rows_in"], batch["per_auction"]["rows_filtered"]) == (20, 8)
    counters = sinks.counters(spark)
    for name in names:
        for key in ("rows_in", "rows_filtered", "rows_fired", "late_rows", "dropped"):
            assert counters[name][key] == batch[name][key], (name, key)


ROLLUP_ROWS = [
    # per_auction, 10 s windows: [0, 10) a 3 bids (top 9), b 3 (8), c 2 (4); [10, 20)
    # a 2 (6), b 1 (2), c 2 (9); [20, 30) b 1 (4), c 1 (3); [30, 40) a, b, c 1 each
    # (7, 6, 2); [40, 50) a 1 (3), b 1 (5). rollup, 20 s windows over window_time
    # (CSV timestamps as docs/running.md gives them):
    ["2024-01-01 00:00:00", "2024-01-01 00:00:20", "13", "9", "6"],
    ["2024-01-01 00:00:20", "2024-01-01 00:00:40", "5", "7", "5"],
    ["2024-01-01 00:00:40", "2024-01-01 00:01:00", "2", "5", "2"],
]


@pytest.mark.slow
def test_wql_run_stream_drain_runs_a_rollup_to_hand_derived_rows(spark, tmp_path, capsys):
    from wql.cli import main as cli_main

    write_files(tmp_path / "in", range(len(files())))
    query = tmp_path / "q.wql"
    query.write_text(text("rollup", Path("in")))
    out, ck = tmp_path / "out", tmp_path / "ck"
    argv = stream_cli_argv(spark, query, out, ck, "--drain")
    assert cli_main(argv) == 0
    err = capsys.readouterr().err
    # the rollup took the 13 rows per_auction fired, every one in a firing
    assert "rollup [operator, stream, drained] | rows in 13 | out 3 | late 0 | fired 13" in err
    got = sorted(
        line.split(",")
        for f in (out / "rollup").glob("*.csv")
        for line in f.read_text().splitlines()
        if not line.startswith("window_start")
    )
    assert got == ROLLUP_ROWS


def test_links_in_spark_sql_cut_the_pipeline_and_a_query_over_a_rank_is_cut_too(tmp_path):
    # a view's HAVING (Spark SQL over its rows) and a reader's expression over view
    # columns: the pipeline is cut there into two stateful operators, with Spark SQL
    # between them (tests/spark/test_stream_links.py runs such streams against batch)
    having = PER_AUCTION.replace(
        "TUMBLE(ts, INTERVAL '10' SECOND);",
        """TUMBLE(ts,
    INTERVAL '10' SECOND) HAVING COUNT(*) > 1;""",
    ) + PIPELINES["rollup"].replace(PER_AUCTION, "")
    expression = PIPELINES["rollup"].replace("SUM(num)", "SUM(num * 2)")
    # a window rank over a view with HAVING is cut too: it ranks the view's own windows
    hot = having + PIPELINES["hot"].replace(PER_AUCTION, "")
    # and a query over a rank: the rank's outer WHERE and SELECT run in Spark
    over = (
        hot + "CREATE VIEW hot_pairs AS SELECT COUNT(*) AS n FROM hot GROUP BY COUNT_WINDOW(2);\n"
    )
    cases = (
        (having, "rollup", 1),
        (expression, "rollup", 1),
        (hot, "hot", 1),
        (over, "hot_pairs", 2),
    )
    for body, reader, cuts in cases:
        program = wql.compile(SOURCE.format(path=tmp_path, options="") + body, streaming=True)
        how = program.program.view(reader).engine.stream
        assert [link.sql for link in how.links] == [True] * cuts, reader
