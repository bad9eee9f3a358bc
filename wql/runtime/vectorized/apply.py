"""Applying a plan: the batch partials folded into the operator's window state.

Through the operator's fast-path interface only (key states, timers,
emitted rows, arrival numbers, drops). Windows created and completed inside
the batch are emitted straight from their partials; every other group's
partial is folded into its accumulator with the aggregate kinds' own merge
code (``wql.runtime.aggregates``) by a loop generated once per shape.
"""

from __future__ import annotations

from collections.abc import Hashable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from wql.runtime.aggregates import merge_lines, order_key, result_expression
from wql.runtime.assigners import DROP_INVALID_GAP, DROP_MISSING_TIMESTAMP
from wql.runtime.config import ON_TIME
from wql.runtime.vectorized.kernels import IntArray, sequential_sums
from wql.runtime.vectorized.prepare import FLOAT_EXACT, INT_EXACT, Prepared
from wql.runtime.vectorized.time_windows import Plan, first_last_rows
from wql.runtime.windows import MAX_TIME, TimeWindow

if TYPE_CHECKING:
    from wql.runtime.window_operator import WindowOperator


@dataclass
class Found:
    """The operator state each group meets (looked up before anything changes)."""

    keys: list[Hashable]
    states: list[Any]  # KeyState or None
    accs: list[list | None]
    fresh: list[bool]  # no contents, no pane count, no pre-batch session


def lookup(op: WindowOperator, p: Prepared, plan: Plan) -> Found | None:
    g = plan.groups
    checks = sum_checks(op, p)
    uniques = p.uniques
    codes = g.key.tolist()
    keys = [uniques[c] for c in codes]
    key_state = op.key_states.get
    states = [key_state(k) for k in keys]
    accs: list[list | None] = [None] * len(keys)
    fresh = [True] * len(keys)
    starts, ends = g.start.tolist(), g.end.tolist()
    existing = g.existing
    for i, ks in enumerate(states):
        if ks is None:
            continue
        acc = None
        if existing is None:
            w = TimeWindow(starts[i], ends[i])
            acc = ks.contents.get(w)
            if acc is not None or w in ks.panes:
                fresh[i] = False
        else:
            before = existing[i]
            if before is not None:
                assert ks.merging is not None
                fresh[i] = False
                acc = ks.contents.get(ks.merging.mapping[before])
        if acc is None:
            continue
        accs[i] = acc
        if not acc_ok(acc, checks, plan.float_sums_exact):
            return None
    return Found(keys, states, accs, fresh)


def sum_checks(op: WindowOperator, p: Prepared) -> list[tuple[int, type]]:
    """(slot, Python type) of every SUM/AVG accumulator slot, from its column's kind."""
    checks: list[tuple[int, type]] = []
    for spec, slot in zip(op.config.aggregates, op.aggregator.slots, strict=True):
        if spec.info.partial == "sum":
            assert spec.arg is not None
            checks.append((slot, float if p.columns[spec.arg].dtype.kind == "f" else int))
    return checks


def _small_integral(value: float) -> bool:
    """An integer-valued float whose sums with the batch's stay exact (and not -0.0)."""
    return (
        value.is_integer()
        and abs(value) < FLOAT_EXACT / 2
        and not (value == 0 and bool(np.signbit(value)))
    )


def acc_ok(acc: list, checks: list[tuple[int, type]], float_sums_exact: bool) -> bool:
    """Can the batch partial be folded into this existing accumulator exactly?"""
    for slot, kind in checks:
        value: Any = acc[slot]
        if value is None:
            continue
        # the loop's left-to-right arithmetic keeps the accumulator's type
        if type(value) is not kind:
            return False
        if float_sums_exact and kind is float and not _small_integral(acc[slot]):
            return False
    return True


def partials(
    op: WindowOperator, p: Prepared, plan: Plan, found: Found, seq0: int
) -> tuple[list[int], list[list | None]]:
    """Per group: the row count and, per aggregate, its batch partial as Python values.

    ``seq0``: the arrival number of the batch's first row.
    """
    g = plan.groups
    specs = op.config.aggregates
    slots = op.aggregator.slots
    wants_order = any(s.info.partial in ("first", "last") for s in specs)
    first_row = last_row = None
    if g.pane is not None:
        counts = g.pane.count
        first_row, last_row = g.pane.first_row, g.pane.last_row
    else:
        assert g.rows is not None and g.group is not None and g.starts is not None
        counts = np.diff(np.append(g.starts, len(g.rows)))
        if wants_order:
            first_row, last_row = first_last_rows(p, g.rows, g.group, g.starts)
    per_spec: list[list | None] = []
    int_sums: dict[int, list] = {}
    extrema: dict[tuple[str, int], list] = {}
    for spec, slot in zip(specs, slots, strict=True):
        kind, arg = spec.info.partial, spec.arg
        if kind == "count":
            per_spec.append(None)
        elif kind == "sum":
            assert arg is not None
            col = p.columns[arg]
            if g.pane is not None:
                values = g.pane.sums[arg].tolist()
                per_spec.append([float(v) for v in values] if col.dtype.kind == "f" else values)
            elif col.dtype.kind == "i":
                if arg not in int_sums:
                    assert g.rows is not None and g.starts is not None
                    int_sums[arg] = np.add.reduceat(col[g.rows], g.starts).tolist()
                per_spec.append(int_sums[arg])
            else:
                # left to right from the accumulator's value, as the loop adds
                init = np.array(
                    [-0.0 if acc is None or acc[slot] is None else acc[slot] for acc in found.accs],
                    dtype=np.float64,
                )
                assert g.rows is not None and g.group is not None and g.starts is not None
                per_spec.append(sequential_sums(col[g.rows], g.group, g.starts, init).tolist())
        elif kind in ("min", "max"):
            assert arg is not None
            if (kind, arg) not in extrema:
                if g.pane is not None:
                    table = g.pane.mins if kind == "min" else g.pane.maxs
                    extrema[(kind, arg)] = table[arg].tolist()
                else:
                    assert g.rows is not None and g.starts is not None
                    ufunc = np.minimum if kind == "min" else np.maximum
                    extrema[(kind, arg)] = ufunc.reduceat(p.columns[arg][g.rows], g.starts).tolist()
            per_spec.append(extrema[(kind, arg)])
        elif kind in ("list", "distinct"):
            # per group the accumulator's own shape: (t, seq, value) entries or a set
            assert arg is not None and g.rows is not None and g.starts is not None
            r = g.rows
            values = p.columns[arg][r].tolist()
            bounds = np.append(g.starts, len(r)).tolist()
            if kind == "distinct":
                per_spec.append(
                    [set(values[a:b]) for a, b in zip(bounds[:-1], bounds[1:], strict=True)]
                )
            else:
                entries = list(zip(p.ts[r].tolist(), (r + seq0).tolist(), values, strict=True))
                per_spec.append(
                    [entries[a:b] for a, b in zip(bounds[:-1], bounds[1:], strict=True)]
                )
        else:  # first / last: (event time, arrival seq, value)
            assert arg is not None and first_row is not None and last_row is not None
            chosen = first_row if kind == "first" else last_row
            per_spec.append(
                list(
                    zip(
                        p.ts[chosen].tolist(),
                        (chosen + seq0).tolist(),
                        p.columns[arg][chosen].tolist(),
                        strict=True,
                    )
                )
            )
    return counts.tolist(), per_spec


def codegen(
    specs: tuple, slots: list[int], seq_sums: tuple[bool, ...]
) -> tuple[list[str], list[str]]:
    """Per aggregate: the result expression of a fresh group's partial (``P{j}[i]``,
    ``cnt``) and the lines folding it into an accumulator ``acc`` the way
    ``Aggregator.add`` would have, row by row: the kind's merge
    (``wql.runtime.aggregates``), a batch partial being the accumulator of
    the group's rows."""
    results = []
    fold = []
    for j, (spec, s, seq_sum) in enumerate(zip(specs, slots, seq_sums, strict=True)):
        info = spec.info
        if info.partial == "count":
            sources = ["cnt"]
        elif spec.kind == "AVG":
            sources = [f"P{j}[i]", "cnt"]
        else:
            sources = [f"P{j}[i]"]
        results.append(result_expression(spec.kind, sources))
        targets = [f"acc[{s + n}]" for n in range(len(info.create))]
        if seq_sum:
            # the float partial already started from the accumulator (sequential_sums)
            fold.append(f"        acc[{s}] = P{j}[i]")
            fold += [f"        acc[{s + 1}] += cnt"] if spec.kind == "AVG" else []
            continue
        names = [src if src == "cnt" else f"b{j}_{n}" for n, src in enumerate(sources)]
        fold += [f"        {b} = {src}" for b, src in zip(names, sources, strict=True) if b != src]
        fold += [f"        {line}" for line in merge_lines(spec.kind, targets, names)]
    return results, fold


_GROUP_LOOPS: dict[tuple, Any] = {}


def _group_loop(
    specs: tuple, slots: list[int], seq_sums: tuple[bool, ...], merging: bool, lateness: int
) -> Any:
    """Straight-line Python for the per-group work, generated once per shape.

    The loop runs once per (key, window) group, so (as the runtime's own
    ``Aggregator.add``) it is generated without per-aggregate dispatch.
    For each group: either emit the window (created and completed inside
    the batch) or fold the batch partial into the window's accumulator the
    way ``Aggregator.add`` would have row by row, store it and register the
    window's timers. The cleanup timer (``WindowOperator.register_cleanup_timer``)
    is inlined: at lateness 0 it is the trigger's timer at max_ts (registering
    or deleting it again does nothing), else max_ts + lateness below MAX_TIME.
    """
    shape = (tuple((s.kind, s.arg) for s in specs), tuple(slots), seq_sums, merging, lateness)
    fn = _GROUP_LOOPS.get(shape)
    if fn is not None:
        return fn
    results, fold = codegen(specs, slots, seq_sums)

    def cleanup(call: str, window: str, end: str, indent: str) -> str:
        if not lateness:
            return ""
        return (
            f"{indent}c = {end} - 1 + LATENESS\n"
            f"{indent}if c < MAX_TIME:\n{indent}    {call}(key, {window}, c)\n"
        )

    unpack = "".join(f"    P{j} = parts[{j}]\n" for j in range(len(specs)))
    row = ", ".join(["key", "start", "end", "end - 1", "0", "ON_TIME", "end - 1", *results])
    if merging:
        store = f"""\
        before = existing[i]
        window = TimeWindow(start, end)
        if before is None:
            ks.merging.mapping[window] = window
            ks.contents[window] = acc
            register(key, window, end - 1)
{cleanup("register", "window", "end", " " * 12)}\
        else:
            mapping = ks.merging.mapping
            sw = mapping[before]
            if done[i] == 2:
                # an earlier session that fires and is cleaned up in this batch:
                # emit it here instead of through its timers (which go)
                pane = ks.panes.pop(sw, 0)
                direct.append((key, start, end, end - 1, pane, ON_TIME, end - 1, *result(acc)))
                ks.contents.pop(sw, None)
                del mapping[before]
                delete(key, before, before.end - 1)
{cleanup("delete", "before", "before.end", " " * 16)}\
                emptied.append(key)
                continue
            ks.contents[sw] = acc
            if before != window:
                # the loop's merge callback: the absorbed window's trigger and
                # cleanup timers go, the cover gets its own
                del mapping[before]
                mapping[window] = sw
                delete(key, before, before.end - 1)
{cleanup("delete", "before", "before.end", " " * 16)}\
                register(key, window, end - 1)
{cleanup("register", "window", "end", " " * 16)}\
"""
    else:
        store = f"""\
        window = TimeWindow(start, end)
        if done[i] == 2:
            # a window from an earlier batch that fires and is cleaned up in
            # this one: emit it here instead of through its timers (which go)
            pane = ks.panes.pop(window, 0)
            direct.append((key, start, end, end - 1, pane, ON_TIME, end - 1, *result(acc)))
            ks.contents.pop(window, None)
            delete(key, window, end - 1)
{cleanup("delete", "window", "end", " " * 12)}\
            emptied.append(key)
            continue
        ks.contents[window] = acc
        if fresh[i]:  # an existing window already has both timers
            register(key, window, end - 1)
{cleanup("register", "window", "end", " " * 12)}\
"""
    src = f"""\
def group_loop(op, keys, states, accs, fresh, existing, starts, ends, counts, parts, done, direct,
               emptied):
{unpack}    create = op.aggregator.create
    result = op.aggregator.result
    key_state = op.key_states.get
    new_key_state = op.new_key_state
    register = op.timer_service.register_event_time_timer
    delete = op.timer_service.delete_event_time_timer
    for i in range(len(keys)):
        key = keys[i]; start = starts[i]; end = ends[i]; cnt = counts[i]
        if done[i] == 1:
            direct.append(({row}))
            continue
        acc = accs[i]
        if acc is None:
            acc = create()
{chr(10).join(fold)}
        ks = states[i]
        if ks is None:
            ks = key_state(key)
            if ks is None:
                ks = new_key_state(key)
{store}"""
    namespace: dict[str, Any] = {
        "TimeWindow": TimeWindow,
        "ON_TIME": ON_TIME,
        "_order": order_key,
        "LATENESS": lateness,
        "MAX_TIME": MAX_TIME,
    }
    exec(compile(src, "<wql.runtime.vectorized.group_loop>", "exec"), namespace)  # noqa: S102
    fn = _GROUP_LOOPS[shape] = namespace["group_loop"]
    return fn


def apply_plan(op: WindowOperator, p: Prepared, plan: Plan, found: Found) -> None:
    g = plan.groups
    specs = op.config.aggregates
    seq0 = op.admit(p.n)
    counts, per_spec = partials(op, p, plan, found, seq0)
    seq_sums = tuple(
        spec.info.partial == "sum" and g.pane is None and p.columns[spec.arg].dtype.kind == "f"  # type: ignore[index]
        for spec in specs
    )
    # windows created and completed inside the batch are emitted directly
    ends = g.end
    cleanup = np.minimum(ends - 1 + min(p.lateness, INT_EXACT), MAX_TIME)
    # 1: created and completed inside the batch (emitted from the partial);
    # 2: existing before the batch, fires and is cleaned up inside it
    due = (ends - 1 <= p.wm_last) & (cleanup <= p.wm_last)
    fresh = np.array(found.fresh, dtype=bool)
    done = (due & fresh).astype(np.int64)
    done[due & ~fresh] = 2
    done_list = done.tolist()
    emptied: list[Hashable] = []
    direct: list[tuple] = []
    loop = _group_loop(specs, op.aggregator.slots, seq_sums, g.existing is not None, p.lateness)
    loop(
        op,
        found.keys,
        found.states,
        found.accs,
        found.fresh,
        g.existing,
        g.start.tolist(),
        ends.tolist(),
        counts,
        per_spec,
        done_list,
        direct,
        emptied,
    )
    for key in emptied:  # as the runtime does after a cleanup timer
        op.release_key(key)

    # rows that no window took, dropped rows
    invalid_ts = p.n - int(p.valid.sum())
    if invalid_ts:
        op.drop(DROP_MISSING_TIMESTAMP, invalid_ts)
    if len(plan.invalid_gap):
        op.drop(DROP_INVALID_GAP, len(plan.invalid_gap))
    if len(plan.rejected):
        _reject(op, p, plan.rejected)
    if direct:
        direct.sort(key=_by_window_time)  # timer order: window time first
        op.emit_rows(direct)
    op.advance_watermark(p.wm_last)


def _by_window_time(row: tuple) -> int:
    return row[3]


def _reject(op: WindowOperator, p: Prepared, rows: IntArray) -> None:
    """Rows no window accepted: late output or counted, by the loop's own rule."""
    columns = p.batch.columns
    values = [
        np.asarray(c)[rows].tolist() if isinstance(c, np.ndarray) else [c[r] for r in rows.tolist()]
        for c in columns
    ]
    rows_values = list(zip(*values, strict=True)) if values else [()] * len(rows)
    for r, t, w, v in zip(
        rows.tolist(), p.ts[rows].tolist(), p.wm_raw[rows].tolist(), rows_values, strict=True
    ):
        op.not_accepted(p.keys[r], t, v, w)
