"""WQL: a declarative window query language and compiler for PySpark.

The embedding API (:mod:`wql.api`)::

    import wql
    results = wql.compile(text).apply(spark, clicks=clicks_df)
    results.df.show()

The API is imported on first use: a process that only runs WQL's operators
(Spark's Python workers, which import ``wql.spark...`` or ``wql.runtime...``
to unpickle a processor) does not pay for the compiler.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from wql.api import Compiled, QueryResult, Results, compile, compile_file
    from wql.errors import (
        Span,
        WqlError,
        WqlErrors,
        WqlSemanticError,
        WqlSyntaxError,
        WqlUnsupportedError,
    )

#: name -> the module it comes from
_EXPORTS = {
    "Compiled": "wql.api",
    "QueryResult": "wql.api",
    "Results": "wql.api",
    "compile": "wql.api",
    "compile_file": "wql.api",
    "Span": "wql.errors",
    "WqlError": "wql.errors",
    "WqlErrors": "wql.errors",
    "WqlSemanticError": "wql.errors",
    "WqlSyntaxError": "wql.errors",
    "WqlUnsupportedError": "wql.errors",
}

__all__ = [
    "Compiled",
    "QueryResult",
    "Results",
    "Span",
    "WqlError",
    "WqlErrors",
    "WqlSemanticError",
    "WqlSyntaxError",
    "WqlUnsupportedError",
    "compile",
    "compile_file",
]


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'wql' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted([*globals(), *_EXPORTS])
