"""Malformed queries: each error's line, column, message and expected tokens."""

from __future__ import annotations

import pytest

from wql.errors import WqlError, WqlErrors, WqlSemanticError, WqlSyntaxError
from wql.grammar.parser import parse

# (text, line, column, message, expected) -- reviewed by hand: the position is
# the offending token, the message names it, `expected` is what fits there.
CASES = [
    ("SELECT", 1, 7, "unexpected end of input", ("'*'", "ROW_NUMBER", "an expression", "t.*")),
    ("SELECT a", 1, 9, "unexpected end of input", ("','", "AS", "FROM", "an identifier")),
    ("SELECT a FROM", 1, 14, "unexpected end of input", ("'('", "TABLE", "an identifier")),
    (
        "SELECT a FROM t",
        1,
        16,
        "unexpected end of input",
        # a windowed aggregate (GROUP), a window Top-N (QUALIFY), a window join
        ("AS", "FULL", "GROUP", "INNER", "JOIN", "LEFT", "QUALIFY", "RIGHT", "WATERMARK")
        + ("WHERE", "an identifier"),
    ),
    ("SELECT a FROM t GROUP", 1, 22, "unexpected end of input", ("BY",)),
    (
        "SELECT a FROM t GROUP BY",
        1,
        25,
        "unexpected end of input",
        ("COUNT_WINDOW", "CUMULATE", "GLOBAL", "HOP", "SESSION", "TUMBLE", "an expression"),
    ),
    (
        "SELECT a FROM t WHERE GROUP BY TUMBLE(ts, INTERVAL '1' MINUTE)",
        1,
        23,
        "unexpected GROUP",
        ("an expression",),
    ),
    (
        "SELECT a, FROM t GROUP BY TUMBLE(ts, INTERVAL '1' MINUTE)",
        1,
        11,
        "unexpected FROM",
        ("'*'", "ROW_NUMBER", "an expression", "t.*"),
    ),
    (
        "SELECT a b c FROM t GROUP BY TUMBLE(ts, INTERVAL '1' MINUTE)",
        1,
        12,
        "unexpected identifier c",
        ("','", "FROM"),
    ),
    (
        "SELECT (a FROM t GROUP BY TUMBLE(ts, INTERVAL '1' MINUTE)",
        1,
        11,
        "unexpected FROM",
        ("')'", "','"),
    ),
    (
        "SELECT a) FROM t GROUP BY TUMBLE(ts, INTERVAL '1' MINUTE)",
        1,
        9,
        "unexpected ')'",
        ("','", "AS", "FROM", "an identifier"),
    ),
    (
        "SELECT a FROM t GROUP BY TUMBLE(ts INTERVAL '1' MINUTE)",
        1,
        36,
        "unexpected INTERVAL",
        ("','",),
    ),
    (
        "SELECT a FROM t GROUP BY TUMBLE(ts, '1' MINUTE)",
        1,
        37,
        "unexpected string '1'",
        ("INTERVAL",),
    ),
    (
        "SELECT a FROM t GROUP BY TUMBLE(ts, INTERVAL '1' WEEK)",
        1,
        50,
        "unexpected identifier WEEK",
        ("')'", "','"),
    ),
    (
        "SELECT a FROM t GROUP BY TUMBLE(ts, INTERVAL '1')",
        1,
        37,
        "interval '1' needs a unit",
        ("MILLISECOND", "SECOND", "MINUTE", "HOUR", "DAY"),
    ),
    (
        "SELECT a FROM t GROUP BY TUMBLE(ts, INTERVAL 'abc' SECOND)",
        1,
        46,
        "interval value 'abc' is not a number",
        (),
    ),
    (
        "SELECT a FROM t GROUP BY TUMBLE(ts, INTERVAL '5 fortnights')",
        1,
        49,
        "unknown interval unit 'fortnights'",
        ("millisecond", "second", "minute", "hour", "day"),
    ),
    ("SELECT a FROM t GROUP BY TUMBLE(ts)", 1, 35, "unexpected ')'", ("','",)),
    ("SELECT a FROM t GROUP BY HOP(ts, INTERVAL '1' MINUTE)", 1, 53, "unexpected ')'", ("','",)),
    ("SELECT a FROM t GROUP BY SESSION(ts, GAP)", 1, 41, "unexpected ')'", ("an expression",)),
    ("SELECT a FROM t GROUP BY COUNT_WINDOW()", 1, 39, "unexpected ')'", ("'-'", "an integer")),
    ("SELECT a FROM t GROUP BY COUNT_WINDOW(1.5)", 1, 39, "1.5 is not an integer", ("an integer",)),
    ("SELECT a FROM t GROUP BY GLOBAL", 1, 32, "unexpected end of input", ("'('",)),
    (
        "SELECT a FROM t GROUP BY a",
        1,
        17,
        "GROUP BY needs a window",
        ("TUMBLE", "HOP", "CUMULATE", "SESSION", "COUNT_WINDOW", "GLOBAL"),
    ),
    (
        "SELECT a FROM t GROUP BY GLOBAL(), COUNT_WINDOW(3)",
        1,
        36,
        "GROUP BY has more than one window",
        (),
    ),
    (
        "SELECT a FROM t GROUP BY TUMBLE(PROCTIME, INTERVAL '1' MINUTE)",
        1,
        41,
        "unexpected ','",
        ("'('",),
    ),
    (
        "SELECT a FROM t GROUP BY TUMBLE(ts, INTERVAL '1' MINUTE) TRIGGER",
        1,
        65,
        "unexpected end of input",
        (
            "AFTER",
            "ALL",
            "ANY",
            "COUNT",
            "DELTA",
            "EVERY",
            "ONCE",
            "PROCESSING",
            "PURGING",
            "SEQUENCE",
            "TIMEOUT",
            "UNTIL",
            "WATERMARK",
        ),
    ),
    (
        "SELECT a FROM t GROUP BY TUMBLE(ts, INTERVAL '1' MINUTE) TRIGGER COUNT",
        1,
        71,
        "unexpected end of input",
        ("'('",),
    ),
    (
        "SELECT a FROM t GROUP BY TUMBLE(ts, INTERVAL '1' MINUTE) TRIGGER COUNT(x)",
        1,
        72,
        "unexpected identifier x",
        ("'-'", "an integer"),
    ),
    (
        "SELECT a FROM t GROUP BY TUMBLE(ts, INTERVAL '1' MINUTE) TRIGGER PROCESSING",
        1,
        76,
        "unexpected end of input",
        ("TIME",),
    ),
    (
        "SELECT a FROM t GROUP BY TUMBLE(ts, INTERVAL '1' MINUTE) TRIGGER EVERY 5",
        1,
        72,
        "unexpected number 5",
        ("INTERVAL",),
    ),
    (
        "SELECT a FROM t GROUP BY TUMBLE(ts, INTERVAL '1' MINUTE) TRIGGER EVERY INTERVAL '1' SECOND OF TIME",  # noqa: E501
        1,
        95,
        "unexpected TIME",
        ("EVENT", "PROCESSING"),
    ),
    (
        "SELECT a FROM t GROUP BY TUMBLE(ts, INTERVAL '1' MINUTE) TRIGGER ANY()",
        1,
        70,
        "unexpected ')'",
        (
            "AFTER",
            "ALL",
            "ANY",
            "COUNT",
            "DELTA",
            "EVERY",
            "ONCE",
            "PROCESSING",
            "PURGING",
            "SEQUENCE",
            "TIMEOUT",
            "UNTIL",
            "WATERMARK",
        ),
    ),
    (
        "SELECT a FROM t GROUP BY TUMBLE(ts, INTERVAL '1' MINUTE) TRIGGER WATERMARK WITH",
        1,
        80,
        "unexpected end of input",
        ("EARLY", "LATE"),
    ),
    (
        "SELECT a FROM t GROUP BY TUMBLE(ts, INTERVAL '1' MINUTE) TRIGGER TIMEOUT(COUNT(1))",
        1,
        82,
        "unexpected ')'",
        ("','",),
    ),
    (
        "SELECT a FROM t GROUP BY TUMBLE(ts, INTERVAL '1' MINUTE) TRIGGER DELTA(a)",
        1,
        73,
        "unexpected ')'",
        ("','",),
    ),
    (
        "SELECT a FROM t GROUP BY TUMBLE(ts, INTERVAL '1' MINUTE) TRIGGER FOO",
        1,
        66,
        "unexpected identifier FOO",
        (
            "AFTER",
            "ALL",
            "ANY",
            "COUNT",
            "DELTA",
            "EVERY",
            "ONCE",
            "PROCESSING",
            "PURGING",
            "SEQUENCE",
            "TIMEOUT",
            "UNTIL",
            "WATERMARK",
        ),
    ),
    (
        "SELECT a FROM t GROUP BY TUMBLE(ts, INTERVAL '1' MINUTE) EVICT",
        1,
        63,
        "unexpected end of input",
        ("COUNT", "DELTA", "TIME"),
    ),
    (
        "SELECT a FROM t GROUP BY TUMBLE(ts, INTERVAL '1' MINUTE) EVICT COUNT(2) SOMETIME",
        1,
        73,
        "unexpected identifier SOMETIME",
        ("';'", "AFTER", "BEFORE", "EMIT", "LATE DATA TO", "end of input"),
    ),
    (
        "SELECT a FROM t GROUP BY TUMBLE(ts, INTERVAL '1' MINUTE) EVICT TIME(5)",
        1,
        69,
        "unexpected number 5",
        ("INTERVAL",),
    ),
    (
        "SELECT a FROM t GROUP BY TUMBLE(ts, INTERVAL '1' MINUTE) ALLOWED INTERVAL '1' SECOND",
        1,
        66,
        "unexpected INTERVAL",
        ("LATENESS",),
    ),
    (
        "SELECT a FROM t GROUP BY TUMBLE(ts, INTERVAL '1' MINUTE) ALLOWED LATENESS 5",
        1,
        75,
        "unexpected number 5",
        ("INTERVAL",),
    ),
    (
        "SELECT a FROM t GROUP BY TUMBLE(ts, INTERVAL '1' MINUTE) LATE DATA x",
        1,
        58,
        "unexpected LATE",
        (
            "','",
            "';'",
            "ALLOWED",
            "EMIT",
            "EVICT",
            "HAVING",
            "LATE DATA TO",
            "TRIGGER",
            "end of input",
        ),
    ),
    (
        "SELECT a FROM t GROUP BY TUMBLE(ts, INTERVAL '1' MINUTE) EVICT COUNT(1) TRIGGER COUNT(1)",
        1,
        73,
        "unexpected TRIGGER",
        ("';'", "AFTER", "BEFORE", "EMIT", "LATE DATA TO", "end of input"),
    ),
    (
        "SELECT a FROM t GROUP BY TUMBLE(ts, INTERVAL '1' MINUTE) HAVING",
        1,
        64,
        "unexpected end of input",
        ("an expression",),
    ),
    (
        "SELECT a FROM t GROUP BY TUMBLE(ts, INTERVAL '1' MINUTE) ORDER BY a",
        1,
        58,
        # ORDER is a keyword of the grammar now (ROW_NUMBER() OVER (... ORDER BY ...))
        "unexpected ORDER",
        (
            "','",
            "';'",
            "ALLOWED",
            "EMIT",
            "EVICT",
            "HAVING",
            "LATE DATA TO",
            "TRIGGER",
            "end of input",
        ),
    ),
    ("CREATE SOURCE s", 1, 16, "unexpected end of input", ("'('",)),
    ("CREATE SOURCE s ()", 1, 18, "unexpected ')'", ("an identifier",)),
    (
        "CREATE SOURCE s (a)",
        1,
        19,
        "unexpected ')'",
        ("BIGINT", "BOOLEAN", "DATE", "DECIMAL", "DOUBLE", "INT", "INTEGER", "STRING", "TIMESTAMP"),
    ),
    (
        "CREATE SOURCE s (a VARCHAR)",
        1,
        20,
        "unexpected identifier VARCHAR",
        ("BIGINT", "BOOLEAN", "DATE", "DECIMAL", "DOUBLE", "INT", "INTEGER", "STRING", "TIMESTAMP"),
    ),
    ("CREATE SOURCE s (a INT,)", 1, 24, "unexpected ')'", ("WATERMARK", "an identifier")),
    (
        "CREATE SOURCE s (WATERMARK FOR ts AS ts - INTERVAL '1' SECOND, ts TIMESTAMP)",
        1,
        28,
        "unexpected FOR",
        ("BIGINT", "BOOLEAN", "DATE", "DECIMAL", "DOUBLE", "INT", "INTEGER", "STRING", "TIMESTAMP"),
    ),
    (
        "CREATE SOURCE s (ts TIMESTAMP, WATERMARK ts AS ts)",
        1,
        42,
        "unexpected identifier ts",
        ("FOR",),
    ),
    (
        "CREATE SOURCE s (a INT) WITH (format 'csv')",
        1,
        38,
        "unexpected string 'csv'",
        ("'.'", "'='"),
    ),
    (
        "CREATE SOURCE s (a INT) WITH (format = csv)",
        1,
        40,
        "unexpected identifier csv",
        ("'-'", "FALSE", "TRUE", "a number", "a string", "an integer"),
    ),
    ("CREATE SOURCE s (a DECIMAL(10))", 1, 30, "unexpected ')'", ("','",)),
    ("CREATE TABLE s (a INT)", 1, 8, "unexpected TABLE", ("SOURCE", "VIEW")),
    (
        "CREATE VIEW v SELECT a FROM t GROUP BY TUMBLE(ts, INTERVAL '1' MINUTE)",
        1,
        15,
        "unexpected SELECT",
        ("AS",),
    ),
    (
        "SELECT a FROM t GROUP BY TUMBLE(ts, INTERVAL '1' MINUTE) SELECT b FROM t GROUP BY TUMBLE(ts, INTERVAL '1' MINUTE)",  # noqa: E501
        1,
        58,
        "unexpected SELECT",
        (
            "','",
            "';'",
            "ALLOWED",
            "EMIT",
            "EVICT",
            "HAVING",
            "LATE DATA TO",
            "TRIGGER",
            "end of input",
        ),
    ),
    (
        # the string runs over code to the next quote: reported where it opens
        "SELECT a FROM t WHERE a = 'oops GROUP BY TUMBLE(ts, INTERVAL '1' MINUTE)",
        1,
        27,
        "unterminated string",
        (),
    ),
    (
        "SELECT a FROM t /* open GROUP BY TUMBLE(ts, INTERVAL '1' MINUTE)",
        1,
        17,
        "unterminated comment",
        (),
    ),
    (
        "SELECT a @ b FROM t GROUP BY TUMBLE(ts, INTERVAL '1' MINUTE)",
        1,
        10,
        "unexpected character '@'",
        ("'('", "','", "'.'", "AS", "FROM", "a string", "an identifier", "an operator"),
    ),
    (
        "SELECT `a FROM t GROUP BY TUMBLE(ts, INTERVAL '1' MINUTE)",
        1,
        8,
        "unterminated quoted identifier",
        (),
    ),
    (
        "SELECT CASE WHEN a THEN 1 FROM t GROUP BY TUMBLE(ts, INTERVAL '1' MINUTE)",
        1,
        27,
        "unexpected FROM",
        ("ELSE", "END", "WHEN"),
    ),
    (
        "SELECT CAST(a) FROM t GROUP BY TUMBLE(ts, INTERVAL '1' MINUTE)",
        1,
        14,
        "unexpected ')'",
        ("AS",),
    ),
    (
        "SELECT a FROM t\nWHERE a >\nGROUP BY TUMBLE(ts, INTERVAL '1' MINUTE)",
        3,
        1,
        "unexpected GROUP",
        ("an expression",),
    ),
    (
        "UPDATE t SET a = 1",
        1,
        1,
        # a word that is a keyword somewhere is named as one (UPDATE: EVERY ... ON UPDATE)
        "unexpected UPDATE",
        ("';'", "CREATE", "SELECT", "end of input"),
    ),
]


@pytest.mark.parametrize(("text", "line", "column", "message", "expected"), CASES)
def test_syntax_error_fields(
    text: str, line: int, column: int, message: str, expected: tuple[str, ...]
) -> None:
    with pytest.raises(WqlError) as info:
        parse(text, "q.wql")
    # Recovery may find more errors further on; the first is the one listed.
    err = info.value.errors[0] if isinstance(info.value, WqlErrors) else info.value
    assert isinstance(err, WqlSyntaxError)
    assert (err.line, err.column) == (line, column)
    assert err.message == message
    assert tuple(err.expected) == expected
    assert err.filename == "q.wql" and err.source == text
    # No Lark-internal terminal names leak into what users read.
    for name in err.expected:
        assert "ANON" not in name and "RPAR" not in name and "$" not in name


def test_at_least_forty_cases() -> None:
    assert len(CASES) >= 40


def test_error_renders_with_caret_under_the_token() -> None:
    text = "SELECT a FROM t\nGROUP BY TUMBLE(ts INTERVAL '1' MINUTE)"
    with pytest.raises(WqlSyntaxError) as info:
        parse(text, "q.wql")
    rendered = info.value.render()
    assert rendered.splitlines() == [
        "q.wql:2:20: error: unexpected INTERVAL",
        "   2 | GROUP BY TUMBLE(ts INTERVAL '1' MINUTE)",
        "     |                    ^^^^^^^^",
        "  expected one of: ','",
    ]


def test_unclosed_parenthesis_hint() -> None:
    with pytest.raises(WqlSyntaxError) as info:
        parse("SELECT a FROM t GROUP BY TUMBLE(ts, INTERVAL '1' MINUTE;")
    assert info.value.message == "unexpected ';'"
    assert info.value.hint == "a parenthesis is not closed"


def test_missing_semicolon_hint() -> None:
    with pytest.raises(WqlSyntaxError) as info:
        parse("SELECT a FROM t GROUP BY GLOBAL()\nSELECT b FROM t GROUP BY GLOBAL()")
    assert (info.value.line, info.value.column) == (2, 1)
    assert info.value.hint == "end the previous statement with ';'"


def test_unterminated_string_spans_to_end_of_line() -> None:
    text = "SELECT a FROM t WHERE b = 'x\nGROUP BY GLOBAL()"
    with pytest.raises(WqlSyntaxError) as info:
        parse(text)
    err = info.value
    assert err.message == "unterminated string"
    assert err.span is not None and text[err.span.start : err.span.end] == "'x"


def test_end_of_input_points_after_last_token() -> None:
    with pytest.raises(WqlSyntaxError) as info:
        parse("SELECT a FROM t GROUP BY\n\n   \n")
    assert (info.value.line, info.value.column) == (1, 25)


# ----------------------------------------------------------------- recovery


def test_errors_in_every_statement_are_reported() -> None:
    text = (
        "CREATE SOURCE s (a INT, ts TIMESTAMP);\n"
        "SELECT a FROM s GROUP BY TUMBLE(ts INTERVAL '1' MINUTE);\n"
        "SELECT a FROM s GROUP BY TUMBLE(ts, INTERVAL '1' MINUTE);\n"
        "SELECT FROM s GROUP BY GLOBAL();\n"
        "CREATE SOURCE bad (x VARCHAR);\n"
    )
    with pytest.raises(WqlErrors) as info:
        parse(text, "multi.wql")
    errors = info.value.errors
    assert [(e.line, e.column, e.message) for e in errors] == [
        (2, 36, "unexpected INTERVAL"),
        (4, 8, "unexpected FROM"),
        (5, 22, "unexpected identifier VARCHAR"),
    ]
    assert all(isinstance(e, WqlSyntaxError) for e in errors)
    assert all(e.source == text and e.filename == "multi.wql" for e in errors)
    rendered = info.value.render()
    assert rendered.count("multi.wql:") == 3
    assert "   4 | SELECT FROM s GROUP BY GLOBAL();" in rendered


def test_transformer_errors_are_recovered_too() -> None:
    text = (
        "SELECT a FROM t GROUP BY a;\n"
        "SELECT a FROM t GROUP BY TUMBLE(ts, INTERVAL '1 fortnight');\n"
        "SELECT a FROM t GROUP BY GLOBAL(), GLOBAL()"
    )
    with pytest.raises(WqlErrors) as info:
        parse(text)
    assert [(e.line, e.message) for e in info.value.errors] == [
        (1, "GROUP BY needs a window"),
        (2, "unknown interval unit 'fortnight'"),
        (3, "GROUP BY has more than one window"),
    ]


def test_semicolon_inside_string_or_comment_does_not_split() -> None:
    text = (
        "SELECT a FROM t WHERE b = ';' GROUP BY GLOBAL() /* ; */ TRIGGER COUNT(x);\n"
        "-- a comment; with a semicolon\n"
        "SELECT a FROM t GROUP BY GLOBAL() TRIGGER COUNT(1)"
    )
    with pytest.raises(WqlSyntaxError) as info:
        parse(text)
    assert (info.value.line, info.value.column) == (1, 71)


def test_single_error_is_not_wrapped() -> None:
    with pytest.raises(WqlError) as info:
        parse("SELECT a FROM t GROUP BY GLOBAL();\nSELECT b FROM;")
    assert not isinstance(info.value, WqlErrors)
    assert info.value.line == 2


def test_integer_beyond_64_bits_is_a_positioned_semantic_error() -> None:
    # Well-formed text, so not a syntax error; the literal (with its sign) is underlined.
    text = "SELECT a FROM t GROUP BY TUMBLE(ts, INTERVAL '1' MINUTE) TRIGGER COUNT(-99999999999999999999)"  # noqa: E501
    with pytest.raises(WqlSemanticError) as info:
        parse(text)
    assert (info.value.line, info.value.column) == (1, 72)
    assert info.value.span is not None and info.value.span.end_column == 93
    assert info.value.message == (
        "integer -99999999999999999999 is out of range (min -9223372036854775808: "
        "a signed 64-bit integer)"
    )


def test_integers_at_the_64_bit_limits_parse() -> None:
    for value in (2**63 - 1, -(2**63)):
        text = f"SELECT a FROM t GROUP BY GLOBAL() TRIGGER COUNT({value})"
        trigger = parse(text).statements[0].trigger
        assert trigger is not None and trigger.trigger.count.value == value


def test_interval_beyond_sparks_interval_range_is_a_positioned_error() -> None:
    text = "SELECT a FROM t\nGROUP BY TUMBLE(ts, INTERVAL '99999999999999999999' DAY)"
    with pytest.raises(WqlSemanticError) as info:
        parse(text)
    assert (info.value.line, info.value.column) == (2, 21)
    assert info.value.message == (
        "INTERVAL '99999999999999999999' DAY is out of range "
        "(max 9223372036854775 ms, about 106751991 days)"
    )
    # The longest interval Spark can hold (a long of microseconds) is
    # accepted, in any spelling; one millisecond more is not.
    biggest = "INTERVAL '9223372036854775' MILLISECONDS"
    window = parse(f"SELECT a FROM t GROUP BY TUMBLE(ts, {biggest})").statements[0].group_by.window
    assert window.size.millis == 9223372036854775
    shortest = "INTERVAL '-106751991 days -14454775 ms'"
    window = parse(f"SELECT a FROM t GROUP BY TUMBLE(ts, {shortest})").statements[0].group_by.window
    assert window.size.millis == -9223372036854775
    with pytest.raises(WqlSemanticError, match="out of range"):
        parse("SELECT a FROM t GROUP BY TUMBLE(ts, INTERVAL '9223372036854 seconds 776 ms')")
    with pytest.raises(WqlSemanticError, match=r"out of range \(min -9223372036854775 ms"):
        parse("SELECT a FROM t GROUP BY TUMBLE(ts, INTERVAL '-9223372036854776' MILLISECOND)")


def test_interval_below_millisecond_precision_is_a_positioned_error() -> None:
    text = "SELECT a FROM t GROUP BY TUMBLE(ts, INTERVAL '0.0001' SECOND)"
    with pytest.raises(WqlSemanticError) as info:
        parse(text)
    assert (info.value.line, info.value.column) == (1, 37)
    assert info.value.message == ("INTERVAL '0.0001' SECOND is not a whole number of milliseconds")


# ----------------------------------------------------------------- recovery inside a statement


def _all(text: str) -> list[tuple[int, str]]:
    with pytest.raises(WqlError) as info:
        parse(text)
    errors = info.value.errors if isinstance(info.value, WqlErrors) else (info.value,)
    return [(e.column or 0, e.message) for e in errors]


def test_recovery_finds_later_errors_in_the_same_statement() -> None:
    text = (
        "SELECT a b c, d FROM t GROUP BY TUMBLE(ts INTERVAL '1' MINUTE) "
        "TRIGGER COUNT(x) EVICT TIME(5)"
    )
    assert _all(text) == [
        (12, "unexpected identifier c"),  # repaired by assuming a ','
        (43, "unexpected INTERVAL"),  # repaired by assuming a ','
        (78, "unexpected identifier x"),  # skipped
        (92, "unexpected number 5"),  # reported: EVICT started a new clause
    ]


def test_recovery_assumes_a_missing_keyword() -> None:
    text = "SELECT CASE WHEN a THEN 1 FROM t GROUP BY GLOBAL() TRIGGER EVERY 5 SECONDS"
    assert _all(text) == [
        (27, "unexpected FROM"),  # repaired by assuming END
        (66, "unexpected number 5"),  # repaired by assuming INTERVAL
    ]


@pytest.mark.parametrize(
    "text",
    [
        "SELECT a FROM t GROUP BY global, TUMBLE(ts, INTERVAL '1' SECOND)",
        "SELECT a FROM t GROUP BY hop, TUMBLE(ts, INTERVAL '1' SECOND)",
        "UPDATE t SET a = 1",
        "SELECT a FROM t WHERE a = 'open GROUP BY GLOBAL() TRIGGER COUNT(1)",
    ],
)
def test_recovery_does_not_report_echoes(text: str) -> None:
    assert len(_all(text)) == 1


def test_recovery_reports_at_most_five_errors_per_statement() -> None:
    # `a b c d ...`: every third word is an error once `,` is assumed.
    text = "SELECT a b c d e f g h i j k l m n FROM t GROUP BY GLOBAL()"
    assert _all(text) == [
        (c, f"unexpected identifier {w}")
        for c, w in zip((12, 16, 20, 24, 28), "cegik", strict=True)
    ]


def test_a_flaw_in_recovery_never_hides_the_first_error(monkeypatch) -> None:
    import wql.grammar.parser as parser_module

    def broken(text: str) -> list:
        raise RuntimeError("recovery bug")

    monkeypatch.setattr(parser_module, "_syntax_errors_recovering", broken)
    assert _all("SELECT a FROM t GROUP BY TUMBLE(ts INTERVAL '1' MINUTE) TRIGGER COUNT(x)") == [
        (36, "unexpected INTERVAL")
    ]


def test_absurd_nesting_is_a_positioned_error_not_a_crash() -> None:
    depth = 3000
    text = "SELECT " + "(" * depth + "a" + ")" * depth + " FROM t GROUP BY GLOBAL()"
    with pytest.raises(WqlSyntaxError) as info:
        parse(text)
    assert info.value.message.startswith("expression nested more than 100 levels deep")
    # at the parenthesis 101 levels out from the innermost: where the limit is exceeded
    assert info.value.column == 7 + depth - 100
