"""Views as sources: what a pipeline cannot be is one positioned error, with its code.

Each case is the valid pipeline below with one mistake made in it; ``@``
marks where the error must point (the harness: tests/compiler/mistakes.py).
"""

from __future__ import annotations

import pytest

from tests.compiler.mistakes import mistake, one_error, unmark
from wql.cli import main as cli_main
from wql.compiler import check_source, compile_source
from wql.errors import ErrorCode, WqlError

VALID = """CREATE SOURCE clicks (user_id STRING, ts TIMESTAMP,
    WATERMARK FOR ts AS ts - INTERVAL '5' SECOND);

CREATE VIEW per_minute AS
SELECT user_id, window_time AS minute_end, COUNT(*) AS clicks
FROM clicks
GROUP BY user_id, TUMBLE(ts, INTERVAL '1' MINUTE);

CREATE VIEW per_hour AS
SELECT user_id, window_start, SUM(clicks) AS clicks
FROM per_minute
GROUP BY user_id, TUMBLE(minute_end, INTERVAL '1' HOUR);
"""

# (id, text replaced in VALID, its replacement with @ where the error points, code)
CASES = [
    (
        "view_read_before_its_definition",
        "FROM clicks\nGROUP BY user_id, TUMBLE(ts",
        "FROM @per_hour\nGROUP BY user_id, TUMBLE(ts",
        ErrorCode.PIPELINE,
    ),
    ("view_reads_itself", "FROM per_minute", "FROM @per_hour", ErrorCode.PIPELINE),
    (
        "watermark_on_a_view",
        "FROM per_minute",
        "FROM per_minute @WATERMARK FOR minute_end AS minute_end",
        ErrorCode.PIPELINE,
    ),
    (
        "view_without_window_time",
        "window_time AS minute_end",
        "window_start AS minute_end",
        ErrorCode.PIPELINE,
    ),
    (
        "window_on_another_column_of_the_view",
        "TUMBLE(minute_end",
        "TUMBLE(@user_id",
        ErrorCode.NO_EVENT_TIME,
    ),
    (
        "view_on_processing_time",
        "TUMBLE(ts, INTERVAL '1' MINUTE)",
        "TUMBLE(PROCTIME(), INTERVAL '1' MINUTE)",
        ErrorCode.PIPELINE,
    ),
    (
        "reader_on_processing_time",
        "TUMBLE(minute_end, INTERVAL '1' HOUR)",
        "@TUMBLE(PROCTIME(), INTERVAL '1' HOUR)",
        ErrorCode.PIPELINE,
    ),
    (
        "view_with_a_changelog",
        "window_time AS minute_end, COUNT(*) AS clicks\nFROM clicks\n"
        "GROUP BY user_id, TUMBLE(ts, INTERVAL '1' MINUTE);",
        "window_start, window_end, pane_index, window_time AS minute_end, COUNT(*) AS clicks\n"
        "FROM clicks\nGROUP BY user_id, TUMBLE(ts, INTERVAL '1' MINUTE)\nEMIT CHANGELOG;",
        ErrorCode.PIPELINE,
    ),
    ("view_named_like_a_source", "CREATE VIEW per_minute", "CREATE VIEW @clicks", None),
    ("unknown_view", "FROM per_minute", "FROM @per_minut", ErrorCode.UNKNOWN_NAME),
]
# the error of these is not where their replacement starts
_AT = {
    "view_without_window_time": ("TUMBLE(minute_end", "TUMBLE(@minute_end"),
    "view_on_processing_time": ("FROM per_minute", "FROM @per_minute"),
    "view_with_a_changelog": ("FROM per_minute", "FROM @per_minute"),
    "view_named_like_a_source": ("FROM per_minute", "FROM clicks"),
}


def _mistaken(case_id: str, old: str, new: str) -> tuple[str, int, int]:
    return unmark(mistake(VALID, old, new, _AT.get(case_id)))


def test_the_pipeline_is_valid():
    assert check_source(VALID, "p.wql") == []


@pytest.mark.parametrize(("case_id", "old", "new", "code"), CASES, ids=[c[0] for c in CASES])
def test_one_pipeline_mistake_gives_one_error_at_its_place(case_id, old, new, code):
    text, line, column = _mistaken(case_id, old, new)
    errors = check_source(text, "p.wql")
    assert [(e.line, e.column) for e in errors] == [(line, column)], [e.message for e in errors]
    assert code is None or errors[0].code is code, errors[0].message
    with pytest.raises(WqlError) as info:
        compile_source(text, "p.wql")
    got = getattr(info.value, "errors", (info.value,))
    assert [(e.line, e.column, e.message) for e in got] == [(line, column, errors[0].message)]


def test_the_messages_say_what_is_wrong_and_what_is_supported():
    cases = {c[0]: c for c in CASES}

    def message(case_id: str) -> str:
        _, old, new, _ = cases[case_id]
        return check_source(_mistaken(case_id, old, new)[0], "p.wql")[0].message

    assert "defined after this query (line 9)" in message("view_read_before_its_definition")
    assert "reads itself" in message("view_reads_itself")
    assert "has its event time already" in message("watermark_on_a_view")
    assert "a view's event time is the window_time it selects" in message(
        "view_without_window_time"
    )
    assert "fires on processing time" in message("view_on_processing_time")
    assert "cannot use processing time" in message("reader_on_processing_time")
    assert "has the name of source 'clicks'" in message("view_named_like_a_source")


def test_a_broken_view_is_reported_once_not_again_where_it_is_read():
    text = VALID.replace("COUNT(*) AS clicks", "COUNT(*) AS clicks, SUM(nope) AS x")
    errors = check_source(text, "p.wql")
    want = [(5, "unknown column 'nope' in source 'clicks'")]
    assert [(e.line, e.message) for e in errors] == want


def test_a_file_reads_the_views_of_the_files_before_it(tmp_path, capsys):
    a = tmp_path / "a.wql"
    b = tmp_path / "b.wql"
    split = VALID.index("CREATE VIEW per_hour")
    a.write_text(VALID[:split])
    b.write_text(VALID[split:])
    assert cli_main(["check", str(a), str(b)]) == 0
    capsys.readouterr()
    # alone, or before the file it reads, b.wql does not know per_minute
    assert cli_main(["check", str(b), str(a)]) == 1
    err = capsys.readouterr().err
    assert "b.wql:3:6: error: unknown source 'per_minute'" in err


# --------------------------------------------------------------------------- window Top-N

RANK = """CREATE SOURCE bids (auction BIGINT, price BIGINT, ts TIMESTAMP,
    WATERMARK FOR ts AS ts - INTERVAL '1' SECOND);

CREATE VIEW counts AS
SELECT auction, window_start, window_end, COUNT(*) AS n
FROM bids
GROUP BY auction, TUMBLE(ts, INTERVAL '10' SECOND);

SELECT *
FROM (
    SELECT *, ROW_NUMBER() OVER (PARTITION BY window_start, window_end ORDER BY n DESC) AS rn
    FROM counts
)
WHERE rn <= 3;
"""

RANK_CASES = [
    ("rank_over_a_source", "    FROM counts\n", "    FROM @bids\n", ErrorCode.WINDOWED),
    (
        "rank_over_early_panes",
        "TUMBLE(ts, INTERVAL '10' SECOND);",
        "TUMBLE(ts, INTERVAL '10' SECOND)\nTRIGGER COUNT(2);",
        ErrorCode.WINDOWED,
    ),
    (
        "rank_over_late_panes",
        "TUMBLE(ts, INTERVAL '10' SECOND);",
        "TUMBLE(ts, INTERVAL '10' SECOND)\nALLOWED LATENESS INTERVAL '5' SECOND;",
        ErrorCode.WINDOWED,
    ),
    (
        "rank_without_the_window_end",
        "PARTITION BY window_start, window_end ORDER",
        "PARTITION BY window_start ORDER",
        ErrorCode.RANK,
    ),
    ("rank_without_a_bound", "WHERE rn <= 3", "WHERE @rn >= 3", ErrorCode.RANK),
    ("rank_keeping_nothing", "WHERE rn <= 3", "WHERE @rn < 1", ErrorCode.RANK),
    (
        "rank_over_a_view_without_window_end",
        "SELECT auction, window_start, window_end, COUNT(*)",
        "SELECT auction, window_start, COUNT(*)",
        ErrorCode.WINDOWED,
    ),
    (
        # a rank over a SESSION table ranks each key's sessions: the keys must agree
        "rank_over_a_session_table_of_other_keys",
        "ORDER BY n DESC) AS rn\n    FROM counts\n",
        "ORDER BY price DESC) AS rn\n    FROM TABLE(SESSION(TABLE bids PARTITION BY @auction, "
        "DESCRIPTOR(ts), INTERVAL '5' SECOND))\n",
        ErrorCode.WINDOWED,
    ),
    (
        "rank_by_an_unknown_column",
        "ORDER BY n DESC",
        "ORDER BY @price DESC",
        ErrorCode.UNKNOWN_NAME,
    ),
]
_RANK_AT = {
    "rank_over_early_panes": ("    FROM counts\n", "    FROM @counts\n"),
    "rank_over_late_panes": ("    FROM counts\n", "    FROM @counts\n"),
    "rank_over_a_view_without_window_end": ("    FROM counts\n", "    FROM @counts\n"),
    "rank_without_the_window_end": ("ROW_NUMBER()", "@ROW_NUMBER()"),
}


@pytest.mark.parametrize(
    ("case_id", "old", "new", "code"), RANK_CASES, ids=[c[0] for c in RANK_CASES]
)
def test_one_rank_mistake_gives_one_error_at_its_place(case_id, old, new, code):
    error = one_error(mistake(RANK, old, new, _RANK_AT.get(case_id)), "r.wql")
    assert error.code is code, error.message


def test_the_rank_is_valid_and_says_what_is_supported():
    assert check_source(RANK, "r.wql") == []
    # a SESSION table, its keys those of the rank (none here): ranked per session
    sessions = RANK.replace(
        "    FROM counts\n",
        "    FROM TABLE(SESSION(TABLE bids, DESCRIPTOR(ts), INTERVAL '5' SECOND))\n",
    ).replace("ORDER BY n DESC", "ORDER BY price DESC")
    assert check_source(sessions, "r.wql") == []
    early = RANK.replace(
        "TUMBLE(ts, INTERVAL '10' SECOND);", "TUMBLE(ts, INTERVAL '10' SECOND)\nTRIGGER COUNT(2);"
    )
    message = check_source(early, "r.wql")[0].message
    assert "only the default WATERMARK trigger without allowed lateness" in message


# --------------------------------------------------------------------------- window join

JOIN = """CREATE SOURCE bids (auction BIGINT, price BIGINT, ts TIMESTAMP,
    WATERMARK FOR ts AS ts - INTERVAL '1' SECOND);
CREATE SOURCE people (id BIGINT, ts TIMESTAMP,
    WATERMARK FOR ts AS ts - INTERVAL '1' SECOND);

CREATE VIEW top AS
SELECT window_start, window_end, MAX(price) AS maxprice
FROM bids
GROUP BY TUMBLE(ts, INTERVAL '10' SECOND);

SELECT b.auction, b.price
FROM TABLE(TUMBLE(TABLE bids, DESCRIPTOR(ts), INTERVAL '10' SECOND)) AS b
JOIN top AS t
    ON b.window_start = t.window_start AND b.window_end = t.window_end AND b.price = t.maxprice;
"""

_ON = ("    ON b.", "    ON @b.")
_RIGHT = ("JOIN top", "JOIN @top")  # where the right side disagrees with the left

# (id, old, new (@ where the error points, or in _JOIN_AT), code)
JOIN_CASES = [
    ("join_without_the_window_end", "AND b.window_end = t.window_end ", "", ErrorCode.WINDOW_JOIN),
    (
        "join_without_window_bounds",
        "b.window_start = t.window_start AND b.window_end = t.window_end AND ",
        "",
        ErrorCode.WINDOW_JOIN,
    ),
    ("join_bounds_in_a_disjunction", "AND b.price", "OR b.price", ErrorCode.WINDOW_JOIN),
    (
        "join_of_different_windows",
        "GROUP BY TUMBLE(ts, INTERVAL '10' SECOND)",
        "GROUP BY HOP(ts, INTERVAL '5' SECOND, INTERVAL '10' SECOND)",
        ErrorCode.WINDOW_JOIN,
    ),
    ("join_over_a_source", "JOIN top AS t", "JOIN @bids AS t", ErrorCode.WINDOWED),
    (
        "join_over_early_panes",
        "GROUP BY TUMBLE(ts, INTERVAL '10' SECOND);",
        "GROUP BY TUMBLE(ts, INTERVAL '10' SECOND)\nTRIGGER COUNT(2);",
        ErrorCode.WINDOWED,
    ),
    (
        "join_over_a_session_table",
        "FROM TABLE(TUMBLE(TABLE",
        "FROM TABLE(@SESSION(TABLE",
        ErrorCode.WINDOWED,
    ),
    (
        "join_of_an_ambiguous_column",
        "SELECT b.auction, b.price",
        "SELECT b.auction, @window_start",
        ErrorCode.UNKNOWN_NAME,
    ),
    ("join_of_one_alias_twice", "JOIN top AS t", "JOIN top AS b", None),
]
_JOIN_AT = {
    "join_without_the_window_end": _ON,
    "join_without_window_bounds": _ON,
    "join_bounds_in_a_disjunction": _ON,
    "join_of_different_windows": _RIGHT,
    "join_over_early_panes": _RIGHT,
    "join_of_one_alias_twice": _RIGHT,
}


@pytest.mark.parametrize(
    ("case_id", "old", "new", "code"), JOIN_CASES, ids=[c[0] for c in JOIN_CASES]
)
def test_one_join_mistake_gives_one_error_at_its_place(case_id, old, new, code):
    error = one_error(mistake(JOIN, old, new, _JOIN_AT.get(case_id)), "j.wql")
    assert code is None or error.code is code, error.message


def test_the_join_is_valid_and_says_what_is_supported():
    assert check_source(JOIN, "j.wql") == []

    def message(old: str, new: str) -> str:
        return check_source(JOIN.replace(old, new), "j.wql")[0].message

    assert "ON needs b.window_start = t.window_start AND b.window_end = t.window_end" in message(
        "b.window_start = t.window_start AND b.window_end = t.window_end AND ", ""
    )
    assert "joins the same windows on both sides" in message(
        "'10' SECOND);\n\n", "'20' SECOND);\n\n"
    )
    # two sources (docs/language.md, "Window joins of two sources"): tests/compiler/
    # test_two_source_join.py has what binds and what is refused
    # a join view is final: another query cannot read it (yet)
    view = JOIN.replace("SELECT b.auction", "CREATE VIEW j AS\nSELECT b.auction") + (
        "SELECT auction, COUNT(*) AS n FROM j GROUP BY auction, TUMBLE(ts, INTERVAL '1' MINUTE);\n"
    )
    errors = check_source(view, "j.wql")
    assert len(errors) == 1 and errors[0].code is ErrorCode.PIPELINE
    assert "is a window join, whose rows another query cannot read" in errors[0].message
