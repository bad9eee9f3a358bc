"""The operator of a stage's configuration, and the fast paths of ``WindowOperator``.

``make_operator(config)`` is what a host runs for one query: a
``WindowOperator`` for an ``OperatorConfig`` (a windowed aggregate), a
``WindowRankOperator`` for a ``RankConfig`` (a window Top-N or
deduplication), a ``WindowJoinOperator`` for a ``JoinConfig`` (a window join
on a stream). They speak the host contract of docs/architecture.md ("the
runtime as the Spark host sees it").

This module also picks ``WindowOperator``'s fast paths (:func:`choose_path`)
and installs them in the operator core when it is imported (which
``wql.runtime``'s ``__init__`` does, so before any operator exists): the
core (``wql.runtime.window_operator``) imports none of its fast paths, they
import it (``tests/runtime/test_imports.py`` holds the runtime's imports
free of cycles).
"""

from __future__ import annotations

from typing import Any

from wql.runtime.columnar import ColumnarWindows
from wql.runtime.fastpath import CountSessionPath, RowPath, SessionPath, WindowPath
from wql.runtime.join import JoinConfig, WindowJoinOperator
from wql.runtime.over import OverAggregateOperator, OverConfig
from wql.runtime.rank import RankConfig, WindowRankOperator
from wql.runtime.vectorized import try_process_batch
from wql.runtime.window_operator import FastPaths, WindowOperator, install_fast_paths

__all__ = ["choose_path", "make_operator"]


def make_operator(config: Any) -> Any:
    """A fresh operator for ``config``."""
    if isinstance(config, RankConfig):
        return WindowRankOperator(config)
    if isinstance(config, JoinConfig):
        return WindowJoinOperator(config)
    if isinstance(config, OverConfig):
        return OverAggregateOperator(config)
    return WindowOperator(config)


def choose_path(op: WindowOperator) -> RowPath | None:
    """The fastest per-row path for ``op``'s configuration (None: the plain methods)."""
    config = op.config
    if config.changelog:
        # The changelog keeps each window's last row and retracts it on merges
        # and cleanups: the plain port's merge callback and cleanup do that.
        return None
    if config.assigner.is_merging:
        if SessionPath.applies(config):
            return SessionPath(op)
        return CountSessionPath(op) if CountSessionPath.applies(config) else None
    if not WindowPath.applies(config):
        return None
    path = WindowPath(op)
    if config.extended_rows:
        return path  # the columnar arrays emit their firings without the marks
    # HOP / CUMULATE at lateness 0: (key, slice) columns for batches (wql.runtime.columnar)
    return ColumnarWindows(op, path) if ColumnarWindows.applies(config) else path


install_fast_paths(FastPaths(choose=choose_path, process_batch=try_process_batch))
