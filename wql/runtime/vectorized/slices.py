"""HOP / CUMULATE slices: the one place WQL cuts overlapping windows into slices.

A HOP of size ``n × slide`` puts every row into ``n`` windows. Flink SQL's
slicing window operator (``SliceAssigners``, ``SlicingWindowOperator``)
keeps one partial per *slice* instead -- the unit every window of the query
is made of: ``gcd(size, slide)`` for HOP, the step for CUMULATE -- and
combines a window's slices when it fires. Two batch forms of the runtime do
that, both through this module:

- ``wql.runtime.columnar.ColumnarWindows``: every key's slices of a HOP /
  CUMULATE at lateness 0, kept across batches, windows fired per watermark
  step (the default batch form there);
- ``wql.runtime.vectorized.time_windows``: one batch's slices, combined into
  the windows the batch touches, whose partials are then folded into the
  operator's per-window accumulators (HOP / CUMULATE with lateness, or
  FIRST_VALUE / LAST_VALUE, where the columnar state does not apply).

:class:`SliceShape` is the geometry (a time's slice, the windows that hold
a slice, a window's first slice); :class:`SliceTable` holds partials per
(key, slice), sorted, and gives any window's partials from prefix sums
(counts, sums) and sparse range tables (minima, maxima).

Which aggregates slices serve is the aggregate table's business
(``wql.runtime.aggregates``): a kind whose partials combine across slices
(``panes``) with one of the partials held here (:data:`TABLE_PARTIALS`), and
only for values it merges exactly in any grouping (``exact_merge``: counts,
integer sums and extrema) -- the exactness policy of docs/runtime.md
("Slices: HOP / CUMULATE").
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from math import gcd
from typing import Any

import numpy as np

from wql.runtime.aggregates import ANY, INTEGRAL, AggregateSpec
from wql.runtime.assigners import CumulateWindows, SlidingWindows
from wql.runtime.vectorized.kernels import IntArray, RangeTable, session_components

#: The partials a :class:`SliceTable` holds (the aggregate table's ``partial`` names).
TABLE_PARTIALS = frozenset({"count", "sum", "min", "max"})
#: (key code, slice) as one int64: ``key << KEY_SHIFT | (slice - first slice + SLICE_BIAS)``.
KEY_SHIFT = 31
SLICE_BIAS = 2**30
#: Times and sizes beyond this stay off the slices (no int64 overflow in the geometry).
TIME_LIMIT = 2**60


def sliced_by_table(specs: Iterable[AggregateSpec]) -> bool:
    """Every aggregate combines over slices from the partials a :class:`SliceTable` holds,
    exactly over integers (the table's users take int64 argument columns only)."""
    return all(
        s.info.panes
        and s.info.partial in TABLE_PARTIALS
        and not {INTEGRAL, ANY}.isdisjoint(s.info.exact_merge)
        for s in specs
    )


@dataclass(frozen=True)
class SliceShape:
    """The slices of a HOP or CUMULATE assigner, in slice indexes (time = offset + i × unit).

    ``size``: a window's length in slices (CUMULATE: the period's);
    ``slide``: between two window ends, in slices (CUMULATE: 1, every step
    ends a window of its period).
    """

    unit: int
    offset: int
    size: int
    slide: int
    cumulate: bool

    @staticmethod
    def of(assigner: Any) -> SliceShape | None:
        """The shape of an event-time HOP or CUMULATE assigner (None: not sliceable)."""
        if type(assigner) is SlidingWindows:
            unit = gcd(assigner.size, assigner.slide)
            return SliceShape(
                unit, assigner.offset, assigner.size // unit, assigner.slide // unit, False
            )
        if type(assigner) is CumulateWindows:
            step = assigner.step
            return SliceShape(step, assigner.offset, assigner.size // step, 1, True)
        return None

    def index(self, ts: Any) -> Any:
        """The slice of each time."""
        return (ts - self.offset) // self.unit

    def time(self, index: Any) -> Any:
        """The start time of each slice (a window end: the time its last slice ends)."""
        return self.offset + index * self.unit

    def index_after(self, time: int) -> int:
        """The first slice starting at or after ``time``."""
        return -((self.offset - time) // self.unit)

    def last_end(self, qi: Any) -> Any:
        """The end (slice index) of the latest-ending window that holds slice ``qi``:
        its CUMULATE period's end, the HOP window starting at its slide-aligned start."""
        if self.cumulate:
            return qi - qi % self.size + self.size
        return qi + self.size - qi % self.slide

    def start(self, end: Any) -> Any:
        """The first slice of the window ending at slice ``end``."""
        if self.cumulate:
            return (end - 1) - (end - 1) % self.size
        return end - self.size

    def windows(
        self,
        key: IntArray,
        qi: IntArray,
        after: int | None = None,
        upto: int | None = None,
        limit: int | None = None,
        by_key: bool = False,
    ) -> tuple[IntArray, IntArray] | None:
        """The windows holding one of the slices ``(key, qi)``: (key, end), sorted by
        end, then key (``by_key``: by key, then end); only those whose max timestamp is
        in ``(after, upto]``.

        A slice belongs to the windows whose ends (slice index) lie in
        ``[qi + 1, last]`` (``last``: the latest-ending window that holds it),
        HOP's ends ``size`` slices after a slide-aligned start. The union of
        those ranges over a key's slices is the key's windows with content:
        merged per key first (touching ranges join), so every window is
        listed once, not once per slice. None: more than ``limit`` windows.
        """
        last = self.last_end(qi) if self.cumulate else qi + self.size
        comp_key, first, stop = session_components(key, qi + 1, last + 1)[1:]
        if after is not None and after > -TIME_LIMIT:
            first = np.maximum(first, self.index_after(after + 2))
        last = stop - 1
        if upto is not None:
            last = np.minimum(last, (min(upto, TIME_LIMIT) + 1 - self.offset) // self.unit)
        if not self.cumulate:
            first = first + (self.size - first) % self.slide  # the aligned ends
        n = np.where(first <= last, (last - first) // self.slide + 1, 0)
        if limit is not None and int(n.sum()) > limit:
            return None
        at = np.repeat(np.arange(len(n), dtype=np.int64), n)
        within = np.arange(len(at), dtype=np.int64) - np.repeat(np.cumsum(n) - n, n)
        k, e_i = comp_key[at], first[at] + within * self.slide
        if by_key:
            # components come by (key, start), apart from each other, ends rising in each
            return k, e_i
        order = np.lexsort((k, e_i))
        return k[order], e_i[order]


def group_slices(enc: IntArray) -> tuple[IntArray, IntArray]:
    """``(order, starts)``: a stable sort of encoded (key, slice) values (rows of one
    slice stay in arrival order) and where each distinct value starts in it."""
    order = np.argsort(enc, kind="stable")
    srt = enc[order]
    new = np.ones(len(srt), dtype=bool)
    new[1:] = srt[1:] != srt[:-1]
    return order, np.flatnonzero(new)


class SliceTable:
    """Partials per (key, slice), sorted by (key code, slice): the row count and, per
    argument column, the sum, minimum or maximum the aggregates ask for."""

    def __init__(
        self,
        shape: SliceShape,
        first_slice: int,
        sums: Iterable[int] = (),
        mins: Iterable[int] = (),
        maxs: Iterable[int] = (),
    ) -> None:
        self.shape = shape
        #: The slice encoded as ``SLICE_BIAS`` (slices are stored relative to it).
        self.first_slice = first_slice
        self.enc = np.zeros(0, np.int64)
        self.count = np.zeros(0, np.int64)
        self.sums: dict[int, np.ndarray] = {c: np.zeros(0, np.int64) for c in sums}
        self.mins: dict[int, np.ndarray] = {c: np.zeros(0, np.int64) for c in mins}
        self.maxs: dict[int, np.ndarray] = {c: np.zeros(0, np.int64) for c in maxs}

    def fits(self, qi: IntArray, keys: int) -> bool:
        """Whether slices ``qi`` (and the windows holding them) and ``keys`` key codes
        can be encoded (relative to the table's first slice)."""
        if keys >= 2**KEY_SHIFT:
            return False
        if len(qi) == 0:
            return True
        first = self.first_slice
        span = max(abs(int(qi.min()) - first), abs(int(qi.max()) - first)) + self.shape.size
        return span < SLICE_BIAS

    def encode(self, key: IntArray, qi: IntArray) -> IntArray:
        return (key << KEY_SHIFT) | (qi - self.first_slice + SLICE_BIAS)

    def slices(self) -> tuple[IntArray, IntArray]:
        """Every held (key code, slice)."""
        return self.enc >> KEY_SHIFT, (self.enc & (2**KEY_SHIFT - 1)) - SLICE_BIAS + (
            self.first_slice
        )

    def add(
        self,
        key: IntArray,
        qi: IntArray,
        sums: Mapping[int, np.ndarray] = {},
        extrema: Mapping[int, np.ndarray] = {},
    ) -> tuple[IntArray, IntArray]:
        """Fold rows into the table: their (key code, slice), and per column the values
        its sums (``sums``) and minima / maxima (``extrema``) take. Returns the rows'
        grouping (``group_slices`` of their encoded slices)."""
        enc = self.encode(key, qi)
        order, starts = group_slices(enc)
        if len(enc) == 0:
            return order, starts
        u_enc = enc[order][starts]
        count = np.diff(np.append(starts, len(enc)))
        add_sums = {c: np.add.reduceat(sums[c][order], starts) for c in self.sums}
        add_mins = {c: np.minimum.reduceat(extrema[c][order], starts) for c in self.mins}
        add_maxs = {c: np.maximum.reduceat(extrema[c][order], starts) for c in self.maxs}
        if len(self.enc) == 0:
            # the first rows: the table is theirs (and takes their columns' types)
            self.enc, self.count = u_enc, count
            self.sums, self.mins, self.maxs = add_sums, add_mins, add_maxs
            return order, starts
        pos = np.searchsorted(self.enc, u_enc)
        hit = pos < len(self.enc)
        hit[hit] = self.enc[pos[hit]] == u_enc[hit]
        if hit.any():
            at = pos[hit]
            self.count[at] += count[hit]
            for c in self.sums:
                self.sums[c][at] += add_sums[c][hit]
            for c in self.mins:
                np.minimum.at(self.mins[c], at, add_mins[c][hit])
            for c in self.maxs:
                np.maximum.at(self.maxs[c], at, add_maxs[c][hit])
        miss = ~hit
        if miss.any():
            where = pos[miss]
            self.enc = np.insert(self.enc, where, u_enc[miss])
            self.count = np.insert(self.count, where, count[miss])
            for target, new in (
                (self.sums, add_sums),
                (self.mins, add_mins),
                (self.maxs, add_maxs),
            ):
                for c in target:
                    target[c] = np.insert(target[c], where, new[c][miss])
        return order, starts

    def keep(self, live: np.ndarray) -> None:
        """Keep only the slices where ``live`` is set."""
        self.enc, self.count = self.enc[live], self.count[live]
        for target in (self.sums, self.mins, self.maxs):
            for c in target:
                target[c] = target[c][live]

    def ranges(self, key: IntArray, end: IntArray) -> tuple[IntArray, IntArray]:
        """Per window (key code, end slice): its slices' positions ``[lo, hi)`` in the table."""
        start = self.shape.start(end)
        lo = np.searchsorted(self.enc, self.encode(key, start))
        hi = np.searchsorted(self.enc, self.encode(key, end))
        return lo, hi

    def window_count(self, lo: IntArray, hi: IntArray) -> IntArray:
        cum = np.concatenate(([0], np.cumsum(self.count)))
        return cum[hi] - cum[lo]

    def window_sum(self, column: int, lo: IntArray, hi: IntArray) -> IntArray:
        cum = np.concatenate(([0], np.cumsum(self.sums[column])))
        return cum[hi] - cum[lo]

    def window_extremum(self, partial: str, column: int, lo: IntArray, hi: IntArray) -> np.ndarray:
        """``partial`` ("min" or "max") of ``column`` over each window's slices (non-empty)."""
        if partial == "min":
            return RangeTable(self.mins[column], np.minimum).query(lo, hi)
        return RangeTable(self.maxs[column], np.maximum).query(lo, hi)
