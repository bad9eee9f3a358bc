"""The default SparkSession WQL makes when the caller passes none.

``quiet=True`` (what ``wql run`` uses without ``--verbose``) starts the JVM
without its start-up chatter, which is noise to someone running a query:
the "using Spark's default log4j profile" and "setting default log level"
notices, WARN lines such as the hostname resolving to a loopback address or
the missing native-hadoop library, and the JVM's own "Using incubator
modules" notice; and on a stream, the messages PySpark's
``transformWithStateInPandas`` driver worker prints (a Python process the JVM
starts for every stateful streaming query, whose output the JVM copies to
its standard error): "Starting Streaming TransformWithStateInPandas Python
worker." and four more, with the UDF's and its schema's reprs, each followed
by a blank line. Logging is settled before the JVM starts: the driver gets
``log4j2-quiet.properties`` (errors only) through
``spark.driver.extraJavaOptions``, and the JVM's standard error goes through
a filter that drops the lines log4j does not write (the incubator notice, the
worker's messages). Errors still come through.
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from collections.abc import Mapping
from importlib import resources
from typing import IO, Any

ROCKSDB_PROVIDER = "org.apache.spark.sql.execution.streaming.state.RocksDBStateStoreProvider"


#: PySpark reads it once per process, at the first ``functions`` call with a session
DATAFRAME_DEBUGGING = "spark.python.sql.dataFrameDebugging.enabled"

QUIET_LOG4J = "log4j2-quiet.properties"
# what the JVM itself prints on standard error at start-up (no logger to configure)
_JVM_NOTICES = (b"WARNING: Using incubator modules",)
# what PySpark's transformWithStateInPandas driver worker prints with print() (no
# logger either), each message followed by an empty line
# (pyspark/sql/streaming/transform_with_state_driver_worker.py)
_WORKER_MESSAGES = (b"Starting Streaming TransformWithState", b"Streaming TransformWithState")


def default_session(
    master: str | None = None,
    app_name: str = "wql",
    extra_conf: Mapping[str, str] | None = None,
    *,
    quiet: bool = False,
):
    """Get or create a quiet SparkSession fit for WQL.

    The UI is off, times are UTC, and the RocksDB state store is configured
    (streaming ``transformWithState`` requires it). PySpark's DataFrame
    debugging (``spark.python.sql.dataFrameDebugging.enabled``: the Python
    call site of every ``functions`` call sent to the JVM for error contexts)
    is off: it costs several py4j round trips per column expression, which
    was most of a small query's driver time (docs/benchmarks.md, "The fixed
    cost of a small query"); WQL positions its own errors. ``master`` defaults to
    the one ``spark-submit`` configured, else ``local[*]``. On a local master
    Python workers run the current interpreter (``PYSPARK_PYTHON``); on a
    cluster the executors' Python is the deployment's business
    (``docs/running.md``), so it is left alone. ``quiet``: see the module
    docstring; it matters only when this call starts the JVM.
    """
    from pyspark import SparkConf
    from pyspark.sql import SparkSession

    if master is None and not SparkConf().contains("spark.master"):
        master = "local[*]"
    local = master is not None and master.startswith("local")
    if local:
        os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
        os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    driver_java = "-Duser.timezone=UTC"
    if quiet:
        config = resources.files("wql.spark").joinpath(QUIET_LOG4J)
        driver_java += f" -Dlog4j2.configurationFile={config}"
    options: dict[str, str] = {
        "spark.app.name": app_name,
        "spark.ui.enabled": "false",
        "spark.ui.showConsoleProgress": "false",
        "spark.sql.session.timeZone": "UTC",
        DATAFRAME_DEBUGGING: "false",
        "spark.sql.streaming.stateStore.providerClass": ROCKSDB_PROVIDER,
        "spark.driver.extraJavaOptions": driver_java,
        "spark.executor.extraJavaOptions": "-Duser.timezone=UTC",
    }
    if master is not None:
        options["spark.master"] = master
    if local:
        options["spark.pyspark.python"] = sys.executable
    for key, value in (extra_conf or {}).items():
        if key in ("spark.driver.extraJavaOptions", "spark.executor.extraJavaOptions"):
            value = f"{options[key]} {value}"  # the caller's options win (they come last)
        options[key] = value
    if quiet:
        _start_quiet_jvm(options)
    builder = SparkSession.builder
    for key, value in options.items():
        builder = builder.config(key, value)
    session = builder.getOrCreate()
    session.sparkContext.setLogLevel("ERROR")
    return session


def _start_quiet_jvm(options: Mapping[str, str]) -> None:
    """Launch the py4j gateway JVM (unless one runs) with its stderr filtered.

    PySpark passes every configuration entry to ``spark-submit`` when it
    launches the JVM, so the builder, which finds the gateway running, sees
    the same configuration.
    """
    from pyspark import SparkConf, SparkContext
    from pyspark.java_gateway import launch_gateway

    if SparkContext._gateway is not None or "PYSPARK_GATEWAY_PORT" in os.environ:
        return  # a JVM runs already (this process's, or spark-submit's)
    conf = SparkConf(loadDefaults=False)
    for key, value in options.items():
        conf.set(key, value)
    gateway: Any = launch_gateway(conf, popen_kwargs={"stderr": subprocess.PIPE})
    threading.Thread(
        target=_forward_stderr, args=(gateway.proc.stderr,), name="wql-jvm-stderr", daemon=True
    ).start()
    SparkContext._ensure_initialized(gateway=gateway, conf=conf)


def _forward_stderr(stream: IO[bytes]) -> None:
    """Copy the JVM's standard error to ours, less the JVM's start-up notices and the
    streaming driver worker's messages (with the empty line after each)."""
    with stream:
        after_message = False
        for line in stream:
            if line.startswith(_WORKER_MESSAGES):
                after_message = True
                continue
            blank_after_message = after_message and not line.strip()
            after_message = False
            if blank_after_message:
                continue
            if not line.startswith(_JVM_NOTICES):
                os.write(2, line)
