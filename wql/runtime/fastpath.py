"""Fast per-row paths of ``WindowOperator``: its plain Flink port's behaviour, faster.

``WindowOperator`` is the readable port of Flink's operator: every row goes
through the assigner and the trigger objects. This module holds what only
makes rows cheaper, chosen once per operator by
``wql.runtime.operator_factory.choose_path`` (which ``WindowOperator.__init__``
calls through the ``FastPaths`` installed in it; the core imports no path):

- :class:`WindowPath` (non-merging windows): TUMBLE, HOP with a size that is
  a multiple of the slide, and CUMULATE windows are assigned inline (a row
  reuses the previous row's window list when it falls in the same
  slide/step slot); for event-time windows with the default ``WATERMARK``
  trigger and no evictor, ``EventTimeTrigger.on_element`` /
  ``on_event_time`` and the cleanup timer are inlined too (a window with
  contents already holds both timers while its max timestamp is ahead of
  the watermark, so only a window's first row registers them).
- :class:`SessionPath` (event-time sessions, static or dynamic gap, default
  trigger, no evictor): a row that opens a session, falls inside one or
  extends exactly one is handled in one method with the same state changes
  and timer calls, in the same order, as ``MergingWindowSet.add_window`` +
  the merge callback + ``EventTimeTrigger``; a row bridging several
  sessions takes ``add_window`` with an inlined callback.
- :class:`CountSessionPath` (event-time sessions under ``[PURGING] COUNT(n)``,
  any evictor): the same shortcuts with ``CountTrigger`` and the cleanup
  timers inlined (the operator still keeps the evictor's buffers and the
  rows it follows for its "in no firing" counter);
- ``wql.runtime.columnar.ColumnarWindows`` (HOP/CUMULATE at lateness 0, on
  top of :class:`WindowPath`): every key's (key, slice) partials as arrays,
  for batches.

A path works through the operator's fast-path interface (the last section
of ``WindowOperator``: key state, timers, emit, arrival numbers, drops) and
never assigns the operator's fields (:class:`RowPath` is the
``window_operator.FastPath`` the operator calls). ``WindowOperator(config, fast=False)``
runs none of them; ``tests/runtime/test_plain_path.py`` demands that every
path equals it on output, late rows, counters and snapshots.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from typing import TYPE_CHECKING, Any

from wql.runtime.assigners import (
    DROP_MISSING_TIMESTAMP,
    CumulateWindows,
    DropRow,
    DynamicSessionWindows,
    SessionWindows,
    SlidingWindows,
    TumblingWindows,
)
from wql.runtime.config import ON_TIME, OperatorConfig, RowBatch
from wql.runtime.triggers import CountTrigger, EventTimeTrigger, PurgingTrigger
from wql.runtime.vectorized import try_process_batch
from wql.runtime.windows import MAX_TIME, TimeWindow, Window, make_window

if TYPE_CHECKING:
    from wql.runtime.state import KeyState
    from wql.runtime.window_operator import WindowOperator

Key = Hashable
_BEYOND = 2**64  # above every cleanup time


class RowPath:
    """A fast path of one operator: ``process_element``, the timer callback, the batch form.

    The base class runs the operator's plain timer callback, keeps no state
    of its own and lets ``process_batch`` use the vectorized path. A path
    that keeps state outside the operator's key states and timers (the
    columnar arrays) answers ``held_*`` for the inspection methods and moves
    it into them on ``settle``.
    """

    #: ``process_batch`` may try the NumPy path (``wql.runtime.vectorized``).
    vectorizable = True

    def __init__(self, op: WindowOperator) -> None:
        self.op = op

    def process_element(self, key: Key, timestamp: int | None, values: tuple) -> None:
        raise NotImplementedError

    def on_timer(self, key: Key, window: Window, time: int, event: bool) -> None:
        self.op.on_timer(key, window, time, event)

    def process_batch(self, batch: RowBatch) -> bool:
        """``process_batch``'s fast path: whether it took the batch (else the loop runs)."""
        return self.vectorizable and try_process_batch(self.op, batch)

    #: The operator calls ``on_watermark`` on every rise of the watermark.
    watches_watermark = False

    def on_watermark(self, watermark: int) -> None:
        """The watermark rose to ``watermark`` (only when ``watches_watermark``)."""

    def key_data(self, key: Key, ks: KeyState) -> tuple:
        """``key``'s state as snapshots hold it (the plain path's form)."""
        return ks.to_data()

    def forget(self, key: Key) -> None:
        """``key`` left the operator (``forget_key``)."""

    def settle(self) -> None:
        """Move any state the path keeps outside the operator's key states and timers
        into them (before snapshots and per-key operations)."""

    # state the path keeps outside the operator's key states and timers
    def held_keys(self) -> list[Key]:
        return []

    def held_windows(self) -> int:
        return 0

    def held_timers(self, key: Key) -> list[int]:
        return []


def inlines_event_trigger(config: OperatorConfig) -> bool:
    """Event-time windows with the default WATERMARK trigger and no evictor."""
    return (
        config.assigner.is_event_time
        and type(config.effective_trigger) is EventTimeTrigger
        and config.evictor is None
    )


class WindowPath(RowPath):
    """Non-merging windows: inlined assignment and, where it applies, the inlined trigger."""

    @staticmethod
    def applies(config: OperatorConfig) -> bool:
        assigner = config.assigner
        return not assigner.is_merging and (
            _slot_unit(assigner) is not None or inlines_event_trigger(config)
        )

    def __init__(self, op: WindowOperator) -> None:
        super().__init__(op)
        config = op.config
        assigner: Any = config.assigner
        self.assign = assigner.assign_windows
        self.event_time = assigner.is_event_time
        self.tumbling = (
            (assigner.size, assigner.offset) if type(assigner) is TumblingWindows else None
        )
        # HOP (size a multiple of the slide) and CUMULATE windows depend only on
        # the slide-/step-aligned slot of t: consecutive rows share the list.
        self.slotted = None if self.tumbling else _slot_unit(assigner)
        self.inline_trigger = inlines_event_trigger(config)
        self.lateness = config.allowed_lateness
        self.create = op.aggregator.create
        self.add = op.aggregator.add
        self.timers = op.timer_service
        self.key_states = op.key_states
        self.last_window: TimeWindow | None = None
        self.last_slot: int | None = None
        self.last_windows: Sequence[Window] = ()

    def process_element(self, key: Key, timestamp: int | None, values: tuple) -> None:
        op = self.op
        seq = op.admit()
        if self.event_time:
            if timestamp is None:
                op.drop(DROP_MISSING_TIMESTAMP)
                return
            t = timestamp
        else:
            t = op.processing_time
        tumbling = self.tumbling
        if tumbling is not None:
            # consecutive rows mostly share a window: the last one is reused
            size, offset = tumbling
            start = t - (t - offset) % size
            tw = self.last_window
            if tw is None or tw[0] != start:
                tw = self.last_window = make_window((start, start + size))
            windows: Sequence[Window] = (tw,)
        elif self.slotted is not None:
            unit, offset = self.slotted
            slot = t - (t - offset) % unit
            if slot != self.last_slot:
                self.last_windows = self.assign(t, values)
                self.last_slot = slot
            windows = self.last_windows
        else:
            try:
                windows = self.assign(t, values)
            except DropRow as d:
                op.drop(d.reason)
                return
        if not self.inline_trigger:
            op.process_windows(key, timestamp, seq, values, windows)
            return
        # WindowOperator.process_windows with EventTimeTrigger.on_element and the
        # cleanup timer inlined (the same calls they would make).
        ks = self.key_states.get(key)
        if ks is None:
            ks = op.new_key_state(key)
        accepted = False
        contents = ks.contents
        add = self.add
        lateness = self.lateness
        wm = op.watermark
        # cleanupTime <= watermark, where cleanupTime is capped at MAX_TIME: at
        # MAX_TIME (after end of input) every window is late.
        late_bound = wm if wm < MAX_TIME else _BEYOND
        for w in windows:
            max_ts = w[1] - 1  # type: ignore[index]
            if max_ts + lateness <= late_bound:
                continue  # the window is late: already cleaned up or never to fire
            accepted = True
            acc = contents.get(w)
            if acc is None:
                acc = contents[w] = self.create()
                add(acc, timestamp, seq, values)
                if max_ts > wm:
                    timers = self.timers
                    timers.register_event_time_timer(key, w, max_ts)
                    if lateness and max_ts + lateness < MAX_TIME:
                        timers.register_event_time_timer(key, w, max_ts + lateness)
                    continue
            else:
                add(acc, timestamp, seq, values)
                if max_ts > wm:
                    continue  # both timers are pending since the window's first row
            # behind the watermark, within the allowed lateness: FIRE on this row
            op.emit(key, ks, w, w, acc, op.timing_now(w))
            op.register_cleanup_timer(key, w)
        if not accepted:
            op.not_accepted(key, timestamp, values)

    def on_timer(self, key: Key, window: Window, time: int, event: bool) -> None:
        op = self.op
        if not (self.inline_trigger and event):
            op.on_timer(key, window, time, event)
            return
        # WindowOperator.on_timer with EventTimeTrigger inlined: FIRE at max_ts
        # (ON_TIME); its clear() deletes the max_ts timer, which has fired by now.
        ks = op.key_states.get(key)
        if ks is None:
            ks = op.new_key_state(key)
        max_ts = window[1] - 1  # type: ignore[index]
        contents = ks.contents
        cleanup = max_ts + self.lateness
        cleanup = cleanup if cleanup < MAX_TIME else MAX_TIME
        if time == max_ts:
            acc = contents.get(window)
            if acc is not None:
                # the firing of the cleanup timer (lateness 0) is the window's last
                op.emit(key, ks, window, window, acc, ON_TIME, time == cleanup)
        if time == cleanup:
            contents.pop(window, None)
            ks.panes.pop(window, None)
        op.release_key(key)


def _slot_unit(assigner: Any) -> tuple[int, int] | None:
    """(unit, offset) of assigners whose windows depend only on the unit-aligned slot."""
    if type(assigner) is TumblingWindows:
        return assigner.size, assigner.offset
    if type(assigner) is SlidingWindows and assigner.size % assigner.slide == 0:
        return assigner.slide, assigner.offset
    if type(assigner) is CumulateWindows:
        return assigner.step, assigner.offset
    return None


class _SessionRows(RowPath):
    """What the session paths share: a row's session window and the sessions it meets."""

    def __init__(self, op: WindowOperator) -> None:
        super().__init__(op)
        assigner: Any = op.config.assigner
        self.gap = assigner.gap if type(assigner) is SessionWindows else 0
        self.assign = assigner.assign_windows
        self.lateness = op.config.allowed_lateness
        self.timers = op.timer_service
        self.key_states = op.key_states

    def _meet(self, key: Key, timestamp: int | None, values: tuple) -> tuple | None:
        """Admit the row: ``(seq, key state, start, end, in-flight sessions it meets, the
        last of them)``, or None when it is dropped (no timestamp, invalid gap)."""
        op = self.op
        seq = op.admit()
        if timestamp is None:
            op.drop(DROP_MISSING_TIMESTAMP)
            return None
        start = timestamp
        if self.gap:
            end = timestamp + self.gap
        else:
            try:
                ((start, end),) = self.assign(timestamp, values)
            except DropRow as d:
                op.drop(d.reason)
                return None
        ks = self.key_states.get(key)
        if ks is None:
            ks = op.new_key_state(key)
        hit: Any = None
        hits = 0
        for w in ks.merging.mapping:  # type: ignore[union-attr]
            if w[0] <= end and w[1] >= start:
                hit = w
                hits += 1
        return seq, ks, start, end, hits, hit


class SessionPath(_SessionRows):
    """Event-time sessions (static or dynamic gap), default trigger, no evictor."""

    @staticmethod
    def applies(config: OperatorConfig) -> bool:
        return isinstance(
            config.assigner, SessionWindows | DynamicSessionWindows
        ) and inlines_event_trigger(config)

    def __init__(self, op: WindowOperator) -> None:
        super().__init__(op)
        self.create = op.aggregator.create
        self.add = op.aggregator.add
        # the key a bridging row's merge callback works on
        self._key: Key = None
        self._ks: KeyState | None = None

    def process_element(self, key: Key, timestamp: int | None, values: tuple) -> None:
        """``WindowOperator.process_element`` for one session row (see the class doc)."""
        met = self._meet(key, timestamp, values)
        if met is None:
            return
        seq, ks, start, end, hits, hit = met
        op = self.op
        mws = ks.merging
        mapping = mws.mapping
        wm = op.watermark
        lateness = self.lateness
        # Whether the session's max_ts timer may be missing. An in-flight session
        # whose max_ts is ahead of the watermark holds it: it was registered when
        # the session got its bounds (opened, extended or merged, always while
        # max_ts > watermark, which only rises), and only its firing or its being
        # merged away removes it. So registering it again (as on_element does)
        # is a no-op for a session the row falls into or just extended.
        opened = False
        if hits == 0:
            actual = make_window((start, end))
            mapping[actual] = actual
            opened = True
        elif hits == 1:
            if hit[0] <= start and hit[1] >= end:
                actual = hit  # inside one session, unchanged: no merge callback
            else:
                # One session extended: add_window's one-hit shortcut, then the
                # merge callback with EventTimeTrigger.on_merge/clear inlined
                # (register the cover's timer, delete the absorbed window's).
                h0, h1 = hit
                actual = make_window((h0 if h0 < start else start, h1 if h1 > end else end))
                mapping[actual] = mapping.pop(hit)
                self._merge_timers(key, actual, (hit,))
        else:
            self._key, self._ks = key, ks
            actual = mws.add_window(make_window((start, end)), self._on_merge)
            opened = True
        max_ts = actual[1] - 1
        # isWindowLate: cleanup time (capped at MAX_TIME) <= watermark.
        if max_ts + lateness <= wm or wm == MAX_TIME:
            # A late merge result: retired and skipped (the row is not accepted).
            mws.retire_window(actual)
            op.not_accepted(key, timestamp, values)
            return
        sw = mapping[actual]
        contents = ks.contents
        acc = contents.get(sw)
        if acc is None:
            acc = contents[sw] = self.create()
        self.add(acc, timestamp, seq, values)
        if max_ts > wm:
            # EventTimeTrigger.on_element: CONTINUE after registering the
            # max_ts timer (at lateness 0 it is also the cleanup timer).
            if opened:
                self.timers.register_event_time_timer(key, actual, max_ts)
            if not lateness:
                return
        else:
            # Late but within allowed lateness: FIRE on this row.
            op.emit(key, ks, actual, sw, acc, op.timing_now(actual))
        op.register_cleanup_timer(key, actual)

    def _merge_timers(self, key: Key, cover: TimeWindow, absorbed: Sequence[TimeWindow]) -> None:
        """``EventTimeTrigger.on_merge`` on ``cover``; ``clear`` and the cleanup-timer
        deletion of every ``absorbed`` window (the merge callback's timer calls)."""
        timers = self.timers
        max_ts = cover[1] - 1
        if max_ts > self.op.watermark:
            timers.register_event_time_timer(key, cover, max_ts)
        lateness = self.lateness
        for m in absorbed:
            m_max = m[1] - 1
            timers.delete_event_time_timer(key, m, m_max)
            if lateness and m_max + lateness < MAX_TIME:
                timers.delete_event_time_timer(key, m, m_max + lateness)

    def _on_merge(
        self,
        merge_result: TimeWindow,
        merged_windows: list[TimeWindow],
        state_window: TimeWindow,
        merged_state_windows: list[TimeWindow],
    ) -> None:
        """``WindowOperator._on_merge`` with ``EventTimeTrigger`` inlined."""
        key, ks = self._key, self._ks
        assert ks is not None
        self._merge_timers(key, merge_result, merged_windows)
        if merged_state_windows:
            ks.merge_namespaces(state_window, merged_state_windows, self.op.merge_contents)


class CountSessionPath(_SessionRows):
    """Event-time sessions (static or dynamic gap) under ``[PURGING] COUNT(n)``, any evictor.

    ``WindowOperator.process_element`` for such a row with the merging set's
    one-session shortcuts and ``CountTrigger.on_merge`` / ``clear`` /
    ``on_element`` and the cleanup timers inlined: the same state (the
    trigger's count under the same name, contents, the rows the operator
    follows for its "in no firing" counter) and the same timer calls, in the
    same order. A row bridging several sessions takes ``add_window`` with the
    operator's own merge callback.
    """

    @staticmethod
    def applies(config: OperatorConfig) -> bool:
        trigger = config.effective_trigger
        inner = trigger.nested if type(trigger) is PurgingTrigger else trigger
        return (
            isinstance(config.assigner, SessionWindows | DynamicSessionWindows)
            and config.assigner.is_event_time
            and type(inner) is CountTrigger
        )

    def __init__(self, op: WindowOperator) -> None:
        super().__init__(op)
        trigger: Any = op.config.effective_trigger
        self.purging = type(trigger) is PurgingTrigger
        self.count = (trigger.nested if self.purging else trigger).count
        # the trigger context's name for the count (a child's names carry its path)
        self.name = "0.count" if self.purging else "count"

    def process_element(self, key: Key, timestamp: int | None, values: tuple) -> None:
        met = self._meet(key, timestamp, values)
        if met is None:
            return
        seq, ks, start, end, hits, hit = met
        op = self.op
        mws = ks.merging
        mapping = mws.mapping
        trigger = ks.trigger
        name = self.name
        lateness = self.lateness
        if hits == 0:
            actual = make_window((start, end))
            mapping[actual] = actual
        elif hits == 1:
            if hit[0] <= start and hit[1] >= end:
                actual = hit  # inside one session, unchanged: no merge callback
            else:
                # add_window's one-hit shortcut, then the merge callback:
                # CountTrigger.on_merge (the counts add up on the cover),
                # CountTrigger.clear and the cleanup-timer deletion of the hit
                h0, h1 = hit
                actual = make_window((h0 if h0 < start else start, h1 if h1 > end else end))
                mapping[actual] = mapping.pop(hit)
                moved = trigger.get((hit, name))
                if moved is not None:
                    held = trigger.get((actual, name))
                    trigger[(actual, name)] = moved if held is None else held + moved
                    del trigger[(hit, name)]
                cleanup = hit[1] - 1 + lateness
                if cleanup < MAX_TIME:
                    self.timers.delete_event_time_timer(key, hit, cleanup)
        else:
            actual = op.add_merging_window(key, ks, make_window((start, end)))
        cleanup = actual[1] - 1 + lateness
        # isWindowLate: cleanup time (capped at MAX_TIME) <= watermark
        wm = op.watermark
        if cleanup <= wm or wm == MAX_TIME:
            mws.retire_window(actual)
            op.not_accepted(key, timestamp, values)
            return
        sw = mapping[actual]
        op.add_row(key, ks, sw, timestamp, seq, values)
        n = trigger.get((actual, name), 0) + 1  # CountTrigger.on_element
        if n >= self.count:
            trigger.pop((actual, name), None)
            acc = ks.contents.get(sw)
            if acc is None:
                return  # FIRE on empty contents: nothing, not even the cleanup timer
            op.emit(key, ks, actual, sw, acc, op.timing_now(actual))
            if self.purging:
                op.purge(key, ks, sw)
        else:
            trigger[(actual, name)] = n
        if cleanup < MAX_TIME:
            self.timers.register_event_time_timer(key, actual, cleanup)
