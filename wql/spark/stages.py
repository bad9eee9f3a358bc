"""Running one plan stage on Spark: the one home of *which host runs a stage*.

A stage (:data:`wql.compiler.plan.Stage`: a window aggregate ``Query``, a
``WindowRank``, a ``WindowJoin``) runs on the engine the planner chose for it
(``q.engine``), over a batch or a streaming source. :class:`StageRunner`
looks its host up by the stage's type in :data:`HOSTS`, one class per kind
with one method per way it runs::

    kind          native                   batch (operator)             stream (operator)
    Query         build_native             run_operator /               run_stream_chain
    WindowRank      over its input           run_view_stage (placed)      (q.engine.stream)
    WindowJoin    build_native_join        run_window_join              run_stream_join
                    of its sides' inputs     of its sides' results        (q.engine.stream)
    OverAggregate build_native             run_operator                 run_stream_chain

Each returns the stage's *run*, one class per kind of what ran:
:class:`NativeRun`, :class:`~wql.spark.batch.OperatorRun`,
:class:`~wql.spark.joins.JoinRun`, and the stream runs
(:class:`~wql.spark.streaming.StreamQueryRun`,
:class:`~wql.spark.stream_chain.StreamChainRun`,
:class:`~wql.spark.stream_join.StreamJoinRun`) with what the sinks need
(``read``, ``with_end``). :mod:`wql.api` builds its results from them.
``tests/spark/test_stage_dispatch.py`` fails when a kind of stage has no host.

A stage that reads a view reads what the view's run gave: a native view's
DataFrame (native readers), its *placed* operator run (operator readers in
batch: its rows in the pipeline's global sequence, made once per
:meth:`StageRunner.run` walk), or, on a stream, nothing: the stage's stream
plan holds the whole chain, run in one processor.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

from pyspark.sql import DataFrame

from wql.compiler import plan as P
from wql.errors import ErrorCode, WqlUnsupportedError

__all__ = ["HOSTS", "NativeRun", "StageRunner"]


@dataclass
class NativeRun:
    """A stage on the native engine: Spark's own (lazy) DataFrame operations.

    ``result`` has the stage's output schema; ``input`` is what it reads (its
    source, a view's native result, or a join's two sides).
    """

    result: DataFrame
    input: Any
    late: None = None

    def release(self) -> None:
        """Nothing is cached for a native stage."""


class StageRunner:
    """The runs of one walk over a program's stages (one :meth:`wql.api.Compiled.apply`).

    A stage over a native view reads the view's native DataFrame; one over
    any view on the operator engine reads the view's *placed* operator run
    (its rows in the pipeline's global sequence), made once: the view's own
    run when it runs on the operator engine and another stage reads it, else
    a run made here for the readers only (``hidden``, released with
    :meth:`release` unless a result takes it: :meth:`claim`).
    """

    def __init__(self, program: P.Program, sources: dict[str, DataFrame] | None = None) -> None:
        self.program = program
        #: every root source's DataFrame by lower-cased name: what a stage reads when its
        #: pipeline starts at another source than the one it is run over (a window join
        #: of two sources: each side's own)
        self.sources = dict(sources or {})
        self.native: dict[str, DataFrame] = {}
        self.placed: dict[str, Any] = {}
        self.hidden: list[Any] = []

    def run(self, q: P.Stage, source: DataFrame) -> Any:
        """``q`` over the DataFrame ``source`` of its pipeline's root source, on its engine."""
        host = HOSTS[type(q)]
        source = self._own(q, source)
        if P.engine_of(q) == "native":
            return NativeRun(self.native_df(q, source), host.native_input(self, q, source))
        if source.isStreaming:
            return host.stream(self, q, source)
        return self.operator_run(q, source)

    def native_df(self, q: P.Stage, source: DataFrame) -> DataFrame:
        """The native result of ``q`` (made once per walk)."""
        key = q.name.lower()
        if key not in self.native:
            self.native[key] = HOSTS[type(q)].native(self, q, self._own(q, source))
        return self.native[key]

    def operator_run(self, q: P.Stage, source: DataFrame, *, hidden: bool = False) -> Any:
        """``q``'s batch operator run over its source or its view (placed when it is read;
        ``hidden``: read by another stage only)."""
        key = q.name.lower()
        if key in self.placed:
            return self.placed[key]
        tag = hidden or bool(self.program.readers(q))
        run = HOSTS[type(q)].batch(self, q, self._own(q, source), tag)
        if tag:
            self.placed[key] = run
            if hidden:
                self.hidden.append(run)
        return run

    def _own(self, q: P.Stage, source: DataFrame) -> DataFrame:
        """The DataFrame of ``q``'s (first) root source, else ``source``."""
        return self.sources.get(self.program.root_source(q).name.lower(), source)

    def root_df(self, ref: P.SourceRef, source: DataFrame) -> DataFrame:
        """The DataFrame of ``ref``'s root source: the one given (``sources``), else
        ``source``."""
        return self.sources.get(self.program.side_root(ref).name.lower(), source)

    def view_input(self, ref: P.SourceRef, source: DataFrame) -> DataFrame:
        """What a stage reading ``ref`` reads natively: the root source, or its view's
        result (either engine: a view's rows are final)."""
        source = self.root_df(ref, source)
        if ref.view is None:
            return source
        view = self.program.view(ref.view)
        if P.engine_of(view) == "native":
            return self.native_df(view, source)
        result: DataFrame = self.operator_run(view, source).result
        return result

    def claim(self, run: Any) -> None:
        """``run`` is a result's own now: released with it, not by :meth:`release`."""
        if run in self.hidden:
            self.hidden.remove(run)

    def release(self) -> None:
        for run in self.hidden:
            run.release()
        self.hidden.clear()


# --------------------------------------------------------------------------- hosts


class _AggregateHost:
    """A stage over one input: a window aggregate (and, below, a window rank)."""

    #: what ``wql run --timeline`` draws of it (None: it can be drawn)
    no_timeline: ClassVar[str | None] = None
    #: whether its batch operator run reads each view on the view's own engine (else
    #: on the operator engine, placed in the pipeline's global sequence)
    views_on_their_engine: ClassVar[bool] = False

    @staticmethod
    def native_input(runner: StageRunner, q: Any, source: DataFrame) -> Any:
        stage: P.OperatorStage = q
        return runner.view_input(stage.source, source)

    @staticmethod
    def native(runner: StageRunner, q: Any, source: DataFrame) -> DataFrame:
        from wql.compiler.backends.native import build_native

        return build_native(q, _AggregateHost.native_input(runner, q, source))

    @staticmethod
    def batch(runner: StageRunner, q: Any, source: DataFrame, tag: bool) -> Any:
        from wql.spark.batch import run_operator, run_view_stage

        stage: P.OperatorStage = q
        if stage.source.view is None:
            return run_operator(stage, source, tag=tag)
        view = runner.program.view(stage.source.view)
        upstream = runner.operator_run(view, source, hidden=True)
        return run_view_stage(stage, upstream, tag=tag)

    @staticmethod
    def stream(runner: StageRunner, q: Any, source: DataFrame) -> Any:
        from wql.spark.stream_chain import run_stream_chain

        stage: P.OperatorStage = q
        return run_stream_chain(stage, _stream_plan(stage, P.StreamChain), source)


class _RankHost(_AggregateHost):
    """A window Top-N or deduplication: runs as an aggregate stage does."""

    no_timeline = "a window Top-N"


class _OverHost(_AggregateHost):
    """An OVER aggregation over its source: runs as an aggregate stage does."""

    no_timeline = "an OVER aggregation"


class _JoinHost:
    """A window join of two sides (each a window table or a view)."""

    no_timeline: ClassVar[str | None] = "a window join"
    #: a join's sides read each view's result, on either engine (a view's rows are final)
    views_on_their_engine: ClassVar[bool] = True

    @staticmethod
    def native_input(runner: StageRunner, q: Any, source: DataFrame) -> Any:
        join: P.WindowJoin = q
        return tuple(runner.view_input(s.source, source) for s in join.sides)

    @staticmethod
    def native(runner: StageRunner, q: Any, source: DataFrame) -> DataFrame:
        from wql.compiler.backends.native import build_native_join

        left, right = _JoinHost.native_input(runner, q, source)
        return build_native_join(q, left, right)

    @staticmethod
    def batch(runner: StageRunner, q: Any, source: DataFrame, tag: bool) -> Any:
        from wql.spark.joins import run_window_join

        join: P.WindowJoin = q
        # a view's rows are final, never late for the join: its result, either engine
        left, right = _JoinHost.native_input(runner, q, source)
        roots = tuple(
            (runner.program.side_root(s.source), runner.root_df(s.source, source))
            for s in join.sides
        )
        return run_window_join(q, left, right, roots=roots)

    @staticmethod
    def stream(runner: StageRunner, q: Any, source: DataFrame) -> Any:
        from wql.spark.stream_join import run_stream_join

        join: P.WindowJoin = q
        # the join and both sides' pipelines in one processor (the planner checked it)
        plan = _stream_plan(join, P.StreamJoin)
        roots = [runner.program.side_root(s.source) for s in join.sides]
        if roots[0].name.lower() != roots[1].name.lower():
            # two sources: each side's own stream (docs/streaming.md, "Window joins")
            left, right = (runner.root_df(s.source, source) for s in join.sides)
            return run_stream_join(join, plan, roots[0], left, other=(roots[1], right))
        return run_stream_join(join, plan, runner.program.root_sources(join)[0], source)


#: The host of each kind of stage (tests/spark/test_stage_dispatch.py: every kind has one).
HOSTS: dict[type, type[_AggregateHost] | type[_JoinHost]] = {
    P.Query: _AggregateHost,
    P.WindowRank: _RankHost,
    P.WindowJoin: _JoinHost,
    P.OverAggregate: _OverHost,
}


def _stream_plan(q: P.Stage, kind: type) -> Any:
    """The stream plan the planner gave ``q`` (of the type its host runs)."""
    plan = q.engine.stream if q.engine is not None else None
    if not isinstance(plan, kind):  # pragma: no cover - the planner plans every stream stage
        raise WqlUnsupportedError(
            f"query {q.name!r} was not planned for a stream", q.span, code=ErrorCode.UNSUPPORTED
        )
    return plan
