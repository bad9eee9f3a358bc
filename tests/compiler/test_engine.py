"""Engine choice: native only when provably exact, every reason names its clause and line."""

from __future__ import annotations

import pytest

from wql.compiler import compile_source
from wql.compiler import plan as P
from wql.compiler.capabilities import NATIVE
from wql.compiler.planner import native_blockers
from wql.errors import WqlErrors, WqlUnsupportedError
from wql.grammar.formatter import format_script
from wql.grammar.parser import parse

SRC = (
    "CREATE SOURCE c (k STRING, v DOUBLE, ts TIMESTAMP, "
    "WATERMARK FOR ts AS ts - INTERVAL '1' SECOND);\n"
)


def only(query: str, engine: str = "auto"):
    (q,) = compile_source(SRC + query, engine=engine).queries
    return q


@pytest.mark.parametrize(
    "window",
    [
        "TUMBLE(ts, INTERVAL '1' MINUTE)",
        "TUMBLE(ts, INTERVAL '1' MINUTE, INTERVAL '10' SECOND)",
        "HOP(ts, INTERVAL '10' SECOND, INTERVAL '1' MINUTE)",
        "CUMULATE(ts, INTERVAL '10' SECOND, INTERVAL '1' MINUTE)",
        "SESSION(ts, INTERVAL '30' SECOND)",
    ],
)
def test_default_trigger_event_time_windows_are_native(window):
    q = only(f"SELECT k, window_start, COUNT(*) AS n, AVG(v) AS a FROM c GROUP BY k, {window};")
    assert q.engine.engine == "native" and not q.engine.forced
    assert q.engine.reasons and "identical rows" in q.engine.reasons[0].text


def test_explicit_watermark_trigger_and_constant_pane_columns_stay_native():
    q = only(
        "SELECT k, pane_index, pane_timing, MIN(v) AS lo, COUNT(DISTINCT v) AS d FROM c "
        "GROUP BY k, TUMBLE(ts, INTERVAL '1' MINUTE) TRIGGER WATERMARK;"
    )
    assert q.engine.engine == "native"


@pytest.mark.parametrize(
    "clauses,clause_text,line",
    [
        ("TRIGGER COUNT(100)", "TRIGGER COUNT(100) at line 3", 3),
        ("TRIGGER PURGING WATERMARK", "TRIGGER PURGING WATERMARK at line 3", 3),
        ("EVICT COUNT(10)", "EVICT COUNT(10) at line 3", 3),
        ("ALLOWED LATENESS INTERVAL '1' MINUTE", "ALLOWED LATENESS 1 min at line 3", 3),
        ("LATE DATA TO late", "LATE DATA TO late at line 3", 3),
    ],
)
def test_clause_needing_operator_is_named_with_its_line(clauses, clause_text, line):
    q = only(
        f"SELECT k, COUNT(*) AS n FROM c GROUP BY k, TUMBLE(ts, INTERVAL '1' MINUTE)\n{clauses};"
    )
    assert q.engine.engine == "operator"
    (reason,) = q.engine.reasons
    assert reason.text.startswith(clause_text + " needs the operator engine: ")
    assert reason.span is not None and reason.span.line == line


@pytest.mark.parametrize(
    "select,window,fragment",
    [
        ("FIRST_VALUE(v)", "TUMBLE(ts, INTERVAL '1' MINUTE)", "FIRST_VALUE at line 2"),
        ("LAST_VALUE(v)", "TUMBLE(ts, INTERVAL '1' MINUTE)", "LAST_VALUE at line 2"),
        ("COLLECT_LIST(v)", "TUMBLE(ts, INTERVAL '1' MINUTE)", "COLLECT_LIST at line 2"),
        ("COUNT(*)", "COUNT_WINDOW(10)", "COUNT_WINDOW window at line 2"),
        ("COUNT(*)", "TUMBLE(PROCTIME(), INTERVAL '1' MINUTE)", "TUMBLE(PROCTIME(), ...)"),
    ],
)
def test_windows_and_aggregates_needing_operator(select, window, fragment):
    extra = " TRIGGER COUNT(1)" if "GLOBAL" in window else ""
    q = only(f"SELECT k, {select} AS x FROM c GROUP BY k, {window}{extra};")
    assert q.engine.engine == "operator"
    assert any(fragment in r.text for r in q.engine.reasons), [r.text for r in q.engine.reasons]


def test_dynamic_gap_session_runs_native():
    # the native backend filters and counts gap <= 0 / NULL rows itself (docs/native.md)
    q = only(
        "SELECT k, COUNT(*) AS n FROM c "
        "GROUP BY k, SESSION(ts, GAP CAST(v AS BIGINT) * INTERVAL '1' SECOND);"
    )
    assert q.engine.engine == "native", [r.text for r in q.engine.reasons]


def test_arrival_order_runs_natively_but_for_sessions():
    # in arrival order rows can be late: the native engine leaves them out of the
    # windows late for them, which a session's merging would not replay
    source = (
        "CREATE SOURCE a (k STRING, seq BIGINT, ts TIMESTAMP, tag STRING, "
        "WATERMARK FOR ts AS ts - INTERVAL '1' SECOND) WITH (arrival_order = '{col}');\n"
    )
    tumble = "SELECT k, COUNT(*) AS n FROM a GROUP BY k, TUMBLE(ts, INTERVAL '1' MINUTE);"
    session = "SELECT k, COUNT(*) AS n FROM a GROUP BY k, SESSION(ts, INTERVAL '1' MINUTE);"
    (q,) = compile_source(source.format(col="seq") + tumble).queries
    assert q.engine.engine == "native"
    assert any("arrival_order = 'seq'" in r.text for r in q.engine.reasons)
    (q,) = compile_source(source.format(col="seq") + session).queries
    assert q.engine.engine == "operator"
    assert "arrival_order = 'seq'" in q.engine.reasons[0].text
    assert "session" in q.engine.reasons[0].text
    # a text arrival column: batch replay refuses it when it runs, on the operator engine
    (q,) = compile_source(source.format(col="tag") + tumble).queries
    assert q.engine.engine == "operator"
    assert "arrival_order = 'tag'" in q.engine.reasons[0].text


def test_keyed_session_with_zero_delay_needs_operator_but_unkeyed_does_not():
    text = (
        "CREATE SOURCE z (k STRING, ts TIMESTAMP, WATERMARK FOR ts AS ts);\n"
        "SELECT k, COUNT(*) AS n FROM z GROUP BY k, SESSION(ts, INTERVAL '3' SECOND);\n"
        "SELECT COUNT(*) AS n FROM z GROUP BY SESSION(ts, INTERVAL '3' SECOND);"
    )
    keyed, unkeyed = compile_source(text).queries
    assert keyed.engine.engine == "operator"
    assert "zero watermark delay" in keyed.engine.reasons[0].text
    assert unkeyed.engine.engine == "native"


def test_all_blockers_are_listed_in_clause_order():
    q = only(
        "SELECT k, FIRST_VALUE(v) AS f FROM c GROUP BY k, TUMBLE(ts, INTERVAL '1' MINUTE)\n"
        "ALLOWED LATENESS INTERVAL '1' SECOND\nTRIGGER COUNT(3)\nEVICT COUNT(2)\nLATE DATA TO l;"
    )
    texts = [r.text for r in q.engine.reasons]
    assert [t.split(" at line")[0] for t in texts] == [
        "TRIGGER COUNT(3)",
        "EVICT COUNT(2)",
        "ALLOWED LATENESS 1 s",
        "LATE DATA TO l",
        "FIRST_VALUE",
    ]


def test_forcing_native_on_an_operator_query_names_the_clause():
    with pytest.raises(WqlUnsupportedError) as info:
        compile_source(
            SRC + "SELECT k, COUNT(*) AS n\nFROM c\nGROUP BY k, TUMBLE(ts, INTERVAL '1' MINUTE)\n"
            "TRIGGER COUNT(100);",
            "f.wql",
            engine="native",
        )
    err = info.value
    assert "TRIGGER COUNT(100) at line 5 needs the operator engine" in err.message
    assert (err.line, err.column) == (5, 9)
    assert err.filename == "f.wql"
    assert "f.wql:5:9: unsupported: " in err.render()


def test_forcing_native_reports_every_failing_query():
    with pytest.raises(WqlErrors) as info:
        compile_source(
            SRC + "SELECT k, COUNT(*) AS n FROM c GROUP BY k, COUNT_WINDOW(5);\n"
            "SELECT k, COUNT(*) AS n FROM c GROUP BY k, TUMBLE(ts, INTERVAL '1' SECOND);\n"
            "SELECT k, COLLECT_LIST(v) AS n FROM c GROUP BY k, TUMBLE(ts, INTERVAL '1' SECOND);\n",
            engine="native",
        )
    assert [e.line for e in info.value.errors] == [2, 4]


def test_forcing_native_on_a_native_query_and_forcing_operator():
    text = "SELECT k, COUNT(*) AS n FROM c GROUP BY k, TUMBLE(ts, INTERVAL '1' MINUTE);"
    native = only(text, engine="native")
    assert native.engine.engine == "native" and native.engine.forced
    forced = only(text, engine="operator")
    assert forced.engine.engine == "operator" and forced.engine.forced
    assert forced.engine.reasons[0].text == "engine forced to operator"


def test_unknown_engine_is_an_error():
    with pytest.raises(WqlUnsupportedError) as info:
        compile_source(
            SRC + "SELECT COUNT(*) FROM c GROUP BY TUMBLE(ts, INTERVAL '1' SECOND);", engine="spark"
        )
    assert "unknown engine 'spark'" in info.value.message


def test_planner_reads_declared_capabilities():
    from dataclasses import replace

    q = only("SELECT k, COUNT(*) AS n FROM c GROUP BY k, COUNT_WINDOW(5);")
    assert native_blockers(q)
    more = replace(
        NATIVE,
        windows=NATIVE.windows | {"COUNT_WINDOW"},
        triggers=NATIVE.triggers | {"PurgingTrigger"},
    )
    assert native_blockers(q, more) == []


# --------------------------------------------------------------------------- streams


def on_stream(query: str, engine: str = "auto"):
    (q,) = compile_source(SRC + query, engine=engine, streaming=True).queries
    return q


def clauses(q) -> list[str]:
    return [r.text.split(" at line")[0] for r in q.engine.reasons]


@pytest.mark.parametrize(
    "window",
    [
        "TUMBLE(ts, INTERVAL '1' MINUTE)",
        "HOP(ts, INTERVAL '10' SECOND, INTERVAL '1' MINUTE)",
        "SESSION(ts, INTERVAL '30' SECOND)",
        "SESSION(ts, GAP CAST(v AS BIGINT) * INTERVAL '1' SECOND)",
    ],
)
def test_a_batch_native_query_runs_on_the_operator_engine_on_a_stream(window):
    text = f"SELECT k, window_start, COUNT(*) AS n, MAX(v) AS m FROM c GROUP BY k, {window};"
    assert only(text).engine.engine == "native"
    q = on_stream(text)
    assert q.engine.engine == "operator" and q.engine.streaming and not q.engine.forced
    (reason,) = q.engine.reasons
    # rows behind the watermark: Spark drops them uncounted or adds them to a fired
    # window; the operator engine counts them (docs/native.md, "Streaming")
    assert reason.text.startswith(
        "WATERMARK FOR ts at line 1 needs the operator engine on a stream: "
    )
    assert "without counting them" in reason.text and "late" in reason.text
    assert (reason.span.line, reason.span.column) == (1, 52)


def test_constructs_spark_cannot_stream_are_named_before_the_late_row_reason():
    # the query of issue 8: native in batch, refused by Spark on a stream
    q = on_stream(
        "SELECT k, window_start, window_end, COUNT(DISTINCT v) AS d, SUM(v) AS s FROM c\n"
        "GROUP BY k, CUMULATE(ts, INTERVAL '10' SECOND, INTERVAL '30' SECOND);"
    )
    assert q.engine.engine == "operator"
    assert clauses(q) == ["CUMULATE window", "COUNT_DISTINCT", "SUM of DOUBLE", "WATERMARK FOR ts"]
    texts = [r.text for r in q.engine.reasons]
    assert "STREAMING_OUTPUT_MODE" in texts[0] and "distinct aggregations" in texts[1]
    assert "monotonically_increasing_id" in texts[2]
    keyless = on_stream("SELECT COUNT(*) AS n FROM c GROUP BY SESSION(ts, INTERVAL '3' SECOND);")
    assert clauses(keyless) == ["SESSION without keys", "WATERMARK FOR ts"]
    # in batch all three are native
    assert (
        only("SELECT COUNT(*) AS n FROM c GROUP BY SESSION(ts, INTERVAL '3' SECOND);").engine.engine
        == "native"
    )


def test_forcing_native_on_a_stream_is_a_positioned_error_naming_the_clause():
    with pytest.raises(WqlUnsupportedError) as info:
        compile_source(
            SRC + "SELECT k, COUNT(DISTINCT v) AS d\nFROM c\n"
            "GROUP BY k, CUMULATE(ts, INTERVAL '10' SECOND, INTERVAL '30' SECOND);",
            "q.wql",
            engine="native",
            streaming=True,
        )
    err = info.value
    assert err.message.startswith(
        "query 'query_1' cannot run on the native engine on a stream: CUMULATE window at line 4 "
        "needs the operator engine on a stream: "
    )
    assert (err.line, err.column) == (4, 13) and err.filename == "q.wql"
    assert "(and 2 more reason(s))" in err.message
    # a query Spark can stream is refused too, at its watermark declaration
    with pytest.raises(WqlUnsupportedError) as info:
        on_stream(
            "SELECT k, COUNT(*) AS n FROM c GROUP BY k, TUMBLE(ts, INTERVAL '1' SECOND);", "native"
        )
    assert (info.value.line, info.value.column) == (1, 52)
    assert "WATERMARK FOR ts at line 1" in info.value.message
    # the same text forced native in batch compiles
    assert only(
        "SELECT k, COUNT(*) AS n FROM c GROUP BY k, TUMBLE(ts, INTERVAL '1' SECOND);", "native"
    ).engine.forced


def test_operator_forced_on_a_stream_and_operator_queries_are_unchanged():
    q = on_stream("SELECT k, COUNT(*) AS n FROM c GROUP BY k, COUNT_WINDOW(5);")
    assert q.engine.engine == "operator" and q.engine.streaming
    assert clauses(q) == ["COUNT_WINDOW window"]  # no event-time window: no late-row reason
    forced = on_stream(
        "SELECT k, COUNT(*) AS n FROM c GROUP BY k, TUMBLE(ts, INTERVAL '1' SECOND);", "operator"
    )
    assert forced.engine == P.EngineChoice(
        "operator", (P.Reason("engine forced to operator"),), forced=True, streaming=True
    )


def test_streaming_can_name_the_sources_that_are_streams():
    from wql.compiler.planner import choose_engines

    text = (
        SRC + "CREATE SOURCE d (k STRING, ts TIMESTAMP, WATERMARK FOR ts AS ts);\n"
        "SELECT k, COUNT(*) AS n FROM c GROUP BY k, TUMBLE(ts, INTERVAL '1' SECOND);\n"
        "SELECT k, COUNT(*) AS n FROM d GROUP BY k, TUMBLE(ts, INTERVAL '1' SECOND);\n"
    )
    program = compile_source(text)
    assert [q.engine.engine for q in program.queries] == ["native", "native"]
    mixed = choose_engines(program, streaming={"D"})
    assert [(q.engine.engine, q.engine.streaming) for q in mixed.queries] == [
        ("native", False),
        ("operator", True),
    ]
    # a query's choice depends only on its own source and the engine asked for
    assert choose_engines(mixed).queries == program.queries
    assert (
        choose_engines(program, streaming=True).queries
        == compile_source(text, streaming=True).queries
    )


def test_no_query_of_the_repository_is_native_on_a_stream():
    """Every example, golden and fixture query: planned for a stream, it runs on the
    operator engine with reasons, and forcing native is a positioned error."""
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    files = sorted(
        [
            *root.glob("examples/*.wql"),
            *root.glob("tests/compiler/golden/*.wql"),
            *root.glob("tests/fixtures/queries/*.wql"),
        ]
    )
    assert len(files) >= 15
    for path in files:
        text = path.read_text()
        # every query runs on a stream: a pipeline whose link needs Spark SQL (a WHERE
        # over a view: pipelines.wql) cut there, an outer join whose ON has a
        # non-equality (joins.wql) with Spark's ON over each row's partners
        # (docs/streaming.md, "Links in Spark SQL", "Window joins")
        program = compile_source(text, path.name, streaming=True)
        for q in program.queries:
            assert q.engine.engine == "operator" and q.engine.streaming, (path.name, q.name)
            assert q.engine.reasons and all(r.span is not None for r in q.engine.reasons)
        batch_native = [q.name for q in compile_source(text).queries if q.engine.engine == "native"]
        if batch_native:
            with pytest.raises((WqlUnsupportedError, WqlErrors)) as info:
                compile_source(text, path.name, engine="native", streaming=True)
            errors = getattr(info.value, "errors", [info.value])
            assert all(e.line is not None for e in errors)
            assert len(errors) == len(program.queries), path.name


@pytest.mark.parametrize("key", ["auction", "`auction`", "`a``b`", "`a``b``c`"])
def test_a_top_n_over_a_view_selecting_its_keys_is_native_however_they_are_quoted(key):
    # the view's key column, however quoted, tells the order of its rows of a
    # window (WindowRank.ties): a doubled backquote inside the name is one backquote
    text = (
        f"CREATE SOURCE b2 ({key} BIGINT, price BIGINT, ts TIMESTAMP, "
        "WATERMARK FOR ts AS ts - INTERVAL '1' SECOND);\n"
        f"CREATE VIEW counts AS SELECT {key}, window_start, window_end, COUNT(*) AS n "
        f"FROM b2 GROUP BY {key}, TUMBLE(ts, INTERVAL '10' SECOND);\n"
        "SELECT * FROM (SELECT *, ROW_NUMBER() OVER (PARTITION BY window_start, window_end "
        "ORDER BY n DESC) AS rn FROM counts) t WHERE rn <= 3;\n"
    )
    rank = compile_source(text).queries[-1]
    assert isinstance(rank, P.WindowRank)
    name = key.strip("`").replace("``", "`") if key.startswith("`") else key
    assert rank.ties == (name,)
    assert rank.engine is not None and rank.engine.engine == "native", rank.engine


@pytest.mark.parametrize("function", ["RANK", "DENSE_RANK", "rank", "Dense_Rank"])
def test_rank_functions_bind_as_tied_top_n_and_a_column_may_be_named_rank(function):
    # RANK/DENSE_RANK are words only before `() OVER`: `rank` stays a column name
    text = (
        "CREATE SOURCE b2 (k STRING, ts TIMESTAMP, WATERMARK FOR ts AS ts);\n"
        "CREATE VIEW counts AS SELECT k AS rank, window_start, window_end, window_time, "
        "COUNT(*) AS n "
        "FROM b2 GROUP BY k, TUMBLE(ts, INTERVAL '10' SECOND);\n"
        f"SELECT rank, n FROM counts QUALIFY {function}() OVER (PARTITION BY window_start, "
        "window_end ORDER BY window_time) <= 1;\n"
    )
    rank = compile_source(text).queries[-1]
    assert isinstance(rank, P.WindowRank)
    # by the view's window_time and one row: ROW_NUMBER would be a deduplication
    assert rank.keep is P.RankKeep(function.upper())
    assert rank.engine is not None and rank.engine.engine == "native", rank.engine
    formatted = format_script(parse(text))
    assert f"{function.upper()}() OVER" in formatted
    assert parse(formatted) == parse(text)


@pytest.mark.parametrize(
    ("window", "aggregates", "two_phase"),
    [
        ("HOP(ts, INTERVAL '1' SECOND, INTERVAL '60' SECOND)", "COUNT(*) AS n", True),
        ("CUMULATE(ts, INTERVAL '2' SECOND, INTERVAL '10' SECOND)", "COUNT(v) AS n", True),
        ("HOP(ts, INTERVAL '1' SECOND, INTERVAL '4' SECOND)", "MIN(k) AS lo, MAX(k) AS hi", True),
        # a slide that does not divide the size: rows of one slide differ in windows
        ("HOP(ts, INTERVAL '2' SECOND, INTERVAL '3' SECOND)", "COUNT(*) AS n", False),
        # partials that do not merge exactly in any order
        ("HOP(ts, INTERVAL '1' SECOND, INTERVAL '4' SECOND)", "SUM(v) AS s", False),
        ("HOP(ts, INTERVAL '1' SECOND, INTERVAL '4' SECOND)", "MAX(v) AS s", False),
        ("HOP(ts, INTERVAL '1' SECOND, INTERVAL '4' SECOND)", "AVG(v) AS s", False),
        ("CUMULATE(ts, INTERVAL '2' SECOND, INTERVAL '10' SECOND)", "COUNT(DISTINCT k)", False),
        ("TUMBLE(ts, INTERVAL '1' MINUTE)", "COUNT(*) AS n", False),
    ],
)
def test_hop_and_cumulate_aggregate_in_two_phases_where_partials_merge(
    window, aggregates, two_phase
):
    from wql.compiler.backends.native import GroupAggregate, lower
    from wql.compiler.planner import sliced

    q = only(f"SELECT k, window_start, {aggregates} FROM c GROUP BY k, {window};")
    assert q.engine.engine == "native"
    assert sliced(q) is two_phase
    groups = [s for s in lower(q).steps if isinstance(s, GroupAggregate)]
    assert len(groups) == (2 if two_phase else 1)
    assert any("in two phases" in r.text for r in q.engine.reasons) is two_phase
