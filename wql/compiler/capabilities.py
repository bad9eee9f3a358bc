"""What the native Spark backend can run exactly, in batch and on streams, declared as data.

The planner (``planner.py``) reads :data:`NATIVE` (a batch DataFrame) or
:data:`NATIVE_STREAMING` (a streaming one) to decide whether a query may run
on Spark's own operators; the native backend (``backends/native.py``)
checks the same declaration before it lowers a query. A construct missing
here runs on the operator engine, and the planner says which clause needed
it. Add a construct only together with the backend code and the
conformance test that proves native == operator for it (on streams: the
same late-row stream on both engines, rows and counters).

Each ``why_not`` entry explains, for the explain output, why a construct is
excluded: the reasons are the Spark facts that make its result differ from
Flink's WindowOperator (``docs/native.md`` has the measurements).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

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
    """Whether a replay order other than event-time order (``arrival_order``) can run:
    each row's watermark from the rows before it in that order, and rows late for a
    window left out of it and counted (TUMBLE, HOP and CUMULATE; docs/native.md)."""
    zero_delay_keyed_sessions: bool = True
    """Whether keyed SESSION windows with a watermark delay of 0 run exactly."""
    reserved_prefix: str = ""
    """Source columns may not start with this prefix (the backend's own columns)."""
    keyless_sessions: bool = True
    """Whether SESSION windows without GROUP BY keys run."""
    float_sums: bool = True
    """Whether floating-point SUM/AVG run (folded in replay order, docs/native.md #11)."""
    changelog: bool = False
    """Whether EMIT CHANGELOG runs (retractions need each window's last row)."""
    idle_sources: bool = False
    """Whether a watermark with IDLE AFTER runs (it advances with processing time)."""
    late_rows: bool = True
    """Whether rows behind the watermark get the operator engine's outcome: counted as
    late (or sent to the late output), never added to a window that already fired."""
    window_rank: bool = True
    """Whether a window Top-N or deduplication runs (Spark's row_number over each window)."""
    window_join: bool = True
    """Whether a window join runs (Spark's join of both sides' rows of each window)."""
    over_aggregate: bool = True
    """Whether an OVER aggregation runs (Spark's window functions over the rows)."""
    streaming: bool = False
    """These are the abilities on a streaming DataFrame (reasons then say so)."""
    why_not: tuple[tuple[str, str], ...] = ()

    def reason(self, construct: str) -> str:
        return dict(self.why_not).get(construct, "")


NATIVE = Capabilities(
    name="native",
    windows=frozenset({"TUMBLE", "HOP", "SESSION", "CUMULATE"}),
    # from a declared processing_time column, replayed (docs/native.md, "Processing time")
    processing_time=True,
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
    # each window fires once, ON_TIME, by the timer that also cleans it up
    # (lateness 0): pane_index 0, 'ON_TIME', is_first and is_last TRUE
    pane_columns=frozenset({"pane_index", "pane_timing", "is_first", "is_last"}),
    arrival_order=True,
    zero_delay_keyed_sessions=False,
    reserved_prefix="__wql_",
    why_not=(
        (
            "processing_time",
            "Spark's native windows group by a column value, not by the wall clock of arrival "
            "(a declared processing_time column of TIMESTAMPs or integer ms is a clock batch "
            "replay computes natively)",
        ),
        (
            "processing_sessions",
            "processing-time sessions merge as the clock moves, and a session the clock has "
            "passed fires before a touching one starts, which Spark's session_window merges",
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
        (
            "finishing_trigger",
            "Spark has no triggers, and no window that closes when its trigger finishes (the "
            "operator engine drops and counts the rows such a window refuses, 'closed window')",
        ),
        (
            "changelog",
            "Spark's aggregation emits insert-only rows and keeps no emitted row to retract",
        ),
        (
            "idle_sources",
            "Spark's watermark moves only with the event times of rows, never with processing time",
        ),
        ("evictor", "Spark aggregates have no evictors"),
        ("allowed_lateness", "Spark has no allowed lateness with late re-firings"),
        ("late_output", "Spark has no late side output"),
        (
            "arrival_order",
            "replaying rows out of event-time order makes some rows late, which Spark's "
            "batch aggregation would still count",
        ),
        (
            "arrival_sessions",
            "replayed out of event-time order, whether a row is late for a session depends "
            "on the sessions it merges with when it arrives, which Spark's session_window "
            "does not replay",
        ),
        (
            "join_arrival_order",
            "replaying rows out of event-time order makes some rows late (a window that "
            "has joined drops them), which Spark's join would still join",
        ),
        (
            "operator_view",
            "the view runs on the operator engine; only the output of a native view is "
            "every window's one ON_TIME row, none of which is late downstream",
        ),
        (
            "rank_view_keys",
            "equal rows of a window rank in the order the view fires them, by the view's "
            "grouping keys, which the view must select for Spark's row_number to follow",
        ),
        (
            "rank_session_table",
            "a SESSION table's rows get their session's bounds only when it closes "
            "(sessions merge as rows arrive), which a per-row Spark window does not give",
        ),
        (
            "rank_view_table",
            "the rows of a window table over a view come in the view's firing order, "
            "which Spark's row_number does not follow",
        ),
        (
            "view_keyed_sessions",
            "a view's rows come with no watermark delay: a row at exactly a session's end can "
            "find that session already fired (by the watermark rise that fired the row's own "
            "window for another key) and start a new one, while Spark merges touching sessions",
        ),
        (
            "over_arrival_order",
            "replaying rows out of event-time order makes some rows late for the OVER "
            "aggregation (dropped or sent to the late output), which Spark's window "
            "functions would still aggregate",
        ),
        (
            "over_aggregate_kind",
            "the native OVER aggregation runs COUNT, SUM, MIN, MAX and AVG (Spark has no "
            "DISTINCT window functions)",
        ),
        (
            "over_float_sums",
            "a RANGE frame holds the rows of equal event time in an order Spark's sort does "
            "not fix, and a floating-point sum depends on the order of addition",
        ),
        (
            "over_late_output",
            "LATE DATA TO names an output Spark's window functions do not produce",
        ),
        (
            "view_float_sums",
            "a floating-point sum over a view adds the view's rows in the order they fire, "
            "which Spark's aggregation does not keep",
        ),
    ),
)


NATIVE_STREAMING = replace(
    NATIVE,
    name="native (stream)",
    # measured on Spark 4 (docs/native.md, "Streaming"): Spark refuses these on streams
    windows=NATIVE.windows - {"CUMULATE"},
    aggregates=NATIVE.aggregates - {AggKind.COUNT_DISTINCT},
    keyless_sessions=False,
    float_sums=False,
    # the reason no query runs natively on a stream: a stream can always bring
    # rows behind the watermark, and Spark's streaming aggregation does not
    # give them the operator engine's outcome (docs/native.md, "Streaming")
    late_rows=False,
    # a stream has no declared replay order: its rows arrive as they come, on the wall clock
    arrival_order=False,
    processing_time=False,
    window_rank=False,
    window_join=False,
    over_aggregate=False,
    streaming=True,
    why_not=(
        *NATIVE.why_not,
        (
            "processing_time",
            "Spark's native windows group by a column value, not by the wall clock of arrival",
        ),
        (
            "CUMULATE",
            "Spark streams an aggregation in append mode only when it groups by a window of "
            "the watermarked column, and CUMULATE's windows are computed rows (Spark: "
            "STREAMING_OUTPUT_MODE.UNSUPPORTED_OPERATION)",
        ),
        (
            "COUNT_DISTINCT",
            "Spark rejects distinct aggregations on streaming DataFrames",
        ),
        (
            "keyless_sessions",
            "Spark rejects a session window without grouping keys on a stream (global "
            "aggregation with session window)",
        ),
        (
            "float_sums",
            "the native backend adds floating-point numbers in replay order with "
            "monotonically_increasing_id(), which Spark rejects on streaming DataFrames",
        ),
        (
            "window_rank",
            "Spark refuses row_number (a window function that is not a time window) on "
            "streaming DataFrames",
        ),
        (
            "over_aggregate",
            "Spark refuses window functions that are not time windows (OVER) on streaming "
            "DataFrames",
        ),
        (
            "window_join",
            "Spark's stream-stream join emits matches as rows arrive (not once per window "
            "when the watermark passes its end) and drops rows behind its watermark without "
            "counting them",
        ),
        (
            "late_rows",
            "Spark's streaming aggregation drops rows behind the previous micro-batch's "
            "watermark without counting them and adds a row one micro-batch behind to the "
            "window it emits, where the operator engine counts both as late (or sends them "
            "to LATE DATA TO)",
        ),
    ),
)


def native_capabilities(streaming: bool) -> Capabilities:
    """The native backend's abilities on a streaming (True) or batch (False) DataFrame."""
    return NATIVE_STREAMING if streaming else NATIVE
