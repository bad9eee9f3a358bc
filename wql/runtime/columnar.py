"""Columnar HOP / CUMULATE windows: (key, slice) partials in arrays, fired per watermark step.

The per-window path keeps an accumulator, a timer and a firing callback per
(key, window): a HOP of size 60 × slide makes 60 of each per key and second,
and that per-window Python work is what HOP costs (docs/benchmarks.md,
"Slicing"). :class:`ColumnarWindows` keeps instead, for every key at once,
one row per (key, slice) -- the slices of ``wql.runtime.vectorized.slices``,
as Flink SQL's slicing window operator -- in a
:class:`~wql.runtime.vectorized.slices.SliceTable` sorted by (key, slice),
and when the watermark rises it computes every window of every key that
became due with prefix sums and range tables over that table, emitting them
in one step. No per-window timer exists while a
window is open; the operator answers ``timers()``, ``open_windows()``,
``active_keys()`` and ``state_size()`` from the arrays.

**Why it equals the per-window path** (default trigger, lateness 0). A
window fires when the watermark reaches its max timestamp and is cleaned up
at once; a row is added to a window iff the window has not fired when the
row arrives. Here a window's value is read from its slices when it fires.
So the two agree iff every row added to a slice before the window's firing
belongs to the window and none added after does. Rows are added part by
part: the rows *ahead* of the watermark they see (``ts > wm``) between two
firing steps can only fall into windows that have not fired (a fired
window ends at or before the watermark), and a row at or behind its
watermark is a part of its own, added after the windows due at its
watermark have fired (it joins only the later ones, exactly the windows
still open; if none is open, the loop's late-row rule applies). Windows
are exact over slices because the aggregates merge exactly: counts, and
integer SUM / AVG / MIN / MAX (the exactness policy,
docs/runtime.md "Slices: HOP / CUMULATE").

Where it applies (the operator's default path, :meth:`ColumnarWindows.applies`):
an event-time HOP (size >= slide) or CUMULATE with the default trigger, no
evictor, no allowed lateness, and aggregates the slice table serves (the
aggregate table's pane-combinable kinds with a count, sum, min or max
partial: COUNT(*), COUNT, SUM, AVG, MIN, MAX). Only ``process_batch`` uses
the arrays, and only for batches whose argument columns are int64 without
nulls and whose sums cannot overflow. Anything else first turns the arrays into the per-window state
(accumulators, ``KeyState`` entries and timers: :meth:`ColumnarWindows.materialize`)
and hands the operator to the per-window path for good: a row given to
``process_element``, a snapshot, a per-key restore, a batch it cannot take.
The emitted rows of one firing step come sorted by (window end, key's
first appearance), a multiset equal to the loop's (the vectorized path's
ordering contract); pane index 0, ``ON_TIME``.
"""

from __future__ import annotations

from collections.abc import Hashable
from itertools import repeat
from typing import TYPE_CHECKING, Any

import numpy as np

from wql.runtime.assigners import DROP_MISSING_TIMESTAMP
from wql.runtime.config import ON_TIME, OperatorConfig, RowBatch
from wql.runtime.fastpath import RowPath, WindowPath, inlines_event_trigger
from wql.runtime.vectorized.kernels import IntArray
from wql.runtime.vectorized.prepare import prepare
from wql.runtime.vectorized.slices import TIME_LIMIT, SliceShape, SliceTable, sliced_by_table
from wql.runtime.windows import MAX_TIME, TimeWindow

if TYPE_CHECKING:
    from wql.runtime.window_operator import WindowOperator

Key = Hashable
_SUM_LIMIT = 2**62


class ColumnarWindows(RowPath):
    """Every key's HOP/CUMULATE slices as columns; fires the due windows of all keys at once."""

    @staticmethod
    def applies(config: OperatorConfig) -> bool:
        shape = SliceShape.of(config.assigner)
        a: Any = config.assigner
        return (
            shape is not None
            and (shape.cumulate or a.size >= a.slide)
            and inlines_event_trigger(config)
            and config.allowed_lateness == 0
            # a pipeline stage tags each firing (the arrays fire without tags)
            and not config.tag_firings
            and sliced_by_table(config.aggregates)
            and max(getattr(a, "size", 0), getattr(a, "slide", 0), abs(a.offset)) < TIME_LIMIT
        )

    def __init__(self, op: WindowOperator, per_window: WindowPath) -> None:
        super().__init__(op)
        self.per_window = per_window
        shape = SliceShape.of(op.config.assigner)
        assert shape is not None
        self.shape = shape
        self.specs = op.config.aggregates
        self.columns = sorted({s.arg for s in self.specs if s.arg is not None})
        # key -> code, in first-appearance order
        self.codes: dict[Key, int] = {}
        self.keys: list[Key] = []
        #: The (key, slice) partials; made at the first slice (slices are relative to it).
        self.table: SliceTable | None = None
        self.abs_sum = 0  # bound on any sum of the table (int64 safety)
        #: The watermark up to which windows have been fired.
        self.fired_to = op.watermark

    def _empty(self) -> bool:
        return self.table is None or len(self.table.enc) == 0

    # ------------------------------------------------------------- the path

    def process_element(self, key: Key, timestamp: int | None, values: tuple) -> None:
        self.materialize()
        self.per_window.process_element(key, timestamp, values)

    def on_timer(self, key: Key, window: Any, time: int, event: bool) -> None:
        self.per_window.on_timer(key, window, time, event)  # no timers of its own

    watches_watermark = True

    def process_batch(self, batch: RowBatch) -> bool:
        op = self.op
        p = prepare(op, batch) if not op.key_states else None
        if p is None or not self._takes(p):
            self.materialize()
            return self.per_window.process_batch(batch)
        if self._empty():
            # no window is held: every window up to the operator's watermark has fired
            # (a restored operator sets its watermark after making this path)
            self.fired_to = op.watermark
        op.admit(p.n)
        invalid = p.n - int(p.valid.sum())
        if invalid:
            op.drop(DROP_MISSING_TIMESTAMP, invalid)
        codes = np.array([self._code(k) for k in p.uniques], np.int64)[p.key_codes]
        qi = self.shape.index(p.ts)
        if self.table is None and p.valid.any():
            c = self.columns
            self.table = SliceTable(self.shape, int(qi[p.valid].min()), c, c, c)
        # a row at or behind the watermark it sees goes alone, after the firing step
        behind = p.valid & (p.ts <= p.wm)
        cuts = np.flatnonzero(behind).tolist()
        start = 0
        for cut in [*cuts, p.n]:
            if cut > start:
                part = np.arange(start, cut)
                self._add(p, codes, qi, part[p.valid[part]])
                op.advance_watermark(int(p.wm_raw[cut - 1]))
            if cut < p.n:
                op.advance_watermark(int(p.wm_raw[cut]))
                last_end = self.shape.last_end(int(qi[cut]))
                if self.shape.time(last_end) - 1 <= op.watermark:
                    key = p.keys[cut]
                    values = tuple(
                        np.asarray(c)[cut].item() if isinstance(c, np.ndarray) else c[cut]
                        for c in p.batch.columns
                    )
                    op.not_accepted(key, int(p.ts[cut]), values, int(p.wm_raw[cut]))
                else:
                    self._add(p, codes, qi, np.array([cut], np.int64))
            start = cut + 1
        return True

    def on_watermark(self, watermark: int) -> None:
        """Fire every window whose max timestamp the watermark passed since the last step."""
        if watermark <= self.fired_to or self._empty():
            self.fired_to = max(self.fired_to, watermark)
            return
        lo_time = self.fired_to
        self.fired_to = watermark
        k, e_i = self._windows(lo_time, watermark)
        if len(k):
            self.op.emit_rows(self._rows(k, e_i))
        self._prune(watermark)

    # ------------------------------------------------------------ inspection

    def held_keys(self) -> list[Key]:
        if self._empty():
            return []
        assert self.table is not None
        return [self.keys[c] for c in np.unique(self.table.slices()[0]).tolist()]

    def held_windows(self) -> int:
        return len(self._open()[0])

    def held_timers(self, key: Key) -> list[int]:
        code = self.codes.get(key)
        if code is None:
            return []
        k, e_i = self._open()
        return sorted(self.shape.time(e) - 1 for e in e_i[k == code].tolist())

    # ---------------------------------------------------------------- slices

    def _takes(self, p: Any) -> bool:
        """Integer argument columns whose sums stay inside int64, times inside the limits
        (integers: the values every table partial merges exactly, ``exact_merge``)."""
        valid = p.valid
        for c in self.columns:
            col = p.columns[c]
            if col.dtype.kind != "i":
                return False
            if valid.any():
                v = col[valid]
                self.abs_sum += max(abs(int(v.min())), abs(int(v.max()))) * len(v)
        if self.abs_sum >= _SUM_LIMIT:
            return False
        if valid.any():
            qi = self.shape.index(p.ts[valid])
            table = self.table or SliceTable(self.shape, int(qi.min()))
            if not table.fits(qi, len(self.codes) + len(p.uniques)):
                return False
        return True

    def _code(self, key: Key) -> int:
        code = self.codes.get(key)
        if code is None:
            code = self.codes[key] = len(self.keys)
            self.keys.append(key)
        return code

    def _add(self, p: Any, codes: IntArray, qi: IntArray, rows: IntArray) -> None:
        """Fold ``rows`` into the (key, slice) table."""
        if len(rows) == 0:
            return
        assert self.table is not None
        values = {c: p.columns[c][rows] for c in self.columns}
        self.table.add(codes[rows], qi[rows], values, values)

    # --------------------------------------------------------------- windows

    def _windows(self, after: int | None, upto: int | None) -> tuple[IntArray, IntArray]:
        """Windows with content whose max timestamp is in ``(after, upto]``: (key, end)."""
        assert self.table is not None
        found = self.shape.windows(*self.table.slices(), after, upto)
        assert found is not None
        return found

    def _open(self) -> tuple[IntArray, IntArray]:
        """Every window with content that has not fired: (key, end)."""
        if self._empty():
            return np.zeros(0, np.int64), np.zeros(0, np.int64)
        return self._windows(self.fired_to, MAX_TIME)

    def _partials(self, k: IntArray, e_i: IntArray) -> tuple[list, list, list[list]]:
        """Per window (key, end): its start and end times and each aggregate's slot values
        (the per-window accumulator's: AVG has (sum, count), the others one value)."""
        table = self.table
        assert table is not None
        lo, hi = table.ranges(k, e_i)
        count = table.window_count(lo, hi).tolist()
        done: dict[tuple[str, int], list] = {}

        def reduced(partial: str, c: int) -> list:
            if (partial, c) not in done:
                if partial == "sum":
                    done[(partial, c)] = table.window_sum(c, lo, hi).tolist()
                else:
                    done[(partial, c)] = table.window_extremum(partial, c, lo, hi).tolist()
            return done[(partial, c)]

        slots: list[list] = []
        for spec in self.specs:
            partial, c = spec.info.partial, spec.arg
            if partial == "count":
                slots.append(count)
            elif spec.kind == "AVG":  # its accumulator: (sum, count)
                assert c is not None
                slots.append(list(zip(reduced(partial, c), count, strict=True)))
            else:
                assert c is not None
                slots.append(reduced(partial, c))
        starts = self.shape.time(self.shape.start(e_i)).tolist()
        ends = self.shape.time(e_i).tolist()
        return starts, ends, slots

    def _rows(self, k: IntArray, e_i: IntArray) -> list[tuple]:
        starts, ends, slots = self._partials(k, e_i)
        results = [
            # Python's int / int, as the per-window accumulator's result divides
            [a / b for a, b in values] if spec.kind == "AVG" else values
            for spec, values in zip(self.specs, slots, strict=True)
        ]
        keys = list(map(self.keys.__getitem__, k.tolist()))
        max_ts = [e - 1 for e in ends]
        # tuples built by zip in C: one row per window, EMITTED_FIELDS + results
        return list(zip(keys, starts, ends, max_ts, repeat(0), repeat(ON_TIME), max_ts, *results))

    def _prune(self, watermark: int) -> None:
        """Drop the slices whose every window has fired."""
        table = self.table
        assert table is not None
        _, qi = table.slices()
        live = self.shape.time(self.shape.last_end(qi)) - 1 > watermark
        if not live.all():
            table.keep(live)

    # --------------------------------------------------------- materialising

    def materialize(self) -> None:
        """The arrays as the per-window path's state (accumulators, timers); hand over to it."""
        op = self.op
        if not self._empty():
            k, e_i = self._open()
            starts, ends, slots = self._partials(k, e_i)
            agg = op.aggregator
            timers = op.timer_service
            for j, (code, s, e) in enumerate(zip(k.tolist(), starts, ends, strict=True)):
                key = self.keys[code]
                acc = agg.create()
                for spec, slot, values in zip(self.specs, agg.slots, slots, strict=True):
                    if spec.kind == "AVG":
                        acc[slot], acc[slot + 1] = values[j]
                    else:
                        acc[slot] = values[j]
                ks = op.key_states.get(key)
                if ks is None:
                    ks = op.new_key_state(key)
                window = TimeWindow(s, e)
                ks.contents[window] = acc
                timers.register_event_time_timer(key, window, e - 1)
            self.table = None
        op.use_path(self.per_window)

    def settle(self) -> None:
        self.materialize()
