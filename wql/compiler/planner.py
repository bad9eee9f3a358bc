"""Engine choice: native Spark operators or the WindowOperator runtime, with reasons.

This is the one place the engine of a query is decided, for a batch and for
a streaming source alike; the hosts (``wql/api.py``, ``wql/spark/``) run
what it chose and never re-decide. A query runs natively only when Spark's
own ``window``/``session_window`` aggregation provably gives the operator
engine's rows (spec §4). The test is driven by the native backend's
declared capabilities (:mod:`wql.compiler.capabilities`): :data:`NATIVE` for
a batch source, :data:`NATIVE_STREAMING` for a streaming one. Every
construct outside them is a *blocker*, reported as a
:class:`~wql.compiler.plan.Reason` that names the clause and its line
("TRIGGER COUNT(100) at line 6 needs the operator engine: ..."). Forcing
``engine='native'`` on a query with blockers raises a positioned
:class:`~wql.errors.WqlUnsupportedError` at the first blocker.

On a stream no query is native today: a stream can always bring rows behind
the watermark, and Spark's streaming aggregation gives them another outcome
than the operator engine (docs/native.md, "Streaming"), so the planner
chooses the operator engine and says why.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Collection

from wql.compiler import plan as P
from wql.compiler.capabilities import NATIVE, Capabilities, native_capabilities
from wql.compiler.explain import duration, evictor_text, trigger_text
from wql.errors import ErrorCode, WqlError, WqlErrors, WqlUnsupportedError
from wql.runtime.aggregates import AGGREGATE_KINDS

ENGINES = ("auto", "native", "operator")

Streaming = bool | Collection[str]
"""Which sources are streams: all (True), none (False), or the names of those that are."""


def choose_engines(
    program: P.Program, engine: str = "auto", *, streaming: Streaming = False
) -> P.Program:
    """The program with every query's ``engine`` set.

    ``engine``: ``'auto'`` picks per query; ``'native'``/``'operator'``
    force it (native fails on queries it cannot run exactly). ``streaming``
    says which sources are streaming DataFrames (see :data:`Streaming`): a
    query over a stream is planned with :data:`NATIVE_STREAMING`.
    """
    if engine not in ENGINES:
        raise WqlUnsupportedError(
            f"unknown engine {engine!r}",
            expected=ENGINES,
            hint="use auto, native or operator",
            code=ErrorCode.UNKNOWN_ENGINE,
        )
    errors: list[WqlError] = []
    queries = []
    for q in program.queries:
        try:
            choice = choose_engine(q, engine, streaming=is_stream(q, streaming))
            queries.append(dataclasses.replace(q, engine=choice))
        except WqlError as e:
            errors.append(e)
    if len(errors) == 1:
        raise errors[0]
    if errors:
        raise WqlErrors(errors)
    return dataclasses.replace(program, queries=tuple(queries))


def is_stream(q: P.Query, streaming: Streaming) -> bool:
    """Whether ``q`` reads a streaming source under ``streaming`` (see :data:`Streaming`)."""
    if isinstance(streaming, bool):
        return streaming
    return q.source.name.lower() in {name.lower() for name in streaming}


def choose_engine(
    q: P.Query, engine: str = "auto", caps: Capabilities | None = None, *, streaming: bool = False
) -> P.EngineChoice:
    """The engine of one query; ``caps`` defaults to the native abilities for ``streaming``."""
    caps = caps if caps is not None else native_capabilities(streaming)
    blockers = native_blockers(q, caps)
    where = " on a stream" if caps.streaming else ""
    if engine == "operator":
        return P.EngineChoice(
            "operator",
            (P.Reason("engine forced to operator"),),
            forced=True,
            streaming=caps.streaming,
        )
    if engine == "native":
        if blockers:
            first = blockers[0]
            more = f" (and {len(blockers) - 1} more reason(s))" if len(blockers) > 1 else ""
            raise WqlUnsupportedError(
                f"query {q.name!r} cannot run on the native engine{where}: {first.text}{more}",
                first.span,
                hint="use --engine auto or --engine operator",
                code=ErrorCode.NOT_NATIVE,
            )
        return P.EngineChoice("native", _native_reasons(q), forced=True, streaming=caps.streaming)
    if blockers:
        return P.EngineChoice("operator", tuple(blockers), streaming=caps.streaming)
    return P.EngineChoice("native", _native_reasons(q), streaming=caps.streaming)


def _native_reasons(q: P.Query) -> tuple[P.Reason, ...]:
    return (
        P.Reason(
            f"{q.window.kind} on event time with the default WATERMARK trigger, no evictor, no "
            "lateness and only incremental aggregates: Spark's native aggregation gives "
            "identical rows",
            q.window.span,
        ),
    )


def native_blockers(q: P.Query, caps: Capabilities = NATIVE) -> list[P.Reason]:
    """Every reason ``q`` needs the operator engine, in clause order."""
    out: list[P.Reason] = []

    def need(what: str, span, construct: str) -> None:
        why = caps.reason(construct)
        # "on a stream" only where batch would be native: the reasons shared with
        # batch read the same in `wql explain` and `wql explain --stream`
        stream_only = caps.streaming and not NATIVE.reason(construct)
        message = "needs the operator engine" + (" on a stream" if stream_only else "")
        out.append(P.Reason(f"{message}: {why}" if why else message, span, what))

    w = q.window
    if q.source.arrival_order is not None:
        need(f"arrival_order = '{q.source.arrival_order}'", q.source.span, "arrival_order")
    if w.kind not in caps.windows:
        need(f"{w.kind} window", w.span, w.kind)
    elif w.domain is P.TimeDomain.PROCESSING and not caps.processing_time:
        need(f"{w.kind}(PROCTIME(), ...)", w.span, "processing_time")
    elif isinstance(w, P.DynamicSession) and not caps.dynamic_session_gap:
        need("SESSION with GAP <expr>", w.span, "dynamic_session_gap")
    elif w.merging and not q.keys and not caps.keyless_sessions:
        need("SESSION without keys", w.span, "keyless_sessions")
    et = q.source.event_time
    if (
        isinstance(w, (P.Session, P.DynamicSession))
        and q.keys
        and et is not None
        and et.delay_ms == 0
        and not caps.zero_delay_keyed_sessions
    ):
        need(
            "keyed SESSION with a zero watermark delay",
            et.span or w.span,
            "zero_delay_keyed_sessions",
        )
    if caps.reserved_prefix:
        for c in q.source.columns:
            if c.name.lower().startswith(caps.reserved_prefix):
                need(f"source column {c.name!r}", c.span or q.source.span, "reserved_prefix")
    if q.trigger is not None and not _default_like(q):
        need(f"TRIGGER {trigger_text(q.trigger).spelling}", q.trigger.span, "trigger")
    if q.evictor is not None and not caps.evictors:
        need(f"EVICT {evictor_text(q.evictor).spelling}", q.evictor.span, "evictor")
    if q.allowed_lateness_ms > 0 and not caps.allowed_lateness:
        need(
            f"ALLOWED LATENESS {duration(q.allowed_lateness_ms)}",
            q.lateness_span or q.span,
            "allowed_lateness",
        )
    if q.late_output is not None and not caps.late_output:
        need(f"LATE DATA TO {q.late_output}", q.late_output_span or q.span, "late_output")
    for a in q.aggregates:
        if a.kind not in caps.aggregates:
            need(a.kind.value, a.span, a.kind.value)
        elif not caps.float_sums and float_sum(a):
            need(f"{a.kind.value} of {a.arg.type.ddl if a.arg else ''}", a.span, "float_sums")
    used = {c for o in q.output for c in o.expr.columns}
    if q.having is not None:
        used |= set(q.having.columns)
    for col in P.PANE_COLUMNS:
        if col in used and col not in caps.pane_columns:
            need(col, q.span, "pane_columns")
    if not caps.late_rows and et is not None and w.domain is P.TimeDomain.EVENT:
        # last: the one reason that holds for every event-time query on a stream
        need(f"WATERMARK FOR {et.column}", et.span or q.source.span, "late_rows")
    return out


def float_sum(a: P.Aggregate) -> bool:
    """Whether ``a`` adds floating-point numbers, whose sum depends on the order of addition.

    Which kinds add (and so round) is the runtime's table of aggregate kinds
    (``AggregateKind.rounds``).
    """
    return (
        AGGREGATE_KINDS[a.kind.value].rounds
        and a.arg is not None
        and a.arg.type.kind in ("FLOAT", "DOUBLE")
    )


def _default_like(q: P.Query) -> bool:
    """An explicit trigger that is exactly the window's default WATERMARK trigger."""
    return isinstance(q.trigger, P.WatermarkTrigger) and q.window.domain is P.TimeDomain.EVENT
