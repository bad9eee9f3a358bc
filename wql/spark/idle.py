"""The idle monitor: ``WATERMARK ... IDLE AFTER`` on a stream (docs/streaming.md, "Idle sources").

Spark computes a stream's watermark on the driver from the event times of
the rows that arrive; nothing moves it without rows, and no stateful
operator sees the whole source. So the driver watches the source instead:
an :class:`IdleMonitor`, owned by the run that started the streaming query
(:func:`wql.spark.stream_sinks.start_streams`), reads each micro-batch's
progress, where the host's observed metrics (:data:`wql.spark.streaming.IDLE_METRICS`)
say whether source rows arrived and their largest event time, and keeps

* ``last_arrival_ms``: the timestamp of the last micro-batch with source rows
  (a stream's processing clock of its rows, as in ProcessingTime mode);
* ``max_event_ms``: the largest event time of the source rows so far.

Once no row arrived for ``IDLE AFTER``, it appends a *heartbeat* to the
query's end stream (``CK/N/end/heartbeat-<ms>.json``, field
:data:`wql.spark.streaming.HEARTBEAT_COLUMN`) whose event time is
``H = max_event_ms + (now - last_arrival_ms)``: the host unions it before
``withWatermark`` and filters it out before the operator, so it is never a
result, never an input row, and Spark's watermark becomes ``H - delay - 1``,
the batch rule's ``max ts + (now - p') - delay - 1`` (:mod:`wql.spark.replay`).
While the source stays quiet, one heartbeat follows every ``IDLE AFTER``
interval; they only rise, and Spark's watermark never goes back. A query
that is running a micro-batch, or whose last trigger found new data (a
backlog), is not waiting on a quiet source: no heartbeat then.

The state is saved in ``CK/N/idle.json`` after every micro-batch with source
rows, so a restart from the checkpoint goes on from it; when the checkpoint
committed a later micro-batch than the saved one (the driver stopped in
between), that batch's timestamp counts as an arrival: the restarted monitor
then never advances the watermark beyond the rule, at worst later.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import json
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from wql.spark.streaming import HEARTBEAT_COLUMN, IDLE_METRICS

__all__ = ["STATE_FILE", "IdleMonitor", "IdleState", "write_atomic"]

#: The monitor's saved state, next to the query's checkpoints (``CK/N/idle.json``).
STATE_FILE = "idle.json"


@dataclass
class IdleState:
    """What the idle rule needs of a source: its last arrival and largest event time (ms)."""

    last_arrival_ms: int | None = None
    max_event_ms: int | None = None
    #: the last micro-batch taken into account (with source rows or not)
    batch_id: int = -1

    def heartbeat(self, now_ms: int, idle_ms: int) -> int | None:
        """The heartbeat's event time at ``now_ms``, or ``None`` while the source is not idle."""
        if self.last_arrival_ms is None or self.max_event_ms is None:
            return None
        quiet = now_ms - self.last_arrival_ms
        return self.max_event_ms + quiet if quiet >= idle_ms else None


class IdleMonitor:
    """The idle rule of one operator query over a stream (see the module doc).

    ``end_dir``: the query's end stream folder (heartbeats go there);
    ``state_dir``: the query's checkpoint folder (``CK/N``; its
    ``operator`` checkpoint and the saved :data:`STATE_FILE`). :meth:`watch`
    starts the thread that follows a running query until it stops or
    :meth:`stop` is called; :meth:`absorb` takes the progress of a query
    that already finished (an available-now run).
    """

    def __init__(self, idle_ms: int, end_dir: Path, state_dir: Path) -> None:
        self.idle_ms = idle_ms
        self.end_dir = end_dir
        self.state_dir = state_dir
        self.state = _load(state_dir)
        self._last_heartbeat_ms: int | None = None
        self._stopped = threading.Event()
        self._thread: threading.Thread | None = None
        self._query: Any = None
        self.heartbeats: list[int] = []

    # -- the rule -------------------------------------------------------------

    def beat(self, now_ms: int | None = None) -> int | None:
        """Write a heartbeat if the source is idle at ``now_ms`` (default: now) and the
        last one is at least ``IDLE AFTER`` old; returns its event time, else ``None``."""
        now = _now_ms() if now_ms is None else now_ms
        h = self.state.heartbeat(now, self.idle_ms)
        if h is None:
            return None
        last = self._last_heartbeat_ms
        if last is not None and now - last < self.idle_ms:
            return None
        if self.heartbeats and h <= self.heartbeats[-1]:
            return None
        write_atomic(self.end_dir / f"heartbeat-{h}.json", json.dumps({HEARTBEAT_COLUMN: h}) + "\n")
        self._last_heartbeat_ms = now
        self.heartbeats.append(h)
        return h

    def absorb(self, progress: list[Any]) -> None:
        """Take the micro-batches of ``progress`` (``StreamingQuery.recentProgress``)
        that the state has not seen, and save the state when there were any."""
        s = self.state
        seen = s.batch_id
        for p in progress:
            batch = int(p["batchId"])
            if batch <= s.batch_id:
                continue
            s.batch_id = batch
            metrics = (p.get("observedMetrics") or {}).get(IDLE_METRICS)
            if metrics and int(metrics["rows"] or 0):
                # a micro-batch with source rows: they arrived at its timestamp
                s.last_arrival_ms = _epoch_ms(p["timestamp"])
                m = int(metrics["max_ms"])
                s.max_event_ms = m if s.max_event_ms is None else max(s.max_event_ms, m)
        if s.batch_id != seen:
            self._save()

    # -- the thread -----------------------------------------------------------

    def watch(self, query: Any, *, tick_s: float | None = None) -> None:
        """Follow the running streaming ``query`` on a daemon thread until it stops."""
        tick = tick_s if tick_s is not None else min(1.0, self.idle_ms / 4000)

        def run() -> None:
            while not self._stopped.is_set() and query.isActive:
                # a query that is stopping may refuse to report: the next tick retries
                with contextlib.suppress(Exception):
                    self.absorb(query.recentProgress)
                    status = query.status
                    # a backlog is no quiet spell: only a query whose last trigger found
                    # no new data, and that runs no micro-batch, waits on a quiet source
                    if not (status["isDataAvailable"] or status["isTriggerActive"]):
                        self.beat()
                self._stopped.wait(tick)

        self._query = query
        self._thread = threading.Thread(target=run, name="wql idle monitor", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        """Stop following the query (the stream's stop stops it too)."""
        self._stopped.set()
        if self._thread is not None:
            self._thread.join()
            self._thread = None
        if self._query is not None:
            # the micro-batches since the last tick (a stopped query keeps its progress)
            with contextlib.suppress(Exception):
                self.absorb(self._query.recentProgress)

    def _save(self) -> None:
        s = self.state
        text = json.dumps(
            {
                "last_arrival_ms": s.last_arrival_ms,
                "max_event_ms": s.max_event_ms,
                "batch_id": s.batch_id,
            }
        )
        write_atomic(self.state_dir / STATE_FILE, text + "\n", replace=True)


def _load(state_dir: Path) -> IdleState:
    """The saved state, moved on to the checkpoint's last committed micro-batch."""
    state = IdleState()
    saved = state_dir / STATE_FILE
    if saved.exists():
        data = json.loads(saved.read_text())
        state = IdleState(data["last_arrival_ms"], data["max_event_ms"], int(data["batch_id"]))
    committed = _last_commit(state_dir / "operator")
    if committed is not None and committed[0] > state.batch_id and state.last_arrival_ms:
        # a later micro-batch than the saved one was committed: it may have had rows
        state.last_arrival_ms = max(state.last_arrival_ms, committed[1])
        state.batch_id = committed[0]
    return state


def _last_commit(checkpoint: Path) -> tuple[int, int] | None:
    """The id and timestamp (ms) of the last micro-batch a checkpoint committed."""
    ids = [int(p.name) for p in (checkpoint / "commits").glob("[0-9]*") if p.name.isdigit()]
    if not ids:
        return None
    last = max(ids)
    # offsets/<id>: a version line, then the batch metadata (batchTimestampMs), then offsets
    lines = (checkpoint / "offsets" / str(last)).read_text().splitlines()
    return last, int(json.loads(lines[1])["batchTimestampMs"])


def write_atomic(path: Path, text: str, *, replace: bool = False) -> None:
    """Write ``path`` under a hidden name, then rename (a file source never sees half a file)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(text)
    if replace:
        tmp.replace(path)
    else:
        tmp.rename(path)


def _epoch_ms(timestamp: str) -> int:
    """A progress timestamp (``2026-01-02T03:04:05.678Z``) in ms since the epoch."""
    return int(dt.datetime.fromisoformat(timestamp.replace("Z", "+00:00")).timestamp() * 1000)


def _now_ms() -> int:
    return int(time.time() * 1000)
