"""ONCE, UNTIL and SEQUENCE through the front end: parse, `wql fmt`, bind, plan, explain.

Runtime semantics: tests/runtime/test_finishing.py; on Spark in batch and on
streams: tests/spark/test_finishing_triggers.py.
"""

from __future__ import annotations

import pytest

from wql.compiler import check_source, compile_source
from wql.compiler import plan as P
from wql.compiler.explain import trigger_text
from wql.errors import ErrorCode
from wql.grammar import ast
from wql.grammar.formatter import format_script
from wql.grammar.parser import parse

from .mistakes import SOURCE, one_error


def query(trigger: str, window: str = "TUMBLE(ts, INTERVAL '1' MINUTE)") -> str:
    return (
        SOURCE
        + "SELECT user_id, COUNT(*) AS n FROM clicks\n"
        + f"GROUP BY user_id, {window}\n"
        + "ALLOWED LATENESS INTERVAL '10' SECOND\n"
        + f"TRIGGER {trigger};\n"
    )


@pytest.mark.parametrize(
    ("written", "canonical", "node"),
    [
        ("once count(3)", "ONCE COUNT(3)", ast.OnceTrigger),
        ("ONCE  PURGING WATERMARK", "ONCE PURGING WATERMARK", ast.OnceTrigger),
        ("until(COUNT(2),once count(5))", "UNTIL(COUNT(2), ONCE COUNT(5))", ast.UntilTrigger),
        (
            "Sequence(ONCE COUNT(2), until(EVERY INTERVAL '5' SECOND, ONCE WATERMARK))",
            "SEQUENCE(ONCE COUNT(2), UNTIL(EVERY INTERVAL '5' SECOND, ONCE WATERMARK))",
            ast.SequenceTrigger,
        ),
        (
            "PURGING SEQUENCE(ONCE COUNT(2), SEQUENCE(ONCE COUNT(1), ONCE WATERMARK), COUNT(1))",
            "PURGING SEQUENCE(ONCE COUNT(2), SEQUENCE(ONCE COUNT(1), ONCE WATERMARK), COUNT(1))",
            ast.PurgingTrigger,
        ),
    ],
)
def test_parse_and_fmt_round_trip(written, canonical, node):
    script = parse(query(written))
    q = script.statements[1]
    assert isinstance(q, ast.Query) and isinstance(q.trigger.trigger, node)
    text = format_script(script)
    assert f"TRIGGER {canonical};" in text
    assert format_script(parse(text)) == text  # idempotent
    assert parse(text) == script  # spans aside, the same tree


def test_spans_start_at_the_keyword():
    text = query("SEQUENCE(ONCE COUNT(2), UNTIL(COUNT(1), ONCE WATERMARK))")
    trigger = parse(text).statements[1].trigger.trigger
    seq_span = trigger.span
    assert text[seq_span.start : seq_span.end].startswith("SEQUENCE(")
    once, until = trigger.triggers
    assert text[once.span.start : once.span.end] == "ONCE COUNT(2)"
    assert text[until.span.start : until.span.end] == "UNTIL(COUNT(1), ONCE WATERMARK)"


def test_binds_to_plan_nodes_and_runs_on_the_operator_engine():
    program = compile_source(query("SEQUENCE(ONCE COUNT(2), UNTIL(COUNT(1), ONCE WATERMARK))"))
    q = program.queries[0]
    t = q.trigger
    assert isinstance(t, P.SequenceTrigger) and t.finishes and not t.mergeable
    assert isinstance(t.triggers[0], P.OnceTrigger)
    assert isinstance(t.triggers[1], P.UntilTrigger)
    assert q.engine.engine == "operator"
    assert any(
        "TRIGGER SEQUENCE(" in r.text and "closed window" in r.text for r in q.engine.reasons
    )
    assert trigger_text(t).spelling == "SEQUENCE(ONCE COUNT(2), UNTIL(COUNT(1), ONCE WATERMARK))"


def test_once_and_until_merge_on_sessions():
    window = "SESSION(ts, INTERVAL '30' SECOND)"
    for trigger in ("ONCE COUNT(3)", "UNTIL(COUNT(2), ONCE WATERMARK)"):
        assert check_source(query(trigger, window)) == []


def test_forcing_native_names_the_trigger():
    with pytest.raises(Exception) as info:
        compile_source(query("ONCE WATERMARK"), engine="native")
    assert info.value.code is ErrorCode.NOT_NATIVE
    assert "ONCE WATERMARK" in str(info.value)


MISTAKES = [
    ("sequence of one", "@SEQUENCE(ONCE COUNT(2))", ErrorCode.FINISHING_TRIGGER),
    (
        "a child that never finishes",
        "SEQUENCE(@COUNT(2), ONCE WATERMARK)",
        ErrorCode.FINISHING_TRIGGER,
    ),
    (
        "a nested child that never finishes",
        "SEQUENCE(ONCE COUNT(1), @PURGING COUNT(2), COUNT(1))",
        ErrorCode.FINISHING_TRIGGER,
    ),
    ("ONCE inside ANY", "ANY(COUNT(3), @ONCE COUNT(2))", ErrorCode.FINISHING_TRIGGER),
    ("UNTIL inside ALL", "ALL(@UNTIL(COUNT(1), COUNT(2)), COUNT(3))", ErrorCode.FINISHING_TRIGGER),
    (
        "SEQUENCE inside TIMEOUT",
        "TIMEOUT(@SEQUENCE(ONCE COUNT(1), COUNT(1)), INTERVAL '1' SECOND)",
        ErrorCode.FINISHING_TRIGGER,
    ),
    (
        "ONCE as an early trigger",
        "WATERMARK WITH EARLY @ONCE COUNT(2)",
        ErrorCode.FINISHING_TRIGGER,
    ),
    (
        "ONCE as a late trigger",
        "WATERMARK WITH LATE PURGING @ONCE COUNT(2)",
        ErrorCode.FINISHING_TRIGGER,
    ),
    ("a bad count inside ONCE", "ONCE COUNT(@0)", ErrorCode.OUT_OF_RANGE),
]


@pytest.mark.parametrize(("case", "trigger", "code"), MISTAKES, ids=[m[0] for m in MISTAKES])
def test_misuse_is_one_positioned_error(case, trigger, code):
    err = one_error(query(trigger))
    assert err.code is code, err.message


def test_sequence_on_sessions_is_refused_at_the_sequence():
    err = one_error(
        query("@SEQUENCE(ONCE COUNT(2), ONCE WATERMARK)", "SESSION(ts, INTERVAL '30' SECOND)")
    )
    assert err.code is ErrorCode.NOT_MERGEABLE
    assert "SEQUENCE" in err.message


def test_both_children_of_until_report_their_errors():
    errors = check_source(query("UNTIL(COUNT(0), DELTA(nope, 1))"))
    assert len(errors) == 2
