"""One mistake, one error, at its place: ``wql check`` on files with exactly one mistake.

Each case is a small valid file with one mistake made in it; ``@`` marks
where the error must point (the marker is removed before checking). Every
case must give exactly one error at that line and column -- no cascade
("a WQL file needs at least one query"), no echo of a broken declaration
where it is used, no repetition of one mistake per occurrence.
"""

from __future__ import annotations

import pytest

from wql.cli import main as cli_main
from wql.compiler import check_source, compile_source
from wql.errors import WqlError

SOURCE = """CREATE SOURCE clicks (
    user_id STRING,
    amount  DOUBLE,
    ts      TIMESTAMP,
    WATERMARK FOR ts AS ts - INTERVAL '5' SECOND
) WITH (format = 'csv', path = 'clicks.csv');
"""
QUERY = """
SELECT user_id, COUNT(*) AS n, SUM(amount) AS total
FROM clicks
WHERE amount > 0
GROUP BY user_id, TUMBLE(ts, INTERVAL '1' MINUTE);
"""
VALID = SOURCE + QUERY

# (id, text replaced in VALID, its replacement with @ where the error points)
CASES = [
    ("missing_paren", "MINUTE);", "MINUTE@;"),
    ("typo_tumble", "TUMBLE(ts", "@TUMBEL(ts"),
    (
        "group_by_without_window",
        "GROUP BY user_id, TUMBLE(ts, INTERVAL '1' MINUTE)",
        "@GROUP BY user_id",
    ),
    (
        "clause_out_of_order",
        "WHERE amount > 0\nGROUP BY user_id, TUMBLE(ts, INTERVAL '1' MINUTE);",
        "GROUP BY user_id, TUMBLE(ts, INTERVAL '1' MINUTE)\n@WHERE amount > 0;",
    ),
    ("unterminated_string", "INTERVAL '1' MINUTE);", "INTERVAL @'1 MINUTE);"),
    ("unterminated_string_in_where", "amount > 0", "amount > @'0"),
    ("trailing_garbage", "MINUTE);\n", "MINUTE);\n@garbage here\n"),
    ("misspelled_group_by", "GROUP BY user_id", "@GRUOP BY user_id"),
    # without WHERE, FROM takes the misspelled word as an alias of clicks
    ("misspelled_group_by_after_from", "WHERE amount > 0\nGROUP BY", "@GRUOP BY"),
    ("session_without_gap", "TUMBLE(ts, INTERVAL '1' MINUTE)", "SESSION(ts@)"),
    ("tumble_without_size", "TUMBLE(ts, INTERVAL '1' MINUTE)", "TUMBLE(ts@)"),
    ("garbage_before_semicolon", "MINUTE);", "MINUTE) @garbage;"),
    ("misspelled_select", "SELECT user_id", "@SELCT user_id"),
    ("missing_from", "FROM clicks\n", "@clicks\n"),
    ("double_comma", "user_id, COUNT(*)", "user_id,@, COUNT(*)"),
    ("missing_operand", "amount > 0\nGROUP", "amount >\n@GROUP"),
    ("unknown_column_select", "SUM(amount)", "SUM(@amout)"),
    ("unknown_column_where", "WHERE amount", "WHERE @amout"),
    ("unknown_column_key", "GROUP BY user_id,", "GROUP BY @userid,"),
    ("unknown_source", "FROM clicks", "FROM @clics"),
    ("bad_column_type", "amount  DOUBLE", "amount  @FLOAT8"),
    ("watermark_unknown_column", "WATERMARK FOR ts AS ts", "WATERMARK FOR @tss AS tss"),
    ("watermark_on_non_timestamp", "WATERMARK FOR ts AS ts", "WATERMARK FOR @amount AS amount"),
    ("source_missing_comma", "user_id STRING,\n    amount", "user_id STRING\n    @amount"),
    ("source_unclosed", "SECOND\n) WITH", "SECOND\n@WITH"),
    ("option_unquoted", "format = 'csv'", "format = @csv"),
    ("option_twice", "path = 'clicks.csv'", "path = 'clicks.csv', @path = 'x.csv'"),
    ("duplicate_column", "amount  DOUBLE,", "amount  DOUBLE,\n    @amount DOUBLE,"),
    ("zero_window", "INTERVAL '1' MINUTE)", "@INTERVAL '0' MINUTE)"),
    ("unknown_unit", "'1' MINUTE)", "'1' @WEEK)"),
    ("interval_not_a_number", "'1' MINUTE)", "@'one' MINUTE)"),
    ("two_windows", "MINUTE);", "MINUTE), @HOP(ts, INTERVAL '1' MINUTE, INTERVAL '2' MINUTE);"),
    (
        "hop_bad_offset",
        "TUMBLE(ts, INTERVAL '1' MINUTE)",
        "HOP(ts, INTERVAL '1' MINUTE, INTERVAL '2' MINUTE, @INTERVAL '5' MINUTE)",
    ),
    (
        "cumulate_not_multiple",
        "TUMBLE(ts, INTERVAL '1' MINUTE)",
        "CUMULATE(ts, INTERVAL '7' SECOND, @INTERVAL '1' MINUTE)",
    ),
    ("count_window_zero", "TUMBLE(ts, INTERVAL '1' MINUTE)", "COUNT_WINDOW(@0)"),
    ("global_without_trigger", "TUMBLE(ts, INTERVAL '1' MINUTE)", "@GLOBAL()"),
    ("trigger_count_zero", "MINUTE);", "MINUTE)\nTRIGGER COUNT(@0);"),
    ("trigger_count_decimal", "MINUTE);", "MINUTE)\nTRIGGER COUNT(@1.5);"),
    ("trigger_every_zero", "MINUTE);", "MINUTE)\nTRIGGER EVERY @INTERVAL '0' SECOND;"),
    (
        "delta_trigger_on_session",
        "TUMBLE(ts, INTERVAL '1' MINUTE);",
        "SESSION(ts, INTERVAL '1' MINUTE)\nTRIGGER @DELTA(amount, 1.0);",
    ),
    ("evict_count_negative", "MINUTE);", "MINUTE)\nEVICT COUNT(@-1);"),
    ("negative_lateness", "MINUTE);", "MINUTE)\nALLOWED LATENESS @INTERVAL '-1' SECOND;"),
    ("late_data_name_taken", "SELECT user_id", "CREATE VIEW v AS SELECT user_id"),
    ("sum_of_string", "SUM(amount)", "SUM(@user_id)"),
    ("where_not_boolean", "WHERE amount > 0", "WHERE @amount"),
    ("having_not_aggregated", "MINUTE);", "MINUTE)\nHAVING @amount > 0;"),
    ("select_not_grouped", "SUM(amount) AS total", "@amount AS total"),
    ("not_grouped_twice_in_one_expression", "SUM(amount) AS total", "@amount + amount AS total"),
    ("aggregate_in_where", "WHERE amount > 0", "WHERE @SUM(amount) > 0"),
    ("unterminated_comment", "\nSELECT user_id", "\n@/* SELECT user_id"),
    ("unterminated_backquote", "FROM clicks", "FROM @`clicks"),
    (
        "missing_semicolon_between_statements",
        "SECOND\n) WITH (format = 'csv', path = 'clicks.csv');",
        "SECOND\n) WITH (format = 'csv', path = 'clicks.csv')",
    ),
    ("too_many_digits", "amount > 0", "amount > @" + "9" * 1001),
    ("nested_too_deep", "amount > 0", "@" + "(" * 101 + "amount" + ")" * 101 + " > 0"),
    # 33 PURGING around COUNT: the second from the outside is the first 33 deep
    (
        "trigger_nested_too_deep",
        "MINUTE);",
        "MINUTE)\nTRIGGER PURGING @" + "PURGING " * 32 + "COUNT(1);",
    ),
]
# `late_data_name_taken` and `missing_semicolon...` are fixed up below: their
# mistake is not where the replacement starts.
_EXTRA = {
    "late_data_name_taken": ("MINUTE);", "MINUTE)\nLATE DATA TO @v;"),
    "missing_semicolon_between_statements": ("\nSELECT user_id", "\n@SELECT user_id"),
}


def _mistaken(case_id: str, old: str, new: str) -> tuple[str, int, int]:
    assert VALID.count(old) == 1, (case_id, old)
    text = VALID.replace(old, new)
    if case_id in _EXTRA:
        more_old, more_new = _EXTRA[case_id]
        assert text.count(more_old) == 1
        text = text.replace(more_old, more_new)
    assert text.count("@") == 1, case_id
    at = text.index("@")
    text = text[:at] + text[at + 1 :]
    line = text.count("\n", 0, at) + 1
    column = at - (text.rfind("\n", 0, at) + 1) + 1
    return text, line, column


def test_there_are_at_least_forty_cases():
    assert len(CASES) >= 40
    assert check_source(VALID, "q.wql") == []


@pytest.mark.parametrize("case_id,old,new", CASES, ids=[c[0] for c in CASES])
def test_one_mistake_gives_one_error_at_its_place(case_id, old, new):
    text, line, column = _mistaken(case_id, old, new)
    errors = check_source(text, "q.wql")
    assert [(e.line, e.column) for e in errors] == [(line, column)], [e.message for e in errors]
    # compile reports the same one error
    with pytest.raises(WqlError) as info:
        compile_source(text, "q.wql")
    got = getattr(info.value, "errors", (info.value,))
    assert [(e.line, e.column, e.message) for e in got] == [(line, column, errors[0].message)]


@pytest.mark.parametrize(
    "case_id,old,new",
    [c for c in CASES if c[0] in ("missing_paren", "typo_tumble")],
    ids=["missing_paren", "typo_tumble"],
)
def test_wql_check_prints_one_error(case_id, old, new, tmp_path, capsys):
    text, line, column = _mistaken(case_id, old, new)
    path = tmp_path / "q.wql"
    path.write_text(text)
    assert cli_main(["check", str(path)]) == 1
    err = capsys.readouterr().err
    assert err.count("error:") == 1 and f"q.wql:{line}:{column}: error:" in err
    assert "needs at least one query" not in err


@pytest.mark.parametrize(
    "case_id,message,hint",
    [
        ("misspelled_group_by", "unexpected identifier GRUOP", "did you mean GROUP BY?"),
        (
            "misspelled_group_by_after_from",
            "unexpected identifier GRUOP",
            "did you mean GROUP BY?",
        ),
        (
            "session_without_gap",
            "unexpected ')'",
            "SESSION needs a gap after the time column: write SESSION(ts, INTERVAL '10' "
            "MINUTE), or SESSION(ts, GAP <expression>) for a gap per row",
        ),
        (
            "tumble_without_size",
            "unexpected ')'",
            "TUMBLE needs a size after the time column: write TUMBLE(ts, INTERVAL '1' MINUTE)",
        ),
    ],
)
def test_the_error_says_the_mistake_in_the_users_words(case_id, message, hint):
    (old, new) = next((c[1], c[2]) for c in CASES if c[0] == case_id)
    text, _, _ = _mistaken(case_id, old, new)
    (error,) = check_source(text, "q.wql")
    assert (error.message, error.hint) == (message, hint)
