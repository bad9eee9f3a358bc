"""Grammar rules -> AST nodes (:mod:`wql.grammar.ast`), one callback per rule.

The transformer only changes shape. It resolves no names, supplies no
defaults and checks nothing the grammar could not express except a few
purely lexical facts that the LALR grammar cannot state cheaply, all raised
as positioned :class:`~wql.errors.WqlSyntaxError`:

- exactly one window in ``GROUP BY`` (the grammar accepts any mix of keys
  and windows so that the error can say what is wrong);
- an interval string must spell ``<number> <unit>`` pairs with known units;
- a value with a unit-less interval (``INTERVAL '5'``) names the missing unit.

(Range checks belong to the nodes: an integer outside the signed 64-bit
range is refused by :class:`ast.Integer`, an interval below millisecond
precision or whose milliseconds do not fit 64 bits by :class:`ast.Interval`,
both as a positioned :class:`~wql.errors.WqlSemanticError`.)

Scalar expressions stay Lark subtrees until :meth:`WqlTransformer.sql_expr`
turns them into :class:`ast.Expr` with the exact source slice and a
canonical rendering (keywords upper-case, single spaces).

The transformer runs *inside* the LALR parser (Lark's ``transformer=``
option): each rule's callback gets its children as the parser reduces it, so
no parse tree is built and walked a second time. Lark's
``propagate_positions`` is off (it cost a third of the parse); instead the
parser keeps every token (``keep_all_tokens``) and :func:`_positioned`
computes each node's span from its first and last child, then hands the
method the children without keyword and punctuation tokens.
"""

from __future__ import annotations

import difflib
import functools
import re
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation
from typing import Any, cast

from lark import Token, Transformer, Tree, v_args

from wql import limits
from wql.errors import ErrorCode, Span, WqlError, WqlSyntaxError
from wql.grammar import ast

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


# Tokens that carry a value; every other token is a keyword or punctuation,
# which only contributes its position.
_VALUE_TOKENS = frozenset(
    {"NAME", "BACKQUOTED", "STRING", "INT", "DECIMAL", "ROW_NUMBER", "RANK_FUNCTION"}
)


@dataclass(frozen=True, slots=True)
class _Part:
    """A helper rule's result (a unit, a clause body, ...) with its span."""

    value: Any
    span: Span | None


@dataclass(frozen=True, slots=True)
class _GroupItems:
    """A ``GROUP BY`` list without a window (valid only after a window table function)."""

    keys: tuple[ast.Expr, ...]
    span: Span | None


@dataclass(frozen=True, slots=True)
class _Tvf:
    """``TABLE(TUMBLE(TABLE t, DESCRIPTOR(ts), ...))``: the table, the window, partition keys."""

    table: ast.TableRef
    window: ast.Window
    partition: tuple[_Part, ...]
    span: Span | None


@dataclass(frozen=True, slots=True)
class _RankItem:
    """``ROW_NUMBER() OVER (...) [AS name]`` in a SELECT list."""

    rank: ast.RowNumber
    alias: ast.Ident | None
    span: Span | None


@dataclass(frozen=True, slots=True)
class _Frame:
    """``RANGE | ROWS BETWEEN lower AND upper`` of an OVER window."""

    unit: ast.FrameUnit
    lower: ast.FrameBound
    upper: ast.FrameBound
    span: Span | None


@dataclass(frozen=True, slots=True)
class _Subquery:
    """``(SELECT ... FROM relation [WHERE ...])``: a Top-N's ranking, or a join's input."""

    select: tuple[Any, ...]
    relation: ast.TableRef | _Tvf
    where: ast.Expr | None
    span: Span | None


@dataclass(frozen=True, slots=True)
class _Qualify:
    """``QUALIFY ROW_NUMBER() OVER (...) <op> rest`` (``rank`` set) or ``QUALIFY cond``."""

    rank: ast.RowNumber | None
    op: str | None
    condition: ast.Expr
    span: Span | None


def _relation(rel: ast.TableRef | _Tvf) -> ast.Relation:
    """A FROM relation without GROUP BY: a table, or a window table function's rows."""
    if isinstance(rel, _Tvf):
        partition = tuple(p.value for p in rel.partition)
        return ast.WindowTable(rel.table, rel.window, partition, span=rel.span)
    return rel


def _aggregate_list(entries: list[Any]) -> tuple[ast.SelectItem, ...]:
    """A windowed aggregate's SELECT list: expressions only (no ``*``, no ROW_NUMBER)."""
    for e in entries:
        if isinstance(e, ast.Star):
            raise WqlSyntaxError(
                "an aggregate's SELECT lists its columns: * is for a window Top-N or join",
                e.span,
                hint="list the keys, window columns and aggregates",
                code=ErrorCode.SYNTAX,
            )
        if isinstance(e, _RankItem):
            raise WqlSyntaxError(
                "ROW_NUMBER() OVER (...) ranks the rows of a windowed relation in a window Top-N, "
                "not in an aggregate",
                e.span,
                hint="SELECT * FROM (SELECT *, ROW_NUMBER() OVER (PARTITION BY window_start, "
                "window_end ORDER BY ...) AS rn FROM <view>) WHERE rn <= N",
                code=ErrorCode.SYNTAX,
            )
    return tuple(entries)


def _plain_list(entries: tuple[Any, ...], what: str) -> tuple[ast.SelectItem | ast.Star, ...]:
    """A SELECT list without ROW_NUMBER (``what`` names where it is)."""
    for e in entries:
        if isinstance(e, _RankItem):
            raise WqlSyntaxError(
                f"ROW_NUMBER() OVER (...) is not allowed in {what}",
                e.span,
                hint="a window Top-N ranks in its subquery (or with QUALIFY)",
                code=ErrorCode.SYNTAX,
            )
    return entries


# Output columns a window table function adds; GROUP BY lists the bounds.
_TVF_BOUNDS = ("window_start", "window_end")
_TVF_COLUMNS = (*_TVF_BOUNDS, "window_time")


def _no_window(items: _GroupItems) -> WqlSyntaxError:
    """The error for a ``GROUP BY`` without a window (and no window table function)."""
    for key in items.keys:
        # `TUMBEL(ts, ...)` reads as a function call: name the typo
        call = _CALL_NAME.match(key.text)
        if call is None:
            continue
        close = difflib.get_close_matches(call.group(1).upper(), _WINDOWS, 1)
        if close:
            return WqlSyntaxError(
                f"unknown window {call.group(1)}",
                key.span,
                expected=_WINDOWS,
                hint=f"did you mean {close[0]}?",
                code=ErrorCode.WINDOW_SYNTAX,
            )
    return WqlSyntaxError(
        "GROUP BY needs a window",
        items.span,
        expected=_WINDOWS,
        hint="add one window to the GROUP BY list, e.g. TUMBLE(ts, INTERVAL '1' MINUTE)",
        code=ErrorCode.WINDOW_SYNTAX,
    )


def _column_name(expr: ast.Expr) -> str | None:
    """The lower-cased name of an expression that is a bare column, else None."""
    text = expr.text.strip()
    if text.startswith("`") and text.endswith("`") and len(text) > 1:
        return text[1:-1].replace("``", "`").lower()
    return text.lower() if re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", text) else None


def _from_tvf(
    tvf: _Tvf, group_by: ast.GroupBy | None, items: _GroupItems | None
) -> tuple[ast.TableRef, ast.GroupBy]:
    """A window table function query in WQL's shape: the table, keys + the window.

    Flink SQL's rule: ``GROUP BY`` lists ``window_start`` and ``window_end``
    (``window_time`` may be listed too) and the keys. A SESSION function
    partitions by exactly the keys: WQL's sessions are per key.
    """
    if group_by is not None:
        raise WqlSyntaxError(
            "the window is already given by the table function in FROM",
            group_by.window.span,
            hint="GROUP BY window_start, window_end and the keys, without a window call",
            code=ErrorCode.WINDOW_SYNTAX,
        )
    assert items is not None
    names = [_column_name(k) for k in items.keys]
    missing = [b for b in _TVF_BOUNDS if b not in names]
    if missing:
        raise WqlSyntaxError(
            f"a query over a window table function groups by window_start and window_end; "
            f"{' and '.join(missing)} {'is' if len(missing) == 1 else 'are'} missing",
            items.span,
            hint="GROUP BY window_start, window_end[, keys] (as in Flink SQL)",
            code=ErrorCode.WINDOW_SYNTAX,
        )
    keys = tuple(k for k, n in zip(items.keys, names, strict=True) if n not in _TVF_COLUMNS)
    if isinstance(tvf.window, ast.Session):
        partition = [p.value.name.lower() for p in tvf.partition]
        key_names = [_column_name(k) for k in keys]
        if sorted(partition) != sorted(n or "" for n in key_names) or None in key_names:
            where = tvf.partition[0].span if tvf.partition else tvf.span
            raise WqlSyntaxError(
                "SESSION(TABLE t PARTITION BY ...) must partition by exactly the GROUP BY keys "
                "(WQL's sessions are per key)"
                if tvf.partition
                else "a SESSION table function with GROUP BY keys needs PARTITION BY those keys "
                "(WQL's sessions are per key)",
                where,
                hint="SESSION(TABLE t PARTITION BY k, DESCRIPTOR(ts), gap) ... "
                "GROUP BY window_start, window_end, k",
                code=ErrorCode.WINDOW_SYNTAX,
            )
    return tvf.table, ast.GroupBy(keys, tvf.window, span=items.span)


def _edge(node: Any, last: bool) -> tuple[int, int, int] | None:
    """(offset, line, column) of the first character of ``node`` -- or, with
    ``last``, just past its last character -- or None if it has no position."""
    if isinstance(node, Token):
        if node.start_pos is None:
            return None
        if last:
            return node.end_pos or 0, node.end_line or 1, node.end_column or 1
        return node.start_pos, node.line or 1, node.column or 1
    span = getattr(node, "span", None)
    if isinstance(span, Span):
        return (
            (span.end, span.end_line, span.end_column)
            if last
            else (
                span.start,
                span.line,
                span.column,
            )
        )
    if isinstance(node, Tree):
        return _children_edge(node.children, last)
    return None


def _children_edge(children: list[Any], last: bool) -> tuple[int, int, int] | None:
    for child in reversed(children) if last else children:
        edge = _edge(child, last)
        if edge is not None:
            return edge
    return None


def span_of(children: list[Any]) -> Span | None:
    """The span from the first to the last positioned child (None if none is)."""
    first = _children_edge(children, last=False)
    final = _children_edge(children, last=True)
    if first is None or final is None:
        return None
    return Span(first[0], final[0], first[1], first[2], final[1], final[2])


# Errors raised by callbacks during the current parse (per thread).
_deferred = threading.local()


def _call(f: Callable[..., Any], span: Span | None, children: list[Any]) -> Any:
    """Run a callback; a WqlError it raises is deferred, not raised.

    Callbacks run as the parser reduces, i.e. before it has read the rest of
    the text. A syntax error further on (``INTERVAL '1' WEEK``: the interval
    is reduced, and complains about its missing unit, before ``WEEK`` is
    rejected) is the better report, so callback errors wait until the parse
    succeeds (:meth:`WqlTransformer.parsing` raises the first). Meanwhile the
    callback yields None, and later callbacks that trip over such a hole are
    silenced too -- they are fallout, not new errors.
    """
    try:
        return f(span, children)
    except WqlError as err:
        _deferred.errors.append(err)
        return None
    except Exception:
        if getattr(_deferred, "errors", None) or getattr(_deferred, "recovering", False):
            return None
        raise


def _positioned(f: Callable[..., Any], _data: str, children: list[Any], _meta: Any) -> Any:
    """Call ``f(span, values)``: values are the children minus keyword/punctuation tokens."""
    values = [c for c in children if not isinstance(c, Token) or c.type in _VALUE_TOKENS]
    return _call(f, span_of(children), values)


def _positioned_all(f: Callable[..., Any], _data: str, children: list[Any], _meta: Any) -> Any:
    """Call ``f(span, children)`` with every token (for rules that read keywords)."""
    return _call(f, span_of(children), children)


class SqlTree(Tree):
    """A scalar-expression subtree (rules ``sql_*``) with its span and its size so far.

    ``depth`` counts the levels of nesting (parentheses, calls, CASE, CAST,
    subscripts, unary operators) and ``chain`` the operators and arguments
    on the path to the deepest operand: both are checked against
    :mod:`wql.limits` as the parser reduces, i.e. before anything recursive
    walks the tree. The span saves :func:`span_of` a walk down the tree.
    """

    def __init__(self, data: str, children: list[Any], span: Span | None, depth: int, chain: int):
        super().__init__(data, children)
        self.span = span
        self.depth = depth
        self.chain = chain

    def __deepcopy__(self, memo: dict[int, Any]) -> SqlTree:
        # Never changed once built: the recovering parser's copies may share it.
        return self


# Rules that do not nest: leaves, and WHEN (its CASE counts the level).
_FLAT_SQL_RULES = frozenset(
    {"sql_literal", "sql_column", "sql_count_star", "sql_typed_literal", "sql_interval", "sql_when"}
)


def _expression_size(children: list[Any]) -> tuple[int, int]:
    """(depth, chain) of a node made of ``children``, before counting the node itself."""
    depth = chain = 0
    operands = 0
    for child in children:
        if isinstance(child, SqlTree):
            operands += 1
            depth = max(depth, child.depth)
            chain = max(chain, child.chain)
    return depth, chain + max(0, operands - 1)


def _check_expression_size(span: Span | None, depth: int, chain: int) -> None:
    if depth > limits.MAX_EXPRESSION_DEPTH:
        raise WqlSyntaxError(
            f"expression nested more than {limits.MAX_EXPRESSION_DEPTH} levels deep "
            "(the limit on parentheses, calls, CASE, CAST and unary operators)",
            span,
            hint="split the expression or remove redundant parentheses",
            code=ErrorCode.TOO_DEEP,
        )
    if chain > limits.MAX_OPERATOR_CHAIN:
        raise WqlSyntaxError(
            f"expression has more than {limits.MAX_OPERATOR_CHAIN} operators in a row "
            "(the limit on an operator chain)",
            span,
            hint="split the expression",
            code=ErrorCode.TOO_DEEP,
        )


def _sql_tree(data: str, span: Span | None, children: list[Any]) -> SqlTree:
    depth, chain = _expression_size(children)
    if data not in _FLAT_SQL_RULES:
        depth += 1
    _check_expression_size(span, depth, chain)
    return SqlTree(data, children, span, depth, chain)


def trigger_depth(trigger: Any) -> int:
    """How many triggers deep ``trigger`` nests (a leaf trigger is 1).

    Recursive, but only over triggers that passed the depth limit when the
    parser built them.
    """
    if isinstance(trigger, (ast.PurgingTrigger, ast.TimeoutTrigger, ast.OnceTrigger)):
        return 1 + trigger_depth(trigger.trigger)
    if isinstance(trigger, ast.UntilTrigger):
        return 1 + max(trigger_depth(trigger.trigger), trigger_depth(trigger.until))
    if isinstance(trigger, (ast.AnyTrigger, ast.AllTrigger, ast.SequenceTrigger)):
        return 1 + max((trigger_depth(t) for t in trigger.triggers), default=0)
    if isinstance(trigger, ast.EarlyLateTrigger):
        return 1 + max(trigger_depth(trigger.early), trigger_depth(trigger.late))
    return 0 if trigger is None else 1


def _nested_trigger(node: Any) -> Any:
    """``node``, unless it nests triggers deeper than the limit."""
    if trigger_depth(node) > limits.MAX_TRIGGER_DEPTH:
        raise WqlSyntaxError(
            f"triggers nested more than {limits.MAX_TRIGGER_DEPTH} deep "
            "(the limit on trigger nesting)",
            node.span,
            code=ErrorCode.TOO_DEEP,
        )
    return node


@v_args(wrapper=_positioned)
class WqlTransformer(Transformer[Token, ast.Script]):
    """Builds AST nodes; one method per grammar rule that becomes a node.

    One instance is shared by the cached parser; the text being parsed (for
    expression and interval slices) is set per parse and per thread with
    :meth:`parsing`.
    """

    def __init__(self) -> None:
        super().__init__(visit_tokens=False)
        self._local = threading.local()

    def __default__(self, data: Any, children: list[Any], meta: Any) -> Any:
        # The expression rules (sql_*) have no method: they stay trees, and
        # are measured against the limits as they are built.
        if isinstance(data, str) and data.startswith("sql_"):
            return _call(functools.partial(_sql_tree, data), span_of(children), children)
        return Tree(data, children, meta)

    @property
    def source(self) -> str:
        return cast(str, self._local.source)

    @contextmanager
    def parsing(self, source: str, *, recovering: bool = False) -> Iterator[None]:
        """Parse ``source`` inside this block; raise the first deferred callback error.

        Sets the text the callbacks slice. When the parse itself fails, its
        error propagates and deferred callback errors are dropped (see
        :func:`_call`). With ``recovering`` the parser is patching its way
        through syntax errors: callbacks see made-up input, so none of their
        errors count and none is raised.
        """
        previous = getattr(self._local, "source", None)
        self._local.source = source
        _deferred.errors = []
        _deferred.recovering = recovering
        try:
            yield
            if _deferred.errors and not recovering:
                raise _deferred.errors[0]
        finally:
            self._local.source = previous
            _deferred.errors = []
            _deferred.recovering = False

    # ------------------------------------------------------------- script

    def start(self, span: Span | None, children: list[Any]) -> ast.Script:
        return children[0]

    def script(self, span: Span | None, children: list[Any]) -> ast.Script:
        return ast.Script(statements=tuple(children), span=span)

    # ------------------------------------------------------------- sources

    def create_source(self, span: Span | None, children: list[Any]) -> ast.CreateSource:
        name = children[0]
        columns = tuple(c for c in children[1:] if isinstance(c, ast.ColumnDef))
        watermark = next((c for c in children if isinstance(c, ast.Watermark)), None)
        options = next((c.value for c in children if isinstance(c, _Part)), ())
        return ast.CreateSource(name, columns, watermark, options, span=span)

    def column_def(self, span: Span | None, children: list[Any]) -> ast.ColumnDef:
        return ast.ColumnDef(children[0], children[1], span=span)

    @v_args(wrapper=_positioned_all)
    def type_name(self, span: Span | None, children: list[Any]) -> ast.TypeName:
        name = children[0].upper()
        if name == "INTEGER":
            name = "INT"
        args = tuple(
            ast.Integer(int(tok), span=token_span(tok)) for tok in children if tok.type == "INT"
        )
        return ast.TypeName(name, args, span=span)

    def watermark(self, span: Span | None, children: list[Any]) -> ast.Watermark:
        delay = next((c for c in children[2:] if isinstance(c, ast.Interval)), None)
        idle = next((c for c in children[2:] if isinstance(c, ast.IdleAfter)), None)
        return ast.Watermark(children[0], children[1], delay, idle, span=span)

    def idle_after(self, span: Span | None, children: list[Any]) -> ast.IdleAfter:
        return ast.IdleAfter(children[0], span=span)

    def source_options(self, span: Span | None, children: list[Any]) -> _Part:
        return _Part(tuple(children), span)

    def source_option(self, span: Span | None, children: list[Any]) -> ast.SourceOption:
        return ast.SourceOption(children[0].value, children[1].value, span=span)

    @v_args(wrapper=_positioned_all)
    def option_key(self, span: Span | None, children: list[Token]) -> _Part:
        if len(children) == 1 and children[0].type == "STRING":
            return _Part(unquote_string(children[0]), span)
        return _Part("".join(children), span)

    @v_args(wrapper=_positioned_all)
    def option_value(self, span: Span | None, children: list[Token]) -> _Part:
        if len(children) == 1 and children[0].type == "STRING":
            return _Part(unquote_string(children[0]), span)
        text = "".join(children)
        return _Part(text.lower() if text.upper() in ("TRUE", "FALSE") else text, span)

    # ------------------------------------------------------------- queries

    def create_view(self, span: Span | None, children: list[Any]) -> ast.CreateView:
        return ast.CreateView(children[0], children[1], span=span)

    def query(self, span: Span | None, children: list[Any]) -> ast.Query:
        entries = [c for c in children if isinstance(c, (ast.SelectItem, ast.Star, _RankItem))]
        select = _aggregate_list(entries)
        parts: dict[str, Any] = {}
        tvf: _Tvf | None = None
        items: _GroupItems | None = None
        for child in children[len(select) :]:
            if isinstance(child, ast.TableRef):
                parts["source"] = child
            elif isinstance(child, _Tvf):
                tvf = child
            elif isinstance(child, _GroupItems):
                items = child
            elif isinstance(child, ast.GroupBy):
                parts["group_by"] = child
            elif isinstance(child, _Part):
                parts[child.value[0]] = child.value[1]
            elif isinstance(child, ast.AllowedLateness):
                parts["lateness"] = child
            elif isinstance(child, ast.TriggerClause):
                parts["trigger"] = child
            elif isinstance(child, ast.EvictClause):
                parts["evict"] = child
            elif isinstance(child, ast.LateDataTo):
                parts["late_data"] = child
            elif isinstance(child, ast.EmitClause):
                parts["emit"] = child
        if tvf is not None:
            parts["source"], parts["group_by"] = _from_tvf(tvf, parts.get("group_by"), items)
            parts["form"] = ast.QueryForm.TVF
        elif items is not None:
            raise _no_window(items)
        return ast.Query(select=select, span=span, **parts)

    # --------------------------------------------------- OVER aggregation

    def over_query(self, span: Span | None, children: list[Any]) -> ast.OverQuery:
        select = tuple(
            c
            for c in children
            if isinstance(c, (ast.SelectItem, ast.Star, ast.OverItem, _RankItem))
        )
        for e in select:
            if isinstance(e, _RankItem):
                raise WqlSyntaxError(
                    "ROW_NUMBER() OVER (...) ranks a windowed relation (a window Top-N); "
                    "an OVER aggregation's items are aggregates",
                    e.span,
                    hint="SUM(x) OVER (PARTITION BY k ORDER BY ts ROWS BETWEEN 2 PRECEDING "
                    "AND CURRENT ROW)",
                    code=ErrorCode.SYNTAX,
                )
        source = next(c for c in children if isinstance(c, ast.TableRef))
        where = next((c.value[1] for c in children if isinstance(c, _Part)), None)
        late = next((c for c in children if isinstance(c, ast.LateDataTo)), None)
        return ast.OverQuery(select, source, where, late, span=span)  # type: ignore[arg-type]

    def over_source(self, span: Span | None, children: list[Any]) -> ast.TableRef:
        return self.table_ref(span, children)

    def over_item(self, span: Span | None, children: list[Any]) -> ast.OverItem:
        call, window = children[0]
        alias = children[1] if len(children) > 1 else None
        return ast.OverItem(call, window, alias, span=span)

    def over_call(self, span: Span | None, children: list[Any]) -> tuple[ast.Expr, ast.OverWindow]:
        tree = children[0]
        assert isinstance(tree, SqlTree) and tree.span is not None
        call = ast.Expr(
            self.source[tree.span.start : tree.span.end], render_sql(tree), span=tree.span
        )
        partition = next((c.value for c in children if isinstance(c, _Part)), ())
        order = next(c for c in children if isinstance(c, ast.OrderItem))
        frame = next((c for c in children if isinstance(c, _Frame)), None)
        if frame is None:
            return call, ast.OverWindow(partition, order, span=span)
        window = ast.OverWindow(partition, order, frame.unit, frame.lower, frame.upper, span=span)
        return call, window

    def range_frame(self, span: Span | None, children: list[Any]) -> _Frame:
        return _Frame(ast.FrameUnit.RANGE, children[0], children[1], span)

    def rows_frame(self, span: Span | None, children: list[Any]) -> _Frame:
        return _Frame(ast.FrameUnit.ROWS, children[0], children[1], span)

    def unbounded_bound(self, span: Span | None, children: list[Any]) -> ast.FrameBound:
        return ast.FrameBound(ast.BoundKind.UNBOUNDED, children[0].value, span=span)

    def current_row_bound(self, span: Span | None, children: list[Any]) -> ast.FrameBound:
        return ast.FrameBound(ast.BoundKind.CURRENT_ROW, span=span)

    def offset_bound(self, span: Span | None, children: list[Any]) -> ast.FrameBound:
        return ast.FrameBound(ast.BoundKind.OFFSET, children[1].value, children[0], span=span)

    def preceding(self, span: Span | None, children: list[Any]) -> _Part:
        return _Part(False, span)

    def following(self, span: Span | None, children: list[Any]) -> _Part:
        return _Part(True, span)

    # --------------------------------------------------- window Top-N, joins

    @v_args(wrapper=_positioned_all)
    def star(self, span: Span | None, children: list[Any]) -> ast.Star:
        token = children[0]
        if token.type != "QUALIFIED_STAR":
            return ast.Star(span=span)
        name, quoted = unquote_ident(str(token)[:-2])
        ident_span = token_span(token)
        return ast.Star(ast.Ident(name, quoted, span=ident_span), span=span)

    def rank_item(self, span: Span | None, children: list[Any]) -> _RankItem:
        return _RankItem(children[0], children[1] if len(children) > 1 else None, span)

    def row_number(self, span: Span | None, children: list[Any]) -> ast.RowNumber:
        function = ast.RankFunction(str(children[0]).upper())
        partition = children[1].value
        order = tuple(c for c in children[2:] if isinstance(c, ast.OrderItem))
        return ast.RowNumber(partition, order, function, span=span)

    def partition_list(self, span: Span | None, children: list[Any]) -> _Part:
        return _Part(tuple(children), span)

    def order_item(self, span: Span | None, children: list[Any]) -> ast.OrderItem:
        descending = len(children) > 1 and children[1].value
        return ast.OrderItem(children[0], bool(descending), span=span)

    def ascending(self, span: Span | None, children: list[Any]) -> _Part:
        return _Part(False, span)

    def descending(self, span: Span | None, children: list[Any]) -> _Part:
        return _Part(True, span)

    @v_args(wrapper=_positioned_all)
    def qualify_rank(self, span: Span | None, children: list[Any]) -> _Qualify:
        rank = next(c for c in children if isinstance(c, ast.RowNumber))
        op = next(c for c in children if isinstance(c, Token) and c.type == "COMP_OP")
        condition = next(c for c in children if isinstance(c, ast.Expr))
        return _Qualify(rank, str(op), condition, span)

    def qualify_condition(self, span: Span | None, children: list[Any]) -> _Qualify:
        return _Qualify(None, None, children[0], span)

    def subquery(self, span: Span | None, children: list[Any]) -> _Subquery:
        entries = tuple(c for c in children if isinstance(c, (ast.SelectItem, ast.Star, _RankItem)))
        relation = next(c for c in children if isinstance(c, (ast.TableRef, _Tvf)))
        where = next((c.value[1] for c in children if isinstance(c, _Part)), None)
        return _Subquery(entries, relation, where, span)

    def qualify_query(self, span: Span | None, children: list[Any]) -> ast.RankQuery:
        entries = [c for c in children if isinstance(c, (ast.SelectItem, ast.Star, _RankItem))]
        relation = next(c for c in children if isinstance(c, (ast.TableRef, _Tvf)))
        where = next((c.value[1] for c in children if isinstance(c, _Part)), None)
        qualify = next(c for c in children if isinstance(c, _Qualify))
        ranks = [e for e in entries if isinstance(e, _RankItem)]
        if qualify.rank is not None:
            if ranks:
                raise WqlSyntaxError(
                    "the rank is in the SELECT list already: QUALIFY its name",
                    qualify.rank.span,
                    hint="e.g. SELECT *, ROW_NUMBER() OVER (...) AS rn FROM v QUALIFY rn <= 3",
                    code=ErrorCode.SYNTAX,
                )
            rank, alias = qualify.rank, None
        else:
            if len(ranks) != 1:
                raise WqlSyntaxError(
                    "QUALIFY filters on a rank: ROW_NUMBER() OVER (...) in QUALIFY, or named "
                    "once in the SELECT list",
                    (ranks[1].span if ranks else qualify.span),
                    hint="QUALIFY ROW_NUMBER() OVER (PARTITION BY window_start, window_end "
                    "ORDER BY ...) <= N",
                    code=ErrorCode.SYNTAX,
                )
            rank, alias = ranks[0].rank, ranks[0].alias
            if alias is None:
                raise WqlSyntaxError(
                    "name the rank (AS rn) to QUALIFY on it",
                    ranks[0].span,
                    code=ErrorCode.SYNTAX,
                )
        select = tuple(
            ast.RankColumn(span=e.span) if isinstance(e, _RankItem) else e for e in entries
        )
        return ast.RankQuery(
            select=select,
            source=_relation(relation),
            rank=rank,
            condition=qualify.condition,
            rank_alias=alias,
            rank_op=qualify.op,
            where=where,
            form=ast.RankForm.QUALIFY,
            span=span,
        )

    def rank_query(self, span: Span | None, children: list[Any]) -> ast.RankQuery:
        entries = tuple(c for c in children if isinstance(c, (ast.SelectItem, ast.Star, _RankItem)))
        sub = next(c for c in children if isinstance(c, _Subquery))
        alias = next(
            (c.value for c in children if isinstance(c, _Part) and c.value[0] == "alias"), None
        )
        where = next(c.value[1] for c in children if isinstance(c, _Part) and c.value[0] == "where")
        ranks = [e for e in sub.select if isinstance(e, _RankItem)]
        if len(ranks) != 1:
            raise WqlSyntaxError(
                "the subquery of a window Top-N selects exactly one ROW_NUMBER() OVER (...)",
                ranks[1].span if ranks else sub.span,
                hint="(SELECT *, ROW_NUMBER() OVER (PARTITION BY window_start, window_end "
                "ORDER BY ...) AS rn FROM <view>)",
                code=ErrorCode.SYNTAX,
            )
        if ranks[0].alias is None:
            raise WqlSyntaxError(
                "name the rank (AS rn): the outer WHERE keeps the rows by it",
                ranks[0].span,
                code=ErrorCode.SYNTAX,
            )
        inner = tuple(
            ast.RankColumn(span=e.span) if isinstance(e, _RankItem) else e for e in sub.select
        )
        return ast.RankQuery(
            select=_plain_list(entries, "the outer SELECT list"),
            source=_relation(sub.relation),
            rank=ranks[0].rank,
            condition=where,
            rank_alias=ranks[0].alias,
            inner=inner,
            where=sub.where,
            alias=alias[1] if alias else None,
            span=span,
        )

    def alias(self, span: Span | None, children: list[Any]) -> _Part:
        return _Part(("alias", children[0]), span)

    def join_input(self, span: Span | None, children: list[Any]) -> ast.JoinInput:
        source = children[0]
        alias = children[1].value[1] if len(children) > 1 else None
        if isinstance(source, _Subquery):
            star_only = len(source.select) == 1 and isinstance(source.select[0], ast.Star)
            if not (star_only and isinstance(source.relation, _Tvf) and source.where is None):
                raise WqlSyntaxError(
                    "a join reads views and window table functions: a subquery here must be "
                    "(SELECT * FROM TABLE(TUMBLE(...)))",
                    source.span,
                    hint="define the subquery as a view (CREATE VIEW) and join the view",
                    code=ErrorCode.SYNTAX,
                )
            source = source.relation
        return ast.JoinInput(_relation(source), alias, span=span)

    def inner_join(self, span: Span | None, children: list[Any]) -> _Part:
        return _Part(("kind", ast.JoinKind.INNER), span)

    def left_join(self, span: Span | None, children: list[Any]) -> _Part:
        return _Part(("kind", ast.JoinKind.LEFT), span)

    def right_join(self, span: Span | None, children: list[Any]) -> _Part:
        return _Part(("kind", ast.JoinKind.RIGHT), span)

    def full_join(self, span: Span | None, children: list[Any]) -> _Part:
        return _Part(("kind", ast.JoinKind.FULL), span)

    def join_query(self, span: Span | None, children: list[Any]) -> ast.JoinQuery:
        entries = tuple(c for c in children if isinstance(c, (ast.SelectItem, ast.Star, _RankItem)))
        left, right = (c for c in children if isinstance(c, ast.JoinInput))
        parts = {c.value[0]: c.value[1] for c in children if isinstance(c, _Part)}
        on = next(c for c in children if isinstance(c, ast.Expr))
        return ast.JoinQuery(
            select=_plain_list(entries, "a join"),
            left=left,
            right=right,
            on=on,
            kind=parts.get("kind"),
            where=parts.get("where"),
            span=span,
        )

    def select_item(self, span: Span | None, children: list[Any]) -> ast.SelectItem:
        alias = children[1] if len(children) > 1 else None
        return ast.SelectItem(children[0], alias, span=span)

    def table_ref(self, span: Span | None, children: list[Any]) -> ast.TableRef:
        watermark = children[1] if len(children) > 1 else None
        return ast.TableRef(children[0], watermark, span=span)

    def where_clause(self, span: Span | None, children: list[Any]) -> _Part:
        return _Part(("where", children[0]), span)

    def having_clause(self, span: Span | None, children: list[Any]) -> _Part:
        return _Part(("having", children[0]), span)

    def group_by(self, span: Span | None, children: list[Any]) -> ast.GroupBy | _GroupItems:
        windows = [c for c in children if isinstance(c, ast.WindowSpec)]
        keys = tuple(c for c in children if isinstance(c, ast.Expr))
        if not windows:
            # a window table function in FROM gives the window; the query decides
            return _GroupItems(keys, span)
        if len(windows) > 1:
            raise WqlSyntaxError(
                "GROUP BY has more than one window",
                windows[1].span,
                hint="a query groups by exactly one window",
                code=ErrorCode.WINDOW_SYNTAX,
            )
        return ast.GroupBy(keys, cast(ast.Window, windows[0]), span=span)

    # ------------------------------------------------------------- windows

    def tumble(self, span: Span | None, children: list[Any]) -> ast.Tumble:
        return ast.Tumble(*children, span=span)

    def hop(self, span: Span | None, children: list[Any]) -> ast.Hop:
        return ast.Hop(*children, span=span)

    def cumulate(self, span: Span | None, children: list[Any]) -> ast.Cumulate:
        return ast.Cumulate(*children, span=span)

    def session(self, span: Span | None, children: list[Any]) -> ast.Session:
        return ast.Session(*children, span=span)

    def dynamic_session(self, span: Span | None, children: list[Any]) -> ast.DynamicSession:
        return ast.DynamicSession(*children, span=span)

    def count_window(self, span: Span | None, children: list[Any]) -> ast.CountWindow:
        return ast.CountWindow(*children, span=span)

    def global_window(self, span: Span | None, children: list[Any]) -> ast.GlobalWindow:
        return ast.GlobalWindow(span=span)

    def proctime(self, span: Span | None, children: list[Any]) -> ast.ProcTime:
        return ast.ProcTime(span=span)

    # ------------------------------------------------- window table functions

    def window_tvf(self, span: Span | None, children: list[Any]) -> _Tvf:
        return children[0]

    def tvf_tumble(self, span: Span | None, children: list[Any]) -> _Tvf:
        table, time, *intervals = children
        return _Tvf(table, ast.Tumble(time.value, *intervals, span=span), (), span)

    def tvf_hop(self, span: Span | None, children: list[Any]) -> _Tvf:
        table, time, *intervals = children
        return _Tvf(table, ast.Hop(time.value, *intervals, span=span), (), span)

    def tvf_cumulate(self, span: Span | None, children: list[Any]) -> _Tvf:
        table, time, *intervals = children
        return _Tvf(table, ast.Cumulate(time.value, *intervals, span=span), (), span)

    def tvf_session(self, span: Span | None, children: list[Any]) -> _Tvf:
        table, *rest, time, gap = children
        window = ast.Session(time.value, gap, span=span)
        return _Tvf(table, window, tuple(k for k in rest if isinstance(k, _Part)), span)

    def tvf_partition_by(self, span: Span | None, children: list[Any]) -> _Part:
        return _Part(children[0], span)

    def tvf_key(self, span: Span | None, children: list[Any]) -> _Part:
        return _Part(children[0], span)

    def tvf_data(self, span: Span | None, children: list[Any]) -> ast.TableRef:
        return children[0]

    def tvf_descriptor(self, span: Span | None, children: list[Any]) -> _Part:
        return _Part(children[0], span)

    # ------------------------------------------------------------- intervals

    def interval(self, span: Span | None, children: list[Any]) -> ast.Interval:
        assert span is not None
        text = self.source[span.start : span.end]
        value = children[0]
        unit = children[1].value if len(children) > 1 else None
        if isinstance(value, _Part):  # an unquoted number
            value = value.value
        if isinstance(value, Token):  # a quoted string
            body = unquote_string(value)
            if unit is not None:
                number = _parse_decimal(body.strip())
                if number is None:
                    raise WqlSyntaxError(
                        f"interval value {value} is not a number",
                        token_span(value),
                        hint=f"write e.g. INTERVAL '5' {unit.name}",
                        code=ErrorCode.BAD_LITERAL,
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
                    code=ErrorCode.BAD_LITERAL,
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
                    code=ErrorCode.BAD_LITERAL,
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
                    code=ErrorCode.BAD_LITERAL,
                )
            word = match.group(2).lower()
            unit = _UNIT_WORDS.get(word)
            if unit is None:
                start = base + match.start(2)
                raise WqlSyntaxError(
                    f"unknown interval unit {match.group(2)!r}",
                    Span.from_offsets(self.source, start, start + len(word)),
                    expected=("millisecond", "second", "minute", "hour", "day"),
                    code=ErrorCode.BAD_LITERAL,
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
                code=ErrorCode.BAD_LITERAL,
            )
        return tuple(parts)

    @v_args(wrapper=_positioned_all)
    def signed_number(self, span: Span | None, children: list[Any]) -> _Part:
        number = _parse_decimal(children[-1])
        assert number is not None
        return _Part(-number if _negative(children) else number, span)

    def unit_millisecond(self, span: Span | None, children: list[Any]) -> _Part:
        return _Part(ast.TimeUnit.MILLISECOND, span)

    def unit_second(self, span: Span | None, children: list[Any]) -> _Part:
        return _Part(ast.TimeUnit.SECOND, span)

    def unit_minute(self, span: Span | None, children: list[Any]) -> _Part:
        return _Part(ast.TimeUnit.MINUTE, span)

    def unit_hour(self, span: Span | None, children: list[Any]) -> _Part:
        return _Part(ast.TimeUnit.HOUR, span)

    def unit_day(self, span: Span | None, children: list[Any]) -> _Part:
        return _Part(ast.TimeUnit.DAY, span)

    # ------------------------------------------------------------- clauses

    def allowed_lateness(self, span: Span | None, children: list[Any]) -> ast.AllowedLateness:
        return ast.AllowedLateness(children[0], span=span)

    def trigger_clause(self, span: Span | None, children: list[Any]) -> ast.TriggerClause:
        return ast.TriggerClause(children[0], span=span)

    def evict_clause(self, span: Span | None, children: list[Any]) -> ast.EvictClause:
        position = children[1].value if len(children) > 1 else None
        return ast.EvictClause(children[0], position, span=span)

    def before(self, span: Span | None, children: list[Any]) -> _Part:
        return _Part(ast.EvictPosition.BEFORE, span)

    def after(self, span: Span | None, children: list[Any]) -> _Part:
        return _Part(ast.EvictPosition.AFTER, span)

    def late_data_to(self, span: Span | None, children: list[Any]) -> ast.LateDataTo:
        return ast.LateDataTo(children[0], span=span)

    def emit_clause(self, span: Span | None, children: list[Any]) -> ast.EmitClause:
        return ast.EmitClause(tuple(children), span=span)

    def accumulation(self, span: Span | None, children: list[Any]) -> ast.Accumulation:
        panes = children[0].value if len(children) > 1 else None
        return ast.Accumulation(children[-1].value, panes, span=span)

    def changelog(self, span: Span | None, children: list[Any]) -> ast.Changelog:
        return ast.Changelog(span=span)

    def early_panes(self, span: Span | None, children: list[Any]) -> _Part:
        return _Part(ast.PaneKind.EARLY, span)

    def on_time_panes(self, span: Span | None, children: list[Any]) -> _Part:
        return _Part(ast.PaneKind.ON_TIME, span)

    def late_panes(self, span: Span | None, children: list[Any]) -> _Part:
        return _Part(ast.PaneKind.LATE, span)

    def accumulating(self, span: Span | None, children: list[Any]) -> _Part:
        return _Part(False, span)

    def discarding(self, span: Span | None, children: list[Any]) -> _Part:
        return _Part(True, span)

    # ------------------------------------------------------------- triggers

    def watermark_trigger(self, span: Span | None, children: list[Any]) -> ast.WatermarkTrigger:
        return ast.WatermarkTrigger(span=span)

    def processing_time_trigger(
        self, span: Span | None, children: list[Any]
    ) -> ast.ProcessingTimeTrigger:
        return ast.ProcessingTimeTrigger(span=span)

    def count_trigger(self, span: Span | None, children: list[Any]) -> ast.CountTrigger:
        return ast.CountTrigger(children[0], span=span)

    def every_trigger(self, span: Span | None, children: list[Any]) -> ast.EveryTrigger:
        parts = [c.value for c in children[1:]]
        domain = next((p for p in parts if isinstance(p, ast.TimeDomain)), None)
        return ast.EveryTrigger(children[0], domain, "on_update" in parts, span=span)

    def after_trigger(self, span: Span | None, children: list[Any]) -> ast.AfterTrigger:
        domain = children[1].value if len(children) > 1 else None
        return ast.AfterTrigger(children[0], domain, span=span)

    def on_update(self, span: Span | None, children: list[Any]) -> _Part:
        return _Part("on_update", span)

    def event_domain(self, span: Span | None, children: list[Any]) -> _Part:
        return _Part(ast.TimeDomain.EVENT, span)

    def processing_domain(self, span: Span | None, children: list[Any]) -> _Part:
        return _Part(ast.TimeDomain.PROCESSING, span)

    def delta_trigger(self, span: Span | None, children: list[Any]) -> ast.DeltaTrigger:
        return ast.DeltaTrigger(children[0], children[1], span=span)

    def timeout_trigger(self, span: Span | None, children: list[Any]) -> ast.TimeoutTrigger:
        return _nested_trigger(ast.TimeoutTrigger(children[0], children[1], span=span))

    def purging_trigger(self, span: Span | None, children: list[Any]) -> ast.PurgingTrigger:
        return _nested_trigger(ast.PurgingTrigger(children[0], span=span))

    def any_trigger(self, span: Span | None, children: list[Any]) -> ast.AnyTrigger:
        return _nested_trigger(ast.AnyTrigger(tuple(children), span=span))

    def all_trigger(self, span: Span | None, children: list[Any]) -> ast.AllTrigger:
        return _nested_trigger(ast.AllTrigger(tuple(children), span=span))

    def early_late_trigger(self, span: Span | None, children: list[Any]) -> ast.EarlyLateTrigger:
        firings = dict(c.value for c in children)
        early, late = firings.get("early"), firings.get("late")
        return _nested_trigger(ast.EarlyLateTrigger(early, late, span=span))

    def once_trigger(self, span: Span | None, children: list[Any]) -> ast.OnceTrigger:
        return _nested_trigger(ast.OnceTrigger(children[0], span=span))

    def until_trigger(self, span: Span | None, children: list[Any]) -> ast.UntilTrigger:
        return _nested_trigger(ast.UntilTrigger(children[0], children[1], span=span))

    def sequence_trigger(self, span: Span | None, children: list[Any]) -> ast.SequenceTrigger:
        return _nested_trigger(ast.SequenceTrigger(tuple(children), span=span))

    def early_firing(self, span: Span | None, children: list[Any]) -> _Part:
        return _Part(("early", children[0]), span)

    def late_firing(self, span: Span | None, children: list[Any]) -> _Part:
        return _Part(("late", children[0]), span)

    # ------------------------------------------------------------- evictors

    def count_evictor(self, span: Span | None, children: list[Any]) -> ast.CountEvictor:
        return ast.CountEvictor(children[0], span=span)

    def time_evictor(self, span: Span | None, children: list[Any]) -> ast.TimeEvictor:
        return ast.TimeEvictor(children[0], span=span)

    def delta_evictor(self, span: Span | None, children: list[Any]) -> ast.DeltaEvictor:
        return ast.DeltaEvictor(children[0], children[1], span=span)

    # ------------------------------------------------------------- leaves

    @v_args(wrapper=_positioned_all)
    def integer(self, span: Span | None, children: list[Any]) -> ast.Integer:
        value = int(children[-1])
        return ast.Integer(-value if _negative(children) else value, span=span)

    @v_args(wrapper=_positioned_all)
    def number(self, span: Span | None, children: list[Any]) -> ast.Number:
        value = _parse_decimal(children[-1])
        assert value is not None
        return ast.Number(-value if _negative(children) else value, span=span)

    def ident(self, span: Span | None, children: list[Token]) -> ast.Ident:
        name, quoted = unquote_ident(children[0])
        return ast.Ident(name, quoted, span=span)

    @v_args(wrapper=_positioned_all)
    def sql_expr(self, span: Span | None, children: list[Any]) -> ast.Expr:
        assert span is not None
        _check_expression_size(span, *_expression_size(children))
        text = self.source[span.start : span.end]
        return ast.Expr(text, _join(children), span=span)


_WINDOWS = ("TUMBLE", "HOP", "CUMULATE", "SESSION", "COUNT_WINDOW", "GLOBAL")
_CALL_NAME = re.compile(r"\s*([A-Za-z_][A-Za-z0-9_]*)\s*\(")


def _negative(children: list[Any]) -> bool:
    """Whether a signed literal's children start with a ``-`` token."""
    return bool(children) and isinstance(children[0], Token) and children[0] == "-"


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
