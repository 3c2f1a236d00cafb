"""Importing verl rollout and validation dumps (files written here in verl's format) into a real archive."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from collections import Counter
from pathlib import Path

import pytest

from rl_backend.archive import Archive, ArchiveError
from rl_backend.verl.dropped import iter_round_tables
from rl_backend.verl.ingest import import_verl_dump, parse_uid
from rl_backend.verl_import import main

REPO = Path(__file__).resolve().parents[1]


def write_dump(folder: Path, step: int, records: list[dict]) -> Path:
    """Write one step file the way verl's _dump_generations does (ensure_ascii=False, trailing newline)."""
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{step}.jsonl"
    path.write_text("\n".join(json.dumps(r, ensure_ascii=False) for r in records) + "\n", encoding="utf-8")
    return path


def rollout_records(step: int, n_prompts: int = 2, n: int = 3) -> list[dict]:
    """V1 rollout dump lines: a group's n samples adjacent, uid = {prompt_uuid}_{sample_idx}_{output_idx}."""
    records = []
    for p in range(n_prompts):
        for k in range(n):
            answer = str(step * 10 + p)
            output = f"... so the answer is {answer if k == 0 else 'unknown'} ✓"
            records.append({"input": f"user\nWhat is {step} * 10 + {p}?\nassistant\n", "output": output,
                            "gts": answer, "score": 1.0 if k == 0 else 0.0, "step": step,
                            "uid": f"5f0c2d1e-aaaa-4bbb-8ccc-00000000{step:02d}{p:02d}_{k}_0"})
    return records


def exact_match(data_source: str, response: str, ground_truth: str) -> tuple[float, dict]:
    """A stand-in trusted verifier: the ground truth must appear in the response."""
    return float(f"answer is {ground_truth} " in response), {"source": data_source}


def test_rollout_dump_import(tmp_path: Path):
    dump, archive = tmp_path / "rollouts", Archive(tmp_path / "archive")
    write_dump(dump, 1, rollout_records(1))
    write_dump(dump, 2, rollout_records(2))
    (dump / "notes.txt").write_text("not a dump file")

    n = import_verl_dump(dump, archive, "run1", 3, domain="math", split="train",
                         data_source="reasoning_gym/products", verifier=exact_match, harness_commit="c0ffee")
    assert n == 12 and archive.count(run_id="run1", round=3) == 12 and archive.rounds("run1") == [3]
    rows = archive.rows(run_id="run1")
    assert Counter(r["step"] for r in rows) == {1: 6, 2: 6}
    groups = Counter(r["group_id"] for r in rows)
    assert len(groups) == 4 and set(groups.values()) == {3}  # samples of one prompt form one GRPO group
    assert all(g.startswith("s1-") or g.startswith("s2-") for g in groups)
    first = [r for r in rows if r["step"] == 1][:3]
    assert [r["sample_idx"] for r in first] == [0, 1, 2] and len({r["group_id"] for r in first}) == 1
    assert len({r["task_id"] for r in first}) == 1 and first[0]["task_id"].startswith("prompt-")
    assert first[0]["prompt"] == "user\nWhat is 1 * 10 + 0?\nassistant\n" and first[0]["response"].endswith("✓")
    assert first[0]["ground_truth"] == "10" and [r["reward"] for r in first] == [1.0, 0.0, 0.0]
    assert [r["verified"] for r in first] == [1.0, 0.0, 0.0]
    assert first[0]["verifier_info"] == {"source": "reasoning_gym/products"} and first[0]["reward_info"] is None
    assert {r["data_source"] for r in rows} == {"reasoning_gym/products"} and rows[0]["harness_commit"] == "c0ffee"
    ids = [r["traj_id"] for r in rows]
    assert len(set(ids)) == 12 and all(i.startswith("run1-r3-s") for i in ids)

    # re-importing (a resumed controller) adds nothing and keeps the same ids
    files = sorted((tmp_path / "archive").rglob("*.parquet"))
    assert import_verl_dump(dump, archive, "run1", 3, domain="math", split="train",
                            data_source="reasoning_gym/products", verifier=exact_match, harness_commit="c0ffee") == 12
    assert sorted((tmp_path / "archive").rglob("*.parquet")) == files
    assert [r["traj_id"] for r in archive.rows(run_id="run1")] == ids
    # the same dump under different labels is a conflict, not a silent duplicate
    with pytest.raises(ArchiveError, match="reuse a recorded traj_id"):
        import_verl_dump(dump, archive, "run1", 3, domain="math", split="val", verifier=exact_match)
    # the archive's group sampler sees whole groups of the imported dump
    sample = archive.sample_groups({"run_id": "run1"}, n_groups=2, seed=0)
    assert sample.num_rows == 6 and set(Counter(sample.column("group_id").to_pylist()).values()) == {3}


def test_validation_dump_with_extra_keys_and_no_uid(tmp_path: Path):
    dump, archive = tmp_path / "val", Archive(tmp_path / "archive")
    records = []
    for p, (gts, pred) in enumerate([("4", "4"), ({"answer": "7"}, "8")]):
        for _ in range(2):  # val with n=2: two samples of the same prompt, no uid (older verl)
            acc = float(pred == (gts if isinstance(gts, str) else gts["answer"]))
            records.append({"input": f"Q{p}", "output": f"Answer: {pred}", "gts": gts, "score": acc, "step": 0,
                            "reward": acc, "acc": acc == 1.0, "pred": pred})
    write_dump(dump, 0, records)
    write_dump(dump, 10, [dict(records[0], step=10), dict(records[2], step=10)])

    assert import_verl_dump(dump, archive, "run1", 0, domain="math", split="val") == 6
    rows = archive.rows(split="val")
    assert len(rows) == 6 and {r["verified"] for r in rows} == {None}  # no verifier given
    step0 = [r for r in rows if r["step"] == 0]
    assert Counter(r["group_id"] for r in step0).most_common() == [(step0[0]["group_id"], 2), (step0[2]["group_id"], 2)]
    assert [r["sample_idx"] for r in step0] == [0, 1, 0, 1]
    # the same prompt at another step is another group
    assert not {r["group_id"] for r in rows if r["step"] == 10} & {r["group_id"] for r in step0}
    assert step0[0]["reward_info"] == {"reward": 1.0, "acc": True, "pred": "4"}
    assert step0[2]["ground_truth"] == {"answer": "7"} and step0[2]["reward"] == 0.0
    assert {r["data_source"] for r in rows} == {"verl/math"}


def test_uid_forms():
    assert parse_uid("5f0c-aa_3_0", "q", "f:1") == ("5f0c-aa", 3, 0)
    assert parse_uid("5f0c_aa_3_1", "q", "f:1") == ("5f0c_aa", 3, 1)  # the prompt uuid may hold '_'
    assert parse_uid(None, "q", "f:1") == parse_uid(None, "q", "f:2") != parse_uid(None, "other", "f:1")
    with pytest.raises(ArchiveError, match="f:1: uid 'plain-uuid' is not verl's"):
        parse_uid("plain-uuid", "q", "f:1")  # no verl version writes a bare prompt uuid


def test_verl_0_9_dump_rules(tmp_path: Path):
    """Padding rows, a failed session, a multi-output session, and a step rewritten after a resume."""
    dump, archive = tmp_path / "rollouts", Archive(tmp_path / "archive")
    line = lambda uid, out, score, step=1: {"input": "user\nWhat is 2+2?\nassistant\n", "output": out,  # noqa: E731
                                            "gts": "4", "score": score, "step": step, "uid": uid}
    write_dump(dump, 1, [
        line("aaaa_0_0", "Answer: 4", 1.0),
        line("aaaa_1_0", "let me use the tool", 0.0), line("aaaa_1_1", "tool said 5\nAnswer: 5", 0.0),
        # session 2 failed: missing; then verl's filler row for batch divisibility
        {"input": "", "output": "", "gts": "9", "score": 0.0, "step": 1, "uid": "pad" + "0f" * 16 + "_0_0"},
        line("aaaa_3_0", "Answer: 3", 0.0),
    ])
    # step 2 was being rewritten by a resumed job when the controller looked: half-written, beyond the checkpoint
    (dump / "2.jsonl").write_text(json.dumps(line("bbbb_0_0", "Answer: 4", 1.0, step=2)) + "\n{\"input\": \"us")
    with pytest.raises(ArchiveError, match=r"2.jsonl: half-written"):
        import_verl_dump(dump, archive, "run1", 0, domain="math", split="train")
    assert archive.count() == 0
    assert import_verl_dump(dump, archive, "run1", 0, domain="math", split="train", up_to_step=1) == 3
    rows = sorted(archive.rows(run_id="run1"), key=lambda r: r["sample_idx"])
    assert [(r["sample_idx"], r["response"], r["reward"]) for r in rows] == [
        (0, "Answer: 4", 1.0), (1, "tool said 5\nAnswer: 5", 0.0), (3, "Answer: 3", 0.0)]
    assert len({r["group_id"] for r in rows}) == 1


def test_validation_dump_prefers_reward_and_records_join(tmp_path: Path):
    """verl writes a dict reward's own 'score' over the score column: the summed 'reward' is the number."""
    dump, archive = tmp_path / "val", Archive(tmp_path / "archive")
    write_dump(dump, 0, [{"input": "Q", "output": "Answer: 4", "gts": "4", "score": 1.0, "reward": 0.5,
                          "step": 0, "uid": "cccc_0_0"},
                         {"input": "Q", "output": "boom", "gts": "4", "score": 0.0, "reward": 0.0,
                          "step": 0, "uid": "cccc_1_0"}])
    recorded = {"boom": {"reward": None, "reward_info": {}, "keep": False, "error": "reward: ValueError: x"}}
    import_verl_dump(dump, archive, "run1", 0, domain="math", split="val",
                     records=lambda output, gts: recorded.get(output))
    rows = sorted(archive.rows(run_id="run1"), key=lambda r: r["sample_idx"])
    assert rows[0]["reward"] == 0.5 and rows[0]["reward_info"] == {"reward": 0.5}
    # a trajectory the harness could not judge is archived with no reward, and why
    assert rows[1]["reward"] is None and rows[1]["reward_info"] == {"keep": False, "error": "reward: ValueError: x"}


@pytest.mark.parametrize("bad_line,problem", [
    ('{"input": "q", "output": "o", "gts": "1", "score": 1.0, ', "not valid JSON"),
    ('["input", "output"]', "expected a JSON object, got list"),
    ('{"input": "q", "output": "o", "gts": "1", "step": 4}', "missing key(s) score"),
    ('{"input": "q", "output": null, "gts": "1", "score": 1.0, "step": 4}', "'output' is NoneType"),
    ('{"input": "q", "output": "o", "gts": "1", "score": "high", "step": 4}', "'score' is 'high'"),
    ('{"input": "q", "output": "o", "gts": "1", "score": 1.0, "step": 5}', "'step' is 5 but the file is step 4"),
    ('{"input": "q", "output": "o", "gts": "1", "score": 1.0, "step": 4, "uid": 7}', "'uid' is int"),
])
def test_malformed_line_names_file_and_line(tmp_path: Path, bad_line: str, problem: str):
    dump, archive = tmp_path / "rollouts", Archive(tmp_path / "archive")
    write_dump(dump, 3, rollout_records(3))  # a good file: nothing of it may be written either
    good = write_dump(dump, 4, rollout_records(4, n_prompts=1))
    good.write_text(good.read_text() + "\n" + bad_line + "\n")  # a blank line (skipped), then line 5
    with pytest.raises(ArchiveError) as err:
        import_verl_dump(dump, archive, "run1", 0, domain="math", split="train")
    assert str(err.value).startswith(f"{good}:5: ") and problem in str(err.value)
    assert archive.count() == 0 and not (tmp_path / "archive").exists()


def test_verifier_output_checked_and_bad_dirs(tmp_path: Path):
    dump, archive = tmp_path / "rollouts", Archive(tmp_path / "archive")
    path = write_dump(dump, 1, rollout_records(1, n_prompts=1))
    with pytest.raises(ArchiveError, match=f"{path}:1: the verifier returned 1.5"):
        import_verl_dump(dump, archive, "run1", 0, domain="math", split="train", verifier=lambda *a: 1.5)

    def crashes(source, response, gts):
        raise RuntimeError("verifier bug")

    with pytest.raises(RuntimeError) as err:
        import_verl_dump(dump, archive, "run1", 0, domain="math", split="train", verifier=crashes)
    assert f"while verifying {path}:1" in err.value.__notes__[0]
    with pytest.raises(ArchiveError, match="no <step>.jsonl files"):
        import_verl_dump(tmp_path, archive, "run1", 0, domain="math", split="train")
    with pytest.raises(ArchiveError, match="not a directory"):
        import_verl_dump(tmp_path / "missing", archive, "run1", 0, domain="math", split="train")
    with pytest.raises(ArchiveError, match="field 'split'"):
        import_verl_dump(dump, archive, "run1", 0, domain="math", split="training")
    assert archive.count() == 0


def test_cli_imports_with_a_verifier_module(tmp_path: Path, monkeypatch, capsys):
    dump = tmp_path / "rollouts"
    write_dump(dump, 1, rollout_records(1))
    (tmp_path / "my_verifier.py").write_text(textwrap.dedent("""
        def verify(data_source, response, ground_truth):
            return {"score": float(f"answer is {ground_truth} " in response), "checked_by": "cli"}
    """))
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path), str(REPO)])}
    args = [str(dump), "--archive", str(tmp_path / "archive"), "--run-id", "cli-run", "--round", "2",
            "--domain", "math", "--split", "train", "--verifier", "my_verifier:verify"]
    done = subprocess.run([sys.executable, "-m", "rl_backend.verl_import", *args], capture_output=True, text=True,
                          env=env, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert "6 trajectories now in" in done.stdout
    rows = Archive(tmp_path / "archive").rows(run_id="cli-run", round=2)
    assert len(rows) == 6 and sum(r["verified"] for r in rows) == 2.0
    assert rows[0]["verifier_info"] == {"score": 1.0, "checked_by": "cli"}

    # user errors: exit status 2 and one line naming the problem, no traceback (in-process: python starts slowly)
    monkeypatch.syspath_prepend(str(tmp_path))
    (dump / "2.jsonl").write_text('{"input": "q"}\n')
    with pytest.raises(SystemExit) as exit_:
        main(args)
    assert exit_.value.code == 2 and f"{dump / '2.jsonl'}:1: missing key(s)" in capsys.readouterr().err
    (dump / "2.jsonl").unlink()
    with pytest.raises(SystemExit) as exit_:
        main(args[:-1] + ["my_verifier:nope"])
    assert exit_.value.code == 2 and "no callable 'nope'" in capsys.readouterr().err
    assert main(args) == 0 and "6 trajectories" in capsys.readouterr().out  # idempotent re-import


def test_readme_import_command_gives_rows_a_backtest_can_use(tmp_path: Path):
    """The README's import command, word for word, with the real math verifier; then a backtest sample."""
    import re

    from meta_agent.backtest import draw_sample
    from meta_agent.config import BacktestSettings

    readme = (REPO / "README.md").read_text()
    command = re.search(r"python -m rl_backend\.verl_import .*?\\\n.*?(?=\s+#)", readme).group(0)
    argv = command.replace("\\\n", " ").split()
    assert argv[:3] == ["python", "-m", "rl_backend.verl_import"] and "--verifier" in argv
    dump = tmp_path / "path" / "to" / "rollout_dumps"
    records = []
    for p, (question, gold) in enumerate((("What is 3 + 4?", "7"), ("What is 6 * 7?", "42"))):
        for k, response in enumerate((f"3 + 4 = 7\nAnswer: {gold}", "Answer: 6 or 7", f"\\boxed{{{gold}}}")):
            records.append({"input": f"user\n{question}\nassistant\n", "output": response, "gts": gold,
                            "score": 1.0, "step": 0, "uid": f"5f0c2d1e-aaaa-4bbb-8ccc-0000000000{p:02d}_{k}_0"})
    write_dump(dump, 0, records)
    argv = [str(dump) if a == "/path/to/rollout_dumps" else str(tmp_path / a) if a.startswith("runs/") else a
            for a in argv]
    done = subprocess.run([sys.executable, *argv[1:]], cwd=tmp_path, capture_output=True, text=True,
                          env={**os.environ, "PYTHONPATH": str(REPO)})
    assert done.returncode == 0, done.stderr
    archive = Archive(tmp_path / "runs" / "m1" / "archive")
    rows = archive.rows(run_id="gpu1")
    # hand-judged: the Answer line and the box are right, the hedge is wrong
    assert sorted((r["response"], r["verified"]) for r in rows) == sorted(
        [("3 + 4 = 7\nAnswer: 7", 1.0), ("Answer: 6 or 7", 0.0), ("\\boxed{7}", 1.0),
         ("3 + 4 = 7\nAnswer: 42", 1.0), ("Answer: 6 or 7", 0.0), ("\\boxed{42}", 1.0)])
    sample = draw_sample(archive, BacktestSettings(sample_groups=2))
    assert sample.num_rows == 6  # both groups usable: every row has a verifier outcome


def test_ordinary_and_irregular_step_files_give_the_same_rows(tmp_path: Path):
    # the ordinary file is read as columns; a blank line sends its twin to the per-line reader.  Same rows.
    from rl_backend.verl.columnar import read_step
    from rl_backend.verl.ingest import iter_tables, verl_rows

    lines = rollout_records(4)
    lines.insert(1, {"input": "", "output": "", "gts": "0", "score": 0.0, "step": 4, "uid": f"pad{'0' * 32}_0_0"})
    ordinary = write_dump(tmp_path / "ordinary", 4, lines)
    irregular = write_dump(tmp_path / "irregular", 4, lines)
    irregular.write_text(irregular.read_text() + "\n", encoding="utf-8")
    assert read_step(ordinary, 4) is not None and read_step(irregular, 4) is None
    recorded = {"... so the answer is 40 ✓": {"reward": 0.5, "reward_info": {"format": 1}, "keep": True}}
    kwargs = dict(domain="math", split="train", verifier=exact_match, records=lambda out, gts: recorded.get(out))
    rows = verl_rows(tmp_path / "ordinary", "run1", 0, **kwargs)
    assert rows == verl_rows(tmp_path / "irregular", "run1", 0, **kwargs)
    assert len(rows) == 6 and [r["reward"] for r in rows[:3]] == [0.5, 0.0, 0.0]
    assert json.loads(rows[0]["reward_info"]) == {"format": 1, "keep": True} and rows[3]["verified"] == 1.0
    # labels name the lines of the file: the padding row was line 2
    (_, labels), = iter_tables(tmp_path / "ordinary", "run1", 0, **kwargs)
    assert labels == [f"{ordinary}:{n}" for n in (1, 3, 4, 5, 6, 7)]


def dropped_line(step: int, uid: str, session: int, response: str, *, launch: int = 1) -> dict:
    """A group_records line of a trajectory the sampler dropped (rl_backend.verl.sampler's format)."""
    return {"uid": uid, "session": session, "key": "k", "keep": False, "error": None, "step": step, "launch": launch,
            "dropped": {"output": 0, "prompt": f"user\nWhat is {step} * 10 + 0?\nassistant\n", "response": response,
                        "gts": str(step * 10), "data_source": "verl/math", "task_id": "t", "response_tokens": 4,
                        "truncated": False, "reward": 0.0, "reward_info": {}, "reason": "keep_group"}}


def import_round(tmp_path: Path, up_to_step: int) -> list[dict]:
    archive = Archive(tmp_path / "archive")
    with archive.round_writer("r1", 0) as writer:
        for table, labels in iter_round_tables(tmp_path / "rollouts", tmp_path / "group_records", "r1", 0,
                                               domain="math", split="train", up_to_step=up_to_step):
            writer.write(table, labels)
    return archive.rows(run_id="r1", round=0, split="train")


def write_records(folder: Path, name: str, lines: list[dict], tail: str = "") -> None:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / name).write_text("".join(json.dumps(line) + "\n" for line in lines) + tail)


def test_dropped_trajectories_join_the_dump_once_and_only_up_to_the_checkpoint(tmp_path: Path):
    write_dump(tmp_path / "rollouts", 1, rollout_records(1, n_prompts=1, n=2))  # group ...0100, sessions 0 and 1
    write_dump(tmp_path / "rollouts", 2, rollout_records(2, n_prompts=1, n=2))
    group = "5f0c2d1e-aaaa-4bbb-8ccc-00000000"
    write_records(tmp_path / "group_records", "node-7.jsonl", [
        dropped_line(1, f"{group}0100", 2, "dropped at step 1"),           # genuine: imported
        dropped_line(1, f"{group}0100", 1, "forged: the dump trained me"),  # the dump holds session 1: the dump wins
        dropped_line(2, f"{group}0200", 2, "after the checkpoint"),         # step 2 > checkpoint 1: not imported
    ])
    # launch 1 judged step 1 too, before the job died and launch 2 re-ran it with new uuids: launch 2's lines win
    write_records(tmp_path / "group_records", "node-3.jsonl", [dropped_line(1, "old-uuid", 0, "stale", launch=0)])
    rows = import_round(tmp_path, up_to_step=1)
    assert sorted((r["group_id"][-4:], r["sample_idx"], r["response"]) for r in rows) == [
        ("0100", 0, "... so the answer is 10 ✓"), ("0100", 1, "... so the answer is unknown ✓"),
        ("0100", 2, "dropped at step 1")]
    dropped = next(r for r in rows if r["sample_idx"] == 2)
    assert dropped["reward_info"] == {"keep": False, "dropped": "keep_group"} and dropped["response_tokens"] == 4
    assert dropped["task_id"] == rows[0]["task_id"]  # the same prompt: the same task as its kept siblings


def test_a_half_written_records_file_is_refused(tmp_path: Path):
    write_dump(tmp_path / "rollouts", 1, rollout_records(1, n_prompts=1, n=2))
    write_records(tmp_path / "group_records", "node-7.jsonl", [], tail='{"uid": "g", "session": 0, "step": 1')
    with pytest.raises(ArchiveError, match="node-7.jsonl: half-written"):
        import_round(tmp_path, up_to_step=1)
    assert Archive(tmp_path / "archive").rows(run_id="r1", round=0) == []  # nothing of the import is visible
