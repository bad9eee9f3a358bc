"""Text -> AST: ``parse(text, filename) -> ast.Script``.

The Lark LALR parser is built once per process (:func:`lark_parser`). A
syntax error becomes a :class:`~wql.errors.WqlSyntaxError` whose span is the
offending token, whose message names what was found and whose ``expected``
lists what would have been accepted in human terms (``')'``, ``INTERVAL``,
``an identifier``), never Lark's internal terminal names.

Recovery: when a text has errors, each ``;``-separated statement is parsed
again on its own, in place (a Lark ``TextSlice`` of the file, so positions
stay those of the file and the cost stays that of the statement), and the
errors of every statement are reported, at most
:data:`wql.limits.MAX_ERRORS`; several errors are raised together as
:class:`~wql.errors.WqlErrors`.

>>> parse("SELECT a FROM t GROUP BY TUMBLE(ts, INTERVAL '1' MINUTE)").statements[0].source.name.name
't'
>>> try:
...     parse("SELECT a FROM t GROUP BY TUMBLE(ts INTERVAL '1' MINUTE)")
... except WqlSyntaxError as err:
...     print(err.line, err.column, err.message, err.expected)
1 36 unexpected INTERVAL ("','",)
"""

from __future__ import annotations

import difflib
import re
import threading
from collections.abc import Iterable, Iterator
from functools import cache
from pathlib import Path

from lark import Lark, TextSlice, Token
from lark.exceptions import UnexpectedCharacters, UnexpectedEOF, UnexpectedInput, UnexpectedToken

from wql import limits
from wql.errors import ErrorCode, Span, WqlError, WqlErrors, WqlSyntaxError
from wql.grammar import ast
from wql.grammar.transformer import WqlTransformer, token_span

__all__ = ["parse", "lark_parser", "split_statements", "describe_terminal", "RESERVED_WORDS"]

GRAMMAR_PATH = Path(__file__).with_name("wql.lark")

_IGNORED = frozenset({"WS", "LINE_COMMENT", "BLOCK_COMMENT"})
_COMMENT_TERMINALS = ("LINE_COMMENT", "BLOCK_COMMENT")

# Human names of the terminals that are not literal strings.
_PATTERN_NAMES = {
    "NAME": "an identifier",
    "BACKQUOTED": "an identifier",
    "STRING": "a string",
    "INT": "an integer",
    "DECIMAL": "a number",
    "COMP_OP": "a comparison operator",
    "QUALIFIED_STAR": "t.*",
    "LATE_DATA_TO": "LATE DATA TO",
    # lexed only right before `() OVER`, where ROW_NUMBER is expected too: one name
    "RANK_FUNCTION": "ROW_NUMBER",
    "OVER_WINDOW": "OVER",
    "_SEMI": "';'",
    "$END": "end of input",
}

# Operators collapse into one entry so an error inside an expression does not
# list every arithmetic symbol.
_OPERATORS = frozenset(
    {
        "'+'", "'-'", "'*'", "'/'", "'%'", "'||'", "'&'", "'|'", "'^'", "'['",
        "a comparison operator",
        "AND", "OR", "NOT", "IS", "IN", "BETWEEN", "LIKE", "RLIKE", "ILIKE",
    }
)  # fmt: skip

# What may start a scalar expression: listed as "an expression".
_EXPRESSION_STARTS = frozenset(
    ["'('", "'+'", "'-'", "'~'", "an identifier", "a string", "an integer", "a number"]
    + ["CASE", "CAST", "TRY_CAST", "EXTRACT", "FALSE", "INTERVAL", "NOT", "NULL", "TRUE"]
)

# Words that are never identifiers unless backquoted: clause starters and
# the expression operators. Every other keyword is an identifier wherever
# the grammar does not expect that keyword (see docs/language.md).
RESERVED_WORDS = frozenset(
    {
        "SELECT", "FROM", "WHERE", "GROUP", "HAVING", "CREATE",
        "AND", "OR", "NOT", "IS", "IN", "BETWEEN", "LIKE", "AS",
        "CASE", "WHEN", "THEN", "ELSE", "END", "NULL", "TRUE", "FALSE", "DISTINCT",
    }
)  # fmt: skip

# The AST builder runs inside the parser (one instance; the text being parsed
# is set per parse and thread).
_TRANSFORMER = WqlTransformer()

# Comments seen by the lexer during the current parse (one list per thread,
# since the cached parser is shared).
_comments = threading.local()


def _collect_comment(token: Token) -> Token:
    sink = getattr(_comments, "sink", None)
    if sink is not None:
        sink.append(token)
    return token


class _WordsAlwaysLexed:
    """Lark post-lexer hook that makes every parser state lex whole words.

    The contextual lexer only tries the terminals a parser state accepts. In a
    state that accepts the keyword ``INT`` but no identifier, ``INTERVAL``
    would be cut into ``INT`` + ``ERVAL``; with identifiers always lexable,
    the word stays whole and the error names it. Tokens pass through unchanged.
    """

    always_accept = ("NAME", "BACKQUOTED")

    def process(self, stream: Iterator[Token]) -> Iterator[Token]:
        types = _reserved_types()
        for token in stream:
            if token.type in ("INT", "DECIMAL") and len(token) > limits.MAX_LITERAL_DIGITS:
                # Python refuses to convert numbers of thousands of digits;
                # no real literal comes near the limit.
                raise WqlSyntaxError(
                    f"number has {len(token)} digits; the limit on a literal is "
                    f"{limits.MAX_LITERAL_DIGITS}",
                    token_span(token),
                    code=ErrorCode.BAD_LITERAL,
                )
            if token.type == "NAME":
                reserved = types.get(token.upper())
                if reserved is not None:
                    # A reserved word where the grammar wanted an identifier:
                    # present it as the keyword so the error names it.
                    token = Token.new_borrow_pos(reserved, token, token)
            yield token


@cache
def lark_parser() -> Lark:
    """The WQL parser, built once per process.

    Lark's ``cache=True`` stores the LALR tables in the temp directory (keyed
    by the grammar's hash and Lark's version), so a new ``wql`` process loads
    them in ~0.1 s instead of analysing the grammar again (~0.5-1 s). A
    missing, stale or unreadable cache file only means a rebuild.
    """
    return Lark(
        GRAMMAR_PATH.read_text(encoding="utf-8"),
        cache=True,
        parser="lalr",
        lexer="contextual",
        postlex=_WordsAlwaysLexed(),
        # Spans come from the tokens (see transformer.py): cheaper than
        # propagate_positions, and the keyword tokens must be kept for it.
        propagate_positions=False,
        keep_all_tokens=True,
        transformer=_TRANSFORMER,
        maybe_placeholders=False,
        lexer_callbacks={name: _collect_comment for name in _COMMENT_TERMINALS},
    )


@cache
def _reserved_types() -> dict[str, str]:
    return {
        t.pattern.value.upper(): t.name
        for t in lark_parser().terminals
        if t.pattern.type == "str" and t.pattern.value.upper() in RESERVED_WORDS
    }


@cache
def _keywords() -> frozenset[str]:
    return frozenset(
        t.pattern.value.upper()
        for t in lark_parser().terminals
        if t.pattern.type == "str" and t.pattern.value[:1].isalpha()
    )


@cache
def _terminal_names() -> dict[str, str]:
    names = dict(_PATTERN_NAMES)
    for term in lark_parser().terminals:
        if term.name in names:
            continue
        if term.pattern.type == "str":
            value = term.pattern.value
            names[term.name] = value.upper() if value[:1].isalpha() else f"'{value}'"
        else:
            names[term.name] = term.name.lower()
    return names


def describe_terminal(name: str) -> str:
    """Human name of a Lark terminal: ``RPAR`` -> ``')'``, ``NAME`` -> ``an identifier``."""
    return _terminal_names().get(name, name)


def _expected(names: Iterable[str]) -> tuple[str, ...]:
    shown = {describe_terminal(n) for n in names if n not in _IGNORED}
    if {"CASE", "an identifier"} <= shown:
        shown = (shown - _EXPRESSION_STARTS) | {"an expression"}
    operators = shown & _OPERATORS
    if len(operators) >= 3:
        shown = (shown - operators) | {"an operator"}
    return tuple(sorted(shown))


def _describe_found(token: Token) -> str:
    if token.type == "$END":
        return "end of input"
    if token.type == "NAME" and token.upper() in _keywords():
        return token.upper()
    if token.type in ("NAME", "BACKQUOTED"):
        return f"identifier {token}"
    if token.type == "STRING":
        return f"string {token}"
    if token.type in ("INT", "DECIMAL"):
        return f"number {token}"
    name = describe_terminal(token.type)
    if name.startswith("'") or name.isupper():
        return name
    return repr(str(token))


def _accepted(err: UnexpectedInput, fallback: Iterable[str]) -> Iterable[str]:
    """The terminals that really continue the parse at the error.

    LALR merges look-ahead sets, so the terminals of the failing state can
    include tokens that only some other context allows; trying each one on a
    copy of the parser (Lark's ``accepts``) gives the exact list.
    """
    interactive = getattr(err, "interactive_parser", None)
    if interactive is None:
        return fallback
    try:
        return interactive.accepts()
    except UnexpectedInput:
        return fallback


def _digits_before(text: str, pos: int) -> int:
    """How many digits end ``text[:pos]``."""
    count = 0
    while pos - count > 0 and text[pos - count - 1].isdigit():
        count += 1
    return count


def _end_span(text: str, start: int = 0, end: int | None = None) -> Span:
    """A zero-width span just after the last non-blank character of ``text[start:end]``."""
    end = len(text) if end is None else end
    while end > start and text[end - 1].isspace():
        end -= 1
    return Span.from_offsets(text, end, end)


# Strings, quoted names and comments, as the lexer reads them.
_QUOTED = re.compile(
    r"'(?:[^'\\\n]|\\.|'')*'|\"(?:[^\"\\\n]|\\.)*\"|`(?:[^`]|``)*`|--[^\n]*|/\*.*?\*/",
    re.DOTALL,
)
# Words that show a string literal ran over code.
_CODE_IN_STRING = re.compile(
    r"\b(SELECT|FROM|WHERE|GROUP\s+BY|HAVING|TRIGGER|EVICT|EMIT|ALLOWED\s+LATENESS|INTERVAL)\b",
    re.IGNORECASE,
)


def _string_swallowing_code(text: str, start: int, pos: int) -> int | None:
    """The offset of the opening quote of a string literal that ends just before
    ``pos`` (blanks aside) and holds clause keywords; None if there is none."""
    end = pos
    while end > start and text[end - 1].isspace():
        end -= 1
    if end == start or text[end - 1] not in "'\"":
        return None
    for m in _QUOTED.finditer(text, start, end):
        if m.end() == end and m.group()[0] in "'\"":
            return m.start() if _CODE_IN_STRING.search(m.group()) else None
    return None


def _syntax_error(
    err: UnexpectedInput, text: str, start: int = 0, end: int | None = None
) -> WqlSyntaxError:
    """The WqlSyntaxError for Lark's ``err`` in the piece ``text[start:end]``."""
    end = len(text) if end is None else end
    pos = getattr(err, "pos_in_stream", None)
    if isinstance(err, UnexpectedToken) and err.token.type != "$END":
        pos = err.token.start_pos
    if pos is not None and text.startswith("/*", pos):
        return WqlSyntaxError(
            "unterminated comment",
            Span.from_offsets(text, pos, pos + 2),
            hint="close it with */",
            code=ErrorCode.UNTERMINATED,
        )
    if isinstance(err, UnexpectedToken):
        token = err.token
        if token.type == "$END":
            span = _end_span(text, start, end)
        else:
            at = token.start_pos or 0
            span = Span.from_offsets(text, at, at + max(len(token), 1))
        swallowed = _string_swallowing_code(text, start, span.start)
        if swallowed is not None:
            # `k = 'abc GROUP BY ... INTERVAL '1' ...`: the string that ends
            # just before the unexpected token runs over code, so its
            # closing quote is missing where it opens.
            return WqlSyntaxError(
                "unterminated string",
                Span.point(text, swallowed),
                hint=f"it runs to the {text[swallowed]} on line {span.line}; "
                f"close it with {text[swallowed]} where it should end",
                code=ErrorCode.UNTERMINATED,
            )
        expected = _expected(_accepted(err, err.expected))
        found = _describe_found(token)
        guessed = _misspelled_clause(text, start, span, token, expected)
        if guessed is not None:
            return guessed
        missing = _missing_window_argument(text, start, span, token, expected)
        if missing is not None:
            return missing
        if token.type == "DECIMAL" and token.startswith(".") and _digits_before(text, span.start):
            # `COUNT(1.5)`: the integer-only state lexed `1`, then `.5`.
            first = span.start - _digits_before(text, span.start)
            number = text[first : span.end]
            return WqlSyntaxError(
                f"{number} is not an integer",
                Span.from_offsets(text, first, span.end),
                expected=("an integer",),
                code=ErrorCode.BAD_LITERAL,
            )
        hint = None
        before = text[start : span.start]
        if (
            "')'" in expected
            and token.type in ("$END", "_SEMI")
            and before.count("(") > before.count(")")
        ):
            hint = "a parenthesis is not closed"
        elif found in ("SELECT", "CREATE") and "';'" in expected:
            hint = "end the previous statement with ';'"
        return WqlSyntaxError(
            f"unexpected {found}", span, expected=expected, hint=hint, code=ErrorCode.SYNTAX
        )
    if isinstance(err, UnexpectedCharacters):
        pos = err.pos_in_stream or 0
        opening = text[pos : pos + 1]
        if opening in ("'", '"'):
            line_end = text.find("\n", pos, end)
            return WqlSyntaxError(
                "unterminated string",
                Span.from_offsets(text, pos, end if line_end < 0 else line_end),
                hint=f"close it with {opening} on the same line",
                code=ErrorCode.UNTERMINATED,
            )
        if opening == "`":
            return WqlSyntaxError(
                "unterminated quoted identifier",
                Span.point(text, pos),
                hint="close it with `",
                code=ErrorCode.UNTERMINATED,
            )
        return WqlSyntaxError(
            f"unexpected character {err.char!r}",
            Span.point(text, pos),
            expected=_expected(_accepted(err, err.allowed or ())),
            code=ErrorCode.SYNTAX,
        )
    if isinstance(err, UnexpectedEOF):
        return WqlSyntaxError(
            "unexpected end of input",
            _end_span(text, start, end),
            expected=_expected(err.expected),
            code=ErrorCode.SYNTAX,
        )
    return WqlSyntaxError(str(err), Span.point(text, start), code=ErrorCode.SYNTAX)


#: Clause keywords that a second word follows: a misspelling of the first is read as
#: a name (``FROM clicks GRUOP BY``: an alias), so the error shows at the second.
_TWO_WORD_CLAUSES = {"GROUP": "GROUP BY", "ORDER": "ORDER BY", "PARTITION": "PARTITION BY"}
_WORD_BEFORE = re.compile(r"([A-Za-z_][A-Za-z0-9_]*)\s*$")


def _close_keyword(word: str, keywords: Iterable[str]) -> str | None:
    """The keyword among ``keywords`` that ``word`` most likely misspells, if any."""
    if word.upper() in _keywords():
        return None
    close = difflib.get_close_matches(word.upper(), list(keywords), n=1, cutoff=0.75)
    return close[0] if close else None


def _misspelled_clause(
    text: str, start: int, span: Span, token: Token, expected: tuple[str, ...]
) -> WqlSyntaxError | None:
    """``GRUOP BY``: one error at the misspelled word, with the clause it misspells.

    Either the word itself is unexpected where a clause keyword could start
    (``WHERE x > 0 GRUOP BY``), or it was taken as a name (an alias) and the
    word after it is the unexpected one (``FROM clicks GRUOP BY``).
    """
    keyword = None
    if token.type == "NAME":
        keyword = _close_keyword(str(token), [e for e in expected if e.isalpha() and e.isupper()])
    if keyword is not None:
        return _respelled(
            WqlSyntaxError(
                f"unexpected identifier {token}",
                span,
                expected=expected,
                hint=f"did you mean {_TWO_WORD_CLAUSES.get(keyword, keyword)}?",
                code=ErrorCode.SYNTAX,
            ),
            keyword,
        )
    if str(token).upper() != "BY":
        return None
    m = _WORD_BEFORE.search(text, start, span.start)
    keyword = _close_keyword(m.group(1), _TWO_WORD_CLAUSES) if m else None
    if m is None or keyword is None:
        return None
    clause = _TWO_WORD_CLAUSES[keyword]
    return _respelled(
        WqlSyntaxError(
            f"unexpected identifier {m.group(1)}",
            Span.from_offsets(text, m.start(1), m.end(1)),
            expected=(clause,),
            hint=f"did you mean {clause}?",
            code=ErrorCode.SYNTAX,
        ),
        keyword,
    )


def _respelled(err: WqlSyntaxError, keyword: str) -> WqlSyntaxError:
    """``err`` (at a misspelled keyword) marked with the keyword, so that the rest of the
    statement is checked as if it were spelled right (:func:`_statement_errors`)."""
    err.respelling = keyword  # type: ignore[attr-defined]
    return err


#: What a window function needs after its time column, and an example of the form.
_WINDOW_FORMS = {
    "TUMBLE": ("a size", "TUMBLE({ts}, INTERVAL '1' MINUTE)"),
    "HOP": ("a slide and a size", "HOP({ts}, INTERVAL '1' MINUTE, INTERVAL '5' MINUTE)"),
    "CUMULATE": ("a step and a size", "CUMULATE({ts}, INTERVAL '1' MINUTE, INTERVAL '1' HOUR)"),
    "SESSION": (
        "a gap",
        "SESSION({ts}, INTERVAL '10' MINUTE), or SESSION({ts}, GAP <expression>) for a gap per row",
    ),
}


def _missing_window_argument(
    text: str, start: int, span: Span, token: Token, expected: tuple[str, ...]
) -> WqlSyntaxError | None:
    """``SESSION(ts)``: the hint says which argument the window function lacks and shows
    its form."""
    if token.type != "RPAR" or "','" not in expected:
        return None
    code = _QUOTED.sub(lambda m: " " * len(m.group()), text[start : span.start])
    depth = 0
    for i in range(len(code) - 1, -1, -1):
        if code[i] == ")":
            depth += 1
        elif code[i] == "(":
            if depth == 0:
                m = _WORD_BEFORE.search(code, 0, i)
                name = m.group(1).upper() if m else ""
                if name not in _WINDOW_FORMS:
                    return None
                needs, form = _WINDOW_FORMS[name]
                args = code[i + 1 :].split(",")
                ts = args[0].strip() or "ts"
                return WqlSyntaxError(
                    "unexpected ')'",
                    span,
                    expected=expected,
                    hint=f"{name} needs {needs} after the time column: write " + form.format(ts=ts),
                    code=ErrorCode.SYNTAX,
                )
            depth -= 1
    return None


def _parse_whole(text: str, start: int = 0, end: int | None = None) -> ast.Script:
    """Parse ``text[start:end]`` into an AST; any problem is raised as a WqlError.

    The piece is parsed in place (a Lark ``TextSlice``), so every position
    is that of ``text`` and the cost is that of the piece alone.
    """
    end = len(text) if end is None else end
    comments: list[Token] = []
    _comments.sink = comments
    try:
        with _TRANSFORMER.parsing(text):
            script = lark_parser().parse(TextSlice(text, start, end))
    except UnexpectedInput as err:
        raise _ParserError.of(_syntax_error(err, text, start, end)) from None
    except RecursionError:
        raise _too_deep(text, start, end) from None
    finally:
        _comments.sink = None
    assert isinstance(script, ast.Script)
    found = tuple(
        ast.Comment(
            str(tok).rstrip(),
            follows_code=bool(
                text[text.rfind("\n", 0, tok.start_pos or 0) + 1 : tok.start_pos].strip()
            ),
            span=Span.from_offsets(text, tok.start_pos or 0, tok.end_pos or 0),
        )
        for tok in comments
    )
    return ast.Script(script.statements, found, span=script.span)


def _too_deep(text: str, start: int, end: int) -> WqlSyntaxError:
    """The error for text nested beyond what the (recursive) AST builder handles.

    A fallback: the limits of :mod:`wql.limits` stop nesting long before.
    """
    depth = deepest = 0
    at = start
    for i in range(start, end):
        ch = text[i]
        if ch == "(":
            depth += 1
            if depth > deepest:
                deepest, at = depth, i
        elif ch == ")":
            depth -= 1
    return WqlSyntaxError(
        f"expression nested too deeply ({deepest} levels of parentheses)",
        Span.point(text, at),
        hint="split the expression or remove redundant parentheses",
        code=ErrorCode.TOO_DEEP,
    )


def split_statements(text: str) -> Iterator[tuple[int, int]]:
    """``(start, end)`` offsets of the ``;``-separated pieces of ``text``.

    Knows strings, backquoted names and comments, so a ``;`` inside them does
    not split; an unterminated string ends at the end of its line, an
    unterminated name or comment at the end of the text (as the lexer reads
    them).
    """
    start = i = 0
    n = len(text)
    while i < n:
        ch = text[i]
        if ch == "`":
            # a quoted name may span lines (as the lexer reads it)
            j = text.find("`", i + 1)
            i = n if j < 0 else j + 1
        elif ch in ("'", '"'):
            j = i + 1
            while j < n and text[j] != ch and text[j] != "\n":
                j += 2 if text[j] == "\\" else 1
            i = j + 1
        elif text.startswith("--", i):
            j = text.find("\n", i)
            i = n if j < 0 else j + 1
        elif text.startswith("/*", i):
            j = text.find("*/", i + 2)
            i = n if j < 0 else j + 2
        elif ch == ";":
            yield start, i
            start = i = i + 1
        else:
            i += 1
    yield start, n


# At most this many syntax errors are reported per statement: past the first
# few, recovery guesses are more likely to be echoes than new mistakes.
MAX_ERRORS_PER_STATEMENT = 5
# ... and at most this many repairs (insertions or skips) are tried: each
# copies the parser, so a statement of junk would otherwise cost a copy per token.
MAX_REPAIRS_PER_STATEMENT = 50


def _syntax_errors_recovering(text: str, first: int = 0, last: int | None = None) -> list[WqlError]:
    """Every syntax error of ``text[first:last]`` that simple repairs let the parser reach.

    On an unexpected token the parser tries to insert one token that would
    make the unexpected one fit (a missing ``,``, ``)``, ``END``, an operand,
    ``INTERVAL`` ...); if none does, it skips the token. Echoes are not
    reported: an error with no text accepted since the previous one, and,
    after a skip (which leaves the parser out of step with the text), any
    error before the next clause keyword. Unterminated strings, comments and
    quoted names end the search: what follows them is not code.
    """
    last = len(text) if last is None else last
    errors: list[WqlError] = []
    last_end = -1
    in_step = True
    attempts = 0

    def on_error(err: UnexpectedInput) -> bool:
        nonlocal last_end, in_step, attempts
        attempts += 1
        if isinstance(err, UnexpectedToken) and err.token.type != "$END":
            start, end = err.token.start_pos or 0, err.token.end_pos or 0
        elif isinstance(err, UnexpectedCharacters):
            start = err.pos_in_stream or 0
            end = start + 1
        else:
            start = end = last
        between = text[last_end:start] if errors else ""
        # Out of step, the parser is trusted again only past a clause keyword.
        in_step = in_step or bool(_CLAUSE_WORD.search(between))
        if not errors or (between.strip() and in_step):
            errors.append(_syntax_error(err, text, first, last))
            if getattr(errors[-1], "respelling", None):
                in_step = False  # the misspelled keyword was read as a name
        last_end = end
        if len(errors) >= MAX_ERRORS_PER_STATEMENT or attempts >= MAX_REPAIRS_PER_STATEMENT:
            return False
        if text.startswith("/*", start):
            return False  # an unterminated comment: the rest is not code
        if isinstance(err, UnexpectedCharacters):
            in_step = False  # the character is skipped
            return text[start : start + 1] not in ("'", '"', "`", "/")
        if not isinstance(err, UnexpectedToken) or err.token.type == "$END":
            return False
        in_step = _repair(err) and in_step
        return True

    comments: list[Token] = []
    _comments.sink = comments
    try:
        with _TRANSFORMER.parsing(text, recovering=True):
            lark_parser().parse(TextSlice(text, first, last), on_error=on_error)
    except UnexpectedInput:
        pass  # recovery gave up; what was found is reported
    finally:
        _comments.sink = None
    return errors


def _repair(err: UnexpectedToken) -> bool:
    """Insert one token before ``err.token`` if that makes it fit (True); else skip it.

    The token was lexed for the state the parser was in: a keyword the state
    did not expect came out as an identifier (``TUMBLE(ts INTERVAL ...``), so
    after an insertion it is also tried as that keyword.
    """
    interactive = err.interactive_parser
    token = err.token
    versions = [token]
    keyword = _keyword_terminals().get(token.upper()) if token.type == "NAME" else None
    if keyword is not None:
        versions.append(Token.new_borrow_pos(keyword, token, token))
    for name in sorted(interactive.accepts() - {"$END"}, key=_insertion_rank):
        if _CLAUSE_WORD.fullmatch(_terminal_text(name)) or name == "LATE_DATA_TO":
            continue  # inventing a clause (or a statement) would be a guess too far
        value = _SAMPLE_VALUES.get(name) or _terminal_text(name)
        filler = Token.new_borrow_pos(name, value, token)
        for version in versions:
            # values are never changed once built: the trial may share them
            trial = interactive.copy(deepcopy_values=False)
            try:
                trial.feed_token(filler)
                trial.feed_token(version)
            except UnexpectedInput:
                continue
            interactive.feed_token(filler)
            interactive.feed_token(version)
            return True
    return False


@cache
def _keyword_terminals() -> dict[str, str]:
    """Upper-case keyword -> its terminal name."""
    return {
        str(t.pattern.value).upper(): t.name
        for t in lark_parser().terminals
        if t.pattern.type == "str" and str(t.pattern.value)[:1].isalpha()
    }


# Words that start a clause: after a skipped token, errors are reported again
# only once the text has reached one of them.
_CLAUSE_WORD = re.compile(
    r"\b(SELECT|FROM|WHERE|GROUP|HAVING|ALLOWED|TRIGGER|EVICT|EMIT|LATE|CREATE|WATERMARK|WITH)\b",
    re.IGNORECASE,
)

# Values for inserted tokens of the terminals that are not literal strings.
_SAMPLE_VALUES = {
    "NAME": "_",
    "BACKQUOTED": "`_`",
    "STRING": "''",
    "INT": "1",
    "DECIMAL": "1.0",
    "COMP_OP": "=",
    "LATE_DATA_TO": "LATE DATA TO",
    # lexed only right before `() OVER`, where ROW_NUMBER is expected too: one name
    "RANK_FUNCTION": "ROW_NUMBER",
    "OVER_WINDOW": "OVER",
}


def _insertion_rank(name: str) -> tuple[int, str]:
    """Punctuation first (the usual slip), then an operand, then keywords."""
    text = _terminal_text(name)
    if text and not text[:1].isalpha():
        return (0, name)
    if name in ("NAME", "INT", "STRING"):
        return (1, name)
    return (2, name)


@cache
def _terminal_text(name: str) -> str:
    for term in lark_parser().terminals:
        if term.name == name and term.pattern.type == "str":
            return str(term.pattern.value)
    return ""


class _ParserError(WqlSyntaxError):
    """A syntax error the LALR parser found (not a limit or a lexical check of the
    AST builder): only these are worth a recovering parse for more errors."""

    @classmethod
    def of(cls, err: WqlSyntaxError) -> WqlSyntaxError:
        out = cls(err.message, err.span, code=err.code, expected=err.expected, hint=err.hint)
        out.respelling = getattr(err, "respelling", None)  # type: ignore[attr-defined]
        return out


def _statement_errors(text: str, start: int, end: int) -> list[WqlError]:
    """The syntax errors of the one statement ``text[start:end]`` (its ``;`` included)."""
    try:
        _parse_whole(text, start, end)
    except _ParserError as err:
        keyword = getattr(err, "respelling", None)
        if keyword is not None and err.span is not None:
            # one error for a misspelled keyword; what follows it is checked with the
            # keyword in its place (blank-padded so that every later offset stays)
            at, to = err.span.start, err.span.end
            if len(keyword) > to - at:
                return [err]
            fixed = text[:at] + keyword.ljust(to - at) + text[to:]
            return [err, *_statement_errors(fixed, start, end)]
        try:
            found = _syntax_errors_recovering(text, start, end)
        except Exception:  # noqa: BLE001 - recovery is best effort
            # A flaw in the recovery heuristics must not hide the error
            # already found; report that one alone.
            found = []
        # The recovering parse starts with the same first error; if it
        # found nothing, keep the one we have.
        return found if found else [err]
    except WqlErrors as err:
        return list(err.errors)
    except WqlError as err:
        return [err]
    return []


def _statements(text: str) -> Iterator[tuple[int, int]]:
    """The non-blank statements of ``text`` as ``(start, end)``, each with its ``;``.

    The ``;`` stays in the piece, so that a statement cut short is reported
    at its ``;`` rather than at an "end of input".
    """
    for start, end in split_statements(text):
        if text[start:end].strip():
            yield start, min(end + 1, len(text))


def _errors_per_statement(text: str) -> list[WqlError]:
    """The syntax errors of every statement, each parsed on its own (at most MAX_ERRORS)."""
    errors: list[WqlError] = []
    for start, end in _statements(text):
        errors.extend(_statement_errors(text, start, end))
        if len(errors) >= limits.MAX_ERRORS:
            break
    return errors[: limits.MAX_ERRORS]


def _check_size(text: str) -> None:
    if len(text) > limits.MAX_TEXT_CHARS:
        raise WqlSyntaxError(
            f"the text has {len(text)} characters; the limit on a WQL file is "
            f"{limits.MAX_TEXT_CHARS}",
            Span.point(text, limits.MAX_TEXT_CHARS),
            hint="split it into several files",
            code=ErrorCode.TEXT_TOO_LARGE,
        )


def parse(text: str, filename: str | None = None) -> ast.Script:
    """Parse a whole ``.wql`` text.

    Raises :class:`WqlSyntaxError` (or :class:`WqlErrors` when several
    statements are wrong), with ``source`` and ``filename`` attached.
    Linear in the text: after a syntax error each statement is parsed again
    on its own, in place.
    """
    if text.startswith("\ufeff"):
        # A byte-order mark (some editors write one) becomes a blank, so
        # that every offset and column stays that of the original text.
        text = " " + text[1:]
    try:
        _check_size(text)
        return _parse_whole(text)
    except WqlError as first:
        # a text over the size limit is not parsed again, statement by statement
        errors = [first] if first.code is ErrorCode.TEXT_TOO_LARGE else []
        errors = errors or _errors_per_statement(text) or [first]
        for err in errors:
            err.with_source(text, filename)
        if len(errors) == 1:
            raise errors[0] from None
        raise WqlErrors(errors).with_source(text, filename) from None


def parse_partial(
    text: str, filename: str | None = None
) -> tuple[ast.Script, list[WqlError], list[str]]:
    """Parse what can be parsed: the statements that parse, every syntax error,
    and the text of each statement that did not parse.

    For ``wql check``: a file with a syntax error in one statement still gets
    its other statements bound and checked, so every error is reported at
    once. Statements are parsed in place, so spans stay those of the whole
    file.
    """
    if text.startswith("\ufeff"):
        text = " " + text[1:]
    try:
        _check_size(text)
        return _parse_whole(text), [], []
    except WqlError as too_big:
        if too_big.code is ErrorCode.TEXT_TOO_LARGE:
            too_big.with_source(text, filename)
            return ast.Script((), (), span=None), [too_big], [text]
    statements: list[ast.Statement] = []
    errors: list[WqlError] = []
    failed: list[str] = []
    for start, end in _statements(text):
        if len(errors) >= limits.MAX_ERRORS:
            break
        try:
            statements.extend(_parse_whole(text, start, end).statements)
        except WqlError:
            errors.extend(_statement_errors(text, start, end))
            failed.append(text[start:end])
    for error in errors:
        error.with_source(text, filename)
    script = ast.Script(tuple(statements), (), span=Span.from_offsets(text, 0, len(text)))
    return script, errors[: limits.MAX_ERRORS], failed
