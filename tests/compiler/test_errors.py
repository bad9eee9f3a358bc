"""Semantic errors: every rule of docs/language.md and docs/plan.md gives a positioned error
with a clear message.

Each case is one query appended after a fixed two-line header, so the error
is on line 3 and ``column`` is the 1-based column in the query text.
"""

from __future__ import annotations

import pytest

from wql.compiler import compile_source
from wql.errors import WqlError, WqlErrors, WqlSemanticError, WqlSyntaxError

HEADER = (
    "CREATE SOURCE c (k STRING, url STRING, v DOUBLE, n BIGINT, ts TIMESTAMP, pt TIMESTAMP, "
    "WATERMARK FOR ts AS ts - INTERVAL '1' SECOND);\n"
    "CREATE SOURCE p (k STRING, v DOUBLE, ts TIMESTAMP);\n"
)
T1 = "TUMBLE(ts, INTERVAL '1' SECOND)"


def errors_of(query: str) -> list[WqlError]:
    with pytest.raises(WqlError) as info:
        compile_source(HEADER + query, "t.wql")
    err = info.value
    return list(err.errors) if isinstance(err, WqlErrors) else [err]


def col(query: str, needle: str, nth: int = 0) -> int:
    """1-based column of the ``nth`` occurrence of ``needle`` in ``query``."""
    pos = -1
    for _ in range(nth + 1):
        pos = query.index(needle, pos + 1)
    return pos + 1


CASES = [
    # (id, query, needle whose position the error points at, message fragment)
    (
        "size_zero",
        "SELECT k, COUNT(*) FROM c GROUP BY k, TUMBLE(ts, INTERVAL '0' SECOND);",
        "INTERVAL '0'",
        "TUMBLE size must be > 0",
    ),
    (
        "tumble_offset",
        "SELECT k, COUNT(*) FROM c GROUP BY k, "
        "TUMBLE(ts, INTERVAL '1' SECOND, INTERVAL '1' SECOND);",
        "INTERVAL '1' SECOND)",
        "|offset| < size",
    ),
    (
        "hop_offset_vs_slide",
        "SELECT k, COUNT(*) FROM c GROUP BY k, "
        "HOP(ts, INTERVAL '1' SECOND, INTERVAL '5' SECOND, INTERVAL '2' SECOND);",
        "INTERVAL '2'",
        "|offset| < slide",
    ),
    (
        "hop_slide_negative",
        "SELECT k, COUNT(*) FROM c GROUP BY k, HOP(ts, INTERVAL '-1' SECOND, INTERVAL '5' SECOND);",
        "INTERVAL '-1'",
        "HOP slide must be > 0",
    ),
    (
        "cumulate_multiple",
        "SELECT k, COUNT(*) FROM c GROUP BY k, "
        "CUMULATE(ts, INTERVAL '2' SECOND, INTERVAL '5' SECOND);",
        "INTERVAL '5'",
        "must be a multiple of its step",
    ),
    (
        "session_gap_zero",
        "SELECT k, COUNT(*) FROM c GROUP BY k, SESSION(ts, INTERVAL '0' MINUTE);",
        "INTERVAL '0'",
        "SESSION gap must be > 0",
    ),
    (
        "event_time_without_watermark",
        f"SELECT k, COUNT(*) FROM p GROUP BY k, {T1};",
        "ts,",
        "has no watermark",
    ),
    (
        "window_not_on_event_time_column",
        "SELECT k, COUNT(*) FROM c GROUP BY k, TUMBLE(pt, INTERVAL '1' SECOND);",
        "pt,",
        "must use the event-time column 'ts'",
    ),
    (
        "global_without_trigger",
        "SELECT k, COUNT(*) FROM c GROUP BY k, GLOBAL();",
        "GLOBAL()",
        "GLOBAL() never fires on its own",
    ),
    (
        "delta_on_session",
        "SELECT k, COUNT(*) FROM c GROUP BY k, SESSION(ts, INTERVAL '1' SECOND) "
        "TRIGGER DELTA(v, 1);",
        "DELTA(v, 1)",
        "DELTA trigger cannot merge, so it cannot be used with SESSION",
    ),
    (
        "nested_delta_on_session",
        "SELECT k, COUNT(*) FROM c GROUP BY k, SESSION(ts, INTERVAL '1' SECOND) "
        "TRIGGER ANY(COUNT(2), TIMEOUT(DELTA(v, 1), INTERVAL '1' SECOND));",
        "DELTA(v, 1)",
        "cannot merge",
    ),
    (
        "timeout_on_session",
        "SELECT k, COUNT(*) FROM c GROUP BY k, SESSION(ts, INTERVAL '1' SECOND) "
        "TRIGGER TIMEOUT(COUNT(5), INTERVAL '1' MINUTE);",
        "TIMEOUT(",
        "the TIMEOUT trigger cannot merge",
    ),
    (
        "pane_timing_on_count_window",
        "SELECT k, pane_timing, COUNT(*) FROM c GROUP BY k, COUNT_WINDOW(3);",
        "pane_timing",
        "pane_timing is meaningless for COUNT_WINDOW",
    ),
    (
        "every_event_time_without_watermark",
        "SELECT k, COUNT(*) FROM p GROUP BY k, TUMBLE(PROCTIME(), INTERVAL '1' SECOND) "
        "TRIGGER EVERY INTERVAL '1' SECOND OF EVENT TIME;",
        "EVERY",
        "OF EVENT TIME needs event time",
    ),
    (
        "unknown_source",
        f"SELECT k, COUNT(*) FROM clickz GROUP BY k, {T1};",
        "clickz",
        "unknown source 'clickz'",
    ),
    (
        "duplicate_query_name",
        f"CREATE VIEW a AS SELECT k FROM c GROUP BY k, {T1}; "
        f"CREATE VIEW a AS SELECT k FROM c GROUP BY k, {T1};",
        ("a AS", 1),
        "query name 'a' is already used",
    ),
    (
        "late_name_clashes_with_query",
        f"SELECT k, COUNT(*) FROM c GROUP BY k, {T1} LATE DATA TO query_1;",
        "query_1",
        "late output name 'query_1' is already used",
    ),
    (
        "watermark_on_string",
        "SELECT k, COUNT(*) FROM c WATERMARK FOR url AS url - INTERVAL '1' SECOND "
        f"GROUP BY k, {T1};",
        "url AS",
        "needs a TIMESTAMP column",
    ),
    (
        "late_data_without_event_time",
        "SELECT k, COUNT(*) FROM p GROUP BY k, COUNT_WINDOW(3) LATE DATA TO l;",
        "LATE DATA TO",
        "LATE DATA TO needs an event-time window",
    ),
    (
        "count_window_zero",
        "SELECT k, COUNT(*) FROM c GROUP BY k, COUNT_WINDOW(0);",
        "0)",
        "COUNT_WINDOW size must be > 0",
    ),
    (
        "count_trigger_zero",
        f"SELECT k, COUNT(*) FROM c GROUP BY k, {T1} TRIGGER COUNT(0);",
        "0);",
        "COUNT trigger needs n > 0",
    ),
    (
        "evict_count_zero",
        f"SELECT k, COUNT(*) FROM c GROUP BY k, {T1} EVICT COUNT(0);",
        "0);",
        "EVICT COUNT needs n > 0",
    ),
    (
        "sum_of_string",
        f"SELECT k, SUM(url) FROM c GROUP BY k, {T1};",
        "url)",
        "SUM needs a numeric argument, got STRING",
    ),
    (
        "where_not_boolean",
        f"SELECT k, COUNT(*) FROM c WHERE v + 1 GROUP BY k, {T1};",
        "v + 1",
        "WHERE must be a BOOLEAN condition",
    ),
    (
        "delta_not_numeric",
        f"SELECT k, COUNT(*) FROM c GROUP BY k, {T1} TRIGGER DELTA(url, 1);",
        "url, 1",
        "DELTA trigger expression must be numeric",
    ),
    (
        "gap_not_interval",
        "SELECT k, COUNT(*) FROM c GROUP BY k, SESSION(ts, GAP url);",
        "url)",
        "session GAP must be a day-time INTERVAL",
    ),
    (
        "gap_is_a_number",
        "SELECT k, COUNT(*) FROM c GROUP BY k, SESSION(ts, GAP n * 1000);",
        "n * 1000",
        "session GAP must be a day-time INTERVAL, but this is BIGINT",
    ),
    (
        "interval_minus_number",
        "SELECT k, COUNT(*) FROM c GROUP BY k, SESSION(ts, GAP INTERVAL '9' SECOND - n);",
        "n)",
        "INTERVAL - BIGINT is not defined",
    ),
    (
        "interval_plus_number",
        "SELECT k, COUNT(*) FROM c GROUP BY k, SESSION(ts, GAP INTERVAL '9' SECOND + 1);",
        "INTERVAL",
        "a number cannot be added to an INTERVAL",
    ),
    (
        "number_divided_by_interval",
        "SELECT k, COUNT(*) FROM c GROUP BY k, SESSION(ts, GAP n / INTERVAL '1' SECOND);",
        "INTERVAL",
        "a number cannot be divided by an INTERVAL",
    ),
    (
        "interval_times_interval",
        "SELECT k, COUNT(*) FROM c GROUP BY k, "
        "SESSION(ts, GAP INTERVAL '1' SECOND * INTERVAL '2' SECOND);",
        "INTERVAL",
        "INTERVAL * INTERVAL is not defined",
    ),
    (
        "interval_modulo",
        "SELECT k, COUNT(*) FROM c GROUP BY k, SESSION(ts, GAP INTERVAL '1' SECOND % 2);",
        "INTERVAL",
        "% is not defined on an INTERVAL",
    ),
    (
        "case_mixes_interval_and_number",
        "SELECT k, COUNT(*) FROM c GROUP BY k, "
        "SESSION(ts, GAP CASE WHEN v > 1 THEN INTERVAL '1' SECOND ELSE n END);",
        "n END",
        "this branch is BIGINT but another branch is an INTERVAL",
    ),
    (
        "interval_times_timestamp",
        "SELECT k, COUNT(*) FROM c GROUP BY k, SESSION(ts, GAP ts * INTERVAL '1' SECOND);",
        "ts *",
        "multiplied or divided by a number, not by TIMESTAMP",
    ),
    (
        "column_outside_group_by",
        f"SELECT k, url, COUNT(*) FROM c GROUP BY k, {T1};",
        "url",
        "column 'url' must appear in GROUP BY or inside an aggregate",
    ),
    (
        "aggregate_in_where",
        f"SELECT k, COUNT(*) FROM c WHERE COUNT(*) > 1 GROUP BY k, {T1};",
        "COUNT(*) >",
        "aggregate COUNT is not allowed in WHERE",
    ),
    (
        "aggregate_in_key",
        f"SELECT COUNT(*) FROM c GROUP BY SUM(v), {T1};",
        "SUM(v)",
        "aggregate SUM is not allowed in GROUP BY",
    ),
    (
        "nested_aggregates",
        f"SELECT k, SUM(MAX(v)) FROM c GROUP BY k, {T1};",
        "MAX(v)",
        "aggregate calls cannot be nested",
    ),
    (
        "unsupported_aggregate",
        f"SELECT k, STDDEV(v) FROM c GROUP BY k, {T1};",
        "STDDEV",
        "aggregate STDDEV is not supported",
    ),
    (
        "unknown_column_did_you_mean",
        f"SELECT k, MAX(vv) FROM c GROUP BY k, {T1};",
        "vv",
        "unknown column 'vv'",
    ),
    (
        "duplicate_output_name",
        f"SELECT k, COUNT(*) AS k FROM c GROUP BY k, {T1};",
        "k FROM",
        "output column 'k' appears twice",
    ),
    (
        "lateness_on_processing_time",
        "SELECT k, COUNT(*) FROM c GROUP BY k, TUMBLE(PROCTIME(), INTERVAL '1' SECOND) "
        "ALLOWED LATENESS INTERVAL '1' SECOND;",
        "ALLOWED",
        "ALLOWED LATENESS only applies to event-time windows",
    ),
    (
        "having_not_boolean",
        f"SELECT k, COUNT(*) FROM c GROUP BY k, {T1} HAVING COUNT(*);",
        "COUNT(*);",
        "HAVING must be a BOOLEAN condition",
    ),
    (
        "every_on_count_window_without_domain",
        "SELECT k, COUNT(*) FROM c GROUP BY k, COUNT_WINDOW(3) TRIGGER EVERY INTERVAL '1' SECOND;",
        "EVERY",
        "needs OF EVENT TIME or OF PROCESSING TIME",
    ),
    (
        "early_late_on_count_window",
        "SELECT k, COUNT(*) FROM c GROUP BY k, COUNT_WINDOW(3) "
        "TRIGGER WATERMARK WITH EARLY COUNT(1);",
        "WATERMARK WITH",
        "needs a time window",
    ),
    (
        "evict_on_sliding_count_window",
        "SELECT k, COUNT(*) FROM c GROUP BY k, COUNT_WINDOW(3, 1) EVICT COUNT(2);",
        "EVICT",
        "already evicts",
    ),
    (
        "evict_time_without_event_time",
        "SELECT k, COUNT(*) FROM p GROUP BY k, TUMBLE(PROCTIME(), INTERVAL '1' SECOND) "
        "EVICT TIME(INTERVAL '1' SECOND);",
        "TIME(INTERVAL",
        "EVICT TIME needs event time",
    ),
    (
        "watermark_expression_other_column",
        f"SELECT k, COUNT(*) FROM c WATERMARK FOR ts AS pt - INTERVAL '1' SECOND GROUP BY k, {T1};",
        "pt -",
        "must be defined on the same column",
    ),
    (
        "unknown_table_qualifier",
        f"SELECT k, MAX(x.v) FROM c GROUP BY k, {T1};",
        "x.v",
        "unknown table 'x'",
    ),
    (
        "first_is_not_first_value",
        f"SELECT k, FIRST(v) FROM c GROUP BY k, {T1};",
        "FIRST(v)",
        "aggregate FIRST is not supported",
    ),
    (
        "hop_windows_per_row",
        "SELECT k, COUNT(*) FROM c GROUP BY k, "
        "HOP(ts, INTERVAL '1' MILLISECOND, INTERVAL '1' DAY);",
        "INTERVAL '1' DAY",
        "HOP puts every row into 86400000 windows (size 86400000 ms / slide 1 ms); "
        "at most 100000 are supported",
    ),
    (
        "cumulate_windows_per_row",
        "SELECT k, COUNT(*) FROM c GROUP BY k, "
        "CUMULATE(ts, INTERVAL '1' MILLISECOND, INTERVAL '100001' MILLISECOND);",
        "INTERVAL '100001'",
        "CUMULATE puts every row into 100001 windows",
    ),
    (
        "key_named_like_window_column",
        "SELECT COUNT(*) FROM w GROUP BY window_start, GLOBAL() TRIGGER COUNT(1);",
        "window_start",
        "has the name of a window column",
    ),
]


@pytest.mark.parametrize("query,needle,message", [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_semantic_error_is_positioned(query: str, needle, message: str):
    if "FROM w " in query:
        query = "CREATE SOURCE w (window_start STRING, ts TIMESTAMP);\n" + query
        line_offset, q = 1, query.split("\n", 1)[1]
    else:
        line_offset, q = 0, query
    errs = errors_of(query)
    assert len(errs) == 1, [e.message for e in errs]
    err = errs[0]
    assert isinstance(err, WqlSemanticError), err
    assert message in err.message
    assert err.line == 3 + line_offset
    needle, nth = needle if isinstance(needle, tuple) else (needle, 0)
    assert err.column == col(q, needle, nth)
    assert err.filename == "t.wql" and err.source is not None
    rendered = err.render()
    assert rendered.startswith(f"t.wql:{err.line}:{err.column}: error:")
    assert "^" in rendered


def test_at_least_twenty_cases():
    assert len(CASES) >= 20


def test_did_you_mean_hint_and_expected_columns():
    (err,) = errors_of(f"SELECT k, MAX(amout) FROM c GROUP BY k, {T1};")
    assert err.hint is None or "did you mean" in err.hint
    (err,) = errors_of(f"SELECT k, MAX(url2) FROM c GROUP BY k, {T1};")
    assert err.hint == "did you mean 'url'?"
    assert "url" in err.expected and "ts" in err.expected


def test_all_independent_errors_of_a_file_are_reported_in_order():
    text = (
        f"SELECT k, MAX(url2) FROM c GROUP BY k, {T1};\n"
        "SELECT k, COUNT(*) FROM c GROUP BY k, TUMBLE(ts, INTERVAL '0' SECOND) TRIGGER COUNT(0);\n"
        "SELECT k, COUNT(*) FROM nope GROUP BY k, GLOBAL();\n"
    )
    errs = errors_of(text)
    assert [e.line for e in errs] == [3, 4, 4, 5]
    assert "unknown column 'url2'" in errs[0].message
    assert "TUMBLE size must be > 0" in errs[1].message
    assert "COUNT trigger needs n > 0" in errs[2].message
    assert "unknown source 'nope'" in errs[3].message


def test_several_errors_in_one_select_are_all_reported():
    errs = errors_of(f"SELECT url, v, STDDEV(v) FROM c GROUP BY k, {T1};")
    assert len(errs) == 3
    assert [e.column for e in errs] == [8, 13, 16]


def test_sqlglot_syntax_error_maps_to_file_position():
    # The grammar accepts the token sequence; sqlglot rejects it (an alias inside an argument).
    with pytest.raises(WqlError) as info:
        compile_source(HEADER + f"SELECT k, MAX(v w) FROM c GROUP BY k, {T1};")
    err = info.value
    assert err.line == 3


def test_arrival_order_must_name_a_column():
    with pytest.raises(WqlSemanticError) as info:
        compile_source(
            "CREATE SOURCE q (k STRING, ts TIMESTAMP) WITH (arrival_order = 'seq');\n"
            "SELECT k FROM q GROUP BY k, GLOBAL() TRIGGER COUNT(1);"
        )
    assert info.value.line == 1 and "arrival_order names unknown column 'seq'" in info.value.message


def test_errors_are_not_syntax_errors_for_valid_text():
    errs = errors_of(f"SELECT k, SUM(url) FROM c GROUP BY k, {T1};")
    assert not any(isinstance(e, WqlSyntaxError) for e in errs)


# ----------------------------------------------------------------- out-of-range numbers

# Intervals are limited to Spark's day-time interval range (microseconds in a
# signed 64-bit integer); integers are 64-bit; DELTA thresholds are doubles. A
# literal outside those ranges is refused at the literal, in every clause
# that takes one, instead of overflowing later in Spark, the window
# arithmetic or the engine.
BIG = "INTERVAL '99999999999999999999' DAY"
NEG_BIG = "INTERVAL '-99999999999999999999' DAY"
INTERVAL_MAX = "(max 9223372036854775 ms, about 106751991 days)"
INT_MAX = "(max 9223372036854775807: a signed 64-bit integer)"
DOUBLE_MAX = "(max 1.7976931348623157e+308: a double)"
TOO_BIG = 99999999999999999999

RANGE_CASES = [
    # (id, query, needle, exact message)
    (
        "tumble_size",
        f"SELECT k FROM c GROUP BY k, TUMBLE(ts, {BIG});",
        BIG,
        f"{BIG} is out of range {INTERVAL_MAX}",
    ),
    (
        "tumble_offset",
        f"SELECT k FROM c GROUP BY k, TUMBLE(ts, INTERVAL '1' DAY, {NEG_BIG});",
        NEG_BIG,
        f"{NEG_BIG} is out of range (min -9223372036854775 ms, about -106751991 days)",
    ),
    (
        "hop_slide",
        f"SELECT k FROM c GROUP BY k, HOP(ts, {BIG}, INTERVAL '1' DAY);",
        BIG,
        f"{BIG} is out of range {INTERVAL_MAX}",
    ),
    (
        "hop_size",
        f"SELECT k FROM c GROUP BY k, HOP(ts, INTERVAL '1' DAY, {BIG});",
        BIG,
        f"{BIG} is out of range {INTERVAL_MAX}",
    ),
    (
        "cumulate_size",
        f"SELECT k FROM c GROUP BY k, CUMULATE(ts, INTERVAL '1' DAY, {BIG});",
        BIG,
        f"{BIG} is out of range {INTERVAL_MAX}",
    ),
    (
        "session_gap",
        f"SELECT k FROM c GROUP BY k, SESSION(ts, {BIG});",
        BIG,
        f"{BIG} is out of range {INTERVAL_MAX}",
    ),
    (
        "session_gap_expr",
        f"SELECT k FROM c GROUP BY k, SESSION(ts, GAP {BIG});",
        BIG,
        f"{BIG} is out of range {INTERVAL_MAX}",
    ),
    (
        "lateness",
        f"SELECT k FROM c GROUP BY k, {T1} ALLOWED LATENESS {BIG};",
        BIG,
        f"{BIG} is out of range {INTERVAL_MAX}",
    ),
    (
        "every",
        f"SELECT k FROM c GROUP BY k, {T1} TRIGGER EVERY {BIG};",
        BIG,
        f"{BIG} is out of range {INTERVAL_MAX}",
    ),
    (
        "timeout",
        f"SELECT k FROM c GROUP BY k, {T1} TRIGGER TIMEOUT(COUNT(5), {BIG});",
        BIG,
        f"{BIG} is out of range {INTERVAL_MAX}",
    ),
    (
        "time_evictor",
        f"SELECT k FROM c GROUP BY k, {T1} EVICT TIME({BIG});",
        BIG,
        f"{BIG} is out of range {INTERVAL_MAX}",
    ),
    (
        "watermark_delay_after_from",
        f"SELECT k FROM p WATERMARK FOR ts AS ts - {BIG} GROUP BY k, {T1};",
        BIG,
        f"{BIG} is out of range {INTERVAL_MAX}",
    ),
    (
        "watermark_delay_in_source",
        f"CREATE SOURCE s (k STRING, ts TIMESTAMP, WATERMARK FOR ts AS ts - {BIG});",
        BIG,
        f"{BIG} is out of range {INTERVAL_MAX}",
    ),
    (
        "compound_interval",
        "SELECT k FROM c GROUP BY k, TUMBLE(ts, INTERVAL '106751991 days 5 hours');",
        "INTERVAL '1067",
        "INTERVAL '106751991 days 5 hours' is out of range " + INTERVAL_MAX,
    ),
    (
        "count_trigger",
        f"SELECT k FROM c GROUP BY k, GLOBAL() TRIGGER COUNT({TOO_BIG});",
        str(TOO_BIG),
        f"integer {TOO_BIG} is out of range {INT_MAX}",
    ),
    (
        "count_evictor",
        f"SELECT k FROM c GROUP BY k, GLOBAL() TRIGGER COUNT(1) EVICT COUNT({TOO_BIG});",
        str(TOO_BIG),
        f"integer {TOO_BIG} is out of range {INT_MAX}",
    ),
    (
        "count_window_size",
        f"SELECT k FROM c GROUP BY k, COUNT_WINDOW({TOO_BIG});",
        str(TOO_BIG),
        f"integer {TOO_BIG} is out of range {INT_MAX}",
    ),
    (
        "count_window_slide",
        f"SELECT k FROM c GROUP BY k, COUNT_WINDOW(5, {TOO_BIG});",
        str(TOO_BIG),
        f"integer {TOO_BIG} is out of range {INT_MAX}",
    ),
    (
        "decimal_precision",
        f"CREATE SOURCE s (k STRING, x DECIMAL({TOO_BIG}, 2));",
        str(TOO_BIG),
        f"integer {TOO_BIG} is out of range {INT_MAX}",
    ),
    (
        "decimal_scale",
        f"CREATE SOURCE s (k STRING, x DECIMAL(10, {TOO_BIG}));",
        str(TOO_BIG),
        f"integer {TOO_BIG} is out of range {INT_MAX}",
    ),
    (
        "decimal_precision_above_38",
        "CREATE SOURCE s (k STRING, x DECIMAL(39, 2));",
        "DECIMAL(39",
        "DECIMAL(39, 2) is invalid: precision must be 1..38 and scale 0..precision",
    ),
    (
        "delta_trigger_threshold",
        "SELECT k FROM c GROUP BY k, GLOBAL() TRIGGER DELTA(v, 1e999);",
        "1e999",
        f"DELTA threshold 1E+999 is out of range {DOUBLE_MAX}",
    ),
    (
        "delta_evictor_threshold",
        "SELECT k FROM c GROUP BY k, GLOBAL() TRIGGER COUNT(1) EVICT DELTA(v, " + "9" * 400 + ");",
        "9" * 400,
        f"DELTA threshold 1.000000E+400 is out of range {DOUBLE_MAX}",
    ),
]


@pytest.mark.parametrize(
    "query,needle,message", [c[1:] for c in RANGE_CASES], ids=[c[0] for c in RANGE_CASES]
)
def test_out_of_range_number_is_a_positioned_semantic_error(query: str, needle: str, message: str):
    errs = errors_of(query)
    assert len(errs) == 1, [e.message for e in errs]
    (err,) = errs
    assert isinstance(err, WqlSemanticError) and not isinstance(err, WqlSyntaxError)
    assert err.message == message
    assert (err.line, err.column) == (3, col(query, needle))
    assert err.filename == "t.wql"
    assert err.span is not None and err.span.end - err.span.start >= len(needle)


def test_windows_per_row_limit_is_inclusive():
    for window in (
        "HOP(ts, INTERVAL '1' MILLISECOND, INTERVAL '100000' MILLISECOND)",
        "HOP(ts, INTERVAL '3' MILLISECOND, INTERVAL '300000' MILLISECOND)",
        "CUMULATE(ts, INTERVAL '1' MILLISECOND, INTERVAL '100000' MILLISECOND)",
    ):
        compile_source(HEADER + f"SELECT k, COUNT(*) FROM c GROUP BY k, {window};")
    (err,) = errors_of(
        "SELECT k FROM c GROUP BY k, "
        "HOP(ts, INTERVAL '3' MILLISECOND, INTERVAL '300001' MILLISECOND);"
    )
    assert "into 100001 windows" in err.message


def test_largest_values_that_fit_compile():
    biggest = "INTERVAL '9223372036854775' MILLISECOND"
    program = compile_source(
        HEADER
        + f"SELECT k FROM c GROUP BY k, TUMBLE(ts, {biggest}) ALLOWED LATENESS {biggest} "
        + f"TRIGGER DELTA(v, 1.7976931348623157e308) EVICT COUNT({2**63 - 1});"
    )
    (query,) = program.queries
    assert query.window.size_ms == query.allowed_lateness_ms == 9223372036854775
    assert query.trigger.threshold == 1.7976931348623157e308
    assert query.evictor.n == 2**63 - 1
