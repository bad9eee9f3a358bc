"""examples/changelog_sink.py: a "latest state" table fed by a changelog stream.

The stream gets one tap per micro-batch, so every row sees batch replay's
watermark; after the last tap Spark runs one more (no-data) micro-batch for
the watermark the last tap raised, which fires ann's merged session (its
on-time timer, registered again by the late merge) and ben's second session.
cat's session waits for a watermark past 10:40: its EARLY row is its latest.
The table equals the fold of the batch changelog without its end of input.
"""

from __future__ import annotations

import importlib.util

import pytest

from tests.spark.examples_helpers import EXAMPLES, expected_outputs, rows_as_text

pytestmark = pytest.mark.spark


def _sink():
    spec = importlib.util.spec_from_file_location("changelog_sink", EXAMPLES / "changelog_sink.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_sink_keeps_the_latest_row_of_every_live_session(spark, tmp_path):
    sink = _sink()
    table = sink.run(spark, tmp_path)
    header, rows = expected_outputs("changelog_sink")["latest"]
    assert rows_as_text(table) == (header, rows)
    assert len(sink.versions(tmp_path / "latest")) == 8  # 7 taps, the watermark's batch


def test_applying_the_batch_changelog_at_once_is_its_fold(spark):
    # batch replay ends with end of input: cat's session fires ON_TIME too
    import wql

    sink = _sink()
    compiled = wql.compile_file(sink.QUERY)
    results = compiled.apply(spark)
    try:
        key = list(compiled.program.query("live_sessions").changelog_key)
        table = sink.apply_changes(None, results.df, key)
        header, rows = expected_outputs("changelog_sink")["latest"]
        cat = ("cat", "2024-05-01 10:30:00", "2024-05-01 10:40:00", "1", "ON_TIME", "1")
        assert rows_as_text(table) == (header, [*rows[:-1], cat])
    finally:
        results.release()
