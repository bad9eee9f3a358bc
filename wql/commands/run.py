"""``wql run FILE...``: run .wql files on Spark and write or show every output.

::

    wql run FILE... [--engine auto|native|operator] [--output DIR]
                    [--output-table PREFIX] [--format parquet|csv|json] [--show N]
                    [--master URL] [--conf KEY=VALUE]... [--verbose]

Every file is compiled first (all errors of all files are reported before
Spark starts); then the files run in one Spark session. A file's queries may
read the views of the files given before it (``FROM view``). With ``--output``,
each query's result goes to ``DIR/<query>/`` and each ``LATE DATA TO``
output to ``DIR/<late name>/`` (CSV with a header row); with several files,
to ``DIR/<file stem>/<name>/``. Existing output folders are replaced.
With ``--output-table PREFIX``, each output goes to the table ``PREFIX<name>``
of Spark's catalog (``PREFIX<file stem>_<name>`` with several files),
replacing it (with ``--stream``: appended by ``toTable``).
``--show N`` prints the first N rows of every output, sorted by its columns.
Without ``--output`` or ``--output-table``, ``--show 20`` is implied.

A run summary goes to standard error: per query the engine, rows in, rows
out (result rows), late rows, rows in a firing, filtered rows, rows dropped
by reason (rows in = fired + late + filtered + dropped) and the time taken.
Nothing else does unless something fails: Spark's start-up notices and
warnings are silenced before the JVM starts (``wql/spark/session.py``). On a
terminal, one status line (overwritten in place, erased when done) says what
runs: the step, the running Spark stage with its tasks done, the time
elapsed. ``--verbose`` keeps Spark's start-up output and WARN logging and
prints every step as a line of its own.
"""

from __future__ import annotations

import argparse
import shutil
import sys
import threading
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
from wql.errors import ErrorCode, WqlError

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
    with _ProgressReporter(spark, status):
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
                rows = df.orderBy(*df.columns)
                status.clear()
                print(f"== {out_name} ({r.engine} engine)")
                rows.show(show, truncate=False)
        status.line(_summary(name, r, r.seconds + time.perf_counter() - output_started))


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


def _summary(file: str, r: Any, seconds: float) -> str:
    c = r.counters
    dropped = c.get("dropped", {})
    parts = [
        f"{file}: {r.name} [{r.engine}]",
        f"rows in {c.get('rows_in', 0)}",
        f"out {c.get('rows_out', 0)}",
        f"late {c.get('late_rows', 0)}",
    ]
    if "rows_fired" in c:
        parts.append(f"fired {c['rows_fired']}")
    if c.get("rows_filtered"):
        parts.append(f"filtered {c['rows_filtered']}")
    if dropped:
        parts.append(
            "dropped " + ", ".join(f"{n} ({reason})" for reason, n in sorted(dropped.items()))
        )
    else:
        parts.append("dropped 0")
    if c.get("malformed"):
        # kept with the value NULL (Spark's PERMISSIVE mode), in rows in
        parts.append(f"malformed {c['malformed']}")
    parts.append(f"{seconds:.1f} s")
    return " | ".join(parts)


def _parse_conf(items: list[str]) -> dict[str, str]:
    conf = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise WqlError(f"--conf needs KEY=VALUE, got {item!r}", code=ErrorCode.USAGE)
        conf[key.strip()] = value
    return conf


class Status:
    """What ``wql run`` says on standard error besides the summaries.

    On a terminal: one status line, rewritten in place (``step``, ``stage``)
    and erased before any other output (``line``, ``clear``) and at the end.
    Not on a terminal (a log, a pipe, CI): nothing but ``line``s. With
    ``verbose``: every step as a line of its own, terminal or not.
    """

    def __init__(self, verbose: bool = False, stream: Any = None) -> None:
        self.stream = stream if stream is not None else sys.stderr
        self.verbose = verbose
        self.live = not verbose and _isatty(self.stream)
        self._lock = threading.Lock()
        self._step = ""
        self._shown = False
        self._started = time.monotonic()

    def step(self, message: str) -> None:
        """A new step: the status line's text (a line with ``verbose``)."""
        with self._lock:
            self._step = message
            if self.verbose:
                self._write(f"wql run: {message}\n")
            elif self.live:
                self._render(message)

    def stage(self, detail: str) -> None:
        """Spark's progress within the current step (the status line only)."""
        with self._lock:
            if self.live:
                self._render(f"{self._step} | {detail}" if detail else self._step)
            elif self.verbose and detail:
                self._write(f"wql run: {detail}\n")

    def line(self, text: str) -> None:
        """A line that stays (a query's summary); the status line comes back after it."""
        with self._lock:
            self._erase()
            self._write(text + "\n")
            if self.live and self._step:
                self._render(self._step)

    def clear(self) -> None:
        """Erase the status line (before other output, e.g. ``--show`` on standard output)."""
        with self._lock:
            self._erase()

    def done(self, message: str) -> None:
        with self._lock:
            self._erase()
            self._step = ""
            if self.verbose:
                self._write(f"wql run: {message}\n")

    def _render(self, text: str) -> None:
        elapsed = time.monotonic() - self._started
        width = shutil.get_terminal_size((100, 20)).columns - 1
        self._write("\r\033[K" + f"wql run: {text} | {elapsed:.0f} s"[:width])
        self._shown = True

    def _erase(self) -> None:
        if self._shown:
            self._write("\r\033[K")
            self._shown = False

    def _write(self, text: str) -> None:
        self.stream.write(text)
        self.stream.flush()


def _isatty(stream: Any) -> bool:
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError):
        return False


class _ProgressReporter:
    """Feeds the running Spark stages to the status line (Spark's console bar is off)."""

    def __init__(self, spark: Any, status: Status, every: float = 1.0) -> None:
        self.tracker = spark.sparkContext.statusTracker()
        self.status = status
        # a line per change is too much for a log: every 5 s with --verbose
        self.every = every if status.live else 5.0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="wql-progress", daemon=True)
        self._last = ""

    def __enter__(self) -> _ProgressReporter:
        if self.status.live or self.status.verbose:
            self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout=1)

    def _loop(self) -> None:
        while not self._stop.wait(self.every):
            try:
                stages = []
                for sid in self.tracker.getActiveStageIds():
                    info = self.tracker.getStageInfo(sid)
                    if info is not None:
                        stages.append(
                            f"stage {sid}: {info.numCompletedTasks}/{info.numTasks} tasks"
                        )
            except Exception:  # noqa: BLE001 - progress is best effort
                return
            line = "; ".join(stages)
            if self.status.live or (line and line != self._last):
                self.status.stage(line)
                self._last = line
