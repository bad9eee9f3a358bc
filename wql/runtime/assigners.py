"""Window assigners: which windows a row belongs to (Flink's ``WindowAssigner``).

An assigner is configuration only (a frozen dataclass, no per-key state).
The operator calls ``assign_windows(timestamp, values)`` once per row, where
``timestamp`` is the row's event time for event-time assigners and the
current processing time for processing-time ones. Merging assigners
(sessions) also provide ``merge_windows``, called by ``MergingWindowSet``.

``assign_windows`` raises :class:`DropRow` for a row it cannot place (a
dynamic session gap <= 0); the operator counts it as dropped with that
reason, so no row is lost silently.

>>> TumblingWindows(3000).assign_windows(3999, ())
(TimeWindow(start=3000, end=6000),)
>>> SlidingWindows(size=3000, slide=1000).assign_windows(1000, ())
(TimeWindow(start=1000, end=4000), TimeWindow(start=0, end=3000), TimeWindow(start=-1000, end=2000))
>>> CumulateWindows(step=1000, size=3000).assign_windows(1500, ())
(TimeWindow(start=0, end=2000), TimeWindow(start=0, end=3000))
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

from wql.runtime.triggers import (
    EventTimeTrigger,
    NeverTrigger,
    ProcessingTimeTrigger,
    Trigger,
)
from wql.runtime.windows import (
    GLOBAL_WINDOW,
    TimeWindow,
    Window,
    make_window,
    window_start_with_offset,
)

#: Drop reasons counted by the operator (``counters.dropped``).
DROP_INVALID_GAP = "invalid session gap"
DROP_MISSING_TIMESTAMP = "missing timestamp"
DROP_LATE = "late"
DROP_LATE_WINDOW = "late window"
#: Accepted into window state, but in no emitted firing: its windows never
#: fired after it arrived (count-window remainder, GLOBAL(), a trigger that
#: did not fire before cleanup or end of input), or purged/evicted first.
DROP_IN_NO_FIRING = "in no firing"
#: No window took the row, and one of its windows was closed: its trigger had
#: finished (ONCE, UNTIL, SEQUENCE; Beam's ``droppedDueToClosedWindow``).
DROP_CLOSED_WINDOW = "closed window"

MergeCallback = Callable[[Sequence[TimeWindow], TimeWindow], None]


class DropRow(Exception):  # noqa: N818 - a signal, not an error
    """Raised by an assigner for a row that has no window; ``reason`` is counted."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class WindowAssigner:
    """Base of every assigner. Subclasses are frozen dataclasses."""

    #: True when windows are in event time (lateness, cleanup on the watermark).
    is_event_time: bool = True
    #: True for session windows (the operator then keeps a MergingWindowSet per key).
    is_merging: bool = False

    def assign_windows(self, timestamp: int, values: tuple) -> Sequence[Window]:
        """The windows of one row; called once per row, must not keep state."""
        raise NotImplementedError

    def default_trigger(self) -> Trigger:
        """The trigger used when the query names none."""
        return EventTimeTrigger() if self.is_event_time else ProcessingTimeTrigger()

    def merge_windows(self, windows: Iterable[TimeWindow], callback: MergeCallback) -> None:
        """Merging assigners only: report each group of windows that merge."""
        raise TypeError(f"{type(self).__name__} does not merge windows")


def _check_positive(name: str, value: int) -> None:
    if not isinstance(value, int) or isinstance(value, bool) or value <= 0:
        raise ValueError(f"{name} must be a positive number of milliseconds, got {value!r}")


@dataclass(frozen=True)
class TumblingWindows(WindowAssigner):
    """``[start, start + size)`` with start = ts − ((ts − offset) mod size)."""

    size: int
    offset: int = 0
    event_time: bool = True

    def __post_init__(self) -> None:
        _check_positive("tumbling window size", self.size)
        if abs(self.offset) >= self.size:
            raise ValueError("tumbling window offset must satisfy |offset| < size")

    @property
    def is_event_time(self) -> bool:  # type: ignore[override]
        return self.event_time

    def assign_windows(self, timestamp: int, values: tuple) -> Sequence[Window]:
        start = timestamp - (timestamp - self.offset) % self.size
        return (make_window((start, start + self.size)),)


@dataclass(frozen=True)
class SlidingWindows(WindowAssigner):
    """Windows of ``size`` starting every ``slide`` (latest start first, as Flink)."""

    size: int
    slide: int
    offset: int = 0
    event_time: bool = True

    def __post_init__(self) -> None:
        _check_positive("sliding window size", self.size)
        _check_positive("sliding window slide", self.slide)
        if abs(self.offset) >= self.slide:
            raise ValueError("sliding window offset must satisfy |offset| < slide")

    @property
    def is_event_time(self) -> bool:  # type: ignore[override]
        return self.event_time

    def assign_windows(self, timestamp: int, values: tuple) -> Sequence[Window]:
        size, slide = self.size, self.slide
        start = timestamp - (timestamp - self.offset) % slide
        lowest = timestamp - size
        out = []
        while start > lowest:
            out.append(make_window((start, start + size)))
            start -= slide
        return tuple(out)


@dataclass(frozen=True)
class CumulateWindows(WindowAssigner):
    """Flink SQL CUMULATE: ``[s, s+step)``, ``[s, s+2·step)`` … ``[s, s+size)``.

    ``s`` is the size-aligned start containing the row; the row belongs to
    every window of that series whose end is after it (Flink table-runtime
    ``CumulativeWindowAssigner.assignWindows``: first end = the step-aligned
    start containing ts + step, last end = s + size).
    """

    step: int
    size: int
    offset: int = 0
    event_time: bool = True

    def __post_init__(self) -> None:
        _check_positive("cumulate window step", self.step)
        _check_positive("cumulate window size", self.size)
        if self.size % self.step:
            raise ValueError("cumulate window size must be a multiple of its step")
        if abs(self.offset) >= self.size:
            raise ValueError("cumulate window offset must satisfy |offset| < size")

    @property
    def is_event_time(self) -> bool:  # type: ignore[override]
        return self.event_time

    def assign_windows(self, timestamp: int, values: tuple) -> Sequence[Window]:
        step = self.step
        start = window_start_with_offset(timestamp, self.offset, self.size)
        last_end = start + self.size
        end = window_start_with_offset(timestamp, self.offset, step) + step
        out = []
        while end <= last_end:
            out.append(make_window((start, end)))
            end += step
        return tuple(out)


def merge_time_windows(windows: Iterable[TimeWindow], callback: MergeCallback) -> None:
    """Flink's ``TimeWindow.mergeWindows``: sort by start, sweep, report groups of > 1.

    Each group is reported as (windows of the group in start order, their cover).
    Identical windows count once (Flink collects a group into a set).
    """
    group: list[TimeWindow] = []
    cover: TimeWindow | None = None
    for candidate in sorted(windows, key=lambda w: w.start):
        if cover is not None and cover.intersects(candidate):
            cover = cover.cover(candidate)
            if candidate not in group:
                group.append(candidate)
            continue
        if len(group) > 1 and cover is not None:
            callback(group, cover)
        group, cover = [candidate], candidate
    if len(group) > 1 and cover is not None:
        callback(group, cover)


@dataclass(frozen=True)
class SessionWindows(WindowAssigner):
    """Each row gets ``[ts, ts + gap)``; intersecting (also touching) windows merge."""

    gap: int
    event_time: bool = True

    def __post_init__(self) -> None:
        _check_positive("session gap", self.gap)

    @property
    def is_event_time(self) -> bool:  # type: ignore[override]
        return self.event_time

    @property
    def is_merging(self) -> bool:  # type: ignore[override]
        return True

    def assign_windows(self, timestamp: int, values: tuple) -> Sequence[Window]:
        return (make_window((timestamp, timestamp + self.gap)),)

    def merge_windows(self, windows: Iterable[TimeWindow], callback: MergeCallback) -> None:
        merge_time_windows(windows, callback)


@dataclass(frozen=True)
class DynamicSessionWindows(WindowAssigner):
    """Session windows whose gap (ms) is read from ``values[gap_index]`` per row.

    A gap that is missing, not an integer or <= 0 drops the row with reason
    ``"invalid session gap"`` (Flink throws; WQL counts).
    """

    gap_index: int
    event_time: bool = True

    @property
    def is_event_time(self) -> bool:  # type: ignore[override]
        return self.event_time

    @property
    def is_merging(self) -> bool:  # type: ignore[override]
        return True

    def assign_windows(self, timestamp: int, values: tuple) -> Sequence[Window]:
        gap = values[self.gap_index]
        if gap is None or isinstance(gap, bool):
            raise DropRow(DROP_INVALID_GAP)
        try:
            gap = int(gap)
        except (TypeError, ValueError, OverflowError):
            raise DropRow(DROP_INVALID_GAP) from None
        if gap <= 0:
            raise DropRow(DROP_INVALID_GAP)
        return (make_window((timestamp, timestamp + gap)),)

    def merge_windows(self, windows: Iterable[TimeWindow], callback: MergeCallback) -> None:
        merge_time_windows(windows, callback)


_GLOBAL = (GLOBAL_WINDOW,)


@dataclass(frozen=True)
class GlobalWindows(WindowAssigner):
    """One window per key; never fires unless a trigger says so; never late."""

    @property
    def is_event_time(self) -> bool:  # type: ignore[override]
        return False

    def assign_windows(self, timestamp: int, values: tuple) -> Sequence[Window]:
        return _GLOBAL

    def default_trigger(self) -> Trigger:
        return NeverTrigger()
