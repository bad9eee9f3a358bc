"""Partitioned streams on two executor processes: a keyed two-stage pipeline and a keyed
window join, drained, equal to the batch run's rows and counters.

Each auction is a Spark group of its own (docs/streaming.md, "Partitioned
pipelines", "Partitioned window joins"), its pipeline's state a state-store
row in the partition of its key, on whichever executor runs that partition;
the cluster session's 4 shuffle partitions spread the keys over both.
"""

from __future__ import annotations

import pytest

from tests.spark.partitioned_helpers import COUNTED, every_pipeline
from tests.spark.stream_helpers import batch_queries, files, stream_queries, write_files

pytestmark = pytest.mark.cluster

# a per-auction rollup of per-auction windows, and a window table LEFT JOIN a view per auction
NAMES = ["auction_rollup", "keyed_left"]


def test_a_partitioned_pipeline_and_join_on_the_cluster_give_the_batch_rows(cluster, tmp_path):
    write_files(tmp_path / "in", range(len(files())))
    text = every_pipeline(tmp_path / "in")
    streamed, sinks = stream_queries(cluster, text, NAMES, tmp_path / "out", tmp_path / "ck")
    counters = sinks.counters(cluster)
    expected, batch_counters = batch_queries(
        cluster, every_pipeline(tmp_path / "in", stream=False), NAMES
    )
    for name in NAMES:
        assert sum(expected[name].values()) >= 3, name
        assert streamed[name] == expected[name], name
        for key in COUNTED:
            assert counters[name][key] == batch_counters[name][key], (name, key)
