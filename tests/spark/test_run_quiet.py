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
