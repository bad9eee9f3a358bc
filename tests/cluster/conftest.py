"""The multi-process cluster suite: a session on ``local-cluster[2,1,1024]``.

``local-cluster[N,C,M]`` starts a standalone master and N workers inside
the driver's JVM, and each worker launches its executor as a separate JVM
with its own Python workers: replay statistics, the shuffle by key, the
operator's state and the streaming state stores all cross process
boundaries, as on a real cluster. Every test module here is marked
``cluster`` (``pytestmark``) and deselected by the default ``pytest`` run
(``tests/conftest.py``); ``make test-cluster`` runs them in a pytest process of
their own, because one Python process holds one SparkContext and the main
suite's ``local[2]`` session cannot live next to this one.
"""

from __future__ import annotations

import os
import sys
import time

import pytest

MASTER = "local-cluster[2,1,1024]"
EXECUTORS = 2


@pytest.fixture(scope="session")
def cluster():
    """Two executor processes (one core, 1 GB each), shared by the whole cluster suite."""
    from pyspark.sql import SparkSession

    active = SparkSession.getActiveSession()
    if active is not None and active.sparkContext.master != MASTER:
        pytest.fail(
            f"a {active.sparkContext.master} session is already running in this process: "
            "run the cluster tests on their own (make test-cluster)"
        )
    # Executors start Python from PYSPARK_PYTHON of the driver's environment;
    # the builder's spark.pyspark.python is read by spark-submit only.
    os.environ["PYSPARK_PYTHON"] = sys.executable
    from tests.conftest import TEST_JVM_OPTIONS
    from wql.spark.session import default_session

    session = default_session(
        MASTER,
        "wql-cluster-tests",
        # the operator stage in 4 partitions even for small inputs (which
        # otherwise run in one), so that keys' state is spread over both executors
        {
            "spark.sql.shuffle.partitions": "4",
            "spark.wql.operator.partitions": "4",
            # C1 only, serial collector: see TEST_JVM_OPTIONS in tests/conftest.py
            "spark.driver.extraJavaOptions": TEST_JVM_OPTIONS,
            "spark.executor.extraJavaOptions": TEST_JVM_OPTIONS,
        },
    )
    # executors register asynchronously: wait (bounded) until both are there,
    # so that no test runs on one of them alone
    deadline = time.monotonic() + 120
    while _executors(session) < EXECUTORS:
        if time.monotonic() > deadline:
            session.stop()
            pytest.fail(f"{MASTER}: {_executors(session)} executors registered after 120 s")
        time.sleep(0.5)
    yield session
    session.stop()


def _executors(spark) -> int:
    """Executors registered with the driver (its block manager list less the driver's own)."""
    return int(spark.sparkContext._jsc.sc().getExecutorMemoryStatus().size()) - 1
