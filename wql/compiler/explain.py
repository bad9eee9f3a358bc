"""Plan -> the text ``wql explain`` prints.

The output is deterministic (no addresses, no hash order, no timestamps),
so golden files under ``tests/compiler/golden/`` pin it (``<name>.explain``
for a batch source, ``<name>.stream.explain`` for a streaming one, what
``wql explain --stream`` prints); each query shows the plan tree top-down,
then its engine and the reasons for it.
"""

from __future__ import annotations

from wql.compiler import plan as P
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
    """The explain text of a whole program (queries in file order)."""
    return "\n\n".join(explain_query(q) for q in program.queries) + "\n"


def explain_query(q: P.Query) -> str:
    engine = q.engine.engine if q.engine else "(not planned)"
    stream = ", on a stream" if q.engine is not None and q.engine.streaming else ""
    lines = [f"query {q.name}  [engine: {engine}{stream}]"]
    add = lines.append

    src = q.source
    cols = ", ".join(f"{c.name} {c.type}" for c in src.columns)
    add(f"  source {src.name} ({cols})")
    if src.event_time is not None:
        et = src.event_time
        add(
            f"    event time: {et.column}, watermark = max({et.column}) - "
            f"{duration(et.delay_ms)} - 1 ms"
        )
    else:
        add("    event time: none")
    if src.arrival_order is not None:
        add(f"    replay order: arrival_order column {src.arrival_order}")
    else:
        add("    replay order: event time, ties by input order")
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
    add(f"  window: {_window(q.window)}")
    clocks = set(P.trigger_domains(q.effective_trigger))
    if q.window.domain is not None:
        clocks.add(q.window.domain)
    if not clocks:
        add("  clocks: none (fires on rows only)")
    else:
        names = " + ".join(str(d) for d in sorted(clocks, key=lambda d: d.value))
        mixed = " (mixed: the host feeds both clocks globally)" if len(clocks) > 1 else ""
        add(f"  clocks: {names}{mixed}")

    origin = "explicit" if q.trigger is not None else "default"
    add(f"  trigger ({origin}):")
    lines.extend(_trigger_lines(q.effective_trigger, 4))
    if q.effective_evictor is not None:
        origin = "explicit" if q.evictor is not None else f"from {q.window.kind}"
        add(f"  evictor ({origin}): {_evictor(q.effective_evictor)}")
    else:
        add("  evictor: none")
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
    add("  output:")
    for o in q.output:
        add(f"    {o.name} {o.type} = {o.expr.sql}")

    if q.engine is not None:
        forced = ", forced" if q.engine.forced else ""
        add(f"  engine: {q.engine.engine}{forced}{stream}")
        for r in q.engine.reasons:
            add(f"    - {r.text}")
    return "\n".join(lines)


def _uses_processing_time(q: P.Query) -> bool:
    return P.TimeDomain.PROCESSING in P.trigger_domains(q.effective_trigger)


def _time(w) -> str:
    return w.time_column if w.domain is P.TimeDomain.EVENT else "PROCTIME()"


def _offset(ms: int) -> str:
    return f", offset {duration(ms)}" if ms else ""


def _window(w: P.Window) -> str:
    if isinstance(w, P.Tumble):
        body = f"TUMBLE({_time(w)}, size {duration(w.size_ms)}{_offset(w.offset_ms)})"
    elif isinstance(w, P.Hop):
        body = (
            f"HOP({_time(w)}, slide {duration(w.slide_ms)}, size {duration(w.size_ms)}"
            f"{_offset(w.offset_ms)})"
        )
    elif isinstance(w, P.Cumulate):
        body = (
            f"CUMULATE({_time(w)}, step {duration(w.step_ms)}, size {duration(w.size_ms)}"
            f"{_offset(w.offset_ms)})"
        )
    elif isinstance(w, P.Session):
        body = f"SESSION({_time(w)}, gap {duration(w.gap_ms)}) [merging]"
    elif isinstance(w, P.DynamicSession):
        body = f"SESSION({_time(w)}, gap ms = {w.gap_ms.sql}) [merging, dynamic gap]"
    elif isinstance(w, P.CountWindow):
        slide = f", slide {w.slide}" if w.slide is not None else ""
        return f"COUNT_WINDOW(size {w.size}{slide}) over a global window"
    else:
        return "GLOBAL() (one window per key)"
    return f"{body} on {w.domain}"


def _trigger_lines(t: P.Trigger, indent: int) -> list[str]:
    pad = " " * indent
    merge = "" if t.mergeable else " [not mergeable]"
    if isinstance(t, P.WatermarkTrigger):
        head = "WATERMARK (fire when the watermark passes window_time)"
    elif isinstance(t, P.ProcessingTimeTrigger):
        head = "PROCESSING TIME (fire when processing time passes window_time)"
    elif isinstance(t, P.CountTrigger):
        head = f"COUNT({t.n}) (fire every {t.n} rows, no purge)"
    elif isinstance(t, P.EveryTrigger):
        head = f"EVERY {duration(t.interval_ms)} OF {t.domain.value} TIME"
    elif isinstance(t, P.DeltaTrigger):
        head = f"DELTA({t.expr.sql}, threshold {t.threshold:g})"
    elif isinstance(t, P.TimeoutTrigger):
        head = f"TIMEOUT after {duration(t.timeout_ms)} of processing time"
    elif isinstance(t, P.PurgingTrigger):
        head = "PURGING (every FIRE becomes FIRE_AND_PURGE)"
    elif isinstance(t, P.AnyTrigger):
        head = "ANY (fire when any child fires)"
    elif isinstance(t, P.AllTrigger):
        head = "ALL (fire when every child has fired since the last firing)"
    else:
        assert isinstance(t, P.EarlyLateTrigger)
        lines = [f"{pad}WATERMARK WITH (on-time firing at the watermark){merge}"]
        if t.early is not None:
            lines.append(f"{pad}  EARLY:")
            lines.extend(_trigger_lines(t.early, indent + 4))
        lines.append(f"{pad}  LATE:" if t.late is not None else f"{pad}  LATE: every late row")
        if t.late is not None:
            lines.extend(_trigger_lines(t.late, indent + 4))
        return lines
    lines = [f"{pad}{head}{merge}"]
    for c in t.children:
        lines.extend(_trigger_lines(c, indent + 2))
    return lines


def _evictor(e: P.Evictor) -> str:
    pos = "AFTER" if e.after else "BEFORE"
    if isinstance(e, P.CountEvictor):
        return f"COUNT({e.n}) {pos} the window function (keep the last {e.n} rows)"
    if isinstance(e, P.TimeEvictor):
        return (
            f"TIME({duration(e.interval_ms)}) {pos} the window function "
            f"(keep rows with ts > max_ts - {duration(e.interval_ms)})"
        )
    return f"DELTA({e.expr.sql}, threshold {e.threshold:g}) {pos} the window function"
