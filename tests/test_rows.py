"""The one trajectory-row constructor: what it accepts and refuses, and every producer's rows through it.

Producers run for real: synthetic rollouts with the math verifier, a verl dump written here, the
training recorder against the sandboxed seed harness (Docker), the held-out exam with SmolLM2 (CPU).
"""

from __future__ import annotations

import inspect
import json
import subprocess
import sys
from pathlib import Path

import pytest

from domains.math import MathDomain
from rl_backend.archive import Archive, ArchiveError, validate_rows
from rl_backend.synthetic import synthetic_math_rows
from rl_backend.verl_import import verl_rows
from trajectory.rows import trajectory_row
from trajectory.schema import JSON_COLUMNS, SCHEMA_VERSION, TRAJECTORY_SCHEMA

MATH = "domains.math:MathDomain"  # RoundSpec carries the domain by import reference

REPO = Path(__file__).resolve().parents[1]
SEED_HARNESS = REPO / "harness_repo" / "seeds" / "math"


def fields(**overrides) -> dict:
    """Keyword arguments of a good row; JSON columns given as objects, one as a JSON document."""
    return {
        "traj_id": "t-0", "run_id": "t", "round": 0, "step": 0, "group_id": "s0-g0", "sample_idx": 0,
        "domain": "math", "task_id": "chain_sum-1", "data_source": "reasoning_gym/chain_sum", "split": "train",
        "prompt": "What is 2 + 5?", "response": "Answer: 7 ✓",
        "messages": [{"role": "user", "content": "What is 2 + 5?"}, {"role": "assistant", "content": "Answer: 7 ✓"}],
        "ground_truth": {"answer": "7"}, "reward": 1.0, "reward_info": {"pred": "7"}, "verified": 1.0,
        "verifier_info": '{"reason": "exact", "pred": "7"}', "response_tokens": 4, "truncated": False,
        "finish_reason": "stop", "harness_commit": "abc", "policy_ref": "ckpt-0",
        "task": {"question": "What is 2 + 5?", "vars": {"id": "chain_sum-1", "config": {}}},
    } | overrides


def test_constructor_takes_the_schema_and_returns_a_checked_row(tmp_path: Path):
    params = inspect.signature(trajectory_row).parameters
    assert list(params) == [n for n in TRAJECTORY_SCHEMA.names if n != "schema_version"]
    assert all(p.kind is inspect.Parameter.KEYWORD_ONLY for p in params.values())
    required = [n for n, p in params.items() if p.default is inspect.Parameter.empty]
    assert required == [f.name for f in TRAJECTORY_SCHEMA if not f.nullable and f.name != "schema_version"]

    row = trajectory_row(**fields())
    assert list(row) == TRAJECTORY_SCHEMA.names and row["schema_version"] == SCHEMA_VERSION
    assert all(isinstance(row[name], str) for name in JSON_COLUMNS)  # objects serialised
    assert json.loads(row["messages"])[1]["content"] == "Answer: 7 ✓"
    assert json.loads(row["task"])["vars"]["config"] == {}
    assert row["verifier_info"] == '{"reason": "exact", "pred": "7"}'  # a JSON document is kept as given
    # a str is a JSON document, never wrapped: a bare string value must be dumped by the caller
    assert json.loads(trajectory_row(**fields(ground_truth=json.dumps("10")))["ground_truth"]) == "10"
    assert json.loads(trajectory_row(**fields(ground_truth="10"))["ground_truth"]) == 10
    bare = trajectory_row(**{k: v for k, v in fields().items() if k in required})
    assert bare["reward"] is None and bare["task"] is None and bare["schema_version"] == SCHEMA_VERSION

    validate_rows([row, bare | {"traj_id": "t-1"}], "test")
    archive = Archive(tmp_path)
    archive.append_round("t", 0, [row])
    back = archive.rows()[0]
    assert back["ground_truth"] == {"answer": "7"} and back["prompt"] == row["prompt"]
    assert back["messages"] == fields()["messages"] and back["task"] == fields()["task"]


BAD = [
    ("verified", 1.5, "outside [0, 1]"),
    ("split", "test", "expected one of train, val, heldout"),
    ("group_id", "", "is empty"),
    ("step", -1, "non-negative"),
    ("sample_idx", "0", "expected int"),
    ("truncated", 1, "expected bool"),
    ("reward", float("nan"), "use None"),
    ("prompt", None, "is None but the field is required"),
    ("ground_truth", "{'answer': 7}", "not valid JSON"),
    ("reward_info", {"x": object()}, "cannot be serialised"),
    ("task", ("question",), "expected a dict, a list or a JSON string"),
]


@pytest.mark.parametrize("name,value,problem", BAD, ids=[b[0] for b in BAD])
def test_constructor_refuses_a_bad_field_naming_it(name: str, value, problem: str):
    with pytest.raises(ArchiveError) as err:
        trajectory_row(**fields(**{name: value}))
    message = str(err.value)
    assert message.startswith("trajectory_row(traj_id='t-0'): 1 problem(s)"), message
    assert f"field '{name}': " in message and problem in message


def test_constructor_reports_every_bad_field_at_once():
    with pytest.raises(ArchiveError) as err:
        trajectory_row(**fields(verified=-1.0, domain="", response_tokens=2**40))
    message = str(err.value)
    assert "3 problem(s)" in message
    assert all(f"field '{n}'" in message for n in ("verified", "domain", "response_tokens"))
    with pytest.raises(TypeError, match="advantage"):
        trajectory_row(**fields(advantage=0.5))  # not a column: Python refuses the keyword
    with pytest.raises(TypeError, match="task_id"):
        trajectory_row(**{k: v for k, v in fields().items() if k != "task_id"})


def test_synthetic_rows_use_the_verifier_they_are_given():
    math = synthetic_math_rows("syn", 2, n_groups=6, group_size=3, seed=1, verify=MathDomain().verify)
    table = validate_rows(math, "synthetic")
    assert table.num_rows == 18 and set(table.column("round").to_pylist()) == {2}
    assert 0 < sum(r["verified"] for r in math) < 18  # the behaviour mix has right and wrong answers
    assert all(json.loads(r["task"])["question"] == r["prompt"] for r in math)

    calls = []

    def half(source: str, response: str, ground_truth: dict) -> tuple[float, dict]:
        calls.append(source)
        return 0.5, {"by": "test"}

    other = synthetic_math_rows("syn", 2, n_groups=6, group_size=3, seed=1, verify=half)
    validate_rows(other, "synthetic")
    assert len(calls) == 18 and {r["verified"] for r in other} == {0.5}
    assert {r["verifier_info"] for r in other} == {'{"by": "test"}'}
    assert [r["response"] for r in other] == [r["response"] for r in math]  # the verifier changes only the verdict



def test_rl_backend_imports_nothing_from_meta_agent():
    code = """
import importlib, pkgutil, sys
import rl_backend
for module in pkgutil.iter_modules(rl_backend.__path__):
    importlib.import_module(f"rl_backend.{module.name}")
from rl_backend.synthetic import synthetic_math_rows
rows = synthetic_math_rows("r", 0, 2, 2, verify=lambda source, response, gt: (1.0, {}))
leaked = sorted(m for m in sys.modules if m.split(".")[0] == "meta_agent")
print(len(rows), leaked)
"""
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO, timeout=300)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split("\n")[-2] == "4 []", done.stdout


def test_verl_rows_are_checked_rows(tmp_path: Path):
    dump = tmp_path / "rollouts"
    dump.mkdir()
    lines = [{"input": "Q?", "output": f"Answer: {k}", "gts": "1", "score": float(k), "step": 3, "uid": f"p_{k}_0",
              "acc": k == 1} for k in range(2)]
    (dump / "3.jsonl").write_text("\n".join(json.dumps(x) for x in lines) + "\n")
    rows = verl_rows(dump, "v", 1, domain="math", split="val", verifier=MathDomain().verify)
    table = validate_rows(rows, "verl")
    assert table.num_rows == 2 and [r["verified"] for r in rows] == [0.0, 1.0]
    assert json.loads(rows[0]["ground_truth"]) == "1" and json.loads(rows[1]["reward_info"]) == {"acc": True}
    with pytest.raises(ArchiveError) as err:
        verl_rows(dump, "v", 1, domain="math", split="validation")
    message = str(err.value)
    assert message.startswith(f"import of {dump}: 2 problem(s)") and "field 'split': is 'validation'" in message
    assert f"{dump / '3.jsonl'}:1 (traj_id 'v-r1-s3-" in message and f"{dump / '3.jsonl'}:2 (traj_id" in message


@pytest.mark.docker
def test_training_recorder_rows_are_checked_rows(docker_sandbox):
    from transformers import TrainerState

    from rl_backend.local_trainer import RolloutRecorder, RoundContext
    from sandboxes.harness_client import HarnessSession

    domain = MathDomain()
    tasks = domain.tasks("train", domain.eval_specs, 2, seed=5)
    ctx = RoundContext(run_id="rec", round=1, domain="math", harness_commit="c0ffee", policy_ref="ckpt-0")
    prompts = [[{"role": "user", "content": t.question}] for t in tasks for _ in range(2)]
    answers = [f"Answer: {t.ground_truth['answer']}" if k == 0 else "no idea" for t in tasks for k in range(2)]
    columns = {"task_id": [t.task_id for t in tasks for _ in range(2)],
               "data_source": [t.data_source for t in tasks for _ in range(2)],
               "ground_truth": [json.dumps(t.ground_truth) for t in tasks for _ in range(2)],
               "trainer_state": TrainerState(global_step=4)}
    with HarnessSession(docker_sandbox, SEED_HARNESS) as harness:
        recorder = RolloutRecorder(harness, domain, ctx, 2, [0], {t.task_id: f"<chat>{t.question}" for t in tasks},
                                   {t.task_id: json.dumps({"question": t.question, "vars": t.template_vars()})
                                    for t in tasks}, dynamic_sampling=False, mask_truncated=False)
        rewards = recorder(prompts, [[{"role": "assistant", "content": a}] for a in answers],
                           [[5, 6, 0], [5, 7], [5, 0], [5, 6, 7, 0]], **columns)
    rows = recorder.rows
    table = validate_rows(rows, "recorder")
    assert table.num_rows == 4 and [r["verified"] for r in rows] == [1.0, 0.0, 1.0, 0.0]
    assert rewards == [r["reward"] for r in rows] == [1.0, 0.0, 1.0, 0.0]  # the seed reward, in the sandbox
    assert [r["truncated"] for r in rows] == [False, True, False, False]  # no eos (id 0) at the end
    assert [r["group_id"] for r in rows] == ["s4-g0", "s4-g0", "s4-g1", "s4-g1"]
    assert json.loads(rows[0]["messages"])[-1] == {"role": "assistant", "content": answers[0]}


def test_heldout_exam_rows_are_checked_rows(tmp_path: Path):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from rl_backend.base import RoundSpec
    from rl_backend.local import heldout_eval
    from rl_backend.model import ensure_base_model

    path = ensure_base_model()
    tokenizer = AutoTokenizer.from_pretrained(path, padding_side="left")
    tokenizer.pad_token = tokenizer.pad_token or tokenizer.eos_token
    model = AutoModelForCausalLM.from_pretrained(path)
    spec = RoundSpec(run_id="exam", round=3, harness_dir=tmp_path, harness_commit="c0ffee", policy_in=None,
                     out_dir=tmp_path, domain=MATH, heldout_size=2, heldout_max_tokens=6)
    rows = heldout_eval(spec, model, tokenizer, "ckpt-3", step=2)
    table = validate_rows(rows, "heldout")
    assert table.num_rows == 2 and {r["split"] for r in rows} == {"heldout"} and {r["round"] for r in rows} == {3}
    assert all(r["verified"] in (0.0, 1.0) and r["task"] is None and r["response_tokens"] <= 6 for r in rows)
    assert json.loads(rows[0]["messages"])[-1]["role"] == "assistant"


def test_round_spec_crosses_a_process_as_plain_json(tmp_path):
    """A RoundSpec names its domain and paths; its JSON form, read back in a fresh interpreter, trains the
    same round."""
    from harness_repo.contract import TaskSpec
    from rl_backend.base import RoundSpec

    spec = RoundSpec(run_id="r", round=2, harness_dir=tmp_path / "h", harness_commit="abc", policy_in=None,
                     out_dir=tmp_path / "o", domain=MATH, heldout_specs=[TaskSpec(name="chain_sum", weight=2.0)])
    code = ("import json, sys; from rl_backend.base import RoundSpec; "
            "s = RoundSpec.from_json(json.load(sys.stdin)); d = s.load_domain(); "
            "print(json.dumps([d.name, str(s.out_dir), s.heldout_specs[0].weight, s.round]))")
    out = subprocess.run([sys.executable, "-c", code], input=json.dumps(spec.to_json()), capture_output=True,
                         text=True, check=True, cwd=Path(__file__).resolve().parent.parent).stdout
    assert json.loads(out) == ["math", str(tmp_path / "o"), 2.0, 2]


def test_round_spec_refuses_a_domain_reference_without_module_and_attribute():
    from rl_backend.base import load_domain

    with pytest.raises(ValueError, match="not 'module:attr'"):
        load_domain("math")
