"""Operator runtime benchmark: the NumPy fast path vs the per-row loop vs plain NumPy.

    .venv/bin/python bench/runtime.py [--rows N] [--keys K] [--batch B] [--per-row-rows M]

Input (seeded, generated once): N rows (default 1 000 000) over K keys
(default 1 000) in event-time order, about one row per key per second
(inter-arrival ~ exponential, mean 1000/K ms), integer amounts (cents), a
bounded out-of-orderness watermark with a 1 s delay, fed in batches of B rows
with each row's ``watermark_before`` as the batch replay host computes it.

Scenarios (SUM(amount) and COUNT(*) per window):

a. TUMBLE 10 s
b. SESSION gap 3 s, default (watermark) trigger
c. SESSION gap 3 s + TRIGGER COUNT(5) + EVICT COUNT(10)
d. HOP slide 1 s, size 60 s (size/slide = 60)

Paths, measured in the same run on the same data:

- ``vectorized``: ``WindowOperator.process_batch`` per batch: the operator's
  batch form (the NumPy path ``wql.runtime.vectorized``, or for HOP/CUMULATE
  the columnar arrays of ``wql.runtime.columnar``), the per-row loop for a
  batch it declines (the share of batches a batch form took is printed);
- ``per-row``: the per-row loop forced (``advance_watermark`` +
  ``process_element`` per row), on the first M rows (default 200 000; it is
  a rate, and HOP's loop touches 60 windows per row);
- ``numpy``: a plain NumPy group-by of the same rows (lexsort + reduceat;
  sessions by a gap test; HOP by per-pane sums and prefix-sum windows):
  what the scenario costs with no operator semantics at all (no watermark,
  lateness, pane info, state or timers), the baseline for the ratio.

Throughput is single-core wall time; for the per-row loop the rate in CPU
time of the process (``time.process_time``) is printed as well, which a
shared, loaded machine distorts less.  Peak memory is measured in a second
run of each path with ``tracemalloc`` (peak of Python + NumPy allocations
during the run, input excluded), because tracemalloc slows Python code and
would distort the timings.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
import tracemalloc
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from wql.runtime import (  # noqa: E402
    MIN_TIME,
    AggregateSpec,
    CountEvictor,
    CountTrigger,
    OperatorConfig,
    RowBatch,
    SessionWindows,
    SlidingWindows,
    TumblingWindows,
    WindowOperator,
)

DELAY = 1_000
AGGS = (AggregateSpec("SUM", 0), AggregateSpec("COUNT_STAR"))


@dataclass
class Data:
    keys: list[tuple]
    key_codes: np.ndarray
    ts: np.ndarray
    amount: np.ndarray
    wm: np.ndarray


def generate(rows: int, keys: int, seed: int) -> Data:
    rng = np.random.default_rng(seed)
    ts = np.floor(np.cumsum(rng.exponential(1000.0 / keys, rows))).astype(np.int64)
    codes = rng.integers(0, keys, rows)
    key_tuples = [(f"user{k:05d}",) for k in range(keys)]
    amount = rng.integers(1, 10_000, rows).astype(np.int64)
    high = np.maximum.accumulate(ts)
    wm = np.empty(rows, np.int64)
    wm[0] = MIN_TIME
    wm[1:] = high[:-1] - DELAY - 1
    return Data([key_tuples[k] for k in codes.tolist()], codes, ts, amount, wm)


def batches(data: Data, rows: int, size: int):
    for a in range(0, rows, size):
        b = min(rows, a + size)
        yield RowBatch(
            keys=data.keys[a:b],
            timestamps=data.ts[a:b],
            columns=(data.amount[a:b],),
            watermark_before=data.wm[a:b],
        )


def per_row_loop(op: WindowOperator, batch: RowBatch) -> None:
    """The loop ``process_batch`` falls back to, forced."""
    keys = list(batch.keys)
    wms = batch.watermark_before.tolist()  # type: ignore[union-attr]
    tss = batch.timestamps.tolist()  # type: ignore[union-attr]
    rows = list(zip(*[c.tolist() for c in batch.columns], strict=True))  # type: ignore[union-attr]
    advance, process = op.advance_watermark, op.process_element
    for i in range(len(keys)):
        advance(wms[i])
        process(keys[i], tss[i], rows[i])


def run_operator(config: OperatorConfig, data: Data, rows: int, size: int, vectorized: bool):
    op = WindowOperator(config)
    emitted = taken = total = 0
    for batch in batches(data, rows, size):
        total += 1
        if not vectorized:
            per_row_loop(op, batch)
        elif op.process_batch(batch):
            taken += 1
        emitted += len(op.drain())
    op.end_of_input()
    emitted += len(op.drain())
    return emitted, taken, total


# --------------------------------------------------------------------------- NumPy baselines


def numpy_tumble(data: Data, size: int) -> int:
    start = data.ts - data.ts % size
    order = np.lexsort((start, data.key_codes))
    k, s = data.key_codes[order], start[order]
    new = np.ones(len(k), bool)
    new[1:] = (k[1:] != k[:-1]) | (s[1:] != s[:-1])
    starts = np.flatnonzero(new)
    np.add.reduceat(data.amount[order], starts)
    return len(starts)


def numpy_sessions(data: Data, gap: int) -> int:
    order = np.lexsort((data.ts, data.key_codes))
    k, t = data.key_codes[order], data.ts[order]
    new = np.ones(len(k), bool)
    new[1:] = (k[1:] != k[:-1]) | (t[1:] > t[:-1] + gap)  # touching windows merge
    starts = np.flatnonzero(new)
    np.add.reduceat(data.amount[order], starts)
    np.diff(np.append(starts, len(k)))
    return len(starts)


def numpy_hop(data: Data, slide: int, size: int) -> int:
    per = size // slide
    pane = data.ts // slide
    p0 = int(pane.min())
    width = int(pane.max()) - p0 + per + 1
    dense = np.zeros((int(data.key_codes.max()) + 1, width), np.int64)
    counts = np.zeros_like(dense)
    np.add.at(dense, (data.key_codes, pane - p0), data.amount)
    np.add.at(counts, (data.key_codes, pane - p0), 1)
    csum = np.cumsum(counts, axis=1)
    ssum = np.cumsum(dense, axis=1)
    window_counts = csum.copy()
    window_counts[:, per:] -= csum[:, :-per]
    window_sums = ssum.copy()
    window_sums[:, per:] -= ssum[:, :-per]
    return int((window_counts > 0).sum())


# --------------------------------------------------------------------------- driver


@dataclass
class Scenario:
    name: str
    config: OperatorConfig
    baseline: Callable[[Data], int]


SCENARIOS = [
    Scenario(
        "a. TUMBLE 10 s + SUM",
        OperatorConfig(TumblingWindows(10_000), AGGS),
        lambda d: numpy_tumble(d, 10_000),
    ),
    Scenario(
        "b. SESSION 3 s",
        OperatorConfig(SessionWindows(3_000), AGGS),
        lambda d: numpy_sessions(d, 3_000),
    ),
    Scenario(
        "c. SESSION 3 s + COUNT(5) + EVICT COUNT(10)",
        OperatorConfig(
            SessionWindows(3_000), AGGS, trigger=CountTrigger(5), evictor=CountEvictor(10)
        ),
        lambda d: numpy_sessions(d, 3_000),
    ),
    Scenario(
        "d. HOP 60 s / 1 s",
        OperatorConfig(SlidingWindows(size=60_000, slide=1_000), AGGS),
        lambda d: numpy_hop(d, 1_000, 60_000),
    ),
]


def timed(fn: Callable[[], object]) -> tuple[float, float, object]:
    """(wall seconds, CPU seconds of this process, result)."""
    start, cpu = time.perf_counter(), time.process_time()
    result = fn()
    return time.perf_counter() - start, time.process_time() - cpu, result


def peak_mib(fn: Callable[[], object]) -> float:
    tracemalloc.start()
    try:
        fn()
        return tracemalloc.get_traced_memory()[1] / 2**20
    finally:
        tracemalloc.stop()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--keys", type=int, default=1_000)
    parser.add_argument("--batch", type=int, default=100_000)
    parser.add_argument("--per-row-rows", type=int, default=200_000)
    parser.add_argument("--seed", type=int, default=42)
    parser.add_argument("--no-memory", action="store_true", help="skip the tracemalloc runs")
    parser.add_argument(
        "--only", default="", help="run scenarios whose name starts with these letters"
    )
    args = parser.parse_args(argv)
    data = generate(args.rows, args.keys, args.seed)
    slow_rows = min(args.rows, args.per_row_rows)
    print(
        f"rows={args.rows:,} keys={args.keys:,} batch={args.batch:,} "
        f"per-row rows={slow_rows:,} delay={DELAY} ms; load average "
        f"{', '.join(f'{x:.1f}' for x in os.getloadavg())} on {os.cpu_count()} cores"
    )
    header = (
        f"| {'scenario':<44} | {'vectorized rows/s':>17} | {'fast batches':>12} "
        f"| {'per-row rows/s':>14} | {'per-row CPU rows/s':>18} | {'vec/row':>7} "
        f"| {'numpy rows/s':>12} | {'vec/numpy':>9} "
        f"| {'peak MiB vec':>12} | {'peak MiB row':>12} | {'windows out':>11} |"
    )
    print(header)
    print("|" + "|".join("-" * (len(c)) for c in header.split("|")[1:-1]) + "|")
    for sc in SCENARIOS:
        if args.only and sc.name[0] not in args.only:
            continue
        t_vec, _, (emitted, taken, total) = timed(
            lambda sc=sc: run_operator(sc.config, data, args.rows, args.batch, True)
        )
        t_row, cpu_row, _ = timed(
            lambda sc=sc: run_operator(sc.config, data, slow_rows, args.batch, False)
        )
        t_np, _, _ = timed(lambda sc=sc: sc.baseline(data))
        if args.no_memory:
            m_vec = m_row = float("nan")
        else:
            m_vec = peak_mib(
                lambda sc=sc: run_operator(sc.config, data, args.rows, args.batch, True)
            )
            m_row = peak_mib(
                lambda sc=sc: run_operator(sc.config, data, slow_rows, args.batch, False)
            )
        vec_rate, row_rate, np_rate = args.rows / t_vec, slow_rows / t_row, args.rows / t_np
        print(
            f"| {sc.name:<44} | {vec_rate:>17,.0f} | {f'{taken}/{total}':>12} "
            f"| {row_rate:>14,.0f} | {slow_rows / cpu_row:>18,.0f} "
            f"| {vec_rate / row_rate:>7.1f} | {np_rate:>12,.0f} "
            f"| {vec_rate / np_rate:>9.3f} | {m_vec:>12.1f} | {m_row:>12.1f} | {emitted:>11,} |",
            flush=True,
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
