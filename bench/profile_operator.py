"""Where an operator-engine query's time goes on Spark: replay, shuffle, Arrow, Python loop.

One command (from the repository root)::

    .venv/bin/python bench/profile_operator.py [--data spark|nexmark] [--rows N] [--top T]
                                               [--no-stages] [--batch-rows B]

``--data spark`` (default) profiles ``bench/spark.py``'s scenario b (SESSION
5 s per key, COUNT + SUM, N rows over 1 000 keys), ``--data spark-c`` its
scenario c (the same + ``TRIGGER COUNT(100) EVICT COUNT(10)``); ``--data nexmark``
profiles Nexmark q11 (SESSION 10 s per bidder, COUNT; N events) from
``bench/nexmark.py``. Stages, each timed separately on the same DataFrame
and forced with the ``noop`` sink (every stage recomputes the ones before
it, so the table gives each stage's time and its increment):

1. ``scan``: the source read alone;
2. ``replay``: :func:`wql.spark.replay.replay` (its statistics job, then the
   replayed rows: replay order, ``watermark_before``);
3. ``shuffle``: the operator's input as the batch host builds it (key and
   value expressions, repartition by key, sort by replay position);
4. ``operator``: the whole ``apply()`` (all of the above + ``mapInArrow`` +
   the cached output);

then the staged partitions are collected to this process and the partition
task that ``mapInArrow`` runs is timed per partition without a profiler (CPU
seconds of the process, best of ``--repeat``) and then profiled under
``cProfile``: the table splits its time into Arrow -> Python conversion
(keys and columns), the operator (``process_batch``/``end_of_input``), and
Python -> Arrow (``_emit``), and the top functions by own time follow.
``--no-stages`` skips the Spark stage timings (the task alone).
"""

from __future__ import annotations

import argparse
import cProfile
import io
import os
import pstats
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

import nexmark  # noqa: E402
import spark as spark_bench  # noqa: E402
from pyspark.sql import functions as F  # noqa: E402

import wql  # noqa: E402
from wql.compiler.backends.operator import build_operator  # noqa: E402
from wql.spark import batch as B  # noqa: E402
from wql.spark import replay as R  # noqa: E402
from wql.spark.session import default_session  # noqa: E402


def timed(label: str, run: Callable[[], Any], repeat: int) -> float:
    runs = []
    for _ in range(repeat):
        started = time.perf_counter()
        run()
        runs.append(time.perf_counter() - started)
    best = min(runs)
    print(f"  {label}: " + ", ".join(f"{s:.2f}" for s in runs), file=sys.stderr)
    return best


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", choices=("spark", "spark-c", "nexmark"), default="spark")
    ap.add_argument("--rows", type=int, default=1_000_000)
    ap.add_argument("--repeat", type=int, default=2)
    ap.add_argument("--top", type=int, default=15)
    ap.add_argument("--no-stages", action="store_true", help="time the partition task only")
    ap.add_argument(
        "--batch-rows", type=int, default=10_000, help="Arrow batch size (Spark's default)"
    )
    args = ap.parse_args(argv)

    spark = default_session(app_name="wql-profile")
    noop = nexmark.noop
    with tempfile.TemporaryDirectory(prefix="wql-profile-") as tmp:
        if args.data in ("spark", "spark-c"):
            spark_bench.generate(Path(tmp) / "events", args.rows, 1000)
            df = spark.read.parquet(str(Path(tmp) / "events"))
            text = spark_bench.SESSION_Q if args.data == "spark" else spark_bench.TRIGGERED_Q
            compiled = wql.compile(text, engine="operator")
            source = "events"
        else:
            nexmark.generate(Path(tmp), args.rows, 10_000)
            df = spark.read.parquet(str(Path(tmp) / "bid"))
            compiled = wql.compile(nexmark.SOURCE + nexmark.WQL["q11"], engine="operator")
            source = "bid"
        query = compiled._bound({source: df}).queries[0]
        op = build_operator(query)
        spec = B.replay_spec(query, op)

        def staged_df() -> Any:
            replayed = R.replay(df, spec)
            staged, key_cols = B.stage(query, op, replayed)
            parts = B.operator_partitions(spark)
            return staged.repartition(parts, *key_cols).sortWithinPartitions(R.SEQ), replayed

        def full() -> None:
            results = compiled.apply(spark, **{source: df})
            noop(results.df)
            results.release()

        stages = None
        if not args.no_stages:
            noop(df)  # warm-up
            full()
            print("timing stages (best of runs)...", file=sys.stderr)
            t_scan = timed("scan", lambda: noop(df), args.repeat)
            t_replay = timed("replay", lambda: noop(R.replay(df, spec).df), args.repeat)
            t_shuffle = timed("shuffle", lambda: noop(staged_df()[0]), args.repeat)
            t_full = timed("operator", full, args.repeat)
            stages = (t_scan, t_replay, t_shuffle, t_full)

        # the partition task in this process, per partition, under cProfile
        staged, replayed = staged_df()
        table = staged.withColumn("__pid", F.spark_partition_id()).toArrow()
        task_factory = B.partition_task(query, op, spec, replayed)
        pids = table.column("__pid").to_numpy()
        parts = [table.filter(pids == pid).drop(["__pid"]) for pid in sorted(set(pids.tolist()))]

        def run_task(profile: cProfile.Profile | None = None) -> int:
            out_rows = 0
            for part in parts:
                batches = part.to_batches(max_chunksize=args.batch_rows)
                if profile is not None:
                    profile.enable()
                for rb in task_factory(iter(batches)):
                    out_rows += rb.num_rows
                if profile is not None:
                    profile.disable()
            return out_rows

        plain_cpu = []
        for _ in range(args.repeat):
            cpu0 = time.process_time()
            run_task()
            plain_cpu.append(time.process_time() - cpu0)
        profile = cProfile.Profile()
        cpu0 = time.process_time()
        wall0 = time.perf_counter()
        out_rows = run_task(profile)
        wall = time.perf_counter() - wall0
        cpu = time.process_time() - cpu0

    stats = pstats.Stats(profile)
    cum = {(f[0].rsplit("/", 1)[-1], f[2]): v[3] for f, v in stats.stats.items()}  # type: ignore[attr-defined]

    def share(file: str, fn: str) -> float:
        return cum.get((file, fn), 0.0)

    keys = share("batch.py", "_keys") + share("layout.py", "runtime_column")
    emit = share("batch.py", "_emit")
    operator = share("operator.py", "process_batch") + share("operator.py", "end_of_input")
    rows = table.num_rows
    print()
    print(
        f"{args.data}: {rows:,} replayed rows, {len(set(pids.tolist()))} operator partitions, "
        f"{os.cpu_count()} cores, load average {os.getloadavg()[0]:.2f}"
    )
    print()
    if stages is not None:
        t_scan, t_replay, t_shuffle, t_full = stages
        print("| stage | best s | increment s |")
        print("|---|---:|---:|")
        print(f"| scan | {t_scan:.2f} | {t_scan:.2f} |")
        print(f"| + replay | {t_replay:.2f} | {t_replay - t_scan:.2f} |")
        stage = "| + key/value expressions, repartition, sort"
        print(f"{stage} | {t_shuffle:.2f} | {t_shuffle - t_replay:.2f} |")
        stage = "| + mapInArrow operator, cached output (= apply)"
        print(f"{stage} | {t_full:.2f} | {t_full - t_shuffle:.2f} |")
        print()
    print(
        f"partition task in-process without a profiler: CPU {min(plain_cpu):.2f} s "
        f"(best of {args.repeat}), {rows / min(plain_cpu):,.0f} rows/s"
    )
    print(
        f"partition task in-process (cProfile on, so inflated): wall {wall:.2f} s, "
        f"CPU {cpu:.2f} s, {out_rows:,} output rows"
    )
    print()
    print("| part of the task | cumulative s (profiled) |")
    print("|---|---:|")
    print(f"| Arrow -> Python (keys, value columns) | {keys:.2f} |")
    print(f"| operator (process_batch + end_of_input) | {operator:.2f} |")
    print(f"| Python -> Arrow (_emit: drain, build batches) | {emit:.2f} |")
    print()
    out = io.StringIO()
    pstats.Stats(profile, stream=out).sort_stats("tottime").print_stats(args.top)
    print(out.getvalue())
    spark.stop()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
