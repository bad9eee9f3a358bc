"""Structured Streaming end to end: batch agreement, restarts, exactly-once after SIGKILL.

Every stream here reads a folder of JSON files with ``maxFilesPerTrigger = 1``
(one file = one micro-batch, files ordered by modification time), so the
micro-batch boundaries are the same in every run; outputs are read with
Spark, which honours the file sinks' ``_spark_metadata`` logs.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest

import wql
from tests.spark.stream_helpers import stream_cli_argv
from wql.spark.stream_sinks import read_output, start_streams

ROOT = Path(__file__).resolve().parents[2]
BASE = 1_700_000_000_000

# (key, value, ms after BASE) per file; event time never goes back across files
# except in LATE_FILE, whose row is late for the stream (batch replay, which
# orders by event time, would not see it late: the agreement test leaves it
# out of the batch run); the last file is a far-future sentinel of key "zz"
# that plays end of input for the other keys.
FILES = [
    [("a", 1, 0), ("b", 2, 500), ("a", 3, 1000)],
    [("a", 1, 2500), ("b", 1, 2600), ("a", 2, 3500)],
    [("b", 5, 4000), ("a", 1, 9000), ("a", 1, 9100)],
    [("b", 1, 12000), ("a", 4, 12500), ("b", 2, 13000)],
    [("a", 1, 20000), ("b", 1, 20001)],
    [("b", 7, 100)],  # LATE: far behind the watermark of the earlier micro-batches
    [("zz", 0, 100000)],
]
LATE_FILE = 5

TEXT = """
CREATE SOURCE s (k STRING, v DOUBLE, ts TIMESTAMP,
    WATERMARK FOR ts AS ts - INTERVAL '1' SECOND)
WITH (format = 'json', path = '{path}', maxFilesPerTrigger = '1');
CREATE VIEW sessions AS
SELECT k, window_start, window_end, pane_index, COUNT(*) AS n, SUM(v) AS total FROM s
GROUP BY k, SESSION(ts, INTERVAL '3' SECOND) TRIGGER COUNT(2) LATE DATA TO late_rows;
CREATE VIEW tumbles AS
SELECT k, window_start, COUNT(*) AS n, MAX(v) AS top FROM s WHERE v < 5
GROUP BY k, TUMBLE(ts, INTERVAL '5' SECOND);
"""


def _iso(ms: int) -> str:
    return (dt.datetime(1970, 1, 1) + dt.timedelta(milliseconds=BASE + ms)).isoformat() + "Z"


def write_files(folder: Path, indices) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    for i in indices:
        tmp = folder / f".f{i:03d}.tmp"
        tmp.write_text(
            "".join(json.dumps({"k": k, "v": v, "ts": _iso(t)}) + "\n" for k, v, t in FILES[i])
        )
        final = folder / f"f{i:03d}.json"
        tmp.rename(final)
        # the file source orders new files by modification time
        os.utime(final, (1_000_000 + i, 1_000_000 + i))


def rows(df) -> Counter:
    return Counter(tuple(r) for r in df.collect())


def stream_once(spark, folder: Path, out: Path, ck: Path):
    """One available-now run of TEXT over ``folder`` (resumes from ``ck``)."""
    from wql.spark.stream_sinks import read_stream_source

    compiled = wql.compile(TEXT.format(path=folder))
    assert compiled.engine == {"sessions": "operator", "tumbles": "native"}
    source = read_stream_source(spark, compiled.program.source("s"), None)
    results = compiled.apply(spark, s=source)
    # on a stream the planner picks the operator engine for both (docs/native.md, "Streaming")
    assert {r.name: r.engine for r in results.queries} == {
        "sessions": "operator",
        "tumbles": "operator",
    }
    start_streams(results, out, ck, fmt="parquet")


def outputs(spark, out: Path) -> dict[str, Counter]:
    return {
        name: rows(read_output(spark, out / name).orderBy("k"))
        for name in ("sessions", "tumbles", "late_rows")
        if (out / name).exists()
    }


@pytest.fixture(scope="module")
def uninterrupted(spark, tmp_path_factory):
    """The reference: every file there from the start, one run."""
    base = tmp_path_factory.mktemp("stream_ref")
    write_files(base / "in", range(len(FILES)))
    stream_once(spark, base / "in", base / "out", base / "ck")
    return base, outputs(spark, base / "out")


def test_stream_agrees_with_the_batch_run(spark, uninterrupted):
    """Same firings as batch replay of the on-time rows; the late row reaches the
    operator (Spark drops nothing) and goes to the late output."""
    base, streamed = uninterrupted
    write_files(base / "batch_in", [i for i in range(len(FILES)) if i != LATE_FILE])
    batch = wql.compile(TEXT.format(path=base / "batch_in")).apply(spark)
    try:
        for name in ("sessions", "tumbles"):
            expected = Counter({r: n for r, n in rows(batch[name]).items() if r[0] != "zz"})
            got = Counter({r: n for r, n in streamed[name].items() if r[0] != "zz"})
            assert got == expected, name
            assert sum(got.values()) > 3
        late = Counter((r[0], r[1]) for r in streamed["late_rows"])
        assert late == Counter({("b", 7.0): 1})
    finally:
        batch.release()


@pytest.mark.slow
def test_restart_between_micro_batches_gives_the_uninterrupted_output(
    spark, uninterrupted, tmp_path
):
    _, reference = uninterrupted
    folder, out, ck = tmp_path / "in", tmp_path / "out", tmp_path / "ck"
    write_files(folder, range(3))
    stream_once(spark, folder, out, ck)
    first = outputs(spark, out)
    assert 0 < sum(first["sessions"].values()) < sum(reference["sessions"].values())
    write_files(folder, range(3, len(FILES)))
    stream_once(spark, folder, out, ck)  # same checkpoint: resumes after batch 2
    assert outputs(spark, out) == reference


@pytest.mark.slow
def test_sigkill_mid_stream_then_restart_is_exactly_once(spark, uninterrupted, tmp_path):
    """``wql run --stream`` killed with SIGKILL after some micro-batches committed,
    restarted on the same checkpoint: each output equals the uninterrupted run's."""
    _, reference = uninterrupted
    folder, out, ck = tmp_path / "in", tmp_path / "out", tmp_path / "ck"
    write_files(folder, range(len(FILES)))
    wql_file = tmp_path / "q.wql"
    wql_file.write_text(TEXT.format(path=folder))
    cmd = [
        sys.executable,
        "-m",
        "wql.cli",
        "run",
        str(wql_file),
        "--stream",
        "--checkpoint",
        str(ck),
        "--output",
        str(out),
        "--format",
        "parquet",
        "--master",
        "local[2]",
        "--conf",
        "spark.sql.shuffle.partitions=2",
    ]
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    commits = ck / "sessions" / "operator" / "commits"
    proc = subprocess.Popen(
        cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True
    )
    try:
        deadline = time.time() + 400
        while time.time() < deadline and proc.poll() is None:
            done = [p for p in commits.glob("*") if p.name.isdigit()] if commits.exists() else []
            if len(done) >= 2:
                break
            time.sleep(0.2)
        assert proc.poll() is None, "the run ended before it could be killed"
        # the whole process group: the Python driver and the JVM it started
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=60)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=60)
    killed_at = len([p for p in commits.glob("*") if p.name.isdigit()])
    assert 2 <= killed_at < len(FILES) + 1  # mid-stream: some batches committed, not all
    done = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    assert outputs(spark, out) == reference
    # the counts too (rows in, filtered by tumbles' WHERE, late, dropped): each row once
    # over the killed run and its re-run, as in the run that was not killed
    summaries = [line for line in done.stderr.splitlines() if "[operator, stream]" in line]
    assert len(summaries) == 2, done.stderr[-2000:]
    for line in summaries:
        name = line.split(": ", 1)[1].split(" [", 1)[0]
        assert _fields(line) == _fields(_uninterrupted_summary(spark, uninterrupted, name))


@pytest.mark.slow
def test_wql_run_stream_runs_a_query_spark_cannot_stream_natively(spark, tmp_path, capsys):
    """The query of a CUMULATE window with COUNT(DISTINCT ...): native in batch,
    rejected by Spark on a stream; ``wql run --stream`` runs it on the operator
    engine (the planner's choice for a stream) and writes the batch rows."""
    from wql.cli import main as cli_main

    def at(ms: int) -> dt.datetime:
        return dt.datetime(2024, 1, 1) + dt.timedelta(milliseconds=ms)

    folder = tmp_path / "in"
    folder.mkdir()
    files = [
        [("a", 1, 1000), ("a", 2, 5000), ("b", 1, 12000)],
        [("a", 1, 14000), ("a", 3, 21000)],
        [("zz", 0, 100000)],  # the sentinel: its watermark fires every window above
    ]
    for i, rows in enumerate(files):
        path = folder / f"f{i}.json"
        path.write_text(
            "".join(
                json.dumps({"k": k, "v": v, "ts": at(ms).isoformat()}) + "\n" for k, v, ms in rows
            )
        )
        os.utime(path, (1_000_000 + i, 1_000_000 + i))
    query = tmp_path / "q.wql"
    query.write_text(
        "CREATE SOURCE s (k STRING, v BIGINT, ts TIMESTAMP,\n"
        "    WATERMARK FOR ts AS ts - INTERVAL '1' SECOND)\n"
        "WITH (format = 'json', path = 'in', maxFilesPerTrigger = '1');\n"
        "SELECT k, window_start, window_end, COUNT(DISTINCT v) AS d\n"
        "FROM s\n"
        "GROUP BY k, CUMULATE(ts, INTERVAL '10' SECOND, INTERVAL '30' SECOND);\n"
    )
    assert wql.compile_file(query).engine == {"query_1": "native"}  # in batch
    out, ck = tmp_path / "out", tmp_path / "ck"
    argv = stream_cli_argv(spark, query, out, ck)
    assert cli_main(argv) == 0
    assert "query_1 [operator, stream]" in capsys.readouterr().err
    got = spark.read.schema("k STRING, window_start TIMESTAMP, window_end TIMESTAMP, d BIGINT")
    rows = Counter(
        tuple(r) for r in got.option("header", "true").csv(str(out / "query_1")).collect()
    )
    # a: {1, 2} in [0, 10 s); {1, 2, 1} in [0, 20 s); {1, 2, 1, 3} in [0, 30 s); b: {1} from 12 s
    expected = [("a", 10, 2), ("a", 20, 2), ("a", 30, 3), ("b", 20, 1), ("b", 30, 1)]
    assert rows == Counter((k, at(0), at(end * 1000), d) for k, end, d in expected)
    # forcing native there is a compile error at the CUMULATE window, before Spark runs
    assert cli_main([*argv, "--engine", "native"]) == 1
    err = capsys.readouterr().err
    assert (
        "q.wql:6:13: unsupported: query 'query_1' cannot run on the native engine on a stream"
        in err
    )


@pytest.mark.slow
def test_wql_run_stream_drain_ends_a_bounded_stream(spark, tmp_path, capsys):
    """``wql run --stream --drain``: after the files there, the end of input. Windows
    the data never closed fire, a count window's remainder is counted as in no
    firing, the outputs and counters are the batch run's, and the drained
    checkpoint refuses a second run."""
    from wql.cli import main as cli_main

    folder = tmp_path / "in"
    write_files(folder, range(3))  # no sentinel: nothing closes the last windows
    text = """
CREATE SOURCE s (k STRING, v DOUBLE, ts TIMESTAMP,
    WATERMARK FOR ts AS ts - INTERVAL '1' SECOND)
WITH (format = 'json', path = 'in'{options});
CREATE VIEW tumbles AS
SELECT k, window_start, COUNT(*) AS n, SUM(v) AS total FROM s
GROUP BY k, TUMBLE(ts, INTERVAL '5' SECOND);
CREATE VIEW pairs AS
SELECT k, COUNT(*) AS n, SUM(v) AS total FROM s GROUP BY k, COUNT_WINDOW(2);
"""
    query = tmp_path / "q.wql"
    query.write_text(text.format(options=", maxFilesPerTrigger = '1'"))
    out, ck = tmp_path / "out", tmp_path / "ck"
    argv = stream_cli_argv(spark, query, out, ck, "--drain")
    assert cli_main(argv) == 0
    err = capsys.readouterr().err
    # a's windows from 0 and 5 s, b's from 0: the last two wait for the end of input
    assert "tumbles [operator, stream, drained] | rows in 9 | out 3 |" in err
    # pairs of a's 6 rows and of b's 3: b's third row waits in a window that never fires
    assert "pairs [operator, stream, drained] | rows in 9 | out 4 | late 0 | fired 8" in err
    assert "dropped 1 (in no firing)" in err
    assert (ck / "tumbles" / "DRAINED").exists()

    batch_file = tmp_path / "batch.wql"
    batch_file.write_text(text.format(options=""))
    batch = wql.compile_file(batch_file).apply(spark)
    try:
        for r in batch.queries:
            reader = spark.read.schema(r.df.schema).option("header", "true")
            assert rows(reader.csv(str(out / r.name))) == rows(r.df), r.name
    finally:
        batch.release()

    assert cli_main(argv) == 1  # the stream has ended
    err = capsys.readouterr().err
    assert "its stream was drained" in err and "another --checkpoint" in err
    assert cli_main([*argv, "--trigger", "interval=1s"]) == 1
    assert "--drain ends the stream" in capsys.readouterr().err
    assert cli_main(["run", str(query), "--drain"]) == 1
    assert "--drain ends a stream: use it with --stream" in capsys.readouterr().err


def _fields(summary: str) -> str:
    """A summary line's counts: between the brackets and the time taken."""
    return summary.split("] | ", 1)[1].rsplit(" | ", 1)[0]


def _uninterrupted_summary(spark, uninterrupted, name: str) -> str:
    """The summary ``wql run --stream`` prints for query ``name`` of the uninterrupted run."""
    from wql.commands.report import summary_line
    from wql.spark.stream_sinks import TAGGED_DIR, tagged_counters, waiting_rows

    base, reference = uninterrupted
    counters = tagged_counters(spark, base / "out" / TAGGED_DIR / name)
    counters["rows_in"] += waiting_rows(spark, base / "ck" / name / "operator")
    del counters["rows_fired"]  # not drained
    counters["rows_out"] = sum(reference[name].values())
    return summary_line("q.wql", name, "operator", counters, 0.0, ("stream",))
