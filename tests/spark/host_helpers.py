"""Helpers for the batch-host tests: the same query run in-process, as one global operator.

The Spark host splits the replay by key over partitions; the reference here
feeds ONE ``WindowOperator`` every row in replay order with the per-row loop
of docs/architecture.md (``advance_watermark(wm_before)``,
``advance_processing_time(pt)``, ``process_element``) — Flink at parallelism
1. Equal outputs mean the host's partitioning, sorting, batching and clock
hand-over are exact. Only queries whose keys and aggregate arguments are
plain source columns can be run here (no Spark to evaluate expressions).

Also the Spark side those tests and the replay tests (test_local_replay,
test_driver_run) share: the source's rows as a DataFrame (``frame``,
``rows_of``), a run's outcome, and one query by two replay strategies
(``summary_and_window``).
"""

from __future__ import annotations

import datetime as dt
from collections import Counter
from typing import Any

import pyarrow as pa
from hypothesis import strategies as st

from wql.compiler import compile_source
from wql.compiler.backends.operator import build_operator
from wql.runtime.window_operator import WindowOperator
from wql.spark import replay as R
from wql.spark.batch import OPERATOR_PARTITIONS_CONF, run_operator

MIN_TIME = -(2**63)
EPOCH = dt.datetime(1970, 1, 1)


def ts(ms: int | None) -> dt.datetime | None:
    return None if ms is None else EPOCH + dt.timedelta(milliseconds=ms)


def ms(value: dt.datetime | None) -> int | None:
    if value is None:
        return None
    return (value - EPOCH) // dt.timedelta(milliseconds=1)


def replay_order(rows: list[dict], order: str | None) -> list[int]:
    """Indices of ``rows`` in replay order (``order``: arrival column, else event time ``ts``)."""
    if order is not None:
        return sorted(range(len(rows)), key=lambda i: (rows[i][order], i))
    return sorted(range(len(rows)), key=lambda i: (ms(rows[i]["ts"]), i))


def run_in_process(
    text: str,
    rows: list[dict],
    *,
    delay_ms: int,
    arrival: str | None = None,
    processing_time: str | None = None,
):
    """``(results, late, counters)`` of the file's only query, one operator, global replay loop.

    ``results`` are ``(key..., window_start, window_end, pane_index, pane_timing, aggs...)``
    with datetimes for window bounds; ``late`` are ``(source values..., event_time)``.
    """
    query = compile_source(text, engine="operator").queries[0]
    plan = build_operator(query)
    columns = {c.name: c.name for c in query.source.columns}
    columns.update({f"`{c}`": c for c in list(columns)})

    def value(sql: str, row: dict) -> Any:
        if sql in columns:
            return row[columns[sql]]
        if sql.startswith("CAST((") and sql.endswith(") AS DOUBLE)"):
            v = value(sql[len("CAST((") : -len(") AS DOUBLE)")], row)
            return None if v is None else float(v)
        raise AssertionError(f"in-process reference cannot evaluate {sql!r}")

    op = WindowOperator(plan.config)
    seen = MIN_TIME
    clock = MIN_TIME
    with_time = [i for i, r in enumerate(rows) if r["ts"] is not None]
    kept = [with_time[j] for j in replay_order([rows[i] for i in with_time], arrival)]
    for i in kept:
        row = rows[i]
        t = ms(row["ts"])
        op.advance_watermark(MIN_TIME if seen == MIN_TIME else seen - delay_ms - 1)
        if plan.uses_processing_time:
            clock = max(clock, row[processing_time])
            op.advance_processing_time(clock)
        seen = max(seen, t)
        passes = query.filter is None or eval_filter(query.filter.sql, row)
        if not passes:
            continue
        key = tuple(value(k.expr.sql, row) for k in plan.keys)
        op.process_element(key, t, tuple(value(v.sql, row) for v in plan.values))
    if seen != MIN_TIME:
        op.advance_watermark(seen - delay_ms - 1)
    op.end_of_input()
    results = [(*r[0], ts(r[1]), ts(r[2]), r[4], r[5], *r[7:]) for r in op.drain()]
    late = [(*vals, ts(t)) for _, t, vals in op.drain_late()]
    return results, late, op.counters.as_dict()


def eval_filter(sql: str, row: dict) -> bool:
    """The few WHERE clauses the host tests use (``col > n``)."""
    col, op, lit = sql.split()
    assert op == ">", sql
    v = row[col]
    return v is not None and v > float(lit)


def multiset(rows) -> Counter:
    return Counter(tuple(_norm(v) for v in r) for r in rows)


def _norm(v: Any) -> Any:
    if isinstance(v, float):
        return round(v, 9)
    if isinstance(v, list):
        return tuple(v)
    return v


# --------------------------------------------------------------------------- queries

#: The batch-host tests' source (``source``) as a DataFrame schema.
SCHEMA = "k string, v double, ts timestamp, arr bigint, pt bigint"


def source(delay_s: int, options: str = "") -> str:
    return (
        "CREATE SOURCE s (k STRING, v DOUBLE, ts TIMESTAMP, arr BIGINT, pt BIGINT, "
        f"WATERMARK FOR ts AS ts - INTERVAL '{delay_s}' SECOND){options};\n"
    )


SELECT = (
    "SELECT k, window_start, window_end, pane_index, pane_timing, SUM(v) AS total, COUNT(*) AS n"
)

#: Query shapes of the host-equals-one-operator properties (here and in tests/cluster).
QUERIES = [
    f"{SELECT} FROM s GROUP BY k, TUMBLE(ts, INTERVAL '2' SECOND)",
    f"{SELECT} FROM s GROUP BY k, HOP(ts, INTERVAL '1' SECOND, INTERVAL '3' SECOND) "
    "ALLOWED LATENESS INTERVAL '1' SECOND LATE DATA TO late_s",
    f"{SELECT} FROM s GROUP BY k, SESSION(ts, INTERVAL '1' SECOND) "
    "ALLOWED LATENESS INTERVAL '500' MILLISECOND",
    f"{SELECT} FROM s GROUP BY k, SESSION(ts, INTERVAL '1' SECOND) TRIGGER PURGING COUNT(2)",
    f"{SELECT} FROM s GROUP BY k, TUMBLE(ts, INTERVAL '2' SECOND) "
    "ALLOWED LATENESS INTERVAL '2' SECOND TRIGGER WATERMARK WITH EARLY COUNT(2)",
    "SELECT k, pane_index, SUM(v) AS total, COUNT(*) AS n FROM s GROUP BY k, COUNT_WINDOW(3, 2)",
    f"{SELECT} FROM s GROUP BY k, TUMBLE(ts, INTERVAL '2' SECOND) TRIGGER COUNT(2) EVICT COUNT(2)",
]


# --------------------------------------------------------------------------- Spark runs


def frame(spark, rows):
    return spark.createDataFrame(
        [(r["k"], r["v"], r["ts"], r.get("arr"), r.get("pt")) for r in rows], SCHEMA
    )


def rows_of(*items):
    """``(key, value, ts_ms[, arrival])`` tuples as row dicts."""
    out = []
    for i, item in enumerate(items):
        k, v, t = item[:3]
        out.append({"k": k, "v": v, "ts": ts(t), "arr": item[3] if len(item) > 3 else i, "pt": 0})
    return out


def outcome(run):
    """A run's results, late rows and dropped rows (multisets) and counters; releases it."""
    try:
        late = multiset(run.late.collect()) if run.late is not None else None
        return multiset(run.result.collect()), late, multiset(run.dropped.collect()), run.counters
    finally:
        run.release()


def summary_and_window(spark, text, files, partitions, batch, strategy=R.STRATEGY_SUMMARY):
    """The outcomes of ``text``'s query by the summary (or ``strategy``'s) and the window replay.

    ``files``: one Parquet file per list of ``(k, v, ts ms, arr)`` rows, read as
    one DataFrame; ``partitions`` key partitions, Arrow batches of ``batch`` rows.
    ``strategy`` ``auto``: the query must take the local replay.
    """
    import tempfile

    import pyarrow.parquet as pq

    compiled = compile_source(text, engine="operator").queries[0]
    before = spark.conf.get("spark.sql.shuffle.partitions")
    spark.conf.set("spark.sql.shuffle.partitions", partitions)
    spark.conf.set(OPERATOR_PARTITIONS_CONF, partitions)
    spark.conf.set("spark.sql.execution.arrow.maxRecordsPerBatch", batch)
    try:
        with tempfile.TemporaryDirectory() as tmp:
            for i, rows in enumerate(files):
                table = pa.table(
                    {
                        "k": [k for k, _, _, _ in rows],
                        "v": [float(v) for _, v, _, _ in rows],
                        "ts": pa.array([ts(t) for _, _, t, _ in rows], pa.timestamp("us")),
                        "arr": pa.array([a for _, _, _, a in rows], pa.int64()),
                        "pt": pa.array([0] * len(rows), pa.int64()),
                    }
                )
                pq.write_table(table, f"{tmp}/part-{i}.parquet")
            df = spark.read.parquet(tmp)
            summary = run_operator(compiled, df, replay_strategy=strategy)
            assert summary._replay is not None
            if strategy == R.STRATEGY_SUMMARY:
                assert summary._replay.summary is not None
            else:
                assert summary._replay.local_order is not None
            got = outcome(summary)
            expected = outcome(run_operator(compiled, df, replay_strategy=R.STRATEGY_WINDOW))
    finally:
        spark.conf.set("spark.sql.shuffle.partitions", before)
        spark.conf.unset(OPERATOR_PARTITIONS_CONF)
        spark.conf.unset("spark.sql.execution.arrow.maxRecordsPerBatch")
    return got, expected


def key_files(values: Any, slots: int, rows: int, files: int) -> Any:
    """Source files (1 to ``files``, of 1 to ``rows`` rows) of ``(key, value, event time
    in ms or NULL)``: keys a, b and c, ``values`` drawn from the strategy given, event
    times on a 250 ms grid of ``slots + 1`` times (few distinct times: ties within and
    across keys and files)."""
    row = st.tuples(
        st.sampled_from(["a", "b", "c"]),
        values,
        st.one_of(st.integers(0, slots).map(lambda t: t * 250), st.none()),
    )
    return st.lists(st.lists(row, min_size=1, max_size=rows), min_size=1, max_size=files)
