"""A CSV header read without Spark (``plain_csv_header``) names the columns as Spark's
header read does, and leaves every case it cannot read plainly to Spark."""

from __future__ import annotations

import pytest

from wql.spark.sources import plain_csv_header

# (first bytes of the file, reader options, whether the plain reading answers)
CASES = [
    (b"device,temp,ts,seq\n1,2,3,4\n", {}, True),
    (b"device,temp,ts,seq\r\n1,2,3,4\r\n", {}, True),
    (b"Device,TEMP,ts_2,x y\n1,2,3,4\n", {"header": "true", "mode": "PERMISSIVE"}, True),
    (b"a;b;c\n1;2;3\n", {"sep": ";"}, True),
    (b"a|b|c\n1|2|3\n", {"delimiter": "|"}, True),
    (b"a,b,c\n1,2,3\n", {"inferSchema": "true", "timestampFormat": "yyyy"}, True),
    (b"a,b,'c'\n1,2,3\n", {}, True),
    # Spark's to read: quotes, escapes, comment marks, blank first lines, empty or
    # repeated names, spaces around names, other separators, options and encodings
    (b'"a",b,c\n1,2,3\n', {}, False),
    (b'a,"b,c",d\n1,2,3\n', {}, False),
    (b"a,b\\,c\n1,2\n", {}, False),
    (b"#a,b\n1,2\n", {}, False),
    (b"\na,b\n1,2\n", {}, False),
    (b"a,,b\n1,2,3\n", {}, False),
    (b"a,A,b\n1,2,3\n", {}, False),
    (b"a, b\n1,2\n", {}, False),
    (b"a\tb\n1\t2\n", {"sep": "\t"}, False),
    (b"a,b\n1,2\n", {"quote": "'"}, False),
    (b"a,b\n1,2\n", {"encoding": "latin1"}, False),
    (b"\xef\xbb\xbfa,b\n1,2\n", {}, False),
    ("é,b\n1,2\n".encode(), {}, False),
    (b"a,b", {}, False),
    (b"", {}, False),
]


@pytest.mark.parametrize(("content", "options", "plain"), CASES)
def test_a_plain_header_is_read_as_spark_reads_it(spark, tmp_path, content, options, plain):
    path = tmp_path / "data.csv"
    path.write_bytes(content)
    got = plain_csv_header(str(path), options)
    assert (got is not None) == plain
    if got is not None:
        reader = spark.read.options(**{**options, "header": "true", "inferSchema": "false"})
        assert got == reader.csv(str(path)).columns


def test_folders_globs_hidden_files_and_uris_are_spark_s(tmp_path):
    (tmp_path / "data.csv").write_text("a,b\n1,2\n")
    (tmp_path / "_hidden.csv").write_text("a,b\n1,2\n")
    assert plain_csv_header(str(tmp_path / "data.csv"), {}) == ["a", "b"]
    assert plain_csv_header(str(tmp_path), {}) is None
    assert plain_csv_header(str(tmp_path / "*.csv"), {}) is None
    assert plain_csv_header(str(tmp_path / "_hidden.csv"), {}) is None
    assert plain_csv_header(f"file://{tmp_path / 'data.csv'}", {}) is None
    assert plain_csv_header(str(tmp_path / "missing.csv"), {}) is None
