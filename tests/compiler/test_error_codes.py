"""Stable error codes: every error says which kind of mistake it is.

Code that must tell errors apart reads ``err.code``, never the message
(docs/errors.md). The table in docs/errors.md is the enum; each
single-mistake file of ``test_one_mistake_one_error`` gives its one error
with the code that names its mistake.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

import wql
from tests.compiler.mistakes import CASES, mistaken
from wql.compiler import check_source, compile_source
from wql.errors import (
    ErrorCode,
    WqlError,
    WqlErrors,
    WqlSemanticError,
    WqlSyntaxError,
    WqlUnsupportedError,
)

DOCS = Path(__file__).parents[2] / "docs" / "errors.md"
C = ErrorCode

EXPECTED = {
    "missing_paren": C.SYNTAX,
    "typo_tumble": C.WINDOW_SYNTAX,
    "group_by_without_window": C.WINDOW_SYNTAX,
    "clause_out_of_order": C.SYNTAX,
    "unterminated_string": C.UNTERMINATED,
    "unterminated_string_in_where": C.UNTERMINATED,
    "trailing_garbage": C.SYNTAX,
    "misspelled_group_by": C.SYNTAX,
    "misspelled_group_by_after_from": C.SYNTAX,
    "session_without_gap": C.SYNTAX,
    "tumble_without_size": C.SYNTAX,
    "garbage_before_semicolon": C.SYNTAX,
    "misspelled_select": C.SYNTAX,
    "missing_from": C.SYNTAX,
    "double_comma": C.SYNTAX,
    "missing_operand": C.SYNTAX,
    "unknown_column_select": C.UNKNOWN_NAME,
    "unknown_column_where": C.UNKNOWN_NAME,
    "unknown_column_key": C.UNKNOWN_NAME,
    "unknown_source": C.UNKNOWN_NAME,
    "bad_column_type": C.SYNTAX,
    "watermark_unknown_column": C.UNKNOWN_NAME,
    "watermark_on_non_timestamp": C.WRONG_TYPE,
    "source_missing_comma": C.SYNTAX,
    "source_unclosed": C.SYNTAX,
    "option_unquoted": C.SYNTAX,
    "option_twice": C.DUPLICATE_NAME,
    "duplicate_column": C.DUPLICATE_NAME,
    "zero_window": C.OUT_OF_RANGE,
    "unknown_unit": C.SYNTAX,
    "interval_not_a_number": C.BAD_LITERAL,
    "two_windows": C.WINDOW_SYNTAX,
    "hop_bad_offset": C.OUT_OF_RANGE,
    "cumulate_not_multiple": C.OUT_OF_RANGE,
    "count_window_zero": C.OUT_OF_RANGE,
    "global_without_trigger": C.NOT_FOR_WINDOW,
    "trigger_count_zero": C.OUT_OF_RANGE,
    "trigger_count_decimal": C.BAD_LITERAL,
    "trigger_every_zero": C.OUT_OF_RANGE,
    "delta_trigger_on_session": C.NOT_MERGEABLE,
    "evict_count_negative": C.OUT_OF_RANGE,
    "negative_lateness": C.OUT_OF_RANGE,
    "late_data_name_taken": C.DUPLICATE_NAME,
    "sum_of_string": C.WRONG_TYPE,
    "where_not_boolean": C.WRONG_TYPE,
    "having_not_aggregated": C.AGGREGATE,
    "select_not_grouped": C.AGGREGATE,
    "not_grouped_twice_in_one_expression": C.AGGREGATE,
    "aggregate_in_where": C.AGGREGATE,
    "unterminated_comment": C.UNTERMINATED,
    "unterminated_backquote": C.UNTERMINATED,
    "missing_semicolon_between_statements": C.SYNTAX,
    "too_many_digits": C.BAD_LITERAL,
    "nested_too_deep": C.TOO_DEEP,
    "trigger_nested_too_deep": C.TOO_DEEP,
}


def test_the_docs_table_is_the_enum():
    rows = re.findall(r"^\| `(WQL\d{3})` \| `(\w+)` \| (.*) \|$", DOCS.read_text(), re.M)
    assert rows == [(c.value, c.name, c.meaning) for c in ErrorCode]


def test_codes_are_unique_and_numbered_by_kind():
    values = [c.value for c in ErrorCode]
    assert len(set(values)) == len(values)
    assert all(re.fullmatch(r"WQL[1-4]\d\d", v) for v in values)
    assert WqlSyntaxError("x").code.value.startswith("WQL1")
    assert WqlSemanticError("x").code.value.startswith("WQL2")
    assert WqlUnsupportedError("x").code.value.startswith("WQL3")
    assert WqlError("x").code is ErrorCode.OTHER
    assert WqlSemanticError("x", code=ErrorCode.UNKNOWN_NAME).code is ErrorCode.UNKNOWN_NAME


def test_every_single_mistake_case_has_its_expected_code():
    assert set(EXPECTED) == {c[0] for c in CASES}


@pytest.mark.parametrize("case_id,old,new", CASES, ids=[c[0] for c in CASES])
def test_a_single_mistake_names_its_kind(case_id, old, new):
    text, _, _ = mistaken(case_id, old, new)
    (error,) = check_source(text, "q.wql")
    assert error.code is EXPECTED[case_id]
    with pytest.raises(WqlError) as info:
        compile_source(text, "q.wql")
    assert info.value.code is EXPECTED[case_id]


def test_several_errors_carry_the_first_code_and_their_own():
    text = (
        "CREATE SOURCE s (k STRING, ts TIMESTAMP, WATERMARK FOR ts AS ts - INTERVAL '1' SECOND);\n"
        "SELECT k FROM s WHERE nope GROUP BY k, TUMBLE(ts, INTERVAL '0' SECOND);"
    )
    with pytest.raises(WqlErrors) as info:
        compile_source(text)
    assert [e.code for e in info.value.errors] == [C.UNKNOWN_NAME, C.OUT_OF_RANGE]
    assert info.value.code is C.UNKNOWN_NAME


@pytest.mark.parametrize(
    ("call", "code"),
    [
        (lambda: wql.compile("SELECT 1", engine="flink"), C.UNKNOWN_ENGINE),
        (lambda: wql.compile_file("no/such/file.wql"), C.FILE),
        (
            lambda: wql.compile(
                "CREATE SOURCE s (k STRING, ts TIMESTAMP, WATERMARK FOR ts AS ts - INTERVAL '1' "
                "SECOND); SELECT k, COUNT(*) AS n FROM s GROUP BY k, TUMBLE(ts, INTERVAL '1' "
                "SECOND) TRIGGER COUNT(2)",
                engine="native",
            ),
            C.NOT_NATIVE,
        ),
        (
            lambda: (
                wql.compile(
                    "SELECT k, COUNT(*) AS n FROM s WATERMARK FOR ts AS ts - INTERVAL '1' SECOND "
                    "GROUP BY k, TUMBLE(ts, INTERVAL '1' SECOND)"
                ).program
            ),
            C.SCHEMA,
        ),
    ],
    ids=["unknown_engine", "unreadable_file", "forced_native", "undeclared_source"],
)
def test_api_errors_have_codes(call, code):
    with pytest.raises(WqlError) as info:
        call()
    assert info.value.code is code


_ERROR_CLASSES = {"WqlError", "WqlSyntaxError", "WqlSemanticError", "WqlUnsupportedError"}


def test_every_raise_site_names_its_code():
    # A class's default code would hide what the mistake is (docs/errors.md): each
    # construction of an error in WQL's own modules says which code it has.
    package = Path(wql.__file__).parent
    unnamed = []
    for path in sorted(package.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Name)
                and node.func.id in _ERROR_CLASSES
                and not any(k.arg in ("code", None) for k in node.keywords)
            ):
                unnamed.append(f"{path.relative_to(package.parent)}:{node.lineno}")
    assert unnamed == []


def test_runtime_and_host_checks_have_their_codes(spark):
    from wql.runtime.assigners import SessionWindows
    from wql.runtime.config import OperatorConfig
    from wql.runtime.triggers import DeltaTrigger
    from wql.spark.replay import ReplaySpec, replay

    with pytest.raises(WqlError) as info:
        OperatorConfig(assigner=SessionWindows(10), trigger=DeltaTrigger(0, 1.0))
    assert info.value.code is C.NOT_MERGEABLE
    df = spark.createDataFrame([("a", 1)], "k STRING, ts INT")
    with pytest.raises(WqlError) as info:
        replay(df, ReplaySpec(event_time="ts", delay_ms=0))
    assert info.value.code is C.SCHEMA
