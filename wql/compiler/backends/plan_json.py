"""Plan -> JSON-ready data (``wql compile --target plan-json``).

Every plan node with its fields, the node's type under ``"node"`` (and its
``kind`` where the class has one, e.g. ``"TUMBLE"``), WQL types as DDL text,
enums as their values, spans as line/column. :data:`PLAN_JSON_VERSION`
changes when the shape does.
"""

from __future__ import annotations

import dataclasses
import enum
from typing import Any

from wql.compiler import plan as P
from wql.compiler.types import WqlType
from wql.errors import Span

__all__ = ["PLAN_JSON_VERSION", "plan_to_json"]

PLAN_JSON_VERSION = 1


def plan_to_json(program: P.Program, filename: str | None = None) -> dict[str, Any]:
    """The plan as JSON-ready data (see the module docstring)."""
    data = _json(program)
    assert isinstance(data, dict)
    return {"wql_plan_version": PLAN_JSON_VERSION, "file": filename, **data}


def _json(value: Any) -> Any:
    if isinstance(value, Span):
        return {
            "line": value.line,
            "column": value.column,
            "end_line": value.end_line,
            "end_column": value.end_column,
        }
    if isinstance(value, WqlType):
        return value.ddl
    if isinstance(value, enum.Enum):
        return value.value
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        out: dict[str, Any] = {"node": type(value).__name__}
        kind = getattr(type(value), "kind", None)
        if isinstance(kind, str):
            out["kind"] = kind
        for f in dataclasses.fields(value):
            out[f.name] = _json(getattr(value, f.name))
        return out
    if isinstance(value, (tuple, list)):
        return [_json(v) for v in value]
    if isinstance(value, dict):
        return {str(k): _json(v) for k, v in value.items()}
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    return repr(value)  # pragma: no cover - every plan field type is handled above
