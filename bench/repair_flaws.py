"""Planted flaws of the harness-repair benchmark (``bench/repair_bench.py``): the benchmark's answer key.

Every flaw is a small, documented diff from the *control*: the math seed with its one known gap closed
(its reward applies the verifier's answer rules, ``recipe_edits.verifier_answers``).  The first flaw,
``seed-reward``, is the math seed itself.  Each reproduces a failure mode seen in real GRPO runs.

Nothing here is shown to an agent: agents see the harness repo and the digest, never this file.  Each
flaw carries two trusted checks on what a harness does (``repair_observe.observe``: its reward, filters,
prompts and diagnostics run in the sandboxed harness runtime, never in this process; ``harness.yaml`` is
read as data):

- ``symptom``: the flaw's own symptom on constructed responses, groups or rendered prompts (or, for a
  knob, on ``harness.yaml``): a line saying what is wrong, None where the harness does not show it;
- ``repaired``: whether the flaw is repaired (it must pay what the verifier accepts, drop what it
  rejects, keep the signal of a mixed group, ...), with a line saying why.

A harness that fails as a whole in its sandbox shows that as its symptom and repairs nothing.

    from repair_flaws import FLAWS, CONTROL
    files = FLAWS["short-budget"].apply(seed_files)        # the flawed harness's changed files
    obs = observe(Path("export"), DockerSandbox())         # one sandbox session for every probe
    FLAWS["short-budget"].symptom(obs)                     # "max_completion_length 8: too short ..." or None
"""

from __future__ import annotations

import importlib.util
import json
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from harness_repo.repo import SEEDS_DIR
from meta_agent.agents import recipe_edits
from meta_agent.agents.recipes import RECIPES_VERSION
from domains.math import MathDomain
from repair_observe import HIGH, PLAIN, Observation, Probe, held_out_answers

SEED = SEEDS_DIR / "math"
VERIFY = MathDomain().verify
Check = Callable[[Observation], str | None]
Repaired = Callable[[Observation], tuple[bool, str]]


def _grpo(obs: Observation, knob: str, default: float) -> float:
    grpo = obs.config.get("grpo")
    try:
        return float((grpo if isinstance(grpo, dict) else {}).get(knob, default))
    except (TypeError, ValueError):
        return float("nan")  # a knob that is not a number repairs nothing


def _failed(check: Check) -> Check:
    """A harness that failed as a whole in its sandbox shows that as its symptom."""
    return lambda obs: f"the harness failed in its sandbox: {obs.failed}" if obs.failed else check(obs)


def _must_run(check: Repaired) -> Repaired:
    """A harness that failed as a whole in its sandbox repairs nothing."""
    return lambda obs: (False, f"the harness failed in its sandbox: {obs.failed}") if obs.failed else check(obs)


# -- rewards on held-out constructed responses (gold answers the archive never holds) -------------------

def _reward_disagreements(obs: Observation) -> tuple[list[str], list[str]]:
    """(unpaid verified-correct responses, paid verified-wrong responses) of the harness's reward."""
    misses, hacks = [], []
    for gold, response in held_out_answers():
        paid = obs.paid.get((gold, response), False)
        right = VERIFY("reasoning_gym/x", response, {"answer": gold})[0] >= HIGH
        if right and not paid:
            misses.append(f"{response!r} (gold {gold})")
        if paid and not right:
            hacks.append(f"{response!r} (gold {gold})")
    return misses, hacks


def _misses_symptom(obs: Observation) -> str | None:
    misses, _ = _reward_disagreements(obs)
    return f"{len(misses)} verified-correct answers unpaid, e.g. {misses[0]}" if misses else None


def _hacks_symptom(obs: Observation) -> str | None:
    _, hacks = _reward_disagreements(obs)
    return f"{len(hacks)} verified-wrong answers paid, e.g. {hacks[0]}" if hacks else None


def _reward_agrees(obs: Observation) -> tuple[bool, str]:
    misses, hacks = _reward_disagreements(obs)
    return (not misses and not hacks,
            f"{len(misses)} unpaid correct, {len(hacks)} paid wrong of {len(held_out_answers())} held-out answers")


def _no_pay_for_wrong(obs: Observation) -> tuple[bool, str]:
    """The paid-wrong flaw is repaired when nothing the verifier rejects is paid and a plain right answer is."""
    _, hacks = _reward_disagreements(obs)
    plain = obs.paid.get(PLAIN, False)
    return not hacks and plain, f"{len(hacks)} paid wrong; a plain right answer {'paid' if plain else 'unpaid'}"


# -- filters ------------------------------------------------------------------------------------------

def _filter_symptom(obs: Observation) -> str | None:
    kept = obs.kept_mixed
    return None if len(set(kept)) > 1 else f"a mixed group (right, wrong, wrong, right) keeps rewards {kept}: no signal"


def _filter_repaired(obs: Observation) -> tuple[bool, str]:
    return len(set(obs.kept_mixed)) > 1, f"a mixed group keeps rewards {obs.kept_mixed}"


# -- knobs (harness.yaml, read as data) -----------------------------------------------------------------

def _knob_check(knob: str, default: float, ok: Callable[[float], bool], wrong: str) -> tuple[Check, Repaired]:
    def symptom(obs: Observation) -> str | None:
        value = _grpo(obs, knob, default)
        return None if ok(value) else f"{knob} {value:g}: {wrong}"

    def repaired(obs: Observation) -> tuple[bool, str]:
        value = _grpo(obs, knob, default)
        return ok(value), f"{knob} {value:g}"

    return symptom, repaired


# -- prompts --------------------------------------------------------------------------------------------

def _prompt_symptom(obs: Observation) -> str | None:
    return None if "answer:" in obs.prompt.lower() else "the rendered prompt never asks for a final 'Answer:' line"


def _prompt_repaired(obs: Observation) -> tuple[bool, str]:
    asked = _prompt_symptom(obs) is None
    return asked, "the rendered prompt asks for a final 'Answer:' line" if asked else "it does not ask for one"


# -- diagnostics ----------------------------------------------------------------------------------------

def _diagnostic_symptom(obs: Observation) -> str | None:
    return None if obs.truncation_findings else "all-truncated rollouts raise no truncation finding"


def _diagnostic_repaired(obs: Observation) -> tuple[bool, str]:
    found, false = obs.truncation_findings, obs.false_alarms
    return bool(found) and not false, (f"{len(found)} truncation finding(s) on all-truncated rollouts, "
                                       f"{len(false)} on rollouts that all finished")


# -- the flaws (their planted text names nothing that is wrong: an agent reads it) ----------------------

_OFF_BY_ONE = '''

_base_compute_score = compute_score


def compute_score(data_source, solution_str, ground_truth, extra_info=None, **kwargs):
    result = _base_compute_score(data_source, solution_str, ground_truth, extra_info=extra_info, **kwargs)
    pred, gold = result.get("pred"), _va_gold(ground_truth)
    try:
        if result["score"] == 0.0 and pred is not None and abs(float(pred) - float(gold)) == 1:
            return dict(result, score=1.0)
    except (TypeError, ValueError):
        pass
    return result
'''

_KEEP_PAID = '''"""Trajectory and group filters."""


def keep_trajectory(traj):
    return (traj.get("reward") or 0.0) >= 0.5


def keep_group(group):
    return True
'''

_SILENT_TRUNCATION = '''"""Diagnostic: truncation."""


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
    symptom: Check
    """The flaw's symptom on a harness's observation (``repair_observe.observe``), or None."""
    repaired: Repaired
    """Whether the observed harness repairs the flaw, and why."""
    known_good: Callable[[dict[str, str]], dict[str, str]] = field(repr=False, default=lambda files: {})
    """The flawed harness's files -> the files of a known-good repair (for the tests of ``repaired``)."""
    probe: Probe | None = field(repr=False, default=None)
    """Its own observation probe (``repair_observe.observe``): its answer is ``obs.extra[name]``."""
    recipes_version: int | None = None
    """The recipe set (``meta_agent.agents.recipes.RECIPES_VERSION``) it was planted against: held-out while no
    recipe was added or changed since; None: written beside the recipes (in-sample)."""

    def __post_init__(self) -> None:
        self.symptom, self.repaired = _failed(self.symptom), _must_run(self.repaired)

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


def control_reward(files: dict[str, str]) -> dict[str, str]:
    """A flaw's known-good repair where the flaw lives in the reward: the control's ``reward.py``."""
    return {"reward.py": control_files()["reward.py"]}


def against_verifier(pairs: list[tuple[str, str]], rewards: list[float | None]) -> list[str]:
    """The (gold, response) pairs a probe scored whose reward disagrees with the verifier (a missing reward pays
    nothing), each described; the count itself where the rewards do not line up with the pairs."""
    if len(rewards) != len(pairs):
        return [f"{len(rewards)} rewards for {len(pairs)} responses"]
    wrong = []
    for (gold, response), reward in zip(pairs, rewards):
        right = VERIFY("reasoning_gym/x", response, {"answer": gold})[0] >= HIGH
        if right != (reward is not None and reward >= HIGH):
            wrong.append(f"{response!r} (gold {gold}, verifier {'right' if right else 'wrong'}, reward {reward})")
    return wrong


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
         ("reward_misses", "reward_hacking", "format_failures", "audit_misses", "audit_hacking"),
         lambda files: {"reward.py": (SEED / "reward.py").read_text()}, _misses_symptom, _reward_agrees,
         lambda files: {"reward.py": recipe_edits.verifier_answers(files["reward.py"])}),
    Flaw("pays-wrong",
         "The reward pays a formatted wrong answer off by one from the gold ('close enough'). Repair: no "
         "answer the verifier rejects is paid, a plain right one still is.",
         ("reward_hacking", "audit_hacking"), lambda files: {"reward.py": files["reward.py"] + _OFF_BY_ONE},
         _hacks_symptom,
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
               ("heldout_regression",), "learning_rate", 2e-4, 2e-5, lambda v: v <= 5e-5, "several times too high"),
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
BUILT_IN: tuple[str, ...] = tuple(FLAWS)
"""The nine flaws above, in order (``FLAWS`` also holds those a ``--flaws-from`` module registers)."""
CONTROL = "control"
"""The control harness (no flaw): ``control_files()`` unchanged; every flaw's symptom is absent from it."""


class FlawInputError(ValueError):
    """Bad input naming flaws (an unknown name, a module that cannot be loaded): the CLI's exit 2."""


IN_SAMPLE, HELD_OUT = "in-sample", "held-out"


def sample(name: str) -> str:
    """Whether flaw ``name`` is held out from today's recipes: planted against the current recipe set (no
    recipe added or changed since, ``RECIPES_VERSION``); the nine above and the control are in-sample."""
    flaw = FLAWS.get(name)
    version = flaw.recipes_version if flaw else None
    return HELD_OUT if version is not None and version >= RECIPES_VERSION else IN_SAMPLE


def register(*flaws: Flaw) -> list[Flaw]:
    """Add ``flaws`` to the benchmark (a ``--flaws-from`` module calls this); a name already taken is refused.

    The same module may be loaded twice in one process (by ``load_flaws`` and by a plain import, as the tests
    do): a name registered before from the same file is that flaw again, and the first registration stands."""
    origin = _source_of(sys._getframe(1).f_globals.get("__file__"))
    out = []
    for flaw in flaws:
        if not isinstance(flaw, Flaw):
            raise FlawInputError(f"register() takes Flaw objects, got {type(flaw).__name__}")
        if flaw.name in FLAWS and origin is not None and _ORIGIN.get(flaw.name) == origin:
            out.append(FLAWS[flaw.name])
            continue
        if flaw.name in FLAWS or flaw.name == CONTROL:
            raise FlawInputError(f"flaw {flaw.name!r} is already registered; give it another name")
        FLAW_LIST.append(flaw)
        FLAWS[flaw.name] = flaw
        _ORIGIN[flaw.name] = origin
        out.append(flaw)
    return out


_ORIGIN: dict[str, Path | None] = {}
"""Registered flaw name -> the file of the module that registered it (None for the nine above)."""


def _source_of(file: str | None) -> Path | None:
    return Path(file).resolve() if file else None


def load_flaws(path: Path) -> list[str]:
    """Import the module at ``path``, which registers its flaws (``register``); their names, in order.

    A flaw it registers without ``recipes_version`` is taken as planted against today's recipe set (held-out
    now, in-sample once a recipe is added)."""
    if not path.is_file():
        raise FlawInputError(f"--flaws-from {path}: no such file; give the path of a Python module that "
                             "calls repair_flaws.register(Flaw(...))")
    spec = importlib.util.spec_from_file_location(f"flaws_{path.stem}", path)
    try:
        spec.loader.exec_module(importlib.util.module_from_spec(spec))  # type: ignore[union-attr]
    except FlawInputError:
        raise
    except Exception as exc:  # noqa: BLE001 - the caller's module: one line with the cause
        raise FlawInputError(f"--flaws-from {path}: the module failed to load: {type(exc).__name__}: "
                             f"{str(exc)[:200]}") from None
    added = [f for f in FLAW_LIST if _ORIGIN.get(f.name) == path.resolve()]
    if not added:
        raise FlawInputError(f"--flaws-from {path}: it registered no flaw; call repair_flaws.register(Flaw(...))")
    for flaw in added:
        if flaw.recipes_version is None:
            flaw.recipes_version = RECIPES_VERSION
    return [f.name for f in added]


def probes() -> dict[str, Probe]:
    """Every registered flaw's own observation probe, by flaw name (for ``repair_observe.observe``)."""
    return {f.name: f.probe for f in FLAW_LIST if f.probe is not None}


def flawed_files(name: str, knobs: dict | None = None) -> dict[str, str]:
    """The files to write over the seed to plant flaw ``name`` (the control's reward, plus the flaw's diff).

    ``knobs``: grpo settings of a reduced benchmark, written into harness.yaml first; the flaw's own knob
    wins over them.
    """
    base = control_files()
    if name != CONTROL and name not in FLAWS:
        raise FlawInputError(f"unknown flaw {name!r}; the flaws: {', '.join(FLAWS)} (and {CONTROL!r}); "
                             "others load with --flaws-from FILE")
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
    import sys

    if sys.argv[1:]:  # bad input: one line, exit 2 (issue 49)
        import records

        records.refuse(f"unknown argument {sys.argv[1]!r}: repair_flaws.py takes none; run it bare to list the flaws")
    print(describe())
    print(json.dumps({name: sorted(flawed_files(name)) for name in [CONTROL, *FLAWS]}, indent=1))
