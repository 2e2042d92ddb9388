"""Detection benchmark: do the detectors catch each failure, how fast, how often wrongly?

Scores every scenario of :mod:`benchmarks.detection.scenarios` (several seeds each)
step by step with ``collapsewatch.scoring.score_step`` (TF-IDF), replays the series
through ``collapsewatch.detect.replay``, and compares the alerts with the ground
truth. The real shared data (trl_vqa healthy_r4 and format_collapse_r2, the verl
GSM8K step) run through the same path from their importers.

Reported, per scenario and detector:

- detection delay: steps from the onset to the first ``firing`` event of the rule
  meant to catch the scenario (median, max over seeds), and misses (no firing at or
  after the onset);
- alarms: in how many runs each rule fired at or after the onset (the intended rule
  and the others);
- false alarms per 1,000 healthy steps: ``firing`` events at steps before the onset
  (all steps of a healthy run), per rule.

The same numbers for the baseline a user has today: an entropy rule on
``diversity.token_entropy`` (fires after 3 consecutive steps under an absolute floor
of 0.2 nats/token or under half its mean over the first 5 steps).

Run from the repository root::

    python -m benchmarks.detection.run --jobs 2           # 4 seeds x 60 steps, ~3 min
    python -m benchmarks.detection.run --seeds 2 --no-real
    python -m benchmarks.detection.run --write benchmarks/detection/RESULTS.md
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from benchmarks.detection.scenarios import EXPECTED_RULE, SCENARIOS, generate, truth
from collapsewatch.detect import (
    RULES,
    AlertEvent,
    AlertStateMachine,
    DetectorSettings,
    Verdict,
    replay,
)
from collapsewatch.detect.history import History
from collapsewatch.detect.rules import RULE_FUNCTIONS
from collapsewatch.scoring import METRIC_NAMES, score_step, score_steps

SHARED = Path(__file__).resolve().parents[2].parent / "shared" / "data"
REAL = (
    # name, path under the shared data folder, onset, rule expected
    ("real:healthy_r4", "trl_vqa/healthy_r4.rollout_results.md", None, None),
    (
        "real:format_collapse_r2",
        "trl_vqa/format_collapse_r2.rollout_results.md",
        11,
        "format_collapse",
    ),
    ("real:verl_gsm8k_step2", "verl_gsm8k_tool/step2.jsonl", None, None),
)
BASELINE = "entropy_baseline"
ENTROPY_FLOOR = 0.2
ENTROPY_DROP = 0.5
ENTROPY_CLEAR = 0.7
ENTROPY_BASE_STEPS = 5
ENTROPY_MIN_STEPS = 3


@dataclass
class RunResult:
    """One run's ground truth and the alerts raised on it."""

    scenario: str
    seed: int | None
    steps: list[int]
    onset: int | None
    expected: str | None
    events: list[AlertEvent]
    baseline_events: list[AlertEvent]
    seconds: float
    extra: dict[str, object] = field(default_factory=dict)
    profile: dict[str, dict[str, object]] = field(default_factory=dict)

    def healthy_steps(self) -> int:
        return sum(1 for s in self.steps if self.onset is None or s < self.onset)

    def firings(self, rule: str) -> list[int]:
        events = self.baseline_events if rule == BASELINE else self.events
        return [e.step for e in events if e.rule == rule and e.state == "firing"]

    def delay(self, rule: str) -> int | None:
        """Steps from onset to the rule's first firing at or after it (0 when it was
        already firing at the onset); None = missed."""
        if self.onset is None:
            return None
        events = self.baseline_events if rule == BASELINE else self.events
        active = False
        for e in events:
            if e.rule != rule:
                continue
            if e.step < self.onset:
                active = e.state == "firing"
                continue
            if e.state == "firing":
                return e.step - self.onset
        return 0 if active else None

    def false_alarms(self, rule: str) -> int:
        return sum(1 for s in self.firings(rule) if self.onset is None or s < self.onset)

    def fired_after_onset(self, rule: str) -> bool:
        return any(self.onset is None or s >= self.onset for s in self.firings(rule))


def _ratios(evidence: dict[str, object]) -> list[float]:
    """The smoothed/baseline ratios a verdict's evidence reports."""
    out = []
    if isinstance(evidence.get("ratio"), float):
        out.append(evidence["ratio"])  # type: ignore[arg-type]
    for sig in evidence.get("signals", []) or []:  # type: ignore[union-attr]
        if isinstance(sig, dict) and isinstance(sig.get("ratio"), float):
            out.append(sig["ratio"])
    return out


def verdict_profile(
    series: dict[int, dict[str, float | None]], healthy_until: int | None
) -> dict[str, dict[str, object]]:
    """How close each rule came to firing, before the state machine: per rule, the steps
    judged bad, the steps whose bad judgement a guard suppressed, and the lowest
    smoothed/baseline ratio seen on healthy steps (the headroom under a fire fraction)."""
    h = History(series)
    s = DetectorSettings()
    out: dict[str, dict[str, object]] = {}
    for rule in RULES:
        bad, suppressed, low = [], [], None
        for i, step in enumerate(h.steps):
            v = RULE_FUNCTIONS[rule](h, i, s)
            if v.status == "bad":
                bad.append(step)
            elif "suppressed_by" in v.evidence:
                sup = v.evidence["suppressed_by"]
                suppressed.append((step, sup.get("rule") if isinstance(sup, dict) else sup))
            if healthy_until is None or step < healthy_until:
                for r in _ratios(v.evidence):
                    low = r if low is None else min(low, r)
        out[rule] = {"bad": bad, "suppressed": suppressed, "min_healthy_ratio": low}
    return out


def entropy_baseline(series: dict[int, dict[str, float | None]]) -> list[AlertEvent]:
    """Today's monitoring: token entropy under a floor or under half its early mean."""
    machine = AlertStateMachine(
        BASELINE, min_steps=ENTROPY_MIN_STEPS, clear_steps=3, cooldown_steps=10
    )
    early: list[float] = []
    events = []
    for step in sorted(series):
        h = series[step].get("diversity.token_entropy")
        if h is None:
            verdict = Verdict("unknown")
        else:
            if len(early) < ENTROPY_BASE_STEPS:
                early.append(h)
            ref = statistics.fmean(early) if len(early) == ENTROPY_BASE_STEPS else None
            low = h < ENTROPY_FLOOR or (ref is not None and h < ENTROPY_DROP * ref)
            ok = h >= ENTROPY_FLOOR and (ref is None or h >= ENTROPY_CLEAR * ref)
            verdict = Verdict("bad" if low else "clear" if ok else "hold", "warning", "")
        event = machine.update(step, verdict)
        if event is not None:
            events.append(event)
    return events


def run_scenario(args: tuple[str, int, int]) -> RunResult:
    scenario, seed, steps = args
    t0 = time.perf_counter()
    series = {
        s: score_step(rollouts).metrics
        for s, rollouts in enumerate(generate(scenario, seed, steps))
    }
    t = truth(scenario, seed, steps)
    return RunResult(
        scenario=scenario,
        seed=seed,
        steps=sorted(series),
        onset=t.onset,
        expected=EXPECTED_RULE[scenario],
        events=replay(series),
        baseline_events=entropy_baseline(series),
        seconds=time.perf_counter() - t0,
        extra={"states": t.states, "per_state": t.per_state, "ramp": t.ramp},
        profile=verdict_profile(series, t.onset),
    )


def run_real(name: str, rel: str, onset: int | None, expected: str | None) -> RunResult | None:
    from collapsewatch.importers import load_rollouts

    path = SHARED / rel
    if not path.exists():
        print(f"skipping {name}: {path} not found", file=sys.stderr)
        return None
    t0 = time.perf_counter()
    series = {s.step: s.metrics for s in score_steps(list(load_rollouts(path)))}
    return RunResult(
        scenario=name,
        seed=None,
        steps=sorted(series),
        onset=onset,
        expected=expected,
        events=replay(series),
        baseline_events=entropy_baseline(series),
        seconds=time.perf_counter() - t0,
        profile=verdict_profile(series, onset),
    )


def _fmt_delay(delays: list[int | None]) -> tuple[str, str, str, str]:
    found = [d for d in delays if d is not None]
    misses = len(delays) - len(found)
    if not found:
        return f"0/{len(delays)}", "-", "-", str(misses)
    med = statistics.median(found)
    return f"{len(found)}/{len(delays)}", f"{med:g}", str(max(found)), str(misses)


def tables(results: Sequence[RunResult]) -> str:
    """The benchmark's Markdown tables."""
    names = list(dict.fromkeys(r.scenario for r in results))
    by = {n: [r for r in results if r.scenario == n] for n in names}
    out = []

    out.append("### Detection of each scenario by its rule, and by the entropy baseline\n")
    out.append(
        "| scenario | runs | rule | detected | delay median | delay max | misses "
        "| entropy baseline detected | baseline delay median | baseline misses |"
    )
    out.append("|---|---|---|---|---|---|---|---|---|---|")
    for n in names:
        rs = by[n]
        exp = rs[0].expected
        if exp is None or rs[0].onset is None:
            out.append(f"| {n} | {len(rs)} | (none should fire) | - | - | - | - | - | - | - |")
            continue
        det, med, mx, miss = _fmt_delay([r.delay(exp) for r in rs])
        bdet, bmed, _, bmiss = _fmt_delay([r.delay(BASELINE) for r in rs])
        out.append(
            f"| {n} | {len(rs)} | {exp} | {det} | {med} | {mx} | {miss} | {bdet} | {bmed} "
            f"| {bmiss} |"
        )

    out.append(
        "\n### Runs in which each rule fired (at or after the onset; any step when healthy)\n"
    )
    cols = [*RULES, BASELINE]
    out.append(
        "| scenario | " + " | ".join(cols) + " | runs where a guard held template_collapse |"
    )
    out.append("|---|" + "---|" * (len(cols) + 1))
    for n in names:
        rs = by[n]
        cells = []
        for rule in cols:
            k = sum(r.fired_after_onset(rule) for r in rs)
            mark = "**" if rule == rs[0].expected else ""
            cells.append(f"{mark}{k}/{len(rs)}{mark}")
        held = [r for r in rs if r.profile and r.profile["template_collapse"]["suppressed"]]
        sup = [x for r in held for x in r.profile["template_collapse"]["suppressed"]]  # type: ignore[union-attr]
        by_rule = ", ".join(sorted({str(rule_) for _, rule_ in sup}))
        longest = max((_longest_run(r) for r in held), default=0)
        note = f" ({by_rule}; up to {longest} in a row)" if held else ""
        cells.append(f"{len(held)}/{len(rs)}{note}")
        out.append(f"| {n} | " + " | ".join(cells) + " |")

    out.append("\n### False alarms per 1,000 healthy steps (firing events before the onset)\n")
    synthetic = [r for r in results if r.seed is not None]
    real = [r for r in results if r.seed is None]
    out.append(
        "| rule | synthetic: alarms / healthy steps | per 1,000 "
        "| real data: alarms / healthy steps | per 1,000 |"
    )
    out.append("|---|---|---|---|---|")
    for rule in cols:
        row = [rule]
        for group in (synthetic, real):
            steps = sum(r.healthy_steps() for r in group)
            alarms = sum(r.false_alarms(rule) for r in group)
            rate = f"{1000 * alarms / steps:.1f}" if steps else "-"
            row += [f"{alarms} / {steps}", rate]
        out.append("| " + " | ".join(row) + " |")

    out.append(
        "\n### Headroom on healthy steps: lowest smoothed value / baseline a rule saw "
        "(fires under its fire fraction)\n"
    )
    fractions = {
        "template_collapse": "template_fire_fraction",
        "entropy_collapse": "entropy_fire_fraction",
        "format_collapse": "format_fire_fraction",
    }
    s = DetectorSettings()
    out.append(
        "| rule | fire fraction | synthetic healthy steps: lowest ratio "
        "| real healthy steps: lowest ratio |"
    )
    out.append("|---|---|---|---|")
    for rule, setting in fractions.items():
        cells = []
        for group in (synthetic, real):
            lows = [r.profile[rule]["min_healthy_ratio"] for r in group if r.profile]
            lows = [x for x in lows if isinstance(x, float)]
            cells.append(f"{min(lows):.2f}" if lows else "-")
        out.append(f"| {rule} | {getattr(s, setting)} | {cells[0]} | {cells[1]} |")
    return "\n".join(out)


def real_events(results: Sequence[RunResult]) -> str:
    out = []
    for r in results:
        if r.seed is not None:
            continue
        out.append(f"\n#### {r.scenario} ({len(r.steps)} steps, onset {r.onset})\n")
        if not r.events:
            out.append("No alert.")
        for e in r.events:
            out.append(f"- step {e.step}: {e.rule} {e.state} ({e.severity}): {e.message}")
            if e.rule == "no_signal" and e.state == "firing":
                out.append(f"  - saturated_at: {e.evidence.get('saturated_at')}")
        near = []
        for rule, prof in r.profile.items():
            bad = list(prof["bad"])  # type: ignore[call-overload]
            sup = list(prof["suppressed"])  # type: ignore[call-overload]
            if not bad and not sup:
                continue
            parts = []
            if bad:
                parts.append(f"bad at {len(bad)} steps {_span(bad)}")
            if sup:
                by = ", ".join(sorted({str(rule_) for _, rule_ in sup}))
                parts.append(
                    f"{len(sup)} more bad steps {_span([st for st, _ in sup])} held by {by}"
                )
            near.append(f"  - {rule}: " + "; ".join(parts))
        if near:
            out.append("- Step verdicts before the state machine (min steps, cooldown):")
            out.extend(near)
    return "\n".join(out)


def _longest_run(r: RunResult) -> int:
    """Most consecutive scored steps at which a guard held template_collapse's bad
    verdict (2 in a row would have fired it without the guard)."""
    held = {st for st, _ in r.profile["template_collapse"]["suppressed"]}  # type: ignore[union-attr]
    best = cur = 0
    for step in r.steps:
        cur = cur + 1 if step in held else 0
        best = max(best, cur)
    return best


def _span(steps: Sequence[int]) -> str:
    if not steps:
        return ""
    return f"(steps {steps[0]}-{steps[-1]})" if len(steps) > 1 else f"(step {steps[0]})"


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seeds", type=int, default=4, help="runs per scenario")
    parser.add_argument("--steps", type=int, default=60, help="steps per synthetic run")
    parser.add_argument("--scenario", action="append", choices=SCENARIOS, help="only these")
    parser.add_argument("--no-real", action="store_true", help="skip the shared real data")
    parser.add_argument("--jobs", type=int, default=1, help="worker processes")
    parser.add_argument("--write", type=Path, help="also write the report (Markdown) here")
    args = parser.parse_args(argv)

    t0 = time.perf_counter()
    jobs = [
        (sc, seed, args.steps) for sc in args.scenario or SCENARIOS for seed in range(args.seeds)
    ]
    if args.jobs > 1:
        from multiprocessing import Pool

        with Pool(args.jobs) as pool:
            results = pool.map(run_scenario, jobs)
    else:
        results = [run_scenario(j) for j in jobs]
    if not args.no_real:
        for spec in REAL:
            got = run_real(*spec)
            if got is not None:
                results.append(got)
    elapsed = time.perf_counter() - t0

    command = "python -m benchmarks.detection.run " + " ".join(
        argv if argv is not None else sys.argv[1:]
    )
    masked = [m for m in METRIC_NAMES if m.startswith("responsiveness.")]
    report = "\n".join(
        [
            "# Detection benchmark results",
            "",
            f"Command: `{command.strip()}`  ",
            f"Runs: {len(results)} ({args.seeds} seeds x {len(args.scenario or SCENARIOS)} "
            f"scenarios x {args.steps} steps, plus real data); {elapsed:.0f} s on this machine.  ",
            f"Responsiveness metrics scored: {', '.join(masked)}.",
            "",
            tables(results),
            "",
            "### Real shared data: every alert",
            real_events(results),
        ]
    )
    print(report)
    if args.write:
        args.write.write_text(report + "\n")


if __name__ == "__main__":
    main()
