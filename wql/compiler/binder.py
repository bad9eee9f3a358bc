"""AST -> typed plan: names, types, defaults and every validation rule.

``bind`` walks a parsed script (``wql.grammar.ast.Script``) and builds a
:class:`wql.compiler.plan.Program`. It reports *every* independent mistake
of a file, each as a positioned :class:`~wql.errors.WqlError` pointing at the
clause or token responsible, and raises them together (:class:`WqlErrors`,
or the single error when there is one). A query with an error is still
checked clause by clause; only its plan node is not built.

Defaults filled in here (the transformer leaves absent clauses ``None``):
trigger per window kind (event time: WATERMARK; processing time: PROCESSING
TIME; COUNT_WINDOW(n): PURGING COUNT(n); COUNT_WINDOW(n, s): COUNT(s) with
EVICT COUNT(n)), allowed lateness 0, EVERY's domain = the window's, EVICT
position BEFORE, query names ``query_1``, ``query_2``, ... for unnamed
queries in file order.
"""

from __future__ import annotations

import bisect
import dataclasses
import math
import re
import sys
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from decimal import Decimal
from typing import Any, TypeVar

from sqlglot import exp

from wql.compiler import plan as P
from wql.compiler import types as T
from wql.compiler.explain import trigger_text
from wql.compiler.expressions import (
    AggregateRegistry,
    ParsedExpr,
    PostAggContext,
    Relation,
    bind_post_aggregation,
    bind_scalar,
    interval_to_millis_sql,
    parse_expr,
    quote_name,
)
from wql.errors import Span, WqlError, WqlErrors, WqlSemanticError
from wql.grammar import ast

R = TypeVar("R")

MAX_WINDOWS_PER_ROW = 100_000
"""The most windows one row may belong to (HOP: size / slide, CUMULATE: size / step)."""

SchemaLike = Any
"""A caller-passed schema: a Spark StructType, a DataFrame (its ``.schema``),
a mapping ``name -> type`` or a sequence of ``(name, type)`` pairs, where a
type is a :class:`WqlType` or a type name (``'BIGINT'``, ``'DECIMAL(10,2)'``)."""


def bind(
    script: ast.Script,
    source_text: str,
    filename: str | None = None,
    *,
    schemas: Mapping[str, SchemaLike] | None = None,
    engine: str = "auto",
    streaming: bool = False,
    unparsed: Iterable[str] = (),
) -> P.Program:
    """Bind a parsed script and choose each query's engine.

    ``schemas`` gives sources by name for embedded use (DataFrames passed by
    the caller); a declared source wins over a passed schema of the same
    name (the runner checks that the DataFrame matches the declaration).
    ``engine`` is ``'auto'``, ``'native'`` or ``'operator'``; ``streaming``
    plans every query for a streaming source (see
    :func:`wql.compiler.planner.choose_engines`).

    ``unparsed`` is the text of the statements of the file that did not
    parse (``wql check`` binds the rest): their syntax errors are reported
    already, so what follows from them is not reported again -- a query
    reading a source whose declaration did not parse, a file left without
    a query. Such errors are :class:`Echo` errors: they fail the binding but
    are dropped from every report.
    """
    from wql.compiler.planner import choose_engines

    binder = _Binder(source_text, schemas or {}, tuple(unparsed))
    program = binder.bind_script(script)
    binder.raise_errors(filename)
    assert program is not None
    try:
        return choose_engines(program, engine, streaming=streaming)
    except WqlError as e:
        raise e.with_source(source_text, filename) from None


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
        raise WqlSemanticError(f"schema passed for source {name!r} has no columns")
    return tuple(cols)


# ---------------------------------------------------------------------------


class Echo(WqlSemanticError):
    """An error that only follows from a mistake reported elsewhere.

    It stops the binding (no plan is built) but is never shown: one mistake,
    one error. :func:`reported` drops echoes from a list of errors.
    """


def reported(errors: Iterable[WqlError]) -> list[WqlError]:
    """``errors`` without :class:`Echo` errors (unpacking :class:`WqlErrors`)."""
    out: list[WqlError] = []
    for e in errors:
        if isinstance(e, WqlErrors):
            out += reported(e.errors)
        elif not isinstance(e, Echo):
            out.append(e)
    return out


# The name a CREATE SOURCE statement declares, read from its text (for a
# statement that did not parse).
_DECLARED = re.compile(
    r"^(?:\s+|--[^\n]*|/\*.*?\*/)*CREATE\s+SOURCE\s+(`(?:[^`]|``)+`|\w+)",
    re.IGNORECASE | re.DOTALL,
)


@dataclass
class _Source:
    decl: P.SourceDecl
    used: bool = False


class _Binder:
    def __init__(
        self, text: str, schemas: Mapping[str, SchemaLike], unparsed: tuple[str, ...] = ()
    ) -> None:
        self.text = text
        self.schemas = {k.lower(): (k, v) for k, v in schemas.items()}
        self.errors: list[WqlError] = []
        self.sources: dict[str, _Source] = {}
        self.unparsed = unparsed
        # sources declared by statements that did not parse
        self.unparsed_sources = {
            m.group(1)[1:-1].replace("``", "`").lower()
            if m.group(1).startswith("`")
            else m.group(1).lower()
            for piece in unparsed
            if (m := _DECLARED.match(piece))
        }
        # sources whose WATERMARK clause has an error (reported with the source)
        self.broken_event_time: set[str] = set()
        # (start, end) of every statement, to tell which statement an error is in
        self.statement_spans: list[tuple[int, int]] = []

    # -- error collection -------------------------------------------------

    def attempt(self, fn: Callable[..., R], *args: Any, **kw: Any) -> R | None:
        """Run one independent check; record its error(s) and return None on failure."""
        try:
            return fn(*args, **kw)
        except WqlErrors as e:
            self.errors.extend(e.errors)
        except WqlError as e:
            self.errors.append(e)
        return None

    def error(self, message: str, span: Span | None, **kw: Any) -> WqlSemanticError:
        return WqlSemanticError(message, span, **kw)

    def raise_errors(self, filename: str | None) -> None:
        if not self.errors:
            return
        # One mistake, one error: the same message twice in one statement (a
        # column read twice where it may not be, an error found again through
        # a shared helper) is reported at its first place only.
        unique: dict[tuple, WqlError] = {}
        for e in sorted(self.errors, key=lambda e: e.span.start if e.span else -1):
            unique.setdefault((e.message, self._statement_of(e)), e)
        # Echoes only stop the binding; shown only if nothing else is (never,
        # when the mistake they follow from was found by this binder).
        errors = reported(unique.values()) or list(unique.values())
        errors = [e.with_source(self.text, filename) for e in errors]
        if len(errors) == 1:
            raise errors[0]
        raise WqlErrors(errors).with_source(self.text, filename)

    # -- script -----------------------------------------------------------

    def _statement_of(self, e: WqlError) -> int | None:
        if e.span is None:
            return None
        i = bisect.bisect_right(self.statement_spans, (e.span.start, math.inf)) - 1
        if i >= 0 and self.statement_spans[i][0] <= e.span.start <= self.statement_spans[i][1]:
            return i
        return None

    def bind_script(self, script: ast.Script) -> P.Program | None:
        self.statement_spans = sorted(
            (st.span.start, st.span.end) for st in script.statements if st.span is not None
        )
        for st in script.statements:
            if isinstance(st, ast.CreateSource):
                self.attempt(self.bind_source, st)
        queries: list[P.Query] = []
        names: dict[str, Span | None] = {}
        unnamed = 0
        for st in script.statements:
            if isinstance(st, ast.CreateSource):
                continue
            if isinstance(st, ast.CreateView):
                name, name_span, q = st.name.name, st.name.span, st.query
            else:
                unnamed += 1
                name, name_span, q = f"query_{unnamed}", st.span, st
            self._claim_name(names, name, name_span, "query")
            bound = self.bind_query(q, name)
            if bound is not None:
                if bound.late_output is not None:
                    assert q.late_data is not None
                    self._claim_name(names, bound.late_output, q.late_data.name.span, "late output")
                queries.append(bound)
        if not queries and not self.errors:
            where = script.span or Span.point(self.text, 0)
            # a query that did not parse is reported already
            kind = Echo if self.unparsed else WqlSemanticError
            self.errors.append(kind("a WQL file needs at least one query", where))
        used = [s.decl for s in self.sources.values() if s.decl.declared or s.used]
        if self.errors:
            return None
        return P.Program(tuple(used), tuple(queries), script.span)

    def _claim_name(
        self, names: dict[str, Span | None], name: str, span: Span | None, what: str
    ) -> None:
        low = name.lower()
        if low in names:
            self.errors.append(
                self.error(
                    f"{what} name {name!r} is already used in this file",
                    span,
                    hint="query names and LATE DATA TO names are output folders and must be unique",
                )
            )
        else:
            names[low] = span

    # -- sources ----------------------------------------------------------

    def bind_source(self, st: ast.CreateSource) -> None:
        name = st.name.name
        if name.lower() in self.sources:
            raise self.error(f"source {name!r} is declared twice", st.name.span)
        columns: list[P.Column] = []
        seen: set[str] = set()
        for cd in st.columns:
            typ = self.attempt(self._type, cd.type)
            if cd.name.name.lower() in seen:
                self.errors.append(self.error(f"duplicate column {cd.name.name!r}", cd.name.span))
                continue
            seen.add(cd.name.name.lower())
            if typ is not None:
                columns.append(P.Column(cd.name.name, typ, cd.span))
        options: list[tuple[str, str]] = []
        for opt in st.options:
            key = opt.key.lower()
            if any(k == key for k, _ in options):
                self.errors.append(self.error(f"option {opt.key!r} is given twice", opt.span))
                continue
            options.append((key, opt.value))
        relation = tuple(columns)
        event_time = None
        if st.watermark is not None:
            event_time = self.attempt(self._watermark, st.watermark, name, relation)
            if event_time is None:
                self.broken_event_time.add(name.lower())
        for key in ("arrival_order", "processing_time"):
            value = dict(options).get(key)
            if value is not None:
                opt_span = next(o.span for o in st.options if o.key.lower() == key)
                ok = self.attempt(self._option_column, key, value, name, relation, opt_span)
                if not ok:
                    # reported; dropped so the source stays usable for the queries' checks
                    options = [(k, v) for k, v in options if k != key]
        # Registered even when a column had an error, so that queries reading
        # the source do not also report it as unknown.
        decl = P.SourceDecl(name, relation, tuple(options), event_time, True, st.span)
        self.sources[name.lower()] = _Source(decl)

    def _type(self, tn: ast.TypeName) -> T.WqlType:
        text = tn.name
        if tn.args:
            text += "(" + ", ".join(str(getattr(a, "value", a)) for a in tn.args) + ")"
        return T.parse_type_name(text, tn.span)

    def _option_column(
        self, key: str, value: str, source: str, columns: tuple[P.Column, ...], span: Span | None
    ) -> bool:
        col = _lookup(columns, value)
        if col is None:
            raise self.error(
                f"{key} names unknown column {value!r} of source {source!r}",
                span,
                expected=[c.name for c in columns],
            )
        if key == "processing_time" and col.type not in (T.TIMESTAMP, T.BIGINT, T.INT):
            raise self.error(
                f"processing_time column {col.name!r} must be TIMESTAMP or BIGINT milliseconds, "
                f"not {col.type}",
                span,
            )
        return True

    def _watermark(
        self, wm: ast.Watermark, source: str, columns: tuple[P.Column, ...]
    ) -> P.EventTime:
        if wm.expr_column.name.lower() != wm.column.name.lower():
            raise self.error(
                f"WATERMARK FOR {wm.column.name} must be defined on the same column "
                f"({wm.column.name} - <interval>), not {wm.expr_column.name!r}",
                wm.expr_column.span,
            )
        col = _lookup(columns, wm.column.name)
        if col is None:
            raise self.error(
                f"WATERMARK FOR names unknown column {wm.column.name!r} of source {source!r}",
                wm.column.span,
                expected=[c.name for c in columns],
                hint=_did_you_mean(wm.column.name, [c.name for c in columns]),
            )
        if col.type != T.TIMESTAMP:
            raise self.error(
                f"WATERMARK FOR needs a TIMESTAMP column; {col.name!r} is {col.type}",
                wm.column.span,
            )
        delay = 0
        if wm.delay is not None:
            delay = wm.delay.millis
            if delay < 0:
                raise self.error(
                    "the watermark delay must be >= 0 (write ts - INTERVAL 'n' UNIT)", wm.delay.span
                )
        return P.EventTime(col.name, delay, wm.span)

    def resolve_source(self, ref: ast.TableRef) -> P.SourceDecl:
        name = ref.name.name
        known = self.sources.get(name.lower())
        if known is not None:
            known.used = True
            return known.decl
        if name.lower() in self.schemas:
            given_name, schema = self.schemas[name.lower()]
            try:
                columns = normalize_schema(given_name, schema)
            except WqlError as e:
                if e.span is None:
                    e.span = ref.name.span
                raise
            decl = P.SourceDecl(given_name, columns, (), None, False, ref.name.span)
            self.sources[name.lower()] = _Source(decl, used=True)
            return decl
        candidates = [s.decl.name for s in self.sources.values()] + [
            n for n, _ in self.schemas.values()
        ]
        raise self.error(
            f"unknown source {name!r}",
            ref.name.span,
            expected=candidates,
            hint=_did_you_mean(name, candidates)
            or "declare it with CREATE SOURCE or pass a DataFrame of that name",
        )

    # -- queries ----------------------------------------------------------

    def bind_query(self, q: ast.Query, name: str) -> P.Query | None:
        before = len(self.errors)
        if q.source.name.name.lower() in self.unparsed_sources - set(self.sources):
            # its declaration did not parse (reported): the query cannot be checked
            self.errors.append(Echo(f"unknown source {q.source.name.name!r}", q.source.name.span))
            return None
        decl = self.attempt(self.resolve_source, q.source)
        if decl is None:
            return None
        relation = Relation(f"source {decl.name!r}", decl.columns)
        tables = (decl.name, q.source.name.name)
        event_time = decl.event_time
        if q.source.watermark is not None:
            event_time = self.attempt(self._watermark, q.source.watermark, decl.name, decl.columns)
            if event_time is None:
                return None
        source = P.SourceRef(
            decl.name,
            decl.columns,
            event_time,
            decl.option("processing_time"),
            decl.option("arrival_order"),
            q.source.span,
        )

        where = None
        if q.where is not None:
            where = self.attempt(self._boolean, q.where, relation, tables, "WHERE")

        keys = self.attempt(self._keys, q.group_by.keys, relation, tables)
        window = self.attempt(self._window, q.group_by.window, source, relation, tables)

        lateness = 0
        if q.lateness is not None:
            lateness = self.attempt(self._lateness, q.lateness, window) or 0

        trigger = None
        if q.trigger is not None:
            # Checked even when the window had an error (window None): the
            # trigger's own mistakes are independent of it.
            trigger = self.attempt(
                self._trigger_clause, q.trigger, window, source, relation, tables
            )
        elif window is not None and isinstance(window, P.GlobalWindow):
            self.errors.append(
                self.error(
                    "GLOBAL() never fires on its own: add a TRIGGER clause",
                    window.span,
                    hint="e.g. TRIGGER COUNT(100) or TRIGGER WATERMARK (fires at end of input)",
                )
            )

        evictor = None
        if q.evict is not None:
            evictor = self.attempt(self._evictor, q.evict, window, source, relation, tables)

        late_output = None
        if q.late_data is not None:
            late_output = self.attempt(self._late_data, q.late_data, window, source)

        registry = AggregateRegistry()
        output = self.attempt(self._select, q, keys, window, source, relation, tables, registry)
        having = None
        if q.having is not None and keys is not None and window is not None:
            having = self.attempt(
                self._having, q.having, keys, window, relation, tables, registry, output or ()
            )

        if len(self.errors) > before or keys is None or window is None or output is None:
            return None
        effective = trigger or _default_trigger(window)
        assert effective is not None  # GLOBAL() without trigger was reported above
        effective_evictor = evictor
        if isinstance(window, P.CountWindow) and window.slide is not None and evictor is None:
            effective_evictor = P.CountEvictor(window.size, False, window.span)
        aggregates = tuple(
            P.Aggregate(kind, arg, f"__agg_{i}", typ, span)
            for i, (kind, arg, typ, span) in enumerate(registry.entries)
        )
        return self.attempt(
            P.Query,
            name,
            source,
            where,
            keys,
            window,
            trigger,
            effective,
            evictor,
            lateness,
            late_output,
            aggregates,
            output,
            having,
            None,
            effective_evictor,
            q.span,
            q.lateness.span if q.lateness is not None else None,
            q.late_data.span if q.late_data is not None else None,
        )

    # -- expressions ------------------------------------------------------

    def parse(self, e: ast.Expr) -> ParsedExpr:
        span = e.span or Span.from_offsets(self.text, 0, len(self.text))
        text = self.text[span.start : span.end] if e.span is not None else e.text
        return parse_expr(text, span, self.text)

    def _boolean(
        self, e: ast.Expr, relation: Relation, tables: Iterable[str], clause: str
    ) -> P.Expr:
        bound = bind_scalar(self.parse(e), relation, clause=clause, table_names=tables)
        if not (bound.type == T.BOOLEAN or bound.type.is_unknown):
            raise self.error(
                f"{clause} must be a BOOLEAN condition, but this is {bound.type}", e.span
            )
        return bound

    def _numeric(
        self, e: ast.Expr, relation: Relation, tables: Iterable[str], clause: str
    ) -> P.Expr:
        bound = bind_scalar(self.parse(e), relation, clause=clause, table_names=tables)
        if not (bound.type.is_numeric or bound.type.is_unknown):
            raise self.error(
                f"the {clause} expression must be numeric, but this is {bound.type}", e.span
            )
        return bound

    def _keys(
        self, keys: tuple[ast.Expr, ...], relation: Relation, tables: Iterable[str]
    ) -> tuple[P.KeyColumn, ...]:
        out: list[P.KeyColumn] = []
        errors: list[WqlError] = []
        seen: dict[str, Span | None] = {}
        for i, k in enumerate(keys):
            try:
                bound = bind_scalar(self.parse(k), relation, clause="GROUP BY", table_names=tables)
            except WqlErrors as e:
                errors.extend(e.errors)
                continue
            except WqlError as e:
                errors.append(e)
                continue
            if bound.sql in seen:
                errors.append(self.error(f"grouping key {bound.sql} is listed twice", k.span))
                continue
            seen[bound.sql] = k.span
            plain = bound.columns and bound.sql == quote_name(bound.columns[0])
            name = bound.columns[0] if plain else f"__key_{i}"
            if name.lower() in P.WINDOW_COLUMNS + P.PANE_COLUMNS:
                errors.append(
                    self.error(
                        f"grouping key {name!r} has the name of a window column; rename the "
                        "source column or group by an expression",
                        k.span,
                    )
                )
                continue
            out.append(P.KeyColumn(name, bound, bound.type, k.span))
        _raise(errors)
        return tuple(out)

    # -- windows ----------------------------------------------------------

    def _time_attr(
        self, attr: ast.TimeAttr, kind: str, source: P.SourceRef, window_span: Span | None
    ) -> tuple[P.TimeDomain, str | None]:
        if isinstance(attr, ast.ProcTime):
            return P.TimeDomain.PROCESSING, None
        col = source.column(attr.name)
        if col is None:
            raise self.error(
                f"unknown column {attr.name!r} in source {source.name!r}",
                attr.span,
                expected=[c.name for c in source.columns],
                hint=_did_you_mean(attr.name, [c.name for c in source.columns]),
            )
        if source.event_time is None:
            self._echo_broken_event_time(source, attr.span)
            raise self.error(
                f"{kind} on {col.name!r} is an event-time window, but source {source.name!r} "
                "has no watermark",
                attr.span,
                hint=f"declare WATERMARK FOR {col.name} AS {col.name} - INTERVAL '5' SECOND "
                "in the source or after FROM, or use PROCTIME() for processing time",
            )
        if col.name.lower() != source.event_time.column.lower():
            raise self.error(
                f"{kind} must use the event-time column {source.event_time.column!r} "
                f"(the WATERMARK FOR column), not {col.name!r}",
                attr.span,
            )
        return P.TimeDomain.EVENT, source.event_time.column

    def _positive(self, iv: ast.Interval, what: str) -> int:
        if iv.millis <= 0:
            raise self.error(f"{what} must be > 0, got {iv.describe()}", iv.span)
        return iv.millis

    def _windows_per_row(
        self, kind: str, size: int, every: int, what: str, size_node: ast.Interval
    ) -> None:
        # HOP assigns each row to ceil(size / slide) windows, CUMULATE to up
        # to size / step (as Flink and Spark do, one window object each): a
        # ratio in the millions would not fail, it would never finish.
        count = -(-size // every)
        if count > MAX_WINDOWS_PER_ROW:
            raise self.error(
                f"{kind} puts every row into {count} windows (size {size} ms / {what} "
                f"{every} ms); at most {MAX_WINDOWS_PER_ROW} are supported",
                size_node.span,
                hint=f"use a larger {what} or a smaller size",
            )

    def _offset(self, iv: ast.Interval | None, bound: int, what: str) -> int:
        if iv is None:
            return 0
        if abs(iv.millis) >= bound:
            raise self.error(
                f"the offset must satisfy |offset| < {what} ({bound} ms), got {iv.millis} ms",
                iv.span,
            )
        return iv.millis

    def _window(
        self, w: ast.Window, source: P.SourceRef, relation: Relation, tables: Iterable[str]
    ) -> P.Window:
        errors: list[WqlError] = []

        def check(fn: Callable[..., R], *args: Any) -> R | None:
            try:
                return fn(*args)
            except WqlErrors as e:
                errors.extend(e.errors)
            except WqlError as e:
                errors.append(e)
            return None

        if isinstance(w, ast.CountWindow):
            count = w.size.value
            if count <= 0:
                errors.append(
                    self.error(f"COUNT_WINDOW size must be > 0, got {count}", w.size.span)
                )
            every = w.slide.value if w.slide is not None else None
            if w.slide is not None and w.slide.value <= 0:
                errors.append(
                    self.error(f"COUNT_WINDOW slide must be > 0, got {every}", w.slide.span)
                )
            _raise(errors)
            return P.CountWindow(count, every, w.span)
        if isinstance(w, ast.GlobalWindow):
            return P.GlobalWindow(w.span)

        kind = {
            ast.Tumble: "TUMBLE",
            ast.Hop: "HOP",
            ast.Cumulate: "CUMULATE",
            ast.Session: "SESSION",
            ast.DynamicSession: "SESSION",
        }[type(w)]
        attr = check(self._time_attr, w.time, kind, source, w.span)
        if isinstance(w, ast.Tumble):
            size = check(self._positive, w.size, "TUMBLE size")
            offset = check(self._offset, w.offset, size, "size") if size else None
            _raise(errors)
            assert attr is not None and size is not None and offset is not None
            return P.Tumble(attr[0], attr[1], size, offset, w.span)
        if isinstance(w, ast.Hop):
            slide = check(self._positive, w.slide, "HOP slide")
            size = check(self._positive, w.size, "HOP size")
            if slide and size:
                check(self._windows_per_row, "HOP", size, slide, "slide", w.size)
            offset = check(self._offset, w.offset, slide, "slide") if slide else None
            _raise(errors)
            assert attr is not None and slide is not None and size is not None
            assert offset is not None
            return P.Hop(attr[0], attr[1], slide, size, offset, w.span)
        if isinstance(w, ast.Cumulate):
            step = check(self._positive, w.step, "CUMULATE step")
            size = check(self._positive, w.size, "CUMULATE size")
            if step and size and size % step:
                errors.append(
                    self.error(
                        f"CUMULATE size ({size} ms) must be a multiple of its step ({step} ms)",
                        w.size.span,
                    )
                )
            elif step and size:
                check(self._windows_per_row, "CUMULATE", size, step, "step", w.size)
            offset = check(self._offset, w.offset, size, "size") if size else None
            _raise(errors)
            assert attr is not None and step is not None and size is not None
            assert offset is not None
            return P.Cumulate(attr[0], attr[1], step, size, offset, w.span)
        if isinstance(w, ast.Session):
            gap = check(self._positive, w.gap, "SESSION gap")
            _raise(errors)
            assert attr is not None and gap is not None
            return P.Session(attr[0], attr[1], gap, w.span)
        assert isinstance(w, ast.DynamicSession)
        gap_expr = check(self._gap, w.gap, relation, tables)
        _raise(errors)
        assert attr is not None and gap_expr is not None
        return P.DynamicSession(attr[0], attr[1], gap_expr, w.span)

    def _gap(self, e: ast.Expr, relation: Relation, tables: Iterable[str]) -> P.Expr:
        """A dynamic gap: a day-time INTERVAL expression, as BIGINT milliseconds.

        Only an interval has a unit; a bare number would leave the unit to
        guesswork (Spark turns ``CAST(INTERVAL '10' SECOND AS BIGINT)`` into
        10, seconds), so it is an error with the spelling that works.
        """
        bound = bind_scalar(self.parse(e), relation, clause="a session GAP", table_names=tables)
        if bound.type != T.INTERVAL:
            hint = (
                "write the unit: e.g. GAP n * INTERVAL '1' SECOND"
                if bound.type.is_numeric
                else "e.g. GAP CASE WHEN vip THEN INTERVAL '1' HOUR ELSE INTERVAL '10' MINUTE END"
            )
            raise self.error(
                f"a session GAP must be a day-time INTERVAL, but this is {bound.type}",
                e.span,
                hint=hint,
            )
        return P.Expr(interval_to_millis_sql(bound.sql), T.BIGINT, bound.columns, e.span)

    # -- lateness, triggers, evictors, late data --------------------------

    def _lateness(self, clause: ast.AllowedLateness, window: P.Window | None) -> int:
        ms = clause.interval.millis
        if ms < 0:
            raise self.error("ALLOWED LATENESS must be >= 0", clause.interval.span)
        if window is not None and window.domain is not P.TimeDomain.EVENT and ms > 0:
            what = "processing-time" if window.domain is P.TimeDomain.PROCESSING else window.kind
            raise self.error(
                f"ALLOWED LATENESS only applies to event-time windows; rows are never late for "
                f"a {what} window",
                clause.span,
            )
        return ms

    def _trigger_clause(
        self,
        clause: ast.TriggerClause,
        window: P.Window | None,
        source: P.SourceRef,
        relation: Relation,
        tables: Iterable[str],
    ) -> P.Trigger:
        t = self._trigger(clause.trigger, window, source, relation, tables)
        if window is not None and window.merging and not t.mergeable:
            culprit = P.first_non_mergeable(t)
            culprit_span = culprit.span if culprit is not None else clause.span
            raise self.error(
                f"the {trigger_text(culprit or t).keyword} trigger cannot merge, so it cannot be "
                "used with SESSION windows (sessions merge when rows bridge them)",
                culprit_span,
                hint="use a mergeable trigger: WATERMARK, PROCESSING TIME, COUNT, EVERY, "
                "or PURGING/ANY/ALL of those (TIMEOUT cannot merge, as in Flink)",
            )
        return t

    def _trigger(
        self,
        t: ast.Trigger,
        window: P.Window | None,
        source: P.SourceRef,
        relation: Relation,
        tables: Iterable[str],
    ) -> P.Trigger:
        def sub(x: ast.Trigger) -> P.Trigger:
            return self._trigger(x, window, source, relation, tables)

        if isinstance(t, ast.WatermarkTrigger):
            self._need_event_time(source, "TRIGGER WATERMARK", t.span)
            return P.WatermarkTrigger(t.span)
        if isinstance(t, ast.ProcessingTimeTrigger):
            return P.ProcessingTimeTrigger(t.span)
        if isinstance(t, ast.CountTrigger):
            if t.count.value <= 0:
                raise self.error(f"COUNT trigger needs n > 0, got {t.count.value}", t.count.span)
            return P.CountTrigger(t.count.value, t.span)
        if isinstance(t, ast.EveryTrigger):
            interval = self._positive(t.interval, "EVERY interval")
            if t.domain is not None:
                domain = P.TimeDomain(t.domain.value)
            elif window is None:  # the window's own error is reported; any domain will do
                domain = P.TimeDomain.EVENT if source.event_time else P.TimeDomain.PROCESSING
            elif window.domain is not None:
                domain = window.domain
            else:
                raise self.error(
                    f"EVERY on a {window.kind} window needs OF EVENT TIME or OF PROCESSING TIME "
                    "(the window has no clock of its own)",
                    t.span,
                )
            if domain is P.TimeDomain.EVENT:
                self._need_event_time(source, "EVERY ... OF EVENT TIME", t.span)
            return P.EveryTrigger(interval, domain, t.span)
        if isinstance(t, ast.DeltaTrigger):
            expr = self._numeric(t.expr, relation, tables, "DELTA trigger")
            threshold = self._threshold(t.threshold)
            return P.DeltaTrigger(expr, threshold, t.span)
        if isinstance(t, ast.TimeoutTrigger):
            child = sub(t.trigger)
            timeout = self._positive(t.timeout, "TIMEOUT interval")
            return P.TimeoutTrigger(child, timeout, t.span)
        if isinstance(t, ast.PurgingTrigger):
            return P.PurgingTrigger(sub(t.trigger), t.span)
        if isinstance(t, (ast.AnyTrigger, ast.AllTrigger)):
            children: list[P.Trigger] = []
            errors: list[WqlError] = []
            for c in t.triggers:
                try:
                    children.append(sub(c))
                except WqlErrors as e:
                    errors.extend(e.errors)
                except WqlError as e:
                    errors.append(e)
            _raise(errors)
            cls = P.AnyTrigger if isinstance(t, ast.AnyTrigger) else P.AllTrigger
            return cls(tuple(children), t.span)
        if isinstance(t, ast.EarlyLateTrigger):
            self._need_event_time(source, "WATERMARK WITH EARLY/LATE", t.span)
            if window is not None and not P.has_bounds(window):
                raise self.error(
                    f"WATERMARK WITH EARLY/LATE needs a time window; a {window.kind} window has "
                    "no end for the watermark to pass",
                    t.span,
                )
            early = sub(t.early) if t.early is not None else None
            late = sub(t.late) if t.late is not None else None
            return P.EarlyLateTrigger(early, late, t.span)
        raise AssertionError(f"unknown trigger node {t!r}")

    def _echo_broken_event_time(self, source: P.SourceRef, span: Span | None) -> None:
        """Raise an Echo when ``source``'s WATERMARK clause had an error (reported there)."""
        if source.name.lower() in self.broken_event_time:
            raise Echo(f"source {source.name!r} has no valid watermark", span)

    def _need_event_time(self, source: P.SourceRef, what: str, span: Span | None) -> None:
        if source.event_time is None:
            self._echo_broken_event_time(source, span)
            raise self.error(
                f"{what} needs event time, but source {source.name!r} has no watermark",
                span,
                hint="declare WATERMARK FOR <ts> AS <ts> - INTERVAL '...' in the source or "
                "after FROM",
            )

    def _threshold(self, n: ast.Number) -> float:
        if n.value < Decimal(0):
            raise self.error(f"a DELTA threshold must be >= 0, got {n.value}", n.span)
        # The threshold is compared as a double (Flink's DeltaTrigger): a
        # literal beyond the double range would silently become infinity.
        threshold = float(n.value)
        if not math.isfinite(threshold):
            shown = str(n.value) if len(str(n.value)) <= 24 else f"{n.value:.6E}"
            raise self.error(
                f"DELTA threshold {shown} is out of range (max {sys.float_info.max!r}: a double)",
                n.span,
            )
        return threshold

    def _evictor(
        self,
        clause: ast.EvictClause,
        window: P.Window | None,
        source: P.SourceRef,
        relation: Relation,
        tables: Iterable[str],
    ) -> P.Evictor:
        after = clause.position is ast.EvictPosition.AFTER
        e = clause.evictor
        if isinstance(window, P.CountWindow) and window.slide is not None:
            raise self.error(
                "COUNT_WINDOW(size, slide) already evicts (it keeps the last size rows); "
                "EVICT cannot be combined with it",
                clause.span,
                hint="use GLOBAL() with TRIGGER COUNT(slide) and your own EVICT",
            )
        if isinstance(e, ast.CountEvictor):
            if e.count.value <= 0:
                raise self.error(f"EVICT COUNT needs n > 0, got {e.count.value}", e.count.span)
            return P.CountEvictor(e.count.value, after, e.span)
        if isinstance(e, ast.TimeEvictor):
            ms = self._positive(e.interval, "EVICT TIME interval")
            self._need_event_time(source, "EVICT TIME", e.span)
            return P.TimeEvictor(ms, after, e.span)
        assert isinstance(e, ast.DeltaEvictor)
        expr = self._numeric(e.expr, relation, tables, "DELTA evictor")
        return P.DeltaEvictor(expr, self._threshold(e.threshold), after, e.span)

    def _late_data(
        self, clause: ast.LateDataTo, window: P.Window | None, source: P.SourceRef
    ) -> str:
        if window is not None and window.domain is not P.TimeDomain.EVENT:
            what = (
                "processing-time windows"
                if window.domain is P.TimeDomain.PROCESSING
                else f"{window.kind} windows"
            )
            raise self.error(
                f"LATE DATA TO needs an event-time window: rows are never late for {what}",
                clause.span,
            )
        clash = source.column(P.LATE_EVENT_TIME_COLUMN)
        if clash is not None and (
            source.event_time is None or clash.name.lower() != source.event_time.column.lower()
        ):
            raise self.error(
                f"the late output adds column {P.LATE_EVENT_TIME_COLUMN!r}, which clashes with "
                f"source column {clash.name!r}",
                clause.span,
            )
        return clause.name.name

    # -- SELECT / HAVING --------------------------------------------------

    def _post_context(
        self,
        keys: tuple[P.KeyColumn, ...],
        window: P.Window,
        relation: Relation,
        tables: Iterable[str],
    ) -> PostAggContext:
        post_cols = [P.Column(k.name, k.type) for k in keys]
        post_cols += [P.Column(n, T.TIMESTAMP) for n in P.WINDOW_COLUMNS]
        post_cols += [P.Column("pane_index", T.BIGINT), P.Column("pane_timing", T.STRING)]
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
            Relation("the window result", tuple(post_cols)),
            tuple((k.expr.sql, k.name) for k in keys),
            tuple(tables),
            forbidden,
        )

    def _select(
        self,
        q: ast.Query,
        keys: tuple[P.KeyColumn, ...] | None,
        window: P.Window | None,
        source: P.SourceRef,
        relation: Relation,
        tables: Iterable[str],
        registry: AggregateRegistry,
    ) -> tuple[P.OutputColumn, ...] | None:
        if keys is None or window is None:
            return None  # their errors are reported; SELECT cannot be checked without them
        ctx = self._post_context(keys, window, relation, tables)
        out: list[P.OutputColumn] = []
        errors: list[WqlError] = []
        names: set[str] = set()
        for i, item in enumerate(q.select):
            try:
                pe = self.parse(item.expr)
                bound = bind_post_aggregation(pe, ctx, registry, clause="SELECT")
            except WqlErrors as e:
                errors.extend(e.errors)
                continue
            except WqlError as e:
                errors.append(e)
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
                    self.error(
                        f"output column {name!r} appears twice",
                        name_span,
                        hint="give one of them an alias with AS",
                    )
                )
                continue
            names.add(name.lower())
            out.append(P.OutputColumn(name, bound, bound.type, item.span))
        _raise(errors)
        return tuple(out)

    def _having(
        self,
        e: ast.Expr,
        keys: tuple[P.KeyColumn, ...],
        window: P.Window,
        relation: Relation,
        tables: Iterable[str],
        registry: AggregateRegistry,
        output: tuple[P.OutputColumn, ...],
    ) -> P.Expr:
        ctx = self._post_context(keys, window, relation, tables)
        post_names = {c.name.lower() for c in ctx.post.columns}
        aliases = tuple(
            (o.name.lower(), o.expr.sql) for o in output if o.name.lower() not in post_names
        )
        ctx = dataclasses.replace(ctx, aliases=aliases)
        bound = bind_post_aggregation(self.parse(e), ctx, registry, clause="HAVING")
        if not (bound.type == T.BOOLEAN or bound.type.is_unknown):
            raise self.error(
                f"HAVING must be a BOOLEAN condition, but this is {bound.type}", e.span
            )
        return bound


# ---------------------------------------------------------------------------


def _default_trigger(window: P.Window) -> P.Trigger | None:
    """The trigger a window fires with when no TRIGGER is given (spec §2)."""
    if isinstance(window, P.CountWindow):
        if window.slide is None:
            return P.PurgingTrigger(P.CountTrigger(window.size, window.span), window.span)
        return P.CountTrigger(window.slide, window.span)
    if isinstance(window, P.GlobalWindow):
        return None
    if window.domain is P.TimeDomain.EVENT:
        return P.WatermarkTrigger(window.span)
    return P.ProcessingTimeTrigger(window.span)


def _lookup(columns: Iterable[P.Column], name: str) -> P.Column | None:
    low = name.lower()
    return next((c for c in columns if c.name.lower() == low), None)


def _did_you_mean(name: str, candidates: list[str]) -> str | None:
    import difflib

    by_lower = {c.lower(): c for c in candidates}
    close = difflib.get_close_matches(name.lower(), list(by_lower), n=3, cutoff=0.6)
    return f"did you mean {', '.join(repr(by_lower[c]) for c in close)}?" if close else None


def _raise(errors: list[WqlError]) -> None:
    if len(errors) == 1:
        raise errors[0]
    if errors:
        raise WqlErrors(errors)
