"""Every AST node's span points at its own text (the compiler's errors rely on it)."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from pathlib import Path

import pytest

from wql.errors import Span
from wql.grammar import ast
from wql.grammar.parser import parse

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "queries"

# What the source text of a node of each class starts with (upper-cased).
STARTS = {
    ast.CreateSource: "CREATE SOURCE",
    ast.CreateView: "CREATE VIEW",
    ast.Query: "SELECT",
    ast.GroupBy: "GROUP",
    ast.Watermark: "WATERMARK FOR",
    ast.Tumble: "TUMBLE(",
    ast.Hop: "HOP(",
    ast.Cumulate: "CUMULATE(",
    ast.Session: "SESSION(",
    ast.DynamicSession: "SESSION(",
    ast.CountWindow: "COUNT_WINDOW(",
    ast.GlobalWindow: "GLOBAL(",
    ast.ProcTime: "PROCTIME(",
    ast.Interval: "INTERVAL",
    ast.AllowedLateness: "ALLOWED LATENESS",
    ast.TriggerClause: "TRIGGER",
    ast.EvictClause: "EVICT",
    ast.LateDataTo: "LATE",
    ast.WatermarkTrigger: "WATERMARK",
    ast.ProcessingTimeTrigger: "PROCESSING",
    ast.CountTrigger: "COUNT(",
    ast.EveryTrigger: "EVERY",
    ast.DeltaTrigger: "DELTA(",
    ast.TimeoutTrigger: "TIMEOUT(",
    ast.PurgingTrigger: "PURGING",
    ast.AnyTrigger: "ANY(",
    ast.AllTrigger: "ALL(",
    ast.EarlyLateTrigger: "WATERMARK WITH",
    ast.CountEvictor: "COUNT(",
    ast.TimeEvictor: "TIME(",
    ast.DeltaEvictor: "DELTA(",
}

EVERYTHING = (
    "CREATE SOURCE s (a INT, p DECIMAL(10, 2), ts TIMESTAMP, "
    "WATERMARK FOR ts AS ts - INTERVAL '1' SECOND) WITH (format = 'csv', 'k' = -1);\n"
    "CREATE VIEW v AS SELECT a AS x, COUNT(*) n FROM s WATERMARK FOR ts AS ts\n"
    "  WHERE a > -1 GROUP BY a, HOP(PROCTIME(), INTERVAL 5 SECONDS, INTERVAL '1 minute')\n"
    "  HAVING COUNT(*) > 1 ALLOWED LATENESS INTERVAL '1' MINUTE\n"
    "  TRIGGER PURGING ANY(COUNT(-1), TIMEOUT(ALL(WATERMARK, PROCESSING TIME), INTERVAL '1' DAY),\n"
    "    EVERY INTERVAL '1' SECOND OF EVENT TIME, DELTA(a * 2, -2.5),\n"
    "    WATERMARK WITH EARLY COUNT(1) LATE COUNT(2))\n"
    "  EVICT DELTA(a, 3) AFTER LATE DATA TO side;\n"
    "SELECT a FROM s GROUP BY SESSION(ts, GAP a * INTERVAL '1' SECOND)\n"
    "  EVICT TIME(INTERVAL '1' HOUR);\n"
    "SELECT a FROM s GROUP BY SESSION(ts, INTERVAL '5' MINUTES);\n"
    "SELECT a FROM s GROUP BY CUMULATE(ts, INTERVAL '1' MINUTE, INTERVAL '1' HOUR)\n"
    "  EVICT COUNT(1);\n"
    "SELECT a FROM s GROUP BY TUMBLE(ts, INTERVAL '1' MINUTE)\n"
    "  TRIGGER WATERMARK WITH LATE COUNT(1);\n"
    "SELECT a FROM s GROUP BY COUNT_WINDOW(3, 1);\n"
    "SELECT a FROM s GROUP BY GLOBAL() TRIGGER COUNT(2)"
)


def walk(node: object) -> Iterator[ast.Node]:
    if isinstance(node, ast.Node):
        yield node
        for f in dataclasses.fields(node):
            if f.name != "span":
                yield from walk(getattr(node, f.name))
    elif isinstance(node, tuple):
        for item in node:
            yield from walk(item)


def check(text: str) -> set[type]:
    seen: set[type] = set()
    for node in walk(parse(text)):
        span = node.span
        if isinstance(node, ast.Script) and not node.statements:
            continue
        assert span is not None, node
        assert 0 <= span.start < span.end <= len(text), node
        # Line and column agree with the offsets.
        assert span == Span.from_offsets(text, span.start, span.end), node
        piece = text[span.start : span.end]
        assert piece == piece.strip(), node  # no surrounding blanks
        start = STARTS.get(type(node))
        if start is not None:
            assert " ".join(piece.upper().split()).startswith(start), (node, piece)
        if isinstance(node, ast.WindowSpec | ast.CountTrigger | ast.AnyTrigger):
            assert piece.endswith(")"), (node, piece)
        if isinstance(node, ast.Expr):
            assert piece == node.text
        if isinstance(node, ast.Interval):
            assert piece == node.text
        seen.add(type(node))
    return seen


def test_spans_of_every_node_kind() -> None:
    seen = check(EVERYTHING)
    assert set(STARTS) <= seen, set(STARTS) - seen


def test_spans_with_comments_and_line_breaks() -> None:
    text = "-- c\nSELECT\n  a, /* x */ b\nFROM t\nGROUP BY\n  GLOBAL() -- end\nTRIGGER\n  COUNT(1)"
    check(text)
    query = parse(text).statements[0]
    assert isinstance(query, ast.Query) and query.trigger is not None
    span = query.trigger.span
    assert span is not None and (span.line, span.column, span.end_line) == (7, 1, 8)


@pytest.mark.parametrize("path", sorted(FIXTURES.glob("*.wql")), ids=lambda p: p.name)
def test_spans_in_fixtures(path: Path) -> None:
    check(path.read_text(encoding="utf-8"))
