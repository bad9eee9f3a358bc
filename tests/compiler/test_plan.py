"""Plan nodes: invariants in __post_init__, equality without spans, derived schemas."""

from __future__ import annotations

import dataclasses

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from wql.compiler import compile_source
from wql.compiler import plan as P
from wql.compiler import types as T
from wql.compiler.explain import duration, explain
from wql.errors import Span, WqlError, WqlSemanticError

EV = P.TimeDomain.EVENT
SPAN = Span(0, 3, 1, 1, 1, 4)


@pytest.mark.parametrize(
    "build,message",
    [
        (lambda: P.Tumble(EV, "ts", 0), "TUMBLE size must be > 0"),
        (lambda: P.Tumble(EV, "ts", 10, -10), "|offset| < size"),
        (lambda: P.Hop(EV, "ts", 5, 20, 5), "|offset| < slide"),
        (lambda: P.Cumulate(EV, "ts", 3, 10), "multiple of its step"),
        (lambda: P.Session(EV, "ts", -1), "SESSION gap must be > 0"),
        (lambda: P.Tumble(EV, None, 10), "needs its time column"),
        (lambda: P.CountWindow(0), "COUNT_WINDOW size"),
        (lambda: P.CountTrigger(0), "COUNT trigger count"),
        (lambda: P.EveryTrigger(0, EV), "EVERY interval"),
        (lambda: P.AnyTrigger(()), "ANY needs at least one"),
        (lambda: P.EarlyLateTrigger(None, None), "EARLY or a LATE"),
        (lambda: P.DeltaTrigger(P.Expr("k", T.STRING), 1.0), "must be numeric"),
        (lambda: P.CountEvictor(0), "EVICT COUNT"),
        (lambda: P.EventTime("ts", -1), "delay must be >= 0"),
        (lambda: P.Aggregate(P.AggKind.SUM, None, "__agg_0", T.DOUBLE), "needs argument"),
    ],
)
def test_node_invariants_raise_semantic_errors_with_the_span(build, message):
    with pytest.raises(WqlSemanticError) as info:
        build()
    assert message in info.value.message


def test_invariant_error_carries_the_node_span():
    with pytest.raises(WqlSemanticError) as info:
        P.Tumble(EV, "ts", 0, span=SPAN)
    assert info.value.span == SPAN


def test_spans_do_not_take_part_in_equality():
    assert P.Tumble(EV, "ts", 10, span=SPAN) == P.Tumble(EV, "ts", 10)
    assert P.Expr("a", T.INT, ("a",), SPAN) == P.Expr("a", T.INT, ("a",))
    assert hash(P.CountTrigger(3, SPAN)) == hash(P.CountTrigger(3))


def test_mergeability_propagates_through_composite_triggers():
    delta = P.DeltaTrigger(P.Expr("v", T.DOUBLE), 1.0)
    assert not P.PurgingTrigger(delta).mergeable
    assert not P.TimeoutTrigger(delta, 5).mergeable
    # Flink's ProcessingTimeoutTrigger has no onMerge: never mergeable.
    assert not P.TimeoutTrigger(P.CountTrigger(2), 5).mergeable
    assert not P.AllTrigger((P.CountTrigger(2), delta)).mergeable
    assert not P.EarlyLateTrigger(delta, None).mergeable
    assert P.AnyTrigger((P.CountTrigger(2), P.WatermarkTrigger())).mergeable
    assert (
        P.first_non_mergeable(P.AnyTrigger((P.CountTrigger(1), P.PurgingTrigger(delta)))) is delta
    )


def test_trigger_domains():
    t = P.AnyTrigger((P.WatermarkTrigger(), P.TimeoutTrigger(P.CountTrigger(2), 10)))
    assert P.trigger_domains(t) == {P.TimeDomain.EVENT, P.TimeDomain.PROCESSING}
    assert P.trigger_domains(P.CountTrigger(2)) == frozenset()


SRC = (
    "CREATE SOURCE s (k STRING, v DOUBLE, ts TIMESTAMP, "
    "WATERMARK FOR ts AS ts - INTERVAL '1' SECOND) WITH (format = 'csv', path = 'x.csv', "
    "header = 'true');\n"
)


def test_post_aggregation_and_output_schemas():
    (q,) = compile_source(
        SRC + "SELECT k, window_end, pane_timing, SUM(v) AS total, COUNT(*) FROM s "
        "GROUP BY k, TUMBLE(ts, INTERVAL '1' MINUTE) LATE DATA TO late;"
    ).queries
    assert [(c.name, c.type.ddl) for c in q.post_aggregation_schema] == [
        ("k", "STRING"),
        ("window_start", "TIMESTAMP"),
        ("window_end", "TIMESTAMP"),
        ("window_time", "TIMESTAMP"),
        ("pane_index", "BIGINT"),
        ("pane_timing", "STRING"),
        ("__agg_0", "DOUBLE"),
        ("__agg_1", "BIGINT"),
    ]
    assert [c.name for c in q.output_schema] == ["k", "window_end", "pane_timing", "total", "_c4"]
    assert [(c.name, c.type.ddl) for c in q.late_schema] == [
        ("k", "STRING"),
        ("v", "DOUBLE"),
        ("ts", "TIMESTAMP"),
        ("event_time", "TIMESTAMP"),
    ]


def test_source_options_and_reader_options():
    program = compile_source(SRC + "SELECT k FROM s GROUP BY k, TUMBLE(ts, INTERVAL '1' SECOND);")
    (src,) = program.sources
    assert src.format == "csv" and src.path == "x.csv"
    assert src.reader_options == (("header", "true"),)


def test_count_window_defaults_are_explicit_in_the_plan():
    a, b = compile_source(
        SRC + "SELECT k, COUNT(*) AS n FROM s GROUP BY k, COUNT_WINDOW(5);\n"
        "SELECT k, COUNT(*) AS n FROM s GROUP BY k, COUNT_WINDOW(5, 2) TRIGGER COUNT(3);"
    ).queries
    assert a.trigger is None
    assert a.effective_trigger == P.PurgingTrigger(P.CountTrigger(5))
    assert a.effective_evictor is None
    assert b.effective_trigger == P.CountTrigger(3)
    assert b.effective_evictor == P.CountEvictor(5)


def test_program_rejects_duplicate_names():
    (q,) = compile_source(
        SRC + "SELECT k FROM s GROUP BY k, TUMBLE(ts, INTERVAL '1' SECOND);"
    ).queries
    with pytest.raises(WqlSemanticError, match="unique"):
        P.Program((), (q, dataclasses.replace(q)))


@settings(max_examples=80, deadline=None)
@given(
    size=st.integers(min_value=-5, max_value=5_000),
    slide=st.integers(min_value=-5, max_value=5_000),
    offset=st.integers(min_value=-6_000, max_value=6_000),
)
def test_window_rules_in_binder_and_plan_agree(size, slide, offset):
    """A HOP the binder accepts builds a valid node; one it rejects has a positioned error."""
    text = (
        SRC + f"SELECT k, COUNT(*) AS n FROM s GROUP BY k, HOP(ts, INTERVAL '{slide}' MILLISECOND, "
        f"INTERVAL '{size}' MILLISECOND, INTERVAL '{offset}' MILLISECOND);"
    )
    valid = size > 0 and slide > 0 and abs(offset) < slide
    if valid:
        (q,) = compile_source(text).queries
        assert (q.window.slide_ms, q.window.size_ms, q.window.offset_ms) == (slide, size, offset)
        assert q.engine.engine == "native"
        assert explain(compile_source(text)) == explain(compile_source(text))
    else:
        with pytest.raises(WqlError) as info:
            compile_source(text)
        errors = getattr(info.value, "errors", (info.value,))
        assert all(isinstance(e, WqlSemanticError) and e.line == 2 for e in errors)


@settings(max_examples=100, deadline=None)
@given(st.integers(min_value=-(10**12), max_value=10**12))
def test_duration_is_exact(ms):
    text = duration(ms)
    units = {"d": 86_400_000, "h": 3_600_000, "min": 60_000, "s": 1_000, "ms": 1}
    parts = text.lstrip("-").split()
    total = sum(int(n) * units[u] for n, u in zip(parts[::2], parts[1::2], strict=True))
    assert (-total if text.startswith("-") else total) == ms


def test_unnamed_queries_are_numbered_among_themselves_in_file_order():
    program = compile_source(
        SRC
        + "SELECT k FROM s GROUP BY k, TUMBLE(ts, INTERVAL '1' SECOND);\n"
        + "CREATE VIEW named AS SELECT k FROM s GROUP BY k, TUMBLE(ts, INTERVAL '1' SECOND);\n"
        + "SELECT k FROM s GROUP BY k, TUMBLE(ts, INTERVAL '2' SECOND);"
    )
    assert [q.name for q in program.queries] == ["query_1", "named", "query_2"]


def test_a_file_without_queries_is_a_positioned_error():
    with pytest.raises(WqlSemanticError, match="at least one query") as info:
        compile_source(SRC)
    assert info.value.span is not None
