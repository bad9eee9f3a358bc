"""One mistake, one error, at its place: ``wql check`` on files with exactly one mistake.

Each case (``tests/compiler/mistakes.py``) is a small valid file with one
mistake made in it; ``@`` marks where the error must point (the marker is
removed before checking). Every
case must give exactly one error at that line and column -- no cascade
("a WQL file needs at least one query"), no echo of a broken declaration
where it is used, no repetition of one mistake per occurrence.
"""

from __future__ import annotations

import pytest

from tests.compiler.mistakes import CASES, VALID, mistaken
from wql.cli import main as cli_main
from wql.compiler import check_source, compile_source
from wql.errors import WqlError


def test_there_are_at_least_forty_cases():
    assert len(CASES) >= 40
    assert check_source(VALID, "q.wql") == []


@pytest.mark.parametrize("case_id,old,new", CASES, ids=[c[0] for c in CASES])
def test_one_mistake_gives_one_error_at_its_place(case_id, old, new):
    text, line, column = mistaken(case_id, old, new)
    errors = check_source(text, "q.wql")
    assert [(e.line, e.column) for e in errors] == [(line, column)], [e.message for e in errors]
    # compile reports the same one error
    with pytest.raises(WqlError) as info:
        compile_source(text, "q.wql")
    got = getattr(info.value, "errors", (info.value,))
    assert [(e.line, e.column, e.message) for e in got] == [(line, column, errors[0].message)]


@pytest.mark.parametrize(
    "case_id,old,new",
    [c for c in CASES if c[0] in ("missing_paren", "typo_tumble")],
    ids=["missing_paren", "typo_tumble"],
)
def test_wql_check_prints_one_error(case_id, old, new, tmp_path, capsys):
    text, line, column = mistaken(case_id, old, new)
    path = tmp_path / "q.wql"
    path.write_text(text)
    assert cli_main(["check", str(path)]) == 1
    err = capsys.readouterr().err
    assert err.count("error:") == 1 and f"q.wql:{line}:{column}: error:" in err
    assert "needs at least one query" not in err


@pytest.mark.parametrize(
    "case_id,message,hint",
    [
        ("misspelled_group_by", "unexpected identifier GRUOP", "did you mean GROUP BY?"),
        (
            "misspelled_group_by_after_from",
            "unexpected identifier GRUOP",
            "did you mean GROUP BY?",
        ),
        (
            "session_without_gap",
            "unexpected ')'",
            "SESSION needs a gap after the time column: write SESSION(ts, INTERVAL '10' "
            "MINUTE), or SESSION(ts, GAP <expression>) for a gap per row",
        ),
        (
            "tumble_without_size",
            "unexpected ')'",
            "TUMBLE needs a size after the time column: write TUMBLE(ts, INTERVAL '1' MINUTE)",
        ),
    ],
)
def test_the_error_says_the_mistake_in_the_users_words(case_id, message, hint):
    (old, new) = next((c[1], c[2]) for c in CASES if c[0] == case_id)
    text, _, _ = mistaken(case_id, old, new)
    (error,) = check_source(text, "q.wql")
    assert (error.message, error.hint) == (message, hint)
