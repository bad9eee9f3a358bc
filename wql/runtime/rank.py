"""``WindowRankOperator``: Flink SQL's window Top-N and window deduplication in Python.

Flink's table runtime ranks the rows of each window of a windowed relation
(``operators/rank/window``: ``WindowRankProcessor``, ``TopNRecordsCombiner``;
``operators/deduplicate/window``: ``RowTimeWindowDeduplicateProcessor``,
``RowTimeDeduplicateRecordsCombiner``). Per key (the PARTITION BY keys
besides the window bounds) and window:

- a row whose window has fired (``window_end - 1 <= watermark``,
  ``TimeWindowUtil.isWindowFired``) is late: dropped and counted;
- otherwise it joins the window's buffer, and the window's timer at
  ``window_end - 1`` is registered;
- when the watermark reaches the timer, the window emits its rows ranked
  1..N -- Top-N: by the ORDER BY, equal rows in arrival order (Flink's
  ``TopNBuffer`` keeps equal sort keys in insertion order); deduplication:
  the one row with the smallest time, the first of equal ones (keep first),
  or with the largest time, the last of equal ones (keep last:
  ``DeduplicateFunctionHelper.isDuplicate`` replaces on ``>=``) -- and is
  cleared. With ``RANK()`` or ``DENSE_RANK()`` (which Flink's window Top-N
  does not run) equal rows share a rank, as SQL defines them, and every row
  ranked at most N is kept: ties at N keep more than N rows; rows still come
  out in sort order, equal ones in arrival order.

The buffer keeps only the rows that can still rank within N (as Flink's
combiner), so state is O(N) per window. A row is in no output when it ranks
below N in every window it joined: counted under :data:`DROP_OUTSIDE_TOP_N`
(or :data:`DROP_DUPLICATE` for a deduplication), so every row is accounted
for (``rows_in = fired + late + dropped``, docs/runtime.md "Counters").

Windows come from the rows (a view's ``window_start`` and ``window_end``
values) or from an assigner (a window table function over a table: the
row's windows by its event time). The host-facing calls are the
``WindowOperator``'s (``process_element``, ``process_batch``,
``advance_watermark``, ``end_of_input``, ``drain``, ``drain_late``,
``counters``, per-key snapshots); emitted rows have its layout
(``config.EMITTED_FIELDS``: the window, pane 0, ``ON_TIME``), with the rank
and the row's values as the results, and ``FIRED_FIELDS`` when tagging.

>>> op = WindowRankOperator(RankConfig(2, ((0, True),), bounds=(1, 2)))
>>> for v in (5, 9, 7):
...     op.process_element(("k",), None, (v, 0, 10))
>>> op.end_of_input()
>>> [(r[7], r[8]) for r in op.drain()]
[(1, 9), (2, 7)]
"""

from __future__ import annotations

import heapq
from collections.abc import Hashable, Sequence
from dataclasses import dataclass
from typing import Any

from wql.runtime import snapshot as _snap
from wql.runtime.assigners import (
    DROP_LATE,
    DROP_MISSING_TIMESTAMP,
    DropRow,
    WindowAssigner,
)
from wql.runtime.config import FIRED_BY_EVENT_TIMER, ON_TIME, Counters, RowBatch
from wql.runtime.windows import MAX_TIME, MIN_TIME

__all__ = ["DROP_DUPLICATE", "DROP_OUTSIDE_TOP_N", "RankConfig", "WindowRankOperator"]

Key = Hashable

#: Rows a window Top-N took but ranked below N in every window (not a loss: the query's choice).
DROP_OUTSIDE_TOP_N = "outside the top N"
#: Rows a deduplication took but did not keep.
DROP_DUPLICATE = "duplicate"

TOP = "TOP"
FIRST = "FIRST"
LAST = "LAST"
RANK = "RANK"
DENSE_RANK = "DENSE_RANK"
#: The keeps that rank with ties: equal rows share a rank (``RANK()``, ``DENSE_RANK()``).
_TIED = (RANK, DENSE_RANK)


@dataclass(frozen=True)
class RankConfig:
    """One window rank, as the runtime sees it.

    Attributes:
        limit: N, the rows kept per window (1..N).
        order: ``(values index, descending)`` per ORDER BY item; NULL comes
            first ascending and last descending.
        keep: ``"TOP"`` (Top-N by ``ROW_NUMBER()``, ties in arrival order),
            ``"RANK"`` / ``"DENSE_RANK"`` (Top-N by ``RANK()`` /
            ``DENSE_RANK()``: equal rows share a rank, and every row ranked
            at most N is kept, so ties can keep more than N rows),
            ``"FIRST"`` / ``"LAST"`` (deduplication by time: ``order`` is the
            time, ties keep the first / the last arrival).
        bounds: ``values`` indices of the window's start and end (ms): the
            rows of a view; or None with ``assigner``.
        assigner: assigns each row its windows by its event time (a window
            table function over a table).
        tag_firings: end emitted rows with ``FIRED_FIELDS`` (a pipeline stage).
    """

    limit: int
    order: tuple[tuple[int, bool], ...]
    keep: str = TOP
    bounds: tuple[int, int] | None = None
    assigner: WindowAssigner | None = None
    tag_firings: bool = False

    def __post_init__(self) -> None:
        if self.limit < 1:
            raise ValueError("a window rank keeps at least one row")
        if (self.bounds is None) == (self.assigner is None):
            raise ValueError("a window rank takes its windows from the rows or from an assigner")
        if self.keep not in (TOP, FIRST, LAST, RANK, DENSE_RANK):
            raise ValueError(f"unknown keep {self.keep!r}")
        if self.keep in (FIRST, LAST) and (self.limit != 1 or len(self.order) != 1):
            raise ValueError("a deduplication keeps one row by one time column")

    @property
    def extended_rows(self) -> bool:
        """A window rank's rows never carry ``EXTENDED_FIELDS`` (no panes, no changelog)."""
        return False


class _Desc:
    """Reverses the order of a value (a descending sort key)."""

    __slots__ = ("v",)

    def __init__(self, v: Any) -> None:
        self.v = v

    def __lt__(self, other: _Desc) -> bool:
        return other.v < self.v

    def __eq__(self, other: object) -> bool:
        return isinstance(other, _Desc) and self.v == other.v

    def __hash__(self) -> int:
        return hash(self.v)


class WindowRankOperator:
    """The window rank of one query (all keys of one partition); see the module docstring."""

    def __init__(self, config: RankConfig, fast: bool = True) -> None:
        self.config = config
        self.watermark = MIN_TIME
        self.processing_time = MIN_TIME
        self.counters = Counters()
        #: key -> (window_start, window_end) -> ranked entries (sort key, values, arrival)
        self._state: dict[Key, dict[tuple[int, int], list[tuple]]] = {}
        self._heap: list[tuple[int, int, Key, tuple[int, int]]] = []
        self._timer_seq = 0
        self._out: list[tuple] = []
        self._seq = 0
        #: arrival number -> windows still holding the row, and whether it was emitted
        self._held: dict[int, list] = {}
        self._tag = config.tag_firings
        # a window rank emits on timers only: every row it emits is fired by one
        self._cause: tuple = (FIRED_BY_EVENT_TIMER, None, None)
        self._drop_kept = DROP_DUPLICATE if config.keep in (FIRST, LAST) else DROP_OUTSIDE_TOP_N
        self._tied = config.keep in _TIED

    # ------------------------------------------------------------------ input

    def process_element(self, key: Key, timestamp: int | None, values: tuple) -> None:
        seq = self._seq
        self._seq += 1
        self.counters.rows_in += 1
        config = self.config
        if config.bounds is not None:
            start, end = values[config.bounds[0]], values[config.bounds[1]]
            windows: Sequence[tuple[int, int]] = [(start, end)]
        else:
            assert config.assigner is not None
            if timestamp is None:
                self._drop(DROP_MISSING_TIMESTAMP)
                return
            try:
                assigned = config.assigner.assign_windows(timestamp, values)
                windows = [(w.start, w.end) for w in assigned]  # type: ignore[union-attr]
            except DropRow as d:
                self._drop(d.reason)
                return
        sort = self._sort_key(values, seq)
        if config.assigner is not None and config.assigner.is_merging:
            self._process_session_row(key, windows[0], (sort, values, seq))
            return
        held = 0
        state = None
        for window in windows:
            if window[1] - 1 <= self.watermark:
                continue  # the window fired: late for it (isWindowFired)
            if state is None:
                state = self._state.setdefault(key, {})
            entries = state.get(window)
            if entries is None:
                entries = state[window] = []
                self._timer_seq += 1
                heapq.heappush(self._heap, (window[1] - 1, self._timer_seq, key, window))
            held += self._insert(entries, (sort, values, seq))
        if held:
            self._held[seq] = [held, False]
        elif not windows or all(w[1] - 1 <= self.watermark for w in windows):
            self._drop(DROP_LATE)
        else:
            self._drop(self._drop_kept)  # ranked out at once in every window

    def _process_session_row(self, key: Key, window: tuple[int, int], entry: tuple) -> None:
        """A row of a SESSION window table (Flink's ``UnalignedWindowTableFunctionOperator``
        feeding the rank): its window ``[ts, ts + gap)`` merges with every session of the
        key it intersects (touching counts, ``TimeWindow.intersects``); a merged session
        already behind the watermark is late (``MergingWindowProcessFunction``: the window
        is retired, the row dropped). A session's rows are ranked when it fires; merging
        two sessions merges their ranked buffers (the first N of a union are among the
        first N of its parts), and a row pushed out of a buffer is ranked out for good.
        """
        start, end = window
        state = self._state.get(key)
        merged = []
        if state:
            merged = [w for w in state if w[0] <= end and w[1] >= start]
            for w in merged:
                start, end = min(start, w[0]), max(end, w[1])
        if end - 1 <= self.watermark:
            self._drop(DROP_LATE)
            return
        if state is None:
            state = self._state[key] = {}
        entries: list[tuple] = []
        if merged:
            # the largest buffer takes the others' rows
            merged.sort(key=lambda w: -len(state[w]))
            entries = state.pop(merged[0])
            for w in merged[1:]:
                for other in state.pop(w):
                    if not self._insert(entries, other):
                        self._release(other[2])
        state[(start, end)] = entries
        if (start, end) not in merged:  # a merged session's timer stays when it did not grow
            self._timer_seq += 1
            heapq.heappush(self._heap, (end - 1, self._timer_seq, key, (start, end)))
        if self._insert(entries, entry):
            self._held[entry[2]] = [1, False]
        else:
            self._drop(self._drop_kept)

    def _sort_key(self, values: tuple, seq: int) -> tuple:
        key: list[Any] = []
        for index, descending in self.config.order:
            v = values[index]
            if descending:  # NULLS LAST
                key.append((1, 0) if v is None else (0, _Desc(v)))
            else:  # NULLS FIRST
                key.append((0, 0) if v is None else (1, v))
        # equal rows: arrival order; a keep-last deduplication keeps the latest
        key.append(-seq if self.config.keep == LAST else seq)
        return tuple(key)

    def _insert(self, entries: list[tuple], entry: tuple) -> int:
        """Put ``entry`` in the window's ranked buffer; whether it is kept there."""
        limit = self.config.limit
        if self._tied:
            return self._insert_tied(entries, entry, limit)
        if len(entries) >= limit and not entry[0] < entries[-1][0]:
            return 0
        heap_pos = _bisect(entries, entry[0])
        entries.insert(heap_pos, entry)
        if len(entries) > limit:
            pushed = entries.pop()
            self._release(pushed[2])
        return 1

    def _insert_tied(self, entries: list[tuple], entry: tuple, limit: int) -> int:
        """``RANK()`` / ``DENSE_RANK()``: keep every row whose rank is at most ``limit``.

        A rank only grows as rows arrive (a row ranks after every row with a
        smaller sort value), so a row ranked past ``limit`` never comes back.
        The buffer held ranks 1..limit before ``entry``; inserting it raises
        by one the rank of the rows after it, so only the last group of equal
        rows can pass ``limit``: it leaves whole.
        """
        entries.insert(_bisect(entries, entry[0]), entry)
        last = _group_start(entries, len(entries) - 1)
        rank = last + 1 if self.config.keep == RANK else _groups(entries, last) + 1
        if rank <= limit:
            return 1
        pushed = entries[last:]
        del entries[last:]
        kept = 1
        for e in pushed:
            if e is entry:
                kept = 0
            else:
                self._release(e[2])
        return kept

    def _release(self, seq: int) -> None:
        """Row ``seq`` left a window without being emitted from it."""
        held = self._held.get(seq)
        if held is None:
            return
        held[0] -= 1
        if held[0] == 0:
            del self._held[seq]
            if not held[1]:
                self._drop(self._drop_kept)

    def _drop(self, reason: str) -> None:
        dropped = self.counters.dropped
        dropped[reason] = dropped.get(reason, 0) + 1

    # ----------------------------------------------------------------- clocks

    def advance_watermark(self, watermark: int) -> None:
        """Raise the watermark; every window whose end - 1 it reaches emits its ranking."""
        if watermark <= self.watermark:
            return
        self.watermark = watermark
        heap = self._heap
        while heap and heap[0][0] <= watermark:
            time, _, key, window = heapq.heappop(heap)
            if window not in self._state.get(key, ()):
                continue  # a session that merged into another since
            if self._tag:
                self._cause = (FIRED_BY_EVENT_TIMER, time, None)
            self._fire(key, window)

    def advance_processing_time(self, time: int) -> None:
        """A window rank runs on event time only."""
        self.processing_time = max(self.processing_time, time)

    def end_of_input(self) -> None:
        self.advance_watermark(MAX_TIME)

    def _fire(self, key: Key, window: tuple[int, int]) -> None:
        state = self._state[key]
        entries = state.pop(window)
        if not state:
            del self._state[key]
        start, end = window
        ranks = _tied_ranks(entries, self.config.keep) if self._tied else None
        for i, (_, values, seq) in enumerate(entries):
            rank = ranks[i] if ranks is not None else i + 1
            row = (key, start, end, end - 1, 0, ON_TIME, end - 1, rank, *values)
            if self._tag:
                row += self._cause
            self._out.append(row)
            self.counters.rows_emitted += 1
            held = self._held.get(seq)
            if held is not None:
                held[1] = True
                held[0] -= 1
                if held[0] == 0:
                    del self._held[seq]

    # ------------------------------------------------------------------ batch

    def process_batch(self, batch: RowBatch) -> None:
        """The per-row loop: advance the watermark, then the row."""
        n = len(batch)
        keys, wms, tss, rows = batch.per_row()
        for i in range(n):
            self.advance_watermark(wms[i])
            self.process_element(keys[i], tss[i], rows[i])

    # ----------------------------------------------------------------- output

    def drain(self) -> list[tuple]:
        out, self._out = self._out, []
        return out

    def drain_late(self) -> list[tuple]:
        """A window rank has no late output (late rows are counted)."""
        return []

    # ----------------------------------------------------- per-key state (streams)

    def timers(self, key: Key) -> tuple[list[int], list[int]]:
        windows = self._state.get(key, {})
        return sorted({end - 1 for _, end in windows}), []

    def active_keys(self) -> list[Key]:
        return list(self._state)

    def open_windows(self) -> int:
        return sum(len(w) for w in self._state.values())

    def snapshot_key(self, key: Key) -> bytes:
        """One key's windows (their buffers hold the rows' values and arrival numbers)."""
        state = self._state.get(key, {})
        windows = [(w, [(v, s) for _, v, s in entries]) for w, entries in state.items()]
        # rows some window emitted already: pushed out of another later, they are not dropped
        held = self._held
        emitted = sorted({s for _, e in windows for _, s in e if held.get(s, (0, False))[1]})
        return _snap.dumps(
            {"kind": "rank-key", "windows": windows, "seq": self._seq, "emitted": emitted}
        )

    def restore_key(self, key: Key, data: bytes) -> None:
        payload = _snap.loads(data)
        if not isinstance(payload, dict) or payload.get("kind") != "rank-key":
            raise _snap.SnapshotError("not a window rank's key snapshot")
        self.forget_key(key)
        windows = {
            tuple(w): [(self._sort_key(v, s), v, s) for v, s in entries]
            for w, entries in payload["windows"]
        }
        if windows:
            self._state[key] = windows
            for window in windows:
                self._timer_seq += 1
                heapq.heappush(self._heap, (window[1] - 1, self._timer_seq, key, window))
            for entries in windows.values():
                for _, _, seq in entries:
                    held = self._held.setdefault(seq, [0, False])
                    held[0] += 1
            for seq in payload.get("emitted", ()):
                self._held[seq][1] = True
        self._seq = max(self._seq, payload["seq"])

    def forget_key(self, key: Key) -> None:
        windows = self._state.pop(key, None)
        if windows:
            self._heap = [t for t in self._heap if t[2] != key]
            heapq.heapify(self._heap)
            for entries in windows.values():
                for _, _, seq in entries:
                    self._held.pop(seq, None)


def _group_start(entries: list[tuple], i: int) -> int:
    """The index of the first entry whose sort value equals entry ``i``'s (the sort key
    without its arrival number): the rows tied with it start there."""
    value = entries[i][0][:-1]
    lo, hi = 0, i
    while lo < hi:
        mid = (lo + hi) // 2
        if entries[mid][0][:-1] < value:
            lo = mid + 1
        else:
            hi = mid
    return lo


def _groups(entries: list[tuple], end: int) -> int:
    """How many distinct sort values ``entries[:end]`` hold (walking group by group)."""
    count, i = 0, 0
    while i < end:
        count += 1
        value = entries[i][0][:-1]
        lo, hi = i + 1, end
        while lo < hi:  # the first entry past the group of ``value``
            mid = (lo + hi) // 2
            if value < entries[mid][0][:-1]:
                hi = mid
            else:
                lo = mid + 1
        i = lo
    return count


def _tied_ranks(entries: list[tuple], keep: str) -> list[int]:
    """Each entry's ``RANK()`` (1 + the rows before its group) or ``DENSE_RANK()``
    (1 + the groups before it); entries are in sort order."""
    ranks: list[int] = []
    previous: tuple | None = None
    rank = 0
    for i, entry in enumerate(entries):
        value = entry[0][:-1]
        if previous is None or previous < value:
            rank = i + 1 if keep == RANK else rank + 1
            previous = value
        ranks.append(rank)
    return ranks


def _bisect(entries: list[tuple], key: tuple) -> int:
    lo, hi = 0, len(entries)
    while lo < hi:
        mid = (lo + hi) // 2
        if key < entries[mid][0]:
            hi = mid
        else:
            lo = mid + 1
    return lo
