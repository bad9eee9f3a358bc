"""The binding caches change nothing: a cached compile equals a cold one, spans included.

``wql.compiler.expressions`` reuses the binding of an expression text seen
before in the same situation (see ``_Memo``). Plan equality ignores spans,
so these tests compare every field of every plan node, spans too, between
a compile with empty caches and one served from them -- also with the same
texts at other positions of the file, where every span must move along.
"""

from __future__ import annotations

import dataclasses
import enum
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
import sqlglot
from hypothesis import given, settings
from hypothesis import strategies as st
from sqlglot import exp
from sqlglot.errors import ParseError

from wql.compiler import compile_source
from wql.compiler.expressions import _Memo, _parse_cached, clear_caches, column_node, to_sql
from wql.errors import WqlError

ROOT = Path(__file__).resolve().parents[2]
FILES = sorted(
    [
        *(ROOT / "tests" / "compiler" / "golden").glob("*.wql"),
        *(ROOT / "tests" / "fixtures" / "queries").glob("*.wql"),
        *(ROOT / "examples").glob("*.wql"),
    ]
)


def dump(value: object) -> object:
    """Every field of a plan, recursively, spans included."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return (
            type(value).__name__,
            tuple((f.name, dump(getattr(value, f.name))) for f in dataclasses.fields(value)),
        )
    if isinstance(value, (tuple, list)):
        return tuple(dump(v) for v in value)
    if isinstance(value, dict):
        return tuple((dump(k), dump(v)) for k, v in value.items())
    if isinstance(value, enum.Enum):
        return (type(value).__name__, value.name)
    assert value is None or isinstance(value, (str, int, float, bool)), type(value)
    return value


def cold(text: str) -> object:
    clear_caches()
    return dump(compile_source(text, "f.wql"))


def test_there_are_files():
    assert len(FILES) >= 10


@pytest.mark.parametrize("path", FILES, ids=[p.stem for p in FILES])
def test_cached_compile_equals_cold_compile(path: Path):
    text = path.read_text(encoding="utf-8")
    expected = cold(text)
    assert dump(compile_source(text, "f.wql")) == expected  # served from the caches
    # The same expressions elsewhere in a file: cache hits must move their spans.
    shifted = "-- a comment that moves every position\n\n   " + text.replace("\n", "\n  ")
    warm = dump(compile_source(shifted, "f.wql"))
    assert warm == cold(shifted)
    assert warm != expected  # the spans did move


def test_repeated_select_items_register_aggregates_like_a_cold_compile():
    # Query 2 repeats query 1's SELECT list (cache hits) but in another
    # order, so its aggregates are registered at other indices.
    text = (
        "CREATE SOURCE c (k STRING, v DOUBLE, ts TIMESTAMP, WATERMARK FOR ts AS ts);\n"
        "SELECT k, SUM(v) AS s, COUNT(*) AS n, SUM(v) / COUNT(*) AS m FROM c\n"
        "GROUP BY k, TUMBLE(ts, INTERVAL '1' SECOND) HAVING SUM(v) > 1;\n"
        "SELECT k, COUNT(*) AS n, SUM(v) / COUNT(*) AS m, SUM(v) AS s FROM c\n"
        "GROUP BY k, TUMBLE(ts, INTERVAL '1' SECOND) HAVING SUM(v) > 1;\n"
    )
    expected = cold(text)
    assert dump(compile_source(text, "f.wql")) == expected
    program = compile_source(text, "f.wql")
    first, second = program.queries
    assert [a.arg.sql if a.arg else None for a in first.aggregates] == ["v", None]
    assert [a.arg.sql if a.arg else None for a in second.aggregates] == [None, "v"]
    assert [o.expr.sql for o in second.output] == ["k", "__agg_0", "__agg_1 / __agg_0", "__agg_1"]
    assert second.aggregates[0].span.line == 4  # registered at its own text, not query 1's


def test_errors_are_not_cached():
    good = (
        "CREATE SOURCE c (k STRING, v DOUBLE, ts TIMESTAMP, WATERMARK FOR ts AS ts);\n"
        "SELECT k, MAX(v) FROM c GROUP BY k, TUMBLE(ts, INTERVAL '1' SECOND);\n"
    )
    bad = good.replace("v DOUBLE", "w DOUBLE")
    compile_source(good)
    for _ in range(2):
        with pytest.raises(WqlError) as info:
            compile_source(bad, "f.wql")
        assert "unknown column 'v'" in info.value.message
        assert (info.value.line, info.value.column) == (2, 15)
    assert dump(compile_source(good)) == cold(good)


# ----------------------------------------------------------------- shortcuts that skip sqlglot


def _nodes(node: exp.Expression) -> list[tuple]:
    """Every node of a tree with its class, arguments, position metadata and comments."""
    return [
        (
            type(n).__name__,
            dict(n.meta),
            {
                k: type(v).__name__ if isinstance(v, exp.Expression) else v
                for k, v in n.args.items()
            },
            n.comments,
        )
        for n in node.walk()
    ]


NAMES = st.from_regex(r"[A-Za-z_][A-Za-z0-9_]{0,12}", fullmatch=True)
# Names sqlglot reads as something else (IF, TRUE, CURRENT_DATE), rejects (ON)
# or knows as a function or type (count, date), and ordinary ones.
KNOWN_WORDS = ["user_id", "ts", "x1", "count", "Count", "date", "if", "true", "current_date", "N"]
KNOWN_WORDS += ["ON", "select", "interval"]


@settings(max_examples=200, deadline=None)
@given(name=st.one_of(NAMES, st.sampled_from(KNOWN_WORDS)))
def test_a_bare_name_parses_exactly_as_sqlglot_parses_it(name: str):
    try:
        theirs = sqlglot.parse_one(name, read="spark")
    except ParseError:  # a keyword such as ON: an error either way
        with pytest.raises(ParseError):
            _parse_cached.__wrapped__(name)
        return
    mine = _parse_cached.__wrapped__(name)
    assert _nodes(mine) == _nodes(theirs)
    assert to_sql(mine) == theirs.sql(dialect="spark")


@settings(max_examples=200, deadline=None)
@given(name=NAMES, quoted=st.booleans())
def test_a_column_prints_exactly_as_sqlglot_prints_it(name: str, quoted: bool):
    for node in (column_node(name), exp.column(name, quoted=quoted)):
        assert to_sql(node) == node.sql(dialect="spark")


def test_memo_is_bounded_and_drops_the_oldest_entry_first():
    memo = _Memo(2)
    for key in "abc":
        memo.put(key, (key,))
    assert memo.get("a") is None and memo.get("b") == ("b",) and memo.get("c") == ("c",)


def test_concurrent_compiles_agree_with_cold_ones():
    texts = [p.read_text(encoding="utf-8") for p in FILES]
    expected = [cold(t) for t in texts]
    clear_caches()
    with ThreadPoolExecutor(max_workers=4) as pool:
        got = list(pool.map(lambda t: dump(compile_source(t, "f.wql")), texts * 3))
    assert got == expected * 3
