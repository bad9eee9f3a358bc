"""Binding ALLOWED LATENESS and LATE DATA TO: both only mean something for event-time windows."""

from __future__ import annotations

from wql.compiler import plan as P
from wql.compiler.binder.context import BindContext
from wql.errors import ErrorCode
from wql.grammar import ast


def bind_lateness(ctx: BindContext, clause: ast.AllowedLateness, window: P.Window | None) -> int:
    ms = clause.interval.millis
    if ms < 0:
        raise ctx.error(
            "ALLOWED LATENESS must be >= 0", clause.interval.span, code=ErrorCode.OUT_OF_RANGE
        )
    if window is not None and window.domain is not P.TimeDomain.EVENT and ms > 0:
        what = "processing-time" if window.domain is P.TimeDomain.PROCESSING else window.kind
        raise ctx.error(
            f"ALLOWED LATENESS only applies to event-time windows; rows are never late for "
            f"a {what} window",
            clause.span,
            code=ErrorCode.NOT_FOR_WINDOW,
        )
    return ms


def bind_late_data(
    ctx: BindContext, clause: ast.LateDataTo, window: P.Window | None, source: P.SourceRef
) -> str:
    if window is not None and window.domain is not P.TimeDomain.EVENT:
        what = (
            "processing-time windows"
            if window.domain is P.TimeDomain.PROCESSING
            else f"{window.kind} windows"
        )
        raise ctx.error(
            f"LATE DATA TO needs an event-time window: rows are never late for {what}",
            clause.span,
            code=ErrorCode.NOT_FOR_WINDOW,
        )
    clash = source.column(P.LATE_EVENT_TIME_COLUMN)
    if clash is not None and (
        source.event_time is None or clash.name.lower() != source.event_time.column.lower()
    ):
        raise ctx.error(
            f"the late output adds column {P.LATE_EVENT_TIME_COLUMN!r}, which clashes with "
            f"source column {clash.name!r}",
            clause.span,
            code=ErrorCode.NOT_FOR_WINDOW,
        )
    return clause.name.name
