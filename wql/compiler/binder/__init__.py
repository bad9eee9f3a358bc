"""AST -> typed plan: names, types, defaults and every validation rule.

:func:`bind` walks a parsed script (``wql.grammar.ast.Script``) and builds a
:class:`wql.compiler.plan.Program`. It reports *every* independent mistake
of a file, each as a positioned :class:`~wql.errors.WqlError` pointing at the
clause or token responsible, and raises them together (:class:`WqlErrors`,
or the single error when there is one). A query with an error is still
checked clause by clause; only its plan node is not built.

Defaults filled in here (the transformer leaves absent clauses ``None``):
trigger per window kind (event time: WATERMARK; processing time: PROCESSING
TIME; COUNT_WINDOW(n): PURGING COUNT(n); COUNT_WINDOW(n, s): COUNT(s) with
EVICT COUNT(n)), allowed lateness 0, EVERY's domain = the window's, EVICT
position BEFORE, query names ``query_1``, ``query_2``, ... for unnamed
queries in file order.

One module per concern, all working on one :class:`~.context.BindContext`
(the text, the sources, the errors found so far):

==============  ==========================================================
``context``     the binding context, error collection, checks clauses share
``sources``     CREATE SOURCE, FROM, WATERMARK FOR, caller-passed schemas
``windows``     GROUP BY's window (one handler per AST window class)
``triggers``    TRIGGER and EVICT (one handler per AST trigger/evictor class)
``lateness``    ALLOWED LATENESS, LATE DATA TO
``select``      GROUP BY keys, SELECT, HAVING
``queries``     the script: names, each query's clauses, the Query node
==============  ==========================================================
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from wql.compiler import plan as P
from wql.compiler.binder.context import BindContext, Echo, SchemaLike, reported
from wql.compiler.binder.queries import bind_script
from wql.compiler.binder.sources import normalize_schema
from wql.compiler.binder.windows import MAX_WINDOWS_PER_ROW
from wql.errors import WqlError
from wql.grammar import ast

__all__ = [
    "MAX_WINDOWS_PER_ROW",
    "Echo",
    "SchemaLike",
    "bind",
    "normalize_schema",
    "reported",
]


def bind(
    script: ast.Script,
    source_text: str,
    filename: str | None = None,
    *,
    schemas: Mapping[str, SchemaLike] | None = None,
    engine: str = "auto",
    streaming: bool = False,
    unparsed: Iterable[str] = (),
) -> P.Program:
    """Bind a parsed script and choose each query's engine.

    ``schemas`` gives sources by name for embedded use (DataFrames passed by
    the caller); a declared source wins over a passed schema of the same
    name (the runner checks that the DataFrame matches the declaration).
    ``engine`` is ``'auto'``, ``'native'`` or ``'operator'``; ``streaming``
    plans every query for a streaming source (see
    :func:`wql.compiler.planner.choose_engines`).

    ``unparsed`` is the text of the statements of the file that did not
    parse (``wql check`` binds the rest): their syntax errors are reported
    already, so what follows from them is not reported again -- a query
    reading a source whose declaration did not parse, a file left without
    a query. Such errors are :class:`Echo` errors: they fail the binding but
    are dropped from every report.
    """
    from wql.compiler.planner import choose_engines

    ctx = BindContext(source_text, schemas or {}, tuple(unparsed))
    program = bind_script(ctx, script)
    ctx.raise_errors(filename)
    assert program is not None
    try:
        return choose_engines(program, engine, streaming=streaming)
    except WqlError as e:
        raise e.with_source(source_text, filename) from None
