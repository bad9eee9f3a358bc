"""A "latest state" table fed by a WQL changelog (EMIT CHANGELOG), kept with foreachBatch.

Streams ``live_sessions.wql`` over a folder that receives ``data/taps.csv``
one tap per file (one micro-batch each, as the taps arrive) and applies each
micro-batch's changes to a Parquet table holding one row per live session:

    python examples/changelog_sink.py OUT_DIR      # prints the table at the end

How a micro-batch is applied (docs/language.md, "Changelog output"): a row of
the table is identified by the grouping keys and the window
(``Query.changelog_key``: user_id, window_start, window_end); Spark gives a
DataFrame no order, so the changes of one window are ordered by
``pane_index``, a row before its retraction; the window's last change decides:
an insert (``+I``/``+U``) is its row now, a retraction (``-U``/``-D``)
deletes it. Changes of later micro-batches come later.

The table is written as one Parquet version per micro-batch
(``OUT_DIR/latest/v<batch id>``), computed from the newest version of an
earlier batch, so a micro-batch Spark runs again after a failure writes the
same version again; ``latest_table`` reads the newest. (A Delta Lake or
Iceberg table would ``MERGE`` the same changes in place.)

Expected table: ``examples/expected/changelog_sink/latest.csv``.
"""

from __future__ import annotations

import csv
import os
import sys
from pathlib import Path
from typing import Any

import wql

HERE = Path(__file__).resolve().parent
QUERY = HERE / "live_sessions.wql"
RETRACTIONS = ("-U", "-D")


def last_changes(changes: Any, key: list[str]) -> Any:
    """Each window's last change in ``changes`` (by pane_index, a retraction last)."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    retraction = F.col("op").isin(*RETRACTIONS).cast("int")
    order = Window.partitionBy(*key).orderBy(F.col("pane_index").desc(), retraction.desc())
    return changes.withColumn("_n", F.row_number().over(order)).where("_n = 1").drop("_n")


def apply_changes(table: Any, changes: Any, key: list[str]) -> Any:
    """``table`` (None: empty) with ``changes`` applied: one row per live window."""
    from pyspark.sql import functions as F

    last = last_changes(changes, key)
    rows = last.where(~F.col("op").isin(*RETRACTIONS)).drop("op")
    if table is None:
        return rows
    # null-safe: count and GLOBAL() windows have NULL bounds
    same = [table[c].eqNullSafe(last[c]) for c in key]
    condition = same[0]
    for c in same[1:]:
        condition = condition & c
    return table.join(last, condition, "left_anti").unionByName(rows)


def versions(folder: Path) -> list[int]:
    return sorted(int(p.name[1:]) for p in folder.glob("v*") if p.name[1:].isdigit())


def latest_table(spark: Any, folder: Path) -> Any:
    """The newest version of the table (None before the first micro-batch)."""
    found = versions(folder)
    return spark.read.parquet(str(folder / f"v{found[-1]}")) if found else None


def run(spark: Any, out: Path) -> Any:
    """Stream the taps one per micro-batch into ``out/latest``; returns the final table."""
    incoming, table_dir = out / "in", out / "latest"
    incoming.mkdir(parents=True, exist_ok=True)
    table_dir.mkdir(parents=True, exist_ok=True)
    with (HERE / "data" / "taps.csv").open(newline="") as f:
        header, *taps = list(csv.reader(f))
    for i, tap in enumerate(sorted(taps, key=lambda r: int(r[2]))):  # arrival order
        path = incoming / f"tap{i:03d}.csv"
        with path.open("w", newline="") as f:
            csv.writer(f).writerows([header, tap])
        # the file source takes files in modification-time order: one second apart
        os.utime(path, (1_000_000 + i, 1_000_000 + i))

    compiled = wql.compile_file(QUERY)
    query = compiled.program.query("live_sessions")
    key = list(query.changelog_key)
    stream = (
        spark.readStream.schema("user_id STRING, ts TIMESTAMP, seq BIGINT")
        .option("header", "true")
        .option("maxFilesPerTrigger", 1)
        .csv(str(incoming))
    )
    changes = compiled.apply(spark, taps=stream).df

    def apply_batch(batch: Any, batch_id: int) -> None:
        earlier = [v for v in versions(table_dir) if v < batch_id]
        base = spark.read.parquet(str(table_dir / f"v{earlier[-1]}")) if earlier else None
        new = apply_changes(base, batch, key)
        new.write.mode("overwrite").parquet(str(table_dir / f"v{batch_id}"))

    (
        changes.writeStream.foreachBatch(apply_batch)
        .option("checkpointLocation", str(out / "checkpoint"))
        .trigger(availableNow=True)
        .start()
        .awaitTermination()
    )
    return latest_table(spark, table_dir)


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print("usage: python examples/changelog_sink.py OUT_DIR", file=sys.stderr)
        return 2
    from wql.spark.session import default_session

    spark = default_session()
    table = run(spark, Path(argv[0]))
    table.orderBy("user_id", "window_start").show(truncate=False)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
