"""main judged like a candidate: the gate's checks on main's own round, as digest findings.

The gate refuses a candidate that pays verified failures, spreads reward among failures, keeps too little of
the batch, errs, returns invalid rewards, or renders prompts that fail, run long or leak the answer.  A main
that already does so was never named: the gate only compares a candidate with main.  Here the same checks
(``meta_agent.judge``'s own functions, called) run on what main's harness did in training this round: its
reward as assigned, its keep mask as the trainer applied it, and, where given, its rendered prompts.  A check
that compares with main compares with the harness that does none of it: a reward that pays no failure and is
flat among them, prompts that render nothing.  Trusted code on archive rows: no harness code runs here.

    findings = judge_main(rows, (0.0, 1.0), GateThresholds())   # [] when main passes every check
    findings[0]   # {"name": "main:failure_pay_new", "severity": "error", "rate": 0.125, "message": ..., ...}
    add_main_findings(digest, rows, (0.0, 1.0))                 # the same checks, into the round's digest

The probe's checks (a session shaped like training on fresh tasks: pay for verified failures, errors, render and
leak) run harness code, so ``probe_main`` runs main's harness in the sandbox through the probe itself
(``meta_agent.judge.probe.probe_commit``); its failures are ``main:probe_*`` findings.

    checks, findings = probe_main(repo, repo.head("main"), rows, MathDomain(), sandbox, BacktestSettings())
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from typing import Any

import numpy as np
import yaml

from harness_repo.contract import SEVERITIES
from meta_agent.bootstrap import failure_spread_parts
from meta_agent.config import GateThresholds
from meta_agent.digest_rows import example, is_zero_variance
from meta_agent.budget_checks import knob_checks
from meta_agent.cue_checks import answer_cue_checks
from meta_agent.example_checks import example_checks_on_main
from meta_agent.example_format import example_format_checks
from meta_agent.example_shown import shown_answer_checks
from meta_agent.judge.harm_checks import flat_check, new_pay_check, pay_floor
from meta_agent.markup_checks import trainer_prompt_checks
from meta_agent.judge.metrics import Arm, MetricResult, Sample, Scored, paired_metrics, score
from meta_agent.names import get_domain
from meta_agent.prompt_checks import Rendered, estimate_tokens, leak_mask, prompt_checks, questions_of
from meta_agent.question_checks import question_checks
from meta_agent.slice_checks import slice_check
from meta_agent.stall_checks import exam_movement, stall_check
from meta_agent.update_checks import update_check

PREFIX = "main:"
SOURCE = "main_checks"
EXAMPLES = 3
SEVERITY = {"execution": "error", "reward_validity": "error", "kept_share": "warning", "failure_pay_new": "error",
            "failure_spread": "error", "flat_failure_share": "error", "prompt_render": "error",
            "prompt_length": "warning", "prompt_leak": "error", "probe_failure_pay": "error",
            "probe_execution": "error", "probe_render": "error", "probe_leak": "error", "informative_dropped": "error",
            "task_mix": "warning"}
"""As the gate weighs them: what trains a policy toward a wrong answer or breaks a round is an error."""

LOG = logging.getLogger(__name__)
MAX_INFORMATIVE_DROPPED = 0.5
"""Above this share of main's reward-varying groups whose contrast its filters removed, the filters keep the wrong
groups (``main:informative_dropped``): most of what GRPO could learn from this round did not reach the loss."""


def _arrays(rows: list[dict]) -> tuple[list[dict], Arm, Sample]:
    """main's training rows with a known verifier outcome, as the gate's arm and sample."""
    rows = [r for r in rows if r.get("split", "train") == "train" and _float(r.get("verified")) is not None]
    codes: dict[str, int] = {}
    group = np.array([codes.setdefault(str(r.get("group_id")), len(codes)) for r in rows], dtype=int)
    reward = np.array([np.nan if (x := _float(r.get("reward"))) is None else x for r in rows], dtype=float)
    keep = np.array([r.get("kept") is not False for r in rows], dtype=bool)
    verified = np.array([_float(r.get("verified")) >= 0.5 for r in rows], dtype=bool)
    return rows, Arm(reward=reward, keep=keep, error=~np.isfinite(reward)), Sample(group=group, verified=verified)


def _float(value: Any) -> float | None:
    try:
        x = float(value)
    except (TypeError, ValueError):
        return None
    return x if np.isfinite(x) else None


def _finding(check: dict, rate: float, rows: list[dict], where: np.ndarray) -> dict:
    name = check["name"]
    found = {"name": PREFIX + name, "source": SOURCE, "severity": SEVERITY[name], "rate": float(rate),
             "message": f"main fails the gate's {name} check: {check['detail']}"[:400],
             "examples": [example(rows[i]) for i in np.flatnonzero(where)[:EXAMPLES]]}
    if isinstance(check.get("evidence"), dict):
        found["evidence"] = check["evidence"]
    return found


def checks_on_main(rows: list[dict], reward_range: tuple[float, float], t: GateThresholds,
                   format_credit: float = 0.0) -> tuple[list[dict], list[dict]]:
    """(every check as the gate reports it, the findings of those main fails) on main's archived outputs."""
    rows, arm, sample = _arrays(rows)
    n = len(rows)
    if not n:
        return [], []
    s = score(arm, reward_range)
    m = paired_metrics(s, s, sample, t)  # main against itself: each figure's main value is main's own
    none_paid = score(Arm(np.full(n, reward_range[0]), arm.keep, np.zeros(n, bool)), reward_range)
    checks, findings = [], []

    def judge(check: dict, rate: float, where: np.ndarray) -> None:
        checks.append(check)
        if not check["passed"]:
            findings.append(_finding(check, rate, rows, where))

    err = m["error_rate"].main
    judge({"name": "execution", "passed": bool(err <= t.max_error_rate),
           "detail": f"error rate {err:.3f} incl. invalid rewards (max {t.max_error_rate})"}, err, s.error)
    invalid = s.error & ~arm.error
    judge({"name": "reward_validity", "passed": not invalid.any(),
           "detail": f"{int(invalid.sum())} of {n} rewards invalid for range {list(reward_range)}"},
          invalid.mean(), invalid)
    kept = m["kept_share"].main
    judge({"name": "kept_share", "passed": bool(kept >= t.min_kept_share),
           "detail": f"kept {kept:.3f} of trajectories (min {t.min_kept_share})"}, 1 - kept, ~arm.keep)
    failed = ~sample.verified
    # pay as the gate counts it: the normalised reward above the range's 0 (judge.harm_checks.pay_floor)
    paid = failed & s.keep & (np.maximum(s.norm - pay_floor(reward_range), 0.0) > format_credit + 1e-9)
    judge(new_pay_check(none_paid, s, failed, format_credit, t.failure_pay_margin, reward_range),
          paid.sum() / max(1, failed.sum()), paid)
    spread_groups = _spread_groups(s, sample, t)
    for name in ("failure_spread", "flat_failure_share"):
        value = 0.0 if np.isnan(m[name].main) else m[name].main
        judge(flat_check(name, MetricResult(name, 0.0, value, value, value, value)), value,
              np.isin(sample.group, spread_groups))
    judge(*_informative_dropped(rows))
    return checks, findings


def _informative_dropped(rows: list[dict]) -> tuple[dict, float, np.ndarray]:
    """The gate's kept and signal shares ask how much trains; this asks *which* groups: GRPO learns only from a
    group whose rewards differ, so a filter that removes that contrast (the whole group, or all but one reward) and
    keeps flat groups leaves the loss nothing to learn from, with a kept share that looks healthy.  Read from the
    keep mask the trainer recorded per trajectory; a group with one unrecorded member (verl leaves it null) does
    not count."""
    groups: dict[str, list[int]] = {}
    for i, row in enumerate(rows):
        groups.setdefault(str(row.get("group_id")), []).append(i)
    varying, lost, flat, flat_kept = [], [], 0, 0
    for members in groups.values():
        if any(rows[i].get("kept") is None for i in members):
            continue
        rewards = [x for i in members if (x := _float(rows[i].get("reward"))) is not None]
        if not rewards:
            continue
        kept = [x for i in members if rows[i].get("kept") and (x := _float(rows[i].get("reward"))) is not None]
        if is_zero_variance(rewards):
            flat += 1
            flat_kept += bool(kept)
            continue
        varying.append(members)
        if len(kept) < 2 or is_zero_variance(kept):
            lost.append(members)
    where = np.zeros(len(rows), dtype=bool)
    for members in lost:
        where[members] = [rows[i].get("kept") is False for i in members]  # the dropped members are the examples
    # truncation masking (mask_truncated) drops only cut-off completions, and an unjudged reward never trains: a
    # dropped member with a reward that was not cut off was dropped by the filters, whatever the knobs say
    dropped = np.flatnonzero(where)
    by_filters = sum(rows[i].get("truncated") is False and _float(rows[i].get("reward")) is not None for i in dropped)
    share = len(lost) / len(varying) if varying else 0.0
    flat_dropped = (flat - flat_kept) / flat if flat else 0.0
    if not varying and not flat:
        return ({"name": "informative_dropped", "passed": True, "detail": "which trajectories the filters kept is "
                 "unknown (the backend recorded no keep mask per trajectory)"}, 0.0, where)
    return ({"name": "informative_dropped", "passed": bool(share <= MAX_INFORMATIVE_DROPPED),
             "detail": f"the filters removed the reward contrast of {len(lost)} of {len(varying)} reward-varying "
                       f"groups ({share:.3f}; max {MAX_INFORMATIVE_DROPPED}) and kept {flat_kept} of {flat} flat "
                       f"groups (dropped {flat_dropped:.3f}): GRPO learns only from groups whose rewards differ; "
                       f"{by_filters} of the {len(dropped)} members dropped from them were judged and not cut off",
             "evidence": {"dropped": int(len(dropped)), "dropped_not_truncated": int(by_filters)}},
            share, where)


MIX_FLOOR = 0.5
"""A task kind trained at less than half the share the exam gives it is under-trained for what is measured."""


def task_kinds(domain: Any) -> Callable[[str, str], dict[str, float]]:
    """``kinds(name, split)``: the task kinds a mix's name draws in a split, each with its share of the name's draws
    (the domain's ``task_kinds``, as SWE's ``all``, package or task id name packages); a name is its own kind in a
    domain without one (math and code: a name is a generator or a source)."""
    resolve = getattr(domain, "task_kinds", None)
    return resolve if callable(resolve) else (lambda name, split: {name: 1.0})


def mix_shares(pairs: list[tuple[str, float]], kinds: Callable[[str, str], dict[str, float]],
                split: str) -> dict[str, float]:
    total = sum(w for _, w in pairs) or 1.0
    out: dict[str, float] = {}
    for name, w in pairs:
        for kind, part in kinds(name, split).items():
            out[kind] = out.get(kind, 0.0) + w / total * part
    return out


def task_mix_check(train_tasks: list[dict], exam_specs: list[Any], domain: Any = None) -> tuple[dict, dict | None]:
    """main's task mix (harness.yaml's ``tasks`` weights) against the trusted exam's (the domain's ``eval_specs``),
    compared by the kinds each name draws (:func:`task_kinds`; training's names in the train split, the exam's in
    the held-out split): each kind's share of the training prompts and of the exam.  A kind the exam weighs that
    main trains at under :data:`MIX_FLOOR` of its exam share (or not at all) is a ``main:task_mix`` finding; its
    rate is the share of the exam those kinds make up.  A kind no name of the domain can train (no training task
    of it) is no harness's gap: it is said and left out, and ``shares`` carries every other exam kind's two shares,
    the exam's over what training can reach (the evidence a repair aims at).  ``domain`` None: names are kinds."""
    kinds = task_kinds(domain)
    train = mix_shares([(str(t.get("name")), float(t.get("weight", 1.0))) for t in train_tasks
                         if isinstance(t, dict)], kinds, "train")
    exam = mix_shares([(str(getattr(s, "name", "")), float(getattr(s, "weight", 1.0))) for s in exam_specs],
                       kinds, "heldout")
    reach = None if domain is None else {k for n in getattr(domain, "task_names", ()) for k in kinds(n, "train")}
    beyond = {k: e for k, e in exam.items() if reach is not None and k not in reach}
    within = sum(e for k, e in exam.items() if k not in beyond)
    both = {k: {"train": round(train.get(k, 0.0), 4), "exam": round(e / within, 4)} for k, e in sorted(exam.items())
            if k not in beyond}
    under = {k: v for k, v in both.items() if v["train"] < MIX_FLOOR * v["exam"]}
    rate = round(sum(exam[k] for k in under), 4)
    if not train or not both:
        return {"name": "task_mix", "passed": True, "detail": "main's or the exam's task mix is unknown"}, None
    untrainable = ("; " + ", ".join(f"{k} ({e:.3f} of the exam)" for k, e in sorted(beyond.items()))
                   + " has no training task: no mix can train it") if beyond else ""
    low = ", ".join(f"{k} trained {v['train']:.3f} of the mix, {v['exam']:.3f} of the exam" for k, v in under.items())
    detail = (f"{low} (each kind at least {MIX_FLOOR} of its exam share)" if under else
              f"every exam task kind trained at least {MIX_FLOOR} of its exam share") + untrainable
    check = {"name": "task_mix", "passed": not under, "detail": detail}
    if not under:
        return check, None
    return check, {"name": PREFIX + "task_mix", "source": SOURCE, "severity": SEVERITY["task_mix"], "rate": rate,
                   "message": f"main fails the gate's task_mix check: {detail}"[:400], "shares": both,
                   "examples": [{"task": k, **v} for k, v in list(under.items())[:EXAMPLES]]}


def _spread_groups(s: Scored, sample: Sample, t: GateThresholds) -> np.ndarray:
    _, spreads, _ = failure_spread_parts(s.norm, sample.verified, s.keep, sample.group, sample.n_groups)
    return np.flatnonzero(spreads)


def prompt_checks_on_main(rows: list[dict], rendered: list[Rendered], leaks_answer: Callable[[str, dict], bool],
                          max_prompt_length: int) -> tuple[list[dict], list[dict]]:
    """The gate's prompt checks on main's rendered prompts (aligned with ``rows``), against prompts that render
    nothing: any render error, any prompt over the budget, any prompt that shows its gold answer."""
    truths = [r.get("ground_truth") for r in rows]
    truths = [json.loads(g) if isinstance(g, str) else (g or {}) for g in truths]
    questions = questions_of(rows)  # a question holding its own gold is no leak of the template (as in the gate)
    checks = prompt_checks([[] for _ in rendered], rendered, truths, leaks_answer, max_prompt_length, questions)
    where = {"prompt_render": np.array([isinstance(r, str) for r in rendered]),
             "prompt_length": np.array([not isinstance(r, str) and estimate_tokens(r) > max_prompt_length
                                        for r in rendered]),
             "prompt_leak": np.array(leak_mask(rendered, truths, leaks_answer, questions))}
    findings = [_finding(c, where[c["name"]].mean(), rows, where[c["name"]]) for c in checks if not c["passed"]]
    return checks, findings


def judge_main(rows: list[dict], reward_range: tuple[float, float], t: GateThresholds | None = None, *,
               format_credit: float = 0.0, rendered: list[Rendered] | None = None,
               leaks_answer: Callable[[str, dict], bool] | None = None,
               max_prompt_length: int | None = None) -> list[dict]:
    """The findings of every gate check main fails this round (digest failure-mode entries, ``main:<check>``)."""
    _, findings = checks_on_main(rows, reward_range, t or GateThresholds(), format_credit)
    if rendered is not None and leaks_answer is not None and max_prompt_length is not None:
        findings += prompt_checks_on_main(rows, rendered, leaks_answer, max_prompt_length)[1]
    return findings


def probe_main(repo: Any, commit: str, rows: list[dict], domain: Any, sandbox: Any, settings: Any,
               max_error_rate: float = 0.01, seed: int | None = None) -> tuple[list[dict], list[dict]]:
    """The probe's checks on main's harness at ``commit`` (as the gate probes a candidate: a session shaped like
    training on fresh tasks of main's own mix, about three quarters answered by ``rows``' groups re-targeted), and
    the findings of those main fails (``main:probe_failure_pay`` ...; examples: the paid failures)."""
    from harness_repo.contract import HarnessConfig
    from meta_agent.judge.diagnose_sessions import sandbox_limits
    from meta_agent.judge.probe import ProbeContext, probe_commit

    config = HarnessConfig.model_validate(yaml.safe_load(repo.read_file(commit, "harness.yaml")))
    report = probe_commit(repo, commit, sandbox, sandbox_limits(settings), settings.timeout_s, domain, config,
                          ProbeContext.of(rows), max_error_rate=max_error_rate, seed=seed)
    paid, failures = sum(report.paid_failures.values()), sum(report.failures.values())
    findings = []
    for check in report.checks:
        name = str(check.get("name"))
        if check.get("passed") or name not in SEVERITY:
            continue
        rate = paid / failures if name == "probe_failure_pay" and failures else 1.0
        findings.append({"name": PREFIX + name, "source": SOURCE, "severity": SEVERITY[name], "rate": float(rate),
                         "message": f"main fails the probe's {name} check: {check.get('detail')}"[:400],
                         "examples": [{"traj_id": f"probe-{i}", "prompt": "", "response": str(e.get("response")),
                                       "reward": e.get("reward"), "verified": 0.0}
                                      for i, e in enumerate(report.examples[:EXAMPLES])]})
    return report.checks, findings


def add_main_findings(digest: dict, rows: list[dict], reward_range: tuple[float, float], **given: Any) -> None:
    """Judge main like a candidate: every gate check on main's own round; each it
    fails joins ``digest["failure_modes"]`` (``main:<check>``, errors first) and ``digest["main_checks"]`` keeps
    every check's outcome.  ``given``: ``thresholds``, ``format_credit``, ``probe`` (``run_main_probe``'s record),
    for the prompt checks ``rendered``, ``leaks_answer``, ``max_prompt_length``, and for the task mix
    ``train_tasks`` (main's harness.yaml ``tasks``) with ``exam_specs`` (the domain's ``eval_specs``) and
    ``slice_rows`` (the rows the dead-slice check pools, default ``rows``), the names resolved by ``domain``
    (default: the digest's ``domain`` by name); for whether the round moved the policy (``meta_agent.stall_checks``)
    ``exam`` (this round's exam rows), ``exam_before`` (the exam rows of the round it trained from, or round 0's
    ``base_outcomes``), ``knobs`` (main's ``grpo``) and ``metrics`` (the trainer's)."""
    checks, found = checks_on_main(rows, reward_range, given.get("thresholds") or GateThresholds(),
                                   given.get("format_credit", 0.0))
    if given.get("rendered") is not None and given.get("leaks_answer") and given.get("max_prompt_length"):
        more = prompt_checks_on_main(rows, given["rendered"], given["leaks_answer"], given["max_prompt_length"])
        checks, found = checks + more[0], found + more[1]
    if given.get("train_tasks") is not None and given.get("exam_specs") is not None:
        domain = given.get("domain") or (get_domain(str(digest["domain"])) if digest.get("domain") else None)
        mix, finding = task_mix_check(given["train_tasks"], given["exam_specs"], domain)
        checks, found = checks + [mix], found + ([finding] if finding else [])
        shown = shown_answer_checks(rows, given["train_tasks"], given["exam_specs"], domain)  # example_shown
        checks, found = checks + shown[0], found + shown[1]
        pooled = given.get("slice_rows")  # earlier rounds of main's lineage and a census (``slice_census``), or none
        dead, finding = slice_check(rows if pooled is None else pooled, given["train_tasks"], given["exam_specs"],
                                    task_kinds(domain))  # k38
        checks, found = checks + [dead], found + ([finding] if finding else [])
    examples = example_checks_on_main(rows)  # main's rendered prompts: worked examples' arithmetic, answer order
    checks, found = checks + examples[0], found + examples[1]
    shots = example_format_checks(rows)  # does each example's reply end on the line the verifier reads? (e1)
    checks, found = checks + shots[0], found + shots[1]
    questions = question_checks(rows)  # does each rendered prompt hold its task's question whole?
    checks, found = checks + questions[0], found + questions[1]
    cue = answer_cue_checks(rows)  # do the replies write the line the verifier reads, or does a cue hold it?
    checks, found = checks + cue[0], found + cue[1]
    seen = trainer_prompt_checks(rows, given.get("train_tasks"), given.get("knobs"), given.get("domain") or (  # r3
        get_domain(str(digest["domain"])) if digest.get("domain") else None))  # kinds dropped for length, markup
    checks, found = checks + seen[0], found + seen[1]
    if given.get("exam") is not None and given.get("exam_before") is not None:  # did the round move the policy?
        stalled, finding = stall_check(exam_movement(given["exam"], given["exam_before"]), given.get("knobs") or {},
                                       given.get("metrics") or [])
        checks, found = checks + [stalled], found + ([finding] if finding else [])
    if "update" in given:  # did the round's update size fit the run? (update_checks: the trainer's policy shift)
        sized, finding = update_check(given["update"], given.get("knobs") or {})
        checks, found = checks + [sized], found + ([finding] if finding else [])
    if given.get("knobs") is not None:  # the step's shape and the budget against the round and the exam (a3)
        more = knob_checks(rows, given["knobs"], given.get("exam_max_tokens"), given.get("exam") or [])
        checks, found = checks + more[0], found + more[1]
    probe = given.get("probe") or {}  # the diagnose phase's probe of main (``run_main_probe``), where it ran
    checks, found = checks + list(probe.get("checks") or []), found + list(probe.get("findings") or [])
    if probe.get("error"):
        checks.append({"name": "probe", "passed": True, "detail": probe["error"]})  # not run: no finding, said
    digest["main_checks"] = {c["name"]: {"passed": bool(c["passed"]), "detail": c["detail"]} for c in checks}
    rank = {s: i for i, s in enumerate(reversed(SEVERITIES))}  # error first, as _failure_modes orders them
    modes = [m for m in digest.get("failure_modes") or [] if not str(m.get("name")).startswith("main:")] + found
    digest["failure_modes"] = sorted(modes, key=lambda m: (rank.get(m["severity"], 99), -m["rate"], m["name"]))


MAIN_PROBE_FILE = "main_probe.json"


def run_main_probe(repo: Any, commit: str, rows: list[dict], domain: Any, sandbox: Any, settings: Any,
                   seed: int | None) -> dict:
    """:func:`probe_main` as the loop's diagnose phase saves it (``MAIN_PROBE_FILE``): its checks and findings, or
    why it did not run.  A probe that could not run (the engine, a container) names no flaw of main's: the digest
    says it was not run, and the round goes on."""
    try:
        checks, findings = probe_main(repo, commit, rows, domain, sandbox, settings, seed=seed)
    except Exception as exc:  # noqa: BLE001 - any failure here is recorded, never blamed on main's harness
        LOG.warning("the probe of main did not run: %s", exc)
        return {"error": f"the probe of main's harness did not run: {type(exc).__name__}: {exc}"[:400]}
    return {"checks": checks, "findings": findings}


REFUSAL_HEADROOM = 1.5
"""A budget fitted to the rendered prompts leaves this much room over the longest one measured: the next round
draws other tasks, and a round measures few (twice the prompts it trains); a prompt budget costs nothing a prompt
does not use, while a prompt over it costs its task."""


def refusal_finding(measured: dict) -> dict:
    """Training refused main: a limit the trainer enforces (``HarnessCodeError.measured``: the knob, its limit and
    what was measured against it, here rendered prompts by the real tokenizer) is a ``main:<check>`` finding with
    the share over the limit as its rate, the longest prompts as examples and the distribution the repair aims at
    (``evidence``: the limit, the lengths' median, 90th percentile and maximum, a ``target`` over the longest)."""
    lengths = sorted(int(x) for x in measured.get("lengths") or [])
    limit, knob = int(measured["limit"]), str(measured["knob"])
    over = [x for x in lengths if x > limit]
    rate = len(over) / len(lengths) if lengths else 1.0
    longest = lengths[-1] if lengths else None
    q = (lambda p: lengths[min(len(lengths) - 1, int(p * len(lengths)))]) if lengths else (lambda p: None)
    target = None if longest is None else -(-int(longest * REFUSAL_HEADROOM) // 16) * 16  # up to a multiple of 16
    name = str(measured.get("check") or knob)
    return {"name": PREFIX + name, "source": SOURCE, "severity": "error", "rate": float(rate),
            "message": (f"training refused main: {len(over)} of {len(lengths)} rendered prompts are longer than "
                        f"{knob}={limit} tokens (median {q(0.5)}, 90th percentile {q(0.9)}, longest {longest}; "
                        f"the trainer needs {measured.get('needed')} that fit)")[:400],
            "examples": [{"traj_id": f"refused-{i}", "prompt": e.get("prompt", ""), "response": "",
                          "reward": None, "verified": None, "tokens": e.get("tokens")}
                         for i, e in enumerate(measured.get("examples") or [])][:EXAMPLES],
            "evidence": {"knob": knob, "limit": limit, "lengths": lengths, "needed": measured.get("needed"),
                         "median": q(0.5), "p90": q(0.9), "longest": longest, "target": target,
                         "measured_by": "the trainer, with the real tokenizer and chat template"}}
