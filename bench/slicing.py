"""HOP/CUMULATE slices in the operator runtime: the columnar slices vs per-window, vs TUMBLE.

One command (from the repository root)::

    .venv/bin/python bench/slicing.py [--events N] [--no-key]

Input: the bids of ``bench/nexmark.py``'s generator (N events, default
200 000), in generation order with the watermark ``max(dateTime before) -
4 s - 1 ms``, keyed by auction (``--no-key``: one key, every bid in it).
Each query is ``COUNT(*)`` per window, run in this process (no Spark) two
ways on the same rows, in batches of 100 000:

- ``vectorized``: ``process_batch``, the default batch form: for HOP and
  CUMULATE the columnar (key, slice) arrays (``wql.runtime.columnar``), for
  TUMBLE the NumPy path;
- ``per-window``: the default per-row path (``WindowOperator(config)``).

Queries: TUMBLE 60 s (the baseline), HOP 1 s / 60 s (60 windows per row),
HOP 2 s / 10 s (q5's window), CUMULATE 2 s / 10 s. Reported: CPU seconds of
this process (``time.process_time``), rows/s in CPU time, emitted rows and
the ``tracemalloc`` peak of a second run (Python + NumPy allocations).
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
import tracemalloc
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow.parquet as pq

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

import nexmark  # noqa: E402

from wql.runtime import (  # noqa: E402
    AggregateSpec,
    CumulateWindows,
    OperatorConfig,
    RowBatch,
    SlidingWindows,
    TumblingWindows,
    WindowOperator,
)

BATCH = 100_000
AGGS = (AggregateSpec("COUNT_STAR"),)
QUERIES = (
    ("TUMBLE 60 s", TumblingWindows(60_000)),
    ("HOP 1 s / 60 s", SlidingWindows(60_000, 1_000)),
    ("HOP 2 s / 10 s", SlidingWindows(10_000, 2_000)),
    ("CUMULATE 2 s / 10 s", CumulateWindows(2_000, 10_000)),
)


def run(config: OperatorConfig, keys: list, ts: np.ndarray, wm: np.ndarray, mode: str) -> int:
    op = WindowOperator(config)
    emitted = 0
    ts_list, wm_list = ts.tolist(), wm.tolist()
    for a in range(0, len(keys), BATCH):
        b = min(a + BATCH, len(keys))
        if mode == "vectorized":
            op.process_batch(RowBatch(keys[a:b], ts[a:b], (), wm[a:b]))
        else:
            advance, process = op.advance_watermark, op.process_element
            for i in range(a, b):
                advance(wm_list[i])
                process(keys[i], ts_list[i], ())
        emitted += len(op.drain())
    op.end_of_input()
    return emitted + len(op.drain())


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--events", type=int, default=200_000)
    ap.add_argument("--no-key", action="store_true")
    args = ap.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="wql-slicing-") as tmp:
        nexmark.generate(Path(tmp), args.events, 10_000)
        bids = pq.read_table(Path(tmp) / "bid").sort_by("seq")
    ts = bids.column("dateTime").cast("int64").to_numpy()
    before = np.maximum.accumulate(ts)
    wm = np.concatenate(([-(2**63)], before[:-1] - nexmark.WATERMARK_S * 1000 - 1))
    keys: list[Any] = (
        [()] * len(ts) if args.no_key else [(a,) for a in bids.column("auction").to_pylist()]
    )
    print(
        f"{len(ts):,} bids of {args.events:,} Nexmark events, "
        f"{'one key' if args.no_key else f'{len(set(keys)):,} auctions'}, "
        f"load average {os.getloadavg()[0]:.2f}"
    )
    print()
    print("| query | path | CPU s | rows/s (CPU) | rows out | peak MiB |")
    print("|---|---|---:|---:|---:|---:|")
    for name, assigner in QUERIES:
        config = OperatorConfig(assigner, AGGS)
        for mode in ("vectorized", "per-window"):
            started = time.process_time()
            out = run(config, keys, ts, wm, mode)
            cpu = time.process_time() - started
            tracemalloc.start()
            run(config, keys, ts, wm, mode)
            peak = tracemalloc.get_traced_memory()[1]
            tracemalloc.stop()
            print(
                f"| {name} | {mode} | {cpu:.2f} | {len(ts) / cpu:,.0f} | {out:,} | "
                f"{peak / 2**20:.1f} |",
                flush=True,
            )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
