"""Long pipelines: what the compiler does per view stays constant as the chain grows.

The figures are in docs/benchmarks.md ("Long pipelines", bench/compile_large.py);
these tests pin the structure that makes them linear: a chain longer than
Python's recursion limit compiles, every stage's operator plan is built once
when the planner checks N stream pipelines, and the texts naming a pipeline
stay short.
"""

from __future__ import annotations

import sys

import pytest

from wql.compiler import compile_source, stream_plan
from wql.compiler import plan as P
from wql.compiler.explain import explain

SOURCE = (
    "CREATE SOURCE s (k STRING, v BIGINT, ts TIMESTAMP, "
    "WATERMARK FOR ts AS ts - INTERVAL '1' SECOND);\n"
)
FIRST = (
    "CREATE VIEW v0 AS SELECT k, window_time AS t, COUNT(*) AS n FROM s "
    "GROUP BY k, TUMBLE(ts, INTERVAL '1' MINUTE);\n"
)
NEXT = (
    "CREATE VIEW v{i} AS SELECT k, window_time AS t, SUM(n) AS n FROM v{up} "
    "GROUP BY k, TUMBLE(t, INTERVAL '1' MINUTE);\n"
)


def chain(n: int) -> str:
    return SOURCE + FIRST + "".join(NEXT.format(i=i, up=i - 1) for i in range(1, n))


def reference_pipeline(program: P.Program, q: P.Stage) -> tuple[P.Stage, ...]:
    """Program.pipeline as it was written first: a recursive walk, each stage once."""
    out: list[P.Stage] = []

    def visit(stage: P.Stage) -> None:
        for s in P.inputs_of(stage):
            if s.view is not None:
                visit(next(x for x in (*program.queries, *program.views) if x.name == s.view))
        if all(x.name != stage.name for x in out):
            out.append(stage)

    visit(q)
    return tuple(out)


def test_a_chain_longer_than_the_recursion_limit_compiles_and_explains():
    n = sys.getrecursionlimit() + 200
    program = compile_source(chain(n), streaming=True)
    last = program.queries[-1]
    assert [q.name for q in program.pipeline(last)] == [f"v{i}" for i in range(n)]
    assert [s.name for s in program.root_sources(last)] == ["s"]
    text = explain(program)
    assert f"pipeline: source s -> v0 -> v1 -> v2 -> v3 -> ({n - 8} more) -> " in text
    assert f"v{n - 4} -> v{n - 3} -> v{n - 2} -> v{n - 1}\n" in text


def test_the_planner_builds_each_stream_stages_operator_plan_once(monkeypatch):
    built: list[str] = []
    build = stream_plan.build_stage

    def counting(stage, *args, **kwargs):
        built.append(stage.name)
        return build(stage, *args, **kwargs)

    monkeypatch.setattr(stream_plan, "build_stage", counting)
    n = 60
    compile_source(chain(n), streaming=True)
    # every view is in N - i pipelines, and each pipeline is checked: each plan once
    assert sorted(built) == sorted(f"v{i}" for i in range(n))


@pytest.mark.parametrize(
    "text",
    [
        chain(5),
        # a join of two pipelines sharing their first view: each stage once, upstream first
        SOURCE
        + FIRST
        + "CREATE VIEW a1 AS SELECT k, window_start, window_end, SUM(n) AS n FROM v0 "
        "GROUP BY k, TUMBLE(t, INTERVAL '1' HOUR);\n"
        + "CREATE VIEW b1 AS SELECT k, window_start, window_end, COUNT(*) AS m FROM v0 "
        "GROUP BY k, TUMBLE(t, INTERVAL '1' HOUR);\n"
        + "CREATE VIEW j AS SELECT a.k, a.n, b.m FROM a1 AS a JOIN b1 AS b "
        "ON a.window_start = b.window_start AND a.window_end = b.window_end "
        "AND a.k = b.k;\n",
    ],
)
def test_pipelines_and_root_sources_equal_the_recursive_walk(text):
    program = compile_source(text)
    for q in program.queries:
        assert program.pipeline(q) == reference_pipeline(program, q)
        roots = {s.name for st in reference_pipeline(program, q) for s in P.inputs_of(st)}
        assert {s.name for s in program.root_sources(q)} == roots - {
            x.name for x in program.queries
        }


def test_a_short_pipeline_is_named_in_full():
    program = compile_source(chain(P.CHAIN_TEXT_LIMIT))
    names = " -> ".join(f"v{i}" for i in range(P.CHAIN_TEXT_LIMIT))
    assert P.chain_text(program.pipeline(program.queries[-1])) == names
