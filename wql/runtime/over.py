"""``OverAggregateOperator``: Flink SQL's event-time OVER aggregation in Python.

``agg(x) OVER (PARTITION BY k ORDER BY ts <frame>)`` emits every input row
once, with the aggregate over its frame, when the watermark passes the row's
time. Flink runs it with one ``KeyedProcessFunction`` per frame kind
(flink-table-runtime, ``operators/over``); this module follows each one,
per key (the PARTITION BY values), with Flink's timers (docs/runtime.md,
"OVER aggregation"):

``RANGE BETWEEN <p> PRECEDING AND CURRENT ROW``
(``RowTimeRangeBoundedPrecedingFunction``): a row whose time is not above
the key's *last triggering time* (the time of the last event-time timer that
fired for the key, 0 before any) is late; otherwise it is buffered under its
time, an event-time timer is registered at its time, and the key's cleanup
timer moves to ``ts + p + p // 2 + 1`` when it was below ``ts + p + 1``. The
timer at ``T`` emits every row buffered at ``T``, each with the aggregate
over the key's rows with time in ``[T - p, T]`` (rows of equal time share
the frame), and sets the last triggering time to ``T`` (any timer of the
key: a superseded cleanup timer too); the cleanup timer, when it is the
key's current one, clears the key's state instead.

``ROWS BETWEEN <n> PRECEDING AND CURRENT ROW``
(``RowTimeRowsBoundedPrecedingFunction``): lateness as for RANGE; the timer
at ``T`` emits the rows buffered at ``T`` one by one in arrival order, each
with the aggregate over itself and the ``n`` rows before it in emission
order ((time, arrival) order). No cleanup timer (Flink's is a
processing-time retention timer, off by default).

``... UNBOUNDED PRECEDING AND CURRENT ROW``
(``AbstractRowTimeUnboundedPrecedingOver`` and its ROWS and RANGE
subclasses): a row at or below the current *watermark* is late; otherwise
it is buffered and a timer is registered at ``watermark + 1`` (0 while the
watermark is negative). A timer emits every buffered row at or below the
watermark in time order (ROWS: each row adds to the running aggregate and
is emitted; RANGE: the rows of one time are added together and share the
value) and registers ``watermark + 1`` again while rows above it remain.

Late rows go to the late output when the query has ``LATE DATA TO``, else
they are dropped and counted (Flink's ``numLateRecordsDropped``). The
aggregate is computed over the frame's rows in (time, arrival) order each
time (Flink retracts rows from a running accumulator; both give the same
value except for the rounding of floating-point sums).

Emitted rows have the ``WindowOperator``'s layout (``config.EMITTED_FIELDS``:
no window, pane 0, ``ON_TIME``, the row's time), then the aggregates, then
the row's values. The host-facing calls are the ``WindowOperator``'s.

>>> op = OverAggregateOperator(OverConfig(ROWS, 1, (AggregateSpec("SUM", 0),)))
>>> for ts, v in ((1, 5), (2, 7), (3, 1)):
...     op.process_element(("k",), ts, (v,))
>>> op.end_of_input()
>>> [(r[6], r[7]) for r in op.drain()]
[(1, 5), (2, 12), (3, 8)]
"""

from __future__ import annotations

import heapq
from collections import deque
from collections.abc import Hashable
from dataclasses import dataclass
from typing import Any

from wql.runtime import snapshot as _snap
from wql.runtime.aggregates import AggregateSpec, Aggregator
from wql.runtime.assigners import DROP_LATE, DROP_MISSING_TIMESTAMP
from wql.runtime.config import FIRED_BY_EVENT_TIMER, ON_TIME, Counters, RowBatch
from wql.runtime.windows import MAX_TIME, MIN_TIME

__all__ = ["RANGE", "ROWS", "OverAggregateOperator", "OverConfig"]

Key = Hashable

RANGE = "RANGE"
ROWS = "ROWS"


@dataclass(frozen=True)
class OverConfig:
    """One OVER aggregation, as the runtime sees it.

    Attributes:
        frame: ``"RANGE"`` or ``"ROWS"``.
        preceding: the frame's lower bound: ms before the row's time (RANGE),
            rows before it (ROWS), or None for ``UNBOUNDED PRECEDING``.
        aggregates: the aggregates, their arguments as ``values`` indices.
        late_output: late rows go to ``drain_late`` (``LATE DATA TO``), else
            they are dropped and counted.
        late_columns: the ``values`` indices a late row carries (None: all).
        tag_firings: end emitted rows with ``FIRED_FIELDS`` (a pipeline stage).
    """

    frame: str
    preceding: int | None
    aggregates: tuple[AggregateSpec, ...]
    late_output: bool = False
    late_columns: tuple[int, ...] | None = None
    tag_firings: bool = False

    def __post_init__(self) -> None:
        if self.frame not in (RANGE, ROWS):
            raise ValueError(f"unknown frame {self.frame!r}")
        if self.preceding is not None and self.preceding < 0:
            raise ValueError("a frame's PRECEDING bound is not negative")
        if not self.aggregates:
            raise ValueError("an OVER aggregation has at least one aggregate")

    @property
    def extended_rows(self) -> bool:
        """Rows never carry ``EXTENDED_FIELDS`` (no panes, no changelog)."""
        return False

    @property
    def bounded(self) -> bool:
        return self.preceding is not None


class _KeyState:
    """One key's state, as Flink's function keeps it per key."""

    __slots__ = ("acc", "cleanup", "fired", "last", "pending", "timers")

    def __init__(self) -> None:
        #: time -> [(arrival, values)] not emitted yet (Flink's inputState, unfired part)
        self.pending: dict[int, list[tuple[int, tuple]]] = {}
        #: emitted rows still in some later frame, in (time, arrival) order: (ts, seq, values)
        self.fired: deque[tuple[int, int, tuple]] = deque()
        #: the last triggering time (bounded frames; None: never, Flink's 0)
        self.last: int | None = None
        #: the cleanup timer's time (bounded RANGE)
        self.cleanup: int | None = None
        #: event-time timers registered (unique per time, as Flink's)
        self.timers: set[int] = set()
        #: the running accumulator (unbounded frames: every row emitted so far)
        self.acc: list | None = None

    def empty(self) -> bool:
        return (
            not (self.pending or self.fired or self.timers)
            and self.last is None
            and self.acc is None
        )


class OverAggregateOperator:
    """The OVER aggregation of one query (all keys of one partition); see the module."""

    def __init__(self, config: OverConfig, fast: bool = True) -> None:
        self.config = config
        self.watermark = MIN_TIME
        self.processing_time = MIN_TIME
        self.counters = Counters()
        self._agg = Aggregator(config.aggregates)
        self._state: dict[Key, _KeyState] = {}
        self._heap: list[tuple[int, int, Key]] = []
        self._timer_seq = 0
        self._seq = 0
        self._out: list[tuple] = []
        self._late: list[tuple] = []
        self._tag = config.tag_firings
        self._cause: tuple = (FIRED_BY_EVENT_TIMER, None, None)

    # ------------------------------------------------------------------ input

    def process_element(self, key: Key, timestamp: int | None, values: tuple) -> None:
        seq = self._seq
        self._seq += 1
        self.counters.rows_in += 1
        if timestamp is None:
            self._drop(DROP_MISSING_TIMESTAMP)
            return
        config = self.config
        state = self._state.get(key)
        if config.bounded:
            # RowTime{Range,Rows}BoundedPrecedingFunction: late against the key's last
            # triggering time (0 before any timer fired), not the watermark
            last = 0 if state is None or state.last is None else state.last
            if timestamp <= last:
                self._late_row(key, timestamp, values)
                return
        elif timestamp <= self.watermark:
            self._late_row(key, timestamp, values)
            return
        if state is None:
            state = self._state[key] = _KeyState()
        rows = state.pending.get(timestamp)
        if rows is None:
            rows = state.pending[timestamp] = []
            if config.bounded:
                self._register(key, state, timestamp)
        rows.append((seq, values))
        if not config.bounded:
            wm = self.watermark
            # one timer per key for the next watermark (0 while it is negative, as Flink)
            self._register(key, state, 0 if wm < 0 else wm + 1)
        elif config.frame == RANGE:
            p = config.preceding
            assert p is not None
            if state.cleanup is None or state.cleanup < timestamp + p + 1:
                # (long) (precedingOffset * 1.5): p + p // 2 for p >= 0; the old timer stays
                state.cleanup = min(timestamp + p + p // 2 + 1, MAX_TIME)
                self._register(key, state, state.cleanup)

    def _late_row(self, key: Key, timestamp: int, values: tuple) -> None:
        if self.config.late_output:
            cols = self.config.late_columns
            out = values if cols is None else tuple(values[i] for i in cols)
            self._late.append((key, timestamp, out))
            self.counters.late_rows += 1
        else:
            self._drop(DROP_LATE)

    def _drop(self, reason: str) -> None:
        dropped = self.counters.dropped
        dropped[reason] = dropped.get(reason, 0) + 1

    def _register(self, key: Key, state: _KeyState, time: int) -> None:
        if time in state.timers:
            return
        state.timers.add(time)
        self._timer_seq += 1
        heapq.heappush(self._heap, (time, self._timer_seq, key))

    # ----------------------------------------------------------------- clocks

    def advance_watermark(self, watermark: int) -> None:
        """Raise the watermark and fire every event-time timer at or below it, in time
        order (timers registered while firing are picked up in the same pass)."""
        if watermark <= self.watermark:
            return
        self.watermark = watermark
        heap = self._heap
        while heap and heap[0][0] <= watermark:
            time, _, key = heapq.heappop(heap)
            state = self._state[key]
            state.timers.discard(time)
            if self._tag:
                self._cause = (FIRED_BY_EVENT_TIMER, time, None)
            self.on_event_time(key, state, time)
            if state.empty():
                del self._state[key]

    def advance_processing_time(self, time: int) -> None:
        """An event-time OVER aggregation has no processing-time timers."""
        self.processing_time = max(self.processing_time, time)

    def end_of_input(self) -> None:
        self.advance_watermark(MAX_TIME)

    def on_event_time(self, key: Key, state: _KeyState, time: int) -> None:
        """Flink's ``onTimer`` for the event-time timer at ``time`` of ``key``."""
        config = self.config
        if not config.bounded:
            self._fire_unbounded(key, state)
            return
        if config.frame == RANGE and state.cleanup is not None and state.cleanup <= time:
            # the key's current cleanup timer: every frame to come starts after its rows
            state.pending.clear()
            state.fired.clear()
            state.last = None
            state.cleanup = None
            return
        inputs = state.pending.pop(time, None)
        if inputs is not None:
            if config.frame == RANGE:
                self._fire_range(key, state, time, inputs)
            else:
                self._fire_rows(key, state, time, inputs)
        state.last = time

    def _fire_range(self, key: Key, state: _KeyState, time: int, inputs: list) -> None:
        p = self.config.preceding
        assert p is not None
        fired = state.fired
        while fired and time - fired[0][0] > p:
            fired.popleft()  # retracted: out of this frame and every later one
        for seq, values in inputs:
            fired.append((time, seq, values))
        result = self._agg.result_of_rows(fired)
        for _, values in inputs:
            self._emit(key, time, result, values)

    def _fire_rows(self, key: Key, state: _KeyState, time: int, inputs: list) -> None:
        n = self.config.preceding
        assert n is not None
        fired = state.fired
        for seq, values in inputs:
            fired.append((time, seq, values))
            if len(fired) > n + 1:
                fired.popleft()
            self._emit(key, time, self._agg.result_of_rows(fired), values)

    def _fire_unbounded(self, key: Key, state: _KeyState) -> None:
        if not state.pending:
            return
        wm = self.watermark
        if state.acc is None:
            state.acc = self._agg.create()
        acc = state.acc
        add = self._agg.add
        for t in sorted(t for t in state.pending if t <= wm):
            rows = state.pending.pop(t)
            if self.config.frame == ROWS:
                for seq, values in rows:
                    add(acc, t, seq, values)
                    self._emit(key, t, self._agg.result(acc), values)
            else:
                for seq, values in rows:
                    add(acc, t, seq, values)
                result = self._agg.result(acc)
                for _, values in rows:
                    self._emit(key, t, result, values)
        if state.pending:
            # rows above the watermark wait for the next one
            self._register(key, state, wm + 1)

    def _emit(self, key: Key, time: int, result: tuple, values: tuple) -> None:
        row = (key, None, None, None, 0, ON_TIME, time, *result, *values)
        if self._tag:
            row += self._cause
        self._out.append(row)
        self.counters.rows_emitted += 1

    # ------------------------------------------------------------------ batch

    def process_batch(self, batch: RowBatch) -> bool:
        """The per-row loop: advance the watermark, then the row."""
        keys, wms, tss, rows = batch.per_row()
        for i in range(len(batch)):
            self.advance_watermark(wms[i])
            self.process_element(keys[i], tss[i], rows[i])
        return False

    # ----------------------------------------------------------------- output

    def drain(self) -> list[tuple]:
        out, self._out = self._out, []
        return out

    def drain_late(self) -> list[tuple]:
        out, self._late = self._late, []
        return out

    # ----------------------------------------------------- per-key state (streams)

    def timers(self, key: Key) -> tuple[list[int], list[int]]:
        state = self._state.get(key)
        return (sorted(state.timers) if state is not None else []), []

    def active_keys(self) -> list[Key]:
        return list(self._state)

    def open_windows(self) -> int:
        return sum(len(s.pending) for s in self._state.values())

    def snapshot_key(self, key: Key) -> bytes:
        state = self._state.get(key)
        payload: dict[str, Any] = {"kind": "over-key", "seq": self._seq}
        if state is not None:
            payload.update(
                pending=sorted(state.pending.items()),
                fired=list(state.fired),
                last=state.last,
                cleanup=state.cleanup,
                timers=sorted(state.timers),
                acc=state.acc,
            )
        return _snap.dumps(payload)

    def restore_key(self, key: Key, data: bytes) -> None:
        payload = _snap.loads(data)
        if not isinstance(payload, dict) or payload.get("kind") != "over-key":
            raise _snap.SnapshotError("not an OVER aggregation's key snapshot")
        self.forget_key(key)
        self._seq = max(self._seq, payload["seq"])
        if "pending" not in payload:
            return
        state = _KeyState()
        state.pending = {t: [(s, tuple(v)) for s, v in rows] for t, rows in payload["pending"]}
        state.fired = deque((t, s, tuple(v)) for t, s, v in payload["fired"])
        state.last = payload["last"]
        state.cleanup = payload["cleanup"]
        state.acc = payload["acc"]
        if state.acc is not None:
            self._agg.after_restore(state.acc)
        self._state[key] = state
        for time in payload["timers"]:
            self._register(key, state, time)

    def forget_key(self, key: Key) -> None:
        if self._state.pop(key, None) is not None:
            self._heap = [t for t in self._heap if t[2] != key]
            heapq.heapify(self._heap)
