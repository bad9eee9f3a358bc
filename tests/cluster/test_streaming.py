"""A checkpointed stream stopped and restarted on two executor processes
loses and duplicates nothing.

The operator's per-key state lives in RocksDB state stores on the
executors; the restart must find it there (or in the checkpoint) whichever
executor a partition lands on. Each example is cut into files as in
tests/spark/test_streaming_examples.py (three files and an end-of-input
sentinel, one micro-batch each); the first run sees two files, the restart
on the same checkpoint the rest, and the outputs then equal the examples'
batch outputs (the main suite's ``local[2]`` reference), row for row.
"""

from __future__ import annotations

from collections import Counter

import pytest

from tests.spark.example_stream_helpers import CHUNKS, StreamedExample
from tests.spark.examples_helpers import EXAMPLES, expected_outputs

pytestmark = pytest.mark.cluster

# late output, session merging, count windows: the stateful shapes
STREAMED = ("iot_late_data", "clickstream_sessions", "count_windows")


@pytest.mark.parametrize("stem", STREAMED)
def test_stop_and_restart_on_the_cluster_gives_the_batch_rows(cluster, stem, tmp_path):
    ex = StreamedExample(cluster, EXAMPLES / f"{stem}.wql", tmp_path)
    expected = {name: Counter(rows) for name, (_, rows) in expected_outputs(stem).items()}
    ex.add_files(range(2))
    first = ex.run()
    # append mode: what the first run wrote is final (a subset of the result)
    assert all(not (first[name] - expected[name]) for name in first)
    assert sum(sum(c.values()) for c in first.values()) > 0, "the first run wrote nothing"
    ex.add_files(range(2, CHUNKS + 1))
    assert ex.run() == expected
