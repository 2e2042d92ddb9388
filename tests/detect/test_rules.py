"""Each rule on hand-made series: one that must fire at a known step, one that must not.

Defaults unless a test says otherwise: baseline = the first 5 values, smoothing = the
median of the last 5 values after the baseline, template_collapse needs 2 bad steps.
"""

from __future__ import annotations

import math

from collapsewatch.detect import DetectorSettings, replay

from .series import fired, make_series, step_change, wiggle

N = 40
DROP = 20


def responsive(**extra: object) -> dict[int, dict[str, float | None]]:
    """Healthy text responsiveness and flat token entropy, plus ``extra`` metrics."""
    specs = {
        "responsiveness__mi_embed": wiggle(0.6, 0.03),
        "responsiveness__retrieval_embed": wiggle(0.8, 0.03),
        "diversity__token_entropy": wiggle(1.0),
        **extra,
    }
    return make_series(N, **specs)  # type: ignore[arg-type]


# -- template_collapse ------------------------------------------------------------------


def test_template_collapse_fires_when_responsiveness_halves_and_entropy_holds() -> None:
    series = responsive(responsiveness__mi_embed=step_change(0.6, 0.1, DROP, 0.03))
    # alpha 0.01: the rank test needs all 5 recent values below all 5 baseline values
    # (p = 1/252), true from step 24 (window 20-24); 2 bad steps -> fires at 25.
    events = replay(series, DetectorSettings(alpha=0.01))
    assert fired(events, "template_collapse") == [(25, "firing")]
    e = events[0]
    assert e.severity == "critical"
    assert e.evidence["metric"] == "responsiveness.mi_embed"
    assert e.evidence["baseline"]["mean"] == 0.6
    assert e.evidence["baseline"]["steps"] == [0, 4]
    assert e.evidence["ratio"] < 0.5
    assert e.evidence["p"] < 0.01
    assert e.evidence["onset_step"] == DROP  # the CUSUM's change-point estimate
    assert "responsiveness.mi_embed" in e.message and "0.6" in e.message


def test_template_collapse_default_settings_fire_within_a_few_steps() -> None:
    series = responsive(responsiveness__mi_embed=step_change(0.6, 0.1, DROP, 0.03))
    steps = [s for s, state in fired(replay(series), "template_collapse") if state == "firing"]
    assert len(steps) == 1 and DROP + 2 <= steps[0] <= DROP + 5


def test_template_collapse_resolves_when_responsiveness_recovers() -> None:
    def mi(step: int) -> float:
        return 0.1 if 20 <= step < 30 else 0.6

    series = responsive(responsiveness__mi_embed=lambda s: mi(s) + 0.01 * (s % 3))
    events = fired(replay(series, DetectorSettings(alpha=0.01)), "template_collapse")
    assert [state for _, state in events] == ["firing", "resolved"]
    # Median of 5 back above 70% once 3 of the last 5 values are recovered (step 32),
    # then 3 clear steps: 32, 33, 34.
    assert events[1][0] == 34


def test_template_collapse_silent_on_steady_responsiveness() -> None:
    assert fired(replay(responsive()), "template_collapse") == []


def test_template_collapse_ignores_a_single_outlier_step() -> None:
    series = responsive(
        responsiveness__mi_embed=lambda s: -0.6 if s == 15 else 0.6 + 0.01 * (s % 4)
    )
    assert fired(replay(series), "template_collapse") == []


def test_template_collapse_silent_when_diversity_falls_too() -> None:
    # Responsiveness and token entropy fall together: entropy collapse, not template.
    series = responsive(
        responsiveness__mi_embed=step_change(0.6, 0.1, DROP, 0.03),
        diversity__token_entropy=step_change(1.0, 0.2, DROP),
    )
    events = replay(series)
    assert fired(events, "template_collapse") == []
    assert [st for _, st in fired(events, "entropy_collapse")] == ["firing"]


def test_template_collapse_silent_during_format_collapse() -> None:
    series = responsive(
        responsiveness__mi_embed=step_change(0.6, 0.1, DROP, 0.03),
        correctness__valid_format_rate=step_change(0.9, 0.0, DROP - 1, 0.0),
    )
    events = replay(series)
    assert fired(events, "template_collapse") == []
    assert fired(events, "format_collapse")[0][1] == "firing"


def test_template_collapse_prefers_the_copy_aware_signal() -> None:
    # Slot-filling template: plain MI stays high (the copied coordinates differ by
    # state), the masked MI falls.
    series = responsive(responsiveness__mi_embed_masked=step_change(0.5, 0.05, DROP, 0.03))
    events = replay(series, DetectorSettings(alpha=0.01))
    assert fired(events, "template_collapse") == [(25, "firing")]
    assert events[0].evidence["metric"] == "responsiveness.mi_embed_masked"
    assert events[0].evidence["family"] == "copy-aware"
    assert events[0].evidence["signals"] == [
        {
            "family": "copy-aware",
            "metric": "responsiveness.mi_embed_masked",
            "status": "bad",
            "ratio": events[0].evidence["ratio"],
            "p": events[0].evidence["p"],
        }
    ]


def test_template_collapse_uses_log_prob_mi_when_sent() -> None:
    series = responsive(responsiveness__mi_logprob=step_change(1.2, 0.1, DROP, 0.05))
    events = replay(series, DetectorSettings(alpha=0.01))
    assert fired(events, "template_collapse") == [(25, "firing")]
    assert events[0].evidence["metric"] == "responsiveness.mi_logprob"


def test_template_collapse_log_prob_retrieval_is_chance_corrected() -> None:
    # No usable log-prob MI; raw retrieval accuracy 0.9 -> 0.3 with chance 0.25 is a fall
    # from 0.867 to 0.067 above chance: 8% of baseline.
    series = responsive(
        responsiveness__mi_logprob=0.0,
        responsiveness__retrieval_acc=step_change(0.9, 0.3, DROP, 0.01),
        responsiveness__retrieval_chance=0.25,
    )
    events = replay(series, DetectorSettings(alpha=0.01))
    assert fired(events, "template_collapse") == [(25, "firing")]
    assert events[0].evidence["metric"] == "responsiveness.retrieval_acc (chance-corrected)"
    assert events[0].evidence["ratio"] < 0.1


def test_template_collapse_skips_a_signal_that_never_showed_dependence() -> None:
    # Masked MI near 0 from the start has nothing to lose: the plain text MI decides.
    series = responsive(responsiveness__mi_embed_masked=wiggle(0.01, 0.005))
    assert fired(replay(series), "template_collapse") == []


# -- entropy_collapse -------------------------------------------------------------------


def test_entropy_collapse_fires_when_token_entropy_halves() -> None:
    series = make_series(N, diversity__token_entropy=step_change(1.2, 0.3, DROP))
    # Median of 5 below 50% once 3 new values are in (step 22); 3 bad steps -> 24.
    events = replay(series)
    assert fired(events, "entropy_collapse") == [(24, "firing")]
    assert events[0].severity == "warning"
    assert events[0].evidence["metric"] == "diversity.token_entropy"


def test_entropy_collapse_silent_on_a_gentle_decline() -> None:
    series = make_series(N, diversity__token_entropy=lambda s: 1.2 * (1 - 0.25 * s / N))
    assert fired(replay(series), "entropy_collapse") == []


def test_entropy_collapse_falls_back_to_text_diversity() -> None:
    series = make_series(N, diversity__within_state=step_change(0.8, 0.05, DROP))
    events = replay(series)
    assert fired(events, "entropy_collapse") == [(24, "firing")]
    assert events[0].evidence["metric"] == "diversity.within_state"


# -- no_signal --------------------------------------------------------------------------


def no_signal_series(success: float) -> dict[int, dict[str, float | None]]:
    return make_series(
        N,
        correctness__group_reward_std=step_change(0.45, 0.0, DROP, 0.0),
        correctness__zero_std_fraction=lambda s: 1.0 if s >= DROP else 0.25,
        correctness__success_rate=lambda s: success if s >= DROP else 0.5,
    )


def test_no_signal_fires_after_ten_flat_steps_saturated_at_full_reward() -> None:
    events = replay(no_signal_series(1.0))
    assert fired(events, "no_signal") == [(DROP + 9, "firing")]
    e = events[0]
    assert (e.severity, e.evidence["saturated_at"]) == ("warning", "full_reward")
    assert "full reward" in e.message


def test_no_signal_saturated_at_zero_is_critical() -> None:
    e = replay(no_signal_series(0.0))[0]
    assert (e.rule, e.severity, e.evidence["saturated_at"]) == (
        "no_signal",
        "critical",
        "zero_reward",
    )


def test_no_signal_needs_ten_consecutive_steps() -> None:
    series = make_series(
        N,
        correctness__group_reward_std=lambda s: 0.0 if 20 <= s < 29 else 0.45,
        correctness__zero_std_fraction=lambda s: 1.0 if 20 <= s < 29 else 0.25,
    )
    assert fired(replay(series), "no_signal") == []


# -- degenerate_text --------------------------------------------------------------------


def test_degenerate_text_fires_on_the_first_degenerate_step() -> None:
    series = make_series(N, diversity__char_entropy=step_change(2.9, 0.4, DROP))
    events = replay(series)
    assert fired(events, "degenerate_text") == [(DROP, "firing")]
    assert events[0].severity == "critical"


def test_degenerate_text_silent_on_normal_text() -> None:
    series = make_series(N, diversity__char_entropy=wiggle(2.9, 0.1))
    assert fired(replay(series), "degenerate_text") == []


def test_degenerate_text_silent_when_the_format_collapsed() -> None:
    series = make_series(
        N,
        diversity__char_entropy=step_change(2.9, 0.8, DROP),
        correctness__valid_format_rate=step_change(0.9, 0.0, DROP - 2, 0.0),
    )
    assert fired(replay(series), "degenerate_text") == []


def test_degenerate_text_distinct_2_fallback() -> None:
    series = make_series(
        N,
        diversity__distinct_2=step_change(0.8, 0.1, DROP),
        diversity__within_state=wiggle(0.8),
    )
    assert fired(replay(series), "degenerate_text") == [(DROP + 2, "firing")]


# -- format_collapse --------------------------------------------------------------------


def test_format_collapse_fires_when_valid_format_falls() -> None:
    series = make_series(N, correctness__valid_format_rate=step_change(0.9, 0.05, DROP, 0.0))
    # Median of 3: bad from step 21 (two new values); 2 bad steps -> 22.
    events = replay(series)
    assert fired(events, "format_collapse") == [(DROP + 2, "firing")]
    assert events[0].severity == "critical"  # 0.05 is under the 0.1 floor


def test_format_collapse_warning_above_the_floor() -> None:
    series = make_series(N, correctness__valid_format_rate=step_change(0.9, 0.3, DROP, 0.0))
    assert replay(series)[0].severity == "warning"


def test_format_collapse_silent_on_a_rising_format_rate() -> None:
    series = make_series(N, correctness__valid_format_rate=lambda s: min(1.0, 0.7 + 0.02 * s))
    assert fired(replay(series), "format_collapse") == []


# -- reward_hacking ---------------------------------------------------------------------


def test_reward_hacking_fires_when_reward_rises_and_success_does_not() -> None:
    series = make_series(
        N,
        correctness__reward_mean=lambda s: 1.0 + 0.01 * (s % 3) + (0.8 if s >= DROP else 0.0),
        correctness__success_rate=wiggle(0.6, 0.03),
    )
    events = replay(series)
    # The rank test of the last 10 steps against the 10 before reaches p < 0.01 once 6
    # raised values are in (step 25: p = 0.008); 3 bad steps -> 27.
    assert fired(events, "reward_hacking") == [(DROP + 7, "firing")]
    assert events[0].severity == "warning"


def test_reward_hacking_silent_when_success_rises_with_reward() -> None:
    series = make_series(
        N,
        correctness__reward_mean=lambda s: 0.5 + 0.02 * s,
        correctness__success_rate=lambda s: 0.3 + 0.015 * s,
    )
    assert fired(replay(series), "reward_hacking") == []


def test_reward_hacking_silent_when_the_format_reward_explains_the_rise() -> None:
    series = make_series(
        N,
        correctness__reward_mean=lambda s: 2.0 + (0.5 if s >= DROP else 0.0) + 0.01 * (s % 3),
        correctness__success_rate=wiggle(0.75, 0.03),
        correctness__valid_format_rate=lambda s: 1.0 if s >= DROP else 0.75,
    )
    assert fired(replay(series), "reward_hacking") == []


# -- group_integrity --------------------------------------------------------------------


def test_group_integrity_fires_on_unequal_groups_and_resolves() -> None:
    series = make_series(
        N,
        structure__group_size_min=lambda s: 5.0 if s == 7 else 8.0,
        structure__group_size_max=8.0,
        structure__distinct_states=8.0,
        structure__duplicate_rate=0.0,
    )
    events = replay(series)
    assert fired(events, "group_integrity") == [(7, "firing"), (10, "resolved")]
    assert "group sizes differ (5 to 8" in events[0].message


def test_group_integrity_duplicates_while_entropy_holds() -> None:
    series = make_series(
        N,
        structure__duplicate_rate=lambda s: 0.6 if s >= DROP else 0.0,
        diversity__token_entropy=wiggle(1.0),
    )
    assert fired(replay(series), "group_integrity") == [(DROP, "firing")]


def test_group_integrity_duplicates_explained_by_entropy_collapse() -> None:
    series = make_series(
        N,
        structure__duplicate_rate=lambda s: 0.8 if s >= DROP else 0.0,
        diversity__token_entropy=step_change(1.0, 0.1, DROP),
    )
    assert fired(replay(series), "group_integrity") == []


# -- nonfinite --------------------------------------------------------------------------


def test_nonfinite_fires_on_the_first_bad_step() -> None:
    series = make_series(12, structure__nonfinite=lambda s: 2.0 if s in (4, 5) else 0.0)
    events = replay(series)
    assert fired(events, "nonfinite") == [(4, "firing"), (8, "resolved")]
    assert events[0].severity == "critical"


def test_nonfinite_metric_values_fire_too() -> None:
    series = make_series(8, correctness__reward_mean=lambda s: math.nan if s == 3 else 1.0)
    events = replay(series)
    assert fired(events, "nonfinite") == [(3, "firing"), (6, "resolved")]
    assert events[0].evidence["nonfinite_metrics"] == ["correctness.reward_mean"]
