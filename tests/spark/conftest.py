"""Fixtures of the Spark tests (the session itself is tests/conftest.py's)."""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import pytest


@pytest.fixture
def partitions(spark):
    """The operator stage in three key partitions (one by default for small inputs)."""
    spark.conf.set("spark.wql.operator.partitions", "3")
    yield
    spark.conf.unset("spark.wql.operator.partitions")


@dataclass(frozen=True)
class ExampleRun:
    """What one run of an example file gave: every output (queries and late outputs)
    as text (``rows_as_text``), per query its counters and engine, and ``only``: a
    one-query file's ``Results.counters``."""

    outputs: dict[str, tuple[list[str], list[tuple[str, ...]]]]
    counters: dict[str, dict[str, Any]]
    engines: dict[str, str]
    only: dict[str, Any] | None


def _unplanned(program):
    """``program`` without its engine choices: what runs, whoever chose the engine."""
    return replace(
        program,
        queries=tuple(replace(q, engine=None) for q in program.queries),
        views=tuple(replace(q, engine=None) for q in program.views),
    )


@pytest.fixture(scope="session")
def example_run(spark):
    """``example_run(path, engine="auto")``: the one run of an example file for that
    engine request, shared by every test that reads an example's batch results
    (test_examples, test_nexmark, test_streaming_examples). A forced operator run
    is the ``auto`` run when ``auto`` planned every query on the operator engine
    and the plans are otherwise equal (the same run)."""
    import wql
    from tests.spark.examples_helpers import rows_as_text

    done: dict[tuple[Path, str], ExampleRun] = {}

    def run(path: Path, engine: str = "auto") -> ExampleRun:
        if (path, engine) in done:
            return done[(path, engine)]
        compiled = wql.compile_file(path, engine=engine)
        if engine == "operator":
            auto = wql.compile_file(path)
            if set(auto.engine.values()) == {"operator"} and _unplanned(auto.program) == _unplanned(
                compiled.program
            ):
                done[(path, engine)] = run(path)
                return done[(path, engine)]
        results = compiled.apply(spark)
        try:
            done[(path, engine)] = ExampleRun(
                outputs={name: rows_as_text(results[name]) for name in results},
                counters={r.name: r.counters for r in results.queries},
                engines={r.name: r.engine for r in results.queries},
                only=results.counters if len(results.queries) == 1 else None,
            )
        finally:
            results.release()
        return done[(path, engine)]

    return run
