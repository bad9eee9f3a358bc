"""Random valid WQL scripts as text (Hypothesis strategies), for the grammar's
property tests (``test_roundtrip_property.py``, ``test_tvf.py``).

Queries are generated in deliberately varied spellings (keyword case,
interval styles, spacing, optional clauses, comments) over every window,
trigger and evictor form, so the formatter has to normalise, not copy.
"""

from __future__ import annotations

import re

from hypothesis import strategies as st

UNITS = {
    "MILLISECOND": ("ms", "millisecond", "milliseconds"),
    "SECOND": ("second", "seconds", "s"),
    "MINUTE": ("minute", "minutes", "min"),
    "HOUR": ("hour", "hours"),
    "DAY": ("day", "days"),
}

case = st.sampled_from([str.upper, str.lower, str.title])
space = st.sampled_from([" ", "  ", "\n", "\n    ", " \t"])
names = st.sampled_from(["a", "b", "user_id", "amount", "count", "time", "window", "`odd name`"])


@st.composite
def interval(draw: st.DrawFn, allow_negative: bool = False) -> str:
    low = -500 if allow_negative else 1
    value = draw(st.integers(low, 500))
    unit = draw(st.sampled_from(sorted(UNITS)))
    kw = draw(case)
    style = draw(st.integers(0, 3))
    if style == 0:
        plural = draw(st.booleans()) and unit != "MILLISECOND"
        return f"{kw('INTERVAL')} '{value}' {kw(unit + ('S' if plural else ''))}"
    if style == 1:
        return f"{kw('INTERVAL')} {value} {kw(unit)}"
    if style == 2:
        return f"{kw('INTERVAL')} '{value} {draw(st.sampled_from(UNITS[unit]))}'"
    second = draw(st.integers(1, 59))
    return f"{kw('INTERVAL')} '{value} {UNITS[unit][0]} {second} seconds'"


def _operand(text: str) -> str:
    simple = re.fullmatch(r"[\w.]+|`[^`]*`|'[^']*'", text)
    return text if simple else f"({text})"


@st.composite
def expr(draw: st.DrawFn, depth: int = 0) -> str:
    kw = draw(case)
    if depth > 2 or draw(st.integers(0, 2)) == 0:
        return draw(
            st.one_of(
                names,
                st.integers(0, 1000).map(str),
                st.sampled_from(["'text'", "1.5", "NULL", "TRUE"]).map(kw),
            )
        )
    # Compound operands are parenthesised so every generated text is valid SQL
    # (`a + NOT b` is not); the formatter must keep those parentheses.
    inner = _operand(draw(expr(depth + 1)))
    other = _operand(draw(expr(depth + 1)))
    form = draw(st.integers(0, 9))
    if form == 0:
        return f"{inner} {draw(st.sampled_from(['+', '-', '*', '/', '||']))} {other}"
    if form == 1:
        return f"{inner} {draw(st.sampled_from(['=', '<>', '>=', '<']))} {other}"
    if form == 2:
        return f"({inner})"
    if form == 3:
        return f"{kw('NOT')} {inner}"
    if form == 4:
        return f"{inner} {kw('IS NOT NULL')}"
    if form == 5:
        return f"{inner} {kw('IN')} ({other}, {inner})"
    if form == 6:
        return f"{kw('CASE WHEN')} {inner} {kw('THEN')} {other} {kw('ELSE')} 0 {kw('END')}"
    if form == 7:
        return f"{kw('CAST')}({inner} {kw('AS')} {kw('BIGINT')})"
    if form == 8:
        return f"{draw(st.sampled_from(['sum', 'MAX', 'coalesce', 'Avg']))}({inner})"
    return f"{inner} {kw('AND')} {other}"


@st.composite
def trigger(draw: st.DrawFn, depth: int = 0) -> str:
    kw = draw(case)
    # Draw the form first and only then its parts: drawing every alternative
    # eagerly would make nested triggers exponentially expensive.
    form = draw(st.integers(0, 6 if depth >= 2 else 16))
    child = trigger(depth + 1)
    if form == 0:
        return kw("WATERMARK")
    if form == 1:
        return kw("PROCESSING TIME")
    if form == 2:
        return f"{kw('COUNT')}({draw(st.integers(1, 99))})"
    if form == 3:
        return f"{kw('EVERY')} {draw(interval())}"
    if form == 4:
        domain = draw(st.sampled_from(["OF EVENT TIME", "OF PROCESSING TIME", ""]))
        update = draw(st.sampled_from(["", " ON UPDATE", " on update"]))
        if draw(st.booleans()):
            return f"{kw('AFTER')} {draw(interval())} {kw(domain)}"
        return f"{kw('EVERY')} {draw(interval())} {kw(domain)}{update}"
    if form in (5, 6):
        threshold = draw(st.sampled_from(["1", "2.5", "-3", "0.125"]))
        return f"{kw('DELTA')}({draw(expr())}, {threshold})"
    if form == 7:
        return f"{kw('PURGING')} {draw(child)}"
    if form == 8:
        return f"{kw('TIMEOUT')}({draw(child)}, {draw(interval())})"
    if form in (9, 10):
        name = kw("ANY" if form == 9 else "ALL")
        return f"{name}({', '.join(draw(st.lists(child, min_size=1, max_size=3)))})"
    if form == 11:
        return f"{kw('WATERMARK WITH EARLY')} {draw(child)}"
    if form == 12:
        return f"{kw('WATERMARK WITH EARLY')} {draw(child)} {kw('LATE')} {draw(child)}"
    if form == 13:
        return f"{kw('WATERMARK WITH LATE')} {draw(child)}"
    if form == 14:
        return f"{kw('ONCE')} {draw(child)}"
    if form == 15:
        return f"{kw('UNTIL')}({draw(child)}, {draw(child)})"
    return f"{kw('SEQUENCE')}({', '.join(draw(st.lists(child, min_size=1, max_size=3)))})"


@st.composite
def window(draw: st.DrawFn) -> str:
    kw = draw(case)
    ts = draw(st.sampled_from(["ts", "event_time", "PROCTIME()", "proctime()"]))
    form = draw(st.integers(0, 7))
    if form <= 2:
        offset = draw(st.one_of(st.none(), interval(allow_negative=True)))
        tail = f", {offset}" if offset else ""
        if form == 0:
            return f"{kw('TUMBLE')}({ts}, {draw(interval())}{tail})"
        name = kw("HOP" if form == 1 else "CUMULATE")
        return f"{name}({ts}, {draw(interval())}, {draw(interval())}{tail})"
    if form == 3:
        return f"{kw('SESSION')}({ts}, {draw(interval())})"
    if form == 4:
        return f"{kw('SESSION')}({ts}, {kw('GAP')} {draw(expr())})"
    if form == 5:
        return f"{kw('COUNT_WINDOW')}({draw(st.integers(1, 50))})"
    if form == 6:
        size, slide = draw(st.integers(1, 50)), draw(st.integers(1, 50))
        return f"{kw('COUNT_WINDOW')}({size}, {slide})"
    return f"{kw('GLOBAL')}()"


#: EMIT items (the round trip needs syntax only: any combination parses).
EMIT_ITEMS = [
    "ACCUMULATING",
    "DISCARDING",
    "EARLY ACCUMULATING",
    "EARLY DISCARDING",
    "ON_TIME DISCARDING",
    "LATE ACCUMULATING",
    "LATE DISCARDING",
    "CHANGELOG",
]


@st.composite
def query(draw: st.DrawFn) -> str:
    kw = draw(case)
    sp = draw(space)
    items = []
    for _ in range(draw(st.integers(1, 3))):
        item = draw(expr())
        alias = draw(st.one_of(st.none(), st.sampled_from(["x", "total", "`the sum`"])))
        if alias:
            item += f" {kw('AS')} {alias}" if draw(st.booleans()) else f" {alias}"
        items.append(item)
    parts = [f"{kw('SELECT')} {', '.join(items)}", f"{kw('FROM')} {draw(names)}"]
    if draw(st.booleans()):
        parts[-1] += f" {kw('WATERMARK FOR')} ts {kw('AS')} ts - {draw(interval())}"
        if draw(st.booleans()):
            parts[-1] += f" {kw('IDLE AFTER')} {draw(interval())}"
    if draw(st.booleans()):
        parts.append(f"{kw('WHERE')} {draw(expr())}")
    keys = draw(st.lists(names, max_size=2))
    group = [*keys, draw(window())]
    if draw(st.booleans()):
        group.reverse()
    parts.append(f"{kw('GROUP BY')} {', '.join(group)}")
    if draw(st.booleans()):
        parts.append(f"{kw('HAVING')} {draw(expr())}")
    if draw(st.booleans()):
        parts.append(f"{kw('ALLOWED LATENESS')} {draw(interval())}")
    if draw(st.booleans()):
        parts.append(f"{kw('TRIGGER')} {draw(trigger())}")
    if draw(st.booleans()):
        kind = draw(st.integers(0, 2))
        evictor = [
            f"{kw('COUNT')}({draw(st.integers(1, 9))})",
            f"{kw('TIME')}({draw(interval())})",
            f"{kw('DELTA')}({draw(expr())}, 5)",
        ][kind]
        position = draw(st.sampled_from(["", " BEFORE", " AFTER", " before"]))
        parts.append(f"{kw('EVICT')} {evictor}{position}")
    if draw(st.booleans()):
        items = draw(st.lists(st.sampled_from(EMIT_ITEMS), min_size=1, max_size=3))
        parts.append(f"{kw('EMIT')} {', '.join(kw(i) for i in items)}")
    if draw(st.booleans()):
        parts.append(f"{kw('LATE DATA TO')} {draw(st.sampled_from(['late', '`late rows`']))}")
    if draw(st.booleans()):
        # A comment on its own line before a random clause.
        at = draw(st.integers(1, len(parts) - 1))
        parts.insert(at, "-- note")
    text = sp.join(parts)
    text = text.replace(f"-- note{sp}", "-- note\n") if "-- note" in text else text
    if draw(st.booleans()):
        text = f"{kw('CREATE VIEW')} {draw(st.sampled_from(['v', 'per_user']))} {kw('AS')} {text}"
    return text


@st.composite
def relation(draw: st.DrawFn) -> str:
    """A windowed relation: a view by name, or a window table function over a table."""
    kw = draw(case)
    if draw(st.booleans()):
        return draw(names)
    table = f"{kw('TABLE')} {draw(names)}"
    form = draw(st.integers(0, 2))
    if form == 0:
        call = f"{kw('TUMBLE')}({table}, {kw('DESCRIPTOR')}(ts), {draw(interval())})"
    elif form == 1:
        call = (
            f"{kw('HOP')}({table}, {kw('DESCRIPTOR')}(ts), {draw(interval())}, {draw(interval())})"
        )
    else:
        keys = draw(
            st.sampled_from(["", f" {kw('PARTITION BY')} a", f" {kw('PARTITION BY')} a, b"])
        )
        call = f"{kw('SESSION')}({table}{keys}, {kw('DESCRIPTOR')}(ts), {draw(interval())})"
    return f"{kw('TABLE')}({call})"


@st.composite
def row_number(draw: st.DrawFn) -> str:
    kw = draw(case)
    keys = draw(st.lists(names, max_size=2))
    order = []
    for _ in range(draw(st.integers(1, 2))):
        direction = draw(st.sampled_from(["", f" {kw('ASC')}", f" {kw('DESC')}"]))
        order.append(draw(expr()) + direction)
    partition = ", ".join(["window_start", "window_end", *keys])
    function = draw(st.sampled_from(["ROW_NUMBER", "RANK", "DENSE_RANK"]))
    return (
        f"{kw(function)}() {kw('OVER')} ({kw('PARTITION BY')} {partition} "
        f"{kw('ORDER BY')} {', '.join(order)})"
    )


@st.composite
def select_list(draw: st.DrawFn, rank: str | None = None) -> str:
    kw = draw(case)
    items = []
    for _ in range(draw(st.integers(1, 3))):
        kind = draw(st.integers(0, 3))
        if kind == 0:
            items.append("*")
        elif kind == 1:
            items.append(f"{draw(st.sampled_from(['l', 'r', '`odd name`']))}.*")
        else:
            item = draw(expr())
            if draw(st.booleans()):
                item += f" {kw('AS')} x"
            items.append(item)
    if rank is not None:
        items.insert(draw(st.integers(0, len(items))), rank)
    return ", ".join(items)


@st.composite
def rank_query(draw: st.DrawFn) -> str:
    """A window Top-N or deduplication, in the subquery form or with QUALIFY."""
    kw = draw(case)
    sp = draw(space)
    rel = draw(relation())
    where = f"{sp}{kw('WHERE')} {draw(expr())}" if draw(st.booleans()) else ""
    bound = f"rn <= {draw(st.integers(1, 9))}"
    if draw(st.booleans()):
        bound += f" {kw('AND')} {draw(expr())}"
    form = draw(st.integers(0, 2))
    if form == 0:
        inner = draw(select_list(rank=f"{draw(row_number())} {kw('AS')} rn"))
        alias = draw(st.sampled_from(["", " t", f" {kw('AS')} t"]))
        return (
            f"{kw('SELECT')} {draw(select_list())} {kw('FROM')} ({kw('SELECT')} {inner}"
            f" {kw('FROM')} {rel}{where}){alias}{sp}{kw('WHERE')} {bound}"
        )
    if form == 1:
        items = draw(select_list(rank=f"{draw(row_number())} rn"))
        return f"{kw('SELECT')} {items} {kw('FROM')} {rel}{where}{sp}{kw('QUALIFY')} {bound}"
    op = draw(st.sampled_from(["<=", "<", "="]))
    return (
        f"{kw('SELECT')} {draw(select_list())} {kw('FROM')} {rel}{where}{sp}{kw('QUALIFY')} "
        f"{draw(row_number())} {op} {draw(st.integers(1, 9))}"
    )


@st.composite
def join_query(draw: st.DrawFn) -> str:
    kw = draw(case)
    sp = draw(space)
    sides = []
    for alias in ("l", "r"):
        rel = draw(relation())
        if rel.upper().startswith("TABLE") and draw(st.booleans()):
            rel = f"({kw('SELECT')} * {kw('FROM')} {rel})"
        sides.append(f"{rel} {kw('AS')} {alias}" if draw(st.booleans()) else f"{rel} {alias}")
    kind = draw(st.sampled_from(["", "INNER ", "LEFT ", "LEFT OUTER ", "RIGHT ", "FULL OUTER "]))
    on = f"l.window_start = r.window_start {kw('AND')} l.window_end = r.window_end"
    if draw(st.booleans()):
        on += f" {kw('AND')} {draw(expr())}"
    where = f"{sp}{kw('WHERE')} {draw(expr())}" if draw(st.booleans()) else ""
    return (
        f"{kw('SELECT')} {draw(select_list())} {kw('FROM')} {sides[0]}{sp}{kw(kind)}"
        f"{kw('JOIN')} {sides[1]}{sp}{kw('ON')} {on}{where}"
    )


@st.composite
def source(draw: st.DrawFn) -> str:
    kw = draw(case)
    types = ["STRING", "INT", "BIGINT", "DOUBLE", "BOOLEAN", "TIMESTAMP", "DATE", "DECIMAL(10, 2)"]
    columns = [f"c{i} {kw(draw(st.sampled_from(types)))}" for i in range(draw(st.integers(1, 4)))]
    if draw(st.booleans()):
        idle = f" {kw('IDLE AFTER')} {draw(interval())}" if draw(st.booleans()) else ""
        columns.append(f"{kw('WATERMARK FOR')} c0 {kw('AS')} c0 - {draw(interval())}{idle}")
    text = f"{kw('CREATE SOURCE')} src ({', '.join(columns)})"
    if draw(st.booleans()):
        text += f" {kw('WITH')} (format = 'csv', path = 'data/x.csv', 'header' = 'true')"
    return text


@st.composite
def any_query(draw: st.DrawFn) -> str:
    text = draw(st.one_of(query(), rank_query(), join_query()))
    if not text.upper().startswith("CREATE") and draw(st.booleans()):
        text = f"CREATE VIEW v AS {text}"
    return text


@st.composite
def script(draw: st.DrawFn) -> str:
    statements = draw(st.lists(source(), max_size=1)) + draw(
        st.lists(any_query(), min_size=1, max_size=3)
    )
    return ";\n".join(statements) + draw(st.sampled_from(["", ";", ";\n", "; -- end\n"]))
