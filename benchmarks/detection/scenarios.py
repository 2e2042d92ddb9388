"""Synthetic RL runs with known ground truth, for the detection benchmark.

Each scenario is a run of an agent on a small grid task (reach a goal, a wall on the
map), written in the wire format (:class:`collapsewatch.schema.Rollout`): per step,
``states`` initial states x ``per_state`` rollouts (GRPO groups), one turn each, with
reasoning text, an action, a reward, success, ``valid_format`` and the trainer-side
``token_entropy``. Before ``onset`` every scenario is the same healthy run; from
``onset`` on, the failure it is named after ramps in over ``ramp`` steps.

Scenarios (:data:`SCENARIOS`):

- ``healthy``: state-dependent reasoning, success rising, token entropy drifting down
  gently (a quarter over the run), no onset.
- ``template_collapse``: reasoning drifts to a few state-independent templates (free
  text with synonyms and filler, so within-state diversity and token entropy stay
  where they were); success falls as the template's fixed move is often wrong.
- ``template_collapse_slot``: the slot-filling kind: the template copies the state's
  coordinates into fixed slots ("I am at (2,3) and the goal is at (4,1). ... I will
  move right.") and concludes the same move for every state.
- ``entropy_collapse``: one output per state (a fixed, state-dependent text repeated
  by every rollout of the state), token entropy falling to a tenth.
- ``no_signal``: groups saturate: every rollout of a group gets the same reward (all
  succeed, or all fail, by seed).
- ``degenerate_text``: reasoning turns into "!!!!", "Peeeee" or word loops.
- ``format_collapse``: the think span vanishes (empty reasoning, ``valid_format``
  false) and the action becomes a long free-form answer.
- ``reward_hacking``: reward rises through a bonus the policy exploits (0.4 to 1.0,
  by seed; success is worth 1) while success stays flat or falls.

Seeds vary the number of states (6, 8, 10), the group size (6, 8), the onset
(steps 15-30), the ramp (3-10 steps), the noise of the reasoning and the entropy
level. Ground truth per run: :class:`Truth`.

Write runs as collapsewatch JSON Lines (one file per run, plus ``truth.json``)::

    python -m benchmarks.detection.scenarios --out /tmp/scenarios --seeds 3
"""

from __future__ import annotations

import argparse
import json
import random
from collections.abc import Iterator
from dataclasses import asdict, dataclass
from pathlib import Path

from collapsewatch.schema import Rollout, Turn

SCENARIOS: tuple[str, ...] = (
    "healthy",
    "template_collapse",
    "template_collapse_slot",
    "entropy_collapse",
    "no_signal",
    "degenerate_text",
    "format_collapse",
    "reward_hacking",
)

EXPECTED_RULE: dict[str, str | None] = {
    "healthy": None,
    "template_collapse": "template_collapse",
    "template_collapse_slot": "template_collapse",
    "entropy_collapse": "entropy_collapse",
    "no_signal": "no_signal",
    "degenerate_text": "degenerate_text",
    "format_collapse": "format_collapse",
    "reward_hacking": "reward_hacking",
}
"""The rule that should catch each scenario (None: nothing should fire)."""

GRID = 6
MOVES = ("up", "down", "left", "right")

FILLER = (
    "Let me double check the map.",
    "I want to avoid wasting moves.",
    "Walls cost a turn if I bump into them.",
    "There is no time limit to worry about yet.",
    "I will keep the plan short.",
    "Nothing else on the grid matters here.",
    "One careful step at a time.",
    "I should not overthink this.",
    "The previous turn taught me to check twice.",
    "A shorter path is always better.",
    "I can correct course later if needed.",
    "This looks similar to an earlier episode.",
    "Being systematic helps here.",
    "I am fairly confident about this.",
    "The reward comes only at the goal.",
    "Let me stay focused on the target.",
)

RESTATE = (
    "I am at ({x},{y}) and the goal is at ({gx},{gy}).",
    "My position is ({x},{y}); the goal sits at ({gx},{gy}).",
    "Currently at ({x},{y}), the target is ({gx},{gy}).",
    "The map puts me at ({x},{y}) with the goal at ({gx},{gy}).",
)
CONCLUDE = (
    "So I will move {a}.",
    "Best move: {a}.",
    "I should go {a} now.",
    "Heading {a} is the way to go.",
    "Moving {a} brings me closer, so {a} it is.",
)
# State-independent templates: fixed conclusion, free slots filled with synonyms.
TEMPLATES = (
    (
        "Let me think step by step. {Exploring|Looking around|Scouting} first is "
        "{usually|often|generally} {wise|smart|a good idea}, so I will move {move}.",
        "up",
    ),
    (
        "I {should|will|must} {stay calm|be careful|keep it simple} and {keep|stick to} a "
        "{steady|simple|safe} plan: {go|move|head} {move}.",
        "right",
    ),
    (
        "{Moving|Going|Heading} {move} {has worked|worked|paid off} {before|earlier|in "
        "the past}, {so|thus|therefore} {move} {again|once more|this time}.",
        "down",
    ),
    (
        "{Honestly|Frankly|Really}, the {safest|simplest|best} {choice|option|bet} "
        "{here|now|right now} is {probably|likely|surely} to go {move}.",
        "left",
    ),
)
# Slot-filling templates: copy the state's coordinates, conclude a fixed move.
SLOT_TEMPLATES = (
    (
        "I am at ({x},{y}) and the goal is at ({gx},{gy}). {I know this map|This is "
        "familiar|I have seen this}, {so|thus|therefore} I will move {move}.",
        "right",
    ),
    (
        "{Position|Location|Spot}: ({x},{y}). {Goal|Target|Exit}: ({gx},{gy}). "
        "{Decision|Plan|Choice}: {move}.",
        "down",
    ),
)
DEGENERATE = ("!", "Pe", "right")


@dataclass(frozen=True)
class Truth:
    """Ground truth of one generated run."""

    scenario: str
    seed: int
    steps: int
    states: int
    per_state: int
    onset: int | None
    ramp: int
    expected_rule: str | None

    def healthy(self, step: int) -> bool:
        """Whether ``step`` is before the onset (every step of a healthy run)."""
        return self.onset is None or step < self.onset


@dataclass(frozen=True)
class _State:
    sid: str
    x: int
    y: int
    gx: int
    gy: int
    wx: int
    wy: int

    @property
    def observation(self) -> str:
        return (
            f"Grid {GRID}x{GRID}. You are at ({self.x},{self.y}). The goal is at "
            f"({self.gx},{self.gy}). A wall is at ({self.wx},{self.wy})."
        )

    @property
    def good_moves(self) -> list[str]:
        moves = []
        if self.gx > self.x:
            moves.append("right")
        if self.gx < self.x:
            moves.append("left")
        if self.gy > self.y:
            moves.append("down")
        if self.gy < self.y:
            moves.append("up")
        return moves


def _fill(template: str, rng: random.Random, **slots: object) -> str:
    """Fill ``{a|b|c}`` alternatives at random and ``{name}`` slots from ``slots``."""
    out, i = [], 0
    while i < len(template):
        j = template.find("{", i)
        if j < 0:
            out.append(template[i:])
            break
        k = template.index("}", j)
        out.append(template[i:j])
        body = template[j + 1 : k]
        out.append(rng.choice(body.split("|")) if "|" in body else str(slots[body]))
        i = k + 1
    return "".join(out)


def _fillers(rng: random.Random, most: int = 2) -> list[str]:
    return rng.sample(FILLER, rng.randint(0, most))


def honest_reasoning(st: _State, move: str, rng: random.Random) -> str:
    """State-dependent reasoning: restates the state, derives the offsets, concludes."""
    dx, dy = st.gx - st.x, st.gy - st.y
    parts = [rng.choice(RESTATE).format(x=st.x, y=st.y, gx=st.gx, gy=st.gy)]
    horiz = "right" if dx > 0 else "left"
    vert = "down" if dy > 0 else "up"
    if dx and dy:
        parts.append(
            rng.choice(
                (
                    f"The goal is {abs(dx)} {horiz} and {abs(dy)} {vert}.",
                    f"That is {abs(dx)} columns {horiz} and {abs(dy)} rows {vert}.",
                    f"I need {abs(dx)} steps {horiz} and {abs(dy)} steps {vert}.",
                )
            )
        )
    elif dx:
        parts.append(f"Same row, {abs(dx)} columns to the {horiz}.")
    else:
        parts.append(f"Same column, {abs(dy)} rows {vert}.")
    in_way = (st.wx, st.wy) in ((st.x + 1, st.y), (st.x - 1, st.y), (st.x, st.y + 1))
    if rng.random() < 0.5:
        parts.append(
            f"The wall at ({st.wx},{st.wy}) is {'next to me' if in_way else 'not in my way'}."
        )
    parts.extend(_fillers(rng))
    parts.append(rng.choice(CONCLUDE).format(a=move))
    return " ".join(parts)


def _ramp(step: int, onset: int | None, ramp: int, peak: float = 1.0) -> float:
    """0 before ``onset``, rising linearly to ``peak`` over ``ramp`` steps."""
    if onset is None or step < onset:
        return 0.0
    return peak * min(1.0, (step - onset + 1) / ramp)


@dataclass(frozen=True)
class _Params:
    states: int
    per_state: int
    onset: int
    ramp: int
    entropy0: float
    q0: float
    q1: float
    hack_success_drop: float
    hack_bonus: float
    saturate_full: bool
    templates: tuple[int, ...]


def _params(seed: int, steps: int) -> _Params:
    rng = random.Random(10_007 * seed + 17)
    return _Params(
        states=rng.choice((6, 8, 10)),
        per_state=rng.choice((6, 8)),
        onset=rng.randint(min(15, steps // 3), min(30, steps // 2)),
        ramp=rng.randint(3, 10),
        entropy0=rng.uniform(0.8, 1.6),
        q0=rng.uniform(0.2, 0.4),
        q1=rng.uniform(0.7, 0.9),
        hack_success_drop=rng.uniform(0.0, 0.15),
        hack_bonus=rng.uniform(0.4, 1.0),
        saturate_full=rng.random() < 0.5,
        templates=tuple(rng.sample(range(len(TEMPLATES)), 3)),
    )


def _states(seed: int, count: int) -> list[_State]:
    rng = random.Random(seed * 7919 + 3)
    cells = [(x, y) for x in range(GRID) for y in range(GRID)]
    out = []
    for k in range(count):
        (x, y), (gx, gy), (wx, wy) = rng.sample(cells, 3)
        out.append(_State(f"s{seed}-{k}", x, y, gx, gy, wx, wy))
    return out


def truth(scenario: str, seed: int, steps: int = 60) -> Truth:
    """The ground truth of ``scenario`` at ``seed`` (what :func:`generate` produces)."""
    p = _params(seed, steps)
    return Truth(
        scenario=scenario,
        seed=seed,
        steps=steps,
        states=p.states,
        per_state=p.per_state,
        onset=None if scenario == "healthy" else p.onset,
        ramp=p.ramp,
        expected_rule=EXPECTED_RULE[scenario],
    )


def generate(scenario: str, seed: int, steps: int = 60) -> Iterator[list[Rollout]]:
    """The rollouts of one run, one list per step (steps 0 .. ``steps`` - 1).

    Deterministic in (scenario, seed, steps). The states are fixed for the run (the
    same initial states every step, as with a fixed prompt set).
    """
    if scenario not in SCENARIOS:
        raise ValueError(f"unknown scenario {scenario!r}; expected one of {SCENARIOS}")
    p = _params(seed, steps)
    t = truth(scenario, seed, steps)
    onset = t.onset
    states = _states(seed, p.states)
    canonical = {
        st.sid: honest_reasoning(st, st.good_moves[0], random.Random(f"{seed}-{st.sid}"))
        for st in states
    }
    rng = random.Random(f"{scenario}-{seed}")
    for step in range(steps):
        share = _ramp(step, onset, p.ramp)
        q = p.q0 + (p.q1 - p.q0) * step / max(1, steps - 1)
        entropy = p.entropy0 * (1.0 - 0.25 * step / max(1, steps - 1))
        bonus = 0.0
        if scenario == "reward_hacking" and onset is not None and step >= onset:
            q = p.q0 + (p.q1 - p.q0) * onset / max(1, steps - 1) - p.hack_success_drop * share
            bonus = p.hack_bonus * share
        if scenario == "entropy_collapse":
            entropy *= 1.0 - 0.9 * share
        valid_p = 0.9 + 0.1 * min(1.0, step / 20)
        rollouts: list[Rollout] = []
        for st in states:
            flat = scenario == "no_signal" and rng.random() < share
            for k in range(p.per_state):
                move = rng.choice(st.good_moves) if rng.random() < q else rng.choice(MOVES)
                reasoning = honest_reasoning(st, move, rng)
                action = move
                valid = rng.random() < valid_p
                hit = rng.random() < share
                if scenario == "template_collapse" and hit:
                    tpl, move = TEMPLATES[rng.choice(p.templates)]
                    parts = [_fill(tpl, rng, move=move), *_fillers(rng)]
                    rng.shuffle(parts)
                    reasoning, action = " ".join(parts), move
                elif scenario == "template_collapse_slot" and hit:
                    tpl, move = SLOT_TEMPLATES[seed % len(SLOT_TEMPLATES)]
                    body = _fill(tpl, rng, move=move, x=st.x, y=st.y, gx=st.gx, gy=st.gy)
                    reasoning, action = " ".join([body, *_fillers(rng, 1)]), move
                elif scenario == "entropy_collapse" and hit:
                    reasoning, action = canonical[st.sid], st.good_moves[0]
                    move = action
                elif scenario == "degenerate_text" and hit:
                    kind = rng.choice(DEGENERATE)
                    if kind == "!":
                        reasoning = "!" * rng.randint(30, 120)
                    elif kind == "Pe":
                        reasoning = "P" + "e" * rng.randint(30, 120)
                    else:
                        reasoning = (kind + " ") * rng.randint(20, 60)
                elif scenario == "format_collapse" and hit:
                    reasoning, valid = "", False
                    action = f"Answer: {move}. " + " ".join(_fillers(rng, 3))
                success = move in st.good_moves
                if flat:
                    success, valid = p.saturate_full, True
                reward = float(success) + 0.2 * float(valid) + bonus
                words = max(1, len((reasoning or action).split()))
                rollouts.append(
                    Rollout(
                        rollout_id=f"{scenario}-{seed}-{step}-{st.sid}-{k}",
                        step=step,
                        env_id="grid",
                        state_id=st.sid,
                        reward=reward,
                        success=success,
                        turns=[
                            Turn(
                                index=0,
                                observation=st.observation,
                                reasoning=reasoning,
                                action=action,
                                reward=reward,
                                done=True,
                                token_entropy=max(0.0, entropy * (1 + rng.gauss(0, 0.05))),
                                num_tokens=int(words * 1.3),
                                valid_format=valid,
                            )
                        ],
                    )
                )
        yield rollouts


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, required=True, help="folder for the JSONL runs")
    parser.add_argument("--seeds", type=int, default=3, help="runs per scenario")
    parser.add_argument("--steps", type=int, default=60, help="steps per run")
    parser.add_argument("--scenario", action="append", choices=SCENARIOS, help="only these")
    args = parser.parse_args(argv)
    from collapsewatch.importers.jsonl import write_rollouts

    args.out.mkdir(parents=True, exist_ok=True)
    truths = []
    for scenario in args.scenario or SCENARIOS:
        for seed in range(args.seeds):
            path = args.out / f"{scenario}-s{seed}.jsonl"
            rollouts = (r for rs in generate(scenario, seed, args.steps) for r in rs)
            n = write_rollouts(path, rollouts)
            truths.append({"file": path.name, **asdict(truth(scenario, seed, args.steps))})
            print(f"{path}: {n} rollouts")
    (args.out / "truth.json").write_text(json.dumps(truths, indent=1))


if __name__ == "__main__":
    main()
