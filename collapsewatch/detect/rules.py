"""The collapse rules: each judges one scored step of a run from the run's history.

A rule is a function ``(history, i, settings) -> Verdict`` that reads only positions
``<= i`` (causal). docs/detectors.md describes every rule, its inputs and thresholds.

Metric names are those of docs/metrics.md. A rule that prefers a metric the scorer
does not (yet) produce falls back to the next one; a metric that is undefined at a
step makes the rule ``unknown`` there, which neither advances nor resets an alert.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from .changepoint import cusum_fall, mean_ci, shift_pvalue
from .config import DetectorSettings
from .history import RETRIEVAL_ACC_CORRECTED, History, Window
from .state import UNKNOWN, Verdict

# -- metric names ---------------------------------------------------------------------
TOKEN_ENTROPY = "diversity.token_entropy"
WITHIN_STATE = "diversity.within_state"
DISTINCT_2 = "diversity.distinct_2"
CHAR_ENTROPY = "diversity.char_entropy"
VALID_FORMAT = "correctness.valid_format_rate"
REWARD_MEAN = "correctness.reward_mean"
SUCCESS_RATE = "correctness.success_rate"
GROUP_REWARD_STD = "correctness.group_reward_std"
ZERO_STD_FRACTION = "correctness.zero_std_fraction"
DISTINCT_STATES = "structure.distinct_states"
GROUP_SIZE_MIN = "structure.group_size_min"
GROUP_SIZE_MAX = "structure.group_size_max"
DUPLICATE_RATE = "structure.duplicate_rate"
NONFINITE = "structure.nonfinite"

# Responsiveness signals of template_collapse, (family, MI metric, retrieval metric).
# The copy-aware and log-prob families are preferred: a slot-filling template copies
# the state's tokens into fixed slots and keeps the plain text MI high (issue 3). The
# plain text family is the fallback when neither preferred family has a usable baseline.
PREFERRED_FAMILIES: tuple[tuple[str, str, str], ...] = (
    ("copy-aware", "responsiveness.mi_embed_masked", "responsiveness.retrieval_embed_masked"),
    ("log-prob", "responsiveness.mi_logprob", RETRIEVAL_ACC_CORRECTED),
)
FALLBACK_FAMILY: tuple[str, str, str] = (
    "text",
    "responsiveness.mi_embed",
    "responsiveness.retrieval_embed",
)

Rule = Callable[[History, int, DetectorSettings], Verdict]


def _pct(x: float) -> str:
    return f"{100 * x:.0f}%"


@dataclass(frozen=True)
class Relative:
    """A metric's recent smoothed value against its early baseline at one step."""

    name: str
    baseline: Window
    recent: Window
    current: float

    @property
    def value(self) -> float:
        return self.recent.median

    @property
    def ratio(self) -> float:
        return self.value / self.baseline.mean

    def evidence(self) -> dict[str, object]:
        lo, hi = mean_ci(self.recent.values)
        return {
            "metric": self.name,
            "value": self.value,
            "current": self.current,
            "ratio": self.ratio,
            "baseline": self.baseline.summary(),
            "window": {**self.recent.summary(), "ci95": [lo, hi]},
        }


def relative(
    h: History, name: str, i: int, s: DetectorSettings, *, window: int | None = None
) -> Relative | None:
    """The median of the metric's last ``window`` values after its baseline, against
    the baseline mean; None when the metric is undefined at ``i``, has no complete
    baseline or window yet, or its baseline mean is not positive (no ratio exists)."""
    tr = h.track(name)
    current = tr.at(i)
    if current is None:
        return None
    base = tr.first(s.baseline_steps, i)
    recent = tr.last(window or s.window_steps, i, skip=s.baseline_steps)
    if base is None or recent is None or base.mean <= 0:
        return None
    return Relative(name, base, recent, current)


def _text_diversity(h: History, i: int, s: DetectorSettings) -> Relative | None:
    """Diversity for the "diversity holds" checks: token entropy when the trainer sends
    it (its baseline exists), else within-state text diversity."""
    if h.track(TOKEN_ENTROPY).first(s.baseline_steps, i) is not None:
        return relative(h, TOKEN_ENTROPY, i, s)
    return relative(h, WITHIN_STATE, i, s)


def _format_ratio(h: History, i: int, s: DetectorSettings) -> Relative | None:
    """The valid-format rate against its baseline, from the last values up to ``i``
    (undefined at ``i`` itself is allowed: the guard uses the latest knowledge)."""
    tr = h.track(VALID_FORMAT)
    base = tr.first(s.baseline_steps, i)
    recent = tr.last(s.format_window_steps, i, skip=s.baseline_steps)
    if base is None or recent is None or base.mean <= 0:
        return None
    return Relative(VALID_FORMAT, base, recent, float(recent.values[-1]))


def _format_suppresses(h: History, i: int, s: DetectorSettings) -> Relative | None:
    """The format evidence when the valid-format rate is below its clear threshold:
    the reasoning text changed kind (a format collapse), so rules that read reasoning
    text stay silent. None when the format is fine or undefined."""
    fmt = _format_ratio(h, i, s)
    if fmt is not None and fmt.ratio < s.format_clear_fraction:
        return fmt
    return None


# -- template_collapse ------------------------------------------------------------------


def _family_signal(
    h: History, family: tuple[str, str, str], i: int, s: DetectorSettings
) -> str | None:
    """The family's metric to watch: its MI when the MI baseline shows input dependence,
    else its retrieval accuracy under the same condition; None when neither does (or
    neither has a baseline yet)."""
    _, mi, retrieval = family
    floors = ((mi, s.template_min_baseline_mi), (retrieval, s.template_min_baseline_retrieval))
    for name, floor in floors:
        base = h.track(name).first(s.baseline_steps, i)
        if base is not None and base.mean >= floor:
            return name
    return None


def _responsiveness_verdict(
    h: History, family: tuple[str, str, str], name: str, i: int, s: DetectorSettings
) -> tuple[str, dict[str, object], Relative | None]:
    rel = relative(h, name, i, s)
    if rel is None:
        return "unknown", {"family": family[0], "metric": name}, None
    ev: dict[str, object] = {"family": family[0], **rel.evidence()}
    if rel.ratio >= s.template_clear_fraction:
        return "clear", ev, rel
    if rel.ratio >= s.template_fire_fraction:
        return "hold", ev, rel
    p = shift_pvalue(rel.baseline.values, rel.recent.values, direction="less")
    ev["test"] = {"name": "mann-whitney-u, recent < baseline", "p": p, "alpha": s.alpha}
    if p >= s.alpha:
        return "hold", ev, rel
    tr = h.track(name)
    after = tr.values[s.baseline_steps : tr.count(i)]
    cs = cusum_fall(
        after,
        mean=rel.baseline.mean,
        sd=rel.baseline.sd,
        drift=s.cusum_drift,
        threshold=s.cusum_threshold,
    )
    steps_after = tr.steps[s.baseline_steps : tr.count(i)]
    ev["changepoint"] = {
        "method": "cusum",
        "statistic": cs.statistic,
        "alarm": cs.alarm,
        "alarm_step": None if cs.alarm_index is None else steps_after[cs.alarm_index],
        "onset_step": None if cs.change_index is None else steps_after[cs.change_index],
    }
    return "bad", ev, rel


def template_collapse(h: History, i: int, s: DetectorSettings) -> Verdict:
    """Responsiveness below ``template_fire_fraction`` of its early baseline (median of
    the recent window, confirmed by a one-sided Mann-Whitney test against the baseline
    window), while diversity holds and the format has not collapsed."""
    step = h.steps[i]
    families = [f for f in PREFERRED_FAMILIES if _family_signal(h, f, i, s)]
    if not families and _family_signal(h, FALLBACK_FAMILY, i, s):
        families = [FALLBACK_FAMILY]
    if not families:
        return UNKNOWN

    results = []
    for fam in families:
        name = _family_signal(h, fam, i, s)
        assert name is not None
        results.append(_responsiveness_verdict(h, fam, name, i, s))
    statuses = [r[0] for r in results]
    # Every family in brief; the one the verdict rests on is spread at the top level.
    signals = [
        {
            "family": ev["family"],
            "metric": ev["metric"],
            "status": st,
            "ratio": ev.get("ratio"),
            "p": ev["test"]["p"] if "test" in ev else None,  # type: ignore[index]
        }
        for st, ev, _ in results
    ]
    thresholds = {
        "fire_fraction": s.template_fire_fraction,
        "clear_fraction": s.template_clear_fraction,
        "diversity_hold": s.template_diversity_hold,
        "alpha": s.alpha,
    }
    evidence: dict[str, object] = {"step": step, "signals": signals, "thresholds": thresholds}

    if "bad" not in statuses:
        if all(st == "unknown" for st in statuses):
            return UNKNOWN
        if all(st == "clear" for st in statuses if st != "unknown"):
            known = [r for r in results if r[2] is not None]
            rel = known[0][2]
            assert rel is not None
            evidence.update(known[0][1])
            msg = (
                f"template_collapse cleared at step {step}: {rel.name} is back at "
                f"{rel.value:.3g}, {_pct(rel.ratio)} of its baseline {rel.baseline.mean:.3g}."
            )
            return Verdict("clear", "critical", msg, evidence)
        return Verdict("hold", "critical", "", evidence)

    bad_ev, bad_rel = next((r[1], r[2]) for r in results if r[0] == "bad")
    assert bad_rel is not None
    evidence.update(bad_ev)  # metric, value, current, ratio, baseline, window, test, ...
    evidence["p"] = bad_ev["test"]["p"]  # type: ignore[index]
    evidence["onset_step"] = bad_ev["changepoint"]["onset_step"]  # type: ignore[index]

    fmt = _format_suppresses(h, i, s)
    if fmt is not None:
        evidence["suppressed_by"] = {"rule": "format_collapse", **fmt.evidence()}
        return Verdict("hold", "critical", "", evidence)
    degenerate = _degenerate(h, i, s)
    if degenerate.status in ("bad", "hold"):
        # Reasoning turning to "!!!!" loses its input dependence too; that is
        # degenerate_text's alarm, not a template.
        evidence["suppressed_by"] = {"rule": "degenerate_text", **degenerate.evidence}
        return Verdict("hold", "critical", "", evidence)
    div = _text_diversity(h, i, s)
    if div is not None:
        evidence["diversity"] = div.evidence()
        if div.ratio < s.template_diversity_hold:
            evidence["suppressed_by"] = {"rule": "entropy_collapse", "metric": div.name}
            return Verdict("hold", "critical", "", evidence)
    held = (
        f"while {div.name} holds at {_pct(div.ratio)} of baseline"
        if div is not None
        else "(no diversity metric to check)"
    )
    msg = (
        f"Template collapse at step {step}: {bad_rel.name} is {bad_rel.value:.3g} (median of "
        f"steps {bad_rel.recent.steps[0]}-{bad_rel.recent.steps[-1]}), {_pct(bad_rel.ratio)} of "
        f"its baseline {bad_rel.baseline.mean:.3g} (steps {bad_rel.baseline.steps[0]}-"
        f"{bad_rel.baseline.steps[-1]}), below {_pct(s.template_fire_fraction)} "
        f"(Mann-Whitney p={evidence['p']:.2g}), {held}."
    )
    return Verdict("bad", "critical", msg, evidence)


# -- entropy_collapse -------------------------------------------------------------------


def entropy_collapse(h: History, i: int, s: DetectorSettings) -> Verdict:
    """Token entropy (else within-state text diversity, silent during a format
    collapse) below ``entropy_fire_fraction`` of its baseline."""
    step = h.steps[i]
    rel = _text_diversity(h, i, s)
    if rel is None:
        return UNKNOWN
    thresholds = {
        "fire_fraction": s.entropy_fire_fraction,
        "clear_fraction": s.entropy_clear_fraction,
    }
    evidence: dict[str, object] = {"step": step, **rel.evidence(), "thresholds": thresholds}
    if rel.ratio >= s.entropy_clear_fraction:
        msg = (
            f"entropy_collapse cleared at step {step}: {rel.name} is back at {rel.value:.3g}, "
            f"{_pct(rel.ratio)} of its baseline {rel.baseline.mean:.3g}."
        )
        return Verdict("clear", "warning", msg, evidence)
    if rel.ratio >= s.entropy_fire_fraction:
        return Verdict("hold", "warning", "", evidence)
    if rel.name != TOKEN_ENTROPY:
        fmt = _format_suppresses(h, i, s)
        if fmt is not None:
            evidence["suppressed_by"] = {"rule": "format_collapse", **fmt.evidence()}
            return Verdict("hold", "warning", "", evidence)
    msg = (
        f"Entropy collapse at step {step}: {rel.name} is {rel.value:.3g} (median of steps "
        f"{rel.recent.steps[0]}-{rel.recent.steps[-1]}), {_pct(rel.ratio)} of its baseline "
        f"{rel.baseline.mean:.3g}, below {_pct(s.entropy_fire_fraction)}."
    )
    return Verdict("bad", "warning", msg, evidence)


# -- no_signal --------------------------------------------------------------------------


def saturation(
    zero_std_fraction: float, success_rate: float | None, share: float
) -> tuple[str, dict[str, float]]:
    """Where the flat (zero-std) groups sit: "full_reward", "zero_reward", "mixed" or
    "unknown" (no success rate).

    With a share f of flat groups and a success rate s over equal-size groups, at most
    a share 1 - s of groups can be all-failure, so at least f - (1 - s) of the groups
    are flat at full reward; likewise at least f - s are flat at zero. The flat groups
    are called saturated at full reward when that bound covers ``share`` of them and
    exceeds the other bound.
    """
    f = zero_std_fraction
    if success_rate is None or f <= 0:
        return "unknown", {}
    full = max(0.0, f - (1.0 - success_rate)) / f
    zero = max(0.0, f - success_rate) / f
    bounds = {"flat_at_full_min": full, "flat_at_zero_min": zero}
    if full >= share and full > zero:
        return "full_reward", bounds
    if zero >= share and zero > full:
        return "zero_reward", bounds
    return "mixed", bounds


def _without_signal(h: History, i: int, s: DetectorSettings) -> tuple[bool, bool]:
    """(group reward std under the fraction of its early level, share of zero-std groups
    at or over the fire share) at position ``i``."""
    std = h.value(GROUP_REWARD_STD, i)
    zsf = h.value(ZERO_STD_FRACTION, i)
    base = h.track(GROUP_REWARD_STD).first(s.baseline_steps, i)
    low_std = (
        std is not None
        and base is not None
        and base.mean > 0
        and std < s.no_signal_std_fraction * base.mean
    )
    return low_std, zsf is not None and zsf >= s.no_signal_zero_std_fire


def no_signal(h: History, i: int, s: DetectorSettings) -> Verdict:
    """Group reward std under ``no_signal_std_fraction`` of its early level, or a share
    of zero-std groups of at least ``no_signal_zero_std_fire`` (RAGEN-2's early-stop
    rule, with ``no_signal_min_steps`` = 10 consecutive steps)."""
    step = h.steps[i]
    std = h.value(GROUP_REWARD_STD, i)
    zsf = h.value(ZERO_STD_FRACTION, i)
    if std is None and zsf is None:
        return UNKNOWN
    base = h.track(GROUP_REWARD_STD).first(s.baseline_steps, i)
    base_std = None if base is None else base.mean
    low_std, flat = _without_signal(h, i, s)
    # Where the flat groups sit is judged over the run of consecutive no-signal steps
    # ending here (at most no_signal_min_steps: the steps an alert rests on), not on one
    # step: one unlucky step of all-failing groups in a run saturated at full reward
    # should not decide the reading.
    run = [i]
    while (
        len(run) < s.no_signal_min_steps and run[-1] > 0 and any(_without_signal(h, run[-1] - 1, s))
    ):
        run.append(run[-1] - 1)
    pairs = [(h.value(ZERO_STD_FRACTION, j), h.value(SUCCESS_RATE, j)) for j in run]
    pairs = [(f, r) for f, r in pairs if f is not None and r is not None]
    mean_zsf = sum(f for f, _ in pairs) / len(pairs) if pairs else (zsf or 0.0)
    mean_success = sum(r for _, r in pairs) / len(pairs) if pairs else None
    where, bounds = saturation(mean_zsf, mean_success, s.no_signal_full_success)
    bounds = {
        **bounds,
        "saturation_steps": [h.steps[run[-1]], step],
        "mean_zero_std_fraction": mean_zsf,
        "mean_success_rate": mean_success,
    }
    success = h.value(SUCCESS_RATE, i)
    evidence: dict[str, object] = {
        "step": step,
        "group_reward_std": std,
        "zero_std_fraction": zsf,
        "baseline": None if base is None else {"group_reward_std": base.summary()},
        "std_ratio": None if not base_std or std is None else std / base_std,
        "success_rate": success,
        "reward_mean": h.value(REWARD_MEAN, i),
        "saturated_at": where,
        **bounds,
        "thresholds": {
            "std_fraction": s.no_signal_std_fraction,
            "clear_std_fraction": s.no_signal_clear_std_fraction,
            "zero_std_fire": s.no_signal_zero_std_fire,
            "zero_std_clear": s.no_signal_zero_std_clear,
        },
    }
    if low_std or flat:
        severity = "critical" if where == "zero_reward" else "warning"
        why = []
        if low_std:
            why.append(
                f"group reward std {std:.3g} is under {_pct(s.no_signal_std_fraction)} of "
                f"its early level {base_std:.3g}"
            )
        if flat:
            why.append(f"{_pct(zsf)} of groups have all-equal rewards")  # type: ignore[arg-type]
        sat = {
            "full_reward": "groups saturated at full reward (the task is solved)",
            "zero_reward": "groups saturated at zero reward (nothing is solved)",
            "mixed": "flat groups both at full and at zero reward",
            "unknown": "no success rate to tell where groups saturated",
        }[where]
        msg = f"No learning signal at step {step}: {' and '.join(why)}; {sat}."
        return Verdict("bad", severity, msg, evidence)  # type: ignore[arg-type]
    std_ok = std is None or not base_std or std >= s.no_signal_clear_std_fraction * base_std
    zsf_ok = zsf is None or zsf <= s.no_signal_zero_std_clear
    if std_ok and zsf_ok:
        msg = f"no_signal cleared at step {step}: group rewards vary again."
        return Verdict("clear", "warning", msg, evidence)
    return Verdict("hold", "warning", "", evidence)


# -- degenerate_text --------------------------------------------------------------------


def degenerate_text(h: History, i: int, s: DetectorSettings) -> Verdict:
    """Character entropy of the text below ``degenerate_char_fraction`` of its baseline
    or below ``degenerate_char_floor`` (read at the step itself: degeneration shows on
    the first step it appears); without character entropy, distinct-2 below
    ``degenerate_distinct2_fraction`` of its baseline while within-state diversity
    holds (texts differ yet repeat their own bigrams). Silent during a format collapse:
    when the reasoning vanishes the scorer reads the (short) actions instead, whose
    character entropy is low without any degeneration."""
    verdict = _degenerate(h, i, s)
    if verdict.status == "bad":
        fmt = _format_suppresses(h, i, s)
        if fmt is not None:
            evidence = {
                **verdict.evidence,
                "suppressed_by": {"rule": "format_collapse", **fmt.evidence()},
            }
            return Verdict("hold", "critical", "", evidence)
    return verdict


def _degenerate(h: History, i: int, s: DetectorSettings) -> Verdict:
    step = h.steps[i]
    tr = h.track(CHAR_ENTROPY)
    if tr.count(i):
        current = tr.at(i)
        if current is None:
            return UNKNOWN
        base = tr.first(s.baseline_steps, i)
        base_mean = None if base is None else base.mean
        threshold = s.degenerate_char_floor
        if base_mean is not None:
            threshold = max(threshold, s.degenerate_char_fraction * base_mean)
        clear_at = s.degenerate_char_floor
        if base_mean is not None:
            clear_at = max(clear_at, s.degenerate_clear_fraction * base_mean)
        evidence: dict[str, object] = {
            "step": step,
            "metric": CHAR_ENTROPY,
            "value": current,
            "baseline": None if base is None else base.summary(),
            "ratio": None if not base_mean else current / base_mean,
            "thresholds": {
                "fire_fraction": s.degenerate_char_fraction,
                "floor": s.degenerate_char_floor,
                "fire_below": threshold,
                "clear_above": clear_at,
            },
        }
        if current < threshold:
            ref = f"baseline {base_mean:.3g}" if base_mean is not None else "no baseline yet"
            msg = (
                f"Degenerate text at step {step}: {CHAR_ENTROPY} is {current:.3g} ({ref}), "
                f"below {threshold:.3g}."
            )
            return Verdict("bad", "critical", msg, evidence)
        if current >= clear_at:
            msg = f"degenerate_text cleared at step {step}: {CHAR_ENTROPY} is {current:.3g}."
            return Verdict("clear", "critical", msg, evidence)
        return Verdict("hold", "critical", "", evidence)

    rel = relative(h, DISTINCT_2, i, s)
    if rel is None:
        return UNKNOWN
    evidence = {
        "step": step,
        **rel.evidence(),
        "thresholds": {
            "fire_fraction": s.degenerate_distinct2_fraction,
            "clear_fraction": s.degenerate_clear_fraction,
        },
    }
    if rel.ratio >= s.degenerate_clear_fraction:
        msg = f"degenerate_text cleared at step {step}: {DISTINCT_2} is {rel.value:.3g}."
        return Verdict("clear", "critical", msg, evidence)
    if rel.ratio >= s.degenerate_distinct2_fraction:
        return Verdict("hold", "critical", "", evidence)
    div = relative(h, WITHIN_STATE, i, s)
    if div is None or div.ratio < s.entropy_fire_fraction:
        # Few distinct texts explain the repeated bigrams: that is entropy collapse.
        evidence["suppressed_by"] = {"rule": "entropy_collapse", "metric": WITHIN_STATE}
        return Verdict("hold", "critical", "", evidence)
    evidence["within_state"] = div.evidence()
    msg = (
        f"Degenerate text at step {step}: {DISTINCT_2} is {rel.value:.3g}, {_pct(rel.ratio)} "
        f"of its baseline {rel.baseline.mean:.3g}, while texts still differ within states "
        f"({WITHIN_STATE} at {_pct(div.ratio)} of baseline): repetition inside the texts."
    )
    return Verdict("bad", "critical", msg, evidence)


# -- format_collapse --------------------------------------------------------------------


def format_collapse(h: History, i: int, s: DetectorSettings) -> Verdict:
    """Valid-format rate (median of ``format_window_steps``) below
    ``format_fire_fraction`` of its baseline; critical when under ``format_floor``."""
    step = h.steps[i]
    rel = relative(h, VALID_FORMAT, i, s, window=s.format_window_steps)
    if rel is None:
        return UNKNOWN
    evidence: dict[str, object] = {
        "step": step,
        **rel.evidence(),
        "thresholds": {
            "fire_fraction": s.format_fire_fraction,
            "clear_fraction": s.format_clear_fraction,
            "floor": s.format_floor,
        },
    }
    if rel.ratio >= s.format_clear_fraction:
        msg = (
            f"format_collapse cleared at step {step}: valid-format rate is back at "
            f"{rel.value:.3g}, {_pct(rel.ratio)} of its baseline {rel.baseline.mean:.3g}."
        )
        return Verdict("clear", "critical", msg, evidence)
    if rel.ratio >= s.format_fire_fraction:
        return Verdict("hold", "critical", "", evidence)
    severity = "critical" if rel.value < s.format_floor else "warning"
    msg = (
        f"Format collapse at step {step}: valid-format rate is {rel.value:.3g} (median of "
        f"steps {rel.recent.steps[0]}-{rel.recent.steps[-1]}), {_pct(rel.ratio)} of its "
        f"baseline {rel.baseline.mean:.3g}, below {_pct(s.format_fire_fraction)}."
    )
    return Verdict("bad", severity, msg, evidence)  # type: ignore[arg-type]


# -- reward_hacking ---------------------------------------------------------------------


def _windows(
    h: History, name: str, i: int, s: DetectorSettings, reference: str
) -> tuple[Window, Window] | None:
    """(reference, recent) windows of a metric for :func:`reward_hacking`: the recent
    window is its last ``reward_window_steps`` values; the reference is its early
    baseline (``"early"``) or the ``reward_window_steps`` values just before the recent
    window (``"previous"``)."""
    tr = h.track(name)
    w = s.reward_window_steps
    if reference == "early":
        base = tr.first(s.baseline_steps, i)
        recent = tr.last(w, i, skip=s.baseline_steps)
        return None if base is None or recent is None else (base, recent)
    both = tr.last(2 * w, i)
    if both is None:
        return None
    return (
        Window(both.steps[:w], both.values[:w]),
        Window(both.steps[w:], both.values[w:]),
    )


def _reward_scale(h: History, i: int, s: DetectorSettings) -> float | None:
    """The reward's natural unit for :func:`reward_hacking`: the early within-group
    reward std (what GRPO divides advantages by), else the early step-to-step sd of
    the mean reward; None when neither is positive."""
    base = h.track(GROUP_REWARD_STD).first(s.baseline_steps, i)
    if base is not None and base.mean > 0:
        return base.mean
    rew = h.track(REWARD_MEAN).first(s.baseline_steps, i)
    if rew is not None and rew.sd > 0:
        return rew.sd
    return None


def _hack_compare(
    h: History, i: int, s: DetectorSettings, reference: str
) -> tuple[str, dict[str, object]] | None:
    rew = _windows(h, REWARD_MEAN, i, s, reference)
    suc = _windows(h, SUCCESS_RATE, i, s, reference)
    if rew is None or suc is None:
        return None
    p = shift_pvalue(rew[0].values, rew[1].values, direction="greater")
    rise = rew[1].mean - rew[0].mean
    scale = _reward_scale(h, i, s)
    rise_units = None if scale is None else rise / scale
    big_enough = rise_units is None or rise_units >= s.reward_min_rise
    p_success = shift_pvalue(suc[0].values, suc[1].values, direction="greater")
    success_delta = suc[1].mean - suc[0].mean
    fmt = _windows(h, VALID_FORMAT, i, s, reference)
    format_delta = None if fmt is None else fmt[1].mean - fmt[0].mean
    # Success keeps up with the reward when it rose by more than the tolerance and by
    # more than step noise (one-sided test at alpha); a rising valid-format rate is the
    # format reward being learned.
    success_up = success_delta > s.reward_success_tolerance and p_success < s.alpha
    format_up = format_delta is not None and format_delta > s.reward_format_tolerance
    evidence: dict[str, object] = {
        "reference": reference,
        "reward": {
            "reference": rew[0].summary(),
            "window": rew[1].summary(),
            "rise": rise,
            "rise_in_group_std": rise_units,
            "p_up": p,
        },
        "success": {
            "reference": suc[0].summary(),
            "window": suc[1].summary(),
            "change": success_delta,
            "p_up": p_success,
        },
        "valid_format_change": format_delta,
    }
    if p < s.reward_alpha and big_enough and not success_up and not format_up:
        return "bad", evidence
    if p >= s.reward_clear_alpha or success_up or format_up:
        return "clear", evidence
    return "hold", evidence


def reward_hacking(h: History, i: int, s: DetectorSettings) -> Verdict:
    """Mean reward significantly up (one-sided Mann-Whitney, last ``reward_window_steps``
    steps against a reference) while success is flat or down and the valid-format rate
    did not rise (a rise there is the format reward being learned). Two references: the
    early baseline, and the window just before the recent one (success that rose early
    and then stalled while the reward kept climbing shows only against the latter)."""
    step = h.steps[i]
    if h.value(REWARD_MEAN, i) is None or h.value(SUCCESS_RATE, i) is None:
        return UNKNOWN
    results = [r for ref in ("early", "previous") if (r := _hack_compare(h, i, s, ref))]
    if not results:
        return UNKNOWN
    evidence: dict[str, object] = {
        "step": step,
        "comparisons": [ev for _, ev in results],
        "thresholds": {
            "alpha": s.reward_alpha,
            "clear_alpha": s.reward_clear_alpha,
            "min_rise_in_group_std": s.reward_min_rise,
            "success_alpha": s.alpha,
            "success_tolerance": s.reward_success_tolerance,
            "format_tolerance": s.reward_format_tolerance,
        },
    }
    bad = [ev for st, ev in results if st == "bad"]
    if bad:
        ev = bad[0]
        rew, suc = ev["reward"], ev["success"]
        assert isinstance(rew, dict) and isinstance(suc, dict)
        ref_w, win = rew["reference"], rew["window"]
        ref_name = "the early baseline" if ev["reference"] == "early" else "the window before"
        msg = (
            f"Reward up while success is not at step {step}: mean reward {win['mean']:.3g} "
            f"over steps {win['steps'][0]}-{win['steps'][1]} against {ref_w['mean']:.3g} in "
            f"{ref_name} (steps {ref_w['steps'][0]}-{ref_w['steps'][1]}, Mann-Whitney "
            f"p={rew['p_up']:.2g}), success {suc['window']['mean']:.3g} against "
            f"{suc['reference']['mean']:.3g}."
        )
        return Verdict("bad", "warning", msg, evidence)
    if all(st == "clear" for st, _ in results):
        msg = f"reward_hacking cleared at step {step}: reward and success move together again."
        return Verdict("clear", "warning", msg, evidence)
    return Verdict("hold", "warning", "", evidence)


# -- group_integrity --------------------------------------------------------------------


def group_integrity(h: History, i: int, s: DetectorSettings) -> Verdict:
    """Structural faults of the step's groups: unequal group sizes, a single state
    (responsiveness undefined), or many byte-identical rollouts within groups while
    diversity has not collapsed."""
    step = h.steps[i]
    gmin = h.value(GROUP_SIZE_MIN, i)
    gmax = h.value(GROUP_SIZE_MAX, i)
    states = h.value(DISTINCT_STATES, i)
    dup = h.value(DUPLICATE_RATE, i)
    if gmin is None and gmax is None and states is None and dup is None:
        return UNKNOWN
    faults = []
    if gmin is not None and gmax is not None and gmin != gmax:
        faults.append(f"group sizes differ ({gmin:g} to {gmax:g} rollouts)")
    if states is not None and states == 1:
        faults.append("the step has a single state, so responsiveness is undefined")
    div = _text_diversity(h, i, s)
    # The diversity of this very step (not the smoothed one, which lags the duplicates):
    # a policy whose entropy fell repeats itself legitimately.
    div_ratio = None if div is None else div.current / div.baseline.mean
    collapsed = div_ratio is not None and div_ratio < s.entropy_clear_fraction
    if dup is not None and dup >= s.duplicate_rate_max and not collapsed:
        faults.append(
            f"{_pct(dup)} of rollouts are byte-identical to another in their group "
            "while diversity has not collapsed"
        )
    evidence: dict[str, object] = {
        "step": step,
        "group_size_min": gmin,
        "group_size_max": gmax,
        "distinct_states": states,
        "duplicate_rate": dup,
        "diversity_ratio": div_ratio,
        "faults": faults,
        "thresholds": {"duplicate_rate_max": s.duplicate_rate_max},
    }
    if faults:
        msg = f"Group integrity fault at step {step}: {'; '.join(faults)}."
        return Verdict("bad", "warning", msg, evidence)
    msg = f"group_integrity cleared at step {step}: groups are consistent again."
    return Verdict("clear", "warning", msg, evidence)


# -- nonfinite --------------------------------------------------------------------------


def nonfinite(h: History, i: int, s: DetectorSettings) -> Verdict:
    """NaN or ±Inf in anything the trainer sent (``structure.nonfinite`` > 0) or in any
    metric value of the step."""
    step = h.steps[i]
    count = h.value(NONFINITE, i)
    names = h.nonfinite_names(i)
    if count is None and not h.rows[i]:
        return UNKNOWN
    evidence: dict[str, object] = {"step": step, "nonfinite": count, "nonfinite_metrics": names}
    if (count is not None and count > 0) or names:
        parts = []
        if count:
            parts.append(f"{count:g} non-finite values in the rollouts")
        if names:
            parts.append(f"non-finite metrics {', '.join(names)}")
        msg = f"Non-finite values at step {step}: {'; '.join(parts)}."
        return Verdict("bad", "critical", msg, evidence)
    return Verdict("clear", "critical", f"nonfinite cleared at step {step}.", evidence)


RULE_FUNCTIONS: dict[str, Rule] = {
    "template_collapse": template_collapse,
    "entropy_collapse": entropy_collapse,
    "no_signal": no_signal,
    "degenerate_text": degenerate_text,
    "format_collapse": format_collapse,
    "reward_hacking": reward_hacking,
    "group_integrity": group_integrity,
    "nonfinite": nonfinite,
}
"""Rule name -> rule function, in :data:`~collapsewatch.detect.events.RULES` order."""


def min_steps(rule: str, s: DetectorSettings) -> int:
    """Consecutive bad steps a rule needs before it fires."""
    return {
        "template_collapse": s.template_min_steps,
        "entropy_collapse": s.entropy_min_steps,
        "no_signal": s.no_signal_min_steps,
        "degenerate_text": s.degenerate_min_steps,
        "format_collapse": s.format_min_steps,
        "reward_hacking": s.reward_min_steps,
        "group_integrity": s.integrity_min_steps,
        "nonfinite": s.nonfinite_min_steps,
    }[rule]
