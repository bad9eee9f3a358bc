"""Every ```sql example in docs/language.md is valid WQL (docs match the code)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from wql.grammar.formatter import format_script
from wql.grammar.parser import parse

DOC = Path(__file__).resolve().parents[2] / "docs" / "language.md"
BLOCKS = re.findall(r"```sql\n(.*?)```", DOC.read_text(encoding="utf-8"), re.DOTALL)


def test_the_reference_has_examples() -> None:
    assert len(BLOCKS) >= 8


@pytest.mark.parametrize("block", BLOCKS, ids=[f"block{i}" for i in range(len(BLOCKS))])
def test_example_parses_and_formats_stably(block: str) -> None:
    script = parse(block, "language.md")
    assert script.statements
    once = format_script(script)
    assert parse(once) == script
    assert format_script(parse(once)) == once


def test_first_example_compiles() -> None:
    from wql.compiler import compile_source

    program = compile_source(BLOCKS[0], "language.md")
    assert [q.name for q in program.queries] == ["query_1"]


ROOT = Path(__file__).resolve().parents[2]


def test_examples_and_docs_are_formatted_as_wql_fmt_writes_them(capsys) -> None:
    """What `make lint` (CI) checks: every example and every ```sql block of README.md and
    docs/*.md is already in `wql fmt`'s form."""
    from wql.cli import main

    files = [
        *sorted(ROOT.glob("examples/*.wql")),
        *sorted(ROOT.glob("examples/*/*.wql")),
        ROOT / "README.md",
        *sorted(ROOT.glob("docs/*.md")),
    ]
    assert len([f for f in files if f.suffix == ".wql"]) >= 13
    assert main(["fmt", "--check", *map(str, files)]) == 0, capsys.readouterr().out
    # the Makefile (`make lint`, which CI runs) checks the same files
    makefile = (ROOT / "Makefile").read_text()
    assert "wql fmt --check examples/*.wql examples/*/*.wql README.md docs/*.md" in makefile


def test_fmt_on_markdown_formats_its_sql_blocks_and_positions_errors(tmp_path, capsys) -> None:
    from wql.cli import main

    doc = tmp_path / "doc.md"
    doc.write_text(
        "# Title\n\nText with `SELECT` in it.\n\n```sql\nselect k, count(*) as n from s "
        "group by k, tumble(ts, interval '1' minute);\n```\n\n```python\nx = 1\n```\n"
    )
    assert main(["fmt", "--check", str(doc)]) == 1
    assert main(["fmt", "--write", str(doc)]) == 0
    text = doc.read_text()
    assert text.startswith("# Title\n\nText with `SELECT` in it.\n\n```sql\nSELECT\n")
    assert "GROUP BY k, TUMBLE(ts, INTERVAL '1' MINUTE);\n```\n\n```python\nx = 1\n```\n" in text
    assert main(["fmt", "--check", str(doc)]) == 0
    capsys.readouterr()
    doc.write_text(
        "Intro\n\n```sql\nSELECT k FROM s\nGRUOP BY k, TUMBLE(ts, INTERVAL '1' MINUTE);\n```\n"
    )
    assert main(["fmt", "--check", str(doc)]) == 1
    assert f"{doc}:5:1: error: unexpected identifier GRUOP" in capsys.readouterr().err
