"""``WindowOperator``: Flink's WindowOperator / EvictingWindowOperator in Python.

The host feeds rows and clock changes; the operator keeps per-key window
state, trigger state, merging window sets and timers, and emits one row per
firing. See ``docs/architecture.md`` ("the runtime as the Spark host sees
it", "Pane timing") for the contract and ``docs/runtime.md`` for every
semantic decision and its source in Flink.

Calls (time is int ms; the watermark and processing time start at MIN_TIME):

- ``process_element(key, timestamp, values)`` at the current clocks;
- ``advance_watermark(wm)`` / ``advance_processing_time(t)``: on a rise, fire
  every timer of that domain <= the new watermark / < the new processing
  time (Flink fires processing-time timers 1 ms late), in time order (timers
  registered while firing are included when due);
- ``end_of_input()``: the watermark jumps to MAX_TIME; processing-time timers
  do not fire (Flink quiesces the processing-time service at end of input);
- ``process_batch(batch)``: the vectorized path (``wql.runtime.vectorized``)
  when it applies, otherwise the per-row loop it must equal;
- ``drain()`` / ``drain_late()`` / ``counters``;
- ``snapshot()`` / ``WindowOperator.restore(config, data)`` and per key
  ``snapshot_key`` / ``restore_key`` / ``forget_key`` / ``timers``.

>>> from wql.runtime.aggregates import AggregateSpec
>>> from wql.runtime.assigners import TumblingWindows
>>> op = WindowOperator(OperatorConfig(TumblingWindows(3000), (AggregateSpec("SUM", 0),)))
>>> op.process_element(("k1",), 20, (1,)); op.process_element(("k1",), 999, (2,))
>>> op.advance_watermark(2999)
>>> op.drain()
[(('k1',), 0, 3000, 2999, 0, 'ON_TIME', 2999, 3)]
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Mapping, Sequence
from dataclasses import dataclass
from operator import itemgetter
from typing import Any, Protocol

from wql.errors import ErrorCode, WqlUnsupportedError
from wql.runtime import snapshot as _snap
from wql.runtime.aggregates import Aggregator
from wql.runtime.assigners import (
    DROP_CLOSED_WINDOW,
    DROP_IN_NO_FIRING,
    DROP_LATE,
    DROP_LATE_WINDOW,
    DROP_MISSING_TIMESTAMP,
    DropRow,
    DynamicSessionWindows,
    GlobalWindows,
    SessionWindows,
)
from wql.runtime.config import (
    DELETE,
    FIRED_BY_EVENT_TIMER,
    FIRED_BY_PROCESSING_TIMER,
    FIRED_BY_ROW,
    INSERT,
    UPDATE_AFTER,
    UPDATE_BEFORE,
    Counters,
    OperatorConfig,
    RowBatch,
    as_list,
)
from wql.runtime.merging import MergingWindowSet
from wql.runtime.state import KeyState
from wql.runtime.timers import TimerService
from wql.runtime.triggers import CountTrigger, EventTimeTrigger, PurgingTrigger
from wql.runtime.windows import (
    GLOBAL_WINDOW,
    MAX_TIME,
    MIN_TIME,
    GlobalWindow,
    TimeWindow,
    Window,
    pane_timing,
)

Key = Hashable
_by_seq = itemgetter(1)
#: The trigger-state name that marks a closed window (its root trigger finished) until
#: its cleanup time; no trigger's state name has a ``#`` (docs/runtime.md).
CLOSED = "#closed"


class FastPath(Protocol):
    """What the operator calls on its fast path (``wql.runtime.fastpath.RowPath``).

    The operator core knows its fast paths only through this interface and
    :class:`FastPaths`; the paths import the core, never the other way round.
    """

    #: ``on_watermark`` is called on every rise of the watermark.
    watches_watermark: bool

    def process_element(self, key: Key, timestamp: int | None, values: tuple) -> None: ...

    def on_timer(self, key: Key, window: Window, time: int, event: bool) -> None: ...

    def process_batch(self, batch: RowBatch) -> bool: ...

    def on_watermark(self, watermark: int) -> None: ...

    def key_data(self, key: Key, ks: KeyState) -> tuple: ...

    def forget(self, key: Key) -> None: ...

    def settle(self) -> None: ...

    def held_keys(self) -> list[Key]: ...

    def held_windows(self) -> int: ...

    def held_timers(self, key: Key) -> list[int]: ...


@dataclass(frozen=True)
class FastPaths:
    """The fast paths an operator built with ``fast=True`` takes.

    ``wql.runtime.operator_factory`` installs them (:func:`install_fast_paths`)
    when ``wql.runtime`` is imported, which Python does before any of its
    modules, so every ``WindowOperator`` sees them; this module imports none
    of them (``tests/runtime/test_imports.py``).
    """

    #: The fastest per-row path for a new operator's configuration (None: the plain methods).
    choose: Callable[[WindowOperator], FastPath | None]
    #: ``process_batch``'s batch form for an operator without a path (the NumPy path):
    #: whether it took the batch.
    process_batch: Callable[[WindowOperator, RowBatch], bool]


_fast_paths: FastPaths | None = None


def install_fast_paths(paths: FastPaths) -> None:
    """Make ``paths`` the fast paths of every operator built from now on with ``fast=True``."""
    global _fast_paths
    _fast_paths = paths


class _Context:
    """The trigger context (Flink's ``WindowOperator.Context``), reused for every call.

    The root context is re-bound to (key, key state, window) before each
    trigger call; ``child(i)`` contexts share the root's binding and prefix
    their state names with the child's path, so children never see each
    other's state.
    """

    __slots__ = ("op", "root", "prefix", "key", "ks", "window", "merged", "_children")

    def __init__(self, op: WindowOperator, root: _Context | None = None, prefix: str = "") -> None:
        self.op = op
        self.root = root if root is not None else self
        self.prefix = prefix
        self.key: Any = None
        self.ks: KeyState | None = None
        self.window: Any = None
        self.merged: Sequence[Window] = ()
        self._children: dict[int, _Context] = {}

    @property
    def watermark(self) -> int:
        return self.op.watermark

    @property
    def processing_time(self) -> int:
        return self.op.processing_time

    @property
    def merged_windows(self) -> Sequence[Window]:
        return self.root.merged

    def bind(self, key: Any, ks: KeyState, window: Any) -> None:
        """Bind the root context to the key, its state and the window a trigger call is for."""
        self.key = key
        self.ks = ks
        self.window = window

    def child(self, index: int) -> _Context:
        c = self._children.get(index)
        if c is None:
            c = self._children[index] = _Context(self.op, self.root, f"{self.prefix}{index}.")
        return c

    def register_event_time_timer(self, time: int) -> None:
        r = self.root
        self.op._timers.register_event_time_timer(r.key, r.window, time)

    def delete_event_time_timer(self, time: int) -> None:
        r = self.root
        self.op._timers.delete_event_time_timer(r.key, r.window, time)

    def register_processing_time_timer(self, time: int) -> None:
        r = self.root
        self.op._timers.register_processing_time_timer(r.key, r.window, time)

    def delete_processing_time_timer(self, time: int) -> None:
        r = self.root
        self.op._timers.delete_processing_time_timer(r.key, r.window, time)

    def get_state(self, name: str) -> Any:
        r = self.root
        return r.ks.trigger.get((r.window, self.prefix + name))  # type: ignore[union-attr]

    def set_state(self, name: str, value: Any) -> None:
        r = self.root
        r.ks.trigger[(r.window, self.prefix + name)] = value  # type: ignore[union-attr]

    def clear_state(self, name: str) -> None:
        r = self.root
        r.ks.trigger.pop((r.window, self.prefix + name), None)  # type: ignore[union-attr]

    def merge_state(self, name: str, reduce: Any) -> None:
        r = self.root
        r.ks.merge_trigger_state(r.window, list(r.merged), self.prefix + name, reduce)  # type: ignore[union-attr]


class WindowOperator:
    """The window operator of one query (all keys of one partition).

    The methods below are the plain port of Flink's ``WindowOperator`` /
    ``EvictingWindowOperator``: every row goes through the assigner's
    ``assign_windows`` and the trigger's ``on_element`` / ``on_merge`` /
    ``on_event_time``. ``fast=True`` (the default) installs a faster per-row
    path where one applies and lets ``process_batch`` try a batch form (the
    :class:`FastPaths` that ``wql.runtime.operator_factory`` installs:
    ``wql.runtime.fastpath``, ``wql.runtime.columnar``,
    ``wql.runtime.vectorized``); each of them equals ``fast=False`` in
    everything observable. They work through the section "the fast paths'
    interface" at the end of the class.
    """

    def __init__(self, config: OperatorConfig, fast: bool = True) -> None:
        self.config = config
        #: (configuration, its snapshot fingerprint): see _config_fingerprint
        self._fingerprint: tuple[OperatorConfig, str] | None = None
        assigner = config.assigner
        self._assign = assigner.assign_windows
        self._merge_windows = assigner.merge_windows if assigner.is_merging else None
        self._trigger = config.effective_trigger
        #: The trigger can finish (ONCE, UNTIL, SEQUENCE): windows can be closed.
        self._finishing = self._trigger.can_finish()
        self._evictor = config.evictor
        #: The compiled aggregates (``wql.runtime.aggregates``).
        self.aggregator = Aggregator(config.aggregates)
        self._event_time = assigner.is_event_time
        self._merging = assigner.is_merging
        self._lateness = config.allowed_lateness
        self._late_columns = config.late_columns
        #: Emitted rows end with ``is_last`` and ``op`` (``OperatorConfig.extended_rows``).
        self._extended = config.extended_rows
        self._changelog = config.changelog
        #: Current event-time watermark and processing time (injected by the host).
        self.watermark = MIN_TIME
        self.processing_time = MIN_TIME
        self.counters = Counters()
        self._keys: dict[Key, KeyState] = {}
        self._timers = TimerService()
        self._out: list[tuple] = []
        self._late: list[tuple] = []
        self._seq = 0
        self._ctx = _Context(self)
        # Rows that end in no emitted firing (see _firing_guarantee).
        self._tracking = _firing_guarantee(config)
        self._track = self._tracking == "rows"
        #: "rows" mode: (key, state window) -> arrival numbers of the rows added
        #: since that window's last emitted firing, and arrival number -> how
        #: many windows still hold that row without it having been in a firing.
        self._pending: dict[tuple[Key, Window], list[int]] = {}
        self._unfired: dict[int, int] = {}
        #: The row being processed, once a firing included it (it may still be
        #: added to further windows, e.g. the next HOP window).
        self._fired_seq = -1
        #: The row being processed, once counted in no firing (a later window
        #: of the same row may still take it: then the count is taken back).
        self._gone_seq = -1
        self._ended = False
        #: ``config.tag_firings``: what the next emitted row is fired by
        #: (``config.FIRED_FIELDS``), kept up to date by ``admit`` and the timer passes.
        self._tag = config.tag_firings
        self._cause: tuple = (FIRED_BY_ROW, None, -1)
        # The key being processed by the merging path (the merge callback's target).
        self._merge_key: Any = None
        self._merge_ks: KeyState | None = None
        # Session assigners merge eagerly (in-flight windows never intersect).
        self._eager_merge = isinstance(assigner, SessionWindows | DynamicSessionWindows)
        self._path: FastPath | None = None
        self._watch: Any = None
        self._on_timer = self.on_timer
        #: ``fast=False``: the plain port only (no fast per-row path, no slices,
        #: no vectorized batches: ``None``); every fast path must equal it.
        self._batch_form: Callable[[WindowOperator, RowBatch], bool] | None = None
        if fast:
            paths = _fast_paths
            if paths is None:  # only while wql.runtime itself is being imported
                raise RuntimeError("wql.runtime.operator_factory has not installed the fast paths")
            self._batch_form = paths.process_batch
            self.use_path(paths.choose(self))

    # ------------------------------------------------------------------ input

    def process_element(self, key: Key, timestamp: int | None, values: tuple) -> None:
        """One row of ``key`` (Flink's ``processElement``) at the current clocks."""
        seq = self.admit()
        if self._event_time:
            if timestamp is None:
                self.drop(DROP_MISSING_TIMESTAMP)
                return
            t = timestamp
        else:
            t = self.processing_time
        try:
            windows = self._assign(t, values)
        except DropRow as d:
            self.drop(d.reason)
            return
        self.process_windows(key, timestamp, seq, values, windows)

    def process_windows(
        self, key: Key, timestamp: int | None, seq: int, values: tuple, windows: Sequence[Window]
    ) -> None:
        """``processElement`` after the assigner: the row (arrival ``seq``) into ``windows``."""
        ks = self._keys.get(key)
        if ks is None:
            ks = self.new_key_state(key)
        closed = False
        if self._merging:
            accepted, closed = self._process_merging(key, ks, timestamp, seq, values, windows)
        else:
            accepted = False
            finishing = self._finishing
            for w in windows:
                if self.is_window_late(w):
                    continue
                if finishing and (w, CLOSED) in ks.trigger:
                    closed = True  # Beam: dropped due to closed window
                    continue
                accepted = True
                self.add_row(key, ks, w, timestamp, seq, values)
                self._ctx.bind(key, ks, w)
                r = self._trigger.on_element(timestamp, values, w, self._ctx)
                if r & 1:
                    acc = ks.contents.get(w)
                    if acc is None:
                        continue  # FIRE on empty contents: nothing (not even the cleanup timer)
                    self.emit(key, ks, w, w, acc, self.timing_now(w), bool(r & 4))
                if r & 4:
                    self.close_window(key, ks, w, w)
                    continue
                if r & 2:
                    self.purge(key, ks, w)
                self.register_cleanup_timer(key, w)
        if not accepted:
            if closed:
                self.drop(DROP_CLOSED_WINDOW)
                self.release_key(key)
            else:
                self.not_accepted(key, timestamp, values)

    def add_row(
        self, key: Key, ks: KeyState, sw: Window, timestamp: int | None, seq: int, values: tuple
    ) -> None:
        """Add the row to state window ``sw``: its accumulator, or its rows (an evictor)."""
        contents = ks.contents
        acc = contents.get(sw)
        if self._evictor is not None:
            if acc is None:
                contents[sw] = [(timestamp, seq, values)]
            else:
                acc.append((timestamp, seq, values))
        else:
            if acc is None:
                acc = contents[sw] = self.aggregator.create()
            self.aggregator.add(acc, timestamp, seq, values)
        if self._track:
            self._track_add(key, sw, seq)

    def purge(self, key: Key, ks: KeyState, sw: Window) -> None:
        """PURGE: the state window's contents go (its trigger state and pane count stay)."""
        ks.contents.pop(sw, None)
        if self._track:
            self._track_discard(key, sw)

    def _process_merging(
        self,
        key: Key,
        ks: KeyState,
        timestamp: int | None,
        seq: int,
        values: tuple,
        windows: Sequence[Window],
    ) -> tuple[bool, bool]:
        """The merging half of ``processElement``: whether a window accepted the row, and
        whether one refused it because it was closed."""
        accepted = closed = False
        mws = ks.merging
        assert mws is not None
        self._merge_key, self._merge_ks = key, ks
        for w in windows:
            actual = mws.add_window(w, self._on_merge)  # type: ignore[arg-type]
            if self.is_window_late(actual):
                mws.retire_window(actual)
                continue
            if self._finishing and (actual, CLOSED) in ks.trigger:
                # The new session (and any sessions it absorbed) has exactly the
                # bounds of a closed one: Beam drops the row; the absorbed rows
                # leave with the window's state (counted "in no firing").
                self._retire_closed(key, ks, actual)
                closed = True
                continue
            accepted = True
            sw = mws.mapping[actual]
            self.add_row(key, ks, sw, timestamp, seq, values)
            self._ctx.bind(key, ks, actual)
            r = self._trigger.on_element(timestamp, values, actual, self._ctx)
            if r & 1:
                acc = ks.contents.get(sw)
                if acc is None:
                    continue
                self.emit(key, ks, actual, sw, acc, self.timing_now(actual), bool(r & 4))
            if r & 4:
                self.close_window(key, ks, actual, sw)
                continue
            if r & 2:
                self.purge(key, ks, sw)
            self.register_cleanup_timer(key, actual)
        return accepted, closed

    def add_merging_window(self, key: Key, ks: KeyState, window: TimeWindow) -> TimeWindow:
        """``MergingWindowSet.add_window`` with this operator's merge callback."""
        self._merge_key, self._merge_ks = key, ks
        return ks.merging.add_window(window, self._on_merge)  # type: ignore[union-attr]

    def _on_merge(
        self,
        merge_result: TimeWindow,
        merged_windows: list[TimeWindow],
        state_window: TimeWindow,
        merged_state_windows: list[TimeWindow],
    ) -> None:
        """The MergingWindowSet callback (WindowOperator's anonymous MergeFunction)."""
        key, ks = self._merge_key, self._merge_ks
        assert ks is not None
        ctx = self._ctx
        ctx.bind(key, ks, merge_result)
        ctx.merged = merged_windows
        try:
            self._trigger.on_merge(merge_result, ctx)
        finally:
            ctx.merged = ()
        for m in merged_windows:
            ctx.window = m
            self._trigger.clear(m, ctx)
            self.delete_cleanup_timer(key, m)
        if self._changelog:
            self._retract_merged(ks, merge_result, merged_windows)
        if not merged_state_windows:
            return  # the result kept its only state window: nothing to fold
        if self._track:
            # The merged windows' rows are now the state window's rows.
            pending = self._pending
            for m in merged_state_windows:
                if m != state_window:
                    moved = pending.pop((key, m), None)
                    if moved:
                        pending.setdefault((key, state_window), []).extend(moved)
        ks.merge_namespaces(state_window, merged_state_windows, self.merge_contents)

    def merge_contents(self, target: Any, source: Any) -> Any:
        """Fold one state window's contents into another's (returns the result)."""
        if self._evictor is not None:
            # WQL: merged rows in arrival order (Flink: hash-set order).
            return sorted(target + source, key=_by_seq)
        self.aggregator.merge(target, source)
        return target

    # ----------------------------------------------------------------- clocks

    def advance_watermark(self, watermark: int) -> None:
        """Raise the watermark and fire due event-time timers; lower/equal does nothing."""
        if watermark <= self.watermark:
            return
        before = self.watermark
        self.watermark = watermark
        if self._watch is not None:
            self._watch(watermark)
        heap = self._timers.event.heap
        if not heap or heap[0][0] > watermark:
            return
        pop = self._timers.pop_event_time_timer
        if self._tag:
            self._fire_tagged(pop, watermark, before, FIRED_BY_EVENT_TIMER, True)
            return
        while True:
            timer = pop(watermark)
            if timer is None:
                return
            self._on_timer(timer[0], timer[1], timer[2], True)

    def advance_processing_time(self, time: int) -> None:
        """Raise processing time and fire the processing-time timers *before* ``time``.

        A timer at ``T`` fires once the clock has passed ``T`` (reads
        ``T + 1`` or later), not when it reads ``T``: Flink delays every
        processing-time timer by 1 ms (``ProcessingTimeServiceUtil
        .getProcessingTimeDelay``) so that rows processed at ``T`` still
        reach the window whose max timestamp is ``T`` -- the same bound a
        watermark ``T`` gives event time (docs/runtime.md, decision 7).
        """
        if time <= self.processing_time:
            return
        before = self.processing_time
        self.processing_time = time
        due = time - 1
        pop = self._timers.pop_processing_time_timer
        if self._tag:
            # a timer at T was due already when T < the clock before the rise
            self._fire_tagged(pop, due, before - 1, FIRED_BY_PROCESSING_TIMER, False)
            return
        while True:
            timer = pop(due)
            if timer is None:
                return
            self._on_timer(timer[0], timer[1], timer[2], False)

    def _fire_tagged(self, pop: Any, due: int, was_due: int, by: int, event: bool) -> None:
        """One timer pass of a tagging operator: each firing's ``FIRED_FIELDS`` first.

        ``due``: fire the timers up to it; ``was_due``: the timers up to it
        were due before this rise (registered since the last one: they fire
        at the first rise after the last row processed). A timer registered
        during this pass at an earlier time than the last one fired belongs
        to that firing's step (Flink's heap fires it next, in the same pass).
        """
        last: tuple | None = None
        while True:
            timer = pop(due)
            if timer is None:
                return
            time = timer[2]
            cause: tuple
            if last is not None and time < last[1]:
                cause = last
            elif time <= was_due:
                cause = (by, time, self._seq - 1)
            else:
                cause = (by, time, None)
            self._cause = last = cause
            self._on_timer(timer[0], timer[1], time, event)

    def end_of_input(self) -> None:
        """Watermark to MAX_TIME (every event-time timer fires); processing timers stay.

        Rows still waiting in a window that will now never fire (a count
        window's remainder, ``GLOBAL()``, a trigger that did not fire, a
        processing-time window) are counted as dropped, reason
        ``DROP_IN_NO_FIRING``, once, however often this is called.
        """
        self.advance_watermark(MAX_TIME)
        if self._ended:
            return
        self._ended = True
        if self._tracking == "count":
            never = sum(ks.trigger.get(_COUNT_STATE) or 0 for ks in self._keys.values())
        elif self._track:
            never = len(self._unfired)
            self._unfired.clear()
            self._pending.clear()
        else:
            never = 0
        if never:
            dropped = self.counters.dropped
            dropped[DROP_IN_NO_FIRING] = dropped.get(DROP_IN_NO_FIRING, 0) + never

    def on_timer(self, key: Key, window: Window, time: int, event: bool) -> None:
        """Flink's ``onEventTime`` / ``onProcessingTime`` for one timer."""
        ks = self._keys.get(key)
        if ks is None:
            ks = self.new_key_state(key)
        if self._finishing and (window, CLOSED) in ks.trigger:
            # A closed window fires nothing (Beam's windowIsActiveAndOpen); its
            # cleanup timer forgets it (Beam's clearFinished at garbage collection).
            if event == self._event_time and time == self._cleanup_time(window):
                del ks.trigger[(window, CLOSED)]
            self.release_key(key)
            return
        sw = window
        if self._merging:
            state_window = ks.merging.mapping.get(window)  # type: ignore[union-attr,arg-type]
            if state_window is None:
                # A timer of a window that was merged away or cleaned up and
                # whose trigger left it behind: nothing to do (as Flink).
                self.release_key(key)
                return
            sw = state_window
        ctx = self._ctx
        ctx.bind(key, ks, window)
        if event:
            r = self._trigger.on_event_time(time, window, ctx)
        else:
            r = self._trigger.on_processing_time(time, window, ctx)
        # The timer that cleans the window up: a pane it fires is the window's last.
        cleanup = event == self._event_time and time == self._cleanup_time(window)
        if r & 1:
            acc = ks.contents.get(sw)
            if acc is not None:
                timing = self._timing_timer(window, time, event)
                self.emit(key, ks, window, sw, acc, timing, cleanup or bool(r & 4))
        if r & 4 and not cleanup:
            self.close_window(key, ks, window, sw)
        else:
            if r & 2:
                self.purge(key, ks, sw)
            if cleanup:
                self._clear_all_state(key, ks, window, sw)
            elif self._finishing:
                # A finished child of a sequence may have deleted a timer at the
                # cleanup time (its own, at the same instant): keep the cleanup.
                self.register_cleanup_timer(key, window)
        self.release_key(key)

    def close_window(self, key: Key, ks: KeyState, window: Window, sw: Window) -> None:
        """The root trigger finished: Beam's closed window (``ReduceFnRunner.emit``).

        Everything of the window goes -- contents (Beam discards them after a
        finishing pane), trigger state and timers, pane count, its place in
        the merging window set (a closed session merges no more) -- but a mark
        stays until the window's cleanup time, so that its later rows are
        dropped and counted (``DROP_CLOSED_WINDOW``; Beam keeps the finished
        bits until garbage collection for the same reason).
        """
        self.purge(key, ks, sw)
        ks.panes.pop(sw, None)
        if ks.emitted:
            ks.emitted.pop(window, None)  # changelog: its last row stays, nothing follows
        ctx = self._ctx
        ctx.bind(key, ks, window)
        self._trigger.clear(window, ctx)
        if ks.merging is not None:
            ks.merging.mapping.pop(window, None)  # type: ignore[arg-type]
        ks.trigger[(window, CLOSED)] = True
        self.register_cleanup_timer(key, window)

    def _retire_closed(self, key: Key, ks: KeyState, window: Window) -> None:
        """A merge gave exactly a closed session: forget the new window and what it holds."""
        mws = ks.merging
        assert mws is not None
        sw = mws.mapping.get(window)  # type: ignore[arg-type]
        if sw is not None:
            self.purge(key, ks, sw)
            ks.panes.pop(sw, None)
            self._ctx.bind(key, ks, window)
            self._trigger.clear(window, self._ctx)
            mws.retire_window(window)  # type: ignore[arg-type]
            self.register_cleanup_timer(key, window)  # the clear may have taken the closed one's

    def _clear_all_state(self, key: Key, ks: KeyState, window: Window, sw: Window) -> None:
        """Flink's ``clearAllState``: contents, trigger state, pane count, merging entry."""
        ks.clear_namespace(sw)
        if ks.emitted:
            # changelog: the window's last row stays in the result; nothing follows it
            ks.emitted.pop(window, None)
        if self._track:
            self._track_discard(key, sw)
        self._ctx.bind(key, ks, window)
        self._trigger.clear(window, self._ctx)
        if ks.merging is not None:
            ks.merging.mapping.pop(window, None)  # type: ignore[arg-type]

    # ------------------------------------------------------- lateness, cleanup

    def _cleanup_time(self, window: Window) -> int:
        if self._event_time:
            t = window.max_timestamp + self._lateness
            return t if t < MAX_TIME else MAX_TIME
        return window.max_timestamp

    def is_window_late(self, window: Window) -> bool:
        """Flink's ``isWindowLate``: an event-time window whose cleanup time has passed."""
        return self._event_time and self._cleanup_time(window) <= self.watermark

    def register_cleanup_timer(self, key: Key, window: Window) -> None:
        t = self._cleanup_time(window)
        if t == MAX_TIME:
            return  # no cleanup timer for "end of time" (GlobalWindow, overflow)
        if self._event_time:
            self._timers.register_event_time_timer(key, window, t)
        else:
            self._timers.register_processing_time_timer(key, window, t)

    def delete_cleanup_timer(self, key: Key, window: Window) -> None:
        t = self._cleanup_time(window)
        if t == MAX_TIME:
            return
        if self._event_time:
            self._timers.delete_event_time_timer(key, window, t)
        else:
            self._timers.delete_processing_time_timer(key, window, t)

    # ----------------------------------------------------------------- output

    def timing_now(self, window: Window) -> str:
        """Pane timing of a firing not caused by a timer of the window's own domain."""
        return pane_timing(window, self.watermark)

    def _timing_timer(self, window: Window, time: int, event: bool) -> str:
        own = time if event == self._event_time else None
        return pane_timing(window, self.watermark, own)

    def emit(
        self,
        key: Key,
        ks: KeyState,
        window: Window,
        sw: Window,
        acc: Any,
        timing: str,
        last: bool = False,
    ) -> None:
        """Emit one firing of ``window`` (contents under state window ``sw``).

        ``last``: the firing is the one of the timer that cleans the window
        up, so no later pane of it can follow (``is_last``).
        """
        pane = ks.panes.get(sw, 0)
        ks.panes[sw] = pane + 1
        evictor = self._evictor
        if evictor is not None:
            held = [r[1] for r in acc] if self._track else None
            rows = evictor.evict_before(acc, window)
            results = self.aggregator.result_of_rows(rows)
            if held is not None:
                self._track_fired(key, sw, rows, held)
            rows = evictor.evict_after(rows, window)
            if rows:
                ks.contents[sw] = rows
            else:
                ks.contents.pop(sw, None)
        else:
            results = self.aggregator.result(acc)
            if self._track:
                self._track_fired(key, sw, None, None)
        if type(window) is GlobalWindow:
            row = (key, None, None, None, pane, timing, MAX_TIME, *results)
        else:
            max_ts = window.end - 1  # type: ignore[union-attr]
            row = (key, window.start, window.end, max_ts, pane, timing, max_ts, *results)  # type: ignore[union-attr]
        if self._tag:
            # The firing tags come before the extended fields, which stay last.
            row += self._cause
        self.counters.rows_emitted += 1
        if not self._extended:
            self._out.append(row)
            return
        row = (*row, last)
        if not self._changelog:
            self._out.append((*row, INSERT))
            return
        # Flink table-runtime's emitWindowResult with produceUpdates: the first
        # pane of a window is an insert, every later one retracts the row the
        # window emitted before (kept in its state) and then adds the new one.
        emitted = ks.emitted
        previous = emitted.get(window)
        if previous is None:
            self._out.append((*row, INSERT))
        else:
            self._out.append((*previous, UPDATE_BEFORE))
            self._out.append((*row, UPDATE_AFTER))
        emitted[window] = row

    def _retract_merged(self, ks: KeyState, merge_result: Window, merged: list[TimeWindow]) -> None:
        """Changelog: a merge retracts (``-D``) the rows of the windows it absorbed.

        They are no longer windows of the result: the merged window emits a
        row of its own (an insert) when it next fires. A merged window whose
        bounds did not change keeps its row.
        """
        emitted = ks.emitted
        for m in merged:
            row = emitted.pop(m, None)
            if row is None:
                continue
            if m == merge_result:
                emitted[m] = row
            else:
                self._out.append((*row, DELETE))

    # ------------------------------------------- rows that end in no firing

    def _track_add(self, key: Key, sw: Window, seq: int) -> None:
        """Row ``seq`` was added to state window ``sw`` and has not been in a firing of it."""
        if seq == self._fired_seq:
            return  # already in a firing of one of its earlier windows
        if seq == self._gone_seq:
            # Its earlier windows let it go unfired, but this one takes it.
            self._gone_seq = -1
            dropped = self.counters.dropped
            dropped[DROP_IN_NO_FIRING] -= 1
            if not dropped[DROP_IN_NO_FIRING]:
                del dropped[DROP_IN_NO_FIRING]
        self._pending.setdefault((key, sw), []).append(seq)
        unfired = self._unfired
        unfired[seq] = unfired.get(seq, 0) + 1

    def _track_fired(self, key: Key, sw: Window, used: list | None, held: list[int] | None) -> None:
        """``sw`` emitted a firing over ``used`` (its rows after EVICT BEFORE; None: all).

        ``held``: the arrival numbers of the evicting window's rows before
        eviction; rows it held that the firing did not use were evicted.
        """
        pending = self._pending.pop((key, sw), None)
        if not pending:
            return
        unfired = self._unfired
        current = self._seq - 1
        if used is None:
            for s in pending:
                unfired.pop(s, None)  # in a firing: counted as out, whatever else holds it
            if current in pending:
                self._fired_seq = current
            return
        fired = {r[1] for r in used}
        if current in fired:
            self._fired_seq = current
        evicted = set(held or ()) - fired
        kept: list[int] = []
        gone: list[int] = []
        for s in pending:
            if s in fired:
                unfired.pop(s, None)
            elif s in evicted:
                gone.append(s)
            else:
                kept.append(s)
        self._track_gone(gone)
        if kept:
            self._pending[(key, sw)] = kept

    def _track_discard(self, key: Key, sw: Window) -> None:
        """``sw``'s contents are gone (purged or cleaned up) without another firing."""
        pending = self._pending.pop((key, sw), None)
        if pending:
            self._track_gone(pending)

    def _track_gone(self, seqs: list[int]) -> None:
        """Rows ``seqs`` left a window that never included them in a firing."""
        unfired = self._unfired
        current = self._seq - 1
        gone = 0
        for seq in seqs:
            n = unfired.get(seq)
            if n is None:
                continue  # the row was in a firing of another window
            if n > 1:
                unfired[seq] = n - 1
                continue
            del unfired[seq]
            gone += 1
            if seq == current:
                self._gone_seq = seq
        if gone:
            self.drop(DROP_IN_NO_FIRING, gone)

    def drain(self) -> list[tuple]:
        """Emitted rows since the last drain (layout: ``config.EMITTED_FIELDS`` + aggregates)."""
        out, self._out = self._out, []
        return out

    def drain_late(self) -> list[tuple]:
        """Late rows no window accepted, ``(key, timestamp, values)``, since the last drain."""
        out, self._late = self._late, []
        return out

    # ------------------------------------------------------------------ batch

    def process_batch(self, batch: RowBatch) -> bool:
        """The vectorized entry point; equal to the per-row loop in every observable way.

        Returns whether a batch form (the NumPy path, the columnar arrays) took
        the batch; ``False``: the per-row loop ran.
        """
        # The NumPy path keeps no per-row firing record: "rows" tracking needs the
        # loop (except the count-triggered sessions' form, which records them), and
        # the firing tags of a pipeline stage always do.
        path = self._path
        batch_form = self._batch_form
        # Extended rows (is_last, op) come from ``emit`` only: the batch forms build
        # their rows themselves.
        if (
            batch_form is not None
            and not self._extended
            and not self._tag
            and (
                path.process_batch(batch)
                if path is not None
                else not self._track and batch_form(self, batch)
            )
        ):
            return True
        self.process_rows(batch)
        return False

    def process_rows(self, batch: RowBatch) -> None:
        """The per-row loop ``process_batch`` must equal, row by row (also for the NumPy
        path's rows it leaves to the loop): advance the clocks, then the row."""
        n = len(batch)
        if n == 0:
            return
        keys, wms, tss, rows = batch.per_row()
        pts = as_list(batch.processing_time) if batch.processing_time is not None else None
        advance_wm = self.advance_watermark
        advance_pt = self.advance_processing_time
        process = self.process_element
        for i in range(n):
            advance_wm(wms[i])
            if pts is not None:
                advance_pt(pts[i])
            process(keys[i], tss[i], rows[i])

    # ------------------------------------------------------------- inspection

    # (a fast path may hold state of its own: wql.runtime.columnar)

    def timers(self, key: Key) -> tuple[list[int], list[int]]:
        """Distinct pending timer times of ``key``: (event times, processing times)."""
        event, processing = self._timers.times(key)
        if self._path is not None:
            held = self._path.held_timers(key)
            if held:
                event = sorted({*event, *held})
        return event, processing

    def active_keys(self) -> list[Key]:
        """Keys that currently hold state or timers."""
        held = self._path.held_keys() if self._path is not None else []
        return list(self._keys) + [k for k in held if k not in self._keys]

    def open_windows(self) -> int:
        """Number of (key, state window) contents currently held."""
        held = self._path.held_windows() if self._path is not None else 0
        return sum(len(ks.contents) for ks in self._keys.values()) + held

    def state_size(self) -> int:
        """Rough size of the kept state: contents, buffered rows, trigger and pane entries."""
        total = self._path.held_windows() if self._path is not None else 0
        for ks in self._keys.values():
            total += len(ks.trigger) + len(ks.panes) + len(ks.emitted)
            for c in ks.contents.values():
                total += len(c) if self._evictor is not None else 1
            if ks.merging is not None:
                total += len(ks.merging.mapping)
        return total

    # --------------------------------------------------------------- snapshots

    def _config_fingerprint(self) -> str:
        """The configuration as snapshots record it; computed once per configuration
        (a frozen dataclass), since hosts that keep state per key take and restore a
        snapshot per key and call."""
        config = self.config
        cached = self._fingerprint
        if cached is not None and cached[0] is config:
            return cached[1]
        flags = [n for n in ("tag_firings", "mark_last", "changelog") if getattr(config, n)]
        fingerprint = repr(config) + "".join(f" +{n}" for n in flags)
        self._fingerprint = (config, fingerprint)
        return fingerprint

    def snapshot(self) -> bytes:
        """The whole operator: state, timers, clocks, counters and undrained output."""
        self._settle()
        return _snap.dumps(
            {
                "kind": "operator",
                "config": self._config_fingerprint(),
                "watermark": self.watermark,
                "processing_time": self.processing_time,
                "seq": self._seq,
                "counters": self.counters.as_dict(),
                "keys": {k: self._key_data(k, ks) for k, ks in self._keys.items()},
                "timers": self._timers.to_data(),
                "out": self._out,
                "late": self._late,
                "unfired": (list(self._pending.items()), self._unfired, self._ended),
            }
        )

    def _key_data(self, key: Key, ks: KeyState) -> tuple:
        """A key's state as snapshots hold it (sliced windows as per-window accumulators)."""
        if self._path is not None:
            return self._path.key_data(key, ks)
        return ks.to_data()

    @classmethod
    def restore(cls, config: OperatorConfig, data: bytes, fast: bool = True) -> WindowOperator:
        """An operator equal to the one ``snapshot()`` was taken from."""
        payload = _snap.loads(data)
        op = cls(config, fast)
        if not isinstance(payload, dict) or payload.get("kind") != "operator":
            raise _snap.SnapshotError("not a whole-operator snapshot")
        if payload["config"] != op._config_fingerprint():
            raise WqlUnsupportedError(
                "the snapshot was taken with a different operator configuration",
                code=ErrorCode.SNAPSHOT,
            )
        op.watermark = payload["watermark"]
        op.processing_time = payload["processing_time"]
        op._seq = payload["seq"]
        c = payload["counters"]
        op.counters = Counters(c["rows_in"], c["rows_emitted"], c["late_rows"], dict(c["dropped"]))
        # in place: the fast paths hold the operator's key mapping
        op._keys.update(
            (k, KeyState.from_data(d, op._merge_windows, op._eager_merge))
            for k, d in payload["keys"].items()
        )
        for ks in op._keys.values():
            op._after_restore(ks)
        op._timers.load(payload["timers"])
        op._out = list(payload["out"])
        op._late = list(payload["late"])
        pending, unfired, ended = payload.get("unfired", ((), {}, False))
        op._pending = {k: list(v) for k, v in pending}
        op._unfired = dict(unfired)
        op._ended = ended
        return op

    def snapshot_key(self, key: Key) -> bytes:
        """One key's state and timers (for hosts that keep state per key, e.g. Spark TWS).

        Clocks, counters and undrained output are not part of it: the host
        owns the clocks and must ``drain()`` / ``drain_late()`` first.
        """
        self._settle()
        ks = self._keys.get(key)
        event, processing = self._timers.key_timers(key)
        return _snap.dumps(
            {
                "kind": "key",
                "config": self._config_fingerprint(),
                "state": None if ks is None else self._key_data(key, ks),
                "event_timers": event,
                "processing_timers": processing,
                "seq": self._seq,
                "unfired": self._key_tracking(key),
            }
        )

    def restore_key(self, key: Key, data: bytes) -> None:
        """Replace ``key``'s state and timers with a ``snapshot_key`` result."""
        payload = _snap.loads(data)
        if not isinstance(payload, dict) or payload.get("kind") != "key":
            raise _snap.SnapshotError("not a per-key snapshot")
        if payload["config"] != self._config_fingerprint():
            raise WqlUnsupportedError(
                "the key snapshot was taken with a different operator configuration",
                code=ErrorCode.SNAPSHOT,
            )
        self.forget_key(key)
        if payload["state"] is not None:
            self._keys[key] = KeyState.from_data(
                payload["state"], self._merge_windows, self._eager_merge
            )
            self._after_restore(self._keys[key])
        self._timers.restore_key(key, payload["event_timers"], payload["processing_timers"])
        pending, unfired = payload.get("unfired") or ((), {})
        for w, seqs in pending:
            self._pending[(key, w)] = list(seqs)
        self._unfired.update(unfired)
        # Arrival numbers must keep increasing across hosts' restores (they
        # order FIRST_VALUE/LAST_VALUE/COLLECT_LIST ties and evictor buffers).
        self._seq = max(self._seq, payload["seq"])

    def _settle(self) -> None:
        """State a fast path holds of its own into key states and timers (snapshots, keys)."""
        if self._path is not None:
            self._path.settle()

    def _after_restore(self, ks: KeyState) -> None:
        if self._evictor is None and any(s.kind == "COUNT_DISTINCT" for s in self.aggregator.specs):
            for acc in ks.contents.values():
                self.aggregator.after_restore(acc)

    def forget_key(self, key: Key) -> None:
        """Drop ``key``'s state and timers from memory (after the host saved them)."""
        self._settle()
        self._keys.pop(key, None)
        self._timers.drop_key(key)
        if self._pending:
            for k, w in [kw for kw in self._pending if kw[0] == key]:
                for s in self._pending.pop((k, w)):
                    self._unfired.pop(s, None)
        if self._path is not None:
            self._path.forget(key)

    def _key_tracking(self, key: Key) -> tuple | None:
        """``key``'s rows that no firing included yet: (window, arrival numbers), counts."""
        pending = [(w, seqs) for (k, w), seqs in self._pending.items() if k == key]
        if not pending:
            return None
        unfired = self._unfired
        counts = {s: unfired[s] for _, seqs in pending for s in seqs if s in unfired}
        return pending, counts

    # ------------------------------------------------- the fast paths' interface
    # wql.runtime.fastpath, wql.runtime.columnar and wql.runtime.vectorized work
    # through these methods and the objects they hand out (KeyState, TimerService,
    # Aggregator); they read ``config``, ``watermark``, ``processing_time`` and
    # ``aggregator`` and never assign a field of the operator.

    def admit(self, n: int = 1) -> int:
        """Count ``n`` rows in; returns the first of their ``n`` arrival numbers.

        A tagging operator (``config.tag_firings``) takes rows one at a time
        (``process_batch`` runs the per-row loop): what it emits until the
        next timer pass is fired by this row.
        """
        self.counters.rows_in += n
        seq = self._seq
        self._seq = seq + n
        if self._tag:
            self._cause = (FIRED_BY_ROW, None, seq)
        return seq

    def drop(self, reason: str, n: int = 1) -> None:
        """Count ``n`` rows as dropped for ``reason``."""
        dropped = self.counters.dropped
        dropped[reason] = dropped.get(reason, 0) + n

    @property
    def key_states(self) -> Mapping[Key, KeyState]:
        """Every key that holds state or timers -> its state (the same mapping for the
        operator's lifetime; changed only through the methods of this section)."""
        return self._keys

    def new_key_state(self, key: Key) -> KeyState:
        """Empty state for ``key`` (which holds none yet)."""
        ks = KeyState(
            MergingWindowSet(self._merge_windows, {}, eager=self._eager_merge)  # type: ignore[arg-type]
            if self._merging
            else None
        )
        self._keys[key] = ks
        return ks

    def release_key(self, key: Key) -> None:
        """Forget ``key`` when it holds no state and no timers (Flink's state is then empty)."""
        ks = self._keys.get(key)
        if ks is not None and ks.is_empty() and not self._timers.has_timers(key):
            del self._keys[key]

    @property
    def timer_service(self) -> TimerService:
        """The timers of every key (both time domains)."""
        return self._timers

    def not_accepted(
        self, key: Key, timestamp: int | None, values: tuple, watermark: int | None = None
    ) -> None:
        """Flink's "skipped element": side output if late, else counted (never lost).

        ``watermark``: the one the row saw (default: the current one).
        """
        wm = self.watermark if watermark is None else watermark
        # isElementLate, with ts + lateness capped at MAX_TIME like cleanup times
        # (Java's long would wrap around and call the row late as well).
        if self._event_time and min(timestamp + self._lateness, MAX_TIME) <= wm:  # type: ignore[operator]
            if self.config.late_output:
                cols = self._late_columns
                out_values = values if cols is None else tuple(values[i] for i in cols)
                self._late.append((key, timestamp, out_values))
                self.counters.late_rows += 1
            else:
                self.drop(DROP_LATE)
        else:
            # No window took a row that is not late: a HOP with size < slide
            # leaves gaps between windows (Flink loses such rows silently).
            self.drop(DROP_LATE_WINDOW)
        self.release_key(key)

    @property
    def tracks_rows(self) -> bool:
        """Whether the operator follows each row until a firing includes it ("rows" mode)."""
        return self._track

    def track_rows(self, key: Key, sw: Window, seqs: list[int]) -> None:
        """Rows ``seqs``, new and each in no other window, were added to state window ``sw``
        (what ``add_row`` records row by row)."""
        if self._track and seqs:
            self._pending.setdefault((key, sw), []).extend(seqs)
            self._unfired.update(dict.fromkeys(seqs, 1))

    def emit_rows(self, rows: list[tuple]) -> None:
        """Append firings built by the caller (``EMITTED_FIELDS`` + aggregate results).

        Only the batch paths build rows themselves, and a tagging operator
        takes none of them (``process_batch``), so these rows are never tagged.
        """
        assert not self._tag, "a tagging operator emits through emit()"
        self._out.extend(rows)
        self.counters.rows_emitted += len(rows)

    def use_path(self, path: FastPath | None) -> None:
        """Make ``path`` the per-row path (None: the plain methods)."""
        self._path = path
        self._watch = path.on_watermark if path is not None and path.watches_watermark else None
        if path is None:
            vars(self).pop("process_element", None)
            self._on_timer = self.on_timer
        else:
            self.process_element = path.process_element  # type: ignore[method-assign]
            self._on_timer = path.on_timer  # type: ignore[method-assign]


#: The CountTrigger's count under PurgingTrigger on the global window (child 0).
_COUNT_STATE = (GLOBAL_WINDOW, "0.count")


def _firing_guarantee(config: OperatorConfig) -> str | None:
    """How the operator knows which accepted rows were in an emitted firing.

    ``None``: every accepted row is: an event-time window with the
    WATERMARK trigger (purging or not) and no evictor fires every window
    with contents at its end, or at once when the row arrives within the
    allowed lateness, and at end of input at the latest.
    ``"count"``: ``COUNT_WINDOW(n)``-style global windows (PURGING COUNT(n),
    no evictor): each firing takes and purges every row, so the rows in no
    firing are exactly the count held at end of input.
    ``"rows"``: anything else; every row's arrival number is followed
    through its windows until it is in a firing or leaves them all.
    """
    trigger = config.effective_trigger
    inner = trigger.nested if isinstance(trigger, PurgingTrigger) else trigger
    if config.evictor is None and config.assigner.is_event_time and type(inner) is EventTimeTrigger:
        return None
    if (
        config.evictor is None
        and isinstance(config.assigner, GlobalWindows)
        and isinstance(trigger, PurgingTrigger)
        and type(trigger.nested) is CountTrigger
    ):
        return "count"
    return "rows"
