"""Reading the examples' expected outputs and printing Spark rows the same way."""

from __future__ import annotations

import csv
import datetime as dt
import decimal
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples"
EXPECTED = EXAMPLES / "expected"


def example_files() -> list[Path]:
    return sorted(EXAMPLES.glob("*.wql"))


def pipeline_example_files() -> list[Path]:
    """The examples whose queries read views (``examples/pipelines``, ``examples/nexmark``):
    batch only, pipelines do not run on streams (docs/streaming.md, "Pipelines")."""
    return sorted([*EXAMPLES.glob("pipelines/*.wql"), *EXAMPLES.glob("nexmark/*.wql")])


def expected_outputs(stem: str) -> dict[str, tuple[list[str], list[tuple[str, ...]]]]:
    """``{output name: (header, sorted rows)}`` from ``examples/expected/<stem>/*.csv``."""
    out = {}
    for path in sorted((EXPECTED / stem).glob("*.csv")):
        with path.open(newline="") as f:
            rows = list(csv.reader(f))
        out[path.stem] = (rows[0], sorted(tuple(r) for r in rows[1:]))
    return out


def text(value: Any) -> str:
    """A value as the expected CSV files spell it."""
    if value is None:
        return ""
    if isinstance(value, dt.datetime):
        return value.strftime("%Y-%m-%d %H:%M:%S") + (
            f".{value.microsecond // 1000:03d}" if value.microsecond else ""
        )
    if isinstance(value, float):
        return repr(round(value, 9))
    if isinstance(value, decimal.Decimal):
        return str(value)
    if isinstance(value, list):
        return "[" + ", ".join(text(v) for v in value) + "]"
    return str(value)


def rows_as_text(df) -> tuple[list[str], list[tuple[str, ...]]]:
    return list(df.columns), sorted(tuple(text(v) for v in r) for r in df.collect())
