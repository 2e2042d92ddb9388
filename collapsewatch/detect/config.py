"""Detector settings: every threshold of :mod:`collapsewatch.detect`, with its reason.

Each field is read from ``COLLAPSEWATCH_DETECT_<FIELD>`` (upper case); docs/configuration.md
lists them with their defaults and docs/detectors.md explains how each rule uses them.

Counting convention: every "steps" below counts *scored steps of the run* (points of
the metric series), not step numbers, so a run that logs every 10th optimizer step
waits 10 logged steps where a run that logs every step waits 10 steps. Windows count
defined values of the metric concerned (a step where the metric is undefined is
skipped).
"""

from __future__ import annotations

from pydantic import Field, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict


class DetectorSettings(BaseSettings):
    """Thresholds, windows and alert timing of the collapse detectors."""

    model_config = SettingsConfigDict(
        env_prefix="COLLAPSEWATCH_DETECT_", env_file=None, extra="ignore", frozen=True
    )

    # -- shared ------------------------------------------------------------------------
    baseline_steps: int = Field(
        default=5,
        ge=2,
        description="A metric's early baseline is the mean of its first this-many defined "
        "values; RAGEN-2 compares against the early level, and 5 steps divide step-to-step "
        "noise by about 2.2 while leaving the rest of the run to watch.",
    )
    window_steps: int = Field(
        default=5,
        ge=1,
        description="Smoothing window: rules read the median of a metric's last this-many "
        "values after the baseline, so one outlier step (common in responsiveness on 64 "
        "short texts, DESIGN.md §7) can never fire a rule on its own.",
    )
    clear_steps: int = Field(
        default=3,
        ge=1,
        description="A firing alert resolves after this many consecutive steps past its "
        "clear threshold: one good step inside an episode of trouble is not a recovery.",
    )
    cooldown_steps: int = Field(
        default=10,
        ge=0,
        description="After an alert resolves, its rule ignores bad steps for this many "
        "steps, so a metric that hovers at its threshold raises one alert, not a stream.",
    )
    alpha: float = Field(
        default=0.05,
        gt=0,
        lt=1,
        description="Significance of the one-sided Mann-Whitney test (baseline window "
        "against recent window) that confirms a fall in responsiveness: with 5 against 5 "
        "values, 0.05 demands that nearly every recent value lies below nearly every "
        "baseline value.",
    )

    # -- template_collapse ---------------------------------------------------------------
    template_fire_fraction: float = Field(
        default=0.5,
        gt=0,
        lt=1,
        description="template_collapse fires when smoothed responsiveness falls below this "
        "fraction of its baseline: half the early input dependence gone is far outside the "
        "step noise of the estimators (sd about 0.16 nats) yet reached within a few steps "
        "of a template drift.",
    )
    template_clear_fraction: float = Field(
        default=0.7,
        gt=0,
        le=1,
        description="template_collapse resolves when smoothed responsiveness is back above "
        "this fraction of its baseline (hysteresis: above the fire fraction).",
    )
    template_min_steps: int = Field(
        default=2,
        ge=1,
        description="Consecutive bad steps before template_collapse fires; the smoothing "
        "window and the change test already demand persistence, so 2 keeps the delay low.",
    )
    template_diversity_hold: float = Field(
        default=0.6,
        gt=0,
        le=1,
        description="Template collapse is a loss of input dependence while diversity "
        "holds: the rule stays silent when smoothed diversity (token entropy, else "
        "within-state text diversity) is below this fraction of its baseline, which is "
        "entropy collapse instead.",
    )
    template_min_baseline_mi: float = Field(
        default=0.05,
        ge=0,
        description="A mutual-information series (nats) whose baseline is below this never "
        "showed input dependence to lose: the rule does not use it (about a third of the "
        "estimator's null spread on 64 texts).",
    )
    template_min_baseline_retrieval: float = Field(
        default=0.1,
        ge=0,
        description="The same floor for chance-corrected retrieval accuracy (0 = chance).",
    )
    cusum_drift: float = Field(
        default=0.5,
        ge=0,
        description="Allowance k of the one-sided CUSUM on responsiveness, in baseline "
        "standard deviations: shifts smaller than k are absorbed (Page 1954; k = half the "
        "shift to detect, here a one-sd fall).",
    )
    cusum_threshold: float = Field(
        default=5.0,
        gt=0,
        description="Decision threshold h of the CUSUM, in baseline standard deviations: "
        "the textbook h = 5 keeps the in-control run length in the hundreds of steps. The "
        "CUSUM estimates where the fall began (evidence 'changepoint').",
    )

    # -- entropy_collapse ----------------------------------------------------------------
    entropy_fire_fraction: float = Field(
        default=0.5,
        gt=0,
        lt=1,
        description="entropy_collapse fires when smoothed token entropy (or within-state "
        "text diversity when the trainer sends no entropy) falls below this fraction of "
        "its baseline: a healthy policy sharpens as it learns, but rarely halves its "
        "entropy in one run.",
    )
    entropy_clear_fraction: float = Field(
        default=0.7,
        gt=0,
        le=1,
        description="entropy_collapse resolves above this fraction of the baseline.",
    )
    entropy_min_steps: int = Field(
        default=3,
        ge=1,
        description="Consecutive bad steps before entropy_collapse fires (on top of the "
        "smoothing window): entropy falls slowly, so a few steps cost nothing.",
    )

    # -- no_signal -----------------------------------------------------------------------
    no_signal_std_fraction: float = Field(
        default=0.1,
        gt=0,
        lt=1,
        description="RAGEN-2's early-stop rule: group reward std under this fraction of "
        "its early level means GRPO has (almost) no advantage left to learn from.",
    )
    no_signal_clear_std_fraction: float = Field(
        default=0.2,
        gt=0,
        le=1,
        description="no_signal resolves when group reward std is back above this fraction "
        "of its baseline (and zero-std groups below no_signal_zero_std_clear).",
    )
    no_signal_zero_std_fire: float = Field(
        default=0.8,
        gt=0,
        le=1,
        description="A step is also without signal when at least this share of its groups "
        "have all-equal rewards (four in five groups give GRPO no gradient).",
    )
    no_signal_zero_std_clear: float = Field(
        default=0.6,
        ge=0,
        le=1,
        description="Share of zero-std groups below which no_signal may resolve.",
    )
    no_signal_min_steps: int = Field(
        default=10,
        ge=1,
        description="Consecutive steps without signal before no_signal fires: RAGEN-2's "
        "early-stop rule waits 10 steps.",
    )
    no_signal_full_success: float = Field(
        default=0.5,
        gt=0,
        le=1,
        description="Evidence: flat groups count as saturated at full reward when the "
        "success rate shows that at least this share of them must be all-success (bound "
        "from success rate and zero-std share), at zero reward when that share must be "
        "all-failure.",
    )

    # -- degenerate_text -----------------------------------------------------------------
    degenerate_char_fraction: float = Field(
        default=0.6,
        gt=0,
        lt=1,
        description="degenerate_text fires when the step's mean character entropy falls "
        "below this fraction of its baseline: reasoning in the real logs sits at 2.2-3.1 "
        "nats per character, a loop such as 'the the the' near 1.4 and '!!!!' at 0.",
    )
    degenerate_char_floor: float = Field(
        default=1.0,
        ge=0,
        description="...or below this absolute character entropy (nats; 1 nat is an "
        "alphabet of under 3 equally used characters), whatever the baseline.",
    )
    degenerate_distinct2_fraction: float = Field(
        default=0.3,
        gt=0,
        lt=1,
        description="Without character entropy: distinct-2 below this fraction of its "
        "baseline while within-state diversity holds (texts differ, yet their bigrams "
        "repeat: repetition inside each text).",
    )
    degenerate_clear_fraction: float = Field(
        default=0.8,
        gt=0,
        le=1,
        description="degenerate_text resolves above this fraction of the baseline.",
    )
    degenerate_min_steps: int = Field(
        default=1,
        ge=1,
        description="Consecutive bad steps before degenerate_text fires: character entropy "
        "is stable step to step and degeneration should be reported on the first step "
        "it appears.",
    )

    # -- format_collapse -----------------------------------------------------------------
    format_fire_fraction: float = Field(
        default=0.5,
        gt=0,
        lt=1,
        description="format_collapse fires when the smoothed valid-format rate falls below "
        "this fraction of its baseline: half the parseable responses gone.",
    )
    format_clear_fraction: float = Field(
        default=0.8,
        gt=0,
        le=1,
        description="format_collapse resolves above this fraction of the baseline; below "
        "it, template_collapse and the text fallback of entropy_collapse stay silent "
        "because the reasoning they read has changed kind.",
    )
    format_floor: float = Field(
        default=0.1,
        ge=0,
        le=1,
        description="A format_collapse whose valid-format rate is below this share when it "
        "fires is critical; above it, a warning.",
    )
    format_window_steps: int = Field(
        default=3,
        ge=1,
        description="Smoothing window of the valid-format rate: a share over every turn of "
        "the step is far less noisy than responsiveness, so a shorter median suffices.",
    )
    format_min_steps: int = Field(
        default=2,
        ge=1,
        description="Consecutive bad steps before format_collapse fires.",
    )

    # -- reward_hacking ------------------------------------------------------------------
    reward_window_steps: int = Field(
        default=10,
        ge=2,
        description="Recent window of the reward-hacking test: reward and success over "
        "this many steps are compared with the early baseline and with the same number of "
        "steps just before (10 steps average out the step noise of success on 64 rollouts).",
    )
    reward_alpha: float = Field(
        default=0.01,
        gt=0,
        lt=1,
        description="One-sided Mann-Whitney significance for 'reward rose' (recent window "
        "above baseline); strict because the rule is a hint built on two noisy series.",
    )
    reward_min_rise: float = Field(
        default=0.5,
        ge=0,
        description="The reward rise must also be at least this many early within-group "
        "reward stds (GRPO's own reward unit), so that long windows do not turn a drift "
        "too small to matter into a significant one.",
    )
    reward_success_tolerance: float = Field(
        default=0.05,
        ge=0,
        description="Success keeps up with the reward (no alert) only when its mean rose "
        "by more than this share and significantly (one-sided test at alpha): 0.05 is "
        "about the noise of a 10-step mean of success on 64 rollouts.",
    )
    reward_format_tolerance: float = Field(
        default=0.1,
        ge=0,
        description="A reward rise that comes with a valid-format rate up by more than this "
        "(absolute share) is the format reward being learned, not hacking: the rule stays "
        "silent.",
    )
    reward_clear_alpha: float = Field(
        default=0.2,
        gt=0,
        lt=1,
        description="reward_hacking resolves when the rise is no longer significant at "
        "this level, or success has caught up.",
    )
    reward_min_steps: int = Field(
        default=3,
        ge=1,
        description="Consecutive bad steps before reward_hacking fires: each step's test "
        "already spans two 10-step windows, so 3 more steps confirm a sustained pattern.",
    )

    # -- group_integrity -----------------------------------------------------------------
    duplicate_rate_max: float = Field(
        default=0.5,
        gt=0,
        le=1,
        description="group_integrity fires when at least this share of rollouts are "
        "byte-identical to another in their group while diversity has not collapsed "
        "(identical rollouts from a policy that still samples point to resent data).",
    )
    integrity_min_steps: int = Field(
        default=1,
        ge=1,
        description="Consecutive faulty steps before group_integrity fires: structural "
        "facts are exact, not noisy.",
    )

    # -- nonfinite -----------------------------------------------------------------------
    nonfinite_min_steps: int = Field(
        default=1,
        ge=1,
        description="Consecutive steps with NaN/Inf before nonfinite fires: one is already "
        "a broken trainer.",
    )

    @model_validator(mode="after")
    def _check_hysteresis(self) -> DetectorSettings:
        pairs = [
            ("template_fire_fraction", "template_clear_fraction"),
            ("entropy_fire_fraction", "entropy_clear_fraction"),
            ("no_signal_std_fraction", "no_signal_clear_std_fraction"),
            ("format_fire_fraction", "format_clear_fraction"),
            ("degenerate_char_fraction", "degenerate_clear_fraction"),
        ]
        for fire, clear in pairs:
            if getattr(self, clear) < getattr(self, fire):
                raise ValueError(f"{clear} must be >= {fire} (hysteresis)")
        if self.no_signal_zero_std_clear > self.no_signal_zero_std_fire:
            raise ValueError("no_signal_zero_std_clear must be <= no_signal_zero_std_fire")
        if self.reward_clear_alpha < self.reward_alpha:
            raise ValueError("reward_clear_alpha must be >= reward_alpha")
        return self
