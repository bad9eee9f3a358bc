"""Incremental aggregates: one accumulator per window (create / add / merge / result).

The accumulator of a window is a flat Python list with a few slots per
aggregate; ``add`` is generated once per configuration as straight-line
Python (no per-row dispatch over aggregate kinds), because it runs for every
(row, window) pair.

Semantics (SQL, null-ignoring):

- ``COUNT(*)`` counts rows; ``COUNT(x)`` non-null values; ``COUNT(DISTINCT x)``
  distinct non-null values (kept as a set: memory O(distinct values); every
  NaN counts as the same value, as in Spark).
- ``SUM``/``MIN``/``MAX``/``AVG`` ignore nulls and give ``None`` when the window
  has no non-null value. ``AVG`` is ``sum / count`` (true division).
- ``FIRST_VALUE(x)``/``LAST_VALUE(x)``: the value of the row with the smallest /
  largest (event time, arrival sequence); rows with a null ``x`` are ignored
  (Flink SQL's FIRST_VALUE/LAST_VALUE ignore nulls). The accumulator keeps
  (ts, seq, value), so session merges are exact. Without event time, arrival
  order alone decides.
- ``COLLECT_LIST(x)``: non-null values (Spark's collect_list skips nulls) in
  (event time, arrival) order, also across merges.

>>> agg = Aggregator((AggregateSpec("COUNT_STAR"), AggregateSpec("SUM", 0),
...                   AggregateSpec("FIRST_VALUE", 0), AggregateSpec("COLLECT_LIST", 0)))
>>> acc = agg.create()
>>> for seq, (ts, v) in enumerate([(20, 5), (10, None), (5, 7)]):
...     agg.add(acc, ts, seq, (v,))
>>> agg.result(acc)
(3, 12, 7, [7, 5])
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from wql.runtime.windows import MIN_TIME

#: Aggregate kinds the runtime implements (the names the compiler maps to).
KINDS = (
    "COUNT_STAR",
    "COUNT",
    "SUM",
    "MIN",
    "MAX",
    "AVG",
    "COUNT_DISTINCT",
    "FIRST_VALUE",
    "LAST_VALUE",
    "COLLECT_LIST",
)

_SLOTS = {"AVG": 2}
_NAN = float("nan")


@dataclass(frozen=True)
class AggregateSpec:
    """One aggregate: its kind and the index of its argument in the row's values."""

    kind: str
    arg: int | None = None

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ValueError(f"unknown aggregate {self.kind!r}; expected one of {', '.join(KINDS)}")
        if self.kind == "COUNT_STAR":
            if self.arg is not None:
                raise ValueError("COUNT_STAR takes no argument")
        elif not isinstance(self.arg, int) or self.arg < 0:
            raise ValueError(f"{self.kind} needs the index of its argument column")


class Aggregator:
    """The compiled form of a tuple of :class:`AggregateSpec` (built once per operator)."""

    def __init__(self, specs: Iterable[AggregateSpec]) -> None:
        self.specs = tuple(specs)
        self._slot: list[int] = []
        n = 0
        for spec in self.specs:
            self._slot.append(n)
            n += _SLOTS.get(spec.kind, 1)
        self.width = n
        self.create: Callable[[], list] = self._compile_create()
        self.add: Callable[[list, int | None, int, tuple], None] = self._compile_add()
        #: ``result(acc)``: the aggregate values, in spec order.
        self.result: Callable[[list], tuple] = self._compile_result()

    # -- code generation ---------------------------------------------------

    def _compile_create(self) -> Callable[[], list]:
        parts = []
        for spec in self.specs:
            k = spec.kind
            if k in ("COUNT_STAR", "COUNT"):
                parts.append("0")
            elif k == "AVG":
                parts.extend(["None", "0"])
            elif k == "COUNT_DISTINCT":
                parts.append("set()")
            elif k == "COLLECT_LIST":
                parts.append("[]")
            else:
                parts.append("None")
        src = f"def create():\n    return [{', '.join(parts)}]\n"
        ns: dict[str, Any] = {}
        exec(compile(src, "<wql.runtime.aggregates.create>", "exec"), ns)  # noqa: S102
        return ns["create"]

    def _compile_add(self) -> Callable[[list, int | None, int, tuple], None]:
        lines = ["def add(acc, ts, seq, values):"]
        needs_order = any(
            s.kind in ("FIRST_VALUE", "LAST_VALUE", "COLLECT_LIST") for s in self.specs
        )
        if needs_order:
            lines.append(f"    t = {MIN_TIME} if ts is None else ts")
        for spec, s in zip(self.specs, self._slot, strict=True):
            k, a = spec.kind, spec.arg
            if k == "COUNT_STAR":
                lines.append(f"    acc[{s}] += 1")
                continue
            lines.append(f"    v = values[{a}]")
            lines.append("    if v is not None:")
            if k == "COUNT":
                lines.append(f"        acc[{s}] += 1")
            elif k == "SUM":
                lines.append(f"        c = acc[{s}]")
                lines.append(f"        acc[{s}] = v if c is None else c + v")
            elif k == "MIN":
                lines.append(f"        c = acc[{s}]")
                lines.append(f"        if c is None or v < c: acc[{s}] = v")
            elif k == "MAX":
                lines.append(f"        c = acc[{s}]")
                lines.append(f"        if c is None or v > c: acc[{s}] = v")
            elif k == "AVG":
                lines.append(f"        c = acc[{s}]")
                lines.append(f"        acc[{s}] = v if c is None else c + v")
                lines.append(f"        acc[{s + 1}] += 1")
            elif k == "COUNT_DISTINCT":
                # NaN != NaN: one canonical NaN, so all NaNs count as one value (Spark)
                lines.append(f"        acc[{s}].add(_NAN if v != v else v)")
            elif k == "FIRST_VALUE":
                lines.append(f"        c = acc[{s}]")
                lines.append(
                    f"        if c is None or (t, seq) < (c[0], c[1]): acc[{s}] = (t, seq, v)"
                )
            elif k == "LAST_VALUE":
                lines.append(f"        c = acc[{s}]")
                lines.append(
                    f"        if c is None or (t, seq) > (c[0], c[1]): acc[{s}] = (t, seq, v)"
                )
            elif k == "COLLECT_LIST":
                lines.append(f"        acc[{s}].append((t, seq, v))")
        if len(lines) == 1:
            lines.append("    return None")
        ns: dict[str, Any] = {"_NAN": _NAN}
        exec(compile("\n".join(lines) + "\n", "<wql.runtime.aggregates.add>", "exec"), ns)  # noqa: S102
        return ns["add"]

    # -- the rest is not per row -------------------------------------------

    def merge(self, target: list, source: list) -> None:
        """Fold ``source`` into ``target`` (session merge); ``source`` is dropped after."""
        for spec, s in zip(self.specs, self._slot, strict=True):
            k = spec.kind
            a, b = target[s], source[s]
            if k in ("COUNT_STAR", "COUNT"):
                target[s] = a + b
            elif k in ("SUM", "AVG"):
                target[s] = b if a is None else a if b is None else a + b
                if k == "AVG":
                    target[s + 1] += source[s + 1]
            elif k == "MIN":
                target[s] = b if a is None else a if b is None else min(a, b)
            elif k == "MAX":
                target[s] = b if a is None else a if b is None else max(a, b)
            elif k == "COUNT_DISTINCT":
                a |= b
            elif k == "FIRST_VALUE":
                if a is None or (b is not None and b[:2] < a[:2]):
                    target[s] = b
            elif k == "LAST_VALUE":
                if a is None or (b is not None and b[:2] > a[:2]):
                    target[s] = b
            elif k == "COLLECT_LIST":
                a.extend(b)

    def _compile_result(self) -> Callable[[list], tuple]:
        parts = []
        for spec, s in zip(self.specs, self._slot, strict=True):
            k = spec.kind
            if k == "AVG":
                parts.append(f"(None if acc[{s + 1}] == 0 else acc[{s}] / acc[{s + 1}])")
            elif k == "COUNT_DISTINCT":
                parts.append(f"len(acc[{s}])")
            elif k in ("FIRST_VALUE", "LAST_VALUE"):
                parts.append(f"(None if acc[{s}] is None else acc[{s}][2])")
            elif k == "COLLECT_LIST":
                parts.append(f"[x[2] for x in sorted(acc[{s}], key=_order)]")
            else:
                parts.append(f"acc[{s}]")
        src = f"def result(acc):\n    return ({''.join(p + ', ' for p in parts)})\n"
        ns: dict[str, Any] = {"_order": _order}
        exec(compile(src, "<wql.runtime.aggregates.result>", "exec"), ns)  # noqa: S102
        return ns["result"]

    def after_restore(self, acc: list) -> None:
        """Re-establish invariants a snapshot cannot carry: NaNs unpickle as new objects."""
        for spec, s in zip(self.specs, self._slot, strict=True):
            if spec.kind == "COUNT_DISTINCT" and any(v != v for v in acc[s]):
                acc[s] = {v for v in acc[s] if v == v} | {_NAN}

    def result_of_rows(self, rows: Iterable[tuple[int | None, int, tuple]]) -> tuple:
        """The aggregates over buffered rows (evictor windows), same semantics as ``add``."""
        acc = self.create()
        add = self.add
        for ts, seq, values in rows:
            add(acc, ts, seq, values)
        return self.result(acc)


def _order(entry: tuple) -> tuple:
    return entry[0], entry[1]
