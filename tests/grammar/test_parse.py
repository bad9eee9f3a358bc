"""Every construct of docs/language.md parses into the AST fields it should."""

from __future__ import annotations

from decimal import Decimal
from pathlib import Path

import pytest

from wql.grammar import ast
from wql.grammar.parser import parse

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "queries"

SPEC_SOURCE = """
CREATE SOURCE clicks (
    user_id STRING,
    url     STRING,
    amount  DOUBLE,
    ts      TIMESTAMP,
    WATERMARK FOR ts AS ts - INTERVAL '5' SECOND
) WITH (format = 'csv', path = 'data/clicks.csv', header = 'true');
"""

SPEC_QUERY = """
SELECT user_id, window_start, window_end, COUNT(*) AS clicks, SUM(amount) AS revenue
FROM clicks
WHERE amount > 0
GROUP BY user_id, SESSION(ts, INTERVAL '30' MINUTE)
ALLOWED LATENESS INTERVAL '1' MINUTE
TRIGGER COUNT(100)
EVICT COUNT(10)
LATE DATA TO late_clicks;
"""


def one(text: str) -> ast.Statement:
    script = parse(text)
    assert len(script.statements) == 1
    return script.statements[0]


def query(text: str) -> ast.Query:
    statement = one(text)
    assert isinstance(statement, ast.Query)
    return statement


def window(spec: str) -> ast.Window:
    return query(f"SELECT a FROM t GROUP BY {spec}").group_by.window


def trigger(spec: str) -> ast.Trigger:
    q = query(f"SELECT a FROM t GROUP BY TUMBLE(ts, INTERVAL '1' SECOND) TRIGGER {spec}")
    assert q.trigger is not None
    return q.trigger.trigger


def evict(spec: str) -> ast.EvictClause:
    q = query(f"SELECT a FROM t GROUP BY TUMBLE(ts, INTERVAL '1' SECOND) EVICT {spec}")
    assert q.evict is not None
    return q.evict


def ivl(value: int | str, unit: ast.TimeUnit) -> ast.Interval:
    return ast.Interval((ast.IntervalPart(Decimal(value), unit),))


S, MIN, H, D, MS = (
    ast.TimeUnit.SECOND,
    ast.TimeUnit.MINUTE,
    ast.TimeUnit.HOUR,
    ast.TimeUnit.DAY,
    ast.TimeUnit.MILLISECOND,
)


def test_spec_source_declaration() -> None:
    source = one(SPEC_SOURCE)
    assert isinstance(source, ast.CreateSource)
    assert source.name == ast.Ident("clicks")
    assert [(c.name.name, c.type.name) for c in source.columns] == [
        ("user_id", "STRING"),
        ("url", "STRING"),
        ("amount", "DOUBLE"),
        ("ts", "TIMESTAMP"),
    ]
    assert source.watermark == ast.Watermark(ast.Ident("ts"), ast.Ident("ts"), ivl(5, S))
    assert source.watermark.delay is not None and source.watermark.delay.millis == 5000
    assert [(o.key, o.value) for o in source.options] == [
        ("format", "csv"),
        ("path", "data/clicks.csv"),
        ("header", "true"),
    ]


def test_spec_query_every_clause() -> None:
    q = query(SPEC_QUERY)
    assert [i.expr.text for i in q.select] == [
        "user_id",
        "window_start",
        "window_end",
        "COUNT(*)",
        "SUM(amount)",
    ]
    assert [i.alias.name if i.alias else None for i in q.select] == [
        None,
        None,
        None,
        "clicks",
        "revenue",
    ]
    assert q.source == ast.TableRef(ast.Ident("clicks"))
    assert q.where is not None and q.where.text == "amount > 0"
    assert [k.text for k in q.group_by.keys] == ["user_id"]
    assert q.group_by.window == ast.Session(ast.Ident("ts"), ivl(30, MIN))
    assert q.lateness == ast.AllowedLateness(ivl(1, MIN))
    assert q.trigger == ast.TriggerClause(ast.CountTrigger(ast.Integer(100)))
    assert q.evict == ast.EvictClause(ast.CountEvictor(ast.Integer(10)), None)
    assert q.late_data == ast.LateDataTo(ast.Ident("late_clicks"))
    assert q.having is None


def test_spec_file_source_then_query() -> None:
    script = parse(SPEC_SOURCE + SPEC_QUERY)
    assert [type(s) for s in script.statements] == [ast.CreateSource, ast.Query]


def test_all_types_and_decimal_precision() -> None:
    source = one(
        "CREATE SOURCE s (a STRING, b INT, c BIGINT, d DOUBLE, e BOOLEAN, f TIMESTAMP, "
        "g DATE, h DECIMAL(10, 2), i DECIMAL, j integer)"
    )
    assert isinstance(source, ast.CreateSource)
    types = [(c.type.name, tuple(a.value for a in c.type.args)) for c in source.columns]
    assert types == [
        ("STRING", ()),
        ("INT", ()),
        ("BIGINT", ()),
        ("DOUBLE", ()),
        ("BOOLEAN", ()),
        ("TIMESTAMP", ()),
        ("DATE", ()),
        ("DECIMAL", (10, 2)),
        ("DECIMAL", ()),
        ("INT", ()),
    ]
    assert source.watermark is None and source.options == ()


def test_source_options_forms() -> None:
    source = one(
        "CREATE SOURCE s (a INT) WITH ('header' = 'true', spark.sql.x = 5, inferSchema = TRUE, "
        "quote = 'it''s', esc = 'a\\'b', neg = -1.5)"
    )
    assert isinstance(source, ast.CreateSource)
    assert [(o.key, o.value) for o in source.options] == [
        ("header", "true"),
        ("spark.sql.x", "5"),
        ("inferSchema", "true"),
        ("quote", "it's"),
        ("esc", "a'b"),
        ("neg", "-1.5"),
    ]


def test_watermark_without_delay() -> None:
    source = one("CREATE SOURCE s (ts TIMESTAMP, WATERMARK FOR ts AS ts)")
    assert isinstance(source, ast.CreateSource)
    assert source.watermark == ast.Watermark(ast.Ident("ts"), ast.Ident("ts"), None)


def test_watermark_in_from() -> None:
    q = query(
        "SELECT a FROM t WATERMARK FOR ts AS ts - INTERVAL '2 seconds' "
        "GROUP BY TUMBLE(ts, INTERVAL '1' MINUTE)"
    )
    assert q.source.watermark == ast.Watermark(ast.Ident("ts"), ast.Ident("ts"), ivl(2, S))


def test_create_view() -> None:
    view = one("CREATE VIEW per_user AS SELECT a FROM t GROUP BY a, TUMBLE(ts, INTERVAL '1' HOUR)")
    assert isinstance(view, ast.CreateView)
    assert view.name == ast.Ident("per_user")
    assert view.query.group_by.window == ast.Tumble(ast.Ident("ts"), ivl(1, H))


@pytest.mark.parametrize(
    ("spec", "expected"),
    [
        ("TUMBLE(ts, INTERVAL '5' SECOND)", ast.Tumble(ast.Ident("ts"), ivl(5, S))),
        (
            "TUMBLE(ts, INTERVAL '1' HOUR, INTERVAL '15' MINUTES)",
            ast.Tumble(ast.Ident("ts"), ivl(1, H), ivl(15, MIN)),
        ),
        (
            "TUMBLE(ts, INTERVAL '1' DAY, INTERVAL '-2' HOURS)",
            ast.Tumble(ast.Ident("ts"), ivl(1, D), ivl(-2, H)),
        ),
        (
            "HOP(ts, INTERVAL '1' MINUTE, INTERVAL '5' MINUTE)",
            ast.Hop(ast.Ident("ts"), ivl(1, MIN), ivl(5, MIN)),
        ),
        (
            "HOP(ts, INTERVAL '1' MINUTE, INTERVAL '5' MINUTE, INTERVAL '10' SECONDS)",
            ast.Hop(ast.Ident("ts"), ivl(1, MIN), ivl(5, MIN), ivl(10, S)),
        ),
        (
            "CUMULATE(ts, INTERVAL '1' MINUTE, INTERVAL '1' HOUR)",
            ast.Cumulate(ast.Ident("ts"), ivl(1, MIN), ivl(1, H)),
        ),
        (
            "CUMULATE(ts, INTERVAL '1' MINUTE, INTERVAL '1' HOUR, INTERVAL '30' SECOND)",
            ast.Cumulate(ast.Ident("ts"), ivl(1, MIN), ivl(1, H), ivl(30, S)),
        ),
        ("SESSION(ts, INTERVAL '30' MINUTE)", ast.Session(ast.Ident("ts"), ivl(30, MIN))),
        ("COUNT_WINDOW(5)", ast.CountWindow(ast.Integer(5))),
        ("COUNT_WINDOW(5, 2)", ast.CountWindow(ast.Integer(5), ast.Integer(2))),
        ("GLOBAL()", ast.GlobalWindow()),
        ("TUMBLE(PROCTIME(), INTERVAL '10' SECONDS)", ast.Tumble(ast.ProcTime(), ivl(10, S))),
        (
            "HOP(PROCTIME(), INTERVAL '1' SECOND, INTERVAL '2' SECOND)",
            ast.Hop(ast.ProcTime(), ivl(1, S), ivl(2, S)),
        ),
        ("SESSION(PROCTIME(), INTERVAL '1' MINUTE)", ast.Session(ast.ProcTime(), ivl(1, MIN))),
        (
            "CUMULATE(proctime(), INTERVAL '1' SECOND, INTERVAL '4' SECOND)",
            ast.Cumulate(ast.ProcTime(), ivl(1, S), ivl(4, S)),
        ),
        ("tumble(`my ts`, interval '1' second)", ast.Tumble(ast.Ident("my ts", True), ivl(1, S))),
    ],
)
def test_windows(spec: str, expected: ast.Window) -> None:
    assert window(spec) == expected


def test_dynamic_session_keeps_expression_text_and_span() -> None:
    text = (
        "SELECT a FROM t GROUP BY a, SESSION(ts, GAP CASE WHEN a > 1 "
        "THEN INTERVAL '5' MINUTE ELSE INTERVAL '1' MINUTE END)"
    )
    w = query(text).group_by.window
    assert isinstance(w, ast.DynamicSession)
    assert w.time == ast.Ident("ts")
    assert w.gap.text == "CASE WHEN a > 1 THEN INTERVAL '5' MINUTE ELSE INTERVAL '1' MINUTE END"
    assert w.gap.span is not None
    assert text[w.gap.span.start : w.gap.span.end] == w.gap.text


def test_window_may_come_before_keys() -> None:
    q = query("SELECT a FROM t GROUP BY TUMBLE(ts, INTERVAL '1' SECOND), a, b")
    assert [k.text for k in q.group_by.keys] == ["a", "b"]
    assert isinstance(q.group_by.window, ast.Tumble)


def test_window_all_has_no_keys() -> None:
    assert query("SELECT COUNT(*) FROM t GROUP BY GLOBAL() TRIGGER COUNT(2)").group_by.keys == ()


@pytest.mark.parametrize(
    ("text", "parts", "millis"),
    [
        ("INTERVAL '5' SECOND", ((5, S),), 5_000),
        ("INTERVAL '5' SECONDS", ((5, S),), 5_000),
        ("interval '5' minutes", ((5, MIN),), 300_000),
        ("INTERVAL '1' HOUR", ((1, H),), 3_600_000),
        ("INTERVAL '2' DAYS", ((2, D),), 172_800_000),
        ("INTERVAL '250' MILLISECOND", ((250, MS),), 250),
        ("INTERVAL '250' MILLISECONDS", ((250, MS),), 250),
        ("INTERVAL 5 SECONDS", ((5, S),), 5_000),
        ("INTERVAL '0.5' SECOND", (("0.5", S),), 500),
        ("INTERVAL '5 seconds'", ((5, S),), 5_000),
        ("INTERVAL '1 minute 30 seconds'", ((1, MIN), (30, S)), 90_000),
        ("INTERVAL '1 HOUR 1 ms'", ((1, H), (1, MS)), 3_600_001),
        ("INTERVAL '2 days'", ((2, D),), 172_800_000),
        ("INTERVAL '-5 seconds'", ((-5, S),), -5_000),
        ("INTERVAL '-5' SECOND", ((-5, S),), -5_000),
    ],
)
def test_intervals(text: str, parts: tuple, millis: int) -> None:
    w = window(f"TUMBLE(ts, {text})")
    assert isinstance(w, ast.Tumble)
    assert [(p.value, p.unit) for p in w.size.parts] == [(Decimal(v), u) for v, u in parts]
    assert w.size.millis == millis
    assert w.size.text == text


@pytest.mark.parametrize(
    ("spec", "expected"),
    [
        ("WATERMARK", ast.WatermarkTrigger()),
        ("PROCESSING TIME", ast.ProcessingTimeTrigger()),
        ("COUNT(3)", ast.CountTrigger(ast.Integer(3))),
        ("EVERY INTERVAL '5' SECOND", ast.EveryTrigger(ivl(5, S))),
        (
            "EVERY INTERVAL '5' SECOND OF EVENT TIME",
            ast.EveryTrigger(ivl(5, S), ast.TimeDomain.EVENT),
        ),
        (
            "EVERY INTERVAL '5' SECOND OF PROCESSING TIME",
            ast.EveryTrigger(ivl(5, S), ast.TimeDomain.PROCESSING),
        ),
        ("PURGING COUNT(3)", ast.PurgingTrigger(ast.CountTrigger(ast.Integer(3)))),
        (
            "TIMEOUT(COUNT(3), INTERVAL '1' MINUTE)",
            ast.TimeoutTrigger(ast.CountTrigger(ast.Integer(3)), ivl(1, MIN)),
        ),
        (
            "ANY(COUNT(3), WATERMARK)",
            ast.AnyTrigger((ast.CountTrigger(ast.Integer(3)), ast.WatermarkTrigger())),
        ),
        (
            "ALL(COUNT(3), PROCESSING TIME, PURGING WATERMARK)",
            ast.AllTrigger(
                (
                    ast.CountTrigger(ast.Integer(3)),
                    ast.ProcessingTimeTrigger(),
                    ast.PurgingTrigger(ast.WatermarkTrigger()),
                )
            ),
        ),
        (
            "WATERMARK WITH EARLY COUNT(2)",
            ast.EarlyLateTrigger(ast.CountTrigger(ast.Integer(2)), None),
        ),
        (
            "WATERMARK WITH EARLY EVERY INTERVAL '1' SECOND LATE COUNT(1)",
            ast.EarlyLateTrigger(ast.EveryTrigger(ivl(1, S)), ast.CountTrigger(ast.Integer(1))),
        ),
        (
            "WATERMARK WITH LATE COUNT(1)",
            ast.EarlyLateTrigger(None, ast.CountTrigger(ast.Integer(1))),
        ),
        (
            "PURGING ANY(TIMEOUT(ALL(COUNT(1), COUNT(2)), INTERVAL '1' SECOND), WATERMARK)",
            ast.PurgingTrigger(
                ast.AnyTrigger(
                    (
                        ast.TimeoutTrigger(
                            ast.AllTrigger(
                                (ast.CountTrigger(ast.Integer(1)), ast.CountTrigger(ast.Integer(2)))
                            ),
                            ivl(1, S),
                        ),
                        ast.WatermarkTrigger(),
                    )
                )
            ),
        ),
        ("count(-1)", ast.CountTrigger(ast.Integer(-1))),
    ],
)
def test_triggers(spec: str, expected: ast.Trigger) -> None:
    assert trigger(spec) == expected


def test_delta_trigger_expression_and_threshold() -> None:
    t = trigger("DELTA(amount * 2, 10.5)")
    assert isinstance(t, ast.DeltaTrigger)
    assert t.expr.text == "amount * 2"
    assert t.threshold == ast.Number(Decimal("10.5"))
    assert trigger("DELTA(x, -3)") == ast.DeltaTrigger(ast.Expr("x", "x"), ast.Number(Decimal(-3)))


@pytest.mark.parametrize(
    ("spec", "expected"),
    [
        ("COUNT(10)", ast.EvictClause(ast.CountEvictor(ast.Integer(10)))),
        (
            "COUNT(10) BEFORE",
            ast.EvictClause(ast.CountEvictor(ast.Integer(10)), ast.EvictPosition.BEFORE),
        ),
        (
            "COUNT(10) AFTER",
            ast.EvictClause(ast.CountEvictor(ast.Integer(10)), ast.EvictPosition.AFTER),
        ),
        ("TIME(INTERVAL '5' SECOND)", ast.EvictClause(ast.TimeEvictor(ivl(5, S)))),
        (
            "TIME(INTERVAL '5 seconds') after",
            ast.EvictClause(ast.TimeEvictor(ivl(5, S)), ast.EvictPosition.AFTER),
        ),
        (
            "DELTA(price, 2.5) BEFORE",
            ast.EvictClause(
                ast.DeltaEvictor(ast.Expr("price", "price"), ast.Number(Decimal("2.5"))),
                ast.EvictPosition.BEFORE,
            ),
        ),
    ],
)
def test_evictors(spec: str, expected: ast.EvictClause) -> None:
    assert evict(spec) == expected


def test_late_data_to_after_early_late_trigger() -> None:
    # LATE after an EARLY trigger could start `LATE <t>` or `LATE DATA TO`.
    q = query(
        "SELECT a FROM t GROUP BY TUMBLE(ts, INTERVAL '1' SECOND) "
        "TRIGGER WATERMARK WITH EARLY COUNT(2)\nLATE  DATA\tTO side"
    )
    assert q.trigger == ast.TriggerClause(
        ast.EarlyLateTrigger(ast.CountTrigger(ast.Integer(2)), None)
    )
    assert q.late_data == ast.LateDataTo(ast.Ident("side"))


def test_having_and_where() -> None:
    q = query(
        "SELECT a, COUNT(*) AS n FROM t WHERE a IS NOT NULL AND b IN (1, 2) "
        "GROUP BY a, TUMBLE(ts, INTERVAL '1' SECOND) HAVING COUNT(*) > 2 AND MAX(b) < 10"
    )
    assert q.where is not None and q.where.text == "a IS NOT NULL AND b IN (1, 2)"
    assert q.having is not None and q.having.text == "COUNT(*) > 2 AND MAX(b) < 10"


def test_several_statements_and_empty_ones() -> None:
    script = parse(
        ";; SELECT a FROM t GROUP BY GLOBAL() TRIGGER COUNT(1);;"
        "SELECT b FROM u GROUP BY COUNT_WINDOW(2);"
    )
    assert len(script.statements) == 2
    assert parse("").statements == ()
    assert parse("  -- only a comment\n").statements == ()


@pytest.mark.parametrize(
    "expr",
    [
        "a + b * c - d / e % f",
        "-a",
        "NOT a",
        "a || 'x'",
        "a = 1 OR b <> 2 AND c != 3",
        "a <=> b",
        "a IS NULL",
        "a IS NOT TRUE",
        "a IS DISTINCT FROM b",
        "a NOT IN (1, 2, 3)",
        "a BETWEEN 1 AND 10",
        "a NOT BETWEEN 1 AND 10 AND b",
        "a LIKE 'x%'",
        "a NOT RLIKE '^x'",
        "CASE WHEN a > 1 THEN 'x' WHEN a > 0 THEN 'y' ELSE 'z' END",
        "CASE a WHEN 1 THEN 'one' END",
        "CAST(a AS DECIMAL(10, 2))",
        "TRY_CAST(a AS BIGINT)",
        "CAST(a AS ARRAY<INT>)",
        "COUNT(*)",
        "COUNT(DISTINCT url)",
        "coalesce(a, b, 0)",
        "now()",
        "t.a",
        "`weird name`.`x`",
        "arr[0]",
        "EXTRACT(HOUR FROM ts)",
        "TIMESTAMP '2024-01-01 00:00:00'",
        "ts + INTERVAL '5' MINUTE",
        "1.5e3 + .5 + 2.",
        '"double quoted"',
        "NULL",
        "(a + b) * (c - d)",
        "~a & b | c ^ d",
    ],
)
def test_scalar_expressions(expr: str) -> None:
    q = query(f"SELECT {expr} AS x FROM t GROUP BY GLOBAL() TRIGGER COUNT(1)")
    assert q.select[0].expr.text == expr
    assert q.select[0].alias == ast.Ident("x")


def test_expression_spans_point_into_the_file() -> None:
    text = "SELECT\n  a + 1 AS b,\n  COUNT(*)\nFROM t\nWHERE x > 0\nGROUP BY k, GLOBAL()"
    q = query(text)
    for expr in (q.select[0].expr, q.select[1].expr, q.where, q.group_by.keys[0]):
        assert expr is not None and expr.span is not None
        assert text[expr.span.start : expr.span.end] == expr.text
    span = q.select[1].expr.span
    assert span is not None and (span.line, span.column) == (3, 3)


def test_clause_spans_cover_keywords() -> None:
    text = "SELECT a FROM t GROUP BY TUMBLE(ts, INTERVAL '1' SECOND)\nTRIGGER COUNT(100)"
    q = query(text)
    assert q.trigger is not None and q.trigger.span is not None
    assert text[q.trigger.span.start : q.trigger.span.end] == "TRIGGER COUNT(100)"
    assert q.trigger.span.line == 2 and q.trigger.span.column == 1


def test_implicit_alias() -> None:
    q = query("SELECT COUNT(*) n FROM t GROUP BY GLOBAL() TRIGGER COUNT(1)")
    assert q.select[0].alias == ast.Ident("n")


def test_expr_equality_ignores_spelling_but_keeps_text() -> None:
    a = query("SELECT count( *  ) FROM t GROUP BY GLOBAL() TRIGGER COUNT(1)").select[0].expr
    b = query("SELECT COUNT(*) FROM t GROUP BY GLOBAL() TRIGGER COUNT(1)").select[0].expr
    assert a == b
    assert a.text == "count( *  )" and a.canonical == "COUNT(*)"


@pytest.mark.parametrize("path", sorted(FIXTURES.glob("*.wql")), ids=lambda p: p.name)
def test_fixture_files_parse(path: Path) -> None:
    script = parse(path.read_text(encoding="utf-8"), str(path))
    assert any(isinstance(s, ast.Query | ast.CreateView) for s in script.statements)
