"""Example rollouts for a template-collapse alert: one template, several states.

An alert that says "responsiveness fell" is believed once the user sees two or three
rollouts from different states that say the same thing. :func:`template_examples`
clusters the step's reasoning after masking what a template fills in per state
(numbers, and spans copied from the observation: the slot-filling kind of template,
"I am at (2,3), so I move Right" for every state) and returns rollouts from the
largest cluster that spans at least two states.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Sequence

import numpy as np
import scipy.sparse as sp

from collapsewatch.schema import Rollout

_TOKEN = re.compile(r"\w+|[^\w\s]")
_HAS_DIGIT = re.compile(r"\d")
NUM = "<num>"
COPY = "<copy>"


def rollout_reasoning(rollout: Rollout) -> str:
    """The rollout's reasoning text: non-empty reasoning of its turns in turn order
    joined by a newline; the actions instead when no turn has reasoning (the same text
    the scorer reads)."""
    turns = sorted(rollout.turns, key=lambda t: t.index)
    parts = [t.reasoning for t in turns if t.reasoning.strip()]
    return "\n".join(parts or [t.action for t in turns if t.action.strip()])


def mask_tokens(text: str, observation: str) -> list[str]:
    """Lower-cased tokens of ``text`` with every run of two or more tokens that also
    occurs (contiguously) in ``observation`` replaced by one ``<copy>`` token, and every
    remaining token with a digit replaced by ``<num>``."""
    tokens = _TOKEN.findall(text.lower())
    obs = _TOKEN.findall(observation.lower())
    obs_bigrams = set(zip(obs, obs[1:], strict=False))
    copied = [False] * len(tokens)
    for j in range(len(tokens) - 1):
        if (tokens[j], tokens[j + 1]) in obs_bigrams:
            copied[j] = copied[j + 1] = True
    out: list[str] = []
    for j, tok in enumerate(tokens):
        if copied[j]:
            if not out or out[-1] != COPY or not copied[j - 1]:
                out.append(COPY)
        elif _HAS_DIGIT.search(tok):
            out.append(NUM)
        else:
            out.append(tok)
    return out


def _tfidf(docs: list[list[str]]) -> sp.csr_matrix:
    """L2-normalised TF-IDF rows over word unigrams and bigrams (sublinear tf, smoothed
    idf), a small twin of the scorer's representation that needs only numpy/scipy."""
    vocab: dict[str, int] = {}
    rows, cols, vals = [], [], []
    for r, doc in enumerate(docs):
        grams = Counter(doc + [f"{a} {b}" for a, b in zip(doc, doc[1:], strict=False)])
        for g, c in grams.items():
            rows.append(r)
            cols.append(vocab.setdefault(g, len(vocab)))
            vals.append(1.0 + math.log(c))
    m = sp.csr_matrix((vals, (rows, cols)), shape=(len(docs), len(vocab)), dtype=np.float64)
    df = np.bincount(m.indices, minlength=len(vocab))
    idf = np.log((1.0 + len(docs)) / (1.0 + df)) + 1.0
    m = m @ sp.diags(idf)
    norms = np.sqrt(np.asarray(m.multiply(m).sum(axis=1)).reshape(-1))
    norms[norms == 0] = 1.0
    return sp.csr_matrix(sp.diags(1.0 / norms) @ m)


def _sample(state_ids: list[str], limit: int) -> list[int]:
    """At most ``limit`` indices, round robin over states in order of first appearance
    (deterministic, every state represented)."""
    if len(state_ids) <= limit:
        return list(range(len(state_ids)))
    by_state: dict[str, list[int]] = {}
    for i, sid in enumerate(state_ids):
        by_state.setdefault(sid, []).append(i)
    queues = list(by_state.values())
    picked: list[int] = []
    depth = 0
    while len(picked) < limit:
        for q in queues:
            if depth < len(q) and len(picked) < limit:
                picked.append(q[depth])
        depth += 1
    return sorted(picked)


def template_examples(
    rollouts: Sequence[Rollout],
    k: int = 3,
    *,
    similarity: float = 0.7,
    max_rollouts: int = 1024,
    max_chars: int = 300,
) -> list[dict[str, str]]:
    """Up to ``k`` rollouts from different states that share one reasoning template.

    The reasoning of each rollout (:func:`rollout_reasoning`) is masked
    (:func:`mask_tokens` against the rollout's observations) and represented by TF-IDF
    over word unigrams and bigrams. A cluster is a rollout (its centre) with every
    rollout whose masked reasoning has cosine similarity >= ``similarity`` with it; the
    chosen centre is the one whose cluster spans the most states (then has the most
    members, then comes first). Examples are the centre and, for each other state of the
    cluster, its member most similar to the centre, in decreasing similarity.

    Args:
        rollouts: one step's rollouts (the step an alert fired at).
        k: how many examples at most (>= 2).
        similarity: cosine threshold on masked TF-IDF; 0.7 groups instances of one
            template that differ in a filler word or two, and keeps apart reasoning
            that only shares a few stock phrases.
        max_rollouts: at most this many rollouts are compared (sampled round robin over
            states), so the similarity matrix stays small.
        max_chars: reasoning is truncated to this many characters (an ellipsis marks
            the cut).

    Returns:
        A list of ``{"state_id", "rollout_id", "reasoning"}`` with distinct state ids,
        or an empty list when no cluster spans two states.
    """
    if k < 2:
        raise ValueError("k must be >= 2: a template is shown across states")
    texts = [rollout_reasoning(r) for r in rollouts]
    keep = [i for i, t in enumerate(texts) if t.strip()]
    keep = [keep[j] for j in _sample([rollouts[i].state_id for i in keep], max_rollouts)]
    if len(keep) < 2:
        return []
    docs = []
    for i in keep:
        obs = "\n".join(t.observation for t in rollouts[i].turns)
        docs.append(mask_tokens(texts[i], obs))
    e = _tfidf(docs)
    sims = np.asarray((e @ e.T).todense())
    states = [rollouts[i].state_id for i in keep]
    linked = sims >= similarity - 1e-9
    np.fill_diagonal(linked, True)

    codes = {sid: n for n, sid in enumerate(dict.fromkeys(states))}
    onehot = np.zeros((len(keep), len(codes)))
    onehot[np.arange(len(keep)), [codes[sid] for sid in states]] = 1.0
    spans = ((linked @ onehot) > 0).sum(axis=1)
    sizes = linked.sum(axis=1)
    # lexsort: last key first; argmax of (spans, sizes) with the first index on ties.
    order = np.lexsort((np.arange(len(keep)), -sizes, -spans))
    centre = int(order[0])
    if spans[centre] < 2:
        return []
    chosen = [centre]
    seen = {states[centre]}
    for j in sorted(np.flatnonzero(linked[centre]), key=lambda j: (-sims[centre, j], j)):
        if states[j] not in seen and len(chosen) < k:
            chosen.append(int(j))
            seen.add(states[j])

    def cut(text: str) -> str:
        return text if len(text) <= max_chars else text[: max_chars - 1].rstrip() + "…"

    return [
        {
            "state_id": rollouts[keep[j]].state_id,
            "rollout_id": rollouts[keep[j]].rollout_id,
            "reasoning": cut(texts[keep[j]]),
        }
        for j in chosen
    ]
