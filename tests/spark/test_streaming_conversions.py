"""The streaming processor's pandas conversions equal the Arrow ones they replace.

``WindowProcessor`` reads a key's rows from Spark's pandas frame without
``RecordBatch.from_pandas`` and hands its output back without
``RecordBatch.to_pandas`` (both cost more per key than the runtime's work,
docs/benchmarks.md "Streaming"). The references here are those Arrow
conversions: the runtime must see the same values, Spark the same frame.
"""

from __future__ import annotations

import datetime as dt

import numpy as np
import pandas as pd
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

pytest.importorskip("pyspark")

from wql.spark.layout import runtime_column  # noqa: E402
from wql.spark.streaming import _microseconds, _runtime_values, output_frame  # noqa: E402

_UTC = dt.UTC
_INTS = st.integers(-(2**62), 2**62)
_FLOATS = st.floats(allow_nan=True, allow_infinity=True)
_TIMES = st.datetimes(dt.datetime(1970, 1, 1), dt.datetime(2100, 1, 1)).map(
    lambda t: t.replace(microsecond=t.microsecond // 1000 * 1000)
)

#: Columns as Spark's pandas frames hold them: (values, pandas dtype or None to infer)
_PANDAS_COLUMNS = st.one_of(
    st.lists(_INTS, max_size=8).map(lambda v: pd.Series(v, dtype="int64")),
    st.lists(st.integers(-100, 100), max_size=8).map(lambda v: pd.Series(v, dtype="int32")),
    st.lists(_FLOATS, max_size=8).map(lambda v: pd.Series(v, dtype="float64")),
    st.lists(st.one_of(st.none(), st.integers(-5, 5)), max_size=8).map(
        lambda v: pd.Series(v, dtype="object")
    ),
    st.lists(st.one_of(st.none(), st.text(max_size=3)), max_size=8).map(
        lambda v: pd.Series(v, dtype="object")
    ),
    st.lists(st.booleans(), max_size=8).map(lambda v: pd.Series(v, dtype="bool")),
    st.lists(_TIMES, max_size=8).map(lambda v: pd.Series(pd.to_datetime(v))),
    st.lists(_TIMES, max_size=8).map(lambda v: pd.Series(pd.to_datetime(v).tz_localize("UTC"))),
    st.lists(st.one_of(st.none(), st.decimals(-100, 100, places=2)), max_size=8).map(
        lambda v: pd.Series(v, dtype="object")
    ),
)


def _same(a, b) -> None:
    assert type(a) is type(b)
    if isinstance(a, np.ndarray):
        assert a.dtype == b.dtype
        np.testing.assert_array_equal(a, b)
    else:
        assert a == b


@settings(max_examples=200, deadline=None)
@given(column=_PANDAS_COLUMNS, data=st.data())
def test_values_read_from_pandas_equal_arrows(column: pd.Series, data) -> None:
    """Each staged value column reaches the runtime as Arrow's ``from_pandas`` gave it."""
    order = np.array(data.draw(st.permutations(range(len(column)))), dtype=np.int64)
    frame = pd.DataFrame({"_0": column})
    arrow = _microseconds(pa.RecordBatch.from_pandas(frame, preserve_index=False).column(0))
    _same(_runtime_values(column, None, None), runtime_column(arrow))
    _same(_runtime_values(column, order, None), runtime_column(arrow.take(pa.array(order))))


@settings(max_examples=200, deadline=None)
@given(values=st.lists(st.one_of(st.none(), _FLOATS), max_size=8), data=st.data())
def test_a_float_column_keeps_its_nans_apart_from_its_nulls(values, data) -> None:
    """Pandas reads a NULL float as NaN; the staged NaN rows make those NaN again."""
    column = pd.Series([np.nan if v is None else v for v in values], dtype="float64")
    nans = np.array([v is not None and v != v for v in values], dtype=bool)
    order = np.array(data.draw(st.permutations(range(len(values)))), dtype=np.int64)
    got = _runtime_values(column, order, nans if nans.any() else None)
    want = [values[i] for i in order]
    as_text = [repr(None if v is None else float(v)) for v in list(got)]
    assert as_text == [repr(v) for v in want]


_ARROW_TYPES = [
    pa.string(),
    pa.int8(),
    pa.int32(),
    pa.int64(),
    pa.float32(),
    pa.float64(),
    pa.bool_(),
    pa.timestamp("us", tz="UTC"),
    pa.date32(),
    pa.binary(),
    pa.decimal128(10, 2),
    pa.list_(pa.int64()),
    pa.null(),
]

_SAMPLES = {
    "string": st.text(max_size=3),
    "int8": st.integers(-128, 127),
    "int32": st.integers(-(2**31), 2**31 - 1),
    "int64": _INTS,
    "float": st.floats(width=32),
    "double": _FLOATS,
    "bool": st.booleans(),
    "timestamp[us, tz=UTC]": _TIMES.map(lambda t: t.replace(tzinfo=_UTC)),
    "date32[day]": st.dates(),
    "binary": st.binary(max_size=3),
    "decimal128(10, 2)": st.decimals(-1000, 1000, places=2),
    "list<item: int64>": st.lists(st.integers(-5, 5), max_size=2),
    "null": st.none(),
}


@st.composite
def _batches(draw) -> pa.RecordBatch:
    n = draw(st.integers(0, 5))
    types = draw(st.lists(st.sampled_from(_ARROW_TYPES), min_size=1, max_size=6))
    arrays = []
    for t in types:
        sample = _SAMPLES[str(t)]
        values = draw(st.lists(st.one_of(st.none(), sample), min_size=n, max_size=n))
        arrays.append(pa.array(values, type=t))
    names = [f"c{i}" for i in range(len(arrays))]
    return pa.RecordBatch.from_arrays(arrays, names=names)


@settings(max_examples=200, deadline=None)
@given(batch=_batches())
def test_output_frame_equals_to_pandas(batch: pa.RecordBatch) -> None:
    """A key's output frame is exactly ``RecordBatch.to_pandas()`` (dtypes and values),
    but a float column holding a NaN, which is Arrow-backed, and which Spark reads back
    as it was (NaN as NaN, NULL as NULL; Spark reads a NumPy NaN as NULL)."""
    from pyspark.sql.pandas.conversion import create_arrow_array_from_pandas
    from pyspark.sql.pandas.types import from_arrow_type

    frame = output_frame(batch)
    expected = batch.to_pandas()
    for name, column in zip(batch.schema.names, batch.columns, strict=True):
        if pa.types.is_floating(column.type) and any(
            v is not None and v != v for v in column.to_pylist()
        ):
            spark_type = from_arrow_type(column.type)
            back = create_arrow_array_from_pandas(frame[name], spark_type)
            assert repr(back.to_pylist()) == repr(column.to_pylist())
            expected[name] = frame[name]
    pd.testing.assert_frame_equal(frame, expected)
