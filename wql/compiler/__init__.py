"""The WQL compiler: AST -> typed plan (binder), engine choice (planner), explain.

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
from typing import Any

from wql.compiler import plan
from wql.errors import WqlError
from wql.limits import recursion_headroom

__all__ = ["check_source", "compile_source", "plan"]


def compile_source(
    text: str,
    filename: str | None = None,
    engine: str = "auto",
    schemas: Mapping[str, Any] | None = None,
    *,
    streaming: bool = False,
) -> plan.Program:
    """Parse, bind and plan a WQL text.

    ``schemas`` maps source names to caller-passed schemas (a DataFrame, a
    Spark StructType, or ``(name, type)`` pairs); ``engine`` is ``'auto'``,
    ``'native'`` or ``'operator'``; ``streaming`` plans the queries for
    streaming sources (``wql run --stream``, ``wql explain --stream``).
    Every error is a :class:`WqlError` (or :class:`WqlErrors`) with the text
    and file name attached for rendering.
    """
    from wql.compiler.binder import bind
    from wql.grammar.parser import parse

    try:
        with recursion_headroom():
            script = parse(text, filename)
            return bind(script, text, filename, schemas=schemas, engine=engine, streaming=streaming)
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
