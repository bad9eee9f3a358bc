"""WQL's scalar types and their mapping to and from Spark.

The language (docs/language.md, "CREATE SOURCE") declares ``STRING``, ``INT``, ``BIGINT``,
``DOUBLE``, ``BOOLEAN``, ``TIMESTAMP`` (millisecond precision, UTC), ``DATE`` and
``DECIMAL(p, s)``. The compiler additionally needs ``INTERVAL`` (window sizes,
dynamic session gaps), ``ARRAY<T>`` (the result of ``COLLECT_LIST``) and
``NULL`` (the type of a bare ``NULL`` literal). ``TINYINT``, ``SMALLINT``,
``FLOAT`` and ``BINARY`` exist so that a DataFrame passed by the caller can be
described exactly; they cannot be declared in ``CREATE SOURCE`` unless the
grammar accepts them. ``UNKNOWN`` is what type inference yields for a
function whose result type it cannot derive: it is accepted wherever a type
is needed and checked by Spark when the query runs.

>>> DECIMAL(10, 2).ddl
'DECIMAL(10,2)'
>>> array_of(BIGINT).ddl
'ARRAY<BIGINT>'
>>> from_spark(to_spark(DECIMAL(5, 1))) == DECIMAL(5, 1)
True
>>> parse_type_name("decimal(12, 3)")
WqlType(kind='DECIMAL', precision=12, scale=3, element=None)
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from wql.errors import ErrorCode, Span, WqlSemanticError, WqlUnsupportedError

_NUMERIC_RANK = {
    "TINYINT": 1,
    "SMALLINT": 2,
    "INT": 3,
    "BIGINT": 4,
    "DECIMAL": 5,
    "FLOAT": 6,
    "DOUBLE": 7,
}


@dataclass(frozen=True)
class WqlType:
    """One WQL type. ``precision``/``scale`` only for DECIMAL, ``element`` only for ARRAY."""

    kind: str
    precision: int | None = None
    scale: int | None = None
    element: WqlType | None = None

    def __post_init__(self) -> None:
        if self.kind == "DECIMAL":
            if self.precision is None or self.scale is None:
                raise ValueError("DECIMAL needs precision and scale")
            if not (1 <= self.precision <= 38 and 0 <= self.scale <= self.precision):
                raise ValueError(f"invalid DECIMAL({self.precision}, {self.scale})")
        if (self.kind == "ARRAY") != (self.element is not None):
            raise ValueError("only ARRAY has an element type")

    @property
    def ddl(self) -> str:
        """Spark DDL spelling (``BIGINT``, ``DECIMAL(10,2)``, ``ARRAY<STRING>``)."""
        if self.kind == "DECIMAL":
            return f"DECIMAL({self.precision},{self.scale})"
        if self.kind == "ARRAY":
            assert self.element is not None
            return f"ARRAY<{self.element.ddl}>"
        if self.kind == "INTERVAL":
            return "INTERVAL DAY TO SECOND"
        return self.kind

    def __str__(self) -> str:
        return self.ddl

    @property
    def is_numeric(self) -> bool:
        return self.kind in _NUMERIC_RANK

    @property
    def is_integral(self) -> bool:
        return self.kind in ("TINYINT", "SMALLINT", "INT", "BIGINT")

    @property
    def is_unknown(self) -> bool:
        """UNKNOWN and NULL are compatible with every type."""
        return self.kind in ("UNKNOWN", "NULL")

    @property
    def is_temporal(self) -> bool:
        return self.kind in ("TIMESTAMP", "DATE")


STRING = WqlType("STRING")
TINYINT = WqlType("TINYINT")
SMALLINT = WqlType("SMALLINT")
INT = WqlType("INT")
BIGINT = WqlType("BIGINT")
FLOAT = WqlType("FLOAT")
DOUBLE = WqlType("DOUBLE")
BOOLEAN = WqlType("BOOLEAN")
TIMESTAMP = WqlType("TIMESTAMP")
DATE = WqlType("DATE")
BINARY = WqlType("BINARY")
INTERVAL = WqlType("INTERVAL")
NULL = WqlType("NULL")
UNKNOWN = WqlType("UNKNOWN")


def DECIMAL(precision: int, scale: int) -> WqlType:  # noqa: N802 - reads like the type name
    return WqlType("DECIMAL", precision, scale)


def array_of(element: WqlType) -> WqlType:
    return WqlType("ARRAY", element=element)


# Types a CREATE SOURCE column may declare (docs/language.md), by name.
DECLARABLE: dict[str, WqlType] = {
    "STRING": STRING,
    "INT": INT,
    "INTEGER": INT,
    "BIGINT": BIGINT,
    "DOUBLE": DOUBLE,
    "BOOLEAN": BOOLEAN,
    "TIMESTAMP": TIMESTAMP,
    "DATE": DATE,
}

_DECIMAL_RE = re.compile(r"^\s*DECIMAL\s*(?:\(\s*(\d+)\s*(?:,\s*(\d+)\s*)?\))?\s*$", re.IGNORECASE)


def parse_type_name(text: str, span: Span | None = None) -> WqlType:
    """A declared type name (``BIGINT``, ``decimal(10,2)``) as a WqlType.

    Raises a positioned WqlSemanticError for anything else.
    """
    name = text.strip().upper()
    if name in DECLARABLE:
        return DECLARABLE[name]
    m = _DECIMAL_RE.match(text)
    if m:
        precision = int(m.group(1)) if m.group(1) else 10
        scale = int(m.group(2)) if m.group(2) else 0
        if not (1 <= precision <= 38 and 0 <= scale <= precision):
            raise WqlSemanticError(
                f"DECIMAL({precision}, {scale}) is invalid: precision must be 1..38 "
                "and scale 0..precision",
                span,
                code=ErrorCode.OUT_OF_RANGE,
            )
        return DECIMAL(precision, scale)
    raise WqlSemanticError(
        f"unknown type {text.strip()!r}",
        span,
        expected=sorted(set(DECLARABLE) - {"INTEGER"}) + ["DECIMAL(p, s)"],
        code=ErrorCode.UNKNOWN_NAME,
    )


def to_spark(t: WqlType):
    """The pyspark.sql.types instance for ``t`` (TIMESTAMP is Spark's TimestampType)."""
    from pyspark.sql import types as T

    simple = {
        "STRING": T.StringType,
        "TINYINT": T.ByteType,
        "SMALLINT": T.ShortType,
        "INT": T.IntegerType,
        "BIGINT": T.LongType,
        "FLOAT": T.FloatType,
        "DOUBLE": T.DoubleType,
        "BOOLEAN": T.BooleanType,
        "TIMESTAMP": T.TimestampType,
        "DATE": T.DateType,
        "BINARY": T.BinaryType,
        "NULL": T.NullType,
        "INTERVAL": T.DayTimeIntervalType,
    }
    if t.kind in simple:
        return simple[t.kind]()
    if t.kind == "DECIMAL":
        assert t.precision is not None and t.scale is not None
        return T.DecimalType(t.precision, t.scale)
    if t.kind == "ARRAY":
        assert t.element is not None
        return T.ArrayType(to_spark(t.element), containsNull=True)
    raise WqlUnsupportedError(f"type {t.ddl} has no Spark equivalent", code=ErrorCode.UNSUPPORTED)


def from_spark(dt, *, column: str | None = None, span: Span | None = None) -> WqlType:
    """The WqlType of a Spark DataType (for DataFrames passed by the caller).

    TIMESTAMP_NTZ maps to TIMESTAMP: WQL timestamps are UTC wall-clock values
    either way. Types WQL cannot represent (maps, structs, ...) raise a
    WqlUnsupportedError naming the column.
    """
    from pyspark.sql import types as T

    pairs = [
        (T.StringType, STRING),
        (T.CharType, STRING),
        (T.VarcharType, STRING),
        (T.ByteType, TINYINT),
        (T.ShortType, SMALLINT),
        (T.IntegerType, INT),
        (T.LongType, BIGINT),
        (T.FloatType, FLOAT),
        (T.DoubleType, DOUBLE),
        (T.BooleanType, BOOLEAN),
        (T.TimestampType, TIMESTAMP),
        (T.TimestampNTZType, TIMESTAMP),
        (T.DateType, DATE),
        (T.BinaryType, BINARY),
        (T.NullType, NULL),
        (T.DayTimeIntervalType, INTERVAL),
    ]
    for cls, wql_type in pairs:
        if isinstance(dt, cls):
            return wql_type
    if isinstance(dt, T.DecimalType):
        return DECIMAL(dt.precision, dt.scale)
    if isinstance(dt, T.ArrayType):
        return array_of(from_spark(dt.elementType, column=column, span=span))
    where = f" of column {column!r}" if column else ""
    raise WqlUnsupportedError(
        f"Spark type {dt.simpleString()}{where} is not supported by WQL",
        span,
        code=ErrorCode.SCHEMA,
    )


def schema_from_spark(struct) -> tuple[tuple[str, WqlType], ...]:
    """``(name, type)`` pairs for a Spark StructType (e.g. ``df.schema``)."""
    return tuple((f.name, from_spark(f.dataType, column=f.name)) for f in struct.fields)
