"""The embedding API: WQL inside a PySpark application.

Three lines::

    import wql
    results = wql.compile(text).apply(spark, clicks=clicks_df)
    results.df.show()            # the (only) query's result

:func:`compile` parses and plans a WQL text; :meth:`Compiled.apply` runs it
on Spark and returns :class:`Results`, a read-only mapping from every output
name — each query's name and each ``LATE DATA TO`` name — to its DataFrame,
exactly the folders ``wql run --output DIR`` writes. For the common
one-query file, ``results.df``, ``results.late`` and ``results.counters`` are
shortcuts; :meth:`Results.query` gives the full :class:`QueryResult` of any
query (engine, DataFrames, rows dropped and why, counters).

Sources: a DataFrame passed by source name wins; otherwise the source is read
as its ``CREATE SOURCE ... WITH (format, path, ...)`` declares (a relative
path resolves against ``base_dir``, the ``.wql`` file's folder for
:func:`compile_file`). A passed DataFrame is checked against the declaration
(every declared column present with a compatible type, else a clear error);
an undeclared source takes its schema from the DataFrame — then the text is
planned when :meth:`Compiled.apply` sees the DataFrame.

>>> q = compile('''
... CREATE SOURCE clicks (user_id STRING, ts TIMESTAMP,
...     WATERMARK FOR ts AS ts - INTERVAL '5' SECOND);
... CREATE VIEW per_minute AS
... SELECT user_id, window_start, COUNT(*) AS clicks
... FROM clicks GROUP BY user_id, TUMBLE(ts, INTERVAL '1' MINUTE);
... ''')
>>> q.queries, q.engine
(('per_minute',), {'per_minute': 'native'})
"""

from __future__ import annotations

import copy
import functools
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

from wql.compiler import compile_source, parse_source
from wql.compiler import plan as P
from wql.compiler.planner import ENGINES
from wql.errors import ErrorCode, WqlError, WqlSemanticError, WqlUnsupportedError
from wql.grammar import ast

if TYPE_CHECKING:
    from wql.spark.stages import StageRunner

__all__ = ["Compiled", "QueryResult", "Results", "compile", "compile_file"]


def compile(  # noqa: A001 - the public name the embedding story uses
    text: str,
    engine: str = "auto",
    *,
    filename: str | None = None,
    base_dir: str | Path | None = None,
    schemas: Mapping[str, Any] | None = None,
    require_declared: bool = False,
    streaming: bool = False,
    views: Sequence[Compiled] = (),
) -> Compiled:
    """Parse and plan a WQL text.

    ``engine`` is ``'auto'`` (the compiler chooses per query), ``'native'``
    or ``'operator'``. ``schemas`` (source name -> DataFrame, StructType or
    ``(name, type)`` pairs) lets the text use undeclared sources; without it,
    planning such a text waits for :meth:`Compiled.apply` — unless
    ``require_declared`` (what ``wql run`` uses: no DataFrames will come),
    which plans at once and reports an undeclared source as an error.
    ``streaming`` plans for streaming sources (``wql run --stream``): it is
    what :attr:`Compiled.engine` and :meth:`Compiled.explain` show, and a
    forced engine that cannot run on a stream fails here. Whatever it says,
    :meth:`Compiled.apply` plans each query for the DataFrame it actually
    gets (batch or streaming). ``views`` are compiled texts whose views this
    text's queries may read (``wql run a.wql b.wql``: ``b`` reads ``a``'s);
    a name several of them define is the last one's. Raises a
    :class:`~wql.errors.WqlError` for any error in the text.
    """
    if engine not in ENGINES:
        raise WqlSemanticError(
            f"unknown engine {engine!r}; expected one of {', '.join(ENGINES)}",
            code=ErrorCode.UNKNOWN_ENGINE,
        )
    base = Path(base_dir) if base_dir else None
    return Compiled(
        text,
        engine,
        filename,
        base,
        schemas,
        require_declared=require_declared,
        streaming=streaming,
        views=views,
    )


def compile_file(
    path: str | Path,
    engine: str = "auto",
    *,
    require_declared: bool = False,
    streaming: bool = False,
    views: Sequence[Compiled] = (),
) -> Compiled:
    """:func:`compile` the ``.wql`` file at ``path``; relative source paths resolve next to it."""
    from wql.compiler import read_file

    p = Path(path)
    return compile(
        read_file(p),
        engine,
        filename=str(path),
        base_dir=p.parent,
        require_declared=require_declared,
        streaming=streaming,
        views=views,
    )


class Compiled:
    """A compiled WQL text (see :func:`compile`)."""

    def __init__(
        self,
        text: str,
        engine: str,
        filename: str | None,
        base_dir: Path | None,
        schemas: Mapping[str, Any] | None,
        *,
        require_declared: bool = False,
        streaming: bool = False,
        views: Sequence[Compiled] = (),
    ) -> None:
        self.text = text
        self.engine_request = engine
        self.streaming = streaming
        self.filename = filename
        self.base_dir = base_dir
        self._schemas = dict(schemas or {})
        self._program: P.Program | None = None
        # the compiled texts whose views this one may read, and those views by name
        self._providers = tuple(views)
        self._views = _external_views(self._providers)
        # parsed once: every later binding (when apply() brings DataFrames) reuses it
        self._script = parse_source(text, filename)
        self._undeclared = _undeclared_sources(self._script, self._schemas, self._views)
        self._only: tuple[str, ...] | None = None
        if require_declared or not self._undeclared:
            self._program = self._compile(self._schemas)

    # -- the plan -----------------------------------------------------------

    @property
    def program(self) -> P.Program:
        """The typed plan; needs every source declared or given (``schemas=``)."""
        if self._program is None:
            names = ", ".join(sorted(self._undeclared))
            raise WqlSemanticError(
                f"source(s) {names} are not declared: the plan needs their schema",
                hint="pass their DataFrames to apply(), or schemas= to wql.compile()",
                code=ErrorCode.SCHEMA,
            )
        return self._program

    @property
    def queries(self) -> tuple[str, ...]:
        """The query names, in file order."""
        return tuple(q.name for q in self.program.queries)

    @property
    def engine(self) -> dict[str, str]:
        """The engine of each query (``'native'`` or ``'operator'``)."""
        return {q.name: P.engine_of(q) for q in self.program.queries}

    def explain(self) -> str:
        """What ``wql explain`` prints: the plan of every query and why its engine."""
        from wql.compiler.explain import explain

        return explain(self.program)

    def to_spark_sql(self, query: str | None = None) -> str:
        """Spark SQL of one native query, or of the whole file (operator queries as comments)."""
        from wql.compiler.backends import native

        if query is None:
            from wql.compiler.backends.spark_sql import spark_sql_script

            return spark_sql_script(self.program, self.filename)
        q = self._query(query)
        if P.engine_of(q) != "native":
            reasons = "; ".join(r.text for r in (q.engine.reasons if q.engine else ()))
            raise WqlUnsupportedError(
                f"query {q.name!r} runs on the operator engine and has no Spark SQL form"
                + (f" ({reasons})" if reasons else ""),
                q.span,
                code=ErrorCode.UNSUPPORTED,
            ).with_source(self.text, self.filename)
        return native.to_spark_sql(q)

    # -- running ------------------------------------------------------------

    def apply(self, spark: Any = None, /, **dataframes: Any) -> Results:
        """Run every query; DataFrames are passed by source name.

        ``spark`` defaults to the active session, else
        :func:`wql.spark.session.default_session`. Operator-engine queries run
        when this is called (their output is cached; :meth:`Results.release`
        frees it); native queries stay lazy. A query over a streaming
        DataFrame is planned for a stream (:func:`wql.compiler.planner.choose_engines`)
        and its outputs are streaming DataFrames.
        """
        from wql.spark.stages import StageRunner

        if spark is None:
            spark = _session()
        program = self._bound(dataframes)
        sources: dict[str, Any] = {}
        # what was read from files, by source: the malformed-row counts read with its schema
        read: dict[str, tuple[Path | None, Any]] = {}
        results: dict[str, QueryResult] = {}
        runner: StageRunner | None = None
        try:
            for q in self._selected(program):
                # every source the pipeline starts from (two for a join of two sources)
                for root in program.root_sources(q):
                    key = root.name.lower()
                    if key in sources:
                        continue
                    # the stage that reads the source (maybe in a file given before)
                    first = next(
                        st
                        for st in program.pipeline(q)
                        if any(s.view is None and s.name.lower() == key for s in P.inputs_of(st))
                    )
                    owner, owned = self._owner(first.name, program)
                    sources[key] = owner._source_df(spark, owned, root.name, dataframes, read)
            malformed = self._malformed(spark, program, sources, dataframes, read)
            # the engine of each query is chosen for the kind of DataFrame it reads
            program = self._planned(program, {k for k, df in sources.items() if df.isStreaming})
            runner = StageRunner(program, sources)
            for q in self._selected(program):
                df = sources[program.root_source(q).name.lower()]
                started = time.perf_counter()
                results[q.name] = _run(q, df, runner, self.text, self.filename)
                results[q.name].seconds = time.perf_counter() - started
                results[q.name]._malformed = _summed(
                    [malformed.get(r.name.lower()) for r in program.root_sources(q)]
                )
        except WqlError as e:
            for r in results.values():
                r.release()
            if runner is not None:
                runner.release()
            raise e.with_source(self.text, self.filename) from None
        return Results(results, runner)

    def _malformed(
        self,
        spark: Any,
        program: P.Program,
        sources: Mapping[str, Any],
        given: Mapping[str, Any],
        read: Mapping[str, tuple[Path | None, Any]],
    ) -> dict[str, Callable[[], int]]:
        """Per source this call read from files (batch), how to count its malformed rows
        (:func:`wql.spark.sources.malformed_rows`), by lower-cased name; ``read``: what
        :meth:`_source_df` read, by lower-cased name, with the folder it read from."""
        from wql.spark.sources import malformed_rows

        passed = {n.lower() for n in given}
        out: dict[str, Callable[[], int]] = {}
        for key, df in sources.items():
            decl = program.source(key)
            if key in passed or df.isStreaming or decl is None or not decl.declared:
                continue
            first = next(
                (
                    st
                    for q in program.queries
                    for st in program.pipeline(q)
                    if any(s.view is None and s.name.lower() == key for s in P.inputs_of(st))
                ),
                None,
            )
            owner = self._owner(first.name, program)[0] if first is not None else self
            folder, df_read = read.get(key, (None, None))
            out[key] = functools.cache(
                functools.partial(
                    malformed_rows,
                    spark,
                    decl,
                    owner.base_dir,
                    df_read if folder == owner.base_dir else None,
                )
            )
        return out

    def timeline(
        self,
        path: str | Path,
        spark: Any = None,
        /,
        *,
        query: str | None = None,
        keys: Any = None,
        top: int = 3,
        **dataframes: Any,
    ) -> Any:
        """Draw the windows and firings of a few keys of one query to ``path``.

        ``path`` ends in ``.html``, ``.svg`` or ``.png``; ``query`` is needed
        when the text has several; ``keys`` lists the keys to show (default:
        the ``top`` keys with the most rows). The query runs on the operator
        engine over batch DataFrames (passed by source name, as for
        :meth:`apply`). Needs the ``viz`` extra (matplotlib). Returns the
        :class:`wql.spark.timeline.Timeline` that was drawn.
        """
        from wql.spark.stages import HOSTS
        from wql.spark.timeline import draw

        if spark is None:
            spark = _session()
        program = self._bound(dataframes)
        if query is None:
            if len(program.queries) != 1:
                raise WqlSemanticError(
                    f"the text has {len(program.queries)} queries; say which to draw with query=",
                    hint=f"queries: {', '.join(q.name for q in program.queries)}",
                    code=ErrorCode.USAGE,
                )
            q = program.queries[0]
        else:
            q = self._selected_one(program, query)
        kind = HOSTS[type(q)].no_timeline
        if kind is not None:
            raise WqlUnsupportedError(
                f"query {q.name!r} is {kind}: a timeline draws a windowed aggregate's "
                "windows and firings",
                q.span,
                code=ErrorCode.UNSUPPORTED,
            )
        aggregate = cast(P.Query, q)  # the only kind whose host draws timelines
        try:
            df = self._source_df(spark, program, aggregate.source.name, dataframes)
            if df.isStreaming:
                raise WqlUnsupportedError(
                    "a timeline replays a batch source; pass a static DataFrame",
                    code=ErrorCode.UNSUPPORTED,
                )
            if keys is not None and not isinstance(keys, list | tuple):
                keys = [keys]
            return draw(aggregate, df, path, keys=keys, top=top)
        except WqlError as e:
            raise e.with_source(self.text, self.filename) from None

    # -- helpers ------------------------------------------------------------

    def _selected_one(self, program: P.Program, name: str) -> P.Stage:
        known = {q.name.lower(): q for q in program.queries}
        if name.lower() not in known:
            raise WqlSemanticError(
                f"no query named {name!r}",
                hint=f"queries: {', '.join(q.name for q in program.queries)}",
                code=ErrorCode.USAGE,
            )
        return known[name.lower()]

    def _compile(self, schemas: Mapping[str, Any]) -> P.Program:
        return compile_source(
            self.text,
            self.filename,
            engine=self.engine_request,
            schemas=schemas or None,
            streaming=self.streaming,
            script=self._script,
            views=self._views,
        )

    def _planned(self, program: P.Program, streams: set[str]) -> P.Program:
        """``program`` with every query planned for a stream exactly when its source is one."""
        from wql.compiler.planner import choose_engines

        if all(
            q.engine is not None
            and q.engine.streaming
            == any(r.name.lower() in streams for r in program.root_sources(q))
            for q in self._selected(program)
        ):
            return program
        if self._only is not None:
            # only the selected queries and what they read: another query's refusal on a
            # stream (a pipeline, a join) is not theirs
            needed = {
                st.name.lower() for q in self._selected(program) for st in program.pipeline(q)
            }
            queries = tuple(q for q in program.queries if q.name.lower() in needed)
            program = replace(program, queries=queries)
        return choose_engines(program, self.engine_request, streaming=streams)

    def _owner(self, query: str, program: P.Program) -> tuple[Compiled, P.Program]:
        """The compiled text that defines the query called ``query`` (this one, whose
        ``program`` is given, or a provider's), with its program."""
        low = query.lower()
        if any(q.name.lower() == low for q in program.queries):
            return self, program
        for provider in reversed(self._providers):
            if low in provider._views or any(
                q.name.lower() == low for q in provider.program.queries
            ):
                return provider._owner(query, provider.program)
        raise KeyError(query)  # pragma: no cover - the binder resolved every view

    def _bound(self, dataframes: Mapping[str, Any]) -> P.Program:
        if self._program is not None and not (self._undeclared & {n.lower() for n in dataframes}):
            return self._program
        schemas = {**self._schemas, **dataframes}
        return self._compile(schemas)

    def only(self, *names: str) -> Compiled:
        """A view of this text whose :meth:`apply` runs only the queries ``names``.

        Useful when one query of a multi-query file is wanted: the others (and
        the operator engine's work for them) are skipped.
        """
        view = copy.copy(self)
        view._only = tuple(names)
        if self._program is not None:
            view._selected(self._program)  # unknown names fail here, not at apply()
        return view

    def _selected(self, program: P.Program) -> tuple[P.Stage, ...]:
        if self._only is None:
            return program.queries
        known = {q.name.lower(): q for q in program.queries}
        missing = [n for n in self._only if n.lower() not in known]
        if missing:
            raise WqlSemanticError(
                f"no query named {missing[0]!r}",
                hint=f"queries: {', '.join(q.name for q in program.queries)}",
                code=ErrorCode.USAGE,
            )
        return tuple(known[n.lower()] for n in self._only)

    def _query(self, name: str) -> P.Stage:
        try:
            return self.program.query(name)
        except KeyError:
            raise WqlSemanticError(
                f"no query named {name!r}",
                hint=f"queries: {', '.join(self.queries)}",
                code=ErrorCode.USAGE,
            ) from None

    def _source_df(
        self,
        spark: Any,
        program: P.Program,
        name: str,
        dataframes: Mapping[str, Any],
        read: dict[str, tuple[Path | None, Any]] | None = None,
    ) -> Any:
        """The DataFrame of source ``name``: the one passed, else read from its WITH
        clause (recorded in ``read`` with the folder it was read from)."""
        from wql.spark.sources import conform, read_source

        decl = program.source(name)
        given = next((df for n, df in dataframes.items() if n.lower() == name.lower()), None)
        if decl is None:  # pragma: no cover - the binder resolved every source
            raise WqlSemanticError(f"unknown source {name!r}", code=ErrorCode.UNKNOWN_NAME)
        if given is None:
            if not decl.declared:  # pragma: no cover - an undeclared source came from a DataFrame
                raise WqlSemanticError(f"source {name!r} needs a DataFrame", code=ErrorCode.SCHEMA)
            given = read_source(spark, decl, self.base_dir)
            if read is not None:
                read[name.lower()] = (self.base_dir, given)
        return conform(decl, given)


#: Counters of a streaming result: unknown until a streaming query runs (see
#: ``StreamingQuery.lastProgress`` and :attr:`wql.spark.streaming.StreamRun.counters`).
_STREAMING_COUNTERS: dict[str, Any] = {
    "rows_in": None,
    "rows_out": None,
    "late_rows": None,
    "dropped": {},
    "streaming": True,
}


def _summed(counts: list[Callable[[], int] | None]) -> Callable[[], int] | None:
    """The malformed rows of every source a query reads (two for a join of two sources)."""
    known = [c for c in counts if c is not None]
    if len(known) <= 1:
        return known[0] if known else None
    return lambda: sum(c() for c in known)


def _run(q: P.Stage, df: Any, runner: StageRunner, text: str, filename: str | None) -> QueryResult:
    """``q`` over its source DataFrame ``df`` (the root of its pipeline) on its engine.

    The hosts return what ran (:mod:`wql.spark.stages`: one run class per kind);
    the result value is built here only. A stream over an idle source gets
    :class:`_NeedsIdleMonitor` outputs (``text``/``filename``: for its error).
    """
    engine = P.engine_of(q)
    streaming = bool(df.isStreaming)
    counters = dict(_STREAMING_COUNTERS) if streaming else None
    run = runner.run(q, df)
    if engine == "native":
        stages = None if streaming else functools.partial(_upstream_counters, q, df, runner)
        return QueryResult(
            plan=q,
            engine=engine,
            df=run.result,
            late=None,
            source=run.input,
            _counters=counters,
            _stages=stages,
        )
    dropped = None
    if not streaming:
        counters, dropped = run.counters, run.dropped
        rows_out = getattr(run, "rows_out", None)  # a batch operator run may know it
        if rows_out is not None:
            counters = {**counters, "rows_out": rows_out}
        runner.claim(run)  # its own result now: released with it (not twice)
    stages = None if streaming else functools.partial(_upstream_counters, q, df, runner)
    result, late = run.result, run.late
    if streaming and run.idle_ms is not None and not run.heartbeats:
        root = runner.program.root_sources(q)[0]
        error = _idle_monitor_error(q.name, root.event_time, q.span)
        result = _NeedsIdleMonitor(error.with_source(text, filename))
        late = result if late is not None else None
    return QueryResult(
        plan=q,
        engine=engine,
        df=result,
        late=late,
        source=df,
        _counters=counters,
        _dropped=dropped,
        run=run,
        _stages=stages,
    )


def _upstream_counters(q: P.Stage, df: Any, runner: StageRunner) -> dict[str, dict[str, Any]]:
    """The counters of every stage before ``q`` in its batch pipeline, upstream first, as
    each ran for ``q`` (an operator query's views replayed on the operator engine)."""
    from wql.spark.stages import HOSTS

    out = {}
    program = runner.program
    for stage in program.pipeline(q)[:-1]:
        # a native query's views are native; an operator query's run on the operator
        # engine; a join's sides read each view on its own engine
        reader = P.engine_of(q) == "native" or HOSTS[type(q)].views_on_their_engine
        if reader and P.engine_of(stage) == "native":
            native = runner.run(stage, df)
            view = QueryResult(
                plan=stage, engine="native", df=native.result, late=None, source=native.input
            )
        else:
            run = runner.operator_run(stage, df, hidden=True)
            view = QueryResult(
                plan=stage,
                engine="operator",
                df=run.result,
                late=run.late,
                source=df,
                _counters=dict(run.counters),
                _dropped=run.dropped,
            )
        out[stage.name] = view.counters
    return out


class _NeedsIdleMonitor:
    """The output of a stream over an idle source, as :meth:`Compiled.apply` returns it.

    The idle rule needs a driver-side monitor that appends heartbeats to the
    query's end stream (:mod:`wql.spark.idle`); a DataFrame the user starts
    has neither, so using this one raises the positioned error instead of
    running without the rule. :func:`wql.spark.stream_sinks.start_streams`
    builds the query with both.
    """

    def __init__(self, error: WqlError) -> None:
        self._error = error

    def __getattr__(self, name: str) -> Any:
        raise self._error

    def __repr__(self) -> str:
        return f"<stream over an idle source: {self._error.message}>"


def _idle_monitor_error(name: str, et: P.EventTime | None, span: Any) -> WqlError:
    return WqlUnsupportedError(
        f"query {name!r} reads a source with IDLE AFTER: on a stream, the idle rule needs "
        "a driver-side monitor that moves Spark's watermark with heartbeat rows while the "
        "source is quiet; the DataFrames apply() returns have none, so they cannot be "
        "started on their own",
        (et.idle_span or et.span) if et is not None else span,
        hint="start the results with wql.spark.stream_sinks.start_streams(results, OUT, CK) "
        "or wql run --stream, which own the monitor (docs/streaming.md, 'Idle sources')",
        code=ErrorCode.UNSUPPORTED,
    )


def _session() -> Any:
    from pyspark.sql import SparkSession

    active = SparkSession.getActiveSession()
    if active is not None:
        return active
    from wql.spark.session import default_session

    return default_session()


def _undeclared_sources(
    script: ast.Script, schemas: Mapping[str, Any], views: Mapping[str, Any]
) -> set[str]:
    """Lower-cased names used in FROM but neither declared sources, views nor in ``schemas``."""
    declared = {s.name.name.lower() for s in script.statements if isinstance(s, ast.CreateSource)}
    declared |= {s.name.name.lower() for s in script.statements if isinstance(s, ast.CreateView)}
    declared |= {n.lower() for n in schemas} | set(views)
    used = set()
    for s in script.statements:
        q = s.query if isinstance(s, ast.CreateView) else s
        if isinstance(q, ast.Query):
            used.add(q.source.name.name.lower())
        elif isinstance(q, ast.RankQuery):
            used.add(_relation_table(q.source))
        elif isinstance(q, ast.JoinQuery):
            used |= {_relation_table(q.left.relation), _relation_table(q.right.relation)}
    return used - declared


def _relation_table(r: ast.Relation) -> str:
    """The lower-cased table a relation reads (a window table's table)."""
    table = r.table if isinstance(r, ast.WindowTable) else r
    return table.name.name.lower()


def _external_views(providers: Sequence[Compiled]) -> dict[str, Any]:
    """The views of ``providers`` by lower-cased name (a later provider's win)."""
    from wql.compiler.binder import ExternalView

    out: dict[str, Any] = {}
    for c in providers:
        out.update(c._views)
        for q in c.program.queries:
            out[q.name.lower()] = ExternalView(q, c.program, c.filename or "another file")
    return out


# --------------------------------------------------------------------------- results


@dataclass
class QueryResult:
    """One query's outcome.

    ``df`` has the query's output schema; ``late`` is the ``LATE DATA TO``
    output (``None`` without it); ``dropped`` the source rows not windowed,
    with a ``reason`` column. :attr:`counters` is computed on first use for
    native queries (it runs Spark jobs) and known at once for operator ones.
    """

    plan: P.Stage
    engine: str
    df: Any
    late: Any
    source: Any = field(repr=False)
    _counters: dict[str, Any] | None = field(default=None, repr=False)
    _dropped: Any = field(default=None, repr=False)
    #: what ran (a run of :mod:`wql.spark.stages`; None: a native stage)
    run: Any = field(default=None, repr=False)
    seconds: float = 0.0
    _stages: Callable[[], dict[str, dict[str, Any]]] | None = field(default=None, repr=False)
    #: counts the source's malformed rows when WQL read it from CSV or JSON files
    _malformed: Callable[[], int] | None = field(default=None, repr=False)

    @property
    def name(self) -> str:
        return self.plan.name

    @property
    def late_name(self) -> str | None:
        return self.plan.late_output

    @property
    def dropped(self) -> Any:
        if self._dropped is None:
            from wql.compiler.backends.native import dropped_rows

            self._dropped = dropped_rows(self.plan, self.source)
        return self._dropped

    @property
    def counters(self) -> dict[str, Any]:
        """``rows_in``, ``rows_out``, ``late_rows``, ``dropped`` (reason -> rows), and more.

        ``rows_filtered`` (WHERE) and ``rows_fired`` (rows in at least one
        emitted firing): ``rows_in = rows_fired + late_rows + rows_filtered +
        sum(dropped)`` (docs/running.md). Operator queries also report
        ``rows_emitted`` (firings before HAVING) and the replay's counts.
        """
        if self._counters is None:
            from wql.compiler.backends.native import native_counters

            self._counters = native_counters(self.plan, self.source)
        out = dict(self._counters)
        if "rows_out" not in out:
            out["rows_out"] = self.df.count()
            self._counters["rows_out"] = out["rows_out"]
        out["engine"] = self.engine
        if self._malformed is not None:
            out["malformed"] = self._malformed()
        return out

    @property
    def stages(self) -> dict[str, dict[str, Any]]:
        """The :attr:`counters` of every stage of this query's pipeline by query name,
        upstream first and this query's last (one entry for a query over a source).

        A view's late rows and drops happen in its own stage: they are in its
        entry, not in this query's counters, also when only this query was
        applied (docs/running.md, "Counters"). Batch runs only: on a stream each
        view's counters are those of its own stream.
        """
        if self._stages is None:
            return {self.name: self.counters}
        out = dict(self._stages())
        out[self.name] = self.counters
        return out

    def release(self) -> None:
        """Free what the operator engine cached for this query."""
        if self.run is not None:
            self.run.release()


class Results(Mapping[str, Any]):
    """Every output of a run: query names and late-output names -> DataFrames."""

    def __init__(self, queries: Mapping[str, QueryResult], runner: Any = None) -> None:
        self._queries = dict(queries)
        self._runner = runner
        self._outputs: dict[str, Any] = {}
        for r in self._queries.values():
            self._outputs[r.name] = r.df
            if r.late_name is not None and r.late is not None:
                self._outputs[r.late_name] = r.late

    def __getitem__(self, name: str) -> Any:
        for n, df in self._outputs.items():
            if n.lower() == name.lower():
                return df
        raise KeyError(name)

    def __iter__(self) -> Iterator[str]:
        return iter(self._outputs)

    def __len__(self) -> int:
        return len(self._outputs)

    def query(self, name: str) -> QueryResult:
        """The full result of the query called ``name``."""
        for n, r in self._queries.items():
            if n.lower() == name.lower():
                return r
        raise KeyError(name)

    @property
    def queries(self) -> tuple[QueryResult, ...]:
        return tuple(self._queries.values())

    def _only(self) -> QueryResult:
        if len(self._queries) != 1:
            names = ", ".join(self._queries)
            raise WqlSemanticError(
                f"the text has {len(self._queries)} queries ({names}); pick one with "
                "results[name] or results.query(name)",
                code=ErrorCode.USAGE,
            )
        return next(iter(self._queries.values()))

    @property
    def df(self) -> Any:
        """The result of the text's only query."""
        return self._only().df

    @property
    def late(self) -> Any:
        """The late output of the text's only query (``None`` without LATE DATA TO)."""
        return self._only().late

    @property
    def counters(self) -> dict[str, Any]:
        """The counters of the text's only query."""
        return self._only().counters

    @property
    def stages(self) -> dict[str, dict[str, Any]]:
        """The counters of every stage of the only query's pipeline (:attr:`QueryResult.stages`)."""
        return self._only().stages

    def write_table(self, output: str, table: str, *, mode: str = "overwrite") -> None:
        """Write the batch output ``output`` (a query's or a late output's name) to ``table``
        of Spark's catalog (``saveAsTable``; ``mode`` as Spark's, replacing by default).
        A streaming output is written with ``wql.spark.stream_sinks.start_streams(...,
        table_prefix=...)`` (``toTable``)."""
        df = self[output]
        if df.isStreaming:
            raise WqlSemanticError(
                f"output {output!r} is a stream: write it with start_streams(..., "
                "table_prefix=...)",
                code=ErrorCode.USAGE,
            )
        df.write.mode(mode).saveAsTable(table)

    def write_tables(self, prefix: str, *, mode: str = "overwrite") -> dict[str, str]:
        """Write every batch output to the table ``prefix + <output name>`` of Spark's catalog
        (:meth:`write_table`); returns output name -> table."""
        tables = {name: prefix + name for name in self._outputs}
        for name, table in tables.items():
            self.write_table(name, table, mode=mode)
        return tables

    def release(self) -> None:
        """Free every cache the run holds (the DataFrames are then recomputed when used)."""
        for r in self._queries.values():
            r.release()
        if self._runner is not None:
            self._runner.release()
