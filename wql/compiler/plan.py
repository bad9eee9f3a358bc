"""The typed plan: what a WQL file means, independent of the engine that runs it.

This module is a contract. The binder (``binder.py``) builds these nodes from
the AST, the planner (``planner.py``) fills in each query's engine choice, and
the backends (``backends/native.py``, ``backends/operator.py``) and the Spark
hosts read them. ``docs/plan.md`` describes the same contract in prose.

Conventions
-----------
* Every node is a frozen dataclass with tuple fields; ``span`` (where the
  construct is in the ``.wql`` text) never takes part in equality, so two
  compilations of differently formatted but equal queries give equal plans.
* Times and durations are integer milliseconds.
* Scalar expressions are :class:`Expr`: canonical Spark SQL text (runnable
  with ``F.expr(sql)`` / ``selectExpr``), its WQL type and the columns it
  reads. Pre-aggregation expressions (WHERE, keys, aggregate arguments,
  dynamic gaps, DELTA expressions) read the *source relation* (the source's
  columns). Post-aggregation expressions (SELECT list, HAVING) read the
  *post-aggregation relation*, see :func:`post_aggregation_schema`.
* Cross-field invariants are checked in ``__post_init__`` and raise
  :class:`~wql.errors.WqlSemanticError` with the node's span. The binder
  reports user mistakes first, with more precise spans; these checks make a
  malformed plan impossible to build by any other route (tests, backends).

The post-aggregation relation of a query has, in this order:

===================  ===========  ==========================================
column               type         meaning
===================  ===========  ==========================================
``<key name>``       key's type   one per grouping key, named as in KeyColumn
``window_start``     TIMESTAMP    NULL for count and GLOBAL() windows
``window_end``       TIMESTAMP    exclusive; NULL for count/GLOBAL() windows
``window_time``      TIMESTAMP    window_end - 1 ms; NULL for count/global
``pane_index``       BIGINT       0 for a window's first firing, +1 per firing
``pane_timing``      STRING       'EARLY' | 'ON_TIME' | 'LATE'
``__agg_<i>``        result type  the i-th aggregate (0-based)
===================  ===========  ==========================================
"""

from __future__ import annotations

import enum
from collections.abc import Iterator
from dataclasses import dataclass, field

from wql.compiler import types as T
from wql.compiler.types import WqlType
from wql.errors import ErrorCode, Span, WqlSemanticError

# ---------------------------------------------------------------------------
# Basics


class TimeDomain(enum.Enum):
    """Which clock drives a window or a trigger."""

    EVENT = "EVENT"
    PROCESSING = "PROCESSING"

    def __str__(self) -> str:
        return f"{self.value.lower()} time"


def _fail(message: str, span: Span | None, code: ErrorCode) -> None:
    raise WqlSemanticError(message, span, code=code)


@dataclass(frozen=True)
class Column:
    """A named, typed column of a relation."""

    name: str
    type: WqlType
    span: Span | None = field(default=None, compare=False, repr=False)


@dataclass(frozen=True)
class Expr:
    """A scalar expression.

    ``sql`` is canonical Spark SQL (sqlglot's Spark dialect) that runs
    unchanged in ``F.expr`` over the relation the expression reads;
    ``columns`` lists the columns of that relation it references, in first-use
    order; ``span`` is where the user wrote it (for synthesised expressions,
    the construct it was derived from).
    """

    sql: str
    type: WqlType
    columns: tuple[str, ...] = ()
    span: Span | None = field(default=None, compare=False, repr=False)


# ---------------------------------------------------------------------------
# Sources


@dataclass(frozen=True)
class EventTime:
    """Event time: the TIMESTAMP column and the bounded-out-of-orderness delay.

    The watermark after a row is ``max_ts_seen - delay_ms - 1`` (spec §3).
    """

    column: str
    delay_ms: int
    span: Span | None = field(default=None, compare=False, repr=False)

    def __post_init__(self) -> None:
        if self.delay_ms < 0:
            _fail(
                f"watermark delay must be >= 0, got {self.delay_ms} ms",
                self.span,
                code=ErrorCode.OUT_OF_RANGE,
            )


@dataclass(frozen=True)
class SourceDecl:
    """A source: declared with CREATE SOURCE and/or passed by the caller.

    ``declared`` is False when the schema came only from a caller-passed
    DataFrame. ``options`` are the WITH options as written (keys
    lower-cased), in declaration order; a relative ``path`` is resolved by the
    runner against the ``.wql`` file's folder, not here.
    """

    name: str
    columns: tuple[Column, ...]
    options: tuple[tuple[str, str], ...] = ()
    event_time: EventTime | None = None
    declared: bool = True
    span: Span | None = field(default=None, compare=False, repr=False)

    def __post_init__(self) -> None:
        seen: set[str] = set()
        for c in self.columns:
            low = c.name.lower()
            if low in seen:
                _fail(
                    f"duplicate column {c.name!r} in source {self.name!r}",
                    c.span or self.span,
                    code=ErrorCode.DUPLICATE_NAME,
                )
            seen.add(low)
        keys = [k for k, _ in self.options]
        if len(set(keys)) != len(keys):
            _fail(
                f"duplicate WITH option in source {self.name!r}",
                self.span,
                code=ErrorCode.DUPLICATE_NAME,
            )
        if self.event_time is not None:
            _check_event_time(self.name, self.columns, self.event_time)
        for opt in ("arrival_order", "processing_time"):
            col = self.option(opt)
            if col is not None and self.column(col) is None:
                _fail(
                    f"{opt} names unknown column {col!r} of source {self.name!r}",
                    self.span,
                    code=ErrorCode.UNKNOWN_NAME,
                )

    def column(self, name: str) -> Column | None:
        """The column called ``name`` (case-insensitive, as in Spark), or None."""
        low = name.lower()
        return next((c for c in self.columns if c.name.lower() == low), None)

    def option(self, key: str) -> str | None:
        return next((v for k, v in self.options if k == key.lower()), None)

    @property
    def format(self) -> str | None:
        return self.option("format")

    @property
    def path(self) -> str | None:
        return self.option("path")

    @property
    def reader_options(self) -> tuple[tuple[str, str], ...]:
        """Options to pass to Spark's reader: everything but WQL's own keys."""
        own = {"format", "path", "arrival_order", "processing_time"}
        return tuple((k, v) for k, v in self.options if k not in own)


def _check_event_time(source: str, columns: tuple[Column, ...], et: EventTime) -> None:
    col = next((c for c in columns if c.name.lower() == et.column.lower()), None)
    if col is None:
        _fail(
            f"WATERMARK FOR names unknown column {et.column!r} of source {source!r}",
            et.span,
            code=ErrorCode.UNKNOWN_NAME,
        )
    elif col.type != T.TIMESTAMP:
        _fail(
            f"WATERMARK FOR needs a TIMESTAMP column; {col.name!r} is {col.type.ddl}",
            et.span,
            code=ErrorCode.WRONG_TYPE,
        )


@dataclass(frozen=True)
class SourceRef:
    """A query's input: the source with the event time the query sees.

    ``event_time`` is the FROM clause's WATERMARK FOR when given, else the
    declaration's. ``processing_time`` and ``arrival_order`` name source
    columns used by batch replay (spec §3), from the source's WITH options.
    """

    name: str
    columns: tuple[Column, ...]
    event_time: EventTime | None = None
    processing_time: str | None = None
    arrival_order: str | None = None
    span: Span | None = field(default=None, compare=False, repr=False)

    def __post_init__(self) -> None:
        if self.event_time is not None:
            _check_event_time(self.name, self.columns, self.event_time)
        for opt, col in (
            ("processing_time", self.processing_time),
            ("arrival_order", self.arrival_order),
        ):
            if col is not None and self.column(col) is None:
                _fail(
                    f"{opt} names unknown column {col!r} of source {self.name!r}",
                    self.span,
                    code=ErrorCode.UNKNOWN_NAME,
                )

    def column(self, name: str) -> Column | None:
        low = name.lower()
        return next((c for c in self.columns if c.name.lower() == low), None)


# ---------------------------------------------------------------------------
# Windows


@dataclass(frozen=True)
class Tumble:
    """TUMBLE: ``[start, start + size)``, start = ts - ((ts - offset) mod size).

    ``time_column`` is the event-time column (None for PROCTIME()).
    """

    domain: TimeDomain
    time_column: str | None
    size_ms: int
    offset_ms: int = 0
    span: Span | None = field(default=None, compare=False, repr=False)

    kind = "TUMBLE"
    merging = False

    def __post_init__(self) -> None:
        _check_domain(self)
        _positive("TUMBLE size", self.size_ms, self.span)
        _offset_within(self, self.size_ms, "size")


@dataclass(frozen=True)
class Hop:
    """HOP (sliding): every ``size`` window starting at multiples of ``slide`` containing ts."""

    domain: TimeDomain
    time_column: str | None
    slide_ms: int
    size_ms: int
    offset_ms: int = 0
    span: Span | None = field(default=None, compare=False, repr=False)

    kind = "HOP"
    merging = False

    def __post_init__(self) -> None:
        _check_domain(self)
        _positive("HOP slide", self.slide_ms, self.span)
        _positive("HOP size", self.size_ms, self.span)
        _offset_within(self, self.slide_ms, "slide")


@dataclass(frozen=True)
class Cumulate:
    """CUMULATE: ``[s, s+step)``, ``[s, s+2*step)`` … ``[s, s+size)`` per size-aligned s."""

    domain: TimeDomain
    time_column: str | None
    step_ms: int
    size_ms: int
    offset_ms: int = 0
    span: Span | None = field(default=None, compare=False, repr=False)

    kind = "CUMULATE"
    merging = False

    def __post_init__(self) -> None:
        _check_domain(self)
        _positive("CUMULATE step", self.step_ms, self.span)
        _positive("CUMULATE size", self.size_ms, self.span)
        if self.size_ms % self.step_ms:
            _fail(
                "CUMULATE size must be a multiple of its step",
                self.span,
                code=ErrorCode.OUT_OF_RANGE,
            )
        _offset_within(self, self.size_ms, "size")


@dataclass(frozen=True)
class Session:
    """SESSION with a static gap: each row gets ``[ts, ts + gap)``; intersecting windows merge."""

    domain: TimeDomain
    time_column: str | None
    gap_ms: int
    span: Span | None = field(default=None, compare=False, repr=False)

    kind = "SESSION"
    merging = True

    def __post_init__(self) -> None:
        _check_domain(self)
        _positive("SESSION gap", self.gap_ms, self.span)


@dataclass(frozen=True)
class DynamicSession:
    """SESSION(ts, GAP <expr>): the gap is evaluated per row.

    ``gap_ms`` is a BIGINT expression over the source relation giving the gap
    in milliseconds (the binder converts interval-valued gaps). A row whose
    gap is NULL or <= 0 is not windowed: the runtime counts it as dropped
    ("invalid session gap"), never silently.
    """

    domain: TimeDomain
    time_column: str | None
    gap_ms: Expr
    span: Span | None = field(default=None, compare=False, repr=False)

    kind = "SESSION"
    merging = True

    def __post_init__(self) -> None:
        _check_domain(self)
        if not (self.gap_ms.type.is_integral or self.gap_ms.type.is_unknown):
            _fail(
                f"dynamic session gap must be BIGINT milliseconds, got {self.gap_ms.type}",
                self.span,
                code=ErrorCode.WRONG_TYPE,
            )


@dataclass(frozen=True)
class CountWindow:
    """COUNT_WINDOW(size [, slide]) over GlobalWindows.

    Tumbling (slide None): PurgingTrigger(CountTrigger(size)).
    Sliding: CountTrigger(slide) + CountEvictor(size) — the binder makes both
    explicit in ``Query.effective_trigger`` / ``Query.effective_evictor``.
    """

    size: int
    slide: int | None = None
    span: Span | None = field(default=None, compare=False, repr=False)

    kind = "COUNT_WINDOW"
    merging = False
    domain = None
    time_column = None

    def __post_init__(self) -> None:
        _positive("COUNT_WINDOW size", self.size, self.span)
        if self.slide is not None:
            _positive("COUNT_WINDOW slide", self.slide, self.span)


@dataclass(frozen=True)
class GlobalWindow:
    """GLOBAL(): one window per key that never fires without a TRIGGER."""

    span: Span | None = field(default=None, compare=False, repr=False)

    kind = "GLOBAL"
    merging = False
    domain = None
    time_column = None


Window = Tumble | Hop | Cumulate | Session | DynamicSession | CountWindow | GlobalWindow
TIME_WINDOWS = (Tumble, Hop, Cumulate, Session, DynamicSession)


def _check_domain(w) -> None:
    if (w.domain is TimeDomain.EVENT) != (w.time_column is not None):
        _fail(
            f"{w.kind}: an event-time window needs its time column, a processing-time one none",
            w.span,
            code=ErrorCode.NO_EVENT_TIME,
        )


def _offset_within(w: Tumble | Hop | Cumulate, bound: int, what: str) -> None:
    if abs(w.offset_ms) >= bound:
        _fail(
            f"{w.kind} offset must satisfy |offset| < {what}", w.span, code=ErrorCode.OUT_OF_RANGE
        )


def _positive(what: str, value: int, span: Span | None) -> None:
    if value <= 0:
        _fail(f"{what} must be > 0, got {value}", span, code=ErrorCode.OUT_OF_RANGE)


def has_bounds(window: Window) -> bool:
    """Whether window_start/window_end/window_time are meaningful (not NULL)."""
    return isinstance(window, TIME_WINDOWS)


# ---------------------------------------------------------------------------
# Triggers


class _TriggerNode:
    """What every trigger node has: the triggers nested in it and whether it can merge.

    A trigger merges (SESSION windows need that) when all its children do;
    a node that cannot merge whatever its children says so itself.
    """

    @property
    def children(self) -> tuple[Trigger, ...]:
        return ()

    @property
    def mergeable(self) -> bool:
        return all(c.mergeable for c in self.children)


@dataclass(frozen=True)
class WatermarkTrigger(_TriggerNode):
    """EventTimeTrigger: fire when the watermark passes window_time."""

    span: Span | None = field(default=None, compare=False, repr=False)


@dataclass(frozen=True)
class ProcessingTimeTrigger(_TriggerNode):
    """ProcessingTimeTrigger: fire when processing time passes window_time."""

    span: Span | None = field(default=None, compare=False, repr=False)


@dataclass(frozen=True)
class CountTrigger(_TriggerNode):
    """CountTrigger(n): FIRE every n rows (count reset on firing, no purge)."""

    n: int
    span: Span | None = field(default=None, compare=False, repr=False)

    def __post_init__(self) -> None:
        _positive("COUNT trigger count", self.n, self.span)


@dataclass(frozen=True)
class EveryTrigger(_TriggerNode):
    """ContinuousEventTimeTrigger / ContinuousProcessingTimeTrigger(interval)."""

    interval_ms: int
    domain: TimeDomain
    span: Span | None = field(default=None, compare=False, repr=False)

    def __post_init__(self) -> None:
        _positive("EVERY interval", self.interval_ms, self.span)


@dataclass(frozen=True)
class DeltaTrigger(_TriggerNode):
    """DeltaTrigger: FIRE when |expr(row) - expr(last fired row)| > threshold. Not mergeable."""

    expr: Expr
    threshold: float
    span: Span | None = field(default=None, compare=False, repr=False)

    def __post_init__(self) -> None:
        if not (self.expr.type.is_numeric or self.expr.type.is_unknown):
            _fail(
                f"DELTA expression must be numeric, got {self.expr.type}",
                self.span,
                code=ErrorCode.WRONG_TYPE,
            )
        if self.threshold < 0:
            _fail(
                f"DELTA threshold must be >= 0, got {self.threshold}",
                self.span,
                code=ErrorCode.OUT_OF_RANGE,
            )

    @property
    def mergeable(self) -> bool:
        return False


@dataclass(frozen=True)
class TimeoutTrigger(_TriggerNode):
    """ProcessingTimeoutTrigger.of(child, timeout) (no reset on new rows, clear on timeout).

    Not mergeable, whatever the child: Flink's ProcessingTimeoutTrigger does
    not override ``canMerge``/``onMerge`` (its timeout state has no merge
    rule), and the runtime follows Flink.
    """

    child: Trigger
    timeout_ms: int
    span: Span | None = field(default=None, compare=False, repr=False)

    def __post_init__(self) -> None:
        _positive("TIMEOUT interval", self.timeout_ms, self.span)

    @property
    def mergeable(self) -> bool:
        return False

    @property
    def children(self) -> tuple[Trigger, ...]:
        return (self.child,)


@dataclass(frozen=True)
class PurgingTrigger(_TriggerNode):
    """PurgingTrigger(child): every FIRE of the child becomes FIRE_AND_PURGE."""

    child: Trigger
    span: Span | None = field(default=None, compare=False, repr=False)

    @property
    def children(self) -> tuple[Trigger, ...]:
        return (self.child,)


@dataclass(frozen=True)
class AnyTrigger(_TriggerNode):
    """ANY(t1, t2, ...): fires when any child fires; each child's state kept separately."""

    triggers: tuple[Trigger, ...]
    span: Span | None = field(default=None, compare=False, repr=False)

    def __post_init__(self) -> None:
        if len(self.triggers) < 1:
            _fail("ANY needs at least one trigger", self.span, code=ErrorCode.OUT_OF_RANGE)

    @property
    def children(self) -> tuple[Trigger, ...]:
        return self.triggers


@dataclass(frozen=True)
class AllTrigger(_TriggerNode):
    """ALL(t1, t2, ...): fires when every child has fired since the last firing."""

    triggers: tuple[Trigger, ...]
    span: Span | None = field(default=None, compare=False, repr=False)

    def __post_init__(self) -> None:
        if len(self.triggers) < 1:
            _fail("ALL needs at least one trigger", self.span, code=ErrorCode.OUT_OF_RANGE)

    @property
    def children(self) -> tuple[Trigger, ...]:
        return self.triggers


@dataclass(frozen=True)
class EarlyLateTrigger(_TriggerNode):
    """WATERMARK WITH EARLY <t> [LATE <t>]: on-time firing at the watermark plus early/late ones.

    ``late`` None means every late row (within the allowed lateness) fires,
    as in Flink SQL's late-fire with zero delay and Beam's default.
    """

    early: Trigger | None
    late: Trigger | None
    span: Span | None = field(default=None, compare=False, repr=False)

    def __post_init__(self) -> None:
        if self.early is None and self.late is None:
            _fail(
                "WATERMARK WITH needs an EARLY or a LATE trigger",
                self.span,
                code=ErrorCode.OUT_OF_RANGE,
            )

    @property
    def children(self) -> tuple[Trigger, ...]:
        return tuple(t for t in (self.early, self.late) if t is not None)


Trigger = (
    WatermarkTrigger
    | ProcessingTimeTrigger
    | CountTrigger
    | EveryTrigger
    | DeltaTrigger
    | TimeoutTrigger
    | PurgingTrigger
    | AnyTrigger
    | AllTrigger
    | EarlyLateTrigger
)


def walk_trigger(t: Trigger) -> Iterator[Trigger]:
    """``t`` and every trigger nested in it, depth first, parents before children."""
    yield t
    for c in t.children:
        yield from walk_trigger(c)


def trigger_domains(t: Trigger) -> frozenset[TimeDomain]:
    """The clocks a trigger tree reacts to (TIMEOUT uses processing time).

    A query whose trigger uses both domains depends on how the two clocks
    interleave; batch hosts must feed the global clock sequence for it
    (docs/architecture.md).
    """
    out: set[TimeDomain] = set()
    for node in walk_trigger(t):
        if isinstance(node, (WatermarkTrigger, EarlyLateTrigger)):
            out.add(TimeDomain.EVENT)
        elif isinstance(node, (ProcessingTimeTrigger, TimeoutTrigger)):
            out.add(TimeDomain.PROCESSING)
        elif isinstance(node, EveryTrigger):
            out.add(node.domain)
    return frozenset(out)


def first_non_mergeable(t: Trigger) -> Trigger | None:
    """The innermost trigger that makes ``t`` non-mergeable (for error messages), or None."""
    if t.mergeable:
        return None
    for c in t.children:
        culprit = first_non_mergeable(c)
        if culprit is not None:
            return culprit
    return t


# ---------------------------------------------------------------------------
# Evictors


@dataclass(frozen=True)
class CountEvictor:
    """Keep the last n rows (arrival order)."""

    n: int
    after: bool = False
    span: Span | None = field(default=None, compare=False, repr=False)

    def __post_init__(self) -> None:
        _positive("EVICT COUNT", self.n, self.span)


@dataclass(frozen=True)
class TimeEvictor:
    """Keep rows with ts > max_ts - interval."""

    interval_ms: int
    after: bool = False
    span: Span | None = field(default=None, compare=False, repr=False)

    def __post_init__(self) -> None:
        _positive("EVICT TIME interval", self.interval_ms, self.span)


@dataclass(frozen=True)
class DeltaEvictor:
    """Remove rows with |expr(row) - expr(last row)| >= threshold."""

    expr: Expr
    threshold: float
    after: bool = False
    span: Span | None = field(default=None, compare=False, repr=False)

    def __post_init__(self) -> None:
        if not (self.expr.type.is_numeric or self.expr.type.is_unknown):
            _fail(
                f"DELTA evictor expression must be numeric, got {self.expr.type}",
                self.span,
                code=ErrorCode.WRONG_TYPE,
            )
        if self.threshold < 0:
            _fail(
                f"DELTA threshold must be >= 0, got {self.threshold}",
                self.span,
                code=ErrorCode.OUT_OF_RANGE,
            )


Evictor = CountEvictor | TimeEvictor | DeltaEvictor


# ---------------------------------------------------------------------------
# Aggregates and output


class AggKind(enum.Enum):
    COUNT_STAR = "COUNT_STAR"
    COUNT = "COUNT"
    SUM = "SUM"
    MIN = "MIN"
    MAX = "MAX"
    AVG = "AVG"
    COUNT_DISTINCT = "COUNT_DISTINCT"
    FIRST_VALUE = "FIRST_VALUE"
    LAST_VALUE = "LAST_VALUE"
    COLLECT_LIST = "COLLECT_LIST"


@dataclass(frozen=True)
class Aggregate:
    """One aggregate the window computes; ``name`` is ``__agg_<i>``.

    ``arg`` reads the source relation (None only for COUNT(*)). Identical
    aggregate calls in SELECT and HAVING share one Aggregate.
    """

    kind: AggKind
    arg: Expr | None
    name: str
    type: WqlType
    span: Span | None = field(default=None, compare=False, repr=False)

    def __post_init__(self) -> None:
        if (self.arg is None) != (self.kind is AggKind.COUNT_STAR):
            _fail(
                f"{self.kind.value} {'needs' if self.arg is None else 'takes no'} argument",
                self.span,
                code=ErrorCode.AGGREGATE,
            )

    @property
    def call_sql(self) -> str:
        """The aggregate as SQL over the source relation, e.g. ``SUM(amount)``."""
        if self.kind is AggKind.COUNT_STAR:
            return "COUNT(*)"
        assert self.arg is not None
        if self.kind is AggKind.COUNT_DISTINCT:
            return f"COUNT(DISTINCT {self.arg.sql})"
        return f"{self.kind.value}({self.arg.sql})"


@dataclass(frozen=True)
class KeyColumn:
    """A grouping key: its column name in the post-aggregation relation and its expression.

    A key that is a plain source column keeps that column's name; any other
    key expression is named ``__key_<i>``.
    """

    name: str
    expr: Expr
    type: WqlType
    span: Span | None = field(default=None, compare=False, repr=False)


@dataclass(frozen=True)
class OutputColumn:
    """One SELECT item: output name and expression over the post-aggregation relation."""

    name: str
    expr: Expr
    type: WqlType
    span: Span | None = field(default=None, compare=False, repr=False)


# ---------------------------------------------------------------------------
# Engine choice


@dataclass(frozen=True)
class Reason:
    """Why a query runs on its engine, pointing at the clause responsible (if any).

    ``clause`` is the clause as WQL (``TRIGGER COUNT(100)``), ``message``
    the rest (``needs the operator engine: ...``); :attr:`text` joins them
    with the clause's line. The line is kept out of ``message`` so that plans
    of differently formatted texts stay equal.
    """

    message: str
    span: Span | None = field(default=None, compare=False)
    clause: str = ""

    @property
    def text(self) -> str:
        if not self.clause:
            return self.message
        where = f" at line {self.span.line}" if self.span is not None else ""
        return f"{self.clause}{where} {self.message}"


@dataclass(frozen=True)
class EngineChoice:
    """``engine`` is 'native' or 'operator'; ``forced`` when the user chose it;
    ``streaming`` when it was chosen for a streaming source (planner.py)."""

    engine: str
    reasons: tuple[Reason, ...] = ()
    forced: bool = False
    streaming: bool = False

    def __post_init__(self) -> None:
        if self.engine not in ("native", "operator"):
            raise ValueError(f"unknown engine {self.engine!r}")


# ---------------------------------------------------------------------------
# Queries and the program

PANE_COLUMNS = ("pane_index", "pane_timing")
WINDOW_COLUMNS = ("window_start", "window_end", "window_time")
LATE_EVENT_TIME_COLUMN = "event_time"


@dataclass(frozen=True, kw_only=True)
class Query:
    """One windowed query, fully resolved (built by keyword only).

    ``trigger`` is what the user wrote (None: the window's default);
    ``effective_trigger`` is the trigger the runtime must run (defaults
    filled in, COUNT_WINDOW expanded; None only for GLOBAL(), which the
    binder rejects without a trigger). ``effective_evictor`` likewise adds
    COUNT_WINDOW(size, slide)'s CountEvictor(size) when no EVICT is given.
    ``engine`` is None until the planner has run.
    """

    name: str
    source: SourceRef
    filter: Expr | None
    keys: tuple[KeyColumn, ...]
    window: Window
    trigger: Trigger | None
    effective_trigger: Trigger
    evictor: Evictor | None
    allowed_lateness_ms: int
    late_output: str | None
    aggregates: tuple[Aggregate, ...]
    output: tuple[OutputColumn, ...]
    having: Expr | None = None
    engine: EngineChoice | None = None
    effective_evictor: Evictor | None = None
    span: Span | None = field(default=None, compare=False, repr=False)
    lateness_span: Span | None = field(default=None, compare=False, repr=False)
    """Where ALLOWED LATENESS is written (None when absent)."""
    late_output_span: Span | None = field(default=None, compare=False, repr=False)
    """Where LATE DATA TO is written (None when absent)."""

    def __post_init__(self) -> None:
        if self.allowed_lateness_ms < 0:
            _fail("ALLOWED LATENESS must be >= 0", self.span, code=ErrorCode.OUT_OF_RANGE)
        if self.window.domain is TimeDomain.EVENT and self.source.event_time is None:
            _fail(
                f"{self.window.kind} on event time needs a WATERMARK on {self.source.name!r}",
                self.span,
                code=ErrorCode.NO_EVENT_TIME,
            )
        if (
            self.window.domain is TimeDomain.EVENT
            and self.source.event_time is not None
            and self.window.time_column is not None
            and self.window.time_column.lower() != self.source.event_time.column.lower()
        ):
            _fail(
                f"window time column {self.window.time_column!r} is not the event-time "
                f"column {self.source.event_time.column!r}",
                self.window.span or self.span,
                code=ErrorCode.NO_EVENT_TIME,
            )
        if self.window.merging and not self.effective_trigger.mergeable:
            _fail(
                "SESSION windows merge, so their trigger must be mergeable",
                self.span,
                code=ErrorCode.NOT_MERGEABLE,
            )
        if self.late_output is not None and self.window.domain is not TimeDomain.EVENT:
            _fail(
                "LATE DATA TO needs an event-time window", self.span, code=ErrorCode.NOT_FOR_WINDOW
            )
        names = [a.name for a in self.aggregates]
        if names != [f"__agg_{i}" for i in range(len(names))]:
            _fail(
                "aggregates must be named __agg_0, __agg_1, ... in order",
                self.span,
                code=ErrorCode.AGGREGATE,
            )
        out = [c.name.lower() for c in self.output]
        if len(set(out)) != len(out):
            _fail("duplicate output column names", self.span, code=ErrorCode.DUPLICATE_NAME)
        if self.having is not None and not (
            self.having.type == T.BOOLEAN or self.having.type.is_unknown
        ):
            _fail(
                f"HAVING must be BOOLEAN, got {self.having.type}",
                self.having.span or self.span,
                code=ErrorCode.WRONG_TYPE,
            )
        if self.filter is not None and not (
            self.filter.type == T.BOOLEAN or self.filter.type.is_unknown
        ):
            _fail(
                f"WHERE must be BOOLEAN, got {self.filter.type}",
                self.filter.span or self.span,
                code=ErrorCode.WRONG_TYPE,
            )

    @property
    def time_domain(self) -> TimeDomain | None:
        """The window's clock (None for count and GLOBAL() windows)."""
        return self.window.domain

    @property
    def event_time(self) -> EventTime | None:
        return self.source.event_time

    @property
    def post_aggregation_schema(self) -> tuple[Column, ...]:
        return post_aggregation_schema(self)

    @property
    def output_schema(self) -> tuple[Column, ...]:
        """The result's columns (name, WQL type), in SELECT order."""
        return tuple(Column(c.name, c.type, c.span) for c in self.output)

    @property
    def late_schema(self) -> tuple[Column, ...] | None:
        """Columns of the LATE DATA TO output, or None without one.

        The source's columns in declaration order, then ``event_time``
        (TIMESTAMP): the event time the operator assigned to the row (the
        event-time column floored to ms). When the source's event-time column
        is itself called ``event_time`` it is not repeated.
        """
        if self.late_output is None:
            return None
        cols = [c for c in self.source.columns if c.name.lower() != LATE_EVENT_TIME_COLUMN]
        return (*cols, Column(LATE_EVENT_TIME_COLUMN, T.TIMESTAMP))


def window_result_schema(keys: tuple[KeyColumn, ...]) -> tuple[Column, ...]:
    """The post-aggregation relation before its aggregates: keys, window and pane columns."""
    cols = [Column(k.name, k.type) for k in keys]
    cols += [Column(n, T.TIMESTAMP) for n in WINDOW_COLUMNS]
    cols += [Column("pane_index", T.BIGINT), Column("pane_timing", T.STRING)]
    return tuple(cols)


def post_aggregation_schema(q: Query) -> tuple[Column, ...]:
    """The relation SELECT and HAVING read (see the module docstring)."""
    return window_result_schema(q.keys) + tuple(Column(a.name, a.type) for a in q.aggregates)


@dataclass(frozen=True)
class Program:
    """A compiled ``.wql`` file: its sources and its queries in file order."""

    sources: tuple[SourceDecl, ...]
    queries: tuple[Query, ...]
    span: Span | None = field(default=None, compare=False, repr=False)

    def __post_init__(self) -> None:
        names = [q.name.lower() for q in self.queries]
        late = [q.late_output.lower() for q in self.queries if q.late_output]
        all_names = names + late
        if len(set(all_names)) != len(all_names):
            _fail(
                "query and late-output names must be unique",
                self.span,
                code=ErrorCode.DUPLICATE_NAME,
            )

    def source(self, name: str) -> SourceDecl | None:
        low = name.lower()
        return next((s for s in self.sources if s.name.lower() == low), None)

    def query(self, name: str) -> Query:
        low = name.lower()
        for q in self.queries:
            if q.name.lower() == low:
                return q
        raise KeyError(name)
