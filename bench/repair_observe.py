"""What a harness does on the repair benchmark's held-out probes, observed through the sandboxed harness runtime.

The repair checks of ``bench/repair_flaws.py`` judge harnesses that agents wrote, an LLM among them, so the
harness's code (``reward.py``, ``filters.py``, ``diagnostics/*.py``, prompt templates) never runs in the
bench's process: one ``HarnessSession`` (no network, non-root, limits) per harness answers every probe, and
trusted code here judges its answers with the domain's verifier.  Only ``harness.yaml`` is read on the host,
as data (``yaml.safe_load``).

    obs = observe(Path("export"), DockerSandbox())     # one sandbox session for every probe
    obs.paid[("7", "Answer: 14/2")]                     # did the harness's reward pay it?
    obs.kept_mixed, obs.prompt, obs.truncation_findings, obs.failed
    observe(path, sandbox, probes={"my-flaw": lambda session: session.score(views, reward_range=(0, 1))})
    obs.extra["my-flaw"]                                # a flaw's own probe's answer (``repair_flaws.Flaw.probe``)
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from sandboxes.base import Limits, Sandbox
from sandboxes.harness_client import HarnessFailed, HarnessSession

HIGH = 0.5  # a reward at or above this pays (the gate's high_reward)
REWARD_RANGE = (0.0, 1.0)  # the math domain's
GOLDS = ("7", "-12", "1234", "3/4", "0.5")
PLAIN = ("7", "Answer: 7")
"""A plain right answer: a repair that stops paying wrong answers must still pay it."""
MIXED = (("7", "Answer: 7"), ("7", "Answer: 99"), ("7", "Answer: 99"), ("7", "Answer: 7"))
"""A mixed group (paid, unpaid, unpaid, paid under a reward that pays what the verifier accepts)."""
QUESTION = "What is 17 + 25?"
MAX_CONFIG_BYTES = 1 << 20


def forms(gold: str) -> list[str]:
    """Answers in every form the verifier reads, right and wrong, for ``gold``."""
    wrong = "99" if gold != "99" else "98"
    near = str(int(gold) + 1) if gold.lstrip("-").isdigit() else wrong  # off by one: "close enough" is still wrong
    return [f"work\nAnswer: {gold}", f"so the answer: {gold}", f"work \\boxed{{{gold}}}", f"Answer: x = {gold}",
            f"**Answer:** ${gold}$", f"Answer: {gold}.", f"Answer: {wrong}", f"Answer: {gold} or {wrong}",
            f"Answer: {gold}\nno wait, \\boxed{{{wrong}}}", "I am not sure.", f"Answer: {wrong}\n\\boxed{{{gold}}}",
            "Answer: 14/2" if gold == "7" else f"Answer: {gold} {gold}", f"work\nAnswer: {wrong} (close to {gold})",
            f"Answer: {near}"]


def held_out_answers() -> list[tuple[str, str]]:
    """Every (gold, response) the reward checks score."""
    return [(gold, response) for gold in GOLDS for response in forms(gold)]


@dataclass
class Observation:
    """A harness's answers to the probes (its word, judged by the checks), or why it failed as a whole."""

    config: dict
    paid: dict[tuple[str, str], bool] = field(default_factory=dict)
    """(gold, response) -> whether the harness's reward paid it (an error or an invalid reward does not pay)."""
    kept_mixed: list[float] = field(default_factory=list)
    """The rewards of the members of :data:`MIXED` that its filters kept."""
    prompt: str = ""
    """The rendered prompt's text (system and user), or the rendering error."""
    truncation_findings: list[dict] = field(default_factory=list)
    """Its diagnostics' warnings and errors about truncation on all-truncated rollouts."""
    false_alarms: list[dict] = field(default_factory=list)
    """The same on rollouts that all stopped with an answer (a diagnostic that always warns is no repair)."""
    failed: str | None = None
    """Why the harness failed as a whole in its sandbox (import error, hung, ...): no check passes then."""
    extra: dict[str, Any] = field(default_factory=dict)
    """flaw name -> what that flaw's own probe returned (trusted code calling the session; ``Flaw.probe``)."""


Probe = Callable[[HarnessSession], Any]
"""A flaw's own observation probe: trusted code that asks the harness's session (``score``, ``render``,
``diagnose``) what it needs; its harness code still runs only in the sandbox."""


def view(k: int, group: str, gold: str, response: str, truncated: bool = False) -> dict:
    """A trajectory view as the runtime gets it in training (``harness_client.trajectory_view``'s keys)."""
    traj_id = f"{group}-{k}"
    return {"traj_id": traj_id, "group_id": group, "sample_idx": k, "task_id": f"probe-{group}",
            "data_source": "reasoning_gym/basic_arithmetic", "prompt": QUESTION, "response": response,
            "ground_truth": {"answer": gold}, "response_tokens": 8 if truncated else len(response.split()),
            "truncated": truncated, "finish_reason": "length" if truncated else "stop",
            "extra_info": {"traj_id": traj_id, "task_id": f"probe-{group}", "group_id": group, "sample_idx": k,
                           "split": "heldout"}}


def read_config(harness: Path) -> dict:
    """``harness.yaml`` as data ({} when missing or not a mapping)."""
    path = harness / "harness.yaml"
    if not path.is_file() or path.stat().st_size > MAX_CONFIG_BYTES:
        return {}
    try:
        config = yaml.safe_load(path.read_text())
    except yaml.YAMLError:
        return {}
    return config if isinstance(config, dict) else {}


def observe(harness: Path, sandbox: Sandbox, timeout_s: float = 120.0,
            probes: dict[str, Probe] | None = None) -> Observation:
    """Run every probe on the exported harness ``harness`` in one sandboxed runtime session, the flaws' own
    ``probes`` (name -> probe) after the common ones, each answer in ``obs.extra[name]``."""
    obs = Observation(config=read_config(harness))
    answers = held_out_answers()
    views = [view(k, f"form{k}", gold, response) for k, (gold, response) in enumerate([*answers, PLAIN])]
    mixed = [view(k, "mixed", gold, response) for k, (gold, response) in enumerate(MIXED)]
    truncated = [dict(view(k, "cut", "7", "First I add the", truncated=True), reward=0.0, keep=True)
                 for k in range(4)]
    finished = [dict(view(k, "done", "7", "3 + 4 = 7\nAnswer: 7"), reward=1.0, keep=True) for k in range(4)]
    try:
        with HarnessSession(sandbox, harness, limits=Limits(timeout_s=timeout_s),
                            request_timeout_s=timeout_s / 2) as session:
            scored = session.score(views + mixed, reward_range=REWARD_RANGE)
            rendered = session.render([{"question": QUESTION, "task": {"name": "basic_arithmetic",
                                                                       "data_source": "reasoning_gym/basic_arithmetic",
                                                                       "config": {}}}])[0]
            findings = session.diagnose(truncated)
            quiet = session.diagnose(finished)
            extra = {name: probe(session) for name, probe in (probes or {}).items()}
    except HarnessFailed as exc:
        obs.failed = str(exc)[:500]
        return obs
    pays = [s.error is None and s.reward is not None and s.reward >= HIGH for s in scored]
    obs.paid = dict(zip([*answers, PLAIN], pays))
    obs.kept_mixed = [float(s.reward) for s in scored[len(views):] if s.keep and s.reward is not None]
    obs.prompt = "\n".join(m.get("content", "") for m in rendered) if isinstance(rendered, list) else rendered
    obs.truncation_findings = _about_truncation(findings)
    obs.false_alarms = _about_truncation(quiet)
    obs.extra = extra
    return obs


def _about_truncation(findings: list[dict]) -> list[dict]:
    """Warnings and errors named for truncation; a crashed diagnostic (``<name>:crashed``) reports nothing."""
    return [f for f in findings if f.get("severity") in ("warning", "error") and "trunc" in str(f.get("name"))
            and not str(f.get("name")).endswith(":crashed")]
