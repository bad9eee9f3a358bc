"""Binding a window join (Flink SQL's window join).

::

    SELECT ... FROM <windowed relation> [AS] l [INNER | LEFT | RIGHT | FULL] JOIN
        <windowed relation> [AS] r
      ON l.window_start = r.window_start AND l.window_end = r.window_end [AND keys ...]
    [WHERE ...]

As in Flink, both sides are windowed relations (:mod:`.relations`: window
table functions, or views of final window aggregates) of the *same*
windows, and ON equates their window bounds; the other conjuncts (the keys,
any condition) join rows of one window. The sides read one source or two;
the join's watermark is the minimum of its two inputs' (Flink's two-input
operator), and two sources' rows interleave by a shared ``arrival_order``
or by event time (docs/language.md, "Window joins of two sources"): one
source with an arrival order and one without, arrival orders of different
kinds, and an idle rule (``IDLE AFTER`` with a ``processing_time`` column)
are positioned errors.

Columns are read qualified (``l.price``) or, when only one side has them,
unqualified; each is bound to its internal name in the joined relation
(``__wql_l<i>`` / ``__wql_r<i>``, :class:`~wql.compiler.plan.JoinSide`).
"""

from __future__ import annotations

from typing import cast

from sqlglot import exp

from wql.compiler import plan as P
from wql.compiler.binder.context import BindContext, collect, did_you_mean, raise_all
from wql.compiler.binder.relations import Windowed, bind_windowed
from wql.compiler.expressions import (
    ParsedExpr,
    Relation,
    bind_scalar,
    conjuncts,
    quote_name,
    to_sql,
)
from wql.errors import ErrorCode, Span, WqlError
from wql.grammar import ast

#: Windows a join joins (as Flink: a session's bounds differ per key).
JOINABLE = (P.Tumble, P.Hop, P.Cumulate)


def bind_join(ctx: BindContext, q: ast.JoinQuery, name: str) -> P.WindowJoin | None:
    before = len(ctx.errors)
    left = ctx.attempt(bind_windowed, ctx, q.left.relation, name, "window join", q.left.alias)
    right = ctx.attempt(bind_windowed, ctx, q.right.relation, name, "window join", q.right.alias)
    if left is None or right is None:
        return None
    sides = ctx.attempt(_sides, ctx, q, left, right)
    if sides is None:
        return None
    if ctx.attempt(_sources_and_windows, ctx, q, sides) is None:
        return None
    joined = Relation("the joined rows", _joined(sides))
    on = ctx.attempt(_condition, ctx, q.on, sides, joined, "ON")
    if on is not None:
        ctx.attempt(_needs_bounds, ctx, q, sides, on[1])
    where = None
    if q.where is not None:
        bound = ctx.attempt(_condition, ctx, q.where, sides, joined, "WHERE")
        where = bound[0] if bound is not None else None
    output = ctx.attempt(_output, ctx, q, sides, joined)
    if len(ctx.errors) > before or on is None or output is None:
        return None
    kind = P.JoinKind((q.kind or ast.JoinKind.INNER).value)
    return ctx.attempt(
        P.WindowJoin,
        name=name,
        left=sides[0],
        right=sides[1],
        kind=kind,
        on=on[0],
        where=where,
        output=output,
        span=q.span,
    )


def _sides(
    ctx: BindContext, q: ast.JoinQuery, left: Windowed, right: Windowed
) -> tuple[P.JoinSide, P.JoinSide]:
    out = []
    for prefix, side, given in (("l", left, q.left), ("r", right, q.right)):
        qualifier = given.alias.name if given.alias is not None else _table_name(given.relation)
        windows = side.window
        if windows is None:
            view = (
                ctx.views.get(side.source.name.lower())
                or ctx.external[side.source.name.lower()].query
            )
            assert isinstance(view, P.Query)  # bind_windowed reads views of aggregates only
            windows = view.window
        out.append(
            P.JoinSide(
                qualifier,
                side.source,
                side.window,
                windows,
                side.columns,
                side.bounds,
                tuple(f"__wql_{prefix}{i}" for i in range(len(side.columns))),
                given.span,
            )
        )
    if out[0].qualifier.lower() == out[1].qualifier.lower():
        raise ctx.error(
            f"both sides of the join are called {out[0].qualifier!r}: give them aliases",
            q.right.span,
            hint="FROM v AS l JOIN v AS r ON ...",
            code=ErrorCode.DUPLICATE_NAME,
        )
    return out[0], out[1]


def _table_name(rel: ast.Relation) -> str:
    return rel.name.name if isinstance(rel, ast.TableRef) else rel.table.name.name


def _sources_and_windows(ctx: BindContext, q: ast.JoinQuery, sides: tuple) -> bool:
    left, right = sides
    for side in sides:
        if not isinstance(side.windows, JOINABLE):
            raise ctx.error(
                f"a window join joins TUMBLE, HOP or CUMULATE windows; {side.qualifier!r} has "
                f"{side.windows.kind} windows",
                side.span,
                code=ErrorCode.WINDOW_JOIN,
            )
    if _spec(left.windows) != _spec(right.windows):
        raise ctx.error(
            f"a window join joins the same windows on both sides: {left.qualifier!r} has "
            f"{_describe(left.windows)}, {right.qualifier!r} {_describe(right.windows)}",
            q.right.span,
            hint="window both sides alike; rows of different windows are joined by a regular "
            "join, which WQL does not run",
            code=ErrorCode.WINDOW_JOIN,
        )
    roots = [_root(ctx, side.source) for side in sides]
    if roots[0].name.lower() != roots[1].name.lower():
        _two_sources(ctx, q, sides, roots)
    return True


def _two_sources(
    ctx: BindContext, q: ast.JoinQuery, sides: tuple, roots: list[P.SourceRef]
) -> None:
    """A join of two sources: their rows interleave by a shared arrival order or by event
    time, and the join's watermark is the minimum of the two (docs/language.md, "Window
    joins of two sources"); what that replay cannot give is refused here."""
    left, right = sides
    names = f"{left.qualifier!r} reads {roots[0].name!r} and {right.qualifier!r} reads " + repr(
        roots[1].name
    )
    for root in roots:
        et = root.event_time
        if et is None:  # pragma: no cover - a windowed relation has event time
            raise ctx.error(
                f"a window join of two sources needs event time on both; {root.name!r} has none",
                q.right.span,
                code=ErrorCode.WINDOW_JOIN,
            )
        if et.idle_ms is not None and root.processing_time is not None:
            raise ctx.error(
                f"a window join of two sources: {root.name!r} declares IDLE AFTER with a "
                "processing_time column, whose idle rule this join does not model (Flink "
                "leaves an idle input out of the minimum of the two watermarks)",
                et.idle_span or q.right.span,
                hint="drop IDLE AFTER (or the processing_time column) for this join",
                code=ErrorCode.WINDOW_JOIN,
            )
    orders = [r.arrival_order for r in roots]
    if (orders[0] is None) != (orders[1] is None):
        has, lacks = (roots[0], roots[1]) if orders[0] is not None else (roots[1], roots[0])
        raise ctx.error(
            f"a window join of two sources interleaves their rows by one arrival order, or "
            f"by event time: {names}, and {has.name!r} declares arrival_order = "
            f"{has.arrival_order!r} while {lacks.name!r} declares none",
            q.right.span,
            hint=f"declare arrival_order on {lacks.name!r} too (a column of the same kind), "
            "or on neither source",
            code=ErrorCode.WINDOW_JOIN,
        )
    if orders[0] is not None and orders[1] is not None:
        kinds = [_arrival_kind(r) for r in roots]
        if None in kinds or kinds[0] != kinds[1]:
            types = [str(_column_type(r, str(o))) for r, o in zip(roots, orders, strict=True)]
            raise ctx.error(
                f"a window join of two sources interleaves their rows by their arrival_order "
                f"columns, which must both be integers or both timestamps: {roots[0].name!r}"
                f".{orders[0]} is {types[0]}, {roots[1].name!r}.{orders[1]} is {types[1]}",
                q.right.span,
                hint="declare arrival_order columns of one kind (BIGINT or TIMESTAMP)",
                code=ErrorCode.WINDOW_JOIN,
            )


def _column_type(root: P.SourceRef, name: str) -> object:
    col = root.column(name)
    return col.type if col is not None else "unknown"


def _arrival_kind(root: P.SourceRef) -> str | None:
    """``integer`` or ``timestamp``: the arrival orders of two sources compare alike."""
    assert root.arrival_order is not None
    col = root.column(root.arrival_order)
    if col is None:
        return None
    if col.type.is_integral:
        return "integer"
    return "timestamp" if col.type.is_temporal else None


def _root(ctx: BindContext, source: P.SourceRef) -> P.SourceRef:
    """The source at the start of ``source``'s pipeline."""
    while source.view is not None:
        view = ctx.views.get(source.view.lower())
        if view is None:
            external = ctx.external[source.view.lower()]
            return external.program.root_source(external.query)
        source = P.inputs_of(view)[0]
    return source


def _spec(w: P.Window) -> tuple:
    return (type(w).__name__, *(getattr(w, f, None) for f in ("size_ms", "slide_ms", "step_ms")),
            getattr(w, "offset_ms", 0))  # fmt: skip


def _describe(w: P.Window) -> str:
    from wql.compiler.explain import window_text

    return window_text(w).replace(f"({w.time_column}, ", "(").split(" on ")[0]


def _joined(sides: tuple[P.JoinSide, P.JoinSide]) -> tuple[P.Column, ...]:
    return tuple(
        P.Column(n, c.type) for s in sides for n, c in zip(s.internal, s.columns, strict=True)
    )


def _condition(
    ctx: BindContext,
    e: ast.Expr,
    sides: tuple[P.JoinSide, P.JoinSide],
    joined: Relation,
    clause: str,
) -> tuple[P.Expr, list[exp.Expression]]:
    """A BOOLEAN condition over the joined relation, and its conjuncts (resolved)."""
    pe = _resolved(ctx, e, sides, clause)
    bound = bind_scalar(pe, joined, clause=clause)
    return ctx.condition(bound, e, clause), conjuncts(cast(exp.Expression, pe.pristine))


def _needs_bounds(
    ctx: BindContext, q: ast.JoinQuery, sides: tuple, conjuncts: list[exp.Expression]
) -> None:
    """ON equates both sides' window_start and window_end (Flink's window join rule)."""
    pairs = set()
    for c in conjuncts:
        if (
            isinstance(c, exp.EQ)
            and isinstance(c.left, exp.Column)
            and isinstance(c.right, exp.Column)
        ):
            pairs.add(frozenset((c.left.name.lower(), c.right.name.lower())))
    left, right = sides
    missing = []
    for i in range(2):
        pair = frozenset(
            (
                left.internal_name(left.bounds[i]).lower(),
                right.internal_name(right.bounds[i]).lower(),
            )
        )
        if pair not in pairs:
            missing.append(
                f"{left.qualifier}.{left.bounds[i]} = {right.qualifier}.{right.bounds[i]}"
            )
    if missing:
        raise ctx.error(
            "a window join joins rows of the same window: ON needs " + " AND ".join(missing),
            q.on.span,
            hint="ON l.window_start = r.window_start AND l.window_end = r.window_end AND <keys>",
            code=ErrorCode.WINDOW_JOIN,
        )


def _resolved(
    ctx: BindContext, e: ast.Expr, sides: tuple[P.JoinSide, P.JoinSide], clause: str
) -> ParsedExpr:
    """``e`` with every column named by its internal name in the joined relation."""
    pe = ctx.parse(e)
    errors: list[WqlError] = []

    def rename(n: exp.Expression) -> exp.Expression:
        if isinstance(n, exp.Column):
            internal = collect(errors, _internal, ctx, pe, n, sides, clause)
            if internal is not None:
                return exp.column(internal)
        return n

    node = pe.node.transform(rename)
    raise_all(errors)
    # the text is the rewritten SQL: bindings are cached by text
    return ParsedExpr(node, to_sql(node), pe.offset, pe.source, pe.span)


def _internal(
    ctx: BindContext,
    pe: ParsedExpr,
    col: exp.Column,
    sides: tuple[P.JoinSide, P.JoinSide],
    clause: str,
) -> str:
    table, name = col.table, col.name
    if table:
        side = next((s for s in sides if s.qualifier.lower() == table.lower()), None)
        if side is None:
            raise pe.error(
                f"unknown table {table!r} in {clause}",
                col,
                expected=[s.qualifier for s in sides],
                code=ErrorCode.UNKNOWN_NAME,
            )
        found = [side] if _has(side, name) else []
    else:
        found = [s for s in sides if _has(s, name)]
    if len(found) == 1:
        return found[0].internal_name(name)
    if found:
        raise pe.error(
            f"column {name!r} is on both sides of the join: qualify it "
            f"({sides[0].qualifier}.{name} or {sides[1].qualifier}.{name})",
            col,
            code=ErrorCode.UNKNOWN_NAME,
        )
    names = [c.name for s in sides for c in s.columns]
    raise pe.error(
        f"unknown column {name!r} in {clause}",
        col,
        expected=names,
        hint=did_you_mean(name, names),
        code=ErrorCode.UNKNOWN_NAME,
    )


def _has(side: P.JoinSide, name: str) -> bool:
    return any(c.name.lower() == name.lower() for c in side.columns)


def _output(
    ctx: BindContext, q: ast.JoinQuery, sides: tuple[P.JoinSide, P.JoinSide], joined: Relation
) -> tuple[P.OutputColumn, ...]:
    out: list[P.OutputColumn] = []
    errors: list[WqlError] = []
    for i, item in enumerate(q.select):
        if isinstance(item, ast.Star):
            chosen: tuple[P.JoinSide, ...] = sides
            if item.table is not None:
                chosen = tuple(s for s in sides if s.qualifier.lower() == item.table.name.lower())
                if not chosen:
                    errors.append(
                        ctx.error(
                            f"unknown table {item.table.name!r}",
                            item.table.span,
                            expected=[s.qualifier for s in sides],
                            code=ErrorCode.UNKNOWN_NAME,
                        )
                    )
                    continue
            for side in chosen:
                for n, col in zip(side.internal, side.columns, strict=True):
                    expr = P.Expr(quote_name(n), col.type, (n,))
                    out.append(P.OutputColumn(col.name, expr, col.type, item.span))
            continue
        assert isinstance(item, ast.SelectItem)
        pe = collect(errors, _resolved, ctx, item.expr, sides, "SELECT")
        if pe is None:
            continue
        bound = collect(errors, bind_scalar, pe, joined, clause="SELECT")
        if bound is None:
            continue
        if item.alias is not None:
            name = item.alias.name
        elif isinstance(ctx.parse(item.expr).pristine, exp.Column):
            name = cast(exp.Column, ctx.parse(item.expr).pristine).name
        else:
            name = f"_c{i}"
        out.append(P.OutputColumn(name, bound, bound.type, item.span))
    seen: dict[str, Span | None] = {}
    for oc in out:
        if oc.name.lower() in seen:
            errors.append(
                ctx.error(
                    f"output column {oc.name!r} appears twice",
                    oc.span,
                    hint="select the columns by name (and alias one of them), or one side's t.*",
                    code=ErrorCode.DUPLICATE_NAME,
                )
            )
            break
        seen[oc.name.lower()] = oc.span
    raise_all(errors)
    return tuple(out)
