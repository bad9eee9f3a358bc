"""A pipeline's global sequence: where each emitted row of a stage belongs.

A pipeline chains operators: a query reads the rows another query (a view)
emits. Flink runs such a chain as one stream in which each operator fires
its timers for a watermark ``W`` and only then forwards ``W`` downstream
(``AbstractStreamOperator.processWatermark``), so the rows fired at ``W``
reach the next operator *before* ``W``, and rows fired while processing a
row come right after that row. Batch replay reproduces that sequence
although every stage runs per key partition with lazily fired timers: each
stage tags its emitted rows (``OperatorConfig.tag_firings``, the fields
``config.FIRED_FIELDS``) and this module turns the tags into positions of
the global sequence (docs/architecture.md, "Contract: pipelines").

The global sequence is made of **steps**, numbered by the replay positions
``s`` of the source rows (``__wql_seq``, increasing, gaps allowed):

* ``2*s`` -- the *rise* before row ``s``: the watermark rises to the
  watermark row ``s`` sees (only where it rises);
* ``2*s + 1`` -- row ``s`` itself;
* ``2*S`` and ``2*(S + 1)`` with ``S`` = last position + 1 -- end of input:
  the rise to the watermark after the last row, then to ``MAX_TIME``.

Within a rise step every stage first processes the rows its upstream emitted
at that step (they were fired at the rise, so they come before it), then
fires its own timers. Where a row of a stage belongs:

* fired by row ``a`` (``FIRED_BY_ROW``): the step of its input row ``a``,
  right after that row (among the rows ``a`` fired, in emission order);
* fired by an event-time timer at ``T`` that was ahead of the watermark:
  the first rise that reaches ``T`` (:meth:`GlobalClock.first_rise`);
* fired by a timer that was already due (``fired_row`` set): the first rise
  at or after the step of input row ``fired_row`` (:meth:`GlobalClock.rise_after`;
  a row that arrived at a rise step is processed before that rise).

The watermark a row of the next stage sees is the one before its step's rise
(:meth:`GlobalClock.watermark_before`). Rows fired at one step are ordered
by: rows fired by rows first (by their input row's rank, then emission
order), then rows fired by timers, by timer time, then key, window end and
window start. Flink leaves the order of equal timers to its timer heap; WQL
fixes this one.

Why a stage may run per key with lazily fired timers: a key's state changes
only through its own rows and timers, timers fire in time order on every
rise, and the tag says which global rise fired each row (docs/runtime.md).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from wql.runtime.config import (
    EMIT_KEY,
    EMIT_WINDOW_END,
    EMIT_WINDOW_START,
    FIRED_BY_EVENT_TIMER,
    FIRED_BY_ROW,
)
from wql.runtime.windows import MAX_TIME, MIN_TIME

__all__ = [
    "CLASS_ROW",
    "CLASS_TIMER",
    "TIMER_ORDER_FIELDS",
    "GlobalClock",
    "rise_step",
    "row_step",
    "spark_ascending",
    "timer_order",
]

#: Within a step: rows fired by rows come before rows fired by timers.
CLASS_ROW = 0
CLASS_TIMER = 1

#: THE order of the rows timers fired at one step, after the timer's time: these
#: emitted fields (the key's values one by one), each ascending as Spark's
#: ``asc_nulls_first`` orders it (NULL first, NaN after every number:
#: :func:`spark_ascending`). The batch host ranks a step's rows by the matching
#: columns in Spark (``wql.spark.layout.placed_results``); the stream processors
#: sort a rise's rows by :func:`timer_order`: one rule, two forms.
TIMER_ORDER_FIELDS = (EMIT_KEY, EMIT_WINDOW_END, EMIT_WINDOW_START)

IntArray = npt.NDArray[np.int64]


def spark_ascending(v: Any) -> tuple:
    """A sort key of one value in Spark's ascending order: NULL first, NaN last."""
    if v is None:
        return (0,)
    if isinstance(v, float) and v != v:
        return (1, 1)
    return (1, 0, v)


def timer_order(tag: int) -> Callable[[tuple], tuple]:
    """The sort key of the emitted rows timers fired at one rise (whose
    ``FIRED_FIELDS`` start at ``tag``): the timer's time, then
    :data:`TIMER_ORDER_FIELDS` (a stable sort keeps emission order for ties)."""
    when = tag + 1  # FIRED_FIELDS: (fired by, time, row)

    def order(row: tuple) -> tuple:
        fields = []
        for f in TIMER_ORDER_FIELDS:
            v = row[f]
            fields.append(tuple(map(spark_ascending, v)) if f == EMIT_KEY else spark_ascending(v))
        return (row[when], *fields)

    return order


def rise_step(position: int) -> int:
    """The step of the watermark rise before the source row at replay ``position``."""
    return 2 * position


def row_step(position: int) -> int:
    """The step of the source row at replay ``position``."""
    return 2 * position + 1


@dataclass(frozen=True)
class GlobalClock:
    """The rises of a pipeline's watermark: ``steps[i]`` reaches ``marks[i]``.

    Both arrays increase strictly; the last mark is ``MAX_TIME`` (end of
    input), so every timer finds its rise.
    """

    steps: IntArray
    marks: IntArray
    #: the watermark after the last row (before the end of input's MAX_TIME)
    final: int = MIN_TIME

    @classmethod
    def from_replay(
        cls, positions: Sequence[int] | IntArray, watermarks: Sequence[int] | IntArray, final: int
    ) -> GlobalClock:
        """The clock of a replay: each row's position and ``watermark_before`` (in replay
        order), and the watermark after the last row (``final``)."""
        pos = np.asarray(positions, dtype=np.int64)
        wm = np.asarray(watermarks, dtype=np.int64)
        if not len(wm):
            return cls.from_rises(pos, wm, final, 0)
        prev = np.empty(len(wm), dtype=np.int64)
        prev[0] = MIN_TIME
        prev[1:] = wm[:-1]
        rises = wm > prev
        return cls.from_rises(pos[rises], wm[rises], final, int(pos[-1]) + 1)

    @classmethod
    def from_rises(
        cls,
        positions: Sequence[int] | IntArray,
        marks: Sequence[int] | IntArray,
        final: int,
        end: int,
    ) -> GlobalClock:
        """The clock from its rises: the replay ``positions`` where the watermark rises, to
        ``marks`` (both increasing), the watermark after the last row (``final``) and the
        position after the last row (``end``)."""
        pos = np.asarray(positions, dtype=np.int64)
        wm = np.asarray(marks, dtype=np.int64)
        last = int(wm[-1]) if len(wm) else MIN_TIME
        tail_steps, tail_marks = [], []
        if final > last:
            tail_steps.append(rise_step(end))
            tail_marks.append(final)
        if max(final, last) < MAX_TIME:
            tail_steps.append(rise_step(end + 1))
            tail_marks.append(MAX_TIME)
        return cls(
            np.concatenate([2 * pos, np.array(tail_steps, dtype=np.int64)]).astype(np.int64),
            np.concatenate([wm, np.array(tail_marks, dtype=np.int64)]).astype(np.int64),
            max(final, last),
        )

    def watermarks_before(self, steps: IntArray) -> IntArray:
        """:meth:`watermark_before` of every step in ``steps`` (an int64 array)."""
        i = np.searchsorted(self.steps, steps, side="left") - 1
        out = self.marks[np.maximum(i, 0)]
        return np.where(i >= 0, out, MIN_TIME).astype(np.int64)

    def first_rise(self, time: int) -> int:
        """The step of the first rise reaching ``time`` (an event-time timer at it fires there)."""
        return int(self.steps[np.searchsorted(self.marks, time, side="left")])

    def rise_after(self, step: int) -> int:
        """The first rise at or after ``step`` (a rise step's own rise comes after its rows)."""
        return int(self.steps[np.searchsorted(self.steps, step, side="left")])

    def watermark_before(self, step: int) -> int:
        """The watermark a row at ``step`` sees: the one reached by the last rise before it."""
        i = int(np.searchsorted(self.steps, step, side="left")) - 1
        return int(self.marks[i]) if i >= 0 else MIN_TIME

    def place(self, fired_by: int, fired_time: int | None, input_step: int | None) -> int:
        """The step of a row emitted with these ``FIRED_FIELDS``.

        ``input_step`` is the step of the stage's input row ``fired_row``
        (None when the tag names no row).
        """
        if fired_by == FIRED_BY_ROW:
            assert input_step is not None
            return input_step
        if fired_by != FIRED_BY_EVENT_TIMER:
            raise ValueError("a pipeline stage fires only on rows and event-time timers")
        if input_step is None:
            assert fired_time is not None
            return self.first_rise(fired_time)
        return self.rise_after(input_step)


class OperatorChain:
    """Operators chained in one process, in Flink's chain order (the stream processors').

    ``ops`` run upstream first; ``feed(i, rows)`` hands the rows ``ops[i - 1]``
    emitted to ``ops[i]`` as its input rows, at its watermark (the host knows
    how a view's row becomes its reader's input); ``tags[i]``: where
    ``FIRED_FIELDS`` start in ``ops[i]``'s rows (the upstream operators tag
    their firings). :attr:`late` collects the last operator's late rows when
    ``keep_late`` (an upstream operator's are its own query's).

    At a rise each operator first processes the rows the one before fired at
    it, then rises, and its fired rows go on in :func:`timer_order` (after the
    rows fired by those rows): Flink's ``processWatermark`` forwards a
    watermark only after the rows its timers fired. Rows taken in reach every
    later operator in emission order (:meth:`pass_down`).
    """

    def __init__(
        self,
        ops: Sequence[Any],
        feed: Callable[[int, list[tuple]], None],
        tags: Sequence[int],
        *,
        keep_late: bool,
        feeds_on: bool = False,
    ) -> None:
        self.ops = ops
        self.feed = feed
        self.tags = tags
        self.keep_late = keep_late
        #: the last operator's rows feed another chain (a stream pipeline cut where a
        #: link needs Spark SQL): its rows fired at a rise leave in timer order too
        self.feeds_on = feeds_on
        self.late: list[tuple] = []

    def rise(self, watermark: int, first: list[tuple] | None = None) -> list[tuple]:
        """Every operator to ``watermark`` (``MAX_TIME``: the end of input), stage by
        stage. Returns the rows the last operator emitted. ``first``: what the first
        operator emitted for the rows it took in just before the rise (rows an earlier
        chain fired at this rise), which go on ahead of the rows it fires."""
        rows: list[tuple] = []
        last = len(self.ops) - 1
        for i, op in enumerate(self.ops):
            fed: list[tuple] = list(first or ()) if i == 0 else []
            if i and rows:
                self.feed(i, rows)
                fed = op.drain()
            if watermark == MAX_TIME:
                op.end_of_input()
            else:
                op.advance_watermark(watermark)
            fired = op.drain()
            if i < last or self.feeds_on:
                fired.sort(key=timer_order(self.tags[i]))
            rows = fed + fired
            self._drain_late(i, op)
        return rows

    def pass_down(self) -> list[tuple]:
        """The first operator took rows: what it emitted, through every later operator, in
        emission order. Returns the rows the last operator emitted."""
        rows = self.ops[0].drain()
        self._drain_late(0, self.ops[0])
        for i in range(1, len(self.ops)):
            if rows:
                self.feed(i, rows)
            rows = self.ops[i].drain()
            self._drain_late(i, self.ops[i])
        return rows

    def _drain_late(self, i: int, op: Any) -> None:
        late = op.drain_late()
        if self.keep_late and i == len(self.ops) - 1:
            self.late += late
