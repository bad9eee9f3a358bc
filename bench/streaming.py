"""Streaming benchmark: SESSION + COUNT trigger on the operator engine vs Spark's session_window.

One command (from the repository root)::

    .venv/bin/python bench/streaming.py [--rows 100000] [--batches 3] [--keys 1000] [--warmup]
                                        [--where 'v < 0.5']
    .venv/bin/python bench/streaming.py --floor [--rounds 3]  # Spark's own per-key cost, no WQL
    .venv/bin/python bench/streaming.py --pairs 5  # both in turn, medians of 5 rounds (whole
    #   runs, and each run after its first micro-batch)
    .venv/bin/python bench/streaming.py --pairs 3 --key-buckets 16,32,128  # per bucket count
    .venv/bin/python bench/streaming.py --pairs 5 --key-chunks 0,8  # per chunk size
    .venv/bin/python bench/streaming.py --state-scale 10000,1000000 --key-chunk 0
    .venv/bin/python bench/streaming.py --packing 3  # rows packed vs unpacked, JVM vs Python
    .venv/bin/python bench/streaming.py --profile [--cprofile]  # the processor in-process
    .venv/bin/python bench/streaming.py --profile --profile-scale 100000  # ... beside N windows
    .venv/bin/python bench/streaming.py --state-scale 10000,1000000  # cost vs state size
    .venv/bin/python bench/streaming.py --parallel [--rounds 3]  # local[2] vs local[1]

Writes ``--batches`` parquet files of ``--rows`` rows each (``--keys`` keys,
event time rising across files, 1 s apart per key on average), then runs in
the same Spark session (local[2], 2 shuffle partitions, RocksDB state store):

* **wql**: ``SESSION(ts, 30 s)`` + ``TRIGGER COUNT(100)`` + COUNT/SUM on the
  operator engine (``transformWithStateInPandas``), the tagged stream to a
  ``noop`` sink; with ``--where``, the query and the baseline filter their rows
  (the wql stream counts the rows ``WHERE`` rejects, as batch does);
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

``--state-scale N1,N2,...``: instead, per ``N``, the wql query alone over a
first micro-batch that opens ``N`` sessions (``N`` keys, one row each) and
then ``--scale-batches`` micro-batches (6) of ``--scale-rows`` rows (10 000)
on as many keys among them, drawn afresh for each, no window due: the median
time of those micro-batches against the state they run beside (a micro-batch
should cost what its keys cost, not the state's size). The same for a keyed
two-stage pipeline and a keyed window join over the same files
(``SCALE_WORKLOADS``; ``--scale-workloads`` picks some).
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

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
SELECT k, window_start, window_end, COUNT(*) AS n, SUM(v) AS total FROM s{where}
GROUP BY k, SESSION(ts, INTERVAL '30' SECOND) TRIGGER COUNT(100);
"""


SCALE_VIEW = """
CREATE SOURCE s (k STRING, v DOUBLE, ts TIMESTAMP,
    WATERMARK FOR ts AS ts - INTERVAL '5' SECOND)
WITH (format = 'parquet', path = '{path}', maxFilesPerTrigger = '1');
CREATE VIEW per_k AS
SELECT k, window_start, window_end, window_time, COUNT(*) AS n, SUM(v) AS total FROM s
GROUP BY k, TUMBLE(ts, INTERVAL '60' SECOND);
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


#: The most micro-batches ``--scale-batches`` may ask for: the last one's rows stay
#: inside the sessions' 30 s gap and the pipeline's and join's first 60 s window.
MAX_SCALE_BATCHES = 20


def make_scale_data(folder: Path, open_windows: int, rows: int, batches: int = 2) -> None:
    """``open_windows`` keys with one row each (one open session per key), then
    ``batches`` files of ``rows`` rows on ``rows`` distinct keys among them (drawn
    afresh for each file), 1 s, 2 s, ... later (inside the sessions' 30 s gap: nothing
    fires, no state ends)."""
    if not 1 <= batches <= MAX_SCALE_BATCHES:
        raise SystemExit(f"--scale-batches must be 1 to {MAX_SCALE_BATCHES}, not {batches}")
    rng = np.random.default_rng(11)
    folder.mkdir(parents=True)
    keys = np.arange(open_windows)
    files = [(keys, 0)]
    for b in range(1, batches + 1):
        files.append((rng.choice(open_windows, size=min(rows, open_windows), replace=False), b))
    for b, (ks, second) in enumerate(files):
        ts = BASE + second * 1000 + rng.integers(0, 1000, len(ks))
        table = pa.table(
            {
                "k": pa.array([f"k{i}" for i in ks]),
                "v": pa.array(rng.random(len(ks))),
                "ts": pa.array(ts.astype("datetime64[ms]")).cast(pa.timestamp("us", tz="UTC")),
            }
        )
        path = folder / f"b{b:03d}.parquet"
        pq.write_table(table, path)
        os.utime(path, (1_000_000 + b, 1_000_000 + b))


#: ``--state-scale``'s workloads: the query (as the single query's QUERY) and the name
#: of the one it streams. The pipeline and the join are partitioned by ``k``
#: (docs/streaming.md, "Partitioned pipelines", "Partitioned window joins"); the first
#: micro-batch opens one 60 s window per key in their first stage (the join: in the view
#: and in the window table's buffer), which the next two leave open.
SCALE_WORKLOADS = {
    "single": (QUERY, "query_1"),
    "pipeline": (
        SCALE_VIEW
        + """
CREATE VIEW rolled AS
SELECT k, window_start, SUM(n) AS n, SUM(total) AS total FROM per_k
GROUP BY k, TUMBLE(window_time, INTERVAL '120' SECOND);
""",
        "rolled",
    ),
    "join": (
        SCALE_VIEW
        + """
CREATE VIEW joined AS
SELECT a.k, a.v, a.window_start, c.n
FROM TABLE(TUMBLE(TABLE s, DESCRIPTOR(ts), INTERVAL '60' SECOND)) AS a
JOIN per_k AS c ON a.k = c.k AND a.window_start = c.window_start
    AND a.window_end = c.window_end;
""",
        "joined",
    ),
}


def run_state_scale(
    spark, work: Path, sizes: list[int], rows: int, workloads: list[str], batches: int = 2
) -> None:
    """Each workload's ``batches`` micro-batches of ``rows`` rows beside ``sizes`` open
    windows; the ratio is of their medians."""
    import statistics

    import wql
    from wql.spark.stream_sinks import read_stream_source

    for n in sizes:
        make_scale_data(work / f"scale_{n}", n, rows, batches)

    def run(workload: str, n: int, ck: Path) -> list[float]:
        text, name = SCALE_WORKLOADS[workload]
        compiled = wql.compile(text.format(path=work / f"scale_{n}", where=""), streaming=True)
        if workload != "single":
            plan = compiled.program.query(name).engine.stream
            assert plan is not None and plan.partition_text, f"{workload}: one task"
        source = read_stream_source(spark, compiled.program.source("s"), None)
        tagged = compiled.only(name).apply(spark, s=source).queries[0].run.tagged
        return [p["durationMs"]["triggerExecution"] / 1000 for p in run_stream(tagged, ck)]

    # unmeasured: the JVM's JIT and Spark's Python workers warm for the first size too
    for workload in workloads:
        run(workload, sizes[0], work / f"ck_warm_{workload}")
    for workload in workloads:
        print(f"{workload}:")
        print()
        print("| open windows | build batch (s) | micro-batches of rows (s) | median (s) |")
        print("|---|---|---|---|")
        medians = []
        for n in sizes:
            secs = run(workload, n, work / f"ck_{workload}_{n}")
            medians.append(statistics.median(secs[1:]))
            shown = ", ".join(f"{x:.2f}" for x in secs[1:])
            print(f"| {n:,} | {secs[0]:.1f} | {shown} | {medians[-1]:.2f} |")
        print()
        print(
            f"{workload}: micro-batch of {rows:,} rows, {sizes[-1]:,} vs {sizes[0]:,} open "
            f"windows: ratio of medians {medians[-1] / medians[0]:.2f}x (target <= 1.5x)"
        )
        print()


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
    from wql.runtime.window_operator import WindowOperator

    q = compile_source(QUERY.format(path=folder, where=""), engine="operator").queries[0]
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


#: ``--floor`` processors: what ``transformWithStateInPandas`` costs per key without WQL
FLOOR_WORK = {
    "rows": "read the key's rows, nothing else",
    "state": "+ ValueState get and update (500 bytes)",
    "timer": "+ move one Spark timer (delete the old, register the new)",
    "bucket": "read a key bucket's rows (the default bucket count), nothing else",
    "packed": "read a key bucket's packed rows (default bucket count, pack_buckets), nothing else",
    "unpacked": "+ unpack them to the staged frame (unpack_buckets)",
    "inline": "+ the bucket's keys' state in one ValueState (get, update: 500 bytes a key), "
    "one Spark timer moved",
    "declared": "inline, and two more state variables declared (wql's key map and timer "
    "index MapStates, unused): what a task pays to declare them",
    "mapped": "packed rows, unpacked; each key's state in a MapState (the map read whole "
    "once a call, an update of 500 bytes per key: wql's state requests), one Spark "
    "timer moved",
}

#: the floors whose rows arrive packed per key bucket
PACKED_FLOORS = ("packed", "unpacked", "inline", "declared", "mapped")


def floor_processor(work: str):
    """A processor that does ``work`` (:data:`FLOOR_WORK`) per key and outputs nothing."""
    from pyspark.sql.streaming.stateful_processor import StatefulProcessor

    from wql.spark.streaming import DUE_NAME, KEY_SCHEMA, KEYS_NAME, unpack_buckets

    class Floor(StatefulProcessor):
        def init(self, handle) -> None:
            self.handle = handle
            self.state = handle.getValueState("s", "blob BINARY, timer LONG")
            if work in ("declared", "mapped"):
                self.keys = handle.getMapState(KEYS_NAME, "key BINARY", KEY_SCHEMA)
                handle.getMapState(DUE_NAME, "time LONG", "keys ARRAY<BINARY>")

        def handleInputRows(self, key, rows, timerValues):  # noqa: N802 - Spark's API
            frames = list(rows)
            if work in ("unpacked", "inline", "declared", "mapped"):
                frames = [unpack_buckets(frames, "UTC")]
            # Spark names the columns by position: the event time is the int column
            # with the largest values, the keys the string column
            top = max(int(c.max()) for f in frames for _, c in f.items() if c.dtype.kind == "i")
            names = {k for f in frames for k in f.select_dtypes(object).iloc[:, 0]}
            keys = len(names)
            if work == "mapped":
                # wql's requests: the bucket's map read whole, then an update per key
                dict(self.keys.iterator())
                for k in names:
                    self.keys.updateValue((str(k).encode(),), (b"x" * 500, top, top, top))
            if work not in ("rows", "bucket", "packed", "unpacked", "mapped"):  # 500 bytes a key
                saved = self.state.get()
                self.state.update((b"x" * (500 * keys), top + 30_000))
                if work != "state":
                    if saved is not None:
                        self.handle.deleteTimer(int(saved[1]))
                    self.handle.registerTimer(top + 30_000)
            elif work == "mapped":
                timer = self.state.get()
                self.state.update((b"", top + 30_000))
                if timer is not None:
                    self.handle.deleteTimer(int(timer[1]))
                self.handle.registerTimer(top + 30_000)
            yield from ()

        def close(self) -> None:
            pass

    return Floor()


def run_floor(
    spark, data: Path, work: Path, only: list[str] | None = None, rounds: int = 1
) -> None:
    """Spark's own per-key cost: the :data:`FLOOR_WORK` processors (``only``: those
    named) and Spark's session window (the baseline) on the bench's data, ``rounds``
    times in turn after an unmeasured warm-up of each; with more than one round, the
    median CPU of each and its ratio to the baseline's."""
    import statistics

    from pyspark.sql import functions as F

    from wql.spark.streaming import _BUCKET, PACKED_SCHEMA, bucket_column, pack_buckets

    source = (
        spark.readStream.schema("k STRING, v DOUBLE, ts TIMESTAMP")
        .option("maxFilesPerTrigger", 1)
        .parquet(str(data))
    )
    staged = source.withWatermark("ts", "5 seconds").select(
        "k", "v", F.unix_millis("ts").alias("t")
    )
    baseline = "Spark's session_window (the baseline)"

    def query(name: str):
        if name == "native":
            return (
                source.withWatermark("ts", "5 seconds")
                .groupBy("k", F.session_window("ts", "30 seconds"))
                .agg(F.count("*").alias("n"), F.sum("v").alias("total"))
            )
        bucketed = staged.withColumn(_BUCKET, bucket_column(["k"]))
        if name == "bucket":
            grouped = bucketed.groupBy(_BUCKET)
        elif name in PACKED_FLOORS:
            grouped = bucketed.mapInArrow(pack_buckets, PACKED_SCHEMA).groupBy(_BUCKET)
        else:
            grouped = staged.groupBy("k")
        return grouped.transformWithStateInPandas(
            statefulProcessor=floor_processor(name),
            outputStructType="k STRING",
            outputMode="Append",
            timeMode="EventTime",
        )

    floors = list(FLOOR_WORK) if only is None else only
    names = [*floors, "native"]
    print("| round | processor | micro-batches (s) | after the first (s) | CPU s |")
    print("|---|---|---|---|---|")
    spent_by: dict[str, list[float]] = {name: [] for name in names}
    # round 0 pays the JVM's and the Python workers' warm-up of each: unmeasured
    for r in range(rounds + 1):
        for name in names:
            cpu = tree_cpu()
            progress = run_stream(query(name), work / f"ck_floor_{name}_{r}")
            spent = tree_cpu() - cpu
            if r == 0:
                continue
            spent_by[name].append(spent)
            what = baseline if name == "native" else FLOOR_WORK[name]
            secs = [p["durationMs"]["triggerExecution"] / 1000 for p in progress]
            shown = ", ".join(f"{x:.1f}" for x in secs)
            print(f"| {r} | {what} | {shown} | {sum(secs[1:]):.1f} | {spent:.1f} |")
    if rounds > 1:
        base = statistics.median(spent_by["native"])
        print()
        print(f"CPU seconds, medians of {rounds} rounds (ratio to the baseline's {base:.2f}):")
        for name in floors:
            mid = statistics.median(spent_by[name])
            print(f"  {mid:.2f} ({mid / base:.2f}x)  {FLOOR_WORK[name]}")


def split_cpu() -> dict[str, float]:
    """CPU seconds so far of this process's descendants: the JVM's and the Python workers'."""
    hz = os.sysconf("SC_CLK_TCK")
    children: dict[int, list[int]] = {}
    times: dict[int, int] = {}
    names: dict[int, str] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                raw = f.read()
        except OSError:
            continue
        head, tail = raw.rsplit(")", 1)
        fields = tail.split()
        pid = int(entry)
        children.setdefault(int(fields[1]), []).append(pid)
        times[pid] = sum(int(x) for x in fields[11:15])
        names[pid] = head.split("(", 1)[1]
    out = {"jvm": 0.0, "python": 0.0}
    todo = list(children.get(os.getpid(), ()))
    while todo:
        pid = todo.pop()
        out["jvm" if "java" in names.get(pid, "") else "python"] += times.get(pid, 0) / hz
        todo.extend(children.get(pid, ()))
    return out


def run_packing(spark, compiled, source, work: Path, reps: int) -> None:
    """Spark's session window, the wql query with its bucket's rows unpacked (one Spark
    row each, as before :func:`wql.spark.streaming.pack_buckets`) and as it runs (packed),
    in turn ``reps`` times; the first round warms the JVM and the workers up."""
    from pyspark.sql import functions as F

    from wql.spark import layout as L
    from wql.spark.streaming import (
        _BUCKET,
        BucketProcessor,
        bucket_column,
        processor_layout,
        stream_input,
    )

    def unpacked():
        run = compiled.apply(spark, s=source).queries[0].run
        staged, key_cols, mode, *_ = stream_input(
            run.query, run.operator, source, None, flag_where=True
        )
        schema, _ = L.tagged_layout(run.query, run.operator)
        return (
            staged.select("*", bucket_column(key_cols))
            .groupBy(_BUCKET)
            .transformWithStateInPandas(
                statefulProcessor=BucketProcessor(processor_layout(run.query, run.operator, mode)),
                outputStructType=schema,
                outputMode="Append",
                timeMode=mode,
            )
        )

    plans = {
        "Spark session_window": lambda: (
            source.withWatermark("ts", "5 seconds")
            .groupBy("k", F.session_window("ts", "30 seconds"))
            .agg(F.count("*").alias("n"), F.sum("v").alias("total"))
        ),
        "wql, rows unpacked": unpacked,
        "wql, rows packed": lambda: compiled.apply(spark, s=source).queries[0].run.tagged,
    }
    print("| round | query | CPU s | JVM | Python workers | ratio to Spark | load |")
    print("|---|---|---|---|---|---|---|")
    for r in range(reps):
        native = None
        for i, (name, plan) in enumerate(plans.items()):
            before = split_cpu()
            run_stream(plan(), work / f"ck_packing_{r}_{i}")
            after = split_cpu()
            jvm, py = (after[c] - before[c] for c in ("jvm", "python"))
            native = jvm + py if native is None else native
            shown = "warm-up" if r == 0 else str(r)
            print(
                f"| {shown} | {name} | {jvm + py:.1f} | {jvm:.1f} | {py:.1f} | "
                f"{(jvm + py) / native:.2f}x | {os.getloadavg()[0]:.0f} |"
            )


def first_batch_listener(marks: dict[str, float]) -> Any:
    """A streaming listener noting in ``marks`` (by query id) the process tree's CPU
    seconds when a query's first micro-batch with rows has ended: what the run spends
    after it is its steady part (the micro-batches a long-running stream repeats,
    without the query's start)."""
    from pyspark.sql.streaming import StreamingQueryListener

    class Listener(StreamingQueryListener):
        def onQueryStarted(self, event: Any) -> None:  # noqa: N802 - Spark's API
            pass

        def onQueryIdle(self, event: Any) -> None:  # noqa: N802
            pass

        def onQueryTerminated(self, event: Any) -> None:  # noqa: N802
            pass

        def onQueryProgress(self, event: Any) -> None:  # noqa: N802
            p = event.progress
            if p.numInputRows > 0 and str(p.id) not in marks:
                marks[str(p.id)] = tree_cpu()

    return Listener()


def run_pairs(spark, compiled, source, native, work: Path, rounds: int) -> None:
    """Both queries once unmeasured, then ``rounds`` times the wql query and Spark's
    session window in turn, each on a new checkpoint: CPU seconds of the process tree
    per run, and the ratio of the medians (the JVM's JIT keeps warming over the
    first rounds, and one run moves by tens of per cent on a shared machine). Also
    the steady part of each run: its CPU seconds after its first micro-batch (the
    query's start, its state's first writes and the first batch's JIT work left out),
    noted by a streaming listener (:func:`first_batch_listener`)."""
    import statistics

    marks: dict[str, float] = {}
    listener = first_batch_listener(marks)
    spark.streams.addListener(listener)

    def cpu_of(df, ck: Path) -> tuple[float, float]:
        before = tree_cpu()
        ids = set(marks)
        run_stream(df, ck)
        after = tree_cpu()
        new = [marks[i] for i in marks if i not in ids]
        return after - before, (after - new[0] if new else float("nan"))

    cpu_of(compiled.apply(spark, s=source).queries[0].run.tagged, work / "pair_warm_wql")
    cpu_of(native, work / "pair_warm_native")
    print(
        "| round | wql CPU s | Spark CPU s | ratio "
        "| wql after batch 1 | Spark after batch 1 | ratio | load |"
    )
    print("|---|---|---|---|---|---|---|---|")
    wqls, natives, wql_steady, native_steady = [], [], [], []
    for r in range(rounds):
        w, ws = cpu_of(compiled.apply(spark, s=source).queries[0].run.tagged, work / f"pair_w{r}")
        n, ns = cpu_of(native, work / f"pair_n{r}")
        wqls.append(w)
        natives.append(n)
        wql_steady.append(ws)
        native_steady.append(ns)
        print(
            f"| {r + 1} | {w:.1f} | {n:.1f} | {w / n:.2f}x | {ws:.1f} | {ns:.1f} | "
            f"{ws / ns:.2f}x | {os.getloadavg()[0]:.1f} |"
        )
    spark.streams.removeListener(listener)
    w, n = statistics.median(wqls), statistics.median(natives)
    ws, ns = statistics.median(wql_steady), statistics.median(native_steady)
    print()
    print(
        f"CPU seconds, medians of {rounds} rounds: wql {w:.1f}, Spark {n:.1f}, "
        f"ratio {w / n:.2f}x (target <= 2.0x)"
    )
    print(
        f"after the first micro-batch, medians: wql {ws:.1f}, Spark {ns:.1f}, ratio {ws / ns:.2f}x"
    )


def run_conf_values(
    spark,
    compiled,
    source,
    native,
    work: Path,
    rounds: int,
    values: list[int],
    conf: str,
    unit: str,
) -> None:
    """``--pairs`` over values of the session conf ``conf`` (key buckets, key chunks):
    after a warm-up of each, ``rounds`` times Spark's session window and the wql query
    at each value in turn; CPU seconds of the JVM and of the Python workers per run,
    and per value the ratio of the medians. ``unit`` names a value in the table."""
    import statistics

    def run(name: str, ck: Path) -> tuple[float, float]:
        if name == "Spark":
            df = native
        else:
            spark.conf.set(conf, name)
            df = compiled.apply(spark, s=source).queries[0].run.tagged
        before = split_cpu()
        run_stream(df, ck)
        after = split_cpu()
        return after["jvm"] - before["jvm"], after["python"] - before["python"]

    names = ["Spark", *[str(c) for c in values]]
    for name in names:
        run(name, work / f"conf_warm_{name}")
    print("| round | query | CPU s | JVM | Python workers | load |")
    print("|---|---|---|---|---|---|")
    spent: dict[str, list[tuple[float, float]]] = {name: [] for name in names}
    for r in range(rounds):
        for name in names:
            jvm, py = run(name, work / f"conf_{r}_{name}")
            spent[name].append((jvm, py))
            what = "Spark session_window" if name == "Spark" else f"wql, {name} {unit}"
            print(
                f"| {r + 1} | {what} | {jvm + py:.1f} | {jvm:.1f} | {py:.1f} | "
                f"{os.getloadavg()[0]:.1f} |"
            )
    spark.conf.unset(conf)
    base = statistics.median(j + p for j, p in spent["Spark"])
    print()
    print(f"CPU seconds, medians of {rounds} rounds: Spark {base:.1f}")
    for name in names[1:]:
        total = statistics.median(j + p for j, p in spent[name])
        jvm = statistics.median(j for j, _ in spent[name])
        py = statistics.median(p for _, p in spent[name])
        print(
            f"wql, {name} {unit}: {total:.1f} (JVM {jvm:.1f}, Python {py:.1f}), "
            f"ratio {total / base:.2f}x (target <= 2.0x)"
        )


class _Handle:
    """Spark's part for ``--profile``: per bucket a ValueState, MapStates and timers in
    dicts, each call counted by kind."""

    def __init__(self) -> None:
        self.key: tuple = ()
        self.values: dict = {}
        self.maps: dict = {}
        self.timers: dict = {}
        self.calls = {"value": 0, "map.get": 0, "map.write": 0, "map.read_all": 0, "timer": 0}

    def getValueState(self, name, schema):  # noqa: N802 - Spark's API
        return _Value(self, name)

    def getMapState(self, name, key_schema, value_schema):  # noqa: N802 - Spark's API
        return _Map(self, name)

    def registerTimer(self, t: int) -> None:  # noqa: N802
        self.calls["timer"] += 1
        self.timers.setdefault(self.key, set()).add(t)

    def deleteTimer(self, t: int) -> None:  # noqa: N802
        self.calls["timer"] += 1
        self.timers.get(self.key, set()).discard(t)


class _Value:
    def __init__(self, h: _Handle, name: str) -> None:
        self.h, self.name = h, name

    def get(self):
        self.h.calls["value"] += 1
        return self.h.values.get((self.name, self.h.key))

    def update(self, value) -> None:
        self.h.calls["value"] += 1
        self.h.values[(self.name, self.h.key)] = value

    def clear(self) -> None:
        self.h.calls["value"] += 1
        self.h.values.pop((self.name, self.h.key), None)


class _Map:
    def __init__(self, h: _Handle, name: str) -> None:
        self.h, self.name = h, name

    def _map(self) -> dict:
        return self.h.maps.setdefault((self.name, self.h.key), {})

    def getValue(self, key):  # noqa: N802 - Spark's API
        self.h.calls["map.get"] += 1
        return self._map().get(key)

    def updateValue(self, key, value) -> None:  # noqa: N802
        self.h.calls["map.write"] += 1
        self._map()[key] = value

    def removeKey(self, key) -> None:  # noqa: N802
        self.h.calls["map.write"] += 1
        self._map().pop(key, None)

    def iterator(self):
        self.h.calls["map.read_all"] += 1
        return iter(list(self._map().items()))


def run_profile(data: Path, *, cprofile: bool, chunk_keys: int | None = None) -> None:
    """The single query's processor (``BucketProcessor``) in this process on the bench's
    micro-batches, Spark's part in dicts, its buckets' keys in chunks of ``chunk_keys``
    (``KEY_CHUNK`` by default, as a stream's).

    Per micro-batch: ``handleInputRows`` per key bucket (``KEY_BUCKETS`` buckets by a
    CRC of the key: Spark's hash places keys elsewhere, the cost is alike) with its
    rows as the unpacked pandas frame Spark builds (positional columns: key, value,
    event time, the NaN bits, the bucket), then ``handleExpiredTimer`` per (bucket,
    timer) strictly below the watermark, in time order. Prints the CPU seconds, the
    state calls by kind and the frames handed to Spark per micro-batch, and with
    ``cprofile`` (which inflates the CPU seconds) cProfile's top entries.
    """
    import cProfile
    import pstats
    import zlib

    import pandas as pd
    from pyspark.sql.streaming.stateful_processor import ExpiredTimerInfo, TimerValues

    from wql.compiler import compile_source
    from wql.compiler.backends.operator import build_operator
    from wql.spark.streaming import (
        KEY_BUCKETS,
        KEY_CHUNK,
        BucketProcessor,
        processor_layout,
        time_mode,
    )

    query = compile_source(QUERY.format(path=data, where=""), engine="operator").queries[0]
    op = build_operator(query)
    layout = processor_layout(query, op, time_mode(op))
    assert layout.nans_at == 3, "the staged columns are key, value, event time, NaN bits"
    chunk = KEY_CHUNK if chunk_keys is None else chunk_keys
    proc = BucketProcessor(replace(layout, chunk_keys=chunk))
    handle = _Handle()
    proc.init(handle)  # type: ignore[arg-type]
    delay = query.source.event_time.delay_ms + 1
    batches = []
    for path in sorted(data.glob("*.parquet")):
        t = pq.read_table(path)
        ts = t.column("ts").cast(pa.int64()).to_numpy() // 1000
        keys = t.column("k").to_pylist()
        buckets = [zlib.crc32(k.encode()) % KEY_BUCKETS for k in keys]
        frame = pd.DataFrame(
            {"_0": keys, "_1": t.column("v"), "_2": ts, "_3": np.zeros(len(ts), np.int64)}
        )
        frame["_4"] = buckets
        groups = [(b, g.reset_index(drop=True)) for b, g in frame.groupby("_4")]
        batches.append((groups, ts.max()))
    profile = cProfile.Profile()
    top = None
    calls = " | ".join(handle.calls)
    print(f"| micro-batch | CPU s | {calls} | frames |")
    print("|---|---|" + "---|" * len(handle.calls) + "---|")
    for b, (groups, batch_top) in enumerate(batches):
        wm = 0 if top is None else max(0, top - delay)
        tv = TimerValues(-1, wm)
        before = dict(handle.calls)
        frames = 0
        cpu = time.process_time()
        if cprofile:
            profile.enable()
        for bucket, g in groups:
            handle.key = (bucket,)
            for _ in proc.handleInputRows((bucket,), iter([g]), tv):
                frames += 1
        due = sorted((t, key) for key, ts in handle.timers.items() for t in ts if t < wm)
        for t, key in due:
            if t not in handle.timers[key]:
                continue  # deleted by an earlier call of the micro-batch
            handle.key = key
            for _ in proc.handleExpiredTimer(key, tv, ExpiredTimerInfo(t)):
                frames += 1
            handle.timers[key].discard(t)  # Spark deletes a timer once it fired
        if cprofile:
            profile.disable()
        spent = time.process_time() - cpu
        calls = " | ".join(str(handle.calls[c] - before[c]) for c in handle.calls)
        print(f"| {b} | {spent:.2f} | {calls} | {frames} |")
        top = int(batch_top) if top is None else max(top, int(batch_top))
    if cprofile:
        print()
        pstats.Stats(profile).sort_stats("cumulative").print_stats(25)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=100_000)
    ap.add_argument("--batches", type=int, default=3)
    ap.add_argument("--keys", type=int, default=1000)
    ap.add_argument(
        "--floor",
        action="store_true",
        help="instead: Spark's per-key cost of transformWithStateInPandas without WQL",
    )
    ap.add_argument(
        "--packing",
        type=int,
        metavar="ROUNDS",
        help="instead: Spark's session window, wql with unpacked and with packed rows, in "
        "turn ROUNDS times (the first a warm-up): CPU of the JVM and of the Python workers",
    )
    ap.add_argument(
        "--floor-only",
        help="with --floor: only these processors (comma-separated names of FLOOR_WORK)",
    )
    ap.add_argument(
        "--profile",
        action="store_true",
        help="instead: the WQL processor in this process (Spark's part in dicts)",
    )
    ap.add_argument("--cprofile", action="store_true", help="with --profile: cProfile it")
    ap.add_argument(
        "--profile-scale",
        type=int,
        metavar="N",
        help="with --profile: on --state-scale's data instead (N open sessions, then "
        "two micro-batches of --scale-rows of their keys, one row each)",
    )
    ap.add_argument(
        "--where",
        default=None,
        help="a WHERE condition over k, v, ts for both queries, e.g. 'v < 0.5'",
    )
    ap.add_argument(
        "--state-scale",
        help="instead: micro-batches of --scale-rows rows beside N open windows, per N "
        "(comma-separated, e.g. 10000,1000000)",
    )
    ap.add_argument("--scale-rows", type=int, default=10_000)
    ap.add_argument(
        "--scale-batches",
        type=int,
        default=6,
        metavar="M",
        help="with --state-scale: M micro-batches after the build, each on --scale-rows "
        f"keys drawn afresh (1 to {MAX_SCALE_BATCHES}); the ratio is of their medians",
    )
    ap.add_argument(
        "--scale-workloads",
        default="single,pipeline,join",
        help="with --state-scale: which of single, pipeline, join (comma-separated)",
    )
    ap.add_argument(
        "--parallel",
        action="store_true",
        help="instead: a keyed join and a keyed pipeline, local[2] vs local[1] "
        "(bench/stream_scaling.py)",
    )
    ap.add_argument(
        "--rounds",
        type=int,
        default=3,
        help="with --parallel: measured runs per master (the ratio is of the medians); "
        "with --floor: rounds of the processors in turn (medians of their CPU)",
    )
    ap.add_argument(
        "--pairs",
        type=int,
        default=0,
        metavar="ROUNDS",
        help="instead: after a warm-up of both, ROUNDS runs of the wql query and Spark's "
        "session window in turn; CPU per run and the ratio of the medians",
    )
    ap.add_argument(
        "--key-chunks",
        metavar="N1,N2,...",
        help="with --pairs: the wql query at each of these key chunk sizes "
        "(spark.wql.stream.keyChunk; 0: one state entry per key)",
    )
    ap.add_argument(
        "--key-chunk",
        type=int,
        metavar="N",
        help="every wql stream of the run (e.g. with --state-scale), and --profile's "
        "processor, keeps N keys per state entry (spark.wql.stream.keyChunk; 0: one "
        "entry per key)",
    )
    ap.add_argument(
        "--key-buckets",
        default="",
        metavar="N1,N2,...",
        help="with --pairs: the wql query at each of these key bucket counts "
        "(spark.wql.stream.keyBuckets), JVM and Python CPU apart",
    )
    ap.add_argument(
        "--warmup",
        action="store_true",
        help="run both queries once before the measured runs (the first pays the JVM warm-up)",
    )
    args = ap.parse_args()
    if args.parallel:
        from bench.stream_scaling import run

        return run(args.rows, args.batches, args.keys, args.rounds)

    from pyspark.sql import functions as F

    import wql
    from wql.spark.session import default_session
    from wql.spark.stream_sinks import read_stream_source
    from wql.spark.streaming import KEY_BUCKETS_CONF, KEY_CHUNK_CONF

    work = Path(tempfile.mkdtemp(prefix="wql-bench-stream-"))
    try:
        data = work / "data"
        make_data(data, args.rows, args.batches, args.keys)
        if args.profile:
            if args.profile_scale:
                data = work / "scale"
                make_scale_data(data, args.profile_scale, args.scale_rows)
            run_profile(data, cprofile=args.cprofile, chunk_keys=args.key_chunk)
            return 0
        spark = default_session(
            "local[2]", "wql bench streaming", {"spark.sql.shuffle.partitions": "2"}
        )
        if args.key_chunk is not None:
            spark.conf.set(KEY_CHUNK_CONF, str(args.key_chunk))
        if args.floor:
            only = args.floor_only.split(",") if args.floor_only else None
            run_floor(spark, data, work, only, args.rounds)
            spark.stop()
            return 0
        if args.state_scale:
            sizes = [int(n) for n in args.state_scale.split(",")]
            workloads = args.scale_workloads.split(",")
            run_state_scale(spark, work, sizes, args.scale_rows, workloads, args.scale_batches)
            spark.stop()
            return 0
        where = f"\nWHERE {args.where}" if args.where else ""
        compiled = wql.compile(QUERY.format(path=data, where=where))
        source = read_stream_source(spark, compiled.program.source("s"), None)
        if args.packing:
            run_packing(spark, compiled, source, work, args.packing)
            spark.stop()
            return 0

        watermarked = source.withWatermark("ts", "5 seconds")
        if args.where:
            watermarked = watermarked.where(args.where)
        native = watermarked.groupBy("k", F.session_window("ts", "30 seconds")).agg(
            F.count("*").alias("n"), F.sum("v").alias("total")
        )
        sweep = (
            (args.key_buckets, KEY_BUCKETS_CONF, "buckets")
            if args.key_buckets
            else (args.key_chunks, KEY_CHUNK_CONF, "keys per chunk")
        )
        if args.pairs and sweep[0]:
            values = [int(n) for n in sweep[0].split(",")]
            run_conf_values(
                spark, compiled, source, native, work, args.pairs, values, sweep[1], sweep[2]
            )
            spark.stop()
            return 0
        if args.pairs:
            run_pairs(spark, compiled, source, native, work, args.pairs)
            spark.stop()
            return 0
        if args.warmup:
            # both queries once, unmeasured: the JVM's JIT and Spark's Python workers
            # are warm for both measured runs, not only for the second
            run_stream(compiled.apply(spark, s=source).queries[0].run.tagged, work / "w_wql")
            run_stream(native, work / "w_native")

        cpu, started = tree_cpu(), time.perf_counter()
        run = compiled.apply(spark, s=source).queries[0].run
        wql_progress = run_stream(run.tagged, work / "ck_wql")
        wql_total = time.perf_counter() - started
        wql_cpu = tree_cpu() - cpu

        cpu, started = tree_cpu(), time.perf_counter()
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
