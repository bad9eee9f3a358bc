"""Nexmark q5, q7 and q8 written in WQL (``examples/nexmark/``) against the same
pipelines hand-written in PySpark, on the committed sample of the Nexmark generator.

Each WQL query (every view of the pipeline, not only the last) must give the
rows of its PySpark counterpart: the committed expected outputs
(``examples/expected/nexmark_q*``), which test_examples.py checks on the
planned engines, and the operator engine's here. The PySpark pipelines are
plain batch aggregations and joins: Spark's batch windows have no watermark,
so they equal WQL's only where no row is late. The test checks that too: no
stage drops a row (the sample's out-of-order events all lie within the 4 s
watermark delay, bench/nexmark_sample.py).
"""

from __future__ import annotations

from collections.abc import Callable

import pytest
from pyspark.sql import DataFrame
from pyspark.sql import functions as F

import wql
from tests.spark.examples_helpers import EXAMPLES, expected_outputs, rows_as_text
from wql.runtime.rank import DROP_OUTSIDE_TOP_N

pytestmark = pytest.mark.spark

SCHEMA = (
    "event_type INT, person_id BIGINT, name STRING, city STRING, state STRING, "
    "auction_id BIGINT, item_name STRING, initial_bid BIGINT, reserve BIGINT, "
    "seller BIGINT, category BIGINT, auction BIGINT, bidder BIGINT, price BIGINT, "
    "channel STRING, date_time TIMESTAMP, seq BIGINT"
)


def _events(spark) -> DataFrame:
    return spark.read.csv(str(EXAMPLES / "data" / "nexmark_events.csv"), header=True, schema=SCHEMA)


def _bounds(df: DataFrame, *columns: str) -> DataFrame:
    """Spark's ``window`` struct as WQL's window_start and window_end, after ``columns``."""
    return df.select(
        *columns,
        F.col("window.start").alias("window_start"),
        F.col("window.end").alias("window_end"),
        *[c for c in df.columns if c not in (*columns, "window")],
    )


def q5(events: DataFrame) -> dict[str, DataFrame]:
    """Bids per auction and HOP(2 s, 10 s) window; every auction with the most, ties
    included: Flink's Nexmark q5, the counts joined to their maximum per window."""
    bids = events.where(F.col("event_type") == 2)
    auction_bids = _bounds(
        bids.groupBy("auction", F.window("date_time", "10 seconds", "2 seconds")).agg(
            F.count(F.lit(1)).alias("num")
        ),
        "auction",
    )
    max_bids = auction_bids.groupBy("window_start", "window_end").agg(F.max("num").alias("maxn"))
    c, m = auction_bids.alias("c"), max_bids.alias("m")
    hot_items = c.join(
        m,
        (F.col("c.window_start") == F.col("m.window_start"))
        & (F.col("c.window_end") == F.col("m.window_end"))
        & (F.col("c.num") == F.col("m.maxn")),
    ).select("c.auction", "c.num", "c.window_start", "c.window_end")
    return {"auction_bids": auction_bids, "hot_items": hot_items}


def q7(events: DataFrame) -> dict[str, DataFrame]:
    """The highest price per TUMBLE(10 s) window, joined back to the bids at that price."""
    bids = events.where(F.col("event_type") == 2)
    tumble = F.window("date_time", "10 seconds")
    max_prices = _bounds(bids.groupBy(tumble).agg(F.max("price").alias("max_price")))
    b = _bounds(bids.withColumn("window", tumble)).alias("b")
    m = max_prices.alias("m")
    highest_bids = b.join(
        m,
        (F.col("b.window_start") == F.col("m.window_start"))
        & (F.col("b.window_end") == F.col("m.window_end"))
        & (F.col("b.price") == F.col("m.max_price")),
    ).select("b.auction", "b.price", "b.bidder", "b.date_time", "b.window_end")
    return {"max_prices": max_prices, "highest_bids": highest_bids}


def q8(events: DataFrame) -> dict[str, DataFrame]:
    """People who registered and sold in the same TUMBLE(10 s) window."""
    tumble = F.window("date_time", "10 seconds")
    new_persons = _bounds(
        events.where(F.col("event_type") == 0)
        .groupBy("person_id", "name", tumble)
        .agg(F.count(F.lit(1)).alias("n"))
        .drop("n"),
        "person_id",
        "name",
    )
    new_sellers = _bounds(
        events.where(F.col("event_type") == 1)
        .groupBy("seller", tumble)
        .agg(F.count(F.lit(1)).alias("auctions")),
        "seller",
    )
    p, a = new_persons.alias("p"), new_sellers.alias("a")
    new_users = p.join(
        a,
        (F.col("p.person_id") == F.col("a.seller"))
        & (F.col("p.window_start") == F.col("a.window_start"))
        & (F.col("p.window_end") == F.col("a.window_end")),
    ).select("p.person_id", "p.name", "p.window_start", "p.window_end", "a.auctions")
    return {"new_persons": new_persons, "new_sellers": new_sellers, "new_users": new_users}


HAND_WRITTEN: dict[str, Callable[[DataFrame], dict[str, DataFrame]]] = {
    "nexmark_q5": q5,
    "nexmark_q7": q7,
    "nexmark_q8": q8,
    # the same people and auctions, read from two sources (the split is checked below)
    "nexmark_q8_two_sources": q8,
}


def test_the_two_sources_are_the_events_split_by_type(spark):
    # nexmark_q8_two_sources.wql reads persons and auctions from files of their own:
    # exactly the event file's rows of type 0 and 1, with their columns
    events = _events(spark)
    for name, kind, schema in (
        (
            "nexmark_persons.csv",
            0,
            "person_id BIGINT, name STRING, city STRING, state STRING, date_time TIMESTAMP, "
            "seq BIGINT",
        ),
        (
            "nexmark_auctions.csv",
            1,
            "auction_id BIGINT, item_name STRING, initial_bid BIGINT, reserve BIGINT, "
            "seller BIGINT, category BIGINT, date_time TIMESTAMP, seq BIGINT",
        ),
    ):
        split = spark.read.csv(str(EXAMPLES / "data" / name), header=True, schema=schema)
        want = events.where(F.col("event_type") == kind).select(*split.columns)
        assert sorted(split.collect()) == sorted(want.collect()), name


@pytest.mark.parametrize("name", sorted(HAND_WRITTEN))
def test_nexmark_query_equals_hand_written_pyspark(spark, example_run, name):
    # The hand-written pipeline gives the committed expected outputs, which the
    # WQL file gives on its planned engines (test_examples.py); here it runs on
    # the operator engine (every stage replayed, placed and ranked by the host):
    # the run test_examples.py's operator counters read too (``example_run``).
    want = HAND_WRITTEN[name](_events(spark))
    expected = expected_outputs(name)
    path = EXAMPLES / "nexmark" / f"{name}.wql"
    compiled = wql.compile_file(path, engine="operator")
    assert set(compiled.queries) == set(want) == set(expected)
    run = example_run(path, "operator")
    for query, df in want.items():
        header, rows = rows_as_text(df)
        assert rows, f"{query}: the sample gives rows"
        assert (header, rows) == expected[query], query
        assert run.outputs[query] == (header, rows), query
    for query, counters in run.counters.items():
        assert run.engines[query] == "operator"
        # no late row: the batch PySpark pipelines see every row, WQL drops late
        # ones; a Top-N drops (and counts) the rows it ranks out
        dropped = {k: n for k, n in counters["dropped"].items() if k != DROP_OUTSIDE_TOP_N}
        assert dropped == {} and counters["late_rows"] == 0, query
