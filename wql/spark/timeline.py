"""A picture of windows and firings (``wql run FILE --timeline OUT`` and ``Compiled.timeline``).

For a few keys of one query it shows what the operator engine did, row by
row, in replay order:

* every row as a point at its time (event time, or processing time for
  processing-time windows) and its arrival position; rows sent to
  ``LATE DATA TO`` and rows dropped (with the reason) stand out;
* the watermark each row saw, as a line over the arrival positions;
* every window that fired as a bar over ``[window_start, window_end)``,
  from its first row to its last firing;
* every firing as a mark at the window's ``window_time``, labelled with its
  ``pane_index`` and ``pane_timing``, at the arrival position where it
  happened (before the row whose clocks fired it, on the row that fired it,
  or at "end of input").

How the data is gathered: the source is replayed exactly as the batch host
replays it (:mod:`wql.spark.replay`), the chosen keys' rows are collected to
the driver, and one :class:`~wql.runtime.window_operator.WindowOperator` processes
them row by row with the clocks each row carries. That is the batch host's
own computation for those keys (docs/architecture.md, "Contract: batch
replay on Spark": a key's state changes only through its own rows and
timers), so the firings drawn are the firings in the query's result; rows
rejected by ``WHERE`` are not drawn. A query whose triggers mix time domains
also gets the global sequence of clock changes, as on Spark.

Drawing needs matplotlib, an optional extra: ``pip install 'wql[viz]'``.
``.png`` and ``.svg`` are the figure; ``.html`` is a standalone page with the
figure (inline SVG) and a table of firings per key.
"""

from __future__ import annotations

import html
import io
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pyarrow as pa
from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from wql.compiler import plan as P
from wql.compiler.backends.operator import build_operator
from wql.errors import ErrorCode, WqlSemanticError, WqlUnsupportedError
from wql.runtime.config import (
    EMIT_PANE_INDEX,
    EMIT_PANE_TIMING,
    EMIT_WINDOW_END,
    EMIT_WINDOW_START,
    EMIT_WINDOW_TIME,
)
from wql.runtime.windows import MAX_TIME, MIN_TIME
from wql.spark import batch as B
from wql.spark import layout as L
from wql.spark import replay as R

__all__ = ["FORMATS", "Firing", "KeyTimeline", "RowMark", "Timeline", "collect", "render"]

FORMATS = (".html", ".svg", ".png")

#: Rows drawn per key at most: a picture of more is unreadable (and the rows
#: are processed in the driver).
MAX_ROWS_PER_KEY = 5000

ON_WINDOW, LATE_OUTPUT = "windowed", "late output"


@dataclass(frozen=True)
class RowMark:
    """One input row: arrival position (0-based, per key), time, watermark seen, outcome.

    ``outcome`` is ``'windowed'`` (some window took it), ``'late output'``
    (sent to ``LATE DATA TO``) or ``'dropped: <reason>'``.
    """

    position: int
    time: int | None
    watermark: int
    outcome: str


@dataclass(frozen=True)
class Firing:
    """One emitted pane; ``position`` is where it happened in arrival order.

    ``k - 0.5`` means before row ``k`` (its clocks fired a timer), ``k`` on
    row ``k`` (the row made the trigger fire), ``len(rows)`` at end of input.
    ``start``/``end`` are ``None`` for count and global windows.
    """

    position: float
    start: int | None
    end: int | None
    time: int | None
    pane_index: int
    pane_timing: str | None


@dataclass(frozen=True)
class KeyTimeline:
    key: tuple
    rows: tuple[RowMark, ...]
    firings: tuple[Firing, ...]
    truncated: bool = False

    @property
    def label(self) -> str:
        return ", ".join("NULL" if v is None else str(v) for v in self.key) or "(all rows)"


@dataclass(frozen=True)
class Timeline:
    """What :func:`render` draws: one query, a few keys."""

    query: str
    key_names: tuple[str, ...]
    time_domain: str
    """``'event'`` or ``'processing'``: the time the x axis shows."""
    keys: tuple[KeyTimeline, ...] = field(default_factory=tuple)


# --------------------------------------------------------------------------- gathering


def collect(
    query: P.Query,
    source: DataFrame,
    *,
    keys: Sequence[Any] | None = None,
    top: int = 3,
) -> Timeline:
    """Replay ``source`` for ``query`` and record the rows and firings of some keys.

    ``keys``: the keys to show (a value, or a tuple of values for several
    grouping keys); default: the ``top`` keys with the most rows.
    """
    if top < 1:
        raise WqlSemanticError("--timeline-top needs a number of keys >= 1", code=ErrorCode.USAGE)
    op_plan = build_operator(query)
    spec = B.replay_spec(query, op_plan)
    replayed = R.replay(source, spec)
    try:
        staged, key_cols = B.stage(query, op_plan, replayed)
        chosen = _choose_keys(staged, key_cols, keys, top, len(op_plan.keys))
        wm_final, pt_final = B.final_clocks(replayed, spec)
        events = B.global_clock_events(replayed) if op_plan.mixes_time_domains else None
        out = []
        for key in chosen:
            rows = _key_rows(staged, key_cols, key)
            out.append(
                _drive(op_plan, key, rows, spec.event_time is not None, wm_final, pt_final, events)
            )
    finally:
        replayed.release()
    domain = "event" if query.window.domain is P.TimeDomain.EVENT else "processing"
    return Timeline(query.name, tuple(k.name for k in op_plan.keys), domain, tuple(out))


def _choose_keys(
    staged: DataFrame, key_cols: list[str], keys: Sequence[Any] | None, top: int, n_keys: int
) -> list[tuple]:
    if n_keys == 0:
        if keys:
            raise WqlSemanticError(
                "the query has no grouping keys: --timeline-key does not apply",
                code=ErrorCode.USAGE,
            )
        return [()]
    if keys:
        chosen = [k if isinstance(k, tuple) else (k,) for k in keys]
        for k in chosen:
            if len(k) != n_keys:
                raise WqlSemanticError(
                    f"a key of this query has {n_keys} values, got {len(k)}: {k!r}",
                    hint="separate the values of a composite key with commas",
                    code=ErrorCode.USAGE,
                )
        return [_typed_key(staged, key_cols, k) for k in chosen]
    counts = (
        staged.groupBy(*key_cols)
        .count()
        .orderBy(F.desc("count"), *[F.asc_nulls_first(c) for c in key_cols])
        .limit(top)
        .collect()
    )
    return [tuple(r[c] for c in key_cols) for r in counts]


def _typed_key(staged: DataFrame, key_cols: list[str], key: tuple) -> tuple:
    """``key`` as the key column values Spark holds (text given on the command line is cast)."""
    fields = {f.name: f.dataType for f in staged.schema.fields}
    cols = [F.lit(v).cast(fields[c]).alias(c) for v, c in zip(key, key_cols, strict=True)]
    row = staged.sparkSession.range(1).select(*cols).collect()[0]
    return tuple(row[c] for c in key_cols)


def _key_rows(staged: DataFrame, key_cols: list[str], key: tuple) -> pa.Table:
    cond = F.lit(True)
    for c, v in zip(key_cols, key, strict=True):
        cond = cond & F.col(c).eqNullSafe(F.lit(v))
    return staged.where(cond).orderBy(R.SEQ).limit(MAX_ROWS_PER_KEY + 1).toArrow()


def _drive(
    op_plan: Any,
    key: tuple,
    table: pa.Table,
    has_event_time: bool,
    wm_final: int,
    pt_final: int,
    events: Any,
) -> KeyTimeline:
    from wql.runtime.window_operator import WindowOperator

    truncated = table.num_rows > MAX_ROWS_PER_KEY
    table = table.slice(0, MAX_ROWS_PER_KEY)
    n_values = len(op_plan.values)
    values = [table.column(c).to_pylist() for c in L.value_columns(n_values)]
    ts = table.column(R.TS).to_pylist()
    wm = table.column(R.WM).to_pylist()
    pt = table.column(R.PT).to_pylist()
    seq = table.column(R.SEQ).to_pylist()
    processing = op_plan.uses_processing_time
    op = WindowOperator(op_plan.config)
    cursor = B.ClockCursor(events) if events is not None else None
    rows: list[RowMark] = []
    firings: list[Firing] = []

    def fired(position: float) -> None:
        for r in op.drain():
            if op_plan.config.changelog and r[-1] in ("-U", "-D"):
                continue  # a retraction repeats a firing drawn already
            firings.append(
                Firing(
                    position,
                    r[EMIT_WINDOW_START],
                    r[EMIT_WINDOW_END],
                    r[EMIT_WINDOW_TIME],
                    r[EMIT_PANE_INDEX],
                    r[EMIT_PANE_TIMING],
                )
            )
        op.drain_late()

    for i in range(len(seq)):
        if cursor is not None:
            cursor.advance_before(op, seq[i])
        op.advance_watermark(wm[i])
        if processing and pt[i] is not None:
            op.advance_processing_time(pt[i])
        fired(i - 0.5)
        before = op.counters.as_dict()
        row_ts = ts[i] if has_event_time else None
        op.process_element(key, row_ts, tuple(v[i] for v in values))
        rows.append(RowMark(i, ts[i] if has_event_time else pt[i], wm[i], _outcome(before, op)))
        fired(i)
    if cursor is not None:
        cursor.advance_before(op, MAX_TIME)
    op.advance_watermark(wm_final)
    if processing:
        op.advance_processing_time(pt_final)
    op.end_of_input()
    fired(len(seq))
    return KeyTimeline(key, tuple(rows), tuple(firings), truncated)


def _outcome(before: dict[str, Any], op: Any) -> str:
    after = op.counters.as_dict()
    if after["late_rows"] > before["late_rows"]:
        return LATE_OUTPUT
    for reason, n in after["dropped"].items():
        if n > before["dropped"].get(reason, 0):
            return f"dropped: {reason}"
    return ON_WINDOW


# --------------------------------------------------------------------------- drawing

_TIMING_COLOURS = {"EARLY": "#2ca02c", "ON_TIME": "#1f77b4", "LATE": "#9467bd", None: "#555555"}


def render(timeline: Timeline, path: str | Path) -> Path:
    """Draw ``timeline`` to ``path`` (``.html``, ``.svg`` or ``.png``)."""
    out = Path(path)
    suffix = _suffix(out)
    plt = _pyplot()
    with plt.rc_context({"svg.fonttype": "none", "svg.hashsalt": "wql"}):
        fig = _figure(timeline)
        _save(fig, timeline, out, suffix)
    return out


def _suffix(path: Path) -> str:
    """The drawing format of ``path`` (its extension), or a clear error."""
    suffix = path.suffix.lower()
    if suffix not in FORMATS:
        raise WqlSemanticError(
            f"cannot draw a timeline as {suffix or 'a file without extension'!r}",
            expected=FORMATS,
            code=ErrorCode.USAGE,
        )
    return suffix


def _save(fig: Any, timeline: Timeline, out: Path, suffix: str) -> None:
    try:
        if suffix == ".html":
            buf = io.StringIO()
            fig.savefig(buf, format="svg")
            out.write_text(_page(timeline, buf.getvalue()), encoding="utf-8")
        else:
            fig.savefig(out, format=suffix[1:], dpi=110)
    finally:
        import matplotlib.pyplot as plt

        plt.close(fig)


def _pyplot() -> Any:
    try:
        import matplotlib
    except ModuleNotFoundError:
        raise WqlUnsupportedError(
            "drawing a timeline needs matplotlib, which is not installed",
            hint="pip install 'wql[viz]'",
            code=ErrorCode.UNSUPPORTED,
        ) from None
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _figure(timeline: Timeline) -> Any:
    plt = _pyplot()
    from matplotlib import dates as mdates
    from matplotlib.lines import Line2D
    from matplotlib.patches import Rectangle
    from matplotlib.ticker import MaxNLocator

    n = max(1, len(timeline.keys))
    heights = [max(2.5, min(9.0, 1.2 + 0.22 * (len(k.rows) + 1))) for k in timeline.keys] or [2.5]
    fig, axes = plt.subplots(
        n, 1, figsize=(11, sum(heights) + 0.8), squeeze=False, height_ratios=heights
    )
    fig.suptitle(f"{timeline.query}: windows and firings", fontsize=12)
    for k, (ax, kt) in enumerate(zip(axes[:, 0], timeline.keys, strict=False)):
        end_pos = len(kt.rows)
        # windows: a bar from the first row in the window to its last firing
        spans: dict[tuple[int, int], list[float]] = {}
        for f in kt.firings:
            if f.start is None or f.end is None:
                continue
            first = next(
                (r.position for r in kt.rows if r.time is not None and f.start <= r.time < f.end),
                f.position,
            )
            lo, hi = spans.get((f.start, f.end), [first, f.position])
            spans[(f.start, f.end)] = [min(lo, first), max(hi, f.position)]
        for i, ((start, end), (lo, hi)) in enumerate(sorted(spans.items())):
            rect = Rectangle(
                (_x(start), lo - 0.35),
                _x(end) - _x(start),
                hi - lo + 0.7,
                facecolor="#1f77b4",
                alpha=0.10,
                edgecolor="#1f77b4",
                linewidth=0.8,
            )
            rect.set_gid(f"window-{k}-{i}")
            ax.add_patch(rect)
        # the watermark each row saw
        # the watermark each row saw: a vertical stroke across the row's position
        wm_x: list[float] = []
        wm_y: list[float] = []
        for r in kt.rows:
            if r.watermark > MIN_TIME:
                wm_x += [_x(r.watermark), _x(r.watermark)]
                wm_y += [r.position - 0.5, r.position + 0.5]
        if wm_x and timeline.time_domain == "event":
            (line,) = ax.plot(wm_x, wm_y, color="#7f7f7f", linestyle="--", linewidth=1)
            line.set_gid(f"watermark-{k}")
        # rows
        for outcome, marker, colour in (
            (ON_WINDOW, "o", "#1f77b4"),
            (LATE_OUTPUT, "^", "#ff7f0e"),
        ):
            pts = [r for r in kt.rows if r.outcome == outcome and r.time is not None]
            if pts:
                ax.scatter(
                    [_x(r.time) for r in pts],  # type: ignore[arg-type]
                    [r.position for r in pts],
                    marker=marker,
                    color=colour,
                    s=22,
                    zorder=3,
                    gid=f"rows-{k}-{outcome.replace(' ', '-')}",
                )
        dropped = [r for r in kt.rows if r.outcome.startswith("dropped") and r.time is not None]
        if dropped:
            ax.scatter(
                [_x(r.time) for r in dropped],  # type: ignore[arg-type]
                [r.position for r in dropped],
                marker="x",
                color="#d62728",
                s=30,
                zorder=3,
                gid=f"rows-{k}-dropped",
            )
        # firings
        for j, f in enumerate(kt.firings):
            t = f.time if f.time is not None else _last_time(kt, f.position)
            if t is None:
                continue
            colour = _TIMING_COLOURS.get(f.pane_timing, "#555555")
            (mark,) = ax.plot(
                [_x(t)], [f.position], marker="D", color=colour, markersize=7, zorder=4
            )
            mark.set_gid(f"firing-{k}-{j}")
            label = f"p{f.pane_index}" + (f" {f.pane_timing}" if f.pane_timing else "")
            ax.annotate(
                label,
                (_x(t), f.position),
                xytext=(6, -3),
                textcoords="offset points",
                fontsize=7,
                color=colour,
            )
        ax.axhline(end_pos, color="#bbbbbb", linewidth=0.8)
        ax.set_ylim(end_pos + 0.8, -0.8)
        ax.yaxis.set_major_locator(MaxNLocator(integer=True, min_n_ticks=1))
        ax.set_ylabel("row (arrival order)")
        title = f"{', '.join(timeline.key_names) or 'key'} = {kt.label}"
        if kt.truncated:
            title += f" (first {MAX_ROWS_PER_KEY} rows)"
        ax.set_title(title, fontsize=10, loc="left")
        ax.xaxis.set_major_formatter(mdates.DateFormatter("%H:%M:%S", tz=UTC))
        ax.grid(axis="x", alpha=0.3)
    axes[-1, 0].set_xlabel(f"{timeline.time_domain} time (UTC)")
    legend = [
        Line2D([], [], marker="o", color="#1f77b4", linestyle="", label="row"),
        Line2D([], [], marker="^", color="#ff7f0e", linestyle="", label="late output"),
        Line2D([], [], marker="x", color="#d62728", linestyle="", label="dropped"),
        Line2D([], [], color="#7f7f7f", linestyle="--", label="watermark"),
    ] + [
        Line2D([], [], marker="D", color=c, linestyle="", label=f"firing {t}")
        for t, c in _TIMING_COLOURS.items()
        if t is not None
    ]
    fig.legend(handles=legend, loc="lower center", ncol=7, fontsize=8, frameon=False)
    fig.tight_layout(rect=(0, 0.04, 1, 0.97))
    return fig


def _x(ms: int) -> float:
    """Milliseconds since the epoch as matplotlib's date number (days since the epoch)."""
    return ms / 86_400_000.0


def _last_time(kt: KeyTimeline, position: float) -> int | None:
    """For panes without a window end (count/global windows): the last row's time so far."""
    times = [r.time for r in kt.rows if r.position <= position and r.time is not None]
    return times[-1] if times else None


def _page(timeline: Timeline, svg: str) -> str:
    svg = svg[svg.find("<svg") :]
    parts = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        f"<title>{html.escape(timeline.query)} - WQL timeline</title>",
        "<style>body{font-family:sans-serif;margin:1.5em}table{border-collapse:collapse;"
        "margin-bottom:1.5em}td,th{border:1px solid #ccc;padding:2px 8px;font-size:13px}"
        "</style></head><body>",
        f"<h1>{html.escape(timeline.query)}: windows and firings</h1>",
        svg,
    ]
    for kt in timeline.keys:
        parts.append(f"<h2>{html.escape(kt.label)}</h2>")
        late = sum(1 for r in kt.rows if r.outcome == LATE_OUTPUT)
        dropped = sum(1 for r in kt.rows if r.outcome.startswith("dropped"))
        parts.append(
            f"<p>{len(kt.rows)} rows, {len(kt.firings)} firings, {late} late output, "
            f"{dropped} dropped{' (truncated)' if kt.truncated else ''}</p>"
        )
        parts.append(
            '<table class="firings"><tr><th>at</th><th>window_start</th><th>window_end</th>'
            "<th>pane_index</th><th>pane_timing</th></tr>"
        )
        for f in kt.firings:
            parts.append(
                '<tr class="firing">'
                f"<td>{html.escape(_position_text(f.position, len(kt.rows)))}</td>"
                f"<td>{_time_text(f.start)}</td><td>{_time_text(f.end)}</td>"
                f"<td>{f.pane_index}</td><td>{html.escape(f.pane_timing or '')}</td></tr>"
            )
        parts.append("</table>")
    parts.append("</body></html>")
    return "\n".join(parts)


def _position_text(position: float, n_rows: int) -> str:
    if position >= n_rows:
        return "end of input"
    if position != int(position):
        return f"before row {int(position + 0.5) + 1}"
    return f"on row {int(position) + 1}"


def _time_text(ms: int | None) -> str:
    if ms is None:
        return ""
    return datetime.fromtimestamp(ms / 1000, UTC).strftime("%Y-%m-%d %H:%M:%S.%f")[:-3]


def draw(
    query: P.Query,
    source: DataFrame,
    path: str | Path,
    *,
    keys: Sequence[Any] | None = None,
    top: int = 3,
) -> Timeline:
    """:func:`collect` then :func:`render`; returns what was drawn."""
    _pyplot()  # fail before any Spark job when matplotlib is missing
    _suffix(Path(path))
    timeline = collect(query, source, keys=keys, top=top)
    render(timeline, path)
    return timeline
