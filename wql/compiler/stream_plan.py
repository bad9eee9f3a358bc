"""How an operator stage runs on a stream: the planner's :data:`~wql.compiler.plan.StreamPlan`.

:func:`stream_plan` is computed once, at planning (``planner.choose_engines``),
and carried in the stage's ``EngineChoice.stream``; the stream hosts
(:mod:`wql.spark.stages`) run what it says and never compute it again. It
is a :class:`~wql.compiler.plan.StreamChain` for a query or window rank (the
views it reads and the links between them) and a
:class:`~wql.compiler.plan.StreamJoin` for a window join.

On a stream a pipeline (a query over a view, over a view, ...) runs in ONE
Spark stateful processor (:mod:`wql.spark.stream_chain`,
docs/streaming.md "Pipelines"): every stage's operator in one Python
process, so that the rows a stage fires at a watermark rise reach the next
stage before that rise, as Flink's operator chain orders them
(``AbstractStreamOperator.processWatermark``). Inside the processor there is
no Spark to evaluate SQL, so a link runs there when every piece of it is a
value the processor copies exactly (:func:`_copied_link`):

* the view (an aggregate, not a window rank or join) has no ``HAVING``, and
  each of its output columns the reader uses is a column of its
  post-aggregation relation (a key, ``window_start``/``window_end``/
  ``window_time``, ``pane_index``, ``pane_timing``, ``is_first``,
  ``is_last``, an aggregate) under its own type;
* the reader has no ``WHERE``; its keys and inputs are view columns, or
  ``UNIX_MILLIS`` of a view column holding a window bound (what a window
  rank reads of its window); its event time is a window-bound column.

Any other link is a link in Spark SQL (``Link.sql``, :func:`_sql_link`):
the pipeline is cut there into Spark stateful operators with Spark's
projection between them (:mod:`wql.spark.stream_links`, docs/streaming.md
"Links in Spark SQL"), exact when the reader is a windowed aggregate whose
event time is the view's ``window_time`` or ``window_end`` (or who has
none), or a window rank (which ranks the view's own windows, late by their
end); a query that reads a window rank always reads it so (a rank's rows
have no event time). Everywhere: no stage uses processing time (a
pipeline's global sequence is made of event-time rises, docs/architecture.md
"Contract: pipelines"). What is left is refused with a positioned error that
says why: a second evaluator of Spark SQL whose semantics could drift from
Spark's is not worth the reach.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from wql.compiler import plan as P
from wql.compiler.backends.operator import OperatorPlan, build_stage, post_aggregation_relation
from wql.compiler.types import WqlType
from wql.errors import ErrorCode, Span, WqlUnsupportedError
from wql.runtime.config import (
    EMIT_WINDOW_END,
    EMIT_WINDOW_START,
    EMIT_WINDOW_TIME,
)

__all__ = ["carried_keys", "chain_partition", "stream_join", "stream_plan"]

_WINDOW_FIELDS = {
    "window_start": EMIT_WINDOW_START,
    "window_end": EMIT_WINDOW_END,
    "window_time": EMIT_WINDOW_TIME,
}


@dataclass
class StreamMemo:
    """What planning one program's stream stages has built so far, so that every
    stage's operator plan and every link is built once however many queries read
    it (a file of N chained views would otherwise cost N² of each:
    docs/benchmarks.md, "Long pipelines"). Keyed by the stages' ``id``: a memo
    must not outlive the program it was made for."""

    ops: dict[int, OperatorPlan] = field(default_factory=dict)
    links: dict[tuple[int, int, bool], P.Link] = field(default_factory=dict)

    def op(self, s: P.OperatorStage) -> OperatorPlan:
        op = self.ops.get(id(s))
        if op is None:
            op = self.ops[id(s)] = build_stage(s)
        return op


def stream_plan(q: P.Stage, program: P.Program, memo: StreamMemo | None = None) -> P.StreamPlan:
    """How ``q`` runs on a stream; raises a positioned :class:`WqlUnsupportedError`
    for what one stream processor cannot run exactly. ``memo``: what earlier calls
    for the same ``program`` built (see :class:`StreamMemo`)."""
    return _STREAM_PLANS[type(q)](q, program, StreamMemo() if memo is None else memo)


def stream_chain(q: P.OperatorStage, program: P.Program, memo: StreamMemo) -> P.StreamChain:
    """The chain of ``q`` over the views it reads (none: over its source)."""
    if q.source.view is None:
        return P.StreamChain()
    chain, links, ops = _linked(program.pipeline(q), memo)
    keys, serial = chain_partition(chain, [memo.op(s) for s in chain], links)
    text = tuple(memo.op(chain[0]).keys[i].expr.sql for i in keys)
    return P.StreamChain(chain[:-1], links, ops, keys, text, serial)


def chain_partition(
    chain: tuple[P.OperatorStage, ...], ops: list[OperatorPlan], links: tuple[P.Link, ...]
) -> tuple[tuple[int, ...], str]:
    """The first stage's key positions the chain ``chain`` (its operator plans ``ops``,
    ``links[i]`` feeding ``chain[i + 1]``) can run partitioned by, and, when there are
    none, why it runs in one group (docs/streaming.md, "Partitioned pipelines").

    A chain runs partitioned by the first stage's keys ``S`` when

    * every later stage's keys include a copy (``LinkField`` of a key, as its
      value) of each key of ``S`` as the stage before carries it: a later
      stage's key state then depends on the rows of one value of ``S`` only,
      and rows of different values never meet; and
    * every later stage's event time is its view's ``window_time`` or
      ``window_end``: a group sees only the rises of micro-batches with its
      own rows or due timers, and a row a rise fires has a window bound at or
      after the timer that fired it, so it is late at no skipped rise either
      (``window_start`` can be behind one).
    """
    first = ops[0]
    if not first.keys:
        return (), f"view {chain[0].name!r} has no grouping key: one window holds every row"
    carried = {i: i for i in range(len(first.keys))}  # first-stage key -> position here
    for stage, link in zip(chain[1:], links, strict=True):
        here: dict[int, int] = {}
        for i, p in carried.items():
            m = next(
                (m for m, f in enumerate(link.keys) if f.source == ("key", p) and f.as_ == "value"),
                None,
            )
            if m is not None:
                here[i] = m
        if not here:
            return (), _serial_reason(stage, chain[0])
        carried = here
        if link.event_time not in (None, EMIT_WINDOW_END, EMIT_WINDOW_TIME):
            return (), (
                f"query {stage.name!r} takes its event time from window_start, which can be "
                "behind a watermark rise that only other keys' rows bring"
            )
    return tuple(sorted(carried)), ""


def carried_keys(links: tuple[P.Link, ...], partition: tuple[int, ...]) -> list[tuple[int, ...]]:
    """Per stage of a chain partitioned by the first stage's keys ``partition`` (see
    :func:`chain_partition`), the positions of its keys that copy them, in
    ``partition``'s order: what each of its Spark operators is grouped by when the
    chain is cut where a link needs Spark SQL (docs/streaming.md, "Links in Spark
    SQL")."""
    carried = {i: i for i in partition}
    out = [tuple(carried[i] for i in partition)]
    for link in links:
        carried = {
            i: next(
                m for m, f in enumerate(link.keys) if f.source == ("key", p) and f.as_ == "value"
            )
            for i, p in carried.items()
        }
        out.append(tuple(carried[i] for i in partition))
    return out


def _serial_reason(stage: P.OperatorStage, first: P.OperatorStage) -> str:
    """Why ``stage`` needs the rows of every key of ``first`` in one group."""
    if isinstance(stage, P.WindowRank):
        return (
            f"window rank {stage.name!r} ranks across the keys of {first.name!r} per window: "
            "one order over every key"
        )
    if not stage.keys:
        return f"query {stage.name!r} has no grouping key: it rolls up every key's rows"
    return (
        f"query {stage.name!r} groups by other keys than {first.name!r}: rows of several of "
        "its keys meet in one window"
    )


def _linked(
    stages: tuple[P.Stage, ...], memo: StreamMemo
) -> tuple[tuple[P.OperatorStage, ...], tuple[P.Link, ...], tuple[OperatorPlan, ...]]:
    """The chain ``stages`` (upstream first), each reader's :class:`~wql.compiler.plan.Link`
    (``stages[i + 1]`` reads ``stages[i]``) and each stage's operator plan; raises a
    positioned :class:`WqlUnsupportedError` for a chain one processor cannot run."""
    for s in stages:
        if isinstance(s, P.WindowJoin):
            raise _refuse(
                f"query {s.name!r} is a window join, and a stream pipeline runs a chain of "
                "single-input stages",
                s.span,
                "run the join in batch",
            )
    chain = tuple(s for s in stages if not isinstance(s, P.WindowJoin))
    ops = [memo.op(s) for s in chain]
    for s, op in zip(chain, ops, strict=True):
        if op.uses_processing_time:
            raise _refuse(
                f"query {s.name!r} uses processing time, and a stream pipeline runs on "
                "event-time watermark rises only",
                op.trigger_span,
                "run the pipeline in batch, or use event time",
            )
    links = []
    for up, down, up_op, down_op in zip(chain, chain[1:], ops, ops[1:], strict=False):
        last = down is chain[-1]
        link = memo.links.get((id(up), id(down), last))
        if link is None:
            # a refusal is not kept: it ends the planning of this query, raised anew
            link = memo.links[(id(up), id(down), last)] = _link(up, down, up_op, down_op, last=last)
        links.append(link)
    return chain, tuple(links), tuple(ops)


def _link(
    up: P.OperatorStage, down: P.OperatorStage, up_op: OperatorPlan, op: OperatorPlan, last: bool
) -> P.Link:
    if isinstance(up, P.WindowRank):
        # the rank's ranked relation, outer WHERE or QUALIFY and SELECT are Spark SQL; a
        # rank's rows have no event time (the binder's rule), so its reader is windowed
        # by count or not at all and is behind no skipped rise
        return _sql_link(up, down, op, {})
    # the binder refuses a view of an OVER aggregation (binder/views.py)
    assert isinstance(up, P.Query), type(up).__name__
    columns = _copied(up, up_op)
    link = _copied_link(down, op, columns)
    if link is not None and up.having is None and down.filter is None:
        return link
    return _sql_link(up, down, op, columns)


def _copied_link(
    down: P.OperatorStage, op: OperatorPlan, columns: dict[str, tuple[P.FieldSource, WqlType]]
) -> P.Link | None:
    """The link whose every piece is a view column the processor copies as it is (keys,
    inputs, a window bound as the event time); None when one needs Spark SQL."""

    def field(ref: str | None, millis: bool) -> P.LinkField | None:
        # ``ref``: the view column the reader's input is (or, ``millis``, UNIX_MILLIS of),
        # from the binder's column references
        target = columns.get(ref.lower()) if ref is not None else None
        if target is None:
            return None
        source, type_ = target
        window = source[0] == "field" and source[1] in _WINDOW_FIELDS.values()
        if millis and not window:
            return None
        return P.LinkField(
            source, "millis" if millis else "timestamp" if window else "value", type_
        )

    keys = [
        field(k.expr.column_ref or k.expr.millis_ref, k.expr.column_ref is None) for k in op.keys
    ]
    values = [field(v.column, v.millis) for v in op.values]
    if any(f is None for f in keys) or any(f is None for f in values):
        return None
    et = down.source.event_time
    event_time = None
    if et is not None:
        event_time = _window_bound(columns, et.column)
        if event_time is None:
            return None
    return P.Link(tuple(f for f in keys if f), tuple(f for f in values if f), event_time)


def _sql_link(
    up: P.OperatorStage,
    down: P.OperatorStage,
    op: OperatorPlan,
    columns: dict[str, tuple[P.FieldSource, WqlType]],
) -> P.Link:
    """A link that Spark SQL evaluates between two stateful operators (the view's HAVING
    and SELECT, the reader's WHERE, keys and inputs; docs/streaming.md, "Links in Spark
    SQL"), or a positioned refusal of what such a cut cannot run exactly."""
    if isinstance(up, P.Query) and up.changelog is not None:
        raise _refuse(
            f"query {down.name!r} reads the changelog view {up.name!r} through Spark SQL "
            "(a HAVING, WHERE or computed column); on a stream a changelog view's rows "
            "reach a reader as they are only",
            down.source.span,
            "run the pipeline in batch",
        )
    if isinstance(down, P.WindowRank):
        assert isinstance(up, P.Query)  # the binder's rule: a rank reads a window aggregate
        return _sql_rank_link(up, down, op, columns)
    et = down.source.event_time
    # a view's event time is the window_time it selects (the binder's rule): a row a
    # timer at T fires is then not behind T, what a cut needs (docs/streaming.md)
    bound = _window_bound(columns, et.column) if et is not None else None
    if et is not None and bound not in (EMIT_WINDOW_END, EMIT_WINDOW_TIME):
        raise _refuse(
            f"query {down.name!r} takes its event time from {et.column!r} of view "
            f"{up.name!r}, and its link to the view needs Spark SQL: on a stream the reader "
            "then runs in a stateful operator of its own, which is exact when its event "
            "time is the view's window_time or window_end as it is",
            et.span or down.source.span,
            "window the reader by the view's window_time, or run the pipeline in batch",
        )
    return P.Link(_sql_keys(op, columns), (), bound, sql=True)


def _sql_rank_link(
    up: P.Query,
    down: P.WindowRank,
    op: OperatorPlan,
    columns: dict[str, tuple[P.FieldSource, WqlType]],
) -> P.Link:
    """A window rank's link in Spark SQL: the rank places a row in the window its view
    row names (the view's ``window_start`` and ``window_end`` as they are: the binder's
    rule) and is late by that window's end, so a row its view fires at a timer at ``T``
    is behind no rise before ``T`` (its window's max timestamp is at least ``T``): what
    a reader's event time of ``window_time`` or ``window_end`` gives any other reader
    across a cut (docs/streaming.md, "Links in Spark SQL")."""
    # the binder's rule (a rank over a view partitions by the view's window bounds)
    assert _window_bound(columns, down.window_bounds[1]) == EMIT_WINDOW_END, down.name
    et = down.source.event_time
    bound = _window_bound(columns, et.column) if et is not None else None
    return P.Link(_sql_keys(op, columns), (), bound, sql=True)


def _sql_keys(
    op: OperatorPlan, columns: dict[str, tuple[P.FieldSource, WqlType]]
) -> tuple[P.LinkField, ...]:
    """A reader's keys across a link in Spark SQL: the view key each copies as its
    value, or a field Spark computes."""
    keys = []
    for k in op.keys:
        ref = k.expr.column_ref
        target = columns.get(ref.lower()) if ref is not None else None
        if target is not None and target[0][0] == "key":
            keys.append(P.LinkField(target[0], "value", target[1]))
        else:
            keys.append(P.LinkField(("sql",), "value", k.type))
    return tuple(keys)


def _window_bound(columns: dict[str, tuple[P.FieldSource, WqlType]], column: str) -> int | None:
    """The emitted field of the window bound (start, end, time) that the view's column
    ``column`` copies; None when it copies anything else, or is computed."""
    target = columns.get(column.lower())
    if target is None or target[0][0] != "field" or target[0][1] not in _WINDOW_FIELDS.values():
        return None
    return int(target[0][1])


def _copied(up: P.Query, up_op: OperatorPlan) -> dict[str, tuple[P.FieldSource, WqlType]]:
    """The view's output columns that copy a column of its post-aggregation relation as it
    is: output name (lower case) -> (what it reads, its type)."""
    relation = _relation(up, up_op)
    columns = {}
    for c in up.output:
        ref = c.expr.column_ref
        target = relation.get(ref.lower()) if ref is not None else None
        if target is not None and (c.type.is_unknown or c.type == target[1]):
            columns[c.name.lower()] = target
    return columns


def _relation(up: P.Query, op: OperatorPlan) -> dict[str, tuple[P.FieldSource, WqlType]]:
    """The view's post-aggregation relation: column -> (what it reads, its type)."""
    return {name.lower(): (read, t) for name, read, t in post_aggregation_relation(up, op)}


def _refuse(message: str, span: Span | None, hint: str) -> WqlUnsupportedError:
    return WqlUnsupportedError(message, span, hint=hint, code=ErrorCode.UNSUPPORTED)


# --------------------------------------------------------------------------- window joins

#: Types whose values the join processor compares as Spark's ``=`` does, per family
#: (an equality across families is left to Spark, after the join).
_EQUI_FAMILIES = (
    frozenset({"TINYINT", "SMALLINT", "INT", "BIGINT", "DECIMAL"}),
    frozenset({"FLOAT", "DOUBLE"}),
    frozenset({"STRING"}),
    frozenset({"BOOLEAN"}),
    frozenset({"TIMESTAMP"}),
    frozenset({"DATE"}),
)


def stream_join(join: P.WindowJoin, program: P.Program, memo: StreamMemo) -> P.StreamJoin:
    """How the window join runs on a stream; raises a positioned
    :class:`WqlUnsupportedError` for one the join processor cannot run exactly."""
    from wql.compiler.expressions import sql_conjuncts, to_sql

    roots = [program.side_root(s.source) for s in join.sides]
    idle = [r for r in roots if r.event_time is not None and r.event_time.idle_ms is not None]
    if roots[0].name.lower() != roots[1].name.lower() and idle:
        et = idle[0].event_time
        assert et is not None
        raise _refuse(
            f"query {join.name!r} is a window join of two sources ({roots[0].name!r} and "
            f"{roots[1].name!r}) and {idle[0].name!r} declares IDLE AFTER: on a stream the "
            "idle monitor moves one source's watermark, and Flink leaves an idle input out "
            "of the join's minimum, which the join processor does not model",
            et.idle_span or join.right.span or join.span,
            "drop IDLE AFTER for this join, or run it in batch",
        )
    used = {c.lower() for c in join.on.columns}
    if join.where is not None:
        used |= {c.lower() for c in join.where.columns}
    for c in join.output:
        used |= {n.lower() for n in c.expr.columns}
    sides = (
        _join_input(join, join.left, program, used, memo),
        _join_input(join, join.right, program, used, memo),
    )
    left = {n.lower(): i for i, n in enumerate(join.left.internal)}
    right = {n.lower(): i for i, n in enumerate(join.right.internal)}
    equi: list[tuple[int, int]] = []
    residual: list[str] = []
    shown: list[str] = []  # the residual as the user wrote it (qualified names)
    names = {
        n.lower(): f"{side.qualifier}.{c.name}"
        for side in join.sides
        for n, c in zip(side.internal, side.columns, strict=True)
    }
    for term in sql_conjuncts(join.on.sql):
        pair = _equi_pair(term, left, right, join)
        if pair is not None:
            equi.append(pair)
            continue
        residual.append(to_sql(term))
        shown.append(to_sql(term.transform(lambda n: _user_name(n, names))))
    partners = ("", "")
    if residual and join.kind is not P.JoinKind.INNER:
        # an outer join's unmatched rows depend on the whole ON: Spark evaluates it over
        # each row of an outer side and the rows it matches on the equalities
        on = join.on.sql
        partners = (
            _over_partner(on, right) if join.kind is not P.JoinKind.RIGHT else "",
            _over_partner(on, left) if join.kind is not P.JoinKind.LEFT else "",
        )
    cut = [side for side, how in zip(join.sides, sides, strict=True) if how.sql]
    if len(cut) == 2:
        refs: tuple[tuple[tuple[str, int], ...], tuple[tuple[str, int], ...]] = ((), ())
        text: tuple[str, ...] = ()
        serial = (
            f"both sides read their views ({cut[0].source.view} and {cut[1].source.view}) "
            "through Spark SQL (a HAVING, WHERE or computed column): no source row carries "
            "a value of the join's keys before a stage, so the stateful operators before "
            "the join run in one group each, as the join does"
        )
    else:
        refs, text, serial = _join_partition(join, sides, equi, memo)
    return P.StreamJoin(sides, tuple(equi), tuple(residual), refs, text, serial, partners)


def _join_partition(
    join: P.WindowJoin,
    sides: tuple[P.JoinInput, P.JoinInput],
    equi: list[tuple[int, int]],
    memo: StreamMemo,
) -> tuple[tuple[tuple[tuple[str, int], ...], tuple[tuple[str, int], ...]], tuple[str, ...], str]:
    """The staged columns of each side the join runs partitioned by (see
    :class:`~wql.compiler.plan.StreamJoin`), the equalities they stand for, and, when
    there are none, why the join runs in one group (docs/streaming.md, "Partitioned
    window joins").

    An equality of ON partitions the join when each side's column is a value the
    side takes from each source row before any stage: a window table's source
    column, or a view's grouping key that its pipeline carries from its first
    stage (as :func:`chain_partition` carries keys), with the same type on both
    sides (floating point excluded) and the view's event times window bounds
    that a skipped rise cannot be behind. Rows whose values differ can never
    match, so a group per value joins exactly what the one group joins.
    """
    pairs: list[tuple[tuple[str, int], tuple[str, int], str]] = []
    for i, j in equi:
        a, b = join.left.columns[i], join.right.columns[j]
        if a.type != b.type or a.type.kind in ("FLOAT", "DOUBLE"):
            continue
        left = _staged_ref(sides[0], i, memo)
        right = _staged_ref(sides[1], j, memo)
        if left is not None and right is not None:
            shown = f"{join.left.qualifier}.{a.name} = {join.right.qualifier}.{b.name}"
            pairs.append((left, right, shown))
    if not pairs:
        return (
            ((), ()),
            (),
            "no equality of ON is between keys both sides take from each row before "
            "their first stage (a window table's column, a view's grouping key carried "
            "from its first stage): rows of every key can match",
        )
    return (
        (tuple(p[0] for p in pairs), tuple(p[1] for p in pairs)),
        tuple(p[2] for p in pairs),
        "",
    )


def _staged_ref(side: P.JoinInput, column: int, memo: StreamMemo) -> tuple[str, int] | None:
    """The staged column that side column ``column`` copies from each source row: a
    window table's source column, or the first-stage key of a view side's pipeline that
    the column carries (None: neither, or a window column of a window table). For a side
    read through Spark SQL, the view column itself (``("c", column)``) when it is a
    view key carried from the pipeline's first stage (:func:`_cut_ref`)."""
    if side.sql:
        return _cut_ref(side, column)
    if not side.chain:
        if column in side.window_columns or side.source_columns[column] is None:
            return None
        return ("c", column)
    f = side.fields[column]
    if f is None or f.source[0] != "key" or f.as_ != "value":
        return None
    if side.event_time not in (None, EMIT_WINDOW_END, EMIT_WINDOW_TIME):
        return None
    p = int(f.source[1])
    for link in reversed(side.links):
        if link.event_time not in (None, EMIT_WINDOW_END, EMIT_WINDOW_TIME):
            return None
        up = link.keys[p]
        if up.source[0] != "key" or up.as_ != "value":
            return None
        p = int(up.source[1])
    return ("k", p)


def _cut_ref(side: P.JoinInput, column: int) -> tuple[str, int] | None:
    """``("c", column)`` when side column ``column`` of a side read through Spark SQL is a
    copy, through the view's SELECT, of a key of the view that its pipeline carries from
    its first stage's partition keys (:func:`chain_partition`): the side's segments then
    run partitioned by those keys, and each of their groups feeds the join's group of
    that key's value (docs/streaming.md, "Partitioned window joins")."""
    name = side.source_columns[column]
    view, op = side.chain[-1], side.ops[-1]
    if name is None or not isinstance(view, P.Query):
        return None
    if side.event_time not in (None, EMIT_WINDOW_END, EMIT_WINDOW_TIME):
        return None
    read = _copied(view, op).get(name.lower())
    if read is None or read[0][0] != "key":
        return None
    partition, _ = chain_partition(side.chain, list(side.ops), side.links)
    if not partition or int(read[0][1]) not in carried_keys(side.links, partition)[-1]:
        return None
    return ("c", column)


def _over_partner(on: str, partner: dict[str, int]) -> str:
    """The join condition ``on`` (Spark SQL over the joined relation's internal names)
    with the columns of ``partner``'s side read from a partner struct, ``__wql_p``."""
    from sqlglot import exp

    from wql.compiler.expressions import sql_conjuncts, to_sql

    def read(node: Any) -> Any:
        if isinstance(node, exp.Column) and not node.table and node.name.lower() in partner:
            return exp.Dot(this=exp.column("__wql_p"), expression=exp.to_identifier(node.name))
        return node

    return " AND ".join(f"({to_sql(t.transform(read))})" for t in sql_conjuncts(on))


def _user_name(node: Any, names: dict[str, str]) -> Any:
    """An internal column name of the joined relation as ``qualifier.column``."""
    from sqlglot import exp

    if isinstance(node, exp.Column) and not node.table and node.name.lower() in names:
        qualifier, column = names[node.name.lower()].split(".", 1)
        return exp.column(column, table=qualifier)
    return node


def _equi_pair(
    term: object, left: dict[str, int], right: dict[str, int], join: P.WindowJoin
) -> tuple[int, int] | None:
    """``(left position, right position)`` when ``term`` equates a column of each side
    whose values the processor compares as Spark does."""
    from sqlglot import exp

    if not (
        isinstance(term, exp.EQ)
        and isinstance(term.left, exp.Column)
        and isinstance(term.right, exp.Column)
        and not term.left.table
        and not term.right.table
    ):
        return None
    a, b = term.left.name.lower(), term.right.name.lower()
    if a in right and b in left:
        a, b = b, a
    if a not in left or b not in right:
        return None
    i, j = left[a], right[b]
    ta, tb = join.left.columns[i].type.kind, join.right.columns[j].type.kind
    if not any(ta in f and tb in f for f in _EQUI_FAMILIES):
        return None
    return i, j


def _join_input(
    join: P.WindowJoin, side: P.JoinSide, program: P.Program, used: set[str], memo: StreamMemo
) -> P.JoinInput:
    reads = [n.lower() in used for n in side.internal]
    positions: list[int | None] = [None, None, None]
    copies: list[str | None] = []
    if side.window is not None:
        # a window table: the function's window columns are filled in per window
        window_names = {n.lower(): k for k, n in enumerate(P.WINDOW_TABLE_COLUMNS)}
        for c in side.columns:
            k = window_names.get(c.name.lower())
            if k is not None:
                positions[k] = len(copies)
            copies.append(c.name if k is None else None)
    window_columns = (positions[0], positions[1], positions[2])
    if side.source.view is None:
        copies = [c if r else None for c, r in zip(copies, reads, strict=True)]
        return P.JoinInput((), (), (None,) * len(copies), tuple(copies), window_columns)
    view = program.view(side.source.view)
    pipeline = program.pipeline(view)
    chain, links, ops = _linked(pipeline, memo)  # refuses a join in the view's pipeline
    if not isinstance(view, P.Query):
        raise _refuse(
            f"query {join.name!r} joins view {view.name!r}, which is not a window aggregate",
            side.span,
            "run the join in batch",
        )
    columns = _copied(view, memo.op(view))
    computed = any(
        r and i not in positions and c.name.lower() not in columns
        for i, (c, r) in enumerate(zip(side.columns, reads, strict=True))
    )
    if any(link.sql for link in links) or view.having is not None or computed:
        return _sql_join_input(join, side, (chain, links, ops), columns, reads, positions)
    event_time = None
    if side.window is not None:
        et = side.source.event_time
        event_time = _window_bound(columns, et.column) if et is not None else None
        if event_time is None:
            raise _refuse(
                f"query {join.name!r} windows view {view.name!r} by "
                f"{et.column if et is not None else 'no column'!r}; on a stream the join "
                "processor takes a window bound (window_start, window_end, window_time) "
                "the view selects as it is",
                side.span,
                "window the view by its window_time, or run the join in batch",
            )
    fields: list[P.LinkField | None] = []
    for i, (c, r) in enumerate(zip(side.columns, reads, strict=True)):
        if i in positions:
            fields.append(None)  # a window column of the window table: filled in
            continue
        target = columns.get(c.name.lower()) if r else None  # a computed one: Spark SQL
        if target is None:
            fields.append(None)
            continue
        source, type_ = target
        window = source[0] == "field" and source[1] in _WINDOW_FIELDS.values()
        fields.append(P.LinkField(source, "timestamp" if window else "value", type_))
    return P.JoinInput(
        chain, links, tuple(fields), (None,) * len(fields), window_columns, event_time, ops
    )


def _sql_join_input(
    join: P.WindowJoin,
    side: P.JoinSide,
    linked: tuple[tuple[P.OperatorStage, ...], tuple[P.Link, ...], tuple[OperatorPlan, ...]],
    columns: dict[str, tuple[P.FieldSource, WqlType]],
    reads: list[bool],
    positions: list[int | None],
) -> P.JoinInput:
    """A join side that reads its view through Spark SQL (the view's HAVING or a column it
    computes, or a link of its pipeline in Spark SQL): the view's pipeline runs cut into
    stateful operators before the join's, as a pipeline cut at a link in Spark SQL does,
    and Spark evaluates the view's HAVING and SELECT between them (docs/streaming.md,
    "Window joins"). Exact as a reader across a cut is: the join places a view row by
    its window (late by its end), or, a window table over the view, by the view's
    ``window_time``, which a row fired at a timer at ``T`` is not behind."""
    chain, links, ops = linked
    event_time = None
    if side.window is not None:
        # the binder's rule: a window table over a view is windowed by its window_time
        et = side.source.event_time
        event_time = _window_bound(columns, et.column) if et is not None else None
        assert event_time in (EMIT_WINDOW_END, EMIT_WINDOW_TIME), join.name
    names = tuple(
        None if i in positions or not r else c.name
        for i, (c, r) in enumerate(zip(side.columns, reads, strict=True))
    )
    window_columns = (positions[0], positions[1], positions[2])
    return P.JoinInput(
        chain, links, (None,) * len(names), names, window_columns, event_time, ops, sql=True
    )


#: The stream plan of each kind of stage (tests/spark/test_stage_dispatch.py checks
#: that every kind has one).
_STREAM_PLANS: dict[type, Callable[[Any, P.Program, StreamMemo], P.StreamPlan]] = {
    P.Query: stream_chain,
    P.WindowRank: stream_chain,
    P.WindowJoin: stream_join,
    P.OverAggregate: stream_chain,
}
