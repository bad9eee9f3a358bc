"""Every kind of plan stage has a host on Spark and a plan on a stream.

The stages a query can compile to are a closed union (``plan.Stage``);
running one on Spark is dispatched by its type through one table
(``wql.spark.stages.HOSTS``), and how one runs on a stream through another
(``wql.compiler.stream_plan``). A kind added to the union without an entry
in either fails here, not at run time on the first query of that kind.
No SparkSession is needed: nothing runs.
"""

from __future__ import annotations

import typing

import pytest

pytest.importorskip("pyspark")

from wql.compiler import plan as P  # noqa: E402
from wql.compiler import stream_plan  # noqa: E402
from wql.spark import stages  # noqa: E402

KINDS = set(typing.get_args(P.Stage))


def test_every_stage_kind_has_a_host_and_only_those():
    assert set(stages.HOSTS) == KINDS


@pytest.mark.parametrize("kind", sorted(KINDS, key=lambda k: k.__name__))
def test_every_host_runs_every_way(kind):
    host = stages.HOSTS[kind]
    for way in ("native_input", "native", "batch", "stream"):
        assert callable(getattr(host, way)), (kind.__name__, way)
    assert host.no_timeline is None or isinstance(host.no_timeline, str)


def test_every_stage_kind_has_a_stream_plan():
    assert set(stream_plan._STREAM_PLANS) == KINDS


def test_only_window_aggregates_draw_a_timeline():
    drawn = {k for k, host in stages.HOSTS.items() if host.no_timeline is None}
    assert drawn == {P.Query}


def test_every_operator_stage_kind_has_an_operator_plan_and_a_projection():
    from wql.compiler.backends import operator
    from wql.spark import layout

    kinds = set(typing.get_args(P.OperatorStage))
    assert set(operator._BUILDERS) == kinds
    assert set(layout._PROJECTIONS) == kinds
