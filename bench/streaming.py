"""Streaming benchmark: SESSION + COUNT trigger on the operator engine vs Spark's session_window.

One command (from the repository root)::

    .venv/bin/python bench/streaming.py [--rows 100000] [--batches 3] [--keys 1000]

Writes ``--batches`` parquet files of ``--rows`` rows each (``--keys`` keys,
event time rising across files, 1 s apart per key on average), then runs in
the same Spark session (local[2], 2 shuffle partitions, RocksDB state store):

* **wql**: ``SESSION(ts, 30 s)`` + ``TRIGGER COUNT(100)`` + COUNT/SUM on the
  operator engine (``transformWithStateInPandas``), the tagged stream to a
  ``noop`` sink;
* **baseline**: Spark's own streaming ``session_window(ts, 30 s)`` with the
  same watermark, COUNT/SUM, append mode, ``noop`` sink.

Both read one file per micro-batch (``maxFilesPerTrigger = 1``) with
``availableNow``. Reported per micro-batch with rows: wall time
(``triggerExecution``), rows/s, and the state store's rows and bytes; plus the
mean size of one key's runtime snapshot (the ValueState value) measured
in-process on the same data; per engine, the CPU seconds of the whole
process tree (the JVM and Spark's Python workers: the figure to read on a
shared machine) and the wall time of the micro-batches after the first.
Prints a Markdown table (docs/benchmarks.md).
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

BASE = 1_700_000_000_000
QUERY = """
CREATE SOURCE s (k STRING, v DOUBLE, ts TIMESTAMP,
    WATERMARK FOR ts AS ts - INTERVAL '5' SECOND)
WITH (format = 'parquet', path = '{path}', maxFilesPerTrigger = '1');
SELECT k, window_start, window_end, COUNT(*) AS n, SUM(v) AS total FROM s
GROUP BY k, SESSION(ts, INTERVAL '30' SECOND) TRIGGER COUNT(100);
"""


def make_data(folder: Path, rows: int, batches: int, keys: int) -> None:
    rng = np.random.default_rng(7)
    folder.mkdir(parents=True)
    span = rows * 1000 // keys  # ms per batch: ~1 row per key per second
    for b in range(batches):
        ts = BASE + b * span + np.sort(rng.integers(0, span, rows))
        table = pa.table(
            {
                "k": pa.array([f"k{i}" for i in rng.integers(0, keys, rows)]),
                "v": pa.array(rng.random(rows)),
                "ts": pa.array(ts.astype("datetime64[ms]")).cast(pa.timestamp("us", tz="UTC")),
            }
        )
        path = folder / f"b{b:03d}.parquet"
        pq.write_table(table, path)
        os.utime(path, (1_000_000 + b, 1_000_000 + b))


def tree_cpu() -> float:
    """CPU seconds (user + system) of this process and its descendants so far.

    The JVM and Spark's Python workers are children of this process; finished
    children count through their parents' ``cutime``/``cstime`` (Linux ``/proc``).
    """
    hz = os.sysconf("SC_CLK_TCK")
    children: dict[int, list[int]] = {}
    times: dict[int, int] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        pid = int(entry)
        children.setdefault(int(fields[1]), []).append(pid)
        times[pid] = sum(int(x) for x in fields[11:15])
    total, todo = 0, [os.getpid()]
    while todo:
        pid = todo.pop()
        total += times.get(pid, 0)
        todo.extend(children.get(pid, ()))
    return total / hz


def run_stream(df, ck: Path) -> list[dict]:
    q = (
        df.writeStream.format("noop")
        .outputMode("append")
        .option("checkpointLocation", str(ck))
        .trigger(availableNow=True)
        .start()
    )
    q.awaitTermination()
    if q.exception() is not None:
        raise RuntimeError(str(q.exception()))
    return [p for p in q.recentProgress if p["numInputRows"] > 0]


def summarize(name: str, progress: list[dict]) -> list[str]:
    lines = []
    for p in progress:
        secs = p["durationMs"]["triggerExecution"] / 1000
        state = p["stateOperators"][0] if p["stateOperators"] else {}
        lines.append(
            f"| {name} | {p['batchId']} | {p['numInputRows']} | {secs:.1f} | "
            f"{p['numInputRows'] / secs:,.0f} | {state.get('numRowsTotal', '-')} | "
            f"{state.get('memoryUsedBytes', 0) / 1e6:.1f} |"
        )
    return lines


def snapshot_size(folder: Path) -> tuple[float, int]:
    """Mean bytes of one key's runtime snapshot after the first batch, and the key count."""
    from wql.compiler import compile_source
    from wql.compiler.backends.operator import build_operator
    from wql.runtime.operator import WindowOperator

    q = compile_source(QUERY.format(path=folder), engine="operator").queries[0]
    op = WindowOperator(build_operator(q).config)
    t = pq.read_table(next(iter(sorted(folder.glob("*.parquet")))))
    ks = t.column("k").to_pylist()
    vs = t.column("v").to_pylist()
    ts = t.column("ts").cast(pa.int64()).to_numpy() // 1000
    for k, v, x in zip(ks, vs, ts, strict=True):
        op.process_element((k,), int(x), (v,))
    keys = op.active_keys()
    sizes = [len(op.snapshot_key(k)) for k in keys]
    return float(np.mean(sizes)), len(keys)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=100_000)
    ap.add_argument("--batches", type=int, default=3)
    ap.add_argument("--keys", type=int, default=1000)
    args = ap.parse_args()

    from pyspark.sql import functions as F

    import wql
    from wql.spark.session import default_session
    from wql.spark.stream_sinks import read_stream_source

    work = Path(tempfile.mkdtemp(prefix="wql-bench-stream-"))
    try:
        data = work / "data"
        make_data(data, args.rows, args.batches, args.keys)
        spark = default_session(
            "local[2]", "wql bench streaming", {"spark.sql.shuffle.partitions": "2"}
        )
        compiled = wql.compile(QUERY.format(path=data))
        source = read_stream_source(spark, compiled.program.source("s"), None)

        cpu, started = tree_cpu(), time.perf_counter()
        run = compiled.apply(spark, s=source).queries[0]._run
        wql_progress = run_stream(run.tagged, work / "ck_wql")
        wql_total = time.perf_counter() - started
        wql_cpu = tree_cpu() - cpu

        cpu, started = tree_cpu(), time.perf_counter()
        native = (
            source.withWatermark("ts", "5 seconds")
            .groupBy("k", F.session_window("ts", "30 seconds"))
            .agg(F.count("*").alias("n"), F.sum("v").alias("total"))
        )
        base_progress = run_stream(native, work / "ck_native")
        base_total = time.perf_counter() - started
        base_cpu = tree_cpu() - cpu

        mean_snapshot, keys = snapshot_size(data)
        print("| engine | batch | rows | seconds | rows/s | state rows | state MB |")
        print("|---|---|---|---|---|---|---|")
        for line in summarize("wql operator", wql_progress) + summarize(
            "Spark session_window", base_progress
        ):
            print(line)
        w = sum(p["numInputRows"] for p in wql_progress)
        b = sum(p["numInputRows"] for p in base_progress)
        print()
        print(
            f"total incl. no-data batches: wql {wql_total:.1f} s ({w / wql_total:,.0f} rows/s), "
            f"Spark {base_total:.1f} s ({b / base_total:,.0f} rows/s), "
            f"ratio {wql_total / base_total:.2f}x"
        )
        print(
            f"CPU seconds of the process tree (JVM + Python workers): wql {wql_cpu:.1f}, "
            f"Spark {base_cpu:.1f}, ratio {wql_cpu / base_cpu:.2f}x"
        )
        steady_w = sum(p["durationMs"]["triggerExecution"] for p in wql_progress[1:])
        steady_b = sum(p["durationMs"]["triggerExecution"] for p in base_progress[1:])
        if steady_b:
            print(
                f"micro-batches after the first: wql {steady_w / 1000:.1f} s, "
                f"Spark {steady_b / 1000:.1f} s, ratio {steady_w / steady_b:.2f}x"
            )
        print(
            f"per-key runtime snapshot after batch 0: {mean_snapshot:,.0f} bytes mean "
            f"over {keys} keys"
        )
        spark.stop()
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
