"""The generation preview: how a knob, budget, prompt or task-mix edit changes what the policy generates.

A backtest replays archived responses, so it cannot judge an edit that changes the responses themselves (the
temperature, the budget, the prompts, the tasks).  Here the current policy generates a small batch under the
candidate branch's knobs and templates and under main's, on the same tasks with the same seed, and trusted
code measures the symptoms on both:

- ``identical``: the share of group members that repeat an earlier member word for word (a sampler too cold to
  give GRPO different answers to contrast);
- ``truncated``: the share cut by the budget (no end-of-turn token);
- ``no_final_answer``: the share the verifier could not read an answer from;
- ``unsolved``: the share the verifier rejects;
- ``capped``: the share the preview's own cap (``MAX_NEW_TOKENS``) stopped before the harness's budget did.

A completion the cap stopped was not cut by the harness (its budget is larger) and might still end with an answer:
its truncation, final answer and verdict are unknown, so it counts in none of those three rates (their denominators
are the completions they can judge; a rate with none to judge is None, and the preview cannot rank by it).

Each rate is paired over tasks: a bootstrap over the tasks resamples main's and the candidate's groups of the same
task together, so the interval is on the difference.  The prompts are rendered by the branch's own templates in the
sandboxed harness runtime (``sandboxes.harness_client.HarnessSession.render``, the call training makes); no
harness file runs here.  ``harness.yaml`` is read as bounded data (``rl_backend.base.parse_harness_yaml``), as
the backends read it.  The tasks come from the domain's ``val`` split, which neither training nor the exam
draws from, so what an agent learns from a preview tells it nothing of the next round's tasks or the exam.
Sampling follows TRL's GRPO defaults (``top_p`` 1, no top-k).

    preview = GenerationPreview(repo, MathDomain(), DockerSandbox(), policy=Path("rounds/0/train/policy"),
                                workdir=Path("rounds/0/agent/generation"), seed=0)
    out = preview("iv/r0-search-temperature-1-4", "zero_variance_groups")
    out["main"], out["candidate"], out["interval"], out["seconds"]      # the symptom's rate, lower is better

``seconds`` is the candidate's own cost; ``main_seconds`` is the time this call spent generating main's batch,
which is drawn once per main commit and reused by every later candidate (0 then).
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

# as in rl_backend.local: OpenMP threads that spin while they wait make torch several times slower on shared cores
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

from meta_agent.bootstrap import bootstrap_ci, group_draws, ratio_draws
from meta_agent.digest import HIGH, NO_FINAL_ANSWER_REASONS
from rl_backend.base import parse_harness_yaml
from sandboxes.harness_client import HarnessFailed, HarnessSession

if TYPE_CHECKING:
    from harness_repo.repo import HarnessRepo
    from sandboxes.base import Sandbox

LOG = logging.getLogger(__name__)
RATES = ("identical", "truncated", "no_final_answer", "unsolved", "capped")
UNKNOWN_WHEN_CAPPED = frozenset({"truncated", "no_final_answer", "unsolved"})
"""Rates a completion stopped by the preview's cap (not the harness's budget) cannot be judged on."""
SYMPTOM = {"zero_variance_groups": "identical", "zero_variance": "identical", "truncation": "truncated",
           "no_final_answer": "no_final_answer", "format_failures": "no_final_answer",
           "heldout_regression": "unsolved"}
"""The rate a digest mode's symptom is measured by; a mode not listed (or none) is judged on every rate."""
TASKS = 4
"""Tasks per preview: with the harness's group size each (4 x 4 at the seed), 16 completions, one generate call."""
MAX_NEW_TOKENS = 256
"""The most a preview generates per completion, whatever the candidate's budget (its cost stays bounded); a
completion still going at this cap, under a budget past it, is ``capped``: not the harness's truncation."""
SAMPLES, CONFIDENCE = 1000, 0.95


class PreviewRefused(ValueError):
    """The branch's harness cannot be previewed (its harness.yaml, task mix or templates fail): its failure."""


@dataclass
class Sample:
    """One harness's batch: per task, how many completions showed each rate's symptom, and how many there were."""

    hits: dict[str, np.ndarray]
    members: np.ndarray
    settings: dict
    judged: dict[str, np.ndarray] | None = None
    """Per rate and task, the completions it could judge (default: all ``members``)."""

    def of(self, rate: str) -> np.ndarray:
        return self.members if self.judged is None or rate not in self.judged else self.judged[rate]


class GenerationPreview:
    """``preview(branch, mode) -> dict``: the mode's symptom on a batch generated under ``branch`` and under main."""

    def __init__(self, repo: HarnessRepo, domain: Any, sandbox: Sandbox, policy: Path, workdir: Path, seed: int,
                 tasks: int = TASKS) -> None:
        self.repo, self.domain, self.sandbox, self.policy = repo, domain, sandbox, Path(policy)
        self.workdir, self.seed, self.tasks = Path(workdir), seed, tasks
        self._model: Any = None
        self._main: tuple[str, Sample] | None = None

    def __call__(self, branch: str, mode: str | None = None) -> dict:
        started = time.monotonic()
        main_head = self.repo.head("main")
        if self._main is None or self._main[0] != main_head:  # main's batch is the same for every candidate
            self._main = (main_head, self.sample("main"))
        main_seconds = time.monotonic() - started  # paid once per main head, by whichever candidate came first
        main = self._main[1]
        cand = self.sample(branch)
        rates = compare(main, cand, self.seed)
        symptom = SYMPTOM.get(mode or "")
        chosen = [symptom] if symptom else list(RATES)
        chosen = [r for r in chosen if r != "capped"]  # a cost of the preview, not a symptom of the harness
        out = {"branch": branch, "mode": mode, "symptom": symptom or "all",
               "main": _total(rates, chosen, "main"), "candidate": _total(rates, chosen, "candidate"),
               "interval": rates[symptom]["interval"] if symptom in rates else None, "rates": rates,
               "settings": {"main": main.settings, "candidate": cand.settings},
               "tasks": int(len(cand.members)), "seconds": round(time.monotonic() - started - main_seconds, 1),
               "main_seconds": round(main_seconds, 1)}
        self.workdir.mkdir(parents=True, exist_ok=True)
        (self.workdir / f"{branch.replace('/', '_')}.json").write_text(json.dumps(out, indent=2))
        return out

    def sample(self, ref: str) -> Sample:
        """Generate the batch of harness ``ref`` (its knobs, task mix and templates) and count its symptoms."""
        dest = self.workdir / "exports" / ref.replace("/", "_")
        shutil.rmtree(dest, ignore_errors=True)
        harness = self.repo.export(ref, dest)
        try:
            config = parse_harness_yaml(harness)
            tasks = self.domain.tasks("val", config.tasks, self.tasks, self.seed)
        except ValueError as exc:
            raise PreviewRefused(f"{ref}: harness.yaml: {str(exc)[:300]}") from exc
        try:
            with HarnessSession(self.sandbox, harness) as session:
                chats = session.render([{"question": t.question, "task": t.template_vars()} for t in tasks])
        except HarnessFailed as exc:
            raise PreviewRefused(f"{ref}: the harness runtime failed rendering its prompts: {exc}") from exc
        if bad := [c for c in chats if isinstance(c, str)]:
            raise PreviewRefused(f"{ref}: {len(bad)} of {len(chats)} prompts failed to render: {bad[0][:200]}")
        k = config.grpo
        budget = min(k.max_completion_length, MAX_NEW_TOKENS)
        outputs = self._generate(chats, k.group_size, k.temperature, budget)  # type: ignore[arg-type]
        capped_budget = budget < k.max_completion_length  # what runs into the cap was not cut by the harness
        hits = {r: np.zeros(len(tasks)) for r in RATES}
        judged = {r: np.zeros(len(tasks)) for r in UNKNOWN_WHEN_CAPPED}
        for i, (task, group) in enumerate(zip(tasks, outputs)):
            seen: set[str] = set()
            for text, cut in group:
                norm = " ".join(text.split())
                hits["identical"][i] += norm in seen
                seen.add(norm)
                if cut and capped_budget:
                    hits["capped"][i] += 1
                    continue
                for rate in UNKNOWN_WHEN_CAPPED:
                    judged[rate][i] += 1
                score, info = self.domain.verify(task.data_source, text, task.ground_truth)
                reason = str((info or {}).get("reason") or "").strip().lower() if isinstance(info, dict) else ""
                hits["truncated"][i] += cut
                hits["no_final_answer"][i] += reason in NO_FINAL_ANSWER_REASONS
                hits["unsolved"][i] += float(score) < HIGH
        settings = {"temperature": k.temperature, "max_completion_length": k.max_completion_length,
                    "generated_budget": budget, "group_size": k.group_size}
        return Sample(hits, np.full(len(tasks), float(k.group_size)), settings, judged)

    def _generate(self, chats: list, group: int, temperature: float, budget: int) -> list[list[tuple[str, bool]]]:
        import torch

        from rl_backend.shared_prefix import as_list, generate_shared_prefix

        model, tokenizer = self._load()
        texts = [tokenizer.apply_chat_template(c, tokenize=False, add_generation_prompt=True) for c in chats]
        enc = tokenizer([t for t in texts for _ in range(group)], return_tensors="pt", padding=True,
                        add_special_tokens=False)
        eos = {tokenizer.eos_token_id, *as_list(model.generation_config.eos_token_id)}
        torch.manual_seed(self.seed)  # main and candidate draw from the same random stream: a no-op edit is a 0
        with torch.no_grad():  # the template's shared opening runs once (most of a CPU batch's time otherwise)
            out = generate_shared_prefix(model, enc["input_ids"], enc["attention_mask"], max_new_tokens=budget,
                                         do_sample=True, temperature=temperature, top_p=1.0, top_k=0,
                                         pad_token_id=tokenizer.pad_token_id)
        width = enc["input_ids"].shape[1]
        groups: list[list[tuple[str, bool]]] = [[] for _ in chats]
        for j, row in enumerate(out):
            ids = row[width:].tolist()
            stop = next((i for i, t in enumerate(ids) if t in eos), None)
            ids = ids if stop is None else ids[:stop]
            groups[j // group].append((tokenizer.decode(ids, skip_special_tokens=True), stop is None))
        return groups

    def _load(self) -> tuple[Any, Any]:
        if self._model is None:  # once per preview: every candidate is judged by the same policy
            from transformers import AutoModelForCausalLM, AutoTokenizer

            tokenizer = AutoTokenizer.from_pretrained(self.policy, padding_side="left")
            if tokenizer.pad_token is None:
                tokenizer.pad_token = tokenizer.eos_token
            model = AutoModelForCausalLM.from_pretrained(self.policy)
            model.eval()
            self._model = (model, tokenizer)
        return self._model


def compare(main: Sample, cand: Sample, seed: int) -> dict[str, dict]:
    """Each rate on main and the candidate, and the candidate minus main with a bootstrap interval over tasks
    (paired: a resample draws a task's two groups together)."""
    draws = group_draws(len(main.members), SAMPLES, np.random.default_rng(seed))
    out = {}
    for rate in RATES:
        m = _ratio(main.hits[rate].sum(), main.of(rate).sum())
        c = _ratio(cand.hits[rate].sum(), cand.of(rate).sum())
        diff = ratio_draws(draws, cand.hits[rate], cand.of(rate)) - ratio_draws(draws, main.hits[rate], main.of(rate))
        lo, hi = bootstrap_ci(diff, CONFIDENCE)
        interval = None if m is None or c is None or np.isnan(lo) or np.isnan(hi) else [round(lo, 4), round(hi, 4)]
        out[rate] = {"main": m, "candidate": c, "delta": None if m is None or c is None else round(c - m, 4),
                     "interval": interval, "judged": {"main": int(main.of(rate).sum()),
                                                      "candidate": int(cand.of(rate).sum())}}
    return out


def _ratio(hits: float, judged: float) -> float | None:
    """A rate over what could be judged; None when nothing could (every completion stopped by the cap)."""
    return round(float(hits / judged), 4) if judged > 0 else None


def _total(rates: dict[str, dict], chosen: list[str], side: str) -> float | None:
    """The chosen rates summed on one side; None when one of them could not be judged there."""
    values = [rates[r][side] for r in chosen]
    return None if any(v is None for v in values) else round(sum(values), 4)


def for_round(loop: Any, n: int) -> GenerationPreview | None:
    """The loop's generation preview for round ``n``: the round's trained policy, where it is a local Hugging Face
    folder (the local backend's); None otherwise (a verl checkpoint is not previewed on the controller's CPU)."""
    saved = loop.run.round_dir(n) / "train" / "result.json"
    policy = Path(json.loads(saved.read_text()).get("policy_ref") or "") if saved.exists() else None
    if policy is None or not (policy / "config.json").is_file():
        return None
    return GenerationPreview(loop.repo, loop.domain, loop.sandbox, policy, loop.run.round_dir(n) / "agent" /
                             "generation_previews", seed=n)
