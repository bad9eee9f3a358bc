"""Seeded mutation fuzzing: every mutant of a real query is accepted or a positioned WqlError.

Mutants of the examples, fixtures and golden queries (token deletion,
duplication and swap, inserted keywords and operators, numeric edge cases,
unicode and NUL, long names, deep nesting, truncation) go through parse,
check, fmt, explain and every compile target. The promise: each step either
succeeds -- and then what it produces is valid (the formatted text parses
again, the PySpark script parses as Python, the plan JSON reads back) -- or
raises a :class:`WqlError` whose every error has a place in the text. Never
another exception, never an unbounded wait.
"""

from __future__ import annotations

import ast
import json
import random
import re
import time
from pathlib import Path

import pytest

from wql.compiler import check_source, compile_source
from wql.compiler.backends.plan_json import plan_to_json
from wql.compiler.backends.pyspark_script import render_script
from wql.compiler.backends.spark_sql import spark_sql_script
from wql.compiler.explain import explain
from wql.errors import WqlError
from wql.grammar.ast import CreateSource
from wql.grammar.formatter import format_script
from wql.grammar.parser import parse

ROOT = Path(__file__).resolve().parents[2]
SEEDS = sorted(
    [*ROOT.glob("examples/*.wql"), *ROOT.glob("tests/fixtures/queries/*.wql")]
    + [*ROOT.glob("tests/compiler/golden/*.wql")]
)
MUTANTS = 2000


def _units(text: str) -> list[str]:
    """The file's source declarations with each of its queries in turn: small texts
    (a mutation hits one statement; the rest of a big file would only cost time)."""
    statements = parse(text).statements
    pieces = [(st, text[st.span.start : st.span.end]) for st in statements if st.span]
    sources = [piece for st, piece in pieces if isinstance(st, CreateSource)]
    queries = [piece for st, piece in pieces if not isinstance(st, CreateSource)]
    return [";\n".join([*sources, q]) + ";\n" for q in queries]


TOKEN = re.compile(r"`(?:[^`]|``)*`|'(?:[^'\\\n]|\\.)*'|\w+|--[^\n]*|\s+|.", re.DOTALL)
INSERTS = [
    "SELECT", "FROM", "WHERE", "GROUP BY", "HAVING", "TRIGGER", "EVICT", "PURGING", "ANY(",
    "WATERMARK WITH EARLY", "LATE DATA TO", "ALLOWED LATENESS", "INTERVAL", "CASE", "END",
    "CAST(", "AS", "(", ")", ",", ";", "+", "*", "'", '"', "`", "/*", "*/", "--", "NULL",
    "COUNT(*)", "TUMBLE(ts, INTERVAL '1' SECOND)", "SESSION(", "GLOBAL()", "PROCTIME()",
    "0", "-1", "1e308", "9" * 30, "9" * 1200, "0.000001", "-0", "1.5", "NaN",
    "é", "\x00", "\u2028", "\U0001f600", "\r", "\t", "x" * 300, "`a``b`", "`\n`",
]  # fmt: skip


def _mutate(text: str, rng: random.Random) -> str:
    tokens = TOKEN.findall(text)
    for _ in range(rng.randint(1, 3)):
        if not tokens:
            break
        i = rng.randrange(len(tokens))
        op = rng.randrange(8)
        if op == 0:
            del tokens[i]
        elif op == 1:
            tokens.insert(i, tokens[i])
        elif op == 2:
            j = rng.randrange(len(tokens))
            tokens[i], tokens[j] = tokens[j], tokens[i]
        elif op == 3:
            tokens.insert(i, " " + rng.choice(INSERTS) + " ")
        elif op == 4 and tokens[i].strip():
            tokens[i] = rng.choice(INSERTS)
        elif op == 5:
            depth = rng.choice([3, 3, 3, 40, 101])
            tokens.insert(i, rng.choice(["(", "ANY(", "PURGING ", "abs(", "- ", "NOT "]) * depth)
        elif op == 6:
            tokens = tokens[:i]
        else:
            tokens.insert(i, " + ".join(["v"] * rng.choice([2, 2, 2, 50, 1001])))
    return "".join(tokens)


def _assert_positioned(err: WqlError, text: str) -> None:
    for e in getattr(err, "errors", None) or (err,):
        assert e.span is not None, e.message
        assert 0 <= e.span.start <= e.span.end <= len(text), e.message
        assert e.line is not None and 1 <= e.line <= text.count("\n") + 1


def _exercise(text: str) -> str:
    """Run every step on ``text``; the outcome's kind, for the summary."""
    try:
        script = parse(text, "m.wql")
    except WqlError as err:
        _assert_positioned(err, text)
        script = None
    if script is not None:
        formatted = format_script(script)
        assert format_script(parse(formatted)) == formatted
    for err in check_source(text, "m.wql"):
        _assert_positioned(err, text)
    try:
        program = compile_source(text, "m.wql")
    except WqlError as err:
        _assert_positioned(err, text)
        return "error"
    explain(program)
    spark_sql_script(program, "m.wql")
    ast.parse(render_script(program, text, "m.wql"))
    json.loads(json.dumps(plan_to_json(program, "m.wql")))
    return "accepted"


def test_seeds_compile():
    assert len(SEEDS) >= 10
    for seed in SEEDS:
        text = seed.read_text(encoding="utf-8")
        assert _exercise(text) == "accepted", seed.name
        for unit in _units(text):
            assert _exercise(unit) == "accepted", unit


@pytest.mark.parametrize("chunk", range(4))
def test_mutants_are_accepted_or_positioned_errors(chunk):
    rng = random.Random(13_000 + chunk)
    texts = [unit for seed in SEEDS for unit in _units(seed.read_text(encoding="utf-8"))]
    outcomes = {"accepted": 0, "error": 0}
    started = time.monotonic()
    for n in range(MUTANTS // 4):
        mutant = _mutate(rng.choice(texts), rng)
        try:
            outcomes[_exercise(mutant)] += 1
        except AssertionError:
            raise
        except Exception as err:  # noqa: BLE001 - the failure under test
            raise AssertionError(
                f"mutant {n} of chunk {chunk}: {type(err).__name__}: {err}\n{mutant!r}"
            ) from err
    # both kinds occur, and no mutant took long (the limits bound every step)
    assert outcomes["accepted"] and outcomes["error"], outcomes
    assert time.monotonic() - started < 240
