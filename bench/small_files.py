"""Small inputs: the fixed cost per query of ``wql run``, once Spark is up.

    .venv/bin/python bench/small_files.py [--files F] [--rows N] [--warmup W]

F (default 8) small CSV files of N rows (default 60; 3 keys, event times a
few seconds apart, some out of order and late), each with its own ``.wql``
file holding one operator query (TUMBLE 10 s + ALLOWED LATENESS +
``LATE DATA TO``: results and a late output) — what ``wql run *.wql
--output DIR`` runs. One local session (``default_session``, ``local[*]``,
Spark's default of 200 shuffle partitions, as ``wql run`` has it); after W
warm-up files (default 2, not counted), each file is timed from
``compile_file`` to both outputs written as CSV, split into phases:

* ``apply``: ``Compiled.apply()`` — the replay statistics and the operator
  stage (its output cached);
* ``write``: writing the result and the late output from that cache;
* ``counters``: ``Results.counters``, what ``wql run`` prints after the
  writes (``rows_out`` and the source's malformed rows);

``total`` is ``apply`` + ``write`` (the figure of the earlier runs in
docs/benchmarks.md), ``run`` adds ``counters``: what ``wql run`` pays.
``native``, the baseline, right after each file in the same session: a
trivial native query of the same file (the typed read, two CSV outputs of
its rows), the floor of any query with two outputs; ``RATIO``
is ``run`` over it. It
prints the median and the best per-file time of each phase, the CPU seconds
of the process tree per file (steadier than wall time on a loaded machine)
and the number of Spark jobs and tasks per file (from the status tracker, one job group per
file, the counters' jobs included).
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from nexmark import Sampler  # noqa: E402

QUERY = """CREATE SOURCE readings (
    device STRING, temp DOUBLE, ts TIMESTAMP, seq BIGINT,
    WATERMARK FOR ts AS ts - INTERVAL '2' SECOND
) WITH (format = 'csv', path = '{csv}', header = 'true', arrival_order = 'seq');

CREATE VIEW per_window AS
SELECT device, window_start, window_end, pane_index, pane_timing,
       COUNT(*) AS readings, MAX(temp) AS max_temp
FROM readings
GROUP BY device, TUMBLE(ts, INTERVAL '10' SECOND)
ALLOWED LATENESS INTERVAL '5' SECOND
LATE DATA TO late_readings;
"""


def write_inputs(folder: Path, files: int, rows: int) -> list[Path]:
    rnd = random.Random(1)
    paths = []
    for f in range(files):
        csv_path = folder / f"readings{f}.csv"
        lines = ["device,temp,ts,seq"]
        t = 0
        for i in range(rows):
            t += rnd.choice((0, 1, 2, 3))
            back = rnd.choice((0, 0, 0, 0, 4, 15))
            s = max(0, t - back)
            lines.append(
                f"d{rnd.randint(1, 3)},{rnd.randint(10, 30)}.0,"
                f"2024-05-01 12:{s // 60:02d}:{s % 60:02d},{i}"
            )
        csv_path.write_text("\n".join(lines) + "\n")
        wql_path = folder / f"q{f}.wql"
        wql_path.write_text(QUERY.format(csv=csv_path.name))
        paths.append(wql_path)
    return paths


def native_floor(spark: object, csv: Path, out: str) -> None:
    """The floor: a trivial native query of the same file in the same session, what any
    query with two outputs pays (the typed read, two CSV writes)."""
    reader = spark.read.option("header", "true")  # type: ignore[attr-defined]
    df = reader.schema("device STRING, temp DOUBLE, ts TIMESTAMP, seq BIGINT").csv(str(csv))
    df.where("temp > 20").write.mode("overwrite").option("header", "true").csv(f"{out}/a")
    df.where("temp <= 20").write.mode("overwrite").option("header", "true").csv(f"{out}/b")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--files", type=int, default=8)
    parser.add_argument("--rows", type=int, default=60)
    parser.add_argument("--warmup", type=int, default=2)
    args = parser.parse_args()

    import wql
    from wql.spark.layout import write_output
    from wql.spark.session import default_session

    spark = default_session(None, "bench small files", quiet=True)
    sc = spark.sparkContext
    tracker = sc.statusTracker()
    phases: dict[str, list[float]] = {
        "apply": [],
        "write": [],
        "counters": [],
        "total": [],
        "run": [],
        "native": [],
    }
    cpu: list[float] = []
    native_cpu: list[float] = []
    jobs: list[int] = []
    tasks: list[int] = []
    with tempfile.TemporaryDirectory() as tmp:
        paths = write_inputs(Path(tmp), args.files + args.warmup, args.rows)
        for n, path in enumerate(paths):
            group = f"file{n}"
            sc.setJobGroup(group, group)
            # CPU of the process tree at the start and the end only (no sampling thread)
            with Sampler(interval=3600) as sampler:
                t0 = time.perf_counter()
                results = wql.compile_file(path).apply(spark)
                t1 = time.perf_counter()
                for name in results:
                    write_output(results[name], f"{tmp}/out{n}/{name}", "csv")
                t2 = time.perf_counter()
                counters = results.counters
                t3 = time.perf_counter()
                results.release()
            assert counters["rows_in"] == args.rows and counters["engine"] == "operator"
            if n < args.warmup:
                continue
            phases["apply"].append(t1 - t0)
            phases["write"].append(t2 - t1)
            phases["counters"].append(t3 - t2)
            phases["total"].append(t2 - t0)
            phases["run"].append(t3 - t0)
            cpu.append(sampler.cpu)
            sc.setJobGroup(f"native{n}", f"native{n}")  # not counted with the file's jobs
            with Sampler(interval=3600) as sampler:
                t0 = time.perf_counter()
                native_floor(spark, path.parent / f"readings{n}.csv", f"{tmp}/native{n}")
                phases["native"].append(time.perf_counter() - t0)
            native_cpu.append(sampler.cpu)
            ids = tracker.getJobIdsForGroup(group)
            jobs.append(len(ids))
            stage_ids = [s for j in ids for s in (tracker.getJobInfo(j).stageIds or [])]
            tasks.append(
                sum(
                    info.numTasks
                    for info in (tracker.getStageInfo(s) for s in stage_ids)
                    if info is not None and info.numCompletedTasks > 0
                )
            )
    print(
        f"{args.files} files x {args.rows} rows, one operator query each "
        f"(+{args.warmup} warm-up), {sc.master}, defaultParallelism {sc.defaultParallelism}"
    )
    print(f"{'phase':<8} {'median s':>9} {'best s':>8}")
    for name, values in phases.items():
        print(f"{name:<8} {statistics.median(values):>9.3f} {min(values):>8.3f}")
    run_cpu, floor_cpu = statistics.median(cpu), statistics.median(native_cpu)
    print(
        f"CPU s per file (driver, JVM, workers): median {run_cpu:.3f}, native floor {floor_cpu:.3f}"
    )
    wall = statistics.median(phases["run"]) / statistics.median(phases["native"])
    print(f"RATIO run/native wall {wall:.2f} cpu {run_cpu / floor_cpu:.2f}")
    print(
        f"Spark jobs per file: {statistics.median(jobs):g}; "
        f"tasks run per file: {statistics.median(tasks):g}"
    )
    spark.stop()


if __name__ == "__main__":
    main()
