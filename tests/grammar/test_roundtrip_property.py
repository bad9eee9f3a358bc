"""Property: for random valid WQL, parse(format(q)) == parse(q) and format is idempotent.

Queries are generated as text (``tests/grammar/strategies.py``) in deliberately
varied spellings (keyword case, interval styles, spacing, optional clauses,
comments) over every window, trigger and evictor form, so the formatter has to
normalise, not copy.
"""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.grammar.strategies import script
from wql.errors import WqlError, WqlErrors
from wql.grammar.formatter import format_script
from wql.grammar.parser import _syntax_errors_recovering, parse, split_statements


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(script())
def test_format_round_trips_and_is_idempotent(text: str) -> None:
    original = parse(text)
    formatted = format_script(original)
    reparsed = parse(formatted)
    assert reparsed == original
    assert format_script(reparsed) == formatted


JUNK = [
    "(",
    ")",
    ",",
    ";",
    "'",
    "`",
    "/*",
    "--",
    "-",
    "*",
    "INTERVAL",
    "SELECT",
    "GROUP BY",
    "1.5",
    "@",
]


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(script(), st.data())
def test_damaged_text_gives_wql_errors_never_crashes(text: str, data: st.DataObject) -> None:
    # Cut a random piece out and splice random junk in: the parser must
    # either accept the text or raise a positioned WqlError, nothing else.
    start = data.draw(st.integers(0, len(text)))
    end = data.draw(st.integers(start, min(len(text), start + 20)))
    junk = data.draw(st.sampled_from(JUNK))
    damaged = text[:start] + junk + text[end:]
    # Recovery is best effort and parse() falls back if it fails; call it
    # directly so that a flaw in it shows up here instead of being hidden.
    for start, end in split_statements(damaged):
        _syntax_errors_recovering(damaged, start, min(end + 1, len(damaged)))
    try:
        parse(damaged)
    except WqlErrors as err:
        assert all(e.span is not None and e.source == damaged for e in err.errors)
    except WqlError as err:
        assert err.span is not None and err.source == damaged
        assert err.line is not None and 1 <= err.line <= damaged.count("\n") + 1
