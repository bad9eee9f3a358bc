"""Whatever clauses are combined, the compiler answers with a plan or positioned WqlErrors.

Never a raw traceback: every failure is a WqlError whose errors all carry a span
inside the text, and every success explains deterministically.
"""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from wql.compiler import compile_source
from wql.compiler.explain import explain
from wql.errors import WqlError

SOURCES = (
    "CREATE SOURCE c (k STRING, v DOUBLE, n BIGINT, s STRING, ts TIMESTAMP, "
    "WATERMARK FOR ts AS ts - INTERVAL '1' SECOND);\n"
    "CREATE SOURCE p (k STRING, v DOUBLE, n BIGINT, s STRING, ts TIMESTAMP);\n"
)

WINDOWS = [
    "TUMBLE(ts, INTERVAL '1' MINUTE)",
    "TUMBLE(ts, INTERVAL '0' MINUTE)",
    "HOP(ts, INTERVAL '10' SECOND, INTERVAL '1' MINUTE)",
    "HOP(ts, INTERVAL '1' MINUTE, INTERVAL '10' SECOND, INTERVAL '2' MINUTE)",
    "CUMULATE(ts, INTERVAL '10' SECOND, INTERVAL '1' MINUTE)",
    "CUMULATE(ts, INTERVAL '7' SECOND, INTERVAL '1' MINUTE)",
    "SESSION(ts, INTERVAL '30' SECOND)",
    "SESSION(ts, GAP n * INTERVAL '1' SECOND)",
    "SESSION(ts, GAP n * 1000)",
    "SESSION(ts, GAP s)",
    "SESSION(PROCTIME(), INTERVAL '5' SECOND)",
    "TUMBLE(PROCTIME(), INTERVAL '5' SECOND)",
    "COUNT_WINDOW(3)",
    "COUNT_WINDOW(3, 1)",
    "COUNT_WINDOW(0)",
    "GLOBAL()",
]
TRIGGERS = [
    "",
    "TRIGGER WATERMARK",
    "TRIGGER PROCESSING TIME",
    "TRIGGER COUNT(2)",
    "TRIGGER COUNT(0)",
    "TRIGGER EVERY INTERVAL '5' SECOND",
    "TRIGGER EVERY INTERVAL '5' SECOND OF PROCESSING TIME",
    "TRIGGER DELTA(v, 2.5)",
    "TRIGGER DELTA(s, 1)",
    "TRIGGER PURGING COUNT(3)",
    "TRIGGER ANY(COUNT(2), WATERMARK)",
    "TRIGGER ALL(COUNT(2), DELTA(n, 1))",
    "TRIGGER TIMEOUT(COUNT(5), INTERVAL '1' MINUTE)",
    "TRIGGER WATERMARK WITH EARLY COUNT(1) LATE COUNT(1)",
]
EVICTORS = [
    "",
    "EVICT COUNT(2)",
    "EVICT TIME(INTERVAL '1' SECOND) AFTER",
    "EVICT DELTA(v, 3) BEFORE",
]
ITEMS = [
    "k",
    "s",
    "window_start",
    "window_end",
    "pane_index",
    "pane_timing",
    "COUNT(*)",
    "SUM(v) AS total",
    "SUM(s)",
    "AVG(n) / 2 AS half",
    "MAX(nope)",
    "COUNT(DISTINCT s)",
    "FIRST_VALUE(v)",
    "COLLECT_LIST(s) AS l",
    "SUM(MAX(v))",
    "upper(k) AS uk",
    "CASE WHEN COUNT(*) > 2 THEN 'big' ELSE 'small' END AS size",
]
HAVINGS = ["", "HAVING COUNT(*) > 1", "HAVING v > 1", "HAVING SUM(v)"]
LATENESS = ["", "ALLOWED LATENESS INTERVAL '1' MINUTE"]
LATE = ["", "LATE DATA TO late_rows"]


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    source=st.sampled_from(["c", "p"]),
    keys=st.sampled_from(["k, ", "", "k, upper(s), ", "SUM(v), "]),
    window=st.sampled_from(WINDOWS),
    trigger=st.sampled_from(TRIGGERS),
    evictor=st.sampled_from(EVICTORS),
    items=st.lists(st.sampled_from(ITEMS), min_size=1, max_size=4, unique=True),
    where=st.sampled_from(["", "WHERE v > 0", "WHERE v", "WHERE COUNT(*) > 1"]),
    having=st.sampled_from(HAVINGS),
    lateness=st.sampled_from(LATENESS),
    late=st.sampled_from(LATE),
    engine=st.sampled_from(["auto", "operator", "native"]),
)
def test_compile_gives_a_plan_or_positioned_errors(
    source, keys, window, trigger, evictor, items, where, having, lateness, late, engine
):
    query = (
        f"SELECT {', '.join(items)} FROM {source} {where} GROUP BY {keys}{window} "
        f"{having} {lateness} {trigger} {evictor} {late};"
    )
    text = SOURCES + query
    try:
        program = compile_source(text, "fuzz.wql", engine=engine)
    except WqlError as err:
        errors = getattr(err, "errors", (err,))
        for e in errors:
            assert e.span is not None, e.message
            assert 0 <= e.span.start <= e.span.end <= len(text)
            assert e.source == text and e.filename == "fuzz.wql"
            assert e.render()
        return
    (q,) = program.queries
    assert q.engine is not None
    assert engine == "auto" or q.engine.engine == engine
    assert explain(program) == explain(compile_source(text, "fuzz.wql", engine=engine))
