"""Shared fixtures: one local SparkSession for the whole test session.

The cluster suite (``tests/cluster``, marker ``cluster``) needs a session of
its own, so a pytest process of its own: it is deselected here unless the
``-m`` expression names it (``make test-cluster`` runs ``pytest -m cluster
tests/cluster``). Deselecting it here rather than with ``-m 'not cluster'`` in
``addopts`` keeps ``pytest -m "not slow"`` (``make test-fast``, without the
``slow`` end-to-end cases) and ``pytest -m slow`` (``make test-slow``) from
bringing the cluster tests back.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = Path(__file__).resolve().parent / "fixtures"


def pytest_collection_modifyitems(config, items):
    if "cluster" in (config.option.markexpr or ""):
        return  # the expression decides
    cluster = [item for item in items if item.get_closest_marker("cluster") is not None]
    if cluster:
        config.hook.pytest_deselected(items=cluster)
        items[:] = [item for item in items if item.get_closest_marker("cluster") is None]


#: The test JVM compiles with C1 only and collects with the serial collector. The
#: suite runs thousands of small, different plans, each a few times: C2's
#: optimising compiler threads and G1's concurrent threads took about half the
#: JVM's CPU on two cores without paying it back (a drained stream query: JVM CPU
#: 46 -> 22 s, the stream 20.9 -> 14.6 s). Results do not depend on the compiler.
TEST_JVM_OPTIONS = "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"


@pytest.fixture(scope="session")
def spark(tmp_path_factory):
    """A local[2] SparkSession shared by every test that asks for it (JVM start-up is ~15 s);
    its catalog's warehouse is a temporary folder (tests that create tables use a
    database of their own and drop it).

    Two shuffle partitions, one per core: every micro-batch of a stateful stream
    runs one task per partition (a Python worker and a RocksDB state store each),
    so four made two waves of tasks on two cores for the same rows; two still
    spread keys over more than one partition. Tests of other layouts set their own.

    Interpreted evaluation, no generated code: the tests' inputs are a few rows, so
    compiling each plan's Java (whole-stage code generation) costs more than it saves
    (test_examples.py 47 -> 36 s, test_stream_pipelines.py 104 -> 91 s). The operators
    and their results are the same; the cluster suite, `wql run` in its own process
    (test_run_quiet.py, test_compile_targets.py) and the benchmarks run with it."""
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    from wql.spark.session import default_session

    session = default_session(
        master="local[2]",
        app_name="wql-tests",
        extra_conf={
            "spark.sql.shuffle.partitions": "2",
            "spark.default.parallelism": "2",
            "spark.sql.codegen.wholeStage": "false",
            "spark.sql.codegen.factoryMode": "NO_CODEGEN",
            "spark.sql.warehouse.dir": str(tmp_path_factory.mktemp("warehouse")),
            "spark.driver.extraJavaOptions": TEST_JVM_OPTIONS,
        },
    )
    yield session
    session.stop()
