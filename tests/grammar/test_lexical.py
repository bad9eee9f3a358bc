"""Keywords, identifiers, case, comments: the lexical rules docs/language.md promises."""

from __future__ import annotations

import re

import pytest

from wql.errors import WqlSyntaxError
from wql.grammar import ast
from wql.grammar.parser import RESERVED_WORDS, parse, split_statements

BASE = (
    "SELECT user_id, COUNT(*) AS n FROM clicks WHERE amount > 0 "
    "GROUP BY user_id, HOP(ts, INTERVAL '1' MINUTE, INTERVAL '5' MINUTE, INTERVAL '10' SECOND) "
    "HAVING COUNT(*) > 1 ALLOWED LATENESS INTERVAL '1' MINUTE "
    "TRIGGER WATERMARK WITH EARLY PURGING EVERY INTERVAL '5' SECOND OF PROCESSING TIME "
    "LATE ANY(COUNT(1), TIMEOUT(DELTA(amount, 5), INTERVAL '1' SECOND)) "
    "EVICT TIME(INTERVAL '5' SECOND) AFTER LATE DATA TO late"
)


def _swap_case(text: str) -> str:
    return "".join(c.lower() if i % 2 else c.upper() for i, c in enumerate(text))


@pytest.mark.parametrize("transform", [str.lower, str.title, _swap_case])
def test_keywords_are_case_insensitive(transform) -> None:
    # Keywords are the upper-case words of BASE; identifiers are lower-case
    # and keep their spelling, so the ASTs must be equal.
    respelled = re.sub(r"\b[A-Z][A-Z_]*\b", lambda m: transform(m.group(0)), BASE)
    assert respelled != BASE
    assert parse(respelled) == parse(BASE)


def test_keywords_upper_and_lower_give_equal_ast() -> None:
    lower = "select a from t group by tumble(ts, interval '5' second) trigger count(3)"
    upper = "SELECT a FROM t GROUP BY TUMBLE(ts, INTERVAL '5' SECOND) TRIGGER COUNT(3)"
    assert parse(lower) == parse(upper)


@pytest.mark.parametrize("word", ["count", "time", "window", "global", "session", "delta", "every"])
def test_clause_keywords_are_identifiers_in_expressions(word: str) -> None:
    text = (
        f"CREATE SOURCE s ({word} INT, ts TIMESTAMP, WATERMARK FOR ts AS ts - INTERVAL '1' SECOND);"
        f"SELECT {word}, SUM({word}) AS {word}_sum FROM s WHERE {word} > 0 "
        f"GROUP BY TUMBLE(ts, INTERVAL '1' SECOND) HAVING MAX({word}) > 1"
    )
    source, query = parse(text).statements
    assert isinstance(source, ast.CreateSource) and isinstance(query, ast.Query)
    assert source.columns[0].name == ast.Ident(word)
    assert query.select[0].expr.text == word
    assert query.where is not None and query.where.text == f"{word} > 0"


@pytest.mark.parametrize("word", ["count", "time", "window", "delta"])
def test_clause_keywords_are_plain_grouping_keys(word: str) -> None:
    q = parse(f"SELECT {word} FROM t GROUP BY {word}, TUMBLE(ts, INTERVAL '1' SECOND)").statements[
        0
    ]
    assert isinstance(q, ast.Query)
    assert [k.text for k in q.group_by.keys] == [word]


@pytest.mark.parametrize("word", ["global", "session", "tumble", "hop"])
def test_window_names_as_keys_need_backquotes(word: str) -> None:
    with pytest.raises(WqlSyntaxError):
        parse(f"SELECT a FROM t GROUP BY {word}, TUMBLE(ts, INTERVAL '1' SECOND)")
    q = parse(f"SELECT a FROM t GROUP BY `{word}`, TUMBLE(ts, INTERVAL '1' SECOND)").statements[0]
    assert isinstance(q, ast.Query)
    assert [k.text for k in q.group_by.keys] == [f"`{word}`"]


def test_time_attribute_may_be_named_like_a_keyword() -> None:
    q = parse("SELECT a FROM t GROUP BY TUMBLE(time, INTERVAL '1' SECOND)").statements[0]
    assert isinstance(q, ast.Query)
    assert q.group_by.window == ast.Tumble(
        ast.Ident("time"),
        q.group_by.window.size,  # type: ignore[union-attr]
    )


def test_source_named_like_keywords() -> None:
    q = parse("SELECT a FROM window GROUP BY COUNT_WINDOW(2) LATE DATA TO count").statements[0]
    assert isinstance(q, ast.Query)
    assert q.source.name == ast.Ident("window")


def test_watermark_column_needs_backquotes() -> None:
    with pytest.raises(WqlSyntaxError):
        parse("CREATE SOURCE s (a INT, watermark INT)")
    source = parse("CREATE SOURCE s (a INT, `watermark` INT)").statements[0]
    assert isinstance(source, ast.CreateSource)
    assert source.columns[1].name == ast.Ident("watermark", quoted=True)


@pytest.mark.parametrize("word", sorted(RESERVED_WORDS))
def test_reserved_words_are_never_bare_identifiers(word: str) -> None:
    with pytest.raises(WqlSyntaxError) as info:
        parse(f"SELECT a AS {word.lower()} FROM t GROUP BY GLOBAL()")
    assert info.value.message == f"unexpected {word}"
    q = parse(f"SELECT a AS `{word.lower()}` FROM t GROUP BY GLOBAL()").statements[0]
    assert isinstance(q, ast.Query)
    assert q.select[0].alias == ast.Ident(word.lower(), quoted=True)


def test_backquoted_identifiers_with_escapes() -> None:
    q = parse(
        "SELECT `user id`, `a``b` AS `x y` FROM `my source` GROUP BY `user id`, GLOBAL()"
    ).statements[0]
    assert isinstance(q, ast.Query)
    assert q.source.name == ast.Ident("my source", quoted=True)
    assert q.select[1].alias == ast.Ident("x y", quoted=True)
    assert q.select[1].expr.text == "`a``b`"


def test_keyword_prefix_of_a_word_is_not_cut() -> None:
    # `INT` is a type keyword; `INTERVAL`, `integer_col` and `counter` stay whole words.
    source = parse("CREATE SOURCE s (integer_col INT, counter BIGINT)").statements[0]
    assert isinstance(source, ast.CreateSource)
    assert [c.name.name for c in source.columns] == ["integer_col", "counter"]
    q = parse("SELECT globals FROM t GROUP BY global_id, GLOBAL()").statements[0]
    assert isinstance(q, ast.Query)
    assert [k.text for k in q.group_by.keys] == ["global_id"]


def test_comments_everywhere_are_ignored_and_kept() -> None:
    text = (
        "-- leading\n"
        "SELECT /* inline */ a, -- after a\n"
        "  b\n"
        "FROM t /* between\n lines */ GROUP BY GLOBAL() -- end\n"
        "TRIGGER COUNT(1); /* after */\n"
    )
    script = parse(text)
    assert [c.text for c in script.comments] == [
        "-- leading",
        "/* inline */",
        "-- after a",
        "/* between\n lines */",
        "-- end",
        "/* after */",
    ]
    assert [c.follows_code for c in script.comments] == [False, True, True, True, True, True]
    plain = parse("SELECT a, b FROM t GROUP BY GLOBAL() TRIGGER COUNT(1)")
    assert script.statements == plain.statements
    first = script.comments[0].span
    assert first is not None and (first.line, first.column) == (1, 1)


def test_comment_markers_inside_strings_are_text() -> None:
    q = parse("SELECT a FROM t WHERE b = '-- not a comment /* nor this */' GROUP BY GLOBAL()")
    assert q.comments == ()
    query = q.statements[0]
    assert isinstance(query, ast.Query) and query.where is not None
    assert query.where.text == "b = '-- not a comment /* nor this */'"


def test_split_statements_respects_quotes_and_comments() -> None:
    text = "a ';' b; `x;y` -- c;d\n; /* ; */ e"
    assert [text[s:e] for s, e in split_statements(text)] == [
        "a ';' b",
        " `x;y` -- c;d\n",
        " /* ; */ e",
    ]


def test_byte_order_mark_is_blank() -> None:
    script = parse("\ufeffSELECT a FROM t GROUP BY GLOBAL()")
    query = script.statements[0]
    assert isinstance(query, ast.Query)
    assert query.span is not None and query.span.column == 2
