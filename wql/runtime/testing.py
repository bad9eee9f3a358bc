"""A test harness speaking the notation of the Flink test vectors.

Script steps, separated by commas, semicolons or newlines:

- ``k2:1@3999`` — a row of key ``k2`` with value ``1`` at event time 3999
  (``k2@3999``: value 1; values parse as int, then float, else stay text);
- ``WM 999`` — advance the watermark to 999;
- ``PT 500`` — advance processing time to 500;
- ``END`` — end of input (watermark to MAX_TIME).

Keys are wrapped into one-element tuples for the operator and unwrapped in
the results. ``values`` maps (key, value) to the row's values tuple (default
``(value,)``), for configs that read extra columns (dynamic gaps, DELTA).

>>> from wql.runtime import AggregateSpec, OperatorConfig, TumblingWindows
>>> h = Harness(OperatorConfig(TumblingWindows(3000), (AggregateSpec("SUM", 0),)))
>>> h.run("k1:1@20, k1:2@999, WM 2999")
[Fired(key='k1', value=3, start=0, end=3000, timestamp=2999, pane_index=0, pane_timing='ON_TIME')]
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any, NamedTuple

from wql.runtime.config import OperatorConfig
from wql.runtime.state import KeyState
from wql.runtime.timers import TimerService
from wql.runtime.triggers import TriggerResult
from wql.runtime.window_operator import WindowOperator, _Context
from wql.runtime.windows import MIN_TIME

_ROW = re.compile(r"^(?P<key>[^:@\s]+)(?::(?P<value>[^@]+))?@(?P<ts>-?\d+)$")
_CLOCK = re.compile(r"^(?P<kind>WM|PT)\s+(?P<t>-?\d+)$", re.IGNORECASE)


class Fired(NamedTuple):
    """One emitted row, key unwrapped; ``value`` is the single aggregate or a tuple of them.

    ``is_last`` and ``op`` are set when the config asks for extended rows
    (``OperatorConfig.mark_last`` / ``changelog``), else None.
    """

    key: Any
    value: Any
    start: int | None
    end: int | None
    timestamp: int
    pane_index: int
    pane_timing: str
    is_last: bool | None = None
    op: str | None = None

    def __repr__(self) -> str:
        # the extended fields only when there are any (rows of a plain config read as before)
        shown = [(n, v) for n, v in zip(self._fields, self, strict=True)]
        if self.is_last is None and self.op is None:
            shown = shown[:-2]
        return "Fired(" + ", ".join(f"{n}={v!r}" for n, v in shown) + ")"


class Late(NamedTuple):
    key: Any
    timestamp: int | None
    values: tuple


def parse_value(text: str) -> Any:
    text = text.strip()
    for conv in (int, float):
        try:
            return conv(text)
        except ValueError:
            pass
    return text


class Harness:
    """Drive a :class:`WindowOperator` with a script; collects emitted and late rows."""

    def __init__(
        self,
        config: OperatorConfig,
        values: Callable[[Any, Any], tuple] | None = None,
        operator: WindowOperator | None = None,
    ) -> None:
        self.config = config
        self.op = operator if operator is not None else WindowOperator(config)
        self._values = values or (lambda key, value: (value,))

    def element(self, key: Any, value: Any, timestamp: int | None) -> list[Fired]:
        self.op.process_element((key,), timestamp, self._values(key, value))
        return self.output()

    def watermark(self, t: int) -> list[Fired]:
        self.op.advance_watermark(t)
        return self.output()

    def processing_time(self, t: int) -> list[Fired]:
        self.op.advance_processing_time(t)
        return self.output()

    def end(self) -> list[Fired]:
        self.op.end_of_input()
        return self.output()

    def step(self, command: str) -> list[Fired]:
        command = command.strip()
        if not command:
            return []
        if command.upper() == "END":
            return self.end()
        m = _CLOCK.match(command)
        if m:
            t = int(m["t"])
            return self.watermark(t) if m["kind"].upper() == "WM" else self.processing_time(t)
        m = _ROW.match(command)
        if m:
            value = 1 if m["value"] is None else parse_value(m["value"])
            return self.element(m["key"], value, int(m["ts"]))
        raise ValueError(f"cannot read harness step {command!r}")

    def run(self, script: str) -> list[Fired]:
        """Run every step; returns everything emitted, in emission order."""
        out: list[Fired] = []
        for command in re.split(r"[,;\n]", script):
            out.extend(self.step(command))
        return out

    def output(self) -> list[Fired]:
        fired = []
        extended = self.config.extended_rows
        for row in self.op.drain():
            results = row[7:-2] if extended else row[7:]
            value = results[0] if len(results) == 1 else tuple(results)
            key = row[0][0] if len(row[0]) == 1 else row[0]
            marks = (row[-2], row[-1]) if extended else ()
            fired.append(Fired(key, value, row[1], row[2], row[6], row[4], row[5], *marks))
        return fired

    def late(self) -> list[Late]:
        return [
            Late(k[0] if len(k) == 1 else k, ts, values) for k, ts, values in self.op.drain_late()
        ]

    def snapshot_restore(self) -> None:
        """Replace the operator by one restored from its snapshot (for restore tests)."""
        self.op = WindowOperator.restore(self.config, self.op.snapshot())


def sums(fired: list[Fired]) -> list[tuple[Any, Any, int | None, int | None]]:
    """(key, value, start, end) of each firing, sorted: the usual comparison in tests."""
    return sorted((f.key, f.value, f.start, f.end) for f in fired)


class TriggerProbe:
    """Call one trigger's methods directly, against the operator's real context and state.

    For contract tests: after driving a trigger through ``element`` /
    ``event_time`` / ``processing_time_timer`` / ``merge``, ``state(window)``
    and ``timers(window)`` show exactly what it left behind.
    """

    def __init__(self, trigger: Any, watermark: int = MIN_TIME, processing_time: int = MIN_TIME):
        self.trigger = trigger
        self.watermark = watermark
        self.processing_time = processing_time
        self._timers = TimerService()
        self.ks = KeyState()
        self.ctx = _Context(self)  # type: ignore[arg-type]  # duck-typed operator

    def _bind(self, window: Any) -> _Context:
        ctx = self.ctx
        ctx.key, ctx.ks, ctx.window = "k", self.ks, window
        return ctx

    def element(self, window: Any, timestamp: int | None, values: tuple = (1,)) -> TriggerResult:
        return self.trigger.on_element(timestamp, values, window, self._bind(window))

    def event_time(self, window: Any, time: int) -> TriggerResult:
        """As if the event-time timer (window, time) fired (it is consumed first)."""
        self._timers.delete_event_time_timer("k", window, time)
        return self.trigger.on_event_time(time, window, self._bind(window))

    def processing_time_timer(self, window: Any, time: int) -> TriggerResult:
        """As if the processing-time timer (window, time) fired (it is consumed first)."""
        self._timers.delete_processing_time_timer("k", window, time)
        return self.trigger.on_processing_time(time, window, self._bind(window))

    def merge(self, target: Any, merged: list) -> None:
        ctx = self._bind(target)
        ctx.merged = merged
        try:
            self.trigger.on_merge(target, ctx)
        finally:
            ctx.merged = ()

    def clear(self, window: Any) -> None:
        self.trigger.clear(window, self._bind(window))

    def state(self, window: Any) -> dict[str, Any]:
        return {name: v for (w, name), v in self.ks.trigger.items() if w == window}

    def timers(self, window: Any) -> tuple[set[int], set[int]]:
        ev, pt = self._timers.key_timers("k")
        return {t for (w, t) in ev if w == window}, {t for (w, t) in pt if w == window}
