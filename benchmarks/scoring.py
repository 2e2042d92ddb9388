"""Benchmark: how long ``score_step`` takes on a real step, against the bare embedding.

Loads one real verl step (GSM8K with a tool, 1,024 rollouts in 64 groups of 16) and
times, in the same process:

- ``score_step(..., representation="tfidf")`` and the bare TF-IDF ``fit_transform`` of
  the same texts;
- ``score_step(..., representation="minilm")`` and the bare MiniLM encode of the same
  stratified sample (model load timed apart, it happens once per process);
- the parts that the copy-aware and Vendi metrics add (TF-IDF): masking the copied
  tokens, the second TF-IDF fit on the masked texts, and the Vendi eigen-decomposition.

It prints rollouts/s and the ratio of ``score_step`` to the bare representation: the
share of the step's scoring time that is not the embedding itself.

Run (from the repository root)::

    python benchmarks/scoring.py                       # both representations
    python benchmarks/scoring.py --skip-minilm         # TF-IDF only (seconds)
    python benchmarks/scoring.py --path other.jsonl --embed-max-tokens 256
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
import os
import statistics
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from collapsewatch.metrics import diversity, masking, responsiveness
from collapsewatch.metrics import representation as rep
from collapsewatch.schema import Rollout, Turn
from collapsewatch.scoring import masked_segments, rollout_text, score_step

DEFAULT_PATH = Path("/work/shared/data/verl_gsm8k_tool/step2.jsonl")


def load(path: Path) -> tuple[list[Rollout], str]:
    """The step's rollouts, through the verl importer when it is there."""
    try:
        from collapsewatch.importers import load_rollouts
    except ImportError:
        load_rollouts = None
    if load_rollouts is not None:
        return list(load_rollouts(path, format="verl")), "collapsewatch.importers (verl)"
    # Fallback: group = exact input string, one turn whose reasoning is the output.
    rollouts = []
    with path.open() as f:
        for k, line in enumerate(f):
            row = json.loads(line)
            rollouts.append(
                Rollout(
                    rollout_id=str(row.get("request_id") or k),
                    step=int(row["step"]),
                    state_id=hashlib.sha256(row["input"].encode()).hexdigest()[:16],
                    reward=float(row["score"]),
                    turns=[Turn(index=0, observation=row["input"], reasoning=row["output"])],
                )
            )
    return rollouts, "built from the JSON directly (importer not available)"


def timed(fn: Callable[[], Any], repeat: int) -> tuple[float, Any]:
    """Median wall time of ``repeat`` calls (seconds) and the last result."""
    times, result = [], None
    for _ in range(repeat):
        t0 = time.perf_counter()
        result = fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times), result


def report(label: str, n: int, t_score: float, t_bare: float, n_bare: int) -> None:
    print(
        f"{label:<7} score_step {t_score * 1e3:9.1f} ms  ({n / t_score:8.1f} rollouts/s)   "
        f"bare representation {t_bare * 1e3:9.1f} ms  ({n_bare / t_bare:8.1f} texts/s)   "
        f"score_step / bare = {t_score / t_bare:5.2f}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--path", type=Path, default=DEFAULT_PATH)
    parser.add_argument("--repeat", type=int, default=3, help="TF-IDF timing repeats")
    parser.add_argument("--minilm-repeat", type=int, default=1)
    parser.add_argument("--embed-max-texts", type=int, default=256)
    parser.add_argument("--embed-max-tokens", type=int, default=128)
    parser.add_argument("--mi-temperature", type=float, default=0.1)
    parser.add_argument("--skip-minilm", action="store_true")
    args = parser.parse_args()

    t0 = time.perf_counter()
    rollouts, source = load(args.path)
    t_load = time.perf_counter() - t0
    texts = [rollout_text(r) for r in rollouts]
    states = [r.state_id for r in rollouts]
    n = len(rollouts)
    print(f"{args.path}: {n} rollouts, {len(set(states))} states, step {rollouts[0].step}")
    print(f"loaded via {source} in {t_load:.2f} s")
    print(
        f"text length: mean {statistics.mean(map(len, texts)):.0f} chars, "
        f"max {max(map(len, texts))}; cpu count {os.cpu_count()}"
    )
    print()

    kw = {"mi_temperature": args.mi_temperature}
    t_score, tfidf_score = timed(lambda: score_step(rollouts, **kw), args.repeat)
    t_bare, _ = timed(lambda: rep.tfidf(texts), args.repeat)
    report("tfidf", n, t_score, t_bare, n)
    keep = masking.shared_tokens({r.state_id: r.turns[0].observation for r in rollouts}.values())
    t_mask, masked = timed(
        lambda: ["\n".join(masked_segments(r, keep)) for r in rollouts], args.repeat
    )
    t_fit2, _ = timed(lambda: rep.tfidf(masked), args.repeat)
    embeddings = rep.tfidf(texts)
    t_vendi, _ = timed(lambda: diversity.vendi(embeddings), args.repeat)
    print(
        f"        of which: copy masking {t_mask * 1e3:.1f} ms, masked TF-IDF fit "
        f"{t_fit2 * 1e3:.1f} ms, Vendi {t_vendi * 1e3:.1f} ms "
        f"({sum(a != b for a, b in zip(masked, texts, strict=True))} of {n} texts changed)"
    )

    minilm_score = None
    if not args.skip_minilm:
        t0 = time.perf_counter()
        rep.load_minilm()
        t_model = time.perf_counter() - t0
        sample = rep.stratified_sample(states, args.embed_max_texts, seed=0)
        sampled = [texts[i] for i in sample]
        mkw = {
            "representation": "minilm",
            "embed_max_texts": args.embed_max_texts,
            "embed_max_tokens": args.embed_max_tokens,
            **kw,
        }
        t_score_m, minilm_score = timed(lambda: score_step(rollouts, **mkw), args.minilm_repeat)
        t_bare_m, _ = timed(
            lambda: rep.minilm(sampled, max_tokens=args.embed_max_tokens), args.minilm_repeat
        )
        report("minilm", n, t_score_m, t_bare_m, len(sample))
        print(
            f"        (model load {t_model:.1f} s, once per process; {len(sample)} of {n} "
            f"rollouts embedded at <= {args.embed_max_tokens} tokens)"
        )

    print()
    print(f"{'metric':<34}{'tfidf':>12}{'minilm':>12}")
    for name, value in tfidf_score.metrics.items():
        other = minilm_score.metrics[name] if minilm_score else None
        cells = ["None" if v is None else f"{v:.4f}" for v in (value, other)]
        if minilm_score is None:
            cells[1] = "-"
        print(f"{name:<34}{cells[0]:>12}{cells[1]:>12}")
    raw = responsiveness.mi_embed(
        rep.tfidf(texts), states, temperature=args.mi_temperature, null_permutations=0
    )
    log_n = math.log(len(set(states)))
    print(f"{'  tfidf mi_embed, no null correction':<34}{raw:>12.4f}   (log N = {log_n:.4f})")


if __name__ == "__main__":
    main()
