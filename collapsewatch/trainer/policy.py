"""The policy: any causal LM from transformers, with its tokenizer and prompt format.

Two ways to get one:

* :func:`tiny_policy` builds a GPT-2-architecture model from a config (no download)
  with a word-level tokenizer over the environments' vocabulary: the CPU default
  (DESIGN.md §7: 2 layers, 64 dims; a GRPO step of 8 × 8 rollouts takes well under a
  second on one core).
* :func:`load_policy` loads a local checkpoint directory (e.g. Qwen2.5-0.5B-Instruct)
  in bf16 on a GPU. Nothing is fetched from a model hub: the path must exist.

The policy is ``π_θ(· | context) = softmax(logits / temperature)``: sampling, the
log-probabilities in the loss, token entropies and cross-scores all use that one
distribution. Prompts are built by :meth:`Policy.prompt_ids`: the plain form for the
tiny model (``<bos> observation``) or the tokenizer's chat template with a system
message that states the task and the response format.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import torch
from torch import Tensor
from transformers import (
    AutoModelForCausalLM,
    AutoTokenizer,
    GenerationConfig,
    GPT2Config,
    GPT2LMHeadModel,
    PreTrainedModel,
    PreTrainedTokenizerBase,
    PreTrainedTokenizerFast,
)

from .format import ANSWER_CLOSE, TAGS, THINK_CLOSE, THINK_OPEN

SPECIAL = ("<pad>", "<unk>", "<bos>", "<eos>")
FORMAT_INSTRUCTION = (
    "First think about the current state inside <think> </think>, stating the facts your "
    "move depends on, then give only your move inside <answer> </answer>."
)


def word_tokenizer(words: Sequence[str]) -> PreTrainedTokenizerFast:
    """A word-level tokenizer: one id per word in ``words``, plus specials and tags.

    Words are split on whitespace; the format tags are matched even without spaces
    around them. Built locally with the ``tokenizers`` library, nothing downloaded.
    """
    from tokenizers import AddedToken, Tokenizer, models, pre_tokenizers

    vocab: dict[str, int] = {}
    for word in (*SPECIAL, *TAGS, *words):
        vocab.setdefault(word, len(vocab))
    core = Tokenizer(models.WordLevel(vocab, unk_token="<unk>"))
    core.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    core.add_tokens([AddedToken(tag, special=False, normalized=False) for tag in TAGS])
    return PreTrainedTokenizerFast(
        tokenizer_object=core,
        pad_token="<pad>",
        unk_token="<unk>",
        bos_token="<bos>",
        eos_token="<eos>",
    )


@dataclass
class Policy:
    """A causal LM, its tokenizer, and how prompts and responses are laid out."""

    model: PreTrainedModel
    tokenizer: PreTrainedTokenizerBase
    chat: bool = False
    max_new_tokens: int = 24

    def __post_init__(self) -> None:
        # Dropout off for good: rollouts, the loss and the reference must see one
        # distribution, so the importance ratio is exactly 1 on the first update.
        self.model.eval()
        tok = self.tokenizer
        if tok.pad_token_id is None:
            tok.pad_token = tok.eos_token
        eos = self.model.generation_config.eos_token_id
        eos_ids = set(eos if isinstance(eos, list) else [eos] if eos is not None else [])
        if tok.eos_token_id is not None:
            eos_ids.add(tok.eos_token_id)
        self.eos_ids: set[int] = eos_ids

    @property
    def device(self) -> torch.device:
        return next(self.model.parameters()).device

    # -- prompts and responses ---------------------------------------------------------
    def prompt_ids(
        self,
        observation: str,
        instruction: str = "",
        history: Sequence[tuple[str, str]] = (),
    ) -> list[int]:
        """Token ids of the context for one turn: earlier (observation, response)
        pairs from ``history``, then the current observation."""
        tok = self.tokenizer
        if self.chat:
            messages = [{"role": "system", "content": f"{instruction} {FORMAT_INSTRUCTION}"}]
            for past_obs, past_resp in history:
                messages.append({"role": "user", "content": past_obs})
                messages.append({"role": "assistant", "content": past_resp})
            messages.append({"role": "user", "content": observation})
            ids = tok.apply_chat_template(messages, add_generation_prompt=True, tokenize=True)
            if isinstance(ids, dict) or hasattr(ids, "input_ids"):  # BatchEncoding
                ids = ids["input_ids"]
            return list(ids)
        text = " ".join([*(f"{o} {r}" for o, r in history), observation])
        return [tok.bos_token_id, *tok.encode(text, add_special_tokens=False)]

    def response_ids(self, response: str) -> list[int]:
        """Token ids of a response text, ended by the end-of-sequence token."""
        ids = self.tokenizer.encode(response, add_special_tokens=False)
        return [*ids, self.tokenizer.eos_token_id]

    def decode(self, ids: Sequence[int]) -> str:
        """Response text of generated ids (end-of-sequence and padding dropped)."""
        keep = [i for i in ids if i not in self.eos_ids and i != self.tokenizer.pad_token_id]
        return self.tokenizer.decode(keep, skip_special_tokens=False)

    def reasoning_span(self, ids: Sequence[int]) -> tuple[int, int]:
        """``(start, end)``: the response tokens inside the think span, ``ids[start:end]``.

        Found by decoding prefixes (binary search, as the text of a prefix grows with
        it), so it works for any tokenizer: tags may span several tokens. ``(0, 0)``
        when the response has no think span.
        """

        def first_prefix(pred: object) -> int:
            lo, hi = 0, len(ids) + 1
            while lo < hi:  # smallest k with pred(decode(ids[:k]))
                mid = (lo + hi) // 2
                if pred(self.decode(ids[:mid])):  # type: ignore[operator]
                    hi = mid
                else:
                    lo = mid + 1
            return lo

        start = first_prefix(lambda text: THINK_OPEN in text.lower())
        if start > len(ids):
            return 0, 0
        close = first_prefix(lambda text: THINK_CLOSE in text.lower())
        if close > len(ids):
            return start, len(ids)
        # The token that finishes "</think>" and the ones that began it are not reasoning.
        tag_at = self.decode(ids[:close]).lower().index(THINK_CLOSE)
        end = first_prefix(lambda text: len(text) > tag_at)
        return start, max(start, end - 1)

    # -- sampling and scoring ----------------------------------------------------------
    @torch.no_grad()
    def generate(
        self,
        prompts: Sequence[Sequence[int]],
        temperature: float,
        max_new_tokens: int | None = None,
    ) -> list[list[int]]:
        """Sample one response per prompt (batched, left-padded); returns response ids,
        cut after the end-of-sequence token."""
        tok = self.tokenizer
        pad = tok.pad_token_id
        width = max(len(p) for p in prompts)
        input_ids = torch.full((len(prompts), width), pad, dtype=torch.long)
        mask = torch.zeros((len(prompts), width), dtype=torch.long)
        for row, p in enumerate(prompts):
            input_ids[row, width - len(p) :] = torch.tensor(p)
            mask[row, width - len(p) :] = 1
        config = GenerationConfig(
            do_sample=True,
            temperature=temperature,
            top_k=0,
            top_p=1.0,
            max_new_tokens=max_new_tokens or self.max_new_tokens,
            pad_token_id=pad,
            eos_token_id=sorted(self.eos_ids),
            # A real model may not have "</answer>" as an end token.
            stop_strings=[ANSWER_CLOSE] if self.chat else None,
        )
        extra = {"tokenizer": tok} if self.chat else {}
        out = self.model.generate(
            input_ids=input_ids.to(self.device),
            attention_mask=mask.to(self.device),
            generation_config=config,
            **extra,
        )
        responses = []
        for row in out[:, width:].tolist():
            cut = next((k + 1 for k, t in enumerate(row) if t in self.eos_ids), None)
            if cut is None:  # stopped by a stop string or the length limit
                while row and row[-1] == pad:
                    row.pop()
                cut = len(row)
            responses.append(row[:cut])
        return responses


def token_stats(
    model: PreTrainedModel,
    sequences: Sequence[Sequence[int]],
    starts: Sequence[int],
    temperature: float,
    pad_id: int,
    with_entropy: bool = True,
) -> tuple[Tensor, Tensor | None, Tensor]:
    """Per-token log-probabilities (and entropies) of the scored part of each sequence.

    ``sequences[b]`` is context + scored tokens; tokens ``starts[b]:`` are scored.
    Returns ``(logprobs, entropies, mask)``, each ``(B, T)`` with T the longest scored
    part, right-aligned to nothing: position t is scored token ``starts[b] + t``;
    ``mask`` marks real tokens. Gradients flow when called with grad enabled.
    """
    device = next(model.parameters()).device
    width = max(len(s) for s in sequences)
    ids = torch.full((len(sequences), width), pad_id, dtype=torch.long)
    attn = torch.zeros((len(sequences), width), dtype=torch.long)
    for row, seq in enumerate(sequences):
        ids[row, : len(seq)] = torch.tensor(seq)
        attn[row, : len(seq)] = 1
    ids, attn = ids.to(device), attn.to(device)
    logits = model(input_ids=ids, attention_mask=attn).logits.float() / temperature
    span = max(len(s) - st for s, st in zip(sequences, starts, strict=True))
    # Token k is predicted by the logits at k - 1: gather, per row, positions start-1 …
    pos = torch.tensor(starts, device=device)[:, None] - 1 + torch.arange(span, device=device)
    lengths = torch.tensor(
        [len(s) - st for s, st in zip(sequences, starts, strict=True)], device=device
    )
    mask = torch.arange(span, device=device)[None, :] < lengths[:, None]
    pos = torch.where(mask, pos, torch.zeros_like(pos))
    step_logits = torch.gather(logits, 1, pos[:, :, None].expand(-1, -1, logits.shape[-1]))
    logp_all = torch.log_softmax(step_logits, dim=-1)
    targets = torch.gather(ids, 1, torch.where(mask, pos + 1, torch.zeros_like(pos)))
    logprobs = torch.gather(logp_all, 2, targets[:, :, None]).squeeze(2) * mask
    entropies = None
    if with_entropy:
        entropies = -(logp_all.exp() * logp_all).sum(-1) * mask
    return logprobs, entropies, mask


def tiny_policy(
    words: Sequence[str],
    n_layer: int = 2,
    n_embd: int = 64,
    n_head: int = 4,
    n_positions: int = 256,
    seed: int = 0,
    max_new_tokens: int = 24,
) -> Policy:
    """The CPU default: a GPT-2-architecture model built from a config, weights drawn
    from ``seed``, with a word-level tokenizer over ``words`` (no download)."""
    tok = word_tokenizer(words)
    config = GPT2Config(
        vocab_size=len(tok),
        n_positions=n_positions,
        n_embd=n_embd,
        n_layer=n_layer,
        n_head=n_head,
        resid_pdrop=0.0,
        embd_pdrop=0.0,
        attn_pdrop=0.0,
        bos_token_id=tok.bos_token_id,
        eos_token_id=tok.eos_token_id,
        pad_token_id=tok.pad_token_id,
    )
    torch.manual_seed(seed)
    model = GPT2LMHeadModel(config)
    model.generation_config.eos_token_id = tok.eos_token_id
    model.generation_config.pad_token_id = tok.pad_token_id
    return Policy(model=model, tokenizer=tok, chat=False, max_new_tokens=max_new_tokens)


def load_policy(
    path: str | Path, device: str = "cuda", dtype: str = "bfloat16", max_new_tokens: int = 160
) -> Policy:
    """A real model from a local checkpoint directory (no hub access: the path must
    exist), in ``dtype`` on ``device``, prompted through its chat template."""
    path = Path(path)
    if not path.is_dir():
        raise FileNotFoundError(f"model path {str(path)!r} is not a local checkpoint directory")
    tok = AutoTokenizer.from_pretrained(path, local_files_only=True)
    tok.padding_side = "left"
    model = AutoModelForCausalLM.from_pretrained(
        path, local_files_only=True, dtype=getattr(torch, dtype)
    ).to(device)
    chat = getattr(tok, "chat_template", None) is not None
    return Policy(model=model, tokenizer=tok, chat=chat, max_new_tokens=max_new_tokens)
