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
