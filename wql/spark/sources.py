"""Source DataFrames: read what ``CREATE SOURCE ... WITH (...)`` declares, check what callers pass.

Reading (:func:`read_source`): ``format`` (``csv``, ``json``, ``parquet`` or
any Spark data source; defaults to the path's extension) and ``path`` (a
relative path resolves against the ``.wql`` file's folder), every other
option except WQL's own (``arrival_order``, ``processing_time``) goes to
Spark's reader. Text formats are read with the declared types; for a CSV
with ``header = 'true'`` the columns are matched *by name* from the header
(Spark would otherwise match the declared schema by position), so a missing
column is a clear error before anything runs.

Checking (:func:`conform`): a DataFrame passed for a declared source must
have every declared column (case-insensitive) with the declared type or one
that converts without loss (a smaller integer, any integer or float for
DOUBLE, TIMESTAMP_NTZ for TIMESTAMP); the result has exactly the declared
columns, names and types, in declaration order. Extra DataFrame columns are
ignored. An undeclared source is used as given.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from wql.compiler import plan as P
from wql.compiler import types as T
from wql.compiler.types import WqlType
from wql.errors import ErrorCode, WqlError, WqlSemanticError

__all__ = ["conform", "read_source", "resolve_path"]

_TEXT_FORMATS = ("csv", "json", "text")
_WIDENS_TO: dict[str, tuple[str, ...]] = {
    "SMALLINT": ("TINYINT",),
    "INT": ("TINYINT", "SMALLINT"),
    "BIGINT": ("TINYINT", "SMALLINT", "INT"),
    "DOUBLE": ("TINYINT", "SMALLINT", "INT", "BIGINT", "FLOAT", "DECIMAL"),
}


def resolve_path(path: str, base_dir: Path | None) -> str:
    """``path`` as Spark should read it: URIs as they are, relative paths next to the .wql file."""
    if "://" in path or path.startswith("file:"):
        return path
    p = Path(path).expanduser()
    if not p.is_absolute() and base_dir is not None:
        p = base_dir / p
    return str(p)


def read_source(spark: Any, decl: P.SourceDecl, base_dir: Path | None) -> DataFrame:
    """The DataFrame a declared source's WITH options describe (checked with :func:`conform`)."""
    if not decl.path:
        raise WqlSemanticError(
            f"source {decl.name!r} has no path to read",
            decl.span,
            hint=f"add WITH (path = '...') or pass a DataFrame named {decl.name!r}",
            code=ErrorCode.SOURCE_DATA,
        )
    path = resolve_path(decl.path, base_dir)
    if "://" not in path and not path.startswith("file:") and not _exists(path):
        raise WqlSemanticError(
            f"source {decl.name!r}: no such file or folder {path!r}",
            decl.span,
            code=ErrorCode.SOURCE_DATA,
        )
    fmt = (decl.format or Path(decl.path).suffix.lstrip(".") or "").lower()
    if not fmt:
        raise WqlSemanticError(
            f"source {decl.name!r}: cannot tell the format of {decl.path!r}",
            decl.span,
            hint="add WITH (format = 'csv' | 'json' | 'parquet')",
            code=ErrorCode.SOURCE_DATA,
        )
    options = dict(decl.reader_options)
    try:
        if fmt == "csv" and options.get("header", "false").lower() == "true":
            return _read_csv_by_header(spark, decl, path, options)
        reader = spark.read.format(fmt).options(**options)
        if fmt in _TEXT_FORMATS:
            reader = reader.schema(_ddl(decl.columns))
        return reader.load(path)
    except WqlError:
        raise
    except Exception as e:  # noqa: BLE001 - Spark's reader errors become positioned WQL errors
        raise WqlSemanticError(
            f"source {decl.name!r}: Spark cannot read {path!r} as {fmt}: {_first_line(e)}",
            decl.span,
            code=ErrorCode.SOURCE_DATA,
        ) from None


def _read_csv_by_header(
    spark: Any, decl: P.SourceDecl, path: str, options: dict[str, str]
) -> DataFrame:
    # the header row alone (no inference): file column names in file order
    header = spark.read.options(**{**options, "inferSchema": "false"}).csv(path).columns
    by_name = {c.name.lower(): c for c in decl.columns}
    missing = [c.name for c in decl.columns if c.name.lower() not in {h.lower() for h in header}]
    if missing:
        raise WqlSemanticError(
            f"source {decl.name!r}: the CSV header of {path!r} has no column "
            + ", ".join(repr(m) for m in missing),
            decl.span,
            hint=f"header columns: {', '.join(header)}",
            code=ErrorCode.SOURCE_DATA,
        )
    fields = []
    for h in header:
        col = by_name.get(h.lower())
        fields.append(f"{_q(h)} {T.to_spark(col.type).simpleString() if col else 'string'}")
    df = spark.read.options(**options).schema(", ".join(fields)).csv(path)
    return df


def conform(decl: P.SourceDecl, df: DataFrame) -> DataFrame:
    """``df`` with exactly the declared columns and types (see the module docstring)."""
    if not decl.declared:
        return df
    fields = {f.name.lower(): f for f in df.schema.fields}
    out = []
    for col in decl.columns:
        f = fields.get(col.name.lower())
        if f is None:
            raise WqlSemanticError(
                f"the DataFrame for source {decl.name!r} has no column {col.name!r}",
                col.span or decl.span,
                hint=f"its columns: {', '.join(df.columns)}",
                code=ErrorCode.SCHEMA,
            )
        actual = T.from_spark(f.dataType, column=f.name)
        if not _compatible(actual, col.type):
            raise WqlSemanticError(
                f"column {col.name!r} of source {decl.name!r} is declared {col.type.ddl} "
                f"but the DataFrame has {actual.ddl}",
                col.span or decl.span,
                code=ErrorCode.SCHEMA,
            )
        c = F.col(_q(f.name))
        if actual != col.type:
            c = c.cast(T.to_spark(col.type))
        out.append(c.alias(col.name))
    return df.select(*out)


def _compatible(actual: WqlType, declared: WqlType) -> bool:
    if actual == declared or actual.kind == "NULL":
        return True
    return actual.kind in _WIDENS_TO.get(declared.kind, ())


def _ddl(columns: tuple[P.Column, ...]) -> str:
    return ", ".join(f"{_q(c.name)} {T.to_spark(c.type).simpleString()}" for c in columns)


def _q(name: str) -> str:
    return "`" + name.replace("`", "``") + "`"


def _exists(path: str) -> bool:
    import glob

    return Path(path).exists() or bool(glob.glob(path))


def _first_line(e: Exception) -> str:
    text = str(e).strip().splitlines()
    return text[0] if text else type(e).__name__
