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
``is_first``         BOOLEAN      pane_index = 0 (only when the query reads it)
``is_last``          BOOLEAN      the pane of the timer that cleaned the window up
                                  (only when the query reads it)
``__agg_<i>``        result type  the i-th aggregate (0-based)
===================  ===========  ==========================================
"""

from __future__ import annotations

import enum
import functools
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, TypeVar

from wql.compiler import types as T
from wql.compiler.types import WqlType
from wql.errors import ErrorCode, Span, WqlSemanticError

if TYPE_CHECKING:  # the stream plans carry the operator plans built at planning
    from wql.compiler.backends.operator import OperatorPlan

_T = TypeVar("_T")

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

    @property
    def column_ref(self) -> str | None:
        """The column of :attr:`columns` this expression is, as it is, else None."""
        s = self.sql.strip()
        return next((c for c in self.columns if s in _spellings(c)), None)

    @property
    def millis_ref(self) -> str | None:
        """The column of :attr:`columns` this expression is ``UNIX_MILLIS`` of, else None."""
        s = self.sql.strip()
        return next(
            (c for c in self.columns if s in {f"UNIX_MILLIS({n})" for n in _spellings(c)}), None
        )


def _spellings(column: str) -> tuple[str, str]:
    """How generated Spark SQL spells a reference to ``column``: bare or back-quoted."""
    return column, "`" + column.replace("`", "``") + "`"


# ---------------------------------------------------------------------------
# Sources


@dataclass(frozen=True)
class EventTime:
    """Event time: the TIMESTAMP column and the bounded-out-of-orderness delay.

    The watermark after a row is ``max_ts_seen - delay_ms - 1`` (docs/architecture.md,
    "Contract: batch replay on Spark").
    ``idle_ms`` (``IDLE AFTER``): once no row has arrived for that long in
    processing time, the watermark advances as if event time passed with
    processing time since the last row: ``max_ts_seen + (now - last arrival)
    - delay_ms - 1`` (docs/language.md, "Idle sources"); it never goes back.
    """

    column: str
    delay_ms: int
    span: Span | None = field(default=None, compare=False, repr=False)
    idle_ms: int | None = field(default=None, kw_only=True)
    idle_span: Span | None = field(default=None, compare=False, repr=False, kw_only=True)
    """Where IDLE AFTER is written."""

    def __post_init__(self) -> None:
        if self.delay_ms < 0:
            _fail(
                f"watermark delay must be >= 0, got {self.delay_ms} ms",
                self.span,
                code=ErrorCode.OUT_OF_RANGE,
            )
        if self.idle_ms is not None and self.idle_ms <= 0:
            _fail(
                f"IDLE AFTER must be > 0, got {self.idle_ms} ms",
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
    def table(self) -> str | None:
        """The table of Spark's catalog the source reads (``WITH (table = 'db.events')``)."""
        return self.option("table")

    @property
    def reader_options(self) -> tuple[tuple[str, str], ...]:
        """Options to pass to Spark's reader: everything but WQL's own keys."""
        own = {"format", "path", "table", "arrival_order", "processing_time"}
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
    """A query's input: a source, or a view (another query's output), with its event time.

    For a source, ``event_time`` is the FROM clause's WATERMARK FOR when
    given, else the declaration's; ``processing_time`` and ``arrival_order``
    name source columns used by batch replay (docs/architecture.md), from the source's
    WITH options.

    For a view (``view`` is its query name, as ``name``), ``columns`` are
    the view's output columns and ``event_time`` is the column the view
    selects ``window_time`` as (Flink SQL: a window's ``window_time`` is a
    rowtime attribute), with no delay of its own: the watermark is the
    view's, forwarded after its firings (docs/architecture.md, "Contract:
    pipelines"). A view that does not select ``window_time`` gives no event
    time.
    """

    name: str
    columns: tuple[Column, ...]
    event_time: EventTime | None = None
    processing_time: str | None = None
    arrival_order: str | None = None
    span: Span | None = field(default=None, compare=False, repr=False)
    view: str | None = None

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

    @property
    def finishes(self) -> bool:
        """Whether the trigger can finish (fire for the last time and close its window)."""
        return False


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
    """ContinuousEventTimeTrigger / ContinuousProcessingTimeTrigger(interval).

    ``on_update`` (EVERY ... ON UPDATE): fire at the next boundary after rows
    arrived, only when rows arrived since the last firing (the runtime's
    OnUpdateTrigger), instead of at every boundary. ``after_first_row``
    (``AFTER <interval>``, with ``on_update``): fire ``interval`` after the
    first row of a pane instead of at a boundary.
    """

    interval_ms: int
    domain: TimeDomain
    on_update: bool = False
    after_first_row: bool = False
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

    @property
    def finishes(self) -> bool:
        return self.child.finishes


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


@dataclass(frozen=True)
class OnceTrigger(_TriggerNode):
    """ONCE child: the child's first firing, then finished (Beam's once triggers)."""

    child: Trigger
    span: Span | None = field(default=None, compare=False, repr=False)

    @property
    def children(self) -> tuple[Trigger, ...]:
        return (self.child,)

    @property
    def finishes(self) -> bool:
        return True


@dataclass(frozen=True)
class UntilTrigger(_TriggerNode):
    """UNTIL(child, until): Beam's ``child.orFinally(until)``: fire as the child does,
    finish when ``until`` fires (a last pane) or the child finishes."""

    child: Trigger
    until: Trigger
    span: Span | None = field(default=None, compare=False, repr=False)

    @property
    def children(self) -> tuple[Trigger, ...]:
        return (self.child, self.until)

    @property
    def finishes(self) -> bool:
        return True


@dataclass(frozen=True)
class SequenceTrigger(_TriggerNode):
    """SEQUENCE(t1, t2, ...): Beam's ``AfterEach.inOrder``: one child at a time, the next
    when it finishes; finishes with the last. Not mergeable (module docs of the runtime's
    SequenceTrigger)."""

    triggers: tuple[Trigger, ...]
    span: Span | None = field(default=None, compare=False, repr=False)

    def __post_init__(self) -> None:
        if len(self.triggers) < 2:
            _fail(
                "SEQUENCE needs at least two triggers",
                self.span,
                code=ErrorCode.FINISHING_TRIGGER,
            )

    @property
    def children(self) -> tuple[Trigger, ...]:
        return self.triggers

    @property
    def mergeable(self) -> bool:
        return False

    @property
    def finishes(self) -> bool:
        return True


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
    | OnceTrigger
    | UntilTrigger
    | SequenceTrigger
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
# Emit

#: Pane timings, in the order a window's panes come.
PANE_TIMINGS = ("EARLY", "ON_TIME", "LATE")


@dataclass(frozen=True)
class Accumulation:
    """EMIT [EARLY | ON_TIME | LATE] ACCUMULATING | DISCARDING (Beam's accumulation mode).

    ``discarding``: the pane timings whose panes purge the contents they
    fired (DISCARDING), in :data:`PANE_TIMINGS` order; every other pane keeps
    them (ACCUMULATING). ``per_timing``: the clause named pane timings (only
    windows with an end have them); False: one mode for every pane.
    """

    discarding: tuple[str, ...]
    per_timing: bool = False
    span: Span | None = field(default=None, compare=False, repr=False)

    def __post_init__(self) -> None:
        if self.discarding != tuple(t for t in PANE_TIMINGS if t in self.discarding):
            _fail(
                f"discarding pane timings must be a subset of {PANE_TIMINGS} in that order",
                self.span,
                code=ErrorCode.EMIT,
            )

    @property
    def discards_all(self) -> bool:
        """Every pane purges what it fired: exactly PURGING on the trigger."""
        return self.discarding == PANE_TIMINGS


#: The column EMIT CHANGELOG puts first in the output: Flink's RowKind, short form.
OP_COLUMN = "op"
CHANGELOG_OPS = ("+I", "-U", "+U", "-D")


@dataclass(frozen=True)
class Changelog:
    """EMIT CHANGELOG: the output is a changelog of a table with one row per window.

    Every output row carries ``op`` (first column): ``+I`` a window's first
    row, ``-U`` / ``+U`` the retraction of the row a window emitted last and
    its new row (every later pane), ``-D`` the retraction of the row of a
    window a session merge absorbed. A row of the table is identified by the
    grouping keys and ``window_start``, ``window_end`` (NULL for count and
    GLOBAL() windows), which the SELECT list must hold as they are
    (:attr:`Query.changelog_key`), and a window's rows are ordered by
    ``pane_index`` (also selected), a row before its retraction.
    """

    span: Span | None = field(default=None, compare=False, repr=False)


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
    ``streaming`` when it was chosen for a streaming source (planner.py);
    ``stream``: how an operator stage runs on a stream (its :data:`StreamPlan`,
    computed once by the planner and read by the stream hosts)."""

    engine: str
    reasons: tuple[Reason, ...] = ()
    forced: bool = False
    streaming: bool = False
    stream: StreamPlan | None = field(default=None, compare=False, repr=False)

    def __post_init__(self) -> None:
        if self.engine not in ("native", "operator"):
            raise ValueError(f"unknown engine {self.engine!r}")


# ---------------------------------------------------------------------------
# Queries and the program

#: Pane markers: in the post-aggregation relation of a query that reads them (SELECT
#: or HAVING); the runtime marks a window's last pane only for such a query.
MARK_COLUMNS = ("is_first", "is_last")
PANE_COLUMNS = ("pane_index", "pane_timing", *MARK_COLUMNS)
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
    ``engine`` is None until the planner has run. ``accumulation`` is the
    EMIT clause's accumulation mode (None: the trigger decides, as without
    EMIT: a PURGING trigger discards, any other accumulates).
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
    accumulation: Accumulation | None = None
    changelog: Changelog | None = None

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
        if self.accumulation is not None:
            _check_accumulation(self.accumulation, self.window, self.effective_trigger)
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

    def reads(self, column: str) -> bool:
        """Whether SELECT or HAVING reads ``column`` of the post-aggregation relation."""
        used = {c for o in self.output for c in o.expr.columns}
        if self.having is not None:
            used |= set(self.having.columns)
        return column in used

    @property
    def marks_last(self) -> bool:
        """The runtime must mark each window's last pane: SELECT or HAVING reads is_last."""
        return self.reads("is_last")

    @property
    def event_time(self) -> EventTime | None:
        return self.source.event_time

    @property
    def post_aggregation_schema(self) -> tuple[Column, ...]:
        return post_aggregation_schema(self)

    @property
    def inputs(self) -> tuple[SourceRef, ...]:
        """What the stage reads: its source or view (a join: both sides')."""
        return (self.source,)

    @property
    def output_schema(self) -> tuple[Column, ...]:
        """The result's columns (name, WQL type), in SELECT order; ``op`` first with
        EMIT CHANGELOG."""
        cols = tuple(Column(c.name, c.type, c.span) for c in self.output)
        if self.changelog is not None:
            return (Column(OP_COLUMN, T.STRING), *cols)
        return cols

    @property
    def changelog_key(self) -> tuple[str, ...]:
        """The output columns that identify a changelog row (EMIT CHANGELOG): the
        grouping keys, then window_start and window_end for time windows; empty for a
        key or window column that is not selected as it is."""
        wanted = [k.name for k in self.keys]
        if has_bounds(self.window):
            wanted += ["window_start", "window_end"]
        plain = {o.expr.sql: o.name for o in self.output if len(o.expr.columns) == 1}
        out = []
        for name in wanted:
            for spelling in (name, "`" + name.replace("`", "``") + "`"):
                if spelling in plain:
                    out.append(plain[spelling])
                    break
            else:
                return ()
        return tuple(out)

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


def _check_accumulation(a: Accumulation, window: Window, trigger: Trigger) -> None:
    if a.per_timing and not has_bounds(window):
        _fail(
            f"EMIT modes per pane timing need a window with an end; a {window.kind} window's "
            "panes are neither EARLY, ON_TIME nor LATE",
            a.span,
            code=ErrorCode.EMIT,
        )
    if any(isinstance(t, PurgingTrigger) for t in walk_trigger(trigger)):
        _fail(
            "an EMIT accumulation mode cannot be combined with a PURGING trigger, which "
            "discards every pane's contents already",
            a.span,
            code=ErrorCode.EMIT,
        )


def window_result_schema(
    keys: tuple[KeyColumn, ...], marks: tuple[str, ...] = MARK_COLUMNS
) -> tuple[Column, ...]:
    """The post-aggregation relation before its aggregates: keys, window and pane columns
    (of the pane markers, those in ``marks``; SELECT and HAVING bind against all)."""
    cols = [Column(k.name, k.type) for k in keys]
    cols += [Column(n, T.TIMESTAMP) for n in WINDOW_COLUMNS]
    cols += [Column("pane_index", T.BIGINT), Column("pane_timing", T.STRING)]
    cols += [Column(n, T.BOOLEAN) for n in MARK_COLUMNS if n in marks]
    return tuple(cols)


def post_aggregation_schema(q: Query) -> tuple[Column, ...]:
    """The relation SELECT and HAVING read (see the module docstring)."""
    marks = tuple(n for n in MARK_COLUMNS if q.reads(n))
    return window_result_schema(q.keys, marks) + tuple(Column(a.name, a.type) for a in q.aggregates)


# ---------------------------------------------------------------------------
# Window Top-N and deduplication

#: The columns a window table function adds to its table's rows (Flink SQL).
WINDOW_TABLE_COLUMNS = WINDOW_COLUMNS
#: The rank's column in the ranked relation when the query does not name it.
RANK_COLUMN = "__wql_rn"


class RankKeep(enum.Enum):
    """Which rows of a window partition a window rank keeps, and how ties go.

    ``TOP``: Flink's window Top-N (``WindowRankProcessor``): the first N by
    the ORDER BY, equal rows in arrival order. ``FIRST`` / ``LAST``: Flink's
    window deduplication (``RowTimeDeduplicateRecordsCombiner``), chosen when
    the rank keeps one row ordered by the time attribute alone: the row with
    the smallest time, the first of equal ones (``FIRST``, ascending), or the
    row with the largest time, the *last* of equal ones (``LAST``,
    descending). ``RANK`` / ``DENSE_RANK``: a Top-N by ``RANK()`` /
    ``DENSE_RANK()`` (which Flink's window Top-N refuses): equal rows share a
    rank and every row ranked at most N is kept, so ties can keep more than N.
    """

    TOP = "TOP"
    FIRST = "FIRST"
    LAST = "LAST"
    RANK = "RANK"
    DENSE_RANK = "DENSE_RANK"

    @property
    def deduplicates(self) -> bool:
        """A window deduplication (one row per window by time), not a Top-N."""
        return self in (RankKeep.FIRST, RankKeep.LAST)

    @property
    def tied(self) -> bool:
        """Equal rows share a rank: which rows are kept does not depend on arrival."""
        return self in (RankKeep.RANK, RankKeep.DENSE_RANK)

    @property
    def function(self) -> str:
        """The ranking function, as SQL writes it."""
        return self.value if self.tied else "ROW_NUMBER"


@dataclass(frozen=True)
class RankOrder:
    """One ORDER BY item of a rank's ``OVER``: an expression over the input relation.

    NULLs come first ascending and last descending (Spark's and Flink's default).
    """

    expr: Expr
    descending: bool = False
    span: Span | None = field(default=None, compare=False, repr=False)


@dataclass(frozen=True, kw_only=True)
class WindowRank:
    """A window Top-N or deduplication (Flink SQL's window rank), fully resolved.

    The *input relation* is what the rank reads: a view's output columns
    (``source.view`` set; ``bounds`` names its window_start and window_end
    columns), or a window table function over ``source`` (``window`` set):
    the source's columns, then ``window_start``, ``window_end`` and
    ``window_time``. ``filter`` (WHERE before ranking), ``keys`` (PARTITION BY
    besides the window bounds) and ``order`` read it. Each window partition
    is ranked when the watermark passes the window's end; rows of a window
    that has fired already are late: dropped and counted.

    The *ranked relation* is ``inner`` (expressions over the input relation,
    the Top-N subquery's SELECT list; every input column for QUALIFY) and the
    rank, ``rank_column`` (BIGINT, 1..``limit``; ties: ``keep``). ``condition`` (the outer
    WHERE or QUALIFY) and ``output`` read it.
    """

    name: str
    source: SourceRef
    window: Window | None
    filter: Expr | None
    keys: tuple[KeyColumn, ...]
    bounds: tuple[str, str] | None
    order: tuple[RankOrder, ...]
    limit: int
    keep: RankKeep
    inner: tuple[OutputColumn, ...]
    rank_column: str
    condition: Expr | None
    output: tuple[OutputColumn, ...]
    #: A view's columns whose order is the order its rows of one window arrive in (its
    #: grouping keys, docs/architecture.md "Contract: pipelines"); None when the view
    #: does not select them all (equal rows then rank in an order only the operator knows).
    ties: tuple[str, ...] | None = ()
    engine: EngineChoice | None = None
    span: Span | None = field(default=None, compare=False, repr=False)

    #: A window rank has no late output: late rows are dropped and counted (as Flink).
    late_output = None
    late_schema = None
    allowed_lateness_ms = 0

    def __post_init__(self) -> None:
        if self.limit < 1:
            _fail("a window Top-N keeps at least one row", self.span, code=ErrorCode.OUT_OF_RANGE)
        if (self.window is None) == (self.bounds is None):
            _fail(
                "a window rank reads a window table or a view with window bounds",
                self.span,
                code=ErrorCode.SEMANTIC,
            )
        if self.keep.deduplicates and (self.limit != 1 or len(self.order) != 1):
            _fail("deduplication keeps one row by time", self.span, code=ErrorCode.SEMANTIC)
        out = [c.name.lower() for c in self.output]
        if len(set(out)) != len(out):
            _fail("duplicate output column names", self.span, code=ErrorCode.DUPLICATE_NAME)

    @property
    def window_bounds(self) -> tuple[str, str]:
        """The input columns holding window_start and window_end."""
        return self.bounds or ("window_start", "window_end")

    @property
    def inputs(self) -> tuple[SourceRef, ...]:
        """What the stage reads: its source or view (a join: both sides')."""
        return (self.source,)

    @property
    def output_schema(self) -> tuple[Column, ...]:
        return tuple(Column(c.name, c.type, c.span) for c in self.output)

    @property
    def event_time(self) -> EventTime | None:
        return self.source.event_time


# ---------------------------------------------------------------------------
# Window join


class JoinKind(enum.Enum):
    INNER = "INNER"
    LEFT = "LEFT"
    RIGHT = "RIGHT"
    FULL = "FULL"


@dataclass(frozen=True)
class JoinSide:
    """One input of a window join: a windowed relation under a qualifier.

    ``source`` is the table read (a view, or the window table function's
    table); ``window`` the window table function's window (None: a view);
    ``windows`` the windows the side's rows are in (the window table's, or the
    view's own); ``columns`` the side's relation; ``bounds`` its window_start
    and window_end columns; ``internal`` each column's name in the joined
    relation (``__wql_l<i>`` / ``__wql_r<i>``).
    """

    qualifier: str
    source: SourceRef
    window: Window | None
    windows: Window
    columns: tuple[Column, ...]
    bounds: tuple[str, str]
    internal: tuple[str, ...]
    span: Span | None = field(default=None, compare=False, repr=False)

    def internal_name(self, column: str) -> str:
        low = column.lower()
        i = next(i for i, c in enumerate(self.columns) if c.name.lower() == low)
        return self.internal[i]


@dataclass(frozen=True, kw_only=True)
class WindowJoin:
    """A window join (Flink SQL's ``WindowJoinOperator``), fully resolved.

    Both sides are windowed relations of the same windows and the same source
    (one watermark). Each window of each key joins once, when the watermark
    passes its end; a row of a window that has fired already is late:
    dropped and counted (only a window table over a source replayed out of
    event-time order has such rows). ``on`` is the whole ON condition
    (window bounds, keys and the rest) and ``where`` the WHERE, both over the
    *joined relation*: every column of both sides under its internal name;
    ``output`` reads it too.
    """

    name: str
    left: JoinSide
    right: JoinSide
    kind: JoinKind
    on: Expr
    where: Expr | None
    output: tuple[OutputColumn, ...]
    engine: EngineChoice | None = None
    span: Span | None = field(default=None, compare=False, repr=False)

    late_output = None
    late_schema = None
    allowed_lateness_ms = 0

    def __post_init__(self) -> None:
        out = [c.name.lower() for c in self.output]
        if len(set(out)) != len(out):
            _fail("duplicate output column names", self.span, code=ErrorCode.DUPLICATE_NAME)

    @property
    def sides(self) -> tuple[JoinSide, JoinSide]:
        return (self.left, self.right)

    @property
    def joined_schema(self) -> tuple[Column, ...]:
        return tuple(
            Column(n, c.type)
            for side in self.sides
            for n, c in zip(side.internal, side.columns, strict=True)
        )

    @property
    def inputs(self) -> tuple[SourceRef, ...]:
        """What the stage reads: its source or view (a join: both sides')."""
        return (self.left.source, self.right.source)

    @property
    def output_schema(self) -> tuple[Column, ...]:
        return tuple(Column(c.name, c.type, c.span) for c in self.output)


# ---------------------------------------------------------------------------
# OVER aggregation


class OverFrame(enum.Enum):
    """How an OVER frame reaches back: by time (``RANGE``) or by rows (``ROWS``)."""

    RANGE = "RANGE"
    ROWS = "ROWS"


@dataclass(frozen=True, kw_only=True)
class OverAggregate:
    """An OVER aggregation (Flink SQL's event-time over aggregate), fully resolved.

    Every row of ``source`` that passes ``filter`` comes out once, when the
    watermark passes its event time, with ``aggregates`` over its frame: the
    rows of its ``keys`` (PARTITION BY) with time in ``[ts - preceding, ts]``
    (``RANGE``, ms) or itself and the ``preceding`` rows before it in (time,
    arrival) order (``ROWS``); ``preceding`` None is ``UNBOUNDED PRECEDING``.
    ``output`` reads the *over relation*: the source's columns, then the
    aggregates (``__agg_<i>``). Late rows (docs/language.md, "OVER
    aggregations") go to ``late_output`` or are dropped and counted.
    """

    name: str
    source: SourceRef
    filter: Expr | None
    keys: tuple[KeyColumn, ...]
    frame: OverFrame
    preceding: int | None
    aggregates: tuple[Aggregate, ...]
    output: tuple[OutputColumn, ...]
    late_output: str | None = None
    engine: EngineChoice | None = None
    span: Span | None = field(default=None, compare=False, repr=False)
    #: where the OVER window is written (the first OVER item's)
    window_span: Span | None = field(default=None, compare=False, repr=False)
    late_output_span: Span | None = field(default=None, compare=False, repr=False)

    #: no ALLOWED LATENESS: lateness is the frame's (docs/language.md)
    allowed_lateness_ms = 0

    def __post_init__(self) -> None:
        if self.preceding is not None and self.preceding < 0:
            _fail("a frame's PRECEDING bound is not negative", self.span, code=ErrorCode.OVER)
        if not self.aggregates:
            _fail("an OVER aggregation computes an aggregate", self.span, code=ErrorCode.OVER)
        out = [c.name.lower() for c in self.output]
        if len(set(out)) != len(out):
            _fail("duplicate output column names", self.span, code=ErrorCode.DUPLICATE_NAME)

    @property
    def inputs(self) -> tuple[SourceRef, ...]:
        return (self.source,)

    @property
    def output_schema(self) -> tuple[Column, ...]:
        return tuple(Column(c.name, c.type, c.span) for c in self.output)

    @property
    def event_time(self) -> EventTime | None:
        return self.source.event_time

    @property
    def late_schema(self) -> tuple[Column, ...] | None:
        """The LATE DATA TO output's columns, as a window aggregate's (:class:`Query`)."""
        if self.late_output is None:
            return None
        cols = [c for c in self.source.columns if c.name.lower() != LATE_EVENT_TIME_COLUMN]
        return (*cols, Column(LATE_EVENT_TIME_COLUMN, T.TIMESTAMP))

    @property
    def frame_text(self) -> str:
        """The frame as written in OVER (...), e.g. ``ROWS BETWEEN 2 PRECEDING AND CURRENT ROW``."""
        if self.preceding is None:
            lower = "UNBOUNDED PRECEDING"
        elif self.frame is OverFrame.RANGE:
            lower = f"INTERVAL '{self.preceding}' MILLISECOND PRECEDING"
        else:
            lower = f"{self.preceding} PRECEDING"
        return f"{self.frame.value} BETWEEN {lower} AND CURRENT ROW"


#: A stage of a program: what a query of any kind compiles to.
Stage = Query | WindowRank | WindowJoin | OverAggregate
#: A stage one operator runs (per key partition, over one input).
OperatorStage = Query | WindowRank | OverAggregate


# ---------------------------------------------------------------------------
# How an operator stage runs on a stream (compiler/stream_plan.py builds it)

#: What a link field reads of an upstream row: ``("key", i)`` (the ``i``-th key),
#: ``("field", index)`` (an emitted field: a window bound, pane index or timing, an
#: aggregate), ``("first",)`` (pane_index = 0) or ``("last",)`` (the extended is_last).
FieldSource = tuple


@dataclass(frozen=True)
class LinkField:
    """One input of a reader, read off the view's emitted row.

    ``source`` (see :data:`FieldSource`); ``as_``: ``"value"`` (the value, in
    ``type``), ``"timestamp"`` (a window bound in ms, as a TIMESTAMP) or
    ``"millis"`` (a window bound in ms, as BIGINT: ``UNIX_MILLIS``).
    """

    source: FieldSource
    as_: str
    type: WqlType


@dataclass(frozen=True)
class Link:
    """How a view's emitted rows become its reader's input rows (key, event time, values)."""

    keys: tuple[LinkField, ...]
    values: tuple[LinkField, ...]
    #: the reader's event time: the emitted field of a window bound (ms), or None
    event_time: int | None
    #: the link needs Spark SQL (the view's HAVING or a computed column the reader
    #: reads, the reader's WHERE, keys or inputs over view columns): the chain is cut
    #: here into two Spark stateful operators with Spark's projection between them
    #: (docs/streaming.md, "Links in Spark SQL"). ``keys`` then holds, per reader key,
    #: the view key it copies as its value (a ``("key", i)`` field) or a ``("sql",)``
    #: field that Spark computes, and ``values`` is empty: Spark stages them
    sql: bool = False


@dataclass(frozen=True)
class StreamChain:
    """A query (or window rank) on a stream, with its pipeline in one processor.

    ``upstream``: the views it reads, upstream first (empty: it reads the
    source); ``links[i]`` carries ``upstream[i]``'s rows to the next stage
    (the last one to the query itself).
    """

    upstream: tuple[OperatorStage, ...] = ()
    links: tuple[Link, ...] = ()
    #: the operator plans of ``upstream`` and of the query, built once at planning
    #: (none for a query over its source: its host builds its one plan)
    ops: tuple[OperatorPlan, ...] = field(default=(), compare=False, repr=False)
    #: the first stage's key positions the chain runs partitioned by: one Spark group
    #: per value of them, every later stage keeping copies of them among its keys
    #: (docs/streaming.md, "Partitioned pipelines"); empty: ONE group for all keys
    partition: tuple[int, ...] = ()
    #: those keys as the first stage groups by them (what ``wql explain`` names)
    partition_text: tuple[str, ...] = ()
    #: why the chain runs in one group (a pipeline that is not partitioned)
    serial: str = ""


@dataclass(frozen=True)
class JoinInput:
    """How one side of a window join reaches the join in the stream processor.

    A view side runs its pipeline ``chain`` (upstream first; ``links`` between
    its stages) and each of its side columns the join reads is a
    :class:`LinkField` of the view's emitted rows (``fields``; None: not read).
    A window table side over the source (empty ``chain``) copies source
    columns (``source_columns``: the source column per side column, None where
    not read or a window column). A window table side (over the source, or
    over a view: then ``event_time`` is the emitted field of the view's window
    bound it is windowed by) gets its windows' columns filled in
    (``window_columns``: the positions of window_start, window_end,
    window_time); a view's own rows come with their window.
    """

    chain: tuple[OperatorStage, ...]
    links: tuple[Link, ...]
    fields: tuple[LinkField | None, ...]
    source_columns: tuple[str | None, ...]
    window_columns: tuple[int | None, int | None, int | None]
    event_time: int | None = None
    #: the operator plans of ``chain``, built once at planning
    ops: tuple[OperatorPlan, ...] = field(default=(), compare=False, repr=False)


@dataclass(frozen=True)
class StreamJoin:
    """A window join as the stream processor runs it.

    ``sides``: how each side reaches the join; ``equi``: ``(left position,
    right position)`` per equality of ON between a column of each side that
    the processor matches on (the window bounds among them); ``residual``:
    ON's other conjuncts (an INNER join only), which Spark applies to the
    joined rows with WHERE and SELECT.
    """

    sides: tuple[JoinInput, JoinInput]
    equi: tuple[tuple[int, int], ...]
    residual: tuple[str, ...]
    #: per side, the staged columns the join runs partitioned by, aligned across the
    #: sides (one ON equality each): ``("c", j)`` a window table's copied source column
    #: ``j``, ``("k", i)`` a view side's first-stage key ``i`` that its pipeline and the
    #: equality carry (docs/streaming.md, "Partitioned window joins"); empty: ONE group
    partition: tuple[tuple[tuple[str, int], ...], tuple[tuple[str, int], ...]] = ((), ())
    #: those equalities as written (what ``wql explain`` names)
    partition_text: tuple[str, ...] = ()
    #: why the join runs in one group (a join that is not partitioned)
    serial: str = ""


#: How an operator stage runs on a stream.
StreamPlan = StreamChain | StreamJoin


def engine_of(q: Stage) -> str:
    """The engine the planner chose for ``q`` (``'operator'`` before it planned it)."""
    return q.engine.engine if q.engine is not None else "operator"


#: The longest pipeline a text names in full (see :func:`chain_text`).
CHAIN_TEXT_LIMIT = 12


def chain_text(stages: tuple[Stage, ...]) -> str:
    """``a -> b -> c``: the names of a pipeline's stages; a pipeline longer than
    :data:`CHAIN_TEXT_LIMIT` shows its first and last four around how many are left
    out, so that the texts of its N queries (one each in ``wql explain``) stay linear
    in N."""
    if len(stages) <= CHAIN_TEXT_LIMIT:
        return " -> ".join(s.name for s in stages)
    head = " -> ".join(s.name for s in stages[:4])
    tail = " -> ".join(s.name for s in stages[-4:])
    return f"{head} -> ({len(stages) - 8} more) -> {tail}"


def inputs_of(q: Stage) -> tuple[SourceRef, ...]:
    """What a stage reads: its source or view, or both sides' (a join)."""
    return q.inputs


@dataclass(frozen=True)
class Program:
    """A compiled ``.wql`` file: its sources and its queries in file order.

    ``views`` are the queries of other files (given together, e.g. to
    ``wql run``) that this file's queries read, with the views those read,
    upstream first; they are planned and run by their own file.
    """

    sources: tuple[SourceDecl, ...]
    queries: tuple[Stage, ...]
    span: Span | None = field(default=None, compare=False, repr=False)
    views: tuple[Stage, ...] = ()

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

    # Lookups by name and the pipelines are computed once per program: a file of N
    # chained views asks for every query's pipeline, which scanning the queries per
    # name made cubic in N (docs/benchmarks.md, "Long pipelines").
    @functools.cached_property
    def _by_name(self) -> dict[str, Stage]:
        """Every stage by lower-cased name, this file's first (as :meth:`view` finds them)."""
        index: dict[str, Stage] = {}
        for q in (*self.queries, *self.views):
            index.setdefault(q.name.lower(), q)
        return index

    @functools.cached_property
    def _own(self) -> frozenset[str]:
        """The lower-cased names of this file's queries."""
        return frozenset(q.name.lower() for q in self.queries)

    @functools.cached_property
    def _pipelines(self) -> dict[str, tuple[Stage, ...]]:
        """The pipelines of the stages computed so far, by lower-cased name."""
        return {}

    @functools.cached_property
    def _roots(self) -> dict[str, tuple[SourceRef, ...]]:
        """The root sources of the views computed so far, by lower-cased name."""
        return {}

    @functools.cached_property
    def _readers(self) -> dict[str, tuple[Stage, ...]]:
        """This file's queries by the name of the view they read."""
        readers: dict[str, list[Stage]] = {}
        for r in self.queries:
            for name in dict.fromkeys(s.view for s in inputs_of(r) if s.view is not None):
                readers.setdefault(name, []).append(r)
        return {name: tuple(rs) for name, rs in readers.items()}

    def source(self, name: str) -> SourceDecl | None:
        low = name.lower()
        return next((s for s in self.sources if s.name.lower() == low), None)

    def query(self, name: str) -> Stage:
        q = self._by_name.get(name.lower())
        # another file's view is not a query of this file
        if q is None or q.name.lower() not in self._own:
            raise KeyError(name)
        return q

    def view(self, name: str) -> Stage:
        """The query called ``name``: this file's, else one of another file it reads."""
        try:
            return self._by_name[name.lower()]
        except KeyError:
            raise KeyError(name) from None

    def upstreams(self, q: Stage) -> tuple[Stage, ...]:
        """The views ``q`` reads (none when it reads sources only)."""
        return tuple(self.view(s.view) for s in inputs_of(q) if s.view is not None)

    def upstream(self, q: Stage) -> Stage | None:
        """The view a single-input ``q`` reads (None when it reads a source)."""
        ups = self.upstreams(q)
        return ups[0] if ups else None

    def pipeline(self, q: Stage) -> tuple[Stage, ...]:
        """Every query ``q`` depends on, upstream first, ``q`` last (a chain, or the DAG
        of a join's inputs): the stages a depth-first walk from ``q`` to its sources
        meets, each once, where it is first complete."""
        ups = [s.view for s in inputs_of(q) if s.view is not None]
        return _joined([self._upward(v, self._pipelines, _joined) for v in ups], q)

    def _upward(
        self, name: str, memo: dict[str, _T], combine: Callable[[list[_T], Stage], _T]
    ) -> _T:
        """``combine(<the same of each view it reads>, view)`` for the view called
        ``name``, memoised in ``memo``, without recursion (a chain may be longer than
        Python's recursion limit)."""
        todo = [name.lower()]
        while todo:
            low = todo[-1]
            if low in memo:
                todo.pop()
                continue
            stage = self.view(low)
            ups = [s.view.lower() for s in inputs_of(stage) if s.view is not None]
            missing = [u for u in ups if u not in memo]
            if missing:
                if any(u in todo for u in missing):
                    raise ValueError(f"views read each other in a cycle through {stage.name}")
                todo.extend(missing)
                continue
            memo[low] = combine([memo[u] for u in ups], stage)
            todo.pop()
        return memo[name.lower()]

    def readers(self, q: Stage) -> tuple[Stage, ...]:
        """This file's queries that read ``q``."""
        return self._readers.get(q.name, ())

    def root_sources(self, q: Stage) -> tuple[SourceRef, ...]:
        """The sources ``q``'s pipeline starts from (one for a chain), in reading order."""
        ups = [s.view for s in inputs_of(q) if s.view is not None]
        return _roots([self._upward(v, self._roots, _roots) for v in ups], q)

    def side_root(self, ref: SourceRef) -> SourceRef:
        """The source at the start of the input ``ref`` (itself, or its view's root)."""
        return ref if ref.view is None else self.root_source(self.view(ref.view))

    def root_source(self, q: Stage) -> SourceRef:
        """The source ``q``'s pipeline starts from (the binder allows one per pipeline)."""
        return self.root_sources(q)[0]


def _joined(pipelines: list[tuple[Stage, ...]], last: Stage) -> tuple[Stage, ...]:
    """The upstream ``pipelines`` in order, each stage once (by name, where it first
    appears), then ``last``."""
    if len(pipelines) == 1:
        # a chain: the one upstream pipeline holds each stage once, and not ``last``
        # (a view cannot read itself, the binder refuses it)
        return (*pipelines[0], last)
    out: dict[str, Stage] = {}
    for stages in pipelines:
        for s in stages:
            out.setdefault(s.name, s)
    out.setdefault(last.name, last)
    return tuple(out.values())


def _roots(upstream: list[tuple[SourceRef, ...]], stage: Stage) -> tuple[SourceRef, ...]:
    """The root sources of ``stage``, given those of the views it reads in order: theirs,
    then the sources it reads itself, each once (by lower-cased name, where first met)."""
    if len(upstream) == 1 and all(s.view is not None for s in inputs_of(stage)):
        return upstream[0]
    roots: dict[str, SourceRef] = {}
    for sources in upstream:
        for s in sources:
            roots.setdefault(s.name.lower(), s)
    for s in inputs_of(stage):
        if s.view is None:
            roots.setdefault(s.name.lower(), s)
    return tuple(roots.values())
