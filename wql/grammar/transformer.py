"""Lark parse tree -> AST (:mod:`wql.grammar.ast`).

The transformer only changes shape. It resolves no names, supplies no
defaults and checks nothing the grammar could not express except a few
purely lexical facts that the LALR grammar cannot state cheaply, all raised
as positioned :class:`~wql.errors.WqlSyntaxError`:

- exactly one window in ``GROUP BY`` (the grammar accepts any mix of keys
  and windows so that the error can say what is wrong);
- an interval string must spell ``<number> <unit>`` pairs with known units;
- integers must fit in a signed 64-bit value.

Scalar expressions stay Lark subtrees until :meth:`WqlTransformer.sql_expr`
turns them into :class:`ast.Expr` with the exact source slice and a
canonical rendering (keywords upper-case, single spaces).
"""

from __future__ import annotations

import re
from decimal import Decimal, InvalidOperation
from typing import Any, cast

from lark import Token, Transformer, Tree, v_args
from lark.tree import Meta

from wql.errors import Span, WqlSyntaxError
from wql.grammar import ast

_INT64_MAX = 2**63 - 1

# Words of a Spark-style interval string ('1 minute 30 seconds') -> unit.
_UNIT_WORDS: dict[str, ast.TimeUnit] = {}
for _unit, _words in {
    ast.TimeUnit.MILLISECOND: ("millisecond", "milliseconds", "ms"),
    ast.TimeUnit.SECOND: ("second", "seconds", "sec", "secs", "s"),
    ast.TimeUnit.MINUTE: ("minute", "minutes", "min", "mins"),
    ast.TimeUnit.HOUR: ("hour", "hours", "h"),
    ast.TimeUnit.DAY: ("day", "days", "d"),
}.items():
    for _word in _words:
        _UNIT_WORDS[_word] = _unit

_INTERVAL_PART = re.compile(r"\s*([+-]?(?:\d+\.?\d*|\.\d+))\s*([a-z]+)\s*", re.IGNORECASE)

# Token types whose text is printed as written in canonical expressions;
# every other token of an expression is a keyword or an operator.
_VERBATIM_TOKENS = frozenset({"NAME", "BACKQUOTED", "STRING", "INT", "DECIMAL", "COMP_OP"})


def span_of(meta: Meta) -> Span | None:
    """The :class:`Span` of a tree node (``None`` for an empty rule)."""
    if getattr(meta, "empty", True):
        return None
    return Span(
        meta.start_pos, meta.end_pos, meta.line, meta.column, meta.end_line, meta.end_column
    )


def token_span(token: Token) -> Span:
    """The :class:`Span` of one token."""
    return Span(
        token.start_pos or 0,
        token.end_pos or 0,
        token.line or 1,
        token.column or 1,
        token.end_line or 1,
        token.end_column or 1,
    )


def unquote_string(text: str) -> str:
    """The value of a SQL string literal (``'it''s'`` or ``'a\\'b'`` -> ``it's`` / ``a'b``)."""
    quote, body = text[0], text[1:-1]
    out: list[str] = []
    i = 0
    escapes = {"n": "\n", "t": "\t", "r": "\r", "0": "\0"}
    while i < len(body):
        ch = body[i]
        if ch == "\\" and i + 1 < len(body):
            nxt = body[i + 1]
            out.append(escapes.get(nxt, nxt))
            i += 2
        elif ch == quote and i + 1 < len(body) and body[i + 1] == quote:
            out.append(quote)
            i += 2
        else:
            out.append(ch)
            i += 1
    return "".join(out)


def unquote_ident(text: str) -> tuple[str, bool]:
    """``name`` -> (name, False); ```a``b``` -> (a`b, True)."""
    if text.startswith("`"):
        return text[1:-1].replace("``", "`"), True
    return str(text), False


@v_args(meta=True)
class WqlTransformer(Transformer[Token, ast.Script]):
    """Builds AST nodes; one method per grammar rule that becomes a node."""

    def __init__(self, source: str) -> None:
        super().__init__(visit_tokens=False)
        self.source = source

    # ------------------------------------------------------------- script

    def start(self, meta: Meta, children: list[Any]) -> ast.Script:
        return children[0]

    def script(self, meta: Meta, children: list[Any]) -> ast.Script:
        return ast.Script(statements=tuple(children), span=span_of(meta))

    # ------------------------------------------------------------- sources

    def create_source(self, meta: Meta, children: list[Any]) -> ast.CreateSource:
        name = children[0]
        columns = tuple(c for c in children[1:] if isinstance(c, ast.ColumnDef))
        watermark = next((c for c in children if isinstance(c, ast.Watermark)), None)
        options = next((c for c in children if isinstance(c, tuple)), ())
        return ast.CreateSource(name, columns, watermark, options, span=span_of(meta))

    def column_def(self, meta: Meta, children: list[Any]) -> ast.ColumnDef:
        return ast.ColumnDef(children[0], children[1], span=span_of(meta))

    def type_name(self, meta: Meta, children: list[Any]) -> ast.TypeName:
        name = children[0].upper()
        if name == "INTEGER":
            name = "INT"
        args = tuple(
            ast.Integer(self._int(tok), span=token_span(tok))
            for tok in children
            if tok.type == "INT"
        )
        return ast.TypeName(name, args, span=span_of(meta))

    def watermark(self, meta: Meta, children: list[Any]) -> ast.Watermark:
        delay = children[2] if len(children) > 2 else None
        return ast.Watermark(children[0], children[1], delay, span=span_of(meta))

    def source_options(self, meta: Meta, children: list[Any]) -> tuple[ast.SourceOption, ...]:
        return tuple(children)

    def source_option(self, meta: Meta, children: list[Any]) -> ast.SourceOption:
        return ast.SourceOption(children[0], children[1], span=span_of(meta))

    def option_key(self, meta: Meta, children: list[Token]) -> str:
        if len(children) == 1 and children[0].type == "STRING":
            return unquote_string(children[0])
        return "".join(children)

    def option_value(self, meta: Meta, children: list[Token]) -> str:
        if len(children) == 1 and children[0].type == "STRING":
            return unquote_string(children[0])
        text = "".join(children)
        return text.lower() if text.upper() in ("TRUE", "FALSE") else text

    # ------------------------------------------------------------- queries

    def create_view(self, meta: Meta, children: list[Any]) -> ast.CreateView:
        return ast.CreateView(children[0], children[1], span=span_of(meta))

    def query(self, meta: Meta, children: list[Any]) -> ast.Query:
        select = tuple(c for c in children if isinstance(c, ast.SelectItem))
        parts: dict[str, Any] = {}
        for child in children[len(select) :]:
            if isinstance(child, ast.TableRef):
                parts["source"] = child
            elif isinstance(child, ast.GroupBy):
                parts["group_by"] = child
            elif isinstance(child, tuple) and child[0] in ("where", "having"):
                parts[child[0]] = child[1]
            elif isinstance(child, ast.AllowedLateness):
                parts["lateness"] = child
            elif isinstance(child, ast.TriggerClause):
                parts["trigger"] = child
            elif isinstance(child, ast.EvictClause):
                parts["evict"] = child
            elif isinstance(child, ast.LateDataTo):
                parts["late_data"] = child
        return ast.Query(select=select, span=span_of(meta), **parts)

    def select_item(self, meta: Meta, children: list[Any]) -> ast.SelectItem:
        alias = children[1] if len(children) > 1 else None
        return ast.SelectItem(children[0], alias, span=span_of(meta))

    def table_ref(self, meta: Meta, children: list[Any]) -> ast.TableRef:
        watermark = children[1] if len(children) > 1 else None
        return ast.TableRef(children[0], watermark, span=span_of(meta))

    def where_clause(self, meta: Meta, children: list[Any]) -> tuple[str, ast.Expr]:
        return ("where", children[0])

    def having_clause(self, meta: Meta, children: list[Any]) -> tuple[str, ast.Expr]:
        return ("having", children[0])

    def group_by(self, meta: Meta, children: list[Any]) -> ast.GroupBy:
        span = span_of(meta)
        windows = [c for c in children if isinstance(c, ast.WindowSpec)]
        keys = tuple(c for c in children if isinstance(c, ast.Expr))
        if not windows:
            raise WqlSyntaxError(
                "GROUP BY needs a window",
                span,
                expected=("TUMBLE", "HOP", "CUMULATE", "SESSION", "COUNT_WINDOW", "GLOBAL"),
                hint="add one window to the GROUP BY list, e.g. TUMBLE(ts, INTERVAL '1' MINUTE)",
            )
        if len(windows) > 1:
            raise WqlSyntaxError(
                "GROUP BY has more than one window",
                windows[1].span,
                hint="a query groups by exactly one window",
            )
        return ast.GroupBy(keys, cast(ast.Window, windows[0]), span=span)

    # ------------------------------------------------------------- windows

    def tumble(self, meta: Meta, children: list[Any]) -> ast.Tumble:
        return ast.Tumble(*children, span=span_of(meta))

    def hop(self, meta: Meta, children: list[Any]) -> ast.Hop:
        return ast.Hop(*children, span=span_of(meta))

    def cumulate(self, meta: Meta, children: list[Any]) -> ast.Cumulate:
        return ast.Cumulate(*children, span=span_of(meta))

    def session(self, meta: Meta, children: list[Any]) -> ast.Session:
        return ast.Session(*children, span=span_of(meta))

    def dynamic_session(self, meta: Meta, children: list[Any]) -> ast.DynamicSession:
        return ast.DynamicSession(*children, span=span_of(meta))

    def count_window(self, meta: Meta, children: list[Any]) -> ast.CountWindow:
        return ast.CountWindow(*children, span=span_of(meta))

    def global_window(self, meta: Meta, children: list[Any]) -> ast.GlobalWindow:
        return ast.GlobalWindow(span=span_of(meta))

    def proctime(self, meta: Meta, children: list[Any]) -> ast.ProcTime:
        return ast.ProcTime(span=span_of(meta))

    # ------------------------------------------------------------- intervals

    def interval(self, meta: Meta, children: list[Any]) -> ast.Interval:
        span = span_of(meta)
        text = self.source[meta.start_pos : meta.end_pos]
        value = children[0]
        unit = children[1] if len(children) > 1 else None
        if isinstance(value, Token):  # a quoted string
            body = unquote_string(value)
            if unit is not None:
                number = _parse_decimal(body.strip())
                if number is None:
                    raise WqlSyntaxError(
                        f"interval value {value} is not a number",
                        token_span(value),
                        hint=f"write e.g. INTERVAL '5' {unit.name}",
                    )
                parts: tuple[ast.IntervalPart, ...] = (
                    ast.IntervalPart(number, unit, span=token_span(value)),
                )
            elif _parse_decimal(body.strip()) is not None:
                raise WqlSyntaxError(
                    f"interval {value} needs a unit",
                    span,
                    expected=("MILLISECOND", "SECOND", "MINUTE", "HOUR", "DAY"),
                    hint=f"write e.g. INTERVAL {value} SECOND or INTERVAL '{body.strip()} seconds'",
                )
            else:
                parts = self._interval_string(value, body)
        else:
            if unit is None:
                raise WqlSyntaxError(
                    "interval needs a unit",
                    span,
                    expected=("MILLISECOND", "SECOND", "MINUTE", "HOUR", "DAY"),
                    hint="write e.g. INTERVAL '5' SECOND or INTERVAL '5 seconds'",
                )
            parts = (ast.IntervalPart(value, unit, span=span),)
        return ast.Interval(parts, text, span=span)

    def _interval_string(self, token: Token, body: str) -> tuple[ast.IntervalPart, ...]:
        """Parse a Spark-style interval string such as ``'1 minute 30 seconds'``."""
        parts: list[ast.IntervalPart] = []
        pos = 0
        base = (token.start_pos or 0) + 1  # offsets inside the quotes
        while pos < len(body):
            match = _INTERVAL_PART.match(body, pos)
            if match is None or match.end() == pos:
                rest = body[pos:].strip() or body
                start = base + body.find(rest, pos) if rest else base
                raise WqlSyntaxError(
                    f"cannot read interval {token}: expected '<number> <unit>' at {rest!r}",
                    Span.from_offsets(self.source, start, start + len(rest)),
                    hint="e.g. INTERVAL '5 seconds' or INTERVAL '1 minute 30 seconds'",
                )
            word = match.group(2).lower()
            unit = _UNIT_WORDS.get(word)
            if unit is None:
                start = base + match.start(2)
                raise WqlSyntaxError(
                    f"unknown interval unit {match.group(2)!r}",
                    Span.from_offsets(self.source, start, start + len(word)),
                    expected=("millisecond", "second", "minute", "hour", "day"),
                )
            number = _parse_decimal(match.group(1))
            assert number is not None  # the regex only matches numbers
            part_span = Span.from_offsets(self.source, base + match.start(1), base + match.end(2))
            parts.append(ast.IntervalPart(number, unit, span=part_span))
            pos = match.end()
        if not parts:
            raise WqlSyntaxError(
                f"empty interval {token}",
                token_span(token),
                hint="e.g. INTERVAL '5 seconds'",
            )
        return tuple(parts)

    def signed_number(self, meta: Meta, children: list[Any]) -> Decimal:
        number = _parse_decimal(children[-1])
        assert number is not None
        return -number if self._negative(meta) else number

    def unit_millisecond(self, meta: Meta, children: list[Any]) -> ast.TimeUnit:
        return ast.TimeUnit.MILLISECOND

    def unit_second(self, meta: Meta, children: list[Any]) -> ast.TimeUnit:
        return ast.TimeUnit.SECOND

    def unit_minute(self, meta: Meta, children: list[Any]) -> ast.TimeUnit:
        return ast.TimeUnit.MINUTE

    def unit_hour(self, meta: Meta, children: list[Any]) -> ast.TimeUnit:
        return ast.TimeUnit.HOUR

    def unit_day(self, meta: Meta, children: list[Any]) -> ast.TimeUnit:
        return ast.TimeUnit.DAY

    # ------------------------------------------------------------- clauses

    def allowed_lateness(self, meta: Meta, children: list[Any]) -> ast.AllowedLateness:
        return ast.AllowedLateness(children[0], span=span_of(meta))

    def trigger_clause(self, meta: Meta, children: list[Any]) -> ast.TriggerClause:
        return ast.TriggerClause(children[0], span=span_of(meta))

    def evict_clause(self, meta: Meta, children: list[Any]) -> ast.EvictClause:
        position = children[1] if len(children) > 1 else None
        return ast.EvictClause(children[0], position, span=span_of(meta))

    def before(self, meta: Meta, children: list[Any]) -> ast.EvictPosition:
        return ast.EvictPosition.BEFORE

    def after(self, meta: Meta, children: list[Any]) -> ast.EvictPosition:
        return ast.EvictPosition.AFTER

    def late_data_to(self, meta: Meta, children: list[Any]) -> ast.LateDataTo:
        return ast.LateDataTo(children[1], span=span_of(meta))

    # ------------------------------------------------------------- triggers

    def watermark_trigger(self, meta: Meta, children: list[Any]) -> ast.WatermarkTrigger:
        return ast.WatermarkTrigger(span=span_of(meta))

    def processing_time_trigger(self, meta: Meta, children: list[Any]) -> ast.ProcessingTimeTrigger:
        return ast.ProcessingTimeTrigger(span=span_of(meta))

    def count_trigger(self, meta: Meta, children: list[Any]) -> ast.CountTrigger:
        return ast.CountTrigger(children[0], span=span_of(meta))

    def every_trigger(self, meta: Meta, children: list[Any]) -> ast.EveryTrigger:
        domain = children[1] if len(children) > 1 else None
        return ast.EveryTrigger(children[0], domain, span=span_of(meta))

    def event_domain(self, meta: Meta, children: list[Any]) -> ast.TimeDomain:
        return ast.TimeDomain.EVENT

    def processing_domain(self, meta: Meta, children: list[Any]) -> ast.TimeDomain:
        return ast.TimeDomain.PROCESSING

    def delta_trigger(self, meta: Meta, children: list[Any]) -> ast.DeltaTrigger:
        return ast.DeltaTrigger(children[0], children[1], span=span_of(meta))

    def timeout_trigger(self, meta: Meta, children: list[Any]) -> ast.TimeoutTrigger:
        return ast.TimeoutTrigger(children[0], children[1], span=span_of(meta))

    def purging_trigger(self, meta: Meta, children: list[Any]) -> ast.PurgingTrigger:
        return ast.PurgingTrigger(children[0], span=span_of(meta))

    def any_trigger(self, meta: Meta, children: list[Any]) -> ast.AnyTrigger:
        return ast.AnyTrigger(tuple(children), span=span_of(meta))

    def all_trigger(self, meta: Meta, children: list[Any]) -> ast.AllTrigger:
        return ast.AllTrigger(tuple(children), span=span_of(meta))

    def early_late_trigger(self, meta: Meta, children: list[Any]) -> ast.EarlyLateTrigger:
        early = next((t for kind, t in children if kind == "early"), None)
        late = next((t for kind, t in children if kind == "late"), None)
        return ast.EarlyLateTrigger(early, late, span=span_of(meta))

    def early_firing(self, meta: Meta, children: list[Any]) -> tuple[str, ast.Trigger]:
        return ("early", children[0])

    def late_firing(self, meta: Meta, children: list[Any]) -> tuple[str, ast.Trigger]:
        return ("late", children[0])

    # ------------------------------------------------------------- evictors

    def count_evictor(self, meta: Meta, children: list[Any]) -> ast.CountEvictor:
        return ast.CountEvictor(children[0], span=span_of(meta))

    def time_evictor(self, meta: Meta, children: list[Any]) -> ast.TimeEvictor:
        return ast.TimeEvictor(children[0], span=span_of(meta))

    def delta_evictor(self, meta: Meta, children: list[Any]) -> ast.DeltaEvictor:
        return ast.DeltaEvictor(children[0], children[1], span=span_of(meta))

    # ------------------------------------------------------------- leaves

    def integer(self, meta: Meta, children: list[Any]) -> ast.Integer:
        value = self._int(children[-1])
        return ast.Integer(-value if self._negative(meta) else value, span=span_of(meta))

    def number(self, meta: Meta, children: list[Any]) -> ast.Number:
        value = _parse_decimal(children[-1])
        assert value is not None
        return ast.Number(-value if self._negative(meta) else value, span=span_of(meta))

    def ident(self, meta: Meta, children: list[Token]) -> ast.Ident:
        name, quoted = unquote_ident(children[0])
        return ast.Ident(name, quoted, span=span_of(meta))

    def sql_expr(self, meta: Meta, children: list[Any]) -> ast.Expr:
        text = self.source[meta.start_pos : meta.end_pos]
        return ast.Expr(text, _join(children), span=span_of(meta))

    # ------------------------------------------------------------- helpers

    def _negative(self, meta: Meta) -> bool:
        return self.source[meta.start_pos : meta.end_pos].lstrip().startswith("-")

    def _int(self, token: Token) -> int:
        value = int(token)
        if value > _INT64_MAX:
            raise WqlSyntaxError(f"integer {token} does not fit in 64 bits", token_span(token))
        return value


def _parse_decimal(text: str) -> Decimal | None:
    try:
        value = Decimal(text)
    except InvalidOperation:
        return None
    return value if value.is_finite() else None


# --------------------------------------------------------------------------- canonical SQL text

_UPPER_NAME_RULES = frozenset({"sql_type", "sql_typed_literal", "sql_extract"})

# Rules printed with no space between their first child and the second
# (a call's name and its parenthesis, a unary operator and its operand).
_TIGHT_RULES = frozenset(
    {"sql_call", "sql_count_star", "sql_cast", "sql_extract", "sql_unary", "sql_type"}
)


def render_sql(node: Any) -> str:
    """Canonical text of an expression subtree: keywords upper-case, single spaces.

    Built from the tokens alone, so rendering the text of a rendering gives
    the same text (the formatter's idempotence rests on this).
    """
    if isinstance(node, Token):
        if node.type in _VERBATIM_TOKENS:
            return str(node)
        return str(node).upper()
    if isinstance(node, ast.Interval):
        return node.describe()
    assert isinstance(node, Tree)
    head = node.children[0] if node.children else None
    if node.data == "sql_call" and isinstance(head, Token):
        # Function names are case-insensitive in Spark: print them upper-case.
        name = str(head).upper() if head.type == "NAME" else str(head)
        return name + _join(node.children[1:])
    if node.data == "sql_count_star" and isinstance(head, Token):
        name = str(head).upper() if head.type == "NAME" else str(head)
        return name + "(*)"
    if node.data in _UPPER_NAME_RULES:
        # Type names, typed-literal prefixes and EXTRACT fields are words of
        # the SQL language, not column names: upper-case, like keywords.
        node = Tree(
            node.data,
            [
                Token("KEYWORD", c.upper()) if isinstance(c, Token) and c.type == "NAME" else c
                for c in node.children
            ],
        )
    if node.data == "sql_type":
        # Only names, integers, parentheses, commas and <>: print tight.
        text = render_sql(node.children[0]) + _join(node.children[1:])
        return text.replace(" <", "<").replace("< ", "<").replace(" >", ">")
    if node.data in _TIGHT_RULES:
        first = render_sql(node.children[0])
        rest = _join(node.children[1:])
        # `- -x` must not become `--x`, which would start a comment.
        # A word operator (NOT) keeps its space: `NOT a`, not `NOTa`.
        sep = (
            " "
            if (first.endswith("-") and rest.startswith("-"))
            or (node.data == "sql_unary" and first.isalpha())
            else ""
        )
        return first + sep + rest
    return _join(node.children)


def _join(children: list[Any]) -> str:
    out = ""
    prev = ""
    for child in children:
        piece = render_sql(child)
        if out and not (prev in ("(", "[", ".") or piece in (")", "]", ",", ".", "[")):
            out += " "
        out += piece
        prev = piece
    return out
