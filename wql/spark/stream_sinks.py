"""Streaming sources and exactly-once file sinks: what ``wql run --stream`` runs
(its command line: :mod:`wql.commands.run_stream`).

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

import contextlib
import json
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql import types as ST

from wql.compiler import plan as P
from wql.compiler import types as T
from wql.errors import WqlError, WqlSemanticError, WqlUnsupportedError

__all__ = [
    "StreamSinks",
    "committed_drops",
    "committed_rows",
    "read_output",
    "read_stream_source",
    "start_streams",
]

TAGGED_DIR = "_wql_tagged"
_TEXT_FORMATS = ("csv", "json", "text")


# --------------------------------------------------------------------------- sources


def read_stream_source(spark: Any, decl: P.SourceDecl, base_dir: Path | None) -> DataFrame:
    """The streaming DataFrame a declared file source describes (new files = new rows)."""
    from wql.spark.sources import resolve_path

    if not decl.path:
        raise WqlSemanticError(
            f"source {decl.name!r} has no path to stream from",
            decl.span,
            hint="add WITH (path = '<folder>')",
        )
    path = resolve_path(decl.path, base_dir)
    local = "://" not in path and not path.startswith("file:")
    if local and Path(path).is_file():
        raise WqlSemanticError(
            f"source {decl.name!r}: a streaming source reads a folder of files, {path!r} is a file",
            decl.span,
            hint="point path at the folder new files arrive in",
        )
    if local and not Path(path).exists():
        raise WqlSemanticError(f"source {decl.name!r}: no such folder {path!r}", decl.span)
    fmt = (decl.format or "").lower()
    if not fmt:
        raise WqlSemanticError(
            f"source {decl.name!r}: a streaming source needs WITH (format = ...)",
            decl.span,
            hint="format = 'csv' | 'json' | 'parquet'",
        )
    options = dict(decl.reader_options)
    schema = _schema(spark, decl, path, fmt, options)
    try:
        return spark.readStream.format(fmt).schema(schema).options(**options).load(path)
    except Exception as e:  # noqa: BLE001 - Spark's errors become positioned WQL errors
        raise WqlSemanticError(
            f"source {decl.name!r}: Spark cannot stream {path!r} as {fmt}: {_first_line(e)}",
            decl.span,
        ) from None


def _schema(spark: Any, decl: P.SourceDecl, path: str, fmt: str, options: dict) -> str:
    """The file schema in DDL: declared order, or the CSV header's order when there is one."""
    columns = {c.name.lower(): c for c in decl.columns}
    order = [c.name for c in decl.columns]
    if fmt == "csv" and options.get("header", "false").lower() == "true":
        # the streaming CSV reader matches the schema by position: take the
        # header of the files already there, as the batch reader does
        try:
            header = spark.read.options(**{**options, "inferSchema": "false"}).csv(path).columns
        except Exception:  # noqa: BLE001 - an empty folder has no header yet
            header = []
        if header:
            missing = [c for c in order if c.lower() not in {h.lower() for h in header}]
            if missing:
                raise WqlSemanticError(
                    f"source {decl.name!r}: the CSV header of {path!r} has no column "
                    + ", ".join(repr(m) for m in missing),
                    decl.span,
                    hint=f"header columns: {', '.join(header)}",
                )
            order = header
    parts = []
    for name in order:
        col = columns.get(name.lower())
        type_ = T.to_spark(col.type).simpleString() if col is not None else "string"
        parts.append(f"`{name.replace('`', '``')}` {type_}")
    return ", ".join(parts)


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
            from wql.spark.batch import KIND, _late_output, _post_aggregation

            spark = run.tagged.sparkSession
            # a continuous stage 2 may start before stage 1 made its folder
            if "://" not in str(sinks.tagged[r.name]):
                sinks.tagged[r.name].mkdir(parents=True, exist_ok=True)
            tagged = spark.readStream.schema(run.tagged.schema).parquet(str(sinks.tagged[r.name]))
            result = _post_aggregation(r.plan, run.operator, tagged.where(F.col(KIND) == "R"))
            sinks.outputs[r.name] = out / r.name
            stage2.append(
                _sink(result, out / r.name, ck / r.name / "result", fmt, trigger, f"{r.name}")
            )
            if r.late_name is not None:
                late = _late_output(r.plan, run.operator, tagged.where(F.col(KIND) == "L"))
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
    if fmt == "csv":
        # CSV has no arrays: COLLECT_LIST results are written as JSON text (as batch runs)
        df = df.select(
            *[
                F.to_json(F.col(f"`{f.name}`")).alias(f.name)
                if isinstance(f.dataType, ST.ArrayType)
                else F.col(f"`{f.name}`")
                for f in df.schema.fields
            ]
        )
    writer = (
        df.writeStream.format(fmt)
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


# --------------------------------------------------------------------------- what was committed


def committed_rows(spark: Any, path: Path, fmt: str) -> int:
    """Rows an output sink committed so far (all runs on its checkpoint)."""
    try:
        return read_output(spark, path, fmt).count()
    except Exception:  # noqa: BLE001 - a sink that committed nothing has no files yet
        return 0


def committed_drops(spark: Any, tagged: Path) -> dict[str, int]:
    """``{reason: rows}`` dropped so far, from the drop counters an operator query's
    tagged sink committed (all runs on its checkpoint)."""
    from wql.spark.batch import COUNTERS, KIND

    try:
        rows = spark.read.parquet(str(tagged)).where(F.col(KIND) == "C").select(COUNTERS).collect()
    except Exception:  # noqa: BLE001 - nothing committed yet
        rows = []
    dropped: dict[str, int] = {}
    for row in rows:
        for reason, n in json.loads(row[0]).get("dropped", {}).items():
            dropped[reason] = dropped.get(reason, 0) + int(n)
    return dropped


def read_output(spark: Any, path: str | Path, fmt: str = "parquet") -> DataFrame:
    """A streaming output as Spark reads it: only the files its ``_spark_metadata`` committed."""
    reader = spark.read.format(fmt)
    if fmt == "csv":
        reader = reader.option("header", "true")
    return reader.load(str(path))


def _first_line(e: Any) -> str:
    lines = [ln for ln in str(e).strip().splitlines() if ln.strip()]
    return lines[0] if lines else type(e).__name__
