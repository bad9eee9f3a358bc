"""Shared fixtures: one local SparkSession for the whole test session."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = Path(__file__).resolve().parent / "fixtures"


@pytest.fixture(scope="session")
def spark(tmp_path_factory):
    """A local[2] SparkSession shared by every test that asks for it (JVM start-up is ~15 s);
    its catalog's warehouse is a temporary folder (tests that create tables use a
    database of their own and drop it)."""
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    from wql.spark.session import default_session

    session = default_session(
        master="local[2]",
        app_name="wql-tests",
        extra_conf={
            "spark.sql.shuffle.partitions": "4",
            "spark.default.parallelism": "2",
            "spark.sql.warehouse.dir": str(tmp_path_factory.mktemp("warehouse")),
        },
    )
    yield session
    session.stop()
