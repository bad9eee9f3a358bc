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
(docs/streaming.md, "Bounded streams"); a drained checkpoint takes no more runs
(refused before Spark starts).

On standard error it says what batch ``wql run`` says (docs/streaming.md,
"What ``wql run --stream`` prints"): a summary line per query with batch's
fields, when the run ends (``available-now``) or SIGINT/SIGTERM stopped it;
on a terminal a status line with the micro-batch, the rows read and the time
(:mod:`wql.commands.report`); nothing of Spark's (:mod:`wql.spark.session`).
"""

from __future__ import annotations

import argparse
import os
import re
import signal
import threading
import time
from pathlib import Path
from typing import Any

from wql.commands import display_name, first_line, spark_failures
from wql.commands.report import Status, StreamProgress, summary_line
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
    from wql.spark.stream_sinks import refuse_drained

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
    many = len(args.files) > 1
    files = [
        (
            display_name(path),
            c,
            Path(output) / stem if many else Path(output),
            Path(args.checkpoint) / stem if many else Path(args.checkpoint),
            _table_prefix(args.output_table, stem, many),
        )
        for path, stem, c in zip(args.files, stems, compiled, strict=True)
    ]
    # a drained stream has ended: refused by its checkpoint's files, before Spark starts
    for _, c, _, ck, _ in files:
        for name in c.queries:
            refuse_drained(name, ck / name)
    conf = dict(conf)
    # Stateful streaming runs one state store (and one Python worker) per shuffle
    # partition in every micro-batch; Spark's default of 200 makes a local stream
    # crawl (measured: 8 min vs 1 min for six tiny files). The number is fixed in
    # the checkpoint the first time a query runs.
    conf.setdefault("spark.sql.shuffle.partitions", str(max(2, os.cpu_count() or 2)))
    started = time.perf_counter()
    status = Status(verbose=args.verbose)
    status.step("starting Spark" + (f" ({args.master})" if args.master else ""))
    from wql.spark.session import default_session
    from wql.spark.stream_sinks import start_streams

    spark = default_session(args.master, "wql run --stream", conf, quiet=not args.verbose)
    if args.verbose:
        spark.sparkContext.setLogLevel("WARN")
    running: list[tuple[str, Any, Any, float]] = []
    stopped = False
    # an interval= run prints its summaries once stopped, unless py4j was interrupted
    summarise_at_stop = trigger is not None
    # the end streams live under the checkpoint folder, the tagged sinks under the output
    with StreamProgress(spark, status, internal=(args.checkpoint, output)):
        try:
            with spark_failures("streaming"):
                for name, c, out, ck, tables in files:
                    file_started = time.perf_counter()
                    results = _apply(spark, c)
                    status.step(f"{name}: streaming {', '.join(c.queries)} -> {tables or out}")
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
                    running.append((name, results, sinks, file_started))
                    if trigger is None:
                        _summaries(spark, name, results, sinks, args.format, file_started, status)
                if trigger is not None:
                    status.step(f"running every {trigger}; Ctrl-C stops")
                    stopped = _wait_for_signal(spark)
                    for _, _, sinks, _ in running:
                        for q in sinks.queries:
                            if q.exception() is not None:
                                raise WqlError(
                                    f"streaming query {q.name} failed: {first_line(q.exception())}",
                                    code=ErrorCode.SPARK,
                                )
        except KeyboardInterrupt:
            # raised inside a py4j call: the gateway may be gone, so no summaries
            status.line(f"wql run: {INTERRUPTED}")
            summarise_at_stop = False
        finally:
            for _, _, sinks, _ in running:
                sinks.stop()
    if summarise_at_stop:
        if stopped:
            status.line(f"wql run: {INTERRUPTED}")
        # the counts of every micro-batch the stopped queries committed
        with spark_failures("streaming"):
            for name, results, sinks, file_started in running:
                _summaries(spark, name, results, sinks, args.format, file_started, status)
    status.done(f"done in {time.perf_counter() - started:.1f} s")
    return 0


INTERRUPTED = "interrupted; stopped (the checkpoints resume the run)"


def _table_prefix(prefix: str | None, stem: str, many: bool) -> str | None:
    """The table names' prefix of one file's outputs (``--output-table``)."""
    if prefix is None:
        return None
    return f"{prefix}{stem}_" if many else prefix


def _apply(spark: Any, c: Any) -> Any:
    """``c`` applied to a stream of each declared source its queries read."""
    from wql.spark.stream_sinks import read_stream_source

    # every source a query reads (both of a window join of two sources)
    read = {r.name.lower() for q in c.program.queries for r in c.program.root_sources(q)}
    sources = {
        s.name: read_stream_source(spark, s, c.base_dir)
        for s in c.program.sources
        if s.declared and s.name.lower() in read
    }
    return c.apply(spark, **sources)


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


def _summaries(
    spark: Any, file: str, results: Any, sinks: Any, fmt: str, started: float, status: Status
) -> None:
    """A summary line per query, as batch prints it (:func:`wql.commands.report.summary_line`),
    its counts over every run on the checkpoint, from what the sinks committed.

    ``rows in`` are the rows the query read (``filtered``: those its WHERE
    rejected, as in batch), counted in the micro-batch that read them
    (:meth:`StreamSinks.counters <wql.spark.stream_sinks.StreamSinks.counters>`);
    ``out`` and ``late`` the rows of the query's outputs; ``fired`` once the
    stream is drained (until then rows waiting in windows are in no count but
    ``in``), when ``in = fired + late + filtered + dropped``.
    """
    counters = sinks.counters(spark)
    seconds = time.perf_counter() - started
    for r in results.queries:
        drained = r.name in sinks.drained
        c = dict(counters.get(r.name, {}))
        if not drained:
            c.pop("rows_fired", None)
        c["rows_out"] = _committed(spark, sinks, r.name, fmt)
        tags = ("stream", "drained") if drained else ("stream",)
        status.line(summary_line(file, r.name, r.engine, c, seconds, tags))


def _committed(spark: Any, sinks: Any, name: str, fmt: str) -> int:
    """Rows the output ``name`` committed so far: its table's, else its folder's."""
    from wql.spark.stream_sinks import committed_rows

    if name in sinks.tables:
        return int(spark.table(sinks.tables[name]).count())
    out = sinks.outputs.get(name)
    return committed_rows(spark, out, fmt) if out is not None else 0
