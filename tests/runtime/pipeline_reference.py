"""The reference of the pipeline tests: a chain of operators in one global sequential
run, the way Flink runs it at parallelism 1 (``docs/architecture.md``, "Contract:
pipelines"); ``test_pipeline.py``'s module docstring states the order it follows.
Shared by ``tests/runtime/test_pipeline.py`` and ``tests/spark/test_pipelines.py``."""

from __future__ import annotations

from wql.runtime import OperatorConfig, WindowOperator
from wql.runtime.config import EMITTED_FIELDS, FIRED_BY_ROW
from wql.runtime.pipeline import CLASS_ROW, CLASS_TIMER, rise_step, row_step
from wql.runtime.windows import MAX_TIME, MIN_TIME

N = len(EMITTED_FIELDS)

DELAY = 2


def watermarks(rows: list) -> tuple[list[int], int]:
    """Each row's watermark_before (max ts before it - delay - 1), and the one after all."""
    out, seen = [], None
    for _, ts, _ in rows:
        out.append(MIN_TIME if seen is None else seen - DELAY - 1)
        seen = ts if seen is None else max(seen, ts)
    return out, (MIN_TIME if seen is None else seen - DELAY - 1)


def next_input(row: tuple, rekey: str) -> tuple[tuple, int, tuple]:
    """A stage's emitted row as the next stage's input: key, event time (window_time), values."""
    key = row[0]
    if rekey == "all":
        new_key: tuple = ()
    elif rekey == "ab":
        new_key = (key in (("a",), ("b",)),)  # a and b together
    else:
        new_key = key
    return new_key, row[3], (row[N],)  # the COUNT(*) of the upstream window


def order(row: tuple, a: int, b: int) -> tuple:
    """WQL's order of a tagged row among the rows fired at its step (module docstring).

    ``a``: the rank of the input row that fired it; ``b``: its emission number.
    """
    by, time = row[-3], row[-2]
    if by == FIRED_BY_ROW:
        return (CLASS_ROW, a, b)
    return (CLASS_TIMER, time, row[0], row[2], row[1], b)


def global_run(configs: list[OperatorConfig], rekeys: list[str], rows: list) -> list[list]:
    """Per stage: [(step, row)] in the global sequential order (the reference)."""
    ops = [WindowOperator(c, fast=False) for c in configs]
    out: list[list] = [[] for _ in ops]
    wms, final = watermarks(rows)

    def stage(k: int, step: int, inputs: list[tuple], rise: int | None) -> None:
        """Stage ``k`` at ``step``: its ``inputs`` (upstream rows, in order), then the rise."""
        op = ops[k]
        fired: list[tuple] = []
        for i, inp in enumerate(inputs):
            op.process_element(*inp)
            for j, r in enumerate(op.drain()):
                fired.append((order(r, i, j), r))
        if rise is not None:
            op.advance_watermark(rise)
            for j, r in enumerate(op.drain()):
                fired.append((order(r, 0, j), r))
        fired.sort(key=lambda e: e[0])
        out[k] += [(step, r) for _, r in fired]
        if k + 1 < len(ops):
            stage(k + 1, step, [next_input(r, rekeys[k + 1]) for _, r in fired], rise)

    prev = MIN_TIME
    for s, ((key, ts, v), wm) in enumerate(zip(rows, wms, strict=True)):
        if wm > prev:
            stage(0, rise_step(s), [], wm)
            prev = wm
        stage(0, row_step(s), [(key, ts, (v,))], None)
    end = len(rows)
    if final > prev:
        stage(0, rise_step(end), [], final)
    stage(0, rise_step(end + 1), [], MAX_TIME)
    return out
