"""The window join host: Flink SQL's window join in batch, on Spark.

Flink's ``WindowJoinOperator`` keys both inputs by the join keys, buffers
each side's rows per window end, and when the (combined) watermark passes a
window's max timestamp joins its two buffers and clears them; a row of a
window that has fired already is late: dropped and counted
(``isWindowFired``). Every window therefore joins exactly once, all its
rows that came in time on both sides, so in batch the join is Spark's join
of the two sides' rows on ON (window bounds, keys, the rest), after leaving
out the late rows -- and only a window table over a source replayed out of
event-time order (``arrival_order``) has late rows: a view's rows are final
ON_TIME rows, which reach the join before the watermark passes their
window, and an event-time replay never brings a row behind the watermark of
its own windows (docs/architecture.md, "Contract: pipelines"). Such a side
is replayed (:mod:`wql.spark.replay`) for each row's watermark, and its
late (row, window) pairs are left out; a row none of whose windows takes it
is counted under ``late``. The planner runs a join without such a side on
the native engine (the same Spark join, without the replay).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from wql.compiler import plan as P
from wql.compiler.backends.native import (
    REASON_NULL_EVENT_TIME,
    build_native_join,
    event_time_sql,
    join_side_steps,
    run_steps,
    window_table_steps,
)
from wql.runtime.assigners import DROP_LATE
from wql.spark import replay as R

__all__ = ["JoinRun", "run_window_join", "late_side"]


@dataclass
class JoinRun:
    """The outcome of a window join: its result, the rows left out and the counters.

    ``counters``: ``rows_in`` (both sides' rows), ``rows_fired`` (rows in a
    window's join), ``late_rows`` (0: a join has no late output) and
    ``dropped`` by reason (``late``, ``null event time``).
    """

    query: P.WindowJoin
    result: DataFrame
    late: None
    dropped: DataFrame
    counters: dict[str, Any]
    _cached: list[DataFrame] = field(default_factory=list, repr=False)
    _replays: list[R.Replay] = field(default_factory=list, repr=False)

    def release(self) -> None:
        for df in self._cached:
            df.unpersist()
        self._cached.clear()
        for r in self._replays:
            r.release()
        self._replays.clear()


def late_side(side: P.JoinSide) -> bool:
    """Whether the side can have late rows: a window table over a source replayed out of
    event-time order."""
    src = side.source
    return side.window is not None and src.view is None and src.arrival_order is not None


def run_window_join(join: P.WindowJoin, left: DataFrame, right: DataFrame) -> JoinRun:
    """The window join over its sides' input DataFrames (a view's result, or a window
    table's table), late rows left out and counted. Runs the counting jobs; the result
    stays lazy."""
    sides: list[DataFrame] = []
    dropped_parts: list[DataFrame] = []
    counts: dict[str, Any] = {"rows_in": 0, "dropped": {}}
    replays: list[R.Replay] = []
    cached: list[DataFrame] = []
    for side, df in zip(join.sides, (left, right), strict=True):
        rows, dropped, n_in, lost = _side(side, df, replays, cached)
        sides.append(rows)
        if dropped is not None:
            dropped_parts.append(dropped)
        counts["rows_in"] += n_in
        for reason, n in lost.items():
            counts["dropped"][reason] = counts["dropped"].get(reason, 0) + n
    result = build_native_join(join, sides[0], sides[1], sides_done=True)
    dropped_rows = dropped_parts[0] if dropped_parts else _no_rows(left)
    counters = {
        "rows_in": counts["rows_in"],
        "rows_replayed": counts["rows_in"],
        "rows_filtered": 0,
        "late_rows": 0,
        "rows_fired": counts["rows_in"] - sum(counts["dropped"].values()),
        "dropped": counts["dropped"],
    }
    return JoinRun(join, result, None, dropped_rows, counters, cached, replays)


def _side(
    side: P.JoinSide, df: DataFrame, replays: list[R.Replay], cached: list[DataFrame]
) -> tuple[DataFrame, DataFrame | None, int, dict[str, int]]:
    """One side's rows (internal names), its dropped rows, its rows in, and drops by reason."""
    rows_in = df.count()
    lost: dict[str, int] = {}
    if not late_side(side):
        steps = join_side_steps(side)
        if side.window is not None:
            et = side.source.event_time
            assert et is not None
            null = df.where(F.expr(f"{event_time_sql(et.column, None)} IS NULL")).count()
            if null:
                lost[REASON_NULL_EVENT_TIME] = null
        return run_steps(steps, df), None, rows_in, lost
    et = side.source.event_time
    assert et is not None and side.window is not None
    spec = R.ReplaySpec(et.column, et.delay_ms, arrival_order=side.source.arrival_order)
    replayed = R.replay(df, spec)
    replays.append(replayed)
    lost.update(replayed.dropped_counts)
    # the windows from the event time again (the replay's own column dropped first)
    windowed = run_steps(window_table_steps(side.window, et), replayed.df.drop(R.TS))
    # isWindowFired: a window whose end - 1 the row's watermark reached has joined
    kept = windowed.where(F.expr(f"UNIX_MILLIS(window_end) - 1 > {R.WM}")).persist()
    cached.append(kept)
    in_time = kept.select(R.SEQ).distinct().count()
    late = replayed.rows_replayed - in_time
    if late:
        lost[DROP_LATE] = late
    named = join_side_steps(side)[-1:]  # the side's columns under their internal names
    return run_steps(named, kept), replayed.dropped, rows_in, lost


def _no_rows(df: DataFrame) -> DataFrame:
    return df.where(F.lit(False)).select("*", F.lit(None).cast("string").alias("reason"))
