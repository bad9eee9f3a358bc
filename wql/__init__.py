"""WQL: a declarative window query language and compiler for PySpark.

The embedding API (:mod:`wql.api`)::

    import wql
    results = wql.compile(text).apply(spark, clicks=clicks_df)
    results.df.show()
"""

from wql.api import Compiled, QueryResult, Results, compile, compile_file
from wql.errors import (
    Span,
    WqlError,
    WqlErrors,
    WqlSemanticError,
    WqlSyntaxError,
    WqlUnsupportedError,
)

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
