"""The default SparkSession WQL makes when the caller passes none."""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping

ROCKSDB_PROVIDER = "org.apache.spark.sql.execution.streaming.state.RocksDBStateStoreProvider"


def default_session(
    master: str | None = None,
    app_name: str = "wql",
    extra_conf: Mapping[str, str] | None = None,
):
    """Get or create a quiet SparkSession fit for WQL.

    The UI is off, times are UTC, and the RocksDB state store is configured
    (streaming ``transformWithState`` requires it). ``master`` defaults to
    the one ``spark-submit`` configured, else ``local[*]``. On a local master
    Python workers run the current interpreter (``PYSPARK_PYTHON``); on a
    cluster the executors' Python is the deployment's business
    (``docs/running.md``), so it is left alone.
    """
    from pyspark import SparkConf
    from pyspark.sql import SparkSession

    if master is None and not SparkConf().contains("spark.master"):
        master = "local[*]"
    local = master is not None and master.startswith("local")
    if local:
        os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
        os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    builder = SparkSession.builder.appName(app_name)
    if master is not None:
        builder = builder.master(master)
    builder = (
        builder.config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.sql.streaming.stateStore.providerClass", ROCKSDB_PROVIDER)
        .config("spark.driver.extraJavaOptions", "-Duser.timezone=UTC")
        .config("spark.executor.extraJavaOptions", "-Duser.timezone=UTC")
    )
    if local:
        builder = builder.config("spark.pyspark.python", sys.executable)
    for key, value in (extra_conf or {}).items():
        builder = builder.config(key, value)
    session = builder.getOrCreate()
    session.sparkContext.setLogLevel("ERROR")
    return session
