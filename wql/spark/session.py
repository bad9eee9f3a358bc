"""The default SparkSession WQL makes when the caller passes none."""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping

ROCKSDB_PROVIDER = (
    "org.apache.spark.sql.execution.streaming.state.RocksDBStateStoreProvider"
)


def default_session(
    master: str | None = None,
    app_name: str = "wql",
    extra_conf: Mapping[str, str] | None = None,
):
    """Get or create a quiet local SparkSession fit for WQL.

    Python workers run the current interpreter (``PYSPARK_PYTHON``), the UI is
    off, times are UTC, and the RocksDB state store is configured (streaming
    ``transformWithState`` requires it). ``master`` defaults to ``local[*]``.
    """
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    from pyspark.sql import SparkSession

    builder = (
        SparkSession.builder.master(master or "local[*]")
        .appName(app_name)
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.pyspark.python", sys.executable)
        .config("spark.sql.streaming.stateStore.providerClass", ROCKSDB_PROVIDER)
        .config("spark.driver.extraJavaOptions", "-Duser.timezone=UTC")
        .config("spark.executor.extraJavaOptions", "-Duser.timezone=UTC")
    )
    for key, value in (extra_conf or {}).items():
        builder = builder.config(key, value)
    session = builder.getOrCreate()
    session.sparkContext.setLogLevel("ERROR")
    return session
