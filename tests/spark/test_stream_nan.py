"""NaN and NULL floats on streams: two values, as in batch (and in Flink and Spark).

Spark hands a stateful processor its rows as pandas, where a NULL float is NaN
too, and reads a pandas NaN it gets back as NULL. The host stages which floats
are NaN (``__wql_nans*``) and returns floats holding a NaN Arrow-backed
(docs/streaming.md, "NaN and NULL"). Here a stream of NaN and NULL keys and
values runs every kind of stream processor (a keyed query's key buckets, a
keyless query, a session, a pipeline in one processor, a pipeline cut at a link
in Spark SQL, a window join), drained, and each equals batch; the keyed query's
rows are derived by hand: every NaN key is one key, NULL another, COUNT(v)
counts a NaN, SUM over a NaN is NaN, and MAX/MIN compare as Flink's generated
``>``/``<`` do (a NaN kept once it is the maximum, never taken over a number).
"""

from __future__ import annotations

import os
from collections import Counter

import pytest

from tests.spark.stream_helpers import batch_queries, stream_queries

pytestmark = pytest.mark.spark

# three files, one micro-batch each (maxFilesPerTrigger = 1)
FILES = [
    [
        '{"k": null, "v": 1.0, "price": 1, "ts": "2024-05-01 09:00:01"}',
        '{"k": "NaN", "v": "NaN", "price": 2, "ts": "2024-05-01 09:00:02"}',
        '{"k": 1.5, "v": null, "price": 4, "ts": "2024-05-01 09:00:03"}',
    ],
    [
        '{"k": null, "v": null, "price": 8, "ts": "2024-05-01 09:00:04"}',
        '{"k": "NaN", "v": 2.0, "price": 16, "ts": "2024-05-01 09:00:05"}',
        '{"k": 1.5, "v": "NaN", "price": 32, "ts": "2024-05-01 09:00:06"}',
    ],
    [
        '{"k": 1.5, "v": 3.0, "price": 64, "ts": "2024-05-01 09:00:07"}',
        '{"k": "NaN", "v": null, "price": 128, "ts": "2024-05-01 09:00:12"}',
        '{"k": null, "v": "NaN", "price": 256, "ts": "2024-05-01 09:00:13"}',
    ],
]

SOURCE = """
CREATE SOURCE bids (k DOUBLE, v DOUBLE, price BIGINT, ts TIMESTAMP,
  WATERMARK FOR ts AS ts - INTERVAL '1' SECOND
) WITH (format = 'json', path = '{path}', allowNonNumericNumbers = 'true'{options});
"""

QUERIES = """
CREATE VIEW keyed AS
SELECT k, window_start, COUNT(*) AS n, COUNT(v) AS nv, SUM(v) AS s, MAX(v) AS mx,
    MIN(v) AS mn, SUM(price) AS total
FROM bids GROUP BY k, TUMBLE(ts, INTERVAL '10' SECOND)
TRIGGER COUNT(1);
CREATE VIEW keyless AS
SELECT window_start, COUNT(*) AS n, COUNT(v) AS nv, SUM(v) AS s, MAX(v) AS mx
FROM bids GROUP BY TUMBLE(ts, INTERVAL '10' SECOND)
TRIGGER COUNT(1);
CREATE VIEW sessions AS
SELECT k, window_start, window_end, COUNT(v) AS nv, SUM(v) AS s, MAX(v) AS mx
FROM bids GROUP BY k, SESSION(ts, INTERVAL '2' SECOND);
CREATE VIEW per_k AS
SELECT k, window_start, window_end, window_time, COUNT(*) AS n, SUM(v) AS s, MAX(v) AS mx
FROM bids GROUP BY k, TUMBLE(ts, INTERVAL '5' SECOND);
CREATE VIEW rolled AS
SELECT k, window_start, SUM(n) AS n, SUM(s) AS s, MAX(mx) AS mx, COUNT(s) AS ns
FROM per_k GROUP BY k, TUMBLE(window_time, INTERVAL '10' SECOND);
CREATE VIEW linked AS
SELECT k, window_start, SUM(s) AS s, MAX(mx + 1) AS mx, COUNT(*) AS windows
FROM per_k WHERE n >= 1 GROUP BY k, TUMBLE(window_time, INTERVAL '10' SECOND);
CREATE VIEW counts AS
SELECT k, window_start, window_end, COUNT(*) AS n
FROM bids GROUP BY k, TUMBLE(ts, INTERVAL '5' SECOND);
CREATE VIEW joined AS
SELECT p.k, p.window_start, p.s, p.mx, c.n
FROM per_k AS p JOIN counts AS c
    ON p.k = c.k AND p.window_start = c.window_start AND p.window_end = c.window_end;
"""

NAMES = ["keyed", "keyless", "sessions", "rolled", "linked", "joined"]


@pytest.fixture(scope="module")
def runs(spark, tmp_path_factory) -> tuple[dict[str, Counter], dict[str, Counter]]:
    base = tmp_path_factory.mktemp("nan")
    folder = base / "in"
    folder.mkdir()
    for i, lines in enumerate(FILES):
        path = folder / f"part-{i}.json"
        path.write_text("\n".join(lines) + "\n")
        os.utime(path, (1_000_000 + i, 1_000_000 + i))  # the file source's order
    batch, _ = batch_queries(spark, SOURCE.format(path=folder, options="") + QUERIES, NAMES)
    text = SOURCE.format(path=folder, options=", maxFilesPerTrigger = '1'") + QUERIES
    stream, _ = stream_queries(spark, text, NAMES, base / "out", base / "ck")
    return batch, stream


def _rows(*rows: tuple) -> Counter:
    return Counter(tuple(str(v) for v in r) for r in rows)


def test_keyed_nan_and_null_are_two_keys_in_batch(runs) -> None:
    batch, _ = runs
    nan = float("nan")
    w0, w1 = "2024-05-01 09:00:00", "2024-05-01 09:00:10"
    assert batch["keyed"] == _rows(
        # NULL key: 1.0, then a NULL value
        (None, w0, 1, 1, 1.0, 1.0, 1.0, 1),
        (None, w0, 2, 1, 1.0, 1.0, 1.0, 9),
        # every NaN key is one key: NaN, then 2.0 (not above NaN: MAX stays NaN)
        (nan, w0, 1, 1, nan, nan, nan, 2),
        (nan, w0, 2, 2, nan, nan, nan, 18),
        # 1.5: NULL, NaN (counted, its sum NaN), 3.0
        (1.5, w0, 1, 0, None, None, None, 4),
        (1.5, w0, 2, 1, nan, nan, nan, 36),
        (1.5, w0, 3, 2, nan, nan, nan, 100),
        (nan, w1, 1, 0, None, None, None, 128),
        (None, w1, 1, 1, nan, nan, nan, 256),
    )


@pytest.mark.parametrize("name", NAMES)
def test_a_drained_stream_equals_batch(runs, name: str) -> None:
    batch, stream = runs
    assert batch[name], name  # the query emits rows: the comparison is not vacuous
    assert stream[name] == batch[name]


def test_nan_values_reach_the_pipelines_and_the_join(runs) -> None:
    """The NaN of a key or an aggregate crosses every stage (the test above would pass
    if a stream lost them where batch does too)."""
    batch, _ = runs
    for name in ("rolled", "linked", "joined"):
        keys = {row[0] for row in batch[name]}
        # an inner join's NULL keys match nothing (NULL = NULL is not true)
        assert keys == ({"nan", "1.5"} if name == "joined" else {"nan", "None", "1.5"}), name
        assert any("nan" in row[2:] for row in batch[name]), name
