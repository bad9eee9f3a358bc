"""check_source: every error of a file, even past a statement that does not parse."""

from __future__ import annotations

from wql.compiler import check_source
from wql.errors import WqlSemanticError, WqlSyntaxError

GROUP = "FROM clicks GROUP BY user_id, TUMBLE(ts, INTERVAL '{}' MINUTE);\n"
SOURCE = (
    "CREATE SOURCE clicks (user_id STRING, amount DOUBLE, ts TIMESTAMP,\n"
    "    WATERMARK FOR ts AS ts - INTERVAL '5' SECOND);\n"
)


def test_semantic_errors_of_other_statements_survive_a_syntax_error():
    text = (
        SOURCE
        + "SELECT user_id, COUNT(*) AS n "
        + GROUP.format(0)
        + "SELECT user_id, COUNT(* AS n "
        + GROUP.format(1)
        + "SELECT url, COUNT(*) AS n "
        + GROUP.format(1)
    )
    errors = check_source(text, "f.wql")
    assert [(type(e), e.line, e.column) for e in errors] == [
        (WqlSemanticError, 3, 72),
        (WqlSyntaxError, 4, 25),
        (WqlSemanticError, 5, 8),
    ]
    assert "size must be > 0" in errors[0].message
    assert "unknown column 'url'" in errors[2].message
    assert all(e.filename == "f.wql" and e.source == text for e in errors)


def test_a_broken_source_declaration_is_not_reported_again_as_unknown():
    text = (
        "CREATE SOURCE clicks (user_id STRING ts TIMESTAMP);\n"
        "SELECT user_id, COUNT(*) AS n FROM clicks GROUP BY user_id, COUNT_WINDOW(5);\n"
        "SELECT x FROM nowhere GROUP BY x, COUNT_WINDOW(5);\n"
    )
    errors = check_source(text)
    assert [e.line for e in errors] == [1, 3]
    assert isinstance(errors[0], WqlSyntaxError)
    assert errors[1].message == "unknown source 'nowhere'"


def test_a_clean_file_has_no_errors():
    text = SOURCE + "SELECT user_id, COUNT(*) AS n " + GROUP.format(1)
    assert check_source(text) == []
