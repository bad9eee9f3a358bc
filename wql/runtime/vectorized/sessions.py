"""Plans for session batches (static or dynamic gaps): the sessions a batch forms.

See :func:`plan_sessions` for why the batch form equals the per-row loop,
and :func:`rows_alone` for the rows it cannot take (the package's driver
hands those to the per-row loop one by one and plans the rows between them).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from wql.runtime.assigners import DynamicSessionWindows, SessionWindows
from wql.runtime.vectorized.kernels import BoolArray, IntArray, group_rows, session_components
from wql.runtime.vectorized.prepare import INT_EXACT, TIME_LIMIT, Prepared
from wql.runtime.vectorized.time_windows import Cut, Groups, Plan, columns_ok, sum_columns
from wql.runtime.windows import TimeWindow

if TYPE_CHECKING:
    from wql.runtime.window_operator import WindowOperator


def session_rows(op: WindowOperator, p: Prepared) -> tuple[IntArray, IntArray, IntArray] | None:
    """(rows with a window, their gaps, rows dropped for an invalid dynamic gap)."""
    a = op.config.assigner
    valid_rows = np.flatnonzero(p.valid)
    if isinstance(a, DynamicSessionWindows):
        gap_all = p.columns[a.gap_index]
        ok_gap = gap_all[valid_rows] > 0
        rows = valid_rows[ok_gap]
        gaps = gap_all[rows]
        if len(gaps) and int(gaps.max()) >= TIME_LIMIT:
            return None
        return rows, gaps, valid_rows[~ok_gap]
    assert isinstance(a, SessionWindows)
    return valid_rows, np.full(len(valid_rows), a.gap, dtype=np.int64), np.zeros(0, np.int64)


def _existing_sessions(
    op: WindowOperator, p: Prepared, codes: IntArray
) -> tuple[list[int], list[TimeWindow]]:
    """The in-flight sessions of the keys ``codes``: (key code, window) pairs."""
    ex_key: list[int] = []
    ex_win: list[TimeWindow] = []
    for code in np.unique(codes).tolist():
        ks = op.key_states.get(p.uniques[code])
        if ks is not None and ks.merging is not None:
            for w in ks.merging.mapping:
                ex_key.append(code)
                ex_win.append(w)
    return ex_key, ex_win


def rows_alone(op: WindowOperator, p: Prepared) -> BoolArray:
    """Rows :func:`plan_sessions` cannot take; the per-row loop must, one at a time.

    A row at or behind the watermark it sees (``ts <= wm``) may touch a
    session that fired and is gone, and a row at ``wm + 1`` may meet a
    session ending there (it fired at ``wm``): for such a row only the loop
    knows which sessions are still in flight. The tie test is conservative:
    every end a session can have during the batch is the end of an existing
    session or of a row's window, and all of those are considered.
    """
    alone = np.zeros(p.n, dtype=bool)
    got = session_rows(op, p)
    if got is None:
        return alone
    rows, gaps, _ = got
    alone[rows[p.ts[rows] <= p.wm[rows]]] = True
    alone[rows[ties(op, p, rows, gaps)]] = True
    return alone


def ties(op: WindowOperator, p: Prepared, rows: IntArray, gaps: IntArray) -> BoolArray:
    """Per row of ``rows``: at ``wm + 1``, where a session (existing, or of any row's
    window) may end, so that it fired (or was cleaned up) at the watermark the row sees."""
    ts, wm = p.ts[rows], p.wm[rows]
    tie = ts == wm + 1
    if not tie.any():
        return tie
    keys = p.key_codes[rows]
    ex_key, ex_win = _existing_sessions(op, p, keys)
    m_key = np.concatenate((np.array(ex_key, np.int64), keys))
    m_end = np.concatenate((np.array([w.end for w in ex_win], np.int64), ts + gaps))
    tie[tie] = _ends_at(m_key, m_end, keys[tie], ts[tie])
    return tie


def plan_sessions(op: WindowOperator, p: Prepared) -> Plan | Cut | None:
    """Sessions formed by the batch, merged with the sessions that existed before it.

    Exactness argument.  A session D that row i touches (intersects
    ``[ts, ts + gap)``) has ``D.end >= ts``, so it has not fired when
    ``ts >= wm + 2``; with ``ts == wm + 1`` it has fired exactly when some
    member interval ends at ``ts`` (then the loop cleans it up and starts a
    new session, or merges into a fired session): such batches are
    declined, as are rows with ``ts <= wm``.  Then no session ever fires
    before its last merge, none is cleaned up while a row could still touch
    it, and the final sessions are the connected components of the existing
    sessions and the rows' windows.  Float sums additionally need the merge
    order of the loop: each key's rows in non-decreasing time with at most
    one existing session starting before them makes every row extend one
    chain, so the sum is the left-to-right sum from that session's value.

    A batch that joins two sessions existing before it is not planned: the
    loop folds their states at the bridging row. The result is then a
    :class:`Cut` at the first row of such a group (no earlier row belongs
    to one, so the rows before it plan), which the loop takes alone.
    """
    got = session_rows(op, p)
    if got is None:
        return None
    rows, gaps, invalid_gap = got
    ts, wm = p.ts[rows], p.wm[rows]
    if (ts <= wm).any():
        return None
    if not columns_ok(op, p, rows):
        return None
    # the sessions of the batch's keys that exist before it
    ex_key, ex_win = _existing_sessions(op, p, p.key_codes[rows])
    n_ex = len(ex_win)
    m_key = np.concatenate((np.array(ex_key, np.int64), p.key_codes[rows]))
    m_start = np.concatenate((np.array([w.start for w in ex_win], np.int64), ts))
    m_end = np.concatenate((np.array([w.end for w in ex_win], np.int64), ts + gaps))
    tie = ts == wm + 1
    if tie.any() and _ends_at(m_key, m_end, p.key_codes[rows][tie], ts[tie]).any():
        return None
    comp, c_key, c_start, c_end = session_components(m_key, m_start, m_end)
    n_comp = len(c_key)
    ex_per_comp = np.bincount(comp[:n_ex], minlength=n_comp)
    row_comp = comp[n_ex:]
    bridged = ex_per_comp > 1
    if bridged.any():
        # the batch bridges sessions that existed before it
        return Cut(int(rows[bridged[row_comp]].min()))
    has_rows = np.bincount(row_comp, minlength=n_comp) > 0
    if _has_float_sums(op, p) and not _single_chains(p, rows, row_comp, comp[:n_ex], ex_win):
        return None
    # renumber the components that got rows: groups of the plan
    new_id = np.cumsum(has_rows) - 1
    order, group, starts = group_rows(new_id[row_comp])
    existing: list[TimeWindow | None] = [None] * int(has_rows.sum())
    for i, c in enumerate(comp[:n_ex].tolist()):
        if has_rows[c]:
            existing[int(new_id[c])] = ex_win[i]
    groups = Groups(
        key=c_key[has_rows],
        start=c_start[has_rows],
        end=c_end[has_rows],
        rows=rows[order],
        group=group,
        starts=starts,
        existing=existing,
    )
    return Plan(groups, np.zeros(0, np.int64), invalid_gap, False)


def _ends_at(m_key: IntArray, m_end: IntArray, q_key: IntArray, q_time: IntArray) -> BoolArray:
    """Per query: does a member interval of the same key end exactly at its time?"""
    lo = min(int(m_end.min()), int(q_time.min()))
    span = max(int(m_end.max()), int(q_time.max())) - lo + 1
    if (int(max(m_key.max(), q_key.max())) + 1) * span < INT_EXACT:
        return np.isin(q_key * span + (q_time - lo), m_key * span + (m_end - lo))
    ends = set(zip(m_key.tolist(), m_end.tolist(), strict=True))
    pairs = zip(q_key.tolist(), q_time.tolist(), strict=True)
    return np.array([pair in ends for pair in pairs], dtype=bool)


def _has_float_sums(op: WindowOperator, p: Prepared) -> bool:
    return any(p.columns[i].dtype.kind == "f" for i in sum_columns(op))


def _single_chains(
    p: Prepared,
    rows: IntArray,
    row_comp: IntArray,
    ex_comp: IntArray,
    ex_win: list[TimeWindow],
) -> bool:
    """Each key's rows in non-decreasing time, any existing session starting before them."""
    key = p.key_codes[rows]
    ts = p.ts[rows]
    order = np.argsort(key, kind="stable")
    k, t = key[order], ts[order]
    if ((k[1:] == k[:-1]) & (t[1:] < t[:-1])).any():
        return False
    if len(ex_win):
        first_ts = np.full(int(row_comp.max()) + 1 if len(row_comp) else 0, np.iinfo(np.int64).max)
        np.minimum.at(first_ts, row_comp, ts)
        for c, w in zip(ex_comp.tolist(), ex_win, strict=True):
            if c < len(first_ts) and w.start > first_ts[c]:
                return False
    return True
