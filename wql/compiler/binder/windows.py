"""Binding GROUP BY's window: one handler per AST window class.

Every mistake of a window is reported (a time attribute and a size can both
be wrong); the window's plan node is built only when there is none.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from wql.compiler import plan as P
from wql.compiler import types as T
from wql.compiler.binder.context import BindContext, R, collect, did_you_mean, raise_all
from wql.compiler.expressions import Relation, bind_scalar, interval_to_millis_sql
from wql.errors import ErrorCode, WqlError
from wql.grammar import ast

MAX_WINDOWS_PER_ROW = 100_000
"""The most windows one row may belong to (HOP: size / slide, CUMULATE: size / step)."""


def bind_window(
    ctx: BindContext, w: ast.Window, source: P.SourceRef, relation: Relation, tables: Iterable[str]
) -> P.Window:
    """The plan window of ``w``; raises every mistake of it together."""
    return _window(w, _WindowBinding(ctx, source, relation, tuple(tables)))


@dataclass
class _WindowBinding:
    """What a window handler reads, and the mistakes it found so far."""

    ctx: BindContext
    source: P.SourceRef
    relation: Relation
    tables: tuple[str, ...]
    errors: list[WqlError] = field(default_factory=list)

    def check(self, fn: Callable[..., R], *args: Any) -> R | None:
        return collect(self.errors, fn, *args)

    def time(self, attr: ast.TimeAttr, kind: str) -> tuple[P.TimeDomain, str | None] | None:
        """The window's clock and event-time column (checked first, as it comes first)."""
        return self.check(_time_attr, self.ctx, attr, kind, self.source)

    def positive(self, iv: ast.Interval, what: str) -> int | None:
        return self.check(self.ctx.positive, iv, what)

    def offset(self, iv: ast.Interval | None, bound: int | None, what: str) -> int | None:
        return self.check(_offset, self.ctx, iv, bound, what) if bound else None

    def done(self) -> None:
        raise_all(self.errors)


@functools.singledispatch
def _window(w: ast.Window, b: _WindowBinding) -> P.Window:
    raise AssertionError(f"unknown window node {w!r}")


@_window.register
def _(w: ast.CountWindow, b: _WindowBinding) -> P.Window:
    count = w.size.value
    if count <= 0:
        b.errors.append(
            b.ctx.error(
                f"COUNT_WINDOW size must be > 0, got {count}",
                w.size.span,
                code=ErrorCode.OUT_OF_RANGE,
            )
        )
    every = w.slide.value if w.slide is not None else None
    if w.slide is not None and w.slide.value <= 0:
        b.errors.append(
            b.ctx.error(
                f"COUNT_WINDOW slide must be > 0, got {every}",
                w.slide.span,
                code=ErrorCode.OUT_OF_RANGE,
            )
        )
    b.done()
    return P.CountWindow(count, every, w.span)


@_window.register
def _(w: ast.GlobalWindow, b: _WindowBinding) -> P.Window:
    return P.GlobalWindow(w.span)


@_window.register
def _(w: ast.Tumble, b: _WindowBinding) -> P.Window:
    attr = b.time(w.time, "TUMBLE")
    size = b.positive(w.size, "TUMBLE size")
    offset = b.offset(w.offset, size, "size")
    b.done()
    assert attr is not None and size is not None and offset is not None
    return P.Tumble(attr[0], attr[1], size, offset, w.span)


@_window.register
def _(w: ast.Hop, b: _WindowBinding) -> P.Window:
    attr = b.time(w.time, "HOP")
    slide, size = _stepped(b, "HOP", w.slide, "slide", w.size)
    offset = b.offset(w.offset, slide, "slide")
    b.done()
    assert attr is not None and slide is not None and size is not None and offset is not None
    return P.Hop(attr[0], attr[1], slide, size, offset, w.span)


@_window.register
def _(w: ast.Cumulate, b: _WindowBinding) -> P.Window:
    attr = b.time(w.time, "CUMULATE")
    step, size = _stepped(b, "CUMULATE", w.step, "step", w.size, divides=True)
    offset = b.offset(w.offset, size, "size")
    b.done()
    assert attr is not None and step is not None and size is not None and offset is not None
    return P.Cumulate(attr[0], attr[1], step, size, offset, w.span)


def _stepped(
    b: _WindowBinding,
    kind: str,
    every: ast.Interval,
    what: str,
    size: ast.Interval,
    divides: bool = False,
) -> tuple[int | None, int | None]:
    """HOP's slide or CUMULATE's step, and the size: both > 0, at most
    MAX_WINDOWS_PER_ROW windows per row, and (``divides``) size a multiple of the step."""
    every_ms = b.positive(every, f"{kind} {what}")
    size_ms = b.positive(size, f"{kind} size")
    if divides and every_ms and size_ms and size_ms % every_ms:
        b.errors.append(
            b.ctx.error(
                f"{kind} size ({size_ms} ms) must be a multiple of its {what} ({every_ms} ms)",
                size.span,
                code=ErrorCode.OUT_OF_RANGE,
            )
        )
    elif every_ms and size_ms:
        b.check(_windows_per_row, b.ctx, kind, size_ms, every_ms, what, size)
    return every_ms, size_ms


@_window.register
def _(w: ast.Session, b: _WindowBinding) -> P.Window:
    attr = b.time(w.time, "SESSION")
    gap = b.positive(w.gap, "SESSION gap")
    b.done()
    assert attr is not None and gap is not None
    return P.Session(attr[0], attr[1], gap, w.span)


@_window.register
def _(w: ast.DynamicSession, b: _WindowBinding) -> P.Window:
    attr = b.time(w.time, "SESSION")
    gap = b.check(_gap, b.ctx, w.gap, b.relation, b.tables)
    b.done()
    assert attr is not None and gap is not None
    return P.DynamicSession(attr[0], attr[1], gap, w.span)


#: The binder's window table (tests/compiler/test_dispatch.py).
DISPATCH = {"window": _window}


def _time_attr(
    ctx: BindContext, attr: ast.TimeAttr, kind: str, source: P.SourceRef
) -> tuple[P.TimeDomain, str | None]:
    if isinstance(attr, ast.ProcTime):
        return P.TimeDomain.PROCESSING, None
    col = source.column(attr.name)
    if col is None:
        raise ctx.error(
            f"unknown column {attr.name!r} in source {source.name!r}",
            attr.span,
            expected=[c.name for c in source.columns],
            hint=did_you_mean(attr.name, [c.name for c in source.columns]),
            code=ErrorCode.UNKNOWN_NAME,
        )
    if source.event_time is None:
        ctx.echo_broken_event_time(source, attr.span)
        raise ctx.error(
            f"{kind} on {col.name!r} is an event-time window, but source {source.name!r} "
            "has no watermark",
            attr.span,
            hint=f"declare WATERMARK FOR {col.name} AS {col.name} - INTERVAL '5' SECOND "
            "in the source or after FROM, or use PROCTIME() for processing time",
            code=ErrorCode.NO_EVENT_TIME,
        )
    if col.name.lower() != source.event_time.column.lower():
        raise ctx.error(
            f"{kind} must use the event-time column {source.event_time.column!r} "
            f"(the WATERMARK FOR column), not {col.name!r}",
            attr.span,
            code=ErrorCode.NO_EVENT_TIME,
        )
    return P.TimeDomain.EVENT, source.event_time.column


def _windows_per_row(
    ctx: BindContext, kind: str, size: int, every: int, what: str, size_node: ast.Interval
) -> None:
    # HOP assigns each row to ceil(size / slide) windows, CUMULATE to up
    # to size / step (as Flink and Spark do, one window object each): a
    # ratio in the millions would not fail, it would never finish.
    count = -(-size // every)
    if count > MAX_WINDOWS_PER_ROW:
        raise ctx.error(
            f"{kind} puts every row into {count} windows (size {size} ms / {what} "
            f"{every} ms); at most {MAX_WINDOWS_PER_ROW} are supported",
            size_node.span,
            hint=f"use a larger {what} or a smaller size",
            code=ErrorCode.OUT_OF_RANGE,
        )


def _offset(ctx: BindContext, iv: ast.Interval | None, bound: int, what: str) -> int:
    if iv is None:
        return 0
    if abs(iv.millis) >= bound:
        raise ctx.error(
            f"the offset must satisfy |offset| < {what} ({bound} ms), got {iv.millis} ms",
            iv.span,
            code=ErrorCode.OUT_OF_RANGE,
        )
    return iv.millis


def _gap(ctx: BindContext, e: ast.Expr, relation: Relation, tables: Iterable[str]) -> P.Expr:
    """A dynamic gap: a day-time INTERVAL expression, as BIGINT milliseconds.

    Only an interval has a unit; a bare number would leave the unit to
    guesswork (Spark turns ``CAST(INTERVAL '10' SECOND AS BIGINT)`` into
    10, seconds), so it is an error with the spelling that works.
    """
    bound = bind_scalar(ctx.parse(e), relation, clause="a session GAP", table_names=tables)
    if bound.type != T.INTERVAL:
        hint = (
            "write the unit: e.g. GAP n * INTERVAL '1' SECOND"
            if bound.type.is_numeric
            else "e.g. GAP CASE WHEN vip THEN INTERVAL '1' HOUR ELSE INTERVAL '10' MINUTE END"
        )
        raise ctx.error(
            f"a session GAP must be a day-time INTERVAL, but this is {bound.type}",
            e.span,
            hint=hint,
            code=ErrorCode.WRONG_TYPE,
        )
    return P.Expr(interval_to_millis_sql(bound.sql), T.BIGINT, bound.columns, e.span)
