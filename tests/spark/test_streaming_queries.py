"""Every golden and fixture query runs on a streaming source with the default engine,
and gives its batch results once the stream is closed.

The examples are streamed the same way by ``test_streaming_examples.py``; these
files have no data, so each source gets a small generated table: bursts of rows,
every row of a burst at the same event time and with its own key, and the
planner's choice for a stream (``compile(...).apply`` on streaming DataFrames).

Why the stream then equals batch replay (docs/streaming.md, "The streaming
watermark"): a row sees the watermark left by the rows of *earlier*
micro-batches, batch replay the one left by the rows before it. The files are
cut so that both are the same for every row: a file holds the rest of one
burst and the first row of the next (the only row that raises the maximum
event time, and the last one of its file), so every other row of a file has the
file's maximum before it in both. Timers fire when the watermark rises, before
the next row, in both. Rows of one key never tie (one row per key per burst),
and floating-point values are multiples of 1/4, so sums do not depend on the
order of addition. A last file holds the sentinel: one row far in the future
whose string columns are all ``zz_sentinel`` (its own key, it never fires),
the "next burst" of the last file; the watermark it raises plays batch replay's
end of input, and its rows are left out before comparing.

Queries that cannot be compared with batch replay:

* processing-time queries: the stream's processing clock is the micro-batch's
  wall-clock time, batch replay's the declared ``processing_time`` column. They
  run with an interval trigger (an available-now stream with processing-time
  timers never ends) until their input is processed, without an error;
* queries on both clocks are refused on streams with a positioned error
  (docs/streaming.md, "Time modes").

Queries over a source with ``IDLE AFTER`` are compared: the generated rows
arrive 1 ms apart (``arrival_order``), so batch replay sees no idle spell,
and an available-now run has no idle monitor thread (tests/spark/test_streaming_idle.py
runs the rule on streams).

Each file runs once (a module fixture), its queries streamed together in
groups of at most ``GROUP``, on one shuffle partition (every micro-batch of a
stateful query runs one task per partition): a micro-batch costs seconds.
Spark waits 10 s (fixed) for the Python worker a starting operator query
launches on the driver; with ten queries running on a busy 2-core machine,
the tenth timed out ("Python worker failed to connect back").
"""

from __future__ import annotations

import csv
import datetime as dt
import decimal
import io
import json
import os
import re
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

import wql
from tests.spark.examples_helpers import text as as_text
from wql.compiler import compile_source
from wql.compiler import plan as P
from wql.compiler.backends.operator import build_operator
from wql.errors import WqlError, WqlUnsupportedError
from wql.spark.stream_sinks import read_output, read_stream_source, start_streams
from wql.spark.streaming import time_mode

pytestmark = pytest.mark.spark

ROOT = Path(__file__).resolve().parents[2]
FILES = sorted(
    [
        *(ROOT / "tests/compiler/golden").glob("*.wql"),
        *(ROOT / "tests/fixtures/queries").glob("*.wql"),
    ]
)

SENTINEL = "zz_sentinel"
SENTINEL_TIME = dt.datetime(2030, 1, 1)
BASE = dt.datetime(2024, 5, 1, 0, 0, 3)
#: (seconds after BASE, key indices): each key at most once per burst
BURSTS = [(0, (0, 1, 2)), (40, (0, 1)), (130, (0, 2))]
KEYS = ("DE", "FR", "US")  # every STRING column; DE and FR pass the golden WHERE

#: queries whose windows never fire on the generated data (3 rows per key at most)
NEVER_FIRE = {
    ("spec_example", "query_1"): "TRIGGER COUNT(100)",
    ("windows", "counted"): "COUNT_WINDOW(5)",
    ("triggers", "evict_delta"): "COUNT_WINDOW(10)",
}

GROUP = 4

#: A known streaming defect, pinned: rows the WHERE drops do not raise a stream's
#: watermark, while batch replay's watermark counts every row (docs/streaming.md,
#: "Known limits"). Here the sentinel fails the WHERE, the
#: stream's watermark stays in 2024 and the day window never fires.
_PATH = re.compile(r"path\s*=\s*'([^']*)'")


# --------------------------------------------------------------------------- which queries


def _kind(q: P.Query) -> str:
    """``compare``, ``processing`` (wall clock on a stream) or ``refused`` (both clocks)."""
    try:
        mode = time_mode(build_operator(q))
    except WqlUnsupportedError:
        return "refused"
    return "processing" if mode == "ProcessingTime" else "compare"


def _cases() -> list[tuple[Path, P.Query]]:
    """Every (file, query), a query already seen in an earlier file (same source,
    same plan: the fixture copies of golden files) counted once."""
    seen: list[tuple[P.SourceDecl | None, P.Query]] = []
    out = []
    for path in FILES:
        program = compile_source(path.read_text(), path.name)
        for q in program.queries:
            ident = (program.source(q.source.name), q)
            if ident in seen:
                continue
            seen.append(ident)
            out.append((path, q))
    return out


CASES = _cases()


# --------------------------------------------------------------------------- data


def _value(col: P.Column, decl: P.SourceDecl, burst: int, key: int, at: dt.datetime, n: int):
    """The value of ``col`` in row ``n`` (key ``key`` of burst ``burst``, event time ``at``)."""
    name = col.name.lower()
    kind = col.type.kind
    if name == (decl.option("arrival_order") or "").lower():
        return n  # arrival order = file order = event-time order
    if kind == "STRING":
        return KEYS[key]
    if kind == "TIMESTAMP":
        return at
    if kind == "DATE":
        return at.date()
    if kind == "BOOLEAN":
        return (burst + key) % 2 == 0
    if kind == "DOUBLE" or kind == "FLOAT":
        return 300.25 * (1 + (3 * burst + key) % 4) + 0.5 * key
    if kind == "DECIMAL":
        return decimal.Decimal(f"{10 + 7 * burst + key}.{25 * key:02d}")
    if name == (decl.option("processing_time") or "").lower():
        return int(at.timestamp() * 1000)
    # BIGINT / INT: small positive numbers (a session gap of v seconds, a quantity)
    return 5 + (7 * burst + 11 * key) % 30


def _rows(decl: P.SourceDecl) -> tuple[list[list[dict]], dict]:
    """The bursts of ``decl`` (lists of rows as dicts) and its sentinel row."""
    bursts, n = [], 0
    for b, (offset, keys) in enumerate(BURSTS):
        at = BASE + dt.timedelta(seconds=offset)
        rows = []
        for k in keys:
            rows.append({c.name: _value(c, decl, b, k, at, n) for c in decl.columns})
            n += 1
        bursts.append(rows)
    sentinel = {c.name: _value(c, decl, 0, 0, SENTINEL_TIME, n) for c in decl.columns}
    for c in decl.columns:
        if c.type.kind == "STRING":
            sentinel[c.name] = SENTINEL
    return bursts, sentinel


def _chunks(bursts: list[list[dict]], sentinel: dict) -> list[list[dict]]:
    """One file per micro-batch: the rest of a burst with the first row of the next
    (the sentinel is the next burst of the last one)."""
    files = [list(bursts[0])]
    for burst in [*bursts[1:], [sentinel]]:
        files[-1].append(burst[0])
        if burst[1:]:
            files.append(list(burst[1:]))
    return files


def _write(folder: Path, n: int, rows: list[dict], decl: P.SourceDecl) -> None:
    """Rows as file ``n`` of ``folder`` in the source's format (renamed into place)."""
    fmt = (decl.format or "").lower()
    names = [c.name for c in decl.columns]
    tmp = folder / f".part{n}.tmp"
    final = folder / f"part{n}.{fmt}"
    if fmt == "parquet":
        import pyarrow as pa
        import pyarrow.parquet as pq

        from wql.compiler.types import to_spark

        types = {"BIGINT": pa.int64(), "INT": pa.int32(), "DOUBLE": pa.float64()}
        fields = []
        for c in decl.columns:
            if c.type.kind == "TIMESTAMP":
                t = pa.timestamp("us", tz="UTC")
            elif c.type.kind == "DECIMAL":
                st = to_spark(c.type)
                t = pa.decimal128(st.precision, st.scale)
            elif c.type.kind == "BOOLEAN":
                t = pa.bool_()
            elif c.type.kind == "STRING":
                t = pa.string()
            else:
                t = types[c.type.kind]
            fields.append(pa.field(c.name, t))
        data = {
            c.name: [
                r[c.name].replace(tzinfo=dt.UTC) if c.type.kind == "TIMESTAMP" else r[c.name]
                for r in rows
            ]
            for c in decl.columns
        }
        pq.write_table(pa.table(data, schema=pa.schema(fields)), tmp)
    elif fmt == "json":
        tmp.write_text("".join(json.dumps({k: _plain(r[k]) for k in names}) + "\n" for r in rows))
    else:
        buf = io.StringIO()
        w = csv.writer(buf, lineterminator="\n")
        if decl.option("header") == "true":
            w.writerow(names)
        w.writerows([[_plain(r[k]) for k in names] for r in rows])
        tmp.write_text(buf.getvalue())
    tmp.rename(final)
    # the file source orders new files by modification time
    os.utime(final, (1_000_000 + n, 1_000_000 + n))


def _plain(v: Any) -> Any:
    if isinstance(v, dt.datetime):
        return v.strftime("%Y-%m-%d %H:%M:%S")
    if isinstance(v, dt.date):
        return v.isoformat()
    if isinstance(v, decimal.Decimal):
        return str(v)
    return v


# --------------------------------------------------------------------------- running


@dataclass
class Outcome:
    batch: dict[str, Counter] = field(default_factory=dict)
    stream: dict[str, Counter] = field(default_factory=dict)
    engines: dict[str, str] = field(default_factory=dict)
    errors: dict[str, WqlError] = field(default_factory=dict)
    processed: dict[str, bool] = field(default_factory=dict)


def _counter(df) -> Counter:
    return Counter(
        tuple(as_text(v) for v in r)
        for r in df.collect()
        if not any(isinstance(v, str) and SENTINEL in v.lower() for v in r)
    )


def _read(spark, path: Path) -> Counter:
    # a sink that committed only empty batches has a commit log but no data file
    if not any(p.suffix == ".parquet" for p in path.glob("*.parquet")):
        return Counter()
    return _counter(read_output(spark, path))


def _run_file(spark, path: Path, names: list[str], base: Path, outcome: Outcome) -> None:
    text = path.read_text()
    program = compile_source(text, path.name)
    stream_text, batch_text = text, text
    chunks: dict[str, list[list[dict]]] = {}
    for m in _PATH.finditer(text):
        decl = next(d for d in program.sources if d.path == m.group(1))
        bursts, sentinel = _rows(decl)
        live = base / "stream" / decl.name
        once = base / "batch" / decl.name
        live.mkdir(parents=True)
        once.mkdir(parents=True)
        chunks[decl.name] = _chunks(bursts, sentinel)
        for n, rows in enumerate(chunks[decl.name]):
            _write(live, n, rows, decl)
        _write(once, 0, [r for b in bursts for r in b], decl)
        stream_text = stream_text.replace(m.group(0), f"path = '{live}', maxFilesPerTrigger = '1'")
        batch_text = batch_text.replace(m.group(0), f"path = '{once}'")
    kinds = {q.name: _kind(q) for q in program.queries if q.name in names}

    compiled = wql.compile(stream_text)
    frames = {d.name: read_stream_source(spark, d, None) for d in compiled.program.sources}
    for name in [n for n, k in kinds.items() if k == "refused"]:
        with pytest.raises(WqlUnsupportedError) as info:
            compiled.only(name).apply(spark, **frames)
        outcome.errors[name] = info.value

    compare = [n for n, k in kinds.items() if k == "compare"]
    if compare:
        batch = wql.compile(batch_text).only(*compare).apply(spark)
        try:
            for r in batch.queries:
                outcome.batch[r.name] = _counter(r.df)
                if r.late is not None:
                    outcome.batch[r.late_name] = _counter(r.late)
        finally:
            batch.release()
        for i in range(0, len(compare), GROUP):
            results = compiled.only(*compare[i : i + GROUP]).apply(spark, **frames)
            outcome.engines.update({r.name: r.engine for r in results.queries})
            sinks = start_streams(results, base / "out", base / "ck", fmt="parquet")
            for name, out in sinks.outputs.items():
                outcome.stream[name] = _read(spark, out)

    processing = [n for n, k in kinds.items() if k == "processing"]
    if processing:
        results = compiled.only(*processing).apply(spark, **frames)
        outcome.engines.update({r.name: r.engine for r in results.queries})
        sinks = start_streams(
            results, base / "pout", base / "pck", fmt="parquet", trigger="1 second"
        )
        try:
            # processAllAvailable() never returns here: processing-time timers make
            # Spark run a batch at every trigger; wait until every row went through
            total = sum(len(rows) for c in chunks.values() for rows in c)
            deadline = time.monotonic() + 300
            pending = dict(zip(processing, sinks.stages[0], strict=True))
            while pending and time.monotonic() < deadline:
                for name, q in list(pending.items()):
                    if q.exception() is not None:
                        raise AssertionError(f"{name}: {q.exception()}")
                    if sum(p["numInputRows"] for p in q.recentProgress) >= total:
                        outcome.processed[name] = True
                        del pending[name]
                time.sleep(0.5)
        finally:
            sinks.stop()


@pytest.fixture(scope="module")
def outcome(spark, tmp_path_factory):
    """``outcome(path)``: the file's streaming run, done once when first asked for."""
    done: dict[Path, Outcome] = {}

    def get(path: Path) -> Outcome:
        if path not in done:
            names = [q.name for p, q in CASES if p == path]
            base = tmp_path_factory.mktemp(f"q_{path.parent.name}_{path.stem}")
            partitions = spark.conf.get("spark.sql.shuffle.partitions")
            spark.conf.set("spark.sql.shuffle.partitions", "1")
            try:
                done[path] = Outcome()
                _run_file(spark, path, names, base, done[path])
            finally:
                spark.conf.set("spark.sql.shuffle.partitions", partitions)
        return done[path]

    return get


def test_cases_cover_every_golden_and_fixture_query():
    assert len(FILES) >= 9
    cases = [(compile_source(p.read_text()).source(q.source.name), q) for p, q in CASES]
    for path in FILES:
        program = compile_source(path.read_text(), path.name)
        for q in program.queries:
            assert (program.source(q.source.name), q) in cases, (path.name, q.name)
    assert sum(_kind(q) == "compare" for _, q in CASES) >= 20


@pytest.mark.parametrize(
    ("path", "query"), CASES, ids=[f"{p.parent.name}/{p.stem}/{q.name}" for p, q in CASES]
)
def test_query_streams_with_the_default_engine(outcome, path, query):
    outcome = outcome(path)
    kind = _kind(query)
    if kind == "refused":
        err = outcome.errors[query.name]
        assert "uses both event time and processing time" in err.message
        trigger = query.trigger
        assert trigger is not None and err.span is not None
        assert (err.span.line, err.span.column) == (trigger.span.line, trigger.span.column)
        return
    # the planner's choice for a stream (docs/native.md, "Streaming")
    assert outcome.engines[query.name] == "operator"
    if kind == "processing":
        assert outcome.processed[query.name]
        return
    names = [query.name] + ([query.late_output] if query.late_output else [])
    for name in names:
        assert outcome.stream[name] == outcome.batch[name], name
    if (path.stem, query.name) in NEVER_FIRE:
        assert not outcome.batch[query.name]
    else:
        assert sum(outcome.batch[query.name].values()) > 0
