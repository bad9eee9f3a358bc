"""Engine choice: native Spark operators or the WindowOperator runtime, with reasons.

This is the one place the engine of a query is decided, for a batch and for
a streaming source alike; the hosts (``wql/api.py``, ``wql/spark/``) run
what it chose and never re-decide. A query runs natively only when Spark's
own ``window``/``session_window`` aggregation provably gives the operator
engine's rows (docs/native.md). The test is driven by the native backend's
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
from collections.abc import Callable, Collection
from typing import Any

from wql.compiler import plan as P
from wql.compiler.capabilities import NATIVE, Capabilities, native_capabilities
from wql.compiler.explain import duration, evictor_text, trigger_text
from wql.compiler.stream_plan import StreamMemo, stream_plan
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
    # the views planned so far (this file's, in file order, and other files')
    planned = {v.name.lower(): v for v in program.views}
    # every stream stage's operator plan and link, built once for all queries
    memo = StreamMemo()
    for q in program.queries:
        try:
            # a join of two sources is on a stream when either is (the stream plan refuses it)
            stream = any(is_stream(r, streaming) for r in program.root_sources(q))
            views = [s for s in P.inputs_of(q) if s.view is not None]
            # how it runs on a stream, once: a positioned refusal of what one stream
            # processor cannot run, else the plan the stream host runs
            how = stream_plan(q, program, memo) if stream else None
            upstream = planned.get(views[0].view.lower()) if views and views[0].view else None
            choice = choose_engine(q, engine, streaming=stream, upstream=upstream)
            if how is not None and choice.engine == "operator":
                choice = _on_stream(choice, q, how)
                if isinstance(q, P.WindowJoin):
                    choice = _of_two_sources(choice, q, program)
            planned[q.name.lower()] = q = dataclasses.replace(q, engine=choice)
            queries.append(q)
        except WqlError as e:
            errors.append(e)
    if len(errors) == 1:
        raise errors[0]
    if errors:
        raise WqlErrors(errors)
    return dataclasses.replace(program, queries=tuple(queries))


def is_stream(source: P.SourceRef, streaming: Streaming) -> bool:
    """Whether ``source`` is a stream under ``streaming`` (see :data:`Streaming`)."""
    if isinstance(streaming, bool):
        return streaming
    return source.name.lower() in {name.lower() for name in streaming}


def _on_stream(choice: P.EngineChoice, q: P.Stage, how: P.StreamPlan) -> P.EngineChoice:
    """``choice`` carrying how ``q`` runs on a stream, and saying it where it is more than
    one stage (docs/streaming.md)."""
    choice = dataclasses.replace(choice, stream=how)
    if isinstance(how, P.StreamJoin):
        return _in_stream_join(choice, q)  # type: ignore[arg-type]
    if how.upstream:
        return _in_stream_pipeline(choice, (*how.upstream, q), how)
    return choice


def _in_stream_pipeline(
    choice: P.EngineChoice, chain: tuple[P.Stage, ...], how: P.StreamChain
) -> P.EngineChoice:
    """``choice`` with how the pipeline ``chain`` runs on a stream (docs/streaming.md)."""
    q = chain[-1]
    view = next(s for s in P.inputs_of(q) if s.view is not None)
    order = (
        "and at each watermark rise a stage fires, its rows reach the next stage, and only "
        "then does that stage rise, as in Flink's operator chain"
    )
    if any(link.sql for link in how.links):
        text = _cut_pipeline(chain, how, order)
    elif how.partition:
        text = (
            "runs on a stream in the pipeline processor, partitioned by "
            f"{', '.join(how.partition_text)}: one stateful processor per value of "
            f"{chain[0].name}'s keys {', '.join(how.partition_text)} holds the operators of "
            f"{P.chain_text(chain)} for those keys (every later stage groups by them too, so "
            f"rows of different keys never meet), {order}"
        )
    else:
        text = (
            "runs on a stream in the pipeline processor: ONE stateful processor holds the "
            f"operators of {P.chain_text(chain)} for all keys (parallelism 1: "
            f"{how.serial}), {order}"
        )
    reason = P.Reason(text, view.span, f"FROM {view.view}")
    return dataclasses.replace(choice, reasons=(*choice.reasons, reason))


def _cut_pipeline(chain: tuple[P.Stage, ...], how: P.StreamChain, order: str) -> str:
    """How a pipeline cut where a link needs Spark SQL runs (docs/streaming.md, "Links in
    Spark SQL")."""
    segments: list[list[P.Stage]] = [[chain[0]]]
    cuts = []
    for up, down, link in zip(chain, chain[1:], how.links, strict=False):
        if link.sql:
            segments.append([])
            cuts.append(f"{down.name} reads {up.name}")
        segments[-1].append(down)
    held = " and ".join(f"[{P.chain_text(tuple(s))}]" for s in segments)
    if how.partition:
        grouping = (
            f"each partitioned by {', '.join(how.partition_text)} (one processor per value "
            f"of {chain[0].name}'s keys {', '.join(how.partition_text)}, which every later "
            "stage groups by too)"
        )
    else:
        grouping = f"each ONE processor for all keys (parallelism 1: {how.serial})"
    return (
        f"runs on a stream as {len(segments)} stateful operators in one streaming query, cut "
        f"where a link needs Spark SQL ({'; '.join(cuts)}: the view's HAVING and SELECT, "
        "or a window rank's outer WHERE and SELECT, and the reader's WHERE, keys and "
        "inputs run in Spark between them); they hold the "
        f"operators of {held}, {grouping}; a processor tags the rows it fires with the "
        "watermark rise that fired them and the next one takes them before that rise, "
        f"{order}"
    )


def _in_stream_join(choice: P.EngineChoice, q: P.WindowJoin) -> P.EngineChoice:
    """``choice`` with how the window join ``q`` runs on a stream (docs/streaming.md)."""
    sides = " and ".join(
        ("a window table over " if s.window is not None else "")
        + (f"view {s.source.view}" if s.source.view else s.source.name)
        for s in q.sides
    )
    plan = choice.stream
    assert isinstance(plan, P.StreamJoin)
    order = (
        "each window joins once, when the watermark passes its end, after the rows its "
        "views fire at that rise, as Flink's WindowJoinOperator"
    )
    cut = " and ".join(
        f"view {s.source.view}" for s, how in zip(q.sides, plan.sides, strict=True) if how.sql
    )
    if plan.partition_text and cut:
        keys = " and ".join(plan.partition_text)
        text = (
            f"runs on a stream in the join processor, partitioned by {keys}, after the "
            f"pipeline of {cut} runs as stateful operators of its own, partitioned by the "
            "view's keys that its pipeline carries from its first stage (the view's HAVING "
            "and SELECT, and any link of its pipeline that needs Spark SQL, run in Spark "
            "between them and the join): one stateful processor per value of "
            f"{keys} holds the join and the other side for the rows of that value (rows "
            "of different values never match); a view's rows carry the watermark rise "
            f"that fired them, and {order}"
        )
    elif plan.partition_text:
        keys = " and ".join(plan.partition_text)
        text = (
            f"runs on a stream in the join processor, partitioned by {keys}: one stateful "
            f"processor per value of them holds {sides} (each view with its pipeline) and "
            f"the join, for the rows of that value (rows of different values never match); "
            f"{order}"
        )
    elif cut:
        text = (
            f"runs on a stream in the join processor, after the pipeline of {cut} runs as "
            "stateful operators of its own (the view's HAVING and SELECT, and any link of "
            "its pipeline that needs Spark SQL, run in Spark between them and the join): ONE "
            "stateful processor holds the join and the pipelines of the other view sides, "
            f"for all keys (parallelism 1: {plan.serial}); a view's rows carry the watermark "
            f"rise that fired them, and {order}"
        )
    else:
        text = (
            f"runs on a stream in the join processor: ONE stateful processor holds {sides} "
            "(each view with its pipeline) and the join, for all keys (parallelism 1: "
            f"{plan.serial}); {order}"
        )
    if any(plan.partners):
        text += (
            f"; ON's conditions besides its equalities are Spark SQL over each row of the "
            f"{q.kind.value} join's outer side(s) and the rows it matches on the equalities, "
            "which the processor gives with it: Spark keeps the pairs the whole ON matches, "
            "and the row unmatched when none does"
        )
    how = P.Reason(text, q.span)
    return dataclasses.replace(choice, reasons=(*choice.reasons, how))


def _of_two_sources(choice: P.EngineChoice, q: P.WindowJoin, program: P.Program) -> P.EngineChoice:
    """``choice`` saying how a window join of two sources gets its watermark on a stream."""
    roots = [program.side_root(s.source) for s in q.sides]
    if roots[0].name.lower() == roots[1].name.lower():
        return choice
    how = P.Reason(
        f"a window join of two sources ({roots[0].name} and {roots[1].name}): each source "
        "streams with its own watermark and Spark's, the minimum of the two (its "
        "multipleWatermarkPolicy min), is the join's, as Flink's two-input operator keeps it",
        q.span,
    )
    return dataclasses.replace(choice, reasons=(*choice.reasons, how))


def choose_engine(
    q: P.Stage,
    engine: str = "auto",
    caps: Capabilities | None = None,
    *,
    streaming: bool = False,
    upstream: P.Stage | None = None,
) -> P.EngineChoice:
    """The engine of one query; ``caps`` defaults to the native abilities for ``streaming``.

    ``upstream`` is the (planned) view ``q`` reads, when it reads one.
    """
    caps = caps if caps is not None else native_capabilities(streaming)
    blockers = _BLOCKERS[type(q)](q, caps, upstream)
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


def _native_reasons(q: P.Stage) -> tuple[P.Reason, ...]:
    """Why ``q`` runs natively (:data:`_NATIVE_REASONS`, by its kind)."""
    reasons: tuple[P.Reason, ...] = _NATIVE_REASONS[type(q)](q)
    return reasons


def _native_join(q: P.WindowJoin) -> tuple[P.Reason, ...]:
    return (
        P.Reason(
            "window join of final window rows (views of window aggregates, window tables "
            "replayed in event-time order): no row is late for it, so Spark's join of the "
            "two sides' windows gives identical rows",
            q.span,
        ),
    )


def _native_rank(q: P.WindowRank) -> tuple[P.Reason, ...]:
    what = f"view {q.source.view}" if q.window is None else "a window table"
    return (
        P.Reason(
            f"window {'deduplication' if q.keep.deduplicates else 'Top-N'} over "
            f"{what}: no row is late for it, and Spark's {q.keep.function.lower()} over each "
            "window"
            + (
                " gives identical rows (equal rows share a rank)"
                if q.keep.tied
                else ", equal rows in the order they arrive, gives identical rows"
            ),
            q.span,
        ),
    )


def _native_over(q: P.OverAggregate) -> tuple[P.Reason, ...]:
    return (
        P.Reason(
            "OVER aggregation replayed in event-time order: no row is late for it (a row's "
            "time is above every time its key fired), so Spark's window functions over the "
            f"rows ({q.frame_text}) give identical rows",
            q.window_span or q.span,
        ),
    )


def _native_aggregate(q: P.Query) -> tuple[P.Reason, ...]:
    if q.window.domain is P.TimeDomain.PROCESSING:
        reasons = [
            P.Reason(
                f"{q.window.kind} over processing time from column "
                f"'{q.source.processing_time}' with the default trigger and only incremental "
                "aggregates: each row's clock is that column's running maximum in replay "
                "order (a Spark window over it), every window fires once, when the clock "
                "reaches its end, and the windows it never reaches do not fire, as on the "
                "operator engine",
                q.window.span,
            )
        ]
    else:
        reasons = [
            P.Reason(
                f"{q.window.kind} on event time with the default WATERMARK trigger, no "
                "evictor, no lateness and only incremental aggregates: Spark's native "
                "aggregation gives identical rows",
                q.window.span,
            )
        ]
    if q.source.arrival_order is not None and q.window.domain is P.TimeDomain.EVENT:
        reasons.append(
            P.Reason(
                f"arrival_order = '{q.source.arrival_order}': each row's watermark is the "
                "largest event time before it in arrival order less the delay (a Spark window "
                "over the replay order), and a row is left out of the windows late for it and "
                "counted late as the operator drops it",
                q.source.span,
            )
        )
    if sliced(q):
        reasons.append(
            P.Reason(
                f"{q.window.kind} in two phases: each slide's rows aggregated once per key, "
                "the partials merged per window (Flink SQL's slicing window aggregation)",
                q.window.span,
            )
        )
    if q.accumulation is not None:
        # each window fires once and is cleaned up: what a pane keeps changes nothing
        reasons.append(
            P.Reason("EMIT's accumulation mode changes no row: each window fires once", q.span)
        )
    return tuple(reasons)


#: Per kind of stage: why it runs natively, and what keeps it from it
#: (``(stage, capabilities, upstream view)``; tests/compiler/test_dispatch.py checks both).
_NATIVE_REASONS: dict[type, Callable[[Any], tuple[P.Reason, ...]]] = {
    P.Query: _native_aggregate,
    P.WindowRank: _native_rank,
    P.WindowJoin: _native_join,
    P.OverAggregate: _native_over,
}


def native_blockers(
    q: P.Query, caps: Capabilities = NATIVE, upstream: P.Stage | None = None
) -> list[P.Reason]:
    """Every reason ``q`` needs the operator engine, in clause order.

    ``upstream``: the view ``q`` reads. A query over a view runs natively
    only over a native view: then every row of the view is a window's one
    ON_TIME firing, which reaches ``q`` before the watermark that fired it,
    so no row is late for ``q`` and Spark's aggregation of the view's output
    is the operator's (docs/native.md, "Pipelines").
    """
    out: list[P.Reason] = []

    def need(what: str, span, construct: str) -> None:
        why = caps.reason(construct)
        # "on a stream" only where batch would be native: the reasons shared with
        # batch read the same in `wql explain` and `wql explain --stream`
        stream_only = caps.streaming and not NATIVE.reason(construct)
        message = "needs the operator engine" + (" on a stream" if stream_only else "")
        out.append(P.Reason(f"{message}: {why}" if why else message, span, what))

    w = q.window
    if upstream is not None and (upstream.engine is None or upstream.engine.engine != "native"):
        need(f"FROM {upstream.name}", q.source.span, "operator_view")
    if q.source.arrival_order is not None:
        if not caps.arrival_order:
            need(f"arrival_order = '{q.source.arrival_order}'", q.source.span, "arrival_order")
        elif w.merging:
            need(f"arrival_order = '{q.source.arrival_order}'", q.source.span, "arrival_sessions")
        elif not _orderable_arrival(q.source):
            # the replay refuses it when it runs, with the column's type
            need(f"arrival_order = '{q.source.arrival_order}'", q.source.span, "arrival_order")
    if w.kind not in caps.windows:
        need(f"{w.kind} window", w.span, w.kind)
    elif w.domain is P.TimeDomain.PROCESSING and not (
        caps.processing_time and _replayable_clock(q.source)
    ):
        need(f"{w.kind}(PROCTIME(), ...)", w.span, "processing_time")
    elif w.domain is P.TimeDomain.PROCESSING and w.merging:
        need(f"{w.kind}(PROCTIME(), ...)", w.span, "processing_sessions")
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
        if q.source.view is not None:
            need(f"keyed SESSION over view {q.source.view}", w.span, "view_keyed_sessions")
        else:
            need(
                "keyed SESSION with a zero watermark delay",
                et.span or w.span,
                "zero_delay_keyed_sessions",
            )
    if caps.reserved_prefix:
        for c in q.source.columns:
            if c.name.lower().startswith(caps.reserved_prefix):
                need(f"source column {c.name!r}", c.span or q.source.span, "reserved_prefix")
    if et is not None and et.idle_ms is not None and not caps.idle_sources:
        need(
            f"IDLE AFTER {duration(et.idle_ms)}",
            et.idle_span or et.span or q.source.span,
            "idle_sources",
        )
    if q.trigger is not None and not _default_like(q):
        construct = "finishing_trigger" if q.trigger.finishes else "trigger"
        need(f"TRIGGER {trigger_text(q.trigger).spelling}", q.trigger.span, construct)
    if q.evictor is not None and not caps.evictors:
        need(f"EVICT {evictor_text(q.evictor).spelling}", q.evictor.span, "evictor")
    if q.changelog is not None and not caps.changelog:
        need("EMIT CHANGELOG", q.changelog.span, "changelog")
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
        elif float_sum(a) and (not caps.float_sums or q.source.view is not None):
            construct = "view_float_sums" if q.source.view is not None else "float_sums"
            need(f"{a.kind.value} of {a.arg.type.ddl if a.arg else ''}", a.span, construct)
    for col in P.PANE_COLUMNS:
        if q.reads(col) and col not in caps.pane_columns:
            need(col, q.span, "pane_columns")
    if not caps.late_rows and et is not None and w.domain is P.TimeDomain.EVENT:
        # last: the one reason that holds for every event-time query on a stream
        need(f"WATERMARK FOR {et.column}", et.span or q.source.span, "late_rows")
    return out


#: Aggregates whose partial results per slice merge into the window's exactly, in any
#: order: counts, integer sums, and MIN/MAX of non-floating values (-0.0 and 0.0 compare
#: equal, so which one a floating MIN/MAX keeps depends on the order).
_MERGEABLE = {
    P.AggKind.COUNT_STAR: lambda t: True,
    P.AggKind.COUNT: lambda t: True,
    P.AggKind.SUM: lambda t: t.is_integral,
    P.AggKind.MIN: lambda t: t.kind not in ("FLOAT", "DOUBLE"),
    P.AggKind.MAX: lambda t: t.kind not in ("FLOAT", "DOUBLE"),
}


def sliced(q: P.Query, caps: Capabilities = NATIVE) -> bool:
    """Whether the native engine aggregates ``q`` in two phases over slices, as Flink
    SQL's slicing window aggregation does (docs/native.md, "Slices").

    A HOP whose size is a multiple of its slide, or a CUMULATE: every row of one
    slide (step) is in the same windows, so each slice's rows are aggregated once
    (per key, and per count of the windows late for them) and the partials are
    merged per window, instead of one copy of every row per window. Batch only,
    and only for aggregates whose partials merge exactly (:data:`_MERGEABLE`).
    """
    w = q.window
    if caps.streaming:
        return False
    if not (isinstance(w, P.Cumulate) or (isinstance(w, P.Hop) and w.size_ms % w.slide_ms == 0)):
        return False
    return all(
        a.kind in _MERGEABLE and (a.arg is None or _MERGEABLE[a.kind](a.arg.type))
        for a in q.aggregates
    )


def _replayable_clock(source: P.SourceRef) -> bool:
    """Whether the source declares a processing-time column batch replay reads as a clock
    the native engine computes alike (a TIMESTAMP, a DATE or an integer of ms), and
    orders its rows by values it computes alike (an arrival key, if any)."""
    column = source.column(source.processing_time) if source.processing_time else None
    if column is None or not (column.type.is_integral or column.type.is_temporal):
        return False
    return source.arrival_order is None or _orderable_arrival(source)


def _orderable_arrival(source: P.SourceRef) -> bool:
    """Whether the source's arrival_order column is one batch replay orders by (a number,
    a TIMESTAMP or a DATE)."""
    column = source.column(source.arrival_order) if source.arrival_order else None
    return column is not None and (column.type.is_numeric or column.type.is_temporal)


def rank_blockers(
    q: P.WindowRank, caps: Capabilities = NATIVE, upstream: P.Stage | None = None
) -> list[P.Reason]:
    """Every reason the window rank ``q`` needs the operator engine (``upstream``: the
    view it reads, planned; None checks the rank alone).

    Natively, a window rank is Spark's ``row_number`` over each window, with
    equal rows in the order the operator gets them: a view's rows of one
    window fire together, ordered by the view's grouping keys (the pipeline's
    order, docs/architecture.md), so the view must select them; a window
    table's rows come in replay order (event time, then input order), so no
    row is late for the rank and none may come out of order (``arrival_order``).
    """
    out: list[P.Reason] = []

    def need(what: str, span, construct: str) -> None:
        why = caps.reason(construct)
        message = "needs the operator engine" + (" on a stream" if caps.streaming else "")
        out.append(P.Reason(f"{message}: {why}" if why else message, span, what))

    if not caps.window_rank:
        need("ROW_NUMBER() OVER", q.span, "window_rank")
        return out
    if q.window is not None and q.window.merging:
        need(f"TABLE({q.window.kind}(...))", q.window.span, "rank_session_table")
    if q.source.view is not None:
        # upstream None: the caller (the native backend) checks the rank alone
        if upstream is not None and (upstream.engine is None or upstream.engine.engine != "native"):
            need(f"FROM {q.source.view}", q.source.span, "operator_view")
        elif q.window is not None:
            need(f"a window table over view {q.source.view}", q.source.span, "rank_view_table")
        elif q.ties is None and not q.keep.tied:
            # RANK/DENSE_RANK give equal rows one rank: their order changes no row
            need(f"FROM {q.source.view}", q.source.span, "rank_view_keys")
    elif q.source.arrival_order is not None:
        need(f"arrival_order = '{q.source.arrival_order}'", q.source.span, "arrival_order")
    return out


def join_blockers(q: P.WindowJoin, caps: Capabilities = NATIVE) -> list[P.Reason]:
    """Every reason the window join ``q`` needs the operator engine.

    A window join is Spark's join of both sides' rows of each window on both
    engines; only rows that come behind the watermark (late: dropped and
    counted) need the operator engine's replay, and only a window table over
    a source replayed out of event-time order (``arrival_order``) has them:
    a view's rows are final ON_TIME rows, which reach the join before the
    watermark passes their window.
    """
    out: list[P.Reason] = []
    if not caps.window_join:
        out.append(P.Reason(f"needs the operator engine: {caps.reason('window_join')}", q.span))
    for side in q.sides:
        src = side.source
        if side.window is not None and src.view is None and src.arrival_order is not None:
            why = caps.reason("join_arrival_order")
            out.append(
                P.Reason(
                    f"needs the operator engine: {why}",
                    src.span,
                    f"arrival_order = '{src.arrival_order}'",
                )
            )
    return out


def over_blockers(
    q: P.OverAggregate, caps: Capabilities = NATIVE, upstream: P.Stage | None = None
) -> list[P.Reason]:
    """Every reason the OVER aggregation ``q`` needs the operator engine.

    Natively it is Spark's window functions over the rows (``over_sql``),
    which aggregate every row: exact when no row is late, i.e. in event-time
    replay order (a row's time is then above every time its key fired, and
    above the watermark), and with the frame's order fixed (ROWS orders equal
    times by input order; a RANGE frame's equal times share it, so only a
    floating-point sum sees their order).
    """
    out: list[P.Reason] = []

    def need(what: str, span, construct: str) -> None:
        why = caps.reason(construct)
        message = "needs the operator engine" + (" on a stream" if caps.streaming else "")
        out.append(P.Reason(f"{message}: {why}" if why else message, span, what))

    if not caps.over_aggregate:
        need("agg(...) OVER (...)", q.window_span or q.span, "over_aggregate")
        return out
    if q.source.arrival_order is not None:
        need(f"arrival_order = '{q.source.arrival_order}'", q.source.span, "over_arrival_order")
    et = q.source.event_time
    if et is not None and et.idle_ms is not None and not caps.idle_sources:
        need(
            f"IDLE AFTER {duration(et.idle_ms)}",
            et.idle_span or et.span or q.source.span,
            "idle_sources",
        )
    if q.late_output is not None:
        need(f"LATE DATA TO {q.late_output}", q.late_output_span or q.span, "over_late_output")
    for a in q.aggregates:
        if a.kind not in caps.aggregates or a.kind is P.AggKind.COUNT_DISTINCT:
            need(a.kind.value, a.span, "over_aggregate_kind")
        elif float_sum(a) and q.frame is P.OverFrame.RANGE:
            need(f"{a.kind.value} of {a.arg.type.ddl if a.arg else ''}", a.span, "over_float_sums")
    if caps.reserved_prefix:
        for c in q.source.columns:
            if c.name.lower().startswith(caps.reserved_prefix):
                need(f"source column {c.name!r}", c.span or q.source.span, "reserved_prefix")
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


_BLOCKERS: dict[type, Callable[[Any, Capabilities, P.Stage | None], list[P.Reason]]] = {
    P.Query: native_blockers,
    P.WindowRank: rank_blockers,
    P.WindowJoin: lambda q, caps, upstream: join_blockers(q, caps),
    P.OverAggregate: over_blockers,
}
