"""The operator of a configuration: what a host runs for one query.

``WindowOperator`` for an ``OperatorConfig`` (a windowed aggregate),
``WindowRankOperator`` for a ``RankConfig`` (a window Top-N or
deduplication), ``WindowJoinOperator`` for a ``JoinConfig`` (a window join
on a stream). They speak the host contract of docs/architecture.md
("the runtime as the Spark host sees it").
"""

from __future__ import annotations

from typing import Any

from wql.runtime.join import JoinConfig, WindowJoinOperator
from wql.runtime.rank import RankConfig, WindowRankOperator
from wql.runtime.window_operator import WindowOperator

__all__ = ["make_operator"]


def make_operator(config: Any) -> Any:
    """A fresh operator for ``config``."""
    if isinstance(config, RankConfig):
        return WindowRankOperator(config)
    if isinstance(config, JoinConfig):
        return WindowJoinOperator(config)
    return WindowOperator(config)
