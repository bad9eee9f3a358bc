"""Evictors: remove rows from a window's buffer around the window function.

With an evictor the window contents are a list of rows
``(timestamp, arrival_seq, values)`` in buffer order (arrival order; after a
session merge, the merged rows are re-ordered by arrival). On every firing
the operator does exactly what Flink's ``EvictingWindowOperator.emitWindowContents``
does:

1. ``evict_before(rows, window)`` — returns the rows that stay,
2. the aggregates are computed over those rows and emitted,
3. ``evict_after(rows, window)`` — returns the rows that stay,
4. the window buffer is replaced by what remains (an empty buffer is no
   buffer: the next firing emits nothing until a row arrives).

An evictor evicts either before or after (``after=False`` / ``True``, Flink's
``doEvictAfter``); the other method keeps every row.

>>> rows = [(t, i, (1,)) for i, t in enumerate([1000, 2000, 3999])]
>>> [r[0] for r in CountEvictor(2).evict_before(rows, None)]
[2000, 3999]
>>> [r[0] for r in TimeEvictor(2000).evict_before(rows, None)]
[2000, 3999]
"""

from __future__ import annotations

from dataclasses import dataclass

from wql.runtime.windows import Window

#: One buffered row: (event time or None, arrival sequence number, values).
Row = tuple[int | None, int, tuple]


class Evictor:
    """Base of the evictors (frozen dataclasses, no state)."""

    after: bool = False

    def evict(self, rows: list[Row], window: Window | None) -> list[Row]:
        """The rows that remain; must not mutate ``rows``."""
        raise NotImplementedError

    def evict_before(self, rows: list[Row], window: Window | None) -> list[Row]:
        return rows if self.after else self.evict(rows, window)

    def evict_after(self, rows: list[Row], window: Window | None) -> list[Row]:
        return self.evict(rows, window) if self.after else rows


@dataclass(frozen=True)
class CountEvictor(Evictor):
    """COUNT(n): keep the last ``n`` rows of the buffer."""

    count: int
    after: bool = False

    def __post_init__(self) -> None:
        if self.count <= 0:
            raise ValueError("COUNT evictor needs a positive count")

    def evict(self, rows, window):
        if len(rows) <= self.count:
            return rows
        return rows[len(rows) - self.count :]


@dataclass(frozen=True)
class TimeEvictor(Evictor):
    """TIME(t): keep rows with ``ts > max_ts - t`` where max_ts is the newest row's time.

    Flink's ``TimeEvictor``: nothing is evicted when the rows carry no
    timestamp (decided from the first row).
    """

    window_size: int
    after: bool = False

    def __post_init__(self) -> None:
        if self.window_size < 0:
            raise ValueError("TIME evictor needs a non-negative interval")

    def evict(self, rows, window):
        if not rows or rows[0][0] is None:
            return rows
        newest = max(r[0] for r in rows if r[0] is not None)
        cutoff = newest - self.window_size
        return [r for r in rows if r[0] is None or r[0] > cutoff]


@dataclass(frozen=True)
class DeltaEvictor(Evictor):
    """DELTA(expr, threshold): remove rows with ``|v - v_last| >= threshold``.

    ``value_index`` names the pre-evaluated ``expr``; ``v_last`` is the value
    of the last row in the buffer (Flink's ``DeltaEvictor``). Rows whose value
    is null are kept (their delta is unknown); when the last row's value is
    null nothing is evicted.
    """

    value_index: int
    threshold: float
    after: bool = False

    def evict(self, rows, window):
        if not rows:
            return rows
        i = self.value_index
        last = rows[-1][2][i]
        if last is None:
            return rows
        threshold = self.threshold
        return [r for r in rows if r[2][i] is None or abs(r[2][i] - last) < threshold]
