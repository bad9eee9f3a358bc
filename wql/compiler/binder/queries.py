"""Binding a script and its queries: names, then each clause of each query.

A query with an error is still checked clause by clause (each clause's
mistakes are independent); only its plan node is not built. Unnamed
queries are ``query_1``, ``query_2``, ... in file order; query names and
``LATE DATA TO`` names are output folders and must be unique.
"""

from __future__ import annotations

from wql.compiler import plan as P
from wql.compiler.binder.context import BindContext, Echo
from wql.compiler.binder.emit import bind_emit, check_changelog
from wql.compiler.binder.joins import bind_join
from wql.compiler.binder.lateness import bind_late_data, bind_lateness
from wql.compiler.binder.over import bind_over
from wql.compiler.binder.ranks import bind_rank
from wql.compiler.binder.select import bind_having, bind_keys, bind_select
from wql.compiler.binder.sources import bind_source, bind_source_ref
from wql.compiler.binder.triggers import bind_evictor_clause, bind_trigger_clause, default_trigger
from wql.compiler.binder.views import (
    bind_view_source,
    check_reader_clock,
    reads_view,
    view_names,
)
from wql.compiler.binder.windows import bind_window
from wql.compiler.expressions import AggregateRegistry, Relation
from wql.errors import ErrorCode, Span, WqlSemanticError
from wql.grammar import ast


def bind_script(ctx: BindContext, script: ast.Script) -> P.Program | None:
    """The program of ``script``, or None when any error was recorded in ``ctx``."""
    ctx.statement_spans = sorted(
        (st.span.start, st.span.end) for st in script.statements if st.span is not None
    )
    for st in script.statements:
        if isinstance(st, ast.CreateSource):
            ctx.attempt(bind_source, ctx, st)
    queries: list[P.Stage] = []
    names: dict[str, Span | None] = {}
    unnamed = 0
    ctx.later_views = view_names(script)
    for st in script.statements:
        if isinstance(st, ast.CreateSource):
            continue
        clash = False
        if isinstance(st, ast.CreateView):
            name, name_span, q = st.name.name, st.name.span, st.query
            clash = ctx.attempt(_not_a_source, ctx, name, name_span) is None
        else:
            unnamed += 1
            name, name_span, q = f"query_{unnamed}", st.span, st
        _claim_name(ctx, names, name, name_span, "query")
        bound = _bind_any(ctx, q, name)
        if isinstance(st, ast.CreateView):
            ctx.later_views.pop(name.lower(), None)
            if bound is None or clash:
                ctx.failed_views.add(name.lower())
            else:
                ctx.views[name.lower()] = bound
        if bound is not None:
            if bound.late_output is not None:
                assert isinstance(q, ast.Query | ast.OverQuery) and q.late_data is not None
                _claim_name(ctx, names, bound.late_output, q.late_data.name.span, "late output")
            queries.append(bound)
    if not queries and not ctx.errors:
        where = script.span or Span.point(ctx.text, 0)
        # a query that did not parse is reported already
        kind = Echo if ctx.unparsed else WqlSemanticError
        ctx.errors.append(
            kind("a WQL file needs at least one query", where, code=ErrorCode.NO_QUERY)
        )
    used = [s.decl for s in ctx.sources.values() if s.decl.declared or s.used]
    if ctx.errors:
        return None
    return P.Program(tuple(used), tuple(queries), script.span, tuple(ctx.external_used.values()))


def _bind_any(ctx: BindContext, q: ast.AnyQuery, name: str) -> P.Stage | None:
    """A statement's query, of whichever kind."""
    if isinstance(q, ast.RankQuery):
        return bind_rank(ctx, q, name)
    if isinstance(q, ast.JoinQuery):
        return bind_join(ctx, q, name)
    if isinstance(q, ast.OverQuery):
        return bind_over(ctx, q, name)
    return bind_query(ctx, q, name)


def _not_a_source(ctx: BindContext, name: str, span: Span | None) -> bool:
    """A view may not take a declared source's name (``FROM name`` would mean both).

    Its readers then echo the clash (the view is left out, as a failed one).
    """
    if name.lower() in ctx.sources:
        raise ctx.error(
            f"view {name!r} has the name of source {ctx.sources[name.lower()].decl.name!r}",
            span,
            hint="FROM reads a source or a view by name: give the view another one",
            code=ErrorCode.DUPLICATE_NAME,
        )
    return True


def _claim_name(
    ctx: BindContext, names: dict[str, Span | None], name: str, span: Span | None, what: str
) -> None:
    low = name.lower()
    if low in names:
        ctx.errors.append(
            ctx.error(
                f"{what} name {name!r} is already used in this file",
                span,
                hint="query names and LATE DATA TO names are output folders and must be unique",
                code=ErrorCode.DUPLICATE_NAME,
            )
        )
    else:
        names[low] = span


def bind_query(ctx: BindContext, q: ast.Query, name: str) -> P.Query | None:
    before = len(ctx.errors)
    if reads_view(ctx, q.source, name):
        source = ctx.attempt(bind_view_source, ctx, q.source, name)
        if source is None:
            return None
        relation = Relation(f"view {source.name!r}", source.columns)
        return _bind_clauses(
            ctx, q, name, source, relation, (source.name, q.source.name.name), before
        )
    if q.source.name.name.lower() in ctx.unparsed_sources - set(ctx.sources):
        # its declaration did not parse (reported): the query cannot be checked
        ctx.errors.append(
            Echo(
                f"unknown source {q.source.name.name!r}",
                q.source.name.span,
                code=ErrorCode.UNKNOWN_NAME,
            )
        )
        return None
    bound = bind_source_ref(ctx, q.source)
    if bound is None:
        return None
    source, relation, tables = bound
    return _bind_clauses(ctx, q, name, source, relation, tables, before)


def _bind_clauses(
    ctx: BindContext,
    q: ast.Query,
    name: str,
    source: P.SourceRef,
    relation: Relation,
    tables: tuple[str, ...],
    before: int,
) -> P.Query | None:
    """Every clause of ``q`` over its input ``source`` (a source or a view)."""
    where = None
    if q.where is not None:
        where = ctx.attempt(ctx.boolean, q.where, relation, tables, "WHERE")

    keys = ctx.attempt(bind_keys, ctx, q.group_by.keys, relation, tables)
    window = ctx.attempt(bind_window, ctx, q.group_by.window, source, relation, tables)

    lateness = 0
    if q.lateness is not None:
        lateness = ctx.attempt(bind_lateness, ctx, q.lateness, window) or 0

    trigger = None
    if q.trigger is not None:
        # Checked even when the window had an error (window None): the
        # trigger's own mistakes are independent of it.
        trigger = ctx.attempt(bind_trigger_clause, ctx, q.trigger, window, source, relation, tables)
    elif window is not None and isinstance(window, P.GlobalWindow):
        ctx.errors.append(
            ctx.error(
                "GLOBAL() never fires on its own: add a TRIGGER clause",
                window.span,
                hint="e.g. TRIGGER COUNT(100) or TRIGGER WATERMARK (fires at end of input)",
                code=ErrorCode.NOT_FOR_WINDOW,
            )
        )

    evictor = None
    if q.evict is not None:
        evictor = ctx.attempt(bind_evictor_clause, ctx, q.evict, window, source, relation, tables)

    late_output = None
    if q.late_data is not None:
        late_output = ctx.attempt(bind_late_data, ctx, q.late_data, window, source)

    accumulation = changelog = None
    if q.emit is not None:
        effective_trigger = trigger or (default_trigger(window) if window is not None else None)
        if q.trigger is not None and trigger is None:
            effective_trigger = None  # a broken trigger is reported already
        accumulation, changelog = ctx.attempt(
            bind_emit, ctx, q.emit, window, effective_trigger
        ) or (None, None)

    registry = AggregateRegistry()
    output = ctx.attempt(bind_select, ctx, q, keys, window, relation, tables, registry)
    having = None
    if q.having is not None and keys is not None and window is not None:
        having = ctx.attempt(
            bind_having, ctx, q.having, keys, window, relation, tables, registry, output or ()
        )

    if window is not None:
        ctx.attempt(check_reader_clock, ctx, source, window, trigger)
    if changelog is not None and keys is not None and window is not None and output:
        ctx.attempt(check_changelog, ctx, changelog, q, keys, window, output, having)

    if len(ctx.errors) > before or keys is None or window is None or output is None:
        return None
    effective = trigger or default_trigger(window)
    assert effective is not None  # GLOBAL() without trigger was reported above
    effective_evictor = evictor
    if isinstance(window, P.CountWindow) and window.slide is not None and evictor is None:
        effective_evictor = P.CountEvictor(window.size, False, window.span)
    aggregates = tuple(
        P.Aggregate(kind, arg, f"__agg_{i}", typ, span)
        for i, (kind, arg, typ, span) in enumerate(registry.entries)
    )
    return ctx.attempt(
        P.Query,
        name=name,
        source=source,
        filter=where,
        keys=keys,
        window=window,
        trigger=trigger,
        effective_trigger=effective,
        evictor=evictor,
        allowed_lateness_ms=lateness,
        late_output=late_output,
        aggregates=aggregates,
        output=output,
        having=having,
        effective_evictor=effective_evictor,
        span=q.span,
        lateness_span=q.lateness.span if q.lateness is not None else None,
        late_output_span=q.late_data.span if q.late_data is not None else None,
        accumulation=accumulation,
        changelog=changelog,
    )
