"""Binding sources: ``CREATE SOURCE`` statements, a query's FROM, caller-passed schemas.

A declared source is registered even when one of its columns or options
has an error, so that the queries reading it do not also report it as
unknown; a broken WATERMARK clause is remembered
(:attr:`BindContext.broken_event_time`) so that what needs event time
echoes it instead of reporting it again.
"""

from __future__ import annotations

from collections.abc import Mapping

from wql.compiler import plan as P
from wql.compiler import types as T
from wql.compiler.binder.context import (
    BindContext,
    BoundSource,
    SchemaLike,
    did_you_mean,
    lookup,
)
from wql.compiler.expressions import Relation
from wql.errors import ErrorCode, Span, WqlError, WqlSemanticError
from wql.grammar import ast


def normalize_schema(name: str, schema: SchemaLike) -> tuple[P.Column, ...]:
    """A caller-passed schema as plan columns (see :data:`SchemaLike`)."""
    struct = getattr(schema, "schema", schema)
    if hasattr(struct, "fields") and hasattr(struct, "fieldNames"):
        return tuple(P.Column(n, t) for n, t in T.schema_from_spark(struct))
    items = schema.items() if isinstance(schema, Mapping) else schema
    cols = []
    for col_name, typ in items:
        wql_type = typ if isinstance(typ, T.WqlType) else T.parse_type_name(str(typ))
        cols.append(P.Column(str(col_name), wql_type))
    if not cols:
        raise WqlSemanticError(
            f"schema passed for source {name!r} has no columns", code=ErrorCode.SCHEMA
        )
    return tuple(cols)


def bind_source(ctx: BindContext, st: ast.CreateSource) -> None:
    name = st.name.name
    if name.lower() in ctx.sources:
        raise ctx.error(
            f"source {name!r} is declared twice", st.name.span, code=ErrorCode.DUPLICATE_NAME
        )
    columns: list[P.Column] = []
    seen: set[str] = set()
    for cd in st.columns:
        typ = ctx.attempt(bind_type, cd.type)
        if cd.name.name.lower() in seen:
            ctx.errors.append(
                ctx.error(
                    f"duplicate column {cd.name.name!r}",
                    cd.name.span,
                    code=ErrorCode.DUPLICATE_NAME,
                )
            )
            continue
        seen.add(cd.name.name.lower())
        if typ is not None:
            columns.append(P.Column(cd.name.name, typ, cd.span))
    options: list[tuple[str, str]] = []
    for opt in st.options:
        key = opt.key.lower()
        if any(k == key for k, _ in options):
            ctx.errors.append(
                ctx.error(
                    f"option {opt.key!r} is given twice", opt.span, code=ErrorCode.DUPLICATE_NAME
                )
            )
            continue
        options.append((key, opt.value))
    if "table" in dict(options) and "path" in dict(options):
        # a source is read from one place: a catalog table or files
        opt_span = next(o.span for o in st.options if o.key.lower() == "table")
        ctx.errors.append(
            ctx.error(
                f"source {name!r} names both a table and a path",
                opt_span,
                hint="keep table = '...' (a table of Spark's catalog) or path = '...' (files)",
                code=ErrorCode.SEMANTIC,
            )
        )
    relation = tuple(columns)
    event_time = None
    if st.watermark is not None:
        event_time = ctx.attempt(bind_watermark, ctx, st.watermark, name, relation)
        if event_time is None:
            ctx.broken_event_time.add(name.lower())
    for key in ("arrival_order", "processing_time"):
        value = dict(options).get(key)
        if value is not None:
            opt_span = next(o.span for o in st.options if o.key.lower() == key)
            ok = ctx.attempt(_option_column, ctx, key, value, name, relation, opt_span)
            if not ok:
                # reported; dropped so the source stays usable for the queries' checks
                options = [(k, v) for k, v in options if k != key]
    # Registered even when a column had an error, so that queries reading
    # the source do not also report it as unknown.
    decl = P.SourceDecl(name, relation, tuple(options), event_time, True, st.span)
    ctx.sources[name.lower()] = BoundSource(decl)


def bind_type(tn: ast.TypeName) -> T.WqlType:
    text = tn.name
    if tn.args:
        text += "(" + ", ".join(str(getattr(a, "value", a)) for a in tn.args) + ")"
    return T.parse_type_name(text, tn.span)


def _option_column(
    ctx: BindContext,
    key: str,
    value: str,
    source: str,
    columns: tuple[P.Column, ...],
    span: Span | None,
) -> bool:
    col = lookup(columns, value)
    if col is None:
        raise ctx.error(
            f"{key} names unknown column {value!r} of source {source!r}",
            span,
            expected=[c.name for c in columns],
            code=ErrorCode.UNKNOWN_NAME,
        )
    if key == "processing_time" and col.type not in (T.TIMESTAMP, T.BIGINT, T.INT):
        raise ctx.error(
            f"processing_time column {col.name!r} must be TIMESTAMP or BIGINT milliseconds, "
            f"not {col.type}",
            span,
            code=ErrorCode.WRONG_TYPE,
        )
    return True


def bind_watermark(
    ctx: BindContext, wm: ast.Watermark, source: str, columns: tuple[P.Column, ...]
) -> P.EventTime:
    """A WATERMARK FOR clause (of CREATE SOURCE or after FROM) as the source's event time."""
    if wm.expr_column.name.lower() != wm.column.name.lower():
        raise ctx.error(
            f"WATERMARK FOR {wm.column.name} must be defined on the same column "
            f"({wm.column.name} - <interval>), not {wm.expr_column.name!r}",
            wm.expr_column.span,
            code=ErrorCode.NO_EVENT_TIME,
        )
    col = lookup(columns, wm.column.name)
    if col is None:
        raise ctx.error(
            f"WATERMARK FOR names unknown column {wm.column.name!r} of source {source!r}",
            wm.column.span,
            expected=[c.name for c in columns],
            hint=did_you_mean(wm.column.name, [c.name for c in columns]),
            code=ErrorCode.UNKNOWN_NAME,
        )
    if col.type != T.TIMESTAMP:
        raise ctx.error(
            f"WATERMARK FOR needs a TIMESTAMP column; {col.name!r} is {col.type}",
            wm.column.span,
            code=ErrorCode.WRONG_TYPE,
        )
    delay = 0
    if wm.delay is not None:
        delay = wm.delay.millis
        if delay < 0:
            raise ctx.error(
                "the watermark delay must be >= 0 (write ts - INTERVAL 'n' UNIT)",
                wm.delay.span,
                code=ErrorCode.OUT_OF_RANGE,
            )
    if wm.idle is None:
        return P.EventTime(col.name, delay, wm.span)
    idle = ctx.positive(wm.idle.interval, "IDLE AFTER")
    return P.EventTime(col.name, delay, wm.span, idle_ms=idle, idle_span=wm.idle.span)


def resolve_source(ctx: BindContext, ref: ast.TableRef) -> P.SourceDecl:
    """The source a FROM names: declared, else from the caller's schemas, else an error."""
    name = ref.name.name
    known = ctx.sources.get(name.lower())
    if known is not None:
        known.used = True
        return known.decl
    if name.lower() in ctx.schemas:
        given_name, schema = ctx.schemas[name.lower()]
        try:
            columns = normalize_schema(given_name, schema)
        except WqlError as e:
            if e.span is None:
                e.span = ref.name.span
            raise
        decl = P.SourceDecl(given_name, columns, (), None, False, ref.name.span)
        ctx.sources[name.lower()] = BoundSource(decl, used=True)
        return decl
    candidates = [s.decl.name for s in ctx.sources.values()] + [n for n, _ in ctx.schemas.values()]
    views = [v.name for v in ctx.views.values()] + [v.query.name for v in ctx.external.values()]
    raise ctx.error(
        f"unknown source {name!r}",
        ref.name.span,
        expected=candidates + views,
        hint=did_you_mean(name, candidates + views)
        or "declare it with CREATE SOURCE, pass a DataFrame of that name, or read a view "
        "defined before this query (in this file or a file given before it)",
        code=ErrorCode.UNKNOWN_NAME,
    )


def bind_source_ref(
    ctx: BindContext, ref: ast.TableRef
) -> tuple[P.SourceRef, Relation, tuple[str, str]] | None:
    """A query's source read by ``ref``: its reference (event time from ``ref``'s WATERMARK
    when it has one, else the declaration's), the relation its clauses read, and the names
    they may qualify columns with; None once the errors are recorded."""
    decl = ctx.attempt(resolve_source, ctx, ref)
    if decl is None:
        return None
    event_time = decl.event_time
    if ref.watermark is not None:
        event_time = ctx.attempt(bind_watermark, ctx, ref.watermark, decl.name, decl.columns)
        if event_time is None:
            return None
    source = P.SourceRef(
        decl.name,
        decl.columns,
        event_time,
        decl.option("processing_time"),
        decl.option("arrival_order"),
        ref.span,
    )
    return source, Relation(f"source {decl.name!r}", decl.columns), (decl.name, ref.name.name)
