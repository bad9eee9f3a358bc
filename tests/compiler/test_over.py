"""OVER aggregations in the compiler: what parses, what `wql fmt` prints, and every misuse
as one positioned error with its code (the ``@`` marks where it must point)."""

from __future__ import annotations

import pytest

from tests.compiler.mistakes import one_error
from wql.compiler import compile_source
from wql.compiler import plan as P
from wql.compiler.explain import explain
from wql.compiler.planner import choose_engines
from wql.errors import ErrorCode
from wql.grammar.formatter import format_script
from wql.grammar.parser import parse

SOURCE = """CREATE SOURCE clicks (
    user_id STRING,
    amount  BIGINT,
    ts      TIMESTAMP,
    seq     BIGINT,
    WATERMARK FOR ts AS ts - INTERVAL '5' SECOND
) WITH (format = 'csv', path = 'clicks.csv');
"""
W = (
    "OVER (PARTITION BY user_id ORDER BY ts "
    "RANGE BETWEEN INTERVAL '1' MINUTE PRECEDING AND CURRENT ROW)"
)
VALID = SOURCE + f"SELECT user_id, amount, SUM(amount) {W} AS total FROM clicks;\n"


def test_an_over_query_binds_to_its_plan():
    program = compile_source(VALID)
    (q,) = program.queries
    assert isinstance(q, P.OverAggregate)
    assert (q.frame, q.preceding) == (P.OverFrame.RANGE, 60_000)
    assert [k.name for k in q.keys] == ["user_id"]
    assert [c.name for c in q.output] == ["user_id", "amount", "total"]
    assert q.engine is not None and q.engine.engine == "native"


@pytest.mark.parametrize(
    ("frame", "unit", "preceding"),
    [
        ("ROWS BETWEEN 3 PRECEDING AND CURRENT ROW", P.OverFrame.ROWS, 3),
        ("ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW", P.OverFrame.ROWS, None),
        ("RANGE BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW", P.OverFrame.RANGE, None),
        ("", P.OverFrame.RANGE, None),  # SQL's default frame
    ],
)
def test_frames(frame, unit, preceding):
    text = SOURCE + f"SELECT *, COUNT(*) OVER (ORDER BY ts {frame}) AS n FROM clicks;"
    (q,) = compile_source(text).queries
    assert isinstance(q, P.OverAggregate)
    assert (q.frame, q.preceding, q.keys) == (unit, preceding, ())
    assert [c.name for c in q.output] == ["user_id", "amount", "ts", "seq", "n"]


def test_fmt_round_trips_and_is_idempotent():
    text = SOURCE + (
        "select user_id, sum(amount) over (partition by user_id order by ts "
        "rows between 2 preceding and current row) total, count(*) over (partition by "
        "user_id order by ts rows between 2 preceding and current row) from clicks "
        "where amount > 0 late data to late_clicks"
    )
    once = format_script(parse(text))
    assert (
        "SUM(amount) OVER (PARTITION BY user_id ORDER BY ts ROWS BETWEEN 2 PRECEDING AND "
        "CURRENT ROW) AS total" in once
    )
    assert "LATE DATA TO late_clicks" in once
    assert format_script(parse(once)) == once
    assert parse(once).statements[1] == parse(text).statements[1]


def test_explain_says_the_frame_lateness_and_engine():
    text = explain(compile_source(VALID))
    assert "over: ORDER BY ts RANGE BETWEEN INTERVAL '60000' MILLISECOND PRECEDING" in text
    assert "late: a row at or below the last time its key fired" in text
    assert "engine: native" in text


def test_arrival_order_and_late_output_need_the_operator_engine():
    text = VALID.replace("path = 'clicks.csv'", "path = 'clicks.csv', arrival_order = 'seq'")
    (q,) = compile_source(text).queries
    assert q.engine is not None and q.engine.engine == "operator"
    assert "arrival_order = 'seq'" in q.engine.reasons[0].text


def test_streams_run_it_on_the_operator_engine():
    (q,) = choose_engines(compile_source(VALID), streaming=True).queries
    assert q.engine is not None and q.engine.engine == "operator"
    assert "Spark refuses window functions" in q.engine.reasons[0].text


Q = "SELECT user_id, SUM(amount) {w} AS total FROM clicks;"

MISTAKES = {
    "order_not_event_time": (
        "OVER (PARTITION BY user_id ORDER BY @amount ROWS BETWEEN 1 PRECEDING AND CURRENT ROW)",
        ErrorCode.OVER,
    ),
    "order_descending": (
        "OVER (PARTITION BY user_id ORDER BY @ts DESC ROWS BETWEEN 1 PRECEDING AND CURRENT ROW)",
        ErrorCode.OVER,
    ),
    "following_end": (
        "OVER (ORDER BY ts ROWS BETWEEN 1 PRECEDING AND @1 FOLLOWING)",
        ErrorCode.OVER,
    ),
    "current_row_start": (
        "OVER (ORDER BY ts ROWS BETWEEN @CURRENT ROW AND CURRENT ROW)",
        ErrorCode.OVER,
    ),
    "range_by_rows": (
        "OVER (ORDER BY ts RANGE BETWEEN @3 PRECEDING AND CURRENT ROW)",
        ErrorCode.OVER,
    ),
    "rows_by_interval": (
        "OVER (ORDER BY ts ROWS BETWEEN @INTERVAL '1' SECOND PRECEDING AND CURRENT ROW)",
        ErrorCode.OVER,
    ),
    "negative_rows": (
        "OVER (ORDER BY ts ROWS BETWEEN @-1 PRECEDING AND CURRENT ROW)",
        ErrorCode.OUT_OF_RANGE,
    ),
    "unknown_partition_key": (
        "OVER (PARTITION BY @nobody ORDER BY ts)",
        ErrorCode.UNKNOWN_NAME,
    ),
}


@pytest.mark.parametrize("name", sorted(MISTAKES))
def test_misuse_is_one_positioned_error(name):
    window, code = MISTAKES[name]
    err = one_error(SOURCE + Q.format(w=window))
    assert err.code is code, err.message


def test_windows_that_differ_are_one_error_at_the_second():
    other = W.replace("'1' MINUTE", "'2' MINUTE")
    text = SOURCE + f"SELECT SUM(amount) {W} AS a, @COUNT(*) {other} AS b FROM clicks;"
    assert one_error(text).code is ErrorCode.OVER


def test_over_applies_to_an_aggregate():
    text = SOURCE + f"SELECT @UPPER(user_id) {W} AS a FROM clicks;"
    assert one_error(text).code is ErrorCode.OVER


def test_a_source_without_event_time_is_refused():
    text = SOURCE.replace(",\n    WATERMARK FOR ts AS ts - INTERVAL '5' SECOND", "")
    text += "SELECT COUNT(*) OVER (ORDER BY @ts) AS n FROM clicks;"
    assert one_error(text).code is ErrorCode.NO_EVENT_TIME


def test_a_view_of_an_over_aggregation_is_not_read():
    text = SOURCE + (
        f"CREATE VIEW totals AS SELECT user_id, SUM(amount) {W} AS total FROM clicks;\n"
        "SELECT user_id, COUNT(*) AS n FROM @totals GROUP BY user_id, COUNT_WINDOW(2);"
    )
    assert one_error(text).code is ErrorCode.OVER


def test_row_number_is_not_an_over_aggregate():
    text = (
        SOURCE
        + f"SELECT SUM(amount) {W} AS a, "
        + "@ROW_NUMBER() OVER (PARTITION BY user_id ORDER BY ts) AS r FROM clicks;"
    )
    assert one_error(text).code is ErrorCode.SYNTAX


def test_over_is_a_keyword_only_before_its_window():
    # `COUNT(*) over` stays an alias, as before OVER aggregations existed
    text = SOURCE + "SELECT COUNT(*) over FROM clicks GROUP BY TUMBLE(ts, INTERVAL '1' MINUTE);"
    (q,) = compile_source(text).queries
    assert isinstance(q, P.Query) and [c.name for c in q.output] == ["over"]


def test_partition_keys_are_source_columns_whatever_their_names():
    text = SOURCE.replace("user_id STRING", "window_start STRING") + (
        "SELECT COUNT(*) OVER (PARTITION BY window_start ORDER BY ts) AS n FROM clicks;"
    )
    (q,) = compile_source(text).queries
    assert [k.name for k in q.keys] == ["window_start"]
    twice = (
        SOURCE + "SELECT COUNT(*) OVER (PARTITION BY user_id, @user_id ORDER BY ts) FROM clicks;"
    )
    assert one_error(twice).code is ErrorCode.DUPLICATE_NAME
