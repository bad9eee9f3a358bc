"""CPU seconds of the batch host's stages, and of turning runtime output into Arrow.

One command (from the repository root)::

    .venv/bin/python bench/host_stages.py [--rows N] [--repeat R]
        [--query session|triggered|nexmark-q11|nexmark-q11-early-late]
        [--output-rows M] [--strategies S1,S2]

Part 1 runs ``bench/spark.py``'s scenario b (``--query session``: SESSION 5 s
per key, COUNT + SUM) or c (``--query triggered``: + ``TRIGGER COUNT(100)
EVICT COUNT(10)``) on its generated data (N rows, default 1 000 000, 1 000
keys), or ``bench/nexmark.py``'s q11 (``--query nexmark-q11``) or
q11_early_late (``--query nexmark-q11-early-late``) on its bids (N events,
replayed in arrival order), as cumulative stages, each forced with the ``noop`` sink (or a collect),
taking turns round after round, and prints per stage the median wall time
and the median CPU seconds of the whole process tree (driver, JVM, Python
workers; ``bench/nexmark.py``'s ``Sampler``):

1. ``replay``: :func:`wql.spark.replay.replay` (statistics job + replayed rows);
2. ``+ key exchange``: the operator's input as the batch host builds it
   (key and value expressions, repartition by key, sort by replay position);
3. ``+ mapInArrow (trivial)``: the same rows through ``mapInArrow`` to a
   task that only counts them (the Arrow transfer to the Python workers);
4. ``+ persist, 2 jobs``: that output persisted, collected, then read again
   (the shape of the host's cached output and its counters job);
5. ``run_operator``: the batch host's whole run with that replay strategy
   (operator, counters, the result forced);

stages 1-5 once per replay strategy of ``--strategies`` (default
``window,summary``: the single-task window against the summary replay,
whose tasks compute the watermarks; ``local``: no global clock, for plans
that do not depend on the watermark sequence), then ``apply (auto)``: the whole
``apply()`` with the strategy ``auto`` picks.

Part 2 times :meth:`wql.spark.layout.TaggedLayout.rows` (CPU seconds,
median of 7) on M (default 362 000, keyed HOP-60's output in
``docs/benchmarks.md``) synthetic result rows of one BIGINT key, the window
columns and BIGINT, BIGINT, DOUBLE aggregates: the cost of turning the
runtime's output rows into the tagged Arrow batch.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

import nexmark  # noqa: E402
import numpy as np  # noqa: E402
import pyarrow as pa  # noqa: E402
import spark as spark_bench  # noqa: E402
from nexmark import Sampler  # noqa: E402

import wql  # noqa: E402
from wql.compiler import types as T  # noqa: E402
from wql.compiler.backends.operator import build_operator  # noqa: E402
from wql.spark import batch as H  # noqa: E402
from wql.spark import layout as L  # noqa: E402
from wql.spark import replay as R  # noqa: E402
from wql.spark.session import default_session  # noqa: E402

QUERIES = {
    "session": spark_bench.SESSION_Q,
    "triggered": spark_bench.TRIGGERED_Q,
    # Nexmark's bids replayed in arrival order (the generator's event number)
    "nexmark-q11": nexmark.SOURCE + nexmark.WQL["q11"],
    "nexmark-q11-early-late": nexmark.SOURCE + nexmark.WQL["q11_early_late"],
}


def noop(df: Any) -> None:
    df.write.format("noop").mode("overwrite").save()


def _count(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    n = 0
    for batch in batches:
        n += batch.num_rows
    yield pa.RecordBatch.from_pydict({"n": [n]})


def stages(rows: int, repeat: int, name: str, strategies: list[str]) -> None:
    spark = default_session("local[*]", "wql-bench-host", {})
    text = QUERIES[name]
    with tempfile.TemporaryDirectory() as tmp:
        if name.startswith("nexmark"):
            nexmark.generate(Path(tmp), rows, 10_000)  # ``rows`` events, ~92 % bids
            df = spark.read.parquet(str(Path(tmp) / "bid"))
            source = "bid"
        else:
            spark_bench.generate(Path(tmp), rows, 1_000)
            df = spark.read.parquet(tmp)
            source = "events"
        compiled = wql.compile(text, engine="operator")
        query = compiled.program.queries[0]
        op = build_operator(query)
        spec = H.replay_spec(query, op)

        def staged(strategy: str) -> Any:
            replayed = R.replay(df, spec, strategy=strategy, in_task=True)
            s, keys = H.stage(query, op, replayed)
            # a local replay counts its rows in the operator's job: not known yet
            rows = replayed.rows_replayed if replayed.settled else None
            partitions = H.operator_partitions(spark, rows)
            return s.repartition(partitions, *keys).sortWithinPartitions(*replayed.order)

        def persisted(strategy: str) -> None:
            out = staged(strategy).mapInArrow(_count, "n long").persist()
            out.collect()
            noop(out)
            out.unpersist()

        def operator_run(strategy: str) -> None:
            run = H.run_operator(query, df, replay_strategy=strategy)
            noop(run.result)
            run.release()

        def applied() -> None:
            results = compiled.apply(spark, **{source: df})
            noop(results.df)
            results.release()

        runs: list[tuple[str, Callable[[], None]]] = []
        for strategy in strategies:
            runs += [
                (
                    f"{strategy}: replay",
                    lambda s=strategy: noop(R.replay(df, spec, strategy=s, in_task=True).df),
                ),
                (f"{strategy}: + key exchange", lambda s=strategy: noop(staged(s))),
                (
                    f"{strategy}: + mapInArrow (trivial)",
                    lambda s=strategy: staged(s).mapInArrow(_count, "n long").collect(),
                ),
                (f"{strategy}: + persist, 2 jobs", lambda s=strategy: persisted(s)),
                (f"{strategy}: run_operator", lambda s=strategy: operator_run(s)),
            ]
        runs.append(("apply (auto)", applied))
        for _, run in runs:  # warm-up
            run()
        timings: dict[str, list[tuple[float, float]]] = {name: [] for name, _ in runs}
        for _ in range(repeat):
            for name, run in runs:
                with Sampler() as sampler:
                    started = time.perf_counter()
                    run()
                    elapsed = time.perf_counter() - started
                timings[name].append((elapsed, sampler.cpu))
    print(f"| stage ({rows:,} rows, median of {repeat}) | wall s | CPU s |")
    print("|---|---:|---:|")
    for name, got in timings.items():
        wall = statistics.median(w for w, _ in got)
        cpu = statistics.median(c for _, c in got)
        print(f"| {name} | {wall:.2f} | {cpu:.2f} |")


def output_rows(n: int) -> None:
    rng = np.random.default_rng(0)
    starts = rng.integers(0, 10**9, n).tolist()
    counts = rng.integers(0, 100, n).tolist()
    sums = rng.integers(0, 10**6, n).tolist()
    avgs = rng.random(n).tolist()
    keys = rng.integers(0, 1_000, n).tolist()
    results = [
        ((k,), s, s + 60_000, s + 59_999, 0, "ON_TIME", s + 59_999, c, t, a)
        for k, s, c, t, a in zip(keys, starts, counts, sums, avgs, strict=True)
    ]
    aggregates = (T.BIGINT, T.BIGINT, T.DOUBLE)
    columns = [(L.KIND, T.STRING), (L.key_columns(1)[0], T.BIGINT)]
    columns += [(c, T.BIGINT) for c in (L.WINDOW_START, L.WINDOW_END, L.WINDOW_TIME)]
    columns += [(L.PANE_INDEX, T.BIGINT), (L.PANE_TIMING, T.STRING)]
    columns += [(f"__wql_a{i}", t) for i, t in enumerate(aggregates)]
    columns += [(L.LATE_EVENT_TIME, T.BIGINT), (L.COUNTERS, T.STRING)]
    schema = pa.schema([pa.field(c, L.arrow_type(t)) for c, t in columns])
    layout = L.TaggedLayout((T.BIGINT,), aggregates, (), schema)
    cpu = []
    for _ in range(7):
        started = time.process_time()
        layout.rows(results)
        cpu.append(time.process_time() - started)
    print(f"TaggedLayout.rows, {n:,} result rows: {statistics.median(cpu):.3f} s CPU (median of 7)")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--query", choices=sorted(QUERIES), default="session")
    parser.add_argument("--output-rows", type=int, default=362_000)
    parser.add_argument(
        "--strategies",
        default=f"{R.STRATEGY_WINDOW},{R.STRATEGY_SUMMARY}",
        help="replay strategies to compare, comma-separated (taking turns)",
    )
    args = parser.parse_args(argv)
    output_rows(args.output_rows)
    stages(args.rows, args.repeat, args.query, args.strategies.split(","))
    return 0


if __name__ == "__main__":
    sys.exit(main())
