"""Streaming sources and exactly-once file sinks: what ``wql run --stream`` runs.

::

    wql run FILE... --stream --checkpoint CK --output OUT
                    [--trigger available-now|interval=<duration>] [--format csv|json|parquet]

Sources: every ``CREATE SOURCE`` is read with ``spark.readStream`` from its
``path`` (a folder; new files are new data) with the declared schema
(Spark's streaming file source needs one) and every reader option of its
``WITH`` clause (e.g. ``maxFilesPerTrigger = '1'``).

Sinks, per query (``N`` its name, ``L`` its ``LATE DATA TO`` name), for
the engine the planner chose for a stream (``wql run --stream`` compiles
with ``streaming=True``; today every query is an operator query there,
docs/native.md "Streaming"):

* a **native** query is one streaming query: Spark's windowed aggregation in
  append mode -> file sink ``OUT/N`` (checkpoint ``CK/N/result``);
* an **operator** query is three streaming queries, so that the operator
  runs once and its two outputs come from the same micro-batches:

  1. source -> operator -> the tagged stream (results, late rows, drop
     counters) -> parquet file sink ``OUT/_wql_tagged/N``
     (checkpoint ``CK/N/operator``);
  2. that sink read as a stream (Spark's file source reads only the files
     its ``_spark_metadata`` log committed) -> results (HAVING + SELECT) ->
     ``OUT/N`` (checkpoint ``CK/N/result``);
  3. the same -> late rows -> ``OUT/L`` (checkpoint ``CK/N/late``).

Every sink is Spark's file sink: exactly once through its ``_spark_metadata``
log, so a run killed at any point and restarted with the same checkpoint
folder ends with each output equal to an uninterrupted run's. Read the
outputs with Spark (``spark.read.parquet(OUT/N)``), which honours that log;
a plain file listing may see files of an uncommitted attempt.

``available-now`` processes what is there and stops (stage 1 first, then
stages 2 and 3); ``interval=<duration>`` runs every stage continuously
(``5s``, ``500ms``, ``1m``, or Spark's ``'5 seconds'``) until interrupted.
Processing-time windows need ``interval=``: Spark's processing-time timers
keep an available-now query alive forever.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import re
import signal
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pyspark.sql import DataFrame

from wql.errors import WqlError, WqlSemanticError, WqlUnsupportedError
from wql.spark import layout as L
from wql.spark.sources import read_stream_source

__all__ = [
    "AVAILABLE_NOW",
    "StreamSinks",
    "parse_trigger",
    "read_output",
    "read_stream_source",
    "run_stream_command",
    "start_streams",
]

AVAILABLE_NOW = "available-now"
TAGGED_DIR = "_wql_tagged"
_UNITS = {"ms": "milliseconds", "s": "seconds", "m": "minutes", "h": "hours"}


def parse_trigger(text: str) -> str | None:
    """``None`` for ``available-now``, else a Spark ``processingTime`` string."""
    if text == AVAILABLE_NOW:
        return None
    kind, sep, value = text.partition("=")
    if kind != "interval" or not sep or not value.strip():
        raise WqlError(f"--trigger must be available-now or interval=<duration>, got {text!r}")
    value = value.strip()
    m = re.fullmatch(r"(\d+)\s*(ms|s|m|h)", value)
    if m:
        return f"{m.group(1)} {_UNITS[m.group(2)]}"
    if re.fullmatch(r"\d+\s+(milliseconds?|seconds?|minutes?|hours?)", value, flags=re.IGNORECASE):
        return value
    raise WqlError(f"--trigger interval: cannot read the duration {value!r} (try 5s or 500ms)")


# --------------------------------------------------------------------------- sinks


@dataclass
class StreamSinks:
    """The streaming queries of one run; :meth:`stop` stops them all."""

    stages: list[list[Any]] = field(default_factory=list)
    outputs: dict[str, Path] = field(default_factory=dict)
    tagged: dict[str, Path] = field(default_factory=dict)

    @property
    def queries(self) -> list[Any]:
        return [q for stage in self.stages for q in stage]

    def stop(self) -> None:
        for q in self.queries:
            # stopping is best effort on the way out
            with contextlib.suppress(Exception):
                q.stop()


def start_streams(
    results: Any,
    output_dir: str | Path,
    checkpoint_dir: str | Path,
    *,
    fmt: str = "parquet",
    trigger: str | None = None,
) -> StreamSinks:
    """Write every output of streaming ``results`` (:class:`wql.api.Results`) exactly once.

    ``trigger`` is ``None`` for available-now (this call then returns after
    every stage finished) or a Spark processing-time interval (the queries
    keep running; stop them with :meth:`StreamSinks.stop`).
    """
    out = Path(output_dir)
    ck = Path(checkpoint_dir)
    sinks = StreamSinks()
    first: list[tuple[Any, Any]] = []
    for r in results.queries:
        if not r.df.isStreaming:
            raise WqlSemanticError(
                f"query {r.name!r} reads a batch source; start_streams needs streaming results",
                hint="pass streaming DataFrames to apply() (spark.readStream...)",
            )
        if r._run is None:  # native: one streaming query
            first.append((r, None))
        else:
            if trigger is None and r._run.time_mode == "ProcessingTime":
                raise WqlUnsupportedError(
                    f"query {r.name!r} uses processing time: its Spark timers keep an "
                    "available-now stream alive forever",
                    r.plan.span,
                    hint="use --trigger interval=<duration>",
                )
            first.append((r, r._run))
    try:
        stage1 = []
        for r, run in first:
            if run is None:
                sinks.outputs[r.name] = out / r.name
                stage1.append(
                    _sink(r.df, out / r.name, ck / r.name / "result", fmt, trigger, f"{r.name}")
                )
            else:
                path = out / TAGGED_DIR / r.name
                sinks.tagged[r.name] = path
                stage1.append(
                    _sink(
                        run.tagged,
                        path,
                        ck / r.name / "operator",
                        "parquet",
                        trigger,
                        f"{r.name} operator",
                    )
                )
                # one operator query starting at a time: each start launches a Python
                # worker on the driver that Spark waits 10 s for; several at once on
                # a busy machine failed with "Python worker failed to connect back"
                _first_batch(stage1[-1])
        sinks.stages.append(stage1)
        if trigger is None:
            _await(stage1)
        stage2 = []
        for r, run in first:
            if run is None:
                continue
            spark = run.tagged.sparkSession
            # a continuous stage 2 may start before stage 1 made its folder
            if "://" not in str(sinks.tagged[r.name]):
                sinks.tagged[r.name].mkdir(parents=True, exist_ok=True)
            tagged = spark.readStream.schema(run.tagged.schema).parquet(str(sinks.tagged[r.name]))
            result = L.results(r.plan, run.operator, tagged)
            sinks.outputs[r.name] = out / r.name
            stage2.append(
                _sink(result, out / r.name, ck / r.name / "result", fmt, trigger, f"{r.name}")
            )
            if r.late_name is not None:
                late = L.late_rows(run.operator, tagged)
                sinks.outputs[r.late_name] = out / r.late_name
                stage2.append(
                    _sink(
                        late,
                        out / r.late_name,
                        ck / r.name / "late",
                        fmt,
                        trigger,
                        f"{r.late_name}",
                    )
                )
        sinks.stages.append(stage2)
        if trigger is None:
            _await(stage2)
    except BaseException:
        sinks.stop()
        raise
    return sinks


def _sink(
    df: DataFrame, path: Path, checkpoint: Path, fmt: str, trigger: str | None, name: str
) -> Any:
    writer = (
        L.writable(df, fmt)
        .writeStream.format(fmt)
        .outputMode("append")
        .option("path", str(path))
        .option("checkpointLocation", str(checkpoint))
        .queryName(f"wql {name}".replace(" ", "_"))
    )
    if fmt == "csv":
        writer = writer.option("header", "true")
    writer = (
        writer.trigger(availableNow=True)
        if trigger is None
        else writer.trigger(processingTime=trigger)
    )
    return writer.start()


def _first_batch(query: Any) -> None:
    """Wait until ``query`` finished its first micro-batch, stopped or failed."""
    while query.isActive and not query.recentProgress:
        time.sleep(0.1)


def _await(queries: list[Any]) -> None:
    for q in queries:
        q.awaitTermination()
        err = q.exception()
        if err is not None:
            raise WqlError(f"streaming query {q.name} failed: {_first_line(err)}")


# --------------------------------------------------------------------------- wql run --stream


def run_stream_command(
    args: argparse.Namespace, compiled: list[Any], stems: list[str], conf: dict[str, str]
) -> int:
    """``wql run --stream``: the hook :mod:`wql.commands.run` calls."""
    if not args.output or not args.checkpoint:
        raise WqlError("--stream needs --output DIR and --checkpoint DIR")
    trigger = parse_trigger(args.trigger)
    from wql.spark.session import default_session

    conf = dict(conf)
    # Stateful streaming runs one state store (and one Python worker) per shuffle
    # partition in every micro-batch; Spark's default of 200 makes a local stream
    # crawl (measured: 8 min vs 1 min for six tiny files). The number is fixed in
    # the checkpoint the first time a query runs.
    conf.setdefault("spark.sql.shuffle.partitions", str(max(2, os.cpu_count() or 2)))
    _progress("starting Spark" + (f" ({args.master})" if args.master else ""))
    verbose = getattr(args, "verbose", False)
    spark = default_session(args.master, "wql run --stream", conf, quiet=not verbose)
    if verbose:
        spark.sparkContext.setLogLevel("WARN")
    started = time.perf_counter()
    all_sinks: list[StreamSinks] = []
    try:
        for path, stem, c in zip(args.files, stems, compiled, strict=True):
            many = len(args.files) > 1
            out = Path(args.output) / stem if many else Path(args.output)
            ck = Path(args.checkpoint) / stem if many else Path(args.checkpoint)
            sources = {
                s.name: read_stream_source(spark, s, c.base_dir)
                for s in c.program.sources
                if s.declared
                and any(q.source.name.lower() == s.name.lower() for q in c.program.queries)
            }
            results = c.apply(spark, **sources)
            _progress(
                f"{path}: streaming {len(results.queries)} quer"
                f"{'y' if len(results.queries) == 1 else 'ies'} -> {out}"
            )
            try:
                sinks = start_streams(results, out, ck, fmt=args.format, trigger=trigger)
            except WqlError as e:
                raise e.with_source(c.text, c.filename) from None
            all_sinks.append(sinks)
            if trigger is None:
                for r in results.queries:
                    _summary(spark, path, r, sinks, args.format)
        if trigger is not None:
            _progress(f"running every {trigger}; Ctrl-C stops")
            if _wait_for_signal(spark):
                _progress("interrupted; stopping (the checkpoints resume the run)")
            for s in all_sinks:
                for q in s.queries:
                    if q.exception() is not None:
                        raise WqlError(
                            f"streaming query {q.name} failed: {_first_line(q.exception())}"
                        )
    except KeyboardInterrupt:
        _progress("interrupted; stopping (the checkpoints resume the run)")
    except WqlError:
        raise
    except Exception as e:  # noqa: BLE001 - Spark failures are reported, never a traceback
        raise WqlError(f"Spark failed while streaming: {_first_line(e)}") from None
    finally:
        for s in all_sinks:
            s.stop()
    _progress(f"done in {time.perf_counter() - started:.1f} s")
    return 0


def _wait_for_signal(spark: Any) -> bool:
    """Block until a stream ends (True) or SIGINT/SIGTERM arrives (False).

    The signals only set a flag: a KeyboardInterrupt raised inside a py4j
    call breaks the gateway connection, and then the queries cannot be stopped
    cleanly. Waiting in 1 s slices lets the loop see the flag.
    """
    stop = threading.Event()
    handlers = {}
    for sig in (signal.SIGINT, signal.SIGTERM):
        handlers[sig] = signal.signal(sig, lambda *_: stop.set())
    try:
        while not stop.is_set():
            if spark.streams.awaitAnyTermination(1):
                return False
        return True
    finally:
        for sig, handler in handlers.items():
            signal.signal(sig, handler)


def _summary(spark: Any, file: str, r: Any, sinks: StreamSinks, fmt: str) -> None:
    """Rows written so far (all runs on this checkpoint), from the committed sinks."""
    parts = [f"{file}: {r.name} [{r.engine}, stream]"]
    out = sinks.outputs.get(r.name)
    parts.append(f"rows out {_committed_rows(spark, out, fmt)}")
    if r.late_name and r.late_name in sinks.outputs:
        parts.append(f"late {_committed_rows(spark, sinks.outputs[r.late_name], fmt)}")
    tagged = sinks.tagged.get(r.name)
    if tagged is not None:
        try:
            rows = L.counters_of(spark.read.parquet(str(tagged))).collect()
        except Exception:  # noqa: BLE001 - nothing committed yet
            rows = []
        dropped = L.sum_counters(row[L.COUNTERS] for row in rows)["dropped"]
        parts.append(
            "dropped " + (", ".join(f"{n} ({k})" for k, n in sorted(dropped.items())) or "0")
        )
    print(" | ".join(parts), file=sys.stderr)


def _committed_rows(spark: Any, path: Path | None, fmt: str) -> int | str:
    if path is None:
        return "?"
    try:
        return read_output(spark, path, fmt).count()
    except Exception:  # noqa: BLE001 - a sink that committed nothing has no files yet
        return 0


def read_output(spark: Any, path: str | Path, fmt: str = "parquet") -> DataFrame:
    """A streaming output as Spark reads it: only the files its ``_spark_metadata`` committed."""
    reader = spark.read.format(fmt)
    if fmt == "csv":
        reader = reader.option("header", "true")
    return reader.load(str(path))


def _progress(message: str) -> None:
    print(f"wql run: {message}", file=sys.stderr, flush=True)


def _first_line(e: Any) -> str:
    lines = [ln for ln in str(e).strip().splitlines() if ln.strip()]
    return lines[0] if lines else type(e).__name__
