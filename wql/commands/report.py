"""What ``wql run`` says on standard error, batch and ``--stream`` alike: the status
line (:class:`Status`, fed by :class:`StageProgress` in batch and by
:class:`StreamProgress` on a stream) and a query's summary line
(:func:`summary_line`).

A summary line reads, for both::

    FILE: QUERY [ENGINE(, stream(, drained))] | rows in N | out N | late N
          (| fired N) (| filtered N) | dropped N (reason), ...
          (| by side: NAME N (reason); ...) | S s

from the query's counters under the names :attr:`wql.api.QueryResult.counters`
gives them (``rows_in``, ``rows_out``, ``late_rows``, ``rows_fired``,
``rows_filtered``, ``dropped``; a window join's ``sides``: its drops per side).
"""

from __future__ import annotations

import contextlib
import shutil
import sys
import threading
import time
from collections.abc import Iterable, Mapping
from typing import Any

__all__ = ["StageProgress", "Status", "StreamProgress", "summary_line"]


def summary_line(
    file: str,
    name: str,
    engine: str,
    counters: Mapping[str, Any],
    seconds: float,
    tags: Iterable[str] = (),
) -> str:
    """One query's summary. ``tags`` follow the engine in the brackets (``stream``,
    ``drained``); ``fired`` is there when the counters have ``rows_fired``,
    ``filtered`` and ``malformed`` when some rows were."""
    c = counters
    dropped = c.get("dropped", {})
    parts = [
        f"{file}: {name} [{', '.join((engine, *tags))}]",
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
    sides = {n: s["dropped"] for n, s in c.get("sides", {}).items() if s.get("dropped")}
    if sides:
        # a window join's drops per input, as Flink counts its late rows per side
        parts.append(
            "by side: "
            + "; ".join(
                f"{n} " + ", ".join(f"{k} ({reason})" for reason, k in sorted(d.items()))
                for n, d in sides.items()
            )
        )
    if c.get("malformed"):
        # kept with the value NULL (Spark's PERMISSIVE mode), in rows in
        parts.append(f"malformed {c['malformed']}")
    parts.append(f"{seconds:.1f} s")
    return " | ".join(parts)


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


class StageProgress:
    """Feeds the running Spark stages to the status line (Spark's console bar is off)."""

    def __init__(self, spark: Any, status: Status, every: float = 1.0) -> None:
        self.tracker = spark.sparkContext.statusTracker()
        self.status = status
        # a line per change is too much for a log: every 5 s with --verbose
        self.every = every if status.live else 5.0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="wql-progress", daemon=True)
        self._last = ""

    def __enter__(self) -> StageProgress:
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


class StreamProgress:
    """Feeds a stream's micro-batches to the status line: the micro-batch each
    query that reads the sources is at and the source rows read so far.

    A Spark streaming query listener: every finished micro-batch adds its
    source rows, so the count is exact however fast micro-batches go. Rows
    are counted for the sources outside WQL's own folders (``internal``: the
    checkpoint folder, which holds the end streams, and the output folder,
    which holds the tagged sinks the result stages read). On a terminal the
    line is also redrawn every ``every`` seconds, so that its time goes on
    between micro-batches.
    """

    def __init__(
        self, spark: Any, status: Status, internal: Iterable[str], every: float = 1.0
    ) -> None:
        self.spark = spark
        self.status = status
        self.internal = tuple(_uri_path(p) for p in internal)
        self.batches: dict[str, int] = {}
        self.rows = 0
        self.every = every
        self._lock = threading.Lock()
        self._listener: Any = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._tick, name="wql-progress", daemon=True)

    def __enter__(self) -> StreamProgress:
        if self.status.live or self.status.verbose:
            self._listener = _listener(self)
            self.spark.streams.addListener(self._listener)
        if self.status.live:
            self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout=1)
        if self._listener is not None:
            # progress is best effort, also on the way out
            with contextlib.suppress(Exception):
                self.spark.streams.removeListener(self._listener)
            self._listener = None

    def progress(self, name: str, batch_id: int, sources: Iterable[tuple[str, int]]) -> None:
        """One finished micro-batch of the query ``name``: its id and, per source, its
        description and rows."""
        read = [n for description, n in sources if not self._is_internal(description)]
        if not read:
            return  # a result stage (it reads a tagged sink)
        with self._lock:
            self.batches[name] = batch_id
            self.rows += sum(read)
            detail = self.detail()
        self.status.stage(detail)

    def _tick(self) -> None:
        while not self._stop.wait(self.every):
            with self._lock:
                detail = self.detail()
            self.status.stage(detail)

    def detail(self) -> str:
        """``micro-batch N | R rows read`` (a micro-batch per query with several);
        empty before the first micro-batch ended."""
        if not self.batches:
            return ""
        if len(self.batches) == 1:
            (batch,) = self.batches.values()
            at = f"micro-batch {batch}"
        else:
            at = "micro-batches " + ", ".join(
                f"{_query_name(n)} {b}" for n, b in sorted(self.batches.items())
            )
        return f"{at} | {self.rows} rows read"

    def _is_internal(self, description: str) -> bool:
        return any(p in description for p in self.internal)


def _listener(progress: StreamProgress) -> Any:
    from pyspark.sql.streaming.listener import StreamingQueryListener

    class Listener(StreamingQueryListener):
        def onQueryStarted(self, event: Any) -> None:
            pass

        def onQueryProgress(self, event: Any) -> None:
            p = event.progress
            try:
                sources = [(s.description, int(s.numInputRows)) for s in p.sources]
                progress.progress(p.name or "", int(p.batchId), sources)
            except Exception:  # noqa: BLE001 - progress is best effort
                pass

        def onQueryIdle(self, event: Any) -> None:
            pass

        def onQueryTerminated(self, event: Any) -> None:
            pass

    return Listener()


def _uri_path(path: str) -> str:
    """``path`` as it appears in a source's description (an absolute local path; a
    URI as given)."""
    from pathlib import Path

    return path if "://" in path else str(Path(path).resolve())


def _query_name(spark_name: str) -> str:
    """A stage's Spark query name (``wql_<query>_operator``) as the query's name."""
    name = spark_name.removeprefix("wql_")
    return name.removesuffix("_operator")
