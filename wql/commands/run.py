"""``wql run FILE...``: run .wql files on Spark and write or show every output.

::

    wql run FILE... [--engine auto|native|operator] [--output DIR]
                    [--output-table PREFIX] [--format parquet|csv|json] [--show N]
                    [--master URL] [--conf KEY=VALUE]... [--verbose]

Every file is compiled first (all errors of all files are reported before
Spark starts); then the files run in one Spark session. A file's queries may
read the views of the files given before it (``FROM view``). With ``--output``,
each query's result goes to ``DIR/<query>/`` and each ``LATE DATA TO``
output to ``DIR/<late name>/`` (CSV with a header row, timestamps in UTC as
``2024-05-01 09:00:00``, ``.SSS`` added when the milliseconds are not zero: the
form of ``examples/expected/``); with several files, to
``DIR/<file stem>/<name>/``. Existing output folders are replaced.
With ``--output-table PREFIX``, each output goes to the table ``PREFIX<name>``
of Spark's catalog (``PREFIX<file stem>_<name>`` with several files),
replacing it (with ``--stream``: appended by ``toTable``).
``--show N`` prints the first N rows of every output, sorted by its columns; an
``EMIT CHANGELOG`` result window by window, each window's changes in the order
they were emitted.
Without ``--output`` or ``--output-table``, ``--show 20`` is implied.

A run summary goes to standard error: per query the engine, rows in, rows
out (result rows), late rows, rows in a firing, filtered rows, rows dropped
by reason (rows in = fired + late + filtered + dropped) and the time taken.
Nothing else does unless something fails: Spark's start-up notices and
warnings are silenced before the JVM starts (``wql/spark/session.py``). On a
terminal, one status line (overwritten in place, erased when done) says what
runs: the step, the running Spark stage with its tasks done, the time
elapsed. ``--verbose`` keeps Spark's start-up output and WARN logging and
prints every step as a line of its own. The summary and status lines are
:mod:`wql.commands.report`'s, for ``--stream`` too (:mod:`wql.commands.run_stream`).
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path
from typing import Any

from wql.commands import (
    add_engine_option,
    add_stream_option,
    display_name,
    read_source,
    run_stream,
    spark_failures,
)
from wql.commands.report import StageProgress, Status, summary_line
from wql.errors import ErrorCode, WqlError

__all__ = ["Status", "register", "run"]

FORMATS = ("parquet", "csv", "json")


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "run",
        help="run .wql files on Spark, writing or showing every output",
        description="Compile and run .wql files in one Spark session. Results go to "
        "DIR/<query>/ and late outputs to DIR/<late name>/ (DIR/<file stem>/<name>/ with "
        "several files).",
    )
    parser.add_argument("files", nargs="+", metavar="FILE", help="a .wql file")
    add_engine_option(parser, "force an engine (default: auto)")
    parser.add_argument("--output", metavar="DIR", help="write every output under DIR")
    parser.add_argument(
        "--output-table",
        metavar="PREFIX",
        help="write every output to the table PREFIX<name> of Spark's catalog "
        "(PREFIX<file stem>_<name> with several files), e.g. --output-table analytics.wql_",
    )
    parser.add_argument(
        "--format", choices=FORMATS, default="csv", help="output format (default: csv)"
    )
    parser.add_argument(
        "--show",
        type=int,
        metavar="N",
        help="print N rows of every output (default 20 without --output)",
    )
    parser.add_argument("--master", metavar="URL", help="Spark master (default: local[*])")
    parser.add_argument(
        "--conf",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a Spark configuration entry (repeatable)",
    )
    parser.add_argument(
        "--timeline",
        metavar="OUT",
        help="also draw the windows and firings of a few keys to OUT (.html, .svg or .png; "
        "needs the viz extra)",
    )
    parser.add_argument(
        "--timeline-key",
        action="append",
        metavar="KEY",
        help="a key to draw (repeatable; values of a composite key separated by commas; "
        "default: the keys with the most rows)",
    )
    parser.add_argument(
        "--timeline-top", type=int, default=3, metavar="N", help="draw the N busiest keys"
    )
    parser.add_argument(
        "--timeline-query", metavar="NAME", help="the query to draw (needed with several)"
    )
    parser.add_argument(
        "--verbose",
        action="store_true",
        help="keep Spark's start-up output and warnings; print every step",
    )
    add_stream_option(
        parser,
        "run as Structured Streaming over the sources' folders (needs --output, --checkpoint)",
    )
    run_stream.add_arguments(parser)
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    import wql

    conf = _parse_conf(args.conf)
    if args.show is not None and args.show < 0:
        raise WqlError("--show needs a number of rows >= 0", code=ErrorCode.USAGE)
    compiled: list[wql.Compiled] = []
    errors: list[WqlError] = []
    for path in args.files:
        try:
            text = read_source(path)
            compiled.append(
                wql.compile(
                    text,
                    args.engine,
                    filename=display_name(path),
                    base_dir=Path(path).parent,
                    require_declared=True,
                    # the engine is chosen for streams here, so an engine forced
                    # where it cannot stream fails before Spark starts
                    streaming=args.stream,
                    # a file reads the views of the files given before it
                    views=tuple(compiled),
                )
            )
        except WqlError as err:
            errors.append(err)
    if errors:
        from wql.commands import print_error

        for earlier in errors[:-1]:
            print_error(earlier)
        raise errors[-1]
    stems = [Path(p).stem for p in args.files]
    if len(set(stems)) != len(stems):
        raise WqlError(
            "several files have the same name; their outputs would collide", code=ErrorCode.USAGE
        )
    written = args.output or args.output_table
    show = args.show if args.show is not None else (None if written else 20)
    if args.timeline:
        _check_timeline(args, compiled)
    if args.drain and not args.stream:
        raise WqlError("--drain ends a stream: use it with --stream", code=ErrorCode.USAGE)
    if args.stream:
        return run_stream.run_stream(args, compiled, stems, conf)

    started = time.perf_counter()
    status = Status(verbose=args.verbose)
    status.step("starting Spark" + (f" ({args.master})" if args.master else ""))
    from wql.spark.session import default_session

    spark = default_session(args.master, "wql run", conf, quiet=not args.verbose)
    if args.verbose:
        spark.sparkContext.setLogLevel("WARN")
    failed = False
    with StageProgress(spark, status):
        for path, stem, c in zip(args.files, stems, compiled, strict=True):
            out_dir = tables = None
            if args.output:
                out_dir = _join(args.output, stem) if len(args.files) > 1 else args.output
            if args.output_table:
                many = len(args.files) > 1
                tables = f"{args.output_table}{stem}_" if many else args.output_table
            failed |= not _run_file(spark, path, c, out_dir, args.format, show, status, tables)
        if args.timeline and not failed:
            _draw_timeline(spark, compiled[0], args, status)
    status.done(f"done in {time.perf_counter() - started:.1f} s")
    return 1 if failed else 0


def _run_file(
    spark: Any,
    path: str,
    compiled: Any,
    out_dir: str | None,
    fmt: str,
    show: int | None,
    status: Status,
    tables: str | None = None,
) -> bool:
    name = display_name(path)
    status.step(f"{name}: running {', '.join(compiled.queries)}")
    with spark_failures(f"running {name}", name):
        results = compiled.apply(spark)
    try:
        with spark_failures(f"running {name}", name):
            _write_results(name, results, out_dir, fmt, show, status, tables)
    finally:
        results.release()
    return True


def _write_results(
    name: str,
    results: Any,
    out_dir: str | None,
    fmt: str,
    show: int | None,
    status: Status,
    tables: str | None = None,
) -> None:
    """Write and/or show every output of ``results``, a summary line per query (``tables``:
    also to the tables ``tables<output name>``)."""
    from wql.spark.layout import write_output

    for r in results.queries:
        # native queries are lazy: their work happens while writing/showing
        output_started = time.perf_counter()
        outputs = [(r.name, r.df)]
        if r.late is not None and r.late_name:
            outputs.append((r.late_name, r.late))
        for out_name, df in outputs:
            if out_dir is not None:
                target = _join(out_dir, out_name)
                status.step(f"{name}: writing {out_name} -> {target}")
                write_output(df, target, fmt)
            if tables is not None:
                status.step(f"{name}: writing {out_name} -> table {tables}{out_name}")
                results.write_table(out_name, tables + out_name)
            if show:
                status.step(f"{name}: reading {out_name}")
                rows = df.orderBy(*_show_order(r.plan, df, out_name == r.name))
                status.clear()
                print(f"== {out_name} ({r.engine} engine)")
                rows.show(show, truncate=False)
        seconds = r.seconds + time.perf_counter() - output_started
        status.line(summary_line(name, r.name, r.engine, r.counters, seconds))


def _show_order(plan: Any, df: Any, is_result: bool) -> list[Any]:
    """The order ``--show`` prints an output in: by every column, except a changelog
    (EMIT CHANGELOG), shown in the order it was emitted window by window: the windows
    by key and bounds, each window's changes by ``pane_index``, a row before its
    retraction (docs/language.md, "Changelog output")."""
    from pyspark.sql import functions as F

    from wql.compiler import plan as P
    from wql.compiler.backends.escaping import sql_identifier

    columns = [F.col(sql_identifier(c)) for c in df.columns]
    if not is_result or getattr(plan, "changelog", None) is None:
        return columns
    pane = next(
        (o.name for o in plan.output if o.expr.sql == "pane_index" and len(o.expr.columns) == 1),
        None,
    )
    if pane is None or not plan.changelog_key:
        return columns
    window = [F.col(sql_identifier(c)).asc_nulls_first() for c in plan.changelog_key]
    retraction = F.col(P.OP_COLUMN).isin("-U", "-D")
    return [*window, F.col(sql_identifier(pane)), retraction, *columns]


def _check_timeline(args: argparse.Namespace, compiled: list[Any]) -> None:
    """Refuse a --timeline that cannot be drawn before Spark starts."""
    from wql.spark.timeline import FORMATS

    if args.stream:
        raise WqlError(
            "--timeline replays a batch run; it cannot be used with --stream", code=ErrorCode.USAGE
        )
    if len(compiled) != 1:
        raise WqlError(
            "--timeline draws one query of one file; give one file", code=ErrorCode.USAGE
        )
    if Path(args.timeline).suffix.lower() not in FORMATS:
        raise WqlError(
            f"--timeline needs a file ending in {', '.join(FORMATS)}", code=ErrorCode.USAGE
        )
    if args.timeline_top < 1:
        raise WqlError("--timeline-top needs a number of keys >= 1", code=ErrorCode.USAGE)
    names = compiled[0].queries
    if args.timeline_query is None and len(names) != 1:
        raise WqlError(
            f"the file has {len(names)} queries; choose one with --timeline-query "
            f"({', '.join(names)})",
            code=ErrorCode.USAGE,
        )


def _draw_timeline(spark: Any, compiled: Any, args: argparse.Namespace, status: Status) -> None:
    keys = None
    if args.timeline_key:
        keys = [tuple(k.split(",")) if "," in k else k for k in args.timeline_key]
    status.step(f"drawing the timeline -> {args.timeline}")
    with spark_failures("drawing the timeline"):
        timeline = compiled.timeline(
            args.timeline, spark, query=args.timeline_query, keys=keys, top=args.timeline_top
        )
    drawn = ", ".join(f"{k.label} ({len(k.firings)} firings)" for k in timeline.keys)
    status.line(f"timeline of {timeline.query}: {drawn} -> {args.timeline}")


def _join(base: str, name: str) -> str:
    """``base/name`` for local paths and URIs alike (``Path`` would mangle ``hdfs://``)."""
    return base.rstrip("/") + "/" + name


def _parse_conf(items: list[str]) -> dict[str, str]:
    conf = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise WqlError(f"--conf needs KEY=VALUE, got {item!r}", code=ErrorCode.USAGE)
        conf[key.strip()] = value
    return conf
