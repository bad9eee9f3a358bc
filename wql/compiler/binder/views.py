"""Binding a view as a query's input: ``FROM v`` where ``v`` is a ``CREATE VIEW``.

A query may read a view defined *before* it in its file, or a view of a
file given before it (``wql run a.wql b.wql``, :class:`~.context.ExternalView`).
The view's output columns are the query's input relation; its event time is
the column the view selects ``window_time`` as (Flink SQL: a window
aggregate's ``window_time`` is a rowtime attribute; ``window_start`` and
``window_end`` are plain timestamps), and its watermark is the view's,
forwarded after the view's firings (docs/architecture.md, "Contract:
pipelines"). Mistakes, each at the ``FROM`` name or clause responsible
(``ErrorCode.PIPELINE``):

* a view read before its definition, or by itself (a file has no cycles:
  a query reads only what is defined before it);
* ``FROM v WATERMARK FOR ...``: a view's event time is its ``window_time``;
* a view with ``EMIT CHANGELOG``: its ``-U``/``-D`` rows retract earlier
  rows, which a window, rank or join would read as rows of their own;
* a view that fires on processing time, or a reader that would: a pipeline
  replays one event-time sequence, in which processing-time firings have no
  place (and batch replay has no processing-time clock for a view's rows).
"""

from __future__ import annotations

from wql.compiler import plan as P
from wql.compiler.binder.context import BindContext, Echo
from wql.errors import ErrorCode, Span
from wql.grammar import ast


def view_names(script: ast.Script) -> dict[str, Span | None]:
    """The views a script defines: lower-cased name -> the span of the name."""
    return {
        st.name.name.lower(): st.name.span
        for st in script.statements
        if isinstance(st, ast.CreateView)
    }


def reads_view(ctx: BindContext, ref: ast.TableRef, reader: str) -> bool:
    """Whether ``FROM ref`` names a view (rather than a source) for the query ``reader``."""
    low = ref.name.name.lower()
    if low in ctx.failed_views:
        return True  # its error is reported (a view of a source's name among them)
    if low in ctx.sources:
        return False
    return (
        low == reader.lower()
        or low in ctx.views
        or low in ctx.failed_views
        or low in ctx.later_views
        or low in ctx.external
    )


def bind_view_source(ctx: BindContext, ref: ast.TableRef, reader: str) -> P.SourceRef:
    """The input of a query ``reader`` reading the view ``FROM ref``."""
    name = ref.name.name
    low = name.lower()
    if low == reader.lower():
        raise ctx.error(
            f"view {name!r} reads itself",
            ref.name.span,
            hint="a query reads sources and the views defined before it",
            code=ErrorCode.PIPELINE,
        )
    if low in ctx.failed_views:
        # its own error is reported where it is defined
        raise Echo(f"view {name!r} has errors", ref.name.span, code=ErrorCode.PIPELINE)
    view = ctx.views.get(low)
    if view is None and low in ctx.later_views:
        where = ctx.later_views[low]
        line = f" (line {where.line})" if where is not None else ""
        raise ctx.error(
            f"view {name!r} is defined after this query{line}",
            ref.name.span,
            hint="a query reads only the views defined before it: move the view up",
            code=ErrorCode.PIPELINE,
        )
    if view is None:
        external = ctx.external[low]
        view = external.query
        # the view and what it reads, upstream first (across files too)
        for q in external.program.pipeline(view):
            ctx.external_used.setdefault(q.name.lower(), q)
    if isinstance(view, P.WindowJoin):
        raise ctx.error(
            f"view {view.name!r} is a window join, whose rows another query cannot read",
            ref.name.span,
            hint="a window join ends a pipeline: join views, rank them, then join",
            code=ErrorCode.PIPELINE,
        )
    if isinstance(view, P.OverAggregate):
        raise ctx.error(
            f"view {view.name!r} is an OVER aggregation, whose rows another query cannot read "
            "(they carry no window and no rowtime WQL forwards)",
            ref.name.span,
            hint="an OVER aggregation ends a pipeline: read its source instead",
            code=ErrorCode.OVER,
        )
    if isinstance(view, P.Query) and view.changelog is not None:
        raise ctx.error(
            f"view {view.name!r} emits a changelog (EMIT CHANGELOG), whose retractions a query "
            "cannot read as rows: a window, rank or join reads appended rows only (Flink's "
            "window operators refuse an updating input too)",
            ref.name.span,
            hint=f"drop EMIT CHANGELOG from {view.name}, or read its final rows "
            "(the default WATERMARK trigger)",
            code=ErrorCode.PIPELINE,
        )
    if ref.watermark is not None:
        raise ctx.error(
            f"view {view.name!r} has its event time already: the window_time it selects, with "
            "the view's watermark",
            ref.watermark.span,
            hint="WATERMARK FOR declares a source's event time; drop it here",
            code=ErrorCode.PIPELINE,
        )
    if fires_on_processing_time(view):
        raise ctx.error(
            f"view {view.name!r} fires on processing time; a query can read only views whose "
            "firings follow the watermark (event-time windows, count windows and GLOBAL(), "
            "with event-time or row triggers)",
            ref.name.span,
            code=ErrorCode.PIPELINE,
        )
    return P.SourceRef(
        view.name,
        view.output_schema,
        _event_time(view, ref.span),
        None,
        None,
        ref.span,
        view=view.name,
    )


def check_reader_clock(
    ctx: BindContext, source: P.SourceRef, window: P.Window, trigger: P.Trigger | None
) -> None:
    """A query over a view runs on the pipeline's event-time sequence: no processing time."""
    if source.view is None:
        return
    span = None
    if window.domain is P.TimeDomain.PROCESSING:
        span = window.span
    elif trigger is not None and P.TimeDomain.PROCESSING in P.trigger_domains(trigger):
        span = trigger.span
    if span is not None:
        raise ctx.error(
            f"a query over view {source.name!r} cannot use processing time: the pipeline "
            "replays one event-time sequence, with no processing-time clock for a view's rows",
            span,
            hint="use event-time windows and triggers (WATERMARK, EVERY ... OF EVENT TIME, "
            "COUNT) on a view",
            code=ErrorCode.PIPELINE,
        )


def fires_on_processing_time(q: P.Stage) -> bool:
    """Whether ``q``'s window or trigger uses the processing-time clock."""
    if not isinstance(q, P.Query):
        return False  # a window rank fires at its windows' ends, on event time
    return (
        q.window.domain is P.TimeDomain.PROCESSING
        or P.TimeDomain.PROCESSING in P.trigger_domains(q.effective_trigger)
    )


def _event_time(view: P.Stage, span: Span | None) -> P.EventTime | None:
    """The view's event time: the first output column that is exactly its ``window_time``.

    Only event-time windows have one (count and GLOBAL() windows' window_time
    is NULL); an expression over window_time is a plain timestamp, as in Flink.
    The rows of a window Top-N have none.
    """
    if not isinstance(view, P.Query) or view.window.domain is not P.TimeDomain.EVENT:
        return None
    for c in view.output:
        if c.expr.columns == ("window_time",) and c.expr.sql in ("window_time", "`window_time`"):
            return P.EventTime(c.name, 0, span)
    return None
