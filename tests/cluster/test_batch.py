"""Batch replay and the operator engine on two executor processes give the
rows of ``local[2]``.

The references are the ones the main suite holds ``local[2]`` to: the
examples' expected outputs (``tests/spark/test_examples.py``) and ONE
in-process ``WindowOperator`` fed the whole replay
(``tests/spark/test_batch_host.py``). Here the input is spread over both
executors before the replay: ``createDataFrame`` slices and 256-byte file
splits, so the replay's per-partition statistics, the running watermark and
input order are computed across processes, and the keys' operator state
lives in two executors' Python workers.
"""

from __future__ import annotations

import csv
import datetime as dt
import os
import random

import pytest

import wql
from tests.cluster.conftest import EXECUTORS
from tests.spark.examples_helpers import example_files, expected_outputs, rows_as_text
from tests.spark.host_helpers import QUERIES, SCHEMA, ms, multiset, run_in_process, source, ts
from wql.compiler import compile_source
from wql.spark import replay as R
from wql.spark.batch import run_operator

pytestmark = pytest.mark.cluster


def test_the_session_has_two_executor_processes(cluster):
    sc = cluster.sparkContext
    # the driver's entry plus one per executor
    assert sc._jsc.sc().getExecutorMemoryStatus().size() == EXECUTORS + 1
    # tasks run in Python workers that are not the driver's process, under two executors
    pids = (
        sc.parallelize(range(8), 8).map(lambda _: (os.getpid(), os.getppid())).distinct().collect()
    )
    assert os.getpid() not in {pid for pid, _ in pids}
    assert len({parent for _, parent in pids}) >= EXECUTORS


@pytest.mark.parametrize("path", example_files(), ids=lambda p: p.stem)
def test_example_on_the_operator_engine_gives_the_local_rows(cluster, path):
    results = wql.compile_file(path, engine="operator").apply(cluster)
    try:
        expected = expected_outputs(path.stem)
        for name, (header, rows) in expected.items():
            assert rows_as_text(results[name]) == (header, rows), name
        for r in results.queries:
            assert r.engine == "operator"
            assert r.counters["rows_out"] == len(expected[r.name][1])
            if r.late_name is not None:
                assert r.counters["late_rows"] == len(expected[r.late_name][1])
    finally:
        results.release()


def _generated(seed: int, n: int = 48) -> list[dict]:
    """Rows of three keys arriving (``arr``) out of order: event times drift
    forward with jumps back of up to 9 s (late for a 1 s delay when replayed
    in arrival order), ties, and every 17th row without an event time."""
    rnd = random.Random(seed)
    rows, t = [], 0
    for i in range(n):
        t += rnd.choice((0, 150, 400, 900))
        event = None if i % 17 == 5 else max(0, t - rnd.choice((0, 0, 0, 1500, 4000, 9000)))
        rows.append(
            {"k": rnd.choice("abc"), "v": float(rnd.randint(0, 9)), "ts": ts(event), "arr": i}
        )
    rnd.shuffle(rows)  # input order differs from arrival order
    return rows


@pytest.mark.parametrize("query", QUERIES, ids=lambda q: q.split("GROUP BY k, ")[1][:40])
@pytest.mark.parametrize("arrival", [False, True], ids=["event-time", "arrival"])
def test_generated_out_of_order_data_gives_the_single_operator_rows(cluster, query, arrival):
    rows = _generated(seed=len(query) + arrival)
    text = source(1, " WITH (arrival_order = 'arr')" if arrival else "") + query
    expected, expected_late, counters = run_in_process(
        text, [dict(r, pt=0) for r in rows], delay_ms=1000, arrival="arr" if arrival else None
    )
    if "COUNT_WINDOW" in query:  # that query selects (k, pane_index, total, n)
        expected = [(r[0], r[3], *r[5:]) for r in expected]
    if arrival and "COUNT_WINDOW" not in query:  # in event-time order no row is late
        assert counters["late_rows"] + counters["dropped"].get("late", 0) > 0, "no late rows"
    # six slices over both executors; input order stays the list's order (a
    # shuffle would lose it, and ties in the replay order depend on it)
    data = [(r["k"], r["v"], r["ts"], r["arr"], 0) for r in rows]
    df = cluster.createDataFrame(cluster.sparkContext.parallelize(data, 6), SCHEMA)
    run = run_operator(compile_source(text, engine="operator").queries[0], df)
    try:
        assert multiset(run.result.collect()) == multiset(expected)
        late = run.late.collect() if run.late is not None else []
        assert multiset(late) == multiset(expected_late)
        assert run.counters["rows_emitted"] == counters["rows_emitted"]
        assert run.counters["late_rows"] == counters["late_rows"]
        dropped = dict(counters["dropped"], **{R.REASON_NULL_EVENT_TIME: 3})  # rows 5, 22, 39
        assert run.counters["dropped"] == dropped
        assert run.counters["rows_in"] == len(rows)
    finally:
        run.release()


def test_input_order_of_split_files_survives_two_executors(cluster, tmp_path):
    # Equal event times: the replay breaks ties by input order (file, then
    # position), which COUNT windows and the late side output depend on. Two
    # files in 256-byte splits spread over both executors.
    rnd = random.Random(7)
    files = []
    for f in range(2):
        path = tmp_path / f"part{f}.csv"
        with path.open("w", newline="") as out:
            w = csv.writer(out)
            w.writerow(["k", "v", "ts"])
            for _ in range(40):
                w.writerow(
                    [rnd.choice("ab"), rnd.randint(0, 9), f"2024-01-01 00:00:0{rnd.randint(0, 3)}"]
                )
        files.append(path)
    text = (
        "CREATE SOURCE s (k STRING, v DOUBLE, ts TIMESTAMP, "
        "WATERMARK FOR ts AS ts - INTERVAL '0' SECOND) "
        f"WITH (format = 'csv', header = 'true', path = '{tmp_path}');\n"
        "SELECT k, pane_index, SUM(v) AS total, COUNT(*) AS n FROM s GROUP BY k, COUNT_WINDOW(3)"
    )
    rows = []
    for path in files:  # input order: file path, then line
        with path.open(newline="") as f:
            for r in csv.DictReader(f):
                rows.append({"k": r["k"], "v": float(r["v"]), "ts": ts(ms_of(r["ts"]))})
    expected, _, _ = run_in_process(text, rows, delay_ms=0)
    expected = [(r[0], r[3], *r[5:]) for r in expected]
    cluster.conf.set("spark.sql.files.maxPartitionBytes", "256")
    cluster.conf.set("spark.sql.files.openCostInBytes", "0")
    try:
        df = cluster.read.option("header", "true").csv(str(tmp_path))
        assert df.rdd.getNumPartitions() >= 4
        results = wql.compile(text, engine="operator").apply(cluster)
        try:
            assert multiset(results.df.collect()) == multiset(expected)
        finally:
            results.release()
    finally:
        cluster.conf.unset("spark.sql.files.maxPartitionBytes")
        cluster.conf.unset("spark.sql.files.openCostInBytes")


def ms_of(text: str) -> int:
    return ms(dt.datetime.fromisoformat(text))
