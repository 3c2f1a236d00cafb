"""Batched generation that computes the prompts' shared opening once.

A local round's prompts are chat-templated: every exam prompt opens with the same system message and
instructions (84 of the math exam's 119-127 tokens), and a GRPO step's prompts open with the harness's
same template.  ``model.generate`` on a left-padded batch runs all of those tokens through the model
for every row; on a CPU that prefill was ~80% of an exam batch's time (py-spy, batch 64, 48 new tokens).
Here the longest token prefix common to all rows runs once, its key/value cache is repeated over the
batch, and ``generate`` continues from it with each row's own remainder laid out as
``[shared prefix | padding | remainder]`` (the attention mask hides the padding; positions follow the
mask, so every real token keeps the position it had in the plain call).  The batch's cache reserves room for
every token the call can add, so a decoding step writes one position instead of copying the whole cache.

    out = generate_shared_prefix(model, input_ids, attention_mask, max_new_tokens=96, do_sample=False)

The result has the plain call's shape and layout: the caller's (left-padded) ``input_ids`` followed by the
new tokens.  Sampling draws the same random numbers in the same order as the plain call (the prefix's
forward pass draws none), so what differs is floating-point rounding: the prefix is computed for one row
instead of in a padded batch.  That can only change a token whose two best candidates are within rounding
(a greedy tie) or whose sampled draw lands within rounding of a boundary between two tokens.

This module needs torch and transformers only (``rl_backend.exam_loop`` runs on GPU machines without the
rest of the project).
"""

from __future__ import annotations

import functools
import inspect
from typing import Any

import torch

MIN_SHARED_PREFIX = 8
"""Below this many shared tokens the plain call is used: the saving would not pay for the extra forward pass."""


def shared_prefix_length(input_ids: torch.Tensor, attention_mask: torch.Tensor) -> int:
    """Tokens that open every row of a left-padded batch, leaving each row at least one token of its own
    (``generate`` needs one uncached token per row to start from)."""
    lengths = attention_mask.sum(dim=1)
    width = input_ids.shape[1]
    shortest = int(lengths.min())
    if shortest < 2:
        return 0
    # every row's last ``shortest`` real tokens start at column width - length; align the rows on their first real token
    starts = width - lengths
    cols = torch.arange(shortest - 1, device=input_ids.device)
    aligned = input_ids.gather(1, starts.unsqueeze(1) + cols.unsqueeze(0))
    same = (aligned == aligned[:1]).all(dim=0)
    differs = (~same).nonzero()
    return int(differs[0]) if len(differs) else shortest - 1


def _cache_keyword(model: Any) -> str:
    """transformers 5.2x calls the cache argument ``cache``; earlier releases ``past_key_values``."""
    params = inspect.signature(model.forward).parameters
    return "cache" if "cache" in params else "past_key_values"


@torch.no_grad()  # not inference_mode: TRL trains on the ids this returns
def generate_shared_prefix(model: Any, input_ids: torch.Tensor, attention_mask: torch.Tensor,
                           drop_finished_every: int | None = None, **generate_kwargs: Any) -> torch.Tensor:
    """``model.generate(input_ids=..., attention_mask=..., **generate_kwargs)`` for a left-padded batch, with
    the rows' common opening computed once; returns ``input_ids`` followed by the generated tokens.

    ``drop_finished_every=k`` (greedy decoding only) generates ``k`` tokens at a time and leaves the rows that
    ended out of the next ``k``: a batch otherwise decodes every row until its longest answer ends.  Rows that
    ended are padded with ``pad_token_id`` after their end token, as ``generate`` pads them."""
    from transformers import DynamicCache

    # the class's generate, not an instance attribute: the trainer routes TRL's call on the model through here
    generate = functools.partial(type(model).generate, model)
    batch, width = input_ids.shape
    shared = shared_prefix_length(input_ids, attention_mask) if batch > 1 else 0
    config = generate_kwargs.get("generation_config")
    own_cache = ("cache" in generate_kwargs or "past_key_values" in generate_kwargs
                 or getattr(config, "cache_implementation", None) is not None)
    if shared < MIN_SHARED_PREFIX or own_cache:  # a caller that chose its own cache keeps it
        return generate(input_ids=input_ids, attention_mask=attention_mask, **generate_kwargs)
    keyword = _cache_keyword(model)
    lengths = attention_mask.sum(dim=1)
    first = int(width - lengths[0])
    prefix = input_ids[:1, first:first + shared]
    cache = DynamicCache(config=model.config)
    model(input_ids=prefix, use_cache=True, **{keyword: cache})
    cache.batch_repeat_interleave(batch)
    _preallocate(cache, width + _new_tokens(model, generate_kwargs))
    # [prefix | padding | remainder]: each row's remainder stays right-aligned, as in the caller's batch; what
    # sits under the zeros of the mask (the caller's padding and prefix copies) is never attended to
    ids = input_ids.clone()
    mask = torch.zeros_like(attention_mask)
    ids[:, :shared] = prefix
    mask[:, :shared] = 1
    for row in range(batch):
        mask[row, width - (int(lengths[row]) - shared):] = 1
    if drop_finished_every:
        new = _generate_dropping_finished(model, generate, ids, mask, cache, keyword, drop_finished_every,
                                          generate_kwargs)
    else:
        new = generate(input_ids=ids, attention_mask=mask, **{keyword: cache}, **generate_kwargs)[:, width:]
    return torch.cat([input_ids, new], dim=1)


def _generate_dropping_finished(model: Any, generate: Any, ids: torch.Tensor, mask: torch.Tensor, cache: Any,
                                keyword: str, every: int, generate_kwargs: dict) -> torch.Tensor:
    """The new tokens of a greedy ``generate`` made ``every`` tokens at a time, each call continuing from the
    cache with only the rows that have not ended.  A row's tokens are the one-call tokens up to rounding (the
    batch's matrices lose rows), so they can differ only where two candidates tie within rounding."""
    if generate_kwargs.get("do_sample"):
        raise ValueError("drop_finished_every is for greedy decoding: leaving rows out would change which "
                         "random numbers the sampled rows draw")
    config = model.generation_config
    pad = generate_kwargs.get("pad_token_id", config.pad_token_id)
    eos = torch.tensor(sorted({*as_list(generate_kwargs.get("eos_token_id", config.eos_token_id))}),
                       device=ids.device)
    budget = _new_tokens(model, generate_kwargs)
    kwargs = {k: v for k, v in generate_kwargs.items() if k != "max_new_tokens"}
    new = ids.new_full((ids.shape[0], budget), pad)
    rows, done = torch.arange(ids.shape[0], device=ids.device), 0
    while done < budget and len(rows):
        width = ids.shape[1]
        out = generate(input_ids=ids, attention_mask=mask, **{keyword: cache},
                       max_new_tokens=min(every, budget - done), **kwargs)
        chunk = out[:, width:]
        new[rows, done:done + chunk.shape[1]] = chunk
        done += chunk.shape[1]
        going = ~torch.isin(chunk, eos).any(dim=1)
        if not going.any():
            break
        keep = going.nonzero().squeeze(1)
        cache.batch_select_indices(keep)  # the cache holds every position but the last token, which comes next
        rows, ids = rows[keep], out[keep]
        mask = torch.cat([mask[keep], mask.new_ones(len(keep), chunk.shape[1])], dim=1)
    return new[:, :done]


def as_list(value: Any) -> list:
    """A token id, a list of them or ``None`` (as ``eos_token_id`` comes) as a list."""
    return [] if value is None else [value] if isinstance(value, int) else list(value)


def _new_tokens(model: Any, generate_kwargs: dict) -> int:
    """The most tokens this ``generate`` call can add (0 when unknown: the cache then grows as it needs)."""
    config = generate_kwargs.get("generation_config") or model.generation_config
    value = generate_kwargs.get("max_new_tokens", getattr(config, "max_new_tokens", None))
    return int(value or 0)


def _preallocate(cache: Any, capacity: int) -> None:
    """Make each of ``cache``'s layers write new keys and values into room reserved up front.

    ``DynamicCache`` concatenates every step: each of the 30 layers copies its whole key and value cache to
    append one token, about 0.6 GB a step at batch 64, and that copying was a quarter of a CPU decoding
    step.  ``GrowingLayer`` hands attention the same values, as a view of the first ``n`` positions of a
    buffer reserved for ``capacity``; what attention computes is the same, so the tokens are too."""
    from transformers.cache_utils import DynamicLayer

    layers = getattr(cache, "layers", None)
    if not layers or not all(type(layer) is DynamicLayer for layer in layers):
        return  # another cache layout (sliding windows, a newer transformers): leave it as it is
    for i, layer in enumerate(layers):
        grown = _growing_layer_class()(capacity)
        grown.__dict__.update(layer.__dict__)
        layers[i] = grown


@functools.cache  # one class, made when first needed: transformers is imported on first use, as above
def _growing_layer_class() -> type:
    from transformers.cache_utils import DynamicLayer

    class GrowingLayer(DynamicLayer):
        """A ``DynamicLayer`` whose ``keys``/``values`` are views of buffers with room to grow (doubling when
        full).  Anything else that replaces ``keys`` (crop, batch selection) is taken over at the next update."""

        def __init__(self, capacity: int) -> None:
            super().__init__()
            self._capacity, self._buffers = capacity, None

        def update(self, key_states: torch.Tensor, value_states: torch.Tensor, *args: Any, **kwargs: Any):
            if not self.is_initialized:
                self.lazy_initialization(key_states, value_states)
            old = self.keys.shape[-2] if self.keys.numel() else 0
            new = old + key_states.shape[-2]
            buffers = self._buffers
            if buffers is None or buffers[2] is not self.keys or new > buffers[0].shape[-2]:
                current = buffers[0].shape[-2] if buffers else 0
                room = max(self._capacity, new, current if new <= current else 2 * current)
                shape = (*key_states.shape[:-2], room, key_states.shape[-1])
                keys, values = key_states.new_empty(shape), value_states.new_empty(shape)
                if old:
                    keys[..., :old, :] = self.keys
                    values[..., :old, :] = self.values
                buffers = (keys, values, None)
            keys, values, _ = buffers
            keys[..., old:new, :] = key_states
            values[..., old:new, :] = value_states
            self.keys, self.values = keys[..., :new, :], values[..., :new, :]
            self._buffers = (keys, values, self.keys)
            return self.keys, self.values

    return GrowingLayer

