"""Fixtures of the Spark tests (the session itself is tests/conftest.py's)."""

from __future__ import annotations

import pytest


@pytest.fixture
def partitions(spark):
    """The operator stage in three key partitions (one by default for small inputs)."""
    spark.conf.set("spark.wql.operator.partitions", "3")
    yield
    spark.conf.unset("spark.wql.operator.partitions")
