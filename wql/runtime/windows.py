"""Windows: ``TimeWindow`` (``[start, end)``) and the single ``GlobalWindow``.

Both are immutable and hashable; they are the namespaces of window state and
timers. ``TimeWindow`` is a ``NamedTuple`` so that hashing and equality are
the C tuple implementation (the per-row path builds and hashes windows).

>>> w = TimeWindow(0, 3000)
>>> w.max_timestamp
2999
>>> w.intersects(TimeWindow(3000, 4000)), w.intersects(TimeWindow(3001, 4000))
(True, False)
>>> w.cover(TimeWindow(2000, 5000))
TimeWindow(start=0, end=5000)
>>> window_start_with_offset(-1, 0, 1000)
-1000
"""

from __future__ import annotations

from functools import partial
from typing import NamedTuple

#: Long.MIN_VALUE / Long.MAX_VALUE: the watermark starts at MIN_TIME and
#: jumps to MAX_TIME at end of input.
MIN_TIME = -(2**63)
MAX_TIME = 2**63 - 1


class TimeWindow(NamedTuple):
    """Flink's ``TimeWindow``: ``start`` inclusive, ``end`` exclusive, int ms."""

    start: int
    end: int

    @property
    def max_timestamp(self) -> int:
        """The largest timestamp still in the window (``end - 1``, Flink's maxTimestamp)."""
        return self.end - 1

    def intersects(self, other: TimeWindow) -> bool:
        """Flink's rule: touching windows intersect (``[0,3)`` and ``[3,5)`` do)."""
        return self.start <= other.end and self.end >= other.start

    def cover(self, other: TimeWindow) -> TimeWindow:
        """The smallest window containing both."""
        return TimeWindow(min(self.start, other.start), max(self.end, other.end))


class GlobalWindow:
    """The one window of ``GlobalWindows``; its max timestamp is ``MAX_TIME``."""

    __slots__ = ()
    _instance: GlobalWindow | None = None

    def __new__(cls) -> GlobalWindow:
        # A singleton, so that unpickling yields the same object and `is` works.
        if cls._instance is None:
            cls._instance = super().__new__(cls)
        return cls._instance

    @property
    def max_timestamp(self) -> int:
        return MAX_TIME

    def __repr__(self) -> str:
        return "GlobalWindow()"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, GlobalWindow)

    def __hash__(self) -> int:
        return 0x61_0B_A1

    def __lt__(self, other: object) -> bool:
        # Windows are sorted in snapshots and reports; there is only one of these.
        return False

    def __reduce__(self) -> tuple[type[GlobalWindow], tuple[()]]:
        return (GlobalWindow, ())


GLOBAL_WINDOW = GlobalWindow()

#: ``make_window((start, end))``: a TimeWindow without the Python-level
#: ``NamedTuple.__new__`` frame (the per-row path creates many windows).
make_window = partial(tuple.__new__, TimeWindow)

Window = TimeWindow | GlobalWindow

#: Pane timings (docs/architecture.md, "Pane timing").
EARLY = "EARLY"
ON_TIME = "ON_TIME"
LATE = "LATE"


def pane_timing(window: Window, watermark: int, own_timer: int | None = None) -> str:
    """The timing of a firing of ``window``: decided by what fired it, not by clock jumps.

    ``own_timer``: the time of the timer *of the window's own clock* that
    fired it (``ON_TIME`` at the window's max timestamp, ``EARLY`` before,
    ``LATE`` after); ``None`` for any other firing (a row, a merge, a timer
    of the other clock), which is ``EARLY`` while the watermark is below the
    window's max timestamp, else ``LATE``.
    """
    if own_timer is not None and type(window) is TimeWindow:
        max_ts = window.end - 1
        if own_timer == max_ts:
            return ON_TIME
        return EARLY if own_timer < max_ts else LATE
    return EARLY if watermark < window.max_timestamp else LATE


def window_start_with_offset(timestamp: int, offset: int, size: int) -> int:
    """Start of the size-aligned window containing ``timestamp`` (floor modulo).

    Flink's ``TimeWindow.getWindowStartWithOffset``: negative timestamps give
    the window below, not the one towards zero.
    """
    return timestamp - (timestamp - offset) % size
