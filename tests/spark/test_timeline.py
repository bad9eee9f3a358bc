"""The picture of windows and firings: `wql run --timeline` and `Compiled.timeline`."""

from __future__ import annotations

import datetime as dt
import re
import xml.etree.ElementTree as ET
from collections import Counter
from pathlib import Path

import pytest

import wql
from tests.spark.examples_helpers import EXAMPLES
from wql.cli import main
from wql.errors import WqlError

pytestmark = pytest.mark.spark
pytest.importorskip("matplotlib")

SVG = "{http://www.w3.org/2000/svg}"
EPOCH = dt.datetime(1970, 1, 1)


def _ms(t: dt.datetime | None) -> int | None:
    return None if t is None else int((t - EPOCH) / dt.timedelta(milliseconds=1))


def _ids(svg_text: str) -> list[str]:
    root = ET.fromstring(svg_text)
    return [e.get("id", "") for e in root.iter() if e.get("id")]


def test_every_firing_of_an_example_is_drawn(spark, tmp_path):
    """early_late_firings: the drawn panes are exactly the query's result rows, key by key."""
    compiled = wql.compile_file(EXAMPLES / "early_late_firings.wql", require_declared=True)
    result = compiled.apply(spark)
    expected = Counter(
        (r["page"], _ms(r["window_start"]), _ms(r["window_end"]), r["pane_index"], r["pane_timing"])
        for r in result.df.collect()
    )
    result.release()
    out = tmp_path / "views.svg"
    timeline = compiled.timeline(out, spark, top=5)
    drawn = Counter(
        (kt.key[0], f.start, f.end, f.pane_index, f.pane_timing)
        for kt in timeline.keys
        for f in kt.firings
    )
    assert drawn == expected
    # every row of the file is drawn, with the one late view dropped (no LATE DATA TO)
    assert sum(len(kt.rows) for kt in timeline.keys) == 7
    outcomes = Counter(r.outcome for kt in timeline.keys for r in kt.rows)
    assert outcomes == {"windowed": 6, "dropped: late": 1}

    svg = out.read_text()
    ids = _ids(svg)
    for k, kt in enumerate(timeline.keys):
        marks = [i for i in ids if re.fullmatch(rf"firing-{k}-\d+", i)]
        assert len(marks) == len(kt.firings)
        assert f"watermark-{k}" in ids
    assert "rows-0-dropped" in ids or "rows-1-dropped" in ids
    # labels are text: pane index and timing per firing
    for f in (f for kt in timeline.keys for f in kt.firings):
        assert f"p{f.pane_index} {f.pane_timing}" in svg
    assert "EARLY" in svg and "LATE" in svg and "ON_TIME" in svg


def test_html_page_has_a_table_row_per_firing(spark, tmp_path):
    compiled = wql.compile_file(EXAMPLES / "iot_late_data.wql", require_declared=True)
    out = tmp_path / "iot.html"
    timeline = compiled.timeline(out, spark, top=1)
    page = out.read_text()
    assert page.startswith("<!DOCTYPE html>") and "<svg" in page
    assert page.count('<tr class="firing">') == sum(len(k.firings) for k in timeline.keys)
    assert len(timeline.keys) == 1
    # the busiest device was chosen
    rows = compiled.apply(spark)
    late = rows.late.count() if rows.late is not None else 0
    rows.release()
    drawn_late = sum(1 for kt in timeline.keys for r in kt.rows if r.outcome == "late output")
    assert drawn_late <= late


def test_count_windows_and_a_chosen_key(spark, tmp_path):
    compiled = wql.compile_file(EXAMPLES / "count_windows.wql", require_declared=True)
    out = tmp_path / "count.png"
    timeline = compiled.timeline(out, spark, query="every_three", keys="s1")
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    (kt,) = timeline.keys
    assert kt.key == ("s1",)
    result = compiled.only("every_three").apply(spark)
    panes = sorted(r["pane_index"] for r in result.df.collect() if r["sensor"] == "s1")
    result.release()
    assert sorted(f.pane_index for f in kt.firings) == panes
    assert all(f.start is None and f.end is None for f in kt.firings)


def test_hostile_key_text_is_escaped_in_html(spark, tmp_path):
    text = """
    CREATE SOURCE s (k STRING, ts TIMESTAMP, WATERMARK FOR ts AS ts - INTERVAL '1' SECOND);
    SELECT k, COUNT(*) AS n FROM s GROUP BY k, TUMBLE(ts, INTERVAL '10' SECOND)
    """
    t0 = dt.datetime(2024, 5, 1)
    df = spark.createDataFrame(
        [("<script>alert(1)</script>", t0), ("<script>alert(1)</script>", t0)],
        "k string, ts timestamp",
    )
    out = tmp_path / "k.html"
    timeline = wql.compile(text).timeline(out, spark, s=df)
    assert [len(k.firings) for k in timeline.keys] == [1]
    page = out.read_text()
    assert "<script>" not in page and "&lt;script&gt;" in page


def test_bad_requests_are_clear_errors(spark, tmp_path):
    compiled = wql.compile_file(EXAMPLES / "count_windows.wql", require_declared=True)
    with pytest.raises(WqlError, match="2 queries"):
        compiled.timeline(tmp_path / "x.svg", spark)
    with pytest.raises(WqlError, match="cannot draw a timeline as '.pdf'"):
        compiled.timeline(tmp_path / "x.pdf", spark, query="every_three")
    with pytest.raises(WqlError, match="has 1 values, got 2"):
        compiled.timeline(tmp_path / "x.svg", spark, query="every_three", keys=[("a", "b")])


def test_cli_timeline(spark, tmp_path, capsys):
    out = tmp_path / "sessions.svg"
    code = main(
        [
            "run",
            str(EXAMPLES / "clickstream_sessions.wql"),
            "--show",
            "0",
            "--timeline",
            str(out),
            "--timeline-key",
            "alice",
        ]
    )
    assert code == 0
    assert out.exists() and "firing-0-0" in out.read_text()
    assert "timeline of sessions: alice" in capsys.readouterr().err
    assert main(["run", str(EXAMPLES / "count_windows.wql"), "--timeline", str(out)]) == 1
    assert "--timeline-query" in capsys.readouterr().err


def test_timeline_picture_in_docs_is_current():
    """The README's picture is the one the documented command draws (regenerate it with it)."""
    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text()
    assert "docs/timeline.png" in readme
    assert "--timeline docs/timeline.png" in readme
    assert (Path(__file__).resolve().parents[2] / "docs" / "timeline.png").exists()


def _tick_instant(label: str, near_ms: int) -> int:
    """The instant a tick label names (ms since the epoch, UTC); a label without a date
    is on the day of ``near_ms``."""
    if len(label) > 12:  # with the date
        t = dt.datetime.fromisoformat(label).replace(tzinfo=dt.UTC)
        return int(t.timestamp() * 1000) if len(label) > 10 else int(t.timestamp()) * 1000
    clock = dt.time.fromisoformat(label)
    day = near_ms - near_ms % 86_400_000
    return (
        day
        + ((clock.hour * 60 + clock.minute) * 60 + clock.second) * 1000
        + (clock.microsecond // 1000)
    )


def _check_figure(timeline, legend: set[str]) -> None:
    """Every tick label names the instant the tick stands at; no firing label touches the
    watermark line; the legend lists exactly ``legend``."""
    from wql.spark.timeline import figure

    fig = figure(timeline)
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    try:
        for ax in fig.axes:
            ticks = list(ax.get_xticks())
            labels = [t.get_text() for t in ax.get_xticklabels()]
            lo, hi = ax.get_xlim()
            shown = [(x, text) for x, text in zip(ticks, labels, strict=True) if lo <= x <= hi]
            assert len(shown) >= 2, labels
            for x, text in shown:
                at = x * 86_400_000
                assert abs(at - round(at)) < 1e-3, (x, text)  # a whole millisecond
                assert _tick_instant(text, round(at)) == round(at), (x, text)
            steps = {b[0] - a[0] for a, b in zip(shown, shown[1:], strict=False)}
            assert max(steps) - min(steps) < 1e-9  # evenly spaced
            lines = [ln for ln in ax.get_lines() if (ln.get_gid() or "").startswith("watermark")]
            texts = [t for t in ax.texts if (t.get_gid() or "").startswith("firing-label")]
            assert texts
            for line in lines:
                path = line.get_transform().transform_path(line.get_path())
                for t in texts:
                    box = t.get_window_extent(renderer)
                    assert not path.intersects_bbox(box, filled=False), t.get_text()
        assert {t.get_text() for t in fig.legends[0].get_texts()} == legend
    finally:
        import matplotlib.pyplot as plt

        plt.close(fig)


def test_ticks_labels_and_legend_tell_the_truth(spark, tmp_path):
    compiled = wql.compile_file(EXAMPLES / "early_late_firings.wql", require_declared=True)
    timeline = compiled.timeline(tmp_path / "views.svg", spark, top=5)
    _check_figure(
        timeline,
        {"row", "dropped", "watermark", "firing EARLY", "firing ON_TIME", "firing LATE"},
    )
    # LATE DATA TO rows, and no EARLY/LATE panes: the legend says so
    compiled = wql.compile_file(EXAMPLES / "iot_late_data.wql", require_declared=True)
    timeline = compiled.timeline(tmp_path / "iot.svg", spark, top=2)
    kinds = {f.pane_timing for kt in timeline.keys for f in kt.firings}
    outcomes = {r.outcome for kt in timeline.keys for r in kt.rows}
    expected = {"row", "watermark"} | {f"firing {k}" for k in kinds}
    expected |= {"late output"} if "late output" in outcomes else set()
    expected |= {"dropped"} if any(o.startswith("dropped") for o in outcomes) else set()
    _check_figure(timeline, expected)


def test_ticks_below_a_second_and_across_midnight():
    from wql.runtime.windows import MIN_TIME
    from wql.spark.timeline import Firing, KeyTimeline, RowMark, Timeline

    midnight = int(dt.datetime(2024, 5, 2, tzinfo=dt.UTC).timestamp() * 1000)
    t0 = midnight - 130  # 23:59:59.870
    rows = tuple(
        RowMark(i, t0 + 37 * i, t0 + 37 * i - 20 if i else MIN_TIME, "windowed") for i in range(8)
    )
    firings = (
        Firing(3.5, t0 - 70, t0 + 30, t0 + 29, 0, None),
        Firing(7.5, t0 + 30, t0 + 130, t0 + 129, 0, None),
    )
    timeline = Timeline("q", ("k",), "event", (KeyTimeline(("a",), rows, firings),))
    _check_figure(timeline, {"row", "watermark", "firing"})
