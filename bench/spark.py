"""Spark benchmark: WQL on Spark vs the same query hand-written in PySpark.

    .venv/bin/python bench/spark.py [--rows N] [--keys K] [--repeat R] [--warmup W]
                                    [--shuffle-partitions P]

Input (seeded NumPy RNG, generated once into Parquet in a temp dir): N rows
(default 2 000 000) over K keys (default 1 000), columns ``k BIGINT, amount
BIGINT, ts TIMESTAMP``, in event-time order, about one row per key per
second (inter-arrival ~ exponential, mean 1000/K ms), written as 4 files so
the scan has more than one task. The source declares a 1 s watermark delay;
the rows are in order, so nothing is late and every scenario's WQL and
hand-written forms compute the same windows.

Scenarios, all in one run on the same local session
(``wql.spark.session.default_session``; ``--shuffle-partitions`` sets
``spark.sql.shuffle.partitions`` for every scenario, default Spark's 200)
and the same DataFrame:

a. TUMBLE 10 s, COUNT(*) + SUM(amount) per key: ``wql.compile(text)`` on the
   native engine (asserted) vs ``F.window`` + ``groupBy``/``agg`` by hand
   (baseline). Goal: ratio <= 1.02.
b. SESSION gap 5 s, same aggregates: the operator engine (forced,
   ``engine="operator"``) vs Spark's ``F.session_window`` by hand (baseline).
   Goal: ratio <= 1.0.
c. SESSION gap 5 s + ``TRIGGER COUNT(100)`` + ``EVICT COUNT(10)`` on the
   operator engine (no Spark equivalent): absolute time and rows/s, ratio
   against (b)'s baseline. (The gap is 5 s rather than 3 s so that a session
   holds ~150 rows and COUNT(100) actually fires.)

Every timed run starts from the source DataFrame and is forced to completion
with ``df.write.format("noop")``; a WQL run includes ``apply()`` (for the
operator engine that is where the replay and operator jobs run) and ends with
``Results.release()`` (outside the clock). Each scenario gets W warm-up runs
(default 1) and R timed runs (default 3), the scenarios taking turns (round
after round) so that a shared machine's changing load weighs on all alike;
the table shows the median and the best, the median CPU seconds of the
whole process tree (this process, the JVM, the Python workers; less moved by
other processes than wall time), and the ratios of medians (best/best in
parentheses) in wall and CPU time. Sanity checks
outside the clock: (a) and (b) have the same number of result rows as their
hand-written forms.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from nexmark import Sampler  # noqa: E402

import wql  # noqa: E402
from wql.spark.session import default_session  # noqa: E402

SEED = 20261121
FILES = 4
TUMBLE_S = 10
GAP_S = 5

SOURCE = """
CREATE SOURCE events (k BIGINT, amount BIGINT, ts TIMESTAMP,
    WATERMARK FOR ts AS ts - INTERVAL '1' SECOND);
"""
TUMBLE_Q = (
    SOURCE
    + f"""
CREATE VIEW tumbling AS
SELECT k, window_start, window_end, COUNT(*) AS n, SUM(amount) AS total
FROM events GROUP BY k, TUMBLE(ts, INTERVAL '{TUMBLE_S}' SECOND);
"""
)
SESSION_Q = (
    SOURCE
    + f"""
CREATE VIEW sessions AS
SELECT k, window_start, window_end, COUNT(*) AS n, SUM(amount) AS total
FROM events GROUP BY k, SESSION(ts, INTERVAL '{GAP_S}' SECOND);
"""
)
TRIGGERED_Q = (
    SOURCE
    + f"""
CREATE VIEW triggered AS
SELECT k, window_start, window_end, COUNT(*) AS n, SUM(amount) AS total
FROM events GROUP BY k, SESSION(ts, INTERVAL '{GAP_S}' SECOND)
TRIGGER COUNT(100)
EVICT COUNT(10);
"""
)


def generate(path: Path, rows: int, keys: int) -> None:
    """Write the seeded input as ``FILES`` Parquet files under ``path``."""
    rng = np.random.default_rng(SEED)
    start_ms = 1_700_000_000_000
    ts = start_ms + np.cumsum(rng.exponential(1000.0 / keys, rows)).astype(np.int64)
    k = rng.integers(0, keys, rows, dtype=np.int64)
    amount = rng.integers(1, 10_000, rows, dtype=np.int64)
    path.mkdir(parents=True, exist_ok=True)
    for i, chunk in enumerate(np.array_split(np.arange(rows), FILES)):
        table = pa.table(
            {
                "k": pa.array(k[chunk]),
                "amount": pa.array(amount[chunk]),
                "ts": pa.array(ts[chunk], pa.timestamp("ms", tz="UTC")),
            }
        )
        pq.write_table(table, path / f"part-{i:02d}.parquet")


@dataclass
class Timing:
    name: str
    runs: list[float] = field(default_factory=list)
    cpu: list[float] = field(default_factory=list)  # CPU seconds of the process tree
    baseline: Timing | None = None

    @property
    def median(self) -> float:
        return statistics.median(self.runs)

    @property
    def best(self) -> float:
        return min(self.runs)

    @property
    def cpu_median(self) -> float:
        return statistics.median(self.cpu)


def measure(runs: list[tuple[str, Callable[[], None]]], warmup: int, repeat: int) -> list[Timing]:
    """Time every ``run`` (each must force its result) ``repeat`` times after ``warmup`` runs.

    The runs take turns (one round = one run of each), so that a shared
    machine's load, which moves by seconds within minutes, weighs on all of
    them alike; each run's CPU seconds of the whole process tree (this
    process, the JVM, the Python workers) are sampled as well.
    """
    for _ in range(warmup):
        for _, run in runs:
            run()
    timings = [Timing(name) for name, _ in runs]
    for _ in range(repeat):
        for timing, (_, run) in zip(timings, runs, strict=True):
            with Sampler() as sampler:
                started = time.perf_counter()
                run()
                elapsed = time.perf_counter() - started
            timing.runs.append(elapsed)
            timing.cpu.append(sampler.cpu)
    for t in timings:
        print(f"  {t.name}: " + ", ".join(f"{s:.2f}" for s in t.runs) + " s", file=sys.stderr)
    return timings


def noop(df: Any) -> None:
    df.write.format("noop").mode("overwrite").save()


def wql_runner(compiled: wql.Compiled, events: Any, spark: Any) -> Callable[[], None]:
    """A run of ``compiled`` over ``events``: apply, force, then free the operator cache."""

    def run() -> None:
        results = compiled.apply(spark, events=events)
        try:
            noop(results.df)
        finally:
            # outside what matters: unpersist is asynchronous and cheap
            results.release()

    return run


def tumble_by_hand(events: Any) -> Any:
    from pyspark.sql import functions as F

    w = F.window("ts", f"{TUMBLE_S} seconds")
    return (
        events.groupBy("k", w.alias("w"))
        .agg(F.count(F.lit(1)).alias("n"), F.sum("amount").alias("total"))
        .select(
            "k",
            F.col("w.start").alias("window_start"),
            F.col("w.end").alias("window_end"),
            "n",
            "total",
        )
    )


def session_by_hand(events: Any) -> Any:
    from pyspark.sql import functions as F

    w = F.session_window("ts", f"{GAP_S} seconds")
    return (
        events.groupBy("k", w.alias("w"))
        .agg(F.count(F.lit(1)).alias("n"), F.sum("amount").alias("total"))
        .select(
            "k",
            F.col("w.start").alias("window_start"),
            F.col("w.end").alias("window_end"),
            "n",
            "total",
        )
    )


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rows", type=int, default=2_000_000)
    ap.add_argument("--keys", type=int, default=1_000)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--warmup", type=int, default=1)
    ap.add_argument("--shuffle-partitions", type=int, default=None)
    args = ap.parse_args(argv)
    if min(args.rows, args.keys, args.repeat, args.shuffle_partitions or 1) < 1 or args.warmup < 0:
        ap.error("--rows, --keys, --repeat, --shuffle-partitions must be >= 1, --warmup >= 0")

    load = os.getloadavg() if hasattr(os, "getloadavg") else (float("nan"),) * 3
    conf = {}
    if args.shuffle_partitions is not None:
        conf["spark.sql.shuffle.partitions"] = str(args.shuffle_partitions)
    spark = default_session(app_name="wql-bench", extra_conf=conf)
    for key, value in conf.items():  # a session that already existed keeps its builder conf
        spark.conf.set(key, value)
    with tempfile.TemporaryDirectory(prefix="wql-bench-spark-") as tmp:
        data = Path(tmp) / "events"
        generate(data, args.rows, args.keys)
        events = spark.read.parquet(str(data))
        n = events.count()
        assert n == args.rows, (n, args.rows)

        tumble = wql.compile(TUMBLE_Q)
        assert tumble.engine == {"tumbling": "native"}, tumble.engine
        session = wql.compile(SESSION_Q, engine="operator")
        assert session.engine == {"sessions": "operator"}, session.engine
        triggered = wql.compile(TRIGGERED_Q, engine="operator")
        assert triggered.engine == {"triggered": "operator"}, triggered.engine

        # sanity (outside the clock): same number of windows as by hand
        results = tumble.apply(spark, events=events)
        a_rows, a_hand = results.df.count(), tumble_by_hand(events).count()
        assert a_rows == a_hand, f"(a) WQL {a_rows} rows, by hand {a_hand}"
        results = session.apply(spark, events=events)
        b_rows, b_hand = results.counters["rows_out"], session_by_hand(events).count()
        results.release()
        assert b_rows == b_hand, f"(b) WQL {b_rows} rows, by hand {b_hand}"
        results = triggered.apply(spark, events=events)
        c_rows = results.counters["rows_out"]
        results.release()

        print(f"timing ({args.warmup} warm-up + {args.repeat} runs each)...", file=sys.stderr)
        a_base, a, b_base, b, c = measure(
            [
                ("a. hand-written F.window", lambda: noop(tumble_by_hand(events))),
                ("a. WQL TUMBLE (native)", wql_runner(tumble, events, spark)),
                ("b. hand-written F.session_window", lambda: noop(session_by_hand(events))),
                ("b. WQL SESSION (operator)", wql_runner(session, events, spark)),
                (
                    "c. WQL SESSION+COUNT(100)+EVICT(10) (operator)",
                    wql_runner(triggered, events, spark),
                ),
            ],
            args.warmup,
            args.repeat,
        )
        a.baseline, b.baseline, c.baseline = a_base, b_base, b_base

    print()
    print(
        f"rows {args.rows:,}, keys {args.keys:,}, local[*] on {os.cpu_count()} cores, "
        f"spark.sql.shuffle.partitions={spark.conf.get('spark.sql.shuffle.partitions')}, "
        f"median of {args.repeat} after {args.warmup} warm-up (runs take turns), "
        f"load average at start {load[0]:.2f} / {load[1]:.2f} / {load[2]:.2f}"
    )
    print(f"result rows: a {a_rows:,} (= by hand), b {b_rows:,} (= by hand), c {c_rows:,}")
    print()
    header = (
        "scenario",
        "median s",
        "best s",
        "CPU s (tree, median)",
        "rows/s (median)",
        "ratio vs baseline (best)",
        "CPU ratio",
    )
    print("| " + " | ".join(header) + " |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    for t in (a_base, a, b_base, b, c):
        if t.baseline is None:
            ratio = cpu_ratio = "baseline"
        else:
            ratio = f"{t.median / t.baseline.median:.2f}x ({t.best / t.baseline.best:.2f}x)"
            cpu_ratio = f"{t.cpu_median / t.baseline.cpu_median:.2f}x"
        print(
            f"| {t.name} | {t.median:.2f} | {t.best:.2f} | {t.cpu_median:.2f} | "
            f"{args.rows / t.median:,.0f} | {ratio} | {cpu_ratio} |"
        )
    goals = (("a", a, 1.02), ("b", b, 1.0))
    print()
    for label, t, goal in goals:
        got = t.median / t.baseline.median if t.baseline else float("nan")
        verdict = "met" if got <= goal else "NOT met"
        print(f"goal {label}: ratio {got:.2f}x <= {goal}x: {verdict}")
    spark.stop()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
