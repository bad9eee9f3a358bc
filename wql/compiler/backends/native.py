"""The native backend: a plan query as Spark's own operators.

A query runs natively only when Spark's result is provably the operator
engine's result (docs/native.md): an event-time TUMBLE/HOP/CUMULATE/SESSION window
with the default watermark trigger, no evictor, no lateness options, replay
in event-time order, and aggregates Spark computes the same way.
:func:`native_blockers` says why a query is not such a query;
``docs/native.md`` has the measurements behind every rule.

Why the result is the operator's: replayed in event-time order (docs/architecture.md)
no row is ever late (its watermark is below its own timestamp), so every
window the operator creates fires exactly once, ON_TIME, at end of input at
the latest, holding every row assigned to it. Spark's batch aggregation
computes exactly those windows, provided it assigns the same windows:

* event time is the event-time column floored to milliseconds
  (``__wql_ts``, BIGINT ms, as :func:`wql.spark.replay.event_time_millis`),
  and windows are computed on ``TIMESTAMP_MILLIS(__wql_ts)`` — Spark would
  otherwise keep microseconds and start a session at ``.999999``;
* rows whose event time is NULL are not windowed (Spark's ``window`` drops
  them silently; here they are filtered explicitly and counted by
  :func:`dropped_rows`, reason ``null event time`` as in batch replay);
* dynamic session gaps that are NULL or <= 0 are filtered explicitly and
  counted (reason ``invalid session gap``), never left to Spark's silent drop;
* touching sessions merge in both engines (Spark's MergingSessionsIterator
  merges when ``next.start <= current.end``, Flink when
  ``a.start <= b.end && a.end >= b.start``);
* ``window_time`` is ``window_end - 1 ms`` (Spark's ``window_time`` is
  ``end - 1 µs``), ``pane_index`` is 0 and ``pane_timing`` ``'ON_TIME'``;
  ``is_first`` and ``is_last`` are TRUE: the one firing is by the timer at
  the window's end, which is also its cleanup timer (no lateness);
* CUMULATE has no Spark function: each row's cumulative windows are
  generated with ``EXPLODE(SEQUENCE(...))`` and grouped.

The lowering is one list of relational steps (:class:`NativeProgram`): the
DataFrame builder (:func:`build_native`), the Spark SQL printer
(:func:`to_spark_sql`) and the PySpark script printer
(``wql.compiler.backends.pyspark_script``) all read the same steps, so the
three targets cannot drift apart.

>>> from wql.compiler import compile_source
>>> q = compile_source(
...     "CREATE SOURCE s (k STRING, ts TIMESTAMP, WATERMARK FOR ts AS ts - INTERVAL '1' SECOND);"
...     "SELECT k, window_start, COUNT(*) AS n FROM s GROUP BY k, TUMBLE(ts, INTERVAL '1' MINUTE);"
... ).queries[0]
>>> [type(step).__name__ for step in lower(q).steps]
['Project', 'Filter', 'Project', 'Watermark', 'Project', 'GroupAggregate', 'Project', 'Project']
>>> lower(q).steps[4].items[0].sql
"WINDOW(__wql_et, '60000 milliseconds')"

Streaming: the steps contain no batch-only operation (no sort, no limit, no
collect), and on a streaming DataFrame they put ``withWatermark`` on the
millisecond event-time column ``__wql_et`` right after it is computed
(Spark's watermark ``max - delay`` emits a window when ``end <= max -
delay``, which is Flink's ``end - 1 <= max - delay - 1``). Whether a query
may run so is the planner's decision, from
:data:`~wql.compiler.capabilities.NATIVE_STREAMING`: Spark handles rows
behind its watermark differently from the operator engine, so today no
query is native on a stream (``docs/native.md``, "Streaming").
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import sqlglot
from sqlglot import exp
from sqlglot.errors import SqlglotError

from wql.compiler import plan as P
from wql.compiler import types as T
from wql.compiler.capabilities import NATIVE, Capabilities, native_capabilities
from wql.compiler.planner import float_sum, sliced
from wql.compiler.planner import native_blockers as declared_blockers
from wql.compiler.types import WqlType
from wql.errors import ErrorCode, WqlUnsupportedError
from wql.limits import recursion_headroom
from wql.runtime.assigners import DROP_IN_NO_FIRING, DROP_LATE

DIALECT = "spark"
_DIALECT = sqlglot.Dialect.get_or_raise(DIALECT)

#: Columns the native lowering adds; the prefix keeps them apart from source columns.
TS = "__wql_ts"  # event time, BIGINT ms, floored
ET = "__wql_et"  # the same as TIMESTAMP (what Spark windows on)
GAP = "__wql_gap"  # dynamic session gap, BIGINT ms
CUM_START = "__wql_cs"  # CUMULATE: the size-aligned start, BIGINT ms
CUM_STEP = "__wql_ck"  # CUMULATE: the window's number of steps (1..size/step)
WIN = "__wql_w"  # the window struct (start, end)
FILE = "__wql_file"  # input order, part 1: the file a row was read from
ROWS = "__wql_rows"  # COUNT(*) of a query without aggregates (Spark's agg needs one)
ROW_ID = "__wql_id"  # input order, part 2: its position (as batch replay numbers rows)
ARRIVAL = "__wql_arr"  # arrival_order: the replay order's primary key (as batch replay's)
BEFORE = "__wql_before"  # arrival_order: largest event time of the rows before, in that order
SLICE = "__wql_slice"  # two-phase HOP/CUMULATE: the start of a row's slide (step), BIGINT ms
LATE = "__wql_late"  # two-phase under arrival_order: how many of the row's windows are late
WINDOW_INDEX = "__wql_j"  # two-phase: a slice's window, by end ascending from 0
PARTIAL = "__wql_p"  # two-phase: an aggregate's partial result per slice (+ its index)
PT = "__wql_pt"  # processing time: the declared column, BIGINT ms
EVENT_TS = "__wql_evt"  # processing time: the event time (replay order, drops), BIGINT ms
FINAL = "__wql_final"  # processing time: the clock after the last replayed row
RESERVED_PREFIX = "__wql_"

REASON_NULL_EVENT_TIME = "null event time"  # same text as wql.spark.replay
REASON_INVALID_GAP = "invalid session gap"  # same text as plan.DynamicSession
REASON_NULL_ARRIVAL_ORDER = "null arrival order"  # same text as wql.spark.replay
REASON_NULL_PROCESSING_TIME = "null processing time"  # same text as wql.spark.replay


# ---------------------------------------------------------------------------
# Capabilities (declared in wql.compiler.capabilities.NATIVE; checked here)


def native_blockers(query: P.Query, caps: Capabilities = NATIVE) -> tuple[P.Reason, ...]:
    """Every reason ``query`` cannot run natively, each pointing at its clause.

    The planner's blockers, read from the declaration
    :data:`wql.compiler.capabilities.NATIVE` (every Spark difference this
    backend does not handle is declared there). Empty when the native result
    is provably the operator engine's.
    """
    return tuple(declared_blockers(query, caps))


def check_native(query: P.Query, caps: Capabilities = NATIVE) -> None:
    """Raise a positioned WqlUnsupportedError when ``query`` cannot run natively."""
    reasons = native_blockers(query, caps)
    if reasons:
        first = reasons[0]
        more = [r.text for r in reasons[1:]]
        where = " on a stream" if caps.streaming else ""
        raise WqlUnsupportedError(
            f"query {query.name!r} cannot run on the native engine{where}: {first.text}",
            first.span,
            hint=("also: " + "; ".join(more)) if more else "use --engine operator",
            code=ErrorCode.NOT_NATIVE,
        )


# ---------------------------------------------------------------------------
# The lowering: relational steps shared by every native target


@dataclass(frozen=True)
class Item:
    """One projected, grouped or aggregated expression: Spark SQL text and its alias."""

    sql: str
    alias: str | None = None


@dataclass(frozen=True)
class Project:
    """``SELECT [*,] items``; ``keep`` keeps every input column."""

    items: tuple[Item, ...]
    keep: bool = True


@dataclass(frozen=True)
class Filter:
    """``WHERE condition`` (rows where it is NULL are dropped, as in SQL)."""

    condition: str


@dataclass(frozen=True)
class Watermark:
    """Streaming only: ``withWatermark(column, delay)``; batch ignores it."""

    column: str
    delay_ms: int


@dataclass(frozen=True)
class GroupAggregate:
    """``SELECT keys, aggregates GROUP BY keys`` (keys are aliased on output)."""

    keys: tuple[Item, ...]
    aggregates: tuple[Item, ...]


Step = Project | Filter | Watermark | GroupAggregate


@dataclass(frozen=True)
class NativeProgram:
    """A native query as steps over its source relation (named ``source``)."""

    query: str
    source: str
    steps: tuple[Step, ...]
    #: the output columns with their WQL types, in SELECT order
    schema: tuple[P.Column, ...]


def _q(name: str) -> str:
    """A column name as Spark SQL, always back-quoted (no reserved word can bite)."""
    return exp.column(name, quoted=True).sql(dialect=DIALECT)


def _ms(value: int) -> str:
    """A duration literal Spark's window functions accept, exact to the millisecond."""
    return f"'{value} milliseconds'"


def _cast(sql: str, t: WqlType) -> str:
    """``CAST(sql AS t)`` unless ``t`` is not known precisely enough to cast to."""
    if t.is_unknown or t.kind == "INTERVAL":
        return sql
    return f"CAST({sql} AS {t.ddl})"


def event_time_sql(column: str, column_type: WqlType | None) -> str:
    """Spark SQL giving the event time as BIGINT ms, floored (``UNIX_MILLIS`` floors).

    Mirrors :func:`wql.spark.replay.event_time_millis`: DATE and
    TIMESTAMP_NTZ are read as UTC, text is parsed and unparseable text is
    NULL (so the row is counted as dropped, not failed).
    """
    col = _q(column)
    if column_type is None or column_type == T.TIMESTAMP:
        return f"UNIX_MILLIS({col})"
    if column_type == T.DATE:
        return f"UNIX_MILLIS(CAST({col} AS TIMESTAMP))"
    if column_type == T.STRING:
        return f"UNIX_MILLIS(TRY_TO_TIMESTAMP({col}))"
    raise WqlUnsupportedError(
        f"event-time column {column!r} has type {column_type.ddl}; it must be a TIMESTAMP",
        code=ErrorCode.WRONG_TYPE,
    )


def arrival_sql(source: P.SourceRef) -> str:
    """Spark SQL giving a row's arrival key, as batch replay orders by it.

    Mirrors ``wql.spark.replay``'s arrival key: a number as it is, a TIMESTAMP
    or DATE as BIGINT ms, floored (rows of one millisecond tie, then go in
    input order).
    """
    assert source.arrival_order is not None
    column = source.column(source.arrival_order)
    assert column is not None  # SourceRef checks that it names a column
    if column.type.is_temporal:
        return event_time_sql(column.name, column.type)
    if column.type.is_numeric:
        return _q(column.name)
    raise WqlUnsupportedError(
        f"arrival_order column {column.name!r} has type {column.type.ddl}; "
        "it must be numeric or a TIMESTAMP",
        column.span or source.span,
        code=ErrorCode.WRONG_TYPE,
    )


def before_sql() -> str:
    """The largest event time of the replayed rows before this one in replay order.

    Spark's window over the whole input in replay order (arrival, then input
    order: ``INPUT_FILE_NAME()``, ``MONOTONICALLY_INCREASING_ID()``); a row
    without event time or arrival is not replayed, so it adds nothing.
    """
    return (
        f"MAX(CASE WHEN {ARRIVAL} IS NOT NULL THEN {TS} END) OVER (ORDER BY {ARRIVAL}, "
        f"{FILE}, {ROW_ID} ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING)"
    )


def on_time_sql(delay_ms: int) -> str:
    """True when the row's window ``__wql_w`` is not late for it (lateness 0).

    Late when ``end - 1 <= watermark = before - delay - 1``, i.e. ``end <=
    before - delay`` (no row before: never late; the watermark's clamp at
    ``MIN_TIME`` never makes a window late).
    """
    return f"{BEFORE} IS NULL OR UNIX_MILLIS({WIN}.`end`) > {BEFORE} - CAST({delay_ms} AS BIGINT)"


def _floor_div(a: str, b: int) -> str:
    """``floor(a / b)`` for BIGINT ``a`` and positive ``b`` (Spark's DIV truncates)."""
    return f"(({a}) - PMOD({a}, CAST({b} AS BIGINT))) DIV CAST({b} AS BIGINT)"


def _two_phase(
    query: P.Query, keys: tuple[Item, ...], arrival: bool, fires: str | None = None
) -> list[Step]:
    """The window aggregation in two phases over slices (:func:`wql.compiler.planner.sliced`).

    A slice is one slide of a HOP whose size is a multiple of it (or one step of a
    CUMULATE), ``[s, s + u)``: its rows' windows are the same, the ``j``-th by end
    ending at ``s + (j + 1) * u`` (``j`` from 0 to ``n - 1``; a HOP's start is that
    end less the size, a CUMULATE's the size-aligned start). Phase one aggregates
    each slice's rows per key; phase two gives every partial its windows and merges
    them per key and window. Under ``arrival_order`` a row is left out of the windows
    late for it, which are the first ``late`` by end (those ending at or before its
    watermark + 1), so phase one also groups by ``late``, and a row late for all
    ``n`` windows is in none (dropped as late, as the operator drops it).
    ``fires``: a processing-time query's final clock column, kept through phase
    one; only the windows it reaches are merged.
    """
    w = query.window
    et = query.source.event_time
    step = _ms_bigint
    if isinstance(w, P.Hop):
        u = w.slide_ms
        first = f"{TS} - PMOD({TS} - {step(w.offset_ms)}, {step(u)})"
        count = step(w.size_ms // u)
        start = f"{SLICE} + ({WINDOW_INDEX} + 1) * {step(u)} - {step(w.size_ms)}"
    else:
        assert isinstance(w, P.Cumulate)
        u = w.step_ms

        def aligned(t: str) -> str:  # t's offset in its size-aligned window
            return f"PMOD({t} - {step(w.offset_ms)}, {step(w.size_ms)})"

        # the slice: the step of ts in its size-aligned window
        first = f"{TS} - PMOD({aligned(TS)}, {step(u)})"
        # windows k = k0 .. size/step ending at s + k * step, k0 the slice's step (1-based)
        k0 = f"{aligned(SLICE)} DIV {step(u)} + 1"
        count = f"({step(w.size_ms // u)} - ({k0}) + 1)"
        start = f"{SLICE} - {aligned(SLICE)}"
    end = f"{SLICE} + ({WINDOW_INDEX} + 1) * {step(u)}"
    steps: list[Step] = [Project((Item(first, SLICE),))]
    group = [*keys, Item(SLICE, SLICE)]
    lowest = step(0)
    if fires is not None:
        group.append(Item(fires, fires))
    if arrival:
        assert et is not None
        # late windows: those ending at or before before - delay
        ahead = f"{BEFORE} - {step(et.delay_ms)} - {SLICE}"
        late = (
            f"CASE WHEN {BEFORE} IS NULL THEN {step(0)} ELSE "
            f"LEAST(GREATEST({_floor_div(ahead, u)}, {step(0)}), {count}) END"
        )
        steps.append(Project((Item(late, LATE),)))
        # a row late for all n windows is in none (counted as late by fired_rows)
        steps.append(Filter(f"{BEFORE} IS NULL OR {LATE} < {count}"))
        group.append(Item(LATE, LATE))
        lowest = LATE
    partials: list[Item] = []
    merged: list[Item] = []
    for i, a in enumerate(query.aggregates or (None,)):
        name = f"{PARTIAL}{i}"
        if a is None or a.kind is P.AggKind.COUNT_STAR:
            partials.append(Item("COUNT(*)", name))
            merge = f"SUM({name})"
        else:
            assert a.arg is not None
            partials.append(Item(f"{a.kind.value}({a.arg.sql})", name))
            merge = f"{'SUM' if a.kind is P.AggKind.COUNT else a.kind.value}({name})"
        merged.append(Item(merge, ROWS) if a is None else Item(_cast(merge, a.type), a.name))
    steps.append(GroupAggregate(tuple(group), tuple(partials)))
    steps.append(Project((Item(f"EXPLODE(SEQUENCE({lowest}, {count} - 1))", WINDOW_INDEX),)))
    struct = f"NAMED_STRUCT('start', TIMESTAMP_MILLIS({start}), 'end', TIMESTAMP_MILLIS({end}))"
    steps.append(Project((Item(struct, WIN),)))
    if fires is not None:
        steps.append(Filter(fires_sql()))
    out_keys = tuple(Item(_q(k.alias), k.alias) for k in keys if k.alias is not None)
    steps.append(GroupAggregate((*out_keys, Item(WIN, WIN)), tuple(merged)))
    return steps


def _ms_bigint(value: int) -> str:
    return f"CAST({value} AS BIGINT)"


def lower(
    query: P.Query, event_time_type: WqlType | None = None, caps: Capabilities = NATIVE
) -> NativeProgram:
    """The native steps of ``query``; raises WqlUnsupportedError when it cannot run natively.

    ``event_time_type`` is the actual type of the event-time column in the
    input (a caller's DataFrame may hold TIMESTAMP_NTZ, DATE or text); None
    means the declared TIMESTAMP.
    """
    check_native(query, caps)
    w = query.window
    keys = tuple(Item(k.expr.sql, k.name) for k in query.keys)
    if w.domain is P.TimeDomain.PROCESSING:
        steps = _processing_clock(query, event_time_type)
        first_key = _replay_primary(query.source)
        if sliced(query, caps):
            steps.extend(_two_phase(query, keys, arrival=False, fires=FINAL))
        else:
            steps.extend(_assign_windows(w))
            steps.append(Filter(fires_sql()))
            steps.append(_aggregate(query, keys, first_key))
        return _finish(query, steps)
    assert query.source.event_time is not None  # guaranteed by the plan for event-time windows
    et = query.source.event_time
    steps = []

    first = [Item(event_time_sql(et.column, event_time_type), TS)]
    if isinstance(w, P.DynamicSession):
        first.append(Item(f"CAST({w.gap_ms.sql} AS BIGINT)", GAP))
    arrival = query.source.arrival_order is not None
    if arrival or any(float_sum(a) for a in query.aggregates):
        # input order exactly as batch replay takes it: on the DataFrame as
        # given, before WHERE (Spark does not push filters below these
        # nondeterministic expressions)
        first += [Item("INPUT_FILE_NAME()", FILE), Item("MONOTONICALLY_INCREASING_ID()", ROW_ID)]
    if arrival:
        first.append(Item(arrival_sql(query.source), ARRIVAL))
    steps.append(Project(tuple(first)))
    if arrival:
        # each row's watermark is the largest event time before it in replay order
        # (arrival, then input order) less delay + 1 (docs/native.md, "Arrival order"):
        # every replayed row moves it, before WHERE; rows without event time or
        # arrival are not replayed and move nothing
        steps.append(Project((Item(before_sql(), BEFORE),)))
    if query.filter is not None:
        # WHERE reads the source row as written (not the floored event time),
        # exactly what the operator host evaluates before the operator
        steps.append(Filter(f"({query.filter.sql})"))
    valid = f"{TS} IS NOT NULL"
    if arrival:
        valid += f" AND {ARRIVAL} IS NOT NULL"
    if isinstance(w, P.DynamicSession):
        valid += f" AND {GAP} IS NOT NULL AND {GAP} > 0"
    steps.append(Filter(valid))
    steps.append(Project((Item(f"TIMESTAMP_MILLIS({TS})", ET),)))
    steps.append(Watermark(ET, et.delay_ms))
    if sliced(query, caps):
        steps.extend(_two_phase(query, keys, arrival))
    else:
        steps.extend(_assign_windows(w))
        if arrival:
            # a window is late for a row when its end - 1 is at or below the row's
            # watermark, before - delay - 1: the operator leaves the row out of it
            steps.append(Filter(on_time_sql(et.delay_ms)))
        steps.append(_aggregate(query, keys, ARRIVAL if arrival else TS))
    return _finish(query, steps)


def _aggregate(query: P.Query, keys: tuple[Item, ...], first_key: str) -> GroupAggregate:
    """One GROUP BY keys and window; floating sums fold in replay order (``first_key``,
    then input order)."""
    aggs = tuple(
        Item(_cast(_aggregate_sql(a, first_key), a.type), a.name) for a in query.aggregates
    )
    if not aggs:
        # a query may select only keys and window columns; Spark's agg() needs
        # one expression, which the next projection leaves out
        aggs = (Item("COUNT(*)", ROWS),)
    return GroupAggregate((*keys, Item(WIN, WIN)), aggs)


def _replay_primary(source: P.SourceRef) -> str:
    """The column a processing-time query's replay orders by first (then input order):
    the arrival key, else the event time, else the processing time (replay.py)."""
    if source.arrival_order is not None:
        return ARRIVAL
    return EVENT_TS if source.event_time is not None else PT


def clock_sql(source: P.SourceRef) -> str:
    """Spark SQL giving the declared processing-time column as BIGINT ms, as batch
    replay reads it (a TIMESTAMP or DATE floored to ms, an integer as is)."""
    assert source.processing_time is not None
    column = source.column(source.processing_time)
    assert column is not None  # SourceRef checks that it names a column
    if column.type.is_temporal:
        return event_time_sql(column.name, column.type)
    return f"CAST({_q(column.name)} AS BIGINT)"


def _processing_clock(query: P.Query, event_time_type: WqlType | None) -> list[Step]:
    """A processing-time query's rows with their clock as ``__wql_ts`` (and ``__wql_et``).

    Batch replay gives each row the running maximum of the declared
    processing-time column up to and including the row, in replay order
    (arrival, else event time, else processing time; then input order), over
    the rows it replays: those with a processing time (and an event time
    when the source has one, an arrival when it declares one). ``__wql_final``
    is that clock after the last row: the windows it reaches are the ones
    that fire (docs/native.md, "Processing time").
    """
    source = query.source
    first = [
        Item(clock_sql(source), PT),
        Item("INPUT_FILE_NAME()", FILE),
        Item("MONOTONICALLY_INCREASING_ID()", ROW_ID),
    ]
    replayed = [f"{PT} IS NOT NULL"]
    if source.event_time is not None:
        first.append(Item(event_time_sql(source.event_time.column, event_time_type), EVENT_TS))
        replayed.append(f"{EVENT_TS} IS NOT NULL")
    if source.arrival_order is not None:
        first.append(Item(arrival_sql(source), ARRIVAL))
        replayed.append(f"{ARRIVAL} IS NOT NULL")
    valid = " AND ".join(replayed)
    order = f"ORDER BY {_replay_primary(source)}, {FILE}, {ROW_ID}"
    clock = f"MAX(CASE WHEN {valid} THEN {PT} END) OVER ({order} ROWS BETWEEN UNBOUNDED PRECEDING"
    steps: list[Step] = [
        Project(tuple(first)),
        Project(
            (
                Item(f"{clock} AND CURRENT ROW)", TS),
                Item(f"{clock} AND UNBOUNDED FOLLOWING)", FINAL),
            )
        ),
    ]
    if query.filter is not None:
        steps.append(Filter(f"({query.filter.sql})"))
    steps.append(Filter(valid))
    steps.append(Project((Item(f"TIMESTAMP_MILLIS({TS})", ET),)))
    return steps


def fires_sql() -> str:
    """True when the clock reaches the end of the row's window ``__wql_w``: a processing-time
    window fires at its end (its timer at ``end - 1`` fires 1 ms later), and never at end
    of input."""
    return f"UNIX_MILLIS({WIN}.`end`) <= {FINAL}"


def _finish(query: P.Query, steps: list[Step]) -> NativeProgram:
    """The post-aggregation relation, HAVING and the SELECT list after the aggregation."""
    post = [Item(_q(k.name), k.name) for k in query.keys]
    post += [
        Item(f"{WIN}.start", "window_start"),
        Item(f"{WIN}.`end`", "window_end"),
        # WQL's window_time is Flink's maxTimestamp, end - 1 ms (Spark's is end - 1 µs)
        Item(f"TIMESTAMP_MILLIS(UNIX_MILLIS({WIN}.`end`) - 1)", "window_time"),
        Item("CAST(0 AS BIGINT)", "pane_index"),
        Item("'ON_TIME'", "pane_timing"),
    ]
    post += [Item("TRUE", n) for n in P.MARK_COLUMNS if query.reads(n)]
    post += [Item(_q(a.name), a.name) for a in query.aggregates]
    steps.append(Project(tuple(post), keep=False))
    if query.having is not None:
        steps.append(Filter(f"({query.having.sql})"))
    out = tuple(Item(_cast(c.expr.sql, c.type), c.name) for c in query.output)
    steps.append(Project(out, keep=False))
    return NativeProgram(query.name, query.source.name, tuple(steps), query.output_schema)


def lower_rank(
    stage: P.WindowRank, event_time_type: WqlType | None = None, caps: Capabilities = NATIVE
) -> NativeProgram:
    """The native steps of a window Top-N or deduplication: Spark's row_number per window
    (``rank`` / ``dense_rank`` for ``RANK()`` / ``DENSE_RANK()``).

    Equal rows rank in the order the operator gets them (``WindowRank``'s
    docstring and the planner's ``rank_blockers``): a view's rows of one
    window by the view's grouping keys (``ties``); a window table's rows in
    replay order (event time, then input order). A keep-last deduplication
    keeps the last of equal times: that order reversed. ``RANK()`` and
    ``DENSE_RANK()`` give equal rows one rank, so their order is not needed.
    """
    _check_rank(stage, caps)
    steps: list[Step] = []
    if stage.window is not None:
        et = stage.source.event_time
        assert et is not None  # a window table has event time (the binder)
        steps += window_table_steps(stage.window, et, event_time_type, stage.filter, order=True)
        ties = [TS, FILE, ROW_ID]
    else:
        if stage.filter is not None:
            steps.append(Filter(f"({stage.filter.sql})"))
        assert stage.ties is not None or stage.keep.tied  # _check_rank
        ties = [_q(c) for c in stage.ties or ()]
    if stage.keep.tied:
        ties = []
    start, end = stage.window_bounds
    partition = [_q(start), _q(end), *(k.expr.sql for k in stage.keys)]
    reverse = " DESC" if stage.keep is P.RankKeep.LAST else ""
    order = [o.expr.sql + (" DESC" if o.descending else "") for o in stage.order]
    order += [t + reverse for t in ties]
    over = f"PARTITION BY {', '.join(partition)} ORDER BY {', '.join(order)}"
    rank = f"{stage.keep.function}() OVER ({over})"
    steps.append(Project((Item(rank, P.RANK_COLUMN),)))
    steps.append(Filter(f"{P.RANK_COLUMN} <= {stage.limit}"))
    steps.append(
        Project(tuple(Item(_cast(c.expr.sql, c.type), c.name) for c in stage.inner), False)
    )
    if stage.condition is not None:
        steps.append(Filter(f"({stage.condition.sql})"))
    out = tuple(Item(_cast(c.expr.sql, c.type), c.name) for c in stage.output)
    steps.append(Project(out, keep=False))
    return NativeProgram(stage.name, stage.source.name, tuple(steps), stage.output_schema)


def window_table_steps(
    window: P.Window,
    event_time: P.EventTime,
    event_time_type: WqlType | None = None,
    where: P.Expr | None = None,
    *,
    order: bool = False,
) -> list[Step]:
    """A window table function's rows: every row (passing ``where``) in each of its windows,
    with ``window_start``, ``window_end`` and ``window_time``; rows without event time
    are left out (counted by the caller). ``order``: keep the replay order's columns
    (event time ``__wql_ts``, input file and position) for ties."""
    first = [Item(event_time_sql(event_time.column, event_time_type), TS)]
    if order:
        first += [Item("INPUT_FILE_NAME()", FILE), Item("MONOTONICALLY_INCREASING_ID()", ROW_ID)]
    steps: list[Step] = [Project(tuple(first))]
    if where is not None:
        steps.append(Filter(f"({where.sql})"))
    steps.append(Filter(f"{TS} IS NOT NULL"))
    steps.append(Project((Item(f"TIMESTAMP_MILLIS({TS})", ET),)))
    steps.append(Watermark(ET, event_time.delay_ms))
    steps.extend(_assign_windows(window))
    bounds = (
        Item(f"{WIN}.start", "window_start"),
        Item(f"{WIN}.`end`", "window_end"),
        Item(f"TIMESTAMP_MILLIS(UNIX_MILLIS({WIN}.`end`) - 1)", "window_time"),
    )
    steps.append(Project(bounds))
    return steps


def join_side_steps(side: P.JoinSide, event_time_type: WqlType | None = None) -> tuple[Step, ...]:
    """A window join side's rows under their internal names (a window table's windows
    assigned first)."""
    steps: list[Step] = []
    if side.window is not None:
        et = side.source.event_time
        assert et is not None  # a window table has event time (the binder)
        steps += window_table_steps(side.window, et, event_time_type)
    named = tuple(Item(_q(c.name), n) for n, c in zip(side.internal, side.columns, strict=True))
    steps.append(Project(named, keep=False))
    return tuple(steps)


#: How each join kind reads in Spark's DataFrame API and SQL.
JOIN_HOW = {
    P.JoinKind.INNER: ("inner", "JOIN"),
    P.JoinKind.LEFT: ("left", "LEFT JOIN"),
    P.JoinKind.RIGHT: ("right", "RIGHT JOIN"),
    P.JoinKind.FULL: ("full", "FULL OUTER JOIN"),
}


def build_native_join(join: P.WindowJoin, left, right, *, sides_done: bool = False):
    """A window join of the two sides' DataFrames (``sides_done``: already under their
    internal names, e.g. after the operator host's late filter)."""
    from pyspark.sql import functions as F

    if not sides_done:
        left = run_steps(join_side_steps(join.left, _side_type(left, join.left)), left)
        right = run_steps(join_side_steps(join.right, _side_type(right, join.right)), right)
    df = left.join(right, F.expr(join.on.sql), JOIN_HOW[join.kind][0])
    if join.where is not None:
        df = df.where(F.expr(join.where.sql))
    return run_steps((join_output(join),), df)


def join_output(join: P.WindowJoin) -> Project:
    """The join's SELECT list over the joined sides (cast to the output types)."""
    return Project(tuple(Item(_cast(c.expr.sql, c.type), c.name) for c in join.output), keep=False)


def join_to_spark_sql(join: P.WindowJoin, pretty: bool = True) -> str:
    """The window join as one Spark SQL statement over temp views named like its sides'
    tables."""
    sides = [
        program_to_sql(NativeProgram(join.name, s.source.name, join_side_steps(s), ()), False)
        for s in join.sides
    ]
    out = ", ".join(f"{_cast(c.expr.sql, c.type)} AS {_q(c.name)}" for c in join.output)
    sql = (
        f"SELECT {out} FROM ({sides[0]}) AS __wql_left {JOIN_HOW[join.kind][1]} "
        f"({sides[1]}) AS __wql_right ON {join.on.sql}"
    )
    if join.where is not None:
        sql += f" WHERE {join.where.sql}"
    with recursion_headroom():
        return sqlglot.transpile(sql, read=DIALECT, write=DIALECT, pretty=pretty)[0]


def _side_type(df, side: P.JoinSide) -> WqlType | None:
    """The type of a window table side's event-time column in ``df``."""
    from wql.compiler.types import from_spark

    et = side.source.event_time
    if side.window is None or et is None or side.source.view is not None:
        return None
    for f in df.schema.fields:
        if f.name.lower() == et.column.lower():
            return from_spark(f.dataType, column=f.name)
    return None


def _check_rank(stage: P.WindowRank, caps: Capabilities) -> None:
    from wql.compiler.planner import rank_blockers

    _refuse(stage, rank_blockers(stage, caps))  # the view's own engine: the planner's business


def _refuse(stage: P.Stage, reasons: Sequence[P.Reason]) -> None:
    """Raise the first of ``reasons`` ``stage`` cannot run natively for, if any."""
    if reasons:
        first = reasons[0]
        raise WqlUnsupportedError(
            f"query {stage.name!r} cannot run on the native engine: {first.text}",
            first.span,
            code=ErrorCode.NOT_NATIVE,
        )


def _aggregate_sql(a: P.Aggregate, first_key: str = TS) -> str:
    """The aggregate as Spark SQL over the windowed relation.

    Floating-point SUM/AVG are folded in replay order (``first_key``: event
    time, or the arrival key, then input order), as the operator adds them:
    Spark's own SUM adds partial sums in an order that depends on
    partitioning (docs/native.md measures 1.0, 4.0 and 5.0 for one input on
    1, 2 and 12 partitions). The price is that the window's values are
    collected before folding.
    """
    if not float_sum(a):
        return a.call_sql
    assert a.arg is not None
    rows = (
        f"ARRAY_SORT(COLLECT_LIST(NAMED_STRUCT('t', {first_key}, 'f', {FILE}, 'i', {ROW_ID}, "
        f"'x', CAST({a.arg.sql} AS DOUBLE))))"
    )
    # SQL's SUM: NULLs are skipped, no value at all gives NULL
    fold = (
        f"AGGREGATE({rows}, CAST(NULL AS DOUBLE), (acc, r) -> CASE WHEN r.x IS NULL THEN acc "
        "WHEN acc IS NULL THEN r.x ELSE acc + r.x END)"
    )
    if a.kind is P.AggKind.SUM:
        return fold
    return f"{fold} / COUNT({a.arg.sql})"


@functools.singledispatch
def _assign_windows(w: P.Window) -> list[Step]:
    """Steps that give every row its window(s) as the struct column ``__wql_w``.

    One handler per window class the native backend runs (the kinds of
    :data:`~wql.compiler.capabilities.NATIVE` ``.windows``; the others never
    reach it: ``native_blockers`` sends them to the operator engine).
    """
    raise AssertionError(f"not a native window: {w!r}")


def _window(*args: str) -> list[Step]:
    return [Project((Item(f"WINDOW({', '.join(args)})", WIN),))]


@_assign_windows.register
def _(w: P.Tumble) -> list[Step]:
    args = [ET, _ms(w.size_ms)]
    if w.offset_ms:
        args += [_ms(w.size_ms), _ms(w.offset_ms)]
    return _window(*args)


@_assign_windows.register
def _(w: P.Hop) -> list[Step]:
    # Spark's sliding window is Flink's for any size/slide ratio and for
    # negative times (floor modulo): measured in docs/native.md
    args = [ET, _ms(w.size_ms), _ms(w.slide_ms)]
    if w.offset_ms:
        args.append(_ms(w.offset_ms))
    return _window(*args)


@_assign_windows.register
def _(w: P.Session) -> list[Step]:
    return [Project((Item(f"SESSION_WINDOW({ET}, {_ms(w.gap_ms)})", WIN),))]


@_assign_windows.register
def _(w: P.DynamicSession) -> list[Step]:
    # session_window wants a calendar interval; text converts exactly
    gap = f"CONCAT(CAST({GAP} AS STRING), ' milliseconds')"
    return [Project((Item(f"SESSION_WINDOW({ET}, {gap})", WIN),))]


@_assign_windows.register
def _(w: P.Cumulate) -> list[Step]:
    n = w.size_ms // w.step_ms
    # s = ts - ((ts - offset) mod size) with floor modulo, as Flink's assigners
    start = f"{TS} - PMOD({TS} - CAST({w.offset_ms} AS BIGINT), CAST({w.size_ms} AS BIGINT))"
    # the row is in [s, s + k*step) for k = floor((ts - s) / step) + 1 .. size/step
    first_k = f"({TS} - {CUM_START}) DIV CAST({w.step_ms} AS BIGINT) + 1"
    struct = (
        f"NAMED_STRUCT('start', TIMESTAMP_MILLIS({CUM_START}), 'end', "
        f"TIMESTAMP_MILLIS({CUM_START} + {CUM_STEP} * CAST({w.step_ms} AS BIGINT)))"
    )
    return [
        Project((Item(start, CUM_START),)),
        Project((Item(f"EXPLODE(SEQUENCE({first_k}, CAST({n} AS BIGINT)))", CUM_STEP),)),
        Project((Item(struct, WIN),)),
    ]


#: This backend's dispatch tables by plan node family: only windows, and only
#: those :data:`~wql.compiler.capabilities.NATIVE` declares (tests/compiler/test_dispatch.py).
DISPATCH = {"window": _assign_windows}


# ---------------------------------------------------------------------------
# Target 1: DataFrame


def build_native(query: P.OperatorStage, df):
    """``query`` over the source DataFrame ``df`` as Spark DataFrame operations.

    A streaming ``df`` is checked against
    :data:`~wql.compiler.capabilities.NATIVE_STREAMING` (which today refuses
    every query, see the planner), a batch one against ``NATIVE``; the
    steps themselves apply ``withWatermark`` only when ``df.isStreaming``.
    Output columns and types are ``query.output_schema``. Rows that are not
    windowed (NULL event time, invalid dynamic gap) are counted by
    :func:`dropped_rows`.
    """
    caps = native_capabilities(bool(df.isStreaming))
    program = lower_stage(query, _column_type(df, query), caps)
    return run_steps(program.steps, df)


def lower_stage(
    stage: P.OperatorStage, event_time_type: WqlType | None = None, caps: Capabilities = NATIVE
) -> NativeProgram:
    """:func:`lower` or :func:`lower_rank`, by the stage's kind (:data:`STAGE_KINDS`)."""
    lowering = STAGE_KINDS[type(stage)].lower
    assert lowering is not None, type(stage).__name__  # a join lowers with its sides
    return lowering(stage, event_time_type, caps)


def run_steps(steps: Sequence[Step], df):
    """Apply native steps to ``df`` (one DataFrame operation per step)."""
    from pyspark.sql import functions as F

    for step in steps:
        if isinstance(step, Project):
            cols = [F.expr(i.sql).alias(i.alias) if i.alias else F.expr(i.sql) for i in step.items]
            df = df.select("*", *cols) if step.keep else df.select(*cols)
        elif isinstance(step, Filter):
            df = df.where(F.expr(step.condition))
        elif isinstance(step, Watermark):
            if df.isStreaming:
                df = df.withWatermark(step.column, f"{step.delay_ms} milliseconds")
        elif isinstance(step, GroupAggregate):
            keys = [F.expr(i.sql).alias(i.alias or i.sql) for i in step.keys]
            aggs = [F.expr(i.sql).alias(i.alias or i.sql) for i in step.aggregates]
            df = df.groupBy(*keys).agg(*aggs)
        else:  # pragma: no cover - the Step union is closed
            raise AssertionError(step)
    return df


def _column_type(df, query: P.OperatorStage) -> WqlType | None:
    from wql.compiler.types import from_spark

    et = query.source.event_time
    if et is None or query.source.view is not None:
        return None  # a view's event time is its window_time, a TIMESTAMP
    low = et.column.lower()
    for f in df.schema.fields:
        if f.name.lower() == low:
            return from_spark(f.dataType, column=f.name)
    raise WqlUnsupportedError(
        f"the DataFrame for source {query.source.name!r} has no event-time column "
        f"{et.column!r} (columns: {', '.join(df.columns)})",
        query.source.event_time.span if query.source.event_time else query.span,
        code=ErrorCode.SCHEMA,
    )


def drop_conditions(
    query: P.OperatorStage, event_time_type: WqlType | None = None, caps: Capabilities = NATIVE
) -> tuple[tuple[str, str], ...]:
    """``(reason, condition)`` pairs: Spark SQL over the source row, true for the rows
    the native query does not window.

    ``null event time`` is decided on every input row (batch replay drops
    them before WHERE); ``invalid session gap`` on the rows that pass WHERE
    (a WHERE that is NULL filters the row, so it is not counted). A window
    rank over a window table drops rows without event time; over a view, none.
    """
    conditions = STAGE_KINDS[type(query)].drop_conditions
    assert conditions is not None, type(query).__name__  # a join's are its sides'
    return conditions(query, event_time_type, caps)


def _rank_drop_conditions(
    query: P.WindowRank, event_time_type: WqlType | None, caps: Capabilities
) -> tuple[tuple[str, str], ...]:
    et = query.source.event_time
    if query.window is None or et is None:
        return ()
    return ((REASON_NULL_EVENT_TIME, f"{event_time_sql(et.column, event_time_type)} IS NULL"),)


def _query_drop_conditions(
    query: P.Query, event_time_type: WqlType | None, caps: Capabilities
) -> tuple[tuple[str, str], ...]:
    check_native(query, caps)
    out = []
    before: list[str] = []
    # batch replay's order of reasons: the first missing clock wins
    for reason, missing in _replay_clocks(query, event_time_type):
        out.append((reason, " AND ".join([*(f"NOT {m}" for m in before), missing])))
        before.append(missing)
    w = query.window
    if isinstance(w, P.DynamicSession):
        gap = f"CAST({w.gap_ms.sql} AS BIGINT)"
        cond = f"{_replayed(query, event_time_type)} AND ({gap} IS NULL OR {gap} <= 0)"
        if query.filter is not None:
            cond += f" AND ({query.filter.sql})"
        out.append((REASON_INVALID_GAP, cond))
    return tuple(out)


def dropped_rows(query: P.Stage, df, caps: Capabilities = NATIVE):
    """The rows of ``df`` the native query does not window, with a ``reason`` column
    (a join: of its first window table side over a source; ``df`` is the sides' pair)."""
    return STAGE_KINDS[type(query)].dropped_rows(query, df, caps)


def _window_dropped_rows(query: P.OperatorStage, df, caps: Capabilities):
    from functools import reduce

    from pyspark.sql import functions as F

    parts = [
        df.where(F.expr(cond)).select("*", F.lit(reason).alias("reason"))
        for reason, cond in drop_conditions(query, _column_type(df, query), caps)
    ]
    if not parts:  # nothing to drop (a rank over a view)
        return df.where(F.lit(False)).select("*", F.lit(None).cast("string").alias("reason"))
    return reduce(lambda a, b: a.unionByName(b), parts)


def _join_dropped_rows(join: P.WindowJoin, dfs, caps: Capabilities):
    from pyspark.sql import functions as F

    for side, side_df in zip(join.sides, dfs, strict=True):
        et = side.source.event_time
        if side.window is not None and side.source.view is None and et is not None:
            ts = event_time_sql(et.column, _side_type(side_df, side))
            return side_df.where(F.expr(f"{ts} IS NULL")).select(
                "*", F.lit(REASON_NULL_EVENT_TIME).alias("reason")
            )
    return dfs[0].where(F.lit(False)).select("*", F.lit(None).cast("string").alias("reason"))


def filtered_count(query: P.Query, df, caps: Capabilities = NATIVE) -> int:
    """Rows WHERE removes (a NULL condition removes the row), among rows with an event time.

    A row without event time is counted as dropped (``null event time``), never
    as filtered, as batch replay does.
    """
    if query.filter is None:
        return 0
    from pyspark.sql import functions as F

    check_native(query, caps)
    replayed = _replayed(query, _column_type(df, query))
    cond = f"{replayed} AND NOT coalesce(({query.filter.sql}), false)"
    return int(df.where(F.expr(cond)).count())


def _replay_clocks(query: P.Query, event_time_type: WqlType | None) -> list[tuple[str, str]]:
    """``(reason, Spark SQL true when the row lacks it)`` for each value batch replay needs
    of a source row, in replay's order of reasons: event time (when the source has
    one), processing time (a processing-time window), arrival (``arrival_order``)."""
    source = query.source
    out = []
    if source.event_time is not None:
        ts = event_time_sql(source.event_time.column, event_time_type)
        out.append((REASON_NULL_EVENT_TIME, f"{ts} IS NULL"))
    if query.window.domain is P.TimeDomain.PROCESSING:
        out.append((REASON_NULL_PROCESSING_TIME, f"({clock_sql(source)}) IS NULL"))
    if source.arrival_order is not None:
        out.append((REASON_NULL_ARRIVAL_ORDER, f"({arrival_sql(source)}) IS NULL"))
    return out


def _replayed(query: P.Query, event_time_type: WqlType | None) -> str:
    """Spark SQL over a source row: true when batch replay replays it (it has every
    value :func:`_replay_clocks` lists)."""
    return " AND ".join(f"NOT {m}" for _, m in _replay_clocks(query, event_time_type)) or "TRUE"


def native_counters(stage: P.Stage, df) -> dict:
    """A native query's counters over its input ``df`` (a join's: its sides' pair) (the
    operator engine's identity: ``rows_in = rows_fired + late_rows + rows_filtered +
    sum(dropped)``)."""
    counters: dict = STAGE_KINDS[type(stage)].counters(stage, df)
    return counters


def _query_counters(stage: P.Query, df) -> dict:
    rows_in = df.count()
    dropped = drop_counts(stage, df)
    filtered = filtered_count(stage, df)
    # native windows fire every window with rows (WATERMARK trigger)
    fired = rows_in - filtered - sum(dropped.values())
    if stage.window.domain is P.TimeDomain.PROCESSING:
        # rows whose every window the final clock does not reach are in no firing
        unfired = fired - fired_rows(stage, df)
        if unfired:
            dropped[DROP_IN_NO_FIRING] = unfired
        fired -= unfired
    elif stage.source.arrival_order is not None:
        # in arrival order: rows every window of which was late (left out of all) are
        # dropped as late, as the operator drops them without a LATE DATA TO
        late = fired - fired_rows(stage, df)
        if late:
            dropped[DROP_LATE] = late
        fired -= late
    return {
        "rows_in": rows_in,
        "late_rows": 0,
        "rows_filtered": filtered,
        "rows_fired": fired,
        "dropped": dropped,
    }


def fired_rows(stage: P.Query, df) -> int:
    """The rows some window took and fired: under ``arrival_order`` a window not late for
    the row, over processing time a window the final clock reaches.

    The native steps up to the rows' clock, then each row's windows and that test,
    counted by input order (one Spark job; one phase, so rows keep their identity).
    """
    program = lower(stage, _column_type(df, stage))
    clocked = next(
        i
        for i, st in enumerate(program.steps)
        if isinstance(st, Project) and st.items[0].alias == ET
    )
    if stage.window.domain is P.TimeDomain.PROCESSING:
        kept_if = fires_sql()
    else:
        assert stage.source.event_time is not None
        kept_if = on_time_sql(stage.source.event_time.delay_ms)
    steps = [*program.steps[: clocked + 1], *_assign_windows(stage.window), Filter(kept_if)]
    return int(run_steps(steps, df).select(FILE, ROW_ID).distinct().count())


def _join_counters(join: P.WindowJoin, dfs) -> dict:
    """A native join's counters: every row of both sides joins its windows, but for a
    window table's rows without event time."""
    from pyspark.sql import functions as F

    rows_in = 0
    null = 0
    for side, df in zip(join.sides, dfs, strict=True):
        rows_in += df.count()
        et = side.source.event_time
        if side.window is not None and et is not None:
            ts = event_time_sql(et.column, _side_type(df, side))
            null += int(df.where(F.expr(f"{ts} IS NULL")).count())
    dropped = {REASON_NULL_EVENT_TIME: null} if null else {}
    return {
        "rows_in": rows_in,
        "late_rows": 0,
        "rows_filtered": 0,
        "rows_fired": rows_in - null,
        "dropped": dropped,
    }


def _rank_counters(stage: P.WindowRank, df) -> dict:
    """A native rank's counters: rows in some window's first N are fired; every other
    row was filtered, had no event time, or ranked below N everywhere."""
    from pyspark.sql import functions as F

    from wql.runtime.rank import DROP_DUPLICATE, DROP_OUTSIDE_TOP_N

    program = lower_rank(stage, _column_type(df, stage))
    cut = next(
        i
        for i, st in enumerate(program.steps)
        if isinstance(st, Filter) and P.RANK_COLUMN in st.condition
    )
    ranked = run_steps(program.steps[: cut + 1], df)
    rows_in = df.count()
    dropped: dict[str, int] = {}
    filtered = 0
    if stage.window is not None:
        fired = ranked.select(FILE, ROW_ID).distinct().count()
        et = stage.source.event_time
        assert et is not None
        ts = event_time_sql(et.column, _column_type(df, stage))
        null = int(df.where(F.expr(f"{ts} IS NULL")).count())
        if null:
            dropped[REASON_NULL_EVENT_TIME] = null
        if stage.filter is not None:
            cond = f"{ts} IS NOT NULL AND NOT coalesce(({stage.filter.sql}), false)"
            filtered = int(df.where(F.expr(cond)).count())
    else:
        fired = ranked.count()
        if stage.filter is not None:
            filtered = int(df.where(F.expr(f"NOT coalesce(({stage.filter.sql}), false)")).count())
    ranked_out = rows_in - fired - filtered - sum(dropped.values())
    if ranked_out:
        dropped[DROP_DUPLICATE if stage.keep.deduplicates else DROP_OUTSIDE_TOP_N] = ranked_out
    return {
        "rows_in": rows_in,
        "late_rows": 0,
        "rows_filtered": filtered,
        "rows_fired": fired,
        "dropped": dropped,
    }


def drop_counts(query: P.Query, df, caps: Capabilities = NATIVE) -> dict[str, int]:
    """``{reason: rows}`` for the rows the native query does not window (one Spark job)."""
    rows = dropped_rows(query, df, caps).groupBy("reason").count().collect()
    return {r["reason"]: int(r["count"]) for r in rows}


# ---------------------------------------------------------------------------
# OVER aggregation


def _check_over(stage: P.OverAggregate, caps: Capabilities) -> None:
    from wql.compiler.planner import over_blockers

    _refuse(stage, over_blockers(stage, caps))


def over_sql(stage: P.OverAggregate) -> str:
    """What follows an aggregate call natively: ``OVER (PARTITION BY ... ORDER BY ...
    frame)`` over the replay order's columns (event time ms, then input order for ROWS)."""
    parts = []
    if stage.keys:
        parts.append("PARTITION BY " + ", ".join(k.expr.sql for k in stage.keys))
    lower = "UNBOUNDED" if stage.preceding is None else str(stage.preceding)
    if stage.frame is P.OverFrame.RANGE:
        parts.append(f"ORDER BY {TS} RANGE BETWEEN {lower} PRECEDING AND CURRENT ROW")
    else:
        parts.append(
            f"ORDER BY {TS}, {FILE}, {ROW_ID} ROWS BETWEEN {lower} PRECEDING AND CURRENT ROW"
        )
    return f"OVER ({' '.join(parts)})"


def lower_over(
    stage: P.OverAggregate, event_time_type: WqlType | None = None, caps: Capabilities = NATIVE
) -> NativeProgram:
    """The native steps of an OVER aggregation: Spark's window functions over the rows in
    replay order. Exact where no row is late (``over_blockers``): every row then comes
    out with its frame's aggregate, as the operator emits it."""
    _check_over(stage, caps)
    et = stage.source.event_time
    assert et is not None  # the binder
    steps: list[Step] = [
        Project(
            (
                Item(event_time_sql(et.column, event_time_type), TS),
                Item("INPUT_FILE_NAME()", FILE),
                Item("MONOTONICALLY_INCREASING_ID()", ROW_ID),
            )
        )
    ]
    if stage.filter is not None:
        steps.append(Filter(f"({stage.filter.sql})"))
    steps.append(
        Filter(f"{TS} IS NOT NULL" + (f" AND {TS} > 0" if stage.preceding is not None else ""))
    )
    over = over_sql(stage)
    steps.append(Project(tuple(Item(f"{a.call_sql} {over}", a.name) for a in stage.aggregates)))
    out = tuple(Item(_cast(c.expr.sql, c.type), c.name) for c in stage.output)
    steps.append(Project(out, keep=False))
    return NativeProgram(stage.name, stage.source.name, tuple(steps), stage.output_schema)


def _over_drop_conditions(
    stage: P.OverAggregate, event_time_type: WqlType | None, caps: Capabilities
) -> tuple[tuple[str, str], ...]:
    """Rows without event time; with a bounded frame, rows at or before the epoch: Flink's
    bounded over functions start a key's last triggering time at 0 and call every row at
    or below it late (docs/language.md, "OVER aggregations")."""
    from wql.runtime.assigners import DROP_LATE

    et = stage.source.event_time
    assert et is not None
    ts = event_time_sql(et.column, event_time_type)
    out = [(REASON_NULL_EVENT_TIME, f"{ts} IS NULL")]
    if stage.preceding is not None:
        cond = f"{ts} <= 0"
        if stage.filter is not None:
            cond += f" AND ({stage.filter.sql})"
        out.append((DROP_LATE, cond))
    return tuple(out)


def _over_counters(stage: P.OverAggregate, df) -> dict:
    """Every row with event time that passes WHERE comes out once, but for the dropped."""
    from pyspark.sql import functions as F

    rows_in = df.count()
    dropped = drop_counts(stage, df)  # type: ignore[arg-type]
    filtered = 0
    if stage.filter is not None:
        et = stage.source.event_time
        assert et is not None
        ts = event_time_sql(et.column, _column_type(df, stage))
        cond = f"{ts} IS NOT NULL AND NOT coalesce(({stage.filter.sql}), false)"
        filtered = int(df.where(F.expr(cond)).count())
    return {
        "rows_in": rows_in,
        "late_rows": 0,
        "rows_filtered": filtered,
        "rows_fired": rows_in - filtered - sum(dropped.values()),
        "dropped": dropped,
    }


# ---------------------------------------------------------------------------
# Target 2: one Spark SQL statement


def to_spark_sql(
    query: P.Stage, event_time_type: WqlType | None = None, pretty: bool = True
) -> str:
    """One Spark SQL statement computing ``query`` natively.

    It runs unchanged in ``spark.sql`` given a temp view named like the
    source. Built as sqlglot AST nodes and printed with the Spark dialect.
    """
    try:
        return STAGE_KINDS[type(query)].to_sql(query, event_time_type, pretty)
    except (SqlglotError, RecursionError) as e:
        # sqlglot's boundary: a failure to print is reported at the query
        raise WqlUnsupportedError(
            f"query {query.name!r} cannot be printed as Spark SQL ({type(e).__name__}: {e})",
            query.span,
            code=ErrorCode.UNSUPPORTED,
        ) from None


def program_to_sql(program: NativeProgram, pretty: bool = True) -> str:
    """The steps as nested SELECTs, innermost first (batch semantics: Watermark is dropped)."""
    with recursion_headroom():  # sqlglot parses and prints recursively
        return _program_to_sql(program, pretty)


def _program_to_sql(program: NativeProgram, pretty: bool) -> str:
    # Every node below is built fresh for this statement (a parse is copied out of the
    # cache), so the builders and the printer work on it in place instead of copying
    # the whole tree at each step (each copy grew with the nesting).
    relation: exp.Expr = exp.to_table(_q(program.source), dialect=DIALECT)
    depth = 0

    def wrap(rel: exp.Expr) -> exp.Expr:
        nonlocal depth
        if isinstance(rel, exp.Table):
            return rel
        depth += 1
        return exp.Subquery(
            this=rel, alias=exp.TableAlias(this=exp.to_identifier(f"__wql_r{depth}"))
        )

    def select(items: list[exp.Expr], rel: exp.Expr) -> exp.Select:
        return exp.Select().select(*items, copy=False).from_(rel, copy=False)

    for step in program.steps:
        if isinstance(step, Watermark):
            continue
        if isinstance(step, Filter):
            cond = _parse(step.condition)
            if isinstance(relation, exp.Select) and _filterable(relation, cond):
                relation = relation.where(cond, copy=False)
            elif isinstance(relation, exp.Table):
                relation = select([exp.Star()], relation).where(cond, copy=False)
            else:
                relation = select([exp.Star()], wrap(relation)).where(cond, copy=False)
            continue
        if isinstance(step, Project):
            items = [_aliased(i) for i in step.items]
            if step.keep:
                items.insert(0, exp.Star())
            relation = select(items, wrap(relation))
            continue
        if isinstance(step, GroupAggregate):
            out = [_aliased(i) for i in (*step.keys, *step.aggregates)]
            groups = [_parse(i.sql) for i in step.keys]
            relation = select(out, wrap(relation)).group_by(*groups, copy=False)
            continue
        raise AssertionError(step)  # pragma: no cover
    return _DIALECT.generate(relation, copy=False, pretty=pretty)


def _filterable(select: exp.Select, cond: exp.Expr) -> bool:
    """Whether ``cond`` can go into ``select``'s own WHERE without changing its meaning.

    True when ``select`` does not group, computes no window function, and
    ``cond`` reads none of the aliases ``select`` defines (a WHERE sees only
    the input's columns).
    """
    if select.args.get("group") or select.args.get("where"):
        return False
    if any(True for _ in select.find_all(exp.Window)):
        return False  # a WHERE would filter the rows before the window function sees them
    aliases = {e.alias.lower() for e in select.expressions if isinstance(e, exp.Alias)}
    return not any(c.name.lower() in aliases for c in cond.find_all(exp.Column))


def _parse(sql: str) -> exp.Expr:
    """``sql`` parsed, a fresh tree the caller may change (a copy of the cached parse:
    copying is cheaper than parsing again)."""
    return _parsed(sql).copy()


@functools.lru_cache(maxsize=4096)
def _parsed(sql: str) -> exp.Expr:
    # shared: never changed, only copied by _parse
    return sqlglot.parse_one(sql, read=DIALECT)


def _aliased(item: Item) -> exp.Expr:
    node = _parse(item.sql)
    if item.alias is None:
        return node
    if isinstance(node, exp.Column) and node.name == item.alias:
        return node
    return exp.alias_(node, exp.to_identifier(item.alias, quoted=True), copy=False)


# ---------------------------------------------------------------------------
# What each kind of stage does natively: the one table by stage kind


def _window_to_sql(query: P.OperatorStage, event_time_type: WqlType | None, pretty: bool) -> str:
    return program_to_sql(lower_stage(query, event_time_type), pretty=pretty)


def _join_to_sql(join: P.WindowJoin, event_time_type: WqlType | None, pretty: bool) -> str:
    return join_to_spark_sql(join, pretty)


#: ``(reason, condition)`` pairs (:func:`drop_conditions`)
DropConditions = tuple[tuple[str, str], ...]


@dataclass(frozen=True)
class StageKind:
    """The native lowering of one kind of stage (:data:`STAGE_KINDS`).

    ``lower`` and ``drop_conditions`` work on the stage's one input (None for a
    join, which lowers with its sides: :func:`build_native_join`);
    ``dropped_rows`` and ``counters`` take its input DataFrame (a join's: its
    sides' pair); ``to_sql`` prints its one Spark SQL statement.
    """

    lower: Callable[[Any, WqlType | None, Capabilities], NativeProgram] | None
    drop_conditions: (
        Callable[[Any, WqlType | None, Capabilities], tuple[tuple[str, str], ...]] | None
    )
    dropped_rows: Callable[[Any, Any, Capabilities], Any]
    counters: Callable[[Any, Any], dict]
    to_sql: Callable[[Any, WqlType | None, bool], str]


#: Per kind of stage, its native lowering (tests/compiler/test_dispatch.py checks that
#: every kind of ``plan.Stage`` has one).
STAGE_KINDS: dict[type, StageKind] = {
    P.Query: StageKind(
        lower, _query_drop_conditions, _window_dropped_rows, _query_counters, _window_to_sql
    ),
    P.WindowRank: StageKind(
        lower_rank, _rank_drop_conditions, _window_dropped_rows, _rank_counters, _window_to_sql
    ),
    P.WindowJoin: StageKind(None, None, _join_dropped_rows, _join_counters, _join_to_sql),
    P.OverAggregate: StageKind(
        lower_over, _over_drop_conditions, _window_dropped_rows, _over_counters, _window_to_sql
    ),
}
