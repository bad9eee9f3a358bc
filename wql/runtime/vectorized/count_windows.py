"""``COUNT_WINDOW(n)`` batches: every n-th row of a key fires and purges its window."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from wql.runtime.aggregates import order_key
from wql.runtime.config import EARLY, LATE
from wql.runtime.vectorized.apply import Found, acc_ok, codegen, partials, sum_checks
from wql.runtime.vectorized.kernels import group_rows
from wql.runtime.vectorized.prepare import Prepared, count_window_size
from wql.runtime.vectorized.time_windows import Groups, Plan, columns_ok
from wql.runtime.windows import GLOBAL_WINDOW, MAX_TIME

if TYPE_CHECKING:
    from wql.runtime.window_operator import WindowOperator


#: The CountTrigger's state under PurgingTrigger (child 0 of the trigger context).
_COUNT_STATE = (GLOBAL_WINDOW, "0.count")


def process_count_windows(op: WindowOperator, p: Prepared) -> bool:
    """Tumbling count windows: every n-th row of a key fires and purges its window.

    Per key, row r (arrival rank) of the batch is the (c0 + r + 1)-th row
    since the last purge, where c0 is the count the trigger kept; rows with
    the same ``(c0 + r) // n`` share one firing, the first of them on top
    of the window's existing accumulator.  A firing happens on an element
    (no timers), so its pane timing is EARLY below the end of time.
    """
    n_fire = count_window_size(op)
    assert n_fire is not None
    if not columns_ok(op, p, np.arange(p.n, dtype=np.int64)):
        return False
    order, kgroup, kstarts = group_rows(p.key_codes)
    lengths = np.diff(np.append(kstarts, p.n))
    key_codes = p.key_codes[order[kstarts]].tolist()
    keys = [p.uniques[c] for c in key_codes]
    states = [op.key_states.get(k) for k in keys]
    c0_list: list[int] = []
    pane0: list[int] = []
    acc0: list[list | None] = []
    checks = sum_checks(op, p)
    for ks in states:
        if ks is None:
            c0_list.append(0)
            pane0.append(0)
            acc0.append(None)
            continue
        c0_list.append(ks.trigger.get(_COUNT_STATE) or 0)
        pane0.append(ks.panes.get(GLOBAL_WINDOW, 0))
        acc = ks.contents.get(GLOBAL_WINDOW)
        if acc is not None and not acc_ok(acc, checks, False):
            return False
        acc0.append(acc)
    c0 = np.array(c0_list, dtype=np.int64)
    rank = np.arange(p.n, dtype=np.int64) - np.repeat(kstarts, lengths)
    fire_no = (np.repeat(c0, lengths) + rank) // n_fire
    new = np.ones(p.n, dtype=bool)
    new[1:] = (kgroup[1:] != kgroup[:-1]) | (fire_no[1:] != fire_no[:-1])
    g_starts = np.flatnonzero(new).astype(np.int64)
    g_group = np.cumsum(new, dtype=np.int64) - 1
    g_key = kgroup[g_starts]
    g_fire = fire_no[g_starts]
    total = c0 + lengths
    fires = (g_fire + 1) * n_fire <= total[g_key]
    last_row = order[np.append(g_starts[1:], p.n) - 1]
    g_key_l = g_key.tolist()
    first_of_key = (g_fire == 0).tolist()
    groups = Groups(
        key=p.key_codes[order[g_starts]],
        start=np.zeros(len(g_starts), np.int64),
        end=np.zeros(len(g_starts), np.int64),
        rows=order.astype(np.int64),
        group=g_group,
        starts=g_starts,
    )
    accs = [acc0[k] if first else None for k, first in zip(g_key_l, first_of_key, strict=True)]
    found = Found([keys[k] for k in g_key_l], [None] * len(g_key_l), accs, [True] * len(g_key_l))
    plan = Plan(groups, np.zeros(0, np.int64), np.zeros(0, np.int64), False)
    seq0 = op.admit(p.n)
    counts, per_spec = partials(op, p, plan, found, seq0)
    seq_sums = tuple(
        spec.info.partial == "sum" and p.columns[spec.arg].dtype.kind == "f"  # type: ignore[index]
        for spec in op.config.aggregates
    )
    panes = (np.array(pane0, np.int64)[g_key] + g_fire).tolist()
    timings = np.where(p.wm_raw[last_row] < MAX_TIME, 0, 1).tolist()
    emitted: list[tuple] = []
    keep: list[list | None] = [None] * len(keys)
    loop = _count_loop(op.config.aggregates, op.aggregator.slots, seq_sums)
    loop(
        op,
        found.keys,
        accs,
        counts,
        per_spec,
        fires.tolist(),
        panes,
        timings,
        last_row.tolist(),
        g_key_l,
        keep,
        emitted,
    )
    # the key's window after the batch: the trailing partial group, if any
    fired_per_key = np.bincount(g_key[fires], minlength=len(keys)).tolist()
    remainder = (total % n_fire).tolist()
    for k, key in enumerate(keys):
        ks = states[k]
        if ks is None:
            ks = op.key_states.get(key) or op.new_key_state(key)
        if fired_per_key[k]:
            ks.panes[GLOBAL_WINDOW] = pane0[k] + fired_per_key[k]
        if remainder[k]:
            ks.trigger[_COUNT_STATE] = remainder[k]
            ks.contents[GLOBAL_WINDOW] = keep[k]
        else:
            ks.trigger.pop(_COUNT_STATE, None)
            ks.contents.pop(GLOBAL_WINDOW, None)
    emitted.sort(key=_by_row)
    op.emit_rows([row for _, row in emitted])
    op.advance_watermark(p.wm_last)
    return True


def _by_row(entry: tuple) -> int:
    return entry[0]


_COUNT_LOOPS: dict[tuple, Any] = {}


def _count_loop(specs: tuple, slots: list[int], seq_sums: tuple[bool, ...]) -> Any:
    """Generated per-group loop of count windows (see ``_group_loop``)."""
    shape = (tuple((s.kind, s.arg) for s in specs), tuple(slots), seq_sums)
    fn = _COUNT_LOOPS.get(shape)
    if fn is not None:
        return fn
    results, fold = codegen(specs, slots, seq_sums)
    unpack = "".join(f"    P{j} = parts[{j}]\n" for j in range(len(specs)))
    head = "key, None, None, None, panes[i], TIMING[timings[i]], MAX_TIME"
    src = f"""\
def count_loop(op, keys, accs, counts, parts, fires, panes, timings, rows, key_of, keep, out):
{unpack}    create = op.aggregator.create
    result = op.aggregator.result
    for i in range(len(keys)):
        key = keys[i]; cnt = counts[i]
        acc = accs[i]
        if acc is None and fires[i]:
            out.append((rows[i], ({head}, {", ".join(results)})))
            continue
        if acc is None:
            acc = create()
{chr(10).join(fold)}
        if fires[i]:
            out.append((rows[i], ({head}, *result(acc))))
        else:
            keep[key_of[i]] = acc
"""
    namespace: dict[str, Any] = {
        "MAX_TIME": MAX_TIME,
        "TIMING": (EARLY, LATE),
        "_order": order_key,
    }
    exec(compile(src, "<wql.runtime.vectorized.count_loop>", "exec"), namespace)  # noqa: S102
    fn = _COUNT_LOOPS[shape] = namespace["count_loop"]
    return fn
