"""Every example runs and gives its expected outputs (derived by hand, see each .wql's comment).

Each example runs once per engine request (the session's ``example_run``
fixture, tests/spark/conftest.py) and the tests read what that run gave.
"""

from __future__ import annotations

import pytest

import wql
from tests.spark.examples_helpers import (
    EXAMPLES,
    EXPECTED,
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


def test_cli_csv_output_is_the_expected_files_but_for_row_order(spark, tmp_path):
    """`wql run --format csv` writes the text of examples/expected/ (timestamps included,
    milliseconds when not zero): the files differ by row order only."""
    from wql.cli import main

    paths = [
        EXAMPLES / "clickstream_sessions.wql",
        EXAMPLES / "pipelines" / "late_panes.wql",
        EXAMPLES / "live_sessions.wql",
    ]
    out = tmp_path / "out"
    assert main(["run", *map(str, paths), "--output", str(out), "--format", "csv"]) == 0
    for path in paths:
        for expected_file in sorted((EXPECTED / path.stem).glob("*.csv")):
            header, *rows = expected_file.read_text().splitlines()
            parts = sorted((out / path.stem / expected_file.stem).glob("part-*.csv"))
            got_rows: list[str] = []
            for part in parts:
                got_header, *lines = part.read_text().splitlines()
                assert got_header == header, expected_file
                got_rows += lines
            assert sorted(got_rows) == sorted(rows), expected_file


def test_cli_show_keeps_a_changelogs_emission_order(spark, capsys):
    """--show on EMIT CHANGELOG: each window's changes together, in the order emitted
    (+I first, then -U/+U pairs by pane, -D last), not sorted by op."""
    from wql.cli import main

    assert main(["run", str(EXAMPLES / "live_sessions.wql"), "--show", "50"]) == 0
    table = [
        [cell.strip() for cell in line.strip("|").split("|")]
        for line in capsys.readouterr().out.splitlines()
        if line.startswith("|")
    ]
    header, rows = table[0], table[1:]
    assert header[:2] == ["op", "user_id"]
    _, expected = expected_outputs("live_sessions")["live_sessions"]
    assert sorted(tuple(r) for r in rows) == expected
    op, pane = header.index("op"), header.index("pane_index")
    windows: dict[tuple[str, ...], list[tuple[str, int]]] = {}
    seen: list[tuple[str, ...]] = []
    for r in rows:
        window = (r[1], r[2], r[3])
        if not seen or seen[-1] != window:
            assert window not in windows, f"{window} shown in two places"
            seen.append(window)
        windows.setdefault(window, []).append((r[op], int(r[pane])))
    for window, changes in windows.items():
        ops = [o for o, _ in changes]
        assert ops[0] == "+I", window
        # a row, then its retraction (-U, followed by the next pane's +U) or its deletion
        for (o1, p1), (o2, p2) in zip(changes, changes[1:], strict=False):
            if o1 in ("+I", "+U"):
                assert o2 in ("-U", "-D") and p2 == p1, window
            else:
                assert o1 == "-U" and o2 == "+U" and p2 > p1, window
        assert "-D" not in ops[:-1], window
