"""Binding EMIT: the accumulation mode of a query's panes and its changelog output.

``EMIT ACCUMULATING`` / ``EMIT DISCARDING`` say for every pane, ``EMIT
EARLY ...``, ``ON_TIME ...``, ``LATE ...`` per pane timing (unnamed timings
accumulate), whether a pane keeps the contents it fired or purges them
(Beam's accumulation mode). Without EMIT the trigger decides, as it always
did: a PURGING trigger discards, any other accumulates; the two ways of
saying it do not mix.

``EMIT CHANGELOG`` makes the output a changelog (``op`` first): the SELECT
list must hold what identifies and orders a window's rows, as they are (the
grouping keys, ``window_start``, ``window_end`` for time windows, and
``pane_index``), may not name a column ``op``, and must be deterministic: a
retraction is the same row again, SELECT and HAVING applied to the kept
operator row a second time (possibly in a later micro-batch).
"""

from __future__ import annotations

import re

from wql.compiler import plan as P
from wql.compiler.binder.context import BindContext
from wql.errors import ErrorCode, WqlError
from wql.grammar import ast

# Spark functions whose value changes between two evaluations of the same row
# (canonical SQL spells function names upper case).
_NONDETERMINISTIC = re.compile(
    r"\b(RAND|RANDN|RANDOM|RANDSTR|UNIFORM|UUID|SHUFFLE|CURRENT_TIMESTAMP|CURRENT_DATE|"
    r"CURRENT_TIME|NOW|LOCALTIMESTAMP|CURDATE|UNIX_TIMESTAMP|MONOTONICALLY_INCREASING_ID|"
    r"SPARK_PARTITION_ID|INPUT_FILE_NAME)\b(?!`)"
)


def bind_emit(
    ctx: BindContext,
    clause: ast.EmitClause,
    window: P.Window | None,
    trigger: P.Trigger | None,
) -> tuple[P.Accumulation | None, P.Changelog | None]:
    """The clause's accumulation mode and changelog (None for what it does not name).

    ``window`` and ``trigger`` (the effective one) are None when they had
    an error (reported): the checks that need them are skipped.
    """
    every: ast.Accumulation | None = None
    per: dict[str, ast.Accumulation] = {}
    changelog: P.Changelog | None = None
    for item in clause.items:
        if isinstance(item, ast.Changelog):
            if changelog is not None:
                raise ctx.error("EMIT says CHANGELOG twice", item.span, code=ErrorCode.EMIT)
            changelog = P.Changelog(item.span)
            continue
        if item.panes is None:
            if every is not None or per:
                raise _twice(ctx, item, "every pane")
            every = item
            continue
        timing = item.panes.value
        if every is not None or timing in per:
            raise _twice(ctx, item, f"{timing} panes")
        per[timing] = item
    if every is None and not per:
        return None, changelog
    first = every if every is not None else next(iter(per.values()))
    if per and window is not None and not P.has_bounds(window):
        raise ctx.error(
            f"EMIT {first.panes.value if first.panes else ''} ... names a pane timing, but a "
            f"{window.kind} window has no end, so its panes are neither EARLY, ON_TIME nor LATE",
            first.span,
            hint="say it for every pane: EMIT ACCUMULATING or EMIT DISCARDING",
            code=ErrorCode.EMIT,
        )
    if trigger is not None and any(
        isinstance(t, P.PurgingTrigger) for t in P.walk_trigger(trigger)
    ):
        if isinstance(window, P.CountWindow) and window.slide is None:
            hint = (
                f"COUNT_WINDOW({window.size}) fires with PURGING COUNT({window.size}); for "
                "another mode use GLOBAL() with TRIGGER COUNT(n)"
            )
        else:
            hint = "drop PURGING from the trigger: EMIT DISCARDING says the same"
        raise ctx.error(
            "an EMIT accumulation mode cannot be combined with a PURGING trigger, which "
            "already discards every pane's contents",
            first.span,
            hint=hint,
            code=ErrorCode.EMIT,
        )
    discarding: tuple[str, ...]
    if every is not None:
        discarding = P.PANE_TIMINGS if every.discarding else ()
    else:
        discarding = tuple(t for t in P.PANE_TIMINGS if t in per and per[t].discarding)
    return P.Accumulation(discarding, bool(per), clause.span), changelog


def _twice(ctx: BindContext, item: ast.Accumulation, what: str) -> WqlError:
    return ctx.error(
        f"EMIT says twice how {what} accumulate",
        item.span,
        hint="give one mode for every pane (EMIT DISCARDING) or one per pane timing "
        "(EMIT EARLY ACCUMULATING, LATE DISCARDING)",
        code=ErrorCode.EMIT,
    )


def check_changelog(
    ctx: BindContext,
    changelog: P.Changelog,
    q: ast.Query,
    keys: tuple[P.KeyColumn, ...],
    window: P.Window,
    output: tuple[P.OutputColumn, ...],
    having: P.Expr | None,
) -> None:
    """The SELECT list (and HAVING) an EMIT CHANGELOG query needs (module docstring)."""
    for item, o in zip(q.select, output, strict=False):
        if o.name.lower() == P.OP_COLUMN:
            raise ctx.error(
                f"EMIT CHANGELOG puts the column {P.OP_COLUMN!r} first in the output; "
                "this output column has the same name",
                (item.alias or item).span,
                hint="give it another name with AS",
                code=ErrorCode.EMIT,
            )
    for item, o in zip(q.select, output, strict=False):
        _deterministic(ctx, o.expr, item.span, "SELECT")
    if having is not None and q.having is not None:
        _deterministic(ctx, having, q.having.span, "HAVING")
    plain = {o.expr.sql for o in output if len(o.expr.columns) == 1}
    needed = [(k.name, k.expr.sql) for k in keys]
    if P.has_bounds(window):
        needed += [(n, n) for n in ("window_start", "window_end")]
    needed.append(("pane_index", "pane_index"))
    missing = [
        shown
        for name, shown in needed
        if name not in plain and "`" + name.replace("`", "``") + "`" not in plain
    ]
    if missing:
        raise ctx.error(
            "EMIT CHANGELOG needs " + ", ".join(missing) + " in the SELECT list, as they are: "
            "a sink identifies a row by the grouping keys and the window, and orders a "
            "window's rows by pane_index",
            changelog.span,
            hint="add " + ", ".join(missing) + " to the SELECT list",
            code=ErrorCode.EMIT,
        )


def _deterministic(ctx: BindContext, expr: P.Expr, span, clause: str) -> None:
    found = _NONDETERMINISTIC.search(expr.sql)
    if found is not None:
        raise ctx.error(
            f"{clause} calls {found.group(1)}(), which is not deterministic: EMIT CHANGELOG "
            "retracts a row by computing it again, which must give the same values",
            span,
            code=ErrorCode.EMIT,
        )
