"""Sessions under ``[PURGING] COUNT(n)`` (any evictor) as batches: firings at row counts.

The per-row loop adds a row to its session, counts it (``CountTrigger``:
the count moves to the session's cover when the session grows, and FIREs
and resets at ``n``), emits on FIRE (the evictor runs on the session's
buffer) and moves the cleanup timer to the new cover. When every key's rows
in the batch come in non-decreasing event time, ahead of the watermark they
see (``sessions.rows_alone`` cut the others out), and a key's first row does
not start before its latest session, every row extends the key's latest
session or opens a new one after it, never bridges two: the sessions are
runs of the key's rows, and a session fires at every n-th row counted from
its count at the batch start. This module walks each session's run once:
it adds the rows up to each firing to the session's buffer or accumulator
and emits the firing through the operator (``emit``: pane index, the
evictor, the rows the operator follows for its "in no firing" counter), then
leaves the cover, the count and one cleanup timer as the loop would. The
rows of one firing are exactly the loop's, so are the aggregates over them;
emitted rows come key by key (a multiset equal to the loop's, the
vectorized path's ordering contract). Cleanup at the watermark is left to
the operator's timers (``advance_watermark`` at the batch's end): no row of
the batch reaches a session whose cleanup is due before it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from wql.runtime.assigners import DROP_IN_NO_FIRING, DROP_INVALID_GAP, DROP_MISSING_TIMESTAMP
from wql.runtime.config import EARLY, LATE
from wql.runtime.evictors import CountEvictor
from wql.runtime.vectorized.kernels import IntArray
from wql.runtime.vectorized.prepare import Prepared, count_sessions_shape
from wql.runtime.vectorized.sessions import session_rows, ties
from wql.runtime.vectorized.time_windows import Cut
from wql.runtime.windows import MAX_TIME, TimeWindow

if TYPE_CHECKING:
    from wql.runtime.state import KeyState
    from wql.runtime.window_operator import Key, WindowOperator


def process(op: WindowOperator, p: Prepared) -> bool | Cut:
    """Process the batch (``True``), or leave the operator untouched: ``False`` (the loop
    runs) or a :class:`Cut` at the first row that must go alone."""
    shape = count_sessions_shape(op.config)
    got = session_rows(op, p)
    if shape is None or got is None:
        return False
    count, purging = shape
    rows, gaps, invalid_gap = got
    ts, wm = p.ts[rows], p.wm[rows]
    if (ts <= wm).any() or ties(op, p, rows, gaps).any():
        return False  # rows_alone cuts these out before
    codes = p.key_codes[rows]
    order = np.argsort(codes, kind="stable")  # per key, arrival order
    k_s, t_s = codes[order], ts[order]
    back = (k_s[1:] == k_s[:-1]) & (t_s[1:] < t_s[:-1])
    if back.any():
        return Cut(int(rows[order[1:][back]].min()))
    firsts = np.flatnonzero(np.concatenate(([True], k_s[1:] != k_s[:-1])))[: len(k_s)]
    latest: dict[int, TimeWindow] = {}
    early: list[int] = []
    for i in firsts.tolist():
        ks = op.key_states.get(p.uniques[int(k_s[i])])
        if ks is not None and ks.merging is not None and ks.merging.mapping:
            last = max(ks.merging.mapping, key=_start)
            if t_s[i] < last.start:
                early.append(int(rows[order[i]]))  # may touch an older session or bridge
            latest[int(k_s[i])] = last
    if early:
        return Cut(min(early))

    # -- from here on the batch is processed (nothing above changed the operator)
    seq0 = op.admit(p.n)
    if p.n - int(p.valid.sum()):
        op.drop(DROP_MISSING_TIMESTAMP, p.n - int(p.valid.sum()))
    if len(invalid_gap):
        op.drop(DROP_INVALID_GAP, len(invalid_gap))
    columns = [c.tolist() if isinstance(c, np.ndarray) else list(c) for c in p.batch.columns]
    name = "0.count" if purging else "count"
    runs = _Runs(op, p, columns, seq0, name, count, purging)
    bounds = [*firsts.tolist(), len(order)]
    for a, b in zip(bounds[:-1], bounds[1:], strict=True):
        at = rows[order[a:b]]
        runs.key(int(k_s[a]), at, ts[order[a:b]], gaps[order[a:b]], latest.get(int(k_s[a])))
    op.advance_watermark(p.wm_last)
    return True


def _start(window: TimeWindow) -> int:
    return window.start


class _Runs:
    """One batch's sessions, key by key (see the module doc)."""

    def __init__(
        self,
        op: WindowOperator,
        p: Prepared,
        columns: list[list],
        seq0: int,
        name: str,
        count: int,
        purging: bool,
    ) -> None:
        self.op, self.p, self.seq0 = op, p, seq0
        self.name, self.count, self.purging = name, count, purging
        evictor = op.config.evictor
        self.evicting = evictor is not None
        # EVICT COUNT(k) BEFORE (not purging): a firing uses the last k rows of its
        # buffer, so after a firing only those rows need to exist as rows
        self.keep = (
            evictor.count
            if type(evictor) is CountEvictor and not evictor.after and not purging
            else None
        )
        self.lateness = op.config.allowed_lateness
        self.values = list(zip(*columns, strict=True)) if columns else [()] * p.n

    def key(
        self, code: int, at: IntArray, ts: IntArray, gaps: IntArray, last: TimeWindow | None
    ) -> None:
        """The rows ``at`` (batch indices, arrival order) of one key."""
        op = self.op
        key = self.p.uniques[code]
        ks = op.key_states.get(key)
        if ks is None:
            ks = op.new_key_state(key)
        ends = ts + gaps
        # a row opens a session when it starts after everything before it ended
        # (rows in event-time order: it cannot reach back to an earlier session)
        reach = np.maximum.accumulate(ends if last is None else np.maximum(ends, last.end))
        opens = np.ones(len(ts), dtype=bool)
        opens[1:] = ts[1:] > reach[:-1]
        opens[0] = last is None or int(ts[0]) > last.end
        cuts = [*np.flatnonzero(opens).tolist(), len(ts)]
        if cuts[0] != 0:
            self.session(key, ks, at[: cuts[0]], ts[: cuts[0]], ends[: cuts[0]], last)
        for a, b in zip(cuts[:-1], cuts[1:], strict=True):
            self.session(key, ks, at[a:b], ts[a:b], ends[a:b], None)

    def session(
        self,
        key: Key,
        ks: KeyState,
        at: IntArray,
        ts: IntArray,
        ends: IntArray,
        before: TimeWindow | None,
    ) -> None:
        """One session's run: the rows ``at`` extend ``before`` (None: they open it)."""
        op = self.op
        assert ks.merging is not None
        mapping = ks.merging.mapping
        trigger = ks.trigger
        contents = ks.contents
        name, n = self.name, self.count
        if before is not None:
            start = before.start
            sw = mapping[before]
            counted = trigger.get((before, name), 0)
            reach = np.maximum.accumulate(np.maximum(ends, before.end)).tolist()
        else:
            start = int(ts[0])
            sw = TimeWindow(start, int(ends[0]))
            counted = 0
            reach = np.maximum.accumulate(ends).tolist()
        m = len(at)
        at_l = at.tolist()
        ts_l = ts.tolist()
        wm_l = self.p.wm_raw[at].tolist()
        seq0 = self.seq0
        values = self.values
        agg = op.aggregator
        keep = self.keep
        done = 0
        fire = max(1, n - counted)  # CountTrigger fires when the count reaches n
        while True:
            upto = min(fire, m)
            if keep is not None and fire <= m and upto - done > keep:
                # The loop adds the chunk to the buffer and evicts all but its last
                # `keep` rows before the firing uses them: the chunk's other rows end
                # in no firing, and are only counted (the buffer's earlier rows, which
                # the evictor drops as well, go through emit as the loop's do).
                op.drop(DROP_IN_NO_FIRING, upto - done - keep)
                done = upto - keep
            chunk = range(done, upto)
            seqs = [seq0 + at_l[i] for i in chunk]
            acc = contents.get(sw)
            if not seqs:
                pass  # nothing to add (the run ended at a firing)
            elif self.evicting:
                rows = [(ts_l[i], seq0 + at_l[i], values[at_l[i]]) for i in chunk]
                if acc is None:
                    contents[sw] = rows
                else:
                    acc.extend(rows)
            else:
                if acc is None:
                    acc = contents[sw] = agg.create()
                add = agg.add
                for i in chunk:
                    add(acc, ts_l[i], seq0 + at_l[i], values[at_l[i]])
            op.track_rows(key, sw, seqs)
            done = upto
            if fire > m:
                break
            window = TimeWindow(start, reach[fire - 1])
            timing = EARLY if wm_l[fire - 1] < window.end - 1 else LATE
            op.emit(key, ks, window, sw, contents[sw], timing)
            if self.purging:
                op.purge(key, ks, sw)
            fire += n
        last_fire = fire - n
        left = m - last_fire if last_fire >= 1 else counted + m
        final = TimeWindow(start, reach[-1])
        if before is not None and before != final:
            trigger.pop((before, name), None)
            del mapping[before]
            cleanup = before.end - 1 + self.lateness
            if cleanup < MAX_TIME:
                op.timer_service.delete_event_time_timer(key, before, cleanup)
        if left:
            trigger[(final, name)] = left
        else:
            trigger.pop((final, name), None)
        mapping[final] = sw
        cleanup = final.end - 1 + self.lateness
        if cleanup < MAX_TIME:
            op.timer_service.register_event_time_timer(key, final, cleanup)
