"""The WindowOperator engine: Flink's windowing semantics in pure Python + NumPy.

Knows nothing of Spark, SQL or the compiler's plan: a host builds an
:class:`OperatorConfig`, feeds rows and clocks to a :class:`WindowOperator`
and drains the emitted rows. Modules:

- ``windows``: TimeWindow, GlobalWindow, MIN_TIME/MAX_TIME
- ``assigners``: tumbling, sliding, cumulate, session (static/dynamic gap), global
- ``triggers``: TriggerResult and every WQL trigger
- ``evictors``: count, time, delta
- ``aggregates``: incremental aggregates
- ``merging``: MergingWindowSet
- ``state`` / ``timers``: per-key state with namespaces, the timer service
- ``config``: OperatorConfig, RowBatch, Counters, count_windows
- ``window_operator``: WindowOperator, the plain Flink port and the interface
  its fast paths (``fastpath``, ``columnar``, ``vectorized``) work through
- ``operator_factory``: make_operator (the operator of a stage's config); picks
  and installs WindowOperator's fast paths when this package is imported
- ``snapshot``: the versioned, restricted snapshot format
- ``testing``: a harness speaking the ``key:value@ts`` / ``WM t`` notation
"""

from wql.runtime.aggregates import AggregateSpec, Aggregator
from wql.runtime.assigners import (
    DROP_CLOSED_WINDOW,
    DROP_INVALID_GAP,
    DROP_LATE,
    DROP_LATE_WINDOW,
    DROP_MISSING_TIMESTAMP,
    CumulateWindows,
    DropRow,
    DynamicSessionWindows,
    GlobalWindows,
    SessionWindows,
    SlidingWindows,
    TumblingWindows,
    WindowAssigner,
)
from wql.runtime.config import (
    EARLY,
    EMITTED_FIELDS,
    LATE,
    ON_TIME,
    Counters,
    EncodedKeys,
    OperatorConfig,
    RowBatch,
    count_windows,
)
from wql.runtime.evictors import CountEvictor, DeltaEvictor, Evictor, TimeEvictor
from wql.runtime.merging import MergingWindowSet

# installs WindowOperator's fast paths (the operator core does not import them)
from wql.runtime.operator_factory import make_operator
from wql.runtime.snapshot import SnapshotError
from wql.runtime.triggers import (
    AllTrigger,
    AnyTrigger,
    ContinuousEventTimeTrigger,
    ContinuousProcessingTimeTrigger,
    CountTrigger,
    DeltaTrigger,
    EarlyLateTrigger,
    EventTimeTrigger,
    EveryElementTrigger,
    NeverTrigger,
    OnceTrigger,
    OnUpdateTrigger,
    PanePurgingTrigger,
    ProcessingTimeoutTrigger,
    ProcessingTimeTrigger,
    PurgingTrigger,
    SequenceTrigger,
    Trigger,
    TriggerContext,
    TriggerResult,
    UntilTrigger,
)
from wql.runtime.window_operator import WindowOperator
from wql.runtime.windows import GLOBAL_WINDOW, MAX_TIME, MIN_TIME, GlobalWindow, TimeWindow

__all__ = [
    "DROP_CLOSED_WINDOW",
    "DROP_INVALID_GAP",
    "DROP_LATE",
    "DROP_LATE_WINDOW",
    "DROP_MISSING_TIMESTAMP",
    "EARLY",
    "EMITTED_FIELDS",
    "GLOBAL_WINDOW",
    "LATE",
    "MAX_TIME",
    "MIN_TIME",
    "ON_TIME",
    "AggregateSpec",
    "Aggregator",
    "AllTrigger",
    "AnyTrigger",
    "ContinuousEventTimeTrigger",
    "ContinuousProcessingTimeTrigger",
    "CountEvictor",
    "CountTrigger",
    "Counters",
    "CumulateWindows",
    "DeltaEvictor",
    "DeltaTrigger",
    "DropRow",
    "DynamicSessionWindows",
    "EarlyLateTrigger",
    "EncodedKeys",
    "EventTimeTrigger",
    "EveryElementTrigger",
    "Evictor",
    "GlobalWindow",
    "GlobalWindows",
    "MergingWindowSet",
    "NeverTrigger",
    "OnUpdateTrigger",
    "OnceTrigger",
    "OperatorConfig",
    "PanePurgingTrigger",
    "ProcessingTimeTrigger",
    "ProcessingTimeoutTrigger",
    "PurgingTrigger",
    "RowBatch",
    "SequenceTrigger",
    "SessionWindows",
    "SlidingWindows",
    "SnapshotError",
    "TimeEvictor",
    "TimeWindow",
    "Trigger",
    "TriggerContext",
    "TriggerResult",
    "TumblingWindows",
    "UntilTrigger",
    "WindowAssigner",
    "make_operator",
    "WindowOperator",
    "count_windows",
]
