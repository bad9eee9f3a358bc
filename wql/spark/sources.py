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

import re
from pathlib import Path
from typing import Any

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from wql.compiler import plan as P
from wql.compiler import types as T
from wql.compiler.backends.escaping import sql_identifier
from wql.compiler.types import WqlType
from wql.errors import ErrorCode, WqlError, WqlSemanticError

__all__ = ["conform", "declared_schema", "read_source", "read_stream_source", "resolve_path"]

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
    if _is_local(path) and not _exists(path):
        relative = base_dir is None and not Path(path).expanduser().is_absolute()
        raise WqlSemanticError(
            f"source {decl.name!r}: no such file or folder {path!r}",
            decl.span,
            hint=f"a relative path is read from the current folder ({Path.cwd()}); "
            "wql.compile_file(path) reads it next to the .wql file"
            if relative
            else None,
            code=ErrorCode.SOURCE_DATA,
        )
    fmt = _required_format(
        decl,
        decl.format or Path(decl.path).suffix.lstrip("."),
        f"cannot tell the format of {decl.path!r}",
        "add WITH (format = 'csv' | 'json' | 'parquet')",
    )
    options = dict(decl.reader_options)
    try:
        reader = spark.read.format(fmt).options(**options)
        if fmt in _TEXT_FORMATS:
            reader = reader.schema(_file_schema(spark, decl, path, fmt, options, empty_ok=False))
        return reader.load(path)
    except WqlError:
        raise
    except Exception as e:  # noqa: BLE001 - Spark's reader errors become positioned WQL errors
        raise WqlSemanticError(
            f"source {decl.name!r}: Spark cannot read {path!r} as {fmt}: {_first_line(e)}",
            decl.span,
            code=ErrorCode.SOURCE_DATA,
        ) from None


def read_stream_source(spark: Any, decl: P.SourceDecl, base_dir: Path | None) -> DataFrame:
    """The streaming DataFrame a declared file source describes (new files = new rows).

    ``path`` must be a folder and ``format`` is required; the schema is the
    declaration (Spark's streaming file source needs one), in the CSV
    header's order when the files already there have a header.
    """
    if not decl.path:
        raise WqlSemanticError(
            f"source {decl.name!r} has no path to stream from",
            decl.span,
            hint="add WITH (path = '<folder>')",
            code=ErrorCode.SOURCE_DATA,
        )
    path = resolve_path(decl.path, base_dir)
    if _is_local(path) and Path(path).is_file():
        raise WqlSemanticError(
            f"source {decl.name!r}: a streaming source reads a folder of files, {path!r} is a file",
            decl.span,
            hint="point path at the folder new files arrive in",
            code=ErrorCode.SOURCE_DATA,
        )
    if _is_local(path) and not Path(path).exists():
        raise WqlSemanticError(
            f"source {decl.name!r}: no such folder {path!r}", decl.span, code=ErrorCode.SOURCE_DATA
        )
    fmt = _required_format(
        decl,
        decl.format,
        "a streaming source needs WITH (format = ...)",
        "format = 'csv' | 'json' | 'parquet'",
    )
    options = dict(decl.reader_options)
    schema = _file_schema(spark, decl, path, fmt, options, empty_ok=True)
    try:
        return spark.readStream.format(fmt).schema(schema).options(**options).load(path)
    except Exception as e:  # noqa: BLE001 - Spark's errors become positioned WQL errors
        raise WqlSemanticError(
            f"source {decl.name!r}: Spark cannot stream {path!r} as {fmt}: {_first_line(e)}",
            decl.span,
            code=ErrorCode.SOURCE_DATA,
        ) from None


def _required_format(decl: P.SourceDecl, fmt: str | None, message: str, hint: str) -> str:
    """The reader format, lower case; a positioned error saying ``message`` when there is none."""
    if not fmt:
        raise WqlSemanticError(
            f"source {decl.name!r}: {message}", decl.span, hint=hint, code=ErrorCode.SOURCE_DATA
        )
    return fmt.lower()


def _file_schema(
    spark: Any, decl: P.SourceDecl, path: str, fmt: str, options: dict[str, str], *, empty_ok: bool
) -> str:
    """The schema to read the files with, in DDL: the declared columns and types, in the
    order of the CSV header when ``header = 'true'`` (Spark matches a CSV schema by
    position: this matches it by name), else in declaration order.

    ``empty_ok``: a folder without files yet (a stream's) has no header; read it in
    declaration order. Otherwise the header read fails as Spark reports it.
    """
    columns = {c.name.lower(): c for c in decl.columns}
    order = [c.name for c in decl.columns]
    if fmt == "csv" and options.get("header", "false").lower() == "true":
        # the header row alone (no inference): file column names in file order
        reader = spark.read.options(**{**options, "inferSchema": "false"})
        try:
            header = reader.csv(path).columns
        except Exception:  # noqa: BLE001 - an empty folder has no header yet
            if not empty_ok:
                raise
            header = []
        if header:
            missing = [c for c in order if c.lower() not in {h.lower() for h in header}]
            if missing:
                raise WqlSemanticError(
                    f"source {decl.name!r}: the CSV header of {path!r} has no column "
                    + ", ".join(repr(m) for m in missing),
                    decl.span,
                    hint=f"header columns: {', '.join(header)}",
                    code=ErrorCode.SOURCE_DATA,
                )
            order = header
    parts = []
    for name in order:
        col = columns.get(name.lower())
        type_ = T.to_spark(col.type).simpleString() if col is not None else "string"
        parts.append(f"{sql_identifier(name)} {type_}")
    return ", ".join(parts)


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
                hint=_schema_hint(decl) if actual.kind == "STRING" else None,
                code=ErrorCode.SCHEMA,
            )
        c = F.col(sql_identifier(f.name))
        if actual != col.type:
            c = c.cast(T.to_spark(col.type))
        out.append(c.alias(col.name))
    return df.select(*out)


def declared_schema(decl: P.SourceDecl) -> str:
    """The declared columns as a Spark DDL schema (``spark.read.schema(...)`` takes it);
    names back-quoted only where they need it."""
    return ", ".join(
        f"{c.name if _PLAIN_NAME.fullmatch(c.name) else sql_identifier(c.name)} "
        f"{T.to_spark(c.type).simpleString()}"
        for c in decl.columns
    )


_PLAIN_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def _schema_hint(decl: P.SourceDecl) -> str:
    """For a DataFrame read as text (a CSV without a schema): how to read it typed."""
    reads = " (or pass no DataFrame: apply() reads it from its WITH clause)" if decl.path else ""
    return f"read it with the declared schema: schema={declared_schema(decl)!r}{reads}"


def _compatible(actual: WqlType, declared: WqlType) -> bool:
    if actual == declared or actual.kind == "NULL":
        return True
    return actual.kind in _WIDENS_TO.get(declared.kind, ())


def _is_local(path: str) -> bool:
    return "://" not in path and not path.startswith("file:")


def _exists(path: str) -> bool:
    import glob

    return Path(path).exists() or bool(glob.glob(path))


def _first_line(e: Exception) -> str:
    text = str(e).strip().splitlines()
    return text[0] if text else type(e).__name__
