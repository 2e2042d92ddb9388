"""Text environments for the reference trainer (Gymnasium-style, deterministic).

``make_env(name, **options)`` builds one; ``ENVS`` maps the names (frozenlake, bandit,
sokoban) to their classes; ``vocabulary()`` is every word they and their experts use.
"""

from __future__ import annotations

from typing import Any

from .bandit import Bandit
from .base import ExpertStep, TextEnv
from .frozenlake import FrozenLake
from .sokoban import Sokoban

ENVS: dict[str, type[TextEnv]] = {"frozenlake": FrozenLake, "bandit": Bandit, "sokoban": Sokoban}


def make_env(name: str, **options: Any) -> TextEnv:
    """A fresh environment by name; ``options`` go to its constructor."""
    try:
        cls = ENVS[name]
    except KeyError:
        raise ValueError(f"unknown env {name!r}; choose from {sorted(ENVS)}") from None
    return cls(**options)


def vocabulary() -> list[str]:
    """All words of all environments, in a stable order, without duplicates."""
    words: dict[str, None] = {}
    for cls in ENVS.values():
        for word in cls.vocabulary:
            words.setdefault(word, None)
    return list(words)


__all__ = [
    "ENVS",
    "Bandit",
    "ExpertStep",
    "FrozenLake",
    "Sokoban",
    "TextEnv",
    "make_env",
    "vocabulary",
]
