"""Binding TRIGGER and EVICT: one handler per AST trigger and evictor class.

Also the default trigger of each window (docs/language.md, "Triggers") when the query gives none:
event time WATERMARK, processing time PROCESSING TIME, ``COUNT_WINDOW(n)``
PURGING COUNT(n), ``COUNT_WINDOW(n, s)`` COUNT(s) (with EVICT COUNT(n), see
``queries.py``); ``GLOBAL()`` has none and needs a TRIGGER clause.
"""

from __future__ import annotations

import functools
import math
import sys
from collections.abc import Iterable
from dataclasses import dataclass
from decimal import Decimal

from wql.compiler import plan as P
from wql.compiler.binder.context import BindContext, collect, raise_all
from wql.compiler.explain import trigger_text
from wql.compiler.expressions import Relation
from wql.errors import ErrorCode, WqlError
from wql.grammar import ast


def default_trigger(window: P.Window) -> P.Trigger | None:
    """The trigger a window fires with when no TRIGGER is given (docs/language.md, "Triggers")."""
    if isinstance(window, P.CountWindow):
        if window.slide is None:
            return P.PurgingTrigger(P.CountTrigger(window.size, window.span), window.span)
        return P.CountTrigger(window.slide, window.span)
    if isinstance(window, P.GlobalWindow):
        return None
    if window.domain is P.TimeDomain.EVENT:
        return P.WatermarkTrigger(window.span)
    return P.ProcessingTimeTrigger(window.span)


@dataclass(frozen=True)
class _Clause:
    """What a trigger or evictor handler reads: the query's window (None when it has
    an error, reported), source and relation."""

    ctx: BindContext
    window: P.Window | None
    source: P.SourceRef
    relation: Relation
    tables: tuple[str, ...]


# --------------------------------------------------------------------------- triggers


def bind_trigger_clause(
    ctx: BindContext,
    clause: ast.TriggerClause,
    window: P.Window | None,
    source: P.SourceRef,
    relation: Relation,
    tables: Iterable[str],
) -> P.Trigger:
    t = _trigger(clause.trigger, _Clause(ctx, window, source, relation, tuple(tables)))
    _check_finishing(ctx, t)
    if window is not None and window.merging and not t.mergeable:
        culprit = P.first_non_mergeable(t)
        culprit_span = culprit.span if culprit is not None else clause.span
        if isinstance(culprit, P.SequenceTrigger):
            raise ctx.error(
                "SEQUENCE cannot be used with SESSION windows: on merging windows Beam runs "
                "every child of AfterEach.inOrder at once and revives finished children when "
                "sessions merge, which WQL does not do",
                culprit_span,
                hint="ONCE and UNTIL merge (a closed session merges no more); or use a "
                "TUMBLE or HOP window",
                code=ErrorCode.NOT_MERGEABLE,
            )
        raise ctx.error(
            f"the {trigger_text(culprit or t).keyword} trigger cannot merge, so it cannot be "
            "used with SESSION windows (sessions merge when rows bridge them)",
            culprit_span,
            hint="use a mergeable trigger: WATERMARK, PROCESSING TIME, COUNT, EVERY, "
            "or PURGING/ANY/ALL of those (TIMEOUT cannot merge, as in Flink)",
            code=ErrorCode.NOT_MERGEABLE,
        )
    return t


#: Triggers that fire again and again whatever their children do: a child that
#: finishes has no meaning inside them (Beam's Repeatedly resets a finished child).
_REPEATING = (P.AnyTrigger, P.AllTrigger, P.TimeoutTrigger, P.EarlyLateTrigger)
#: The triggers that finish by themselves (PURGING finishes when its child does).
_FINISHING = (P.OnceTrigger, P.UntilTrigger, P.SequenceTrigger)


def _check_finishing(ctx: BindContext, t: P.Trigger) -> None:
    """A trigger that finishes (ONCE, UNTIL, SEQUENCE) only where finishing means something:
    the root, PURGING, ONCE, UNTIL and SEQUENCE; never inside a repeating composite."""
    for node in P.walk_trigger(t):
        if not isinstance(node, _REPEATING):
            continue
        for child in node.children:
            finishing = next((n for n in P.walk_trigger(child) if isinstance(n, _FINISHING)), None)
            if finishing is not None:
                outer = trigger_text(node).keyword
                raise ctx.error(
                    f"{trigger_text(finishing).keyword} finishes for good, but {outer} fires "
                    "again and again: a finished trigger means nothing inside it",
                    finishing.span,
                    hint=f"put {trigger_text(finishing).keyword} around the whole trigger "
                    "instead, or drop it",
                    code=ErrorCode.FINISHING_TRIGGER,
                )


@functools.singledispatch
def _trigger(t: ast.Trigger, c: _Clause) -> P.Trigger:
    raise AssertionError(f"unknown trigger node {t!r}")


@_trigger.register
def _(t: ast.WatermarkTrigger, c: _Clause) -> P.Trigger:
    c.ctx.need_event_time(c.source, "TRIGGER WATERMARK", t.span)
    return P.WatermarkTrigger(t.span)


@_trigger.register
def _(t: ast.ProcessingTimeTrigger, c: _Clause) -> P.Trigger:
    return P.ProcessingTimeTrigger(t.span)


@_trigger.register
def _(t: ast.CountTrigger, c: _Clause) -> P.Trigger:
    if t.count.value <= 0:
        raise c.ctx.error(
            f"COUNT trigger needs n > 0, got {t.count.value}",
            t.count.span,
            code=ErrorCode.OUT_OF_RANGE,
        )
    return P.CountTrigger(t.count.value, t.span)


@_trigger.register
def _(t: ast.EveryTrigger, c: _Clause) -> P.Trigger:
    interval = c.ctx.positive(t.interval, "EVERY interval")
    domain = _clock(t, c, "EVERY")
    return P.EveryTrigger(interval, domain, t.on_update, span=t.span)


@_trigger.register
def _(t: ast.AfterTrigger, c: _Clause) -> P.Trigger:
    interval = c.ctx.positive(t.interval, "AFTER interval")
    domain = _clock(t, c, "AFTER")
    return P.EveryTrigger(interval, domain, on_update=True, after_first_row=True, span=t.span)


def _clock(t: ast.EveryTrigger | ast.AfterTrigger, c: _Clause, what: str) -> P.TimeDomain:
    """The clock of a timer trigger: the one it names, else its window's."""
    if t.domain is not None:
        domain = P.TimeDomain(t.domain.value)
    elif c.window is None:  # the window's own error is reported; any domain will do
        domain = P.TimeDomain.EVENT if c.source.event_time else P.TimeDomain.PROCESSING
    elif c.window.domain is not None:
        domain = c.window.domain
    else:
        raise c.ctx.error(
            f"{what} on a {c.window.kind} window needs OF EVENT TIME or OF PROCESSING TIME "
            "(the window has no clock of its own)",
            t.span,
            code=ErrorCode.NOT_FOR_WINDOW,
        )
    if domain is P.TimeDomain.EVENT:
        c.ctx.need_event_time(c.source, f"{what} ... OF EVENT TIME", t.span)
    return domain


@_trigger.register
def _(t: ast.DeltaTrigger, c: _Clause) -> P.Trigger:
    expr = c.ctx.numeric(t.expr, c.relation, c.tables, "DELTA trigger")
    threshold = _threshold(c.ctx, t.threshold)
    return P.DeltaTrigger(expr, threshold, t.span)


@_trigger.register
def _(t: ast.TimeoutTrigger, c: _Clause) -> P.Trigger:
    child = _trigger(t.trigger, c)
    timeout = c.ctx.positive(t.timeout, "TIMEOUT interval")
    return P.TimeoutTrigger(child, timeout, t.span)


@_trigger.register
def _(t: ast.PurgingTrigger, c: _Clause) -> P.Trigger:
    return P.PurgingTrigger(_trigger(t.trigger, c), t.span)


def _children(
    t: ast.AnyTrigger | ast.AllTrigger | ast.SequenceTrigger, c: _Clause
) -> tuple[P.Trigger, ...]:
    """Every child bound, or every mistake of every child raised."""
    errors: list[WqlError] = []
    children = [collect(errors, _trigger, child, c) for child in t.triggers]
    raise_all(errors)
    return tuple(child for child in children if child is not None)


@_trigger.register
def _(t: ast.AnyTrigger, c: _Clause) -> P.Trigger:
    return P.AnyTrigger(_children(t, c), t.span)


@_trigger.register
def _(t: ast.AllTrigger, c: _Clause) -> P.Trigger:
    return P.AllTrigger(_children(t, c), t.span)


@_trigger.register
def _(t: ast.OnceTrigger, c: _Clause) -> P.Trigger:
    return P.OnceTrigger(_trigger(t.trigger, c), t.span)


@_trigger.register
def _(t: ast.UntilTrigger, c: _Clause) -> P.Trigger:
    errors: list[WqlError] = []
    child = collect(errors, _trigger, t.trigger, c)
    until = collect(errors, _trigger, t.until, c)
    raise_all(errors)
    assert child is not None and until is not None
    return P.UntilTrigger(child, until, t.span)


@_trigger.register
def _(t: ast.SequenceTrigger, c: _Clause) -> P.Trigger:
    if len(t.triggers) < 2:
        raise c.ctx.error(
            "SEQUENCE needs at least two triggers (Beam's AfterEach.inOrder needs more than one)",
            t.span,
            hint="a sequence of one trigger is that trigger: write it alone, or ONCE <trigger> "
            "for a single firing",
            code=ErrorCode.FINISHING_TRIGGER,
        )
    children = _children(t, c)
    for child in children[:-1]:
        if not child.finishes:
            raise c.ctx.error(
                f"this {trigger_text(child).keyword} never finishes, so the triggers after it "
                "in the SEQUENCE would never run",
                child.span,
                hint="every SEQUENCE child but the last must finish: ONCE <trigger>, "
                "UNTIL(<trigger>, <trigger>) or a SEQUENCE",
                code=ErrorCode.FINISHING_TRIGGER,
            )
    return P.SequenceTrigger(children, t.span)


@_trigger.register
def _(t: ast.EarlyLateTrigger, c: _Clause) -> P.Trigger:
    c.ctx.need_event_time(c.source, "WATERMARK WITH EARLY/LATE", t.span)
    if c.window is not None and not P.has_bounds(c.window):
        raise c.ctx.error(
            f"WATERMARK WITH EARLY/LATE needs a time window; a {c.window.kind} window has "
            "no end for the watermark to pass",
            t.span,
            code=ErrorCode.NOT_FOR_WINDOW,
        )
    early = _trigger(t.early, c) if t.early is not None else None
    late = _trigger(t.late, c) if t.late is not None else None
    return P.EarlyLateTrigger(early, late, t.span)


def _threshold(ctx: BindContext, n: ast.Number) -> float:
    if n.value < Decimal(0):
        raise ctx.error(
            f"a DELTA threshold must be >= 0, got {n.value}", n.span, code=ErrorCode.OUT_OF_RANGE
        )
    # The threshold is compared as a double (Flink's DeltaTrigger): a
    # literal beyond the double range would silently become infinity.
    threshold = float(n.value)
    if not math.isfinite(threshold):
        shown = str(n.value) if len(str(n.value)) <= 24 else f"{n.value:.6E}"
        raise ctx.error(
            f"DELTA threshold {shown} is out of range (max {sys.float_info.max!r}: a double)",
            n.span,
            code=ErrorCode.OUT_OF_RANGE,
        )
    return threshold


# --------------------------------------------------------------------------- evictors


def bind_evictor_clause(
    ctx: BindContext,
    clause: ast.EvictClause,
    window: P.Window | None,
    source: P.SourceRef,
    relation: Relation,
    tables: Iterable[str],
) -> P.Evictor:
    if isinstance(window, P.CountWindow) and window.slide is not None:
        raise ctx.error(
            "COUNT_WINDOW(size, slide) already evicts (it keeps the last size rows); "
            "EVICT cannot be combined with it",
            clause.span,
            hint="use GLOBAL() with TRIGGER COUNT(slide) and your own EVICT",
            code=ErrorCode.NOT_FOR_WINDOW,
        )
    after = clause.position is ast.EvictPosition.AFTER
    return _evictor(clause.evictor, _Clause(ctx, window, source, relation, tuple(tables)), after)


@functools.singledispatch
def _evictor(e: ast.Evictor, c: _Clause, after: bool) -> P.Evictor:
    raise AssertionError(f"unknown evictor node {e!r}")


@_evictor.register
def _(e: ast.CountEvictor, c: _Clause, after: bool) -> P.Evictor:
    if e.count.value <= 0:
        raise c.ctx.error(
            f"EVICT COUNT needs n > 0, got {e.count.value}",
            e.count.span,
            code=ErrorCode.OUT_OF_RANGE,
        )
    return P.CountEvictor(e.count.value, after, e.span)


@_evictor.register
def _(e: ast.TimeEvictor, c: _Clause, after: bool) -> P.Evictor:
    ms = c.ctx.positive(e.interval, "EVICT TIME interval")
    c.ctx.need_event_time(c.source, "EVICT TIME", e.span)
    return P.TimeEvictor(ms, after, e.span)


@_evictor.register
def _(e: ast.DeltaEvictor, c: _Clause, after: bool) -> P.Evictor:
    expr = c.ctx.numeric(e.expr, c.relation, c.tables, "DELTA evictor")
    return P.DeltaEvictor(expr, _threshold(c.ctx, e.threshold), after, e.span)


#: The binder's tables by AST node family (tests/compiler/test_dispatch.py).
DISPATCH = {"trigger": _trigger, "evictor": _evictor}
