"""Small inputs in one Spark job: the replay and the operator in the driver.

A small operator query used to pay for several Spark jobs before its first
result row (the replay's statistics, its summary collect, the operator's
collect, the counters): fixed costs of ~0.3–1 s each on a busy machine,
for 60 rows (docs/benchmarks.md, "Small inputs"). Here the source's rows
are read ONCE: one ``toArrow`` of every source row's replay columns (input
order, event time, processing time, arrival, drop reason), whether it
passes ``WHERE`` and the operator's keys and values (evaluated in Spark,
only for the rows that reach the operator: ``CASE WHEN``, so an expression
that fails on a row ``WHERE`` rejects still never runs on it). The driver
then does what the window replay does in Spark: counts the drops, sorts the
replayed rows in replay order (primary order column, input file, id: Arrow's
byte order of the path is Spark's), gives each the watermark
``max(ts before) - delay - 1`` and the running maximum of the processing
time, and feeds the rows that pass ``WHERE`` to the same partition task as a
one-partition run, in the same order, with the same final clocks. So the
results, late rows and counters are those of the other strategies (tests:
``tests/spark/test_driver_run.py``).

It applies to sources whose size Spark estimates at no more than
:data:`wql.spark.batch.SMALL_INPUT_BYTES` without a job, when nothing needs
the global sequence of clock changes or the rows' global positions (not a
pipeline's first stage, no mixed clocks) and no idle timeout is measured.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from wql.compiler import plan as P
from wql.compiler.backends.operator import OperatorPlan
from wql.compiler.clock_dependence import depends_on_watermark_sequence
from wql.runtime.windows import MIN_TIME
from wql.spark import layout as L
from wql.spark import replay as R

#: the column telling whether a replayed row passes WHERE (reaches the operator)
PASS = "__wql_pass"


def applies(spec: R.ReplaySpec, op: OperatorPlan, tag: bool) -> bool:
    """Whether a query's replay can run in the driver (its size aside)."""
    return not tag and not op.mixes_time_domains and not spec.idle


def collect(
    query: P.OperatorStage, op: OperatorPlan, source: DataFrame, spec: R.ReplaySpec
) -> tuple[R.Replay, pa.Table]:
    """Read ``source`` once: the replay (counts, clocks) and the operator's rows.

    Returns the replay (``df`` is the lazy replayed relation, for callers that
    want it; its counts and final clocks are known) and the operator's input
    rows in replay order: key columns, value columns, ``__wql_seq``,
    ``__wql_ts``, ``__wql_wm``, ``__wql_pt`` (as the window replay's staged rows).
    """
    prepared = R.prepare(source, spec)
    staged = prepared.df
    drop = F.col(R._DROP)
    passes: Column = drop.isNull()
    if query.filter is not None:
        # CASE WHEN: WHERE is evaluated on replayed rows only, as after the replay
        passes = F.when(drop.isNull(), F.coalesce(F.expr(query.filter.sql), F.lit(False)))
        passes = F.coalesce(passes, F.lit(False))
    key_cols = L.key_columns(len(op.keys))
    value_cols = L.value_columns(len(op.values))
    order_cols = [c for c in (R.ARRIVAL, R.INPUT_FILE, R.INPUT_ID) if c in staged.columns]
    table = (
        staged.withColumn(PASS, passes)
        .select(
            *[
                F.when(F.col(PASS), F.expr(k.expr.sql)).alias(c)
                for k, c in zip(op.keys, key_cols, strict=True)
            ],
            *[
                F.when(F.col(PASS), F.expr(v.sql)).alias(c)
                for v, c in zip(op.values, value_cols, strict=True)
            ],
            F.col(PASS),
            drop,
            F.col(R.TS),
            F.col(R.PT),
            *[F.col(c) for c in order_cols],
        )
        .toArrow()
    )
    reasons = table.column(R._DROP)
    dropped_counts: dict[str, int] = {}
    if reasons.null_count < len(reasons):
        for item in pc.value_counts(pc.drop_null(reasons)).to_pylist():
            dropped_counts[item["values"]] = item["counts"]
    kept = table.filter(pc.is_null(reasons))
    # replay order: the primary order column, then input order (file, then id)
    kept = kept.take(pc.sort_indices(kept, [(c, "ascending") for c in prepared.order]))
    n = kept.num_rows
    ts = _int64(kept.column(R.TS))
    wm, carry_ts = R.watermarks_before(ts, MIN_TIME, spec.delay_ms)
    summary = _summary(query, source, prepared, table, kept)
    pt_col: pa.Array
    if spec.processing_time:
        clock, carry_pt = R.running_clock(_int64(kept.column(R.PT)), MIN_TIME)
        pt_col = pa.array(clock)
    else:
        carry_pt = MIN_TIME
        pt_col = pa.nulls(n, pa.int64())
    columns = {c: kept.column(c) for c in key_cols + value_cols}
    columns[R.TS] = kept.column(R.TS).cast(pa.int64())
    columns[R.PT] = pt_col
    if summary is None:  # the window replay's columns: position and watermark
        columns[R.SEQ] = pa.array(np.arange(n, dtype=np.int64))
        columns[R.WM] = pa.array(wm)
    else:  # the task computes the watermarks from the summary, as in Spark
        columns[R.INPUT_ID] = kept.column(R.INPUT_ID)
        if spec.arrival_order:
            columns[R.ARRIVAL] = kept.column(R.ARRIVAL)
    rows = pa.table(columns).filter(kept.column(PASS))
    replayed = R.Replay(
        staged.filter(drop.isNull()),
        prepared.dropped,
        table.num_rows,
        dropped_counts,
        None if carry_ts == MIN_TIME else carry_ts,
        None if carry_pt == MIN_TIME else carry_pt,
        summary=summary,
    )
    return replayed, rows


def _summary(
    query: P.OperatorStage, source: DataFrame, prepared: Any, table: pa.Table, kept: pa.Table
) -> R.ReplaySummary | None:
    """The summary ``auto`` would replay with in Spark (None: the window strategy's).

    Built from the rows already read, as the summary jobs would build it: the
    same strategy, the same summary, only without the jobs.
    """
    spec = prepared.spec
    if not depends_on_watermark_sequence(query):
        return R.LocalClock(spec.delay_ms, R.local_order(prepared, source))
    summarisable = R.summary_applies(spec) and (
        spec.arrival_order is None or R._integral(R._field(prepared.df, R.ARRIVAL).dataType)
    )
    if not summarisable or not R.stable_input_order(source):
        return None
    # the statistics job's rows: per input partition (the id's upper bits), file and
    # drop reason, the rows and their id range
    ids = table.column(R.INPUT_ID).to_numpy(zero_copy_only=False).astype(np.int64)
    files = table.column(R.INPUT_FILE).to_pylist()
    reasons = table.column(R._DROP).to_pylist()
    groups: dict[tuple[int, str, str | None], list[int]] = {}
    for i, key in enumerate(zip((ids >> 33).tolist(), files, reasons, strict=True)):
        groups.setdefault(key, []).append(i)
    stats = [
        {
            "part": part,
            R.INPUT_FILE: file,
            R._DROP: reason,
            "rows": len(at),
            "lo": int(ids[at].min()),
            "hi": int(ids[at].max()),
        }
        for (part, file, reason), at in groups.items()
    ]
    plan = R._summary_plan(prepared, stats, R.SUMMARY_MAX_ROWS)
    if plan is None:
        return None
    narrow = [R.ARRIVAL, R.TS, R.INPUT_ID] if spec.arrival_order else [R.TS, R.INPUT_ID]
    return plan.summary(kept.select(narrow))[0]


def _int64(column: Any) -> np.ndarray:
    """An int64 clock column as NumPy, ``MIN_TIME`` for NULL (a row without that clock)."""
    return column.fill_null(MIN_TIME).to_numpy().astype(np.int64)
