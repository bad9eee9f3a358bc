"""Binding an OVER aggregation (Flink SQL's event-time over aggregate).

Flink's shape, with its limits as positioned errors (``ErrorCode.OVER``):
one OVER window for every aggregate of the query (Flink plans one over
operator per window and refuses a query whose windows differ); ORDER BY the
event-time attribute, ascending; a frame from ``UNBOUNDED PRECEDING``,
``<interval> PRECEDING`` (RANGE) or ``<n> PRECEDING`` (ROWS) to ``CURRENT
ROW`` (no frame is SQL's default, ``RANGE BETWEEN UNBOUNDED PRECEDING AND
CURRENT ROW``). The query reads a source with event time.
"""

from __future__ import annotations

from sqlglot import exp

from wql.compiler import plan as P
from wql.compiler.binder.context import BindContext, collect, raise_all
from wql.compiler.binder.lateness import bind_late_data
from wql.compiler.binder.sources import bind_source_ref
from wql.compiler.binder.views import reads_view
from wql.compiler.expressions import (
    AggregateRegistry,
    PostAggContext,
    Relation,
    bind_post_aggregation,
    bind_scalar,
    quote_name,
)
from wql.errors import ErrorCode, WqlError
from wql.grammar import ast
from wql.grammar.formatter import format_ident, format_over

__all__ = ["bind_over"]

_HINT = (
    "agg(x) OVER (PARTITION BY k ORDER BY ts RANGE BETWEEN INTERVAL '1' MINUTE PRECEDING "
    "AND CURRENT ROW), or ROWS BETWEEN n PRECEDING AND CURRENT ROW"
)


def bind_over(ctx: BindContext, q: ast.OverQuery, name: str) -> P.OverAggregate | None:
    """The plan of ``q``, or None with its errors recorded in ``ctx``."""
    before = len(ctx.errors)
    if reads_view(ctx, q.source, name):
        ctx.errors.append(
            ctx.error(
                f"an OVER aggregation reads a source; {q.source.name.name!r} is a view",
                q.source.span,
                hint="run the OVER aggregation over the view's source",
                code=ErrorCode.OVER,
            )
        )
        return None
    bound = bind_source_ref(ctx, q.source)
    if bound is None:
        return None
    source, relation, tables = bound
    items = [i for i in q.select if isinstance(i, ast.OverItem)]
    first = items[0].window
    try:
        ctx.need_event_time(source, "an OVER aggregation", first.order_by.span)
    except WqlError as e:
        ctx.errors.append(e)
        return None
    where = None
    if q.where is not None:
        where = ctx.attempt(ctx.boolean, q.where, relation, tables, "WHERE")
    window = ctx.attempt(_bind_window, ctx, items, source, relation, tables)
    registry = AggregateRegistry()
    output = ctx.attempt(_bind_select, ctx, q, source, relation, tables, registry)
    late_output = None
    if q.late_data is not None:
        late_output = ctx.attempt(bind_late_data, ctx, q.late_data, None, source)
    if len(ctx.errors) > before or window is None or output is None:
        return None
    keys, frame, preceding = window
    aggregates = tuple(
        P.Aggregate(kind, arg, f"__agg_{i}", typ, span)
        for i, (kind, arg, typ, span) in enumerate(registry.entries)
    )
    return ctx.attempt(
        P.OverAggregate,
        name=name,
        source=source,
        filter=where,
        keys=keys,
        frame=frame,
        preceding=preceding,
        aggregates=aggregates,
        output=output,
        late_output=late_output,
        span=q.span,
        window_span=first.span,
        late_output_span=q.late_data.span if q.late_data is not None else None,
    )


def _bind_window(
    ctx: BindContext,
    items: list[ast.OverItem],
    source: P.SourceRef,
    relation: Relation,
    tables: tuple[str, ...],
) -> tuple[tuple[P.KeyColumn, ...], P.OverFrame, int | None]:
    """The one OVER window of the query: its keys, frame kind and PRECEDING bound."""
    errors: list[WqlError] = []
    first = items[0].window
    written = format_over(first).lower()
    for item in items[1:]:
        if format_over(item.window).lower() != written:
            errors.append(
                ctx.error(
                    f"every aggregate of an OVER aggregation has the same window; this one "
                    f"differs from OVER ({format_over(first)})",
                    item.window.span,
                    hint="Flink SQL runs one OVER window per query: split it into two queries",
                    code=ErrorCode.OVER,
                )
            )
    keys = collect(errors, _partition_keys, ctx, first.partition_by, relation, tables)
    collect(errors, _check_order, ctx, first.order_by, source, relation, tables)
    bounds = collect(errors, _frame, ctx, first)
    raise_all(errors)
    assert keys is not None and bounds is not None
    return (keys, *bounds)


def _partition_keys(
    ctx: BindContext, idents: tuple[ast.Ident, ...], relation: Relation, tables: tuple[str, ...]
) -> tuple[P.KeyColumn, ...]:
    """PARTITION BY's columns of the source (named as they are: no window columns here)."""
    out: list[P.KeyColumn] = []
    errors: list[WqlError] = []
    for ident in idents:
        e = ast.Expr(format_ident(ident), format_ident(ident), span=ident.span)
        pe = collect(errors, ctx.parse, e)
        if pe is None:
            continue
        bound = collect(
            errors, bind_scalar, pe, relation, clause="PARTITION BY", table_names=tables
        )
        if bound is None:
            continue
        name = bound.columns[0]
        if any(k.name.lower() == name.lower() for k in out):
            errors.append(
                ctx.error(
                    f"PARTITION BY lists {name!r} twice", ident.span, code=ErrorCode.DUPLICATE_NAME
                )
            )
            continue
        out.append(P.KeyColumn(name, bound, bound.type, ident.span))
    raise_all(errors)
    return tuple(out)


def _check_order(
    ctx: BindContext,
    order: ast.OrderItem,
    source: P.SourceRef,
    relation: Relation,
    tables: tuple[str, ...],
) -> None:
    et = source.event_time
    assert et is not None
    bound = bind_scalar(ctx.parse(order.expr), relation, clause="ORDER BY", table_names=tables)
    if bound.sql.strip() != quote_name(et.column) and bound.column_ref != et.column:
        raise ctx.error(
            f"an OVER aggregation orders by the event-time attribute {et.column!r}",
            order.expr.span,
            hint=f"ORDER BY {et.column} (Flink SQL orders OVER windows by a time attribute)",
            code=ErrorCode.OVER,
        )
    if order.descending:
        raise ctx.error(
            "an OVER aggregation orders by event time ascending",
            order.span,
            hint=f"ORDER BY {et.column}",
            code=ErrorCode.OVER,
        )


def _frame(ctx: BindContext, w: ast.OverWindow) -> tuple[P.OverFrame, int | None]:
    if w.unit is None or w.lower is None or w.upper is None:
        return P.OverFrame.RANGE, None  # SQL's default frame
    frame = P.OverFrame(w.unit.value)
    lower, upper = w.lower, w.upper
    if upper.kind is not ast.BoundKind.CURRENT_ROW:
        raise ctx.error(
            "an OVER frame ends at CURRENT ROW (Flink SQL runs no FOLLOWING rows on a stream)",
            upper.span,
            hint=_HINT,
            code=ErrorCode.OVER,
        )
    if lower.following or lower.kind is ast.BoundKind.CURRENT_ROW:
        raise ctx.error(
            "an OVER frame starts at a PRECEDING bound",
            lower.span,
            hint=_HINT,
            code=ErrorCode.OVER,
        )
    if lower.kind is ast.BoundKind.UNBOUNDED:
        return frame, None
    offset = lower.offset
    if frame is P.OverFrame.RANGE:
        if not isinstance(offset, ast.Interval):
            raise ctx.error(
                "a RANGE frame reaches back by time: INTERVAL '...' PRECEDING",
                lower.span,
                hint="or ROWS BETWEEN n PRECEDING AND CURRENT ROW for a number of rows",
                code=ErrorCode.OVER,
            )
        if offset.millis < 0:
            raise ctx.error(
                f"a RANGE frame's PRECEDING interval is not negative, got {offset.describe()}",
                offset.span,
                code=ErrorCode.OUT_OF_RANGE,
            )
        return frame, offset.millis
    if not isinstance(offset, ast.Integer):
        raise ctx.error(
            "a ROWS frame reaches back by a number of rows: n PRECEDING",
            lower.span,
            hint="or RANGE BETWEEN INTERVAL '...' PRECEDING AND CURRENT ROW for a time span",
            code=ErrorCode.OVER,
        )
    if offset.value < 0:
        raise ctx.error(
            f"a ROWS frame's PRECEDING count is not negative, got {offset.value}",
            offset.span,
            code=ErrorCode.OUT_OF_RANGE,
        )
    return frame, offset.value


def _bind_select(
    ctx: BindContext,
    q: ast.OverQuery,
    source: P.SourceRef,
    relation: Relation,
    tables: tuple[str, ...],
    registry: AggregateRegistry,
) -> tuple[P.OutputColumn, ...]:
    """The output over the over relation: the source's columns, then ``__agg_<i>``."""
    post = PostAggContext(relation, Relation("the OVER aggregation", ()), (), tables)
    out: list[P.OutputColumn] = []
    errors: list[WqlError] = []
    names: set[str] = set()

    def add(name: str, bound: P.Expr, span: object) -> None:
        if name.lower() in names:
            errors.append(
                ctx.error(
                    f"output column {name!r} appears twice",
                    span,  # type: ignore[arg-type]
                    hint="give one of them an alias with AS",
                    code=ErrorCode.DUPLICATE_NAME,
                )
            )
            return
        names.add(name.lower())
        out.append(P.OutputColumn(name, bound, bound.type, span))  # type: ignore[arg-type]

    for i, item in enumerate(q.select):
        if isinstance(item, ast.Star):
            if item.table is not None and item.table.name.lower() not in {
                t.lower() for t in tables
            }:
                errors.append(
                    ctx.error(
                        f"unknown table {item.table.name!r} in {item.table.name}.*",
                        item.span,
                        code=ErrorCode.UNKNOWN_NAME,
                    )
                )
                continue
            for c in source.columns:
                add(c.name, P.Expr(quote_name(c.name), c.type, (c.name,), item.span), item.span)
            continue
        if isinstance(item, ast.OverItem):
            pe = collect(errors, ctx.parse, item.call)
            if pe is None:
                continue
            if not isinstance(pe.pristine, exp.AggFunc | exp.Count):
                errors.append(
                    ctx.error(
                        "OVER applies to an aggregate call (COUNT, SUM, MIN, MAX, AVG, ...)",
                        item.call.span,
                        hint=_HINT,
                        code=ErrorCode.OVER,
                    )
                )
                continue
            bound = collect(errors, bind_post_aggregation, pe, post, registry, clause="OVER")
            if bound is None:
                continue
            name = item.alias.name if item.alias is not None else f"_c{i}"
            add(name, bound, item.alias.span if item.alias is not None else item.span)
            continue
        pe = collect(errors, ctx.parse, item.expr)
        if pe is None:
            continue
        scalar = collect(errors, bind_scalar, pe, relation, clause="SELECT", table_names=tables)
        if scalar is None:
            continue
        if item.alias is not None:
            name = item.alias.name
        elif isinstance(pe.pristine, exp.Column) and scalar.columns:
            name = scalar.columns[0]
        else:
            name = f"_c{i}"
        add(name, scalar, item.alias.span if item.alias is not None else item.span)
    raise_all(errors)
    return tuple(out)
