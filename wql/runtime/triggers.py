"""Triggers: when a window fires and/or purges (Flink's ``Trigger``).

A trigger is configuration only (a frozen dataclass). Everything it
remembers per window — counts, next fire times, the last fired value, which
children have fired — goes through the :class:`TriggerContext` the operator
passes in, which stores it under the (key, window) being processed and
persists it with the rest of the operator state. Composite triggers give each
child its own context (``ctx.child(i)``) so the children's state names
never collide; timers are not namespaced (a timer is unique per
(key, window, time), exactly as in Flink).

When the operator calls each method:

- ``on_element(timestamp, values, window, ctx)``: after the row was added to
  ``window``'s contents. ``timestamp`` is the row's event time (``None`` when
  the query has none).
- ``on_event_time(time, window, ctx)`` / ``on_processing_time(time, window, ctx)``:
  when a timer registered for (key, window, time) fires.
- ``on_merge(window, ctx)``: ``window`` is the result of a session merge and
  ``ctx.merged_windows`` the windows it absorbed; it may merge their state
  into ``window`` (``ctx.merge_state``) and re-register timers. Only called
  when ``can_merge()`` is true (the operator refuses a merging assigner with a
  trigger that cannot merge).
- ``clear(window, ctx)``: the window is going away (cleanup time reached, or
  it was absorbed by a merge): remove every state entry and timer it made.

The three ``on_*`` methods return a :class:`TriggerResult`.

Finishing (Beam's trigger state machines, ``runners/core-java/.../triggers``):
a Flink trigger fires again and again; a Beam trigger may *finish*, and a
window whose root trigger finished is closed for good (Beam's
``TriggerStateMachineRunner`` keeps its "finished bits" until the window is
garbage collected, and ``ReduceFnRunner`` drops and counts every later row of
it as ``droppedDueToClosedWindow``). Here a trigger finishes by returning a
result with the ``FINISH`` bit (always together with ``FIRE``: a Beam
trigger finishes only in ``onFire``). :class:`OnceTrigger`,
:class:`UntilTrigger` and :class:`SequenceTrigger` are the triggers that
finish; ``PURGING`` and ``EMIT ... DISCARDING`` pass the bit on; the
operator closes the window when the bit reaches the root
(``WindowOperator``, docs/runtime.md "Triggers that finish").

>>> TriggerResult.FIRE_AND_PURGE.is_fire, TriggerResult.FIRE_AND_PURGE.is_purge
(True, True)
>>> TriggerResult.FIRE_AND_FINISH.is_finish, TriggerResult.FIRE_AND_FINISH.is_purge
(True, False)
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from enum import IntEnum
from typing import Any, Protocol

from wql.runtime.windows import MAX_TIME, Window, pane_timing


class TriggerResult(IntEnum):
    """Bit 1 = fire, bit 2 = purge, bit 4 = finish (so results combine with ``|``).

    ``FINISH`` comes only with ``FIRE`` (the trigger fired for the last
    time); the members without ``FIRE`` exist so that any combination is a
    member.
    """

    CONTINUE = 0
    FIRE = 1
    PURGE = 2
    FIRE_AND_PURGE = 3
    FINISH = 4
    FIRE_AND_FINISH = 5
    PURGE_AND_FINISH = 6
    FIRE_PURGE_AND_FINISH = 7

    @property
    def is_fire(self) -> bool:
        return bool(self & 1)

    @property
    def is_purge(self) -> bool:
        return bool(self & 2)

    @property
    def is_finish(self) -> bool:
        return bool(self & 4)


CONTINUE = TriggerResult.CONTINUE
FIRE = TriggerResult.FIRE
PURGE = TriggerResult.PURGE
FIRE_AND_PURGE = TriggerResult.FIRE_AND_PURGE
FIRE_AND_FINISH = TriggerResult.FIRE_AND_FINISH


class TriggerContext(Protocol):
    """What a trigger may see and change; bound to one (key, window) at a time."""

    @property
    def watermark(self) -> int: ...

    @property
    def processing_time(self) -> int: ...

    @property
    def merged_windows(self) -> Sequence[Window]:
        """During ``on_merge`` only: the windows merged into the current one."""
        ...

    def register_event_time_timer(self, time: int) -> None: ...

    def delete_event_time_timer(self, time: int) -> None: ...

    def register_processing_time_timer(self, time: int) -> None: ...

    def delete_processing_time_timer(self, time: int) -> None: ...

    def get_state(self, name: str) -> Any:
        """The value stored under ``name`` for the current window, or ``None``."""
        ...

    def set_state(self, name: str, value: Any) -> None: ...

    def clear_state(self, name: str) -> None: ...

    def merge_state(self, name: str, reduce: Callable[[Any, Any], Any]) -> None:
        """During ``on_merge``: fold ``name`` of every merged window into the current one."""
        ...

    def child(self, index: int) -> TriggerContext:
        """A context whose state names are private to child ``index``."""
        ...


class Trigger:
    """Base of all triggers (configuration objects; no per-window state here)."""

    def on_element(
        self, timestamp: int | None, values: tuple, window: Window, ctx: TriggerContext
    ) -> TriggerResult:
        raise NotImplementedError

    def on_event_time(self, time: int, window: Window, ctx: TriggerContext) -> TriggerResult:
        return CONTINUE

    def on_processing_time(self, time: int, window: Window, ctx: TriggerContext) -> TriggerResult:
        return CONTINUE

    def can_merge(self) -> bool:
        return False

    def on_merge(self, window: Window, ctx: TriggerContext) -> None:
        raise TypeError(f"{type(self).__name__} cannot merge windows")

    def clear(self, window: Window, ctx: TriggerContext) -> None:
        """Remove every state entry and timer this trigger made for ``window``."""

    def state_names(self) -> tuple[str, ...]:
        """The state names this trigger itself uses (children excluded); for reports."""
        return ()

    def can_finish(self) -> bool:
        """Whether a result of this trigger can carry ``FINISH`` (it fires for the last time)."""
        return False


def _java_remainder(a: int, b: int) -> int:
    """Java's ``a % b`` (sign of the dividend); Flink's continuous triggers use it."""
    r = abs(a) % abs(b)
    return -r if a < 0 else r


@dataclass(frozen=True)
class NeverTrigger(Trigger):
    """``GlobalWindows``' default trigger: never fires."""

    def on_element(self, timestamp, values, window, ctx):
        return CONTINUE

    def can_merge(self) -> bool:
        return True

    def on_merge(self, window, ctx) -> None:
        return None


@dataclass(frozen=True)
class EventTimeTrigger(Trigger):
    """WATERMARK: fire when the watermark reaches the window's max timestamp."""

    def on_element(self, timestamp, values, window, ctx):
        max_ts = window.max_timestamp
        if max_ts <= ctx.watermark:
            # Late but within allowed lateness: fire at once on every such row.
            return FIRE
        ctx.register_event_time_timer(max_ts)
        return CONTINUE

    def on_event_time(self, time, window, ctx):
        return FIRE if time == window.max_timestamp else CONTINUE

    def can_merge(self) -> bool:
        return True

    def on_merge(self, window, ctx) -> None:
        # FLINK-9201: a merged window already behind the watermark must not get
        # a timer that would make it fire a second time.
        max_ts = window.max_timestamp
        if max_ts > ctx.watermark:
            ctx.register_event_time_timer(max_ts)

    def clear(self, window, ctx) -> None:
        ctx.delete_event_time_timer(window.max_timestamp)


@dataclass(frozen=True)
class ProcessingTimeTrigger(Trigger):
    """PROCESSING TIME: fire when processing time reaches the window's max timestamp."""

    def on_element(self, timestamp, values, window, ctx):
        ctx.register_processing_time_timer(window.max_timestamp)
        return CONTINUE

    def on_processing_time(self, time, window, ctx):
        return FIRE

    def can_merge(self) -> bool:
        return True

    def on_merge(self, window, ctx) -> None:
        max_ts = window.max_timestamp
        if max_ts > ctx.processing_time:
            ctx.register_processing_time_timer(max_ts)

    def clear(self, window, ctx) -> None:
        ctx.delete_processing_time_timer(window.max_timestamp)


def _add(a: int, b: int) -> int:
    return a + b


@dataclass(frozen=True)
class CountTrigger(Trigger):
    """COUNT(n): FIRE (without purge) every ``n`` rows; counts add up on merge."""

    count: int

    def __post_init__(self) -> None:
        if self.count <= 0:
            raise ValueError("COUNT trigger needs a positive count")

    def on_element(self, timestamp, values, window, ctx):
        n = (ctx.get_state("count") or 0) + 1
        if n >= self.count:
            ctx.clear_state("count")
            return FIRE
        ctx.set_state("count", n)
        return CONTINUE

    def can_merge(self) -> bool:
        return True

    def on_merge(self, window, ctx) -> None:
        ctx.merge_state("count", _add)

    def clear(self, window, ctx) -> None:
        ctx.clear_state("count")

    def state_names(self) -> tuple[str, ...]:
        return ("count",)


class _FireTimer(Trigger):
    """A trigger whose one state entry ``fire`` is its armed timer, in one clock.

    Merging keeps the earliest armed timer of the merged windows (rows were
    pending in one of them) and re-registers it; clearing deletes it.
    """

    def _event_clock(self) -> bool:
        """Whether ``fire`` is an event-time timer (else a processing-time one)."""
        raise NotImplementedError

    def _register_timer(self, time: int, ctx: TriggerContext) -> None:
        if self._event_clock():
            ctx.register_event_time_timer(time)
        else:
            ctx.register_processing_time_timer(time)

    def can_merge(self) -> bool:
        return True

    def on_merge(self, window, ctx) -> None:
        ctx.merge_state("fire", min)
        fire = ctx.get_state("fire")
        if fire is not None:
            self._register_timer(fire, ctx)

    def clear(self, window, ctx) -> None:
        fire = ctx.get_state("fire")
        if fire is not None:
            if self._event_clock():
                ctx.delete_event_time_timer(fire)
            else:
                ctx.delete_processing_time_timer(fire)
            ctx.clear_state("fire")

    def state_names(self) -> tuple[str, ...]:
        return ("fire",)


@dataclass(frozen=True)
class ContinuousEventTimeTrigger(_FireTimer):
    """EVERY <interval> OF EVENT TIME (Flink's ``ContinuousEventTimeTrigger``).

    Fires at epoch-aligned boundaries ``ts - ts % interval + interval`` (Java
    remainder), re-arming at ``time + interval`` capped at the window's max
    timestamp, and at the max timestamp itself. State ``fire``: the next fire
    time, merged by ``min``.
    """

    interval: int

    def __post_init__(self) -> None:
        if self.interval <= 0:
            raise ValueError("EVERY needs a positive interval")

    def on_element(self, timestamp, values, window, ctx):
        max_ts = window.max_timestamp
        if max_ts <= ctx.watermark:
            return FIRE
        ctx.register_event_time_timer(max_ts)
        if ctx.get_state("fire") is None and timestamp is not None:
            self._register_next(timestamp - _java_remainder(timestamp, self.interval), window, ctx)
        return CONTINUE

    def on_event_time(self, time, window, ctx):
        if time == window.max_timestamp:
            return FIRE
        fire = ctx.get_state("fire")
        if fire is not None and fire == time:
            ctx.clear_state("fire")
            if ctx.watermark == MAX_TIME and window.max_timestamp == MAX_TIME:
                # End of input on a window without an end (GLOBAL, count windows):
                # one boundary per interval up to the end of time never finishes
                # (nor does Flink). The max-timestamp timer gives the one last
                # firing (docs/runtime.md, "Decisions").
                return CONTINUE
            self._register_next(time, window, ctx)
            return FIRE
        return CONTINUE

    def _register_next(self, time: int, window: Window, ctx: TriggerContext) -> None:
        fire = min(time + self.interval, window.max_timestamp)
        ctx.set_state("fire", fire)
        ctx.register_event_time_timer(fire)

    def _event_clock(self) -> bool:
        return True

    def clear(self, window, ctx) -> None:
        super().clear(window, ctx)
        # Flink leaves the max-timestamp timer behind (it later fires into a
        # window with no contents and emits nothing); removing it changes no
        # result and keeps "clear removes every timer" true.
        ctx.delete_event_time_timer(window.max_timestamp)


@dataclass(frozen=True)
class ContinuousProcessingTimeTrigger(_FireTimer):
    """EVERY <interval> OF PROCESSING TIME (Flink's ``ContinuousProcessingTimeTrigger``).

    The first row of a window arms ``now - now % interval + interval``; each
    firing re-arms ``time + interval``; both capped at the window's max
    timestamp (compared with processing time, as Flink does).
    """

    interval: int

    def __post_init__(self) -> None:
        if self.interval <= 0:
            raise ValueError("EVERY needs a positive interval")

    def on_element(self, timestamp, values, window, ctx):
        if ctx.get_state("fire") is None:
            now = ctx.processing_time
            self._register_next(now - _java_remainder(now, self.interval), window, ctx)
        return CONTINUE

    def on_processing_time(self, time, window, ctx):
        fire = ctx.get_state("fire")
        if fire is not None and fire == time:
            ctx.clear_state("fire")
            if min(time + self.interval, window.max_timestamp) > time:
                self._register_next(time, window, ctx)
            # else: the cap put the next firing at (or before) this one. Flink
            # re-registers it and, on an event-time window whose max timestamp
            # is behind processing time, fires again and again; WQL stops the
            # schedule here and the window's next row arms a new one.
            return FIRE
        return CONTINUE

    def _register_next(self, time: int, window: Window, ctx: TriggerContext) -> None:
        fire = min(time + self.interval, window.max_timestamp)
        ctx.set_state("fire", fire)
        ctx.register_processing_time_timer(fire)

    def _event_clock(self) -> bool:
        return False


@dataclass(frozen=True)
class OnUpdateTrigger(_FireTimer):
    """EVERY <interval> [OF ... TIME] ON UPDATE: fire at the next interval boundary after
    rows arrived, only when rows arrived in the window since its last firing.

    Beam's ``AfterProcessingTime.pastFirstElementInPane()`` (a timer armed by
    the first row of a pane) on interval boundaries, in either clock; Flink
    table-runtime's ``ProcessingTimeTriggers.AfterFirstElementPeriodic`` arms
    the same way but re-arms after every firing, rows or not. State ``fire``:
    the armed timer, None while no row arrived since the last firing. The
    first such row arms the first boundary strictly after ``now`` (epoch
    aligned, floor: ``now - now mod interval + interval``), where ``now`` is
    the processing time, or in event time the row's timestamp or the
    watermark, whichever is later. The timer fires the window and disarms;
    nothing re-arms it but the next row, so a quiet window has no timer.

    ``bounded`` (the window runs on this trigger's clock): a timer never
    passes the window's end, so the rows of a window that has not ended fire
    at its ``window_time`` at the latest (an ON_TIME pane); once the
    watermark has passed the end, rows within the allowed ``lateness`` fire
    at the next boundary, at the cleanup time at the latest (a LATE pane,
    the window's last). A window without an end (GLOBAL) or on the other
    clock is not bounded. On merge the earliest armed timer of the merged
    windows is the merged window's (rows were pending in one of them).
    """

    interval: int
    event_time: bool
    bounded: bool = False
    lateness: int = 0
    #: False: ``AFTER <interval>`` (Beam's ``pastFirstElementInPane().plusDelayOf``): the
    #: first row arms ``now + interval`` instead of the next boundary.
    aligned: bool = True

    def __post_init__(self) -> None:
        if self.interval <= 0:
            raise ValueError("EVERY needs a positive interval")

    def on_element(self, timestamp, values, window, ctx):
        if ctx.get_state("fire") is not None:
            return CONTINUE  # armed: this row fires with the pending ones
        if self.event_time:
            now = ctx.watermark
            if timestamp is not None and timestamp > now:
                now = timestamp
        else:
            now = ctx.processing_time
        if self.aligned:
            fire = now - now % self.interval + self.interval
        else:
            fire = now + self.interval if now <= MAX_TIME - self.interval else MAX_TIME
        if self.bounded:
            max_ts = window.max_timestamp
            end = (
                max_ts if not self.event_time or max_ts > ctx.watermark else max_ts + self.lateness
            )
            fire = min(fire, end)
        fire = min(fire, MAX_TIME)
        ctx.set_state("fire", fire)
        self._register_timer(fire, ctx)
        return CONTINUE

    def _on_timer(self, time: int, ctx: TriggerContext) -> TriggerResult:
        if ctx.get_state("fire") == time:
            ctx.clear_state("fire")
            return FIRE
        return CONTINUE

    def on_event_time(self, time, window, ctx):
        return self._on_timer(time, ctx) if self.event_time else CONTINUE

    def on_processing_time(self, time, window, ctx):
        return CONTINUE if self.event_time else self._on_timer(time, ctx)

    def _event_clock(self) -> bool:
        return self.event_time


@dataclass(frozen=True)
class DeltaTrigger(Trigger):
    """DELTA(expr, threshold): FIRE when |v - v_last_fired| > threshold.

    ``value_index`` names the pre-evaluated ``expr`` in the row's values. The
    first non-null value of a window is stored without firing (Flink). A null
    value neither fires nor replaces the stored one. Cannot merge.
    """

    value_index: int
    threshold: float

    def on_element(self, timestamp, values, window, ctx):
        value = values[self.value_index]
        if value is None:
            return CONTINUE
        last = ctx.get_state("last")
        if last is None:
            ctx.set_state("last", value)
            return CONTINUE
        if abs(value - last) > self.threshold:
            ctx.set_state("last", value)
            return FIRE
        return CONTINUE

    def clear(self, window, ctx) -> None:
        ctx.clear_state("last")

    def state_names(self) -> tuple[str, ...]:
        return ("last",)


class _Wrapping(Trigger):
    """A trigger that changes what ``nested`` returns: it merges and clears as ``nested``."""

    nested: Trigger

    def can_merge(self) -> bool:
        return self.nested.can_merge()

    def on_merge(self, window, ctx) -> None:
        self.nested.on_merge(window, ctx.child(0))

    def clear(self, window, ctx) -> None:
        self.nested.clear(window, ctx.child(0))

    def can_finish(self) -> bool:
        return self.nested.can_finish()


@dataclass(frozen=True)
class PurgingTrigger(_Wrapping):
    """PURGING <t>: every FIRE of ``nested`` becomes FIRE_AND_PURGE."""

    nested: Trigger

    def on_element(self, timestamp, values, window, ctx):
        r = self.nested.on_element(timestamp, values, window, ctx.child(0))
        return TriggerResult(r | 2) if r & 1 else r

    def on_event_time(self, time, window, ctx):
        r = self.nested.on_event_time(time, window, ctx.child(0))
        return TriggerResult(r | 2) if r & 1 else r

    def on_processing_time(self, time, window, ctx):
        r = self.nested.on_processing_time(time, window, ctx.child(0))
        return TriggerResult(r | 2) if r & 1 else r


@dataclass(frozen=True)
class PanePurgingTrigger(_Wrapping):
    """EMIT ... DISCARDING for some pane timings: PurgingTrigger, but only for those panes.

    Every FIRE of ``nested`` becomes FIRE_AND_PURGE when the pane it fires
    has a timing in ``discard`` (``EARLY``, ``ON_TIME``, ``LATE``): the
    pane's contents are discarded after it (Beam's DISCARDING_FIRED_PANES),
    the others keep them (ACCUMULATING_FIRED_PANES). The timing is the one
    the operator gives the pane (``windows.pane_timing``): a timer of the
    window's own clock (``event_time``: the window is an event-time window)
    by its time, any other firing by the watermark. With all three timings
    this is exactly ``PurgingTrigger(nested)``.
    """

    nested: Trigger
    discard: frozenset[str]
    event_time: bool

    def _discarding(
        self, r: TriggerResult, window: Window, ctx: TriggerContext, own: int | None
    ) -> TriggerResult:
        """``r``, purging when it fires a pane of a discarding timing (``own``: the
        time of the window's own-clock timer that fired it, see ``pane_timing``)."""
        if r & 1 and pane_timing(window, ctx.watermark, own) in self.discard:
            return TriggerResult(r | 2)  # a FINISH stays
        return r

    def on_element(self, timestamp, values, window, ctx):
        r = self.nested.on_element(timestamp, values, window, ctx.child(0))
        return self._discarding(r, window, ctx, None)

    def on_event_time(self, time, window, ctx):
        r = self.nested.on_event_time(time, window, ctx.child(0))
        return self._discarding(r, window, ctx, time if self.event_time else None)

    def on_processing_time(self, time, window, ctx):
        r = self.nested.on_processing_time(time, window, ctx.child(0))
        return self._discarding(r, window, ctx, None if self.event_time else time)


@dataclass(frozen=True)
class ProcessingTimeoutTrigger(Trigger):
    """TIMEOUT(t, interval): Flink's ``ProcessingTimeoutTrigger.of(t, interval)``.

    ``resetTimerOnNewRecord = false``, ``shouldClearOnTimeout = true``. The
    first row arms a processing-time timer at now + interval. When the nested
    trigger fires on a row, the timeout is cleared (nested state too). On ANY
    timer of the window (event or processing time) it FIREs (FIRE_AND_PURGE
    when the nested result purges) and clears itself and the nested trigger —
    exactly as Flink does, even when the timer was not its own. Cannot merge.
    """

    nested: Trigger
    timeout: int

    def __post_init__(self) -> None:
        if self.timeout <= 0:
            raise ValueError("TIMEOUT needs a positive interval")

    def on_element(self, timestamp, values, window, ctx):
        r = self.nested.on_element(timestamp, values, window, ctx.child(0))
        if r & 1:
            self.clear(window, ctx)
            return r
        if ctx.get_state("timeout") is None:
            t = ctx.processing_time + self.timeout
            ctx.set_state("timeout", t)
            ctx.register_processing_time_timer(t)
        return r

    def on_event_time(self, time, window, ctx):
        r = self.nested.on_event_time(time, window, ctx.child(0))
        self.clear(window, ctx)
        return FIRE_AND_PURGE if r & 2 else FIRE

    def on_processing_time(self, time, window, ctx):
        r = self.nested.on_processing_time(time, window, ctx.child(0))
        self.clear(window, ctx)
        return FIRE_AND_PURGE if r & 2 else FIRE

    def clear(self, window, ctx) -> None:
        t = ctx.get_state("timeout")
        if t is not None:
            ctx.delete_processing_time_timer(t)
            ctx.clear_state("timeout")
        self.nested.clear(window, ctx.child(0))

    def state_names(self) -> tuple[str, ...]:
        return ("timeout",)


@dataclass(frozen=True)
class AnyTrigger(Trigger):
    """ANY(t1, t2, …): every child sees every event (so their state stays right).

    The result is the bitwise OR of the children's results: FIRE when any
    child fires, PURGE when any child purges. Mergeable when all children are.
    """

    children: tuple[Trigger, ...]

    def __post_init__(self) -> None:
        if not self.children:
            raise ValueError("ANY needs at least one trigger")

    def on_element(self, timestamp, values, window, ctx):
        r = 0
        for i, t in enumerate(self.children):
            r |= t.on_element(timestamp, values, window, ctx.child(i))
        return TriggerResult(r)

    def on_event_time(self, time, window, ctx):
        r = 0
        for i, t in enumerate(self.children):
            r |= t.on_event_time(time, window, ctx.child(i))
        return TriggerResult(r)

    def on_processing_time(self, time, window, ctx):
        r = 0
        for i, t in enumerate(self.children):
            r |= t.on_processing_time(time, window, ctx.child(i))
        return TriggerResult(r)

    def can_merge(self) -> bool:
        return all(t.can_merge() for t in self.children)

    def on_merge(self, window, ctx) -> None:
        for i, t in enumerate(self.children):
            t.on_merge(window, ctx.child(i))

    def clear(self, window, ctx) -> None:
        for i, t in enumerate(self.children):
            t.clear(window, ctx.child(i))


def _bit_or(a: int, b: int) -> int:
    return a | b


@dataclass(frozen=True)
class AllTrigger(Trigger):
    """ALL(t1, t2, …): FIRE once every child has fired since ALL last fired.

    State ``fired``: bit ``i`` set when child ``i`` fired, bit ``n`` (n = number
    of children) set when one of those firings also purged. When all child
    bits are set, the state is reset and ALL returns FIRE, or FIRE_AND_PURGE
    if the purge bit is set. A child's PURGE without FIRE is ignored (no WQL
    trigger produces one). On merge the masks are OR-ed (a child that fired
    in any merged window has fired for the merged one).
    """

    children: tuple[Trigger, ...]

    def __post_init__(self) -> None:
        if not self.children:
            raise ValueError("ALL needs at least one trigger")

    def _record(self, results: list[int], ctx: TriggerContext) -> TriggerResult:
        mask = ctx.get_state("fired") or 0
        n = len(self.children)
        for i, r in enumerate(results):
            if r & 1:
                mask |= 1 << i
                if r & 2:
                    mask |= 1 << n
        full = (1 << n) - 1
        if mask & full == full:
            ctx.clear_state("fired")
            return FIRE_AND_PURGE if mask >> n else FIRE
        if mask:
            ctx.set_state("fired", mask)
        return CONTINUE

    def on_element(self, timestamp, values, window, ctx):
        return self._record(
            [
                t.on_element(timestamp, values, window, ctx.child(i))
                for i, t in enumerate(self.children)
            ],
            ctx,
        )

    def on_event_time(self, time, window, ctx):
        return self._record(
            [t.on_event_time(time, window, ctx.child(i)) for i, t in enumerate(self.children)], ctx
        )

    def on_processing_time(self, time, window, ctx):
        return self._record(
            [t.on_processing_time(time, window, ctx.child(i)) for i, t in enumerate(self.children)],
            ctx,
        )

    def can_merge(self) -> bool:
        return all(t.can_merge() for t in self.children)

    def on_merge(self, window, ctx) -> None:
        for i, t in enumerate(self.children):
            t.on_merge(window, ctx.child(i))
        ctx.merge_state("fired", _bit_or)

    def clear(self, window, ctx) -> None:
        for i, t in enumerate(self.children):
            t.clear(window, ctx.child(i))
        ctx.clear_state("fired")

    def state_names(self) -> tuple[str, ...]:
        return ("fired",)


@dataclass(frozen=True)
class EveryElementTrigger(Trigger):
    """Fires on every row (Flink SQL ``ElementTriggers.every()``); the default LATE trigger."""

    def on_element(self, timestamp, values, window, ctx):
        return FIRE

    def can_merge(self) -> bool:
        return True

    def on_merge(self, window, ctx) -> None:
        return None


@dataclass(frozen=True)
class EarlyLateTrigger(Trigger):
    """WATERMARK WITH EARLY <e> [LATE <l>]: Flink table-runtime's ``EventTimeTriggers``.

    Without a LATE trigger this is ``AfterEndOfWindowNoLate(e)``: a row for a
    window the watermark has passed fires (every late row within the allowed
    lateness fires); otherwise the row registers the on-time timer at the
    window's max timestamp and ``e`` decides. That timer fires ON_TIME; every
    other timer goes to ``e`` (also after the on-time firing).

    With a LATE trigger it is ``AfterEndOfWindowEarlyAndLate(e, l)``: the
    state ``on_time_fired`` is set by the on-time timer; after it rows and
    timers go to ``l``. Before it, a row for a window the watermark has passed
    fires (so a window first seen late fires on every row, whatever ``l``
    says, exactly as Flink), else it registers the on-time timer and ``e``
    decides.

    On merge both children merge and the on-time timer is registered at the
    merged window's max timestamp even when the watermark has passed it
    (Flink does not carry the FLINK-9201 fix into these triggers; with
    EARLY/LATE, ``on_time_fired`` is reset too), so a late merge can give a
    LATE firing for the row and then an ON_TIME firing on the next watermark
    rise, as in Flink.
    """

    early: Trigger | None
    late: Trigger | None = None

    def on_element(self, timestamp, values, window, ctx):
        if self.late is not None and ctx.get_state("on_time_fired"):
            return self.late.on_element(timestamp, values, window, ctx.child(1))
        max_ts = window.max_timestamp
        if max_ts <= ctx.watermark:
            return FIRE
        ctx.register_event_time_timer(max_ts)
        if self.early is None:
            return CONTINUE
        return self.early.on_element(timestamp, values, window, ctx.child(0))

    def on_event_time(self, time, window, ctx):
        if self.late is not None and ctx.get_state("on_time_fired"):
            return self.late.on_event_time(time, window, ctx.child(1))
        if time == window.max_timestamp:
            if self.late is not None:
                ctx.set_state("on_time_fired", True)
            return FIRE
        if self.early is None:
            return CONTINUE
        return self.early.on_event_time(time, window, ctx.child(0))

    def on_processing_time(self, time, window, ctx):
        if self.late is not None and ctx.get_state("on_time_fired"):
            return self.late.on_processing_time(time, window, ctx.child(1))
        if self.early is None:
            return CONTINUE
        return self.early.on_processing_time(time, window, ctx.child(0))

    def can_merge(self) -> bool:
        return (self.early is None or self.early.can_merge()) and (
            self.late is None or self.late.can_merge()
        )

    def on_merge(self, window, ctx) -> None:
        if self.early is not None:
            self.early.on_merge(window, ctx.child(0))
        if self.late is not None:
            self.late.on_merge(window, ctx.child(1))
            ctx.clear_state("on_time_fired")
        ctx.register_event_time_timer(window.max_timestamp)

    def clear(self, window, ctx) -> None:
        if self.early is not None:
            self.early.clear(window, ctx.child(0))
        if self.late is not None:
            self.late.clear(window, ctx.child(1))
        ctx.delete_event_time_timer(window.max_timestamp)
        ctx.clear_state("on_time_fired")

    def state_names(self) -> tuple[str, ...]:
        return ("on_time_fired",)


# ------------------------------------------------------------------ triggers that finish


def _finished(r: int) -> TriggerResult:
    """``r`` with ``FINISH`` (the trigger fired for the last time)."""
    return TriggerResult(r | 4)


@dataclass(frozen=True)
class OnceTrigger(_Wrapping):
    """ONCE <t>: the first firing of ``t``, then finished for good.

    Beam's ``OnceTriggerStateMachine`` (``AfterPane.elementCountAtLeast(n)``
    used alone is ``ONCE COUNT(n)``, ``AfterWatermark.pastEndOfWindow()``
    alone is ``ONCE WATERMARK``): WQL's triggers repeat as Beam's
    ``Repeatedly.forever`` does, and ONCE takes the first firing only. On
    that firing ``t``'s state and timers are cleared (Beam's ``onOnlyFiring``
    clears a once trigger's state) and the result carries ``FINISH``.
    Merges as ``t`` does; a merged window is never finished (a finished
    root closes its window, which then merges no more).
    """

    nested: Trigger

    def _once(self, r: TriggerResult, window: Window, ctx: TriggerContext) -> TriggerResult:
        if r & 1:
            self.nested.clear(window, ctx.child(0))
            return _finished(r)
        return r

    def on_element(self, timestamp, values, window, ctx):
        r = self.nested.on_element(timestamp, values, window, ctx.child(0))
        return self._once(r, window, ctx)

    def on_event_time(self, time, window, ctx):
        return self._once(self.nested.on_event_time(time, window, ctx.child(0)), window, ctx)

    def on_processing_time(self, time, window, ctx):
        r = self.nested.on_processing_time(time, window, ctx.child(0))
        return self._once(r, window, ctx)

    def can_finish(self) -> bool:
        return True


@dataclass(frozen=True)
class UntilTrigger(Trigger):
    """UNTIL(t, u): Beam's ``t.orFinally(u)`` (``OrFinallyStateMachine``).

    Both children see every row and timer (Beam runs them in parallel). The
    result fires when either fires; it finishes when ``u`` fires (that
    firing is the last pane: Beam "fires one last time for u") or when ``t``
    finishes. ``u``'s state is kept across ``t``'s firings (Beam: "do not
    clear the until trigger, because it tracks data across firings"), so
    the last pane may hold fewer rows than ``u`` counted when ``t`` purges.
    On finishing both children are cleared. Mergeable when both children are.
    """

    actual: Trigger
    until: Trigger

    def _combine(
        self, ra: TriggerResult, ru: TriggerResult, window: Window, ctx: TriggerContext
    ) -> TriggerResult:
        if ru & 1 or ra & 4:
            self.clear(window, ctx)
            return _finished(ra | ru)
        return TriggerResult(ra | (ru & 2))

    def on_element(self, timestamp, values, window, ctx):
        ra = self.actual.on_element(timestamp, values, window, ctx.child(0))
        ru = self.until.on_element(timestamp, values, window, ctx.child(1))
        return self._combine(ra, ru, window, ctx)

    def on_event_time(self, time, window, ctx):
        ra = self.actual.on_event_time(time, window, ctx.child(0))
        ru = self.until.on_event_time(time, window, ctx.child(1))
        return self._combine(ra, ru, window, ctx)

    def on_processing_time(self, time, window, ctx):
        ra = self.actual.on_processing_time(time, window, ctx.child(0))
        ru = self.until.on_processing_time(time, window, ctx.child(1))
        return self._combine(ra, ru, window, ctx)

    def can_merge(self) -> bool:
        return self.actual.can_merge() and self.until.can_merge()

    def on_merge(self, window, ctx) -> None:
        self.actual.on_merge(window, ctx.child(0))
        self.until.on_merge(window, ctx.child(1))

    def clear(self, window, ctx) -> None:
        self.actual.clear(window, ctx.child(0))
        self.until.clear(window, ctx.child(1))

    def can_finish(self) -> bool:
        return True


@dataclass(frozen=True)
class SequenceTrigger(Trigger):
    """SEQUENCE(t1, t2, ...): Beam's ``AfterEach.inOrder`` (``AfterEachStateMachine``).

    One child runs at a time, the first that has not finished (state
    ``at``, its index): it alone sees rows and timers (Beam's non-merging
    ``onElement`` runs only ``firstUnfinishedSubTrigger``), the sequence
    fires when it fires, and when it finishes it is cleared and the next
    child starts with the next row or timer. The sequence finishes with its
    last child. ``end_timer`` (an event-time window with an end): every row
    also registers the window's end-of-window timer, as Beam's
    ``ReduceFnRunner`` does for every window it holds, so a child that
    starts after the rows it would have armed on still hears the window's
    end (``ONCE WATERMARK`` after ``ONCE COUNT(n)``). Cannot merge: Beam
    runs every child of a merging ``AfterEach`` in parallel and revives
    finished children on merges, which WQL does not implement.
    """

    children: tuple[Trigger, ...]
    end_timer: bool = False

    def __post_init__(self) -> None:
        if len(self.children) < 2:
            raise ValueError("SEQUENCE needs at least two triggers")

    def _step(self, r: TriggerResult, i: int, window: Window, ctx: TriggerContext) -> TriggerResult:
        if not r & 4:
            return r
        self.children[i].clear(window, ctx.child(i))
        if i + 1 == len(self.children):
            ctx.clear_state("at")
            return r
        ctx.set_state("at", i + 1)
        return TriggerResult(r & 3)

    def on_element(self, timestamp, values, window, ctx):
        if self.end_timer and window.max_timestamp > ctx.watermark:
            ctx.register_event_time_timer(window.max_timestamp)
        i = ctx.get_state("at") or 0
        r = self.children[i].on_element(timestamp, values, window, ctx.child(i))
        return self._step(r, i, window, ctx)

    def on_event_time(self, time, window, ctx):
        i = ctx.get_state("at") or 0
        r = self.children[i].on_event_time(time, window, ctx.child(i))
        return self._step(r, i, window, ctx)

    def on_processing_time(self, time, window, ctx):
        i = ctx.get_state("at") or 0
        r = self.children[i].on_processing_time(time, window, ctx.child(i))
        return self._step(r, i, window, ctx)

    def clear(self, window, ctx) -> None:
        i = ctx.get_state("at") or 0
        for j in range(i, len(self.children)):
            self.children[j].clear(window, ctx.child(j))
        ctx.clear_state("at")
        if self.end_timer:
            ctx.delete_event_time_timer(window.max_timestamp)

    def can_finish(self) -> bool:
        return True

    def state_names(self) -> tuple[str, ...]:
        return ("at",)


def walk(trigger: Trigger) -> list[Trigger]:
    """The trigger and all its descendants, depth first (for validation and reports)."""
    out = [trigger]
    for child in _children(trigger):
        out.extend(walk(child))
    return out


def _children(trigger: Trigger) -> Sequence[Trigger]:
    if isinstance(
        trigger, PurgingTrigger | PanePurgingTrigger | ProcessingTimeoutTrigger | OnceTrigger
    ):
        return (trigger.nested,)
    if isinstance(trigger, AnyTrigger | AllTrigger | SequenceTrigger):
        return trigger.children
    if isinstance(trigger, UntilTrigger):
        return (trigger.actual, trigger.until)
    if isinstance(trigger, EarlyLateTrigger):
        return tuple(t for t in (trigger.early, trigger.late) if t is not None)
    return ()
