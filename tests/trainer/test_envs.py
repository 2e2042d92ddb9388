"""Environments: deterministic from the seed, solvable by their expert, and strict
about invalid actions."""

from __future__ import annotations

import pytest

from collapsewatch.trainer.envs import ENVS, make_env, vocabulary
from collapsewatch.trainer.envs.frozenlake import FrozenLake
from collapsewatch.trainer.policy import word_tokenizer

NAMES = sorted(ENVS)


@pytest.mark.parametrize("name", NAMES)
def test_reset_is_deterministic_from_the_seed(name: str) -> None:
    a, b = make_env(name), make_env(name)
    for seed in range(20):
        assert a.reset(seed) == b.reset(seed)
        assert a.solve() == b.solve()
    observations = {a.reset(seed) for seed in range(50)}
    assert len(observations) > 25, "different seeds should give different states"


@pytest.mark.parametrize("name", NAMES)
def test_episodes_replay_identically(name: str) -> None:
    a, b = make_env(name), make_env(name)
    moves = ["down", "right", "up", "left", "right", "down"]
    for seed in range(10):
        a.reset(seed)
        b.reset(seed)
        for move in moves:
            if a.done:
                break
            assert a.step(move) == b.step(move)


@pytest.mark.parametrize("name", NAMES)
def test_the_expert_solves_every_state(name: str) -> None:
    env = make_env(name)
    for seed in range(100):
        episode = env.expert_episode(seed)
        assert env.success, f"{name} seed {seed}: expert failed"
        assert len(episode) <= env.max_turns
        for _, expert in episode:
            assert expert.action in expert.reasoning.split(), "reasoning names its move"


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("bad", [None, "", "jump", "up down", "<answer>"])
def test_invalid_actions_are_penalised_and_counted(name: str, bad: str | None) -> None:
    env = make_env(name, invalid_penalty=-0.25)
    before = env.reset(3)
    obs, reward, terminated, truncated, info = env.step(bad)
    assert reward == -0.25
    assert not terminated
    assert info["invalid_actions"] == 1
    assert info["valid_action"] is False
    assert obs == before, "an invalid action leaves the state unchanged"
    assert truncated == (env.max_turns == 1)


def test_actions_are_read_leniently_but_exactly() -> None:
    env = FrozenLake()
    env.reset(0)
    assert env.parse_action(" Down. ") == "down"
    assert env.parse_action("go down") is None


def test_frozenlake_truncates_after_max_turns() -> None:
    env = FrozenLake(max_turns=3)
    env.reset(1)
    results = [env.step("nonsense") for _ in range(3)]
    assert [r[3] for r in results] == [False, False, True]
    assert env.done and results[-1][4]["invalid_actions"] == 3
    with pytest.raises(RuntimeError):
        env.step("up")


def test_frozenlake_hole_ends_without_reward() -> None:
    env = FrozenLake()
    for seed in range(200):
        env.reset(seed)
        for move in ("up", "down", "left", "right"):
            r, c = env.player
            dr, dc = {"up": (-1, 0), "down": (1, 0), "left": (0, -1), "right": (0, 1)}[move]
            if (r + dr, c + dc) in env.holes:
                _, reward, terminated, _, info = env.step(move)
                assert (reward, terminated, info["success"]) == (0.0, True, False)
                return
    pytest.fail("no state with a hole next to the start in 200 seeds")


@pytest.mark.parametrize("name", NAMES)
def test_tokenizer_covers_observations_and_expert_reasoning(name: str) -> None:
    tok = word_tokenizer(vocabulary())
    env = make_env(name)
    for seed in range(30):
        for observation, expert in env.expert_episode(seed):
            for text in (observation, expert.reasoning, expert.action):
                ids = tok.encode(text, add_special_tokens=False)
                assert tok.unk_token_id not in ids, text
