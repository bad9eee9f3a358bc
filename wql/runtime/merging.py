"""``MergingWindowSet``: the in-flight session windows of one key (Flink's class of that name).

It maps every in-flight window to its *state window*: the namespace under
which its contents live. When windows merge, the merge result takes over the
state window of one of the merged pre-existing windows, so contents are never
copied; the other state windows are folded into it by the merge callback.
The mapping dict is owned by the key's state and persisted with it.

The merge callback receives ``(merge_result, merged_windows,
state_window_result, merged_state_windows)``: the new cover, the pre-existing
windows it absorbed (never the new window, which had no state), the state
window that now holds the contents, and the other state windows to fold into
it. It is not called when the new window falls inside one existing window
without changing it.

Two decisions where Flink is left to chance or loses data (docs/runtime.md):

- the state window of a merge result is the one of the merged pre-existing
  window with the smallest start (Flink: the first in a hash set's order);
- adding a window identical to an in-flight window keeps that window's
  state window (Flink would remap it to itself and orphan its contents, which
  only dynamic gaps can trigger).

>>> calls = []
>>> s = MergingWindowSet(lambda ws, cb: merge_time_windows(ws, cb), {})
>>> s.add_window(TimeWindow(0, 4), lambda *a: calls.append(a))
TimeWindow(start=0, end=4)
>>> s.add_window(TimeWindow(3, 5), lambda *a: calls.append(a))
TimeWindow(start=0, end=5)
>>> calls
[(TimeWindow(start=0, end=5), [TimeWindow(start=0, end=4)], TimeWindow(start=0, end=4), [])]
>>> s.get_state_window(TimeWindow(0, 5))
TimeWindow(start=0, end=4)
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence

from wql.runtime.assigners import merge_time_windows
from wql.runtime.windows import TimeWindow, make_window

MergeFunction = Callable[[TimeWindow, list[TimeWindow], TimeWindow, list[TimeWindow]], None]
MergeWindows = Callable[
    [Iterable[TimeWindow], Callable[[Sequence[TimeWindow], TimeWindow], None]], None
]

__all__ = ["MergingWindowSet", "merge_time_windows"]


class MergingWindowSet:
    """Window → state window mapping of one key, with Flink's ``addWindow`` algorithm."""

    __slots__ = ("mapping", "_merge_windows", "_eager")

    def __init__(
        self,
        merge_windows: MergeWindows,
        mapping: dict[TimeWindow, TimeWindow],
        eager: bool = False,
    ) -> None:
        self._merge_windows = merge_windows
        #: window -> state window; the key state owns (and persists) this dict.
        self.mapping = mapping
        # True when merge_windows is merge_time_windows: then in-flight windows
        # never intersect, and a new window merges exactly with the ones it
        # intersects, which allows a shortcut for the common cases.
        self._eager = eager

    def get_state_window(self, window: TimeWindow) -> TimeWindow | None:
        return self.mapping.get(window)

    def retire_window(self, window: TimeWindow) -> None:
        """Forget ``window`` (its state was cleared or it is late)."""
        if self.mapping.pop(window, None) is None:
            raise KeyError(f"window {window} is not in the merging window set")

    def add_window(self, new_window: TimeWindow, merge_function: MergeFunction) -> TimeWindow:
        """Add ``new_window``, merging as needed; returns the window it ended up in."""
        mapping = self.mapping
        if new_window in mapping:
            return new_window
        if not mapping:
            mapping[new_window] = new_window
            return new_window
        if self._eager:
            start, end = new_window
            hits = [w for w in mapping if w[0] <= end and w[1] >= start]
            if not hits:
                mapping[new_window] = new_window
                return new_window
            if len(hits) == 1:
                # What the general algorithm does for one intersecting window.
                (w,) = hits
                if w[0] <= start and w[1] >= end:
                    return w  # inside an existing window, unchanged: no callback
                cover = make_window((min(w[0], start), max(w[1], end)))
                state_window = mapping.pop(w)
                mapping[cover] = state_window
                merge_function(cover, [w], state_window, [])
                return cover

        results: list[tuple[TimeWindow, Sequence[TimeWindow]]] = []
        self._merge_windows(
            [*mapping, new_window], lambda group, cover: results.append((cover, group))
        )

        result_window = new_window
        merged_new_window = False
        for merge_result, group in results:
            merged = [w for w in group if w != new_window]
            if len(merged) != len(group):
                merged_new_window = True
                result_window = merge_result
            # The state window of the merge result: the one of the earliest
            # merged pre-existing window (group is in start order).
            state_window = mapping[merged[0]]
            merged_state_windows = []
            for w in merged:
                sw = mapping.pop(w, None)
                if sw is not None and sw != state_window:
                    merged_state_windows.append(sw)
            mapping[merge_result] = state_window
            # No callback when a single pre-existing window absorbed the new
            # one without changing (nothing to merge, no trigger change).
            if not (len(merged) == 1 and merged[0] == merge_result):
                merge_function(merge_result, merged, state_window, merged_state_windows)

        if not results or (result_window == new_window and not merged_new_window):
            mapping[result_window] = result_window
        return result_window
