"""masking.*: which tokens count as copied from the observation."""

from __future__ import annotations

from collapsewatch.metrics import masking

OBS_A = "You are at (2,3). The goal is at (7,1). Legal moves: up, down, left, right."
OBS_B = "You are at (4,4). The goal is at (0,9). Legal moves: up, down, left, right."


def test_shared_tokens_are_the_boilerplate() -> None:
    shared = masking.shared_tokens([OBS_A, OBS_B, ""])  # the empty one is skipped
    assert shared == {"you", "are", "at", "the", "goal", "is", "legal", "moves"} | {
        "up",
        "down",
        "left",
        "right",
    }
    assert masking.shared_tokens([OBS_A]) == frozenset()  # one observation: no boilerplate
    assert masking.shared_tokens([]) == frozenset()


def test_mask_copied_replaces_state_tokens_and_keeps_boilerplate() -> None:
    keep = masking.shared_tokens([OBS_A, OBS_B])
    text = "I am at (2,3), goal (7,1): 5 down, 2 LEFT, so Left. Not 23."
    # 2, 3, 7, 1 are copied (case-insensitive whole words; "23" is another token);
    # "at", "goal", "down", "left" occur in every observation: kept.
    assert masking.mask_copied(text, OBS_A, keep=keep) == (
        "I am at (_,_), goal (_,_): 5 down, _ LEFT, so Left. Not 23."
    )
    # Without the boilerplate rule every observation word goes, the conclusion too.
    assert masking.mask_copied("so I go left", OBS_A) == "so I go _"
    assert masking.mask_copied("nothing copied here", "zzz") == "nothing copied here"
    assert masking.mask_copied("at 2", OBS_A, placeholder="<c>") == "<c> <c>"


def test_mask_turns_uses_every_observation_seen_so_far() -> None:
    # Turn 1 copies from turn 0's observation ("3") and its own ("5"); turn 0 cannot
    # have copied turn 1's observation ("5" stays).
    out = masking.mask_turns(["at 3, aiming 5", "now 5 after 3"], ["pos 3", "pos 5"])
    assert out == ["at _, aiming 5", "now _ after _"]
    out = masking.mask_turns(["pos 3"], ["pos 3"], keep={"pos"})
    assert out == ["pos _"]
