"""``wql run --stream`` options and the streaming refusals that need no running stream."""

from __future__ import annotations

import pytest

pytest.importorskip("pyspark")

from wql.commands.run_stream import parse_trigger  # noqa: E402
from wql.compiler import compile_source  # noqa: E402
from wql.compiler.backends.operator import build_operator  # noqa: E402
from wql.errors import WqlError, WqlSemanticError, WqlUnsupportedError  # noqa: E402
from wql.spark.stream_sinks import read_stream_source  # noqa: E402
from wql.spark.streaming import spark_watermark_delay_ms, time_mode  # noqa: E402

SOURCE = (
    "CREATE SOURCE s (k STRING, v DOUBLE, ts TIMESTAMP, "
    "WATERMARK FOR ts AS ts - INTERVAL '5' SECOND) WITH (format = 'json', path = '{path}');\n"
)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("available-now", None),
        ("interval=5s", "5 seconds"),
        ("interval=500ms", "500 milliseconds"),
        ("interval=2m", "2 minutes"),
        ("interval=10 seconds", "10 seconds"),
    ],
)
def test_trigger_option(text, expected):
    assert parse_trigger(text) == expected


@pytest.mark.parametrize("text", ["now", "interval=", "interval=fast", "every=5s", "interval=5x"])
def test_bad_trigger_option_is_a_clear_error(text):
    with pytest.raises(WqlError, match="--trigger"):
        parse_trigger(text)


def _query(body: str, path: str = "in"):
    return compile_source(SOURCE.format(path=path) + body, engine="operator").queries[0]


def test_time_modes_and_the_watermark_delay():
    event = _query("SELECT k, COUNT(*) AS n FROM s GROUP BY k, TUMBLE(ts, INTERVAL '1' MINUTE)")
    assert time_mode(build_operator(event)) == "EventTime"
    assert spark_watermark_delay_ms(event) == 5001  # Spark's max - delay = WQL's max - delay - 1
    proc = _query(
        "SELECT k, COUNT(*) AS n FROM s GROUP BY k, TUMBLE(PROCTIME(), INTERVAL '1' MINUTE)"
    )
    assert time_mode(build_operator(proc)) == "ProcessingTime"
    count = _query("SELECT k, COUNT(*) AS n FROM s GROUP BY k, COUNT_WINDOW(3)")
    assert time_mode(build_operator(count)) == "None"


def test_a_query_on_both_clocks_is_refused_with_its_trigger_position():
    q = _query(
        "SELECT k, COUNT(*) AS n FROM s GROUP BY k, TUMBLE(ts, INTERVAL '1' MINUTE)\n"
        "TRIGGER EVERY INTERVAL '10' SECOND OF PROCESSING TIME"
    )
    with pytest.raises(WqlUnsupportedError, match="both event time and processing time") as e:
        time_mode(build_operator(q))
    assert e.value.span is not None and e.value.span.line == 3


def test_a_streaming_source_must_be_a_folder(tmp_path):
    f = tmp_path / "one.json"
    f.write_text("{}\n")
    decl = compile_source(
        SOURCE.format(path=f) + "SELECT k, COUNT(*) AS n FROM s GROUP BY k, "
        "TUMBLE(ts, INTERVAL '1' MINUTE)"
    ).source("s")
    with pytest.raises(WqlSemanticError, match="reads a folder") as e:
        read_stream_source(None, decl, None)
    assert e.value.span is not None
    missing = compile_source(
        SOURCE.format(path=tmp_path / "nope") + "SELECT k, COUNT(*) AS n FROM s GROUP BY k, "
        "TUMBLE(ts, INTERVAL '1' MINUTE)"
    ).source("s")
    with pytest.raises(WqlSemanticError, match="no such folder"):
        read_stream_source(None, missing, None)


NATIVE_SUM = (
    "SELECT k, window_start, COUNT(*) AS n, SUM(v) AS total FROM s "
    "GROUP BY k, TUMBLE(ts, INTERVAL '1' MINUTE)"
)


def _stream(spark, tmp_path):
    (tmp_path / "in").mkdir(exist_ok=True)
    return spark.readStream.schema("k STRING, v DOUBLE, ts TIMESTAMP").json(str(tmp_path / "in"))


def test_a_native_double_sum_streams_on_the_operator_engine(spark, tmp_path):
    """Native folds DOUBLE sums in replay order (not possible on a stream): the
    planner's stream choice is the operator engine, which gives the same result;
    forced native is a positioned error naming the SUM. A query without such a
    sum runs on the operator engine too (late rows, docs/native.md "Streaming")."""
    import wql

    text = SOURCE.format(path=tmp_path / "in") + NATIVE_SUM
    assert wql.compile(text).engine == {"query_1": "native"}
    r = wql.compile(text).apply(spark, s=_stream(spark, tmp_path)).query("query_1")
    assert r.engine == "operator" and r.df.isStreaming
    assert r.df.columns == ["k", "window_start", "n", "total"]
    with pytest.raises(
        WqlUnsupportedError, match="SUM of DOUBLE at line 2 needs the operator"
    ) as e:
        wql.compile(text, engine="native").apply(spark, s=_stream(spark, tmp_path))
    assert e.value.span is not None and e.value.span.line == 2
    counting = SOURCE.format(path=tmp_path / "in") + NATIVE_SUM.replace(", SUM(v) AS total", "")
    r = wql.compile(counting).apply(spark, s=_stream(spark, tmp_path)).query("query_1")
    assert r.engine == "operator" and r.df.isStreaming
    assert [x.clause for x in r.plan.engine.reasons] == ["WATERMARK FOR ts"]
