"""Slicing for HOP and CUMULATE: one accumulator per (key, slice), merged when a window fires.

The per-window path adds every row to every window that contains it (60
accumulator updates per row for a HOP of size 60 × slide). Flink SQL's
slicing window operator instead keeps one accumulator per *slice* -- the
time unit every window of the query is made of: ``gcd(size, slide)`` for
HOP, the step for CUMULATE -- and merges a window's slices when it fires.
:class:`Slicer` does that for :class:`~wql.runtime.window_operator.WindowOperator`
while keeping every observable of the per-window path:

- **the same timers, panes and window bookkeeping.** A window that has
  received a row is still an entry of the key's ``contents`` (holding the
  marker :data:`OPEN` instead of an accumulator), and its timers are
  registered by the same calls in the same order as the per-window path
  makes them, so firings, their order, pane indexes and timings, late rows
  and counters cannot differ. Only the accumulator moved into the slice.
- **exact results.** A window's accumulator is rebuilt from its slices with
  ``Aggregator.merge``. That equals adding the window's rows one by one
  only where the aggregate does not depend on the order of the additions:
  counts, COUNT(DISTINCT), FIRST_VALUE / LAST_VALUE / COLLECT_LIST (their
  accumulators carry (time, arrival) and are ordered by them), and SUM /
  AVG / MIN / MAX over integers (and MIN / MAX over strings). Floating
  SUM/AVG round differently when added in another order, and MIN/MAX over
  floats keep the first of ``0.0`` / ``-0.0`` and are NaN-order dependent;
  DECIMAL additions round at the context precision. **Exactness policy:**
  WQL does not trade exactness for speed. A value of any other type for a
  SUM/AVG/MIN/MAX argument switches slicing off for the operator before the
  row is processed: every sliced window is rebuilt (exact, since every value
  so far was) and the per-window path continues, so native = operator and
  the operator = Flink's per-window results hold exactly, not within a
  tolerance.
- **snapshots** carry the rebuilt per-window accumulators, i.e. the
  per-window path's state; a restored key continues on the per-window path
  (keys are sliced only when they start without state).

Where it applies (decided once per operator, see :func:`can_slice`): an
event-time HOP or CUMULATE with the default trigger, no evictor. The
vectorized batch path does not run while slicing is on (it works on
per-window accumulators); batches go through the per-row loop. The slicer
is a per-row path of the operator (``wql.runtime.fastpath``): it works
through the operator's fast-path interface, on top of the per-window
:class:`~wql.runtime.fastpath.WindowPath`, which takes over for keys
restored from a snapshot and for the whole operator once slicing is off.
"""

from __future__ import annotations

from math import gcd
from typing import TYPE_CHECKING, Any

from wql.runtime.aggregates import exact_merge_types
from wql.runtime.assigners import DROP_MISSING_TIMESTAMP, CumulateWindows, SlidingWindows
from wql.runtime.config import ON_TIME, OperatorConfig
from wql.runtime.fastpath import RowPath, WindowPath
from wql.runtime.triggers import EventTimeTrigger
from wql.runtime.windows import MAX_TIME

if TYPE_CHECKING:
    from wql.runtime.state import KeyState
    from wql.runtime.window_operator import Key, WindowOperator

#: ``contents`` value of a window whose accumulator lives in its slices.
OPEN = True
_BEYOND = 2**64


def can_slice(config: OperatorConfig) -> bool:
    """An event-time HOP or CUMULATE with the default trigger and no evictor."""
    assigner = config.assigner
    return (
        type(assigner) in (SlidingWindows, CumulateWindows)
        and assigner.is_event_time
        and type(config.effective_trigger) is EventTimeTrigger
        and config.evictor is None
    )


class Slicer(RowPath):
    """The sliced per-row path and timer handling of one operator (see the module doc)."""

    #: the NumPy path works on per-window accumulators
    vectorizable = False

    def __init__(self, op: WindowOperator, per_window: WindowPath) -> None:
        self.op = op
        #: The per-window path: restored keys, and everything once slicing is off.
        self.per_window = per_window
        assigner: Any = op.config.assigner
        if type(assigner) is SlidingWindows:
            self.unit = gcd(assigner.size, assigner.slide)
            self.slide = assigner.slide
            self.cumulate = False
        else:
            self.unit = assigner.step
            self.slide = assigner.size
            self.cumulate = True
        self.size = assigner.size
        self.offset = assigner.offset
        self.lateness = op.config.allowed_lateness
        #: key -> slice start -> accumulator (only keys on the sliced path).
        self.slices: dict[Key, dict[int, list]] = {}
        agg = op.aggregator
        self._create = agg.create
        self._add = agg.add
        self._merge = agg.merge_all
        self._collect_slots = [
            s for spec, s in zip(agg.specs, agg.slots, strict=True) if spec.kind == "COLLECT_LIST"
        ]
        # (argument, the value types its kind merges exactly) where not every type does
        self._checks: tuple[tuple[int, frozenset[type]], ...] = tuple(
            (spec.arg or 0, types)
            for spec in agg.specs
            if (types := exact_merge_types(spec.kind)) is not None
        )
        self._slot: int | None = None
        self._windows: Any = ()
        self._max_end = 0
        self._min_end = 0
        #: key -> slot of its last row that every window of the slot accepted.
        self._last: dict[Key, int] = {}

    # ------------------------------------------------------------------ rows

    def process_element(self, key: Key, timestamp: int | None, values: tuple) -> None:
        """``WindowOperator.process_element`` for a HOP/CUMULATE key on the sliced path."""
        op = self.op
        for arg, exact in self._checks:
            v = values[arg]
            if v is not None and type(v) not in exact:
                self.deactivate()
                return self.per_window.process_element(key, timestamp, values)
        ks = op.key_states.get(key)
        slices = self.slices.get(key)
        if ks is not None and slices is None:
            # a key restored from a snapshot holds per-window accumulators
            return self.per_window.process_element(key, timestamp, values)
        seq = op.admit()
        if timestamp is None:
            op.drop(DROP_MISSING_TIMESTAMP)
            return None
        if ks is None:
            ks = op.new_key_state(key)
            slices = self.slices[key] = {}
            self._last.pop(key, None)
        assert slices is not None
        t = timestamp
        unit = self.unit
        slot = t - (t - self.offset) % unit
        if slot != self._slot:
            self._windows = self.per_window.assign(t, values)
            self._slot = slot
            ends = [w[1] for w in self._windows]
            self._max_end = max(ends, default=0)
            self._min_end = min(ends, default=0)
        windows = self._windows
        wm = op.watermark
        lateness = self.lateness
        late_bound = wm if wm < MAX_TIME else _BEYOND
        if not windows or self._max_end - 1 + lateness <= late_bound:
            # no window takes the row (the latest-ending one is late)
            op.not_accepted(key, timestamp, values)
            if op.key_states.get(key) is None:
                self.slices.pop(key, None)
                self._last.pop(key, None)
            return
        acc = slices.get(slot)
        if acc is None:
            acc = slices[slot] = self._create()
        self._add(acc, timestamp, seq, values)
        if self._last.get(key) == slot and self._min_end - 1 > wm:
            # every window of this slot already holds a row (so its timers are
            # registered) and none of them has fired: the row only adds.
            return
        # The per-window loop of WindowOperator.process_element with the
        # accumulator work removed (done once above): same markers, timers
        # and firings, in the same order.
        contents = ks.contents
        timers = op.timer_service
        all_taken = True
        for w in windows:
            max_ts = w[1] - 1
            if max_ts + lateness <= late_bound:
                all_taken = False
                continue
            new = w not in contents
            if new:
                contents[w] = OPEN
            if max_ts > wm:
                if new:
                    timers.register_event_time_timer(key, w, max_ts)
                    if lateness and max_ts + lateness < MAX_TIME:
                        timers.register_event_time_timer(key, w, max_ts + lateness)
                continue
            all_taken = False
            op.emit(key, ks, w, w, self.window_acc(slices, w), op.timing_now(w))
            op.register_cleanup_timer(key, w)
        if all_taken:
            self._last[key] = slot
        else:
            self._last.pop(key, None)
        return None

    # ---------------------------------------------------------------- timers

    def on_timer(self, key: Key, window: Any, time: int, event: bool) -> None:
        """``WindowPath.on_timer`` (the inlined event-time trigger) for a sliced key."""
        op = self.op
        slices = self.slices.get(key)
        ks = op.key_states.get(key)
        if slices is None or ks is None or not event:
            return self.per_window.on_timer(key, window, time, event)
        max_ts = window[1] - 1
        contents = ks.contents
        cleanup = max_ts + self.lateness
        cleanup = cleanup if cleanup < MAX_TIME else MAX_TIME
        if time == max_ts and window in contents:
            acc = self.window_acc(slices, window)
            op.emit(key, ks, window, window, acc, ON_TIME, time == cleanup)
        if time == cleanup:
            if contents.pop(window, None) is not None:
                self._free(slices, window)
            ks.panes.pop(window, None)
        op.release_key(key)
        if op.key_states.get(key) is None:
            del self.slices[key]
            self._last.pop(key, None)

    def _free(self, slices: dict[int, list], window: Any) -> None:
        """Drop the slices whose latest-ending window is ``window`` (cleaned up now)."""
        start, end = window[0], window[1]
        if self.cumulate:
            if end - start != self.size:
                return  # only the period's full window is the last to need its slices
            stop = end
        else:
            stop = start + self.slide
        for s in range(start, stop, self.unit):
            slices.pop(s, None)

    # ----------------------------------------------------------------- state

    def window_acc(self, slices: dict[int, list], window: Any) -> list:
        """The window's accumulator, rebuilt from its slices (equal to the per-window one)."""
        acc = self._create()
        get = slices.get
        parts = [p for p in map(get, range(window[0], window[1], self.unit)) if p is not None]
        self._merge(acc, parts)
        for slot in self._collect_slots:
            # the per-window accumulator lists rows in arrival order
            acc[slot].sort(key=_arrival)
        return acc

    def key_data(self, key: Key, ks: KeyState) -> tuple:
        """``ks.to_data()`` with the per-window accumulators (the per-window path's state)."""
        data = ks.to_data()
        slices = self.slices.get(key)
        if slices is None:
            return data
        contents = {w: self.window_acc(slices, w) for w in data[0]}
        return (contents, *data[1:])

    def forget(self, key: Key) -> None:
        self.slices.pop(key, None)
        self._last.pop(key, None)

    def deactivate(self) -> None:
        """Rebuild every sliced window's accumulator and leave the per-window path on."""
        op = self.op
        for key, slices in self.slices.items():
            ks = op.key_states.get(key)
            if ks is None:
                continue
            contents = ks.contents
            for w in list(contents):
                contents[w] = self.window_acc(slices, w)
        self.slices.clear()
        self._last.clear()
        op.use_path(self.per_window)


def _arrival(entry: tuple) -> int:
    return entry[1]
