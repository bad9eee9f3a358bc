"""Timer service: event-time and processing-time timers per (key, window, time).

Flink's ``InternalTimerServiceImpl`` semantics:

- a timer is unique per (key, window, time): registering it again is a no-op
  (it keeps its place in the firing order), deleting it removes it;
- timers fire in time order (ties: registration order) when the clock is
  advanced to them (``pop_due(now)`` returns timers ``<= now``; the operator
  asks for processing-time timers ``<= now - 1``: Flink fires those 1 ms
  late); a timer registered *while firing* at a due time fires in the same
  pass, one registered earlier at a time <= the current clock waits for the
  next advance (the operator only advances on a rise, as Flink forwards only
  rising watermarks);
- a per-key index gives the distinct due times of a key, which streaming
  hosts register with Spark (Spark timers have no namespace).

Deleted timers stay in the heap as tombstones (checked on pop by their
registration number) and are compacted away when they outnumber live ones.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Hashable
from typing import Any

from wql.runtime.windows import Window

Key = Hashable
#: Per key: (window, time) -> registration number (orders timers of equal time).
KeyTimers = dict[tuple[Window, int], int]


class _Queue:
    """One time domain: a heap of (time, seq, key, window) plus the per-key live index.

    ``numbers`` is the registration counter both domains share (a one-item list).
    """

    __slots__ = ("heap", "by_key", "live", "numbers")

    def __init__(self, numbers: list[int]) -> None:
        self.heap: list[tuple[int, int, Any, Window]] = []
        self.by_key: dict[Key, KeyTimers] = {}
        self.live = 0
        self.numbers = numbers

    def register(self, key: Key, window: Window, time: int) -> None:
        timers = self.by_key.get(key)
        if timers is None:
            timers = self.by_key[key] = {}
        elif (window, time) in timers:
            return
        numbers = self.numbers
        seq = numbers[0]
        numbers[0] = seq + 1
        timers[(window, time)] = seq
        heapq.heappush(self.heap, (time, seq, key, window))
        self.live += 1

    def delete(self, key: Key, window: Window, time: int) -> None:
        timers = self.by_key.get(key)
        if timers is None or timers.pop((window, time), None) is None:
            return
        self.live -= 1
        if not timers:
            del self.by_key[key]
        if len(self.heap) > 1024 and len(self.heap) > 4 * self.live:
            self._compact()

    def pop_due(self, now: int) -> tuple[Any, Window, int] | None:
        heap = self.heap
        by_key = self.by_key
        while heap and heap[0][0] <= now:
            time, seq, key, window = heapq.heappop(heap)
            timers = by_key.get(key)
            if timers is None or timers.get((window, time)) != seq:
                continue  # deleted, or deleted and registered again (a later entry)
            del timers[(window, time)]
            if not timers:
                del by_key[key]
            self.live -= 1
            return key, window, time
        return None

    def drop_key(self, key: Key) -> None:
        timers = self.by_key.pop(key, None)
        if timers:
            self.live -= len(timers)

    def _compact(self) -> None:
        # In place: the operator holds a reference to the heap list.
        self.heap[:] = [
            (t, s, k, w) for k, timers in self.by_key.items() for (w, t), s in timers.items()
        ]
        heapq.heapify(self.heap)

    def rebuild(self) -> None:
        self._compact()
        self.live = sum(len(t) for t in self.by_key.values())


class TimerService:
    """Both time domains; registration numbers are shared so ties order globally.

    ``register_*`` / ``delete_*`` are the domains' own methods (one call each:
    sessions and windows register a timer per row). The operator keeps one
    service for its lifetime (a restore loads into it), so its fast paths may
    hold on to it and to these methods.
    """

    __slots__ = (
        "event",
        "processing",
        "_numbers",
        "register_event_time_timer",
        "delete_event_time_timer",
        "register_processing_time_timer",
        "delete_processing_time_timer",
    )

    def __init__(self) -> None:
        self._numbers = [0]
        self.event = _Queue(self._numbers)
        self.processing = _Queue(self._numbers)
        self.register_event_time_timer: Callable[[Key, Window, int], None] = self.event.register
        self.delete_event_time_timer: Callable[[Key, Window, int], None] = self.event.delete
        self.register_processing_time_timer: Callable[[Key, Window, int], None] = (
            self.processing.register
        )
        self.delete_processing_time_timer: Callable[[Key, Window, int], None] = (
            self.processing.delete
        )

    @property
    def seq(self) -> int:
        """The next registration number."""
        return self._numbers[0]

    def pop_event_time_timer(self, watermark: int) -> tuple[Any, Window, int] | None:
        """The next live event-time timer with time <= ``watermark`` (removed), or None."""
        return self.event.pop_due(watermark)

    def pop_processing_time_timer(self, now: int) -> tuple[Any, Window, int] | None:
        return self.processing.pop_due(now)

    def has_timers(self, key: Key) -> bool:
        return key in self.event.by_key or key in self.processing.by_key

    def times(self, key: Key) -> tuple[list[int], list[int]]:
        """Distinct due times of ``key``: (event times, processing times), ascending."""
        ev = self.event.by_key.get(key, {})
        pt = self.processing.by_key.get(key, {})
        return sorted({t for _, t in ev}), sorted({t for _, t in pt})

    def key_timers(self, key: Key) -> tuple[KeyTimers, KeyTimers]:
        """Copies of the key's timers (for per-key snapshots)."""
        return dict(self.event.by_key.get(key, {})), dict(self.processing.by_key.get(key, {}))

    def drop_key(self, key: Key) -> None:
        self.event.drop_key(key)
        self.processing.drop_key(key)
        # Heap entries of the key are now tombstones; pop_due skips them.

    def restore_key(self, key: Key, event: KeyTimers, processing: KeyTimers) -> None:
        """Install a key's timers, renumbered after every existing timer (keeps their order)."""
        self.drop_key(key)
        merged = sorted(
            [(s, 0, w, t) for (w, t), s in event.items()]
            + [(s, 1, w, t) for (w, t), s in processing.items()],
            key=lambda e: e[0],
        )
        for _, domain, w, t in merged:
            if domain == 0:
                self.register_event_time_timer(key, w, t)
            else:
                self.register_processing_time_timer(key, w, t)

    def to_data(self) -> tuple:
        return (self.event.by_key, self.processing.by_key, self.seq)

    def load(self, data: tuple) -> None:
        """Replace every timer with a ``to_data()`` result."""
        event, processing, seq = data
        self.event.by_key = event
        self.processing.by_key = processing
        self._numbers[0] = seq
        self.event.rebuild()
        self.processing.rebuild()
