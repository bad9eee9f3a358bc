"""The limits of docs/language.md ("Limits"): accepted at the limit, a positioned error past it.

One test per failure signature of the hostile-input report: deep triggers,
deep expressions, long operator chains, huge literals, huge files,
unterminated comments, and error reporting that stays linear in the file.
"""

from __future__ import annotations

import ast as python_ast
import time

import pytest

from wql import limits
from wql.cli import main as cli_main
from wql.compiler import check_source, compile_source
from wql.compiler.backends.pyspark_script import render_script
from wql.compiler.backends.spark_sql import spark_sql_script
from wql.errors import WqlError, WqlSyntaxError
from wql.grammar.formatter import format_script
from wql.grammar.parser import parse

SOURCE = (
    "CREATE SOURCE s (k STRING, v BIGINT, b BOOLEAN, ts TIMESTAMP, "
    "WATERMARK FOR ts AS ts - INTERVAL '1' SECOND);\n"
)
GROUP = "GROUP BY k, TUMBLE(ts, INTERVAL '1' MINUTE)"


def _query(where: str = "v > 0", trigger: str = "") -> str:
    return f"{SOURCE}SELECT k, COUNT(*) AS n FROM s WHERE {where} {GROUP} {trigger};\n"


def _everything(text: str) -> None:
    """Compile, check, format and print every target: all must succeed."""
    program = compile_source(text, "q.wql")
    assert check_source(text, "q.wql") == []
    formatted = format_script(parse(text))
    assert format_script(parse(formatted)) == formatted
    spark_sql_script(program, "q.wql")
    python_ast.parse(render_script(program, text, "q.wql"))


def _limit_error(text: str, needle: str) -> WqlSyntaxError:
    """The one positioned error every entry point gives for ``text``."""
    with pytest.raises(WqlSyntaxError) as info:
        compile_source(text, "q.wql")
    err = info.value
    assert needle in err.message and "limit" in err.message
    assert err.span is not None and err.line is not None
    with pytest.raises(WqlSyntaxError):
        parse(text)
    (checked,) = check_source(text, "q.wql")
    assert (checked.message, checked.span) == (err.message, err.span)
    return err


D = limits.MAX_TRIGGER_DEPTH
TRIGGERS = {
    "purging": lambda n: "PURGING " * (n - 1) + "COUNT(1)",
    "any": lambda n: "ANY(" * (n - 1) + "COUNT(1)" + ", WATERMARK)" * (n - 1),
    "all": lambda n: "ALL(" * (n - 1) + "COUNT(1)" + ", COUNT(2))" * (n - 1),
    "timeout": lambda n: "TIMEOUT(" * (n - 1) + "COUNT(1)" + ", INTERVAL '1' SECOND)" * (n - 1),
    "early": lambda n: "WATERMARK WITH EARLY " * (n - 1) + "COUNT(1)",
    "late": lambda n: "WATERMARK WITH LATE " * (n - 1) + "COUNT(1)",
}


@pytest.mark.parametrize("kind", TRIGGERS)
def test_triggers_nest_up_to_the_limit(kind):
    _everything(_query(trigger="TRIGGER " + TRIGGERS[kind](D)))


@pytest.mark.parametrize("kind", TRIGGERS)
@pytest.mark.parametrize("depth", [D + 1, 500])
def test_triggers_nested_past_the_limit_are_a_positioned_error(kind, depth):
    text = _query(trigger="TRIGGER " + TRIGGERS[kind](depth))
    err = _limit_error(text, f"triggers nested more than {D} deep")
    # the trigger that is D + 1 deep: depth - D - 1 triggers lie around it
    clause = text.index("TRIGGER ") + len("TRIGGER ")
    word = TRIGGERS[kind](depth)[:64].split("(")[0].split(" ")[0]
    starts = [i for i in range(clause, len(text)) if text.startswith(word, i)]
    assert err.span is not None and err.span.start == starts[depth - D - 1]


N = limits.MAX_EXPRESSION_DEPTH
EXPRESSIONS = {
    "parentheses": lambda n: "(" * n + "v" + ")" * n + " > 0",
    "calls": lambda n: "abs(" * n + "v" + ")" * n + " > 0",
    "cast": lambda n: "CAST(" * n + "v" + " AS BIGINT)" * n + " > 0",
    "case": lambda n: "CASE WHEN b THEN " * n + "v" + " ELSE 0 END" * n + " > 0",
    "unary_minus": lambda n: "- " * n + "v > 0",
    "not": lambda n: "NOT " * n + "b",
}


@pytest.mark.parametrize("kind", EXPRESSIONS)
def test_expressions_nest_up_to_the_limit_on_every_target(kind):
    # the comparison's operand is one level, so N - 1 wrappers make N levels
    _everything(_query(where=EXPRESSIONS[kind](N - 1)))


@pytest.mark.parametrize("kind", EXPRESSIONS)
@pytest.mark.parametrize("depth", [N + 1, 3000])
def test_expressions_nested_past_the_limit_are_a_positioned_error(kind, depth):
    _limit_error(_query(where=EXPRESSIONS[kind](depth)), f"nested more than {N} levels")


def test_a_deep_expression_in_every_clause():
    deep = "(" * (N - 2) + "v" + ")" * (N - 2)
    text = (
        f"{SOURCE}SELECT k, SUM({deep}) AS total FROM s WHERE {deep} > 0 "
        f"GROUP BY k, TUMBLE(ts, INTERVAL '1' MINUTE) HAVING SUM({deep}) > 0;\n"
    )
    _everything(text)


C = limits.MAX_OPERATOR_CHAIN


def test_operator_chains_up_to_the_limit_on_every_target():
    _everything(_query(where=" + ".join(["v"] * C) + " > 0"))  # C - 1 + 1 operators
    _everything(_query(where=" AND ".join(["b"] * (C + 1))))


@pytest.mark.parametrize("terms", [C + 2, 5000])
def test_operator_chains_past_the_limit_are_a_positioned_error(terms):
    _limit_error(_query(where=" + ".join(["v"] * terms) + " > 0"), "operators in a row")


def test_literal_length_limit():
    digits = limits.MAX_LITERAL_DIGITS
    # at the limit the number is read (and found out of range, a semantic matter)
    with pytest.raises(WqlError) as info:
        compile_source(_query(trigger="TRIGGER COUNT(" + "9" * digits + ")"))
    assert info.value.span is not None and "limit" not in info.value.message
    for text in (
        _query(trigger="TRIGGER COUNT(" + "9" * 5000 + ")"),  # was a ValueError from int()
        _query(where="v > " + "9" * (digits + 1)),
        _query(where="v > 0." + "1" * digits),
    ):
        err = _limit_error(text, "the limit on a literal")
        assert text[err.span.start] in "90"


def test_text_size_limit(monkeypatch):
    monkeypatch.setattr(limits, "MAX_TEXT_CHARS", 500)
    text = _query() + "-- padding\n" * 100
    err = _limit_error(text, "the limit on a WQL file")
    assert err.span is not None and err.span.start == 500


def test_a_huge_unterminated_comment_is_reported_where_it_opens_and_fast():
    text = _query() + "\n/* never closed\n" + "words " * 200_000
    started = time.process_time()
    (err,) = check_source(text, "q.wql")
    assert (err.message, err.line, err.column) == ("unterminated comment", 4, 1)
    with pytest.raises(WqlSyntaxError) as info:
        compile_source(text)
    assert (info.value.message, info.value.line) == ("unterminated comment", 4)
    assert time.process_time() - started < 10  # it was minutes


def test_an_unterminated_string_is_reported_where_it_opens():
    text = _query(where="k = 'abc") + _query()
    (err,) = check_source(text, "q.wql")
    assert err.message == "unterminated string"
    assert text[err.span.start :].startswith("'abc")


def test_error_reporting_is_linear_in_the_file():
    statements = [
        f"CREATE VIEW q{i} AS SELECT k, COUNT(*) AS n FROM s WHERE v > {i} {GROUP};\n"
        for i in range(1500)
    ]
    clean = SOURCE + "".join(statements)
    typo = clean + "SELECT k FROM s GROUP BY k, TUMBEL(ts, INTERVAL '1' MINUTE);\n"
    started = time.process_time()
    parse(clean)
    parsed = time.process_time() - started
    started = time.process_time()
    with pytest.raises(WqlSyntaxError) as info:
        parse(typo)
    failed = time.process_time() - started
    assert info.value.message == "unknown window TUMBEL" and info.value.line == 1502
    # one extra parse per statement at most (it was one parse of the whole file per statement)
    assert failed < 4 * parsed + 0.5, (parsed, failed)


def test_cli_reports_limits_as_errors_not_internal_errors(tmp_path, capsys):
    path = tmp_path / "deep.wql"
    path.write_text(_query(where=EXPRESSIONS["case"](3000)))
    for command in (["check"], ["fmt"], ["compile", "--target", "spark-sql"], ["explain"]):
        assert cli_main([*command, str(path)]) == 1
        err = capsys.readouterr().err
        assert "internal error" not in err and "nested more than" in err
