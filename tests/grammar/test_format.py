"""The canonical formatter: exact layout, comments kept, round trip and idempotence."""

from __future__ import annotations

from pathlib import Path

import pytest

from wql.grammar import ast
from wql.grammar.formatter import format_script, format_trigger, quote_string
from wql.grammar.parser import parse

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "queries"


def fmt(text: str) -> str:
    return format_script(parse(text))


def test_canonical_layout_of_the_spec_example() -> None:
    text = (
        "create source clicks (user_id string, url string, amount double, ts timestamp, "
        "watermark for ts as ts - interval '5' seconds) "
        "with (format = 'csv', path = 'data/clicks.csv', header = 'true');"
        "select user_id, window_start, count(*) clicks, sum(amount) as revenue from clicks "
        "where amount>0 group by user_id, session(ts, interval '30 minutes') "
        "allowed lateness interval 1 minute trigger count(100) evict count(10) before "
        "late data to late_clicks"
    )
    assert fmt(text) == (
        "CREATE SOURCE clicks (\n"
        "    user_id STRING,\n"
        "    url     STRING,\n"
        "    amount  DOUBLE,\n"
        "    ts      TIMESTAMP,\n"
        "    WATERMARK FOR ts AS ts - INTERVAL '5' SECOND\n"
        ") WITH (format = 'csv', path = 'data/clicks.csv', header = 'true');\n"
        "\n"
        "SELECT\n"
        "    user_id,\n"
        "    window_start,\n"
        "    COUNT(*) AS clicks,\n"
        "    SUM(amount) AS revenue\n"
        "FROM clicks\n"
        "WHERE amount > 0\n"
        "GROUP BY user_id, SESSION(ts, INTERVAL '30' MINUTE)\n"
        "ALLOWED LATENESS INTERVAL '1' MINUTE\n"
        "TRIGGER COUNT(100)\n"
        "EVICT COUNT(10) BEFORE\n"
        "LATE DATA TO late_clicks;\n"
    )


def test_view_window_first_and_from_watermark() -> None:
    text = (
        "create view v as select a from t watermark for ts as ts - interval '1 minute 30 seconds' "
        "group by tumble(ts, interval '1' hour), a, b"
    )
    assert fmt(text) == (
        "CREATE VIEW v AS\n"
        "SELECT\n"
        "    a\n"
        "FROM t WATERMARK FOR ts AS ts - INTERVAL '1 MINUTE 30 SECONDS'\n"
        "GROUP BY a, b, TUMBLE(ts, INTERVAL '1' HOUR);\n"
    )


def test_long_option_list_breaks_one_per_line() -> None:
    options = ", ".join(f"option_number_{i} = 'value {i}'" for i in range(6))
    out = fmt(f"CREATE SOURCE s (a INT) WITH ({options})")
    assert out.splitlines()[2:5] == [
        ") WITH (",
        "    option_number_0 = 'value 0',",
        "    option_number_1 = 'value 1',",
    ]
    assert out.endswith("    option_number_5 = 'value 5'\n);\n")


@pytest.mark.parametrize(
    ("spec", "canonical"),
    [
        ("watermark", "WATERMARK"),
        ("processing   time", "PROCESSING TIME"),
        ("every interval '5 seconds' of event time", "EVERY INTERVAL '5' SECOND OF EVENT TIME"),
        ("delta( a*2 , 1.50 )", "DELTA(a * 2, 1.5)"),
        ("timeout(count(1), interval 2 hours)", "TIMEOUT(COUNT(1), INTERVAL '2' HOUR)"),
        (
            "purging any(count(1),all(watermark,count(2)))",
            "PURGING ANY(COUNT(1), ALL(WATERMARK, COUNT(2)))",
        ),
        ("watermark with late count(1)", "WATERMARK WITH LATE COUNT(1)"),
        (
            "watermark with early count(1) late count(2)",
            "WATERMARK WITH EARLY COUNT(1) LATE COUNT(2)",
        ),
    ],
)
def test_trigger_spelling(spec: str, canonical: str) -> None:
    q = parse(f"SELECT a FROM t GROUP BY GLOBAL() TRIGGER {spec}").statements[0]
    assert isinstance(q, ast.Query) and q.trigger is not None
    assert format_trigger(q.trigger.trigger) == canonical


@pytest.mark.parametrize(
    ("expr", "canonical"),
    [
        ("count( * )", "COUNT(*)"),
        ("count(distinct   x)", "COUNT(DISTINCT x)"),
        ("a+b*  c", "a + b * c"),
        ("- -a", "- -a"),
        ("-(-a)", "-(-a)"),
        (
            "case when a is not null then 'x' else \"y\" end",
            "CASE WHEN a IS NOT NULL THEN 'x' ELSE \"y\" END",
        ),
        ("cast(a as decimal(10,2))", "CAST(a AS DECIMAL(10, 2))"),
        ("a not in (1,2)", "a NOT IN (1, 2)"),
        ("t.`a b`", "t.`a b`"),
        ("arr[ 0 ]", "arr[0]"),
        ("ts + interval '90 seconds'", "ts + INTERVAL '90' SECOND"),
        ("extract(hour from ts)", "EXTRACT(HOUR FROM ts)"),
        ("my_udf(a)", "MY_UDF(a)"),
        ("timestamp '2024-01-01'", "TIMESTAMP '2024-01-01'"),
        ("cast(a as map<string, array<int>>)", "CAST(a AS MAP<STRING, ARRAY<INT>>)"),
    ],
)
def test_expression_canonical_spelling(expr: str, canonical: str) -> None:
    q = parse(f"SELECT {expr} FROM t GROUP BY GLOBAL()").statements[0]
    assert isinstance(q, ast.Query)
    assert q.select[0].expr.canonical == canonical
    assert fmt(f"SELECT {canonical} FROM t GROUP BY GLOBAL()") == fmt(
        f"SELECT {expr} FROM t GROUP BY GLOBAL()"
    )


def test_identifiers_keep_backquotes_and_strings_escape() -> None:
    out = fmt("CREATE SOURCE `my src` (`a``b` INT) WITH ('from' = 'it''s', k = 'a\\\\b')")
    assert out == (
        "CREATE SOURCE `my src` (\n    `a``b` INT\n) WITH ('from' = 'it\\'s', k = 'a\\\\b');\n"
    )
    assert quote_string("line\nbreak") == "'line\\nbreak'"


def test_comments_survive_in_place() -> None:
    text = (
        "-- file header\n"
        "\n"
        "/* the source */\n"
        "CREATE SOURCE s (a INT, -- the key\n"
        "  ts TIMESTAMP);  -- done with s\n"
        "select a, -- first\n"
        "  count(*) n\n"
        "from s\n"
        "-- only grouped by time\n"
        "group by a, global()\n"
        "trigger count(1);\n"
        "-- trailing words\n"
    )
    out = fmt(text)
    assert out == (
        "-- file header\n"
        "\n"  # the blank line after a header comment is kept
        "/* the source */\n"
        "CREATE SOURCE s (\n"
        "    a  INT,  -- the key\n"
        "    ts TIMESTAMP\n"
        ");  -- done with s\n"
        "\n"
        "SELECT\n"
        "    a,  -- first\n"
        "    COUNT(*) AS n\n"
        "FROM s\n"
        "-- only grouped by time\n"
        "GROUP BY a, GLOBAL()\n"
        "TRIGGER COUNT(1);\n"
        "\n"
        "-- trailing words\n"
    )
    assert fmt(out) == out
    assert parse(out) == parse(text)


def test_comment_inside_multiline_expression_moves_to_clause_line() -> None:
    text = "SELECT a FROM t\nWHERE a > 0 -- positive\n  AND a < 10\nGROUP BY GLOBAL()"
    out = fmt(text)
    assert "WHERE a > 0 AND a < 10  -- positive\n" in out
    assert fmt(out) == out


def test_only_comments_and_empty() -> None:
    assert fmt("") == ""
    assert fmt("-- nothing here\n/* at all */") == "-- nothing here\n/* at all */\n"


@pytest.mark.parametrize("path", sorted(FIXTURES.glob("*.wql")), ids=lambda p: p.name)
def test_fixtures_round_trip_and_idempotent(path: Path) -> None:
    text = path.read_text(encoding="utf-8")
    once = fmt(text)
    assert parse(once) == parse(text)
    assert fmt(once) == once
