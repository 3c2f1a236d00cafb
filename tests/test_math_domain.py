"""The math domain: disjoint splits, determinism, task mix, and the trusted verifier (real reasoning-gym,
math-verify)."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import jinja2
import pytest

from domains import Domain
from domains.math import MathDomain, allocate, extract_final_answer, question_hash, split_of
from harness_repo.contract import TaskSpec
from meta_agent.names import get_domain
from meta_agent.registry import UnknownName

TINY = {"min_terms": 2, "max_terms": 2, "min_digits": 1, "max_digits": 1}
SPECS = [TaskSpec(name="chain_sum", config=TINY), TaskSpec(name="products", config=TINY)]


@pytest.fixture(scope="module")
def domain() -> MathDomain:
    return MathDomain()


def test_get_domain_returns_math_and_names_known_domains_on_error() -> None:
    domain = get_domain("math")
    assert isinstance(domain, MathDomain) and isinstance(domain, Domain)
    assert domain.name == "math" and domain.eval_specs
    with pytest.raises(UnknownName, match=r"'chess'.*math"):
        get_domain("chess")


def test_splits_are_disjoint_whatever_the_seeds(domain: MathDomain) -> None:
    seen: dict[str, set[str]] = {"train": set(), "val": set(), "heldout": set()}
    wider = [TaskSpec(name="chain_sum", config={"min_terms": 2, "max_terms": 3, "min_digits": 1, "max_digits": 2}),
             *SPECS]
    for seed in range(8):
        for split in seen:
            tasks = domain.tasks(split, wider, n=12, seed=seed)
            assert len(tasks) == 12
            for t in tasks:
                assert t.split == split and split_of(t.question) == split
                assert t.task_id.endswith(question_hash(t.question)[:16])  # content-addressed id
                seen[split].add(question_hash(t.question))
    assert all(seen.values())
    assert not seen["train"] & seen["val"]
    assert not seen["train"] & seen["heldout"]
    assert not seen["val"] & seen["heldout"]
    # Roughly 80 / 10 / 10 by hash buckets, so train sees many more distinct questions than held-out.
    assert len(seen["train"]) > len(seen["heldout"])


def test_tasks_are_deterministic_per_seed_and_shaped_for_rewards(domain: MathDomain) -> None:
    first = domain.tasks("train", SPECS, n=10, seed=3)
    again = domain.tasks("train", SPECS, n=10, seed=3)
    other = domain.tasks("train", SPECS, n=10, seed=4)
    assert first == again
    assert [t.task_id for t in first] != [t.task_id for t in other]
    assert len({t.task_id for t in first}) == 10  # no repeats while the generator has enough questions
    for t in first:
        assert t.data_source in ("reasoning_gym/chain_sum", "reasoning_gym/products")
        assert set(t.ground_truth) == {"answer"} and isinstance(t.ground_truth["answer"], str)
        assert t.metadata["config"] == TINY and "expression" in t.metadata["reasoning_gym"]
        # The template view never carries the answer key or the generator's metadata.
        assert set(t.template_vars()) == {"name", "data_source", "config"}


def test_task_mix_follows_weights(domain: MathDomain) -> None:
    specs = [TaskSpec(name="chain_sum", weight=1.0, config=TINY), TaskSpec(name="products", weight=3.0, config=TINY)]
    counts = Counter(t.data_source for t in domain.tasks("train", specs, n=40, seed=0))
    assert counts == {"reasoning_gym/chain_sum": 10, "reasoning_gym/products": 30}
    lopsided = [TaskSpec(name="chain_sum", weight=1.0, config=TINY),
                TaskSpec(name="products", weight=1000.0, config=TINY)]
    assert [t.data_source for t in domain.tasks("train", lopsided, n=1, seed=0)] == ["reasoning_gym/products"]
    import random

    assert allocate([1, 1, 2], 8, random.Random(0)) == [2, 2, 4]
    assert sum(allocate([1, 1, 1], 7, random.Random(1))) == 7


def test_tiny_generators_cycle_rather_than_fail(domain: MathDomain) -> None:
    # products 2 x 1 digit has ~80 questions, ~8 of them held out: asking for 30 repeats the distinct ones.
    tasks = domain.tasks("heldout", [TaskSpec(name="products", config=TINY)], n=30, seed=0)
    assert len(tasks) == 30 and all(t.split == "heldout" for t in tasks)
    assert 1 < len({t.task_id for t in tasks}) < 30


def test_tasks_refuse_bad_requests_clearly(domain: MathDomain) -> None:
    with pytest.raises(ValueError, match=r"unknown task 'no_such_generator'.*Supported math tasks: chain_sum, prod"):
        domain.tasks("train", [TaskSpec(name="no_such_generator")], n=2, seed=0)
    # A real reasoning-gym generator the domain does not ship is refused the same way.
    with pytest.raises(ValueError, match="unknown task 'prime_factorization'"):
        domain.tasks("train", [TaskSpec(name="prime_factorization")], n=2, seed=0)
    with pytest.raises(ValueError, match="Unknown split 'test'"):
        domain.tasks("test", SPECS, n=2, seed=0)
    with pytest.raises(ValueError, match="at least one"):
        domain.tasks("train", [], n=2, seed=0)


def test_check_task_specs_refuses_before_generating(domain: MathDomain) -> None:
    domain.check_task_specs(SPECS)  # the seed mix is fine
    domain.check_task_specs([TaskSpec(name=name) for name in domain.task_names])  # defaults of every task
    with pytest.raises(ValueError) as err:
        domain.check_task_specs([TaskSpec(name="chess"), TaskSpec(name="chain_sum", config={"max_terms": 10**9}),
                                 TaskSpec(name="products", config={"no_such_knob": 1}),
                                 TaskSpec(name="gcd", config={"seed": 3}),
                                 TaskSpec(name="lcm", config={"min_value": 5, "max_value": 2})])
    message = str(err.value)
    assert "unknown task 'chess'" in message and "max_terms=1000000000 is out of bounds" in message
    assert "products: bad config" in message and "no_such_knob" in message
    assert "gcd: config may not set 'seed'" in message and "lcm: bad config" in message
    assert message.endswith(f"Supported math tasks: {', '.join(domain.task_names)}.")
    with pytest.raises(ValueError, match="at least one"):
        domain.check_task_specs([])


def test_domain_facts_for_the_gate_and_the_exam(domain: MathDomain) -> None:
    assert isinstance(domain.task_names, tuple) and {"chain_sum", "products", "basic_arithmetic", "gcd", "lcm",
                                                     "simple_equations"} <= set(domain.task_names)
    assert {s.name for s in domain.eval_specs} <= set(domain.task_names)
    assert domain.reward_range == (0.0, 1.0) and domain.exam_max_tokens == 96
    task = domain.tasks("heldout", domain.eval_specs, n=1, seed=0)[0]
    system, user = domain.exam_messages(task)
    # Word for word the seed harness prompts (as Jinja renders them), so round-0 numbers stay comparable.
    seed = Path(__file__).resolve().parents[1] / "harness_repo" / "seeds" / "math" / "prompts"
    env = jinja2.Environment(loader=jinja2.FileSystemLoader(seed), undefined=jinja2.StrictUndefined)
    assert system == {"role": "system", "content": (seed / "system.j2").read_text().strip()}
    assert user == {"role": "user", "content": env.get_template("user.j2").render(question=task.question, task={})}
    assert user["content"].startswith(task.question) and user["content"].endswith('"Answer: <number>".')


@pytest.mark.parametrize(
    ("response", "gold", "score", "pred"),
    [
        ("4 - 1 = 3\nAnswer: 3", "3", 1.0, "3"),
        ("4 - 1 = 2\nAnswer: 2", "3", 0.0, "2"),
        ("The sum is \\boxed{-4}.", "-4", 1.0, "-4"),
        ("So \\boxed{\\frac{1}{2}}", "0.5", 1.0, "\\frac{1}{2}"),
        ("Answer: **12**.", "12", 1.0, "12"),
        ("**Answer:** 12", "12", 1.0, "12"),  # bold label: the stray "**" is markdown, not the answer
        ("Answer: 7.0", "7", 1.0, "7.0"),
        ("Answer: 5\nwait, actually \\boxed{6}", "6", 1.0, "6"),  # the later one wins
        ("\\boxed{6} hmm no.\nAnswer: 5", "6", 0.0, "5"),
        ("answer: \\boxed{42}", "42", 1.0, "42"),
        # What reasoning-gym's scorer paid 0.5 for, and what math-verify accepted: all wrong now.
        ("Answer: 70", "7", 0.0, "70"),
        ("Answer: 17", "7", 0.0, "17"),
        ("Answer: -7", "7", 0.0, "-7"),
        ("Answer: 6 or 7", "7", 0.0, "6 or 7"),
        ("Answer: 7x", "7", 0.0, "7x"),
    ],
)
def test_verifier_scores_final_answers(domain: MathDomain, response: str, gold: str, score: float, pred: str) -> None:
    got, info = domain.verify("reasoning_gym/chain_sum", response, {"answer": gold})
    assert got == score
    assert info["pred"] == pred and (info["reason"] == "equal") == (score == 1.0)
    assert extract_final_answer(response) == pred


@pytest.mark.parametrize(
    ("response", "ground_truth", "reason"),
    [
        ("I think it is three", {"answer": "3"}, "no final answer"),
        ("", {"answer": "3"}, "no final answer"),
        ("Answer:   ", {"answer": "3"}, "no final answer"),
        ("\\boxed{3", {"answer": "3"}, "no final answer"),  # unclosed brace
        (None, {"answer": "3"}, "no final answer"),
        ("Answer: 3", {}, "ground truth has no answer"),
        ("Answer: 3", {"answer": None}, "ground truth has no answer"),
        ("Answer: 3", "{not json", "ground truth has no answer"),
    ],
)
def test_verifier_never_raises_on_garbage(domain: MathDomain, response, ground_truth: dict, reason: str) -> None:
    score, info = domain.verify("reasoning_gym/chain_sum", response, ground_truth)
    assert score == 0.0 and info == {"reason": reason, "pred": None, "method": None}


def test_verifier_is_strict_and_the_same_for_every_source(domain: MathDomain) -> None:
    # No reasoning-gym scorer any more: the same rules for a shipped task, another generator and gsm8k.
    for source in ("reasoning_gym/products", "reasoning_gym/prime_factorization", "gsm8k"):
        assert domain.verify(source, "Answer: 1/2", {"answer": "0.5"}) == (
            1.0, {"reason": "equal", "pred": "1/2", "method": "numeric"})
        assert domain.verify(source, "Answer: 0.25", {"answer": "0.5"}) == (
            0.0, {"reason": "different value", "pred": "0.25", "method": "numeric"})
    # Non-numeric golds: exact text first, then math-verify with no extra symbols or words.
    assert domain.verify("x", "Answer: 2 × 3", {"answer": "2 × 3"})[1]["method"] == "exact"
    assert domain.verify("x", "Answer: 1 + x", {"answer": "x + 1"}) == (
        1.0, {"reason": "equal", "pred": "1 + x", "method": "symbolic"})
    assert domain.verify("x", "Answer: x + y", {"answer": "x + 1"})[1]["reason"] == "extra symbols"
    assert domain.verify("x", "Answer: x + 1 apples", {"answer": "x + 1"})[1]["reason"] == "extra text"
    # A ground truth handed over as JSON text (verl) and a bare value are read too.
    assert domain.verify("x", "Answer: 7", '{"answer": "7"}')[0] == 1.0
    assert domain.verify("x", "Answer: 7", 7)[0] == 1.0
    long_garbage = "Answer: " + "9^" * 500 + "9"
    assert domain.verify("gsm8k", long_garbage, {"answer": "9"}) == (
        0.0, {"reason": "final answer too long", "pred": ("9^" * 100)[:200], "method": None})


def test_default_exam_has_128_distinct_questions(domain: MathDomain) -> None:
    """The exam's interval is computed over distinct tasks: 128 drawn must be 128 different questions."""
    tasks = domain.tasks("heldout", domain.eval_specs, 128, 0)
    assert len({t.task_id for t in tasks}) == len({t.question for t in tasks}) == 128
