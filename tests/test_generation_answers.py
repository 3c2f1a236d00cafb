"""Generation with the prompts' shared opening computed once gives the answers the plain ``generate`` gave.

``tests/data/generation_before.json`` holds token ids made by the code before ``rl_backend.shared_prefix``
(``sit_exam`` with a plain ``model.generate`` per batch, and one sampled plain ``generate``), on the base
policy; the tests below make the same calls through today's code and compare token for token.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from domains.math import MathDomain
from rl_backend.exam_loop import sit_exam
from rl_backend.shared_prefix import MIN_SHARED_PREFIX, generate_shared_prefix, shared_prefix_length

BEFORE = json.loads((Path(__file__).parent / "data" / "generation_before.json").read_text())


@pytest.fixture(scope="module")
def policy():
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from rl_backend.model import resolve_model

    path = resolve_model(None)
    tokenizer = AutoTokenizer.from_pretrained(path, padding_side="left")
    model = AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32).eval()
    return model, tokenizer


def _encode(tokenizer, texts: list[str]) -> dict:
    return tokenizer(texts, return_tensors="pt", padding=True, add_special_tokens=False)


def test_exam_answers_are_the_ones_the_plain_generate_gave(policy) -> None:
    model, tokenizer = policy
    frozen, domain = BEFORE["exam"], MathDomain()
    tasks = domain.tasks("heldout", domain.eval_specs, frozen["tasks"], frozen["heldout_seed"])
    assert [t.task_id for t in tasks] == frozen["task_ids"]
    first = [tokenizer.apply_chat_template(domain.exam_messages(t), tokenize=False, add_generation_prompt=True)
             for t in tasks[:frozen["batch_size"]]]
    enc = _encode(tokenizer, first)
    # the batches really take the shared path (a fallback to the plain call would pass trivially)
    assert shared_prefix_length(enc["input_ids"], enc["attention_mask"]) >= MIN_SHARED_PREFIX
    answers = sit_exam(domain, tasks, model, tokenizer, frozen["max_new_tokens"], batch_size=frozen["batch_size"])
    assert [a.token_ids for a in answers] == frozen["token_ids"]


def test_sampled_rollouts_and_the_random_stream_are_the_plain_generates(policy) -> None:
    model, tokenizer = policy
    frozen, domain = BEFORE["rollouts"], MathDomain()
    exam = BEFORE["exam"]  # the rollouts' prompts are the exam set's first ones
    tasks = domain.tasks("heldout", domain.eval_specs, exam["tasks"], exam["heldout_seed"])[:frozen["prompts"]]
    texts = [tokenizer.apply_chat_template(domain.exam_messages(t), tokenize=False, add_generation_prompt=True)
             for t in tasks for _ in range(frozen["group"])]
    enc = _encode(tokenizer, texts)
    kwargs = dict(max_new_tokens=frozen["max_new_tokens"], do_sample=True, temperature=frozen["temperature"],
                  top_p=1.0, top_k=0, pad_token_id=tokenizer.pad_token_id)
    torch.manual_seed(frozen["seed"])
    out = generate_shared_prefix(model, enc["input_ids"], enc["attention_mask"], **kwargs)
    after_shared = torch.get_rng_state()
    assert out[:, :enc["input_ids"].shape[1]].equal(enc["input_ids"])  # the caller's layout: its prompts, then new
    assert out[:, enc["input_ids"].shape[1]:].tolist() == frozen["token_ids"]
    torch.manual_seed(frozen["seed"])
    with torch.no_grad():
        model.generate(**enc, **kwargs)
    # the next step's draws are the same too: the shared path draws exactly what the plain one draws
    assert torch.get_rng_state().equal(after_shared)


def test_prefix_is_read_through_the_mask_not_the_pad_token() -> None:
    # pad id 2 is also <|im_end|>, a real token: a row padded with 2s before a real 2 must not count the pads
    ids = torch.tensor([[2, 2, 7, 8, 9, 1],
                        [7, 8, 9, 2, 2, 4]])
    mask = torch.tensor([[0, 0, 1, 1, 1, 1],
                         [1, 1, 1, 1, 1, 1]])
    assert shared_prefix_length(ids, mask) == 3
    assert shared_prefix_length(ids, torch.ones_like(ids)) == 0  # read without the mask the rows differ at once


def test_every_row_keeps_a_token_of_its_own() -> None:
    # one row is the other's opening: generate needs an uncached token in every row to start from
    ids = torch.tensor([[0, 0, 5, 6, 7],
                        [5, 6, 7, 8, 9]])
    mask = torch.tensor([[0, 0, 1, 1, 1],
                         [1, 1, 1, 1, 1]])
    assert shared_prefix_length(ids, mask) == 2
    assert shared_prefix_length(torch.tensor([[5], [5]]), torch.tensor([[1], [1]])) == 0


def test_rows_without_a_common_opening_take_the_plain_call(policy) -> None:
    model, tokenizer = policy
    enc = _encode(tokenizer, ["Two plus two is", "What is the capital of France?"])
    assert shared_prefix_length(enc["input_ids"], enc["attention_mask"]) < MIN_SHARED_PREFIX
    kwargs = dict(max_new_tokens=4, do_sample=False, pad_token_id=tokenizer.pad_token_id)
    with torch.no_grad():
        plain = model.generate(**enc, **kwargs)
    assert generate_shared_prefix(model, enc["input_ids"], enc["attention_mask"], **kwargs).equal(plain)


def test_the_reserved_cache_holds_what_the_growing_one_holds(policy) -> None:
    # the same forward passes into DynamicCache (concatenating) and into one whose layers write into reserved
    # room: every step's keys and values are equal, past the reserved room (it doubles) and after a batch
    # selection, which replaces the layers' tensors behind their back
    from transformers import DynamicCache

    from rl_backend.shared_prefix import _preallocate

    model, _ = policy
    torch.manual_seed(0)
    plain, reserved = DynamicCache(config=model.config), DynamicCache(config=model.config)
    prefix = torch.randint(0, 1000, (1, 6))
    with torch.no_grad():
        for cache in (plain, reserved):
            model(input_ids=prefix, use_cache=True, cache=cache)
            cache.batch_repeat_interleave(3)
        _preallocate(reserved, capacity=8)
        assert {type(layer).__name__ for layer in reserved.layers} == {"GrowingLayer"}
        steps = [torch.randint(0, 1000, (3, 1)) for _ in range(4)] + [None] + [torch.randint(0, 1000, (2, 1))] * 3
        for ids in steps:
            if ids is None:  # two rows finish: both caches keep rows 0 and 2
                for cache in (plain, reserved):
                    cache.batch_select_indices(torch.tensor([0, 2]))
                continue
            logits = [model(input_ids=ids, use_cache=True, cache=cache).logits for cache in (plain, reserved)]
            assert logits[0].equal(logits[1])
            for a, b in zip(plain.layers, reserved.layers):
                assert a.keys.equal(b.keys) and a.values.equal(b.values)
    assert reserved.get_seq_length() == 6 + 7
    assert reserved.layers[0]._buffers[0].shape[-2] == 16  # 13 tokens outgrew the 8 reserved: the room doubled


def test_leaving_finished_answers_out_keeps_every_answer(policy) -> None:
    # the exam's batches leave answers that ended out every 16 tokens (rl_backend.exam_loop): on the frozen exam's
    # first batch one row ends in the first 10 tokens and the others run on, and every answer is the one-call answer
    model, tokenizer = policy
    frozen, domain = BEFORE["exam"], MathDomain()
    tasks = domain.tasks("heldout", domain.eval_specs, frozen["tasks"], frozen["heldout_seed"])[:frozen["batch_size"]]
    enc = _encode(tokenizer, [tokenizer.apply_chat_template(domain.exam_messages(t), tokenize=False,
                                                            add_generation_prompt=True) for t in tasks])
    kwargs = dict(max_new_tokens=frozen["max_new_tokens"], do_sample=False, temperature=None, top_p=None, top_k=None,
                  pad_token_id=tokenizer.pad_token_id)
    one_call = generate_shared_prefix(model, enc["input_ids"], enc["attention_mask"], **kwargs)
    dropping = generate_shared_prefix(model, enc["input_ids"], enc["attention_mask"], drop_finished_every=10, **kwargs)
    width, eos = enc["input_ids"].shape[1], tokenizer.eos_token_id
    ends = [row.index(eos) + 1 if eos in row else None for row in one_call[:, width:].tolist()]
    assert {e is not None and e <= 10 for e in ends} == {True, False}  # rows were left out, and others went on
    assert dropping.shape == one_call.shape
    assert dropping.equal(one_call)
    with pytest.raises(ValueError, match="greedy"):
        generate_shared_prefix(model, enc["input_ids"], enc["attention_mask"], drop_finished_every=4,
                               **{**kwargs, "do_sample": True})
