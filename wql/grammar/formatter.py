"""AST -> canonical WQL text (``wql fmt``).

Canonical form: upper-case keywords, one clause per line, the SELECT list
one item per line indented by four spaces, ``CREATE SOURCE`` one column per
line with the types aligned, intervals spelled ``INTERVAL '5' SECOND`` (compound ones
``INTERVAL '1 MINUTE 30 SECONDS'``), scalar expressions in their canonical
token spelling (:attr:`ast.Expr.canonical`), every statement ended by ``;``
and statements separated by a blank line.

Comments survive. A comment alone on its line is printed on its own line
before the output line that holds the code following it; a comment after
code on the same line is appended to the output line that holds that code.
Comments inside an expression that spans several lines therefore move to the
end of the clause's line -- their text is never dropped.

The formatter is idempotent: ``format_script(parse(format_script(s)))``
equals ``format_script(s)``, and ``parse(format_script(s)) == s``.

>>> from wql.grammar.parser import parse
>>> print(format_script(parse("select a as x from t group by tumble(ts, interval '5 seconds')")))
SELECT
    a AS x
FROM t
GROUP BY TUMBLE(ts, INTERVAL '5' SECOND);
<BLANKLINE>
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from wql.grammar import ast
from wql.grammar.ast import decimal_text

__all__ = ["format_script", "format_statement", "format_trigger", "format_ident"]

INDENT = "    "
_SIMPLE_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")
_BACKQUOTED = re.compile(r"`(?:[^`]|``)+`\Z")
_SIMPLE_KEY = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*\Z")


@dataclass
class _Line:
    """One output line and the source offset of the node it starts with."""

    text: str
    anchor: int | None


def format_script(script: ast.Script, form: ast.QueryForm | None = None) -> str:
    """The canonical text of a whole script (ends with a newline unless empty).

    ``form`` prints every query in that form (:class:`ast.QueryForm`: WQL's
    ``GROUP BY k, TUMBLE(...)`` or Flink SQL's window table function);
    ``None`` keeps the form each query was written in. A window with no
    table-function form (count, global, dynamic-gap and processing-time
    windows, a SESSION keyed by expressions) is always printed in WQL's form.
    """
    statements = list(script.statements)
    spans = [(st.span.start, st.span.end) if st.span else None for st in statements]
    leading: list[list[ast.Comment]] = [[] for _ in statements]
    inside: list[list[ast.Comment]] = [[] for _ in statements]
    trailing: list[list[str]] = [[] for _ in statements]
    tail: list[ast.Comment] = []
    for comment in sorted(script.comments, key=lambda c: c.span.start if c.span else -1):
        where = comment.span.start if comment.span else None
        placed = False
        if where is not None:
            for i, span in enumerate(spans):
                if span is None:
                    continue
                start, end = span
                if start <= where < end:
                    inside[i].append(comment)
                elif where < start:
                    # Between statements: after the previous `;` on its line,
                    # or leading for the next statement.
                    if comment.follows_code and i > 0:
                        trailing[i - 1].append(comment.text)
                    else:
                        leading[i].append(comment)
                else:
                    continue
                placed = True
                break
        if not placed:
            if comment.follows_code and statements:
                trailing[-1].append(comment.text)
            else:
                tail.append(comment)
    blocks: list[str] = []
    for i, statement in enumerate(statements):
        lines = _statement_lines(statement, form)
        lines[-1].text += ";"
        for text in trailing[i]:
            lines[-1].text += "  " + text
        head = _comment_block(leading[i], statement.span.line if statement.span else None)
        blocks.append("\n".join(head + _attach(lines, inside[i])))
    if tail:
        blocks.append("\n".join(_comment_block(tail, None)))
    return "\n\n".join(blocks) + "\n" if blocks else ""


def _comment_block(comments: list[ast.Comment], next_line: int | None) -> list[str]:
    """Comments on their own lines, keeping one blank line where the source had any.

    A file's header comment is usually set off from the first statement by a
    blank line; that separation is layout worth keeping.
    """
    out: list[str] = []
    for k, comment in enumerate(comments):
        out.append(comment.text)
        after = comments[k + 1].span if k + 1 < len(comments) else None
        following = after.line if after is not None else next_line
        span = comment.span
        if span is not None and following is not None and following - span.end_line > 1:
            out.append("")
    return out


def format_statement(statement: ast.Statement) -> str:
    """One statement without comments or the trailing ``;``."""
    return "\n".join(line.text for line in _statement_lines(statement))


def _attach(lines: list[_Line], comments: list[ast.Comment]) -> list[str]:
    """Put the comments found inside a statement next to the output lines."""
    before: dict[int, list[str]] = {}
    after: dict[int, list[str]] = {}
    anchored = [(i, line.anchor) for i, line in enumerate(lines) if line.anchor is not None]
    for comment in comments:
        assert comment.span is not None
        if comment.follows_code:
            # Trailing comment: the line holding the code just before it.
            target = 0
            for i, anchor in anchored:
                if anchor <= comment.span.start:
                    target = i
            after.setdefault(target, []).append(comment.text)
        else:
            target = len(lines)
            for i, anchor in anchored:
                if anchor >= comment.span.end:
                    target = i
                    break
            before.setdefault(target, []).append(comment.text)
    out: list[str] = []
    for i, line in enumerate(lines):
        indent = line.text[: len(line.text) - len(line.text.lstrip(" "))]
        out.extend(indent + c for c in before.get(i, ()))
        text = line.text
        for c in after.get(i, ()):
            text += "  " + c
        out.append(text)
    out.extend(before.get(len(lines), ()))
    return out


# --------------------------------------------------------------------------- statements


def _anchor(node: ast.Node | None) -> int | None:
    return node.span.start if node is not None and node.span is not None else None


def _statement_lines(statement: ast.Statement, form: ast.QueryForm | None = None) -> list[_Line]:
    if isinstance(statement, ast.CreateSource):
        return _source_lines(statement)
    if isinstance(statement, ast.CreateView):
        head = _Line(f"CREATE VIEW {format_ident(statement.name)} AS", _anchor(statement))
        return [head, *_any_query_lines(statement.query, anchor_first=False, form=form)]
    return _any_query_lines(statement, anchor_first=True, form=form)


def _any_query_lines(
    query: ast.AnyQuery, *, anchor_first: bool, form: ast.QueryForm | None
) -> list[_Line]:
    if isinstance(query, ast.RankQuery):
        return _rank_lines(query, anchor_first=anchor_first)
    if isinstance(query, ast.JoinQuery):
        return _join_lines(query, anchor_first=anchor_first)
    if isinstance(query, ast.OverQuery):
        return _over_lines(query, anchor_first=anchor_first)
    return _query_lines(query, anchor_first=anchor_first, form=form)


def _source_lines(source: ast.CreateSource) -> list[_Line]:
    lines = [_Line(f"CREATE SOURCE {format_ident(source.name)} (", _anchor(source))]
    # Types line up in one column, as in docs/language.md's examples.
    width = max((len(format_ident(c.name)) for c in source.columns), default=0)
    entries: list[tuple[str, int | None]] = [
        (f"{format_ident(c.name):<{width}} {_type(c.type)}", _anchor(c)) for c in source.columns
    ]
    if source.watermark is not None:
        entries.append((_watermark(source.watermark), _anchor(source.watermark)))
    for i, (text, anchor) in enumerate(entries):
        comma = "," if i < len(entries) - 1 else ""
        lines.append(_Line(f"{INDENT}{text}{comma}", anchor))
    if not source.options:
        lines.append(_Line(")", None))
        return lines
    options = [f"{_option_key(o.key)} = {quote_string(o.value)}" for o in source.options]
    one_line = ") WITH (" + ", ".join(options) + ")"
    if len(one_line) <= 100:
        lines.append(_Line(one_line, _anchor(source.options[0])))
        return lines
    lines.append(_Line(") WITH (", None))
    for i, (text, option) in enumerate(zip(options, source.options, strict=True)):
        comma = "," if i < len(options) - 1 else ""
        lines.append(_Line(f"{INDENT}{text}{comma}", _anchor(option)))
    lines.append(_Line(")", None))
    return lines


def _select_lines(
    items: tuple[ast.SelectItem | ast.Star | ast.RankColumn | ast.OverItem, ...],
    anchor: int | None,
    depth: int = 1,
    rank: str = "",
) -> list[_Line]:
    """``SELECT`` and one item per line (``rank``: how a RankColumn reads)."""
    pad = INDENT * (depth - 1)
    entries = [
        (rank if isinstance(item, ast.RankColumn) else _select_entry(item), _anchor(item))
        for item in items
    ]
    lines = [_Line(f"{pad}SELECT", anchor)]
    for i, (text, item_anchor) in enumerate(entries):
        comma = "," if i < len(entries) - 1 else ""
        lines.append(_Line(f"{pad}{INDENT}{text}{comma}", item_anchor))
    return lines


def _select_entry(item: ast.SelectItem | ast.Star | ast.OverItem) -> str:
    if isinstance(item, ast.OverItem):
        text = f"{item.call.canonical} OVER ({format_over(item.window)})"
        return text + (f" AS {format_ident(item.alias)}" if item.alias is not None else "")
    if isinstance(item, ast.Star):
        return f"{format_ident(item.table)}.*" if item.table is not None else "*"
    text = item.expr.canonical
    if item.alias is not None:
        text += f" AS {format_ident(item.alias)}"
    return text


def _table(ref: ast.TableRef) -> str:
    table = format_ident(ref.name)
    if ref.watermark is not None:
        table += " " + _watermark(ref.watermark)
    return table


def _relation(rel: ast.Relation) -> str:
    """A table by name, or a window table function's call."""
    if isinstance(rel, ast.TableRef):
        return _table(rel)
    keys = [format_ident(k) for k in rel.partition]
    call = _window_function(rel.window, _table(rel.table), keys)
    assert call is not None  # the parser builds window tables from this very form
    return call


def format_rank(rank: ast.RowNumber) -> str:
    """``ROW_NUMBER() OVER (PARTITION BY ... ORDER BY ...)`` (or RANK, DENSE_RANK)."""
    order = ", ".join(o.expr.canonical + (" DESC" if o.descending else "") for o in rank.order_by)
    partition = ", ".join(format_ident(i) for i in rank.partition_by)
    return f"{rank.function.value}() OVER (PARTITION BY {partition} ORDER BY {order})"


def format_frame_bound(bound: ast.FrameBound) -> str:
    """``UNBOUNDED PRECEDING``, ``CURRENT ROW``, ``INTERVAL '10' SECOND PRECEDING``, ..."""
    if bound.kind is ast.BoundKind.CURRENT_ROW:
        return "CURRENT ROW"
    direction = "FOLLOWING" if bound.following else "PRECEDING"
    if bound.kind is ast.BoundKind.UNBOUNDED:
        return f"UNBOUNDED {direction}"
    offset = bound.offset
    text = format_interval(offset) if isinstance(offset, ast.Interval) else str(offset.value)  # type: ignore[union-attr]
    return f"{text} {direction}"


def format_over(window: ast.OverWindow) -> str:
    """What ``OVER ( )`` holds: ``PARTITION BY ... ORDER BY ... [frame]``."""
    parts = []
    if window.partition_by:
        parts.append("PARTITION BY " + ", ".join(format_ident(i) for i in window.partition_by))
    order = window.order_by
    parts.append("ORDER BY " + order.expr.canonical + (" DESC" if order.descending else ""))
    if window.unit is not None and window.lower is not None and window.upper is not None:
        lower, upper = format_frame_bound(window.lower), format_frame_bound(window.upper)
        parts.append(f"{window.unit.value} BETWEEN {lower} AND {upper}")
    return " ".join(parts)


def _over_lines(query: ast.OverQuery, *, anchor_first: bool) -> list[_Line]:
    lines = _select_lines(query.select, _anchor(query) if anchor_first else None)  # type: ignore[arg-type]
    lines.append(_Line(f"FROM {_table(query.source)}", _anchor(query.source)))
    if query.where is not None:
        lines.append(_Line(f"WHERE {query.where.canonical}", _anchor(query.where)))
    if query.late_data is not None:
        text = f"LATE DATA TO {format_ident(query.late_data.name)}"
        lines.append(_Line(text, _anchor(query.late_data)))
    return lines


def _rank_lines(query: ast.RankQuery, *, anchor_first: bool) -> list[_Line]:
    anchor = _anchor(query) if anchor_first else None
    rank = format_rank(query.rank)
    named = f"{rank} AS {format_ident(query.rank_alias)}" if query.rank_alias is not None else ""
    if query.form is ast.RankForm.QUALIFY:
        lines = _select_lines(query.select, anchor, rank=named)
        lines.append(_Line(f"FROM {_relation(query.source)}", _anchor(query.source)))
        if query.where is not None:
            lines.append(_Line(f"WHERE {query.where.canonical}", _anchor(query.where)))
        cond = query.condition.canonical
        text = f"QUALIFY {rank} {query.rank_op} {cond}" if query.rank_op else f"QUALIFY {cond}"
        lines.append(_Line(text, _anchor(query.condition)))
        return lines
    lines = _select_lines(query.select, anchor)
    lines.append(_Line("FROM (", None))
    lines += _select_lines(query.inner, None, depth=2, rank=named)
    lines.append(_Line(f"{INDENT}FROM {_relation(query.source)}", _anchor(query.source)))
    if query.where is not None:
        lines.append(_Line(f"{INDENT}WHERE {query.where.canonical}", _anchor(query.where)))
    alias = f" AS {format_ident(query.alias)}" if query.alias is not None else ""
    lines.append(_Line(f"){alias}", None))
    lines.append(_Line(f"WHERE {query.condition.canonical}", _anchor(query.condition)))
    return lines


def _join_input(side: ast.JoinInput) -> str:
    alias = f" AS {format_ident(side.alias)}" if side.alias is not None else ""
    return _relation(side.relation) + alias


def _join_lines(query: ast.JoinQuery, *, anchor_first: bool) -> list[_Line]:
    lines = _select_lines(query.select, _anchor(query) if anchor_first else None)
    lines.append(_Line(f"FROM {_join_input(query.left)}", _anchor(query.left)))
    kind = f"{query.kind.value} " if query.kind is not None else ""
    lines.append(_Line(f"{kind}JOIN {_join_input(query.right)}", _anchor(query.right)))
    lines.append(_Line(f"{INDENT}ON {query.on.canonical}", _anchor(query.on)))
    if query.where is not None:
        lines.append(_Line(f"WHERE {query.where.canonical}", _anchor(query.where)))
    return lines


def _query_lines(
    query: ast.Query, *, anchor_first: bool, form: ast.QueryForm | None = None
) -> list[_Line]:
    lines = _select_lines(query.select, _anchor(query) if anchor_first else None)
    table = _table(query.source)
    tvf = _table_function(query, table) if (form or query.form) is ast.QueryForm.TVF else None
    lines.append(_Line(f"FROM {tvf or table}", _anchor(query.source)))
    if query.where is not None:
        lines.append(_Line(f"WHERE {query.where.canonical}", _anchor(query.where)))
    keys = [k.canonical for k in query.group_by.keys]
    group = (
        ["window_start", "window_end", *keys]
        if tvf
        else [*keys, format_window(query.group_by.window)]
    )
    lines.append(_Line("GROUP BY " + ", ".join(group), _anchor(query.group_by)))
    if query.having is not None:
        lines.append(_Line(f"HAVING {query.having.canonical}", _anchor(query.having)))
    if query.lateness is not None:
        text = f"ALLOWED LATENESS {format_interval(query.lateness.interval)}"
        lines.append(_Line(text, _anchor(query.lateness)))
    if query.trigger is not None:
        text = f"TRIGGER {format_trigger(query.trigger.trigger)}"
        lines.append(_Line(text, _anchor(query.trigger)))
    if query.evict is not None:
        text = f"EVICT {format_evictor(query.evict.evictor)}"
        if query.evict.position is not None:
            text += f" {query.evict.position.value}"
        lines.append(_Line(text, _anchor(query.evict)))
    if query.emit is not None:
        text = "EMIT " + ", ".join(format_emit_item(i) for i in query.emit.items)
        lines.append(_Line(text, _anchor(query.emit)))
    if query.late_data is not None:
        text = f"LATE DATA TO {format_ident(query.late_data.name)}"
        lines.append(_Line(text, _anchor(query.late_data)))
    return lines


# --------------------------------------------------------------------------- pieces


def format_ident(ident: ast.Ident) -> str:
    """An identifier, backquoted when it was (or must be)."""
    if ident.quoted or not _SIMPLE_NAME.match(ident.name):
        return "`" + ident.name.replace("`", "``") + "`"
    return ident.name


def quote_string(value: str) -> str:
    """A SQL string literal whose value is ``value`` (backslash escapes, as Spark reads them)."""
    escaped = (
        value.replace("\\", "\\\\")
        .replace("'", "\\'")
        .replace("\n", "\\n")
        .replace("\r", "\\r")
        .replace("\t", "\\t")
        .replace("\0", "\\0")
    )
    return f"'{escaped}'"


def _option_key(key: str) -> str:
    from wql.grammar.parser import RESERVED_WORDS

    parts = key.split(".")
    if _SIMPLE_KEY.match(key) and not any(p.upper() in RESERVED_WORDS for p in parts):
        return key
    return quote_string(key)


def _type(type_name: ast.TypeName) -> str:
    if type_name.args:
        return f"{type_name.name}({', '.join(str(a.value) for a in type_name.args)})"
    return type_name.name


def _watermark(watermark: ast.Watermark) -> str:
    text = (
        f"WATERMARK FOR {format_ident(watermark.column)} AS {format_ident(watermark.expr_column)}"
    )
    if watermark.delay is not None:
        text += f" - {format_interval(watermark.delay)}"
    if watermark.idle is not None:
        text += f" IDLE AFTER {format_interval(watermark.idle.interval)}"
    return text


def format_interval(interval: ast.Interval) -> str:
    """``INTERVAL '5' SECOND`` / ``INTERVAL '1 MINUTE 30 SECONDS'``."""
    return interval.describe()


def _time_attr(attr: ast.TimeAttr) -> str:
    return "PROCTIME()" if isinstance(attr, ast.ProcTime) else format_ident(attr)


def _args(*parts: object) -> str:
    return "(" + ", ".join(str(p) for p in parts if p is not None) + ")"


def format_window(window: ast.Window) -> str:
    """One window call, e.g. ``HOP(ts, INTERVAL '1' MINUTE, INTERVAL '5' MINUTE)``."""
    fi = format_interval
    match window:
        case ast.Tumble(time, size, offset):
            return "TUMBLE" + _args(_time_attr(time), fi(size), offset and fi(offset))
        case ast.Hop(time, slide, size, offset):
            return "HOP" + _args(_time_attr(time), fi(slide), fi(size), offset and fi(offset))
        case ast.Cumulate(time, step, size, offset):
            return "CUMULATE" + _args(_time_attr(time), fi(step), fi(size), offset and fi(offset))
        case ast.Session(time, gap):
            return "SESSION" + _args(_time_attr(time), fi(gap))
        case ast.DynamicSession(time, gap):
            return "SESSION" + _args(_time_attr(time), "GAP " + gap.canonical)
        case ast.CountWindow(size, slide):
            return "COUNT_WINDOW" + _args(size.value, slide.value if slide else None)
        case ast.GlobalWindow():
            return "GLOBAL()"
    raise TypeError(f"not a window: {window!r}")


def _table_function(query: ast.Query, table: str) -> str | None:
    """``TABLE(TUMBLE(TABLE t, DESCRIPTOR(ts), ...))`` for ``query``'s window, if it has one."""
    keys = [k.canonical for k in query.group_by.keys]
    return _window_function(query.group_by.window, table, keys)


def _window_function(window: ast.Window, table: str, keys: list[str]) -> str | None:
    """The window table function of ``window`` over ``table`` (SESSION partitioned by
    ``keys``), or None when the window has no such form."""
    fi = format_interval
    time = getattr(window, "time", None)
    if not isinstance(time, ast.Ident):
        return None  # PROCTIME(), count and global windows
    data = f"TABLE {table}"
    descriptor = f"DESCRIPTOR({format_ident(time)})"
    match window:
        case ast.Tumble(_, size, offset):
            call = "TUMBLE" + _args(data, descriptor, fi(size), offset and fi(offset))
        case ast.Hop(_, slide, size, offset):
            call = "HOP" + _args(data, descriptor, fi(slide), fi(size), offset and fi(offset))
        case ast.Cumulate(_, step, size, offset):
            call = "CUMULATE" + _args(data, descriptor, fi(step), fi(size), offset and fi(offset))
        case ast.Session(_, gap):
            if not all(_SIMPLE_NAME.match(k) or _BACKQUOTED.match(k) for k in keys):
                return None  # PARTITION BY takes columns
            if keys:
                data += " PARTITION BY " + ", ".join(keys)
            call = "SESSION" + _args(data, descriptor, fi(gap))
        case _:
            return None  # dynamic-gap sessions
    return f"TABLE({call})"


def format_trigger(trigger: ast.Trigger) -> str:
    """One trigger expression, e.g. ``PURGING COUNT(10)``."""
    match trigger:
        case ast.WatermarkTrigger():
            return "WATERMARK"
        case ast.ProcessingTimeTrigger():
            return "PROCESSING TIME"
        case ast.CountTrigger(count):
            return f"COUNT({count.value})"
        case ast.EveryTrigger(interval, domain, on_update):
            text = f"EVERY {format_interval(interval)}"
            text += f" OF {domain.value} TIME" if domain is not None else ""
            return text + (" ON UPDATE" if on_update else "")
        case ast.AfterTrigger(interval, domain):
            text = f"AFTER {format_interval(interval)}"
            return text + (f" OF {domain.value} TIME" if domain is not None else "")
        case ast.DeltaTrigger(expr, threshold):
            return f"DELTA({expr.canonical}, {decimal_text(threshold.value)})"
        case ast.TimeoutTrigger(inner, timeout):
            return f"TIMEOUT({format_trigger(inner)}, {format_interval(timeout)})"
        case ast.PurgingTrigger(inner):
            return f"PURGING {format_trigger(inner)}"
        case ast.AnyTrigger(children):
            return "ANY(" + ", ".join(format_trigger(t) for t in children) + ")"
        case ast.AllTrigger(children):
            return "ALL(" + ", ".join(format_trigger(t) for t in children) + ")"
        case ast.OnceTrigger(inner):
            return f"ONCE {format_trigger(inner)}"
        case ast.UntilTrigger(inner, until):
            return f"UNTIL({format_trigger(inner)}, {format_trigger(until)})"
        case ast.SequenceTrigger(children):
            return "SEQUENCE(" + ", ".join(format_trigger(t) for t in children) + ")"
        case ast.EarlyLateTrigger(early, late):
            text = "WATERMARK WITH"
            if early is not None:
                text += f" EARLY {format_trigger(early)}"
            if late is not None:
                text += f" LATE {format_trigger(late)}"
            return text
    raise TypeError(f"not a trigger: {trigger!r}")


def format_emit_item(item: ast.EmitItem) -> str:
    """One ``EMIT`` item, e.g. ``LATE DISCARDING``."""
    match item:
        case ast.Accumulation(discarding, panes):
            mode = "DISCARDING" if discarding else "ACCUMULATING"
            return mode if panes is None else f"{panes.value} {mode}"
        case ast.Changelog():
            return "CHANGELOG"
    raise TypeError(f"not an EMIT item: {item!r}")


def format_evictor(evictor: ast.Evictor) -> str:
    """One evictor, e.g. ``TIME(INTERVAL '5' SECOND)``."""
    match evictor:
        case ast.CountEvictor(count):
            return f"COUNT({count.value})"
        case ast.TimeEvictor(interval):
            return f"TIME({format_interval(interval)})"
        case ast.DeltaEvictor(expr, threshold):
            return f"DELTA({expr.canonical}, {decimal_text(threshold.value)})"
    raise TypeError(f"not an evictor: {evictor!r}")
