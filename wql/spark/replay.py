"""Batch replay: turn a static DataFrame into the stream the operator engine sees
(docs/architecture.md, "Contract: batch replay on Spark").

A batch source has no arrival order of its own, so WQL defines one and
computes, for every row, the global watermark that row sees:

* **replay order** — the declared ``arrival_order`` column when there is one;
  otherwise event time; otherwise (no event time) the declared
  ``processing_time`` column; otherwise input order alone. Ties are always
  broken by *input order*.
* **input order** — ``(input_file_name(), monotonically_increasing_id())``
  taken on the DataFrame as given. For file sources that is "file path, then
  position in the file": Spark packs file splits into partitions by size
  (and the split size depends on the core count), so the partition-based id
  alone would not be stable, but the splits of *one* file always keep their
  offset order, so (path, id) is. For in-memory DataFrames
  (``createDataFrame``) the path is empty and the id follows the list order.
  A DataFrame whose rows pass through a shuffle before reaching WQL has no
  inherent order; its input order is whatever its partitions hold, so
  declare ``arrival_order`` when ties matter.
* **watermark_before** — ``max(ts of the rows before it in replay order) −
  delay − 1`` (Flink's BoundedOutOfOrderness, emitted after every row), or
  ``MIN_TIME`` for the first row. Rows that carry no event time do not move
  it.
* **processing time** — when the source declares a ``processing_time``
  column, the processing clock a row sees is the running maximum of that
  column up to and including the row (a clock never goes back, and it is one
  global clock across keys, like the watermark).
* **idle sources** (``WATERMARK ... IDLE AFTER i`` with a ``processing_time``
  column): a row whose clock ``p`` is at least ``i`` after the previous
  row's ``p'`` arrives after an idle spell, during which the watermark
  advanced with processing time: it sees at least
  ``max(ts of the rows before it) + (p - p') - delay - 1``; the watermark
  never goes back (a running maximum). Without a ``processing_time`` column
  the clause changes nothing: a batch has no gaps between arrivals to
  measure, and end of input closes every window anyway. Computed by the
  window strategy (it needs each row's gap to the previous arrival in
  replay order).

Two strategies compute the same columns (tests check they agree):

* :data:`STRATEGY_WINDOW` — two unpartitioned SQL window functions (running
  maximum, row number) over the replay order: one statistics job, then
  every row through ONE task. Fewest jobs; on a single machine the fastest
  up to millions of rows, but it cannot use more than one core.
* :data:`STRATEGY_BUCKETED` — the scalable one: approximate quantiles of
  the primary order column cut the replay into up to :data:`MAX_BUCKETS`
  consecutive *buckets* (ties never straddle a boundary); one aggregation
  job gives per bucket its row count and clock maxima; the driver turns
  them into per-bucket offsets and prefix maxima (a few numbers); the same
  window functions then run *partitioned by bucket*, each bucket's first row
  starting from its prefix. No step puts all rows in one task.
A third, :data:`STRATEGY_SUMMARY`, numbers nothing: it leaves the
watermarks to the caller's own tasks (``replay(..., in_task=True)``; the
batch host's key partitions), which compute them from a compact global
summary. It applies when the watermark is the only clock (no
``processing_time`` column, hence no idle rule) and the replay order is
event time, or an ``arrival_order`` column of integers or timestamps.

*Event-time order* (:class:`TimestampSummary`). In the order ``(ts, input
order)`` the rows before a row are every row with a smaller event time and
the rows with the *same* event time earlier in input order, so

    watermark_before = ts - delay - 1          if an earlier row (input order) has ts
                     = P(ts) - delay - 1        otherwise (the first row of its ts)

where ``P(ts)`` is the largest distinct event time below ``ts`` in the whole
input (``MIN_TIME`` when there is none). Two narrow jobs build the summary:
the statistics (rows by drop reason, and each file's id range per input
partition, which ranks any id's file) and the replayed rows' event time and
id, collected as two int64 columns; NumPy then sorts them by (time, file
rank, id) and keeps the sorted distinct event times and, per time, the id of
its first row (``monotonically_increasing_id`` is unique across the
DataFrame, so the id alone names the row).

*Arrival order* (:class:`ArrivalSummary`). In the order ``(arrival, input
order)`` the maximum event time before a row is a step function that rises
only at *records*, the rows whose event time exceeds that of every row
before them (a tie is no record), so

    watermark_before = ts(last record strictly before the row) - delay - 1

(``MIN_TIME`` when there is none; a record sees the previous record's time,
not its own). The statistics job's id ranges lay the runs (one file's rows
in one input partition) end to end in input order, which gives every id a
dense input position; the second job collects the replayed rows' arrival,
event time and id (three int64 a row), NumPy sorts them by (arrival,
position) and keeps the records' arrival, position and event time. A row's
records-before count is one binary search over the records' keys ``(index
of the arrival among the records' arrivals) * span + position``, after one
over the records' arrivals (int64 throughout).

Any task that holds a row, its order columns and its id computes its
watermark with a binary search, in any order and any partition. It applies
only where every job numbers the rows alike (:func:`stable_input_order`);
where a file's rows in a partition are not one run of ids it falls back to
the window strategy. Its ``df`` holds no ``__wql_seq`` and no ``__wql_wm``:
the caller sorts each partition by :attr:`Replay.order` (event time or
arrival, then input order) and calls the summary's ``watermarks_of``.

:data:`STRATEGY_LOCAL` computes no global clock at all: for a plan whose
output does not depend on the watermark sequence
(:mod:`wql.compiler.clock_dependence`) each task advances the watermark on
its own rows (:class:`LocalClock`), sorted in replay order (event time or, with no
event time, arrival; then input order, the file only where there are
several). It runs no job: the counts (rows by drop reason, the largest
event time) are observed (``DataFrame.observe``) while the caller's job
reads ``df``; :meth:`Replay.settle` reads them afterwards. The batch host
chooses it (docs/running.md, "Plans that do not depend on the watermark
sequence").

:data:`STRATEGY_AUTO` (the default) takes the summary strategy when the
caller computes watermarks in its tasks, the :class:`ReplaySpec` allows it and the input
has at most :data:`SUMMARY_MAX_ROWS` replayed rows; otherwise
it runs the window strategy's statistics job and keeps that strategy up to
:data:`AUTO_WINDOW_MAX_ROWS` replayed rows, else switches to the bucketed
one. ``docs/running.md`` has the measurements.

Rows whose event time is NULL (or unparseable text) are not replayed: they
are counted under :data:`REASON_NULL_EVENT_TIME` and available to the caller
as :attr:`Replay.dropped`. Likewise a NULL in the declared processing-time
or arrival-order column. Nothing is lost silently.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pyarrow as pa
from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F
from pyspark.sql import types as T

from wql.compiler.backends.escaping import sql_identifier
from wql.errors import ErrorCode, WqlSemanticError, WqlUnsupportedError
from wql.runtime.watermarks import bounded_watermark
from wql.runtime.windows import MIN_TIME

#: Columns the replay adds; source columns may not use the prefix.
RESERVED_PREFIX = "__wql_"
SEQ = "__wql_seq"
TS = "__wql_ts"
WM = "__wql_wm"
PT = "__wql_pt"
INPUT_FILE = "__wql_file"
INPUT_ID = "__wql_id"
INPUT_RANK = "__wql_file_rank"
ARRIVAL = "__wql_arrival"
_DROP = "__wql_drop"
_BUCKET = "__wql_bucket"
_IDLE_WM = "__wql_idle_wm"

REASON_NULL_EVENT_TIME = "null event time"
REASON_NULL_PROCESSING_TIME = "null processing time"
REASON_NULL_ARRIVAL_ORDER = "null arrival order"
_REASONS = (REASON_NULL_EVENT_TIME, REASON_NULL_PROCESSING_TIME, REASON_NULL_ARRIVAL_ORDER)

STRATEGY_AUTO = "auto"
STRATEGY_BUCKETED = "bucketed"
STRATEGY_WINDOW = "window"
STRATEGY_SUMMARY = "summary"
STRATEGY_LOCAL = "local"

#: ``auto`` replays at most this many rows with the single-task window strategy
#: (fewest jobs; fastest on one machine, see docs/running.md), more with ``bucketed``.
AUTO_WINDOW_MAX_ROWS = 2_000_000

#: Upper bound on the number of replay buckets (range slices of the replay order).
MAX_BUCKETS = 64

#: ``auto`` uses the summary strategy up to this many replayed rows (their event
#: times and ids, two int64 a row, and in arrival order their arrivals too, are
#: collected to the driver once; the summary, two int64 a distinct event time or
#: three a record row, is shipped to every task).
SUMMARY_MAX_ROWS = 4_000_000

#: Up to this many input files a summary replay sorts by the file's rank, not its path.
MAX_RANKED_FILES = 64


@dataclass(frozen=True)
class ReplaySpec:
    """What to replay.

    Attributes:
        event_time: the event-time column (TIMESTAMP; DATE and TIMESTAMP_NTZ
            are read as UTC, strings are parsed and unparseable text counts as
            NULL), or ``None`` when the query has no event time.
        delay_ms: the watermark's bounded out-of-orderness.
        arrival_order: column whose order is the replay order, or ``None``.
        processing_time: column holding each row's processing time
            (TIMESTAMP or epoch ms), or ``None`` (the host then uses the wall clock).
        idle_ms: the source's idle timeout (``IDLE AFTER``); applies with a
            ``processing_time`` column only.
    """

    event_time: str | None
    delay_ms: int = 0
    arrival_order: str | None = None
    processing_time: str | None = None
    idle_ms: int | None = None

    @property
    def idle(self) -> bool:
        """The idle rule applies: an idle timeout, event time and a processing clock."""
        return bool(self.idle_ms and self.event_time and self.processing_time)

    def __post_init__(self) -> None:
        if self.delay_ms < 0:
            raise WqlSemanticError(
                f"watermark delay must be >= 0, got {self.delay_ms} ms", code=ErrorCode.OUT_OF_RANGE
            )


@dataclass
class Replay:
    """A replayed source.

    ``df`` holds the source's columns plus ``__wql_seq`` (BIGINT, the replay
    position: strictly increasing in replay order, with gaps where rows were
    dropped), ``__wql_ts`` (event time, BIGINT ms, or NULL when the query
    has no event time), ``__wql_wm`` (the watermark before the row) and
    ``__wql_pt`` (processing time in ms, NULL without a processing-time
    column). A summary replay (:attr:`summary` set) has no ``__wql_seq``
    and no ``__wql_wm``; its rows carry their replay order instead
    (:attr:`order`: event time or ``__wql_arrival``, then input order), and
    the summary's ``watermarks_of`` gives each row's watermark. Call
    :meth:`release` when done with it.
    """

    df: DataFrame
    #: The source rows that were not replayed, with a ``reason`` column.
    dropped: DataFrame
    rows_in: int
    dropped_counts: dict[str, int]
    #: Largest event time / processing time among the replayed rows (None: none).
    max_ts: int | None = None
    max_pt: int | None = None
    _persisted: list[DataFrame] = field(default_factory=list, repr=False)
    #: Set by the summary strategy: the rows' watermarks are computed where they are read.
    summary: ReplaySummary | None = None
    #: The local strategy's counts, observed while the caller's job reads ``df``, and
    #: the staged source to count again where Spark reports no observed metrics.
    _observation: Any = field(default=None, repr=False)
    _staged: DataFrame | None = field(default=None, repr=False)

    @property
    def order(self) -> list[str]:
        """The columns that sort ``df`` in replay order (within any subset of its rows)."""
        return list(self.summary.order) if self.summary is not None else [SEQ]

    @property
    def local_order(self) -> tuple[str, ...] | None:
        """A local replay's order (:class:`LocalClock`), else ``None``."""
        return self.summary.order if isinstance(self.summary, LocalClock) else None

    @property
    def settled(self) -> bool:
        """The counts are known (always, except for a local replay before a job read it)."""
        return self._observation is None

    def settle(self) -> None:
        """A local replay's counts (``rows_in``, drops, ``max_ts``), once a job has read ``df``.

        They are observed (``DataFrame.observe``) as the caller's own job reads
        the rows, so the local strategy runs no job of its own.
        """
        if self._observation is None:
            return
        metrics: dict[str, Any] | None
        try:
            metrics = self._observation.get.asDict()
            int(metrics["rows"])
        except Exception:
            # Spark reports no metrics when adaptive execution replaced the observed
            # stage by an empty relation (no row left after the drops): count them
            metrics = None
        self._observation = None
        if metrics is None:
            assert self._staged is not None
            metrics = _count_staged(self._staged)
        self.rows_in = int(metrics["rows"])
        self.dropped_counts = {
            reason: int(metrics[f"dropped_{i}"])
            for i, reason in enumerate(_REASONS)
            if metrics[f"dropped_{i}"]
        }
        self.max_ts = None if metrics["max_ts"] is None else int(metrics["max_ts"])

    @property
    def rows_replayed(self) -> int:
        return self.rows_in - sum(self.dropped_counts.values())

    def release(self) -> None:
        """Free the cached sort this replay holds."""
        for df in self._persisted:
            df.unpersist()
        self._persisted.clear()


@dataclass(frozen=True)
class TimestampSummary:
    """What any task needs to give a row its watermark in event-time replay order.

    ``times`` are the distinct event times of the replayed rows, ascending;
    ``first[i]`` is the input-order id (``__wql_id``) of the first row, in
    input order, whose event time is ``times[i]`` (module docstring, summary
    strategy).
    """

    times: np.ndarray
    first: np.ndarray
    delay_ms: int
    #: the columns that sort the replay's rows in replay order: event time, then
    #: input order (the file's rank or path, left out for one file; the id)
    order: tuple[str, ...] = (TS, INPUT_FILE, INPUT_ID)

    def watermarks(self, ts: np.ndarray, ids: np.ndarray) -> np.ndarray:
        """The watermark before each row of event time ``ts`` and input-order id ``ids``."""
        if len(ts) == 0:
            return np.empty(0, dtype=np.int64)
        at = np.searchsorted(self.times, ts)
        # the largest distinct time below ts; MIN_TIME for the smallest one
        below = np.where(at > 0, self.times[np.maximum(at - 1, 0)], MIN_TIME)
        return _minus_delay(np.where(ids == self.first[at], below, ts), self.delay_ms)

    def watermarks_of(self, batch: pa.RecordBatch) -> np.ndarray:
        """:meth:`watermarks` of a batch of the replay's rows (its event time and id columns)."""
        ts = batch.column(TS).to_numpy(zero_copy_only=False).astype(np.int64)
        return self.watermarks(ts, batch.column(INPUT_ID).to_numpy(zero_copy_only=False))


@dataclass(frozen=True)
class ArrivalSummary:
    """What any task needs to give a row its watermark in arrival replay order.

    In the order ``(arrival, input order)`` the maximum event time of the rows
    before a row changes only at *records*: rows whose event time exceeds that
    of every row before them. So a row's watermark is the event time of the
    last record strictly before it, less the delay (``MIN_TIME`` when none).

    Input order is a dense *position*: the id runs (one file's rows in one input
    partition) laid end to end by (file rank, first id); ``run_lo`` are the
    runs' first ids, ascending, and ``run_pos`` their positions, so a row's
    position is ``run_pos[j] + id - run_lo[j]`` for the last run ``j`` starting
    at or below its id. ``arrivals`` are the records' distinct arrival values,
    ascending; ``keys`` each record's ``index of its arrival * span + position``
    (ascending: replay order) and ``times`` its event time (ascending).
    """

    arrivals: np.ndarray
    keys: np.ndarray
    times: np.ndarray
    run_lo: np.ndarray
    run_pos: np.ndarray
    #: more than the largest position: the multiplier that keeps the keys in order
    span: int
    delay_ms: int
    #: the columns that sort the replay's rows in replay order: arrival, then input order
    order: tuple[str, ...] = (ARRIVAL, INPUT_FILE, INPUT_ID)

    def positions(self, ids: np.ndarray) -> np.ndarray:
        """The input-order position of each row id."""
        run = np.searchsorted(self.run_lo, ids, side="right") - 1
        return self.run_pos[run] + (ids - self.run_lo[run])

    def watermarks(self, arrival: np.ndarray, ids: np.ndarray) -> np.ndarray:
        """The watermark before each row of arrival value ``arrival`` and input-order id ``ids``."""
        if len(self.times) == 0:  # no replayed rows at all
            return np.full(len(ids), MIN_TIME, dtype=np.int64)
        below = np.searchsorted(self.arrivals, arrival)
        same = self.arrivals[np.minimum(below, len(self.arrivals) - 1)] == arrival
        # with no record of its arrival, the records before a row are those arriving
        # earlier (key < below * span); with one, also those of its arrival earlier in
        # input order (a record never counts itself: its key equals the row's)
        key = below * np.int64(self.span) + np.where(same, self.positions(ids), 0)
        at = np.searchsorted(self.keys, key)
        before = np.where(at > 0, self.times[np.maximum(at - 1, 0)], MIN_TIME)
        return _minus_delay(before, self.delay_ms)

    def watermarks_of(self, batch: pa.RecordBatch) -> np.ndarray:
        """:meth:`watermarks` of a batch of the replay's rows (its arrival and id columns)."""
        arrival = batch.column(ARRIVAL).to_numpy(zero_copy_only=False).astype(np.int64)
        return self.watermarks(arrival, batch.column(INPUT_ID).to_numpy(zero_copy_only=False))


@dataclass(frozen=True)
class LocalClock:
    """The local strategy's summary: nothing global at all.

    For a plan whose output does not depend on the watermark sequence
    (:mod:`wql.compiler.clock_dependence`) each task advances the watermark on
    its own rows, sorted by :attr:`order` (event time, or arrival where there
    is no event time, then input order): a row sees the largest event time of
    the rows before it *in its partition*, less ``delay + 1``
    (:func:`watermarks_before`, carried across the task's batches).
    """

    delay_ms: int
    order: tuple[str, ...]


#: A summary replay's summary: what its rows' tasks compute their watermarks from.
ReplaySummary = TimestampSummary | ArrivalSummary | LocalClock


def _minus_delay(before: np.ndarray, delay_ms: int) -> np.ndarray:
    """The watermark after ``before`` per row (:func:`bounded_watermark`)."""
    return np.asarray(bounded_watermark(before, delay_ms, np.where), dtype=np.int64)


def _spark_where(cond: Column, yes: int, no: Column) -> Column:
    """``numpy.where`` for Spark columns (what :func:`bounded_watermark` chooses with)."""
    return F.when(cond, F.lit(yes)).otherwise(no)


def summary_applies(spec: ReplaySpec) -> bool:
    """Whether the summary strategy can replay ``spec``: event time is the only clock.

    The replay order is event time or the ``arrival_order`` column (which must
    also be an integer or a TIMESTAMP: :func:`replay` checks the column).
    """
    return bool(spec.event_time) and spec.processing_time is None


def stable_input_order(df: DataFrame) -> bool:
    """Whether every job that reads ``df`` sees the same input order (ids).

    True when its physical plan has no exchange: a scan of files or of local
    data numbers its rows the same way whichever columns a job reads. Rows
    that come out of a shuffle arrive in fetch order (and a round-robin
    repartition's order can change with the columns a job prunes), so two
    jobs may number them differently; the summary strategy, whose tasks
    recognise each time's first row by the id the summary job saw, then
    does not apply. False when the plan cannot be inspected.
    """
    try:
        plan = str(df._jdf.queryExecution().executedPlan().toString())  # type: ignore[operator]
    except Exception:  # no JVM plan to read (e.g. a Spark Connect session)
        return False
    return "Exchange" not in plan


def event_time_millis(df: DataFrame, column: str) -> Column:
    """``column`` as epoch milliseconds (BIGINT), floored; NULL when absent or unparseable."""
    dtype = _field(df, column).dataType
    col = F.col(sql_identifier(column))
    if isinstance(dtype, T.TimestampType):
        ts = col
    elif isinstance(dtype, (T.TimestampNTZType, T.DateType)):
        ts = col.cast(T.TimestampType())
    elif isinstance(dtype, T.StringType):
        ts = F.try_to_timestamp(col)
    else:
        raise WqlSemanticError(
            f"event-time column '{column}' has type {dtype.simpleString()}; "
            "it must be a TIMESTAMP (or DATE, or text holding a timestamp)",
            code=ErrorCode.SCHEMA,
        )
    micros = F.unix_micros(ts)
    # floor, not truncation: -1 µs is in millisecond -1 (negative event times work)
    return ((micros - F.pmod(micros, F.lit(1000))) / F.lit(1000)).cast(T.LongType())


def clock_millis(df: DataFrame, column: str) -> Column:
    """A processing-time or arrival column as BIGINT ms (TIMESTAMP, or an integer as is)."""
    dtype = _field(df, column).dataType
    if isinstance(dtype, (T.TimestampType, T.TimestampNTZType, T.DateType, T.StringType)):
        return event_time_millis(df, column)
    if isinstance(dtype, (T.ByteType, T.ShortType, T.IntegerType, T.LongType)):
        return F.col(sql_identifier(column)).cast(T.LongType())
    raise WqlSemanticError(
        f"column '{column}' has type {dtype.simpleString()}; "
        "a processing-time column must be a TIMESTAMP or an integer of epoch milliseconds",
        code=ErrorCode.SCHEMA,
    )


def prepare(df: DataFrame, spec: ReplaySpec) -> _Staged:
    """``df`` with its input order, clocks in ms and drop reason: what every strategy starts from.

    Checks the spec's columns and the reserved prefix; runs no job.
    """
    for name in (spec.event_time, spec.arrival_order, spec.processing_time):
        if name is not None:
            _field(df, name)  # unknown column -> WqlSemanticError
    reserved = [c for c in df.columns if c.lower().startswith(RESERVED_PREFIX)]
    if reserved:
        raise WqlUnsupportedError(
            f"column {reserved[0]!r}: names starting with {RESERVED_PREFIX} are reserved for "
            "WQL's own columns",
            hint="rename the column (e.g. with withColumnRenamed) before passing the DataFrame",
            code=ErrorCode.SCHEMA,
        )
    source_cols = list(df.columns)
    # input order first, on the DataFrame exactly as the caller gave it
    staged = df.select(
        "*",
        F.input_file_name().alias(INPUT_FILE),
        F.monotonically_increasing_id().alias(INPUT_ID),
    )
    ts = event_time_millis(df, spec.event_time) if spec.event_time else F.lit(None)
    pt = clock_millis(df, spec.processing_time) if spec.processing_time else F.lit(None)
    staged = staged.withColumn(TS, ts.cast(T.LongType())).withColumn(PT, pt.cast(T.LongType()))
    if spec.arrival_order:
        staged = staged.withColumn(ARRIVAL, _arrival_key(df, spec.arrival_order))

    drop_reason = F.lit(None).cast(T.StringType())
    # the first applicable reason wins; checked in reverse so the earlier `when` overrides
    if spec.arrival_order:
        drop_reason = F.when(F.col(ARRIVAL).isNull(), REASON_NULL_ARRIVAL_ORDER).otherwise(
            drop_reason
        )
    if spec.processing_time:
        drop_reason = F.when(F.col(PT).isNull(), REASON_NULL_PROCESSING_TIME).otherwise(drop_reason)
    if spec.event_time:
        drop_reason = F.when(F.col(TS).isNull(), REASON_NULL_EVENT_TIME).otherwise(drop_reason)
    staged = staged.withColumn(_DROP, drop_reason)

    if spec.arrival_order:
        order = [ARRIVAL]
    elif spec.event_time:
        order = [TS]
    elif spec.processing_time:
        order = [PT]
    else:
        order = []
    order += [INPUT_FILE, INPUT_ID]

    dropped = staged.filter(F.col(_DROP).isNotNull()).select(
        *[F.col(sql_identifier(c)) for c in source_cols], F.col(_DROP).alias("reason")
    )
    return _Staged(staged, source_cols, order, spec, dropped)


def replay(
    df: DataFrame, spec: ReplaySpec, *, strategy: str = STRATEGY_AUTO, in_task: bool = False
) -> Replay:
    """Number the rows of ``df`` in replay order and attach each row's clocks.

    Runs the statistics job (the summary strategy also collects the rows'
    event times, ids and arrivals) and leaves the rest lazy.
    ``in_task``: the caller can take a summary replay (it sorts its
    partitions by :attr:`Replay.order` and computes the watermarks from
    :attr:`Replay.summary`), so ``auto`` may choose :data:`STRATEGY_SUMMARY`.
    """
    prepared = prepare(df, spec)
    staged = prepared.df
    summarisable = summary_applies(spec) and (
        spec.arrival_order is None or _integral(_field(staged, ARRIVAL).dataType)
    )
    if strategy == STRATEGY_SUMMARY and not (in_task and summarisable):
        raise ValueError(
            "the summary replay needs event time as the only clock, an arrival order (if "
            "any) of integers or timestamps, and a caller that computes the watermarks in "
            "its tasks (in_task=True)"
        )
    if strategy == STRATEGY_LOCAL:
        if not (in_task and spec.processing_time is None and not spec.idle):
            raise ValueError(
                "the local replay needs event time as the only clock and a caller whose "
                "tasks advance the watermark on their own rows (in_task=True)"
            )
        return _replay_local(prepared, df)
    if spec.idle:
        # each row's gap to the previous arrival, in one ordered pass (module docstring)
        return _replay_window(prepared)
    if strategy == STRATEGY_SUMMARY and not stable_input_order(df):
        raise ValueError(
            "the summary replay needs an input order every job sees alike (no shuffle "
            "before the source; stable_input_order)"
        )
    if (
        strategy in (STRATEGY_AUTO, STRATEGY_SUMMARY)
        and in_task
        and summarisable
        and stable_input_order(df)
    ):
        limit = SUMMARY_MAX_ROWS if strategy == STRATEGY_AUTO else None
        summarised = _replay_summary(prepared, limit)
        if summarised is not None:
            return summarised
    if strategy == STRATEGY_SUMMARY:  # the input's files do not number their rows in runs
        return _replay_window(prepared)
    if strategy == STRATEGY_AUTO:
        replayed = _replay_window(prepared)
        if replayed.rows_replayed <= AUTO_WINDOW_MAX_ROWS:
            return replayed
        return _replay_bucketed(prepared)
    strategies = {
        STRATEGY_BUCKETED: _replay_bucketed,
        STRATEGY_WINDOW: _replay_window,
    }
    if strategy in strategies:
        return strategies[strategy](prepared)
    raise ValueError(f"unknown replay strategy {strategy!r}")


def watermarks_before(ts: np.ndarray, carry: int, delay_ms: int) -> tuple[np.ndarray, int]:
    """Per row ``max(carry, ts of earlier rows) - delay - 1`` (``MIN_TIME`` while nothing seen).

    ``ts`` is int64 with ``MIN_TIME`` for rows that carry no event time;
    ``carry`` is the maximum event time seen before this chunk. Returns the
    watermarks and the new carry.
    """
    n = len(ts)
    if n == 0:
        return np.empty(0, dtype=np.int64), carry
    running = np.maximum.accumulate(ts)
    before = np.empty(n, dtype=np.int64)
    before[0] = carry
    np.maximum(running[:-1], carry, out=before[1:])
    return _minus_delay(before, delay_ms), int(max(carry, running[-1]))


def running_clock(pt: np.ndarray, carry: int) -> tuple[np.ndarray, int]:
    """Processing clock per row: running max of ``pt`` including the row, after ``carry``."""
    if len(pt) == 0:
        return np.empty(0, dtype=np.int64), carry
    clock = np.maximum(np.maximum.accumulate(pt), carry)
    return clock.astype(np.int64), int(clock[-1])


# --------------------------------------------------------------------------- strategies


@dataclass(frozen=True)
class _Staged:
    """What every strategy starts from: the source with its order and drop columns."""

    #: source columns + input order, event time, processing time, arrival and drop reason
    df: DataFrame
    source_cols: list[str]
    #: the replay order (primary column first, then input order)
    order: list[str]
    spec: ReplaySpec
    #: the rows not replayed, with their reason
    dropped: DataFrame


def _replay_bucketed(prepared: _Staged) -> Replay:
    staged, order, spec, dropped = prepared.df, prepared.order, prepared.spec, prepared.dropped
    source_cols = prepared.source_cols
    spark = staged.sparkSession
    kept = staged.filter(F.col(_DROP).isNull())
    primary = order[0] if len(order) > 2 else None
    n_buckets = max(1, min(MAX_BUCKETS, shuffle_partitions(spark)))
    boundaries: list[int] = []
    if primary is not None and n_buckets > 1:
        probs = [i / n_buckets for i in range(1, n_buckets)]
        # approximate quantiles are fine: they only balance the buckets; the
        # boundaries become literals, so every job below sees the same buckets
        found = kept.approxQuantile(primary, probs, 0.001)
        boundaries = sorted({int(b) for b in found})
    # bucket = number of boundaries strictly below the row's primary order value,
    # so equal values (ties) always share a bucket and buckets follow replay order
    bucket: Column = F.lit(0)
    for i, b in enumerate(boundaries):
        assert primary is not None  # boundaries exist only with a primary order column
        bucket = F.when(F.col(primary) > F.lit(b), F.lit(i + 1)).otherwise(bucket)
    bucketed = staged.withColumn(_BUCKET, bucket.cast(T.IntegerType()))
    stats = (
        bucketed.groupBy(_BUCKET, _DROP)
        .agg(F.count(F.lit(1)).alias("rows"), F.max(TS).alias("max_ts"), F.max(PT).alias("max_pt"))
        .collect()
    )
    dropped_counts: dict[str, int] = {}
    per_bucket: dict[int, tuple[int, int, int]] = {}
    rows_in = 0
    for r in stats:
        rows_in += r["rows"]
        if r[_DROP] is not None:
            dropped_counts[r[_DROP]] = dropped_counts.get(r[_DROP], 0) + r["rows"]
        else:
            per_bucket[r[_BUCKET]] = (
                r["rows"],
                MIN_TIME if r["max_ts"] is None else r["max_ts"],
                MIN_TIME if r["max_pt"] is None else r["max_pt"],
            )
    offsets, carry_ts, carry_pt = [], [], []
    offset, max_ts, max_pt = 0, MIN_TIME, MIN_TIME
    for b in range(len(boundaries) + 1):
        offsets.append(offset)
        carry_ts.append(max_ts)
        carry_pt.append(max_pt)
        rows, bucket_ts, bucket_pt = per_bucket.get(b, (0, MIN_TIME, MIN_TIME))
        offset += rows
        max_ts = max(max_ts, bucket_ts)
        max_pt = max(max_pt, bucket_pt)

    def by_bucket(values: list[int]) -> Column:
        return F.element_at(F.array(*[F.lit(v) for v in values]), F.col(_BUCKET) + 1)

    w = Window.partitionBy(_BUCKET).orderBy(*[F.col(c).asc_nulls_first() for c in order])
    before = F.greatest(
        by_bucket(carry_ts), F.max(TS).over(w.rowsBetween(Window.unboundedPreceding, -1))
    )
    wm = bounded_watermark(before, spec.delay_ms, _spark_where)
    if spec.processing_time:
        pt = F.greatest(
            by_bucket(carry_pt), F.max(PT).over(w.rowsBetween(Window.unboundedPreceding, 0))
        )
    else:
        pt = F.lit(None)
    out = bucketed.filter(F.col(_DROP).isNull()).select(
        *[F.col(sql_identifier(c)) for c in source_cols],
        (by_bucket(offsets) + F.row_number().over(w) - 1).cast(T.LongType()).alias(SEQ),
        F.col(TS),
        wm.cast(T.LongType()).alias(WM),
        pt.cast(T.LongType()).alias(PT),
    )
    return Replay(out, dropped, rows_in, dropped_counts, _known(max_ts), _known(max_pt))


def _replay_window(prepared: _Staged) -> Replay:
    staged, order, spec, dropped = prepared.df, prepared.order, prepared.spec, prepared.dropped
    source_cols = prepared.source_cols
    counts = (
        staged.groupBy(_DROP)
        .agg(F.count(F.lit(1)).alias("count"), F.max(TS).alias("ts"), F.max(PT).alias("pt"))
        .collect()
    )
    rows_in = sum(r["count"] for r in counts)
    dropped_counts = {r[_DROP]: r["count"] for r in counts if r[_DROP] is not None}
    kept_stats = [r for r in counts if r[_DROP] is None]
    max_ts = kept_stats[0]["ts"] if kept_stats else None
    max_pt = kept_stats[0]["pt"] if kept_stats else None
    # dropped rows do not move the clocks, so they take no part in the windows at all
    kept = staged.filter(F.col(_DROP).isNull())
    w = Window.orderBy(*[F.col(c).asc_nulls_first() for c in order])
    earlier = w.rowsBetween(Window.unboundedPreceding, -1)
    before = F.max(TS).over(earlier)
    # nothing before the first row: MIN_TIME, which stays MIN_TIME
    wm = bounded_watermark(F.coalesce(before, F.lit(MIN_TIME)), spec.delay_ms, _spark_where)
    if spec.idle:
        # after an idle spell (a gap of at least idle_ms to the previous arrival) the
        # watermark advanced with processing time: max ts before + gap - delay - 1;
        # a running maximum of that, since the watermark never goes back
        clock = F.max(PT).over(w.rowsBetween(Window.unboundedPreceding, 0))
        gap = clock - F.max(PT).over(earlier)
        idle = F.when(
            gap >= F.lit(spec.idle_ms), bounded_watermark(before + gap, spec.delay_ms, _spark_where)
        )
        kept = kept.withColumn(_IDLE_WM, F.greatest(wm, idle))
        wm = F.max(_IDLE_WM).over(w.rowsBetween(Window.unboundedPreceding, 0))
    cols = [F.col(sql_identifier(c)) for c in source_cols]
    out = kept.select(
        *cols,
        (F.row_number().over(w) - 1).cast(T.LongType()).alias(SEQ),
        F.col(TS),
        wm.cast(T.LongType()).alias(WM),
        (
            F.max(PT).over(w.rowsBetween(Window.unboundedPreceding, 0))
            if spec.processing_time
            else F.lit(None).cast(T.LongType())
        ).alias(PT),
    )
    return Replay(out, dropped, rows_in, dropped_counts, max_ts, max_pt)


def _replay_summary(prepared: _Staged, limit: int | None) -> Replay | None:
    """The summary strategy (module docstring).

    ``None`` (another strategy replays) above ``limit`` replayed rows, or where
    one file's rows in an input partition are not one run of ids.
    """
    staged = prepared.df
    # Job 1, the statistics: per input partition (the id's upper bits) and file, the
    # rows (by drop reason) and their id range. One file's rows in one partition are
    # one run of ids, so the ranges tell each id's file without reading the path again.
    part = F.shiftright(F.col(INPUT_ID), 33).alias("part")
    stats = (
        staged.groupBy(part, INPUT_FILE, _DROP)
        .agg(
            F.count(F.lit(1)).alias("rows"),
            F.min(INPUT_ID).alias("lo"),
            F.max(INPUT_ID).alias("hi"),
        )
        .collect()
    )
    plan = _summary_plan(prepared, [r.asDict() for r in stats], limit)
    if plan is None:
        return None
    kept = staged.filter(F.col(_DROP).isNull())
    # Job 2: the replayed rows' event times and ids (two longs a row; in arrival
    # order their arrivals too) to the driver
    narrow_cols = [ARRIVAL, TS, INPUT_ID] if prepared.spec.arrival_order else [TS, INPUT_ID]
    summary, max_ts = plan.summary(kept.select(*narrow_cols).toArrow())
    if summary is None:
        return None
    return Replay(
        kept.select(*plan.columns),
        prepared.dropped,
        plan.rows_in,
        plan.dropped_counts,
        max_ts,
        None,
        summary=summary,
    )


@dataclass(frozen=True)
class _SummaryPlan:
    """What the statistics say about a summary replay, before its narrow rows are read."""

    spec: ReplaySpec
    rows_in: int
    dropped_counts: dict[str, int]
    #: each id run's ``((first id, last id), file rank)``, ascending by first id
    by_start: list[tuple[tuple[int, int], int]]
    files: list[str]
    #: the replayed relation's columns (source columns, clocks, id, order columns)
    columns: list[Column]
    sort: tuple[str, ...]

    def summary(self, narrow: pa.Table) -> tuple[ReplaySummary | None, int | None]:
        """The summary of the replayed rows' ``narrow`` columns (event time, id, arrival)."""
        spec = self.spec
        if spec.arrival_order:
            return _arrival_summary(narrow, self.by_start, spec.delay_ms, self.sort)
        # NumPy finds each time's first row in input order (file, then id)
        ts = narrow.column(TS).to_numpy().astype(np.int64)
        ids = narrow.column(INPUT_ID).to_numpy().astype(np.int64)
        if len(self.files) > 1:
            lo = np.array([lo_hi[0] for lo_hi, _ in self.by_start], dtype=np.int64)
            lo_rank = np.array([r for _, r in self.by_start], dtype=np.int64)
            file_rank = lo_rank[np.searchsorted(lo, ids, side="right") - 1]
            order = np.lexsort((ids, file_rank, ts))
        else:
            order = np.lexsort((ids, ts))
        ts, ids = ts[order], ids[order]
        first = np.ones(len(ts), dtype=bool)
        first[1:] = ts[1:] != ts[:-1]
        summary = TimestampSummary(ts[first], ids[first], spec.delay_ms, self.sort)
        return summary, (int(ts[-1]) if len(ts) else None)


def _summary_plan(
    prepared: _Staged, stats: list[dict[str, Any]], limit: int | None
) -> _SummaryPlan | None:
    """The summary's plan from the statistics rows (``part``, file, drop reason,
    ``rows``, ``lo``, ``hi``); ``None`` above ``limit`` replayed rows, or where a
    file's rows in an input partition are not one run of ids."""
    spec = prepared.spec
    rows_in = sum(r["rows"] for r in stats)
    dropped_counts: dict[str, int] = {}
    for r in stats:
        if r[_DROP] is not None:
            dropped_counts[r[_DROP]] = dropped_counts.get(r[_DROP], 0) + r["rows"]
    if limit is not None and rows_in - sum(dropped_counts.values()) > limit:
        return None
    files = sorted({r[INPUT_FILE] for r in stats})
    rank = {f: i for i, f in enumerate(files)}
    runs: dict[tuple[int, str], tuple[int, int]] = {}
    for r in stats:
        key = (r["part"], r[INPUT_FILE])
        lo_hi = runs.get(key, (r["lo"], r["hi"]))
        runs[key] = (min(lo_hi[0], r["lo"]), max(lo_hi[1], r["hi"]))
    by_start = sorted((lo_hi, rank[key[1]]) for key, lo_hi in runs.items())
    if any(a[0][1] >= b[0][0] for a, b in zip(by_start, by_start[1:], strict=False)):
        return None  # a file's rows are not one run of ids in their partition
    columns: list[Column] = [F.col(sql_identifier(c)) for c in prepared.source_cols]
    columns += [F.col(TS), F.col(PT), F.col(INPUT_ID)]
    primary = ARRIVAL if spec.arrival_order else TS
    if spec.arrival_order:
        columns.append(F.col(ARRIVAL))
    sort: tuple[str, ...]
    if len(files) == 1:
        sort = (primary, INPUT_ID)
    elif len(files) <= MAX_RANKED_FILES:
        # a small integer instead of the path through the key exchange and sort
        ranks = F.create_map(*[F.lit(x) for f in files for x in (f, rank[f])])
        columns.append(F.element_at(ranks, F.col(INPUT_FILE)).alias(INPUT_RANK))
        sort = (primary, INPUT_RANK, INPUT_ID)
    else:
        columns.append(F.col(INPUT_FILE))
        sort = (primary, INPUT_FILE, INPUT_ID)
    return _SummaryPlan(spec, rows_in, dropped_counts, by_start, files, columns, sort)


def local_order(prepared: _Staged, source: DataFrame) -> tuple[str, ...]:
    """A local replay's sort columns: the replay order, without the input file where no
    row has one (local data: every row's is empty). With one file it stays: a union
    with local data would mix a path and empty names."""
    files = bool(source.inputFiles())
    return tuple(c for c in prepared.order if c != INPUT_FILE or files)


def _replay_local(prepared: _Staged, source: DataFrame) -> Replay:
    """The local strategy (module docstring): no job, no global clock.

    The counts are observed on the way into the caller's job; the rows keep
    their replay order columns, the input file only where there are several.
    """
    from pyspark.sql import Observation

    staged = prepared.df

    observation = Observation()
    observed = staged.observe(observation, *_count_columns())
    order = local_order(prepared, source)
    columns: list[Column] = [F.col(sql_identifier(c)) for c in prepared.source_cols]
    columns += [F.col(TS), F.col(PT), F.col(INPUT_ID)]
    columns += [F.col(c) for c in order if c in (ARRIVAL, INPUT_FILE)]
    kept = observed.filter(F.col(_DROP).isNull()).select(*columns)
    return Replay(
        kept,
        prepared.dropped,
        0,
        {},
        None,
        None,
        summary=LocalClock(prepared.spec.delay_ms, order),
        _observation=observation,
        _staged=staged,
    )


def _count_columns() -> list[Column]:
    """A local replay's counts: rows in, rows by drop reason, the largest replayed time."""
    kept_ts = F.when(F.col(_DROP).isNull(), F.col(TS))
    return [
        F.count(F.lit(1)).alias("rows"),
        *[
            F.count(F.when(F.col(_DROP) == r, 1)).alias(f"dropped_{i}")
            for i, r in enumerate(_REASONS)
        ],
        F.max(kept_ts).alias("max_ts"),
    ]


def _count_staged(staged: DataFrame) -> dict[str, Any]:
    """:func:`_count_columns` by a job of its own."""
    return staged.agg(*_count_columns()).collect()[0].asDict()


def _arrival_summary(
    narrow: pa.Table,
    runs: list[tuple[tuple[int, int], int]],
    delay_ms: int,
    sort: tuple[str, ...],
) -> tuple[ArrivalSummary | None, int | None]:
    """The :class:`ArrivalSummary` of the replayed rows ``narrow`` (arrival, event time, id).

    ``runs``: each id run's ``((first id, last id), file rank)``, ascending by
    first id. Also returns the largest event time. ``None`` when the keys would
    not fit in int64.
    """
    # positions: the runs end to end in input order (file rank, then first id)
    in_order = sorted(range(len(runs)), key=lambda j: (runs[j][1], runs[j][0][0]))
    run_pos = np.zeros(len(runs), dtype=np.int64)
    span = 0
    for j in in_order:
        (first, last), _ = runs[j]
        run_pos[j] = span
        span += last - first + 1
    run_lo = np.array([first for (first, _), _ in runs], dtype=np.int64)
    arrival = narrow.column(ARRIVAL).to_numpy().astype(np.int64)
    ts = narrow.column(TS).to_numpy().astype(np.int64)
    ids = narrow.column(INPUT_ID).to_numpy().astype(np.int64)
    empty = np.empty(0, dtype=np.int64)
    # the positions only: a first summary without records, to place the ids
    placer = ArrivalSummary(empty, empty, empty, run_lo, run_pos, span, delay_ms, sort)
    pos = placer.positions(ids) if len(ids) else empty
    order = np.lexsort((pos, arrival))
    arrival, pos, ts = arrival[order], pos[order], ts[order]
    # records: the first row and every row above the maximum of the rows before it
    record = np.ones(len(ts), dtype=bool)
    if len(ts) > 1:
        record[1:] = ts[1:] > np.maximum.accumulate(ts)[:-1]
    arrivals, code = np.unique(arrival[record], return_inverse=True)
    if len(arrivals) * max(span, 1) >= 2**62:
        return None, None
    summary = ArrivalSummary(
        arrivals,
        code.astype(np.int64) * np.int64(span) + pos[record],
        ts[record],
        run_lo,
        run_pos,
        span,
        delay_ms,
        sort,
    )
    return summary, (int(ts[record][-1]) if len(ts) else None)


def shuffle_partitions(spark: Any) -> int:
    """``spark.sql.shuffle.partitions`` as an int (200, Spark's default, when unset)."""
    return int(spark.conf.get("spark.sql.shuffle.partitions") or 200)


def _known(value: int) -> int | None:
    return None if value == MIN_TIME else value


# --------------------------------------------------------------------------- helpers


def _arrival_key(df: DataFrame, column: str) -> Column:
    dtype = _field(df, column).dataType
    if isinstance(dtype, (T.TimestampType, T.TimestampNTZType, T.DateType)):
        return event_time_millis(df, column)
    if isinstance(dtype, T.NumericType):
        return F.col(sql_identifier(column))
    raise WqlSemanticError(
        f"arrival_order column '{column}' has type {dtype.simpleString()}; "
        "it must be numeric or a TIMESTAMP",
        code=ErrorCode.SCHEMA,
    )


def _integral(dtype: T.DataType) -> bool:
    return isinstance(dtype, (T.ByteType, T.ShortType, T.IntegerType, T.LongType))


def _field(df: DataFrame, name: str) -> T.StructField:
    for f in df.schema.fields:
        if f.name == name:
            return f
    lowered = [f for f in df.schema.fields if f.name.lower() == name.lower()]
    if len(lowered) == 1:
        return lowered[0]
    raise WqlSemanticError(
        f"column '{name}' is not in the source (columns: {', '.join(df.columns)})",
        code=ErrorCode.SCHEMA,
    )
