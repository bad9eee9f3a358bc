"""Golden explain files: every ``golden/*.wql`` compiles to exactly ``golden/*.explain``,
and planned for streaming sources (``wql explain --stream``) to ``golden/*.stream.explain``.

A file that cannot be planned for streams (a pipeline) has its rendered
errors as its ``.stream.explain``.

Regenerate after an intended change with ``UPDATE_GOLDEN=1 .venv/bin/pytest
tests/compiler/test_golden.py`` and review the diff like code.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from wql.compiler import compile_source
from wql.compiler.explain import explain
from wql.errors import WqlError

GOLDEN = Path(__file__).parent / "golden"
CASES = sorted(GOLDEN.glob("*.wql"))


def test_there_are_golden_cases():
    assert len(CASES) >= 4


@pytest.mark.parametrize("streaming", [False, True], ids=["batch", "stream"])
@pytest.mark.parametrize("path", CASES, ids=[p.stem for p in CASES])
def test_explain_matches_golden(path: Path, streaming: bool):
    text = path.read_text()
    try:
        got = explain(compile_source(text, path.name, streaming=streaming))
    except WqlError as e:
        # what cannot run on a stream (pipelines) is golden as its rendered errors
        got = "errors:\n" + e.render(color=False) + "\n"
    expected_path = path.with_suffix(".stream.explain" if streaming else ".explain")
    if os.environ.get("UPDATE_GOLDEN") == "1" or not expected_path.exists():
        expected_path.write_text(got)
        if os.environ.get("UPDATE_GOLDEN") != "1":
            pytest.fail(f"{expected_path.name} did not exist; written, review it and re-run")
    assert got == expected_path.read_text()


@pytest.mark.parametrize("path", CASES, ids=[p.stem for p in CASES])
def test_explain_is_deterministic_and_format_independent(path: Path):
    text = path.read_text()
    assert explain(compile_source(text, path.name)) == explain(compile_source(text, path.name))
    # Spans are not part of the plan: extra blank lines and comments change nothing.
    shifted = "-- leading comment\n\n" + text.replace("\n", "\n\n")
    assert compile_source(shifted).queries == compile_source(text).queries
