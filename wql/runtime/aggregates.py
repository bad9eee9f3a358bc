"""Incremental aggregates: the table of aggregate kinds, and the code generated from it.

:data:`AGGREGATE_KINDS` is the one home of what an aggregate kind *is*: its
accumulator slots (create), how a value is added, how two accumulators
merge, how the result is read, which NumPy partial the vectorized path
computes for it, whether its partials combine across panes, for which
argument values merging is exact whatever the grouping, and the class of
its result type. Everything else reads it:

- :class:`Aggregator` (the runtime) generates ``create`` / ``add`` /
  ``merge`` / ``result`` as straight-line Python once per configuration (no
  per-row dispatch over kinds, because ``add`` runs for every (row, window)
  pair);
- the vectorized path (``wql.runtime.vectorized``) computes each kind's
  ``partial`` with NumPy and folds it into accumulators with the same
  ``merge`` code (:func:`merge_lines`, :func:`result_expression`);
- the HOP/CUMULATE slices (``wql.runtime.columnar``) combine per-slice partials
  and stay exact only where ``exact_merge`` says so;
- the compiler types a call from ``output`` (``wql.compiler.expressions
  .aggregate_type``), the native lowering asks ``rounds`` whether Spark's
  order of addition could change the result (``wql.compiler.planner
  .float_sum``), and ``wql explain`` prints ``state``.

Semantics (SQL, null-ignoring):

- ``COUNT(*)`` counts rows; ``COUNT(x)`` non-null values; ``COUNT(DISTINCT x)``
  distinct non-null values (kept as a set: memory O(distinct values); every
  NaN counts as the same value, as in Spark).
- ``SUM``/``MIN``/``MAX``/``AVG`` ignore nulls and give ``None`` when the window
  has no non-null value. ``AVG`` is ``sum / count`` (true division).
- ``FIRST_VALUE(x)``/``LAST_VALUE(x)``: the value of the row with the smallest /
  largest (event time, arrival sequence); rows with a null ``x`` are ignored
  (Flink SQL's FIRST_VALUE/LAST_VALUE ignore nulls). The accumulator keeps
  (ts, seq, value), so session merges are exact. Without event time, arrival
  order alone decides.
- ``COLLECT_LIST(x)``: non-null values (Spark's collect_list skips nulls) in
  (event time, arrival) order, also across merges.

>>> agg = Aggregator((AggregateSpec("COUNT_STAR"), AggregateSpec("SUM", 0),
...                   AggregateSpec("FIRST_VALUE", 0), AggregateSpec("COLLECT_LIST", 0)))
>>> acc = agg.create()
>>> for seq, (ts, v) in enumerate([(20, 5), (10, None), (5, 7)]):
...     agg.add(acc, ts, seq, (v,))
>>> agg.result(acc)
(3, 12, 7, [7, 5])
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from wql.runtime.windows import MIN_TIME

_NAN = float("nan")

#: Value classes of ``exact_merge`` (read by ``wql.runtime.vectorized.slices``).
INTEGRAL, STRING, ANY = "integral", "string", "any"


@dataclass(frozen=True)
class AggregateKind:
    """One aggregate kind. Code fields are Python lines with ``{a0}``, ``{a1}`` for the
    accumulator's slots and ``{b0}``, ``{b1}`` for another accumulator's (merge).

    ``add`` sees the value ``v`` (never None: nulls are skipped before it,
    except for ``COUNT_STAR``, which takes no argument) and its order ``t``
    (event time, MIN_TIME without) and ``seq`` (arrival number).
    """

    name: str
    #: Initial value of each accumulator slot.
    create: tuple[str, ...]
    add: tuple[str, ...]
    #: Folds slots ``{b*}`` into ``{a*}``; the result must equal adding the
    #: source's rows after the target's where ``exact_merge`` holds.
    merge: tuple[str, ...]
    result: str
    #: The per-group partial the NumPy path computes: ``count``, ``sum``,
    #: ``min``, ``max``, ``first``, ``last``, ``distinct`` or ``list``.
    partial: str
    #: Per-pane partials combine into any window (prefix sums, range tables).
    panes: bool
    #: Value classes for which merging accumulators built from any split of
    #: the rows equals adding the rows one by one (``ANY``: every value).
    #: Floating SUM/AVG round differently in another order; MIN/MAX over
    #: floats keep the first of ``0.0`` / ``-0.0`` and depend on where a NaN
    #: comes; DECIMAL additions round at the context precision.
    exact_merge: frozenset[str]
    #: Floating-point arguments make the result depend on the order of addition.
    rounds: bool
    #: Result type class: ``BIGINT``, ``ARG`` (the argument's type), ``SUM``,
    #: ``AVG`` or ``ARRAY`` (of the argument's type); the compiler maps it to
    #: Spark's type rules.
    output: str
    #: What the accumulator holds (``wql explain``).
    state: str
    takes_arg: bool = True
    #: ``add`` reads the row's order (``t``, ``seq``).
    ordered: bool = False


def _kinds(*kinds: AggregateKind) -> dict[str, AggregateKind]:
    return {k.name: k for k in kinds}


_SUM_ADD = ("c = {a0}", "{a0} = v if c is None else c + v")
_SUM_MERGE = ("if {b0} is not None:", "    c = {a0}", "    {a0} = {b0} if c is None else c + {b0}")


def _extremum(op: str) -> tuple[tuple[str, ...], tuple[str, ...]]:
    # Python's min(a, b) / max(a, b) keep a unless b is strictly better: so does the merge
    add = ("c = {a0}", f"if c is None or v {op} c: {{a0}} = v")
    merge = (
        "if {b0} is not None:",
        "    c = {a0}",
        f"    if c is None or {{b0}} {op} c: {{a0}} = {{b0}}",
    )
    return add, merge


def _by_order(op: str) -> tuple[tuple[str, ...], tuple[str, ...]]:
    add = ("c = {a0}", f"if c is None or (t, seq) {op} (c[0], c[1]): {{a0}} = (t, seq, v)")
    merge = (
        "c = {a0}",
        f"if c is None or ({{b0}} is not None and {{b0}}[:2] {op} c[:2]): {{a0}} = {{b0}}",
    )
    return add, merge


_MIN, _MAX = _extremum("<"), _extremum(">")
_FIRST, _LAST = _by_order("<"), _by_order(">")

#: The aggregate kinds the runtime implements (the names the compiler maps to).
AGGREGATE_KINDS: dict[str, AggregateKind] = _kinds(
    AggregateKind(
        "COUNT_STAR",
        create=("0",),
        add=("{a0} += 1",),
        merge=("{a0} += {b0}",),
        result="{a0}",
        partial="count",
        panes=True,
        exact_merge=frozenset({ANY}),
        rounds=False,
        output="BIGINT",
        state="count",
        takes_arg=False,
    ),
    AggregateKind(
        "COUNT",
        create=("0",),
        add=("{a0} += 1",),
        merge=("{a0} += {b0}",),
        result="{a0}",
        partial="count",
        panes=True,
        exact_merge=frozenset({ANY}),
        rounds=False,
        output="BIGINT",
        state="count of non-NULL values",
    ),
    AggregateKind(
        "SUM",
        create=("None",),
        add=_SUM_ADD,
        merge=_SUM_MERGE,
        result="{a0}",
        partial="sum",
        panes=True,
        exact_merge=frozenset({INTEGRAL}),
        rounds=True,
        output="SUM",
        state="running sum (NULL until a non-NULL value)",
    ),
    AggregateKind(
        "MIN",
        create=("None",),
        add=_MIN[0],
        merge=_MIN[1],
        result="{a0}",
        partial="min",
        panes=True,
        exact_merge=frozenset({INTEGRAL, STRING}),
        rounds=False,
        output="ARG",
        state="running minimum",
    ),
    AggregateKind(
        "MAX",
        create=("None",),
        add=_MAX[0],
        merge=_MAX[1],
        result="{a0}",
        partial="max",
        panes=True,
        exact_merge=frozenset({INTEGRAL, STRING}),
        rounds=False,
        output="ARG",
        state="running maximum",
    ),
    AggregateKind(
        "AVG",
        create=("None", "0"),
        add=(*_SUM_ADD, "{a1} += 1"),
        merge=(*_SUM_MERGE, "{a1} += {b1}"),
        result="(None if {a1} == 0 else {a0} / {a1})",
        partial="sum",
        panes=True,
        exact_merge=frozenset({INTEGRAL}),
        rounds=True,
        output="AVG",
        state="(sum, count), result sum / count",
    ),
    AggregateKind(
        "COUNT_DISTINCT",
        create=("set()",),
        # NaN != NaN: one canonical NaN, so all NaNs count as one value (Spark)
        add=("{a0}.add(_NAN if v != v else v)",),
        merge=("{a0} |= {b0}",),
        result="len({a0})",
        partial="distinct",
        panes=False,
        exact_merge=frozenset({ANY}),
        rounds=False,
        output="BIGINT",
        state="set of distinct non-NULL values",
    ),
    AggregateKind(
        "FIRST_VALUE",
        create=("None",),
        add=_FIRST[0],
        merge=_FIRST[1],
        result="(None if {a0} is None else {a0}[2])",
        partial="first",
        panes=True,
        exact_merge=frozenset({ANY}),
        rounds=False,
        output="ARG",
        state="(event time, arrival, value) of the earliest row",
        ordered=True,
    ),
    AggregateKind(
        "LAST_VALUE",
        create=("None",),
        add=_LAST[0],
        merge=_LAST[1],
        result="(None if {a0} is None else {a0}[2])",
        partial="last",
        panes=True,
        exact_merge=frozenset({ANY}),
        rounds=False,
        output="ARG",
        state="(event time, arrival, value) of the latest row",
        ordered=True,
    ),
    AggregateKind(
        "COLLECT_LIST",
        create=("[]",),
        add=("{a0}.append((t, seq, v))",),
        # (event time, arrival) order is restored when the result is read
        merge=("{a0}.extend({b0})",),
        result="[x[2] for x in sorted({a0}, key=_order)]",
        partial="list",
        panes=False,
        exact_merge=frozenset({ANY}),
        rounds=False,
        output="ARRAY",
        state="(event time, arrival, value) list, ordered on output",
        ordered=True,
    ),
)

#: Aggregate kind names, in table order.
KINDS = tuple(AGGREGATE_KINDS)


@dataclass(frozen=True)
class AggregateSpec:
    """One aggregate: its kind and the index of its argument in the row's values."""

    kind: str
    arg: int | None = None

    def __post_init__(self) -> None:
        k = AGGREGATE_KINDS.get(self.kind)
        if k is None:
            raise ValueError(f"unknown aggregate {self.kind!r}; expected one of {', '.join(KINDS)}")
        if not k.takes_arg:
            if self.arg is not None:
                raise ValueError(f"{self.kind} takes no argument")
        elif not isinstance(self.arg, int) or self.arg < 0:
            raise ValueError(f"{self.kind} needs the index of its argument column")

    @property
    def info(self) -> AggregateKind:
        return AGGREGATE_KINDS[self.kind]


def _fill(lines: Iterable[str], targets: Sequence[str], sources: Sequence[str] = ()) -> list[str]:
    names = {f"a{i}": t for i, t in enumerate(targets)}
    names.update({f"b{i}": s for i, s in enumerate(sources)})
    return [line.format(**names) for line in lines]


def merge_lines(kind: str, targets: Sequence[str], sources: Sequence[str]) -> list[str]:
    """``kind``'s merge of the slots ``sources`` into ``targets`` as code lines.

    ``sources`` must be names or other side-effect-free expressions (they
    may be read several times).
    """
    return _fill(AGGREGATE_KINDS[kind].merge, targets, sources)


def result_expression(kind: str, slots: Sequence[str]) -> str:
    """``kind``'s result from the slots ``slots`` as an expression (needs ``_order`` in scope)."""
    return AGGREGATE_KINDS[kind].result.format(**{f"a{i}": s for i, s in enumerate(slots)})


def _compile(src: str, name: str, namespace: dict[str, Any] | None = None) -> Any:
    ns: dict[str, Any] = {"_NAN": _NAN, "_order": order_key, **(namespace or {})}
    exec(compile(src, f"<wql.runtime.aggregates.{name}>", "exec"), ns)  # noqa: S102
    return ns[name]


#: The compiled functions of each tuple of specs a process has built an
#: :class:`Aggregator` for. They are pure (their namespace holds constants only), so
#: every operator of the same aggregates shares them: a stream processor builds its
#: operators per call (docs/benchmarks.md, "Operators built per call"), and compiling
#: them cost ~0.3 ms each time. Cleared when it holds :data:`_COMPILED_MAX` tuples.
_COMPILED: dict[tuple[AggregateSpec, ...], tuple[Any, ...]] = {}
_COMPILED_MAX = 256


class Aggregator:
    """The compiled form of a tuple of :class:`AggregateSpec` (compiled once per process
    for each tuple of specs: :data:`_COMPILED`)."""

    def __init__(self, specs: Iterable[AggregateSpec]) -> None:
        self.specs = tuple(specs)
        #: The first accumulator slot of each spec (an accumulator is a flat list).
        self.slots: list[int] = []
        n = 0
        for spec in self.specs:
            self.slots.append(n)
            n += len(spec.info.create)
        self.width = n
        compiled = _COMPILED.get(self.specs)
        if compiled is None:
            compiled = (
                self._compile_create(),
                self._compile_add(),
                self._compile_merge(many=False),
                self._compile_merge(many=True),
                self._compile_result(),
            )
            if len(_COMPILED) >= _COMPILED_MAX:
                _COMPILED.clear()
            _COMPILED[self.specs] = compiled
        self.create: Callable[[], list] = compiled[0]
        self.add: Callable[[list, int | None, int, tuple], None] = compiled[1]
        #: ``merge(target, source)``: fold ``source`` into ``target`` (a session
        #: merge; ``source`` is dropped after).
        self.merge: Callable[[list, list], None] = compiled[2]
        #: ``merge_all(target, sources)``: ``merge`` of every source, in order.
        self.merge_all: Callable[[list, Iterable[list]], None] = compiled[3]
        #: ``result(acc)``: the aggregate values, in spec order.
        self.result: Callable[[list], tuple] = compiled[4]

    def slot_names(self, j: int, acc: str = "acc") -> list[str]:
        """Spec ``j``'s accumulator slots as expressions over the accumulator ``acc``."""
        s = self.slots[j]
        return [f"{acc}[{s + i}]" for i in range(len(self.specs[j].info.create))]

    # -- code generation ---------------------------------------------------

    def _compile_create(self) -> Callable[[], list]:
        parts = [init for spec in self.specs for init in spec.info.create]
        return _compile(f"def create():\n    return [{', '.join(parts)}]\n", "create")

    def _compile_add(self) -> Callable[[list, int | None, int, tuple], None]:
        lines = ["def add(acc, ts, seq, values):"]
        if any(spec.info.ordered for spec in self.specs):
            lines.append(f"    t = {MIN_TIME} if ts is None else ts")
        for j, spec in enumerate(self.specs):
            code = _fill(spec.info.add, self.slot_names(j))
            if not spec.info.takes_arg:
                lines += [f"    {c}" for c in code]
                continue
            lines.append(f"    v = values[{spec.arg}]")
            lines.append("    if v is not None:")
            lines += [f"        {c}" for c in code]
        if len(lines) == 1:
            lines.append("    return None")
        return _compile("\n".join(lines) + "\n", "add")

    def _compile_merge(self, many: bool) -> Any:
        name = "merge_all" if many else "merge"
        lines = [f"def {name}(acc, {'parts' if many else 'p'}):"]
        indent = "    "
        if many:
            lines.append("    for p in parts:")
            indent = "        "
        for j in range(len(self.specs)):
            targets = self.slot_names(j)
            sources = self.slot_names(j, "p")
            names = [f"b{i}" for i in range(len(sources))]
            lines += [f"{indent}{b} = {s}" for b, s in zip(names, sources, strict=True)]
            lines += [f"{indent}{c}" for c in merge_lines(self.specs[j].kind, targets, names)]
        if len(lines) == (2 if many else 1):
            lines.append(f"{indent}pass")
        return _compile("\n".join(lines) + "\n", name)

    def _compile_result(self) -> Callable[[list], tuple]:
        parts = [
            result_expression(spec.kind, self.slot_names(j)) for j, spec in enumerate(self.specs)
        ]
        src = f"def result(acc):\n    return ({''.join(p + ', ' for p in parts)})\n"
        return _compile(src, "result")

    # -- the rest is not per row -------------------------------------------

    def after_restore(self, acc: list) -> None:
        """Re-establish invariants a snapshot cannot carry: NaNs unpickle as new objects."""
        for spec, s in zip(self.specs, self.slots, strict=True):
            if spec.kind == "COUNT_DISTINCT" and any(v != v for v in acc[s]):
                acc[s] = {v for v in acc[s] if v == v} | {_NAN}

    def result_of_rows(self, rows: Iterable[tuple[int | None, int, tuple]]) -> tuple:
        """The aggregates over buffered rows (evictor windows), same semantics as ``add``."""
        acc = self.create()
        add = self.add
        for ts, seq, values in rows:
            add(acc, ts, seq, values)
        return self.result(acc)


def order_key(entry: tuple) -> tuple:
    """The (event time, arrival) order of ``(t, seq, value)`` entries (COLLECT_LIST, FIRST/LAST)."""
    return entry[0], entry[1]
