"""Every example runs and gives its expected outputs (derived by hand, see each .wql's comment).

Each example runs once per engine request (the session's ``example_run``
fixture, tests/spark/conftest.py) and the tests read what that run gave.
"""

from __future__ import annotations

import pytest

import wql
from tests.spark.examples_helpers import (
    EXAMPLES,
    example_files,
    expected_outputs,
    pipeline_example_files,
)
from wql.compiler import plan as P

pytestmark = pytest.mark.spark

ALL_EXAMPLES = example_files() + pipeline_example_files()


def test_every_example_has_expected_outputs():
    stems = {p.stem for p in example_files()}
    assert "clickstream_sessions" in stems and len(stems) >= 7
    assert len({p.stem for p in ALL_EXAMPLES}) == len(ALL_EXAMPLES), "example names collide"
    for path in ALL_EXAMPLES:
        compiled = wql.compile_file(path)
        names = set(compiled.queries)
        names |= {q.late_output for q in compiled.program.queries if q.late_output}
        assert set(expected_outputs(path.stem)) == names, path.stem


@pytest.mark.parametrize("path", pipeline_example_files(), ids=lambda p: p.stem)
def test_pipeline_example_plans_for_a_stream(path):
    # a chain runs on a stream in the pipeline processor, a window join in the join processor
    program = wql.compile_file(path, streaming=True).program
    for q in program.queries:
        if isinstance(q, P.WindowJoin):
            assert any("join processor" in r.message for r in q.engine.reasons), q.name
        elif q.source.view is not None:
            assert any("pipeline processor" in r.message for r in q.engine.reasons), q.name


@pytest.mark.parametrize("path", ALL_EXAMPLES, ids=lambda p: p.stem)
def test_example_gives_expected_rows(example_run, path):
    run = example_run(path)
    expected = expected_outputs(path.stem)
    for name, (header, rows) in expected.items():
        got_header, got_rows = run.outputs[name]
        assert got_header == header, name
        assert got_rows == rows, name
    for name, counters in run.counters.items():
        assert counters["rows_out"] == len(expected[name][1])
        assert_every_row_counted(counters)


def assert_every_row_counted(c: dict) -> None:
    """rows in = rows in a firing + late + filtered + dropped (docs/running.md, "Counters")."""
    accounted = (
        c["rows_fired"] + c["late_rows"] + c.get("rows_filtered", 0) + sum(c["dropped"].values())
    )
    assert c["rows_in"] == accounted, c


@pytest.mark.parametrize("path", ALL_EXAMPLES, ids=lambda p: p.stem)
def test_example_counters_on_the_operator_engine(example_run, path):
    # The native examples again, forced onto the operator engine: the same identity.
    run = example_run(path, "operator")
    for name, counters in run.counters.items():
        assert run.engines[name] == "operator"
        assert_every_row_counted(counters)


def test_count_window_rows_that_never_fire_are_counted(example_run):
    # data/sensor.csv: s1 has 6 readings, s2 has 3.
    # every_three (COUNT_WINDOW(3)): s1 fires twice, s2 once: every row is in a firing.
    # last_four (COUNT_WINDOW(4, 2)): s1 fires at its 2nd, 4th, 6th reading (every row
    # in a firing); s2 fires at its 2nd reading, its 3rd (30.0) never fires.
    run = example_run(EXAMPLES / "count_windows.wql")
    three = run.counters["every_three"]
    assert (three["rows_in"], three["rows_fired"], three["dropped"]) == (9, 9, {})
    four = run.counters["last_four"]
    assert (four["rows_in"], four["rows_fired"]) == (9, 8)
    assert four["dropped"] == {"in no firing": 1}


def test_example_counters_account_for_every_row(example_run):
    c = example_run(EXAMPLES / "early_late_firings.wql").only
    assert c is not None
    assert c["engine"] == "operator"
    # 7 views: 6 in windows, 1 too late (no LATE DATA TO, so dropped and counted)
    assert c["rows_in"] == 7 and c["dropped"] == {"late": 1} and c["late_rows"] == 0
    assert c["rows_out"] == 6
