"""The endpoint backend: agent-mode rounds whose policy is served elsewhere (vLLM, SGLang, a hosted API).

For tool domains (SWE): each round collects multi-turn trajectories from the policy behind an
OpenAI-compatible endpoint, each in a fresh sandbox of its task (``domain.environment``), graded
by trusted code, scored by the harness in its sandboxed runtime, and archived like any round.
Nothing is trained: the weights live behind the endpoint, and training on agent trajectories is
the verl backend's job.  The harness loop (digest, proposals, backtest, gate) runs on what is
collected, so harness changes are judged on the policy's real agent behaviour.

    python -m meta_agent --domain swe --backend endpoint \\
        --policy-api-base http://127.0.0.1:8000/v1 --policy-model Qwen/Qwen2.5-Coder-7B-Instruct

What it uses of ``harness.yaml``: the task mix, ``group_size`` (episodes per task) and
``steps_per_round * prompts_per_step`` (tasks per round), and the reward, filters and
``dynamic_sampling``/``mask_truncated`` knobs for scoring.  Trajectories are appended to
``out_dir/rollouts.jsonl`` and ``out_dir/heldout.jsonl`` as each finishes, so a round stopped by a
failing endpoint resumes where it stopped.  The harness's prompt templates are not used: an agent
episode starts from the environment's own task statement (``swe_env.agent_loop``).
"""

from __future__ import annotations

import json
from typing import Any, ClassVar

from rl_backend.base import (BackendOptionError, BackendOptions, HarnessCodeError, Progress, RoundResult, RoundSpec,
                             TrainingFailed, deliver_rows)
from sandboxes.base import Sandbox
from sandboxes.harness_client import HarnessFailed, HarnessSession, trajectory_view


class EndpointOptions(BackendOptions):
    """The policy behind the endpoint."""

    title: ClassVar[str] = ("SWE agent mode (--domain swe --backend endpoint): multi-turn bash episodes from a policy "
                            "served elsewhere; nothing is trained locally")

    policy_api_base: str | None = None
    """The policy's OpenAI-compatible endpoint, e.g. http://127.0.0.1:8000/v1 (key, if any, in $POLICY_API_KEY)."""
    policy_model: str | None = None
    """The model name the endpoint serves."""


class EndpointBackend:
    """Collects agent trajectories from ``policy_model`` at ``policy_api_base``; trains nothing."""

    name = "endpoint"
    compute = "gpu"  # the policy's server: its collection time counts as GPU time

    def __init__(self, base_model: str | None = None, sandbox: Sandbox | None = None, **options: Any) -> None:
        """``options`` are :class:`EndpointOptions` fields; both are needed."""
        given = EndpointOptions.given("endpoint", options)
        if not given.policy_api_base or not given.policy_model:
            raise BackendOptionError("--backend endpoint needs --policy-api-base (an OpenAI-compatible URL such as "
                                     "http://127.0.0.1:8000/v1) and --policy-model (the model name it serves)")
        self.policy_api_base, self.policy_model = given.policy_api_base, given.policy_model
        self._sandbox = sandbox

    @property
    def sandbox(self) -> Sandbox:
        if self._sandbox is None:
            from sandboxes.docker import DockerSandbox

            self._sandbox = DockerSandbox()
        return self._sandbox

    def train_round(self, spec: RoundSpec, progress: Progress | None = None) -> RoundResult:
        """Collect, grade, score and archive one round of agent trajectories (see the module docstring)."""
        from rl_backend.local import quiet_training_logs  # torch: not loaded when the CLI only reads the options

        spec.out_dir.mkdir(parents=True, exist_ok=True)
        with quiet_training_logs(spec.out_dir / "train.log"):
            try:
                return self._round(spec, progress)
            except (HarnessCodeError, HarnessFailed) as exc:
                raise TrainingFailed(f"Round {spec.round} of run {spec.run_id!r} failed in harness commit "
                                     f"{spec.harness_commit[:12]}: {exc}") from exc

    def _round(self, spec: RoundSpec, progress: Progress | None) -> RoundResult:
        from rl_backend.local import BATCH_TIMEOUT_S, RUNTIME_LIMITS, read_harness_config
        from swe_env.agent_env import AgentLimits
        from swe_env.agent_loop import collect
        from swe_env.policy_client import PolicyClient

        config = read_harness_config(spec)
        domain = spec.load_domain()
        if not hasattr(domain, "environment"):
            raise TrainingFailed(f"--backend endpoint runs agent episodes; domain {domain.name!r} has no tool "
                                 "environment (use --domain swe)")
        knobs = config.grpo
        client = PolicyClient(self.policy_api_base, self.policy_model)
        limits = AgentLimits()
        try:
            tasks = domain.tasks("train", config.tasks, knobs.steps_per_round * knobs.prompts_per_step,
                                 spec.seed * 1000 + spec.round)
        except ValueError as exc:
            raise HarnessCodeError("harness.yaml tasks", str(exc)) from exc
        total = len(tasks) * knobs.group_size

        def tick(text: str) -> None:
            if progress is not None:
                done = sum(1 for _ in (spec.out_dir / "rollouts.jsonl").open()) \
                    if (spec.out_dir / "rollouts.jsonl").exists() else 0
                progress(done, total, {"trajectory": text})

        rows = collect(tasks, client, make_env=lambda t: domain.environment(t, limits), run_id=spec.run_id,
                       round=spec.round, rows_path=spec.out_dir / "rollouts.jsonl", group_size=knobs.group_size,
                       harness_commit=spec.harness_commit, progress=tick)
        with HarnessSession(self.sandbox, spec.harness_dir, limits=RUNTIME_LIMITS,
                            request_timeout_s=BATCH_TIMEOUT_S) as harness:
            scored = harness.score([trajectory_view(r) for r in rows], reward_range=domain.reward_range,
                                   dynamic_sampling=knobs.dynamic_sampling, mask_truncated=knobs.mask_truncated)
        for row, s in zip(rows, scored):
            row["reward"] = s.reward
            row["reward_info"] = json.dumps(dict(s.reward_info) | ({"error": s.error} if s.error else {}))
        heldout_tasks = domain.tasks("heldout", spec.heldout_specs or domain.eval_specs, spec.heldout_size,
                                     spec.heldout_seed)
        heldout = collect(heldout_tasks, client, make_env=lambda t: domain.environment(t, limits),
                          run_id=spec.run_id, round=spec.round, rows_path=spec.out_dir / "heldout.jsonl",
                          split="heldout", harness_commit=spec.harness_commit)
        rewards = [r["reward"] for r in rows if r["reward"] is not None]
        metrics = [{"round": spec.round, "step": 1, "reward": sum(rewards) / len(rewards) if rewards else None,
                    "verified": sum(r["verified"] for r in rows) / len(rows) if rows else None,
                    "harness/kept_trajectories": sum(s.keep for s in scored)}]
        (spec.out_dir / "metrics.jsonl").write_text(json.dumps(metrics[0]) + "\n")
        n = len(heldout)
        accuracy = sum(r["verified"] for r in heldout) / n if n else 0.0
        rows, heldout = deliver_rows(spec, rows, heldout)
        return RoundResult(policy_ref=f"endpoint:{self.policy_model}", metrics=metrics, rollouts=rows, heldout=heldout,
                           eval={"heldout_accuracy": accuracy, "n": n, "endpoint": self.policy_api_base,
                                 "trained": False})
