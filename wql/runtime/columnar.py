"""Columnar HOP / CUMULATE windows: (key, slice) partials in arrays, fired per watermark step.

The per-window path keeps an accumulator, a timer and a firing callback per
(key, window): a HOP of size 60 × slide makes 60 of each per key and second,
and that per-window Python work is what HOP costs (docs/benchmarks.md,
"Slicing"). :class:`ColumnarWindows` keeps instead, for every key at once,
one row per (key, slice) -- slice = ``gcd(size, slide)`` for HOP, the step
for CUMULATE, as Flink SQL's slicing window operator -- in NumPy arrays
sorted by (key, slice), and when the watermark rises it computes every
window of every key that became due with prefix sums and range tables over
those arrays, emitting them in one step. No per-window timer exists while a
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
evictor, no allowed lateness, and aggregates among COUNT(*), COUNT, SUM,
AVG, MIN, MAX. Only ``process_batch`` uses the arrays, and only for batches
whose argument columns are int64 without nulls and whose sums cannot
overflow. Anything else first turns the arrays into the per-window state
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
from math import gcd
from typing import TYPE_CHECKING, Any

import numpy as np

from wql.runtime.assigners import DROP_MISSING_TIMESTAMP, CumulateWindows, SlidingWindows
from wql.runtime.config import ON_TIME, OperatorConfig, RowBatch
from wql.runtime.fastpath import RowPath, WindowPath, inlines_event_trigger
from wql.runtime.vectorized.kernels import IntArray, RangeTable, session_components
from wql.runtime.vectorized.prepare import prepare
from wql.runtime.windows import MAX_TIME, TimeWindow

if TYPE_CHECKING:
    from wql.runtime.window_operator import WindowOperator

Key = Hashable
#: Aggregates whose slice partials give any window exactly (over int64 columns).
_KINDS = frozenset({"COUNT_STAR", "COUNT", "SUM", "AVG", "MIN", "MAX"})
#: (key code, slice index) as one int64: key << 31 | (slice - first slice + 2**30).
_KEY_SHIFT = 31
_SLICE_BIAS = 2**30
_SUM_LIMIT = 2**62
_TIME_LIMIT = 2**60


class ColumnarWindows(RowPath):
    """Every key's HOP/CUMULATE slices as columns; fires the due windows of all keys at once."""

    @staticmethod
    def applies(config: OperatorConfig) -> bool:
        a: Any = config.assigner
        shaped = a.size >= a.slide if type(a) is SlidingWindows else type(a) is CumulateWindows
        return (
            shaped
            and inlines_event_trigger(config)
            and config.allowed_lateness == 0
            # a pipeline stage tags each firing (the arrays fire without tags)
            and not config.tag_firings
            and all(s.kind in _KINDS for s in config.aggregates)
            and max(getattr(a, "size", 0), getattr(a, "slide", 0), abs(a.offset)) < _TIME_LIMIT
        )

    def __init__(self, op: WindowOperator, per_window: WindowPath) -> None:
        super().__init__(op)
        self.per_window = per_window
        a: Any = op.config.assigner
        self.cumulate = type(a) is CumulateWindows
        self.unit = a.step if self.cumulate else gcd(a.size, a.slide)
        self.offset = a.offset
        #: HOP: the slide and size in slices; CUMULATE: the period (size) in slices.
        self.slide_u = 1 if self.cumulate else a.slide // self.unit
        self.size_u = a.size // self.unit
        self.specs = op.config.aggregates
        self.columns = sorted({s.arg for s in self.specs if s.arg is not None})
        # key -> code, in first-appearance order
        self.codes: dict[Key, int] = {}
        self.keys: list[Key] = []
        self.first_slice: int | None = None
        # the table: (key, slice) sorted, one partial per column and kind
        self.enc = np.zeros(0, np.int64)
        self.count = np.zeros(0, np.int64)
        self.sums = {c: np.zeros(0, np.int64) for c in self.columns}
        self.mins = {c: np.zeros(0, np.int64) for c in self.columns}
        self.maxs = {c: np.zeros(0, np.int64) for c in self.columns}
        self.abs_sum = 0  # bound on any sum of the table (int64 safety)
        #: The watermark up to which windows have been fired.
        self.fired_to = op.watermark

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
        op.admit(p.n)
        invalid = p.n - int(p.valid.sum())
        if invalid:
            op.drop(DROP_MISSING_TIMESTAMP, invalid)
        codes = np.array([self._code(k) for k in p.uniques], np.int64)[p.key_codes]
        qi = (p.ts - self.offset) // self.unit
        if self.first_slice is None and p.valid.any():
            self.first_slice = int(qi[p.valid].min())
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
                if self._time(self._last_end(int(qi[cut]))) - 1 <= op.watermark:
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
        if watermark <= self.fired_to or len(self.enc) == 0:
            self.fired_to = max(self.fired_to, watermark)
            return
        lo_time = self.fired_to
        self.fired_to = watermark
        k, e_i = self._windows_ending(lo_time, watermark)
        if len(k):
            self.op.emit_rows(self._rows(k, e_i))
        self._prune(watermark)

    # ------------------------------------------------------------ inspection

    def held_keys(self) -> list[Key]:
        return [self.keys[c] for c in np.unique(self.enc >> _KEY_SHIFT).tolist()]

    def held_windows(self) -> int:
        return len(self._open()[0])

    def held_timers(self, key: Key) -> list[int]:
        code = self.codes.get(key)
        if code is None:
            return []
        k, e_i = self._open()
        return sorted(self._time(e) - 1 for e in e_i[k == code].tolist())

    # ---------------------------------------------------------------- slices

    def _takes(self, p: Any) -> bool:
        """Integer argument columns whose sums stay inside int64, times inside the limits."""
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
            qi = (p.ts[valid] - self.offset) // self.unit
            first = int(qi.min()) if self.first_slice is None else self.first_slice
            span = max(abs(int(qi.min()) - first), abs(int(qi.max()) - first)) + self.size_u
            if span >= _SLICE_BIAS or len(self.codes) + len(p.uniques) >= 2**_KEY_SHIFT:
                return False
        return True

    def _code(self, key: Key) -> int:
        code = self.codes.get(key)
        if code is None:
            code = self.codes[key] = len(self.keys)
            self.keys.append(key)
        return code

    def _encode(self, codes: IntArray, qi: IntArray) -> IntArray:
        assert self.first_slice is not None
        return (codes << _KEY_SHIFT) | (qi - self.first_slice + _SLICE_BIAS)

    def _add(self, p: Any, codes: IntArray, qi: IntArray, rows: IntArray) -> None:
        """Fold ``rows`` into the (key, slice) table."""
        if len(rows) == 0:
            return
        enc = self._encode(codes[rows], qi[rows])
        order = np.argsort(enc, kind="stable")
        enc = enc[order]
        rows = rows[order]
        new = np.concatenate(([True], enc[1:] != enc[:-1]))
        starts = np.flatnonzero(new)
        u_enc = enc[starts]
        count = np.diff(np.append(starts, len(enc)))
        sums = {c: np.add.reduceat(p.columns[c][rows], starts) for c in self.columns}
        mins = {c: np.minimum.reduceat(p.columns[c][rows], starts) for c in self.columns}
        maxs = {c: np.maximum.reduceat(p.columns[c][rows], starts) for c in self.columns}
        pos = np.searchsorted(self.enc, u_enc)
        hit = pos < len(self.enc)
        hit[hit] = self.enc[pos[hit]] == u_enc[hit]
        at = pos[hit]
        self.count[at] += count[hit]
        for c in self.columns:
            self.sums[c][at] += sums[c][hit]
            np.minimum.at(self.mins[c], at, mins[c][hit])
            np.maximum.at(self.maxs[c], at, maxs[c][hit])
        miss = ~hit
        if miss.any():
            where = pos[miss]
            self.enc = np.insert(self.enc, where, u_enc[miss])
            self.count = np.insert(self.count, where, count[miss])
            for c in self.columns:
                self.sums[c] = np.insert(self.sums[c], where, sums[c][miss])
                self.mins[c] = np.insert(self.mins[c], where, mins[c][miss])
                self.maxs[c] = np.insert(self.maxs[c], where, maxs[c][miss])

    # --------------------------------------------------------------- windows

    def _time(self, index: int) -> int:
        return self.offset + index * self.unit

    def _index_ceil(self, time: int) -> int:
        return -((self.offset - time) // self.unit)

    def _last_end(self, qi: Any) -> Any:
        """The end (slice index) of the latest-ending window that contains slice ``qi``:
        its CUMULATE period's end, the HOP window starting at its slide-aligned start."""
        if self.cumulate:
            return qi - qi % self.size_u + self.size_u
        return qi + self.size_u - qi % self.slide_u

    def _slices(self) -> tuple[IntArray, IntArray]:
        assert self.first_slice is not None
        return self.enc >> _KEY_SHIFT, (self.enc & (2**_KEY_SHIFT - 1)) - _SLICE_BIAS + (
            self.first_slice
        )

    def _windows_ending(self, after: int, upto: int) -> tuple[IntArray, IntArray]:
        """Windows with content whose max timestamp is in ``(after, upto]``: (key, end),
        sorted by end, then key.

        A slice belongs to the windows whose ends (slice index) lie in
        ``[qi + 1, last]`` (``last``: the latest-ending window that holds it),
        HOP's ends ``size`` slices after a slide-aligned start. The union of
        those ranges over a key's slices is the key's windows with content:
        merged per key first (touching ranges join), so every window is
        listed once, not once per slice.
        """
        k, qi = self._slices()
        last = self._last_end(qi) if self.cumulate else qi + self.size_u
        comp_key, first, stop = session_components(k, qi + 1, last + 1)[1:]
        if after > -_TIME_LIMIT:
            first = np.maximum(first, self._index_ceil(after + 2))
        hi = (min(upto, _TIME_LIMIT) + 1 - self.offset) // self.unit
        last = np.minimum(stop - 1, hi)
        if not self.cumulate:
            first = first + (self.size_u - first) % self.slide_u  # the aligned ends
        n = np.where(first <= last, (last - first) // self.slide_u + 1, 0)
        at = np.repeat(np.arange(len(n), dtype=np.int64), n)
        within = np.arange(len(at), dtype=np.int64) - np.repeat(np.cumsum(n) - n, n)
        k, e_i = comp_key[at], first[at] + within * self.slide_u
        order = np.lexsort((k, e_i))
        return k[order], e_i[order]

    def _open(self) -> tuple[IntArray, IntArray]:
        """Every window with content that has not fired: (key, end)."""
        if len(self.enc) == 0:
            return np.zeros(0, np.int64), np.zeros(0, np.int64)
        return self._windows_ending(self.fired_to, MAX_TIME)

    def _partials(self, k: IntArray, e_i: IntArray) -> tuple[list, list, list[list]]:
        """Per window (key, end): its start and end times and each aggregate's slot values
        (the per-window accumulator's: AVG has (sum, count), the others one value)."""
        s_i = (e_i - 1) - (e_i - 1) % self.size_u if self.cumulate else e_i - self.size_u
        lo = np.searchsorted(self.enc, self._encode(k, s_i))
        hi = np.searchsorted(self.enc, self._encode(k, e_i))
        cum = np.concatenate(([0], np.cumsum(self.count)))
        count = (cum[hi] - cum[lo]).tolist()
        done: dict[tuple[str, int], list] = {}

        def reduced(kind: str, c: int) -> list:
            if (kind, c) not in done:
                if kind == "SUM":
                    s = np.concatenate(([0], np.cumsum(self.sums[c])))
                    done[(kind, c)] = (s[hi] - s[lo]).tolist()
                else:
                    ufunc = np.minimum if kind == "MIN" else np.maximum
                    values = self.mins[c] if kind == "MIN" else self.maxs[c]
                    done[(kind, c)] = RangeTable(values, ufunc).query(lo, hi).tolist()
            return done[(kind, c)]

        slots: list[list] = []
        for spec in self.specs:
            kind, c = spec.kind, spec.arg
            if kind in ("COUNT_STAR", "COUNT"):
                slots.append(count)
            elif kind == "AVG":
                assert c is not None
                slots.append(list(zip(reduced("SUM", c), count, strict=True)))
            else:
                assert c is not None
                slots.append(reduced(kind, c))
        starts = (self.offset + s_i * self.unit).tolist()
        ends = (self.offset + e_i * self.unit).tolist()
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
        _, qi = self._slices()
        live = self.offset + self._last_end(qi) * self.unit - 1 > watermark
        if live.all():
            return
        self.enc, self.count = self.enc[live], self.count[live]
        for c in self.columns:
            self.sums[c], self.mins[c], self.maxs[c] = (
                self.sums[c][live],
                self.mins[c][live],
                self.maxs[c][live],
            )

    # --------------------------------------------------------- materialising

    def materialize(self) -> None:
        """The arrays as the per-window path's state (accumulators, timers); hand over to it."""
        op = self.op
        if len(self.enc):
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
            self.enc = np.zeros(0, np.int64)
        op.use_path(self.per_window)

    def settle(self) -> None:
        self.materialize()
