"""The real-model path on CPU: a checkpoint folder with a byte-level BPE tokenizer and
a chat template (tags split over several tokens, stop string instead of an end token).
The model is a tiny Qwen2-architecture one built and saved here; nothing downloaded."""

from __future__ import annotations

from pathlib import Path

import pytest

from collapsewatch.trainer.envs import make_env
from collapsewatch.trainer.format import format_response

CHAT_TEMPLATE = (
    "{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n"
    "{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast, Qwen2Config, Qwen2ForCausalLM

    texts = []
    env = make_env("frozenlake")
    for seed in range(100):
        for obs, expert in env.expert_episode(seed):
            texts += [obs, format_response(expert.reasoning, expert.action)]
    core = Tokenizer(models.BPE())
    core.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    core.decoder = decoders.ByteLevel()
    core.train_from_iterator(
        texts,
        trainers.BpeTrainer(
            vocab_size=300,
            special_tokens=["<|endoftext|>", "<|im_start|>", "<|im_end|>"],
            initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        ),
    )
    tok = PreTrainedTokenizerFast(
        tokenizer_object=core, eos_token="<|im_end|>", pad_token="<|endoftext|>"
    )
    tok.chat_template = CHAT_TEMPLATE
    config = Qwen2Config(
        vocab_size=len(tok), hidden_size=32, intermediate_size=64, num_hidden_layers=1,
        num_attention_heads=2, num_key_value_heads=1, max_position_embeddings=512,
        eos_token_id=tok.eos_token_id, pad_token_id=tok.pad_token_id,
    )  # fmt: skip
    path = tmp_path_factory.mktemp("tinyqwen")
    Qwen2ForCausalLM(config).save_pretrained(path)
    tok.save_pretrained(path)
    return path


def test_reasoning_span_with_multi_token_tags(checkpoint: Path) -> None:
    from collapsewatch.trainer.policy import load_policy

    policy = load_policy(checkpoint, device="cpu", dtype="float32")
    assert policy.chat
    ids = policy.response_ids(format_response("player 0 1 goal 2 3 move down", "down"))
    assert len(policy.tokenizer.encode("<think>", add_special_tokens=False)) > 1
    start, end = policy.reasoning_span(ids)
    assert policy.decode(ids[start:end]).strip() == "player 0 1 goal 2 3 move down"


def test_grpo_step_on_a_checkpoint(checkpoint: Path) -> None:
    from collapsewatch.trainer.cli import REAL_MODEL_OVERRIDES
    from collapsewatch.trainer.grpo import GRPOTrainer
    from collapsewatch.trainer.grpo_config import preset

    config = preset(
        "healthy",
        **{**REAL_MODEL_OVERRIDES, "model_path": str(checkpoint), "dtype": "float32",
           "num_states": 2, "group_size": 2, "max_new_tokens": 24, "sft_steps": 2,
           "num_threads": 1},
    )  # fmt: skip
    trainer = GRPOTrainer(config)
    rollouts, _, metrics = trainer.train_step()
    assert len(rollouts) == 4
    assert all(t.num_tokens and t.num_tokens <= 24 for r in rollouts for t in r.turns)
    assert metrics["loss"] == metrics["loss"]  # finite, not NaN


def test_missing_checkpoint_is_a_clear_error(tmp_path: Path) -> None:
    from collapsewatch.trainer.policy import load_policy

    with pytest.raises(FileNotFoundError, match="not a local checkpoint"):
        load_policy(tmp_path / "nope", device="cpu")
