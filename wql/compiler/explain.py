"""Plan -> text: what ``wql explain`` prints, and the one printer of plan nodes.

The output is deterministic (no addresses, no hash order, no timestamps),
so golden files under ``tests/compiler/golden/`` pin it (``<name>.explain``
for a batch source, ``<name>.stream.explain`` for a streaming one, what
``wql explain --stream`` prints); each query shows the plan tree top-down,
then its engine and the reasons for it.

Windows, triggers and evictors are printed through one table per node
family (``functools.singledispatch``: :func:`window_text`,
:func:`trigger_text`, :func:`evictor_text`), one handler per plan class;
``tests/compiler/test_dispatch.py`` fails when a plan class has none. The
same handlers give the explain tree and the short WQL spelling the
planner's reasons and the binder's messages use.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass

from wql.compiler import plan as P
from wql.compiler.clock_dependence import watermark_dependence
from wql.runtime.aggregates import AGGREGATE_KINDS

_UNITS = (("d", 86_400_000), ("h", 3_600_000), ("min", 60_000), ("s", 1_000))


def duration(ms: int) -> str:
    """``90000`` -> ``'1 min 30 s'``; exact, largest units first (``'250 ms'``, ``'0 ms'``)."""
    if ms == 0:
        return "0 ms"
    sign = "-" if ms < 0 else ""
    rest = abs(ms)
    parts = []
    for name, size in _UNITS:
        if rest >= size:
            parts.append(f"{rest // size} {name}")
            rest %= size
    if rest:
        parts.append(f"{rest} ms")
    return sign + " ".join(parts)


def explain(program: P.Program) -> str:
    """The explain text of a whole program: its dataflow when a query reads a view,
    then the queries in file order."""
    parts = [explain_query(q, program) for q in program.queries]
    if any(s.view is not None for q in program.queries for s in P.inputs_of(q)):
        parts.insert(0, dataflow(program))
    return "\n\n".join(parts) + "\n"


def dataflow(program: P.Program) -> str:
    """The program as a DAG: one line per query, from its inputs to it, with its engine."""
    lines = ["dataflow (each query's inputs -> the query [engine])"]
    external = {v.name.lower() for v in program.views}

    def origin(s: P.SourceRef) -> str:
        if s.view is None:
            return f"source {s.name}"
        return f"{s.view} (another file)" if s.view.lower() in external else s.view

    for q in program.queries:
        engine = q.engine.engine if q.engine else "not planned"
        inputs = ", ".join(origin(s) for s in P.inputs_of(q))
        lines.append(f"  {inputs} -> {q.name} [{engine}]")
    return "\n".join(lines)


def explain_query(q: P.Stage, program: P.Program | None = None) -> str:
    """What ``wql explain`` prints of one stage (:data:`STAGES`, by its kind)."""
    text: str = STAGES[type(q)](q, program)
    return text


def explain_aggregate(q: P.Query, program: P.Program | None = None) -> str:
    lines = _header(q)
    add = lines.append

    src = q.source
    lines.extend(_input(q, program))
    if q.window.domain is P.TimeDomain.PROCESSING or _uses_processing_time(q):
        where = f"column {src.processing_time}" if src.processing_time else "wall clock"
        add(f"    processing time: {where}")

    add(f"  filter: {q.filter.sql}" if q.filter is not None else "  filter: none")
    if q.keys:
        add("  keys:")
        for k in q.keys:
            add(f"    {k.name} {k.type} = {k.expr.sql}")
    else:
        add("  keys: none (all rows share one key)")
    add(f"  window: {window_text(q.window)}")
    clocks = set(P.trigger_domains(q.effective_trigger))
    if q.window.domain is not None:
        clocks.add(q.window.domain)
    if not clocks:
        add("  clocks: none (fires on rows only)")
    else:
        names = " + ".join(str(d) for d in sorted(clocks, key=lambda d: d.value))
        mixed = " (mixed: the host feeds both clocks globally)" if len(clocks) > 1 else ""
        add(f"  clocks: {names}{mixed}")
    streamed = q.engine is not None and q.engine.streaming
    dependence = None if streamed else watermark_dependence(q)
    if streamed:
        pass  # a stream's watermark is its own; the property is batch replay's
    elif dependence is None:
        add(
            "  watermark sequence: the output does not depend on it (batch: each key "
            "partition advances the watermark on its own rows)"
        )
    else:
        add(f"  watermark sequence: the output depends on it: {dependence.text}")

    origin = "explicit" if q.trigger is not None else "default"
    add(f"  trigger ({origin}):")
    lines.extend(_trigger_lines(q.effective_trigger, 4))
    if q.effective_evictor is not None:
        origin = "explicit" if q.evictor is not None else f"from {q.window.kind}"
        add(f"  evictor ({origin}): {evictor_text(q.effective_evictor).described}")
    else:
        add("  evictor: none")
    if q.accumulation is not None:
        add(f"  accumulation (EMIT): {accumulation_text(q.accumulation)}")
    if q.changelog is not None:
        key = ", ".join(q.changelog_key) or "the grouping keys"
        add(
            f"  output mode (EMIT CHANGELOG): {P.OP_COLUMN} = +I / -U, +U / -D; a row is "
            f"({key}), a window's rows in pane_index order, a row before its retraction"
        )
    add(f"  allowed lateness: {duration(q.allowed_lateness_ms)}")
    if q.late_output is not None:
        late_cols = ", ".join(f"{c.name} {c.type}" for c in q.late_schema or ())
        add(f"  late output: {q.late_output} ({late_cols})")
    else:
        add("  late output: none (late rows are counted as dropped)")

    keeps_rows = q.effective_evictor is not None
    add("  aggregates:" if q.aggregates else "  aggregates: none")
    for a in q.aggregates:
        form = (
            "over the rows kept after eviction"
            if keeps_rows
            else AGGREGATE_KINDS[a.kind.value].state
        )
        add(f"    {a.name} {a.type} = {a.call_sql}  [{form}]")
    if keeps_rows:
        add("    state: rows (an evictor needs them), aggregates computed at each firing")
    else:
        merged = ", merged on session merge" if q.window.merging else ""
        add(f"    state: one accumulator per window{merged}")
    add(f"  having: {q.having.sql}" if q.having is not None else "  having: none")
    lines.extend(_output_and_engine(q))
    return "\n".join(lines)


def _header(q: P.Stage) -> list[str]:
    engine = q.engine.engine if q.engine else "(not planned)"
    stream = ", on a stream" if q.engine is not None and q.engine.streaming else ""
    return [f"query {q.name}  [engine: {engine}{stream}]"]


def _input(q: P.OperatorStage, program: P.Program | None) -> list[str]:
    if q.source.view is not None:
        return _view_input(q, program)
    return _source_input(q.source, q.engine is not None and q.engine.streaming)


def _output_and_engine(q: P.Stage) -> list[str]:
    lines = ["  output:"]
    if isinstance(q, P.Query) and q.changelog is not None:
        lines.append(f"    {P.OP_COLUMN} STRING = the change: +I, -U, +U or -D")
    lines += [f"    {o.name} {o.type} = {o.expr.sql}" for o in q.output]
    if q.engine is not None:
        forced = ", forced" if q.engine.forced else ""
        stream = ", on a stream" if q.engine.streaming else ""
        lines.append(f"  engine: {q.engine.engine}{forced}{stream}")
        lines += [f"    - {r.text}" for r in q.engine.reasons]
    return lines


def explain_join(q: P.WindowJoin, program: P.Program | None = None) -> str:
    """A window join (Flink SQL's window join), as ``wql explain`` shows it."""
    lines = _header(q)
    add = lines.append
    left, right = q.sides
    add(
        f"  window join: {q.kind.value} JOIN of {left.qualifier} and {right.qualifier}, each "
        "window once, when the watermark passes its end"
    )
    for side in q.sides:
        cols = ", ".join(f"{c.name} {c.type}" for c in side.columns)
        if side.window is not None:
            what = "view" if side.source.view else "source"
            add(
                f"  {side.qualifier}: window table {window_text(side.window)} over {what} "
                f"{side.source.name} ({cols})"
            )
        else:
            add(f"  {side.qualifier}: view {side.source.name} ({cols})")
            add(f"    windows: {window_text(side.windows)} ({side.bounds[0]}, {side.bounds[1]})")
        if program is not None and side.source.view is not None:
            view = program.view(side.source.view)
            chain = P.chain_text(program.pipeline(view))
            add(f"    pipeline: source {program.root_source(view).name} -> {chain}")
    roots = [program.side_root(s.source) for s in q.sides] if program is not None else []
    if len(roots) == 2 and roots[0].name.lower() != roots[1].name.lower():
        order = (
            f"their shared arrival order ({roots[0].arrival_order}, {roots[1].arrival_order}; "
            f"ties: {roots[0].name} first)"
            if roots[0].arrival_order is not None
            else "event time (no row is behind its own source's watermark)"
        )
        add(
            f"  sources: {roots[0].name} and {roots[1].name}, each with its own watermark; "
            f"the join's is their minimum; batch replay interleaves their rows by {order}"
        )
    add("  joined:")
    for side in q.sides:
        for n, c in zip(side.internal, side.columns, strict=True):
            add(f"    {n} {c.type} = {side.qualifier}.{c.name}")
    add(f"  on: {q.on.sql}")
    add(f"  where: {q.where.sql}" if q.where is not None else "  where: none")
    add("  late rows: a row of a window that has joined already is dropped and counted")
    lines.extend(_output_and_engine(q))
    return "\n".join(lines)


def explain_over(q: P.OverAggregate, program: P.Program | None = None) -> str:
    """An OVER aggregation (Flink SQL's over aggregate), as ``wql explain`` shows it."""
    lines = _header(q)
    add = lines.append
    lines.extend(_input(q, program))
    add(f"  where: {q.filter.sql}" if q.filter is not None else "  where: none")
    keys = ", ".join(f"{k.name} = {k.expr.sql}" for k in q.keys) or "none (one partition)"
    add(f"  partition by: {keys}")
    order = q.source.event_time.column if q.source.event_time is not None else "?"
    add(f"  over: ORDER BY {order} {q.frame_text}")
    if q.preceding is None:
        add("    frame: the key's rows up to the row's time (ROWS: up to the row)")
        add("    late: a row at or below the watermark")
    elif q.frame is P.OverFrame.RANGE:
        add(f"    frame: the key's rows with time in [ts - {duration(q.preceding)}, ts]")
        add("    late: a row at or below the last time its key fired (0 before any)")
    else:
        add(f"    frame: the row and the {q.preceding} before it in (time, arrival) order")
        add("    late: a row at or below the last time its key fired (0 before any)")
    add("    each row comes out once, when the watermark passes its time")
    add("  aggregates:")
    for a in q.aggregates:
        add(f"    {a.name} {a.type} = {a.call_sql}")
    if q.late_output is not None:
        add(f"  late rows: to {q.late_output}")
    else:
        add("  late rows: dropped and counted")
    lines.extend(_output_and_engine(q))
    return "\n".join(lines)


def explain_rank(q: P.WindowRank, program: P.Program | None = None) -> str:
    """A window Top-N or deduplication (Flink SQL's window rank), as ``wql explain`` shows it."""
    lines = _header(q)
    add = lines.append
    lines.extend(_input(q, program))
    start, end = q.window_bounds
    if q.window is not None:
        add(f"  window table: {window_text(q.window)}")
        if q.window.merging:
            add(
                "    its rows: the table's rows, each in its key's session (rows within the gap "
                "merge), with window_start, window_end and window_time once the session closes"
            )
        else:
            add(
                "    its rows: the table's rows, each in every window it falls in, with "
                "window_start, window_end and window_time"
            )
    else:
        add(f"  windows: the view's, from {start} and {end} (one final row per window)")
    add(f"  filter: {q.filter.sql}" if q.filter is not None else "  filter: none")
    keys = "".join(f", {k.name} {k.type}" for k in q.keys)
    add(f"  partition: each window ({start}, {end}){keys}")
    order = ", ".join(o.expr.sql + (" DESC" if o.descending else "") for o in q.order)
    if q.keep is P.RankKeep.TOP:
        add(f"  window Top-N: rows 1 to {q.limit} by {order}, equal rows in arrival order")
    elif q.keep.tied:
        add(
            f"  window Top-N: every row whose {q.keep.function}() is 1 to {q.limit} by {order}; "
            "equal rows share a rank, so ties can keep more rows"
        )
    else:
        which = "first" if q.keep is P.RankKeep.FIRST else "last"
        add(
            f"  window deduplication: the {which} row by {order} (the time attribute); "
            f"equal times keep the {which} to arrive"
        )
    add(
        "  fires: when the watermark passes a window's end; a row of a window that has "
        "fired is late: dropped and counted"
    )
    add("  ranked:")
    for c in q.inner:
        add(f"    {c.name} {c.type} = {c.expr.sql}")
    add(
        f"  condition: {q.condition.sql}"
        if q.condition is not None
        else f"  condition: {q.rank_column} <= {q.limit}"
    )
    lines.extend(_output_and_engine(q))
    return "\n".join(lines)


def _source_input(src: P.SourceRef, stream: bool) -> list[str]:
    cols = ", ".join(f"{c.name} {c.type}" for c in src.columns)
    lines = [f"  source {src.name} ({cols})"]
    if src.event_time is not None:
        et = src.event_time
        lines.append(
            f"    event time: {et.column}, watermark = max({et.column}) - "
            f"{duration(et.delay_ms)} - 1 ms"
        )
        if et.idle_ms is not None:
            if stream:
                replay = "on a stream: the idle monitor's heartbeat rows, under start_streams"
            elif src.processing_time:
                replay = f"batch replay: processing_time column {src.processing_time}"
            else:
                replay = "no effect in batch replay without a processing_time column"
            lines.append(
                f"    idle after {duration(et.idle_ms)} without a row: the watermark advances "
                f"with processing time since the last row ({replay})"
            )
    else:
        lines.append("    event time: none")
    if src.arrival_order is not None:
        lines.append(f"    replay order: arrival_order column {src.arrival_order}")
    else:
        lines.append("    replay order: event time, ties by input order")
    return lines


def _view_input(q: P.OperatorStage, program: P.Program | None) -> list[str]:
    src = q.source
    cols = ", ".join(f"{c.name} {c.type}" for c in src.columns)
    lines = [f"  view {src.name} ({cols})"]
    if src.event_time is not None:
        lines.append(
            f"    event time: {src.event_time.column} (the view's window_time), "
            f"watermark = {src.name}'s, forwarded after its firings"
        )
    else:
        lines.append("    event time: none (the view selects no window_time)")
    lines.append(
        '    order: the view\'s rows as they fire (docs/architecture.md, "Contract: pipelines")'
    )
    if program is not None:
        chain = P.chain_text(program.pipeline(q))
        lines.append(f"    pipeline: source {program.root_source(q).name} -> {chain}")
    return lines


def accumulation_text(a: P.Accumulation) -> str:
    """``EMIT``'s accumulation mode, e.g. ``EARLY accumulating, ON_TIME discarding, ...``."""

    def mode(timing: str) -> str:
        return "discarding" if timing in a.discarding else "accumulating"

    if not a.per_timing:
        every = mode(P.PANE_TIMINGS[0])
        what = "purge what they fired, as PURGING" if a.discarding else "keep what they fired"
        return f"{every} (every pane: panes {what})"
    return ", ".join(f"{t} {mode(t)}" for t in P.PANE_TIMINGS) + (
        " (a discarding pane purges what it fired)"
    )


def _uses_processing_time(q: P.Query) -> bool:
    return P.TimeDomain.PROCESSING in P.trigger_domains(q.effective_trigger)


# --------------------------------------------------------------------------- windows


def _time(w: P.Window) -> str:
    return w.time_column if w.domain is P.TimeDomain.EVENT and w.time_column else "PROCTIME()"


def _offset(ms: int) -> str:
    return f", offset {duration(ms)}" if ms else ""


def _on(w: P.Window, body: str) -> str:
    return f"{body} on {w.domain}"


@functools.singledispatch
def window_text(w: P.Window) -> str:
    """The window as ``wql explain`` shows it, e.g. ``TUMBLE(ts, size 1 min) on event time``."""
    raise TypeError(f"no text for window {type(w).__name__}")


@window_text.register
def _(w: P.Tumble) -> str:
    return _on(w, f"TUMBLE({_time(w)}, size {duration(w.size_ms)}{_offset(w.offset_ms)})")


@window_text.register
def _(w: P.Hop) -> str:
    return _on(
        w,
        f"HOP({_time(w)}, slide {duration(w.slide_ms)}, size {duration(w.size_ms)}"
        f"{_offset(w.offset_ms)})",
    )


@window_text.register
def _(w: P.Cumulate) -> str:
    return _on(
        w,
        f"CUMULATE({_time(w)}, step {duration(w.step_ms)}, size {duration(w.size_ms)}"
        f"{_offset(w.offset_ms)})",
    )


@window_text.register
def _(w: P.Session) -> str:
    return _on(w, f"SESSION({_time(w)}, gap {duration(w.gap_ms)}) [merging]")


@window_text.register
def _(w: P.DynamicSession) -> str:
    return _on(w, f"SESSION({_time(w)}, gap ms = {w.gap_ms.sql}) [merging, dynamic gap]")


@window_text.register
def _(w: P.CountWindow) -> str:
    slide = f", slide {w.slide}" if w.slide is not None else ""
    return f"COUNT_WINDOW(size {w.size}{slide}) over a global window"


@window_text.register
def _(w: P.GlobalWindow) -> str:
    return "GLOBAL() (one window per key)"


# --------------------------------------------------------------------------- triggers


@dataclass(frozen=True)
class NodeText:
    """How one trigger or evictor reads.

    ``keyword`` names the construct (``COUNT``, ``WATERMARK WITH``);
    ``spelling`` is the node as WQL on one line (``PURGING COUNT(10)``; the
    planner's reasons quote it); ``described`` is the explain line, the node
    with what it does. ``branches`` are a trigger's children as the explain
    tree shows them, each under an optional label (``EARLY:``); a label
    without a child stands alone (``LATE: every late row``).
    """

    keyword: str
    spelling: str
    described: str
    branches: tuple[tuple[str | None, P.Trigger | None], ...] = ()


def _children(t: P.Trigger) -> tuple[tuple[str | None, P.Trigger | None], ...]:
    return tuple((None, c) for c in t.children)


@functools.singledispatch
def trigger_text(t: P.Trigger) -> NodeText:
    """The trigger's :class:`NodeText` (children are printed by their own handlers)."""
    raise TypeError(f"no text for trigger {type(t).__name__}")


@trigger_text.register
def _(t: P.WatermarkTrigger) -> NodeText:
    return NodeText(
        "WATERMARK", "WATERMARK", "WATERMARK (fire when the watermark passes window_time)"
    )


@trigger_text.register
def _(t: P.ProcessingTimeTrigger) -> NodeText:
    return NodeText(
        "PROCESSING TIME",
        "PROCESSING TIME",
        "PROCESSING TIME (fire when processing time passes window_time)",
    )


@trigger_text.register
def _(t: P.CountTrigger) -> NodeText:
    return NodeText("COUNT", f"COUNT({t.n})", f"COUNT({t.n}) (fire every {t.n} rows, no purge)")


@trigger_text.register
def _(t: P.EveryTrigger) -> NodeText:
    text = f"EVERY {duration(t.interval_ms)} OF {t.domain.value} TIME"
    if t.after_first_row:
        after = f"AFTER {duration(t.interval_ms)} OF {t.domain.value} TIME"
        return NodeText(
            "AFTER",
            after,
            f"{after} (fire {duration(t.interval_ms)} after the first row of a pane, once per "
            "pane)",
        )
    if not t.on_update:
        return NodeText("EVERY", text, text)
    return NodeText(
        "EVERY",
        f"{text} ON UPDATE",
        f"{text} ON UPDATE (fire at the next {duration(t.interval_ms)} boundary after rows "
        "arrived, only if rows arrived since the last firing)",
    )


@trigger_text.register
def _(t: P.DeltaTrigger) -> NodeText:
    return NodeText(
        "DELTA",
        f"DELTA({t.expr.sql}, {t.threshold:g})",
        f"DELTA({t.expr.sql}, threshold {t.threshold:g})",
    )


@trigger_text.register
def _(t: P.TimeoutTrigger) -> NodeText:
    return NodeText(
        "TIMEOUT",
        f"TIMEOUT({trigger_text(t.child).spelling}, {duration(t.timeout_ms)})",
        f"TIMEOUT after {duration(t.timeout_ms)} of processing time",
        _children(t),
    )


@trigger_text.register
def _(t: P.PurgingTrigger) -> NodeText:
    return NodeText(
        "PURGING",
        f"PURGING {trigger_text(t.child).spelling}",
        "PURGING (every FIRE becomes FIRE_AND_PURGE)",
        _children(t),
    )


def _listed(t: P.AnyTrigger | P.AllTrigger) -> str:
    return ", ".join(trigger_text(c).spelling for c in t.triggers)


@trigger_text.register
def _(t: P.AnyTrigger) -> NodeText:
    return NodeText("ANY", f"ANY({_listed(t)})", "ANY (fire when any child fires)", _children(t))


@trigger_text.register
def _(t: P.AllTrigger) -> NodeText:
    return NodeText(
        "ALL",
        f"ALL({_listed(t)})",
        "ALL (fire when every child has fired since the last firing)",
        _children(t),
    )


@trigger_text.register
def _(t: P.OnceTrigger) -> NodeText:
    return NodeText(
        "ONCE",
        f"ONCE {trigger_text(t.child).spelling}",
        "ONCE (the first firing only, then the window is closed: later rows are dropped)",
        _children(t),
    )


@trigger_text.register
def _(t: P.UntilTrigger) -> NodeText:
    child, until = trigger_text(t.child).spelling, trigger_text(t.until).spelling
    return NodeText(
        "UNTIL",
        f"UNTIL({child}, {until})",
        "UNTIL (fire as the first child does until the second fires, a last pane, or the "
        "first finishes; then the window is closed)",
        (("fire:", t.child), ("finally:", t.until)),
    )


@trigger_text.register
def _(t: P.SequenceTrigger) -> NodeText:
    listed = ", ".join(trigger_text(c).spelling for c in t.triggers)
    return NodeText(
        "SEQUENCE",
        f"SEQUENCE({listed})",
        "SEQUENCE (one child at a time, the next when it finishes; closed after the last)",
        _children(t),
    )


@trigger_text.register
def _(t: P.EarlyLateTrigger) -> NodeText:
    spelling = ["WATERMARK WITH"]
    branches: list[tuple[str | None, P.Trigger | None]] = []
    if t.early is not None:
        spelling.append(f"EARLY {trigger_text(t.early).spelling}")
        branches.append(("EARLY:", t.early))
    if t.late is not None:
        spelling.append(f"LATE {trigger_text(t.late).spelling}")
        branches.append(("LATE:", t.late))
    else:
        branches.append(("LATE: every late row", None))
    return NodeText(
        "WATERMARK WITH",
        " ".join(spelling),
        "WATERMARK WITH (on-time firing at the watermark)",
        tuple(branches),
    )


def _trigger_lines(t: P.Trigger, indent: int) -> list[str]:
    """The trigger tree as ``wql explain`` prints it, children indented below."""
    pad = " " * indent
    text = trigger_text(t)
    merge = "" if t.mergeable else " [not mergeable]"
    lines = [f"{pad}{text.described}{merge}"]
    for label, child in text.branches:
        if label is None:
            assert child is not None
            lines.extend(_trigger_lines(child, indent + 2))
            continue
        lines.append(f"{pad}  {label}")
        if child is not None:
            lines.extend(_trigger_lines(child, indent + 4))
    return lines


# --------------------------------------------------------------------------- evictors


def _position(e: P.Evictor) -> str:
    return "AFTER" if e.after else "BEFORE"


def _evicts(e: P.Evictor, core: str, label: str, keeps: str = "") -> NodeText:
    return NodeText(
        label.partition("(")[0],
        core + (" AFTER" if e.after else ""),
        f"{label} {_position(e)} the window function{keeps}",
    )


@functools.singledispatch
def evictor_text(e: P.Evictor) -> NodeText:
    """The evictor's :class:`NodeText` (its spelling ends in ``AFTER`` when it evicts after)."""
    raise TypeError(f"no text for evictor {type(e).__name__}")


@evictor_text.register
def _(e: P.CountEvictor) -> NodeText:
    text = f"COUNT({e.n})"
    return _evicts(e, text, text, f" (keep the last {e.n} rows)")


@evictor_text.register
def _(e: P.TimeEvictor) -> NodeText:
    text = f"TIME({duration(e.interval_ms)})"
    return _evicts(e, text, text, f" (keep rows with ts > max_ts - {duration(e.interval_ms)})")


@evictor_text.register
def _(e: P.DeltaEvictor) -> NodeText:
    return _evicts(
        e,
        f"DELTA({e.expr.sql}, {e.threshold:g})",
        f"DELTA({e.expr.sql}, threshold {e.threshold:g})",
    )


#: The node printers by plan node family (tests/compiler/test_dispatch.py).
DISPATCH = {"window": window_text, "trigger": trigger_text, "evictor": evictor_text}


#: The printer of each kind of stage (tests/compiler/test_dispatch.py checks every kind).
STAGES: dict[type, Callable[..., str]] = {
    P.Query: explain_aggregate,
    P.WindowRank: explain_rank,
    P.WindowJoin: explain_join,
    P.OverAggregate: explain_over,
}
