"""``WindowJoinOperator``: Flink SQL's window join in Python (what a stream runs).

Flink's table runtime (``operators/join/window``: ``WindowJoinOperator``
and its inner / outer subclasses) buffers each input's rows per window,
and when the watermark passes a window's max timestamp (``window_end - 1``,
``TimeWindowUtil.isWindowFired``) joins the window's two buffers once and
clears them:

- a row whose window has fired already is late: dropped and counted
  (``numLateRecordsDropped``);
- INNER emits every pair of rows that match; LEFT / RIGHT / FULL also emit
  each row of the outer side(s) that matched nothing, the other side's
  columns NULL.

Here one operator holds every key's windows (the stream pipeline host runs
it in one task, docs/streaming.md "Pipelines"): the rows of a window are
matched on the equalities of ON that compare one column of each side
(``JoinConfig.equi``), hashed per window. A NULL never equals anything, and
floating-point values compare as Spark's join does (``NaN`` equals
``NaN``, ``-0.0`` equals ``0.0``). The rest of the join (ON's other
conjuncts, WHERE, SELECT) is the host's business, which Spark evaluates
over the emitted joined rows; an outer join with such conjuncts gives each
row of an outer side with its equality matches as partners instead
(``JoinConfig.partners``), since whether it is unmatched depends on them.

A side takes its windows from its rows (a view's final rows: the host
passes each row's window) or from an assigner (a window table function
over a table: each row in every window its event time gets, the window
columns filled in). Every row is accounted for (``rows_in = fired +
dropped``): in a window's join, or dropped as ``late`` (every window it has
fired), or without event time (``JoinConfig.missing_time_reason``).

The host-facing calls are the ``WindowRankOperator``'s (``advance_watermark``,
``end_of_input``, ``drain``, ``drain_late``, ``counters``, ``active_keys``,
``timers``, ``snapshot_key`` / ``restore_key``: one key, ``()``, holds
every window); rows come in by side through :meth:`process_side`.

>>> from wql.runtime.assigners import TumblingWindows
>>> cfg = JoinConfig(
...     "INNER", ((0, 0),),
...     (JoinSide(2, TumblingWindows(10), (1, None, None)), JoinSide(2)),
... )
>>> op = WindowJoinOperator(cfg)
>>> op.process_side(0, None, 3, ("a", None))
>>> op.process_side(1, (0, 10), None, ("a", 7))
>>> op.advance_watermark(9)
>>> [r[:2] + (r[3],) for r in op.drain()]
[('a', datetime.datetime(1970, 1, 1, 0, 0), 7)]
"""

from __future__ import annotations

import heapq
from collections.abc import Hashable, Iterable
from dataclasses import dataclass
from datetime import datetime, timedelta

from wql.runtime import snapshot as _snap
from wql.runtime.assigners import DROP_LATE, DROP_MISSING_TIMESTAMP, DropRow, WindowAssigner
from wql.runtime.config import Counters
from wql.runtime.windows import MAX_TIME, MIN_TIME

__all__ = [
    "FINAL",
    "INNER",
    "LEFT_PARTNERS",
    "RIGHT_PARTNERS",
    "JoinConfig",
    "JoinSide",
    "WindowJoinOperator",
    "as_timestamp",
]

INNER, LEFT, RIGHT, FULL = "INNER", "LEFT", "RIGHT", "FULL"
#: What a joined row of a join with ``JoinConfig.partners`` is (its last-but-one field).
FINAL, LEFT_PARTNERS, RIGHT_PARTNERS = 0, 1, 2
_EPOCH = datetime(1970, 1, 1)
#: The one key the operator's state is kept under (it holds every key's windows).
_ALL: tuple = ()


def as_timestamp(ms: int) -> datetime:
    """Epoch milliseconds as the runtime's TIMESTAMP value (a naive UTC ``datetime``)."""
    return _EPOCH + timedelta(milliseconds=ms)


@dataclass(frozen=True)
class JoinSide:
    """One input of the join.

    Attributes:
        width: the number of columns of the side's rows.
        assigner: assigns a row its windows by its event time (a window table
            function over a table); None: each row comes with its window (a view).
        window_columns: positions of ``window_start``, ``window_end`` and
            ``window_time`` in the row, filled per assigned window (None: not read).
    """

    width: int
    assigner: WindowAssigner | None = None
    window_columns: tuple[int | None, int | None, int | None] = (None, None, None)


@dataclass(frozen=True)
class JoinConfig:
    """One window join, as the runtime sees it.

    Attributes:
        kind: ``INNER``, ``LEFT``, ``RIGHT`` or ``FULL``.
        equi: ``(left position, right position)`` per equality of ON between a
            column of each side (the window bounds among them).
        sides: the left and right :class:`JoinSide`.
        missing_time_reason: the drop reason of an assigned side's row without
            event time.
        partners: ON has conditions besides ``equi`` that the host evaluates, and
            the join is outer: a row of an outer side leaves once with the rows it
            matches on ``equi`` as its partners (:meth:`WindowJoinOperator._partners`),
            so that the host keeps the partners the whole ON matches and, when there
            are none, the row unmatched.
        side_names: the sides' names (their qualifiers): each side's dropped rows are
            also counted under its name (``Counters.sides``), as Flink's window join
            counts its late rows per input (``leftNumLateRecordsDropped``,
            ``rightNumLateRecordsDropped``); None: in the total only.
    """

    kind: str
    equi: tuple[tuple[int, int], ...]
    sides: tuple[JoinSide, JoinSide]
    missing_time_reason: str = DROP_MISSING_TIMESTAMP
    partners: bool = False
    side_names: tuple[str, str] | None = None

    def __post_init__(self) -> None:
        if self.kind not in (INNER, LEFT, RIGHT, FULL):
            raise ValueError(f"unknown join kind {self.kind!r}")

    @property
    def extended_rows(self) -> bool:
        """A join's rows never carry ``EXTENDED_FIELDS``."""
        return False


class _NaN:
    """Spark's join key for every floating-point NaN (NaN equals NaN there)."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "NaN"


_NAN = _NaN()


def _join_key(row: tuple, positions: tuple[int, ...]) -> tuple | None:
    """The row's values at ``positions`` as a hashable key; None when one is NULL."""
    out = []
    for p in positions:
        v = row[p]
        if v is None:
            return None
        if isinstance(v, float):
            if v != v:
                v = _NAN
            elif v == 0.0:
                v = 0.0  # -0.0 joins 0.0
        out.append(v)
    return tuple(out)


class WindowJoinOperator:
    """The window join of one query (all keys, both sides); see the module docstring."""

    def __init__(self, config: JoinConfig, fast: bool = True) -> None:
        self.config = config
        self.watermark = MIN_TIME
        self.processing_time = MIN_TIME
        self.counters = Counters()
        #: (window_start, window_end) -> [left rows, right rows]
        self._windows: dict[tuple[int, int], tuple[list[tuple], list[tuple]]] = {}
        self._heap: list[tuple[int, int]] = []  # (window_end, window_start)
        self._out: list[tuple] = []
        self._left = tuple(a for a, _ in config.equi)
        self._right = tuple(b for _, b in config.equi)

    # ------------------------------------------------------------------ input

    def process_side(
        self, side: int, window: tuple[int, int] | None, timestamp: int | None, values: tuple
    ) -> None:
        """One row of side ``side`` (0 left, 1 right): in ``window`` (a view's row), or in
        the windows its ``timestamp`` gets (a window table's row)."""
        self.counters.rows_in += 1
        spec = self.config.sides[side]
        if window is not None:
            if window[1] - 1 <= self.watermark:
                self._drop(DROP_LATE, side)
            else:
                self._add(side, window, values)
            return
        assert spec.assigner is not None
        if timestamp is None:
            self._drop(self.config.missing_time_reason, side)
            return
        try:
            assigned = spec.assigner.assign_windows(timestamp, values)
        except DropRow as d:
            self._drop(d.reason, side)
            return
        taken = False
        start_at, end_at, time_at = spec.window_columns
        for w in assigned:
            start, end = w.start, w.end  # type: ignore[union-attr]
            if end - 1 <= self.watermark:
                continue  # that window has joined: late for it (isWindowFired)
            row = list(values)
            if start_at is not None:
                row[start_at] = as_timestamp(start)
            if end_at is not None:
                row[end_at] = as_timestamp(end)
            if time_at is not None:
                row[time_at] = as_timestamp(end - 1)
            self._add(side, (start, end), tuple(row))
            taken = True
        if not taken:
            self._drop(DROP_LATE, side)

    def process_rows(
        self,
        side: int,
        windows: Iterable[tuple[int, int] | None],
        timestamps: Iterable[int | None],
        rows: Iterable[tuple],
    ) -> None:
        """:meth:`process_side` for each row, in order."""
        for window, ts, values in zip(windows, timestamps, rows, strict=True):
            self.process_side(side, window, ts, values)

    def _add(self, side: int, window: tuple[int, int], row: tuple) -> None:
        buffers = self._windows.get(window)
        if buffers is None:
            buffers = self._windows[window] = ([], [])
            heapq.heappush(self._heap, (window[1], window[0]))
        buffers[side].append(row)

    def _drop(self, reason: str, side: int) -> None:
        dropped = self.counters.dropped
        dropped[reason] = dropped.get(reason, 0) + 1
        names = self.config.side_names
        if names is not None:
            mine = self.counters.sides.setdefault(names[side], {})
            mine[reason] = mine.get(reason, 0) + 1

    # ----------------------------------------------------------------- clocks

    def advance_watermark(self, watermark: int) -> None:
        """Raise the watermark; every window whose end - 1 it reaches joins, by window end."""
        if watermark <= self.watermark:
            return
        self.watermark = watermark
        heap = self._heap
        while heap and heap[0][0] - 1 <= watermark:
            end, start = heapq.heappop(heap)
            left, right = self._windows.pop((start, end))
            self._join(left, right)

    def advance_processing_time(self, time: int) -> None:
        """A window join runs on event time only."""
        self.processing_time = max(self.processing_time, time)

    def end_of_input(self) -> None:
        self.advance_watermark(MAX_TIME)

    def _join(self, left: list[tuple], right: list[tuple]) -> None:
        kind = self.config.kind
        if self.config.partners and kind != INNER:
            self._partners(left, right)
            return
        lw, rw = (s.width for s in self.config.sides)
        out = self._out
        before = len(out)
        by_key = self._right_index(right)
        matched_right = [False] * len(right) if kind in (RIGHT, FULL) else None
        no_right = (None,) * rw
        for row in left:
            k = _join_key(row, self._left)
            hits = by_key.get(k, ()) if k is not None else ()
            for j in hits:
                out.append(row + right[j])
                if matched_right is not None:
                    matched_right[j] = True
            if not hits and kind in (LEFT, FULL):
                out.append(row + no_right)
        if matched_right is not None:
            no_left = (None,) * lw
            out.extend(no_left + right[j] for j, m in enumerate(matched_right) if not m)
        self.counters.rows_emitted += len(out) - before

    def _right_index(self, right: list[tuple]) -> dict[tuple, list[int]]:
        """The positions of the right rows by their join key (a NULL key matches none)."""
        by_key: dict[tuple, list[int]] = {}
        for j, row in enumerate(right):
            k = _join_key(row, self._right)
            if k is not None:
                by_key.setdefault(k, []).append(j)
        return by_key

    def _partners(self, left: list[tuple], right: list[tuple]) -> None:
        """An outer join whose ON has conditions the host evaluates: every emitted row
        ends with ``(kind, partners)``. ``FINAL`` rows are joined rows as they are (a
        row of an outer side that matched no row on the equalities: no row can match
        the whole ON, the other side NULL); a ``LEFT_PARTNERS`` row is a left row (the
        right side NULL) with the right rows it matches on the equalities, a
        ``RIGHT_PARTNERS`` row a right row with its left ones. The pairs leave with the
        rows of one side (the left one's, the right one's for a RIGHT join); a FULL
        join's right rows with partners only say whether they stay unmatched."""
        kind = self.config.kind
        lw, rw = (s.width for s in self.config.sides)
        out = self._out
        before = len(out)
        by_key = self._right_index(right)
        no_left, no_right = (None,) * lw, (None,) * rw
        of_right: list[list[tuple]] = [[] for _ in right]
        for row in left:
            k = _join_key(row, self._left)
            hits = by_key.get(k, ()) if k is not None else ()
            if kind in (RIGHT, FULL):
                for j in hits:
                    of_right[j].append(row)
            if kind not in (LEFT, FULL):
                continue
            if hits:
                out.append((*row, *no_right, LEFT_PARTNERS, [right[j] for j in hits]))
            else:
                out.append((*row, *no_right, FINAL, None))
        if kind in (RIGHT, FULL):
            for j, row in enumerate(right):
                if of_right[j]:
                    out.append((*no_left, *row, RIGHT_PARTNERS, of_right[j]))
                else:
                    out.append((*no_left, *row, FINAL, None))
        self.counters.rows_emitted += len(out) - before

    # ----------------------------------------------------------------- output

    def drain(self) -> list[tuple]:
        out, self._out = self._out, []
        return out

    def drain_late(self) -> list[tuple]:
        """A window join has no late output (late rows are counted)."""
        return []

    # ------------------------------------------------------ state (streams)

    def timers(self, key: Hashable) -> tuple[list[int], list[int]]:
        return sorted({end - 1 for end, _ in self._heap}), []

    def active_keys(self) -> list[Hashable]:
        return [_ALL] if self._windows else []

    def open_windows(self) -> int:
        return len(self._windows)

    def snapshot_key(self, key: Hashable) -> bytes:
        """Every window's buffered rows (the operator keeps all keys under one)."""
        windows = [(w, list(b[0]), list(b[1])) for w, b in self._windows.items()]
        return _snap.dumps({"kind": "join", "windows": windows})

    def restore_key(self, key: Hashable, data: bytes) -> None:
        payload = _snap.loads(data)
        if not isinstance(payload, dict) or payload.get("kind") != "join":
            raise _snap.SnapshotError("not a window join's snapshot")
        self._windows = {}
        self._heap = []
        for w, left, right in payload["windows"]:
            window = (int(w[0]), int(w[1]))
            self._windows[window] = ([tuple(r) for r in left], [tuple(r) for r in right])
            self._heap.append((window[1], window[0]))
        heapq.heapify(self._heap)
