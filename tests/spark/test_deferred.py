"""The stand-in Spark pickles for WQL's stream processors (wql/spark/deferred.py).

Spark's driver-side Python process unpickles it and calls ``init`` to learn the
state variables; that must not import pandas, pyarrow or WQL's runtime. Where
rows run, the stand-in must be the processor: same results, same state.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pyspark import cloudpickle

from tests.spark.processor_helpers import (
    DRAINED,
    BucketDriver,
    Driver,
    assert_as_per_key,
    rows_st,
    split_batches,
)
from wql.spark.deferred import DeferredProcessor, deferred


def fresh(proc):
    """A processor as Spark gets it: built, not yet initialised (a driver's is)."""
    return type(proc)(proc.layout)


class DeferredDriver(Driver):
    """The per-key processor's loop, Spark holding the stand-in."""

    def __init__(self, text: str, *, drainable: bool = False) -> None:
        super().__init__(text, drainable=drainable)
        self.proc = deferred(fresh(self.proc))
        self.proc.init(self)

    def held(self) -> int:
        """Keys left with a saved state."""
        return len(self.state)


class DeferredBucketDriver(BucketDriver):
    """The key buckets' loop, Spark holding the stand-in."""

    def __init__(self, text: str, *, drainable: bool = False) -> None:
        super().__init__(text, drainable=drainable)
        self.proc = deferred(fresh(self.proc))
        self.proc.init(self)


@pytest.mark.parametrize("driver", [DeferredDriver, DeferredBucketDriver])
@pytest.mark.parametrize("name", ["session_purging_count", "hop_every", "count_window"])
@settings(max_examples=15, deadline=None)
@given(rows=rows_st, cuts=st.lists(st.integers(0, 40), max_size=6))
def test_the_stand_in_runs_as_the_processor(driver, name, rows, cuts):
    batches = split_batches(rows, cuts)
    assert_as_per_key(driver, DRAINED[name], batches, drainable=True)
    if driver is DeferredBucketDriver:
        # the buckets' state as well: the same entries left after the same micro-batches
        plain, stand_in = BucketDriver(DRAINED[name]), driver(DRAINED[name])
        for rows_ in batches:
            plain.batch(rows_)
            stand_in.batch(rows_)
        assert stand_in.maps == plain.maps and stand_in.buckets == plain.buckets
        assert stand_in.timers == plain.timers


class Recording:
    """A handle that answers every state declaration with its own description."""

    def __init__(self) -> None:
        self.calls: list[tuple] = []

    def getValueState(self, *args, **kwargs):  # noqa: N802 - Spark's API
        self.calls.append(("value", args, kwargs))
        return ("value", args)

    def getMapState(self, *args, **kwargs):  # noqa: N802 - Spark's API
        self.calls.append(("map", args, kwargs))
        return ("map", args)


def test_the_stand_in_declares_what_the_processor_declares():
    proc = fresh(BucketDriver(DRAINED["hop_every"]).proc)
    plain, stand_in = Recording(), Recording()
    cloudpickle.loads(cloudpickle.dumps(proc)).init(plain)
    deferred(proc).init(stand_in)
    assert stand_in.calls == plain.calls
    assert [c[0] for c in plain.calls] == ["value", "map", "map"]


def test_the_driver_side_unpickles_and_inits_without_pandas_or_the_runtime(tmp_path):
    """What Spark's driver worker does with the stand-in, in a fresh interpreter."""
    pickled = tmp_path / "processor.pickle"
    pickled.write_bytes(cloudpickle.dumps(deferred(fresh(BucketDriver(DRAINED["hop_every"]).proc))))
    script = textwrap.dedent(
        f"""
        import pickle, sys
        proc = pickle.loads(open({str(pickled)!r}, "rb").read())

        class Handle:
            def __getattr__(self, name):
                return lambda *args, **kwargs: name

        proc.init(Handle())
        proc.close()
        heavy = ("pandas", "pyarrow", "numpy", "wql.api", "wql.runtime", "wql.compiler")
        print(type(proc).__name__, sorted(m for m in heavy if m in sys.modules))
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, check=True
    )
    assert done.stdout.split() == [DeferredProcessor.__name__, "[]"]


def test_an_init_that_does_more_than_declare_is_refused():
    proc = Driver(DRAINED["hop_every"]).proc

    class Eager(type(proc)):
        def init(self, handle):
            handle.registerTimer(0)

    with pytest.raises(AttributeError, match="only state variables are declared"):
        deferred(Eager(proc.layout))
