"""The one error family every user-facing WQL failure belongs to.

Every error a user can cause (a malformed query, an unknown column, a window
that needs an event-time attribute, an option the chosen engine cannot run)
is a :class:`WqlError` carrying where it happened (:class:`Span`), what was
expected, and a rendering that shows the source line with a caret underline.
Code outside the CLI raises these; the CLI prints them and exits 1, never a
traceback.

>>> src = "SELECT a FROM t\\nGROUP BY TUMBLE(ts, INTERVAL '0' SECOND)"
>>> span = Span.from_offsets(src, 36, 55)
>>> (span.line, span.column, span.end_line, span.end_column)
(2, 21, 2, 40)
>>> err = WqlSemanticError("window size must be > 0", span, source=src, filename="q.wql")
>>> print(err.render())
q.wql:2:21: error: window size must be > 0
   2 | GROUP BY TUMBLE(ts, INTERVAL '0' SECOND)
     |                     ^^^^^^^^^^^^^^^^^^^
"""

from __future__ import annotations

import bisect
import enum
import functools
import os
import re
import sys
from collections.abc import Iterable, Sequence
from dataclasses import dataclass


@dataclass(frozen=True, order=True)
class Span:
    """A region of the source text.

    ``start``/``end`` are 0-based character offsets (end exclusive);
    ``line``/``column`` are 1-based and point at ``start``;
    ``end_line``/``end_column`` are 1-based and point just past the last
    character (so a one-character span has ``end_column == column + 1``).
    """

    start: int
    end: int
    line: int
    column: int
    end_line: int
    end_column: int

    @classmethod
    def from_offsets(cls, source: str, start: int, end: int) -> Span:
        """Build a span from offsets into ``source``, computing lines and columns."""
        start = max(0, min(start, len(source)))
        end = max(start, min(end, len(source)))
        line, column = _line_column(source, start)
        end_line, end_column = _line_column(source, end)
        return cls(start, end, line, column, end_line, end_column)

    @classmethod
    def point(cls, source: str, offset: int) -> Span:
        """A one-character span at ``offset`` (zero-width at end of input)."""
        return cls.from_offsets(source, offset, min(offset + 1, len(source)))

    def cover(self, other: Span | None) -> Span:
        """The smallest span containing both spans."""
        if other is None:
            return self
        first = self if self.start <= other.start else other
        last = self if self.end >= other.end else other
        return Span(
            first.start,
            last.end,
            first.line,
            first.column,
            last.end_line,
            last.end_column,
        )

    def shifted(self, source: str, offset: int) -> Span:
        """This span moved by ``offset`` characters and recomputed against ``source``.

        Used to map a position inside an embedded expression (parsed on its
        own, e.g. by sqlglot) back to the enclosing ``.wql`` file.
        """
        return Span.from_offsets(source, self.start + offset, self.end + offset)


# Texts at least this long get a line index: counting the newlines before an
# offset costs the whole prefix, and a big file has a span per expression.
_INDEXED = 20_000


def _line_column(source: str, offset: int) -> tuple[int, int]:
    """1-based (line, column) of ``offset`` in ``source``."""
    if len(source) < _INDEXED:
        line_start = source.rfind("\n", 0, offset) + 1
        return source.count("\n", 0, offset) + 1, offset - line_start + 1
    starts = _line_starts(source)
    line = bisect.bisect_right(starts, offset)
    return line, offset - starts[line - 1] + 1


@functools.lru_cache(maxsize=4)
def _line_starts(source: str) -> list[int]:
    """Offsets where the lines of ``source`` start (cached: str hashes are cached too)."""
    return [0] + [m.end() for m in re.finditer("\n", source)]


class ErrorCode(enum.Enum):
    """The stable code of a kind of mistake: ``WQL1xx`` the text is not WQL,
    ``WQL2xx`` it means nothing valid, ``WQL3xx`` the engine cannot run it,
    ``WQL4xx`` input, output and running.

    Every :class:`WqlError` has one (:attr:`WqlError.code`); code that must
    tell errors apart reads it, never the message, whose words may change.
    ``docs/errors.md`` lists them (a test keeps the two equal).
    """

    meaning: str

    def __new__(cls, code: str, meaning: str) -> ErrorCode:
        member = object.__new__(cls)
        member._value_ = code
        member.meaning = meaning
        return member

    def __str__(self) -> str:
        return str(self.value)

    SYNTAX = ("WQL100", "unexpected token, character or end of input (what would fit is listed)")
    UNTERMINATED = ("WQL101", "a string, quoted identifier or comment that is never closed")
    BAD_LITERAL = (
        "WQL102",
        "a number or interval literal that cannot be read: not an integer, too many digits, "
        "no or an unknown unit, not a whole number of milliseconds, out of range",
    )
    WINDOW_SYNTAX = (
        "WQL103",
        "GROUP BY's window missing, misspelled or given twice, or a window table function "
        "that does not fit its GROUP BY",
    )
    BAD_EXPRESSION = ("WQL104", "a scalar expression the SQL parser cannot read")
    TEXT_TOO_LARGE = ("WQL105", "the text is longer than the limit on a WQL file")
    TOO_DEEP = ("WQL106", "expressions or triggers nested, or operators chained, beyond a limit")
    NO_QUERY = ("WQL200", "a file without a query")
    UNKNOWN_NAME = ("WQL201", "an unknown source, column, table or type")
    DUPLICATE_NAME = (
        "WQL202",
        "a source, column, option, grouping key, output column, query or late-output name "
        "given twice",
    )
    WRONG_TYPE = (
        "WQL203",
        "an expression or column of the wrong type for its place (a BOOLEAN WHERE or HAVING, "
        "a numeric DELTA, an INTERVAL gap, a TIMESTAMP watermark, arithmetic Spark rejects)",
    )
    OUT_OF_RANGE = (
        "WQL204",
        "a size, count, interval, offset, delay or threshold outside its range (a CUMULATE "
        "size that is not a multiple of its step, too many windows per row, DECIMAL(p, s))",
    )
    NO_EVENT_TIME = (
        "WQL205",
        "an event-time construct over a source without a watermark, or a window on another "
        "column than the watermark's",
    )
    NOT_FOR_WINDOW = (
        "WQL206",
        "a clause the query's window does not take: lateness or a late output without event "
        "time, EARLY/LATE or pane_timing without a window end, EVERY without a clock, EVICT "
        "with COUNT_WINDOW(size, slide), GLOBAL() without a trigger, a late-output column clash",
    )
    NOT_MERGEABLE = ("WQL207", "a trigger that cannot merge, on SESSION windows")
    AGGREGATE = (
        "WQL208",
        "an aggregate where none is allowed, nested, unknown or with wrong arguments; a column "
        "neither grouped nor aggregated; an OVER window",
    )
    UNSUPPORTED_SQL = (
        "WQL209",
        "SQL that WQL expressions do not take: subqueries, * outside COUNT(*), aggregate modifiers",
    )
    SCHEMA = (
        "WQL210",
        "a DataFrame or schema that does not match its source: a missing or incompatible "
        "column, a Spark type WQL has no type for, no columns",
    )
    EMIT = (
        "WQL211",
        "an EMIT clause that contradicts itself or the query: a pane mode given twice, modes "
        "per pane timing without a window end, an accumulation mode with a PURGING trigger",
    )
    FINISHING_TRIGGER = (
        "WQL212",
        "a trigger that finishes (ONCE, UNTIL, SEQUENCE) where finishing means nothing: inside "
        "ANY, ALL, TIMEOUT or WATERMARK WITH EARLY/LATE, a SEQUENCE child before the last that "
        "never finishes, a SEQUENCE of one trigger",
    )
    PIPELINE = (
        "WQL220",
        "a view read where it cannot be: before its definition, by itself, with a WATERMARK "
        "clause, a view with EMIT CHANGELOG, without the event time or the clock its reader "
        "needs",
    )
    WINDOWED = (
        "WQL221",
        "a window Top-N, deduplication or join over what it cannot read: a source without a "
        "window table function, a view that is not a final event-time window aggregate (EARLY "
        "or LATE panes), a SESSION window table",
    )
    RANK = (
        "WQL222",
        "a window Top-N or deduplication of another shape than Flink SQL's: PARTITION BY "
        "without the window bounds, no rn <= N bound, a rank used outside its place",
    )
    WINDOW_JOIN = (
        "WQL223",
        "a window join of another shape than Flink SQL's: ON without both window bounds, "
        "sides of different windows, SESSION windows; a join of two sources without one "
        "replay order (arrival_order on one source only, or of two kinds) or with an idle rule",
    )
    OVER = (
        "WQL224",
        "an OVER aggregation of another shape than Flink SQL's: ORDER BY other than the "
        "event-time attribute ascending, a frame that does not end at CURRENT ROW, OVER "
        "windows that differ, a source without event time",
    )
    SEMANTIC = ("WQL299", "any other meaningless text")
    NOT_NATIVE = ("WQL300", "a query forced onto the native engine where it cannot run exactly")
    UNKNOWN_ENGINE = ("WQL301", "an engine other than auto, native and operator")
    UNSUPPORTED = (
        "WQL302",
        "valid WQL the chosen engine or environment cannot run (e.g. the Spark SQL of an "
        "operator query, processing-time windows on an available-now stream)",
    )
    MIXED_CLOCKS = (
        "WQL303",
        "a query that uses both event time and processing time where its host has one clock: "
        "a stream, or batch replay without a processing_time column",
    )
    FILE = ("WQL400", "a file that cannot be read or written")
    SOURCE_DATA = ("WQL401", "a declared source Spark cannot read or stream")
    SPARK = ("WQL402", "Spark failed while running or streaming a query")
    USAGE = (
        "WQL403",
        "a bad command-line option or API argument (an unknown query name, --conf, --trigger)",
    )
    SNAPSHOT = (
        "WQL404",
        "operator state (a snapshot or checkpoint) taken with a different query or operator "
        "configuration",
    )
    OTHER = ("WQL499", "any other error")


class WqlError(Exception):
    """Base class of every user-facing WQL error.

    Attributes:
        kind: ``"syntax"``, ``"semantic"`` or ``"unsupported"``.
        code: the :class:`ErrorCode` of the mistake (the class's ``default_code``
            unless the raiser says which).
        message: one sentence saying what is wrong.
        span: where (``None`` only for errors with no place in a query,
            e.g. a missing input file).
        expected: for syntax errors, the tokens that would have been accepted.
        hint: optional advice on how to fix it.
        source / filename: the text the span points into, for rendering.
    """

    kind = "error"
    default_code = ErrorCode.OTHER

    def __init__(
        self,
        message: str,
        span: Span | None = None,
        *,
        code: ErrorCode | None = None,
        expected: Iterable[str] = (),
        hint: str | None = None,
        source: str | None = None,
        filename: str | None = None,
    ) -> None:
        super().__init__(message)
        self.code = code or self.default_code
        self.message = message
        self.span = span
        self.expected = tuple(expected)
        self.hint = hint
        self.source = source
        self.filename = filename

    @property
    def line(self) -> int | None:
        return self.span.line if self.span else None

    @property
    def column(self) -> int | None:
        return self.span.column if self.span else None

    def with_source(self, source: str, filename: str | None = None) -> WqlError:
        """Attach the text (and file name) the span refers to, if not already set."""
        if self.source is None:
            self.source = source
        if self.filename is None:
            self.filename = filename
        return self

    def __str__(self) -> str:
        where = f"{self.span.line}:{self.span.column}: " if self.span else ""
        return f"{where}{self.message}"

    def render(self, color: bool = False) -> str:
        """The error as a compiler prints it: location, message, source line, carets."""
        red, bold, dim, reset = (
            ("\033[31m", "\033[1m", "\033[2m", "\033[0m") if color else ("",) * 4
        )
        place = self.filename or "<query>"
        if self.span:
            place += f":{self.span.line}:{self.span.column}"
        label = "error" if self.kind in ("syntax", "semantic", "error") else self.kind
        lines = [f"{bold}{place}: {red}{label}:{reset}{bold} {self.message}{reset}"]
        if self.span is not None and self.source is not None:
            lines.extend(_underline(self.source, self.span, red if color else "", reset, dim))
        if self.expected:
            shown = ", ".join(sorted(self.expected)[:12])
            more = " …" if len(self.expected) > 12 else ""
            lines.append(f"  expected one of: {shown}{more}")
        if self.hint:
            lines.append(f"  hint: {self.hint}")
        return "\n".join(lines)

    @property
    def key(self) -> tuple[ErrorCode, str]:
        """What makes two reports the same report, the place aside: the code and the
        whole message (the binder reports such twins in one statement once)."""
        return (self.code, self.message)


class WqlSyntaxError(WqlError):
    """The text is not WQL (lexing or parsing failed)."""

    kind = "syntax"
    default_code = ErrorCode.SYNTAX


class WqlSemanticError(WqlError):
    """The text parses but means nothing valid (unknown column, bad type, size <= 0, ...)."""

    kind = "semantic"
    default_code = ErrorCode.SEMANTIC


class WqlUnsupportedError(WqlError):
    """Valid WQL that the chosen engine or environment cannot execute."""

    kind = "unsupported"
    default_code = ErrorCode.UNSUPPORTED


class WqlErrors(WqlError):
    """Several errors found in one text; ``errors`` keeps them in source order
    (``code`` is the first one's)."""

    kind = "error"

    def __init__(self, errors: Sequence[WqlError]) -> None:
        ordered = sorted(errors, key=lambda e: e.span.start if e.span else -1)
        first = ordered[0]
        super().__init__(
            first.message if len(ordered) == 1 else f"{len(ordered)} errors",
            first.span,
            code=first.code,
            source=first.source,
            filename=first.filename,
        )
        self.errors: tuple[WqlError, ...] = tuple(ordered)

    def with_source(self, source: str, filename: str | None = None) -> WqlError:
        for e in self.errors:
            e.with_source(source, filename)
        return super().with_source(source, filename)

    def render(self, color: bool = False) -> str:
        return "\n\n".join(e.render(color) for e in self.errors)


def _underline(source: str, span: Span, red: str, reset: str, dim: str) -> list[str]:
    text_lines = source.splitlines() or [""]
    out = []
    last = min(span.end_line, span.line + 2)  # show at most three lines of a long span
    width = len(str(last))
    for n in range(span.line, last + 1):
        if n - 1 >= len(text_lines):
            break
        text = text_lines[n - 1].expandtabs(1)
        begin = span.column - 1 if n == span.line else 0
        finish = span.end_column - 1 if n == span.end_line else len(text)
        finish = max(finish, begin + 1)
        out.append(f"{dim}{n:>{width + 3}} |{reset} {text}")
        out.append(
            f"{dim}{'':>{width + 3}} |{reset} {' ' * begin}{red}{'^' * (finish - begin)}{reset}"
        )
    return out


def use_color(stream=None) -> bool:
    """Colour only on a terminal, and never when NO_COLOR is set."""
    stream = stream or sys.stderr
    return bool(getattr(stream, "isatty", lambda: False)()) and "NO_COLOR" not in os.environ
