"""Flink SQL window table functions as input: the same AST and plan as WQL's own form."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings

from tests.grammar.strategies import script
from wql.cli import main
from wql.compiler import compile_source
from wql.errors import WqlError, WqlErrors, WqlSyntaxError
from wql.grammar import ast
from wql.grammar.formatter import format_script
from wql.grammar.parser import parse

SOURCE = """CREATE SOURCE bids (auction BIGINT, bidder BIGINT, price DOUBLE, date_time TIMESTAMP,
    WATERMARK FOR date_time AS date_time - INTERVAL '4' SECOND);
"""

# (Flink SQL window TVF form, WQL form) of the same query
PAIRS = [
    (
        "SELECT auction, window_start, window_end, COUNT(*) AS bids "
        "FROM TABLE(TUMBLE(TABLE bids, DESCRIPTOR(date_time), INTERVAL '10' SECOND)) "
        "GROUP BY window_start, window_end, auction",
        "SELECT auction, window_start, window_end, COUNT(*) AS bids FROM bids "
        "GROUP BY auction, TUMBLE(date_time, INTERVAL '10' SECOND)",
    ),
    (
        "select auction, count(*) as n from table(hop(table bids, descriptor(date_time), "
        "interval '2' second, interval '10' second, interval '1' second)) "
        "where price > 10 group by auction, window_end, window_start, window_time "
        "having count(*) > 1",
        "SELECT auction, COUNT(*) AS n FROM bids WHERE price > 10 GROUP BY auction, "
        "HOP(date_time, INTERVAL '2' SECOND, INTERVAL '10' SECOND, INTERVAL '1' SECOND) "
        "HAVING COUNT(*) > 1",
    ),
    (
        "SELECT COUNT(*) AS n FROM TABLE(CUMULATE(TABLE bids, DESCRIPTOR(date_time), "
        "INTERVAL '2' SECOND, INTERVAL '10' SECOND)) GROUP BY window_start, window_end",
        "SELECT COUNT(*) AS n FROM bids "
        "GROUP BY CUMULATE(date_time, INTERVAL '2' SECOND, INTERVAL '10' SECOND)",
    ),
    (
        "SELECT bidder, auction, COUNT(*) AS n FROM TABLE(SESSION(TABLE bids PARTITION BY "
        "bidder, auction, DESCRIPTOR(date_time), INTERVAL '10' SECOND)) "
        "GROUP BY window_start, window_end, auction, bidder "
        "ALLOWED LATENESS INTERVAL '5' SECOND "
        "TRIGGER WATERMARK WITH EARLY COUNT(10) LATE COUNT(1) LATE DATA TO late_bids",
        "SELECT bidder, auction, COUNT(*) AS n FROM bids "
        "GROUP BY auction, bidder, SESSION(date_time, INTERVAL '10' SECOND) "
        "ALLOWED LATENESS INTERVAL '5' SECOND "
        "TRIGGER WATERMARK WITH EARLY COUNT(10) LATE COUNT(1) LATE DATA TO late_bids",
    ),
    (
        "SELECT COUNT(*) AS n FROM TABLE(SESSION(TABLE bids, DESCRIPTOR(date_time), "
        "INTERVAL '10' SECOND)) GROUP BY window_start, window_end",
        "SELECT COUNT(*) AS n FROM bids GROUP BY SESSION(date_time, INTERVAL '10' SECOND)",
    ),
    (
        "SELECT COUNT(*) AS n FROM TABLE(TUMBLE(TABLE s WATERMARK FOR ts AS ts - "
        "INTERVAL '1' SECOND, DESCRIPTOR(ts), INTERVAL '1' MINUTE)) "
        "GROUP BY window_start, window_end",
        "SELECT COUNT(*) AS n FROM s WATERMARK FOR ts AS ts - INTERVAL '1' SECOND "
        "GROUP BY TUMBLE(ts, INTERVAL '1' MINUTE)",
    ),
]


@pytest.mark.parametrize(("tvf", "wql"), PAIRS)
def test_tvf_form_is_the_same_query(tvf, wql):
    a, b = parse(tvf).statements[0], parse(wql).statements[0]
    assert a == b
    assert a.form is ast.QueryForm.TVF and b.form is ast.QueryForm.WQL


@pytest.mark.parametrize(("tvf", "wql"), PAIRS[:5])
def test_tvf_form_compiles_to_the_same_plan(tvf, wql):
    a = compile_source(SOURCE + tvf).queries[0]
    b = compile_source(SOURCE + wql).queries[0]
    # spans differ (different text); everything else is the same plan
    assert a == b
    assert a.engine == b.engine


@pytest.mark.parametrize(("tvf", "wql"), PAIRS)
def test_fmt_keeps_the_form_and_converts_both_ways(tvf, wql):
    script = parse(tvf)
    as_written = format_script(script)
    assert "FROM TABLE(" in as_written and "GROUP BY window_start, window_end" in as_written
    assert parse(as_written) == script
    assert format_script(parse(as_written)) == as_written
    as_wql = format_script(script, ast.QueryForm.WQL)
    assert as_wql == format_script(parse(wql))
    assert format_script(parse(wql), ast.QueryForm.TVF) == as_written


def test_windows_without_a_table_function_form_stay_wql():
    text = (
        "SELECT k, COUNT(*) AS n FROM t GROUP BY k, COUNT_WINDOW(5);\n"
        "SELECT COUNT(*) AS n FROM t GROUP BY TUMBLE(PROCTIME(), INTERVAL '1' SECOND);\n"
        "SELECT COUNT(*) AS n FROM t GROUP BY SESSION(ts, GAP g * INTERVAL '1' SECOND);\n"
        "SELECT COUNT(*) AS n FROM t GROUP BY UPPER(k), SESSION(ts, INTERVAL '1' SECOND);\n"
    )
    script = parse(text)
    assert format_script(script, ast.QueryForm.TVF) == format_script(script)
    assert "TABLE(" not in format_script(script, ast.QueryForm.TVF)


BAD = [
    (
        "SELECT COUNT(*) FROM TABLE(TUMBLE(TABLE t, DESCRIPTOR(ts), INTERVAL '1' SECOND))\n"
        "GROUP BY window_start",
        2,
        1,
        "window_end is missing",
    ),
    (
        "SELECT COUNT(*) FROM TABLE(TUMBLE(TABLE t, DESCRIPTOR(ts), INTERVAL '1' SECOND))\n"
        "GROUP BY k",
        2,
        1,
        "window_start and window_end are missing",
    ),
    (
        "SELECT COUNT(*) FROM TABLE(TUMBLE(TABLE t, DESCRIPTOR(ts), INTERVAL '1' SECOND))\n"
        "GROUP BY window_start, window_end, HOP(ts, INTERVAL '1' SECOND, INTERVAL '2' SECOND)",
        2,
        36,
        "the window is already given by the table function in FROM",
    ),
    (
        "SELECT COUNT(*) FROM TABLE(SESSION(TABLE t PARTITION BY a, DESCRIPTOR(ts),\n"
        "INTERVAL '1' SECOND)) GROUP BY window_start, window_end, b",
        1,
        44,
        "must partition by exactly the GROUP BY keys",
    ),
    (
        "SELECT COUNT(*) FROM TABLE(SESSION(TABLE t, DESCRIPTOR(ts), INTERVAL '1' SECOND))\n"
        "GROUP BY window_start, window_end, k",
        1,
        28,
        "needs PARTITION BY those keys",
    ),
    (
        "SELECT COUNT(*) FROM TABLE(SESSION(TABLE t PARTITION BY a, DESCRIPTOR(ts),\n"
        "INTERVAL '1' SECOND)) GROUP BY window_start, window_end",
        1,
        44,
        "must partition by exactly the GROUP BY keys",
    ),
    (
        "SELECT COUNT(*) FROM TABLE(TUMBLE(TABLE t, DESCRIPTOR(ts)))\nGROUP BY window_start",
        1,
        58,
        "unexpected ')'",
    ),
    (
        "SELECT COUNT(*) FROM TABLE(TUMBLE(TABLE t, ts, INTERVAL '1' SECOND))\n"
        "GROUP BY window_start, window_end",
        1,
        44,
        "unexpected identifier ts",
    ),
]


@pytest.mark.parametrize(("text", "line", "column", "message"), BAD)
def test_tvf_mistakes_are_positioned(text, line, column, message):
    with pytest.raises(WqlSyntaxError) as info:
        parse(text, "q.wql")
    err = info.value
    assert (err.line, err.column) == (line, column), str(err)
    assert message in err.message


def test_a_source_named_table_is_backquoted_after_from():
    query = "SELECT COUNT(*) AS n FROM `table` GROUP BY TUMBLE(ts, INTERVAL '1' SECOND)"
    assert parse(query).statements[0].source.name.name == "table"


def test_wql_fmt_form_option(tmp_path, capsys):
    path = tmp_path / "q.wql"
    path.write_text(SOURCE + PAIRS[0][1] + ";\n")
    assert main(["fmt", "--form", "tvf", str(path)]) == 0
    out = capsys.readouterr().out
    assert "FROM TABLE(TUMBLE(TABLE bids, DESCRIPTOR(date_time), INTERVAL '10' SECOND))" in out
    assert "GROUP BY window_start, window_end, auction;" in out
    path.write_text(out)
    assert main(["fmt", "--form", "wql", str(path)]) == 0
    assert "GROUP BY auction, TUMBLE(date_time, INTERVAL '10' SECOND);" in capsys.readouterr().out


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(script())
def test_both_forms_round_trip_on_random_scripts(text: str) -> None:
    """Printing every query in either form gives a text that parses to the same script."""
    try:
        parsed = parse(text)
    except (WqlError, WqlErrors):
        return  # the generator may build a query with an invalid window argument
    for form in ast.QueryForm:
        printed = format_script(parsed, form)
        assert parse(printed) == parsed
        assert format_script(parse(printed)) == printed
