"""A brute-force reference for the operator engine, written without the runtime.

It answers one question: given rows in replay order, the bounded
out-of-orderness delay and a query shape (window, default trigger,
aggregates, allowed lateness, late output), which rows must the
``WindowOperator`` emit, which rows go to the late output and how many are
dropped?  It never imports ``wql.runtime``; it keeps every row of every
window and recomputes aggregates from scratch at each firing, so it is slow
and obviously correct rather than fast.

Two independent derivations are provided and cross-checked by the tests:

``in_order_reference``
    Closed form for input whose timestamps never decrease in replay order.
    Every time window then fires exactly once, ``ON_TIME``, with every row
    assigned to it (a row can never be late, and the watermark can only pass
    a window's end after its last row).  Sessions are cut where the gap
    says so, plus the one global-watermark effect that survives in-order
    input: with delay 0 a row at exactly a session's end sees that session
    already fired (its ``window_time`` is the watermark); at lateness 0 the
    session is also cleaned, so the row starts a new session; with lateness
    the row merges into it and the session fires again later.

``simulate_reference``
    The general case (out-of-order rows, allowed lateness, late output),
    derived per window from the rules in docs/language.md "Lateness and late data" and
    ``docs/architecture.md`` "Pane timing": a window is skipped when
    ``window_time + lateness <= watermark``; an accepted row whose window's
    end the watermark already passed fires that window at once (``LATE``,
    full accumulated contents); otherwise the window fires ``ON_TIME`` when
    the watermark first reaches ``window_time``, and is forgotten when the
    watermark reaches ``window_time + lateness``.  Sessions follow the same
    rules on merged windows: a new row's window merges with every live
    session it overlaps or touches, a merge result never fired keeps one
    pending timer, and the merged pane index is the largest of the merged
    windows'.

Emitted rows use the operator's drain format
``(key, window_start, window_end, window_time, pane_index, pane_timing,
timestamp, *aggregates)``; count windows have ``None`` window bounds and the
timestamp ``MAX_TIME`` (a ``GlobalWindow``'s ``maxTimestamp``).  Outputs are
compared as multisets: firing order across keys and windows is not part of
the contract.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Hashable, Sequence
from dataclasses import dataclass, field
from typing import Any

MIN_TIME = -(2**63)
MAX_TIME = 2**63 - 1

Row = tuple[Hashable, int, tuple[Any, ...]]
"""One input row in replay order: ``(key, timestamp, values)``."""


# --------------------------------------------------------------------------- query shape


@dataclass(frozen=True)
class Tumble:
    size: int
    offset: int = 0


@dataclass(frozen=True)
class Hop:
    slide: int
    size: int
    offset: int = 0


@dataclass(frozen=True)
class Cumulate:
    step: int
    size: int
    offset: int = 0


@dataclass(frozen=True)
class Session:
    gap: int


@dataclass(frozen=True)
class DynamicSession:
    """Session whose gap (ms, > 0) is ``values[gap_index]`` of each row."""

    gap_index: int


@dataclass(frozen=True)
class CountWindow:
    size: int
    slide: int | None = None


Window = Tumble | Hop | Cumulate | Session | DynamicSession | CountWindow

AGG_KINDS = (
    "count_star",
    "count",
    "sum",
    "min",
    "max",
    "avg",
    "count_distinct",
    "first_value",
    "last_value",
    "collect_list",
)


@dataclass(frozen=True)
class Agg:
    """An aggregate over ``values[arg]`` (``arg`` is ``None`` for ``count_star``)."""

    kind: str
    arg: int | None = None

    def __post_init__(self) -> None:
        if self.kind not in AGG_KINDS:
            raise ValueError(f"unknown aggregate {self.kind!r}")
        if (self.kind == "count_star") != (self.arg is None):
            raise ValueError("count_star takes no argument, every other aggregate one")


@dataclass(frozen=True)
class RefQuery:
    window: Window
    aggs: tuple[Agg, ...]
    lateness: int = 0
    late_output: bool = True


#: Drop reasons, as the runtime counts them (``counters.dropped``).
DROP_LATE = "late"
DROP_INVALID_GAP = "invalid session gap"
DROP_IN_NO_FIRING = "in no firing"
#: A row that no window accepted although it is not late: only a HOP whose
#: size is below its slide leaves such gaps (Flink silently loses the row).
DROP_LATE_WINDOW = "late window"


@dataclass
class RefResult:
    emitted: list[tuple[Any, ...]] = field(default_factory=list)
    late: list[Row] = field(default_factory=list)
    dropped: dict[str, int] = field(default_factory=dict)

    def drop(self, reason: str) -> None:
        self.dropped[reason] = self.dropped.get(reason, 0) + 1


# --------------------------------------------------------------------------- shared pieces


def replay_watermarks(timestamps: Sequence[int], delay: int) -> list[int]:
    """The watermark each row sees: ``max(ts before it) - delay - 1`` (docs/architecture.md)."""
    out: list[int] = []
    high: int | None = None
    for ts in timestamps:
        out.append(MIN_TIME if high is None else max(MIN_TIME, high - delay - 1))
        high = ts if high is None else max(high, ts)
    return out


def time_windows(window: Window, ts: int) -> list[tuple[int, int]]:
    """The ``[start, end)`` windows a non-merging time assigner gives ``ts``.

    Written from docs/language.md's definitions (floor modulo, so negative times
    work), not from Flink's loops.
    """
    if isinstance(window, Tumble):
        start = ts - (ts - window.offset) % window.size
        return [(start, start + window.size)]
    if isinstance(window, Hop):
        # every start = offset + k*slide with start <= ts < start + size
        out = []
        last = ts - (ts - window.offset) % window.slide
        start = last
        while start > ts - window.size:
            out.append((start, start + window.size))
            start -= window.slide
        return out
    if isinstance(window, Cumulate):
        base = ts - (ts - window.offset) % window.size
        return [
            (base, base + k * window.step)
            for k in range(1, window.size // window.step + 1)
            if base + k * window.step > ts
        ]
    raise TypeError(f"{type(window).__name__} is not a non-merging time window")


def _cleanup_time(window_time: int, lateness: int) -> int:
    return min(MAX_TIME, window_time + lateness)


def _gap(window: Session | DynamicSession, values: tuple[Any, ...]) -> int | None:
    """The row's session gap, or ``None`` when it is missing or not > 0 (row dropped)."""
    if isinstance(window, Session):
        return window.gap
    gap = values[window.gap_index]
    if gap is None or isinstance(gap, bool) or int(gap) <= 0:
        return None
    return int(gap)


@dataclass(frozen=True)
class _Contents:
    """Rows of one window as ``(timestamp, arrival, values)`` in arrival order."""

    rows: tuple[tuple[int, int, tuple[Any, ...]], ...]


def aggregate(aggs: Sequence[Agg], rows: Sequence[tuple[int, int, tuple[Any, ...]]]) -> tuple:
    """Every aggregate over ``rows`` (``(timestamp, arrival, values)``), from scratch.

    SQL null handling: ``NULL`` arguments are ignored; an aggregate with no
    non-null input is ``NULL`` except the counts (0) and ``collect_list``
    (empty list).  ``first_value``/``last_value`` pick by event time, then
    arrival, over non-null arguments; ``collect_list`` lists the non-null
    arguments in (event time, arrival) order, the order the runtime
    documents (``wql.runtime.aggregates``), so it survives session merges.
    """
    out: list[Any] = []
    for agg in aggs:
        if agg.kind == "count_star":
            out.append(len(rows))
            continue
        assert agg.arg is not None
        present = [(ts, seq, v[agg.arg]) for ts, seq, v in rows if v[agg.arg] is not None]
        present_in_arrival = [x for _, _, x in sorted(present, key=lambda r: r[1])]
        if agg.kind == "count":
            out.append(len(present))
        elif agg.kind == "count_distinct":
            out.append(len(set(present_in_arrival)))
        elif agg.kind == "collect_list":
            out.append([x for _, _, x in sorted(present, key=lambda r: (r[0], r[1]))])
        elif not present:
            out.append(None)
        elif agg.kind == "sum":
            total = present_in_arrival[0]
            for x in present_in_arrival[1:]:
                total = total + x
            out.append(total)
        elif agg.kind == "min":
            out.append(min(present_in_arrival))
        elif agg.kind == "max":
            out.append(max(present_in_arrival))
        elif agg.kind == "avg":
            total = present_in_arrival[0]
            for x in present_in_arrival[1:]:
                total = total + x
            out.append(total / len(present_in_arrival))
        elif agg.kind == "first_value":
            out.append(min(present, key=lambda r: (r[0], r[1]))[2])
        elif agg.kind == "last_value":
            out.append(max(present, key=lambda r: (r[0], r[1]))[2])
        else:  # pragma: no cover - Agg.__post_init__ rejects other kinds
            raise AssertionError(agg.kind)
    return tuple(out)


def _time_row(
    query: RefQuery,
    key: Hashable,
    start: int,
    end: int,
    pane: int,
    timing: str,
    rows: Sequence[tuple[int, int, tuple[Any, ...]]],
) -> tuple:
    return (key, start, end, end - 1, pane, timing, end - 1, *aggregate(query.aggs, rows))


def _count_windows(query: RefQuery, rows: Sequence[Row]) -> RefResult:
    """Count windows have no time: the same answer in order or not.

    Tumbling ``COUNT_WINDOW(n)`` is ``PurgingTrigger(CountTrigger(n))``: every
    n-th row of a key fires the n rows since the last purge.  Sliding
    ``COUNT_WINDOW(n, s)`` is ``CountTrigger(s)`` + ``CountEvictor(n)``: every
    s-th row fires the last n rows.  A trailing partial count never fires.
    The firing happens on an element while the watermark is below the
    ``GlobalWindow``'s end, hence ``EARLY``.
    """
    window = query.window
    assert isinstance(window, CountWindow)
    per_key: dict[Hashable, list[tuple[int, int, tuple[Any, ...]]]] = defaultdict(list)
    result = RefResult()
    in_a_firing: set[int] = set()
    for seq, (key, ts, values) in enumerate(rows):
        seen = per_key[key]
        seen.append((ts, seq, values))
        n = len(seen)
        if window.slide is None:
            if n % window.size == 0:
                fired = seen[n - window.size :]
                pane = n // window.size - 1
            else:
                continue
        else:
            if n % window.slide == 0:
                fired = seen[max(0, n - window.size) :]
                pane = n // window.slide - 1
            else:
                continue
        in_a_firing.update(s for _, s, _ in fired)
        result.emitted.append(
            (key, None, None, None, pane, "EARLY", MAX_TIME, *aggregate(query.aggs, fired))
        )
    # Rows no firing included: the trailing partial count, and for sliding
    # count windows with slide > size the rows evicted before any firing.
    for _ in range(len(rows) - len(in_a_firing)):
        result.drop(DROP_IN_NO_FIRING)
    return result


# --------------------------------------------------------------------------- in-order closed form


def in_order_reference(query: RefQuery, rows: Sequence[Row], delay: int) -> RefResult:
    """Expected output for input whose timestamps never decrease (see module doc)."""
    if isinstance(query.window, CountWindow):
        return _count_windows(query, rows)
    timestamps = [ts for _, ts, _ in rows]
    if any(b < a for a, b in zip(timestamps, timestamps[1:], strict=False)):
        raise ValueError("in_order_reference needs non-decreasing timestamps")
    result = RefResult()
    window = query.window
    if isinstance(window, Tumble | Hop | Cumulate):
        groups: dict[tuple[Hashable, int, int], list] = defaultdict(list)
        for seq, (key, ts, values) in enumerate(rows):
            assigned = time_windows(window, ts)
            if not assigned:
                result.drop(DROP_LATE_WINDOW)
            for start, end in assigned:
                groups[(key, start, end)].append((ts, seq, values))
        for (key, start, end), contents in groups.items():
            result.emitted.append(_time_row(query, key, start, end, 0, "ON_TIME", contents))
        return result

    assert isinstance(window, Session | DynamicSession)
    wms = replay_watermarks(timestamps, delay)
    lateness = query.lateness
    # key -> [start, end, rows, panes already emitted]
    open_sessions: dict[Hashable, list] = {}
    for seq, (key, ts, values) in enumerate(rows):
        wm = wms[seq]
        gap = _gap(window, values)
        if gap is None:
            result.drop(DROP_INVALID_GAP)
            continue
        current = open_sessions.get(key)
        if current is not None:
            start, end, contents, panes = current
            cleaned = wm >= _cleanup_time(end - 1, lateness)
            if ts > end or cleaned:
                result.emitted.append(_time_row(query, key, start, end, panes, "ON_TIME", contents))
                current = None
            elif wm >= end - 1:
                # Fired, not cleaned (lateness > 0): that firing happened with
                # the old extent; the row extends the session, which fires again.
                result.emitted.append(
                    _time_row(query, key, start, end, panes, "ON_TIME", list(contents))
                )
                current[3] = panes + 1
        if current is None:
            open_sessions[key] = [ts, ts + gap, [(ts, seq, values)], 0]
        else:
            current[1] = max(current[1], ts + gap)
            current[2].append((ts, seq, values))
    for key, (start, end, contents, panes) in open_sessions.items():
        result.emitted.append(_time_row(query, key, start, end, panes, "ON_TIME", contents))
    return result


# --------------------------------------------------------------------------- general simulation


@dataclass
class _Win:
    start: int
    end: int
    rows: list[tuple[int, int, tuple[Any, ...]]]
    fired: int = 0
    pending: bool = False  # the trigger's event-time timer at window_time is set


def simulate_reference(
    query: RefQuery,
    rows: Sequence[Row],
    delay: int = 0,
    watermarks: Sequence[int] | None = None,
) -> RefResult:
    """Expected output for any replay order (see module doc for the rules).

    ``watermarks`` overrides the replay watermarks (one per row, the
    watermark the row sees), e.g. to replay a Flink test vector with
    explicit watermark events; end of input still raises it to ``MAX_TIME``.
    """
    if isinstance(query.window, CountWindow):
        return _count_windows(query, rows)
    window = query.window
    lateness = query.lateness
    if watermarks is None:
        wms = replay_watermarks([ts for _, ts, _ in rows], delay)
    else:
        if len(watermarks) != len(rows):
            raise ValueError("one watermark per row")
        wms = list(watermarks)
    result = RefResult()
    merging = isinstance(window, Session | DynamicSession)
    # key -> list of live windows (for sessions: pairwise non-touching)
    live: dict[Hashable, list[_Win]] = defaultdict(list)

    def fire(key: Hashable, w: _Win, timing: str) -> None:
        result.emitted.append(_time_row(query, key, w.start, w.end, w.fired, timing, w.rows))
        w.fired += 1

    def advance(wm: int) -> None:
        # Per window the trigger timer (window_time) fires before cleanup
        # (window_time + lateness); windows never interact, so the order
        # across windows does not change the multiset of outputs.
        for key, wins in live.items():
            keep = []
            for w in wins:
                if w.pending and w.end - 1 <= wm:
                    fire(key, w, "ON_TIME")
                    w.pending = False
                if _cleanup_time(w.end - 1, lateness) > wm:
                    keep.append(w)
            wins[:] = keep

    current_wm = MIN_TIME
    for seq, (key, ts, values) in enumerate(rows):
        if wms[seq] > current_wm:
            current_wm = wms[seq]
            advance(current_wm)
        wm = current_wm
        entry = (ts, seq, values)
        accepted = False
        wins = live[key]
        if merging:
            assert isinstance(window, Session | DynamicSession)
            gap = _gap(window, values)
            if gap is None:
                result.drop(DROP_INVALID_GAP)
                continue
            start, end = ts, ts + gap
            touching = [w for w in wins if w.start <= end and w.end >= start]
            if not touching and _cleanup_time(end - 1, lateness) <= wm:
                targets: list[_Win] = []
            elif not touching:
                w = _Win(start, end, [])
                wins.append(w)
                targets = [w]
            else:
                merged = _Win(
                    min([start] + [w.start for w in touching]),
                    max([end] + [w.end for w in touching]),
                    sorted((r for w in touching for r in w.rows), key=lambda r: r[1]),
                    max(w.fired for w in touching),
                )
                # A live window's cleanup is above the watermark, so a merge
                # result (at least as long) is never late.
                assert _cleanup_time(merged.end - 1, lateness) > wm
                wins[:] = [w for w in wins if w not in touching] + [merged]
                targets = [merged]
        else:
            targets = []
            for start, end in time_windows(window, ts):
                if _cleanup_time(end - 1, lateness) <= wm:
                    continue  # window late: skipped for this row
                found = next((w for w in wins if w.start == start and w.end == end), None)
                if found is None:
                    found = _Win(start, end, [])
                    wins.append(found)
                targets.append(found)
        for w in targets:
            accepted = True
            w.rows.append(entry)
            if w.end - 1 <= wm:
                w.pending = False
                fire(key, w, "LATE")
            else:
                w.pending = True
        if not accepted:
            if ts + lateness > wm:
                result.drop(DROP_LATE_WINDOW)
            elif query.late_output:
                result.late.append((key, ts, values))
            else:
                result.drop(DROP_LATE)
    if current_wm < MAX_TIME:
        advance(MAX_TIME)
    return result
