"""A normal ``wql run`` (its own process, its own JVM) prints the summary and
nothing else on standard error: no JVM or Spark start-up notices, no WARN lines."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from tests.spark.examples_helpers import EXAMPLES, ROOT

pytestmark = [pytest.mark.spark, pytest.mark.slow]


def test_wql_run_stderr_is_the_summary_alone(tmp_path):
    env = {k: v for k, v in os.environ.items() if k not in ("SPARK_LOCAL_IP", "WQL_DEBUG")}
    cmd = [
        *(sys.executable, "-m", "wql.cli", "run", str(EXAMPLES / "iot_late_data.wql")),
        *("--output", str(tmp_path / "out"), "--master", "local[1]"),
    ]
    done = subprocess.run(cmd, env=env, cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    lines = done.stderr.splitlines()
    assert len(lines) == 1, done.stderr
    summary = f"{EXAMPLES / 'iot_late_data.wql'}: per_minute [operator] | rows in 10 | out 7 |"
    assert lines[0].startswith(summary), lines[0]
    assert "WARN" not in done.stderr and "log4j" not in done.stderr
    assert done.stdout == ""


# --------------------------------------------------------------------------- streams

STREAM_QUERY = """
CREATE VIEW per_auction AS
SELECT auction, window_start, COUNT(*) AS n, MAX(price) AS top FROM bids
GROUP BY auction, TUMBLE(ts, INTERVAL '10' SECOND);
"""
#: the first run reads the first FIRST files; the second the rest, then drains
FIRST = 4
ERASE = "\r\033[K"


def _stream_cmd(query, out, ck, *flags):
    return [
        *(sys.executable, "-m", "wql.cli", "run", str(query), "--stream", *flags),
        *("--checkpoint", str(ck), "--output", str(out), "--master", "local[1]"),
    ]


def _env(**more):
    env = {k: v for k, v in os.environ.items() if k not in ("SPARK_LOCAL_IP", "WQL_DEBUG")}
    return {**env, **more}


def _on_a_terminal(cmd, env, timeout=900) -> tuple[int, str]:
    """Run ``cmd`` with its standard error on a terminal (a pty): its exit code and
    what it wrote there."""
    import pty
    import select
    import time

    master, slave = pty.openpty()
    proc = subprocess.Popen(
        cmd, env=env, cwd=ROOT, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=slave
    )
    os.close(slave)
    deadline = time.monotonic() + timeout
    chunks = []
    try:
        while time.monotonic() < deadline:
            ready, _, _ = select.select([master], [], [], 1)
            if not ready:
                if proc.poll() is not None:
                    break
                continue
            try:
                data = os.read(master, 65536)
            except OSError:  # EIO: the terminal's other side is closed
                break
            if not data:
                break
            chunks.append(data)
        code = proc.wait(timeout=max(1, deadline - time.monotonic()))
    finally:
        os.close(master)
        if proc.poll() is None:
            proc.kill()
    return code, b"".join(chunks).decode().replace("\r\n", "\n")


def _fields(summary: str) -> str:
    """A summary line's counts: between the brackets and the time taken."""
    return summary.split("] | ", 1)[1].rsplit(" | ", 1)[0]


def test_wql_run_stream_is_quiet_and_its_summary_reads_like_batch(spark, tmp_path, capsys):
    """A ``--stream`` run (its own process, a real checkpoint folder) prints no Spark or
    PySpark worker messages; on a terminal its status line counts micro-batches and
    rows read; its summary has batch's fields, its counts every row read so far (rows
    waiting in windows included) and, drained, equals the batch run's summary."""
    from tests.spark.stream_helpers import SOURCE, files, write_files
    from wql.cli import main as cli_main
    from wql.spark.stream_sinks import read_output

    folder, out, ck = tmp_path / "in", tmp_path / "out", tmp_path / "ck"
    write_files(folder, range(FIRST))
    query = tmp_path / "q.wql"
    query.write_text(SOURCE.format(path="in", options=", maxFilesPerTrigger = '1'") + STREAM_QUERY)
    read_first = sum(len(f) for f in files()[:FIRST])
    read_all = sum(len(f) for f in files())

    # COLUMNS: the status line is cut at the terminal's width, and the temp paths are long
    code, err = _on_a_terminal(_stream_cmd(query, out, ck), _env(COLUMNS="1000"))
    assert code == 0, err[-3000:]
    assert "TransformWithState" not in err and "StructType" not in err, err
    assert "WARN" not in err and "log4j" not in err, err
    # the status line: rewritten in place, erased before the summary and at the end
    shown = [s for s in err.split(ERASE) if s]
    lines = [s for s in shown if not s.startswith("wql run: ")]
    assert len(lines) == 1 and lines[0].endswith("\n"), err
    (summary,) = lines
    assert summary.startswith(f"{query}: per_auction [operator, stream] | "), summary
    read = [int(s.split(" rows read")[0].rsplit(" ", 1)[1]) for s in shown if "rows read" in s]
    assert read and read[-1] == read_first and read == sorted(read), err
    assert any(f"| micro-batch {FIRST - 1} |" in s for s in shown), err
    # every row read is in: rows that wait in windows too; no fired count before the end.
    # The watermark (13 s - 2 s) passed the first window only: a, b and c in [0, 10)
    committed = read_output(spark, out / "per_auction", "csv").count()
    assert committed == 3
    assert _fields(summary) == f"rows in {read_first} | out 3 | late 0 | dropped 0", summary

    write_files(folder, range(FIRST, len(files())))
    done = subprocess.run(
        _stream_cmd(query, out, ck, "--drain"),
        env=_env(),
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    (drained,) = done.stderr.splitlines()
    assert drained.startswith(f"{query}: per_auction [operator, stream, drained] | "), drained
    assert _fields(drained).startswith(f"rows in {read_all} | "), drained

    batch_query = tmp_path / "batch.wql"
    batch_query.write_text(SOURCE.format(path="in", options="") + STREAM_QUERY)
    argv = ["run", str(batch_query), "--output", str(tmp_path / "batch"), "--engine", "operator"]
    assert cli_main(argv) == 0
    (batch,) = capsys.readouterr().err.splitlines()
    assert batch.startswith(f"{batch_query}: per_auction [operator] | "), batch
    assert _fields(drained) == _fields(batch)


def test_a_drained_checkpoint_is_refused_before_spark_starts(tmp_path):
    """The refusal reads the checkpoint's files: it comes with no JVM to start (this
    process has no Java: starting Spark would fail with another error)."""
    from tests.spark.stream_helpers import SOURCE, write_files

    write_files(tmp_path / "in", range(2))
    query = tmp_path / "q.wql"
    query.write_text(SOURCE.format(path="in", options="") + STREAM_QUERY)
    drained = tmp_path / "ck" / "per_auction" / "DRAINED"
    drained.parent.mkdir(parents=True)
    drained.write_text('{"drained_at": "2026-01-01T00:00:00+00:00"}\n')
    cmd = _stream_cmd(query, tmp_path / "out", tmp_path / "ck")
    no_java = _env(JAVA_HOME=str(tmp_path / "no-java"), PATH=os.path.dirname(sys.executable))
    done = subprocess.run(cmd, env=no_java, cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert done.returncode == 1, done.stderr
    assert "query 'per_auction': its stream was drained" in done.stderr, done.stderr
    assert "at 2026-01-01T00:00:00+00:00" in done.stderr and "another --checkpoint" in done.stderr
    assert "Java" not in done.stderr and "JAVA_HOME" not in done.stderr, done.stderr
    assert not (tmp_path / "out").exists()

    # without the record, the same run gets as far as starting Spark, which fails there:
    # the refusal above came first
    drained.unlink()
    done = subprocess.run(cmd, env=no_java, cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert done.returncode != 0 and "drained" not in done.stderr, done.stderr
