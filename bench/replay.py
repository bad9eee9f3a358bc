"""Measure batch replay and the operator host (``python bench/replay.py [ROWS]``).

Not a test. Prints wall-clock seconds on generated data (1 000 keys,
shuffled event times, 5 s watermark delay):

1. replaying ROWS rows with each strategy (materialised with an aggregate
   over every row), after one warm-up run;
2. the operator engine over ROWS / 10 rows (TUMBLE 1 min + SUM): the job
   that runs the operator and fills the cache of the tagged output stream,
   then reading the results and the late rows back from that cache (the
   cost a second operator run per output would have added without it).
"""

from __future__ import annotations

import sys
import time


def main(rows: int = 2_000_000) -> None:
    from pyspark.sql import functions as F

    import wql
    from wql.spark import replay as R
    from wql.spark.session import default_session

    spark = default_session("local[2]", "wql-bench", {"spark.sql.shuffle.partitions": "8"})
    df = (
        spark.range(rows)
        .select(
            (F.col("id") % 1000).cast("string").alias("k"),
            (F.col("id") % 7).cast("double").alias("v"),
            F.timestamp_millis((F.rand(7) * rows * 10).cast("bigint")).alias("ts"),
        )
        .cache()
    )
    df.count()
    strategies = (R.STRATEGY_WINDOW, R.STRATEGY_BUCKETED)
    R.replay(df.limit(1000), R.ReplaySpec("ts", 5000)).df.count()  # warm-up
    for strategy in strategies:
        start = time.perf_counter()
        replayed = R.replay(df, R.ReplaySpec("ts", 5000), strategy=strategy)
        check = replayed.df.agg(F.max(R.SEQ), F.sum(F.col(R.WM) % 7)).collect()[0]
        elapsed = time.perf_counter() - start
        replayed.release()
        print(f"replay {strategy:12s} {rows:>10,} rows {elapsed:7.2f} s  check={tuple(check)}")

    small = df.limit(rows // 10).cache()
    n = small.count()
    text = (
        "CREATE SOURCE s (k STRING, v DOUBLE, ts TIMESTAMP, "
        "WATERMARK FOR ts AS ts - INTERVAL '5' SECOND);\n"
        "SELECT k, window_start, SUM(v) AS total FROM s "
        "GROUP BY k, TUMBLE(ts, INTERVAL '1' MINUTE) LATE DATA TO late_s"
    )
    start = time.perf_counter()
    results = wql.compile(text, "operator").apply(spark, s=small)
    ran = time.perf_counter() - start
    start = time.perf_counter()
    out = results.df.count()
    late = results["late_s"].count()
    reread = time.perf_counter() - start
    results.release()
    print(f"operator run (replay + operator + cache) {n:>10,} rows {ran:7.2f} s -> {out} rows")
    print(f"results + late read back from the cache                {reread:7.2f} s ({late} late)")
    spark.stop()


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 2_000_000)
