"""The sqlglot bridge: WQL's scalar expressions are Spark SQL.

The Lark grammar checks an expression's structure and keeps its exact text
and span; this module re-parses that text with sqlglot's Spark dialect and

* maps sqlglot's positions back to the ``.wql`` file (expression start +
  offset), so every error points at the offending token;
* resolves column names against a :class:`Relation` (case-insensitive, as in
  Spark), with "did you mean" suggestions for unknown ones;
* infers WQL types (sqlglot's ``annotate_types`` plus WQL's own rules for
  aggregates) and rejects the type errors it can see;
* finds aggregate calls (only the aggregates docs/language.md lists; no nesting, none where a
  per-row value is needed);
* prints canonical Spark SQL (``F.expr``/``selectExpr`` run it unchanged).

>>> rel = Relation("source clicks", (Column("amount", T.DOUBLE), Column("url", T.STRING)))
>>> src = "amount * 2 > 10"
>>> e = parse_expr(src, Span.from_offsets(src, 0, len(src)), src)
>>> bound = bind_scalar(e, rel, clause="WHERE")
>>> (bound.sql, str(bound.type), bound.columns)
('amount * 2 > 10', 'BOOLEAN', ('amount',))
"""

from __future__ import annotations

import difflib
import functools
import re
import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any, cast

import sqlglot
from sqlglot import exp
from sqlglot.dialects.dialect import Dialect
from sqlglot.dialects.spark import Spark
from sqlglot.errors import ParseError, TokenError
from sqlglot.optimizer.annotate_types import annotate_types

from wql.compiler import types as T
from wql.compiler.plan import AggKind, Column, Expr
from wql.compiler.types import WqlType
from wql.errors import ErrorCode, Span, WqlError, WqlSemanticError, WqlSyntaxError
from wql.runtime.aggregates import AGGREGATE_KINDS

DIALECT = "spark"


class WqlSpark(Spark):
    """Spark's SQL as WQL reads it: inside a single-quoted string ``''`` is one quote.

    Spark itself reads ``'it''s'`` as two adjacent literals and concatenates
    them (``its``); WQL follows the SQL standard instead, as its own lexer
    does everywhere else (``WITH`` options, interval strings), so the same
    text means the same string in every clause. Only the reading differs:
    trees are printed in Spark's dialect (``'it\\'s'``), which Spark reads
    back as the same value. Inside a double-quoted string a single quote is
    an ordinary character (``"it''s"`` keeps both).
    """

    class Tokenizer(Spark.Tokenizer):
        STRING_ESCAPES = ["\\", "'"]


# sqlglot node class -> WQL aggregate kind (COUNT is split on * / DISTINCT below).
_AGGREGATES: dict[type, AggKind] = {
    exp.Sum: AggKind.SUM,
    exp.Min: AggKind.MIN,
    exp.Max: AggKind.MAX,
    exp.Avg: AggKind.AVG,
    exp.FirstValue: AggKind.FIRST_VALUE,
    exp.LastValue: AggKind.LAST_VALUE,
    exp.ArrayAgg: AggKind.COLLECT_LIST,
}
SUPPORTED_AGGREGATES = (
    "COUNT(*)",
    "COUNT(x)",
    "COUNT(DISTINCT x)",
    "SUM",
    "MIN",
    "MAX",
    "AVG",
    "FIRST_VALUE",
    "LAST_VALUE",
    "COLLECT_LIST",
)
_HINTS = {
    "FIRST": "use FIRST_VALUE(x) (first by event time, then arrival)",
    "LAST": "use LAST_VALUE(x) (last by event time, then arrival)",
    "ANY_VALUE": "use FIRST_VALUE(x)",
}

# Spark's ANSI reserved words (and WQL's window column names are not among
# them): identifiers spelled like these are printed back-quoted.
_RESERVED = frozenset(
    [
        "all",
        "and",
        "any",
        "array",
        "as",
        "asc",
        "at",
        "authorization",
        "between",
        "both",
        "by",
        "case",
        "cast",
        "check",
        "collate",
        "column",
        "constraint",
        "create",
        "cross",
        "cube",
        "current",
        "current_date",
        "current_time",
        "current_timestamp",
        "current_user",
        "day",
        "delete",
        "desc",
        "distinct",
        "drop",
        "else",
        "end",
        "escape",
        "except",
        "exists",
        "external",
        "false",
        "fetch",
        "filter",
        "for",
        "foreign",
        "from",
        "full",
        "function",
        "global",
        "grant",
        "group",
        "grouping",
        "having",
        "hour",
        "in",
        "inner",
        "insert",
        "intersect",
        "interval",
        "into",
        "is",
        "join",
        "lateral",
        "leading",
        "left",
        "like",
        "limit",
        "local",
        "minute",
        "month",
        "natural",
        "not",
        "null",
        "of",
        "on",
        "only",
        "or",
        "order",
        "out",
        "outer",
        "overlaps",
        "partition",
        "position",
        "primary",
        "range",
        "references",
        "revoke",
        "right",
        "rollup",
        "row",
        "rows",
        "second",
        "select",
        "session_user",
        "set",
        "some",
        "start",
        "table",
        "tablesample",
        "then",
        "time",
        "to",
        "trailing",
        "true",
        "truncate",
        "union",
        "unique",
        "unknown",
        "update",
        "user",
        "using",
        "values",
        "when",
        "where",
        "window",
        "with",
        "year",
    ]
)
_SIMPLE_IDENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


# ---------------------------------------------------------------------------
# Relations and parsed expressions


@dataclass(frozen=True)
class Relation:
    """The columns an expression may read; ``description`` names it in errors."""

    description: str
    columns: tuple[Column, ...]

    def lookup(self, name: str) -> Column | None:
        low = name.lower()
        return next((c for c in self.columns if c.name.lower() == low), None)


@dataclass
class ParsedExpr:
    """A sqlglot tree plus what is needed to map its positions to the ``.wql`` file.

    The binding functions rewrite ``node`` in place: bind a ParsedExpr once.

    ``text`` is the expression exactly as written; ``offset`` is where it
    starts in ``source``. ``pristine`` is sqlglot's tree for ``text``, shared
    by every expression with the same text and never modified; ``node`` is
    this expression's own copy of it, made on first use (a binding found in
    the cache never needs one: copying is a large part of binding's cost).
    """

    pristine: exp.Expression
    text: str
    offset: int
    source: str
    span: Span
    _node: exp.Expression | None = field(default=None, init=False, repr=False)

    @property
    def node(self) -> exp.Expression:
        if self._node is None:
            self._node = self.pristine.copy()
        return self._node

    def span_of(self, node: exp.Expression) -> Span:
        """The ``.wql`` span of a sub-tree (the whole expression when unknown)."""
        starts: list[int] = []
        ends: list[int] = []
        for n in node.walk():
            meta = n.meta
            if "start" in meta and "end" in meta:
                starts.append(meta["start"])
                ends.append(meta["end"] + 1)
        if not starts:
            return self.span
        start, end = min(starts), max(ends)
        if node.find(exp.Interval) is not None:
            # sqlglot keeps no position for the INTERVAL keyword, only its value.
            keyword = _INTERVAL_BEFORE.search(self.text, 0, start)
            if keyword is not None:
                start = keyword.start()
        if isinstance(node, (exp.Func, exp.Paren)) or node.find(exp.Func):
            end = max(end, _closing_paren_end(self.text, end))
        if isinstance(node, exp.Column):
            end = _identifier_end(self.text, end)
        return Span.from_offsets(self.source, self.offset + start, self.offset + end)

    def error(
        self, message: str, node: exp.Expression | None = None, *, code: ErrorCode, **kw: Any
    ) -> WqlSemanticError:
        """A semantic error at ``node`` (the whole expression without one)."""
        return WqlSemanticError(
            message, self.span_of(node) if node is not None else self.span, code=code, **kw
        )


_INTERVAL_BEFORE = re.compile(r"\bINTERVAL\s*\Z", re.IGNORECASE)


def _identifier_end(text: str, end: int) -> int:
    """Include a closing back-quote that sqlglot's token position leaves out."""
    return end + 1 if end < len(text) and text[end] == "`" else end


def _closing_paren_end(text: str, pos: int) -> int:
    """Offset just past the ``)`` closing the innermost group open at ``pos``.

    sqlglot records positions of names and literals only; a function call's
    span should still cover its argument list. Quotes are skipped.
    """
    depth = 0
    i = pos
    quote: str | None = None
    while i < len(text):
        ch = text[i]
        if quote:
            if ch == quote:
                quote = None
        elif ch in "'\"`":
            quote = ch
        elif ch == "(":
            depth += 1
        elif ch == ")":
            if depth == 0:
                return i + 1
            depth -= 1
        i += 1
    return pos


def parse_expr(text: str, span: Span, source: str) -> ParsedExpr:
    """Parse one scalar expression written at ``span`` of ``source``.

    Syntax errors sqlglot finds become positioned WqlSyntaxErrors.
    """
    offset = span.start
    try:
        node = _parse_cached(text)
    except ParseError as e:
        info = e.errors[0] if e.errors else {}
        rel = _offset_of(text, info.get("line"), info.get("col"))
        where = Span.point(source, offset + rel) if rel is not None else span
        desc = str(info.get("description") or e).split("\n")[0]
        raise WqlSyntaxError(
            f"invalid expression: {desc}", where, code=ErrorCode.BAD_EXPRESSION
        ) from None
    except TokenError as e:
        raise WqlSyntaxError(
            f"invalid expression: {e}", span, code=ErrorCode.BAD_EXPRESSION
        ) from None
    except RecursionError:
        # The grammar's limits (wql.limits) keep sqlglot within the headroom
        # compile_source gives it; a caller without that headroom lands here.
        raise WqlSyntaxError(
            "expression too deeply nested for the SQL parser",
            span,
            hint="split the expression",
            code=ErrorCode.TOO_DEEP,
        ) from None
    except Exception as e:  # noqa: BLE001 - sqlglot's boundary: its failures are the text's
        raise WqlSyntaxError(
            f"invalid expression: the SQL parser failed ({type(e).__name__}: {e})",
            span,
            code=ErrorCode.BAD_EXPRESSION,
        ) from None
    parsed = ParsedExpr(node, text, offset, source, span)
    problem = _shape_problem(text)
    if problem is None:
        return parsed
    if problem == "empty":
        raise WqlSyntaxError("empty expression", span, code=ErrorCode.BAD_EXPRESSION)
    if problem == "alias":
        # sqlglot reads `a b` as `a AS b`; inside WQL an alias is the grammar's business.
        raise WqlSyntaxError(
            "unexpected alias inside an expression",
            parsed.span_of(node.args["alias"]),
            code=ErrorCode.BAD_EXPRESSION,
        )
    if problem == "subquery":
        raise WqlSemanticError(
            "subqueries are not supported in WQL expressions", span, code=ErrorCode.UNSUPPORTED_SQL
        )
    assert problem == "star"
    raise WqlSemanticError("* is only allowed in COUNT(*)", span, code=ErrorCode.UNSUPPORTED_SQL)


@functools.lru_cache(maxsize=4096)
def _shape_problem(text: str) -> str | None:
    """What makes ``text`` (which sqlglot parsed) unusable as a WQL expression, if anything.

    One of ``'empty'``, ``'alias'``, ``'subquery'``, ``'star'`` (in the order
    they are checked), or None. Cached per text: it walks the whole tree.
    """
    node = _parse_cached(text)
    if node is None:
        return "empty"
    if isinstance(node, exp.Alias):
        return "alias"
    if isinstance(node, (exp.Query, exp.Subquery)) or node.find(exp.Query):
        return "subquery"
    if node.find(exp.Star) and not _only_count_star(node):
        return "star"
    return None


@functools.lru_cache(maxsize=4096)
def _parse_cached(text: str) -> exp.Expression:
    """sqlglot's tree for ``text``; callers copy it (trees are mutable).

    Compiling the same text again (``wql check`` in an editor, benchmarks,
    several queries sharing expressions) skips sqlglot's parser.
    """
    if _PLAIN_NAME.match(text) and text.upper() not in _SQLGLOT_KEYWORDS:
        return _plain_column(text)
    return cast(exp.Expression, sqlglot.parse_one(text, read=WqlSpark))


# A bare column name -- the most common expression (keys, SELECT items,
# aggregate arguments) -- is built directly: the tree sqlglot would build,
# position metadata included, without running its tokenizer and parser.
# Any word sqlglot's Spark tokenizer or parser knows by name (TRUE,
# CURRENT_DATE, IF, function names, ...) still goes through sqlglot, since
# some of them parse as something else.
_PLAIN_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")


def _sqlglot_words() -> frozenset[str]:
    dialect = Dialect.get_or_raise(DIALECT)
    words: set[str] = set()
    for cls in (dialect.tokenizer_class, dialect.parser_class):
        for attr in dir(cls):
            value = getattr(cls, attr, None)
            if isinstance(value, (dict, set, frozenset)):
                words.update(k.upper() for k in value if isinstance(k, str))
    return frozenset(words)


_SQLGLOT_KEYWORDS = _sqlglot_words()


def _plain_column(name: str) -> exp.Column:
    ident = exp.Identifier(this=name, quoted=False)
    ident.meta.update(line=1, col=len(name), start=0, end=len(name) - 1)
    return exp.Column(this=ident)


def _only_count_star(node: exp.Expression) -> bool:
    return all(isinstance(s.parent, exp.Count) for s in node.find_all(exp.Star))


def _offset_of(text: str, line: int | None, col: int | None) -> int | None:
    """Offset of sqlglot's (1-based line, 1-based column of a token's last char)."""
    if line is None or col is None:
        return None
    lines = text.split("\n")
    if not 1 <= line <= len(lines):
        return None
    base = sum(len(x) + 1 for x in lines[: line - 1])
    return max(0, min(len(text) - 1, base + col - 1))


# ---------------------------------------------------------------------------
# Printing and names


def conjuncts(node: exp.Expression) -> list[exp.Expression]:
    """The terms of a condition's top-level AND chain (parentheses looked through)."""
    if isinstance(node, exp.Paren):
        return conjuncts(cast(exp.Expression, node.this))
    if isinstance(node, exp.And):
        left, right = cast(exp.Expression, node.left), cast(exp.Expression, node.right)
        return conjuncts(left) + conjuncts(right)
    return [node]


def sql_conjuncts(sql: str) -> list[exp.Expression]:
    """The terms of the top-level AND chain of a condition given as Spark SQL text."""
    return conjuncts(_parse_cached(sql).copy())


def quote_name(name: str) -> str:
    """A column name as Spark SQL: bare when safe, else back-quoted."""
    if _SIMPLE_IDENT.match(name) and name.lower() not in _RESERVED:
        return name
    return "`" + name.replace("`", "``") + "`"


def column_node(name: str) -> exp.Column:
    safe = bool(_SIMPLE_IDENT.match(name)) and name.lower() not in _RESERVED
    return exp.column(name, quoted=not safe)


def to_sql(node: exp.Expression) -> str:
    """Canonical Spark SQL for a (resolved) sqlglot tree."""
    if type(node) is exp.Column:
        # Most bound expressions are one column (a key, an aggregate's
        # argument, ``__agg_<i>``): print it as sqlglot's Spark generator
        # would, without paying for the generator.
        ident = node.this
        if (
            type(ident) is exp.Identifier
            and all(v is None for k, v in node.args.items() if k != "this")
            and not (node.comments or ident.comments)
            and isinstance(ident.this, str)
        ):
            name = ident.this
            if ident.args.get("quoted"):
                return "`" + name.replace("`", "``") + "`"
            if _SIMPLE_IDENT.match(name) and name.lower() not in _RESERVED:
                return name
    return node.sql(dialect=DIALECT)


def _referenced_columns(node: exp.Expression) -> tuple[str, ...]:
    seen: dict[str, None] = {}
    for c in node.find_all(exp.Column):
        seen.setdefault(c.name, None)
    return tuple(seen)


def _dotted(col: exp.Column) -> str:
    return ".".join(p.name for p in col.parts)


# ---------------------------------------------------------------------------
# Types


def _to_wql_type(dt: exp.DataType | None) -> WqlType:
    if dt is None:
        return T.UNKNOWN
    t = dt.this
    D = exp.DataType.Type
    simple = {
        D.VARCHAR: T.STRING,
        D.CHAR: T.STRING,
        D.TEXT: T.STRING,
        D.NVARCHAR: T.STRING,
        D.NCHAR: T.STRING,
        D.TINYINT: T.TINYINT,
        D.SMALLINT: T.SMALLINT,
        D.INT: T.INT,
        D.BIGINT: T.BIGINT,
        D.FLOAT: T.FLOAT,
        D.DOUBLE: T.DOUBLE,
        D.BOOLEAN: T.BOOLEAN,
        D.TIMESTAMP: T.TIMESTAMP,
        D.TIMESTAMPTZ: T.TIMESTAMP,
        D.TIMESTAMPLTZ: T.TIMESTAMP,
        D.TIMESTAMPNTZ: T.TIMESTAMP,
        D.DATETIME: T.TIMESTAMP,
        D.DATE: T.DATE,
        D.BINARY: T.BINARY,
        D.VARBINARY: T.BINARY,
        D.INTERVAL: T.INTERVAL,
        D.NULL: T.NULL,
    }
    if t in simple:
        return simple[t]
    if t == D.DECIMAL:
        params = [p.this.this if isinstance(p.this, exp.Literal) else None for p in dt.expressions]
        try:
            precision = int(str(params[0])) if params else 10
            scale = int(str(params[1])) if len(params) > 1 else 0
            return T.DECIMAL(precision, scale)
        except (TypeError, ValueError):
            return T.UNKNOWN
    if t == D.ARRAY and dt.expressions:
        inner = dt.expressions[0]
        return T.array_of(_to_wql_type(inner if isinstance(inner, exp.DataType) else None))
    return T.UNKNOWN


def _sqlglot_type(t: WqlType) -> str:
    if t.kind in ("UNKNOWN",):
        return "UNKNOWN"
    if t.kind == "INTERVAL":
        return "INTERVAL"
    return t.ddl


_REL = "__wql_rel"


def infer_type(node: exp.Expression, relation: Relation, pe: ParsedExpr | None = None) -> WqlType:
    """The WQL type of a resolved expression (UNKNOWN when sqlglot cannot tell).

    Interval arithmetic is typed by WQL's own rules (:class:`_IntervalTyper`);
    with ``pe`` given, arithmetic Spark would reject (``INTERVAL + 1``, a CASE
    mixing an interval with a number, ...) is a positioned error, else UNKNOWN.
    """
    if isinstance(node, exp.Column):
        col = relation.lookup(node.name)
        if col is not None:
            return col.type
    try:
        typed = _IntervalTyper(relation).check(node)
    except _IntervalMismatch as bad:
        if pe is None:
            return T.UNKNOWN
        raise pe.error(
            bad.message, cast(exp.Expression, bad.node), hint=bad.hint, code=ErrorCode.WRONG_TYPE
        ) from None
    if typed is not None:
        return typed
    return _sqlglot_infer(node, relation)


def _sqlglot_infer(node: exp.Expression, relation: Relation) -> WqlType:
    if isinstance(node, exp.Column):
        col = relation.lookup(node.name)
        if col is not None:
            return col.type
    copy = node.copy()
    for c in copy.find_all(exp.Column):
        c.set("table", exp.to_identifier(_REL))
    schema: dict[str, object] = {_REL: {c.name: _sqlglot_type(c.type) for c in relation.columns}}
    try:
        annotated = annotate_types(exp.select(copy).from_(_REL), schema=schema, dialect=DIALECT)
    except Exception:  # sqlglot's inference is best-effort: Spark checks at run time
        return T.UNKNOWN
    return _to_wql_type(annotated.expressions[0].type)


class _IntervalMismatch(Exception):
    def __init__(self, node: exp.Expr, message: str, hint: str | None = None) -> None:
        super().__init__(message)
        self.node, self.message, self.hint = node, message, hint


_INTERVAL_FUNCTIONS = frozenset({"MAKE_DT_INTERVAL"})
_YEAR_MONTH_UNITS = frozenset({"YEAR", "YEARS", "MONTH", "MONTHS"})


class _IntervalTyper:
    """Spark's typing of day-time interval arithmetic, which sqlglot gets wrong.

    sqlglot types ``g * INTERVAL '1' SECOND`` as the left operand (INT) and
    ``INTERVAL '1' SECOND - g`` as an interval; Spark's rules (checked on
    Spark 4) are: interval ± interval, interval × number, number × interval
    and interval ÷ number are intervals; timestamp − timestamp is an
    interval; timestamp ± interval is a timestamp; a CASE/IF/COALESCE with
    an interval branch is an interval when every other branch is an
    interval or NULL. Anything else that puts an interval next to a
    number (``INTERVAL '1' SECOND + 1``, ``1 / INTERVAL '1' SECOND``,
    ``INTERVAL * INTERVAL``, ``%``, mixed CASE branches) Spark rejects, and
    so does WQL, at the offending operand.

    :meth:`check` returns None for an expression with no interval in its
    result (sqlglot's inference then decides) and checks every
    sub-expression, so a mismatch inside a function call is found too.
    """

    def __init__(self, relation: Relation) -> None:
        self.relation = relation

    def check(self, node: exp.Expr) -> WqlType | None:
        for sub in node.find_all(exp.Binary, exp.Case, exp.If, exp.Coalesce, exp.Cast):
            if sub is not node:
                self.type_of(sub)
        return self.type_of(node)

    def plain(self, node: exp.Expr) -> WqlType:
        """The type of an operand that is not an interval (sqlglot's inference)."""
        if isinstance(node, exp.Null):
            return T.NULL
        return _sqlglot_infer(cast(exp.Expression, node), self.relation)

    def type_of(self, n: exp.Expr) -> WqlType | None:
        if isinstance(n, exp.Interval):
            if n.args.get("unit") is None and not any(ch.isalpha() for ch in n.this.name):
                # WQL's grammar requires a unit, so this is sqlglot reading
                # `INTERVAL '1' SECOND + 1` as `... + INTERVAL '1'`.
                raise _IntervalMismatch(
                    n,
                    "a number cannot be added to an INTERVAL",
                    hint="write the number as an interval, e.g. n * INTERVAL '1' SECOND",
                )
            return T.INTERVAL
        if isinstance(n, (exp.Paren, exp.Neg, exp.Abs)):
            return self.type_of(n.this)
        if isinstance(n, exp.Column):
            col = self.relation.lookup(n.name)
            return T.INTERVAL if col is not None and col.type == T.INTERVAL else None
        if isinstance(n, exp.Cast):
            return self._cast(n)
        if isinstance(n, exp.Anonymous) and str(n.this).upper() in _INTERVAL_FUNCTIONS:
            return T.INTERVAL
        if isinstance(n, (exp.Add, exp.Sub, exp.Mul, exp.Div, exp.Mod)):
            return self._arithmetic(n)
        if isinstance(n, (exp.Case, exp.If, exp.Coalesce)):
            return self._branches(n)
        return None

    def _cast(self, n: exp.Cast) -> WqlType | None:
        to = n.args.get("to")
        target = to.this if isinstance(to, exp.DataType) else None
        if isinstance(target, exp.Interval):
            units = {u.name.upper() for u in target.find_all(exp.Var)}
            if units & _YEAR_MONTH_UNITS:
                raise _IntervalMismatch(
                    n, "year-month intervals have no fixed length in milliseconds"
                )
            return T.INTERVAL
        if target == exp.DataType.Type.INTERVAL:
            return T.INTERVAL
        return None

    def _arithmetic(self, n: exp.Binary) -> WqlType | None:
        left, right = self.type_of(n.left), self.type_of(n.right)
        op = {exp.Add: "+", exp.Sub: "-", exp.Mul: "*", exp.Div: "/", exp.Mod: "%"}[type(n)]
        if left is None and right is None:
            if isinstance(n, exp.Sub) and all(
                self.plain(x) == T.TIMESTAMP for x in (n.left, n.right)
            ):
                return T.INTERVAL  # Spark: timestamp - timestamp is a day-time interval
            return None
        if left is not None and right is not None:  # interval op interval
            if isinstance(n, (exp.Add, exp.Sub)):
                return T.INTERVAL
            raise _IntervalMismatch(n, f"INTERVAL {op} INTERVAL is not defined")
        interval_side, other = (n.left, n.right) if left is not None else (n.right, n.left)
        other_type = self.plain(other)
        if isinstance(n, exp.Mul) or (isinstance(n, exp.Div) and other is n.right):
            if other_type.is_numeric or other_type.is_unknown or other_type.kind == "STRING":
                return T.INTERVAL
            raise _IntervalMismatch(
                other, f"an INTERVAL can be multiplied or divided by a number, not by {other_type}"
            )
        if isinstance(n, exp.Div):
            raise _IntervalMismatch(
                interval_side,
                "a number cannot be divided by an INTERVAL",
                hint="divide the interval by the number instead",
            )
        if isinstance(n, (exp.Add, exp.Sub)) and other_type.is_temporal:
            if isinstance(n, exp.Sub) and other is n.right:
                raise _IntervalMismatch(
                    other, f"a {other_type} cannot be subtracted from an INTERVAL"
                )
            return None  # timestamp +- interval: sqlglot types it (TIMESTAMP)
        if other_type.is_unknown:
            return None
        if isinstance(n, exp.Mod):
            raise _IntervalMismatch(n, "% is not defined on an INTERVAL")
        raise _IntervalMismatch(
            other,
            f"INTERVAL {op} {other_type} is not defined: an INTERVAL is added to or "
            "subtracted from an INTERVAL or a TIMESTAMP",
            hint="write the number as an interval, e.g. n * INTERVAL '1' SECOND"
            if other_type.is_numeric
            else None,
        )

    def _branches(self, n: exp.Expr) -> WqlType | None:
        if isinstance(n, exp.Case):
            branches = [i.args.get("true") for i in n.args.get("ifs") or []]
            branches.append(n.args.get("default"))
        elif isinstance(n, exp.If):
            branches = [n.args.get("true"), n.args.get("false")]
        else:
            branches = [n.this, *n.expressions]
        present = [b for b in branches if b is not None]
        types = [self.type_of(b) for b in present]
        if all(t is None for t in types):
            return None
        for b, t in zip(present, types, strict=True):
            if t is None and not isinstance(b, exp.Null):
                other = self.plain(b)
                if other.kind != "NULL" and not other.is_unknown:
                    raise _IntervalMismatch(
                        b,
                        f"this branch is {other} but another branch is an INTERVAL: "
                        "every branch must be an INTERVAL (or NULL)",
                        hint="e.g. n * INTERVAL '1' SECOND",
                    )
        return T.INTERVAL


def aggregate_type(kind: AggKind, arg: WqlType | None) -> WqlType | None:
    """Spark's result type of an aggregate; None when ``arg`` cannot be aggregated so.

    The kind's result class comes from the runtime's table of aggregate kinds
    (``wql.runtime.aggregates.AGGREGATE_KINDS``); Spark's rule for each class is here.
    """
    output = AGGREGATE_KINDS[kind.value].output
    if output == "BIGINT":
        return T.BIGINT
    assert arg is not None
    if output in ("SUM", "AVG"):
        if arg.is_unknown:
            return T.DOUBLE if output == "AVG" or arg.kind == "NULL" else T.UNKNOWN
        if arg.kind == "DECIMAL":
            assert arg.precision is not None and arg.scale is not None
            if output == "SUM":
                return T.DECIMAL(min(38, arg.precision + 10), arg.scale)
            return T.DECIMAL(min(38, arg.precision + 4), min(38, arg.scale + 4))
        if arg.is_integral:
            return T.BIGINT if output == "SUM" else T.DOUBLE
        if arg.kind in ("FLOAT", "DOUBLE"):
            return T.DOUBLE
        if arg.kind == "INTERVAL":
            return T.INTERVAL
        return None
    if output == "ARG":
        return arg
    if output == "ARRAY":
        return T.array_of(arg)
    raise AssertionError(output)


# ---------------------------------------------------------------------------
# Binding


def _resolve_columns(
    pe: ParsedExpr,
    node: exp.Expression,
    relation: Relation,
    table_names: Iterable[str],
    errors: list[WqlError],
    *,
    forbid: Callable[[exp.Column, Column], str | None] | None = None,
) -> exp.Expression:
    """Rewrite every column reference to the relation's spelling; collect errors.

    ``table_names`` are the qualifiers accepted (``clicks.url``); ``forbid``
    may veto a resolved column with a message (e.g. a source column outside
    GROUP BY in SELECT).
    """
    tables = {t.lower() for t in table_names}

    def fix(n: exp.Expression) -> exp.Expression:
        if not isinstance(n, exp.Column) or n.meta.get("wql_agg"):
            return n
        if n.table and (n.table.lower() not in tables or n.args.get("db")):
            errors.append(
                pe.error(
                    f"unknown table {n.table!r} in {_dotted(n)!r}",
                    n,
                    hint=f"columns here come from {relation.description}",
                    code=ErrorCode.UNKNOWN_NAME,
                )
            )
            return n
        col = relation.lookup(n.name)
        if col is None:
            errors.append(unknown_column(pe, n, relation))
            return n
        if forbid is not None:
            msg = forbid(n, col)
            if msg:
                errors.append(pe.error(msg, n, code=ErrorCode.NOT_FOR_WINDOW))
                return n
        new = column_node(col.name)
        new.meta.update(n.this.meta if isinstance(n.this, exp.Identifier) else {})
        return new

    return node.transform(fix, copy=False)


def unknown_column(pe: ParsedExpr, n: exp.Column, relation: Relation) -> WqlSemanticError:
    names = [c.name for c in relation.columns if not c.name.startswith("__")]
    by_lower = {c.lower(): c for c in names}
    close = difflib.get_close_matches(n.name.lower(), list(by_lower), n=3, cutoff=0.6)
    hint = f"did you mean {', '.join(repr(by_lower[c]) for c in close)}?" if close else None
    return pe.error(
        f"unknown column {n.name!r} in {relation.description}",
        n,
        expected=names,
        hint=hint,
        code=ErrorCode.UNKNOWN_NAME,
    )


def find_aggregate_calls(node: exp.Expression) -> list[exp.Expression]:
    """Outermost aggregate calls in ``node`` (any AggFunc, supported or not)."""
    found: list[exp.Expression] = []

    def visit(n: exp.Expression) -> None:
        if isinstance(n, exp.AggFunc):
            found.append(n)
            return
        for child in n.iter_expressions():
            visit(child)

    visit(node)
    return found


def reject_aggregates(pe: ParsedExpr, node: exp.Expression, clause: str) -> list[WqlError]:
    """Errors for aggregate calls or OVER windows where a per-row value is needed."""
    errs: list[WqlError] = [
        pe.error(
            f"aggregate {_func_name(a)} is not allowed in {clause}", a, code=ErrorCode.AGGREGATE
        )
        for a in find_aggregate_calls(node)
    ]
    errs += [
        pe.error(f"OVER windows are not allowed in {clause}", w, code=ErrorCode.AGGREGATE)
        for w in node.find_all(exp.Window)
    ]
    return errs


def _func_name(n: exp.Expression) -> str:
    if isinstance(n, exp.Anonymous):
        return str(n.this).upper()
    return n.sql(dialect=DIALECT).split("(")[0].strip().upper() or n.key.upper()


def bind_scalar(
    pe: ParsedExpr,
    relation: Relation,
    *,
    clause: str,
    table_names: Iterable[str] = (),
) -> Expr:
    """Bind a per-row expression (WHERE, key, gap, DELTA, aggregate argument).

    Raises WqlSemanticError (or WqlErrors for several) on unknown columns or
    aggregates.
    """
    tables = tuple(table_names)
    key = (pe.text, relation, clause, tables)
    hit = _SCALAR_BINDINGS.get(key)
    if hit is not None:
        return Expr(hit[0], hit[1], hit[2], pe.span)
    errors: list[WqlError] = reject_aggregates(pe, pe.node, clause)
    node = _resolve_columns(pe, pe.node, relation, tables, errors)
    raise_all(errors)
    bound = Expr(to_sql(node), infer_type(node, relation, pe), _referenced_columns(node), pe.span)
    _SCALAR_BINDINGS.put(key, (bound.sql, bound.type, bound.columns))
    return bound


class _Memo:
    """A bounded dict of successful bindings (oldest entries are dropped first).

    Binding is a pure function of the expression's text and what it may
    read (relation, clause, qualifiers, and for SELECT/HAVING the context
    and the aggregates already registered), so a text bound before in the
    same situation -- ``wql check`` re-run in an editor, the same file
    compiled again, an expression repeated across queries -- reuses the
    result instead of copying, resolving, printing and typing the sqlglot
    tree again. Only successes are kept: errors carry positions.
    """

    def __init__(self, maxsize: int) -> None:
        self.maxsize = maxsize
        self.entries: dict[object, tuple] = {}
        # Compiles may run in several threads (embedded use): eviction
        # iterates the dict, which must not change meanwhile.
        self._lock = threading.Lock()

    def get(self, key: object) -> tuple | None:
        return self.entries.get(key)

    def put(self, key: object, value: tuple) -> None:
        with self._lock:
            if len(self.entries) >= self.maxsize:
                self.entries.pop(next(iter(self.entries)), None)
            self.entries[key] = value

    def clear(self) -> None:
        with self._lock:
            self.entries.clear()


_SCALAR_BINDINGS = _Memo(4096)
_POST_BINDINGS = _Memo(4096)


def clear_caches() -> None:
    """Forget every cached parse and binding (benchmarks time cold binding with it)."""
    _parse_cached.cache_clear()
    _shape_problem.cache_clear()
    _SCALAR_BINDINGS.clear()
    _POST_BINDINGS.clear()


def raise_all(errors: list[WqlError]) -> None:
    from wql.errors import WqlErrors

    if len(errors) == 1:
        raise errors[0]
    if errors:
        raise WqlErrors(errors)


@dataclass
class AggregateRegistry:
    """Aggregates of one query, shared between SELECT and HAVING by (kind, argument SQL)."""

    entries: list[tuple[AggKind, Expr | None, WqlType, Span]]

    def __init__(self) -> None:
        self.entries = []
        self.log: list[tuple[AggKind, Expr | None, WqlType, Span]] | None = None

    def signature(self) -> tuple:
        """The entries without spans: what binding another expression can depend on."""
        return tuple(
            (k, a.sql if a is not None else None, a.type if a is not None else None, t)
            for k, a, t, _ in self.entries
        )

    def add(self, kind: AggKind, arg: Expr | None, result: WqlType, span: Span) -> str:
        if self.log is not None:
            self.log.append((kind, arg, result, span))
        key = (kind, arg.sql if arg is not None else None)
        for i, (k, a, _, _) in enumerate(self.entries):
            if (k, a.sql if a is not None else None) == key:
                return f"__agg_{i}"
        self.entries.append((kind, arg, result, span))
        return f"__agg_{len(self.entries) - 1}"


def _classify_aggregate(
    pe: ParsedExpr, call: exp.Expression
) -> tuple[AggKind, exp.Expression | None]:
    """The WQL aggregate a call denotes, or a positioned error."""
    if isinstance(call, exp.Count):
        arg = call.this
        if isinstance(arg, exp.Star) or arg is None:
            return AggKind.COUNT_STAR, None
        if isinstance(arg, exp.Distinct):
            if len(arg.expressions) != 1:
                raise pe.error(
                    "COUNT(DISTINCT ...) takes exactly one expression",
                    call,
                    code=ErrorCode.AGGREGATE,
                )
            return AggKind.COUNT_DISTINCT, arg.expressions[0]
        return AggKind.COUNT, arg
    kind = _AGGREGATES.get(type(call))
    name = _func_name(call)
    if kind is None:
        raise pe.error(
            f"aggregate {name} is not supported",
            call,
            expected=SUPPORTED_AGGREGATES,
            hint=_HINTS.get(name),
            code=ErrorCode.AGGREGATE,
        )
    arg = call.this
    if isinstance(arg, exp.Distinct):
        raise pe.error(
            f"DISTINCT is only supported in COUNT(DISTINCT x), not in {name}",
            call,
            code=ErrorCode.AGGREGATE,
        )
    extra = [
        v
        for k, v in call.args.items()
        if k != "this" and (isinstance(v, exp.Expression) or (isinstance(v, list) and v))
    ]
    if arg is None or extra:
        raise pe.error(f"{name} takes exactly one argument", call, code=ErrorCode.AGGREGATE)
    return kind, arg


@dataclass(frozen=True)
class PostAggContext:
    """What a SELECT/HAVING expression may read.

    ``source``: the relation aggregate arguments read. ``post``: the
    post-aggregation relation (keys, window and pane columns, aggregates).
    ``key_sql``: canonical SQL of each key expression -> its column name, so
    a SELECT item that repeats a key expression reads the key column.
    ``forbidden``: post-aggregation columns this query may not read, with
    the reason (e.g. pane_timing on a count window). ``aliases``: SELECT
    output names HAVING may use (lower-cased name -> SQL over the
    post-aggregation relation), as Spark allows ``HAVING total > 10``; a
    column of the post-aggregation relation wins over an alias.
    """

    source: Relation
    post: Relation
    key_sql: tuple[tuple[str, str], ...]
    table_names: tuple[str, ...]
    forbidden: tuple[tuple[str, str], ...] = ()
    aliases: tuple[tuple[str, str], ...] = ()


def bind_post_aggregation(
    pe: ParsedExpr,
    ctx: PostAggContext,
    registry: AggregateRegistry,
    *,
    clause: str,
) -> Expr:
    """Bind a SELECT item or HAVING: aggregates -> ``__agg_<i>``, keys -> key columns.

    A column outside any aggregate must be a grouping key, a window/pane
    column; anything else is a positioned error.
    """
    key = (pe.text, ctx, clause, registry.signature())
    hit = _POST_BINDINGS.get(key)
    if hit is not None:
        sql, typ, columns, adds = hit
        # Register the same aggregates as binding did, at this text's place.
        for kind, arg, result, (start, end) in adds:
            if arg is not None:
                arg = Expr(arg[0], arg[1], arg[2], _relative_span(pe, arg[3]))
            registry.add(kind, arg, result, _relative_span(pe, (start, end)))
        return Expr(sql, typ, columns, pe.span)
    registry.log = []
    try:
        bound = _bind_post_aggregation(pe, ctx, registry, clause=clause)
        adds = tuple(
            (
                kind,
                None if arg is None else (arg.sql, arg.type, arg.columns, _offsets(pe, arg.span)),
                result,
                _offsets(pe, span),
            )
            for kind, arg, result, span in registry.log
        )
    finally:
        registry.log = None
    _POST_BINDINGS.put(key, (bound.sql, bound.type, bound.columns, adds))
    return bound


def _offsets(pe: ParsedExpr, span: Span | None) -> tuple[int, int]:
    """A span inside ``pe`` as offsets relative to the start of its text."""
    assert span is not None
    return span.start - pe.offset, span.end - pe.offset


def _relative_span(pe: ParsedExpr, offsets: tuple[int, int]) -> Span:
    return Span.from_offsets(pe.source, pe.offset + offsets[0], pe.offset + offsets[1])


def _bind_post_aggregation(
    pe: ParsedExpr,
    ctx: PostAggContext,
    registry: AggregateRegistry,
    *,
    clause: str,
) -> Expr:
    errors: list[WqlError] = []
    key_sql = dict(ctx.key_sql)
    forbidden = dict(ctx.forbidden)
    tree = pe.node

    for w in tree.find_all(exp.Window):
        errors.append(
            pe.error(
                f"OVER windows are not allowed in {clause}; the window is GROUP BY's",
                w,
                code=ErrorCode.AGGREGATE,
            )
        )
    for f in tree.find_all(exp.Filter, exp.IgnoreNulls, exp.RespectNulls):
        errors.append(
            pe.error(
                f"{f.key.upper()} modifiers on aggregates are not supported",
                f,
                code=ErrorCode.UNSUPPORTED_SQL,
            )
        )
    raise_all(errors)

    # Only keys that are expressions (not bare columns) need sub-tree matching.
    expression_keys = any(quote_name(name) != sql for sql, name in ctx.key_sql)

    def rewrite(n: exp.Expression) -> exp.Expression:
        if isinstance(n, exp.AggFunc):
            return _bind_aggregate(pe, n, ctx, registry, errors)
        if (
            expression_keys
            and not isinstance(n, (exp.Column, exp.Literal, exp.Star))
            # Keys read columns and contain no aggregate (GROUP BY rejects
            # them), so a sub-tree without columns or with an aggregate is
            # not worth copying and printing to compare.
            and n.find(exp.Column) is not None
            and n.find(exp.AggFunc) is None
        ):
            # A whole sub-expression equal to a key expression reads the key column.
            probe = n.copy()
            sub_errors: list[WqlError] = []
            probe = _resolve_columns(pe, probe, ctx.source, ctx.table_names, sub_errors)
            if not sub_errors and probe.find(exp.Column) and to_sql(probe) in key_sql:
                return column_node(key_sql[to_sql(probe)])
        return n

    def walk(n: exp.Expression) -> exp.Expression:
        replaced = rewrite(n)
        if replaced is not n:
            return replaced
        for key, value in list(n.args.items()):
            if isinstance(value, exp.Expression):
                n.set(key, walk(value))
            elif isinstance(value, list):
                n.set(key, [walk(v) if isinstance(v, exp.Expression) else v for v in value])
        return n

    tree = walk(tree)

    tables = _lower(ctx.table_names)
    post = Relation(
        ctx.post.description,
        ctx.post.columns
        + tuple(Column(f"__agg_{i}", e[2]) for i, e in enumerate(registry.entries)),
    )
    visible = ctx.source.columns + ctx.post.columns
    visible += tuple(Column(name, T.UNKNOWN) for name, _ in ctx.aliases)
    either = Relation(
        f"{ctx.source.description} or the window result",
        tuple({c.name.lower(): c for c in visible}.values()),
    )
    aliases = dict(ctx.aliases)
    # Free columns (outside aggregates): keys, window and pane columns only.
    for n in list(tree.find_all(exp.Column)):
        if n.meta.get("wql_agg") or (n.table and n.table.lower() not in tables):
            continue  # aggregates are bound; unknown qualifiers are reported below
        if post.lookup(n.name) is not None:
            continue
        if not n.table and n.name.lower() in aliases:
            replacement = _alias_tree(aliases[n.name.lower()])
            if n is tree:
                tree = replacement
            else:
                n.replace(replacement)
            continue
        src = ctx.source.lookup(n.name)
        if src is not None:
            errors.append(
                pe.error(
                    f"column {src.name!r} must appear in GROUP BY or inside an aggregate",
                    n,
                    hint=f"group by {src.name} or aggregate it, e.g. MAX({src.name})",
                    code=ErrorCode.AGGREGATE,
                )
            )
        else:
            errors.append(unknown_column(pe, n, either))
    if not errors:
        tree = _resolve_columns(
            pe,
            tree,
            post,
            ctx.table_names,
            errors,
            forbid=lambda n, col: forbidden.get(col.name.lower()),
        )
    raise_all(errors)
    return Expr(to_sql(tree), infer_type(tree, post, pe), _referenced_columns(tree), pe.span)


def _alias_tree(sql: str) -> exp.Expression:
    """An output alias's (already bound) expression, marked so it is not resolved again."""
    node = exp.Paren(this=_parse_cached(sql).copy())
    for c in node.find_all(exp.Column):
        c.meta["wql_agg"] = True
    return node


def _lower(names: Iterable[str]) -> set[str]:
    return {n.lower() for n in names}


def _bind_aggregate(
    pe: ParsedExpr,
    call: exp.Expression,
    ctx: PostAggContext,
    registry: AggregateRegistry,
    errors: list[WqlError],
) -> exp.Expression:
    # On error the call is replaced by a marked placeholder so its inner
    # columns are not diagnosed a second time as free columns.
    failed = column_node("__agg_invalid")
    failed.meta["wql_agg"] = True
    try:
        kind, arg_node = _classify_aggregate(pe, call)
    except WqlError as e:
        errors.append(e)
        return failed
    arg: Expr | None = None
    if arg_node is not None:
        nested = find_aggregate_calls(arg_node)
        if nested:
            errors.append(
                pe.error(
                    "aggregate calls cannot be nested "
                    f"({_func_name(nested[0])} inside {_func_name(call)})",
                    nested[0],
                    code=ErrorCode.AGGREGATE,
                )
            )
            return failed
        if arg_node.find(exp.Window):
            errors.append(
                pe.error(
                    "OVER windows are not allowed inside an aggregate",
                    arg_node,
                    code=ErrorCode.AGGREGATE,
                )
            )
            return failed
        sub: list[WqlError] = []
        resolved = _resolve_columns(pe, arg_node.copy(), ctx.source, ctx.table_names, sub)
        if sub:
            errors.extend(sub)
            return failed
        arg = Expr(
            to_sql(resolved),
            infer_type(resolved, ctx.source, pe),
            _referenced_columns(resolved),
            pe.span_of(arg_node),
        )
    result = aggregate_type(kind, arg.type if arg is not None else None)
    if result is None:
        assert arg is not None
        errors.append(
            pe.error(
                f"{kind.value} needs a numeric argument, got {arg.type}",
                arg_node,
                code=ErrorCode.WRONG_TYPE,
            )
        )
        return failed
    name = registry.add(kind, arg, result, pe.span_of(call))
    ref = column_node(name)
    ref.meta["wql_agg"] = True
    return ref


def interval_to_millis_sql(sql: str) -> str:
    """Spark SQL turning a day-time interval expression into BIGINT milliseconds.

    Adding a day-time interval to a timestamp is exact microsecond arithmetic
    in Spark, so measuring it from the epoch gives the interval's length.
    """
    return f"unix_millis(timestamp_millis(0) + ({sql}))"
