"""What Spark pickles for a ``transformWithStateInPandas`` operator: a light stand-in
that loads WQL's processor only where rows run.

Spark starts a Python process of its own on the driver for every such operator
when its query starts (``transform_with_state_driver_worker``): it unpickles
the processor and calls its ``init`` to learn the state variables' names and
schemas, nothing more. Unpickling WQL's processors imports their modules, and
with them pandas, pyarrow and WQL's runtime: about half a second of that
process's CPU, on the path of the query's first micro-batch, for every operator
of every query start (docs/streaming.md, "Query start").

:func:`deferred` pickles the processor into bytes and records the state
variables its ``init`` declares (by running it once, on the planning side,
against :class:`_Recorder`). The stand-in, whose module imports only PySpark's
processor base class, declares the same variables from that record in its
own ``init``, so the driver process never loads the processor. Where rows
and timers run (the executors' Python workers), its first call loads the
processor and runs the processor's ``init`` with the variables the stand-in
already holds (:class:`_Declared`), so no variable is asked of Spark twice.
"""

from __future__ import annotations

import pickle
from collections.abc import Iterator
from typing import Any

from pyspark.sql.streaming.stateful_processor import (
    ExpiredTimerInfo,
    StatefulProcessor,
    StatefulProcessorHandle,
    TimerValues,
)

#: the handle's calls that declare a state variable
_GETTERS = frozenset({"getValueState", "getListState", "getMapState"})

#: a state variable's declaration: the getter, its positional and keyword arguments
Declaration = tuple[str, tuple[Any, ...], tuple[tuple[str, Any], ...]]


def deferred(processor: StatefulProcessor) -> DeferredProcessor:
    """``processor`` behind a :class:`DeferredProcessor` (what to pass Spark)."""
    from pyspark import cloudpickle

    payload = cloudpickle.dumps(processor)
    recorder = _Recorder()
    # a copy as the executors get it: init sets attributes on the processor it runs on
    pickle.loads(payload).init(recorder)
    return DeferredProcessor(payload, tuple(recorder.declared))


class DeferredProcessor(StatefulProcessor):
    """A pickled processor and the state variables its ``init`` declares (see the
    module doc); every call after ``init`` is the processor's."""

    def __init__(self, payload: bytes, declared: tuple[Declaration, ...]) -> None:
        self.payload = payload
        self.declared = declared

    def init(self, handle: StatefulProcessorHandle) -> None:
        self._handle = handle
        self._states = [getattr(handle, d[0])(*d[1], **dict(d[2])) for d in self.declared]
        self._processor: StatefulProcessor | None = None

    def _loaded(self) -> StatefulProcessor:
        if self._processor is None:
            processor: StatefulProcessor = pickle.loads(self.payload)
            handle: Any = _Declared(self._handle, self.declared, self._states)
            processor.init(handle)
            self._processor = processor
        return self._processor

    def handleInputRows(
        self, key: Any, rows: Iterator[Any], timerValues: TimerValues
    ) -> Iterator[Any]:
        return self._loaded().handleInputRows(key, rows, timerValues)

    def handleExpiredTimer(
        self, key: Any, timerValues: TimerValues, expiredTimerInfo: ExpiredTimerInfo
    ) -> Iterator[Any]:
        return self._loaded().handleExpiredTimer(key, timerValues, expiredTimerInfo)

    def handleInitialState(self, key: Any, initialState: Any, timerValues: TimerValues) -> None:
        self._loaded().handleInitialState(key, initialState, timerValues)

    def close(self) -> None:
        processor = getattr(self, "_processor", None)
        if processor is not None:
            processor.close()


class _Recorder:
    """A handle that records the state variables an ``init`` declares (and gives
    ``None`` for each): what :class:`DeferredProcessor` declares in its place."""

    def __init__(self) -> None:
        self.declared: list[Declaration] = []

    def __getattr__(self, name: str) -> Any:
        if name not in _GETTERS:
            raise AttributeError(
                f"a processor's init called handle.{name}: only state variables are declared there"
            )

        def declare(*args: Any, **kwargs: Any) -> None:
            self.declared.append((name, args, tuple(sorted(kwargs.items()))))

        return declare


class _Declared:
    """Spark's handle, whose state variables the stand-in declared already: a
    declaration gets the variable made then, every other call goes to the handle."""

    def __init__(
        self,
        handle: StatefulProcessorHandle,
        declared: tuple[Declaration, ...],
        states: list[Any],
    ) -> None:
        self._handle = handle
        self._declared = declared
        self._states = states

    def __getattr__(self, name: str) -> Any:
        if name not in _GETTERS:
            return getattr(self._handle, name)

        def get(*args: Any, **kwargs: Any) -> Any:
            # schemas may be StructTypes: found by equality, among a few declarations
            i = self._declared.index((name, args, tuple(sorted(kwargs.items()))))
            return self._states[i]

        return get
