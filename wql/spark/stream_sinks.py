"""Exactly-once streaming file sinks and the end of a stream: what ``wql run --stream``
runs (its command line: :mod:`wql.commands.run_stream`).

Sources: every ``CREATE SOURCE`` is read with ``spark.readStream`` from its
``path`` (a folder; new files are new data) with the declared schema
(Spark's streaming file source needs one) and every reader option of its
``WITH`` clause (e.g. ``maxFilesPerTrigger = '1'``):
:func:`wql.spark.sources.read_stream_source`.

Sinks, per query (``N`` its name, ``L`` its ``LATE DATA TO`` name), for
the engine the planner chose for a stream (``wql run --stream`` compiles
with ``streaming=True``; today every query is an operator query there,
docs/native.md "Streaming"):

* a **native** query is one streaming query: Spark's windowed aggregation in
  append mode -> file sink ``OUT/N`` (checkpoint ``CK/N/result``);
* an **operator** query is three streaming queries, so that the operator
  runs once and its two outputs come from the same micro-batches:

  1. source (+ end stream) -> operator -> the tagged stream (results, late
     rows, counters) -> parquet file sink ``OUT/_wql_tagged/N``
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

``--drain`` (available-now) ends a bounded stream: stage 1 runs to the end
of the files there, then once more with a marker file in the query's end
stream ``CK/N/end`` (:func:`wql.spark.streaming.run_streaming` unions it
with the source), whose watermark is +inf: every remaining event-time window
fires, rows in windows that never fire are counted, and ``CK/N/DRAINED``
records the end; stages 2 and 3 then write everything out. A drained
checkpoint refuses any later run (its stream has ended). Every operator
query except processing-time ones has that end stream, drained or not.

A query over an idle source (``WATERMARK ... IDLE AFTER``) has an idle
monitor (:mod:`wql.spark.idle`): its end stream also takes heartbeat rows,
which the monitor writes while the source is quiet (on a thread while an
``interval=`` query runs; before an available-now run that starts after a
quiet spell), and its state is saved in ``CK/N/idle.json``.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import json
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pyspark.sql import DataFrame

from wql.errors import ErrorCode, WqlError, WqlSemanticError, WqlUnsupportedError
from wql.spark import layout as L
from wql.spark.idle import IdleMonitor, write_atomic
from wql.spark.sources import read_stream_source
from wql.spark.streaming import HEARTBEAT_COLUMN, KEY_BUCKETS_CONF, STATE_NAME

__all__ = [
    "StreamSinks",
    "committed_rows",
    "read_output",
    "read_stream_source",
    "refuse_drained",
    "start_streams",
    "tagged_counters",
    "waiting_rows",
]

TAGGED_DIR = "_wql_tagged"


# --------------------------------------------------------------------------- sinks


#: Per query, the folder of the end-of-input stream (``CK/N/end``) and the record of
#: a finished drain (``CK/N/DRAINED``).
END_DIR = "end"
END_FILE = "end.json"
DRAINED = "DRAINED"


@dataclass
class StreamSinks:
    """The streaming queries of one run; :meth:`stop` stops them all.

    ``drained``: the operator queries whose stream has ended (``--drain``);
    ``monitors``: the idle monitors of queries over an idle source, by name;
    ``operators``: the checkpoint of each operator query's stage 1 (its state).
    """

    stages: list[list[Any]] = field(default_factory=list)
    outputs: dict[str, Path] = field(default_factory=dict)
    tagged: dict[str, Path] = field(default_factory=dict)
    operators: dict[str, Path] = field(default_factory=dict)
    drained: set[str] = field(default_factory=set)
    monitors: dict[str, IdleMonitor] = field(default_factory=dict)
    #: output name -> the catalog table it is written to (``start_streams(table_prefix=)``)
    tables: dict[str, str] = field(default_factory=dict)

    @property
    def queries(self) -> list[Any]:
        return [q for stage in self.stages for q in stage]

    def counters(self, spark: Any) -> dict[str, dict[str, Any]]:
        """Per operator query, its counters over every run on the checkpoint: those
        of its tagged sink (:func:`tagged_counters`) and the rows its processors
        took in whose count waits in their state (:func:`waiting_rows`), so that
        ``rows_in`` counts every row the query read (as batch does: ``rows_filtered``
        are those its WHERE rejected). ``rows_fired`` is exact
        once the stream is drained (before, rows waiting in windows are in it)."""
        out = {}
        for name, path in self.tagged.items():
            total = tagged_counters(spark, path)
            if name in self.operators:
                waiting = waiting_rows(spark, self.operators[name])
                total["rows_in"] += waiting
                total["rows_fired"] += waiting
            out[name] = total
        return out

    def stop(self) -> None:
        for q in self.queries:
            # stopping is best effort on the way out
            with contextlib.suppress(Exception):
                q.stop()
        # after the queries: the monitors save the state of every micro-batch that ran
        for m in self.monitors.values():
            m.stop()


def start_streams(
    results: Any,
    output_dir: str | Path,
    checkpoint_dir: str | Path,
    *,
    fmt: str = "parquet",
    trigger: str | None = None,
    drain: bool = False,
    table_prefix: str | None = None,
) -> StreamSinks:
    """Write every output of streaming ``results`` (:class:`wql.api.Results`) exactly once.

    ``table_prefix``: write each output to the table ``table_prefix + <name>`` of
    Spark's catalog (``DataStreamWriter.toTable``, created on first use) instead of
    ``output_dir/<name>``; ``output_dir`` still holds the operators' tagged streams.

    ``trigger`` is ``None`` for available-now (this call then returns after
    every stage finished) or a Spark processing-time interval (the queries
    keep running; stop them with :meth:`StreamSinks.stop`).

    ``drain`` (available-now only): after the rows there, end every stream:
    its watermark jumps to +inf, as at the end of a bounded source, so every
    remaining event-time window fires, rows that wait in windows that never
    fire are counted (``in no firing``), and ``CK/N/DRAINED`` records it. A
    later call on a drained checkpoint is refused. Every operator query of an
    event-time or count window runs with an end stream (``CK/N/end``), so a
    checkpoint started without ``drain`` can be drained later.
    """
    out = Path(output_dir)
    ck = Path(checkpoint_dir)
    if drain and trigger is not None:
        raise WqlError(
            "--drain ends the stream after the rows already there: it runs with "
            "--trigger available-now",
            code=ErrorCode.USAGE,
        )
    sinks = StreamSinks()
    first: list[tuple[Any, Any]] = []
    for r in results.queries:
        if not r.source.isStreaming:
            raise WqlSemanticError(
                f"query {r.name!r} reads a batch source; start_streams needs streaming results",
                hint="pass streaming DataFrames to apply() (spark.readStream...)",
                code=ErrorCode.USAGE,
            )
        refuse_drained(r.name, ck / r.name)
        if r.run is None:  # native: one streaming query
            if drain:
                raise WqlUnsupportedError(
                    f"query {r.name!r} runs on the native engine, which has no end of input",
                    r.plan.span,
                    code=ErrorCode.UNSUPPORTED,
                )
            first.append((r, None))
            continue
        run = r.run
        if run.time_mode == "ProcessingTime":
            if drain:
                raise WqlUnsupportedError(
                    f"query {r.name!r} uses processing time, which has no end of input: its "
                    "windows never fire at the end (as in batch) and Spark's processing-time "
                    "timers cannot reach every key there, so its stream cannot be drained",
                    r.plan.span,
                    hint="run it without --drain (with --trigger interval=<duration>)",
                    code=ErrorCode.UNSUPPORTED,
                )
            if trigger is None:
                raise WqlUnsupportedError(
                    f"query {r.name!r} uses processing time: its Spark timers keep an "
                    "available-now stream alive forever",
                    r.plan.span,
                    hint="use --trigger interval=<duration>",
                    code=ErrorCode.UNSUPPORTED,
                )
        else:
            end = ck / r.name / END_DIR
            end.mkdir(parents=True, exist_ok=True)
            spark = run.tagged.sparkSession
            # an idle source's end stream also takes the idle monitor's heartbeats
            schema = "drained_at STRING" + (
                f", {HEARTBEAT_COLUMN} LONG" if run.idle_ms is not None else ""
            )
            markers = spark.readStream.schema(schema).json(str(end))
            run = run.with_end(markers)
            if run.heartbeats and run.idle_ms is not None:
                monitor = IdleMonitor(run.idle_ms, end, ck / r.name)
                # quiet since the last run: the first micro-batch already takes a heartbeat
                monitor.beat()
                sinks.monitors[r.name] = monitor
        first.append((r, run))
    try:
        stage1 = _start_operators(first, sinks, out, ck, fmt, trigger, table_prefix)
        sinks.stages.append(stage1)
        _follow_idle(first, stage1, sinks, trigger)
        if trigger is None:
            _await(stage1)
            _follow_idle(first, stage1, sinks, trigger)
            if drain:
                # a second pass: the end marker is read after every row that was
                # there (with it in the first pass, rows of later micro-batches
                # would arrive after the end)
                for r, run in first:
                    if run is not None and run.drainable:
                        _write_once(ck / r.name / END_DIR / END_FILE, _now_json("drained_at"))
                stage1 = _start_operators(first, sinks, out, ck, fmt, trigger, table_prefix)
                sinks.stages.append(stage1)
                _await(stage1)
                _follow_idle(first, stage1, sinks, trigger)
            for r, run in first:
                # also when an earlier drain stopped before it finished: this run ended it
                if run is not None and (ck / r.name / END_DIR / END_FILE).exists():
                    _write_once(ck / r.name / DRAINED, _now_json("drained_at"))
                    sinks.drained.add(r.name)
        stage2 = []
        for r, run in first:
            if run is None:
                continue
            spark = run.tagged.sparkSession
            # a continuous stage 2 may start before stage 1 made its folder
            if "://" not in str(sinks.tagged[r.name]):
                sinks.tagged[r.name].mkdir(parents=True, exist_ok=True)
            tagged = spark.readStream.schema(run.tagged.schema).parquet(str(sinks.tagged[r.name]))
            result, late = run.read(tagged)
            sinks.outputs[r.name] = out / r.name
            stage2.append(
                _sink(
                    result,
                    out / r.name,
                    ck / r.name / "result",
                    fmt,
                    trigger,
                    f"{r.name}",
                    _table(sinks, table_prefix, r.name),
                )
            )
            if r.late_name is not None and late is not None:
                sinks.outputs[r.late_name] = out / r.late_name
                stage2.append(
                    _sink(
                        late,
                        out / r.late_name,
                        ck / r.name / "late",
                        fmt,
                        trigger,
                        f"{r.late_name}",
                        _table(sinks, table_prefix, r.late_name),
                    )
                )
        sinks.stages.append(stage2)
        if trigger is None:
            _await(stage2)
    except BaseException:
        sinks.stop()
        raise
    return sinks


def _start_operators(
    first: list[tuple[Any, Any]],
    sinks: StreamSinks,
    out: Path,
    ck: Path,
    fmt: str,
    trigger: str | None,
    table_prefix: str | None = None,
) -> list[Any]:
    """Start stage 1: native queries to their outputs, operator queries to the tagged sinks."""
    stage1 = []
    for r, run in first:
        if run is None:
            sinks.outputs[r.name] = out / r.name
            table = _table(sinks, table_prefix, r.name)
            stage1.append(
                _sink(r.df, out / r.name, ck / r.name / "result", fmt, trigger, r.name, table)
            )
            continue
        path = out / TAGGED_DIR / r.name
        sinks.tagged[r.name] = path
        checkpoint = ck / r.name / "operator"
        if run.buckets is not None:
            refuse_other_buckets(run.tagged.sparkSession, r.name, checkpoint, run.buckets)
        sinks.operators[r.name] = checkpoint
        stage1.append(_sink(run.tagged, path, checkpoint, "parquet", trigger, f"{r.name} operator"))
        # one operator query starting at a time: each start launches a Python
        # worker on the driver that Spark waits 10 s for; several at once on
        # a busy machine failed with "Python worker failed to connect back"
        _first_batch(stage1[-1])
    return stage1


def _follow_idle(
    first: list[tuple[Any, Any]], stage1: list[Any], sinks: StreamSinks, trigger: str | None
) -> None:
    """The idle monitors follow their stage-1 queries: a running one (``trigger``)
    on a thread, a finished available-now one through its progress."""
    for (r, _), query in zip(first, stage1, strict=True):
        monitor = sinks.monitors.get(r.name)
        if monitor is None:
            continue
        if trigger is None:
            if not query.isActive:
                monitor.absorb(query.recentProgress)
        else:
            monitor.watch(query)


def refuse_drained(name: str, ck: Path) -> None:
    """Refuse to run the query ``name`` on its checkpoint folder ``ck`` (``CK/N``) once
    its stream was drained; a file check, so ``wql run --stream`` makes it before Spark
    starts."""
    marker = ck / DRAINED
    if marker.exists():
        try:
            when = json.loads(marker.read_text()).get("drained_at", "?")
        except ValueError:
            when = "?"
        raise WqlError(
            f"query {name!r}: its stream was drained ({marker}, at {when}): it has ended "
            "and takes no more rows",
            hint="start a new stream with another --checkpoint (and --output) folder",
            code=ErrorCode.USAGE,
        )


def _write_once(path: Path, text: str) -> None:
    """``path`` with ``text``, unless it exists (written under a hidden name, then renamed:
    the end stream's file source never sees half a file)."""
    if not path.exists():
        write_atomic(path, text)


def _now_json(key: str) -> str:
    return json.dumps({key: dt.datetime.now(dt.UTC).isoformat(timespec="seconds")}) + "\n"


def _table(sinks: StreamSinks, prefix: str | None, name: str) -> str | None:
    """The table output ``name`` goes to (None: its folder), recorded in ``sinks``."""
    if prefix is None:
        return None
    sinks.tables[name] = prefix + name
    return prefix + name


def _sink(
    df: DataFrame,
    path: Path,
    checkpoint: Path,
    fmt: str,
    trigger: str | None,
    name: str,
    table: str | None = None,
) -> Any:
    if table is not None:
        # a table is written in its own format (a new one in Spark's default, parquet)
        writer = (
            df.writeStream.outputMode("append")
            .option("checkpointLocation", str(checkpoint))
            .queryName(f"wql {name}".replace(" ", "_"))
        )
    else:
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
    # the table's own location (a catalog table), exactly once as a file sink
    return writer.toTable(table) if table is not None else writer.start()


def _first_batch(query: Any) -> None:
    """Wait until ``query`` finished its first micro-batch, stopped or failed."""
    while query.isActive and not query.recentProgress:
        time.sleep(0.1)


def _await(queries: list[Any]) -> None:
    for q in queries:
        q.awaitTermination()
        err = q.exception()
        if err is not None:
            raise WqlError(
                f"streaming query {q.name} failed: {_first_line(err)}", code=ErrorCode.SPARK
            )


# --------------------------------------------------------------------------- what was committed


def tagged_counters(spark: Any, tagged: str | Path) -> dict[str, Any]:
    """The counters of an operator query's tagged sink, over every run on its checkpoint.

    ``rows_in`` (the rows the query read, as batch counts them: those its WHERE
    rejected too), ``rows_filtered`` (those), ``rows_emitted``, ``late_rows``,
    ``dropped`` by reason and ``rows_fired`` (``rows_in - rows_filtered -
    late_rows - dropped``: exact once the stream is drained, as in batch).
    """
    try:
        rows = L.counters_of(spark.read.parquet(str(tagged))).collect()
    except Exception:  # noqa: BLE001 - nothing committed yet
        rows = []
    total = L.sum_counters(row[L.COUNTERS] for row in rows)
    total.setdefault("rows_filtered", 0)
    total["rows_fired"] = (
        total["rows_in"]
        - total["rows_filtered"]
        - total["late_rows"]
        - sum(total["dropped"].values())
    )
    return total


def waiting_rows(spark: Any, checkpoint: str | Path) -> int:
    """Rows an operator query's processors took in whose count waits in their state.

    A processor call that only adds rows to windows emits nothing: its rows
    ride on the key's next counters row (``pending_rows`` in
    :data:`wql.spark.streaming.STATE_SCHEMA`), so the tagged sink's ``rows_in``
    lags the rows read. Spark's state reader gives the state of the last
    committed micro-batch of the query checkpointed at ``checkpoint``
    (``CK/N/operator``); 0 before one committed.
    """
    if "://" not in str(checkpoint) and not any(Path(checkpoint, "commits").glob("[0-9]*")):
        return 0
    state = spark.read.format("statestore").option("stateVarName", STATE_NAME).load(str(checkpoint))
    total = state.selectExpr("sum(value.pending_rows)").first()
    return int(total[0] or 0) if total is not None else 0


def refuse_other_buckets(spark: Any, name: str, checkpoint: Path, buckets: int) -> None:
    """Refuse to run query ``name``, grouped into ``buckets`` key buckets, on the operator
    checkpoint ``checkpoint`` (``CK/N/operator``) when its state was written with another
    count: its keys would sit in other buckets, and a bucket the stream has not met
    would start empty (:class:`wql.spark.streaming.BucketProcessor` refuses only the
    buckets it reads). A read of the last committed state, before Spark starts."""
    if not any(Path(checkpoint, "commits").glob("[0-9]*")):
        return
    try:
        state = spark.read.format("statestore").option("stateVarName", STATE_NAME)
        counts = {
            int(r[0])
            # the low 16 bits: the rest is the bucket's key layout (bucket_stamp)
            for r in state.load(str(checkpoint))
            .selectExpr("value.buckets & 65535")
            .distinct()
            .collect()
        }
    except Exception:  # noqa: BLE001 - state of another layout: Spark refuses it at start
        return
    other = sorted(counts - {buckets})
    if other:
        raise WqlUnsupportedError(
            f"query {name!r}: its checkpoint ({checkpoint}) keeps its keys in {other[0]} "
            f"buckets; this stream groups them into {buckets}",
            hint=f"restart it with {KEY_BUCKETS_CONF} = {other[0]} (the WQL version that "
            "wrote the checkpoint had that count by default unless it was set), or start "
            "the stream on a new checkpoint",
            code=ErrorCode.SNAPSHOT,
        )


def committed_rows(spark: Any, path: Path, fmt: str) -> int:
    """Rows an output sink committed so far (all runs on its checkpoint)."""
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


def _first_line(e: Any) -> str:
    lines = [ln for ln in str(e).strip().splitlines() if ln.strip()]
    return lines[0] if lines else type(e).__name__
