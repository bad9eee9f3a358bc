"""Every example runs as a stream from a folder of files with a checkpoint, and
survives a stop and restart with the output of an uninterrupted run.

Each example's CSV is cut into three files (a header in each) plus a sentinel
file, in a temp folder the example's ``path = '...'`` is rewritten to, with
``maxFilesPerTrigger = '1'``: one file = one micro-batch, files ordered by
modification time, so every run has the same micro-batch boundaries (a
restart equals an uninterrupted run only then, see docs/streaming.md).

A stream has no end of input: windows fire only when later data moves the
watermark. The sentinel file plays batch replay's end of input: one row far
in the future whose string columns are all ``SENTINEL`` (its own key, so it
joins no real window, and it never fires: nothing comes after it); rows that
carry ``SENTINEL`` are left out before comparing.

``--drain`` needs no sentinel: the example's files without it, then the end
of input (``start_streams(..., drain=True)``), give the batch output and the
batch counters.

The SIGKILL case is covered once in tests/spark/test_streaming.py.
"""

from __future__ import annotations

import csv
import io
import os
import re
from collections import Counter
from pathlib import Path

import pytest

import wql
from tests.spark.examples_helpers import example_files, expected_outputs, text
from wql.errors import WqlError
from wql.spark.stream_sinks import read_output, read_stream_source, start_streams

pytestmark = pytest.mark.spark

SENTINEL = "zz_sentinel"
SENTINEL_TS = "2030-01-01 00:00:00"
CHUNKS = 3

# early_late_firings: batch replay sends the views in arrival order (``seq``)
# and view 5 (home, 00:00:05) comes right after view 4 (00:00:12) moved the
# watermark past the window [00:00:00, 00:00:10): a LATE pane. In a stream
# the watermark a row sees is that of the EARLIER micro-batches
# (docs/streaming.md, "The streaming watermark"), and views 4 and 5 share the
# second micro-batch, so view 5 is on time and the window's ON_TIME pane
# counts 3 views (no LATE pane). Which panes such a window gets depends on
# which rows share a micro-batch; every other window agrees with batch
# replay, and the restart test checks the stream against an uninterrupted
# stream. (iot_late_data also replays in arrival order with a late reading,
# but its late reading, seq 9, arrives in a later micro-batch than seq 8 that
# made it late, so it agrees with batch replay.)
# live_sessions (a changelog, `op` first): ann's taps at 09:12 and 09:20 share the
# second micro-batch, where both are on time (the watermark is 09:04:59.999), so
# ann's sessions merge before any fires, where batch replay fires [09:00,09:14)
# on time and merges it late; ben's and cat's rows agree.
BOUNDARY_DEPENDENT = {
    "early_late_firings": {("home", "2024-05-01 00:00:00")},
    "live_sessions": {(op, "ann") for op in ("+I", "-U", "+U", "-D")},
}

_PATH = re.compile(r"path\s*=\s*'([^']*)'")


def _split_source(csv_path: Path, decl, folder: Path) -> list[Path]:
    """``csv_path`` cut into CHUNKS files plus the sentinel file, written to ``folder``
    in the order batch replay reads the rows; returns the files in stream order."""
    with csv_path.open(newline="") as f:
        table = list(csv.reader(f))
    header, body = table[0], table[1:]
    cols = {name.lower(): i for i, name in enumerate(header)}
    ts_col = cols[decl.event_time.column.lower()]
    arrival = decl.option("arrival_order")
    # batch replay's order: the arrival column when declared, else event time
    # (a stream receives files in order, so this is the order rows arrive in)
    if arrival is not None:
        body.sort(key=lambda r: int(r[cols[arrival.lower()]]))
    else:
        body.sort(key=lambda r: r[ts_col])  # 'YYYY-MM-DD HH:MM:SS' sorts as text
    types = {c.name.lower(): c.type.ddl.upper() for c in decl.columns}
    sentinel = list(body[-1])
    for name, i in cols.items():
        if types.get(name) == "STRING":
            sentinel[i] = SENTINEL
    sentinel[ts_col] = SENTINEL_TS
    if arrival is not None:
        sentinel[cols[arrival.lower()]] = str(int(body[-1][cols[arrival.lower()]]) + 1)
    size = -(-len(body) // CHUNKS)
    parts = [body[i : i + size] for i in range(0, len(body), size)] + [[sentinel]]
    assert len(parts) == CHUNKS + 1
    files = []
    folder.mkdir(parents=True)
    for n, part in enumerate(parts):
        buf = io.StringIO()
        csv.writer(buf, lineterminator="\n").writerows([header, *part])
        # written under a hidden name and renamed: the source never sees half a file
        tmp = folder / f".part{n}.tmp"
        tmp.write_text(buf.getvalue())
        files.append(folder / f"part{n}.csv")
        tmp.rename(files[-1])
    return files


class StreamedExample:
    """One example, its data cut into files in a staging folder, streamed into
    a source folder the files are moved into as the test decides."""

    def __init__(self, spark, wql_path: Path, base: Path) -> None:
        self.spark = spark
        self.stem = wql_path.stem
        original = wql_path.read_text()
        program = wql.compile(original).program
        self.staged: list[list[Path]] = []
        self.sources: list[Path] = []
        replaced = original
        for m in _PATH.finditer(original):
            csv_path = (wql_path.parent / m.group(1)).resolve()
            decl = next(d for d in program.sources if d.path == m.group(1))
            name = decl.name
            stage = base / "staged" / name
            self.staged.append(_split_source(csv_path, decl, stage))
            live = base / "in" / name
            live.mkdir(parents=True)
            self.sources.append(live)
            replaced = replaced.replace(m.group(0), f"path = '{live}', maxFilesPerTrigger = '1'")
        assert self.sources, f"{self.stem}: no path = '...' to rewrite"
        self.text = replaced
        self.out = base / "out"
        self.ck = base / "ck"

    def add_files(self, indices) -> None:
        """Move files ``indices`` of every source into its streamed folder."""
        for staged, live in zip(self.staged, self.sources, strict=True):
            for i in indices:
                target = live / staged[i].name
                staged[i].rename(target)
                # the file source orders new files by modification time
                os.utime(target, (1_000_000 + i, 1_000_000 + i))

    def run(self, *, drain: bool = False) -> dict[str, Counter]:
        """One available-now run (resumes from the checkpoint); every output so far.

        ``drain``: then end the stream (its counters: ``self.counters``)."""
        compiled = wql.compile(self.text)
        frames = {d.name: read_stream_source(self.spark, d, None) for d in compiled.program.sources}
        results = compiled.apply(self.spark, **frames)
        names = [r.name for r in results.queries]
        names += [r.late_name for r in results.queries if r.late_name is not None]
        sinks = start_streams(results, self.out, self.ck, fmt="parquet", drain=drain)
        self.drained = sinks.drained
        self.counters = sinks.counters(self.spark)
        return {name: self._read(name) for name in names}

    def _read(self, name: str) -> Counter:
        path = self.out / name
        if not (path / "_spark_metadata").exists():
            return Counter()
        df = read_output(self.spark, path)
        return Counter(tuple(text(v) for v in r) for r in df.collect() if SENTINEL not in tuple(r))

    def columns(self, name: str) -> list[str]:
        return read_output(self.spark, self.out / name).columns


@pytest.fixture(scope="module")
def uninterrupted(spark, tmp_path_factory):
    """Per example, the reference: every file there from the start, one run."""
    cache: dict[str, tuple[StreamedExample, dict[str, Counter]]] = {}

    def get(path: Path):
        if path.stem not in cache:
            ex = StreamedExample(spark, path, tmp_path_factory.mktemp(f"ref_{path.stem}"))
            ex.add_files(range(CHUNKS + 1))
            cache[path.stem] = (ex, ex.run())
        return cache[path.stem]

    return get


@pytest.mark.parametrize("path", example_files(), ids=lambda p: p.stem)
def test_example_streams_to_its_batch_output(uninterrupted, path):
    ex, streamed = uninterrupted(path)
    expected = expected_outputs(path.stem)
    assert set(streamed) == set(expected)
    assert sum(sum(c.values()) for c in streamed.values()) > 0, "the stream wrote nothing"
    for name, (header, rows) in expected.items():
        if rows:
            assert ex.columns(name) == header, name
        skip = BOUNDARY_DEPENDENT.get(path.stem, set())
        got = Counter({r: n for r, n in streamed[name].items() if r[:2] not in skip})
        want = Counter(r for r in rows if r[:2] not in skip)
        assert got == want, name
        if skip:  # the boundary-dependent window is there, just with other panes
            assert sum(streamed[name].values()) > sum(got.values()), name


@pytest.mark.parametrize("path", example_files(), ids=lambda p: p.stem)
def test_example_stop_and_restart_gives_the_uninterrupted_output(
    spark, uninterrupted, path, tmp_path
):
    _, reference = uninterrupted(path)
    ex = StreamedExample(spark, path, tmp_path)
    ex.add_files(range(2))
    first = ex.run()
    # append mode: what the first run wrote stays, and is part of the final output
    assert all(not (first[name] - reference[name]) for name in first)
    ex.add_files(range(2, CHUNKS + 1))
    assert ex.run() == reference  # same checkpoint: resumes after micro-batch 1


def _batch_counters(path: Path) -> dict[str, dict]:
    """Per query, what its batch run counted: rows reaching the operator (after WHERE),
    fired, late, dropped by reason."""
    results = wql.compile_file(path).apply()
    try:
        out = {}
        for r in results.queries:
            c = r.counters
            reached = c["rows_in"] - c.get("rows_filtered", 0)
            out[r.name] = (reached, c["rows_fired"], c["late_rows"], dict(c["dropped"]))
        return out
    finally:
        results.release()


@pytest.mark.parametrize("path", example_files(), ids=lambda p: p.stem)
def test_a_drained_example_stream_gives_the_batch_output_and_counters(spark, path, tmp_path):
    """The files without the sentinel, then --drain: the watermark jumps to +inf, every
    remaining window fires (as at the end of batch replay), rows in windows that
    never fire are counted; then the checkpoint refuses another run."""
    ex = StreamedExample(spark, path, tmp_path)
    ex.add_files(range(CHUNKS))
    streamed = ex.run(drain=True)
    expected = expected_outputs(path.stem)
    assert set(streamed) == set(expected)
    skip = BOUNDARY_DEPENDENT.get(path.stem, set())
    for name, (_, rows) in expected.items():
        got = Counter({r: n for r, n in streamed[name].items() if r[:2] not in skip})
        assert got == Counter(r for r in rows if r[:2] not in skip), name
    assert ex.drained == set(ex.counters)
    for name, (reached, fired, late, dropped) in _batch_counters(path).items():
        c = ex.counters[name]
        assert (c["rows_in"], c["rows_fired"], c["late_rows"], c["dropped"]) == (
            reached,
            fired,
            late,
            dropped,
        ), name
        assert c["rows_in"] == c["rows_fired"] + c["late_rows"] + sum(c["dropped"].values())
    with pytest.raises(WqlError, match="was drained"):
        ex.run()
