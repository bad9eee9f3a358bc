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

from pyspark.sql import DataFrame, Window
from pyspark.sql import functions as F

from wql.compiler import plan as P
from wql.compiler.backends.escaping import sql_identifier
from wql.compiler.backends.native import (
    REASON_NULL_EVENT_TIME,
    build_native_join,
    event_time_sql,
    join_side_steps,
    run_steps,
    window_table_steps,
)
from wql.runtime.assigners import DROP_LATE
from wql.runtime.windows import MIN_TIME
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


def run_window_join(
    join: P.WindowJoin,
    left: DataFrame,
    right: DataFrame,
    *,
    roots: tuple[tuple[P.SourceRef, DataFrame], ...] | None = None,
) -> JoinRun:
    """The window join over its sides' input DataFrames (a view's result, or a window
    table's table), late rows left out and counted. Runs the counting jobs; the result
    stays lazy.

    ``roots``: each side's root source and its DataFrame; for a join of two sources
    replayed in arrival order, the late sides see the combined watermark of both
    (:func:`combined_replay`)."""
    sides: list[DataFrame] = []
    dropped_parts: list[DataFrame] = []
    counts: dict[str, Any] = {"rows_in": 0, "dropped": {}}
    per_side: dict[str, dict[str, Any]] = {}
    replays: list[R.Replay] = []
    cached: list[DataFrame] = []
    combined: list[_SideReplay] | None = None
    if (
        roots is not None
        and roots[0][0].name.lower() != roots[1][0].name.lower()
        and any(late_side(s) for s in join.sides)
    ):
        combined = combined_replay(roots, cached)
    for i, (side, df) in enumerate(zip(join.sides, (left, right), strict=True)):
        mine = combined[i] if combined is not None else None
        rows, dropped, n_in, lost = _side(side, df, replays, cached, mine)
        sides.append(rows)
        if dropped is not None:
            dropped_parts.append(dropped)
        counts["rows_in"] += n_in
        per_side[side.qualifier] = {"rows_in": n_in, "dropped": dict(lost)}
        for reason, n in lost.items():
            counts["dropped"][reason] = counts["dropped"].get(reason, 0) + n
    result = build_native_join(join, sides[0], sides[1], sides_done=True)
    dropped_rows = dropped_parts[0] if dropped_parts else _no_rows(left)
    if len(dropped_parts) == 2 and len(dropped_parts[1].columns) == len(dropped_rows.columns):
        # both sides' rows left out (two sources, each replayed), the second's columns
        # by position under the first's names
        dropped_rows = dropped_rows.union(dropped_parts[1])
    counters = {
        "rows_in": counts["rows_in"],
        "rows_replayed": counts["rows_in"],
        "rows_filtered": 0,
        "late_rows": 0,
        "rows_fired": counts["rows_in"] - sum(counts["dropped"].values()),
        "dropped": counts["dropped"],
        # as Flink's window join counts late rows per input (leftNumLateRecordsDropped,
        # rightNumLateRecordsDropped): each side's rows in and drops, by the side's name
        "sides": per_side,
    }
    return JoinRun(join, result, None, dropped_rows, counters, cached, replays)


@dataclass(frozen=True)
class _SideReplay:
    """One source's rows of a combined replay: its columns with ``__wql_ts``,
    ``__wql_wm`` (the join's watermark before the row) and ``__wql_seq``; its rows left
    out (with ``reason``), their counts by reason, and its rows replayed."""

    df: DataFrame
    dropped: DataFrame
    dropped_counts: dict[str, int]
    rows_replayed: int


_SRC = "__wql_src"


def combined_replay(
    roots: tuple[tuple[P.SourceRef, DataFrame], ...], cached: list[DataFrame]
) -> list[_SideReplay]:
    """Two sources replayed as one stream in their shared arrival order, each row with the
    join's watermark before it (docs/architecture.md, "Window joins of two sources").

    The order is ``(arrival, source, input order)``: a tie of arrival between the
    sources puts the left side's source first. Each source's watermark is its own,
    ``max(ts of its rows before) - delay - 1`` (``MIN_TIME`` before its first row); the
    join's is the minimum of the two (Flink's ``IndexedCombinedWatermarkStatus``: an
    input that has sent no watermark holds it at ``Long.MIN_VALUE``). Both sources end
    together, after the last row. One unpartitioned window function over both sources'
    rows (one task).
    """
    staged = []
    for ref, df in roots:
        et = ref.event_time
        assert et is not None and ref.arrival_order is not None  # the binder checked it
        spec = R.ReplaySpec(et.column, et.delay_ms, arrival_order=ref.arrival_order)
        staged.append((R.prepare(df, spec), et.delay_ms))
    structs = [F.struct(*[F.col(sql_identifier(c)) for c in st.source_cols]) for st, _ in staged]
    types = [
        st.df.select(row.alias("r")).schema["r"].dataType
        for (st, _), row in zip(staged, structs, strict=True)
    ]
    parts = []
    for i, (st, _) in enumerate(staged):
        rows = [
            (structs[j] if j == i else F.lit(None).cast(types[j])).alias(f"__wql_r{j}")
            for j in range(2)
        ]
        parts.append(
            st.df.select(
                F.lit(i).alias(_SRC),
                F.col(R.ARRIVAL).cast("long").alias(R.ARRIVAL),
                F.col(R.INPUT_FILE),
                F.col(R.INPUT_ID),
                F.col(R.TS),
                F.col(R._DROP),
                *rows,
            )
        )
    union = parts[0].unionByName(parts[1])
    order = [R.ARRIVAL, _SRC, R.INPUT_FILE, R.INPUT_ID]
    before = Window.orderBy(*order).rowsBetween(Window.unboundedPreceding, -1)
    marks = []
    for i, (_, delay) in enumerate(staged):
        seen = F.max(F.when(F.col(_SRC) == i, F.col(R.TS))).over(before)
        marks.append(F.coalesce(seen - F.lit(delay + 1), F.lit(MIN_TIME)))
    replayed = (
        union.where(F.col(R._DROP).isNull())
        .select(
            "*",
            F.least(*marks).alias(R.WM),
            F.row_number().over(Window.orderBy(*order)).cast("long").alias(R.SEQ),
        )
        .persist()
    )
    cached.append(replayed)
    counts = {(int(r[0]), r[1]): int(r[2]) for r in union.groupBy(_SRC, R._DROP).count().collect()}
    out = []
    for i, (st, _) in enumerate(staged):
        mine = replayed.where(F.col(_SRC) == i).select(
            f"__wql_r{i}.*", F.col(R.TS), F.col(R.WM), F.col(R.SEQ)
        )
        dropped = {reason: n for (src, reason), n in counts.items() if src == i and reason}
        out.append(_SideReplay(mine, st.dropped, dropped, counts.get((i, None), 0)))
    return out


def _side(
    side: P.JoinSide,
    df: DataFrame,
    replays: list[R.Replay],
    cached: list[DataFrame],
    combined: _SideReplay | None = None,
) -> tuple[DataFrame, DataFrame | None, int, dict[str, int]]:
    """One side's rows (internal names), its dropped rows, its rows in, and drops by reason.

    ``combined``: the side's source replayed with the other side's (a join of two
    sources), whose combined watermark its rows see."""
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
    if combined is None:
        spec = R.ReplaySpec(et.column, et.delay_ms, arrival_order=side.source.arrival_order)
        replayed = R.replay(df, spec)
        replays.append(replayed)
        lost.update(replayed.dropped_counts)
        rows, dropped, n_replayed = replayed.df, replayed.dropped, replayed.rows_replayed
    else:
        lost.update(combined.dropped_counts)
        rows, dropped, n_replayed = combined.df, combined.dropped, combined.rows_replayed
    # the windows from the event time again (the replay's own column dropped first)
    windowed = run_steps(window_table_steps(side.window, et), rows.drop(R.TS))
    # isWindowFired: a window whose end - 1 the row's watermark reached has joined
    kept = windowed.where(F.expr(f"UNIX_MILLIS(window_end) - 1 > {R.WM}")).persist()
    cached.append(kept)
    in_time = kept.select(R.SEQ).distinct().count()
    late = n_replayed - in_time
    if late:
        lost[DROP_LATE] = late
    named = join_side_steps(side)[-1:]  # the side's columns under their internal names
    return run_steps(named, kept), dropped, rows_in, lost


def _no_rows(df: DataFrame) -> DataFrame:
    return df.where(F.lit(False)).select("*", F.lit(None).cast("string").alias("reason"))
