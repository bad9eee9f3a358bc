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
import math
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
from wql.runtime.windows import MIN_TIME
from wql.spark import batch as B
from wql.spark import layout as L
from wql.spark import replay as R

__all__ = [
    "FORMATS",
    "Firing",
    "KeyTimeline",
    "RowMark",
    "Timeline",
    "collect",
    "figure",
    "render",
]

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

    before: dict[str, Any] = {}

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

    def rising(i: int) -> None:
        # the firings of the clocks the row sees, drawn before it
        fired(i - 0.5)
        before.update(op.counters.as_dict())

    def processed(i: int) -> None:
        rows.append(RowMark(i, ts[i] if has_event_time else pt[i], wm[i], _outcome(before, op)))
        fired(i)

    # the partition task's row loop, the same clocks before each row
    B.replay_rows(
        op,
        cursor,
        seq,
        wm,
        pt if processing else None,
        [key] * len(seq),
        ts if has_event_time else None,
        list(zip(*values, strict=True)) if values else [()] * len(seq),
        rising=rising,
        processed=processed,
    )
    B.end_of_replay(op, cursor, wm_final, pt_final if processing else None)
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
        fig = figure(timeline)
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


def figure(timeline: Timeline) -> Any:
    """The matplotlib figure of ``timeline`` (what :func:`render` saves).

    The x axis has ticks at round instants only (:func:`_time_ticks`), each
    labelled with exactly the instant it stands at; firing labels are placed
    where the watermark line and other labels are not (:func:`_place_labels`);
    the legend lists only the marks the figure holds.
    """
    plt = _pyplot()
    from matplotlib.patches import Rectangle
    from matplotlib.ticker import FuncFormatter, MaxNLocator

    n = max(1, len(timeline.keys))
    heights = [max(2.5, min(9.0, 1.2 + 0.22 * (len(k.rows) + 1))) for k in timeline.keys] or [2.5]
    fig, axes = plt.subplots(
        n, 1, figsize=(11, sum(heights) + 0.8), squeeze=False, height_ratios=heights
    )
    fig.suptitle(f"{timeline.query}: windows and firings", fontsize=12)
    shown: set[str] = set()
    labels: list[tuple[Any, Any, Any]] = []  # (axes, firing label, watermark line or None)
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
        # the watermark each row saw: a vertical stroke across the row's position
        wm_x: list[float] = []
        wm_y: list[float] = []
        for r in kt.rows:
            if r.watermark > MIN_TIME:
                wm_x += [_x(r.watermark), _x(r.watermark)]
                wm_y += [r.position - 0.5, r.position + 0.5]
        watermark = None
        if wm_x and timeline.time_domain == "event":
            (watermark,) = ax.plot(wm_x, wm_y, color="#7f7f7f", linestyle="--", linewidth=1)
            watermark.set_gid(f"watermark-{k}")
            shown.add("watermark")
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
                shown.add(outcome)
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
            shown.add("dropped")
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
            shown.add(f"firing {f.pane_timing}" if f.pane_timing else "firing")
            label = f"p{f.pane_index}" + (f" {f.pane_timing}" if f.pane_timing else "")
            text = ax.annotate(
                label,
                (_x(t), f.position),
                xytext=_LABEL_OFFSETS[0][:2],
                textcoords="offset points",
                ha=_LABEL_OFFSETS[0][2],
                va=_LABEL_OFFSETS[0][3],
                fontsize=7,
                color=colour,
                zorder=5,
            )
            text.set_gid(f"firing-label-{k}-{j}")
            labels.append((ax, text, watermark))
        ax.axhline(end_pos, color="#bbbbbb", linewidth=0.8)
        ax.set_ylim(end_pos + 0.8, -0.8)
        ax.yaxis.set_major_locator(MaxNLocator(integer=True, min_n_ticks=1))
        ax.set_ylabel("row (arrival order)")
        title = f"{', '.join(timeline.key_names) or 'key'} = {kt.label}"
        if kt.truncated:
            title += f" (first {MAX_ROWS_PER_KEY} rows)"
        ax.set_title(title, fontsize=10, loc="left")
        ticks = _time_ticks()
        ax.xaxis.set_major_locator(ticks)
        ax.xaxis.set_major_formatter(FuncFormatter(ticks.label))
        ax.grid(axis="x", alpha=0.3)
    axes[-1, 0].set_xlabel(f"{timeline.time_domain} time (UTC)")
    legend = _legend(shown)
    if legend:
        fig.legend(handles=legend, loc="lower center", ncol=len(legend), fontsize=8, frameon=False)
    fig.tight_layout(rect=(0, 0.04 if legend else 0, 1, 0.97))
    _place_labels(fig, labels)
    return fig


def _legend(shown: set[str]) -> list[Any]:
    """Legend entries for the marks in ``shown`` only, in a fixed order."""
    from matplotlib.lines import Line2D

    entries: list[tuple[str, dict[str, Any], str]] = [
        ("windowed", dict(marker="o", color="#1f77b4", linestyle=""), "row"),
        (LATE_OUTPUT, dict(marker="^", color="#ff7f0e", linestyle=""), "late output"),
        ("dropped", dict(marker="x", color="#d62728", linestyle=""), "dropped"),
        ("watermark", dict(color="#7f7f7f", linestyle="--"), "watermark"),
    ] + [
        (
            f"firing {t}" if t else "firing",
            dict(marker="D", color=c, linestyle=""),
            f"firing {t}" if t else "firing",
        )
        for t, c in _TIMING_COLOURS.items()
    ]
    return [Line2D([], [], label=label, **style) for what, style, label in entries if what in shown]


#: Where a firing label may sit, relative to its mark: (dx, dy) in points and the
#: text's alignment. Tried in order; the first clear of the watermark line and of
#: the labels placed before it wins.
_LABEL_OFFSETS: tuple[tuple[float, float, str, str], ...] = tuple(
    (dx, dy, "left" if dx > 0 else "right", va)
    for dy, va in (
        (0, "center"),
        (4, "bottom"),
        (-4, "top"),
        (11, "bottom"),
        (-11, "top"),
        (18, "bottom"),
        (-18, "top"),
        (26, "bottom"),
        (-26, "top"),
    )
    for dx in (6, -6)
)


def _place_labels(fig: Any, labels: list[tuple[Any, Any, Any]]) -> None:
    """Move each firing label to the first offset where it neither touches its axes'
    watermark line nor overlaps a label placed before it.

    Positions are measured on the laid-out figure, in display units; a label's box
    is padded by a point so a line grazing it counts as crossing. When no offset is
    clear of both, the first clear of the watermark line is kept.
    """
    if not labels:
        return
    renderer = fig.canvas.get_renderer()
    placed: dict[Any, list[Any]] = {}
    pad = fig.dpi / 72.0
    for ax, text, watermark in labels:
        path = (
            watermark.get_transform().transform_path(watermark.get_path())
            if watermark is not None
            else None
        )
        others = placed.setdefault(ax, [])
        fallback = None
        for dx, dy, ha, va in _LABEL_OFFSETS:
            text.xyann = (dx, dy)
            text.set_ha(ha)
            text.set_va(va)
            box = text.get_window_extent(renderer).padded(pad)
            if path is not None and path.intersects_bbox(box, filled=False):
                continue
            if fallback is None:
                fallback = (dx, dy, ha, va)
            if not any(box.overlaps(o) for o in others):
                break
        else:
            if fallback is not None:
                dx, dy, ha, va = fallback
                text.xyann = (dx, dy)
                text.set_ha(ha)
                text.set_va(va)
        others.append(text.get_window_extent(renderer))


#: Tick spacings in milliseconds: round steps of the clock.
_TICK_STEPS = (
    1,
    2,
    5,
    10,
    20,
    50,
    100,
    200,
    500,
    1_000,
    2_000,
    5_000,
    10_000,
    15_000,
    30_000,
    60_000,
    2 * 60_000,
    5 * 60_000,
    10 * 60_000,
    15 * 60_000,
    30 * 60_000,
    3_600_000,
    2 * 3_600_000,
    3 * 3_600_000,
    6 * 3_600_000,
    12 * 3_600_000,
    86_400_000,
    2 * 86_400_000,
    7 * 86_400_000,
    14 * 86_400_000,
    28 * 86_400_000,
)


def _time_ticks() -> Any:
    """A matplotlib locator with ticks at round instants of the clock: whole multiples
    of a step of :data:`_TICK_STEPS` (milliseconds), at most ``MAX_TICKS`` in view.
    Its ``label`` method is the matching formatter: the instant a tick stands at
    (:func:`tick_text`), the date too when the ticks fall on more than one day."""
    from matplotlib.ticker import Locator

    class TimeTicks(Locator):  # type: ignore[misc]
        MAX_TICKS = 7

        def __init__(self) -> None:
            self.step = 1_000
            self.with_date = False

        def __call__(self) -> list[float]:
            assert self.axis is not None  # matplotlib sets the axis before asking
            return self.tick_values(*self.axis.get_view_interval())

        def tick_values(self, vmin: float, vmax: float) -> list[float]:
            lo, hi = sorted((vmin * _MS_PER_DAY, vmax * _MS_PER_DAY))
            span = max(hi - lo, 1.0)
            self.step = next(
                (s for s in _TICK_STEPS if span / s <= self.MAX_TICKS), _TICK_STEPS[-1]
            )
            first = math.ceil(lo / self.step) * self.step
            instants = range(first, math.floor(hi) + 1, self.step)
            days = {ms // _MS_PER_DAY for ms in instants}
            self.with_date = len(days) > 1
            return [ms / _MS_PER_DAY for ms in instants]

        def label(self, x: float, _pos: int | None = None) -> str:
            return tick_text(round(x * _MS_PER_DAY), self.step, self.with_date)

    return TimeTicks()


def tick_text(ms: int, step: int, with_date: bool) -> str:
    """The label of a tick at ``ms`` (milliseconds since the epoch, UTC) on an axis whose
    ticks are ``step`` apart: ``HH:MM:SS`` (``.mmm`` below a one-second step), the date
    first when ``with_date`` or when the step is a day or more."""
    t = datetime.fromtimestamp(ms / 1000, UTC)
    if step >= _MS_PER_DAY:
        return t.strftime("%Y-%m-%d")
    text = t.strftime("%H:%M:%S")
    if step < 1000:
        text += f".{ms % 1000:03d}"
    return f"{t:%Y-%m-%d} {text}" if with_date else text


_MS_PER_DAY = 86_400_000


def _x(ms: int) -> float:
    """Milliseconds since the epoch as matplotlib's date number (days since the epoch)."""
    return ms / _MS_PER_DAY


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
