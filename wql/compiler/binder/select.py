"""Binding GROUP BY keys, SELECT and HAVING.

Keys read the source relation; SELECT and HAVING read the post-aggregation
relation (:func:`wql.compiler.plan.post_aggregation_schema`), where every
aggregate call becomes an entry of the query's :class:`AggregateRegistry`
(identical calls in SELECT and HAVING share one).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable

from sqlglot import exp

from wql.compiler import plan as P
from wql.compiler.binder.context import BindContext, collect, raise_all
from wql.compiler.expressions import (
    AggregateRegistry,
    PostAggContext,
    Relation,
    bind_post_aggregation,
    bind_scalar,
    quote_name,
)
from wql.errors import ErrorCode, Span, WqlError
from wql.grammar import ast


def bind_keys(
    ctx: BindContext, keys: tuple[ast.Expr, ...], relation: Relation, tables: Iterable[str]
) -> tuple[P.KeyColumn, ...]:
    out: list[P.KeyColumn] = []
    errors: list[WqlError] = []
    seen: dict[str, Span | None] = {}

    def key(k: ast.Expr) -> P.Expr:
        return bind_scalar(ctx.parse(k), relation, clause="GROUP BY", table_names=tables)

    for i, k in enumerate(keys):
        bound = collect(errors, key, k)
        if bound is None:
            continue
        if bound.sql in seen:
            errors.append(
                ctx.error(
                    f"grouping key {bound.sql} is listed twice",
                    k.span,
                    code=ErrorCode.DUPLICATE_NAME,
                )
            )
            continue
        seen[bound.sql] = k.span
        plain = bound.columns and bound.sql == quote_name(bound.columns[0])
        name = bound.columns[0] if plain else f"__key_{i}"
        if name.lower() in P.WINDOW_COLUMNS + P.PANE_COLUMNS:
            errors.append(
                ctx.error(
                    f"grouping key {name!r} has the name of a window column; rename the "
                    "source column or group by an expression",
                    k.span,
                    code=ErrorCode.DUPLICATE_NAME,
                )
            )
            continue
        out.append(P.KeyColumn(name, bound, bound.type, k.span))
    raise_all(errors)
    return tuple(out)


def _post_context(
    keys: tuple[P.KeyColumn, ...],
    window: P.Window,
    relation: Relation,
    tables: Iterable[str],
) -> PostAggContext:
    forbidden: tuple[tuple[str, str], ...] = ()
    if not P.has_bounds(window):
        forbidden = (
            (
                "pane_timing",
                f"pane_timing is meaningless for {window.kind} windows: they have no end, so "
                "no firing is EARLY, ON_TIME or LATE",
            ),
        )
    return PostAggContext(
        relation,
        Relation("the window result", P.window_result_schema(keys)),
        tuple((k.expr.sql, k.name) for k in keys),
        tuple(tables),
        forbidden,
    )


def bind_select(
    ctx: BindContext,
    q: ast.Query,
    keys: tuple[P.KeyColumn, ...] | None,
    window: P.Window | None,
    relation: Relation,
    tables: Iterable[str],
    registry: AggregateRegistry,
) -> tuple[P.OutputColumn, ...] | None:
    if keys is None or window is None:
        return None  # their errors are reported; SELECT cannot be checked without them
    post = _post_context(keys, window, relation, tables)
    out: list[P.OutputColumn] = []
    errors: list[WqlError] = []
    names: set[str] = set()
    for i, item in enumerate(q.select):
        pe = collect(errors, ctx.parse, item.expr)
        if pe is None:
            continue
        bound = collect(errors, bind_post_aggregation, pe, post, registry, clause="SELECT")
        if bound is None:
            continue
        if item.alias is not None:
            name, name_span = item.alias.name, item.alias.span
        elif isinstance(pe.pristine, exp.Column) and bound.columns:
            # A bare column keeps its (resolved) name, as in Spark.
            name, name_span = bound.columns[0], item.span
        else:
            # Spark-style names like `count(1)` are not valid Parquet column names.
            name, name_span = f"_c{i}", item.span
        if name.lower() in names:
            errors.append(
                ctx.error(
                    f"output column {name!r} appears twice",
                    name_span,
                    hint="give one of them an alias with AS",
                    code=ErrorCode.DUPLICATE_NAME,
                )
            )
            continue
        names.add(name.lower())
        out.append(P.OutputColumn(name, bound, bound.type, item.span))
    raise_all(errors)
    return tuple(out)


def bind_having(
    ctx: BindContext,
    e: ast.Expr,
    keys: tuple[P.KeyColumn, ...],
    window: P.Window,
    relation: Relation,
    tables: Iterable[str],
    registry: AggregateRegistry,
    output: tuple[P.OutputColumn, ...],
) -> P.Expr:
    post = _post_context(keys, window, relation, tables)
    post_names = {c.name.lower() for c in post.post.columns}
    aliases = tuple(
        (o.name.lower(), o.expr.sql) for o in output if o.name.lower() not in post_names
    )
    post = dataclasses.replace(post, aliases=aliases)
    bound = bind_post_aggregation(ctx.parse(e), post, registry, clause="HAVING")
    return ctx.condition(bound, e, "HAVING")
