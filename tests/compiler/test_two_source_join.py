"""Window joins of two sources: what binds, and each refusal that remains, positioned.

docs/language.md, "Window joins of two sources": the rows of two sources
interleave by a shared ``arrival_order`` (of one kind) or by event time; a
source with an idle rule (``IDLE AFTER`` with a ``processing_time``
column) is refused; on a stream the join runs in the join processor, each
source with its own watermark (an idle source refused there).
"""

from __future__ import annotations

import pytest

from tests.compiler.mistakes import mistake, one_error, unmark
from wql.compiler import check_source, compile_source
from wql.compiler import plan as P
from wql.compiler.explain import explain
from wql.errors import ErrorCode, WqlError

VALID = """CREATE SOURCE clicks (user_id STRING, ts TIMESTAMP, arrival BIGINT,
    WATERMARK FOR ts AS ts - INTERVAL '1' SECOND) WITH (arrival_order = 'arrival');
CREATE SOURCE imps (user_id STRING, ts TIMESTAMP, arrival BIGINT, at TIMESTAMP,
    WATERMARK FOR ts AS ts - INTERVAL '2' SECOND) WITH (arrival_order = 'arrival');

CREATE VIEW shown AS
SELECT user_id, window_start, window_end, COUNT(*) AS n
FROM imps
GROUP BY user_id, TUMBLE(ts, INTERVAL '10' SECOND);

SELECT c.user_id, c.ts, s.n
FROM TABLE(TUMBLE(TABLE clicks, DESCRIPTOR(ts), INTERVAL '10' SECOND)) AS c
JOIN shown AS s
    ON c.window_start = s.window_start AND c.window_end = s.window_end AND c.user_id = s.user_id;
"""

_RIGHT = ("JOIN shown", "JOIN @shown")

CASES = [
    (
        "one_source_in_arrival_order",
        "'2' SECOND) WITH (arrival_order = 'arrival');",
        "'2' SECOND);",
        "declares arrival_order = 'arrival' while 'imps' declares none",
    ),
    (
        "arrival_orders_of_two_kinds",
        "'2' SECOND) WITH (arrival_order = 'arrival');",
        "'2' SECOND) WITH (arrival_order = 'at');",
        "must both be integers or both timestamps: 'clicks'.arrival is BIGINT, 'imps'.at is "
        "TIMESTAMP",
    ),
]


@pytest.mark.parametrize(("case_id", "old", "new", "says"), CASES, ids=[c[0] for c in CASES])
def test_each_refusal_is_one_positioned_error(case_id, old, new, says):
    error = one_error(mistake(VALID, old, new, _RIGHT), "j.wql")
    assert error.code is ErrorCode.WINDOW_JOIN
    assert says in error.message


def test_an_idle_rule_is_refused_at_idle_after():
    text = VALID.replace(
        "'2' SECOND) WITH (arrival_order = 'arrival');",
        "'2' SECOND @IDLE AFTER INTERVAL '1' MINUTE)\n"
        "    WITH (arrival_order = 'arrival', processing_time = 'at');",
    )
    error = one_error(text, "j.wql")
    assert error.code is ErrorCode.WINDOW_JOIN and "IDLE AFTER" in error.message


def test_two_sources_bind_in_arrival_order_and_in_event_time():
    assert check_source(VALID, "j.wql") == []
    event_time = VALID.replace(" WITH (arrival_order = 'arrival');", ";")
    program = compile_source(event_time, "j.wql")
    join = program.queries[-1]
    assert isinstance(join, P.WindowJoin)
    assert [program.side_root(s.source).name for s in join.sides] == ["clicks", "imps"]
    # in event time no row is late for the join: Spark's join, natively
    assert join.engine is not None and join.engine.engine == "native"
    # in arrival order the window table's rows can be late: the operator engine
    assert compile_source(VALID, "j.wql").queries[-1].engine.engine == "operator"
    assert "sources: clicks and imps, each with its own watermark; the join's is their minimum" in (
        explain(program)
    )


def test_on_a_stream_the_join_says_how_and_refuses_an_idle_rule():
    join = compile_source(VALID, "j.wql", streaming=True).queries[-1]
    assert join.engine is not None and join.engine.engine == "operator"
    reasons = " ".join(r.message for r in join.engine.reasons)
    assert "runs on a stream in the join processor" in reasons
    assert "a window join of two sources (clicks and imps): each source streams" in reasons
    # an idle source: the idle monitor moves one source's watermark (refused at IDLE AFTER)
    text, line, column = unmark(
        VALID.replace("'2' SECOND)", "'2' SECOND @IDLE AFTER INTERVAL '1' MINUTE)")
    )
    assert check_source(text, "j.wql") == []  # batch: no processing_time column, no rule
    with pytest.raises(WqlError) as e:
        compile_source(text, "j.wql", streaming=True)
    assert (e.value.code, e.value.line, e.value.column) == (ErrorCode.UNSUPPORTED, line, column)
    assert "'imps' declares IDLE AFTER" in e.value.message
