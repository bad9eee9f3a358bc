"""``wql run --stream``: the streaming half of ``wql run`` (:mod:`wql.commands.run` calls it).

::

    wql run FILE... --stream --checkpoint CK --output OUT
                    [--trigger available-now|interval=<duration>] [--drain]
                    [--format csv|json|parquet]

Every declared source a query reads is streamed from its folder
(:func:`wql.spark.stream_sinks.read_stream_source`), every output is
written exactly once by :func:`wql.spark.stream_sinks.start_streams`
(one folder per output under ``OUT``, checkpoints under ``CK``; with several
files, one subfolder per file stem). ``available-now`` processes what is
there and stops, printing a summary line per query; ``interval=<duration>``
(``5s``, ``500ms``, ``1m``, or Spark's ``'5 seconds'``) runs until
SIGINT/SIGTERM, and a restart with the same checkpoints resumes the run.
``--drain`` (available-now) then ends every stream as a bounded source ends
(docs/streaming.md, "Bounded streams"); a drained checkpoint takes no more runs.
"""

from __future__ import annotations

import argparse
import os
import re
import signal
import sys
import threading
import time
from pathlib import Path
from typing import Any

from wql.commands import first_line, spark_failures
from wql.errors import ErrorCode, WqlError

AVAILABLE_NOW = "available-now"
_UNITS = {"ms": "milliseconds", "s": "seconds", "m": "minutes", "h": "hours"}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The options only ``wql run --stream`` reads (``--stream`` itself: :mod:`wql.commands`)."""
    parser.add_argument(
        "--checkpoint", metavar="DIR", help="streaming checkpoints (one folder per sink)"
    )
    parser.add_argument(
        "--trigger",
        default=AVAILABLE_NOW,
        metavar="available-now|interval=DURATION",
        help="streaming trigger (default: available-now)",
    )
    parser.add_argument(
        "--drain",
        action="store_true",
        help="end the stream after the files there, as a bounded source ends: every "
        "remaining window fires; the checkpoint then takes no more rows",
    )


def parse_trigger(text: str) -> str | None:
    """``None`` for ``available-now``, else a Spark ``processingTime`` string."""
    if text == AVAILABLE_NOW:
        return None
    kind, sep, value = text.partition("=")
    if kind != "interval" or not sep or not value.strip():
        raise WqlError(
            f"--trigger must be available-now or interval=<duration>, got {text!r}",
            code=ErrorCode.USAGE,
        )
    value = value.strip()
    m = re.fullmatch(r"(\d+)\s*(ms|s|m|h)", value)
    if m:
        return f"{m.group(1)} {_UNITS[m.group(2)]}"
    if re.fullmatch(r"\d+\s+(milliseconds?|seconds?|minutes?|hours?)", value, flags=re.IGNORECASE):
        return value
    raise WqlError(
        f"--trigger interval: cannot read the duration {value!r} (try 5s or 500ms)",
        code=ErrorCode.USAGE,
    )


def run_stream(
    args: argparse.Namespace, compiled: list[Any], stems: list[str], conf: dict[str, str]
) -> int:
    """Stream every file of ``args.files`` (compiled for streams) into ``args.output``."""
    from wql.spark.session import default_session
    from wql.spark.stream_sinks import StreamSinks, read_stream_source, start_streams

    if not (args.output or args.output_table) or not args.checkpoint:
        raise WqlError(
            "--stream needs --output DIR (or --output-table PREFIX) and --checkpoint DIR",
            code=ErrorCode.USAGE,
        )
    # with tables only, the operators' tagged streams live beside the checkpoints
    output = args.output or str(Path(args.checkpoint) / "_wql_outputs")
    trigger = parse_trigger(args.trigger)
    if args.drain and trigger is not None:
        raise WqlError(
            "--drain ends the stream after the files there: it needs --trigger available-now",
            code=ErrorCode.USAGE,
        )
    conf = dict(conf)
    # Stateful streaming runs one state store (and one Python worker) per shuffle
    # partition in every micro-batch; Spark's default of 200 makes a local stream
    # crawl (measured: 8 min vs 1 min for six tiny files). The number is fixed in
    # the checkpoint the first time a query runs.
    conf.setdefault("spark.sql.shuffle.partitions", str(max(2, os.cpu_count() or 2)))
    _progress("starting Spark" + (f" ({args.master})" if args.master else ""))
    spark = default_session(args.master, "wql run --stream", conf, quiet=not args.verbose)
    if args.verbose:
        spark.sparkContext.setLogLevel("WARN")
    started = time.perf_counter()
    all_sinks: list[StreamSinks] = []
    try:
        with spark_failures("streaming"):
            for path, stem, c in zip(args.files, stems, compiled, strict=True):
                many = len(args.files) > 1
                out = Path(output) / stem if many else Path(output)
                tables = None
                if args.output_table:
                    tables = f"{args.output_table}{stem}_" if many else args.output_table
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
                    sinks = start_streams(
                        results,
                        out,
                        ck,
                        fmt=args.format,
                        trigger=trigger,
                        drain=args.drain,
                        table_prefix=tables,
                    )
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
                                f"streaming query {q.name} failed: {first_line(q.exception())}",
                                code=ErrorCode.SPARK,
                            )
    except KeyboardInterrupt:
        _progress("interrupted; stopping (the checkpoints resume the run)")
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


def _summary(spark: Any, file: str, r: Any, sinks: Any, fmt: str) -> None:
    """Rows so far (all runs on this checkpoint), from the committed sinks.

    A stream's ``rows in`` are the rows that reached the operator (WHERE runs
    before it); ``in = fired + late + dropped`` holds once the stream is drained
    (until then rows waiting in windows are in no count but ``in``).
    """
    from wql.spark.stream_sinks import committed_rows, tagged_counters

    drained = ", drained" if r.name in sinks.drained else ""
    parts = [f"{file}: {r.name} [{r.engine}, stream{drained}]"]
    tagged = sinks.tagged.get(r.name)
    counters = tagged_counters(spark, tagged) if tagged is not None else None
    if counters is not None:
        parts.append(f"rows in {counters['rows_in']}")

    def rows(name: str) -> int | str:
        if name in sinks.tables:
            return int(spark.table(sinks.tables[name]).count())
        out = sinks.outputs.get(name)
        return committed_rows(spark, out, fmt) if out is not None else "?"

    parts.append(f"rows out {rows(r.name)}")
    if r.late_name and r.late_name in sinks.outputs:
        parts.append(f"late {rows(r.late_name)}")
    if counters is not None:
        if drained:
            parts.append(f"fired {counters['rows_fired']}")
        dropped = counters["dropped"]
        parts.append(
            "dropped " + (", ".join(f"{n} ({k})" for k, n in sorted(dropped.items())) or "0")
        )
    print(" | ".join(parts), file=sys.stderr)


def _progress(message: str) -> None:
    print(f"wql run: {message}", file=sys.stderr, flush=True)
