"""An example streamed from a folder of files with a checkpoint (``StreamedExample``),
for tests/spark/test_streaming_examples.py and tests/cluster/test_streaming.py.

Each example's CSV is cut into CHUNKS files (a header in each) plus a sentinel
file, in a temp folder the example's ``path = '...'`` is rewritten to, with
``maxFilesPerTrigger = '1'``: one file = one micro-batch, files ordered by
modification time, so every run has the same micro-batch boundaries.

The sentinel file plays batch replay's end of input: one row far in the
future whose string columns are all ``SENTINEL`` (its own key, so it joins no
real window, and it never fires: nothing comes after it); rows that carry
``SENTINEL`` are left out of what :meth:`StreamedExample.run` returns.
"""

from __future__ import annotations

import csv
import io
import os
import re
from collections import Counter
from pathlib import Path

import wql
from tests.spark.examples_helpers import text
from wql.spark.stream_sinks import read_output, read_stream_source, start_streams

SENTINEL = "zz_sentinel"
SENTINEL_TS = "2030-01-01 00:00:00"
CHUNKS = 3

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
