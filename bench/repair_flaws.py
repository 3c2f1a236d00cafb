"""Planted flaws of the harness-repair benchmark (``bench/repair_bench.py``): the benchmark's answer key.

Every flaw is a small, documented diff from the *control*: the math seed with its one known gap closed
(its reward applies the verifier's answer rules, ``recipe_edits.verifier_answers``).  The first flaw,
``seed-reward``, is the math seed itself.  Each reproduces a failure mode seen in real GRPO runs.

Nothing here is shown to an agent: agents see the harness repo and the digest, never this file.  Each
flaw carries two trusted checks on a harness folder (its files, exported from a commit):

- ``symptom``: the flaw's own symptom on constructed responses, groups or rendered prompts (or, for a
  knob, on ``harness.yaml``): a line saying what is wrong, None where the harness does not show it;
- ``repaired``: whether the flaw is repaired (it must pay what the verifier accepts, drop what it
  rejects, keep the signal of a mixed group, ...), with a line saying why.

The checks import the harness's ``reward.py``, ``filters.py`` and ``diagnostics/*.py`` in this process:
run them only on harnesses made by this benchmark's agents from these flaws, never on a stranger's.

    from repair_flaws import FLAWS, CONTROL
    files = FLAWS["short-budget"].apply(seed_files)        # the flawed harness's changed files
    FLAWS["short-budget"].symptom(Path("export"))          # "max_completion_length 8 < 24 ..." or None
"""

from __future__ import annotations

import importlib.util
import json
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType

import jinja2.sandbox
import yaml

from harness_repo.repo import SEEDS_DIR
from meta_agent.agents import recipe_edits
from meta_agent.domains.math import MathDomain

SEED = SEEDS_DIR / "math"
HIGH = 0.5  # a reward at or above this pays (the gate's high_reward)
VERIFY = MathDomain().verify


def _module(path: Path) -> ModuleType:
    spec = importlib.util.spec_from_file_location(f"flawcheck_{uuid.uuid4().hex}", path)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _config(h: Path) -> dict:
    return yaml.safe_load((h / "harness.yaml").read_text())


def _grpo(h: Path, knob: str, default: float) -> float:
    return float((_config(h).get("grpo") or {}).get(knob, default))


# -- held-out constructed responses (gold answers the archive never holds) -----------------------

GOLDS = ("7", "-12", "1234", "3/4", "0.5")


def _forms(gold: str) -> list[str]:
    """Answers in every form the verifier reads, right and wrong, for ``gold``."""
    wrong = "99" if gold != "99" else "98"
    near = str(int(gold) + 1) if gold.lstrip("-").isdigit() else wrong  # off by one: "close enough" is still wrong
    return [f"work\nAnswer: {gold}", f"so the answer: {gold}", f"work \\boxed{{{gold}}}", f"Answer: x = {gold}",
            f"**Answer:** ${gold}$", f"Answer: {gold}.", f"Answer: {wrong}", f"Answer: {gold} or {wrong}",
            f"Answer: {gold}\nno wait, \\boxed{{{wrong}}}", "I am not sure.", f"Answer: {wrong}\n\\boxed{{{gold}}}",
            "Answer: 14/2" if gold == "7" else f"Answer: {gold} {gold}", f"work\nAnswer: {wrong} (close to {gold})",
            f"Answer: {near}"]


def _reward_disagreements(h: Path) -> tuple[list[str], list[str]]:
    """(unpaid verified-correct responses, paid verified-wrong responses) of ``h``'s reward, held-out forms."""
    reward = _module(h / "reward.py")
    misses, hacks = [], []
    for gold in GOLDS:
        for response in _forms(gold):
            truth = {"answer": gold}
            paid = float(reward.compute_score("reasoning_gym/x", response, truth)["score"]) >= HIGH
            right = VERIFY("reasoning_gym/x", response, truth)[0] >= HIGH
            if right and not paid:
                misses.append(f"{response!r} (gold {gold})")
            if paid and not right:
                hacks.append(f"{response!r} (gold {gold})")
    return misses, hacks


def _misses_symptom(h: Path) -> str | None:
    misses, _ = _reward_disagreements(h)
    return f"{len(misses)} verified-correct answers unpaid, e.g. {misses[0]}" if misses else None


def _hacks_symptom(h: Path) -> str | None:
    _, hacks = _reward_disagreements(h)
    return f"{len(hacks)} verified-wrong answers paid, e.g. {hacks[0]}" if hacks else None


def _reward_agrees(h: Path) -> tuple[bool, str]:
    misses, hacks = _reward_disagreements(h)
    return (not misses and not hacks,
            f"{len(misses)} unpaid correct, {len(hacks)} paid wrong of {len(GOLDS) * len(_forms('7'))} held-out "
            "answers")


def _no_pay_for_wrong(h: Path) -> tuple[bool, str]:
    """The paid-wrong flaw is repaired when nothing the verifier rejects is paid and a plain right answer is."""
    _, hacks = _reward_disagreements(h)
    reward = _module(h / "reward.py")
    plain = float(reward.compute_score("reasoning_gym/x", "Answer: 7", {"answer": "7"})["score"]) >= HIGH
    return not hacks and plain, f"{len(hacks)} paid wrong; a plain right answer {'paid' if plain else 'unpaid'}"


# -- filters ------------------------------------------------------------------------------------------

def _mixed_group() -> list[dict]:
    rows = []
    for k, (reward, verified) in enumerate([(1.0, 1.0), (0.0, 0.0), (0.0, 0.0), (1.0, 1.0)]):
        rows.append({"traj_id": f"m{k}", "group_id": "m", "sample_idx": k, "reward": reward, "verified": verified,
                     "response": "Answer: 7" if reward else "Answer: 8", "truncated": False, "finish_reason": "stop"})
    return rows


def _kept_rewards(h: Path) -> list[float]:
    filters = _module(h / "filters.py") if (h / "filters.py").exists() else None
    group = _mixed_group()
    if filters is None:
        return [r["reward"] for r in group]
    kept = [r for r in group if getattr(filters, "keep_trajectory", lambda t: True)(r)]
    if not getattr(filters, "keep_group", lambda g: True)(kept):
        return []
    return [r["reward"] for r in kept]


def _filter_symptom(h: Path) -> str | None:
    kept = _kept_rewards(h)
    return None if len(set(kept)) > 1 else f"a mixed group (rewards 1, 0, 0, 1) keeps {kept}: no signal left"


def _filter_repaired(h: Path) -> tuple[bool, str]:
    kept = _kept_rewards(h)
    return len(set(kept)) > 1, f"a mixed group keeps rewards {kept}"


# -- knobs ----------------------------------------------------------------------------------------------

def _knob_check(knob: str, default: float, ok: Callable[[float], bool], wrong: str) -> tuple[
        Callable[[Path], str | None], Callable[[Path], tuple[bool, str]]]:
    def symptom(h: Path) -> str | None:
        value = _grpo(h, knob, default)
        return None if ok(value) else f"{knob} {value:g}: {wrong}"

    def repaired(h: Path) -> tuple[bool, str]:
        value = _grpo(h, knob, default)
        return ok(value), f"{knob} {value:g}"

    return symptom, repaired


# -- prompts --------------------------------------------------------------------------------------------

def _rendered(h: Path) -> str:
    env = jinja2.sandbox.SandboxedEnvironment(undefined=jinja2.StrictUndefined)
    parts = []
    for name in ("system.j2", "user.j2"):
        path = h / "prompts" / name
        if path.exists():
            parts.append(env.from_string(path.read_text()).render(question="What is 17 + 25?"))
    return "\n".join(parts)


def _prompt_symptom(h: Path) -> str | None:
    text = _rendered(h)
    return None if "answer:" in text.lower() else "the rendered prompt never asks for a final 'Answer:' line"


def _prompt_repaired(h: Path) -> tuple[bool, str]:
    asked = _prompt_symptom(h) is None
    return asked, "the rendered prompt asks for a final 'Answer:' line" if asked else "it does not ask for one"


# -- diagnostics ----------------------------------------------------------------------------------------

def _truncation_findings(h: Path) -> list[dict]:
    rollouts = [{"traj_id": f"t{k}", "group_id": "g", "response": "First I add the", "truncated": True,
                 "finish_reason": "length", "reward": 0.0} for k in range(4)]
    findings = []
    for path in sorted((h / "diagnostics").glob("*.py")) if (h / "diagnostics").is_dir() else []:
        findings += [f for f in _module(path).diagnose(rollouts) or [] if isinstance(f, dict)]
    return [f for f in findings if f.get("severity") in ("warning", "error") and "trunc" in str(f.get("name"))]


def _diagnostic_symptom(h: Path) -> str | None:
    return None if _truncation_findings(h) else "all-truncated rollouts raise no truncation finding"


def _diagnostic_repaired(h: Path) -> tuple[bool, str]:
    found = _truncation_findings(h)
    return bool(found), f"{len(found)} truncation finding(s) on all-truncated rollouts"


# -- the flaws ------------------------------------------------------------------------------------------

_OFF_BY_ONE = '''

# A "close enough" tolerance: a formatted answer off by one from the gold is paid as right.
_compute_score_exact = compute_score


def compute_score(data_source, solution_str, ground_truth, extra_info=None, **kwargs):
    result = _compute_score_exact(data_source, solution_str, ground_truth, extra_info=extra_info, **kwargs)
    pred, gold = result.get("pred"), _va_gold(ground_truth)
    try:
        if result["score"] == 0.0 and pred is not None and abs(float(pred) - float(gold)) == 1:
            return dict(result, score=1.0)
    except (TypeError, ValueError):
        pass
    return result
'''

_KEEP_PAID = '''"""Filters: train only on what the reward pays (a flaw planted by the repair benchmark)."""


def keep_trajectory(traj):
    """Only paid answers are worth learning from."""
    return (traj.get("reward") or 0.0) >= 0.5


def keep_group(group):
    return True
'''

_SILENT_TRUNCATION = '''"""Diagnostic: truncation (removed: reports nothing)."""


def diagnose(rollouts):
    return []
'''


@dataclass
class Flaw:
    """One planted flaw: how to plant it, its symptom, what a repair must do, and what the digest should say."""

    name: str
    description: str
    """What is wrong and what a repair looks like (for the table and the README, never for an agent)."""
    modes: tuple[str, ...]
    """Digest failure modes that name it (empty: the digest has no mode for it)."""
    edit: Callable[[dict[str, str]], dict[str, str]]
    """The control's files -> the changed files of the flawed harness."""
    symptom: Callable[[Path], str | None]
    repaired: Callable[[Path], tuple[bool, str]]
    known_good: Callable[[dict[str, str]], dict[str, str]] = field(repr=False, default=lambda files: {})
    """The flawed harness's files -> the files of a known-good repair (for the tests of ``repaired``)."""

    def apply(self, files: dict[str, str]) -> dict[str, str]:
        return self.edit(files)


def _set_knobs(**knobs: float) -> Callable[[dict[str, str]], dict[str, str]]:
    def edit(files: dict[str, str]) -> dict[str, str]:
        config = yaml.safe_load(files["harness.yaml"])
        config["grpo"].update(knobs)
        return {"harness.yaml": yaml.safe_dump(config, sort_keys=False)}
    return edit


def control_files() -> dict[str, str]:
    """The control harness's files (relative path -> text): the seed, its reward applying the verifier's rules."""
    files = {str(p.relative_to(SEED)): p.read_text() for p in sorted(SEED.rglob("*")) if p.is_file()}
    files["reward.py"] = recipe_edits.verifier_answers(files["reward.py"])
    return files


def _knob_flaw(name: str, description: str, modes: tuple[str, ...], knob: str, bad: float, good: float,
               ok: Callable[[float], bool], wrong: str, **also: float) -> Flaw:
    symptom, repaired = _knob_check(knob, good, ok, wrong)
    seed_knobs = yaml.safe_load((SEED / "harness.yaml").read_text())["grpo"]
    restore = {k: seed_knobs[k] for k in also}
    return Flaw(name, description, modes, _set_knobs(**{knob: bad}, **also), symptom, repaired,
                lambda files: _set_knobs(**{knob: good}, **restore)(files))


FLAW_LIST: list[Flaw] = [
    Flaw("seed-reward",
         "The math seed's own reward: it reads only an 'Answer:' at the start of a line and no \\boxed{}, 'x = 7' "
         "or inline 'the answer: 7', all of which the verifier accepts, and it pays an unreduced '14/2' and an "
         "'Answer:' line a later box overrides, which the verifier rejects. Repair: a reward that pays exactly "
         "what the verifier accepts on held-out answers.",
         ("reward_misses", "reward_hacking", "format_failures"),
         lambda files: {"reward.py": (SEED / "reward.py").read_text()}, _misses_symptom, _reward_agrees,
         lambda files: {"reward.py": recipe_edits.verifier_answers(files["reward.py"])}),
    Flaw("pays-wrong",
         "The reward pays a formatted wrong answer off by one from the gold ('close enough'). Repair: no "
         "answer the verifier rejects is paid, a plain right one still is.",
         ("reward_hacking",), lambda files: {"reward.py": files["reward.py"] + _OFF_BY_ONE}, _hacks_symptom,
         _no_pay_for_wrong, lambda files: {"reward.py": recipe_edits.verifier_answers(files["reward.py"])}),
    Flaw("filter-drops-signal",
         "filters.py keeps only paid trajectories, so every kept group is flat and GRPO gets no contrast. "
         "Repair: a mixed group keeps paid and unpaid members.",
         ("filter_drops",), lambda files: {"filters.py": _KEEP_PAID}, _filter_symptom, _filter_repaired,
         lambda files: {"filters.py": recipe_edits.keep_everything(files["filters.py"])}),
    _knob_flaw("short-budget",
               "max_completion_length 8: most answers are cut off before their 'Answer:' line. Repair: >= 24 "
               "tokens ('a + b = c' plus the Answer: line fits in ~20).",
               ("truncation", "no_final_answer"), "max_completion_length", 8, 32, lambda v: v >= 24,
               "too short for the work and the Answer: line"),
    _knob_flaw("lr-too-high",
               "learning_rate 2e-4, ten times the seed's: the policy falls back after round 0 (at 5e-5 it already "
               "did, 3 seeds pooled 0.292 -> 0.190). Repair: <= 5e-5.",
               (), "learning_rate", 2e-4, 2e-5, lambda v: v <= 5e-5, "several times too high"),
    _knob_flaw("tiny-groups",
               "group_size 2 (prompts_per_step 8, the same rollouts): at ~25% accuracy most groups of 2 have no "
               "reward variance. Repair: group_size >= 4.",
               ("zero_variance_groups", "zero_variance"), "group_size", 2, 4, lambda v: v >= 4,
               "most groups have no reward variance", prompts_per_step=8),
    Flaw("no-final-instruction",
         "Neither prompt asks for a final 'Answer:' line: responses trail off without one. Repair: the "
         "rendered prompt asks for it.",
         ("no_final_answer", "format_failures"),
         lambda files: {"prompts/system.j2": "You are a careful math assistant. Work it out in one line.\n",
                        "prompts/user.j2": "{{ question }}\n"},
         _prompt_symptom, _prompt_repaired,
         lambda files: {"prompts/user.j2": recipe_edits.ask_for_final_line(files["prompts/user.j2"])}),
    Flaw("diagnostic-removed",
         "diagnostics/truncation.py reports nothing, so the harness's own diagnostics never see truncation "
         "(the trusted digest still does). Repair: a truncation finding on all-truncated rollouts.",
         ("truncation",), lambda files: {"diagnostics/truncation.py": _SILENT_TRUNCATION},
         _diagnostic_symptom, _diagnostic_repaired,
         lambda files: {"diagnostics/truncation.py": (SEED / "diagnostics" / "truncation.py").read_text()}),
    _knob_flaw("hot-sampling",
               "temperature 1.3: the base policy rambles (at 1.0 it was 3% correct with 2 of 8 groups with "
               "signal). Repair: temperature <= 0.8.",
               ("no_final_answer", "zero_variance_groups"), "temperature", 1.3, 0.7, lambda v: v <= 0.8,
               "the policy rambles"),
]
FLAWS: dict[str, Flaw] = {f.name: f for f in FLAW_LIST}
CONTROL = "control"
"""The control harness (no flaw): ``control_files()`` unchanged; every flaw's symptom is absent from it."""


def flawed_files(name: str, knobs: dict | None = None) -> dict[str, str]:
    """The files to write over the seed to plant flaw ``name`` (the control's reward, plus the flaw's diff).

    ``knobs``: grpo settings of a reduced benchmark, written into harness.yaml first; the flaw's own knob
    wins over them.
    """
    base = control_files()
    if name != CONTROL and name not in FLAWS:
        raise SystemExit(f"unknown flaw {name!r}; the flaws: {', '.join(FLAWS)} (and {CONTROL!r})")
    out = {"reward.py": base["reward.py"]}
    if knobs:
        base["harness.yaml"] = out["harness.yaml"] = _set_knobs(**knobs)(base)["harness.yaml"]
    return out if name == CONTROL else {**out, **FLAWS[name].apply(base)}


def write_harness(dest: Path, files: dict[str, str]) -> Path:
    """The control's files with ``files`` over them, written to ``dest`` (for the checks)."""
    for rel, text in {**control_files(), **files}.items():
        (dest / rel).parent.mkdir(parents=True, exist_ok=True)
        (dest / rel).write_text(text)
    return dest


def describe() -> str:
    """The flaws as a markdown list (for the README)."""
    return "\n".join(f"- `{f.name}` ({', '.join(f.modes) or 'no digest mode'}): {f.description}" for f in FLAW_LIST)


if __name__ == "__main__":
    print(describe())
    print(json.dumps({name: sorted(flawed_files(name)) for name in [CONTROL, *FLAWS]}, indent=1))
