"""The binding context: what every part of the binder reads and reports into.

One :class:`BindContext` per bound text holds the text, the caller's
schemas, the sources bound so far, what the statements that did not parse
declared, and the list every independent mistake is added to. The clause
binders (``sources``, ``windows``, ``triggers``, ``lateness``, ``select``,
``queries``) are functions of the context; the checks several clauses share
(a positive interval, a BOOLEAN or numeric expression, event time) are its
methods.
"""

from __future__ import annotations

import bisect
import math
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, TypeVar

from wql.compiler import plan as P
from wql.compiler import types as T
from wql.compiler.expressions import ParsedExpr, Relation, bind_scalar, parse_expr
from wql.errors import ErrorCode, Span, WqlError, WqlErrors, WqlSemanticError
from wql.grammar import ast

R = TypeVar("R")

SchemaLike = Any
"""A caller-passed schema: a Spark StructType, a DataFrame (its ``.schema``),
a mapping ``name -> type`` or a sequence of ``(name, type)`` pairs, where a
type is a :class:`WqlType` or a type name (``'BIGINT'``, ``'DECIMAL(10,2)'``)."""


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


def collect(errors: list[WqlError], fn: Callable[..., R], *args: Any, **kw: Any) -> R | None:
    """Run one independent check: its error(s) are added to ``errors`` and None returned."""
    try:
        return fn(*args, **kw)
    except WqlErrors as e:
        errors.extend(e.errors)
    except WqlError as e:
        errors.append(e)
    return None


def raise_all(errors: list[WqlError]) -> None:
    """Raise the error of ``errors``, or all of them together; nothing when it is empty."""
    if len(errors) == 1:
        raise errors[0]
    if errors:
        raise WqlErrors(errors)


def lookup(columns: Iterable[P.Column], name: str) -> P.Column | None:
    low = name.lower()
    return next((c for c in columns if c.name.lower() == low), None)


def did_you_mean(name: str, candidates: list[str]) -> str | None:
    import difflib

    by_lower = {c.lower(): c for c in candidates}
    close = difflib.get_close_matches(name.lower(), list(by_lower), n=3, cutoff=0.6)
    return f"did you mean {', '.join(repr(by_lower[c]) for c in close)}?" if close else None


# The name a CREATE SOURCE statement declares, read from its text (for a
# statement that did not parse).
_DECLARED = re.compile(
    r"^(?:\s+|--[^\n]*|/\*.*?\*/)*CREATE\s+SOURCE\s+(`(?:[^`]|``)+`|\w+)",
    re.IGNORECASE | re.DOTALL,
)


@dataclass
class BoundSource:
    """A source the binder knows (declared, or a caller's schema); ``used``: a query reads it."""

    decl: P.SourceDecl
    used: bool = False


class BindContext:
    """The state of one binding (see the module docstring)."""

    def __init__(
        self, text: str, schemas: Mapping[str, SchemaLike], unparsed: tuple[str, ...] = ()
    ) -> None:
        self.text = text
        self.schemas = {k.lower(): (k, v) for k, v in schemas.items()}
        self.errors: list[WqlError] = []
        self.sources: dict[str, BoundSource] = {}
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
        return collect(self.errors, fn, *args, **kw)

    def error(
        self, message: str, span: Span | None, *, code: ErrorCode, **kw: Any
    ) -> WqlSemanticError:
        """A semantic error at ``span``; every binder error says its :class:`ErrorCode`."""
        return WqlSemanticError(message, span, code=code, **kw)

    def raise_errors(self, filename: str | None) -> None:
        if not self.errors:
            return
        # One mistake, one error: the same report twice in one statement (a
        # column read twice where it may not be, an error found again through
        # a shared helper) is reported at its first place only.
        unique: dict[tuple, WqlError] = {}
        for e in sorted(self.errors, key=lambda e: e.span.start if e.span else -1):
            unique.setdefault((e.key, self.statement_of(e)), e)
        # Echoes only stop the binding; shown only if nothing else is (never,
        # when the mistake they follow from was found by this binder).
        errors = reported(unique.values()) or list(unique.values())
        errors = [e.with_source(self.text, filename) for e in errors]
        if len(errors) == 1:
            raise errors[0]
        raise WqlErrors(errors).with_source(self.text, filename)

    def statement_of(self, e: WqlError) -> int | None:
        """The index of the statement ``e`` points into (None without a span)."""
        if e.span is None:
            return None
        i = bisect.bisect_right(self.statement_spans, (e.span.start, math.inf)) - 1
        if i >= 0 and self.statement_spans[i][0] <= e.span.start <= self.statement_spans[i][1]:
            return i
        return None

    # -- checks several clauses share -------------------------------------

    def parse(self, e: ast.Expr) -> ParsedExpr:
        span = e.span or Span.from_offsets(self.text, 0, len(self.text))
        text = self.text[span.start : span.end] if e.span is not None else e.text
        return parse_expr(text, span, self.text)

    def boolean(
        self, e: ast.Expr, relation: Relation, tables: Iterable[str], clause: str
    ) -> P.Expr:
        bound = bind_scalar(self.parse(e), relation, clause=clause, table_names=tables)
        return self.condition(bound, e, clause)

    def condition(self, bound: P.Expr, e: ast.Expr, clause: str) -> P.Expr:
        """``bound`` (``e`` as bound) when it is a BOOLEAN condition, as ``clause`` needs."""
        if not (bound.type == T.BOOLEAN or bound.type.is_unknown):
            raise self.error(
                f"{clause} must be a BOOLEAN condition, but this is {bound.type}",
                e.span,
                code=ErrorCode.WRONG_TYPE,
            )
        return bound

    def numeric(
        self, e: ast.Expr, relation: Relation, tables: Iterable[str], clause: str
    ) -> P.Expr:
        bound = bind_scalar(self.parse(e), relation, clause=clause, table_names=tables)
        if not (bound.type.is_numeric or bound.type.is_unknown):
            raise self.error(
                f"the {clause} expression must be numeric, but this is {bound.type}",
                e.span,
                code=ErrorCode.WRONG_TYPE,
            )
        return bound

    def positive(self, iv: ast.Interval, what: str) -> int:
        if iv.millis <= 0:
            raise self.error(
                f"{what} must be > 0, got {iv.describe()}", iv.span, code=ErrorCode.OUT_OF_RANGE
            )
        return iv.millis

    def echo_broken_event_time(self, source: P.SourceRef, span: Span | None) -> None:
        """Raise an Echo when ``source``'s WATERMARK clause had an error (reported there)."""
        if source.name.lower() in self.broken_event_time:
            raise Echo(
                f"source {source.name!r} has no valid watermark", span, code=ErrorCode.NO_EVENT_TIME
            )

    def need_event_time(self, source: P.SourceRef, what: str, span: Span | None) -> None:
        if source.event_time is None:
            self.echo_broken_event_time(source, span)
            raise self.error(
                f"{what} needs event time, but source {source.name!r} has no watermark",
                span,
                hint="declare WATERMARK FOR <ts> AS <ts> - INTERVAL '...' in the source or "
                "after FROM",
                code=ErrorCode.NO_EVENT_TIME,
            )
