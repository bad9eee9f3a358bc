"""The WQL abstract syntax tree: what the text says, nothing more.

Every node is a frozen dataclass with tuple fields and a keyword-only
``span`` (where it came from) that does not take part in equality, so two
parses of differently formatted but equivalent text compare equal.

Names line up with the grammar (``wql.lark``) and the transformer: rule
``tumble`` -> ``Transformer.tumble`` -> :class:`Tumble`. The transformer only
changes shape: it resolves no names, fills in no defaults (an absent clause
is ``None``), and converts no units beyond recognising an interval literal's
parts (``Interval.millis`` is a convenience for the binder).

Scalar expressions (SELECT items, WHERE, HAVING, grouping keys, ``GAP``
expressions, ``DELTA`` expressions) are ordinary Spark SQL. They are kept as
:class:`Expr` nodes holding the exact source slice (``text``) plus its span;
the compiler re-parses ``text`` with sqlglot and maps positions back with
``expr.span.start + offset``. Equality uses ``canonical`` (whitespace
normalised, keywords upper-cased), so reformatting does not change the AST.

>>> from wql.grammar.parser import parse
>>> script = parse("SELECT COUNT(*) AS n FROM t GROUP BY TUMBLE(ts, INTERVAL '5' SECONDS)")
>>> query = script.statements[0]
>>> query.select[0].expr.text, query.select[0].alias.name
('COUNT(*)', 'n')
>>> query.group_by.window.size.millis
5000
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from decimal import Decimal

from wql.errors import ErrorCode, Span, WqlSemanticError

INT64_MIN = -(2**63)
INT64_MAX = 2**63 - 1
"""The range of integer literals (Java ``long``)."""

INTERVAL_MAX_MS = INT64_MAX // 1000
"""The longest interval, in milliseconds: Spark's day-time interval range
(a ``long`` of microseconds, about 106751991 days). Every interval ends up in
Spark as a duration, a TIMESTAMP offset or a window bound in microseconds,
and in the runtime added to 64-bit millisecond timestamps; within this
bound neither can overflow."""

__all__ = [
    "INT64_MAX",
    "INT64_MIN",
    "INTERVAL_MAX_MS",
    "Node",
    "Comment",
    "Ident",
    "Integer",
    "Number",
    "TimeUnit",
    "IntervalPart",
    "Interval",
    "Expr",
    "TypeName",
    "ColumnDef",
    "IdleAfter",
    "Watermark",
    "SourceOption",
    "CreateSource",
    "SelectItem",
    "TableRef",
    "ProcTime",
    "TimeAttr",
    "WindowSpec",
    "Tumble",
    "Hop",
    "Cumulate",
    "Session",
    "DynamicSession",
    "CountWindow",
    "GlobalWindow",
    "Window",
    "GroupBy",
    "TimeDomain",
    "TriggerSpec",
    "WatermarkTrigger",
    "ProcessingTimeTrigger",
    "CountTrigger",
    "EveryTrigger",
    "AfterTrigger",
    "DeltaTrigger",
    "TimeoutTrigger",
    "PurgingTrigger",
    "AnyTrigger",
    "AllTrigger",
    "EarlyLateTrigger",
    "OnceTrigger",
    "UntilTrigger",
    "SequenceTrigger",
    "Trigger",
    "EvictorSpec",
    "CountEvictor",
    "TimeEvictor",
    "DeltaEvictor",
    "Evictor",
    "EvictPosition",
    "AllowedLateness",
    "TriggerClause",
    "EvictClause",
    "LateDataTo",
    "PaneKind",
    "Accumulation",
    "Changelog",
    "EmitItem",
    "EmitClause",
    "Query",
    "QueryForm",
    "Star",
    "RankColumn",
    "OrderItem",
    "RowNumber",
    "WindowTable",
    "Relation",
    "RankForm",
    "RankQuery",
    "JoinKind",
    "JoinInput",
    "JoinQuery",
    "AnyQuery",
    "CreateView",
    "Statement",
    "Script",
]


@dataclass(frozen=True)
class Node:
    """Base of every AST node: carries the source span, excluded from equality."""

    span: Span | None = field(default=None, compare=False, repr=False, kw_only=True)


# --------------------------------------------------------------------------- leaves


@dataclass(frozen=True)
class Comment(Node):
    """A ``-- line`` or ``/* block */`` comment, verbatim (delimiters included).

    Comments carry no meaning; they are kept on :class:`Script` so that
    ``wql fmt`` can put them back (see ``formatter.py`` for where they go).
    ``follows_code`` is true when code precedes the comment on its line (a
    trailing comment); it is layout, so it does not take part in equality.
    """

    text: str
    follows_code: bool = field(default=False, compare=False)


@dataclass(frozen=True)
class Ident(Node):
    """An identifier as written: ``name`` without backquotes, ``quoted`` if it had them.

    Case is kept (Spark resolves column names case-insensitively; that is the
    binder's business).
    """

    name: str
    quoted: bool = False


@dataclass(frozen=True)
class Integer(Node):
    """A (possibly signed) integer literal, e.g. the ``100`` of ``COUNT(100)``.

    The value must fit a signed 64-bit integer (counts, sizes and DECIMAL
    bounds end up in Java ``long``/NumPy ``int64``); a larger literal is a
    :class:`~wql.errors.WqlSemanticError` at the literal.
    """

    value: int

    def __post_init__(self) -> None:
        if not INT64_MIN <= self.value <= INT64_MAX:
            limit = f"max {INT64_MAX}" if self.value > 0 else f"min {INT64_MIN}"
            raise WqlSemanticError(
                f"integer {self.value} is out of range ({limit}: a signed 64-bit integer)",
                self.span,
                code=ErrorCode.BAD_LITERAL,
            )


@dataclass(frozen=True)
class Number(Node):
    """A (possibly signed) decimal literal, e.g. a ``DELTA`` threshold."""

    value: Decimal


class TimeUnit(enum.Enum):
    """Interval units; the value is the unit's length in milliseconds."""

    MILLISECOND = 1
    SECOND = 1_000
    MINUTE = 60_000
    HOUR = 3_600_000
    DAY = 86_400_000


@dataclass(frozen=True)
class IntervalPart(Node):
    """One ``<value> <unit>`` of an interval literal (``value`` may be negative or fractional)."""

    value: Decimal
    unit: TimeUnit


@dataclass(frozen=True)
class Interval(Node):
    """An interval literal: ``INTERVAL '5' SECOND``, Spark-style ``INTERVAL '1 minute 30 seconds'``.

    ``parts`` holds each value with its unit as written (``SECONDS`` and
    ``second`` both become :attr:`TimeUnit.SECOND`); ``text`` is the exact
    source text (not compared). Whatever the spelling, the interval must be a
    whole number of milliseconds (WQL time is integer milliseconds) within
    +-:data:`INTERVAL_MAX_MS` (Spark's interval range); a longer interval is
    refused here, at the literal, rather than overflowing later in Spark or
    in a window computation.
    """

    parts: tuple[IntervalPart, ...]
    text: str = field(default="", compare=False)

    def __post_init__(self) -> None:
        total = sum((p.value * p.unit.value for p in self.parts), Decimal(0))
        if total != total.to_integral_value():
            raise WqlSemanticError(
                f"{self.text or self.describe()} is not a whole number of milliseconds",
                self.span,
                hint="WQL time has millisecond precision",
                code=ErrorCode.BAD_LITERAL,
            )
        if abs(total) > INTERVAL_MAX_MS:
            days = INTERVAL_MAX_MS // TimeUnit.DAY.value
            limit = (
                f"max {INTERVAL_MAX_MS} ms, about {days} days"
                if total > 0
                else f"min -{INTERVAL_MAX_MS} ms, about -{days} days"
            )
            raise WqlSemanticError(
                f"{self.text or self.describe()} is out of range ({limit})",
                self.span,
                hint="intervals are limited to Spark's day-time interval range "
                "(microseconds in a signed 64-bit integer)",
                code=ErrorCode.BAD_LITERAL,
            )

    @property
    def millis(self) -> int:
        """Total length in milliseconds (may be negative, e.g. an offset)."""
        return int(sum((p.value * p.unit.value for p in self.parts), Decimal(0)))

    def describe(self) -> str:
        """Canonical spelling: ``INTERVAL '5' SECOND`` or ``INTERVAL '1 MINUTE 30 SECONDS'``."""
        if len(self.parts) == 1:
            part = self.parts[0]
            return f"INTERVAL '{decimal_text(part.value)}' {part.unit.name}"
        inner = " ".join(
            f"{decimal_text(p.value)} {p.unit.name}{'' if abs(p.value) == 1 else 'S'}"
            for p in self.parts
        )
        return f"INTERVAL '{inner}'"


def decimal_text(value: Decimal) -> str:
    """``Decimal`` printed without exponent or trailing zeros: 5, -2, 1.5."""
    text = format(value.normalize(), "f")
    return "0" if text in ("-0", "") else text


@dataclass(frozen=True)
class Expr(Node):
    """A scalar Spark SQL expression kept as source text.

    ``text`` is the exact slice of the ``.wql`` file (``span`` covers it);
    ``canonical`` is the same token sequence with normalised spacing and
    upper-cased SQL keywords, which is what equality compares and what
    ``wql fmt`` prints. Comments inside an expression are not part of either.
    """

    text: str = field(compare=False)
    canonical: str


@dataclass(frozen=True)
class TypeName(Node):
    """A column type in ``CREATE SOURCE``: ``STRING``, ``INT``, ..., ``DECIMAL(p, s)``.

    ``name`` is upper-case; ``args`` holds the precision and scale of DECIMAL
    (empty for ``DECIMAL`` without arguments and for every other type).
    """

    name: str
    args: tuple[Integer, ...] = ()


# --------------------------------------------------------------------------- sources


@dataclass(frozen=True)
class ColumnDef(Node):
    """``name TYPE`` inside ``CREATE SOURCE (...)``."""

    name: Ident
    type: TypeName


@dataclass(frozen=True)
class IdleAfter(Node):
    """``IDLE AFTER <interval>`` in a WATERMARK clause: the source's idle timeout."""

    interval: Interval


@dataclass(frozen=True)
class Watermark(Node):
    """``WATERMARK FOR column AS expr_column [- delay] [IDLE AFTER <interval>]``.

    The spec form is ``WATERMARK FOR ts AS ts - INTERVAL '5' SECOND``; the
    binder checks that ``expr_column`` names ``column``. ``delay`` is ``None``
    for ``AS ts`` (no out-of-orderness allowed).
    """

    column: Ident
    expr_column: Ident
    delay: Interval | None = None
    idle: IdleAfter | None = None


@dataclass(frozen=True)
class SourceOption(Node):
    """``key = 'value'`` in ``WITH (...)``.

    ``key`` may be written bare (``format``), dotted (``spark.sql.x``) or as a
    string literal (``'header'``); it is kept as its text. ``value`` is the
    unescaped string (numbers and TRUE/FALSE written bare become their text).
    """

    key: str
    value: str


@dataclass(frozen=True)
class CreateSource(Node):
    """``CREATE SOURCE name (columns..., [WATERMARK ...]) [WITH (options...)]``."""

    name: Ident
    columns: tuple[ColumnDef, ...]
    watermark: Watermark | None = None
    options: tuple[SourceOption, ...] = ()


# --------------------------------------------------------------------------- queries


@dataclass(frozen=True)
class SelectItem(Node):
    """One item of the SELECT list: an expression and its optional ``[AS] alias``."""

    expr: Expr
    alias: Ident | None = None


@dataclass(frozen=True)
class TableRef(Node):
    """``FROM name [WATERMARK FOR ts AS ts - <interval>]``."""

    name: Ident
    watermark: Watermark | None = None


@dataclass(frozen=True)
class ProcTime(Node):
    """``PROCTIME()`` as a window's time attribute: a processing-time window."""


# A window's time attribute: an event-time column or PROCTIME().
TimeAttr = Ident | ProcTime


@dataclass(frozen=True)
class WindowSpec(Node):
    """Base of the window nodes (exactly one per GROUP BY)."""


@dataclass(frozen=True)
class Tumble(WindowSpec):
    """``TUMBLE(time, size [, offset])``."""

    time: TimeAttr
    size: Interval
    offset: Interval | None = None


@dataclass(frozen=True)
class Hop(WindowSpec):
    """``HOP(time, slide, size [, offset])`` -- slide first, as in Flink SQL."""

    time: TimeAttr
    slide: Interval
    size: Interval
    offset: Interval | None = None


@dataclass(frozen=True)
class Cumulate(WindowSpec):
    """``CUMULATE(time, step, size [, offset])``."""

    time: TimeAttr
    step: Interval
    size: Interval
    offset: Interval | None = None


@dataclass(frozen=True)
class Session(WindowSpec):
    """``SESSION(time, gap)`` with a constant gap."""

    time: TimeAttr
    gap: Interval


@dataclass(frozen=True)
class DynamicSession(WindowSpec):
    """``SESSION(time, GAP <expr>)``: the gap is evaluated per row."""

    time: TimeAttr
    gap: Expr


@dataclass(frozen=True)
class CountWindow(WindowSpec):
    """``COUNT_WINDOW(size [, slide])``."""

    size: Integer
    slide: Integer | None = None


@dataclass(frozen=True)
class GlobalWindow(WindowSpec):
    """``GLOBAL()``."""


Window = Tumble | Hop | Cumulate | Session | DynamicSession | CountWindow | GlobalWindow


@dataclass(frozen=True)
class GroupBy(Node):
    """``GROUP BY [keys,] <window>``.

    The window may be written anywhere among the keys; the AST keeps the keys
    in order and the window apart (the formatter prints the window last).
    The parser guarantees exactly one window.
    """

    keys: tuple[Expr, ...]
    window: Window


class TimeDomain(enum.Enum):
    """``OF EVENT TIME`` / ``OF PROCESSING TIME``."""

    EVENT = "EVENT"
    PROCESSING = "PROCESSING"


@dataclass(frozen=True)
class TriggerSpec(Node):
    """Base of the trigger nodes."""


@dataclass(frozen=True)
class WatermarkTrigger(TriggerSpec):
    """``WATERMARK`` (EventTimeTrigger)."""


@dataclass(frozen=True)
class ProcessingTimeTrigger(TriggerSpec):
    """``PROCESSING TIME`` (ProcessingTimeTrigger)."""


@dataclass(frozen=True)
class CountTrigger(TriggerSpec):
    """``COUNT(n)`` (CountTrigger)."""

    count: Integer


@dataclass(frozen=True)
class EveryTrigger(TriggerSpec):
    """``EVERY <interval> [OF EVENT TIME | OF PROCESSING TIME] [ON UPDATE]``.

    ``domain`` None = the window's own; ``on_update``: fire only when rows
    arrived since the last firing (without it: Flink's continuous triggers).
    """

    interval: Interval
    domain: TimeDomain | None = None
    on_update: bool = False


@dataclass(frozen=True)
class AfterTrigger(TriggerSpec):
    """``AFTER <interval> [OF EVENT TIME | OF PROCESSING TIME]``: fire ``interval``
    after the first row of a pane (Beam's ``AfterProcessingTime.pastFirstElementInPane()
    .plusDelayOf(interval)``, repeated). ``domain`` None = the window's own."""

    interval: Interval
    domain: TimeDomain | None = None


@dataclass(frozen=True)
class DeltaTrigger(TriggerSpec):
    """``DELTA(<expr>, <threshold>)`` (DeltaTrigger)."""

    expr: Expr
    threshold: Number


@dataclass(frozen=True)
class TimeoutTrigger(TriggerSpec):
    """``TIMEOUT(<trigger>, <interval>)`` (ProcessingTimeoutTrigger)."""

    trigger: Trigger
    timeout: Interval


@dataclass(frozen=True)
class PurgingTrigger(TriggerSpec):
    """``PURGING <trigger>`` (PurgingTrigger)."""

    trigger: Trigger


@dataclass(frozen=True)
class AnyTrigger(TriggerSpec):
    """``ANY(<trigger>, ...)``."""

    triggers: tuple[Trigger, ...]


@dataclass(frozen=True)
class AllTrigger(TriggerSpec):
    """``ALL(<trigger>, ...)``."""

    triggers: tuple[Trigger, ...]


@dataclass(frozen=True)
class EarlyLateTrigger(TriggerSpec):
    """``WATERMARK WITH [EARLY <trigger>] [LATE <trigger>]`` (at least one of the two)."""

    early: Trigger | None = None
    late: Trigger | None = None


@dataclass(frozen=True)
class OnceTrigger(TriggerSpec):
    """``ONCE <trigger>``: the trigger's first firing, then finished (Beam's once triggers)."""

    trigger: Trigger


@dataclass(frozen=True)
class UntilTrigger(TriggerSpec):
    """``UNTIL(<trigger>, <until>)``: Beam's ``trigger.orFinally(until)``."""

    trigger: Trigger
    until: Trigger


@dataclass(frozen=True)
class SequenceTrigger(TriggerSpec):
    """``SEQUENCE(<trigger>, ...)``: Beam's ``AfterEach.inOrder``."""

    triggers: tuple[Trigger, ...]


Trigger = (
    WatermarkTrigger
    | ProcessingTimeTrigger
    | CountTrigger
    | EveryTrigger
    | AfterTrigger
    | DeltaTrigger
    | TimeoutTrigger
    | PurgingTrigger
    | AnyTrigger
    | AllTrigger
    | EarlyLateTrigger
    | OnceTrigger
    | UntilTrigger
    | SequenceTrigger
)


@dataclass(frozen=True)
class EvictorSpec(Node):
    """Base of the evictor nodes."""


@dataclass(frozen=True)
class CountEvictor(EvictorSpec):
    """``COUNT(n)`` (CountEvictor)."""

    count: Integer


@dataclass(frozen=True)
class TimeEvictor(EvictorSpec):
    """``TIME(<interval>)`` (TimeEvictor)."""

    interval: Interval


@dataclass(frozen=True)
class DeltaEvictor(EvictorSpec):
    """``DELTA(<expr>, <threshold>)`` (DeltaEvictor)."""

    expr: Expr
    threshold: Number


Evictor = CountEvictor | TimeEvictor | DeltaEvictor


class EvictPosition(enum.Enum):
    """``BEFORE`` / ``AFTER`` the window function."""

    BEFORE = "BEFORE"
    AFTER = "AFTER"


@dataclass(frozen=True)
class AllowedLateness(Node):
    """``ALLOWED LATENESS <interval>`` (span covers the whole clause)."""

    interval: Interval


@dataclass(frozen=True)
class TriggerClause(Node):
    """``TRIGGER <trigger>`` (span covers the whole clause)."""

    trigger: Trigger


@dataclass(frozen=True)
class EvictClause(Node):
    """``EVICT <evictor> [BEFORE | AFTER]``; ``position`` None when not written."""

    evictor: Evictor
    position: EvictPosition | None = None


@dataclass(frozen=True)
class LateDataTo(Node):
    """``LATE DATA TO name``."""

    name: Ident


class PaneKind(enum.Enum):
    """The panes an ``EMIT`` item is about (by ``pane_timing``)."""

    EARLY = "EARLY"
    ON_TIME = "ON_TIME"
    LATE = "LATE"


@dataclass(frozen=True)
class Accumulation(Node):
    """``[EARLY | ON_TIME | LATE] ACCUMULATING | DISCARDING``.

    Whether a pane keeps (accumulating) or purges (discarding) the contents
    it fired, for the panes of one timing, or of every timing when ``panes``
    is None (Beam's accumulation mode).
    """

    discarding: bool
    panes: PaneKind | None = None


@dataclass(frozen=True)
class Changelog(Node):
    """``CHANGELOG``: retractions before every later pane and for merged windows."""


EmitItem = Accumulation | Changelog


@dataclass(frozen=True)
class EmitClause(Node):
    """``EMIT <item>, ...`` (span covers the whole clause)."""

    items: tuple[EmitItem, ...]


class QueryForm(enum.Enum):
    """How a query's window was written; both forms mean the same query.

    ``WQL``: ``FROM t GROUP BY k, TUMBLE(ts, ...)``. ``TVF``: Flink SQL's
    window table-valued function, ``FROM TABLE(TUMBLE(TABLE t,
    DESCRIPTOR(ts), ...)) GROUP BY window_start, window_end, k``.
    """

    WQL = "wql"
    TVF = "tvf"


@dataclass(frozen=True)
class Query(Node):
    """One windowed query, clauses in the grammar's order (docs/language.md).

    ``SELECT ... FROM ... [WHERE] GROUP BY ... [HAVING] [ALLOWED LATENESS]
    [TRIGGER] [EVICT] [EMIT] [LATE DATA TO]``. Absent clauses are ``None``;
    defaults are the binder's.
    A query written with a window table-valued function is held in the same
    shape (``form`` only tells the formatter how it was written).
    """

    select: tuple[SelectItem, ...]
    source: TableRef
    group_by: GroupBy
    where: Expr | None = None
    having: Expr | None = None
    lateness: AllowedLateness | None = None
    trigger: TriggerClause | None = None
    evict: EvictClause | None = None
    late_data: LateDataTo | None = None
    form: QueryForm = field(default=QueryForm.WQL, compare=False)
    emit: EmitClause | None = None


# --------------------------------------------------------------------------- Top-N, joins


@dataclass(frozen=True)
class Star(Node):
    """``*`` (or ``t.*``) in a SELECT list: every column of the input (of ``t``)."""

    table: Ident | None = None


@dataclass(frozen=True)
class RankColumn(Node):
    """Where a window Top-N's SELECT list has its ``ROW_NUMBER() OVER (...) AS name``
    (the rank itself is :attr:`RankQuery.rank`)."""


@dataclass(frozen=True)
class OrderItem(Node):
    """``<expr> [ASC | DESC]`` in ``ROW_NUMBER() OVER (... ORDER BY ...)``."""

    expr: Expr
    descending: bool = False


class RankFunction(enum.Enum):
    """The ranking function of a window Top-N: ``ROW_NUMBER()`` numbers equal rows in
    arrival order; ``RANK()`` and ``DENSE_RANK()`` give them one rank (SQL's ranks)."""

    ROW_NUMBER = "ROW_NUMBER"
    RANK = "RANK"
    DENSE_RANK = "DENSE_RANK"


@dataclass(frozen=True)
class RowNumber(Node):
    """``ROW_NUMBER() OVER (PARTITION BY cols ORDER BY items)`` (or ``RANK()``,
    ``DENSE_RANK()``: ``function``)."""

    partition_by: tuple[Ident, ...]
    order_by: tuple[OrderItem, ...]
    function: RankFunction = RankFunction.ROW_NUMBER


@dataclass(frozen=True)
class WindowTable(Node):
    """A window table function as a relation (no GROUP BY): its rows are the table's
    rows, each in every window the function assigns it, with ``window_start``,
    ``window_end`` and ``window_time``. ``partition`` is SESSION's ``PARTITION BY``."""

    table: TableRef
    window: Window
    partition: tuple[Ident, ...] = ()


# What a window Top-N or a join reads: a source or view by name, or a window table.
Relation = TableRef | WindowTable


class RankForm(enum.Enum):
    """How a window Top-N was written (both mean the same ranking)."""

    SUBQUERY = "subquery"  # SELECT ... FROM (SELECT ..., ROW_NUMBER() OVER (...) ...) WHERE
    QUALIFY = "qualify"  # SELECT ... FROM r QUALIFY ...


@dataclass(frozen=True)
class RankQuery(Node):
    """A window Top-N or deduplication (Flink SQL's window rank).

    ``source`` is the windowed relation; ``rank`` the ``ROW_NUMBER() OVER``
    and ``rank_alias`` its name (None for ``QUALIFY ROW_NUMBER() OVER (...)
    <op> N``, which has none). ``condition`` selects ranked rows: the outer
    ``WHERE`` of the subquery form, ``QUALIFY``'s condition; with an unnamed
    rank it is the right-hand side of ``rank_op`` (``<= 3`` is
    ``rank_op='<='``, ``condition='3'``). ``select`` is the outer list;
    ``inner`` the subquery's list (empty for QUALIFY); a :class:`RankColumn`
    marks where the named rank is in the one that has it. ``where`` filters
    the input before ranking.
    """

    select: tuple[SelectItem | Star | RankColumn, ...]
    source: Relation
    rank: RowNumber
    condition: Expr
    rank_alias: Ident | None = None
    rank_op: str | None = None
    inner: tuple[SelectItem | Star | RankColumn, ...] = ()
    where: Expr | None = None
    alias: Ident | None = None
    form: RankForm = RankForm.SUBQUERY


class JoinKind(enum.Enum):
    INNER = "INNER"
    LEFT = "LEFT"
    RIGHT = "RIGHT"
    FULL = "FULL"


@dataclass(frozen=True)
class JoinInput(Node):
    """One side of a window join: a relation and its alias."""

    relation: Relation
    alias: Ident | None = None


@dataclass(frozen=True)
class JoinQuery(Node):
    """``SELECT ... FROM a [kind] JOIN b ON <cond> [WHERE ...]``: a window join.

    ``kind`` is None when written as a bare ``JOIN`` (an INNER join); the
    binder checks that ``on`` equates both sides' window bounds.
    """

    select: tuple[SelectItem | Star, ...]
    left: JoinInput
    right: JoinInput
    on: Expr
    kind: JoinKind | None = None
    where: Expr | None = None


# --------------------------------------------------------------------------- OVER aggregation


class FrameUnit(enum.Enum):
    """How an OVER frame counts: by time (``RANGE``) or by rows (``ROWS``)."""

    RANGE = "RANGE"
    ROWS = "ROWS"


class BoundKind(enum.Enum):
    UNBOUNDED = "UNBOUNDED"
    CURRENT_ROW = "CURRENT ROW"
    OFFSET = "OFFSET"


@dataclass(frozen=True)
class FrameBound(Node):
    """One end of an OVER frame: ``UNBOUNDED PRECEDING``, ``CURRENT ROW``,
    ``<interval> PRECEDING`` (RANGE), ``<n> PRECEDING`` (ROWS), or ``... FOLLOWING``
    (parsed so that the binder can say why it is refused)."""

    kind: BoundKind
    following: bool = False
    offset: Interval | Integer | None = None


@dataclass(frozen=True)
class OverWindow(Node):
    """``OVER (PARTITION BY cols ORDER BY item [RANGE | ROWS BETWEEN lower AND upper])``;
    ``unit`` None when no frame is written (SQL's default: RANGE UNBOUNDED PRECEDING)."""

    partition_by: tuple[Ident, ...]
    order_by: OrderItem
    unit: FrameUnit | None = None
    lower: FrameBound | None = None
    upper: FrameBound | None = None


@dataclass(frozen=True)
class OverItem(Node):
    """``agg(x) OVER (...) [AS name]`` in a SELECT list."""

    call: Expr
    window: OverWindow
    alias: Ident | None = None


@dataclass(frozen=True)
class OverQuery(Node):
    """``SELECT ..., agg(x) OVER (...) ... FROM t [WHERE ...] [LATE DATA TO name]``: an
    OVER aggregation (Flink SQL's over aggregate): every row, with its aggregates."""

    select: tuple[SelectItem | Star | OverItem, ...]
    source: TableRef
    where: Expr | None = None
    late_data: LateDataTo | None = None


AnyQuery = Query | RankQuery | JoinQuery | OverQuery


@dataclass(frozen=True)
class CreateView(Node):
    """``CREATE VIEW name AS <query>``: a named query (of any kind)."""

    name: Ident
    query: AnyQuery


Statement = CreateSource | CreateView | Query | RankQuery | JoinQuery | OverQuery


@dataclass(frozen=True)
class Script(Node):
    """A whole ``.wql`` text: statements in file order, plus its comments."""

    statements: tuple[Statement, ...]
    comments: tuple[Comment, ...] = ()
