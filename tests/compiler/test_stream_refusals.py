"""Which two-stage pipelines that run in batch are refused on a stream (issue 24's count).

Every view of VIEWS read by every reader of READERS (a query, a window rank
or a window join over the view) makes one file; those that batch compiles
are the pipelines, and each is planned for a stream
(``wql.compile(text, streaming=True)``). The stream refuses only what
docs/streaming.md says it refuses: none of them ("Links in Spark SQL",
"Counted").
"""

from __future__ import annotations

import itertools

import pytest

import wql
from wql.errors import WqlError, WqlErrors

SOURCE = """CREATE SOURCE bids (auction STRING, price BIGINT, ts TIMESTAMP,
    WATERMARK FOR ts AS ts - INTERVAL '2' SECOND) WITH (format = 'json', path = 'in');
"""

_GROUP = "FROM bids GROUP BY auction, TUMBLE(ts, INTERVAL '10' SECOND)"
_COLUMNS = "auction, window_start, window_end, window_time"

#: The views a reader reads (``v``), each selecting its keys and window bounds.
VIEWS = {
    "copied": f"SELECT {_COLUMNS}, COUNT(*) AS num, MAX(price) AS top {_GROUP}",
    "having": f"SELECT {_COLUMNS}, COUNT(*) AS num, MAX(price) AS top {_GROUP} HAVING COUNT(*) > 1",
    "computed": f"SELECT {_COLUMNS}, COUNT(*) * 2 AS num, MAX(price) + 1 AS top {_GROUP}",
    "where": f"SELECT {_COLUMNS}, COUNT(*) AS num, MAX(price) AS top FROM bids WHERE price > 2 "
    "GROUP BY auction, TUMBLE(ts, INTERVAL '10' SECOND)",
    "early": f"SELECT {_COLUMNS}, pane_timing, COUNT(*) AS num, MAX(price) AS top {_GROUP} "
    "TRIGGER WATERMARK WITH EARLY COUNT(2)",
    "lateness": f"SELECT {_COLUMNS}, COUNT(*) AS num, MAX(price) AS top {_GROUP} "
    "ALLOWED LATENESS INTERVAL '5' SECOND",
    # a pipeline of two views, the second over the first through a WHERE
    "chained": f"SELECT {_COLUMNS}, SUM(num) AS num, MAX(top) AS top FROM base WHERE num > 0 "
    "GROUP BY auction, TUMBLE(window_time, INTERVAL '10' SECOND)",
}
BASE = f"CREATE VIEW base AS SELECT {_COLUMNS}, COUNT(*) AS num, MAX(price) AS top {_GROUP};\n"

_TOP = (
    "SELECT auction, num, window_start FROM (SELECT *, ROW_NUMBER() OVER (PARTITION BY "
    "window_start, window_end ORDER BY {order}) AS rn FROM v{where}) WHERE rn <= 2"
)
_TABLE = "TABLE(TUMBLE(TABLE bids, DESCRIPTOR(ts), INTERVAL '10' SECOND)) AS b"
_ON = "b.auction = x.auction AND b.window_start = x.window_start AND b.window_end = x.window_end"

#: The readers of a view ``v``.
READERS = {
    "rollup": "SELECT window_start, SUM(num) AS n FROM v GROUP BY TUMBLE(window_time, "
    "INTERVAL '20' SECOND)",
    "rollup_where": "SELECT window_start, SUM(num) AS n FROM v WHERE top > 3 "
    "GROUP BY TUMBLE(window_time, INTERVAL '20' SECOND)",
    "rollup_computed": "SELECT window_start, SUM(num * top) AS n FROM v "
    "GROUP BY TUMBLE(window_time, INTERVAL '20' SECOND)",
    "per_auction": "SELECT auction, window_start, MAX(top) AS t FROM v "
    "GROUP BY auction, TUMBLE(window_time, INTERVAL '20' SECOND)",
    "count_window": "SELECT COUNT(*) AS n, SUM(num) AS s FROM v GROUP BY COUNT_WINDOW(2)",
    "top_n": _TOP.format(order="num DESC, auction", where=""),
    "top_n_where": _TOP.format(order="num DESC, auction", where=" WHERE top > 3"),
    "top_n_computed": _TOP.format(order="num * top DESC", where=""),
    "dedup": "SELECT auction, num FROM v QUALIFY ROW_NUMBER() OVER (PARTITION BY "
    "window_start, window_end ORDER BY window_time) = 1",
    "inner_join": f"SELECT b.auction, b.price, x.num FROM {_TABLE} JOIN v AS x ON {_ON}",
    "left_join": f"SELECT b.auction, b.price, x.num FROM {_TABLE} LEFT JOIN v AS x ON {_ON}",
    "full_join_views": "SELECT x.auction, x.num, y.num AS other FROM v AS x FULL JOIN base AS y "
    "ON x.auction = y.auction AND x.window_start = y.window_start "
    "AND x.window_end = y.window_end",
    "inner_residual": f"SELECT b.auction, x.num FROM {_TABLE} JOIN v AS x ON {_ON} "
    "AND b.price > x.top",
    "left_residual": f"SELECT b.auction, x.num FROM {_TABLE} LEFT JOIN v AS x ON {_ON} "
    "AND b.price > x.top",
    "over_rank": "SELECT COUNT(*) AS n FROM ("
    + _TOP.format(order="num DESC, auction", where="")
    + ") GROUP BY COUNT_WINDOW(2)",
}


def text(view: str, reader: str) -> str:
    body = VIEWS[view]
    base = BASE if "base" in body or "base" in READERS[reader] else ""
    if reader == "over_rank":
        # a query over a window rank that reads the view
        rank = _TOP.format(order="num DESC, auction", where="")
        return (
            SOURCE
            + base
            + f"CREATE VIEW v AS {body};\nCREATE VIEW ranked AS {rank};\n"
            + "SELECT COUNT(*) AS n FROM ranked GROUP BY COUNT_WINDOW(2);\n"
        )
    return SOURCE + base + f"CREATE VIEW v AS {body};\nCREATE VIEW reader AS {READERS[reader]};\n"


def pipelines() -> list[tuple[str, str]]:
    """The (view, reader) pairs that batch compiles."""
    out = []
    for view, reader in itertools.product(VIEWS, READERS):
        try:
            wql.compile(text(view, reader))
        except WqlError:
            continue
        out.append((view, reader))
    return out


def refused() -> dict[tuple[str, str], list[WqlError]]:
    """The pipelines a stream refuses, with their errors."""
    out = {}
    for pair in pipelines():
        try:
            wql.compile(text(*pair), streaming=True)
        except WqlErrors as e:
            out[pair] = list(e.errors)
        except WqlError as e:
            out[pair] = [e]
    return out


def test_a_stream_refuses_no_pipeline_that_batch_runs():
    every = pipelines()
    assert len(every) == 85, len(every)
    # docs/streaming.md gives this count ("Links in Spark SQL", "Counted")
    assert refused() == {}


@pytest.mark.parametrize("reader", ["top_n_where", "top_n_computed", "dedup"])
def test_a_rank_over_a_view_through_spark_sql_runs_cut(reader):
    program = wql.compile(text("having", reader), streaming=True).program
    assert [link.sql for link in program.view("reader").engine.stream.links] == [True]


@pytest.mark.parametrize("view", ["copied", "having", "chained"])
def test_a_query_over_a_rank_runs_cut_at_the_rank(view):
    how = wql.compile(text(view, "over_rank"), streaming=True).program.queries[-1]
    assert how.engine.stream.links[-1].sql


@pytest.mark.parametrize("view", ["copied", "having", "chained"])
def test_an_outer_join_on_more_than_equalities_takes_partners(view):
    how = wql.compile(text(view, "left_residual"), streaming=True).program.view("reader")
    assert how.engine.stream.partners[0] and not how.engine.stream.partners[1]


@pytest.mark.parametrize("view", ["having", "computed", "chained"])
def test_a_join_side_through_spark_sql_runs_before_the_join(view):
    program = wql.compile(text(view, "left_join"), streaming=True).program
    how = program.view("reader").engine.stream
    assert [side.sql for side in how.sides] == [False, True]
    explained = wql.compile(text(view, "left_join"), streaming=True).explain()
    assert "after the pipeline of view v runs as stateful operators of its own" in explained
    # the join matches on the view's key, which its pipeline carries: partitioned by it
    assert how.partition_text == ("b.auction = x.auction",) and not how.serial
    assert "partitioned by b.auction = x.auction" in explained


def test_keyed_joins_and_keyed_cascades_never_run_in_one_task():
    # issue 24's rule: what runs in one task is a stage whose windows hold every key's
    # rows (a keyless rollup or count window, a window rank across keys), never a keyed
    # join or a keyed cascade, whether its links are copied or in Spark SQL
    for view, reader in pipelines():
        how = wql.compile(text(view, reader), streaming=True).explain()
        keyed = reader in ("per_auction", "inner_join", "left_join", "full_join_views")
        keyed |= reader in ("inner_residual", "left_residual")
        assert not keyed or "parallelism 1" not in how, (view, reader)
