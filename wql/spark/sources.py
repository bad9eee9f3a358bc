"""Source DataFrames: read what ``CREATE SOURCE ... WITH (...)`` declares, check what callers pass.

Reading (:func:`read_source`): ``format`` (``csv``, ``json``, ``parquet`` or
any Spark data source; defaults to the path's extension) and ``path`` (a
relative path resolves against the ``.wql`` file's folder), every other
option except WQL's own (``arrival_order``, ``processing_time``) goes to
Spark's reader. Text formats are read with the declared types; for a CSV
with ``header = 'true'`` the columns are matched *by name* from the header
(Spark would otherwise match the declared schema by position), so a missing
column is a clear error before anything runs.

Tables (:func:`read_table`): ``WITH (table = 'db.events')`` reads a table
of Spark's catalog instead of files, in batch (``spark.read.table``) and on
streams (``spark.readStream.table``). The table must exist and hold every
declared column with the declared type or one that converts without loss
(as below); a mismatch is an error at the column's declaration, naming the
table's column and type.

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

__all__ = [
    "conform",
    "declared_schema",
    "malformed_rows",
    "plain_csv_header",
    "read_source",
    "read_stream_source",
    "read_table",
    "resolve_path",
]

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
    if decl.table is not None:
        return read_table(spark, decl)
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
    header's order when the files already there have a header. A source naming a
    ``table`` streams that catalog table (:func:`read_table`).
    """
    if decl.table is not None:
        return read_table(spark, decl, stream=True)
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


def read_table(spark: Any, decl: P.SourceDecl, *, stream: bool = False) -> DataFrame:
    """The catalog table ``decl`` names (``WITH (table = ...)``), read or streamed, its
    schema checked against the declaration (positioned errors naming the column)."""
    table = decl.table
    assert table is not None
    what = "stream" if stream else "read"
    try:
        exists = spark.catalog.tableExists(table)
    except Exception as e:  # noqa: BLE001 - a malformed name is Spark's to judge
        raise WqlSemanticError(
            f"source {decl.name!r}: Spark cannot {what} table {table!r}: {_first_line(e)}",
            decl.span,
            code=ErrorCode.SOURCE_DATA,
        ) from None
    if not exists:
        raise WqlSemanticError(
            f"source {decl.name!r}: no table {table!r} in Spark's catalog",
            decl.span,
            hint="create it first, or give the database: table = 'db.events'",
            code=ErrorCode.SOURCE_DATA,
        )
    try:
        df = spark.readStream.table(table) if stream else spark.read.table(table)
    except Exception as e:  # noqa: BLE001 - Spark's reader errors become positioned WQL errors
        raise WqlSemanticError(
            f"source {decl.name!r}: Spark cannot {what} table {table!r}: {_first_line(e)}",
            decl.span,
            code=ErrorCode.SOURCE_DATA,
        ) from None
    _check_table_schema(decl, df, table)
    return df


def _check_table_schema(decl: P.SourceDecl, df: DataFrame, table: str) -> None:
    """Every declared column in ``table`` with a type that converts without loss."""
    fields = {f.name.lower(): f for f in df.schema.fields}
    for col in decl.columns:
        f = fields.get(col.name.lower())
        if f is None:
            raise WqlSemanticError(
                f"column {col.name!r} of source {decl.name!r} is not in table {table!r}",
                col.span or decl.span,
                hint=f"the table's columns: {', '.join(df.columns)}",
                code=ErrorCode.SCHEMA,
            )
        try:
            actual = T.from_spark(f.dataType, column=f.name)
        except WqlError:
            actual = None
        if actual is None or not _compatible(actual, col.type):
            has = actual.ddl if actual is not None else f.dataType.simpleString()
            raise WqlSemanticError(
                f"column {col.name!r} of source {decl.name!r} is declared {col.type.ddl} but "
                f"table {table!r} has {f.name} {has}",
                col.span or decl.span,
                code=ErrorCode.SCHEMA,
            )


#: The column Spark's PERMISSIVE mode puts a malformed record's text in (malformed_rows).
_MALFORMED = "__wql_malformed"


def malformed_rows(
    spark: Any, decl: P.SourceDecl, base_dir: Path | None, read: DataFrame | None = None
) -> int:
    """The rows of ``decl``'s CSV or JSON files with a value that does not parse.

    :func:`read_source` keeps them, the value NULL (Spark's PERMISSIVE mode, the
    default); this reads the files again with Spark's corrupt-record column and
    counts the rows that have it, so that they are reported (``malformed`` in the
    counters). 0 for other formats, other modes and table sources. ``read``: what
    :func:`read_source` gave for ``decl``; its schema is the one to read with (a
    CSV header's order), so the header is not read again (a Spark job).
    """
    if decl.table is not None or not decl.path:
        return 0
    fmt = (decl.format or Path(decl.path).suffix.lstrip(".")).lower()
    options = dict(decl.reader_options)
    if fmt not in ("csv", "json") or options.get("mode", "PERMISSIVE").upper() != "PERMISSIVE":
        return 0
    path = resolve_path(decl.path, base_dir)
    if read is not None:
        schema = ", ".join(
            f"{sql_identifier(f.name)} {f.dataType.simpleString()}" for f in read.schema.fields
        )
    else:
        schema = _file_schema(spark, decl, path, fmt, options, empty_ok=False)
    df = (
        spark.read.format(fmt)
        .options(**options)
        .option("columnNameOfCorruptRecord", _MALFORMED)
        .schema(f"{schema}, {_MALFORMED} STRING")
        .load(path)
    )
    # Every column is read (a hash of them all): Spark parses only the columns a query
    # reads, so a bad value elsewhere would not be seen, and it refuses a query of
    # the corrupt-record column alone.
    every = F.hash(*[F.col(sql_identifier(c)) for c in df.columns if c != _MALFORMED])
    from wql.spark.batch import small_by_size

    if small_by_size(df):
        # one scan that returns the malformed rows' hashes: no aggregation's exchange and
        # second job for a file of a few rows (docs/benchmarks.md, "The fixed cost of a
        # small query")
        return df.where(F.col(_MALFORMED).isNotNull()).select(every).toArrow().num_rows
    counted = F.count(F.when(F.col(_MALFORMED).isNotNull(), every))
    return int(df.agg(counted).first()[0])


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
        header = plain_csv_header(path, options)
        if header is None:
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


#: Reader options that do not change how Spark finds and splits a CSV file's header line.
_HEADER_NEUTRAL_OPTIONS = frozenset(
    ("header", "inferschema", "sep", "delimiter", "mode", "enforceschema")
    + ("timestampformat", "timestampntzformat", "dateformat")
)
#: More than Spark's own header parse in Python would have to reproduce: quoting, escapes,
#: comments (those characters send a header line to Spark).
_NOT_PLAIN = frozenset('"\\#')


def plain_csv_header(path: str, options: dict[str, str]) -> list[str] | None:
    """The column names of a one-file local CSV's header line when Spark's reading of it
    is plain splitting, else None (the caller asks Spark: a job).

    Spark takes the first non-blank line, parses it with the CSV parser and names
    empty and repeated columns itself (``_c<i>``, ``<name><i>``). On a line of
    printable ASCII without quotes, escapes or a comment mark, in a file that is not
    hidden from Spark's listing, read with options that do not touch the parse, that
    parse is a split on the separator; any other case (several files, a folder, a
    glob, other encodings or options, empty or repeated names) is Spark's to read.
    Equal to Spark's reading on the cases it answers: ``tests/spark/test_sources.py``.
    """
    if not _is_local(path) or any(c in path for c in "*?[]{}"):
        return None
    if any(k.lower() not in _HEADER_NEUTRAL_OPTIONS for k in options):
        return None
    sep = options.get("sep", options.get("delimiter", ","))
    p = Path(path).expanduser()
    if len(sep) != 1 or sep in _NOT_PLAIN or not 32 <= ord(sep) < 127 or sep.isalnum():
        return None
    if p.name.startswith(("_", ".")) or not p.is_file():
        return None
    try:
        with p.open("rb") as f:
            line = f.readline(1 << 16)
    except OSError:
        return None
    text = line.rstrip(b"\n")
    if text.endswith(b"\r"):
        text = text[:-1]
    if not line.endswith(b"\n") or not text.strip() or not all(32 <= b < 127 for b in text):
        return None
    names = text.decode("ascii").split(sep)
    if any(c in n or n != n.strip() for n in names for c in _NOT_PLAIN) or not all(names):
        return None
    if len({n.lower() for n in names}) != len(names):
        return None
    return names


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
