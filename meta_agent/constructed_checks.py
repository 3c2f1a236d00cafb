"""Main's filters and diagnostics on constructed batches: the batches a round did not happen to produce.

The digest judges main's filters and diagnostics on the round's own outputs (``main_checks``), which an untrained
policy makes narrow: it rarely answers right, never writes two answers alike, and some of it is always cut off.  A
group filter that drops the groups a learning policy writes (two members alike, most of them right) or a diagnostic
that crashes on a batch with nothing truncated passes every check until the policy learns, then costs a round.
So each digest hands main's harness (its reward and filters in one sandboxed session, its diagnostics in sessions
that hold only them, one a batch, as the diagnose phase runs them: a reward too slow to score on a loaded machine
leaves the diagnostics judged on the verifier's verdicts) a few plausible batches built from the round's archived
responses (:func:`build_groups`): groups mixing right and wrong answers (distinct; two right alike; two wrong alike;
mostly right; mostly wrong; with an empty or a cut-off member) and batches for the diagnostics (half flat and half
cut off, none truncated, all truncated, all right, all wrong, empty answers, one group, a member the reward could
not score).  In math, where an untrained round writes neither a worked answer nor a formatted wrong one, two more
groups and a batch come from forms the trusted side knows (``constructed_answers.worked_answers``): the question's
arithmetic worked to a value that the ``Answer:`` line restates (``3 + 4 = 7`` / ``Answer: 7``), right and wrong,
every one formatted; the filters must keep those groups' contrast, and a format diagnostic must report no failure on
their batch.

- ``main:constructed_signal_dropped`` (error): of the constructed groups whose rewards (main's own reward) differ,
  the share whose contrast main's filters removed (fewer than two members kept, or the kept ones all paid alike).
  A group main's reward leaves flat is the reward's finding, not the filters'.
- ``main:diagnostic_crashed`` (error): the share of the diagnostics' batches on which one of main's diagnostics
  crashed or answered a malformed finding (the runtime's ``<stem>:crashed``, ``diagnostics:malformed``).
- ``main:diagnostic_disagrees`` (``meta_agent.diagnostic_checks``): a diagnostic reports a mode the trusted digest
  measures (flat groups, truncation, no final answer) at a rate the digest does not measure on the same batch, here
  or on the round's own.
- ``main:diagnostic_examples`` (``meta_agent.diagnostic_examples``): a diagnostic names as examples of such a mode rows
  that are not of it (or states a count of it outside the trusted band), here or on the round's own.

The same call measures the prompts of each kind of main's mix as main's templates render them in a sandboxed
session (``markup_checks.rendered_length_check``): its ``main:prompt_length`` replaces the archive-re-filled one.

Right answers come from the round where it has them; in math, where an untrained round has none, a real response
with the gold's ``Answer:`` line appended, kept only where the verifier accepts it.  Every member's verdict is the
verifier's (archived, or on the host for a constructed math answer).  Where the round gives no right or no wrong
answer to build from, the filter check says it was not measured.

    record = run_constructed_checks(repo, commit, rows, MathDomain(), sandbox, BacktestSettings())
    add_constructed_findings(digest, record)   # its findings join the digest's failure modes, errors first
"""

from __future__ import annotations

import json
import logging
import tempfile
import time
from pathlib import Path
from typing import Any

import yaml
from harness_repo.contract import SEVERITIES
from meta_agent.diagnostic_checks import (NAME as DISAGREES, compared_count, disagree_finding,
                                          disagreements, round_bands, round_disagreements, trusted_rates)
from meta_agent.diagnostic_examples import NAME as EXAMPLES_NAME
from meta_agent.diagnostic_examples import examples_finding, instances, with_round, wrong_examples
from meta_agent.constructed_answers import pools, restates, worked_answers
from meta_agent.digest_rows import example, is_zero_variance
from meta_agent.judge.diagnose_sessions import open_diagnose_session, sandbox_limits
from meta_agent.markup_checks import BUDGET_MODE, rendered_length_check
from meta_agent.slice_checks import kind_of
from sandboxes.harness_client import HarnessSession, trajectory_view

LOG = logging.getLogger(__name__)
PREFIX, SOURCE = "main:", "constructed_checks"
EXAMPLES = 4
SIGNAL, CRASH = "constructed_signal_dropped", "diagnostic_crashed"
MIXED_KINDS = ("mixed", "twin_right", "twin_wrong", "mostly_right", "mostly_wrong", "empty_member", "cut_member",
               "worked", "worked_wrong", "worked_restated", "worked_bare")
"""Constructed groups whose members' verdicts differ: each carries GRPO signal under a reward that pays the right
ones (the worked kinds only in math, :func:`worked_answers`).  The worked forms come mixed (``worked``,
``worked_wrong``) and each alone: every member working the question's expression (``worked_restated``), every one
giving the value alone (``worked_bare``), since a filter keyed on either form keeps a mixed group's contrast through
the other (held-out r2 "no-echo": a filter dropping each reply that restates the question's expression)."""
CRASH_NAMES = (":crashed", "diagnostics:malformed")


def build_groups(rows: list[dict], domain: Any) -> list[tuple[str, list[dict]]]:
    """Constructed groups (kind, archive-shaped rows), on the round's first task that gives two right and two
    wrong answers to build from, and the worked ones (``<worked kind>@<task kind>``) on the first task of each other
    kind the round trains: a filter that drops only one kind's answers (a sign its arithmetic writes) loses their
    contrast too; [] when no task gives two right and two wrong answers."""
    tasks: dict[str, list[dict]] = {}
    for r in rows:
        if r.get("split", "train") == "train" and r.get("prompt") and r.get("response") is not None:
            tasks.setdefault(str(r.get("group_id")), []).append(r)
    for task in tasks.values():
        right, wrong = pools(rows, domain, task)
        if len(right) >= 2 and len(wrong) >= 2:
            break
    else:
        return []
    r1, r2, w1, w2 = right[0], right[1], wrong[0], wrong[1]
    w3 = wrong[2] if len(wrong) > 2 else w1
    shapes = {"mixed": [r1, w1, r2, w2], "twin_right": [r1, r1, w1, w2], "twin_wrong": [r1, w1, w1, w2],
              "mostly_right": [r1, r2, r1, w1], "mostly_wrong": [r1, w1, w2, w3], "empty_member": [r1, w1, "", r2],
              "cut_member": [r1, w1, w2, r2], "all_right": [r1, r2, r1, r2], "all_wrong": [w1, w2, w3, w1]}
    worked, worked_right = _worked_shapes(task[0], domain)
    groups = _groups(shapes | worked, task[0], right + worked_right, "")
    seen = {kind_of(task[0])}
    for other in tasks.values():
        if kind_of(other[0]) not in seen:
            seen.add(kind_of(other[0]))
            worked, worked_right = _worked_shapes(other[0], domain)
            groups += _groups(worked, other[0], worked_right, f"@{kind_of(other[0])}")
    return groups


def _worked_shapes(row: dict, domain: Any) -> tuple[dict[str, list[str]], list[str]]:
    """The worked groups' answers to ``row``'s task (math: :func:`worked_answers`) and its right ones."""
    worked_right, worked_wrong = worked_answers(row, domain)
    if not worked_right or len(worked_wrong) < 3:  # every member formatted, its result restated on the Answer: line
        return {}, []
    a, b, (x, y, z) = worked_right[0], worked_right[-1], worked_wrong[:3]
    shapes = {"worked": [a, x, b, y], "worked_wrong": [b, x, y, z]}
    for kind, form in (("worked_restated", True), ("worked_bare", False)):
        r_form = [t for t in worked_right if restates(t) == form]
        w_form = [t for t in worked_wrong if restates(t) == form]
        if r_form and len(w_form) >= 2 and len(r_form) + len(w_form) < len(worked_right) + len(worked_wrong):
            shapes[kind] = [r_form[0], w_form[0], r_form[0], w_form[1]]
    return shapes, worked_right


def _groups(shapes: dict[str, list[str]], row: dict, right: list[str], suffix: str) -> list[tuple[str, list[dict]]]:
    """Archive-shaped members of ``row``'s task for each shape, kind names ending in ``suffix``."""
    groups = []
    for shape, texts in shapes.items():
        kind, members = shape + suffix, []
        for k, text in enumerate(texts):
            cut = shape == "cut_member" and k == 1
            members.append(dict(row, traj_id=f"constructed-{kind}-{k}", group_id=f"constructed-{kind}",
                                sample_idx=k, response=text, verified=1.0 if text in right else 0.0,
                                response_tokens=len(text.split()), truncated=cut,
                                finish_reason="length" if cut else "stop", reward=None, kept=None))
        groups.append((kind, members))
    return groups


def _diagnose_batches(groups: dict[str, list[dict]]) -> dict[str, list[dict]]:
    """Batches for the diagnostics: the constructed groups as one batch none of which (or all of which) was cut
    off, one whose empty and cut answers all come first, all-right and all-wrong groups alone, empty answers, one
    group, one group with a member the reward could not score (its reward None, as a reward error reaches the
    diagnose phase)."""
    every = [dict(r, truncated=False, finish_reason="stop") for kind in MIXED_KINDS if kind in groups
             for r in groups[kind]]
    # half the groups flat, half the answers cut off: a rate scaled wrong (a percentage, a wrong count) shows here
    half = [dict(r, truncated=cut, finish_reason="length" if cut else "stop")
            for kind, cut in (("all_right", True), ("all_wrong", True), ("mixed", False), ("twin_right", False))
            for r in groups[kind]]
    # every failure at the batch's front: a diagnostic that reads part of the batch (its first or last rows) reports
    # another share than the whole batch's
    front = [dict(r, response="", response_tokens=0, truncated=True, finish_reason="length")
             for kind in ("all_wrong", "twin_wrong") for r in groups[kind]]
    front += [dict(r, truncated=False, finish_reason="stop") for kind in ("mixed", "twin_right", "mostly_right")
              for r in groups[kind]]
    # every answer formatted, most of them wrong (as a policy that has learnt the format answers): a format
    # diagnostic reports no failure here
    formatted = {"formatted_wrong": groups["worked"] + groups["worked_wrong"]} if "worked" in groups else {}
    return formatted | {"half_flat_half_cut": half, "failures_first": front, "clean": every,
            "all_truncated": [dict(r, truncated=True, finish_reason="length") for r in every],
            "all_right": groups["all_right"], "all_wrong": groups["all_wrong"],
            "empty_answers": [dict(r, response="", response_tokens=0) for r in groups["all_wrong"]],
            "one_group": groups["mixed"],
            "unscored_member": [dict(r, reward=None) if k == 1 else r for k, r in enumerate(groups["mixed"])]}


def _lost(members: list[dict]) -> bool | None:
    """Whether the filters removed the group's reward contrast; None when main's reward left it flat."""
    rewards = [r["reward"] for r in members if r["reward"] is not None]
    if len(rewards) < 2 or is_zero_variance(rewards):
        return None
    kept = [r["reward"] for r in members if r["kept"] and r["reward"] is not None]
    return len(kept) < 2 or is_zero_variance(kept)


def _signal_check(groups: dict[str, list[dict]]) -> tuple[dict, dict | None]:
    judged = {kind: _lost(members) for kind, members in groups.items() if kind.split("@")[0] in MIXED_KINDS}
    varying = [k for k, lost in judged.items() if lost is not None]
    lost = [k for k in varying if judged[k]]
    flat = [k for k, v in judged.items() if v is None]
    rate = len(lost) / len(varying) if varying else 0.0
    detail = (f"main's filters removed the reward contrast of {len(lost)} of {len(varying)} constructed groups "
              f"that mix right and wrong answers ({', '.join(lost) or 'none'})"
              + (f"; main's reward left {', '.join(flat)} flat (not the filters')" if flat else ""))
    check = {"name": SIGNAL, "passed": not lost, "detail": detail}
    if not lost:
        return check, None
    examples = [dict(example(r), kept=bool(r["kept"]), batch=k) for k in lost for r in groups[k]]
    return check, {"name": PREFIX + SIGNAL, "source": SOURCE, "severity": "error", "rate": rate,
                   "message": f"{detail}: a policy that learns writes such groups, and GRPO learns only from a "
                              "group whose kept rewards differ"[:400],
                   "examples": [e for e in examples if not e["kept"]][:EXAMPLES] + [e for e in examples
                                                                                   if e["kept"]][:EXAMPLES],
                   "evidence": {"groups": len(varying), "lost": len(lost), "kinds": lost}}


def _crash_check(answers: dict[str, list[dict]]) -> tuple[dict, dict | None]:
    crashed: dict[str, list[str]] = {}
    examples = []
    for batch, findings in answers.items():
        for f in findings:
            name = str(f.get("name"))
            if name.endswith(CRASH_NAMES[0]) or name == CRASH_NAMES[1]:
                stem = name.removesuffix(CRASH_NAMES[0]) if name.endswith(CRASH_NAMES[0]) else \
                    str(f.get("diagnostic") or name).removesuffix(".py")
                crashed.setdefault(stem, []).append(batch)
                examples.append({"batch": batch, "diagnostic": stem, "message": str(f.get("message"))[:200]})
    batches = sorted({b for bs in crashed.values() for b in bs})
    rate = len(batches) / len(answers) if answers else 0.0
    detail = (f"main's diagnostics crashed on {len(batches)} of {len(answers)} constructed batches: "
              + "; ".join(f"{stem} on {', '.join(bs)}" for stem, bs in sorted(crashed.items()))
              if crashed else f"main's diagnostics ran on all {len(answers)} constructed batches")
    check = {"name": CRASH, "passed": not crashed, "detail": detail}
    if not crashed:
        return check, None
    return check, {"name": PREFIX + CRASH, "source": SOURCE, "severity": "error", "rate": rate,
                   "message": f"{detail}: a round that produces such a batch gets a crash report in place of "
                              "the diagnostic's finding"[:400],
                   "examples": examples[:EXAMPLES], "evidence": {"crashed": crashed, "batches": len(answers)}}


def _reasons(domain: Any, rows: list[dict]) -> list[str | None]:
    """The verifier's reason per constructed row (math: cheap on the host); None per row in other domains, whose
    constructed rows carry their task's archived verdict only."""
    if getattr(domain, "name", None) != "math":
        return [None] * len(rows)
    return [str(domain.verify(r["data_source"], r.get("response") or "", json.loads(t) if isinstance(
        t := r.get("ground_truth"), str) else t)[1].get("reason")) for r in rows]


def _disagree_check(batches: dict[str, list[dict]], answers: dict[str, list[dict]], domain: Any
                    ) -> tuple[dict, dict | None]:
    items, compared = [], 0
    for name, rows in batches.items():
        trusted = trusted_rates(rows, _reasons(domain, rows))
        items += disagreements(name, answers[name], trusted)
        compared += compared_count(answers[name], trusted)
    finding = disagree_finding(items, compared, SOURCE)
    detail = (finding["message"] if finding else
              f"main's diagnostics agree with the trusted rates on every constructed batch ({compared} compared)")
    return {"name": DISAGREES, "passed": finding is None, "detail": detail}, finding


def _examples_check(batches: dict[str, list[dict]], answers: dict[str, list[dict]], domain: Any,
                    record: dict) -> tuple[dict, dict | None]:
    """``main:diagnostic_examples`` on the constructed batches (``meta_agent.diagnostic_examples``); its items and
    count go to ``record`` too, for the round's own to join (:func:`add_constructed_findings`)."""
    items, judged = [], 0
    for name, rows in batches.items():
        wrong, n = wrong_examples(name, answers[name], rows, _reasons(domain, rows))
        items, judged = items + wrong, judged + n
    record |= {"example_items": items, "example_judged": judged}
    finding = examples_finding(items, judged, SOURCE)
    detail = (finding["message"] if finding else
              f"main's diagnostics show examples of the modes they report on every constructed batch ({judged} "
              "judged)")
    return {"name": EXAMPLES_NAME, "passed": finding is None, "detail": detail}, finding


def run_constructed_checks(repo: Any, commit: str, rows: list[dict], domain: Any, sandbox: Any,
                           settings: Any) -> dict:
    """Main's harness at ``commit`` on the constructed batches, in sandboxed sessions (the reward's, one per
    diagnostics batch, the templates'): ``{"checks", "findings", "seconds"}``, or ``{"error"}`` when they failed
    (said in the digest, never blamed on main: the round's own checks see a harness that fails as a whole)."""
    started = time.monotonic()
    length, long = _length_check(repo, commit, rows, domain, sandbox, settings)  # kinds' prompts as main renders
    built = build_groups(rows, domain)
    if not built:
        why = "not measured: the round gives no task two right and two wrong answers to build groups from"
        return {"checks": [{"name": n, "passed": True, "detail": why} for n in (SIGNAL, CRASH, DISAGREES,
                                                                                 EXAMPLES_NAME)] + [length],
                "findings": [long] if long else [], "round_bands": round_bands(rows),
                "round_instances": _round_instances(rows), "seconds": round(time.monotonic() - started, 2)}
    groups = dict(built)
    unscored = _score(repo, commit, built, domain, sandbox, settings)
    batches = _diagnose_batches(groups)
    answers = _diagnose(repo, commit, batches, sandbox, settings)
    if unscored is not None and isinstance(answers, str):
        return {"error": f"{unscored}; {answers}"[:400], "round_bands": round_bands(rows),
                "round_instances": _round_instances(rows)}
    checks, findings, record = [], [], {"round_bands": round_bands(rows), "round_instances": _round_instances(rows)}
    results = [_signal_check(groups) if unscored is None else _not_measured(SIGNAL, unscored)]
    results += ([_crash_check(answers), _disagree_check(batches, answers, domain),
                 _examples_check(batches, answers, domain, record)] if isinstance(answers, dict)
                else [_not_measured(n, answers) for n in (CRASH, DISAGREES, EXAMPLES_NAME)])
    for check, finding in results + [(length, long)]:
        checks.append(check)
        findings += [finding] if finding else []
    return record | {"checks": checks, "findings": findings, "seconds": round(time.monotonic() - started, 2)}


def _round_instances(rows: list[dict]) -> dict:
    """Each mode's rows of the round's training batch (``diagnostic_examples.instances``)."""
    return instances([r for r in rows if r.get("split", "train") == "train"])


def _length_check(repo: Any, commit: str, rows: list[dict], domain: Any, sandbox: Any,
                  settings: Any) -> tuple[dict, dict | None]:
    """``markup_checks.rendered_length_check`` with main's templates at ``commit`` rendering in a sandboxed session
    of their own (opened only where the check can run); a session that fails is said, never blamed on main."""
    def render(items: list[dict]) -> list:
        with tempfile.TemporaryDirectory(prefix="kind-lengths-") as tmp:
            harness = repo.export(commit, Path(tmp) / "harness")
            with HarnessSession(sandbox, harness, limits=sandbox_limits(settings, [len(items)]),
                                request_timeout_s=settings.timeout_s) as session:
                return session.render(items)
    try:
        config = yaml.safe_load(repo.read_file(commit, "harness.yaml")) or {}
        check, finding = rendered_length_check(rows, config, domain, render)
    except Exception as exc:  # noqa: BLE001 - recorded, never blamed on main's harness
        LOG.warning("main's prompts of each kind did not render: %s", exc)
        return _not_measured("prompt_length", f"main's prompts of each kind did not render: "
                                              f"{type(exc).__name__}: {exc}")
    return check, (finding | {"source": SOURCE}) if finding else None


def _not_measured(name: str, why: str) -> tuple[dict, None]:
    return {"name": name, "passed": True, "detail": f"not measured: {why}"[:400]}, None


def _score(repo: Any, commit: str, built: list[tuple[str, list[dict]]], domain: Any, sandbox: Any,
           settings: Any) -> str | None:
    """Main's reward and keep on each constructed member, in place; None, or why not (then each member's reward is
    its verifier verdict, a reward the diagnostics can still be judged on, and its keep None)."""
    flat = [r for _, members in built for r in members]
    try:
        with tempfile.TemporaryDirectory(prefix="constructed-") as tmp:
            harness = repo.export(commit, Path(tmp) / "harness")
            with HarnessSession(sandbox, harness, limits=sandbox_limits(settings, [len(flat)]),
                                request_timeout_s=settings.timeout_s) as session:
                scored = session.score([trajectory_view(r) for r in flat], reward_range=domain.reward_range)
    except Exception as exc:  # noqa: BLE001 - any failure here is recorded, never blamed on main's harness
        LOG.warning("main's reward on the constructed groups did not run: %s", exc)
        for r in flat:
            r["reward"], r["kept"] = r["verified"], None
        return f"main's reward on constructed groups did not run: {type(exc).__name__}: {exc}"
    for r, s in zip(flat, scored):
        r["reward"], r["kept"] = (None if s.error else s.reward), bool(s.keep)
    return None


def _diagnose(repo: Any, commit: str, batches: dict[str, list[dict]], sandbox: Any,
              settings: Any) -> dict[str, list[dict]] | str:
    """Main's diagnostics on each batch, each in a session of its own that holds only its diagnostics and is sized
    for that one call (as the diagnose phase runs them, ``judge.diagnose_sessions``; a session sized for all the
    batches refuses each batch's call): batch -> findings, or why they did not run."""
    answers = {}
    for name, rows in batches.items():
        views = [trajectory_view(r) | {"reward": r["reward"], "keep": True} for r in rows]
        session, failure = open_diagnose_session(repo, commit, views, sandbox, settings)
        if session is None:
            return f"main's diagnostics on constructed batches did not start: {failure}"
        try:
            answers[name] = session.diagnose(views)
        except Exception as exc:  # noqa: BLE001 - recorded, never blamed on main's harness
            LOG.warning("main's diagnostics on the constructed batches did not run: %s", exc)
            return f"main's diagnostics on constructed batches did not run: {type(exc).__name__}: {exc}"
        finally:
            session.close()
    return answers


def add_constructed_findings(digest: dict, record: dict | None) -> None:
    """``record``'s findings join ``digest["failure_modes"]`` (errors first, as ``main_checks`` orders them) and
    its checks ``digest["main_checks"]``; a record that did not run is said there, naming nothing."""
    record = record or {"error": "the constructed checks were not run"}
    checks = record.get("checks") or [{"name": "constructed", "passed": True, "detail": record.get("error")}]
    main_checks = digest.setdefault("main_checks", {})
    rendered = any(c["name"] == "prompt_length" and not c["detail"].startswith("not ") for c in checks)
    for c in checks:
        if c["name"] != "prompt_length" or rendered or c["name"] not in main_checks:  # a re-filled length stays
            main_checks[c["name"]] = {"passed": bool(c["passed"]), "detail": c["detail"]}  # where none rendered
    if record.get("seconds") is not None:
        digest["constructed_seconds"] = record["seconds"]
    rank = {s: i for i, s in enumerate(reversed(SEVERITIES))}
    found = _with_round(digest, list(record.get("findings") or []), record.get("round_bands"))
    found = with_round(digest, found, record, SOURCE)  # the round's own examples (diagnostic_examples)
    modes = [m for m in digest.get("failure_modes") or [] if m.get("source") != SOURCE  # a rendered length
             and not (rendered and m.get("name") == BUDGET_MODE)] + found  # replaces the archive's re-filled one
    digest["failure_modes"] = sorted(modes, key=lambda m: (rank.get(m["severity"], 99), -m["rate"], m["name"]))


def _with_round(digest: dict, findings: list[dict], bands: dict | None) -> list[dict]:
    """``findings`` with the round's own disagreements (``diagnostic_checks.round_disagreements`` on the round's
    trusted ``bands``) joined to the constructed batches' ``main:diagnostic_disagrees`` (one finding, both in its
    evidence); the digest's ``main_checks`` entry says so."""
    items, compared = round_disagreements(digest, bands)
    old = next((f for f in findings if f["name"] == PREFIX + DISAGREES), None)
    if not items:
        return findings
    for name, e in ((old or {}).get("evidence") or {}).get("disagrees", {}).items():
        items += [{"batch": b, "finding": name, "mode": e["mode"], "diagnostic": e.get("diagnostic"),
                   "reported": r, "trusted": t, "split": False}
                  for b, (r, t) in zip(e["batches"], e["figures"])]
    merged = disagree_finding(items, compared + ((old or {}).get("evidence") or {}).get("compared", 0), SOURCE)
    if old is not None:
        merged["severity"] = "error" if "error" in (old["severity"], merged["severity"]) else merged["severity"]
    digest.setdefault("main_checks", {})[DISAGREES] = {"passed": False, "detail": merged["message"]}
    return [f for f in findings if f is not old] + [merged]
