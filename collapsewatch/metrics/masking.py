"""Copy masking: take out of the reasoning what it copied from the observation.

A collapsed template can still fill its slots with the state's surface tokens ("I am
at (2,3), so I move Right" for every state). Lexical and semantic similarity, and the
policy's own log-probabilities, then tie each reasoning to its state through the
copied tokens alone, and the responsiveness metrics read high on reasoning that adds
nothing state-specific. ``responsiveness.mi_embed_masked`` and
``responsiveness.retrieval_embed_masked`` are the text-only estimators computed after
:func:`mask_copied` has replaced the copied tokens by a placeholder: what is left ties
to the state only through what the reasoning made of it (a conclusion, a plan).

What counts as copied (choice and measurements in docs/metrics.md, "Copy-aware
responsiveness"): every word token (``\\w+``, case-insensitive, single characters and
digits included, so coordinates and numbers are caught) of the reasoning that occurs
in an observation the policy had seen by then, except tokens that occur in the
first-turn observation of *every* state of the step. Those shared tokens are the
environment's boilerplate (the instructions, the list of legal moves); they cannot
tell one state from another, and masking them would erase honest conclusions such
as "so I move Down" whenever the observation lists the moves.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from functools import lru_cache

from .representation import TOKEN_PATTERN

_TOKEN = re.compile(TOKEN_PATTERN)
# The same tokens (str patterns are Unicode already, so TOKEN_PATTERN's "(?u)" is
# dropped) as a capturing split: text parts at even, tokens at odd positions.
_SPLIT = re.compile(r"(\b\w+\b)")
PLACEHOLDER = "_"
"""What a copied token becomes: one neutral token, the same in every text, so that the
template's word order around the slot is kept ("at _ _")."""


@lru_cache(maxsize=4096)
def tokens(text: str) -> frozenset[str]:
    """The lower-cased word tokens of a text (the TF-IDF token pattern).

    Cached: the rollouts of a group share their observations.
    """
    return frozenset(t.lower() for t in _TOKEN.findall(text))


def shared_tokens(observations: Iterable[str]) -> frozenset[str]:
    """Tokens that occur in every one of the given (non-empty) observations.

    Args:
        observations: one observation per distinct state (the scorer passes each
            state's first-turn observation). Empty ones (a trainer that sends none)
            are skipped.

    Returns:
        The intersection of their token sets; empty when fewer than 2 observations are
        non-empty (one observation alone cannot tell boilerplate from state).
    """
    sets = [tokens(obs) for obs in observations if obs.strip()]
    if len(sets) < 2:
        return frozenset()
    return frozenset.intersection(*sets)


def _mask(text: str, copied: set[str] | frozenset[str], placeholder: str) -> str:
    if not copied:
        return text
    parts = _SPLIT.split(text)
    parts[1::2] = [placeholder if w.lower() in copied else w for w in parts[1::2]]
    return "".join(parts)


def mask_copied(
    text: str, seen: str, *, keep: Iterable[str] = (), placeholder: str = PLACEHOLDER
) -> str:
    """Replace every token of ``text`` that also occurs in ``seen`` by a placeholder.

    Args:
        text: a reasoning text.
        seen: the observation text the policy had seen when it wrote ``text``.
        keep: tokens never masked (:func:`shared_tokens` of the step).
        placeholder: the replacement (default ``"_"``).

    Returns:
        ``text`` with each copied token (whole ``\\w+`` word, case-insensitive)
        replaced; everything else, punctuation and spacing included, unchanged.
        Source: collapsewatch (issue 3, copy-aware responsiveness).
    """
    return _mask(text, tokens(seen) - set(keep), placeholder)


def mask_turns(
    reasoning: Sequence[str],
    observations: Sequence[str],
    *,
    keep: Iterable[str] = (),
    placeholder: str = PLACEHOLDER,
) -> list[str]:
    """Mask each turn's text against the observations of that turn and the ones before.

    Args:
        reasoning: ``(T,)`` one rollout's texts in turn order.
        observations: ``(T,)`` the observation of each of those turns.
        keep: tokens never masked (:func:`shared_tokens`).
        placeholder: the replacement.

    Returns:
        ``(T,)`` masked texts: turn t's text masked by :func:`mask_copied` against
        observations 0..t, what the policy had seen when it wrote it (a template that
        restates the current position each turn is caught on every turn, not only
        the first). For a one-turn rollout this is the first-turn observation.
    """
    if len(reasoning) != len(observations):
        raise ValueError(
            f"reasoning has {len(reasoning)} turns but observations has {len(observations)}"
        )
    keep = frozenset(keep)
    out: list[str] = []
    seen: set[str] = set()
    for text, obs in zip(reasoning, observations, strict=True):
        seen |= tokens(obs)
        out.append(_mask(text, seen - keep, placeholder))
    return out
