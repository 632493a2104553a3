"""Continuations scored by an encoder-decoder model (T5): the prompt is read by the encoder, the answer
is scored by the decoder.

The model side of task scoring for a :class:`extrap.model.protocol.Seq2SeqLM` (:class:`extrap.hf.t5_run.T5Model`):

* the encoder reads the prompt followed by the model's end-of-sequence token (``eos_token_id``;
  T5's tokenizer ends every input with it; None: nothing is appended);
* the decoder starts from ``decoder_start_token_id`` and is teacher-forced on the continuation:
  position t predicts continuation token t from the encoder output and tokens < t.

What is computed per continuation is what :mod:`extrap.tasks.continuations` computes for a causal
LM (:func:`extrap.tasks.continuations.continuation_summary`): the summed log-likelihood of its
tokens, whether greedy decoding reproduces it (the argmax at every position is the next token: the
teacher-forced pass sees the greedy prefix up to the first mismatch), and the greedy prediction up
to its first wrong token.  The continuation tokens are the same as for a causal LM (`` <answer>\\n``,
in the tokenizer's own encoding, no end-of-sequence token required).  The differences: the prompt
and the answer do not share one sequence (the answer's tokens are not the prompt's continuation in
position, and the decoder starts fresh), and the temperature, which alignment sets, acts on the
encoder's self-attention only (004 aligns the T5 encoder).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from extrap.model.protocol import Seq2SeqLM, model_device
from extrap.tasks.continuations import Continuation, continuation_summary


def encoder_ids(model: Seq2SeqLM, prompt: list[int]) -> list[int]:
    """The encoder's input for ``prompt``: the prompt and the model's end-of-sequence token."""
    eos = model.eos_token_id
    return list(prompt) + ([int(eos)] if eos is not None else [])


def _padded(rows: list[list[int]], fill: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    """Right-padded ids (N, T) and their mask (1 = token)."""
    width = max(len(r) for r in rows)
    ids = torch.full((len(rows), width), fill, dtype=torch.long)
    mask = torch.zeros((len(rows), width), dtype=torch.long)
    for i, r in enumerate(rows):
        ids[i, : len(r)] = torch.tensor(r, dtype=torch.long)
        mask[i, : len(r)] = 1
    return ids, mask


def _decoder_inputs(model: Seq2SeqLM, conts: list[list[int]]) -> torch.Tensor:
    """The teacher-forced decoder input of each continuation: the start token, then its tokens but the last."""
    start = int(model.decoder_start_token_id)
    return _padded([[start] + list(c[:-1]) for c in conts])[0]


@torch.no_grad()
def seq2seq_continuations(
    model: Seq2SeqLM, pairs: list[tuple[list[int], list[int]]], batch: int = 4
) -> list[Continuation]:
    """For (prompt ids, continuation ids): log-likelihood, greedy match and greedy prediction ids.

    ``batch`` pairs at a time: prompts right-padded under the encoder's attention mask (padding
    keys are masked out), continuations right-padded (the decoder is causal).
    """
    device = model_device(model)
    out = []
    for b0 in range(0, len(pairs), batch):
        chunk = pairs[b0 : b0 + batch]
        ids, mask = _padded([encoder_ids(model, p) for p, _ in chunk])
        ids, mask = ids.to(device), mask.to(device)
        hidden = model.encode(ids, mask)
        logits = model.decode(hidden, _decoder_inputs(model, [c for _, c in chunk]).to(device), mask)
        logp = F.log_softmax(logits.float(), dim=-1).cpu()
        out.extend(continuation_summary(logp[i, : len(c)], c) for i, (_, c) in enumerate(chunk))
    return out


@torch.no_grad()
def seq2seq_candidates(model: Seq2SeqLM, prompt: list[int], conts: list[list[int]]) -> list[Continuation]:
    """:func:`seq2seq_continuations` of several continuations of one prompt: the encoder runs once."""
    device = model_device(model)
    hidden = model.encode(torch.tensor([encoder_ids(model, prompt)], dtype=torch.long, device=device), None)
    dec = _decoder_inputs(model, conts).to(device)
    logits = model.decode(hidden.expand(len(conts), -1, -1), dec, None)
    logp = F.log_softmax(logits.float(), dim=-1).cpu()
    return [continuation_summary(logp[i, : len(c)], c) for i, c in enumerate(conts)]
