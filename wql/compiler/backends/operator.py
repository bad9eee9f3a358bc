"""The operator backend: a plan query as the runtime's configuration.

:func:`build_operator` maps every plan construct (window, trigger tree,
evictor, lateness, late output, aggregates) to the ``wql.runtime`` objects
one :class:`~wql.runtime.config.OperatorConfig` is made of, and says which
*scalar expressions* the host must evaluate in Spark before the operator
(docs/architecture.md: the runtime sees only plain values).

The operator reads each row as ``(key, timestamp, values)``:

* ``key`` — the tuple of :attr:`OperatorPlan.keys` (grouping-key
  expressions over the source relation, in GROUP BY order);
* ``values`` — the tuple of :attr:`OperatorPlan.values`, one Spark SQL
  expression per index. The config refers to these indices: aggregate
  arguments, the dynamic session gap (BIGINT ms), DELTA trigger/evictor
  expressions (DOUBLE) and, with ``LATE DATA TO``, every source column
  (the late output carries them back). Equal expressions share an index.

The host also needs the query's clocks: :attr:`OperatorPlan.domains` is the
set of time domains the windows and triggers use; a query using both needs
the global clock sequence on every partition (docs/architecture.md).

>>> from wql.compiler import compile_source
>>> q = compile_source('''
... CREATE SOURCE s (k STRING, v DOUBLE, ts TIMESTAMP,
...     WATERMARK FOR ts AS ts - INTERVAL '1' SECOND);
... SELECT k, SUM(v) AS total FROM s GROUP BY k, SESSION(ts, INTERVAL '3' SECOND)
... TRIGGER PURGING COUNT(4)''', engine="operator").queries[0]
>>> op = build_operator(q)
>>> op.config.assigner, op.config.trigger
(SessionWindows(gap=3000, event_time=True), PurgingTrigger(nested=CountTrigger(count=4)))
>>> [v.sql for v in op.values], [k.name for k in op.keys]
(['v'], ['k'])
"""

from __future__ import annotations

import dataclasses
import functools
from dataclasses import dataclass
from typing import Any

from wql.compiler import plan as P
from wql.compiler import types as T
from wql.compiler.backends.escaping import sql_identifier
from wql.compiler.types import WqlType
from wql.errors import ErrorCode, Span, WqlError, WqlUnsupportedError
from wql.runtime import assigners as A
from wql.runtime import evictors as E
from wql.runtime import triggers as TR
from wql.runtime.aggregates import AggregateSpec
from wql.runtime.config import OperatorConfig
from wql.runtime.over import OverConfig
from wql.runtime.rank import RankConfig

__all__ = [
    "OperatorPlan",
    "ValueColumn",
    "build_operator",
    "build_over",
    "build_rank",
    "build_stage",
    "tagging_firings",
    "window_assigner",
]


@dataclass(frozen=True)
class ValueColumn:
    """One entry of the operator's ``values`` tuple: Spark SQL over the source relation.

    ``column``: the input column it is as it is, or (``millis``) ``UNIX_MILLIS``
    of, from the binder's column references (None: anything else); what a
    stream pipeline's link copies (compiler/stream_plan.py).
    """

    sql: str
    type: WqlType
    column: str | None = None
    millis: bool = False


@dataclass(frozen=True)
class OperatorPlan:
    """What the Spark host needs to run one query on the operator engine.

    Attributes:
        query: the plan query.
        config: the runtime configuration.
        keys: the grouping keys (``KeyColumn.expr`` over the source relation).
        values: the operator's input values, by index.
        late_columns: ``(source column, values index)`` for the late output,
            in source-column order (empty without ``LATE DATA TO``).
        domains: time domains used by the window and the trigger tree.
    """

    query: P.OperatorStage
    config: OperatorConfig | RankConfig | OverConfig
    keys: tuple[P.KeyColumn, ...]
    values: tuple[ValueColumn, ...]
    late_columns: tuple[tuple[str, int], ...]
    domains: frozenset[P.TimeDomain]
    #: the types of the results an emitted row carries after ``EMITTED_FIELDS``:
    #: a query's aggregates; a window rank's rank, then every value
    results: tuple[WqlType, ...] = ()
    #: a window rank or OVER aggregation: ``(input column, values index)`` of the row it
    #: passes through
    payload: tuple[tuple[str, int], ...] = ()

    @property
    def uses_event_time(self) -> bool:
        return P.TimeDomain.EVENT in self.domains

    @property
    def uses_processing_time(self) -> bool:
        return P.TimeDomain.PROCESSING in self.domains

    @property
    def mixes_time_domains(self) -> bool:
        return len(self.domains) > 1

    @property
    def trigger_span(self) -> Span | None:
        """Where the query's trigger is written, else the query (a window rank has none)."""
        trigger = getattr(self.query, "trigger", None)
        return trigger.span if trigger is not None else self.query.span


class _Values:
    """Interns value expressions so that equal SQL shares one index."""

    def __init__(self) -> None:
        self.items: list[ValueColumn] = []
        self._index: dict[str, int] = {}

    def add(
        self, sql: str, type_: WqlType, column: str | None = None, *, millis: bool = False
    ) -> int:
        if sql not in self._index:
            self._index[sql] = len(self.items)
            self.items.append(ValueColumn(sql, type_, column, millis))
        elif column is not None and self.items[self._index[sql]].column is None:
            first = self.items[self._index[sql]]
            self.items[self._index[sql]] = ValueColumn(sql, first.type, column, millis)
        return self._index[sql]

    def add_expr(self, e: P.Expr) -> int:
        """A bound expression, knowing the column it is (or is ``UNIX_MILLIS`` of)."""
        millis = e.millis_ref
        return self.add(e.sql, e.type, e.column_ref or millis, millis=millis is not None)

    def add_column(self, name: str, type_: WqlType) -> int:
        """A plain source column, shared with an expression that is just that column."""
        for spelling in (name, sql_identifier(name)):
            if spelling in self._index:
                self.add(spelling, type_, name)  # knows its column from now on
                return self._index[spelling]
        return self.add(sql_identifier(name), type_, name)


def build_operator(query: P.Query, *, tag_firings: bool = False) -> OperatorPlan:
    """The runtime configuration and host inputs of ``query``.

    ``tag_firings``: ``query`` is a stage other queries read (a view): its
    emitted rows say what fired them (``OperatorConfig.tag_firings``).
    Raises :class:`WqlUnsupportedError` (pointing at the clause) for a
    construct the runtime does not offer.
    """
    values = _Values()
    assigner = _assigner(query.window, values)
    scope = _Scope(values, query.window, query.allowed_lateness_ms)
    trigger = _trigger(query.effective_trigger, scope) if query.effective_trigger else None
    if query.accumulation is not None and trigger is not None:
        trigger = _accumulating(trigger, query.accumulation, query.window)
    evictor_node = query.effective_evictor or query.evictor
    evictor = _evictor(evictor_node, values) if evictor_node is not None else None
    aggregates = tuple(_aggregate(a, values) for a in query.aggregates)
    late_columns: tuple[tuple[str, int], ...] = ()
    if query.late_output is not None:
        late_columns = tuple(
            (c.name, values.add_column(c.name, c.type)) for c in query.source.columns
        )
    try:
        config = OperatorConfig(
            assigner=assigner,
            aggregates=aggregates,
            trigger=trigger,
            evictor=evictor,
            allowed_lateness=query.allowed_lateness_ms,
            late_output=query.late_output is not None,
            late_columns=tuple(i for _, i in late_columns) if late_columns else None,
            tag_firings=tag_firings,
            mark_last=query.marks_last,
            changelog=query.changelog is not None,
        )
    except WqlError as e:
        # the runtime's own checks (e.g. a trigger it cannot merge) know no source position
        if e.span is None:
            e.span = query.trigger.span if query.trigger is not None else query.span
        raise
    domains = set(P.trigger_domains(query.effective_trigger)) if query.effective_trigger else set()
    if query.window.domain is not None:
        # a time window's cleanup timer runs on its own clock whatever the trigger
        domains.add(query.window.domain)
    return OperatorPlan(
        query=query,
        config=config,
        keys=query.keys,
        values=tuple(values.items),
        late_columns=late_columns,
        domains=frozenset(domains),
        results=tuple(a.type for a in query.aggregates),
    )


def build_rank(stage: P.WindowRank, *, tag_firings: bool = False) -> OperatorPlan:
    """The runtime configuration and host inputs of a window Top-N or deduplication.

    The operator gets the input row (its columns before the windows: a view's,
    or a window table's table's) as values, the ORDER BY expressions, and the
    window: a view's bounds as BIGINT ms, or the window table's assigner; it
    emits each kept row's rank and values (``payload`` names them).
    """
    values = _Values()
    payload = tuple((c.name, values.add_column(c.name, c.type)) for c in stage.source.columns)
    order = tuple((values.add_expr(o.expr), o.descending) for o in stage.order)
    bounds = None
    assigner = None
    if stage.window is None:
        start, end = stage.window_bounds
        bounds = (
            values.add(f"UNIX_MILLIS({sql_identifier(start)})", T.BIGINT, start, millis=True),
            values.add(f"UNIX_MILLIS({sql_identifier(end)})", T.BIGINT, end, millis=True),
        )
    else:
        assigner = _assigner(stage.window, values)
    config = RankConfig(
        stage.limit,
        order,
        stage.keep.value,
        bounds=bounds,
        assigner=assigner,
        tag_firings=tag_firings,
    )
    return OperatorPlan(
        query=stage,
        config=config,
        keys=stage.keys,
        values=tuple(values.items),
        late_columns=(),
        domains=frozenset({P.TimeDomain.EVENT}),
        results=(T.BIGINT, *(v.type for v in values.items)),
        payload=payload,
    )


def build_over(stage: P.OverAggregate, *, tag_firings: bool = False) -> OperatorPlan:
    """The runtime configuration and host inputs of an OVER aggregation.

    The operator gets the source row as values (every column: SELECT reads
    them after it) and the aggregates' arguments; it emits each row with its
    aggregates, then its values (``payload`` names them).
    """
    values = _Values()
    payload = tuple((c.name, values.add_column(c.name, c.type)) for c in stage.source.columns)
    aggregates = tuple(_aggregate(a, values) for a in stage.aggregates)
    late_columns = payload if stage.late_output is not None else ()
    config = OverConfig(
        stage.frame.value,
        stage.preceding,
        aggregates,
        late_output=stage.late_output is not None,
        late_columns=tuple(i for _, i in late_columns) if late_columns else None,
        tag_firings=tag_firings,
    )
    return OperatorPlan(
        query=stage,
        config=config,
        keys=stage.keys,
        values=tuple(values.items),
        late_columns=late_columns,
        domains=frozenset({P.TimeDomain.EVENT}),
        results=(*(a.type for a in stage.aggregates), *(v.type for v in values.items)),
        payload=payload,
    )


def post_aggregation_relation(
    query: P.Query, op: OperatorPlan
) -> tuple[tuple[str, P.FieldSource, WqlType], ...]:
    """A window aggregate's post-aggregation relation (what SELECT and HAVING read), in
    order: ``(column, what it reads of an emitted row, its type)``, the read as in
    :data:`wql.compiler.plan.FieldSource`. The one home of that relation: the batch
    host's projection (``wql.spark.layout``) and the stream plan's links read it."""
    from wql.runtime.config import (
        EMIT_PANE_INDEX,
        EMIT_PANE_TIMING,
        EMIT_RESULTS,
        EMIT_WINDOW_END,
        EMIT_WINDOW_START,
        EMIT_WINDOW_TIME,
    )

    rel: list[tuple[str, P.FieldSource, WqlType]] = [
        (k.name, ("key", i), k.type) for i, k in enumerate(op.keys)
    ]
    rel += [
        ("window_start", ("field", EMIT_WINDOW_START), T.TIMESTAMP),
        ("window_end", ("field", EMIT_WINDOW_END), T.TIMESTAMP),
        ("window_time", ("field", EMIT_WINDOW_TIME), T.TIMESTAMP),
        ("pane_index", ("field", EMIT_PANE_INDEX), T.BIGINT),
        ("pane_timing", ("field", EMIT_PANE_TIMING), T.STRING),
    ]
    if query.reads("is_first"):
        rel.append(("is_first", ("first",), T.BOOLEAN))
    if query.reads("is_last"):
        # the runtime marks it for such a query (OperatorConfig.mark_last)
        rel.append(("is_last", ("last",), T.BOOLEAN))
    rel += [
        (a.name, ("field", EMIT_RESULTS + i), t)
        for i, (a, t) in enumerate(zip(query.aggregates, op.results, strict=True))
    ]
    return tuple(rel)


def build_stage(stage: P.OperatorStage, *, tag_firings: bool = False) -> OperatorPlan:
    """:func:`build_operator` or :func:`build_rank`, by the stage's kind."""
    build: Any = _BUILDERS[type(stage)]
    plan: OperatorPlan = build(stage, tag_firings=tag_firings)
    return plan


def tagging_firings(plan: OperatorPlan) -> OperatorPlan:
    """``plan`` as ``build_stage(plan.query, tag_firings=True)`` builds it: the plan of a
    stage other queries read, made from one already built (the stream planner builds
    each stage's plan once; the pipeline processor needs its views' tagged)."""
    if plan.config.tag_firings:
        return plan
    try:
        config = dataclasses.replace(plan.config, tag_firings=True)
    except WqlError as e:
        # the runtime's own checks know no source position (as in build_operator)
        if e.span is None:
            e.span = plan.trigger_span
        raise
    return dataclasses.replace(plan, config=config)


#: The operator plan of each kind of operator stage.
_BUILDERS = {P.Query: build_operator, P.WindowRank: build_rank, P.OverAggregate: build_over}


# --------------------------------------------------------------------------- windows
#
# One handler per plan class (functools.singledispatch): the tables
# _assigner, _trigger and _evictor; tests/compiler/test_dispatch.py fails
# when a window, trigger or evictor class of the plan has no handler.


def window_assigner(w: P.Window) -> A.WindowAssigner:
    """The runtime assigner of a window that reads no value (TUMBLE, HOP, CUMULATE: a
    window table function's)."""
    return _assigner(w, _Values())


def _event(w: P.Window) -> bool:
    return w.domain is P.TimeDomain.EVENT


@functools.singledispatch
def _assigner(w: P.Window, values: _Values) -> A.WindowAssigner:
    raise WqlUnsupportedError(
        f"window {type(w).__name__} has no runtime assigner", w.span, code=ErrorCode.UNSUPPORTED
    )


@_assigner.register
def _(w: P.Tumble, values: _Values) -> A.WindowAssigner:
    return A.TumblingWindows(w.size_ms, w.offset_ms, event_time=_event(w))


@_assigner.register
def _(w: P.Hop, values: _Values) -> A.WindowAssigner:
    return A.SlidingWindows(w.size_ms, w.slide_ms, w.offset_ms, event_time=_event(w))


@_assigner.register
def _(w: P.Cumulate, values: _Values) -> A.WindowAssigner:
    return A.CumulateWindows(w.step_ms, w.size_ms, w.offset_ms, event_time=_event(w))


@_assigner.register
def _(w: P.Session, values: _Values) -> A.WindowAssigner:
    return A.SessionWindows(w.gap_ms, event_time=_event(w))


@_assigner.register
def _(w: P.DynamicSession, values: _Values) -> A.WindowAssigner:
    gap = values.add(f"CAST(({w.gap_ms.sql}) AS BIGINT)", T.BIGINT)
    return A.DynamicSessionWindows(gap, event_time=_event(w))


@_assigner.register(P.CountWindow)
@_assigner.register(P.GlobalWindow)
def _(w: P.CountWindow | P.GlobalWindow, values: _Values) -> A.WindowAssigner:
    # COUNT_WINDOW's trigger and evictor come from the binder's effective_* fields
    return A.GlobalWindows()


# --------------------------------------------------------------------------- triggers


@dataclass(frozen=True)
class _Scope:
    """What a trigger's runtime form may depend on besides the trigger: the query's
    values (DELTA expressions), window and allowed lateness (EVERY ... ON UPDATE)."""

    values: _Values
    window: P.Window
    lateness: int


@functools.singledispatch
def _trigger(t: P.Trigger, b: _Scope) -> TR.Trigger:
    raise WqlUnsupportedError(
        f"trigger {type(t).__name__} has no runtime equivalent", t.span, code=ErrorCode.UNSUPPORTED
    )


@_trigger.register
def _(t: P.WatermarkTrigger, b: _Scope) -> TR.Trigger:
    return TR.EventTimeTrigger()


@_trigger.register
def _(t: P.ProcessingTimeTrigger, b: _Scope) -> TR.Trigger:
    return TR.ProcessingTimeTrigger()


@_trigger.register
def _(t: P.CountTrigger, b: _Scope) -> TR.Trigger:
    return TR.CountTrigger(t.n)


@_trigger.register
def _(t: P.EveryTrigger, b: _Scope) -> TR.Trigger:
    if t.on_update:
        event = t.domain is P.TimeDomain.EVENT
        # bounded by the window's end (and, after it, its cleanup) on the window's own clock
        bounded = b.window.domain is t.domain
        lateness = b.lateness if event else 0
        return TR.OnUpdateTrigger(
            t.interval_ms, event, bounded, lateness, aligned=not t.after_first_row
        )
    if t.domain is P.TimeDomain.EVENT:
        return TR.ContinuousEventTimeTrigger(t.interval_ms)
    return TR.ContinuousProcessingTimeTrigger(t.interval_ms)


@_trigger.register
def _(t: P.DeltaTrigger, b: _Scope) -> TR.Trigger:
    return TR.DeltaTrigger(_delta_value(t.expr, b.values), float(t.threshold))


@_trigger.register
def _(t: P.TimeoutTrigger, b: _Scope) -> TR.Trigger:
    return TR.ProcessingTimeoutTrigger(_trigger(t.child, b), t.timeout_ms)


@_trigger.register
def _(t: P.PurgingTrigger, b: _Scope) -> TR.Trigger:
    return TR.PurgingTrigger(_trigger(t.child, b))


@_trigger.register
def _(t: P.AnyTrigger, b: _Scope) -> TR.Trigger:
    return TR.AnyTrigger(tuple(_trigger(c, b) for c in t.triggers))


@_trigger.register
def _(t: P.AllTrigger, b: _Scope) -> TR.Trigger:
    return TR.AllTrigger(tuple(_trigger(c, b) for c in t.triggers))


@_trigger.register
def _(t: P.OnceTrigger, b: _Scope) -> TR.Trigger:
    return TR.OnceTrigger(_trigger(t.child, b))


@_trigger.register
def _(t: P.UntilTrigger, b: _Scope) -> TR.Trigger:
    return TR.UntilTrigger(_trigger(t.child, b), _trigger(t.until, b))


@_trigger.register
def _(t: P.SequenceTrigger, b: _Scope) -> TR.Trigger:
    # Beam's end-of-window timer, for an event-time window with an end
    end_timer = b.window.domain is P.TimeDomain.EVENT and P.has_bounds(b.window)
    return TR.SequenceTrigger(tuple(_trigger(c, b) for c in t.triggers), end_timer)


@_trigger.register
def _(t: P.EarlyLateTrigger, b: _Scope) -> TR.Trigger:
    early = _trigger(t.early, b) if t.early is not None else None
    late = _trigger(t.late, b) if t.late is not None else None
    return TR.EarlyLateTrigger(early, late)


def _accumulating(trigger: TR.Trigger, a: P.Accumulation, window: P.Window) -> TR.Trigger:
    """The trigger with EMIT's accumulation mode: purging after the discarding panes."""
    if a.discards_all:
        return TR.PurgingTrigger(trigger)  # every pane discards: exactly PURGING
    if not a.discarding:
        return trigger  # every pane accumulates: what a trigger without PURGING does
    return TR.PanePurgingTrigger(trigger, frozenset(a.discarding), _event(window))


def _delta_value(expr: P.Expr, values: _Values) -> int:
    # DELTA compares |a - b| with a float threshold: hand the runtime doubles
    return values.add(f"CAST(({expr.sql}) AS DOUBLE)", T.DOUBLE)


# --------------------------------------------------------------------------- evictors


@functools.singledispatch
def _evictor(e: P.Evictor, values: _Values) -> E.Evictor:
    raise WqlUnsupportedError(
        f"evictor {type(e).__name__} has no runtime equivalent", e.span, code=ErrorCode.UNSUPPORTED
    )


@_evictor.register
def _(e: P.CountEvictor, values: _Values) -> E.Evictor:
    return E.CountEvictor(e.n, after=e.after)


@_evictor.register
def _(e: P.TimeEvictor, values: _Values) -> E.Evictor:
    return E.TimeEvictor(e.interval_ms, after=e.after)


@_evictor.register
def _(e: P.DeltaEvictor, values: _Values) -> E.Evictor:
    return E.DeltaEvictor(_delta_value(e.expr, values), float(e.threshold), after=e.after)


# --------------------------------------------------------------------------- aggregates


def _aggregate(a: P.Aggregate, values: _Values) -> AggregateSpec:
    if a.arg is None:
        return AggregateSpec(a.kind.value)
    return AggregateSpec(a.kind.value, values.add_expr(a.arg))


#: This backend's dispatch tables by plan node family (tests/compiler/test_dispatch.py).
DISPATCH = {"window": _assigner, "trigger": _trigger, "evictor": _evictor}
