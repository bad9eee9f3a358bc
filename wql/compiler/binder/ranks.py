"""Binding a window Top-N or deduplication (Flink SQL's window rank).

Both forms mean the same ranking::

    SELECT ... FROM (SELECT ..., ROW_NUMBER() OVER (PARTITION BY window_start,
        window_end [, keys] ORDER BY ...) AS rn FROM <windowed relation>) WHERE rn <= N
    SELECT ... FROM <windowed relation> QUALIFY ROW_NUMBER() OVER (...) <= N

The windowed relation is bound by :mod:`.relations`. As in Flink, the rank
partitions by the window's bounds (and keys), keeps the first N rows of each
partition by the ORDER BY (equal rows in arrival order), and becomes a
*deduplication* when it keeps one row ordered by the time attribute alone
(``ORDER BY ts`` keeps the first row, ``ORDER BY ts DESC`` the last, the
last of equal ones: Flink's ``RowTimeDeduplicateRecordsCombiner``). The bound
is the smallest ``rn <= N``, ``rn < N`` or ``rn = N`` among the conjuncts of
the outer WHERE (or QUALIFY); the whole condition still filters the ranked
rows, so ``rn >= 2 AND rn <= 3`` keeps ranks 2 and 3 (Flink's rank range).

``RANK()`` and ``DENSE_RANK()`` in place of ``ROW_NUMBER()`` rank as SQL
does: equal rows share a rank, and every row ranked at most N is kept (ties
can keep more than N rows). Flink's window Top-N refuses them; its regular
Top-N (``RankType.RANK`` / ``DENSE_RANK``) ranks the same way.
"""

from __future__ import annotations

from typing import cast

from sqlglot import exp

from wql.compiler import plan as P
from wql.compiler import types as T
from wql.compiler.binder.context import BindContext, collect, raise_all
from wql.compiler.binder.relations import Windowed, bind_windowed, column_of
from wql.compiler.expressions import Relation, bind_scalar, conjuncts, quote_name
from wql.errors import ErrorCode, WqlError
from wql.grammar import ast


def bind_rank(ctx: BindContext, q: ast.RankQuery, name: str) -> P.WindowRank | None:
    before = len(ctx.errors)
    windowed = ctx.attempt(bind_windowed, ctx, q.source, name, "window Top-N")
    if windowed is None:
        return None
    # what is bound before the rank reads the windowed relation; for a window
    # table function only its table's columns (the host evaluates them before
    # the operator assigns the windows)
    before_rank = windowed
    if windowed.window is not None:
        before_rank = Windowed(
            windowed.source,
            windowed.window,
            windowed.source.columns,
            windowed.bounds,
            windowed.time,
            windowed.tables,
        )
    relation, tables = before_rank.relation, before_rank.tables
    where = None
    if q.where is not None:
        where = ctx.attempt(ctx.boolean, q.where, relation, tables, "WHERE")
    keys = ctx.attempt(_partition, ctx, q.rank, windowed, before_rank)
    if keys is not None and isinstance(q.source, ast.WindowTable):
        ctx.attempt(_session_keys, ctx, q.source, keys)
    order = ctx.attempt(_order, ctx, q.rank, relation, tables)
    inner = ctx.attempt(_inner, ctx, q, windowed)
    if inner is None or keys is None or order is None:
        return None
    rank_name = q.rank_alias.name if q.rank_alias is not None else P.RANK_COLUMN
    ranked = Relation("the ranked rows", tuple(P.Column(c.name, c.type) for c in inner))
    outer_tables = (q.alias.name,) if q.alias is not None else ()
    bound = ctx.attempt(_bound, ctx, q, ranked, rank_name, outer_tables)
    output = ctx.attempt(_outer, ctx, q, ranked, outer_tables)
    if len(ctx.errors) > before or bound is None or output is None:
        return None
    limit, condition = bound
    keep = _keep(q, limit, windowed)
    return ctx.attempt(
        P.WindowRank,
        name=name,
        source=windowed.source,
        window=windowed.window,
        filter=where,
        keys=keys,
        bounds=windowed.bounds if windowed.window is None else None,
        order=order,
        limit=limit,
        keep=keep,
        inner=inner,
        rank_column=rank_name,
        condition=condition,
        output=output,
        ties=_ties(ctx, windowed),
        span=q.span,
    )


def _ties(ctx: BindContext, windowed: Windowed) -> tuple[str, ...] | None:
    """A view's output columns holding its grouping keys (see ``WindowRank.ties``)."""
    if windowed.window is not None:
        return ()  # a window table's rows arrive in replay order
    view = ctx.views.get(windowed.source.name.lower())
    if view is None:
        view = ctx.external[windowed.source.name.lower()].query
    if not isinstance(view, P.Query):
        return None
    out = []
    for k in view.keys:
        column = next(
            (
                c.name
                for c in view.output
                if c.expr.columns == (k.name,) and _names(c.expr.sql, k.name)
            ),
            None,
        )
        if column is None:
            return None
        out.append(column)
    return tuple(out)


def _names(sql: str, column: str) -> bool:
    """Whether ``sql`` is a plain reference to ``column``: its name, bare or back-quoted
    (a back-quote inside a quoted name is doubled: `` `a``b` `` is ``a`b``)."""
    s = sql.strip()
    if len(s) > 1 and s[0] == s[-1] == "`":
        s = s[1:-1].replace("``", "`")
    return s.lower() == column.lower()


def _session_keys(ctx: BindContext, table: ast.WindowTable, keys: tuple[P.KeyColumn, ...]) -> None:
    """A rank over a SESSION table ranks each session of each key: PARTITION BY of the
    rank (besides the bounds) and of SESSION must name the same keys, as for a GROUP BY
    over a SESSION table (WQL's sessions are per key)."""
    if not isinstance(table.window, ast.Session):
        if table.partition:
            raise ctx.error(
                "PARTITION BY in a window table function belongs to SESSION",
                table.partition[0].span,
                code=ErrorCode.WINDOWED,
            )
        return
    session = sorted(i.name.lower() for i in table.partition)
    if session != sorted(k.name.lower() for k in keys):
        where = table.partition[0].span if table.partition else table.span
        raise ctx.error(
            "a window Top-N over a SESSION table ranks each key's sessions: "
            "SESSION(TABLE t PARTITION BY ...) and the rank's PARTITION BY (besides "
            "window_start, window_end) must name the same keys (WQL's sessions are per key)",
            where,
            hint="TABLE(SESSION(TABLE t PARTITION BY k, DESCRIPTOR(ts), gap)) ... "
            "OVER (PARTITION BY window_start, window_end, k ORDER BY ...)",
            code=ErrorCode.WINDOWED,
        )


def _partition(
    ctx: BindContext, rank: ast.RowNumber, windowed: Windowed, before_rank: Windowed
) -> tuple[P.KeyColumn, ...]:
    """PARTITION BY: the window's bounds (required) and the keys."""
    start, end = windowed.bounds
    bounds = {start.lower(), end.lower()}
    if windowed.window is not None:
        bounds.add("window_time")  # the third column of a window table: no key either
    keys: list[P.KeyColumn] = []
    seen: set[str] = set()
    errors: list[WqlError] = []
    for ident in rank.partition_by:
        low = ident.name.lower()
        if low in seen:
            errors.append(
                ctx.error(
                    f"{ident.name!r} is in PARTITION BY twice",
                    ident.span,
                    code=ErrorCode.DUPLICATE_NAME,
                )
            )
            continue
        seen.add(low)
        if low in bounds:
            continue
        col = collect(errors, column_of, ctx, before_rank, ident, "PARTITION BY")
        if col is not None:
            sql = quote_name(col.name)
            keys.append(
                P.KeyColumn(
                    col.name, P.Expr(sql, col.type, (col.name,), ident.span), col.type, ident.span
                )
            )
    missing = [b for b in (start, end) if b.lower() not in seen]
    if missing:
        errors.append(
            ctx.error(
                f"a window Top-N ranks within each window: PARTITION BY lists the window's "
                f"bounds {start} and {end} ({' and '.join(missing)} missing)",
                rank.span,
                hint=f"ROW_NUMBER() OVER (PARTITION BY {start}, {end}[, keys] ORDER BY ...)",
                code=ErrorCode.RANK,
            )
        )
    raise_all(errors)
    return tuple(keys)


def _order(
    ctx: BindContext, rank: ast.RowNumber, relation: Relation, tables: tuple[str, ...]
) -> tuple[P.RankOrder, ...]:
    out: list[P.RankOrder] = []
    errors: list[WqlError] = []
    for item in rank.order_by:
        pe = collect(errors, ctx.parse, item.expr)
        if pe is None:
            continue
        bound = collect(
            errors, bind_scalar, pe, relation, clause="ROW_NUMBER's ORDER BY", table_names=tables
        )
        if bound is not None:
            out.append(P.RankOrder(bound, item.descending, item.span))
    raise_all(errors)
    return tuple(out)


def _inner(ctx: BindContext, q: ast.RankQuery, windowed: Windowed) -> tuple[P.OutputColumn, ...]:
    """The ranked relation: the subquery's list (QUALIFY: every input column, then the rank),
    as expressions over the input relation and the rank column."""
    rank_col = P.Column(P.RANK_COLUMN, T.BIGINT)
    relation = Relation(windowed.relation.description, windowed.columns + (rank_col,))
    rank_name = q.rank_alias.name if q.rank_alias is not None else P.RANK_COLUMN
    rank_item = P.OutputColumn(
        rank_name, P.Expr(P.RANK_COLUMN, T.BIGINT, (P.RANK_COLUMN,)), T.BIGINT, q.rank.span
    )
    entries = q.inner if q.form is ast.RankForm.SUBQUERY else (ast.Star(span=q.span),)
    out = _list(ctx, entries, relation, windowed.columns, windowed.tables, rank_item, "subquery")
    if q.form is ast.RankForm.QUALIFY:
        out = (*out, rank_item)
    return out


def _outer(
    ctx: BindContext, q: ast.RankQuery, ranked: Relation, tables: tuple[str, ...]
) -> tuple[P.OutputColumn, ...]:
    """The outer list over the ranked relation (QUALIFY's ``*`` leaves the rank out)."""
    stars = ranked.columns
    rank_item = None
    if q.form is ast.RankForm.QUALIFY:
        stars = tuple(c for c in ranked.columns if c.name != ranked.columns[-1].name)
        last = ranked.columns[-1]
        rank_item = P.OutputColumn(
            last.name, P.Expr(quote_name(last.name), T.BIGINT, (last.name,)), T.BIGINT
        )
    return _list(ctx, q.select, ranked, stars, tables, rank_item, "SELECT")


def _list(
    ctx: BindContext,
    entries: tuple[ast.SelectItem | ast.Star | ast.RankColumn, ...],
    relation: Relation,
    stars: tuple[P.Column, ...],
    tables: tuple[str, ...],
    rank_item: P.OutputColumn | None,
    clause: str,
) -> tuple[P.OutputColumn, ...]:
    """A SELECT list of row-wise expressions over ``relation`` (``*``: ``stars``)."""
    out: list[P.OutputColumn] = []
    errors: list[WqlError] = []
    for i, item in enumerate(entries):
        if isinstance(item, ast.RankColumn):
            assert rank_item is not None
            out.append(rank_item)
            continue
        if isinstance(item, ast.Star):
            if item.table is not None and item.table.name.lower() not in {
                t.lower() for t in tables
            }:
                errors.append(
                    ctx.error(
                        f"unknown table {item.table.name!r}",
                        item.table.span,
                        expected=list(tables),
                        code=ErrorCode.UNKNOWN_NAME,
                    )
                )
                continue
            out += [
                P.OutputColumn(
                    c.name, P.Expr(quote_name(c.name), c.type, (c.name,)), c.type, item.span
                )
                for c in stars
            ]
            continue
        pe = collect(errors, ctx.parse, item.expr)
        if pe is None:
            continue
        bound = collect(errors, bind_scalar, pe, relation, clause=clause, table_names=tables)
        if bound is None:
            continue
        if item.alias is not None:
            name = item.alias.name
        elif isinstance(pe.pristine, exp.Column) and bound.columns:
            name = bound.columns[0]
        else:
            name = f"_c{i}"
        out.append(P.OutputColumn(name, bound, bound.type, item.span))
    names = [c.name.lower() for c in out]
    for c in out:
        if names.count(c.name.lower()) > 1:
            errors.append(
                ctx.error(
                    f"output column {c.name!r} appears twice",
                    c.span,
                    hint="give one of them an alias with AS",
                    code=ErrorCode.DUPLICATE_NAME,
                )
            )
            break
    raise_all(errors)
    return tuple(out)


def _bound(
    ctx: BindContext, q: ast.RankQuery, ranked: Relation, rank: str, tables: tuple[str, ...]
) -> tuple[int, P.Expr | None]:
    """The rank bound N and the condition on the ranked rows (None: the bound alone)."""
    if q.rank_op is not None:
        return _inline_bound(ctx, q), None
    pe = ctx.parse(q.condition)
    condition = ctx.boolean(
        q.condition, ranked, tables, "WHERE" if q.form is ast.RankForm.SUBQUERY else "QUALIFY"
    )
    tree = cast(exp.Expression, pe.pristine)
    limits = [n for c in conjuncts(tree) if (n := _upper(c, rank)) is not None]
    if not limits:
        raise ctx.error(
            f"a window Top-N keeps the first N rows of each window: the condition needs "
            f"{rank} <= N (or {rank} < N, {rank} = 1)",
            q.condition.span,
            hint=f"e.g. WHERE {rank} <= 3, or {rank} = 1 to keep one row",
            code=ErrorCode.RANK,
        )
    limit = min(limits)
    if limit < 1:
        raise ctx.error(
            f"{rank} <= {limit} keeps no row (ranks start at 1)",
            q.condition.span,
            code=ErrorCode.RANK,
        )
    return limit, condition


def _inline_bound(ctx: BindContext, q: ast.RankQuery) -> int:
    """``QUALIFY ROW_NUMBER() OVER (...) <op> N``: N, a whole number."""
    text = q.condition.text.strip()
    if not text.isdigit():
        raise ctx.error(
            "QUALIFY ROW_NUMBER() OVER (...) compares the rank with a whole number; to add "
            "conditions, name the rank in the SELECT list and QUALIFY on the name",
            q.condition.span,
            hint="SELECT *, ROW_NUMBER() OVER (...) AS rn FROM ... QUALIFY rn <= 3 AND ...",
            code=ErrorCode.RANK,
        )
    n = int(text)
    limit = {"<=": n, "<": n - 1, "=": n, "==": n}.get(q.rank_op or "")
    if limit is None or limit < 1 or (q.rank_op in ("=", "==") and n != 1):
        raise ctx.error(
            f"QUALIFY ROW_NUMBER() OVER (...) {q.rank_op} {n}: a window Top-N keeps ranks "
            "1 to N (<= N, < N + 1, or = 1)",
            q.condition.span,
            code=ErrorCode.RANK,
        )
    return limit


def _upper(node: exp.Expression, rank: str) -> int | None:
    """The bound ``node`` puts on the rank from above (``rn <= 3``: 3), else None."""
    if not isinstance(node, (exp.LTE, exp.LT, exp.EQ, exp.GTE, exp.GT)):
        return None
    left, right = cast(exp.Expression, node.left), cast(exp.Expression, node.right)
    flipped: dict[type, type] = {
        exp.GTE: exp.LTE,
        exp.GT: exp.LT,
        exp.LTE: exp.GTE,
        exp.LT: exp.GT,
        exp.EQ: exp.EQ,
    }
    kind: type = type(node)
    if _is_rank(right, rank) and not _is_rank(left, rank):
        left, right, kind = right, left, flipped[kind]
    if not _is_rank(left, rank) or not (isinstance(right, exp.Literal) and right.is_int):
        return None
    n = int(right.this)
    if kind in (exp.LTE, exp.EQ):
        return n
    if kind is exp.LT:
        return n - 1
    return None


def _is_rank(node: exp.Expression, rank: str) -> bool:
    return isinstance(node, exp.Column) and node.name.lower() == rank.lower()


def _keep(q: ast.RankQuery, limit: int, windowed: Windowed) -> P.RankKeep:
    """Deduplication (Flink's rule): one ``ROW_NUMBER()`` row, ordered by the time
    attribute alone. ``RANK()`` and ``DENSE_RANK()`` keep ties: never a deduplication."""
    if q.rank.function is not ast.RankFunction.ROW_NUMBER:
        return P.RankKeep(q.rank.function.value)
    order = q.rank.order_by
    if limit != 1 or len(order) != 1 or windowed.time is None:
        return P.RankKeep.TOP
    text = order[0].expr.text.strip().strip("`").lower()
    if text != windowed.time.lower():
        return P.RankKeep.TOP
    return P.RankKeep.LAST if order[0].descending else P.RankKeep.FIRST
