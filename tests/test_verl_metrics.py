"""The progress display, round summary and digest read the metric keys verl 0.9.1 really emits, from a metrics
file written by verl's own file logger.

The step metrics come from verl's own functions on a real ``DataProto`` batch (``compute_data_metrics``,
``compute_throughout_metrics``, as ``trainer/ppo/v1/trainer_base.py`` calls them) plus the actor's loss keys
as the worker names them (``workers/utils/losses.py``: ``actor/pg_loss``; ``kl_loss`` renamed ``actor/kl_loss``
by ``rename_dict(..., "actor/")``); ``verl.utils.tracking.FileLogger`` writes them to
``VERL_FILE_LOGGER_PATH`` the way the TaskRunner does.
"""

from __future__ import annotations

from pathlib import Path

import pytest

pytest.importorskip("verl", reason="verl 0.9.1 is installed by `pip install .[verl]` (scripts/setup.sh: .venv-verl)")

import torch  # noqa: E402

from meta_agent.digest import build_digest  # noqa: E402
from rl_backend.verl.backend import read_metrics  # noqa: E402

PROMPT_LEN, RESPONSE_LEN = 2, 4


def step_metrics(scores: list[float], lengths: list[int], step_seconds: float, losses: tuple[float, float]) -> dict:
    """One training step's metrics as verl computes them: each trajectory's score sits on its last token."""
    from verl import DataProto
    from verl.trainer.ppo.metric_utils import compute_data_metrics, compute_throughout_metrics
    from verl.utils.py_functional import rename_dict

    n = len(scores)
    response_mask = torch.tensor([[1] * k + [0] * (RESPONSE_LEN - k) for k in lengths])
    token_scores = torch.zeros(n, RESPONSE_LEN)
    for i, (score, k) in enumerate(zip(scores, lengths)):
        token_scores[i, k - 1] = score
    batch = DataProto.from_dict(
        tensors={"prompts": torch.ones(n, PROMPT_LEN, dtype=torch.long),
                 "responses": torch.ones(n, RESPONSE_LEN, dtype=torch.long),
                 "attention_mask": torch.cat([torch.ones(n, PROMPT_LEN, dtype=torch.long), response_mask], dim=1),
                 "response_mask": response_mask, "token_level_scores": token_scores,
                 "token_level_rewards": token_scores, "advantages": token_scores, "returns": token_scores},
        meta_info={"global_token_num": [PROMPT_LEN + k for k in lengths]})
    actor = rename_dict({"actor/pg_loss": losses[0], "kl_loss": losses[1]}, "actor/")
    return {**compute_data_metrics(batch, use_critic=False),
            **compute_throughout_metrics(batch, {"step": step_seconds}, n_gpus=2), **actor}


def test_the_round_summary_and_digest_read_what_verls_file_logger_wrote(tmp_path: Path, monkeypatch):
    from verl.utils.tracking import FileLogger

    path = tmp_path / "launches" / "1" / "metrics.jsonl"
    path.parent.mkdir(parents=True)
    monkeypatch.setenv("VERL_FILE_LOGGER_PATH", str(path))
    logger = FileLogger("meta_agent", "r1-r0")
    logger.log(step_metrics([1.0, 0.0, 0.0, 1.0], [4, 2, 2, 4], 3.0, (0.5, 0.01)), step=1)
    logger.log(step_metrics([1.0, 1.0, 1.0, 0.0], [3, 3, 2, 4], 2.0, (0.25, 0.02)), step=2)
    logger.finish()

    entries = read_metrics(path, round=0)
    assert [e["step"] for e in entries] == [1, 2]
    assert [e["reward"] for e in entries] == [0.5, 0.75]                 # mean score of each step's 4 trajectories
    assert [e["response_length"] for e in entries] == [3.0, 3.0]         # (4+2+2+4)/4, (3+3+2+4)/4
    assert [e["time_per_step"] for e in entries] == [3.0, 2.0]
    # tokens (prompt 2 + response) per second per GPU: 20 / (3 s * 2 GPUs), 20 / (2 s * 2 GPUs)
    assert [e["throughput"] for e in entries] == pytest.approx([20 / 6, 20 / 4])

    digest = build_digest(0, [], metrics=entries, findings=[], eval={"heldout_accuracy": 0.0}, previous=[])
    assert digest["training"] == {"steps": 2, "loss": {"first": 0.5, "last": 0.25},
                                  "reward": {"first": 0.5, "last": 0.75}, "kl": {"first": 0.01, "last": 0.02}}
