"""Binding a windowed relation: what a window Top-N, a deduplication or a window join reads.

Flink SQL ranks and joins windows of a *windowed relation*: a window table
function over a table (``TABLE(TUMBLE(TABLE t, DESCRIPTOR(ts), ...))``: the
table's rows, each in every window the function assigns it, with
``window_start``, ``window_end`` and ``window_time``), or a window
aggregate (a view here) that selects ``window_start`` and ``window_end``.
The view must give final rows, one per window, as Flink's window aggregate
does: its trigger the default WATERMARK, no allowed lateness -- an EARLY or
LATE pane would be a second row of one window (Flink refuses an updating
input). Every mistake is a positioned error saying what is supported.
"""

from __future__ import annotations

from dataclasses import dataclass

from wql.compiler import plan as P
from wql.compiler.binder.context import BindContext, did_you_mean, lookup
from wql.compiler.binder.sources import bind_watermark, resolve_source
from wql.compiler.binder.views import bind_view_source, reads_view
from wql.compiler.binder.windows import bind_window
from wql.compiler.expressions import Relation
from wql.errors import ErrorCode
from wql.grammar import ast
from wql.grammar.formatter import format_window

#: Window table functions a window join reads. A SESSION table function has set
#: semantics: its rows get their window only once the session closes (Flink's
#: ``UnalignedWindowTableFunctionOperator``); a window Top-N reads it too.
ROW_WINDOWS = (ast.Tumble, ast.Hop, ast.Cumulate)


@dataclass(frozen=True)
class Windowed:
    """A bound windowed relation.

    ``source`` is the table read (a source, or a view); ``window`` the window
    table function's window (None for a view); ``columns`` the relation's
    columns; ``bounds`` the names of its window_start and window_end columns;
    ``time`` its time attribute (the event-time column: a window table's
    table's, or the view's window_time), None when it has none.
    """

    source: P.SourceRef
    window: P.Window | None
    columns: tuple[P.Column, ...]
    bounds: tuple[str, str]
    time: str | None
    tables: tuple[str, ...]

    @property
    def relation(self) -> Relation:
        what = f"view {self.source.name!r}" if self.source.view else f"table {self.source.name!r}"
        if self.window is not None:
            what = f"the window table over {self.source.name!r}"
        return Relation(what, self.columns)


def bind_windowed(
    ctx: BindContext, rel: ast.Relation, reader: str, what: str, alias: ast.Ident | None = None
) -> Windowed:
    """The windowed relation ``rel`` that ``reader`` (a ``what``) reads."""
    tables = (alias.name,) if alias is not None else ()
    if isinstance(rel, ast.WindowTable):
        return _window_table(ctx, rel, reader, what, tables)
    if not reads_view(ctx, rel, reader):
        decl = resolve_source(ctx, rel)
        raise ctx.error(
            f"a {what} reads a windowed relation, and {decl.name!r} is a source",
            rel.name.span,
            hint=f"read a window table function (FROM TABLE(TUMBLE(TABLE {decl.name}, "
            "DESCRIPTOR(ts), INTERVAL '1' MINUTE))) or a view of a window aggregate",
            code=ErrorCode.WINDOWED,
        )
    source = bind_view_source(ctx, rel, reader)
    view = ctx.views.get(source.name.lower()) or ctx.external[source.name.lower()].query
    return _windowed_view(ctx, rel, view, source, what, (source.name, *tables))


def _window_table(
    ctx: BindContext, rel: ast.WindowTable, reader: str, what: str, tables: tuple[str, ...]
) -> Windowed:
    sessions = isinstance(rel.window, ast.Session) and what == "window Top-N"
    if not isinstance(rel.window, ROW_WINDOWS) and not sessions:
        kind = format_window(rel.window).partition("(")[0]
        raise ctx.error(
            f"a {what} reads TUMBLE, HOP or CUMULATE window tables, not {kind}"
            + (
                ": WQL joins windows that every row falls in as it arrives, and a session's "
                "rows get their window only once it closes"
                if isinstance(rel.window, ast.Session)
                else ""
            ),
            rel.window.span,
            code=ErrorCode.WINDOWED,
        )
    ref = rel.table
    if reads_view(ctx, ref, reader):
        source = bind_view_source(ctx, ref, reader)
    else:
        decl = resolve_source(ctx, ref)
        event_time = decl.event_time
        if ref.watermark is not None:
            event_time = bind_watermark(ctx, ref.watermark, decl.name, decl.columns)
        source = P.SourceRef(
            decl.name,
            decl.columns,
            event_time,
            decl.option("processing_time"),
            decl.option("arrival_order"),
            ref.span,
        )
    columns = source.columns
    relation = Relation(f"table {source.name!r}", columns)
    window = bind_window(ctx, rel.window, source, relation, (source.name,))
    clash = [c.name for c in columns if c.name.lower() in P.WINDOW_TABLE_COLUMNS]
    if clash:
        raise ctx.error(
            f"the window table adds column {clash[0]!r}, which {source.name!r} has already",
            rel.span,
            code=ErrorCode.DUPLICATE_NAME,
        )
    et = source.event_time
    return Windowed(
        source,
        window,
        columns + tuple(P.Column(n, P.T.TIMESTAMP) for n in P.WINDOW_TABLE_COLUMNS),
        ("window_start", "window_end"),
        et.column if et is not None else None,
        (source.name, ref.name.name, *tables),
    )


def _windowed_view(
    ctx: BindContext,
    rel: ast.TableRef,
    view: P.Stage,
    source: P.SourceRef,
    what: str,
    tables: tuple[str, ...],
) -> Windowed:
    where = rel.name.span
    if (
        not isinstance(view, P.Query)
        or view.window.domain is not P.TimeDomain.EVENT
        or not (P.has_bounds(view.window))
    ):
        kind = "a window aggregate on event time" if isinstance(view, P.Query) else "one"
        raise ctx.error(
            f"a {what} reads views of event-time window aggregates, and view {view.name!r} is "
            f"not {kind}",
            where,
            hint="aggregate by TUMBLE, HOP, CUMULATE or SESSION on event time in the view",
            code=ErrorCode.WINDOWED,
        )
    if not isinstance(view.effective_trigger, P.WatermarkTrigger) or view.allowed_lateness_ms:
        clause = "ALLOWED LATENESS" if view.allowed_lateness_ms else "its TRIGGER"
        raise ctx.error(
            f"a {what} reads final rows, one per window, and view {view.name!r} fires "
            f"EARLY or LATE panes ({clause}); only the default WATERMARK trigger without "
            "allowed lateness gives final rows (Flink refuses an updating input too)",
            where,
            hint=f"read a view without {clause}",
            code=ErrorCode.WINDOWED,
        )
    bounds = []
    for bound in ("window_start", "window_end"):
        column = _selected(view, bound)
        if column is None:
            raise ctx.error(
                f"a {what} partitions by the window's bounds, and view {view.name!r} does not "
                f"select {bound}",
                where,
                hint=f"select window_start and window_end in {view.name}",
                code=ErrorCode.WINDOWED,
            )
        bounds.append(column)
    et = source.event_time
    return Windowed(
        source,
        None,
        source.columns,
        (bounds[0], bounds[1]),
        et.column if et is not None else None,
        tables,
    )


def _selected(view: P.Query, column: str) -> str | None:
    """The name of ``view``'s output column that is exactly its ``column`` (a window column)."""
    for c in view.output:
        if c.expr.columns == (column,) and c.expr.sql in (column, f"`{column}`"):
            return c.name
    return None


def column_of(ctx: BindContext, windowed: Windowed, ident: ast.Ident, clause: str) -> P.Column:
    """The column ``ident`` names in ``windowed`` (a positioned error when there is none)."""
    col = lookup(windowed.columns, ident.name)
    if col is None:
        names = [c.name for c in windowed.columns]
        raise ctx.error(
            f"unknown column {ident.name!r} in {clause}",
            ident.span,
            expected=names,
            hint=did_you_mean(ident.name, names),
            code=ErrorCode.UNKNOWN_NAME,
        )
    return col
