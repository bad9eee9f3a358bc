"""Per-key state with namespaces (Flink's keyed state backend, reduced to what windows need).

Everything the operator keeps for one key lives in one :class:`KeyState`, so a
streaming host can snapshot and restore a key on its own:

- ``contents``: namespace (state window) -> the window contents: an
  aggregate accumulator (a list, see ``aggregates.Aggregator``) or, when an
  evictor needs the rows, a list of ``(timestamp, arrival_seq, values)``.
  This is Flink's window state (aggregating or list state).
- ``trigger``: (window, state name) -> value: the triggers' value and
  reducing states (names are made unique per child trigger by the context).
- ``panes``: state window -> number of firings so far (the next ``pane_index``);
  survives purges, cleared with the window, merged by ``max``.
- ``merging``: the key's ``MergingWindowSet`` (session windows only).
- ``emitted``: changelog mode only (``OperatorConfig.changelog``): window ->
  the row its last firing emitted (without ``op``), so that the next pane or a
  merge can retract exactly that row; dropped when the window is cleaned up or
  merged away.

Timers are kept by the ``TimerService``, indexed by key as well.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from wql.runtime.merging import MergingWindowSet
from wql.runtime.windows import Window


class KeyState:
    __slots__ = ("contents", "trigger", "panes", "merging", "emitted")

    def __init__(self, merging: MergingWindowSet | None = None) -> None:
        self.contents: dict[Window, Any] = {}
        self.trigger: dict[tuple[Window, str], Any] = {}
        self.panes: dict[Window, int] = {}
        self.merging = merging
        self.emitted: dict[Window, tuple] = {}

    def is_empty(self) -> bool:
        return not (
            self.contents
            or self.trigger
            or self.panes
            or self.emitted
            or (self.merging is not None and self.merging.mapping)
        )

    def merge_namespaces(
        self,
        target: Window,
        sources: Sequence[Window],
        merge_contents: Callable[[Any, Any], Any],
    ) -> None:
        """Flink's ``mergeNamespaces`` for the window contents (and pane counts).

        Folds the contents of every source state window into ``target`` with
        ``merge_contents(target_contents, source_contents) -> contents`` and
        removes the sources; pane counts merge by ``max``.
        """
        contents = self.contents
        panes = self.panes
        acc = contents.get(target)
        pane = panes.get(target)
        for w in sources:
            if w == target:
                continue
            src = contents.pop(w, None)
            if src is not None:
                acc = src if acc is None else merge_contents(acc, src)
            p = panes.pop(w, None)
            if p is not None and (pane is None or p > pane):
                pane = p
        if acc is not None:
            contents[target] = acc
        if pane is not None:
            panes[target] = pane

    def clear_namespace(self, window: Window) -> None:
        """Drop the contents and pane count of one state window."""
        self.contents.pop(window, None)
        self.panes.pop(window, None)

    def merge_trigger_state(
        self,
        target: Window,
        sources: list[Window],
        name: str,
        reduce: Callable[[Any, Any], Any],
    ) -> None:
        """Flink's ``mergeNamespaces`` for one reducing state: fold sources into target.

        Unlike Flink, the sources keep their values: the operator clears every
        merged window's trigger right after ``on_merge``, and a trigger's
        ``clear`` needs them to find the timers it registered for that window
        (Flink leaves those timers behind; they fire into nothing).
        """
        state = self.trigger
        acc = state.get((target, name))
        for w in sources:
            if w == target:
                continue
            v = state.get((w, name))
            if v is not None:
                acc = v if acc is None else reduce(acc, v)
        if acc is not None:
            state[(target, name)] = acc

    def to_data(self) -> tuple:
        data: tuple = (
            self.contents,
            self.trigger,
            self.panes,
            None if self.merging is None else self.merging.mapping,
        )
        # the emitted rows only when there are any: a key's snapshot outside
        # changelog mode stays what it was
        return (*data, self.emitted) if self.emitted else data

    @classmethod
    def from_data(cls, data: tuple, merge_windows: Any, eager: bool = False) -> KeyState:
        contents, trigger, panes, mapping = data[:4]
        ks = cls(None if mapping is None else MergingWindowSet(merge_windows, mapping, eager=eager))
        ks.contents, ks.trigger, ks.panes = contents, trigger, panes
        if len(data) > 4:
            ks.emitted = data[4]
        return ks
