"""The emit forms in the compiler: plan, operator configuration, explain, errors.

Every invalid combination is one positioned error with its code (``@``
marks where it must point: ``tests/compiler/mistakes.py``).
"""

from __future__ import annotations

import pytest

from tests.compiler.mistakes import SOURCE, one_error
from wql.compiler import compile_source
from wql.compiler import plan as P
from wql.compiler.backends.operator import build_operator
from wql.compiler.explain import explain
from wql.errors import ErrorCode, WqlError
from wql.runtime import triggers as TR


def query(tail: str, window: str = "TUMBLE(ts, INTERVAL '1' MINUTE)", select: str = "") -> str:
    items = select or "user_id, COUNT(*) AS n"
    return SOURCE + f"SELECT {items}\nFROM clicks\nGROUP BY user_id, {window}\n{tail};\n"


def compiled(text: str, engine: str = "auto") -> P.Query:
    return compile_source(text, "q.wql", engine=engine).queries[0]


# --------------------------------------------------------------------------- accumulation


@pytest.mark.parametrize(
    ("emit", "discarding", "per_timing"),
    [
        ("EMIT ACCUMULATING", (), False),
        ("EMIT DISCARDING", ("EARLY", "ON_TIME", "LATE"), False),
        ("EMIT LATE DISCARDING, EARLY ACCUMULATING", ("LATE",), True),
        ("EMIT ON_TIME DISCARDING, LATE DISCARDING", ("ON_TIME", "LATE"), True),
    ],
)
def test_accumulation_in_the_plan(emit, discarding, per_timing):
    q = compiled(query(f"TRIGGER WATERMARK WITH EARLY COUNT(2)\n{emit}"))
    assert q.accumulation == P.Accumulation(discarding, per_timing)


def test_accumulation_becomes_the_runtime_trigger():
    def trigger(emit: str):
        return build_operator(compiled(query(f"TRIGGER COUNT(3)\n{emit}"))).config.trigger

    assert trigger("EMIT ACCUMULATING") == TR.CountTrigger(3)
    assert trigger("EMIT DISCARDING") == TR.PurgingTrigger(TR.CountTrigger(3))
    assert trigger("EMIT EARLY DISCARDING") == TR.PanePurgingTrigger(
        TR.CountTrigger(3), frozenset({"EARLY"}), True
    )


def test_no_emit_changes_nothing():
    q = compiled(query("TRIGGER COUNT(3)"))
    assert q.accumulation is None
    assert build_operator(q).config.trigger == TR.CountTrigger(3)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (query("EMIT DISCARDING, @LATE ACCUMULATING"), "twice how LATE panes"),
        (query("EMIT LATE DISCARDING, @LATE ACCUMULATING"), "twice how LATE panes"),
        (query("EMIT EARLY DISCARDING, @ACCUMULATING"), "twice how every pane"),
        (query("TRIGGER PURGING COUNT(2)\nEMIT @EARLY ACCUMULATING"), "PURGING"),
        (query("TRIGGER ANY(COUNT(2), PURGING WATERMARK)\nEMIT @DISCARDING"), "PURGING"),
        (query("EMIT @ACCUMULATING", window="COUNT_WINDOW(5)"), "PURGING"),
        (query("TRIGGER COUNT(2)\nEMIT @LATE DISCARDING", window="GLOBAL()"), "no end"),
    ],
)
def test_accumulation_mistakes_are_positioned(text, message):
    err = one_error(text)
    assert err.code is ErrorCode.EMIT and message in err.message


def test_accumulation_explained_and_native_where_it_changes_nothing():
    q = compiled(query("EMIT DISCARDING"))
    # the default trigger, no lateness: each window fires once, whatever a pane keeps
    assert q.engine.engine == "native"
    text = explain(compile_source(query("TRIGGER COUNT(2)\nEMIT EARLY DISCARDING")))
    assert (
        "  accumulation (EMIT): EARLY discarding, ON_TIME accumulating, LATE accumulating" in text
    )


# --------------------------------------------------------------------------- ON UPDATE


def test_every_on_update_in_the_plan_and_the_runtime():
    q = compiled(
        query("ALLOWED LATENESS INTERVAL '30' SECOND\nTRIGGER EVERY INTERVAL '10' SECOND ON UPDATE")
    )
    assert q.effective_trigger == P.EveryTrigger(10_000, P.TimeDomain.EVENT, on_update=True)
    # bounded by the window's end, then its cleanup (lateness 30 s)
    assert build_operator(q).config.trigger == TR.OnUpdateTrigger(10_000, True, True, 30_000)
    # on the other clock the window's end does not bound it
    q = compiled(query("TRIGGER EVERY INTERVAL '5' SECOND OF PROCESSING TIME ON UPDATE"))
    assert build_operator(q).config.trigger == TR.OnUpdateTrigger(5_000, False, False, 0)
    # a window without an end: GLOBAL() (OF ... TIME is required, as for EVERY)
    q = compiled(query("TRIGGER EVERY INTERVAL '5' SECOND OF EVENT TIME ON UPDATE", "GLOBAL()"))
    assert build_operator(q).config.trigger == TR.OnUpdateTrigger(5_000, True, False, 0)
    text = explain(compile_source(query("TRIGGER EVERY INTERVAL '10' SECOND ON UPDATE")))
    assert "EVERY 10 s OF EVENT TIME ON UPDATE (fire at the next 10 s boundary" in text


def test_every_on_update_on_sessions_merges_and_is_not_native():
    q = compiled(
        query("TRIGGER EVERY INTERVAL '1' SECOND ON UPDATE", "SESSION(ts, INTERVAL '1' MINUTE)")
    )
    assert q.effective_trigger.mergeable
    assert q.engine.engine == "operator"
    with pytest.raises(WqlError) as info:
        compiled(query("TRIGGER @EVERY INTERVAL '1' SECOND ON UPDATE").replace("@", ""), "native")
    assert info.value.code is ErrorCode.NOT_NATIVE
    assert "TRIGGER EVERY 1 s OF EVENT TIME ON UPDATE at line 10" in info.value.message


def test_every_on_update_without_a_clock_is_positioned():
    err = one_error(query("TRIGGER @EVERY INTERVAL '1' SECOND ON UPDATE", "COUNT_WINDOW(3)"))
    assert err.code is ErrorCode.NOT_FOR_WINDOW


# --------------------------------------------------------------------------- changelog

CHANGELOG_SELECT = "user_id, window_start, window_end, pane_index, COUNT(*) AS n"


def test_changelog_in_the_plan_and_the_output_schema():
    q = compiled(query("EMIT CHANGELOG", select=CHANGELOG_SELECT))
    assert q.changelog == P.Changelog()
    assert [c.name for c in q.output_schema] == [
        "op",
        "user_id",
        "window_start",
        "window_end",
        "pane_index",
        "n",
    ]
    assert q.changelog_key == ("user_id", "window_start", "window_end")
    assert build_operator(q).config.changelog
    assert q.engine.engine == "operator"
    text = explain(compile_source(query("EMIT CHANGELOG", select=CHANGELOG_SELECT)))
    assert "a row is (user_id, window_start, window_end)" in text
    assert "    op STRING = the change: +I, -U, +U or -D" in text


def test_changelog_of_windows_without_an_end_is_keyed_by_the_keys_alone():
    q = compiled(
        query("TRIGGER COUNT(3)\nEMIT CHANGELOG", "GLOBAL()", "user_id AS u, pane_index, COUNT(*)")
    )
    assert q.changelog_key == ("u",)


def test_changelog_forced_native_names_the_clause():
    text = query("@EMIT CHANGELOG", select=CHANGELOG_SELECT)
    with pytest.raises(WqlError) as info:
        compiled(text.replace("@", ""), "native")
    assert info.value.code is ErrorCode.NOT_NATIVE
    assert (info.value.line, info.value.column) == (10, 6)
    assert "EMIT CHANGELOG at line 10 needs the operator engine" in info.value.message


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (query("EMIT @CHANGELOG"), "needs window_start, window_end, pane_index in the SELECT"),
        (
            query("EMIT @CHANGELOG", select="window_start, window_end, pane_index, COUNT(*)"),
            "needs user_id in the SELECT",
        ),
        (
            query(
                "EMIT @CHANGELOG",
                select="user_id, window_start, window_end + INTERVAL '1' SECOND AS e, pane_index",
            ),
            "needs window_end",
        ),
        (query("EMIT CHANGELOG, @CHANGELOG", select=CHANGELOG_SELECT), "CHANGELOG twice"),
        (
            query("EMIT CHANGELOG", select=CHANGELOG_SELECT + ", COUNT(*) AS @op"),
            "puts the column 'op' first",
        ),
        (
            query("EMIT CHANGELOG", select=CHANGELOG_SELECT + ", @RAND() AS r"),
            "RAND() , which is not deterministic".replace(" ,", ","),
        ),
    ],
)
def test_changelog_mistakes_are_positioned(text, message):
    err = one_error(text)
    assert err.code is ErrorCode.EMIT and message in err.message


# --------------------------------------------------------------------------- idle sources

IDLE = (
    SOURCE.replace(
        "INTERVAL '5' SECOND\n)", "INTERVAL '5' SECOND IDLE AFTER INTERVAL '1' MINUTE\n)"
    )
    .replace("path = 'clicks.csv'", "path = 'clicks.csv', processing_time = 'pt'")
    .replace("ts      TIMESTAMP,", "ts      TIMESTAMP,\n    pt      BIGINT,")
)

IDLE_QUERY = (
    "SELECT user_id, COUNT(*) AS n FROM clicks GROUP BY user_id, TUMBLE(ts, INTERVAL '1' MINUTE);"
)


def test_idle_after_in_the_plan_explain_and_engine_choice():
    text = IDLE + IDLE_QUERY
    q = compiled(text)
    assert q.source.event_time.idle_ms == 60_000
    assert q.engine.engine == "operator"
    assert "IDLE AFTER 1 min at line 6 needs the operator engine" in q.engine.reasons[0].text
    assert "idle after 1 min without a row" in explain(compile_source(text))
    # FROM's WATERMARK FOR takes it too
    from_clause = SOURCE + (
        "SELECT user_id, COUNT(*) AS n FROM clicks "
        "WATERMARK FOR ts AS ts IDLE AFTER INTERVAL '10' SECOND "
        "GROUP BY user_id, TUMBLE(ts, INTERVAL '1' MINUTE);"
    )
    assert compiled(from_clause).source.event_time.idle_ms == 10_000


def test_idle_after_must_be_positive():
    err = one_error(
        IDLE.replace("IDLE AFTER INTERVAL '1'", "IDLE AFTER @INTERVAL '0'") + IDLE_QUERY
    )
    assert err.code is ErrorCode.OUT_OF_RANGE and "IDLE AFTER must be > 0" in err.message


def test_idle_after_forced_native_names_the_clause():
    text = IDLE + IDLE_QUERY
    with pytest.raises(WqlError) as info:
        compiled(text, "native")
    assert info.value.code is ErrorCode.NOT_NATIVE
    assert (info.value.line, info.value.column) == (6, text.splitlines()[5].index("IDLE") + 1)
