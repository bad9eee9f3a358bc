"""The WQL compiler: text -> AST -> typed plan (binder), engine choice (planner), explain.

:func:`read_file` reads a ``.wql`` file, :func:`compile_source` compiles a
text to a :class:`~wql.compiler.plan.Program`, :func:`check_source` lists
every error of a text.

>>> program = compile_source('''
... CREATE SOURCE clicks (user_id STRING, amount DOUBLE, ts TIMESTAMP,
...     WATERMARK FOR ts AS ts - INTERVAL '5' SECOND);
... SELECT user_id, COUNT(*) AS n FROM clicks GROUP BY user_id, TUMBLE(ts, INTERVAL '1' MINUTE);
... ''')
>>> q = program.queries[0]
>>> q.name, q.window.size_ms, q.engine.engine, [c.name for c in q.output_schema]
('query_1', 60000, 'native', ['user_id', 'n'])
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from wql.compiler import plan
from wql.errors import ErrorCode, WqlError
from wql.grammar import ast
from wql.limits import recursion_headroom

__all__ = ["check_source", "compile_source", "parse_source", "plan", "read_file"]


def read_file(path: str | Path) -> str:
    """The text of the ``.wql`` file at ``path``; unreadable -> a WqlError without span."""
    try:
        # utf-8-sig: a byte-order mark some editors write is not WQL text.
        return Path(path).read_text(encoding="utf-8-sig")
    except FileNotFoundError:
        reason = "no such file"
    except IsADirectoryError:
        reason = "it is a directory"
    except UnicodeDecodeError as err:
        reason = f"not UTF-8 text ({err.reason} at byte {err.start})"
    except OSError as err:
        reason = (err.strerror or str(err)).lower()
    raise WqlError(f"cannot read file: {reason}", filename=str(path), code=ErrorCode.FILE)


def compile_source(
    text: str,
    filename: str | None = None,
    engine: str = "auto",
    schemas: Mapping[str, Any] | None = None,
    *,
    streaming: bool = False,
    script: ast.Script | None = None,
) -> plan.Program:
    """Parse, bind and plan a WQL text.

    ``schemas`` maps source names to caller-passed schemas (a DataFrame, a
    Spark StructType, or ``(name, type)`` pairs); ``engine`` is ``'auto'``,
    ``'native'`` or ``'operator'``; ``streaming`` plans the queries for
    streaming sources (``wql run --stream``, ``wql explain --stream``).
    ``script`` is ``text`` already parsed (:func:`parse_source`), so that a
    caller that looked at the AST first does not parse the text again.
    Every error is a :class:`WqlError` (or :class:`WqlErrors`) with the text
    and file name attached for rendering.
    """
    from wql.compiler.binder import bind

    if script is None:
        script = parse_source(text, filename)
    try:
        with recursion_headroom():
            return bind(script, text, filename, schemas=schemas, engine=engine, streaming=streaming)
    except WqlError as e:
        raise e.with_source(text, filename) from None


def parse_source(text: str, filename: str | None = None) -> ast.Script:
    """The AST of a WQL text (the first step of :func:`compile_source`)."""
    from wql.grammar.parser import parse

    try:
        with recursion_headroom():
            return parse(text, filename)
    except WqlError as e:
        raise e.with_source(text, filename) from None


def check_source(
    text: str,
    filename: str | None = None,
    engine: str = "auto",
    schemas: Mapping[str, Any] | None = None,
) -> list[WqlError]:
    """Every error of a WQL text, syntax and semantic, in source order; ``[]`` when it compiles.

    Unlike :func:`compile_source`, a syntax error in one statement does not
    stop the others from being bound and checked (``wql check`` reports them
    all). One mistake gives one error: what only follows from a statement
    that does not parse (a query reading a source whose declaration does not
    parse, a file left without a query) is not reported again.
    """
    from wql.compiler.binder import bind, reported
    from wql.grammar.parser import parse_partial

    with recursion_headroom():
        script, errors, failed = parse_partial(text, filename)
        try:
            bind(script, text, filename, schemas=schemas, engine=engine, unparsed=failed)
        except WqlError as e:
            errors.extend(reported([e]))
    for err in errors:
        err.with_source(text, filename)
    return sorted(errors, key=lambda err: err.span.start if err.span else -1)
