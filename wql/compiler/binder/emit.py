"""Binding EMIT: the accumulation mode of a query's panes.

``EMIT ACCUMULATING`` / ``EMIT DISCARDING`` say for every pane, ``EMIT
EARLY ...``, ``ON_TIME ...``, ``LATE ...`` per pane timing (unnamed timings
accumulate), whether a pane keeps the contents it fired or purges them
(Beam's accumulation mode). Without EMIT the trigger decides, as it always
did: a PURGING trigger discards, any other accumulates; the two ways of
saying it do not mix.
"""

from __future__ import annotations

from wql.compiler import plan as P
from wql.compiler.binder.context import BindContext
from wql.errors import ErrorCode
from wql.grammar import ast


def bind_emit(
    ctx: BindContext,
    clause: ast.EmitClause,
    window: P.Window | None,
    trigger: P.Trigger | None,
) -> P.Accumulation | None:
    """The clause's accumulation mode (None when it names none).

    ``window`` and ``trigger`` (the effective one) are None when they had
    an error (reported): the checks that need them are skipped.
    """
    every: ast.Accumulation | None = None
    per: dict[str, ast.Accumulation] = {}
    for item in clause.items:
        if not isinstance(item, ast.Accumulation):
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
        return None
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
    return P.Accumulation(discarding, bool(per), clause.span)


def _twice(ctx: BindContext, item: ast.Accumulation, what: str) -> Exception:
    return ctx.error(
        f"EMIT says twice how {what} accumulate",
        item.span,
        hint="give one mode for every pane (EMIT DISCARDING) or one per pane timing "
        "(EMIT EARLY ACCUMULATING, LATE DISCARDING)",
        code=ErrorCode.EMIT,
    )
