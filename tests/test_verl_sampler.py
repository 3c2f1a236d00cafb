"""The keep-mask sampler on verl 0.9.1's real replay buffer over a real TransferQueue (local Ray, CPU), judging
whole groups through the harness runtime in the Docker sandbox.

Trajectories go in the way verl's agent-loop worker puts them (``agent_loop_tq._agent_loop_postprocess``:
``tq.kv_batch_put`` of ``list_of_dict_to_tensordict`` records with the dataset row's fields, keys
``{uid}_{session}_{output}``, responses as token ids of the SmolLM2 tokenizer), with the reward extra info the
reward entry returned alone for each trajectory; prompts the way the trainer registers them; and the buffer's
``sample`` picks the training batch.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

pytest.importorskip("verl", reason="verl 0.9.1 is installed by `pip install .[verl]` (scripts/setup.sh: .venv-verl)")

import torch  # noqa: E402
from omegaconf import OmegaConf  # noqa: E402

# a local Ray cluster and TransferQueue take ~30 s to start on 2 cores; the harness runs in Docker
pytestmark = [pytest.mark.slow, pytest.mark.docker]

REPO = Path(__file__).resolve().parents[1]
SEED = REPO / "harness_repo" / "seeds" / "math"
GOLD = json.dumps({"answer": "7"})
RIGHT, WRONG = "Answer: 7", "Answer: 8"  # the seed reward: 1.0 and 0.0

DROP_ALL_CORRECT = """
def keep_group(group):
    return not all(member["reward"] == 1.0 for member in group)
"""
HOSTILE_GROUP_FILTER = """
class Verdict:
    def __\x62ool__(self):
        raise RuntimeError("no verdict")

def keep_group(group):
    texts = " ".join(member["response"] for member in group)
    if "boom" in texts:
        raise ValueError("boom")
    if "maybe" in texts:
        return Verdict()
    return True
""".replace("\\x62", "b")


@pytest.fixture(scope="module")
def tq():
    import ray
    import transfer_queue

    # logical CPUs: TransferQueue's controller and two storage units ask for one each
    ray.init(num_cpus=4, include_dashboard=False, log_to_driver=False)
    transfer_queue.init()
    yield transfer_queue
    transfer_queue.close()
    ray.shutdown()


@pytest.fixture(scope="module")
def tokenizer():
    from transformers import AutoTokenizer

    from rl_backend.model import resolve_model

    return AutoTokenizer.from_pretrained(resolve_model(None))


@pytest.fixture(autouse=True)
def _empty(tq):
    from rl_backend.verl import reward_entry

    yield
    reward_entry.close_sessions()
    for partition, items in (tq.kv_list() or {}).items():
        if items:
            tq.kv_clear(partition_id=partition, keys=list(items))


def put_groups(tq, tokenizer, groups: dict[str, list[tuple[str, float, float | None]]]) -> None:
    """``{prompt uid: [(response, reward alone, keep alone), ...]}``: finished prompts, one trajectory per session;
    each uid is its own task; the reward extra info is what the reward entry returned for the trajectory alone."""
    from verl.utils.tensordict_utils import list_of_dict_to_tensordict

    tq.kv_batch_put(keys=list(groups), partition_id="train",
                    tags=[{"is_prompt": True, "status": "finished", "global_steps": 1} for _ in groups])
    keys, fields = [], []
    for uid, sessions in groups.items():
        for session, (response, reward, keep) in enumerate(sessions):
            info = {"score": reward, "verified": reward, "harness_error": 0.0}
            info |= {} if keep is None else {"keep": keep}
            ids = tokenizer(response, add_special_tokens=False)["input_ids"]
            prompt_ids = tokenizer(prompt_of(uid), add_special_tokens=False)["input_ids"]
            keys.append(f"{uid}_{session}_0")
            fields.append({"prompts": torch.tensor(prompt_ids), "responses": torch.tensor(ids),
                           "rm_scores": torch.tensor([0.0] * (len(ids) - 1) + [reward]),
                           "data_source": "reasoning_gym/chain_sum",
                           "reward_model": {"ground_truth": GOLD, "style": "rule"},
                           "extra_info": {"task_id": f"task-{uid}", "split": "train", "prompt": "3 + 4?",
                                          "run_id": "r1", "round": 0},
                           "extra_fields": {"reward_extra_info": info, "min_global_steps": 1, "max_global_steps": 1}})
    tq.kv_batch_put(keys=keys, fields=list_of_dict_to_tensordict(fields), partition_id="train",
                    tags=[{"status": "success", "global_steps": 1} for _ in keys])


def prompt_of(uid: str) -> str:
    """The chat text a uid's prompt tokens decode to (each uid its own task)."""
    return f"user\nWhat is 3 + 4? ({uid})\nassistant\n"


def harness(tmp_path: Path, filters: str | None = None, reward: str | None = None) -> Path:
    folder = tmp_path / "harness"
    shutil.copytree(SEED, folder)
    if filters:
        (folder / "filters.py").write_text(filters)
    if reward:
        (folder / "reward.py").write_text(reward)
    return folder


def buffer(tmp_path: Path, harness_dir: Path | None = None, refills: list[int] | None = None, **sampler_kwargs):
    from rl_backend.model import resolve_model
    from rl_backend.verl.sampler import KeepMaskReplayBuffer

    kwargs = {"harness_dir": str(harness_dir or harness(tmp_path)), "domain_ref": "domains.math:MathDomain",
              "tokenizer_path": str(resolve_model(None)), "max_response_length": 64,
              "group_records_dir": str(tmp_path / "group_records")} | sampler_kwargs
    return KeepMaskReplayBuffer(trainer_mode="sync", trainer_config=OmegaConf.create({}),
                                max_off_policy_threshold=None, max_off_policy_strategy="drop",
                                sampler_kwargs=OmegaConf.create(kwargs),
                                refill_fn=lambda n: (refills if refills is not None else []).append(n) or n)


def group_records(tmp_path: Path) -> list[dict]:
    return [json.loads(line) for path in sorted((tmp_path / "group_records").glob("*.jsonl"))
            for line in path.read_text().splitlines()]


def test_exactly_the_masked_trajectories_are_dropped(tq, tokenizer, tmp_path):
    put_groups(tq, tokenizer, {"aaa": [(RIGHT, 1.0, 1.0), (WRONG, 0.0, 0.0), (RIGHT, 1.0, 1.0)],
                               "bbb": [(WRONG, 0.0, 0.0), (RIGHT, 1.0, 1.0), (WRONG, 0.0, 1.0)]})
    batch, _ = buffer(tmp_path).sample(global_steps=1, partition_id="train", batch_size=2)
    assert sorted(batch.keys) == ["aaa_0_0", "aaa_2_0", "bbb_1_0", "bbb_2_0"]
    # the dropped ones are gone from TransferQueue too: nothing downstream can read them back
    assert sorted(tq.kv_list()["train"]) == ["aaa_0_0", "aaa_2_0", "bbb_1_0", "bbb_2_0"]


def test_a_trajectory_without_keep_is_refused(tq, tokenizer, tmp_path):
    # a reward function that is not our entry (or a tampered one) returns no keep: never trained blindly
    put_groups(tq, tokenizer, {"ccc": [(RIGHT, 1.0, 1.0), (WRONG, 0.0, None)]})
    with pytest.raises(RuntimeError, match="has no 'keep' in its reward extra info"):
        buffer(tmp_path).sample(global_steps=1, partition_id="train", batch_size=1)


def test_a_batch_with_nothing_kept_fails_the_step(tq, tokenizer, tmp_path):
    put_groups(tq, tokenizer, {"ddd": [(RIGHT, 1.0, 0.0), (WRONG, 0.0, 0.0)]})
    with pytest.raises(RuntimeError, match="kept none of the 2 trajectories"):
        buffer(tmp_path).sample(global_steps=1, partition_id="train", batch_size=1)


def test_group_filter_reaches_verl_through_sampler_kwargs(tq, tokenizer, tmp_path):
    # eee has one reward for all sessions: verl's own group filter evicts it; two groups remain, so no refill
    put_groups(tq, tokenizer, {"eee": [(RIGHT, 1.0, 1.0), (RIGHT, 1.0, 1.0)],
                               "fff": [(RIGHT, 1.0, 1.0), (WRONG, 0.0, 1.0)],
                               "ggg": [(WRONG, 0.0, 1.0), (RIGHT, 1.0, 0.0), (WRONG, 0.0, 1.0)]})
    refills: list[int] = []
    batch, metrics = buffer(tmp_path, refills=refills, filter_groups_metric="reward", train_batch_size=2).sample(
        global_steps=1, partition_id="train", batch_size=2)
    assert sorted(batch.keys) == ["fff_0_0", "fff_1_0", "ggg_0_0", "ggg_2_0"]
    assert refills == [] and metrics["training/filter_groups/evicted_samples"] == 1


def test_keep_group_judges_the_whole_group(tq, tokenizer, tmp_path):
    # the rule drops a group whose members are all right.  Alone, every right answer is such a group (of one):
    # hhh's right answer trains only because it is judged with its wrong sibling, as the gate judged it.
    put_groups(tq, tokenizer, {"hhh": [(RIGHT, 1.0, 1.0), (WRONG, 0.0, 1.0)],
                               "iii": [(RIGHT, 1.0, 1.0), (RIGHT, 1.0, 1.0), (RIGHT, 1.0, 1.0)],
                               "jjj": [(WRONG, 0.0, 1.0), (WRONG, 0.0, 1.0)]})
    batch, _ = buffer(tmp_path, harness(tmp_path, DROP_ALL_CORRECT)).sample(
        global_steps=1, partition_id="train", batch_size=3)
    assert sorted(batch.keys) == ["hhh_0_0", "hhh_1_0", "jjj_0_0", "jjj_1_0"]
    records = group_records(tmp_path)
    assert sorted((r["uid"], r["session"], r["keep"]) for r in records) == [
        ("hhh", 0, True), ("hhh", 1, True), ("iii", 0, False), ("iii", 1, False), ("iii", 2, False),
        ("jjj", 0, True), ("jjj", 1, True)]
    assert all(r["error"] is None for r in records)  # a rule's drop, not a fault


def test_the_step_logs_kept_over_judged_so_the_digest_sees_the_drops(tq, tokenizer, tmp_path):
    from meta_agent.digest import kept_share

    put_groups(tq, tokenizer, {"rrr": [(RIGHT, 1.0, 1.0), (WRONG, 0.0, 1.0)],
                               "sss": [(RIGHT, 1.0, 1.0), (RIGHT, 1.0, 1.0), (RIGHT, 1.0, 1.0)]})
    batch, metrics = buffer(tmp_path, harness(tmp_path, DROP_ALL_CORRECT)).sample(
        global_steps=1, partition_id="train", batch_size=2)
    # 5 judged, sss's 3 dropped; verl's dump holds the 2 that trained (the records the other 3)
    assert (metrics["harness/kept_trajectories"], metrics["harness/judged_trajectories"]) == (2, 5)
    assert kept_share([metrics], n_trajectories=len(batch.keys)) == 2 / 5


def dump_batch(tq, tokenizer, batch, folder: Path, step: int) -> None:
    """The batch's rollout dump, decoded as verl's ``_log_rollout_data`` decodes it and written by verl's own
    ``_write_generations``: only what trained, as in a real run."""
    from verl.trainer.ppo.v1.trainer_base import PPOTrainer

    data = tq.kv_batch_get(keys=list(batch.keys), partition_id="train",
                           select_fields=["prompts", "responses", "rm_scores", "reward_model"])
    prompts, responses, scores = (data[k].unbind() for k in ("prompts", "responses", "rm_scores"))
    order = sorted(range(len(batch.keys)), key=lambda i: batch.keys[i])
    PPOTrainer._write_generations(
        inputs=[tokenizer.decode(prompts[i].tolist(), skip_special_tokens=True) for i in order],
        outputs=[tokenizer.decode(responses[i].tolist(), skip_special_tokens=True) for i in order],
        gts=[getattr(data["reward_model"][i], "data", data["reward_model"][i])["ground_truth"] for i in order],
        scores=[float(scores[i].sum()) for i in order],
        reward_extra_infos_dict={"uid": [batch.keys[i] for i in order]}, dump_path=str(folder), global_steps=step)


def test_the_archive_holds_the_dropped_trajectories_beside_the_dump(tq, tokenizer, tmp_path):
    from domains.math import MathDomain
    from meta_agent.digest import kept_share
    from rl_backend.archive import Archive
    from rl_backend.verl.dropped import iter_round_tables

    # uuu trains whole; vvv is all right, so keep_group drops it (3); www_0's reward entry said keep 0 (1), which
    # leaves www_1 alone in its group: no baseline, so it trains nothing either (rl_backend.grpo_rule)
    put_groups(tq, tokenizer, {"uuu": [(RIGHT, 1.0, 1.0), (WRONG, 0.0, 1.0)],
                               "vvv": [(RIGHT, 1.0, 1.0), (RIGHT, 1.0, 1.0), (RIGHT, 1.0, 1.0)],
                               "www": [(RIGHT, 1.0, 0.0), (WRONG, 0.0, 1.0)]})
    batch, metrics = buffer(tmp_path, harness(tmp_path, DROP_ALL_CORRECT)).sample(
        global_steps=1, partition_id="train", batch_size=3)
    assert sorted(batch.keys) == ["uuu_0_0", "uuu_1_0"]
    dump_batch(tq, tokenizer, batch, tmp_path / "rollouts", step=1)
    verify = MathDomain().verify
    archive = Archive(tmp_path / "archive")
    with archive.round_writer("r1", 0) as writer:
        for table, labels in iter_round_tables(tmp_path / "rollouts", tmp_path / "group_records", "r1", 0,
                                               domain="math", split="train", up_to_step=1,
                                               verifier=lambda s, r, g: verify(s, r, json.loads(g))):
            writer.write(table, labels)
    rows = archive.rows(run_id="r1", round=0, split="train")
    kept = {(r["group_id"], r["sample_idx"]) for r in rows if r["reward_info"] is None}  # a dump row, no record
    dropped = {(r["group_id"], r["sample_idx"]): r for r in rows if r["reward_info"] is not None}
    assert len(rows) == 7 and kept == {("s1-uuu", 0), ("s1-uuu", 1)}
    assert sorted(dropped) == [("s1-vvv", 0), ("s1-vvv", 1), ("s1-vvv", 2), ("s1-www", 0), ("s1-www", 1)]
    assert "only kept member of its group" in dropped[("s1-www", 1)]["reward_info"]["dropped"]
    assert all(r["reward_info"]["keep"] is False for r in dropped.values())
    assert "group judgement" in dropped[("s1-vvv", 1)]["reward_info"]["dropped"]
    assert "reward entry" in dropped[("s1-www", 0)]["reward_info"]["dropped"]
    # a dropped row is a full row: the text verl's dump would hold, its task as the dump names it, verified here
    www = {r["sample_idx"]: r for r in rows if r["group_id"] == "s1-www"}
    assert www[0]["prompt"] == www[1]["prompt"] == prompt_of("www") and www[0]["task_id"] == www[1]["task_id"]
    assert (www[0]["response"], www[0]["verified"], www[0]["reward"]) == (RIGHT, 1.0, 1.0)
    assert www[0]["response_tokens"] == len(tokenizer(RIGHT, add_special_tokens=False)["input_ids"])
    # the digest's kept share from the step's counts is the archive's kept rows over all its rows
    assert kept_share([metrics], n_trajectories=len(rows)) == len(kept) / len(rows) == 2 / 7


def test_a_group_filter_that_raises_or_gives_no_verdict_drops_its_group(tq, tokenizer, tmp_path):
    put_groups(tq, tokenizer, {"kkk": [(RIGHT, 1.0, 1.0), ("boom\nAnswer: 8", 0.0, 1.0)],
                               "lll": [("maybe\nAnswer: 7", 1.0, 1.0), (WRONG, 0.0, 1.0)],
                               "mmm": [(RIGHT, 1.0, 1.0), (WRONG, 0.0, 1.0)]})
    batch, _ = buffer(tmp_path, harness(tmp_path, HOSTILE_GROUP_FILTER)).sample(
        global_steps=1, partition_id="train", batch_size=3)
    assert sorted(batch.keys) == ["mmm_0_0", "mmm_1_0"]
    errors = {(r["uid"], r["session"]): r["error"] for r in group_records(tmp_path)}
    assert "keep_group: ValueError: boom" in errors[("kkk", 0)] and "keep_group" in errors[("kkk", 1)]
    assert "RuntimeError: no verdict" in errors[("lll", 0)]


def test_a_reward_that_differs_from_the_one_scored_alone_is_dropped(tq, tokenizer, tmp_path):
    # nnn_1 was recorded 1.0 alone, but the harness gives a wrong answer 0.0: the gate's judgement does not hold
    put_groups(tq, tokenizer, {"nnn": [(RIGHT, 1.0, 1.0), (WRONG, 1.0, 1.0), (WRONG, 0.0, 1.0)]})
    batch, _ = buffer(tmp_path).sample(global_steps=1, partition_id="train", batch_size=1)
    assert sorted(batch.keys) == ["nnn_0_0", "nnn_2_0"]
    error = {r["session"]: r["error"] for r in group_records(tmp_path)}[1]
    assert error == "the harness scored this trajectory 1.0 alone and 0.0 in its group"


def test_mask_truncated_drops_responses_that_reached_the_length_cap(tq, tokenizer, tmp_path):
    long = "Let me add 3 and 4 carefully.\nAnswer: 7"
    cap = len(tokenizer(long, add_special_tokens=False)["input_ids"])  # long reaches the cap exactly
    put_groups(tq, tokenizer, {"ooo": [(long, 1.0, 1.0), (RIGHT, 1.0, 1.0), (WRONG, 0.0, 1.0)]})
    batch, _ = buffer(tmp_path, max_response_length=cap, mask_truncated=True).sample(
        global_steps=1, partition_id="train", batch_size=1)
    assert sorted(batch.keys) == ["ooo_1_0", "ooo_2_0"]


def test_without_mask_truncated_a_capped_response_trains(tq, tokenizer, tmp_path):
    long = "Let me add 3 and 4 carefully.\nAnswer: 7"
    cap = len(tokenizer(long, add_special_tokens=False)["input_ids"])
    put_groups(tq, tokenizer, {"ppp": [(long, 1.0, 1.0), (WRONG, 0.0, 1.0)]})
    batch, _ = buffer(tmp_path, max_response_length=cap, mask_truncated=False).sample(
        global_steps=1, partition_id="train", batch_size=1)
    assert sorted(batch.keys) == ["ppp_0_0", "ppp_1_0"]


def test_a_harness_that_cannot_start_fails_the_step(tq, tokenizer, tmp_path):
    put_groups(tq, tokenizer, {"qqq": [(RIGHT, 1.0, 1.0), (WRONG, 0.0, 1.0)]})
    broken = harness(tmp_path, reward="import not_a_module\n")
    with pytest.raises(RuntimeError, match="(?s)kept none of the 2 trajectories.*not_a_module"):
        buffer(tmp_path, broken).sample(global_steps=1, partition_id="train", batch_size=1)


def test_a_sampler_without_the_harness_settings_is_refused(tmp_path):
    from rl_backend.verl.sampler import KeepMaskReplayBuffer

    with pytest.raises(RuntimeError, match="sampler_kwargs lacks harness_dir, domain_ref"):
        KeepMaskReplayBuffer(trainer_mode="sync", trainer_config=OmegaConf.create({}), max_off_policy_threshold=None,
                             max_off_policy_strategy="drop", sampler_kwargs=OmegaConf.create({}), refill_fn=None)


# -- one verdict per trajectory: the reward entry's, carried by verl, never graded again -------------------------

SWE_TASK = "sqlparse-0.5.5-begin-transaction"
SWE_REF, CODE_REF = "domains.swe:SweDomain", "domains.code:CodeDomain"


REWARD_WORKER = """
import asyncio, json, sys
import numpy as np, torch
from transformers import AutoTokenizer
from verl import DataProto
from verl.trainer.ppo.reward import load_reward_manager
from harness_repo.contract import GRPOKnobs
from rl_backend.model import resolve_model
from rl_backend.verl.config import LaunchOptions, RoundPlan, build_overrides
from rl_backend.verl.validate import compose

args = json.loads(sys.argv[1])
tokenizer = AutoTokenizer.from_pretrained(resolve_model(None))
ovr = build_overrides(GRPOKnobs(), LaunchOptions(), RoundPlan.for_round(args["round_dir"], 1), model_path="/models/x",
                      harness_dir=args["harness_dir"], domain_ref=args["domain_ref"], run_id="r1", round=0)
asyncio.set_event_loop(asyncio.new_event_loop())
manager = load_reward_manager(compose(ovr), tokenizer)
out = []
for item in args["items"]:
    ids = tokenizer(item["response"], add_special_tokens=False)["input_ids"]
    data = DataProto.from_dict(
        tensors={"responses": torch.tensor([ids]), "attention_mask": torch.ones(1, 3 + len(ids), dtype=torch.long)},
        non_tensors={"data_source": np.array([item["source"]], dtype=object),
                     "reward_model": np.array([{"ground_truth": item["gts"], "style": "rule"}], dtype=object),
                     "extra_info": np.array([item["extra_info"]], dtype=object),
                     "tool_extra_fields": np.array([item["agent_fields"]], dtype=object)})
    out.append(manager.loop.run_until_complete(manager.run_single(data))["reward_extra_info"])
print("extra infos: " + json.dumps(out))
"""


def entry_extra_info(tmp_path: Path, harness_dir: Path, domain_ref: str, items: list[dict]) -> list[dict]:
    """The reward extra info verl keeps for each agent-loop output (``{source, gts, response, extra_info,
    agent_fields}``): ``NaiveRewardManager.run_single`` on the ``DataProto`` the agent loop builds
    (``AgentLoopWorker._compute_score``: the loop's ``extra_fields`` travel as ``tool_extra_fields``, which the
    manager merges into ``extra_info``), with the launcher's reward settings -- in a process of its own, as a reward
    worker is a Ray actor apart from the trainer (nothing it graded is in the sampler's process)."""
    import subprocess
    import sys

    args = {"round_dir": str(tmp_path / "round"), "harness_dir": str(harness_dir), "domain_ref": domain_ref,
            "items": items}
    done = subprocess.run([sys.executable, "-c", REWARD_WORKER, json.dumps(args)], cwd=REPO, capture_output=True,
                          text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-4000:]
    line = next(line for line in done.stdout.splitlines() if line.startswith("extra infos: "))
    return json.loads(line[len("extra infos: "):])


def put_rows(tq, tokenizer, rows: dict[str, list[dict]]) -> None:
    """``{uid: [row, ...]}`` the way ``agent_loop_tq._agent_loop_postprocess`` puts agent-loop outputs: the dataset
    row's fields (``extra_info`` as the dataset gave it) and the output's ``extra_fields`` (the loop's own fields and
    the reward extra info); a row is ``{response, source, gts, extra_info, fields}``."""
    from verl.utils.tensordict_utils import list_of_dict_to_tensordict

    tq.kv_batch_put(keys=list(rows), partition_id="train",
                    tags=[{"is_prompt": True, "status": "finished", "global_steps": 1} for _ in rows])
    keys, fields = [], []
    for uid, sessions in rows.items():
        for session, row in enumerate(sessions):
            ids = tokenizer(row["response"], add_special_tokens=False)["input_ids"]
            score = float(row["fields"]["reward_extra_info"]["score"])
            keys.append(f"{uid}_{session}_0")
            fields.append({"prompts": torch.tensor(tokenizer(prompt_of(uid), add_special_tokens=False)["input_ids"]),
                           "responses": torch.tensor(ids), "rm_scores": torch.tensor([0.0] * (len(ids) - 1) + [score]),
                           "data_source": row["source"], "reward_model": {"ground_truth": row["gts"], "style": "rule"},
                           "extra_info": row["extra_info"],
                           "extra_fields": row["fields"] | {"min_global_steps": 1, "max_global_steps": 1}})
    tq.kv_batch_put(keys=keys, fields=list_of_dict_to_tensordict(fields), partition_id="train",
                    tags=[{"status": "success", "global_steps": 1} for _ in keys])


def swe_episode(resolved: bool) -> tuple[str, dict]:
    """A multi-turn transcript as verl decodes an agent-loop response, and the agent loop's ``extra_fields`` for it
    (``SweAgentLoop.run``: the trusted grade of the episode, the verifier info as JSON text)."""
    from swe_env.feedback import execution_feedback

    patch = "--- a/sqlparse/keywords.py\n+++ b/sqlparse/keywords.py\n@@ -1 +1 @@\n-a\n+b\n"
    tests = {"tests/test_a.py::test_begin": "passed" if resolved else "failed", "tests/test_a.py::test_other": "passed"}
    info = {"status": "resolved" if resolved else "tests_failed", "resolved": resolved, "tests": tests,
            "patch": patch, "parse_status": "ok"}
    info["execution"] = execution_feedback(info, exit_status="submitted", actions=["sed -i s/a/b/ x", "submit"],
                                           steps=2)
    transcript = ("I will edit the keyword table.\n```bash\nsed -i s/a/b/ sqlparse/keywords.py\n```\n"
                  "user\nexit code 0\n"
                  f"\nassistant\n{'Done' if resolved else 'Maybe done'}.\n```bash\nsubmit\n```")
    return transcript, {"swe_verified": 1.0 if resolved else 0.0, "swe_exit_status": "submitted", "swe_patch": patch,
                        "swe_verifier_info": json.dumps(info)}


def test_swe_agent_loop_groups_keep_their_resolved_members(tq, tokenizer, tmp_path):
    """Issue 47 (1): the sampler graded each agent-loop transcript again as a patch-mode answer (malformed, 0.0)
    while the reward entry had paid the episode's trusted grade (resolved, 1.0): every resolved episode was
    dropped as "reward changed", and the archive graded it a third time."""
    from rl_backend.verl.dropped import iter_round_tables
    from rl_backend.verl.reward_entry import load_records, record_key

    folder = tmp_path / "harness"
    shutil.copytree(REPO / "harness_repo" / "seeds" / "swe", folder)
    gts = json.dumps({"task_id": SWE_TASK, "gold_patch": ""})
    extra_info = {"task_id": SWE_TASK, "split": "train", "prompt": "Fix the bug.", "run_id": "r1", "round": 0}
    items = [{"response": response, "source": f"swe/{SWE_TASK}", "gts": gts, "extra_info": extra_info,
              "agent_fields": agent_fields} for response, agent_fields in (swe_episode(True), swe_episode(False))]
    infos = entry_extra_info(tmp_path, folder, SWE_REF, items)
    rows = [item | {"fields": item["agent_fields"] | {"reward_extra_info": info}} for item, info in zip(items, infos)]
    assert [r["fields"]["reward_extra_info"]["score"] for r in rows] == [1.0, 0.0]  # the entry paid the grade
    put_rows(tq, tokenizer, {"sw1": rows})
    batch, metrics = buffer(tmp_path, folder, domain_ref=SWE_REF, max_response_length=4096).sample(
        global_steps=1, partition_id="train", batch_size=1)
    assert sorted(batch.keys) == ["sw1_0_0", "sw1_1_0"]  # the resolved episode trains beside the failed one
    assert [r["error"] for r in group_records(tmp_path)] == [None, None]
    assert metrics["harness/kept_trajectories"] == 2
    # the archive takes the entry's recorded verdict for each row: the resolved episode is verified 1.0
    records = load_records(tmp_path / "round" / "reward_records")
    assert sorted(r["verified"] for r in records.values()) == [0.0, 1.0]
    dump_batch(tq, tokenizer, batch, tmp_path / "rollouts", step=1)
    archived = [row for table, _ in iter_round_tables(
        tmp_path / "rollouts", tmp_path / "group_records", "r1", 0, domain="swe", split="train", up_to_step=1,
        records=lambda output, g: records.get(record_key(output, g))) for row in table.to_pylist()]
    by_response = {row["response"]: row for row in archived}
    assert len(archived) == 2 and by_response[rows[0]["response"]]["verified"] == 1.0
    assert json.loads(by_response[rows[0]["response"]]["verifier_info"])["status"] == "resolved"
    assert by_response[rows[1]["response"]]["verified"] == 0.0


LATE_PROGRAM = """```python
import time
def {entry}(*args, **kwargs):
    if time.time() > {deadline}:
        raise RuntimeError("graded after the deadline")
    return None
```"""
PAY_FAILED = """
def compute_score(data_source, solution_str, ground_truth, extra_info=None, **kwargs):
    return 1.0 if extra_info["execution"]["status"] == "failed" else 0.0
"""


def test_a_code_program_is_graded_once(tq, tokenizer, tmp_path):
    """Issue 47: the sampler ran each code program again, one container per program on the trainer's critical path;
    a program that grades differently the second time (one near its time limit) was silently dropped.  Here the
    program's behaviour changes at a deadline that passes between the reward entry's grading and the sampler."""
    import time

    from domains.code_tasks import tasks_by_id

    folder = tmp_path / "harness"
    shutil.copytree(REPO / "harness_repo" / "seeds" / "code", folder)
    (folder / "reward.py").write_text(PAY_FAILED)
    task_id = sorted(t for t, v in tasks_by_id().items() if v["split"] == "train")[0]
    entry = tasks_by_id()[task_id]["entry"]
    deadline = time.time() + 90  # the reward worker's process starts verl and grades within it
    gts = json.dumps({"task_id": task_id})
    extra_info = {"task_id": task_id, "split": "train", "prompt": "Write it.", "run_id": "r1", "round": 0}
    items = [{"response": response, "source": "code/codeio", "gts": gts, "extra_info": extra_info, "agent_fields": {}}
             for response in (LATE_PROGRAM.format(entry=entry, deadline=deadline), "I cannot write this one.")]
    infos = entry_extra_info(tmp_path, folder, CODE_REF, items)
    rows = [item | {"fields": {"reward_extra_info": info}} for item, info in zip(items, infos)]
    assert time.time() < deadline, "the reward entry graded after the deadline: raise it"
    assert [r["fields"]["reward_extra_info"]["score"] for r in rows] == [1.0, 0.0]
    put_rows(tq, tokenizer, {"cd1": rows})
    time.sleep(max(0.0, deadline - time.time()) + 1)  # from now on a second grading gives "error", paid 0.0
    batch, _ = buffer(tmp_path, folder, domain_ref=CODE_REF, max_response_length=4096).sample(
        global_steps=1, partition_id="train", batch_size=1)
    assert sorted(batch.keys) == ["cd1_0_0", "cd1_1_0"]
    assert [r["error"] for r in group_records(tmp_path)] == [None, None]
