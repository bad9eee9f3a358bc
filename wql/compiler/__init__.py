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

__all__ = ["compile_source", "plan"]


def compile_source(
    text: str,
    filename: str | None = None,
    engine: str = "auto",
    schemas: Mapping[str, Any] | None = None,
) -> plan.Program:
    """Parse, bind and plan a WQL text.

    ``schemas`` maps source names to caller-passed schemas (a DataFrame, a
    Spark StructType, or ``(name, type)`` pairs); ``engine`` is ``'auto'``,
    ``'native'`` or ``'operator'``. Every error is a :class:`WqlError` (or
    :class:`WqlErrors`) with the text and file name attached for rendering.
    """
    from wql.compiler.binder import bind
    from wql.grammar.parser import parse

    try:
        script = parse(text, filename)
        return bind(script, text, filename, schemas=schemas, engine=engine)
    except WqlError as e:
        raise e.with_source(text, filename) from None
