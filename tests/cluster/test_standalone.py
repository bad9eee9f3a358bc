"""The standalone cluster of docs/running.md, started from the pip-installed
pyspark, runs ``wql run --master spark://...`` with the local results.

A master and a worker are started as in the docs (``spark-class
org.apache.spark.deploy.master.Master`` / ``...deploy.worker.Worker``),
bound to 127.0.0.1 and to free ports, with bounded waits; both are killed
in teardown whatever happens. ``wql run`` is a process of its own (its own
driver JVM), so this needs no session of the test process.
"""

from __future__ import annotations

import csv
import datetime as dt
import json
import os
import re
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from tests.spark.examples_helpers import EXAMPLES, ROOT, expected_outputs, text

pytestmark = pytest.mark.cluster

START_TIMEOUT = 120  # seconds, per daemon; a JVM start on a busy 2-core machine is ~10-40 s


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _spark_class() -> str:
    import pyspark

    return str(Path(pyspark.__file__).parent / "bin" / "spark-class")


def _wait(what: str, ready, procs: list[subprocess.Popen], logs: list[Path]) -> None:
    deadline = time.monotonic() + START_TIMEOUT
    while not ready():
        for p in procs:
            if p.poll() is not None:
                pytest.fail(f"{what}: a daemon exited ({p.returncode}): {_tail(logs)}")
        if time.monotonic() > deadline:
            pytest.fail(f"{what}: not ready after {START_TIMEOUT} s: {_tail(logs)}")
        time.sleep(1)


def _tail(logs: list[Path]) -> str:
    return " || ".join(p.read_text(errors="replace")[-1500:] for p in logs if p.exists())


def _alive_workers(ui_port: int) -> int:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{ui_port}/json/", timeout=5) as r:
            return int(json.load(r).get("aliveworkers", 0))
    except OSError:
        return 0


@pytest.fixture
def standalone(tmp_path):
    """``spark://127.0.0.1:PORT`` with one worker (1 core, 1 GB), the environment
    to run against it, and the daemons' logs."""
    env = dict(os.environ, SPARK_LOCAL_IP="127.0.0.1", PYSPARK_PYTHON=sys.executable)
    port, ui = _free_port(), _free_port()
    procs: list[subprocess.Popen] = []
    logs: list[Path] = []

    def start(name: str, *args: str) -> None:
        log = tmp_path / f"{name}.log"
        logs.append(log)
        with log.open("wb") as out:
            procs.append(
                subprocess.Popen(
                    [_spark_class(), *args],
                    env=env,
                    stdout=out,
                    stderr=subprocess.STDOUT,
                    start_new_session=True,  # its own process group: killed whole below
                )
            )

    try:
        start(
            "master",
            "org.apache.spark.deploy.master.Master",
            *("--host", "127.0.0.1", "--port", str(port), "--webui-port", str(ui)),
        )
        _wait("master", lambda: _listening(port), procs, logs)
        start(
            "worker",
            "org.apache.spark.deploy.worker.Worker",
            f"spark://127.0.0.1:{port}",
            *("--host", "127.0.0.1", "--cores", "1", "--memory", "1g"),
            *("--webui-port", str(_free_port()), "--work-dir", str(tmp_path / "work")),
        )
        _wait("worker", lambda: _alive_workers(ui) == 1, procs, logs)
        yield f"spark://127.0.0.1:{port}", env, logs
    finally:
        for p in procs:
            if p.poll() is None:
                os.killpg(p.pid, signal.SIGTERM)
        for p in procs:
            try:
                p.wait(timeout=20)
            except subprocess.TimeoutExpired:
                os.killpg(p.pid, signal.SIGKILL)
                p.wait(timeout=20)


def _listening(port: int) -> bool:
    with socket.socket() as s:
        s.settimeout(1)
        return s.connect_ex(("127.0.0.1", port)) == 0


def test_wql_run_against_a_standalone_master(standalone, tmp_path):
    master, env, logs = standalone
    out = tmp_path / "out"
    cmd = [
        sys.executable,
        *("-m", "wql.cli", "run", str(EXAMPLES / "iot_late_data.wql")),
        *("--master", master, "--output", str(out)),
    ]
    done = subprocess.run(cmd, env=env, cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:] + _tail(logs)
    assert "per_minute [operator] | rows in 10 | out 7 | late 1" in done.stderr
    for name, (header, rows) in expected_outputs("iot_late_data").items():
        got = []
        for part in sorted((out / name).glob("*.csv")):
            with part.open(newline="") as f:
                table = list(csv.reader(f))
            assert table[0] == header, name
            got += [tuple(_as_expected(v) for v in r) for r in table[1:]]
        assert sorted(got) == rows, name
    # the work ran in the worker's executor, not in a local driver
    app_dirs = list((tmp_path / "work").glob("app-*/*/stderr"))
    assert app_dirs, "no executor ran on the worker"


def _as_expected(value: str) -> str:
    """A value of Spark's CSV writer as the expected files spell it (timestamps are ISO)."""
    if re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z", value):
        return text(dt.datetime.fromisoformat(value).replace(tzinfo=None))
    return value
