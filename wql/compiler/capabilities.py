"""What the native Spark backend can run exactly, declared as data.

The planner (``planner.py``) reads :data:`NATIVE` to decide whether a query
may run on Spark's own operators; the native backend
(``backends/native.py``) implements exactly this set. A construct missing
here runs on the operator engine, and the planner says which clause needed
it. Add a construct only together with the backend code and the
conformance test that proves native == operator for it.

Each ``why_not`` entry explains, for the explain output, why a construct is
excluded: the reasons are the Spark facts that make its result differ from
Flink's WindowOperator (``/work/shared/notes/spark-facts.md``,
``docs/native.md``).
"""

from __future__ import annotations

from dataclasses import dataclass

from wql.compiler.plan import AggKind


@dataclass(frozen=True)
class Capabilities:
    """A backend's declared abilities."""

    name: str
    windows: frozenset[str]
    """Window kinds (``Window.kind``) on event time."""
    processing_time: bool
    """Whether processing-time windows run (they depend on wall-clock arrival)."""
    dynamic_session_gap: bool
    aggregates: frozenset[AggKind]
    triggers: frozenset[str]
    """Trigger node class names it honours (only the window's default firing)."""
    evictors: bool
    allowed_lateness: bool
    late_output: bool
    pane_columns: frozenset[str]
    """Pane columns it can produce (constant per window when only final output exists)."""
    arrival_order: bool
    """Whether a replay order other than event-time order can run."""
    zero_delay_keyed_sessions: bool = True
    """Whether keyed SESSION windows with a watermark delay of 0 run exactly."""
    reserved_prefix: str = ""
    """Source columns may not start with this prefix (the backend's own columns)."""
    why_not: tuple[tuple[str, str], ...] = ()

    def reason(self, construct: str) -> str:
        return dict(self.why_not).get(construct, "")


NATIVE = Capabilities(
    name="native",
    windows=frozenset({"TUMBLE", "HOP", "SESSION", "CUMULATE"}),
    processing_time=False,
    # exact: rows whose gap is <= 0 or NULL are filtered explicitly and counted
    # (docs/native.md, difference 2), never dropped silently by session_window
    dynamic_session_gap=True,
    aggregates=frozenset(
        {
            AggKind.COUNT_STAR,
            AggKind.COUNT,
            AggKind.SUM,
            AggKind.MIN,
            AggKind.MAX,
            AggKind.AVG,
            AggKind.COUNT_DISTINCT,
        }
    ),
    triggers=frozenset({"WatermarkTrigger"}),
    evictors=False,
    allowed_lateness=False,
    late_output=False,
    pane_columns=frozenset({"pane_index", "pane_timing"}),
    arrival_order=False,
    zero_delay_keyed_sessions=False,
    reserved_prefix="__wql_",
    why_not=(
        (
            "processing_time",
            "Spark's native windows group by a column value, not by the wall clock of arrival",
        ),
        (
            "COUNT_WINDOW",
            "Spark has no count windows",
        ),
        (
            "GLOBAL",
            "Spark has no global windows with triggers",
        ),
        (
            "FIRST_VALUE",
            "Spark's groupBy does not order rows by event time then arrival",
        ),
        (
            "LAST_VALUE",
            "Spark's groupBy does not order rows by event time then arrival",
        ),
        (
            "COLLECT_LIST",
            "Spark's collect_list order depends on partitioning, not event time then arrival",
        ),
        (
            "zero_delay_keyed_sessions",
            "with a zero watermark delay a row at exactly a session's end can find that session "
            "already fired by another key's row (the watermark is global) and start a new one, "
            "while Spark merges touching sessions (docs/native.md)",
        ),
        (
            "reserved_prefix",
            "the native backend reserves the column prefix __wql_ for its own columns",
        ),
        ("trigger", "Spark emits each window once, at the watermark; it has no triggers"),
        ("evictor", "Spark aggregates have no evictors"),
        ("allowed_lateness", "Spark has no allowed lateness with late re-firings"),
        ("late_output", "Spark has no late side output"),
        (
            "arrival_order",
            "replaying rows out of event-time order makes some rows late, which Spark's "
            "batch aggregation would still count",
        ),
    ),
)
