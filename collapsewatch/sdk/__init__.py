"""The collapsewatch Python SDK: send rollouts from a trainer to a collapsewatch server.

The public names are re-exported from ``collapsewatch``; see its docstring for a
quickstart and docs/sdk.md for the details.
"""

from collapsewatch.sdk._client import Client, ClientStats
from collapsewatch.sdk._default import (
    complete_step,
    finish,
    flush,
    get_client,
    init,
    log_cross_scores,
    log_rollouts,
)
from collapsewatch.sdk.hook import CollapsewatchHook, TrainingHook

__all__ = [
    "Client",
    "ClientStats",
    "CollapsewatchHook",
    "TrainingHook",
    "complete_step",
    "finish",
    "flush",
    "get_client",
    "init",
    "log_cross_scores",
    "log_rollouts",
]
