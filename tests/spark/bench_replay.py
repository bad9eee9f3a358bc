"""Measure the two batch-replay strategies (``python tests/spark/bench_replay.py [ROWS]``).

Not a test: it prints wall-clock seconds for replaying ROWS generated rows
(1 000 keys, shuffled event times, a 5 s watermark delay) with the
partitioned strategy and with the single-partition SQL window, each
materialised with a full aggregate so every row is computed.
"""

from __future__ import annotations

import sys
import time


def main(rows: int = 2_000_000) -> None:
    from pyspark.sql import functions as F

    from wql.spark import replay as R
    from wql.spark.session import default_session

    spark = default_session("local[2]", "wql-bench-replay", {"spark.sql.shuffle.partitions": "8"})
    df = (
        spark.range(rows)
        .select(
            (F.col("id") % 1000).alias("k"),
            F.timestamp_millis((F.rand(7) * rows * 10).cast("bigint")).alias("ts"),
        )
        .cache()
    )
    df.count()
    for strategy in (R.STRATEGY_BUCKETED, R.STRATEGY_PARTITIONED, R.STRATEGY_WINDOW) * 2:
        start = time.perf_counter()
        replayed = R.replay(df, R.ReplaySpec("ts", 5000), strategy=strategy)
        agg = replayed.df.agg(F.max(R.SEQ), F.sum(F.col(R.WM) % 7)).collect()[0]
        elapsed = time.perf_counter() - start
        replayed.release()
        print(f"{strategy:12s} {rows:>10,} rows {elapsed:7.2f} s  check={tuple(agg)[1]}")
    spark.stop()


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 2_000_000)
